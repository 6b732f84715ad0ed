#!/usr/bin/env python3
"""The PyTorch peer of the generation benchmark (tools/bench/generate_1b.sh): a Llama configuration
in plain PyTorch with Hugging Face's arithmetic (as tools/bench/train_peer.py), decoding greedily
over a static KV cache the way gpt-fast and transformers' static-cache generate do: the prefill and
the one-token decode step each torch.compile'd (the decode step with mode="reduce-overhead", so it
replays as a CUDA graph), bf16 weights and compute.

  generate_peer.py CONFIG.json --batch B --prompt P --new N [--write-init W.safetensors] [--init-only]
                   [--eager] [--device cpu]

For each batch size, B prompts of P random tokens: the prefill's time (B·P tokens) and the time of
N - 1 decode steps after it (B tokens each), medians of --repeat runs after a warm-up. Prints
"peer batch B prefill_tokens_per_s X decode_tokens_per_s Y". --write-init writes the weights
(named as the tp module's arguments, gate_up_proj = [gate_proj; up_proj]) for tpc-generate;
--init-only stops there. The weights and the KV caches are marked as static addresses (as
gpt-fast's parameters and cache buffers are), so the decode step's CUDA graph reads and mutates
them in place (unmarked, each replay first copied all the weights: 1.8 ms a step on an H100).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from train_peer import save_safetensors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-init", metavar="FILE")
    ap.add_argument("--init-only", action="store_true", help="write --write-init and stop")
    ap.add_argument("--eager", action="store_true", help="no torch.compile")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--profile", action="store_true",
                    help="after the timing, the GPU kernels of 8 decode steps (torch.profiler), per step")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    c = json.load(open(a.config))
    hid, ffn, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hq, hkv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or hid // hq
    eps, theta = c.get("rms_norm_eps", 1e-5), c.get("rope_theta", 10000.0)
    tied = bool(c.get("tie_word_embeddings", False))
    dev, bf = a.device, torch.bfloat16
    torch.manual_seed(a.seed)

    def w(o, i):
        return (torch.randn(o, i, device=dev) / i**0.5).to(bf)

    P = {"embed_tokens.weight": (torch.randn(vocab, hid, device=dev) * 0.02).to(bf)}
    for i in range(layers):
        p = f"layers.{i}."
        P[p + "input_layernorm.weight"] = torch.ones(hid, device=dev, dtype=bf)
        P[p + "self_attn.q_proj.weight"] = w(hq * d, hid)
        P[p + "self_attn.k_proj.weight"] = w(hkv * d, hid)
        P[p + "self_attn.v_proj.weight"] = w(hkv * d, hid)
        P[p + "self_attn.o_proj.weight"] = w(hid, hq * d)
        P[p + "post_attention_layernorm.weight"] = torch.ones(hid, device=dev, dtype=bf)
        P[p + "mlp.gate_up_proj.weight"] = w(2 * ffn, hid)
        P[p + "mlp.down_proj.weight"] = w(hid, ffn)
    P["norm.weight"] = torch.ones(hid, device=dev, dtype=bf)
    if not tied:
        P["lm_head.weight"] = w(vocab, hid)
    if a.write_init:
        save_safetensors(a.write_init, P)
    if a.init_only:
        return
    head = P["embed_tokens.weight"] if tied else P["lm_head.weight"]
    # The weights are plain tensors the compiled functions read (gpt-fast's are module parameters):
    # marked static, or every replay of the decode step's CUDA graph would first copy all of them.
    for t in P.values():
        torch._dynamo.mark_static_address(t)
    cap = a.prompt + a.new
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d)
    ang = torch.outer(torch.arange(cap, device=dev, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    cos_t, sin_t = emb.cos().to(bf), emb.sin().to(bf)

    def rms(x, g):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(bf) * g

    def rot(t):
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat([-t2, t1], dim=-1)

    def forward(ids, pos, kc, vc, prefill):
        """ids [B, S] at positions pos [S]; caches [L][B, Hkv, C, D] written in place; returns the
        last position's greedy token [B]."""
        bsz, s = ids.shape
        x = F.embedding(ids, P["embed_tokens.weight"])
        cos, sin = cos_t[pos][None, None], sin_t[pos][None, None]
        for i in range(layers):
            p = f"layers.{i}."
            h = rms(x, P[p + "input_layernorm.weight"])
            q = F.linear(h, P[p + "self_attn.q_proj.weight"]).view(bsz, s, hq, d).transpose(1, 2)
            k = F.linear(h, P[p + "self_attn.k_proj.weight"]).view(bsz, s, hkv, d).transpose(1, 2)
            v = F.linear(h, P[p + "self_attn.v_proj.weight"]).view(bsz, s, hkv, d).transpose(1, 2)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            kc[i][:, :, pos] = k
            vc[i][:, :, pos] = v
            if prefill:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                mask = (torch.arange(cap, device=dev) <= pos[-1])[None, None, None]
                o = F.scaled_dot_product_attention(q, kc[i], vc[i], attn_mask=mask, enable_gqa=True)
            x = x + F.linear(o.transpose(1, 2).reshape(bsz, s, hq * d), P[p + "self_attn.o_proj.weight"])
            h = rms(x, P[p + "post_attention_layernorm.weight"])
            g, u = F.linear(h, P[p + "mlp.gate_up_proj.weight"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, P[p + "mlp.down_proj.weight"])
        logits = F.linear(rms(x[:, -1], P["norm.weight"]), head)
        return logits.argmax(-1)

    prefill = (lambda *t: forward(*t, True)) if a.eager else torch.compile(lambda *t: forward(*t, True))
    decode = (lambda *t: forward(*t, False)) if a.eager else torch.compile(lambda *t: forward(*t, False),
                                                                           mode="reduce-overhead")
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        for bsz in a.batch:
            kc = [torch.zeros(bsz, hkv, cap, d, device=dev, dtype=bf) for _ in range(layers)]
            vc = [torch.zeros(bsz, hkv, cap, d, device=dev, dtype=bf) for _ in range(layers)]
            for t in kc + vc:
                torch._dynamo.mark_static_address(t)
            ids = torch.randint(0, vocab, (bsz, a.prompt), device=dev)
            pre_t, dec_t = [], []
            for r in range(a.repeat + 1):
                sync()
                t0 = time.perf_counter()
                tok = prefill(ids, torch.arange(a.prompt, device=dev), kc, vc)
                sync()
                t1 = time.perf_counter()
                for j in range(a.new - 1):
                    pos = torch.tensor([a.prompt + j], device=dev)
                    tok = decode(tok[:, None].clone(), pos, kc, vc)
                sync()
                t2 = time.perf_counter()
                if r > 0:  # the first run compiles
                    pre_t.append(t1 - t0)
                    dec_t.append(t2 - t1)
            if a.profile:
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for j in range(8):  # positions inside the cache (rewriting its last ones)
                        pos = torch.tensor([a.prompt + max(0, a.new - 9) + min(j, a.new - 2)], device=dev)
                        tok = decode(tok[:, None].clone(), pos, kc, vc)
                    sync()
                ev = prof.key_averages()
                graph = sum(e.self_device_time_total for e in ev if e.key.startswith("## Call CompiledFxGraph"))
                copies = sum(e.self_device_time_total for e in ev if e.key.startswith("Memcpy"))
                print(f"peer batch {bsz} profile per decode step: compiled graph's kernels {graph / 8e3:.3f} ms, "
                      f"memory copies {copies / 8e3:.3f} ms", flush=True)
                print(ev.table(sort_by="self_device_time_total", row_limit=12), flush=True)
            pre, dec = statistics.median(pre_t), statistics.median(dec_t)
            print(f"peer batch {bsz} prefill_tokens_per_s {bsz * a.prompt / pre:.1f} decode_tokens_per_s "
                  f"{bsz * (a.new - 1) / dec:.1f} prefill_ms {pre * 1e3:.3f} decode_step_ms {dec * 1e3 / (a.new - 1):.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
