#include "render/flamehtml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/flametree.h"
#include "render/framelabel.h"
#include "util/grow.h"
#include "render/outbuf.h"
#include "util/hash.h"

#define PAD_X 10 /* as the SVG: the same frames are left out */


static void put_u64(kf_outbuf_t *b, unsigned long long v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%llu", v);
  kf_outbuf_put(b, tmp, (size_t)n);
}

/* A JSON string that is also safe inside <script> (see the header). */
static void put_json(kf_outbuf_t *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  kf_outbuf_put(b, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
      size_t j = i + 1;
      while (j < n && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] < 0x7f && s[j] != '"' &&
             s[j] != '\\' && s[j] != '<' && s[j] != '>' && s[j] != '&')
        j++;
      kf_outbuf_put(b, s + i, j - i);
      i = j;
      continue;
    }
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      kf_outbuf_put(b, e, 2);
      i++;
      continue;
    }
    if (c < 0x80) { /* control characters, DEL, < > & */
      char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      kf_outbuf_put(b, e, 6);
      i++;
      continue;
    }
    size_t k = kf_svg_utf8_len((const unsigned char *)s + i, n - i);
    if (k == 3 && c == 0xE2 && (unsigned char)s[i + 1] == 0x80 &&
        ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9)) {
      kf_outbuf_puts(b, (unsigned char)s[i + 2] == 0xA8 ? "\\u2028" : "\\u2029");
    } else if (k) {
      kf_outbuf_put(b, s + i, k);
    } else {
      kf_outbuf_puts(b, "\\ufffd");
    }
    i += k ? k : 1;
  }
  kf_outbuf_put(b, "\"", 1);
}

/* --- the names table: (name, colour) -> entry, open addressing ---------- */

typedef struct entry {
  const kf_ftnode_t *f; /* the first frame with this name and colour */
  unsigned char rgb[3];
  uint32_t index;
} entry_t;

typedef struct table {
  entry_t *slots;
  size_t cap; /* a power of two */
  uint32_t count;
} table_t;

static uint64_t hash_of(const kf_ftnode_t *f, const unsigned char rgb[3]) {
  return kf_fnv_bytes(kf_fnv_bytes(KF_FNV_OFFSET, f->name, f->name_len), rgb, 3);
}

/* The entry of f: found, or added (*added set). -1 when out of memory. */
static long entry_of(table_t *t, const kf_ftnode_t *f, const unsigned char rgb[3], int *added) {
  *added = 0;
  size_t mask = t->cap - 1;
  for (size_t i = hash_of(f, rgb) & mask;; i = (i + 1) & mask) {
    entry_t *e = &t->slots[i];
    if (!e->f) {
      e->f = f;
      memcpy(e->rgb, rgb, 3);
      e->index = t->count++;
      *added = 1;
      return e->index;
    }
    if (e->f->name_len == f->name_len && memcmp(e->rgb, rgb, 3) == 0 &&
        memcmp(e->f->name, f->name, f->name_len) == 0)
      return e->index;
  }
}

/* A name as the SVG's title shows it: cut past KF_SVG_NAME_MAX_BYTES. */
static size_t shown_len(const kf_ftnode_t *f, int *cut) {
  *cut = f->name_len > KF_SVG_NAME_MAX_BYTES;
  if (!*cut) return f->name_len;
  size_t n = KF_SVG_NAME_MAX_BYTES;
  while (n && ((unsigned char)f->name[n] & 0xC0) == 0x80) n--;
  return n;
}

static void put_entry(kf_outbuf_t *names, const kf_ftnode_t *f, const unsigned char rgb[3], const char *cwd) {
  static const char hex[] = "0123456789abcdef";
  int cut;
  size_t n = shown_len(f, &cut);
  kf_outbuf_puts(names, names->len > 1 ? ",[" : "[");
  if (cut) {
    /* The JSON string of a cut name: put_json of the bytes plus "...". */
    put_json(names, f->name, n);
    names->len--; /* reopen the string */
    kf_outbuf_puts(names, "...\"");
  } else {
    put_json(names, f->name, n);
  }
  char c[10] = {',', '"', hex[rgb[0] >> 4], hex[rgb[0] & 15], hex[rgb[1] >> 4], hex[rgb[1] & 15],
                hex[rgb[2] >> 4], hex[rgb[2] & 15], '"', 0};
  kf_outbuf_puts(names, c);
  if (!cut) {
    size_t head, tail, end;
    kf_framelabel(f->name, n, cwd, &head, &tail, &end);
    if (head != tail || end != n) {
      kf_outbuf_puts(names, ",");
      /* head and tail as one string: two put_json calls joined. */
      put_json(names, f->name, head);
      names->len--;
      kf_outbuf_t rest = {0};
      put_json(&rest, f->name + tail, end - tail);
      if (rest.failed) names->failed = 1;
      else kf_outbuf_put(names, rest.p + 1, rest.len - 1);
      free(rest.p);
    }
  }
  kf_outbuf_puts(names, "]");
}

