"""python -m tpc_torch.export MODEL --generate: a whole model's generation module (tpc-generate).

One module, two functions over the same weights and KV caches:

  @decode   B = --batch sequences (slots) of one new token each: ids[B] and positions[B] (i32),
            the embedding, every decoder layer reading its caches (tp.attention_kvcache) and
            writing the new keys and values into them (tp.kvcache_write), the final norm, the LM
            head's logits, tp.sample (seed[B] i64, request[B] i32, temperature[B] and top_p[B] f32,
            top_k[B] i32; the row's Philox position is positions[b], the context's last token) and
            tp.cross_entropy of the drawn token: results token[B] (i32), loss[B] (f32: the drawn
            token's negative log-probability, the trainer's own per-token loss) and every cache.
  @prefill  one sequence of P = --prefill-chunk prompt tokens: the layers only, writing the caches
            (a prompt's last chunk is padded; its padded rows land after the prompt's cache_len
            and are overwritten by the tokens that follow).

Both read cache_len[B] (i32, the tokens each sequence has cached), the rotary tables rope_cos and
rope_sin [C, D] of positions 0..C-1 (C = --kv-cache) and per layer layers.<i>.self_attn.k_cache and
.v_cache [B*C, Hkv*D] (prefill: [C, Hkv*D], one sequence's rows); the caches are results too, under
the same names, for the caller to pass back in place."""
from . import emit, models
from .errors import ExportError


def _arg(fn, tp_name):
    for v, attrs in fn.args:
        if f'tp.name = {emit.string(tp_name)}' in attrs:
            return v
    raise ExportError(f"the exported stack has no argument {tp_name}")


def _generation_fn(fn, model, batch, seq_len, cache, decode):
    """Turns an exported decoding stack (x, cos, sin, the weights, the caches and cache_len in; y
    and each layer's new k and v out) into @decode or @prefill."""
    c = model.config
    tokens = batch * seq_len
    x, cos, sin = _arg(fn, "x"), _arg(fn, "cos"), _arg(fn, "sin")
    el = x.dtype
    fn.args = [(v, a) for v, a in fn.args if v not in (x, cos, sin)]
    ids = fn.arg("ids", (tokens,), "i32", grad=False)
    positions = fn.arg("positions", (tokens,), "i32", grad=False)
    tables = [fn.arg(f"rope_{n}", (cache, cos.shape[1]), cos.dtype, grad=False) for n in ("cos", "sin")]
    embed = fn.arg("embed_tokens.weight", (c.vocab_size, c.hidden_size), el, hint="embed")
    fn.args = fn.args[-5:] + fn.args[:-5]
    front = ["    // model.embed_tokens and the rotary tables' rows of the positions",
             f'    {x.name} = "tp.embedding"({ids.name}, {embed.name}) {{parallel = "vocab"}}\n'
             f'        : ({ids.type}, {embed.type}) -> {x.type}']
    for table, v in zip(tables, (cos, sin)):
        front.append(f'    {v.name} = "tp.embedding"({positions.name}, {table.name})\n'
                     f'        : ({positions.type}, {table.type}) -> {v.type}')
    fn.body[:0] = front
    y, kv = fn.results[0][0], fn.results[1:]
    cache_len = _arg(fn, "cache_len")
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    fn.comment("the new keys and values into the caches")
    outs = []
    for value, name in kv:
        store = _arg(fn, f"{name}_cache")
        (w,) = fn.op("tp.kvcache_write", [store, value, cache_len],
                     {"seq_len": emit.integer(seq_len), "head_dim": emit.integer(head_dim)},
                     [(store.shape, store.dtype)], [emit.arg_hint(f"{name}_cache") + "_new"])
        outs.append((w, f"{name}_cache"))
    fn.results = []
    if decode:
        norm = fn.arg("norm.weight", (c.hidden_size,), el, hint="final_norm")
        tied = bool(getattr(c, "tie_word_embeddings", False))
        head = embed if tied else fn.arg("lm_head.weight", (c.vocab_size, c.hidden_size), el, hint="lm_head")
        rows = [fn.arg(n, (batch,), t, grad=False) for n, t in
                (("seed", "i64"), ("request", "i32"), ("temperature", "f32"), ("top_k", "i32"), ("top_p", "f32"))]
        seed, request, temperature, top_k, top_p = rows
        fn.comment("model.norm, lm_head, the draw and its log-probability")
        (h,) = fn.op("tp.rmsnorm", [y, norm], {"eps": emit.f32(c.rms_norm_eps)}, [(y.shape, el)], ["final"])
        (logits,) = fn.op("tp.linear", [h, head], {"parallel": emit.string("column")},
                          [((tokens, c.vocab_size), el)], ["logits"])
        (token,) = fn.op("tp.sample", [logits, seed, request, positions, temperature, top_k, top_p], {},
                         [((tokens,), "i32")], ["token"])
        loss, _ = fn.op("tp.cross_entropy", [h, head, token], {"parallel": emit.string("vocab")},
                        [((tokens,), "f32"), ((tokens,), "f32")], ["loss", "lse"])
        fn.results = [(token, "token"), (loss, "loss")]
    fn.results += outs
    return fn


def generate(source, plan, batch, cache, chunk, dtype, seed, weights):
    """(module text, the decode export, {tp.name: tensor} of the ends' weights, the rotary tables)."""
    from .export import end_weights, export, describe

    if batch < 1 or chunk < 1:
        raise ExportError("--generate needs --batch >= 1 sequences and --prefill-chunk >= 1 tokens")
    if cache < chunk:
        raise ExportError(f"--kv-cache {cache} must hold at least one prefill chunk of {chunk} tokens")
    dec = export(source, plan, batch, 1, dtype, seed, weights=weights, kv_cache=cache, past=0)
    pre = export(source, plan, 1, chunk, dtype, seed, weights=weights, kv_cache=cache, past=0)
    dec_fn = _generation_fn(dec.fn, dec.model, batch, 1, cache, True)
    pre_fn = _generation_fn(pre.fn, pre.model, 1, chunk, cache, False)
    dec_fn.name, pre_fn.name = "decode", "prefill"
    ends = end_weights(dec.model, seed if weights else None)
    cos, sin = models.rotary_tables(dec.model, 1, cache, dtype)
    header = [f"Exported by tpc_torch from {dec.what}: the whole model for generation, "
              f"{describe(dec.model, batch, 1, dtype)}; plan {dec.plan.name}.",
              f"@decode: one token for each of {batch} sequences; @prefill: {chunk} prompt tokens of one sequence;",
              f"KV caches of {cache} rows per sequence (docs/generation.md)."]
    text = "".join(f"// {line}\n" for line in header) + "module {\n" + dec_fn.text() + pre_fn.text() + "}\n"
    return text, dec, ends, {"rope_cos": cos, "rope_sin": sin}
