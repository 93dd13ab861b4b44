"""Activation functions: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, TANH, LOGISTIC, LEAKY_RELU,
HARD_SWISH, GELU, ELU and PRELU.

All are float32 here (TANH and LOGISTIC also float16, computed in float32 and rounded, as
Eigen::half does); LiteRT's quantized uint8/int8/int16 variants are not implemented. The
formulas follow LiteRT's float kernels:

* LEAKY_RELU: ``x > 0 ? x : alpha * x`` (a select: ``max(x, alpha * x)`` only where the two
  agree bit for bit, 0 < alpha <= 1, see "Selects as maxima"; alpha > 1 and negative alpha
  behave as in LiteRT).
* HARD_SWISH: ``x * min(6, max(0, x + 3)) / 6``.
* ELU: ``x < 0 ? expm1(x) : x`` (alpha 1; NaN passes through).
* GELU: exact ``0.5 * x * erfc(-x / sqrt(2))`` (LiteRT's form, which avoids cancellation for
  large negative x) or, with ``approximate``,
  ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``.
* PRELU: ``x >= 0 ? x : x * alpha`` with alpha broadcast against x; the broadcast shape must
  be the input's shape.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from numlite.kernels.base import Kernel, Spec, broadcast_shape, register
from numlite.kernels.clamp import clip_ufunc
from numlite.kernels.scratchpad import ScratchUser
from numlite.kernels.unary import Unary, single_call


class Activation(Unary):
    """One float input, one output of its shape and dtype, computed by ``compute(x, out)``,
    which may be a method reading options that prepare stored."""

    def compute_fn(self):
        return self.compute  # a method may read options prepare stored

    def eval(self, ins, outs):
        if self.split is not None:
            self.split(ins, outs[0])
        else:
            self.compute(ins[0], outs[0])

    def direct(self, ins, outs):
        """``compute`` as one call when it is marked so (``unary.single_call``), is not a
        method reading options and the op is not split over threads; see
        ``numlite.interpreter.runtime.direct_call``."""
        if self.split is not None:
            return None
        compute = inspect.getattr_static(type(self), "compute", None)
        call = getattr(compute.__func__, "single_call", None) if isinstance(compute, staticmethod) else None
        if call is None:
            return None
        fn, constants = call
        return fn, (ins[0], *constants, outs[0])


# The clamps as the clip ufunc on 0-d bounds: np.maximum against a scalar has no SIMD path in
# NumPy 2.4 (0.3 ns an element against clip's 0.12 on a 1M-value array), and a scalar operand
# costs more per call than a 0-d one (see _ONE below).
_ZERO, _ONE_BOUND, _MINUS_ONE, _SIX, _INF, _MINUS_INF = (np.array(v, np.float32) for v in (0, 1, -1, 6, np.inf, -np.inf))


@register("RELU")
class Relu(Activation):
    inplace = (0,)  # element by element: the output may be written over the input

    @staticmethod
    @single_call(clip_ufunc, _ZERO, _INF)
    def compute(x, out):
        clip_ufunc(x, _ZERO, _INF, out)


@register("RELU6")
class Relu6(Activation):
    inplace = (0,)  # element by element: the output may be written over the input

    @staticmethod
    @single_call(clip_ufunc, _ZERO, _SIX)
    def compute(x, out):
        clip_ufunc(x, _ZERO, _SIX, out)


@register("RELU_N1_TO_1")
class ReluN1To1(Activation):
    inplace = (0,)  # element by element: the output may be written over the input

    @staticmethod
    @single_call(clip_ufunc, _MINUS_ONE, _ONE_BOUND)
    def compute(x, out):
        clip_ufunc(x, _MINUS_ONE, _ONE_BOUND, out)


@register("RELU_0_TO_1")
class Relu0To1(Activation):
    inplace = (0,)  # element by element: the output may be written over the input

    @staticmethod
    @single_call(clip_ufunc, _ZERO, _ONE_BOUND)
    def compute(x, out):
        clip_ufunc(x, _ZERO, _ONE_BOUND, out)


@register("ELU")
class Elu(Activation):
    passes = 10

    @staticmethod
    def compute(x, out):
        if not np.may_share_memory(x, out):  # see "Selects as maxima": expm1(x) >= x
            clip_ufunc(x, _MINUS_INF, _ZERO, out)
            np.expm1(out, out)
            np.maximum(x, out, out=out)
            return
        np.minimum(x, np.float32(0), out=out)
        np.expm1(out, out=out)
        np.copyto(out, x, where=~(x < 0))  # x itself unless x < 0: NaN and -0.0 pass through


@register("TANH")
class Tanh(Activation):
    dtypes = (np.float32, np.float16)
    inplace = (0,)
    passes = 12

    def direct(self, ins, outs):
        return (np.tanh, (ins[0], outs[0])) if ins[0].dtype == np.float32 and self.split is None else None

    @staticmethod
    def compute(x, out):
        if x.dtype == np.float16:
            out[...] = np.tanh(x.astype(np.float32))
        else:
            np.tanh(x, out=out)


# Constants of small-array ufunc calls as 0-d float32 arrays: the same values and types as
# np.float32 scalars, but a scalar operand costs NumPy 2 about 0.16 us more per call
# (0.39 us against 0.23 for an add on 32 values), which a loop body's LOGISTIC pays twice.
_ONE = np.array(1, np.float32)


def _logistic(x: np.ndarray, out: np.ndarray) -> None:
    """1 / (1 + exp(-x)) in place; exp overflows to inf for x < -88 and the result is 0
    (invoke ignores floating-point exceptions: no errstate here, which would cost more than
    the four calls on a loop body's small tensors). ``divide(1, y)`` rather than
    ``reciprocal(y)``: the same correctly rounded quotient, but NumPy's divide loop is
    vectorised for AVX2 and its reciprocal is not (1.3x faster). Not ``2 + expm1(-x)``: as
    accurate and faster on moderate inputs (0.25 against 0.34 ns an element), but NumPy's
    float32 expm1 takes a slow path where it overflows (7x on values of magnitude ~100:
    EfficientNetB0's LOGISTIC 3.5 -> 5.5 ms)."""
    # outputs positional: keywords cost more than the work on a loop body's gates (1.33 -> 1.19 us)
    np.negative(x, out)
    np.exp(out, out)
    np.add(out, _ONE, out)
    np.divide(_ONE, out, out)


def _swish(x: np.ndarray, scratch: np.ndarray, out: np.ndarray) -> None:
    """``x * logistic(x)`` (swish, SiLU) as ``x / (1 + exp(-x))``: four passes where LOGISTIC
    then MUL take five (12-13% faster on EfficientNetB0's tensors), and one rounding fewer.
    ``scratch`` holds ``1 + exp(-x)`` (the LOGISTIC's output, which nothing else reads); ``out``
    may be ``x`` or ``scratch``. The extremes agree with the two ops: -inf gives NaN
    (-inf * 0), x below about -88 gives -0.0 (x / inf against x * 0)."""
    np.negative(x, scratch)
    np.exp(scratch, scratch)
    np.add(scratch, _ONE, scratch)
    np.divide(x, scratch, out)


_logistic.elementwise = True  # type: ignore[attr-defined]  # programs may merge calls on adjacent memory
# Programs may run this call and a MUL of its input by its output as one (runtime.fuse_times_input).
_logistic.times_input = _swish  # type: ignore[attr-defined]


@register("LOGISTIC")
class Logistic(Activation):
    dtypes = (np.float32, np.float16)
    inplace = (0,)  # _logistic reads x only in its first pass
    passes = 10  # exp alone costs about seven passes of a multiply

    @staticmethod
    def compute(x, out):
        if x.dtype == np.float16:
            tmp = np.empty(x.shape, np.float32)
            _logistic(x.astype(np.float32), tmp)
            out[...] = tmp
        else:
            _logistic(x, out)

    def direct(self, ins, outs):
        """float32 and not split over threads: the four ufunc calls of ``_logistic``."""
        if self.split is not None or ins[0].dtype != np.float32:
            return None
        return _logistic, (ins[0], outs[0])


# Selects as maxima. ``x > 0 ? x : f(x)`` where ``f(x) >= x`` for every x <= 0 and ``f(x) <= x``
# for x > 0 is ``max(x, f(x))``, which returns one of its operands bit for bit: LEAKY_RELU and
# PRELU with slopes in (0, 1] (a factor in (0, 1] never rounds |x| up past itself), ELU with
# ``f = expm1(min(x, 0))``. NaN, infinities and -0.0 come out as the select gives them. One fast
# pass, where a masked copy (``np.copyto(out, x, where=x > 0)``) takes 15x longer in NumPy 2.4
# (LEAKY_RELU over 56x56x64: 875 -> 35 us). It needs ``out`` apart from ``x`` (these kernels are
# not in place; the check guards other bindings).


@register("LEAKY_RELU")
class LeakyRelu(Activation):
    def prepare(self, ins):
        specs = super().prepare(ins)
        self.alpha = np.float32(getattr(self.options, "alpha", 0.0) if self.options is not None else 0.0)
        self.by_maximum = bool(0 < self.alpha <= 1)  # Keras' slopes (0.01 to 0.3)
        return specs

    def compute(self, x, out):
        if self.by_maximum and not np.may_share_memory(x, out):  # see "Selects as maxima"
            np.multiply(x, self.alpha, out)
            np.maximum(x, out, out=out)
            return
        with np.errstate(over="ignore", invalid="ignore"):
            np.multiply(x, self.alpha, out=out)
        np.copyto(out, x, where=x > 0)


@register("HARD_SWISH")
class HardSwish(Activation):
    passes = 4

    @staticmethod
    def compute(x, out):
        # x * (relu6(x + 3) * (1/6)), in LiteRT's optimized kernel's order: no overflow to inf
        # for huge x (x * 6 would), and the same rounding as LiteRT's builtin kernel.
        np.add(x, np.float32(3), out=out)
        clip_ufunc(out, np.float32(0), np.float32(6), out=out)
        out *= np.float32(1 / 6)
        with np.errstate(invalid="ignore"):  # inf * 0 for x = -inf: NaN, as in LiteRT
            out *= x


# ----------------------------------------------------------------------------- GELU

_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))
_GELU_CUBIC = np.float32(0.044715)
_MINUS_SQRT_HALF = -math.sqrt(0.5)

