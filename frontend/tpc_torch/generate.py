"""python -m tpc_torch.generate: samples from a Hugging Face model with tpc-generate, and checks
greedy decoding against transformers' generate (docs/generation.md, "From Python").

  python -m tpc_torch.generate MODEL --tpc-generate build/bin/tpc-generate --prompts p.jsonl \\
      [-o out.jsonl] [--workdir DIR] [--batch 4] [--kv-cache 256] [--prefill-chunk 32] [--dtype bf16] \\
      [--numerics invariant] [--mesh tp=2] [--backend cuda] [--max-tokens 16] [--temperature T] ... [--check]

MODEL is a built-in config, a config.json or a checkpoint directory (as for tpc_torch.export). The
model is exported with --generate into --workdir (gen.mlir and its weights) and tpc-generate runs
it on the requests of --prompts (JSON Lines, docs/generation.md) or --random N,L (N prompts of L
random tokens). Its result lines are written to -o (default stdout).

--check decodes greedily (temperature 0) and runs transformers' generate on the same model object
and prompts (greedy, no eos): prints one line per request (the first token where they part, and
the largest difference of the drawn tokens' log-probabilities against PyTorch's log_softmax of its
logits) and PASS when every request's tokens are PyTorch's. In bf16 (or f16) the tokens may part
from PyTorch's own bf16 run; the verdict is then on the drawn tokens' log-probabilities against
the f32 yardstick (the same model in f32 scoring tpc's sequences), within the tolerance or twice
PyTorch-bf16's own error against f32 (tpc_torch.verdict)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

from .errors import ExportError


def _prompts(a, vocab):
    if a.random:
        n, length = (int(x) for x in a.random.split(","))
        g = torch.Generator().manual_seed(a.seed + 7)
        return [{"id": i, "tokens": torch.randint(0, vocab, (length,), generator=g).tolist()} for i in range(n)]
    with open(a.prompts) as f:
        return [json.loads(line) for line in f if line.strip()]


def _torch_greedy(model, prompt, new):
    """transformers' greedy continuation of |prompt| (new tokens, no eos) and the log-probability
    of each drawn token under its logits."""
    ids = torch.tensor([prompt])
    cfg = model.generation_config
    cfg.eos_token_id, cfg.pad_token_id = None, 0
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, output_scores=True, return_dict_in_generate=True)
    drawn = out.sequences[0, len(prompt):].tolist()
    logps = [torch.log_softmax(s[0].float(), -1)[t].item() for s, t in zip(out.scores, drawn)]
    return drawn, logps


def _scored(model, seq, start):
    """The log-probabilities |model| gives tokens seq[start:] after their prefixes (one forward)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return [lp[j - 1, seq[j]].item() for j in range(start, len(seq))]


