#!/usr/bin/env python3
"""Checkpoint loading speed: a Hugging Face checkpoint of several files (model.safetensors.index.json)
read by tpc-run, against reading the same files with `dd` (the page cache's or the disk's speed).

Writes a stack of N Llama-3-8B-width MLP layers (hidden 4096, FFN 14336, SwiGLU, bf16, 16 tokens;
tools/bench/compile_time.py's stack) and a checkpoint of it under Hugging Face names
(model.layers.{i}.mlp.gate_proj / up_proj / down_proj.weight, files of at most 5 GB), with the
--weight-names rules that make tpc's fused [gate; up] weights. Then, at each TP degree, runs
`tpc-run --weights <index> --weight-names <rules> --stats` (each rank copies only its shard out of
the memory-mapped files) and reads its "read ... GB/s" line; the peer is `dd bs=16M` over the same
files right before it, in the same state of the page cache. The default N = 29 makes 10.2 GB.

Usage: python3 tools/bench/checkpoint_load.py [--build build] [--layers 29] [--tp 1,8] [--dir DIR]
           [--keep]
Prints one table, the last thing it prints.
"""
import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_time import stack  # noqa: E402

H, F = 4096, 14336


def block(seed, nbytes=1 << 20):
    """nbytes of bf16 values in [-1/64, 1/64) (no NaN, no subnormals)."""
    rng = random.Random(seed)
    out = bytearray()
    for _ in range(nbytes // 2):
        bits = struct.unpack("<I", struct.pack("<f", rng.uniform(-1 / 64, 1 / 64) or 1e-3))[0]
        out += struct.pack("<H", bits >> 16)
    return bytes(out)


def write_file(path, tensors, pattern):
    """tensors: [(name, shape)]; every tensor's bytes repeat |pattern|."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        n = 2 * shape[0] * shape[1]
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        left = offset
        while left:
            chunk = pattern[:min(left, len(pattern))]
            f.write(chunk)
            left -= len(chunk)
    return offset


def make_checkpoint(d, layers, max_bytes=5_000_000_000):
    tensors = [("x", [16, H])]
    for i in range(layers):
        p = f"model.layers.{i}.mlp."
        tensors += [(p + "gate_proj.weight", [F, H]), (p + "up_proj.weight", [F, H]), (p + "down_proj.weight", [H, F])]
    files, cur, size = [], [], 0
    for t in tensors:
        b = 2 * t[1][0] * t[1][1]
        if cur and size + b > max_bytes:
            files.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    files.append(cur)
    pattern = block(1) * 16
    names = [f"model-{k + 1:05d}-of-{len(files):05d}.safetensors" for k in range(len(files))]
    total = sum(write_file(os.path.join(d, n), ts, pattern) for n, ts in zip(names, files))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": {t[0]: n for n, ts in zip(names, files) for t in ts}}, fh, indent=2)
    with open(os.path.join(d, "rules.txt"), "w") as fh:
        fh.write("w1_{i} = model.layers.{i}.mlp.gate_proj.weight + model.layers.{i}.mlp.up_proj.weight\n"
                 "w2_{i} = model.layers.{i}.mlp.down_proj.weight\n")
    return [os.path.join(d, n) for n in names], total


def dd_gbps(paths):
    t0 = time.perf_counter()
    n = 0
    for p in paths:
        subprocess.run(["dd", f"if={p}", "of=/dev/null", "bs=16M"], check=True, stderr=subprocess.DEVNULL)
        n += os.path.getsize(p)
    return n / (time.perf_counter() - t0) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--layers", type=int, default=29)
    ap.add_argument("--tp", default="1,8")
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    d = args.dir or tempfile.mkdtemp(prefix="tpc-ckpt-")
    os.makedirs(d, exist_ok=True)
    t0 = time.perf_counter()
    paths, total = make_checkpoint(d, args.layers)
    print(f"wrote {total / 1e9:.2f} GB in {len(paths)} files to {d} ({time.perf_counter() - t0:.1f} s)", flush=True)
    mlir = os.path.join(d, "stack.mlir")
    with open(mlir, "w") as fh:
        fh.write(stack(args.layers, H, F, "fast"))
    rows = []
    for tp in [int(v) for v in args.tp.split(",")]:
        so = os.path.join(d, f"stack-tp{tp}.so")
        subprocess.run([os.path.join(args.build, "bin", "tpc-compile"), mlir, "-o", so, "--pipeline=infer",
                        f"--mesh=tp={tp}"], check=True)
        peer = dd_gbps(paths)
        run = subprocess.run([os.path.join(args.build, "bin", "tpc-run"), so, "--weights",
                              os.path.join(d, "model.safetensors.index.json"), "--weight-names",
                              os.path.join(d, "rules.txt"), "--stats"], check=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True).stderr
        m = re.search(r"read ([0-9.]+) MiB of arguments from (\d+) checkpoint files? in ([0-9.]+) s \(([0-9.]+) GB/s\)",
                      run)
        if not m:
            sys.exit("no 'read ... GB/s' line in tpc-run's output:\n" + run)
        rows.append((tp, float(m.group(1)) * 2**20 / 1e9, float(m.group(3)), float(m.group(4)), peer))
    if not args.keep and not args.dir:
        shutil.rmtree(d)
    print(f"== checkpoint load: {args.layers} Llama-3-8B-width MLP layers, {total / 1e9:.2f} GB in {len(paths)} files, "
          "Hugging Face names + --weight-names rules")
    print(f"{'tp':>3} {'GB read':>8} {'seconds':>8} {'tpc GB/s':>9} {'dd GB/s':>8} {'vs dd':>6}")
    for tp, gb, s, gbps, peer in rows:
        print(f"{tp:>3} {gb:>8.2f} {s:>8.2f} {gbps:>9.2f} {peer:>8.2f} {gbps / peer:>5.2f}x")


if __name__ == "__main__":
    main()
