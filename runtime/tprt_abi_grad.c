// The runtime ABI of the backward ops (see tprt_abi.h); descriptor decoding is shared with
// tprt_abi.c through tprt_abi_impl.h.
#include "tprt_abi_impl.h"
#include "tprt_cpu_kernels.h"

#define TPRT__GRAD_PROLOGUE(OP)                                         \
  tprt_call_t c;                                                        \
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_##OP##_NUM_SLOTS, &c)

int32_t tprt_abi_linear_dgrad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(LINEAR_DGRAD);
  if (!s) {
    const tprt_tensor_t *dy = &c.slot[TPRT_LINEAR_DGRAD_SLOT_DY], *w = &c.slot[TPRT_LINEAR_DGRAD_SLOT_W];
    const tprt_tensor_t* acc = tprt__opt(&c, TPRT_LINEAR_DGRAD_SLOT_ACC);
    int chunks = tprt__chunks(exec, &c, TPRT_LINEAR_DGRAD_ATTR_CHUNKS);
    int segments = (int)tprt__attr(&c, TPRT_LINEAR_DGRAD_ATTR_SEGMENTS);
    int blocks = (int)tprt__attr(&c, TPRT_LINEAR_DGRAD_ATTR_BLOCKS);
    tprt_tensor_t* dx = &c.slot[TPRT_LINEAR_DGRAD_SLOT_DX];
    s = acc ? TPRT__KERNEL(exec, linear_dgrad_acc, (dy, w, acc, dx, chunks, segments, blocks))
            : TPRT__KERNEL(exec, linear_dgrad_segmented, (dy, w, dx, chunks, segments, blocks));
    tprt__count_gemm(exec, dy->dims[0], w->dims[1], dy->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_LINEAR_DGRAD_NAME);
}

int32_t tprt_abi_linear_wgrad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(LINEAR_WGRAD);
  if (!s) {
    const tprt_tensor_t *dy = &c.slot[TPRT_LINEAR_WGRAD_SLOT_DY], *x = &c.slot[TPRT_LINEAR_WGRAD_SLOT_X];
    s = TPRT__KERNEL(exec, linear_wgrad, (dy, x, &c.slot[TPRT_LINEAR_WGRAD_SLOT_DW],
                              tprt__chunks(exec, &c, TPRT_LINEAR_WGRAD_ATTR_CHUNKS)));
    tprt__count_gemm(exec, dy->dims[1], x->dims[1], dy->dims[0], false);
  }
  return tprt_exec_record(exec, s, TPRT_LINEAR_WGRAD_NAME);
}

int32_t tprt_abi_bias_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(BIAS_GRAD);
  if (!s) s = TPRT__KERNEL(exec, bias_grad, (&c.slot[TPRT_BIAS_GRAD_SLOT_DY], &c.slot[TPRT_BIAS_GRAD_SLOT_DB],
                                   tprt__chunks(exec, &c, TPRT_BIAS_GRAD_ATTR_CHUNKS)));
  return tprt_exec_record(exec, s, TPRT_BIAS_GRAD_NAME);
}

int32_t tprt_abi_grouped_linear_dgrad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(GROUPED_LINEAR_DGRAD);
  if (!s) {
    const tprt_tensor_t *dy = &c.slot[TPRT_GROUPED_LINEAR_DGRAD_SLOT_DY], *w = &c.slot[TPRT_GROUPED_LINEAR_DGRAD_SLOT_W];
    s = TPRT__KERNEL(exec, grouped_linear_dgrad_segmented, (dy, w, &c.slot[TPRT_GROUPED_LINEAR_DGRAD_SLOT_GROUP_SIZES],
                                                &c.slot[TPRT_GROUPED_LINEAR_DGRAD_SLOT_DX],
                                                tprt__chunks(exec, &c, TPRT_GROUPED_LINEAR_DGRAD_ATTR_CHUNKS),
                                                (int)tprt__attr(&c, TPRT_GROUPED_LINEAR_DGRAD_ATTR_SEGMENTS),
                                                (int)tprt__attr(&c, TPRT_GROUPED_LINEAR_DGRAD_ATTR_BLOCKS)));
    tprt__count_gemm(exec, dy->dims[0], w->dims[2], dy->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_GROUPED_LINEAR_DGRAD_NAME);
}

int32_t tprt_abi_grouped_linear_wgrad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(GROUPED_LINEAR_WGRAD);
  if (!s) {
    const tprt_tensor_t *dy = &c.slot[TPRT_GROUPED_LINEAR_WGRAD_SLOT_DY], *x = &c.slot[TPRT_GROUPED_LINEAR_WGRAD_SLOT_X];
    s = TPRT__KERNEL(exec, grouped_linear_wgrad, (dy, x, &c.slot[TPRT_GROUPED_LINEAR_WGRAD_SLOT_GROUP_SIZES],
                                      &c.slot[TPRT_GROUPED_LINEAR_WGRAD_SLOT_DW],
                                      tprt__chunks(exec, &c, TPRT_GROUPED_LINEAR_WGRAD_ATTR_CHUNKS)));
    tprt__count_gemm(exec, dy->dims[1], x->dims[1], dy->dims[0], false);
  }
  return tprt_exec_record(exec, s, TPRT_GROUPED_LINEAR_WGRAD_NAME);
}

