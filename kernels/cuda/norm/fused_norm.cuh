// Device helpers of the fused all-reduce + add + RMSNorm kernel (fused_norm_kernel.cuh, whose header
// describes the protocol): launch shapes, the empty-word pattern, volatile peer stores and polls, the
// slot layout of a member's region, the push of the partial, and the cluster's shared-memory exchange.
#pragma once

#include "tprt_cuda_internal.cuh"

static_assert(TPRT_CUDA_FUSED_CLUSTER * 32 == TPRT_ROW_LANES, "a cluster's first warps are the canonical lanes");
#define TPRT__FN_PUSH_BLOCKS 16
#define TPRT__FN_ROW_THREADS 512  // a block per row: twice the canonical lanes, the row's work spreads wider
#define TPRT__FN_ROW_UNITS 8  // a block per row: the words a thread has in flight (16 spill more registers)

// The two launch shapes, by threads per block T: clusters of TPRT_ROW_LANES-thread blocks, or a block of
// TPRT__FN_ROW_THREADS per row. V: the adjacent columns a thread reduces together, those of one word (2 for
// 2-byte partials, whose words hold two elements: each word is loaded once). B: the words of each peer a
// thread has in flight (its members' values in registers; one for groups of run-time size); PUSH: the push's
// words in flight; NORM: the norm's loads.
static constexpr bool tprt__fn_clustered(int threads) { return threads == TPRT_ROW_LANES; }

template <int T, int G, int DP>
struct tprt__fn_shape {
  static constexpr bool kCluster = tprt__fn_clustered(T);
  static constexpr int V = DP == TPRT_DTYPE_F32 ? 1 : 2;
  static constexpr int B = G == 0 ? 1 : kCluster ? 4 / V : (TPRT__FN_ROW_UNITS / G > 0 ? TPRT__FN_ROW_UNITS / G : 1);
  static constexpr int PUSH = kCluster ? 4 : 8;
  static constexpr int NORM = kCluster ? 4 : 16;
};

// The call count after |e| (counters[0]; never zero).
static __device__ __forceinline__ unsigned tprt__fn_next(unsigned e) { return e == 0xFFFFFFFFu ? 1u : e + 1u; }

