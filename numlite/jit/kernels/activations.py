"""RELU, RELU6, RELU_N1_TO_1, TANH, LOGISTIC on float32 (TANH and LOGISTIC through the
vectorizable approximations of :mod:`numlite.jit.kernels.transcendental`)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
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