# Chebyshev fit of erfc (Numerical Recipes' erfcc): erfc(z) = t * exp(-z^2 + P(t)) with
# t = 1 / (1 + z / 2) for z >= 0; relative error below 1.2e-7 everywhere, i.e. about one
# float32 ulp, which is as close as float32 erfc implementations get to each other.
_ERFC_COEFFS = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)


def erfc(z: np.ndarray) -> np.ndarray:
    """The complementary error function of a float64 array (relative error < 1.2e-7)."""
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = np.full_like(t, _ERFC_COEFFS[-1])
    for c in _ERFC_COEFFS[-2::-1]:  # Horner, ten coefficients: not a loop over elements
        poly *= t
        poly += c
    with np.errstate(over="ignore", under="ignore"):
        r = t * np.exp(poly - a * a)
    return np.where(z >= 0, r, 2.0 - r)


# The exact GELU evaluates erfc in float64 over blocks of this many values, on buffers of the
# block's size: its ~30 passes then run in cache, where whole-tensor float64 temporaries were
# allocated and streamed through memory at every pass (56x56x64: 1.74 -> 0.93 ms; 8192 values
# 1.12 ms, the calls' own cost growing; 32768 0.90 ms for twice the working memory). LiteRT's
# default delegate takes 28 us with a float32 rational approximation; NumPy has no erf, and
# float32 arithmetic would lose the one-ulp accuracy the exact form keeps in the negative tail.
GELU_BLOCK = 16384


