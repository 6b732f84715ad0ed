// The fused norm kernel (tprt_cuda_fused_allreduce_add_rmsnorm, fused_norm.cu): tp.fused_allreduce_add_rmsnorm
// as one kernel over the memory of a group of ranks. It is bitwise the composition the backends run
// (docs/cuda-backend.md, "Fused collective + add + RMSNorm"):
//   - the f32 sum of the members' partials, in the canonical tree order or in increasing member
//     order (tprt_cuda_reduce_staged);
//   - with round_sum (the op's sum_type = "residual"), that sum rounded to the residual's dtype,
//     as tprt_cuda_reduce_staged does when it writes the residual's dtype;
//   - plus the residual, rounded once to the residual's dtype: residual_out (tprt_cuda_add);
//   - the exact RMSNorm of each row of residual_out: normed (tprt_cuda_rmsnorm, the same 256-lane
//     canonical row reduction).
//
// Algorithms, both pushes with the data as its own flag (Lamport's: every word of a member's region
// is empty, all ones, until its writer stores it; the sender swaps the one value with those bits
// for another NaN, TPRT__FN_EMPTY). A reader polls its own memory until the words it needs are not
// empty: no flag, no fence and no read of peer memory, so the exchange costs one crossing of the link.
//   - One-shot: every member writes its partial, in its own dtype, into a slot of every peer's region;
//     every member then reduces each row itself from its own partial and those words: N - 1 times
//     the partial's bytes out of each member, one exchange (decode sizes).
//   - Two-shot: row r belongs to member r mod N. Every member writes each row to its owner only; the
//     owner reduces it and writes the row's sum (f32, or with round_sum rounded to a 2-byte
//     residual's dtype) into a second area of every peer's region; every member adds its own
//     residual (the members' residuals may differ) and normalizes every row. (N - 1)/N of the
//     partial's bytes out of each member, plus its rows' sums to every peer, for two crossings:
//     with bf16 partials and f32 sums 3/4 of one-shot's bytes at 4 members, 3/8 at 8.
//
// Synchronization lives in device memory, so a CUDA graph replays it:
//   - Counters (the caller's device, TPRT_CUDA_FUSED_COUNTERS): the calls made, the blocks done in
//     the current call, the words the last call filled (in area 0 of each peer's slot; its rows and
//     their words in area 1, two-shot) and its buffer. Every block reads them at its start; the last
//     block to finish advances them. Every member runs the same calls, so the buffer is the same on
//     every member.
//   - Each region has three buffers, each of two areas of a slot per member, used in turn by the
//     calls. A member empties, in its own region, the words the last call filled (it has read them),
//     so every word a call polls is empty until its writer stores it: never an older call's word.
//   - In call e, member i writes buffer e mod 3 of peer p, which p emptied in call e - 2 and read in
//     call e - 3. Every row i outputs in call e - 1 needed a word p stored in its call e - 1 (to i,
//     or to the row's owner), which started after p's call e - 2 ended (one stream): no word of
//     call e is emptied or read late.
//
// A peer that never arrives (a failed rank) leaves the readers polling until the host sets the
// group's abort word (host-mapped memory, the world's abort); they then stop polling and finish
// the call with undefined outputs.
//
// Every block of every member must be resident at once: a block polls words that a peer's blocks
// push, and those may wait for a slot on an SM that a polling block holds. The caller caps the grid
// with max_blocks (tprt_cuda_fused_norm_resident_blocks divided by the members on the GPU). A member must also not
// queue the kernel behind work that never yields its SMs while its peers' blocks already poll (a persistent GEMM of a
// rank sharing the GPU): shared-GPU worlds are for tests of this protocol.
//
// Launch geometry, two shapes of one kernel (tprt__fn_shape), chosen per call:
//   - Below TPRT_CUDA_FUSED_ROWS_FROM rows (decode sizes): 256-thread blocks in clusters of cs
//     (TPRT_CUDA_FUSED_CLUSTER = 8 where the rows leave SMs to spare; fewer, down to 1, where 8
//     would crowd them): a decode row's work spreads over 8 SMs (one SM would be bound by the
//     latencies of 8192 columns).
//   - From TPRT_CUDA_FUSED_ROWS_FROM rows (rows of at most TPRT_CUDA_FUSED_ROWS_MAX_HIDDEN): a
//     block of 512 threads per row, launched without a cluster. The rows fill the SMs, and the
//     wider block has twice the loads in flight of a 256-thread one.
// The whole grid pushes. Cluster q takes rows q, q + clusters, ... of the member's order (two-shot:
// the rows it owns first, so no block waits for another member's rows before its own are sent);
// block c of a cluster owns the
// canonical lanes cW .. cW + W - 1 (W = 256 / cs) of every column group of 256. Its threads take
// V adjacent lanes each (V = 2 for 2-byte partials: the two elements of one word, which is then
// loaded once; 1 for f32), side by side over the groups, a batch at a time (all the batch's loads
// issued before the first use; a batch's words polled together). A thread keeps its residual_out
// values in the block's shared memory and normalizes them itself. The sum of squares then follows
// tprt__cuda_row_tree exactly: lane l accumulates columns l, l + 256, ... in order (locally: the
// block owns the lane), a warp's shuffles sum its 32 lanes, and each warp's sum goes by st.async
// into every block of the cluster, counted by a transaction barrier (one per row parity; a block
// per row keeps them in its own shared memory); every block sums the 8 warp sums in the shuffle
// tree's order. So the bits are those of the composition in either shape, and no cluster-wide
// barrier waits on the pushes' remote stores (a release at cluster scope is a MEMBAR.ALL.GPU).
// Groups of 2, 4 and 8 are compile-time sizes, so each thread keeps its members' values in
// registers; other sizes (up to TPRT_CUDA_FUSED_MAX_GROUP) take one column at a time.
#pragma once

