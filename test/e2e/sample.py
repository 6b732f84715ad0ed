"""tp.sample on the CPU backend (sample.test).

  sample.py module CASE OUT      writes a module whose @draw samples CASE's logits (--dtype bf16: rounded)
  sample.py inputs CASE OUT      writes the arguments of that @draw for CASE
  sample.py check CASE IN OUT    checks the tokens of OUT against CASE's expectations; prints one
                                 line per property and PASS or FAIL
  sample.py permute IN OUT       IN's rows in another order and only some of them (batch invariance)
  sample.py same IN OUT IN2 OUT2 every (request, position) of IN2 got IN's token for it

Cases: greedy (random rows, temperature 0: the first largest logit), dist (one row of 8 logits
for 20000 requests at temperature 0.7: the tokens' frequencies against softmax(z / t), chi-square),
topk (top_k 3 at temperature 1.3), topp (top_p 0.8: the nucleus, and its frequencies), edge
(rows all -inf or NaN give -1, a +inf logit is drawn, NaN is never drawn)."""
import sys

import numpy as np

from reference import read_safetensors_raw as read_raw, write_safetensors_raw as write

ROW = np.array([2.0, 1.0, 0.5, 3.0, -1.0, 0.0, 2.5, 1.5], np.float32)
N = 20000
# chi-square's 99.99% quantiles for 2..7 degrees of freedom: a fair draw fails 1 run in 10^4.
CHI2 = {2: 18.42, 3: 21.11, 4: 23.51, 5: 25.74, 6: 27.86, 7: 29.88}


