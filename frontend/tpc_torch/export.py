"""python -m tpc_torch.export: a Hugging Face model's decoder layers as a tp module.

The exported function maps the hidden states x[B*S, H] to the hidden states after every decoder
layer, y[B*S, H], with the rotary tables cos, sin[B*S, D] of positions 0..S-1 as inputs
(embeddings, the final norm and the LM head are not part of it). Arguments are named by tp.name:
x, cos, sin, then the weights under their Hugging Face parameter names relative to the model
(layers.0.self_attn.q_proj.weight, ...; gate_proj and up_proj are one argument,
layers.0.mlp.gate_up_proj.weight = [gate; up]).

With --kv-cache C the function is a decoding step: x holds S = --seq-len new tokens of each
sequence, cos and sin the rows of their positions, and every attention reads a KV cache
(tp.attention_kvcache): arguments layers.<i>.self_attn.k_cache and .v_cache [B*C, Hkv*D] hold C
rows per sequence, the first cache_len[b] (argument cache_len, i32 [B]) of them its earlier
tokens' rotated keys and values. The results are y and each layer's new rotated keys and values,
layers.<i>.self_attn.k and .v [B*S, Hkv*D], which the caller appends to the caches. The example
inputs (--weights) decode after --past cached tokens."""
import argparse
import math
import os
import sys

import torch

from . import convert, emit, models, plan as plans, weights
from .errors import ExportError


