"""Full-integer quantization of a fused UNIDIRECTIONAL_SEQUENCE_LSTM by numlite's converter.

A tf_keras LSTM (which fuses to UNIDIRECTIONAL_SEQUENCE_LSTM) is quantized to int8 by the
official converter and by numlite's from the same model and representative dataset. numlite's
file must have the official file's layout (int8 per-tensor weights, int32 biases, an int16 cell
state with a power-of-two scale, the output state and the effective-hidden-scale intermediate
with the output's parameters) and, run in LiteRT, be about as accurate against the float Keras
model as the official file. (numlite's own integer LSTM kernel is another piece of work: these
files are judged in LiteRT.)

The representative dataset is one batch of sequences: LiteRT keeps an LSTM's state variables
from one invoke to the next, so the official calibrator starts each later sample from the state
the previous one left, where numlite's files (and Keras) start from zeros; with one sample both
calibrate the same values, and their parameters can be compared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import numlite
from numlite.converter.quantize import lstm
from numlite.model import read_model
from helpers import litert_interpreter, run_interpreter

BATCH, STEPS, FEATURES, UNITS = 8, 5, 6, 8
INT8_ONLY = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
INT16X8 = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
_CACHE: dict[Any, Any] = {}


def _model() -> tf_keras.Model:
    """LSTM then Dense, seeded weights of order one (biases near Keras's: forget gate near 1)."""
    if "model" not in _CACHE:
        tf_keras.utils.set_random_seed(0)
        inputs = tf_keras.Input((STEPS, FEATURES), batch_size=BATCH)
        model = tf_keras.Model(inputs, tf_keras.layers.Dense(4)(tf_keras.layers.LSTM(UNITS)(inputs)))
        rng = np.random.default_rng(0)
        weights = []
        for w in model.get_weights():
            if w.ndim == 1:
                weights.append(w + rng.uniform(-0.2, 0.2, w.shape))
            else:
                weights.append(rng.uniform(-1, 1, w.shape) * np.sqrt(3 / w.shape[0]))
        model.set_weights([w.astype(np.float32) for w in weights])
        _CACHE["model"] = model
    return _CACHE["model"]


def _samples(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (BATCH, STEPS, FEATURES)).astype(np.float32) for _ in range(count)]


def _quantize(converter_class: Any, ops: Any = INT8_ONLY, io_type: Any = tf.int8) -> bytes:
    key = (converter_class.__module__, repr(ops), repr(io_type))
    if key not in _CACHE:
        data = _samples(1, seed=0)
        converter = converter_class.from_keras_model(_model())
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x] for x in data)
        converter.target_spec.supported_ops = ops
        converter.inference_input_type = converter.inference_output_type = io_type
        _CACHE[key] = converter.convert()
    return _CACHE[key]


def _run(model: bytes, x: np.ndarray) -> np.ndarray:
    """Float in and out through the int8 interface, in a fresh LiteRT interpreter (its LSTM
    state variables start at zero)."""
    interpreter = litert_interpreter(model)
    d = interpreter.get_input_details()[0]
    scale, zero = d["quantization"]
    (y,) = run_interpreter(interpreter, [np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)])
    scale, zero = interpreter.get_output_details()[0]["quantization"]
    return (y.astype(np.float32) - zero) * np.float32(scale)


def _lstm_tensors(model: bytes) -> list[tuple]:
    """(role, slot, type, shape if an intermediate, scales, zero points, quantized dimension) of
    every tensor the LSTM op reads, writes or keeps as an intermediate."""
    m = read_model(model)
    sg = m.subgraphs[0]
    (op,) = [op for op in sg.operators if m.op_name(op) == lstm.LSTM]
    rows = []
    for role, tensors in (("in", op.inputs), ("intermediate", op.intermediates), ("out", op.outputs)):
        for k, t in enumerate(tensors):
            if t < 0:
                rows.append((role, k, None))
                continue
            tensor, q = sg.tensors[t], sg.tensors[t].quantization
            params = ((np.asarray(q.scale, np.float64), tuple(int(z) for z in q.zero_point), q.quantized_dimension)
                      if q is not None and q.scale is not None and len(q.scale) else None)
            rows.append((role, k, tensor.type, tensor.shape if role == "intermediate" else None, tensor.is_variable,
                         params))
    return rows


def _keras_cell_magnitudes(x: np.ndarray) -> list[float]:
    """max |c| of Keras's LSTM cell state after each step (Keras returns the last step's state:
    one run per prefix of the sequence)."""
    cell = _model().layers[1].cell
    return [float(np.abs(tf_keras.layers.RNN(cell, return_state=True)(x[:, :t])[2].numpy()).max())
            for t in range(1, STEPS + 1)]


