"""Runs several tpc_torch command lines in one process, since every process spends seconds
importing torch: `each.py TOOL ARGS... --next TOOL ARGS...` calls tpc_torch.TOOL.main(ARGS) for
each and prints the command, what it wrote (stdout and stderr) and its exit status, all to stdout."""
import contextlib
import importlib
import io
import sys


def main(argv):
    commands, current = [], []
    for a in argv:
        if a == "--next":
            commands.append(current)
            current = []
        else:
            current.append(a)
    commands.append(current)
    for tool, *args in commands:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                status = importlib.import_module(f"tpc_torch.{tool}").main(args)
            except SystemExit as e:  # argparse
                status = e.code
        print(f"$ {tool} {' '.join(args)}")
        sys.stdout.write(out.getvalue())
        print(f"exit {status}")


if __name__ == "__main__":
    main(sys.argv[1:])
