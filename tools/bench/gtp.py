#!/usr/bin/env python3
"""GTP overlap benchmark: a stack of Llama-3-8B-width MLP blocks (tools/gen_stack.py --block llama:
RMSNorm, SwiGLU MLP with H 4096 and F 14336, residual; bf16), one training step, 4096 tokens on
every rank, compiled by test/gpu/prepare_modules.sh and run by tpc-run on the CUDA backend:

  ref        one rank, the rank's 4096 tokens, whole weights: the compute alone
  dp2        two ranks, whole weights on each, gradients all-reduced (data parallelism)
  gtpG-naive G ranks (2 or 4), weights sharded over gtp = G, each all-gather started just before its
             use (--gtp-prefetch 0: nothing to overlap with)
  gtpG       the same, gathers prefetched by tp-gtp's schedule (its cost model's depth), each
             weight gradient in the form its cost model picks (--gtp-wgrad auto)
  gtpG-scatter  the same with every weight gradient reduce-scattered (--gtp-wgrad scatter)
  gtpG-keep  gathered once, kept for the backward (--gtp-keep)

in fast and invariant numerics (gtp2 also as a CUDA graph, --graph). The gtp4 configurations need
4 GPUs and are left out on fewer. Every run is `tpc-run --backend cuda --seed 7 --repeat 5 --stats`
(the slowest rank's median step). The all-gather time hidden behind compute is

  hidden = (t[gtpG-naive] - t[gtpG]) / (t[gtpG-naive] - t[ref])

(the naive schedule exposes every gather and reduce-scatter: its excess over ref is the
communication; the prefetched schedule's excess is what stays exposed). --timeline also runs ref and
gtpG with TPRT_CUDA_TIMELINE=1 and prints each rank's timeline of its last step: the collectives' busy
time and how much of it ran under the compute stream's work (--timeline=2: also every interval,
kept in the JSON, and per rank the all-gathers' busy time and its share under the model's compute,
which does not count the collectives' own work on the compute stream: a reduce-scatter's sum, a
gather's own rows). --env NAME=VALUE sets a runtime knob for every run (e.g. TPRT_CUDA_COMM_SMS=24);
--compare NAME=VALUE runs the gtp configurations again with it set, in the same lease (e.g.
TPRT_CUDA_CE_OWN_FROM_PEER=1), rows and timelines labelled with it. "weights/rank" is the
module's argument bytes per rank (tpc-run --stats: the weights and the 4096 x 4096 input and its
cotangent, 64 MiB).

--stack gtpmoe runs the same configurations of 2 Mixtral-8x7B-width MoE blocks (8 experts of F
14336, top 2), whose grouped expert weights are gathered whole per layer.

Usage: python3 tools/bench/gtp.py --tpc-run BIN --modules DIR [--stack gtp8b|gtpmoe] [--json out.json]
                                  [--svg out.svg]
       python3 tools/bench/gtp.py --plot run.json out.svg  (out-timeline.svg: the --timeline=2 lanes)
       python3 tools/bench/gtp.py --report run.json  (per run and rank of a --timeline=2 JSON: the
         collectives' own rows and sums on the compute stream, the time before its first and
         after its last model op, and the copies of results into place)
(DIR holds <stack>-{ref,dp2,gtpG-naive,gtpG,gtpG-scatter,gtpG-keep}-{fast,invariant}.so and <stack>.txt, the
stack's description; test/gpu/prepare_modules.sh stages both stacks.)
"""
import argparse
import json
import os
import re
import subprocess
import sys

from barchart import grouped_bars

CONFIGS = ["ref", "dp2"] + [f"gtp{g}{s}" for g in (2, 4) for s in ("-naive", "", "-scatter", "-keep")]
EXTRA_ENV = {}


