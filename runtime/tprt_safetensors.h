// Reading and writing safetensors checkpoints (the format subset and the messages are in
// docs/io.md).
//
// A safetensors file is an 8-byte little-endian header size N, N bytes of UTF-8 JSON that map each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
// "__metadata__" object of strings), then the row-major little-endian bytes of every tensor,
// contiguous and in any order.
//
// tprt_safetensors_open validates the whole header up front: every later call either copies bytes
// that are known to lie inside the file or fails with a status whose message starts with the file's
// path and names the problem in one line ("ckpt.safetensors: tensor 'w1' not found (the file has:
// w2, gamma)"). Codes: NOT_FOUND for a missing file or tensor, DATA_LOSS for a truncated or corrupt
// file, INVALID_ARGUMENT for a destination whose dtype or shape does not match, OUT_OF_RANGE for a
// slice outside the tensor, UNIMPLEMENTED for a dtype or rank that tpc does not support.
//
// Thread safety: an open file is immutable; info, find, metadata, read and read_slice may run
// concurrently on one file from several threads. Opening and closing are not synchronized with
// those calls. The writer is reentrant for distinct paths.
#ifndef TPRT_SAFETENSORS_H_
#define TPRT_SAFETENSORS_H_

#include <stdint.h>

#include "tprt_allocator.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

//===----------------------------------------------------------------------===//
// tprt_safetensors_t: an open file
//===----------------------------------------------------------------------===//

/// An open, validated safetensors file whose data is memory-mapped read-only.
typedef struct tprt_safetensors_t tprt_safetensors_t;

/// What the header says about one tensor. The strings belong to the file and stay valid until
/// tprt_safetensors_close.
typedef struct tprt_safetensors_info_t {
  const char* name;
  int dtype;               // tprt_dtype_t, or -1 when the file's dtype is one tpc does not support
  const char* dtype_name;  // the file's spelling: "BF16", "F8_E4M3", "F64", ...
  int rank;
  int64_t dims[TPRT_MAX_RANK];  // dims[rank..] are 1, as in tprt_tensor_t
  uint64_t file_offset;         // where the tensor's bytes start, from the beginning of the file
  uint64_t byte_size;           // how many bytes it occupies (F4 rounds up to whole bytes)
} tprt_safetensors_info_t;

/// Opens |path|, validates its header and maps its data; on success |*out_file| is a new file owned
/// by the caller (release with tprt_safetensors_close). Host memory comes from |allocator|.
/// A tensor whose dtype is a standard safetensors one that tpc does not support (F64, I8, BOOL, ...)
/// is accepted here and rejected when read; an unknown dtype or a rank above TPRT_MAX_RANK fails
/// with UNIMPLEMENTED.
tprt_status_t tprt_safetensors_open(const char* path, tprt_allocator_t allocator,
                                    tprt_safetensors_t** out_file) TPRT_MUST_USE_RESULT;

/// Unmaps and frees |file| (NULL-safe). Views and strings obtained from it become invalid.
void tprt_safetensors_close(tprt_safetensors_t* file);

/// Returns the path |file| was opened with (for messages). Valid until close.
const char* tprt_safetensors_path(const tprt_safetensors_t* file);

/// Returns the number of tensors in |file|; indices 0..count-1 follow the header's order.
int tprt_safetensors_count(const tprt_safetensors_t* file);

/// Describes tensor |index| into |*out_info|; OUT_OF_RANGE when |index| is not in [0, count).
tprt_status_t tprt_safetensors_info(const tprt_safetensors_t* file, int index,
                                    tprt_safetensors_info_t* out_info) TPRT_MUST_USE_RESULT;

/// Returns the index of the tensor called |name|, or -1 (binary search over a sorted name index).
int tprt_safetensors_find(const tprt_safetensors_t* file, const char* name);

/// Returns the "__metadata__" value stored under |key|, or NULL. Valid until close.
const char* tprt_safetensors_metadata(const tprt_safetensors_t* file, const char* key);

/// Copies the whole tensor |name| into |expect->data|, after checking that the file's dtype and
/// shape equal |expect|'s. |expect->data| must hold tprt_tensor_bytes(expect) bytes. The bytes are
/// copied unchanged (little-endian, F4 packed low nibble first).
tprt_status_t tprt_safetensors_read(const tprt_safetensors_t* file, const char* name,
                                    const tprt_tensor_t* expect) TPRT_MUST_USE_RESULT;

/// Copies a rectangular sub-block of tensor |name| into |out_view->data|, densely and row-major.
///
/// |rank| must equal the tensor's rank; for every dimension d, result index i reads source index
/// |offsets[d]| + i * |strides_or_null[d]| for i in [0, |sizes[d]|). NULL strides mean 1
/// everywhere; a stride of 2 selects every other row or column (deinterleaving fused gate/up
/// weights). Offsets and sizes must be >= 0, strides >= 1, and the last selected index must lie
/// inside the dimension (OUT_OF_RANGE otherwise). |out_view| must have the tensor's dtype, rank
/// |rank| and dims equal to |sizes| (INVALID_ARGUMENT otherwise). For F4 an odd element count
/// leaves the high nibble of the last byte zero. For rank 0, |offsets| and |sizes| may be NULL.
///
/// Typical use, rank r of R loading its shard of a linear weight w[N, K] (docs/io.md):
///   column-parallel (split along N): offsets = {r * N / R, 0}, sizes = {N / R, K}, no strides;
///   row-parallel (split along K):    offsets = {0, r * K / R}, sizes = {N, K / R}, no strides.
tprt_status_t tprt_safetensors_read_slice(const tprt_safetensors_t* file, const char* name,
                                          const tprt_tensor_t* out_view, int rank, const int64_t* offsets,
                                          const int64_t* sizes, const int64_t* strides_or_null) TPRT_MUST_USE_RESULT;

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// Writes |count| tensors, called |names|[i] and described by |tensors|[i], to |path|, with the
/// NULL-terminated "key", "value", ... list |metadata_kv| (or NULL) as "__metadata__". The header is
/// compact JSON padded with spaces to a multiple of 8 bytes; the data follows in the given order.
/// The file is written to "<path>.tmp", flushed to disk and renamed over |path|, so |path| holds
/// either its old contents or the complete new file, never a partial one; on failure the temporary
/// file is removed. Names must be unique, valid UTF-8 and not "__metadata__".
/// Note: an F4 tensor with an odd element count is written with its byte count rounded up (the
/// padding nibble zeroed); upstream safetensors refuses such files, tpc reads them.
tprt_status_t tprt_safetensors_write(const char* path, int count, const char* const* names,
                                     const tprt_tensor_t* tensors, const char* const* metadata_kv) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_SAFETENSORS_H_
