// The CUDA emulator's kernels (cuda_emulator.h): the ones the collectives launch, run as host
// functions on the emulated stream in the arithmetic of their CUDA kernels.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "backend_cuda_impl.h"
#include "cuda_emulator.h"
#include "tprt_cpu_kernels.h"
#include "tprt_numerics.h"

//===----------------------------------------------------------------------===//
// The kernels the collectives launch, on the stream; the others and NCCL must not run
//===----------------------------------------------------------------------===//

typedef struct {
  const void* staged;
  int group, in_dtype, out_dtype, canonical, device;
  int64_t n;
  void* out;
  tprt_cuda_staged_own_t own;  // member -1: none
} emu__reduce_t;

// tprt_cuda_reduce_staged's arithmetic (reduce.cu): f32 sums, one rounding.
static void emu__reduce(void* arg) {
  const emu__reduce_t* r = arg;
  emu__check(r->staged, tprt_dtype_bytes(r->in_dtype, r->n * r->group), r->device, "reduce_staged reads freed memory");
  emu__check(r->out, tprt_dtype_bytes(r->out_dtype, r->n), r->device, "reduce_staged writes freed memory");
  if (r->own.member >= 0 && r->n > 0)
    emu__check(r->own.src, tprt_dtype_bytes(r->in_dtype, (r->n / r->own.cols - 1) * r->own.pitch + r->own.cols),
               r->device, "reduce_staged reads an own view of freed memory");
  for (int64_t i = 0; i < r->n; ++i) {
    float v[TPRT_MAX_WORLD_SIZE] = {0};
    for (int g = 0; g < r->group; ++g)
      v[g] = g == r->own.member
                 ? tprt_load_elem(r->own.src, r->in_dtype, (i / r->own.cols) * r->own.pitch + i % r->own.cols)
                 : tprt_load_elem(r->staged, r->in_dtype, (int64_t)g * r->n + i);
    if (r->canonical) {
      tprt_kacc_tree(v, r->group);  // the groups here are powers of two, as its contract asks
    } else {
      for (int g = 1; g < r->group; ++g) v[0] = v[0] + v[g];
    }
    tprt_store_elem(r->out, r->out_dtype, i, v[0]);
  }
}

tprt_status_t tprt_cuda_reduce_staged_own(const void* staged, int group, int in_dtype, int64_t n, void* out,
                                          int out_dtype, int canonical, tprt_cuda_staged_own_t own,
                                          cudaStream_t stream) {
  emu__reduce_t* r = malloc(sizeof *r);
  *r = (emu__reduce_t){staged, group, in_dtype, out_dtype, canonical, emu__stream_device(stream), n, out, own};
  emu__call(stream, emu__reduce, r);
  return NULL;
}

tprt_status_t tprt_cuda_reduce_staged(const void* staged, int group, int in_dtype, int64_t n, void* out, int out_dtype,
                                      int canonical, cudaStream_t stream) {
  tprt_cuda_staged_own_t none = {-1, NULL, 1, 1};
  return tprt_cuda_reduce_staged_own(staged, group, in_dtype, n, out, out_dtype, canonical, none, stream);
}

// tprt_cuda_fused_allreduce_add_rmsnorm (fused_norm.cu): the kernel's protocol on the host, the
// whole grid at once: the counters, the push of the partial's 4-byte words as units with the
// call's flag into every peer's slot of the call's buffer, the zeroing of the last call's units,
// the canonical or ordered sum of the own partial and the polled units (rounded to the residual's
// dtype with round_sum), the add rounded once, the CPU's rmsnorm of each row, and the counters
// advanced.
typedef struct {
  tprt_cuda_peer_group_t g;
  const void *partial, *residual, *gamma;
  void *normed, *out;
  int dp, dr, gd, canonical, round_sum;
  int64_t m, h;
  float eps;
} emu__fused_t;

