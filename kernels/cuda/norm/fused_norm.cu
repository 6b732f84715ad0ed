// tprt_cuda_fused_allreduce_add_rmsnorm: tp.fused_allreduce_add_rmsnorm (and its quantizing form) as
// one kernel over the memory of a group of ranks; the kernel, its protocol and its launch shapes are
// fused_norm_kernel.cuh's. This file checks a call, picks its launch shape and form, and launches
// it; the forms' instantiations compile in forms/, one file each.
#include "fused_norm_kernel.cuh"

// The fewest resident blocks of form (T, TWO, Q) in its launch shape: clusters of the widest rows,
// or a block per row.
template <int T, bool TWO, bool Q>
static cudaError_t tprt__fn_form_budget(int sms, int* clusters, int* rows) {
  return T == TPRT_ROW_LANES
             ? tprt__fn_form_resident<T, TWO, Q>(sms, TPRT_CUDA_FUSED_CLUSTER, TPRT_CUDA_FUSED_MAX_HIDDEN, clusters)
             : tprt__fn_form_resident<T, TWO, Q>(sms, 1, TPRT_CUDA_FUSED_ROWS_MAX_HIDDEN, rows);
}

extern "C" tprt_status_t tprt_cuda_fused_norm_resident_blocks(int* clusters, int* rows, int* sms) {
  *clusters = *rows = *sms = 0;
  int device = 0, count = 0, in_clusters = 1 << 30, in_rows = 1 << 30;
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  TPRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  // One budget for every form: a group's calls may take any (plain or quantizing, one- or two-shot).
  cudaError_t e = cudaSuccess;
#define TPRT__FN_RESIDENT(T, TWO, Q) \
  if (e == cudaSuccess) e = tprt__fn_form_budget<T, TWO, Q>(count, &in_clusters, &in_rows);
  TPRT__FN_FORMS(TPRT__FN_RESIDENT)
#undef TPRT__FN_RESIDENT
  TPRT_CUDA_RETURN_IF_ERROR(e);
  *clusters = in_clusters;
  *rows = in_rows;
  *sms = count;
  return NULL;
}

// The kernel's form of |quant| for normed [T,H]: tp.quantize's checks (rowwise), the amax operand
// of the per-tensor formats (mxfp8 takes none), and the block size.
static tprt_status_t tprt__fn_quant_args(const tprt_cuda_fused_quant_t* quant, const tprt_tensor_t* normed,
                                         tprt__fn_quant_t* q) {
  tprt__quant_layout_t l;
  tprt_status_t s = tprt__check_quant("quantize", normed, quant->data, quant->scale, quant->global_scale, quant->format,
                                      TPRT_QUANT_ROWWISE, &l);
  if (s) return s;
  const bool per_tensor = quant->format != TPRT_QUANT_MXFP8;
  if (per_tensor != (quant->amax != NULL))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            per_tensor ? "the fused kernel quantizes fp8 and nvfp4 with an amax operand only"
                                       : "mxfp8 takes no amax operand");
  if (quant->amax) TPRT_RETURN_IF_ERROR(tprt__check_amax("quantize", NULL, quant->amax, quant->format), "amax");
  q->format = quant->format;
  q->bs = l.block;
  q->data = (uint8_t*)quant->data->data;
  q->amax = quant->amax ? (const float*)quant->amax->data : NULL;
  q->max_finite = tprt_quant_max_finite(normed->dtype);
  if (l.block > 0) {
    if ((uintptr_t)quant->scale->data % 4 != 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "the fused kernel writes the scale tensor's padding in 4-byte words: its data must be "
                              "4-byte aligned (arena buffers are)");
    q->scale = (uint8_t*)quant->scale->data;
    q->srows = l.scale_dims[0];
    q->s1 = l.scale_dims[1];
    while ((1 << q->bs_shift) < l.block) ++q->bs_shift;  // 16 or 32
    q->row_blocks = normed->dims[1] / l.block;
  }
  q->tensor_scale = quant->format == TPRT_QUANT_NVFP4 ? (float*)quant->global_scale->data
                    : l.block == 0                    ? (float*)quant->scale->data
                                                      : NULL;
  return NULL;
}

