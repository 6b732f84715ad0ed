// The CUDA backend's collectives for ranks that share GPUs (backend_cuda_impl.h). With tpc-run
// --share-gpus (TPRT_CUDA_SHARE_DEVICES=1) a world of threads may have more ranks than the machine
// has GPUs: rank i runs on device i % GPUs (backend_cuda.c). NCCL refuses two ranks of one
// communicator on one GPU, so every collective group of such a world is local: the ranks are
// threads of this process and read each other's device buffers directly. One collective, on the
// stream it issues on (tprt__r.issue: the compute stream, or the comm stream under a start):
//
//   1. publish: the rank records its `ready` event after the source its peers will read (its
//      input, or a packed copy in its scratch) and all-gathers {source, ready, done, device} over
//      the CPU world; its stream then waits on every peer's `ready`;
//   2. collect: device-to-device copies (peer copies between GPUs) of each member's block into the
//      rank's own staging buffer [group][block], on its stream;
//   3. finish: the rank records `done` after those reads; a CPU barrier of the group (every peer
//      has queued its waits on this rank's `ready`, which may now be recorded again, and has
//      recorded its `done`); its stream waits on every peer's `done` (past that point no peer reads
//      its source any more: later work may overwrite it, and its buffers may be freed once the
//      stream drains); a second barrier (every peer has queued its waits on this rank's `done`, so
//      the next collective may record it again and rank_end may destroy both events);
//   4. the output is written from the staging buffer only after step 3, so an in-place all-reduce
//      (out == in) never overwrites bytes that a peer has still to read.
// In copy-engine worlds (async collectives only) the comm stream runs copies alone: the caller's own
// rows (a copy within one GPU is an SM kernel; or, with TPRT_CUDA_CE_OWN_FROM_PEER, pulled from a
// peer's output) and a reduce-scatter's sum are left to the wait, on the compute stream
// (backend_cuda_impl.h, tprt__cuda_future_t).
//
// No deadlock: every stream wait names an event record that was queued before the wait (the
// rendezvous orders them on the host), so each item of a stream depends only on items queued
// earlier and the dependencies cannot form a cycle; no kernel spins on another rank (there is no
// NCCL kernel), so ranks on one GPU never wait for a co-resident kernel. A rank that fails leaves
// its peers in a CPU rendezvous, which returns ABORTED; since a peer may then still have queued
// (or be about to queue) reads of the failed rank's buffers, or waits on its events, a shared
// rank of a failed world frees no device buffer a peer may read and destroys no event: they are
// left to the process's end (tprt__local_may_free, tprt__local_rank_end).
//
// The staging and the sums are the NCCL path's: canonical reductions run tprt_cuda_reduce_staged
// on the same [group][n] staging (its tree sums each element alone, so one phase gives the NCCL
// path's two-phase bits; an async reduce-scatter of a copy-engine world sums at its wait, on the
// compute stream), the CPU backend's bits; order "any" sums in increasing group rank, the
// CPU backend's "any" (there is no NCCL ring order to reproduce). Cost: three rendezvous of the
// group's threads per collective and a staging copy of every member's block (an all-reduce reads g
// times its input). CUDA graphs: a rank's stream waits on events of its peers' streams, which
// per-rank captures cannot express, so the world captures one graph (backend_cuda_graph.c,
// "CUDA graphs"); under capture the copies avoid what a graph cannot hold (a copy batch, a 3D peer copy).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_impl.h"
#include "tprt_params.h"

// What a member learns of its group in step 1.
typedef struct {
  int size, index;
  const char* src[TPRT_MAX_WORLD_SIZE];   // each member's source
  char* dst[TPRT_MAX_WORLD_SIZE];         // each member's destination (its output or staging)
  cudaEvent_t done[TPRT_MAX_WORLD_SIZE];  // each member's `done` event
  int device[TPRT_MAX_WORLD_SIZE];        // each member's GPU
} tprt__local_peers_t;

// The words a member publishes: source, ready event, done event, device, destination.
enum { TPRT__LOCAL_WORDS = 5 };