def _check_low_precision(model, prompts, results, dtype):
    """bf16 (f16): the drawn tokens' log-probabilities against the f32 yardstick (the same model in
    f32, teacher-forced on tpc's sequence), within the tolerance or twice PyTorch-bf16's own error
    against f32 (tpc_torch.verdict); whether the greedy tokens stay PyTorch-bf16's is printed."""
    import copy

    from . import verdict

    f32 = copy.deepcopy(model).float()
    ok = True
    for i, req in enumerate(prompts):
        got = results[i]
        seq, start = req["tokens"] + got["tokens"], len(req["tokens"])
        ref, low = _scored(f32, seq, start), _scored(model, seq, start)
        tpc = got["logprobs"]
        err = max(abs(x - y) for x, y in zip(tpc, low))
        e32 = max(abs(x - y) for x, y in zip(tpc, ref))
        t32 = max(abs(x - y) for x, y in zip(low, ref))
        s32 = max(abs(x) for x in ref)
        j = verdict.judge(verdict.TOLERANCE[dtype if dtype in verdict.TOLERANCE else "bf16"][0], err,
                          max(abs(x) for x in low), (e32, t32, s32))
        want, _ = _torch_greedy(model, req["tokens"], len(got["tokens"]))
        part = next((k for k, (x, y) in enumerate(zip(got["tokens"], want)) if x != y), None)
        ok = ok and j.ok
        print(f"request {i}: {len(tpc)} tokens ({'the same as' if part is None else f'parting at token {part} from'} "
              f"transformers' {dtype} generate); log-probabilities {j.text}: {'ok' if j.ok else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tpc_torch.generate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--tpc-generate", default="tpc-generate", help="the tpc-generate binary")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", help="requests as JSON Lines")
    src.add_argument("--random", metavar="N,L", help="N prompts of L random tokens")
    p.add_argument("-o", "--output", help="tpc-generate's result lines (default stdout)")
    p.add_argument("--workdir", help="where the exported module and weights go (default a temporary directory)")
    p.add_argument("--batch", type=int, default=4, help="sequence slots of the decode step (default 4)")
    p.add_argument("--kv-cache", type=int, default=256, help="KV cache rows per sequence (default 256)")
    p.add_argument("--prefill-chunk", type=int, default=32, help="prompt tokens per prefill call (default 32)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--plan", default="megatron")
    p.add_argument("--seed", type=int, default=0, help="seed of random weights and of the draws")
    p.add_argument("--numerics")
    p.add_argument("--mesh")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--check", action="store_true", help="greedy, against transformers' generate")
    a = p.parse_args(argv)
    from .export_generate import generate
    from . import weights as wts

    work = a.workdir or tempfile.mkdtemp(prefix="tpc-generate-")
    os.makedirs(work, exist_ok=True)
    try:
        text, dec, ends, tables = generate(a.model, a.plan, a.batch, a.kv_cache, a.prefill_chunk, a.dtype, a.seed, True)
    except ExportError as e:
        print(f"tpc_torch.generate: error: {e}", file=sys.stderr)
        return 2
    module = os.path.join(work, "gen.mlir")
    with open(module, "w") as f:
        f.write(text)
    wts.save(os.path.join(work, "weights.safetensors"), {**dec.weights(), **ends})
    wts.save(os.path.join(work, "inputs.safetensors"), tables)
    prompts = _prompts(a, dec.model.config.vocab_size)
    for r in prompts:
        r.setdefault("max_tokens", a.max_tokens)
    prompt_file = os.path.join(work, "prompts.jsonl")
    with open(prompt_file, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in prompts))
    out = a.output or os.path.join(work, "out.jsonl")
    cmd = [a.tpc_generate, module, "--prompts", prompt_file, "--weights", os.path.join(work, "weights.safetensors"),
           "--inputs", os.path.join(work, "inputs.safetensors"), "--backend", a.backend, "-o", out,
           "--seed", str(a.seed), "--temperature", "0" if a.check else str(a.temperature), "--top-k", str(a.top_k),
           "--top-p", str(a.top_p)]
    cmd += ["--numerics", a.numerics] if a.numerics else []
    cmd += ["--mesh", a.mesh] if a.mesh else []
    r = subprocess.run(cmd)
    if r.returncode != 0:
        return r.returncode
    if not a.check:
        if not a.output:
            sys.stdout.write(open(out).read())
        return 0
    results = {}
    for line in open(out):
        o = json.loads(line)
        results[o["index"]] = o
    ok = True
    model = dec.model.eval()
    if a.dtype != "f32":
        return _check_low_precision(model, prompts, results, a.dtype)
    for i, req in enumerate(prompts):
        got = results[i]
        want, logps = _torch_greedy(model, req["tokens"], req["max_tokens"])
        part = next((j for j, (x, y) in enumerate(zip(got["tokens"], want)) if x != y), None)
        same = part is None and len(got["tokens"]) == len(want)
        n = len(want) if part is None else part
        diff = max((abs(x - y) for x, y in zip(got["logprobs"][:n], logps[:n])), default=0.0)
        ok = ok and same
        print(f"request {i}: {len(got['tokens'])} tokens, "
              + ("the same as transformers' generate" if same else f"parts from transformers' at token {part}")
              + f"; log-probabilities within {diff:.2e} of PyTorch's")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
