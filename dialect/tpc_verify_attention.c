// Verifier rules of the attention ops: rope, attention, attention_kvcache and attention_grad. They
// mirror the runtime's checks (tprt__check_rope, tprt__check_attention and tprt__check_kv_cache in
// kernels/cpu/cpu_attention.c),
// so a module that verifies never fails there. IRDL already makes y x's type and sin cos's type
// (rope), v, dk and dv k's type and y, dy and dq q's type (attention); the rules below check those
// too, for IR a pass builds and verifies with tpc_verify alone. tp.attention_kvcache and
// tp.attention_grad share tp.attention's rule ids: their attributes and shapes mean the same;
// attention.cache is the KV cache's.
#include <math.h>
#include <stdio.h>

#include "mlir-c/BuiltinTypes.h"
#include "tp_ops.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()

// Scratch buffers for the shapes and types quoted in a message.
typedef struct {
  char a[96], b[96], c[96], d[96];
} tpc__abufs_t;
#define DIMS(s, buf) tpc__dims_str(&(s), (buf), (int)sizeof(buf))
#define TYPE(t, buf) tpc__type_str((t), (buf), (int)sizeof(buf))

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

static MlirLogicalResult tpc__verify_rope(MlirOperation op) {
  tpc__abufs_t s;
  tpc_shape_t x = tpc__shape_of(tpc_rope_get_x(op)), y = tpc__shape_of(tpc_rope_get_y(op));
  tpc_shape_t c = tpc__shape_of(tpc_rope_get_cos(op)), sn = tpc__shape_of(tpc_rope_get_sin(op));
  if (!x.valid || !y.valid || !c.valid || !sn.valid) return FAIL;
  if (x.rank != 2 || c.rank != 2 || sn.rank != 2 || y.rank != 2 || y.dims[0] != x.dims[0] || y.dims[1] != x.dims[1])
    return tpc__rule_error(op, "rope.rank",
                           "expects x[T,H*D], cos[T,D], sin[T,D] and y of x's shape; got x %s, cos %s, sin %s, y %s",
                           DIMS(x, s.a), DIMS(c, s.b), DIMS(sn, s.c), DIMS(y, s.d));
  // The tables may be stored in another float type than x (f32 tables with bf16 activations).
  if (!tpc__is_storage_float(x.element) || !mlirTypeEqual(y.element, x.element) || !tpc__is_storage_float(c.element) ||
      !mlirTypeEqual(sn.element, c.element))
    return tpc__rule_error(op, "rope.dtype",
                           "x and y must share one bf16, f16 or f32 element type, and cos and sin one; got x %s, y %s, "
                           "cos %s, sin %s",
                           TYPE(x.type, s.a), TYPE(y.type, s.b), TYPE(c.type, s.c), TYPE(sn.type, s.d));
  int64_t d = c.dims[1];
  if (c.dims[0] != x.dims[0] || sn.dims[0] != c.dims[0] || sn.dims[1] != d || d < 2 || d % 2 != 0 || x.dims[1] % d != 0)
    return tpc__rule_error(op, "rope.table",
                           "cos and sin must be [T,D] with T=%lld (x's rows) and an even D >= 2 dividing x's width "
                           "%lld; got cos %s, sin %s",
                           (long long)x.dims[0], (long long)x.dims[1], DIMS(c, s.a), DIMS(sn, s.b));
  return OK;
}

//===----------------------------------------------------------------------===//
// attention and attention_grad
//===----------------------------------------------------------------------===//

// The values of tp.attention (q, k, v, y) or tp.attention_grad (q, k, v, y, dy, dq, dk, dv), in
// that order: the first four are shared, and the gradients come last.
enum { TPC__ATT_Q, TPC__ATT_K, TPC__ATT_V, TPC__ATT_Y, TPC__ATT_DY, TPC__ATT_DQ, TPC__ATT_DK, TPC__ATT_DV, TPC__ATT_N };
static const char* const tpc__att_names[TPC__ATT_N] = {"q", "k", "v", "y", "dy", "dq", "dk", "dv"};

// Which of the values above must have q's shape (the rest have k's).
static bool tpc__att_like_q(int i) {
  return i == TPC__ATT_Q || i == TPC__ATT_Y || i == TPC__ATT_DY || i == TPC__ATT_DQ;
}

