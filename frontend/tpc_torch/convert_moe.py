"""A sparse MoE block (Mixtral's) to tp ops, docs/examples/moe.mlir's sequence:

  logits        = tp.linear(x, router)                    replicated
  idx, weights  = tp.moe_route(logits) {top_k, normalize}
  rows, sizes, map = tp.moe_permute(x, idx)
  h             = tp.grouped_linear(rows, gate_up_proj, sizes)   [gate; up] per expert
  a             = tp.glu(h) {kind = "swiglu"}
  h             = tp.grouped_linear(a, down_proj, sizes)
  y             = tp.moe_unpermute(h, map, weights)"""
from . import emit
from .errors import ExportError
from .opsets import MOE_OPS, aten

ROUTERS = {"MixtralTopKRouter"}
EXPERTS = {"MixtralExperts"}


def moe(conv, unit, module, nodes):
    conv._check_ops(nodes, MOE_OPS)
    ins, outs = conv._io(nodes)
    router, experts = getattr(module, "gate", None), getattr(module, "experts", None)
    if type(router).__name__ not in ROUTERS or type(experts).__name__ not in EXPERTS or len(ins) != 1:
        conv.mismatch(unit, nodes, "a router (gate) and stacked experts (experts)")
    if getattr(experts, "has_bias", False) or getattr(module.gate, "bias", None) is not None:
        raise ExportError(f"{unit}: experts or a router with biases are not supported")
    if getattr(module.experts.config, "hidden_act", "silu") != "silu":
        raise ExportError(f"{unit}: experts with hidden_act={module.experts.config.hidden_act} are not "
                          "supported; only silu (SwiGLU)")
    inner = [n for n in nodes if list(n.meta["nn_module_stack"].values())[-1][0].startswith(f"{unit}.gate")]
    if not any(n.target in (aten.softmax.int, aten._softmax.default) for n in inner) or \
            not any(n.target == aten.topk.default for n in inner):
        conv.mismatch(unit, inner or nodes, "a router of softmax then top-k")
    normalize = any(n.target in (aten.div.Tensor, aten.div_.Tensor) for n in inner)
    outs_shape = tuple(outs[0].meta["val"].shape) if len(outs) == 1 else ()
    x = conv.value(ins[0], nodes[0])
    t, h = x.shape
    e, top_k = router.weight.shape[0], int(router.top_k)
    f = experts.down_proj.shape[2]
    fn = conv.fn
    w_router = conv.weight([f"{unit}.gate.weight"], f"{unit}.gate.weight")
    logits = fn.op("tp.linear", [x, w_router], {}, [((t, e), x.dtype)], hints=["logits"])[0]
    idx, weights = fn.op("tp.moe_route", [logits], {"top_k": emit.integer(top_k), "normalize": emit.boolean(normalize)},
                         [((t, top_k), "i32"), ((t, top_k), "f32")], hints=["experts", "routing"])
    if conv.probe_routing:
        conv.probes.append((idx, f"{unit}.experts"))
    rows, sizes, row_map = fn.op("tp.moe_permute", [x, idx], {},
                                 [((t * top_k, h), x.dtype), ((e,), "i64"), ((t * top_k,), "i32")],
                                 hints=["rows", "sizes", "row_map"])

    def grouped(inp, param, n, hint):
        w = conv.weight([f"{unit}.experts.{param}"], f"{unit}.experts.{param}")
        parallel = conv.plan.of(f"{unit}.experts.{param}")
        attrs = {}
        if parallel != "none":
            attrs["parallel"] = emit.string(parallel)
            if conv.plan.sequence_parallel and parallel in ("column", "row"):
                attrs["sequence_parallel"] = "true"
        return fn.op("tp.grouped_linear", [inp, w, sizes], attrs, [((t * top_k, n), x.dtype)], hints=[hint])[0]

    up = grouped(rows, "gate_up_proj", 2 * f, "gate_up")
    act = fn.op("tp.glu", [up], {"kind": emit.string("swiglu")}, [((t * top_k, f), x.dtype)], hints=["act"])[0]
    down = grouped(act, "down_proj", h, "down")
    y = fn.op("tp.moe_unpermute", [down, row_map, weights], {}, [((t, h), x.dtype)], hints=["moe"])[0]
    if len(outs) != 1 or outs_shape[-1] != h:
        conv.mismatch(unit, nodes, f"one [tokens, hidden] output (it has {len(outs)} used outside it)")
    conv.env[outs[0]] = y
