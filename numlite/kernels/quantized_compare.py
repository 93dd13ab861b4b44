"""Quantized comparisons: LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL on int8 and
uint8 tensors with affine quantization.

LiteRT does not compare the stored integers: each input is brought to a common fixed-point
form first, ``((q - zero_point) << 8) * scale`` as a fixed-point multiplication by the input's
own scale (QuantizeMultiplierSmallerThanOneExp, so every scale must lie in (0, 1)), and the two
results are compared as int32. Two inputs with one scale and zero point therefore compare as
their integers do, but the rounding can make distinct integers equal when a scale is tiny:
numlite does the same arithmetic, so it gives LiteRT's answer in both cases. int16 inputs are
compared directly (the plain kernels in ``logical``), as LiteRT does.
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import TensorInfo, broadcast_shape, has_scale, register, Spec
from numlite.kernels.fixed_point import multiply_by_quantized_multiplier, quantize_multiplier_smaller_than_one
from numlite.kernels.quantized import EIGHT_BIT, QuantizedKernel

LEFT_SHIFT = 8  # headroom bits LiteRT gives both inputs before scaling them


class QuantizedComparison(QuantizedKernel):
    """Two int8 (or two uint8) inputs, each scaled by its own scale, compared by ``ufunc``."""

    ufunc: np.ufunc

    @classmethod
    def handles(cls, ins) -> bool:
        first = ins[0] if ins else None
        return first is not None and first.dtype in EIGHT_BIT and has_scale(first)

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        a, b = ins
        self.expect_quantized_dtype(a, *EIGHT_BIT)
        if b.dtype != a.dtype:
            raise self.fail(f"inputs have different dtypes: {a.dtype.name} and {b.dtype.name}")
        self.scaling = [self._scaling(t) for t in (a, b)]
        return [Spec(broadcast_shape(a.shape, b.shape), np.dtype(np.bool_))]

    def _scaling(self, t: TensorInfo) -> tuple[int, np.ndarray, np.ndarray]:
        scale, zero_point = self.per_tensor(t)
        if not 0.0 < float(scale) < 1.0:  # LiteRT aborts on such a scale
            raise self.fail(f"input {t.name!r} has scale {float(scale)}: quantized comparisons need a scale "
                            "in (0, 1)")
        multiplier, shift = quantize_multiplier_smaller_than_one(float(scale))
        return zero_point, multiplier, shift

    def eval(self, ins, outs):
        a, b = (self._fixed_point(x, p) for x, p in zip(ins, self.scaling))
        type(self).ufunc(a, b, out=outs[0])

    @staticmethod
    def _fixed_point(x: np.ndarray, scaling: tuple[int, np.ndarray, np.ndarray]) -> np.ndarray:
        zero_point, multiplier, shift = scaling
        shifted = (x.astype(np.int32) - np.int32(zero_point)) * np.int32(1 << LEFT_SHIFT)
        return multiply_by_quantized_multiplier(shifted, multiplier, shift)


@register("LESS", quantized=True)
class QuantizedLess(QuantizedComparison):
    ufunc = np.less


@register("LESS_EQUAL", quantized=True)
class QuantizedLessEqual(QuantizedComparison):
    ufunc = np.less_equal


@register("GREATER", quantized=True)
class QuantizedGreater(QuantizedComparison):
    ufunc = np.greater


@register("GREATER_EQUAL", quantized=True)
class QuantizedGreaterEqual(QuantizedComparison):
    ufunc = np.greater_equal


@register("EQUAL", quantized=True)
class QuantizedEqual(QuantizedComparison):
    ufunc = np.equal


@register("NOT_EQUAL", quantized=True)
class QuantizedNotEqual(QuantizedComparison):
    ufunc = np.not_equal
