"""SLICE and STRIDED_SLICE with constant bounds (index maps), or, when a shape is known only at
run time (bounds from data, an input of run-time shape), bounds computed and checked in
compiled code as numlite.kernels.indexing computes and checks them; GATHER (constant
positions: an index map; positions from data: checked in compiled code as
numlite.kernels.indexing checks them, raising the same error naming the node); GATHER_ND and
EMBEDDING_LOOKUP (positions from data checked the same way), ONE_HOT, DYNAMIC_UPDATE_SLICE
(starts clamped, as XLA), SCATTER_ND and SPARSE_TO_DENSE (coordinates from data checked the
same way)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import GATHER_INDEX, each, kernel, require, take


@emits("SLICE", "STRIDED_SLICE")
def emit_slice(node, g) -> None:
    if not node.dynamic:
        take(g, node)
    elif node.op_name == "SLICE":
        _copy_axes(node, g, [_slice_axis(node, g, k) for k in range(len(node.ins[0].shape))])
    else:
        _copy_axes(node, g, _strided_axes(node, g))


emit_slice.run_time_shapes = True


def _text(value) -> tuple[str, list]:
    """A value in a message template: an int as itself, an expression as ``{}``."""
    return ("{}", [value]) if isinstance(value, str) else (str(value), [])


def _element(t, k: int) -> int | str:
    """Element ``k`` of a small int vector: its value when known here, else read at run time."""
    return int(np.asarray(t.value).reshape(-1)[k]) if t.value is not None else f"int({t.name}[{k}])"


def _slice_axis(node, g, k: int) -> tuple:
    """(start, stride, count, kept) of SLICE's axis ``k``, checked as Slice._index checks it."""
    x, begin, size = node.ins
    dim, b, s = x.shape[k], _element(begin, k), _element(size, k)
    if all(isinstance(v, int) for v in (dim, b, s)):
        require(0 <= b <= dim and (s == -1 or 0 <= s <= dim - b), "SLICE out of bounds is not compiled (it fails at every run)")
        return b, 1, dim - b if s == -1 else s, True
    bv, sv = g.name("b"), g.name("n")
    g.line(f"{bv} = {b}")
    g.line(f"{sv} = {s}")
    d, dv = _text(dim)
    g.fail_if(f"{bv} < 0 or {bv} > {dim}", f"begin {{}} is out of range for axis {k} of size {d}", [bv, *dv])
    g.line(f"if {sv} == -1:")
    g.line(f"    {sv} = {dim} - {bv}")
    g.fail_if(f"{sv} < 0 or {bv} + {sv} > {dim}", f"size {{}} from begin {{}} does not fit axis {k} of size {d}", [sv, bv, *dv])
    return bv, 1, s if isinstance(s, int) and s != -1 else sv, True  # a constant size stays a number here


def _strided_axes(node, g) -> list[tuple]:
    """(start, stride, count, kept) of each axis of a STRIDED_SLICE with constant bounds on an
    input of run-time shape, clamped as _StridedPlan.axes clamps (positive strides, no
    ellipsis, new axis or offset)."""
    x, begin, end, strides = node.ins
    o = node.options
    require(begin.value is not None and end.value is not None and strides.value is not None,
            "STRIDED_SLICE with bounds from data on a shape known only at run time is not compiled")
    require(not o.ellipsis_mask and not o.new_axis_mask and not o.offset and len(begin.shape) == 1 and begin.shape[0] <= len(x.shape),
            "STRIDED_SLICE with ellipsis, new axes or offset on a shape known only at run time is not compiled")
    axes = []
    for k, n in enumerate(x.shape):
        if k >= begin.shape[0]:
            axes.append((0, 1, n, True))
            continue
        b, e, stride = _element(begin, k), _element(end, k), _element(strides, k)
        require(stride > 0, "STRIDED_SLICE with a stride below 1 on a shape known only at run time is not compiled")
        bit = lambda mask: bool(mask >> k & 1)  # noqa: E731
        first = 0 if bit(o.begin_mask) else _clamped(b, n)
        if isinstance(first, str):
            first = _local(g, "b", first)
        if bit(o.shrink_axis_mask):
            if isinstance(first, int) and isinstance(n, int):
                require(first < n, "STRIDED_SLICE out of bounds is not compiled (it fails at every run)")
            else:
                d, dv = _text(n)
                g.fail_if(f"{first} >= {n}", f"shrink index {{}} is out of range for axis {k} of size {d}", [first, *dv])
            axes.append((first, 1, 1, False))
            continue
        stop = n if bit(o.end_mask) else _clamped(e, n)
        if isinstance(first, int) and isinstance(stop, int):
            count: int | str = 0 if stop <= first else (stop - first - 1) // stride + 1
        else:
            count = _local(g, "n", f"({stop} - {first} - 1) // {stride} + 1 if {stop} > {first} else 0")
        axes.append((first, stride, count, True))
    return axes


