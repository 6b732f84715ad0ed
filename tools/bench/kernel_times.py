#!/usr/bin/env python3
"""Per-kernel GPU time of one tpc-run step, from Nsight Compute's CSV: every kernel's
gpu__time_duration summed by kernel name over the second half of the launches (with
`--warmup 1 --repeat 1`, tpc-run runs one warm-up step, then the timed one: the second half is the
timed step; with `--repeat 1` alone there is no warm-up and the second half is half a step),
largest first.

Usage (on the GPU machine):
  ncu --metrics gpu__time_duration.sum --csv --page raw tpc-run MODULE.so --backend cuda --seed 7 \
    --warmup 1 --repeat 1 > k.csv
  python3 tools/bench/kernel_times.py k.csv [--top 20] [--order]
(--order: every launch of the step instead, in launch order, with its own time.)
"""
import argparse
import collections
import csv
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--order", action="store_true", help="every launch of the step in order")
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv)))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    names = rows[head]
    launches = [r for r in rows[head + 1:] if len(r) == len(names) and r[0].isdigit()]
    kernel, time = names.index("Kernel Name"), names.index("gpu__time_duration.sum")
    step = [(re.sub(r"\(.*", "", r[kernel])[:100], float(r[time].replace(",", "")) / 1e3)  # ns -> us
            for r in launches[len(launches) // 2:]]
    if args.order:
        for name, us in step:
            print(f"{us:10.1f} us  {name}")
        return
    total = collections.defaultdict(lambda: [0, 0.0])
    for name, us in step:
        total[name][0] += 1
        total[name][1] += us
    print(f"{len(launches)} launches; the second half: {sum(v[1] for v in total.values()):.0f} us")
    for name, (calls, us) in sorted(total.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{us:10.1f} us {calls:4d}x  {name}")


if __name__ == "__main__":
    main()
