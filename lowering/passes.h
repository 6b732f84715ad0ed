// Constructors of every tpc pass. Each returns a pass owned by the caller.
#ifndef TPC_PASSES_H_
#define TPC_PASSES_H_

#include "mlir-c/Pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/// tp-verify: checks every rule of the tp dialect that IRDL cannot express.
MlirPass tpc_create_verify_pass(void);

/// tp-autodiff: turns every function into its training step (forward, then backward from one
/// cotangent argument per result), returning the results and the arguments' gradients.
MlirPass tpc_create_autodiff_pass(void);

/// tp-shard: partitions a logical module over its tp.mesh into the per-rank program.
/// tp-adamw: appends the global gradient norm and an AdamW update to every training step.
MlirPass tpc_create_adamw_pass(void);
MlirPass tpc_create_shard_pass(void);

/// tp-gtp: shards weights over the mesh's gtp axis, with prefetched all-gathers before their uses
/// and gradients reduce-scattered back to the shards.
MlirPass tpc_create_gtp_pass(void);

/// tp-invariant: applies tp.numerics = invariant/exact to a per-rank module (canonical chunk
/// subtrees on partial contractions, tree-ordered collectives, or tp.strategy = "gather").
MlirPass tpc_create_invariant_pass(void);

/// tp-micro-batch: cuts a step sharded over the mesh axis mb at its gradients' all-reduces into
/// a per-micro-batch function (loss and f32 partial gradients) and <name>_update (the reduction
/// over the other axes, the norm and the optimizer), and gives mb one member.
MlirPass tpc_create_micro_batch_pass(void);

/// tp-fuse: rewrites all_reduce (or reduce_scatter along the tokens) -> residual add -> rmsnorm
/// into tp.fused_allreduce_add_rmsnorm (tp.fused_reduce_scatter_add_rmsnorm); outside fast
/// numerics with sum_type = "residual", which keeps the chain's bits.
MlirPass tpc_create_fuse_pass(void);

/// tp-lower-runtime: plans intermediate tensors into one arena and lowers every tp op to a call
/// of the runtime ABI (runtime/tprt_abi.h); run upstream convert-to-llvm after it.
MlirPass tpc_create_lower_runtime_pass(void);

/// tp-lower-runtime-poison: tp-lower-runtime that also overwrites each arena buffer with 0xFF
/// after its last use, to prove in tests that the memory plan never reuses live bytes.
MlirPass tpc_create_lower_runtime_poison_pass(void);

#ifdef __cplusplus
}
#endif

#endif  // TPC_PASSES_H_
