// A compiled module ready to call on logical tensors: the C ABI behind the Python binding
// (frontend/tpc_torch/runtime.py) and the simplest way to run a module from any language.
//
// tprt_session_open loads a module from tpc-compile, picks one of its functions and makes a world
// of rank threads on the module's mesh (one rank when it declares none), with every rank's
// argument, result and arena buffers allocated once. tprt_session_call then takes each argument
// as one contiguous logical tensor in host memory (the whole tensor, as if there were one rank),
// gives every rank its piece (tprt_shard.h), runs the function on all ranks, and writes each
// result's logical tensor (sharded results reassembled, replicated ones rank 0's) into the
// caller's buffers. On a world of one rank nothing is copied: the function reads the caller's
// arguments and writes the caller's results in place (each buffer must then be 64-byte aligned;
// others are copied through the session's own buffers).
//
// Arguments and results are described by index: name (tp.name), dtype (tprt_dtype_t), rank and
// logical dims. The CPU backend runs the ranks; a session is used by one thread at a time.
//
// Under torchrun or mpirun (one process per rank of the module's mesh, the launcher's world size
// equal to the mesh's), every process opens the session and calls it with the same logical
// arguments: each runs its own rank on its piece, and each receives the whole logical results
// (sharded ones all-gathered from the processes). Closing the session is a barrier of the
// processes.
#ifndef TPRT_SESSION_H_
#define TPRT_SESSION_H_

#include <stdint.h>

#include "tprt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tprt_session_t tprt_session_t;

/// Opens |module_path| (a shared object from tpc-compile) and its function |function| (NULL:
/// the first). Errors name the file and the problem.
tprt_status_t tprt_session_open(const char* module_path, const char* function, tprt_session_t** out)
    TPRT_MUST_USE_RESULT;

/// Releases everything the session holds (NULL-safe).
void tprt_session_close(tprt_session_t* session);

/// The function's name, and the number of ranks of its world.
const char* tprt_session_function(const tprt_session_t* session);
int tprt_session_ranks(const tprt_session_t* session);

/// Under a launcher (torchrun's or mpirun's variables, as tpc-run reads them; TPRT_RANKS=threads
/// ignores them) the session's world is a process world and this process runs one rank of it:
/// its rank; -1 in a world of rank threads.
int tprt_session_process_rank(const tprt_session_t* session);

/// Argument (|result| 0) or result (|result| 1) counts and descriptions: the logical shape
/// (|dims| receives tprt_session_tensor_rank values), the element type and the name.
int tprt_session_count(const tprt_session_t* session, int result);
const char* tprt_session_tensor_name(const tprt_session_t* session, int result, int index);
int tprt_session_tensor_dtype(const tprt_session_t* session, int result, int index);
int tprt_session_tensor_rank(const tprt_session_t* session, int result, int index);
void tprt_session_tensor_dims(const tprt_session_t* session, int result, int index, int64_t* dims);

/// Runs the function once: |args[i]| holds argument i's logical tensor (contiguous, row-major,
/// its dtype), |results[j]| receives result j's. Neither may be NULL. A failing rank's status is
/// returned (the results are then undefined).
tprt_status_t tprt_session_call(tprt_session_t* session, const void* const* args, void* const* results)
    TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_SESSION_H_
