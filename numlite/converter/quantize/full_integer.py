"""Post-training full-integer quantization, as the official converter does it.

The float model is calibrated first (``calibration.py``: numlite's own interpreter runs it on
the representative dataset and records every float activation's range), then rewritten:

- Activations become int8, asymmetric: the calibrated range widened to include 0, scale
  ``(max - min) / 255``, the zero point solved from whichever end adds the smaller rounding
  error and nudged to an integer (MLIR's fake-quant rule, which the official converter uses). In
  16x8 mode (``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``) they are int16,
  symmetric (zero point 0, scale ``max(|min|, |max|) / 32767``).
- Weights of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and TRANSPOSE_CONV become int8,
  symmetric per output channel (``weights.quantize_symmetric``); their bias int32 (int64 in 16x8
  mode) at scale ``input_scale * weight_scale`` per channel. The official converter quantizes
  FULLY_CONNECTED per channel too.
- Other float constants an integer op reads are quantized per tensor over their own range.
- Ops whose integer kernels need fixed output parameters get them (LOGISTIC and SOFTMAX
  ``1/256``, zero point -128; TANH ``1/128``, 0; ...); ops that only move or select values
  (RESHAPE, pooling, CONCATENATION, PAD, slicing...) share one set of parameters between their
  inputs and outputs, over the range the official converter picks for such a connected group:
  the result's of the last op joining several float operands (a concatenation), else the
  operand's, flowing forward (a slice takes its input's range, not its own).
- The calibrated ranges are first widened as the official converter's calibrator records them:
  LiteRT runs ADD/SUB/MUL/DIV in place, so a single-reader input also shows the output's values
  (``widen_in_place_inputs``).
- The model's float inputs get a QUANTIZE and its float outputs a DEQUANTIZE; with int8 (or
  uint8, int16) inference types the input and output tensors themselves are integer.
- A fused UNIDIRECTIONAL_SEQUENCE_LSTM becomes LiteRT's integer LSTM (int8 in and out, int8
  per-tensor weights, int16 cell state with a power-of-two scale; see ``lstm.py``), its state
  variables' FILLs (numlite zeroes them at each invoke) filling the integer zero.
- An op with no integer kernel in LiteRT stays float between DEQUANTIZE and QUANTIZE with plain
  ``TFLITE_BUILTINS``; with ``TFLITE_BUILTINS_INT8`` (an integer-only target) the conversion fails
  naming each such op and node.

Every subgraph that IF and WHILE call (branches, loop conditions and bodies, nested to any depth)
is quantized with the main one, calibrated inside each call and iteration. A value that crosses a
subgraph boundary is one value quantized once: an IF's operand ``k + 1`` and each branch's input
``k``; its result ``k`` and each branch's output ``k``; a WHILE's operand ``k``, its result ``k``,
the cond's and the body's input ``k`` and the body's output ``k`` (the loop-carried value) share
one set of parameters, over the union of their calibrated ranges, so the IF and WHILE ops carry
integers and LiteRT's control-flow kernels copy them unchanged. An op with fixed output parameters
(TANH...) whose result joins such a value is requantized to the shared parameters (a QUANTIZE from
integer to integer) unless they already cover the value. (The official converter quantizes the
callees' insides too but keeps IF and WHILE float, with a QUANTIZE and a DEQUANTIZE at each
callee's ends; it refuses them in 16x8 mode.) Init subgraphs (CALL_ONCE) stay float.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numlite.converter.optimize import remove_dead_code
from numlite.converter.quantize import lstm
from numlite.converter.quantize.calibration import Range, calibrate
from numlite.converter.quantize.options import QuantizationSettings
from numlite.converter.quantize.weights import nonzero_scales, quantize_symmetric
from numlite.errors import ConversionError
from numlite.model import schema
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Quantization, Subgraph, Tensor

F32 = np.float32

# Ops with constant weights: (activation input, weights input, quantized dimension, bias input).
_WEIGHTED = {
    "CONV_2D": (0, 1, 0, 2),
    "DEPTHWISE_CONV_2D": (0, 1, 3, 2),
    "FULLY_CONNECTED": (0, 1, 0, 2),
    "TRANSPOSE_CONV": (2, 1, 0, 3),
}
# Ops whose integer kernels rescale: their outputs take their own calibrated parameters.
_OWN_RANGE = frozenset({
    "ADD", "SUB", "MUL", "MEAN", "SUM", "SQUARED_DIFFERENCE", "BATCH_MATMUL", "RELU", "RELU6",
    "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "PRELU", "ELU", "ABS", "RSQRT",
})
# Ops whose integer kernels need these output parameters: int8 (scale, zero point), int16 ones.
_FIXED = {
    "LOGISTIC": ((1 / 256, -128), (1 / 32768, 0)),
    "SOFTMAX": ((1 / 256, -128), (1 / 32768, 0)),
    "TANH": ((1 / 128, 0), (1 / 32768, 0)),
    "LOG_SOFTMAX": ((16 / 256, 127), None),
    "L2_NORMALIZATION": ((1 / 128, 0), None),
}
# Ops that move or select values without arithmetic: inputs and outputs share parameters.
SAME_SCALE_OPS = frozenset({
    "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "MAX_POOL_2D", "AVERAGE_POOL_2D", "CONCATENATION",
    "PAD", "PADV2", "MIRROR_PAD", "SLICE", "STRIDED_SLICE", "GATHER", "GATHER_ND", "SPLIT", "SPLIT_V",
    "PACK", "UNPACK", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR",
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "REDUCE_MAX", "REDUCE_MIN", "MAXIMUM", "MINIMUM", "TILE",
    "BROADCAST_TO", "REVERSE_V2", "SELECT", "SELECT_V2",
})
# Ops that read an integer tensor as well as a float one and produce no float.
_PASSIVE = frozenset({"SHAPE", "ARG_MAX", "ARG_MIN"})
# Comparisons of an activation with a constant: the constant takes the activation's parameters,
# as in the official converter's files, so comparing the integers is comparing the values (the
# kernels, LiteRT's and numlite's, rescale both operands anyway). Comparisons of two activations
# stay float (the official converter's choice is not known here).
_COMPARISONS = frozenset({"LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"})
# Ops that call subgraphs whose inputs and outputs carry the operands' values: the options
# fields naming the callees.
_CALLS = {"IF": ("then_subgraph_index", "else_subgraph_index"), "WHILE": ("cond_subgraph_index", "body_subgraph_index")}
# Without 16x8 kernels in LiteRT (int8 only).
_NO_INT16 = frozenset({"LOG_SOFTMAX", "L2_NORMALIZATION", "ELU", "RSQRT", "SQUARED_DIFFERENCE", "SPLIT_V",
                       "MIRROR_PAD", "GATHER_ND", "SELECT", "TILE", "BROADCAST_TO", "PRELU", "HARD_SWISH",
                       *_COMPARISONS})
# The op versions the official converter writes for the integer forms (LiteRT checks none of
# them, but older runtimes read them): (int8, 16x8).
_VERSIONS = {
    "CONV_2D": (3, 4), "DEPTHWISE_CONV_2D": (3, 5), "FULLY_CONNECTED": (4, 7), "TRANSPOSE_CONV": (2, 3),
    "ADD": (2, 3), "SUB": (2, 3), "MUL": (2, 4), "MEAN": (2, 3), "SUM": (2, 2), "AVERAGE_POOL_2D": (2, 3),
    "MAX_POOL_2D": (2, 3), "CONCATENATION": (2, 3), "SOFTMAX": (2, 3), "LOGISTIC": (2, 3), "TANH": (2, 3),
    "PAD": (2, 4), "STRIDED_SLICE": (2, 4), "RELU": (2, 3), "RELU6": (2, 3), "LEAKY_RELU": (1, 2),
    "DEQUANTIZE": (2, 4), "QUANTIZE": (1, 4), "RESHAPE": (1, 1), "MAXIMUM": (2, 4), "MINIMUM": (2, 4),
    "TRANSPOSE": (2, 5), "GATHER": (2, 6), "SLICE": (2, 4), "BATCH_MATMUL": (2, 3), "HARD_SWISH": (1, 1),
    "RESIZE_BILINEAR": (2, 4), "RESIZE_NEAREST_NEIGHBOR": (2, 4), "PACK": (2, 3), "SPLIT": (2, 4),
    **{name: (2, 2) for name in _COMPARISONS},
}
_FLOAT = "FLOAT32"


def quantize_full_integer(model: Model, settings: QuantizationSettings) -> list[str]:
    """Calibrate ``model`` on ``settings.representative_dataset`` and quantize its main subgraph
    and the subgraphs its control flow calls, in place; return lines for the conversion report."""
    if len(model.signature_defs) > 1:
        raise ConversionError("full-integer quantization of a model with several signatures is not supported; "
                              "convert one signature at a time")
    subgraphs = called_subgraphs(model)
    lstms = {(s, n): [] for s in subgraphs for n, op in enumerate(model.subgraphs[s].operators)
             if model.op_name(op) == lstm.LSTM}
    ranges = calibrate(model, settings.representative_dataset, subgraphs, capture=lstms)
    quantizers = {s: _Quantizer(model, s, settings, widen_in_place_inputs(model, ranges[s], s),
                                {n: calls for (c, n), calls in lstms.items() if c == s})
                  for s in subgraphs}
    float_ops, refused = [], []
    for q in quantizers.values():
        names, reasons = q.classify()
        float_ops += names
        refused += reasons
    if refused and settings.integer_only:
        raise ConversionError("full-integer quantization with an integer-only operator set: no integer "
                              "kernel for " + "; ".join(refused)
                              + " (allow float fallback with supported_ops={TFLITE_BUILTINS})")
    _choose_shared_params(model, quantizers)
    for q in quantizers.values():
        q.choose_params()
    for q in quantizers.values():
        q.rewrite()
    remove_dead_code(model)
    kind = "int16 activations (16x8)" if settings.int16_activations else "int8 activations"
    count = sum(len(q.quantized) for q in quantizers.values())
    where = f" in {len(subgraphs)} subgraphs" if len(subgraphs) > 1 else ""
    lines = [f"full integer: {kind}, int8 per-channel weights; {count} ops quantized{where}"]
    if float_ops:
        lines.append("left float (no integer kernel): " + ", ".join(sorted(set(float_ops))))
    return lines


def called_subgraphs(model: Model) -> list[int]:
    """Subgraph 0 and every subgraph IF and WHILE call from it, directly or not (in order)."""
    found, todo = [0], [0]
    while todo:
        for op in model.subgraphs[todo.pop()].operators:
            for callee in _callees(model, op):
                if callee not in found:
                    found.append(callee)
                    todo.append(callee)
    return sorted(found)


def _callees(model: Model, op: Operator) -> list[int]:
    fields = _CALLS.get(model.op_name(op), ())
    return [int(getattr(op.builtin_options, f)) for f in fields] if op.builtin_options is not None else []


def _boundary_links(model: Model, s: int, op: Operator) -> list[list[tuple[int, int]]]:
    """The (subgraph, tensor) pairs holding one value across the subgraph boundaries of a
    control-flow op ``op`` of subgraph ``s``: one list per float value it passes."""
    name = model.op_name(op)
    if name not in _CALLS:
        return []
    indices = _callees(model, op)
    callees = [model.subgraphs[c] for c in indices]
    sg = model.subgraphs[s]
    links = []
    if name == "IF":
        for k, t in enumerate(op.inputs[1:]):
            links.append([(s, t)] + [(c, g.inputs[k]) for c, g in zip(indices, callees)])
        for k, t in enumerate(op.outputs):
            links.append([(s, t)] + [(c, g.outputs[k]) for c, g in zip(indices, callees)])
    else:  # WHILE: operand, result, cond input, body input and body output k are one value
        cond, body = callees
        for k, t in enumerate(op.inputs):
            links.append([(s, t), (s, op.outputs[k]), (indices[0], cond.inputs[k]), (indices[1], body.inputs[k]),
                          (indices[1], body.outputs[k])])
    return [group for group in links
            if group[0][1] >= 0 and sg.tensors[group[0][1]].type == _FLOAT]


def _choose_shared_params(model: Model, quantizers: dict[int, "_Quantizer"]) -> None:
    """Group the float tensors that must share parameters, across all subgraphs: those linked
    through integer same-scale ops, and the values control flow passes between subgraphs. A
    group inside one subgraph gets the range the official converter picks for it (see
    ``_Quantizer._group_params``); a group that crosses a boundary the union of its members'
    ranges. Each quantizer is told its members' parameters."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(key: tuple[int, int]) -> tuple[int, int]:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def link(keys: list[tuple[int, int]]) -> None:
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])

    crossing: set[tuple[int, int]] = set()
    for s, q in quantizers.items():
        for linked in q.same_scale_links():
            link([(s, t) for t in linked])
        for op in q.sg.operators:
            for linked in _boundary_links(model, s, op):
                if all(c in quantizers for c, _ in linked):
                    link(linked)
                    crossing.update(linked)
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for key in parent:
        groups.setdefault(find(key), []).append(key)
    for members in groups.values():
        if not crossing.intersection(members):
            s = members[0][0]
            quantizers[s]._group_params([t for _, t in members])
            continue
        params = _crossing_params(quantizers, members)
        for s, t in members:
            if params is not None:
                quantizers[s].params[t] = params
                quantizers[s].boundary.add(t)


