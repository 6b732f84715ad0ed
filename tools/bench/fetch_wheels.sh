#!/usr/bin/env bash
# Fetches transformers and its dependencies as wheels for the GPU machine's Python (3.12, x86-64
# Linux; it has PyTorch and NumPy but no package index) into build-wheels/, which the benchmark
# commands carry there (tools/bench/generate_1b.sh installs them when transformers is missing).
# Usage: bash tools/bench/fetch_wheels.sh [python-version]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-$ROOT/third_party/pyenv/bin/python}"
mkdir -p "$ROOT/build-wheels"
"$PY" -m pip download -q transformers --python-version "${1:-3.12}" --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$ROOT/build-wheels"
rm -f "$ROOT"/build-wheels/numpy-*.whl  # the GPU machine has NumPy (PyTorch's)
du -sh "$ROOT/build-wheels"
