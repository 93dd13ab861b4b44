"""RELU, RELU6, RELU_N1_TO_1, TANH, LOGISTIC on float32."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import unary_kernel
from numlite.jit.kernels.unary import emit_unary

F32 = (np.dtype(np.float32),)


@njit(cache=False)
def _logistic(x):
    # in double, rounded once into the float32 output: within half an ulp of the exact value
    return 1.0 / (1.0 + math.exp(-float(x)))


KERNELS = {
    "RELU": (unary_kernel(njit(lambda x: x if x > 0 or x != x else np.float32(0.0))), F32),
    "RELU6": (unary_kernel(njit(lambda x: np.float32(0.0) if x < 0 else (np.float32(6.0) if x > 6 else x))), F32),
    "RELU_N1_TO_1": (unary_kernel(njit(lambda x: np.float32(-1.0) if x < -1 else (np.float32(1.0) if x > 1 else x))), F32),
    "TANH": (unary_kernel(njit(lambda x: np.tanh(x))), F32),
    "LOGISTIC": (unary_kernel(_logistic), F32),
}


@emits(*KERNELS)
def emit(node, g) -> None:
    emit_unary(node, g, KERNELS)
