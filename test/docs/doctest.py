#!/usr/bin/env python3
"""Runs the shell commands of markdown files, so that the docs cannot rot (docs/testing.md).

usage: doctest.py --src SRC --build BUILD [--list] FILE.md...

Blocks:
  ```sh       a script: run with bash (set -e, pipefail); every command must exit with 0. A
              trailing `# comment` is a comment, as in the shell.
  ```console  a session: each `$ command` (continued by a trailing backslash) runs on its own and
              must exit with 0; the lines after it up to the next `$` are its expected output.
              Each expected line must match an output line (stdout and stderr together), in
              order, whole, with runs of blanks equal; `...` inside a line matches anything, and
              a line that starts with `...` stands for any number of lines.
A directive, an HTML comment on the last non-blank line before a block, changes that:
  <!-- doctest: skip (REASON) -->   the block is not run; REASON says why ("needs a GPU",
                                     "slow: ...", "recursive: ...", "network", "illustrative",
                                     "broken: ..."); skips are counted by REASON up to a colon.
  <!-- doctest: fails -->           the block must fail: each `$` command of a console block, the
                                     script of a sh block exits with a non-zero status.
  <!-- doctest: needs PATH -->       the block runs when PATH (relative to the repository root)
                                     exists, and is skipped with the reason "needs PATH" when not:
                                     third_party/pyenv, the PyTorch frontend's Python, is optional.
An unlabelled (or ```text) block that looks like shell commands is an error: label it ```sh or
```console, or make it not start with a command.

Commands run as the docs write them, from the repository root with `build/` being the build
directory under test: in a fresh directory that holds a symbolic link to every top-level entry
of SRC and `build` -> BUILD, so files a command writes stay there. PATH starts with build/bin and
LLVM's bin directory. `/tmp/` in a command (and in its expected output) is a private directory.
Prints one line per block and a summary: blocks run, skipped by reason, failed; exits with 1
when any failed.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^(\s*)(`{3,})([\w+-]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip \((.+)\)$")
NEEDS = re.compile(r"^needs (\S+)$")
# The start of an unlabelled block that is a command, not output.
COMMAND_LIKE = re.compile(r"^\s*(\$ |build/bin/|tpc-(opt|compile|run) |bash |python3 |cmake |make |ninja |"
                          r"mpirun |torchrun |lit |pkg-config )")
TIMEOUT_S = 120
LLVM_BIN = "/usr/lib/llvm-22/bin"


class Block:
    def __init__(self, path, line, lang, text, directive):
        self.path, self.line, self.lang, self.text, self.directive = path, line, lang, text, directive

    def where(self):
        return f"{self.path}:{self.line}"


def parse(path, rel):
    """Returns (blocks, errors) of one markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, errors, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if DIRECTIVE.match(lines[i]):
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                if j >= len(lines) or not FENCE.match(lines[j]):
                    errors.append(f"{rel}:{i + 1}: a doctest directive must come right before a block")
            i += 1
            continue
        indent, fence, lang = m.groups()
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*" + fence + r"\s*$", lines[j]):
            j += 1
        body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:j]]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        d = DIRECTIVE.match(lines[k]) if k >= 0 else None
        directive = d.group(1) if d else None
        block = Block(rel, i + 1, lang, "\n".join(body), directive)
        if lang in ("sh", "console"):
            if directive is not None and directive != "fails" and not SKIP.match(directive) \
                    and not NEEDS.match(directive):
                errors.append(f"{block.where()}: unknown doctest directive '{directive}' "
                              "(expected 'skip (REASON)', 'fails' or 'needs PATH')")
            blocks.append(block)
        elif lang in ("", "text"):
            first = next((l for l in body if l.strip()), "")
            if COMMAND_LIKE.match(first):
                errors.append(f"{block.where()}: an unlabelled block starts with a command ('{first.strip()[:60]}'): "
                              "label it ```sh or ```console so that it is tested")
            if directive is not None:
                errors.append(f"{block.where()}: a doctest directive before a block that is not ```sh or ```console")
        elif directive is not None:
            errors.append(f"{block.where()}: a doctest directive before a ```{lang} block")
        i = j + 1
    return blocks, errors


