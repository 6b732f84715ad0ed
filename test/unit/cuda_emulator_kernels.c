// The CUDA emulator's kernels (cuda_emulator.h): the ones the collectives launch, run as host
// functions on the emulated stream in the arithmetic of their CUDA kernels.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include <stdatomic.h>
#include <stdio.h>
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
// whole grid at once: the counters; the push of the partial's 4-byte words, cleaned of the empty
// pattern, into this member's slot of area 0 of the call's buffer (one-shot: on every peer;
// two-shot: row r to member r mod n only, as its (r / n)-th row); the emptying of what the last call
// filled; then, row by row in the member's order (two-shot: its own rows first), the canonical or
// ordered sum of the own partial and the polled words (rounded to the residual's dtype with
// round_sum; two-shot: sent to every peer's area 1), or, for another owner's row, its sum polled
// from area 1; the add of the own residual rounded once; the CPU's rmsnorm of each row; and the
// counters advanced. With a quantization, the CPU's quantize of normed last (the kernel quantizes
// each row as it normalizes it; the bits are the quantize's either way).
typedef struct {
  tprt_cuda_peer_group_t g;
  const void *partial, *residual, *gamma;
  void *normed, *out;
  int dp, dr, gd, canonical, round_sum, two_shot;
  int64_t m, h;
  float eps;
  bool quant, has_amax, has_global;
  int format;
  tprt_tensor_t amax, data, scale, global;
} emu__fused_t;

enum { EMU__ELEM_EMPTY16 = 0xFFFF };
#define EMU__EMPTY 0xFFFFFFFFu

// Waits until the |size|-byte element at |p| is not empty; false when the abort word turned
// non-zero first. Returns its bits in |*bits|.
static bool emu__take(const void* p, int size, const volatile unsigned* abort, uint32_t* bits) {
  for (;;) {
    uint32_t v = size == 2 ? __atomic_load_n((const uint16_t*)p, __ATOMIC_ACQUIRE)
                           : __atomic_load_n((const uint32_t*)p, __ATOMIC_ACQUIRE);
    if (v != (size == 2 ? (uint32_t)EMU__ELEM_EMPTY16 : EMU__EMPTY)) {
      *bits = v;
      return true;
    }
    if (abort && __atomic_load_n(abort, __ATOMIC_ACQUIRE)) return false;
    struct timespec d = {0, 2000};
    nanosleep(&d, NULL);
  }
}

// The words of |member|'s slot in |area| of buffer |buf| of |region|.
static uint32_t* emu__slot(void* region, int64_t slot_words, int buf, int area, int n, int member) {
  return (uint32_t*)region + (((int64_t)buf * 2 + area) * n + member) * slot_words;
}

static int64_t emu__owned(int o, int64_t m, int n) { return m > o ? (m - 1 - o) / n + 1 : 0; }

// The bits of |v| stored as |dtype| (a 2-byte dtype's in the low half), and back: through byte
// buffers, never a uint32_t read as 2-byte elements.
static uint32_t emu__bits(float v, int dtype) {
  unsigned char b[4] = {0};
  tprt_store_elem(b, dtype, 0, v);
  if (tprt_dtype_bytes(dtype, 1) == 2) return (uint32_t)b[0] | (uint32_t)b[1] << 8;
  uint32_t bits;
  memcpy(&bits, b, 4);
  return bits;
}

static float emu__float(uint32_t bits, int dtype) {
  unsigned char b[4];
  if (tprt_dtype_bytes(dtype, 1) == 2) {
    b[0] = (unsigned char)bits, b[1] = (unsigned char)(bits >> 8);
  } else {
    memcpy(b, &bits, 4);
  }
  return tprt_load_elem(b, dtype, 0);
}

// |bits| of an element of |size| bytes with the empty pattern replaced by a NaN.
static uint32_t emu__clean(uint32_t bits, int size) {
  if (size == 4) return bits == EMU__EMPTY ? 0x7FFFFFFFu : bits;
  return bits == EMU__ELEM_EMPTY16 ? 0x7FFFu : bits;
}

