#!/usr/bin/env python3
"""Compile time against layer count: seconds per stage and the compiler's peak memory.

For a stack of N Llama-70B-width MLP layers (hidden 8192, FFN 28672 with SwiGLU, bf16; column-
then row-parallel linears, one weight pair per layer) on a tp mesh, it times, for inference and
for a training step:
  - each pass on its own (`tpc-opt`, reading the previous stage's output): tp-autodiff (training
    only), tp-shard, tp-invariant, and lower (tp-lower-runtime + MLIR's convert-to-llvm);
  - the whole compile, `tpc-compile` (the same passes plus LLVM code generation and the link into
    a shared object): "total"; "codegen" = total minus the passes and one process start (an
    estimate: each pass run alone also parses and prints its module; a process start, timed on
    an empty module, is taken off each pass).
Peak memory is the largest resident set of any of those processes (getrusage of the child).

Usage: python3 tools/bench/compile_time.py [--build build] [--layers 10,20,40,80]
           [--tp 8] [--numerics invariant] [--json out.json] [--svg out.svg]
Prints one table, the last thing it prints. Targets (issue: 80 layers): inference <= 2 s,
training <= 5 s on the 2-core development machine.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gen_stack import stack  # noqa: E402,F401  (tools/gen_stack.py; other benchmarks import it from here)


def run(cmd):
    """(seconds, peak RSS in MiB) of |cmd|; exits on failure with its message."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"compile_time.py: {' '.join(cmd)} failed ({p.returncode}): {err.strip()[:400]}")
    return secs, usage.ru_maxrss / 1024.0


def measure(build, n, pipeline, tp, numerics, h, f, tmp):
    opt, comp = os.path.join(build, "bin", "tpc-opt"), os.path.join(build, "bin", "tpc-compile")
    src = os.path.join(tmp, f"stack{n}.mlir")
    with open(src, "w") as fh:
        fh.write(stack(n, h, f, numerics))
    # A process start (loading MLIR and LLVM) is taken off each pass run alone.
    empty = os.path.join(tmp, "empty.mlir")
    with open(empty, "w") as fh:
        fh.write("module {}\n")
    start = min(run([opt, empty, "-o", os.devnull])[0] for _ in range(3))
    stages = (["tp-autodiff"] if pipeline == "train" else []) + ["tp-shard", "tp-invariant", "lower"]
    row = dict(layers=n, pipeline=pipeline, stages={}, peak_mib=0.0)
    cur = src
    for st in stages:
        out = os.path.join(tmp, f"stack{n}.{pipeline}.{st}.mlir")
        if st == "lower":
            cmd = [opt, cur, "--tp-pipeline=lower-cpu", "-o", out]
        else:
            cmd = [opt, cur, f"--{st}", "-o", out] + (["--mesh", f"tp={tp}"] if st in ("tp-autodiff", "tp-shard") else [])
        secs, mib = run(cmd)
        row["stages"][st] = max(0.0, secs - start)
        row["peak_mib"] = max(row["peak_mib"], mib)
        cur = out
    so = os.path.join(tmp, f"stack{n}.{pipeline}.so")
    secs, mib = run([comp, src, f"--pipeline={pipeline}", f"--mesh=tp={tp}", f"--numerics={numerics}", "-o", so])
    row["total"] = secs
    row["codegen"] = max(0.0, secs - start - sum(row["stages"].values()))
    row["peak_mib"] = max(row["peak_mib"], mib)
    return row


def svg(rows, path):
    """Total seconds against layers, one line per pipeline (a plain SVG, no plotting library)."""
    w, hgt, pad = 560, 340, 50
    xs = sorted({r["layers"] for r in rows})
    ymax = max(r["total"] for r in rows) * 1.1 or 1.0
    def px(x):
        return pad + (w - 2 * pad) * (xs.index(x) / max(1, len(xs) - 1))
    def py(y):
        return hgt - pad - (hgt - 2 * pad) * y / ymax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{hgt}" font-family="sans-serif" '
           f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
           f'<line x1="{pad}" y1="{hgt - pad}" x2="{w - pad}" y2="{hgt - pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{hgt - pad}" stroke="black"/>',
           f'<text x="{w / 2}" y="{hgt - 12}" text-anchor="middle">layers</text>',
           f'<text x="14" y="{hgt / 2}" transform="rotate(-90 14 {hgt / 2})" text-anchor="middle">'
           f'compile seconds (tpc-compile)</text>']
    for x in xs:
        out.append(f'<text x="{px(x)}" y="{hgt - pad + 16}" text-anchor="middle">{x}</text>')
    for i in range(5):
        y = ymax * i / 4
        out.append(f'<text x="{pad - 6}" y="{py(y) + 4}" text-anchor="end">{y:.2f}</text>')
    for pipe, color in (("infer", "#1f77b4"), ("train", "#d62728")):
        pts = sorted((r["layers"], r["total"]) for r in rows if r["pipeline"] == pipe)
        if not pts:
            continue
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                   (color, " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)))
        lx, ly = pts[-1]
        out.append(f'<text x="{px(lx) - 4}" y="{py(ly) - 8}" text-anchor="end" fill="{color}">{pipe}</text>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--layers", default="10,20,40,80")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--numerics", default="invariant")
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--ffn", type=int, default=28672)
    ap.add_argument("--json")
    ap.add_argument("--svg")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tpc-compile-time-") as tmp:
        for n in [int(v) for v in a.layers.split(",")]:
            for pipe in ("infer", "train"):
                rows.append(measure(a.build, n, pipe, a.tp, a.numerics, a.hidden, a.ffn, tmp))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(dict(tp=a.tp, numerics=a.numerics, hidden=a.hidden, ffn=a.ffn, rows=rows), fh, indent=1)
    if a.svg:
        svg(rows, a.svg)
    print(f"== compile time: Llama-70B-width MLP stack (hidden {a.hidden}, FFN {a.ffn}), tp={a.tp}, "
          f"{a.numerics}; seconds")
    print(f"{'layers':>6} {'pipeline':8} {'autodiff':>8} {'shard':>7} {'invar.':>7} {'lower':>7} {'codegen':>8} "
          f"{'total':>7} {'peak MiB':>9}")
    for r in rows:
        s = r["stages"]
        print(f"{r['layers']:>6} {r['pipeline']:8} {s.get('tp-autodiff', 0.0):8.3f} {s['tp-shard']:7.3f} "
              f"{s['tp-invariant']:7.3f} {s['lower']:7.3f} {r['codegen']:8.3f} {r['total']:7.3f} "
              f"{r['peak_mib']:9.1f}")


if __name__ == "__main__":
    main()