int kf_flamehtml_data(const char *folded, size_t len, const kf_svg_opts_t *o,
                      char **out, size_t *out_len, kf_svg_stats_t *st) {
  *out = NULL;
  *out_len = 0;
  kf_flametree_t t;
  int rc = kf_svg_tree(folded, len, o, &t, st);
  if (rc) return rc;

  unsigned width = o->width ? o->width : 1200;
  if (width < KF_SVG_MIN_WIDTH) width = KF_SVG_MIN_WIDTH;
  double scale = t.nodes[0].total ? (double)(width - 2 * PAD_X) / (double)t.nodes[0].total : 0;
  kf_outbuf_t names = {0}, frames = {0}, b = {0};
  table_t table = {0};
  uint32_t *stack = NULL;
  uint64_t *gaps = NULL;
  size_t stack_cap = 0, gaps_cap = 0, n = 0;
  table.cap = 64;
  while (table.cap < 2 * t.count) table.cap *= 2;
  table.slots = calloc(table.cap, sizeof *table.slots);
  rc = -ENOMEM;
  if (!table.slots || kf_grow((void **)&stack, &stack_cap, 1, sizeof *stack, 256) ||
      kf_grow((void **)&gaps, &gaps_cap, 1, sizeof *gaps, 256))
    goto out;
  kf_outbuf_puts(&names, "[");
  kf_outbuf_puts(&frames, "[");
  /* Depth first, children left to right, as src/render/svg.c's walk. */
  stack[n] = 0;
  gaps[n++] = 0;
  while (n) {
    n--;
    uint32_t id = stack[n];
    uint64_t gap = gaps[n];
    const kf_ftnode_t *f = &t.nodes[id];
    unsigned char rgb[3];
    kf_svg_colour(f, rgb);
    int added;
    long e = entry_of(&table, f, rgb, &added);
    if (added) put_entry(&names, f, rgb, o->cwd);
    if (frames.len > 1) kf_outbuf_puts(&frames, ",");
    put_u64(&frames, f->depth);
    kf_outbuf_puts(&frames, ",");
    put_u64(&frames, (unsigned long long)e);
    kf_outbuf_puts(&frames, ",");
    put_u64(&frames, f->total);
    kf_outbuf_puts(&frames, ",");
    put_u64(&frames, gap);
    st->drawn++;
    size_t first = n;
    uint64_t skipped = 0;
    for (uint32_t c = f->first_child; c; c = t.nodes[c].next_sibling) {
      const kf_ftnode_t *k = &t.nodes[c];
      if ((double)k->total * scale >= o->minwidth) {
        if (kf_grow((void **)&stack, &stack_cap, n + 1, sizeof *stack, 256) ||
            kf_grow((void **)&gaps, &gaps_cap, n + 1, sizeof *gaps, 256))
          goto out;
        stack[n] = c;
        gaps[n++] = skipped;
        skipped = 0;
      } else {
        st->merged_frames++;
        st->merged_samples += k->total;
        skipped += k->total;
      }
    }
    for (size_t i = first, j = n ? n - 1 : 0; i < j; i++, j--) {
      uint32_t ts = stack[i];
      uint64_t tg = gaps[i];
      stack[i] = stack[j], gaps[i] = gaps[j];
      stack[j] = ts, gaps[j] = tg;
    }
    if (names.failed || frames.failed) goto out;
  }
  kf_outbuf_puts(&names, "]");
  kf_outbuf_puts(&frames, "]");

  const char *title = o->title ? o->title : o->inverted ? "Icicle Graph" : "Flame Graph";
  kf_outbuf_puts(&b, "{\"v\":1,\"title\":");
  put_json(&b, title, strlen(title));
  if (o->subtitle) {
    kf_outbuf_puts(&b, ",\"subtitle\":");
    put_json(&b, o->subtitle, strlen(o->subtitle));
  }
  char nums[256];
  snprintf(nums, sizeof nums, ",\"width\":%u,\"inverted\":%d,\"total\":%llu,\"minwidth\":%g,\"merged\":[%llu,%llu]",
           width, o->inverted ? 1 : 0, (unsigned long long)t.nodes[0].total, o->minwidth,
           (unsigned long long)st->merged_frames, (unsigned long long)st->merged_samples);
  kf_outbuf_puts(&b, nums);
  kf_outbuf_puts(&b, ",\"names\":");
  if (!names.failed) kf_outbuf_put(&b, names.p, names.len);
  kf_outbuf_puts(&b, ",\n\"frames\":");
  if (!frames.failed) kf_outbuf_put(&b, frames.p, frames.len);
  kf_outbuf_puts(&b, "}");
  if (b.failed || names.failed || frames.failed) goto out;
  *out = b.p;
  *out_len = b.len;
  b.p = NULL;
  rc = 0;
out:
  free(b.p);
  free(names.p);
  free(frames.p);
  free(table.slots);
  free(stack);
  free(gaps);
  kf_flametree_free(&t);
  return rc;
}
