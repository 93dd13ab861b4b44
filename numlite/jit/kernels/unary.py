"""ABS, NEG, EXP, LOG, SQRT, RSQRT, SQUARE, SIN, COS: element-wise math on float32 (ABS and NEG also on
int32 and int64, wrapping as LiteRT does). Float results come from the float32 libm functions
LLVM calls (within an ulp of NumPy's)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, same_dtypes

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
