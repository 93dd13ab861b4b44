"""RESHAPE, SQUEEZE, EXPAND_DIMS: the same elements in another shape, i.e. a flat copy."""

from __future__ import annotations

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import copy


@emits("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def emit(node, g) -> None:
    x, out = node.ins[0], node.outs[0]
    if x.size != out.size or x.dtype != out.dtype:
        raise NotCompiled(f"{node.op_name} from {x.shape} to {out.shape} is not compiled")
    g.line(f"{g.kernel(copy)}({out.name}, {x.name})")
