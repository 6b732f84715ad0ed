#!/usr/bin/env python3
"""Checks a whole tiny language model's training step (test/e2e/Inputs/tiny_lm_f32.mlir) against an
independent float64 implementation: the per-token loss against the float64 forward, and every
gradient against central finite differences of L = sum_t loss[t] * loss_grad[t].

Usage: lm_check.py ARGS.safetensors OUTPUTS.safetensors [--mutant] [--per-param N]
       lm_check.py --write-inputs PATH [--tokens T] [--vocab V]
       lm_check.py --write-tokens PATH [--tokens N] [--vocab V] [--bad-token ID --at I]
--write-tokens writes a token file (docs/training.md) of a learnable sequence (i * 7 mod V
repeated), optionally with one bad token.
ARGS holds the step's arguments (ids, targets, the weights and the cotangent loss_grad), OUTPUTS
its results (loss and the *_grad tensors). A negative target is an ignored token (loss 0).
--mutant perturbs the expected gradients and must FAIL.
"""
import sys

import numpy as np

from reference import read_safetensors, write_safetensors_raw

EPS = np.float64(np.float32(1e-5))


def rmsnorm(x, g):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * g


def forward(p, ids, targets):
    """Per-token loss (0 for an ignored token)."""
    x = p["emb"][ids]
    h = rmsnorm(x, p["g1"])
    u = h @ p["w1"].T
    f = u.shape[-1] // 2
    a = u[:, :f] / (1.0 + np.exp(-u[:, :f])) * u[:, f:]
    y = x + a @ p["w2"].T
    z = rmsnorm(y, p["gf"]) @ p["head"].T
    m = z.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True)))[:, 0]
    keep = targets >= 0
    picked = z[np.arange(len(targets)), np.where(keep, targets, 0)]
    return np.where(keep, lse - picked, 0.0)


def write_inputs(argv):
    """Token ids (with a repeated id) and targets (with one ignored token, -100) for the step."""
    tokens = int(argv[argv.index("--tokens") + 1]) if "--tokens" in argv else 16
    vocab = int(argv[argv.index("--vocab") + 1]) if "--vocab" in argv else 64
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, tokens).astype(np.int32)
    ids[3] = ids[7]
    targets = rng.integers(0, vocab, tokens).astype(np.int32)
    targets[5] = -100
    write_safetensors_raw(argv[argv.index("--write-inputs") + 1], {"ids": ("I32", ids), "targets": ("I32", targets)})
    return 0


def write_tokens(argv):
    n = int(argv[argv.index("--tokens") + 1]) if "--tokens" in argv else 4000
    vocab = int(argv[argv.index("--vocab") + 1]) if "--vocab" in argv else 64
    toks = np.array([(i * 7) % vocab for i in range(n)], dtype=np.uint16)
    if "--bad-token" in argv:
        toks[int(argv[argv.index("--at") + 1])] = int(argv[argv.index("--bad-token") + 1])
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, n)
    with open(argv[argv.index("--write-tokens") + 1], "wb") as f:
        f.write(header.tobytes() + toks.tobytes())
    return 0


def main():
    argv = sys.argv[1:]
    if "--write-tokens" in argv:
        return write_tokens(argv)
    if "--write-inputs" in argv:
        return write_inputs(argv)
    mutant = "--mutant" in argv
    per_param = 48
    if "--per-param" in argv:
        per_param = int(argv[argv.index("--per-param") + 1])
    files = [a for a in argv if a.endswith(".safetensors")]
    args = {k: v[0] for k, v in read_safetensors(files[0]).items()}
    outs = {k: v[0] for k, v in read_safetensors(files[1]).items()}
    ids, targets = args["ids"].astype(np.int64), args["targets"].astype(np.int64)
    names = ["emb", "g1", "w1", "w2", "gf", "head"]
    p = {n: args[n].copy() for n in names}
    c = args["loss_grad"]
    ok = True
    ref = forward(p, ids, targets)
    err = np.abs(ref - outs["loss"]).max() / max(np.abs(ref).max(), 1e-30)
    ignored = targets < 0
    zeros = bool(np.all(outs["loss"][ignored] == 0.0))
    good = err < 1e-5 and zeros
    print(f"loss: max relative |tpc - float64| {err:.3g}, ignored tokens {int(ignored.sum())} "
          f"{'at 0' if zeros else 'NOT 0'} {'ok' if good else 'BAD'}")
    ok &= good
    loss = lambda q: float(np.sum(forward(q, ids, targets) * c))
    rng = np.random.default_rng(5)
    for n in names:
        flat = p[n].reshape(-1)
        # The embedding rows the batch reads, and every other parameter at random places.
        if n == "emb":
            rows = np.unique(ids)
            cand = np.concatenate([r * p[n].shape[1] + np.arange(p[n].shape[1]) for r in rows])
            unused = np.setdiff1d(np.arange(p[n].shape[0]), rows)
            if len(unused):
                cand = np.concatenate([cand, unused[0] * p[n].shape[1] + np.arange(4)])
        else:
            cand = np.arange(flat.size)
        pick = rng.choice(cand, size=min(per_param, cand.size), replace=False)
        got = outs[n + "_grad"].reshape(-1)[pick]
        fd = np.zeros(len(pick))
        h = 1e-6
        for j, i in enumerate(pick):
            old = flat[i]
            flat[i] = old + h
            up = loss(p)
            flat[i] = old - h
            down = loss(p)
            flat[i] = old
            fd[j] = (up - down) / (2 * h)
        if mutant:
            fd = fd * 1.01 + 1e-3
        err = np.abs(got - fd).max()
        scale = np.abs(fd).max()
        good = err <= 1e-4 + 1e-3 * scale
        print(f"{n}_grad: max |tpc - finite difference| {err:.3g} (max |grad| {scale:.3g}, {len(pick)} elements) "
              f"{'ok' if good else 'BAD'}")
        ok &= bool(good)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
