#!/usr/bin/env python3
"""The plot of tools/bench/generate_1b.sh's lines (its summary.txt, or a copy in docs/bench/):
decode tokens/s against batch size on log scales, tpc fast and invariant (greedy), and the peers.

  generate_report.py SUMMARY.txt --svg OUT.svg [--title T]

Lines "peer ... profile per decode step: compiled graph's kernels X ms" (generate_peer.py
--profile) are drawn as "PyTorch kernels only": B / X tokens/s, the bound its GPU work sets.
--with-peer also draws the peers' measured lines."""
import argparse
import math
import re

COLOURS = {"tpc fast": "#1f77b4", "tpc invariant": "#9ecae1", "peer": "#d62728", "peer-hf": "#ff9896",
           "PyTorch kernels only": "#fdae6b"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--svg", required=True)
    ap.add_argument("--with-peer", action="store_true", help="also the peers' measured decode lines")
    ap.add_argument("--title", default="1B Llama decoding, tokens/s (prompt 512, 256 new tokens)")
    a = ap.parse_args()
    bars = {}  # batch -> [(label, tokens/s)]
    for line in open(a.summary):
        if line.startswith("#") or "(before)" in line:
            continue
        m = re.match(r"tpc (\w+) batch (\d+) greedy .*decode_tokens_per_s ([\d.]+)", line)
        if m:
            bars.setdefault(int(m[2]), []).append((f"tpc {m[1]}", float(m[3])))
            continue
        m = re.match(r"(peer(?:-hf)?) batch (\d+) profile per decode step: compiled graph's kernels ([\d.]+) ms", line)
        if m:
            bars.setdefault(int(m[2]), []).append(("PyTorch kernels only", int(m[2]) / float(m[3]) * 1e3))
            continue
        m = re.match(r"(peer(?:-hf)?) batch (\d+) prefill.*decode_tokens_per_s ([\d.]+)", line)
        if m and a.with_peer:
            bars.setdefault(int(m[2]), []).append((m[1], float(m[3])))
    series = {}
    for b in sorted(bars):
        for name, v in bars[b]:
            series.setdefault(name, []).append((b, v))
    batches = sorted(bars)
    left, top, width, height, legend = 70, 40, 420, 300, 190
    lo = 10 ** math.floor(math.log10(min(v for s in series.values() for _, v in s)))
    hi = 10 ** math.ceil(math.log10(max(v for s in series.values() for _, v in s)))

    def px(b):
        return left + (math.log2(b) - math.log2(batches[0])) / max(1e-9, math.log2(batches[-1] / batches[0])) * width

    def py(v):
        return top + height - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * height

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + legend}" height="{top + height + 50}" '
           'font-family="sans-serif" font-size="10">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="20" font-size="13">{a.title}</text>']
    v = lo
    while v <= hi * 1.0001:
        out.append(f'<line x1="{left}" x2="{left + width}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{py(v) + 3:.1f}" text-anchor="end">{v:g}</text>')
        v *= 10
    for b in batches:
        out.append(f'<text x="{px(b):.1f}" y="{top + height + 16}" text-anchor="middle">{b}</text>')
    out.append(f'<text x="{left + width / 2}" y="{top + height + 34}" text-anchor="middle" font-size="11">batch '
               'size (sequences decoding together)</text>')
    out.append(f'<text x="18" y="{top + height / 2}" transform="rotate(-90 18 {top + height / 2})" '
               'text-anchor="middle" font-size="11">decode tokens/s</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = COLOURS.get(name, "#777")
        path = " ".join(f"{px(b):.1f},{py(v):.1f}" for b, v in pts)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for b, v in pts:
            out.append(f'<circle cx="{px(b):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}"/>')
        y = top + 10 + 16 * i
        out.append(f'<rect x="{left + width + 15}" y="{y - 8}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{left + width + 30}" y="{y + 1}">{name}: {", ".join(f"{v:.0f}" for _, v in pts)}</text>')
    out.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
