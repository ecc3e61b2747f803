/* Folded text into a flame tree, and the tree into SVG. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/flametree.h"
#include "render/flamehtml.h"
#include "render/framelabel.h"
#include "render/svg.h"
#include "kftest.h"

static const kf_ftnode_t *find(const kf_flametree_t *t, uint32_t parent,
                               const char *name) {
  for (uint32_t c = t->nodes[parent].first_child; c; c = t->nodes[c].next_sibling)
    if (t->nodes[c].name_len == strlen(name) &&
        memcmp(t->nodes[c].name, name, strlen(name)) == 0)
      return &t->nodes[c];
  return NULL;
}

static uint32_t id_of(const kf_flametree_t *t, const kf_ftnode_t *n) {
  return (uint32_t)(n - t->nodes);
}

static void tree_merges_counts_and_sorts(void) {
  const char *text = "main;b;x 2\nmain;a 3\nmain;b 1\nmain;b;x 4\r\nworker-7;a 5\n";
  kf_flametree_t t;
  CHECK(kf_flametree_parse(&t, text, strlen(text), 0) == 0);
  CHECK_EQ_U64(t.lines, 5);
  CHECK_EQ_U64(t.bad_lines, 0);
  CHECK_EQ_U64(t.nodes[0].total, 15);
  const kf_ftnode_t *m = find(&t, 0, "main");
  CHECK(m && m->total == 10 && m->self == 0 && m->depth == 1);
  const kf_ftnode_t *b = find(&t, id_of(&t, m), "b");
  CHECK(b && b->total == 7 && b->self == 1);
  const kf_ftnode_t *x = find(&t, id_of(&t, b), "x");
  CHECK(x && x->total == 6 && x->self == 6 && x->depth == 3);
  /* Children in name order, whatever the input order. */
  const kf_ftnode_t *first = &t.nodes[m->first_child];
  CHECK(first->name_len == 1 && first->name[0] == 'a');
  CHECK_EQ_U64(t.max_depth, 3);
  kf_flametree_free(&t);
}

static void tree_counts_bad_lines(void) {
  const char *text = "no count\nmain;a x\nmain;;b 3\n;main 1\nmain; 2\nmain;a 0\n"
                     "main;a -1\n 5\nmain;ok 1\n\n\nmain;a 99999999999999999999\n";
  kf_flametree_t t;
  CHECK(kf_flametree_parse(&t, text, strlen(text), 0) == 0);
  CHECK_EQ_U64(t.lines, 10);
  CHECK_EQ_U64(t.bad_lines, 9);
  CHECK_EQ_U64(t.nodes[0].total, 1);
  kf_flametree_free(&t);
}

static void tree_reverse_reads_leaf_first(void) {
  const char *text = "main;a;leaf 2\nworker;b;leaf 3\n";
  kf_flametree_t t;
  CHECK(kf_flametree_parse(&t, text, strlen(text), 1) == 0);
  const kf_ftnode_t *leaf = find(&t, 0, "leaf");
  CHECK(leaf && leaf->total == 5);
  CHECK(find(&t, id_of(&t, leaf), "a") && find(&t, id_of(&t, leaf), "b"));
  kf_flametree_free(&t);
}

static char *render(const char *text, const kf_svg_opts_t *o, kf_svg_stats_t *st) {
  char *svg;
  size_t len;
  CHECK(kf_svg_render(text, strlen(text), o, &svg, &len, st) == 0);
  CHECK(strlen(svg) == len);
  return svg;
}

static void svg_escapes_hostile_names(void) {
  kf_svg_opts_t o = {.minwidth = 0};
  kf_svg_stats_t st;
  const char *text = "main;<script>&\"x'</script> 1\nmain;bad\xff\xfe utf8 1\n"
                     "main;ctl\x01\x1f char 1\nmain;\xEF\xBF\xBF nonchar 1\nmain;]]> 1\n";
  char *svg = render(text, &o, &st);
  CHECK(strstr(svg, "&lt;script&gt;&amp;&quot;x&#39;&lt;/script&gt;"));
  CHECK(!strstr(svg, "<script>&"));
  CHECK(strstr(svg, "bad\xEF\xBF\xBD\xEF\xBF\xBD utf8"));
  CHECK(strstr(svg, "ctl?? char"));
  CHECK(strstr(svg, "\xEF\xBF\xBD nonchar"));
  CHECK(strstr(svg, "]]&gt;"));
  CHECK_EQ_U64(st.drawn, 7); /* all, main, five leaves */
  free(svg);
}

