"""Decoding with a KV cache against a prefill (decode.test).

  decode.py inputs PREFILL_ARGS PREFILL_OUT --seq-len S --cache C --past L0,L1,... --new N OUT
      writes the inputs of one decoding step: the prefill's dumped arguments, with x, cos and sin
      cut to sequence b's tokens L_b .. L_b+N-1, and sequence b's first L_b rotated keys and values (the prefill's
      k and v outputs) in k_cache and v_cache [B*C, W] (the rows after them hold a filler that
      must not be read) and cache_len = [L_0, L_1, ...] (i32).
  decode.py compare PREFILL_OUT DECODE_OUT --seq-len S --past L0,L1,... --new N
      checks that the step's y, k and v rows are bit for bit the prefill's rows of the same
      tokens; prints one line per output and PASS or FAIL.
Tensors are copied as raw bits (safetensors, any dtype); nothing goes through a float."""
import argparse
import sys

import numpy as np

from reference import read_safetensors_raw as read, write_safetensors_raw as write


def rows(bits, seq_len, past, new):
    """Rows L_b .. L_b+new-1 of every sequence b (seq_len rows each), stacked."""
    return np.concatenate([bits[b * seq_len + p:b * seq_len + p + new] for b, p in enumerate(past)])


def inputs(a):
    args, out = read(a.prefill_args), read(a.prefill_out)
    step = {}
    for name, (dt, bits) in args.items():  # the weights as they are; the per-token inputs' rows
        step[name] = (dt, rows(bits, a.seq_len, a.past, a.new) if name in ("x", "cos", "sin") else bits)
    for name, cache in (("k", "k_cache"), ("v", "v_cache")):
        dt, bits = out[name]
        c = np.full((len(a.past) * a.cache, bits.shape[1]), 0x7F80, bits.dtype)  # +inf in bf16: loud if read
        for b, p in enumerate(a.past):
            c[b * a.cache:b * a.cache + p] = bits[b * a.seq_len:b * a.seq_len + p]
        step[cache] = (dt, c)
    step["cache_len"] = ("I32", np.array(a.past, np.int32))
    write(a.out, step)
    return 0


def compare(a):
    pre, dec = read(a.prefill_out), read(a.decode_out)
    ok = True
    for name in ("y", "k", "v"):
        want = rows(pre[name][1], a.seq_len, a.past, a.new)
        got = dec[name][1]
        same = want.shape == got.shape and np.array_equal(want, got)
        differ = int(np.count_nonzero(want != got)) if want.shape == got.shape else -1
        print(f"{name}: {'bitwise equal' if same else f'{differ} of {want.size} elements differ'} to the prefill")
        ok &= same
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inputs")
    i.add_argument("prefill_args")
    i.add_argument("prefill_out")
    i.add_argument("out")
    c = sub.add_parser("compare")
    c.add_argument("prefill_out")
    c.add_argument("decode_out")
    for s in (i, c):
        s.add_argument("--seq-len", type=int, required=True)
        s.add_argument("--past", type=lambda t: [int(v) for v in t.split(",")], required=True)
        s.add_argument("--new", type=int, required=True)
    i.add_argument("--cache", type=int, required=True)
    a = p.parse_args(argv)
    return inputs(a) if a.cmd == "inputs" else compare(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
