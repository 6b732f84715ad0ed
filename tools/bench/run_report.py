#!/usr/bin/env python3
"""Turns tpc-run --json records into a Markdown table and an SVG bar chart for docs/performance.md.

Each input is the JSON Lines file of one run (one record per timed step and rank). A step of the
world lasts as long as its slowest rank; the table gives, per run, the median and p90 over the
steps of that time, the GEMM TFLOP/s per rank over the median step, the collective bytes a rank
sends per step, and the ratio to the first run (or --baseline). The chart (--svg, no plotting
library needed) draws the medians as bars with the p90 as a whisker.

Usage: python3 tools/bench/run_report.py fast.jsonl invariant.jsonl [--labels fast,invariant]
       [--baseline fast] [--svg out.svg] [--title "Llama-8B MLP, 1 x H100"]
"""
import argparse
import json
import os
import sys


def summarize(path):
    """Returns the run's description and its per-step figures."""
    records = [json.loads(line) for line in open(path) if line.strip()]
    if not records:
        sys.exit(f"{path}: no records (was it written by tpc-run --json?)")
    steps = {}
    for r in records:
        steps.setdefault(r["step"], []).append(r)
    worst = sorted(max(x["seconds"] for x in rs) for rs in steps.values())
    n = len(worst)
    median, p90 = worst[n // 2], worst[(9 * n + 9) // 10 - 1]
    first = steps[min(steps)]
    ranks = len(first)
    flops = sum(x["gemm_flops"] for x in first)
    sent = sum(x["comm_bytes_sent"] for x in first) / ranks
    r0 = records[0]
    return {
        "steps": n, "ranks": ranks, "median_ms": 1e3 * median, "p90_ms": 1e3 * p90,
        "tflops_per_rank": flops / ranks / median / 1e12 if median > 0 else 0.0,
        "bytes_sent": sent, "mesh": r0["mesh"], "numerics": r0["numerics"], "device": r0["device"],
        "backend": r0["backend"], "module": r0["module"],
    }


def table(rows, labels, base):
    out = ["| run | mesh | numerics | device | steps | median ms | p90 ms | TFLOP/s per rank | "
           "bytes sent per rank | vs " + labels[base] + " |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for label, r in zip(labels, rows):
        ratio = r["median_ms"] / rows[base]["median_ms"] if rows[base]["median_ms"] > 0 else float("nan")
        out.append(f"| {label} | {r['mesh']} | {r['numerics']} | {r['device']} | {r['steps']} | "
                   f"{r['median_ms']:.3f} | {r['p90_ms']:.3f} | {r['tflops_per_rank']:.2f} | "
                   f"{r['bytes_sent']:.0f} | {ratio:.2f}x |")
    return "\n".join(out)


def svg(rows, labels, title):
    bar, gap, left, top, height = 36, 24, 70, 40, 240
    top_ms = max(r["p90_ms"] for r in rows) * 1.1 or 1.0
    width = left + len(rows) * (bar + gap) + gap
    y = lambda ms: top + height - height * ms / top_ms
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 60}" '
             'font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="20" font-size="13">{title} — median step (bar), p90 (whisker), ms</text>',
             f'<line x1="{left}" y1="{top + height}" x2="{width}" y2="{top + height}" stroke="black"/>']
    for k in range(5):
        ms = top_ms * k / 4
        parts.append(f'<text x="{left - 6}" y="{y(ms) + 4:.1f}" text-anchor="end">{ms:.2f}</text>')
    for i, (label, r) in enumerate(zip(labels, rows)):
        x = left + gap + i * (bar + gap)
        parts.append(f'<rect x="{x}" y="{y(r["median_ms"]):.1f}" width="{bar}" '
                     f'height="{top + height - y(r["median_ms"]):.1f}" fill="#1f77b4"/>')
        cx = x + bar / 2
        parts.append(f'<line x1="{cx}" y1="{y(r["median_ms"]):.1f}" x2="{cx}" y2="{y(r["p90_ms"]):.1f}" '
                     'stroke="black"/>')
        parts.append(f'<text x="{cx}" y="{top + height + 14}" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{cx}" y="{y(r["median_ms"]) - 4:.1f}" text-anchor="middle">'
                     f'{r["median_ms"]:.2f}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="tpc-run --json files")
    ap.add_argument("--labels", help="comma-separated names of the runs (default: the file names, no extension)")
    ap.add_argument("--baseline", help="the label the ratios are against (default: the first run)")
    ap.add_argument("--svg", help="also write a bar chart here")
    ap.add_argument("--title", default="tpc-run")
    a = ap.parse_args()
    labels = a.labels.split(",") if a.labels else [os.path.basename(p).rsplit(".", 1)[0] for p in a.runs]
    if len(labels) != len(a.runs):
        sys.exit(f"--labels names {len(labels)} runs; {len(a.runs)} files given")
    if a.baseline and a.baseline not in labels:
        sys.exit(f"--baseline '{a.baseline}' is not one of the labels {labels}")
    rows = [summarize(p) for p in a.runs]
    print(table(rows, labels, labels.index(a.baseline) if a.baseline else 0))
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg(rows, labels, a.title))


if __name__ == "__main__":
    main()
