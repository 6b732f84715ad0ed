#!/usr/bin/env bash
# Runs every tpc test suite against a build directory and ends with one summary line,
# "N passed, N failed", that CI runners understand. Usage: run_tests.sh [build-dir]
set -uo pipefail
BUILD=${1:-build}
LIT=/usr/lib/llvm-22/bin/lit
results="$BUILD/test/lit-results.json"
rm -f "$results"
"$LIT" -sv --order=lexical "$BUILD/test" --output "$results"
lit_rc=$?
python3 - "$results" "$lit_rc" <<'PY'
import json, sys
path, rc = sys.argv[1], int(sys.argv[2])
try:
    tests = json.load(open(path))["tests"]
except Exception as e:  # lit crashed before writing results
    print(f"0 passed, 1 failed (lit did not produce results: {e})")
    sys.exit(1)
ok = {"PASS", "XFAIL"}
skipped = {"UNSUPPORTED", "SKIPPED", "EXCLUDED"}
passed = sum(t["code"] in ok for t in tests)
skip = sum(t["code"] in skipped for t in tests)
failed = len(tests) - passed - skip
suffix = f", {skip} skipped" if skip else ""
print(f"{passed} passed, {failed} failed{suffix}")
sys.exit(1 if failed or rc else 0)
PY
