"""Hybrid (dynamic-range) kernels: int8 weights, float32 activations quantized on the fly.

What LiteRT's hybrid kernels do, and so numlite:

* FULLY_CONNECTED and BATCH_MATMUL quantize each input row (each vector of ``depth`` values)
  to int8, symmetrically (scale ``max|x| / 127``, values clamped to [-127, 127]) or, with the
  ``asymmetric_quantize_inputs`` option, asymmetrically (scale ``(max - min) / 255`` over a
  range that includes 0, with a nudged zero point);
* CONV_2D and DEPTHWISE_CONV_2D with per-channel weights quantize each batch item (a whole
  image) asymmetrically; CONV_2D with per-tensor weights symmetrically.

The int8 dot products are exact integers (float64 matmul, exact as explained in
quantized_conv.py); each is then scaled in float32 by the input's scale times the weight
scale(s) and the float bias is added, in the order LiteRT writes them. Outputs agree with LiteRT's
reference kernels to float32 rounding (its default kernels may sum the scaled parts in another
order, which moves the last bits).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, fused_activation, has_scale
from numlite.kernels.fixed_point import round_half_away
from numlite.kernels.operands import (
    adjoint_options,
    batch_matmul_shape,
    fully_connected_options,
    fully_connected_shape,
    input_weights_bias,
)

F32 = np.dtype(np.float32)
WEIGHT_TYPES = (np.dtype(np.int8),)


def is_hybrid(ins: Sequence[TensorInfo | None], weights: int = 1, activations: int = 0) -> bool:
    """Float activations with quantized integer weights: the dynamic-range form of an op."""
    if len(ins) <= max(weights, activations):
        return False
    x, w = ins[activations], ins[weights]
    return x is not None and w is not None and x.dtype == F32 and w.dtype in WEIGHT_TYPES and has_scale(w)


def route(kernel: Kernel, ins: Sequence[TensorInfo | None], cls: type[Kernel]) -> list[Spec] | None:
    """The hook of a float kernel whose op has a hybrid form: when ``ins`` are hybrid, prepare
    ``cls`` for the node, keep it as ``kernel.hybrid`` (the float kernel's eval hands over to it)
    and return its output specs; otherwise clear ``kernel.hybrid`` and return None."""
    if not is_hybrid(ins):
        kernel.hybrid = None  # type: ignore[attr-defined]
        return None
    impl = getattr(kernel, "hybrid", None)
    if type(impl) is not cls:
        impl = cls(kernel.node)
        kernel.hybrid = impl  # type: ignore[attr-defined]
    kernel.foldable = cls.foldable
    return impl.prepare(ins)


# ----------------------------------------------------------------------------- quantizing inputs


def symmetric_quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row of ``[batch, size]`` float32 to int8 in [-127, 127]: ``(q float64, scale float32
    [batch], offset int [batch] (zeros))`` as SymmetricQuantizeFloats (a zero row: scale 1)."""
    peak = np.max(np.abs(rows), axis=1) if rows.shape[1] else np.zeros(rows.shape[0], F32)
    zero = peak == 0
    safe = np.where(zero, np.float32(1), peak).astype(F32)
    scale = np.where(zero, np.float32(1), safe / np.float32(127)).astype(F32)
    inverse = (np.float32(127) / safe).astype(F32)
    q = round_half_away((rows * inverse[:, None]).astype(F32))
    q = np.where(zero[:, None], 0, np.clip(q, -127, 127)).astype(np.float64)
    return q, scale, np.zeros(rows.shape[0], np.int64)


def asymmetric_quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row to int8 with its own scale and zero point, as AsymmetricQuantizeFloats: the
    range [min(0, lo), max(0, hi)] in double, a nudged zero point (rounded half away from zero),
    values scaled and rounded in float32 and only then offset by the zero point and clamped.

    The order matters at ties: LiteRT (2.3, reference and default kernels alike) gives
    ``zp + round(x / scale)``, not ``round(zp + x / scale)``; the two differ by one step when
    ``x / scale`` is exactly a half and the signs of ``x`` and ``zp + x / scale`` differ (an
    input of values k / 127.5 over [-2, 2] hits this on every row)."""
    lo = np.minimum(rows.min(axis=1), 0).astype(np.float64) if rows.shape[1] else np.zeros(rows.shape[0])
    hi = np.maximum(rows.max(axis=1), 0).astype(np.float64) if rows.shape[1] else np.zeros(rows.shape[0])
    flat = lo == hi
    scale = np.where(flat, 1.0, (hi - lo) / 255.0)
    from_min, from_max = -128.0 - lo / scale, 127.0 - hi / scale
    use_min = (128.0 + np.abs(lo / scale)) < (127.0 + np.abs(hi / scale))
    zp_real = np.where(use_min, from_min, from_max)
    zp = np.where(zp_real <= -128, -128, np.where(zp_real >= 127, 127, round_half_away(zp_real))).astype(np.int64)
    zp = np.where(flat, 0, zp)
    scale32 = np.where(flat, np.float32(1), scale.astype(F32)).astype(F32)
    inverse = (np.float32(1) / scale32).astype(F32)
    q = zp[:, None] + round_half_away((rows * inverse[:, None]).astype(F32)).astype(np.int64)
    q = np.where(flat[:, None], 0, np.clip(q, -128, 127)).astype(np.float64)
    return q, scale32, zp


def _weight_scales(kernel: Kernel, w: TensorInfo, channels: int) -> np.ndarray:
    q = w.quantization
    scale = np.asarray(q.scale, F32).reshape(-1)
    if len(scale) not in (1, channels):
        raise kernel.fail(f"weights {w.name!r} have {len(scale)} scales for {channels} output channels")
    if q.zero_point is not None and np.any(np.asarray(q.zero_point) != 0):
        raise kernel.fail(f"hybrid weights {w.name!r} must be symmetric (zero point 0)")
    return scale


def _check_float(kernel: Kernel, *tensors: TensorInfo | None) -> None:
    for t in tensors:
        if t is not None and t.dtype != F32:
            raise kernel.fail(f"{t.name!r} is {t.dtype.name}; a hybrid op needs float32 activations and bias")


def _signed(w: np.ndarray) -> np.ndarray:
    """int8 weights as exact float64 matmul operands."""
    return w.astype(np.float64)


# ----------------------------------------------------------------------------- FULLY_CONNECTED


class HybridFullyConnected(Kernel):
    """FULLY_CONNECTED with int8 weights ``[units, depth]``: each input row quantized
    (asymmetric_quantize_inputs chooses how), ``out = bias + dot * (row_scale * w_scale)``."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w, bias = input_weights_bias(ins)
        opts = fully_connected_options(self)
        _check_float(self, bias)
        self.depth, out_shape = fully_connected_shape(self, x, w, bias, whole_rows=True)
        self.w_scale = _weight_scales(self, w, w.shape[0])
        self.quantize = asymmetric_quantize if opts.asymmetric_quantize_inputs else symmetric_quantize
        self.activation = fused_activation(opts)
        self.weights = None if w.value is None else np.ascontiguousarray(_signed(w.value).T)
        return [Spec(out_shape, F32)]

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        weights = self.weights if self.weights is not None else _signed(w).T
        q, scale, offset = self.quantize(x.reshape(-1, self.depth))
        # (q - offset) @ w: LiteRT subtracts offset * row_sum, the same exact integer.
        dot = ((q - offset[:, None]) @ weights).astype(F32)
        if len(self.w_scale) == 1:  # LiteRT folds a per-tensor weight scale into the row scale
            result = dot * (scale * self.w_scale[0])[:, None]
        else:
            result = dot * (scale[:, None] * self.w_scale[None, :])
        if bias is not None:
            result = bias + result
        out[...] = result.reshape(out.shape)
        if self.activation is not None:
            self.activation(out)


# ----------------------------------------------------------------------------- BATCH_MATMUL


class HybridBatchMatMul(Kernel):
    """BATCH_MATMUL of a float lhs by a constant int8 rhs (per-tensor scale): each lhs row
    quantized, ``out = dot * (row_scale * rhs_scale)``."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        lhs, rhs = ins
        opts = self.options
        self.adj_x, self.adj_y = adjoint_options(self)
        if self.adj_x:
            raise self.fail("a hybrid BATCH_MATMUL cannot transpose its float operand (adj_x)")
        shape = batch_matmul_shape(self, lhs, rhs, False, self.adj_y)
        self.w_scale = _weight_scales(self, rhs, 1)
        if len(self.w_scale) != 1:
            raise self.fail("a hybrid BATCH_MATMUL needs a per-tensor rhs scale")
        self.quantize = asymmetric_quantize if opts is not None and opts.asymmetric_quantize_inputs else symmetric_quantize
        return [Spec(shape, F32)]

    def eval(self, ins, outs):
        lhs, rhs = ins
        out = outs[0]
        if out.size == 0:
            return
        depth = lhs.shape[-1]
        q, scale, offset = self.quantize(lhs.reshape(-1, depth))
        centered = (q - offset[:, None]).reshape(lhs.shape)
        b = _signed(rhs)
        if self.adj_y:
            b = b.swapaxes(-1, -2)
        dot = np.matmul(centered, b).astype(F32)
        row_scale = (scale * self.w_scale[0]).reshape(lhs.shape[:-1] + (1,))
        out[...] = dot * row_scale


# ----------------------------------------------------------------------------- convolutions


class _HybridConvBase(Kernel):
    """Shared by the hybrid convolutions: quantize each batch item, run the exact integer
    accumulation of the op's integer kernel on the centered values, scale in float32."""

    integer_name: str  # the integer kernel class (in quantized_conv) whose geometry and accumulation are reused
    channel_axis: int  # of the filter

    @property
    def integer(self) -> type:
        from numlite.kernels import quantized_conv  # imported late: quantized_conv imports conv, which imports this

        return getattr(quantized_conv, self.integer_name)

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w, bias = input_weights_bias(ins)
        _check_float(self, bias)
        if w.ndim != 4:
            raise self.fail(f"filter must have rank 4, got shape {w.shape}")
        self.w_scale = _weight_scales(self, w, w.shape[self.channel_axis])
        # Per-channel weights (always, for depthwise) go with asymmetric input quantization.
        self.asymmetric = len(self.w_scale) > 1 or self.channel_axis == 3
        self.activation = fused_activation(self.options)
        self.core = self.integer(self.node)
        self.core.w_zp = 0
        shape = self.core.plan(x, w, bias)
        return [Spec(shape, F32)]

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        n = x.shape[0]
        quantize = asymmetric_quantize if self.asymmetric else symmetric_quantize
        q, scale, offset = quantize(x.reshape(n, -1))
        acc = self.core.accumulate((q - offset[:, None]).reshape(x.shape), w).astype(F32)
        out[...] = self.scale(acc, scale.reshape(n, 1, 1, 1))
        if bias is not None:
            np.add(out, bias, out=out)
        if self.activation is not None:
            self.activation(out)


class HybridConv2D(_HybridConvBase):
    """CONV_2D with int8 weights and float activations."""

    channel_axis = 0
    integer_name = "QuantizedConv2D"

    def scale(self, acc: np.ndarray, batch_scale: np.ndarray) -> np.ndarray:
        if len(self.w_scale) > 1:
            return (acc * self.w_scale) * batch_scale  # LiteRT: acc * channel_scale * batch_scale
        return acc * (batch_scale * self.w_scale[0])  # the weight scale folded into the batch's


class HybridDepthwiseConv2D(_HybridConvBase):
    """DEPTHWISE_CONV_2D with int8 weights and float activations."""

    channel_axis = 3
    integer_name = "QuantizedDepthwiseConv2D"

    def scale(self, acc: np.ndarray, batch_scale: np.ndarray) -> np.ndarray:
        return acc * (self.w_scale * batch_scale)  # LiteRT: acc *= channel_scale * batch_scale
