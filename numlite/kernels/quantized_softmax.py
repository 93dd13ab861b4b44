"""Quantized SOFTMAX (int8/uint8 in gemmlowp fixed point, int16 through interpolated tables) and
LOG_SOFTMAX (int8/uint8, the same fixed-point exp sum, then gemmlowp's log of it).

Both follow LiteRT's reference kernels (``BUILTIN_REF``), the int8 one as ai-edge-litert 2.3
really runs it: an input multiplier and left shift from PreprocessSoftmaxScaling (beta times the
input scale, Q5.26 differences), ``exp`` of each difference to the row maximum by
exp_on_negative_values, a Q12.19 sum, its reciprocal by Newton-Raphson, and the output
``exp * reciprocal`` shifted to the 1/256 scale. LiteRT's default kernels use a float table for
int8 instead; they differ by at most one quantum, which the tests check.
The int16 kernel (16x8 models) uses two 513-entry tables built in prepare (``exp`` on [-10, 0]
and ``1 / (1 + x)`` on [0, 1]), with linear interpolation between entries.
"""

from __future__ import annotations

import math

import numpy as np

from numlite.kernels.base import Spec, register
from numlite.kernels.fixed_point import (
    INT32_MAX,
    INT32_MIN,
    count_leading_zeros32,
    dtype_range,
    exp_on_negative_values,
    multiply_by_quantized_multiplier,
    one_over_one_plus_x_for_x_in_0_1,
    quantize_multiplier,
    rescale,
    rounding_divide_by_pot,
    rounding_half_sum,
    round_half_away,
    saturating_rounding_doubling_high_mul,
    wrapping_add,
)
from numlite.kernels.quantized import EIGHT_BIT, F32, INT16, QuantizedKernel

_SCALED_DIFF_INTEGER_BITS = 5  # differences in Q5.26 before exp
_ACCUMULATION_INTEGER_BITS = 12  # the sum of exps in Q12.19


def lut_int16(transform, input_scale: float, input_zp: int, output_scale: float, output_zp: int) -> np.ndarray:
    """LiteRT's 513-entry int16 table (LUTPopulate in double): 512 samples of ``transform`` over
    the input's int16 range, each nudged by half the error of linear interpolation at its
    interval's midpoint, and the value at the range's end."""
    input_min = input_scale * (-32768 - input_zp)
    input_max = input_scale * (32767 - input_zp)
    output_min = output_scale * (-32768 - output_zp)
    output_max = output_scale * (32767 - output_zp)
    step = (input_max - input_min) / 512
    inverse = 65536.0 / (output_max - output_min)
    i = np.arange(512, dtype=np.float64)
    value = transform(input_min + i * step)
    midpoint = transform(input_min + i * step + step / 2)
    following = transform(input_min + (i + 1) * step)
    sample = round_half_away(value * inverse)
    interpolated = round_half_away((following * inverse + sample) / 2)
    bias = round_half_away((interpolated - round_half_away(midpoint * inverse)) / 2)
    table = np.empty(513, np.int16)
    table[:512] = np.clip(sample - bias, -32768, 32767)
    table[512] = np.clip(round_half_away(transform(np.float64(input_max)) * inverse), -32768, 32767)
    return table


def lut_lookup_int16(value: np.ndarray, table: np.ndarray) -> np.ndarray:
    """LUTLookup: the top 9 bits of ``value`` index the table, the low 7 interpolate linearly
    to the next entry (int16 slope, rounded)."""
    v = np.asarray(value).astype(np.int32)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = table[index].astype(np.int32)
    slope = (table[index + 1].astype(np.int32) - base).astype(np.int16).astype(np.int32)
    return (base + ((slope * offset + 64) >> 7)).astype(np.int16)