#include "fused_norm.cuh"

#include "fused_norm_quant.cuh"

// TWO: two-shot, Q: the quantizing form (compile-time choices: an instantiation carries none of the
// code of the forms it is not, so the plain norm keeps its registers).
template <int DP, int DR, int G, int T, bool TWO, bool Q>
static __global__ void __launch_bounds__(T)
    tprt__fused_norm_kernel(tprt_cuda_peer_group_t g, const void* __restrict__ partial,
                            const void* __restrict__ residual, const void* __restrict__ gamma, int g_dtype,
                            void* __restrict__ normed, void* __restrict__ residual_out, int64_t m, int64_t h, float hf,
                            float eps, int canonical, int round_sum, const tprt__fn_quant_t qa) {
  constexpr bool two_shot = TWO;
  constexpr int GM = G > 0 ? G : TPRT_CUDA_FUSED_MAX_GROUP;
  using Shape = tprt__fn_shape<T, G, DP>;
  constexpr int B = Shape::B, V = Shape::V;
  constexpr int ESZ = DP == TPRT_DTYPE_F32 ? 4 : 2, RSZ = DR == TPRT_DTYPE_F32 ? 4 : 2;
  constexpr int WARPS = TPRT_ROW_LANES / 32;  // the canonical tree's warps
  extern __shared__ float part_sm[];          // this block's residual_out values: [group k][lane - first lane]
  __shared__ float warp_sum[2][WARPS];        // the row's warp sums (rows alternate between the two)
  __shared__ __align__(8) unsigned long long bar[2];
  __shared__ unsigned epoch, last[TPRT_CUDA_FUSED_COUNTERS];
  const int me = g.index, n = g.group, t = threadIdx.x;
  const int members = G > 0 ? G : n;
  unsigned cs = 1, c = 0;  // the cluster's blocks, this block's rank in it (a block per row: a cluster of one)
  if (Shape::kCluster) {
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(cs));
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(c));
  }
  const int W = TPRT_ROW_LANES / (int)cs;  // this block's lanes: c W .. c W + W - 1 of every group
  if (t == 0) {
    for (int k = 0; k < TPRT_CUDA_FUSED_COUNTERS; ++k) last[k] = *(volatile unsigned*)&g.counters[k];
    epoch = tprt__fn_next(last[0]);
    if (Shape::kCluster) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(tprt__fn_smem(&bar[0])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(tprt__fn_smem(&bar[1])));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
  }
  __syncthreads();
  if (Shape::kCluster) tprt__fn_cluster_arrive();  // the barriers are initialized; waited for before the first exchange
  const bool traced = g.trace && blockIdx.x == 0 && t == 0;
  unsigned long long clock[4] = {traced ? tprt__fn_clock() : 0ull, 0ull, 0ull, 0ull};
  const unsigned e = epoch;
  // The quantization's per-tensor factors (from the amax operand, as tprt_cuda_quantize_with_amax's).
  float q_mul = 1.0f, q_sdec = 1.0f, q_sdec_mul = 0.0f;
  if (Q && qa.amax) {
    const float amax = tprt_quant_amax_operand(*qa.amax);
    float inv = 1.0f;
    if (qa.format == TPRT_QF_NVFP4)
      tprt_quant_nvfp4_global(amax, &q_sdec, &q_sdec_mul);
    else
      tprt_quant_fp8_scale(amax, qa.format == TPRT_QF_FP8_E4M3, qa.max_finite, &q_mul, &inv);
    if (qa.tensor_scale && blockIdx.x == 0 && t == 0) *qa.tensor_scale = qa.format == TPRT_QF_NVFP4 ? q_sdec : inv;
  }
  const int last_buf = (int)last[3], buf = (last_buf + 1) % 3;
  const int64_t slot_words = tprt_cuda_fused_slot_bytes(g.capacity) / 4;
  const int64_t bytes = m * h * ESZ, wpr = h * ESZ / 4;  // words of a row (2-byte rows are even)
  // Two-shot's owners send each reduced row's sum, the value every member adds its own residual to
  // (the residuals may differ between members): rounded to a 2-byte residual's dtype (round_sum), or
  // as f32. Its rows in area 1: words, elements.
  const bool s16 = RSZ == 2 && round_sum;
  const int64_t rpw = (h * (s16 ? 2 : 4) + 3) / 4, rpe = s16 ? rpw * 2 : rpw;
  tprt__fn_push<T, Shape::PUSH, ESZ, TWO>(g, partial, bytes, wpr, slot_words, buf);
  if (traced) clock[1] = tprt__fn_clock();
  // Empty, in this member's region, what the last call filled (it has read them): area 0's first
  // last[2] words of each peer's slot; after a two-shot call of last[4] rows, area 1's rows of each
  // peer that owned some (last[5] words each).
  const int64_t stride = (int64_t)gridDim.x * T, first = (int64_t)blockIdx.x * T + t;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    uint32_t* old = tprt__fn_slot(g.data[me], slot_words, last_buf, 0, n, p);
    for (int64_t w = first; w < (int64_t)last[2]; w += stride) old[w] = TPRT__FN_EMPTY;
    if (last[4] == 0) continue;
    old = tprt__fn_slot(g.data[me], slot_words, last_buf, 1, n, p);
    const int64_t used = tprt__fn_owned(p, last[4], n) * last[5];
    for (int64_t w = first; w < used; w += stride) old[w] = TPRT__FN_EMPTY;
  }
  // Member p's words: p's slot of this call's buffer in this member's region (the own partial is
  // read from |partial|); two-shot's rows of their owners in area 1.
  const uint32_t* slot[GM];
