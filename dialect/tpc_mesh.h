// Meshes from the command line: `--mesh tp=4,dp=2` becomes the module's tp.mesh @world.
#ifndef TPC_MESH_H_
#define TPC_MESH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPC_MESH_MAX_AXES 4
/// Bytes of an axis name with its NUL: the verifier (rule mesh.axes) allows 15 characters.
#define TPC_MESH_AXIS_NAME_SIZE 16
/// The name of the mesh that --mesh declares.
#define TPC_MESH_DEFAULT_NAME "world"

typedef struct tpc_mesh_spec_t {
  int num_axes;
  char axes[TPC_MESH_MAX_AXES][TPC_MESH_AXIS_NAME_SIZE];
  int64_t shape[TPC_MESH_MAX_AXES];
} tpc_mesh_spec_t;

/// Parses "tp=4,dp=2" into |out|. Axes are ordered dp, ep, gtp, tp (tp varies fastest, so
/// tensor-parallel peers are adjacent ranks, as in Megatron-LM, and a TP x GTP group is a
/// contiguous block of ranks), then any others as written.
/// Returns 0 and writes a message to |error| on a malformed spec.
int tpc_mesh_spec_parse(const char* text, tpc_mesh_spec_t* out, char* error, size_t error_size);

/// Declares |spec| as tp.mesh @world in |module|, replacing a mesh of that name. Returns failure
/// (with a diagnostic) if the module's ops use another mesh shape incompatibly.
MlirLogicalResult tpc_mesh_declare(MlirOperation module, const tpc_mesh_spec_t* spec);

/// Checks the value of a --numerics (fast|invariant|exact) or --strategy (canonical|gather)
/// option; |flag| is "numerics" or "strategy". Returns 0 and writes a message to |error| if bad.
int tpc_numerics_option_check(const char* flag, const char* value, char* error, size_t error_size);

/// Sets the module attributes tp.numerics and tp.strategy from the command line; a NULL value
/// keeps what the module says.
void tpc_module_set_numerics(MlirOperation module, const char* numerics, const char* strategy);

/// Checks the value of --gtp-prefetch (an integer >= 0: how many contractions ahead tp-gtp starts
/// a weight's all-gather) and stores it in |*out|. Returns 0 and writes a message to |error| if bad.
int tpc_gtp_prefetch_option_check(const char* value, int64_t* out, char* error, size_t error_size);

/// Sets the module attributes tp.gtp_prefetch (|prefetch| >= 0; < 0 keeps what the module says)
/// and tp.gtp_keep (when |keep|).
void tpc_module_set_gtp(MlirOperation module, int64_t prefetch, bool keep);

/// Checks the value of --gtp-wgrad ("scatter", "gather" or "auto"). Returns 0 and writes a message
/// to |error| if bad.
int tpc_gtp_wgrad_option_check(const char* value, char* error, size_t error_size);

/// Sets the module attribute tp.gtp_wgrad to |mode| (a NULL |mode| keeps what the module says).
void tpc_module_set_gtp_wgrad(MlirOperation module, const char* mode);

/// Sets sequence_parallel = true on every column- or row-parallel tp.linear and
/// tp.grouped_linear and every vocabulary-parallel tp.embedding and tp.cross_entropy of |module|
/// (Megatron's --sequence-parallel for the whole model); returns how many ops it changed.
int tpc_module_set_sequence_parallel(MlirOperation module);

/// Parses the value of --fused-norm-algorithm (or tp-lower-runtime{fused-norm-algorithm=...}):
/// "auto", "one-shot", "two-shot" or "composition". Returns the tpc_algorithm_t value
/// (TPC_ALGORITHM_*), or -1 after writing a message to |error|.
int tpc_fused_norm_algorithm_option_parse(const char* value, char* error, size_t error_size);

/// Sets `algorithm` to |algorithm| (a tpc_algorithm_t value) on every fused norm op of |module|
/// whose algorithm is "auto" (written or not): an explicit other value wins. TPC_ALGORITHM_ONE_SHOT
/// and TPC_ALGORITHM_TWO_SHOT leave tp.fused_reduce_scatter_add_rmsnorm at "auto", since that form
/// has no fused kernel.
/// Returns how many ops it changed.
int tpc_module_set_fused_norm_algorithm(MlirOperation module, int algorithm);

#ifdef __cplusplus
}
#endif

#endif  // TPC_MESH_H_
