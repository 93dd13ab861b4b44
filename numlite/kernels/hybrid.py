"""Hybrid (dynamic-range) kernels: int8 weights, float32 activations quantized on the fly.

What LiteRT's hybrid kernels do, and so numlite:

* FULLY_CONNECTED and BATCH_MATMUL quantize each input row (each vector of ``depth`` values)
  to int8, symmetrically (scale ``max|x| / 127``, values clamped to [-127, 127]) or, with the
  ``asymmetric_quantize_inputs`` option, asymmetrically (scale ``(max - min) / 255`` over a
  range that includes 0, with a nudged zero point);
* CONV_2D and DEPTHWISE_CONV_2D with per-channel weights quantize each batch item (a whole
  image) asymmetrically; CONV_2D with per-tensor weights symmetrically.

The int8 dot products are exact integers: matmuls of the centered inputs (``q - zp``, at most
255 in magnitude, or 127 symmetric) in float32 when prepare proves every partial sum exact there
and float64 otherwise (numlite/kernels/quantized_blocks.py); the convolutions run blocked and
threaded in the integer kernels' machinery (quantized_conv.py). Each dot product is then scaled
in float32 by the input's scale times the weight scale(s) and the float bias is added, in the
order LiteRT writes them. Outputs agree with LiteRT's
reference kernels to float32 rounding (its default kernels may sum the scaled parts in another
order, which moves the last bits).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from numlite.kernels import parallel
from numlite.kernels.base import Kernel, Spec, TensorInfo, fused_activation, has_scale
from numlite.kernels.fixed_point import round_half_away
from numlite.kernels.quantized_blocks import accumulation_dtype, column_l1
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


SCALAR_ROWS = 8  # up to this many rows, per-row quantization parameters are computed in Python


def _row_range(rows: np.ndarray, asymmetric: bool) -> tuple[list[float], list[float]]:
    """Per row: (min, max) for asymmetric quantization, else (max |x|, unused)."""
    if asymmetric:
        return rows.min(axis=1).tolist(), rows.max(axis=1).tolist()
    peak = np.max(np.abs(rows), axis=1).tolist()
    return peak, peak


def _row_params(lo: float, hi: float, asymmetric: bool) -> tuple[np.float32, np.float32, int]:
    """``(scale, 1 / scale, zero point)`` of one row, the float32 and double steps of
    :func:`asymmetric_quantize` / :func:`symmetric_quantize` on Python floats."""
    one = np.float32(1)
    if not asymmetric:
        if lo == 0:
            return one, np.float32(127), 0
        peak = np.float32(lo)
        return peak / np.float32(127), np.float32(127) / peak, 0
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if lo == hi:
        return one, one, 0
    scale = (hi - lo) / 255.0
    from_min, from_max = -128.0 - lo / scale, 127.0 - hi / scale
    zp_real = from_min if (128.0 + abs(lo / scale)) < (127.0 + abs(hi / scale)) else from_max
    if zp_real <= -128:
        zp = -128
    elif zp_real >= 127:
        zp = 127
    else:
        zp = int(math.copysign(math.floor(abs(zp_real) + 0.5), zp_real))
    scale32 = np.float32(scale)
    return scale32, one / scale32, zp


def quantize_centered(rows: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(q - zero_point, scale)`` of :func:`asymmetric_quantize` (or :func:`symmetric_quantize`)
    in fewer passes: ``[batch, size]`` float32 holding the exact small integers (the matmul
    operand) and the float32 scales. The same float32 products and roundings; the clamp to the
    int8 range is applied to the centered values (``[-128 - zp, 127 - zp]``), and an all-zero
    row, which those functions special-case, quantizes to zeros here by itself."""
    if rows.shape[1] == 0:
        return np.zeros(rows.shape, F32), np.ones(rows.shape[0], F32)
    if rows.shape[0] <= SCALAR_ROWS:  # a few rows: the per-row parameters in Python floats (doubles)
        params = [_row_params(lo, hi, asymmetric) for lo, hi in zip(*_row_range(rows, asymmetric))]
        scale32 = np.array([p[0] for p in params], F32)
        inverse = np.array([p[1] for p in params], F32)
        if asymmetric:
            low = np.array([[-128 - p[2]] for p in params], F32)
            high = np.array([[127 - p[2]] for p in params], F32)
        else:
            low, high = np.float32(-127), np.float32(127)
    elif asymmetric:
        lo = np.minimum(rows.min(axis=1), 0).astype(np.float64)
        hi = np.maximum(rows.max(axis=1), 0).astype(np.float64)
        flat = lo == hi
        scale = np.where(flat, 1.0, (hi - lo) / 255.0)
        from_min, from_max = -128.0 - lo / scale, 127.0 - hi / scale
        use_min = (128.0 + np.abs(lo / scale)) < (127.0 + np.abs(hi / scale))
        zp_real = np.where(use_min, from_min, from_max)
        zp = np.where(zp_real <= -128, -128, np.where(zp_real >= 127, 127, round_half_away(zp_real)))
        zp = np.where(flat, 0, zp)
        scale32 = np.where(flat, np.float32(1), scale.astype(F32)).astype(F32)
        inverse = (np.float32(1) / scale32).astype(F32)
        low, high = (-128 - zp).astype(F32)[:, None], (127 - zp).astype(F32)[:, None]
    else:
        peak = np.max(np.abs(rows), axis=1)
        zero = peak == 0
        safe = np.where(zero, np.float32(1), peak).astype(F32)
        scale32 = np.where(zero, np.float32(1), safe / np.float32(127)).astype(F32)
        inverse = (np.float32(127) / safe).astype(F32)
        low, high = np.float32(-127), np.float32(127)
    q = np.multiply(rows, inverse[:, None], dtype=F32)
    magnitude = np.abs(q)  # round half away from zero, in float32 as round_half_away
    np.add(magnitude, np.float32(0.5), out=magnitude)
    np.floor(magnitude, out=magnitude)
    np.copysign(magnitude, q, out=q)
    np.clip(q, low, high, out=q)
    return q, scale32


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
        self.activation = fused_activation(opts)
        # Products of centered inputs (|q - zp| <= 255, or 127 symmetric) by these weights, in
        # float32 when every partial sum provably stays exact there (quantized_blocks).
        self.asymmetric = bool(opts.asymmetric_quantize_inputs)
        magnitude = 255 if self.asymmetric else 127
        l1 = 128 * self.depth if w.value is None else column_l1(w.value.T)
        self.dtype = accumulation_dtype(magnitude, l1)
        if self.dtype is None:
            raise self.fail(f"accumulation depth {self.depth} is too large for exact integer accumulation")
        self.weights = None if w.value is None else np.ascontiguousarray(w.value.T, dtype=self.dtype)
        self.run = parallel.runner(1)
        self.tasks = [self._compute]
        return [Spec(out_shape, F32)]

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        self.args = (x, w, bias, out)
        self.run(self.tasks)

    def _compute(self, slot: int) -> None:
        x, w, bias, out = self.args
        weights = self.weights if self.weights is not None else w.T.astype(self.dtype)
        centered, scale = quantize_centered(x.reshape(-1, self.depth), self.asymmetric)
        # (q - offset) @ w: LiteRT subtracts offset * row_sum, the same exact integer.
        rows = out.reshape(centered.shape[0], -1)
        if self.dtype == F32:  # exact, so the float32 result is the integer itself
            np.matmul(centered, weights, out=rows)
        else:  # exact in double, rounded to float32 once
            np.copyto(rows, np.matmul(centered, weights, dtype=self.dtype), casting="same_kind")
        if len(self.w_scale) == 1:  # LiteRT folds a per-tensor weight scale into the row scale
            np.multiply(rows, (scale * self.w_scale[0])[:, None], out=rows)
        else:
            np.multiply(rows, scale[:, None] * self.w_scale[None, :], out=rows)
        if bias is not None:
            np.add(rows, bias, out=rows)
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
        self.asymmetric = bool(opts is not None and opts.asymmetric_quantize_inputs)
        # float32 products when every partial sum is provably exact there (quantized_blocks)
        depth = lhs.shape[-1]
        if rhs.value is not None and rhs.value.size:
            l1 = int(np.abs(rhs.value.astype(np.int64)).sum(axis=-1 if self.adj_y else -2).max())
        else:
            l1 = 128 * depth
        self.dtype = accumulation_dtype(255 if self.asymmetric else 127, l1)
        if self.dtype is None:
            raise self.fail(f"accumulation depth {depth} is too large for exact integer accumulation")
        self.rhs = None if rhs.value is None else self._operand(rhs.value)
        return [Spec(shape, F32)]

    def _operand(self, rhs: np.ndarray) -> np.ndarray:
        b = rhs.astype(self.dtype)
        return b.swapaxes(-1, -2) if self.adj_y else b

    def eval(self, ins, outs):
        lhs, rhs = ins
        out = outs[0]
        if out.size == 0:
            return
        depth = lhs.shape[-1]
        centered, scale = quantize_centered(lhs.reshape(-1, depth), self.asymmetric)
        b = self.rhs if self.rhs is not None else self._operand(rhs)
        dot = np.matmul(centered.reshape(lhs.shape), b, dtype=self.dtype).astype(F32)
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
        core = self.core = self.integer(self.node)
        # The core sees centered values (|q - zp| <= 255, or 127 symmetric), padding 0.
        core.w_zp, core.x_zp, core.wide = 0, 0, False
        core.input_magnitude = 255 if self.asymmetric else 127
        core.pad_value = 0
        core.finish = self.finish_block
        shape = core.plan(x, w, bias)
        return [Spec(shape, F32)]

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        n = x.shape[0]
        core = self.core
        if not core.fast:
            quantize = asymmetric_quantize if self.asymmetric else symmetric_quantize
            q, scale, offset = quantize(x.reshape(n, -1))
            acc = core.accumulate((q - offset[:, None]).reshape(x.shape), w).astype(F32)
            out[...] = self.scale(acc, scale.reshape(n, 1, 1, 1))
            if bias is not None:
                np.add(out, bias, out=out)
            if self.activation is not None:
                self.activation(out)
            return
        if core.dynamic_weights:
            core.load_weights(w)
        centered, scale = quantize_centered(x.reshape(n, -1), self.asymmetric)
        self.batch_scale, self.bias_now = scale, bias
        core.run_blocks(centered.reshape(x.shape), out)

    def finish_block(self, acc: np.ndarray, out_rows: np.ndarray, batch: int, slot: int) -> None:
        """One block of exact accumulators ``[pixels, out_c]`` to float outputs: rounded to
        float32 once, scaled, biased and clamped as LiteRT orders it."""
        np.copyto(out_rows, acc, casting="same_kind")
        self.scale_into(out_rows, self.batch_scale[batch])
        if self.bias_now is not None:
            np.add(out_rows, self.bias_now, out=out_rows)
        if self.activation is not None:
            self.activation(out_rows)


