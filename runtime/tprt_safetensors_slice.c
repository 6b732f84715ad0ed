// Copying a rectangular, optionally strided sub-block of a safetensors tensor (see
// tprt_safetensors_read_slice in tprt_safetensors.h, and docs/io.md for how sharded loading uses it).
//
// The copy walks the outer dimensions with an odometer and moves one "run" per step. Trailing
// dimensions that the slice covers completely with stride 1 are merged into the run, so a row
// block of a row-major weight is a single memcpy and a column block is one memcpy per row.
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tprt_safetensors_impl.h"

// Copies |count| elements of |bits| bits from source element |src_elem| (then every |step|-th) to
// consecutive elements from |dst_elem|. Only 4-bit and whole-byte element types exist.
static void tprt__st_copy_run(uint8_t* dst, int64_t dst_elem, const uint8_t* src, int64_t src_elem, int64_t count,
                              int64_t step, int bits) {
  if (bits % 8 == 0) {
    size_t esize = (size_t)bits / 8;
    uint8_t* d = dst + (size_t)dst_elem * esize;
    const uint8_t* s = src + (size_t)src_elem * esize;
    if (step == 1) {
      memcpy(d, s, (size_t)count * esize);
      return;
    }
    for (int64_t i = 0; i < count; ++i, d += esize, s += (size_t)step * esize) memcpy(d, s, esize);
    return;
  }
  // F4: element j lives in byte j / 2, in the low nibble when j is even. When both ends are
  // byte-aligned and the run is dense, whole bytes move at once.
  if (step == 1 && src_elem % 2 == 0 && dst_elem % 2 == 0) {
    memcpy(dst + dst_elem / 2, src + src_elem / 2, (size_t)(count / 2));
    if (count % 2 == 0) return;
    dst_elem += count - 1;
    src_elem += count - 1;
    count = 1;
  }
  for (int64_t i = 0; i < count; ++i, ++dst_elem, src_elem += step) {
    unsigned v = (src[src_elem / 2] >> (4 * (src_elem % 2))) & 0xFu;
    uint8_t* d = &dst[dst_elem / 2];
    unsigned shift = 4u * (unsigned)(dst_elem % 2);
    *d = (uint8_t)((*d & ~(0xFu << shift)) | (v << shift));
  }
}

// Checks the slice against the tensor and the destination; fills |strides| (1 where NULL).
static tprt_status_t tprt__st_check_slice(const tprt_safetensors_t* file, const tprt__safetensors_entry_t* e,
                                          const tprt_tensor_t* out_view, int rank, const int64_t* offsets,
                                          const int64_t* sizes, const int64_t* strides_or_null, int64_t* strides) {
  const char* path = file->path;
  char shape[160], want[160];
  tprt__safetensors_format_shape(e->rank, e->dims, shape, sizeof shape);
  if (rank != e->rank)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: tensor '%s' has rank %d (shape %s), but the slice has rank %d", path, e->name, e->rank,
                            shape, rank);
  if (rank > 0 && (!offsets || !sizes))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': slice offsets or sizes are NULL", path,
                            e->name);
  for (int d = 0; d < rank; ++d) {
    strides[d] = strides_or_null ? strides_or_null[d] : 1;
    if (offsets[d] < 0 || sizes[d] < 0 || strides[d] < 1)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "%s: tensor '%s' slice dimension %d has offset %" PRId64 ", size %" PRId64
                              ", stride %" PRId64 "; offsets and sizes must be >= 0 and strides >= 1",
                              path, e->name, d, offsets[d], sizes[d], strides[d]);
    // The last index read is offsets + (sizes - 1) * strides; divide instead of multiplying so that
    // huge values cannot overflow.
    bool inside =
        sizes[d] == 0 || (offsets[d] < e->dims[d] && sizes[d] - 1 <= (e->dims[d] - 1 - offsets[d]) / strides[d]);
    if (!inside)
      return tprt_make_status(TPRT_STATUS_OUT_OF_RANGE,
                              "%s: tensor '%s' slice dimension %d (offset %" PRId64 ", size %" PRId64
                              ", stride %" PRId64 ") runs past its %" PRId64 " elements (shape %s)",
                              path, e->name, d, offsets[d], sizes[d], strides[d], e->dims[d], shape);
  }
  tprt__safetensors_format_shape(rank, sizes, want, sizeof want);
  tprt_tensor_t expected = tprt_tensor_make(NULL, e->dtype, rank, sizes);
  if (!tprt_tensor_same_layout(out_view, &expected)) {
    char got[160];
    const char* got_dtype = tprt_dtype_safetensors_name(out_view->dtype);
    int got_rank = out_view->rank < 0 || out_view->rank > TPRT_MAX_RANK ? 0 : out_view->rank;
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: tensor '%s' slice is %s %s, but the destination is %s %s", path, e->name, want,
                            e->dtype_name, tprt__safetensors_format_shape(got_rank, out_view->dims, got, sizeof got),
                            got_dtype ? got_dtype : "(invalid dtype)");
  }
  if (!out_view->data && tprt_tensor_numel(out_view) > 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': the destination data pointer is NULL", path,
                            e->name);
  return NULL;
}