@register("SOFTMAX", quantized=True)
class QuantizedSoftmax(QuantizedKernel):
    """Softmax over the last axis of an int8, uint8 or int16 tensor (output of the same type,
    scale 1/256 or 1/32768, zero point the type's minimum or 0)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_quantized_dtype(x, *EIGHT_BIT, INT16)
        if x.ndim < 1:
            raise self.fail(f"input {x.name!r} must have rank 1 or more, got a scalar")
        s, z = self.per_tensor(x)
        so, zo = self.output_params(x.dtype)
        beta = F32(getattr(self.options, "beta", 1.0) if self.options is not None else 1.0)
        self.range = dtype_range(x.dtype)
        if x.dtype == INT16:
            self._prepare_int16(x, s, z, so, zo, beta)
        else:
            self._prepare_8bit(s, so, zo, beta)
        return [Spec(x.shape, x.dtype)]

    def _expect_output(self, so: np.float32, zo: int, scale: float, zero_point: int) -> None:
        # LiteRT checks the output scale within 0.1% and the zero point exactly
        if zo != zero_point or abs(float(so) - scale) > 0.001 * scale:
            raise self.fail(f"the output needs scale {scale} and zero point {zero_point}, got {so} and {zo}")

    def _prepare_8bit(self, s, so, zo, beta) -> None:
        self._expect_output(so, zo, 1.0 / 256, self.range[0])
        real = min(float(beta) * float(s) * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
        mult, shift = quantize_multiplier(real)
        if int(shift) < 0:
            raise self.fail(f"beta * input scale ({float(beta) * float(s)}) is too small for the fixed-point softmax")
        self.mult, self.shift = int(mult), int(shift)
        # CalculateInputRadius: differences below -radius would overflow the rescale
        radius = math.floor(((1 << _SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)) / (1 << self.shift))
        self.diff_min = -radius
        self.run = self._eval_8bit

    def _prepare_int16(self, x, s, z, so, zo, beta) -> None:
        if z or zo:
            raise self.fail("int16 quantized softmax needs zero points of 0")
        self._expect_output(so, zo, 1.0 / 32768, 0)
        if x.ndim > 4:
            raise self.fail(f"int16 softmax supports ranks 1 to 4 (as LiteRT), got shape {x.shape}")
        span = 65535.0
        self.exp_table = lut_int16(np.exp, 10.0 / span, 32767, 2.0 / span, 0)
        self.reciprocal_table = lut_int16(lambda v: 1.0 / (1.0 + v), 1.0 / span, -32768, 2.0 / span, 0)
        # differences scaled so that [-65535, 0] is [-10, 0] (float product, double division)
        mult, shift = quantize_multiplier(float(s * beta) / (10.0 / span))
        self.mult, self.shift = int(mult), int(shift)
        self.run = self._eval_int16

    def eval(self, ins, outs):
        self.run(ins, outs)

    def _rows(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(-1, x.shape[-1]).astype(np.int32)

    def _eval_8bit(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        rows = self._rows(x)
        diff = rows - rows.max(axis=1, keepdims=True)
        kept = diff >= self.diff_min
        # MultiplyByQuantizedMultiplierGreaterThanOne: the shift first, then the multiplier
        scaled = saturating_rounding_doubling_high_mul(np.where(kept, diff, 0) << self.shift, self.mult)
        exps = exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS)
        terms = np.where(kept, rescale(exps, 0, _ACCUMULATION_INTEGER_BITS), 0)
        total = np.sum(terms, axis=1, dtype=np.int64, keepdims=True).astype(np.int32)  # wraps as int32
        reciprocal, bits_over_unit = self._reciprocal(total)
        exponent = bits_over_unit + 31 - 8 * out.dtype.itemsize
        values = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(reciprocal, exps), exponent)
        qmin, qmax = self.range
        values = np.clip(values.astype(np.int64) + qmin, qmin, qmax)
        out[...] = np.where(kept, values, qmin).reshape(out.shape)

    @staticmethod
    def _reciprocal(total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """GetReciprocal: 1 / total (Q12.19) as a Q0.31 value and the power of two it lacks."""
        headroom_plus_one = count_leading_zeros32(total)
        bits_over_unit = _ACCUMULATION_INTEGER_BITS - headroom_plus_one
        normalized = ((total.astype(np.int64) & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF
        minus_one = (normalized - (1 << 31)).astype(np.int32)  # in [0, 1) as Q0.31
        return one_over_one_plus_x_for_x_in_0_1(minus_one), bits_over_unit

    def _eval_int16(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        rows = self._rows(x)
        diff = rows - rows.max(axis=1, keepdims=True)
        scaled = multiply_by_quantized_multiplier(diff, self.mult, self.shift).astype(np.int64) + 32767
        exps = lut_lookup_int16(np.clip(scaled, -32768, 32767), self.exp_table).astype(np.int64)
        total = np.sum(exps, axis=1, keepdims=True).astype(np.int32)
        headroom_plus_one = count_leading_zeros32(total)
        shifted = ((total.astype(np.int64) << (headroom_plus_one - 1)) + (1 << 13)) >> 14
        centred = np.clip(shifted - (1 << 15) - (1 << 16), -32768, 32767)
        reciprocal = lut_lookup_int16(centred, self.reciprocal_table).astype(np.int64)
        right_shift = 31 - headroom_plus_one
        values = (exps * reciprocal + (np.int64(1) << (right_shift - 1))) >> right_shift
        out[...] = np.clip(values, 0, 32767).reshape(out.shape)


# ----------------------------------------------------------------------------- LOG_SOFTMAX

_LOG_OUTPUT_INTEGER_BITS = 4  # the output is Q4.27 before the shift to 1/16 steps
_LOG_2 = 1488522236  # gemmlowp's Q0.31 constants of log_x_for_x_greater_than_or_equal_to_1
_SQRT_SQRT_HALF = 1805811301
_SQRT_HALF = 1518500250
_ONE_QUARTER = 536870912
_ALPHA_N, _ALPHA_D, _ALPHA_I, _ALPHA_F = 117049297, 127690142, 1057819769, 638450708


def _multiply_by_pot_param(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOTParam with a per-element exponent: saturating left shifts
    for positive exponents, rounding right shifts for negative ones."""
    x64 = np.asarray(x).astype(np.int64)
    e = np.asarray(exponent).astype(np.int64)
    left = np.clip(e, 0, 31)
    threshold = (np.int64(1) << (31 - left)) - 1
    shifted = np.where(x64 > threshold, INT32_MAX, np.where(x64 < -threshold, INT32_MIN, x64 << left))
    shifted = np.where(e > 0, shifted, x64)
    return np.where(e < 0, rounding_divide_by_pot(x64, np.maximum(-e, 0)), shifted).astype(np.int32)


