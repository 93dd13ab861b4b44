"""Full-integer kernels: int8/uint8 (and int16 "16x8") tensors with affine quantization.

Each class is registered with ``quantized=True`` beside the op's float kernel (see
``numlite.kernels.base``), so a node whose input carries a scale runs here. The arithmetic is
that of LiteRT's reference kernels: prepare computes the same fixed-point multipliers from the
same float/double expressions (the precision of each intermediate matters: LiteRT mixes float
and double), eval applies ``numlite.kernels.fixed_point`` vectorised over int32/int64 arrays.
"""

from __future__ import annotations

import math

import numpy as np

from numlite.errors import InvalidInputError
from numlite.kernels.base import Kernel, Spec, TensorInfo, broadcast_shape, has_scale, register
from numlite.kernels.clamp import clip_ufunc
from numlite.kernels.fixed_point import (
    activation_range,
    inv_sqrt_multiplier,
    dtype_range,
    count_leading_sign_bits32,
    float_to_int32,
    get_reciprocal,
    multiply_by_quantized_multiplier as mbqm,
    multiply_by_quantized_multiplier_int64 as mbqm64,
    quantize_multiplier,
    round_half_away,
    rounding_divide_by_pot_any,
    saturating_rounding_doubling_high_mul,
)
from numlite.kernels.scratchpad import ScratchUser

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

    def unary_params(self, ins, dtypes: tuple) -> tuple[TensorInfo, np.float32, int, np.float32, int]:
        """The one input of an element-wise op (of ``dtypes``) and the per-tensor ``(scale,
        zero_point)`` of it and of the output (of its dtype)."""
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_quantized_dtype(x, *dtypes)
        s, z = self.per_tensor(x)
        so, zo = self.output_params(x.dtype)
        return x, s, z, so, zo

    def expect_quantized_dtype(self, t: TensorInfo, *allowed: np.dtype) -> None:
        if t.dtype not in allowed:
            names = ", ".join(np.dtype(a).name for a in allowed)
            raise self.fail(f"quantized input {t.name!r} has dtype {t.dtype.name}; supported: {names}")


def _clamp_into(values: np.ndarray, low: int, high: int, out: np.ndarray) -> None:
    values = np.asarray(values)  # NumPy arithmetic on 0-d arrays returns scalars
    bound = values.dtype.type
    clip_ufunc(values, bound(low), bound(high), out=out, casting="unsafe")  # one call, not np.clip's few


# ----------------------------------------------------------------------------- QUANTIZE


