"""Calls a compiled module through tpc_torch.runtime (the session ABI) on the arguments of a
safetensors file and prints each result as `tpc-run --hash` does: name, shape, dtype, FNV-1a-64.
With --bad, also feeds it wrong arguments and prints each error (runtime.test)."""
import sys

import torch
from safetensors.torch import load_file

from tpc_torch.errors import ExportError
from tpc_torch.runtime import Module


def fnv1a(t):
    h = 1469598103934665603
    for b in t.contiguous().view(torch.uint8).flatten().tolist():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main():
    module, args_file = sys.argv[1], sys.argv[2]
    m = Module(module)
    print(m)
    args = load_file(args_file)
    positional = [args[a.name] for a in m.args]
    by_name = m(**args)
    by_position = m(*positional)
    for name, v in by_name.items():
        same = torch.equal(v.view(torch.uint8), by_position[name].view(torch.uint8))
        dims = ",".join(str(d) for d in v.shape)
        print(f"{name} [{dims}] {str(v.dtype).replace('torch.', '').replace('bfloat16', 'bf16').replace('float32', 'f32')}"
              f" {fnv1a(v)}{'' if same else ' (positional call differs)'}")
    # A strided argument (the same values, column-major) is made contiguous.
    first = m.args[0].name
    again = m(**{**args, first: args[first].t().contiguous().t()})
    print("strided argument:", "same" if all(torch.equal(again[k], by_name[k]) for k in again) else "DIFFERS")
    if "--bad" in sys.argv:
        cases = {
            "dtype": {**args, first: args[first].double()},
            "shape": {**args, first: args[first][:-1]},
            "missing": {k: v for k, v in args.items() if k != first},
            "unknown": {**args, "nope": args[first]},
            "not a tensor": {**args, first: 3.0},
        }
        for what, kw in cases.items():
            try:
                m(**kw)
                print(f"{what}: no error")
            except ExportError as e:
                print(f"{what}: {e}")
        try:
            Module(module, function="nope")
        except ExportError as e:
            print(f"function: {e}")
    m.close()


main()
