"""MLIR text of a tp module in generic form (docs/dialect.md, "Definition and syntax"): function
arguments with their tp.name, ops with attribute dictionaries and function types, comments that
name the Hugging Face module each group of ops comes from."""
import os
import re

import torch

from .errors import ExportError

ELEMENT = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.int32: "i32",
           torch.int64: "i64"}


def _dialect_ops():
    """The op names dialect/tp.irdl.mlir defines (the dialect's only definition), or None outside a
    source checkout. Ops are spelt here as strings; this keeps a renamed op from going unnoticed."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dialect", "tp.irdl.mlir")
    try:
        with open(path, encoding="utf-8") as f:
            return {"tp." + name for name in re.findall(r"irdl\.operation @(\w+)", f.read())}
    except OSError:
        return None


DIALECT_OPS = _dialect_ops()


class Value:
    """An SSA value: its name ('%q') and tensor type."""

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(int(d) for d in shape), dtype

    @property
    def type(self):
        return tensor_type(self.shape, self.dtype)


def tensor_type(shape, dtype):
    return "tensor<" + "x".join(str(d) for d in shape) + ("x" if shape else "") + dtype + ">"


def string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def integer(i):
    return f"{int(i)} : i64"


def f32(x):
    """A float attribute: MLIR wants a decimal point in the mantissa (1.0e-05, not 1e-05)."""
    text = repr(float(x))
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}{e}{exponent} : f32"


def boolean(b):
    return "true" if b else "false"


def arg_hint(tp_name):
    """An argument's SSA name from its tp.name: layers.0.self_attn.q_proj.weight -> l0.q_proj."""
    return tp_name.replace("layers.", "l").replace(".weight", "").replace("self_attn.", "")


class Function:
    """One func.func being written: arguments, a body of ops, the results."""

    def __init__(self, name):
        self.name = name
        self.args = []  # (Value, attribute text)
        self.body = []
        self.results = []  # (Value, tp.name)
        self._names = set()
        self._count = 0

    def _fresh(self, hint):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, n = base, 1
        while name in self._names:
            n += 1
            name = f"{base}{n}"
        self._names.add(name)
        return "%" + name

    def arg(self, tp_name, shape, dtype, grad=True, hint=None):
        """A new argument named tp_name; grad=False marks it {tp.grad = false} (no gradient)."""
        v = Value(self._fresh(hint or tp_name.split(".")[-1]), shape, dtype)
        attrs = f"tp.name = {string(tp_name)}" + ("" if grad else ", tp.grad = false")
        self.args.append((v, attrs))
        return v

    def comment(self, text):
        self.body.append(f"    // {text}")

    def op(self, name, operands, attrs, results, hints=None):
        """Appends `"tp.<name>"(operands) {attrs}` with result types results = [(shape, dtype)];
        attrs maps attribute names to their text (see string, integer, f32, boolean). Returns the
        result Values."""
        if DIALECT_OPS is not None and name not in DIALECT_OPS:
            raise ExportError(f"'{name}' is not an op of dialect/tp.irdl.mlir")
        hints = hints or [name.split(".")[-1]] * len(results)
        outs = [Value(self._fresh(h), s, d) for h, (s, d) in zip(hints, results)]
        attr_text = ""
        if attrs:
            attr_text = " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
        lhs = ", ".join(v.name for v in outs)
        in_types = ", ".join(v.type for v in operands)
        out_types = ", ".join(v.type for v in outs)
        if len(outs) > 1:
            out_types = f"({out_types})"
        self.body.append(f"    {lhs} = \"{name}\"({', '.join(v.name for v in operands)}){attr_text}\n"
                         f"        : ({in_types}) -> {out_types}")
        return outs

    def ret(self, value, tp_name):
        self.results.append((value, tp_name))

    def text(self):
        args = ",\n".join(f"      {v.name}: {v.type} {{{a}}}" for v, a in self.args)
        res = ", ".join(f"{v.type} {{tp.name = {string(n)}}}" for v, n in self.results)
        ret_vals = ", ".join(v.name for v, _ in self.results)
        ret_types = ", ".join(v.type for v, _ in self.results)
        return (f"  func.func @{self.name}(\n{args})\n      -> ({res}) {{\n" + "\n".join(self.body) +
                f"\n    return {ret_vals} : {ret_types}\n  }}\n")


def module_text(function, header_lines, module_attrs=None):
    """The whole file: comment lines, then a module holding the function."""
    head = "".join(f"// {line}\n" for line in header_lines)
    attrs = ""
    if module_attrs:
        attrs = " attributes {" + ", ".join(f"{k} = {v}" for k, v in module_attrs.items()) + "}"
    return f"{head}module{attrs} {{\n{function.text()}}}\n"
