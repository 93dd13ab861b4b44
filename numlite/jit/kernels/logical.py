"""Comparisons (LESS ... NOT_EQUAL), LOGICAL_AND / OR / NOT and SELECT / SELECT_V2."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import binary_kernels, broadcast_map, emit_broadcast, unary_kernel

ORDERED = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))
BOOL = np.dtype(np.bool_)

COMPARISONS = {
    "LESS": (binary_kernels(njit(lambda x, y: x < y)), ORDERED),
    "LESS_EQUAL": (binary_kernels(njit(lambda x, y: x <= y)), ORDERED),
    "GREATER": (binary_kernels(njit(lambda x, y: x > y)), ORDERED),
    "GREATER_EQUAL": (binary_kernels(njit(lambda x, y: x >= y)), ORDERED),
    "EQUAL": (binary_kernels(njit(lambda x, y: x == y)), (*ORDERED, BOOL)),
    "NOT_EQUAL": (binary_kernels(njit(lambda x, y: x != y)), (*ORDERED, BOOL)),
    "LOGICAL_AND": (binary_kernels(njit(lambda x, y: x and y)), (BOOL,)),
    "LOGICAL_OR": (binary_kernels(njit(lambda x, y: x or y)), (BOOL,)),
}
logical_not = unary_kernel(njit(lambda x: not x))


@emits(*COMPARISONS)
def emit_comparison(node, g) -> None:
    kernels, dtypes = COMPARISONS[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    if not (a.dtype == b.dtype and a.dtype in dtypes and out.dtype == BOOL):
        raise NotCompiled(f"{node.op_name} of {a.dtype.name} is not compiled")
    emit_broadcast(g, kernels, a, b, out)


@emits("LOGICAL_NOT")
def emit_not(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    if x.dtype != BOOL:
        raise NotCompiled(f"LOGICAL_NOT of {x.dtype.name} is not compiled")
    g.line(f"{g.kernel(logical_not)}({x.name}, {out.name})")


@njit(cache=False)
def select_same(c, x, y, o):
    for i in range(o.size):
        o[i] = x[i] if c[i] else y[i]


@njit(cache=False)
def select_mapped(c, x, y, ic, ix, iy, o):
    for i in range(o.size):
        o[i] = x[ix[i]] if c[ic[i]] else y[iy[i]]


@emits("SELECT", "SELECT_V2")
def emit_select(node, g) -> None:
    c, x, y = node.ins
    (out,) = node.outs
    if c.dtype != BOOL or x.dtype != y.dtype or x.dtype.kind not in "biuf":
        raise NotCompiled(f"{node.op_name} of {x.dtype.name} is not compiled")
    n = out.size
    if c.size == x.size == y.size == n and c.shape == x.shape == y.shape:
        g.line(f"{g.kernel(select_same)}({c.name}, {x.name}, {y.name}, {out.name})")
        return
    cond_shape = c.shape
    if node.op_name == "SELECT" and len(c.shape) == 1 and len(x.shape) > 1 and c.size > 1:
        cond_shape = c.shape + (1,) * (len(x.shape) - 1)  # one value per row of x
    maps = [g.const(broadcast_map(s, out.shape)) for s in (cond_shape, x.shape, y.shape)]
    g.line(f"{g.kernel(select_mapped)}({c.name}, {x.name}, {y.name}, {', '.join(maps)}, {out.name})")
