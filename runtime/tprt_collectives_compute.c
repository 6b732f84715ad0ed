// The data movement and reductions of the CPU collectives: each member computes its own output
// from the group's staged inputs (see tprt_collectives_impl.h). Reductions follow the numerics
// contract exactly: f32 accumulation in the documented order, one round-to-nearest-even at the
// end; the code is compiled with -ffp-contract=off, so no multiply-add is fused.
#include <string.h>

#include "tprt_collectives_impl.h"
#include "tprt_numerics.h"

//===----------------------------------------------------------------------===//
// Loads and stores (conversions from kernels/cpu/tprt_numerics.h, shared with the kernels)
//===----------------------------------------------------------------------===//

// Loads |n| elements of |dtype| starting at element |offset| of |data| as f32.
static void tprt__load_f32(const void* data, int dtype, int64_t offset, int n, float* out) {
  if (dtype == TPRT_DTYPE_F32) {
    memcpy(out, (const float*)data + offset, sizeof(float) * (size_t)n);
    return;
  }
  const uint16_t* h = (const uint16_t*)data + offset;
  if (dtype == TPRT_DTYPE_BF16)
    for (int i = 0; i < n; ++i) out[i] = tprt_bf16_to_f32(h[i]);
  else
    for (int i = 0; i < n; ++i) out[i] = tprt_f16_to_f32(h[i]);
}