static __device__ __forceinline__ unsigned long long tprt__fn_clock(void) {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// The empty word: every slot word is all ones until its writer stores it (a 2-byte element 0xFFFF,
// an f32 0xFFFFFFFF: NaNs a GPU's arithmetic never produces, its NaN being 0x7FFFFFFF). A value
// with those bits is sent as the quiet NaN 0x7FFF / 0x7FFFFFFF instead: a partial's NaN sums to the
// GPU's NaN either way, so the bits of the outputs are the same.
#define TPRT__FN_EMPTY 0xFFFFFFFFu

// Element bits of dtype size ESZ with the empty pattern replaced (see TPRT__FN_EMPTY).
template <int ESZ>
static __device__ __forceinline__ uint32_t tprt__fn_clean(uint32_t x) {
  if (ESZ == 4) return x == TPRT__FN_EMPTY ? 0x7FFFFFFFu : x;
  if ((x & 0xFFFFu) == 0xFFFFu) x = (x & 0xFFFF0000u) | 0x7FFFu;
  if ((x >> 16) == 0xFFFFu) x = (x & 0xFFFFu) | 0x7FFF0000u;
  return x;
}

// Whether word |x| of elements of size ESZ has every element stored (none empty).
template <int ESZ>
static __device__ __forceinline__ bool tprt__fn_full(uint32_t x) {
  return ESZ == 4 ? x != TPRT__FN_EMPTY : ((x & 0xFFFFu) != 0xFFFFu && (x >> 16) != 0xFFFFu);
}

static __device__ __forceinline__ void tprt__st_volatile_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

static __device__ __forceinline__ void tprt__st_volatile_u16(unsigned short* p, unsigned short v) {
  asm volatile("st.volatile.global.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}

static __device__ __forceinline__ void tprt__st_volatile_v2(uint32_t* p, uint32_t a, uint32_t b) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}

static __device__ __forceinline__ uint2 tprt__ld_volatile_v2(const uint32_t* p) {
  uint2 v;
  asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ uint32_t tprt__ld_volatile_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ unsigned short tprt__ld_volatile_u16(const unsigned short* p) {
  unsigned short v;
  asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}

// v[0] = the members' values summed in the CPU collectives' order (tprt__cuda_members_order). G > 0:
// the group size (registers); G = 0: |n| members at run time.
template <int G>
static __device__ __forceinline__ float tprt__members_sum(float* v, int n, int canonical) {
  constexpr int GM = G > 0 ? G : TPRT_CUDA_FUSED_MAX_GROUP;
  tprt__cuda_members_order<GM>(G > 0 ? G : n, canonical, [&](int a, int b) { v[a] = __fadd_rn(v[a], v[b]); });
  return v[0];
}

// The words of one member's slot in area |area| (0: partials, 1: two-shot's rows) of buffer |buf|
// of |region|.
static __device__ __forceinline__ uint32_t* tprt__fn_slot(void* region, int64_t slot_words, int buf, int area, int n,
                                                          int member) {
  return (uint32_t*)region + (((int64_t)buf * 2 + area) * n + member) * slot_words;
}

// The rows of |m| that member |o| of |n| owns under two-shot (rows o, o + n, ...).
static __device__ __forceinline__ int64_t tprt__fn_owned(int o, int64_t m, int n) {
  return m > o ? (m - 1 - o) / n + 1 : 0;
}

// A 16-byte store of four words to a peer. (A plain store measured no faster: 4xH100, docs/performance.md.)
static __device__ __forceinline__ void tprt__st_quad(uint32_t* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// The slot word that word |w| of the partial goes to: one-shot, w; two-shot, w's row r as the
// owner's (r / n)-th row. |o|: the owner (two-shot).
template <bool TWO>
static __device__ __forceinline__ int64_t tprt__fn_dest(int64_t w, int64_t wpr, int n, int* o) {
  if (!TWO) return w;
  const int64_t row = w / wpr;
  *o = (int)(row % n);
  return (row / n) * wpr + (w - row * wpr);
}

// The partial's |words| 4-byte words (rows of |wpr| words; a last half word padded with zeros), cleaned,
// into this member's slot of area 0 of buffer |buf| on its peers: one-shot, every word to every peer;
// two-shot, row r's words to its owner r mod n only, as the owner's (r / n)-th row. The whole grid
// (blocks of T threads) shares the words: four at a time in 16-byte stores where the partial and the
// rows allow (BATCH / 2 stores a thread in flight), one at a time for the rest.
template <int T, int BATCH, int ESZ, bool TWO>
static __device__ __forceinline__ void tprt__fn_push(const tprt_cuda_peer_group_t& g, const void* partial,
                                                     int64_t bytes, int64_t wpr, int64_t slot_words, int buf) {
  const int me = g.index, n = g.group;
  const int64_t words = (bytes + 3) / 4, tid = (int64_t)blockIdx.x * T + threadIdx.x, threads = (int64_t)gridDim.x * T;
  const uint32_t* src = (const uint32_t*)partial;
  // Quads: whole 16-byte groups of an aligned partial, none across a row (two-shot).
  const int64_t quads = (uintptr_t)partial % 16 == 0 && (!TWO || wpr % 4 == 0) ? words / 4 : 0;
  constexpr int QB = BATCH / 2 > 0 ? BATCH / 2 : 1;
  for (int64_t q0 = tid; q0 < quads; q0 += threads * QB) {
    uint4 x[QB];
#pragma unroll
    for (int k = 0; k < QB; ++k) {
      const int64_t q = q0 + k * threads;
      if (q >= quads) continue;
      x[k] = __ldg((const uint4*)src + q);
      x[k] = make_uint4(tprt__fn_clean<ESZ>(x[k].x), tprt__fn_clean<ESZ>(x[k].y), tprt__fn_clean<ESZ>(x[k].z),
                        tprt__fn_clean<ESZ>(x[k].w));
    }
#pragma unroll
    for (int k = 0; k < QB; ++k) {
      const int64_t q = q0 + k * threads;
      if (q >= quads) continue;
      int o = 0;
      const int64_t d = tprt__fn_dest<TWO>(4 * q, wpr, n, &o);
      if (TWO) {
        if (o != me) tprt__st_quad(tprt__fn_slot(g.data[o], slot_words, buf, 0, n, me) + d, x[k]);
      } else {
        for (int p = 0; p < n; ++p)
          if (p != me) tprt__st_quad(tprt__fn_slot(g.data[p], slot_words, buf, 0, n, me) + d, x[k]);
      }
    }
  }
  for (int64_t w = 4 * quads + tid; w < words; w += threads) {
    const uint32_t x = tprt__fn_clean<ESZ>(w * 4 + 4 <= bytes ? __ldg(src + w) : __ldg((const unsigned short*)src + 2 * w));
    int o = 0;
    const int64_t d = tprt__fn_dest<TWO>(w, wpr, n, &o);
    for (int p = 0; p < n; ++p)
      if (p != me && (!TWO || p == o)) tprt__st_volatile_u32(tprt__fn_slot(g.data[p], slot_words, buf, 0, n, me) + d, x);
  }
}

// The bits of |v| stored as dtype D (a 2-byte dtype's in the low half).
template <int D>
static __device__ __forceinline__ uint32_t tprt__fn_bits(float v) {
  if (D == TPRT_DTYPE_F32) return __float_as_uint(v);
  unsigned short half = 0;
  tprt__cuda_st(&half, D, 0, v);
  return half;
}

// The value of |bits| of dtype D (a 2-byte dtype's in the low half).
template <int D>
static __device__ __forceinline__ float tprt__fn_float(uint32_t bits) {
  if (D == TPRT_DTYPE_F32) return __uint_as_float(bits);
  const unsigned short half = (unsigned short)bits;
  return tprt__cuda_ld(&half, D, 0);
}

// The value of element |i| (dtype D) of word |x| (a 2-byte element: the half its index picks).
template <int D>
static __device__ __forceinline__ float tprt__fn_value(uint32_t x, int64_t i) {
  if (D == TPRT_DTYPE_F32) return __uint_as_float(x);
  unsigned short half = (unsigned short)(i % 2 ? x >> 16 : x & 0xFFFFu);
  return tprt__cuda_ld(&half, D, 0);
}

// The word holding element |i| (dtype D) of a slot.
template <int D>
static __device__ __forceinline__ const uint32_t* tprt__fn_word(const uint32_t* slot, int64_t i) {
  return slot + (D == TPRT_DTYPE_F32 ? i : i / 2);
}

// Shared-memory addresses of the cluster (32-bit shared::cluster windows) and the transaction
// barriers the blocks of a cluster exchange their warps' sums of squares through.
static __device__ __forceinline__ uint32_t tprt__fn_smem(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ uint32_t tprt__fn_remote(uint32_t local, unsigned rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}

// |v| into the float at |slot| of block |rank|, completing 4 bytes of that block's barrier |bar|.
static __device__ __forceinline__ void tprt__fn_send(uint32_t slot, uint32_t bar, unsigned rank, float v) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(
                   tprt__fn_remote(slot, rank)),
               "r"(__float_as_uint(v)), "r"(tprt__fn_remote(bar, rank))
               : "memory");
}

static __device__ __forceinline__ void tprt__fn_expect(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void tprt__fn_wait(uint32_t bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n wait:\n"
      " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// A cluster barrier without memory ordering (a release would wait for the pushes' stores to land).
static __device__ __forceinline__ void tprt__fn_cluster_arrive(void) {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

static __device__ __forceinline__ void tprt__fn_cluster_wait(void) {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