def run(tpc_run, module, graph=False, timeline=0, extra=None):
    cmd = [tpc_run, module, "--backend", "cuda", "--seed", "7", "--repeat", "5", "--stats"]
    if graph:
        cmd.append("--graph")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", **EXTRA_ENV, **(extra or {}))
    if timeline:
        env["TPRT_CUDA_TIMELINE"] = str(timeline)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    text = out.stderr + out.stdout
    m = re.search(r"median ([0-9.]+) ms", text)
    a = re.search(r"arguments (\d+)", text)
    if out.returncode != 0 or not m:
        tail = out.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {' / '.join(tail)}")
    if timeline:  # the last step's summary line of each rank, and with 2 its intervals
        lines, intervals, current = {}, {}, {}
        for line in out.stderr.splitlines():
            t = re.match(r"tprt cuda timeline: rank (\d+): (.*)", line)
            if not t:
                continue
            r, text = int(t.group(1)), t.group(2)
            if text.startswith("contractions"):  # a step's summary follows its intervals
                lines[r], intervals[r], current[r] = text, current.get(r, []), []
            else:
                iv = text.split(maxsplit=4)  # stream begin end size what (the kernel's name has spaces)
                current.setdefault(r, []).append(
                    {"stream": iv[0], "begin": float(iv[1]), "end": float(iv[2]), "size": int(iv[3]), "op": iv[4]})
        return [f"rank {r}: {lines[r]}" for r in sorted(lines)], intervals
    return float(m.group(1)), int(a.group(1)) if a else None


# The ops the collectives run on the compute stream (TPRT_CUDA_TIMELINE=2 names them): a copy-engine
# reduce-scatter's sum at its wait, an all-gather's own rows and an all-to-all's own piece.
COLLECTIVE_WORK = ("reduce_scatter_sum", "all_gather_own", "all_to_all_own")


def union(spans):
    """The union of (begin, end) spans as sorted, disjoint spans."""
    out = []
    for b, e in sorted(spans):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def overlap(a, b):
    """The length of the intersection of two unions."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def gathers_under_compute(intervals):
    """From one rank's --timeline=2 intervals: the all-gathers' (and the weight gradients'
    all-to-alls') busy time in ms and the share of it
    under the model's compute (its ops on the compute stream; the collectives' own work there, a
    reduce-scatter's sum or a gather's own rows, does not count)."""
    gathers = union((i["begin"], i["end"]) for i in intervals if i["op"] in ("all_gather", "all_to_all"))
    model = union((i["begin"], i["end"]) for i in intervals
                  if i["stream"] == "compute" and i["op"] not in COLLECTIVE_WORK)
    busy = sum(e - b for b, e in gathers)
    return busy, (overlap(gathers, model) / busy if busy else 0.0)


def exposed(intervals):
    """From one rank's --timeline=2 intervals of a step, in ms: the collectives' own work on the
    compute stream (a gather's own rows, a reduce-scatter's sum), the time before the model's first
    op on the compute stream (the first gather, which nothing precedes) and after its last one (the
    last reduce-scatter and its sum); and the copies of results into place at the step's end (op
    "copy": a result that tp-lower-runtime could not write in place)."""
    model = [i for i in intervals if i["stream"] == "compute" and i["op"] not in COLLECTIVE_WORK]
    work = {op: sum(i["end"] - i["begin"] for i in intervals if i["op"] == op) for op in COLLECTIVE_WORK}
    start, end = min(i["begin"] for i in intervals), max(i["end"] for i in intervals)
    head = min(i["begin"] for i in model) - start if model else 0.0
    tail = end - max(i["end"] for i in model) if model else 0.0
    copies = sum(i["end"] - i["begin"] for i in intervals if i["stream"] == "compute" and i["op"] == "copy")
    return {"own rows": work["all_gather_own"] + work["all_to_all_own"], "sums": work["reduce_scatter_sum"], "before compute": head,
            "after compute": tail, "copies": copies}


def report(path):
    """Prints, from a --timeline=2 JSON, each run's exposed collective time per rank (exposed())."""
    with open(path) as f:
        data = json.load(f)
    print(f"{data.get('stack', '')}; {data.get('device', '')}: ms per step on the compute stream's timeline")
    print(f"{'run':<22} {'rank':>4} {'own rows':>9} {'sums':>7} {'before':>7} {'after':>7} {'copies':>7}")
    for key, ranks in sorted(data.get("intervals", {}).items()):
        for r, ivs in sorted(ranks.items(), key=lambda kv: int(kv[0])):
            if not ivs:
                continue
            x = exposed(ivs)
            print(f"{key:<22} {r:>4} {x['own rows']:9.3f} {x['sums']:7.3f} {x['before compute']:7.3f} "
                  f"{x['after compute']:7.3f} {x['copies']:7.3f}")
    return 0