tprt_status_t tprt__local_rank_begin(int num_devices) {
  TPRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&tprt__r.local_ready, cudaEventDisableTiming));
  TPRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&tprt__r.local_done, cudaEventDisableTiming));
  // Direct peer copies where the GPUs allow them; several ranks of one GPU may enable the same
  // peer, and the later ones get cudaErrorPeerAccessAlreadyEnabled (cleared, as every failure
  // here: copies without peer access are staged through the host by CUDA).
  for (int d = 0; d < num_devices; ++d) {
    int can = 0;
    if (d == tprt__r.device || cudaDeviceCanAccessPeer(&can, tprt__r.device, d) != cudaSuccess || !can) continue;
    if (cudaDeviceEnablePeerAccess(d, 0) != cudaSuccess) (void)cudaGetLastError();
  }
  (void)cudaGetLastError();
  return NULL;
}

void tprt__local_rank_end(bool failed) {
  if (!failed) {
    if (tprt__r.local_ready) cudaEventDestroy(tprt__r.local_ready);
    if (tprt__r.local_done) cudaEventDestroy(tprt__r.local_done);
  }
  tprt__r.local_ready = tprt__r.local_done = NULL;
}

bool tprt__local_may_free(void) {
  // Every peer read of this rank's buffers is queued ahead of a wait of its own streams (step 3).
  cudaStreamSynchronize(tprt__r.stream);
  cudaStreamSynchronize(tprt__r.comm_stream);
  tprt_status_t failed = tprt__r.rank ? tprt_rank_check_abort(tprt__r.rank) : NULL;
  bool ok = failed == NULL;
  tprt_status_free(failed);
  return ok;
}

tprt_status_t tprt__exchange_words(tprt_rank_t* rank, uint32_t mask, const int64_t* mine, int words, int64_t* all) {
  int64_t dm[1] = {words}, da[1] = {(int64_t)tprt_rank_group_size(rank, mask) * words};
  tprt_tensor_t in = tprt_tensor_make((void*)mine, TPRT_DTYPE_I64, 1, dm);
  tprt_tensor_t gathered = tprt_tensor_make(all, TPRT_DTYPE_I64, 1, da);
  return tprt_all_gather(rank, mask, &in, &gathered, 0);
}

// Step 1a: marks the end of the work that writes the caller's source (queued so far on
// tprt__r.issue): its peers' streams wait on it before they read.
static tprt_status_t tprt__local_ready(const tprt__cuda_comm_t* c) {
  if (c->size > 1) TPRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(tprt__r.local_ready, tprt__r.issue));
  return NULL;
}

// Step 1b: publishes |src| (the bytes the peers read, marked by tprt__local_ready) and learns the
// peers' sources; the issuing stream then waits until every peer's source is written.
static tprt_status_t tprt__local_publish(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const void* src, char* dst,
                                         tprt__local_peers_t* out) {
  out->size = c->size;
  out->index = c->index;
  out->src[c->index] = src;
  out->dst[c->index] = dst;
  out->done[c->index] = tprt__r.local_done;
  out->device[c->index] = tprt__r.device;
  if (c->size == 1) return NULL;
  int64_t mine[TPRT__LOCAL_WORDS] = {(int64_t)(uintptr_t)src, (int64_t)(uintptr_t)tprt__r.local_ready,
                                     (int64_t)(uintptr_t)tprt__r.local_done, tprt__r.device, (int64_t)(uintptr_t)dst};
  int64_t all[TPRT_MAX_WORLD_SIZE * TPRT__LOCAL_WORDS];
  TPRT__TRY(tprt__exchange_words(rank, c->mask, mine, TPRT__LOCAL_WORDS, all));
  for (int p = 0; p < c->size; ++p) {
    const int64_t* w = all + (size_t)p * TPRT__LOCAL_WORDS;
    out->src[p] = (const char*)(uintptr_t)w[0];
    out->done[p] = (cudaEvent_t)(uintptr_t)w[2];
    out->device[p] = (int)w[3];
    out->dst[p] = (char*)(uintptr_t)w[4];
    if (p != c->index) TPRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(tprt__r.issue, (cudaEvent_t)(uintptr_t)w[1], 0));
  }
  return NULL;
}

// What a collective reads of each member's source and where it puts it: for o < outer, |bytes| at
// offset + o·src_row of member p's source go to dst + p·dst_member + o·dst_row.
typedef struct {
  size_t offset, bytes;
  int64_t outer;
  size_t src_row, dst_member, dst_row;
} tprt__local_rows_t;

// The plain layout: |bytes| at |offset| of member p's source to block p of |dst|.
static tprt__local_rows_t tprt__local_blocks(size_t offset, size_t bytes) {
  return (tprt__local_rows_t){
      .offset = offset, .bytes = bytes, .outer = 1, .src_row = bytes, .dst_member = bytes, .dst_row = bytes};
}

