// Peer-copy bandwidth of the copy engines, the transport of the CUDA backend's copy-engine
// collectives (TPRT_CUDA_COPY_ENGINE): GPU 0 pulls B bytes from each of its peers with
// cudaMemcpyPeerAsync, the copies issued back to back on one stream, or each on its own stream,
// and the same while a bf16 GEMM-like load (a long kernel on every SM) runs on GPU 0; then a copy
// within GPU 0 three ways, with and without that load.
//
// Build and run (a machine with 2+ GPUs): nvcc -O2 -Iruntime -Ikernels/cpu -o peer_copy tools/bench/peer_copy.cu
//   && ./peer_copy [MiB]
// Prints GB/s received by GPU 0 for each way.
#include "bench_cuda.cuh"

#define CHECK(x) TPC_BENCH_CUDA(x)

// Keeps every SM busy with FMAs for |iters| iterations (a stand-in for a GEMM's SM use).
__global__ void busy(float* out, int iters) {
  float a = threadIdx.x, b = 1.0001f;
  for (int i = 0; i < iters; ++i) a = fmaf(a, b, 0.5f);
  if (a == 12345.0f) out[0] = a;
}

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 256, bytes = mib << 20;
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) {
    printf("peer_copy: needs 2 GPUs, found %d\n", n);
    return 0;
  }
  void* src[16];
  for (int d = 1; d < n; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaMalloc(&src[d], bytes));
    CHECK(cudaMemset(src[d], d, bytes));
  }
  CHECK(cudaSetDevice(0));
  for (int d = 1; d < n; ++d) {
    cudaError_t e = cudaDeviceEnablePeerAccess(d, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CHECK(e);
  }
  char* dst;
  float* sink;
  CHECK(cudaMalloc(&dst, bytes * (size_t)n));
  CHECK(cudaMalloc(&sink, 4));
  cudaStream_t s[16], load;
  for (int d = 0; d < n; ++d) CHECK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&load, cudaStreamNonBlocking));
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int peers = 1; peers < n; ++peers)
    for (int way = 0; way < 4; ++way) {  // one stream / a stream each; without / with the SM load
      bool each = way & 1, loaded = way & 2;
      float best = 1e30f;
      for (int rep = 0; rep < 5; ++rep) {
        if (loaded) busy<<<sms * 4, 256, 0, load>>>(sink, 1 << 22);
        CHECK(cudaEventRecord(t0, s[0]));
        for (int p = 1; p <= peers; ++p) {
          cudaStream_t st = each ? s[p] : s[0];
          if (each) CHECK(cudaStreamWaitEvent(st, t0, 0));
          CHECK(cudaMemcpyPeerAsync(dst + (size_t)p * bytes, 0, src[p], p, bytes, st));
          if (each) {
            cudaEvent_t ev;
            CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            CHECK(cudaEventRecord(ev, st));
            CHECK(cudaStreamWaitEvent(s[0], ev, 0));
            CHECK(cudaEventDestroy(ev));
          }
        }
        CHECK(cudaEventRecord(t1, s[0]));
        CHECK(cudaDeviceSynchronize());
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, t0, t1));
        if (ms < best) best = ms;
      }
      printf("peer_copy: GPU 0 pulls %zu MiB from each of %d peer(s), %s%s: %.1f GB/s\n", mib, peers,
             each ? "a stream each" : "one stream", loaded ? ", SMs busy" : "", (double)bytes * peers / best / 1e6);
    }
  // A copy within GPU 0 (a rank's own block of a gather): issued on GPU 0's stream (an SM kernel
  // that waits for the busy SMs), as a batch with the overlap hint, or on GPU 1's stream (its copy
  // engine reads and writes GPU 0's memory over the link).
  char* own_src;
  CHECK(cudaMalloc(&own_src, bytes));
  CHECK(cudaSetDevice(1));
  cudaStream_t s1;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  cudaError_t pe = cudaDeviceEnablePeerAccess(0, 0);
  if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled) CHECK(pe);
  cudaEvent_t v0, v1, u0, u1;  // on GPU 1, on GPU 0
  CHECK(cudaEventCreate(&v0));
  CHECK(cudaEventCreate(&v1));
  CHECK(cudaSetDevice(0));
  CHECK(cudaEventCreate(&u0));
  CHECK(cudaEventCreate(&u1));
  for (int way = 0; way < 6; ++way) {
    int how = way % 3;
    bool loaded = way >= 3;
    float best = 1e30f, busy_ms = 0;
    for (int rep = 0; rep < 5; ++rep) {
      CHECK(cudaSetDevice(0));
      CHECK(cudaEventRecord(t0, load));
      if (loaded) busy<<<sms * 4, 256, 0, load>>>(sink, 1 << 20);
      CHECK(cudaEventRecord(t1, load));
      cudaStream_t st = how == 2 ? s1 : s[0];
      if (how == 2) CHECK(cudaSetDevice(1));
      cudaEvent_t e0 = how == 2 ? v0 : u0, e1 = how == 2 ? v1 : u1;
      CHECK(cudaEventRecord(e0, st));
      if (how == 0) {
        CHECK(cudaMemcpyAsync(dst, own_src, bytes, cudaMemcpyDeviceToDevice, st));
      } else if (how == 1) {
        struct cudaMemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
        void* to[1] = {dst};
        const void* from[1] = {own_src};
        size_t sizes[1] = {bytes}, first = 0;
        CHECK(cudaMemcpyBatchAsync(to, from, sizes, 1, &attr, &first, 1, st));
      } else {
        CHECK(cudaMemcpyAsync(dst, own_src, bytes, cudaMemcpyDeviceToDevice, st));
      }
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaSetDevice(0));
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaSetDevice(1));
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaSetDevice(0));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (ms < best) best = ms;
      CHECK(cudaEventElapsedTime(&busy_ms, t0, t1));
    }
    static const char* kHow[] = {"cudaMemcpyAsync on GPU 0", "a batch with the overlap hint on GPU 0",
                                 "cudaMemcpyAsync on GPU 1's stream"};
    printf("own_copy: %zu MiB within GPU 0, %s%s: %.3f ms (%.1f GB/s)%s\n", mib, kHow[how],
           loaded ? ", SMs busy" : "", best, (double)bytes / best / 1e6, loaded ? "" : "");
    if (loaded) printf("own_copy:   (the busy kernel ran %.3f ms)\n", busy_ms);
  }
  return 0;
}
