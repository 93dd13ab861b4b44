"""RESHAPE, SQUEEZE, EXPAND_DIMS: the same elements in another shape, i.e. a flat copy (or,
for an array of run-time shape, the same array); SHAPE of an operand of run-time shape; FILL of
a static shape; ZEROS_LIKE, BROADCAST_TO (an index map), RANK and BROADCAST_ARGS (shapes from
data, checked)."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import copy, each, kernel, require, take
from numlite.jit.kernels.dynamic import shape_text


@emits("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def emit(node, g) -> None:
    if node.dynamic:
        {"RESHAPE": emit_dynamic_reshape, "SQUEEZE": _squeeze, "EXPAND_DIMS": _expand_dims}[node.op_name](node, g)
        return
    x, out = node.ins[0], node.outs[0]
    require(x.size == out.size and x.dtype == out.dtype, f"{node.op_name} from {x.shape} to {out.shape} is not compiled")
    copy(g, out, x)


emit.run_time_shapes = True


def _product(dims, nonzero: bool = False) -> str:
    """The product of dims (ints or expressions); ``nonzero`` counts a 0 dim as 1."""
    known = int(np.prod([d if not nonzero or d else 1 for d in dims if isinstance(d, int)], dtype=np.int64))
    parts = [f"max({d}, 1)" if nonzero else d for d in dims if isinstance(d, str)]
    return " * ".join([str(known), *parts]) if parts else str(known)


def emit_dynamic_reshape(node, g) -> None:
    """RESHAPE when a shape is known only at run time: to a constant shape (one -1 resolved at
    run time, as numlite.kernels.shape.Reshape resolves it) or to the shape of another operand
    (SHAPE's output). The element counts are checked at run time, with the kernel's message."""
    x = node.ins[0]
    shape_in = node.ins[1] if len(node.ins) == 2 else None
    if shape_in is not None and len(shape_in.shape) == 1 and shape_in.dtype == np.int32:
        if shape_in.value is not None:
            target = [int(d) for d in np.asarray(shape_in.value).reshape(-1)]
        elif shape_in.symbolic is not None:
            target = list(shape_in.symbolic)
        else:
            raise NotCompiled("RESHAPE to a shape computed from data is not compiled")
    else:
        new_shape = getattr(node.options, "new_shape", None) if node.options is not None else None
        target = [] if new_shape is None else [int(d) for d in new_shape]
        target = [] if target == [0] else target
    stretch = [k for k, d in enumerate(target) if d == -1]
    require(len(stretch) <= 1 and all(isinstance(d, str) or d >= -1 for d in target), f"RESHAPE to {target} is not compiled")
    n_in = x.count
    if stretch:  # as Reshape._resolve: zero-sized dims count as 1, but 0 elements stay 0
        known = [d for d in target if d != -1]
        n_out, nonzero_in, nonzero_out = _product(known), _product(x.shape, True), _product(known, True)
        v = g.name("s")
        g.line(f"{v} = 0 if ({n_in}) == 0 and ({n_out}) != 0 else ({nonzero_in}) // ({nonzero_out})")
        target[stretch[0]] = v
    if sorted(map(str, (d for d in target if d != 1))) != sorted(map(str, (d for d in x.shape if d != 1))):
        in_text, in_values = shape_text(x.shape)
        out_text, out_values = shape_text(target, as_list=True)
        g.fail_if(f"({_product(target)}) != ({n_in})", f"cannot reshape {{}} elements of shape {in_text} to {out_text}",
                  [n_in, *in_values, *out_values])
    g.result(node, 0, target, alias=x)


def _squeeze(node, g) -> None:
    """SQUEEZE of a run-time shape whose squeezed dims are 1 here (a run-time dim that may be 1
    is not compiled: its check is not written)."""
    x = node.ins[0]
    dims = getattr(node.options, "squeeze_dims", None) if node.options is not None else None
    rank = len(x.shape)
    drop = {int(d) + rank if d < 0 else int(d) for d in dims} if dims is not None and len(dims) else None
    require(drop is not None or all(isinstance(d, int) for d in x.shape), "SQUEEZE of every size-1 dim of a run-time shape is not compiled")
    drop = drop if drop is not None else {k for k, d in enumerate(x.shape) if d == 1}
    require(all(0 <= k < rank and x.shape[k] == 1 for k in drop), f"SQUEEZE of dims {sorted(drop)} of {x.shape} is not compiled")
    g.result(node, 0, [d for k, d in enumerate(x.shape) if k not in drop], alias=x)


def _expand_dims(node, g) -> None:
    """EXPAND_DIMS of a run-time shape at a constant axis."""
    x, axis_t = node.ins
    require(axis_t.value is not None and np.size(axis_t.value) == 1, "EXPAND_DIMS at an axis computed at run time is not compiled")
    axis = int(np.asarray(axis_t.value).reshape(-1)[0])
    axis = axis + len(x.shape) + 1 if axis < 0 else axis
    require(0 <= axis <= len(x.shape), f"EXPAND_DIMS at axis {axis} of rank {len(x.shape)} is not compiled")
    g.result(node, 0, [*x.shape[:axis], 1, *x.shape[axis:]], alias=x)


@emits("SHAPE")
def emit_shape(node, g) -> None:
    """The dims of an operand of run-time shape (a SHAPE of a static one is folded before)."""
    x = node.ins[0]
    require(node.outs[0].dtype.kind == "i", "SHAPE of this dtype is not compiled")
    out = g.result(node, 0, (len(x.shape),), symbolic=tuple(x.shape)) if node.dynamic else node.outs[0]
    for k, d in enumerate(x.shape):
        g.line(f"{out.name}[{k}] = {d}")


emit_shape.run_time_shapes = True


@emits("FILL")
def emit_fill(node, g) -> None:
    """A static shape filled with the scalar input (read at run time: it may be data)."""
    value, out = node.ins[1], node.outs[0]
    require(value.size == 1 and value.dtype == out.dtype and out.dtype.kind in "biuf", f"FILL of {value.dtype.name} is not compiled")
    each(g, out, lambda i: f"{value.name}[0]")


@emits("ZEROS_LIKE")
def emit_zeros_like(node, g) -> None:
    """Zeros of the input's shape and dtype (float32, int32, int64, as numlite's ZerosLike)."""
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == out.dtype and out.dtype.kind in "if", f"ZEROS_LIKE of {x.dtype.name} is not compiled")
    each(g, out, lambda i: "0")


@emits("BROADCAST_TO")
def emit_broadcast_to(node, g) -> None:
    """BROADCAST_TO a constant shape: an index map (a shape from data stays on NumPy)."""
    take(g, node)


@emits("RANK")
def emit_rank(node, g) -> None:
    """The input's rank (known here; usually folded before)."""
    out = node.outs[0]
    require(out.dtype.kind == "i" and out.size == 1, "RANK into this output is not compiled")
    g.line(f"{out.name}[0] = {len(node.ins[0].shape)}")