def _crossing_params(quantizers: dict[int, "_Quantizer"], members: list[tuple[int, int]]) -> "_Params | None":
    """The parameters of a value crossing subgraph boundaries: over the union of its members'
    ranges (and constant values), or the fixed parameters of the ops producing it when those
    cover that union to within one step; None (the value stays float) if it was never seen."""
    union = constants = None
    pinned = set()
    for s, t in members:
        q = quantizers[s]
        r = q.ranges.get(t)
        value = q._constant(t)
        if r is not None:
            union = r if union is None else union.union(r)
        elif value is not None and value.size:  # counted only if nothing was calibrated (a
            r = Range(float(value.min()), float(value.max()))  # comparison's threshold must not widen)
            constants = r if constants is None else constants.union(r)
        fixed = q.fixed_output(t)
        if fixed is not None:
            pinned.add(fixed)
    union = union if union is not None else constants
    if union is None or not any(quantizers[s]._is_activation(t) and t in quantizers[s].ranges for s, t in members):
        return None
    if len(pinned) == 1:
        scale, zp = next(iter(pinned))
        low, high = _representable(scale, zp, quantizers[members[0][0]].int16)
        if union.min >= low - scale and union.max <= high + scale:
            return _Params(scale, zp)
    return quantizers[members[0][0]]._from_range(union)


