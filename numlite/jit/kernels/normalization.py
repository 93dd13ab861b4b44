"""LOG_SOFTMAX and L2_NORMALIZATION over the last axis on float32, row by row, as
:mod:`numlite.kernels.normalization` computes them (the row's maximum subtracted first; the
L2 norm clamped below at LiteRT's 1e-6). The rows' sums are taken in double, then rounded once
(within an ulp of NumPy's float32 pairwise sums)."""

from __future__ import annotations

import math

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import kernel, max_nan, require

F32 = np.dtype(np.float32)
L2_EPSILON = np.float32(1e-6)  # as numlite.kernels.normalization (LiteRT hard-codes it)


@kernel
def row_peak(x, q0, depth):
    """The maximum of ``x[q0 : q0 + depth]`` (NaN when one is NaN, as ndarray.max)."""
    peak = x[q0]
    for q in range(q0 + 1, q0 + depth):
        peak = max_nan(peak, x[q])
    return peak


@kernel
def log_softmax(x, o, rows, depth):
    for r in range(rows):
        q0 = r * depth
        peak = row_peak(x, q0, depth)
        total = 0.0
        for q in range(q0, q0 + depth):
            s = x[q] - peak  # rounded to float32, as the NumPy kernel's shifted values
            o[q] = s
            total += math.exp(float(s))
        log_sum = np.float32(math.log(total))
        for q in range(q0, q0 + depth):
            o[q] = o[q] - log_sum


@kernel
def l2_normalize(x, o, rows, depth):
    for r in range(rows):
        q0 = r * depth
        total = 0.0
        for q in range(q0, q0 + depth):
            total += float(x[q]) * float(x[q])
        norm = max_nan(np.float32(math.sqrt(total)), L2_EPSILON)
        for q in range(q0, q0 + depth):
            o[q] = x[q] / norm


@emits("LOG_SOFTMAX", "L2_NORMALIZATION")
def emit(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == F32 == out.dtype and len(x.shape) >= 1, f"{node.op_name} of {x.dtype.name} {x.shape} is not compiled")
    if x.size == 0:
        return
    depth = x.shape[-1]
    fn = log_softmax if node.op_name == "LOG_SOFTMAX" else l2_normalize
    g.line(f"{g.kernel(fn)}({x.name}, {out.name}, {x.size // depth}, {depth})")
