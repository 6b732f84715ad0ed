// The per-rank execution state that a compiled step (tpc_entry_<F>) runs against: the rank in
// its world, the numerics parameters of the module, and the first failure of the step.
// Thread safety: one exec per rank thread; not shared.
#ifndef TPRT_EXEC_H_
#define TPRT_EXEC_H_

#include <stdint.h>

#include "tprt_abi.h"
#include "tprt_allocator.h"
#include "tprt_collectives.h"
#include "tprt_status.h"
#include "tprt_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Counters a step accumulates (reset by tprt_exec_reset_stats).
typedef struct tprt_exec_stats_t {
  int64_t ops;              // runtime calls made
  int64_t gemm_flops;       // 2*M*N*K summed over linear / grouped linear calls
  int64_t bytes_sent;       // collective payload this rank sent
  int64_t bytes_received;   // collective payload this rank received
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