def _clamped(v: int, n: int | str) -> int | str:
    """A constant bound ``v`` on an axis of ``n`` elements, made non-negative and clamped into
    [0, n] (a forward stride): an int when ``n`` is, else an expression."""
    if isinstance(n, int):
        return min(max(v + n if v < 0 else v, 0), n)
    return f"min(max({v} + {n}, 0), {n})" if v < 0 else f"min({v}, {n})"


def _local(g, prefix: str, expression: str) -> str:
    name = g.name(prefix)
    g.line(f"{name} = {expression}")
    return name


def _copy_axes(node, g, axes: list[tuple]) -> None:
    """The output of run-time shape (the kept axes' counts) and the nested loops copying
    ``x[start + stride * j]`` along every axis into it."""
    x = node.ins[0]
    out = g.result(node, 0, [count for _, _, count, kept in axes if kept])
    strides = [" * ".join(str(d) for d in x.shape[k + 1:]) or "1" for k in range(len(axes))]
    n = g.name("o")
    g.line(f"{n} = 0")
    terms = []
    for k, (start, stride, count, _) in enumerate(axes):
        g.line(f"for j{k} in range({count}):")
        g.depth += 1
        terms.append(f"({start} + {stride} * j{k}) * {strides[k]}")
    g.line(f"{out.name}[{n}] = {x.name}[{' + '.join(terms) or '0'}]")
    g.line(f"{n} += 1")
    g.depth -= len(axes)


@kernel
def gather(x, pos, o, outer, n, inner, ctl):
    """``o[r, j, k] = x[r, pos[j], k]`` over ``outer`` x positions x ``inner``; returns 1 with
    the bad position in ``ctl`` when one is outside [0, n)."""
    m = pos.size
    for j in range(m):
        p = pos[j]
        if p < 0 or p >= n:
            ctl[1] = GATHER_INDEX
            ctl[4] = p
            ctl[5] = n
            return 1
    for r in range(outer):
        for j in range(m):
            src = (r * n + pos[j]) * inner
            dst = (r * m + j) * inner
            copy_row(x[src : src + inner], o[dst : dst + inner])
    return 0


@kernel
def copy_row(src, dst):
    """``dst[:] = src`` through views that start at 0: indexed ``x[at + c]``, the copy ran
    scalar (Numba's wraparound test of an index it cannot prove non-negative keeps LLVM from
    vectorizing; rows of 128 float32: 3.9 -> 1.0 us for 64 of them)."""
    for c in range(src.size):
        dst[c] = src[c]


