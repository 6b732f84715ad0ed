// The CUDA backend's fused_norm hook (backend_cuda_impl.h): tp.fused_allreduce_add_rmsnorm as one
// kernel, tprt_cuda_fused_allreduce_add_rmsnorm (kernels/cuda/norm/fused_norm.cu), over memory each
// collective group registers once. The hook is used:
//   - where the op's algorithm is "one_shot" or "two_shot" (that form of the kernel), or "auto" and
//     TPRT_CUDA_FUSED_NORM asks for it (by default, where every rank has a GPU of its own), in
//     groups of 2 or more, below the crossover (one-shot, then two-shot, by the table below); never
//     for "composition";
//   - in a world of threads whose ranks address each other's device memory: one GPU per rank
//     with peer access between all of them (the copy-engine worlds), or ranks sharing GPUs.
// Otherwise it declines and the ABI runs the composition, with the same bits. A peer that never
// arrives: the rank's wait for its stream sees the world's abort (or the timeout) and sets the
// rank's abort word, which the waiting kernel polls (tprt__abort_comms); it then returns.
//
// Registration: on a group's first call, and again when a call needs more room than the regions
// hold. Every member reaches the same call with the same shapes, so all decide alike. Each member:
//   - drains its stream and meets the others (no peer still reads the old region);
//   - allocates a region of empty words (all ones) with three buffers of two areas of a slot per
//     member, a slot holding what the call's form needs (tprt_cuda_fused_call_bytes: the partial
//     for one-shot, a member's share of the rows for two-shot; tprt_cuda_fused_region_bytes), and
//     zeroed counters;
//   - exchanges its pointers, its block budgets and its GPU's SMs through the CPU world.
// The group launches the smallest budgets of its members and shapes its launch for the fewest SMs,
// so every member runs the same grid. A budget is the blocks of a launch shape that fit on the GPU
// at once (tprt_cuda_fused_norm_budgets: divided by the world's ranks on that GPU, the smaller
// shape's where they share it): a block polls what its peers' blocks store, so all must be
// resident. No registration happens during CUDA graph capture: such a call declines, on every
// member alike.
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_impl.h"
#include "tprt_params.h"

// The words a member publishes: region, block budgets (in clusters, a block per row), SMs.
enum { TPRT__FUSED_WORDS = 4 };

static void tprt__fused_release(tprt__cuda_fused_t* f) {
  int me = f->g.index;
  if (f->g.data[me]) cudaFree(f->g.data[me]);
  if (f->g.counters) cudaFree(f->g.counters);
  memset(&f->g, 0, sizeof f->g);
}

void tprt__cuda_fused_end(bool failed) {
  // A peer's last call may still push into this rank's region: every member drains its stream
  // (rank_end did), then they meet; a failed meeting leaves the memory to the process's end.
  for (int i = 0; i < tprt__r.num_fused && !failed; ++i) {
    tprt_status_t met = tprt__r.rank ? tprt_barrier(tprt__r.rank, tprt__r.fused[i].mask) : NULL;
    failed = met != NULL;
    tprt_status_free(met);
    if (!failed) tprt__fused_release(&tprt__r.fused[i]);
  }
  free(tprt__r.fused);
  tprt__r.fused = NULL;
  tprt__r.num_fused = 0;
  // Only this rank's kernels poll its abort word, and rank_end drained them (setting the word first
  // in a failed world): it goes in any case.
  if (tprt__r.fused_abort) cudaFreeHost((void*)tprt__r.fused_abort);
  tprt__r.fused_abort = NULL;
}

