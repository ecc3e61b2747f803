#include "kftest.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_TIMEOUT_S 20

int kftest_main(const kftest_case_t *cases, int argc, char **argv) {
  int passed = 0, failed = 0;
  for (const kftest_case_t *c = cases; c->name; c++) {
    if (argc > 1 && !strstr(c->name, argv[1])) continue;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(TEST_TIMEOUT_S);
      c->fn();
      exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) {
      passed++;
      printf("ok %s\n", c->name);
    } else {
      failed++;
      if (WIFSIGNALED(status))
        printf("not ok %s (signal %d%s)\n", c->name, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? ": timed out" : "");
      else
        printf("not ok %s\n", c->name);
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
