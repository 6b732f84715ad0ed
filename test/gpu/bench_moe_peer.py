#!/usr/bin/env python3
"""The peer of the MoE block benchmark: the block of tools/bench/mixtral_moe.mlir in PyTorch on one
GPU. Mixtral-8x7B-like: 4096 tokens, hidden 4096, 8 experts, top-2 routing with the two weights
renormalized to sum to 1, expert FFN 14336 with SwiGLU, bf16. The same function as tpc's ops:

  logits = x @ router^T                      tp.linear (bf16 result)
  softmax over E in f32, top-2, w /= sum(w)  tp.moe_route {top_k = 2, normalize = true}
  rows sorted by expert (stable)             tp.moe_permute (group sizes, row map)
  h1 = rows @ w1[e]^T per expert             tp.grouped_linear, w1 [E, 2F, H]
  a = silu(h1[:, :F]) * h1[:, F:]            tp.glu {kind = "swiglu"} (interleave 0: [gate | up])
  h2 = a @ w2[e]^T per expert                tp.grouped_linear, w2 [E, H, F]
  y[t] = sum_j w[t, j] * h2[slot (t, j)]     tp.moe_unpermute (f32 sum, bf16 result)

The expert GEMMs are torch._grouped_mm (CUTLASS grouped GEMM on sm_90; offsets = the cumulative
group sizes as int32, on the device: no host synchronization in the step). Arguments are drawn like
tpc-run --seed draws them: matrices uniform in +-1/sqrt(columns).

Timed with CUDA events around each step, each step synchronized (like tpc-run --repeat): the median
of 10 steps after 3 warm-ups. Printed:
  peer_moe_fwd_ms          forward only (no autograd)
  peer_moe_train_ms        the training step: forward, then torch.autograd.grad from a given
                           output gradient to x, router, w1 and w2 (what tpc's train pipeline
                           computes), eager
  peer_moe_train_compile_ms the same step under torch.compile (nan if compiling fails)
  peer_moe_flops           the training step's GEMM FLOPs: 3 x (routed expert GEMMs + router)
  peer_moe_group_sizes     the rows each expert received

Usage: bench_moe_peer.py [--tokens T --hidden H --ffn F --experts E --top-k K]
"""
import argparse
import math

import torch
import torch.nn.functional as F


def moe_block(x, router, w1, w2, top_k):
    """y[T,H] of the MoE block; x [T,H], router [E,H], w1 [E,2F,H], w2 [E,H,F] (all bf16)."""
    t, h = x.shape
    e, two_f, _ = w1.shape
    f = two_f // 2
    logits = F.linear(x, router)                                  # [T,E], x's dtype (tp.linear)
    probs = torch.softmax(logits.float(), dim=-1)                 # f32
    wts, idx = torch.topk(probs, top_k, dim=-1)                   # [T,k]
    wts = wts / wts.sum(dim=-1, keepdim=True)                     # normalize = true
    flat = idx.reshape(-1)                                        # slot t*k+j -> expert
    order = torch.argsort(flat, stable=True)                      # rows in expert order: their slots
    counts = torch.zeros(e, dtype=torch.int32, device=x.device).scatter_add_(
        0, flat, torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)             # group ends
    xp = x[order // top_k]                                        # [T*k,H] (tp.moe_permute)
    h1 = torch._grouped_mm(xp, w1.transpose(-2, -1), offs=offs)   # [T*k,2F]
    a = F.silu(h1[:, :f]) * h1[:, f:]                             # [T*k,F] swiglu, [gate | up]
    h2 = torch._grouped_mm(a, w2.transpose(-2, -1), offs=offs)    # [T*k,H]
    inv = torch.empty_like(order)
    inv[order] = torch.arange(order.numel(), device=x.device)     # slot -> row
    ys = h2[inv].view(t, top_k, h).float()                        # [T,k,H], slot order
    return (ys * wts.unsqueeze(-1)).sum(dim=1).to(x.dtype)        # tp.moe_unpermute


def uniform(shape, cols, gen, dev, dt):
    """Uniform in +-1/sqrt(cols), like tpc-run's seeded matrices."""
    bound = 1.0 / math.sqrt(cols)
    return ((torch.rand(shape, generator=gen, device=dev, dtype=torch.float32) * 2 - 1) * bound).to(dt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    t, h, f, e, k = args.tokens, args.hidden, args.ffn, args.experts, args.top_k
    dev, dt = "cuda", torch.bfloat16
    gen = torch.Generator(device=dev)
    gen.manual_seed(7)
    x = uniform((t, h), h, gen, dev, dt)
    router = uniform((e, h), h, gen, dev, dt)
    w1 = uniform((e, 2 * f, h), h, gen, dev, dt)
    w2 = uniform((e, h, f), f, gen, dev, dt)
    dy = uniform((t, h), h, gen, dev, dt)

    def timed(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for i in range(args.warmup + args.steps):
            torch.cuda.synchronize()
            start.record()
            fn()
            end.record()
            end.synchronize()
            if i >= args.warmup:
                times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2]

    # The routed GEMM FLOPs: every token's k rows through FC1 (H -> 2F) and FC2 (F -> H), plus
    # the router (H -> E); the training step adds dgrad and wgrad of each: 3x the forward.
    fwd_flops = 2 * t * k * (h * 2 * f + f * h) + 2 * t * h * e
    print(f"peer_moe_flops {3 * fwd_flops}", flush=True)
    with torch.no_grad():
        y = moe_block(x, router, w1, w2, k)
        _, idx = torch.topk(torch.softmax(F.linear(x, router).float(), dim=-1), k, dim=-1)
        sizes = torch.bincount(idx.reshape(-1), minlength=e).tolist()
        print(f"peer_moe_group_sizes {' '.join(map(str, sizes))}", flush=True)
        assert torch.isfinite(y).all(), "non-finite output"
        print(f"peer_moe_fwd_ms {timed(lambda: moe_block(x, router, w1, w2, k)):.3f}", flush=True)
        del y

    params = [p.detach().clone().requires_grad_(True) for p in (x, router, w1, w2)]

    def block(xx, rr, ww1, ww2):
        return moe_block(xx, rr, ww1, ww2, k)

    def train(fn):
        def run():
            y = fn(*params)
            torch.autograd.grad(y, params, dy)
        return run

    print(f"peer_moe_train_ms {timed(train(block)):.3f}", flush=True)
    try:
        print(f"peer_moe_train_compile_ms {timed(train(torch.compile(block))):.3f}", flush=True)
    except Exception as exc:  # noqa: BLE001 - the eager numbers stand without it
        print(f"torch.compile failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        print("peer_moe_train_compile_ms nan", flush=True)
    print(f"peer: torch {torch.__version__} on {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
