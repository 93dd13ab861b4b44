"""CONCATENATION and PACK (block copies into the output), SPLIT, SPLIT_V and UNPACK (block
copies out of the input), and TRANSPOSE (an index map)."""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import require, same_dtypes, take


def _blocks(g: Any, whole: Any, parts: Sequence[Any], outer: int, join: bool) -> None:
    """``whole`` seen as ``outer`` rows, each the parts' rows side by side (a part of
    ``size // outer`` elements per row): copy the parts into it (``join``) or out of it."""
    row = whole.size // outer if outer else 0
    offset = 0
    for t in parts:
        inner = t.size // outer if outer else 0
        if inner:
            if outer == 1:
                w, p = f"{whole.name}[{offset} + c]", f"{t.name}[c]"
            else:
                w, p = f"{whole.name}[r * {row} + {offset} + c]", f"{t.name}[r * {inner} + c]"
                g.line(f"for r in range({outer}):")
            with g.indented() if outer != 1 else contextlib.nullcontext():
                g.line(f"for c in range({inner}):")
                g.line(f"    {w} = {p}" if join else f"    {p} = {w}")
        offset += inner


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _outer(shape: Sequence[int], axis: int) -> int:
    return int(np.prod(shape[:axis], dtype=np.int64))


@emits("CONCATENATION")
def emit_concatenation(node, g) -> None:
    out = node.outs[0]
    require(not getattr(node.options, "fused_activation_function", 0), "CONCATENATION with a fused activation is not compiled")
    same_dtypes([*node.ins, out], (out.dtype,), "CONCATENATION")
    axis = _axis(node.options.axis if node.options is not None else 0, len(out.shape))
    _blocks(g, out, node.ins, _outer(out.shape, axis), join=True)


@emits("PACK")
def emit_pack(node, g) -> None:
    out = node.outs[0]
    same_dtypes([*node.ins, out], (out.dtype,), "PACK")
    axis = _axis(node.options.axis, len(out.shape))  # the new axis, in the output's rank
    _blocks(g, out, node.ins, _outer(out.shape, axis), join=True)


@emits("SPLIT", "SPLIT_V", "UNPACK")
def emit_split(node, g) -> None:
    # Prepare resolved the axis (a constant, else the node is dynamic and never reaches here)
    # and checked the parts' sizes; the parts are consecutive blocks of each row of the input.
    x = node.ins[{"SPLIT": 1, "SPLIT_V": 0, "UNPACK": 0}[node.op_name]]
    same_dtypes([x, *node.outs], (x.dtype,), node.op_name)
    if node.op_name == "UNPACK":
        axis = _axis(node.options.axis, len(x.shape))
    else:
        a = node.ins[0 if node.op_name == "SPLIT" else 2]
        require(a.value is not None, f"{node.op_name} with an axis computed at run time is not compiled")
        axis = _axis(int(np.asarray(a.value).reshape(-1)[0]), len(x.shape))
    require(sum(o.size for o in node.outs) == x.size, f"{node.op_name} whose parts do not cover the input is not compiled")
    _blocks(g, x, node.outs, _outer(x.shape, axis), join=False)


@emits("TRANSPOSE")
def emit_transpose(node, g) -> None:
    take(g, node)
