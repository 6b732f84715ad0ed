# Sourced by tools/bench/generate_1b*.sh on the GPU machine (ROOT set): the staged benchmark
# (DIR: tools/bench/prepare_generate_1b.sh's build-bench-gen1b) and runtime (GPU: the lib/ of
# test/gpu/prepare_generate.sh's build-gpu-generate, whose CUDA plugin has the generation
# kernels), each unpacked from its tarball when only that was carried; INIT, where the peer
# writes the weights both sides load.
export NCCL_NVLS_ENABLE=0
DIR="${TPC_BENCH_GEN1B:-$ROOT/build-bench-gen1b}"
if [[ ! -d "$DIR" && -f "$ROOT/build-bench-gen1b.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-bench-gen1b.tar.xz"; fi
GPU="${TPC_GPU_GENERATE:-$ROOT/build-gpu-generate}"
if [[ ! -d "$GPU" && -f "$ROOT/build-gpu-generate.tar.xz" ]]; then tar -C "$ROOT" -xJf "$ROOT/build-gpu-generate.tar.xz"; fi
export LD_LIBRARY_PATH="$GPU/lib:${LD_LIBRARY_PATH:-}" TPRT_BACKEND_CUDA="$GPU/lib/libtprt_backend_cuda.so"
INIT=/tmp/gen1b-init.safetensors
