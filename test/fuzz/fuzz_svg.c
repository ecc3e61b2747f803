/* libFuzzer target: the SVG renderer (svg.c over flametree.c).
 *
 * Input: 4 bytes of options, then folded text.
 *   byte 0: bit 0 inverted, bit 1 reverse, bit 2 a title, bit 3 a subtitle
 *           (both cut from the start of the text, so they can hold anything)
 *   bytes 1-2: width in pixels, little-endian (0: the default 1200)
 *   byte 3: minwidth in 1/16 px; 255 merges everything below 1e6 px
 *
 * The output is checked to be XML a browser will load: no NUL, only valid
 * UTF-8 and no control characters XML forbids, every tag closed in order,
 * attribute values quoted, every '&' an entity, one root element. Every
 * frame lies inside the image's margins, and the stats agree with each
 * other. A violation aborts. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/flamehtml.h"
#include "render/svg.h"

#define FUZZ_TARGET "fuzz_svg"
#include "fuzz.h"

/* Strict UTF-8 (no overlongs, surrogates, or code points past U+10FFFF),
 * and only the characters XML 1.0 allows. */
static void check_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
        FAIL("control byte 0x%02x at %zu", c, i);
      i++;
      continue;
    }
    size_t k;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07;
    else FAIL("invalid UTF-8 lead byte 0x%02x at %zu", c, i);
    if (n - i < k) FAIL("truncated UTF-8 at %zu", i);
    for (size_t j = 1; j < k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) FAIL("invalid UTF-8 continuation at %zu", i + j);
      cp = cp << 6 | (s[i + j] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
      FAIL("invalid code point U+%X at %zu", cp, i);
    i += k;
  }
}

static int name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == ':' || c == '-' || c == '.';
}

/* '&' must start an entity XML knows without a DTD. */
static size_t entity(const char *s, size_t n, size_t i) {
  static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
  for (size_t k = 0; k < 5; k++) {
    size_t l = strlen(named[k]);
    if (n - i >= l && memcmp(s + i, named[k], l) == 0) return l;
  }
  size_t j = i + 1;
  if (j < n && s[j] == '#') {
    j++;
    int hex = j < n && s[j] == 'x';
    if (hex) j++;
    size_t digits = 0;
    while (j < n && ((s[j] >= '0' && s[j] <= '9') ||
                     (hex && ((s[j] >= 'a' && s[j] <= 'f') || (s[j] >= 'A' && s[j] <= 'F')))))
      j++, digits++;
    if (digits && j < n && s[j] == ';') return j + 1 - i;
  }
  FAIL("bare '&' at %zu", i);
}

static const char *find(const char *s, size_t n, size_t from, const char *what) {
  const char *p = memmem(s + from, n - from, what, strlen(what));
  if (!p) FAIL("unterminated '%s' construct at %zu", what, from);
  return p;
}

static void check_xml(const char *s, size_t n) {
  enum { DEPTH = 64 };
  const char *open[DEPTH];
  size_t open_len[DEPTH];
  int depth = 0, roots = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] != '<') {
      if (depth == 0 && s[i] != '\n' && s[i] != ' ') FAIL("text outside the root at %zu", i);
      if (s[i] == '&') i += entity(s, n, i);
      else if (s[i] == '>' && i >= 2 && s[i - 1] == ']' && s[i - 2] == ']')
        FAIL("']]>' in text at %zu", i);
      else i++;
      continue;
    }
    if (n - i >= 2 && s[i + 1] == '?') {
      i = (size_t)(find(s, n, i, "?>") - s) + 2;
    } else if (n - i >= 9 && memcmp(s + i, "<![CDATA[", 9) == 0) {
      if (depth == 0) FAIL("CDATA outside the root");
      i = (size_t)(find(s, n, i + 9, "]]>") - s) + 3;
    } else if (n - i >= 4 && memcmp(s + i, "<!--", 4) == 0) {
      i = (size_t)(find(s, n, i + 4, "-->") - s) + 3;
    } else if (n - i >= 2 && s[i + 1] == '/') {
      size_t j = i + 2, start = j;
      while (j < n && name_char(s[j])) j++;
      if (j >= n || s[j] != '>') FAIL("bad closing tag at %zu", i);
      if (depth == 0) FAIL("closing tag with nothing open at %zu", i);
      depth--;
      if (open_len[depth] != j - start || memcmp(open[depth], s + start, j - start) != 0)
        FAIL("</%.*s> closes <%.*s> at %zu", (int)(j - start), s + start,
             (int)open_len[depth], open[depth], i);
      i = j + 1;
    } else {
      size_t j = i + 1, start = j;
      while (j < n && name_char(s[j])) j++;
      if (j == start) FAIL("bad tag at %zu", i);
      const char *name = s + start;
      size_t name_len = j - start;
      for (;;) {
        while (j < n && (s[j] == ' ' || s[j] == '\n')) j++;
        if (j >= n) FAIL("unterminated tag at %zu", i);
        if (s[j] == '>' || (s[j] == '/' && j + 1 < n && s[j + 1] == '>')) break;
        size_t a = j;
        while (j < n && name_char(s[j])) j++;
        if (j == a || j + 1 >= n || s[j] != '=' || (s[j + 1] != '"' && s[j + 1] != '\''))
          FAIL("bad attribute at %zu", a);
        char q = s[j + 1];
        j += 2;
        while (j < n && s[j] != q) {
          if (s[j] == '<') FAIL("'<' in an attribute at %zu", j);
          j += s[j] == '&' ? entity(s, n, j) : 1;
        }
        if (j >= n) FAIL("unterminated attribute at %zu", a);
        j++;
      }
      if (s[j] == '/') {
        j += 2;
        if (depth == 0) roots++;
      } else {
        if (depth == 0) roots++;
        if (depth == DEPTH) FAIL("elements nested too deep");
        open[depth] = name, open_len[depth] = name_len, depth++;
        j++;
      }
      i = j;
    }
  }
  if (depth != 0) FAIL("<%.*s> never closed", (int)open_len[depth - 1], open[depth - 1]);
  if (roots != 1) FAIL("%d root elements", roots);
}

