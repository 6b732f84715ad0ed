#!/usr/bin/env python3
"""Batch and prefix invariance of an attention block in invariant numerics.

batch_invariance.py runs tokens alone; attention mixes the tokens of a sequence, so here the unit
is the sequence. For a block of test/e2e/Inputs/attention_block*.mlir (seq_len S, T tokens),
makes variants with B sequences (T = B * S) and runs `tpc-run --pipeline infer --numerics
invariant` with x, cos, sin, wq and wk from --inputs (sequence b's rows are the same in every
batch) and the other weights from --seed 7 (Philox by element index: the same for every B):

  * alone: every sequence on its own (B = 1, tp=1): the reference rows;
  * batches of B in {1, 2, 3, 5} sequences (--seqs) on tp=1, tp=2, tp=2 with sequence
    parallelism, and where B is even dp=2 and tp=2,dp=2 (dp takes whole sequences): every
    sequence's rows must be bitwise equal to that sequence run alone;
  * prefixes (decode/prefill): the first n tokens of a sequence as a module of seq_len n
    (n in --prefixes), alone on tp=1 and as a batch of two sequences on tp=2. For a causal block
    the rows must be bitwise equal to the first n rows of the whole sequence (a token's output
    does not depend on the tokens after it); for a non-causal block they must differ, which shows
    that the prefix comparison can fail.

A self-check makes sure the comparisons can fail: different sequences' rows differ, and a row
with one bit flipped is detected. Prints one line per check, a summary and PASS/FAIL (exit status
1). Works in a fresh directory under WORKDIR, removed on PASS and kept on FAIL (each mismatch names
the tpc-run command that reproduces it).

usage: sequence_invariance.py TPC_RUN MODULE WORKDIR [--seqs 1,2,3,5] [--prefixes 1,3,7]
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from reference import attention_inputs, module_spec, read_safetensors_raw, write_safetensors

SEED = "7"


def variant(text, t0, tokens, seq_len, new_seq_len):
    """The module with its token count t0 (the first dimension of x, cos, sin, q, k, v and y)
    replaced by |tokens| and its seq_len attribute by |new_seq_len|."""
    text = re.sub(r"<(\d+)x", lambda g: f"<{tokens if int(g.group(1)) == t0 else g.group(1)}x", text)
    return text.replace(f"seq_len = {seq_len} : i64", f"seq_len = {new_seq_len} : i64")


class Runner:
    def __init__(self, tpc_run, module, workdir):
        self.tpc_run, self.workdir = tpc_run, workdir
        self.text = open(module).read()
        self.spec = module_spec(module)
        self.name = os.path.splitext(os.path.basename(module))[0]
        self.t0 = self.spec["args"]["x"][0][0]
        hidden = self.spec["args"]["x"][0][1]
        if self.t0 == hidden or self.t0 % self.spec["seq_len"]:
            sys.exit(f"FAIL: {module}: cannot tell the token dimension {self.t0} apart")
        self.count = 0

    def run(self, rows, seq_len, mesh, sp, tensors, tag):
        """Runs the module on |rows| tokens in sequences of |seq_len| with the given --inputs
        tensors; returns (command, y's raw bits)."""
        base = os.path.join(self.workdir, f"{self.name}_{tag}")
        path = os.path.join(self.workdir, f"{self.name}_{rows}_{seq_len}.mlir")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(variant(self.text, self.t0, rows, self.spec["seq_len"], seq_len))
        write_safetensors(base + ".in.safetensors", tensors)
        cmd = [self.tpc_run, path, "--pipeline", "infer", "--numerics", "invariant", "--mesh", mesh,
               "--inputs", base + ".in.safetensors", "--seed", SEED, "--outputs", base + ".out.safetensors"]
        if sp:
            cmd.append("--sequence-parallel")
        p = subprocess.run(cmd, capture_output=True, text=True)
        self.count += 1
        if p.returncode != 0:
            sys.exit(f"FAIL: {shlex.join(cmd)} exited {p.returncode}:\n{p.stderr}")
        return shlex.join(cmd), read_safetensors_raw(base + ".out.safetensors")["y"][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tpc_run")
    ap.add_argument("module")
    ap.add_argument("workdir")
    ap.add_argument("--seqs", default="1,2,3,5")
    ap.add_argument("--prefixes", default="1,3,7")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="run-", dir=a.workdir)
    r = Runner(a.tpc_run, a.module, workdir)
    spec, s = r.spec, r.spec["seq_len"]
    seqs = [int(b) for b in a.seqs.split(",")]
    nmax = max(seqs)

    # Sequence b is rows [b*S, (b+1)*S) of these; the tables repeat every S rows.
    master = attention_inputs(dict(spec, args=dict(spec["args"], cos=([nmax * s, spec["head_dim"]],
                                                                     spec["args"]["cos"][1]))))
    xdt = spec["args"]["x"][1]
    master["x"] = (xdt, np.random.default_rng(3).uniform(-1.0, 1.0, (nmax * s, spec["args"]["x"][0][1])))

    def tensors(seq_ids, n=s):
        """--inputs for the sequences |seq_ids| in this order, each cut to its first n tokens."""
        rows = np.concatenate([np.arange(b * s, b * s + n) for b in seq_ids])
        return {k: (dt, v[rows]) if k in ("x", "cos", "sin") else (dt, v) for k, (dt, v) in master.items()}

    failures = []
    alone = {}
    for b in range(nmax):
        cmd, y = r.run(s, s, "tp=1", False, tensors([b]), f"alone{b}")
        alone[b] = (cmd, y)

    meshes = [("tp=1", False), ("tp=2", False), ("tp=2", True), ("dp=2", False), ("tp=2,dp=2", False)]
    batches_ok = batches = 0
    for mesh, sp in meshes:
        for nb in seqs:
            if "dp=2" in mesh and nb % 2:
                continue  # dp takes whole sequences: B must be divisible by dp
            # Sequences in reverse order, so that every one sits at another offset than alone.
            order = list(range(nb))[::-1]
            cmd, y = r.run(nb * s, s, mesh, sp, tensors(order), f"b{nb}_{mesh}{'_sp' if sp else ''}")
            bad = [b for i, b in enumerate(order) if not np.array_equal(y[i * s:(i + 1) * s], alone[b][1])]
            batches += 1
            batches_ok += not bad
            label = f"{r.name} {mesh:<9} sp={'on ' if sp else 'off'} B={nb}"
            verdict = "bitwise equal to each run alone" if not bad else "DIFFER"
            print(f"{label}: {nb} sequence{'s' if nb > 1 else ''} {verdict}")
            for b in bad:
                failures.append(f"{label}: sequence {b} differs\n  batch: {cmd}\n  alone: {alone[b][0]}")

    prefixes_ok = prefixes = 0
    causal = spec["causal"]
    for n in (int(v) for v in a.prefixes.split(",")):
        if not 1 <= n <= s:
            sys.exit(f"FAIL: prefix {n} is not in 1..seq_len = {s}")
        for mesh, ids in (("tp=1", [0]), ("tp=2", [1, 0])):
            cmd, y = r.run(n * len(ids), n, mesh, False, tensors(ids, n), f"prefix{n}_{mesh}")
            same = all(np.array_equal(y[i * n:(i + 1) * n], alone[b][1][:n]) for i, b in enumerate(ids))
            # A non-causal query sees the later tokens, so its prefix rows must differ.
            prefixes += 1
            prefixes_ok += same == causal
            print(f"{r.name} prefix n={n} {mesh}: first {n} rows of {len(ids)} sequence(s) "
                  f"{'bitwise equal to' if same else 'differ from'} the whole sequence's "
                  f"({'ok' if same == causal else 'WRONG'}: {'causal' if causal else 'not causal'})")
            if same != causal:
                failures.append(f"prefix n={n} {mesh}: {'differs' if causal else 'equal'}\n  {cmd}")

    # Self-check: the comparison can fail.
    mutants = mutants_caught = 0
    for b in range(1, nmax):
        mutants += 1
        mutants_caught += not np.array_equal(alone[b][1], alone[0][1])
    flipped = alone[0][1].copy()
    flipped[s // 2, 3] ^= 1
    print(f"self-check: different sequences' rows differ: {'ok' if mutants_caught == mutants else 'NO'} "
          f"({mutants_caught} of {mutants})")
    print(f"self-check: a one-bit change is detected: {'ok' if not np.array_equal(flipped, alone[0][1]) else 'NO'}")
    if mutants_caught != mutants or np.array_equal(flipped, alone[0][1]):
        failures.append("self-check failed: the comparison cannot fail")

    print(f"{r.name}: {batches_ok} of {batches} batches bitwise equal to their sequences run alone, "
          f"{prefixes_ok} of {prefixes} prefix checks as expected ({r.count} runs)")
    for f in failures:
        print("MISMATCH " + f)
    if failures:
        print(f"FAIL (files kept in {workdir})")
        return 1
    shutil.rmtree(workdir)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
