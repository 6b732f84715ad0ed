// Internal to the runtime ABI files (tprt_abi*.c): the decoded form of an op descriptor.
#ifndef TPRT_ABI_IMPL_H_
#define TPRT_ABI_IMPL_H_

#include <stdbool.h>

#include "tprt_abi.h"
#include "tprt_backend.h"
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
  // Host fallback (TPRT__KERNEL): the slots' device pointers while they point at host copies.
  void* device_data[TPRT_ABI_MAX_SLOTS];
  tprt_status_t host_status;
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

/// The exec's backend's kernel or collective |name| called with the parenthesized |args|, which
/// refer to the slots of the local tprt_call_t `c` (NULL without calling it in a count-only step).
/// When the backend has no |name|, the host fallback runs the CPU backend's |name| on host copies
/// of every slot and copies them back: bitwise the CPU result, slowly (noted once per op on
/// stderr). A backend whose memory is the host's never needs it.
#define TPRT__KERNEL(exec, name, args)                                                       \
  (tprt_exec_count_only(exec)                   ? NULL                                       \
   : tprt_exec_backend(exec)->name != NULL      ? tprt_exec_backend(exec)->name args         \
   : tprt__host_begin(exec, &c, #name)          ? c.host_status                              \
                                                : tprt__host_end(exec, &c, tprt_backend_cpu()->name args))

/// Copies every present slot of |c| to host memory and points the slots there; returns true (with
/// c->host_status set) on failure.
bool tprt__host_begin(tprt_exec_t* exec, tprt_call_t* c, const char* op);

/// Copies the slots back to the device, restores them, frees the host copies; returns |status|
/// (the CPU kernel's) or the first copy failure.
tprt_status_t tprt__host_end(tprt_exec_t* exec, tprt_call_t* c, tprt_status_t status);

/// UNIMPLEMENTED: "the <backend> backend has no <op> kernel yet".
tprt_status_t tprt__no_kernel(const tprt_backend_t* backend, const char* op);

/// The chunk count of an op's contraction: its `chunks` attribute (index |attr|) when set (> 0;
/// tp-invariant sets C/R on a partial completed by an R-rank reduction), else the module's.
int tprt__chunks(const tprt_exec_t* exec, const tprt_call_t* c, int attr);

/// Counts a product of [M,K] by [K,N], 2·M·N·K FLOPs, in the exec's gemm_flops and, unless
/// |recomputed| (work the model's math does not ask for: the cross-entropy's logits recomputed by
/// its gradients, the attention's scores by its backward), in its model_flops.
void tprt__count_gemm(tprt_exec_t* exec, int64_t m, int64_t n, int64_t k, bool recomputed);

/// Checks that the mesh a collective names (attribute |mesh_attr|) is the world's.
tprt_status_t tprt__check_mesh(tprt_exec_t* exec, const tprt_call_t* c, int mesh_attr);

#endif  // TPRT_ABI_IMPL_H_
