"""Integer helpers of quantized kernels: fixed-point multipliers, rounding and saturation.

Quantized kernels rescale int32 accumulators by a real factor written as a 32-bit multiplier
``m`` (a Q0.31 fraction in [0.5, 1)) and a power-of-two ``shift``: ``x * real ~ x * m * 2**(shift
- 31)``. LiteRT has two ways of rounding that product: *double rounding* (gemmlowp's
saturating rounding doubling high multiply, then a rounding right shift; two roundings) and
*single rounding* (one 64-bit product, one rounding shift, when built with
``TFLITE_SINGLE_ROUNDING``). ``SINGLE_ROUNDING`` below is the variant ai-edge-litert's reference
kernels use (established by the tests in tests/test_quantized_ops.py, which fail if it is wrong).

Everything here works element-wise on NumPy arrays (multipliers and shifts may be per-channel
arrays broadcasting against ``x``) with int64 intermediates, so no value is ever a Python loop.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = np.int64(-(1 << 31))
INT32_MAX = np.int64((1 << 31) - 1)

# ai-edge-litert 2.3 (pip wheel) is built without TFLITE_SINGLE_ROUNDING: double rounding.
SINGLE_ROUNDING = False

_DTYPE_RANGE = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.int32): (-(1 << 31), (1 << 31) - 1),
}


def dtype_range(dtype: np.dtype | type) -> tuple[int, int]:
    """The smallest and largest value of an integer dtype, as Python ints."""
    return _DTYPE_RANGE[np.dtype(dtype)]


def round_half_away(x: np.ndarray | float) -> np.ndarray:
    """C's ``round``: halves away from zero (NumPy's ``round`` goes to even), computed as
    ``floor(|x| + 0.5)`` in ``x``'s precision, as LiteRT's kernels compute it: so the largest
    float below 0.5 goes to 1 (the sum rounds to 1.0), where C's ``round`` gives 0
    (tests/test_hybrid_ops.py checks LiteRT does the same)."""
    x = np.asarray(x)
    return np.copysign(np.floor(np.abs(x) + x.dtype.type(0.5)), x)


def float_to_int32(x: np.ndarray) -> np.ndarray:
    """C++ ``static_cast<int32_t>`` of float values as compiled for x86 (int64 array): toward
    zero, and INT32_MIN for a value out of int32's range, infinities and NaN (cvttss2si's
    "integer indefinite"), where LiteRT's table builders cast without a check."""
    x = np.asarray(x)
    fits = np.abs(x) < x.dtype.type(2**31)
    return np.where(fits, np.trunc(np.where(fits, x, 0)).astype(np.int64), np.int64(INT32_MIN))


def _quantize_one(real: float, single_rounding: bool) -> tuple[int, int]:
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)  # real = fraction * 2**shift, 0.5 <= |fraction| < 1
    q = int(round_half_away(fraction * (1 << 31)))  # exact product: a power-of-two scaling
    if q == 1 << 31:  # rounding reached 1.0: renormalise
        q //= 2
        shift += 1
    if shift < -31:  # every bit would be shifted out: LiteRT flushes to zero
        return 0, 0
    if single_rounding and shift > 30:  # the single-rounding multiply cannot shift further
        return (1 << 31) - 1, 30
    return q, shift


