"""torch.compile(model, backend="tpc") on tiny Qwen2 (q, k and v biases) and Mistral models (2 layers,
hidden 128, 4/2 heads, f32): one forward with labels and backward, against the uncompiled copy.
Prints each model's first report line, its two losses and the largest gradient difference, then
PASS, or FAIL when a loss differs by more than 1e-5 relative or a gradient by more than 1e-4 of
its largest element."""
import copy

import torch
from transformers import MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

import tpc_torch.dynamo

ok = True
for name, config, causal_lm in (("qwen2", Qwen2Config, Qwen2ForCausalLM), ("mistral", MistralConfig, MistralForCausalLM)):
    torch.manual_seed(0)
    cfg = config(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=128, max_position_embeddings=256, rms_norm_eps=1e-6,
                 use_cache=False, attn_implementation="sdpa")
    model = causal_lm(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.05 if p.dim() > 1 else 1 + 0.1 * torch.randn_like(p))
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="tpc", dynamic=False, options={"rest": "eager", "log": False})
    ids = torch.randint(0, 128, (2, 8))
    loss = compiled(input_ids=ids, labels=ids).loss
    loss_ref = reference(input_ids=ids, labels=ids).loss
    loss.backward()
    loss_ref.backward()
    worst = max(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item()
                for p, q in zip(model.parameters(), reference.parameters()))
    print(f"{name}: {tpc_torch.dynamo.last_report[0]}")
    print(f"{name}: loss {loss.item():.7f} torch {loss_ref.item():.7f}; largest gradient difference {worst:.2e}")
    ok = ok and abs(loss.item() - loss_ref.item()) <= 1e-5 * abs(loss_ref.item()) and worst <= 1e-4
print("PASS" if ok else "FAIL")
