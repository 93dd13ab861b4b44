"""Tensor lists (``tf.TensorArray``, ``tf.map_fn``, ``tf.scan``) as plain stacked tensors.

TF2 keeps a TensorArray in a ``variant`` tensor that flows through While loops. TFLite has no
builtin for it, so a list of ``n`` elements of shape ``S`` and dtype ``D`` becomes one tensor of
type ``D`` holding the elements as rows: SetItem is a DYNAMIC_UPDATE_SLICE of a row (in a list
of one element, the item itself), GetItem a GATHER, Stack the tensor itself. A reserved list
of zeros is a constant when it is small, else a FILL.

Two layouts, told apart by the stored tensor's first dimension alone, so that a loop body or a
branch, which the control-flow rules give the shape the caller passes, reads the list as the
caller stored it:

- *plain*, ``[n, *S]``, when the length ``n`` is known at conversion time, is not 0 and never
  changes (an RNN's time steps, a fixed-size TensorArray): the first dimension is static.
- *spare row*, ``[n + 1, *S]`` with a zero row first (element ``k`` in row ``k + 1``), for a list
  that may be empty or whose length changes: the first dimension is declared dynamic. Such a
  list is never an empty tensor, which LiteRT cannot run: its WHILE fails to carry an empty
  tensor whose shape changes in the loop (a list that starts empty and grows), and its
  DYNAMIC_UPDATE_SLICE refuses, when the loop body is prepared, to write a row into an empty
  list even if the loop will not run (``tf.map_fn`` over an empty batch).

The rank of the elements must be known when the list is created, but TensorFlow often creates
a list with an unknown element shape that only the writes that follow, inside a loop body,
tell. :func:`_list_facts` follows the list from its creation through every update, loop and
branch to gather those shapes, and to find out whether the list's length can change
(PushBack, PopBack, a write past the end). Dimensions still unknown (a Keras RNN's batch)
start as 1 and are declared dynamic; a write into such a list is a SELECT_V2 that broadcasts
the whole list to the item's dimensions while it writes the item, so the first write fixes
them (one op, where a BROADCAST_TO before a DYNAMIC_UPDATE_SLICE would copy the list once
more in every iteration). TensorFlow lets the elements of such a list differ in shape (an
error only when they are stacked); here they share one: an item that broadcasts to the
list's shape is broadcast, any other fails at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Graph, Node, Shape, Value
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input, shape_tensor
from numlite.converter.lower.nn import reshape
from numlite.converter.lowering import OutSpec, SubgraphLowering, tflite_type
from numlite.converter.passes import CASE_OPS, IF_OPS, WHILE_OPS
from numlite.model import schema

# List ops whose output 0 is a new version of the list they read as input 0.
_UPDATES = frozenset({"TensorListSetItem", "TensorListPushBack", "TensorListPopBack",
                      "TensorListScatterIntoExistingList"})
# List ops that create a list, and which of their inputs is the declared element shape.
_CREATORS = {"TensorListReserve": 0, "EmptyTensorList": 0, "TensorListFromTensor": 1, "TensorListSplit": 1}
# LiteRT's PAD, STRIDED_SLICE and SELECT_V2, which lists go through, take rank 5 at most.
_MAX_LIST_RANK = 5
# A reserved list of zeros this small is a constant, which saves its FILL; a bigger one is
# filled at run time, which costs the model file nothing.
_MAX_CONSTANT_LIST_BYTES = 1024


@dataclass
class _ListFacts:
    """What the uses of a list say about it: its element shape and whether its length changes."""

    element_shape: Shape
    length_varies: bool


# -- following a list through the program ------------------------------------------------------


def _trace(graph: Graph, starts: Sequence[Value], uses: list[Node]) -> set[Value]:
    """The values of ``graph`` that hold the list ``starts`` hold, or a later version of it;
    every node (in this graph or in the functions it calls) reading one is added to ``uses``."""
    readers = graph.consumers()
    carried: set[Value] = set()
    pending = list(starts)
    while pending:
        value = pending.pop()
        if value in carried:
            continue
        carried.add(value)
        for node in readers.get(value, []):
            uses.append(node)
            positions = [k for k, v in enumerate(node.inputs) if v is value]
            if node.op in _UPDATES and positions == [0]:
                pending.append(node.outputs[0])
            elif node.op in WHILE_OPS:
                pending.extend(node.outputs[k] for k in _trace_loop(node, positions, uses))
            elif node.op in IF_OPS or node.op in CASE_OPS:
                pending.extend(node.outputs[k] for k in _trace_branches(node, positions, uses))
    return carried


def _trace_loop(node: Node, positions: list[int], uses: list[Node]) -> set[int]:
    """Loop-variable positions of a While that carry the list entering at ``positions``."""
    body = node.attrs["body"].graph
    carried_positions: set[int] = set()
    todo = set(positions)
    while todo:
        carried_positions |= todo
        inner = _trace(body, [body.inputs[k] for k in todo], uses)
        todo = {k for k, v in enumerate(body.outputs) if v in inner} - carried_positions
    return carried_positions


def _trace_branches(node: Node, positions: list[int], uses: list[Node]) -> set[int]:
    """Output positions of an If or Case whose result may be the list passed at ``positions``
    (input 0 is the condition or branch index, which branches do not receive)."""
    outputs: set[int] = set()
    for ref in node.functions():
        branch = ref.graph
        inner = _trace(branch, [branch.inputs[k - 1] for k in positions if k > 0], uses)
        outputs |= {k for k, v in enumerate(branch.outputs) if v in inner}
    return outputs


def _element_shape_seen(node: Node) -> Shape:
    """The element shape a node that reads the list shows, if it shows one."""
    if node.op == "TensorListSetItem":
        return node.inputs[2].shape
    if node.op == "TensorListPushBack":
        return node.inputs[1].shape
    if node.op == "TensorListGetItem":
        return node.outputs[0].shape
    if node.op == "TensorListPopBack":
        return node.outputs[1].shape
    if node.op in ("TensorListStack", "TensorListGather"):
        shape = node.outputs[0].shape
        return None if shape is None else shape[1:]
    if node.op == "TensorListScatterIntoExistingList":
        shape = node.inputs[1].shape
        return None if shape is None else shape[1:]
    return None


def _changes_length(node: Node) -> bool:
    """Whether a node reading the list makes a version of it with another length."""
    return (node.op in ("TensorListPushBack", "TensorListPopBack")
            or node.op == "TensorListSetItem" and bool(node.attrs.get("resize_if_index_out_of_bounds")))


def _merge(cx: SubgraphLowering, node: Node, a: Shape, b: Shape) -> Shape:
    """The most precise shape compatible with both ``a`` and ``b``."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b)):
        raise cx.fail(node, f"the list's elements have incompatible shapes {list(a)} and {list(b)}")
    return tuple(x if x is not None else y for x, y in zip(a, b))


