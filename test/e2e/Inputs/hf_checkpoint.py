"""Writes, into DIR, checkpoints of gen_stack.py's N-layer stack (hidden H, FFN F, bf16) for
test/e2e/checkpoint-index.test, with Hugging Face's names and layout:
  hf/model.safetensors.index.json and hf/model-0000K-of-00003.safetensors: x and, per layer i,
      model.layers.{i}.mlp.gate_proj.weight [F,H], up_proj.weight [F,H], down_proj.weight [H,F]
  rules.txt: the --weight-names rules from those names to the stack's w1_{i} = [gate; up], w2_{i}
  fused.safetensors: the same values under the stack's own names (w1_i the concatenation)
  bad-<what>/: copies of hf/ broken in one way each (see the test)
No numpy: the safetensors files are written by hand. Usage: hf_checkpoint.py DIR N H F"""
import json
import os
import random
import shutil
import struct
import sys


def bf16(values):
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        out += struct.pack("<H", (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)  # round to nearest even
    return bytes(out)


def write_safetensors(path, tensors, shapes=None):
    """tensors: [(name, shape, bytes)] in file order; shapes overrides the header's shape."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, shape, raw in tensors:
        header[name] = {"dtype": "BF16", "shape": (shapes or {}).get(name, shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    out, n, h, f = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(7)

    def rand(count, scale):
        return bf16(rng.uniform(-scale, scale) for _ in range(count))

    x = ("x", [16, h], rand(16 * h, 1.0))
    layers = []
    for i in range(n):
        p = f"model.layers.{i}.mlp."
        layers.append(((p + "gate_proj.weight", [f, h], rand(f * h, h ** -0.5)),
                       (p + "up_proj.weight", [f, h], rand(f * h, h ** -0.5)),
                       (p + "down_proj.weight", [h, f], rand(h * f, f ** -0.5))))
    hf = [x] + [t for layer in layers for t in layer]
    # Three files, the layers spread over them in order (x in the first).
    per = -(-len(hf) // 3)
    files = [hf[k:k + per] for k in range(0, len(hf), per)]
    names = [f"model-{k + 1:05d}-of-{len(files):05d}.safetensors" for k in range(len(files))]
    os.makedirs(os.path.join(out, "hf"), exist_ok=True)
    for name, ts in zip(names, files):
        write_safetensors(os.path.join(out, "hf", name), ts)
    index = {"metadata": {"total_size": sum(len(t[2]) for t in hf)},
             "weight_map": {t[0]: name for name, ts in zip(names, files) for t in ts}}
    with open(os.path.join(out, "hf", "model.safetensors.index.json"), "w") as fh:
        json.dump(index, fh, indent=2, sort_keys=True)
    with open(os.path.join(out, "rules.txt"), "w") as fh:
        fh.write("# Hugging Face Llama MLP names -> the stack's arguments\n"
                 "w1_{i} = model.layers.{i}.mlp.gate_proj.weight + model.layers.{i}.mlp.up_proj.weight\n"
                 "w2_{i} = model.layers.{i}.mlp.down_proj.weight   # row-parallel\n")
    fused = [x]
    for i, (g, u, d) in enumerate(layers):
        fused += [(f"w1_{i}", [2 * f, h], g[2] + u[2]), (f"w2_{i}", [h, f], d[2])]
    write_safetensors(os.path.join(out, "fused.safetensors"), fused)

    def bad(what):
        d = os.path.join(out, "bad-" + what)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(os.path.join(out, "hf"), d)
        return d

    d = bad("truncated")  # the index cut short
    p = os.path.join(d, "model.safetensors.index.json")
    text = open(p).read()
    open(p, "w").write(text[:len(text) // 2])
    d = bad("missing")  # a file the index names is gone
    os.remove(os.path.join(d, names[1]))
    d = bad("shape")  # down_proj of layer 1 stored as [H, F/2] (half its bytes)
    for name, ts in zip(names, files):
        if any(t[0] == "model.layers.1.mlp.down_proj.weight" for t in ts):
            write_safetensors(os.path.join(d, name),
                              [(t[0], [h, f // 2], t[2][:len(t[2]) // 2]) if t[0].endswith("1.mlp.down_proj.weight")
                               else t for t in ts])
    p = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(p))
    idx["metadata"]["total_size"] -= h * f  # consistent with the short tensor: the load finds it
    json.dump(idx, open(p, "w"))
    d = bad("both")  # a tensor held by two files
    write_safetensors(os.path.join(d, names[2]), files[2] + [files[0][1]])
    d = bad("twice")  # a tensor listed twice in the weight_map (JSON allows repeated keys)
    p = os.path.join(d, "model.safetensors.index.json")
    text = open(p).read()
    open(p, "w").write(text.replace('"weight_map": {', '"weight_map": {\n    "x": "%s",' % names[0], 1))
    d = bad("total")  # metadata.total_size wrong
    p = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(p))
    idx["metadata"]["total_size"] += 2
    json.dump(idx, open(p, "w"))


if __name__ == "__main__":
    main()
