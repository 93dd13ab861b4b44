"""Element-wise epilogues: the activation a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED
node's output goes through next, computed where the node stores its output instead of by
nodes of their own (the chains are found by :mod:`numlite.jit.fusion`).

The convolutions' loop kernels apply it to a tile's registers before they store them
(:func:`lanes`), FULLY_CONNECTED's to each output (:func:`epilogue_value`); the other forms (a
product by BLAS, the inlined element loops) end with one element loop of :data:`EXPRESSIONS`
(:func:`emit`). Each computes exactly what the compiled element-wise nodes would have (the
same float32 operations in the same order), so a fused model gives the same bits as an
unfused one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils
from numba import types
from numba.extending import intrinsic

from numlite.jit.kernels.common import clip
from numlite.jit.kernels.simd import _I32, LANES, f32x8
from numlite.jit.kernels.transcendental import EXP_HIGH, EXP_LOW, LN2_HIGH, LN2_LOW, LOG2_E, ROUNDER, TANH_SERIES_BELOW, sigmoid32, tanh32

F = np.float32
NONE, LOGISTIC, SWISH, TANH, HARD_SWISH = range(5)
# The epilogue's name (as numlite.jit.fusion names it) -> its code in a loop kernel's parameters.
CODES = {"LOGISTIC": LOGISTIC, "SWISH": SWISH, "TANH": TANH, "HARD_SWISH": HARD_SWISH}
SIXTH = F(1 / 6)

# The same, as an expression of the generated code on the value ``v`` (activations.EXPRESSIONS
# and ONE_INPUT write these nodes alike; SWISH is LOGISTIC, then MUL by the LOGISTIC's input).
EXPRESSIONS = {
    "LOGISTIC": lambda v: f"sigmoid32({v})",
    "SWISH": lambda v: f"{v} * sigmoid32({v})",
    "TANH": lambda v: f"tanh32({v})",
    "HARD_SWISH": lambda v: f"clip({v} + np.float32(3.0), np.float32(0.0), np.float32(6.0)) * np.float32({1 / 6!r}) * {v}",
}


@njit(inline="always")
def _hard_swish(v):
    return clip(v + F(3.0), F(0.0), F(6.0)) * SIXTH * v


# -- on eight lanes, before the loop kernels store them ---------------------------------------------
#
# The loop kernels hold a tile's outputs in 8-lane registers (numlite.jit.kernels.simd): the
# epilogue runs on those registers, between the clamp and the store. A scalar loop over the
# stored values, inlined there, did not pay: LLVM unrolled it where the count was known (8 or
# 16 lanes) and left it scalar, or vectorized it 16 lanes wide with 4 interleaved, so a tile's
# row (at most 16 values) ran in the scalar remainder: swish after a convolution took 2.5-5x
# the unfused nodes' time. These are the scalar functions of ``transcendental.py`` written
# lane-wise, operation for operation (multiplies and adds, never fused), so the lanes hold the
# bits the scalar functions give.


def _splat(value: float, like: Any) -> Any:
    """``value`` (as float32) in every lane of a vector of ``like``'s type."""
    return ir.Constant(like.type, [float(np.float32(value))] * like.type.count)


def _exp(builder: Any, x: Any) -> Any:
    """transcendental.exp32, lane-wise."""
    low, high = _splat(EXP_LOW, x), _splat(EXP_HIGH, x)
    above = builder.fcmp_ordered(">", x, high)
    v = builder.select(builder.fcmp_ordered("<", x, low), low, builder.select(above, high, x))  # NaN stays NaN
    rounder = _splat(ROUNDER, x)
    n = builder.fsub(builder.fadd(builder.fmul(v, _splat(LOG2_E, x)), rounder), rounder)
    r = builder.fsub(builder.fsub(v, builder.fmul(n, _splat(LN2_HIGH, x))), builder.fmul(n, _splat(LN2_LOW, x)))
    p = _splat(1.0 / 5040, x)
    for c in (1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0):
        p = builder.fadd(builder.fmul(p, r), _splat(c, x))
    count = x.type.count
    ints = ir.VectorType(_I32, count)
    bits = builder.shl(builder.add(builder.fptosi(n, ints), ir.Constant(ints, [126] * count)), ir.Constant(ints, [23] * count))
    e = builder.fmul(builder.fmul(p, builder.bitcast(bits, x.type)), _splat(2.0, x))
    return builder.select(above, _splat(np.inf, x), e)


