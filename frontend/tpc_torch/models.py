"""Models the frontend exports: built-in tiny configurations, a config.json with seeded random
weights, or a checkpoint directory; the decoder stack that is exported (hidden states in, hidden
states out, the rotary tables as inputs); and the inputs the checks feed it."""
import json
import math
import os

import torch

from .errors import ExportError

# Built-in configurations: small enough to export, run and check in seconds on a CPU.
BUILTIN = {
    "llama-tiny": dict(model_type="llama", hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                       max_position_embeddings=1024, rms_norm_eps=1e-5),
    "mixtral-tiny": dict(model_type="mixtral", hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                         max_position_embeddings=1024, rms_norm_eps=1e-5, num_local_experts=8,
                         num_experts_per_tok=2, sliding_window=None),
}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def _config(source):
    """The transformers config of a built-in name, a config.json file or a directory holding one."""
    from transformers import AutoConfig

    if source in BUILTIN:
        fields = dict(BUILTIN[source])
        return AutoConfig.for_model(fields.pop("model_type"), **fields), None
    path = source
    if os.path.isdir(source):
        path = os.path.join(source, "config.json")
    if not os.path.isfile(path):
        raise ExportError(f"model '{source}' is neither a built-in name ({', '.join(BUILTIN)}), "
                          "a config.json nor a directory with one")
    try:
        with open(path, encoding="utf-8") as f:
            fields = json.load(f)
        model_type = fields.pop("model_type")
    except (OSError, ValueError, KeyError) as e:
        raise ExportError(f"{path}: not a Hugging Face config.json ({e})") from None
    for key in ("architectures", "transformers_version", "torch_dtype", "dtype"):
        fields.pop(key, None)
    try:
        config = AutoConfig.for_model(model_type, **fields)
    except ValueError as e:
        raise ExportError(f"{path}: {str(e).splitlines()[0]}") from None
    return config, (source if os.path.isdir(source) else None)


def _has_weights(directory):
    return directory and any(n.endswith(".safetensors") or n == "model.safetensors.index.json"
                             for n in os.listdir(directory))


def load(source, dtype="bf16", seed=0, init=True):
    """Builds the causal LM of `source` in eval mode with use_cache=False, SDPA attention and the
    batched experts implementation (both traceable by torch.export). A checkpoint directory keeps
    its weights; otherwise the decoder layers get seeded random weights (init_random), or, with
    init=False, are left uninitialised (when only the module text is wanted: tracing never reads
    them). Returns (model, description)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    config, directory = _config(source)
    config.use_cache = False
    kwargs = dict(dtype=DTYPES[dtype], attn_implementation="sdpa")
    if hasattr(config, "num_local_experts") or hasattr(config, "num_experts"):
        kwargs["experts_implementation"] = "batched_mm"
    try:
        if _has_weights(directory):
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            model = AutoModelForCausalLM.from_pretrained(directory, config=config, **kwargs)
            what = f"{source} (checkpoint)"
        else:
            model = _skeleton(AutoModelForCausalLM, config, kwargs)
            if init:
                init_random(layers_of(model), seed)
            what = f"{source} (random weights, seed {seed})"
    except (ValueError, KeyError, OSError) as e:
        raise ExportError(f"{source}: transformers cannot build this model: {str(e).splitlines()[0]}") from None
    model.eval()
    return model, what


def _skeleton(auto, config, kwargs):
    """The model with uninitialised parameters: built on the meta device (no Hugging Face weight
    initialisation, which takes most of a minute for a 1B-parameter model), then given CPU
    storage. Only the decoder layers are exported and init_random fills them; the buffers that
    construction computes (the rotary frequencies) are rebuilt on the CPU. Every float buffer is
    NaN until rebuilt (to_empty leaves memory uninitialised, whose bits a check could not trust),
    so one the export needs and nothing rebuilt is refused, every run alike; the embedding and LM
    head's (Gemma's embed_scale) are not exported and not checked. A head tied to the embedding is
    tied again after to_empty, which gives every parameter its own storage."""
    with torch.device("meta"):
        model = auto.from_config(config, **kwargs)
    model = model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gives each parameter its own storage: a tied head would be garbage
    with torch.no_grad():
        for buf in model.buffers():
            if buf.is_floating_point():
                buf.fill_(float("nan"))
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if name == "rotary_emb":
                setattr(parent, name, type(child)(config=child.config if hasattr(child, "config") else config))
    unexported = ("embed_tokens", "lm_head")
    for name, buf in model.named_buffers():
        if any(part in unexported for part in name.split(".")):
            continue
        if buf.is_floating_point() and not torch.isfinite(buf).all():
            raise ExportError(f"{type(model).__name__}: buffer {name} is not rebuilt after meta construction")
    return model


def layers_of(model):
    """The decoder layers (an nn.ModuleList) of a causal LM."""
    inner = getattr(model, "model", model)
    layers = getattr(inner, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ExportError(f"{type(model).__name__} has no decoder layers at model.layers")
    return layers


def init_random(layers, seed):
    """Seeded weights that make every block matter: each matrix has std 1/sqrt(fan_in), so a layer's
    contribution to the residual stream is as large as the stream (Hugging Face's default init,
    std 0.02, leaves y ≈ x and would hide errors), and norm weights are 1 + N(0, 0.1²) so that a
    misplaced gamma shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(layers.named_parameters()):
            if p.dim() == 1 and "norm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))  # biases
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))


