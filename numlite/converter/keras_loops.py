"""Keras 3 LSTM layers recognised in a SavedModel by what their ``while`` loop computes.

A SavedModel exported by Keras 3 (``model.export``, ``tf.saved_model.save``) carries no mark of
its recurrent layers: each LSTM is a generic ``while`` loop over a time-major tensor list. When
the model is converted through :meth:`TFLiteConverter.from_keras_model` numlite sees the layers
(:mod:`numlite.converter.keras_rnn`); from a SavedModel it has only the graph, so this pass
reads the loop itself. A loop is an LSTM layer when:

- its loop variables are a step counter and a time index (both from 0, both +1 per iteration),
  the output list, h, c, and the input list (a ``TensorListFromTensor`` of the time-major
  sequence, passed through unchanged), plus the bounds of a dynamic length;
- its body computes Keras's LSTM cell with the default activations on step ``time`` of the
  input list, ``z = x W + h U (+ b)``, ``i, f, g, o = split(z, 4)``,
  ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``, and writes ``h'`` at
  index ``time`` of the output list (all steps, ``return_sequences``) or at index 0 of a
  one-element list (the last step only). This is checked by value, not by spelling: among the
  body's constant matrices of the right shapes, the weights are those with which the formula
  gives what TensorFlow computes when it runs the body on probe inputs, so whatever rewrite
  TF's optimiser made (a fixed batch turns an add into a BiasAdd of a squeezed product) still
  matches, and another activation, a mask or another cell does not;
- its condition runs every step: ``time < T`` (and ``counter < M`` with ``M >= T``), with T
  the sequence's static length or its length computed at run time.

Such a loop, its input list and its output list's reads are replaced by one
UNIDIRECTIONAL_SEQUENCE_LSTM (:func:`numlite.fusion.keras.lstm_loop`), batch-major when Keras's
transposes around the loop can be dropped, else time-major. Anything else (a masked layer, a
GRU) keeps its loop, and the report says why for every loop that
reads and writes tensor lists as Keras's do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from numlite import fusion as api
import tensorflow as tf

from numlite.converter.fusions import Implements, emit_fusion
from numlite.converter.graph import Graph, Node, Value
from numlite.converter.importer import evaluate_nodes, make_node
from numlite.converter.passes import SIDE_EFFECT_OPS
from numlite.errors import ConversionError
from numlite.fusion.keras import lstm_loop

__all__ = ["fuse_keras_lstm_loops"]

_WHILE_OPS = ("While", "StatelessWhile")
_ADD_OPS = ("AddV2", "Add")
_TIME_MAJOR = [1, 0, 2]
_LENGTH = "the sequence's length"  # a loop bound computed at run time from the sequence's shape


class _NoMatch(Exception):
    """The loop is not a Keras LSTM layer's; the message says what differs."""


def _need(condition: Any, reason: str) -> None:
    if not condition:
        raise _NoMatch(reason)


@dataclass
class _Lstm:
    """What a matched loop computes, in the enclosing graph's values."""

    node: Node  # the While
    sequence: Value  # the time-major input sequence [T, B, I]
    h0: Value
    c0: Value
    kernel: Value
    recurrent_kernel: Value
    bias: Value | None
    slots: dict[str, Any]  # loop variable index by role: counter, time, out, h, c, input; bounds: a list
    all_steps: bool  # return_sequences (the output list holds every step) or the last only


def fuse_keras_lstm_loops(graph: Graph) -> list[str]:
    """Replace every Keras 3 LSTM ``while`` loop in ``graph`` (and the graphs it calls) by one
    fused LSTM op; return report lines, one per Keras-like recurrent loop, fused or not."""
    lines: dict[str, None] = {}  # in order, once (several signatures share a layer)
    for g in list(graph.walk()):
        for node in [n for n in g.nodes if n.op in _WHILE_OPS]:
            if not _keras_like(node):
                continue
            try:
                lstm = _match(g, node)
            except _NoMatch as e:
                lines[f"{_layer_name(node)} (while loop {node.name!r}): not fused: {e}; kept as a WHILE loop"] = None
                continue
            try:
                _replace(g, lstm)
            except ConversionError as e:
                lines[f"{_layer_name(node)} (while loop {node.name!r}): not fused: {e}; kept as a WHILE loop"] = None
                continue
            lines[f"{_layer_name(node)} (while loop {node.name!r}): Keras LSTM fused into "
                  "UNIDIRECTIONAL_SEQUENCE_LSTM"] = None
    return list(lines)


