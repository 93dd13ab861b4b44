"""CONCATENATION and PACK (block copies into the output), SPLIT, SPLIT_V and UNPACK (block
copies out of the input), and TRANSPOSE, TILE, REVERSE_V2, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, MATRIX_DIAG, MATRIX_SET_DIAG (index maps), and
REVERSE_SEQUENCE (an index map, or a loop reading the lengths at run time)."""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import copy_run, each, kernel, require, same_dtypes, take


def _blocks(g: Any, whole: Any, parts: Sequence[Any], outer: int, join: bool) -> None:
    """``whole`` seen as ``outer`` rows, each the parts' rows side by side (a part of
    ``size // outer`` elements per row): copy the parts into it (``join``) or out of it."""
    row = whole.size // outer if outer else 0
    offset = 0
    for t in parts:
        inner = t.size // outer if outer else 0
        if inner:
            if outer != 1:
                g.line(f"for r in range({outer}):")
            at_whole, at_part = (offset, 0) if outer == 1 else (f"r * {row} + {offset}", f"r * {inner}")
            with g.indented() if outer != 1 else contextlib.nullcontext():
                if join:
                    copy_run(g, whole.name, at_whole, t.name, at_part, inner)
                else:
                    copy_run(g, t.name, at_part, whole.name, at_whole, inner)
        offset += inner


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _outer(shape: Sequence[int], axis: int) -> int:
    return int(np.prod(shape[:axis], dtype=np.int64))


@emits("CONCATENATION")
def emit_concatenation(node, g) -> None:
    out = node.outs[0]
    require(not getattr(node.options, "fused_activation_function", 0), "CONCATENATION with a fused activation is not compiled")
    same_dtypes([*node.ins, out], (out.dtype,), "CONCATENATION")
    if node.dynamic:
        _concatenate_dynamic(node, g)
        return
    axis = _axis(node.options.axis if node.options is not None else 0, len(out.shape))
    _blocks(g, out, node.ins, _outer(out.shape, axis), join=True)


emit_concatenation.run_time_shapes = True


def _concatenate_dynamic(node, g) -> None:
    """CONCATENATION of operands of run-time shape: dims outside the axis checked at run time
    where they are not the same here (with Concatenation.prepare's message), then a block copy
    per input with run-time offsets."""
    from numlite.jit.kernels.dynamic import shape_text
    from numlite.jit.kernels.shape import _product

    first = node.ins[0]
    rank = len(first.shape)
    require(rank > 0 and all(len(t.shape) == rank for t in node.ins), "CONCATENATION of scalars or mixed ranks is not compiled")
    axis = _axis(node.options.axis if node.options is not None else 0, rank)
    shape = list(first.shape)
    for t in node.ins[1:]:
        differ = [(a, b) for d, (a, b) in enumerate(zip(first.shape, t.shape)) if d != axis and a != b]
        require(not any(isinstance(a, int) and isinstance(b, int) for a, b in differ), "CONCATENATION of shapes that differ is not compiled")
        if differ:
            text0, values0 = shape_text(first.shape)
            text1, values1 = shape_text(t.shape)
            g.fail_if(" or ".join(f"{a} != {b}" for a, b in differ), f"shapes {text0} and {text1} differ outside axis {axis}", [*values0, *values1])
        shape = [b if d != axis and isinstance(b, int) else a for d, (a, b) in enumerate(zip(shape, t.shape))]
    along = [t.shape[axis] for t in node.ins]
    known = sum(d for d in along if isinstance(d, int))
    shape[axis] = " + ".join([*(d for d in along if isinstance(d, str)), str(known)]) if any(isinstance(d, str) for d in along) else known
    out = g.result(node, 0, shape)
    outer, row = _product(out.shape[:axis]), _product(out.shape[axis:])
    offset = g.name("o")
    g.line(f"{offset} = 0")
    for t in node.ins:
        inner = g.name("n")
        g.line(f"{inner} = {_product(t.shape[axis:])}")
        g.line(f"for r in range({outer}):")
        with g.indented():
            copy_run(g, out.name, f"r * {row} + {offset}", t.name, f"r * {inner}", inner)
        g.line(f"{offset} += {inner}")