def _list_facts(cx: SubgraphLowering, node: Node, declared: Shape) -> _ListFacts:
    """Element shape (``declared`` refined by every use) and length behaviour of the list
    ``node`` creates."""
    uses: list[Node] = []
    _trace(cx.graph, [node.outputs[0]], uses)
    shape, varies = declared, False
    for user in uses:
        shape = _merge(cx, node, shape, _element_shape_seen(user))
        varies |= _changes_length(user)
    return _ListFacts(shape, varies)


def _declared_element_shape(value: Value) -> Shape:
    """An element_shape input as a shape: -1 is an unknown dimension, a scalar -1 unknown rank."""
    const = value.const
    if const is None or const.ndim == 0:
        return None
    return tuple(None if d < 0 else int(d) for d in const.reshape(-1))


def _element_shape(cx: SubgraphLowering, node: Node, facts: _ListFacts) -> tuple[int, ...]:
    """The element shape, -1 where a dimension is unknown; its rank must be known."""
    if facts.element_shape is None:
        raise cx.fail(node, "the rank of the list's elements must be known at conversion time, it is unknown")
    return tuple(-1 if d is None else d for d in facts.element_shape)


# -- the stored form ---------------------------------------------------------------------------


def _element_type(cx: SubgraphLowering, node: Node) -> str:
    """The TFLite type of the list's elements."""
    dtype = node.attrs["element_dtype"]
    if dtype == "variant":
        raise cx.fail(node, "lists of lists are not supported")
    return tflite_type(dtype)


