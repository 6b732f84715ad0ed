#!/usr/bin/env python3
"""Checks that a tensor tpc-run seeded (--seed S --dump-args) holds tpc-run's Philox values,
computed here independently with numpy: element (i, j) of a [rows, cols] matrix argument named N
is U(-1/sqrt(cols), 1/sqrt(cols)) from Philox4x32-10 with key S and counter (e/4, fnv1a(N)), word
e mod 4, e = i·cols + j (docs/runtime.md).

Usage: philox_check.py ARGS.safetensors NAME SEED
Prints "NAME: philox ok (K elements)" or the first mismatching rows, and exits non-zero on one.
"""
import sys

import numpy as np

from reference import read_safetensors

M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)


def fnv1a(name):
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h


def philox(block, stream, seed):
    """Philox4x32-10 of counters (block lo, block hi, stream lo, stream hi): 4 uint32 arrays."""
    c0 = (block & 0xFFFFFFFF).astype(np.uint32)
    c1 = (block >> np.uint64(32)).astype(np.uint32)
    c2 = np.full_like(c0, stream & 0xFFFFFFFF)
    c3 = np.full_like(c0, stream >> 32)
    k0, k1 = np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32)
    for r in range(10):
        if r:
            k0, k1 = k0 + W0, k1 + W1
        p0 = M0 * c0.astype(np.uint64)
        p1 = M1 * c2.astype(np.uint64)
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)).astype(np.uint32) ^ c1 ^ k0, p1.astype(np.uint32),
                          (p0 >> np.uint64(32)).astype(np.uint32) ^ c3 ^ k1, p0.astype(np.uint32))
    return np.stack([c0, c1, c2, c3], axis=1)


def main():
    path, name, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    w = read_safetensors(path)[name][0]
    rows, cols = w.shape[0], w.shape[-1]
    w = w.reshape(-1, cols)
    e = np.arange(w.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        words = philox(e >> np.uint64(2), fnv1a(name), seed)
    bits = words[np.arange(w.size), (e & np.uint64(3)).astype(np.int64)]
    u = (bits >> np.uint32(8)).astype(np.float64) * 2.0**-24
    a = 1.0 / np.sqrt(np.float32(cols)).astype(np.float64)
    want = (2 * a * u - a).reshape(w.shape)
    bad = np.abs(w - want) > 2.0**-7 * a  # bf16 keeps 8 bits: far below any other draw's distance
    if bad.any():
        r = np.nonzero(bad.any(axis=1))[0]
        print(f"{name}: {bad.sum()} of {w.size} elements differ from Philox (rows {r[:5].tolist()}...)")
        return 1
    print(f"{name}: philox ok ({w.size} elements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