@emits("PACK")
def emit_pack(node, g) -> None:
    out = node.outs[0]
    same_dtypes([*node.ins, out], (out.dtype,), "PACK")
    axis = _axis(node.options.axis, len(out.shape))  # the new axis, in the output's rank
    _blocks(g, out, node.ins, _outer(out.shape, axis), join=True)


@emits("SPLIT", "SPLIT_V", "UNPACK")
def emit_split(node, g) -> None:
    # Prepare resolved the axis (a constant, else the node is dynamic and never reaches here)
    # and checked the parts' sizes; the parts are consecutive blocks of each row of the input.
    x = node.ins[{"SPLIT": 1, "SPLIT_V": 0, "UNPACK": 0}[node.op_name]]
    same_dtypes([x, *node.outs], (x.dtype,), node.op_name)
    if node.op_name == "UNPACK":
        axis = _axis(node.options.axis, len(x.shape))
    else:
        a = node.ins[0 if node.op_name == "SPLIT" else 2]
        require(a.value is not None, f"{node.op_name} with an axis computed at run time is not compiled")
        axis = _axis(int(np.asarray(a.value).reshape(-1)[0]), len(x.shape))
    require(sum(o.size for o in node.outs) == x.size, f"{node.op_name} whose parts do not cover the input is not compiled")
    _blocks(g, x, node.outs, _outer(x.shape, axis), join=False)


@emits("TRANSPOSE")
def emit_transpose(node, g) -> None:
    take(g, node)


@emits("TILE", "REVERSE_V2", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "BATCH_TO_SPACE_ND")
def emit_moves(node, g) -> None:
    """Pure data movement with constant parameters (multiples, axes, block sizes, crops): an index map
    made by numlite's own kernel on the input's element numbers (parameters from data stay on
    NumPy)."""
    require(node.ins[0].dtype == node.outs[0].dtype, f"{node.op_name} between dtypes is not compiled")
    take(g, node)


@emits("SPACE_TO_BATCH_ND")
def emit_space_to_batch(node, g) -> None:
    """SPACE_TO_BATCH_ND with constant block sizes and paddings on float32, int32, int64 (whose
    padding is 0): numlite's own kernel run once on the element numbers counted from 1, so that
    a padded place reads 0 in the map (-1 once shifted back) and is written 0."""
    from numlite.kernels import evaluate

    x, out = node.ins[0], node.outs[0]
    require(x.dtype == out.dtype and x.dtype in tuple(np.dtype(t) for t in (np.float32, np.int32, np.int64)),
            f"SPACE_TO_BATCH_ND of {x.dtype.name} is not compiled")
    require(all(t.value is not None for t in node.ins[1:]), "SPACE_TO_BATCH_ND with parameters computed at run time is not compiled")
    numbers = np.arange(1, x.size + 1, dtype=np.int64).reshape(x.shape)
    (moved,) = evaluate(node.op_name, node.options, [numbers, *(t.value for t in node.ins[1:])])
    require(tuple(moved.shape) == tuple(out.shape), f"SPACE_TO_BATCH_ND into {out.shape} is not compiled")
    m = g.const(np.ascontiguousarray(moved.reshape(-1) - 1))
    each(g, out, lambda i: f"{x.name}[{m}[{i}]] if {m}[{i}] >= 0 else 0")


# -- MATRIX_DIAG, MATRIX_SET_DIAG, REVERSE_SEQUENCE ----------------------------------------------

DIAG_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64))  # as the NumPy kernel


