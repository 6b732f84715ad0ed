#!/usr/bin/env python3
"""Checks tpc-train's --json records and checkpoints (test/e2e/train-lm.test).

  train_check.py falls RUN.jsonl             the loss of the last 5 steps is below half the first's
  train_check.py same A.jsonl B.jsonl ...    every step's loss and gradient norm are bitwise equal
                                             (the records' text, without timings)
  train_check.py same-eval A.jsonl B.jsonl   every evaluation's held-out loss is bitwise equal
  train_check.py same-files A B ...          the files are byte for byte equal
"""
import json
import sys


def records(path, key="loss"):
    """The step records (those with |key|: "loss" for training steps, "val_loss" for evaluations)."""
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if key in r]


def main():
    mode, paths = sys.argv[1], sys.argv[2:]
    if mode == "falls":
        r = records(paths[0])
        first, last = r[0]["loss"], sum(x["loss"] for x in r[-5:]) / 5
        ok = last < first / 2
        print(f"loss: step 1 {first:.4f}, mean of the last 5 steps {last:.4f}")
    elif mode in ("same", "same-eval"):
        key = "loss" if mode == "same" else "val_loss"
        keys = ("step", "loss", "grad_norm", "lr") if mode == "same" else ("step", "val_loss", "val_tokens")
        ref = {x["step"]: tuple(x[k] for k in keys) for x in records(paths[0], key)}
        ok = True
        for p in paths[1:]:
            got = {x["step"]: tuple(x[k] for k in keys) for x in records(p, key)}
            bad = [s for s in got if got[s] != ref.get(s)]
            print(f"{p}: {len(got)} steps, {'same' if not bad else 'DIFFERENT at steps ' + str(bad[:5])}")
            ok &= not bad and len(got) > 0
    elif mode == "same-files":
        data = [open(p, "rb").read() for p in paths]
        ok = all(d == data[0] for d in data[1:])
        print(f"{len(paths)} files {'identical' if ok else 'DIFFER'}")
    else:
        sys.exit(f"unknown mode {mode}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
