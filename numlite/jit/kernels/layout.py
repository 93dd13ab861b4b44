"""CONCATENATION (block copies) and TRANSPOSE (an index map)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import require, same_dtypes, take


@emits("CONCATENATION")
def emit_concatenation(node, g) -> None:
    out = node.outs[0]
    require(not getattr(node.options, "fused_activation_function", 0), "CONCATENATION with a fused activation is not compiled")
    same_dtypes([*node.ins, out], (out.dtype,), "CONCATENATION")
    rank = len(out.shape)
    axis = node.options.axis if node.options is not None else 0
    axis = axis + rank if axis < 0 else axis
    outer = int(np.prod(out.shape[:axis], dtype=np.int64))
    row = int(np.prod(out.shape[axis:], dtype=np.int64))
    offset = 0
    for t in node.ins:  # each input: outer blocks of `inner` elements, at `offset` in each output row
        inner = t.size // outer if outer else 0
        if inner:
            g.line(f"for r in range({outer}):")
            g.line(f"    for c in range({inner}):")
            g.line(f"        {out.name}[r * {row} + {offset} + c] = {t.name}[r * {inner} + c]")
        offset += inner


@emits("TRANSPOSE")
def emit_transpose(node, g) -> None:
    take(g, node)
