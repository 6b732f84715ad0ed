// The vocabulary kernels: the token embedding and its gradient, and the LM head's cross-entropy
// (forward, its vocabulary-parallel statistics and their combination, and both gradients), in
// the order docs/numerics.md ("Embedding" and "Cross-entropy") defines.
//
//   embedding      y[t] = table[ids[t] - start], or -0.0 when the id is another rank's row
//   embedding_grad dtable[v] = Σ_t [ids[t] = start + v] dy[t], canonical over the tokens
//   logits         z[t,v] = RNE_x(x[t]·w[v]), the canonical K accumulation of tp.linear
//   stats          per vocabulary block: its maximum and Σ exp(z - max) from +0.0 in increasing v;
//                  blocks merged by the pairwise tree (tprt_ce_merge)
//   loss, lse      lse = M + log S; loss = lse - z[target] (+0.0 for an ignored token)
//   of logits      the same statistics and loss of given logits z (tp.cross_entropy_logits)
//   dgrad, wgrad   dz = RNE_x(tprt_ce_dlogit(z, lse, v = target, dloss)), then dz·w and dzᵀ·x
//                  with the canonical accumulation over V and over the tokens
//
// The [T,V] logits are never stored whole: each kernel recomputes the logits it needs, a block of
// 64 tokens (or of 256 vocabulary rows) at a time, with the blocked linear kernels. |start| is the first vocabulary row the kernel's table or head
// holds and |vocab| the logical vocabulary size (start + rows <= vocab); an id or target outside
// [0, vocab) is an error naming its position, a negative target an ignored token.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tprt_cpu_internal.h"
#include "tprt_cpu_kernels.h"

static tprt_status_t tprt__check_range(const char* op, int64_t start, int64_t rows, int64_t vocab) {
  if (start < 0 || rows < 0 || vocab < start + rows)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: this shard's rows [%lld, %lld) do not lie in the vocabulary of %lld", op,
                            (long long)start, (long long)(start + rows), (long long)vocab);
  return NULL;
}