class Exported:
    """What export() made: the module text, the model and stack, the plan, the example inputs
    and each weight argument's parameters (tensors: tp.name -> [parameter names])."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def weights(self):
        return weights.gather(self.root, self.tensors)

    def inputs(self):
        """x, cos, sin and the output cotangent y_grad of training steps; for a decoding step, x,
        cos, sin, the caches and cache_len."""
        if self.kv_cache:
            example, extra, _ = self.decoding()
            return {**dict(zip(("x", "cos", "sin"), example)), **extra}
        return {**dict(zip(("x", "cos", "sin"), self.example)), "y_grad": self.cotangent}

    def decoding(self):
        """(example, extra inputs, PyTorch's reference) of the decoding step, computed once."""
        if self._decoding is None:
            self._decoding = models.decode_example(self.model, self.root.layers, self.batch, self.past, self.seq_len,
                                                   self.kv_cache, self.dtype, self.seed)
        return self._decoding


def describe(model, batch, seq_len, dtype):
    c = model.config
    heads, kv = c.num_attention_heads, c.num_key_value_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    text = (f"{c.num_hidden_layers} decoder layers ({c.model_type}), hidden {c.hidden_size}, {heads} heads / "
            f"{kv} key-value heads of {head_dim}, FFN {c.intermediate_size}")
    if getattr(c, "num_local_experts", None):
        text += f" per expert, {c.num_local_experts} experts top-{c.num_experts_per_tok}"
    return text + f"; {batch} sequences of {seq_len} tokens ({batch * seq_len} rows), {dtype}"


def export(source, plan="megatron", batch=2, seq_len=16, dtype="bf16", seed=0, tp=(), recompute=False,
           weights=True, kv_cache=None, past=None, whole=False, probe_routing=False):
    """Builds the model, resolves the plan (and checks it against each TP degree in tp), runs
    torch.export on its decoder stack and converts the graph. weights=False skips drawing random
    weights (the module text does not depend on them). kv_cache=C exports a decoding step of
    seq_len new tokens per sequence over KV caches of C rows (its example after past cached
    tokens, default C - seq_len). probe_routing=True adds each MoE layer's chosen experts to the
    results (convert.convert). Raises ExportError."""
    if kv_cache is not None:
        if kv_cache < 1:
            raise ExportError(f"--kv-cache {kv_cache}: a cache holds at least 1 row per sequence")
        past = max(kv_cache - seq_len, 0) if past is None else past
        if not 0 <= past <= kv_cache:
            raise ExportError(f"--past {past}: the cached tokens must fit the cache's {kv_cache} rows per sequence")
        if recompute:
            raise ExportError("--recompute is for training steps; a decoding step (--kv-cache) has no backward")
    model, what = models.load(source, dtype, seed, init=weights)
    root = models.DecoderStack(models.layers_of(model), batch, seq_len)
    resolved = plans.resolve(plan, model, root)
    for degree in tp:
        plans.check_degree(resolved, root, degree, batch * seq_len)
    example = models.example_inputs(model, batch, seq_len, dtype, seed)  # decoding: shapes only
    try:
        exported = torch.export.export(root, example)
    except Exception as e:  # torch.export's errors are many pages; its first line says what
        raise ExportError(f"torch.export failed on {what}: {str(e).strip().splitlines()[0]}") from None
    name = "".join(ch if ch.isalnum() else "_" for ch in model.config.model_type)
    fn, tensors = convert.convert(exported, root, resolved, batch, seq_len, name, kv_cache, probe_routing)
    header = [f"Exported by tpc_torch from {what}: {describe(model, batch, seq_len, dtype)}; plan {resolved.name}"
              + (" with sequence parallelism" if resolved.sequence_parallel else "") + ".",
              "x[T,H] are the hidden states, cos/sin[T,D] the rotary tables; weights are named as the Hugging Face",
              "parameters (gate_up_proj = [gate_proj; up_proj]); y[T,H] are the hidden states after the last layer."]
    if kv_cache:
        header.append(f"A decoding step: {seq_len} new token(s) per sequence after cache_len[b] cached ones; KV caches "
                      f"of {kv_cache} rows per sequence; returns y and each layer's new k and v.")
    attrs = {"tp.recompute": "true"} if recompute else None
    if recompute:
        fn.body = _mark_layers(fn.body)
    ends = None
    if whole:
        if kv_cache:
            raise ExportError("--whole exports a training function; a decoding step (--kv-cache) has no loss")
        ends = _whole_model(fn, tensors, model, batch * seq_len, dtype, seed if weights else None)
        header = [f"Exported by tpc_torch from {what}: the whole model, {describe(model, batch, seq_len, dtype)}; "
                  f"plan {resolved.name}" + (" with sequence parallelism" if resolved.sequence_parallel else "") + ".",
                  "ids and targets[T] (i32) are the tokens and their next tokens, cos/sin[T,D] the rotary tables;",
                  "weights are named as the Hugging Face parameters (gate_up_proj = [gate_proj; up_proj]); loss[T] is",
                  "each token's cross-entropy (tpc-train averages it; docs/training.md)."]
    text = emit.module_text(fn, header, attrs)
    return Exported(fn=fn, ends=ends, model=model, root=root, plan=resolved, text=text, tensors=tensors, example=example,
                    cotangent=models.cotangent(example[0], seed), what=what, source=source, batch=batch,
                    seq_len=seq_len, dtype=dtype, seed=seed, kv_cache=kv_cache, past=past, _decoding=None)


def _whole_model(fn, tensors, model, tokens, dtype, seed):
    """Turns the exported decoder stack into the whole model's training function: the token
    embedding in front (x = embed_tokens[ids]), the final norm and the vocabulary-parallel
    cross-entropy of the LM head (tied to the embedding when the config ties them) behind; the
    result is the per-token loss. Returns {tp.name: tensor} of the new weights (seed None: the
    checkpoint's or uninitialised ones, for the text only)."""
    c = model.config
    x = fn.args[0][0]
    if not x.name.startswith("%x"):
        raise ExportError("the exported stack does not start with x")
    el = x.dtype
    vocab, hidden = c.vocab_size, c.hidden_size
    fn.args.pop(0)
    ids = fn.arg("ids", (tokens,), "i32", grad=False)
    targets = fn.arg("targets", (tokens,), "i32", grad=False)
    embed = fn.arg("embed_tokens.weight", (vocab, hidden), el, hint="embed")
    norm = fn.arg("norm.weight", (hidden,), el, hint="final_norm")
    tied = bool(getattr(c, "tie_word_embeddings", False))
    head = embed if tied else fn.arg("lm_head.weight", (vocab, hidden), el, hint="lm_head")
    # Arguments: the tokens first, then the tables and weights as they were.
    fn.args = fn.args[-(4 if tied else 5):-(2 if tied else 3)] + fn.args[:-(4 if tied else 5)] + fn.args[-(2 if tied else 3):]
    fn.body.insert(0, f'    {x.name} = "tp.embedding"({ids.name}, {embed.name}) {{parallel = "vocab"}}\n'
                      f'        : ({ids.type}, {embed.type}) -> {x.type}')
    fn.body.insert(0, "    // model.embed_tokens")
    y = fn.results[0][0]
    fn.comment("model.norm, lm_head and the loss")
    (h,) = fn.op("tp.rmsnorm", [y, norm], {"eps": emit.f32(c.rms_norm_eps)}, [(y.shape, el)], ["final"])
    loss, _ = fn.op("tp.cross_entropy", [h, head, targets], {"parallel": emit.string("vocab")},
                    [((tokens,), "f32"), ((tokens,), "f32")], ["loss", "lse"])
    fn.results = [(loss, "loss")]
    return end_weights(model, seed)


def end_weights(model, seed):
    """{tp.name: tensor} of the model's ends: the embedding table, the final norm and an untied
    LM head. With a seed (random weights) they are drawn first: embedding rows N(0, 1), the head std
    1/sqrt(H), the norm 1; None keeps the checkpoint's."""
    c = model.config
    inner = getattr(model, "model", model)
    vocab, hidden = c.vocab_size, c.hidden_size
    tied = bool(getattr(c, "tie_word_embeddings", False))
    out = {}
    g = torch.Generator().manual_seed(1000 + (seed or 0))
    with torch.no_grad():
        if seed is not None:
            inner.embed_tokens.weight.copy_(torch.randn(vocab, hidden, generator=g))
            inner.norm.weight.fill_(1.0)
            if not tied:
                model.lm_head.weight.copy_(torch.randn(vocab, hidden, generator=g) / math.sqrt(hidden))
        out["embed_tokens.weight"] = inner.embed_tokens.weight.detach().clone()
        out["norm.weight"] = inner.norm.weight.detach().clone()
        if not tied:
            out["lm_head.weight"] = model.lm_head.weight.detach().clone()
    return out


def _mark_layers(body):
    """tp.layer = i on every op of decoder layer i (tp.recompute recomputes each layer)."""
    out, layer = [], None
    for line in body:
        if line.lstrip().startswith("// layers."):
            layer = int(line.split("layers.")[1].split(".")[0])
        elif layer is not None and '"tp.' in line:
            head, _, rest = line.partition(")")
            if rest.startswith(" {"):
                line = f"{head}) {{tp.layer = {layer} : i64, {rest[2:]}"
            else:
                line = f"{head}) {{tp.layer = {layer} : i64}}{rest}"
        out.append(line)
    return out


def write(result, output, weights_dir):
    with open(output, "w", encoding="utf-8") as f:
        f.write(result.text)
    if weights_dir:
        os.makedirs(weights_dir, exist_ok=True)
        weights.save(os.path.join(weights_dir, "weights.safetensors"), {**result.weights(), **(result.ends or {})})
        if result.ends is None:
            weights.save(os.path.join(weights_dir, "inputs.safetensors"), result.inputs())
        else:  # the whole model's per-step inputs are the tokens; the tables stay
            weights.save(os.path.join(weights_dir, "inputs.safetensors"), {"cos": result.example[1],
                                                                            "sin": result.example[2]})
        names = _checkpoint_names(result.source)
        lines = weights.rules(result.tensors, names) if names else None
        if lines:
            with open(os.path.join(weights_dir, "weight_names.txt"), "w", encoding="utf-8") as f:
                f.write(f"# tpc-run --weight-names rules: {output}'s arguments from {result.source}'s tensors\n")
                f.write("\n".join(lines) + "\n")


def _checkpoint_names(source):
    """The tensor names of a checkpoint directory, or None."""
    if not os.path.isdir(source):
        return None
    from safetensors import safe_open
    names = set()
    for f in os.listdir(source):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(source, f), "pt") as st:
                names.update(st.keys())
    return names