def case_args(case):
    rng = np.random.default_rng(7)
    if case == "head":  # Inputs/sample_head.mlir: h and head random, mixed parameters
        b = 64
        return {"h": ("BF16", (rng.standard_normal((b, 32)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)),
                "head": ("BF16", (rng.standard_normal((256, 32)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)),
                "seed": ("I64", np.full(b, 99, np.int64)), "request": ("I32", np.arange(b, dtype=np.int32) * 7),
                "position": ("I32", np.arange(b, dtype=np.int32) % 5), "temperature": ("F32", np.full(b, 0.9, np.float32)),
                "top_k": ("I32", np.where(np.arange(b) % 2 == 0, 40, 0).astype(np.int32)),
                "top_p": ("F32", np.where(np.arange(b) % 3 == 0, 0.95, 1.0).astype(np.float32))}
    if case == "append":  # Inputs/kvcache_write.mlir
        return {"cache": ("BF16", np.arange(8 * 32, dtype=np.uint16).reshape(8, 32)),
                "new": ("BF16", (0x8000 + np.arange(4 * 32)).astype(np.uint16).reshape(4, 32)),
                "cache_len": ("I32", np.array([2, 1], np.int32))}
    if case == "greedy":
        b, v = 64, 16
        logits = rng.standard_normal((b, v)).astype(np.float32)
        logits[5, 3] = logits[5, 11] = logits[5].max() + 1  # a tie: the lower id wins
        t, k, p = np.zeros(b, np.float32), np.zeros(b, np.int32), np.ones(b, np.float32)
    elif case == "edge":
        b, v = 4, 16
        logits = np.full((b, v), -np.inf, np.float32)
        logits[1, :] = np.nan
        logits[2, :] = rng.standard_normal(v)
        logits[2, 9] = np.inf
        logits[3, :] = rng.standard_normal(v)
        logits[3, ::2] = np.nan
        t, k, p = np.full(b, 1.0, np.float32), np.zeros(b, np.int32), np.ones(b, np.float32)
    else:
        b, v = N, len(ROW)
        logits = np.tile(ROW, (b, 1))
        t = np.full(b, {"dist": 0.7, "topk": 1.3, "topp": 1.0}[case], np.float32)
        k = np.full(b, 3 if case == "topk" else 0, np.int32)
        p = np.full(b, 0.8 if case == "topp" else 1.0, np.float32)
    return {"logits": ("F32", logits), "seed": ("I64", np.full(b, 1234, np.int64)),
            "request": ("I32", np.arange(b, dtype=np.int32)), "position": ("I32", np.full(b, 5, np.int32)),
            "temperature": ("F32", t), "top_k": ("I32", k), "top_p": ("F32", p)}


def chi2(tokens, probs):
    counts = np.bincount(tokens, minlength=len(probs)).astype(np.float64)
    live = probs > 0
    if counts[~live].any():
        return None, counts
    exp = probs[live] * len(tokens)
    return float(((counts[live] - exp) ** 2 / exp).sum()), counts


def softmax(z, t):
    e = np.exp((z.astype(np.float64) - z.max()) / t)
    return e / e.sum()


def check(case, inputs, out):
    args = {k: v for k, (_, v) in read_raw(inputs).items()}
    tok = next(iter(read_raw(out).values()))[1].view(np.int32)
    ok = True

    def report(name, good, detail=""):
        nonlocal ok
        ok = ok and good
        print(f"{name}: {'ok' if good else 'WRONG'}{(' (' + detail + ')') if detail else ''}")

    if case == "append":
        cache, new, want = args["cache"], args["new"], args["cache"].copy()
        for b, n in enumerate(args["cache_len"].view(np.int32)):
            want[b * 4 + n:b * 4 + n + 2] = new[b * 2:b * 2 + 2]
        got = next(iter(read_raw(out).values()))[1]
        report("the new rows after cache_len, the rest the cache's", np.array_equal(got, want))
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    logits = args["logits"].view(np.float32)
    if case == "greedy":
        report("greedy is the first largest logit", np.array_equal(tok, logits.argmax(axis=1)))
    elif case == "edge":
        report("all -inf gives -1", tok[0] == -1, str(tok[0]))
        report("all NaN gives -1", tok[1] == -1, str(tok[1]))
        report("+inf is drawn", tok[2] == 9, str(tok[2]))
        report("NaN is never drawn", tok[3] % 2 == 1, str(tok[3]))
    else:
        t = float(args["temperature"].view(np.float32)[0])
        probs = softmax(ROW, t)
        if case == "topk":
            keep = np.argsort(-ROW)[:3]
            probs = np.where(np.isin(np.arange(len(ROW)), keep), probs, 0)
            probs /= probs.sum()
        elif case == "topp":
            order = np.argsort(-ROW)
            cum = np.cumsum(probs[order])
            keep = order[:int(np.searchsorted(cum, 0.8) + 1)]
            probs = np.where(np.isin(np.arange(len(ROW)), keep), probs, 0)
            probs /= probs.sum()
        stat, counts = chi2(tok, probs)
        report("only allowed tokens", stat is not None, "counts " + " ".join(str(int(c)) for c in counts))
        df = int((probs > 0).sum()) - 1
        if stat is not None:
            report(f"frequencies match softmax(z/t) (chi-square, {df} dof)", stat < CHI2[df], f"{stat:.2f} < {CHI2[df]}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def permute(src, dst):
    t = read_raw(src)
    idx = np.arange(17, 4017)[::-1].copy()  # 4000 of the rows, reversed
    write(dst, {name: (dt, bits[idx]) for name, (dt, bits) in t.items()})
    return 0


def same(in1, out1, in2, out2):
    a, b = read_raw(in1), read_raw(in2)
    t1 = next(iter(read_raw(out1).values()))[1].view(np.int32)
    t2 = next(iter(read_raw(out2).values()))[1].view(np.int32)
    key1 = {(int(r), int(p)): int(x) for r, p, x in zip(a["request"][1].view(np.int32), a["position"][1].view(np.int32), t1)}
    bad = sum(key1[(int(r), int(p))] != int(x) for r, p, x in zip(b["request"][1].view(np.int32), b["position"][1].view(np.int32), t2))
    print(f"{len(t2)} requests in another batch: {bad} tokens differ")
    print("PASS" if bad == 0 else "FAIL")
    return 0 if bad == 0 else 1


def module(case, dtype):
    b, v = case_args(case)["logits"][1].shape
    lt = f"tensor<{b}x{v}x{dtype}>"
    rows = [f"tensor<{b}x{e}>" for e in ("i64", "i32", "i32", "f32", "i32", "f32")]
    names = ("seed", "request", "position", "temperature", "top_k", "top_p")
    params = ", ".join(f"%{n}: {t} {{tp.name = \"{n}\"}}" for n, t in zip(names, rows))
    return (f"func.func @draw(%logits: {lt} {{tp.name = \"logits\"}}, {params}) -> (tensor<{b}xi32> {{tp.name = \"token\"}}) {{\n"
            f"  %t = \"tp.sample\"(%logits, %seed, %request, %position, %temperature, %top_k, %top_p)\n"
            f"      : ({lt}, {', '.join(rows)}) -> tensor<{b}xi32>\n"
            f"  return %t : tensor<{b}xi32>\n}}\n")


def main(argv):
    if argv[0] == "module":
        with open(argv[2], "w") as f:
            f.write(module(argv[1], argv[3] if len(argv) > 3 else "f32"))
        return 0
    if argv[0] == "inputs":
        write(argv[2], case_args(argv[1]))
        return 0
    if argv[0] == "check":
        return check(argv[1], argv[2], argv[3])
    if argv[0] == "permute":
        return permute(argv[1], argv[2])
    if argv[0] == "same":
        return same(*argv[1:5])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
