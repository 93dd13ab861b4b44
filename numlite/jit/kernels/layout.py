"""CONCATENATION (block copies) and TRANSPOSE (an index map)."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import index_map, take


@njit(cache=False)
def place(a, o, outer, inner, row, offset):
    """Input ``a`` as ``outer`` blocks of ``inner`` elements, at ``offset`` in each of the
    output's rows of ``row`` elements."""
    for r in range(outer):
        for k in range(inner):
            o[r * row + offset + k] = a[r * inner + k]


@emits("CONCATENATION")
def emit_concatenation(node, g) -> None:
    out = node.outs[0]
    if getattr(node.options, "fused_activation_function", 0):
        raise NotCompiled("CONCATENATION with a fused activation is not compiled")
    if any(t.dtype != out.dtype for t in node.ins):
        raise NotCompiled("CONCATENATION of mixed dtypes is not compiled")
    rank = len(out.shape)
    axis = node.options.axis if node.options is not None else 0
    axis = axis + rank if axis < 0 else axis
    outer = int(np.prod(out.shape[:axis], dtype=np.int64))
    row = int(np.prod(out.shape[axis:], dtype=np.int64))
    offset = 0
    for t in node.ins:
        inner = t.size // outer if outer else 0
        g.line(f"{g.kernel(place)}({t.name}, {out.name}, {outer}, {inner}, {row}, {offset})")
        offset += inner


@emits("TRANSPOSE")
def emit_transpose(node, g) -> None:
    g.line(f"{g.kernel(take)}({node.ins[0].name}, {g.const(index_map(node))}, {node.outs[0].name})")
