/* Symbol tables: lookup at range edges, kallsyms text, /proc maps lines, ELF
 * symbols of this very test binary, separate debug files and MiniDebugInfo
 * of fixture libraries (built by the Makefile), and thread root names. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/perf_event.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/debugfile.h"
#include "symbols/elfsyms.h"
#include "symbols/kallsyms.h"
#include "collect/namer.h"
#include "symbols/procmaps.h"
#include "symbols/symbolizer.h"
#include "symbols/symtab.h"
#include "collect/threadrole.h"
#include "kftest.h"

static char *name_at(const kf_symtab_t *t, uint64_t addr) {
  static char buf[256];
  const kf_sym_t *s = kf_symtab_lookup(t, addr);
  if (!s) return NULL;
  snprintf(buf, sizeof buf, "%.*s", (int)s->name_len, kf_symtab_name(t, s));
  return buf;
}

static void symtab_lookup_at_edges(void) {
  kf_symtab_t *t = kf_symtab_new();
  CHECK(kf_symtab_add(t, 0x2000, 0x100, "second", 6) == 0);
  CHECK(kf_symtab_add(t, 0x1000, 0x10, "first", 5) == 0);
  CHECK(kf_symtab_add(t, 0x3000, 0, "unsized", 7) == 0);
  CHECK(kf_symtab_add(t, 0x4000, 0, "last", 4) == 0);
  kf_symtab_finish(t, 0x4800);
  CHECK(name_at(t, 0xfff) == NULL);
  CHECK_STR(name_at(t, 0x1000), "first");
  CHECK_STR(name_at(t, 0x100f), "first");
  CHECK(name_at(t, 0x1010) == NULL); /* gap after a sized symbol */
  CHECK_STR(name_at(t, 0x2000), "second");
  CHECK_STR(name_at(t, 0x20ff), "second");
  CHECK(name_at(t, 0x2100) == NULL);
  CHECK_STR(name_at(t, 0x3fff), "unsized"); /* runs to the next symbol */
  CHECK_STR(name_at(t, 0x47ff), "last");    /* runs to `end` */
  CHECK(name_at(t, 0x4800) == NULL);
  kf_symtab_free(t);
}

static void symtab_duplicate_start_keeps_sized(void) {
  kf_symtab_t *t = kf_symtab_new();
  CHECK(kf_symtab_add(t, 0x1000, 0, "alias_unsized", 13) == 0);
  CHECK(kf_symtab_add(t, 0x1000, 0x20, "real", 4) == 0);
  CHECK(kf_symtab_add(t, 0x1000, 0x20, "alias_later", 11) == 0);
  kf_symtab_finish(t, 0);
  CHECK_EQ_U64(kf_symtab_count(t), 1);
  CHECK_STR(name_at(t, 0x1010), "real");
  kf_symtab_free(t);
}

static void symtab_empty(void) {
  kf_symtab_t *t = kf_symtab_new();
  kf_symtab_finish(t, 0);
  CHECK(kf_symtab_lookup(t, 0) == NULL);
  CHECK(kf_symtab_lookup(t, UINT64_MAX) == NULL);
  kf_symtab_free(t);
}

static void kallsyms_parses_text_symbols(void) {
  static const char text[] =
      "ffffffff81000000 T _stext\n"
      "ffffffff81000000 T _text\n"
      "ffffffff81001000 t do_one_initcall\n"
      "ffffffff81002000 D some_data\n"
      "ffffffff81003000 W weak_fn\n"
      "garbage line\n"
      "ffffffffc0a01000 t nf_hook_slow\t[nf_tables]\n"
      "ffffffff81004000 T";
  kf_symtab_t *t;
  int hidden = -1;
  CHECK(kf_kallsyms_parse(text, sizeof text - 1, &t, &hidden) == 0);
  CHECK(hidden == 0);
  CHECK_EQ_U64(kf_symtab_count(t), 4); /* _stext/_text merged, data skipped */
  CHECK_STR(name_at(t, 0xffffffff81000000ULL), "_stext");
  CHECK_STR(name_at(t, 0xffffffff81001fffULL), "do_one_initcall");
  /* Data symbols are not kept, so text runs on over them. */
  CHECK_STR(name_at(t, 0xffffffff81002010ULL), "do_one_initcall");
  CHECK_STR(name_at(t, 0xffffffff81003000ULL), "weak_fn");
  CHECK_STR(name_at(t, 0xffffffffc0a01234ULL), "nf_hook_slow");
  CHECK(name_at(t, 0xffffffff80ffffffULL) == NULL);
  kf_symtab_free(t);
}

