"""Box selection: NonMaxSuppressionV3/V4/V5 become NON_MAX_SUPPRESSION_V4 (or _V5 with Soft-NMS
scores).

TFLite's ops always pad their outputs to ``max_output_size``, where TF's do only with
``pad_to_max_output_size`` (V3 never): unpadded outputs are the first ``valid_outputs``
entries, cut by a SLICE.
"""

from __future__ import annotations

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input, require_types
from numlite.converter.lowering import SubgraphLowering


@lowers("NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5")
def non_max_suppression(cx: SubgraphLowering, node: Node):
    boxes, scores = cx.input(node, 0), cx.input(node, 1)
    for t in (boxes, scores):
        require_types(cx, node, t, ("FLOAT32",), "NON_MAX_SUPPRESSION")
    inputs = [boxes, scores, int32_input(cx, node, 2), cx.input(node, 3), cx.input(node, 4)]
    padded = bool(node.attrs.get("pad_to_max_output_size", False))
    size = cx.const_input(node, 2)
    length = (int(size.reshape(-1)[0]),) if size is not None else (-1,)
    op, listed = ("NON_MAX_SUPPRESSION_V5", 2) if node.op == "NonMaxSuppressionV5" else ("NON_MAX_SUPPRESSION_V4", 1)
    if node.op == "NonMaxSuppressionV5":
        inputs.append(cx.input(node, 5))
    lists = [cx.out(node, i) if padded else cx.spec(f"{node.name}/padded{i}", length, cx.out(node, i).type)
             for i in range(listed)]
    count = cx.spec(f"{node.name}/valid", (), "INT32") if node.op == "NonMaxSuppressionV3" else cx.out(node, listed)
    results = cx.emit(op, inputs, lists + [count], fold=False)
    if padded:
        return results
    lists, count = results[:listed], results[listed]
    size_vector = cx.emit1("RESHAPE", [count, cx.const(np.array([1], np.int32), f"{node.name}/one")],
                           cx.spec(f"{node.name}/size", (1,), "INT32"))
    begin = cx.const(np.array([0], np.int32), f"{node.name}/begin")
    sliced: list[TensorRef] = [cx.emit1("SLICE", [t, begin, size_vector], cx.out(node, i)) for i, t in enumerate(lists)]
    return sliced if node.op == "NonMaxSuppressionV3" else sliced + [count]
