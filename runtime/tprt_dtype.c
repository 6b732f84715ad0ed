// Element type names and sizes (see tprt_dtype.h).
#include "tprt_dtype.h"

#include <string.h>

static const struct {
  const char* mlir;
  const char* safetensors;
  int bits;
} tprt__dtypes[TPRT_DTYPE_COUNT] = {
    [TPRT_DTYPE_BF16] = {"bf16", "BF16", 16},
    [TPRT_DTYPE_F16] = {"f16", "F16", 16},
    [TPRT_DTYPE_F32] = {"f32", "F32", 32},
    [TPRT_DTYPE_F8E4M3FN] = {"f8E4M3FN", "F8_E4M3", 8},
    [TPRT_DTYPE_F8E5M2] = {"f8E5M2", "F8_E5M2", 8},
    [TPRT_DTYPE_F8E8M0FNU] = {"f8E8M0FNU", "F8_E8M0", 8},
    [TPRT_DTYPE_F4E2M1FN] = {"f4E2M1FN", "F4", 4},
    [TPRT_DTYPE_I32] = {"i32", "I32", 32},
    [TPRT_DTYPE_I64] = {"i64", "I64", 64},
};

static int tprt__valid(int d) { return d >= 0 && d < TPRT_DTYPE_COUNT; }

const char* tprt_dtype_name(int dtype) { return tprt__valid(dtype) ? tprt__dtypes[dtype].mlir : "?"; }

const char* tprt_dtype_safetensors_name(int dtype) {
  return tprt__valid(dtype) ? tprt__dtypes[dtype].safetensors : NULL;
}

int tprt_dtype_parse(const char* name) {
  for (int d = 0; d < TPRT_DTYPE_COUNT; ++d)
    if (strcmp(name, tprt__dtypes[d].mlir) == 0 || strcmp(name, tprt__dtypes[d].safetensors) == 0) return d;
  return -1;
}

int tprt_dtype_bits(int dtype) { return tprt__valid(dtype) ? tprt__dtypes[dtype].bits : 0; }

size_t tprt_dtype_bytes(int dtype, int64_t count) {
  if (count <= 0) return 0;
  return (size_t)(((uint64_t)count * (uint64_t)tprt_dtype_bits(dtype) + 7) / 8);
}
