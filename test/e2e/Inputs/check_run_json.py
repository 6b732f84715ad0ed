#!/usr/bin/env python3
"""Checks tpc-run --json records (JSON Lines): one per timed step and rank, with the counters and
the run's description. Exits 1 with a message on the first mismatch."""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("path")
p.add_argument("--steps", type=int, required=True)
p.add_argument("--ranks", type=int, required=True)
p.add_argument("--warmup", type=int, required=True)
p.add_argument("--mesh", required=True)
p.add_argument("--flops", type=int, required=True)
p.add_argument("--bytes", type=int, required=True)
p.add_argument("--launcher", required=True)
a = p.parse_args()

records = [json.loads(line) for line in open(a.path) if line.strip()]
keys = {"step", "rank", "seconds", "gemm_flops", "comm_calls", "comm_bytes_sent", "comm_bytes_received",
        "arena_bytes", "world", "warmup", "mesh", "numerics", "backend", "device", "launcher", "module", "function"}
fail = []
if len(records) != a.steps * a.ranks:
    fail.append(f"{len(records)} records; expected {a.steps} steps x {a.ranks} ranks")
seen = {(r.get("step"), r.get("rank")) for r in records}
if seen != {(s, r) for s in range(a.steps) for r in range(a.ranks)}:
    fail.append(f"(step, rank) pairs {sorted(seen)}")
for r in records:
    if set(r) != keys:
        fail.append(f"keys {sorted(set(r) ^ keys)} differ")
        break
    want = {"world": a.ranks, "warmup": a.warmup, "mesh": a.mesh, "gemm_flops": a.flops,
            "comm_bytes_sent": a.bytes, "launcher": a.launcher, "backend": "cpu", "function": "mlp"}
    bad = {k: r[k] for k, v in want.items() if r[k] != v}
    if bad or not (r["seconds"] > 0) or not r["device"].startswith("CPU"):
        fail.append(f"record {r}: {bad or 'seconds or device'}")
        break
if fail:
    print(f"{a.path}: " + "; ".join(fail))
    sys.exit(1)
print(f"{a.path}: {len(records)} records ok")