def _check_rank(cx: SubgraphLowering, node: Node, element_rank: int) -> None:
    """Refuse elements of a rank the list's ops cannot handle in LiteRT."""
    if 1 + element_rank > _MAX_LIST_RANK:
        raise cx.fail(node, f"elements of rank {element_rank} are not supported "
                            f"(LiteRT's PAD, STRIDED_SLICE and SELECT_V2 take rank {_MAX_LIST_RANK} at most)")


def _list_spec(cx: SubgraphLowering, node: Node, length: int | None, element_shape: Sequence[int], type_: str,
               i: int = 0) -> OutSpec:
    """Spec of output ``i`` of ``node`` holding a list: plain with ``length`` elements, or with a
    spare row when ``length`` is None."""
    return cx.out(node, i, shape=(-1 if length is None else length, *element_shape), type_=type_)


def _list_input(cx: SubgraphLowering, node: Node, i: int = 0) -> TensorRef:
    """The stored tensor of the list read as input ``i``; its rank must be known."""
    stored = cx.input(node, i)
    if stored.shape is None or stored.rank == 0:
        raise cx.fail(node, f"input {i} is not a tensor list of known shape here")
    return stored


def _has_spare_row(stored: TensorRef) -> bool:
    """Whether the list is stored after a spare row (its first dimension is dynamic exactly then)."""
    return stored.shape[0] < 0


def _count(stored: TensorRef) -> int | None:
    """The list's static length, None when it has a spare row."""
    return None if _has_spare_row(stored) else stored.shape[0]


def _every_row_in_order(stored: TensorRef, indices: np.ndarray | None) -> bool:
    """Whether constant ``indices`` are ``0, 1, ..., n-1`` for a plain list of ``n`` elements."""
    n = _count(stored)
    return (n is not None and indices is not None
            and np.array_equal(np.asarray(indices).reshape(-1), np.arange(n)) and np.asarray(indices).ndim == 1)


def _row(cx: SubgraphLowering, index: TensorRef, stored: TensorRef, name: str) -> TensorRef:
    """The row (or rows) of ``stored`` holding element ``index`` (an int32 tensor)."""
    return _plus(cx, index, 1, name) if _has_spare_row(stored) else index


def _dim(cx: SubgraphLowering, tensor: TensorRef, axis: int, name: str) -> TensorRef:
    """Dimension ``axis`` of ``tensor`` as an int32 scalar (a constant when it is static)."""
    if tensor.shape[axis] >= 0:
        return cx.const(np.array(tensor.shape[axis], np.int32), name)
    return _vector_item(cx, shape_tensor(cx, tensor, f"{name}/shape"), axis, name)


def _vector_item(cx: SubgraphLowering, vector: TensorRef, k: int, name: str) -> TensorRef:
    """Element ``k`` of a 1-D tensor, as a scalar."""
    index = lambda v, what: cx.const(np.array([v], np.int32), f"{name}/{what}")  # noqa: E731
    return cx.emit1("STRIDED_SLICE", [vector, index(k, "begin"), index(k + 1, "end"), index(1, "strides")],
                    cx.spec(name, (), vector.type), shrink_axis_mask=1)


