"""Full-integer kernels: int8/uint8 (and int16 "16x8") tensors with affine quantization.

Each class is registered with ``quantized=True`` beside the op's float kernel (see
``numlite.kernels.base``), so a node whose input carries a scale runs here. The arithmetic is
that of LiteRT's reference kernels: prepare computes the same fixed-point multipliers from the
same float/double expressions (the precision of each intermediate matters: LiteRT mixes float
and double), eval applies ``numlite.kernels.fixed_point`` vectorised over int32/int64 arrays.
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, broadcast_shape, has_scale, register
from numlite.kernels.fixed_point import (
    activation_range,
    dtype_range,
    multiply_by_quantized_multiplier as mbqm,
    quantize_multiplier,
    round_half_away,
)

F32 = np.float32
INT8, UINT8, INT16 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)
EIGHT_BIT = (INT8, UINT8)


def params(t: TensorInfo) -> tuple[np.float32, int]:
    """The per-tensor ``(scale, zero_point)`` of a tensor (zero point 0 when absent)."""
    q = t.quantization
    scale = F32(q.scale[0])
    zp = int(q.zero_point[0]) if q.zero_point is not None and len(q.zero_point) else 0
    return scale, zp


class QuantizedKernel(Kernel):
    """Helpers shared by the quantized kernels."""

    def per_tensor(self, t: TensorInfo, what: str = "input") -> tuple[np.float32, int]:
        if not has_scale(t):
            raise self.fail(f"{what} {t.name!r} has no quantization parameters")
        q = t.quantization
        if len(q.scale) != 1:
            raise self.fail(f"{what} {t.name!r} is quantized per channel; this op needs one scale")
        return params(t)

    def output(self, index: int = 0) -> TensorInfo:
        out = self.declared_outputs()[index]
        if out is None:
            raise self.fail("the output is missing")
        return out

    def output_params(self, dtype: np.dtype, index: int = 0) -> tuple[np.float32, int]:
        out = self.output(index)
        if out.dtype != dtype:
            raise self.fail(f"output {out.name!r} is {out.dtype.name}, the input {dtype.name}")
        return self.per_tensor(out, "output")

    def activation_code(self) -> int:
        return int(getattr(self.options, "fused_activation_function", 0) or 0) if self.options is not None else 0

    def same_dtype_pair(self, ins) -> tuple[TensorInfo, TensorInfo]:
        """The two inputs of a binary op: int8, uint8 or int16, both of one dtype."""
        self.expect_inputs(ins, 2)
        a, b = ins
        self.expect_quantized_dtype(a, INT8, UINT8, INT16)
        if b.dtype != a.dtype:
            raise self.fail(f"inputs have different dtypes: {a.dtype.name} and {b.dtype.name}")
        return a, b

    def expect_quantized_dtype(self, t: TensorInfo, *allowed: np.dtype) -> None:
        if t.dtype not in allowed:
            names = ", ".join(np.dtype(a).name for a in allowed)
            raise self.fail(f"quantized input {t.name!r} has dtype {t.dtype.name}; supported: {names}")


def _clamp_into(values: np.ndarray, low: int, high: int, out: np.ndarray) -> None:
    np.clip(values, low, high, out=values)
    np.copyto(out, values, casting="unsafe")


# ----------------------------------------------------------------------------- QUANTIZE


@register("QUANTIZE")
class Quantize(QuantizedKernel):
    """float32 -> int8/uint8/int16 (round half away from zero of ``x / scale``, plus the zero
    point, saturated), or integer -> integer requantization with another scale/zero point."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        out = self.output()
        if out.dtype not in (INT8, UINT8, INT16):
            raise self.fail(f"output {out.name!r} has dtype {out.dtype.name}; supported: int8, uint8, int16")
        self.out_scale, self.out_zp = self.per_tensor(out, "output")
        self.range = dtype_range(out.dtype)
        if x.dtype == np.float32:
            self.requantize = False
        elif x.dtype in (INT8, UINT8, INT16):
            self.requantize = True
            self.in_scale, self.in_zp = self.per_tensor(x)
            # double division of the float scales, as quantize.cc
            self.mult, self.shift = quantize_multiplier(float(self.in_scale) / float(self.out_scale))
        else:
            raise self.fail(f"input {x.name!r} has dtype {x.dtype.name}; supported: float32, int8, uint8, int16")
        return [Spec(x.shape, out.dtype)]

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if self.requantize:
            values = mbqm(x.astype(np.int32) - np.int32(self.in_zp), self.mult, self.shift).astype(np.int64) + self.out_zp
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                q = round_half_away(np.divide(x, self.out_scale, dtype=F32))
                # saturate in float first: a huge quotient has no int64 value
                q = np.clip(np.nan_to_num(q, nan=0.0), -(2.0**40), 2.0**40)
            values = q.astype(np.int64) + self.out_zp
        _clamp_into(values, *self.range, out)


