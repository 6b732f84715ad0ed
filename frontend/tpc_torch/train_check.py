"""python -m tpc_torch.train_check: trains one Hugging Face model twice, with tpc-train and with
PyTorch (transformers + torch.optim.AdamW + clip_grad_norm_), from the same initial weights on the
same batches, and compares the loss at every step (docs/training.md, "Against PyTorch").

  python -m tpc_torch.train_check --tpc-train build/bin/tpc-train --data licenses.train.bin \\
      --config config.json --steps 50 --workdir /tmp/check

The model is exported with `tpc_torch.export --whole`; tpc-train runs it (--mesh, --numerics);
PyTorch trains the same model object. Both use the same warm-up + cosine schedule and AdamW
settings. Prints one line per step (both losses and their relative difference) and a verdict:
PASS when every step's relative difference is at most --tolerance (1e-4 for f32). With --dtype
bf16 the tolerance is PyTorch's own bf16-against-f32 spread at each step (measured in the same
run, times --bf16-factor)."""
import argparse
import json
import math
import os
import subprocess
import sys

import torch

from . import export as exporter


def batches(path, tokens, steps):
    """The ids and targets of steps 1..steps as tpc-train reads them (docs/training.md)."""
    import numpy as np

    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        data = np.frombuffer(f.read(), dtype=np.uint16 if header[1] == 1 else np.uint32).astype(np.int64)
    pos = 0
    for _ in range(steps):
        yield torch.from_numpy(data[pos:pos + tokens].copy()), torch.from_numpy(data[pos + 1:pos + tokens + 1].copy())
        pos += tokens
        if pos + tokens + 1 > len(data):
            pos = 0


def lr_at(a, t):
    if a.warmup > 0 and t <= a.warmup:
        return a.lr * t / a.warmup
    p = (t - a.warmup) / (a.steps - a.warmup)
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * p))


def torch_losses(model, a, dtype):
    """PyTorch's loss at every step: the mean cross-entropy of the batch's tokens."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, weight_decay=a.weight_decay,
                            foreach=False)
    out = []
    for t, (ids, targets) in enumerate(batches(a.data, a.batch * a.seq_len, a.steps), start=1):
        for g in opt.param_groups:
            g["lr"] = lr_at(a, t)
        logits = model(input_ids=ids.view(a.batch, a.seq_len)).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.append(loss.item())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tpc_torch.train_check", description=__doc__.splitlines()[0])
    ap.add_argument("--tpc-train", required=True)
    ap.add_argument("--data", required=True, help="a token file (tools/tokenize.py)")
    ap.add_argument("--config", default="llama-tiny", help="a built-in name or a config.json")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--mesh", default="tp=1")
    ap.add_argument("--numerics", default="exact")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--bf16-factor", type=float, default=2.0)
    ap.add_argument("--json", help="write both curves here")
    a = ap.parse_args(argv)
    os.makedirs(a.workdir, exist_ok=True)
    mlir = os.path.join(a.workdir, "model.mlir")
    wdir = os.path.join(a.workdir, "weights")
    result = exporter.export(a.config, batch=a.batch, seq_len=a.seq_len, dtype=a.dtype, seed=a.seed, whole=True)
    exporter.write(result, mlir, wdir)
    # PyTorch starts from the exported weights (its own model object, copied before tpc-train runs).
    initial = {k: v.detach().clone() for k, v in result.model.state_dict().items()}
    cmd = [a.tpc_train, mlir, "--data", a.data, "--batch", str(a.batch), "--steps", str(a.steps), "--lr", str(a.lr),
           "--min-lr", str(a.min_lr), "--warmup", str(a.warmup), "--beta1", str(a.beta1), "--beta2", str(a.beta2),
           "--eps", str(a.eps), "--weight-decay", str(a.weight_decay), "--clip", str(a.clip), "--mesh", a.mesh,
           "--numerics", a.numerics, "--weights", os.path.join(wdir, "weights.safetensors"), "--inputs",
           os.path.join(wdir, "inputs.safetensors"), "--json", os.path.join(a.workdir, "tpc.jsonl")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        sys.exit(f"FAIL: tpc-train exited {p.returncode}")
    with open(os.path.join(a.workdir, "tpc.jsonl")) as f:
        tpc = [json.loads(line)["loss"] for line in f if line.strip()]
    model = result.model
    model.load_state_dict(initial)
    model.train()
    ref = torch_losses(model, a, a.dtype)
    bound = [a.tolerance] * len(ref)
    if a.dtype == "bf16":
        # PyTorch's own bf16 spread: the same training in f32 from the same weights.
        model.load_state_dict(initial)
        f32 = torch_losses(model.float(), a, "f32")
        bound = [max(a.bf16_factor * abs(r - f) / abs(f), 1e-3) for r, f in zip(ref, f32)]
    worst, ok = 0.0, len(tpc) == len(ref)
    for t, (x, r, b) in enumerate(zip(tpc, ref, bound), start=1):
        rel = abs(x - r) / abs(r)
        worst = max(worst, rel)
        good = rel <= b
        ok &= good
        print(f"step {t:4d}  tpc {x:.7f}  torch {r:.7f}  relative {rel:.2e}{'' if good else '  BAD (bound %.1e)' % b}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tpc": tpc, "torch": ref, "bound": bound, "dtype": a.dtype, "mesh": a.mesh}, f)
    print(f"{len(tpc)} steps, largest relative difference {worst:.2e}; first loss {ref[0]:.4f}, last {ref[-1]:.4f}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