def _plus(cx: SubgraphLowering, x: TensorRef, k: int, name: str) -> TensorRef:
    """``x + k`` for an int32 tensor."""
    return cx.emit1("ADD", [x, cx.const(np.array(k, np.int32), f"{name}/addend")], cx.spec(name, x.shape, "INT32"))


def _length(cx: SubgraphLowering, stored: TensorRef, name: str) -> TensorRef:
    """The number of elements, as an int32 scalar."""
    n = _count(stored)
    if n is not None:
        return cx.const(np.array(n, np.int32), name)
    return _plus(cx, _dim(cx, stored, 0, f"{name}/rows"), -1, name)


def _elements(cx: SubgraphLowering, stored: TensorRef, out: OutSpec) -> TensorRef:
    """The elements stacked: the stored tensor itself, or (as ``out``) without its spare row."""
    if not _has_spare_row(stored):
        return stored
    rank = stored.rank
    vector = lambda values, what: cx.const(np.array(values, np.int32), f"{out.name}/{what}")  # noqa: E731
    return cx.emit1("STRIDED_SLICE", [stored, vector([1] + [0] * (rank - 1), "begin"), vector([0] * rank, "end"),
                                      vector([1] * rank, "strides")],
                    out, begin_mask=(1 << rank) - 2, end_mask=(1 << rank) - 1)


def _as_list(cx: SubgraphLowering, node: Node, elements: TensorRef) -> TensorRef:
    """The list whose elements are the rows of ``elements``: the tensor itself when its length
    is static, not 0 and never changes, else the tensor after a spare row."""
    _check_rank(cx, node, elements.rank - 1)
    if elements.shape[0] > 0 and not _list_facts(cx, node, None).length_varies:
        return elements
    paddings = np.zeros((elements.rank, 2), np.int32)
    paddings[0, 0] = 1
    spec = _list_spec(cx, node, None, elements.shape[1:], elements.type)
    # Not folded: a constant would have a static length, the mark of the plain layout.
    return cx.emit("PAD", [elements, cx.const(paddings, f"{node.name}/spare_row")], [spec], fold=False)[0]


def _row_start(cx: SubgraphLowering, index: TensorRef, stored: TensorRef, name: str) -> TensorRef:
    """``[row, 0, ..., 0]``: where element ``index`` starts in ``stored``."""
    first = cx.const(np.eye(1, stored.rank, dtype=np.int32)[0], f"{name}/first_axis")
    return cx.emit1("MUL", [_row(cx, index, stored, f"{name}/row"), first], cx.spec(name, (stored.rank,), "INT32"))


def _as_row(cx: SubgraphLowering, item: TensorRef, out: OutSpec) -> TensorRef:
    """An element as a tensor of one row: ``item[None]``."""
    return cx.emit1("EXPAND_DIMS", [item, cx.const(np.array(0, np.int32), f"{out.name}/axis")], out)


def _positions(cx: SubgraphLowering, stored: TensorRef, name: str) -> TensorRef:
    """The element each row of ``stored`` holds (-1 for a spare row), shaped ``[rows, 1, ..., 1]``
    to broadcast against the list."""
    ones = (1,) * (stored.rank - 1)
    n = _count(stored)
    if n is not None:
        return cx.const(np.arange(n, dtype=np.int32).reshape(n, *ones), name)
    start, step = cx.const(np.array(-1, np.int32), f"{name}/start"), cx.const(np.array(1, np.int32), f"{name}/step")
    positions = cx.emit1("RANGE", [start, _length(cx, stored, f"{name}/length"), step],
                         cx.spec(f"{name}/range", (-1,), "INT32"))
    return reshape(cx, positions, (-1, *ones), name)


def _check_item(cx: SubgraphLowering, node: Node, stored: TensorRef, item: TensorRef) -> None:
    """An element written to a list must have the list's type and element shape."""
    if item.type != stored.type:
        raise cx.fail(node, f"element of type {item.type} written to a list of {stored.type}")
    if item.shape is None or len(item.shape) != stored.rank - 1 or any(
            a >= 0 and b >= 0 and a != b for a, b in zip(item.shape, stored.shape[1:])):
        raise cx.fail(node, f"element of shape {item.shape} written to a list of elements {list(stored.shape[1:])}")


