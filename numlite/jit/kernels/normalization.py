"""LOG_SOFTMAX and L2_NORMALIZATION over the last axis on float32, row by row, and
LOCAL_RESPONSE_NORMALIZATION over the channels of NHWC float32, as
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
            total += math.exp(s)  # a float32 exponential, summed in double (total is a float64)
        log_sum = np.float32(math.log(total))
        for q in range(q0, q0 + depth):
            o[q] = o[q] - log_sum


@kernel
def l2_normalize(x, o, rows, depth):
    for r in range(rows):
        q0 = r * depth
        total = 0.0
        for q in range(q0, q0 + depth):
            total += x[q] * x[q]  # a float32 square (as LiteRT's), summed in double
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


@kernel
def local_response(x, o, pixels, depth, radius, bias, alpha, beta, form):
    """LOCAL_RESPONSE_NORMALIZATION, element by element in the NumPy kernel's float32 steps:
    ``alpha * x²`` of each channel, plus those of the channels ``c - d`` then ``c + d`` for
    ``d = 1 .. radius`` (its shifted adds, in that order), plus ``bias``, raised to ``-beta``
    (``form`` 1: a reciprocal, 2: a reciprocal of the square root, 0: a power, as LiteRT's
    special cases), times ``x``."""
    for p in range(pixels):
        q0 = p * depth
        for c in range(depth):
            v = x[q0 + c]
            acc = v * v * alpha
            for d in range(1, radius + 1):
                if c - d >= 0:
                    u = x[q0 + c - d]
                    acc += u * u * alpha
                if c + d < depth:
                    u = x[q0 + c + d]
                    acc += u * u * alpha
            acc += bias
            if form == 1:
                acc = np.float32(1.0) / acc
            elif form == 2:
                acc = np.float32(1.0) / np.sqrt(acc)
            else:
                acc = acc ** -beta
            o[q0 + c] = acc * v


@emits("LOCAL_RESPONSE_NORMALIZATION")
def emit_local_response(node, g) -> None:
    """Over the channels of a 4-D float32 input, with the NumPy kernel's radius (clipped to the
    depth), bias, alpha and beta (as float32)."""
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == F32 == out.dtype and len(x.shape) == 4, f"{node.op_name} of {x.dtype.name} {x.shape} is not compiled")
    if x.size == 0:
        return
    k = node.kernel
    depth = x.shape[3]
    form = 1 if k.beta == 1 else 2 if k.beta == 0.5 else 0
    bias, alpha, beta = (f"np.float32({float(v)!r})" for v in (k.bias, k.alpha, k.beta))
    g.line(f"{g.kernel(local_response)}({x.name}, {out.name}, {x.size // depth}, {depth}, {k.radius}, {bias}, {alpha}, {beta}, {form})")
