#!/usr/bin/env python3
"""Float64 reference for the example modules, compared with what tpc-run computed.

Usage: reference.py {mlp|moe} ARGS.safetensors OUTPUTS.safetensors [--mutant]
       reference.py attention ARGS.safetensors OUTPUTS.safetensors --module M.mlir [--mutant=KIND]
       reference.py attention-inputs M.mlir INPUTS.safetensors

ARGS holds the arguments tpc-run used (--dump-args), OUTPUTS its results (--outputs). The
reference recomputes the block in float64, rounding every intermediate to the storage dtype as
the kernels do (so both take the same routing decisions), and checks each output within a
tolerance per dtype. Prints the largest errors and exits non-zero on a mismatch. The safetensors
reader is independent of tpc's C one.

`attention` is the Llama attention block of test/e2e/Inputs/attention_block*.mlir (rmsnorm,
q/k/v projections, rotary embedding, grouped-query attention, output projection, residual); its
seq_len, head_dim, causal and scale are read from M. When OUTPUTS holds a training step's
gradients (--pipeline train: x_grad, gamma_grad, wq_grad, ...; the loss is sum(y * y_grad)), they
are checked against the float64 analytic gradients, which are first checked against central
finite differences of the float64 forward. --mutant=KIND makes the reference deliberately wrong
and must FAIL: gqa (query head h reads kv head h % Hkv), rope (GPT-J's interleaved pairs),
mask (a causal query sees one key too many; a full one misses the last), scale (1/D),
rope-grad (the gradient rotates forward, not back), softmax-grad (no -rowsum(dY*Y) term).
`attention-inputs` writes the arguments that make the block realistic, for tpc-run --inputs:
Hugging Face's rotary tables (theta 10000, position = token index within its sequence) and q/k
projections large enough for a peaked softmax.
"""
import json
import re
import struct
import sys

import numpy as np

# (atol relative to the output's largest magnitude, rtol): a few units in the last place of the
# storage dtype, since the reference rounds the same intermediates and differs only in how it sums.
TOL = {"BF16": (1e-2, 2e-2), "F16": (1e-3, 2e-3), "F32": (1e-5, 1e-5)}


# Raw bits of each dtype, as unsigned integers of its width.
RAW = {"BF16": np.uint16, "F16": np.uint16, "F32": np.uint32, "F64": np.uint64, "I32": np.uint32,
       "I64": np.uint64, "I8": np.uint8, "U8": np.uint8}


def read_safetensors_raw(path):
    """{name: (dtype, raw bits as an unsigned array of the tensor's shape)}: nothing goes through a float."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], np.frombuffer(body[b:e], dtype=RAW[info["dtype"]]).reshape(info["shape"]))
    return out


def read_safetensors(path):
    out = {}
    for name, (dtype, bits) in read_safetensors_raw(path).items():
        raw = bits.reshape(-1).view({"BF16": np.uint16, "F16": np.float16, "F32": np.float32,
                                     "I32": np.int32, "I64": np.int64}[dtype])
        info = {"dtype": dtype, "shape": list(bits.shape)}
        if info["dtype"] == "BF16":
            arr = (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            arr = raw.astype(np.float64) if info["dtype"] in ("F16", "F32") else raw.copy()
        out[name] = (arr.reshape(info["shape"]), info["dtype"])
    return out


def round_bf16(x):
    """Round float64 -> float32 -> bf16 (round to nearest even), back to float64."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def rmsnorm(x, gamma, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float64(np.float32(eps))) * gamma


MUTANT = False  # --mutant: a deliberately wrong reference (gate and up swapped), which must FAIL


def swiglu(u):
    f = u.shape[-1] // 2
    g, up = u[..., :f], u[..., f:]
    if MUTANT:
        g, up = up, g
    return g / (1.0 + np.exp(-g)) * up


