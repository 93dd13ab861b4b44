"""Quantized element-wise math as LiteRT computes it: ABS, EXP, LOG, ELU, GELU, SQRT and RSQRT
on int8 (GELU also uint8) and int16 tensors with affine quantization.

LiteRT computes most of these through lookup tables built at prepare from the float function
(``LUTPopulate`` in tflite/kernels/internal/common.h): 256 entries for 8-bit inputs, indexed by
the input's byte; for int16 inputs 513 samples of the function over the input's range, read
with a linear interpolation in the low 7 bits of the input (``LUTLookup``). ABS, SQRT and int8
RSQRT compute each value in integer or float arithmetic instead (tflite/kernels/elementwise.cc).

Whatever LiteRT's method, an input here has at most 65536 values, so prepare runs LiteRT's
arithmetic once on every one of them and eval is one ``np.take`` in that table (exact by
construction). Float steps are float32 as in LiteRT's C++ (``float`` variables and the ``f``
functions of <cmath>), each correctly rounded: the float64 result of NumPy's function rounded
to float32.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from numlite.errors import InvalidInputError
from numlite.kernels.base import Spec, register
from numlite.kernels.fixed_point import (
    dtype_range,
    float_to_int32,
    inv_sqrt_multiplier,
    multiply_by_quantized_multiplier as mbqm,
    quantize_multiplier,
    round_half_away,
)
from numlite.kernels.quantized import INT8, INT16, UINT8, QuantizedKernel, lut_8bit

F32 = np.float32


def _f32(function: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A float32 function of <cmath> (``expf``, ``logf``...): float64 result rounded once."""
    return lambda x: function(np.asarray(x, np.float64)).astype(F32)


