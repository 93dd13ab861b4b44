"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, FLOOR_MOD with broadcasting and fused activations.

Integer arithmetic wraps as in LiteRT (Numba computes int32 in 64 bits and the store into the
int32 buffer keeps the low bits); DIV is compiled for float32 only (integer DIV, with its
rounding rules, stays on NumPy in this milestone)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, index, require, same_dtypes

FLOAT = (np.dtype(np.float32),)
NUMBERS = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))

# op -> (the expression of one element from the operands' expressions, dtypes)
EXPRESSIONS = {
    "ADD": (lambda x, y: f"{x} + {y}", NUMBERS),
    "SUB": (lambda x, y: f"{x} - {y}", NUMBERS),
    "MUL": (lambda x, y: f"{x} * {y}", NUMBERS),
    "DIV": (lambda x, y: f"{x} / {y}", FLOAT),
    # NaN propagates, as np.maximum and np.minimum (numlite's NumPy kernels) do
    "MAXIMUM": (lambda x, y: f"max_nan({x}, {y})", NUMBERS),
    "MINIMUM": (lambda x, y: f"min_nan({x}, {y})", NUMBERS),
    # Python's (and Numba's) % is the floored modulo LiteRT computes; compiled only for a
    # constant divisor without zeros (a loop counter's i % 3), as division by zero would raise
    "FLOOR_MOD": (lambda x, y: f"{x} % {y}", NUMBERS),
}
# fused_activation_function code -> the clamp range (RELU, RELU_N1_TO_1, RELU6); TANH and
# SIGN_BIT have none in LiteRT (CalculateActivationRange), as in numlite's NumPy kernels.
RANGES = {1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def activation_range(node, out) -> tuple[float, float] | None:
    code = getattr(node.options, "fused_activation_function", 0) if node.options is not None else 0
    if code not in RANGES:
        return None
    require(out.dtype.kind == "f", f"a fused activation on {out.dtype.name} is not compiled")
    return RANGES[code]


@emits(*EXPRESSIONS)
def emit_binary(node, g) -> None:
    expression, dtypes = EXPRESSIONS[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    same_dtypes([a, b, out], dtypes, node.op_name)
    if node.op_name == "FLOOR_MOD":
        require(b.value is not None and bool(np.all(b.value != 0)), "FLOOR_MOD by a divisor from data is not compiled")
    each(g, out, lambda i: expression(index(a, out, i, g), index(b, out, i, g)), activation_range(node, out))
