#!/usr/bin/env python3
"""The TP-invariance matrix of tp-invariant (docs/numerics.md, "TP invariance").

Runs one training step of a logical module on many meshes with `tpc-run --pipeline train --seed 7
--hash` and checks that every output and gradient hash equals the TP = 1 run's:

  dense: tp in {1, 2, 4, 8} x sequence parallel off/on x strategy canonical/gather, and
         dp=2 x tp=4 (sequence parallel off/on, both strategies)
  moe:   the same, plus ep in {2, 4, 8}, ep=2 x tp=2, dp=2 x tp=2 and dp=2 x ep=2 (both strategies)

With --gtp it runs the GTP matrix instead (weights sharded over a gtp axis, tp-gtp):
  gtp in {2, 4} x tp in {1, 2} x sequence parallel off/on x strategy canonical/gather, dp=2 x gtp=2
  x tp=2, and the schedule options --gtp-prefetch 0 / 2, --gtp-keep and --gtp-wgrad scatter /
  gather, which must not change a bit. With --pipeline infer only the outputs are compared (a forward).

With --numerics fast it checks the opposite: that some configuration differs from TP = 1, so the
matrix is known to be able to fail. Prints one line per configuration and a summary last.

usage: invariance.py TPC_RUN MODULE {dense|moe} [--numerics invariant|exact|fast] [--gtp]
                     [--pipeline train|infer] [--inputs FILE]
"""
import argparse
import subprocess
import sys


def gtp_configs():
    out = []
    for strategy in ("canonical", "gather"):
        for sp in (False, True):
            for gtp in (2, 4):
                for tp in (1, 2):
                    out.append((f"gtp={gtp},tp={tp}", sp, strategy, []))
        out.append(("dp=2,gtp=2,tp=2", False, strategy, []))
    for extra in (["--gtp-prefetch", "0"], ["--gtp-prefetch", "2"], ["--gtp-keep"]):
        out.append(("gtp=2,tp=2", False, "canonical", extra))
    # Both forms of a linear's weight gradient (tp-gtp's cost model picks one per weight): each
    # rank's partial reduce-scattered, or every gtp rank's tokens contracted for the rank's rows.
    for mesh, sp, strategy, form in (("gtp=2,tp=2", False, "canonical", "scatter"),
                                     ("gtp=4,tp=2", True, "canonical", "scatter"),
                                     ("dp=2,gtp=2,tp=2", False, "gather", "scatter"),
                                     ("dp=2,gtp=2,tp=2", True, "canonical", "gather")):
        out.append((mesh, sp, strategy, ["--gtp-wgrad", form]))
    return out


def configs(kind):
    out = []
    for strategy in ("canonical", "gather"):
        for sp in (False, True):
            for n in (1, 2, 4, 8):
                out.append((f"tp={n}", sp, strategy))
        if kind == "moe":
            # dp beside the experts: their weight gradients are summed over dp's rows, which
            # tp-invariant gathers in token order
            for mesh in ("ep=2", "ep=4", "ep=8", "ep=2,tp=2", "dp=2,tp=2", "dp=2,ep=2"):
                out.append((mesh, False, strategy))
        else:  # data parallelism: weight gradients summed over dp (and over tp tokens under SP)
            for sp in (False, True):
                out.append(("dp=2,tp=4", sp, strategy))
    return out


INPUTS = []  # --inputs FILE: arguments without a random initialisation (token ids)


def run(tpc_run, module, mesh, sp, strategy, numerics, pipeline="train", extra=()):
    cmd = [tpc_run, module, "--pipeline", pipeline, "--numerics", numerics, "--strategy", strategy,
           "--mesh", mesh, "--seed", "7", "--hash", *INPUTS, *extra]
    if sp:
        cmd.append("--sequence-parallel")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr}")
    hashes = {}
    for line in p.stdout.splitlines():
        name, shape, dtype, digest = line.split()
        hashes[name] = (shape, dtype, digest)
    return cmd, hashes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tpc_run")
    ap.add_argument("module")
    ap.add_argument("kind", choices=("dense", "moe"))
    ap.add_argument("--numerics", default="invariant", choices=("invariant", "exact", "fast"))
    ap.add_argument("--gtp", action="store_true", help="the GTP matrix")
    ap.add_argument("--pipeline", default="train", choices=("train", "infer"))
    ap.add_argument("--inputs", help="a safetensors file of the arguments tpc-run cannot draw (token ids)")
    a = ap.parse_args()
    if a.inputs:
        INPUTS.extend(["--inputs", a.inputs])
    _, ref = run(a.tpc_run, a.module, "tp=1", False, "canonical", a.numerics, a.pipeline)
    if len(ref) < (2 if a.pipeline == "train" else 1):
        sys.exit(f"FAIL: expected an output and gradients, got {sorted(ref)}")
    same = differ = 0
    runs = gtp_configs() if a.gtp else [(m, sp, st, []) for m, sp, st in configs(a.kind)]
    for mesh, sp, strategy, extra in runs:
        cmd, h = run(a.tpc_run, a.module, mesh, sp, strategy, a.numerics, a.pipeline, extra)
        bad = sorted(n for n in ref if h.get(n) != ref[n])
        label = f"{mesh:<10} sp={'on ' if sp else 'off'} {strategy:<9}{' ' + ' '.join(extra) if extra else ''}"
        print(f"{label} {'same as tp=1' if not bad else 'DIFFERS in ' + ', '.join(bad)}")
        same += not bad
        differ += bool(bad)
    total = same + differ
    print("reference (tp=1): " + " ".join(f"{n}={ref[n][2]}" for n in sorted(ref)))
    if a.numerics == "fast":
        print(f"{differ} of {total} configurations differ from tp=1 under fast numerics")
        print("PASS" if differ else "FAIL: fast numerics looked invariant; the matrix could not fail")
        return 0 if differ else 1
    print(f"{same} of {total} configurations bitwise equal to tp=1")
    print("PASS" if not differ else "FAIL")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