static void emu__fused(void* arg) {
  const emu__fused_t* a = arg;
  const tprt_cuda_peer_group_t* g = &a->g;
  const int me = g->index, n = g->group;
  const int64_t h = a->h, m = a->m, slot = tprt_cuda_fused_slot_bytes(g->capacity) / 4;  // words
  const int last_buf = (int)g->counters[3], buf = (last_buf + 1) % 3;
  const int esz = (int)tprt_dtype_bytes(a->dp, 1), rsz = (int)tprt_dtype_bytes(a->dr, 1);
  // Two-shot's sums: rounded to a 2-byte residual's dtype (round_sum), else f32.
  const int ssz = rsz == 2 && a->round_sum ? 2 : 4;
  const int64_t wpr = h * esz / 4, rpw = (h * ssz + 3) / 4, rpe = rpw * 4 / ssz;
  const size_t bytes = (size_t)tprt_dtype_bytes(a->dp, m * h);
  const int64_t words = (int64_t)(bytes + 3) / 4;
  for (int64_t w = 0; w < words; ++w) {
    uint32_t word = 0;
    memcpy(&word, (const char*)a->partial + w * 4, (size_t)w * 4 + 4 <= bytes ? 4 : 2);
    word = esz == 4 ? emu__clean(word, 4) : emu__clean(word & 0xFFFFu, 2) | emu__clean(word >> 16, 2) << 16;
    if (a->two_shot) {
      const int64_t row = w / wpr;
      const int o = (int)(row % n);
      if (o != me)
        __atomic_store_n(emu__slot(g->data[o], slot, buf, 0, n, me) + (row / n) * wpr + w % wpr, word, __ATOMIC_RELEASE);
      continue;
    }
    for (int p = 0; p < n; ++p)
      if (p != me) __atomic_store_n(emu__slot(g->data[p], slot, buf, 0, n, me) + w, word, __ATOMIC_RELEASE);
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    memset(emu__slot(g->data[me], slot, last_buf, 0, n, p), 0xFF, 4 * (size_t)g->counters[2]);
    if (g->counters[4])
      memset(emu__slot(g->data[me], slot, last_buf, 1, n, p), 0xFF,
             4 * (size_t)(emu__owned(p, g->counters[4], n) * g->counters[5]));
  }
  const int64_t owned = a->two_shot ? emu__owned(me, m, n) : m;
  for (int64_t i = 0; i < m; ++i) {
    int64_t row = i, q = i;
    int owner = me;
    if (a->two_shot && i < owned) {
      row = me + i * n;
    } else if (a->two_shot) {
      const int64_t j = i - owned, k = j % (n - 1);
      q = j / (n - 1);
      owner = (int)(k < me ? k : k + 1);
      row = q * n + owner;
    }
    const int64_t in_base = a->two_shot ? q * h : row * h;
    for (int64_t j = 0; j < h; ++j) {
      uint32_t bits = 0;
      const float res = tprt_load_elem(a->residual, a->dr, row * h + j);
      if (owner != me) {  // another owner's row: its sum, from area 1, plus this member's residual
        const char* from = (const char*)emu__slot(g->data[me], slot, buf, 1, n, owner);
        if (!emu__take(from + (q * rpe + j) * ssz, ssz, g->abort, &bits)) return;
        bits = emu__bits(emu__float(bits, ssz == 2 ? a->dr : TPRT_DTYPE_F32) + res, a->dr);
        memcpy((char*)a->out + (row * h + j) * rsz, &bits, (size_t)rsz);  // little-endian: the low bytes
        continue;
      }
      float v[TPRT_MAX_WORLD_SIZE];
      for (int p = 0; p < n; ++p) {
        if (p == me) {
          v[p] = tprt_load_elem(a->partial, a->dp, row * h + j);
          continue;
        }
        const char* src = (const char*)emu__slot(g->data[me], slot, buf, 0, n, p);
        if (!emu__take(src + (in_base + j) * esz, esz, g->abort, &bits)) return;
        v[p] = emu__float(bits, a->dp);
      }
      if (a->canonical) {
        tprt_kacc_tree(v, n);  // n: 2, 4 or 8 here
      } else {
        for (int p = 1; p < n; ++p) v[0] = v[0] + v[p];
      }
      if (a->round_sum)  // through the residual's dtype, as the composition's all-reduce writes it
        v[0] = emu__float(emu__bits(v[0], a->dr), a->dr);
      if (a->two_shot) {  // the sum to every peer (a host's NaN may be negative, a GPU's never is)
        const int sd = ssz == 2 ? a->dr : TPRT_DTYPE_F32;
        uint32_t sum = emu__clean(emu__bits(v[0], sd), ssz);
        v[0] = emu__float(sum, sd);
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          char* to = (char*)emu__slot(g->data[p], slot, buf, 1, n, me) + (q * rpe + j) * ssz;
          if (ssz == 2)
            __atomic_store_n((uint16_t*)to, (uint16_t)sum, __ATOMIC_RELEASE);
          else
            __atomic_store_n((uint32_t*)to, sum, __ATOMIC_RELEASE);
        }
      }
      bits = emu__bits(v[0] + res, a->dr);
      memcpy((char*)a->out + (row * h + j) * rsz, &bits, (size_t)rsz);
    }
    int64_t dims[2] = {1, h}, gd[1] = {h};
    size_t off = (size_t)tprt_dtype_bytes(a->dr, row * h);
    tprt_tensor_t x = tprt_tensor_make((char*)a->out + off, a->dr, 2, dims),
                  y = tprt_tensor_make((char*)a->normed + off, a->dr, 2, dims),
                  gm = tprt_tensor_make((void*)a->gamma, a->gd, 1, gd);
    tprt_status_t s = tprt_cpu_rmsnorm(&x, &gm, &y, a->eps);
    if (s) emu__fail("fused_norm: the CPU rmsnorm failed", a->out);
  }
  if (a->quant) {
    int64_t dims[2] = {m, h};
    tprt_tensor_t y = tprt_tensor_make(a->normed, a->dr, 2, dims), data = a->data, scale = a->scale,
                  global = a->global;
    tprt_status_t s = tprt_cpu_quantize_with_amax(&y, a->has_amax ? &a->amax : NULL, &data, &scale,
                                                  a->has_global ? &global : NULL, a->format, TPRT_QUANT_ROWWISE);
    if (s) emu__fail("fused_norm: the CPU quantize failed", a->normed);
  }
  g->counters[2] = (unsigned)(a->two_shot ? owned * wpr : words);
  g->counters[3] = (unsigned)buf;
  g->counters[4] = (unsigned)(a->two_shot ? m : 0);
  g->counters[5] = (unsigned)rpw;
  g->counters[0] = g->counters[0] == 0xFFFFFFFFu ? 1u : g->counters[0] + 1u;
}