# -- creating lists ----------------------------------------------------------------------------


@lowers("TensorListReserve", "EmptyTensorList")
def reserve(cx: SubgraphLowering, node: Node):
    """Reserve(element_shape, n): n zero elements (TF reads unset elements as zeros).
    EmptyTensorList(element_shape, max_num_elements): no elements yet. Unknown element
    dimensions start as 1, which the first write broadcasts to the item's."""
    type_ = _element_type(cx, node)
    facts = _list_facts(cx, node, _declared_element_shape(node.inputs[0]))
    element_shape = _element_shape(cx, node, facts)
    _check_rank(cx, node, len(element_shape))
    if node.op == "EmptyTensorList":
        count = cx.const(np.array(0, np.int32), f"{node.name}/count")
    else:
        count = int32_input(cx, node, 1)
        if count.rank != 0 or count.value is not None and count.value < 0:
            raise cx.fail(node, "num_elements must be a scalar of at least 0")
    initial = tuple(1 if d < 0 else d for d in element_shape)
    plain = count.value is not None and count.value > 0 and not facts.length_varies
    if plain:
        n = int(count.value)
        zeros = np.zeros((n, *initial), schema.numpy_type(type_))
        if initial == element_shape and zeros.nbytes <= _MAX_CONSTANT_LIST_BYTES:
            return [cx.const(zeros, node.name, type_)]
        dims = cx.const(np.array(zeros.shape, np.int32), f"{node.name}/dims")
    else:
        dims = reshape(cx, _plus(cx, count, 1, f"{node.name}/rows"), (1,), f"{node.name}/rows_vector")
        if initial:
            tail = cx.const(np.array(initial, np.int32), f"{node.name}/element_shape")
            dims_spec = cx.spec(f"{node.name}/dims", (1 + len(initial),), "INT32")
            dims = cx.emit1("CONCATENATION", [dims, tail], dims_spec, axis=0)
    zero = cx.const(np.zeros((), schema.numpy_type(type_)), f"{node.name}/zero", type_)
    spec = _list_spec(cx, node, int(count.value) if plain else None, element_shape, type_)
    # Not folded: zeros cost the model file nothing when made at run time, and a constant
    # would lose the dynamic dimensions.
    return cx.emit("FILL", [dims, zero], [spec], fold=False)


@lowers("TensorListFromTensor")
def from_tensor(cx: SubgraphLowering, node: Node):
    """The list of the rows of a tensor."""
    tensor = cx.input(node, 0)
    if tensor.shape is None or tensor.rank == 0:
        raise cx.fail(node, "the tensor must have a known rank of at least 1")
    return [_as_list(cx, node, tensor)]


@lowers("TensorListSplit")
def split(cx: SubgraphLowering, node: Node):
    """Split(tensor, element_shape, lengths) with equal constant lengths m: the rows of the
    tensor reshaped from [k*m, ...] to [k, m, ...]."""
    tensor = cx.input(node, 0)
    lengths = cx.require_const(node, 2, "lengths").reshape(-1)
    if tensor.shape is None or tensor.rank == 0:
        raise cx.fail(node, "the tensor must have a known rank of at least 1")
    if len(lengths) == 0 or np.any(lengths != lengths[0]):
        raise cx.fail(node, f"only equal lengths can be converted (a list of equal shapes), got {lengths.tolist()}")
    m, count = int(lengths[0]), len(lengths)
    if tensor.shape[0] >= 0 and tensor.shape[0] != m * count:
        raise cx.fail(node, f"lengths sum to {m * count} but the tensor has {tensor.shape[0]} rows")
    if any(d < 0 for d in tensor.shape[1:]):
        raise cx.fail(node, "the tensor's inner dimensions must be static")
    elements = reshape(cx, tensor, (count, m, *tensor.shape[1:]), f"{node.name}/elements")
    return [_as_list(cx, node, elements)]


