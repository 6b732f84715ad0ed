"""torch.compile(model, backend="tpc") on a 3-layer tiny Llama (hidden 256, 4/2 heads, FFN 512,
vocabulary 256): a training loop of 3 steps (forward with labels, loss.backward(), AdamW) against
the same loop on an uncompiled copy (same weights, same batches). Prints each step's two losses
(the compiled one also as its f32 bits) and the largest gradient difference, then PASS, or FAIL
when a loss differs by more than 1e-5 relative or, at the first step, a gradient by more than
1e-4 of its largest element.
Usage: compile_llama.py [--mesh tp=2] [--numerics invariant] [--rest eager] [--unsupported]
  --unsupported: layer 1's MLP is a GELU MLP class tpc does not know (that layer falls back)."""
import argparse
import copy
import struct

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

import tpc_torch.dynamo  # noqa: F401  registers backend="tpc"

ap = argparse.ArgumentParser()
ap.add_argument("--mesh", default="tp=1")
ap.add_argument("--numerics")
ap.add_argument("--rest", default="inductor")
ap.add_argument("--unsupported", action="store_true")
a = ap.parse_args()


class GeluMLP(torch.nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(h, f, bias=False), torch.nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, max_position_embeddings=1024, rms_norm_eps=1e-5,
                  use_cache=False, attn_implementation="sdpa")
model = LlamaForCausalLM(cfg)
if a.unsupported:
    model.model.layers[1].mlp = GeluMLP(256, 512)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randn_like(p) * 0.05 if p.dim() > 1 else 1 + 0.1 * torch.randn_like(p))
reference = copy.deepcopy(model)
options = {"mesh": a.mesh, "rest": a.rest}
if a.numerics:
    options["numerics"] = a.numerics
compiled = torch.compile(model, backend="tpc", dynamic=False, options=options)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
opt_ref = torch.optim.AdamW(reference.parameters(), lr=1e-3)
ok = True
for step in range(3):
    ids = torch.randint(0, 256, (2, 16))
    loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    loss_ref = reference(input_ids=ids, labels=ids).loss
    loss_ref.backward()
    bits = struct.unpack("<I", struct.pack("<f", loss.item()))[0]
    print(f"step {step}: loss {loss.item():.7f} bits {bits:08x} torch {loss_ref.item():.7f}")
    if abs(loss.item() - loss_ref.item()) > 1e-5 * abs(loss_ref.item()):
        ok = False
    worst = max(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item()
                for p, q in zip(model.parameters(), reference.parameters()))
    print(f"step {step}: largest gradient difference {worst:.2e} of the largest element")
    if step == 0 and worst > 1e-4:  # later steps start from weights AdamW moved apart (its update
        ok = False                  # is the gradient's sign where a gradient is tiny)
    opt.step()
    opt_ref.step()
    opt.zero_grad()
    opt_ref.zero_grad()
print("PASS" if ok else "FAIL")
