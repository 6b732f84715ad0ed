// Verifier rules of the generation ops: tp.kvcache_write (the KV cache's new rows) and tp.sample
// (one token per row of logits). The CPU kernels (kernels/cpu/cpu_sample.c) check the values the
// rules cannot see: cache_len + seq_len within the cache, the sampling parameters per row.
#include <stdio.h>

#include "mlir-c/BuiltinTypes.h"
#include "tp_ops.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()

typedef struct {
  char a[96], b[96], c[96];
} tpc__gbufs_t;
#define DIMS(s, buf) tpc__dims_str(&(s), (buf), (int)sizeof(buf))
#define TYPE(t, buf) tpc__type_str((t), (buf), (int)sizeof(buf))

// cache[B*C,W] and new[B*S,W] of one bf16, f16 or f32 type, cache_len tensor<Bxi32>, S = seq_len,
// W whole heads of head_dim.
static MlirLogicalResult tpc__verify_kvcache_write(MlirOperation op) {
  tpc__gbufs_t s;
  tpc_shape_t c = tpc__shape_of(tpc_kvcache_write_get_cache(op)), n = tpc__shape_of(tpc_kvcache_write_get_new(op));
  tpc_shape_t len = tpc__shape_of(tpc_kvcache_write_get_cache_len(op)), out = tpc__shape_of(tpc_kvcache_write_get_out(op));
  if (!c.valid || !n.valid || !len.valid || !out.valid) return FAIL;
  int64_t seq_len = tpc_kvcache_write_get_seq_len(op), head_dim = tpc_kvcache_write_get_head_dim(op);
  if (c.rank != 2 || n.rank != 2 || !tpc__is_storage_float(c.element) || !mlirTypeEqual(c.element, n.element) ||
      c.dims[1] != n.dims[1] || !mlirTypeEqual(out.type, c.type))
    return tpc__rule_error(op, "kvcache_write.shapes",
                           "expects cache[B*C,W] and new[B*S,W] of one bf16, f16 or f32 type and out of cache's type; "
                           "got cache %s, new %s, out %s",
                           TYPE(c.type, s.a), TYPE(n.type, s.b), TYPE(out.type, s.c));
  if (seq_len < 1 || n.dims[0] % seq_len != 0)
    return tpc__rule_error(op, "kvcache_write.seq-len", "seq_len=%lld must be >= 1 and divide the %lld rows of new %s",
                           (long long)seq_len, (long long)n.dims[0], DIMS(n, s.a));
  if (head_dim < 1 || c.dims[1] % head_dim != 0)
    return tpc__rule_error(op, "kvcache_write.head-dim", "head_dim=%lld must be >= 1 and divide the cache's width %lld",
                           (long long)head_dim, (long long)c.dims[1]);
  int64_t b = n.dims[0] / seq_len;
  if ((b == 0 && c.dims[0] != 0) || (b > 0 && (c.dims[0] < b * seq_len || c.dims[0] % b != 0)))
    return tpc__rule_error(op, "kvcache_write.shapes",
                           "cache must hold C >= seq_len=%lld rows for each of the B=%lld sequences (new's %lld rows / "
                           "seq_len); got cache %s",
                           (long long)seq_len, (long long)b, (long long)n.dims[0], DIMS(c, s.a));
  if (len.rank != 1 || len.dims[0] != b || !tpc__is_i32(len.element))
    return tpc__rule_error(op, "kvcache_write.shapes",
                           "cache_len must be tensor<%lldxi32>: the cached tokens of each of the B=%lld sequences; got %s",
                           (long long)b, (long long)b, TYPE(len.type, s.a));
  return OK;
}

// logits[B,V] float; seed tensor<Bxi64>; request, position and top_k tensor<Bxi32>; temperature
// and top_p tensor<Bxf32>; token tensor<Bxi32>.
static MlirLogicalResult tpc__verify_sample(MlirOperation op) {
  tpc__gbufs_t s;
  tpc_shape_t l = tpc__shape_of(tpc_sample_get_logits(op));
  if (!l.valid) return FAIL;
  if (l.rank != 2 || !tpc__is_storage_float(l.element) || l.dims[1] < 1)
    return tpc__rule_error(op, "sample.logits", "logits must be [B,V] of bf16, f16 or f32 with V >= 1; got %s",
                           TYPE(l.type, s.a));
  int64_t b = l.dims[0];
  struct {
    const char* name;
    MlirValue v;
    int elem;  // 0: i32, 1: i64, 2: f32
  } rows[] = {{"seed", tpc_sample_get_seed(op), 1},         {"request", tpc_sample_get_request(op), 0},
              {"position", tpc_sample_get_position(op), 0}, {"temperature", tpc_sample_get_temperature(op), 2},
              {"top_k", tpc_sample_get_top_k(op), 0},       {"top_p", tpc_sample_get_top_p(op), 2},
              {"token", tpc_sample_get_token(op), 0}};
  static const char* const elem_names[3] = {"i32", "i64", "f32"};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
    tpc_shape_t r = tpc__shape_of(rows[i].v);
    if (!r.valid) return FAIL;
    bool elem_ok = rows[i].elem == 0 ? tpc__is_i32(r.element) : rows[i].elem == 1 ? tpc__is_i64(r.element)
                                                                                    : tpc__is_f32(r.element);
    if (r.rank != 1 || r.dims[0] != b || !elem_ok)
      return tpc__rule_error(op, "sample.rows", "%s must be tensor<%lldx%s>: one per row of logits %s; got %s",
                             rows[i].name, (long long)b, elem_names[rows[i].elem], DIMS(l, s.a), TYPE(r.type, s.b));
  }
  return OK;
}

MlirLogicalResult tpc__verify_generate(MlirOperation op, int kind) {
  switch (kind) {
    case TPC_OP_KVCACHE_WRITE:
      return tpc__verify_kvcache_write(op);
    case TPC_OP_SAMPLE:
      return tpc__verify_sample(op);
    default:
      return OK;
  }
}
