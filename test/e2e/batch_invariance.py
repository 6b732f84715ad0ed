#!/usr/bin/env python3
"""Batch invariance of invariant numerics: a token's output does not depend on the batch.

For a logical module written for 16 tokens (docs/examples/mlp.mlir, moe.mlir), makes M-token
variants for M in {1, 7, 64, 257} by rewriting the token dimension of every tensor type, and on
each mesh (tp=1, tp=2, tp=2 with sequence parallel where M is divisible by tp) runs
`tpc-run --pipeline infer --numerics invariant --seed 7`:

  * the M-token batch once, with --dump-args (its x) and --outputs (its y);
  * some of its tokens alone (M = 1): x = that token's row of the batch's x, given by --inputs,
    the weights from the same --seed 7 (Philox by logical element index, so the same whatever M;
    checked against the batch's dumped arguments). Sequence parallel cannot split one token, so
    the tokens of a sequence-parallel batch are run alone on the same tp without it.

Every token's output row must equal the batch's row bitwise. Also checks the prefix property: the
first rows of x are the same for every M (Philox by index), so for t < M the rows t of the M-token
and 257-token batches must be bitwise equal. A self-check makes sure the comparison can fail: a
token's row compared with the next token's, and a row with one bit flipped, must differ.

Prints one line per (mesh, M), the prefix checks, a summary and PASS/FAIL (exit status 1). Works in
a fresh directory under WORKDIR, removed on PASS and kept on FAIL (the mismatch lines name the
tpc-run commands, batch and alone, that reproduce it).

usage: batch_invariance.py TPC_RUN MODULE WORKDIR [--tokens 1,7,64,257]
"""
import argparse
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

# Comparisons are bitwise: tensors are read as raw bits (reference.read_safetensors_raw).
from reference import RAW, read_safetensors_raw as read_safetensors  # noqa: E402