static void kallsyms_hidden_addresses(void) {
  static const char text[] =
      "0000000000000000 T _stext\n"
      "0000000000000000 t do_one_initcall\n";
  kf_symtab_t *t;
  int hidden = 0;
  CHECK(kf_kallsyms_parse(text, sizeof text - 1, &t, &hidden) == 0);
  CHECK(hidden == 1);
  CHECK_EQ_U64(kf_symtab_count(t), 0);
  kf_symtab_free(t);
}

static void procmaps_parses_lines(void) {
  static const char lines[] =
      "00400000-00b6f000 r--p 00000000 fe:01 1234      /usr/bin/node\n"
      "00b6f000-00b71000 r-xp 0076f000 fe:01 1234      /usr/bin/node\n"
      "7f0c8c000000-7f0c8c021000 rw-p 00000000 00:00 0 \n"
      "7f0c8d000000-7f0c8d040000 rwxp 00000000 00:00 0\n"
      "broken\n"
      "7ffd1e9f2000-7ffd1e9f4000 r-xp 00000000 00:00 0          [vdso]\n"
      "7ffd1ea00000-7ffd1ea01000 r-xp 00000000 08:02 99 /tmp/with space.so (deleted)";
  char *text = strdup(lines);
  kf_maps_t maps;
  CHECK(kf_maps_parse(text, strlen(text), &maps) == 0);
  CHECK_EQ_U64(maps.count, 6);
  const kf_mapping_t *m = kf_maps_find(&maps, 0xb70000);
  CHECK(m && m->exec && m->offset == 0x76f000 && m->inode == 1234);
  CHECK(m->dev_major == 0xfe && m->dev_minor == 1);
  CHECK_STR(m->path, "/usr/bin/node");
  m = kf_maps_find(&maps, 0x7f0c8d000010ULL);
  CHECK(m && m->exec && m->path[0] == '\0');
  CHECK_STR(kf_maps_find(&maps, 0x7ffd1e9f2000ULL)->path, "[vdso]");
  CHECK_STR(kf_maps_find(&maps, 0x7ffd1ea00000ULL)->path,
            "/tmp/with space.so (deleted)");
  CHECK(kf_maps_find(&maps, 0x3fffff) == NULL);
  CHECK(kf_maps_find(&maps, 0xb71000) == NULL); /* end is exclusive */
  kf_maps_free(&maps);
}

/* A function of this binary to find by name. */
__attribute__((noinline)) int kftest_marker_function(int x) {
  return x * 3 + 1;
}

static void elf_names_this_binary(void) {
  kf_maps_t maps;
  CHECK(kf_maps_load(&maps) == 0);
  uint64_t ip = (uint64_t)(uintptr_t)&kftest_marker_function + 3;
  const kf_mapping_t *m = kf_maps_find(&maps, ip);
  CHECK(m && m->exec && m->path[0] == '/');
  kf_elf_t *elf;
  CHECK(kf_elf_load(m->path, &elf) == 0);
  CHECK(elf->from_symtab == 1);
  uint64_t vaddr;
  CHECK(kf_elf_vaddr(elf, ip - m->start + m->offset, &vaddr) == 0);
  const kf_sym_t *s = kf_symtab_lookup(elf->syms, vaddr);
  CHECK(s != NULL);
  CHECK(s->name_len == strlen("kftest_marker_function"));
  CHECK(memcmp(kf_symtab_name(elf->syms, s), "kftest_marker_function",
               s->name_len) == 0);
  kf_elf_free(elf);
  kf_maps_free(&maps);
}

