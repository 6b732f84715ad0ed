#!/usr/bin/env python3
"""Times the peer (PyTorch bf16 matmul: cuBLAS, tensor cores, f32 accumulation) on the shapes
tprt-bench-linear printed, with the same method (CUDA events, median of 20 after 3 warm-ups), and
prints one table row per shape with the ratio tprt / peer (time; > 1 means tprt is slower).

Usage: bench_peer.py TPRT_BENCH_OUTPUT
"""
import sys

import torch


def peer_ms(m, n, k, warm=3, reps=20):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
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
    rows = [line.split() for line in open(sys.argv[1]) if line.startswith("linear ")]
    print(f"{'M':>6} {'N':>6} {'K':>6}  {'tprt exact ms':>13} {'TFLOP/s':>8}  {'torch bf16 ms':>13} {'TFLOP/s':>8}  {'ratio':>7}")
    for r in rows:
        m, n, k = int(r[1]), int(r[2]), int(r[3])
        t_ms, t_tf = float(r[5]), float(r[6])
        p = peer_ms(m, n, k)
        p_tf = 2.0 * m * n * k / (p * 1e-3) / 1e12
        print(f"{m:>6} {n:>6} {k:>6}  {t_ms:>13.3f} {t_tf:>8.2f}  {p:>13.3f} {p_tf:>8.1f}  {t_ms / p:>6.1f}x")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
