#define _GNU_SOURCE
#include "render/svg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/flametree.h"
#include "render/framelabel.h"
#include "util/grow.h"
#include "render/outbuf.h"
#include "render/svgscript.h"
#include "framekinds.json.h" /* generated: scripts/embed.js */
#include "util/hash.h"

#define PAD_X 10
#define FRAME_HEIGHT 16
#define FONT_SIZE 12
#define CHAR_WIDTH (FONT_SIZE * 0.59) /* Verdana's average, as the script */
#define NAME_MAX_BYTES KF_SVG_NAME_MAX_BYTES


static void printf_(kf_outbuf_t *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) b->failed = 1;
  else kf_outbuf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when invalid,
 * overlong, a surrogate, or U+FFFE/U+FFFF (not allowed in XML). */
size_t kf_svg_utf8_len(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t k;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) k = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    k = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    k = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < k || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  if (c == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF)) return 0;
  return k;
}

/* Characters (code points, invalid bytes counting one each). */
static size_t chars(const char *s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; count++) {
    size_t k = (unsigned char)s[i] < 0x80 ? 1 : kf_svg_utf8_len((const unsigned char *)s + i, n - i);
    i += k ? k : 1;
  }
  return count;
}

/* A byte that stands for itself in XML text and attributes. */
static int plain(unsigned char c) {
  return c >= 0x20 && c < 0x7f && c != '&' && c != '<' && c != '>' && c != '"' &&
         c != '\'';
}

/* Writes at most max_chars characters of s, escaped for XML text and
 * attributes; invalid UTF-8 and control characters become U+FFFD / '?'. */
static void put_escaped(kf_outbuf_t *b, const char *s, size_t n, size_t max_chars) {
  size_t done = 0;
  for (size_t i = 0; i < n && done < max_chars; done++) {
    unsigned char c = (unsigned char)s[i];
    if (plain(c)) { /* a run of characters that need nothing: one copy */
      size_t j = i + 1;
      while (j < n && j - i < max_chars - done && plain((unsigned char)s[j])) j++;
      kf_outbuf_put(b, s + i, j - i);
      done += j - i - 1;
      i = j;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '&': kf_outbuf_puts(b, "&amp;"); break;
        case '<': kf_outbuf_puts(b, "&lt;"); break;
        case '>': kf_outbuf_puts(b, "&gt;"); break;
        case '"': kf_outbuf_puts(b, "&quot;"); break;
        case '\'': kf_outbuf_puts(b, "&#39;"); break;
        default: kf_outbuf_put(b, c < 0x20 || c == 0x7f ? "?" : (const char *)s + i, 1);
      }
      i++;
      continue;
    }
    size_t k = kf_svg_utf8_len((const unsigned char *)s + i, n - i);
    if (k) kf_outbuf_put(b, s + i, k);
    else kf_outbuf_puts(b, "\xEF\xBF\xBD");
    i += k ? k : 1;
  }
}

/* A frame's name, cut to NAME_MAX_BYTES with "..." so huge names cannot
 * blow up the document. */
static void put_name(kf_outbuf_t *b, const kf_ftnode_t *f) {
  size_t n = f->name_len;
  if (n <= NAME_MAX_BYTES) {
    put_escaped(b, f->name, n, (size_t)-1);
    return;
  }
  size_t cut = NAME_MAX_BYTES;
  while (cut && ((unsigned char)f->name[cut] & 0xC0) == 0x80) cut--;
  put_escaped(b, f->name, cut, (size_t)-1);
  kf_outbuf_puts(b, "...");
}

/* --- colours ------------------------------------------------------------ */

typedef struct palette {
  unsigned char lo[3], hi[3];
} palette_t;

enum { ROOT, KERNEL, JS_OWN, JS_MODULES, JS_NODE, V8_CODE, GC, CPP, NATIVE, OFF_CPU, IDLE };
static const palette_t palettes[] = {
    [ROOT] = {{190, 190, 190}, {215, 215, 215}},
    [KERNEL] = {{225, 110, 0}, {255, 160, 40}},
    [JS_OWN] = {{50, 175, 50}, {110, 230, 110}},
    [JS_MODULES] = {{60, 125, 215}, {110, 170, 255}},
    [JS_NODE] = {{150, 205, 95}, {195, 240, 145}},
    [V8_CODE] = {{70, 185, 185}, {125, 230, 230}},
    [GC] = {{155, 105, 205}, {200, 150, 250}},
    [CPP] = {{205, 180, 40}, {240, 215, 85}},
    [NATIVE] = {{205, 80, 50}, {250, 150, 85}},
    /* Off-CPU frames in blue, as off-CPU flame graphs are drawn; deeper and
     * less green than node_modules' blue. Idle in grey-blue. */
    [OFF_CPU] = {{20, 40, 170}, {80, 110, 245}},
    [IDLE] = {{150, 160, 190}, {185, 195, 225}},
};

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static int starts_with(const char *s, size_t n, const char *prefix) {
  size_t k = strlen(prefix);
  return n >= k && memcmp(s, prefix, k) == 0;
}

