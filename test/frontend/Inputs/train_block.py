"""A PyTorch training loop over a tpc Block (tpc_torch.runtime): the f32 MLP block of
test/e2e/Inputs/mlp_f32_wide.mlir (RMSNorm, column-parallel FC1 of 2 x 2048 rows, SwiGLU,
row-parallel FC2, residual) against the same block written in plain PyTorch, same initial weights,
same batches, torch.optim.AdamW on both; forward, backward into .grad, optimizer step. Prints each
step's two losses (tpc's also as its f32 bits), the largest gradient and weight differences, and
fails when they pass 1e-5 of the loss, 1e-4 of the largest gradient or 1e-4 in a weight.
Usage: train_block.py MLIR [tpc-compile options]"""
import sys

import torch
import torch.nn.functional as F

from tpc_torch.runtime import Block

torch.manual_seed(0)
T, H, FF = 16, 128, 2048
init = {"gamma": 1 + 0.1 * torch.randn(H), "w1": torch.randn(2 * FF, H) / H ** 0.5,
        "w2": torch.randn(H, FF) / FF ** 0.5}
block = Block(sys.argv[1], inputs=["x"], weights=init, compile_options=sys.argv[2:])
m = block.forward_module
print(f"world: {m.ranks} rank(s), " + ("threads" if m.process_rank is None else f"this process is rank {m.process_rank}"))


class Reference(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma, self.w1, self.w2 = (torch.nn.Parameter(init[k].clone()) for k in ("gamma", "w1", "w2"))

    def forward(self, x):
        h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.gamma
        u = h @ self.w1.T
        return x + (F.silu(u[:, :FF]) * u[:, FF:]) @ self.w2.T


ref = Reference()
assert [n for n, _ in block.named_parameters()] == ["gamma", "w1", "w2"]
opt_tpc = torch.optim.AdamW(block.parameters(), lr=1e-3)
opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-3)
ok = True
for step in range(5):
    x, target = torch.randn(T, H), torch.randn(T, H)
    loss_tpc, loss_ref = F.mse_loss(block(x), target), F.mse_loss(ref(x), target)
    opt_tpc.zero_grad(), opt_ref.zero_grad()
    loss_tpc.backward(), loss_ref.backward()
    grad = max(((p.grad - q.grad).abs().max() / q.grad.abs().max()).item()
               for p, q in zip(block.parameters(), ref.parameters()))
    opt_tpc.step(), opt_ref.step()
    weight = max((p - q).abs().max().item() for p, q in zip(block.parameters(), ref.parameters()))
    rel = abs(loss_tpc.item() - loss_ref.item()) / loss_ref.item()
    bits = loss_tpc.detach().view(torch.int32).item() & 0xFFFFFFFF
    ok &= rel <= 1e-5 and grad <= 1e-4 and weight <= 1e-4
    print(f"step {step}: loss {loss_tpc.item():.6f} (bits {bits:08x}) PyTorch {loss_ref.item():.6f}: "
          f"{rel:.1e} apart; gradients {grad:.1e} of the largest; weights {weight:.1e}")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
