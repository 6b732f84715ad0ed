#!/usr/bin/env python3
"""Writes the seed corpora and dictionaries of the fuzz harnesses (test/fuzz/README.md).

Nothing binary is checked in: the seeds are derived from the repository at run time.
  seeds/parse/             every `// -----` case of every .mlir file under test/, docs/examples
                           and tools/bench, comment lines removed
  seeds/pipeline/          the cases of files that are meant to verify, each behind two control
                           bytes (fuzz_pipeline.c: pipeline, mesh, verify-each, numerics)
  seeds/safetensors/       small valid files: every dtype tpc reads, unsupported ones, rank 0 and
                           rank 8, empty tensors, metadata, data in another order than the header
  seeds/checkpoint_index/  indexes over the files fuzz_checkpoint_index.c writes
  seeds/manifest/          the manifests in test/fuzz/seeds/manifest (what tp-lower-runtime embeds)
  dict/<harness>.dict      libFuzzer dictionaries: the tp dialect's op, attribute, enum and type
                           tokens collected from dialect/tp.irdl.mlir and dialect/tpc_dialect.h,
                           MLIR syntax, and the JSON keys the runtime's readers look up

Usage: make_corpus.py --out DIR   (DIR/seeds/<harness>, DIR/dict/<harness>.dict; replaced)
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLIR_DIRS = ["test", "docs/examples", "tools/bench"]

# fuzz_pipeline.c's control byte: bits 0-1 pipeline, 2-4 mesh, 5 verify-each, 6-7 numerics.
PIPELINES = 4
MESHES = 8


def mlir_cases(path):
    """The `// -----` cases of |path|, without comment lines (RUN and CHECK lines included)."""
    cases = re.split(r"^// -----.*$", path.read_text(errors="replace"), flags=re.M)
    out = []
    for case in cases:
        lines = [l for l in case.splitlines() if not l.lstrip().startswith("//")]
        text = "\n".join(lines).strip()
        if text:
            out.append(text + "\n")
    return out


def meant_to_verify(path):
    """Files whose cases are valid modules: not the error tests or the parser's bad inputs."""
    name = path.name
    return not any(word in name for word in ("invalid", "errors", "hazard", "foreign", "split"))