# -- reading and writing -----------------------------------------------------------------------


@lowers("TensorListSetItem")
def set_item(cx: SubgraphLowering, node: Node):
    """SetItem(list, index, item): in a list of one element the item becomes the list (TF
    requires index 0 there); a list with dynamic element dimensions takes it with a SELECT_V2
    that also broadcasts the list to the item's dimensions; any other with a
    DYNAMIC_UPDATE_SLICE of the row. A write past the end of a list that may grow first pads
    the list with zero rows up to ``index + 1`` elements."""
    stored, index, item = _list_input(cx, node), int32_input(cx, node, 1), cx.input(node, 2)
    _check_item(cx, node, stored, item)
    if index.rank != 0:
        raise cx.fail(node, "the index must be a scalar")
    if node.attrs.get("resize_if_index_out_of_bounds"):
        stored = _grow_to(cx, node, stored, index)
    out = cx.out(node, shape=stored.shape, type_=stored.type)
    if _count(stored) == 1:
        if index.value is not None and int(index.value) != 0:
            raise cx.fail(node, f"index {int(index.value)} is out of range for a list of 1 element")
        return [_as_row(cx, item, out)]
    if any(d < 0 for d in stored.shape[1:]):
        is_index = cx.emit1("EQUAL", [_positions(cx, stored, f"{node.name}/positions"), index],
                            cx.spec(f"{node.name}/is_index", (stored.shape[0],) + (1,) * len(item.shape), "BOOL"))
        return [cx.emit1("SELECT_V2", [is_index, item, stored], out)]
    start = _row_start(cx, index, stored, f"{node.name}/start")
    row = _as_row(cx, item, cx.spec(f"{node.name}/item_row", (1, *item.shape), item.type))
    return [cx.emit1("DYNAMIC_UPDATE_SLICE", [stored, row, start], out)]


def _grow_to(cx: SubgraphLowering, node: Node, stored: TensorRef, index: TensorRef) -> TensorRef:
    """``stored`` padded at the end with zero rows so that it holds element ``index``."""
    name = node.name
    if not _has_spare_row(stored):
        raise cx.fail(node, "the list grows here, but it was given a fixed length where it was created "
                            "(in a function that does not see this write)")
    scalar = lambda what: cx.spec(f"{name}/{what}", (), "INT32")  # noqa: E731
    rows = _dim(cx, stored, 0, f"{name}/rows")
    needed = _plus(cx, index, 2, f"{name}/rows_needed")  # the element's row and the spare row
    new_rows = cx.emit1("MAXIMUM", [needed, rows], scalar("new_rows"))
    extra = cx.emit1("SUB", [new_rows, rows], scalar("extra_rows"))
    after_first = np.zeros((stored.rank, 2), np.int32)
    after_first[0, 1] = 1
    paddings = cx.emit1("MUL", [extra, cx.const(after_first, f"{name}/pad_pattern")],
                        cx.spec(f"{name}/paddings", (stored.rank, 2), "INT32"))
    return cx.emit1("PAD", [stored, paddings], cx.spec(f"{name}/grown", (-1, *stored.shape[1:]), stored.type))


@lowers("TensorListGetItem")
def get_item(cx: SubgraphLowering, node: Node):
    """GetItem(list, index, element_shape): GATHER of one row."""
    stored, index = _list_input(cx, node), int32_input(cx, node, 1)
    if index.rank != 0:
        raise cx.fail(node, "the index must be a scalar")
    row = _row(cx, index, stored, f"{node.name}/row")
    return [cx.emit1("GATHER", [stored, row], cx.out(node, shape=stored.shape[1:], type_=stored.type), axis=0)]


@lowers("TensorListStack")
def stack(cx: SubgraphLowering, node: Node):
    """The elements as one tensor."""
    stored = _list_input(cx, node)
    shape = stored.shape
    expected = node.outputs[0].shape
    if expected is not None and (len(expected) != len(shape) or any(
            e is not None and d >= 0 and e != d for e, d in zip(expected, shape))):
        raise cx.fail(node, f"the list holds {list(shape)} here but TensorFlow stacks it to {list(expected)}")
    return [_elements(cx, stored, cx.out(node, shape=shape, type_=stored.type))]


@lowers("TensorListGather")
def gather(cx: SubgraphLowering, node: Node):
    """Gather(list, indices, element_shape): GATHER of rows."""
    stored, indices = _list_input(cx, node), int32_input(cx, node, 1)
    if _every_row_in_order(stored, indices.value):  # TensorArray.stack() in TF1 graphs
        return [stored]
    rows = _row(cx, indices, stored, f"{node.name}/rows")
    shape = None if indices.shape is None else (*indices.shape, *stored.shape[1:])
    return [cx.emit1("GATHER", [stored, rows], cx.out(node, shape=shape, type_=stored.type), axis=0)]


@lowers("TensorListScatterIntoExistingList")
def scatter_into(cx: SubgraphLowering, node: Node):
    """ScatterIntoExistingList(list, tensor, indices): element ``indices[j]`` becomes ``tensor[j]``
    (the last one wins for a repeated index, as in TF). With constant indices and a static
    length that is one GATHER from the list's rows followed by the tensor's."""
    stored, tensor = _list_input(cx, node), cx.input(node, 1)
    indices = cx.require_const(node, 2, "indices").reshape(-1).astype(np.int64)
    n = _count(stored)
    if n is None:
        raise cx.fail(node, "scattering into a list whose length is not static is not supported")
    if np.any((indices < 0) | (indices >= n)):
        raise cx.fail(node, f"indices {indices.tolist()} are out of range for a list of {n} elements")
    expected = (len(indices), *stored.shape[1:])
    if tensor.type != stored.type or tensor.shape is None or len(tensor.shape) != len(expected) or any(
            d >= 0 and e >= 0 and d != e for d, e in zip(tensor.shape, expected)):
        raise cx.fail(node, f"cannot scatter a {tensor.type}{list(tensor.shape or [])} tensor with "
                            f"{len(indices)} indices into a list of {stored.type}{list(stored.shape[1:])}")
    if _every_row_in_order(stored, indices) and tensor.shape[0] == n:  # TensorArray.unstack()
        return [tensor]
    source = np.arange(n)
    source[indices] = n + np.arange(len(indices))  # later assignments overwrite earlier ones
    # Not folded: numlite's CONCATENATION kernel cannot run outside a model.
    rows = cx.emit("CONCATENATION", [stored, tensor],
                   [cx.spec(f"{node.name}/rows", (n + len(indices), *stored.shape[1:]), stored.type)],
                   fold=False, axis=0)[0]
    picks = cx.const(source.astype(np.int32), f"{node.name}/source_rows")
    return [cx.emit1("GATHER", [rows, picks], cx.out(node, shape=stored.shape, type_=stored.type), axis=0)]


@lowers("TensorListPushBack")
def push_back(cx: SubgraphLowering, node: Node):
    """PushBack(list, item): CONCATENATION of the item as a last row."""
    stored, item = _list_input(cx, node), cx.input(node, 1)
    _check_item(cx, node, stored, item)
    n = _count(stored)
    row = _as_row(cx, item, cx.spec(f"{node.name}/item_row", (1, *item.shape), item.type))
    spec = _list_spec(cx, node, None if n is None else n + 1, stored.shape[1:], stored.type)
    return [cx.emit1("CONCATENATION", [stored, row], spec, axis=0)]