#pragma unroll
  for (int p = 0; p < GM; ++p) slot[p] = tprt__fn_slot(g.data[me], slot_words, buf, 0, n, p < n ? p : 0);
  if (Shape::kCluster) tprt__fn_cluster_wait();
  const int64_t groups = (h + TPRT_ROW_LANES - 1) / TPRT_ROW_LANES;  // columns j = lane + 256 k, k < groups
  const int64_t clusters = gridDim.x / cs;
  // Thread t's columns, V at a time: lanes c W + V q .. + V - 1 (q = t mod (W / V)) of the groups
  // k = t / (W / V), ... SL apart (a lane's words are whole: 2-byte rows are even). It reduces them,
  // stores them to part_sm and normalizes them; the sum of squares reads part_sm by lane.
  const int PL = W / V, SL = T / PL;
  const int64_t lane_v = (int64_t)c * W + V * (t % PL), kv_first = t / PL;
  // The rows in this member's order: one-shot, 0 .. m - 1, each reduced here. Two-shot: first the
  // rows it owns (me, me + n, ...: reduced here, their residual_out pushed to every peer), then the
  // others, taken from their owners' pushes.
  const int64_t owned = two_shot ? tprt__fn_owned(me, m, n) : m;
  bool dead = false;  // the abort word was set: no word is polled again, the outputs are undefined
  unsigned iter = 0;
  for (int64_t i = blockIdx.x / cs; i < m; i += clusters, ++iter) {
    int64_t row = i, q = i;  // q: the row's place in its owner's slots (two-shot)
    int owner = me;
    if (two_shot && i < owned) {
      row = me + i * n;
    } else if (two_shot) {  // the (i - owned)-th row another member owns (n > 1 here)
      const int64_t j = i - owned, k = j % (n - 1);
      q = j / (n - 1);
      owner = (int)(k < me ? k : k + 1);
      row = q * n + owner;
    }
    const int64_t base = row * h, in_base = two_shot ? q * h : base;  // elements of the row: outputs, slots
    const int par = (int)(iter & 1);
    if (Shape::kCluster && t == 0) tprt__fn_expect(tprt__fn_smem(&bar[par]), WARPS * sizeof(float));
    if (owner != me) {
      // A row reduced by its owner: poll its sums in area 1 of this member's region, add the residual.
      const uint32_t* from = tprt__fn_slot(g.data[me], slot_words, buf, 1, n, owner);
      const int64_t at = q * rpe;
      const uint32_t empty = s16 ? 0xFFFFu : TPRT__FN_EMPTY;
      for (int64_t k0 = kv_first; k0 < groups; k0 += (int64_t)SL * B) {
        uint32_t x[B][V];
        float res[B][V];
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const int64_t j = lane_v + TPRT_ROW_LANES * (k0 + (int64_t)SL * b);
#pragma unroll
          for (int v = 0; v < V; ++v)
            if (j + v < h) res[b][v] = tprt__cuda_ld(residual, DR, base + j + v);
        }
        for (unsigned polls = 1;; ++polls) {
          bool ready = true;
#pragma unroll
          for (int b = 0; b < B; ++b) {
            const int64_t j = lane_v + TPRT_ROW_LANES * (k0 + (int64_t)SL * b);
            if (j >= h) continue;
            if (s16 && V == 2) {  // the two elements of one word
              const uint32_t w = tprt__ld_volatile_u32(from + (at + j) / 2);
              x[b][0] = w & 0xFFFFu;
              x[b][1] = w >> 16;
              ready = ready && tprt__fn_full<2>(w);
            } else if (V == 2) {  // two f32 sums, one 8-byte load (j and the row pitch are even)
              const uint2 w = tprt__ld_volatile_v2(from + at + j);
              x[b][0] = w.x;
              x[b][1] = w.y;
              ready = ready && w.x != empty && w.y != empty;
            } else {
#pragma unroll
              for (int v = 0; v < V; ++v) {
                if (j + v >= h) continue;
                x[b][v] = s16 ? tprt__ld_volatile_u16((const unsigned short*)from + at + j + v)
                              : tprt__ld_volatile_u32(from + at + j + v);
                ready = ready && x[b][v] != empty;
              }
            }
          }
          if (ready || dead) break;
          if (g.abort && polls % 1024 == 0 && *g.abort) dead = true;
        }
        if (traced && !clock[2]) clock[2] = tprt__fn_clock();
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const int64_t k = k0 + (int64_t)SL * b, j = lane_v + TPRT_ROW_LANES * k;
          if (j >= h) continue;
#pragma unroll
          for (int v = 0; v < V; ++v) {
            if (j + v >= h) continue;
            const float sum = s16 ? tprt__fn_float<DR>(x[b][v]) : __uint_as_float(x[b][v]);
            const float out = tprt__round_to<DR>(__fadd_rn(sum, res[b][v]));
            tprt__cuda_st(residual_out, DR, base + j + v, out);
            part_sm[k * W + V * (t % PL) + v] = out;
          }
        }
      }
    } else {
      for (int64_t k0 = kv_first; k0 < groups; k0 += (int64_t)SL * B) {
        float v[B][V][GM], res[B][V];
        uint32_t u[B][GM];
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const int64_t j = lane_v + TPRT_ROW_LANES * (k0 + (int64_t)SL * b);
          if (j >= h) continue;
#pragma unroll
          for (int i2 = 0; i2 < V; ++i2)
            if (j + i2 < h) {
              res[b][i2] = tprt__cuda_ld(residual, DR, base + j + i2);
#pragma unroll
              for (int p = 0; p < GM; ++p)
                if (p == me) v[b][i2][p] = tprt__cuda_ld(partial, DP, base + j + i2);
            }
#pragma unroll
          for (int p = 0; p < GM; ++p)
            if (p < members && p != me) u[b][p] = tprt__ld_volatile_u32(tprt__fn_word<DP>(slot[p], in_base + j));
        }
        // Every word of the batch is stored: reload the ones still empty, all at once (one round trip
        // per poll, not one per word), until they are or the abort word is set.
        for (unsigned polls = 1; !dead; ++polls) {
          bool ready = true;
#pragma unroll
          for (int b = 0; b < B; ++b) {
            const int64_t j = lane_v + TPRT_ROW_LANES * (k0 + (int64_t)SL * b);
#pragma unroll
            for (int p = 0; p < GM; ++p)
              if (j < h && p < members && p != me && !tprt__fn_full<ESZ>(u[b][p])) {
                ready = false;
                u[b][p] = tprt__ld_volatile_u32(tprt__fn_word<DP>(slot[p], in_base + j));
              }
          }
          if (ready) break;
          if (g.abort && polls % 1024 == 0 && *g.abort) dead = true;
        }
        if (traced && !clock[2]) clock[2] = tprt__fn_clock();
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const int64_t k = k0 + (int64_t)SL * b, j = lane_v + TPRT_ROW_LANES * k;
          if (j >= h) continue;
          uint32_t ob[V];  // the sums' bits for the peers (two-shot)
#pragma unroll
          for (int i2 = 0; i2 < V; ++i2) {
            if (j + i2 >= h) continue;
#pragma unroll
            for (int p = 0; p < GM; ++p)
              if (p < members && p != me) v[b][i2][p] = dead ? 0.0f : tprt__fn_value<DP>(u[b][p], in_base + j + i2);
            float sum = tprt__members_sum<G>(v[b][i2], n, canonical);
            if (round_sum) sum = tprt__round_to<DR>(sum);  // sum_type = "residual": the chain's rounding
            if (two_shot) {
              uint32_t bits = s16 ? tprt__fn_bits<DR>(sum) : __float_as_uint(sum);
              if (bits == (s16 ? 0xFFFFu : TPRT__FN_EMPTY)) {  // never (a GPU's NaN is positive); were it,
                bits = s16 ? 0x7FFFu : 0x7FFFFFFFu;            // every member would add the same NaN
                sum = s16 ? tprt__fn_float<DR>(bits) : __uint_as_float(bits);
              }
              ob[i2] = bits;
            }
            const float out = tprt__round_to<DR>(__fadd_rn(sum, res[b][i2]));
            tprt__cuda_st(residual_out, DR, base + j + i2, out);
            part_sm[k * W + V * (t % PL) + i2] = out;
          }
          if (two_shot) {  // this row's sums into every peer's area 1, as row q of this member's
            for (int p = 0; p < n; ++p) {
              if (p == me) continue;
              uint32_t* to = tprt__fn_slot(g.data[p], slot_words, buf, 1, n, me);
              const int64_t at = q * rpe + j;
              if (s16 && V == 2)
                tprt__st_volatile_u32(to + at / 2, ob[0] | ob[1] << 16);
              else if (V == 2)  // two f32 sums, one 8-byte store
                tprt__st_volatile_v2(to + at, ob[0], ob[1]);
              else
#pragma unroll
                for (int i2 = 0; i2 < V; ++i2) {
                  if (j + i2 >= h) continue;
                  if (s16)
                    tprt__st_volatile_u16((unsigned short*)to + at + i2, (unsigned short)ob[i2]);
                  else
                    tprt__st_volatile_u32(to + at + i2, ob[i2]);
                }
            }
          }
        }
      }
    }
    __syncthreads();  // the block's values are in part_sm
    // The canonical row tree (tprt__cuda_row_tree): lane l accumulates columns l, l + 256, ... in
    // order; a warp's shuffles sum its 32 lanes; every block of the cluster receives the 8 warp sums
    // (st.async into its warp_sum, counted by its barrier; a block per row: its own stores) and
    // sums them in the tree's order.
    if (t < W) {
      const int64_t lane = (int64_t)c * W + t;
      float acc = 0.0f;
      for (int64_t k = 0; k < groups && lane + TPRT_ROW_LANES * k < h; ++k) {
        const float x = part_sm[k * W + t];
        acc = __fmaf_rn(x, x, acc);
      }
#pragma unroll
      for (int s = 32 / 2; s >= 1; s /= 2) acc = __fadd_rn(acc, __shfl_down_sync(0xFFFFFFFFu, acc, s));
      if (t % 32 == 0) {
        const int w = (int)(c * (W / 32) + t / 32);
        if (Shape::kCluster)
          for (unsigned r = 0; r < cs; ++r)
            tprt__fn_send(tprt__fn_smem(&warp_sum[par][w]), tprt__fn_smem(&bar[par]), r, acc);
        else
          warp_sum[par][w] = acc;
      }
    }
    if (Shape::kCluster)
      tprt__fn_wait(tprt__fn_smem(&bar[par]), (iter >> 1) & 1);
    else
      __syncthreads();
    const float* ws = warp_sum[par];
    const float total = __fadd_rn(__fadd_rn(__fadd_rn(ws[0], ws[4]), __fadd_rn(ws[2], ws[6])),
                                  __fadd_rn(__fadd_rn(ws[1], ws[5]), __fadd_rn(ws[3], ws[7])));
    static_assert(WARPS == 8, "the tree of the warp sums above is the shuffle tree of 8");
    const float r = tprt_rsqrtf(__fadd_rn(__fdiv_rn(total, hf), eps));
    if (traced && !clock[3]) clock[3] = tprt__fn_clock();
    // The norm of this thread's own columns (their values are its own stores to part_sm, so the
    // next row's stores cannot overtake another thread's reads).
    // In clusters the quantizing form keeps half as many loads in flight, which its quantization's
    // values need the registers of (6-8% faster on one H200 at 1-32 tokens; a block per row keeps
    // all of them, faster from 1024 rows).
    constexpr int NB = (Q && Shape::kCluster && Shape::NORM / V > 1 ? Shape::NORM / 2 : Shape::NORM) / V;
    // The row's scale columns past its blocks are padding, zero as tp.quantize leaves them.
    if (Q && qa.scale && c == 0 && t == 0)
      for (int64_t col = qa.row_blocks; col < qa.s1; ++col) qa.scale[row * qa.s1 + col] = 0;
    for (int64_t k0 = kv_first; k0 < groups; k0 += (int64_t)SL * NB) {
      float x[NB][V], w[NB][V];
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const int64_t k = k0 + (int64_t)SL * b, j = lane_v + TPRT_ROW_LANES * k;
#pragma unroll
        for (int i = 0; i < V; ++i)
          if (j + i < h) {
            x[b][i] = part_sm[k * W + V * (t % PL) + i];
            w[b][i] = tprt__cuda_ld(gamma, g_dtype, j + i);
          }
      }
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const int64_t k = k0 + (int64_t)SL * b, j = lane_v + TPRT_ROW_LANES * k;
        float y[V];
