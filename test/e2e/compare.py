#!/usr/bin/env python3
"""Compares the tensors of two safetensors files within a tolerance per dtype.

Usage: compare.py A.safetensors B.safetensors
Prints one line per tensor (max abs difference, elements outside tolerance, whether the bits
are equal) and exits non-zero if any tensor is outside tolerance or missing from B.
"""
import sys

import numpy as np

from reference import TOL, read_safetensors


def main():
    a, b = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
    ok = True
    for name, (va, dtype) in sorted(a.items()):
        if name not in b:
            print(f"{name}: missing from {sys.argv[2]}")
            ok = False
            continue
        vb = b[name][0]
        if va.shape != vb.shape:
            print(f"{name}: shape {va.shape} vs {vb.shape}")
            ok = False
            continue
        atol, rtol = TOL[dtype]
        atol *= max(np.abs(va).max(), 1e-30)
        err = np.abs(va - vb)
        bad = int((err > atol + rtol * np.abs(va)).sum())
        print(f"{name}: max abs diff {err.max():.3g}, {bad} of {va.size} outside tolerance, "
              f"{'bitwise equal' if np.array_equal(va, vb) else 'not bitwise equal'}")
        ok &= bad == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