def _representable(scale: float, zero_point: int, int16: bool) -> tuple[float, float]:
    info = np.iinfo(np.int16 if int16 else np.int8)
    return (info.min - zero_point) * scale, (info.max - zero_point) * scale


@dataclass
class _Params:
    """Quantization parameters chosen for one float tensor."""

    scale: float
    zero_point: int


class _Quantizer:
    """Rewrites one subgraph of a float model into its integer form."""

    def __init__(self, model: Model, index: int, settings: QuantizationSettings, ranges: dict[int, Range],
                 lstm_calls: dict[int, list] | None = None) -> None:
        self.model = model
        self.lstm_calls = lstm_calls or {}  # node -> the inputs of each of its calibration runs
        self.lstm_states: dict[int, int] = {}  # state variable -> the integer LSTM's node
        self.index = index
        self.sg: Subgraph = model.subgraphs[index]
        self.settings = settings
        self.int16 = settings.int16_activations
        self.act_type = "INT16" if self.int16 else "INT8"
        self.ranges = ranges
        self.producer: dict[int, int] = {t: n for n, op in enumerate(self.sg.operators) for t in op.outputs}
        self.quantized: set[int] = set()  # node indices of ops rewritten to integer
        self.params: dict[int, _Params] = {}
        self.boundary: set[int] = set()  # integer values crossing subgraph boundaries (shared parameters)
        self.int_version: dict[int, int] = {}
        self.float_version: dict[int, int] = {}

    # -- the steps ------------------------------------------------------------------------------

    def classify(self) -> tuple[list[str], list[str]]:
        """Decide which ops become integer; return the names of the others and why each can't."""
        refused, float_ops = [], []
        where = f"subgraph {self.index}, " if self.index else ""
        for n, op in enumerate(self.sg.operators):
            if self.model.op_name(op) == lstm.LSTM and self._why_float(lstm.LSTM, op) is None:
                for k in (lstm.OUTPUT_STATE, lstm.CELL_STATE):
                    self.lstm_states[op.inputs[k]] = n
        for n, op in enumerate(self.sg.operators):
            name = self.model.op_name(op)
            if not self._touches_float(op):
                continue
            reason = self._why_float(name, op)
            if reason is None:
                self.quantized.add(n)
                continue
            float_ops.append(name)
            refused.append(f"{name} ({where}node {n}, output {self.sg.tensors[op.outputs[0]].name!r}"
                           f"{': ' + reason if reason else ''})" if op.outputs else f"{name} ({where}node {n})")
        return float_ops, refused

    def _touches_float(self, op: Operator) -> bool:
        return any(t >= 0 and self.sg.tensors[t].type == _FLOAT for t in (*op.inputs, *op.outputs))

    def _why_float(self, name: str, op: Operator) -> str | None:
        """Why ``op`` cannot become integer ("" for "no such kernel"), or None if it can."""
        if name in _CALLS:
            return None  # each value it passes is integer or float as its group decides
        if name == lstm.LSTM:
            reason = lstm.unsupported(self.model, self.sg, op, self.int16)
            if reason is None and (op.inputs[0] not in self.ranges or op.outputs[0] not in self.ranges):
                reason = "a tensor the calibration never saw"
            return reason
        if name == "FILL" and op.outputs and op.outputs[0] in self.lstm_states:
            return None  # zeroes an integer LSTM's state
        if self.int16 and name in _NO_INT16:
            return "no 16x8 kernel"
        if name in _COMPARISONS:
            if sum(self._is_activation(t) for t in op.inputs if t >= 0) != 1:
                return "compares two activations" if len(op.inputs) == 2 else ""
            return None if all(t in self.ranges for t in op.inputs if t >= 0 and self._is_activation(t)) \
                else "a tensor the calibration never saw"
        known = name in _WEIGHTED or name in _OWN_RANGE or name in _FIXED or name in SAME_SCALE_OPS or name in _PASSIVE
        if not known or (name in _FIXED and _FIXED[name][self.int16] is None):
            return ""
        if name in _WEIGHTED:
            x, w, _, _ = _WEIGHTED[name]
            if self._constant(op.inputs[w]) is None:
                return "weights computed at run time"
        if any(t >= 0 and self.sg.tensors[t].type == _FLOAT and t not in self.ranges and self._constant(t) is None
               for t in (*op.inputs, *op.outputs)):
            return "a tensor the calibration never saw"
        return None

    # -- parameters -----------------------------------------------------------------------------

    def choose_params(self) -> None:
        """Parameters for every float activation an integer op reads or writes (the shared ones
        are set before, by ``_choose_shared_params``)."""
        for n in sorted(self.quantized):
            op = self.sg.operators[n]
            name = self.model.op_name(op)
            for t in (*op.inputs, *op.outputs):
                if t >= 0 and self._is_activation(t) and t not in self.params and t in self.ranges:
                    self.params[t] = self._from_range(self.ranges[t])
            if name in _FIXED and op.outputs[0] not in self.boundary:
                scale, zp = _FIXED[name][self.int16]
                self.params[op.outputs[0]] = _Params(scale, zp)
            if name == lstm.LSTM:  # the hidden state is the output; the cell state a power of two
                self.params[op.inputs[lstm.OUTPUT_STATE]] = self.params[op.outputs[0]]
                magnitude = lstm.max_cell_magnitude(self.model, self.sg, op, self.lstm_calls.get(n, []))
                self.params[op.inputs[lstm.CELL_STATE]] = _Params(lstm.cell_scale(magnitude), 0)
        for t in (*self.sg.inputs, *self.sg.outputs):  # integer inference types need them
            if t not in self.params and t in self.ranges:
                self.params[t] = self._from_range(self.ranges[t])

    def same_scale_links(self) -> list[list[int]]:
        """The float tensors each integer same-scale op (or comparison) makes share parameters."""
        links = []
        for n in sorted(self.quantized):
            op = self.sg.operators[n]
            name = self.model.op_name(op)
            if name in SAME_SCALE_OPS or name in _COMPARISONS:
                linked = [t for t in (*op.inputs, *op.outputs) if t >= 0 and self.sg.tensors[t].type == _FLOAT]
                if len(linked) > 1:
                    links.append(linked)
        return links

    def fixed_output(self, t: int) -> tuple[float, int] | None:
        """The parameters the integer op producing ``t`` fixes for it, if any."""
        n = self.producer.get(t)
        if n is None or n not in self.quantized:
            return None
        fixed = _FIXED.get(self.model.op_name(self.sg.operators[n]))
        return fixed[self.int16] if fixed is not None and self.sg.operators[n].outputs[0] == t else None

    def _group_params(self, members: list[int]) -> None:
        pinned = {}
        for t in members:
            fixed = self.fixed_output(t)
            if fixed is not None:
                pinned[t] = fixed
        if len(set(pinned.values())) > 1:
            names = ", ".join(repr(self.sg.tensors[t].name) for t in pinned)
            raise ConversionError(f"tensors {names} must share quantization parameters (they meet in a "
                                  "concatenation or selection) but their ops fix different ones")
        if pinned:
            scale, zp = next(iter(pinned.values()))
            params = _Params(scale, zp)
        else:
            params = self._from_range(self._group_range(members))
        for t in members:
            self.params[t] = params

    def _group_range(self, members: list[int]) -> Range:
        """The range a same-scale group is quantized over, as the official converter picks it:
        an op with several float operands (CONCATENATION, MAXIMUM with a constant...) gives its
        operands its result's range (the last such op in the group, the official converter
        propagating backwards); otherwise every op passes its one operand's range forward, so
        the group takes the range of the tensor no op of the group produced."""
        inside = set(members)
        last_joint = None
        source = None
        for n in sorted(self.quantized):
            op = self.sg.operators[n]
            if self.model.op_name(op) in SAME_SCALE_OPS and op.outputs and op.outputs[0] in inside:
                floats = [t for t in op.inputs if t >= 0 and self.sg.tensors[t].type == _FLOAT]
                if len(floats) > 1:
                    last_joint = op.outputs[0]
        if last_joint is not None and last_joint in self.ranges:
            return self.ranges[last_joint]
        produced = {t for n in self.quantized for t in self.sg.operators[n].outputs
                    if self.model.op_name(self.sg.operators[n]) in SAME_SCALE_OPS}
        for t in members:
            if t not in produced and t in self.ranges:
                source = self.ranges[t] if source is None else source.union(self.ranges[t])
        if source is None:  # only constants (or nothing calibrated): their own values
            for t in members:
                value = self._constant(t)
                if value is not None and value.size:
                    r = Range(float(value.min()), float(value.max()))
                    source = r if source is None else source.union(r)
        return source if source is not None else Range(0.0, 0.0)

    def _from_range(self, r: Range) -> _Params:
        if self.int16:
            return _Params(*symmetric_params(r.min, r.max, 32767))
        return _Params(*affine_params(r.min, r.max, -128, 127))

    # -- rewriting ------------------------------------------------------------------------------

    def rewrite(self) -> None:
        """Build the new operator list: integer ops, float ops, and the conversions between."""
        new_ops: list[Operator] = []
        self.emit = new_ops.append
        for t, n in self.lstm_states.items():  # before the FILLs that zero them
            cell = t == self.sg.operators[n].inputs[lstm.CELL_STATE]
            self._make_integer(t, "INT16" if cell else self.act_type)
        for t in self.sg.inputs:
            if t in self.params and self._io_type(t, output=False) != _FLOAT:
                self._integer_input(t)
        for n, op in enumerate(self.sg.operators):
            if n in self.quantized:
                self._rewrite_integer(op)
            else:
                op.inputs = [self._as_float(t) for t in op.inputs]
                self.emit(op)
                for k, t in enumerate(op.outputs):
                    if t in self.sg.outputs and t in self.params and self._io_type(t) != _FLOAT:
                        op.outputs[k] = self._float_to_integer_output(t)
        for k, t in enumerate(self.sg.outputs):  # a callee returning a constant returns it quantized
            if t in self.boundary and self.sg.tensors[t].type == _FLOAT and self._constant(t) is not None:
                self.sg.outputs[k] = self._quantized_constant(t)
        self.sg.operators = new_ops

    def _io_type(self, t: int, output: bool = True) -> str:
        """The type of input or output ``t`` of the subgraph: the inference types for the main
        one; for a callee, integer when the value crossing its boundary is."""
        if self.index == 0:
            return _type_name(self.settings.inference_output_type if output else self.settings.inference_input_type)
        return self.act_type if t in self.boundary else _FLOAT

    def _integer_input(self, t: int) -> None:
        """The caller feeds integers to input ``t``; a QUANTIZE first if not of the ops' type."""
        in_type = self._io_type(t, output=False)
        self._make_integer(t, in_type)
        if in_type == self.act_type:
            self.int_version[t] = t
            return
        inner = self._new_like(t, self.act_type, "_requantized")
        self._set_params(inner, self.params[t])
        self.int_version[t] = inner
        self._convert(t, inner)

    def _rewrite_integer(self, op: Operator) -> None:
        name = self.model.op_name(op)
        weighted = _WEIGHTED.get(name)
        calls = name in _CALLS
        inputs = []
        if name == lstm.LSTM:
            inputs, op.intermediates = self._lstm_inputs(op), self._lstm_intermediates(op)
        elif name == "FILL":  # of an integer LSTM's state: its zero, in the state's type
            inputs = [op.inputs[0], self._filled_value(op.inputs[1], op.outputs[0])]
        for k, t in enumerate(op.inputs if name not in (lstm.LSTM, "FILL") else ()):
            if t < 0 or self.sg.tensors[t].type != _FLOAT and t not in self.int_version:
                inputs.append(t)
            elif calls and t not in self.boundary:
                inputs.append(self._as_float(t))  # a value never calibrated crosses as a float
            elif weighted and k == weighted[1]:
                inputs.append(self._weights(t, weighted[2]))
            elif weighted and k == weighted[3]:
                inputs.append(self._bias(t, op.inputs[weighted[0]], op.inputs[weighted[1]], weighted[2]))
            elif self._constant(t) is not None:
                inputs.append(self._quantized_constant(t))
            else:
                inputs.append(self._as_integer(t))
        op.inputs = inputs
        after = []
        fixed = _FIXED[name][self.int16] if name in _FIXED else None
        for k, t in enumerate(op.outputs):
            if self.sg.tensors[t].type != _FLOAT or (calls and t not in self.boundary):
                continue
            out_type = self._io_type(t) if t in self.sg.outputs else self.act_type
            if out_type != self.act_type:
                inner = self._new_like(t, self.act_type, "_int")
                self._set_params(inner, self.params[t])
                self.int_version[t] = op.outputs[k] = inner
                if out_type != _FLOAT:
                    self._make_integer(t, out_type)
                after.append((inner, t))  # DEQUANTIZE to float, or QUANTIZE to uint8
            else:
                self._make_integer(t, self.act_type)
                self.int_version[t] = t
            if k == 0 and fixed is not None and (self.params[t].scale, self.params[t].zero_point) != fixed:
                # A value shared across a subgraph boundary wider than this op's fixed output
                # range: the op writes its own parameters, then a QUANTIZE rescales.
                own = self._new_like(t, self.act_type, "_fixed")
                self._set_params(own, _Params(*fixed))
                after.insert(0, (own, op.outputs[0]))
                op.outputs[0] = own
        self.emit(op)
        self._bump_version(op)
        for source, target in after:
            self._convert(source, target)

    def _float_to_integer_output(self, t: int) -> int:
        """A model output a float op computes, delivered as an integer: the op writes a new
        float tensor, a QUANTIZE fills ``t``. Returns the tensor the op writes."""
        outer = self._new_like(t, _FLOAT, "_float")
        self.float_version[t] = outer
        out_type = self._io_type(t)
        self._make_integer(t, out_type)
        if out_type == self.act_type:
            self.int_version[t] = t
        self._convert(outer, t)
        return outer

    def _as_integer(self, t: int) -> int:
        """The integer version of activation ``t`` (a QUANTIZE of its float value if needed)."""
        if t not in self.int_version:
            inner = self._new_like(t, self.act_type, "_quantized")
            self._set_params(inner, self.params[t])
            self.int_version[t] = inner
            self._convert(self.float_version.get(t, t), inner)
        return self.int_version[t]

    def _as_float(self, t: int) -> int:
        """The float version of ``t`` for a float op (a DEQUANTIZE if ``t`` became integer)."""
        if t < 0:
            return t
        if t in self.float_version:
            return self.float_version[t]
        if self.sg.tensors[t].type == _FLOAT or t not in self.int_version:
            return t
        outer = self._new_like(t, _FLOAT, "_dequantized")
        self.float_version[t] = outer
        self._convert(self.int_version[t], outer)
        return outer

    def _convert(self, source: int, target: int) -> None:
        """Emit a QUANTIZE (to an integer) or DEQUANTIZE (to float) from ``source`` to ``target``."""
        op_name = "DEQUANTIZE" if self.sg.tensors[target].type == _FLOAT else "QUANTIZE"
        op = Operator(self._opcode(op_name), [source], [target])
        self._bump_version(op)
        self.emit(op)

    # -- the integer LSTM (see lstm.py) ---------------------------------------------------------

    def _lstm_inputs(self, op: Operator) -> list[int]:
        inputs = list(op.inputs)
        inputs[0] = self._as_integer(op.inputs[0])
        x_scale = np.float64(F32(self.params[op.inputs[0]].scale))
        for k in (*lstm.INPUT_WEIGHTS, *lstm.RECURRENT_WEIGHTS):
            if op.inputs[k] >= 0:
                inputs[k] = self._weights(op.inputs[k], None)
        for b, w in zip(lstm.BIASES, lstm.INPUT_WEIGHTS):
            if op.inputs[b] >= 0:
                _, w_scale = quantize_symmetric(self._constant(op.inputs[w]), None, 8)
                scale = (x_scale * nonzero_scales(w_scale).astype(np.float64)).astype(F32)
                q = _round_half_away(self._constant(op.inputs[b]).astype(np.float64) / np.float64(scale[0]))
                info = np.iinfo(np.int32)
                inputs[b] = self._new_constant(op.inputs[b], np.clip(q, info.min, info.max).astype(np.int32), "INT32",
                                               Quantization(scale=scale, zero_point=np.zeros(1, np.int64)))
        return inputs

    def _lstm_intermediates(self, op: Operator) -> list[int]:
        """The four gate intermediates (float, unused without layer normalisation) and the
        effective hidden scale (the output's parameters), each of shape [0]."""
        made = []
        for name in ("input_to_input", "input_to_forget", "input_to_cell", "input_to_output", "effective_hidden_scale"):
            hidden = name == "effective_hidden_scale"
            self.sg.tensors.append(Tensor(f"{name}_intermediate", (0,), self.act_type if hidden else _FLOAT,
                                          quantization=_quantization(self.params[op.outputs[0]]) if hidden else None))
            made.append(len(self.sg.tensors) - 1)
        return made

    def _filled_value(self, value: int, state: int) -> int:
        """FILL's value for an integer state variable: quantized with the state's parameters."""
        params, type_name = self.params[state], self.sg.tensors[state].type
        info = np.iinfo(np.int16 if type_name == "INT16" else np.int8)
        q = np.clip(_round_half_away(self._constant(value).astype(np.float64) / params.scale) + params.zero_point,
                    info.min, info.max)
        return self._new_constant(value, q.astype(info.dtype), type_name, _quantization(params))

    # -- constants ------------------------------------------------------------------------------

    def _weights(self, t: int, axis: int | None) -> int:
        """Symmetric int8 weights, per channel along ``axis`` (None: one scale)."""
        q, scales = quantize_symmetric(self._constant(t), axis, 8)
        return self._new_constant(t, q, "INT8", Quantization(
            scale=nonzero_scales(scales), zero_point=np.zeros(len(scales), np.int64), quantized_dimension=axis or 0))

    def _bias(self, t: int, x: int, w: int, axis: int) -> int:
        """Bias at ``input_scale * weight_scale`` per channel: int32 (int64 in 16x8 mode)."""
        _, w_scales = quantize_symmetric(self._constant(w), axis, 8)
        scales = (np.float64(F32(self.params[x].scale)) * nonzero_scales(w_scales).astype(np.float64)).astype(F32)
        bias = self._constant(t).astype(np.float64)
        dtype = np.int64 if self.int16 else np.int32
        info = np.iinfo(dtype)
        q = np.clip(_round_half_away(bias / scales.astype(np.float64)), info.min, info.max).astype(dtype)
        return self._new_constant(t, q, "INT64" if self.int16 else "INT32", Quantization(
            scale=scales, zero_point=np.zeros(len(scales), np.int64), quantized_dimension=0))

    def _quantized_constant(self, t: int) -> int:
        """A float constant an integer op reads: its group's parameters, else its own range."""
        value = self._constant(t)
        params = self.params.get(t) or self._from_range(Range(float(value.min()), float(value.max())))
        info = np.iinfo(np.int16 if self.int16 else np.int8)
        q = np.clip(_round_half_away(value.astype(np.float64) / params.scale) + params.zero_point, info.min, info.max)
        return self._new_constant(t, q.astype(info.dtype), self.act_type, _quantization(params))

    def _constant(self, t: int) -> np.ndarray | None:
        return self.model.constant(self.sg, t) if t >= 0 else None

    def _is_activation(self, t: int) -> bool:
        return self.sg.tensors[t].type == _FLOAT and self._constant(t) is None

    # -- tensors and operator codes -------------------------------------------------------------

    def _new_constant(self, t: int, value: np.ndarray, type_name: str, quantization: Quantization) -> int:
        self.model.buffers.append(Buffer(np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)))
        source = self.sg.tensors[t]
        self.sg.tensors.append(Tensor(source.name, tuple(source.shape), type_name, buffer=len(self.model.buffers) - 1,
                                      quantization=quantization, shape_signature=source.shape_signature))
        return len(self.sg.tensors) - 1

    def _new_like(self, t: int, type_name: str, suffix: str) -> int:
        source = self.sg.tensors[t]
        self.sg.tensors.append(Tensor(source.name + suffix, tuple(source.shape), type_name,
                                      shape_signature=source.shape_signature, has_rank=source.has_rank))
        return len(self.sg.tensors) - 1

    def _make_integer(self, t: int, type_name: str) -> None:
        """Retype activation ``t`` in place; uint8 shifts the zero point by 128."""
        params = self.params[t]
        if type_name == "UINT8":
            params = _Params(params.scale, params.zero_point + 128)
        self.sg.tensors[t].type = type_name
        self._set_params(t, params)

    def _set_params(self, t: int, params: _Params) -> None:
        self.sg.tensors[t].quantization = _quantization(params)

    def _opcode(self, name: str) -> int:
        for i, code in enumerate(self.model.operator_codes):
            if code.builtin == name:
                return i
        self.model.operator_codes.append(OperatorCode(name))
        return len(self.model.operator_codes) - 1

    def _bump_version(self, op: Operator) -> None:
        code = self.model.operator_codes[op.opcode_index]
        code.version = max(code.version, _VERSIONS.get(code.builtin, (1, 1))[self.int16])


