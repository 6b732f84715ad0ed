"""Deliberately wrong Hugging Face layers that look like the real ones to a module-level
recognizer (the same classes and parameters): each must be refused, not exported. Prints one line
per mutant, 'mutant NAME: <the error>' or 'mutant NAME: NOT REFUSED', and exits with 1 when one
was not refused. Patches transformers' Llama code in this process only."""
import sys

import torch
import transformers.models.llama.modeling_llama as llama

from tpc_torch import export
from tpc_torch.errors import ExportError

rope = llama.apply_rotary_pos_emb
mlp_forward = llama.LlamaMLP.forward
norm_forward = llama.LlamaRMSNorm.forward
attention_init = llama.LlamaAttention.__init__


def not_causal(self, *args, **kwargs):
    attention_init(self, *args, **kwargs)
    self.is_causal = False


def rope_swapped(q, k, cos, sin, unsqueeze_dim=1):
    return rope(q, k, sin, cos, unsqueeze_dim)


def rope_q_only(q, k, cos, sin, unsqueeze_dim=1):
    return rope(q, k, cos, sin, unsqueeze_dim)[0], k


def act_on_up(self, x):
    return self.down_proj(self.gate_proj(x) * self.act_fn(self.up_proj(x)))


def norm_one_plus(self, x):  # Gemma's RMSNorm scales by 1 + weight
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
    return (1 + self.weight) * h.to(x.dtype)


def norm_no_eps(self, x):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True))
    return self.weight * h.to(x.dtype)


MUTANTS = {
    "rope-cos-sin-swapped": lambda: setattr(llama, "apply_rotary_pos_emb", rope_swapped),
    "rope-q-only": lambda: setattr(llama, "apply_rotary_pos_emb", rope_q_only),
    "silu-on-up": lambda: setattr(llama.LlamaMLP, "forward", act_on_up),
    "norm-one-plus-weight": lambda: setattr(llama.LlamaRMSNorm, "forward", norm_one_plus),
    "norm-without-eps": lambda: setattr(llama.LlamaRMSNorm, "forward", norm_no_eps),
    "not-causal": lambda: setattr(llama.LlamaAttention, "__init__", not_causal),
}


def restore():
    llama.apply_rotary_pos_emb = rope
    llama.LlamaMLP.forward = mlp_forward
    llama.LlamaRMSNorm.forward = norm_forward
    llama.LlamaAttention.__init__ = attention_init


def main():
    missed = 0
    export.export("llama-tiny")  # the real layers export
    for name, patch in MUTANTS.items():
        patch()
        try:
            export.export("llama-tiny")
            print(f"mutant {name}: NOT REFUSED")
            missed += 1
        except ExportError as e:
            print(f"mutant {name}: {e}")
        restore()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