def parser(prog, description):
    # Run as an installed command (tpc-export, tpc-check: frontend/pyproject.toml), help and usage
    # name that command rather than `python -m ...`.
    command = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if command.startswith("tpc-"):
        prog = command
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help=f"a built-in config ({', '.join(models.BUILTIN)}), a config.json (random "
                                 "weights) or a checkpoint directory (config.json and safetensors weights)")
    p.add_argument("--plan", default="megatron",
                   help="megatron (default), none, hf (the config's base_model_tp_plan) or a JSON file of "
                        "module path patterns to styles (docs/frontend.md)")
    p.add_argument("--batch", type=int, default=2, help="sequences B (default 2)")
    p.add_argument("--seq-len", type=int, default=16, help="tokens per sequence S (default 16)")
    p.add_argument("--dtype", choices=sorted(models.DTYPES), default="bf16")
    p.add_argument("--seed", type=int, default=0, help="seed of random weights and example inputs")
    p.add_argument("--tp", type=int, nargs="+", default=[], metavar="N",
                   help="check that the plan runs at these TP degrees (heads, FFN width divisible)")
    p.add_argument("--kv-cache", type=int, metavar="C",
                   help="export a decoding step: --seq-len new tokens per sequence over KV caches of C rows")
    p.add_argument("--past", type=int, metavar="P",
                   help="with --kv-cache: cached tokens per sequence of the example inputs (default C - seq-len)")
    return p


