"""CAST between float32, float64, int8/16/32/64, uint8 and bool, with LiteRT's rules (as
numlite.kernels.cast): float -> integer saturates (NaN gives the maximum) and truncates, -> bool
is ``x != 0``, integers wrap."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, require
from numlite.kernels.cast import _saturation_bounds

SUPPORTED = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_))


@emits("CAST")
def emit(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    require(x.dtype in SUPPORTED and out.dtype in SUPPORTED, f"CAST from {x.dtype.name} to {out.dtype.name} is not compiled")
    if out.dtype.kind == "b":
        each(g, out, lambda i: f"{x.name}[{i}] != 0")
    elif x.dtype.kind == "b":
        each(g, out, lambda i: f"1 if {x.name}[{i}] else 0")
    elif x.dtype.kind == "f" and out.dtype.kind in "iu":
        low, high = _saturation_bounds(x.dtype, out.dtype)
        info = np.iinfo(out.dtype)
        each(g, out, lambda i: f"saturate({x.name}[{i}], {float(low)!r}, {float(high)!r}, {info.min}, {info.max})")
    else:
        each(g, out, lambda i: f"{x.name}[{i}]")