// Step 2: the copies of |l| from every member (but the caller when |skip_own|) into |dst|, on the
// issuing stream; with |from_peer| instead only the caller's own rows, from the same place in the
// next member's destination. Members are read in turn starting after the caller, so that at any
// moment each member's source has one reader, not every member at once. Copy-engine worlds issue
// the peer copies as one batch with the hint to overlap compute (cudaMemcpyBatchAsync,
// cudaMemcpyFlagPreferOverlapWithCompute): the copy engines run them without an SM. A CUDA graph
// has no node for a batch: under capture they are peer copies one by one (the copy engines too).
static tprt_status_t tprt__local_collect(const tprt__local_peers_t* peers, const tprt__local_rows_t* l, bool skip_own,
                                         bool from_peer, char* dst) {
  if (!l->bytes || !l->outer) return NULL;
  int g = peers->size;
  size_t n = (size_t)g * (size_t)l->outer;
  const bool batch = tprt__r.ce && !tprt__r.capturing;
  void** to = batch ? malloc(n * sizeof *to) : NULL;
  const void** from = batch ? malloc(n * sizeof *from) : NULL;
  size_t* sizes = batch ? malloc(n * sizeof *sizes) : NULL;
  if (batch && (!to || !from || !sizes)) {
    free(to);
    free(from);
    free(sizes);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory (a collective's copy list)");
  }
  size_t k = 0;
  cudaError_t e = cudaSuccess;
  for (int q = skip_own || from_peer ? 0 : -1; q < (from_peer ? 1 : g - 1) && e == cudaSuccess; ++q) {
    int p = (peers->index + 1 + q) % g;  // q = -1: the caller itself, first
    for (int64_t o = 0; o < l->outer && e == cudaSuccess; ++o) {
      size_t at = (size_t)(from_peer ? peers->index : p) * l->dst_member + (size_t)o * l->dst_row;
      const char* src = from_peer ? peers->dst[p] + at : peers->src[p] + l->offset + (size_t)o * l->src_row;
      char* d = dst + at;
      if (batch) {
        to[k] = d;
        from[k] = src;
        sizes[k++] = l->bytes;
      } else if (peers->device[p] == tprt__r.device) {
        e = cudaMemcpyAsync(d, src, l->bytes, cudaMemcpyDeviceToDevice, tprt__r.issue);
      } else {
        e = cudaMemcpyPeerAsync(d, tprt__r.device, src, peers->device[p], l->bytes, tprt__r.issue);
      }
    }
  }
  if (batch && e == cudaSuccess && k) {
    struct cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t first = 0;
    e = cudaMemcpyBatchAsync(to, from, sizes, k, &attr, &first, 1, tprt__r.issue);
  }
  free(to);
  free(from);
  free(sizes);
  if (e != cudaSuccess)
    return tprt__cuda_make_status(e, batch ? "a collective's peer copies (cudaMemcpyBatchAsync)" : "a collective's peer copies",
                                  __FILE__, __LINE__);
  return NULL;
}

// Step 3: after it, the issuing stream has every peer's reads of the caller's source behind it, and
// no peer names the caller's events any more.
static tprt_status_t tprt__local_finish(tprt_rank_t* rank, const tprt__cuda_comm_t* c,
                                        const tprt__local_peers_t* peers) {
  if (c->size == 1) return NULL;
  TPRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(tprt__r.local_done, tprt__r.issue));
  TPRT__TRY(tprt_barrier(rank, c->mask));  // every member has recorded its `done`
  for (int p = 0; p < c->size; ++p)
    if (p != c->index) TPRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(tprt__r.issue, peers->done[p], 0));
  return tprt_barrier(rank, c->mask);  // every member has queued its waits
}

// Where the caller's own rows of a gather come from.
typedef enum {
  TPRT__OWN_COPY,       // copied with the peers' rows (within the GPU: an SM copy on the stream)
  TPRT__OWN_SKIP,       // left out: the caller's future handles them at its wait
  TPRT__OWN_FROM_PEER,  // pulled from the next member's copy of them, once every member has its rows
} tprt__local_own_t;

