#!/usr/bin/env python3
"""Plots the JSON that tools/bench/gemm.py --json writes: one bar per measurement, TFLOP/s of tpc's
kernel (by mode) next to its peer's, as an SVG (no plotting library needed).

Usage: python3 tools/bench/plot_gemm.py docs/bench/gemm-h100-2026-11-25.json docs/bench/gemm-h100-2026-11-25.svg
       [--min-flops 1e11]   (leave out the decode-sized rows, whose TFLOP/s are memory bound)
"""
import argparse
import json

COLORS = {"peer": "#9e9e9e", "fast": "#1f77b4", "invariant": "#ff7f0e", "invariant-exact": "#ffbb78",
          "exact": "#d62728"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("svg")
    ap.add_argument("--min-flops", type=float, default=1e11)
    args = ap.parse_args()
    data = json.load(open(args.json))
    groups = {}  # (kind, pass, shape) -> {mode: tflops, "peer": tflops}
    for r in data["rows"]:
        if r["flops"] < args.min_flops:
            continue
        key = (r["kind"], r["pass_"], r["shape"])
        g = groups.setdefault(key, {})
        g[r["mode"]] = r["flops"] / (r["ms"] * 1e-3) / 1e12
        g["peer"] = r["flops"] / (r["peer_ms"] * 1e-3) / 1e12
    bar, gap, left, top, height = 7, 10, 70, 40, 300
    modes = ["peer", "fast", "invariant", "invariant-exact", "exact"]
    width = left + sum(gap + bar * len(g) for g in groups.values()) + 20
    ymax = 900.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 260}" '
           f'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="20" font-size="13">tpc contraction kernels vs PyTorch, TFLOP/s '
           f'({data["device"]}, torch {data["torch"]})</text>']
    for t in range(0, 901, 100):
        y = top + height - t / ymax * height
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 5}" y="{y + 3:.1f}" text-anchor="end">{t}</text>')
    x = left
    for (kind, p, shape), g in groups.items():
        x += gap
        x0 = x
        for m in modes:
            if m not in g:
                continue
            h = min(g[m], ymax) / ymax * height
            out.append(f'<rect x="{x}" y="{top + height - h:.1f}" width="{bar - 1}" height="{h:.1f}" '
                       f'fill="{COLORS[m]}"><title>{kind} {p} {shape} {m}: {g[m]:.0f} TF/s</title></rect>')
            x += bar
        cx = (x0 + x) / 2
        out.append(f'<text transform="translate({cx:.1f},{top + height + 6}) rotate(60)" font-size="8">'
                   f'{kind} {p} {shape}</text>')
    lx = left
    for m in modes:
        out.append(f'<rect x="{lx}" y="{top - 14}" width="10" height="10" fill="{COLORS[m]}"/>'
                   f'<text x="{lx + 13}" y="{top - 5}">{m}</text>')
        lx += 95
    out.append("</svg>")
    open(args.svg, "w").write("\n".join(out))


if __name__ == "__main__":
    main()