// Checks every id (|ignore_negative|: a negative one is an ignored target) against [0, vocab).
static tprt_status_t tprt__check_ids(const char* op, const char* name, const tprt_tensor_t* ids, int64_t vocab,
                                     bool ignore_negative) {
  const int32_t* p = (const int32_t*)ids->data;
  for (int64_t t = 0; t < ids->dims[0]; ++t) {
    if (p[t] < 0 && ignore_negative) continue;
    if (p[t] < 0 || p[t] >= vocab)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %s[%lld] = %d is outside the vocabulary [0, %lld)%s",
                              op, name, (long long)t, p[t], (long long)vocab,
                              ignore_negative ? " (negative targets are ignored tokens)" : "");
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

tprt_status_t tprt__check_embedding(const char* op, const tprt_tensor_t* ids, const tprt_tensor_t* table,
                                    const tprt_tensor_t* rows, bool grad, int64_t start, int64_t vocab) {
  tprt_status_t s = tprt__check(op, "ids", ids, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, grad ? "dy" : "table", grad ? rows : table, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, grad ? "dtable" : "y", grad ? table : rows, 2, grad ? TPRT__M(TPRT_DTYPE_F32) : TPRT__FLOATS);
  if (s) return s;
  const tprt_tensor_t* y = rows;  // [T,H]: y, or dy
  if (!grad && y->dtype != table->dtype)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: y must have table's dtype", op);
  int64_t want[2] = {ids->dims[0], table->dims[1]};
  char what[96];
  snprintf(what, sizeof what, "[T,H] = [%lld,%lld] (ids' tokens, table's width)", (long long)want[0], (long long)want[1]);
  s = tprt__check_dims(op, grad ? "dy" : "y", y, 2, want, what);
  if (!s) s = tprt__check_range(op, start, table->dims[0], vocab);
  return s;
}

tprt_status_t tprt_cpu_embedding(const tprt_tensor_t* ids, const tprt_tensor_t* table, tprt_tensor_t* y,
                                 int64_t start, int64_t vocab) {
  const char* op = "embedding";
  tprt_status_t s = tprt__check_embedding(op, ids, table, y, false, start, vocab);
  if (!s) s = tprt__check_ids(op, "ids", ids, vocab, false);
  if (s) return s;
  int64_t T = ids->dims[0], V = table->dims[0], H = table->dims[1];
  size_t esize = tprt_dtype_bytes(table->dtype, 1);
  const int32_t* id = (const int32_t*)ids->data;
  for (int64_t t = 0; t < T; ++t) {
    int64_t v = (int64_t)id[t] - start;
    if (v >= 0 && v < V) {
      memcpy((char*)y->data + (size_t)(t * H) * esize, (const char*)table->data + (size_t)(v * H) * esize,
             (size_t)H * esize);
    } else {
      for (int64_t h = 0; h < H; ++h) tprt__st(y->data, y->dtype, t * H + h, -0.0f);
    }
  }
  return NULL;
}

tprt_status_t tprt_cpu_embedding_grad(const tprt_tensor_t* ids, const tprt_tensor_t* dy, tprt_tensor_t* dtable,
                                      int64_t start, int64_t vocab, int chunks) {
  const char* op = "embedding_grad";
  tprt_status_t s = tprt__check_embedding(op, ids, dtable, dy, true, start, vocab);
  if (!s) s = tprt__check_ids(op, "ids", ids, vocab, false);
  if (s) return s;
  if (chunks < 1 || chunks > TPRT_MAX_CHUNKS || (chunks & (chunks - 1)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                            TPRT_MAX_CHUNKS, chunks);
  int64_t T = ids->dims[0], V = dtable->dims[0], H = dtable->dims[1];
  int64_t size = tprt_kacc_chunk_size(T, chunks);
  // The tokens of every local row in token order (a counting sort), then per row: each chunk's
  // sum from +0.0 in token order, and the pairwise tree.
  void* mem = NULL;
  size_t need = (size_t)(V + 1) * sizeof(int64_t) + (size_t)T * sizeof(int64_t) + (size_t)chunks * H * sizeof(float) +
                (size_t)H * sizeof(float) + (size_t)chunks * sizeof(float);
  s = tprt__scratch(op, need, &mem);
  if (s) return s;
  int64_t* first = (int64_t*)mem;
  int64_t* order = first + V + 1;
  float* part = (float*)(order + T);
  float* row = part + (size_t)chunks * H;
  float* p = row + H;
  const int32_t* id = (const int32_t*)ids->data;
  memset(first, 0, (size_t)(V + 1) * sizeof(int64_t));
  for (int64_t t = 0; t < T; ++t) {
    int64_t v = (int64_t)id[t] - start;
    if (v >= 0 && v < V) first[v + 1] += 1;
  }
  for (int64_t v = 0; v < V; ++v) first[v + 1] += first[v];
  for (int64_t t = 0; t < T; ++t) {
    int64_t v = (int64_t)id[t] - start;
    if (v >= 0 && v < V) order[first[v]++] = t;
  }
  for (int64_t v = V; v > 0; --v) first[v] = first[v - 1];
  first[0] = 0;
  float* out = (float*)dtable->data;
  for (int64_t v = 0; v < V; ++v) {
    if (first[v] == first[v + 1]) {
      for (int64_t h = 0; h < H; ++h) out[v * H + h] = 0.0f;
      continue;
    }
    memset(part, 0, (size_t)chunks * H * sizeof(float));
    for (int64_t i = first[v]; i < first[v + 1]; ++i) {
      int64_t t = order[i];
      float* acc = part + (size_t)(t / size) * H;
      tprt__ld_row(dy->data, dy->dtype, t * H, H, row);
      for (int64_t h = 0; h < H; ++h) acc[h] = acc[h] + row[h];
    }
    for (int64_t h = 0; h < H; ++h) {
      for (int c = 0; c < chunks; ++c) p[c] = part[(size_t)c * H + h];
      out[v * H + h] = tprt_kacc_tree(p, chunks);
    }
  }
  tprt__scratch_free(mem);
  return NULL;
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

// The operands shared by every cross-entropy kernel: x[T,H] float, w[V,H] of x's dtype,
// targets[T] i32, and (when given) f32 [T] vectors.
static tprt_status_t tprt__check_ce(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                    const tprt_tensor_t* targets, const tprt_tensor_t* const* vecs,
                                    const char* const* names, int nvecs, int chunks) {
  tprt_status_t s = tprt__check(op, "x", x, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "w", w, 2, TPRT__M(x->dtype));
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (s) return s;
  char what[96];
  int64_t h[1] = {x->dims[1]};
  if (w->dims[1] != h[0])
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: w must be [V,%lld] (x's width); got [%lld,%lld]", op,
                            (long long)h[0], (long long)w->dims[0], (long long)w->dims[1]);
  int64_t t[1] = {x->dims[0]};
  snprintf(what, sizeof what, "[T] = [%lld] (x's tokens)", (long long)t[0]);
  s = tprt__check_dims(op, "targets", targets, 1, t, what);
  for (int i = 0; !s && i < nvecs; ++i) {
    s = tprt__check(op, names[i], vecs[i], 1, TPRT__M(TPRT_DTYPE_F32));
    if (!s) s = tprt__check_dims(op, names[i], vecs[i], 1, t, what);
  }
  if (!s && (chunks < 1 || chunks > TPRT_MAX_CHUNKS || (chunks & (chunks - 1))))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                            TPRT_MAX_CHUNKS, chunks);
  return s;
}

// The kernels below compute logits by blocks with the blocked linear kernels (tp.linear's
// canonical H accumulation over |chunks|, rounded to x's dtype): TPRT__CE_TOKENS tokens against
// every head row (statistics, dgrad), or every token against TPRT__CE_ROWS head rows (wgrad). Each
// logit, and each contraction of the gradients, is the same sequence of operations as one
// canonical dot product: the blocking changes only the speed.
#define TPRT__CE_TOKENS 64
#define TPRT__CE_ROWS 256

// Rows [r0, r0 + n) of the 2-D tensor |t|, as a view.
static tprt_tensor_t tprt__ce_rows(const tprt_tensor_t* t, int64_t r0, int64_t n) {
  int64_t dims[2] = {n, t->dims[1]};
  return tprt_tensor_make((char*)t->data + (size_t)(r0 * t->dims[1]) * tprt_dtype_bytes(t->dtype, 1), t->dtype, 2,
                          dims);
}

// A [rows, cols] tensor of |dtype| at |data|.
static tprt_tensor_t tprt__ce_block(void* data, int dtype, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols};
  return tprt_tensor_make(data, dtype, 2, dims);
}

// The logits' gradient in place: element (i, j) of |z| is token t0 + i's logit against head row
// v0 + j (vocabulary id start + v0 + j); it becomes (softmax - onehot)·dloss rounded to z's dtype,
// or 0 for an ignored token.
static void tprt__ce_dlogits(tprt_tensor_t* z, const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                             const tprt_tensor_t* dloss, int64_t t0, int64_t v0, int64_t start) {
  const int32_t* tg = (const int32_t*)targets->data;
  const float *ls = (const float*)lse->data, *g = (const float*)dloss->data;
  int64_t n = z->dims[0], m = z->dims[1];
  for (int64_t i = 0; i < n; ++i) {
    int64_t t = t0 + i;
    for (int64_t j = 0; j < m; ++j) {
      float d = tg[t] < 0 ? 0.0f
                          : tprt_ce_dlogit(tprt__ld(z->data, z->dtype, i * m + j), ls[t], (int64_t)tg[t] == start + v0 + j, g[t]);
      tprt__st(z->data, z->dtype, i * m + j, d);
    }
  }
}

// One token's statistics (docs/numerics.md, "Cross-entropy", steps 2 and 3): its V logits |row|
// (f32) in |blocks| blocks of |size|, each block's maximum and sum of exponentials, the blocks'
// tree; out[0..2] = the maximum, the sum and the target's logit (-0.0 when the target is ignored
// or another shard's: vocabulary row |target| - |start| of this shard). bm and bs hold |blocks|.
static void tprt__ce_row_stats(const float* row, int64_t V, int blocks, int64_t size, int32_t target, int64_t start,
                               float* bm, float* bs, float* out) {
  for (int b = 0; b < blocks; ++b) {
    int64_t v0 = (int64_t)b * size, v1 = v0 + size;
    if (v0 > V) v0 = V;
    if (v1 > V) v1 = V;
    float m = -INFINITY, sum = 0.0f;
    for (int64_t v = v0; v < v1; ++v) m = tprt_max_keep(m, row[v]);
    for (int64_t v = v0; v < v1; ++v) sum = sum + tprt_expf(row[v] - m);
    bm[b] = m;
    bs[b] = sum;
  }
  tprt_ce_tree(bm, bs, blocks);
  int64_t local = (int64_t)target - start;
  out[0] = bm[0];
  out[1] = bs[0];
  out[2] = target >= 0 && local >= 0 && local < V ? row[local] : -0.0f;
}

tprt_status_t tprt_cpu_cross_entropy_stats(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, tprt_tensor_t* stats, int64_t start,
                                           int64_t vocab, int chunks, int vocab_chunks) {
  const char* op = "cross_entropy_stats";
  tprt_status_t s = tprt__check_ce(op, x, w, targets, NULL, NULL, 0, chunks);
  if (!s) s = tprt__check(op, "stats", stats, 2, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t T = x->dims[0], V = w->dims[0];
  int64_t want[2] = {T, 3};
  s = tprt__check_dims(op, "stats", stats, 2, want, "[T,3] (max, sum of exp, target logit)");
  if (!s) s = tprt__check_range(op, start, V, vocab);
  if (!s) s = tprt__check_ids(op, "targets", targets, vocab, true);
  if (!s && (vocab_chunks < 1 || vocab_chunks > TPRT_MAX_CHUNKS))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: vocabulary blocks must be in [1, %d]; got %d", op,
                         TPRT_MAX_CHUNKS, vocab_chunks);
  if (s) return s;
  // The logits of TPRT__CE_TOKENS tokens at a time by the blocked linear kernel (tp.linear's
  // values, rounded to x's dtype), then each token's block statistics and their tree.
  int64_t tb = T < TPRT__CE_TOKENS ? T : TPRT__CE_TOKENS;
  size_t es = tprt_dtype_bytes(x->dtype, 1);
  void* mem = NULL;
  size_t zbytes = ((size_t)(tb * V) * es + 63) & ~(size_t)63;  // the f32 rows after it stay aligned
  s = tprt__scratch(op, zbytes + (size_t)V * sizeof(float) + 2 * (size_t)vocab_chunks * sizeof(float) + 1, &mem);
  if (s) return s;
  void* z = mem;
  float* row = (float*)((char*)mem + zbytes);
  float *bm = row + V, *bs = bm + vocab_chunks;
  int64_t size = tprt_kacc_chunk_size(V, vocab_chunks);
  const int32_t* tg = (const int32_t*)targets->data;
  float* out = (float*)stats->data;
  for (int64_t t0 = 0; t0 < T && !s; t0 += tb) {
    int64_t n = T - t0 < tb ? T - t0 : tb;
    tprt_tensor_t xb = tprt__ce_rows(x, t0, n), zb = tprt__ce_block(z, x->dtype, n, V);
    s = tprt_cpu_linear(&xb, w, NULL, &zb, chunks);
    for (int64_t i = 0; !s && i < n; ++i) {
      tprt__ld_row(z, x->dtype, i * V, V, row);
      tprt__ce_row_stats(row, V, vocab_chunks, size, tg[t0 + i], start, bm, bs, out + (t0 + i) * 3);
    }
  }
  tprt__scratch_free(mem);
  return s;
}

tprt_status_t tprt_cpu_cross_entropy_combine(const tprt_tensor_t* stats, const tprt_tensor_t* targets,
                                             tprt_tensor_t* loss, tprt_tensor_t* lse) {
  const char* op = "cross_entropy_combine";
  tprt_status_t s = tprt__check(op, "stats", stats, 2, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "loss", loss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t T = stats->dims[0], R = stats->dims[1] / 3;
  if (stats->dims[1] % 3 != 0 || R < 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: stats must be [T,3R] (3 values per rank); got %lld columns",
                            op, (long long)stats->dims[1]);
  int64_t t1[1] = {T};
  s = tprt__check_dims(op, "targets", targets, 1, t1, "[T] (stats' tokens)");
  if (!s) s = tprt__check_dims(op, "loss", loss, 1, t1, "[T] (stats' tokens)");
  if (!s) s = tprt__check_dims(op, "lse", lse, 1, t1, "[T] (stats' tokens)");
  if (s) return s;
  void* mem = NULL;
  s = tprt__scratch(op, (size_t)(2 * R) * sizeof(float), &mem);
  if (s) return s;
  float *m = (float*)mem, *sum = m + R;
  const float* st = (const float*)stats->data;
  const int32_t* tg = (const int32_t*)targets->data;
  float *lo = (float*)loss->data, *ls = (float*)lse->data;
  for (int64_t t = 0; t < T; ++t) {
    float zt = -0.0f;
    for (int64_t r = 0; r < R; ++r) {
      m[r] = st[t * 3 * R + 3 * r];
      sum[r] = st[t * 3 * R + 3 * r + 1];
      zt = zt + st[t * 3 * R + 3 * r + 2];
    }
    tprt_ce_tree(m, sum, (int)R);
    float l = m[0] + tprt_logf(sum[0]);
    ls[t] = l;
    lo[t] = tg[t] < 0 ? 0.0f : l - zt;
  }
  tprt__scratch_free(mem);
  return NULL;
}

tprt_status_t tprt_cpu_cross_entropy(const tprt_tensor_t* x, const tprt_tensor_t* w, const tprt_tensor_t* targets,
                                     tprt_tensor_t* loss, tprt_tensor_t* lse, int chunks) {
  const char* op = "cross_entropy";
  const tprt_tensor_t* vecs[2] = {loss, lse};
  static const char* const names[2] = {"loss", "lse"};
  tprt_status_t s = tprt__check_ce(op, x, w, targets, vecs, names, 2, chunks);
  if (!s) s = tprt__check_ids(op, "targets", targets, w->dims[0], true);
  if (s) return s;
  // The statistics of the whole vocabulary (one rank's) and their combination: what every
  // vocabulary-parallel degree computes.
  int64_t dims[2] = {x->dims[0], 3};
  void* mem = NULL;
  s = tprt__scratch(op, (size_t)(dims[0] * 3 > 0 ? dims[0] * 3 : 1) * sizeof(float), &mem);
  if (s) return s;
  tprt_tensor_t st = tprt_tensor_make(mem, TPRT_DTYPE_F32, 2, dims);
  s = tprt_cpu_cross_entropy_stats(x, w, targets, &st, 0, w->dims[0], chunks, chunks);
  if (!s) s = tprt_cpu_cross_entropy_combine(&st, targets, loss, lse);
  tprt__scratch_free(mem);
  return s;
}

tprt_status_t tprt_cpu_cross_entropy_logits(const tprt_tensor_t* z, const tprt_tensor_t* targets, tprt_tensor_t* loss,
                                            tprt_tensor_t* lse, int chunks) {
  const char* op = "cross_entropy_logits";
  tprt_status_t s = tprt__check(op, "z", z, 2, TPRT__FLOATS);
  if (!s) s = tprt__check(op, "targets", targets, 1, TPRT__M(TPRT_DTYPE_I32));
  if (!s) s = tprt__check(op, "loss", loss, 1, TPRT__M(TPRT_DTYPE_F32));
  if (!s) s = tprt__check(op, "lse", lse, 1, TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  int64_t T = z->dims[0], V = z->dims[1], t1[1] = {T};
  s = tprt__check_dims(op, "targets", targets, 1, t1, "[T] (z's rows)");
  if (!s) s = tprt__check_dims(op, "loss", loss, 1, t1, "[T] (z's rows)");
  if (!s) s = tprt__check_dims(op, "lse", lse, 1, t1, "[T] (z's rows)");
  if (!s) s = tprt__check_ids(op, "targets", targets, V, true);
  if (!s && (chunks < 1 || chunks > TPRT_MAX_CHUNKS || (chunks & (chunks - 1))))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                         TPRT_MAX_CHUNKS, chunks);
  if (s) return s;
  // Each token's statistics of the whole vocabulary as tprt_cpu_cross_entropy_stats computes them
  // from its own logits, then the one shard's combination: tprt_cpu_cross_entropy's bits.
  void* mem = NULL;
  s = tprt__scratch(op, ((size_t)(T * 3) + (size_t)V + 2 * (size_t)chunks) * sizeof(float) + 1, &mem);
  if (s) return s;
  float *st = (float*)mem, *row = st + T * 3, *bm = row + V, *bs = bm + chunks;
  int64_t size = tprt_kacc_chunk_size(V, chunks);
  const int32_t* tg = (const int32_t*)targets->data;
  for (int64_t t = 0; t < T; ++t) {
    tprt__ld_row(z->data, z->dtype, t * V, V, row);
    tprt__ce_row_stats(row, V, chunks, size, tg[t], 0, bm, bs, st + t * 3);
  }
  int64_t dims[2] = {T, 3};
  tprt_tensor_t stats = tprt_tensor_make(st, TPRT_DTYPE_F32, 2, dims);
  s = tprt_cpu_cross_entropy_combine(&stats, targets, loss, lse);
  tprt__scratch_free(mem);
  return s;
}

// The operand checks of both gradients; |out| is dx ([T,H], x's dtype or f32) or dw ([V,H] f32).
static tprt_status_t tprt__check_ce_grad(const char* op, const tprt_tensor_t* x, const tprt_tensor_t* w,
                                         const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                         const tprt_tensor_t* dloss, const tprt_tensor_t* out, bool wgrad,
                                         int64_t start, int64_t vocab, int chunks, int out_chunks) {
  const tprt_tensor_t* vecs[2] = {lse, dloss};
  static const char* const names[2] = {"lse", "dloss"};
  tprt_status_t s = tprt__check_ce(op, x, w, targets, vecs, names, 2, chunks);
  if (!s) s = tprt__check(op, wgrad ? "dw" : "dx", out, 2, wgrad ? TPRT__M(TPRT_DTYPE_F32) : TPRT__M(x->dtype) | TPRT__M(TPRT_DTYPE_F32));
  if (s) return s;
  const tprt_tensor_t* like = wgrad ? w : x;
  s = tprt__check_dims(op, wgrad ? "dw" : "dx", out, 2, like->dims, wgrad ? "w's shape" : "x's shape");
  if (!s) s = tprt__check_range(op, start, w->dims[0], vocab);
  if (!s) s = tprt__check_ids(op, "targets", targets, vocab, true);
  if (!s && (out_chunks < 1 || out_chunks > TPRT_MAX_CHUNKS || (out_chunks & (out_chunks - 1))))
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: chunks must be a power of two in [1, %d]; got %d", op,
                         TPRT_MAX_CHUNKS, out_chunks);
  return s;
}

tprt_status_t tprt_cpu_cross_entropy_dgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                           const tprt_tensor_t* dloss, tprt_tensor_t* dx, int64_t start,
                                           int64_t vocab, int chunks, int vocab_chunks) {
  const char* op = "cross_entropy_dgrad";
  tprt_status_t s = tprt__check_ce_grad(op, x, w, targets, lse, dloss, dx, false, start, vocab, chunks, vocab_chunks);
  if (s) return s;
  // Per TPRT__CE_TOKENS tokens: the logits (the blocked linear kernel), their gradient in x's
  // dtype in place, then dx = dZ·w canonical over the vocabulary (the blocked dgrad kernel).
  int64_t T = x->dims[0], V = w->dims[0];
  int64_t tb = T < TPRT__CE_TOKENS ? T : TPRT__CE_TOKENS;
  void* z = NULL;
  s = tprt__scratch(op, (size_t)(tb * V) * tprt_dtype_bytes(x->dtype, 1) + 1, &z);
  if (s) return s;
  for (int64_t t0 = 0; t0 < T && !s; t0 += tb) {
    int64_t n = T - t0 < tb ? T - t0 : tb;
    tprt_tensor_t xb = tprt__ce_rows(x, t0, n), zb = tprt__ce_block(z, x->dtype, n, V), dxb = tprt__ce_rows(dx, t0, n);
    s = tprt_cpu_linear(&xb, w, NULL, &zb, chunks);
    if (!s) tprt__ce_dlogits(&zb, targets, lse, dloss, t0, 0, start);
    if (!s) s = tprt_cpu_linear_dgrad_segmented(&zb, w, &dxb, vocab_chunks, 1, 1);
  }
  tprt__scratch_free(z);
  return s;
}

