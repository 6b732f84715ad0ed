// Unit tests of runtime/tprt_status and tprt_allocator.
#include <stdint.h>

#include "tprt_allocator.h"
#include "tprt_dtype.h"
#include "tprt_test.h"

static tprt_status_t tprt__fails_with_context(void) {
  TPRT_RETURN_IF_ERROR(tprt_make_status(TPRT_STATUS_NOT_FOUND, "tensor '%s' is missing", "w1"), "loading %s",
                       "ckpt.safetensors");
  return NULL;
}

TPRT_TEST(status_carries_code_message_and_context) {
  tprt_status_t s = tprt__fails_with_context();
  TPRT_EXPECT(s != NULL);
  TPRT_EXPECT_EQ_I64(tprt_status_code(s), TPRT_STATUS_NOT_FOUND);
  TPRT_EXPECT_STREQ(tprt_status_message(s), "loading ckpt.safetensors: tensor 'w1' is missing");
  char buf[256];
  TPRT_EXPECT_CONTAINS(tprt_status_format(s, buf, sizeof buf), "test_status.c:");
  TPRT_EXPECT_CONTAINS(buf, ": not found: loading");
  tprt_status_free(s);
}

TPRT_TEST(status_ok_is_null) {
  TPRT_EXPECT(tprt_status_is_ok(NULL));
  TPRT_EXPECT_EQ_I64(tprt_status_code(NULL), TPRT_STATUS_OK);
  TPRT_EXPECT_STREQ(tprt_status_message(NULL), "");
}

TPRT_TEST(status_join_keeps_first_failure) {
  tprt_status_t a = tprt_make_status(TPRT_STATUS_ABORTED, "first");
  tprt_status_t b = tprt_make_status(TPRT_STATUS_INTERNAL, "second");
  tprt_status_t j = tprt_status_join(a, b);
  TPRT_EXPECT_STREQ(tprt_status_message(j), "first");
  tprt_status_free(j);
  j = tprt_status_join(NULL, tprt_make_status(TPRT_STATUS_INTERNAL, "only"));
  TPRT_EXPECT_STREQ(tprt_status_message(j), "only");
  tprt_status_free(j);
}

TPRT_TEST(allocator_aligns_and_zeroes) {
  tprt_allocator_t a = tprt_allocator_system();
  void* p = NULL;
  TPRT_EXPECT_OK(tprt_allocator_malloc(a, 1000, 256, &p));
  TPRT_EXPECT(p != NULL);
  TPRT_EXPECT_EQ_I64((uintptr_t)p % 256, 0);
  int zero = 1;
  for (int i = 0; i < 1000; ++i) zero &= ((unsigned char*)p)[i] == 0;
  TPRT_EXPECT(zero);
  tprt_allocator_free(a, p);
  TPRT_EXPECT_STATUS(tprt_allocator_malloc(a, 16, 48, &p), TPRT_STATUS_INVALID_ARGUMENT, "not a power of two");
}

TPRT_TEST(dtype_names_and_sizes) {
  TPRT_EXPECT_EQ_I64(tprt_dtype_parse("bf16"), TPRT_DTYPE_BF16);
  TPRT_EXPECT_EQ_I64(tprt_dtype_parse("F8_E4M3"), TPRT_DTYPE_F8E4M3FN);
  TPRT_EXPECT_EQ_I64(tprt_dtype_parse("nope"), -1);
  TPRT_EXPECT_EQ_I64(tprt_dtype_bytes(TPRT_DTYPE_F4E2M1FN, 5), 3);
  TPRT_EXPECT_EQ_I64(tprt_dtype_bytes(TPRT_DTYPE_F32, 5), 20);
  TPRT_EXPECT_STREQ(tprt_dtype_name(TPRT_DTYPE_F8E8M0FNU), "f8E8M0FNU");
}