SEED = "7"


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, raw array)}; the data is written as its bytes."""
    header, blobs, off = {}, [], 0
    for name, (dtype, raw) in tensors.items():
        blob = np.ascontiguousarray(raw).tobytes()
        header[name] = {"dtype": dtype, "shape": list(raw.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # upstream pads the header to 8 bytes with spaces
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def token_variant(text, m):
    """The module with its token count T (x's first dimension) replaced by m, and T * top_k (the
    permuted rows of a MoE block) by m * top_k. One regex pass, so no replacement is replaced."""
    t = int(re.search(r"%x: tensor<(\d+)x", text).group(1))
    k = re.search(r"top_k = (\d+)", text)
    sizes = {t: m}
    if k:
        sizes[t * int(k.group(1))] = m * int(k.group(1))
    return re.sub(r"<(\d+)x", lambda g: f"<{sizes.get(int(g.group(1)), int(g.group(1)))}x", text)


class Runner:
    def __init__(self, tpc_run, module, workdir):
        self.tpc_run, self.workdir = tpc_run, workdir
        with open(module) as f:
            self.text = f.read()
        self.name = os.path.splitext(os.path.basename(module))[0]
        self.modules = {}
        self.count = 0

    def module(self, m):
        if m not in self.modules:
            path = os.path.join(self.workdir, f"{self.name}_{m}.mlir")
            with open(path, "w") as f:
                f.write(token_variant(self.text, m))
            self.modules[m] = path
        return self.modules[m]

    def run(self, m, tp, sp, tag, inputs=None):
        """Runs the m-token module; returns (command, dumped arguments, outputs)."""
        base = os.path.join(self.workdir, f"{self.name}_{m}_tp{tp}{'_sp' if sp else ''}_{tag}")
        cmd = [self.tpc_run, self.module(m), "--pipeline", "infer", "--numerics", "invariant",
               "--mesh", f"tp={tp}", "--seed", SEED, "--dump-args", base + ".args.safetensors",
               "--outputs", base + ".out.safetensors", "--hash"]
        if sp:
            cmd.append("--sequence-parallel")
        if inputs is not None:
            write_safetensors(base + ".in.safetensors", inputs)
            cmd[cmd.index("--seed"):cmd.index("--seed")] = ["--inputs", base + ".in.safetensors"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        self.count += 1
        if p.returncode != 0:
            sys.exit(f"FAIL: {shlex.join(cmd)} exited {p.returncode}:\n{p.stderr}")
        return shlex.join(cmd), read_safetensors(base + ".args.safetensors"), \
            read_safetensors(base + ".out.safetensors")


def tokens_of(m):
    return list(range(m)) if m <= 8 else sorted({0, 1, m // 2, m - 2, m - 1})


def bitwise_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tpc_run")
    ap.add_argument("module")
    ap.add_argument("workdir")
    ap.add_argument("--tokens", default="1,7,64,257")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    # A fresh directory per invocation: another lit run of this test may share WORKDIR. It is
    # removed on PASS and kept on FAIL for the reproducer commands printed with each mismatch.
    workdir = tempfile.mkdtemp(prefix="run-", dir=a.workdir)
    r = Runner(a.tpc_run, a.module, workdir)
    sizes = [int(s) for s in a.tokens.split(",")]
    largest = max(sizes)
    meshes = [(1, False), (2, False), (2, True)]

    failures = []
    batches_ok = batches = tokens_checked = 0
    prefix_ok = prefixes = 0
    mutants = mutants_caught = 0
    alone = {}  # (tp, x row bytes) -> (command, y row); a token alone does not depend on the batch
    batch = {}  # (tp, sp, m) -> (command, y)

    for tp, sp in meshes:
        mesh = f"tp={tp} sp={'on ' if sp else 'off'}"
        for m in sizes:
            if sp and m % tp:
                continue  # tp-shard splits the tokens over tp ranks: M must be divisible by tp
            bcmd, bargs, bout = r.run(m, tp, sp, "batch")
            x_dtype, x = bargs["x"]
            y = bout["y"][1]
            if x.shape[0] != m or y.shape[0] != m:
                sys.exit(f"FAIL: {bcmd}: expected {m} tokens, got x {list(x.shape)}, y {list(y.shape)}")
            batch[(tp, sp, m)] = (bcmd, y)
            bad = []
            for t in tokens_of(m):
                key = (tp, x[t].tobytes())
                if key not in alone:
                    acmd, aargs, aout = r.run(1, tp, False, f"t{m}_{t}", {"x": (x_dtype, x[t:t + 1])})
                    # The token alone must see this token's x and the batch's weights.
                    for name, (dt, v) in aargs.items():
                        want = x[t:t + 1] if name == "x" else bargs[name][1]
                        if not bitwise_equal(v, want):
                            sys.exit(f"FAIL: {acmd}: argument {name} differs from the batch's ({bcmd})")
                    alone[key] = (acmd, aout["y"][1][0])
                acmd, yt = alone[key]
                tokens_checked += 1
                if not bitwise_equal(y[t], yt):
                    diff = int((y[t] != yt).sum())
                    bad.append(t)
                    failures.append(f"{r.name} {mesh} M={m} token {t}: {diff} of {yt.size} elements differ\n"
                                    f"  batch: {bcmd}\n  alone: {acmd}")
                # Self-check: the same comparison with the next token's row must see a difference.
                if m > 1:
                    mutants += 1
                    mutants_caught += not bitwise_equal(y[(t + 1) % m], yt)
            batches += 1
            batches_ok += not bad
            n = len(tokens_of(m))
            print(f"{r.name} {mesh} M={m:<3}: {n} token{'s' if n != 1 else ''} run alone"
                  f"{' (tp=' + str(tp) + ' sp=off)' if sp else ''}: "
                  + ("bitwise equal" if not bad else "DIFFER at tokens " + ", ".join(map(str, bad))))

    # Prefix property: x's first rows are the same for every M, so are y's.
    for (tp, sp, m), (cmd, y) in sorted(batch.items()):
        ref = batch.get((tp, False, largest))
        if m == largest or ref is None:
            continue
        prefixes += 1
        rcmd, ry = ref
        same = bitwise_equal(y, ry[:m])
        prefix_ok += same
        label = f"tp={tp} sp={'on ' if sp else 'off'}"
        print(f"{r.name} {label} prefix: rows 0..{m - 1} of M={m} vs M={largest} (tp={tp} sp=off): "
              + ("bitwise equal" if same else "DIFFER"))
        if not same:
            rows = [int(i) for i in np.nonzero((y != ry[:m]).any(axis=1))[0]]
            failures.append(f"{r.name} {label} prefix M={m} vs M={largest}: rows {rows[:8]} differ\n"
                            f"  M={m}: {cmd}\n  M={largest}: {rcmd}")

    # Self-check of the comparison itself: a one-bit change is a difference.
    y0 = batch[(1, False, largest)][1][0]
    flipped = y0.copy()
    flipped[0] ^= 1
    bit_ok = not bitwise_equal(y0, flipped) and bitwise_equal(y0, y0.copy())
    print(f"self-check: a different token's row differs: "
          f"{'ok' if mutants and mutants_caught == mutants else 'FAILED'} ({mutants_caught} of {mutants})")
    print(f"self-check: a one-bit change is detected: {'ok' if bit_ok else 'FAILED'}")
    for f in failures:
        print("MISMATCH: " + f)
    print(f"{r.name}: {batches_ok} of {batches} batches bitwise equal to their tokens run alone "
          f"({tokens_checked} tokens), {prefix_ok} of {prefixes} prefixes bitwise equal "
          f"({r.count} tpc-run runs)")
    ok = not failures and mutants and mutants_caught == mutants and bit_ok
    print("PASS" if ok else "FAIL")
    if ok:
        shutil.rmtree(workdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
