// Assertions of the fuzz harnesses: a broken property is a crash that libFuzzer records, with
// the property and the harness's file and line on stderr.
#ifndef TPC_FUZZ_CHECK_H_
#define TPC_FUZZ_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

/// Aborts with "file:line: property violated: <cond>" unless |cond| holds.
#define TPC_FUZZ_CHECK(cond)                                                        \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                      \
    }                                                                               \
  } while (0)

#endif  // TPC_FUZZ_CHECK_H_
