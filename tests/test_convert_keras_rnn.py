"""Keras 3 recurrent layers, whose loop keeps its inputs and outputs in tensor lists, converted
by numlite and run in numlite and LiteRT against Keras itself.

With a fixed batch the official converter converts them too, and numlite's model must have no
more operators and no more bytes than its. With a dynamic batch the official converter
refuses (its TensorListReserve needs a static element shape); numlite's output lists start
with a batch of 1 that the first write broadcasts, and the models must run for any batch.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_close, run_litert, run_numlite, seeded_values

import numlite

STEPS, FEATURES = 5, 3

LAYERS = {
    "simple_rnn": lambda: [tf.keras.layers.SimpleRNN(8)],
    "gru": lambda: [tf.keras.layers.GRU(8)],
    "lstm": lambda: [tf.keras.layers.LSTM(8)],
    "lstm_sequences": lambda: [tf.keras.layers.LSTM(8, return_sequences=True)],
    "bidirectional_lstm": lambda: [tf.keras.layers.Bidirectional(tf.keras.layers.LSTM(4))],
    "stacked_lstms": lambda: [tf.keras.layers.LSTM(6, return_sequences=True), tf.keras.layers.LSTM(4)],
}
FIXED_BATCH_LAYERS = ["simple_rnn", "gru", "lstm", "lstm_sequences", "bidirectional_lstm"]


@functools.cache
def keras_model(name: str, batch_size: int | None) -> tf.keras.Model:
    """The layers on inputs of [batch_size, 5, 3], with seeded random weights (biases too,
    which Keras would start at zero)."""
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((STEPS, FEATURES), batch_size=batch_size), *LAYERS[name]()])
    rng = np.random.default_rng(sorted(LAYERS).index(name))
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@functools.cache
def numlite_model(name: str, batch_size: int | None) -> bytes:
    """The model traced as a plain function, with loop recognition off: from_keras_model and
    loop recognition would fuse the LSTMs (tests/test_convert_keras3_rnn.py,
    tests/test_convert_keras3_savedmodel.py), these tests are about the loops themselves."""
    model = keras_model(name, batch_size)
    spec = tf.TensorSpec((batch_size, STEPS, FEATURES), tf.float32)
    call = tf.function(lambda x: model(x, training=False), input_signature=[spec], autograph=False)
    converter = numlite.TFLiteConverter.from_concrete_functions([call.get_concrete_function()], model)
    converter.fuse_keras_loops = False
    return converter.convert()


def assert_matches_keras(name: str, batch_size: int | None, batch: int) -> None:
    """numlite's model, run in numlite and in LiteRT on a batch of ``batch``, gives Keras' result."""
    x = seeded_values((batch, STEPS, FEATURES), tf.float32, batch)
    expected = keras_model(name, batch_size)(x, training=False).numpy()
    for runtime, run in (("numlite", run_numlite), ("LiteRT", run_litert)):
        (actual,) = run(numlite_model(name, batch_size), [x])
        assert_close(actual, expected, what=f"{runtime}: ")


# -- fixed batch: against the official converter -----------------------------------------------


@pytest.mark.parametrize("name", FIXED_BATCH_LAYERS)
def test_fixed_batch_is_no_larger_than_the_official_converters(name):
    ours = numlite_model(name, 2)
    official = tf.lite.TFLiteConverter.from_keras_model(keras_model(name, 2)).convert()
    ours_ops, official_ops = all_op_names(ours), all_op_names(official)
    assert len(ours_ops) <= len(official_ops), f"numlite {sorted(ours_ops)}\nofficial {sorted(official_ops)}"
    assert len(ours) <= len(official), f"numlite {len(ours)} bytes, official {len(official)} bytes"
    # Lists of static length have no spare row, and their small initial zeros are constants.
    assert "WHILE" in ours_ops and not {"PAD", "FILL"} & set(ours_ops), sorted(ours_ops)


@pytest.mark.parametrize("name", FIXED_BATCH_LAYERS)
def test_fixed_batch_matches_keras(name):
    assert_matches_keras(name, 2, 2)


# -- dynamic batch -----------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_dynamic_batch_matches_keras(name, batch):
    assert_matches_keras(name, None, batch)


@pytest.mark.parametrize("name, write", [("lstm", "EXPAND_DIMS"), ("lstm_sequences", "SELECT_V2")])
def test_dynamic_batch_output_lists_take_the_batch_of_the_first_write(name, write):
    """The last output alone is a list of one element, which the item replaces; the sequence
    is written by SELECT_V2, which broadcasts the list to the item's batch."""
    model = numlite_model(name, None)
    ops = all_op_names(model)
    assert "WHILE" in ops and write in ops and "DYNAMIC_UPDATE_SLICE" not in ops, sorted(ops)
    main = numlite.model.read_model(model).subgraphs[0]
    assert tuple(main.tensors[main.inputs[0]].shape_signature) == (-1, STEPS, FEATURES)