@register("QUANTIZE")
class Quantize(QuantizedKernel):
    """float32 -> int8/uint8/int16 (``x / scale`` rounded to nearest, halves to even, plus the
    zero point, saturated; per channel too, with one scale and zero point along the output's
    ``quantized_dimension``), or integer -> integer requantization with another scale/zero point."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        out = self.output()
        if out.dtype not in (INT8, UINT8, INT16):
            raise self.fail(f"output {out.name!r} has dtype {out.dtype.name}; supported: int8, uint8, int16")
        self.range = dtype_range(out.dtype)
        if x.dtype == np.float32 and has_scale(out) and len(out.quantization.scale) > 1:
            self._prepare_per_channel(x, out)
            return [Spec(x.shape, out.dtype)]
        self.per_channel = False
        self.out_scale, self.out_zp = self.per_tensor(out, "output")
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

    def _prepare_per_channel(self, x: TensorInfo, out: TensorInfo) -> None:
        """LiteRT's PerChannelQuantize: scales along ``quantized_dimension``, one zero point each
        (or the first one for all when fewer are given)."""
        q = out.quantization
        scale = np.asarray(q.scale, F32)
        zp = np.asarray(q.zero_point if q.zero_point is not None and len(q.zero_point) else [0], np.int64)
        if len(zp) != len(scale):
            zp = np.full(len(scale), zp[0])
        dim = int(q.quantized_dimension)
        if not 0 <= dim < len(x.shape) or x.shape[dim] != len(scale):
            raise self.fail(f"output {out.name!r} has {len(scale)} scales along dimension {dim}, "
                            f"which does not fit shape {x.shape}")
        view = [1] * len(x.shape)
        view[dim] = len(scale)
        self.per_channel, self.requantize = True, False
        self.out_scale, self.out_zp = scale.reshape(view), zp.reshape(view)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if self.per_channel:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                # int32 of the rounded float quotient (INT32_MIN when out of range, as on x86)
                values = float_to_int32(round_half_away(np.divide(x, self.out_scale, dtype=F32))) + self.out_zp
            _clamp_into(values, *self.range, out)
            return
        if self.requantize:
            values = mbqm(x.astype(np.int32) - np.int32(self.in_zp), self.mult, self.shift).astype(np.int64) + self.out_zp
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                # LiteRT rounds the float32 quotient to nearest, halves to even (both its
                # paths: 0.125 at scale 0.25 gives 0, 0.625 gives 2; tests/test_jit_quantized.py)
                q = np.rint(np.divide(x, self.out_scale, dtype=F32))
                # saturate in float first: a huge quotient has no int64 value
                q = np.clip(np.nan_to_num(q, nan=0.0), -(2.0**40), 2.0**40)
            values = q.astype(np.int64) + self.out_zp
        _clamp_into(values, *self.range, out)


# ----------------------------------------------------------------------------- ADD / SUB / MUL

# 8-bit ADD, SUB and MUL of at least this many output values look their results up in a table
# of all 65536 input pairs, made at prepare by the op's own fixed-point arithmetic (so exact by
# construction): two casts, a shift-or and a gather, where that arithmetic takes some thirty
# passes over int32/int64 arrays. Every size gains: the arithmetic costs 20-25 us a call even
# on a few values (int8 MobileNetV2's ADDs over 3x3x32: 33-39 us, the lookup 4-5), the table
# 0.2 ms once at prepare and 64 KiB.
PAIR_TABLE_FROM = 1


class PairTable(ScratchUser):
    """Mixin of 8-bit binary kernels: ``compute(a, b, out)`` is the op's arithmetic; ``eval``
    runs it, or the table lookup that :meth:`plan_table` prepared (its index array is
    working memory)."""

    table: np.ndarray | None = None

    def compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        raise NotImplementedError

    def plan_table(self, dtype: np.dtype, out_shape: tuple[int, ...]) -> None:
        self.table = None
        if dtype in EIGHT_BIT and int(np.prod(out_shape, dtype=np.int64)) >= PAIR_TABLE_FROM:
            values = np.arange(256, dtype=np.uint8).view(dtype)  # in the order of their bits
            pairs = np.empty((256, 256), dtype)
            self.compute(values[:, None], values[None, :], pairs)
            self.table = pairs.reshape(-1)  # at (bits of a) * 256 + (bits of b)
            self.want_scratch([(tuple(out_shape), np.uint16)])  # (np.take reads these as fast as intp)
        else:
            self.want_scratch([])

    def eval(self, ins, outs):
        if self.table is None:
            self.compute(ins[0], ins[1], outs[0])
            return
        if self.scratch_stale():
            self.index = self.take_scratch()[0]
        index = self.index
        np.copyto(index, ins[0].view(np.uint8), casting="unsafe")
        np.left_shift(index, 8, out=index)
        np.bitwise_or(index, ins[1].view(np.uint8), out=index)
        np.take(self.table, index, out=outs[0], mode="clip")  # in range: "clip" skips a check copy


class QuantizedAddSub(PairTable, QuantizedKernel):
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
        shape = broadcast_shape(a.shape, b.shape)
        self.plan_table(a.dtype, shape)
        return [Spec(shape, a.dtype)]

    def _scaled(self, x: np.ndarray, p: tuple) -> np.ndarray:
        zp, m, shift = p
        shifted = (x.astype(np.int32) - np.int32(zp)) * np.int32(1 << self.left_shift)
        return mbqm(shifted, m, shift)

    def compute(self, a, b, out):
        a = self._scaled(a, self.inputs_params[0])
        b = self._scaled(b, self.inputs_params[1])
        raw = a + b if self.sign > 0 else a - b
        zo, mo, sho = self.out_params
        values = mbqm(raw, mo, sho).astype(np.int64) + zo
        _clamp_into(np.broadcast_to(values, out.shape).copy(), *self.range, out)


@register("ADD", quantized=True)
class QuantizedAdd(QuantizedAddSub):
    sign = 1


@register("SUB", quantized=True)
class QuantizedSub(QuantizedAddSub):
    sign = -1


@register("MUL", quantized=True)
class QuantizedMul(PairTable, QuantizedKernel):
    """``(a - za) * (b - zb)`` rescaled by ``sa * sb / so`` (computed in float, as mul.cc)."""

    def prepare(self, ins):
        a, b = self.same_dtype_pair(ins)
        (s1, self.z1), (s2, self.z2) = self.per_tensor(a), self.per_tensor(b)
        so, self.zo = self.output_params(a.dtype)
        self.mult, self.shift = quantize_multiplier(float(s1 * s2 / so))
        self.range = activation_range(self.activation_code(), so, self.zo, a.dtype)
        shape = broadcast_shape(a.shape, b.shape)
        self.plan_table(a.dtype, shape)
        return [Spec(shape, a.dtype)]

    def compute(self, a, b, out):
        a = a.astype(np.int32) - np.int32(self.z1)
        b = b.astype(np.int32) - np.int32(self.z2)
        values = mbqm(a * b, self.mult, self.shift).astype(np.int64) + self.zo
        _clamp_into(np.broadcast_to(values, out.shape).copy(), *self.range, out)


@register("DIV", quantized=True)
class QuantizedDiv(PairTable, QuantizedKernel):
    """``(a - za) / (b - zb)`` as LiteRT's DivElementwise: the divisor's fixed-point reciprocal
    (GetReciprocal), the dividend shifted to its headroom and multiplied by it, rescaled by
    ``sa / (sb * so)`` (float arithmetic, then double), plus ``zo``, clamped to the activation.
    A divisor equal to its zero point fails at invoke, as in LiteRT."""

    def prepare(self, ins):
        a, b = self.same_dtype_pair(ins)
        (s1, self.z1), (s2, self.z2) = self.per_tensor(a), self.per_tensor(b)
        so, self.zo = self.output_params(a.dtype)
        self.mult, self.shift = quantize_multiplier(float(s1 / (s2 * so)))
        self.range = activation_range(self.activation_code(), so, self.zo, a.dtype)
        shape = broadcast_shape(a.shape, b.shape)
        self.plan_table(a.dtype, shape)  # the pairs with b == zb give garbage, never read
        return [Spec(shape, a.dtype)]

    def compute(self, a, b, out):
        a = a.astype(np.int64) - self.z1
        b = b.astype(np.int64) - self.z2
        a = np.where(b < 0, -a, a)  # a positive divisor: its reciprocal is a multiplier
        b = np.where(b == 0, 1, np.abs(b))
        inverse, recip_shift = get_reciprocal(b, 31)
        headroom = count_leading_sign_bits32(a)
        unscaled = mbqm(a, inverse, headroom)
        total_shift = self.shift - recip_shift - headroom  # below -31 for small quotients
        left = np.maximum(total_shift, 0)
        high = saturating_rounding_doubling_high_mul(_wrap32(unscaled.astype(np.int64) << left), self.mult)
        values = rounding_divide_by_pot_any(high, np.maximum(-total_shift, 0)).astype(np.int64) + self.zo
        _clamp_into(np.broadcast_to(values, out.shape).copy(), *self.range, out)

    def eval(self, ins, outs):
        if np.any(ins[1] == self.z2):
            raise InvalidInputError(f"DIV by zero: the divisor holds its zero point {self.z2}")
        super().eval(ins, outs)


@register("SQUARED_DIFFERENCE", quantized=True)
class QuantizedSquaredDifference(PairTable, QuantizedKernel):
    """int8 ``(a - b)**2`` as LiteRT's squared_difference.cc: both inputs shifted left 7 bits and
    rescaled to twice the larger input scale, their difference squared, rescaled by ``(2 max
    scale)**2 / (2**14 so)``, plus ``zo``, saturated. LiteRT has no uint8 or int16 form."""

    left_shift = 7

    def prepare(self, ins):
        a, b = self.same_dtype_pair(ins)
        if a.dtype != INT8:
            raise self.fail(f"quantized SQUARED_DIFFERENCE takes int8 inputs, got {a.dtype.name}")
        (s1, z1), (s2, z2) = self.per_tensor(a), self.per_tensor(b)
        so, self.zo = self.output_params(a.dtype)
        twice_max = float(F32(2) * max(s1, s2))  # float, then double
        self.inputs_params = ((z1, *quantize_multiplier(float(s1) / twice_max)),
                              (z2, *quantize_multiplier(float(s2) / twice_max)))
        self.out_mult = quantize_multiplier(twice_max * twice_max / float(F32(1 << 2 * self.left_shift) * so))
        self.range = dtype_range(a.dtype)
        shape = broadcast_shape(a.shape, b.shape)
        self.plan_table(a.dtype, shape)
        return [Spec(shape, a.dtype)]

    def compute(self, a, b, out):
        scaled = [mbqm((x.astype(np.int32) - np.int32(z)) * np.int32(1 << self.left_shift), m, sh)
                  for x, (z, m, sh) in zip((a, b), self.inputs_params)]
        diff = scaled[0].astype(np.int64) - scaled[1]
        values = mbqm(_wrap32(diff * diff), *self.out_mult).astype(np.int64) + self.zo
        _clamp_into(np.broadcast_to(values, out.shape).copy(), *self.range, out)


# ----------------------------------------------------------------------------- activations


class QuantizedUnary(QuantizedKernel):
    """One int8/uint8 (``dtypes``) input, one output of its shape and dtype with its own
    quantization; subclasses set up in ``setup(in_scale, in_zp, out_scale, out_zp)``.

    An 8-bit input has 256 values, so prepare runs the subclass's own ``eval`` on all of them
    once and every later eval is one lookup in that table (exact by construction; HARD_SWISH's
    fixed-point chain over 48x48x16 values is some twenty passes). ``tabulate = False`` for a
    kernel that is a table already."""

    dtypes: tuple = EIGHT_BIT
    tabulate = True

    def prepare(self, ins):
        x, s, z, so, zo = self.unary_params(ins, self.dtypes)
        self.range = dtype_range(x.dtype)
        self.setup(s, z, so, zo, x.dtype)
        self.__dict__.pop("eval", None)  # the class's arithmetic, unless tabulated below
        self.values_table: np.ndarray | None = None
        if self.tabulate and x.dtype in EIGHT_BIT:
            table = np.empty(256, x.dtype)
            self.eval([np.arange(256, dtype=np.uint8).view(x.dtype)], [table])  # every value, by its bits
            self.values_table = table
            self.eval = self._look_up  # type: ignore[method-assign]
        return [Spec(x.shape, x.dtype)]

    def _look_up(self, ins, outs):
        np.take(self.values_table, ins[0].view(np.uint8), out=outs[0], mode="clip")

    def setup(self, s, z, so, zo, dtype) -> None:
        raise NotImplementedError


def _expect_symmetric_int16(kernel: QuantizedKernel, z: int, zo: int, dtype: np.dtype) -> None:
    if dtype == INT16 and (z or zo):
        raise kernel.fail("int16 quantized input and output need zero points of 0")


class QuantizedReluX(QuantizedUnary):
    """``clamp(zo + M * (x - z))`` to the quantized [low, high] of the activation (int16 too,
    for RELU and RELU6 as LiteRT)."""

    dtypes = (INT8, UINT8, INT16)
    low: float = 0.0
    high: float = np.inf

    def setup(self, s, z, so, zo, dtype):
        _expect_symmetric_int16(self, z, zo, dtype)
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
    dtypes = EIGHT_BIT  # LiteRT has no int16 form
    low, high = -1.0, 1.0


@register("RELU_0_TO_1", quantized=True)
class QuantizedRelu0To1(QuantizedReluX):
    dtypes = EIGHT_BIT  # LiteRT has no int16 form
    low, high = 0.0, 1.0


@register("LEAKY_RELU", quantized=True)
class QuantizedLeakyRelu(QuantizedUnary):
    """Identity multiplier for ``x >= zp``, ``alpha`` multiplier below (float products as in
    LiteRT's prepare); int16 too."""

    dtypes = (INT8, UINT8, INT16)

    def setup(self, s, z, so, zo, dtype):
        _expect_symmetric_int16(self, z, zo, dtype)
        self.z, self.zo = z, zo
        alpha = F32(getattr(self.options, "alpha", 0.0) or 0.0)
        self.alpha = quantize_multiplier(float(s * alpha / so))
        self.identity = quantize_multiplier(float(s / so))

    def eval(self, ins, outs):
        x = ins[0].astype(np.int32) - np.int32(self.z)
        values = np.where(x >= 0, mbqm(x, *self.identity), mbqm(x, *self.alpha)).astype(np.int64) + self.zo
        _clamp_into(values, *self.range, outs[0])


def lut_8bit(dtype: np.dtype, s, z, so, zo, transform) -> np.ndarray:
    """LiteRT's LUTPopulate for 8-bit types: each possible input dequantized (float), transformed,
    divided by the output scale (as a product with its float inverse), rounded, saturated.
    Indexed by the input's byte (``x.view(uint8)``)."""
    qmin, qmax = dtype_range(dtype)
    values = np.arange(qmin, qmax + 1, dtype=np.int32)
    dequantized = s * (values - np.int32(z)).astype(F32)
    transformed = transform(dequantized).astype(F32)
    inverse = F32(1) / so
    with np.errstate(invalid="ignore"):
        rescaled = round_half_away(transformed * inverse).astype(F32) + F32(zo)
    # an entry out of int32's range (inf) becomes INT32_MIN, so saturates to the minimum
    quantized = np.clip(float_to_int32(rescaled), qmin, qmax)
    table = np.empty(256, dtype)
    table[values.astype(dtype).view(np.uint8)] = quantized.astype(dtype)
    return table


def _sigmoid_f32(x: np.ndarray) -> np.ndarray:
    # expf rounded once (float64 exp is accurate enough to round to the float32 result)
    e = np.exp(-x.astype(np.float64)).astype(F32)
    return F32(1) / (F32(1) + e)


def _tanh_f32(x: np.ndarray) -> np.ndarray:
    return np.tanh(x.astype(np.float64)).astype(F32)


# LiteRT's table of 65536 * sigmoid(i / 24), i = 0..255, as its int16 LOGISTIC and TANH read it.
# Some entries differ by one from exact rounding (and the last is saturated), so exactness needs
# the very values rather than a formula.
_SIGMOID_TABLE_UINT16 = np.array(
    [
        32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432,
        42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475,
        49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485,
        55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519,
        59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036,
        62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
        63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405,
        64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
        64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179,
        65194, 65208, 65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337,
        65345, 65352, 65360, 65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
        65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
        65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
        65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517,
        65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525, 65525,
        65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
        65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533,
        65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
        65534, 65534, 65534, 65535,
    ],
    np.int64,
)


def _checked_log2(x: np.float32) -> tuple[int, bool]:
    """CheckedLog2 in float: the rounded log2 of ``x`` and whether ``x`` is a power of two."""
    log2 = F32(np.log(F32(x))) * (F32(1) / F32(np.log(F32(2))))
    rounded = F32(round_half_away(log2))
    return int(rounded), bool(abs(F32(log2 - rounded)) < F32(1e-3))


def _interpolate_sigmoid(magnitude: np.ndarray, fraction_bits: int) -> np.ndarray:
    """The table read at ``magnitude / 2**fraction_bits``, linearly interpolated in
    ``fraction_bits`` bits, saturated past the table's end (uint32 arithmetic as LiteRT)."""
    high = magnitude >> fraction_bits
    inside = np.minimum(high, 254)
    low_value = _SIGMOID_TABLE_UINT16[inside]
    step = _SIGMOID_TABLE_UINT16[inside + 1] - low_value
    interpolated = (low_value << fraction_bits) + (magnitude & ((1 << fraction_bits) - 1)) * step
    return np.where(high >= 255, np.int64(-1), interpolated)  # -1: saturated, the caller's constant


class QuantizedLut(QuantizedUnary):
    """8-bit activations computed through a 256-entry table built at prepare; int16 ones (zero
    points 0, output scale 2**-15) by LiteRT's fixed-point interpolation in its sigmoid table,
    the input first rescaled to units of 1 / (3 * 4096) (``(x * multiplier) >> shift``)."""

    dtypes = (INT8, UINT8, INT16)
    tabulate = False  # its own table
    transform = None
    # LOGISTIC accepts a power-of-two input scale as is only at shift 0, TANH also at 1
    power_of_two_shifts: tuple = (0,)

    def setup(self, s, z, so, zo, dtype):
        if dtype == INT16:
            self._setup_int16(s, z, so, zo)
        else:
            self.table = lut_8bit(dtype, s, z, so, zo, type(self).transform)

    def _setup_int16(self, s, z, so, zo) -> None:
        _expect_symmetric_int16(self, z, zo, INT16)
        log2_out, pot_out = _checked_log2(so)
        if not pot_out or log2_out != -15:
            raise self.fail(f"int16 output scale must be 2**-15, got {so}")
        log2_in, pot = _checked_log2(s)
        shift = 12 + log2_in  # (15 - 3 integer bits) + log2(scale)
        if pot and shift in self.power_of_two_shifts:
            self.multiplier, self.shift = 3 << shift, 0
            return
        multiplier = float(s) * 4096.0 * 3.0  # double, as LiteRT's prepare
        shift = 0
        while multiplier <= 32767.0 / 2.0 and shift <= 30:
            shift += 1
            multiplier *= 2.0
        self.multiplier, self.shift = int(multiplier), shift

    def rescaled_int16(self, x: np.ndarray) -> np.ndarray:
        rounding = (1 << (self.shift - 1)) if self.shift > 0 else 0
        # int32 arithmetic in LiteRT: |x| * multiplier stays below 2**31 by construction
        return (x.astype(np.int64) * self.multiplier + rounding) >> self.shift

    def eval(self, ins, outs):
        if ins[0].dtype == INT16:
            outs[0][...] = self.eval_int16(self.rescaled_int16(ins[0]))
        else:
            np.take(self.table, ins[0].view(np.uint8), out=outs[0], mode="clip")  # 256 entries: always in range

    def eval_int16(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@register("LOGISTIC", quantized=True)
class QuantizedLogistic(QuantizedLut):
    transform = staticmethod(_sigmoid_f32)

    def eval_int16(self, x):
        """sigmoid(|x|) from the table (9 interpolation bits: the input's 7 fraction bits and the
        table's 1/4 step), mirrored to 1 - sigmoid for negative x, in Q0.15."""
        result = _interpolate_sigmoid(np.abs(x), 9)
        result = np.where(result < 0, np.int64(0x7FFF << 10), result)
        result = np.where(x >= 0, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1)
        return (result >> 10).astype(np.int16)


@register("TANH", quantized=True)
class QuantizedTanh(QuantizedLut):
    transform = staticmethod(_tanh_f32)
    power_of_two_shifts = (0, 1)

    def eval_int16(self, x):
        """tanh(x) = 2 sigmoid(2x) - 1: the same table read with 8 interpolation bits."""
        result = _interpolate_sigmoid(np.abs(x), 8)
        result = np.where(result < 0, np.int64(0xFFFF << 8), result)
        result = np.where(x >= 0, result - (1 << 23) + (1 << 7), -result + (1 << 23) + (1 << 7) - 1)
        return (result >> 8).astype(np.int16)


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
        self.rows_shape = (n, oh, ow * c)
        self.clamped = tuple(self.range) != tuple(dtype_range(x.dtype))  # a fused activation narrower than the type
        self.acc = None if self.is_max else np.empty(self.rows_shape, np.int32)
        return [Spec((n, oh, ow, c), x.dtype)]

    is_max = False

    def eval(self, ins, outs):
        out = outs[0]
        if out.size == 0:
            return
        self.source.fill(ins[0])
        if self.is_max:  # maxima of the input's own values: no wider type, straight into the output
            self._max_into(out.reshape(self.rows_shape))
            return
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

    def _max_into(self, out: np.ndarray) -> None:
        first, *rest = self.taps
        np.copyto(out, self.source.tap(*first))
        for ky, kx in rest:
            np.maximum(out, self.source.tap(ky, kx), out=out)
        if self.clamped:
            bound = out.dtype.type
            clip_ufunc(out, bound(self.range[0]), bound(self.range[1]), out=out)

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


def _wrap32(values: np.ndarray) -> np.ndarray:
    """int64 values narrowed to int32 with two's-complement wrap (C++ int arithmetic)."""
    return values.astype(np.int32)


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

    def sums(self, x: np.ndarray) -> np.ndarray:
        """int32 sums over the axes (LiteRT accumulates in int32), shaped as the output."""
        total = np.sum(x, axis=self.axes, dtype=np.int64, keepdims=self.keep_dims)
        return _wrap32(total)


# 8-bit MEANs over at most this many values per output look their results up in a table of
# every possible sum (count * 255 + 1 entries of one byte: at most 256 KiB, made in 6 ms).
MEAN_TABLE_COUNT = 1 << 10


@register("MEAN", quantized=True)
class QuantizedMean(QuantizedReducer):
    """LiteRT's reference QuantizedMeanOrSum, all in integers: the int32 sum less ``count``
    input zero points, times ``s / so`` folded with ``1 / count`` into one multiplier (the
    multiplier shifted left by floor(log2(count)), at most 32 and at most ``31 + shift``, then
    divided by ``count``), plus the output zero point, saturated. LiteRT's default kernels
    rescale through float (and a special integer path for the H, W mean of 4-D int8); they
    differ from this by at most one quantum."""

    def plan(self, x):
        mult, shift = quantize_multiplier(float(self.s) / float(self.so))  # double division
        mult, shift = int(mult), int(shift)
        if self.count > 0:
            extra = min(self.count.bit_length() - 1, 32, 31 + shift)
            mult = (mult << extra) // self.count  # int64 division of positive values
            shift -= extra
        self.mult, self.shift = mult, shift
        # Every sum of ``count`` 8-bit values, rescaled once here by the arithmetic below: then
        # a MEAN is a sum and one lookup (int8 MobileNetV2's 3x3x1280 over H, W: 31 -> 9 us).
        self.table = None
        if self.dtype in EIGHT_BIT and 0 < self.count <= MEAN_TABLE_COUNT:
            low, high = self.range
            self.lowest = self.count * low
            sums = np.arange(self.lowest, self.count * high + 1, dtype=np.int64)
            self.table = np.empty(sums.shape, self.dtype)
            self.rescale(sums, self.table)

    def rescale(self, sums: np.ndarray, out: np.ndarray) -> None:
        """``out`` (any shape of ``sums``' size) = the means of int32 ``sums``."""
        shifted = _wrap32(sums.astype(np.int64) - self.z * self.count)
        values = mbqm(shifted, self.mult, self.shift).astype(np.int64) + self.zo
        _clamp_into(values.reshape(out.shape), *self.range, out)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            out.fill(0)
            return
        if self.table is None:
            self.rescale(self.sums(x), out)
            return
        sums = np.add.reduce(x, axis=self.axes, dtype=np.int32, keepdims=True)  # exact: count * 255 fits
        np.subtract(sums, self.lowest, out=sums)
        np.take(self.table, sums, out=out.reshape(sums.shape), mode="clip")  # in range: "clip" skips a check copy


@register("SUM", quantized=True)
class QuantizedSum(QuantizedReducer):
    """LiteRT's default SUM kernel (optimized QuantizedMeanOrSum): with other output parameters
    the int32 sum rescales through float, ``round(sum * s / so - z * s / so * count) + zo``
    (int8, uint8 and int16 alike); with equal parameters the result is the int32 sum itself.
    Either saturates to the type.

    Not the reference kernel: ai-edge-litert 2.3's BUILTIN_REF SUM of int8/int16 tensors gives
    erratic values (an all-zero int16 input sums to 0, the same input with one nonzero element
    gives -23105 in unrelated outputs; tests/test_quantized_ops.py shows it), and its uint8 SUM
    rescales in integers (within one quantum of this); numlite follows the default kernels bit
    for bit."""

    def plan(self, x):
        self.same = (self.s, self.z) == (self.so, self.zo)
        self.scale = self.s / self.so  # float division, float arithmetic
        # -zero_point * scale * count: int times float, then times the count as a float
        self.bias = F32(-self.z) * self.scale * F32(self.count)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        sums = self.sums(x)
        if self.same:  # LiteRT's default kernel saturates the sum
            _clamp_into(sums.reshape(out.shape).astype(np.int64), *self.range, out)
            return
        value = round_half_away(sums.astype(F32) * self.scale + self.bias).astype(np.int64) + self.zo
        _clamp_into(value.reshape(out.shape), *self.range, out)


@register("REDUCE_PROD", quantized=True)
class QuantizedReduceProd(QuantizedReducer):
    """LiteRT's QuantizedReduceProd (int8, int16): each output starts at its first ``x - z`` and
    takes the next values in the input's order, ``MBQM64(product * (x - z))`` after each, then
    once more at the end, plus ``zo``, saturated. The multiplier is ``s / so**(1 / count)``
    (double), so ``count`` rescalings give ``s**count / so``. No axes: a copy."""

    def prepare(self, ins):
        if ins and ins[0] is not None and ins[0].dtype == UINT8:
            raise self.fail("quantized REDUCE_PROD takes int8 or int16 inputs, not uint8")
        return super().prepare(ins)

    def plan(self, x):
        self.mult, self.shift = 0, 0
        if self.count > 0:
            self.mult, self.shift = (int(v) for v in quantize_multiplier(
                float(self.s) / math.pow(float(self.so), 1.0 / self.count)))

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if not self.axes:
            out[...] = x.reshape(out.shape)
            return
        if x.size == 0:
            out.fill(0)  # LiteRT leaves such an output unwritten
            return
        kept = [a for a in range(x.ndim) if a not in self.axes]
        # reduced values of each output in the input's (row-major) order, as LiteRT reads them
        rows = np.transpose(x, kept + sorted(self.axes)).reshape(-1, self.count).astype(np.int64) - self.z
        product = rows[:, 0]
        for k in range(1, self.count):
            product = mbqm64(product * rows[:, k], self.mult, self.shift).astype(np.int64)
        values = mbqm64(product, self.mult, self.shift).astype(np.int64) + self.zo
        _clamp_into(values.reshape(out.shape), *self.range, out)


# ----------------------------------------------------------------------------- L2_NORMALIZATION


@register("L2_NORMALIZATION", quantized=True)
class QuantizedL2Normalization(QuantizedKernel):
    """``x - zp`` over the last axis times ``1 / sqrt(sum((x - zp)**2))`` (a fixed-point
    multiplier per row, LiteRT's GetInvSqrtQuantizedMultiplierExp), on the output scale 1/128:
    uint8 ``128 + (128 * d) * inv`` (zero point 128), int8 ``d * inv * 2**7`` (zero point 0),
    saturated, as LiteRT's reference kernels."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_quantized_dtype(x, *EIGHT_BIT)
        if x.ndim < 1:
            raise self.fail(f"input {x.name!r} must have rank 1 or more, got a scalar")
        if self.activation_code() != 0:
            raise self.fail(f"fused activation {self.activation_code()} is not supported by L2_NORMALIZATION")
        _, self.z = self.per_tensor(x)
        so, zo = self.output_params(x.dtype)
        expected_zo = 128 if x.dtype == UINT8 else 0
        if so != F32(1.0 / 128.0) or zo != expected_zo:
            raise self.fail(f"the output needs scale 1/128 and zero point {expected_zo}, got {so} and {zo}")
        self.range = dtype_range(x.dtype)
        self.inv_sqrt = inv_sqrt_multiplier  # LiteRT's GetInvSqrtQuantizedMultiplierExp
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        diff = x.reshape(-1, x.shape[-1]).astype(np.int32) - np.int32(self.z)
        squares = _wrap32(np.sum(diff.astype(np.int64) ** 2, axis=1, keepdims=True))
        inv, shift = self.inv_sqrt(squares)
        if x.dtype == UINT8:
            values = mbqm(diff * np.int32(128), inv, shift).astype(np.int64) + 128
        else:
            values = mbqm(diff, inv, shift + 7).astype(np.int64)
        _clamp_into(values.reshape(out.shape), *self.range, out)
