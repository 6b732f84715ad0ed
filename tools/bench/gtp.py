#!/usr/bin/env python3
"""GTP overlap benchmark: a stack of Llama-3-8B-width MLP blocks (tools/gen_stack.py --block llama:
RMSNorm, SwiGLU MLP with H 4096 and F 14336, residual; bf16), one training step, 4096 tokens on
every rank, compiled by test/gpu/prepare_modules.sh and run by tpc-run on the CUDA backend:

  ref        one rank, the rank's 4096 tokens, whole weights: the compute alone
  dp2        two ranks, whole weights on each, gradients all-reduced (data parallelism)
  gtp2-naive two ranks, weights sharded over gtp = 2, each all-gather started just before its use
             (--gtp-prefetch 0: nothing to overlap with)
  gtp2       the same, gathers prefetched by tp-gtp's schedule (its cost model's depth)
  gtp2-keep  gathered once, kept for the backward (--gtp-keep)

in fast and invariant numerics (gtp2 also as a CUDA graph, --graph). Every run is
`tpc-run --backend cuda --seed 7 --repeat 5 --stats` (the slowest rank's median step). The
all-gather time hidden behind compute is

  hidden = (t[gtp2-naive] - t[gtp2]) / (t[gtp2-naive] - t[ref])

(the naive schedule exposes every gather and reduce-scatter: its excess over ref is the
communication; the prefetched schedule's excess is what stays exposed). --timeline also runs gtp2
with TPRT_CUDA_TIMELINE=1 and prints each rank's timeline of its last step: the collectives' busy
time and how much of it ran under a contraction. "weights/rank" is the
module's argument bytes per rank (tpc-run --stats: the weights and the 4096 x 4096 input and its
cotangent, 64 MiB).

--stack gtpmoe runs the same configurations of 2 Mixtral-8x7B-width MoE blocks (8 experts of F
14336, top 2), whose grouped expert weights are gathered whole per layer.

Usage: python3 tools/bench/gtp.py --tpc-run BIN --modules DIR [--stack gtp8b|gtpmoe] [--json out.json]
                                  [--svg out.svg]
       python3 tools/bench/gtp.py --plot run.json out.svg
(DIR holds <stack>-{ref,dp2,gtp2-naive,gtp2,gtp2-keep}-{fast,invariant}.so and <stack>.txt, the
stack's description; test/gpu/prepare_modules.sh stages both stacks.)
"""
import argparse
import json
import os
import re
import subprocess
import sys

from barchart import grouped_bars

CONFIGS = ["ref", "dp2", "gtp2-naive", "gtp2", "gtp2-keep"]


def run(tpc_run, module, graph=False, timeline=False):
    cmd = [tpc_run, module, "--backend", "cuda", "--seed", "7", "--repeat", "5", "--stats"]
    if graph:
        cmd.append("--graph")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    if timeline:
        env["TPRT_CUDA_TIMELINE"] = "1"
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    text = out.stderr + out.stdout
    m = re.search(r"median ([0-9.]+) ms", text)
    a = re.search(r"arguments (\d+)", text)
    if out.returncode != 0 or not m:
        tail = out.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {' / '.join(tail)}")
    if timeline:  # the last step's line of each rank
        lines = {}
        for line in out.stderr.splitlines():
            t = re.match(r"tprt cuda timeline: rank (\d+): (.*)", line)
            if t:
                lines[int(t.group(1))] = t.group(2)
        return [f"rank {r}: {lines[r]}" for r in sorted(lines)]
    return float(m.group(1)), int(a.group(1)) if a else None


def device_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True).stdout.splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown device"


def svg(data, path):
    """Step times per configuration (blue: fast, orange: invariant), the hidden fraction below the title."""
    groups = {}
    for r in data["rows"]:
        color = "#ff7f0e" if r["mode"].startswith("invariant") else "#1f77b4"
        groups.setdefault(r["config"], []).append((r["mode"], r["ms"], color))
    hidden = ", ".join(f"{m}: {h * 100:.0f}% of the communication hidden" for m, h in data["hidden"].items())
    grouped_bars(path, f'GTP, {data["stack"]}: training step ms ({data["device"]})', list(groups.items()),
                 subtitle=hidden, bar=30, gap=30, min_width=900)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--plot":
        svg(json.load(open(sys.argv[2])), sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tpc-run", required=True)
    ap.add_argument("--modules", required=True)
    ap.add_argument("--stack", default="gtp8b", choices=("gtp8b", "gtpmoe"))
    ap.add_argument("--modes", default="fast,invariant")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="a subset of " + ",".join(CONFIGS))
    ap.add_argument("--no-graph", action="store_true", help="skip the --graph runs")
    ap.add_argument("--timeline", action="store_true",
                    help="also run gtp2 with TPRT_CUDA_TIMELINE=1 and print each rank's last step")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    a = ap.parse_args()
    stack = open(os.path.join(a.modules, f"{a.stack}.txt")).read().strip()
    rows, t = [], {}
    for mode in a.modes.split(","):
        for config in a.configs.split(","):
            module = os.path.join(a.modules, f"{a.stack}-{config}-{mode}.so")
            graphs = [False, True] if config in ("ref", "gtp2") and mode == "fast" and not a.no_graph else [False]
            for graph in graphs:
                try:
                    ms, args_bytes = run(a.tpc_run, module, graph)
                except RuntimeError as e:
                    print(f"gtp.py: {e}", file=sys.stderr)
                    return 1
                label = mode + (" --graph" if graph else "")
                t[(config, label)] = ms
                rows.append({"config": config, "mode": label, "ms": ms, "argument_bytes_per_rank": args_bytes})
    hidden = {}
    for mode in a.modes.split(","):
        naive, pf, ref = t.get(("gtp2-naive", mode)), t.get(("gtp2", mode)), t.get(("ref", mode))
        if naive and pf and ref and naive > ref:
            hidden[mode] = (naive - pf) / (naive - ref)
    data = {"stack": stack, "device": device_name(), "rows": rows, "hidden": hidden}
    print(f"GTP benchmark: {stack}; {data['device']}")
    print(f"{'config':<11} {'mode':<15} {'step ms':>8} {'vs ref':>7} {'weights/rank':>13}")
    for r in rows:
        ref = t.get(("ref", r["mode"]))
        gib = r["argument_bytes_per_rank"] / 2**30 if r["argument_bytes_per_rank"] else float("nan")
        print(f"{r['config']:<11} {r['mode']:<15} {r['ms']:8.2f} {r['ms'] / ref if ref else float('nan'):7.3f} "
              f"{gib:9.2f} GiB")
    for mode, h in hidden.items():
        print(f"{mode}: {h * 100:.1f}% of the all-gather/reduce-scatter time hidden "
              f"(naive {t[('gtp2-naive', mode)]:.2f} ms, prefetched {t[('gtp2', mode)]:.2f} ms, "
              f"compute alone {t[('ref', mode)]:.2f} ms)")
    if a.timeline:
        data["timeline"] = {}
        for mode in a.modes.split(","):
            lines = run(a.tpc_run, os.path.join(a.modules, f"{a.stack}-gtp2-{mode}.so"), timeline=True)
            data["timeline"][mode] = lines
            for line in lines:
                print(f"timeline gtp2 {mode}: {line}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
    if a.svg:
        svg(data, a.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
