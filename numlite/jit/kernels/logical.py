"""Comparisons (LESS ... NOT_EQUAL), LOGICAL_AND / OR / NOT and SELECT / SELECT_V2."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import broadcast_map, each, index, require, same_dtypes

ORDERED = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))
BOOL = np.dtype(np.bool_)

EXPRESSIONS = {
    "LESS": (lambda x, y: f"{x} < {y}", ORDERED),
    "LESS_EQUAL": (lambda x, y: f"{x} <= {y}", ORDERED),
    "GREATER": (lambda x, y: f"{x} > {y}", ORDERED),
    "GREATER_EQUAL": (lambda x, y: f"{x} >= {y}", ORDERED),
    "EQUAL": (lambda x, y: f"{x} == {y}", (*ORDERED, BOOL)),
    "NOT_EQUAL": (lambda x, y: f"{x} != {y}", (*ORDERED, BOOL)),
    "LOGICAL_AND": (lambda x, y: f"{x} and {y}", (BOOL,)),
    "LOGICAL_OR": (lambda x, y: f"{x} or {y}", (BOOL,)),
}


@emits(*EXPRESSIONS)
def emit_comparison(node, g) -> None:
    expression, dtypes = EXPRESSIONS[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    same_dtypes([a, b], dtypes, node.op_name)
    require(out.dtype == BOOL, f"{node.op_name} into {out.dtype.name} is not compiled")
    each(g, out, lambda i: expression(index(a, out, i, g), index(b, out, i, g)))


@emits("LOGICAL_NOT")
def emit_not(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    same_dtypes([x, out], (BOOL,), "LOGICAL_NOT")
    each(g, out, lambda i: f"not {x.name}[{i}]")


@emits("SELECT", "SELECT_V2")
def emit_select(node, g) -> None:
    c, x, y = node.ins
    (out,) = node.outs
    require(c.dtype == BOOL and x.dtype.kind in "biuf", f"{node.op_name} of {x.dtype.name} is not compiled")
    same_dtypes([x, y, out], (x.dtype,), node.op_name)
    if node.op_name == "SELECT" and len(c.shape) == 1 and len(x.shape) > 1 and c.size > 1:
        rows = g.const(broadcast_map(c.shape + (1,) * (len(x.shape) - 1), out.shape))  # a value per row of x
        cond = lambda i: f"{c.name}[{rows}[{i}]]"  # noqa: E731
    else:
        cond = lambda i: index(c, out, i, g)  # noqa: E731
    each(g, out, lambda i: f"{index(x, out, i, g)} if {cond(i)} else {index(y, out, i, g)}")