// Steps 1-3 for a source |src| of the caller's, laid out as |l| says, into |dst|. With
// TPRT__OWN_FROM_PEER (TPRT_CUDA_CE_OWN_FROM_PEER, a copy-engine all-gather into its output), after
// step 3 every member holds its peers' rows, the caller's included, so the caller pulls its own rows
// from the next member's output over the link, and a second step 3 keeps that output unchanged
// until the pull is done: one more block per member on the link, no copy within the GPU (an SM
// copy, whichever API issues it).
static tprt_status_t tprt__local_gather_rows(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const void* src,
                                             const tprt__local_rows_t* l, char* dst, tprt__local_own_t own) {
  if (c->size == 1 && own == TPRT__OWN_FROM_PEER) own = TPRT__OWN_COPY;
  TPRT__TRY(tprt__local_ready(c));
  tprt__local_peers_t peers;
  TPRT__TRY(tprt__local_publish(rank, c, src, dst, &peers));
  TPRT__TRY(tprt__local_collect(&peers, l, own != TPRT__OWN_COPY, false, dst));
  TPRT__TRY(tprt__local_finish(rank, c, &peers));
  if (own != TPRT__OWN_FROM_PEER) return NULL;
  TPRT__TRY(tprt__local_collect(&peers, l, true, true, dst));
  return tprt__local_finish(rank, c, &peers);
}

// The same with one row: block p of |staged| receives |bytes| at |offset| of member p's source.
static tprt_status_t tprt__local_gather(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const void* src, size_t offset,
                                        size_t bytes, char* staged) {
  tprt__local_rows_t l = tprt__local_blocks(offset, bytes);
  return tprt__local_gather_rows(rank, c, src, &l, staged, TPRT__OWN_COPY);
}

tprt_status_t tprt__local_all_reduce(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                     tprt_tensor_t* out, tprt_order_t order) {
  // Every member's whole input, staged as [g][n]; each member sums all n elements itself.
  size_t bytes = tprt_tensor_bytes(in);
  char* staged = NULL;
  TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &staged));
  TPRT__TRY(tprt__local_gather(rank, c, in->data, 0, bytes, staged));
  return tprt_cuda_reduce_staged(staged, c->size, in->dtype, tprt_tensor_numel(in), out->data, out->dtype,
                                 order == TPRT_ORDER_CANONICAL, tprt__r.issue);
}

tprt_status_t tprt__local_all_reduce_max(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                         tprt_tensor_t* out) {
  // As the sum: every member's whole input staged as [g][n], each member takes the maximum itself.
  size_t bytes = tprt_tensor_bytes(in);
  char* staged = NULL;
  TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &staged));
  TPRT__TRY(tprt__local_gather(rank, c, in->data, 0, bytes, staged));
  return tprt_cuda_max_staged(staged, c->size, in->dtype, tprt_tensor_numel(in), out->data, tprt__r.issue);
}

tprt_status_t tprt__local_reduce_scatter(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                         tprt_tensor_t* out, int dim, tprt_order_t order) {
  // Scratch regions: [the packed input (leading dims only), which the peers read][the staged
  // slices [g][n/g], which only the caller writes]. Reserved before publishing: a growth would
  // free bytes that the peers are about to read. Copy-engine worlds read a few leading rows one by
  // one instead of packing (copies cost no SMs), and an async one stages into its future's buffer
  // and leaves the sum to the wait (backend_cuda_impl.h).
  int64_t outer;
  size_t row, bytes = tprt_tensor_bytes(in), slice = bytes / (size_t)c->size;
  tprt__split_at(in, dim, &outer, &row);
  bool rows = tprt__r.ce && outer <= 64;  // else packed on the comm stream (an SM kernel)
  bool pack = !rows && outer != 1 && bytes > 0;
  size_t packed_bytes = pack ? tprt__align_up(bytes) : 0, need = packed_bytes + (size_t)c->size * slice;
  tprt__cuda_future_t* f = tprt__r.ce ? tprt__r.starting : NULL;
  char* buf = NULL;
  if (f) {
    TPRT__TRY(tprt__buffer_reserve(&f->staging, need, "growing an async reduce-scatter's staging buffer"));
    buf = f->staging.ptr;
  } else {
    TPRT__TRY(tprt__scratch(need, &buf));
  }
  const char* src = in->data;
  if (pack) {
    TPRT__TRY(tprt__pack_slices(in->data, buf, c->size, outer, row));
    src = buf;
  }
  char* staged = buf + packed_bytes;
  size_t part = row / (size_t)c->size;  // of one leading row, per member
  tprt__local_rows_t l = rows ? (tprt__local_rows_t){.offset = (size_t)c->index * part,
                                                     .bytes = part,
                                                     .outer = outer,
                                                     .src_row = row,
                                                     .dst_member = slice,
                                                     .dst_row = part}
                              : tprt__local_blocks((size_t)c->index * slice, slice);
  TPRT__TRY(tprt__local_gather_rows(rank, c, src, &l, staged, f ? TPRT__OWN_SKIP : TPRT__OWN_COPY));
  int64_t n = tprt_tensor_numel(in) / c->size;
  bool canonical = order == TPRT_ORDER_CANONICAL;
  if (f) {  // the caller's own slice is read in place by the sum at the wait
    size_t e = (size_t)tprt_dtype_bytes(in->dtype, 1);
    f->sum.own_view = (tprt_cuda_staged_own_t){
        .member = c->index, .src = src + l.offset, .cols = (int64_t)(l.bytes / e), .pitch = (int64_t)(l.src_row / e)};
    f->sum.pending = true;
    f->sum.canonical = canonical;
    f->sum.staged = staged;
    f->sum.group = c->size;
    f->sum.in_dtype = in->dtype;
    f->sum.out_dtype = out->dtype;
    f->sum.n = n;
    f->sum.out = out->data;
    return NULL;
  }
  return tprt_cuda_reduce_staged(staged, c->size, in->dtype, n, out->data, out->dtype, canonical, tprt__r.issue);
}