// Element |i| (dtype |dt|) of a slot once its unit carries flag |e|; false when the abort word
// turned non-zero first.
static bool emu__take(const uint64_t* slot, int dt, int64_t i, unsigned e, const volatile unsigned* abort, float* out) {
  const int64_t w = dt == TPRT_DTYPE_F32 ? i : i / 2;
  uint64_t u = 0;
  while ((unsigned)((u = __atomic_load_n(slot + w, __ATOMIC_ACQUIRE)) >> 32) != e) {
    if (abort && __atomic_load_n(abort, __ATOMIC_ACQUIRE)) return false;
    struct timespec d = {0, 2000};
    nanosleep(&d, NULL);
  }
  uint32_t word = (uint32_t)u;
  if (dt == TPRT_DTYPE_F32) {
    memcpy(out, &word, sizeof word);
  } else {
    uint16_t half[2] = {(uint16_t)(i % 2 ? word >> 16 : word & 0xFFFFu), 0};
    *out = tprt_load_elem(half, dt, 0);
  }
  return true;
}

static void emu__fused(void* arg) {
  const emu__fused_t* a = arg;
  const tprt_cuda_peer_group_t* g = &a->g;
  const int me = g->index, n = g->group;
  const int64_t h = a->h, slot = tprt_cuda_fused_slot_bytes(g->capacity) / 4;  // units
  const unsigned e = g->counters[0] == 0xFFFFFFFFu ? 1u : g->counters[0] + 1u;
  const int buf = (int)((g->counters[3] + 1) % 3);
  const size_t bytes = (size_t)tprt_dtype_bytes(a->dp, a->m * h);
  const int64_t words = (int64_t)(bytes + 3) / 4;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    uint64_t* dst = (uint64_t*)g->data[p] + ((int64_t)buf * n + me) * slot;
    for (int64_t w = 0; w < words; ++w) {
      uint32_t word = 0;
      memcpy(&word, (const char*)a->partial + w * 4, (size_t)w * 4 + 4 <= bytes ? 4 : 2);
      __atomic_store_n(dst + w, (uint64_t)e << 32 | word, __ATOMIC_RELEASE);
    }
  }
  for (int p = 0; p < n; ++p)
    if (p != me)
      memset((uint64_t*)g->data[me] + ((int64_t)g->counters[3] * n + p) * slot, 0, 8 * (size_t)g->counters[2]);
  for (int64_t row = 0; row < a->m; ++row) {
    for (int64_t j = 0; j < h; ++j) {
      float v[TPRT_MAX_WORLD_SIZE];
      for (int p = 0; p < n; ++p) {
        const uint64_t* src = (const uint64_t*)g->data[me] + ((int64_t)buf * n + p) * slot;
        if (p == me)
          v[p] = tprt_load_elem(a->partial, a->dp, row * h + j);
        else if (!emu__take(src, a->dp, row * h + j, e, g->abort, &v[p]))
          return;
      }
      if (a->canonical) {
        tprt_kacc_tree(v, n);  // n: 2, 4 or 8 here
      } else {
        for (int p = 1; p < n; ++p) v[0] = v[0] + v[p];
      }
      if (a->round_sum) {  // through the residual's dtype, as the composition's all-reduce writes it
        uint32_t word = 0;
        tprt_store_elem(&word, a->dr, 0, v[0]);
        v[0] = tprt_load_elem(&word, a->dr, 0);
      }
      tprt_store_elem(a->out, a->dr, row * h + j, v[0] + tprt_load_elem(a->residual, a->dr, row * h + j));
    }
    int64_t dims[2] = {1, h}, gd[1] = {h};
    size_t off = (size_t)tprt_dtype_bytes(a->dr, row * h);
    tprt_tensor_t x = tprt_tensor_make((char*)a->out + off, a->dr, 2, dims),
                  y = tprt_tensor_make((char*)a->normed + off, a->dr, 2, dims),
                  gm = tprt_tensor_make((void*)a->gamma, a->gd, 1, gd);
    tprt_status_t s = tprt_cpu_rmsnorm(&x, &gm, &y, a->eps);
    if (s) emu__fail("fused_norm: the CPU rmsnorm failed", a->out);
  }
  g->counters[2] = (unsigned)words;
  g->counters[3] = (unsigned)buf;
  g->counters[0] = e;
}

