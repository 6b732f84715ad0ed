// Loading the tp dialect into an MLIR context, and the names of its module-level attributes.
#ifndef TPC_DIALECT_H_
#define TPC_DIALECT_H_

#include "mlir-c/IR.h"
#include "tp_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Module attribute selecting the numerics mode: "fast", "invariant" or "exact".
#define TPC_MODULE_ATTR_NUMERICS "tp.numerics"
/// Module attribute giving the number of canonical K chunks (a power of two, default 8).
#define TPC_MODULE_ATTR_CHUNKS "tp.chunks"
/// Module attribute choosing how tp-invariant completes cross-rank contractions: "canonical"
/// (default; tree-ordered f32 partials) or "gather" (operands gathered, full contraction per rank).
#define TPC_MODULE_ATTR_STRATEGY "tp.strategy"
/// Module attribute: `tp.recompute = true` makes tp-autodiff recompute each layer (the ops that
/// carry one `tp.layer` value, contiguous) right before its gradients instead of keeping its
/// activations (docs/passes.md, "Activation recomputation").
#define TPC_MODULE_ATTR_RECOMPUTE "tp.recompute"
/// Module attribute: `tp.zero = true` shards the optimizer's master weights and moments over the
/// dp axis (ZeRO stage 1; tp-shard, docs/training.md).
#define TPC_MODULE_ATTR_ZERO "tp.zero"
/// Op attribute: `tp.layer = i` (an integer >= 0) puts the op in layer i for recomputation.
#define TPC_OP_ATTR_LAYER "tp.layer"
/// Module attribute naming the quantization recipe.
#define TPC_MODULE_ATTR_RECIPE "tp.recipe"
/// Module attribute: how many contractions ahead of a weight's use tp-gtp starts its all-gather
/// (an integer >= 0; absent: chosen by tp-gtp's cost model).
#define TPC_MODULE_ATTR_GTP_PREFETCH "tp.gtp_prefetch"
/// Module attribute: `tp.gtp_keep = true` keeps a GTP weight gathered from its first use to its
/// last (one all-gather per weight) instead of gathering it again for every use.
#define TPC_MODULE_ATTR_GTP_KEEP "tp.gtp_keep"
/// Module attribute: how tp-gtp makes a linear's weight gradient a gtp shard: "scatter" (each
/// rank's partial over its own tokens, reduce-scattered), "gather" (each rank's rows over every gtp
/// rank's tokens: x all-gathered, dy all-to-all) or "auto" (absent: the cheaper by a cost model).
#define TPC_MODULE_ATTR_GTP_WGRAD "tp.gtp_wgrad"
/// Module attribute set by tp-lower-runtime: the arena bytes one rank needs.
#define TPC_MODULE_ATTR_ARENA_BYTES "tp.arena_bytes"
/// Argument / result attribute naming a function's tensors (safetensors keys, output names).
#define TPC_ARG_ATTR_NAME "tp.name"
/// Argument / result attribute recording a per-rank tensor's place in the logical tensor
/// (written by tp-shard; see lowering/shard_layout.h).
#define TPC_ARG_ATTR_SHARD "tp.shard"
/// Argument attribute: `tp.grad = false` keeps tp-autodiff from computing the argument's gradient.
#define TPC_ARG_ATTR_GRAD "tp.grad"
/// Argument attribute set by tp-autodiff: `tp.cotangent = j` marks the cotangent of result j.
#define TPC_ARG_ATTR_COTANGENT "tp.cotangent"
/// Result attribute set by tp-autodiff: `tp.grad_of = i` marks the gradient of argument i.
#define TPC_RES_ATTR_GRAD_OF "tp.grad_of"
/// Argument attribute set by tp-adamw: `tp.state_of = i` marks an optimizer state (master weight,
/// moment) of parameter argument i; tp-shard lays it out like that argument.
#define TPC_ARG_ATTR_STATE_OF "tp.state_of"
/// Result attribute set by tp-adamw: `tp.next = i` marks the value argument i takes at the next
/// step (a parameter or an optimizer state).
#define TPC_RES_ATTR_NEXT "tp.next"
/// Argument attribute: `tp.gtp = true` shards a weight over the mesh's gtp axis (tp-gtp; the
/// default for the weights of column- and row-parallel linears and of grouped linears), false
/// keeps it whole on every gtp rank.
#define TPC_ARG_ATTR_GTP "tp.gtp"
/// The default of tp.chunks when a module does not set it.
#define TPC_DEFAULT_CHUNKS 8

/// The values of tp.numerics, in the order of tpc_numerics_t.
typedef enum tpc_numerics_e {
  TPC_NUMERICS_FAST = 0,
  TPC_NUMERICS_INVARIANT = 1,
  TPC_NUMERICS_EXACT = 2,
} tpc_numerics_t;
extern const char* const tpc_numerics_names[3];

/// The text of dialect/tp.irdl.mlir, embedded at build time (NUL-terminated).
extern const char tpc_tp_irdl_text[];
extern const size_t tpc_tp_irdl_text_size;

/// Registers every upstream dialect with |ctx| and loads the tp dialect from the embedded IRDL.
/// Returns failure (after emitting a diagnostic) if the embedded definition does not load.
MlirLogicalResult tpc_dialect_load(MlirContext ctx);

/// A new, empty MLIR context (every tool's): with MLIR's thread pool, except in ThreadSanitizer
/// builds. libMLIR is not instrumented, and its worker threads publish shared storage through
/// atomics that TSan does not see (a report between two llvm-worker threads, both stacks inside
/// libMLIR's StorageUniquer); tpc's own threads, the runtime's rank threads, are what TSan checks.
MlirContext tpc_mlir_context_create(void);

/// Creates a context with all upstream dialects and tp loaded; transfers ownership to the
/// caller. Returns a null context if loading fails.
MlirContext tpc_context_create(void);

#ifdef __cplusplus
}
#endif

#endif  // TPC_DIALECT_H_