def gpu_count():
    try:
        return len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines())
    except OSError:
        return 0


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


def timeline_svg(data, path):
    """Rank 0's last step per configuration of --timeline=2: two lanes (contractions, async
    collectives), one rectangle per interval, the time axis in ms."""
    runs = [(key, iv[min(iv, key=int)]) for key, iv in sorted(data.get("intervals", {}).items()) if iv]
    if not runs:
        return
    span = max(i["end"] for _, ivs in runs for i in ivs)
    left, width, lane, top = 150, 1000, 16, 40
    scale = width / span
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" '
           f'height="{top + len(runs) * (2 * lane + 22) + 30}" font-family="sans-serif" font-size="10">',
           f'<text x="10" y="20" font-size="13">GTP, {data["stack"]}: rank 0\'s training step, compute '
           f'(blue), the collectives\' work on the compute stream (red) and async collectives (orange) '
           f'({data["device"]})</text>']
    for t in range(0, int(span) + 1, 5):
        x = left + t * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 8}" y2="{top + len(runs) * (2 * lane + 22)}" '
                   f'stroke="#eee"/><text x="{x:.1f}" y="{top - 10}" text-anchor="middle">{t} ms</text>')
    for r, (key, ivs) in enumerate(runs):
        y = top + r * (2 * lane + 22)
        out.append(f'<text x="10" y="{y + lane + 4}">{key}</text>')
        for i in ivs:
            dy, color = (0, "#1f77b4") if i["stream"] == "compute" else (lane + 2, "#ff7f0e")
            if i["op"] in COLLECTIVE_WORK:
                color = "#d62728"
            w = max((i["end"] - i["begin"]) * scale, 0.5)
            out.append(f'<rect x="{left + i["begin"] * scale:.1f}" y="{y + dy}" width="{w:.1f}" height="{lane}" '
                       f'fill="{color}" stroke="white" stroke-width="0.3"><title>{i["op"]} {i["size"]}: '
                       f'{i["begin"]:.3f}-{i["end"]:.3f} ms</title></rect>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        return report(sys.argv[2])
    if len(sys.argv) == 4 and sys.argv[1] == "--plot":
        data = json.load(open(sys.argv[2]))
        (timeline_svg if sys.argv[3].endswith("-timeline.svg") else svg)(data, sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tpc-run", required=True)
    ap.add_argument("--modules", required=True)
    ap.add_argument("--stack", default="gtp8b", choices=("gtp8b", "gtpmoe"))
    ap.add_argument("--modes", default="fast,invariant")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="a subset of " + ",".join(CONFIGS))
    ap.add_argument("--no-graph", action="store_true", help="skip the --graph runs")
    ap.add_argument("--timeline", type=int, nargs="?", const=1, default=0,
                    help="also run gtpG with TPRT_CUDA_TIMELINE=1 (or 2) and print each rank's last step")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE set for every run")
    ap.add_argument("--compare", action="append", default=[],
                    help="NAME=VALUE: also run the gtp configurations with it set (rows and timelines labelled "
                         "with it; ref is shared), to compare a runtime knob within one lease")
    ap.add_argument("--json")
    ap.add_argument("--svg", help="the step times as a bar chart; with --timeline=2 also <name>-timeline.svg")
    a = ap.parse_args()
    EXTRA_ENV.update(kv.split("=", 1) for kv in a.env)
    configs = a.configs.split(",")
    if gpu_count() < 4 and any(c.startswith("gtp4") for c in configs):
        configs = [c for c in configs if not c.startswith("gtp4")]
        print("gtp.py: fewer than 4 GPUs: the gtp4 configurations are left out", file=sys.stderr)
    stack = open(os.path.join(a.modules, f"{a.stack}.txt")).read().strip()
    # Variants: the base runs, then each --compare knob over the gtp configurations (suffix " K=V").
    variants = [("", {})] + [(" " + kv, dict([kv.split("=", 1)])) for kv in a.compare]
    rows, t = [], {}
    for suffix, extra in variants:
        for mode in a.modes.split(","):
            for config in configs:
                if suffix and not config.startswith("gtp"):
                    continue
                module = os.path.join(a.modules, f"{a.stack}-{config}-{mode}.so")
                graphs = [False, True] if config in ("ref", "gtp2") and mode == "fast" and not a.no_graph else [False]
                for graph in graphs:
                    try:
                        ms, args_bytes = run(a.tpc_run, module, graph, extra=extra)
                    except RuntimeError as e:
                        print(f"gtp.py: {e}", file=sys.stderr)
                        return 1
                    label = mode + (" --graph" if graph else "") + suffix
                    t[(config, label)] = ms
                    rows.append({"config": config, "mode": label, "ms": ms, "argument_bytes_per_rank": args_bytes})
    hidden = {}
    for g in (2, 4):
        for suffix, _ in variants:
            for mode in a.modes.split(","):
                naive, pf = t.get((f"gtp{g}-naive", mode + suffix)), t.get((f"gtp{g}", mode + suffix))
                ref = t.get(("ref", mode))
                if naive and pf and ref and naive > ref:
                    hidden[f"gtp{g} {mode}{suffix}"] = (naive - pf) / (naive - ref)
    data = {"stack": stack, "device": device_name(), "rows": rows, "hidden": hidden, "env": EXTRA_ENV,
            "compare": a.compare}
    print(f"GTP benchmark: {stack}; {data['device']}")
    print(f"{'config':<11} {'mode':<15} {'step ms':>8} {'vs ref':>7} {'weights/rank':>13}")
    for r in rows:
        ref = t.get(("ref", r["mode"].split(" ")[0] + (" --graph" if "--graph" in r["mode"] else "")))
        gib = r["argument_bytes_per_rank"] / 2**30 if r["argument_bytes_per_rank"] else float("nan")
        print(f"{r['config']:<11} {r['mode']:<15} {r['ms']:8.2f} {r['ms'] / ref if ref else float('nan'):7.3f} "
              f"{gib:9.2f} GiB")
    for key, h in hidden.items():
        g, mode = key.split(" ", 1)
        print(f"{key}: {h * 100:.1f}% of the all-gather/reduce-scatter time hidden "
              f"(naive {t[(g + '-naive', mode)]:.2f} ms, prefetched {t[(g, mode)]:.2f} ms, "
              f"compute alone {t[('ref', mode.split(' ')[0])]:.2f} ms)")
    if a.timeline:
        data["timeline"], data["intervals"] = {}, {}
        # ref too: its contractions' busy time is what the GTP runs' contractions compare with.
        gs = sorted({c.split("-")[0] for c in configs if c.startswith("gtp")})
        for suffix, extra in variants:
            for g in ["ref"] * ("ref" in configs and not suffix) + gs:
                for mode in a.modes.split(","):
                    key = f"{g} {mode}{suffix}"
                    lines, intervals = run(a.tpc_run, os.path.join(a.modules, f"{a.stack}-{g}-{mode}.so"),
                                           timeline=a.timeline, extra=extra)
                    data["timeline"][key] = lines
                    if intervals:
                        data["intervals"][key] = intervals
                    for line in lines:
                        print(f"timeline {key}: {line}")
                    for r, ivs in sorted(intervals.items()):
                        busy, share = gathers_under_compute(ivs)
                        if busy:
                            data.setdefault("gathers", {}).setdefault(key, {})[r] = [busy, share]
                            print(f"timeline {key}: rank {r}: all-gathers {busy:.3f} ms, {share * 100:.0f}% "
                                  f"under the model's compute")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
    if a.svg:
        svg(data, a.svg)
        if data.get("intervals"):
            timeline_svg(data, a.svg[:-4] + "-timeline.svg" if a.svg.endswith(".svg") else a.svg + "-timeline.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
