"""RELU, RELU6, RELU_N1_TO_1, TANH, LOGISTIC on float32 (element-wise expressions; TANH and
LOGISTIC through the vectorizable approximations of :mod:`numlite.jit.kernels.transcendental`),
and SOFTMAX over the last axis (a loop kernel)."""

from __future__ import annotations

import math

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import max_nan, require
from numlite.jit.kernels.conv import body, call
from numlite.jit.kernels.unary import emit_unary

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
    not overflow, as in LiteRT), ``exp((x - max) * beta)`` and its sum in double, each
    exponential stored as float32, then divided by the sum (within an ulp or two of LiteRT's
    float32 arithmetic)."""
    depth = p[1]
    beta = float(f[0])
    for r in range(u0, u1):
        q0 = r * depth
        peak = x[q0]
        for q in range(q0 + 1, q0 + depth):
            peak = max_nan(peak, x[q])
        total = 0.0
        for q in range(q0, q0 + depth):
            e = math.exp((float(x[q]) - float(peak)) * beta)
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