def test_layout_is_the_official_one() -> None:
    """Every tensor of the LSTM op has the official file's type, zero points, quantized dimension
    and scales (to float32 rounding: numlite calibrates with its own float kernels): int8
    per-tensor weights, int32 biases at input x weight scale, int8 output state and int16 cell
    state variables, the five intermediates. Except on purpose the cell state's scale: the
    official calibrator logs the cell-state variable after the op ran, so it sees only the last
    step's state; numlite bounds every step's (no saturation when the cell peaks mid-sequence)."""
    ours, theirs = _lstm_tensors(_quantize(numlite.TFLiteConverter)), _lstm_tensors(_quantize(tf.lite.TFLiteConverter))
    assert [r[:5] for r in ours] == [r[:5] for r in theirs]
    for a, b in zip(ours, theirs):
        if a[:2] == ("in", lstm.CELL_STATE):
            continue
        if a[2] is None or a[5] is None or b[5] is None:
            assert a[2:] == b[2:], a[:2]
            continue
        assert a[5][1:] == b[5][1:], a[:2]
        np.testing.assert_allclose(a[5][0], b[5][0], rtol=1e-5, atol=0, err_msg=f"{a[:2]}")
    ours_cell, their_cell = (next(r for r in rows if r[:2] == ("in", lstm.CELL_STATE)) for rows in (ours, theirs))
    assert ours_cell[2] == their_cell[2] == "INT16" and ours_cell[5][1:] == their_cell[5][1:] == ((0,), 0)
    steps = _keras_cell_magnitudes(_samples(1, seed=0)[0])  # the calibration sample
    assert ours_cell[5][0][0] == lstm.cell_scale(max(steps))  # exact: powers of two
    assert their_cell[5][0][0] == lstm.cell_scale(steps[-1])


def test_as_accurate_as_official() -> None:
    """On fresh inputs, numlite's file in LiteRT is at most 1.5 x the official file's error
    against Keras plus one output quantum (the bound of test_convert_quantize_full.py)."""
    ours, theirs = _quantize(numlite.TFLiteConverter), _quantize(tf.lite.TFLiteConverter)
    ours_error = their_error = 0.0
    for x in _samples(4, seed=9):
        expected = _model()(x).numpy()
        ours_error = max(ours_error, float(np.abs(_run(ours, x) - expected).max()))
        their_error = max(their_error, float(np.abs(_run(theirs, x) - expected).max()))
    quantum = litert_interpreter(ours).get_output_details()[0]["quantization"][0]
    assert ours_error <= 1.5 * their_error + quantum, (ours_error, their_error)


def test_cell_state_range_is_keras_cell_state() -> None:
    """The cell-state magnitude calibration computes (replaying the float LSTM in NumPy from the
    op's inputs) is the largest |c| Keras's LSTM reaches over every step of the sample."""
    m = read_model(numlite.TFLiteConverter.from_keras_model(_model()).convert())
    sg = m.subgraphs[0]
    (n,) = [n for n, op in enumerate(sg.operators) if m.op_name(op) == lstm.LSTM]
    (x,) = _samples(1, seed=3)
    zeros = np.zeros((BATCH, UNITS), np.float32)
    magnitude = lstm.max_cell_magnitude(m, sg, sg.operators[n], [[x] + [None] * 17 + [zeros, zeros]])
    np.testing.assert_allclose(magnitude, max(_keras_cell_magnitudes(x)), rtol=1e-5)


def test_16x8_lstm_is_refused_under_an_integer_only_target() -> None:
    """As the official converter ("Quantization to 16x8-bit not yet supported"), numlite has no
    16x8 LSTM: an integer-only 16x8 target names the op."""
    with pytest.raises(numlite.ConversionError, match=r"UNIDIRECTIONAL_SEQUENCE_LSTM \(node \d+.*no 16x8 kernel"):
        _quantize(numlite.TFLiteConverter, INT16X8, tf.int16)


def test_runs_in_numlite_as_in_litert_reference() -> None:
    """numlite's interpreter (its integer LSTM and int8 FILL) gives LiteRT's reference kernels'
    results on numlite's file bit for bit."""
    from ai_edge_litert.interpreter import OpResolverType

    model = _quantize(numlite.TFLiteConverter)
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = rng.integers(-128, 128, (BATCH, STEPS, FEATURES)).astype(np.int8)
        expected = run_interpreter(litert_interpreter(model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF), [x])
        actual = run_interpreter(numlite.Interpreter(model_content=model), [x])
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype
            np.testing.assert_array_equal(a, e)
