"""Indexing and selection ops: gathers, scatters, stitches, rolls, one-hot, top-k, unique and
where.

Index tensors become int32 (:func:`~numlite.converter.lower.array.int32_input`), the type
LiteRT reads everywhere, except where LiteRT's kernel reads int64 indices too (GATHER,
GATHER_ND, ONE_HOT), which then need no CAST; index *outputs* keep the type TensorFlow asked
for, with a CAST where LiteRT produces another.
"""

from __future__ import annotations

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import const_axis, int32_input, normalized_axis, require_types, shape_tensor
from numlite.converter.lowering import SubgraphLowering
from numlite.model import schema

_TOPK_TYPES = ("FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64")
_UNIQUE_TYPES = ("FLOAT32", "UINT8", "INT8", "INT16", "INT32", "INT64")
_WHERE_TYPES = ("BOOL", "FLOAT32", "INT32", "INT64", "INT8", "UINT8")
_SCATTER_TYPES = ("FLOAT32", "INT32", "INT64", "INT8", "UINT8", "BOOL")


@lowers("GatherV2", "Gather")
def gather(cx: SubgraphLowering, node: Node):
    """GATHER along an axis, with TF's batch_dims (Gather v1 always gathers along axis 0)."""
    params, indices = cx.input(node, 0), _index_input(cx, node, 1)
    axis = 0 if node.op == "Gather" else const_axis(cx, node, 2, params.rank)
    batch_dims = int(node.attrs.get("batch_dims", 0))
    if batch_dims < 0:  # counts from the end of the indices' dims, as in TF
        if indices.rank is None:
            raise cx.fail(node, "a negative batch_dims needs indices of known rank")
        batch_dims += indices.rank
    if not 0 <= batch_dims <= axis:
        raise cx.fail(node, f"batch_dims {node.attrs.get('batch_dims')} must be in [0, axis {axis}]")
    return [cx.emit1("GATHER", [params, indices], cx.out(node), axis=axis, batch_dims=batch_dims)]


def _index_input(cx: SubgraphLowering, node: Node, i: int) -> TensorRef:
    """Input ``i``, indices that LiteRT's kernel reads as int32 or int64 (others become int32)."""
    x = cx.input(node, i)
    return x if x.type in ("INT32", "INT64") else int32_input(cx, node, i)


@lowers("GatherNd")
def gather_nd(cx: SubgraphLowering, node: Node):
    """GATHER_ND with int32 or int64 indices."""
    return [cx.emit1("GATHER_ND", [cx.input(node, 0), _index_input(cx, node, 1)], cx.out(node))]


@lowers("ScatterNd")
def scatter_nd(cx: SubgraphLowering, node: Node):
    """Updates summed into zeros at the indices (repeated indices add up, as in TF)."""
    indices, updates, shape = int32_input(cx, node, 0), cx.input(node, 1), int32_input(cx, node, 2)
    require_types(cx, node, updates, _SCATTER_TYPES, "SCATTER_ND")
    return [cx.emit1("SCATTER_ND", [indices, updates, shape], cx.out(node))]


@lowers("OneHot")
def one_hot(cx: SubgraphLowering, node: Node):
    """ONE_HOT; indices outside [0, depth) give a row of off values, as in TF."""
    indices, depth = _index_input(cx, node, 0), int32_input(cx, node, 1)
    on, off = cx.input(node, 2), cx.input(node, 3)
    rank = None if indices.rank is None else indices.rank + 1
    axis = normalized_axis(cx, node, int(node.attrs.get("axis", -1)), rank)
    return [cx.emit1("ONE_HOT", [indices, depth, on, off], cx.out(node), axis=axis)]


@lowers("TopKV2")
def top_k(cx: SubgraphLowering, node: Node):
    """TOPK_V2 (largest first, ties in index order as in TF); LiteRT's indices are int32."""
    x = cx.input(node, 0)
    require_types(cx, node, x, _TOPK_TYPES, "TOPK_V2")
    values_out, indices_out = cx.out(node, 0), cx.out(node, 1)
    index_spec = cx.spec(f"{node.name}/indices", indices_out.shape, "INT32")
    values, indices = cx.emit("TOPK_V2", [x, int32_input(cx, node, 1)], [values_out, index_spec])
    if indices_out.type != "INT32":
        indices = cx.emit1("CAST", [indices], indices_out)
    return [values, indices]