# ----------------------------------------------------------------------------- ADD / SUB / MUL


class QuantizedAddSub(QuantizedKernel):
    """ADD and SUB: both inputs rescaled to twice the larger input scale with ``left_shift``
    bits of headroom (20 for 8-bit, 15 for int16), summed, rescaled to the output."""

    sign = 1

    def prepare(self, ins):
        a, b = self.same_dtype_pair(ins)
        (s1, z1), (s2, z2) = self.per_tensor(a), self.per_tensor(b)
        so, zo = self.output_params(a.dtype)
        if a.dtype == INT16:
            if z1 or z2 or zo:
                raise self.fail("int16 quantized inputs and output need zero points of 0")
            self.left_shift = 15
        else:
            self.left_shift = 20
        # LiteRT: `2 * max(float, float)` is float; the divisions are double.
        twice_max = float(F32(2) * max(s1, s2))
        m1, sh1 = quantize_multiplier(float(s1) / twice_max)
        m2, sh2 = quantize_multiplier(float(s2) / twice_max)
        mo, sho = quantize_multiplier(twice_max / float(F32(1 << self.left_shift) * so))
        self.inputs_params = ((z1, m1, sh1), (z2, m2, sh2))
        self.out_params = (zo, mo, sho)
        self.range = activation_range(self.activation_code(), so, zo, a.dtype)
        return [Spec(broadcast_shape(a.shape, b.shape), a.dtype)]

    def _scaled(self, x: np.ndarray, p: tuple) -> np.ndarray:
        zp, m, shift = p
        shifted = (x.astype(np.int32) - np.int32(zp)) * np.int32(1 << self.left_shift)
        return mbqm(shifted, m, shift)

    def eval(self, ins, outs):
        a = self._scaled(ins[0], self.inputs_params[0])
        b = self._scaled(ins[1], self.inputs_params[1])
        raw = a + b if self.sign > 0 else a - b
        zo, mo, sho = self.out_params
        values = mbqm(raw, mo, sho).astype(np.int64) + zo
        _clamp_into(np.broadcast_to(values, outs[0].shape).copy(), *self.range, outs[0])


@register("ADD", quantized=True)
class QuantizedAdd(QuantizedAddSub):
    sign = 1


@register("SUB", quantized=True)
class QuantizedSub(QuantizedAddSub):
    sign = -1


@register("MUL", quantized=True)
class QuantizedMul(QuantizedKernel):
    """``(a - za) * (b - zb)`` rescaled by ``sa * sb / so`` (computed in float, as mul.cc)."""

    def prepare(self, ins):
        a, b = self.same_dtype_pair(ins)
        (s1, self.z1), (s2, self.z2) = self.per_tensor(a), self.per_tensor(b)
        so, self.zo = self.output_params(a.dtype)
        self.mult, self.shift = quantize_multiplier(float(s1 * s2 / so))
        self.range = activation_range(self.activation_code(), so, self.zo, a.dtype)
        return [Spec(broadcast_shape(a.shape, b.shape), a.dtype)]

    def eval(self, ins, outs):
        a = ins[0].astype(np.int32) - np.int32(self.z1)
        b = ins[1].astype(np.int32) - np.int32(self.z2)
        values = mbqm(a * b, self.mult, self.shift).astype(np.int64) + self.zo
        _clamp_into(np.broadcast_to(values, outs[0].shape).copy(), *self.range, outs[0])


