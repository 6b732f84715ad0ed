#!/usr/bin/env bash
# The instruction mix of a binary's kernels whose (mangled) name matches PATTERN (default
# tprt_attn): HGMMA (Hopper tensor cores), HMMA (older tensor-core MMAs), local spills (STL/LDL),
# one line per kernel. Needs cuobjdump (the GPU machine's CUDA toolkit).
# Usage: bash tools/bench/sass_mix.sh BINARY [PATTERN]
set -euo pipefail
"${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" -sass "$1" | awk -v pat="${2:-tprt_attn}" '
  /Function :/ { name = $3; keep = (name ~ pat) }
  keep && /HGMMA/ { h[name]++ } keep && /HMMA/ { m[name]++ } keep && /STL/ { s[name]++ } keep && /LDL/ { l[name]++ }
  keep { seen[name] = 1 }
  END { for (n in seen) printf "HGMMA %5d HMMA %3d STL %3d LDL %3d  %s\n", h[n], m[n], s[n], l[n], substr(n, 1, 90) }'
