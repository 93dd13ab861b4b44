"""Reductions: Sum, Mean, Max, Min, Prod, Any and All over axes, ArgMax and ArgMin along one.

TensorFlow's axes (int32 or int64, a scalar or a list, negative values counting from the end)
become the int32 axis tensor TFLite's reducers read; ``keep_dims`` is their option of the same
name. Reducing over no axes returns the input itself, as TensorFlow does.
"""

from __future__ import annotations

import numpy as np

from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input, require_types
from numlite.converter.lowering import SubgraphLowering
from numlite.model import schema

_NUMBERS = ("FLOAT32", "INT32", "INT64")

# TF op -> (TFLite builtin, the input types LiteRT's kernel takes without quantization).
_REDUCERS = {
    "Sum": ("SUM", _NUMBERS), "Mean": ("MEAN", _NUMBERS), "Max": ("REDUCE_MAX", _NUMBERS),
    "Min": ("REDUCE_MIN", _NUMBERS), "Prod": ("REDUCE_PROD", _NUMBERS),
    "Any": ("REDUCE_ANY", ("BOOL",)), "All": ("REDUCE_ALL", ("BOOL",)),
}  # fmt: skip

# LiteRT's ARG_MAX/ARG_MIN read float32, integers of 8 and 32 bits and bool (which TensorFlow's
# ArgMax does not take), but not int64 or int16.
_ARG_TYPES = ("FLOAT32", "INT32", "INT8", "UINT8")


@lowers(*_REDUCERS)
def reduce(cx: SubgraphLowering, node: Node):
    x = cx.input(node, 0)
    op, types = _REDUCERS[node.op]
    require_types(cx, node, x, types, op)
    axes = cx.const_input(node, 1)
    if axes is not None and axes.size == 0:
        return [x]
    keep_dims = bool(node.attrs.get("keep_dims", False))
    return [cx.emit1(op, [x, int32_input(cx, node, 1)], cx.out(node), keep_dims=keep_dims)]


@lowers("ArgMax", "ArgMin")
def arg_extremum(cx: SubgraphLowering, node: Node):
    """ARG_MAX / ARG_MIN; both pick the first index among equal values, as TensorFlow does."""
    x = cx.input(node, 0)
    op = "ARG_MAX" if node.op == "ArgMax" else "ARG_MIN"
    require_types(cx, node, x, _ARG_TYPES, op)
    out = cx.out(node)
    if out.type not in ("INT32", "INT64"):
        raise cx.fail(node, f"output_type {out.type} is not supported (LiteRT's {op} gives INT32 or INT64)")
    return [cx.emit1(op, [x, int32_input(cx, node, 1)], out, output_type=schema.TENSOR_TYPE_CODES[out.type])]


_SEGMENT_TYPES = ("FLOAT32", "INT32")


@lowers("SegmentSum", "UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd")
def segment_reduction(cx: SubgraphLowering, node: Node):
    """SEGMENT_SUM or UNSORTED_SEGMENT_SUM/MAX/MIN/PROD (``num_segments`` rows) over the
    data's rows: LiteRT takes a vector of int32 ids, one per row. LiteRT's SEGMENT_SUM wants
    ids that start at 0 and grow by 0 or 1 where TF allows any sorted ids (a skipped id is a
    row of zeros): constant ids that skip one become an UNSORTED_SEGMENT_SUM of ``last + 1``
    rows; ids known only at run time stay a SEGMENT_SUM, which then refuses gaps."""
    data, ids = cx.input(node, 0), int32_input(cx, node, 1)
    op = "SEGMENT_SUM" if node.op == "SegmentSum" else "UNSORTED_SEGMENT_" + node.op[len("UnsortedSegment"):].upper()
    require_types(cx, node, data, _SEGMENT_TYPES, op)
    if ids.rank is not None and ids.rank != 1:
        raise cx.fail(node, f"LiteRT's {op} takes one segment id per row (a vector), not ids of rank {ids.rank}")
    if node.op != "SegmentSum":
        return [cx.emit1(op, [data, ids, int32_input(cx, node, 2)], cx.out(node))]
    if ids.value is not None and ids.value.size and (ids.value[0] != 0 or np.any(np.diff(ids.value) > 1)):
        count = cx.const(np.array(int(ids.value[-1]) + 1, np.int32), f"{node.name}/segments")
        return [cx.emit1("UNSORTED_SEGMENT_SUM", [data, ids, count], cx.out(node))]
    return [cx.emit1(op, [data, ids], cx.out(node))]
