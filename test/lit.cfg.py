# lit configuration for tpc. Run through `make test` (or `lit build/test` after a build).
import glob
import os
import shutil

import lit.formats

config.name = "tpc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tpc_build_dir, "test")
# Inputs/ holds files that tests read; they are not tests themselves.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "gpu"]

config.environment["PATH"] = os.pathsep.join(
    [config.tpc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# Sanitizer builds: fail on the first report, and do not let leaks inside libMLIR's global
# registries (never freed by design) hide ours. An allocation too large for the machine returns
# NULL, as without ASan (the runtime reports it: e2e/out-of-memory.test).
config.environment["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:allocator_may_return_null=1"
config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
lsan_supp = os.path.join(config.test_source_root, "lsan.supp")
config.environment["LSAN_OPTIONS"] = "suppressions=" + lsan_supp
# ThreadSanitizer builds (make test SANITIZE=thread, build-tsan): a report ends the process with
# abort(), a crash, so that it fails the test even under `not` (which accepts only exit statuses).
# No suppressions: libMLIR/libLLVM and libmpi are not instrumented, and no report comes from them.
config.environment["TSAN_OPTIONS"] = "halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1"
# The TSan build runs every test (about 11 minutes on 2 cores). `lit --param tsan_quick=1
# build-tsan/test` leaves out seven long ones that add no threaded code of their own, 70% of the
# time (docs/testing.md, "Races and faults"): TP and batch sweeps over the paths that train.test,
# sharded.test and gen-stack.test run, count-only steps (no data moves, no rank waits), the
# docs' commands, mutated IR for the single-threaded parser, and tpc-generate against transformers
# (one rank each; generate.test and generate-32.test run its rank threads).
if getattr(config, "tpc_sanitize_thread", False) and lit_config.params.get("tsan_quick", "0") not in ("0", ""):
    config.excludes += ["invariance.test", "lm-invariance.test", "batch-invariance.test", "count-only.test", "docs.test",
                        "mutated-inputs.test", "generate-hf.test"]

config.substitutions.append(("%tp_irdl", os.path.join(config.tpc_source_dir, "dialect", "tp.irdl.mlir")))
config.substitutions.append(("%tpc_src", config.tpc_source_dir))
config.substitutions.append(("%unit", os.path.join(config.tpc_build_dir, "unit")))
config.substitutions.append(("%tpc_build", config.tpc_build_dir))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
# Sanitizer builds: libtprt is instrumented, so it cannot be loaded into an uninstrumented process
# (Python: tpc_torch.runtime); the tests that do (test/frontend/runtime.test, torch-train.test) are
# unsupported there and run in the Release build.
if getattr(config, "tpc_sanitize", False):
    config.available_features.add("asan")
if getattr(config, "tpc_sanitize_thread", False):
    config.available_features.add("tsan")
# The mlir-opt pass plugin (plugin/), built except in sanitizer builds.
if os.path.isfile(os.path.join(config.tpc_build_dir, "lib", "libtpc_mlir_plugin.so")):
    config.available_features.add("mlir-plugin")

# Ranks as processes under mpirun (test/e2e/processes-mpirun.test) when OpenMPI/MPICH is installed.
if shutil.which("mpirun"):
    config.available_features.add("mpirun")
# The CUDA backend plugin, built where nvcc and NCCL exist (test/e2e/cuda-plugin-symbols.test).
if os.path.exists(os.path.join(config.tpc_build_dir, "lib", "libtprt_backend_cuda.so")):
    config.available_features.add("cuda-plugin")
# The CUDA backend's host code against an emulated CUDA runtime (test/unit/cuda_local.test), built
# wherever CUDA's headers are, also without the kernels (TPC_CUDA_KERNELS=OFF: sanitizer builds).
if os.path.exists(os.path.join(config.tpc_build_dir, "unit", "tprt-cuda-local-check")):
    config.available_features.add("cuda-host")

# The PyTorch frontend (frontend/tpc_torch; test/frontend, docs/frontend.md) runs under the Python of
# third_party/pyenv, which tools/setup.sh makes, when torch, transformers and safetensors are
# installed there (a file check: importing torch would add seconds to every lit run).
# `lit --param torch_python=PATH` uses another Python that has them.
torch_python = lit_config.params.get("torch_python")
if not torch_python:
    pyenv = os.path.join(config.tpc_source_dir, "third_party", "pyenv")
    site = glob.glob(os.path.join(pyenv, "lib", "python3*", "site-packages"))
    if site and os.access(os.path.join(pyenv, "bin", "python"), os.X_OK) and all(
            os.path.isfile(os.path.join(site[0], pkg, "__init__.py")) for pkg in ("torch", "transformers", "safetensors")):
        torch_python = os.path.join(pyenv, "bin", "python")
if torch_python:
    config.available_features.add("torch")
    frontend = os.path.join(config.tpc_source_dir, "frontend")
    # %torch_python_exe: that Python alone, without the source tree on its path (pip-install.test),
    # which builds the frontend's package offline from the build backend's wheels that
    # tools/setup.sh keeps beside the venv.
    if os.path.isfile(os.path.join(config.tpc_source_dir, "third_party", "pyenv", "wheels", "PINS")):
        config.available_features.add("pip-wheels")
    config.substitutions.append(("%torch_python_exe", torch_python))
    config.substitutions.append(("%torch_python", f"env PYTHONPATH={frontend} HF_HUB_OFFLINE=1 {torch_python}"))
