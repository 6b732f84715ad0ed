// Peer-copy bandwidth of the copy engines, the transport of the CUDA backend's copy-engine
// collectives (TPRT_CUDA_COPY_ENGINE): GPU 0 pulls B bytes from each of its peers with
// cudaMemcpyPeerAsync, the copies issued back to back on one stream, or each on its own stream,
// and the same while a bf16 GEMM-like load (a long kernel on every SM) runs on GPU 0.
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
  return 0;
}
