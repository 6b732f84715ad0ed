"""Sharding plans: which linears are column- or row-parallel, whether the norms run sequence
parallel, how experts are spread.

  --plan megatron   q/k/v and gate/up column-parallel, o_proj and down_proj row-parallel, experts
                    tensor-parallel inside (gate_up column, down row), the router replicated
  --plan none       nothing parallel: every rank computes everything
  --plan hf         the model config's own base_model_tp_plan
  --plan FILE.json  {"layers.*.self_attn.q_proj": "colwise", ...}: module paths (a '*' stands for
                    one path component, the layer index) mapped to Hugging Face / DTensor styles:
                    colwise, packed_colwise, rowwise, replicate on linears; sequence_parallel on
                    norms; expert, moe_tp_experts on an experts module; colwise, rowwise, expert on
                    its gate_up_proj / down_proj. Targets no entry names are replicated.
"""
import json
import os
import re

from . import recognize
from .errors import ExportError

PARALLEL = {"colwise": "column", "packed_colwise": "column", "rowwise": "row", "replicate": "none",
            "expert": "expert"}


class Plan:
    """The resolved plan: parallel[target path] in {'column', 'row', 'none', 'expert'} and the
    sequence-parallel flag (every column/row-parallel linear gets sequence_parallel = true)."""

    def __init__(self, name, parallel, sequence_parallel):
        self.name, self.parallel, self.sequence_parallel = name, parallel, sequence_parallel

    def of(self, path):
        return self.parallel.get(path, "none")


def _entries(spec, model):
    """The plan's (pattern, style) entries, in order."""
    if spec == "hf":
        plan = getattr(model.config, "base_model_tp_plan", None) or {}
        if not plan:
            raise ExportError(f"--plan hf: {type(model.config).__name__} has no base_model_tp_plan")
        return list(plan.items()), "hf"
    if not os.path.isfile(spec):
        raise ExportError(f"--plan '{spec}' is neither megatron, none, hf nor a JSON file")
    try:
        with open(spec, encoding="utf-8") as f:
            plan = json.load(f)
    except ValueError as e:
        raise ExportError(f"{spec}: not valid JSON ({e})") from None
    if not isinstance(plan, dict) or not all(isinstance(v, str) for v in plan.values()):
        raise ExportError(f'{spec}: a plan is a JSON object of module path patterns to styles '
                          '({"layers.*.self_attn.q_proj": "colwise", ...})')
    return list(plan.items()), spec


def _regex(pattern):
    pattern = pattern[len("model."):] if pattern.startswith("model.") else pattern
    return re.compile(re.escape(pattern).replace(r"\*", r"[^.]+"))


def _shown(paths):
    """Target paths with layer indices folded: layers.N.self_attn.q_proj, ..."""
    seen = []
    for p in paths:
        q = re.sub(r"\.\d+\.", ".N.", p)
        if q not in seen:
            seen.append(q)
    return ", ".join(seen)


