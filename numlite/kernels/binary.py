"""Element-wise binary arithmetic with broadcasting: ADD, SUB, MUL, DIV and friends.

Both inputs must have the same dtype (TFLite's converter inserts CASTs otherwise); the output
has the broadcast shape. ADD, SUB, MUL and DIV carry a fused activation.

Two element-wise ops do not broadcast in LiteRT: ATAN2 (y and x of one shape) and ADD_N (any
number of inputs of one shape and dtype, summed). BITWISE_XOR and RIGHT_SHIFT take 8-, 16- and
32-bit integers.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels import parallel
from numlite.kernels.base import Kernel, Spec, broadcast_shape, fused_activation, register
from numlite.kernels.clamp import clamp

FLOAT = (np.float32,)
NUMERIC = (np.float32, np.int32, np.int64)


class Binary(Kernel):
    """Shared prepare/eval of the element-wise binary ops; subclasses set ``compute``."""

    dtypes: tuple = NUMERIC
    compute: Callable[[np.ndarray, np.ndarray, np.ndarray], None]
    # Either input of the output's shape may share its memory (``runtime.in_place_inputs``):
    # every compute reads an element of each input before it writes that element.
    inplace = (0, 1)
    # Memory passes per element: whether a large op runs in blocks on threads (``parallel``).
    passes: float = 1
    split: parallel.ElementwiseSplit | None = None

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        a, b = ins
        self.expect_dtype(a, *self.dtypes)
        if b.dtype != a.dtype:
            raise self.fail(f"inputs have different dtypes: {a.dtype.name} and {b.dtype.name}")
        # float32: the clip ufunc (clamp), 2.5x faster than np.maximum against a scalar on a
        # ResNet50 residual ADD's [56, 56, 256] (320 -> 130 us); other dtypes: base's clamps.
        self.activation = clamp(self.options) if a.dtype == np.float32 else fused_activation(self.options)
        shape = broadcast_shape(a.shape, b.shape)
        self.split = parallel.ElementwiseSplit.for_node(self.node, self._block, shape, self.passes)
        return [Spec(shape, a.dtype)]

    def _block(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        type(self).compute(a, b, out)
        if self.activation is not None:
            self.activation(out)

    def eval(self, ins, outs):
        if self.split is not None:
            self.split(ins, outs[0])
            return
        type(self).compute(ins[0], ins[1], outs[0])
        if self.activation is not None:
            self.activation(outs[0])

    def direct(self, ins, outs):
        """Without a fused activation, and unless split over threads, a ufunc op is that one
        ufunc call (see ``numlite.interpreter.runtime.direct_call``)."""
        ufunc = getattr(type(self).compute, "ufunc", None)
        if ufunc is None or self.activation is not None or self.split is not None:
            return None
        a, b = _same_shape(ins[0], outs[0]), _same_shape(ins[1], outs[0])
        if ufunc in _OUT_BY_KEYWORD:
            return partial(ufunc, out=outs[0]), (a, b)
        return ufunc, (a, b, outs[0])


# NumPy 2.4 deprecates a positional output for these two (n-ary extrema may take its place):
# it warns at every call and takes the slow path (0.79 us against 0.28 with ``out=``).
_OUT_BY_KEYWORD = (np.maximum, np.minimum)


def _same_shape(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``x`` viewed in ``out``'s shape when it has as many elements (a bias ``[128]`` against
    ``[1, 128]``): a ufunc on operands of one shape skips broadcasting (0.26 us, not 0.7)."""
    if x.shape != out.shape and x.size == out.size and x.flags.c_contiguous:
        return x.reshape(out.shape)
    return x


