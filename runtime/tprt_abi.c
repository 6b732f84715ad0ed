// The runtime ABI (tprt_abi.h): decodes each op's static descriptor and calls the CPU kernels
// and collectives. One decoder serves every op; each entry point only maps slots to arguments.
#include <stdio.h>
#include <string.h>

#include "tprt_abi_impl.h"
#include "tprt_allocator.h"
#include "tprt_cpu_kernels.h"

// Decodes |desc| (layout in tprt_abi.h) and binds |buffers|; checks the slot count the op
// expects so that a module compiled against another op definition fails cleanly.
tprt_status_t tprt__decode(const int64_t* desc, void* const* buffers, int expect_slots, tprt_call_t* c) {
  if (!desc || desc[0] != TPRT_ABI_DESC_MAGIC)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                            "descriptor magic mismatch: the module was compiled for another runtime ABI");
  int64_t n = desc[1];
  if (n != expect_slots || n > TPRT_ABI_MAX_SLOTS)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "descriptor has %lld slots, the op has %d",
                            (long long)n, expect_slots);
  const int64_t* p = desc + 2;
  c->num_slots = (int)n;
  for (int s = 0; s < n; ++s) {
    int64_t dtype = *p++, rank = *p++;
    if (rank < 0 || rank > TPRT_MAX_RANK)
      return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "slot %d has rank %lld", s, (long long)rank);
    c->present[s] = dtype >= 0 && buffers[s] != NULL;
    c->slot[s] = tprt_tensor_make(buffers[s], (int)dtype, (int)rank, p);
    p += rank;
  }
  int64_t a = *p++;
  if (a > TPRT_ABI_MAX_ATTRS || a < 0)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "descriptor has %lld attributes", (long long)a);
  c->num_attrs = (int)a;
  for (int i = 0; i < a; ++i) {
    c->attr_len[i] = *p++;
    c->attr[i] = p;
    p += c->attr_len[i];
  }
  return NULL;
}

int64_t tprt__attr(const tprt_call_t* c, int i) { return i < c->num_attrs && c->attr_len[i] > 0 ? c->attr[i][0] : 0; }

float tprt__attr_f32(const tprt_call_t* c, int i) {
  uint32_t bits = (uint32_t)tprt__attr(c, i);
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

const tprt_tensor_t* tprt__opt(const tprt_call_t* c, int s) { return c->present[s] ? &c->slot[s] : NULL; }

bool tprt__host_begin(tprt_exec_t* exec, tprt_call_t* c, const char* op) {
  const tprt_backend_t* b = tprt_exec_backend(exec);
  static _Atomic int noted[64];
  unsigned h = 5381;
  for (const char* p = op; *p; ++p) h = h * 33u + (unsigned char)*p;
  tprt_rank_t* rank = tprt_exec_rank(exec);
  if ((!rank || tprt_rank_index(rank) == 0) && !noted[h % 64]++)
    fprintf(stderr, "tpc-run: note: the %s backend has no %s kernel yet; it runs on the host (CPU kernel)\n", b->name,
            op);
  c->host_status = NULL;
  for (int s = 0; s < c->num_slots; ++s) c->device_data[s] = NULL;
  for (int s = 0; s < c->num_slots && !c->host_status; ++s) {
    if (!c->present[s]) continue;
    size_t bytes = tprt_tensor_bytes(&c->slot[s]);
    void* host = NULL;
    c->host_status = tprt_allocator_malloc(tprt_allocator_system(), bytes > 0 ? bytes : 1, 64, &host);
    if (!c->host_status) c->host_status = b->to_host(host, c->slot[s].data, bytes);
    if (c->host_status) {
      tprt_allocator_free(tprt_allocator_system(), host);
      break;
    }
    c->device_data[s] = c->slot[s].data;
    c->slot[s].data = host;
  }
  if (c->host_status) c->host_status = tprt__host_end(exec, c, c->host_status);
  return c->host_status != NULL;
}

tprt_status_t tprt__host_end(tprt_exec_t* exec, tprt_call_t* c, tprt_status_t status) {
  const tprt_backend_t* b = tprt_exec_backend(exec);
  for (int s = 0; s < c->num_slots; ++s) {
    if (!c->device_data[s]) continue;
    if (!status) status = b->to_device(c->device_data[s], c->slot[s].data, tprt_tensor_bytes(&c->slot[s]));
    tprt_allocator_free(tprt_allocator_system(), c->slot[s].data);
    c->slot[s].data = c->device_data[s];
    c->device_data[s] = NULL;
  }
  return status;
}

tprt_status_t tprt__no_kernel(const tprt_backend_t* backend, const char* op) {
  return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "the %s backend has no %s kernel yet", backend->name, op);
}

