// The per-rank execution state that a compiled step (tpc_entry_<F>) runs against: the rank in
// its world, the numerics parameters of the module, and the first failure of the step.
// Thread safety: one exec per rank thread; not shared.
#ifndef TPRT_EXEC_H_
#define TPRT_EXEC_H_

#include <stdbool.h>
#include <stdint.h>

#include "tprt_abi.h"
#include "tprt_allocator.h"
#include "tprt_collectives.h"
#include "tprt_status.h"
#include "tprt_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The collective families counted by tprt_exec_stats_t (async starts count as their family,
/// the fused collective + add + RMSNorm ops as all-reduce or reduce-scatter).
typedef enum tprt_comm_kind_e {
  TPRT_COMM_ALL_REDUCE = 0,
  TPRT_COMM_ALL_GATHER,
  TPRT_COMM_REDUCE_SCATTER,
  TPRT_COMM_ALL_TO_ALL,
  TPRT_COMM_KINDS,
} tprt_comm_kind_t;

/// "all_reduce", "all_gather", "reduce_scatter" or "all_to_all".
const char* tprt_comm_kind_name(tprt_comm_kind_t kind);

/// Bytes one rank of a group of |group| ranks sends (and, symmetrically, receives) in a collective
/// of |kind| whose per-rank input is |in_bytes| and output |out_bytes|, under the bandwidth-optimal
/// ring/direct schedules NCCL's bus-bandwidth figures assume: all-reduce 2(g-1)/g of the buffer,
/// all-gather (g-1)/g of the output, reduce-scatter and all-to-all (g-1)/g of the input (rounded
/// down to whole bytes). 0 for a group of one.
int64_t tprt_comm_bytes(tprt_comm_kind_t kind, int group, int64_t in_bytes, int64_t out_bytes);

/// Per-family collective counters of one rank.
typedef struct tprt_comm_stats_t {
  int64_t calls;
  int64_t bytes_sent;      // tprt_comm_bytes of each call
  int64_t bytes_received;  // equal to bytes_sent under those schedules; kept apart for asymmetric ones
} tprt_comm_stats_t;

/// Counters a step accumulates (zero at tprt_exec_create; they keep adding over steps).
typedef struct tprt_exec_stats_t {
  int64_t ops;              // runtime calls made
  int64_t gemm_flops;       // 2*M*N*K summed over the matrix products executed (linears, grouped
                            // linears, attention's, the cross-entropy's), recomputations included
  int64_t model_flops;      // the same without recomputations: the model's matrix FLOPs (MFU's)
  tprt_comm_stats_t comm[TPRT_COMM_KINDS];
} tprt_exec_stats_t;

/// Creates an exec for |rank| (may be NULL for a single rank without collectives) running a
/// module with |chunks| canonical K chunks; ownership goes to the caller.
tprt_status_t tprt_exec_create(tprt_rank_t* rank, int chunks, tprt_allocator_t allocator, tprt_exec_t** out_exec)
    TPRT_MUST_USE_RESULT;

/// Destroys |exec| and any status it still holds (NULL-safe).
void tprt_exec_destroy(tprt_exec_t* exec);

/// Returns the rank (NULL when created without one).
tprt_rank_t* tprt_exec_rank(const tprt_exec_t* exec);

/// Returns the module's canonical chunk count (tp.chunks).
int tprt_exec_chunks(const tprt_exec_t* exec);

/// Returns the counters; the ABI functions update them.
tprt_exec_stats_t* tprt_exec_stats(tprt_exec_t* exec);

/// Count-only steps (tpc-run --count-only): every ABI call decodes its descriptor and updates the
/// counters exactly as a real step would (GEMM FLOPs from the shapes, collective bytes from the
/// schedule model), but no kernel runs, no data moves and no rank waits for another; the buffers
/// are never read or written. For accounting of shapes too large to compute here.
void tprt_exec_set_count_only(tprt_exec_t* exec, bool count_only);
bool tprt_exec_count_only(const tprt_exec_t* exec);

/// The backend whose kernels, collectives and memory the step uses (tprt_backend.h); the CPU
/// backend by default. Set it before the first step.
struct tprt_backend_t;
void tprt_exec_set_backend(tprt_exec_t* exec, const struct tprt_backend_t* backend);
const struct tprt_backend_t* tprt_exec_backend(const tprt_exec_t* exec);

/// Records |status| (the first failure wins; later ones are freed) annotated with |op|, and
/// returns its code for the lowered code to return (0 when |status| is NULL).
int32_t tprt_exec_record(tprt_exec_t* exec, tprt_status_t status, const char* op);

/// Remembers the in-flight collective |future| filling the buffer at |key| until tp.wait.
tprt_status_t tprt_exec_push_future(tprt_exec_t* exec, void* key, tprt_future_t* future) TPRT_MUST_USE_RESULT;

/// Returns and forgets the future filling |key|, or NULL when none is in flight.
tprt_future_t* tprt_exec_pop_future(tprt_exec_t* exec, void* key);

/// Takes the failure recorded by the last step (NULL if it succeeded); the caller owns it.
tprt_status_t tprt_exec_take_status(tprt_exec_t* exec) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_EXEC_H_
