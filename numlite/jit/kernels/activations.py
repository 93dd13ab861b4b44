"""RELU, RELU6, RELU_N1_TO_1, TANH, LOGISTIC on float32 (element-wise expressions), and SOFTMAX
over the last axis (a loop kernel)."""

from __future__ import annotations

import math

import numpy as np
from numba import carray, prange

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import at, max_nan, require
from numlite.jit.kernels.conv import call, loop_kernel
from numlite.jit.kernels.unary import emit_unary

F32 = (np.dtype(np.float32),)

EXPRESSIONS = {
    "RELU": (lambda x: f"relu({x})", F32),
    "RELU6": (lambda x: f"clip({x}, 0.0, 6.0)", F32),
    "RELU_N1_TO_1": (lambda x: f"clip({x}, -1.0, 1.0)", F32),
    "TANH": (lambda x: f"np.tanh({x})", F32),
    # in double, rounded once into the float32 output: within half an ulp of the exact value
    "LOGISTIC": (lambda x: f"1.0 / (1.0 + math.exp(-float({x})))", F32),
}


@emits(*EXPRESSIONS)
def emit(node, g) -> None:
    emit_unary(node, g, EXPRESSIONS)


# -- SOFTMAX (a loop kernel, see conv.py) ---------------------------------------------------------


def _softmax(x, o, unused, ctl, kp, kf):
    """Each row of ``depth`` values: shifted by its own maximum (large logits do not overflow,
    as in LiteRT), ``exp((x - max) * beta)`` and its sum in double, each exponential stored as
    float32, then divided by the sum (within an ulp or two of LiteRT's float32 arithmetic)."""
    p = carray(at(ctl[kp], np.int64), 2)
    rows, depth = p[0], p[1]
    beta = float(carray(at(ctl[kf], np.float32), 1)[0])
    for r in prange(rows):
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


SOFTMAX = loop_kernel(_softmax)


@emits("SOFTMAX")
def emit_softmax(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == F32[0] == out.dtype and len(x.shape) >= 1, f"SOFTMAX of {x.dtype.name} {x.shape} is not compiled")
    if x.size == 0:
        return
    depth = x.shape[-1]
    beta = np.float32(node.options.beta) if node.options is not None else np.float32(1.0)
    call(g, SOFTMAX, x, out, x, [x.size // depth, depth], np.array([beta], np.float32))
