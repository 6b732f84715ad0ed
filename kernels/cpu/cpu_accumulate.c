// The accumulating forms of the gradient kernels (linear_dgrad, rmsnorm_grad, embedding_grad) (an op's optional acc operand, which tp-fuse
// makes from a tp.add of the op's result): the op, its result rounded to its dtype, then
// tprt_cpu_add of acc, rounded once. These compositions define the bits; a device backend's fused
// kernel matches them in exact and invariant numerics.
#include <stdio.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

tprt_status_t tprt_cpu_check_acc(const char* op, const tprt_tensor_t* acc, const tprt_tensor_t* out) {
  char sa[96], so[96];
  bool ok = acc && out && acc->rank == out->rank && acc->dtype == out->dtype;
  for (int d = 0; ok && d < acc->rank; ++d) ok = acc->dims[d] == out->dims[d];
  if (!ok)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: acc must have the result's shape and dtype %s; got %s", op,
                            out ? tprt__shape_str(out, so, sizeof so) : "(none)",
                            acc ? tprt__shape_str(acc, sa, sizeof sa) : "(none)");
  return NULL;
}

tprt_status_t tprt_cpu_linear_dgrad_acc(const tprt_tensor_t* dy, const tprt_tensor_t* w, const tprt_tensor_t* acc,
                                        tprt_tensor_t* dx, int chunks, int segments, int blocks) {
  tprt_status_t s = tprt_cpu_check_acc("linear_dgrad", acc, dx);
  if (!s) s = tprt_cpu_linear_dgrad_segmented(dy, w, dx, chunks, segments, blocks);
  if (!s) s = tprt_cpu_add(dx, acc, dx);
  return s;
}

tprt_status_t tprt_cpu_rmsnorm_grad_acc(const tprt_tensor_t* x, const tprt_tensor_t* gamma, const tprt_tensor_t* dy,
                                        const tprt_tensor_t* acc, tprt_tensor_t* dx, tprt_tensor_t* dgamma, float eps,
                                        int chunks) {
  tprt_status_t s = tprt_cpu_check_acc("rmsnorm_grad", acc, dx);
  if (!s) s = tprt_cpu_rmsnorm_grad(x, gamma, dy, dx, dgamma, eps, chunks);
  if (!s) s = tprt_cpu_add(dx, acc, dx);
  return s;
}

tprt_status_t tprt_cpu_embedding_grad_acc(const tprt_tensor_t* ids, const tprt_tensor_t* dy, const tprt_tensor_t* acc,
                                          tprt_tensor_t* dtable, int64_t start, int64_t vocab, int chunks) {
  tprt_status_t s = tprt_cpu_check_acc("embedding_grad", acc, dtable);
  if (!s) s = tprt_cpu_embedding_grad(ids, dy, dtable, start, vocab, chunks);
  if (!s) s = tprt_cpu_add(dtable, acc, dtable);
  return s;
}
