"""SLICE and STRIDED_SLICE with constant bounds (index maps), GATHER (constant positions: an
index map; positions from data: checked in compiled code as numlite.kernels.indexing checks
them, raising the same error naming the node)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import GATHER_INDEX, kernel, require, take


@emits("SLICE", "STRIDED_SLICE")
def emit_slice(node, g) -> None:
    take(g, node)


@kernel
def gather(x, pos, o, outer, n, inner, ctl):
    """``o[r, j, k] = x[r, pos[j], k]`` over ``outer`` x positions x ``inner``; returns 1 with
    the bad position in ``ctl`` when one is outside [0, n)."""
    m = pos.size
    for j in range(m):
        p = pos[j]
        if p < 0 or p >= n:
            ctl[1] = GATHER_INDEX
            ctl[4] = p
            ctl[5] = n
            return 1
    for r in range(outer):
        for j in range(m):
            src = (r * n + pos[j]) * inner
            dst = (r * m + j) * inner
            for c in range(inner):
                o[dst + c] = x[src + c]
    return 0


@emits("GATHER")
def emit_gather(node, g) -> None:
    x, pos = node.ins
    out = node.outs[0]
    if pos.value is not None:  # constant positions (checked when the map is made)
        take(g, node)
        return
    axis = node.options.axis if node.options is not None else 0
    axis = axis + len(x.shape) if axis < 0 else axis
    require(not (node.options is not None and node.options.batch_dims) and pos.dtype.kind == "i",
            "GATHER with batch_dims or non-integer positions is not compiled")
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    g.check(f"{g.kernel(gather)}({x.name}, {pos.name}, {out.name}, {outer}, {x.shape[axis]}, {inner}, ctl)")