#pragma unroll
        for (int i = 0; i < V; ++i)
          if (j + i < h) {
            y[i] = __fmul_rn(__fmul_rn(x[b][i], r), w[b][i]);
            tprt__cuda_st(normed, DR, base + j + i, y[i]);
            y[i] = tprt__fn_as_stored<DR>(y[i]);
          }
        if (Q && j < h) tprt__fn_quantize<V>(qa, row, h, j, y, q_mul, q_sdec, q_sdec_mul);
      }
    }
  }
  // No block leaves while a block of its cluster may still store into its shared memory.
  if (Shape::kCluster) {
    tprt__fn_cluster_arrive();
    tprt__fn_cluster_wait();
  }
  if (traced) {
    const unsigned long long end = tprt__fn_clock();
    g.trace[0] += clock[1] - clock[0];
    g.trace[1] += clock[2] - clock[1];
    g.trace[2] += clock[3] - clock[2];
    g.trace[3] += end - clock[3];
    g.trace[4] += 1;
    if (g.trace[6]) g.trace[5] += clock[0] - g.trace[6];
    g.trace[6] = end;
  }
  // The scale tensor's padding rows (past the m rows), zero as tp.quantize leaves them: whole
  // 4-byte words (s1 is a multiple of 4 columns, the tensor 4-byte aligned), every thread of the grid.
  if (Q && qa.scale)
    for (int64_t w = (int64_t)blockIdx.x * T + t, words = (qa.srows - m) * qa.s1 / 4; w < words;
         w += (int64_t)gridDim.x * T)
      reinterpret_cast<uint32_t*>(qa.scale + m * qa.s1)[w] = 0u;
  // The last block of the call advances the counters; every block read them before adding itself.
  __syncthreads();
  if (t == 0) {
    __threadfence();
    if (atomicAdd(&g.counters[1], 1u) == gridDim.x - 1) {
      g.counters[1] = 0;
      *(volatile unsigned*)&g.counters[2] = (unsigned)(two_shot ? owned * wpr : (bytes + 3) / 4);
      *(volatile unsigned*)&g.counters[3] = (unsigned)buf;
      *(volatile unsigned*)&g.counters[4] = (unsigned)(two_shot ? m : 0);
      *(volatile unsigned*)&g.counters[5] = (unsigned)rpw;
      *(volatile unsigned*)&g.counters[0] = e;
    }
  }
}