// The KV cache of tp.attention_kvcache: k_cache and v_cache [B*C,Hkv*D] of k's type and width,
// cache_len tensor<Bxi32> (B = T / seq_len sequences, C >= 1 rows each).
static MlirLogicalResult tpc__verify_attention_cache(MlirOperation op, const tpc_shape_t* q, const tpc_shape_t* k,
                                                     int64_t seq_len) {
  tpc__abufs_t s;
  tpc_shape_t kc = tpc__shape_of(tpc_attention_kvcache_get_k_cache(op));
  tpc_shape_t vc = tpc__shape_of(tpc_attention_kvcache_get_v_cache(op));
  tpc_shape_t len = tpc__shape_of(tpc_attention_kvcache_get_cache_len(op));
  if (!kc.valid || !vc.valid || !len.valid) return FAIL;
  int64_t b = q->dims[0] / seq_len;
  if (kc.rank != 2 || !mlirTypeEqual(kc.type, vc.type) || !mlirTypeEqual(kc.element, k->element) ||
      kc.dims[1] != k->dims[1] || kc.dims[0] < b || (b > 0 && kc.dims[0] % b != 0) || (b == 0 && kc.dims[0] != 0))
    return tpc__rule_error(op, "attention.cache",
                           "k_cache and v_cache must be [B*C,Hkv*D] of k's type with B=%lld sequences (q's %lld rows "
                           "/ seq_len) and C >= 1 rows each, and k's width %lld; got k_cache %s, v_cache %s",
                           (long long)b, (long long)q->dims[0], (long long)k->dims[1], TYPE(kc.type, s.a),
                           TYPE(vc.type, s.b));
  if (len.rank != 1 || len.dims[0] != b || !mlirTypeIsAInteger(len.element) || mlirIntegerTypeGetWidth(len.element) != 32)
    return tpc__rule_error(op, "attention.cache",
                           "cache_len must be tensor<%lldxi32>: the cached tokens of each of the B=%lld sequences; got %s",
                           (long long)b, (long long)b, TYPE(len.type, s.a));
  return OK;
}

