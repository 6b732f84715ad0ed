#!/usr/bin/env python3
"""The GPU's busy time against wall time, from an nsys profile exported to SQLite.

Usage: python3 tools/bench/gpu_busy.py PROFILE.sqlite [--skip-ms MS] [--top N]

Kernels and memory operations of every stream count as busy; overlapping intervals are merged.
Prints, over the window after --skip-ms (the warm-up), the wall time, the busy time, the idle time,
and the N longest idle gaps with the kernels that end before and start after each."""
import argparse
import sqlite3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--skip-ms", type=float, default=0.0)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    con = sqlite3.connect(a.db)
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    ev = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        q = ("select k.start, k.end, s.value from CUPTI_ACTIVITY_KIND_KERNEL k "
             "join StringIds s on s.id = coalesce(k.shortName, k.demangledName)")
        ev += [(s, e, n) for s, e, n in con.execute(q)]
    for t, name in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if t in tables:
            ev += [(s, e, name) for s, e in con.execute(f"select start, end from {t}")]
    if not ev:
        raise SystemExit("gpu_busy.py: no kernels in " + a.db)
    ev.sort()
    t0 = ev[0][0] + a.skip_ms * 1e6
    ev = [x for x in ev if x[0] >= t0]
    start, end = ev[0][0], max(x[1] for x in ev)
    busy, gaps = 0, []
    cur_s, cur_e, last = ev[0][0], ev[0][1], ev[0][2]
    for s, e, n in ev[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            gaps.append((s - cur_e, last, n))
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
        if e >= cur_e:
            last = n
    busy += cur_e - cur_s
    wall = end - start
    print(f"window {wall / 1e6:.2f} ms: busy {busy / 1e6:.2f} ms ({100 * busy / wall:.1f}%), "
          f"idle {(wall - busy) / 1e6:.2f} ms in {len(gaps)} gaps")
    small = sum(g for g, _, _ in gaps if g < 10_000)
    print(f"gaps under 10 us: {small / 1e6:.2f} ms in total")
    for g, before, after in sorted(gaps, reverse=True)[: a.top]:
        print(f"  {g / 1e3:9.1f} us  after {before[:60]}  before {after[:60]}")


if __name__ == "__main__":
    main()