def quantize_multiplier(real: float | np.ndarray, single_rounding: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT's QuantizeMultiplier: ``real`` (double) as an int32 multiplier and an int shift.

    Works on a scalar (returns 0-d arrays, usable as numbers) or on an array of per-channel
    factors (returns arrays of the same shape).
    """
    single = SINGLE_ROUNDING if single_rounding is None else single_rounding
    reals = np.asarray(real, np.float64)
    pairs = [_quantize_one(float(r), single) for r in reals.reshape(-1)]
    mult = np.array([p[0] for p in pairs], np.int64).astype(np.int32).reshape(reals.shape)
    shift = np.array([p[1] for p in pairs], np.int32).reshape(reals.shape)
    return mult, shift


def quantize_multiplier_smaller_than_one(real: float) -> tuple[np.ndarray, np.ndarray]:
    """QuantizeMultiplierSmallerThanOneExp: a factor in (0, 1) whose shift is never positive."""
    if not 0.0 < real < 1.0:
        raise ValueError(f"multiplier {real} is not in (0, 1)")
    return quantize_multiplier(real)


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32 values: the high 32 bits of
    ``2*a*b`` rounded to nearest, saturating the one overflow (``a == b == INT32_MIN``)."""
    a64 = np.asarray(a).astype(np.int64)
    b64 = np.asarray(b).astype(np.int64)
    ab = a64 * b64
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    total = ab + nudge
    # C++ integer division truncates toward zero.
    high = np.where(total >= 0, total >> 31, -((-total) >> 31))
    overflow = (a64 == INT32_MIN) & (b64 == INT32_MIN)
    return np.where(overflow, INT32_MAX, high).astype(np.int32)


def rounding_divide_by_pot(x: np.ndarray, exponent: int | np.ndarray) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: ``x / 2**exponent`` rounded to nearest, halves away from
    zero (``exponent`` in [0, 31], scalar or broadcasting array)."""
    x64 = np.asarray(x).astype(np.int64)
    e = np.asarray(exponent).astype(np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x64 & mask
    threshold = (mask >> 1) + (x64 < 0)
    return ((x64 >> e) + (remainder > threshold)).astype(np.int32)


def rounding_divide_by_pot_any(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT for any exponent >= 0, as LiteRT's x86 wheels compute one beyond
    gemmlowp's asserted [0, 31] (asserts are compiled out): the int32 shift takes the exponent
    mod 32 (``x >> 32`` is ``x``), the 64-bit mask ``(1ll << e) - 1`` truncated to int32 is -1.
    So a quotient too small to show is not 0 but the unshifted value: quantized DIV of a small
    dividend by a large divisor saturates in LiteRT, and numlite with it."""
    x64 = np.asarray(x).astype(np.int64)
    e = np.asarray(exponent).astype(np.int64)
    mask = _wrap_int32((np.int64(1) << (e & 63)) - 1).astype(np.int64)
    remainder = x64 & mask
    threshold = (mask >> 1) + (x64 < 0)
    return ((x64 >> (e & 31)) + (remainder > threshold)).astype(np.int32)


def _wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (C++ int arithmetic as compiled)."""
    return np.asarray(x).astype(np.int64).astype(np.int32)


def multiply_by_quantized_multiplier(
    x: np.ndarray, multiplier: int | np.ndarray, shift: int | np.ndarray, single_rounding: bool | None = None
) -> np.ndarray:
    """LiteRT's MultiplyByQuantizedMultiplier(int32 x, multiplier, shift) -> int32.

    ``single_rounding`` None uses the variant ai-edge-litert's reference kernels use.
    """
    single = SINGLE_ROUNDING if single_rounding is None else single_rounding
    if not single and np.ndim(multiplier) == 0 and np.ndim(shift) == 0 and int(multiplier) != INT32_MIN:
        return _double_rounding_scalar(np.asarray(x), int(multiplier), int(shift))
    x64 = np.asarray(x).astype(np.int64)
    m = np.asarray(multiplier).astype(np.int64)
    s = np.asarray(shift).astype(np.int64)
    if single:
        total = 31 - s
        rounded = x64 * m + (np.int64(1) << (total - 1))
        return _wrap_int32(rounded >> total)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    a = _wrap_int32(x64 << left) if np.any(left) else _wrap_int32(x64)
    if np.any(m == INT32_MIN):  # the one saturating product: gemmlowp's helpers as written
        return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(a, m), right)
    return _double_rounding(a.astype(np.int64), m, right)


class FixedMultiplier:
    """:func:`multiply_by_quantized_multiplier` for one multiplier and shift (scalars or
    per-channel arrays broadcasting against the inputs), with their checks and constants made
    once: for a kernel calling it at every step of a loop (an integer LSTM's gates), where
    the function's own checks cost more than its arithmetic on a few hundred values. Returns
    int64 arrays holding the int32 results."""

    def __init__(self, multiplier: int | np.ndarray, shift: int | np.ndarray) -> None:
        m = np.asarray(multiplier).astype(np.int64)
        s = np.asarray(shift).astype(np.int64)
        # The closed forms of _double_rounding; other cases go through the function itself.
        self.general = SINGLE_ROUNDING or bool(np.any(s > 0)) or bool(np.any(m == INT32_MIN))
        self.multiplier, self.shift = m, s
        self.rounding = _Rounding(np.maximum(-s, 0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.general:
            return np.asarray(multiply_by_quantized_multiplier(x, self.multiplier, self.shift)).astype(np.int64)
        v = np.asarray(x).astype(np.int32).astype(np.int64)  # an int32 argument: C++ wraps it
        return self.rounding(v * self.multiplier)


class _Rounding:
    """What :func:`_double_rounding` does after the product ``a * m``, for fixed right shifts
    (scalar or per channel), its constants made once."""

    def __init__(self, right: np.ndarray) -> None:
        self.right = np.asarray(right, np.int64)
        self.any_right = bool(np.any(self.right))
        self.sign_mask = None if np.all(self.right > 0) else np.where(self.right > 0, np.int64(-1), np.int64(0))
        self.half = np.where(self.right > 0, np.int64(1) << np.maximum(self.right - 1, 0), np.int64(0))

    def __call__(self, v: np.ndarray) -> np.ndarray:
        """``v`` (int64 products, of the shape of the result) rounded, in place."""
        v += np.int64(1 << 30)
        v >>= np.int64(31)
        if self.any_right:
            sign = v >> np.int64(63)
            if self.sign_mask is not None:
                sign &= self.sign_mask
            v += sign
            v += self.half
            v >>= self.right
        return v


def _double_rounding_scalar(x: np.ndarray, m: int, shift: int) -> np.ndarray:
    """:func:`_double_rounding` for one multiplier and shift (Python ints): fewer, in-place passes."""
    if shift > 0 or x.dtype != np.int32:
        a = _wrap_int32(x.astype(np.int64) << max(shift, 0)).astype(np.int64)
    else:
        a = x.astype(np.int64)
    v = a * m
    v += 1 << 30
    v >>= 31
    if shift < 0:
        v += v >> 63
        v += 1 << (-shift - 1)
        v >>= -shift
    return v.astype(np.int32)[()]


def _double_rounding(a: np.ndarray, m: np.ndarray, right: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(a, m), right) for int32 ``a`` and
    ``m != INT32_MIN`` (no saturation), in closed forms on int64 with few passes:

    * the high product is ``(a * m + 2**30) >> 31`` (arithmetic shift): for ``a * m >= 0`` that
      is gemmlowp's nudge-and-divide; for ``a * m < 0`` gemmlowp truncates ``(a * m + 1 -
      2**30) / 2**31`` toward zero, i.e. takes its ceiling ``floor((a * m + 1 - 2**30 + 2**31 -
      1) / 2**31)``, the same expression;
    * RoundingDivideByPOT(v, e) (halves away from zero) is ``(v + 2**(e-1) - (v < 0)) >> e`` for
      ``e >= 1`` (``v >> 63`` is ``-(v < 0)``) and ``v`` for ``e == 0``.
    """
    v = np.asarray(a * m)
    shape = np.broadcast_shapes(v.shape, np.shape(right))
    if v.shape != shape:
        v = np.broadcast_to(v, shape).copy()
    return _Rounding(right)(v).astype(np.int32)[()]  # a NumPy scalar for scalar inputs, as the helpers give


def multiply_by_quantized_multiplier_int64(x: np.ndarray, multiplier: int | np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """The int64-accumulator form (16x8 kernels): the multiplier reduced to 16 bits, one
    rounding shift. Both rounding variants of LiteRT compute it the same way."""
    x64 = np.asarray(x).astype(np.int64)
    m = np.asarray(multiplier).astype(np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, np.int64(0x7FFF))
    total = 15 - np.asarray(shift).astype(np.int64)
    return _wrap_int32((x64 * reduced + (np.int64(1) << (total - 1))) >> total)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x: np.ndarray, multiplier, left_shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplierSmallerThanOneExp (``left_shift`` <= 0)."""
    return multiply_by_quantized_multiplier(x, multiplier, left_shift)


def multiply_by_quantized_multiplier_greater_than_one(x: np.ndarray, multiplier, left_shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplierGreaterThanOne (``left_shift`` >= 0)."""
    return multiply_by_quantized_multiplier(x, multiplier, left_shift)


# fused_activation_function codes of the schema
_RELU, _RELU_N1_TO_1, _RELU6 = 1, 2, 3


def activation_range(fused_activation: int, scale: float, zero_point: int, dtype: np.dtype | type) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the clamp of a fused activation in the quantized
    domain of the output (``scale``, ``zero_point``, ``dtype``). Activations without a range
    (NONE, TANH, SIGN_BIT) clamp only to the dtype's range."""
    qmin, qmax = dtype_range(dtype)
    f32 = np.float32

    def quantize(real: float) -> int:
        # float32 division then C round, as LiteRT's lambda on floats
        return int(zero_point) + int(round_half_away(f32(real) / f32(scale)))

    if fused_activation == _RELU:
        return max(qmin, quantize(0.0)), qmax
    if fused_activation == _RELU6:
        return max(qmin, quantize(0.0)), min(qmax, quantize(6.0))
    if fused_activation == _RELU_N1_TO_1:
        return max(qmin, quantize(-1.0)), min(qmax, quantize(1.0))
    return qmin, qmax


# ----------------------------------------------------------------------------- gemmlowp fixed point
# Values below are raw int32 of gemmlowp's FixedPoint<int32, IntegerBits>: the real value is
# ``raw / 2**(31 - IntegerBits)``. Sums wrap as C++ int32 addition does; products are
# SaturatingRoundingDoublingHighMul.


def wrapping_add(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """int32 ``a + b`` wrapping on overflow (gemmlowp's plain Add)."""
    return _wrap_int32(np.asarray(a).astype(np.int64) + np.asarray(b).astype(np.int64))


def saturating_rounding_multiply_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingMultiplyByPOT on int32: a saturating left shift for a
    positive ``exponent``, a rounding right shift (halves away from zero) for a negative one."""
    if exponent == 0:
        return np.asarray(x).astype(np.int32)
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    x64 = np.asarray(x).astype(np.int64)
    threshold = (1 << (31 - exponent)) - 1
    shifted = np.where(x64 > threshold, INT32_MAX, x64 << exponent)
    return np.where(x64 < -threshold, INT32_MIN, shifted).astype(np.int32)


def rescale(x: np.ndarray, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp's Rescale: the same real value with another number of integer bits."""
    return saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)


def _q31_constant(value: float) -> int:
    """A Q0.31 constant as gemmlowp spells them: ``value * 2**31`` rounded to nearest."""
    return int(round(value * (1 << 31)))


_EXP_MINUS_ONE_EIGHTH = _q31_constant(math.exp(-1.0 / 8.0))
_ONE_THIRD = _q31_constant(1.0 / 3.0)
# exp(-2**k) for the barrel shifter of exp_on_negative_values, k = -2..4
_EXP_MINUS_POWERS_OF_TWO = {k: _q31_constant(math.exp(-(2.0**k))) for k in range(-2, 5)}
_48_OVER_17_Q2 = int(round(48.0 / 17.0 * (1 << 29)))
_MINUS_32_OVER_17_Q2 = int(round(-32.0 / 17.0 * (1 << 29)))


def _exp_on_interval_minus_quarter_to_zero(a: np.ndarray) -> np.ndarray:
    """exp(a) for Q0.31 ``a`` in [-1/4, 0): a Taylor expansion around -1/8."""
    srdhm = saturating_rounding_doubling_high_mul
    x = wrapping_add(a, 1 << 28)  # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(wrapping_add(srdhm(wrapping_add(x4_over_4, x3), _ONE_THIRD), x2), 1)
    return wrapping_add(_EXP_MINUS_ONE_EIGHTH, srdhm(_EXP_MINUS_ONE_EIGHTH, wrapping_add(x, poly)))


def exp_on_negative_values(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp's exp_on_negative_values: exp of raw int32 ``a`` (<= 0, ``integer_bits``
    integer bits) as a Q0.31 raw value. The input splits into a remainder in [-1/4, 0),
    expanded as a polynomial, and a sum of powers of two, each a constant factor."""
    a = np.asarray(a).astype(np.int32)
    fractional_bits = 31 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = wrapping_add(a & np.int32(quarter - 1), -quarter)
    result = _exp_on_interval_minus_quarter_to_zero(rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = wrapping_add(a_mod_quarter_minus_quarter, -a.astype(np.int64))
    for k, multiplier in _EXP_MINUS_POWERS_OF_TWO.items():
        if integer_bits > k:
            bit = (remainder.astype(np.int64) >> (fractional_bits + k)) & 1
            result = np.where(bit == 1, saturating_rounding_doubling_high_mul(result, multiplier), result)
    if integer_bits > 5:  # below -32 the result is zero
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, np.int32(INT32_MAX), result).astype(np.int32)


def rounding_half_sum(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp's RoundingHalfSum on int32: ``(a + b) / 2`` rounded half away from zero."""
    total = np.asarray(a).astype(np.int64) + np.asarray(b).astype(np.int64)
    nudged = total + np.where(total >= 0, 1, -1)
    return np.where(nudged >= 0, nudged // 2, -((-nudged) // 2)).astype(np.int32)  # C division


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp's 1 / (1 + a) for Q0.31 ``a`` in [0, 1): Newton-Raphson division, three steps."""
    srdhm = saturating_rounding_doubling_high_mul
    half_denominator = rounding_half_sum(a, INT32_MAX)  # Q0.31
    x = wrapping_add(_48_OVER_17_Q2, srdhm(half_denominator, _MINUS_32_OVER_17_Q2))  # Q2.29
    for _ in range(3):
        one_minus_half_denominator_times_x = wrapping_add(1 << 29, -srdhm(half_denominator, x).astype(np.int64))
        x = wrapping_add(x, rescale(srdhm(x, one_minus_half_denominator_times_x), 4, 2))
    return rescale(x, 1, 0)  # x / 2, read as Q1.30, to Q0.31


def count_leading_zeros32(x: np.ndarray) -> np.ndarray:
    """Leading zero bits of int32 values read as uint32 (32 for zero)."""
    u = np.asarray(x).astype(np.int64) & 0xFFFFFFFF
    _, exponent = np.frexp(u.astype(np.float64))  # exact: u < 2**53
    return np.where(u == 0, 32, 32 - exponent).astype(np.int64)


def count_leading_sign_bits32(x: np.ndarray) -> np.ndarray:
    """CountLeadingSignBits of int32 values: the bits after the sign bit equal to it (31 for 0 and -1)."""
    x = np.asarray(x).astype(np.int64)
    return count_leading_zeros32(np.where(x < 0, ~x, x)) - 1


def get_reciprocal(x: np.ndarray, integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT's GetReciprocal of positive int32 ``x`` read with ``integer_digits`` integer bits:
    ``1 / x`` as a Q0.31 raw value and the number of bits of ``x`` above 1.0."""
    x = np.asarray(x).astype(np.int64)
    headroom_plus_one = count_leading_zeros32(x)
    shifted_minus_one = _wrap_int32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), integer_digits - headroom_plus_one


def inv_sqrt_multiplier(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT's GetInvSqrtQuantizedMultiplierExp(x, reverse_shift=-1) on an array of int32 values:
    ``1 / sqrt(x)`` as a multiplier and a (left) shift, by gemmlowp Newton-Raphson in Q3.28."""
    x = np.asarray(x, np.int64)
    small = x <= 1  # LiteRT's special case: the largest multiplier, no shift
    x = np.where(small, 2, x)
    shift = np.full(x.shape, 11, np.int64)
    while np.any(x >= 1 << 29):
        big = x >= 1 << 29
        x, shift = np.where(big, x // 4, x), shift + big
    pairs = (count_leading_zeros32(x) - 1) // 2 - 1
    shift -= pairs
    x = x << (2 * pairs)
    srdhm = saturating_rounding_doubling_high_mul
    half_input = rounding_divide_by_pot(x >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    estimate = np.full(x.shape, 1 << 28, np.int32)  # 1.0 in Q3.28
    for _ in range(5):
        cube = saturating_rounding_multiply_by_pot(srdhm(srdhm(estimate, estimate), estimate), 6)
        difference = wrapping_add(srdhm(half_three, estimate), -srdhm(half_input, cube).astype(np.int64))
        estimate = saturating_rounding_multiply_by_pot(difference, 3)
    inv = srdhm(estimate, 1518500250).astype(np.int64)  # times sqrt(2) / 2
    inv = np.where(shift < 0, (inv << np.maximum(-shift, 0)).astype(np.int32), inv)
    shift = np.maximum(shift, 0)
    return np.where(small, INT32_MAX, inv), np.where(small, 0, -shift)