class HybridConv2D(_HybridConvBase):
    """CONV_2D with int8 weights and float activations."""

    channel_axis = 0
    integer_name = "QuantizedConv2D"

    def scale(self, acc: np.ndarray, batch_scale: np.ndarray) -> np.ndarray:
        if len(self.w_scale) > 1:
            return (acc * self.w_scale) * batch_scale  # LiteRT: acc * channel_scale * batch_scale
        return acc * (batch_scale * self.w_scale[0])  # the weight scale folded into the batch's

    def scale_into(self, rows: np.ndarray, batch_scale: np.float32) -> None:
        """:meth:`scale` in place, for one batch item's rows."""
        if len(self.w_scale) > 1:
            np.multiply(rows, self.w_scale, out=rows)
            np.multiply(rows, batch_scale, out=rows)
        else:
            np.multiply(rows, batch_scale * self.w_scale[0], out=rows)


class HybridDepthwiseConv2D(_HybridConvBase):
    """DEPTHWISE_CONV_2D with int8 weights and float activations."""

    channel_axis = 3
    integer_name = "QuantizedDepthwiseConv2D"

    def scale(self, acc: np.ndarray, batch_scale: np.ndarray) -> np.ndarray:
        return acc * (self.w_scale * batch_scale)  # LiteRT: acc *= channel_scale * batch_scale

    def scale_into(self, rows: np.ndarray, batch_scale: np.float32) -> None:
        """:meth:`scale` in place, for one batch item's rows."""
        np.multiply(rows, self.w_scale * batch_scale, out=rows)