int tprt__chunks(const tprt_exec_t* exec, const tprt_call_t* c, int attr) {
  int64_t v = tprt__attr(c, attr);
  return v > 0 ? (int)v : tprt_exec_chunks(exec);
}

// Checks that the mesh a collective names (attribute |mesh_attr|: rank, sizes) is the world's.
tprt_status_t tprt__check_mesh(tprt_exec_t* exec, const tprt_call_t* c, int mesh_attr) {
  tprt_rank_t* rank = tprt_exec_rank(exec);
  if (!rank) return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "a collective needs a world of ranks");
  const tprt_world_t* w = tprt_rank_world(rank);
  const int64_t* m = c->attr[mesh_attr];
  bool same = c->attr_len[mesh_attr] >= 1 && m[0] == tprt_world_num_axes(w);
  for (int i = 0; same && i < m[0]; ++i) same = m[1 + i] == tprt_world_axis_size(w, i);
  if (!same)
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                            "the module's mesh does not match the world it runs in (%d ranks over %d axes)",
                            tprt_world_size(w), tprt_world_num_axes(w));
  return NULL;
}

void tprt__count_gemm(tprt_exec_t* exec, int64_t m, int64_t n, int64_t k, bool recomputed) {
  tprt_exec_stats(exec)->gemm_flops += 2 * m * n * k;
  if (!recomputed) tprt_exec_stats(exec)->model_flops += 2 * m * n * k;
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

int32_t tprt_abi_linear(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_LINEAR_NUM_SLOTS, &c);
  if (!s) {
    const tprt_tensor_t *x = &c.slot[TPRT_LINEAR_SLOT_X], *w = &c.slot[TPRT_LINEAR_SLOT_W];
    s = TPRT__KERNEL(exec, linear, (x, w, tprt__opt(&c, TPRT_LINEAR_SLOT_BIAS), &c.slot[TPRT_LINEAR_SLOT_Y],
                        tprt__chunks(exec, &c, TPRT_LINEAR_ATTR_CHUNKS)));
    tprt__count_gemm(exec, x->dims[0], w->dims[0], x->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_LINEAR_NAME);
}

int32_t tprt_abi_grouped_linear(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_GROUPED_LINEAR_NUM_SLOTS, &c);
  if (!s) {
    const tprt_tensor_t *x = &c.slot[TPRT_GROUPED_LINEAR_SLOT_X], *w = &c.slot[TPRT_GROUPED_LINEAR_SLOT_W];
    s = TPRT__KERNEL(exec, grouped_linear, (x, w, &c.slot[TPRT_GROUPED_LINEAR_SLOT_GROUP_SIZES], &c.slot[TPRT_GROUPED_LINEAR_SLOT_Y],
                                tprt__chunks(exec, &c, TPRT_GROUPED_LINEAR_ATTR_CHUNKS)));
    tprt__count_gemm(exec, x->dims[0], w->dims[1], x->dims[1], false);
  }
  return tprt_exec_record(exec, s, TPRT_GROUPED_LINEAR_NAME);
}

int32_t tprt_abi_glu(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_GLU_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, glu, (&c.slot[TPRT_GLU_SLOT_X], &c.slot[TPRT_GLU_SLOT_Y], (int)tprt__attr(&c, TPRT_GLU_ATTR_KIND),
                     tprt__attr(&c, TPRT_GLU_ATTR_INTERLEAVE), tprt__attr_f32(&c, TPRT_GLU_ATTR_ALPHA),
                     tprt__attr_f32(&c, TPRT_GLU_ATTR_LIMIT)));
  return tprt_exec_record(exec, s, TPRT_GLU_NAME);
}

int32_t tprt_abi_rmsnorm(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_RMSNORM_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, rmsnorm, (&c.slot[TPRT_RMSNORM_SLOT_X], &c.slot[TPRT_RMSNORM_SLOT_GAMMA], &c.slot[TPRT_RMSNORM_SLOT_Y],
                         tprt__attr_f32(&c, TPRT_RMSNORM_ATTR_EPS)));
  return tprt_exec_record(exec, s, TPRT_RMSNORM_NAME);
}

// The residual add and the next norm in one pass (tp-fuse's tp.add_rmsnorm): the pair's bits.
int32_t tprt_abi_add_rmsnorm(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_ADD_RMSNORM_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, add_rmsnorm, (&c.slot[TPRT_ADD_RMSNORM_SLOT_RESIDUAL], &c.slot[TPRT_ADD_RMSNORM_SLOT_Y],
                                         &c.slot[TPRT_ADD_RMSNORM_SLOT_GAMMA], &c.slot[TPRT_ADD_RMSNORM_SLOT_NORMED],
                                         &c.slot[TPRT_ADD_RMSNORM_SLOT_SUM], tprt__attr_f32(&c, TPRT_ADD_RMSNORM_ATTR_EPS)));
  return tprt_exec_record(exec, s, TPRT_ADD_RMSNORM_NAME);
}

