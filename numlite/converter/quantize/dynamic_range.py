"""Dynamic-range quantization: int8 weights, float activations quantized on the fly.

What the official converter does with ``optimizations=[Optimize.DEFAULT]`` alone, checked against
its files (TF 2.21), and so numlite:

- Operators with a hybrid kernel in LiteRT get their constant float weights as int8, symmetric
  (zero point 0, values in [-127, 127], rounded as ``weights.quantize_symmetric``):
  FULLY_CONNECTED and CONV_2D per output channel (axis 0), DEPTHWISE_CONV_2D per channel
  (axis 3), BATCH_MATMUL (constant right-hand side) and EMBEDDING_LOOKUP per tensor;
  FULLY_CONNECTED and BATCH_MATMUL also get ``asymmetric_quantize_inputs`` (each input row
  quantized with its own zero point).
- UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM: per tensor, with
  ``asymmetric_quantize_inputs``, all weight matrices or none (the hybrid kernel reads every one
  of them, and the peephole vectors, as int8): the converter quantizes an LSTM only when each of
  its matrices is large enough.
- GATHER of a constant table: the table becomes int8 (per tensor), GATHER moves int8 rows and a
  DEQUANTIZE after it turns them back to float.
- Only weights of at least 1024 elements are quantized; smaller ones stay float (they weigh
  little and their error would cost more than they save).
- A weight several operators read is quantized once per way they need it (two FULLY_CONNECTED
  layers share one int8 tensor); an operator that needs it float (an ADD, a MUL) keeps the float
  tensor, dropped from the file when nothing reads it any more.
- Operator versions are raised as the official converter raises them (FULLY_CONNECTED 12 for
  per-channel hybrid weights, CONV_2D 5, DEPTHWISE_CONV_2D 6, BATCH_MATMUL 4, LSTMs 3, GATHER and
  DEQUANTIZE of int8 2).

The official converter also gives TRANSPOSE_CONV int8 weights; numlite keeps them float (its
interpreter has no hybrid TRANSPOSE_CONV kernel) and says so in the report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from numlite.converter.optimize import remove_dead_code
from numlite.converter.quantize import model_edit as edit
from numlite.converter.quantize.options import QuantizationSettings
from numlite.converter.quantize.weights import quantize_symmetric
from numlite.model.ir import Model, Operator, Quantization, Subgraph

MIN_ELEMENTS = 1024  # the official converter's minimum_elements_for_weights


@dataclass(frozen=True)
class Hybrid:
    """How one operator type takes int8 weights."""

    weights: tuple[int, ...]  # inputs holding weight matrices (absent ones are skipped)
    axis: int | None  # per-channel axis of the weights; None: one scale per tensor
    version: int  # the operator version the official converter writes for the hybrid form
    asymmetric_inputs: bool = False  # sets the options' asymmetric_quantize_inputs
    all_or_none: bool = False  # the kernel reads every weight as int8 or none
    vectors: tuple[int, ...] = ()  # quantized along with the matrices whatever their size
    dequantize_output: bool = False  # the op moves int8 values; a DEQUANTIZE follows it
    activation: int | None = 0  # the float input a hybrid kernel quantizes on the fly

    @property
    def scheme(self) -> str:
        return "per channel" if self.axis is not None else "per tensor"


# LSTM inputs (TFLite's order): 1-8 input and recurrent weights, 9-11 peepholes, 16 projection;
# the bidirectional op repeats them for the backward direction at 18-25, 26-28, 33 and has the
# auxiliary-input weights at 40-47.
_LSTM = Hybrid(tuple(range(1, 9)) + (16,), None, 3, True, True, (9, 10, 11))
_BILSTM = Hybrid(tuple(range(1, 9)) + (16,) + tuple(range(18, 26)) + (33,) + tuple(range(40, 48)),
                 None, 3, True, True, (9, 10, 11, 26, 27, 28))

HYBRID: dict[str, Hybrid] = {
    "FULLY_CONNECTED": Hybrid((1,), 0, 12, asymmetric_inputs=True),
    "CONV_2D": Hybrid((1,), 0, 5),
    "DEPTHWISE_CONV_2D": Hybrid((1,), 3, 6),
    "BATCH_MATMUL": Hybrid((1,), None, 4, asymmetric_inputs=True),
    "EMBEDDING_LOOKUP": Hybrid((1,), None, 1, activation=None),
    "GATHER": Hybrid((0,), None, 2, dequantize_output=True, activation=None),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _LSTM,
    "BIDIRECTIONAL_SEQUENCE_LSTM": _BILSTM,
}
# Ops the official converter quantizes that numlite keeps float, and why.
KEPT_FLOAT = {"TRANSPOSE_CONV": "numlite's interpreter has no hybrid TRANSPOSE_CONV kernel"}


def quantize_dynamic_range(model: Model, settings: QuantizationSettings) -> list[str]:
    """Give the weights of every hybrid-capable operator int8 values in place (see the module
    docstring); return lines for the conversion report."""
    before = edit.constant_bytes(model)
    done: Counter = Counter()
    small: Counter = Counter()
    kept: Counter = Counter()
    for sg in model.subgraphs:
        _quantize_subgraph(model, sg, done, small, kept)
    remove_dead_code(model)  # the float weights nothing reads any more
    return _report(done, small, kept, before, edit.constant_bytes(model))


def _quantize_subgraph(model: Model, sg: Subgraph, done: Counter, small: Counter, kept: Counter) -> None:
    """Quantize the weights of ``sg``'s hybrid-capable operators; count what happened."""
    requests: dict[int, list[tuple[edit.Use, int | None]]] = {}  # tensor -> (reader, axis)
    chosen: list[tuple[int, Operator, Hybrid]] = []
    for node, op in enumerate(sg.operators):
        name = model.op_name(op)
        rule = HYBRID.get(name)
        if rule is None:
            if name in KEPT_FLOAT and _large_weight(model, sg, op):
                kept[name] += 1
            continue
        slots = _weight_slots(model, sg, op, rule)
        if slots is None:
            continue
        if not slots:
            small[name] += 1
            continue
        for slot in slots:
            requests.setdefault(op.inputs[slot], []).append((edit.Use(op, node, slot), rule.axis))
        chosen.append((node, op, rule))
        done[(name, rule.scheme)] += 1
    readers = edit.uses(sg)
    for tensor, wanted in requests.items():
        _quantize_tensor(model, sg, tensor, wanted, len(readers.get(tensor, [])))
    after: dict[int, list[Operator]] = {}
    for node, op, rule in chosen:
        edit.require_version(model, op, rule.version)
        if rule.asymmetric_inputs:
            op.builtin_options.asymmetric_quantize_inputs = True
        if rule.dequantize_output:
            after[node] = [_int8_output(model, sg, op)]
    if after:
        sg.operators = [new for node, op in enumerate(sg.operators) for new in [op] + after.get(node, [])]


