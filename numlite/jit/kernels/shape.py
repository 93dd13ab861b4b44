"""RESHAPE, SQUEEZE, EXPAND_DIMS: the same elements in another shape, i.e. a flat copy; FILL."""

from __future__ import annotations

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import copy, each, require


@emits("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def emit(node, g) -> None:
    x, out = node.ins[0], node.outs[0]
    require(x.size == out.size and x.dtype == out.dtype, f"{node.op_name} from {x.shape} to {out.shape} is not compiled")
    copy(g, out, x)


@emits("FILL")
def emit_fill(node, g) -> None:
    """A static shape filled with the scalar input (read at run time: it may be data)."""
    value, out = node.ins[1], node.outs[0]
    require(value.size == 1 and value.dtype == out.dtype and out.dtype.kind in "biuf", f"FILL of {value.dtype.name} is not compiled")
    each(g, out, lambda i: f"{value.name}[0]")
