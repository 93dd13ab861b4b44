"""FAKE_QUANT (float32): each value clamped to the nudged range, rounded to its level (halves
away from zero) and mapped back, in the float32 steps of numlite.kernels.quantization
(LiteRT's FakeQuantizeArray)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, kernel, require

F = np.float32


@kernel
def fake_quant(v, low, high, inverse, scale):
    """One value: NaN stays NaN (no comparison holds), as ``np.clip`` keeps it."""
    if v < low:
        v = low
    elif v > high:
        v = high
    t = (v - low) * inverse  # float32 operands: float32 steps
    level = np.float32(np.floor(np.abs(t) + np.float32(0.5)))
    if t < 0:
        level = -level
    return level * scale + low


@emits("FAKE_QUANT")
def emit_fake_quant(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == out.dtype == np.dtype(F), "FAKE_QUANT is compiled on float32 only")
    k = node.kernel
    low, high, inverse, scale = (f"np.float32({float(v)!r})" for v in (k.low, k.high, k.inverse, k.scale))
    each(g, out, lambda i: f"{g.kernel(fake_quant)}({x.name}[{i}], {low}, {high}, {inverse}, {scale})")
