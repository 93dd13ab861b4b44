"""SUM (float32, int32, int64) and MEAN (float32) over constant axes: each input element is
added to its output element through an index map, in double (integers in int64, wrapping on
the store as LiteRT does), in working memory of the arenas.

A float32 SUM or MEAN of at least :data:`KERNEL_MIN_SIZE` input elements over one block of
consecutive axes (``[outer, reduced, inner]``: a global average pool over ``H, W``) is a loop
kernel (:mod:`numlite.jit.kernels.loops`, kind :data:`KIND`) instead, compiled once per
machine: each output sums its inputs in double in the same order, so both forms give the same
bits."""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, kernel, require
from numlite.jit.kernels.conv import body, call

F32 = np.dtype(np.float32)
KIND = 11  # the loop kernel kind (numlite.jit.kernels.loops)
KERNEL_MIN_SIZE = 1 << 12  # input elements; smaller nodes stay inline


@kernel
def sum_into(a, m, acc):
    """``acc`` (float64 or int64 working memory of the output's size) sums the input elements
    of each output element."""
    for j in range(acc.size):
        acc[j] = 0
    for i in range(a.size):
        acc[m[i]] += a[i]


@body
def mean_setup(x, o, src, f, p):
    """The whole reduction (one thread: it reads each input once); no units. ``p``: outer,
    reduced, inner, and the divisor (0 for SUM). ``src``: working memory of ``2 * inner``
    float32, the double sums of one outer index; the input is read in order, row by row."""
    outer, reduced, inner, count = p[0], p[1], p[2], p[3]
    acc = src[: 2 * inner].view(np.float64)
    for b in range(outer):
        xs = x[b * reduced * inner : (b + 1) * reduced * inner]  # slices: indices from 0 vectorize
        for c in range(inner):
            acc[c] = 0.0
        for r in range(reduced):
            row = xs[r * inner : (r + 1) * inner]
            for c in range(inner):
                acc[c] += row[c]
        out = o[b * inner : (b + 1) * inner]
        for c in range(inner):
            out[c] = acc[c] / count if count else acc[c]


@emits("SUM", "MEAN")
def emit(node, g) -> None:
    x, axes = node.ins
    out = node.outs[0]
    require(axes.value is not None, f"{node.op_name} over axes computed at run time is not compiled")
    floats = x.dtype == F32 == out.dtype
    require(floats or (node.op_name == "SUM" and x.dtype == out.dtype and x.dtype.kind == "i"),
            f"{node.op_name} of {x.dtype.name} is not compiled")
    count = x.size // out.size if node.op_name == "MEAN" and out.size else 1  # 0 for an empty input: 0 / 0 is NaN
    block = _block(node) if floats and x.size >= KERNEL_MIN_SIZE else None
    if block is not None:
        work = g.temp((2 * block[2],), np.float32)
        call(g, KIND, x, out, work, [*block, count if node.op_name == "MEAN" else 0], np.zeros(0, np.float32))
        return
    acc = sums(node, g, np.float64 if floats else np.int64)
    each(g, out, lambda i: f"{acc.name}[{i}] / {float(count)!r}" if count != 1 else f"{acc.name}[{i}]")


def _reduced(node) -> set[int]:
    x, axes = node.ins
    rank = len(x.shape)
    return {int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes.value).reshape(-1)}


def _block(node) -> tuple[int, int, int] | None:
    """``(outer, reduced, inner)`` when the reduced axes of more than one element are
    consecutive (size-1 axes between them do not matter), else None."""
    x = node.ins[0]
    wide = sorted(d for d in _reduced(node) if 0 <= d < len(x.shape) and x.shape[d] > 1)
    if not wide or any(d not in _reduced(node) and x.shape[d] > 1 for d in range(wide[0], wide[-1] + 1)):
        return None
    size = lambda dims: int(np.prod(dims, dtype=np.int64))  # noqa: E731
    outer, inner = size(x.shape[: wide[0]]), size(x.shape[wide[-1] + 1 :])
    return (outer, x.size // (outer * inner), inner) if outer * inner == node.outs[0].size else None


def sums(node, g, dtype) -> Any:
    """Working memory of the output's size (``dtype``) holding the sums of the input over the
    node's constant axes (its second input)."""
    x, axes = node.ins
    out = node.outs[0]
    reduced = _reduced(node)
    kept = tuple(1 if d in reduced else n for d, n in enumerate(x.shape))
    require(int(np.prod(kept, dtype=np.int64)) == out.size, f"{node.op_name} of {x.shape} into {out.shape} is not compiled")
    iota = np.arange(out.size, dtype=np.int64).reshape(kept)
    m = g.const(np.ascontiguousarray(np.broadcast_to(iota, x.shape)).reshape(-1))
    acc = g.temp(out.shape, dtype)
    g.line(f"{g.kernel(sum_into)}({x.name}, {m}, {acc.name})")
    return acc
