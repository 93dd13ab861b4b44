"""ABS, NEG, EXP, LOG, SQRT, RSQRT, SQUARE, SIN, COS, FLOOR, CEIL, ROUND: element-wise math on
float32 (ABS and NEG also on int32 and int64, wrapping as LiteRT does); SIGN on float32, float64
and int32. Float results come from the float32 libm functions
LLVM calls (within an ulp of NumPy's)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, kernel, same_dtypes

F32 = np.dtype(np.float32)
INTS = (np.dtype(np.int32), np.dtype(np.int64))

EXPRESSIONS = {
    "ABS": (lambda x: f"abs({x})", (F32, *INTS)),
    "NEG": (lambda x: f"-{x}", (F32, *INTS)),
    "EXP": (lambda x: f"np.exp({x})", (F32,)),
    "LOG": (lambda x: f"np.log({x})", (F32,)),
    "SQRT": (lambda x: f"np.sqrt({x})", (F32,)),
    "RSQRT": (lambda x: f"np.float32(1.0) / np.sqrt({x})", (F32,)),  # both steps rounded in float32
    "SQUARE": (lambda x: f"{x} * {x}", (F32,)),
    "SIN": (lambda x: f"np.sin({x})", (F32,)),
    "COS": (lambda x: f"np.cos({x})", (F32,)),
}


def emit_unary(node, g, expressions) -> None:
    """One element-wise loop of ``expressions[op] = (expression, dtypes)``."""
    expression, dtypes = expressions[node.op_name]
    (x,), (out,) = node.ins, node.outs
    same_dtypes([x, out], dtypes, node.op_name)
    each(g, out, lambda i: expression(f"{x.name}[{i}]"))


@emits(*EXPRESSIONS)
def emit(node, g) -> None:
    emit_unary(node, g, EXPRESSIONS)


# -- FLOOR, CEIL, ROUND, SIGN ---------------------------------------------------------------------


@kernel
def sign(x):
    """-1, 0 or 1 by the sign of x; NaN stays NaN and both zeros give +0, as numlite's Sign
    (LiteRT returns its literal 0 for anything neither above nor below zero)."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    return x if x != x else 0


ROUNDING = {
    "FLOOR": (lambda x: f"np.floor({x})", (F32,)),
    "CEIL": (lambda x: f"np.ceil({x})", (F32,)),
    "ROUND": (lambda x: f"np.rint({x})", (F32,)),  # half to even, as LiteRT's RoundToNearest
}


@emits(*ROUNDING)
def emit_rounding(node, g) -> None:
    """FLOOR, CEIL, ROUND on float32 (float16 tensors are not compiled)."""
    emit_unary(node, g, ROUNDING)


@emits("SIGN")
def emit_sign(node, g) -> None:
    """SIGN on float32, float64 and int32, as numlite's Sign."""
    (x,), (out,) = node.ins, node.outs
    same_dtypes([x, out], (F32, np.dtype(np.float64), np.dtype(np.int32)), node.op_name)
    s = g.kernel(sign)
    each(g, out, lambda i: f"{s}({x.name}[{i}])")