@emits("GATHER")
def emit_gather(node, g) -> None:
    x, pos = node.ins
    out = node.outs[0]
    if pos.value is not None and not node.dynamic:  # constant positions (checked when the map is made)
        take(g, node)
        return
    axis = node.options.axis if node.options is not None else 0
    axis = axis + len(x.shape) if axis < 0 else axis
    require(not (node.options is not None and node.options.batch_dims) and pos.dtype.kind == "i",
            "GATHER with batch_dims or non-integer positions is not compiled")
    if node.dynamic:  # the output's shape follows x's run-time dims
        from numlite.jit.kernels.shape import _product

        out = g.result(node, 0, (*x.shape[:axis], *pos.shape, *x.shape[axis + 1:]))
        outer, inner = _product(x.shape[:axis]), _product(x.shape[axis + 1:])
    else:
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    g.check(f"{g.kernel(gather)}({x.name}, {pos.name}, {out.name}, {outer}, {x.shape[axis]}, {inner}, ctl)")


emit_gather.run_time_shapes = True


# -- GATHER_ND, EMBEDDING_LOOKUP, ONE_HOT, DYNAMIC_UPDATE_SLICE -------------------------------------
#
# Positions from data are checked in compiled code, with the NumPy kernel's own message (an
# InvokeError naming the node, written by FunctionGen.fail_if); constant positions become index
# maps, made (and checked) by numlite's own kernel.


@kernel
def first_outside(pos, n):
    """The flat index of the first position outside [0, n), or -1."""
    for j in range(pos.size):
        if pos[j] < 0 or pos[j] >= n:
            return j
    return -1


@kernel
def rows(table, pos, o, inner):
    """``o[j] = table[pos[j]]``, rows of ``inner`` elements (positions checked before)."""
    for j in range(pos.size):
        src = pos[j] * inner
        dst = j * inner
        copy_row(table[src : src + inner], o[dst : dst + inner])


@emits("EMBEDDING_LOOKUP")
def emit_embedding_lookup(node, g) -> None:
    ids, table = node.ins
    out = node.outs[0]
    require(table.dtype == out.dtype, "EMBEDDING_LOOKUP of a quantized table into float32 is not compiled")
    if ids.value is not None:
        take(g, node, moved=1)
        return
    n = table.shape[0]
    bad = g.name("bad")
    g.line(f"{bad} = {g.kernel(first_outside)}({ids.name}, {n})")
    g.fail_if(f"{bad} >= 0", f"embedding lookup index {{}} is out of range [0, {n})", [f"{ids.name}[{bad}]"], prepare=False)
    g.line(f"{g.kernel(rows)}({table.name}, {ids.name}, {out.name}, {table.size // n if n else 0})")


@kernel
def gather_nd(params, idx, o, nd, limits, weights, inner):
    """Slices of ``inner`` elements of ``params`` at the rows of coordinates ``idx`` (``nd`` per
    row); returns 1 before writing when a coordinate is outside its dim."""
    slices = idx.size // nd if nd else 0
    for s in range(slices):
        for k in range(nd):
            v = idx[s * nd + k]
            if v < 0 or v >= limits[k]:
                return 1
    for s in range(slices):
        row = 0
        for k in range(nd):
            row += idx[s * nd + k] * weights[k]
        copy_row(params[row * inner : (row + 1) * inner], o[s * inner : (s + 1) * inner])
    return 0


@emits("GATHER_ND")
def emit_gather_nd(node, g) -> None:
    params, indices = node.ins
    out = node.outs[0]
    if indices.value is not None:
        take(g, node)
        return
    k = node.kernel
    require(params.size > 0 or indices.size == 0, "GATHER_ND from an empty params tensor fails at every run")
    require(k.nd > 0, "GATHER_ND of whole params is not compiled")
    if out.size == 0:
        return
    inner = out.size // k.n_slices
    flag = g.name("bad")
    limits, weights = g.const(np.asarray(k.limits, np.int64)), g.const(np.asarray(k.weights, np.int64))
    g.line(f"{flag} = {g.kernel(gather_nd)}({params.name}, {indices.name}, {out.name}, {k.nd}, {limits}, {weights}, {inner})")
    g.fail_if(f"{flag} != 0", f"gather_nd index is out of bounds for params of shape {tuple(params.shape)}", [], prepare=False)