// Stores |n| f32 values as |dtype| starting at element |offset| of |data|.
static void tprt__store_f32(void* data, int dtype, int64_t offset, int n, const float* in) {
  if (dtype == TPRT_DTYPE_F32) {
    memcpy((float*)data + offset, in, sizeof(float) * (size_t)n);
    return;
  }
  uint16_t* h = (uint16_t*)data + offset;
  if (dtype == TPRT_DTYPE_BF16)
    for (int i = 0; i < n; ++i) h[i] = tprt_f32_to_bf16(in[i]);
  else
    for (int i = 0; i < n; ++i) h[i] = tprt_f32_to_f16(in[i]);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// Elements reduced per step: the group's values of a block fit in 16 KiB of stack.
#define TPRT__REDUCE_BLOCK 64

// Sums elements [in_offset, in_offset + count) of the |group_size| inputs into elements
// [out_offset, ...) of |out| in |order| (f32, one rounding at the end).
static void tprt__reduce(void* const* inputs, int group_size, int in_dtype, int64_t in_offset, int64_t count, void* out,
                         int out_dtype, int64_t out_offset, tprt_order_t order) {
  float values[TPRT_MAX_WORLD_SIZE][TPRT__REDUCE_BLOCK];
  float sum[TPRT__REDUCE_BLOCK];
  for (int64_t base = 0; base < count; base += TPRT__REDUCE_BLOCK) {
    int n = count - base < TPRT__REDUCE_BLOCK ? (int)(count - base) : TPRT__REDUCE_BLOCK;
    for (int g = 0; g < group_size; ++g) tprt__load_f32(inputs[g], in_dtype, in_offset + base, n, values[g]);
    if (order == TPRT_ORDER_CANONICAL) {
      // The fixed pairwise tree: at stride s, member g (a multiple of 2s) adds member g + s.
      for (int s = 1; s < group_size; s *= 2)
        for (int g = 0; g + s < group_size; g += 2 * s)
          for (int i = 0; i < n; ++i) values[g][i] = values[g][i] + values[g + s][i];
      memcpy(sum, values[0], sizeof(float) * (size_t)n);
    } else {
      // Increasing group rank, starting from rank 0's value (so -0 + -0 stays -0).
      memcpy(sum, values[0], sizeof(float) * (size_t)n);
      for (int g = 1; g < group_size; ++g)
        for (int i = 0; i < n; ++i) sum[i] = sum[i] + values[g][i];
    }
    tprt__store_f32(out, out_dtype, out_offset + base, n, sum);
  }
}

// The elementwise maximum of the |group_size| inputs' |count| elements into |out| (in's dtype):
// the largest value, NaN skipped (NaN only where every member has one), +0 above -0. Each member
// compares the same values and keeps one of them, so every member gets the same bits in any order.
static void tprt__reduce_max(void* const* inputs, int group_size, int dtype, int64_t count, void* out) {
  float values[TPRT__REDUCE_BLOCK], best[TPRT__REDUCE_BLOCK];
  for (int64_t base = 0; base < count; base += TPRT__REDUCE_BLOCK) {
    int n = count - base < TPRT__REDUCE_BLOCK ? (int)(count - base) : TPRT__REDUCE_BLOCK;
    tprt__load_f32(inputs[0], dtype, base, n, best);
    for (int g = 1; g < group_size; ++g) {
      tprt__load_f32(inputs[g], dtype, base, n, values);
      for (int i = 0; i < n; ++i) best[i] = tprt_max_keep(best[i], values[i]);
    }
    tprt__store_f32(out, dtype, base, n, best);
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// Describes |t| in whole-byte units: the unit size and the dims, with f4E2M1FN's packed last
// dim halved (validation made it even).
static size_t tprt__unit_dims(const tprt_tensor_t* t, int64_t dims[TPRT_MAX_RANK]) {
  for (int d = 0; d < TPRT_MAX_RANK; ++d) dims[d] = d < t->rank ? t->dims[d] : 1;
  int bits = tprt_dtype_bits(t->dtype);
  if (bits >= 8) return (size_t)bits / 8;
  if (t->rank > 0) dims[t->rank - 1] /= 8 / bits;
  return 1;
}

// Copies the box of shape |box| at |src_origin| in |src| (dims |src_dims|) to |dst_origin| in
// |dst| (dims |dst_dims|); all in units of |unit| bytes, row-major, rank |rank| >= 1.
static void tprt__copy_box(int rank, const int64_t* box, const char* src, const int64_t* src_dims,
                           const int64_t* src_origin, char* dst, const int64_t* dst_dims, const int64_t* dst_origin,
                           size_t unit) {
  int64_t src_stride[TPRT_MAX_RANK], dst_stride[TPRT_MAX_RANK];
  src_stride[rank - 1] = dst_stride[rank - 1] = 1;
  for (int d = rank - 2; d >= 0; --d) {
    src_stride[d] = src_stride[d + 1] * src_dims[d + 1];
    dst_stride[d] = dst_stride[d + 1] * dst_dims[d + 1];
  }
  // Trailing dims that the box covers whole in both tensors are contiguous: merge them into
  // one run, copied with one memcpy.
  int last = rank - 1;
  int64_t run = box[last];
  while (last > 0 && box[last] == src_dims[last] && box[last] == dst_dims[last]) {
    --last;
    run *= box[last];
  }
  for (int d = 0; d <= last; ++d)
    if (box[d] == 0) return;
  int64_t index[TPRT_MAX_RANK] = {0};
  for (;;) {
    int64_t s = src_origin[last] * src_stride[last], t = dst_origin[last] * dst_stride[last];
    for (int d = 0; d < last; ++d) {
      s += (src_origin[d] + index[d]) * src_stride[d];
      t += (dst_origin[d] + index[d]) * dst_stride[d];
    }
    memcpy(dst + (size_t)t * unit, src + (size_t)s * unit, (size_t)run * unit);
    int d = last - 1;
    while (d >= 0 && ++index[d] == box[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

void tprt__collective_compute(const tprt__call_t* call, void* const* inputs) {
  const tprt_tensor_t* in = &call->in;
  const tprt_tensor_t* out = &call->out;
  int g_size = call->group_size;
  switch (call->kind) {
    case TPRT__ALL_REDUCE:
      if (call->max) {
        tprt__reduce_max(inputs, g_size, in->dtype, tprt_tensor_numel(in), out->data);
        return;
      }
      tprt__reduce(inputs, g_size, in->dtype, 0, tprt_tensor_numel(in), out->data, out->dtype, 0, call->order);
      return;
    case TPRT__REDUCE_SCATTER: {
      // View in as [outer, D, inner]; this member sums slice group_index of D.
      int64_t outer = 1, inner = 1, d_size = in->dims[call->dim];
      for (int d = 0; d < call->dim; ++d) outer *= in->dims[d];
      for (int d = call->dim + 1; d < in->rank; ++d) inner *= in->dims[d];
      int64_t chunk = d_size / g_size * inner;
      for (int64_t o = 0; o < outer; ++o)
        tprt__reduce(inputs, g_size, in->dtype, o * d_size * inner + call->group_index * chunk, chunk, out->data,
                     out->dtype, o * chunk, call->order);
      return;
    }
    case TPRT__ALL_GATHER:
    case TPRT__ALL_TO_ALL: {
      int64_t in_dims[TPRT_MAX_RANK], out_dims[TPRT_MAX_RANK], box[TPRT_MAX_RANK];
      int64_t src_origin[TPRT_MAX_RANK] = {0}, dst_origin[TPRT_MAX_RANK] = {0};
      size_t unit = tprt__unit_dims(in, in_dims);
      tprt__unit_dims(out, out_dims);
      memcpy(box, in_dims, sizeof box);
      int concat_dim = call->dim;
      if (call->kind == TPRT__ALL_TO_ALL) {
        // Source s sends this member its slice group_index along split_dim.
        box[call->dim] /= g_size;
        src_origin[call->dim] = call->group_index * box[call->dim];
        concat_dim = call->concat_dim;
      }
      for (int s = 0; s < g_size; ++s) {
        dst_origin[concat_dim] = s * box[concat_dim];
        tprt__copy_box(in->rank, box, inputs[s], in_dims, src_origin, out->data, out_dims, dst_origin, unit);
      }
      return;
    }
    case TPRT__BARRIER:
      return;
  }
}
