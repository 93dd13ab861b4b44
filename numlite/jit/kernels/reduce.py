"""SUM (float32, int32, int64) and MEAN (float32) over constant axes: each input element is
added to its output element through an index map, in double (integers in int64, wrapping on
the store as LiteRT does), in working memory of the arenas."""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, kernel, require

F32 = np.dtype(np.float32)


@kernel
def sum_into(a, m, acc):
    """``acc`` (float64 or int64 working memory of the output's size) sums the input elements
    of each output element."""
    for j in range(acc.size):
        acc[j] = 0
    for i in range(a.size):
        acc[m[i]] += a[i]


@emits("SUM", "MEAN")
def emit(node, g) -> None:
    x, axes = node.ins
    out = node.outs[0]
    require(axes.value is not None, f"{node.op_name} over axes computed at run time is not compiled")
    floats = x.dtype == F32 == out.dtype
    require(floats or (node.op_name == "SUM" and x.dtype == out.dtype and x.dtype.kind == "i"),
            f"{node.op_name} of {x.dtype.name} is not compiled")
    count = x.size // out.size if node.op_name == "MEAN" and out.size else 1  # 0 for an empty input: 0 / 0 is NaN
    acc = sums(node, g, np.float64 if floats else np.int64)
    each(g, out, lambda i: f"{acc.name}[{i}] / {float(count)!r}" if count != 1 else f"{acc.name}[{i}]")


def sums(node, g, dtype) -> Any:
    """Working memory of the output's size (``dtype``) holding the sums of the input over the
    node's constant axes (its second input)."""
    x, axes = node.ins
    out = node.outs[0]
    rank = len(x.shape)
    reduced = {int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes.value).reshape(-1)}
    kept = tuple(1 if d in reduced else n for d, n in enumerate(x.shape))
    require(int(np.prod(kept, dtype=np.int64)) == out.size, f"{node.op_name} of {x.shape} into {out.shape} is not compiled")
    iota = np.arange(out.size, dtype=np.int64).reshape(kept)
    m = g.const(np.ascontiguousarray(np.broadcast_to(iota, x.shape)).reshape(-1))
    acc = g.temp(out.shape, dtype)
    g.line(f"{g.kernel(sum_into)}({x.name}, {m}, {acc.name})")
    return acc