def _keras_like(node: Node) -> bool:
    """A loop that reads one tensor list and writes another, as Keras's RNN loops do."""
    body = node.attrs["body"].graph
    ops = {n.op for n in body.nodes}
    return "TensorListGetItem" in ops and "TensorListSetItem" in ops


def _layer_name(node: Node) -> str:
    """Keras's layer name from the loop's scope (``.../lstm_1/while`` -> ``lstm_1``; tf_keras
    puts the loop of a function it calls in ``.../lstm/PartitionedCall/while``)."""
    parts = [p for p in node.name.split("/") if p not in ("PartitionedCall", "StatefulPartitionedCall")]
    return parts[-2] if len(parts) >= 2 and parts[-1] == "while" else node.name


# -- matching ------------------------------------------------------------------------------------


def _match(g: Graph, node: Node) -> _Lstm:
    body, cond = node.attrs["body"].graph, node.attrs["cond"].graph
    n = len(node.inputs)
    _need(6 <= n <= 8 and len(body.inputs) == n and len(body.outputs) == n,
          f"it has {n} loop variables, a Keras LSTM loop 6 (8 for a dynamic length)")
    slots = _body_slots(body)
    sequence = node.inputs[slots["input"]].node.inputs[0] if node.inputs[slots["input"]].node.op == \
        "TensorListFromTensor" else None
    _need(sequence is not None, "its input list is not made from a tensor")
    _need(sequence.shape is not None and len(sequence.shape) == 3,
          f"its sequence {sequence.name} is not [time, batch, features] (shape {sequence.shape})")
    cell = _match_cell(body, slots, sequence.shape[2], sequence.shape[1])

    def length(value: Value, what: str) -> int | str:
        """A constant, or LENGTH for a value computed as the sequence's length."""
        if value.const is not None and value.const.size == 1:
            return int(value.const)
        k = next((k for k, v in enumerate(cond.inputs) if v is value), None)
        _need(k is not None and k in slots["bounds"] and _is_length_of(node.inputs[k], sequence),
              f"its {what} is neither a constant nor the sequence's length")
        return _LENGTH

    steps = _match_condition(cond, slots, sequence.shape[0], length)
    for role in ("counter", "time"):
        start = node.inputs[slots[role]].const
        _need(start is not None and start.size == 1 and int(start) == 0, f"its {role} does not start at 0")
    reserved = node.inputs[slots["out"]]
    _need(reserved.node.op == "TensorListReserve", "its output list is not a new TensorListReserve")
    size = reserved.node.inputs[1]
    all_steps = cell.pop("all_steps")
    written = size.const is not None and int(size.const) == (steps if all_steps else 1)
    _need(written or (all_steps and steps is _LENGTH and _is_length_of(size, sequence)),
          "its output list's length does not match the steps it writes")
    _check_uses(g, node, slots)
    return _Lstm(node, sequence, node.inputs[slots["h"]], node.inputs[slots["c"]], slots=slots,
                 all_steps=all_steps, **cell)


