#!/usr/bin/env python3
"""The PyTorch peer of the whole-model training benchmark (tools/bench/train_1b.sh): a Llama
configuration written in plain PyTorch with Hugging Face's arithmetic (token embedding, RMSNorm,
q/k/v projections, rotate-half RoPE, causal grouped-query attention through
scaled_dot_product_attention, o projection, SwiGLU MLP, residual adds, final norm, the LM head,
tied to the embedding where the config ties them, and the mean cross-entropy of the logits in f32),
trained on one GPU with the recipe tpc-train uses: f32 master weights and AdamW moments, bf16
compute (torch.autocast), torch.optim.AdamW(fused=True), clip_grad_norm_, linear warm-up and
cosine decay; batches read from an llm.c token file exactly as tpc-train reads them.

  train_peer.py CONFIG.json --data FILE --batch B --seq-len S --steps N [--compile] \\
      [--write-init W.safetensors] [--json FILE]

--write-init writes the initial weights (bf16, named as the tp module's arguments: gate_up_proj =
[gate_proj; up_proj]) before training, for tpc-train --weights. Prints one line per step and, at
the end, "peer <mode> step_ms <median over steps 3..N> tokens_per_s <...> peak_alloc_gib <...>".
"""
import argparse
import json
import math
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F


def batches(path, tokens, steps):
    """The ids and targets of steps 1..steps as tpc-train reads them (docs/training.md)."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        data = np.frombuffer(f.read(), dtype=np.uint16 if header[1] == 1 else np.uint32).astype(np.int64)
    pos = 0
    for _ in range(steps):
        yield torch.from_numpy(data[pos:pos + tokens].copy()), torch.from_numpy(data[pos + 1:pos + tokens + 1].copy())
        pos += tokens
        if pos + tokens + 1 > len(data):
            pos = 0


def save_safetensors(path, tensors):
    """A safetensors file of bf16 tensors (no package needed)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.bfloat16).contiguous().cpu().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--min-lr", type=float)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward and loss")
    ap.add_argument("--write-init", metavar="FILE")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu runs a small config anywhere")
    a = ap.parse_args()
    min_lr = a.lr / 10 if a.min_lr is None else a.min_lr
    c = json.load(open(a.config))
    hid, ffn, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hq, hkv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or hid // hq
    eps, theta = c.get("rms_norm_eps", 1e-5), c.get("rope_theta", 10000.0)
    tied = bool(c.get("tie_word_embeddings", False))
    b, s, dev = a.batch, a.seq_len, a.device
    torch.manual_seed(a.seed)

    # Weights drawn in bf16 (what tpc-train reads), trained as f32 master weights.
    def w(o, i):
        return (torch.randn(o, i, device=dev) / i**0.5).to(torch.bfloat16)

    named = {"embed_tokens.weight": (torch.randn(vocab, hid, device=dev) * 0.02).to(torch.bfloat16)}
    for i in range(layers):
        p = f"layers.{i}."
        named[p + "input_layernorm.weight"] = torch.ones(hid, device=dev, dtype=torch.bfloat16)
        named[p + "self_attn.q_proj.weight"] = w(hq * d, hid)
        named[p + "self_attn.k_proj.weight"] = w(hkv * d, hid)
        named[p + "self_attn.v_proj.weight"] = w(hkv * d, hid)
        named[p + "self_attn.o_proj.weight"] = w(hid, hq * d)
        named[p + "post_attention_layernorm.weight"] = torch.ones(hid, device=dev, dtype=torch.bfloat16)
        named[p + "mlp.gate_up_proj.weight"] = w(2 * ffn, hid)
        named[p + "mlp.down_proj.weight"] = w(hid, ffn)
    named["norm.weight"] = torch.ones(hid, device=dev, dtype=torch.bfloat16)
    if not tied:
        named["lm_head.weight"] = w(vocab, hid)
    if a.write_init:
        save_safetensors(a.write_init, named)
    params = {k: v.float().requires_grad_() for k, v in named.items()}
    del named

    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d)
    ang = torch.outer(torch.arange(s, device=dev, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)

    def rot(t):  # [B, H, S, D]
        t1, t2 = t[..., : d // 2], t[..., d // 2:]
        return t * cos + torch.cat([-t2, t1], dim=-1) * sin

    def loss_fn(ids, targets):
        with torch.autocast(dev, dtype=torch.bfloat16):
            x = F.embedding(ids, params["embed_tokens.weight"]).to(torch.bfloat16)
            for i in range(layers):
                p = f"layers.{i}."
                h = F.rms_norm(x, (hid,), params[p + "input_layernorm.weight"].to(torch.bfloat16), eps)
                q = F.linear(h, params[p + "self_attn.q_proj.weight"]).view(b, s, hq, d).transpose(1, 2)
                k = F.linear(h, params[p + "self_attn.k_proj.weight"]).view(b, s, hkv, d).transpose(1, 2)
                v = F.linear(h, params[p + "self_attn.v_proj.weight"]).view(b, s, hkv, d).transpose(1, 2)
                at = F.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True, enable_gqa=hkv != hq)
                x = x + F.linear(at.transpose(1, 2).reshape(b * s, hq * d), params[p + "self_attn.o_proj.weight"])
                h = F.rms_norm(x, (hid,), params[p + "post_attention_layernorm.weight"].to(torch.bfloat16), eps)
                gate, up = F.linear(h, params[p + "mlp.gate_up_proj.weight"]).chunk(2, dim=-1)
                x = x + F.linear(F.silu(gate) * up, params[p + "mlp.down_proj.weight"])
            h = F.rms_norm(x, (hid,), params["norm.weight"].to(torch.bfloat16), eps)
            logits = F.linear(h, params["embed_tokens.weight" if tied else "lm_head.weight"])
        return F.cross_entropy(logits.float(), targets)

    step_fn = torch.compile(loss_fn) if a.compile else loss_fn
    plist = list(params.values())
    opt = torch.optim.AdamW(plist, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)

    def lr_at(t):
        if a.warmup > 0 and t <= a.warmup:
            return a.lr * t / a.warmup
        p = (t - a.warmup) / max(a.steps - a.warmup, 1)
        return min_lr + 0.5 * (a.lr - min_lr) * (1 + math.cos(math.pi * p))

    out = open(a.json, "w") if a.json else None
    times = []
    mode = "compile" if a.compile else "eager"
    cuda = dev == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for t, (ids, targets) in enumerate(batches(a.data, b * s, a.steps), start=1):
        ids, targets = ids.to(dev, non_blocking=True), targets.to(dev, non_blocking=True)
        sync()
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(t)
        loss = step_fn(ids, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(plist, a.clip if a.clip > 0 else float("inf"))
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv, nv = loss.item(), norm.item()
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"peer {mode}: step {t}/{a.steps} | loss {lv:.6f} | grad norm {nv:.4f} | {b * s / dt:.0f} tok/s",
              flush=True)
        if out:
            out.write(json.dumps({"step": t, "loss": lv, "grad_norm": nv, "seconds": dt}) + "\n")
    steady = sorted(times[2:] or times)
    ms = steady[len(steady) // 2] * 1e3
    mem = (f"peak_alloc_gib {torch.cuda.max_memory_allocated() / 2**30:.2f} "
           f"peak_reserved_gib {torch.cuda.max_memory_reserved() / 2**30:.2f} "
           f"device {torch.cuda.get_device_name()}") if cuda else "device CPU"
    print(f"peer {mode} step_ms {ms:.1f} tokens_per_s {b * s / ms * 1e3:.0f} {mem} torch {torch.__version__}")


if __name__ == "__main__":
    main()
