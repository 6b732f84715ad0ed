import csv, sys, collections
# Sums ncu's gpu__time_duration.sum per kernel name over the last |steps| of the run's launches
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
    scale = {'nsecond': 1e-6, 'usecond': 1e-3, 'msecond': 1.0, 'second': 1e3}.get(unit, 1e-6)
    name = d['Kernel Name'][:90]
    tot[name] += v * scale; cnt[name] += 1
steps = float(sys.argv[2])
print(f"total {sum(tot.values())/steps:.1f} ms per step over {len(data)} launches")
for k, v in tot.most_common(40): print(f"{v/steps:8.2f} ms {cnt[k]/steps:6.0f}x  {k}")
