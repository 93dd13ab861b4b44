"""Shape and layout ops: reshapes, transposes, concatenation and splitting, slices, padding,
tiling and broadcasting, shapes and sizes, block rearrangements, image resizing, diagonals and
Einsum.

TensorFlow accepts int64 for most index and shape tensors where LiteRT's kernels read int32:
:func:`int32_input` converts them (constants at conversion time, tensors with a CAST). Where
LiteRT's kernel lacks a dtype or a rank TensorFlow allows, the rule either builds the result
another exact way or refuses with a :class:`~numlite.errors.ConversionError`.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lowering import SubgraphLowering
from numlite.model import schema

# Types LiteRT's kernels accept, for ops whose support is narrower than TensorFlow's.
_PACK_TYPES = ("FLOAT32", "INT32", "INT64", "UINT8", "INT8", "INT16")
_UNPACK_TYPES = ("FLOAT32", "FLOAT16", "INT32", "UINT8", "INT8", "INT16", "BOOL")
_SPLIT_TYPES = ("FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64")
_BLOCK_TYPES = ("FLOAT32", "UINT8", "INT8", "INT32", "INT64")
_DIAG_TYPES = ("FLOAT32", "INT8", "UINT8", "INT16", "INT32", "INT64")
_REVERSE_SEQUENCE_TYPES = ("FLOAT32", "UINT8", "INT16", "INT32", "INT64")
_NEAREST_TYPES = ("FLOAT32", "UINT8", "INT8", "INT16", "INT32")
_CUMSUM_TYPES = ("FLOAT32", "INT32", "INT64")
_ZEROS_LIKE_TYPES = ("FLOAT32", "INT32", "INT64")
# The largest input ranks of LiteRT's kernels.
_MAX_RANK = {"TRANSPOSE": 8, "PAD": 5, "PADV2": 5}


# -- helpers shared by the rule modules ----------------------------------------------------------


def int32_tensor(cx: SubgraphLowering, x: TensorRef) -> TensorRef:
    """``x`` as int32 (TFLite's index type); constants are converted, tensors cast."""
    if x.type == "INT32":
        return x
    if x.value is not None:
        return cx.const(x.value.astype(np.int32), f"{x.name}/int32")
    return cx.emit1("CAST", [x], cx.spec(f"{x.name}/int32", x.shape, "INT32"))


def int32_input(cx: SubgraphLowering, node: Node, i: int) -> TensorRef:
    """Input ``i`` as int32 (TFLite's index type); constants are converted, tensors cast."""
    return int32_tensor(cx, cx.input(node, i))


def shape_tensor(cx: SubgraphLowering, x: TensorRef, name: str, type_: str = "INT32") -> TensorRef:
    """The shape of ``x`` as a vector: a constant when it is static, else a SHAPE op."""
    if x.is_static:
        return cx.const(np.array(x.shape, schema.numpy_type(type_)), name)
    return cx.emit1("SHAPE", [x], cx.spec(name, None if x.rank is None else (x.rank,), type_),
                    out_type=schema.TENSOR_TYPE_CODES[type_])


def const_axis(cx: SubgraphLowering, node: Node, i: int, rank: int | None, what: str = "axis") -> int:
    """Constant input ``i`` as one axis in ``[0, rank)`` (negative values count from the end)."""
    value = cx.require_const(node, i, what)
    if value.size != 1:
        raise cx.fail(node, f"{what} must be a single value, got {value.tolist()}")
    return normalized_axis(cx, node, int(value.reshape(-1)[0]), rank, what)


def normalized_axis(cx: SubgraphLowering, node: Node, axis: int, rank: int | None, what: str = "axis") -> int:
    """``axis`` in ``[0, rank)``; a negative axis needs a known rank."""
    if rank is None:
        if axis < 0:
            raise cx.fail(node, f"a negative {what} needs an input of known rank")
        return axis
    if not -rank <= axis < rank:
        raise cx.fail(node, f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def require_types(cx: SubgraphLowering, node: Node, x: TensorRef, types: Sequence[str], op: str) -> None:
    """Refuse a tensor type LiteRT's kernel for ``op`` cannot read."""
    if x.type not in types:
        raise cx.fail(node, f"LiteRT's {op} does not support {x.type} tensors (it takes {', '.join(types)})")


def require_rank(cx: SubgraphLowering, node: Node, x: TensorRef, op: str) -> None:
    """Refuse an input of a rank LiteRT's kernel for ``op`` cannot handle."""
    if x.rank is not None and x.rank > _MAX_RANK[op]:
        raise cx.fail(node, f"LiteRT's {op} supports inputs of rank {_MAX_RANK[op]} at most, this one has rank {x.rank}")


# -- shapes ---------------------------------------------------------------------------------------


@lowers("Reshape")
def reshape_op(cx: SubgraphLowering, node: Node):
    """RESHAPE to TF's static output shape when at most one dim is unknown, else to the shape input."""
    x = cx.input(node, 0)
    out = cx.out(node)
    if out.shape is not None and sum(d < 0 for d in out.shape) <= 1:
        shape = cx.const(np.array(out.shape, np.int32), f"{node.name}/shape")  # -1 stays: batch
    else:
        shape = int32_input(cx, node, 1)
    return [cx.emit1("RESHAPE", [x, shape], out)]


@lowers("Squeeze")
def squeeze(cx: SubgraphLowering, node: Node):
    """Squeeze the given axes, or (none given) every axis of size 1, found at run time when
    some size is unknown, as TensorFlow does."""
    x = cx.input(node, 0)
    axes = [normalized_axis(cx, node, int(a), x.rank) for a in node.attrs.get("squeeze_dims", [])]
    if not axes and x.is_static:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
        if not axes:
            return [x]
    return [cx.emit1("SQUEEZE", [x], cx.out(node), squeeze_dims=axes)]


@lowers("ExpandDims")
def expand_dims(cx: SubgraphLowering, node: Node):
    """EXPAND_DIMS with an int32 axis."""
    return [cx.emit1("EXPAND_DIMS", [cx.input(node, 0), int32_input(cx, node, 1)], cx.out(node))]


@lowers("Shape", "ShapeN")
def shape(cx: SubgraphLowering, node: Node):
    """SHAPE of TF's out_type (int32 or int64), one per input (ShapeN has several); a static
    shape is a constant."""
    shapes = []
    for i, x in enumerate(cx.inputs(node)):
        out = cx.out(node, i)
        if x.is_static:
            shapes.append(cx.const(np.array(x.shape, schema.numpy_type(out.type)), out.name))
        else:
            shapes.append(cx.emit1("SHAPE", [x], out, out_type=schema.TENSOR_TYPE_CODES[out.type]))
    return shapes


@lowers("Size")
def size(cx: SubgraphLowering, node: Node):
    """The product of the run-time shape (TFLite has no SIZE op)."""
    x, out = cx.input(node, 0), cx.out(node)
    dims = shape_tensor(cx, x, f"{node.name}/shape", out.type)
    return [cx.emit1("REDUCE_PROD", [dims, cx.const(np.array([0], np.int32), f"{node.name}/axis")], out, keep_dims=False)]


@lowers("Rank")
def rank(cx: SubgraphLowering, node: Node):
    """The length of the shape (LiteRT's RANK op is left out: numlite has no kernel for it)."""
    from numlite.converter.lower.nn import reshape  # here: nn imports this module

    x = cx.input(node, 0)
    if x.rank is not None:
        return [cx.const(np.array(x.rank, np.int32), node.name)]
    dims = shape_tensor(cx, x, f"{node.name}/shape")
    count = cx.emit1("SHAPE", [dims], cx.spec(f"{node.name}/count", (1,), "INT32"), out_type=schema.TENSOR_TYPE_CODES["INT32"])
    return [reshape(cx, count, (), node.name)]


@lowers("ZerosLike", "OnesLike")
def zeros_or_ones_like(cx: SubgraphLowering, node: Node):
    """ZEROS_LIKE for the types LiteRT's kernel has; else (and for ones: TFLite has no
    ONES_LIKE op) a FILL over the input's shape."""
    x, out = cx.input(node, 0), cx.out(node)
    if node.op == "ZerosLike" and x.type in _ZEROS_LIKE_TYPES:
        return [cx.emit1("ZEROS_LIKE", [x], out)]
    value = cx.const(np.array(node.op == "OnesLike", schema.numpy_type(out.type)), f"{node.name}/value")
    return [cx.emit1("FILL", [shape_tensor(cx, x, f"{node.name}/shape"), value], out)]


@lowers("Fill")
def fill(cx: SubgraphLowering, node: Node):
    """FILL with int32 dims."""
    return [cx.emit1("FILL", [int32_input(cx, node, 0), cx.input(node, 1)], cx.out(node))]


@lowers("Empty")
def empty(cx: SubgraphLowering, node: Node):
    """A FILL with zeros (TF's ``init=True``; without it TF leaves the contents undefined)."""
    out = cx.out(node)
    zero = cx.const(np.array(0, schema.numpy_type(out.type)), f"{node.name}/zero")
    return [cx.emit1("FILL", [int32_input(cx, node, 0), zero], out)]


@lowers("BroadcastTo")
def broadcast_to(cx: SubgraphLowering, node: Node):
    """BROADCAST_TO an int32 shape."""
    return [cx.emit1("BROADCAST_TO", [cx.input(node, 0), int32_input(cx, node, 1)], cx.out(node))]


@lowers("Range")
def range_op(cx: SubgraphLowering, node: Node):
    """RANGE; like TF's kernel, LiteRT's accumulates ``delta`` one step at a time."""
    start, limit, delta = cx.inputs(node)
    require_types(cx, node, start, ("FLOAT32", "INT32", "INT64"), "RANGE")
    return [cx.emit1("RANGE", [start, limit, delta], cx.out(node))]


# -- layout ---------------------------------------------------------------------------------------


@lowers("Transpose")
def transpose_op(cx: SubgraphLowering, node: Node):
    """TRANSPOSE by an int32 permutation."""
    x = cx.input(node, 0)
    require_rank(cx, node, x, "TRANSPOSE")
    return [cx.emit1("TRANSPOSE", [x, int32_input(cx, node, 1)], cx.out(node))]


@lowers("ConcatV2", "Concat")
def concat(cx: SubgraphLowering, node: Node):
    """CONCATENATION along a constant axis (one input is passed through). The axis is the
    last input of ConcatV2, the first of TF1's Concat."""
    first, count = (1, len(node.inputs) - 1) if node.op == "Concat" else (0, len(node.inputs) - 1)
    values = [cx.input(node, first + i) for i in range(count)]
    axis = const_axis(cx, node, 0 if node.op == "Concat" else count, values[0].rank)
    if len(values) == 1:
        return values
    return [cx.emit1("CONCATENATION", values, cx.out(node), axis=axis)]


@lowers("Pack")
def pack(cx: SubgraphLowering, node: Node):
    """PACK; for the types LiteRT's PACK lacks (bool, float16), each tensor gets the new axis
    and they are concatenated."""
    values = cx.inputs(node)
    rank = None if values[0].rank is None else values[0].rank + 1
    axis = normalized_axis(cx, node, int(node.attrs.get("axis", 0)), rank)
    if values[0].type in _PACK_TYPES:
        return [cx.emit1("PACK", values, cx.out(node), values_count=len(values), axis=axis)]
    position = cx.const(np.array(axis, np.int32), f"{node.name}/axis")
    expanded = [cx.emit1("EXPAND_DIMS", [v, position], cx.spec(f"{node.name}/item{k}", _inserted(v.shape, axis), v.type))
                for k, v in enumerate(values)]
    return [cx.emit1("CONCATENATION", expanded, cx.out(node), axis=axis)]


def _inserted(shape: tuple[int, ...] | None, axis: int) -> tuple[int, ...] | None:
    return None if shape is None else shape[:axis] + (1,) + shape[axis:]


@lowers("Unpack")
def unpack(cx: SubgraphLowering, node: Node):
    """UNPACK; for the types LiteRT's UNPACK lacks (int64), one GATHER of a single index each."""
    x = cx.input(node, 0)
    num = int(node.attrs["num"])
    axis = normalized_axis(cx, node, int(node.attrs.get("axis", 0)), x.rank)
    outs = [cx.out(node, i) for i in range(num)]
    if x.type in _UNPACK_TYPES:
        return cx.emit("UNPACK", [x], outs, num=num, axis=axis)
    return [cx.emit1("GATHER", [x, cx.const(np.array(k, np.int32), f"{out.name}/index")], out, axis=axis)
            for k, out in enumerate(outs)]


@lowers("Split")
def split(cx: SubgraphLowering, node: Node):
    """SPLIT into equal parts; for the types LiteRT's SPLIT lacks (bool, float16), GATHERs."""
    x = cx.input(node, 1)
    axis = const_axis(cx, node, 0, x.rank)
    num = int(node.attrs["num_split"])
    outs = [cx.out(node, i) for i in range(num)]
    if x.type not in _SPLIT_TYPES:
        return _gathered_parts(cx, node, x, axis, [_static_dim(cx, node, x, axis) // num] * num, outs)
    return cx.emit("SPLIT", [cx.const(np.array(axis, np.int32), f"{node.name}/axis"), x], outs, num_splits=num)


@lowers("SplitV")
def split_v(cx: SubgraphLowering, node: Node):
    """SPLIT_V into parts of the given sizes; for the types SPLIT_V lacks, GATHERs."""
    x = cx.input(node, 0)
    axis = const_axis(cx, node, 2, x.rank)
    num = int(node.attrs["num_split"])
    outs = [cx.out(node, i) for i in range(num)]
    if num == 1:
        return [x]
    if x.type not in _SPLIT_TYPES:
        sizes = [int(s) for s in cx.require_const(node, 1, "size_splits")]
        if -1 in sizes:
            sizes[sizes.index(-1)] = _static_dim(cx, node, x, axis) - sum(s for s in sizes if s != -1)
        return _gathered_parts(cx, node, x, axis, sizes, outs)
    sizes = int32_input(cx, node, 1)
    return cx.emit("SPLIT_V", [x, sizes, cx.const(np.array(axis, np.int32), f"{node.name}/axis")], outs, num_splits=num)


def _static_dim(cx: SubgraphLowering, node: Node, x: TensorRef, axis: int) -> int:
    if x.shape is None or x.shape[axis] < 0:
        raise cx.fail(node, f"splitting a {x.type} tensor needs a static size along axis {axis}")
    return x.shape[axis]


def _gathered_parts(cx: SubgraphLowering, node: Node, x: TensorRef, axis: int, sizes: list[int], outs) -> list[TensorRef]:
    """Consecutive parts of ``x`` along ``axis`` by GATHER, for the types LiteRT's SPLIT lacks."""
    parts, start = [], 0
    for size, out in zip(sizes, outs):
        index = cx.const(np.arange(start, start + size, dtype=np.int32), f"{out.name}/index")
        parts.append(cx.emit1("GATHER", [x, index], out, axis=axis))
        start += size
    return parts


@lowers("Tile")
def tile(cx: SubgraphLowering, node: Node):
    """TILE by int32 multiples."""
    return [cx.emit1("TILE", [cx.input(node, 0), int32_input(cx, node, 1)], cx.out(node))]


@lowers("ReverseV2")
def reverse(cx: SubgraphLowering, node: Node):
    """One REVERSE_V2 per run of adjacent axes (LiteRT's kernel reverses contiguous axes only)."""
    x = cx.input(node, 0)
    axes = sorted({normalized_axis(cx, node, int(a), x.rank) for a in cx.require_const(node, 1, "axis").reshape(-1)})
    runs: list[list[int]] = []
    for a in axes:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    for k, run in enumerate(runs):
        out = cx.out(node) if k == len(runs) - 1 else cx.spec(f"{node.name}/reversed{k}", x.shape, x.type)
        x = cx.emit1("REVERSE_V2", [x, cx.const(np.array(run, np.int32), f"{out.name}/axes")], out)
    return [x]


@lowers("ReverseSequence")
def reverse_sequence(cx: SubgraphLowering, node: Node):
    """REVERSE_SEQUENCE with the dims made non-negative."""
    x = cx.input(node, 0)
    require_types(cx, node, x, _REVERSE_SEQUENCE_TYPES, "REVERSE_SEQUENCE")
    seq_dim = normalized_axis(cx, node, int(node.attrs["seq_dim"]), x.rank, "seq_dim")
    batch_dim = normalized_axis(cx, node, int(node.attrs.get("batch_dim", 0)), x.rank, "batch_dim")
    return [cx.emit1("REVERSE_SEQUENCE", [x, cx.input(node, 1)], cx.out(node), seq_dim=seq_dim, batch_dim=batch_dim)]


# -- slices and padding ---------------------------------------------------------------------------


@lowers("Slice")
def slice_op(cx: SubgraphLowering, node: Node):
    """SLICE with int32 begin and size (a size of -1 runs to the end, as in TF)."""
    return [cx.emit1("SLICE", [cx.input(node, 0), int32_input(cx, node, 1), int32_input(cx, node, 2)], cx.out(node))]


@lowers("StridedSlice")
def strided_slice(cx: SubgraphLowering, node: Node):
    """STRIDED_SLICE over the input's own axes. An ellipsis and new axes are expanded here, not
    left to LiteRT, whose kernel mishandles an ellipsis that stands for no axis: the slice gets
    one index per input axis, and each new axis is an EXPAND_DIMS of its result."""
    x = cx.input(node, 0)
    begin, end, strides = (int32_input(cx, node, i) for i in (1, 2, 3))
    masks = {name: int(node.attrs.get(f"{name}_mask", 0)) for name in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}
    out = cx.out(node)
    if not masks["ellipsis"] and not masks["new_axis"]:
        return [cx.emit1("STRIDED_SLICE", [x, begin, end, strides], out, begin_mask=masks["begin"],
                         end_mask=masks["end"], shrink_axis_mask=masks["shrink_axis"])]
    if x.rank is None or begin.shape is None or begin.shape[0] < 0:
        raise cx.fail(node, "an ellipsis or a new axis needs an input of known rank and a begin of known length")
    sources, new_axes = _dense_slice(masks, begin.shape[0], x.rank)
    if len(sources) > x.rank:
        raise cx.fail(node, f"the slice indexes {len(sources)} axes of a rank-{x.rank} input")

    def dense(vector: TensorRef, filler: int, what: str) -> TensorRef:
        """``vector`` with one entry per input axis: its own, or ``filler`` for whole axes."""
        name = f"{node.name}/{what}"
        padded = cx.emit1("CONCATENATION", [vector, cx.const(np.array([filler], np.int32), f"{name}/filler")],
                          cx.spec(f"{name}/padded", (vector.shape[0] + 1,), "INT32"), axis=0)
        index = cx.const(np.array([vector.shape[0] if k is None else k for k in sources], np.int32), f"{name}/index")
        return cx.emit1("GATHER", [padded, index], cx.spec(name, (x.rank,), "INT32"), axis=0)

    def dense_mask(name: str, whole: bool) -> int:
        return sum(1 << j for j, k in enumerate(sources) if (whole if k is None else masks[name] >> k & 1))

    sliced_shape = None if out.shape is None else tuple(d for j, d in enumerate(out.shape) if j not in new_axes)
    sliced = cx.spec(f"{node.name}/sliced", sliced_shape, out.type) if new_axes else out
    y = cx.emit1("STRIDED_SLICE", [x, dense(begin, 0, "begin"), dense(end, 0, "end"), dense(strides, 1, "strides")],
                 sliced, begin_mask=dense_mask("begin", True), end_mask=dense_mask("end", True),
                 shrink_axis_mask=dense_mask("shrink_axis", False))
    for k, axis in enumerate(new_axes):
        done = k == len(new_axes) - 1
        shape = None if y.shape is None else y.shape[:axis] + (1,) + y.shape[axis:]
        spec = out if done else cx.spec(f"{node.name}/new_axis{k}", shape, out.type)
        y = cx.emit1("EXPAND_DIMS", [y, cx.const(np.array(axis, np.int32), f"{node.name}/new_axis{k}/axis")], spec)
    return [y]


def _dense_slice(masks: dict[str, int], count: int, rank: int) -> tuple[list[int | None], list[int]]:
    """TF's sparse slice spec of ``count`` indices made dense: for each input axis the index
    that slices it (None: taken whole), and the output positions of the new axes."""
    def bit(name: str, i: int) -> bool:
        return bool(masks[name] >> i & 1)

    real = sum(1 for i in range(count) if not bit("ellipsis", i) and not bit("new_axis", i))
    sources: list[int | None] = []
    new_axes: list[int] = []
    position = 0  # in the output
    for i in range(count):
        if bit("ellipsis", i):  # takes precedence over a new-axis bit, as in TF
            whole = max(rank - real, 0)
            sources += [None] * whole
            position += whole
        elif bit("new_axis", i):
            new_axes.append(position)
            position += 1
        else:
            sources.append(i)
            position += not bit("shrink_axis", i)
    sources += [None] * (rank - len(sources))  # axes after the last index are taken whole
    return sources, new_axes


@lowers("Pad", "PadV2", "MirrorPad")
def pad(cx: SubgraphLowering, node: Node):
    """PAD (zeros), PADV2 (a given value) or MIRROR_PAD (REFLECT or SYMMETRIC)."""
    x = cx.input(node, 0)
    paddings = int32_input(cx, node, 1)
    if node.op == "MirrorPad":
        modes = {"REFLECT": 0, "SYMMETRIC": 1}
        mode = node.attrs["mode"]
        if mode not in modes:
            raise cx.fail(node, f"mirror padding mode {mode!r} is not supported")
        return [cx.emit1("MIRROR_PAD", [x, paddings], cx.out(node), mode=modes[mode])]
    if node.op == "PadV2":
        require_rank(cx, node, x, "PADV2")
        return [cx.emit1("PADV2", [x, paddings, cx.input(node, 2)], cx.out(node))]
    require_rank(cx, node, x, "PAD")
    return [cx.emit1("PAD", [x, paddings], cx.out(node))]


# -- block rearrangements -------------------------------------------------------------------------


def _nhwc(cx: SubgraphLowering, node: Node) -> None:
    if node.attrs.get("data_format", "NHWC") != "NHWC":
        raise cx.fail(node, f"data_format {node.attrs['data_format']} is not supported (only NHWC)")


@lowers("DepthToSpace", "SpaceToDepth")
def depth_space(cx: SubgraphLowering, node: Node):
    """DEPTH_TO_SPACE / SPACE_TO_DEPTH of NHWC images (TF's and TFLite's DCR order)."""
    _nhwc(cx, node)
    x = cx.input(node, 0)
    op = "DEPTH_TO_SPACE" if node.op == "DepthToSpace" else "SPACE_TO_DEPTH"
    require_types(cx, node, x, _BLOCK_TYPES, op)
    return [cx.emit1(op, [x], cx.out(node), block_size=int(node.attrs["block_size"]))]


@lowers("SpaceToBatchND", "BatchToSpaceND", "SpaceToBatch", "BatchToSpace")
def space_batch(cx: SubgraphLowering, node: Node):
    """LiteRT takes [batch, spatial..., channels] inputs with one or two spatial dims: dims
    after the blocked ones are merged into the channels (they must be static for that).
    TF1's SpaceToBatch and BatchToSpace have two spatial dims and one block_size for both."""
    from numlite.converter.lower.nn import reshape  # here: nn imports this module

    x = cx.input(node, 0)
    if node.op in ("SpaceToBatch", "BatchToSpace"):
        size = int(node.attrs["block_size"])
        block, pads = cx.const(np.array([size, size], np.int32), f"{node.name}/block"), int32_input(cx, node, 1)
    else:
        block, pads = int32_input(cx, node, 1), int32_input(cx, node, 2)
    op = "SPACE_TO_BATCH_ND" if node.op.startswith("SpaceToBatch") else "BATCH_TO_SPACE_ND"
    if x.rank is None or block.shape is None or block.shape[0] < 0:
        raise cx.fail(node, "the input rank and the number of block dims must be known")
    spatial = block.shape[0]
    if spatial not in (1, 2) or x.rank < spatial + 2:
        raise cx.fail(node, f"LiteRT's {op} supports 1 or 2 block dims followed by channels; "
                            f"this has {spatial} block dims on a rank-{x.rank} input")
    out = cx.out(node)
    if x.rank == spatial + 2:
        return [cx.emit1(op, [x, block, pads], out)]
    inner = x.shape[1:]
    if any(d < 0 for d in inner) or out.shape is None or any(d < 0 for d in out.shape[1:]):
        raise cx.fail(node, "all dims but the batch must be static to merge the trailing dims into channels")
    merged = reshape(cx, x, (-1, *inner[:spatial], int(np.prod(inner[spatial:]))), f"{node.name}/merged")
    moved_shape = (-1, *out.shape[1 : spatial + 1], int(np.prod(out.shape[spatial + 1 :])))
    moved = cx.emit1(op, [merged, block, pads], cx.spec(f"{node.name}/moved", moved_shape, x.type))
    return [cx.emit1("RESHAPE", [moved, cx.const(np.array((-1, *out.shape[1:]), np.int32), f"{node.name}/shape")], out)]


@lowers("ResizeBilinear", "ResizeNearestNeighbor")
def resize(cx: SubgraphLowering, node: Node):
    """TF's bilinear resize always outputs float32: other image types are cast first, so the
    interpolation is not rounded to the input type as LiteRT's integer kernels would."""
    x, out = cx.input(node, 0), cx.out(node)
    if node.op == "ResizeBilinear":
        op = "RESIZE_BILINEAR"
        if x.type != "FLOAT32":
            x = cx.emit1("CAST", [x], cx.spec(f"{node.name}/float", x.shape, "FLOAT32"))
    else:
        op = "RESIZE_NEAREST_NEIGHBOR"
        require_types(cx, node, x, _NEAREST_TYPES, op)
    return [cx.emit1(op, [x, int32_input(cx, node, 1)], out,
                     align_corners=bool(node.attrs.get("align_corners", False)),
                     half_pixel_centers=bool(node.attrs.get("half_pixel_centers", False)))]


# -- diagonals and running sums -------------------------------------------------------------------


def _main_diagonal_only(cx: SubgraphLowering, node: Node, k_input: int | None) -> None:
    """Refuse diagonals other than the main one (TFLite's ops set only that)."""
    if k_input is None:
        return
    k = cx.require_const(node, k_input, "k (diagonal offset)")
    if np.any(k != 0):
        raise cx.fail(node, f"only the main diagonal (k=0) can be converted, got k={k.tolist()}")


@lowers("MatrixDiag", "MatrixDiagV2", "MatrixDiagV3")
def matrix_diag(cx: SubgraphLowering, node: Node):
    """Square matrices with the diagonal on their main diagonal and zeros elsewhere."""
    diagonal, out = cx.input(node, 0), cx.out(node)
    require_types(cx, node, diagonal, _DIAG_TYPES, "MATRIX_DIAG")
    if node.op != "MatrixDiag":
        _main_diagonal_only(cx, node, 1)
        n = diagonal.shape[-1] if diagonal.shape else -1
        for i, what in ((2, "num_rows"), (3, "num_cols")):
            value = int(cx.require_const(node, i, what))
            if value != -1 and value != n:
                raise cx.fail(node, f"{what}={value} makes a non-square matrix, which MATRIX_DIAG cannot build")
        if np.any(cx.require_const(node, 4, "padding_value") != 0):
            raise cx.fail(node, "only a zero padding_value can be converted")
    return [cx.emit1("MATRIX_DIAG", [diagonal], out)]


@lowers("MatrixSetDiag", "MatrixSetDiagV2", "MatrixSetDiagV3")
def matrix_set_diag(cx: SubgraphLowering, node: Node):
    """MATRIX_SET_DIAG of the main diagonal."""
    x, diagonal = cx.input(node, 0), cx.input(node, 1)
    require_types(cx, node, x, _DIAG_TYPES, "MATRIX_SET_DIAG")
    _main_diagonal_only(cx, node, None if node.op == "MatrixSetDiag" else 2)
    return [cx.emit1("MATRIX_SET_DIAG", [x, diagonal], cx.out(node))]


@lowers("MatrixBandPart")
def matrix_band_part(cx: SubgraphLowering, node: Node):
    """The band of each matrix (rows i, columns j with ``i - j <= num_lower`` and ``j - i <=
    num_upper``; a negative bound keeps that whole triangle), zeros elsewhere: one SELECT_V2
    against a constant mask, or a mask computed from the run-time number of rows."""
    x = cx.input(node, 0)
    if x.rank is None or x.rank < 2 or x.shape[-1] < 0:
        raise cx.fail(node, "the input needs a known rank of at least 2 and a static number of columns")
    lower, upper = (int(cx.require_const(node, i, what)) for i, what in ((1, "num_lower"), (2, "num_upper")))
    if lower < 0 and upper < 0:
        return [x]
    zero = cx.const(np.array(0, schema.numpy_type(x.type)), f"{node.name}/zero")
    rows, cols = x.shape[-2], x.shape[-1]
    if rows >= 0:
        difference = np.arange(rows)[:, None] - np.arange(cols)[None, :]
        mask = (difference <= (lower if lower >= 0 else rows)) & (-difference <= (upper if upper >= 0 else cols))
        return [cx.emit1("SELECT_V2", [cx.const(mask, f"{node.name}/mask"), x, zero], cx.out(node))]
    # Rows known at run time only: the mask from i - j, i = RANGE(0, rows) as a column.
    def scalar(value: int, what: str) -> TensorRef:
        return cx.const(np.array(value, np.int32), f"{node.name}/{what}")

    def int_spec(what: str, shape: tuple[int, ...], type_: str = "INT32"):
        return cx.spec(f"{node.name}/{what}", shape, type_)

    dims = shape_tensor(cx, x, f"{node.name}/shape")
    slicing = [cx.const(np.array([v], np.int32), f"{node.name}/{w}") for v, w in ((-2, "begin"), (-1, "end"), (1, "step"))]
    count = cx.emit1("STRIDED_SLICE", [dims, *slicing], int_spec("rows", ()), shrink_axis_mask=1)
    index = cx.emit1("RANGE", [scalar(0, "start"), count, scalar(1, "delta")], int_spec("index", (-1,)))
    column = cx.emit1("EXPAND_DIMS", [index, scalar(-1, "axis")], int_spec("column", (-1, 1)))
    columns = cx.const(np.arange(cols, dtype=np.int32), f"{node.name}/columns")
    difference = cx.emit1("SUB", [column, columns], int_spec("difference", (-1, cols)))
    tests = []
    if lower >= 0:
        tests.append(cx.emit1("LESS_EQUAL", [difference, scalar(lower, "lower")], int_spec("below", (-1, cols), "BOOL")))
    if upper >= 0:
        tests.append(cx.emit1("GREATER_EQUAL", [difference, scalar(-upper, "upper")], int_spec("above", (-1, cols), "BOOL")))
    mask = tests[0] if len(tests) == 1 else cx.emit1("LOGICAL_AND", tests, int_spec("mask", (-1, cols), "BOOL"))
    return [cx.emit1("SELECT_V2", [mask, x, zero], cx.out(node))]


@lowers("Cumsum")
def cumsum(cx: SubgraphLowering, node: Node):
    """CUMSUM along an int32 axis, exclusive and/or reversed."""
    x = cx.input(node, 0)
    require_types(cx, node, x, _CUMSUM_TYPES, "CUMSUM")
    return [cx.emit1("CUMSUM", [x, int32_input(cx, node, 1)], cx.out(node),
                     exclusive=bool(node.attrs.get("exclusive", False)), reverse=bool(node.attrs.get("reverse", False)))]


# -- Einsum -----------------------------------------------------------------------------------------


@lowers("Einsum")
def einsum(cx: SubgraphLowering, node: Node):
    """Einsum as one BATCH_MATMUL (FULLY_CONNECTED when the second operand is a constant and
    no axis is batched) between TRANSPOSE/RESHAPE ops, or a TRANSPOSE for one operand.

    Each letter shared by both operands is a batch axis (kept in the output) or contracted
    (not kept); a letter of one operand that is not kept is summed over first (a SUM).
    Equations that take a diagonal (a letter repeated in one term) are refused. Batch axes of
    size 1 broadcast (``...`` in TF), as in BATCH_MATMUL.
    """
    operands = cx.inputs(node)
    for x in operands:
        require_types(cx, node, x, ("FLOAT32",), "BATCH_MATMUL")
    terms, output = _einsum_terms(cx, node, operands)
    operands, terms = _sum_own_axes(cx, node, operands, terms, output)
    if len(operands) == 1:
        return [_permuted(cx, node, operands[0], terms[0], output)]
    (a, b), (x, y) = terms, operands
    if x.value is not None and y.value is None:  # the constant second: it may become weights
        (a, b), (x, y) = (b, a), (y, x)
    batch = [c for c in output if c in a and c in b]
    contract = [c for c in a if c in b and c not in output]
    free_a, free_b = [c for c in a if c not in b], [c for c in b if c not in a]
    sizes = {c: (x, a.index(c)) for c in free_a} | {c: (y, b.index(c)) for c in free_b}  # the kept axes' sources
    if y.value is not None and not batch and free_a:
        product = _einsum_dense(cx, node, (x, a), (y, b), free_a, contract, free_b, sizes)
    else:
        if len(batch) > 3:
            raise cx.fail(node, f"einsum {node.attrs['equation']!r} has {len(batch)} batch axes; BATCH_MATMUL takes 3 at most")
        product = _einsum_batch_matmul(cx, node, (x, a), (y, b), batch, free_a, contract, free_b, sizes)
    return [_permuted(cx, node, product, batch + free_a + free_b, output)]


def _sum_own_axes(cx: SubgraphLowering, node: Node, operands: list[TensorRef], terms: list[str],
                  output: str) -> tuple[list[TensorRef], list[str]]:
    """Each operand summed (SUM) over its letters that are neither kept nor in the other
    operand, and the terms without them."""
    summed_operands, summed_terms = [], []
    for k, (x, term) in enumerate(zip(operands, terms)):
        others = "".join(t for j, t in enumerate(terms) if j != k)
        axes = [i for i, c in enumerate(term) if c not in output and c not in others]
        if axes:
            kept = "".join(c for i, c in enumerate(term) if i not in axes)
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
            spec = cx.out(node) if len(operands) == 1 and kept == output else cx.spec(f"{node.name}/sum{k}", shape, x.type)
            x = cx.emit1("SUM", [x, cx.const(np.array(axes, np.int32), f"{node.name}/sum{k}/axes")], spec, keep_dims=False)
            term = kept
        summed_operands.append(x)
        summed_terms.append(term)
    return summed_operands, summed_terms


def _einsum_terms(cx: SubgraphLowering, node: Node, operands: list[TensorRef]) -> tuple[list[str], str]:
    """The equation's input terms and output, with each ``...`` spelled out as letters."""
    equation = str(node.attrs["equation"]).replace(" ", "")
    inputs, output = equation.split("->")  # TF's Einsum op always has an explicit output
    terms = inputs.split(",")
    if len(terms) != len(operands) or len(operands) > 2:
        raise cx.fail(node, f"einsum {equation!r} of {len(operands)} operands is not supported (only one or two)")
    if any(x.rank is None for x in operands):
        raise cx.fail(node, f"einsum {equation!r} needs operands of known rank")
    if "..." in equation:
        hidden = [len(x.shape) - len(t.replace("...", "")) if "..." in t else 0 for t, x in zip(terms, operands)]
        spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation][: max(hidden)]
        terms = [t.replace("...", "".join(spare[len(spare) - n :])) for t, n in zip(terms, hidden)]
        output = output.replace("...", "".join(spare))
    for term, x in zip(terms, operands):
        if not re.fullmatch("[a-zA-Z]*", term) or len(set(term)) != len(term):
            raise cx.fail(node, f"einsum {equation!r}: term {term!r} repeats a letter (a diagonal), which is not supported")
        if x.rank != len(term):
            raise cx.fail(node, f"einsum {equation!r}: term {term!r} does not match an operand of rank {x.rank}")
    if len(set(output)) != len(output) or any(c not in "".join(terms) for c in output):
        raise cx.fail(node, f"einsum {equation!r} has an output letter that is repeated or in no input")
    return terms, output


def _permuted(cx: SubgraphLowering, node: Node, x: TensorRef, letters: Sequence[str], output: str) -> TensorRef:
    """``x``, whose axes are ``letters``, transposed to the node's output order."""
    perm = [list(letters).index(c) for c in output]
    if perm == sorted(perm):
        return x
    return cx.emit1("TRANSPOSE", [x, cx.const(np.array(perm, np.int32), f"{node.name}/perm")], cx.out(node))


def _einsum_batch_matmul(cx: SubgraphLowering, node: Node, left: tuple[TensorRef, str], right: tuple[TensorRef, str],
                         batch: list[str], free_a: list[str], contract: list[str], free_b: list[str],
                         sizes: dict) -> TensorRef:
    """[batch..., free_a..., free_b...] from one BATCH_MATMUL of the operands as matrices."""
    x, adj_x = _as_matrices(cx, f"{node.name}/lhs", left, batch, free_a, contract)
    y, adj_y = _as_matrices(cx, f"{node.name}/rhs", right, batch, contract, free_b)
    rows, cols = x.shape[-1 if adj_x else -2], y.shape[-2 if adj_y else -1]
    shape = tuple(max(p, q) if min(p, q) >= 0 else -1 for p, q in zip(x.shape[:-2], y.shape[:-2])) + (rows, cols)
    product = cx.emit1("BATCH_MATMUL", [x, y], cx.spec(f"{node.name}/product", shape, x.type), adj_x=adj_x, adj_y=adj_y)
    if len(free_a) == 1 and len(free_b) == 1:
        return product
    groups = [[(product, k)] for k in range(len(batch))] + [[sizes[c]] for c in free_a + free_b]
    return _merged_reshape(cx, product, groups, f"{node.name}/unmerged")


def _as_matrices(cx: SubgraphLowering, name: str, operand: tuple[TensorRef, str], batch: list[str],
                 rows: list[str], cols: list[str]) -> tuple[TensorRef, bool]:
    """The operand as [batch..., rows, cols] matrices, or as their adjoints [batch..., cols, rows]
    (second result True) when that needs no transpose."""
    x, letters = operand
    adjoint = list(letters) == batch + cols + rows
    if not adjoint and list(letters) != batch + rows + cols:
        x = _transpose(cx, x, [letters.index(c) for c in batch + rows + cols], f"{name}/transposed")
    if len(rows) == 1 and len(cols) == 1:
        return x, adjoint
    first, second = (cols, rows) if adjoint else (rows, cols)
    return _merged_reshape(cx, x, _axis_groups(x, [1] * len(batch) + [len(first), len(second)]), name), adjoint


def _einsum_dense(cx: SubgraphLowering, node: Node, left: tuple[TensorRef, str], right: tuple[TensorRef, str],
                  free_a: list[str], contract: list[str], free_b: list[str], sizes: dict) -> TensorRef:
    """[free_a..., free_b...] from a FULLY_CONNECTED layer whose weights are the constant operand."""
    x, a = left
    y, b = right
    if list(a) != free_a + contract:
        x = _transpose(cx, x, [a.index(c) for c in free_a + contract], f"{node.name}/lhs")
    if len(contract) != 1:
        x = _merged_reshape(cx, x, _axis_groups(x, [1] * len(free_a) + [len(contract)]), f"{node.name}/rows")
    weights = _transpose(cx, y, [b.index(c) for c in free_b + contract], f"{node.name}/weights")
    weights = _merged_reshape(cx, weights, _axis_groups(weights, [len(free_b), len(contract)]), f"{node.name}/weights")
    shape = x.shape[:-1] + (weights.shape[0],)
    product = cx.emit1("FULLY_CONNECTED", [x, weights, None], cx.spec(f"{node.name}/product", shape, x.type), keep_num_dims=True)
    if len(free_b) == 1:
        return product
    groups = [[sizes[c]] for c in free_a + free_b]
    return _merged_reshape(cx, product, groups, f"{node.name}/unmerged")


def _transpose(cx: SubgraphLowering, x: TensorRef, perm: list[int], name: str) -> TensorRef:
    from numlite.converter.lower.nn import transpose  # here: nn imports this module

    return transpose(cx, x, tuple(perm), name)


def _axis_groups(x: TensorRef, counts: list[int]) -> list[list[tuple[TensorRef, int]]]:
    """Consecutive axes of ``x`` in groups of the given sizes, as (tensor, axis) pairs."""
    groups, start = [], 0
    for n in counts:
        groups.append([(x, k) for k in range(start, start + n)])
        start += n
    return groups


def _merged_reshape(cx: SubgraphLowering, x: TensorRef, groups: list[list[tuple[TensorRef, int]]], name: str) -> TensorRef:
    """``x`` reshaped so that dim k is the product of the sizes of the (tensor, axis) pairs in
    ``groups[k]``. Sizes known only at run time come from SHAPE ops when more than one target
    dim is unknown (one unknown dim is left to RESHAPE as -1)."""
    static = [int(np.prod([t.shape[k] for t, k in g])) if all(t.shape[k] >= 0 for t, k in g) else -1 for g in groups]
    if static.count(-1) <= 1:
        target = cx.const(np.array(static, np.int32), f"{name}/shape")
    else:
        shapes: dict[int, TensorRef] = {}  # one SHAPE per tensor read
        pieces = []
        for k, (group, size) in enumerate(zip(groups, static)):
            if size >= 0:
                pieces.append(cx.const(np.array([size], np.int32), f"{name}/dim{k}"))
                continue
            for t, _ in group:
                shapes.setdefault(t.index, shape_tensor(cx, t, f"{t.name}/shape"))
            dims = [cx.emit1("GATHER", [shapes[t.index], cx.const(np.array([axis], np.int32), f"{name}/axis{k}")],
                             cx.spec(f"{name}/dim{k}", (1,), "INT32"), axis=0) for t, axis in group]
            product = dims[0]
            for d in dims[1:]:
                product = cx.emit1("MUL", [product, d], cx.spec(f"{name}/dim{k}", (1,), "INT32"))
            pieces.append(product)
        target = cx.emit1("CONCATENATION", pieces, cx.spec(f"{name}/shape", (len(groups),), "INT32"), axis=0)
    return cx.emit1("RESHAPE", [x, target], cx.spec(name, static, x.type))


@lowers("BroadcastArgs")
def broadcast_args(cx: SubgraphLowering, node: Node):
    """BROADCAST_ARGS of two int32 or int64 shapes."""
    return [cx.emit1("BROADCAST_ARGS", cx.inputs(node), cx.out(node))]
