"""The ATen graph of torch.export to tp ops.

The graph is walked in order. Nodes are grouped by the outermost recognized module of their
node.meta["nn_module_stack"] (recognize.py): each group becomes that unit's tp ops, after a check
that every ATen op in it is one the unit's Hugging Face code is known to produce and that the data
flows as that code says (rope on q and k, not v; the activation on gate, not up; ...). Nodes outside
units (the decoder layers' residual adds, the views between [B*S, H] and [B, S, H]) are converted
one by one. Any other op is an ExportError naming the op, the module path and the source line.

Every tensor is token-major in tp: a torch value of shape [B, S, W] or [B*S, W] is one tp value
[B*S, W]."""
import math

import torch

from . import emit, recognize
from .convert_attention import attention
from .convert_moe import moe
from .errors import ExportError, source_line
from .opsets import ACTIVATIONS, ALIAS, MLP_OPS, NORM_OPS, SKIP, aten


def _short(target):
    return str(target).replace("aten::", "aten.")


class Converter:
    """Converts one exported DecoderStack; run() returns the Function, and `tensors` lists each
    weight argument's tp.name with the parameter names it is made of (concatenated along dim 0)."""

    def __init__(self, exported, root, plan, batch, seq_len, name, kv_cache=None):
        self.ep, self.root, self.plan = exported, root, plan
        # Decoding: each attention reads a KV cache of kv_cache rows per sequence (tp.attention_kvcache)
        # and the function also returns the new tokens' keys and values.
        self.kv_cache, self.cache_len, self.kv_results = kv_cache, None, []
        # Results after y and the KV caches' (convert_moe's routing probes).
        self.probe_routing, self.probes = False, []
        self.batch, self.seq_len, self.tokens = batch, seq_len, batch * seq_len
        self.fn = emit.Function(name)
        self.env = {}
        self.tensors = {}  # tp.name -> [parameter names]
        self._args = {}
        sig = exported.graph_signature
        self.param_of = dict(sig.inputs_to_parameters)
        self.buffer_of = dict(sig.inputs_to_buffers)
        self.user_inputs = list(sig.user_inputs)
        self.units = {path: (kind, module) for path, kind, module in recognize.units(root)}
        self.modules = dict(root.named_modules())

    # ---- errors and lookups ------------------------------------------------------------------
    def _where(self, node):
        stack = node.meta.get("nn_module_stack") or {}
        path, cls = list(stack.values())[-1] if stack else ("", "")
        cls = type(self.modules[path]).__name__ if path in self.modules else str(cls).split(".")[-1]
        where = f"{path} ({cls})" if path else f"the decoder stack ({cls})"
        src = source_line(node)
        return where + (f" at {src}" if src else "")

    def unsupported(self, node, why=""):
        raise ExportError(f"unsupported op {_short(node.target)} in {self._where(node)}" +
                          (f": {why}" if why else ""))

    def mismatch(self, unit, nodes, what):
        """A known module whose ATen graph does not compute what its class is known for."""
        node = next((n for n in nodes if n.target not in SKIP), nodes[0])
        cls = type(self.modules[unit]).__name__ if unit in self.modules else "?"
        src = source_line(node)
        raise ExportError(f"{unit} ({cls}) does not compute {what}" + (f" (at {src})" if src else ""))

    def _unit(self, node):
        for path, _ in (node.meta.get("nn_module_stack") or {}).values():
            if path in self.units:
                return path
        return None

    def value(self, node, user):
        if node not in self.env:
            self.unsupported(user, f"its operand {node.name} has no tp value")
        return self.env[node]

    def weight(self, names, tp_name):
        """The argument holding parameters `names` (concatenated along dim 0), made once."""
        if tp_name not in self._args:
            params = [self.root.get_parameter(n) for n in names]
            shape = list(params[0].shape)
            shape[0] = sum(p.shape[0] for p in params)
            self._args[tp_name] = self.fn.arg(tp_name, shape, emit.ELEMENT[params[0].dtype], hint=emit.arg_hint(tp_name))
            self.tensors[tp_name] = list(names)
        return self._args[tp_name]

    def _param(self, node):
        return self.param_of.get(node.name) if node is not None and node.op == "placeholder" else None

    # ---- the walk ----------------------------------------------------------------------------
    def run(self):
        nodes = list(self.ep.graph.nodes)
        done, i = set(), 0
        while i < len(nodes):
            node = nodes[i]
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "output":
                self._output(node)
            elif node.op != "call_function":
                self.unsupported(node)
            else:
                unit = self._unit(node)
                if unit is None:
                    self._plain(node)
                else:
                    if unit in done:
                        self.unsupported(node, f"the ops of {unit} are not contiguous in the graph")
                    j = i
                    while j < len(nodes) and nodes[j].op == "call_function" and self._unit(nodes[j]) == unit:
                        j += 1
                    self._convert_unit(unit, nodes[i:j])
                    done.add(unit)
                    i = j
                    continue
            i += 1
        return self.fn

    def _placeholder(self, node):
        if node.name in self.buffer_of:
            for user in node.users:
                self.unsupported(user, f"it reads the buffer {self.buffer_of[node.name]}")
            return
        if node.name in self.param_of:
            return
        index = self.user_inputs.index(node.name)
        name = ("x", "cos", "sin")[index]
        val = node.meta["val"]
        self.env[node] = self.fn.arg(name, val.shape, emit.ELEMENT[val.dtype], grad=(name == "x"))
        setattr(self, name, self.env[node])

    def _output(self, node):
        outs = node.args[0]
        if len(outs) != 1:
            raise ExportError(f"the decoder stack returns {len(outs)} tensors; one was expected")
        self.fn.ret(self.value(outs[0], node), "y")
        for value, tp_name in self.kv_results + self.probes:
            self.fn.ret(value, tp_name)

    def _alias(self, node, user):
        """A view of a token-major value that keeps it token-major ([B, S, W] <-> [B*S, W])."""
        v = self.value(node.args[0], user)
        shape = tuple(node.meta["val"].shape)
        if shape[-1] != v.shape[-1] or math.prod(shape[:-1]) != self.tokens:
            self.unsupported(user, f"a view from {list(v.shape)} to {list(shape)} changes the feature layout")
        self.env[node] = v

    def _plain(self, node):
        t = node.target
        if t in SKIP:
            return
        if t in ALIAS or (t == aten.dropout.default and len(node.args) > 2 and not node.args[2]):
            return self._alias(node, node)
        if t == aten.to.dtype and node.args[1] == node.args[0].meta["val"].dtype:
            return self._alias(node, node)
        if t == aten.add.Tensor and len(node.args) == 2 and all(isinstance(a, torch.fx.Node) for a in node.args):
            a, b = (self.value(x, node) for x in node.args)
            if a.shape != b.shape or a.dtype != b.dtype:
                self.unsupported(node, f"the operands are {a.type} and {b.type}")
            self.env[node] = self.fn.op("tp.add", [a, b], {}, [(a.shape, a.dtype)], hints=["h"])[0]
            return
        self.unsupported(node)

    # ---- units -------------------------------------------------------------------------------
    def _io(self, nodes):
        """The group's external tensor inputs (in order of use) and its outputs (used outside)."""
        inside = set(nodes)
        ins, passed = [], set()
        for n in nodes:
            for a in n.all_input_nodes:
                if a not in inside and not self._param(a) and a not in ins:
                    ins.append(a)
            # A view or same-dtype cast of an input is that input, wherever it is used (torch
            # may hand a no-op cast inside a norm to the residual add after it).
            if n.args and isinstance(n.args[0], torch.fx.Node) and n.args[0] in self.env and self._noop(n):
                self.env[n] = self.env[n.args[0]]
                passed.add(n)
        outs = [n for n in nodes if n not in passed and any(u not in inside for u in n.users)]
        return ins, outs

    def _noop(self, n):
        val, src = n.meta.get("val"), n.args[0].meta.get("val")
        if val is None or src is None or val.dtype != src.dtype:
            return False
        if n.target in (aten.to.dtype, aten._to_copy.default):
            return tuple(val.shape) == tuple(src.shape)
        return n.target in ALIAS and val.shape[-1] == src.shape[-1] and math.prod(val.shape[:-1]) == self.tokens

    def _check_ops(self, nodes, allowed):
        for n in nodes:
            if n.target not in allowed and n.target not in SKIP:
                self.unsupported(n)

    def _bind_output(self, unit, nodes, outs, value, producer):
        """The group's one output is `producer` or a view of it; it becomes `value`."""
        if len(outs) != 1:
            raise ExportError(f"{unit} has {len(outs)} outputs used outside it; one was expected")
        n = outs[0]
        while n is not producer:
            if n.target not in ALIAS or n.args[0] not in nodes:
                self.unsupported(n, f"the output of {unit} is not its {producer.name}")
            n = n.args[0]
        self.env[outs[0]] = value

    def _convert_unit(self, unit, nodes):
        kind, module = self.units[unit]
        self.fn.comment(f"{unit} ({type(module).__name__})")
        getattr(self, "_" + kind)(unit, module, nodes)

    def _linear_node(self, node, tp_name_base, parallel, x=None):
        """tp.linear of an aten.linear node: x[T, K] · w[N, K]ᵀ (+ bias); x overrides its input."""
        if x is None:
            x = self.value(node.args[0], node)
        w_name = self._param(node.args[1])
        if not w_name:
            self.unsupported(node, "its weight is not a parameter")
        operands = [x, self.weight([w_name], f"{tp_name_base}.weight")]
        if len(node.args) > 2 and node.args[2] is not None:
            operands.append(self.weight([self._param(node.args[2])], f"{tp_name_base}.bias"))
        return self._emit_linear(operands, parallel, operands[1].shape[0], x.dtype, tp_name_base)

    def _emit_linear(self, operands, parallel, n, dtype, hint):
        attrs = {}
        if parallel != "none":
            attrs["parallel"] = emit.string(parallel)
            if self.plan.sequence_parallel:
                attrs["sequence_parallel"] = "true"
        rows = operands[0].shape[0]
        return self.fn.op("tp.linear", operands, attrs, [((rows, n), dtype)],
                          hints=[hint.split(".")[-1].replace("_proj", "")])[0]

    def _linear(self, unit, module, nodes):
        self._check_ops(nodes, {aten.linear.default})
        if len(nodes) != 1:
            self.unsupported(nodes[1], f"{unit} is called more than once")
        self.env[nodes[0]] = self._linear_node(nodes[0], unit, self.plan.of(unit))

    def _norm(self, unit, module, nodes):
        """weight * (x * rsqrt(mean(x², -1) + eps)), the casts around it aside -> tp.rmsnorm."""
        self._check_ops(nodes, NORM_OPS)
        ins, outs = self._io(nodes)
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        count = {}
        for n in nodes:
            count[n.target] = count.get(n.target, 0) + 1
        adds = [n for n in nodes if n.target in (aten.add.Tensor, aten.add.Scalar)]
        pows = [n for n in nodes if n.target == aten.pow.Tensor_Scalar]
        means = [n for n in nodes if n.target == aten.mean.dim]
        last = outs[0] if len(outs) == 1 else None
        weight = [a for a in (last.args if last is not None and last.target == aten.mul.Tensor else ())
                  if self._param(a) == f"{unit}.weight"]
        if (len(ins) != 1 or not weight or len(weight[0].users) != 1 or count.get(aten.mul.Tensor) != 2
                or count.get(aten.rsqrt.default) != 1 or len(adds) != 1 or adds[0].args[1] != eps
                or len(pows) != 1 or pows[0].args[1] != 2 or len(means) != 1 or list(means[0].args[1]) != [-1]):
            self.mismatch(unit, nodes, "weight * (x * rsqrt(mean(x², -1) + eps))")
        x = self.value(ins[0], nodes[0])
        gamma = self.weight([f"{unit}.weight"], f"{unit}.weight")
        y = self.fn.op("tp.rmsnorm", [x, gamma], {"eps": emit.f32(eps)}, [(x.shape, x.dtype)], hints=["h"])[0]
        self.env[outs[0]] = y

    def _mlp(self, unit, module, nodes):
        """down(act(gate(x)) * up(x)) -> one column-parallel linear of [gate; up], tp.glu, down."""
        self._check_ops(nodes, MLP_OPS)
        ins, outs = self._io(nodes)
        by_path = {}
        for n in nodes:
            if n.target == aten.linear.default:
                path = list(n.meta["nn_module_stack"].values())[-1][0]
                by_path[path.rsplit(".", 1)[-1]] = n
        gate, up, down = (by_path.get(k) for k in ("gate_proj", "up_proj", "down_proj"))
        acts = [n for n in nodes if n.target in ACTIVATIONS]
        muls = [n for n in nodes if n.target == aten.mul.Tensor]
        if not (gate and up and down and len(acts) == 1 and len(muls) == 1 and len(ins) == 1):
            self.mismatch(unit, nodes, "down_proj(act(gate_proj(x)) * up_proj(x))")
        act, mul = acts[0], muls[0]
        kind = ACTIVATIONS[act.target]
        if kind == "geglu" and act.kwargs.get("approximate", "none") != "tanh":
            self.unsupported(act, "tp.glu's geglu is the tanh GELU; this is the exact (erf) GELU")
        if (act.args[0] is not gate or set(mul.args) != {act, up} or down.args[0] is not mul
                or gate.args[0] is not ins[0] or up.args[0] is not ins[0]):
            self.mismatch(unit, [mul], "down_proj(act(gate_proj(x)) * up_proj(x))")
        x = self.value(ins[0], gate)
        names = [self._param(gate.args[1]), self._param(up.args[1])]
        operands = [x, self.weight(names, f"{unit}.gate_up_proj.weight")]
        biases = [g.args[2] if len(g.args) > 2 else None for g in (gate, up)]
        if any(b is not None for b in biases):
            operands.append(self.weight([self._param(b) for b in biases], f"{unit}.gate_up_proj.bias"))
        h = self._emit_linear(operands, self.plan.of(f"{unit}.gate_proj"), operands[1].shape[0], x.dtype,
                              "gate_up")
        f = h.shape[1] // 2
        a = self.fn.op("tp.glu", [h], {"kind": emit.string(kind)}, [((h.shape[0], f), h.dtype)], hints=["act"])[0]
        self.env[mul] = a
        y = self._linear_node(down, f"{unit}.down_proj", self.plan.of(f"{unit}.down_proj"))
        self._bind_output(unit, nodes, outs, y, down)



Converter._attention = attention
Converter._moe = moe


def convert(exported, root, plan, batch, seq_len, name, kv_cache=None, probe_routing=False):
    """(Function, tensors) of an exported DecoderStack; kv_cache: the rows per sequence of each
    attention's KV cache when the function is a decoding step; probe_routing: each MoE layer's
    chosen experts (tp.moe_route's indices, [T, top_k] i32) are results too, named
    '<layer>.experts' (tpc_torch.check's routing report)."""
    c = Converter(exported, root, plan, batch, seq_len, name, kv_cache)
    c.probe_routing = probe_routing
    fn = c.run()
    return fn, c.tensors
