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
from numlite.jit.kernels.common import body, each, kernel, max_nan, min_nan, require
from numlite.jit.kernels.conv import call

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


# -- REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_ANY, REDUCE_ALL, ARG_MAX, ARG_MIN, CUMSUM ---------
#
# Each input element is folded into its output element (through the index map of `reduction_map`)
# in memory order, the order LiteRT visits them: float products round as they do, and an extremum
# keeps LiteRT's rule `cur = cur beyond v ? cur : v`, so a NaN is replaced by the next element
# (NaN only when the last one is), as numlite's _Extremum.reduce_with_nans computes it.


@kernel
def extremum_into(a, m, o, initial, largest):
    for j in range(o.size):
        o[j] = initial
    for i in range(a.size):
        v = a[i]
        if not (o[m[i]] > v if largest else o[m[i]] < v):
            o[m[i]] = v


@kernel
def prod_into(a, m, o):
    for j in range(o.size):
        o[j] = 1
    for i in range(a.size):
        o[m[i]] = o[m[i]] * a[i]


@kernel
def any_into(a, m, o):
    for j in range(o.size):
        o[j] = False
    for i in range(a.size):
        if a[i]:
            o[m[i]] = True


@kernel
def all_into(a, m, o):
    for j in range(o.size):
        o[j] = True
    for i in range(a.size):
        if not a[i]:
            o[m[i]] = False


def reduction_map(node) -> np.ndarray:
    """For each input element (C order), its output element, over the node's constant axes."""
    x, axes = node.ins
    out = node.outs[0]
    require(axes.value is not None, f"{node.op_name} over axes computed at run time is not compiled")
    rank = len(x.shape)
    reduced = {int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes.value).reshape(-1)}
    kept = tuple(1 if d in reduced else n for d, n in enumerate(x.shape))
    require(int(np.prod(kept, dtype=np.int64)) == out.size, f"{node.op_name} of {x.shape} into {out.shape} is not compiled")
    iota = np.arange(out.size, dtype=np.int64).reshape(kept)
    return np.ascontiguousarray(np.broadcast_to(iota, x.shape)).reshape(-1)


EXTREMA_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16))
FOLDS = {  # op -> (kernel, dtypes, the extremum's initial value and direction, or None)
    "REDUCE_MAX": (extremum_into, EXTREMA_DTYPES, lambda d: ("-np.inf" if d.kind == "f" else str(np.iinfo(d).min), True)),
    "REDUCE_MIN": (extremum_into, EXTREMA_DTYPES, lambda d: ("np.inf" if d.kind == "f" else str(np.iinfo(d).max), False)),
    "REDUCE_PROD": (prod_into, tuple(np.dtype(t) for t in (np.float32, np.int32, np.int64, np.int8, np.int16)), None),
    "REDUCE_ANY": (any_into, (np.dtype(np.bool_),), None),
    "REDUCE_ALL": (all_into, (np.dtype(np.bool_),), None),
}


@emits(*FOLDS)
def emit_fold(node, g) -> None:
    fn, dtypes, initial = FOLDS[node.op_name]
    x, out = node.ins[0], node.outs[0]
    require(x.dtype == out.dtype and x.dtype in dtypes, f"{node.op_name} of {x.dtype.name} is not compiled")
    if out.size == 0:
        return
    m = g.const(reduction_map(node))
    extra = ""
    if initial is not None:
        value, largest = initial(out.dtype)
        extra = f", np.{out.dtype.name}({value}), {largest}"
    g.line(f"{g.kernel(fn)}({x.name}, {m}, {out.name}{extra})")


@kernel
def arg_extremum(x, o, outer, n, inner, largest):
    """The index of the first extremum along the middle axis of ``x`` seen as
    [outer, n, inner]; NaNs are skipped (0 when every value is NaN), as numlite's ArgMinMax."""
    for r in range(outer):
        for c in range(inner):
            base = r * n * inner + c
            best = x[base]
            pick = 0
            found = best == best
            for k in range(1, n):
                v = x[base + k * inner]
                if v != v:
                    continue
                if not found or (v > best if largest else v < best):
                    best = v
                    pick = k
                    found = True
            o[r * inner + c] = pick


@emits("ARG_MAX", "ARG_MIN")
def emit_arg(node, g) -> None:
    x, axis = node.ins
    out = node.outs[0]
    require(axis.value is not None and x.dtype in tuple(np.dtype(t) for t in (np.float32, np.int32, np.int8, np.uint8, np.bool_)),
            f"{node.op_name} of {x.dtype.name} or over an axis computed at run time is not compiled")
    a = int(np.asarray(axis.value).reshape(-1)[0])
    a = a + len(x.shape) if a < 0 else a
    outer, inner = int(np.prod(x.shape[:a], dtype=np.int64)), int(np.prod(x.shape[a + 1:], dtype=np.int64))
    if out.size == 0:
        return
    g.line(f"{g.kernel(arg_extremum)}({x.name}, {out.name}, {outer}, {x.shape[a]}, {inner}, {node.op_name == 'ARG_MAX'})")


@kernel
def cumsum(x, o, outer, n, inner, exclusive, reverse):
    """Running sums along the middle axis of [outer, n, inner], each step rounded to (or
    wrapped in) the dtype as np.cumsum adds; exclusive: from 0; reverse: from the end."""
    for r in range(outer):
        for c in range(inner):
            base = r * n * inner + c
            prev = -1
            for s in range(n):
                k = n - 1 - s if reverse else s
                q = base + k * inner
                if exclusive:
                    o[q] = 0 if prev < 0 else o[prev] + x[prev]
                else:
                    o[q] = x[q] if prev < 0 else o[prev] + x[q]
                prev = q


@emits("CUMSUM")
def emit_cumsum(node, g) -> None:
    x, axis = node.ins
    out = node.outs[0]
    require(axis.value is not None and x.dtype == out.dtype and x.dtype in (F32, np.dtype(np.int32), np.dtype(np.int64)),
            f"CUMSUM of {x.dtype.name} or over an axis computed at run time is not compiled")
    a = int(np.asarray(axis.value).reshape(-1)[0])
    a = a + len(x.shape) if a < 0 else a
    if out.size == 0:
        return
    outer, inner = int(np.prod(x.shape[:a], dtype=np.int64)), int(np.prod(x.shape[a + 1:], dtype=np.int64))
    exclusive = bool(getattr(node.options, "exclusive", False))
    reverse = bool(getattr(node.options, "reverse", False))
    g.line(f"{g.kernel(cumsum)}({x.name}, {out.name}, {outer}, {x.shape[a]}, {inner}, {exclusive}, {reverse})")


# -- SEGMENT_SUM, UNSORTED_SEGMENT_SUM / PROD / MAX / MIN ---------------------------------------------
#
# Each slice of the data (its dims after the ids') is folded into the output row its id names,
# in order, as the NumPy kernel's ``ufunc.at`` folds them; negative ids are dropped (TF's rule).
# Ids from data are checked in compiled code with the NumPy kernel's message.

SUM, PROD, MAX, MIN = range(4)
SEGMENT_FOLDS = {"SEGMENT_SUM": SUM, "UNSORTED_SEGMENT_SUM": SUM, "UNSORTED_SEGMENT_PROD": PROD,
                 "UNSORTED_SEGMENT_MAX": MAX, "UNSORTED_SEGMENT_MIN": MIN}


@kernel
def largest(ids):
    """The largest id (-1 for none)."""
    top = -1
    for j in range(ids.size):
        if ids[j] > top:
            top = ids[j]
    return top


@kernel
def segment_fold(data, ids, o, inner, empty, fold):
    """``o`` filled with ``empty``, then each data slice of ``inner`` values folded into row
    ``ids[j]`` (``fold``: SUM, PROD, MAX, MIN; the extrema keep a NaN, as ``np.maximum``)."""
    for q in range(o.size):
        o[q] = empty
    for j in range(ids.size):
        r = ids[j]
        if r < 0:
            continue
        for c in range(inner):
            v = data[j * inner + c]
            at = r * inner + c
            if fold == SUM:
                o[at] += v
            elif fold == PROD:
                o[at] *= v
            elif fold == MAX:
                o[at] = max_nan(o[at], v)
            else:
                o[at] = min_nan(o[at], v)


@kernel
def unsorted_ids(ids):
    """Whether SEGMENT_SUM's ids break its rule: start at 0, grow by 0 or 1 from row to row."""
    if ids.size and ids[0] != 0:
        return 1
    for j in range(1, ids.size):
        step = ids[j] - ids[j - 1]
        if step != 0 and step != 1:
            return 1
    return 0


@emits("SEGMENT_SUM", "UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN")
def emit_segments(node, g) -> None:
    """UNSORTED_*: a constant count (else a run-time shape: NumPy); ids from data are checked,
    an id at or past the count raising the NumPy kernel's InvokeError. SEGMENT_SUM: constant ids
    (checked by the NumPy kernel's prepare), or ids from data, checked here as the NumPy kernel
    checks them (the PrepareError the NumPy engine raises when it prepares the node at run time),
    the output's rows (the last id + 1) known at run time."""
    data, ids = node.ins[0], node.ins[1]
    require(not data.dynamic and not ids.dynamic, f"{node.op_name} of an operand of run-time shape is not compiled")
    if node.dynamic:
        require(node.op_name == "SEGMENT_SUM", f"{node.op_name} with a count from data is not compiled")
        out = _segment_rows(node, g)
    else:
        out = node.outs[0]
    require(data.dtype == out.dtype, f"{node.op_name} between dtypes is not compiled")
    if not out.dynamic and out.size == 0:
        return
    empty = node.kernel.empty(out.dtype)
    if node.op_name != "SEGMENT_SUM" and ids.size and ids.value is None:
        top, segments = g.name("top"), out.shape[0]
        g.line(f"{top} = {g.kernel(largest)}({ids.name})")
        g.fail_if(f"{top} >= {segments}", f"segment id {{}} is not below num_segments {segments}", [top], prepare=False)
    inner = data.size // ids.size if ids.size else 0
    literal = repr(float(empty)) if out.dtype.kind == "f" else str(int(empty))
    g.line(f"{g.kernel(segment_fold)}({data.name}, {ids.name}, {out.name}, {inner}, "
           f"np.{out.dtype.name}({literal}), {SEGMENT_FOLDS[node.op_name]})")


emit_segments.run_time_shapes = True


def _segment_rows(node, g):
    """SEGMENT_SUM's output for ids from data: the ids checked (the NumPy kernel's message
    quotes the first 8), then an array of ``last id + 1`` rows."""
    data, ids = node.ins[0], node.ins[1]
    n = ids.size
    shown = min(n, 8)
    bad = g.name("bad")
    g.line(f"{bad} = {g.kernel(unsorted_ids)}({ids.name})")
    g.fail_if(f"{bad} != 0", "segment ids must start at 0 and grow by 0 or 1, got [" + ", ".join(["{}"] * shown) + "]",
              [f"{ids.name}[{j}]" for j in range(shown)])  # the NumPy engine finds it preparing the node at run time
    rows = f"int({ids.name}[{n - 1}]) + 1" if n else "0"
    return g.result(node, 0, (rows, *data.shape[1:]))