def _erfc_block(z: np.ndarray, a: np.ndarray, t: np.ndarray, p: np.ndarray) -> None:
    """``p = erfc(z)`` for a float64 block, as :func:`erfc` computes it (``a`` and ``t``:
    working buffers of its size). ``2 - r`` for negative z is ``r * (1 - 2s) + 2s`` with
    ``s = (z < 0)``: the same single rounding, without a masked copy. Invoke ignores the
    floating-point errors (exp's overflow and underflow)."""
    np.abs(z, out=a)
    np.multiply(a, 0.5, out=t)
    np.add(t, 1.0, out=t)
    np.divide(1.0, t, out=t)
    np.multiply(t, _ERFC_COEFFS[-1], out=p)
    np.add(p, _ERFC_COEFFS[-2], out=p)
    for c in _ERFC_COEFFS[-3::-1]:  # Horner
        np.multiply(p, t, out=p)
        np.add(p, c, out=p)
    np.multiply(a, a, out=a)
    np.subtract(p, a, out=p)
    np.exp(p, out=p)
    np.multiply(p, t, out=p)
    np.less(z, 0.0, out=a)
    np.multiply(a, -2.0, out=t)
    np.add(t, 1.0, out=t)
    np.multiply(p, t, out=p)
    np.add(a, a, out=a)
    np.add(p, a, out=p)