# -- the official calibrator's view of in-place operators ---------------------------------------

# LiteRT lets these ops write their output over an input's memory (the arena planner shares
# input 0, else input 1, with output 0 when the input has no other reader, the same byte size,
# more than 4 bytes, and neither is a model input/output).
_IN_PLACE = ("ADD", "SUB", "MUL", "DIV")


def widen_in_place_inputs(model: Model, ranges: dict[int, Range], subgraph: int = 0) -> dict[int, Range]:
    """The ranges the official converter's calibrator records: it runs the float model in
    LiteRT, whose ADD/SUB/MUL/DIV may compute in place, and it logs an op's inputs after the op
    ran, so an input whose memory the output took is recorded with the output's values too
    (its range becomes the union of both). Reproduced so that numlite picks the official
    converter's parameters: the residual ADDs of MobileNetV2 give the projection convolutions
    feeding them the sum's range this way. ``ranges`` are those of tensors of ``subgraph``."""
    sg = model.subgraphs[subgraph]
    readers: dict[int, int] = {}
    for op in sg.operators:
        for t in op.inputs:
            if t >= 0:
                readers[t] = readers.get(t, 0) + 1
    for t in sg.outputs:
        readers[t] = readers.get(t, 0) + 1
    widened = dict(ranges)
    for op in sg.operators:
        if model.op_name(op) not in _IN_PLACE or not op.outputs or op.outputs[0] in sg.outputs:
            continue
        out = op.outputs[0]
        for t in op.inputs[:2]:
            if _shares_memory(model, sg, t, out, readers):
                if t in ranges and out in ranges:
                    widened[t] = widened[t].union(ranges[out])
                break
    return widened


