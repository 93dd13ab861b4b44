"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM with broadcasting and fused activations.

Integer arithmetic wraps as in LiteRT (Numba computes int32 in 64 bits and the store into the
int32 buffer keeps the low bits); DIV is compiled for float32 only (integer DIV, with its
rounding rules, stays on NumPy in this milestone)."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import binary_kernels, clamp, emit_broadcast

FLOAT = (np.dtype(np.float32),)
NUMBERS = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))

add = binary_kernels(njit(lambda x, y: x + y))
sub = binary_kernels(njit(lambda x, y: x - y))
mul = binary_kernels(njit(lambda x, y: x * y))
div = binary_kernels(njit(lambda x, y: x / y))
maximum = binary_kernels(njit(lambda x, y: x if x > y or x != x else y))  # NaN propagates, as np.maximum
minimum = binary_kernels(njit(lambda x, y: x if x < y or x != x else y))

KERNELS = {"ADD": (add, NUMBERS), "SUB": (sub, NUMBERS), "MUL": (mul, NUMBERS), "DIV": (div, FLOAT),
           "MAXIMUM": (maximum, NUMBERS), "MINIMUM": (minimum, NUMBERS)}
# fused_activation_function code -> the clamp range (RELU, RELU_N1_TO_1, RELU6); TANH and
# SIGN_BIT have none in LiteRT (CalculateActivationRange), as numlite's NumPy kernels.
RANGES = {1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


@emits(*KERNELS)
def emit_binary(node, g) -> None:
    kernels, dtypes = KERNELS[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    if not (a.dtype == b.dtype == out.dtype and out.dtype in dtypes):
        raise NotCompiled(f"{node.op_name} of {a.dtype.name} and {b.dtype.name} is not compiled")
    emit_broadcast(g, kernels, a, b, out)
    code = getattr(node.options, "fused_activation_function", 0) if node.options is not None else 0
    if code in RANGES:
        if out.dtype.kind != "f":
            raise NotCompiled(f"a fused activation on {out.dtype.name} is not compiled")
        low, high = RANGES[code]
        g.line(f"{g.kernel(clamp)}({out.name}, {low!r}, {'np.inf' if high == np.inf else repr(high)})")