// The largest column groups (of 256) a cluster's block keeps in shared memory (32 KiB).
#define TPRT__FN_BLOCK_GROUPS (TPRT_CUDA_FUSED_MAX_HIDDEN / TPRT_ROW_LANES / TPRT_CUDA_FUSED_CLUSTER)

// A call's arguments, checked by tprt_cuda_fused_allreduce_add_rmsnorm (fused_norm.cu), for the form
// that launches it: |grid| blocks of the form's shape in clusters of |cs|.
struct tprt__fn_call_t {
  const tprt_cuda_peer_group_t* g;
  int64_t grid;
  int cs;
  const tprt_tensor_t *partial, *residual, *gamma;
  tprt_tensor_t *normed, *residual_out;
  int64_t m, h;
  float eps;
  int canonical, round_sum;
  const tprt__fn_quant_t* q;
  cudaStream_t stream;
};

// The launch of |grid| blocks of |threads| in clusters of |cs| (a block per row: a plain launch, no
// cluster instruction runs), with shared memory for one block's share of a row (its lanes of every
// column group).
static cudaLaunchConfig_t tprt__fn_config(int64_t grid, int threads, int cs, int64_t h, cudaStream_t stream,
                                          cudaLaunchAttribute* attr) {
  const int64_t groups = (h + TPRT_ROW_LANES - 1) / TPRT_ROW_LANES;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)grid);
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = sizeof(float) * (size_t)groups * (TPRT_ROW_LANES / cs);
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = (unsigned)cs;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = tprt__fn_clustered(threads) ? 1 : 0;
  return cfg;
}

