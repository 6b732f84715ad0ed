"""The Hugging Face modules the frontend knows, by class, and the plan targets inside them.

A unit is a module that becomes a fixed sequence of tp ops: an RMSNorm, an attention module, a
gated MLP, a sparse MoE block or a plain nn.Linear. Classes are listed by name: another model's
RMSNorm may compute something else (Gemma's scales by 1 + weight), so a class that is not listed
is not a unit and its ATen ops are refused one by one."""
import torch

RMSNORM = {"LlamaRMSNorm", "MistralRMSNorm", "MixtralRMSNorm", "Qwen2RMSNorm"}
ATTENTION = {"LlamaAttention", "MistralAttention", "MixtralAttention", "Qwen2Attention"}
MLP = {"LlamaMLP", "MistralMLP", "Qwen2MLP"}
MOE = {"MixtralSparseMoeBlock"}

# Roles of the plan targets inside each kind of unit, and the role's Megatron-LM style.
MEGATRON = {"q": "colwise", "k": "colwise", "v": "colwise", "o": "rowwise",
            "gate": "colwise", "up": "colwise", "down": "rowwise",
            "router": "replicate", "experts": "moe_tp_experts",
            "experts.gate_up": "colwise", "experts.down": "rowwise",
            "linear": "replicate", "norm": "replicate"}
LINEAR_STYLES = ("colwise", "packed_colwise", "rowwise", "replicate")
STYLES = {"norm": ("sequence_parallel", "replicate"),
          "router": ("replicate",),
          "experts": ("expert", "moe_tp_experts", "replicate"),
          "experts.gate_up": ("colwise", "packed_colwise", "rowwise", "expert", "replicate"),
          "experts.down": ("colwise", "packed_colwise", "rowwise", "expert", "replicate")}


def kind_of(module):
    """'norm', 'attention', 'mlp', 'moe', 'linear' or None."""
    name = type(module).__name__
    if name in RMSNORM:
        return "norm"
    if name in ATTENTION:
        return "attention"
    if name in MLP:
        return "mlp"
    if name in MOE:
        return "moe"
    if type(module) is torch.nn.Linear:
        return "linear"
    return None


def units(root):
    """[(path, kind, module)] of the units under root, outermost first (a unit's children are
    part of it)."""
    found, inside = [], []
    for path, module in root.named_modules():
        if any(path.startswith(p + ".") for p in inside):
            continue
        kind = kind_of(module)
        if kind:
            found.append((path, kind, module))
            inside.append(path)
    return found


def targets(root):
    """[(path, role, unit path, module)]: everything a plan may name."""
    out = []
    for path, kind, module in units(root):
        if kind == "norm":
            out.append((path, "norm", path, module))
        elif kind == "linear":
            out.append((path, "linear", path, module))
        elif kind == "attention":
            for role in "qkvo":
                out.append((f"{path}.{role}_proj", role, path, module))
        elif kind == "mlp":
            for role in ("gate", "up", "down"):
                out.append((f"{path}.{role}_proj", role, path, module))
        elif kind == "moe":
            out.append((f"{path}.gate", "router", path, module))
            out.append((f"{path}.experts", "experts", path, module))
            out.append((f"{path}.experts.gate_up_proj", "experts.gate_up", path, module))
            out.append((f"{path}.experts.down_proj", "experts.down", path, module))
    return out
