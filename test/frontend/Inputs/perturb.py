"""A tpc-run that is wrong: runs the real tpc-run (argv[1]) with the other arguments, then negates
the result y in its --outputs file. The mutant the frontend checks must catch."""
import subprocess
import sys

from safetensors.torch import load_file, save_file

real, args = sys.argv[1], sys.argv[2:]
proc = subprocess.run([real] + args)
if proc.returncode == 0 and "--outputs" in args:
    path = args[args.index("--outputs") + 1]
    results = load_file(path)
    results["y"] = -results["y"]
    save_file(results, path)
sys.exit(proc.returncode)
