"""ABS, NEG, EXP, LOG, SQRT, RSQRT, SQUARE: element-wise math on float32 (ABS and NEG also on
int32 and int64, wrapping as LiteRT does). Float results are computed by the float32 libm
functions LLVM calls (within an ulp of NumPy's)."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import unary_kernel

F32 = np.dtype(np.float32)
INTS = (np.dtype(np.int32), np.dtype(np.int64))

KERNELS = {
    "ABS": (unary_kernel(njit(lambda x: abs(x))), (F32, *INTS)),
    "NEG": (unary_kernel(njit(lambda x: -x)), (F32, *INTS)),
    "EXP": (unary_kernel(njit(lambda x: np.exp(x))), (F32,)),
    "LOG": (unary_kernel(njit(lambda x: np.log(x))), (F32,)),
    "SQRT": (unary_kernel(njit(lambda x: np.sqrt(x))), (F32,)),
    "RSQRT": (unary_kernel(njit(lambda x: np.float32(1.0) / np.sqrt(x))), (F32,)),  # both steps rounded in float32
    "SQUARE": (unary_kernel(njit(lambda x: x * x)), (F32,)),
}


def emit_unary(node, g, kernels) -> None:
    """One element-wise loop from ``kernels`` (op name -> (kernel, dtypes))."""
    kernel, dtypes = kernels[node.op_name]
    (x,), (out,) = node.ins, node.outs
    if not (x.dtype == out.dtype and x.dtype in dtypes and x.size == out.size):
        raise NotCompiled(f"{node.op_name} of {x.dtype.name} is not compiled")
    g.line(f"{g.kernel(kernel)}({x.name}, {out.name})")


@emits(*KERNELS)
def emit(node, g) -> None:
    emit_unary(node, g, KERNELS)