__attribute__((noinline)) int kftest_other_function(int x) {
  return x * 5 + 2;
}

static const char *comm_of(void *ctx, uint32_t tid) {
  (void)ctx, (void)tid;
  return "kftest-comm";
}

/* Raw chains named as they are collected: two addresses of one function
 * make one named chain; samples go to the window of their time. */
static void namer_folds_windows(void) {
  kf_symbolizer_t *sym = kf_symbolizer_new();
  uint32_t pid = (uint32_t)getpid();
  kf_namer_opts_t o = {.symbolizer = sym, .pid = pid, .comm = comm_of};
  kf_namer_t *n = kf_namer_new(&o);
  kf_stacks_t *raw = kf_stacks_new();
  kf_aggregate_t *a = kf_aggregate_new(100), *b = kf_aggregate_new(100);
  uint64_t f = (uint64_t)(uintptr_t)&kftest_marker_function;
  uint64_t g = (uint64_t)(uintptr_t)&kftest_other_function;
  uint64_t c1[] = {(uint64_t)PERF_CONTEXT_USER, f + 1, g + 2};
  uint64_t c2[] = {(uint64_t)PERF_CONTEXT_USER, f + 3, g + 2};
  CHECK(kf_stacks_add(raw, pid, 10, c1, 3) == 0);
  CHECK(kf_stacks_add(raw, pid, 20, c2, 3) == 0);
  CHECK(kf_stacks_add(raw, pid, 30, c1, 3) == 0);
  uint64_t dropped = 0;
  CHECK(kf_namer_fold(n, raw, a, b, 25, &dropped) == 0);
  CHECK_EQ_U64(dropped, 0);
  CHECK_EQ_U64(kf_stacks_count(raw), 0); /* emptied */
  const kf_stacks_t *sa = kf_aggregate_stacks(a), *sb = kf_aggregate_stacks(b);
  CHECK_EQ_U64(kf_stacks_count(sa), 1);
  CHECK_EQ_U64(kf_stacks_count(sb), 1);
  kf_stack_t st;
  kf_stacks_get(sa, 0, &st);
  CHECK(st.count == 2 && st.nr == 3 && st.ips[0] == (uint64_t)PERF_CONTEXT_USER);
  CHECK_STR(kf_aggregate_frame_name(a, st.ips[1]), "kftest_marker_function");
  CHECK_STR(kf_aggregate_frame_name(a, st.ips[2]), "kftest_other_function");
  kf_stacks_get(sb, 0, &st);
  CHECK(st.count == 1);
  CHECK_STR(kf_aggregate_frame_name(b, st.ips[1]), "kftest_marker_function");
  /* Timelines: by window, ids of the named chain. */
  kf_timeline_iter_t it;
  kf_sample_t smp;
  kf_timeline_iter(kf_aggregate_timeline(a), &it);
  CHECK(kf_timeline_next(&it, &smp) && smp.time == 10 && smp.stack == 0);
  CHECK(kf_timeline_next(&it, &smp) && smp.time == 20 && smp.stack == 0);
  CHECK(!kf_timeline_next(&it, &smp));
  kf_timeline_iter(kf_aggregate_timeline(b), &it);
  CHECK(kf_timeline_next(&it, &smp) && smp.time == 30);
  /* The main thread settled by its first stack; its comm kept. */
  size_t nt;
  const kf_agg_thread_t *t = kf_aggregate_threads(a, &nt);
  CHECK(nt == 1 && t[0].tid == pid && t[0].settled);
  CHECK_STR(t[0].routine, "kftest_other_function");
  CHECK_STR(t[0].comm, "kftest-comm");
  /* A later window into the same aggregate reuses its names. */
  CHECK(kf_stacks_add(raw, pid, 40, c2, 3) == 0);
  CHECK(kf_namer_fold(n, raw, a, NULL, 0, &dropped) == 0);
  kf_stacks_get(sa, 0, &st);
  CHECK_EQ_U64(kf_stacks_count(sa), 1);
  CHECK_EQ_U64(st.count, 3);
  kf_namer_forget(n, a);
  kf_aggregate_free(a);
  kf_aggregate_free(b);
  kf_stacks_free(raw);
  kf_namer_free(n);
  kf_symbolizer_free(sym);
}

