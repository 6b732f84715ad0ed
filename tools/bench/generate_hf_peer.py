#!/usr/bin/env python3
"""The Hugging Face peer of the generation benchmark (tools/bench/generate_1b.sh): transformers'
own generate() on a Llama built from CONFIG (random bf16 weights: only the speed is compared), with
a static KV cache (generation_config.cache_implementation = "static"), which makes generate compile
the decoding forward with torch.compile (transformers' default compile config: mode
"reduce-overhead", CUDA graphs) — the setting its documentation gives for fast decoding.

  generate_hf_peer.py CONFIG.json --batch B... --prompt P --new N [--repeat R]

For each batch size: B prompts of P random tokens, greedy, exactly N new tokens (no EOS). The
prefill's time is a generate() of one new token; a decode step is (time of N tokens − time of one)
/ (N − 1); medians of --repeat runs after a warm-up that compiles. Prints
"peer-hf batch B prefill_tokens_per_s X decode_tokens_per_s Y prefill_ms Z decode_step_ms W".
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test (generate compiles on GPUs only)")
    a = ap.parse_args()
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    c = json.load(open(a.config))
    cfg = LlamaConfig(**{k: v for k, v in c.items() if k != "model_type"})
    torch.manual_seed(7)
    with torch.device(a.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    gc = model.generation_config
    gc.cache_implementation = "static"
    gc.eos_token_id, gc.pad_token_id, gc.do_sample = None, 0, False

    def run(ids, n):
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n)
        sync()
        assert out.shape[1] == ids.shape[1] + n
        return time.perf_counter() - t0

    for bsz in a.batch:
        ids = torch.randint(0, cfg.vocab_size, (bsz, a.prompt), device=a.device)
        run(ids, a.new), run(ids, 1)  # compiles (prefill shape, decode step)
        pre = statistics.median(run(ids, 1) for _ in range(a.repeat))
        full = statistics.median(run(ids, a.new) for _ in range(a.repeat))
        step = (full - pre) / (a.new - 1)
        print(f"peer-hf batch {bsz} prefill_tokens_per_s {bsz * a.prompt / pre:.1f} decode_tokens_per_s "
              f"{bsz / step:.1f} prefill_ms {pre * 1e3:.3f} decode_step_ms {step * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main()