static void svg_cuts_huge_names(void) {
  size_t n = 100000;
  char *text = malloc(n + 16);
  memcpy(text, "main;", 5);
  memset(text + 5, 'x', n);
  strcpy(text + 5 + n, " 1\n");
  kf_svg_opts_t o = {0};
  kf_svg_stats_t st;
  char *svg = render(text, &o, &st);
  CHECK(strlen(svg) < 20000); /* 1000 bytes in the title, the label fits */
  CHECK(strstr(svg, "xxx... (1 samples"));
  free(svg);
  free(text);
}

static void svg_merges_narrow_frames(void) {
  /* 1 sample in 10000 is 0.118 px of 1180: below 0.5 px. */
  const char *text = "main;big 9999\nmain;tiny;deeper 1\n";
  kf_svg_opts_t o = {.minwidth = 0.5};
  kf_svg_stats_t st;
  char *svg = render(text, &o, &st);
  CHECK_EQ_U64(st.frames, 4);
  CHECK_EQ_U64(st.drawn, 3); /* all, main, big */
  CHECK_EQ_U64(st.merged_frames, 1);
  CHECK_EQ_U64(st.merged_samples, 1);
  CHECK(strstr(svg, "main (10000 samples, 100.00%)")); /* still counted */
  CHECK(!strstr(svg, "tiny"));
  CHECK(strstr(svg, "1 frames (1 samples) narrower than 0.50 px merged"));
  free(svg);
}

static void svg_is_deterministic_and_inverts(void) {
  const char *text = "main;a;b 3\nmain;c 1\n";
  kf_svg_opts_t o = {.minwidth = 0.1, .title = "T", .subtitle = "S"};
  kf_svg_stats_t st;
  char *one = render(text, &o, &st), *two = render(text, &o, &st);
  CHECK(strcmp(one, two) == 0);
  CHECK(strstr(one, ">T</text>") && strstr(one, ">S</text>"));
  o.inverted = 1;
  o.title = NULL;
  char *ice = render(text, &o, &st);
  CHECK(strstr(ice, "Icicle Graph"));
  CHECK(strstr(ice, "data-inverted=\"1\""));
  /* Icicle: the root ("all") at the top. */
  CHECK(strstr(ice, "<title>all (4 samples, 100.00%)</title><rect x=\"10.0\" y=\"60\""));
  free(one);
  free(two);
  free(ice);
}

static void svg_of_nothing(void) {
  kf_svg_opts_t o = {0};
  kf_svg_stats_t st;
  char *svg = render("", &o, &st);
  CHECK(strstr(svg, "</svg>"));
  CHECK_EQ_U64(st.samples, 0);
  free(svg);
}

/* Found by fuzz_svg: a width below the margins (2 x 10 px) wrapped an
 * unsigned subtraction and drew the root 4 billion pixels wide. */
static void svg_too_narrow_is_widened(void) {
  const char *text = "main;a 3\n";
  kf_svg_opts_t o = {.width = 6};
  kf_svg_stats_t st;
  char *svg = render(text, &o, &st);
  CHECK(strstr(svg, "width=\"100\" height="));
  CHECK(strstr(svg, "<title>all (3 samples, 100.00%)</title><rect x=\"10.0\" y=\"72\" width=\"80.0\""));
  free(svg);
}

/* 19 lines of 999999999999999999 summed past 2^64 once ("all
 * (553255926290448365 samples)", children at 180%). A count that would take
 * the total past 2^53 - 1 is a bad line: every total stays exact. */
static void tree_total_never_passes_2_53(void) {
  char text[19 * 32 + 64];
  size_t n = 0;
  for (int i = 0; i < 19; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "main;f%02d 999999999999999999\n", i);
  n += (size_t)snprintf(text + n, sizeof text - n, "main;big 9007199254740990\nmain;one 1\nmain;two 2\n");
  kf_flametree_t t;
  CHECK(kf_flametree_parse(&t, text, n, 0) == 0);
  CHECK_EQ_U64(t.lines, 22);
  CHECK_EQ_U64(t.bad_lines, 20); /* the 19, then "two" that no longer fits */
  CHECK_EQ_U64(t.nodes[0].total, KF_FLAMETREE_MAX_TOTAL);
  const kf_ftnode_t *m = find(&t, 0, "main");
  CHECK(m && m->total == KF_FLAMETREE_MAX_TOTAL);
  kf_flametree_free(&t);
}

