#!/usr/bin/env python3
"""The PyTorch peer of the decoder-stack benchmark (tools/bench/llama_stack.py): the decoder layers
of a Llama configuration written in plain PyTorch with Hugging Face's arithmetic (RMSNorm, q/k/v
projections, rotate-half RoPE, causal grouped-query attention through
scaled_dot_product_attention, o projection, SwiGLU MLP, residual adds), bf16 on one GPU, random
weights. Times, like tpc-run --repeat (median of 10 steps after 3 warm-ups, each synchronized):
the forward, and the training step (forward, then backward from a given output gradient to the
input and every weight: what tpc's train pipeline computes), eager and under torch.compile.

With --decode C: a decoding step instead, as gpt-fast writes one: B sequences of one new token
after C-1 cached ones, each layer's static KV cache [B, Hkv, C, D] (random) taking the token's
rotated key and value at position C-1 (index_copy_), then SDPA of the token over the C cached
keys; eager and under torch.compile(mode="reduce-overhead") (CUDA graphs).

Usage: llama_peer.py CONFIG.json --batch B --seq-len S   (prints "peer_<what>_ms <ms>" lines)
       llama_peer.py CONFIG.json --batch B --decode C    (peer_decode_ms, peer_decode_compile_ms)
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--decode", type=int, metavar="C", help="time a decoding step over KV caches of C tokens")
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu runs a small config anywhere")
    args = ap.parse_args()
    c = json.load(open(args.config))
    hid, ffn, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    hq, hkv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or hid // hq
    eps, theta = c.get("rms_norm_eps", 1e-5), c.get("rope_theta", 10000.0)
    b, s = args.batch, args.seq_len
    dev, dt = args.device, torch.bfloat16
    if args.decode:
        s = 1
    torch.manual_seed(7)

    def w(o, i):
        return (torch.randn(o, i, device=dev, dtype=dt) / i**0.5).requires_grad_()

    params = []
    for _ in range(layers):
        params.append([torch.ones(hid, device=dev, dtype=dt, requires_grad=True), w(hq * d, hid), w(hkv * d, hid),
                       w(hkv * d, hid), w(hid, hq * d), torch.ones(hid, device=dev, dtype=dt, requires_grad=True),
                       w(ffn, hid), w(ffn, hid), w(hid, ffn)])
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d)
    first = args.decode - 1 if args.decode else 0  # the new token's position when decoding
    ang = torch.outer(torch.arange(first, first + s, device=dev, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)
    x = (torch.randn(b * s, hid, device=dev, dtype=dt) * 0.1).requires_grad_()
    dy = torch.randn(b * s, hid, device=dev, dtype=dt) * 0.1

    def rot(t):  # [B, H, S, D]
        t1, t2 = t[..., : d // 2], t[..., d // 2:]
        return t * cos + torch.cat([-t2, t1], dim=-1) * sin

    def stack(x):
        for g1, wq, wk, wv, wo, g2, wg, wu, wd in params:
            h = F.rms_norm(x, (hid,), g1, eps)
            q = F.linear(h, wq).view(b, s, hq, d).transpose(1, 2)
            k = F.linear(h, wk).view(b, s, hkv, d).transpose(1, 2)
            v = F.linear(h, wv).view(b, s, hkv, d).transpose(1, 2)
            a = F.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True, enable_gqa=hkv != hq)
            x = x + F.linear(a.transpose(1, 2).reshape(b * s, hq * d), wo)
            h = F.rms_norm(x, (hid,), g2, eps)
            x = x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)
        return x

    flat = [x] + [p for layer in params for p in layer]

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def timed(fn):
        ts = []
        for i in range(13):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            if i >= 3:
                ts.append((time.perf_counter() - t0) * 1e3)
        ts.sort()
        return ts[len(ts) // 2]

    def train(f):
        return lambda: torch.autograd.grad(f(x), flat, dy)

    if args.decode:
        c = args.decode
        caches = [(torch.randn(b, hkv, c, d, device=dev, dtype=dt), torch.randn(b, hkv, c, d, device=dev, dtype=dt))
                  for _ in range(layers)]
        pos = torch.tensor([c - 1], device=dev)

        def step(x):
            for (g1, wq, wk, wv, wo, g2, wg, wu, wd), (kc, vc) in zip(params, caches):
                h = F.rms_norm(x, (hid,), g1, eps)
                q = F.linear(h, wq).view(b, 1, hq, d).transpose(1, 2)
                k = F.linear(h, wk).view(b, 1, hkv, d).transpose(1, 2)
                v = F.linear(h, wv).view(b, 1, hkv, d).transpose(1, 2)
                kc.index_copy_(2, pos, rot(k))
                vc.index_copy_(2, pos, v)
                a = F.scaled_dot_product_attention(rot(q), kc, vc, enable_gqa=hkv != hq)
                x = x + F.linear(a.transpose(1, 2).reshape(b, hq * d), wo)
                h = F.rms_norm(x, (hid,), g2, eps)
                x = x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)
            return x

        with torch.no_grad():
            xd = x.detach()
            print(f"peer_decode_ms {timed(lambda: step(xd)):.3f}")
            if not args.no_compile:
                # Weights and caches marked static (gpt-fast's are parameters and buffers): else each
                # replay of the CUDA graph first copies every one of them into the graph's inputs.
                for t in [w for layer in params for w in layer] + [t for kv in caches for t in kv]:
                    torch._dynamo.mark_static_address(t)
                comp = torch.compile(step, mode="reduce-overhead")
                print(f"peer_decode_compile_ms {timed(lambda: comp(xd)):.3f}")
        name = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
        print(f"device {name}, torch {torch.__version__}")
        return

    with torch.no_grad():
        print(f"peer_fwd_ms {timed(lambda: stack(x)):.3f}")
    print(f"peer_train_ms {timed(train(stack)):.3f}")
    if not args.no_compile:
        comp = torch.compile(stack)
        print(f"peer_train_compile_ms {timed(train(comp)):.3f}")
        with torch.no_grad():
            print(f"peer_fwd_compile_ms {timed(lambda: comp(x)):.3f}")
    name = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
    print(f"device {name}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
