#!/usr/bin/env python3
"""The frontend's check against PyTorch on the GPU machine (no MLIR, no transformers there): runs
the modules that `python -m tpc_torch.check MODEL --stage DIR` staged on the MLIR machine with
`tpc-run --backend cuda` (worlds of more ranks than GPUs share them: --share-gpus) and compares
every result with PyTorch eager's by tpc_torch.check's rule (frontend/tpc_torch/verdict.py): in f32
the largest |error| within the tolerance times the largest |reference|; in bf16 tpc's error
against the f32 yardstick within the tolerance (3% for y, 5% for gradients) or twice PyTorch-bf16's
own error against it; in invariant numerics the hashes of every result must also be bitwise
equal at every TP degree.

Usage: frontend_check.py --tpc-run BIN [--backend cuda|cpu] DIR...   (exit 0 when every check passed,
1 otherwise; --backend cpu runs the same staged check on the CPU backend, as test/frontend does)
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from reference import read_safetensors  # noqa: E402

# The verdict's rule alone (the standard library only: no transformers on the GPU machine).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "frontend", "tpc_torch"))
import verdict  # noqa: E402


def gpus():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return max(1, len(out.stdout.strip().splitlines())) if out.returncode == 0 else 1


def error(got, ref):
    return float(np.abs(got - ref).max()) if got.size else 0.0, float(np.abs(ref).max()) if ref.size else 0.0


def check_dir(tpc_run, backend, work, ngpu):
    failures, hashes = 0, {}
    lines = [line.split() for line in open(os.path.join(work, "stage.txt")) if not line.startswith("#")]
    print(open(os.path.join(work, "stage.txt")).readline().strip("# \n"))
    for step, numerics, tp, module, ref_file, yard_file, tol_y, tol_g in lines:
        tp, tol_y, tol_g = int(tp), float(tol_y), float(tol_g)
        out = os.path.join(work, f"out-{step}-{numerics}-tp{tp}.safetensors")
        cmd = [tpc_run, os.path.join(work, module), "--backend", backend, "--inputs",
               os.path.join(work, "args.safetensors"), "--outputs", out, "--hash"]
        if backend == "cuda" and tp > ngpu:
            cmd.append("--share-gpus")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        label = f"{step} {numerics} tp={tp}"
        if proc.returncode != 0:
            print(f"{label}: tpc-run failed: {proc.stderr.strip().splitlines()[-1:]}: FAIL")
            failures += 1
            continue
        hashes.setdefault((step, numerics), {})[tp] = [h for h in proc.stdout.splitlines() if not h.startswith("NCCL")]
        got, ref = read_safetensors(out), read_safetensors(os.path.join(work, ref_file))
        yard = read_safetensors(os.path.join(work, yard_file)) if yard_file != "-" else None
        rows = []
        for name in sorted(ref, key=lambda n: (n != "y", n)):
            if name not in got:
                print(f"{label}: no result '{name}': FAIL")
                failures += 1
                continue
            err, scale = error(got[name][0], ref[name][0])
            against = None
            if yard is not None:
                e32, s32 = error(got[name][0], yard[name][0])
                against = (e32, error(ref[name][0], yard[name][0])[0], s32)
            j = verdict.judge(tol_y if name == "y" else tol_g, err, scale, against)
            rows.append((name, j))
            if name == "y" or not j.ok:
                print(f"{label} {name}: {j.text}: {'ok' if j.ok else 'FAIL'}")
        others = [r for r in rows if r[0] != "y"]
        if others:
            what = "gradients" if others[0][0].endswith("_grad") else "other results"  # a decoding step's k and v
            print(f"{label} {what}: {verdict.summary(others, tol_g)}")
        bad = sum(not j.ok for _, j in rows)
        failures += bad
    for (step, numerics), by_tp in hashes.items():
        if numerics != "invariant" or len(by_tp) < 2:
            continue
        first = next(iter(by_tp.values()))
        same = all(h == first for h in by_tp.values())
        failures += not same
        print(f"{step} invariant: {len(first)} result hashes at tp={','.join(map(str, by_tp))} "
              f"{'bitwise equal: ok' if same else 'differ: FAIL'}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tpc-run", required=True)
    ap.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    ngpu, failures = gpus() if args.backend == "cuda" else 0, 0
    for work in args.dirs:
        failures += check_dir(args.tpc_run, args.backend, work, ngpu)
    print("PASS" if failures == 0 else f"FAIL ({failures} checks)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