/* Rendering is pure: threads rendering at once (sorting children among
 * them) give each the bytes it gets alone. Under TSan this also shows that
 * nothing is shared. */
typedef struct render_job {
  const char *text;
  char *svg;
  size_t len;
} render_job_t;

static void *render_many(void *arg) {
  render_job_t *job = arg;
  kf_svg_opts_t o = {.width = 1200, .minwidth = 0.1};
  kf_svg_stats_t st;
  for (int i = 0; i < 20; i++) {
    char *svg;
    size_t len;
    if (kf_svg_render(job->text, strlen(job->text), &o, &svg, &len, &st) != 0) return NULL;
    if (i == 0) {
      job->svg = svg;
      job->len = len;
    } else {
      if (len != job->len || memcmp(svg, job->svg, len) != 0) job->len = 0;
      free(svg);
    }
  }
  return job;
}

static void svg_renders_on_threads_at_once(void) {
  /* Many siblings to sort: the sort is where a shared pointer once crashed. */
  char *big = malloc(64 * 4000);
  size_t n = 0;
  for (int i = 0; i < 4000; i++)
    n += (size_t)snprintf(big + n, 64, "main;f%d;g%d %d\n", (i * 7919) % 4000, i % 13, i % 5 + 1);
  const char *texts[4] = {big, "main;b;x 2\nmain;a 3\nworker;z 1\nworker;y 4\n",
                          "t;c 1\nt;b 1\nt;a 1\n", big};
  render_job_t jobs[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (render_job_t){.text = texts[i]};
    CHECK(pthread_create(&threads[i], NULL, render_many, &jobs[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    void *ok;
    CHECK(pthread_join(threads[i], &ok) == 0 && ok);
    CHECK(jobs[i].len > 0);
  }
  CHECK(jobs[0].len == jobs[3].len && memcmp(jobs[0].svg, jobs[3].svg, jobs[0].len) == 0);
  for (int i = 0; i < 4; i++) free(jobs[i].svg);
  free(big);
}

/* The label rule of src/render/framelabel.h, case by case (the browser tests check
 * the script's copy against the labels drawn here). */
static void label_is(const char *name, const char *cwd, const char *want) {
  size_t head, tail, end;
  kf_framelabel(name, strlen(name), cwd, &head, &tail, &end);
  CHECK(head <= tail && tail <= end && end <= strlen(name));
  char got[512];
  snprintf(got, sizeof got, "%.*s%.*s", (int)head, name, (int)(end - tail), name + tail);
  if (strcmp(got, want) != 0) fprintf(stderr, "label of \"%s\": \"%s\", want \"%s\"\n", name, got, want);
  CHECK(strcmp(got, want) == 0);
}

static void labels_are_short(void) {
  label_is("parseExprAtom /srv/app/node_modules/acorn/dist/acorn.js:3066:32_[j]", "/srv/app",
           "parseExprAtom acorn/dist/acorn.js:3066");
  label_is("f /srv/app/node_modules/a/node_modules/@s/b/x.js:1:2_[j]", NULL, "f @s/b/x.js:1");
  label_is("run /srv/app/src/work.js:17:14_[j]", "/srv/app", "run src/work.js:17");
  label_is("run /srv/app/src/work.js:17:14_[j]", "/srv/ap", "run /srv/app/src/work.js:17");
  label_is("run /srv/app/src/work.js:17:14_[j]", "/", "run /srv/app/src/work.js:17");
  label_is("run file:///srv/app/m.mjs:3:1_[i]", "/srv/app", "run m.mjs:3");
  label_is("listOnTimeout node:internal/timers:500:7_[j]", "/srv/app", "listOnTimeout node:internal/timers:500");
  label_is("(anonymous) [eval]:1:1_[j]", NULL, "(anonymous) [eval]:1");
  label_is("f /a.js:12", NULL, "f /a.js:12");
  label_is("do_syscall_64_[k]", NULL, "do_syscall_64");
  label_is("node::Start(int, char**)", NULL, "node::Start(int, char**)");
  label_is("Builtin:JsonParse_[j]", NULL, "Builtin:JsonParse");
  label_is("odd name:", NULL, "odd name:");
  label_is("odd name :12:", NULL, "odd name :12:");
  label_is("_[k]", NULL, "");
  label_is("", NULL, "");
}

/* The document's shape: frames inside one group, full names in titles,
 * short labels as text, no empty <text>. */
static void svg_frames_grouped_with_short_labels(void) {
  const char *text = "main;parseExprAtom /srv/app/node_modules/acorn/dist/acorn.js:3066:32_[j] 9\n"
                     "main;tiny 1\n";
  kf_svg_opts_t o = {.width = 400, .cwd = "/srv/app"};
  kf_svg_stats_t st;
  char *svg = render(text, &o, &st);
  const char *frames = strstr(svg, "<g id=\"frames\">\n<g><title>all ");
  CHECK(frames);
  CHECK(strstr(svg, "data-cwd=\"/srv/app\""));
  CHECK(strstr(svg, "<title>parseExprAtom /srv/app/node_modules/acorn/dist/acorn.js:3066:32_[j] (9 samples"));
  CHECK(strstr(svg, ">parseExprAtom acorn/dist/acorn.js:3066</text>"));
  CHECK(!strstr(svg, "<text x=\"13.0\" y=\"50.5\"></text>"));
  CHECK(strstr(svg, "<title>tiny (1 samples, 10.00%)</title><rect x=\"352.0\" y=\"40\" width=\"38.0\" "
                    "height=\"15\" fill=\"rgb(") != NULL);
  CHECK(strstr(svg, ">tiny</text>"));
  /* The header and footer come after the frames (drawn over them). */
  CHECK(strstr(frames, "<g id=\"header\">") && strstr(frames, "<g id=\"footer\">"));
  free(svg);
  o.width = 100; /* 80 px for 10 samples: tiny is 8 px, no room for a label */
  svg = render(text, &o, &st);
  const char *tiny = strstr(svg, "<title>tiny ");
  CHECK(tiny && strstr(tiny, "rx=\"2\" ry=\"2\"/></g>") == strstr(tiny, "rx="));
  free(svg);
}

/* The HTML graph's data: hostile names cannot leave the <script> element,
 * frames carry depth, name entry, samples and the gap of left-out
 * siblings, entries the SVG's colour and the short label. */
static void html_data_is_safe_and_compact(void) {
  const char *text = "main;</script><b>&x 6\n"
                     "main;line\xE2\x80\xA8sep 6\n"
                     "main;bad\xFF utf8 6\n"
                     "main;f /srv/node_modules/p/i.js:1:2_[j] 1000\n"
                     "main;a 1\n"; /* 1 of 1019 samples at 1180 px: 1.16 px */
  kf_svg_opts_t o = {.minwidth = 2, .cwd = "/srv"};
  kf_svg_stats_t st;
  char *data;
  size_t len;
  CHECK(kf_flamehtml_data(text, strlen(text), &o, &data, &len, &st) == 0);
  CHECK(strlen(data) == len);
  CHECK(!strstr(data, "<") && !strstr(data, ">") && !strstr(data, "&"));
  CHECK(strstr(data, "\"\\u003c/script\\u003e\\u003cb\\u003e\\u0026x\""));
  CHECK(strstr(data, "line\\u2028sep"));
  CHECK(strstr(data, "bad\\ufffd utf8"));
  CHECK(strstr(data, "[\"f /srv/node_modules/p/i.js:1:2_[j]\",\""));
  CHECK(strstr(data, "\",\"f p/i.js:1\"]"));
  /* Children sorted by name: "</script>..." (6), "a" (1, left out: 1.16 px
   * < 2), "bad..." (6, after a gap of 1), "f" (1000), "line..." (6). */
  CHECK(strstr(data, "\"frames\":[0,0,1019,0,1,1,1019,0,2,2,6,0,2,3,6,1,2,4,1000,0,2,5,6,0]}"));
  CHECK_EQ_U64(st.merged_frames, 1);
  CHECK_EQ_U64(st.drawn, 6);
  /* The same (name, colour) is one entry however often it is drawn. */
  free(data);
  const char *twice = "t1;x 5\nt2;x 5\n";
  CHECK(kf_flamehtml_data(twice, strlen(twice), &o, &data, &len, &st) == 0);
  CHECK(strstr(data, "\"frames\":[0,0,10,0,1,1,5,0,2,2,5,0,1,3,5,0,2,2,5,0]"));
  free(data);
}

/* Off-CPU frames: blue from the marker up (kernel frames too), idle in
 * grey-blue, "(idle)" stacks left out unless asked for and counted. */
static void svg_offcpu_blue_and_idle_hidden(void) {
  const char *text = "main;[off-cpu];readPipe /a.js:1:1_[j];pipe_read_[k] 3\n"
                     "main;(idle);uv__io_poll 5\nmain;run /a.js:2:2_[j] 2\n";
  kf_flametree_t t;
  CHECK(kf_flametree_parse(&t, text, strlen(text), 0) == 0);
  const kf_ftnode_t *main_ = find(&t, 0, "main");
  const kf_ftnode_t *off = find(&t, id_of(&t, main_), "[off-cpu]");
  const kf_ftnode_t *rd = find(&t, id_of(&t, off), "readPipe /a.js:1:1_[j]");
  const kf_ftnode_t *k = find(&t, id_of(&t, rd), "pipe_read_[k]");
  const kf_ftnode_t *run = find(&t, id_of(&t, main_), "run /a.js:2:2_[j]");
  CHECK(off && rd && k && run);
  CHECK(off->waiting == 1 && k->waiting == 1 && run->waiting == 0);
  CHECK(find(&t, id_of(&t, main_), "(idle)")->waiting == 2);
  unsigned char rgb[3];
  kf_svg_colour(k, rgb);
  CHECK(rgb[2] > rgb[0] + 100 && rgb[2] > rgb[1] + 100); /* blue, not kernel orange */
  kf_svg_colour(run, rgb);
  CHECK(!(rgb[2] > rgb[0] + 100 && rgb[2] > rgb[1] + 100));
  kf_flametree_free(&t);

  kf_svg_opts_t o = {.minwidth = 0.1};
  char *svg;
  size_t len;
  kf_svg_stats_t st;
  CHECK(kf_svg_render(text, strlen(text), &o, &svg, &len, &st) == 0);
  CHECK(!strstr(svg, "uv__io_poll"));
  CHECK(strstr(svg, "readPipe"));
  CHECK_EQ_U64(st.idle_samples, 5);
  CHECK_EQ_U64(st.samples, 5);
  free(svg);
  o.show_idle = 1;
  CHECK(kf_svg_render(text, strlen(text), &o, &svg, &len, &st) == 0);
  CHECK(strstr(svg, "uv__io_poll"));
  CHECK_EQ_U64(st.idle_samples, 0);
  free(svg);
}

/* test/fixtures/frame-kinds.txt, which test/exports.test.js reads too: the
 * SVG colours a JIT frame as V8's code exactly when parseFrame says 'jit'. */
static void frame_kinds_agree_with_js(void) {
  FILE *f = fopen("../fixtures/frame-kinds.txt", "r");
  CHECK(f != NULL);
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\n");
    line[len] = '\0';
    if (len == 0 || line[0] == '#') continue;
    char *name = strchr(line, ' ');
    CHECK(name != NULL);
    *name++ = '\0';
    size_t body = strlen(name) - 4; /* the _[j] or _[i] cut */
    int want = strcmp(line, "jit") == 0;
    CHECK(want || strcmp(line, "js") == 0);
    if (kf_svg_v8_code(name, body) != want) fprintf(stderr, "  %s: not %s\n", name, line);
    CHECK(kf_svg_v8_code(name, body) == want);
    n++;
  }
  fclose(f);
  CHECK(n >= 20);
}

static const kftest_case_t cases[] = {
    {"svg: frame kinds agree with lib/exports (one list)", frame_kinds_agree_with_js},
    {"svg: off-CPU frames blue, (idle) hidden by default", svg_offcpu_blue_and_idle_hidden},
    {"flametree: merge, count, sort children", tree_merges_counts_and_sorts},
    {"flametree: bad lines counted, not fatal", tree_counts_bad_lines},
    {"flametree: reverse reads leaf first", tree_reverse_reads_leaf_first},
    {"svg: hostile names escaped, invalid UTF-8 replaced", svg_escapes_hostile_names},
    {"svg: huge names cut", svg_cuts_huge_names},
    {"svg: narrow frames merged and reported", svg_merges_narrow_frames},
    {"svg: deterministic; icicle", svg_is_deterministic_and_inverts},
    {"svg: empty input", svg_of_nothing},
    {"svg: too narrow is widened", svg_too_narrow_is_widened},
    {"flametree: the total never passes 2^53 - 1", tree_total_never_passes_2_53},
    {"svg: threads render at once", svg_renders_on_threads_at_once},
    {"framelabel: short labels", labels_are_short},
    {"flamehtml: safe, compact data", html_data_is_safe_and_compact},
    {"svg: frames grouped, short labels, no empty text", svg_frames_grouped_with_short_labels},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }
