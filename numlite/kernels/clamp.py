"""Fused activations of the heavy float kernels as one in-place clip.

LiteRT applies RELU, RELU_N1_TO_1 and RELU6 as a clamp to a range (``base.fused_activation``
describes the codes). ``np.clip`` with float32 bounds is one vectorised pass; ``np.maximum``
against a scalar, which ``base`` uses for RELU, measures two to three times slower on large
float32 arrays, so the convolutions, FULLY_CONNECTED and the pools use these instead. Both
propagate NaN.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from numlite.kernels.base import fused_activation
from numlite.model.ir import Options

try:  # the clip ufunc itself: np.clip adds a few microseconds of Python around it per call
    from numpy._core.umath import clip as clip_ufunc
except ImportError:  # pragma: no cover - other NumPy layouts
    clip_ufunc = np.clip

# Bounds as 0-d float32 arrays: a scalar operand costs NumPy 2 about 0.2 us more per call,
# which counts on the small arrays of loop bodies (activations.py).
_RANGES = {
    1: (np.array(0, np.float32), np.array(np.inf, np.float32)),  # RELU
    2: (np.array(-1, np.float32), np.array(1, np.float32)),  # RELU_N1_TO_1
    3: (np.array(0, np.float32), np.array(6, np.float32)),  # RELU6
}


def clamp(options: Options | None) -> Callable[[np.ndarray], None] | None:
    """The in-place clamp of an op's fused activation (None when it has none); codes are checked
    as ``base.fused_activation`` checks them."""
    fused_activation(options)  # raises on an unknown code
    code = getattr(options, "fused_activation_function", 0) if options is not None else 0
    if code not in _RANGES:
        return None
    low, high = _RANGES[code]

    def apply(x: np.ndarray) -> None:
        clip_ufunc(x, low, high, x)

    return apply
