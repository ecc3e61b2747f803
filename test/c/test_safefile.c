/* safefile: a write lands whole or not at all, never through a link, FIFO,
 * device or directory planted at the target or at a temporary name, and
 * leaves nothing behind; kf_map_file reads pipes and FIFOs without
 * blocking on a FIFO that has no writer. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "util/readfile.h"
#include "util/safefile.h"
#include "kftest.h"

#define VICTIM "precious bytes, not to be overwritten\n"

static char made[64]; /* this test's directory, removed at exit */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static void remove_made(void) {
  if (made[0]) nftw(made, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory under /tmp (one per test); its path into dir. */
static void fresh_dir(char *dir, size_t cap) {
  snprintf(dir, cap, "/tmp/kf-safefile-XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  CHECK(!made[0] && strlen(dir) < sizeof made);
  strcpy(made, dir);
  atexit(remove_made);
}

static void join(char *out, size_t cap, const char *dir, const char *name) {
  CHECK((size_t)snprintf(out, cap, "%s/%s", dir, name) < cap);
}

/* Entries in dir, "." and ".." aside. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  CHECK(fputs(text, f) >= 0);
  CHECK(fclose(f) == 0);
}

/* The whole file, NUL-terminated, into buf. */
static void get(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

static void safefile_writes_a_new_file_and_replaces_a_regular_one(void) {
  char dir[64], target[128], text[64];
  fresh_dir(dir, sizeof dir);
  join(target, sizeof target, dir, "out.map");
  mode_t old = umask(022);
  CHECK(kf_safefile_write_all(target, "first\n", 6, 0644) == 0);
  umask(old);
  get(target, text, sizeof text);
  CHECK_STR(text, "first\n");
  struct stat st;
  CHECK(stat(target, &st) == 0);
  CHECK_EQ_U64(st.st_mode & 07777, 0644);
  CHECK(kf_safefile_write_all(target, "second\n", 7, 0644) == 0);
  get(target, text, sizeof text);
  CHECK_STR(text, "second\n");
  CHECK(kf_safefile_write_all(target, NULL, 0, 0644) == 0); /* empty is fine */
  CHECK(stat(target, &st) == 0 && st.st_size == 0);
  CHECK_EQ_U64(entries(dir), 1); /* no temporary file left */
  /* A relative path (no '/') goes into the working directory. */
  CHECK(chdir(dir) == 0);
  CHECK(kf_safefile_write_all("here.svg", "h", 1, 0644) == 0);
  get("here.svg", text, sizeof text);
  CHECK_STR(text, "h");
  CHECK_EQ_U64(entries(dir), 2);
}

/* A hard link to someone's file at the target is a regular file: it is
 * replaced (the name now holds our bytes), the other name keeps its own. */
static void safefile_replaces_a_hard_link_without_writing_through_it(void) {
  char dir[64], target[128], victim[128], text[128];
  fresh_dir(dir, sizeof dir);
  join(target, sizeof target, dir, "out.map");
  join(victim, sizeof victim, dir, "victim");
  put(victim, VICTIM);
  CHECK(link(victim, target) == 0);
  CHECK(kf_safefile_write_all(target, "map\n", 4, 0644) == 0);
  get(victim, text, sizeof text);
  CHECK_STR(text, VICTIM);
  get(target, text, sizeof text);
  CHECK_STR(text, "map\n");
}

/* Something not a regular file at the target (made by `plant`) is refused:
 * the target stays what it was, and no temporary file is left. */
static void refuses(const char *what, int (*plant)(const char *target, const char *victim)) {
  char dir[64], target[128], victim[128], text[128];
  fresh_dir(dir, sizeof dir);
  join(target, sizeof target, dir, "out.map");
  join(victim, sizeof victim, dir, "victim");
  put(victim, VICTIM);
  CHECK(plant(target, victim) == 0);
  struct stat before, after;
  CHECK(lstat(target, &before) == 0);
  int rc = kf_safefile_write_all(target, "map\n", 4, 0644);
  if (rc != -KF_ERR_UNSAFE_PATH) fprintf(stderr, "  %s: rc %d\n", what, rc);
  CHECK(rc == -KF_ERR_UNSAFE_PATH);
  CHECK(lstat(target, &after) == 0);
  CHECK(before.st_ino == after.st_ino && before.st_mode == after.st_mode);
  get(victim, text, sizeof text);
  CHECK_STR(text, VICTIM);
  CHECK_EQ_U64(entries(dir), 2); /* the target and the victim, nothing else */

  /* The streaming way is refused at commit alike. */
  kf_safefile_t *f;
  CHECK(kf_safefile_open(target, 0644, &f) == 0);
  CHECK(kf_safefile_write(f, "map\n", 4) == 0);
  CHECK(kf_safefile_commit(f) == -KF_ERR_UNSAFE_PATH);
  get(victim, text, sizeof text);
  CHECK_STR(text, VICTIM);
  CHECK_EQ_U64(entries(dir), 2);
}

static int plant_symlink(const char *target, const char *victim) { return symlink(victim, target); }
static int plant_fifo(const char *target, const char *victim) { (void)victim; return mkfifo(target, 0666); }
static int plant_dir(const char *target, const char *victim) { (void)victim; return mkdir(target, 0777); }
/* /dev/null's numbers: a char device node at the target. Root only. */
static int plant_device(const char *target, const char *victim) {
  (void)victim;
  return mknod(target, S_IFCHR | 0666, makedev(1, 3));
}

static void safefile_refuses_a_symlink_at_the_target(void) { refuses("symlink", plant_symlink); }
static void safefile_refuses_a_fifo_at_the_target(void) { refuses("fifo", plant_fifo); }
static void safefile_refuses_a_directory_at_the_target(void) { refuses("directory", plant_dir); }
static void safefile_refuses_a_device_at_the_target(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "  skipped: mknod needs root\n");
    return;
  }
  refuses("device", plant_device);
}

/* The old perf map code wrote PATH.PID.tmp with O_CREAT|O_TRUNC: a link
 * planted there was followed. Links at every name the old code could pick
 * are now simply never opened. */
static void safefile_ignores_links_at_predictable_temporary_names(void) {
  char dir[64], target[128], victim[128], link_[192], text[128];
  fresh_dir(dir, sizeof dir);
  join(target, sizeof target, dir, "perf-1.map");
  join(victim, sizeof victim, dir, "victim");
  put(victim, VICTIM);
  snprintf(link_, sizeof link_, "%s.%d.tmp", target, (int)getpid());
  CHECK(symlink(victim, link_) == 0);
  snprintf(link_, sizeof link_, "%s/.perf-1.map.%d.tmp", dir, (int)getpid());
  CHECK(symlink(victim, link_) == 0);
  CHECK(kf_safefile_write_all(target, "map\n", 4, 0644) == 0);
  get(victim, text, sizeof text);
  CHECK_STR(text, VICTIM);
  get(target, text, sizeof text);
  CHECK_STR(text, "map\n");
  struct stat st;
  CHECK(lstat(target, &st) == 0 && S_ISREG(st.st_mode));
  CHECK_EQ_U64(entries(dir), 4); /* victim, two links, the map */
}

static void safefile_streams_in_chunks(void) {
  char dir[64], target[128];
  fresh_dir(dir, sizeof dir);
  join(target, sizeof target, dir, "big.folded");
  static char big[200 * 1024];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
  kf_safefile_t *f;
  CHECK(kf_safefile_open(target, 0600, &f) == 0);
  CHECK_EQ_U64(entries(dir), 1); /* the temporary file, not yet the target */
  CHECK(access(target, F_OK) != 0);
  size_t off = 0;
  /* Small chunks (gathered), then one larger than the buffer (straight
   * through), then small ones again. */
  for (; off < 10000; off += 7) CHECK(kf_safefile_write(f, big + off, 7) == 0);
  CHECK(kf_safefile_write(f, big + off, 100 * 1024) == 0);
  off += 100 * 1024;
  for (; off + 1000 <= sizeof big; off += 1000) CHECK(kf_safefile_write(f, big + off, 1000) == 0);
  CHECK(kf_safefile_write(f, big + off, sizeof big - off) == 0);
  CHECK(kf_safefile_commit(f) == 0);
  CHECK_EQ_U64(entries(dir), 1);
  const char *data;
  size_t len;
  CHECK(kf_map_file(target, &data, &len) == 0);
  CHECK_EQ_U64(len, sizeof big);
  CHECK(memcmp(data, big, len) == 0);
  kf_unmap_file(data, len);

  /* Abort: the target keeps its bytes, the temporary file is gone. */
  CHECK(kf_safefile_open(target, 0600, &f) == 0);
  CHECK(kf_safefile_write(f, "half", 4) == 0);
  kf_safefile_abort(f);
  kf_safefile_abort(NULL);
  CHECK_EQ_U64(entries(dir), 1);
  struct stat st;
  CHECK(stat(target, &st) == 0 && (size_t)st.st_size == sizeof big);
}

static void safefile_refuses_directory_names_and_missing_directories(void) {
  char dir[64], path[160];
  fresh_dir(dir, sizeof dir);
  kf_safefile_t *f = (kf_safefile_t *)1;
  join(path, sizeof path, dir, "");
  CHECK(kf_safefile_open(path, 0644, &f) == -EISDIR && f == NULL);
  join(path, sizeof path, dir, "..");
  CHECK(kf_safefile_write_all(path, "x", 1, 0644) == -EISDIR);
  join(path, sizeof path, dir, "no/such/dir.map");
  CHECK(kf_safefile_write_all(path, "x", 1, 0644) == -ENOENT);
  CHECK_EQ_U64(entries(dir), 0);
  /* A write error names itself: the temporary file is removed. */
  if (access("/dev/full", W_OK) == 0) {
    CHECK(kf_safefile_write_all("/dev/full", "x", 1, 0644) < 0);
  }
  CHECK(strcmp(kf_error_name(-KF_ERR_UNSAFE_PATH), "KFLAME_ERR_UNSAFE_PATH") == 0);
}

/* Input side: a FIFO nobody writes reads as empty, at once. */
static void map_file_does_not_block_on_a_fifo_without_writer(void) {
  char dir[64], fifo[128];
  fresh_dir(dir, sizeof dir);
  join(fifo, sizeof fifo, dir, "in.fifo");
  CHECK(mkfifo(fifo, 0600) == 0);
  const char *data = (const char *)1;
  size_t len = 1;
  CHECK(kf_map_file(fifo, &data, &len) == 0); /* kftest's alarm fails a hang */
  CHECK(data == NULL && len == 0);
  CHECK(kf_map_file(dir, &data, &len) == -EISDIR);
}

/* A pipe (`kflame svg <(cmd)`) is read to its end, across many reads. */
static void map_file_reads_a_pipe_to_the_end(void) {
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    close(p[0]);
    char line[32];
    for (int i = 0; i < 200000; i++) {
      int n = snprintf(line, sizeof line, "main;f%d 1\n", i % 1000);
      if (write(p[1], line, (size_t)n) != n) _exit(1);
    }
    _exit(0);
  }
  close(p[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
  const char *data;
  size_t len;
  CHECK(kf_map_file(path, &data, &len) == 0);
  close(p[0]);
  int status;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  size_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
  CHECK_EQ_U64(lines, 200000);
  CHECK(memcmp(data, "main;f0 1\nmain;f1 1\n", 20) == 0);
  CHECK(memcmp(data + len - 12, "main;f999 1\n", 12) == 0);
  kf_unmap_file(data, len);

  /* A regular file that does not know its size is read too. */
  CHECK(kf_map_file("/proc/self/status", &data, &len) == 0);
  CHECK(len > 0 && memcmp(data, "Name:", 5) == 0);
  kf_unmap_file(data, len);
}

static const kftest_case_t cases[] = {
    {"safefile: writes a new file, replaces a regular one", safefile_writes_a_new_file_and_replaces_a_regular_one},
    {"safefile: a hard link at the target is replaced, not written through", safefile_replaces_a_hard_link_without_writing_through_it},
    {"safefile: a symlink at the target is refused", safefile_refuses_a_symlink_at_the_target},
    {"safefile: a FIFO at the target is refused", safefile_refuses_a_fifo_at_the_target},
    {"safefile: a directory at the target is refused", safefile_refuses_a_directory_at_the_target},
    {"safefile: a device at the target is refused (root)", safefile_refuses_a_device_at_the_target},
    {"safefile: links at the old temporary names are not followed", safefile_ignores_links_at_predictable_temporary_names},
    {"safefile: streams in chunks, abort leaves nothing", safefile_streams_in_chunks},
    {"safefile: directory names and missing directories", safefile_refuses_directory_names_and_missing_directories},
    {"map_file: a FIFO without writer reads empty at once", map_file_does_not_block_on_a_fifo_without_writer},
    {"map_file: a pipe is read to its end", map_file_reads_a_pipe_to_the_end},
    {NULL, NULL},
};

int main(int argc, char **argv) { return kftest_main(cases, argc, argv); }