static MlirLogicalResult tpc__verify_attention_op(MlirOperation op, int kind) {
  tpc__abufs_t s;
  tpc_shape_t v[TPC__ATT_N];
  bool grad = kind == TPC_OP_ATTENTION_GRAD, cached = kind == TPC_OP_ATTENTION_KVCACHE;
  int n = grad ? TPC__ATT_N : TPC__ATT_DY;
  if (cached) {
    MlirValue values[TPC__ATT_DY] = {tpc_attention_kvcache_get_q(op), tpc_attention_kvcache_get_k(op),
                                     tpc_attention_kvcache_get_v(op), tpc_attention_kvcache_get_y(op)};
    for (int i = 0; i < n; ++i) v[i] = tpc__shape_of(values[i]);
  } else if (grad) {
    MlirValue values[TPC__ATT_N] = {tpc_attention_grad_get_q(op),  tpc_attention_grad_get_k(op),
                                    tpc_attention_grad_get_v(op),  tpc_attention_grad_get_y(op),
                                    tpc_attention_grad_get_dy(op), tpc_attention_grad_get_dq(op),
                                    tpc_attention_grad_get_dk(op), tpc_attention_grad_get_dv(op)};
    for (int i = 0; i < n; ++i) v[i] = tpc__shape_of(values[i]);
  } else {
    MlirValue values[TPC__ATT_DY] = {tpc_attention_get_q(op), tpc_attention_get_k(op), tpc_attention_get_v(op),
                                     tpc_attention_get_y(op)};
    for (int i = 0; i < n; ++i) v[i] = tpc__shape_of(values[i]);
  }
  int64_t seq_len = grad     ? tpc_attention_grad_get_seq_len(op)
                    : cached ? tpc_attention_kvcache_get_seq_len(op)
                             : tpc_attention_get_seq_len(op);
  int64_t head_dim = grad     ? tpc_attention_grad_get_head_dim(op)
                     : cached ? tpc_attention_kvcache_get_head_dim(op)
                              : tpc_attention_get_head_dim(op);
  double scale = grad     ? tpc_attention_grad_get_scale(op)
                 : cached ? tpc_attention_kvcache_get_scale(op)
                          : tpc_attention_get_scale(op);
  const char* all = grad ? "q, k, v, y, dy, dq, dk and dv" : "q, k, v and y";
  for (int i = 0; i < n; ++i)
    if (!v[i].valid) return FAIL;
  for (int i = 0; i < n; ++i)
    if (v[i].rank != 2)
      return tpc__rule_error(op, "attention.rank", "%s must be rank 2 ([T,H*D]); got %s %s", all, tpc__att_names[i],
                             TYPE(v[i].type, s.a));
  const tpc_shape_t *q = &v[TPC__ATT_Q], *k = &v[TPC__ATT_K];
  if (!tpc__is_storage_float(q->element))
    return tpc__rule_error(op, "attention.dtype", "%s must share one bf16, f16 or f32 element type; got q %s", all,
                           TYPE(q->type, s.a));
  for (int i = 1; i < n; ++i)
    if (!mlirTypeEqual(v[i].element, q->element))
      return tpc__rule_error(op, "attention.dtype", "%s must share one bf16, f16 or f32 element type; got q %s, %s %s",
                             all, TYPE(q->type, s.a), tpc__att_names[i], TYPE(v[i].type, s.b));
  int64_t t = q->dims[0];
  if (seq_len < 1 || t % seq_len != 0)
    return tpc__rule_error(op, "attention.seq-len", "seq_len=%lld must be >= 1 and divide the T=%lld rows of q %s",
                           (long long)seq_len, (long long)t, DIMS(*q, s.a));
  if (head_dim < 1 || q->dims[1] % head_dim != 0 || k->dims[1] % head_dim != 0)
    return tpc__rule_error(op, "attention.head-dim",
                           "head_dim=%lld must be >= 1 and divide the widths of q %s and k %s", (long long)head_dim,
                           DIMS(*q, s.a), DIMS(*k, s.b));
  int64_t hq = q->dims[1] / head_dim, hkv = k->dims[1] / head_dim;
  if (hkv < 1 || hq % hkv != 0)
    return tpc__rule_error(op, "attention.heads",
                           "with head_dim=%lld, q %s has Hq=%lld query heads and k %s Hkv=%lld key/value heads; Hq "
                           "must be a multiple of Hkv >= 1",
                           (long long)head_dim, DIMS(*q, s.a), (long long)hq, DIMS(*k, s.b), (long long)hkv);
  if (k->dims[0] != t)
    return tpc__rule_error(op, "attention.shapes", "k must be [T,Hkv*D] with q's T=%lld rows; got q %s, k %s",
                           (long long)t, DIMS(*q, s.a), DIMS(*k, s.b));
  for (int i = 2; i < n; ++i) {
    const tpc_shape_t* like = tpc__att_like_q(i) ? q : k;
    if (v[i].dims[0] != like->dims[0] || v[i].dims[1] != like->dims[1])
      return tpc__rule_error(op, "attention.shapes", "%s must have %s's shape %s; got %s", tpc__att_names[i],
                             tpc__att_like_q(i) ? "q" : "k", DIMS(*like, s.a), DIMS(v[i], s.b));
  }
  if (!isfinite(scale) || scale < 0.0)
    return tpc__rule_error(op, "attention.scale", "scale=%g must be finite and >= 0 (0 means 1/sqrt(head_dim))", scale);
  MlirValue lse = kind == TPC_OP_ATTENTION        ? tpc_attention_get_lse(op)
                  : kind == TPC_OP_ATTENTION_GRAD ? tpc_attention_grad_get_lse(op)
                                                  : (MlirValue){NULL};
  if (!mlirValueIsNull(lse)) {
    tpc_shape_t l = tpc__shape_of(lse);
    if (!l.valid) return FAIL;
    if (l.rank != 2 || l.dims[0] != t || l.dims[1] != hq || !mlirTypeIsAF32(l.element))
      return tpc__rule_error(op, "attention.lse",
                             "lse must be tensor<%lldx%lldxf32>: one f32 per token and query head (T=%lld, Hq=%lld); got %s",
                             (long long)t, (long long)hq, (long long)t, (long long)hq, TYPE(l.type, s.a));
  }
  return cached ? tpc__verify_attention_cache(op, q, k, seq_len) : OK;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

MlirLogicalResult tpc__verify_attention(MlirOperation op, int kind) {
  switch (kind) {
    case TPC_OP_ROPE:
      return tpc__verify_rope(op);
    case TPC_OP_ATTENTION:
    case TPC_OP_ATTENTION_KVCACHE:
    case TPC_OP_ATTENTION_GRAD:
      return tpc__verify_attention_op(op, kind);
    default:
      return OK;
  }
}