@lowers("Unique")
def unique(cx: SubgraphLowering, node: Node):
    """UNIQUE values in order of first appearance, and each element's position among them."""
    x = cx.input(node, 0)
    require_types(cx, node, x, _UNIQUE_TYPES, "UNIQUE")
    index_out = cx.out(node, 1)
    return cx.emit("UNIQUE", [x], [cx.out(node, 0), index_out], idx_out_type=schema.TENSOR_TYPE_CODES[index_out.type])


@lowers("Where")
def where(cx: SubgraphLowering, node: Node):
    """The int64 coordinates of the true (non-zero) elements."""
    x = cx.input(node, 0)
    require_types(cx, node, x, _WHERE_TYPES, "WHERE")
    return [cx.emit1("WHERE", [x], cx.out(node))]



# -- scatters into a tensor, stitches and permutations --------------------------------------------


def _scattered(cx: SubgraphLowering, node: Node, updates: TensorRef, shape: TensorRef, name: str) -> TensorRef:
    """SCATTER_ND of ``updates`` at the node's indices (input 1) into zeros of ``shape``."""
    indices = int32_input(cx, node, 1)
    return cx.emit1("SCATTER_ND", [indices, updates, shape], cx.spec(f"{node.name}/{name}", cx.out(node).shape, updates.type))


@lowers("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub")
def tensor_scatter(cx: SubgraphLowering, node: Node):
    """The tensor with its slices at the indices replaced (Update: a SELECT_V2 by the SCATTER_ND
    of constant trues, exact whatever the values), or with the updates added or subtracted
    (SCATTER_ND sums repeated indices, as TF does)."""
    tensor, updates = cx.input(node, 0), cx.input(node, 2)
    require_types(cx, node, updates, _SCATTER_TYPES, "SCATTER_ND")
    shape = shape_tensor(cx, tensor, f"{node.name}/shape")
    scattered = _scattered(cx, node, updates, shape, "updates")
    if node.op != "TensorScatterUpdate":
        return [cx.emit1("ADD" if node.op == "TensorScatterAdd" else "SUB", [tensor, scattered], cx.out(node))]
    if not updates.is_static:
        raise cx.fail(node, "the updates' shape must be static")
    trues = cx.const(np.ones(updates.shape, np.bool_), f"{node.name}/trues")
    return [cx.emit1("SELECT_V2", [_scattered(cx, node, trues, shape, "mask"), scattered, tensor], cx.out(node))]


