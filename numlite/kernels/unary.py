"""Element-wise unary math: RSQRT, SQRT, EXP, LOG, ABS, NEG, SQUARE, SIN, COS, FLOOR, CEIL, ROUND
and SIGN.

The output has the input's shape and dtype. Each op accepts the (non-quantized) dtypes its
LiteRT kernel computes on: float32 everywhere, plus integers where LiteRT has an integer path
(ABS on int32/int16, NEG on int8/int16/int32/int64) and float16 where LiteRT has an Eigen::half
path (NEG, FLOOR, CEIL, ROUND); SIGN takes float32, float64 and int32. Integer results wrap
as in C++ (``abs(INT32_MIN)`` and ``-INT32_MIN`` stay INT32_MIN), which is what NumPy's
fixed-width arithmetic does as well.
Quantized int8/int16 variants (LUT or fixed-point kernels in LiteRT) are not implemented.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from numlite.kernels import parallel
from numlite.kernels.base import Kernel, Spec, TensorInfo, register

F32 = (np.float32,)


QUANTIZED_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def reject_quantized(kernel: Kernel, t: TensorInfo) -> None:
    """int8/uint8/int16 tensors with quantization parameters take LiteRT's quantized paths,
    which these kernels do not implement: refuse them rather than compute on raw integers."""
    if t.dtype in QUANTIZED_TYPES and t.quantization is not None and not t.quantization.is_empty():
        raise kernel.fail(f"quantized {t.dtype.name} input {t.name!r} is not supported")


class Unary(Kernel):
    """One input, one output of the same shape and dtype; subclasses set ``dtypes`` and
    ``compute(x, out)``, which writes into ``out`` in place. A subclass whose compute may run
    with ``out`` being ``x`` (it reads x only in its first pass) says so with ``inplace = (0,)``
    (see ``numlite.interpreter.runtime.in_place_inputs``)."""

    dtypes: tuple = F32
    compute: Callable[[np.ndarray, np.ndarray], None]
    # Memory passes per element (a transcendental counts as several): how much work the op is,
    # to decide whether a large one runs in blocks on several threads (``parallel``).
    passes: float = 1
    split: parallel.ElementwiseSplit | None = None

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_dtype(x, *self.dtypes)
        reject_quantized(self, x)
        self.split = parallel.ElementwiseSplit.for_node(self.node, self.compute_fn(), x.shape, self.passes)
        return [Spec(x.shape, x.dtype)]

    def compute_fn(self) -> Callable[[np.ndarray, np.ndarray], None]:
        """``compute(x, out)`` as eval calls it."""
        return type(self).compute

    def eval(self, ins, outs):
        if self.split is not None:
            self.split(ins, outs[0])
        else:
            type(self).compute(ins[0], outs[0])

    def direct(self, ins, outs):
        """``compute`` as one call when it is marked so (:func:`single_call`) and the op is not
        split over threads; see ``numlite.interpreter.runtime.direct_call``."""
        if self.split is not None:
            return None
        call = getattr(type(self).compute, "single_call", None)
        if call is None:
            return None
        fn, constants = call
        return fn, (ins[0], *constants, outs[0])


def single_call(fn: Callable[..., object], *constants: object) -> Callable:
    """Mark a ``compute(x, out)`` as doing exactly ``fn(x, *constants, out)`` (no error-state
    changes, no dtype branches), so that a compiled plan calls ``fn`` directly."""

    def mark(compute: Callable) -> Callable:
        compute.single_call = (fn, constants)  # type: ignore[attr-defined]
        return compute

    return mark


def _ufunc(ufunc: np.ufunc, quiet: bool = False) -> Callable[[np.ndarray, np.ndarray], None]:
    """``compute`` as the ufunc; ``quiet`` ufuncs cannot raise floating-point warnings (abs,
    negative, floor...), so they need no error state and run as one direct call."""
    if quiet:

        @single_call(ufunc)
        def compute_quietly(x: np.ndarray, out: np.ndarray) -> None:
            ufunc(x, out=out)

        return compute_quietly

    def compute(x: np.ndarray, out: np.ndarray) -> None:
        with np.errstate(invalid="ignore"):  # NaN results (sqrt(-1), sin(inf)) are the answer
            ufunc(x, out=out)

    return compute


@register("SQRT")
class Sqrt(Unary):
    inplace = (0,)
    passes = 2
    compute = _ufunc(np.sqrt)


@register("RSQRT")
class Rsqrt(Unary):
    """``1.f / std::sqrt(x)``: both steps correctly rounded in float32, so two ufuncs agree."""

    inplace = (0,)
    passes = 3

    @staticmethod
    def compute(x, out):
        with np.errstate(divide="ignore", invalid="ignore"):
            np.sqrt(x, out=out)
            np.divide(np.float32(1), out, out=out)  # as reciprocal, and vectorised (see activations)


@register("EXP")
class Exp(Unary):
    inplace = (0,)
    passes = 7

    @staticmethod
    def compute(x, out):
        with np.errstate(over="ignore"):
            np.exp(x, out=out)


@register("LOG")
class Log(Unary):
    inplace = (0,)
    passes = 7

    @staticmethod
    def compute(x, out):
        with np.errstate(divide="ignore", invalid="ignore"):
            np.log(x, out=out)


@register("SIN")
class Sin(Unary):
    inplace = (0,)
    passes = 10
    compute = _ufunc(np.sin)


@register("COS")
class Cos(Unary):
    inplace = (0,)
    passes = 10
    compute = _ufunc(np.cos)


@register("SQUARE")
class Square(Unary):
    inplace = (0,)

    @staticmethod
    def compute(x, out):
        with np.errstate(over="ignore"):
            np.multiply(x, x, out=out)


@register("ABS")
class Abs(Unary):
    inplace = (0,)
    # int16 only without quantization (LiteRT's plain int16 path); int8 ABS is quantized-only.
    dtypes = (np.float32, np.int32, np.int16)
    compute = _ufunc(np.abs, quiet=True)


@register("NEG")
class Neg(Unary):
    inplace = (0,)
    # LiteRT negates int8 raw values too (reference Negate), so int8 is plain arithmetic here.
    dtypes = (np.float32, np.float16, np.int8, np.int16, np.int32, np.int64)

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_dtype(x, *self.dtypes)
        return [Spec(x.shape, x.dtype)]

    compute = _ufunc(np.negative, quiet=True)


@register("FLOOR")
class Floor(Unary):
    inplace = (0,)
    dtypes = (np.float32, np.float16)
    compute = _ufunc(np.floor, quiet=True)


@register("CEIL")
class Ceil(Unary):
    inplace = (0,)
    dtypes = (np.float32, np.float16)
    compute = _ufunc(np.ceil, quiet=True)


@register("ROUND")
class Round(Unary):
    """Round half to even, as LiteRT's RoundToNearest (``np.rint``: same values; only the sign
    of a zero result may differ from the builtin kernel, which returns +0 for -0.5 < x < 0)."""

    inplace = (0,)

    dtypes = (np.float32, np.float16)
    compute = _ufunc(np.rint, quiet=True)


@register("SIGN")
class Sign(Unary):
    """-1, 0 or 1 by the sign of x; NaN stays NaN and -0.0 gives +0.0 (LiteRT returns the
    literal 0 for anything neither above nor below zero)."""

    dtypes = (np.float32, np.float64, np.int32)

    @staticmethod
    def compute(x, out):
        # (x > 0) - (x < 0) in the output type: +0 for both zeros, unlike np.sign(-0.0).
        np.greater(x, 0, out=out)
        out -= x < 0
        if out.dtype.kind == "f":
            np.copyto(out, x, where=np.isnan(x))
