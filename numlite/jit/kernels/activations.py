"""RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, TANH, LOGISTIC, ELU, LEAKY_RELU, HARD_SWISH, GELU
(both forms) and PRELU on float32 (element-wise expressions; TANH and LOGISTIC through the vectorizable
approximations of :mod:`numlite.jit.kernels.transcendental`), and SOFTMAX over the last axis
(a loop kernel)."""

from __future__ import annotations

import math

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, each, index, kernel, max_nan, require, same_dtypes
from numlite.jit.kernels.conv import call
from numlite.jit.kernels.unary import emit_unary
from numlite.kernels.activations import _ERFC_COEFFS

F32 = (np.dtype(np.float32),)

EXPRESSIONS = {
    "RELU": (lambda x: f"relu({x})", F32),
    "RELU6": (lambda x: f"clip({x}, 0.0, 6.0)", F32),
    "RELU_N1_TO_1": (lambda x: f"clip({x}, -1.0, 1.0)", F32),
    "TANH": (lambda x: f"tanh32({x})", F32),
    "LOGISTIC": (lambda x: f"sigmoid32({x})", F32),
}


@emits(*EXPRESSIONS)
def emit(node, g) -> None:
    emit_unary(node, g, EXPRESSIONS)


# -- SOFTMAX (a loop kernel, see conv.py) ---------------------------------------------------------


SOFTMAX = 3  # the loop kernel kind (numlite.jit.kernels.loops)


@body
def softmax_setup(x, o, src, f, p):
    """The number of units (rows)."""
    return p[0]


@body
def softmax_units(x, o, src, f, p, u0, u1):
    """Rows ``[u0, u1)`` of ``depth`` values: shifted by their own maximum (large logits do
    not overflow, as in LiteRT), each ``exp((x - max) * beta)`` in float32 as LiteRT computes
    it, summed in double (``total`` starts as a float64), then divided by the sum (within an
    ulp or two of LiteRT's float32 arithmetic). No ``float()`` here: Numba types ``float(v)``
    of a float32 ``v`` as float32, so it would only look like a widening."""
    depth = p[1]
    beta = f[0]
    for r in range(u0, u1):
        q0 = r * depth
        peak = x[q0]
        for q in range(q0 + 1, q0 + depth):
            peak = max_nan(peak, x[q])
        total = 0.0
        for q in range(q0, q0 + depth):
            e = math.exp((x[q] - peak) * beta)
            o[q] = e
            total += e
        for q in range(q0, q0 + depth):
            o[q] = o[q] / total


@emits("SOFTMAX")
def emit_softmax(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == F32[0] == out.dtype and len(x.shape) >= 1, f"SOFTMAX of {x.dtype.name} {x.shape} is not compiled")
    if x.size == 0:
        return
    depth = x.shape[-1]
    beta = np.float32(node.options.beta) if node.options is not None else np.float32(1.0)
    call(g, SOFTMAX, x, out, x, [x.size // depth, depth], np.array([beta], np.float32), 4 * x.size)


# -- RELU_0_TO_1, ELU, LEAKY_RELU, HARD_SWISH, GELU, PRELU (element-wise, as numlite's kernels) ---

F = np.float32
GELU_CUBIC, SQRT_2_OVER_PI = F(0.044715), F(math.sqrt(2.0 / math.pi))
# -1/sqrt(2) rounded to float32: NumPy 2 multiplies the float32 input by the Python float in
# float32 (numlite.kernels.activations.Gelu._exact), so z is a float32 product, then widened.
MINUS_SQRT_HALF = F(-math.sqrt(0.5))
C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 = _ERFC_COEFFS


@kernel
def gelu_tanh(x):
    """The approximate GELU in float32 steps, in the NumPy kernel's order:
    ``0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) * x``."""
    t = np.tanh((x * x * x * GELU_CUBIC + x) * SQRT_2_OVER_PI)
    return (t + F(1.0)) * F(0.5) * x


@kernel
def gelu_erf(x):
    """The exact GELU, ``0.5 * x * erfc(-x / sqrt(2))``, in the steps and dtypes of the NumPy
    kernel (``Gelu._exact`` and ``_erfc_block``): ``z`` is the float32 product ``x * -1/sqrt(2)``
    widened to double; ``|z|`` and every step after it up to ``erfc`` is double, one rounding
    per step in the same order (Horner from the last coefficient; Numba sets no fast-math
    flags, so LLVM fuses no multiply-add); erfc rounded once to float32, then
    ``(x * 0.5) * erfc`` in float32. Bit for bit the NumPy kernel's results on the test's
    inputs (docs/jit.md, "The exact GELU and more ops").

    The widening must be ``np.float64(...)``: Numba types ``float(v)`` of a float32 ``v`` as
    float32, so with ``float()`` ``|z|`` stayed float32 and ``|z| * |z|`` was rounded to
    float32, up to 2.4e-6 off in the exponent of ``exp(P(t) - z * z)``: the 1.9e-6 (relative)
    of the negative tail that kept this form on NumPy."""
    z = np.float64(x * MINUS_SQRT_HALF)
    a = abs(z)
    t = 1.0 / (a * 0.5 + 1.0)
    p = t * C9 + C8
    p = p * t + C7
    p = p * t + C6
    p = p * t + C5
    p = p * t + C4
    p = p * t + C3
    p = p * t + C2
    p = p * t + C1
    p = p * t + C0
    p = math.exp(p - a * a) * t
    s = 1.0 if z < 0.0 else 0.0  # erfc(z) = 2 - erfc(-z) for negative z, in the NumPy kernel's form
    p = p * (s * -2.0 + 1.0) + (s + s)
    return x * F(0.5) * F(p)  # -inf * erfc(inf) = -inf * 0: NaN, as in LiteRT


ONE_INPUT = {
    "RELU_0_TO_1": (lambda x: f"clip({x}, 0.0, 1.0)", F32),
    "ELU": (lambda x: f"{x} if not {x} < 0 else math.expm1({x})", F32),  # NaN and -0.0 pass through
    "HARD_SWISH": (lambda x: f"clip({x} + np.float32(3.0), np.float32(0.0), np.float32(6.0)) * np.float32({1 / 6!r}) * {x}", F32),
}


@emits(*ONE_INPUT)
def emit_one_input(node, g) -> None:
    emit_unary(node, g, ONE_INPUT)


@emits("LEAKY_RELU")
def emit_leaky_relu(node, g) -> None:
    """``x > 0 ? x : alpha * x`` (the product in float32)."""
    alpha = F(getattr(node.options, "alpha", 0.0) if node.options is not None else 0.0)
    emit_unary(node, g, {"LEAKY_RELU": (lambda x: f"{x} if {x} > 0 else np.float32({float(alpha)!r}) * {x}", F32)})


@emits("GELU")
def emit_gelu(node, g) -> None:
    approximate = bool(getattr(node.options, "approximate", False)) if node.options is not None else False
    fn = g.kernel(gelu_tanh if approximate else gelu_erf)
    emit_unary(node, g, {"GELU": (lambda x: f"{fn}({x})", F32)})


@emits("PRELU")
def emit_prelu(node, g) -> None:
    """``x >= 0 ? x : x * alpha``, alpha broadcast against x."""
    (x, alpha), (out,) = node.ins, node.outs
    same_dtypes([x, alpha, out], F32, node.op_name)
    require(tuple(x.shape) == tuple(out.shape), f"PRELU of {x.shape} into {out.shape} is not compiled")
    each(g, out, lambda i: f"{x.name}[{i}] if {x.name}[{i}] >= 0 else {x.name}[{i}] * {index(alpha, out, i, g)}")
