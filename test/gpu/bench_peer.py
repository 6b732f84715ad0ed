#!/usr/bin/env python3
"""Times two peers on the shapes tprt-bench-linear printed, with the same method (CUDA events,
median of 20 after 3 warm-ups): PyTorch f32 matmul with TF32 off (cuBLAS SGEMM on CUDA cores, the
f32 peak exact mode can aim for) and bf16 matmul (cuBLAS, tensor cores, f32 accumulation); one row
per shape with the ratios tprt / peer (time; > 1 means tprt is slower).

Usage: bench_peer.py TPRT_BENCH_OUTPUT
"""
import sys

import torch


def peer_ms(m, n, k, warm=3, reps=20, dtype=torch.bfloat16):
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warm + reps):
        e0.record()
        torch.matmul(x, w.t())
        e1.record()
        e1.synchronize()
        if i >= warm:
            times.append(e0.elapsed_time(e1))
    times.sort()
    return times[reps // 2]


def main():
    # The f32 CUDA-core peer: cuBLAS SGEMM with TF32 off (what exact mode's arithmetic can reach
    # without tensor cores), next to the bf16 tensor-core peer.
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = [line.split() for line in open(sys.argv[1]) if line.startswith("linear ")]
    print(f"{'M':>6} {'N':>6} {'K':>6}  {'tprt exact':>10} {'TFLOP/s':>8}  {'torch f32':>9} {'TFLOP/s':>8} {'ratio':>6}"
          f"  {'torch bf16':>10} {'TFLOP/s':>8} {'ratio':>6}")
    for r in rows:
        m, n, k = int(r[1]), int(r[2]), int(r[3])
        t_ms, t_tf = float(r[5]), float(r[6])
        f = peer_ms(m, n, k, dtype=torch.float32)
        p = peer_ms(m, n, k)
        tf = lambda ms: 2.0 * m * n * k / (ms * 1e-3) / 1e12
        print(f"{m:>6} {n:>6} {k:>6}  {t_ms:>8.3f}ms {t_tf:>8.2f}  {f:>7.3f}ms {tf(f):>8.1f} {t_ms / f:>5.1f}x"
              f"  {p:>8.3f}ms {tf(p):>8.1f} {t_ms / p:>5.1f}x")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; ratio = tprt time / peer time")


if __name__ == "__main__":
    main()