// (Re)registers group |f| with slots of at least |bytes|.
static tprt_status_t tprt__fused_register(tprt_rank_t* rank, tprt__cuda_fused_t* f, int64_t bytes) {
  int g = tprt_rank_group_size(rank, f->mask), me = tprt_rank_group_index(rank, f->mask);
  if (f->g.counters) {  // no member reads the old regions any more: every stream drained, then met
    TPRT__TRY(tprt__wait_stream());
    TPRT__TRY(tprt_barrier(rank, f->mask));
    tprt__fused_release(f);
  }
  if (!tprt__r.fused_abort) {  // the rank's abort word, mapped into the device's address space
    TPRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc((void**)&tprt__r.fused_abort, sizeof(unsigned), cudaHostAllocMapped));
    *tprt__r.fused_abort = 0;
  }
  unsigned* abort_device = NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer((void**)&abort_device, (void*)tprt__r.fused_abort, 0));
  int in_clusters = 0, in_rows = 0, devices = 0, sms = 0;
  TPRT__TRY(tprt_cuda_fused_norm_resident_blocks(&in_clusters, &in_rows, &sms));
  TPRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices));
  int local = tprt_rank_local_size(rank), sharing = devices > 0 ? (local + devices - 1) / devices : 1;
  int budget = 0, row_budget = 0;
  tprt_cuda_fused_norm_budgets(in_clusters, in_rows, tprt__r.shared ? sharing : 1, &budget, &row_budget);
  f->g.group = g;
  f->g.index = me;
  f->g.abort = abort_device;
  size_t region_bytes = tprt_cuda_fused_region_bytes(g, bytes);
  size_t counter_bytes = sizeof(unsigned) * TPRT_CUDA_FUSED_COUNTERS;
  TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->g.data[me], region_bytes));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMalloc((void**)&f->g.counters, counter_bytes));
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f->g.data[me], 0xFF, region_bytes, tprt__r.stream));  // all empty
  TPRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f->g.counters, 0, counter_bytes, tprt__r.stream));
  TPRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(tprt__r.stream));  // emptied before any peer writes a word
  int64_t mine[TPRT__FUSED_WORDS] = {(int64_t)(uintptr_t)f->g.data[me], budget, row_budget, sms};
  int64_t* all = malloc(sizeof(int64_t) * TPRT__FUSED_WORDS * (size_t)g);
  if (!all) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory (fused norm registration)");
  tprt_status_t s = tprt__exchange_words(rank, f->mask, mine, TPRT__FUSED_WORDS, all);
  if (!s) {
    f->g.max_blocks = budget;
    f->g.max_row_blocks = row_budget;
    f->g.sms = sms;
    for (int p = 0; p < g; ++p) {
      const int64_t* word = &all[p * TPRT__FUSED_WORDS];
      f->g.data[p] = (void*)(uintptr_t)word[0];
      if (word[1] < f->g.max_blocks) f->g.max_blocks = (int)word[1];
      if (word[2] < f->g.max_row_blocks) f->g.max_row_blocks = (int)word[2];
      if (word[3] < f->g.sms) f->g.sms = (int)word[3];
    }
    f->g.capacity = bytes;
  }
  free(all);
  return s;
}

// The crossovers: the largest partial, in bytes per rank, for which each form of the kernel beats
// the composition (NCCL's all-reduce of the f32 partial, add, rmsnorm), by group size. Up to
// |one_shot| the one-shot kernel runs, from there to |two_shot| the two-shot kernel (3/4 of
// one-shot's bytes at 4 members with f32 sums, 3/8 at 8, for a second crossing), above it the
// composition.
// Measured with `tools/bench/fused_norm.py` (both forms and the composition in one run) at hidden
// 8192, bf16 partials, on 4xH200 (docs/performance.md, "Fused all-reduce + add + RMSNorm, two-shot
// sending sums"): the largest measured partial faster eager and as a graph, at most 2 MiB per rank.
// Beyond that the kernel's region (6 slots per member) would pass 100 MiB a rank, though the
// kernel still wins: at 1024 tokens two-shot is 0.80x at TP 2 and 0.83x at TP 4 (192 MiB regions),
// at 8192 0.96x at TP 4. TPRT_CUDA_FUSED_NORM_MAX_BYTES overrides the upper bound.
static const struct {
  int group;
  int64_t one_shot, two_shot;
} kFusedCrossover[] = {
    {2, 2 << 20, 2 << 20},    // one-shot 0.45x the composition at 128 tokens (two-shot 0.51x)
    {4, 512 << 10, 2 << 20},  // one-shot 0.69x at 32 tokens; two-shot 0.52x at 128 (one-shot 0.69x)
    {8, 128 << 10, 2 << 20},  // not measured (no 8-GPU machine): one-shot TP 4's bound over 4, two-shot TP 4's
};

// The row of the largest group in the table not above |group| (the smallest group's, for 1).
static int tprt__fused_row(int group) {
  int row = 0;
  for (size_t i = 0; i < sizeof kFusedCrossover / sizeof kFusedCrossover[0]; ++i)
    if (kFusedCrossover[i].group <= group) row = (int)i;
  return row;
}

