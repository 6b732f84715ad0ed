#!/usr/bin/env python3
"""Float64 reference for the example modules, compared with what tpc-run computed.

Usage: reference.py {mlp|moe} ARGS.safetensors OUTPUTS.safetensors [--mutant]

ARGS holds the arguments tpc-run used (--dump-args), OUTPUTS its results (--outputs). The
reference recomputes the block in float64, rounding every intermediate to the storage dtype as
the kernels do (so both take the same routing decisions), and checks each output within a
tolerance per dtype. Prints the largest errors and exits non-zero on a mismatch. The safetensors
reader is independent of tpc's C one.
"""
import json
import struct
import sys

import numpy as np

# (atol relative to the output's largest magnitude, rtol): a few units in the last place of the
# storage dtype, since the reference rounds the same intermediates and differs only in how it sums.
TOL = {"BF16": (1e-2, 2e-2), "F16": (1e-3, 2e-3), "F32": (1e-5, 1e-5)}


# Raw bits of each dtype, as unsigned integers of its width.
RAW = {"BF16": np.uint16, "F16": np.uint16, "F32": np.uint32, "F64": np.uint64, "I32": np.uint32,
       "I64": np.uint64, "I8": np.uint8, "U8": np.uint8}


def read_safetensors_raw(path):
    """{name: (dtype, raw bits as an unsigned array of the tensor's shape)}: nothing goes through a float."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], np.frombuffer(body[b:e], dtype=RAW[info["dtype"]]).reshape(info["shape"]))
    return out


def read_safetensors(path):
    out = {}
    for name, (dtype, bits) in read_safetensors_raw(path).items():
        raw = bits.reshape(-1).view({"BF16": np.uint16, "F16": np.float16, "F32": np.float32,
                                     "I32": np.int32, "I64": np.int64}[dtype])
        info = {"dtype": dtype, "shape": list(bits.shape)}
        if info["dtype"] == "BF16":
            arr = (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            arr = raw.astype(np.float64) if info["dtype"] in ("F16", "F32") else raw.copy()
        out[name] = (arr.reshape(info["shape"]), info["dtype"])
    return out


def round_bf16(x):
    """Round float64 -> float32 -> bf16 (round to nearest even), back to float64."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def rmsnorm(x, gamma, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float64(np.float32(eps))) * gamma


MUTANT = False  # --mutant: a deliberately wrong reference (gate and up swapped), which must FAIL


def swiglu(u):
    f = u.shape[-1] // 2
    g, up = u[..., :f], u[..., f:]
    if MUTANT:
        g, up = up, g
    return g / (1.0 + np.exp(-g)) * up


def mlp(a):
    x, gamma, w1, w2 = (a[k][0] for k in ("x", "gamma", "w1", "w2"))
    h = round_bf16(rmsnorm(x, gamma))
    u = round_bf16(h @ w1.T)
    act = round_bf16(swiglu(u))
    d = round_bf16(act @ w2.T)
    return {"y": round_bf16(x + d)}


def moe(a, top_k=2):
    x, router, w1, w2 = (a[k][0] for k in ("x", "router", "w1", "w2"))
    t, e = x.shape[0], router.shape[0]
    logits = round_bf16(x @ router.T)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    idx = np.argsort(-p, axis=1, kind="stable")[:, :top_k]  # ties -> lower expert
    wts = np.take_along_axis(p, idx, axis=1)
    wts /= wts.sum(axis=1, keepdims=True)
    y = np.zeros_like(x)
    for tok in range(t):
        for j in range(top_k):
            ex = idx[tok, j]
            h1 = round_bf16(x[tok] @ w1[ex].T)
            act = round_bf16(swiglu(h1))
            h2 = round_bf16(act @ w2[ex].T)
            y[tok] += wts[tok, j] * h2
    return {"y": round_bf16(y)}


def main():
    global MUTANT
    argv = [a for a in sys.argv[1:] if a != "--mutant"]
    MUTANT = len(argv) != len(sys.argv) - 1
    which, args_path, out_path = argv[:3]
    args = read_safetensors(args_path)
    got = read_safetensors(out_path)
    want = {"mlp": mlp, "moe": moe}[which](args)
    ok = True
    for name, ref in want.items():
        val, dtype = got[name]
        atol, rtol = TOL[dtype]
        atol *= np.abs(ref).max()
        err = np.abs(val - ref)
        bad = err > atol + rtol * np.abs(ref)
        print(f"{which}.{name}: max abs err {err.max():.3g}, max |ref| {np.abs(ref).max():.3g}, "
              f"{int(bad.sum())} of {bad.size} elements outside atol {atol:.3g} rtol {rtol}")
        ok &= not bad.any()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
