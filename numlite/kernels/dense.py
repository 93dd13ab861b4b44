"""Matrix products: FULLY_CONNECTED and BATCH_MATMUL (float32), both straight onto BLAS."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.kernels import hybrid
from numlite.kernels.base import Kernel, Spec, TensorInfo, fused_activation, register

FLOAT = np.dtype(np.float32)

# The float FULLY_CONNECTED kernel of LiteRT accepts only clamping activations: NONE, RELU,
# RELU_N1_TO_1 and RELU6 (TANH and SIGN_BIT fail to prepare).
_FC_ACTIVATIONS = (0, 1, 2, 3)


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
        x, wts = ins[0], ins[1]
        bias = ins[2] if len(ins) == 3 else None
        opts = self.options
        if opts is None:
            raise self.fail("missing options")
        if opts.weights_format != 0:
            raise self.fail(f"weights format {opts.weights_format} is not supported (only DEFAULT)")
        for t in (x, wts, bias):
            if t is not None and t.dtype != FLOAT:
                raise self.fail(
                    f"input {t.name!r} has dtype {t.dtype.name}; only float32 is supported"
                    " (or integer activations with quantization parameters, or int8 weights)"
                )
        if opts.fused_activation_function not in _FC_ACTIVATIONS:
            raise self.fail(f"fused activation {opts.fused_activation_function} is not supported by FULLY_CONNECTED")
        if wts.ndim != 2:
            raise self.fail(f"weights must have rank 2, got shape {wts.shape}")
        units, depth = wts.shape
        if bias is not None and bias.size != units:
            raise self.fail(f"bias has {bias.size} elements, expected {units}")
        if opts.keep_num_dims:
            if x.ndim == 0 or x.shape[-1] != depth:
                raise self.fail(f"keep_num_dims needs the input's last dimension to be {depth}, got shape {x.shape}")
            out_shape = tuple(x.shape[:-1]) + (units,)
        elif depth == 0:
            out_shape = (int(np.prod(x.shape[:-1], dtype=np.int64)), units)
        else:
            out_shape = (x.size // depth, units)
        self.depth = depth
        self.batch = x.size // depth if depth else 0
        self.activation = fused_activation(opts)
        # A constant [units, depth] matrix is transposed once, so that BLAS reads it row-major.
        self.weights = None if wts.value is None else np.ascontiguousarray(wts.value.T)
        return [Spec(out_shape, FLOAT)]

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, wts = ins[0], ins[1]
        bias = ins[2] if len(ins) == 3 else None
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
            if not 2 <= t.ndim <= 5:
                raise self.fail(f"inputs must have rank 2 to 5, got shape {t.shape}")
        opts = self.options
        self.adj_x = bool(opts.adj_x) if opts is not None else False
        self.adj_y = bool(opts.adj_y) if opts is not None else False
        rank = max(lhs.ndim, rhs.ndim)
        a = (1,) * (rank - lhs.ndim) + tuple(lhs.shape)
        b = (1,) * (rank - rhs.ndim) + tuple(rhs.shape)
        batch = []
        for da, db in zip(a[:-2], b[:-2]):
            if da != db and da != 1 and db != 1:
                raise self.fail(f"batch dimensions of {lhs.shape} and {rhs.shape} do not broadcast")
            batch.append(db if da == 1 else da)
        rows, inner_a = (a[-1], a[-2]) if self.adj_x else (a[-2], a[-1])
        inner_b, cols = (b[-1], b[-2]) if self.adj_y else (b[-2], b[-1])
        if inner_a != inner_b:
            raise self.fail(f"cannot multiply {lhs.shape} by {rhs.shape} (adj_x={self.adj_x}, adj_y={self.adj_y})")
        return [Spec(tuple(batch) + (rows, cols), FLOAT)]

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        lhs, rhs = ins
        if self.adj_x:
            lhs = lhs.swapaxes(-1, -2)
        if self.adj_y:
            rhs = rhs.swapaxes(-1, -2)
        np.matmul(lhs, rhs, out=outs[0])