@kernel
def broadcast_args(a, b, o):
    """The shape ``a`` and ``b`` broadcast to, aligned at their ends, into ``o`` (as long as the
    longer one); returns 1 when a pair of dims does not broadcast or a dim is negative."""
    n = o.size
    for j in range(n):
        da = a[a.size - n + j] if j >= n - a.size else 1
        db = b[b.size - n + j] if j >= n - b.size else 1
        if da < 0 or db < 0:
            return 1
        if da == db or db == 1:
            o[j] = da
        elif da == 1:
            o[j] = db
        else:
            return 1
    return 0


@emits("BROADCAST_ARGS")
def emit_broadcast_args(node, g) -> None:
    """Shapes read from data (one known here is folded by the runtime); shapes that do not
    broadcast raise the NumPy kernel's PrepareError, quoting both."""
    a, b = node.ins
    out = node.outs[0]
    require(a.dtype == b.dtype == out.dtype, "BROADCAST_ARGS between dtypes is not compiled")
    if out.size == 0:
        return
    flag = g.name("bad")
    g.line(f"{flag} = {g.kernel(broadcast_args)}({a.name}, {b.name}, {out.name})")
    tuple_text = lambda t: "(" + ", ".join(["{}"] * t.size) + ("," if t.size == 1 else "") + ")"  # noqa: E731
    g.fail_if(f"{flag} != 0", f"shapes {tuple_text(a)} and {tuple_text(b)} do not broadcast",
              [f"{t.name}[{j}]" for t in (a, b) for j in range(t.size)])