def _body_slots(body: Graph) -> dict[str, Any]:
    """Which loop variable plays which role, from how the body uses them."""
    index = {id(v): k for k, v in enumerate(body.inputs)}
    sets = [n for n in body.nodes if n.op == "TensorListSetItem"]
    gets = [n for n in body.nodes if n.op == "TensorListGetItem"]
    _need(not any(n.attrs.get("element_dtype") == "bool" for n in gets),
          "it is masked (its body reads a list of mask steps): the fused op cannot skip steps")
    _need(len(sets) == 1 and len(gets) == 1, "its body does not read one list and write one list")
    out_slot = index.get(id(sets[0].inputs[0]))
    in_slot = index.get(id(gets[0].inputs[0]))
    time_slot = index.get(id(gets[0].inputs[1]))
    _need(None not in (out_slot, in_slot, time_slot), "its lists or the step index are not loop variables")
    _need(body.outputs[out_slot] is sets[0].outputs[0], "the written list is not the next output list")
    _need(body.outputs[in_slot] is body.inputs[in_slot], "the input list changes in the loop")
    _need(_plus_one(body.outputs[time_slot], body.inputs[time_slot]), "the time index does not advance by 1")
    # Loop invariants other than the input list: the bounds of a dynamic length, only for the cond.
    bounds = [k for k, (i, o) in enumerate(zip(body.inputs, body.outputs)) if i is o and k != in_slot]
    used = {id(v) for n in body.nodes for v in n.inputs}
    _need(not any(id(body.inputs[k]) in used for k in bounds), "its body reads a loop invariant besides the input")
    rest = [k for k in range(len(body.inputs)) if k not in (out_slot, in_slot, time_slot, *bounds)]
    _need(len(rest) == 3, f"it has {len(rest)} loop variables besides its lists and time, a Keras LSTM 3")
    counters = [k for k in rest if _plus_one(body.outputs[k], body.inputs[k])]
    _need(len(counters) == 1, "it has no step counter")
    states = [k for k in rest if k != counters[0]]
    h_slot = next((k for k in states if sets[0].inputs[2] is body.outputs[k]), None)
    _need(h_slot is not None, "the value it writes is not a loop state (h)")
    c_slot = next(k for k in states if k != h_slot)
    return {"counter": counters[0], "time": time_slot, "out": out_slot, "h": h_slot, "c": c_slot, "input": in_slot,
            "bounds": bounds}


def _plus_one(value: Value, start: Value) -> bool:
    node = value.node
    if node.op not in _ADD_OPS:
        return False
    a, b = node.inputs
    other = b if a is start else a if b is start else None
    return other is not None and other.const is not None and other.const.size == 1 and int(other.const) == 1


def _match_cell(body: Graph, slots: dict[str, Any], n_input: int | None, batch: int | None) -> dict[str, Any]:
    """Keras's LSTM cell in the body, recognised by what it computes: among the body's constant
    matrices (kernel ``[n_input, 4u]``, recurrent kernel ``[u, 4u]``, bias ``[4u]`` or none),
    the ones with which the LSTM formula gives the body's own h and c, and the value it writes,
    on probe inputs TensorFlow runs the body on. Any spelling TF's optimiser chose (a BiasAdd
    for an add, a squeeze and a broadcast) passes; another activation, a mask or another cell
    does not. Returns the weights and whether every step is written."""
    h_prev, c_prev = body.inputs[slots["h"]], body.inputs[slots["c"]]
    units = h_prev.shape[-1] if h_prev.shape else None
    _need(units is not None and n_input is not None, "its state or input width is not static")
    _need(c_prev.shape is not None and c_prev.shape[-1] == units, "its two states are not of one width (h and c)")
    effects = sorted({n.op for n in body.nodes if n.op in SIDE_EFFECT_OPS or n.op in _RANDOM_OPS
                      or any(True for _ in n.functions())})
    _need(not effects, f"its body computes with {', '.join(effects)}, which a fused op cannot")
    setitem = next(n for n in body.nodes if n.op == "TensorListSetItem")
    index = setitem.inputs[1]
    all_steps = index is body.inputs[slots["time"]]
    _need(all_steps or (index.const is not None and int(index.const) == 0),
          "it writes its output at an index other than the step or 0")
    candidates = _candidate_weights(body, n_input, units)
    _need(candidates, f"its body has no constant kernel [{n_input}, {4 * units}] and recurrent kernel "
          f"[{units}, {4 * units}], the weights of a Keras LSTM of {units} units")
    probes = [_probe(body, slots, setitem, n_input, units, batch, seed) for seed in (0, 1)]
    worst = np.inf
    for kernel, recurrent, bias in candidates:
        differences = [_lstm_difference(probe, kernel, recurrent, bias) for probe in probes]
        if max(differences) <= _PROBE_TOLERANCE:
            return {"kernel": kernel, "recurrent_kernel": recurrent, "bias": bias, "all_steps": all_steps}
        worst = min(worst, max(differences))
    raise _NoMatch(f"its body does not compute Keras's LSTM cell (tanh, sigmoid gates) with its weights: on probe "
                   f"inputs its h and c differ from the formula's by {worst:.3g} (another activation, a mask "
                   "or another cell)")


# Probe inputs make values of order one; float32 TF against the float64 formula agree to 1e-6.
_PROBE_TOLERANCE = 1e-4
_PROBE_BATCH = 3  # rows probed when the batch is dynamic
_MAX_CANDIDATES = 64
_RANDOM_OPS = frozenset({"RandomUniform", "RandomStandardNormal", "RandomUniformInt", "TruncatedNormal",
                         "StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessRandomUniform",
                         "StatelessRandomNormal", "Multinomial"})