static int contains(const char *s, size_t n, const char *needle) {
  return memmem(s, n, needle, strlen(needle)) != NULL;
}

/* src/render/framekinds.json: the one list, shared with lib/exports/frames.js */
static const char *const v8_code_prefixes[] = {KF_V8_CODE_PREFIXES};

int kf_svg_v8_code(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof v8_code_prefixes / sizeof v8_code_prefixes[0]; i++)
    if (starts_with(name, len, v8_code_prefixes[i])) return 1;
  return 0;
}

static int kind_of(const kf_ftnode_t *f) {
  const char *s = f->name;
  size_t n = f->name_len;
  if (f->depth <= 1) return ROOT; /* "all" and the thread roots */
  if (f->waiting) return f->waiting == 2 ? IDLE : OFF_CPU;
  if (ends_with(s, n, "_[k]")) return KERNEL;
  /* _[i]: a JS function inlined into its caller, coloured as JS */
  if (ends_with(s, n, "_[j]") || ends_with(s, n, "_[i]")) {
    if (kf_svg_v8_code(s, n)) return V8_CODE;
    if (contains(s, n, "node_modules/")) return JS_MODULES;
    if (contains(s, n, " node:")) return JS_NODE;
    return JS_OWN;
  }
  static const char *const gc[] = {"Heap::", "Scavenge", "MarkCompact", "Sweeper",
                                   "Evacuat", "GarbageCollect", "ConcurrentMarking"};
  for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++)
    if (contains(s, n, gc[i])) return GC;
  if (starts_with(s, n, "Builtins_")) return V8_CODE;
  if (contains(s, n, "::")) return CPP;
  return NATIVE;
}

/* Deterministic: the kind picks the palette, a hash of the name the shade. */
void kf_svg_colour(const kf_ftnode_t *f, unsigned char rgb[3]) {
  const palette_t *p = &palettes[kind_of(f)];
  uint64_t h = kf_fnv_bytes(KF_FNV_OFFSET, f->name, f->name_len);
  unsigned v = (unsigned)(h >> 56), w = (unsigned)(h >> 48) & 0xff;
  for (int c = 0; c < 3; c++) {
    unsigned span = (unsigned)(p->hi[c] - p->lo[c]);
    rgb[c] = (unsigned char)(p->lo[c] + span * (c == 1 ? w : v) / 255);
  }
}

/* --- layout and output -------------------------------------------------- */

typedef struct render {
  const kf_flametree_t *t;
  const kf_svg_opts_t *o;
  kf_outbuf_t *b;
  kf_svg_stats_t *st;
  double scale; /* pixels per sample */
  double minwidth;
  int height, bottom_pad;
  uint32_t drawn_depth;
  kf_outbuf_t label;     /* scratch: the label being drawn */
  uint32_t *stack; /* DFS */
  double *xs;
  size_t stack_cap, xs_cap;
} render_t;

static int frame_y(const render_t *r, uint32_t depth, int top) {
  return r->o->inverted ? top + (int)depth * FRAME_HEIGHT
                        : r->height - r->bottom_pad - ((int)depth + 1) * FRAME_HEIGHT;
}

/* The frame's label (src/render/framelabel.h) as drawn at width w, into r->label:
 * cut to what fits, with "..", or empty below 3 characters. Names over
 * NAME_MAX_BYTES show as in the title, cut with "...", unshortened (the
 * script, which reads the title, does the same). */
static size_t label_of(render_t *r, const kf_ftnode_t *f, double w, int *cut_dots) {
  long fit = (long)((w - 3) / CHAR_WIDTH);
  kf_outbuf_t *l = &r->label;
  l->len = 0;
  *cut_dots = 0;
  if (fit < 3) return 0;
  if (f->name_len > NAME_MAX_BYTES) {
    size_t cut = NAME_MAX_BYTES;
    while (cut && ((unsigned char)f->name[cut] & 0xC0) == 0x80) cut--;
    kf_outbuf_put(l, f->name, cut);
    kf_outbuf_puts(l, "...");
  } else {
    size_t head, tail, end;
    kf_framelabel(f->name, f->name_len, r->o->cwd, &head, &tail, &end);
    kf_outbuf_put(l, f->name, head);
    kf_outbuf_put(l, f->name + tail, end - tail);
  }
  if (l->failed || l->len == 0) return 0;
  if (chars(l->p, l->len) <= (size_t)fit) return (size_t)-1;
  *cut_dots = 1;
  return (size_t)fit - 2;
}