int32_t tprt_abi_layernorm(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_LAYERNORM_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, layernorm, (&c.slot[TPRT_LAYERNORM_SLOT_X], &c.slot[TPRT_LAYERNORM_SLOT_GAMMA],
                           &c.slot[TPRT_LAYERNORM_SLOT_BETA], &c.slot[TPRT_LAYERNORM_SLOT_Y],
                           tprt__attr_f32(&c, TPRT_LAYERNORM_ATTR_EPS)));
  return tprt_exec_record(exec, s, TPRT_LAYERNORM_NAME);
}

int32_t tprt_abi_add(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_ADD_NUM_SLOTS, &c);
  if (!s) s = TPRT__KERNEL(exec, add, (&c.slot[TPRT_ADD_SLOT_LHS], &c.slot[TPRT_ADD_SLOT_RHS], &c.slot[TPRT_ADD_SLOT_RESULT]));
  return tprt_exec_record(exec, s, TPRT_ADD_NAME);
}

int32_t tprt_abi_mul(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_MUL_NUM_SLOTS, &c);
  if (!s) s = TPRT__KERNEL(exec, mul, (&c.slot[TPRT_MUL_SLOT_LHS], &c.slot[TPRT_MUL_SLOT_RHS], &c.slot[TPRT_MUL_SLOT_RESULT]));
  return tprt_exec_record(exec, s, TPRT_MUL_NAME);
}

int32_t tprt_abi_amax(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_AMAX_NUM_SLOTS, &c);
  if (!s) s = TPRT__KERNEL(exec, amax, (&c.slot[TPRT_AMAX_SLOT_X], &c.slot[TPRT_AMAX_SLOT_AMAX]));
  return tprt_exec_record(exec, s, TPRT_AMAX_NAME);
}

// With an amax operand (the whole tensor's, for a shard) the backend's quantize_with_amax.
int32_t tprt_abi_quantize(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_QUANTIZE_NUM_SLOTS, &c);
  if (!s) {
    const tprt_tensor_t *x = &c.slot[TPRT_QUANTIZE_SLOT_X], *amax = tprt__opt(&c, TPRT_QUANTIZE_SLOT_AMAX);
    tprt_tensor_t *data = &c.slot[TPRT_QUANTIZE_SLOT_DATA], *scale = &c.slot[TPRT_QUANTIZE_SLOT_SCALE];
    tprt_tensor_t* global =
        c.present[TPRT_QUANTIZE_SLOT_GLOBAL_SCALE] ? &c.slot[TPRT_QUANTIZE_SLOT_GLOBAL_SCALE] : NULL;
    int format = (int)tprt__attr(&c, TPRT_QUANTIZE_ATTR_FORMAT), axis = (int)tprt__attr(&c, TPRT_QUANTIZE_ATTR_AXIS);
    s = amax ? TPRT__KERNEL(exec, quantize_with_amax, (x, amax, data, scale, global, format, axis))
             : TPRT__KERNEL(exec, quantize, (x, data, scale, global, format, axis));
  }
  return tprt_exec_record(exec, s, TPRT_QUANTIZE_NAME);
}

int32_t tprt_abi_dequantize(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_DEQUANTIZE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, dequantize, (&c.slot[TPRT_DEQUANTIZE_SLOT_DATA], &c.slot[TPRT_DEQUANTIZE_SLOT_SCALE],
                            tprt__opt(&c, TPRT_DEQUANTIZE_SLOT_GLOBAL_SCALE), &c.slot[TPRT_DEQUANTIZE_SLOT_X],
                            (int)tprt__attr(&c, TPRT_DEQUANTIZE_ATTR_FORMAT), (int)tprt__attr(&c, TPRT_DEQUANTIZE_ATTR_AXIS)));
  return tprt_exec_record(exec, s, TPRT_DEQUANTIZE_NAME);
}

int32_t tprt_abi_moe_route(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_MOE_ROUTE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, moe_route, (&c.slot[TPRT_MOE_ROUTE_SLOT_LOGITS], &c.slot[TPRT_MOE_ROUTE_SLOT_INDICES],
                           &c.slot[TPRT_MOE_ROUTE_SLOT_WEIGHTS], (int)tprt__attr(&c, TPRT_MOE_ROUTE_ATTR_TOP_K),
                           tprt__attr(&c, TPRT_MOE_ROUTE_ATTR_NORMALIZE) != 0));
  return tprt_exec_record(exec, s, TPRT_MOE_ROUTE_NAME);
}