template <int DP, int DR, int G, int T, bool TWO, bool Q>
static cudaError_t tprt__fused_norm_launch(const tprt_cuda_peer_group_t* g, int64_t grid, int cs,
                                           const tprt_tensor_t* partial, const tprt_tensor_t* residual,
                                           const tprt_tensor_t* gamma, tprt_tensor_t* normed,
                                           tprt_tensor_t* residual_out, int64_t m, int64_t h, float eps, int canonical,
                                           int round_sum, const tprt__fn_quant_t& q, cudaStream_t stream) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = tprt__fn_config(grid, T, cs, h, stream, &attr);
  // Near the default limit (48 KiB with the static shared memory: a block per row, rows wider than
  // 8192), raise it; not a stream op.
  if (cfg.dynamicSmemBytes > 32 * 1024) {
    cudaError_t set = cudaFuncSetAttribute(tprt__fused_norm_kernel<DP, DR, G, T, TWO, Q>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes);
    if (set != cudaSuccess) return set;
  }
  return cudaLaunchKernelEx(&cfg, tprt__fused_norm_kernel<DP, DR, G, T, TWO, Q>, *g, (const void*)partial->data,
                            (const void*)residual->data, (const void*)gamma->data, (int)gamma->dtype, normed->data,
                            residual_out->data, m, h, (float)h, eps, canonical, round_sum, q);
}

