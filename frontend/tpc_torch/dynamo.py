"""torch.compile(model, backend="tpc"): decoder layers on tpc, everything else on Inductor
(docs/frontend.md, "torch.compile").

    import tpc_torch.dynamo                       # registers the backend (pip install does it too)
    compiled = torch.compile(model, backend="tpc", dynamic=False,
                             options={"mesh": "tp=2", "numerics": "invariant"})

Dynamo hands the backend each FX graph it captures. The backend finds the decoder layers in it (by
the modules each node came from, as the exporter recognises units), and a run of consecutive layers
that tpc knows becomes one tp module: exported from the layers' configuration (read from the graph:
shapes, heads, the norm's epsilon), compiled twice by tpc-compile (forward; training step for the
backward) and called through tpc_torch.runtime on the CPU backend, the mesh's ranks as threads. In
the graph the run is replaced by one call of the custom op tpc::layers, whose backward is the
training module, so autograd, optimizers and the rest of the program work as before. The rest of
the graph (embedding, rotary tables, final norm, LM head, loss, and any layer tpc does not know)
goes to Inductor (options={"rest": "eager"}: run as captured). Each decision is a line on stderr,
"tpc_torch.compile: <what> -> tpc|inductor[: why]" (options={"log": False}: none), and
tpc_torch.dynamo.last_report holds the lines of the latest graph.

Options: mesh (tpc-compile's --mesh, default tp=1), numerics (fast, invariant, exact; default the
module's), rest (inductor or eager), log (True)."""
import json
import operator
import os
import re
import sys
import tempfile

import torch

from . import recognize, runtime
from . import export as exporter
from .errors import ExportError

# Decoder layer classes whose whole computation the exporter reproduces: model_type by class.
DECODER = {"LlamaDecoderLayer": "llama", "MistralDecoderLayer": "mistral", "Qwen2DecoderLayer": "qwen2"}
# Modules a supported layer may contain (anything else inside it sends the layer to Inductor).
KNOWN = (recognize.RMSNORM | recognize.ATTENTION | recognize.MLP | set(DECODER)
         | {"Linear", "SiLUActivation", "SiLU"})
OPTIONS = {"mesh": "tp=1", "numerics": None, "rest": "inductor", "log": True}

last_report = []  # the decision lines of the latest graph
_regions = []     # tpc::layers' region argument indexes this


def _shown(path):
    """A module path as the user wrote it: without Dynamo's L['self']. / L['args'][0]. prefix."""
    return re.sub(r"^L\[[^\]]*\](\[\d+\])?\.?", "", path)


def _value(node):
    v = node.meta.get("example_value", node.meta.get("val"))
    return v if isinstance(v, torch.Tensor) else None


def _static(shape):
    return all(isinstance(d, int) for d in shape)


def _layer_of(node):
    """(path, class name) of the decoder layer a node was traced in, or None."""
    return next(((path, name) for path, name in _modules_of(node) if name.endswith("DecoderLayer")), None)


def _modules_of(node):
    """[(path, class name)] of the modules a node was traced in, outermost first."""
    out = []
    for path, entry in (node.meta.get("nn_module_stack") or {}).values():
        name = entry if isinstance(entry, str) else getattr(entry, "__name__", str(entry))
        out.append((path, name.rsplit(".", 1)[-1]))
    return out


def _ancestry_has(node, pred, seen=None):
    seen = set() if seen is None else seen
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if pred(n):
            return True
        stack.extend(a for a in n.all_input_nodes)
    return False


def _is_trig(node, which):
    return ((node.op == "call_method" and node.target == which) or
            (node.op == "call_function" and getattr(node.target, "__name__", "") == which))


