#!/usr/bin/env python3
"""The report of tools/bench/train_1b.sh: for each run in LOG (tpc-fast, tpc-invariant,
torch-eager, torch-compile: their .jsonl step records and .mem nvidia-smi samples), the median step
time over steps 3..N, tokens/s, MFU and peak GPU memory, then the ratios the benchmark's targets
name; with --plot FILE, the loss curves (matplotlib).

MFU = the model's FLOPs per step over the step time and the GPU's dense bf16 peak (989 TFLOP/s for
an H100 or H200 SXM). The FLOPs per step are 6 per parameter of every matrix product per token (the
projections, the MLP and the LM head, which counts once even when tied to the embedding; the
embedding lookup is no product) plus causal attention's 6·S·Hq·D per token and layer (QKᵀ and PV,
half of the S×S scores, forward and backward).

Usage: train_report.py CONFIG.json LOG --batch B --seq-len S [--plot FILE.png]
"""
import argparse
import json
import os

PEAK = 989e12


def flops_per_step(c, batch, seq):
    hid, ffn, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hq, hkv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or hid // hq
    per_layer = hid * hq * d + 2 * hid * hkv * d + hq * d * hid + 3 * hid * ffn
    n_matmul = layers * per_layer + vocab * hid
    tokens = batch * seq
    return 6 * n_matmul * tokens + 6 * layers * seq * hq * d * tokens


def run(log, name):
    path = os.path.join(log, name + ".jsonl")
    if not os.path.exists(path):
        return None
    recs = [json.loads(line) for line in open(path) if line.strip()]
    steps = [r for r in recs if "loss" in r and "seconds" in r]
    if not steps:
        return None
    # tpc-train's "seconds" count from the start of training (with "tokens" so far); the peer's are
    # the step's own.
    secs = [r["seconds"] for r in steps]
    if "tokens" in steps[0]:
        secs = [secs[0]] + [b - a for a, b in zip(secs, secs[1:])]
    times = sorted(secs[2:] or secs)
    mem = None
    mp = os.path.join(log, name + ".mem")
    if os.path.exists(mp):
        vals = [int(v) for v in open(mp).read().split() if v.strip().isdigit()]
        mem = max(vals) / 1024 if vals else None
    return {"step_s": times[len(times) // 2], "loss": [r["loss"] for r in steps], "mem_gib": mem}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("log")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--plot")
    a = ap.parse_args()
    c = json.load(open(a.config))
    flops = flops_per_step(c, a.batch, a.seq_len)
    tokens = a.batch * a.seq_len
    runs = {n: run(a.log, n) for n in ("tpc-fast", "tpc-invariant", "torch-eager", "torch-compile")}
    print(f"model FLOPs per step {flops / 1e12:.1f} T ({tokens} tokens); peak {PEAK / 1e12:.0f} TFLOP/s")
    print(f"{'run':15} {'step ms':>9} {'tokens/s':>10} {'MFU':>6} {'peak GiB':>9}  last loss")
    for n, r in runs.items():
        if r is None:
            print(f"{n:15} (no records)")
            continue
        mfu = flops / r["step_s"] / PEAK
        mem = f"{r['mem_gib']:.1f}" if r["mem_gib"] is not None else "?"
        print(f"{n:15} {r['step_s'] * 1e3:9.1f} {tokens / r['step_s']:10.0f} {mfu:6.1%} {mem:>9}  {r['loss'][-1]:.4f}")

    def ratio(x, y, what):
        if runs[x] and runs[y]:
            print(f"{what}: {runs[y]['step_s'] / runs[x]['step_s']:.3f}x")

    ratio("tpc-fast", "torch-compile", "tpc fast speed-up over torch.compile (target >= 1.1)")
    ratio("tpc-fast", "torch-eager", "tpc fast speed-up over PyTorch eager")
    if runs["tpc-fast"] and runs["tpc-invariant"]:
        print(f"tpc invariant / fast step time (target <= 1.15): "
              f"{runs['tpc-invariant']['step_s'] / runs['tpc-fast']['step_s']:.3f}x")
    for n in ("tpc-fast", "tpc-invariant"):
        for p in ("torch-eager", "torch-compile"):
            if runs[n] and runs[p]:
                k = min(len(runs[n]["loss"]), len(runs[p]["loss"]))
                diff = max(abs(x - y) / abs(y) for x, y in zip(runs[n]["loss"][:k], runs[p]["loss"][:k]))
                print(f"{n} vs {p}: largest relative loss difference over {k} steps {diff:.2e}")
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for n, r in runs.items():
            if r:
                ax.plot(range(1, len(r["loss"]) + 1), r["loss"], label=n, linewidth=1.2)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (nats)")
        ax.set_title(f"1B Llama, {tokens} tokens per step")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)


if __name__ == "__main__":
    main()
