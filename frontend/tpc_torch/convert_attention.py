"""An attention unit (LlamaAttention and its relatives) to tp ops:

  q, k, v = tp.linear(x, wq / wk / wv)         column-parallel under the Megatron plan
  q, k    = tp.rope(q / k, cos, sin)
  a       = tp.attention(q, k, v) {seq_len, head_dim}   causal, grouped-query
  y       = tp.linear(a, wo)                   row-parallel

(decoding steps: tp.attention_kvcache(q, k, v, k_cache, v_cache, cache_len), and k and v returned)

after checking that the ATen graph of the module computes exactly that: SDPA, causal, without a
mask or dropout, q and k rotated with cos on themselves and sin on rotate_half, v not rotated."""
from . import emit
from .errors import ExportError
from .opsets import ATTENTION_OPS, aten

SDPA = aten.scaled_dot_product_attention.default
PROJ = ("q_proj", "k_proj", "v_proj", "o_proj")


def _sdpa_arg(node, index, name, default):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _origins(conv, unit, nodes, labels, proj, sdpa):
    """For every node, the set of sources its value is computed from: 'x', 'cos', 'sin', the
    projection ('q', 'k', 'v', 'o': a linear starts a new set), 'rotate' (a cat: rotate_half) and
    'attention' (the SDPA output starts a new set)."""
    role_of = {n: r[0] for r, n in proj.items()}
    origin = {}
    for n in nodes:
        if n in role_of:
            origin[n] = {role_of[n]}
            continue
        if n is sdpa:
            origin[n] = {"attention"}
            continue
        s = set()
        for a in n.all_input_nodes:
            s |= {labels[a]} if a in labels else origin.get(a, set())
        if n.target == aten.cat.default:
            s.add("rotate")
        origin[n] = s
    return origin


def attention(conv, unit, module, nodes):
    conv._check_ops(nodes, ATTENTION_OPS)
    ins, outs = conv._io(nodes)
    labels, hidden = {}, None
    for n in ins:
        v = conv.value(n, nodes[0])
        if v is conv.cos or v is conv.sin:
            labels[n] = "cos" if v is conv.cos else "sin"
        elif hidden is None:
            hidden, labels[n] = n, "x"
        else:
            conv.mismatch(unit, nodes, "attention of the hidden states with the rotary tables (it reads other tensors)")
    proj = {}
    for n in nodes:
        if n.target == aten.linear.default:
            role = list(n.meta["nn_module_stack"].values())[-1][0].rsplit(".", 1)[-1]
            if role not in PROJ or role in proj:
                conv.mismatch(unit, [n], f"q_proj, k_proj, v_proj and o_proj once each (it calls {role})")
            proj[role] = n
    sdpas = [n for n in nodes if n.target == SDPA]
    if len(proj) != 4 or len(sdpas) != 1 or hidden is None or sorted(labels.values()) != ["cos", "sin", "x"]:
        conv.mismatch(unit, nodes, "o_proj(sdpa(rope(q_proj(x)), rope(k_proj(x)), v_proj(x)))")
    sdpa = sdpas[0]
    origin = _origins(conv, unit, nodes, labels, proj, sdpa)
    expect = [(proj["q_proj"].args[0], {"x"}), (proj["k_proj"].args[0], {"x"}), (proj["v_proj"].args[0], {"x"}),
              (sdpa.args[0], {"q", "cos", "sin", "rotate"}), (sdpa.args[1], {"k", "cos", "sin", "rotate"}),
              (sdpa.args[2], {"v"}), (proj["o_proj"].args[0], {"attention"})]
    for node, want in expect:
        got = {labels[node]} if node in labels else origin.get(node, set())
        if got != want:
            conv.mismatch(unit, [sdpa], f"o_proj(sdpa(rope(q), rope(k), v)): {node.name} comes from "
                                        f"{', '.join(sorted(got))}, expected {', '.join(sorted(want))}")
    for n in nodes:  # rope: q * cos + rotate_half(q) * sin
        if n.target == aten.mul.Tensor and len(n.all_input_nodes) == 2:
            a, b = n.all_input_nodes
            oa, ob = ({labels[m]} if m in labels else origin[m] for m in (a, b))
            for table, other in ((oa, ob), (ob, oa)):
                if table in ({"sin"}, {"cos"}) and (("rotate" in other) != (table == {"sin"})):
                    conv.mismatch(unit, [n], "the rotary embedding x * cos + rotate_half(x) * sin")
    mask = _sdpa_arg(sdpa, 3, "attn_mask", None)
    dropout = _sdpa_arg(sdpa, 4, "dropout_p", 0.0)
    causal = _sdpa_arg(sdpa, 5, "is_causal", False)
    # One token per sequence: Hugging Face passes is_causal=False, and the mask would change nothing.
    if mask is not None or dropout != 0.0 or (causal is not True and conv.seq_len > 1):
        conv.unsupported(sdpa, f"tp.attention is causal self-attention without a mask or dropout "
                               f"(attn_mask={'a tensor' if mask is not None else None}, dropout_p={dropout}, "
                               f"is_causal={causal})")
    head_dim = int(module.head_dim)
    if conv.cos.shape[1] != head_dim:
        raise ExportError(f"{unit}: the rotary tables are {conv.cos.shape[1]} wide but heads are {head_dim}: "
                          "partial rotary embeddings are not supported")
    window = getattr(module, "sliding_window", None) or getattr(module.config, "sliding_window", None)
    if window and window < conv.seq_len:
        raise ExportError(f"{unit}: sliding-window attention (window {window}) over sequences of "
                          f"{conv.seq_len} tokens is not supported; use --seq-len <= {window}")

    def project(role, x):
        node = proj[role]
        return conv._linear_node(node, f"{unit}.{role}", conv.plan.of(f"{unit}.{role}"), x=x)

    x = conv.value(hidden, sdpa)
    q, k, v = (project(r, x) for r in PROJ[:3])
    fn = conv.fn
    q = fn.op("tp.rope", [q, conv.cos, conv.sin], {}, [(q.shape, q.dtype)], hints=["q_rope"])[0]
    k = fn.op("tp.rope", [k, conv.cos, conv.sin], {}, [(k.shape, k.dtype)], hints=["k_rope"])[0]
    attrs = {"seq_len": emit.integer(conv.seq_len), "head_dim": emit.integer(head_dim)}
    scale = sdpa.kwargs.get("scale")
    if scale is not None and abs(scale - head_dim ** -0.5) > 1e-7 * scale:
        attrs["scale"] = emit.f32(scale)
    if conv.kv_cache:
        # Decoding: the cached tokens' rotated keys and values come first; the step returns the
        # new tokens' k and v for the caller to append.
        if conv.cache_len is None:
            conv.cache_len = fn.arg("cache_len", [conv.batch], "i32", grad=False)
        caches = [fn.arg(f"{unit}.{kind}_cache", [conv.batch * conv.kv_cache, k.shape[1]], k.dtype, grad=False,
                         hint=emit.arg_hint(f"{unit}.{kind}_cache")) for kind in ("k", "v")]
        a = fn.op("tp.attention_kvcache", [q, k, v, *caches, conv.cache_len], attrs, [(q.shape, q.dtype)],
                  hints=["attn"])[0]
        conv.kv_results += [(k, f"{unit}.k"), (v, f"{unit}.v")]
    else:
        a = fn.op("tp.attention", [q, k, v], attrs, [(q.shape, q.dtype)], hints=["attn"])[0]
    y = project("o_proj", a)
    conv._bind_output(unit, nodes, outs, y, proj["o_proj"])
