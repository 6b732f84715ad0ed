#!/usr/bin/env python3
"""Attention benchmark of tpc's tensor-core kernels against PyTorch, measured in the same run.

For each case, runs tprt-bench-attention (tools/bench/bench_attention.cu) and then times
torch.nn.functional.scaled_dot_product_attention on the same problem with the same method (CUDA
events, median of 10 after 3 warm-ups, random bf16 inputs in [-1, 1)). The peer gets PyTorch's
own layout choice: q, k, v as [B, S, H, D] tensors viewed [B, H, S, D] (what Hugging Face
attention passes), grouped-query heads through enable_gqa, the backward by torch.autograd.grad.
Prints one table, last: milliseconds, TFLOP/s (4·B·Hq·S²·D forward, halved when causal; 2.5x
that backward) and "vs peer" = peer time / tpc time (> 1: tpc faster).
With --json FILE the rows are also written as JSON, with --svg FILE as a bar chart (TFLOP/s of
tpc's tensor-core kernels next to the peer's, per case and pass; no plotting library needed).

Usage: python3 tools/bench/attention.py [--bin build/bin/tprt-bench-attention] [--quick] [--json out.json]
                                        [--svg out.svg]
"""
import argparse
import json
import subprocess
import sys

import torch
import torch.nn.functional as F

from gemm import timed  # CUDA events, median after 3 warm-ups

CASES = [  # B, S, Hq, Hkv, D, mask
    (1, 4096, 32, 8, 128, "causal"),   # Llama-3-8B heads, one 4k sequence
    (4, 2048, 32, 8, 128, "causal"),
    (1, 8192, 32, 8, 128, "causal"),
    (1, 4096, 32, 8, 64, "causal"),    # Llama-3.2-1B heads
    (16, 512, 32, 8, 128, "causal"),
    (1, 4096, 32, 32, 128, "full"),
]
QUICK = [CASES[0], CASES[3]]


def peer(b, s, hq, hkv, d, mask):
    def rand(h):
        return (torch.rand(b, s, h, d, device="cuda") * 2 - 1).to(torch.bfloat16).transpose(1, 2)

    q, k, v = rand(hq).requires_grad_(), rand(hkv).requires_grad_(), rand(hkv).requires_grad_()
    dy = rand(hq)
    causal = mask == "causal"

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != hq)

    f = timed(lambda i: fwd(), 10)
    y = fwd()
    g = timed(lambda i: torch.autograd.grad(y, (q, k, v), dy, retain_graph=True), 10)
    return f, g


def svg(rows, device, path):
    tc = [r for r in rows if r["kernel"] == "tc"]
    bar, gap, left, top, height, ymax = 14, 18, 60, 40, 260, 800.0
    width = left + len(tc) * (2 * bar + gap) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 170}" '
           f'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="20" font-size="13">attention, TFLOP/s: tpc tensor-core kernels (blue) vs '
           f'torch SDPA (grey), {device}</text>']
    for t in range(0, int(ymax) + 1, 100):
        y = top + height - t / ymax * height
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y + 3:.1f}" text-anchor="end">{t}</text>')
    x = left + gap
    for r in tc:
        for i, (v, color) in enumerate(((r["peer_tflops"], "#9e9e9e"), (r["tflops"], "#1f77b4"))):
            h = min(v, ymax) / ymax * height
            out.append(f'<rect x="{x + i * bar}" y="{top + height - h:.1f}" width="{bar - 1}" height="{h:.1f}" '
                       f'fill="{color}"/>')
        label = f'{r["case"]} {r["pass"]} ({r["vs_peer"]:.2f}x)'
        cx, cy = x + bar, top + height + 8
        out.append(f'<text x="{cx}" y="{cy}" transform="rotate(60 {cx} {cy})">{label}</text>')
        x += 2 * bar + gap
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin/tprt-bench-attention")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    args = ap.parse_args()
    rows = []
    for case in QUICK if args.quick else CASES:
        b, s, hq, hkv, d, mask = case
        out = subprocess.run([args.bin, *map(str, case)], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"tprt-bench-attention {' '.join(map(str, case))}: {out.stderr.strip()}", file=sys.stderr)
            return 1
        ours = {}
        for line in out.stdout.splitlines():
            w = line.split()
            ours[(w[1], w[2])] = float(w[3])
        pf, pg = peer(*case)
        flops = 4.0 * b * hq * s * s * d * (0.5 if mask == "causal" else 1.0)
        for (pas, kernel), ms in ours.items():
            pms = pf if pas == "fwd" else pg
            fl = flops * (2.5 if pas == "bwd" else 1.0)
            rows.append({"case": f"B={b} S={s} H={hq}/{hkv} D={d} {mask}", "pass": pas, "kernel": kernel, "ms": ms,
                         "tflops": fl / ms / 1e9, "peer_ms": pms, "peer_tflops": fl / pms / 1e9,
                         "vs_peer": pms / ms})
    device = torch.cuda.get_device_name()
    print(f"torch {torch.__version__}, {device}")
    print(f"{'case':34} {'pass':4} {'kernel':6} {'ms':>9} {'TF/s':>7} {'peer ms':>9} {'peer TF/s':>9} {'vs peer':>8}")
    for r in rows:
        print(f"{r['case']:34} {r['pass']:4} {r['kernel']:6} {r['ms']:9.3f} {r['tflops']:7.1f} {r['peer_ms']:9.3f} "
              f"{r['peer_tflops']:9.1f} {r['vs_peer']:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "rows": rows}, f, indent=1)
    if args.svg:
        svg(rows, device, args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