extern "C" tprt_status_t tprt_cuda_fused_allreduce_add_rmsnorm(
    const tprt_cuda_peer_group_t* g, const tprt_tensor_t* partial, const tprt_tensor_t* residual,
    const tprt_tensor_t* gamma, tprt_tensor_t* normed, tprt_tensor_t* residual_out, float eps, int canonical,
    int round_sum, int two_shot, const tprt_cuda_fused_quant_t* quant, cudaStream_t stream) {
  const unsigned floats = TPRT__M(TPRT_DTYPE_BF16) | TPRT__M(TPRT_DTYPE_F16) | TPRT__M(TPRT_DTYPE_F32);
  bool ok = g && g->group >= 1 && g->group <= TPRT_CUDA_FUSED_MAX_GROUP && g->index >= 0 && g->index < g->group &&
            g->max_blocks >= TPRT_CUDA_FUSED_CLUSTER && g->max_row_blocks >= 1 && g->sms >= 1 && g->counters &&
            g->rows_from >= 0;
  for (int p = 0; ok && p < g->group; ++p) ok = g->data[p] != NULL;
  if (!ok)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "fused_allreduce_add_rmsnorm: a registered group (1..%d members, every region, "
                            "counters, max_blocks >= %d, max_row_blocks >= 1, sms >= 1, rows_from >= 0) expected",
                            TPRT_CUDA_FUSED_MAX_GROUP, TPRT_CUDA_FUSED_CLUSTER);
  if (partial->rank != 2 || residual->rank != 2 || gamma->rank != 1 || !((floats >> partial->dtype) & 1) ||
      !((floats >> residual->dtype) & 1) || !((floats >> gamma->dtype) & 1) || partial->dims[0] != residual->dims[0] ||
      partial->dims[1] != residual->dims[1] || gamma->dims[0] != residual->dims[1] ||
      !tprt_tensor_same_layout(residual, normed) || !tprt_tensor_same_layout(residual, residual_out))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "fused_allreduce_add_rmsnorm: float partial and residual [T,H], gamma [H], normed and "
                            "residual_out of the residual's shape and dtype expected");
  const int64_t m = residual->dims[0], h = residual->dims[1],
                bytes = tprt_cuda_fused_call_bytes(partial, residual, two_shot, g->group, round_sum);
  if (bytes > g->capacity || g->capacity > TPRT_CUDA_FUSED_MAX_CAPACITY)
    return tprt_make_status(
        TPRT_STATUS_INVALID_ARGUMENT,
        "fused_allreduce_add_rmsnorm: a call of %lld bytes a slot exceeds the registered slots' %lld "
        "(at most %lld)",
        (long long)bytes, (long long)g->capacity, (long long)TPRT_CUDA_FUSED_MAX_CAPACITY);
  const char* unfit = tprt_cuda_fused_norm_unfit(partial, residual);
  if (unfit) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "fused_allreduce_add_rmsnorm: %s", unfit);
  const int64_t groups = (h + TPRT_ROW_LANES - 1) / TPRT_ROW_LANES;
  if (g->cluster != 0 && (g->cluster < 0 || g->cluster > TPRT_CUDA_FUSED_CLUSTER || (g->cluster & (g->cluster - 1)) ||
                          groups > (int64_t)TPRT__FN_BLOCK_GROUPS * g->cluster))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "fused_allreduce_add_rmsnorm: a cluster of %d blocks for rows of %lld (1, 2, 4 or %d "
                            "blocks, each with at most %d columns of a row)",
                            g->cluster, (long long)h, TPRT_CUDA_FUSED_CLUSTER, TPRT__FN_BLOCK_GROUPS * TPRT_ROW_LANES);
  tprt__fn_quant_t q = {-1, 0, NULL, NULL, NULL, NULL, 0, 0, 0.0f, 0, 0};
  if (quant) TPRT_RETURN_IF_ERROR(tprt__fn_quant_args(quant, normed, &q), "fused_allreduce_add_rmsnorm_quantize");
  if (m == 0 || h == 0) {
    // No row to quantize: the scales tp.quantize writes all the same (zero padding, the per-tensor one).
    if (quant)
      return tprt_cuda_quantize_with_amax(normed, quant->amax, quant->data, quant->scale, quant->global_scale,
                                          quant->format, TPRT_QUANT_ROWWISE, stream);
    return NULL;
  }
  // From rows_from rows, a block of TPRT__FN_ROW_THREADS per row (the rows fill the SMs). Below, a
  // cluster per row: of 8 blocks where the rows leave SMs to spare (decode sizes, where one SM
  // alone is bound by a row's instructions), fewer down to one where 8 would crowd them, never so
  // few that a block's share of the row outgrows its shared memory. At most the resident blocks.
  const int64_t rows_from = g->rows_from > 0 ? g->rows_from : TPRT_CUDA_FUSED_ROWS_FROM;
  const bool rows = g->cluster == 0 && m >= rows_from && h <= TPRT_CUDA_FUSED_ROWS_MAX_HIDDEN;
  const int64_t budget = rows ? g->max_row_blocks : g->max_blocks, spare = g->sms < budget ? g->sms : budget;
  int cs = g->cluster > 0 ? g->cluster : rows ? 1 : TPRT_CUDA_FUSED_CLUSTER;  // the caller's (checked above), or ours
  while (g->cluster == 0 && cs > 1 && m * cs > spare && groups <= (int64_t)TPRT__FN_BLOCK_GROUPS * (cs / 2)) cs /= 2;
  // The push's blocks: TPRT__FN_PUSH_BLOCKS at decode sizes (their partials are small); a block per
  // row falls short of the SMs below the largest sizes, so every SM pushes (blocks past the rows
  // only push).
  const int64_t push_blocks = rows ? spare : TPRT__FN_PUSH_BLOCKS;
  const int64_t most = budget / cs, fewest = (push_blocks + cs - 1) / cs;
  int64_t clusters = m > fewest ? m : fewest;
  if (clusters > most) clusters = most;
  const tprt__fn_call_t call = {g, clusters * cs, cs,        partial,   residual, gamma, normed, residual_out, m,
                                h, eps,           canonical, round_sum, &q,       stream};
  const bool two = two_shot != 0, quantizing = quant != NULL;
  cudaError_t launched = cudaSuccess;
#define TPRT__FN_LAUNCH(T, TWO, Q)                                          \
  if ((T == TPRT__FN_ROW_THREADS) == rows && TWO == two && Q == quantizing) \
    launched = tprt__fn_form_launch<T, TWO, Q>(call);
  TPRT__FN_FORMS(TPRT__FN_LAUNCH)
#undef TPRT__FN_LAUNCH
  TPRT_CUDA_RETURN_IF_ERROR(launched);
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return NULL;
}
