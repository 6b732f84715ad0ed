#!/usr/bin/env python3
"""The GTP weight-gradient forms' plan, without a GPU: for a stack of Llama-3-8B-width MLP blocks
(tools/gen_stack.py --block llama, H 4096, F 14336, 4096 tokens per rank), one training step at
gtp 2 and 4 with tp-gtp's default schedule and --gtp-wgrad scatter, gather and auto, from
`tpc-run --count-only --stats` (nothing runs; the figures are the compiled module's): the bytes each
rank sends per step under the runtime's ring/direct model (docs/runtime.md), by collective, and the
arena (the memory plan's activations and temporaries per rank). Prints a table; --svg writes both
as bar charts. --stack gtpmoe: 2 Mixtral-8x7B-width MoE blocks (8 experts of F 14336, top 2) instead,
whose grouped expert weights' gradients take the same two forms.

Usage: python3 tools/bench/gtp_plan.py --tpc-run build/bin/tpc-run [--stack gtp8b|gtpmoe] [--layers N]
                                       [--svg out.svg]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from barchart import grouped_bars  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORMS = ("scatter", "gather", "auto")
COLOURS = {"scatter": "#888", "gather": "#2a7", "auto": "#27c"}


def plan(tpc_run, module, g, form):
    out = subprocess.run([tpc_run, module, "--pipeline", "train", "--mesh", f"gtp={g}", "--numerics", "fast",
                          "--gtp-wgrad", form, "--count-only", "--stats"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"gtp_plan: tpc-run failed at gtp={g} --gtp-wgrad {form}:\n{out.stderr[-2000:]}")
    sent = {}
    for m in re.finditer(r"stats: 0\s+(all_gather|reduce_scatter|all_to_all|all_reduce)\s+(\d+)\s+(\d+)", out.stdout + out.stderr):
        sent[m.group(1)] = int(m.group(3))
    arena = re.search(r"memory per rank: arena (\d+) bytes", out.stdout + out.stderr)
    return sent, int(arena.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tpc-run", default=os.path.join(ROOT, "build", "bin", "tpc-run"))
    ap.add_argument("--stack", choices=("gtp8b", "gtpmoe"), default="gtp8b")
    ap.add_argument("--layers", type=int, help="default: 4 (gtp8b), 2 (gtpmoe)")
    ap.add_argument("--svg")
    a = ap.parse_args()
    moe = a.stack == "gtpmoe"
    layers = a.layers or (2 if moe else 4)
    what = (f"{layers} Mixtral-8x7B-width MoE blocks (8 experts, top 2)" if moe
            else f"{layers} Llama-3-8B-width MLP blocks")
    kind = ["--kind", "moe", "--experts", "8", "--top-k", "2"] if moe else []
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for g in (2, 4):
            module = os.path.join(tmp, f"stack-{g}.mlir")
            with open(module, "w") as f:
                subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_stack.py"), "--layers", str(layers),
                                *kind, "--block", "llama", "--hidden", "4096", "--ffn", "14336", "--tokens",
                                str(4096 * g)], stdout=f, check=True)
            for form in FORMS:
                rows[(g, form)] = plan(a.tpc_run, module, g, form)
    print(f"{what}, 4096 tokens per rank, one training step, per rank:")
    print(f"{'mesh':6} {'form':8} {'all_gather GB':>14} {'reduce_scatter GB':>18} {'all_to_all GB':>14} "
          f"{'sent GB':>8} {'arena GB':>9}")
    for (g, form), (sent, arena) in rows.items():
        total = sum(v for k, v in sent.items())
        print(f"gtp={g:<2} {form:8} {sent.get('all_gather', 0) / 1e9:14.3f} {sent.get('reduce_scatter', 0) / 1e9:18.3f} "
              f"{sent.get('all_to_all', 0) / 1e9:14.3f} {total / 1e9:8.3f} {arena / 1e9:9.3f}")
    if a.svg:
        groups = []
        for what in ("sent", "arena"):
            for g in (2, 4):
                bars = []
                for form in FORMS:
                    sent, arena = rows[(g, form)]
                    bars.append((form, (sum(sent.values()) if what == "sent" else arena) / 1e9, COLOURS[form]))
                groups.append((f"gtp {g}: {'bytes sent' if what == 'sent' else 'arena'}", bars))
        grouped_bars(a.svg, f"GTP weight-gradient forms: per rank and step, GB ({what})",
                     groups, subtitle="tpc-run --count-only --stats: the compiled plan (ring/direct byte model), "
                                      "tp-gtp's default prefetch")


if __name__ == "__main__":
    main()