// The members' compile-time count for a call of shape T, two-shot TWO and form Q.
template <int DP, int DR, int T, bool TWO, bool Q>
static cudaError_t tprt__fused_norm_groups(const tprt__fn_call_t& c) {
#define TPRT__FN_ARGS                                                                                        \
  c.g, c.grid, c.cs, c.partial, c.residual, c.gamma, c.normed, c.residual_out, c.m, c.h, c.eps, c.canonical, \
      c.round_sum, *c.q, c.stream
  switch (c.g->group) {
    case 2:
      return tprt__fused_norm_launch<DP, DR, 2, T, TWO, Q>(TPRT__FN_ARGS);
    case 4:
      return tprt__fused_norm_launch<DP, DR, 4, T, TWO, Q>(TPRT__FN_ARGS);
    case 8:
      return tprt__fused_norm_launch<DP, DR, 8, T, TWO, Q>(TPRT__FN_ARGS);
    default:
      return tprt__fused_norm_launch<DP, DR, 0, T, TWO, Q>(TPRT__FN_ARGS);
  }
#undef TPRT__FN_ARGS
}

// One form of the kernel: launch shape T (a block per row or clusters), two-shot TWO, quantizing Q.
// Each form's instantiations (every dtype pair and group size: 36 kernels) compile in a translation
// unit of their own (fused_norm_form.cu, built once per form with TPRT__FN_FORM_T/_TWO/_Q), so that
// the 8 forms compile side by side; the other files see only the declarations below.
template <int T, bool TWO, bool Q>
cudaError_t tprt__fn_form_launch(const tprt__fn_call_t& c) {
  cudaError_t launched = cudaSuccess;
  tprt__cuda_float_dispatch(c.partial->dtype, [&](auto dp) {
    tprt__cuda_float_dispatch(c.residual->dtype, [&](auto dr) {
      launched = tprt__fused_norm_groups<decltype(dp)::value, decltype(dr)::value, T, TWO, Q>(c);
    });
  });
  return launched;
}

