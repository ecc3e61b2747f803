/*
 * framelabel: the short label a flame graph draws on a frame, from its full
 * name. Display only: tooltips, search and the folded text keep the name.
 * Pure; any thread.
 *
 *   "parseExprAtom /srv/app/node_modules/acorn/dist/acorn.js:3066:32_[j]"
 *                      -> "parseExprAtom acorn/dist/acorn.js:3066"
 *   "run /srv/app/src/work.js:17:14_[j]", cwd "/srv/app"
 *                      -> "run src/work.js:17"
 *   "listOnTimeout node:internal/timers:500:7_[j]"
 *                      -> "listOnTimeout node:internal/timers:500"
 *   "do_syscall_64_[k]" -> "do_syscall_64"
 *
 * The rule: FlameGraph's annotation (_[k] _[j] _[i] _[w]) is dropped; a JS
 * frame's location (the last space-separated word, "path:line:column" or
 * "path:line") loses its column, a "file://" prefix, everything up to the
 * last "node_modules/" (the package's own path), or else the working
 * directory `cwd` and its slash. Any other name is kept whole. The SVG's
 * script has the same rule in JS (src/render/svgscript.c) for labels redrawn on
 * zoom; the browser tests check the two agree.
 */
#ifndef KF_FRAMELABEL_H
#define KF_FRAMELABEL_H

#include <stddef.h>

/* The label of name[0..len) as up to three slices of it (a name, a " ",
 * a shortened location): label = name[0..*head) + name[*tail..*end).
 * When nothing is cut, *head == *end and *tail == *end. `cwd` may be NULL
 * or "" (no app-relative paths). */
void kf_framelabel(const char *name, size_t len, const char *cwd, size_t *head,
                   size_t *tail, size_t *end);

#endif
