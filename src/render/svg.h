/*
 * svg: folded stacks rendered as a self-contained, interactive flame graph
 * (SVG with its own script: hover details, click to zoom, regex search with
 * the matched share, state kept in the URL). Pure; any thread.
 *
 * Frames are children of one <g id="frames"> (a browser lays out a flat
 * root in quadratic time); each carries its full name in a <title> and a
 * short label (src/render/framelabel.h) as text, omitted where it would not fit.
 *
 * Frames narrower than `minwidth` pixels are not drawn; their samples still
 * count in their parent's width, and how many frames and samples were
 * merged that way is reported. Names are escaped for XML, invalid UTF-8 is
 * replaced, and names longer than 1000 bytes are cut, so the output always
 * parses. Colours depend only on the frame's name and kind (JS own code,
 * node_modules, node: internals, V8 builtins, GC, C++, C, kernel), so equal
 * input gives byte-identical output.
 */
#ifndef KF_SVG_H
#define KF_SVG_H

#include <stddef.h>
#include <stdint.h>

#include "render/flametree.h"

/* The narrowest image: the margins, title and buttons need about this much
 * (lib/svg.js accepts no less). */
#define KF_SVG_MIN_WIDTH 100

/* Names longer than this are cut (at a character) and end in "...". */
#define KF_SVG_NAME_MAX_BYTES 1000

typedef struct kf_svg_opts {
  const char *title;    /* NULL: "Flame Graph" ("Icicle Graph" inverted) */
  const char *subtitle; /* NULL: none */
  unsigned width;       /* pixels; 0: 1200; below KF_SVG_MIN_WIDTH: that */
  double minwidth;      /* pixels; frames narrower are merged */
  int inverted;         /* icicle: roots at the top */
  int reverse;          /* stacks read leaf first */
  const char *cwd;      /* NULL: none; labels of the app's own JS files
                           are shown relative to it (src/render/framelabel.h) */
  int show_idle;        /* draw off-CPU "(idle)" stacks (hidden by default) */
} kf_svg_opts_t;

typedef struct kf_svg_stats {
  uint64_t lines, bad_lines;    /* input lines, and those skipped */
  uint64_t samples;             /* total of the counts */
  uint64_t frames, drawn;       /* distinct frames, and those drawn */
  uint64_t merged_frames, merged_samples; /* below minwidth */
  uint64_t idle_samples;        /* in "(idle)" stacks left out */
} kf_svg_stats_t;

/* Renders `len` bytes of folded text into a malloc'd SVG (*out, *out_len,
 * NUL-terminated). Returns 0 or -ENOMEM. */
int kf_svg_render(const char *folded, size_t len, const kf_svg_opts_t *opts,
                  char **out, size_t *out_len, kf_svg_stats_t *stats);

/* Shared with the HTML flame graph (src/render/flamehtml.c), so both draw
 * the same tree: folded[0..len) parsed as opts ask (reversed, "(idle)"
 * stacks hidden unless show_idle) into *t, *stats zeroed and given what
 * parsing counts. Returns 0 or -ENOMEM. */
int kf_svg_tree(const char *folded, size_t len, const kf_svg_opts_t *opts,
                kf_flametree_t *t, kf_svg_stats_t *stats);

/* Shared with the HTML flame graph (src/render/flamehtml.c), so both look alike:
 * a frame's colour (the kind picks the palette, a hash of the name the
 * shade), and the length of the valid UTF-8 sequence at s (1-4), or 0 when
 * invalid, overlong, a surrogate, or U+FFFE/U+FFFF. */
void kf_svg_colour(const kf_ftnode_t *f, unsigned char rgb[3]);

/* Whether name[0..len), the body of a _[j] or _[i] frame (its annotation
 * cut or not), is V8's own code rather than a JS function: one of the
 * prefixes of src/framekinds.json, the list lib/exports/frames.js reads. */
int kf_svg_v8_code(const char *name, size_t len);
size_t kf_svg_utf8_len(const unsigned char *s, size_t n);

#endif
