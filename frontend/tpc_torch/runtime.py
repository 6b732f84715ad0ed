"""Calling a compiled tp module on torch tensors (docs/frontend.md, "Calling a module from PyTorch").

    from tpc_torch.runtime import Module
    mlp = Module("mlp.so")                       # or a .mlir, compiled by tpc-compile first
    out = mlp(x=x, w_up=w_up, w_down=w_down)     # {"y": tensor}; positional arguments work too

A thin ctypes binding of libtprt's session ABI (runtime/tprt_session.h): the module's function
runs on the CPU backend on a world of rank threads with the module's mesh (under torchrun or
mpirun, one rank per process: every process passes the same whole arguments, runs its rank and
receives the whole results), each argument given as its whole (logical) tensor and each result
returned whole. With one rank nothing is copied: the
module reads the torch tensors' memory and writes the results' in place. Nothing is compiled at
install time; libtprt.so is found through $TPC_LIBTPRT, next to the tpc-run on PATH (../lib), or
in the build directory of a checkout.
"""
import ctypes
import os
import shutil
import subprocess
import tempfile

import torch

from .errors import ExportError

# tprt_dtype_t codes (runtime/tprt_dtype.h) and the torch dtypes that hold them.
_DTYPES = {0: torch.bfloat16, 1: torch.float16, 2: torch.float32, 3: torch.float8_e4m3fn, 4: torch.float8_e5m2,
           7: torch.int32, 8: torch.int64}


def _tool_dir(name):
    path = shutil.which(name)
    return os.path.dirname(os.path.realpath(path)) if path else None


def find_libtprt():
    """The libtprt.so to load: $TPC_LIBTPRT, else ../lib beside the tpc-run on PATH, else the
    build directory of the checkout this package sits in."""
    candidates = []
    if os.environ.get("TPC_LIBTPRT"):
        return os.environ["TPC_LIBTPRT"]
    tools = _tool_dir("tpc-run")
    if tools:
        candidates.append(os.path.join(tools, "..", "lib", "libtprt.so"))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "lib", "libtprt.so"))
    for c in candidates:
        if os.path.isfile(c):
            return os.path.normpath(c)
    raise ExportError("libtprt.so not found: set TPC_LIBTPRT, or put tpc-run (cmake --install's <prefix>/bin) on PATH "
                      f"(looked at {', '.join(os.path.normpath(c) for c in candidates)})")


_lib = None


