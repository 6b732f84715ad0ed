// The shared main of the C unit tests (see tprt_test.h).
#include <stdlib.h>

#include "tprt_test.h"

#define TPRT_MAX_TESTS 1024

static struct {
  const char* name;
  tprt_test_fn_t fn;
} tprt__tests[TPRT_MAX_TESTS];
static int tprt__num_tests;
static int tprt__current_failed;

void tprt_test_register(const char* name, tprt_test_fn_t fn) {
  if (tprt__num_tests == TPRT_MAX_TESTS) {
    fprintf(stderr, "tprt_test: more than %d tests in one binary\n", TPRT_MAX_TESTS);
    exit(2);
  }
  tprt__tests[tprt__num_tests].name = name;
  tprt__tests[tprt__num_tests].fn = fn;
  ++tprt__num_tests;
}

void tprt_test_fail(void) { tprt__current_failed = 1; }

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0;
  for (int i = 0; i < tprt__num_tests; ++i) {
    if (filter && !strstr(tprt__tests[i].name, filter)) continue;
    tprt__current_failed = 0;
    tprt__tests[i].fn();
    printf("[%s] %s\n", tprt__current_failed ? "FAIL" : " OK ", tprt__tests[i].name);
    fflush(stdout);
    if (tprt__current_failed)
      ++failed;
    else
      ++passed;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