/* One frame: <g><title>full name (N samples, P%)</title><rect/><text/></g>.
 * A frame too narrow for a label has no <text> (the script adds one when a
 * zoom widens it): most frames of a big graph are that narrow. */
static void put_frame(render_t *r, const kf_ftnode_t *f, double x, double w,
                      int y) {
  kf_outbuf_t *b = r->b;
  unsigned char rgb[3];
  kf_svg_colour(f, rgb);
  double pct = r->t->nodes[0].total ? 100.0 * (double)f->total / (double)r->t->nodes[0].total : 0;
  kf_outbuf_puts(b, "<g><title>");
  put_name(b, f);
  printf_(b, " (%llu samples, %.2f%%)</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
             "height=\"%d\" fill=\"rgb(%u,%u,%u)\" rx=\"2\" ry=\"2\"/>",
          (unsigned long long)f->total, pct, x, y, w, FRAME_HEIGHT - 1, rgb[0], rgb[1], rgb[2]);
  int dots;
  size_t max_chars = label_of(r, f, w, &dots);
  if (r->label.failed) b->failed = 1;
  if (max_chars) {
    printf_(b, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + 10.5);
    put_escaped(b, r->label.p, r->label.len, max_chars);
    if (dots) kf_outbuf_puts(b, "..");
    kf_outbuf_puts(b, "</text>");
  }
  kf_outbuf_puts(b, "</g>\n");
}

/* First pass: how deep do drawn frames go (sets the image height). Second
 * pass: draw. Both walk the tree depth first without recursion. */
static int walk(render_t *r, int draw, int top) {
  const kf_flametree_t *t = r->t;
  size_t n = 0;
  if (kf_grow((void **)&r->stack, &r->stack_cap, 1, sizeof(*r->stack), 256) ||
      kf_grow((void **)&r->xs, &r->xs_cap, 1, sizeof(*r->xs), 256))
    return -ENOMEM;
  r->stack[n] = 0;
  r->xs[n++] = PAD_X;
  while (n) {
    uint32_t id = r->stack[--n];
    double x = r->xs[n];
    const kf_ftnode_t *f = &t->nodes[id];
    double w = (double)f->total * r->scale;
    if (draw) {
      put_frame(r, f, x, w, frame_y(r, f->depth, top));
      r->st->drawn++;
    } else if (f->depth > r->drawn_depth) {
      r->drawn_depth = f->depth;
    }
    /* Children are pushed left to right, then flipped so the leftmost is
     * popped first: frames come out in document order, left to right. */
    size_t first = n;
    double cx = x;
    for (uint32_t c = f->first_child; c; c = t->nodes[c].next_sibling) {
      const kf_ftnode_t *k = &t->nodes[c];
      double cw = (double)k->total * r->scale;
      if (cw >= r->minwidth) {
        if (kf_grow((void **)&r->stack, &r->stack_cap, n + 1, sizeof(*r->stack), 256) ||
            kf_grow((void **)&r->xs, &r->xs_cap, n + 1, sizeof(*r->xs), 256))
          return -ENOMEM;
        r->stack[n] = c;
        r->xs[n++] = cx;
      } else if (draw) {
        r->st->merged_frames++;
        r->st->merged_samples += k->total;
      }
      cx += cw;
    }
    for (size_t i = first, j = n ? n - 1 : 0; i < j; i++, j--) {
      uint32_t ts = r->stack[i];
      double tx = r->xs[i];
      r->stack[i] = r->stack[j], r->xs[i] = r->xs[j];
      r->stack[j] = ts, r->xs[j] = tx;
    }
  }
  return 0;
}

static void put_text(kf_outbuf_t *b, const char *id, const char *cls, double x,
                     double y, const char *text) {
  printf_(b, "<text id=\"%s\"%s%s%s x=\"%.1f\" y=\"%.1f\">", id, cls ? " class=\"" : "",
          cls ? cls : "", cls ? "\"" : "", x, y);
  put_escaped(b, text, strlen(text), (size_t)-1);
  kf_outbuf_puts(b, "</text>\n");
}

int kf_svg_tree(const char *folded, size_t len, const kf_svg_opts_t *o,
                kf_flametree_t *t, kf_svg_stats_t *st) {
  memset(st, 0, sizeof(*st));
  int rc = kf_flametree_parse_idle(t, folded, len, o->reverse, !o->show_idle);
  if (rc) return rc;
  st->lines = t->lines;
  st->bad_lines = t->bad_lines;
  st->idle_samples = t->hidden_samples;
  st->samples = t->nodes[0].total;
  st->frames = t->count - 1;
  return 0;
}