@lowers("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch(cx: SubgraphLowering, node: Node):
    """Constant indices: the data's rows concatenated, then one GATHER that puts each row at
    its index (of rows given the same index, the last one, as TF)."""
    count = len(node.inputs) // 2
    index_lists = [cx.require_const(node, i, "indices") for i in range(count)]
    data = [cx.input(node, count + i) for i in range(count)]
    rows = []
    for k, (indices, x) in enumerate(zip(index_lists, data)):
        if x.shape is None or any(d < 0 for d in x.shape[indices.ndim:]):
            raise cx.fail(node, "the data's dims after the indices' must be static")
        if indices.ndim != 1:
            row = x.shape[indices.ndim:]
            shape = cx.const(np.array((-1,) + row, np.int32), f"{node.name}/rows{k}/shape")
            x = cx.emit1("RESHAPE", [x, shape], cx.spec(f"{node.name}/rows{k}", (indices.size,) + row, x.type))
        rows.append(x)
    flat = np.concatenate([i.reshape(-1) for i in index_lists]).astype(np.int64)
    source = np.full(int(flat.max()) + 1 if flat.size else 0, -1, np.int64)
    source[flat] = np.arange(flat.size)  # later rows of a repeated index overwrite earlier ones
    if (source < 0).any():
        raise cx.fail(node, f"indices {sorted(set(range(source.size)) - set(flat.tolist()))} are missing")
    row_shape = rows[0].shape[1:]
    merged = rows[0] if len(rows) == 1 else cx.emit1(
        "CONCATENATION", rows, cx.spec(f"{node.name}/rows", (flat.size,) + row_shape, rows[0].type), axis=0)
    return [cx.emit1("GATHER", [merged, cx.const(source.astype(np.int32), f"{node.name}/order")], cx.out(node), axis=0)]


@lowers("InvertPermutation")
def invert_permutation(cx: SubgraphLowering, node: Node):
    """``y[x[i]] = i``: SCATTER_ND of 0..n-1 at the indices x (n static)."""
    x = cx.input(node, 0)
    if not x.is_static:
        raise cx.fail(node, "the permutation's length must be static")
    n = x.shape[0]
    indices = cx.emit1("RESHAPE", [int32_input(cx, node, 0), cx.const(np.array([n, 1], np.int32), f"{node.name}/shape")],
                       cx.spec(f"{node.name}/indices", (n, 1), "INT32"))
    positions = cx.const(np.arange(n, dtype=schema.numpy_type(x.type)), f"{node.name}/positions")
    return [cx.emit1("SCATTER_ND", [indices, positions, cx.const(np.array([n], np.int32), f"{node.name}/length")], cx.out(node))]


@lowers("Roll")
def roll(cx: SubgraphLowering, node: Node):
    """One GATHER per rolled axis, of the indices ``(i - shift) mod n`` (constant shifts and
    axes, static sizes along them)."""
    x = cx.input(node, 0)
    shifts, axes = (np.atleast_1d(cx.require_const(node, i, what)) for i, what in ((1, "shift"), (2, "axis")))
    if shifts.shape != axes.shape:
        raise cx.fail(node, f"shift {shifts.tolist()} and axis {axes.tolist()} differ in length")
    total: dict[int, int] = {}
    for shift, axis in zip(shifts.tolist(), axes.tolist()):
        axis = normalized_axis(cx, node, int(axis), x.rank)
        total[axis] = total.get(axis, 0) + int(shift)
    rolled = [(axis, shift) for axis, shift in sorted(total.items())
              if x.shape is None or x.shape[axis] < 0 or shift % x.shape[axis]]
    if not rolled:
        return [x]
    for k, (axis, shift) in enumerate(rolled):
        if x.shape is None or x.shape[axis] < 0:
            raise cx.fail(node, f"the size along axis {axis} must be static")
        size = x.shape[axis]
        order = cx.const(((np.arange(size) - shift) % size).astype(np.int32), f"{node.name}/order{k}")
        out = cx.out(node) if k == len(rolled) - 1 else cx.spec(f"{node.name}/rolled{k}", x.shape, x.type)
        x = cx.emit1("GATHER", [x, order], out, axis=axis)
    return [x]


@lowers("ApproxTopK")
def approx_top_k(cx: SubgraphLowering, node: Node):
    """The exact top k (TF's CPU kernel is exact too): TOPK_V2 along the last axis."""
    x = cx.input(node, 0)
    require_types(cx, node, x, _TOPK_TYPES, "TOPK_V2")
    axis = int(node.attrs.get("reduction_dimension", -1))
    if not node.attrs.get("is_max_k", True) or (x.rank is not None and axis % x.rank != x.rank - 1):
        raise cx.fail(node, "only the largest k along the last axis can be converted (TOPK_V2)")
    k = cx.const(np.array(int(node.attrs["k"]), np.int32), f"{node.name}/k")
    return cx.emit("TOPK_V2", [x, k], [cx.out(node, 0), cx.out(node, 1)])


@lowers("XlaDynamicUpdateSlice")
def xla_dynamic_update_slice(cx: SubgraphLowering, node: Node):
    """DYNAMIC_UPDATE_SLICE: both clamp the start indices so that the update fits."""
    return [cx.emit1("DYNAMIC_UPDATE_SLICE", [cx.input(node, 0), cx.input(node, 1), _index_input(cx, node, 2)],
                     cx.out(node))]


@lowers("SparseToDense")
def sparse_to_dense(cx: SubgraphLowering, node: Node):
    """SPARSE_TO_DENSE; a later repeated index overwrites, where TF (validate_indices) refuses."""
    values = cx.input(node, 2)
    require_types(cx, node, values, ("FLOAT32", "INT32", "INT64", "INT8", "UINT8"), "SPARSE_TO_DENSE")
    indices, shape = _index_input(cx, node, 0), _index_input(cx, node, 1)
    return [cx.emit1("SPARSE_TO_DENSE", [indices, shape, values, cx.input(node, 3)], cx.out(node))]


@lowers("Bucketize")
def bucketize(cx: SubgraphLowering, node: Node):
    """BUCKETIZE with the same boundaries: bucket i holds [boundaries[i - 1], boundaries[i])."""
    x = cx.input(node, 0)
    require_types(cx, node, x, ("FLOAT32", "INT32", "INT64"), "BUCKETIZE")
    return [cx.emit1("BUCKETIZE", [x], cx.out(node), boundaries=[float(b) for b in node.attrs["boundaries"]])]