def mlp(a):
    x, gamma, w1, w2 = (a[k][0] for k in ("x", "gamma", "w1", "w2"))
    h = round_bf16(rmsnorm(x, gamma))
    u = round_bf16(h @ w1.T)
    act = round_bf16(swiglu(u))
    d = round_bf16(act @ w2.T)
    return {"y": round_bf16(x + d)}


def moe(a, top_k=2):
    x, router, w1, w2 = (a[k][0] for k in ("x", "router", "w1", "w2"))
    t, e = x.shape[0], router.shape[0]
    logits = round_bf16(x @ router.T)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    idx = np.argsort(-p, axis=1, kind="stable")[:, :top_k]  # ties -> lower expert
    wts = np.take_along_axis(p, idx, axis=1)
    wts /= wts.sum(axis=1, keepdims=True)
    y = np.zeros_like(x)
    for tok in range(t):
        for j in range(top_k):
            ex = idx[tok, j]
            h1 = round_bf16(x[tok] @ w1[ex].T)
            act = round_bf16(swiglu(h1))
            h2 = round_bf16(act @ w2[ex].T)
            y[tok] += wts[tok, j] * h2
    return {"y": round_bf16(y)}


def main():
    global MUTANT
    if sys.argv[1:2] == ["attention"]:
        return attention_main(sys.argv[2:])
    if sys.argv[1:2] == ["attention-inputs"]:
        return attention_inputs_main(sys.argv[2:])
    argv = [a for a in sys.argv[1:] if a != "--mutant"]
    MUTANT = len(argv) != len(sys.argv) - 1
    which, args_path, out_path = argv[:3]
    args = read_safetensors(args_path)
    got = read_safetensors(out_path)
    want = {"mlp": mlp, "moe": moe}[which](args)
    ok = True
    for name, ref in want.items():
        val, dtype = got[name]
        atol, rtol = TOL[dtype]
        atol *= np.abs(ref).max()
        err = np.abs(val - ref)
        bad = err > atol + rtol * np.abs(ref)
        print(f"{which}.{name}: max abs err {err.max():.3g}, max |ref| {np.abs(ref).max():.3g}, "
              f"{int(bad.sum())} of {bad.size} elements outside atol {atol:.3g} rtol {rtol}")
        ok &= not bad.any()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


# ---- The attention block ------------------------------------------------------------------------

# Tolerances of the attention block against the float64 reference, by the block's activation
# dtype (not the output's: f32 weight gradients are computed from bf16 activations), as
# (atol relative to the tensor's largest magnitude, rtol). Forward outputs use TOL. Gradients pass
# through more roundings of the storage dtype (dy·W, dq/dk/dv, the inverse rotation, three summed
# dgrads) than the forward, and the reference differentiates at the rounded activations but does
# not round its own backward intermediates: bf16 allows 1.5% of the largest magnitude (measured:
# 0.65%), f32 1e-5 (measured: 7e-7).
GRAD_TOL = {"BF16": (1.5e-2, 2e-2), "F16": (2e-3, 3e-3), "F32": (1e-5, 1e-5)}
ROUND = {"BF16": round_bf16, "F16": lambda v: np.asarray(v, np.float16).astype(np.float64),
         "F32": lambda v: np.asarray(v, np.float32).astype(np.float64)}
ATTN_MUTANTS = ("gqa", "rope", "mask", "scale", "rope-grad", "softmax-grad")
ATTN_MUTANT = None  # one of ATTN_MUTANTS, set by --mutant=KIND