class DecoderStack(torch.nn.Module):
    """The exported function: x[B*S, H] -> the hidden states after every decoder layer, [B*S, H],
    with the rotary tables cos, sin[B*S, D] as inputs. B sequences of S tokens, causal, no cache."""

    def __init__(self, layers, batch, seq_len):
        super().__init__()
        self.layers = layers
        self.batch, self.seq_len = batch, seq_len

    def forward(self, x, cos, sin, cache=None):
        """cache (a transformers Cache, not traced) receives every layer's rotated keys and values."""
        b, s = self.batch, self.seq_len
        h = x.view(b, s, -1)
        rotary = (cos.view(b, s, -1), sin.view(b, s, -1))
        for layer in self.layers:
            if cache is None:
                h = layer(h, attention_mask=None, position_embeddings=rotary)
            else:
                h = layer(h, attention_mask=None, position_embeddings=rotary, cache=cache, use_cache=True)
            if isinstance(h, tuple):
                h = h[0]
        return h.reshape(b * s, -1)


def rotary_tables(model, batch, seq_len, dtype, start=0):
    """cos, sin [B*S, D] of positions start..start+S-1 in every sequence, from the model's own
    rotary module (so every RoPE scaling type the model knows is in the tables)."""
    inner = getattr(model, "model", model)
    rotary = getattr(inner, "rotary_emb", None)
    if rotary is None:
        raise ExportError(f"{type(model).__name__} has no rotary embedding at model.rotary_emb")
    positions = torch.arange(start, start + seq_len).unsqueeze(0).expand(batch, seq_len)
    probe = torch.zeros(1, dtype=DTYPES[dtype])
    with torch.no_grad():
        cos, sin = rotary(probe, positions)
    return cos.reshape(batch * seq_len, -1).contiguous(), sin.reshape(batch * seq_len, -1).contiguous()


def cotangent(like, seed=0):
    """y_grad ~ N(0, 1), seeded: the output cotangent of training steps (the gradient of the loss
    sum(y * y_grad) with respect to y)."""
    g = torch.Generator().manual_seed(seed + 2)
    return torch.randn(like.shape, generator=g).to(like.dtype)


def example_inputs(model, batch, seq_len, dtype, seed=0):
    """(x, cos, sin): x ~ N(0, 1) in the model's dtype, seeded, and the rotary tables."""
    hidden = model.config.hidden_size
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch * seq_len, hidden, generator=g).to(DTYPES[dtype])
    cos, sin = rotary_tables(model, batch, seq_len, dtype)
    return x, cos, sin


def rows_of_sequences(t, batch, length, start, count):
    """Rows start..start+count-1 of each of the batch sequences of length rows in t, stacked."""
    return torch.cat([t[b * length + start:b * length + start + count] for b in range(batch)]).contiguous()


def decode_example(model, layers, batch, past, new, capacity, dtype, seed=0):
    """A decoding step of new tokens per sequence after past cached ones, and its reference:
    PyTorch runs the whole sequences (past + new tokens, causal) through the layers with a
    transformers DynamicCache; by causality their last new rows are the step's outputs. Returns
    (example, extra, reference): example = (x, cos, sin) of the new tokens (their positions'
    tables); extra = each layer's k_cache and v_cache [B*C, Hkv*D] (the first past rows of each
    sequence's C = capacity rows hold its cached rotated keys and values, the rest zeros) and
    cache_len [B] = past; reference = y and each layer's new k and v [B*new, Hkv*D]."""
    from transformers import DynamicCache

    total = past + new
    x, cos, sin = example_inputs(model, batch, total, dtype, seed)
    full = DecoderStack(layers, batch, total)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        y = full(x, cos, sin, cache=cache)
    example = tuple(rows_of_sequences(t, batch, total, past, new) for t in (x, cos, sin))
    extra = {"cache_len": torch.full((batch,), past, dtype=torch.int32)}
    ref = {"y": rows_of_sequences(y, batch, total, past, new)}
    for i, layer in enumerate(cache.layers):
        for kind, t in (("k", layer.keys), ("v", layer.values)):  # [B, Hkv, past + new, D]
            rows = t.permute(0, 2, 1, 3).reshape(batch, total, -1)  # heads side by side per token
            stored = torch.zeros(batch, capacity, rows.shape[-1], dtype=rows.dtype)
            stored[:, :past] = rows[:, :past]
            name = f"layers.{i}.self_attn.{kind}"
            extra[f"{name}_cache"] = stored.reshape(batch * capacity, -1).contiguous()
            ref[name] = rows[:, past:].reshape(batch * new, -1).contiguous()
    return example, extra, ref
