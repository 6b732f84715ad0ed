#!/usr/bin/env python3
"""Writes a tp module: a stack of N MLP or MoE layers, for tests, benchmarks and trying tpc on a
model-sized function without writing it by hand.

  python3 tools/gen_stack.py --layers 80 --hidden 8192 --ffn 28672 --tokens 4096 > stack.mlir
  tpc-run stack.mlir --pipeline train --mesh tp=8 --sequence-parallel --count-only

Layer i (arguments named per layer, so a checkpoint's tensors map to them one to one):
  mlp  FC1 w1_{i} [2F, H] (column-parallel, gate rows then up rows) -> SwiGLU -> FC2 w2_{i} [H, F]
       (row-parallel)
  moe  router_{i} [E, H] -> top-k routing -> permute -> grouped FC1 w1_{i} [E, 2F, H] -> SwiGLU ->
       grouped FC2 w2_{i} [E, H, F] -> weighted unpermute (docs/examples/moe.mlir's block)
--block plain (default) chains the layers (y_i = layer_i(y_{i-1})); --block llama adds an RMSNorm
with its own gamma_{i} [H] before each layer and the residual: y_i = y_{i-1} + layer_i(norm(y_{i-1})).
The function takes x [T, H] and the weights, returns y [T, H]; all bf16. --recompute marks layer
i's ops with tp.layer = i and sets tp.recompute = true: tp-autodiff then recomputes each layer right
before its gradients (the residual stream is what it keeps).
"""
import argparse
import sys


def _t(*dims, dtype="bf16"):
    return "tensor<" + "x".join(str(d) for d in dims) + f"x{dtype}>"


def _layer(line, i):
    """|line| (one op) with tp.layer = i in its attributes."""
    close = line.index(")", line.index("(", line.index('"tp.')))
    if line[close + 1:].startswith(" {"):
        return line[:close + 3] + f"tp.layer = {i} : i64, " + line[close + 3:]
    return line[:close + 1] + f" {{tp.layer = {i} : i64}}" + line[close + 1:]


def stack(n, h, f, numerics, tokens=16, kind="mlp", experts=8, top_k=2, block="plain", chunks=8, recompute=False):
    """The module text (see the module docstring)."""
    T, E, k = tokens, experts, top_k
    x = _t(T, h)
    args = [f'%x: {x} {{tp.name = "x"}}']
    body, cur = [], "%x"

    def arg(name, ty):
        args.append(f'%{name}: {ty} {{tp.name = "{name}"}}')

    for i in range(n):
        first = len(body)
        inp = cur
        if block == "llama":
            arg(f"gamma_{i}", _t(h))
            body.append(f'    %n{i} = "tp.rmsnorm"({cur}, %gamma_{i}) {{eps = 1.0e-05 : f32}} : ({x}, {_t(h)}) -> {x}')
            inp = f"%n{i}"
        if kind == "mlp":
            arg(f"w1_{i}", _t(2 * f, h))
            arg(f"w2_{i}", _t(h, f))
            body.append(f'    %h{i} = "tp.linear"({inp}, %w1_{i}) {{parallel = "column"}} : ({x}, {_t(2 * f, h)}) -> '
                        f'{_t(T, 2 * f)}')
            body.append(f'    %a{i} = "tp.glu"(%h{i}) {{kind = "swiglu"}} : ({_t(T, 2 * f)}) -> {_t(T, f)}')
            body.append(f'    %o{i} = "tp.linear"(%a{i}, %w2_{i}) {{parallel = "row"}} : ({_t(T, f)}, {_t(h, f)}) -> {x}')
        else:
            R = T * k
            arg(f"router_{i}", _t(E, h))
            arg(f"w1_{i}", _t(E, 2 * f, h))
            arg(f"w2_{i}", _t(E, h, f))
            body += [
                f'    %l{i} = "tp.linear"({inp}, %router_{i}) : ({x}, {_t(E, h)}) -> {_t(T, E)}',
                f'    %idx{i}, %wts{i} = "tp.moe_route"(%l{i}) {{top_k = {k} : i64, normalize = true}} : '
                f'({_t(T, E)}) -> ({_t(T, k, dtype="i32")}, {_t(T, k, dtype="f32")})',
                f'    %xp{i}, %sz{i}, %map{i} = "tp.moe_permute"({inp}, %idx{i}) : ({x}, {_t(T, k, dtype="i32")}) -> '
                f'({_t(R, h)}, {_t(E, dtype="i64")}, {_t(R, dtype="i32")})',
                f'    %h{i} = "tp.grouped_linear"(%xp{i}, %w1_{i}, %sz{i}) {{parallel = "column"}} : '
                f'({_t(R, h)}, {_t(E, 2 * f, h)}, {_t(E, dtype="i64")}) -> {_t(R, 2 * f)}',
                f'    %a{i} = "tp.glu"(%h{i}) {{kind = "swiglu"}} : ({_t(R, 2 * f)}) -> {_t(R, f)}',
                f'    %g{i} = "tp.grouped_linear"(%a{i}, %w2_{i}, %sz{i}) {{parallel = "row"}} : '
                f'({_t(R, f)}, {_t(E, h, f)}, {_t(E, dtype="i64")}) -> {_t(R, h)}',
                f'    %o{i} = "tp.moe_unpermute"(%g{i}, %map{i}, %wts{i}) : '
                f'({_t(R, h)}, {_t(R, dtype="i32")}, {_t(T, k, dtype="f32")}) -> {x}',
            ]
        if recompute:  # the layer's ops, not the residual add: its output is what the layer keeps
            body[first:] = [_layer(line, i) for line in body[first:]]
        if block == "llama":
            body.append(f'    %y{i} = "tp.add"({cur}, %o{i}) : ({x}, {x}) -> {x}')
            cur = f"%y{i}"
        else:
            cur = f"%o{i}"
    return "\n".join([
        f'module attributes {{tp.numerics = "{numerics}", tp.chunks = {chunks} : i64'
        + (", tp.recompute = true" if recompute else "") + "} {",
        "  func.func @stack(" + ", ".join(args) + f') -> ({x} {{tp.name = "y"}}) {{',
        *body,
        f"    return {cur} : {x}",
        "  }",
        "}",
        "",
    ])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--kind", choices=["mlp", "moe"], default="mlp")
    ap.add_argument("--block", choices=["plain", "llama"], default="plain")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=128, help="the FFN width F (per expert for moe)")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--numerics", choices=["fast", "invariant", "exact"], default="fast")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--recompute", action="store_true",
                    help="tp.recompute = true and tp.layer = i on layer i's ops: the training step recomputes "
                         "each layer before its gradients instead of keeping its activations")
    a = ap.parse_args()
    if a.layers < 1 or a.hidden < 1 or a.ffn < 1 or a.tokens < 1 or a.experts < 1 or not 1 <= a.top_k <= a.experts:
        ap.error("sizes must be positive and 1 <= --top-k <= --experts")
    sys.stdout.write(stack(a.layers, a.hidden, a.ffn, a.numerics, a.tokens, a.kind, a.experts, a.top_k, a.block,
                           a.chunks, a.recompute))


if __name__ == "__main__":
    main()
