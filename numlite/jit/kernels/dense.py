"""FULLY_CONNECTED on float32: one BLAS product (Numba's ``np.dot``, through SciPy's BLAS) into
the output, then the bias and the fused activation."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.binary import RANGES
from numlite.jit.kernels.common import clamp

F32 = np.dtype(np.float32)


@njit(cache=False)
def fully_connected(x, w, o, m, k, n):
    np.dot(x.reshape((m, k)), w.reshape((n, k)).T, o.reshape((m, n)))


@njit(cache=False)
def add_bias(o, b, m, n):
    for r in range(m):
        for c in range(n):
            o[r * n + c] += b[c]


@emits("FULLY_CONNECTED")
def emit(node, g) -> None:
    x, w = node.ins[0], node.ins[1]
    bias = node.ins[2] if len(node.ins) > 2 else None
    out = node.outs[0]
    if any(t is not None and t.dtype != F32 for t in (x, w, bias, out)) or len(w.shape) != 2:
        raise NotCompiled("FULLY_CONNECTED is compiled for float32 inputs, weights and bias only")
    if len(node.outs) != 1 or (node.options is not None and node.options.weights_format != 0):
        raise NotCompiled("FULLY_CONNECTED with shuffled weights is not compiled")
    n, k = w.shape
    m = x.size // k if k else 0
    if m * n != out.size:
        raise NotCompiled(f"FULLY_CONNECTED of {x.shape} by {w.shape} into {out.shape} is not compiled")
    g.line(f"{g.kernel(fully_connected)}({x.name}, {w.name}, {out.name}, {m}, {k}, {n})")
    if bias is not None:
        g.line(f"{g.kernel(add_bias)}({out.name}, {bias.name}, {m}, {n})")
    code = getattr(node.options, "fused_activation_function", 0) if node.options is not None else 0
    if code in RANGES:
        low, high = RANGES[code]
        g.line(f"{g.kernel(clamp)}({out.name}, {low!r}, {'np.inf' if high == np.inf else repr(high)})")
