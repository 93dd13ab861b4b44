"""CAST between float32, float64, int8/16/32/64, uint8 and bool, with LiteRT's rules (as
numlite.kernels.cast): float -> integer saturates (NaN gives the maximum), -> bool is ``x != 0``,
integers wrap."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits
from numlite.kernels.cast import _saturation_bounds

SUPPORTED = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_))


@njit(cache=False)
def plain(a, o):
    for i in range(o.size):
        o[i] = a[i]


@njit(cache=False)
def to_bool(a, o):
    for i in range(o.size):
        o[i] = a[i] != 0


@njit(cache=False)
def from_bool(a, o):
    for i in range(o.size):
        o[i] = 1 if a[i] else 0


@njit(cache=False)
def saturating(a, o, low, high, smallest, largest):
    for i in range(o.size):
        x = a[i]
        if x != x or x > high:
            o[i] = largest
        elif x < low:
            o[i] = smallest
        else:
            o[i] = int(x)  # truncation toward zero


@emits("CAST")
def emit(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    if x.dtype not in SUPPORTED or out.dtype not in SUPPORTED:
        raise NotCompiled(f"CAST from {x.dtype.name} to {out.dtype.name} is not compiled")
    if out.dtype.kind == "b":
        g.line(f"{g.kernel(to_bool)}({x.name}, {out.name})")
    elif x.dtype.kind == "b":
        g.line(f"{g.kernel(from_bool)}({x.name}, {out.name})")
    elif x.dtype.kind == "f" and out.dtype.kind in "iu":
        low, high = _saturation_bounds(x.dtype, out.dtype)
        info = np.iinfo(out.dtype)
        g.line(f"{g.kernel(saturating)}({x.name}, {out.name}, {float(low)!r}, {float(high)!r}, {info.min}, {info.max})")
    else:
        g.line(f"{g.kernel(plain)}({x.name}, {out.name})")
