"""python -m tpc_torch.check: tpc against PyTorch on an exported model.

Exports MODEL, writes one argument file (x, cos, sin, the weights and, for training steps, the
output cotangent y_grad), runs tpc-run on the CPU backend at every TP degree and compares:

  fast       y (and with --train every gradient) against PyTorch eager running the same Hugging
             Face layers on the same inputs, in the same dtype: the largest |error| must be within
             the tolerance times the largest |reference| (bf16: 3% for y, 5% for gradients; f32:
             1e-5 for both). For bf16 the error of PyTorch's own bf16 run against an f32 run of the
             same weights is printed beside it, as the yardstick.
  invariant  the hashes of every result are bitwise equal at every TP degree (and y is checked
             against PyTorch as in fast).

Gradients: the training step (tpc-run --pipeline train) takes the cotangent of y as the argument
y_grad; PyTorch's are those of the loss sum(y * y_grad).

Decoding (--kv-cache C, --past P): the step of --seq-len new tokens per sequence after P cached
ones, its caches filled with the rotated keys and values PyTorch stored (a transformers
DynamicCache) when it ran the whole sequences; y and each layer's new k and v must match
PyTorch's last rows of that run (y's tolerance for all). Exit status 0 when every check passes,
1 when one fails, 2 on an error (an unsupported model, a TP degree the plan cannot run).

--stage DIR runs nothing: it writes the same check for a machine without MLIR or transformers
(the GPU machine): DIR/args.safetensors, PyTorch's results DIR/ref-<step>.safetensors (and the
f32 yardstick DIR/yard-<step>.safetensors for bf16), one module per step, numerics and TP degree
compiled by tpc-compile, and DIR/stage.txt listing them with their tolerances;
test/gpu/frontend_check.py runs them there (tpc-run --backend cuda) and compares the same way."""
import copy
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file

from . import convert_moe
from . import export as exporter
from . import verdict
from . import weights
from .errors import ExportError

TOLERANCE = verdict.TOLERANCE


def find_tool(name, given):
    """|given|, else |name| on PATH, else the build tree's."""
    if given:
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.normpath(os.path.join(here, "..", "..", "build", "bin", name))
    return shutil.which(name) or built


def reference(result, cotangent, train):
    """PyTorch eager on the exported layers: {'y': ...} and, with train, '<arg>_grad' for x and every
    weight argument (gate_up_proj's the concatenation of gate_proj's and up_proj's)."""
    x, cos, sin = result.example
    root = result.root
    if not train:
        with torch.no_grad():
            return {"y": root(x, cos, sin)}
    root.zero_grad(set_to_none=True)
    xr = x.clone().requires_grad_(True)
    y = root(xr, cos, sin)
    y.backward(cotangent)
    out = {"y": y.detach(), "x_grad": xr.grad}
    out.update(weights.gather(root, result.tensors, grads=True))
    root.zero_grad(set_to_none=True)
    return out


def f32_reference(result, cotangent, train):
    """The same layers, weights and inputs upcast to f32: the yardstick of bf16 errors."""
    root = copy.deepcopy(result.root).float()
    example = tuple(t.float() for t in result.example)
    shadow = exporter.Exported(root=root, example=example, tensors=result.tensors)
    return reference(shadow, cotangent.float(), train)


def error(got, ref):
    """(max |got - ref|, max |ref|), in float64."""
    got, ref = got.double(), ref.double()
    return (got - ref).abs().max().item(), ref.abs().max().item()


def run_tpc(tpc_run, module, args, tp, numerics, train, outputs=None):
    cmd = [tpc_run, module, "--mesh", f"tp={tp}", "--numerics", numerics, "--inputs", args, "--hash"]
    if train:
        cmd += ["--pipeline", "train"]
    if outputs:
        cmd += ["--outputs", outputs]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise ExportError(f"tpc-run at tp={tp} ({numerics}) failed: {message}")
    return proc.stdout.strip().splitlines()


def _compare(label, got, ref, yard, tol_y, tol_g, verbose, others="gradients"):
    """Prints y's line and one line for the other results (the gradients, or a decoding step's k
    and v; each one's with verbose), judged by verdict.judge; returns the number of failed
    comparisons."""
    rows = []
    for name in sorted(ref, key=lambda n: (n != "y", n != "x_grad", n)):
        if name not in got:
            raise ExportError(f"tpc-run's outputs have no '{name}' (they have {', '.join(got)})")
        err, scale = error(got[name], ref[name])
        against = None
        if yard is not None:
            e32, s32 = error(got[name], yard[name])
            against = (e32, error(ref[name], yard[name])[0], s32)
        rows.append((name, verdict.judge(tol_y if name == "y" else tol_g, err, scale, against)))
    for name, j in rows:
        if name == "y" or verbose or not j.ok:
            print(f"{label} {name}: {j.text}: {'ok' if j.ok else 'FAIL'}")
    grads = [r for r in rows if r[0] != "y"]
    if grads:
        print(f"{label} {others}: {verdict.summary(grads, tol_g)}")
    return sum(not j.ok for _, j in rows)