def module_spec(path):
    """The block's attention attributes and argument types, read from its .mlir text."""
    text = open(path).read()
    m = re.search(r'"tp\.attention"\([^)]*\)\s*\{([^}]*)\}', text)
    if not m:
        sys.exit(f"FAIL: no tp.attention in {path}")
    attrs = m.group(1)
    get = lambda key, default: (re.search(key + r"\s*=\s*([-+.\w]+)", attrs) or [None, default])[1]
    args = {name: (dims, dt) for dims, dt, name in
            re.findall(r"tensor<([\dx]+?)x(bf16|f16|f32)>\s*\{tp\.name\s*=\s*\"(\w+)\"", text)}
    return {"seq_len": int(get("seq_len", None)), "head_dim": int(get("head_dim", None)),
            "causal": get("causal", "true") == "true", "scale": float(get("scale", "0.0")),
            "args": {n: ([int(d) for d in dims.split("x")], dt.upper()) for n, (dims, dt) in args.items()}}


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, float64 array)}, stored rounded to dtype (BF16, F16 or F32)."""
    raw = {}
    for name, (dtype, arr) in tensors.items():
        f32 = np.ascontiguousarray(ROUND[dtype](arr), dtype=np.float32)
        raw[name] = (dtype, (f32.view(np.uint32) >> 16).astype(np.uint16) if dtype == "BF16" else
                     f32.astype(np.float16) if dtype == "F16" else f32)
    write_safetensors_raw(path, raw)


def write_safetensors_raw(path, tensors):
    """tensors: {name: (dtype, array of the stored bits or values)}, written as they are."""
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        blob = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def rope_tables(tokens, seq_len, head_dim, theta=10000.0):
    """Hugging Face's cos and sin [tokens, D]: emb = cat(freqs, freqs) at position t mod seq_len."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    freqs = np.outer(np.arange(tokens) % seq_len, inv_freq)
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.cos(emb), np.sin(emb)


def attention_inputs(spec, seed=11):
    """cos, sin and wq, wk (uniform in +-2.5/sqrt(hidden): scores of a few units, a peaked but not
    one-hot softmax) for the block of |spec|."""
    a = spec["args"]
    (tokens, d), tdt = a["cos"]
    cos, sin = rope_tables(tokens, spec["seq_len"], d)
    rng = np.random.default_rng(seed)
    out = {"cos": (tdt, cos), "sin": (tdt, sin)}
    for w in ("wq", "wk"):
        shape, dt = a[w]
        out[w] = (dt, rng.uniform(-2.5, 2.5, shape) / np.sqrt(shape[1]))
    return out


def attention_inputs_main(argv):
    module, out = argv
    write_safetensors(out, attention_inputs(module_spec(module)))
    return 0


def rotate_half(x):
    """[-x2, x1] per head (the last axis is one head); GPT-J's interleaved pairs for --mutant=rope."""
    if ATTN_MUTANT == "rope":
        r = np.empty_like(x)
        r[..., 0::2], r[..., 1::2] = -x[..., 1::2], x[..., 0::2]
        return r
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rotate_half_t(z):
    """The transpose of rotate_half: [z2, -z1]."""
    if ATTN_MUTANT == "rope":
        r = np.empty_like(z)
        r[..., 0::2], r[..., 1::2] = z[..., 1::2], -z[..., 0::2]
        return r
    h = z.shape[-1] // 2
    return np.concatenate([z[..., h:], -z[..., :h]], axis=-1)


