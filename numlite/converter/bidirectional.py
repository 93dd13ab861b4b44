"""Two LSTMs over one sequence, one reading it reversed in time, become one
BIDIRECTIONAL_SEQUENCE_LSTM.

A SavedModel keeps no trace of Keras's ``Bidirectional`` wrapper, and tf_keras fuses each of its
layers on its own: after fusion a model holds ::

    y_fw = UNIDIRECTIONAL_SEQUENCE_LSTM(x, ...)
    y_bw = UNIDIRECTIONAL_SEQUENCE_LSTM(REVERSE_V2(x, time axis), ...)

then reverses ``y_bw`` back and merges the two (concatenation, sum, product, average), or takes
each one's last step. BIDIRECTIONAL_SEQUENCE_LSTM computes both in one op, the backward output
aligned with the input: ``bw[t] = y_bw[T - 1 - t]``. So the reverse of ``y_bw`` is ``bw``
itself, the slice of ``y_bw``'s step ``k`` is ``bw``'s step ``-1 - k``, and any other reader
reads ``REVERSE_V2(bw)``. How the directions are merged does not matter: the merge reads the
same values as before.

The pair is grouped only where this is exact: both float, no layer normalisation, the same
activation, clips and layout, directions of the same sizes (LiteRT requires it), and the
operators between the two movable after the grouped one. The op's states are the two LSTMs'
own variable tensors, overwritten with the final states as before; the merged output
(``merge_outputs``) is not used, as in :mod:`numlite.fusion.keras`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numlite.converter.builder import options_for
from numlite.converter.optimize import _new_const, _opcode, remove_dead_code
from numlite.errors import NumliteError
from numlite.kernels import evaluate
from numlite.model.ir import Model, Operator, Options, Subgraph, Tensor

__all__ = ["group_bidirectional_lstms", "group_in_model"]

_LSTM, _BIDI = "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM"
_WEIGHTS = slice(1, 18)  # a unidirectional LSTM's 17 weight operands (gates, peepholes, biases, projection)
_STATES = (18, 19)  # output state h, cell state c
_LAYER_NORM = slice(20, 24)
_AUX_OPERANDS = 9  # the bidirectional op's aux input and its 8 weights, unused
_SIDE_EFFECTS = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE", "WHILE", "IF", "CALL"})


@dataclass
class _Pair:
    forward: Operator
    backward: Operator
    source: int  # the sequence both read (the backward one through a REVERSE_V2)


def group_in_model(model: Model) -> list[str]:
    """Group the pairs of every subgraph, then drop what the grouping left unread; returns a
    line for the conversion report per pair."""
    lines = [line for index in range(len(model.subgraphs)) for line in group_bidirectional_lstms(model, index)]
    if lines:
        remove_dead_code(model)
    return lines


def group_bidirectional_lstms(model: Model, index: int) -> list[str]:
    """Group every forward/backward pair of LSTMs of subgraph ``index``; returns a line per
    pair naming the two LSTMs by their outputs."""
    sg = model.subgraphs[index]
    lines = []
    while (pair := _find_pair(model, sg)) is not None:
        names = [sg.tensors[op.outputs[0]].name for op in (pair.forward, pair.backward)]
        _group(model, sg, pair)
        lines.append(f"LSTMs {names[0]!r} and {names[1]!r} (one reading the other's sequence reversed): "
                     f"grouped into one {_BIDI}")
    return lines


# -- finding pairs -------------------------------------------------------------------------------


def _find_pair(model: Model, sg: Subgraph) -> _Pair | None:
    """A forward/backward pair, the likeliest one first: any such pair computes the same, but
    a Keras Bidirectional layer's two LSTMs are the ones whose results meet in one merge, else
    the closest in the operator order."""
    producer = {t: op for op in sg.operators for t in op.outputs}
    lstms = [op for op in sg.operators if model.op_name(op) == _LSTM and _groupable(model, sg, op)]
    pairs = []
    for backward in lstms:
        reverse = producer.get(backward.inputs[0])
        if reverse is None or not _reverses_time(model, sg, reverse, _time_axis(backward)):
            continue
        pairs += [_Pair(forward, backward, reverse.inputs[0]) for forward in lstms
                  if forward is not backward and forward.inputs[0] == reverse.inputs[0] and _alike(sg, forward, backward)]
    readers = _readers(sg)
    order = {id(op): k for k, op in enumerate(sg.operators)}

    def likelihood(pair: _Pair) -> tuple[bool, int]:
        meet = _near(readers, pair.forward.outputs[0]) & _near(readers, pair.backward.outputs[0])
        return not meet, abs(order[id(pair.forward)] - order[id(pair.backward)])

    return next((pair for pair in sorted(pairs, key=likelihood) if _movable(model, sg, pair) is not None), None)


def _readers(sg: Subgraph) -> dict[int, list[Operator]]:
    readers: dict[int, list[Operator]] = {}
    for op in sg.operators:
        for t in op.inputs:
            readers.setdefault(t, []).append(op)
    return readers


def _near(readers: dict[int, list[Operator]], tensor: int, hops: int = 3) -> set[int]:
    """ids of the operators reading ``tensor`` within ``hops`` operators (a slice or a reverse,
    then the merge)."""
    found: set[int] = set()
    frontier = [tensor]
    for _ in range(hops):
        ops = [op for t in frontier for op in readers.get(t, [])]
        found.update(id(op) for op in ops)
        frontier = [t for op in ops for t in op.outputs]
    return found


def _groupable(model: Model, sg: Subgraph, op: Operator) -> bool:
    """A float LSTM of rank-3 sequences with constant float32 weights (not quantized: a hybrid
    or integer LSTM stays as quantization made it), variable states and no layer norm."""
    o = op.builtin_options
    if o is None or getattr(o, "diagonal_recurrent_tensors", False) or len(sg.tensors[op.inputs[0]].shape) != 3:
        return False
    if any(t >= 0 for t in op.inputs[_LAYER_NORM]) or any(op.inputs[k] < 0 for k in _STATES):
        return False
    if not all(sg.tensors[op.inputs[k]].is_variable for k in _STATES):
        return False
    used = [t for t in op.inputs[:20] if t >= 0] + list(op.outputs)
    weights = [t for t in op.inputs[_WEIGHTS] if t >= 0]
    return all(sg.tensors[t].type == "FLOAT32" and (sg.tensors[t].quantization is None
                                                    or sg.tensors[t].quantization.is_empty()) for t in used) \
        and all(model.constant(sg, t) is not None for t in weights)  # not float16 weights' DEQUANTIZE


def _time_axis(op: Operator) -> int:
    return 0 if op.builtin_options.time_major else 1


def _reverses_time(model: Model, sg: Subgraph, op: Operator, time_axis: int) -> bool:
    if model.op_name(op) != "REVERSE_V2" or len(op.inputs) != 2:
        return False
    axes = model.constant(sg, op.inputs[1])
    return axes is not None and axes.size == 1 and int(axes.reshape(-1)[0]) % 3 == time_axis


def _alike(sg: Subgraph, a: Operator, b: Operator) -> bool:
    """Same options, same optional operands present, and weights of the same shapes."""
    keys = ("fused_activation_function", "cell_clip", "proj_clip", "time_major", "asymmetric_quantize_inputs")
    if any(getattr(a.builtin_options, k) != getattr(b.builtin_options, k) for k in keys):
        return False
    pairs = list(zip(a.inputs[_WEIGHTS], b.inputs[_WEIGHTS]))
    return all((x < 0) == (y < 0) and (x < 0 or sg.tensors[x].shape == sg.tensors[y].shape) for x, y in pairs)


# -- order ---------------------------------------------------------------------------------------


def _movable(model: Model, sg: Subgraph, pair: _Pair) -> list[Operator] | None:
    """The operators between the two LSTMs that use the first one's results (or its states),
    which must move after the grouped op: None if one cannot (the second LSTM needs it, or it
    has side effects)."""
    first, second = sorted((pair.forward, pair.backward), key=sg.operators.index)
    start, end = sg.operators.index(first), sg.operators.index(second)
    tainted = set(first.outputs) | {first.inputs[k] for k in _STATES}
    moved = []
    for op in sg.operators[start + 1:end]:
        if any(t in tainted for t in op.inputs):
            if model.op_name(op) in _SIDE_EFFECTS or any(sg.tensors[t].is_variable for t in op.outputs):
                return None
            moved.append(op)
            tainted.update(op.outputs)
    return None if any(t in tainted for t in second.inputs) else moved


# -- grouping ------------------------------------------------------------------------------------


def _group(model: Model, sg: Subgraph, pair: _Pair) -> None:
    forward, backward = pair.forward, pair.backward
    moved = _movable(model, sg, pair)
    y_bw = backward.outputs[0]
    bw = _new_tensor(sg, sg.tensors[y_bw], "/aligned")
    states = [forward.inputs[k] for k in _STATES] + [backward.inputs[k] for k in _STATES]
    inputs = [pair.source, *forward.inputs[_WEIGHTS], *backward.inputs[_WEIGHTS], *states] + [-1] * _AUX_OPERANDS
    o = forward.builtin_options
    grouped = Operator(_opcode(model, _BIDI), inputs, [forward.outputs[0], bw], options_for(
        _BIDI, fused_activation_function=o.fused_activation_function, cell_clip=o.cell_clip, proj_clip=o.proj_clip,
        merge_outputs=False, time_major=o.time_major, asymmetric_quantize_inputs=o.asymmetric_quantize_inputs))
    after = _read_backward(model, sg, y_bw, bw, _time_axis(forward))
    position = max(sg.operators.index(forward), sg.operators.index(backward))
    kept = [op for op in sg.operators[:position] if op is not forward and op is not backward and op not in moved]
    rest = [op for op in sg.operators[position + 1:]]
    sg.operators = kept + [grouped, *after, *moved] + rest


def _read_backward(model: Model, sg: Subgraph, y_bw: int, bw: int, time_axis: int) -> list[Operator]:
    """Rewire the readers of the backward LSTM's output ``y_bw`` to the aligned ``bw``; returns
    the REVERSE_V2 that still computes ``y_bw`` if some reader needs it as it was."""
    aliases: dict[int, int] = {}
    rest = []
    for op in [op for op in sg.operators if y_bw in op.inputs]:
        if _reverses_time(model, sg, op, time_axis) and op.inputs[0] == y_bw:
            aliases[op.outputs[0]] = bw  # y_bw reversed back is bw
        elif not _read_mirrored_step(model, sg, op, y_bw, bw, time_axis):
            rest.append(op)
    for op in sg.operators:
        op.inputs = [aliases.get(t, t) for t in op.inputs]
    sg.outputs = [aliases.get(t, t) for t in sg.outputs]
    if not rest and y_bw not in sg.outputs:
        return []
    axis = _new_const(model, sg, np.array([time_axis], np.int32), f"{sg.tensors[y_bw].name}/time_axis")
    return [Operator(_opcode(model, "REVERSE_V2"), [bw, axis], [y_bw])]


def _read_mirrored_step(model: Model, sg: Subgraph, op: Operator, y_bw: int, bw: int, time_axis: int) -> bool:
    """A STRIDED_SLICE taking one time step ``k`` of ``y_bw`` (Keras's last output) becomes one
    taking step ``-1 - k`` of ``bw``, when a probe shows the two compute the same."""
    if model.op_name(op) != "STRIDED_SLICE" or op.inputs[0] != y_bw or len(op.inputs) != 4:
        return False
    o = op.builtin_options
    begin, end, strides = (model.constant(sg, t) for t in op.inputs[1:])
    if begin is None or end is None or strides is None or begin.size != 3 or o.ellipsis_mask or o.new_axis_mask \
            or getattr(o, "offset", False) or not (o.shrink_axis_mask >> time_axis) & 1:
        return False
    step = -1 - int(begin[time_axis])
    new_begin, new_end = begin.astype(np.int32).copy(), end.astype(np.int32).copy()
    new_begin[time_axis], new_end[time_axis] = step, step + 1
    options = Options("StridedSliceOptions", **o.fields())
    options.end_mask = o.end_mask | (1 << time_axis) if step == -1 else o.end_mask & ~(1 << time_axis)
    dims = [d if d > 0 else 2 for d in _dims(sg.tensors[y_bw])]
    probe = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    try:
        before = evaluate("STRIDED_SLICE", o, [probe, begin, end, strides])
        after = evaluate("STRIDED_SLICE", options, [np.flip(probe, time_axis), new_begin, new_end, strides])
    except NumliteError:
        return False
    if before is None or after is None or not np.array_equal(before[0], after[0]):
        return False
    name = sg.tensors[op.inputs[1]].name
    op.inputs = [bw, _new_const(model, sg, new_begin, f"{name}/mirrored"),
                 _new_const(model, sg, new_end, f"{name}/mirrored_end"), op.inputs[3]]
    op.builtin_options = options
    return True


# -- tensors and codes -----------------------------------------------------------------------------


def _dims(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape_signature if t.shape_signature is not None else t.shape)


def _new_tensor(sg: Subgraph, like: Tensor, suffix: str) -> int:
    sg.tensors.append(Tensor(like.name + suffix, tuple(like.shape), like.type,
                             shape_signature=None if like.shape_signature is None else tuple(like.shape_signature)))
    return len(sg.tensors) - 1