tprt_status_t tprt_cpu_cross_entropy_wgrad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                           const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                           const tprt_tensor_t* dloss, tprt_tensor_t* dw, int64_t start,
                                           int64_t vocab, int chunks, int token_chunks) {
  const char* op = "cross_entropy_wgrad";
  tprt_status_t s = tprt__check_ce_grad(op, x, w, targets, lse, dloss, dw, true, start, vocab, chunks, token_chunks);
  if (s) return s;
  // Per TPRT__CE_ROWS head rows: the logits of every token against them, their gradient in place,
  // then those rows of dw = dZᵀ·x canonical over the tokens (the blocked wgrad kernel).
  int64_t T = x->dims[0], V = w->dims[0];
  int64_t vb = V < TPRT__CE_ROWS ? V : TPRT__CE_ROWS;
  void* z = NULL;
  s = tprt__scratch(op, (size_t)(T * vb) * tprt_dtype_bytes(x->dtype, 1) + 1, &z);
  if (s) return s;
  for (int64_t v0 = 0; v0 < V && !s; v0 += vb) {
    int64_t n = V - v0 < vb ? V - v0 : vb;
    tprt_tensor_t wb = tprt__ce_rows(w, v0, n), zb = tprt__ce_block(z, x->dtype, T, n), dwb = tprt__ce_rows(dw, v0, n);
    s = tprt_cpu_linear(x, &wb, NULL, &zb, chunks);
    if (!s) tprt__ce_dlogits(&zb, targets, lse, dloss, 0, v0, start);
    if (!s) s = tprt_cpu_linear_wgrad(&zb, x, &dwb, token_chunks);
  }
  tprt__scratch_free(z);
  return s;
}