@register("GELU")
class Gelu(ScratchUser, Activation):
    passes = 0  # never split: the exact form works in one set of block buffers

    def prepare(self, ins):
        specs = super().prepare(ins)
        self.approximate = bool(getattr(self.options, "approximate", False)) if self.options is not None else False
        self.block = block = min(GELU_BLOCK, ins[0].size)
        exact = not self.approximate and ins[0].dtype == np.float32 and block > 0
        self.want_scratch([((block,), np.float64)] * 4 + [((block,), np.float32)] if exact else [])
        return specs

    def _exact(self, x: np.ndarray, out: np.ndarray) -> None:
        """``0.5 * x * erfc(-x / sqrt(2))``, erfc in float64 rounded once, block by block."""
        if self.scratch_stale():
            self.blocks = self.take_scratch()
        z, a, t, p, e = self.blocks
        xs, outs = x.reshape(-1), out.reshape(-1)
        for start in range(0, xs.size, self.block):
            xb, ob = xs[start : start + self.block], outs[start : start + self.block]
            n = xb.size
            np.multiply(xb, _MINUS_SQRT_HALF, out=z[:n])
            _erfc_block(z[:n], a[:n], t[:n], p[:n])
            np.copyto(e[:n], p[:n], casting="same_kind")
            np.multiply(xb, np.float32(0.5), out=ob)
            np.multiply(ob, e[:n], out=ob)  # -inf * erfc(inf) = -inf * 0: NaN, as in LiteRT

    def compute(self, x, out):
        if self.approximate:
            with np.errstate(over="ignore", invalid="ignore"):
                np.multiply(x, x, out=out)
                out *= x
                out *= _GELU_CUBIC
                out += x
                out *= _SQRT_2_OVER_PI
                np.tanh(out, out=out)
                out += np.float32(1)
                out *= np.float32(0.5)  # exact, and before x so that 0.5 * x * 2 stays finite
                out *= x
        elif self.scratch_specs and x.flags.c_contiguous and out.flags.c_contiguous and x.dtype == np.float32:
            self._exact(x, out)
        else:
            # erfc evaluated in float64 and rounded once, then 0.5 * x * erfc in float32.
            e = erfc(x.astype(np.float64) * _MINUS_SQRT_HALF).astype(np.float32)
            np.multiply(x, np.float32(0.5), out=out)
            with np.errstate(invalid="ignore"):  # -inf * erfc(inf) = -inf * 0: NaN, as in LiteRT
                out *= e


# ----------------------------------------------------------------------------- PRELU


@register("PRELU")
class Prelu(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, alpha = ins
        self.expect_dtype(x, np.float32)
        if alpha.dtype != x.dtype:
            raise self.fail(f"alpha has dtype {alpha.dtype.name}, input has {x.dtype.name}")
        shape = broadcast_shape(x.shape, alpha.shape)
        if shape != tuple(x.shape):  # LiteRT: "the output shape should always be the input shape"
            raise self.fail(f"alpha of shape {alpha.shape} broadcasts input {x.shape} to {shape}")
        # Keras' PReLU slopes start at 0.25 and usually stay in (0, 1]
        self.by_maximum = alpha.value is not None and bool(np.all((alpha.value > 0) & (alpha.value <= 1)))
        return [Spec(shape, x.dtype)]

    def eval(self, ins, outs):
        x, alpha = ins
        out = outs[0]
        with np.errstate(over="ignore", invalid="ignore"):
            np.multiply(x, alpha, out=out)
        if self.by_maximum and not np.may_share_memory(x, out):  # see "Selects as maxima"
            np.maximum(x, out, out=out)
            return
        np.copyto(out, x, where=x >= 0)
