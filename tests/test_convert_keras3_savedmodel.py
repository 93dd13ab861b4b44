"""Keras 3 LSTMs in SavedModels (``model.export``, ``tf.saved_model.save``): numlite recognises
each layer's ``while`` loop and converts it into one UNIDIRECTIONAL_SEQUENCE_LSTM
(:mod:`numlite.converter.keras_loops`); loops that are not exactly a Keras LSTM (GRU, masked
layers, other activations) stay WHILE loops and the report says why. Every model runs in LiteRT
and in numlite against the Keras model itself at 1e-5 (LSTM outputs are bounded by 1, so the
tolerance is absolute and relative alike), with a dynamic batch (run at two sizes) and a fixed one.
"""

from __future__ import annotations

import functools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_close, run_litert, run_numlite, seeded_values
from test_convert_keras3_rnn import assert_matches_keras, keras_outputs

import numlite

STEPS, FEATURES = 5, 3
L = keras.layers
LSTM_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
RUNTIMES = (("LiteRT", run_litert), ("numlite", run_numlite))


def _return_state(x):
    sequence, h, c = L.LSTM(4, return_state=True, return_sequences=True)(x)
    return [sequence, h, c]


def _return_state_backwards_last(x):
    last, h, c = L.LSTM(5, return_state=True, go_backwards=True)(x)
    return [last, h, c]


def _initial_state_from_input(x):
    h0 = L.Dense(4, activation="tanh")(L.Flatten()(x))
    return L.LSTM(4, return_sequences=True)(x, initial_state=[h0, L.Dense(4)(L.Flatten()(x))])


# name: (the model's layers on its input, how many LSTM ops the model must have)
FUSED = {
    "lstm": (lambda x: L.LSTM(8)(x), 1),
    "lstm_sequences": (lambda x: L.LSTM(8, return_sequences=True)(x), 1),
    "lstm_backwards": (lambda x: L.LSTM(6, go_backwards=True)(x), 1),
    "lstm_backwards_sequences": (lambda x: L.LSTM(6, go_backwards=True, return_sequences=True)(x), 1),
    "lstm_no_bias": (lambda x: L.LSTM(4, use_bias=False, return_sequences=True)(x), 1),
    "stacked": (lambda x: L.Dense(3)(L.LSTM(5)(L.LSTM(4, return_sequences=True)(L.LSTM(6, return_sequences=True)(x)))),
                3),
    "return_state": (_return_state, 1),
    "return_state_backwards_last": (_return_state_backwards_last, 1),
    "initial_state": (_initial_state_from_input, 1),
    "dense_then_lstm": (lambda x: L.LSTM(4)(L.Dense(7, activation="relu")(x)), 1),
    # A SavedModel keeps no trace of the wrapper: its two layers become two LSTM ops, then one
    # BIDIRECTIONAL_SEQUENCE_LSTM (numlite/converter/bidirectional.py); -1 counts that op.
    "bidirectional": (lambda x: L.Bidirectional(L.LSTM(4))(x), -1),
    "bidirectional_sequences_sum": (lambda x: L.Bidirectional(L.LSTM(4, return_sequences=True), merge_mode="sum")(x),
                                    -1),
}
BIDI_OP = "BIDIRECTIONAL_SEQUENCE_LSTM"
# name: (layers, what the report must say about the loop)
LOOPS = {
    "gru": (lambda x: L.GRU(4)(x), "5 loop variables"),
    # Recognised by what the body computes, checked on probe inputs: another activation differs.
    "lstm_relu": (lambda x: L.LSTM(4, activation="relu")(x), "does not compute Keras's LSTM cell"),
    "lstm_hard_sigmoid": (lambda x: L.LSTM(4, recurrent_activation="hard_sigmoid")(x),
                          "does not compute Keras's LSTM cell"),
    "masked": (lambda x: L.LSTM(4)(L.Masking(0.0)(x)), "not fused: it is masked"),
    "simple_rnn": (lambda x: L.SimpleRNN(4)(x), "loop variables"),
}
ALL = {**{k: v[0] for k, v in FUSED.items()}, **{k: v[0] for k, v in LOOPS.items()}}


@functools.cache
def keras_model(name: str, batch_size: int | None) -> keras.Model:
    keras.utils.set_random_seed(0)
    x = keras.Input((STEPS, FEATURES), batch_size=batch_size)
    model = keras.Model(x, ALL[name](x))
    rng = np.random.default_rng(sorted(ALL).index(name))  # biases too (Keras starts them at zero)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


def save(model: keras.Model, path: str, batch_size: int | None) -> None:
    """``model.export`` (whose signature always has a dynamic batch), or, for a fixed batch, the
    model in a ``tf.Module`` saved by ``tf.saved_model.save`` with that batch in its signature."""
    if batch_size is None:
        model.export(path, verbose=False)
        return
    module = tf.Module()
    module.model = model
    module.serve = tf.function(lambda x: model(x, training=False),
                               input_signature=[tf.TensorSpec((batch_size, STEPS, FEATURES), tf.float32)])
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})


