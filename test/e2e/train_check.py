#!/usr/bin/env python3
"""Checks tpc-train's --json records and checkpoints (test/e2e/train-lm.test).

  train_check.py falls RUN.jsonl             the loss of the last 5 steps is below half the first's
  train_check.py same A.jsonl B.jsonl ...    every step's loss and gradient norm are bitwise equal
                                             (the records' text, without timings)
  train_check.py same-eval A.jsonl B.jsonl   every evaluation's held-out loss is bitwise equal
  train_check.py same-files A B ...          the files are byte for byte equal
  train_check.py same-tensors A B            the safetensors files hold the same tensors, byte for byte
  train_check.py flops N A.jsonl ...         every step's model_flops is N (the model's, any mesh)
  train_check.py poison SRC DST NAME ...     DST: SRC with each tensor NAME's first element NaN (f32)
"""
import json
import struct
import sys


def tensors(path):
    """name -> (dtype, shape, bytes) of a safetensors file; its header's other entries are left."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}, header, n


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
    elif mode == "flops":
        want, got = float(paths[0]), [x["model_flops"] for p in paths[1:] for x in records(p)]
        ok = len(got) > 0 and all(f == want for f in got)
        print(f"{len(got)} steps, model FLOPs {sorted(set(got))}")
    elif mode == "same-tensors":
        a, b = tensors(paths[0])[0], tensors(paths[1])[0]
        bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        ok = not bad and len(a) > 0
        print(f"{len(a)} tensors, {'identical' if ok else 'DIFFERENT: ' + ', '.join(bad[:5])}")
    elif mode == "poison":
        with open(paths[0], "rb") as f:
            data = bytearray(f.read())
        _, header, n = tensors(paths[0])
        for name in paths[2:]:
            if header.get(name, {}).get("dtype") != "F32":
                sys.exit(f"{paths[0]}: no f32 tensor {name}")
            at = 8 + n + header[name]["data_offsets"][0]
            data[at:at + 4] = struct.pack("<f", float("nan"))
            print(f"{name}[0] = NaN")
        with open(paths[1], "wb") as f:
            f.write(data)
        ok = True
    else:
        sys.exit(f"unknown mode {mode}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
