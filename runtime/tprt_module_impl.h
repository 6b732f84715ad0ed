// Internals of the module loader (tprt_module.c), not part of the API: the parser of the
// tpc_module_info JSON on its own, so that it can be tested and fuzzed without a shared object
// (test/fuzz/fuzz_manifest.c).
#ifndef TPRT_MODULE_IMPL_H_
#define TPRT_MODULE_IMPL_H_

#include "tprt_module.h"

/// Returns the address of the entry point |symbol| of the module being read, or NULL when it has
/// none; |user| is what tprt__module_parse_info was given (the dlopen handle when loading).
typedef void* (*tprt__module_resolve_fn_t)(void* user, const char* symbol);

/// Reads the NUL-terminated module description |json| (the module's tpc_module_info string) into
/// |m|, which must be zeroed except for |m->path| (named in messages). Entry points
/// come from |resolve|. On failure |m| keeps what was read so far; tprt_module_unload frees it.
tprt_status_t tprt__module_parse_info(tprt_module_t* m, const char* json, tprt__module_resolve_fn_t resolve,
                                      void* user) TPRT_MUST_USE_RESULT;

#endif  // TPRT_MODULE_IMPL_H_