def _candidate_weights(body: Graph, n_input: int, units: int) -> list[tuple[Value, Value, Value | None]]:
    """(kernel, recurrent kernel, bias or None) from the body's float constants of the right
    shapes, every pairing (a kernel and a recurrent kernel of one shape may be either)."""
    consts = [n.outputs[0] for n in body.nodes if n.op == "Const" and n.outputs[0].dtype == "float32"]
    kernels = [v for v in consts if v.const.shape == (n_input, 4 * units)]
    recurrents = [v for v in consts if v.const.shape == (units, 4 * units)]
    biases: list[Value | None] = [v for v in consts if v.const.shape == (4 * units,)]
    found = [(k, r, b) for k in kernels for r in recurrents if r is not k for b in biases + [None]]
    return found[:_MAX_CANDIDATES]


@dataclass
class _Probe:
    """The body run by TensorFlow on random states and inputs: what it was given and computed."""

    x: np.ndarray  # the step's input, [batch, n_input]
    h: np.ndarray
    c: np.ndarray
    h_next: np.ndarray
    c_next: np.ndarray
    written: np.ndarray  # the value written to the output list


def _probe(body: Graph, slots: dict[str, Any], setitem: Node, n_input: int, units: int, batch: int | None,
           seed: int) -> _Probe:
    """Run the body once: step 1 (or 0) of a random sequence, random h and c."""
    rng = np.random.default_rng(seed)
    rows = batch or _PROBE_BATCH
    steps = 2
    sequence = rng.uniform(-2, 2, (steps, rows, n_input)).astype(np.float32)
    h = rng.uniform(-1, 1, (rows, units)).astype(np.float32)
    c = rng.uniform(-2, 2, (rows, units)).astype(np.float32)
    scratch = Graph("probe")
    element = scratch.make_const(np.array([rows, n_input], np.int32), "probe/element_shape")
    inputs = make_node("TensorListFromTensor", "probe/inputs", [scratch.make_const(sequence, "probe/sequence"), element],
                       {"element_dtype": "dtype:float32", "shape_type": "dtype:int32"}, [("variant", ())])
    outputs = make_node("TensorListReserve", "probe/outputs",
                        [scratch.make_const(np.array([rows, units], np.int32), "probe/out_shape"),
                         scratch.make_const(np.array(steps, np.int32), "probe/steps")],
                        {"element_dtype": "dtype:float32", "shape_type": "dtype:int32"}, [("variant", ())])
    step = scratch.make_const(np.array(1, np.int32), "probe/step")
    given = {body.inputs[slots["input"]]: inputs.outputs[0], body.inputs[slots["out"]]: outputs.outputs[0],
             body.inputs[slots["time"]]: step, body.inputs[slots["counter"]]: step,
             body.inputs[slots["h"]]: scratch.make_const(h, "probe/h"),
             body.inputs[slots["c"]]: scratch.make_const(c, "probe/c")}
    wanted = [body.outputs[slots["h"]], body.outputs[slots["c"]], setitem.inputs[2]]
    missing = [n.op for n in body.nodes if n.source is None and n.op != "Const"]
    _need(not missing, f"its body holds ops TensorFlow cannot run as they are ({', '.join(sorted(set(missing)))})")
    try:
        h_next, c_next, written = evaluate_nodes(scratch, [inputs, outputs, *body.nodes], wanted, given)
    except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
        raise _NoMatch(f"TensorFlow cannot run its body on probe inputs ({type(e).__name__}: "
                       f"{str(e).splitlines()[0][:200]})") from None
    return _Probe(sequence[1], h, c, h_next, c_next, written)


def _lstm_difference(probe: _Probe, kernel: Value, recurrent: Value, bias: Value | None) -> float:
    """How far the body's results are from Keras's LSTM cell with these weights (float64)."""
    def sigmoid(v: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-v))

    z = probe.x.astype(np.float64) @ kernel.const + probe.h.astype(np.float64) @ recurrent.const
    if bias is not None:
        z = z + bias.const
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * probe.c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    if any(np.shape(a) != h.shape for a in (probe.h_next, probe.c_next, probe.written)):
        return np.inf
    scale = 1.0 + np.abs(c)  # relative where c grows, absolute near zero
    return float(max(np.max(np.abs(probe.h_next - h) / scale), np.max(np.abs(probe.c_next - c) / scale),
                     np.max(np.abs(probe.written - h) / scale)))


