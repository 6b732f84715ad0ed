"""tpc_torch: exports Hugging Face decoder layers to tpc's `tp` dialect (docs/frontend.md).

  python -m tpc_torch.export llama-tiny -o llama.mlir --weights llama/
  python -m tpc_torch.check llama-tiny --tp 1 2

Modules: models (built-in configs, building a model, rotary tables), plan (sharding plans),
convert (the ATen graph to tp ops), emit (MLIR text), weights (tensors by tp.name), export and
check (the command lines).
"""

__version__ = "0.1.0"  # tpc's version (cmake/version.cmake); frontend/pyproject.toml reads it