# ----------------------------------------------------------------------------- activations


class QuantizedUnary(QuantizedKernel):
    """One int8/uint8 (``dtypes``) input, one output of its shape and dtype with its own
    quantization; subclasses set up in ``setup(in_scale, in_zp, out_scale, out_zp)``."""

    dtypes: tuple = EIGHT_BIT

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_quantized_dtype(x, *self.dtypes)
        s, z = self.per_tensor(x)
        so, zo = self.output_params(x.dtype)
        self.range = dtype_range(x.dtype)
        self.setup(s, z, so, zo, x.dtype)
        return [Spec(x.shape, x.dtype)]

    def setup(self, s, z, so, zo, dtype) -> None:
        raise NotImplementedError


class QuantizedReluX(QuantizedUnary):
    """``clamp(zo + M * (x - z))`` to the quantized [low, high] of the activation."""

    low: float = 0.0
    high: float = np.inf

    def setup(self, s, z, so, zo, dtype):
        self.z, self.zo = z, zo
        self.mult, self.shift = quantize_multiplier(float(s / so))  # a float division in LiteRT
        qmin, qmax = self.range
        lo = zo + int(round_half_away(F32(self.low) / so))
        hi = qmax if np.isinf(self.high) else min(qmax, zo + int(round_half_away(F32(self.high) / so)))
        self.range = (max(qmin, lo), hi)

    def eval(self, ins, outs):
        values = mbqm(ins[0].astype(np.int32) - np.int32(self.z), self.mult, self.shift).astype(np.int64) + self.zo
        _clamp_into(values, *self.range, outs[0])


@register("RELU", quantized=True)
class QuantizedRelu(QuantizedReluX):
    pass


@register("RELU6", quantized=True)
class QuantizedRelu6(QuantizedReluX):
    high = 6.0


@register("RELU_N1_TO_1", quantized=True)
class QuantizedReluN1To1(QuantizedReluX):
    low, high = -1.0, 1.0


@register("LEAKY_RELU", quantized=True)
class QuantizedLeakyRelu(QuantizedUnary):
    """Identity multiplier for ``x >= zp``, ``alpha`` multiplier below (float products as in
    LiteRT's prepare)."""

    def setup(self, s, z, so, zo, dtype):
        self.z, self.zo = z, zo
        alpha = F32(getattr(self.options, "alpha", 0.0) or 0.0)
        self.alpha = quantize_multiplier(float(s * alpha / so))
        self.identity = quantize_multiplier(float(s / so))

    def eval(self, ins, outs):
        x = ins[0].astype(np.int32) - np.int32(self.z)
        values = np.where(x >= 0, mbqm(x, *self.identity), mbqm(x, *self.alpha)).astype(np.int64) + self.zo
        _clamp_into(values, *self.range, outs[0])


def _lut_8bit(dtype: np.dtype, s, z, so, zo, transform) -> np.ndarray:
    """LiteRT's LUTPopulate for 8-bit types: each possible input dequantized (float), transformed,
    divided by the output scale (as a product with its float inverse), rounded, saturated.
    Indexed by the input's byte (``x.view(uint8)``)."""
    qmin, qmax = dtype_range(dtype)
    values = np.arange(qmin, qmax + 1, dtype=np.int32)
    dequantized = s * (values - np.int32(z)).astype(F32)
    transformed = transform(dequantized).astype(F32)
    inverse = F32(1) / so
    rescaled = round_half_away(transformed * inverse).astype(F32)
    quantized = np.clip((rescaled + F32(zo)).astype(np.int64), qmin, qmax)
    table = np.empty(256, dtype)
    table[values.astype(dtype).view(np.uint8)] = quantized.astype(dtype)
    return table


def _sigmoid_f32(x: np.ndarray) -> np.ndarray:
    # expf rounded once (float64 exp is accurate enough to round to the float32 result)
    e = np.exp(-x.astype(np.float64)).astype(F32)
    return F32(1) / (F32(1) + e)


def _tanh_f32(x: np.ndarray) -> np.ndarray:
    return np.tanh(x.astype(np.float64)).astype(F32)