def _is_length_of(value: Value, sequence: Value) -> bool:
    """Whether ``value`` is computed as the time-major ``sequence``'s length: ``shape(seq)[0]``,
    or ``shape(x)[1]`` for the batch-major ``x`` that Keras transposed into it."""
    node = value.node
    if node.op != "StridedSlice" or node.inputs[0].node.op != "Shape" or node.attrs.get("shrink_axis_mask") != 1:
        return False
    begin, end, strides = (v.const for v in node.inputs[1:4])
    if begin is None or end is None or strides is None or begin.shape != (1,) or int(strides[0]) != 1:
        return False
    index, of = int(begin[0]), node.inputs[0].node.inputs[0]
    if of is sequence:
        return index == 0
    source = sequence.node
    return index == 1 and source.op == "Transpose" and _perm(source) == _TIME_MAJOR and source.inputs[0] is of


def _match_condition(cond: Graph, slots: dict[str, Any], steps: int | None,
                     length: Callable[[Value, str], int | str]) -> int | str:
    """``time < T``, possibly and-ed with ``counter < M`` for ``M >= T``, with T the sequence's
    length (a constant equal to its static length, or the length computed at run time); returns
    T (:data:`_LENGTH` for a length known at run time only)."""
    time, counter = cond.inputs[slots["time"]], cond.inputs[slots["counter"]]
    _need(len(cond.outputs) == 1, "its condition is not one boolean")
    tests = [cond.outputs[0]]
    if tests[0].node.op == "LogicalAnd":
        tests = list(tests[0].node.inputs)
    bounds: dict[str, int | str] = {}
    for test in tests:
        node = test.node
        _need(node.op == "Less" and node.inputs[0] in (time, counter), "its condition is not time < T (and counter < M)")
        role = "time" if node.inputs[0] is time else "counter"
        bounds[role] = length(node.inputs[1], f"{role} bound")
    _need("time" in bounds, "its condition does not bound the time index")
    t, m = bounds["time"], bounds.get("counter", bounds["time"])
    if steps is not None and t is _LENGTH:
        t = steps  # the length computed at run time is the static one
    if steps is not None and m is _LENGTH:
        m = steps
    _need(steps is None or t == steps, f"its condition stops at step {t} of {steps}")
    _need(m == t or (isinstance(m, int) and isinstance(t, int) and m >= t), "its step counter may stop it early")
    return t


def _check_uses(g: Graph, node: Node, slots: dict[str, Any]) -> None:
    """Only the final h, c and the output list (through TensorListStack) may be read."""
    used = {id(v) for n in g.nodes for v in n.inputs} | {id(v) for v in g.outputs}
    for role in ("counter", "time", "input"):
        _need(id(node.outputs[slots[role]]) not in used, f"its final {role} is read after the loop")
    _need(not any(id(node.outputs[k]) in used for k in slots["bounds"]), "its final bounds are read after the loop")
    _need(id(node.outputs[slots["out"]]) not in {id(v) for v in g.outputs}, "its output list leaves the graph")
    readers = [n for n in g.nodes if node.outputs[slots["out"]] in n.inputs]
    _need(all(n.op == "TensorListStack" for n in readers), "its output list is read other than by TensorListStack")


# -- replacing -----------------------------------------------------------------------------------


