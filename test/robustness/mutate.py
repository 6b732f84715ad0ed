#!/usr/bin/env python3
"""Robustness check: run a tool over truncated and mutated copies of test inputs.

The tool may reject any input (exit status 1 with a diagnostic) but must never die from a
signal, hang, exit with another status, print a sanitizer report, or exit 0 while printing an
error. Mutations are deterministic for a given --seed, so a failure is reproducible: the failing
input is written next to the report.

Usage: mutate.py --tool tpc-opt [--tool-args "..."] [--count N] [--seed S] [--out DIR] FILE_OR_DIR...
"""
import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys

# Replacements that push the verifier and parser into corners: huge, zero and negative sizes,
# other element types, other enum values, other attribute kinds.
TOKEN_SWAPS = [
    (r"\b\d+\b", ["0", "1", "-1", "3", "7", "4096", "9223372036854775807", "99999999999999999999"]),
    (r"\bbf16\b|\bf16\b|\bf32\b|\bi32\b|\bi64\b",
     ["f64", "i1", "f8E4M3FN", "f8E8M0FNU", "f4E2M1FN", "index", "complex<f32>", "i32", "bf16"]),
    (r'"[a-z_0-9]+"', ['"row"', '"column"', '"expert"', '"canonical"', '"nvfp4"', '"mxfp8"', '""', '"tp"', '"zz"']),
    (r"tensor<", ["tensor<?x", "tensor<0x", "tensor<*x", "memref<", "vector<", "!tp.future<tensor<"]),
    (r"= (true|false)", ["= 1 : i64", "= \"yes\"", "= 2.5 : f32", "= [\"tp\"]"]),
    (r"\[\"[a-z]+\"(, \"[a-z]+\")*\]", ["[]", "[\"tp\", \"tp\"]", "[1, 2]", "[\"nope\"]"]),
    (r"@[a-z_]+", ["@nowhere", "@world", "@"]),
    (r"array<i64: [^>]*>", ["array<i64>", "array<i64: 0>", "array<i64: -4>", "array<i32: 4>"]),
]


def mutate(text: str, rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0 and text:  # truncate anywhere
        return text[: rng.randrange(len(text))]
    if kind == 1 and text:  # delete a span
        i = rng.randrange(len(text))
        return text[:i] + text[i + rng.randrange(1, 40):]
    if kind == 2 and text:  # insert a random printable byte sequence
        i = rng.randrange(len(text))
        junk = "".join(rng.choice("(){}<>[]%:,=\"'@#!x0123456789 \n") for _ in range(rng.randrange(1, 8)))
        return text[:i] + junk + text[i:]
    if kind == 3 and text:  # flip one byte (may produce invalid UTF-8)
        b = bytearray(text.encode("utf-8", "surrogateescape"))
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        return b.decode("utf-8", "surrogateescape")
    if kind == 4:  # delete or duplicate a line
        lines = text.split("\n")
        if lines:
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(i, lines[i])
        return "\n".join(lines)
    # token-level swaps, one to three of them
    for _ in range(rng.randrange(1, 4)):
        pattern, choices = rng.choice(TOKEN_SWAPS)
        matches = list(re.finditer(pattern, text))
        if not matches:
            continue
        m = rng.choice(matches)
        text = text[: m.start()] + rng.choice(choices) + text[m.end():]
    return text


def collect(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".mlir")]
        else:
            files.append(p)
    return sorted(files)


SANITIZER = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|SUMMARY: UndefinedBehavior")


def longest_diagnostic(err):
    """Lines of the longest diagnostic in |err|: an error line and the lines after it (notes, any
    dump) up to the next error."""
    longest, cur = 0, 0
    for line in err.splitlines():
        if ": error:" in line or line.startswith("error:"):
            cur = 1
        elif cur:
            cur += 1
        longest = max(longest, cur)
    return longest


MAX_DIAGNOSTIC_LINES = 3  # an error and its notes: never an IR dump (issue: short errors)


def run_one(tool, path, timeout, tool_args):
    try:
        r = subprocess.run([tool] + tool_args + [path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang (over %ds)" % timeout
    err = r.stderr.decode("utf-8", "replace")
    # A sanitizer that aborts (TSan's abort_on_error) ends in a signal: its report is the evidence.
    if r.returncode < 0:
        return "killed by signal %d" % -r.returncode + (":\n" + err[-3000:] if err.strip() else "")
    if r.returncode not in (0, 1):
        return "exit status %d" % r.returncode + (":\n" + err[-3000:] if SANITIZER.search(err) else "")
    if SANITIZER.search(err):
        return "sanitizer report:\n" + err[-2000:]
    if r.returncode == 0 and ": error:" in err:
        return "exit status 0 after printing an error"
    if r.returncode == 1 and ": error:" not in err and "error:" not in err:
        return "exit status 1 without any error message"
    if longest_diagnostic(err) > MAX_DIAGNOSTIC_LINES:
        return "a diagnostic of %d lines (at most %d):\n%s" % (longest_diagnostic(err), MAX_DIAGNOSTIC_LINES,
                                                               err[:2000])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--out", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--tool-args", default="--split-input-file",
                    help="arguments before the input file, space-separated")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = collect(a.paths)
    if not files:
        print("mutate.py: error: no .mlir inputs found", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    jobs = []
    for i in range(a.count):
        src = files[i % len(files)]
        text = open(src, encoding="utf-8", errors="surrogateescape").read()
        for _ in range(rng.randrange(1, 3)):
            text = mutate(text, rng)
        path = os.path.join(a.out, "mutant-%04d.mlir" % i)
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        jobs.append((path, src))
    failures = []
    rejected = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        tool_args = a.tool_args.split()
        results = pool.map(lambda j: (j, run_one(a.tool, j[0], a.timeout, tool_args)), jobs)
        for (path, src), problem in results:
            if problem:
                failures.append((path, src, problem))
            else:
                os.remove(path)
                rejected += 1
    for path, src, problem in failures:
        print("CRASH: %s (mutated from %s): %s" % (path, src, problem))
    print("%d mutated inputs from %d files, %d crashes" % (len(jobs), len(files), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
