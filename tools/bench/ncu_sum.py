#!/usr/bin/env python3
"""Per-kernel GPU time of a run profiled by ncu, summed by kernel name and divided by the steps.

  ncu --metrics gpu__time_duration.sum --csv tpc-train ... --steps 2 > run.csv
  python3 tools/bench/ncu_sum.py run.csv 2      # ms per step and launches per step, largest first

ncu serializes the kernels, so the total is the sum of kernel times, not the step's wall time.
"""
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
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
    tot[name] += v * scale; cnt[name] += 1
steps = float(sys.argv[2])
print(f"total {sum(tot.values())/steps:.1f} ms per step over {len(data)} launches")
for k, v in tot.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 40):
    print(f"{v/steps:8.2f} ms {cnt[k]/steps:6.0f}x  {k}")
