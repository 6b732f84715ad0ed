// Internal to tp-autodiff (autodiff.c, autodiff_rules.c): the per-function state, the value table
// with each value's gradient, and the emission helpers the gradient rules use.
#ifndef TPC_AUTODIFF_IMPL_H_
#define TPC_AUTODIFF_IMPL_H_

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "text_buffer.h"


typedef struct {
  MlirValue value;
  char name[48];     // SSA name in the emitted text
  char adjoint[48];  // SSA name of the accumulated gradient, "" when none yet
  uint32_t tokens;   // per-rank programs: the mesh axes that shard this activation's tokens
  MlirType adjoint_type;  // the gradient's type (a bf16 gradient can flow into an f32 partial)
  char stats[48];    // a tp.attention output's softmax statistics (its lse), "" when none
} tpc__adval_t;

typedef struct {
  MlirOperation func;
  MlirOperation loc_op;  // the op whose location every emitted op carries (its forward op)
  MlirContext ctx;
  // Per-rank programs (after tp-shard): the mesh, and the index of its tp axis (-1 if none).
  bool per_rank;
  MlirStringRef mesh_name;  // the mesh's symbol name (owned by the context)
  int num_axes;
  char axes[4][16];
  int64_t sizes[4];
  int tp;
  tpc__adval_t* vals;  // cap_vals entries, sized from the function (tpc_func_value_bound)
  int num_vals, cap_vals;
  int counter;
  bool recompute;  // the module's tp.recompute: layers are recomputed before their gradients
  tpc_text_t body;
} tpc__ad_t;

tpc__adval_t* tpc__ad_find(tpc__ad_t* A, MlirValue v);
/// The type of tp.attention |op|'s lse: f32 [T, Hq] of its q.
MlirType tpc__ad_lse_type(tpc__ad_t* A, MlirOperation op);
tpc__adval_t* tpc__ad_add(tpc__ad_t* A, MlirValue v, const char* name);
/// Adds the gradient |g| (of type |t|) to |v|'s adjoint, with a tp.add after the first.
void tpc__ad_accumulate(tpc__ad_t* A, MlirValue v, const char* g, MlirType t);
/// The SSA name of |v| in the emitted text.
const char* tpc__ad_name(tpc__ad_t* A, MlirValue v);
/// Per-rank programs: the mesh axes that shard |v|'s tokens.
uint32_t tpc__ad_tokens(tpc__ad_t* A, MlirValue v);
/// The mesh-axis mask of a collective's `axes` attribute.
uint32_t tpc__ad_axes_mask(const tpc__ad_t* A, MlirOperation op);
/// The type of |v| with element type f32.
MlirType tpc__f32_like(tpc__ad_t* A, MlirValue v);
/// Emits one op; the attributes of |src| named in |keep| (all when NULL) and |extra| are copied.
const char* tpc__ad_emit(tpc__ad_t* A, const char* op_name, const char* const* operands, const MlirType* operand_types,
                         int nin, const MlirType* result_types, int nout, MlirOperation src, const char* const* keep,
                         const char* extra, char* out_base, size_t size);
/// Emits the gradient of |op| from its results' adjoints (autodiff_rules.c).
MlirLogicalResult tpc__ad_rule(tpc__ad_t* A, MlirOperation op, int kind);

#endif  // TPC_AUTODIFF_IMPL_H_