def main(argv=None):
    p = exporter.parser("python -m tpc_torch.check", __doc__)
    p.set_defaults(tp=[1, 2])
    p.add_argument("--numerics", nargs="+", choices=["fast", "invariant"], default=["fast", "invariant"])
    p.add_argument("--train", action="store_true", help="also check training steps (every gradient)")
    # --kv-cache and --past come from the export parser: a decoding step.
    p.add_argument("--tpc-run", help="the tpc-run binary (default: on PATH, else build/bin/tpc-run)")
    p.add_argument("--verbose", action="store_true", help="one line per gradient")
    p.add_argument("--keep", metavar="DIR", help="keep the module, arguments and outputs in DIR")
    p.add_argument("--stage", metavar="DIR", help="write the check for test/gpu/frontend_check.py to DIR instead "
                   "of running it (see above)")
    p.add_argument("--tpc-compile", help="the tpc-compile binary of --stage (default: on PATH, else "
                   "build/bin/tpc-compile)")
    args = p.parse_args(argv)
    if args.stage:
        try:
            return _stage(args, args.stage)
        except ExportError as e:
            print(f"tpc_torch.check: error: {e}", file=sys.stderr)
            return 2
    tpc_run = find_tool("tpc-run", args.tpc_run)
    work = args.keep or tempfile.mkdtemp(prefix="tpc_torch_check.")
    os.makedirs(work, exist_ok=True)
    try:
        return _check(args, tpc_run, work)
    except ExportError as e:
        print(f"tpc_torch.check: error: {e}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _export(args):
    if args.kv_cache and args.train:
        raise ExportError("--train checks training steps; a decoding step (--kv-cache) has no backward")
    return exporter.export(args.model, args.plan, args.batch, args.seq_len, args.dtype, args.seed, args.tp,
                           kv_cache=args.kv_cache, past=args.past)


def _tolerances(result):
    """(y's, the other results') tolerances: a decoding step's k and v get y's."""
    tol_y, tol_g = TOLERANCE[result.dtype]
    return tol_y, tol_y if result.kv_cache else tol_g


def _references(result, train):
    """PyTorch's results of a step and the f32 yardstick (None: none) for the comparisons."""
    if result.kv_cache:
        return result.decoding()[2], None
    ref = reference(result, result.cotangent, train)
    yard = f32_reference(result, result.cotangent, train) if result.dtype == "bf16" else None
    return ref, yard


def torch_routing(root, example):
    """{MoE layer: its chosen experts [T, top_k], sorted per token} of PyTorch eager running |root|
    (the layer is the router's parent, as the exported '<layer>.experts' results name it)."""
    chosen, hooks = {}, []
    for name, mod in root.named_modules():
        if type(mod).__name__ in convert_moe.ROUTERS:
            layer = name.rsplit(".", 1)[0]
            hooks.append(mod.register_forward_hook(
                lambda m, i, o, layer=layer: chosen.__setitem__(layer, o[2].reshape(-1, o[2].shape[-1]).sort(-1).values)))
    try:
        with torch.no_grad():
            root(*example)
    finally:
        for h in hooks:
            h.remove()
    return chosen


def _routing_report(args, result, tpc_run, work):
    """For a model with MoE layers, prints per layer how many tokens' chosen experts differ between
    PyTorch in the run's dtype, PyTorch in f32 and tpc (the first TP degree, each numerics; a
    module that also returns the layers' routing): a routing flip is named as one."""
    torch_run = torch_routing(result.root, result.example)
    if not torch_run:
        return
    f32 = torch_routing(copy.deepcopy(result.root).float(), tuple(t.float() for t in result.example)) \
        if result.dtype != "f32" else None
    probe = exporter.export(args.model, args.plan, args.batch, args.seq_len, args.dtype, args.seed, (),
                            weights=False, probe_routing=True)
    module = os.path.join(work, "routing.mlir")
    exporter.write(probe, module, None)
    tpc = {}
    for numerics in args.numerics:
        out = os.path.join(work, f"routing-{numerics}.safetensors")
        run_tpc(tpc_run, module, os.path.join(work, "args.safetensors"), args.tp[0], numerics, False, out)
        tpc[numerics] = load_file(out)

    def differ(a, b):
        return int((a.to(torch.int64) != b.to(torch.int64)).any(-1).sum())

    for layer, ref in torch_run.items():
        parts = []
        if f32 is not None:
            parts.append(f"torch {result.dtype} vs f32 {differ(ref, f32[layer])}")
        for numerics, got in tpc.items():
            mine = got[f"{layer}.experts"].sort(-1).values
            parts.append(f"tpc {numerics} vs torch {result.dtype} {differ(mine, ref)}"
                         + (f", vs f32 {differ(mine, f32[layer])}" if f32 is not None else ""))
        print(f"routing {layer}: tokens whose top-{ref.shape[1]} experts differ, of {ref.shape[0]}: "
              + "; ".join(parts))


def _check(args, tpc_run, work):
    result = _export(args)
    module = os.path.join(work, "module.mlir")
    exporter.write(result, module, None)
    arg_file = os.path.join(work, "args.safetensors")
    weights.save(arg_file, {**result.inputs(), **result.weights()})
    print(f"model: {result.what}: {exporter.describe(result.model, args.batch, args.seq_len, args.dtype)}"
          + (f"; decoding after {result.past} cached tokens (caches of {result.kv_cache})" if result.kv_cache else ""))
    print(f"plan: {result.plan.name}; TP degrees: {' '.join(map(str, args.tp))}; tpc-run: {tpc_run}")
    tol_y, tol = _tolerances(result)
    if not result.kv_cache:
        _routing_report(args, result, tpc_run, work)
    failures = 0
    passes = [False] + ([True] if args.train else [])
    for train in passes:
        step = "train" if train else "infer"
        ref, yard = _references(result, train)
        others = "new k and v" if result.kv_cache else "gradients"
        for numerics in args.numerics:
            hashes = {}
            for tp in args.tp:
                out = os.path.join(work, f"{step}-{numerics}-tp{tp}.safetensors")
                hashes[tp] = run_tpc(tpc_run, module, arg_file, tp, numerics, train, out)
                got = load_file(out)
                failures += _compare(f"{step} {numerics} tp={tp}", got, ref, yard, tol_y, tol, args.verbose, others)
            if numerics == "invariant" and len(args.tp) > 1:
                first = hashes[args.tp[0]]
                same = all(h == first for h in hashes.values())
                failures += not same
                print(f"{step} invariant: {len(first)} result hashes at tp={','.join(map(str, args.tp))} "
                      f"{'bitwise equal: ok' if same else 'differ: FAIL'}")
                if not same:
                    for tp, h in hashes.items():
                        print(f"  tp={tp}: " + " | ".join(h))
    print("PASS" if failures == 0 else f"FAIL ({failures} checks)")
    return 0 if failures == 0 else 1


def _stage(args, work):
    """--stage: the arguments, PyTorch's results and the compiled modules of every check."""
    tpc_compile = find_tool("tpc-compile", args.tpc_compile)
    os.makedirs(work, exist_ok=True)
    result = _export(args)
    module = os.path.join(work, "module.mlir")
    exporter.write(result, module, None)
    weights.save(os.path.join(work, "args.safetensors"), {**result.inputs(), **result.weights()})
    tol_y, tol_o = _tolerances(result)
    lines = [f"# {result.what}: {exporter.describe(result.model, args.batch, args.seq_len, args.dtype)}; "
             f"plan {result.plan.name}",
             "# step numerics tp module reference yardstick tolerance_y tolerance_gradients"]
    for train in [False] + ([True] if args.train else []):
        step = "train" if train else "infer"
        ref, yard_ref = _references(result, train)
        weights.save(os.path.join(work, f"ref-{step}.safetensors"), ref)
        yard = "-"
        if yard_ref is not None:
            yard = f"yard-{step}.safetensors"
            weights.save(os.path.join(work, yard), yard_ref)
        for numerics in args.numerics:
            for tp in args.tp:
                name = f"{step}-{numerics}-tp{tp}.so"
                cmd = [tpc_compile, module, "-o", os.path.join(work, name), f"--pipeline={step}", f"--mesh=tp={tp}",
                       f"--numerics={numerics}"]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise ExportError(f"tpc-compile at tp={tp} ({numerics}, {step}) failed: "
                                      f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
                lines.append(f"{step} {numerics} {tp} {name} ref-{step}.safetensors {yard} {tol_y} {tol_o}")
    os.remove(module)
    with open(os.path.join(work, "stage.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"tpc_torch.check: staged {len(lines) - 2} runs of {result.what} in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