tprt_status_t tprt__cuda_fused_norm(tprt_rank_t* rank, uint32_t mask, const tprt_tensor_t* partial,
                                    const tprt_tensor_t* residual, const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                                    tprt_tensor_t* residual_out, float eps, tprt_order_t order,
                                    tprt_fused_algorithm_t algorithm, bool round_sum, const tprt_fused_quant_t* quant,
                                    bool* done) {
  *done = false;
  // The op's algorithm comes first: "composition" declines; "one_shot" and "two_shot" take that form
  // of the kernel wherever the world and the shape allow it, whatever TPRT_CUDA_FUSED_NORM and the
  // crossovers say (the table and TPRT_CUDA_FUSED_NORM_MAX_BYTES); "auto" asks both. Every member
  // reads the same attribute from the same module, so all decide alike.
  if (algorithm == TPRT_ALGORITHM_COMPOSITION) return NULL;
  // TPRT_CUDA_FUSED_NORM: positive asks for the kernel, 0 declines, -1 (the default) asks where
  // every rank has a GPU of its own (ranks sharing a GPU are for tests of the protocol).
  bool forced = algorithm == TPRT_ALGORITHM_ONE_SHOT || algorithm == TPRT_ALGORITHM_TWO_SHOT;
  int64_t knob = tprt_param_cuda_fused_norm();
  if (!forced && !(knob > 0 || (knob < 0 && tprt__r.ce && !tprt__r.shared))) return NULL;
  if (!(tprt__r.shared || tprt__r.ce)) {
    // Asked for, but the ranks cannot address each other's memory: one line, once per process.
    static atomic_flag told = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&told))
      fprintf(stderr,
              "tprt: notice: %s, but the ranks cannot address each other's GPU memory (ranks "
              "in separate processes, no peer access between some pair of GPUs, or TPRT_CUDA_COPY_ENGINE=0): "
              "tp.fused_allreduce_add_rmsnorm runs as the all-reduce, add and rmsnorm\n",
              algorithm == TPRT_ALGORITHM_ONE_SHOT   ? "algorithm = \"one_shot\""
              : algorithm == TPRT_ALGORITHM_TWO_SHOT ? "algorithm = \"two_shot\""
                                                     : "TPRT_CUDA_FUSED_NORM=1");
    return NULL;
  }
  if (tprt_cuda_fused_norm_unfit(partial, residual)) return NULL;  // a shape the kernel does not take
  int members = tprt_rank_group_size(rank, mask);
  if (members > TPRT_CUDA_FUSED_MAX_GROUP) return NULL;  // nor a group
  if (members < 2 && !forced) return NULL;                // nothing to exchange: the composition's all-reduce is a copy
  int64_t partial_bytes = tprt_dtype_bytes(partial->dtype, partial->dims[0] * partial->dims[1]);
  bool two_shot = algorithm == TPRT_ALGORITHM_TWO_SHOT;
  if (!forced) {
    int row = tprt__fused_row(members);
    int64_t bound = tprt_param_cuda_fused_norm_max_bytes();
    if (bound < 0) bound = kFusedCrossover[row].two_shot > kFusedCrossover[row].one_shot ? kFusedCrossover[row].two_shot
                                                                                          : kFusedCrossover[row].one_shot;
    if (partial_bytes > bound) return NULL;
    two_shot = partial_bytes > kFusedCrossover[row].one_shot;
  }
  int64_t bytes = tprt_cuda_fused_call_bytes(partial, residual, two_shot, members, round_sum);
  tprt__cuda_fused_t* f = NULL;
  for (int i = 0; i < tprt__r.num_fused && !f; ++i)
    if (tprt__r.fused[i].mask == mask) f = &tprt__r.fused[i];
  if ((!f || f->g.capacity < bytes) && tprt__r.capturing) return NULL;  // no registration in a capture
  TPRT__TRY(tprt__need_rank());
  if (!f) {
    tprt__cuda_fused_t* grown = realloc(tprt__r.fused, sizeof *grown * (size_t)(tprt__r.num_fused + 1));
    if (!grown) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory (fused norm groups)");
    tprt__r.fused = grown;
    f = &tprt__r.fused[tprt__r.num_fused++];
    memset(f, 0, sizeof *f);
    f->mask = mask;
  }
  if (f->g.capacity < bytes) TPRT__TRY(tprt__fused_register(rank, f, bytes > 0 ? bytes : 1));
  // Too many ranks on a GPU for a cluster of blocks each: every member sees the same smallest
  // budget, so all decline alike.
  if (f->g.max_blocks < TPRT_CUDA_FUSED_CLUSTER) return NULL;
  // Every decline is above: the composition counts its own collective.
  TPRT__TRY(tprt__fault());  // a collective call, for TPRT_CUDA_FAULT's count
  // The quantization (tp.fused_allreduce_add_rmsnorm_quantize) rides along: the kernel quantizes each
  // row where it normalizes it (TPRT_FORMAT_* and TPRT_QUANT_* number the formats alike).
  tprt_cuda_fused_quant_t q = {0};
  if (quant) q = (tprt_cuda_fused_quant_t){quant->format, quant->amax, quant->data, quant->scale, quant->global_scale};
  TPRT__TRY(tprt_cuda_fused_allreduce_add_rmsnorm(&f->g, partial, residual, gamma, normed, residual_out, eps,
                                                  order == TPRT_ORDER_CANONICAL, round_sum, two_shot,
                                                  quant ? &q : NULL, tprt__r.stream));
  *done = true;
  return NULL;
}
