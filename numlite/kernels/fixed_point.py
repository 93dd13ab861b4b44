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
    """C's ``round``: halves away from zero (NumPy's ``round`` goes to even)."""
    x = np.asarray(x)
    return np.copysign(np.floor(np.abs(x) + x.dtype.type(0.5)), x)


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
    x64 = np.asarray(x).astype(np.int64)
    m = np.asarray(multiplier).astype(np.int64)
    s = np.asarray(shift).astype(np.int64)
    if single:
        total = 31 - s
        rounded = x64 * m + (np.int64(1) << (total - 1))
        return _wrap_int32(rounded >> total)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(_wrap_int32(x64 << left), m), right)


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