tprt_status_t tprt__local_all_gather(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                     tprt_tensor_t* out, int dim) {
  // Staged as [g][in] (never straight into |out| when it may hold the caller's input in place).
  int64_t outer;
  size_t row, bytes = tprt_tensor_bytes(in);
  tprt__split_at(in, dim, &outer, &row);
  // Disjoint from the input: straight into |out|, row by row of the leading dims (a blocked weight
  // has a few: one copy per member and row) in copy-engine worlds, where copies cost no SMs.
  const char *o = out->data, *i = in->data;
  bool disjoint = o + (size_t)c->size * bytes <= i || i + bytes <= o;
  if (disjoint && (outer == 1 || (tprt__r.ce && outer <= 64))) {
    tprt__local_rows_t l = {
        .offset = 0, .bytes = row, .outer = outer, .src_row = row, .dst_member = row, .dst_row = (size_t)c->size * row};
    // Copy-engine worlds: the caller's own rows are pulled from a peer (TPRT_CUDA_CE_OWN_FROM_PEER),
    // or copied at the wait, on the compute stream (an SM copy).
    tprt__cuda_future_t* f = tprt__r.ce ? tprt__r.starting : NULL;
    if (f && tprt_param_cuda_ce_own_from_peer())
      return tprt__local_gather_rows(rank, c, in->data, &l, out->data, TPRT__OWN_FROM_PEER);
    if (f && row && outer) {
      f->own.pending = true;
      f->own.what = "all_gather_own";
      f->own.src = in->data;
      f->own.dst = (char*)out->data + (size_t)c->index * row;
      f->own.bytes = f->own.src_row = row;
      f->own.dst_row = (size_t)c->size * row;
      f->own.outer = outer;
    }
    return tprt__local_gather_rows(rank, c, in->data, &l, out->data, f ? TPRT__OWN_SKIP : TPRT__OWN_COPY);
  }
  char* staged = NULL;
  TPRT__TRY(tprt__scratch((size_t)c->size * bytes, &staged));
  TPRT__TRY(tprt__local_gather(rank, c, in->data, 0, bytes, staged));
  if (outer != 1) return tprt__concat_blocks(staged, bytes, c->size, outer, row, out->data);
  if (bytes)
    TPRT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out->data, staged, (size_t)c->size * bytes, cudaMemcpyDeviceToDevice, tprt__r.issue));
  return NULL;
}

tprt_status_t tprt__local_exchange(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const char* send, char* recv,
                                   size_t slice) {
  // The all-to-all's exchange (its packing and unpacking are the NCCL path's): block p of |recv|
  // is the block at this member's index in member p's |send|.
  return tprt__local_gather(rank, c, send, (size_t)c->index * slice, slice, recv);
}

