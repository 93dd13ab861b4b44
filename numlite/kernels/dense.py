"""Matrix products: FULLY_CONNECTED and BATCH_MATMUL (float32), both straight onto BLAS."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.kernels import hybrid
from numlite.kernels.base import Kernel, Spec, TensorInfo, fused_activation, register
from numlite.kernels.operands import (
    adjoint_options,
    batch_matmul_shape,
    fully_connected_options,
    fully_connected_shape,
    input_weights_bias,
)

FLOAT = np.dtype(np.float32)


@register("FULLY_CONNECTED")
class FullyConnected(Kernel):
    """``output = input @ weights.T + bias`` with weights ``[units, depth]``.

    The input is read as ``[size // depth, depth]`` (any rank; LiteRT takes the leading
    ``batch * depth`` elements). The output is ``[batch, units]``, or the input's shape with
    its last dimension replaced by ``units`` under ``keep_num_dims``.
    """

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if (specs := hybrid.route(self, ins, hybrid.HybridFullyConnected)) is not None:  # int8 weights, float activations
            return specs
        self.expect_inputs(ins, 2, 3)
        x, wts, bias = input_weights_bias(ins)
        opts = fully_connected_options(self)
        for t in (x, wts, bias):
            if t is not None and t.dtype != FLOAT:
                raise self.fail(
                    f"input {t.name!r} has dtype {t.dtype.name}; only float32 is supported"
                    " (or integer activations with quantization parameters, or int8 weights)"
                )
        depth, out_shape = fully_connected_shape(self, x, wts, bias, whole_rows=False)
        self.depth = depth
        self.batch = x.size // depth if depth else 0
        self.activation = fused_activation(opts)
        # A constant [units, depth] matrix is transposed once, so that BLAS reads it row-major.
        self.weights = None if wts.value is None else np.ascontiguousarray(wts.value.T)
        return [Spec(out_shape, FLOAT)]

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, wts, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        if self.depth == 0:  # LiteRT writes zeros, without the bias
            out.fill(0)
            return
        weights = self.weights if self.weights is not None else wts.T
        lhs = x.reshape(-1)[: self.batch * self.depth].reshape(self.batch, self.depth)
        out2d = out.reshape(self.batch, -1)
        np.matmul(lhs, weights, out=out2d)
        if bias is not None:
            np.add(out2d, bias, out=out2d)
        if self.activation is not None:
            self.activation(out)


@register("BATCH_MATMUL")
class BatchMatMul(Kernel):
    """Batched ``lhs @ rhs`` of rank 2 to 5 with broadcast batch dimensions; ``adj_x`` and
    ``adj_y`` transpose the last two dimensions of either operand first."""

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if (specs := hybrid.route(self, ins, hybrid.HybridBatchMatMul)) is not None:  # int8 weights, float activations
            return specs
        self.expect_inputs(ins, 2)
        lhs, rhs = ins
        for t in (lhs, rhs):
            if t.dtype != FLOAT:
                raise self.fail(
                    f"input {t.name!r} has dtype {t.dtype.name}; only float32 is supported"
                    " (or integer operands with quantization parameters, or an int8 rhs)"
                )
        self.adj_x, self.adj_y = adjoint_options(self)
        return [Spec(batch_matmul_shape(self, lhs, rhs, self.adj_x, self.adj_y), FLOAT)]

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        lhs, rhs = ins
        if self.adj_x:
            lhs = lhs.swapaxes(-1, -2)
        if self.adj_y:
            rhs = rhs.swapaxes(-1, -2)
        np.matmul(lhs, rhs, out=outs[0])
