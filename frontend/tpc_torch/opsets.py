"""The ATen ops each kind of unit may contain (convert.py)."""
import operator

import torch

aten = torch.ops.aten
SKIP = {aten._assert_tensor_metadata.default}
ALIAS = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.contiguous.default,
         aten.clone.default, aten.alias.default, aten.detach.default}
GETITEM = {operator.getitem}
NORM_OPS = {aten.to.dtype, aten._to_copy.default, aten.pow.Tensor_Scalar, aten.mean.dim, aten.add.Tensor,
            aten.add.Scalar, aten.rsqrt.default, aten.mul.Tensor}
ATTENTION_OPS = ALIAS | {aten.linear.default, aten.transpose.int, aten.unsqueeze.default, aten.mul.Tensor,
                         aten.slice.Tensor, aten.neg.default, aten.cat.default, aten.add.Tensor,
                         aten.scaled_dot_product_attention.default, aten.expand.default}
ACTIVATIONS = {aten.silu.default: "swiglu", aten.gelu.default: "geglu"}
MLP_OPS = ALIAS | {aten.linear.default, aten.mul.Tensor} | set(ACTIVATIONS)
MOE_OPS = ALIAS | GETITEM | {aten.linear.default, aten.to.dtype, aten._to_copy.default, aten.softmax.int,
                             aten._softmax.default, aten.topk.default, aten.sum.dim_IntList,
                             aten.div.Tensor, aten.div_.Tensor, aten.repeat_interleave.self_int,
                             aten.index.Tensor, aten.unsqueeze.default, aten.bmm.default,
                             aten.squeeze.dim, aten.chunk.default, aten.silu.default, aten.mul.Tensor}
