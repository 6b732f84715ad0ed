#!/usr/bin/env python3
"""Fused all-reduce + residual add + RMSNorm benchmark: tp.fused_allreduce_add_rmsnorm at hidden
8192, bf16 residual, tokens in {1, 8, 32, 128, 1024, 8192}, TP = every visible GPU (one each).
Three columns, all measured in the same run, eager and as CUDA graphs:

  fused    tpc's kernel (kernels/cuda/fused_norm.cu), from `tprt-fused-norm-check bench`
  unfused  tpc's unfused path: NCCL's all-reduce of the f32 partial, then tpc's add and rmsnorm
           kernels (the same program)
  torch    PyTorch: torch.distributed.all_reduce (NCCL, bf16) of the partial, the residual add
           and torch.nn.functional.rms_norm, one process per GPU

Each is the slowest rank's median over 20 rounds of 50 calls, in microseconds per call. Prints
the table with the ratios fused/unfused and fused/torch; --json and --svg keep them.
NCCL_NVLS_ENABLE=0 is set for every run (no NVLink multicast).

Usage: python3 tools/bench/fused_norm.py --bin build-gpu-carry/bin/tprt-fused-norm-check
                                         [--json out.json] [--svg out.svg]
"""
import argparse
import json
import os
import subprocess
import sys

TOKENS = [1, 8, 32, 128, 1024, 8192]
HIDDEN = 8192
CALLS, ROUNDS = 50, 20


def tpc_rows(binary):
    """{tokens: {fused, unfused, fused-graph, unfused-graph}} from the program's table."""
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    out = subprocess.run([binary, "bench"], capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} bench: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 7 and f[0].isdigit():
            rows[int(f[0])] = {"fused": float(f[1]), "unfused": float(f[2]), "fused-graph": float(f[4]),
                               "unfused-graph": float(f[5])}
    return rows


def torch_rank(rank, world, port, queue):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    result = {}
    for t in TOKENS:
        x = torch.randn(t, HIDDEN, device="cuda", dtype=torch.bfloat16)
        residual = torch.randn(t, HIDDEN, device="cuda", dtype=torch.bfloat16)
        gamma = torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16)

        def calls():
            for _ in range(CALLS):
                dist.all_reduce(x)
                r = residual + x
                F.rms_norm(r, (HIDDEN,), gamma, 1e-5)

        def timed(fn):
            times = []
            for rep in range(ROUNDS + 1):
                dist.barrier()
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                torch.cuda.synchronize()
                if rep:
                    times.append(a.elapsed_time(b) * 1000.0 / CALLS)
            return sorted(times)[len(times) // 2]

        eager = timed(calls)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            calls()  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            calls()
        result[t] = {"torch": eager, "torch-graph": timed(graph.replay)}
    queue.put((rank, result))
    dist.destroy_process_group()


def torch_rows(world):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=torch_rank, args=(r, world, port, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    rows = {}
    for t in TOKENS:  # the slowest rank
        rows[t] = {k: max(r[t][k] for _, r in results) for k in ("torch", "torch-graph")}
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="tprt-fused-norm-check")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    a = ap.parse_args()
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    import torch
    world = torch.cuda.device_count()
    if world < 2:
        print("fused_norm.py: needs 2 GPUs")
        return 77
    ours = tpc_rows(a.bin)
    peer = torch_rows(world)
    device = torch.cuda.get_device_name(0)
    print(f"Fused all-reduce + add + RMSNorm, TP {world} x {device}, hidden {HIDDEN}, bf16; us per call "
          f"(the slowest rank's median of {ROUNDS} rounds of {CALLS} calls)")
    print(f"{'tokens':>7} {'mode':>6} {'fused':>8} {'unfused':>8} {'torch':>8} {'vs unfused':>11} {'vs torch':>9}")
    table = []
    for t in TOKENS:
        for mode, suffix in (("eager", ""), ("graph", "-graph")):
            f, u, p = ours[t]["fused" + suffix], ours[t]["unfused" + suffix], peer[t]["torch" + suffix]
            table.append({"tokens": t, "mode": mode, "fused_us": f, "unfused_us": u, "torch_us": p})
            print(f"{t:>7} {mode:>6} {f:8.2f} {u:8.2f} {p:8.2f} {f / u:11.3f} {f / p:9.3f}")
    if a.json:
        with open(a.json, "w") as out:
            json.dump({"device": device, "tp": world, "hidden": HIDDEN, "rows": table}, out, indent=1)
    if a.svg:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from barchart import grouped_bars
        groups = [(f"{r['tokens']} {r['mode']}", [("fused", r["fused_us"], "#1f77b4"),
                                                  ("unfused", r["unfused_us"], "#aec7e8"),
                                                  ("torch", r["torch_us"], "#ff7f0e")]) for r in table]
        grouped_bars(a.svg, f"Fused all-reduce + add + RMSNorm, TP {world} x {device}: us per call", groups,
                     bar=22, gap=24, min_width=900)
    return 0


if __name__ == "__main__":
    sys.exit(main())