class QuantizedLut(QuantizedUnary):
    """8-bit activations computed through a 256-entry table built at prepare."""

    transform = None

    def setup(self, s, z, so, zo, dtype):
        self.table = _lut_8bit(dtype, s, z, so, zo, type(self).transform)

    def eval(self, ins, outs):
        np.take(self.table, ins[0].view(np.uint8), out=outs[0])


@register("LOGISTIC", quantized=True)
class QuantizedLogistic(QuantizedLut):
    transform = staticmethod(_sigmoid_f32)


@register("TANH", quantized=True)
class QuantizedTanh(QuantizedLut):
    transform = staticmethod(_tanh_f32)


def _downscale_int16(m: int) -> int:
    """DownScaleInt32ToInt16Multiplier: the Q0.31 multiplier rounded to Q0.15."""
    if m >= (1 << 31) - 1 - (1 << 15):
        return (1 << 15) - 1
    return (m + (1 << 15)) >> 16


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul (truncating division, as C++)."""
    ab = a.astype(np.int32) * np.int32(b)
    total = ab + np.where(ab >= 0, np.int32(1 << 14), np.int32(1 - (1 << 14)))
    high = np.where(total >= 0, total >> 15, -((-total) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, high).astype(np.int16)


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    x32 = x.astype(np.int32)
    mask = np.int32((1 << exponent) - 1)
    threshold = (mask >> 1) + (x32 < 0)
    return ((x32 >> exponent) + ((x32 & mask) > threshold)).astype(np.int16)


def _saturating_left_shift16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x.astype(np.int64) << amount, -32768, 32767).astype(np.int16)


@register("HARD_SWISH", quantized=True)
class QuantizedHardSwish(QuantizedUnary):
    """LiteRT's int16 fixed-point hard-swish: the input on a "hires" scale (x * 2^7), a
    relu-ish factor in [0, 1] from x / 3, their product rescaled to the output."""

    def setup(self, s, z, so, zo, dtype):
        self.z, self.zo = z, zo
        hires = F32(1.0 / 128.0) * s  # all float, as HardSwishPrepare
        m, self.out_exp = quantize_multiplier(float(hires / so))
        self.out_mult = _downscale_int16(int(m))
        if int(self.out_exp) > 0:
            raise self.fail("the output scale is too small for the input scale (LiteRT requires it)")
        m, self.relu_exp = quantize_multiplier(float(hires / F32(3.0 / 32768.0)))
        self.relu_mult = _downscale_int16(int(m))
        self.out_exp, self.relu_exp = int(self.out_exp), int(self.relu_exp)

    def eval(self, ins, outs):
        x = (ins[0].astype(np.int32) - np.int32(self.z)).astype(np.int16)
        hires = (x.astype(np.int32) * 128).astype(np.int16)
        preshift = _srdhm16(hires, self.out_mult)
        relu = hires
        if self.relu_exp > 0:
            relu = _saturating_left_shift16(relu, self.relu_exp - 1)
        relu = _srdhm16(relu, self.relu_mult)
        if self.relu_exp > 0:
            relu = _saturating_left_shift16(relu, 1)
        if self.relu_exp < 0:
            relu = _rdbpot16(relu, -self.relu_exp)
        relu = ((relu.astype(np.int32) + (1 << 15)) >> 1).astype(np.int16)
        # SaturatingDoublingHighMul: truncating division of the product by 2^15
        ab = relu.astype(np.int32) * preshift.astype(np.int32)
        product = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
        product = np.where((relu == -32768) & (preshift == -32768), 32767, product).astype(np.int16)
        values = _rdbpot16(product, -self.out_exp).astype(np.int64) + self.zo
        _clamp_into(values, *self.range, outs[0])


@register("PRELU", quantized=True)
class QuantizedPrelu(QuantizedKernel):
    """``x >= zp``: rescaled x; below: ``(x - zx) * (alpha - za)`` rescaled by ``sx * sa / so``."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, alpha = ins
        self.expect_quantized_dtype(x, *EIGHT_BIT)
        if alpha.dtype != x.dtype:
            raise self.fail(f"alpha {alpha.name!r} is {alpha.dtype.name}, the input {x.dtype.name}")
        (s, self.z), (sa, self.za) = self.per_tensor(x), self.per_tensor(alpha, "alpha")
        so, self.zo = self.output_params(x.dtype)
        self.m1 = quantize_multiplier(float(s / so))
        self.m2 = quantize_multiplier(float(s * sa / so))
        shape = broadcast_shape(x.shape, alpha.shape)
        if shape != tuple(x.shape):
            raise self.fail(f"alpha of shape {alpha.shape} broadcasts the input {x.shape} to {shape}")
        self.range = dtype_range(x.dtype)
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        x = ins[0].astype(np.int32) - np.int32(self.z)
        a = ins[1].astype(np.int32) - np.int32(self.za)
        values = np.where(x >= 0, mbqm(x, *self.m1), mbqm(x * a, *self.m2)).astype(np.int64) + self.zo
        _clamp_into(values, *self.range, outs[0])


