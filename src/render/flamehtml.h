/*
 * flamehtml: folded stacks as the compact data of the HTML flame graph
 * (lib/flame.html draws it on a canvas). Pure; any thread.
 *
 * The data is one JSON object, safe to put inside a <script> element as it
 * is: '<', '>' and '&' are written as \u003c \u003e \u0026 (a frame named
 * "</script>" cannot end the element), U+2028/U+2029 escaped, invalid UTF-8
 * replaced by U+FFFD, names over KF_SVG_NAME_MAX_BYTES cut with "...".
 *
 *   {"v":1,"title":"..","subtitle":"..","width":1200,"inverted":0,
 *    "total":884,"minwidth":0.1,"merged":[frames,samples],
 *    "names":[["full name","rrggbb","label"],...],
 *    "frames":[depth,name,total,gap, ...]}
 *
 * Each distinct (name, colour) is one entry of "names": the colour is the
 * SVG's (src/render/svg.h), the label src/render/framelabel.h's, left out when it is the
 * name. "frames" holds four integers per frame in depth-first order,
 * children left to right: its depth (the root "all" is 0), its entry in
 * "names", its samples, and the samples of narrower siblings left out
 * (below minwidth pixels) between it and the previous sibling, so a
 * reader places each frame by summing.
 */
#ifndef KF_FLAMEHTML_H
#define KF_FLAMEHTML_H

#include <stddef.h>

#include "render/svg.h"

/* Options and stats are the SVG's (title NULL: "Flame Graph"). Returns 0 or
 * -ENOMEM; *out is malloc'd and NUL-terminated. */
int kf_flamehtml_data(const char *folded, size_t len, const kf_svg_opts_t *opts,
                      char **out, size_t *out_len, kf_svg_stats_t *stats);

#endif
