// Element types of runtime tensors; the codes are part of the ABI (tprt_abi.h).
#ifndef TPRT_DTYPE_H_
#define TPRT_DTYPE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Element types, matching the dialect's (docs/dialect.md). Values are ABI: never renumber.
typedef enum tprt_dtype_e {
  TPRT_DTYPE_BF16 = 0,
  TPRT_DTYPE_F16 = 1,
  TPRT_DTYPE_F32 = 2,
  TPRT_DTYPE_F8E4M3FN = 3,
  TPRT_DTYPE_F8E5M2 = 4,
  TPRT_DTYPE_F8E8M0FNU = 5,
  TPRT_DTYPE_F4E2M1FN = 6,  // two elements per byte, element 2j in the low nibble
  TPRT_DTYPE_I32 = 7,
  TPRT_DTYPE_I64 = 8,
  TPRT_DTYPE_COUNT
} tprt_dtype_t;

/// Returns the MLIR spelling ("bf16", "f8E4M3FN", ...) or "?" for an invalid code.
const char* tprt_dtype_name(int dtype);

/// Returns the safetensors spelling ("BF16", "F8_E4M3", ...) or NULL when it has none.
const char* tprt_dtype_safetensors_name(int dtype);

/// Returns the dtype with MLIR or safetensors spelling |name|, or -1.
int tprt_dtype_parse(const char* name);

/// Returns the storage bits per element (4 for f4E2M1FN) or 0 for an invalid code.
int tprt_dtype_bits(int dtype);

/// Returns the bytes that |count| elements occupy (f4 rounds up to whole bytes).
size_t tprt_dtype_bytes(int dtype, int64_t count);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_DTYPE_H_