def _saturate32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, INT32_MIN, INT32_MAX).astype(np.int32)


def log_x_for_x_at_least_one(z: np.ndarray, input_integer_bits: int, output_integer_bits: int) -> np.ndarray:
    """LiteRT's log_x_for_x_greater_than_or_equal_to_1 on raw int32 values: the input's power of
    two from its leading zeros (taken at x and at x * sqrt(1/2), the closer one kept), the
    remaining factor's log by a rational approximation around sqrt(sqrt(1/2)), one reciprocal by
    Newton-Raphson; the result with ``output_integer_bits`` integer bits."""
    srdhm = saturating_rounding_doubling_high_mul
    add = wrapping_add
    accum_bits = output_integer_bits + 1
    shifted_quarter = rescale(np.int32(_ONE_QUARTER), 0, accum_bits)
    z = np.asarray(z).astype(np.int32)
    headroom_a = count_leading_zeros32(z)  # headroom plus one
    r_a = _multiply_by_pot_param(srdhm(_multiply_by_pot_param(z, headroom_a - 1), _SQRT_HALF), np.int64(1))
    accum_unit = np.int64(31 - accum_bits)  # integers to the accumulator's fixed point
    pow2_a = _saturate32(_multiply_by_pot_param(input_integer_bits - headroom_a, accum_unit) + np.int64(shifted_quarter))
    z_b = srdhm(z, _SQRT_HALF)
    headroom_b = count_leading_zeros32(z_b) - 1
    r_b = _multiply_by_pot_param(z, headroom_b)
    pow2_b = _saturate32(_multiply_by_pot_param(input_integer_bits - headroom_b, accum_unit) - np.int64(shifted_quarter))
    r = np.minimum(r_a, r_b)
    pow2 = np.maximum(pow2_a, pow2_b)
    p = rounding_half_sum(r, _SQRT_SQRT_HALF)
    q = add(r, -_SQRT_SQRT_HALF)
    q = add(q, q)
    common_sq = srdhm(q, q)
    num = add(srdhm(q, r), srdhm(srdhm(q, common_sq), _ALPHA_N))
    denominator_minus_one = add(srdhm(p, add(add(_ALPHA_I, q), srdhm(_ALPHA_D, common_sq))), srdhm(_ALPHA_F, q))
    reciprocal = one_over_one_plus_x_for_x_in_0_1(denominator_minus_one)
    num_scaled = rescale(num, 0, accum_bits)
    total = add(srdhm(pow2, _LOG_2), srdhm(num_scaled, reciprocal))
    return rescale(total, accum_bits, output_integer_bits)


