"""RESHAPE, SQUEEZE, EXPAND_DIMS: the same elements in another shape, i.e. a flat copy (or,
for an array of run-time shape, the same array); SHAPE of an operand of run-time shape."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import copy, require
from numlite.jit.kernels.dynamic import shape_text


@emits("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def emit(node, g) -> None:
    if node.dynamic:
        require(node.op_name == "RESHAPE", f"{node.op_name} of a shape known only at run time is not compiled")
        emit_dynamic_reshape(node, g)
        return
    x, out = node.ins[0], node.outs[0]
    require(x.size == out.size and x.dtype == out.dtype, f"{node.op_name} from {x.shape} to {out.shape} is not compiled")
    copy(g, out, x)


emit.run_time_shapes = True


def _product(dims, nonzero: bool = False) -> str:
    """The product of dims (ints or expressions); ``nonzero`` counts a 0 dim as 1."""
    known = int(np.prod([d if not nonzero or d else 1 for d in dims if isinstance(d, int)], dtype=np.int64))
    parts = [f"max({d}, 1)" if nonzero else d for d in dims if isinstance(d, str)]
    return " * ".join([str(known), *parts]) if parts else str(known)


def emit_dynamic_reshape(node, g) -> None:
    """RESHAPE when a shape is known only at run time: to a constant shape (one -1 resolved at
    run time, as numlite.kernels.shape.Reshape resolves it) or to the shape of another operand
    (SHAPE's output). The element counts are checked at run time, with the kernel's message."""
    x = node.ins[0]
    shape_in = node.ins[1] if len(node.ins) == 2 else None
    if shape_in is not None and len(shape_in.shape) == 1 and shape_in.dtype == np.int32:
        if shape_in.value is not None:
            target = [int(d) for d in np.asarray(shape_in.value).reshape(-1)]
        elif shape_in.symbolic is not None:
            target = list(shape_in.symbolic)
        else:
            raise NotCompiled("RESHAPE to a shape computed from data is not compiled")
    else:
        new_shape = getattr(node.options, "new_shape", None) if node.options is not None else None
        target = [] if new_shape is None else [int(d) for d in new_shape]
        target = [] if target == [0] else target
    stretch = [k for k, d in enumerate(target) if d == -1]
    require(len(stretch) <= 1 and all(isinstance(d, str) or d >= -1 for d in target), f"RESHAPE to {target} is not compiled")
    n_in = x.count
    if stretch:  # as Reshape._resolve: zero-sized dims count as 1, but 0 elements stay 0
        known = [d for d in target if d != -1]
        n_out, nonzero_in, nonzero_out = _product(known), _product(x.shape, True), _product(known, True)
        v = g.name("s")
        g.line(f"{v} = 0 if ({n_in}) == 0 and ({n_out}) != 0 else ({nonzero_in}) // ({nonzero_out})")
        target[stretch[0]] = v
    if sorted(map(str, (d for d in target if d != 1))) != sorted(map(str, (d for d in x.shape if d != 1))):
        in_text, in_values = shape_text(x.shape)
        out_text, out_values = shape_text(target, as_list=True)
        g.fail_if(f"({_product(target)}) != ({n_in})", f"cannot reshape {{}} elements of shape {in_text} to {out_text}",
                  [n_in, *in_values, *out_values])
    g.result(node, 0, target, alias=x)


@emits("SHAPE")
def emit_shape(node, g) -> None:
    """The dims of an operand of run-time shape (a SHAPE of a static one is folded before)."""
    x = node.ins[0]
    require(node.outs[0].dtype.kind == "i", "SHAPE of this dtype is not compiled")
    out = g.result(node, 0, (len(x.shape),), symbolic=tuple(x.shape)) if node.dynamic else node.outs[0]
    for k, d in enumerate(x.shape):
        g.line(f"{out.name}[{k}] = {d}")


emit_shape.run_time_shapes = True
