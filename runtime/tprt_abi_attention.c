// The runtime ABI of tp.rope, tp.attention, tp.attention_kvcache and tp.attention_grad (see
// tprt_abi.h); descriptor decoding is shared with tprt_abi.c through tprt_abi_impl.h.
#include "tprt_abi_impl.h"

// Counts the attention's two contractions (scores and the weighted sum of v; |passes| = 2) or
// the backward's five (scores again, recomputed, then dp, dq, dk and dv) over the (query, key)
// pairs a causal mask keeps, as GEMM FLOPs.
static void tprt__count_attention(tprt_exec_t* exec, const tprt_tensor_t* q, int64_t seq_len, int64_t head_dim,
                                  bool causal, int passes) {
  if (seq_len <= 0 || head_dim <= 0) return;
  int64_t seqs = q->dims[0] / seq_len, heads = q->dims[1] / head_dim;
  int64_t pairs = causal ? seq_len * (seq_len + 1) / 2 : seq_len * seq_len;
  tprt__count_gemm(exec, seqs * pairs, heads * head_dim, passes == 5 ? 4 : passes, false);
  if (passes == 5) tprt__count_gemm(exec, seqs * pairs, heads * head_dim, 1, true);
}

int32_t tprt_abi_rope(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_ROPE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, rope, (&c.slot[TPRT_ROPE_SLOT_X], &c.slot[TPRT_ROPE_SLOT_COS], &c.slot[TPRT_ROPE_SLOT_SIN],
                                  &c.slot[TPRT_ROPE_SLOT_Y], tprt__attr(&c, TPRT_ROPE_ATTR_INVERSE) != 0));
  return tprt_exec_record(exec, s, TPRT_ROPE_NAME);
}

// tp.attention and tp.attention_kvcache share q, k, v and the attributes; y and the optional lse,
// or the KV cache and y, follow at the op's own slots.
_Static_assert(TPRT_ATTENTION_KVCACHE_SLOT_Q == TPRT_ATTENTION_SLOT_Q &&
                   TPRT_ATTENTION_KVCACHE_SLOT_K == TPRT_ATTENTION_SLOT_K &&
                   TPRT_ATTENTION_KVCACHE_SLOT_V == TPRT_ATTENTION_SLOT_V &&
                   TPRT_ATTENTION_KVCACHE_ATTR_SEQ_LEN == TPRT_ATTENTION_ATTR_SEQ_LEN &&
                   TPRT_ATTENTION_KVCACHE_ATTR_HEAD_DIM == TPRT_ATTENTION_ATTR_HEAD_DIM &&
                   TPRT_ATTENTION_KVCACHE_ATTR_CAUSAL == TPRT_ATTENTION_ATTR_CAUSAL &&
                   TPRT_ATTENTION_KVCACHE_ATTR_SCALE == TPRT_ATTENTION_ATTR_SCALE,
               "tp.attention and tp.attention_kvcache share their first slots and their attributes");
static int32_t tprt__abi_attention(tprt_exec_t* exec, void* const* buffers, const int64_t* desc, bool cached) {
  tprt_call_t c;
  tprt_status_t s =
      tprt__decode(desc, buffers, cached ? TPRT_ATTENTION_KVCACHE_NUM_SLOTS : TPRT_ATTENTION_NUM_SLOTS, &c);
  if (!s) {
    int64_t seq_len = tprt__attr(&c, TPRT_ATTENTION_ATTR_SEQ_LEN), head_dim = tprt__attr(&c, TPRT_ATTENTION_ATTR_HEAD_DIM);
    bool causal = tprt__attr(&c, TPRT_ATTENTION_ATTR_CAUSAL) != 0;
    const tprt_tensor_t* q = &c.slot[TPRT_ATTENTION_SLOT_Q];
    tprt_kv_cache_t cache = {&c.slot[TPRT_ATTENTION_KVCACHE_SLOT_K_CACHE], &c.slot[TPRT_ATTENTION_KVCACHE_SLOT_V_CACHE],
                             &c.slot[TPRT_ATTENTION_KVCACHE_SLOT_CACHE_LEN]};
    tprt_tensor_t* lse = !cached && c.present[TPRT_ATTENTION_SLOT_LSE] ? &c.slot[TPRT_ATTENTION_SLOT_LSE] : NULL;
    tprt_tensor_t* y = &c.slot[cached ? TPRT_ATTENTION_KVCACHE_SLOT_Y : TPRT_ATTENTION_SLOT_Y];
    s = TPRT__KERNEL(exec, attention, (q, &c.slot[TPRT_ATTENTION_SLOT_K], &c.slot[TPRT_ATTENTION_SLOT_V],
                                       cached ? &cache : NULL, y, lse, seq_len, head_dim, causal,
                                       tprt__attr_f32(&c, TPRT_ATTENTION_ATTR_SCALE)));
    // With a cache, the new keys only: the cached ones depend on cache_len's values.
    tprt__count_attention(exec, q, seq_len, head_dim, causal, 2);
  }
  return tprt_exec_record(exec, s, cached ? TPRT_ATTENTION_KVCACHE_NAME : TPRT_ATTENTION_NAME);
}

int32_t tprt_abi_attention(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  return tprt__abi_attention(exec, buffers, desc, false);
}

int32_t tprt_abi_attention_kvcache(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  return tprt__abi_attention(exec, buffers, desc, true);
}

int32_t tprt_abi_attention_grad(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_ATTENTION_GRAD_NUM_SLOTS, &c);
  if (!s) {
    int64_t seq_len = tprt__attr(&c, TPRT_ATTENTION_GRAD_ATTR_SEQ_LEN);
    int64_t head_dim = tprt__attr(&c, TPRT_ATTENTION_GRAD_ATTR_HEAD_DIM);
    bool causal = tprt__attr(&c, TPRT_ATTENTION_GRAD_ATTR_CAUSAL) != 0;
    const tprt_tensor_t* q = &c.slot[TPRT_ATTENTION_GRAD_SLOT_Q];
    s = TPRT__KERNEL(exec, attention_grad,
                     (q, &c.slot[TPRT_ATTENTION_GRAD_SLOT_K], &c.slot[TPRT_ATTENTION_GRAD_SLOT_V],
                      &c.slot[TPRT_ATTENTION_GRAD_SLOT_Y], &c.slot[TPRT_ATTENTION_GRAD_SLOT_DY],
                      c.present[TPRT_ATTENTION_GRAD_SLOT_LSE] ? &c.slot[TPRT_ATTENTION_GRAD_SLOT_LSE] : NULL,
                      &c.slot[TPRT_ATTENTION_GRAD_SLOT_DQ], &c.slot[TPRT_ATTENTION_GRAD_SLOT_DK],
                      &c.slot[TPRT_ATTENTION_GRAD_SLOT_DV], seq_len, head_dim, causal,
                      tprt__attr_f32(&c, TPRT_ATTENTION_GRAD_ATTR_SCALE)));
    tprt__count_attention(exec, q, seq_len, head_dim, causal, 5);
  }
  return tprt_exec_record(exec, s, TPRT_ATTENTION_GRAD_NAME);
}