@register("LOG_SOFTMAX", quantized=True)
class QuantizedLogSoftmax(QuantizedKernel):
    """log(softmax(x)) over the last axis of an int8 or uint8 tensor, as LiteRT's reference
    kernels: the softmax's Q5.26 differences and exp sum (Q12.19), the sum's log in Q5.26, each
    ``difference - log`` shifted to the output's 1/16 steps below its zero point (the type's
    maximum); differences too far below the maximum give the type's minimum."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_quantized_dtype(x, *EIGHT_BIT)
        if x.ndim < 1:
            raise self.fail(f"input {x.name!r} must have rank 1 or more, got a scalar")
        s, _ = self.per_tensor(x)
        so, zo = self.output_params(x.dtype)
        self.range = dtype_range(x.dtype)
        if zo != self.range[1] or so != F32(16.0 / 256.0):
            raise self.fail(f"the output needs scale 1/16 and zero point {self.range[1]}, got {so} and {zo}")
        # PreprocessLogSoftmaxScalingExp with beta 1 (double arithmetic)
        real = min(float(s) * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
        mult, shift = quantize_multiplier(real)
        self.mult, self.shift = int(mult), int(shift)
        # the reverse scaling (the log-sum back to input quanta) must be a factor below one
        divisor, divisor_shift = quantize_multiplier((1 << max(31 - self.shift, 0)) / float(self.mult))
        if self.shift <= 0 or int(divisor_shift) > 0:
            raise self.fail(f"input scale {s} is too small for the fixed-point log-softmax")
        self.divisor, self.divisor_shift = int(divisor), int(divisor_shift)
        radius = math.floor(((1 << _SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)) / (1 << self.shift))
        self.diff_min = -radius
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        rows = x.reshape(-1, x.shape[-1]).astype(np.int32)
        diff = rows - rows.max(axis=1, keepdims=True)
        # MultiplyByQuantizedMultiplierGreaterThanOne: the shift first, then the multiplier
        scaled = saturating_rounding_doubling_high_mul(np.maximum(diff, self.diff_min) << self.shift, self.mult)
        exps = rescale(exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS), 0, _ACCUMULATION_INTEGER_BITS)
        terms = np.where(diff >= self.diff_min, exps, 0)
        total = np.sum(terms, axis=1, dtype=np.int64, keepdims=True).astype(np.int32)  # wraps as int32
        log_sum = log_x_for_x_at_least_one(total, _ACCUMULATION_INTEGER_BITS, _SCALED_DIFF_INTEGER_BITS)
        floor = multiply_by_quantized_multiplier(
            wrapping_add(log_sum, INT32_MIN), self.divisor, self.divisor_shift
        ).astype(np.int64)
        adjusted_min = np.maximum(self.diff_min - 1, floor)
        shift = 31 - _SCALED_DIFF_INTEGER_BITS - _LOG_OUTPUT_INTEGER_BITS
        values = rounding_divide_by_pot(wrapping_add(scaled, -log_sum.astype(np.int64)), shift).astype(np.int64)
        qmin, qmax = self.range
        values = np.clip(values + qmax, qmin, qmax)
        out[...] = np.where(diff > adjusted_min, values, qmin).reshape(out.shape)
