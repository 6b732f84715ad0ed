"""Writes a safetensors file of bf16 weights whose rows grow in magnitude, for test/e2e/gtp.test:
w[i, j] = u(i, j) * (1 + 3 i / R) with u uniform in [-1, 1), so every gtp shard (a block of rows)
has its own amax and the whole weight's amax lies in its last rows. Quantized per shard without
the amax all-reduce, such weights would get other per-tensor scales than quantized whole (seeded
uniform weights would not show it: every shard of one reaches the same largest bf16 value).
No numpy. Usage: ramp_weights.py OUT NAME:RxC [NAME:RxC ...]"""
import array
import json
import random
import struct
import sys


def bf16(values):
    bits = array.array("I")
    bits.frombytes(array.array("f", values).tobytes())
    return array.array("H", ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 for b in bits)).tobytes()  # nearest even


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    rng = random.Random(7)
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for spec in specs:
        name, shape = spec.split(":")
        rows, cols = (int(d) for d in shape.split("x"))
        raw = bf16(rng.uniform(-1.0, 1.0) * (1.0 + 3.0 * i / rows) for i in range(rows) for _ in range(cols))
        header[name] = {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    main()