@kernel
def one_hot(idx, o, prefix, depth, suffix, on, off):
    for p in range(prefix):
        for j in range(depth):
            for s in range(suffix):
                o[(p * depth + j) * suffix + s] = on if np.int32(idx[p * suffix + s]) == j else off


@emits("ONE_HOT")
def emit_one_hot(node, g) -> None:
    """``on`` where the index (narrowed to int32, as LiteRT) equals the class, else ``off``."""
    indices, depth, on, off = node.ins
    out = node.outs[0]
    require(out.dtype == on.dtype == off.dtype, "ONE_HOT between dtypes is not compiled")
    if out.size == 0:
        return
    (prefix, _, suffix), (_, d, _) = node.kernel.views
    g.line(f"{g.kernel(one_hot)}({indices.name}, {out.name}, {prefix}, {d}, {suffix}, {on.name}[0], {off.name}[0])")


@kernel
def update_slice(operand, update, start, o, limits, strides, offsets):
    """``o`` = ``operand`` with ``update`` written at ``start`` clamped into [0, limits] (XLA's
    rule: never out of range); ``offsets`` are the update's elements' places in ``o`` from
    the corner."""
    for q in range(o.size):
        o[q] = operand[q]
    base = 0
    for k in range(limits.size):
        b = start[k]
        b = 0 if b < 0 else (limits[k] if b > limits[k] else b)
        base += b * strides[k]
    for u in range(update.size):
        o[base + offsets[u]] = update[u]


@emits("DYNAMIC_UPDATE_SLICE")
def emit_dynamic_update_slice(node, g) -> None:
    operand, update, start = node.ins
    out = node.outs[0]
    require(operand.dtype == update.dtype == out.dtype, "DYNAMIC_UPDATE_SLICE between dtypes is not compiled")
    if out.size == 0:
        return
    rank = len(operand.shape)
    strides = np.array([int(np.prod(operand.shape[k + 1:], dtype=np.int64)) for k in range(rank)], np.int64)
    grid = np.indices(update.shape, dtype=np.int64).reshape(rank, -1) if rank else np.zeros((0, 1), np.int64)
    offsets = (strides[:, None] * grid).sum(axis=0) if rank else np.zeros(1, np.int64)
    limits = np.array([o - u for o, u in zip(operand.shape, update.shape)], np.int64)
    names = [g.const(v) for v in (limits, strides, np.ascontiguousarray(offsets, np.int64))]
    g.line(f"{g.kernel(update_slice)}({operand.name}, {update.name}, {start.name}, {out.name}, {', '.join(names)})")


# -- SCATTER_ND ------------------------------------------------------------------------------------


@kernel
def scatter_rows(idx, rows, nd, limits, weights):
    """The output row each row of coordinates of ``idx`` (``nd`` per row) names, into ``rows``;
    returns 1 when a coordinate is outside its dim."""
    for s in range(rows.size):
        row = 0
        for k in range(nd):
            v = idx[s * nd + k]
            if v < 0 or v >= limits[k]:
                return 1
            row += v * weights[k]
        rows[s] = row
    return 0


@kernel
def scatter_add(rows, updates, o, inner):
    """``o`` zeroed, then each slice of ``inner`` updates added at its row, in order: duplicates
    add up as the NumPy kernel's ``np.add.at`` adds them (integers wrap on the store)."""
    for q in range(o.size):
        o[q] = 0
    for s in range(rows.size):
        at = rows[s] * inner
        for c in range(inner):
            o[at + c] += updates[s * inner + c]


@kernel
def scatter_or(rows, updates, o, inner):
    """``scatter_add`` for bools: ORed (``np.logical_or.at``)."""
    for q in range(o.size):
        o[q] = False
    for s in range(rows.size):
        at = rows[s] * inner
        for c in range(inner):
            if updates[s * inner + c]:
                o[at + c] = True


