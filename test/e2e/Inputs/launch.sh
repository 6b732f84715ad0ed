#!/usr/bin/env bash
# Launches a command as N processes of one world, the way torchrun or mpirun would, and waits for
# all of them: rank 0's stdout goes to stdout, every rank's stderr to stderr (prefixed with its
# rank), and the exit code is the first non-zero one (0 when every rank succeeded).
#
#   launch.sh [--mpirun] N command [args...]
#
# torchrun style (default): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1
# and a free MASTER_PORT. --mpirun: mpirun -np N (MPI exchanges the addresses).
set -u
mode=torchrun
if [ "${1:-}" = "--mpirun" ]; then mode=mpirun; shift; fi
n=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ "$mode" = mpirun ]; then
  # Root in containers and more ranks than cores are both fine for a test.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpirun -np "$n" bash -c 'exec "$@" > "'"$dir"'/out.$OMPI_COMM_WORLD_RANK" 2> "'"$dir"'/err.$OMPI_COMM_WORLD_RANK"' \
    launch "$@"
  rc=$?
else
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pids=()
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$@" > "$dir/out.$r" 2> "$dir/err.$r" &
    pids+=($!)
  done
  rc=0
  for pid in "${pids[@]}"; do
    wait "$pid"
    code=$?
    [ "$rc" -eq 0 ] && rc=$code
  done
fi
cat "$dir/out.0" 2> /dev/null
for ((r = 0; r < n; r++)); do
  sed "s/^/[rank $r] /" "$dir/err.$r" >&2 2> /dev/null
done
exit "$rc"
