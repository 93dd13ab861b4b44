"""TOPK_V2 (a constant k: the k largest of each last-axis row, largest first, equal values in
order of their index, as numlite.kernels.selection and LiteRT order them) and BUCKETIZE (the
count of the sorted boundaries at or below each value, LiteRT's ``std::upper_bound``)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import kernel, require


@kernel
def _above(a, b):
    """Whether ``a`` sorts before ``b`` in a descending top-k: larger, or NaN against a number
    (NumPy's sort, the NumPy kernel's, puts NaN above every number)."""
    return a > b or (a != a and b == b)


@kernel
def top_k(x, values, indices, rows, n, k):
    """For each row of ``n`` values, the ``k`` largest into ``values`` and their positions into
    ``indices``: an insertion into the kept list, a later equal value placed after the earlier
    ones (it moves up only past smaller values), so ties keep the lower index first."""
    for r in range(rows):
        row = x[r * n : (r + 1) * n]
        kept_values = values[r * k : (r + 1) * k]
        kept_indices = indices[r * k : (r + 1) * k]
        kept = 0
        for j in range(n):
            v = row[j]
            if kept == k and not _above(v, kept_values[k - 1]):
                continue
            p = kept if kept < k else k - 1  # a full list drops its last entry
            while p > 0 and _above(v, kept_values[p - 1]):
                kept_values[p] = kept_values[p - 1]
                kept_indices[p] = kept_indices[p - 1]
                p -= 1
            kept_values[p] = v
            kept_indices[p] = j
            if kept < k:
                kept += 1


@emits("TOPK_V2")
def emit_top_k(node, g) -> None:
    """The NumPy kernel's prepare checked k against the row (k from data has a run-time shape
    and never reaches here); quantized inputs reach here only when the output keeps their
    scale (the values move unchanged, see codegen.MOVES_ELEMENTS)."""
    x, _ = node.ins
    values, indices = node.outs
    require(values.dtype == x.dtype, "TOPK_V2 between dtypes is not compiled")
    k = node.kernel.k
    if k == 0 or x.size == 0:
        return
    n = x.shape[-1]
    g.line(f"{g.kernel(top_k)}({x.name}, {values.name}, {indices.name}, {x.size // n}, {n}, {k})")


@kernel
def bucketize(x, boundaries, o):
    """``o[i]`` = the first boundary index whose boundary is above ``x[i]`` (compared in
    double: NumPy's promotion of float32 boundaries with any of the input dtypes but float32,
    where double compares the same); a NaN is above none, so it falls in the last bucket."""
    n = boundaries.size
    for i in range(x.size):
        v = np.float64(x[i])
        low, high = 0, n
        while low < high:
            mid = (low + high) // 2
            if v < boundaries[mid]:
                high = mid
            else:
                low = mid + 1
        o[i] = low


@emits("BUCKETIZE")
def emit_bucketize(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    if out.size == 0:
        return
    boundaries = np.asarray(node.kernel.boundaries, np.float32).astype(np.float64)
    if boundaries.size == 0:
        g.line(f"for i in range({out.size}):")
        g.line(f"    {out.name}[i] = 0")
        return
    g.line(f"{g.kernel(bucketize)}({x.name}, {g.const(boundaries)}, {out.name})")
