#!/usr/bin/env python3
"""The peer of the MLP block benchmark: the same Llama-3-8B-like block (RMSNorm, FC1 to 2 x 14336,
SwiGLU, FC2, residual add; 4096 tokens, bf16) in PyTorch on one GPU (cuBLAS, tensor cores), timed
like tpc-run --repeat: median of 10 steps after 3 warm-ups, each step synchronized. Also the
training step (forward, then backward from a given output gradient to x, gamma, w1 and w2: what
tpc's train pipeline computes), eager and under torch.compile.

Usage: bench_mlp_peer.py  (prints "peer_ms", "peer_train_ms", "peer_train_compile_ms" and the device)
"""
import time

import torch
import torch.nn.functional as F


def main():
    torch.manual_seed(7)
    t, h, f = 4096, 4096, 14336
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(t, h, device=dev, dtype=dt) * 0.1
    gamma = torch.ones(h, device=dev, dtype=dt)
    w1 = torch.randn(2 * f, h, device=dev, dtype=dt) / h**0.5
    w2 = torch.randn(h, f, device=dev, dtype=dt) / f**0.5

    def step():
        n = F.rms_norm(x, (h,), gamma, 1e-5)
        g, u = F.linear(n, w1).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, w2)

    def timed(fn):
        times = []
        for i in range(13):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return times[len(times) // 2]

    print(f"peer_ms {timed(step):.3f}", flush=True)
    params = [p.detach().clone().requires_grad_(True) for p in (x, gamma, w1, w2)]
    dy = torch.randn(t, h, device=dev, dtype=dt) * 0.01

    def block(xx, gg, ww1, ww2):
        n = F.rms_norm(xx, (h,), gg, 1e-5)
        g, u = F.linear(n, ww1).chunk(2, dim=-1)
        return xx + F.linear(F.silu(g) * u, ww2)

    def train(fn):
        def run():
            y = fn(*params)
            torch.autograd.grad(y, params, dy)
        return run

    print(f"peer_train_ms {timed(train(block)):.3f}", flush=True)
    try:
        print(f"peer_train_compile_ms {timed(train(torch.compile(block))):.3f}", flush=True)
    except Exception as e:  # noqa: BLE001 - the eager numbers stand without it
        print(f"torch.compile failed: {e}")
    print(f"peer: torch {torch.__version__} on {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
