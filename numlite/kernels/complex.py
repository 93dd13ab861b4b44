"""Complex numbers: RFFT2D (the 2-D FFT of real input over its last two axes) and REAL, IMAG
and COMPLEX_ABS of complex64 tensors.

RFFT2D crops or zero-pads the two axes to ``fft_length`` (powers of two, as LiteRT's FFT
requires) and keeps the ``fft_length[1] // 2 + 1`` non-negative frequencies of the last axis;
it is computed in float64 and rounded to complex64.
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, register

COMPLEX64 = np.dtype(np.complex64)
FLOAT32 = np.dtype(np.float32)


@register("RFFT2D")
class Rfft2d(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, length = ins
        self.expect_dtype(x, np.float32)
        self.expect_dtype(length, np.int32)
        if x.ndim < 2 or length.shape != (2,):
            raise self.fail(f"input {x.shape} needs rank 2 or more and fft_length {length.shape} two values")
        if length.value is None:
            return [Spec(None, COMPLEX64)]
        return [Spec(self._shape(x.shape, length.value), COMPLEX64)]

    def _shape(self, shape: tuple[int, ...], length: np.ndarray) -> tuple[int, ...]:
        self.length = tuple(int(n) for n in length)
        if any(n <= 0 or n & (n - 1) for n in self.length):
            raise self.fail(f"fft_length {list(self.length)} must be powers of two")
        return tuple(shape[:-2]) + (self.length[0], self.length[1] // 2 + 1)

    def eval(self, ins, outs):
        x, length = ins
        if outs[0] is None:
            outs[0] = np.empty(self._shape(x.shape, length), COMPLEX64)
        outs[0][...] = np.fft.rfft2(x.astype(np.float64), s=self.length, axes=(-2, -1))


class _ComplexToReal(Kernel):
    """complex64 in, float32 of the same shape out."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.expect_dtype(ins[0], np.complex64)
        return [Spec(ins[0].shape, FLOAT32)]


@register("REAL")
class Real(_ComplexToReal):
    def eval(self, ins, outs):
        outs[0][...] = ins[0].real


@register("IMAG")
class Imag(_ComplexToReal):
    def eval(self, ins, outs):
        outs[0][...] = ins[0].imag


@register("COMPLEX_ABS")
class ComplexAbs(_ComplexToReal):
    def eval(self, ins, outs):
        np.abs(ins[0], out=outs[0])