def _weight_slots(model: Model, sg: Subgraph, op: Operator, rule: Hybrid) -> list[int] | None:
    """The inputs of ``op`` to quantize: None if the op cannot take int8 weights at all (a weight
    is not a float constant, the activations are not float), [] if its weights are too small."""
    if sg.tensors[op.outputs[0]].type != "FLOAT32":
        return None
    if rule.activation is not None and sg.tensors[op.inputs[rule.activation]].type != "FLOAT32":
        return None
    present = [s for s in rule.weights if s < len(op.inputs) and op.inputs[s] >= 0]
    values = {s: edit.float_constant(model, sg, op.inputs[s]) for s in present}
    if any(v is None or (rule.axis is not None and v.ndim <= rule.axis) for v in values.values()):
        return None
    large = [s for s in present if values[s].size >= MIN_ELEMENTS]
    if not rule.all_or_none:
        return large
    if len(large) < len(present) or not present:
        return []
    vectors = [s for s in rule.vectors if s < len(op.inputs) and op.inputs[s] >= 0]
    if any(edit.float_constant(model, sg, op.inputs[s]) is None for s in vectors):
        return None
    return present + vectors


def _large_weight(model: Model, sg: Subgraph, op: Operator) -> bool:
    """Whether ``op`` reads a float constant the official converter would quantize."""
    return any(t >= 0 and (v := edit.float_constant(model, sg, t)) is not None and v.size >= MIN_ELEMENTS
               for t in op.inputs)


def _quantize_tensor(model: Model, sg: Subgraph, tensor: int, wanted: list[tuple[edit.Use, int | None]],
                     readers: int) -> None:
    """Give the readers in ``wanted`` int8 copies of float constant ``tensor``, one per axis;
    when they are all its readers and want one axis, the tensor itself becomes int8."""
    value = model.constant(sg, tensor)
    t = sg.tensors[tensor]
    axes = sorted({axis for _, axis in wanted}, key=lambda a: -1 if a is None else a)
    for axis in axes:
        q, scales = quantize_symmetric(value, axis)
        quantization = Quantization(scale=scales, zero_point=np.zeros(len(scales), np.int64),
                                    quantized_dimension=axis or 0)
        if len(axes) == 1 and readers == len(wanted):
            t.quantization = quantization
            edit.set_data(model, t, q)
            return
        suffix = "" if axis is None else f"_axis{axis}"
        copy = edit.add_constant(model, sg, q, f"{t.name}/int8{suffix}", quantization)
        for use, use_axis in wanted:
            if use_axis == axis:
                use.op.inputs[use.slot] = copy


def _int8_output(model: Model, sg: Subgraph, op: Operator) -> Operator:
    """Make ``op`` (a GATHER of an int8 table) write int8 rows with the table's scale, and
    return the DEQUANTIZE that writes its former float output."""
    table = sg.tensors[op.inputs[0]]
    out = op.outputs[0]
    rows = edit.add_activation(sg, sg.tensors[out], f"{sg.tensors[out].name}/int8", "INT8",
                               Quantization(scale=table.quantization.scale.copy(),
                                            zero_point=table.quantization.zero_point.copy()))
    op.outputs[0] = rows
    return edit.dequantize_op(model, rows, out, version=2)


def _report(done: Counter, small: Counter, kept: Counter, before: int, after: int) -> list[str]:
    if not done:
        lines = [f"dynamic range: nothing quantized (no operator with int8-capable weights of "
                 f"{MIN_ELEMENTS} or more elements)"]
    else:
        parts = [f"{name} x{n} ({scheme})" for (name, scheme), n in done.items() if name != "GATHER"]
        lines = []
        if parts:
            lines.append("dynamic range: int8 weights (symmetric) for " + ", ".join(parts))
        if done[("GATHER", "per tensor")]:
            lines.append(f"dynamic range: GATHER x{done[('GATHER', 'per tensor')]} reads an int8 table "
                         "(per tensor), a DEQUANTIZE after it")
    if small:
        lines.append(f"dynamic range: kept float, weights under {MIN_ELEMENTS} elements: "
                     + ", ".join(f"{name} x{n}" for name, n in small.items()))
    for name, n in kept.items():
        lines.append(f"dynamic range: kept float: {name} x{n} ({KEPT_FLOAT[name]})")
    lines.append(f"dynamic range: constant data {edit.kib(before)} -> {edit.kib(after)}")
    return lines