def _ufunc(ufunc: np.ufunc) -> Callable:
    def compute(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        ufunc(a, b, out=out)

    compute.ufunc = ufunc  # type: ignore[attr-defined]  # what direct() calls instead
    return compute


@register("ADD")
class Add(Binary):
    dtypes = NUMERIC + (np.int16,)
    compute = _ufunc(np.add)


@register("SUB")
class Sub(Binary):
    dtypes = NUMERIC + (np.int16,)
    compute = _ufunc(np.subtract)


@register("MUL")
class Mul(Binary):
    dtypes = NUMERIC + (np.int16, np.complex64)
    compute = _ufunc(np.multiply)

    def prepare(self, ins):
        specs = super().prepare(ins)
        if ins[0].dtype == np.complex64 and self.activation is not None:
            raise self.fail("a fused activation is not allowed on complex64 (as in LiteRT)")
        return specs


def _divide(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    if out.dtype.kind == "f":
        np.divide(a, b, out=out)
    else:  # C++ integer division truncates toward zero
        with np.errstate(divide="ignore"):
            out[...] = np.trunc(np.divide(a, b, dtype=np.float64))


class Division(Binary):
    """DIV, FLOOR_DIV and FLOOR_MOD: LiteRT fails the invoke ("Division by 0") when an integer
    divisor holds a 0, before computing anything; float division gives infinities or NaN."""

    def eval(self, ins, outs):
        if ins[1].dtype.kind in "iu" and not ins[1].all():
            raise InvokeError("division by 0: the integer divisor (input 1) holds a 0 (LiteRT fails the invoke too)")
        super().eval(ins, outs)

    def direct(self, ins, outs):
        return None if ins[1].dtype.kind in "iu" else super().direct(ins, outs)  # eval checks the divisor


@register("DIV")
class Div(Division):
    passes = 2
    compute = _divide


@register("SQUARED_DIFFERENCE")
class SquaredDifference(Binary):
    passes = 2

    @staticmethod
    def compute(a, b, out):
        np.subtract(a, b, out=out)
        np.multiply(out, out, out=out)


@register("MAXIMUM")
class Maximum(Binary):
    dtypes = NUMERIC + (np.int8, np.uint8, np.int16)
    compute = _ufunc(np.maximum)


@register("MINIMUM")
class Minimum(Binary):
    dtypes = NUMERIC + (np.int8, np.uint8, np.int16)
    compute = _ufunc(np.minimum)


@register("POW")
class Pow(Binary):
    passes = 10
    dtypes = (np.float32, np.int32)

    @staticmethod
    def compute(a, b, out):
        if out.dtype.kind == "f":
            np.power(a, b, out=out)
        else:  # TFLite raises integers to non-negative powers by repeated multiplication
            np.power(a, np.maximum(b, 0), out=out)


@register("FLOOR_DIV")
class FloorDiv(Division):
    passes = 3
    dtypes = (np.float32, np.int32, np.int64, np.int16, np.int8)

    @staticmethod
    def compute(a, b, out):
        if out.dtype.kind == "f":
            np.floor(np.divide(a, b), out=out)
        else:
            np.floor_divide(a, b, out=out)


@register("FLOOR_MOD")
class FloorMod(Division):
    passes = 3
    dtypes = (np.float32, np.int32, np.int64, np.int16, np.int8)
    compute = _ufunc(np.mod)


@register("ATAN2")
class Atan2(Kernel):
    """``atan2(y, x)`` element-wise (input 0 is y). LiteRT reads both inputs element by element
    without broadcasting, so their shapes must be equal."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        y, x = ins
        self.expect_dtype(y, np.float32, np.float64)
        if x.dtype != y.dtype:
            raise self.fail(f"inputs have different dtypes: {y.dtype.name} and {x.dtype.name}")
        if x.shape != y.shape:
            raise self.fail(f"inputs have different shapes: {y.shape} and {x.shape}")
        return [Spec(y.shape, y.dtype)]

    def eval(self, ins, outs):
        np.arctan2(ins[0], ins[1], out=outs[0])


@register("ADD_N")
class AddN(Kernel):
    """The sum of two or more inputs of one shape and dtype (float32 or int32, which wraps),
    added in input order."""

    def prepare(self, ins):
        if len(ins) < 2 or any(t is None for t in ins):
            raise self.fail(f"expects at least 2 inputs, got {len(ins)}")
        first = ins[0]
        self.expect_dtype(first, np.float32, np.int32)
        for t in ins[1:]:
            if t.dtype != first.dtype or t.shape != first.shape:
                raise self.fail(
                    f"inputs differ: {first.shape} {first.dtype.name} and {t.shape} {t.dtype.name}"
                )
        return [Spec(first.shape, first.dtype)]

    def eval(self, ins, outs):
        out = outs[0]
        np.add(ins[0], ins[1], out=out)
        for x in ins[2:]:
            out += x


# LiteRT's integer bitwise kernels: 8-, 16- and 32-bit integers, signed or not.
BITWISE = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)


class Bitwise(Binary):
    """Integer bitwise ops; LiteRT broadcasts them (4-D at most) like the arithmetic ones."""

    dtypes = BITWISE

    def prepare(self, ins):
        specs = super().prepare(ins)
        if ins[0].shape != ins[1].shape and len(specs[0].shape) > 4:
            raise self.fail(f"broadcasting supports 4 dimensions at most, the output has {len(specs[0].shape)}")
        return specs


@register("BITWISE_XOR")
class BitwiseXor(Bitwise):
    compute = _ufunc(np.bitwise_xor)


@register("RIGHT_SHIFT")
class RightShift(Bitwise):
    """``x >> y`` with y clamped to [0, bits - 1] (LiteRT avoids C++'s undefined shifts so);
    signed integers shift arithmetically."""

    @staticmethod
    def compute(a, b, out):
        limit = a.dtype.itemsize * 8 - 1
        np.right_shift(a, np.clip(b, 0, limit).astype(a.dtype), out=out)
