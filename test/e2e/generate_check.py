"""Generation against scoring, through tpc-run (generate.test).

  generate_check.py run GEN.mlir WEIGHTS_DIR OUT.json --prompts 5,3,7 --new N [--order 2,0,1]
      [--slots B] [--numerics M] [--mesh M] [--temperature T] [--top-k K] [--top-p P] [--seed S]
      drives GEN.mlir's @prefill and @decode (tpc_torch.export --generate) with one tpc-run per call:
      each prompt (random tokens, request id = its index) is prefilled in chunks and decoded N
      tokens in a batch of B slots, requests joining as slots free up in --order; writes every
      request's tokens and per-token loss (the negative log-probability, as f32 bits).
  generate_check.py score WHOLE.mlir WEIGHTS_DIR RUN.json [--numerics M] [--mesh M]
      scores every request's whole sequence with the training function (tpc_torch.export --whole,
      one sequence of the run's length): the per-token loss of each drawn token must be the one
      the decode step returned, bit for bit. Prints one line per request and PASS or FAIL.
  generate_check.py import PROMPTS.jsonl OUT.jsonl RUN.json
      tpc-generate's prompts and output lines as a run (the requests keyed by their "id").
  generate_check.py prompts OUT.jsonl --prompts 5,3,7 [--order 2,0,1] [--new N]
      the prompts of `run` as tpc-generate's JSONL (id = request index), in --order.
  generate_check.py text-prompts TOKENIZER.json OUT.jsonl
      3 texts (ASCII, punctuation and spaces, non-ASCII with tabs and newlines), each twice: as
      "text" and as the "tokens" tools/tokenize.py's encode makes of it (same id).
  generate_check.py text-check TOKENIZER.json OUT.jsonl
      each text request drew what its tokens twin drew (so tpc-generate encodes as tokenize.py),
      and its "text" is tokenize.py's decoding of its tokens.
  generate_check.py same RUN1.json RUN2.json
      every request drew the same tokens with the same loss bits in both runs."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from reference import read_safetensors_raw as read_raw, write_safetensors_raw as write

TPC_RUN = os.environ.get("TPC_RUN", "tpc-run")


def tpc_run(module, function, inputs, weights, a, tmp):
    write(os.path.join(tmp, "in.safetensors"), inputs)
    out = os.path.join(tmp, "out.safetensors")
    cmd = [TPC_RUN, module] + (["--function", function] if function else []) + [
        "--inputs", os.path.join(tmp, "in.safetensors"), "--weights", os.path.join(weights, "weights.safetensors"),
        "--outputs", out]
    if module.endswith(".mlir"):  # a compiled module has its numerics and mesh already
        cmd += ["--numerics", a.numerics] if a.numerics else []
        cmd += ["--mesh", a.mesh] if a.mesh else []
    if a.backend != "cpu":
        cmd += ["--backend", a.backend, "--share-gpus"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"generate_check.py: {' '.join(cmd)} failed:\n{r.stderr}")
    return read_raw(out)


def prompts_of(lengths, vocab, seed=3):
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(0, vocab, n)] for n in lengths]


def run(a):
    import re
    spec = read_raw(os.path.join(a.weights, "inputs.safetensors"))
    embed = read_raw(os.path.join(a.weights, "weights.safetensors"))["embed_tokens.weight"]
    vocab = embed[1].shape[0]
    text = open(a.module).read()
    import re
    caches = sorted(set(re.findall(r'tp.name = "(layers\.\d+\.self_attn\.[kv]_cache)"', text)))
    chunk = int(re.search(r"@prefill: (\d+) prompt tokens", text).group(1))
    slots = int(re.search(r"@decode: one token for each of (\d+) sequences", text).group(1))
    cap = spec["rope_cos"][1].shape[0]
    el = "F32" if " f32" in text or "xf32>" in text.split("func.func @decode")[1].split("ids")[0] else "BF16"
    lengths = [int(x) for x in a.prompts.split(",")]
    prompts = prompts_of(lengths, vocab)
    order = [int(x) for x in a.order.split(",")] if a.order else list(range(len(prompts)))
    width = {}
    for line in text.splitlines():
        m = re.search(r'%\w+: tensor<(\d+)x(\d+)x(\w+)> \{tp.name = "(layers\.\d+\.self_attn\.[kv]_cache)"', line)
        if m and m.group(4) not in width:
            width[m.group(4)] = (int(m.group(2)), m.group(3))
    store = {n: np.zeros((slots * cap, width[n][0]), np.uint16 if width[n][1] == "bf16" else np.uint32) for n in caches}
    cdt = {n: "BF16" if width[n][1] == "bf16" else "F32" for n in caches}
    tables = {"rope_cos": spec["rope_cos"], "rope_sin": spec["rope_sin"]}
    seqs = {r: list(prompts[r]) for r in range(len(prompts))}
    losses = {r: [] for r in range(len(prompts))}
    slot_of, pending = {}, list(order)
    with tempfile.TemporaryDirectory() as tmp:
        def prefill(r, s):
            toks = prompts[r][:-1]
            for start in range(0, len(toks), chunk):
                piece = toks[start:start + chunk]
                ids = np.array(piece + [0] * (chunk - len(piece)), np.int32)
                pos = np.minimum(np.arange(start, start + chunk), cap - 1).astype(np.int32)
                ins = {"ids": ("I32", ids), "positions": ("I32", pos), "cache_len": ("I32", np.array([start], np.int32)),
                       **tables}
                for n in caches:
                    ins[n] = (cdt[n], store[n][s * cap:(s + 1) * cap])
                out = tpc_run(a.module, "prefill", ins, a.weights, a, tmp)
                for n in caches:
                    store[n][s * cap:(s + 1) * cap] = out[n][1]

        while pending or slot_of:
            for s in range(slots):  # requests join free slots between steps
                if s not in slot_of.values() and pending:
                    r = pending.pop(0)
                    slot_of[r] = s
                    prefill(r, s)
            live = {s: r for r, s in slot_of.items()}
            ids = np.zeros(slots, np.int32)
            pos = np.zeros(slots, np.int32)
            req = np.zeros(slots, np.int32)
            for s, r in live.items():
                ids[s], pos[s], req[s] = seqs[r][-1], len(seqs[r]) - 1, r
            ins = {"ids": ("I32", ids), "positions": ("I32", pos), "cache_len": ("I32", pos.copy()), **tables,
                   "seed": ("I64", np.full(slots, a.seed, np.int64)), "request": ("I32", req),
                   "temperature": ("F32", np.full(slots, a.temperature, np.float32)),
                   "top_k": ("I32", np.full(slots, a.top_k, np.int32)), "top_p": ("F32", np.full(slots, a.top_p, np.float32))}
            for n in caches:
                ins[n] = (cdt[n], store[n])
            out = tpc_run(a.module, "decode", ins, a.weights, a, tmp)
            for n in caches:
                store[n][:] = out[n][1]
            tok, loss = out["token"][1].view(np.int32), out["loss"][1].view(np.uint32)
            for s, r in live.items():
                seqs[r].append(int(tok[s]))
                losses[r].append(int(loss[s]))
                if len(seqs[r]) - len(prompts[r]) == a.new:
                    del slot_of[r]
    with open(a.out, "w") as f:
        json.dump({"prompts": [len(p) for p in prompts],
                   "requests": {str(r): {"tokens": seqs[r], "loss_bits": losses[r]} for r in seqs}}, f)
    print(f"{len(prompts)} requests, {a.new} tokens each, {slots} slots")
    return 0


def score(a):
    rec = json.load(open(a.out))
    import re
    n = a.tokens or int(re.search(r'%ids: tensor<(\d+)xi32>', open(a.module).read()).group(1))
    tables = read_raw(os.path.join(a.gen_weights, "inputs.safetensors"))
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for r, q in sorted(rec["requests"].items(), key=lambda kv: int(kv[0])):
            seq, plen = q["tokens"], rec["prompts"][int(r)]
            if len(seq) > n:
                sys.exit(f"generate_check.py: request {r} has {len(seq)} tokens; the scoring module holds {n}")
            ids = np.array(seq + [0] * (n - len(seq)), np.int32)
            targets = np.array(seq[1:] + [-1] * (n - len(seq) + 1), np.int32)
            ins = {"ids": ("I32", ids), "targets": ("I32", targets),
                   "cos": (tables["rope_cos"][0], tables["rope_cos"][1][:n]),
                   "sin": (tables["rope_sin"][0], tables["rope_sin"][1][:n])}
            cmd_out = tpc_run(a.module, None, ins, a.weights, a, tmp)
            loss = cmd_out["loss"][1].view(np.uint32)
            want = [int(loss[j - 1]) for j in range(plen, len(seq))]
            same = want == q["loss_bits"]
            ok = ok and same
            diff = sum(x != y for x, y in zip(want, q["loss_bits"]))
            print(f"request {r}: {len(seq) - plen} drawn tokens, {diff} log-probabilities differ from the scoring forward")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def same(a):
    x, y = json.load(open(a.first)), json.load(open(a.second))
    bad = [r for r in x["requests"] if x["requests"][r] != y["requests"].get(r)]
    print(f"{len(x['requests'])} requests: {len(bad)} differ" + (f" ({', '.join(bad)})" if bad else ""))
    print("PASS" if not bad else "FAIL")
    return 0 if not bad else 1


def import_run(a):
    prompts = [json.loads(line) for line in open(a.prompts) if line.strip()]
    reqs, lens = {}, {}
    for line in open(a.output):
        o = json.loads(line)
        p = prompts[o["index"]]
        key = str(o.get("id", o["index"]))
        bits = [int(np.array([-x], np.float32).view(np.uint32)[0]) for x in o["logprobs"]]
        reqs[key] = {"tokens": p["tokens"] + o["tokens"], "loss_bits": bits}
        lens[int(key)] = len(p["tokens"])
    with open(a.run, "w") as f:
        json.dump({"prompts": [lens[i] for i in range(len(lens))], "requests": reqs}, f)
    return 0


def write_prompts(a):
    lengths = [int(x) for x in a.prompts.split(",")]
    ps = prompts_of(lengths, a.vocab)
    order = [int(x) for x in a.order.split(",")] if a.order else list(range(len(ps)))
    with open(a.out, "w") as f:
        for r in order:
            f.write(json.dumps({"id": r, "tokens": ps[r], "max_tokens": a.new}) + "\n")
    return 0


TEXTS = ["This program is free software; you can redistribute it",
         "  Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>",
         "na\u00efve caf\u00e9 \u2014 \u00fcn\u00efcode\ttabs\n\nnewlines   spaces"]


def _tokenizer(path):
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("tpc_tokenize", os.path.join(here, "..", "..", "tools", "tokenize.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    merges = [tuple(m) for m in json.load(open(path))["merges"]]
    return mod, merges


def text_prompts(a):
    mod, merges = _tokenizer(a.tokenizer)
    with open(a.out, "w") as f:
        for i, t in enumerate(TEXTS):
            f.write(json.dumps({"id": i, "text": t, "max_tokens": 3}) + "\n")
            f.write(json.dumps({"id": i, "tokens": mod.encode(t, merges), "max_tokens": 3}) + "\n")
    return 0


def text_check(a):
    _, merges = _tokenizer(a.tokenizer)

    def raw(t):
        if t < 256:
            return bytes([t])
        x, y = merges[t - 256]
        return raw(x) + raw(y)

    rows = sorted((json.loads(line) for line in open(a.out)), key=lambda o: o["index"])
    ok = True
    for x, y in zip(rows[::2], rows[1::2]):
        same = (x["prompt_tokens"], x["tokens"], x["logprobs"]) == (y["prompt_tokens"], y["tokens"], y["logprobs"])
        text = b"".join(raw(t) for t in x["tokens"]).decode("utf-8", errors="replace")
        ok = ok and same and x.get("text") == text
        print(f"text {x['id']}: {x['prompt_tokens']} prompt tokens, "
              f"{'the same draw as its tokens' if same else 'ANOTHER draw than its tokens'}, "
              f"{'text decoded' if x.get('text') == text else 'WRONG text'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("module")
    r.add_argument("weights")
    r.add_argument("out")
    r.add_argument("--prompts", required=True)
    r.add_argument("--new", type=int, default=4)
    r.add_argument("--order")
    r.add_argument("--seed", type=int, default=5)
    r.add_argument("--temperature", type=float, default=1.0)
    r.add_argument("--top-k", type=int, default=0)
    r.add_argument("--top-p", type=float, default=1.0)
    s = sub.add_parser("score")
    s.add_argument("module")
    s.add_argument("weights")
    s.add_argument("gen_weights")
    s.add_argument("out")
    s.add_argument("--tokens", type=int, help="the scoring module's tokens (a compiled module's; a .mlir says)")
    for q in (r, s):
        q.add_argument("--numerics")
        q.add_argument("--mesh", default="tp=1")
        q.add_argument("--backend", default="cpu", help="cpu or cuda (ranks sharing the GPUs)")
    i = sub.add_parser("import")
    i.add_argument("prompts")
    i.add_argument("output")
    i.add_argument("run")
    w = sub.add_parser("prompts")
    w.add_argument("out")
    w.add_argument("--prompts", required=True)
    w.add_argument("--order")
    w.add_argument("--new", type=int, default=4)
    w.add_argument("--vocab", type=int, default=256)
    for name in ("text-prompts", "text-check"):
        t = sub.add_parser(name)
        t.add_argument("tokenizer")
        t.add_argument("out")
    m = sub.add_parser("same")
    m.add_argument("first")
    m.add_argument("second")
    a = p.parse_args(argv)
    return {"run": run, "score": score, "same": same, "import": import_run, "prompts": write_prompts,
            "text-prompts": text_prompts, "text-check": text_check}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
