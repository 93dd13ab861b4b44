"""Element-wise chains fused into the node that produces their input (issue 24, item 1).

A float32 CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED whose output goes only into an
activation computes that activation as it stores its output (its *epilogue*,
:mod:`numlite.jit.kernels.epilogues`), and the activation's nodes emit nothing. The chains:

- ``LOGISTIC``, ``TANH``, ``HARD_SWISH``: the producer's output read by that one node;
- ``SWISH``: read by a LOGISTIC and by a MUL of the producer's output and the LOGISTIC's
  (``x * sigmoid(x)``, as converters write Keras' ``swish``/``silu``: EfficientNet has 65).

The intermediate tensors are then never written. A chain fuses only where nothing else can
tell: its intermediates are read by no other node and are not outputs of the subgraph, every
tensor is float32 and unquantized with one shape, the MUL has no fused activation, and the
chain's nodes come right after the producer in the run order (so its final output is written
where the chain would have written it: no node in between can see the difference).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numlite.interpreter.runtime import SubgraphRuntime

PRODUCERS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})
UNARY = frozenset({"LOGISTIC", "TANH", "HARD_SWISH"})
F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Epilogue:
    """A chain fused into its producer: ``name`` (a key of ``epilogues.CODES``), the nodes it
    replaces (their indices in the subgraph) and the tensor it computes."""

    name: str
    nodes: tuple[int, ...]
    output: int


def find(runtime: "SubgraphRuntime") -> dict[int, Epilogue]:
    """The epilogues of a prepared subgraph, by the index of their producer node."""
    plan, graph = runtime.plan, runtime.graph
    readers: dict[int, list[Any]] = {}
    for step in plan:
        for t in set(step.inputs):
            if t >= 0:
                readers.setdefault(t, []).append(step)
    outputs = set(graph.outputs)
    position = {step.index: k for k, step in enumerate(plan)}

    def plain(t: int) -> bool:  # float32, unquantized, a static shape, held by no one else
        q = graph.tensors[t].quantization
        quantized = q is not None and q.scale is not None and len(q.scale) > 0
        return (runtime.dtypes[t] == F32 and not quantized and runtime.shapes[t] is not None and not runtime.dynamic[t]
                and t not in outputs and not graph.tensors[t].is_variable)  # fmt: skip

    found = {}
    for k, step in enumerate(plan):
        if step.op_name not in PRODUCERS or step.folded or step.dynamic or len(step.outputs) != 1 or not plain(step.outputs[0]):
            continue
        epilogue = _chain(runtime, step.outputs[0], readers, plain)
        if epilogue is not None and sorted(position[n] for n in epilogue.nodes) == list(range(k + 1, k + 1 + len(epilogue.nodes))):
            found[step.index] = epilogue
    return found


def _chain(runtime: "SubgraphRuntime", t: int, readers: dict[int, list[Any]], plain: Any) -> Epilogue | None:
    """The chain reading the producer's output ``t``, if it is one of the fused forms."""
    shape = tuple(runtime.shapes[t])
    steps = readers.get(t, [])
    if any(s.folded or s.dynamic or len(s.outputs) != 1 for s in steps):
        return None

    def same(u: int) -> bool:  # an output of the chain: float32 of the producer's shape
        return u >= 0 and runtime.dtypes[u] == F32 and tuple(runtime.shapes[u] or ()) == shape and not runtime.dynamic[u]

    if len(steps) == 1 and steps[0].op_name in UNARY and steps[0].inputs == [t] and same(steps[0].outputs[0]):
        return Epilogue(steps[0].op_name, (steps[0].index,), steps[0].outputs[0])
    if len(steps) == 2:
        logistic, mul = sorted(steps, key=lambda s: s.op_name != "LOGISTIC")
        sigmoid = logistic.outputs[0]
        if (logistic.op_name == "LOGISTIC" and mul.op_name == "MUL" and logistic.inputs == [t] and sorted(mul.inputs) == sorted([t, sigmoid])
                and sigmoid != t and plain(sigmoid) and readers.get(sigmoid) == [mul] and same(mul.outputs[0])
                and _no_activation(mul)):  # fmt: skip
            return Epilogue("SWISH", (logistic.index, mul.index), mul.outputs[0])
    return None


def _no_activation(step: Any) -> bool:
    options = getattr(step.kernel, "options", None)
    return options is None or getattr(options, "fused_activation_function", 0) == 0
