#!/usr/bin/env python3
"""The report of tools/bench/train_1b.sh: for each run in LOG (tpc-fast, tpc-invariant,
torch-eager, torch-compile: their .jsonl step records and .mem nvidia-smi samples), the median step
time over steps 3..N, tokens/s, MFU and peak GPU memory, then the ratios the benchmark's targets
name; with --plot FILE, the loss curves (matplotlib); with --svg FILE, the same curves as a plain
SVG written here (no plotting library): every run's loss at each of its steps, one coloured line
per run, with a legend.

MFU = the model's FLOPs per step over the step time and the GPU's dense bf16 peak (989 TFLOP/s for
an H100 or H200 SXM). The FLOPs per step are 6 per parameter of every matrix product per token (the
projections, the MLP and the LM head, which counts once even when tied to the embedding; the
embedding lookup is no product) plus causal attention's 6·S·Hq·D per token and layer (QKᵀ and PV,
half of the S×S scores, forward and backward).

Usage: train_report.py CONFIG.json LOG --batch B --seq-len S [--plot FILE.png] [--svg FILE.svg]
"""
import argparse
import json
import math
import os
from xml.sax.saxutils import escape

PEAK = 989e12
# The runs' colours in --svg: tpc blue and green, PyTorch orange and red.
COLOURS = {"tpc-fast": "#1f77b4", "tpc-fast-tuned": "#9467bd", "tpc-invariant": "#2ca02c", "torch-eager": "#ff7f0e", "torch-compile": "#d62728"}


def flops_per_step(c, batch, seq):
    hid, ffn, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hq, hkv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or hid // hq
    per_layer = hid * hq * d + 2 * hid * hkv * d + hq * d * hid + 3 * hid * ffn
    n_matmul = layers * per_layer + vocab * hid
    tokens = batch * seq
    return 6 * n_matmul * tokens + 6 * layers * seq * hq * d * tokens


def run(log, name):
    path = os.path.join(log, name + ".jsonl")
    if not os.path.exists(path):
        return None
    recs = [json.loads(line) for line in open(path) if line.strip()]
    steps = [r for r in recs if "loss" in r and "seconds" in r]
    if not steps:
        return None
    # tpc-train's "seconds" count from the start of training (with "tokens" so far); the peer's are
    # the step's own.
    secs = [r["seconds"] for r in steps]
    if "tokens" in steps[0]:
        secs = [secs[0]] + [b - a for a, b in zip(secs, secs[1:])]
    times = sorted(secs[2:] or secs)
    mem = None
    mp = os.path.join(log, name + ".mem")
    if os.path.exists(mp):
        vals = [int(v) for v in open(mp).read().split() if v.strip().isdigit()]
        mem = max(vals) / 1024 if vals else None
    return {"step_s": times[len(times) // 2], "loss": [r["loss"] for r in steps], "mem_gib": mem,
            "steps": [r.get("step", i + 1) for i, r in enumerate(steps)]}


def ticks(lo, hi, integer=False):
    """Round values 1, 2 or 5 times a power of ten apart, six or so, from at or below |lo| to at
    or above |hi| (whole numbers only with |integer|)."""
    if hi <= lo:
        lo, hi = (lo, lo + 1) if integer else (lo - 0.5, hi + 0.5)
    raw = (hi - lo) / 6
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1, round(step))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [k * step for k in range(first, last + 1)], step


