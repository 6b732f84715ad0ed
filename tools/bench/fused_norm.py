#!/usr/bin/env python3
"""Fused all-reduce + residual add + RMSNorm benchmark: tp.fused_allreduce_add_rmsnorm at hidden
8192, bf16 residual, tokens in {1, 8, 32, 128, 1024, 8192}, TP = every visible GPU (one each).
Four columns, all measured in the same run, eager and as CUDA graphs:

  fused    tpc's kernel (kernels/cuda/norm/fused_norm.cu), one-shot, from `tprt-fused-norm-check bench`
  two-shot the same kernel's two-shot form (FN_TWO_SHOT=1)
  unfused  tpc's unfused path: NCCL's all-reduce of the f32 partial, then tpc's add and rmsnorm
           kernels (the same program)
  torch    PyTorch: torch.distributed.all_reduce (NCCL, bf16) of the partial, the residual add
           and torch.nn.functional.rms_norm, one process per GPU

Each is the slowest rank's median over 20 rounds of 50 calls, in microseconds per call. Prints
the table with the ratios of the faster form to unfused and to torch, and the crossover row of
runtime/cuda/backend_cuda_fused.c (the largest sizes for one-shot, then two-shot); --json and --svg
keep them.
NCCL_NVLS_ENABLE=0 is set for every run (no NVLink multicast).

Usage: python3 tools/bench/fused_norm.py --bin build-gpu-carry/bin/tprt-fused-norm-check [--no-torch]
                                         [--json out.json] [--svg out.svg]
       python3 tools/bench/fused_norm.py --table tp2.txt tp4.txt --device NAME [--json] [--svg]
         (saved outputs of `tprt-fused-norm-check bench`, either form: the table without running anything)
"""
import argparse
import json
import os
import subprocess
import sys

TOKENS = [1, 8, 32, 128, 1024, 8192]
HIDDEN = 8192
CALLS, ROUNDS = 50, 20


def parse_table(text):
    """(tp, {tokens: {fused, unfused, fused-graph, unfused-graph}}) from the program's output; a
    two-shot run's kernel columns are "two" and "two-graph"."""
    tp, rows, kernel = 0, {}, "fused"
    for line in text.splitlines():
        if line.startswith("fused_norm bench: TP "):
            tp = int(line.split()[3])
            kernel = "two" if line.rstrip().endswith("two-shot") else "fused"
        f = line.split()
        if len(f) == 7 and f[0].isdigit():
            rows[int(f[0])] = {kernel: float(f[1]), "unfused": float(f[2]), kernel + "-graph": float(f[4]),
                               "unfused-graph": float(f[5])}
        if line.startswith("rank 0's eager fused calls"):
            break  # the breakdown follows: rows of another shape
    return tp, rows


def merge(runs):
    """One (tp, rows) per TP from runs of either form (a form's unfused columns are kept from the
    one-shot run)."""
    by_tp = {}
    for tp, rows in runs:
        into = by_tp.setdefault(tp, {})
        for t, cols in rows.items():
            into.setdefault(t, {}).update({k: v for k, v in cols.items() if k not in into.get(t, {})})
    return sorted(by_tp.items())


def tpc_rows(binary):
    """The program's tables, one-shot then two-shot, run on every visible GPU."""
    runs = []
    for two in ("0", "1"):
        env = dict(os.environ, NCCL_NVLS_ENABLE="0", FN_TWO_SHOT=two)
        out = subprocess.run([binary, "bench"], capture_output=True, text=True, timeout=600, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"{binary} bench: exit {out.returncode}: {out.stderr.strip()[-400:]}")
        print(out.stdout, end="")
        runs.append(parse_table(out.stdout))
    return merge(runs)[0]