def rope(x, cos, sin):
    """Hugging Face's apply_rotary_pos_emb on each head of x[T, H*D]: x*cos + rotate_half(x)*sin."""
    t, w = x.shape
    d = cos.shape[1]
    xh = x.reshape(t, w // d, d)
    return (xh * cos[:, None] + rotate_half(xh) * sin[:, None]).reshape(t, w)


def rope_grad(dy, cos, sin):
    """dx of rope: the transpose of the linear map, dy*cos + rotate_half^T(dy*sin)."""
    if ATTN_MUTANT == "rope-grad":
        return rope(dy, cos, sin)
    t, w = dy.shape
    d = cos.shape[1]
    g = dy.reshape(t, w // d, d)
    return (g * cos[:, None] + rotate_half_t(g * sin[:, None])).reshape(t, w)


def heads(x, s, d):
    """[T, H*D] -> [B, H, S, D]."""
    t, w = x.shape
    return x.reshape(t // s, s, w // d, d).transpose(0, 2, 1, 3)


def unheads(x):
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b * s, h * d)


def kv_head_of(hq, hkv):
    return np.arange(hq) % hkv if ATTN_MUTANT == "gqa" else np.arange(hq) // (hq // hkv)


def attention_probs(q, k, spec):
    """Softmax probabilities [B, Hq, S, S] of scaled scores with the mask; q, k in [T, H*D]."""
    s, d = spec["seq_len"], spec["head_dim"]
    scale = spec["scale"] or 1.0 / np.sqrt(d)
    if ATTN_MUTANT == "scale":
        scale = 1.0 / d
    Q, K = heads(q, s, d), heads(k, s, d)[:, kv_head_of(q.shape[1] // d, k.shape[1] // d)]
    scores = Q @ K.transpose(0, 1, 3, 2) * scale
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    visible = (j <= i) if spec["causal"] else np.ones((s, s), bool)
    if ATTN_MUTANT == "mask":
        visible = (j <= i + 1) if spec["causal"] else (j < s - 1)
    scores = np.where(visible, scores, -np.inf)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True), scale


def attention(q, k, v, spec):
    p, _ = attention_probs(q, k, spec)
    d = spec["head_dim"]
    V = heads(v, spec["seq_len"], d)[:, kv_head_of(q.shape[1] // d, k.shape[1] // d)]
    return unheads(p @ V)


def attention_grad(q, k, v, dy, spec):
    """dq, dk, dv of attention (float64, exact softmax Jacobian); dk and dv sum their group's heads."""
    s, d = spec["seq_len"], spec["head_dim"]
    hq, hkv = q.shape[1] // d, k.shape[1] // d
    idx = kv_head_of(hq, hkv)
    p, scale = attention_probs(q, k, spec)
    Q, K, V = heads(q, s, d), heads(k, s, d)[:, idx], heads(v, s, d)[:, idx]
    dY = heads(dy, s, d)
    dP = dY @ V.transpose(0, 1, 3, 2)
    di = 0.0 if ATTN_MUTANT == "softmax-grad" else np.sum(p * dP, axis=-1, keepdims=True)
    dS = p * (dP - di)
    dQ = scale * dS @ K
    dKx, dVx = scale * dS.transpose(0, 1, 3, 2) @ Q, p.transpose(0, 1, 3, 2) @ dY
    dK, dV = np.zeros((dY.shape[0], hkv, s, d)), np.zeros((dY.shape[0], hkv, s, d))
    for h in range(hq):
        dK[:, idx[h]] += dKx[:, h]
        dV[:, idx[h]] += dVx[:, h]
    return unheads(dQ), unheads(dK), unheads(dV)


def rmsnorm_grad(x, gamma, dh, eps=1e-5):
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float64(np.float32(eps)))
    dxn = dh * gamma
    dx = r * dxn - x * r ** 3 * np.mean(dxn * x, axis=-1, keepdims=True)
    return dx, np.sum(dh * x * r, axis=0)


def block_forward(p, spec, rnd):
    """The block's activations; rnd rounds each intermediate to the storage dtype (identity for
    the unrounded float64 forward of the finite differences)."""
    act = {}
    act["h"] = h = rnd(rmsnorm(p["x"], p["gamma"]))
    act["q"], act["k"], act["v"] = (rnd(h @ p[w].T) for w in ("wq", "wk", "wv"))
    act["qr"] = rnd(rope(act["q"], p["cos"], p["sin"]))
    act["kr"] = rnd(rope(act["k"], p["cos"], p["sin"]))
    act["a"] = rnd(attention(act["qr"], act["kr"], act["v"], spec))
    act["y"] = rnd(p["x"] + rnd(act["a"] @ p["wo"].T))
    return act


def block_grads(p, act, dy, spec):
    """Analytic float64 gradients of sum(y * dy) at the given activations."""
    g = {"wo_grad": dy.T @ act["a"]}
    dqr, dkr, dv = attention_grad(act["qr"], act["kr"], act["v"], dy @ p["wo"], spec)
    dq, dk = rope_grad(dqr, p["cos"], p["sin"]), rope_grad(dkr, p["cos"], p["sin"])
    g["wq_grad"], g["wk_grad"], g["wv_grad"] = dq.T @ act["h"], dk.T @ act["h"], dv.T @ act["h"]
    dh = dq @ p["wq"] + dk @ p["wk"] + dv @ p["wv"]
    dx, g["gamma_grad"] = rmsnorm_grad(p["x"], p["gamma"], dh)
    g["x_grad"] = dy + dx
    return g


def finite_difference_check(p, dy, spec, per_param=16, h=1e-6, seed=5):
    """Largest |analytic - central difference| over a sample of every differentiated argument,
    relative to that gradient's largest magnitude (unrounded float64 forward)."""
    grads = block_grads(p, block_forward(p, spec, lambda v: v), dy, spec)
    loss = lambda q: float(np.sum(block_forward(q, spec, lambda v: v)["y"] * dy))
    rng = np.random.default_rng(seed)
    worst, count = 0.0, 0
    for name in ("x", "gamma", "wq", "wk", "wv", "wo"):
        q = {k: v.copy() for k, v in p.items()}
        scale = np.abs(grads[name + "_grad"]).max()
        for flat in rng.choice(q[name].size, size=min(per_param, q[name].size), replace=False):
            i = np.unravel_index(flat, q[name].shape)
            keep = q[name][i]
            q[name][i] = keep + h
            up = loss(q)
            q[name][i] = keep - h
            down = loss(q)
            q[name][i] = keep
            worst = max(worst, abs((up - down) / (2 * h) - grads[name + "_grad"][i]) / scale)
            count += 1
    return worst, count


def attention_main(argv):
    global ATTN_MUTANT
    mutants = [a.split("=", 1)[1] if "=" in a else "gqa" for a in argv if a.startswith("--mutant")]
    argv = [a for a in argv if not a.startswith("--mutant")]
    if mutants:
        ATTN_MUTANT = mutants[0]
        if ATTN_MUTANT not in ATTN_MUTANTS:
            sys.exit(f"unknown mutant {ATTN_MUTANT}; one of {', '.join(ATTN_MUTANTS)}")
    i = argv.index("--module")
    spec = module_spec(argv[i + 1])
    args_path, out_path = [a for j, a in enumerate(argv) if j not in (i, i + 1)]
    p = {k: v[0] for k, v in read_safetensors(args_path).items()}
    got = read_safetensors(out_path)
    dtype = spec["args"]["x"][1]
    act = block_forward(p, spec, ROUND[dtype])
    ok = True

    def check(name, ref, tol):
        nonlocal ok
        if name not in got:
            print(f"attention.{name}: missing from {out_path}")
            ok = False
            return
        val = got[name][0]
        atol = tol[0] * np.abs(ref).max()
        err = np.abs(val - ref)
        bad = err > atol + tol[1] * np.abs(ref)
        print(f"attention.{name}: max abs err {err.max():.3g}, max |ref| {np.abs(ref).max():.3g} "
              f"(max err / max |ref| {err.max() / np.abs(ref).max():.3g}), {int(bad.sum())} of {bad.size} "
              f"elements outside atol {atol:.3g} rtol {tol[1]}")
        ok &= not bad.any()

    check("y", act["y"], TOL[got["y"][1]])
    if "y_grad" in p:
        if ATTN_MUTANT is None:
            worst, count = finite_difference_check(p, p["y_grad"], spec)
            good = worst < 1e-6
            print(f"reference gradients vs central finite differences: {count} coordinates, max err / max |grad| "
                  f"{worst:.3g} {'ok' if good else 'BAD'}")
            ok &= good
        for name, ref in sorted(block_grads(p, act, p["y_grad"], spec).items()):
            check(name, ref, GRAD_TOL[dtype])
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