/* Every frame's rectangle lies inside the image, between its margins. */
static void check_layout(const char *s, unsigned width) {
  for (const char *p = s; (p = strstr(p, "<rect x=\"")) != NULL;) {
    char *end;
    double x = strtod(p + 9, &end);
    const char *w_at = strstr(end, " width=\"");
    if (!w_at) FAIL("a frame without a width");
    double w = strtod(w_at + 8, &end);
    if (!(x >= 9.95) || !(w >= 0) || !(x + w <= width - 9.95 + 0.1))
      FAIL("frame at x=%.1f, width %.1f, in an image %u wide", x, w, width);
    p = end;
  }
}

static char *cut(const uint8_t *p, size_t n, size_t max) {
  if (n > max) n = max;
  char *s = malloc(n + 1);
  if (!s) abort();
  memcpy(s, p, n);
  s[n] = '\0'; /* a NUL inside the bytes ends the title early, as in C */
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  kf_svg_opts_t o = {0};
  o.inverted = data[0] & 1;
  o.reverse = (data[0] >> 1) & 1;
  o.cwd = (data[0] >> 2) & 1 ? "/app" : NULL; /* app-relative labels */
  o.width = (unsigned)data[1] | (unsigned)data[2] << 8;
  o.minwidth = data[3] == 255 ? 1e6 : data[3] / 16.0;
  const uint8_t *body = data + 4;
  size_t len = size - 4;
  char *title = data[0] & 4 ? cut(body, len, 80) : NULL;
  char *subtitle = data[0] & 8 ? cut(body, len, 40) : NULL;
  o.title = title;
  o.subtitle = subtitle;
  char *folded = malloc(len ? len : 1);
  if (!folded) abort();
  memcpy(folded, body, len);

  char *svg;
  size_t svg_len;
  kf_svg_stats_t st;
  if (kf_svg_render(folded, len, &o, &svg, &svg_len, &st) == 0) {
    if (svg[svg_len] != '\0' || strlen(svg) != svg_len) FAIL("NUL inside the SVG");
    check_utf8((const unsigned char *)svg, svg_len);
    check_xml(svg, svg_len);
    unsigned width = o.width ? o.width : 1200;
    check_layout(svg, width < KF_SVG_MIN_WIDTH ? KF_SVG_MIN_WIDTH : width);
    if (st.bad_lines > st.lines) FAIL("stats: bad_lines > lines");
    if (st.drawn < 1 || st.drawn > st.frames + 1) FAIL("stats: drawn %llu of %llu frames",
                                                        (unsigned long long)st.drawn,
                                                        (unsigned long long)st.frames);
    if (st.merged_samples > st.samples) FAIL("stats: merged more samples than there are");
    if (st.drawn + st.merged_frames > st.frames + 1) FAIL("stats: drawn + merged > frames");
    free(svg);
  }
  /* The HTML graph's data: valid UTF-8, nothing that could end <script>. */
  kf_svg_stats_t hst;
  if (kf_flamehtml_data(folded, len, &o, &svg, &svg_len, &hst) == 0) {
    if (svg[svg_len] != '\0' || strlen(svg) != svg_len) FAIL("NUL inside the HTML data");
    check_utf8((const unsigned char *)svg, svg_len);
    if (memchr(svg, '<', svg_len) || memchr(svg, '>', svg_len) || memchr(svg, '&', svg_len))
      FAIL("HTML data holds < > or &");
    if (hst.drawn != st.drawn && st.lines) FAIL("HTML data drew %llu frames, the SVG %llu",
                                                 (unsigned long long)hst.drawn, (unsigned long long)st.drawn);
    free(svg);
  }
  free(folded);
  free(title);
  free(subtitle);
  return 0;
}
