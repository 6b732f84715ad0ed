#!/usr/bin/env python3
"""Runs a command as one process or as the N processes of a world, optionally signals it once it
is running, and reports how every process ended, so that a lit test can check statuses and
messages with FileCheck. A world that has not ended LIMIT seconds after the start (or after the
signal) is a hang: everything is killed, "HANG" is printed and the exit status is 1; otherwise
the status is 0 whatever the processes returned (the printed lines are what the test checks).

  faults.py [--ranks N | --mpirun N] [--limit S] [--signal INT|TERM --after TEXT [--to all|R]] -- cmd...

--ranks N starts N processes with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT); --mpirun N runs mpirun -np N.
--signal sends SIGINT or SIGTERM once TEXT has appeared on rank 0's stderr, to rank --to (default
0) or to every process ("all", as a terminal's Ctrl-C reaches its whole process group).

Output: rank 0's stdout, every process's stderr (prefixed "[rank R] " in a world), then one line
per process: "[rank R] exit N" or "[rank R] killed by SIGNAME" ("exit N" alone for one process;
"mpirun exit N" for mpirun, which reports its ranks itself), and "ended in under S s".
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe(code):
    if code is None:
        return "still running"
    if code < 0:
        return "killed by " + signal.Signals(-code).name
    return f"exit {code}"


def default_signals():
    # Start the processes as a terminal would: lit's workers ignore SIGINT, and an ignored signal
    # stays ignored across exec (tpc-run then leaves it so, as programs started with `&` should).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main():
    ap = argparse.ArgumentParser()
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--ranks", type=int, default=0)
    group.add_argument("--mpirun", type=int, default=0)
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--signal", choices=["INT", "TERM"])
    ap.add_argument("--after", default="")
    ap.add_argument("--to", default="0")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    tmp = tempfile.mkdtemp(prefix="faults-")
    n = a.ranks or a.mpirun or 1
    err_paths = [os.path.join(tmp, f"err.{r}") for r in range(n)]
    out_path = os.path.join(tmp, "out.0")
    procs = []
    if a.mpirun:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        wrapper = ('exec "$@" > "{0}/out.$OMPI_COMM_WORLD_RANK" 2> "{0}/err.$OMPI_COMM_WORLD_RANK"'.format(tmp))
        with open(os.path.join(tmp, "mpirun.err"), "w") as err:
            procs.append(subprocess.Popen(["mpirun", "-np", str(n), "bash", "-c", wrapper, "faults"] + cmd, env=env,
                                          stdout=subprocess.DEVNULL, stderr=err, preexec_fn=default_signals))
    else:
        port = free_port()
        for r in range(n):
            env = dict(os.environ)
            if a.ranks:
                env.update(RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            with open(err_paths[r], "w") as err, open(os.path.join(tmp, f"out.{r}"), "w") as out:
                procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=err, preexec_fn=default_signals))
    start = time.monotonic()
    deadline = start + a.limit
    if a.signal:
        # Wait for the text on rank 0's stderr (the process has started its run), then signal.
        while time.monotonic() < deadline and all(p.poll() is None for p in procs):
            try:
                with open(err_paths[0]) as f:
                    if a.after in f.read():
                        break
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        time.sleep(0.3)  # into the steps
        sig = signal.SIGINT if a.signal == "INT" else signal.SIGTERM
        targets = procs if a.to == "all" or a.mpirun else [procs[int(a.to)]]
        for p in targets:
            if p.poll() is None:
                p.send_signal(sig)
        deadline = time.monotonic() + a.limit
    hang = False
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hang = True
    if hang:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    try:
        with open(out_path) as f:
            sys.stdout.write(f.read())
    except FileNotFoundError:
        pass
    for r in range(n):
        try:
            with open(err_paths[r]) as f:
                for line in f:
                    sys.stdout.write(("[rank %d] " % r if n > 1 else "") + line)
        except FileNotFoundError:
            pass
    if a.mpirun:
        with open(os.path.join(tmp, "mpirun.err")) as f:
            for line in f:
                sys.stdout.write("[mpirun] " + line)
        print(f"mpirun {describe(procs[0].returncode)}")
    else:
        for r, p in enumerate(procs):
            print(("[rank %d] " % r if n > 1 else "") + describe(p.returncode))
    shutil.rmtree(tmp, ignore_errors=True)
    if hang:
        print(f"HANG: still running {a.limit:g} s after the {'signal' if a.signal else 'start'}")
        return 1
    print(f"ended in under {a.limit:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