static void elf_refuses_non_elf(void) {
  static const char junk[64] = "definitely not an ELF file";
  kf_elf_t *elf = NULL;
  CHECK(kf_elf_parse(junk, sizeof junk, &elf) < 0);
  CHECK(elf == NULL);
  CHECK(kf_elf_load("/nonexistent/kflame", &elf) < 0);
  CHECK(kf_elf_load("/proc/self/status", &elf) < 0); /* size 0 in stat */
}

static void thread_roots(void) {
  char *s;
  CHECK_STR(s = kf_thread_root(100, 100, "node", "node", NULL), "main");
  free(s);
  CHECK_STR(s = kf_thread_root(101, 100, "node", "node", "worker"),
            "libuv-worker-101");
  free(s);
  CHECK_STR(s = kf_thread_root(102, 100, "node", "node",
                               "node::(anonymous namespace)::PlatformWorkerThread(void*)"),
            "v8-worker-102");
  free(s);
  CHECK_STR(s = kf_thread_root(103, 100, "my-thread", "node", "worker"),
            "my-thread-103"); /* a name the thread chose wins */
  free(s);
  CHECK_STR(s = kf_thread_root(104, 100, "node", "node", "something_else"),
            "node-104");
  free(s);
  CHECK_STR(s = kf_thread_root(105, 100, NULL, NULL, NULL), "thread-105");
  free(s);
  /* Node 24 names its threads; the roles stay the same. */
  CHECK_STR(s = kf_thread_root(106, 100, "WorkerThread", "MainThread", NULL),
            "worker-thread-106");
  free(s);
  CHECK_STR(s = kf_thread_root(107, 100, "V8Worker", "MainThread", NULL),
            "v8-worker-107");
  free(s);
  /* Only Node's start routines settle a role: a broken chain's garbage
   * outermost frame must not. */
  CHECK_STR(kf_thread_role("worker"), "libuv-worker");
  CHECK(kf_thread_role("[unknown]") == NULL);
  CHECK(kf_thread_role("libc.so.6+0x98109") == NULL);
  CHECK(kf_thread_role(NULL) == NULL);
}

/* A file of the Makefile's debug fixtures, beside this test's binary in
 * dbg/ ("lib/libkfdemo-mini.so", "root"). */
static void fixture_path(char *out, size_t cap, const char *sub) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = '\0';
  *strrchr(exe, '/') = '\0';
  int len = snprintf(out, cap, "%s/dbg/%s", exe, sub);
  CHECK(len > 0 && (size_t)len < cap);
}

/* Names an address inside the static kfdemo_hidden of lib/NAME, and one
 * inside the exported kfdemo_exported, through a symbolizer made now (it
 * reads KFLAME_DEBUG_DIRS). */
static void name_demo(const char *name, char *hidden, char *exported,
                      kf_symbolizer_stats_t *st) {
  char path[PATH_MAX], sub[256];
  snprintf(sub, sizeof sub, "lib/%.200s", name);
  fixture_path(path, sizeof path, sub);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  void *(*hidden_address)(void) = (void *(*)(void))dlsym(h, "kfdemo_hidden_address");
  void *exported_fn = dlsym(h, "kfdemo_exported");
  CHECK(hidden_address && exported_fn);
  kf_symbolizer_t *s = kf_symbolizer_new();
  CHECK(s && kf_symbolizer_begin(s) == 0);
  strcpy(hidden, kf_symbolizer_frame(s, (uint64_t)(uintptr_t)hidden_address(), 0));
  strcpy(exported, kf_symbolizer_frame(s, (uint64_t)(uintptr_t)exported_fn + 1, 0));
  kf_symbolizer_stats(s, st);
  kf_symbolizer_free(s);
  dlclose(h);
}

