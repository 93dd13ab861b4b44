"""Full-integer quantization of a fused UNIDIRECTIONAL_SEQUENCE_LSTM, as the official converter
does it for Keras LSTMs (LiteRT's "8x8_16" integer LSTM). TensorFlow-free.

The layout, read from the official converter's int8 files of tf_keras LSTMs:

- input and output int8, asymmetric, over their calibrated ranges;
- the eight gate weight matrices int8, symmetric, one scale per tensor (not per channel);
- the four gate biases int32 at ``input_scale * input_to_gate_weight_scale``;
- the output-state variable (input 18) int8 with the output's parameters (the kernel writes the
  hidden state there and copies it to the output); the cell-state variable (input 19) int16,
  zero point 0, scale ``2**ceil(log2(max |c|)) / 32768``, a power of two as the kernel requires,
  ``max |c|`` over every time step of every calibration sample (the official calibrator logs the
  state variable after the op ran, so it bounds only each sample's last step, and a cell that
  peaks mid-sequence saturates: numlite deliberately bounds every step);
- five intermediate tensors (shape ``[0]``): the four gate intermediates stay FLOAT32 without
  parameters (the kernel reads gate scales from them only with layer normalisation, otherwise
  it uses 2**-12), the fifth, the effective hidden scale, int8 with the output's parameters.

The cell state never leaves the kernel, so calibration computes it here: numlite's interpreter
runs the float op (its kernel is not changed), the calibration hook keeps each call's inputs
(sequence and initial states), and :func:`max_cell_magnitude` replays the float LSTM in NumPy
from them with the op's constant weights.

Supported: no peephole, projection or layer normalisation (the forms Keras LSTMs fuse to),
CIFG or not, batch- or time-major, constant weights, int8 activations (the official converter
refuses 16x8 LSTMs).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from numlite.model.ir import Model, Operator, Subgraph

LSTM = "UNIDIRECTIONAL_SEQUENCE_LSTM"
INPUT_WEIGHTS = (1, 2, 3, 4)  # input-to-{input, forget, cell, output} gate weights
RECURRENT_WEIGHTS = (5, 6, 7, 8)
BIASES = (12, 13, 14, 15)  # each at the input scale times the matching input-to-gate weight scale
OUTPUT_STATE, CELL_STATE = 18, 19
_PEEPHOLE, _PROJECTION, _LAYER_NORM = (9, 10, 11), (16, 17), (20, 21, 22, 23)
CELL_BITS = 15  # the cell state is int16: 2**15 steps per power-of-two bound


def unsupported(model: Model, sg: Subgraph, op: Operator, int16: bool) -> str | None:
    """Why this LSTM cannot become integer ("" for no kernel), or None if it can."""
    if int16:
        return "no 16x8 kernel"
    present = [k for k in (*_PEEPHOLE, *_PROJECTION, *_LAYER_NORM) if k < len(op.inputs) and op.inputs[k] >= 0]
    if present:
        return "peephole, projection or layer-norm inputs (not supported)"
    if len(op.inputs) <= CELL_STATE or any(op.inputs[k] < 0 for k in (0, OUTPUT_STATE, CELL_STATE)):
        return "no input or state tensors"
    for k in (*INPUT_WEIGHTS, *RECURRENT_WEIGHTS, *BIASES):
        t = op.inputs[k]
        if t >= 0 and model.constant(sg, t) is None:
            return "weights computed at run time"
    if op.inputs[INPUT_WEIGHTS[0]] < 0 and op.inputs[BIASES[0]] >= 0 or op.inputs[BIASES[1]] < 0:
        return "unexpected bias tensors"
    if _activation(op) is None:
        return "fused activation other than TANH, RELU or RELU6"
    return None


def cell_scale(magnitude: float) -> float:
    """The power-of-two int16 scale covering ``[-magnitude, magnitude]``."""
    bound = 2.0 ** math.ceil(math.log2(magnitude)) if magnitude > 0 else 1.0
    return bound / 2.0**CELL_BITS


def max_cell_magnitude(model: Model, sg: Subgraph, op: Operator, calls: Sequence[list[np.ndarray | None]]) -> float:
    """The largest ``|c|`` the float LSTM's cell state takes over every step of ``calls``
    (each call: the op's input arrays as the interpreter gave them)."""
    weight = [_const(model, sg, op, k) for k in range(16)]
    time_major = bool(op.builtin_options.time_major)
    clip = float(op.builtin_options.cell_clip or 0.0)
    act = _activation(op)
    largest = 0.0
    for ins in calls:
        x = np.asarray(ins[0], np.float64)
        x = x if time_major else x.swapaxes(0, 1)  # [time, batch, input]
        h = np.asarray(ins[OUTPUT_STATE], np.float64).reshape(x.shape[1], -1)
        c = np.asarray(ins[CELL_STATE], np.float64).reshape(x.shape[1], -1)
        for x_t in x:
            gates = [_gate(x_t, h, weight[w], weight[r], weight[b]) for w, r, b in
                     zip(INPUT_WEIGHTS, RECURRENT_WEIGHTS, BIASES)]
            f = _sigmoid(gates[1])
            i = 1.0 - f if gates[0] is None else _sigmoid(gates[0])
            c = f * c + i * act(gates[2])
            if clip > 0:
                c = np.clip(c, -clip, clip)
            h = _sigmoid(gates[3]) * act(c)
            largest = max(largest, float(np.abs(c).max()) if c.size else 0.0)
    return largest


def _const(model: Model, sg: Subgraph, op: Operator, k: int) -> np.ndarray | None:
    t = op.inputs[k] if k < len(op.inputs) else -1
    return None if t < 0 else np.asarray(model.constant(sg, t), np.float64)


def _gate(x: np.ndarray, h: np.ndarray, w: np.ndarray | None, r: np.ndarray | None,
          b: np.ndarray | None) -> np.ndarray | None:
    if w is None:
        return None  # CIFG: no input gate
    z = x @ w.T + h @ r.T
    return z + b if b is not None else z


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _activation(op: Operator):
    """The fused activation (``ActivationFunctionType``: RELU 1, RELU6 3, TANH 4) as a function."""
    code = op.builtin_options.fused_activation_function if op.builtin_options is not None else None
    return {1: lambda z: np.maximum(z, 0.0), 3: lambda z: np.clip(z, 0.0, 6.0), 4: np.tanh}.get(code)
