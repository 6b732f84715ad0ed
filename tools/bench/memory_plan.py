#!/usr/bin/env python3
"""Memory of a training step against layer count: tpc's planned arena against its lower bound and
against what PyTorch allocates for the same stack.

The stack: N SwiGLU MLP layers (column-parallel FC1 [2F, H], row-parallel FC2 [H, F], bf16, no
residual; tools/bench/compile_time.py's stack), T tokens, one training step (forward, backward,
the gradient of every weight), TP 1.
  tpc:     `tpc-run <stack> --pipeline train --count-only` (nothing is allocated): the arena of
           intermediates (saved activations and temporaries, placed by the planner), its lower
           bound (the most intermediate bytes live at one op of the schedule), and the argument
           and result buffers (x, the weights, dy; y and the weight gradients); and the arena of
           the same stack with activation recomputation (tools/gen_stack.py --recompute).
  PyTorch: the same step in eager mode on a GPU, `torch.cuda.max_memory_allocated()` around
           `y = stack(x); y.backward(dy)` with the weights, x and dy allocated first (their
           gradients are allocated by the step); run with --peer on a machine with a GPU, which
           prints one JSON line that --peer-json then reads here.

Usage:
  python3 tools/bench/memory_plan.py --peer [--layers 10,20,40,80] [--hidden 2048] [--ffn 8192]
      [--tokens 2048] > peer.json                                 (on the GPU machine)
  python3 tools/bench/memory_plan.py [--build build] [--peer-json peer.json] [same sizes]
Prints one table, the last thing it prints.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def peer(layers, h, f, tokens):
    import torch
    import torch.nn.functional as F
    out = {}
    for n in layers:
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()  # 0 unless something outlived the previous row
        dev, dt = "cuda", torch.bfloat16
        w1 = [torch.randn(2 * f, h, device=dev, dtype=dt, requires_grad=True) for _ in range(n)]
        w2 = [torch.randn(h, f, device=dev, dtype=dt, requires_grad=True) for _ in range(n)]
        x = torch.randn(tokens, h, device=dev, dtype=dt)
        dy = torch.randn(tokens, h, device=dev, dtype=dt)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        cur = x
        for i in range(n):
            g, u = (cur @ w1[i].t()).chunk(2, dim=-1)
            cur = (F.silu(g) * u) @ w2[i].t()
        cur.backward(dy)
        torch.cuda.synchronize()
        out[n] = {"peak": torch.cuda.max_memory_allocated() - start, "inputs": base - start, "start": start}
        # The graph's nodes (reachable from g, u and cur) hold the weights and their gradients.
        del w1, w2, x, dy, cur, g, u
        torch.cuda.empty_cache()
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": out}


def tpc(build, n, h, f, tokens, tmp, recompute=False):
    from compile_time import stack
    mlir = os.path.join(tmp, f"stack{n}{'-rc' if recompute else ''}.mlir")
    with open(mlir, "w") as fh:
        fh.write(stack(n, h, f, "fast", tokens, recompute=recompute))
    r = subprocess.run([os.path.join(build, "bin", "tpc-run"), mlir, "--pipeline", "train", "--mesh", "tp=1",
                        "--count-only"], check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    m = re.search(r"memory per rank: arena (\d+) bytes \(live peak (\d+), [0-9.]+x of it\), arguments (\d+), "
                  r"results (\d+), total (\d+) bytes", r)
    if not m:
        sys.exit("no memory line in tpc-run's output:\n" + r)
    return [int(v) for v in m.groups()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--layers", default="10,20,40,80")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--peer", action="store_true", help="measure PyTorch (needs a GPU) and print JSON")
    ap.add_argument("--peer-json", help="PyTorch's numbers from a --peer run")
    args = ap.parse_args()
    layers = [int(v) for v in args.layers.split(",")]
    if args.peer:
        print(json.dumps(peer(layers, args.hidden, args.ffn, args.tokens)))
        return
    p = json.load(open(args.peer_json)) if args.peer_json else None
    gib = 1 << 30
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in layers:
            arena, live, a, r, total = tpc(args.build, n, args.hidden, args.ffn, args.tokens, tmp)
            rc_arena = tpc(args.build, n, args.hidden, args.ffn, args.tokens, tmp, recompute=True)[0]
            peak = p["rows"].get(str(n), {}).get("peak") if p else None
            rows.append((n, arena, live, a, r, total, peak, rc_arena))
    print(f"== training-step memory, TP 1: {args.hidden} hidden, {args.ffn} FFN (SwiGLU), {args.tokens} tokens, bf16"
          + (f"; PyTorch {p['torch']} on {p['device']}" if p else ""))
    print(f"{'layers':>6} {'arena GiB':>10} {'live peak':>10} {'/bound':>7} {'args GiB':>9} {'results':>8}"
          f" {'tpc total':>10} {'torch peak':>11} {'tpc/torch':>10} {'recompute arena':>16}")
    for n, arena, live, a, r, total, peak, rc_arena in rows:
        tp = f"{peak / gib:>11.2f} {total / peak:>9.2f}x" if peak else f"{'-':>11} {'-':>10}"
        print(f"{n:>6} {arena / gib:>10.2f} {live / gib:>10.2f} {arena / live:>6.3f}x {a / gib:>9.2f} {r / gib:>8.2f}"
              f" {total / gib:>10.2f} {tp} {rc_arena / gib:>16.2f}")


if __name__ == "__main__":
    main()
