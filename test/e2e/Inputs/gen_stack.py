"""Prints a tp module: a stack of N column/row-parallel SwiGLU MLP layers (no residual), each with
its own two weights, so the function has 2N + 1 arguments. Usage: gen_stack.py N"""
import sys

n, h, f = int(sys.argv[1]), 64, 128
args = ['%x: tensor<16x64xbf16> {tp.name = "x"}']
body, cur = [], "%x"
for i in range(n):
    args.append(f'%w1_{i}: tensor<{2 * f}x{h}xbf16> {{tp.name = "w1_{i}"}}')
    args.append(f'%w2_{i}: tensor<{h}x{f}xbf16> {{tp.name = "w2_{i}"}}')
    body.append(f'    %h{i} = "tp.linear"({cur}, %w1_{i}) {{parallel = "column"}} : (tensor<16x{h}xbf16>, '
                f'tensor<{2 * f}x{h}xbf16>) -> tensor<16x{2 * f}xbf16>')
    body.append(f'    %a{i} = "tp.glu"(%h{i}) {{kind = "swiglu"}} : (tensor<16x{2 * f}xbf16>) -> tensor<16x{f}xbf16>')
    body.append(f'    %y{i} = "tp.linear"(%a{i}, %w2_{i}) {{parallel = "row"}} : (tensor<16x{f}xbf16>, '
                f'tensor<{h}x{f}xbf16>) -> tensor<16x{h}xbf16>')
    cur = f"%y{i}"
print('module attributes {tp.numerics = "fast", tp.chunks = 8 : i64} {')
print("  func.func @stack(" + ", ".join(args) + ') -> (tensor<16x64xbf16> {tp.name = "y"}) {')
print("\n".join(body))
print(f"    return {cur} : tensor<16x64xbf16>")
print("  }")
print("}")