static void debug_files_name_stripped_objects(void) {
  char root[PATH_MAX], hidden[512], exported[512];
  kf_symbolizer_stats_t st;
  fixture_path(root, sizeof root, "root");
  CHECK(setenv("KFLAME_DEBUG_DIRS", root, 1) == 0);
  /* Found by build-id under the debug directory, by .gnu_debuglink beside
   * the object (checked by CRC32: no build-id), in MiniDebugInfo. */
  const char *found[] = {"libkfdemo-buildid.so", "libkfdemo-debuglink.so", "libkfdemo-mini.so"};
  for (size_t i = 0; i < 3; i++) {
    name_demo(found[i], hidden, exported, &st);
    CHECK_STR(hidden, "kfdemo_hidden");
    CHECK_STR(exported, "kfdemo_exported");
    CHECK_EQ_U64(st.from_debug, 2);
    CHECK_EQ_U64(st.folded, 0);
  }
  /* No debug file: the static function folds into the object's frame;
   * .dynsym still names the exported one. */
  name_demo("libkfdemo-bare.so", hidden, exported, &st);
  CHECK_STR(hidden, "[libkfdemo-bare.so]");
  CHECK_STR(exported, "kfdemo_exported");
  CHECK_EQ_U64(st.folded, 1);
  CHECK_EQ_U64(st.from_debug, 0);
  /* Another build's debug file at this build-id's path names nothing. */
  name_demo("libkfdemo-stale.so", hidden, exported, &st);
  CHECK_STR(hidden, "[libkfdemo-stale.so]");
  /* Without debug directories only what lies beside the object is found. */
  CHECK(setenv("KFLAME_DEBUG_DIRS", "", 1) == 0);
  name_demo("libkfdemo-buildid.so", hidden, exported, &st);
  CHECK_STR(hidden, "[libkfdemo-buildid.so]");
  name_demo("libkfdemo-debuglink.so", hidden, exported, &st);
  CHECK_STR(hidden, "kfdemo_hidden");
  unsetenv("KFLAME_DEBUG_DIRS");
}

static void elf_reads_build_id_and_debuglink(void) {
  char path[PATH_MAX];
  kf_elf_t *elf;
  fixture_path(path, sizeof path, "lib/libkfdemo-debuglink.so");
  CHECK(kf_elf_load(path, &elf) == 0);
  CHECK(elf->build_id_len == 0 && elf->debuglink != NULL);
  CHECK_STR(elf->debuglink, "libkfdemo-debuglink.so.debug");
  CHECK(elf->syms_from == KF_SYMS_DYNSYM);
  kf_elf_free(elf);
  fixture_path(path, sizeof path, "lib/libkfdemo-mini.so");
  CHECK(kf_elf_load(path, &elf) == 0);
  CHECK(elf->build_id_len == 20 && elf->syms_from == KF_SYMS_MINIDEBUG);
  kf_elf_free(elf);
  /* The CRC32 of .gnu_debuglink is zlib's: "123456789" -> 0xcbf43926. */
  CHECK(kf_crc32(0, "123456789", 9) == 0xcbf43926u);
  CHECK(kf_crc32(kf_crc32(0, "1234", 4), "56789", 5) == 0xcbf43926u);
}

static const kftest_case_t cases[] = {
    {"debugfile: stripped objects named from debug files, MiniDebugInfo, or folded", debug_files_name_stripped_objects},
    {"elf: build-id, debuglink and MiniDebugInfo read", elf_reads_build_id_and_debuglink},
    {"symtab: lookup at range edges", symtab_lookup_at_edges},
    {"symtab: duplicate start keeps the sized symbol", symtab_duplicate_start_keeps_sized},
    {"symtab: empty table", symtab_empty},
    {"kallsyms: parses text symbols", kallsyms_parses_text_symbols},
    {"kallsyms: hidden addresses", kallsyms_hidden_addresses},
    {"procmaps: parses lines", procmaps_parses_lines},
    {"elf: names a function of this binary", elf_names_this_binary},
    {"elf: refuses what is not ELF", elf_refuses_non_elf},
    {"namer: raw chains named into windows", namer_folds_windows},
    {"threadrole: root names", thread_roots},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }
