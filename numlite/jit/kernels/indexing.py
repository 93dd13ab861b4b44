"""SLICE and STRIDED_SLICE with constant bounds (index maps), or, when a shape is known only at
run time (bounds from data, an input of run-time shape), bounds computed and checked in
compiled code as numlite.kernels.indexing computes and checks them; GATHER (constant
positions: an index map; positions from data: checked in compiled code as
numlite.kernels.indexing checks them, raising the same error naming the node)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import GATHER_INDEX, kernel, require, take


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
            for c in range(inner):
                o[dst + c] = x[src + c]
    return 0


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