def console_steps(text):
    """Splits a console block into [(command, [expected lines])]."""
    steps, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if line.strip():
                raise ValueError(f"output line before any command: '{line}'")
            i += 1
            continue
        cmd = line[2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd += "\n" + lines[i]
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            if lines[i].strip():
                expected.append(lines[i])
            i += 1
        steps.append((cmd, expected))
    return steps


def line_pattern(expected):
    parts = " ".join(expected.split()).split("...")
    return re.compile(r"\s*" + ".*".join(r"\s+".join(re.escape(w) for w in p.split(" ")) for p in parts) + r"\s*")


def match_output(expected, output):
    """None if |expected| lines match |output| in order, else the first line that does not."""
    out = output.split("\n")
    pos = 0
    for e in expected:
        if e.strip().startswith("..."):
            continue  # any number of lines: the next expected line is searched from here
        pattern = line_pattern(e)
        while pos < len(out) and not pattern.fullmatch(out[pos]):
            pos += 1
        if pos == len(out):
            return e
        pos += 1
    return None


def run(cmd, cwd, env):
    script = "set -eo pipefail\ntrap 'echo \"doctest: failed: $BASH_COMMAND\" >&2' ERR\n" + cmd + "\n"
    try:
        p = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") + f"\ndoctest: timed out after {TIMEOUT_S} s"


def tail(text, n=40):
    lines = text.rstrip("\n").split("\n")
    return "\n".join((["... (%d lines)" % (len(lines) - n)] if len(lines) > n else []) + lines[-n:])


def run_block(block, cwd, env, private_tmp):
    """Returns None on success, or the failure text."""
    fails = block.directive == "fails"
    if block.lang == "sh":
        steps = [(block.text, [])]
    else:
        try:
            steps = console_steps(block.text)
        except ValueError as e:
            return str(e)
    for cmd, expected in steps:
        cmd = cmd.replace("/tmp/", private_tmp + "/")
        expected = [e.replace("/tmp/", private_tmp + "/") for e in expected]
        rc, out = run(cmd, cwd, env)
        shown = f"$ {cmd}" if block.lang == "console" else cmd
        if fails and rc == 0:
            return f"{shown}\nexited with 0; the doc says it fails\n{tail(out)}"
        if not fails and rc != 0:
            return f"{shown}\nexited with {rc}\n{tail(out)}"
        missing = match_output(expected, out)
        if missing is not None:
            return f"{shown}\nthe output has no line matching (in order):\n  {missing}\noutput:\n{tail(out)}"
    return None


def make_farm(src, build, farm):
    """A directory that looks like the repository root, with build/ -> the build under test."""
    for name in os.listdir(src):
        if name != "build":
            os.symlink(os.path.join(src, name), os.path.join(farm, name))
    os.symlink(os.path.abspath(build), os.path.join(farm, "build"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--list", action="store_true", help="list the blocks and exit")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    src = os.path.abspath(args.src)

    blocks, errors = [], []
    for f in args.files:
        b, e = parse(os.path.join(src, f), f)
        blocks += b
        errors += e
    for e in errors:
        print(f"doctest: error: {e}")
    if args.list:
        for b in blocks:
            print(f"{b.where()} {b.lang} {b.directive or ''}")
        return 1 if errors else 0

    ran, failed, skipped = 0, 0, collections.Counter()
    with tempfile.TemporaryDirectory(prefix="tpc-doctest-") as top:
        farm, private_tmp = os.path.join(top, "root"), os.path.join(top, "tmp")
        os.mkdir(farm)
        os.mkdir(private_tmp)
        make_farm(src, args.build, farm)
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([os.path.join(farm, "build", "bin"), LLVM_BIN, env.get("PATH", "")])
        env["TMPDIR"] = private_tmp
        for b in blocks:
            skip = SKIP.match(b.directive or "")
            needs = NEEDS.match(b.directive or "")
            if needs and not os.path.exists(os.path.join(src, needs.group(1))):
                skip = re.match(r"(.*)", f"needs {needs.group(1)}")
            if skip:
                reason = skip.group(1).split(":")[0]
                skipped[reason] += 1
                print(f"doctest: {b.where()}: skipped ({skip.group(1)})")
                continue
            t0 = time.monotonic()
            failure = run_block(b, farm, env, private_tmp)
            ran += 1
            if failure:
                failed += 1
                print(f"doctest: {b.where()}: FAILED\n{failure}")
            else:
                print(f"doctest: {b.where()}: ok ({time.monotonic() - t0:.1f} s)")
    reasons = ", ".join(f"{r}: {n}" for r, n in sorted(skipped.items()))
    print(f"doctest: {ran} blocks ran, {failed} failed, {sum(skipped.values())} skipped"
          + (f" ({reasons})" if reasons else "") + (f", {len(errors)} errors" if errors else ""))
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
