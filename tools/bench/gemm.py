#!/usr/bin/env python3
"""GEMM benchmark of tpc's contraction kernels against PyTorch, measured in the same run.

Runs tprt-bench-gemm (tools/bench/bench_gemm.cu) one case at a time (`tprt-bench-gemm list`) and
times the peer of every line a case prints right after that case, with the same method (CUDA
events, median after 3 warm-ups, random bf16 operands), so that tpc and the peer run at the same
point of the run (clocks fall as the GPU warms over minutes of GEMMs):
  dense   torch.matmul (cuBLAS): fwd x @ w.T, dgrad dy @ w, wgrad dy.T @ x
  grouped torch._grouped_mm with offsets: fwd x @ w[e].T, dgrad dy @ w[e], wgrad dy.T @ x per expert
  mlp     torch._grouped_mm, SwiGLU (F.silu(g) * u), torch._grouped_mm
Prints one table, last: time, TFLOP/s, and "vs peer" = peer time / tpc time (> 1: tpc faster);
then the exact kernels' own lines (exact <pass> <dtype> ... <median ms> <TFLOP/s>) as printed.
With --json FILE the rows are also written as JSON (for plots in docs/performance.md).

Usage: python3 tools/bench/gemm.py [--bin build/bin/tprt-bench-gemm] [--quick] [--json out.json]
"""
import argparse
import json
import subprocess
import sys

import torch
import torch.nn.functional as F


def timed(fn, reps):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(3 + reps):
        e0.record()
        fn(i)
        e1.record()
        e1.synchronize()
        if i >= 3:
            times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2]


def reps_for(flops):
    return 5 if flops > 5e12 else 10 if flops > 5e11 else 20


def rand(*shape):
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(torch.bfloat16)


def dense_peer(p, m, n, k):
    sets = 4 if (m * k + n * k + m * n) * 2 < (64 << 20) else 1
    xs = [rand(m, k) for _ in range(sets)]
    ws = [rand(n, k) for _ in range(sets)]
    dys = [rand(m, n) for _ in range(sets)]
    fns = {
        "fwd": lambda i: torch.matmul(xs[i % sets], ws[i % sets].t()),
        "dgrad": lambda i: torch.matmul(dys[i % sets], ws[i % sets]),
        "wgrad": lambda i: torch.matmul(dys[i % sets].t(), xs[i % sets]),
    }
    return timed(fns[p], reps_for(2.0 * m * n * k))


