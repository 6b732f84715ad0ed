#!/usr/bin/env python3
"""Communication and GEMM accounting of invariant numerics for a Llama-70B-like MLP block.

For TP = 2, 4, 8, with and without sequence parallelism, for the forward pass (--pipeline infer)
and a training step (--pipeline train), runs

  tpc-run tools/bench/llama70b_mlp.mlir --mesh tp=N --count-only [--sequence-parallel]
          --numerics fast | --numerics invariant --strategy canonical | --strategy gather

and turns the per-rank counters of rank 0 (`stats:` lines: GEMM FLOPs; calls and bytes sent per
collective family, under the ring/direct schedule model of docs/runtime.md) and the arena size
into a markdown table. Nothing is computed: --count-only runs the schedule and counts.

usage: tools/bench/comm_table.py [--tpc-run build/bin/tpc-run] [--module tools/bench/llama70b_mlp.mlir]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = (("fast", ["--numerics", "fast"]),
         ("canonical", ["--numerics", "invariant", "--strategy", "canonical"]),
         ("gather", ["--numerics", "invariant", "--strategy", "gather"]))
FAMILIES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def count(tpc_run, module, tp, pipeline, sp, flags):
    cmd = [tpc_run, module, "--mesh", f"tp={tp}", "--pipeline", pipeline, "--count-only"] + flags
    if sp:
        cmd.append("--sequence-parallel")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    out = {"flops": 0, "arena": 0}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) >= 7 and f[0] == "stats:" and f[1] == "0":
            if f[2] == "gemm":
                out["flops"] = int(f[6])
            else:
                out[f[2]] = (int(f[3]), int(f[4]))
    m = re.search(r"arena (\d+) bytes per rank", p.stderr)
    out["arena"] = int(m.group(1)) if m else 0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpc-run", default=os.path.join(ROOT, "build", "bin", "tpc-run"))
    ap.add_argument("--module", default=os.path.join(ROOT, "tools", "bench", "llama70b_mlp.mlir"))
    a = ap.parse_args()
    mb = 1e6
    print("| step | SP | TP | numerics | GEMM TFLOP / rank | all-reduce MB | all-gather MB | reduce-scatter MB "
          "| all-to-all MB | sent MB / rank | vs fast | arena MB / rank |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for pipeline in ("infer", "train"):
        step = "forward" if pipeline == "infer" else "fwd + bwd"
        for sp in (False, True):
            for tp in (2, 4, 8):
                base = None
                for name, flags in MODES:
                    c = count(a.tpc_run, a.module, tp, pipeline, sp, flags)
                    fam = [c.get(f, (0, 0))[1] for f in FAMILIES]
                    total = sum(fam)
                    base = total if base is None else base
                    cells = [f"{b / mb:.4g} ({c[f][0]})" if f in c else "-" for f, b in zip(FAMILIES, fam)]
                    print(f"| {step} | {'on' if sp else 'off'} | {tp} | {name} | {c['flops'] / 1e12:.2f} | "
                          + " | ".join(cells)
                          + f" | {total / mb:.4g} | {total / base:.2f}x | {c['arena'] / mb:.4g} |")
    print()
    print("MB = 1e6 bytes sent by rank 0 per step (received is equal under this model); (n) = calls; arena = the")
    print("rank's planned intermediates (weights, inputs and results are outside it).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