def loss_svg(path, title, series):
    """Writes |series| ([(name, steps, losses, colour), ...]) to |path|: one polyline per run (broken
    where a loss is not finite), axes with their ticks and labels, a legend with each run's last loss."""
    left, top, width, height, legend = 70, 40, 560, 300, 200
    pts = [(x, y) for _, xs, ys, _ in series for x, y in zip(xs, ys) if math.isfinite(y)]
    xt, _ = ticks(min(x for x, _ in pts), max(x for x, _ in pts), integer=True)
    yt, ystep = ticks(min(y for _, y in pts), max(y for _, y in pts))
    ydigits = max(0, -math.floor(math.log10(ystep)))

    def px(x):
        return left + (x - xt[0]) / (xt[-1] - xt[0]) * width

    def py(y):
        return top + height - (y - yt[0]) / (yt[-1] - yt[0]) * height

    bottom = top + height
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + legend}" height="{bottom + 50}" '
           f'font-family="sans-serif" font-size="10">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="20" font-size="13">{escape(title)}</text>']
    for x in xt:
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{top}" y2="{bottom + 4}" stroke="#eee"/>'
                   f'<text x="{px(x):.1f}" y="{bottom + 16}" text-anchor="middle">{x}</text>')
    for y in yt:
        out.append(f'<line x1="{left - 4}" x2="{left + width}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 7}" y="{py(y) + 3:.1f}" text-anchor="end">{y:.{ydigits}f}</text>')
    out.append(f'<polyline fill="none" stroke="black" points="{left},{top} {left},{bottom} {left + width},{bottom}"/>')
    out.append(f'<text x="{left + width / 2}" y="{bottom + 36}" text-anchor="middle" font-size="11">step</text>')
    out.append(f'<text x="18" y="{top + height / 2}" transform="rotate(-90 18 {top + height / 2})" '
               f'text-anchor="middle" font-size="11">training loss (nats)</text>')
    for i, (name, xs, ys, colour) in enumerate(series):
        segments, cur = [], []
        for x, y in zip(xs, ys):
            if math.isfinite(y):
                cur.append(f"{px(x):.1f},{py(y):.1f}")
            elif cur:
                segments.append(cur)
                cur = []
        if cur:
            segments.append(cur)
        for seg in segments:
            if len(seg) == 1:
                cx, cy = seg[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"/>')
            else:
                out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(seg)}"/>')
        finite = [y for y in ys if math.isfinite(y)]
        ly = top + 10 + 18 * i
        lx = left + width + 16
        last = f"{finite[-1]:.4f}" if finite else "no finite loss"
        out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>'
                   f'<text x="{lx + 26}" y="{ly + 3}">{escape(name)} (last {last})</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("log")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--plot")
    ap.add_argument("--svg", help="write the loss curves to this file as SVG (no matplotlib)")
    a = ap.parse_args()
    c = json.load(open(a.config))
    flops = flops_per_step(c, a.batch, a.seq_len)
    tokens = a.batch * a.seq_len
    runs = {n: run(a.log, n) for n in ("tpc-fast", "tpc-invariant", "torch-eager", "torch-compile")}
    tuned = run(a.log, "tpc-fast-tuned")  # optional: only when that run was asked for
    if tuned:
        runs["tpc-fast-tuned"] = tuned
    print(f"model FLOPs per step {flops / 1e12:.1f} T ({tokens} tokens); peak {PEAK / 1e12:.0f} TFLOP/s")
    print(f"{'run':15} {'step ms':>9} {'tokens/s':>10} {'MFU':>6} {'peak GiB':>9}  last loss")
    for n, r in runs.items():
        if r is None:
            print(f"{n:15} (no records)")
            continue
        mfu = flops / r["step_s"] / PEAK
        mem = f"{r['mem_gib']:.1f}" if r["mem_gib"] is not None else "?"
        print(f"{n:15} {r['step_s'] * 1e3:9.1f} {tokens / r['step_s']:10.0f} {mfu:6.1%} {mem:>9}  {r['loss'][-1]:.4f}")

    def ratio(x, y, what):
        if runs[x] and runs[y]:
            print(f"{what}: {runs[y]['step_s'] / runs[x]['step_s']:.3f}x")

    ratio("tpc-fast", "torch-compile", "tpc fast speed-up over torch.compile (target >= 1.1)")
    ratio("tpc-fast", "torch-eager", "tpc fast speed-up over PyTorch eager")
    if tuned:
        ratio("tpc-fast-tuned", "torch-compile", "tpc fast, GEMM algorithms timed, over torch.compile")
        ratio("tpc-fast-tuned", "tpc-fast", "tpc fast, GEMM algorithms timed, over tpc fast")
    if runs["tpc-fast"] and runs["tpc-invariant"]:
        print(f"tpc invariant / fast step time (target <= 1.15): "
              f"{runs['tpc-invariant']['step_s'] / runs['tpc-fast']['step_s']:.3f}x")
    for n in ("tpc-fast", "tpc-invariant"):
        for p in ("torch-eager", "torch-compile"):
            if runs[n] and runs[p]:
                k = min(len(runs[n]["loss"]), len(runs[p]["loss"]))
                diff = max(abs(x - y) / abs(y) for x, y in zip(runs[n]["loss"][:k], runs[p]["loss"][:k]))
                print(f"{n} vs {p}: largest relative loss difference over {k} steps {diff:.2e}")
    if a.svg:
        series = [(n, r["steps"], r["loss"], COLOURS[n]) for n, r in runs.items()
                  if r and any(math.isfinite(v) for v in r["loss"])]
        if series:
            loss_svg(a.svg, f"1B Llama, {tokens} tokens per step: training loss", series)
        else:
            print(f"--svg {a.svg}: no finite loss in {a.log}; not written")
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for n, r in runs.items():
            if r:
                ax.plot(range(1, len(r["loss"]) + 1), r["loss"], label=n, linewidth=1.2)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (nats)")
        ax.set_title(f"1B Llama, {tokens} tokens per step")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)


if __name__ == "__main__":
    main()
