// Environment knobs of libtprt. Every knob is declared once, here, and defined once in
// tprt_params.c with TPRT_PARAM (NCCL's NCCL_PARAM): the variable is TPRT_<ENV>, read on first
// use and cached, so there are no scattered getenv calls. docs/runtime.md lists every knob.
// Thread safety: the getters are thread-safe; the environment is read once per process, so
// setting a variable after its first use has no effect.
#ifndef TPRT_PARAMS_H_
#define TPRT_PARAMS_H_

#include <stdatomic.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Returns the integer value of environment variable |name|, or |default_value| when it is unset,
/// empty or not an integer (the latter with a warning on stderr). Caches the result in |cache|
/// and |state| (used by TPRT_PARAM).
int64_t tprt__param_load(const char* name, int64_t default_value, _Atomic int64_t* cache, atomic_int* state);

/// Declares the getter of a knob: int64_t tprt_param_<name>(void).
#define TPRT_PARAM_DECLARE(name) int64_t tprt_param_##name(void)

/// Defines the getter of knob |name| read from environment variable "TPRT_" |env|, defaulting
/// to |default_value|. Use once per knob, in tprt_params.c.
#define TPRT_PARAM(name, env, default_value)                                           \
  int64_t tprt_param_##name(void) {                                                    \
    static _Atomic int64_t tprt__cache;                                                \
    static atomic_int tprt__state;                                                     \
    return tprt__param_load("TPRT_" env, (default_value), &tprt__cache, &tprt__state); \
  }

/// Seconds a collective waits for the rest of its group before it fails with
/// DEADLINE_EXCEEDED (TPRT_COLLECTIVE_TIMEOUT_S, default 600; 0 or less waits forever).
TPRT_PARAM_DECLARE(collective_timeout_s);

/// Non-zero: the CUDA backend lets the ranks of a thread world share GPUs when there are more
/// ranks than GPUs (TPRT_CUDA_SHARE_DEVICES, default 0; tpc-run --share-gpus sets it).
TPRT_PARAM_DECLARE(cuda_share_devices);

/// Non-zero: the CUDA backend times every contraction on the compute stream and every async
/// collective on the comm stream (CUDA events) and prints, per rank and step, how long each ran
/// and how much of the collectives' time ran under a contraction (TPRT_CUDA_TIMELINE, default 0).
TPRT_PARAM_DECLARE(cuda_timeline);

/// SMs the CUDA backend's GEMMs leave free while an asynchronous collective (a tp.*_start) runs
/// over NCCL, and the most CTAs the async collectives' NCCL communicators use, so that the
/// collective runs beside the GEMMs instead of waiting for them (TPRT_CUDA_COMM_SMS, default 16;
/// 0: GEMMs take every SM and NCCL chooses its CTAs).
TPRT_PARAM_DECLARE(cuda_comm_sms);

/// Non-zero: in a world of threads on distinct GPUs that can all reach each other (peer access),
/// the CUDA backend runs the asynchronous collectives (tp.*_start) as peer copies on the copy
/// engines instead of NCCL kernels, so they take no SMs from the GEMMs they overlap
/// (TPRT_CUDA_COPY_ENGINE, default 1; tpc-run --graph sets 0: CUDA graphs capture NCCL only).
TPRT_PARAM_DECLARE(cuda_copy_engine);

/// Non-zero: a copy-engine all-gather pulls the rank's own rows from the next member's output over
/// the link, after every member has its rows, instead of copying them within the GPU at the wait
/// (an SM copy) (TPRT_CUDA_CE_OWN_FROM_PEER, default 0).
TPRT_PARAM_DECLARE(cuda_ce_own_from_peer);

/// Positive: in a world of threads whose ranks address each other's device memory (one GPU per
/// rank with peer access, or ranks sharing GPUs), tp.fused_allreduce_add_rmsnorm runs as one kernel
/// over memory each group registers once (kernels/cuda/norm/fused_norm.cu) instead of the all-reduce,
/// add and rmsnorm, below the measured crossover; the same bits. -1 (the default): so where every
/// rank has a GPU of its own, not where ranks share one. 0: never (TPRT_CUDA_FUSED_NORM).
TPRT_PARAM_DECLARE(cuda_fused_norm);

/// The largest partial, in bytes per rank, that the fused norm kernel takes; larger calls run the
/// composition. -1 (the default): the crossover table of runtime/cuda/backend_cuda_fused.c,
/// measured against the composition (TPRT_CUDA_FUSED_NORM_MAX_BYTES).
TPRT_PARAM_DECLARE(cuda_fused_norm_max_bytes);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_PARAMS_H_