# ----------------------------------------------------------------------------- pooling


class QuantizedPool2D(QuantizedKernel):
    """int8/uint8/int16 pooling over NHWC: input and output share quantization, so the
    values pool directly; the fused activation clamps in the output's quantized domain."""

    def prepare(self, ins):
        from numlite.kernels.conv import TapSource, filter_taps
        from numlite.kernels.pooling import pool_window

        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_quantized_dtype(x, INT8, UINT8, INT16)
        if x.ndim != 4:
            raise self.fail(f"input must have rank 4, got shape {x.shape}")
        s, z = self.per_tensor(x)
        so, zo = self.output_params(x.dtype)
        if (s, z) != (so, zo):
            raise self.fail(f"input ({s}, {z}) and output ({so}, {zo}) quantization differ")
        pads, strides, self.geometry = pool_window(self, x)
        n, c = x.shape[0], x.shape[3]
        oh, ow = self.geometry[2:4]
        self.range = activation_range(self.activation_code(), so, zo, x.dtype)
        pad = dtype_range(x.dtype)[0] if self.is_max else 0
        self.source = TapSource(x.shape, pads, (oh, ow), strides, (1, 1), x.dtype, pad)
        self.taps = filter_taps(*self.geometry[6:8])
        self.acc = np.empty((n, oh, ow * c), np.int32)
        return [Spec((n, oh, ow, c), x.dtype)]

    is_max = False

    def eval(self, ins, outs):
        out = outs[0]
        if out.size == 0:
            return
        self.source.fill(ins[0])
        acc = self.acc
        for i, (ky, kx) in enumerate(self.taps):
            if i == 0:
                np.copyto(acc, self.source.tap(ky, kx))
            elif self.is_max:
                np.maximum(acc, self.source.tap(ky, kx), out=acc)
            else:
                np.add(acc, self.source.tap(ky, kx), out=acc)
        self.finish(acc)
        np.clip(acc, *self.range, out=acc)
        np.copyto(out.reshape(acc.shape), acc, casting="unsafe")

    def finish(self, acc: np.ndarray) -> None:
        pass


@register("MAX_POOL_2D", quantized=True)
class QuantizedMaxPool2D(QuantizedPool2D):
    is_max = True


@register("AVERAGE_POOL_2D", quantized=True)
class QuantizedAveragePool2D(QuantizedPool2D):
    """Sum of the in-bounds window divided by its size, rounded half away from zero with
    C's truncating division (``(acc +- count / 2) / count``)."""

    def prepare(self, ins):
        from numlite.kernels.pooling import window_counts

        specs = super().prepare(ins)
        counts = window_counts(self.geometry)
        self.counts = np.repeat(counts.astype(np.int32), ins[0].shape[3], axis=1)
        return specs

    def finish(self, acc):
        half = self.counts // 2
        numerator = np.where(acc > 0, acc + half, acc - half)
        q = np.abs(numerator) // self.counts  # C division truncates toward zero
        acc[...] = np.where(numerator < 0, -q, q)


# ----------------------------------------------------------------------------- MEAN / SUM


def _c_divide(numerator: np.ndarray, divisor: int) -> np.ndarray:
    """C's integer division, truncating toward zero."""
    q = np.abs(numerator) // divisor
    return np.where(numerator < 0, -q, q)