def _sigmoid(builder: Any, x: Any) -> Any:
    """transcendental.sigmoid32, lane-wise: 1 / (1 + e^-x)."""
    one = _splat(1.0, x)
    return builder.fdiv(one, builder.fadd(one, _exp(builder, builder.fsub(_splat(-0.0, x), x))))


def _tanh(builder: Any, x: Any) -> Any:
    """transcendental.tanh32, lane-wise."""
    fabs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(x.type, [x.type]), f"llvm.fabs.v{x.type.count}f32")
    a = builder.call(fabs, [x])
    e = _exp(builder, builder.fmul(_splat(-2.0, x), a))
    one = _splat(1.0, x)
    t = builder.fdiv(builder.fsub(one, e), builder.fadd(one, e))
    s = builder.fmul(x, x)
    series = _splat(62.0 / 2835, x)
    for c in (-17.0 / 315, 2.0 / 15, -1.0 / 3, 1.0):
        series = builder.fadd(_splat(c, x), builder.fmul(s, series))
    series = builder.fmul(x, series)
    signed = builder.select(builder.fcmp_ordered(">=", x, _splat(0.0, x)), t, builder.fsub(_splat(-0.0, x), t))
    return builder.select(builder.fcmp_ordered("<", a, _splat(TANH_SERIES_BELOW, x)), series, signed)


def _hard_swish_lanes(builder: Any, x: Any) -> Any:
    """_hard_swish, lane-wise."""
    zero, six = _splat(0.0, x), _splat(6.0, x)
    c = builder.fadd(x, _splat(3.0, x))
    c = builder.select(builder.fcmp_ordered("<", c, zero), zero, builder.select(builder.fcmp_ordered(">", c, six), six, c))
    return builder.fmul(builder.fmul(c, _splat(SIXTH, x)), x)


def _lanes(name: str, build: Any) -> Any:
    """An intrinsic applying ``build`` to two 8-lane values as one of 16 lanes (one ``zmm``
    register where the machine has AVX-512, two ``ymm`` otherwise), returning them as two."""

    @intrinsic
    def op(typingctx: Any, a: Any, b: Any) -> Any:
        if a != f32x8 or b != f32x8:
            return None

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            both = builder.shuffle_vector(args[0], args[1], ir.Constant(ir.VectorType(_I32, 2 * LANES), list(range(2 * LANES))))
            done = build(builder, both)
            halves = [builder.shuffle_vector(done, done, ir.Constant(ir.VectorType(_I32, LANES), list(range(k, k + LANES))))
                      for k in (0, LANES)]  # fmt: skip
            return context.make_tuple(builder, sig.return_type, halves)

        return types.UniTuple(f32x8, 2)(a, b), codegen

    op.__name__ = op.__qualname__ = name
    return op


logistic16 = _lanes("logistic16", _sigmoid)
swish16 = _lanes("swish16", lambda builder, x: builder.fmul(x, _sigmoid(builder, x)))
tanh16 = _lanes("tanh16", _tanh)
hard_swish16 = _lanes("hard_swish16", _hard_swish_lanes)


@njit(inline="always")
def lanes(a, b, code):
    """Two 8-lane values through epilogue ``code``."""
    if code == LOGISTIC:
        return logistic16(a, b)
    if code == SWISH:
        return swish16(a, b)
    if code == TANH:
        return tanh16(a, b)
    if code == HARD_SWISH:
        return hard_swish16(a, b)
    return a, b


@njit(inline="always")
def epilogue_value(v, code):
    """One value through epilogue ``code`` (FULLY_CONNECTED's loop kernel, one output at a time)."""
    if code == LOGISTIC:
        return sigmoid32(v)
    if code == SWISH:
        return v * sigmoid32(v)
    if code == TANH:
        return tanh32(v)
    if code == HARD_SWISH:
        return _hard_swish(v)
    return v


def emit(g, out, name: str | None) -> None:
    """The epilogue ``name`` (None: none) as one element loop over ``out``, in place: for the
    forms that do not run a loop kernel."""
    if name is not None:
        from numlite.jit.kernels.common import each

        each(g, out, lambda i: EXPRESSIONS[name](f"{out.name}[{i}]"))