def _replace(g: Graph, lstm: _Lstm) -> None:
    """The loop's results computed by the fused op; the loop and its lists become dead code."""
    node = lstm.node
    stacks = [n for n in g.nodes if node.outputs[lstm.slots["out"]] in n.inputs]
    consumers = g.consumers()
    readers = [c for s in stacks for c in consumers.get(s.outputs[0], [])]
    batch_sequence, reverse = _batch_major_source(lstm.sequence)
    batch_major = (batch_sequence is not None and all(_reads_as(r, lstm.all_steps) is not None for r in readers)
                   and not any(s.outputs[0] in g.outputs for s in stacks))
    x = batch_sequence if batch_major else lstm.sequence
    reverse = reverse and batch_major
    steps, batch = lstm.sequence.shape[0], lstm.sequence.shape[1]
    units = lstm.recurrent_kernel.shape[0]
    y_shape = (batch, steps, units) if batch_major else (steps, batch, units)
    # The weights are constants of the body: the fused op reads copies in this graph.
    weights = [g.make_const(w.const, f"{node.name}/{w.node.name.rsplit('/', 2)[-2]}")
               for w in (lstm.kernel, lstm.recurrent_kernel, lstm.bias) if w is not None]
    args = [x, lstm.h0, lstm.c0, *weights]
    results = [(y_shape, "sequence"), ((batch, units), "h"), ((batch, units), "c")]
    call = Node("StatefulPartitionedCall", node.name + "/fused", {}, args)
    call.outputs = [Value(call, k, "float32", shape) for k, (shape, _) in enumerate(results)]
    names = ["sequences", "h0", "c0", "kernel", "recurrent_kernel", "bias"][:len(args)]
    callee = Graph(node.attrs["body"].name, inputs=[Value(Node("Placeholder", n, {}, []), 0, a.dtype, a.shape)
                                                     for n, a in zip(names, args)], input_names=names)
    layer = _layer_name(node)

    def fuse(b: api.Builder, *tensors: api.Tensor) -> list[api.Tensor]:
        return lstm_loop(b, *tensors, time_major=not batch_major, reverse=reverse, layer=layer)

    new_nodes, (y, h_final, c_final) = emit_fusion(g, call, callee, Implements("numlite.keras.LSTM loop", {}), fuse,
                                                   f"the loop of {layer} ({node.name!r})")
    mapping = {node.outputs[lstm.slots["h"]]: h_final, node.outputs[lstm.slots["c"]]: c_final}
    if batch_major:
        for r in readers:
            mapping[r.outputs[0]] = y if _reads_as(r, lstm.all_steps) == "sequence" else h_final
    else:
        for s in stacks:
            mapping[s.outputs[0]] = y if lstm.all_steps else _expand_last(g, h_final, new_nodes, s)
    position = g.nodes.index(node)
    g.nodes[position:position] = [w.node for w in weights] + new_nodes
    g.substitute(mapping)


def _batch_major_source(sequence: Value) -> tuple[Value | None, bool]:
    """The batch-major tensor Keras transposed into the time-major ``sequence`` (and whether it
    reversed it in time on the way, for ``go_backwards``), or None if it came otherwise."""
    node, reverse = sequence.node, False
    if node.op == "ReverseV2":
        axis = node.inputs[1].const
        if axis is None or [int(a) for a in np.ravel(axis)] not in ([0], [-3]):
            return None, False
        node, reverse = node.inputs[0].node, True
    if node.op == "Transpose" and _perm(node) == _TIME_MAJOR:
        return node.inputs[0], reverse
    return None, False


def _perm(node: Node) -> list[int] | None:
    perm = node.inputs[1].const if len(node.inputs) == 2 else None
    return None if perm is None else [int(p) for p in perm]


def _reads_as(reader: Node, all_steps: bool) -> str | None:
    """How a reader of the stacked time-major outputs can read the batch-major op instead:
    "sequence" (a transpose back to batch-major), "last" (the last step), or None."""
    if reader.op == "Transpose" and all_steps and _perm(reader) == _TIME_MAJOR:
        return "sequence"
    if reader.op == "StridedSlice" and len(reader.inputs) == 4:
        begin, end, strides = (v.const for v in reader.inputs[1:])
        a = reader.attrs
        if (begin is not None and end is not None and strides is not None and begin.shape == (1,)
                and int(strides[0]) == 1 and a.get("shrink_axis_mask") == 1 and not a.get("ellipsis_mask")
                and not a.get("new_axis_mask") and (int(begin[0]) == -1 or not all_steps)):
            return "last"
    return None


def _expand_last(g: Graph, h: Value, new_nodes: list[Node], stack: Node) -> Value:
    """``h`` as the one-element stacked list [1, batch, units] a last-step-only loop leaves."""
    axis = g.make_const(np.array(0, np.int32), stack.name + "/fused_axis")
    node = Node("ExpandDims", stack.name + "/fused_last", {"T": "float32", "Tdim": "int32"}, [h, axis])
    node.outputs = [Value(node, 0, "float32", (1, *h.shape))]
    new_nodes.extend([axis.node, node])
    return node.outputs[0]