def _load(path=None):
    global _lib
    if _lib is not None and path is None:
        return _lib
    # Global: a module (its own shared object) resolves its calls into libtprt when it is loaded.
    lib = ctypes.CDLL(path or find_libtprt(), mode=ctypes.RTLD_GLOBAL)
    c_void_p, c_int, c_char_p = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    sigs = {
        "tprt_session_open": (c_void_p, [c_char_p, c_char_p, ctypes.POINTER(c_void_p)]),
        "tprt_session_close": (None, [c_void_p]),
        "tprt_session_function": (c_char_p, [c_void_p]),
        "tprt_session_ranks": (c_int, [c_void_p]),
        "tprt_session_process_rank": (c_int, [c_void_p]),
        "tprt_session_count": (c_int, [c_void_p, c_int]),
        "tprt_session_tensor_name": (c_char_p, [c_void_p, c_int, c_int]),
        "tprt_session_tensor_dtype": (c_int, [c_void_p, c_int, c_int]),
        "tprt_session_tensor_rank": (c_int, [c_void_p, c_int, c_int]),
        "tprt_session_tensor_dims": (None, [c_void_p, c_int, c_int, ctypes.POINTER(ctypes.c_int64)]),
        "tprt_session_call": (c_void_p, [c_void_p, ctypes.POINTER(c_void_p), ctypes.POINTER(c_void_p)]),
        "tprt_dtype_name": (c_char_p, [c_int]),
        "tprt_status_message": (c_char_p, [c_void_p]),
        "tprt_status_free": (None, [c_void_p]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    if path is None:
        _lib = lib
    return lib


def _check(lib, status):
    if status:
        message = lib.tprt_status_message(status).decode(errors="replace")
        lib.tprt_status_free(status)
        raise ExportError(message)


class TensorSpec:
    """An argument or result of the module's function: name, logical shape, dtype."""

    def __init__(self, name, shape, code, spelling):
        self.name, self.shape, self.code, self.spelling = name, tuple(shape), code, spelling
        self.dtype = _DTYPES.get(code)

    def __repr__(self):
        return f"{self.name}: {self.spelling}{list(self.shape)}"


def compile_mlir(path, *options, tpc_compile=None):
    """Compiles a .mlir with tpc-compile (on PATH, or |tpc_compile|) into a temporary .so; |options|
    are tpc-compile's (--pipeline=infer, --mesh=tp=2, ...)."""
    tool = tpc_compile or shutil.which("tpc-compile")
    if not tool:
        raise ExportError("tpc-compile not found on PATH (cmake --install puts it in <prefix>/bin)")
    out = os.path.join(tempfile.mkdtemp(prefix="tpc_torch_module."), os.path.basename(path) + ".so")
    proc = subprocess.run([tool, path, "-o", out, *options], capture_output=True, text=True)
    if proc.returncode:
        raise ExportError(f"tpc-compile {path} failed: {(proc.stderr or proc.stdout).strip()}")
    return out


class Module:
    """A compiled module's function, callable on torch tensors (CPU backend)."""

    def __init__(self, path, function=None, compile_options=(), libtprt=None):
        self._lib = _load(libtprt)
        if path.endswith(".mlir"):
            path = compile_mlir(path, *compile_options)
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.tprt_session_open(path.encode(), function.encode() if function else None,
                                                      ctypes.byref(handle)))
        self._s = handle
        self.path = path
        self.function = self._lib.tprt_session_function(handle).decode()
        self.ranks = self._lib.tprt_session_ranks(handle)
        # Under torchrun or mpirun: this process's rank of a process world (it runs that rank
        # alone and every process gets the whole results); None for a world of rank threads.
        rank = self._lib.tprt_session_process_rank(handle)
        self.process_rank = None if rank < 0 else rank
        self.args = [self._spec(0, i) for i in range(self._lib.tprt_session_count(handle, 0))]
        self.results = [self._spec(1, i) for i in range(self._lib.tprt_session_count(handle, 1))]

    def _spec(self, result, i):
        lib, s = self._lib, self._s
        rank = lib.tprt_session_tensor_rank(s, result, i)
        dims = (ctypes.c_int64 * max(rank, 1))()
        lib.tprt_session_tensor_dims(s, result, i, dims)
        code = lib.tprt_session_tensor_dtype(s, result, i)
        return TensorSpec(lib.tprt_session_tensor_name(s, result, i).decode(), list(dims)[:rank], code,
                          lib.tprt_dtype_name(code).decode())

    def close(self):
        if getattr(self, "_s", None):
            self._lib.tprt_session_close(self._s)
            self._s = None

    def __del__(self):
        self.close()

    def __repr__(self):
        where = "" if self.process_rank is None else f", process rank {self.process_rank}"
        return (f"Module({self.path!r}, function {self.function}, {self.ranks} rank{'s' if self.ranks > 1 else ''}{where}: "
                f"({', '.join(map(repr, self.args))}) -> ({', '.join(map(repr, self.results))}))")

    def _argument(self, spec, value):
        where = f"{self.function}: argument '{spec.name}'"
        if not isinstance(value, torch.Tensor):
            raise ExportError(f"{where}: expected a torch.Tensor, got {type(value).__name__}")
        if spec.dtype is None:
            raise ExportError(f"{where}: {spec.spelling} has no torch dtype here")
        if value.dtype != spec.dtype or tuple(value.shape) != spec.shape:
            raise ExportError(f"{where}: expected {spec.spelling}{list(spec.shape)}, got "
                              f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}")
        if value.device.type != "cpu":
            raise ExportError(f"{where}: is on {value.device}; this binding runs the CPU backend (move it with .cpu())")
        return value.contiguous()

    def __call__(self, *args, **kwargs):
        """Runs the function: arguments by position (the module's order) or by name; returns a dict
        of the results by name, each a new tensor."""
        if len(args) > len(self.args):
            raise ExportError(f"{self.function}: {len(args)} positional arguments for {len(self.args)}")
        given = dict(zip((a.name for a in self.args), args))
        for name, value in kwargs.items():
            if name not in {a.name for a in self.args}:
                raise ExportError(f"{self.function}: no argument '{name}' (it takes "
                                  f"{', '.join(a.name for a in self.args)})")
            if name in given:
                raise ExportError(f"{self.function}: argument '{name}' given twice")
            given[name] = value
        missing = [a.name for a in self.args if a.name not in given]
        if missing:
            raise ExportError(f"{self.function}: missing argument{'s' if len(missing) > 1 else ''} "
                              f"{', '.join(missing)}")
        inputs = [self._argument(spec, given[spec.name]) for spec in self.args]
        outputs = []
        for spec in self.results:
            if spec.dtype is None:
                raise ExportError(f"{self.function}: result '{spec.name}' is {spec.spelling}, "
                                  "which has no torch dtype here")
            outputs.append(torch.empty(spec.shape, dtype=spec.dtype))
        arg_ptrs = (ctypes.c_void_p * max(len(inputs), 1))(*[t.data_ptr() for t in inputs])
        res_ptrs = (ctypes.c_void_p * max(len(outputs), 1))(*[t.data_ptr() for t in outputs])
        _check(self._lib, self._lib.tprt_session_call(self._s, arg_ptrs, res_ptrs))
        return {spec.name: t for spec, t in zip(self.results, outputs)}


def _grad_name(name):
    return f"{name}_grad"


class _Step(torch.autograd.Function):
    """Forward: the forward module. Backward: the training module (the same function lowered by
    tp-autodiff: every argument, plus each result's cotangent `<result>_grad`; results, plus each
    argument's gradient `<argument>_grad`), which recomputes the forward on the saved arguments."""

    @staticmethod
    def forward(ctx, block, *tensors):
        out = block.forward_module(*tensors)
        ctx.block = block
        ctx.save_for_backward(*tensors)
        return tuple(out[r.name] for r in block.forward_module.results)

    @staticmethod
    def backward(ctx, *grads):
        block = ctx.block
        given = dict(zip((a.name for a in block.forward_module.args), ctx.saved_tensors))
        for spec, g in zip(block.forward_module.results, grads):
            given[_grad_name(spec.name)] = (torch.zeros(spec.shape, dtype=spec.dtype) if g is None
                                            else g.to(spec.dtype).contiguous())
        out = block.train_module(**given)
        result = [None]
        for spec, t in zip(block.forward_module.args, ctx.saved_tensors):
            g = out.get(_grad_name(spec.name))
            result.append(g.to(t.dtype) if g is not None and ctx.needs_input_grad[len(result)] else None)
        return tuple(result)


class Block(torch.nn.Module):
    """A tp function as a torch.nn.Module: the arguments named in |inputs| are forward()'s
    arguments, every other one a torch.nn.Parameter (initialised from |weights|, a dict by name).
    Calling it runs the forward module; backward() runs the training module and leaves each
    parameter's gradient in .grad (cast to the parameter's dtype; tpc computes weight gradients in
    f32), so that any torch.optim optimizer steps it. Built from one .mlir, compiled twice by
    tpc-compile (--pipeline=infer and --pipeline=train, with |compile_options|, e.g. --mesh=tp=2)."""

    def __init__(self, mlir, inputs, weights, compile_options=(), libtprt=None):
        super().__init__()
        self.forward_module = Module(compile_mlir(mlir, "--pipeline=infer", *compile_options), libtprt=libtprt)
        self.train_module = Module(compile_mlir(mlir, "--pipeline=train", *compile_options), libtprt=libtprt)
        names = [a.name for a in self.forward_module.args]
        unknown = [n for n in list(inputs) + list(weights) if n not in names]
        if unknown:
            raise ExportError(f"{mlir}: no argument {', '.join(unknown)} (it takes {', '.join(names)})")
        self.inputs = list(inputs)
        missing = [n for n in names if n not in self.inputs and n not in weights]
        if missing:
            raise ExportError(f"{mlir}: no initial value for {', '.join(missing)}")
        self._param_names = {}
        for n in names:
            if n not in self.inputs:
                key = n.replace(".", "_")
                self._param_names[n] = key
                self.register_parameter(key, torch.nn.Parameter(weights[n].detach().clone()))

    def forward(self, *args, **kwargs):
        given = dict(zip(self.inputs, args))
        given.update(kwargs)
        tensors = []
        for spec in self.forward_module.args:
            if spec.name in self._param_names:
                tensors.append(getattr(self, self._param_names[spec.name]))
            elif spec.name in given:
                tensors.append(given[spec.name])
            else:
                raise ExportError(f"{self.forward_module.function}: missing input {spec.name}")
        out = _Step.apply(self, *tensors)
        return out[0] if len(out) == 1 else out