@functools.cache
def converted(name: str, batch_size: int | None, tmp: str) -> tuple[bytes, numlite.ConversionReport]:
    path = os.path.join(tmp, f"{name}_{batch_size}")
    save(keras_model(name, batch_size), path, batch_size)
    converter = numlite.TFLiteConverter.from_saved_model(path, signature_keys=["serving_default"])
    return converter.convert(), converter.report


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("keras3_savedmodels"))


@pytest.mark.parametrize("batch_size, batch", [(None, 1), (None, 3), (2, 2)])
@pytest.mark.parametrize("name", sorted(ALL))
def test_matches_keras(name, batch_size, batch, tmp):
    data, _ = converted(name, batch_size, tmp)
    x = seeded_values((batch, STEPS, FEATURES), tf.float32, batch)
    assert_matches_keras(keras_model(name, batch_size), data, x)


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_each_lstm_loop_is_one_fused_op(name, batch_size, tmp):
    data, report = converted(name, batch_size, tmp)
    ops = all_op_names(data)
    expected = FUSED[name][1]
    lstms, bidis = (expected, 0) if expected > 0 else (0, 1)
    assert "WHILE" not in ops and ops.count(LSTM_OP) == lstms and ops.count(BIDI_OP) == bidis, sorted(ops)
    loops = [line for line in report.layers if "while loop" in line]
    assert len(loops) == lstms + 2 * bidis, report.layers
    assert all(f"fused into {LSTM_OP}" in line for line in loops), report.layers
    assert sum(f"grouped into one {BIDI_OP}" in line for line in report.layers) == bidis, report.layers


def test_fixed_batch_lstm_is_the_op_and_its_last_step(tmp):
    """Keras's transposes around the loop are gone: the op reads the batch-major input itself,
    computes no cell clip (Keras has none), and only the last step is sliced off; two FILLs zero
    its state tensors before each run."""
    data, _ = converted("lstm", 2, tmp)
    assert sorted(all_op_names(data)) == ["FILL", "FILL", "STRIDED_SLICE", LSTM_OP]
    m = numlite.model.read_model(data)
    (op,) = [op for _, _, op in m.iter_operators() if m.op_name(op) == LSTM_OP]
    assert op.builtin_options.cell_clip == 0 and not op.builtin_options.time_major


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_other_loops_stay_loops_and_the_report_says_why(name, tmp):
    data, report = converted(name, None, tmp)
    assert "WHILE" in all_op_names(data) and LSTM_OP not in all_op_names(data)
    assert len(report.layers) == 1 and "not fused" in report.layers[0], report.layers
    assert LOOPS[name][1] in report.layers[0], report.layers


@pytest.mark.parametrize("batch_size", [None, 2])
def test_official_converter_does_not_fuse(batch_size, tmp):
    """What the recognition is for: the official converter does not fuse the same SavedModel's
    LSTM. Measured with TF 2.21: it refuses model.export's dynamic-batch SavedModel (a
    TensorListReserve without a static element shape) and keeps the fixed-batch one a WHILE loop."""
    path = os.path.join(tmp, f"lstm_{batch_size}")
    converted("lstm", batch_size, tmp)  # saves it
    try:
        official = tf.lite.TFLiteConverter.from_saved_model(path).convert()
    except Exception as e:  # noqa: BLE001 - the official converter's own error types vary
        assert batch_size is None and "TensorListReserve" in str(e), e
        return
    assert "WHILE" in all_op_names(official) and LSTM_OP not in all_op_names(official)


@pytest.mark.parametrize("return_sequences", [False, True])
def test_dynamic_time_dimension(return_sequences, tmp):
    """A sequence whose length is known only at run time: the loop is bounded by the length
    computed from the input's shape, and the fused op is sized at run time; runs of 2 and 7 steps
    give Keras's results."""
    keras.utils.set_random_seed(0)
    x = keras.Input((None, FEATURES))
    model = keras.Model(x, L.LSTM(4, return_sequences=return_sequences)(x))
    path = os.path.join(tmp, f"dynamic_time_{return_sequences}")
    model.export(path, verbose=False)
    converter = numlite.TFLiteConverter.from_saved_model(path, signature_keys=["serving_default"])
    data = converter.convert()
    assert "WHILE" not in all_op_names(data) and all_op_names(data).count(LSTM_OP) == 1, converter.report.layers
    for steps in (2, 7):
        x = seeded_values((3, steps, FEATURES), tf.float32, steps)
        for runtime, run in RUNTIMES:
            assert_close(run(data, [x])[0], keras_outputs(model, x)[0], what=f"{runtime} {steps} steps: ")


def test_invokes_in_a_row_are_independent_and_resize(tmp):
    """The fused op's states start from zero at every invoke, at any batch."""
    model, (data, _) = keras_model("lstm_sequences", None), converted("lstm_sequences", None, tmp)
    for runtime, run in RUNTIMES:
        for k, (batch, seed) in enumerate(((2, 1), (2, 2), (5, 1), (1, 3))):
            x = seeded_values((batch, STEPS, FEATURES), tf.float32, seed)
            assert_close(run(data, [x])[0], keras_outputs(model, x)[0], what=f"{runtime} run {k}: ")
