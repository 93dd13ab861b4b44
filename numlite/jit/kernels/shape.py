"""RESHAPE, SQUEEZE, EXPAND_DIMS: the same elements in another shape, i.e. a flat copy."""

from __future__ import annotations

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import copy, require


@emits("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def emit(node, g) -> None:
    x, out = node.ins[0], node.outs[0]
    require(x.size == out.size and x.dtype == out.dtype, f"{node.op_name} from {x.shape} to {out.shape} is not compiled")
    copy(g, out, x)
