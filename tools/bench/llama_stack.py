#!/usr/bin/env python3
"""Decoder-stack benchmark: a 1B-class Llama configuration's decoder layers (tools/bench/
llama1b_config.json: 16 layers, hidden 2048, 32 query heads over 8 key/value heads of 64, FFN 8192;
one sequence of 4096 tokens, bf16, random weights) exported by tpc_torch and compiled by
test/gpu/prepare_modules.sh, run by tpc-run on one GPU, against the same layers in PyTorch
(tools/bench/llama_peer.py: eager and torch.compile) in the same run. Each module runs
`tpc-run --backend cuda --seed 7 --repeat 5` (fast mode also with --graph); the peer times
10 steps after 3 warm-ups. Prints one table: step time, tokens/s, and "vs eager" / "vs compile"
= the peer's time over tpc's (> 1: tpc faster). With --json FILE the rows are also written as JSON,
with --svg FILE as a bar chart; --plot JSON SVG draws the chart of an earlier run's JSON.

The decoding step (when DIR has llama1b-decode-*.so): one sequence's next token after --cache - 1
cached ones (export --seq-len 1 --kv-cache C; the caches random by --seed, cache_len from
llama1b-decode-inputs.safetensors), fast and invariant, each also with --graph, against the
peer's gpt-fast-style step (llama_peer.py --decode: eager, and torch.compile with CUDA graphs).
tpc's step returns the token's k and v for the caller to append; the peer writes them into its
static caches inside the step.

Usage: python3 tools/bench/llama_stack.py --tpc-run BIN --modules DIR [--config tools/bench/llama1b_config.json]
       [--tokens 4096] [--cache 4096] [--json out.json] [--svg out.svg]
       python3 tools/bench/llama_stack.py --plot run.json out.svg
(DIR holds llama1b-{infer,train,decode}-{fast,invariant}.so and llama1b-decode-inputs.safetensors.)
"""
import argparse
import json
import os
import re
import subprocess
import sys

from barchart import grouped_bars


def tpc_step(tpc_run, module, graph=False, extra=()):
    cmd = [tpc_run, module, "--backend", "cuda", "--seed", "7", "--repeat", "5"] + (["--graph"] if graph else [])
    cmd += list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = re.search(r"median ([0-9.]+) ms", out.stderr)
    if out.returncode != 0 or not m:
        tail = out.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {' / '.join(tail)}")
    return float(m.group(1))


def peer_times(here, config, extra):
    """llama_peer.py's "peer_<what>_ms" times and its device line for one configuration."""
    out = subprocess.run([sys.executable, os.path.join(here, "llama_peer.py"), config, "--batch", "1", *extra],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"llama_peer.py {' '.join(extra)}: {out.stderr.strip()[-500:]}")
    lines = out.stdout.splitlines()
    times = {w[0]: float(w[1]) for w in (line.split() for line in lines) if w and w[0].startswith("peer_")}
    device = [line for line in lines if line.startswith("device ")][0][len("device "):]
    return times, device


def svg(data, path):
    """Step times: tpc's runs (blue: fast, orange: invariant) next to PyTorch eager and
    torch.compile (greys), one group per step."""
    groups = {}
    for r in data["rows"]:
        g = groups.setdefault(r["step"], [("eager", r["eager_ms"], "#9e9e9e"), ("compile", r["compile_ms"], "#616161")])
        g.append((r["mode"], r["ms"], "#ff7f0e" if "invariant" in r["mode"] else "#1f77b4"))
    grouped_bars(path, f'1B-class Llama decoder stack, {data["tokens"]} tokens: step ms ({data["device"]})',
                 list(groups.items()))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--plot":
        svg(json.load(open(sys.argv[2])), sys.argv[3])
        return 0
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tpc-run", required=True)
    ap.add_argument("--modules", required=True)
    ap.add_argument("--config", default=os.path.join(here, "llama1b_config.json"))
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--cache", type=int, default=4096, help="the decoding step's KV cache rows (the module's)")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    args = ap.parse_args()
    decoding = os.path.exists(os.path.join(args.modules, "llama1b-decode-fast.so"))
    try:
        p, device = peer_times(here, args.config, ["--seq-len", str(args.tokens)])
        if decoding:
            p.update(peer_times(here, args.config, ["--decode", str(args.cache)])[0])
    except RuntimeError as e:
        print(f"llama_stack.py: {e}", file=sys.stderr)
        return 1
    # (step, module, peer key, tokens per step, extra tpc-run arguments, (mode, CUDA graph) pairs)
    modes = [("fast", False), ("fast", True), ("invariant", False)]
    steps = [("forward", "infer", "fwd", args.tokens, [], modes),
             ("training step", "train", "train", args.tokens, [], modes)]
    if decoding:
        steps.append(("decode", "decode", "decode", 1,
                      ["--inputs", os.path.join(args.modules, "llama1b-decode-inputs.safetensors")],
                      modes + [("invariant", True)]))
    rows = []
    for step, module, key, tokens, extra, step_modes in steps:
        eager, compiled = p[f"peer_{key}_ms"], p[f"peer_{key}_compile_ms"]
        for mode, graph in step_modes:
            try:
                ms = tpc_step(args.tpc_run, os.path.join(args.modules, f"llama1b-{module}-{mode}.so"), graph, extra)
            except RuntimeError as e:
                print(f"llama_stack.py: {e}", file=sys.stderr)
                continue
            rows.append({"step": step, "mode": mode + (" + CUDA graph" if graph else ""), "ms": ms,
                         "tokens_per_s": tokens / (ms * 1e-3), "eager_ms": eager, "compile_ms": compiled,
                         "vs_eager": eager / ms, "vs_compile": compiled / ms})
    print(f"{device}; {args.tokens} tokens" + (f"; decode: 1 token after {args.cache - 1} cached" if decoding else ""))
    print(f"{'step':14} {'tpc mode':22} {'ms':>8} {'tokens/s':>10} {'eager ms':>9} {'compile ms':>10} "
          f"{'vs eager':>9} {'vs compile':>10}")
    for r in rows:
        print(f"{r['step']:14} {r['mode']:22} {r['ms']:8.2f} {r['tokens_per_s']:10.0f} {r['eager_ms']:9.2f} "
              f"{r['compile_ms']:10.2f} {r['vs_eager']:8.2f}x {r['vs_compile']:9.2f}x")
    data = {"device": device, "tokens": args.tokens, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    if args.svg:
        svg(data, args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
