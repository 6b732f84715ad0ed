#!/usr/bin/env bash
# The demo: what tpc can do today with docs/examples/mlp.mlir.
# Usage: demo.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
EX=docs/examples/mlp.mlir
echo "== tpc demo: $EX =="
echo "-- the logical MLP block, parsed and verified by tpc-opt (tp-verify):"
"$BUILD/bin/tpc-opt" --tp-verify "$EX"
echo "-- round trip: print -> parse -> print is stable:"
"$BUILD/bin/tpc-opt" "$EX" | "$BUILD/bin/tpc-opt" | diff -q - <("$BUILD/bin/tpc-opt" "$EX") && echo "stable"
echo
echo "Partitioning (tp-shard) and execution on the CPU backend (tpc-run) are not built yet;"
echo "this demo partitions nothing and runs nothing. See the "What works today" table in README.md."