tprt_status_t tprt_safetensors_read_slice(const tprt_safetensors_t* file, const char* name,
                                          const tprt_tensor_t* out_view, int rank, const int64_t* offsets,
                                          const int64_t* sizes, const int64_t* strides_or_null) {
  const tprt__safetensors_entry_t* e = tprt__safetensors_lookup(file, name);
  if (!e) return tprt__safetensors_not_found(file, name);
  TPRT__ST_RETURN_IF_ERROR(tprt__safetensors_check_supported(file, e));
  int64_t strides[TPRT_MAX_RANK];
  TPRT__ST_RETURN_IF_ERROR(tprt__st_check_slice(file, e, out_view, rank, offsets, sizes, strides_or_null, strides));
  int64_t total = tprt_tensor_numel(out_view);
  if (total == 0) return NULL;
  const uint8_t* src = file->data + e->begin;
  uint8_t* dst = out_view->data;
  if (rank == 0) {
    tprt__st_copy_run(dst, 0, src, 0, 1, 1, e->bits);
  } else {
    // Element strides of the source, row-major.
    int64_t pitch[TPRT_MAX_RANK];
    pitch[rank - 1] = 1;
    for (int d = rank - 2; d >= 0; --d) pitch[d] = pitch[d + 1] * e->dims[d + 1];
    // The run covers dimensions [k, rank): merge dimension k-1 into it while dimension k is fully
    // selected with stride 1 (so the run is contiguous) and dimension k-1 has stride 1 too.
    int k = rank - 1;
    int64_t run = sizes[k], step = strides[k];
    while (k > 0 && step == 1 && offsets[k] == 0 && sizes[k] == e->dims[k] && strides[k - 1] == 1) {
      --k;
      run *= sizes[k];
    }
    int64_t base = 0;  // source element of the run's first element, excluding the outer indices
    for (int d = k; d < rank; ++d) base += offsets[d] * pitch[d];
    int64_t index[TPRT_MAX_RANK] = {0};
    for (int64_t dst_elem = 0; dst_elem < total; dst_elem += run) {
      int64_t src_elem = base;
      for (int d = 0; d < k; ++d) src_elem += (offsets[d] + index[d] * strides[d]) * pitch[d];
      tprt__st_copy_run(dst, dst_elem, src, src_elem, run, step, e->bits);
      for (int d = k - 1; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
    }
  }
  // Packed F4 with an odd count: the byte that holds the last element has an unused high nibble.
  if (e->bits == 4 && total % 2 == 1) dst[total / 2] &= 0x0F;
  return NULL;
}