// Counted so that a check can tell the fused kernel from the composition, which has the same bits.
static atomic_int emu__fused_count;

int emu__fused_launches(void) { return atomic_load(&emu__fused_count); }

tprt_status_t tprt_cuda_fused_allreduce_add_rmsnorm(const tprt_cuda_peer_group_t* g, const tprt_tensor_t* partial,
                                                    const tprt_tensor_t* residual, const tprt_tensor_t* gamma,
                                                    tprt_tensor_t* normed, tprt_tensor_t* residual_out, float eps,
                                                    int canonical, int round_sum, cudaStream_t stream) {
  atomic_fetch_add(&emu__fused_count, 1);
  int64_t m = residual->dims[0], h = residual->dims[1];
  if ((int64_t)tprt_dtype_bytes(partial->dtype, m * h) > g->capacity)
    emu__fail("fused_norm: the call exceeds the registered slots", g->data[g->index]);
  if (m == 0 || h == 0) return NULL;
  emu__fused_t* a = malloc(sizeof *a);
  *a = (emu__fused_t){.g = *g,
                      .partial = partial->data,
                      .residual = residual->data,
                      .gamma = gamma->data,
                      .normed = normed->data,
                      .out = residual_out->data,
                      .dp = partial->dtype,
                      .dr = residual->dtype,
                      .gd = gamma->dtype,
                      .canonical = canonical,
                      .round_sum = round_sum,
                      .m = m,
                      .h = h,
                      .eps = eps};
  emu__call(stream, emu__fused, a);
  return NULL;
}

// Enough for a cluster per rank where up to 8 ranks share an emulated GPU (the emulation runs
// the whole grid at once, so the count shapes no row's placement).
tprt_status_t tprt_cuda_fused_norm_resident_blocks(int* clusters, int* rows, int* sms) {
  *clusters = *rows = 8 * TPRT_CUDA_FUSED_CLUSTER;
  *sms = 8 * TPRT_CUDA_FUSED_CLUSTER;
  return NULL;
}

// tprt_cuda_max_staged's arithmetic (reduce.cu): the maximum kept by tprt_max_keep, in one dtype.
static void emu__max(void* arg) {
  const emu__reduce_t* r = arg;
  emu__check(r->staged, tprt_dtype_bytes(r->in_dtype, r->n * r->group), r->device, "max_staged reads freed memory");
  emu__check(r->out, tprt_dtype_bytes(r->in_dtype, r->n), r->device, "max_staged writes freed memory");
  for (int64_t i = 0; i < r->n; ++i) {
    float m = tprt_load_elem(r->staged, r->in_dtype, i);
    for (int g = 1; g < r->group; ++g)
      m = tprt_max_keep(m, tprt_load_elem(r->staged, r->in_dtype, (int64_t)g * r->n + i));
    tprt_store_elem(r->out, r->in_dtype, i, m);
  }
}

tprt_status_t tprt_cuda_max_staged(const void* staged, int group, int dtype, int64_t n, void* out,
                                   cudaStream_t stream) {
  emu__reduce_t* r = malloc(sizeof *r);
  *r = (emu__reduce_t){staged, group, dtype, dtype, 0, emu__stream_device(stream), n, out, {-1, NULL, 1, 1}};
  emu__call(stream, emu__max, r);
  return NULL;
}

typedef struct {
  tprt_tensor_t src, dst;
} emu__copy_t;

static void emu__copy(void* arg) {
  emu__copy_t* c = arg;
  tprt_status_t s = tprt_cpu_copy(&c->src, &c->dst);
  if (s) emu__fail(tprt_status_message(s), c->dst.data);
}

tprt_status_t tprt_cuda_copy(const tprt_tensor_t* src, tprt_tensor_t* dst, cudaStream_t stream) {
  emu__copy_t* c = malloc(sizeof *c);
  *c = (emu__copy_t){*src, *dst};
  emu__call(stream, emu__copy, c);
  return NULL;
}

void tprt_cuda_lt_destroy(tprt_cuda_lt_t* lt) { (void)lt; }

tprt_status_t tprt__cuda_configure(const char* numerics) {
  (void)numerics;
  return NULL;
}
