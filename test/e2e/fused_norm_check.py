#!/usr/bin/env python3
"""Checks the f32-partial + bf16-residual case of test/e2e/Inputs/fused_norm*.mlir from its arguments.

Usage: fused_norm_check.py GROUP ARGS.safetensors OUTPUTS.safetensors [--mutant]

Every rank holds the same arguments, so the all-reduce of partial_f32 over GROUP (a power of two)
ranks is exactly GROUP·partial_f32 in f32. mixed_residual must be, bit for bit, the bf16 rounding
of the f32 sum residual + GROUP·partial_f32 (one f32 addition, one rounding); mixed_normed must be
the RMSNorm of mixed_residual within bf16 tolerance (float64 reference). --mutant rounds the sum
to bf16 before the addition (two roundings), which must FAIL.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import TOL, read_safetensors, read_safetensors_raw, rmsnorm, round_bf16  # noqa: E402


def bf16_bits(x):
    """float64 values that are bf16 numbers -> their bf16 bit patterns."""
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def main():
    argv = [a for a in sys.argv[1:] if a != "--mutant"]
    mutant = len(argv) != len(sys.argv) - 1
    group, args_path, out_path = int(argv[0]), argv[1], argv[2]
    args = read_safetensors(args_path)
    got = read_safetensors(out_path)
    raw = read_safetensors_raw(out_path)
    partial = np.float32(group) * args["partial_f32"][0].astype(np.float32)  # exact: a power of two
    residual = args["residual"][0].astype(np.float32)
    if mutant:
        partial = round_bf16(partial).astype(np.float32)
    want = round_bf16(residual + partial)  # f32 addition (numpy float32), then one bf16 rounding
    got_bits = raw["mixed_residual"][1].reshape(-1)
    wrong = int((got_bits != bf16_bits(want).reshape(-1)).sum())
    print(f"mixed_residual: {wrong} of {got_bits.size} elements differ from round_bf16(residual + {group}*partial_f32)")
    ok = wrong == 0
    ref = rmsnorm(got["mixed_residual"][0], args["gamma"][0])
    val = got["mixed_normed"][0]
    atol, rtol = TOL["BF16"]
    atol *= np.abs(ref).max()
    bad = int((np.abs(val - ref) > atol + rtol * np.abs(ref)).sum())
    print(f"mixed_normed: {bad} of {val.size} elements outside atol {atol:.3g} rtol {rtol} of the float64 RMSNorm")
    ok &= bad == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
