"""Weights by tp.name: the parameters (and their gradients) each argument of the exported
function is made of, written to safetensors files; and --weight-names rules that let tpc-run read
them from the Hugging Face checkpoint itself."""
import re

import torch
from safetensors.torch import save_file


def gather(root, tensors, grads=False):
    """{tp.name: tensor} of the exported arguments (gradients, named '<tp.name>_grad', with
    grads=True); an argument of several parameters is their concatenation along dim 0."""
    out = {}
    for name, params in tensors.items():
        parts = [root.get_parameter(p) for p in params]
        if grads:
            parts = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parts]
        out[name + ("_grad" if grads else "")] = torch.cat([p.detach() for p in parts], 0).contiguous()
    return out


def save(path, tensors):
    save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata={"format": "pt"})


def rules(tensors, checkpoint_names, prefix="model."):
    """tpc-run --weight-names rules from each argument to the checkpoint's tensors, one rule per
    kind of argument with the layer index as {i}; None when some tensor is not in the checkpoint
    under prefix + its parameter name."""
    lines = []
    for name, params in tensors.items():
        if any(prefix + p not in checkpoint_names for p in params):
            return None
        rule = f"{name} = " + " + ".join(prefix + p for p in params)
        rule = re.sub(r"(^|[ .])layers\.\d+\.", r"\1layers.{i}.", rule)
        if rule not in lines:
            lines.append(rule)
    return lines
