"""Prints a tp module: a stack of N column/row-parallel SwiGLU MLP layers (no residual), each with
its own two weights, so the function has 2N + 1 arguments (tools/gen_stack.py at hidden 64, FFN
128; fast numerics unless given). Usage: gen_stack.py N [fast|invariant|exact]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
from gen_stack import stack  # noqa: E402

sys.stdout.write(stack(int(sys.argv[1]), 64, 128, sys.argv[2] if len(sys.argv) > 2 else "fast"))