// Counted so that a check can tell the fused kernel from the composition, which has the same bits.
static atomic_int emu__fused_count;

int emu__fused_launches(void) { return atomic_load(&emu__fused_count); }

tprt_status_t tprt_cuda_fused_allreduce_add_rmsnorm(const tprt_cuda_peer_group_t* g, const tprt_tensor_t* partial,
                                                    const tprt_tensor_t* residual, const tprt_tensor_t* gamma,
                                                    tprt_tensor_t* normed, tprt_tensor_t* residual_out, float eps,
                                                    int canonical, int round_sum, int two_shot,
                                                    const tprt_cuda_fused_quant_t* quant, cudaStream_t stream) {
  atomic_fetch_add(&emu__fused_count, 1);
  int64_t m = residual->dims[0], h = residual->dims[1];
  if (tprt_cuda_fused_call_bytes(partial, residual, two_shot, g->group, round_sum) > g->capacity)
    emu__fail("fused_norm: the call exceeds the registered slots", g->data[g->index]);
  if (m == 0 || h == 0)  // no launch; the kernel's entry quantizes the empty normed on its own
    return quant ? tprt_cpu_quantize_with_amax(normed, quant->amax, quant->data, quant->scale, quant->global_scale,
                                               quant->format, TPRT_QUANT_ROWWISE)
                 : NULL;
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
                      .two_shot = two_shot,
                      .m = m,
                      .h = h,
                      .eps = eps};
  if (quant) {
    a->quant = true;
    a->format = quant->format;
    a->data = *quant->data;
    a->scale = *quant->scale;
    if ((a->has_amax = quant->amax != NULL)) a->amax = *quant->amax;
    if ((a->has_global = quant->global_scale != NULL)) a->global = *quant->global_scale;
  }
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