def write_seed(directory, name, data):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def mlir_seeds(out):
    files = sorted(p for d in MLIR_DIRS for p in (ROOT / d).rglob("*.mlir") if "gpu" not in p.parts)
    seen = set()
    n = 0
    for path in files:
        rel = path.relative_to(ROOT).as_posix().replace("/", "_")
        for i, case in enumerate(mlir_cases(path)):
            if case in seen:
                continue
            seen.add(case)
            write_seed(out / "parse", f"{rel}.{i}", case)
            if meant_to_verify(path):
                # Two control bytes per case, spread over pipelines, meshes and numerics. A case
                # that declares its own mesh keeps it in the first; one that already holds
                # collectives is a per-rank program, which only lowers (pipeline lower-cpu).
                for k in range(2):
                    j = 2 * n + k
                    control = (j % PIPELINES) | ((1 + j // PIPELINES % (MESHES - 1)) << 2)
                    control |= (j // 7 % 2) << 5 | (j // 11 % 4) << 6
                    if k == 0 and "tp.mesh" in case:
                        control &= ~(7 << 2)
                        if re.search(r"tp\.(all_|reduce_scatter|fused_)", case):
                            control = control & ~3 | 3
                    write_seed(out / "pipeline", f"{rel}.{i}.{control:02x}", bytes([control]) + case.encode())
                n += 1


# Bits per element of every safetensors dtype (runtime/tprt_safetensors_header.c reads them all).
ST_BITS = {"BF16": 16, "F16": 16, "F32": 32, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F4": 4, "I32": 32,
           "I64": 64, "BOOL": 8, "U8": 8, "I8": 8, "I16": 16, "U16": 16, "U32": 32, "U64": 64, "F64": 64,
           "C64": 64, "F6_E2M3": 6, "F6_E3M2": 6, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8}


def safetensors(tensors, metadata=None, order=None):
    """A safetensors file holding |tensors| [(name, dtype, shape)], data laid out in |order|."""
    header, blobs, offset = {}, {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in (order or tensors):
        count = 1
        for d in shape:
            count *= d
        size = (count * ST_BITS[dtype] + 7) // 8
        blobs[name] = bytes((offset + k * 37) & 0xFF for k in range(size))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    # The header's member order is |tensors|'s, which may differ from the data's.
    ordered = {"__metadata__": header["__metadata__"]} if metadata is not None else {}
    for name, _, _ in tensors:
        ordered[name] = header[name]
    text = json.dumps(ordered, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    data = b"".join(blobs[name] for name, _, _ in (order or tensors))
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds(out):
    d = out / "safetensors"
    write_seed(d, "two", safetensors([("w", "F32", [2, 2]), ("bias", "BF16", [3])], {"format": "pt"}))
    supported = [("bf16", "BF16", [2, 3]), ("f16", "F16", [4]), ("f32", "F32", [1, 1, 2]), ("e4m3", "F8_E4M3", [5]),
                 ("e5m2", "F8_E5M2", [2, 2]), ("e8m0", "F8_E8M0", [3]), ("f4_odd", "F4", [3]), ("f4", "F4", [2, 2]),
                 ("scalar", "I32", []), ("i64", "I64", [2])]
    write_seed(d, "every-dtype", safetensors(supported))
    write_seed(d, "unsupported", safetensors([("f64", "F64", [2]), ("mask", "BOOL", [3]), ("f6", "F6_E2M3", [4]),
                                              ("ok", "BF16", [2])], {"format": "pt", "note": "mixed"}))
    write_seed(d, "empty-tensors", safetensors([("none", "F32", [0, 4]), ("mid", "BF16", [2, 0, 3]),
                                                ("x", "I64", [1])]))
    write_seed(d, "rank8", safetensors([("r8", "BF16", [1, 1, 1, 1, 1, 1, 2, 3]), ("col", "F4", [3, 5])]))
    tensors = [("a.weight", "F32", [3, 4]), ("b.weight", "F16", [4, 3]), ("c", "F8_E4M3", [2, 2, 2])]
    write_seed(d, "reordered", safetensors(tensors, order=list(reversed(tensors))))
    write_seed(d, "no-tensors", safetensors([], {"format": "pt"}))
    write_seed(d, "unicode", safetensors([("layers.0.é", "BF16", [2]), ("\u4e2d", "F32", [1])], {"k\u00e9y": "v"}))


# The checkpoint that fuzz_checkpoint_index.c writes: file -> [(tensor, bytes)].
INDEX_FILES = {"model-00001-of-00002.safetensors": [("a", 16), ("b", 6)],
               "model-00002-of-00002.safetensors": [("c", 8), ("d.weight", 2)],
               "model.safetensors": [("a", 16)], "sub/e.safetensors": [("e", 4)]}


def index_seeds(out):
    d = out / "checkpoint_index"

    def index(files, total=True, extra=None):
        weight_map = {t: f for f in files for t, _ in INDEX_FILES[f]}
        size = sum(b for f in files for _, b in INDEX_FILES[f])
        doc = {"metadata": dict(extra or {}, **({"total_size": size} if total else {})), "weight_map": weight_map}
        return json.dumps(doc, indent=2)

    write_seed(d, "two-files", index(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]))
    write_seed(d, "no-total", index(["model-00001-of-00002.safetensors"], total=False))
    write_seed(d, "single", index(["model.safetensors"], extra={"format": "pt"}))
    write_seed(d, "subdir", index(["sub/e.safetensors", "model-00002-of-00002.safetensors"]))
    write_seed(d, "weight-map-only", json.dumps({"weight_map": {"a": "model.safetensors"}}))


def manifest_seeds(out):
    for path in sorted((ROOT / "test/fuzz/seeds/manifest").glob("*.json")):
        write_seed(out / "manifest", path.name, path.read_bytes())


def cli_seeds(out):
    """argv of every tpc-run and tpc-opt command in the lit tests: a byte for the parser (0 tpc-run,
    1 tpc-opt), then the words after the tool's name, NUL-separated, up to a pipe or redirection."""
    n = 0
    for path in sorted((ROOT / "test").rglob("*")):
        if path.suffix not in (".test", ".mlir") or not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            for tool, byte in (("tpc-run ", b"\x00"), ("tpc-opt ", b"\x01")):
                at = line.find(tool)
                if "RUN:" not in line or at < 0:
                    continue
                words = []
                for w in line[at + len(tool):].split():
                    if w in ("|", "||", "&&", ";") or w[0] in "<>" or w[:2] in ("2>", "1>"):
                        break
                    words.append(w.strip("'"))
                write_seed(out / "cli", f"argv-{n}", byte + b"\x00".join(w.encode() for w in words))
                n += 1


def cli_tokens():
    """The options of the tools' tables, and values they take."""
    tokens = []
    for path in [ROOT / "tools/tpc-run/tpc_run_args.c", ROOT / "tools/tpc-opt/tpc_opt_args.c"]:
        tokens += [f"--{name}" for name in re.findall(r'^\s*\{"([a-z][\w-]*)", ', path.read_text(), flags=re.M)]
    tokens += [f"--{p}" for p in re.findall(r'\{"(tp-[\w-]+)", "', (ROOT / "lowering/pipeline.c").read_text())]
    return tokens + ["-h", "--help", "--version", "--", "-", "=", "-o", "tp=2", "tp=4,dp=2", "ep=2", "infer", "train",
                     "fast", "invariant", "exact", "canonical", "gather", "cpu", "cuda", "m.so", "m.mlir", "\x00",
                     "builtin.module(", ")", "{", "}", "mesh=", "numerics=", "sequence-parallel=true", ",",
                     "canonicalize", "func.func(cse)", "0", "1", "18446744073709551616", "-1"]


def dict_line(token):
    """One libFuzzer dictionary entry: printable ASCII as is, quotes and backslashes escaped."""
    body = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else
                   "".join(f"\\x{b:02x}" for b in c.encode()) for c in token)
    return f'"{body}"'


def write_dict(out, name, tokens):
    path = out / "dict" / f"{name}.dict"
    path.parent.mkdir(parents=True, exist_ok=True)
    unique = sorted(set(t for t in tokens if t))
    path.write_text(f"# {name}: generated by test/fuzz/make_corpus.py\n" + "".join(dict_line(t) + "\n" for t in unique))


# MLIR syntax the harnesses' inputs are written in, and the element types tp uses (and some it
# refuses).
MLIR_TOKENS = ["module", "attributes", "func.func", "func.return", "return", "tensor<", "x", "->", ":", "%", "@",
               "loc(", "#loc", "!tp.future<tensor<", "array<i64: ", "array<i64>", "dense<", "true", "false", "unit",
               " : i64", " : i32", " : f32", "1.0e-05 : f32", "{tp.name = \"x\"}", "// -----", "\"() {", "} : () -> ()",
               "bf16", "f16", "f32", "f64", "i1", "i8", "i32", "i64", "index", "f8E4M3FN", "f8E5M2", "f8E8M0FNU",
               "f4E2M1FN", "complex<f32>", "?x", "0x", "9223372036854775807", "4096", "-1"]
ST_TOKENS = ["__metadata__", "dtype", "shape", "data_offsets", "format", "pt", "9007199254740992",
             "9007199254740993", "18446744073709551615", "1e3", "-0", "[]", "[0, 0]", "{}"] + list(ST_BITS)
INDEX_TOKENS = ["weight_map", "metadata", "total_size", "32", "..", "/", "sub/"] + [
    t for f in INDEX_FILES for t in [f] + [n for n, _ in INDEX_FILES[f]]]


def tp_tokens():
    irdl = (ROOT / "dialect/tp.irdl.mlir").read_text()
    ops = re.findall(r"irdl\.operation @(\w+)", irdl)
    tokens = [f"tp.{op}" for op in ops] + [f'"tp.{op}"' for op in ops]
    tokens += [f"!tp.{t}" for t in re.findall(r"irdl\.type @(\w+)", irdl)]
    tokens += re.findall(r'"(\w+)" = %', irdl)                       # required attributes
    for block in re.findall(r"tp\.optional_attributes = \{(.*?)\}\}", irdl, flags=re.S):
        tokens += re.findall(r"(\w+) = ", block)                     # optional attributes
        tokens += [f'"{s}"' for s in re.findall(r'"(\w+)"', block)]  # their enumerations
    tokens += [f'"{s}"' for s in re.findall(r'irdl\.is "(\w+)"', irdl)]
    for group in re.findall(r"irdl\.(?:operands|results)\(([^)]*)\)", irdl):
        tokens += re.findall(r"(\w+):", group)                      # operand and result names
    header = (ROOT / "dialect/tpc_dialect.h").read_text()
    tokens += re.findall(r'#define TPC_\w+ "(tp\.\w+)"', header)
    tokens += ['"fast"', '"invariant"', '"exact"', '"canonical"', '"gather"', '"world"', "@world"]
    return tokens


def manifest_tokens():
    keys = []
    for path in sorted((ROOT / "lowering").glob("lower_runtime*.c")) + [ROOT / "runtime/tprt_module.c"]:
        text = path.read_text()
        keys += re.findall(r'cJSON_Add\w*ToObject\(\w+, "(\w+)"', text)
        keys += re.findall(r'cJSON_GetObjectItemCaseSensitive\(\w+, "(\w+)"', text)
    dtypes = ["bf16", "f16", "f32", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "i32", "i64", "BF16", "F8_E4M3"]
    return [f'"{k}"' for k in keys] + keys + dtypes + ["tpc_entry_", "!", "1e300", "-1", "2147483648", "tp,dp"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    args = parser.parse_args()
    for sub in ("seeds", "dict"):
        shutil.rmtree(args.out / sub, ignore_errors=True)
    seeds = args.out / "seeds"
    mlir_seeds(seeds)
    safetensors_seeds(seeds)
    index_seeds(seeds)
    manifest_seeds(seeds)
    cli_seeds(seeds)
    json_common = ["{", "}", "[", "]", ":", ",", '""', "null", "true", "false", "0", "1", "-1", "1e308", "\\u0000"]
    write_dict(args.out, "parse", tp_tokens() + MLIR_TOKENS)
    write_dict(args.out, "pipeline", tp_tokens() + MLIR_TOKENS)
    write_dict(args.out, "safetensors", ST_TOKENS + json_common)
    write_dict(args.out, "checkpoint_index", INDEX_TOKENS + json_common)
    write_dict(args.out, "manifest", manifest_tokens() + json_common)
    write_dict(args.out, "cli", cli_tokens())
    for h in sorted(os.listdir(seeds)):
        print(f"{h}: {len(os.listdir(seeds / h))} seeds")


if __name__ == "__main__":
    main()