@lowers("TensorListPopBack")
def pop_back(cx: SubgraphLowering, node: Node):
    """PopBack(list, element_shape) -> (list without its last element, the last element): two
    STRIDED_SLICEs. (Popping an empty list, an error in TF, gives zeros.)"""
    stored = _list_input(cx, node)
    rank, name, n = stored.rank, node.name, _count(stored)
    if n == 0:
        raise cx.fail(node, "popping from a list that is always empty")

    def vector(first: int, what: str) -> TensorRef:
        return cx.const(np.array([first] + [0] * (rank - 1), np.int32), f"{name}/{what}")

    strides = cx.const(np.ones(rank, np.int32), f"{name}/strides")
    every_axis = (1 << rank) - 1
    rest = cx.emit1("STRIDED_SLICE", [stored, vector(0, "rest_begin"), vector(-1, "rest_end"), strides],
                    _list_spec(cx, node, None if n is None else n - 1, stored.shape[1:], stored.type),
                    begin_mask=every_axis, end_mask=every_axis - 1)
    last = cx.emit1("STRIDED_SLICE", [stored, vector(-1, "last_begin"), vector(0, "last_end"), strides],
                    cx.out(node, 1, shape=stored.shape[1:], type_=stored.type),
                    end_mask=every_axis, shrink_axis_mask=1)
    return [rest, last]


# -- shapes and concatenation ------------------------------------------------------------------


@lowers("TensorListLength")
def length(cx: SubgraphLowering, node: Node):
    """The number of elements."""
    return [_length(cx, _list_input(cx, node), node.name)]


@lowers("TensorListElementShape")
def element_shape(cx: SubgraphLowering, node: Node):
    """The element shape the list was declared with where it was created (TF reports that, with
    -1 for unknown dimensions, not the shape of the elements)."""
    creator = _creator(node.inputs[0])
    if creator is None:
        raise cx.fail(node, "the list's declared element shape is only known in the function that creates the list")
    declared = creator.inputs[_CREATORS[creator.op]].const
    if declared is None:
        raise cx.fail(node, f"the element shape {creator.name!r} declares is not a constant")
    return [cx.const(declared, node.name, cx.out(node).type)]


def _creator(value: Value) -> Node | None:
    """The node that created the list ``value`` holds, followed back through updates and loops
    within one function (None if the list comes from outside it)."""
    while value.node.op not in _CREATORS:
        node = value.node
        if node.op in _UPDATES:
            value = node.inputs[0]
        elif node.op in WHILE_OPS:
            value = node.inputs[value.index]
        else:
            return None
    return value.node


@lowers("TensorListConcatV2")
def concat(cx: SubgraphLowering, node: Node):
    """ConcatV2(list, element_shape, leading_dims) -> (the elements joined along their first
    axis, each element's first dimension as int64): [n, m, ...] reshaped to [n*m, ...], and a FILL."""
    stored = _list_input(cx, node)
    if stored.rank < 2:
        raise cx.fail(node, "concatenation needs elements of rank 1 or more")
    n, (m, *rest) = _count(stored), stored.shape[1:]
    count = -1 if n is None else n
    rows = count * m if count >= 0 and m >= 0 else -1
    if rows < 0 and any(d < 0 for d in rest):
        raise cx.fail(node, "elements with a dynamic first dimension must have static inner dimensions")
    elements = _elements(cx, stored, cx.spec(f"{node.name}/elements", (count, m, *rest), stored.type))
    target = cx.const(np.array((rows, *rest), np.int32), f"{node.name}/shape")
    joined = cx.emit1("RESHAPE", [elements, target], cx.out(node, 0, shape=(rows, *rest), type_=stored.type))
    count_vector = reshape(cx, _length(cx, stored, f"{node.name}/count"), (1,), f"{node.name}/lengths_shape")
    size = cx.emit1("CAST", [_dim(cx, stored, 1, f"{node.name}/element_rows")],
                    cx.spec(f"{node.name}/element_rows_int64", (), "INT64"))
    lengths = cx.emit1("FILL", [count_vector, size], cx.out(node, 1, shape=(count,)))
    return [joined, lengths]
