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
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover - other NumPy layouts
    _clip = np.clip

_RANGES = {
    1: (np.float32(0), np.float32(np.inf)),  # RELU
    2: (np.float32(-1), np.float32(1)),  # RELU_N1_TO_1
    3: (np.float32(0), np.float32(6)),  # RELU6
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
        _clip(x, low, high, out=x)

    return apply