def torch_rank(rank, world, port, queue):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
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
        if rank == 0:
            print(f"torch: {t} tokens: eager measured, capturing", file=sys.stderr, flush=True)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            calls()  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            calls()
        result[t] = {"torch": eager, "torch-graph": timed(graph.replay)}
        if rank == 0:
            print(f"torch: {t} tokens: {eager:.2f} us eager, {result[t]['torch-graph']:.2f} us graph", file=sys.stderr,
                  flush=True)
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
    try:
        results = [queue.get(timeout=300) for _ in procs]
    except Exception:
        for p in procs:
            p.kill()
        raise RuntimeError("the PyTorch ranks did not report within 300 s")
    for p in procs:  # a rank whose NCCL teardown hangs is ended: its numbers are in
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    rows = {}
    for t in TOKENS:  # the slowest rank
        rows[t] = {k: max(r[t][k] for _, r in results) for k in ("torch", "torch-graph")}
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="tprt-fused-norm-check (runs it on every visible GPU)")
    ap.add_argument("--table", nargs="*", default=[],
                    help="saved outputs of `tprt-fused-norm-check bench` to read instead of running it")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch column")
    ap.add_argument("--device", default="", help="the GPU's name, for --table")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    a = ap.parse_args()
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    runs, device = [], a.device
    for path in a.table:
        with open(path) as f:
            runs.append(parse_table(f.read()))
    if a.bin:
        import torch
        world = torch.cuda.device_count()
        if world < 2:
            print("fused_norm.py: needs 2 GPUs")
            return 77
        device = torch.cuda.get_device_name(0)
        runs.append(tpc_rows(a.bin))
        if not a.no_torch:
            print("tpc: measured; now PyTorch", file=sys.stderr, flush=True)
            peer = torch_rows(world)
            for t in TOKENS:
                runs[-1][1][t].update(peer[t])
    if not runs:
        ap.error("give --bin or --table")
    runs = merge(runs)
    print(f"Fused all-reduce + add + RMSNorm, {device}, hidden {HIDDEN}, bf16; us per call "
          f"(the slowest rank's median of {ROUNDS} rounds of {CALLS} calls)")
    print(f"{'tp':>3} {'tokens':>7} {'mode':>6} {'one-shot':>9} {'two-shot':>9} {'unfused':>8} {'torch':>8} "
          f"{'vs unfused':>11} {'vs torch':>9}")
    nan = float("nan")
    table = []
    for tp, rows in runs:
        for t in TOKENS:
            if t not in rows:
                continue
            for mode, suffix in (("eager", ""), ("graph", "-graph")):
                f, f2, u = rows[t].get("fused" + suffix), rows[t].get("two" + suffix), rows[t]["unfused" + suffix]
                best = min(x for x in (f, f2) if x is not None)
                p = rows[t].get("torch" + suffix)
                table.append({"tp": tp, "tokens": t, "mode": mode, "fused_us": f, "two_shot_us": f2, "unfused_us": u,
                              "torch_us": p, "best_us": best})
                print(f"{tp:>3} {t:>7} {mode:>6} {f if f else nan:9.2f} {f2 if f2 else nan:9.2f} {u:8.2f} "
                      f"{p if p else nan:8.2f} {best / u:11.3f} {best / p if p else nan:9.3f}")
    # The crossover row of runtime/cuda/backend_cuda_fused.c's table, per TP: one-shot up to the
    # largest measured partial (bf16, bytes per rank) where it is the faster form and beats the
    # composition, eager and as a graph; two-shot from there up to the largest where the faster form
    # still beats the composition in both.
    crossover = {}
    for tp, rows in runs:
        one = two = 0
        for t in TOKENS:
            if t not in rows:
                break
            r = rows[t]
            beats = {k: all(k + x in r and r[k + x] < r["unfused" + x] for x in ("", "-graph")) for k in ("fused", "two")}
            one_first = not beats["two"] or r["fused"] + r["fused-graph"] <= r["two"] + r["two-graph"]
            if beats["fused"] and one_first and one == two:
                one = two = t
            elif beats["fused"] or beats["two"]:
                two = t
            else:
                break
        crossover[tp] = {"one_shot": one * HIDDEN * 2, "two_shot": two * HIDDEN * 2}
        print(f"crossover TP {tp}: one-shot up to {one} tokens, two-shot up to {two}: "
              f"{{{tp}, {one * HIDDEN * 2}, {two * HIDDEN * 2}}} ({one * HIDDEN * 2 / 2**10:.0f} KiB, "
              f"{two * HIDDEN * 2 / 2**10:.0f} KiB per rank)")
    if a.json:
        with open(a.json, "w") as out:
            json.dump({"device": device, "hidden": HIDDEN, "rows": table, "crossover_bytes": crossover}, out,
                      indent=1)
    if a.svg:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from barchart import grouped_bars
        groups = {}  # (tp, tokens) -> bars: the eager and graph ratios to the unfused path (and to torch)
        for r in table:
            bars = groups.setdefault((r["tp"], r["tokens"]), [])
            bars.append((f"{r['mode']} /unfused", r["best_us"] / r["unfused_us"],
                         "#1f77b4" if r["mode"] == "eager" else "#aec7e8"))
            if r["torch_us"]:
                bars.append((f"{r['mode']} /torch", r["best_us"] / r["torch_us"],
                             "#ff7f0e" if r["mode"] == "eager" else "#ffbb78"))
        groups = [(f"TP{tp} T={t}", bars) for (tp, t), bars in groups.items()]
        grouped_bars(a.svg, f"Fused all-reduce + add + RMSNorm, {device}, hidden {HIDDEN}: time ratio "
                     "(the faster form; below 1: the fused kernel is faster)", groups, bar=18, gap=36, min_width=900)
    return 0


if __name__ == "__main__":
    sys.exit(main())
