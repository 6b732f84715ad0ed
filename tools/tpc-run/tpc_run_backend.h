// tpc-run's backends: the CPU one, or the CUDA plugin loaded at run time (--backend).
#ifndef TPC_RUN_BACKEND_H_
#define TPC_RUN_BACKEND_H_

#include "tprt_backend.h"

/// The backend named |name| ("cpu" or NULL: the CPU backend; "cuda": the plugin), or NULL after
/// printing why it cannot be loaded.
const tprt_backend_t* tpc__load_backend(const char* name);

#endif  // TPC_RUN_BACKEND_H_