class _Layer:
    """One decoder layer's nodes in the graph and what the exporter needs to rebuild it."""

    def __init__(self, path, cls):
        self.path, self.cls = path, cls
        self.nodes = []
        self.reason = None

    def analyse(self, gm):
        inside = set(self.nodes)
        external = []
        for n in self.nodes:
            for a in n.all_input_nodes:
                if a not in inside and a not in external:
                    external.append(a)
        outputs = [n for n in self.nodes if any(u not in inside for u in n.users)]
        if self.cls not in DECODER:
            return self._refuse(f"{self.cls} is not a decoder layer tpc knows ({', '.join(sorted(DECODER))})")
        for n in self.nodes:
            for path, name in _modules_of(n):
                if path.startswith(self.path + ".") and name not in KNOWN:
                    return self._refuse(f"{_shown(path)} is {name}, not a module tpc knows")
            if n.op == "get_attr":
                return self._refuse("its parameters are graph attributes (inlined nn modules expected)")
        if len(outputs) != 1:
            return self._refuse(f"{len(outputs)} of its values are used after it (one expected: the hidden states)")
        self.output = outputs[0]
        # Its parameters: placeholders traced inside the layer's modules.
        self.params = {}
        for a in external:
            if a.op != "placeholder":
                continue
            mods = _modules_of(a)
            m = re.search(r"_parameters_(weight|bias)_$", a.name)
            if not mods or not m or not mods[-1][0].startswith(self.path + "."):
                continue
            self.params[mods[-1][0][len(self.path) + 1:] + "." + m.group(1)] = a
        rest = [a for a in external if a not in self.params.values()]
        # The rotary tables: made outside every layer, from a cos (sin) call.
        tables = [a for a in rest if _layer_of(a) is None]
        cos = [a for a in tables if _ancestry_has(a, lambda n: _is_trig(n, "cos"))]
        sin = [a for a in tables if _ancestry_has(a, lambda n: _is_trig(n, "sin"))]
        if len(cos) != 1 or len(sin) != 1 or cos[0] is sin[0]:
            return self._refuse("its rotary tables (cos, sin) were not found among its inputs")
        self.cos, self.sin = cos[0], sin[0]
        rest = [a for a in rest if a is not self.cos and a is not self.sin]
        hidden = [a for a in rest if _value(a) is not None and _value(a).dim() == 3 and _value(a).is_floating_point()]
        if len(hidden) != 1:
            return self._refuse("its hidden-state input was not found (one [batch, sequence, hidden] tensor expected)")
        self.hidden = hidden[0]
        for a in rest:
            if a is self.hidden:
                continue
            if _ancestry_has(a, lambda n: n.op == "placeholder" and "attention_mask" in n.name):
                return self._refuse("the model was given an attention mask: tpc's attention is causal, without padding")
            if _ancestry_has(a, lambda n: n.op == "placeholder" and ("past_key" in n.name or "cache" in n.name)):
                return self._refuse("it reads a KV cache (tpc_torch.generate decodes with caches)")
        return self._config(gm)

    def _refuse(self, why):
        self.reason = why
        return False

    def _config(self, gm):
        v = _value(self.hidden)
        if v.device.type != "cpu":
            return self._refuse(f"its tensors are on {v.device}; this backend runs tpc's CPU backend")
        if not _static(v.shape):
            return self._refuse("dynamic shapes (compile with dynamic=False)")
        p = {k: _value(a) for k, a in self.params.items()}
        need = ["input_layernorm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                "mlp.up_proj.weight", "mlp.down_proj.weight"] + [f"self_attn.{r}_proj.weight" for r in "qkvo"]
        missing = [n for n in need if p.get(n) is None]
        if missing:
            return self._refuse(f"parameters {', '.join(missing)} not found")
        dtypes = {t.dtype for t in p.values()} | {v.dtype}
        if len(dtypes) != 1 or v.dtype not in (torch.float32, torch.bfloat16):
            return self._refuse(f"dtypes {sorted(str(d) for d in dtypes)}: one of f32 or bf16 expected")
        sdpa = [n for n in self.nodes if n.op == "call_function" and "scaled_dot_product_attention" in str(n.target)]
        if len(sdpa) != 1 or _value(sdpa[0].args[0]) is None:
            return self._refuse("its attention is not one scaled_dot_product_attention call")
        q = _value(sdpa[0].args[0])
        _, heads, _, head_dim = q.shape
        scale = sdpa[0].kwargs.get("scale")
        if scale is not None and abs(scale - head_dim ** -0.5) > 1e-6 * head_dim ** -0.5:
            return self._refuse(f"its attention scale {scale} is not 1/sqrt(head_dim)")
        eps = [n.args[1] for n in self.nodes if n.op == "call_function" and n.target is operator.add
               and isinstance(n.args[1], float) and any(name in recognize.RMSNORM for _, name in _modules_of(n))]
        if not eps:
            return self._refuse("its norms' epsilon was not found")
        bias = {k for k in p if k.endswith(".bias")}
        attn_bias = {f"self_attn.{r}_proj.bias" for r in "qkv"}
        model_type = DECODER[self.cls]
        cfg = dict(model_type=model_type, hidden_size=v.shape[2], intermediate_size=p["mlp.gate_proj.weight"].shape[0],
                   num_attention_heads=heads, num_key_value_heads=p["self_attn.k_proj.weight"].shape[0] // head_dim,
                   head_dim=head_dim, rms_norm_eps=eps[0], vocab_size=256,
                   max_position_embeddings=max(2048, v.shape[1]), tie_word_embeddings=False)
        if model_type == "qwen2":
            if bias != attn_bias:
                return self._refuse(f"biases {sorted(bias)}: Qwen2 layers have q, k and v biases only")
        elif model_type == "llama":
            if bias and bias != attn_bias | {"self_attn.o_proj.bias"}:
                return self._refuse(f"biases {sorted(bias)} are not Llama's attention_bias")
            cfg["attention_bias"] = bool(bias)
        elif bias:
            return self._refuse(f"biases {sorted(bias)}: {self.cls} has none")
        self.batch, self.seq_len = v.shape[0], v.shape[1]
        self.dtype = "f32" if v.dtype == torch.float32 else "bf16"
        self.config = cfg
        return True


class _Region:
    """A run of consecutive layers as one tp module: forward and training step."""

    def __init__(self, layers, opts):
        self.layers = layers
        first = layers[0]
        self.batch, self.seq_len, self.dtype = first.batch, first.seq_len, first.dtype
        self.hidden = first.config["hidden_size"]
        self.head_dim = first.config["head_dim"]
        self.torch_dtype = torch.float32 if self.dtype == "f32" else torch.bfloat16
        # The weight arguments of the module, by the exporter's names, and the graph's parameters
        # that make each (gate_up_proj = [gate_proj; up_proj]).
        self.weight_names, self.param_nodes, self.parts = [], [], []
        gate, up = "mlp.gate_proj.weight", "mlp.up_proj.weight"
        for i, layer in enumerate(layers):
            base, keys = len(self.param_nodes), list(layer.params)
            self.param_nodes += [layer.params[k] for k in keys]
            for j, key in enumerate(keys):
                if key not in (gate, up):
                    self.weight_names.append(f"layers.{i}.{key}")
                    self.parts.append([base + j])
            self.weight_names.append(f"layers.{i}.mlp.gate_up_proj.weight")
            self.parts.append([base + keys.index(gate), base + keys.index(up)])
        work = tempfile.mkdtemp(prefix="tpc_torch_compile.")
        cfg = dict(first.config, num_hidden_layers=len(layers))
        path = os.path.join(work, "config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        exported = exporter.export(path, batch=self.batch, seq_len=self.seq_len, dtype=self.dtype, weights=False)
        mlir = os.path.join(work, "layers.mlir")
        with open(mlir, "w", encoding="utf-8") as f:
            f.write(exported.text)
        flags = [f"--mesh={opts['mesh']}"] + ([f"--numerics={opts['numerics']}"] if opts["numerics"] else [])
        self.flags = flags
        self.forward_module = runtime.Module(runtime.compile_mlir(mlir, "--pipeline=infer", *flags))
        self.mlir = mlir
        self._train = None
        args = {a.name for a in self.forward_module.args}
        unknown = [n for n in self.weight_names if n not in args]
        if unknown:
            raise ExportError(f"the exported layers take no argument {', '.join(unknown)}")

    @property
    def train_module(self):
        if self._train is None:
            self._train = runtime.Module(runtime.compile_mlir(self.mlir, "--pipeline=train", *self.flags))
        return self._train

    def _arguments(self, x, cos, sin, params):
        rows = self.batch * self.seq_len
        given = {"x": x.reshape(rows, self.hidden).contiguous(),
                 "cos": cos.expand(self.batch, self.seq_len, self.head_dim).reshape(rows, self.head_dim)
                 .to(self.torch_dtype).contiguous(),
                 "sin": sin.expand(self.batch, self.seq_len, self.head_dim).reshape(rows, self.head_dim)
                 .to(self.torch_dtype).contiguous()}
        for name, parts in zip(self.weight_names, self.parts):
            given[name] = params[parts[0]] if len(parts) == 1 else torch.cat([params[p] for p in parts])
        return given

    def forward(self, x, cos, sin, params):
        out = self.forward_module(**self._arguments(x, cos, sin, params))
        return out["y"].view(x.shape)

    def backward(self, x, cos, sin, params, dy):
        given = self._arguments(x, cos, sin, params)
        given["y_grad"] = dy.reshape(given["x"].shape).to(self.torch_dtype).contiguous()
        out = self.train_module(**given)
        dx = out["x_grad"].view(x.shape).to(x.dtype)
        grads = [None] * len(params)
        for name, parts in zip(self.weight_names, self.parts):
            g = out.get(name + "_grad")
            if g is None:
                g = torch.zeros(given[name].shape, dtype=torch.float32)
            if len(parts) == 1:
                grads[parts[0]] = g.to(params[parts[0]].dtype)
            else:
                for p, piece in zip(parts, torch.split(g, [params[p].shape[0] for p in parts])):
                    grads[p] = piece.to(params[p].dtype).clone()  # outputs may not alias each other
        return [dx] + grads


@torch.library.custom_op("tpc::layers", mutates_args=())
def _layers(region: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            params: list[torch.Tensor]) -> torch.Tensor:
    return _regions[region].forward(x, cos, sin, params)


@_layers.register_fake
def _(region, x, cos, sin, params):
    return torch.empty_like(x)


@torch.library.custom_op("tpc::layers_grad", mutates_args=())
def _layers_grad(region: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, params: list[torch.Tensor],
                 dy: torch.Tensor) -> list[torch.Tensor]:
    return _regions[region].backward(x, cos, sin, params, dy)


@_layers_grad.register_fake
def _(region, x, cos, sin, params, dy):
    return [torch.empty_like(x)] + [torch.empty_like(p) for p in params]


def _setup(ctx, inputs, output):
    region, x, cos, sin, params = inputs
    ctx.region, ctx.count = region, len(params)
    ctx.save_for_backward(x, cos, sin, *params)


def _backward(ctx, dy):
    x, cos, sin, *params = ctx.saved_tensors
    grads = torch.ops.tpc.layers_grad(ctx.region, x, cos, sin, params, dy)
    return None, grads[0], None, None, list(grads[1:])


_layers.register_autograd(_backward, setup_context=_setup)


def _options(options):
    opts = dict(OPTIONS)
    for k, v in (options or {}).items():
        if k not in OPTIONS:
            raise ExportError(f"torch.compile backend 'tpc': unknown option '{k}' (options: {', '.join(OPTIONS)})")
        opts[k] = v
    if opts["rest"] not in ("inductor", "eager"):
        raise ExportError(f"torch.compile backend 'tpc': rest={opts['rest']!r}: inductor or eager")
    return opts


def _runs(layers):
    """Runs of consecutive supported layers, each feeding the next."""
    runs, current = [], []
    for layer in layers:
        if layer.reason is None and current and layer.hidden is current[-1].output:
            current.append(layer)
            continue
        if current:
            runs.append(current)
        current = [layer] if layer.reason is None else []
    if current:
        runs.append(current)
    return runs


def _span(run):
    paths = [_shown(layer.path) for layer in run]
    return paths[0] if len(run) == 1 else f"{paths[0]} .. {paths[-1]}"


def partition(gm, options=None):
    """Replaces the runs of supported decoder layers in gm (in place) by tpc::layers calls and
    returns the report lines."""
    opts = _options(options)
    layers, by_path = [], {}
    for node in gm.graph.nodes:
        where = _layer_of(node)
        if where is None or node.op == "placeholder":
            continue
        if where[0] not in by_path:
            by_path[where[0]] = _Layer(*where)
            layers.append(by_path[where[0]])
        by_path[where[0]].nodes.append(node)
    report = []
    for layer in layers:
        try:
            layer.analyse(gm)
        except Exception as e:  # a graph shape nobody foresaw: that layer stays with Inductor
            layer.reason = f"not analysed ({type(e).__name__}: {e})"
    for layer in layers:
        if layer.reason:
            report.append(f"{_shown(layer.path)} ({layer.cls}) -> {opts['rest']}: {layer.reason}")
    for run in _runs(layers):
        try:
            region = _Region(run, opts)
        except ExportError as e:
            for layer in run:
                report.append(f"{_shown(layer.path)} ({layer.cls}) -> {opts['rest']}: {e}")
            continue
        _regions.append(region)
        index = len(_regions) - 1
        params = region.param_nodes
        first = min(run[0].nodes, key=lambda n: list(gm.graph.nodes).index(n))
        with gm.graph.inserting_before(first):
            call = gm.graph.call_function(torch.ops.tpc.layers.default,
                                          (index, run[0].hidden, run[0].cos, run[0].sin, list(params)))
        call.meta["example_value"] = _value(run[-1].output)
        run[-1].output.replace_all_uses_with(call)
        doomed = [n for layer in run for n in layer.nodes]
        for n in reversed(list(gm.graph.nodes)):
            if n in set(doomed):
                gm.graph.erase_node(n)
        c = run[0].config
        report.append(f"{_span(run)} ({len(run)} x {run[0].cls}: hidden {c['hidden_size']}, {c['num_attention_heads']}"
                      f"/{c['num_key_value_heads']} heads, {run[0].batch} x {run[0].seq_len} tokens, {run[0].dtype}) "
                      f"-> tpc (CPU backend, mesh {opts['mesh']}"
                      + (f", {opts['numerics']} numerics" if opts["numerics"] else "") + ")")
    others = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")
              and not (n.op == "call_function" and n.target is torch.ops.tpc.layers.default)]
    if others:
        report.append(f"the rest of the graph ({len(others)} operations) -> {opts['rest']}")
    gm.graph.lint()
    gm.recompile()
    return report


def backend(gm, example_inputs, options=None):
    """The torch.compile backend (registered as "tpc")."""
    opts = _options(options)
    report = partition(gm, opts)
    last_report[:] = report
    if opts["log"]:
        for line in report:
            print(f"tpc_torch.compile: {line}", file=sys.stderr)
    if opts["rest"] == "eager":
        return gm.forward
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


def _register():
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "tpc" not in _BACKENDS:
        register_backend(name="tpc")(backend)


_register()
