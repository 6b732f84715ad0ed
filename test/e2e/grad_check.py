#!/usr/bin/env python3
"""Checks tpc's gradients of the tiny f32 MLP block against central finite differences.

Usage: grad_check.py ARGS.safetensors OUTPUTS.safetensors [--mutant]
ARGS holds the arguments of the training step (x, gamma, w1, w2 and the cotangent y_grad; with
a beta argument the block normalises with a layernorm instead of an rmsnorm),
OUTPUTS its results (y and the *_grad tensors). The loss is L = sum(y * y_grad), so dL/dp is
exactly what the training step returns for every argument p. Finite differences are taken in
float64 on an independent forward implementation; --mutant perturbs the expected gradients and
must FAIL.
"""
import sys

import numpy as np

from reference import read_safetensors


def forward(x, gamma, w1, w2, beta=None, eps=np.float64(np.float32(1e-5))):
    if beta is None:
        h = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma
    else:
        c = x - np.mean(x, axis=-1, keepdims=True)
        h = c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps) * gamma + beta
    u = h @ w1.T
    f = u.shape[-1] // 2
    g, up = u[:, :f], u[:, f:]
    a = g / (1.0 + np.exp(-g)) * up
    return x + a @ w2.T


def main():
    argv = [a for a in sys.argv[1:] if a != "--mutant"]
    mutant = len(argv) != len(sys.argv) - 1
    args = {k: v[0] for k, v in read_safetensors(argv[0]).items()}
    outs = {k: v[0] for k, v in read_safetensors(argv[1]).items()}
    names = ["x", "gamma", "w1", "w2"] + (["beta"] if "beta" in args else [])
    c = args["y_grad"]
    loss = lambda p: float(np.sum(forward(*[p[n] for n in names]) * c))
    ok = True
    for n in names:
        p = {k: args[k].copy() for k in names}
        fd = np.zeros_like(p[n])
        h = 1e-6
        for idx in np.ndindex(p[n].shape):
            old = p[n][idx]
            p[n][idx] = old + h
            up = loss(p)
            p[n][idx] = old - h
            down = loss(p)
            p[n][idx] = old
            fd[idx] = (up - down) / (2 * h)
        if mutant:
            fd = fd * 1.01 + 1e-3
        got = outs[n + "_grad"]
        err = np.abs(got - fd).max()
        scale = np.abs(fd).max()
        good = err <= 1e-4 + 1e-3 * scale
        print(f"{n}_grad: max |tpc - finite difference| {err:.3g} (max |grad| {scale:.3g}) {'ok' if good else 'BAD'}")
        ok &= bool(good)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