def counts(t, e, skewed):
    # The same counts as tprt-bench-gemm's bg_counts.
    c = [t // e] * e
    if skewed:
        s = sum(1.0 / (j + 1) for j in range(e))
        c = [int(t / (j + 1) / s) for j in range(e)]
        c[0] += t - sum(c)
        for j in range(e - 1, 0, -1):
            i = (j * 7919) % (j + 1)
            c[j], c[i] = c[i], c[j]
    else:
        c[0] += t - (t // e) * e
    return c


def offsets(c):
    return torch.tensor(c, device="cuda", dtype=torch.int64).cumsum(0).to(torch.int32)


def grouped_peer(p, e, t, n, k, dist):
    offs = offsets(counts(t, e, dist == "skewed"))
    x, w, dy = rand(t, k), rand(e, n, k), rand(t, n)
    fns = {
        "fwd": lambda i: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs),
        "dgrad": lambda i: torch._grouped_mm(dy, w, offs=offs),
        "wgrad": lambda i: torch._grouped_mm(dy.t(), x, offs=offs),
    }
    return timed(fns[p], reps_for(2.0 * t * n * k))


def mlp_peer(e, t, h, f, dist):
    offs = offsets(counts(t, e, dist == "skewed"))
    x, w1, w2 = rand(t, h), rand(e, 2 * f, h), rand(e, h, f)

    def step(i):
        hid = torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)
        g, u = hid.chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(g) * u, w2.transpose(-2, -1), offs=offs)

    return timed(step, reps_for(6.0 * t * h * f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin/tprt-bench-gemm")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    cases = subprocess.run([args.bin, "list"] + (["quick"] if args.quick else []), check=True,
                           stdout=subprocess.PIPE, text=True).stdout.splitlines()
    rows, exact_lines, glu_lines = [], [], []
    cache = {}

    def peer(key, fn):  # one peer measurement per shape and pass, whatever tpc's modes
        if key not in cache:
            cache[key] = fn()
        return cache[key]

    for case in cases:
        out = subprocess.run([args.bin] + case.split(), check=True, stdout=subprocess.PIPE, text=True).stdout
        print(f"case {case}: done", file=sys.stderr, flush=True)
        for line in out.splitlines():
            f = line.split()
            if not f:
                continue
            if f[0] == "exact":
                exact_lines.append(line)
            elif f[0] == "glu-epilogue":
                glu_lines.append(line)
            elif f[0] == "dense":
                p, mode, m, n, k, ms = f[1], f[2], int(f[3]), int(f[4]), int(f[5]), float(f[6])
                rows.append(dict(kind="dense", pass_=p, mode=mode, shape=f"M={m} N={n} K={k}", flops=2.0 * m * n * k,
                                 ms=ms, peer="torch.matmul",
                                 peer_ms=peer(("d", p, m, n, k), lambda: dense_peer(p, m, n, k))))
            elif f[0] == "grouped":
                p, mode, e, t, n, k, dist, ms = f[1], f[2], int(f[3]), int(f[4]), int(f[5]), int(f[6]), f[7], float(f[8])
                rows.append(dict(kind="grouped", pass_=p, mode=mode, shape=f"E={e} T={t} N={n} K={k} {dist}",
                                 flops=2.0 * t * n * k, ms=ms, peer="torch._grouped_mm",
                                 peer_ms=peer(("g", p, e, t, n, k, dist), lambda: grouped_peer(p, e, t, n, k, dist))))
            elif f[0] == "mlp":
                mode, e, t, h, ff, dist, ms = f[1], int(f[2]), int(f[3]), int(f[4]), int(f[5]), f[6], float(f[7])
                rows.append(dict(kind="mlp", pass_="fwd", mode=mode, shape=f"E={e} T={t} H={h} F={ff} {dist}",
                                 flops=6.0 * t * h * ff, ms=ms, peer="_grouped_mm+silu*u+_grouped_mm",
                                 peer_ms=peer(("m", e, t, h, ff, dist), lambda: mlp_peer(e, t, h, ff, dist))))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), fh, indent=1)
    print(f"== GEMM benchmark: tpc vs PyTorch, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'kind':<8} {'pass':<6} {'mode':<9} {'shape':<38} {'tpc ms':>9} {'TF/s':>7} {'peer ms':>9} {'TF/s':>7}"
          f" {'vs peer':>8}")
    for r in rows:
        tf = r["flops"] / (r["ms"] * 1e-3) / 1e12
        ptf = r["flops"] / (r["peer_ms"] * 1e-3) / 1e12
        print(f"{r['kind']:<8} {r['pass_']:<6} {r['mode']:<9} {r['shape']:<38} {r['ms']:>9.4f} {tf:>7.1f}"
              f" {r['peer_ms']:>9.4f} {ptf:>7.1f} {r['peer_ms'] / r['ms']:>7.2f}x")
    print("vs peer = peer time / tpc time (>= 1: tpc as fast or faster); peers: dense torch.matmul, grouped "
          "torch._grouped_mm, mlp _grouped_mm + silu*u + _grouped_mm")
    if glu_lines:  # tprt-bench-gemm's own lines: the GLU epilogue against the GEMM + GLU kernel
        print("== GLU in the grouped GEMM epilogue: glu-epilogue <fwd|bwd> <mode> <E> <T> <H> <F> <dist> "
              "<fused ms> <separate ms>")
        for line in glu_lines:
            print(line)
    if exact_lines:  # tprt-bench-gemm's own lines for the exact kernels (no peer: f32 CUDA-core arithmetic)
        print("== exact kernels: exact <pass> <dtype> <M> <N> <K> <chunks> <median ms> <TFLOP/s>")
        print("\n".join(exact_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
