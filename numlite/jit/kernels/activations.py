"""RELU, RELU6, RELU_N1_TO_1, TANH, LOGISTIC on float32."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
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