tprt_status_t tprt_cpu_cross_entropy_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                          const tprt_tensor_t* targets, const tprt_tensor_t* lse,
                                          const tprt_tensor_t* dloss, tprt_tensor_t* dx, tprt_tensor_t* dw,
                                          int64_t start, int64_t vocab, int chunks, int vocab_chunks,
                                          int token_chunks) {
  tprt_status_t s = tprt_cpu_cross_entropy_dgrad(x, w, targets, lse, dloss, dx, start, vocab, chunks, vocab_chunks);
  return s ? s : tprt_cpu_cross_entropy_wgrad(x, w, targets, lse, dloss, dw, start, vocab, chunks, token_chunks);
}

tprt_status_t tprt_cpu_cross_entropy_with_grad(const tprt_tensor_t* x, const tprt_tensor_t* w,
                                               const tprt_tensor_t* targets, const tprt_tensor_t* dloss,
                                               tprt_tensor_t* loss, tprt_tensor_t* lse, tprt_tensor_t* dx,
                                               tprt_tensor_t* dw, int chunks, int vocab_chunks, int token_chunks) {
  tprt_status_t s = tprt_cpu_cross_entropy(x, w, targets, loss, lse, chunks);
  if (s) return s;
  int64_t vocab = w->rank == 2 ? w->dims[0] : 0;
  return tprt_cpu_cross_entropy_grad(x, w, targets, lse, dloss, dx, dw, 0, vocab, chunks, vocab_chunks, token_chunks);
}