tprt_status_t tprt__local_all_to_all(tprt_rank_t* rank, const tprt__cuda_comm_t* c, const tprt_tensor_t* in,
                                     tprt_tensor_t* out, int split_dim) {
  // in = [outer, S, inner] around split_dim: the caller's slice of member p's input is |outer|
  // rows of (S/g)·inner elements at column index·(S/g)·inner, pitch S·inner; it lands as block p
  // of |out| (the concat dim is outermost), rows of its width back to back.
  int g = c->size;
  int64_t outer;
  size_t row;
  tprt__split_at(in, split_dim, &outer, &row);
  size_t width = row / (size_t)g, block = width * (size_t)outer;
  const char *o = out->data, *i = in->data;
  if (!(o + (size_t)g * block <= i || i + tprt_tensor_bytes(in) <= o))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "all_to_all: the output overlaps the input");
  if (!block) return NULL;
  // Copy-engine worlds leave the caller's own piece to the wait (an SM copy, on the compute stream).
  tprt__cuda_future_t* f = tprt__r.ce ? tprt__r.starting : NULL;
  if (f) {
    f->own.pending = true;
    f->own.what = "all_to_all_own";
    f->own.src = i + (size_t)c->index * width;
    f->own.dst = (char*)out->data + (size_t)c->index * block;
    f->own.bytes = f->own.dst_row = width;
    f->own.src_row = row;
    f->own.outer = outer;
  }
  TPRT__TRY(tprt__local_ready(c));
  tprt__local_peers_t peers;
  TPRT__TRY(tprt__local_publish(rank, c, in->data, out->data, &peers));
  cudaError_t e = cudaSuccess;
  for (int q = f ? 0 : -1; q < g - 1 && e == cudaSuccess; ++q) {
    int p = (peers.index + 1 + q) % g;  // q = -1: the caller itself, first
    struct cudaMemcpy3DPeerParms m;
    memset(&m, 0, sizeof m);
    m.srcPtr = make_cudaPitchedPtr((void*)(peers.src[p] + (size_t)c->index * width), row, width, (size_t)outer);
    m.srcDevice = peers.device[p];
    m.dstPtr = make_cudaPitchedPtr((char*)out->data + (size_t)p * block, width, width, (size_t)outer);
    m.dstDevice = tprt__r.device;
    m.extent = make_cudaExtent(width, (size_t)outer, 1);
    // A CUDA graph takes no 3D peer copy: under capture the same rows as a 2D copy (unified
    // addressing finds both devices).
    e = tprt__r.capturing ? cudaMemcpy2DAsync(m.dstPtr.ptr, width, m.srcPtr.ptr, row, width, (size_t)outer,
                                              cudaMemcpyDefault, tprt__r.issue)
                          : cudaMemcpy3DPeerAsync(&m, tprt__r.issue);
  }
  if (e != cudaSuccess)
    return tprt__cuda_make_status(e, "an all-to-all's pitched peer copies", __FILE__, __LINE__);
  return tprt__local_finish(rank, c, &peers);
}

tprt_status_t tprt__local_at_wait(tprt__cuda_future_t* f) {
  if (!f->own.pending && !f->sum.pending) return NULL;
  // A copy-engine collective's own rows and sum (backend_cuda_impl.h). The next start that takes
  // this future forks the comm stream after them, so its staging is not overwritten before it is read.
  const char* what = f->sum.pending ? "reduce_scatter_sum" : f->own.what;
  int t = tprt__timeline_begin(tprt__r.stream, TPRT__IV_COLLECTIVE, what,
                               f->sum.pending ? f->sum.n : (int64_t)(f->own.bytes * (size_t)f->own.outer));
  cudaError_t e = cudaSuccess;
  if (f->own.pending)  // |outer| rows of |bytes| (one row: a plain copy)
    e = cudaMemcpy2DAsync(f->own.dst, f->own.dst_row, f->own.src, f->own.src_row, f->own.bytes, (size_t)f->own.outer,
                          cudaMemcpyDeviceToDevice, tprt__r.stream);
  tprt_status_t s = NULL;
  if (e != cudaSuccess)
    s = tprt__cuda_make_status(e, "an async collective's own rows (cudaMemcpy2DAsync)", __FILE__, __LINE__);
  else if (f->sum.pending)
    s = tprt_cuda_reduce_staged_own(f->sum.staged, f->sum.group, f->sum.in_dtype, f->sum.n, f->sum.out,
                                    f->sum.out_dtype, f->sum.canonical, f->sum.own_view, tprt__r.stream);
  f->own.pending = f->sum.pending = false;
  tprt__timeline_end(tprt__r.stream, t);
  return s;
}
