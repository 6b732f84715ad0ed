// Internal to the runtime ABI files (tprt_abi*.c): the decoded form of an op descriptor.
#ifndef TPRT_ABI_IMPL_H_
#define TPRT_ABI_IMPL_H_

#include <stdbool.h>

#include "tprt_abi.h"
#include "tprt_exec.h"
#include "tprt_tensor.h"

#define TPRT_ABI_MAX_SLOTS 16
#define TPRT_ABI_MAX_ATTRS 16

/// An op descriptor (layout in tprt_abi.h) bound to its buffers.
typedef struct {
  int num_slots;
  tprt_tensor_t slot[TPRT_ABI_MAX_SLOTS];
  bool present[TPRT_ABI_MAX_SLOTS];
  int num_attrs;
  const int64_t* attr[TPRT_ABI_MAX_ATTRS];
  int64_t attr_len[TPRT_ABI_MAX_ATTRS];
} tprt_call_t;

/// Decodes |desc| and binds |buffers|; fails unless the op has |expect_slots| slots.
tprt_status_t tprt__decode(const int64_t* desc, void* const* buffers, int expect_slots, tprt_call_t* c);

/// The first value of attribute |i| (0 when it has none).
int64_t tprt__attr(const tprt_call_t* c, int i);

/// Attribute |i| as the f32 whose bits it holds.
float tprt__attr_f32(const tprt_call_t* c, int i);

/// Slot |s| when present, else NULL (an absent optional operand).
const tprt_tensor_t* tprt__opt(const tprt_call_t* c, int s);

/// |expr| (a call returning a tprt_status_t), or NULL without evaluating it in a count-only step.
#define TPRT__COMPUTE(exec, expr) (tprt_exec_count_only(exec) ? NULL : (expr))

/// The chunk count of an op's contraction: its `chunks` attribute (index |attr|) when set (> 0;
/// tp-invariant sets C/R on a partial completed by an R-rank reduction), else the module's.
int tprt__chunks(const tprt_exec_t* exec, const tprt_call_t* c, int attr);

/// Checks that the mesh a collective names (attribute |mesh_attr|) is the world's.
tprt_status_t tprt__check_mesh(tprt_exec_t* exec, const tprt_call_t* c, int mesh_attr);

#endif  // TPRT_ABI_IMPL_H_