def lut_int16(s: np.float32, z: int, so: np.float32, zo: int,
              transform: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """LiteRT's LUTPopulateInt16<float>: 513 int16 samples of ``transform`` over the input's
    range, each corrected by half the error of interpolating the midpoint of its step."""
    qmin, qmax = dtype_range(INT16)
    s, so = F32(s), F32(so)
    input_min, input_max = s * F32(qmin - z), s * F32(qmax - z)
    output_min, output_max = so * F32(qmin - zo), so * F32(qmax - zo)
    steps = 512
    step = (input_max - input_min) / F32(steps)
    half_step = step / F32(2)
    scaling_inv = F32(qmax - qmin + 1) / (output_max - output_min)
    i = np.arange(steps + 1, dtype=F32)
    at = input_min + i * step  # float32 arrays: each operation rounded as LiteRT's scalars
    values = transform(at)
    val, val_next = values[:-1], values[1:]  # (i + 1) * step is the next sample's own argument
    val_mid = transform(at[:-1] + half_step)
    rounded = round_half_away(val * scaling_inv)
    interpolated = round_half_away((val_next * scaling_inv + rounded) / F32(2))
    bias = round_half_away((interpolated - round_half_away(val_mid * scaling_inv)) / F32(2))
    table = np.empty(steps + 1, np.int16)
    table[:-1] = np.clip(rounded - bias, qmin, qmax)
    table[-1] = np.clip(round_half_away(transform(np.array([input_max], F32)) * scaling_inv), qmin, qmax)[0]
    return table


def lut_lookup_int16(x: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """LiteRT's LUTLookup(int16, lut): the sample at the high 9 bits, plus the rounded slope
    times the low 7 bits (int16 slope and result wrap as the C++ casts do)."""
    x = np.asarray(x, np.int16).astype(np.int32)
    index = 256 + (x >> 7)
    base = lut[index].astype(np.int32)
    slope = (lut[index + 1].astype(np.int32) - base).astype(np.int16).astype(np.int32)
    delta = (slope * (x & 0x7F) + 64) >> 7
    return (base + delta).astype(np.int16)


class QuantizedTableUnary(QuantizedKernel):
    """One quantized input, one output of its shape and dtype with its own scale and zero
    point. Subclasses return the output for every input value (``values(all, ...)``) from
    ``table``; eval looks the input up in it. ``lowest`` > the dtype's minimum makes smaller
    inputs an error at invoke, as LiteRT's SQRT and RSQRT check."""

    dtypes: tuple = (INT8, INT16)

    def prepare(self, ins):
        x, s, z, so, zo = self.unary_params(ins, self.dtypes)
        if x.dtype == INT16 and (z or zo):
            raise self.fail("int16 quantized input and output need zero points of 0")
        self.dtype = x.dtype
        self.range = dtype_range(x.dtype)
        self.lowest = self.range[0]
        table = self.table(F32(s), z, F32(so), zo)
        # indexed by the input's bits read as unsigned: int8 -1 is entry 255, int16 -1 is 65535
        self.values_table = table.astype(x.dtype)
        self.index_dtype = np.uint8 if x.dtype.itemsize == 1 else np.uint16
        return [Spec(x.shape, x.dtype)]

    def table(self, s, z, so, zo) -> np.ndarray:
        """Outputs for all inputs in bit order (``np.arange(n, dtype=unsigned).view(dtype)``)."""
        raise NotImplementedError

    def all_inputs(self) -> np.ndarray:
        """Every value of the input dtype as int32, in the order of its bits read unsigned."""
        unsigned = np.uint8 if self.dtype.itemsize == 1 else np.uint16
        return np.arange(np.iinfo(unsigned).max + 1, dtype=unsigned).view(self.dtype).astype(np.int32)

    def saturate(self, values: np.ndarray) -> np.ndarray:
        return np.clip(values, *self.range)

    def eval(self, ins, outs):
        x = ins[0]
        if self.lowest > self.range[0] and x.size and int(x.min()) < self.lowest:
            raise InvalidInputError(f"{self.domain_message} (input value {int(x.min())}, the lowest allowed {self.lowest})")
        np.take(self.values_table, x.view(self.index_dtype), out=outs[0], mode="clip")

    domain_message = ""


class QuantizedLutUnary(QuantizedTableUnary):
    """LiteRT's LUTPopulate of ``transform`` (float32 in, float32 out): the 256-entry table for
    8-bit inputs; for int16 the 513-sample table, read by LUTLookup at every input value."""

    def transform(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def table(self, s, z, so, zo):
        if self.dtype == INT16:
            return lut_lookup_int16(self.all_inputs(), lut_int16(s, z, so, zo, self.transform))
        return lut_8bit(self.dtype, s, z, so, zo, self.transform)


_exp = _f32(np.exp)
_log = _f32(np.log)
_expm1 = _f32(np.expm1)
_sqrt = _f32(np.sqrt)
_erfc = _f32(np.vectorize(math.erfc, otypes=[np.float64]))


@register("EXP", quantized=True)
class QuantizedExp(QuantizedLutUnary):
    """``exp`` through LiteRT's table (exp.cc)."""

    def transform(self, x):
        return _exp(x)


@register("LOG", quantized=True)
class QuantizedLog(QuantizedLutUnary):
    """``log`` through LiteRT's table; inputs <= 0 give the output's lowest value (elementwise.cc)."""

    def table(self, s, z, so, zo):
        # LogLUTPrepare: (int min - zo) * so, the int converted to float
        self.output_min = F32(self.range[0] - zo) * so
        return super().table(s, z, so, zo)

    def transform(self, x):
        x = np.asarray(x, F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x <= 0, self.output_min, _log(x)).astype(F32)


@register("ELU", quantized=True)
class QuantizedElu(QuantizedLutUnary):
    """``expm1(x)`` below 0, ``x`` above, through LiteRT's table: int8 only (activations.cc)."""

    dtypes = (INT8,)

    def transform(self, x):
        x = np.asarray(x, F32)
        return np.where(x < 0, _expm1(x), x).astype(F32)


@register("GELU", quantized=True)
class QuantizedGelu(QuantizedLutUnary):
    """``0.5 x erfc(-x / sqrt 2)`` or, with ``approximate``, ``0.5 x (1 + tanh(sqrt(2/pi) (x +
    0.044715 x**3)))``, through LiteRT's table (activations.cc, reference/gelu.h)."""

    dtypes = (INT8, UINT8, INT16)

    def transform(self, x):
        x = np.asarray(x, F32)
        if getattr(self.options, "approximate", False):
            k = F32(math.sqrt(2 / math.pi))  # M_2_SQRTPI * M_SQRT1_2 rounded to float
            inner = k * (x + F32(0.044715) * x * x * x)
            return (F32(0.5) * x * (F32(1) + _f32(np.tanh)(inner))).astype(F32)
        return (F32(0.5) * x * _erfc(x * F32(-math.sqrt(0.5)))).astype(F32)


@register("RSQRT", quantized=True)
class QuantizedRsqrt(QuantizedLutUnary):
    """``1 / sqrt(x)``: int16 through LiteRT's table (inputs <= 0 give 32767 quanta); int8 by
    integer arithmetic (GetInvSqrtQuantizedMultiplierExp of ``x - z`` at a shift of 20, times
    the multiplier of ``1 / (sqrt(s) * so)``; ``x == z`` gives 127). Inputs below the zero
    point fail at invoke, as in LiteRT (elementwise.cc)."""

    domain_message = "RSQRT is only defined for inputs at or above the zero point"

    def table(self, s, z, so, zo):
        self.lowest = z  # LiteRT: in >= input_offset, or the invoke fails
        if self.dtype == INT16:
            self.output_scale = so
            return super().table(s, z, so, zo)
        # float sqrt times float so, then a double reciprocal
        mult, shift = quantize_multiplier(1.0 / float(F32(np.sqrt(s, dtype=F32)) * so))
        value = self.all_inputs() - np.int32(z)
        nonzero = np.where(value == 0, 1, value)
        inv, inv_shift = inv_sqrt_multiplier(nonzero)
        k = 20  # LiteRT's kShift: keeps 1 / sqrt(value) an integer
        data = mbqm(np.ones_like(nonzero), inv, inv_shift + k)
        out = mbqm(data, int(mult), int(shift) - k).astype(np.int64) + zo
        return np.where(value == 0, self.range[1], self.saturate(out))

    def transform(self, x):
        x = np.asarray(x, F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x <= 0, F32(32767) * self.output_scale, F32(1) / _sqrt(x)).astype(F32)


@register("SQRT", quantized=True)
class QuantizedSqrt(QuantizedTableUnary):
    """``int(sqrt(s * (x - z)) / so) + zo`` in float32 (truncated toward zero, not rounded),
    saturated; a negative dequantized input fails at invoke, as in LiteRT (elementwise.cc)."""

    domain_message = "SQRT is only defined for non-negative values"

    def table(self, s, z, so, zo):
        dequantized = s * (self.all_inputs() - np.int32(z)).astype(F32)
        valid = dequantized >= 0
        # the smallest valid input value (inputs are monotone in their dequantized value)
        self.lowest = int(self.all_inputs()[valid].min()) if valid.any() else self.range[1] + 1
        root = _sqrt(np.where(valid, dequantized, F32(0)))
        quotient = (root / so).astype(F32)
        return self.saturate(float_to_int32(quotient) + zo)  # static_cast<int>: toward zero


@register("ABS", quantized=True)
class QuantizedAbs(QuantizedTableUnary):
    """``|x - z|``, rescaled by the multiplier of ``s / so`` when the scales differ, plus ``zo``,
    saturated (elementwise.cc). int16 without quantization runs the plain kernel."""

    def table(self, s, z, so, zo):
        value = np.abs(self.all_inputs() - np.int32(z))
        if s != so:
            mult, shift = quantize_multiplier(float(s / so))  # float division, as LiteRT
            value = mbqm(value, mult, shift).astype(np.int64)
        return self.saturate(value.astype(np.int64) + zo)
