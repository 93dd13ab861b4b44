"""Two LSTMs over one sequence, one reading it reversed, become one BIDIRECTIONAL_SEQUENCE_LSTM
(numlite/converter/bidirectional.py), whatever made them: here two independent tf_keras layers,
one going backwards, which no wrapper marks. The backward op's output is aligned with the input,
so a reader of the backward layer's own order gets a REVERSE_V2 of it, and its last step is the
op's first. Everything is compared with Keras in LiteRT and numlite (LSTM outputs are of order
one: 1e-5 absolute and relative). Keras's Bidirectional layers, on every save path, are in
test_convert_lstm_matrix.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from helpers import all_op_names, assert_close, litert_interpreter, run_litert, run_numlite, seeded_values

import numlite

STEPS, FEATURES = 6, 3
L = tf_keras.layers


def _model(forward_units: int, backward_units: int, return_sequences: bool) -> tf_keras.Model:
    tf_keras.utils.set_random_seed(0)
    x = tf_keras.Input((STEPS, FEATURES))
    forward = L.LSTM(forward_units, return_sequences=return_sequences)(x)
    backward = L.LSTM(backward_units, return_sequences=return_sequences, go_backwards=True)(x)
    model = tf_keras.Model(x, [forward, backward])
    rng = np.random.default_rng(1)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@functools.cache
def converted(forward_units: int, backward_units: int, return_sequences: bool):
    model = _model(forward_units, backward_units, return_sequences)
    converter = numlite.TFLiteConverter.from_keras_model(model)
    return model, converter.convert(), converter.report


def _matches_keras(model, data) -> None:
    x = seeded_values((3, STEPS, FEATURES), tf.float32, 2)
    expected = [y.numpy() for y in model(x)]
    for run in (run_litert, run_numlite):
        for got, want in zip(run(data, [x]), expected):
            assert_close(got, want)


def test_a_backward_layer_read_in_its_own_order_gets_the_op_output_reversed():
    model, data, report = converted(4, 4, True)
    ops = all_op_names(data)
    assert ops.count("BIDIRECTIONAL_SEQUENCE_LSTM") == 1 and "UNIDIRECTIONAL_SEQUENCE_LSTM" not in ops, ops
    assert ops.count("REVERSE_V2") == 1, ops  # the backward outputs in the order Keras returns them
    assert sum("grouped into one BIDIRECTIONAL_SEQUENCE_LSTM" in line for line in report.layers) == 1
    _matches_keras(model, data)


def test_the_last_step_of_a_backward_layer_is_the_op_s_first():
    model, data, _ = converted(4, 4, False)
    ops = all_op_names(data)
    assert ops.count("BIDIRECTIONAL_SEQUENCE_LSTM") == 1 and "REVERSE_V2" not in ops, ops
    _matches_keras(model, data)


@pytest.mark.parametrize("return_sequences", [True, False])
def test_directions_of_different_sizes_stay_two_ops(return_sequences):
    """LiteRT's bidirectional op requires both directions of one size."""
    model, data, report = converted(4, 5, return_sequences)
    ops = all_op_names(data)
    assert ops.count("UNIDIRECTIONAL_SEQUENCE_LSTM") == 2 and "BIDIRECTIONAL_SEQUENCE_LSTM" not in ops, ops
    assert not any("grouped" in line for line in report.layers)
    _matches_keras(model, data)


def test_the_grouped_op_starts_from_zero_states_at_every_invoke():
    """The op's four state tensors are variables it overwrites: a second invoke on other inputs
    gives what Keras gives for them alone."""
    model, data, _ = converted(4, 4, True)
    first, second = seeded_values((2, STEPS, FEATURES), tf.float32, 3), seeded_values((2, STEPS, FEATURES), tf.float32, 4)
    for interpreter in (litert_interpreter(data), numlite.Interpreter(model_content=data)):
        index = interpreter.get_input_details()[0]["index"]
        interpreter.resize_tensor_input(index, first.shape)
        interpreter.allocate_tensors()
        for x in (first, second):
            interpreter.set_tensor(index, x)
            interpreter.invoke()
        got = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        for g, want in zip(got, model(second)):
            assert_close(g, want.numpy(), what=f"{type(interpreter).__module__}: ")
