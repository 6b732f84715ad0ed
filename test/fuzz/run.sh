#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz in build-fuzz (clang-22, ASan + UBSan, coverage
# instrumentation in the libraries under test) and runs each one in turn. `make fuzz-ci` and
# `make fuzz` call it; see test/fuzz/README.md.
#
# Usage: test/fuzz/run.sh [--seconds N] [--runs N] [--jobs N] [--build DIR] [HARNESS...]
#   --seconds N  stop each harness after N seconds (0: no limit; default 60)
#   --runs N     stop each harness after N executions (default: no limit); the first limit wins
#   --jobs N     run N harnesses at a time (default 1); their reports print in the usual order
#   --build DIR  the build directory (default build-fuzz; configured here when it has none)
#   HARNESS      parse, pipeline, safetensors, checkpoint_index, manifest, ... (default: every
#                build-fuzz/fuzz/fuzz_<name> the target `fuzzers` builds)
# A harness fails on any crash, leak, timeout (an input slower than 30 s), out-of-memory or
# sanitizer report: the input is kept in DIR/fuzz/artifacts/<harness>/ and replayed at the end of
# the log, with the harness's own messages. New corpus inputs accumulate in DIR/fuzz/corpus/.
# Exit status 0 when every harness ran clean; the last line counts them.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=60
runs=""
jobs=1
build=build-fuzz
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "fuzz: error: unknown option '$1'" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done

# Largest input per harness: a few kilobytes of IR or JSON, a small safetensors file.
max_len() {
  case "$1" in
    parse|pipeline) echo 8192 ;;
    checkpoint_index) echo 2048 ;;
    *) echo 4096 ;;
  esac
}

if [ ! -f "$build/build.ninja" ]; then
  CC=clang-22 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPC_FUZZ=ON -DTPC_SANITIZE=ON \
    || { echo "fuzz: error: cannot configure $build (tools/setup.sh installs clang-22)"; exit 1; }
fi
# Only the harnesses and the libraries they link, not the tools and tests.
cmake --build "$build" --target fuzzers || { echo "fuzz: error: the harnesses do not build"; exit 1; }
python3 test/fuzz/make_corpus.py --out "$build/fuzz" || { echo "fuzz: error: cannot write the seed corpora"; exit 1; }
if [ ${#harnesses[@]} -eq 0 ]; then
  for bin in "$build"/fuzz/fuzz_*; do
    [ -x "$bin" ] && harnesses+=("${bin##*/fuzz_}")
  done
fi

# Leaks inside libMLIR's process-lifetime registries are not ours (test/lsan.supp).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
export LSAN_OPTIONS="suppressions=$PWD/test/lsan.supp"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# One harness: its report goes to $build/fuzz/logs/<harness>.report, its status to .status.
fuzz_one() {
  local h=$1 bin="$build/fuzz/fuzz_$1" report="$build/fuzz/logs/$1.report"
  mkdir -p "$build/fuzz/logs"
  if [ ! -x "$bin" ]; then
    echo "fuzz: error: no harness '$h' ($bin)" >"$report"
    echo 1 >"$build/fuzz/logs/$h.status"
    return
  fi
  local corpus="$build/fuzz/corpus/$h" artifacts="$build/fuzz/artifacts/$h" log="$build/fuzz/logs/$h.log"
  mkdir -p "$corpus" "$artifacts"
  # Seeds, dictionary and regressions where make_corpus.py and test/fuzz/regressions have them.
  local inputs=("$corpus") options=() limits=(-max_total_time="$seconds")
  [ -d "$build/fuzz/seeds/$h" ] && inputs+=("$build/fuzz/seeds/$h")
  [ -d "test/fuzz/regressions/$h" ] && inputs+=("test/fuzz/regressions/$h")
  [ -f "$build/fuzz/dict/$h.dict" ] && options+=(-dict="$build/fuzz/dict/$h.dict")
  [ -n "$runs" ] && limits+=(-runs="$runs")
  local before start rc elapsed execs rate units new artifact
  before=$(ls "$artifacts" | wc -l)
  start=$(date +%s)
  # -close_fd_mask=2 silences the harnesses' diagnostics (one per rejected input); sanitizer
  # reports still reach the log.
  "$bin" "${limits[@]}" "${options[@]}" -timeout=30 -rss_limit_mb=3072 -max_len="$(max_len "$h")" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 -close_fd_mask=2 "${inputs[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(ls "$corpus" | wc -l)
  new=$(( $(ls "$artifacts" | wc -l) - before ))
  {
    echo "fuzz: $h: ${execs:-?} executions in ${elapsed} s (${rate:-?}/s), corpus $units, exit status $rc"
    if [ $rc -ne 0 ]; then
      echo "fuzz: $h FAILED; the end of $log:"
      tail -n 60 "$log"
      # The newest artifact, replayed with the harness's messages (they were silenced above).
      artifact=$(ls -t "$artifacts" | head -1)
      if [ "$new" -gt 0 ] && [ -n "$artifact" ]; then
        echo "fuzz: $h: replaying $artifacts/$artifact:"
        "$bin" "$artifacts/$artifact" 2>&1 | tail -n 60
        echo "fuzz: reproduce with: $bin $artifacts/$artifact"
      fi
    fi
  } >"$report"
  echo $(( rc != 0 )) >"$build/fuzz/logs/$h.status"
}

# --jobs at a time; each report prints once its harness and every one before it have ended.
pids=()
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$h" &
  pids+=($!)
done
passed=0
failed=0
for k in "${!harnesses[@]}"; do
  h=${harnesses[$k]}
  wait "${pids[$k]}" 2>/dev/null || true  # its status is in the .status file
  cat "$build/fuzz/logs/$h.report"
  if [ "$(cat "$build/fuzz/logs/$h.status")" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: $passed harnesses passed, $failed failed"
[ $failed -eq 0 ]