def _numbered(node: Any, *inputs: np.ndarray) -> np.ndarray:
    """numlite's own kernel run once on int64 ``inputs`` (element numbers), flat."""
    from numlite.kernels import evaluate

    (moved,) = evaluate(node.op_name, node.options, list(inputs))
    require(tuple(moved.shape) == tuple(node.outs[0].shape), f"{node.op_name} into {node.outs[0].shape} is not compiled")
    return np.ascontiguousarray(moved.reshape(-1).astype(np.int64))


@emits("MATRIX_DIAG")
def emit_matrix_diag(node: Any, g: Any) -> None:
    """The input's last axis on the diagonal of square matrices, zeros elsewhere: the kernel run
    on the element numbers counted from 1, so that a zero of the map (-1 once shifted back) is
    written 0."""
    (x,), (out,) = node.ins, node.outs
    same_dtypes([x, out], DIAG_DTYPES, node.op_name)
    if out.size == 0:
        return
    m = g.const(_numbered(node, np.arange(1, x.size + 1, dtype=np.int64).reshape(x.shape)) - 1)
    each(g, out, lambda i: f"{x.name}[{m}[{i}]] if {m}[{i}] >= 0 else 0")


@emits("MATRIX_SET_DIAG")
def emit_matrix_set_diag(node: Any, g: Any) -> None:
    """The input with its main diagonals from the second input: the kernel run on the input's
    element numbers and the diagonal's numbers as -1, -2, ...; a negative entry ``-k - 1`` of
    the map reads diagonal element ``k``."""
    (x, diag), (out,) = node.ins, node.outs
    same_dtypes([x, diag, out], DIAG_DTYPES, node.op_name)
    if out.size == 0:
        return
    numbers = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    m = g.const(_numbered(node, numbers, -1 - np.arange(diag.size, dtype=np.int64).reshape(diag.shape)))
    each(g, out, lambda i: f"{x.name}[{m}[{i}]] if {m}[{i}] >= 0 else {diag.name}[-1 - {m}[{i}]]")


@kernel
def longest(lengths):
    """The largest of the sequence lengths (the NumPy kernel's check reads it)."""
    top = lengths[0]
    for b in range(1, lengths.size):
        top = max(top, lengths[b])
    return top


@kernel
def reverse_sequence(x, lengths, o, batch, batch_stride, seq, seq_stride):
    """``o[i] = x[j]``, ``j`` the element ``i`` reads: along the sequence axis, index ``s`` of
    batch row ``b`` reads ``n - 1 - s`` where ``s < n = lengths[b]``, else ``s``."""
    for i in range(o.size):
        b = (i // batch_stride) % batch
        s = (i // seq_stride) % seq
        n = np.int64(lengths[b])
        o[i] = x[i + (n - 1 - 2 * s) * seq_stride] if s < n else x[i]


@emits("REVERSE_SEQUENCE")
def emit_reverse_sequence(node: Any, g: Any) -> None:
    """Constant lengths: an index map. Lengths from data: :func:`reverse_sequence`, after the
    NumPy kernel's check (a length beyond the sequence axis raises its InvokeError)."""
    (x, lengths), (out,) = node.ins, node.outs
    same_dtypes([x, out], tuple(np.dtype(t) for t in (np.float32, np.uint8, np.int16, np.int32, np.int64)), node.op_name)
    if out.size == 0:
        return
    if lengths.value is not None:
        take(g, node)
        return
    batch_dim, seq_dim = node.kernel.dims
    shape = tuple(x.shape)
    stride = lambda d: int(np.prod(shape[d + 1 :], dtype=np.int64))  # noqa: E731
    seq = shape[seq_dim]
    if lengths.size:
        top = g.name("top")
        g.line(f"{top} = {g.kernel(longest)}({lengths.name})")
        g.fail_if(f"{top} > {seq}", f"seq_length {{}} exceeds the sequence dimension {seq}", [top], prepare=False)
    g.line(f"{g.kernel(reverse_sequence)}({x.name}, {lengths.name}, {out.name}, {shape[batch_dim]}, {stride(batch_dim)}, {seq}, {stride(seq_dim)})")