def _shares_memory(model: Model, sg: Subgraph, t: int, out: int, readers: dict[int, int]) -> bool:
    if t < 0 or t in sg.inputs or model.constant(sg, t) is not None or readers.get(t, 0) > 1:
        return False
    a, b = sg.tensors[t], sg.tensors[out]
    size = int(np.prod(a.shape, dtype=np.int64)) * a.dtype.itemsize
    return a.type == b.type and tuple(a.shape) == tuple(b.shape) and size > 4


# -- parameter arithmetic ---------------------------------------------------------------------


def affine_params(rmin: float, rmax: float, qmin: int, qmax: int) -> tuple[float, int]:
    """Asymmetric ``(scale, zero_point)`` for the range ``[rmin, rmax]`` widened to include 0,
    as MLIR's fake-quant support computes them (in double; the scale is then stored as float32):
    the zero point from whichever end adds the smaller rounding error, nudged to an integer."""
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    if rmax == rmin:
        return 1.0, 0  # an all-zero tensor: any scale represents it exactly
    scale = (rmax - rmin) / (qmax - qmin)
    from_min, from_max = qmin - rmin / scale, qmax - rmax / scale
    error_min, error_max = abs(qmin) + abs(rmin / scale), abs(qmax) + abs(rmax / scale)
    zero = from_min if error_min < error_max else from_max
    nudged = qmin if zero < qmin else qmax if zero > qmax else int(_round_half_away(np.float64(zero)))
    return float(F32(scale)), nudged


def symmetric_params(rmin: float, rmax: float, qmax: int) -> tuple[float, int]:
    """Symmetric ``(scale, 0)`` covering ``[rmin, rmax]`` (16x8 activations)."""
    half = max(abs(float(rmin)), abs(float(rmax)))
    return (float(F32(half / qmax)) if half > 0 else 1.0), 0


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _quantization(params: _Params) -> Quantization:
    return Quantization(scale=np.array([params.scale], np.float32), zero_point=np.array([params.zero_point], np.int64))


def _type_name(dtype: np.dtype) -> str:
    return schema.type_name_of(dtype)
