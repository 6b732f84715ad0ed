// How a logical tensor is laid out over a device mesh (used by tp-shard): for every dimension,
// the mesh axes that shard it and the number of blocks it is cut into before sharding. Printed
// on per-rank function arguments and results as the `tp.shard` attribute:
//   tp.shard = {axes = [["tp"], []], blocks = array<i64: 2, 1>, logical = array<i64: 512, 128>}
// Local size = logical / (product of the axis sizes); with blocks = B the dimension is cut into
// B equal blocks, each sharded, and the local dimension concatenates this rank's piece of each
// (Megatron's stride-2 sharding of a SwiGLU FC1 weight, so every rank holds matching gate and up
// rows). runtime/tprt_shard.h implements the same mapping for loading and saving.
#ifndef TPC_SHARD_LAYOUT_H_
#define TPC_SHARD_LAYOUT_H_

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "text_buffer.h"

#define TPC_LAYOUT_MAX_RANK 8
#define TPC_LAYOUT_MAX_AXES 4

/// The mesh a module is sharded over.
typedef struct tpc_mesh_t {
  MlirStringRef name;  // its symbol name (owned by the context); print with tpc_text_symbol_ref
  int num_axes;
  char axes[TPC_LAYOUT_MAX_AXES][16];
  int64_t sizes[TPC_LAYOUT_MAX_AXES];
} tpc_mesh_t;

typedef struct tpc_layout_t {
  int rank;
  int64_t logical[TPC_LAYOUT_MAX_RANK];
  uint32_t mask[TPC_LAYOUT_MAX_RANK];   // mesh axes sharding each dim (bit i = mesh axis i)
  int64_t blocks[TPC_LAYOUT_MAX_RANK];  // >= 1
  MlirType element;
} tpc_layout_t;

/// A replicated layout of tensor type |t|; rank 0 with a null element type when |t| is not a
/// ranked tensor.
tpc_layout_t tpc_layout_replicated(MlirType t);

/// The product of the sizes of the axes in |mask|.
int64_t tpc_mesh_group_size(const tpc_mesh_t* mesh, uint32_t mask);

/// Local size of dimension |d|, or -1 if the logical size does not divide by blocks × group.
int64_t tpc_layout_local_dim(const tpc_layout_t* l, const tpc_mesh_t* mesh, int d);

/// True when |a| and |b| shard every dimension the same way.
bool tpc_layout_equal(const tpc_layout_t* a, const tpc_layout_t* b);

/// Appends "[dp*tp, -, tp/2]" (axes per dim, "-" replicated, "/B" blocks) to |t|.
void tpc_layout_describe(const tpc_layout_t* l, const tpc_mesh_t* mesh, tpc_text_t* t);

/// Appends the local tensor type ("tensor<4x128xbf16>") to |t|. Call only after checking
/// divisibility with tpc_layout_local_dim.
void tpc_layout_print_local_type(const tpc_layout_t* l, const tpc_mesh_t* mesh, tpc_text_t* t);

/// Appends the tp.shard attribute value ("{axes = ..., blocks = ..., logical = ...}") to |t|.
void tpc_layout_print_attr(const tpc_layout_t* l, const tpc_mesh_t* mesh, tpc_text_t* t);

#endif  // TPC_SHARD_LAYOUT_H_