int kf_svg_render(const char *folded, size_t len, const kf_svg_opts_t *o,
                  char **out, size_t *out_len, kf_svg_stats_t *st) {
  *out = NULL;
  *out_len = 0;
  kf_flametree_t t;
  int rc = kf_svg_tree(folded, len, o, &t, st);
  if (rc) return rc;

  kf_outbuf_t b = {0};
  unsigned width = o->width ? o->width : 1200;
  /* Narrower than the margins, width - 2 * PAD_X wrapped around and drew
   * frames billions of pixels wide (found by fuzz_svg). */
  if (width < KF_SVG_MIN_WIDTH) width = KF_SVG_MIN_WIDTH;
  render_t r = {.t = &t, .o = o, .b = &b, .st = st, .minwidth = o->minwidth};
  r.scale = t.nodes[0].total ? (double)(width - 2 * PAD_X) / (double)t.nodes[0].total : 0;
  int top = o->subtitle ? 60 : 40;
  r.bottom_pad = 34;
  rc = walk(&r, 0, top);
  if (rc) goto out;
  r.height = top + ((int)r.drawn_depth + 1) * FRAME_HEIGHT + r.bottom_pad;

  const char *title = o->title ? o->title : o->inverted ? "Icicle Graph" : "Flame Graph";
  printf_(&b,
          "<?xml version=\"1.0\" standalone=\"no\"?>\n"
          "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
          "height=\"%d\" viewBox=\"0 0 %u %d\" data-inverted=\"%d\" data-cwd=\"",
          width, r.height, width, r.height, o->inverted ? 1 : 0);
  if (o->cwd) put_escaped(&b, o->cwd, strlen(o->cwd), (size_t)-1);
  kf_outbuf_puts(&b, "\">\n<style>");
  kf_outbuf_puts(&b, kf_svg_style);
  kf_outbuf_puts(&b, "</style>\n<script><![CDATA[\n");
  kf_outbuf_puts(&b, kf_svg_script);
  kf_outbuf_puts(&b, "]]></script>\n");
  printf_(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f8\"/>\n");
  /* Every frame inside one group: Chromium lays out thousands of children
   * of the root <svg> in time that grows with the square of their number
   * (a 37,875-frame graph took 33 s to open, 3.7 s once in a group). */
  kf_outbuf_puts(&b, "<g id=\"frames\">\n");
  rc = walk(&r, 1, top);
  if (rc) goto out;
  kf_outbuf_puts(&b, "</g>\n");
  /* After the frames, so drawn over them: the script moves these two with
   * the scroll of a graph taller than the window, to stay in view. */
  printf_(&b, "<g id=\"header\"><rect width=\"100%%\" height=\"%d\" fill=\"#f8f8f8\"/>\n", top - 6);
  put_text(&b, "title", NULL, width / 2.0, 24, title);
  if (o->subtitle) put_text(&b, "subtitle", NULL, width / 2.0, 42, o->subtitle);
  put_text(&b, "unzoom", "button hide", PAD_X, 24, "Reset Zoom");
  put_text(&b, "search", "button", width - PAD_X - 100, 24, "Search");
  kf_outbuf_puts(&b, "</g>\n");
  printf_(&b, "<g id=\"footer\"><rect y=\"%d\" width=\"100%%\" height=\"%d\" fill=\"#f8f8f8\"/>\n",
          r.height - r.bottom_pad + 2, r.bottom_pad - 2);
  put_text(&b, "details", NULL, PAD_X, r.height - 17, " ");
  put_text(&b, "matched", NULL, width - PAD_X, r.height - 17, " ");
  if (st->merged_frames) {
    char note[160];
    snprintf(note, sizeof note, "%llu frames (%llu samples) narrower than %.2f px merged into their parents",
             (unsigned long long)st->merged_frames, (unsigned long long)st->merged_samples, o->minwidth);
    put_text(&b, "merged", NULL, PAD_X, r.height - 3, note);
  }
  kf_outbuf_puts(&b, "</g>\n");
  kf_outbuf_puts(&b, "</svg>\n");
  if (b.failed) {
    rc = -ENOMEM;
    goto out;
  }
  *out = b.p;
  *out_len = b.len;
  b.p = NULL;
out:
  free(b.p);
  free(r.label.p);
  free(r.stack);
  free(r.xs);
  kf_flametree_free(&t);
  return rc;
}