int32_t tprt_abi_glu_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(GLU_GRAD);
  if (!s)
    s = TPRT__KERNEL(exec, glu_grad, (&c.slot[TPRT_GLU_GRAD_SLOT_X], &c.slot[TPRT_GLU_GRAD_SLOT_DY], &c.slot[TPRT_GLU_GRAD_SLOT_DX],
                          (int)tprt__attr(&c, TPRT_GLU_GRAD_ATTR_KIND), tprt__attr(&c, TPRT_GLU_GRAD_ATTR_INTERLEAVE),
                          tprt__attr_f32(&c, TPRT_GLU_GRAD_ATTR_ALPHA), tprt__attr_f32(&c, TPRT_GLU_GRAD_ATTR_LIMIT)));
  return tprt_exec_record(exec, s, TPRT_GLU_GRAD_NAME);
}

int32_t tprt_abi_rmsnorm_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(RMSNORM_GRAD);
  if (!s) {
    const tprt_tensor_t *x = &c.slot[TPRT_RMSNORM_GRAD_SLOT_X], *gamma = &c.slot[TPRT_RMSNORM_GRAD_SLOT_GAMMA];
    const tprt_tensor_t *dy = &c.slot[TPRT_RMSNORM_GRAD_SLOT_DY], *acc = tprt__opt(&c, TPRT_RMSNORM_GRAD_SLOT_ACC);
    tprt_tensor_t *dx = &c.slot[TPRT_RMSNORM_GRAD_SLOT_DX], *dgamma = &c.slot[TPRT_RMSNORM_GRAD_SLOT_DGAMMA];
    float eps = tprt__attr_f32(&c, TPRT_RMSNORM_GRAD_ATTR_EPS);
    int chunks = tprt__chunks(exec, &c, TPRT_RMSNORM_GRAD_ATTR_CHUNKS);
    s = acc ? TPRT__KERNEL(exec, rmsnorm_grad_acc, (x, gamma, dy, acc, dx, dgamma, eps, chunks))
            : TPRT__KERNEL(exec, rmsnorm_grad, (x, gamma, dy, dx, dgamma, eps, chunks));
  }
  return tprt_exec_record(exec, s, TPRT_RMSNORM_GRAD_NAME);
}

int32_t tprt_abi_layernorm_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(LAYERNORM_GRAD);
  if (!s)
    s = TPRT__KERNEL(exec, layernorm_grad, (&c.slot[TPRT_LAYERNORM_GRAD_SLOT_X], &c.slot[TPRT_LAYERNORM_GRAD_SLOT_GAMMA],
                                &c.slot[TPRT_LAYERNORM_GRAD_SLOT_DY], &c.slot[TPRT_LAYERNORM_GRAD_SLOT_DX],
                                &c.slot[TPRT_LAYERNORM_GRAD_SLOT_DGAMMA], &c.slot[TPRT_LAYERNORM_GRAD_SLOT_DBETA],
                                tprt__attr_f32(&c, TPRT_LAYERNORM_GRAD_ATTR_EPS),
                                tprt__chunks(exec, &c, TPRT_LAYERNORM_GRAD_ATTR_CHUNKS)));
  return tprt_exec_record(exec, s, TPRT_LAYERNORM_GRAD_NAME);
}

int32_t tprt_abi_moe_unpermute_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(MOE_UNPERMUTE_GRAD);
  if (!s)
    s = TPRT__KERNEL(exec, moe_unpermute_grad, (&c.slot[TPRT_MOE_UNPERMUTE_GRAD_SLOT_DOUT], &c.slot[TPRT_MOE_UNPERMUTE_GRAD_SLOT_Y],
                                    &c.slot[TPRT_MOE_UNPERMUTE_GRAD_SLOT_ROW_MAP],
                                    &c.slot[TPRT_MOE_UNPERMUTE_GRAD_SLOT_WEIGHTS], &c.slot[TPRT_MOE_UNPERMUTE_GRAD_SLOT_DY],
                                    &c.slot[TPRT_MOE_UNPERMUTE_GRAD_SLOT_DWEIGHTS]));
  return tprt_exec_record(exec, s, TPRT_MOE_UNPERMUTE_GRAD_NAME);
}

int32_t tprt_abi_moe_permute_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(MOE_PERMUTE_GRAD);
  if (!s)
    s = TPRT__KERNEL(exec, moe_permute_grad, (&c.slot[TPRT_MOE_PERMUTE_GRAD_SLOT_DY], &c.slot[TPRT_MOE_PERMUTE_GRAD_SLOT_ROW_MAP],
                                  &c.slot[TPRT_MOE_PERMUTE_GRAD_SLOT_DX], (int)tprt__attr(&c, TPRT_MOE_PERMUTE_GRAD_ATTR_TOP_K)));
  return tprt_exec_record(exec, s, TPRT_MOE_PERMUTE_GRAD_NAME);
}

int32_t tprt_abi_moe_route_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  TPRT__GRAD_PROLOGUE(MOE_ROUTE_GRAD);
  if (!s)
    s = TPRT__KERNEL(exec, moe_route_grad, (&c.slot[TPRT_MOE_ROUTE_GRAD_SLOT_LOGITS], &c.slot[TPRT_MOE_ROUTE_GRAD_SLOT_INDICES],
                                &c.slot[TPRT_MOE_ROUTE_GRAD_SLOT_DWEIGHTS], &c.slot[TPRT_MOE_ROUTE_GRAD_SLOT_DLOGITS],
                                (int)tprt__attr(&c, TPRT_MOE_ROUTE_GRAD_ATTR_TOP_K),
                                tprt__attr(&c, TPRT_MOE_ROUTE_GRAD_ATTR_NORMALIZE) != 0));
  return tprt_exec_record(exec, s, TPRT_MOE_ROUTE_GRAD_NAME);
}
