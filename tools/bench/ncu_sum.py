#!/usr/bin/env python3
"""Per-kernel GPU time of a run profiled by ncu, summed by kernel name and divided by the steps.

  ncu --metrics gpu__time_duration.sum --csv tpc-train ... --steps 2 > run.csv
  python3 tools/bench/ncu_sum.py run.csv 2      # ms per step and launches per step, largest first
  python3 tools/bench/ncu_sum.py run.csv 2 60 --by-grid   # the 60 largest (kernel, grid) pairs: a
                                                         # GEMM's shapes apart

ncu serializes the kernels, so the total is the sum of kernel times, not the step's wall time.
"""
import csv, sys, collections
by_grid = '--by-grid' in sys.argv
args = [a for a in sys.argv[1:] if a != '--by-grid']
rows = list(csv.reader(open(args[0])))
hdr = None
data = []
for r in rows:
    if 'Kernel Name' in r: hdr = r; continue
    if hdr and len(r) == len(hdr): data.append(dict(zip(hdr, r)))
tot = collections.Counter(); cnt = collections.Counter()
for d in data:
    if d.get('Metric Name') != 'gpu__time_duration.sum': continue
    v = float(d['Metric Value'].replace(',', ''))
    unit = d.get('Metric Unit', 'nsecond')
    scale = {'ns': 1e-6, 'nsecond': 1e-6, 'us': 1e-3, 'usecond': 1e-3, 'ms': 1.0, 'msecond': 1.0}[unit]
    name = d['Kernel Name'][:90]
    if by_grid: name = f"{d['Kernel Name'][:70]} grid {d.get('Grid Size', '?')}"
    tot[name] += v * scale; cnt[name] += 1
steps = float(args[1])
print(f"total {sum(tot.values())/steps:.1f} ms per step over {len(data)} launches")
for k, v in tot.most_common(int(args[2]) if len(args) > 2 else 40):
    print(f"{v/steps:8.2f} ms {cnt[k]/steps:6.0f}x  {k}")
