"""SUM (float32, int32, int64) and MEAN (float32) over constant axes: each input element is
added to its output element through an index map, in double (integers in int64, wrapping on
the store as LiteRT does)."""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import NotCompiled, emits

F32 = np.dtype(np.float32)


@njit(cache=False)
def sum_float(a, m, o, count):
    acc = np.zeros(o.size)
    for i in range(a.size):
        acc[m[i]] += a[i]
    for j in range(o.size):
        o[j] = acc[j] / count


@njit(cache=False)
def sum_int(a, m, o):
    acc = np.zeros(o.size, np.int64)
    for i in range(a.size):
        acc[m[i]] += a[i]
    for j in range(o.size):
        o[j] = acc[j]


@emits("SUM", "MEAN")
def emit(node, g) -> None:
    x, axes = node.ins
    out = node.outs[0]
    if axes.value is None:
        raise NotCompiled(f"{node.op_name} over axes computed at run time is not compiled")
    floats = x.dtype == F32 == out.dtype
    if not (floats or (node.op_name == "SUM" and x.dtype == out.dtype and x.dtype.kind == "i")):
        raise NotCompiled(f"{node.op_name} of {x.dtype.name} is not compiled")
    rank = len(x.shape)
    reduced = {int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes.value).reshape(-1)}
    kept = tuple(1 if d in reduced else n for d, n in enumerate(x.shape))
    if int(np.prod(kept, dtype=np.int64)) != out.size:
        raise NotCompiled(f"{node.op_name} of {x.shape} into {out.shape} is not compiled")
    iota = np.arange(out.size, dtype=np.int64).reshape(kept)
    m = g.const(np.ascontiguousarray(np.broadcast_to(iota, x.shape)).reshape(-1))
    if floats:
        count = max(x.size // out.size, 1) if node.op_name == "MEAN" and out.size else 1
        g.line(f"{g.kernel(sum_float)}({x.name}, {m}, {out.name}, {float(count)!r})")
    else:
        g.line(f"{g.kernel(sum_int)}({x.name}, {m}, {out.name})")