class QuantizedReducer(QuantizedKernel):
    """Shared prepare of quantized MEAN and SUM: constant axes, per-tensor parameters."""

    def prepare(self, ins):
        from numlite.kernels.reduce import reduced_shape, resolve_axes

        self.expect_inputs(ins, 2)
        x, axis = ins
        self.expect_quantized_dtype(x, INT8, UINT8, INT16)
        if axis.value is None:
            raise self.fail("quantized reductions need constant axes")
        self.s, self.z = self.per_tensor(x)
        self.so, self.zo = self.output_params(x.dtype)
        if x.dtype == INT16 and (self.z or self.zo):
            raise self.fail("int16 quantized inputs and output need zero points of 0")
        self.axes = resolve_axes(axis.value, x.ndim)
        self.keep_dims = bool(self.options.keep_dims) if self.options is not None else False
        self.count = int(np.prod([x.shape[a] for a in self.axes], dtype=np.int64))
        self.dtype = x.dtype
        self.range = dtype_range(x.dtype)
        self.plan(x)
        return [Spec(reduced_shape(x.shape, self.axes, self.keep_dims), x.dtype)]

    def plan(self, x: TensorInfo) -> None:
        pass

    def sums(self, x: np.ndarray, offset: int = 0) -> np.ndarray:
        """int32 sums over the axes (LiteRT accumulates in int32), shaped as the output."""
        values = x.astype(np.int32)
        if offset:
            values -= np.int32(offset)
        total = np.sum(values, axis=self.axes, dtype=np.int64, keepdims=self.keep_dims)
        return total.astype(np.int32)  # int32 accumulator: wraps as in C++

    def float_rescale(self, sums: np.ndarray, mean: bool) -> np.ndarray:
        """QuantizedMeanOrSum's float path: ``round(value * scale + bias) + zo``."""
        scale = self.s / self.so  # float division
        n = F32(self.count)
        if mean:
            bias = F32(-self.z) * scale
            value = sums.astype(F32) / n
        else:
            bias = F32(-self.z) * scale * n
            value = sums.astype(F32)
        return round_half_away(value * scale + bias)


@register("MEAN", quantized=True)
class QuantizedMean(QuantizedReducer):
    """LiteRT's three reference paths: the H and W mean of a 4-D tensor (integer multiplier),
    equal input and output parameters (integer sum divided, truncating), and the general
    float rescale."""

    def plan(self, x):
        self.hw = self.keep_dims and x.ndim == 4 and sorted(self.axes) == [1, 2] and len(self.axes) == 2
        self.same = (self.s, self.z) == (self.so, self.zo)
        self.mult, self.shift = quantize_multiplier(float(self.s) / float(self.so))

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            out.fill(0)
            return
        if self.hw:
            acc = mbqm(self.sums(x, self.z), self.mult, self.shift).astype(np.int64)
            half = self.count // 2
            acc = _c_divide(np.where(acc > 0, acc + half, acc - half), self.count) + self.zo
        elif self.same:
            acc = _c_divide(self.sums(x).astype(np.int64), self.count)
        else:
            acc = np.clip(self.float_rescale(self.sums(x), True) + F32(self.zo), *self.range).astype(np.int64)
        _clamp_into(acc.reshape(out.shape), *self.range, out)


@register("SUM", quantized=True)
class QuantizedSum(QuantizedReducer):
    """8-bit SUM with other output parameters rescales through float (no saturation: the
    result is narrowed, wrapping, as LiteRT's kernel does); with equal parameters the int32
    sum saturates to the type."""

    def plan(self, x):
        self.same = (self.s, self.z) == (self.so, self.zo)
        if self.dtype == INT16 and not self.same:
            raise self.fail("int16 SUM needs equal input and output quantization")

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        sums = self.sums(x)
        if self.same:  # LiteRT's default kernel saturates the sum
            _clamp_into(sums.reshape(out.shape).astype(np.int64), *self.range, out)
            return
        value = self.float_rescale(sums, False).astype(np.int64) + self.zo
        out[...] = value.reshape(out.shape).astype(np.int32).astype(self.dtype)