int32_t tprt_abi_moe_permute(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_MOE_PERMUTE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, moe_permute, (&c.slot[TPRT_MOE_PERMUTE_SLOT_X], &c.slot[TPRT_MOE_PERMUTE_SLOT_INDICES],
                             &c.slot[TPRT_MOE_PERMUTE_SLOT_Y], &c.slot[TPRT_MOE_PERMUTE_SLOT_GROUP_SIZES],
                             &c.slot[TPRT_MOE_PERMUTE_SLOT_ROW_MAP]));
  return tprt_exec_record(exec, s, TPRT_MOE_PERMUTE_NAME);
}

int32_t tprt_abi_moe_bucket(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_MOE_BUCKET_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, moe_bucket, (&c.slot[TPRT_MOE_BUCKET_SLOT_X], &c.slot[TPRT_MOE_BUCKET_SLOT_GROUP_SIZES],
                            &c.slot[TPRT_MOE_BUCKET_SLOT_Y], (int)tprt__attr(&c, TPRT_MOE_BUCKET_ATTR_BUCKETS)));
  return tprt_exec_record(exec, s, TPRT_MOE_BUCKET_NAME);
}

int32_t tprt_abi_moe_unbucket(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_MOE_UNBUCKET_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, moe_unbucket, (&c.slot[TPRT_MOE_UNBUCKET_SLOT_X], &c.slot[TPRT_MOE_UNBUCKET_SLOT_GROUP_SIZES],
                              &c.slot[TPRT_MOE_UNBUCKET_SLOT_Y], (int)tprt__attr(&c, TPRT_MOE_UNBUCKET_ATTR_BUCKETS)));
  return tprt_exec_record(exec, s, TPRT_MOE_UNBUCKET_NAME);
}

int32_t tprt_abi_moe_unpermute(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_MOE_UNPERMUTE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, moe_unpermute, (&c.slot[TPRT_MOE_UNPERMUTE_SLOT_Y], &c.slot[TPRT_MOE_UNPERMUTE_SLOT_ROW_MAP],
                               &c.slot[TPRT_MOE_UNPERMUTE_SLOT_WEIGHTS], &c.slot[TPRT_MOE_UNPERMUTE_SLOT_OUT]));
  return tprt_exec_record(exec, s, TPRT_MOE_UNPERMUTE_NAME);
}

int32_t tprt_abi_fused_grouped_mlp(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_FUSED_GROUPED_MLP_NUM_SLOTS, &c);
  if (!s) {
    const tprt_tensor_t *x = &c.slot[TPRT_FUSED_GROUPED_MLP_SLOT_X], *w1 = &c.slot[TPRT_FUSED_GROUPED_MLP_SLOT_W1];
    s = TPRT__KERNEL(exec, fused_grouped_mlp, (x, w1, &c.slot[TPRT_FUSED_GROUPED_MLP_SLOT_W2],
                                   &c.slot[TPRT_FUSED_GROUPED_MLP_SLOT_GROUP_SIZES], &c.slot[TPRT_FUSED_GROUPED_MLP_SLOT_Y],
                                   (int)tprt__attr(&c, TPRT_FUSED_GROUPED_MLP_ATTR_KIND),
                                   tprt__attr(&c, TPRT_FUSED_GROUPED_MLP_ATTR_INTERLEAVE),
                                   tprt__attr_f32(&c, TPRT_FUSED_GROUPED_MLP_ATTR_ALPHA),
                                   tprt__attr_f32(&c, TPRT_FUSED_GROUPED_MLP_ATTR_LIMIT), tprt_exec_chunks(exec)));
    tprt__count_gemm(exec, x->dims[0], w1->dims[1], x->dims[1], false);
    tprt__count_gemm(exec, x->dims[0], x->dims[1], w1->dims[1] / 2, false);
  }
  return tprt_exec_record(exec, s, TPRT_FUSED_GROUPED_MLP_NAME);
}

int32_t tprt_abi_copy(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, 2, &c);
  if (!s) s = TPRT__KERNEL(exec, copy, (&c.slot[0], &c.slot[1]));
  return tprt_exec_record(exec, s, "copy");
}

int32_t tprt_abi_poison(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, 1, &c);
  if (!s && tprt_exec_backend(exec) != tprt_backend_cpu()) s = tprt__no_kernel(tprt_exec_backend(exec), "poison");
  if (!s && c.present[0] && !tprt_exec_count_only(exec)) memset(c.slot[0].data, 0xFF, tprt_tensor_bytes(&c.slot[0]));
  return tprt_exec_record(exec, s, "poison");
}
