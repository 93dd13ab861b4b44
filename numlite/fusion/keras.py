"""Fusions of Keras 3 recurrent layers, for the functions :mod:`numlite.converter.keras_rnn`
marks while it traces a Keras model.

- :data:`LSTM` ``fn(sequences, [h0, c0,] kernel, recurrent_kernel[, bias])`` becomes one
  UNIDIRECTIONAL_SEQUENCE_LSTM: Keras's kernel ``[n_input, 4 * units]`` and recurrent kernel
  ``[units, 4 * units]`` hold the gates in the order input, forget, cell, output, the fused op's
  order, so each is transposed and split in four (bias split the same way); the ops doing it
  fold at conversion time. ``go_backwards`` reverses the input in time (Keras then returns the
  outputs in the order it processed them, as the op does), ``return_sequences=False`` keeps
  the last step, ``return_state`` adds the final states.
- :data:`BIDIRECTIONAL_LSTM` ``fn(sequences, [fw_h0, fw_c0, bw_h0, bw_c0,] *fw_weights,
  *bw_weights)`` becomes one BIDIRECTIONAL_SEQUENCE_LSTM (its backward outputs are aligned with
  the input, as Keras's flipped backward sequence), its two outputs merged by one op
  (CONCATENATION, ADD, MUL; ADD and DIV for ave). Not the op's own ``merge_outputs``: LiteRT's
  kernel gets batch-major merged outputs wrong beyond the second batch row.
- :data:`SIMPLE_RNN` ``fn(sequences, [h0,] kernel, recurrent_kernel[, bias])`` becomes one
  UNIDIRECTIONAL_SEQUENCE_RNN (tanh or relu).

The initial states are arguments unless the attribute ``zero_state`` says they are zeros (a
stateless layer's default): the fusion then makes them itself (:func:`zero_state_of`). Keras
computes no clipping, so the ops get none. This module never imports TensorFlow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.fusion import Builder, Tensor, register
from numlite.fusion.rnn import GATES, lstm_op, lstm_op_with_states, zeros_like_batch

__all__ = ["BIDIRECTIONAL_LSTM", "LSTM", "SIMPLE_RNN"]

LSTM = "numlite.keras.LSTM"
BIDIRECTIONAL_LSTM = "numlite.keras.Bidirectional"
SIMPLE_RNN = "numlite.keras.SimpleRNN"

_ACTIVATIONS = {"relu": 1, "tanh": 4}  # Keras's name -> TFLite's ActivationFunctionType
_TANH = _ACTIVATIONS["tanh"]


# -- weight layout ----------------------------------------------------------------------------------


def _transposed(b: Builder, w: Tensor, name: str) -> Tensor:
    rows, cols = w.shape
    return b.op("TRANSPOSE", [w, np.array([1, 0], np.int32)], outputs=[b.spec((cols, rows), w.dtype, name)])


def _split(b: Builder, w: Tensor, parts: int, name: str) -> list[Tensor]:
    """``w`` cut in ``parts`` equal pieces along axis 0."""
    b.require(w.shape is not None and w.shape[0] is not None and w.shape[0] % parts == 0,
              f"{name} of shape {w.shape} does not split in {parts} along its first axis")
    piece = (w.shape[0] // parts, *w.shape[1:])
    specs = [b.spec(piece, w.dtype, f"{name}_{k}") for k in range(parts)]
    out = b.op("SPLIT", [np.array(0, np.int32), w], outputs=specs, num_splits=parts)
    return out if isinstance(out, list) else [out]


def _static(b: Builder, t: Tensor, rank: int, what: str) -> tuple[int, ...]:
    b.require(t.shape is not None and len(t.shape) == rank and None not in t.shape,
              f"{what} must have a static shape of rank {rank}, it has {t.shape}")
    return tuple(t.shape)


def _gate_weights(b: Builder, kernel: Tensor, recurrent: Tensor, bias: Tensor | None, name: str) -> dict[str, Any]:
    """Keras's packed LSTM weights as the fused op's operands (gate order i, f, c, o in both)."""
    n_input, four_units = _static(b, kernel, 2, f"{name}: the kernel")
    units = four_units // 4
    b.require(four_units == 4 * units, f"{name}: the kernel has {four_units} columns, not 4 * units")
    b.require(_static(b, recurrent, 2, f"{name}: the recurrent kernel") == (units, four_units),
              f"{name}: the recurrent kernel must be [{units}, {four_units}], it is {list(recurrent.shape)}")
    weights: dict[str, Any] = {}
    for g, w in zip(GATES, _split(b, _transposed(b, kernel, f"{name}/kernel_t"), 4, f"{name}/kernel")):
        weights[f"input_to_{g}_weights"] = w
    for g, w in zip(GATES, _split(b, _transposed(b, recurrent, f"{name}/recurrent_t"), 4, f"{name}/recurrent")):
        weights[f"recurrent_to_{g}_weights"] = w
    if bias is None:
        biases: list[Any] = [np.zeros(units, np.float32)] * 4  # x + 0 is x: no bias is a zero bias
    else:
        b.require(_static(b, bias, 1, f"{name}: the bias") == (four_units,),
                  f"{name}: the bias must have {four_units} values, it has shape {list(bias.shape)}")
        biases = _split(b, bias, 4, f"{name}/bias")
    for g, v in zip(GATES, biases):
        weights[f"{g}_gate_bias"] = v
    return weights


# -- time steps -------------------------------------------------------------------------------------


def _reversed_in_time(b: Builder, x: Tensor, name: str) -> Tensor:
    return b.op("REVERSE_V2", [x, np.array([1], np.int32)], outputs=[b.spec(x.shape, x.dtype, f"{name}/reversed")])


def _step(b: Builder, y: Tensor, index: int, name: str) -> Tensor:
    """``y[:, index, :]`` of a batch-major sequence (``index`` -1 for the last step)."""
    begin, end = [0, index, 0], [0, index + 1 if index != -1 else 0, 0]
    return b.op("STRIDED_SLICE", [y, np.array(begin, np.int32), np.array(end, np.int32), np.ones(3, np.int32)],
                outputs=[b.spec((y.shape[0], y.shape[2]), y.dtype, name)],
                begin_mask=0b101, end_mask=0b101 | (0b010 if index == -1 else 0), shrink_axis_mask=0b010)


def zero_state_of(b: Builder, x: Tensor, units: int, name: str) -> Tensor | None:
    """Zeros ``[batch, units]`` for a state of an op reading the batch-major sequence ``x``:
    None for a static batch (the op's own zero variables do), else made from ``x``'s shape
    (:func:`numlite.fusion.rnn.zeros_like_batch`), so LiteRT sizes the state tensors right when
    it first allocates them (they are allocated once; a FILL of a computed shape would only be
    sized at run time, too late)."""
    return None if x.shape[0] is not None else zeros_like_batch(b, x, 0, units, name)


def _state_variable(b: Builder, x: Tensor, initial: Tensor | None, units: int, name: str) -> Tensor:
    """A state operand: set to ``initial``, or to zeros, before every run."""
    if initial is None:
        initial = zero_state_of(b, x, units, name)
    return b.variable((x.shape[0], units), "float32", initial=initial, name=name)


# -- LSTM -------------------------------------------------------------------------------------------


def _arguments(b: Builder, args: tuple, states: int, weights: int, zero: bool, layer: str) -> tuple[list, list]:
    """The function's arguments after the sequences: initial states (none when ``zero``),
    then weights."""
    given = 0 if zero else states
    b.require(len(args) == given + weights, f"{layer}: expected {given} state and {weights} weight arguments "
              f"after the sequences, got {len(args)} arguments")
    return list(args[:given]), list(args[given:])


@register(LSTM)
def keras_lstm(b: Builder, sequences: Tensor, *args: Tensor, go_backwards: bool, return_sequences: bool,
               return_state: bool, use_bias: bool, zero_state: bool = False, activation: str = "tanh",
               layer: str = "lstm") -> Any:
    """A Keras 3 LSTM layer's recurrence as one UNIDIRECTIONAL_SEQUENCE_LSTM:
    ``fn(sequences, [h0, c0,] kernel, recurrent_kernel[, bias])``."""
    b.require(activation == "tanh", f"{layer}: the fused op's activation is tanh, the layer's {activation}")
    b.require(sequences.rank == 3, f"{layer}: the sequences must be [batch, time, features], are {sequences.shape}")
    states, weights = _arguments(b, args, 2, 3 if use_bias else 2, zero_state, layer)
    kernel, recurrent_kernel = weights[:2]
    gates = _gate_weights(b, kernel, recurrent_kernel, weights[2] if use_bias else None, layer)
    x = _reversed_in_time(b, sequences, layer) if go_backwards else sequences
    state = tuple(states) if states else None  # None: lstm_op makes zeros its own way
    if not return_state:
        y = lstm_op(b, x, gates, state=state, name=layer, zeros_from=sequences)
        return [y if return_sequences else _step(b, y, -1, f"{layer}/last")]
    # The final c exists only in the op's cell-state variable, read after the op; h is the last step.
    y, _, c = lstm_op_with_states(b, x, gates, state=state, name=layer, zeros_from=sequences)
    last = _step(b, y, -1, f"{layer}/last")
    return [y if return_sequences else last, last, c]


# -- Bidirectional(LSTM) ----------------------------------------------------------------------------

_BIDI_INPUTS = 48
_FW, _BW, _STATES, _AUX = 1, 18, 35, 39  # first operand of each group


def _direction_operands(weights: dict[str, Any]) -> list[Any]:
    """The 17 operands of one direction: gate weights, no peepholes, biases, no projection."""
    return ([weights[f"input_to_{g}_weights"] for g in GATES] + [weights[f"recurrent_to_{g}_weights"] for g in GATES]
            + [None] * 3 + [weights[f"{g}_gate_bias"] for g in GATES] + [None, None])


@register(BIDIRECTIONAL_LSTM)
def keras_bidirectional_lstm(b: Builder, sequences: Tensor, *args: Tensor, merge_mode: str, return_sequences: bool,
                             use_bias: bool, zero_state: bool = False, layer: str = "bidirectional") -> Any:
    """A Keras 3 ``Bidirectional(LSTM)`` as one BIDIRECTIONAL_SEQUENCE_LSTM (batch-major):
    ``fn(sequences, [fw_h0, fw_c0, bw_h0, bw_c0,] *forward_weights, *backward_weights)``."""
    per = 3 if use_bias else 2
    initial, weights = _arguments(b, args, 4, 2 * per, zero_state, layer)
    b.require(merge_mode in ("concat", "sum", "mul", "ave"), f"{layer}: merge mode {merge_mode!r} is not fusable")
    b.require(sequences.rank == 3, f"{layer}: the sequences must be [batch, time, features], are {sequences.shape}")
    fw = _gate_weights(b, weights[0], weights[1], weights[2] if use_bias else None, f"{layer}/forward")
    bw = _gate_weights(b, weights[per], weights[per + 1], weights[per + 2] if use_bias else None, f"{layer}/backward")
    fw_units, bw_units = weights[1].shape[0], weights[per + 1].shape[0]
    batch, time = sequences.shape[0], sequences.shape[1]
    initial = initial or [None] * 4
    states = [_state_variable(b, sequences, s, n, f"{layer}/{what}")
              for s, n, what in zip(initial, (fw_units, fw_units, bw_units, bw_units),
                                    ("fw_output_state", "fw_cell_state", "bw_output_state", "bw_cell_state"))]
    operands = [sequences, *_direction_operands(fw), *_direction_operands(bw), *states] + [None] * 9
    assert len(operands) == _BIDI_INPUTS
    # Two outputs, merged after the op: LiteRT's kernel with merge_outputs on batch-major
    # sequences writes the backward half of the third and later batch rows wrong (LiteRT 2.21).
    specs = [b.spec((batch, time, fw_units), "float32", f"{layer}/forward_output"),
             b.spec((batch, time, bw_units), "float32", f"{layer}/backward_output")]
    forward, backward = b.op("BIDIRECTIONAL_SEQUENCE_LSTM", operands, outputs=specs, fused_activation_function=_TANH,
                             cell_clip=0.0, proj_clip=0.0, merge_outputs=False, time_major=False,
                             asymmetric_quantize_inputs=False)
    if not return_sequences:  # Keras's backward layer ends on the first step
        forward = _step(b, forward, -1, f"{layer}/forward_last")
        backward = _step(b, backward, 0, f"{layer}/backward_last")
    return _merge(b, forward, backward, merge_mode, layer)


def _merge(b: Builder, y: Tensor, y_rev: Tensor, mode: str, layer: str) -> Tensor:
    """Keras's merge of the two directions, as it computes it."""
    if mode == "concat":
        shape = (*y.shape[:-1], y.shape[-1] + y_rev.shape[-1])
        return b.op("CONCATENATION", [y, y_rev], outputs=[b.spec(shape, y.dtype, f"{layer}/concat")], axis=-1,
                    fused_activation_function=0)
    op = {"sum": "ADD", "ave": "ADD", "mul": "MUL"}[mode]
    merged = b.op(op, [y, y_rev], outputs=[b.spec(y.shape, y.dtype, f"{layer}/{mode}")], fused_activation_function=0)
    if mode == "ave":  # (y + y_rev) / 2: a division by 2 is exact, as TFLite's DIV computes it
        merged = b.op("DIV", [merged, np.array(2.0, np.float32)], outputs=[b.spec(y.shape, y.dtype, f"{layer}/ave")],
                      fused_activation_function=0)
    return merged


# -- SimpleRNN --------------------------------------------------------------------------------------


@register(SIMPLE_RNN)
def keras_simple_rnn(b: Builder, sequences: Tensor, *args: Tensor, go_backwards: bool, return_sequences: bool,
                     return_state: bool, use_bias: bool, activation: str, zero_state: bool = False,
                     layer: str = "simple_rnn") -> Any:
    """A Keras 3 SimpleRNN layer's recurrence as one UNIDIRECTIONAL_SEQUENCE_RNN,
    ``fn(sequences, [h0,] kernel, recurrent_kernel[, bias])``: ``h = act(W x + R h + b)`` with W
    and R Keras's kernels transposed."""
    b.require(activation in _ACTIVATIONS, f"{layer}: the fused op has no {activation} activation")
    states, weights = _arguments(b, args, 1, 3 if use_bias else 2, zero_state, layer)
    kernel, recurrent_kernel, bias = weights[0], weights[1], weights[2:]
    b.require(sequences.rank == 3 and sequences.dtype == "float32",
              f"{layer}: the sequences must be float32 [batch, time, features], are {sequences!r}")
    n_input, units = _static(b, kernel, 2, f"{layer}: the kernel")
    b.require(_static(b, recurrent_kernel, 2, f"{layer}: the recurrent kernel") == (units, units),
              f"{layer}: the recurrent kernel must be [{units}, {units}]")
    b.require(sequences.shape[2] in (None, n_input), f"{layer}: the input has {sequences.shape[2]} features, "
              f"the kernel {n_input}")
    bias_value: Any = bias[0] if bias else np.zeros(units, np.float32)
    x = _reversed_in_time(b, sequences, layer) if go_backwards else sequences
    batch, time = x.shape[0], x.shape[1]
    state = _state_variable(b, x, states[0] if states else None, units, f"{layer}/hidden_state")
    y = b.op("UNIDIRECTIONAL_SEQUENCE_RNN",
             [x, _transposed(b, kernel, f"{layer}/kernel_t"), _transposed(b, recurrent_kernel, f"{layer}/recurrent_t"),
              bias_value, state],
             outputs=[b.spec((batch, time, units), "float32", f"{layer}/output")],
             time_major=False, fused_activation_function=_ACTIVATIONS[activation], asymmetric_quantize_inputs=False)
    last = _step(b, y, -1, f"{layer}/last")
    results = [y if return_sequences else last]
    if return_state:
        results.append(last)  # the hidden state is the output
    return results


# -- a Keras 3 LSTM loop recognised in a SavedModel ---------------------------------------------------


def lstm_loop(b: Builder, sequences: Tensor, h0: Tensor, c0: Tensor, kernel: Tensor, recurrent_kernel: Tensor,
              *bias: Tensor, time_major: bool, reverse: bool = False, layer: str) -> list[Tensor]:
    """The recurrence of a Keras 3 LSTM ``while`` loop (see :mod:`numlite.converter.keras_loops`)
    as one UNIDIRECTIONAL_SEQUENCE_LSTM: ``fn(sequences, h0, c0, kernel, recurrent_kernel[, bias])``
    returns the whole output sequence (time-major or batch-major as ``sequences``), the last
    step (the final h) and the final c; ``reverse`` (batch-major only) runs the sequence backwards
    in time, as ``go_backwards`` does. Zero initial states (Keras's default) are made by the op's
    own means, as for :data:`LSTM`."""
    gates = _gate_weights(b, kernel, recurrent_kernel, bias[0] if bias else None, layer)
    x = _reversed_in_time(b, sequences, layer) if reverse else sequences
    state = None if b.is_zeros(h0) and b.is_zeros(c0) else (h0, c0)
    y, _, c = lstm_op_with_states(b, x, gates, time_major=time_major, state=state, name=layer, zeros_from=sequences)
    last = _time_step(b, y, -1, time_major, f"{layer}/last")
    return [y, last, c]


def _time_step(b: Builder, y: Tensor, index: int, time_major: bool, name: str) -> Tensor:
    """One step of a sequence, batch-major or time-major (``index`` -1 for the last)."""
    if not time_major:
        return _step(b, y, index, name)
    begin, end = [index, 0, 0], [index + 1 if index != -1 else 0, 0, 0]
    return b.op("STRIDED_SLICE", [y, np.array(begin, np.int32), np.array(end, np.int32), np.ones(3, np.int32)],
                outputs=[b.spec((y.shape[1], y.shape[2]), y.dtype, name)],
                begin_mask=0b110, end_mask=0b110 | (0b001 if index == -1 else 0), shrink_axis_mask=0b001)