@emits("SCATTER_ND")
def emit_scatter_nd(node, g) -> None:
    """Coordinates from data or constant, checked in compiled code with the NumPy kernel's
    message (its InvokeError); the output's shape is a constant (else it has a run-time shape
    and stays on NumPy)."""
    indices, updates, _ = node.ins
    out = node.outs[0]
    require(updates.dtype == out.dtype, "SCATTER_ND between dtypes is not compiled")
    if out.size == 0:
        return
    k = node.kernel
    if k.n_slices == 0 or updates.size == 0:  # the NumPy kernel zeroes and checks nothing
        g.line(f"for i in range({out.size}):")
        g.line(f"    {out.name}[i] = 0")
        return
    require(k.nd > 0, "SCATTER_ND of whole outputs is not compiled")
    limits, weights = g.const(np.asarray(k.limits, np.int64)), g.const(np.asarray(k.weights, np.int64))
    rows, flag = g.temp((k.n_slices,), np.int64), g.name("bad")
    g.line(f"{flag} = {g.kernel(scatter_rows)}({indices.name}, {rows.name}, {k.nd}, {limits}, {weights})")
    g.fail_if(f"{flag} != 0", f"scatter_nd index is out of bounds for the output of shape {tuple(out.shape)}", [], prepare=False)
    combine = scatter_or if out.dtype == np.bool_ else scatter_add
    g.line(f"{g.kernel(combine)}({rows.name}, {updates.name}, {out.name}, {updates.size // k.n_slices})")


# -- SPARSE_TO_DENSE -------------------------------------------------------------------------------


@kernel
def sparse_to_dense(idx, values, default, o, nd, limits, weights):
    """``o`` holds ``default`` except at the coordinates of ``idx`` (``nd`` per row), which take
    their value (one each, or the one value for all), a later repeat overwriting; returns 1
    before writing when a coordinate is outside its dim."""
    rows = idx.size // nd
    for s in range(rows):
        for k in range(nd):
            v = idx[s * nd + k]
            if v < 0 or v >= limits[k]:
                return 1
    for q in range(o.size):
        o[q] = default
    for s in range(rows):
        at = 0
        for k in range(nd):
            at += idx[s * nd + k] * weights[k]
        o[at] = values[s if values.size > 1 else 0]
    return 0


@emits("SPARSE_TO_DENSE")
def emit_sparse_to_dense(node, g) -> None:
    """Indices constant or from data (checked in compiled code with the NumPy kernel's
    message); a constant output shape (else a run-time shape: NumPy). Index and value counts
    that do not fit fail at every run: they stay on NumPy, which raises."""
    indices, _, values, default = node.ins
    out = node.outs[0]
    require(values.dtype == out.dtype, "SPARSE_TO_DENSE between dtypes is not compiled")
    nd = indices.shape[1] if len(indices.shape) == 2 else 1
    rows = indices.size // nd if nd else 0
    require(nd == len(out.shape) and nd > 0, "SPARSE_TO_DENSE with indices of another rank than the output fails at every run")
    require(len(values.shape) == 0 or values.shape[0] == rows, "SPARSE_TO_DENSE with a value count unlike the index count fails at every run")
    if out.size == 0:
        return
    if rows == 0:  # no index: the default everywhere
        each(g, out, lambda i: f"{default.name}[0]")
        return
    limits = g.const(np.asarray(out.shape, np.int64))
    weights = g.const(np.array([int(np.prod(out.shape[j + 1:], dtype=np.int64)) for j in range(nd)], np.int64))
    flag = g.name("bad")
    g.line(f"{flag} = {g.kernel(sparse_to_dense)}({indices.name}, {values.name}, {default.name}[0], {out.name}, {nd}, {limits}, {weights})")
    g.fail_if(f"{flag} != 0", f"an index is out of range for the output shape {tuple(out.shape)}", [], prepare=False)