def main(argv=None):
    p = parser("python -m tpc_torch.export", __doc__)
    p.add_argument("-o", "--output", required=True, help="the tp module to write (.mlir)")
    p.add_argument("--weights", metavar="DIR", help="write DIR/weights.safetensors (the weights by tp.name), "
                   "DIR/inputs.safetensors (x, cos, sin and the cotangent y_grad of training steps; with "
                   "--kv-cache the caches and cache_len instead of y_grad) and, "
                   "for a checkpoint, DIR/weight_names.txt")
    p.add_argument("--whole", action="store_true",
                   help="the whole model's training function: token ids and targets in, the per-token loss out "
                        "(embedding, decoder layers, final norm, LM head and cross-entropy; tpc-train runs it)")
    p.add_argument("--recompute", action="store_true",
                   help="mark each layer's ops with tp.layer and set tp.recompute (training recomputes layers)")
    p.add_argument("--generate", action="store_true",
                   help="the whole model for generation (tpc-generate): @decode draws one token for each of --batch "
                        "sequences, @prefill caches --prefill-chunk prompt tokens of one; needs --kv-cache")
    p.add_argument("--prefill-chunk", type=int, default=32, metavar="P",
                   help="with --generate: prompt tokens per @prefill call (default 32)")
    args = p.parse_args(argv)
    if args.generate:
        return _main_generate(args)
    try:
        result = export(args.model, args.plan, args.batch, args.seq_len, args.dtype, args.seed, args.tp,
                        args.recompute, weights=args.weights is not None, kv_cache=args.kv_cache, past=args.past,
                        whole=args.whole)
        write(result, args.output, args.weights)
    except ExportError as e:
        print(f"tpc_torch.export: error: {e}", file=sys.stderr)
        return 2
    print(f"tpc_torch.export: {args.output}: {result.what}, plan {result.plan.name}, "
          f"{len(result.tensors)} weight arguments")
    return 0


def _main_generate(args):
    from .export_generate import generate
    if args.kv_cache is None or args.whole:
        print("tpc_torch.export: error: --generate needs --kv-cache C (the rows per sequence) and no --whole",
              file=sys.stderr)
        return 2
    try:
        text, dec, ends, tables = generate(args.model, args.plan, args.batch, args.kv_cache, args.prefill_chunk,
                                           args.dtype, args.seed, args.weights is not None)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        if args.weights:
            os.makedirs(args.weights, exist_ok=True)
            weights.save(os.path.join(args.weights, "weights.safetensors"), {**dec.weights(), **ends})
            weights.save(os.path.join(args.weights, "inputs.safetensors"), tables)
    except ExportError as e:
        print(f"tpc_torch.export: error: {e}", file=sys.stderr)
        return 2
    print(f"tpc_torch.export: {args.output}: {dec.what} for generation, plan {dec.plan.name}, "
          f"{len(dec.tensors) + len(ends)} weight arguments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