// The fewest resident blocks of the form's instantiations a call may pick (their registers differ
// with the group and dtypes), in clusters of |cs|, with the widest row's shared memory.
template <int T, bool TWO, bool Q>
cudaError_t tprt__fn_form_resident(int sms, int cs, int64_t widest, int* fewest) {
  const void* kernels[] = {(const void*)tprt__fused_norm_kernel<TPRT_DTYPE_F32, TPRT_DTYPE_F32, 0, T, TWO, Q>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_F32, TPRT_DTYPE_F32, 8, T, TWO, Q>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 0, T, TWO, Q>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_BF16, TPRT_DTYPE_BF16, 8, T, TWO, Q>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_F32, TPRT_DTYPE_BF16, 8, T, TWO, Q>,
                           (const void*)tprt__fused_norm_kernel<TPRT_DTYPE_BF16, TPRT_DTYPE_F32, 8, T, TWO, Q>};
  for (const void* k : kernels) {
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = tprt__fn_config((sms + cs - 1) / cs * cs, T, cs, widest, 0, &attr);
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes);
    int clusters = 0, per_sm = 0;
    if (e == cudaSuccess && tprt__fn_clustered(T))
      e = cudaOccupancyMaxActiveClusters(&clusters, k, &cfg);
    else if (e == cudaSuccess) {  // launched without a cluster
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, T, cfg.dynamicSmemBytes);
      clusters = per_sm * sms;
    }
    if (e != cudaSuccess) return e;
    if (clusters * cs < *fewest) *fewest = clusters * cs;
  }
  return cudaSuccess;
}

// The 8 forms (shape x two-shot x quantizing), each instantiated by one file of forms/ only.
#define TPRT__FN_FORMS(X)                                                                                   \
  X(TPRT_ROW_LANES, false, false)                                                                           \
  X(TPRT_ROW_LANES, true, false) X(TPRT__FN_ROW_THREADS, false, false) X(TPRT__FN_ROW_THREADS, true, false) \
      X(TPRT_ROW_LANES, false, true) X(TPRT_ROW_LANES, true, true) X(TPRT__FN_ROW_THREADS, false, true)     \
          X(TPRT__FN_ROW_THREADS, true, true)
#define TPRT__FN_EXTERN(T, TWO, Q)                                                     \
  extern template cudaError_t tprt__fn_form_launch<T, TWO, Q>(const tprt__fn_call_t&); \
  extern template cudaError_t tprt__fn_form_resident<T, TWO, Q>(int, int, int64_t, int*);
TPRT__FN_FORMS(TPRT__FN_EXTERN)
#undef TPRT__FN_EXTERN
// What a file of forms/ holds: one form's instantiations.
#define TPRT__FN_INSTANTIATE(T, TWO, Q)                                         \
  template cudaError_t tprt__fn_form_launch<T, TWO, Q>(const tprt__fn_call_t&); \
  template cudaError_t tprt__fn_form_resident<T, TWO, Q>(int, int, int64_t, int*);
