// A small C unit-test harness (libuv/llm.c style): TPRT_TEST(name) defines a test that
// registers itself; the shared main (tprt_test_main.c) runs them all, or those whose name
// contains argv[1], prints one line per test and "N passed, N failed", and exits non-zero on any
// failure. Assertions print the expression, both values and file:line, and keep going.
#ifndef TPRT_TEST_H_
#define TPRT_TEST_H_

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tprt_status.h"

typedef void (*tprt_test_fn_t)(void);
void tprt_test_register(const char* name, tprt_test_fn_t fn);
/// Records a failure of the running test (used by the macros).
void tprt_test_fail(void);

#define TPRT_TEST(name)                                                                     \
  static void tprt_test_##name(void);                                                       \
  __attribute__((constructor)) static void tprt_test_register_##name(void) {                \
    tprt_test_register(#name, tprt_test_##name);                                            \
  }                                                                                         \
  static void tprt_test_##name(void)

#define TPRT__FAIL(...)                                        \
  do {                                                         \
    fprintf(stderr, "%s:%d: failure: ", __FILE__, __LINE__);   \
    fprintf(stderr, __VA_ARGS__);                              \
    fputc('\n', stderr);                                       \
    tprt_test_fail();                                          \
  } while (0)

#define TPRT_EXPECT(cond) \
  do {                    \
    if (!(cond)) TPRT__FAIL("expected %s", #cond); \
  } while (0)

#define TPRT_EXPECT_EQ_I64(a, b)                                                                   \
  do {                                                                                             \
    int64_t tprt__a = (int64_t)(a), tprt__b = (int64_t)(b);                                        \
    if (tprt__a != tprt__b) TPRT__FAIL("%s == %s: %" PRId64 " vs %" PRId64, #a, #b, tprt__a, tprt__b); \
  } while (0)

/// Compares two values bit for bit, printed in hex (exact-numerics checks).
#define TPRT_EXPECT_EQ_BITS(a, b)                                                                            \
  do {                                                                                                       \
    uint64_t tprt__a = (uint64_t)(a), tprt__b = (uint64_t)(b);                                               \
    if (tprt__a != tprt__b) TPRT__FAIL("%s == %s: 0x%" PRIx64 " vs 0x%" PRIx64, #a, #b, tprt__a, tprt__b);   \
  } while (0)

/// |a - b| <= atol + rtol * |b|.
#define TPRT_EXPECT_NEAR(a, b, atol, rtol)                                                              \
  do {                                                                                                  \
    double tprt__a = (double)(a), tprt__b = (double)(b);                                                \
    if (!(fabs(tprt__a - tprt__b) <= (atol) + (rtol)*fabs(tprt__b)))                                    \
      TPRT__FAIL("%s ~= %s: %.9g vs %.9g (atol %g, rtol %g)", #a, #b, tprt__a, tprt__b, (double)(atol), \
                 (double)(rtol));                                                                       \
  } while (0)

#define TPRT_EXPECT_STREQ(a, b)                                                        \
  do {                                                                                 \
    const char *tprt__a = (a), *tprt__b = (b);                                         \
    if (strcmp(tprt__a, tprt__b) != 0) TPRT__FAIL("%s == %s: \"%s\" vs \"%s\"", #a, #b, tprt__a, tprt__b); \
  } while (0)

#define TPRT_EXPECT_CONTAINS(haystack, needle)                                                 \
  do {                                                                                         \
    const char *tprt__h = (haystack), *tprt__n = (needle);                                     \
    if (!strstr(tprt__h, tprt__n)) TPRT__FAIL("\"%s\" does not contain \"%s\"", tprt__h, tprt__n); \
  } while (0)

/// Expects success; frees the status either way.
#define TPRT_EXPECT_OK(expr)                                               \
  do {                                                                     \
    tprt_status_t tprt__s = (expr);                                        \
    if (tprt__s) {                                                         \
      char tprt__buf[1024];                                                \
      TPRT__FAIL("%s failed: %s", #expr, tprt_status_format(tprt__s, tprt__buf, sizeof tprt__buf)); \
      tprt_status_free(tprt__s);                                           \
    }                                                                      \
  } while (0)

/// Expects a failure with |code| whose message contains |text|; frees the status.
#define TPRT_EXPECT_STATUS(expr, code, text)                                                      \
  do {                                                                                            \
    tprt_status_t tprt__s = (expr);                                                               \
    if (!tprt__s) {                                                                               \
      TPRT__FAIL("%s succeeded; expected %s", #expr, tprt_status_code_string(code));              \
    } else {                                                                                      \
      if (tprt_status_code(tprt__s) != (code))                                                    \
        TPRT__FAIL("%s: code %s, expected %s (%s)", #expr, tprt_status_code_string(tprt_status_code(tprt__s)), \
                   tprt_status_code_string(code), tprt_status_message(tprt__s));                  \
      if (!strstr(tprt_status_message(tprt__s), (text)))                                          \
        TPRT__FAIL("%s: message \"%s\" does not contain \"%s\"", #expr, tprt_status_message(tprt__s), (text)); \
      tprt_status_free(tprt__s);                                                                  \
    }                                                                                             \
  } while (0)

#endif  // TPRT_TEST_H_