def resolve(spec, model, root):
    """The Plan of --plan spec for the decoder stack root (module paths as in root)."""
    targets = recognize.targets(root)
    style = {}
    if spec in ("megatron", "none"):
        name = spec
        for path, role, _, _ in targets:
            style[path] = recognize.MEGATRON[role] if spec == "megatron" else "replicate"
    else:
        entries, name = _entries(spec, model)
        for pattern, s in entries:
            rx = _regex(pattern)
            hits = [t for t in targets if rx.fullmatch(t[0])]
            if not hits:
                raise ExportError(f"plan {name}: '{pattern}' matches no module of the model "
                                  f"(plan targets: {_shown(t[0] for t in targets)})")
            for path, role, _, _ in hits:
                allowed = recognize.STYLES.get(role, recognize.LINEAR_STYLES)
                if s not in allowed:
                    raise ExportError(f"plan {name}: '{pattern}' gives {path} the style '{s}'; "
                                      f"a {role} target takes {', '.join(allowed)}")
                style.setdefault(path, s)
    parallel, sp_norms, norms = {}, [], []
    for path, role, unit, _ in targets:
        s = style.get(path, "replicate")
        if role == "norm":
            norms.append(path)
            if s == "sequence_parallel":
                sp_norms.append(path)
        elif role == "experts":
            if s == "expert":  # whole experts spread over ep, unless an entry names the weights
                for sub in ("gate_up_proj", "down_proj"):
                    style.setdefault(f"{path}.{sub}", "expert")
                    parallel[f"{path}.{sub}"] = PARALLEL[style[f"{path}.{sub}"]]
        elif path not in parallel:
            parallel[path] = PARALLEL[s]
    if sp_norms and len(sp_norms) != len(norms):
        missing = next(p for p in norms if p not in sp_norms)
        raise ExportError(f"plan {name}: sequence parallelism must cover every norm; {missing} is not "
                          "sequence_parallel (the residual stream between the layers is either "
                          "sharded along the tokens or not)")
    _check_pairs(name, targets, parallel)
    return Plan(name, parallel, bool(sp_norms))


def _check_pairs(name, targets, parallel):
    """gate and up become one linear, so they need one style."""
    for path, role, unit, _ in targets:
        if role == "gate":
            up = f"{unit}.up_proj"
            if parallel[path] != parallel[up]:
                raise ExportError(f"plan {name}: {path} is {_said(parallel[path])} but {up} is "
                                  f"{_said(parallel[up])}; they are fused into one linear "
                                  "([gate; up]) and need the same style")


def _said(parallel):
    return "replicated" if parallel == "none" else f"{parallel}-parallel"


def check_degree(plan, root, tp, tokens):
    """Raises ExportError when TP degree tp cannot run plan: a sharded dimension (heads, key/value
    heads, FFN width, experts, tokens under sequence parallelism) that tp does not divide."""
    if tp < 1:
        raise ExportError(f"--tp {tp}: a TP degree is at least 1")
    if plan.sequence_parallel and tokens % tp:
        raise ExportError(f"--tp {tp} does not divide the {tokens} tokens (B*S) that sequence "
                          "parallelism shards")
    for path, kind, module in recognize.units(root):
        if kind == "attention":
            cfg = module.config
            heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
            if plan.of(f"{path}.q_proj") == "column" and heads % tp:
                raise ExportError(f"--tp {tp} does not divide the {heads} query heads of {path} "
                                  "(q_proj is column-parallel: every rank holds whole heads)")
            if "column" in (plan.of(f"{path}.k_proj"), plan.of(f"{path}.v_proj")) and kv % tp:
                raise ExportError(f"--tp {tp} does not divide the {kv} key/value heads of {path} "
                                  "(k_proj and v_proj are column-parallel: every rank holds whole heads)")
            if plan.of(f"{path}.o_proj") == "row" and heads % tp:
                raise ExportError(f"--tp {tp} does not divide the {heads} heads that {path}.o_proj "
                                  "(row-parallel) reads")
        elif kind == "mlp":
            ffn = module.down_proj.in_features
            sharded = {plan.of(f"{path}.gate_proj"), plan.of(f"{path}.down_proj")} != {"none"}
            if sharded and ffn % tp:
                raise ExportError(f"--tp {tp} does not divide the FFN width {ffn} of {path}")
        elif kind == "moe":
            experts = module.experts
            e, ffn = experts.down_proj.shape[0], experts.down_proj.shape[2]
            for sub in ("gate_up_proj", "down_proj"):
                p = plan.of(f"{path}.experts.{sub}")
                if p in ("column", "row") and ffn % tp:
                    raise ExportError(f"--tp {tp} does not divide the expert FFN width {ffn} of {path}")
                if p == "expert" and e % tp:
                    raise ExportError(f"{tp} ranks do not divide the {e} experts of {path}")
