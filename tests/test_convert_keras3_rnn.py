"""Keras 3 recurrent layers fused by ``numlite.TFLiteConverter.from_keras_model``: LSTM into one
UNIDIRECTIONAL_SEQUENCE_LSTM per layer, Bidirectional(LSTM) into one BIDIRECTIONAL_SEQUENCE_LSTM,
SimpleRNN into UNIDIRECTIONAL_SEQUENCE_RNN; GRU, masked layers and activations the fused ops
lack keep their loop. Every model runs in LiteRT and in numlite against the Keras model itself
(its own outputs, 1e-5: LSTM and tanh-RNN outputs are bounded by 1, so the tolerance is
absolute and relative alike), with a dynamic and a fixed batch; op counts check that a layer is
one op, the conversion report that it says so.
"""

from __future__ import annotations

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_close, litert_interpreter, run_litert, run_numlite, seeded_values

import numlite
import numlite.fusion
import numlite.fusion.keras
from numlite.fusion.keras import BIDIRECTIONAL_LSTM, LSTM, SIMPLE_RNN

STEPS, FEATURES = 5, 3
L = keras.layers
RUNTIMES = (("LiteRT", run_litert), ("numlite", run_numlite))
RECURRENT_OPS = {"UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "WHILE"}

# name: (layers, the recurrent ops the model must have, in any order)
FUSED = {
    "lstm": (lambda: [L.LSTM(8)], ["UNIDIRECTIONAL_SEQUENCE_LSTM"]),
    "lstm_sequences": (lambda: [L.LSTM(8, return_sequences=True)], ["UNIDIRECTIONAL_SEQUENCE_LSTM"]),
    "lstm_backwards_sequences": (lambda: [L.LSTM(6, go_backwards=True, return_sequences=True)],
                                 ["UNIDIRECTIONAL_SEQUENCE_LSTM"]),
    "lstm_no_bias": (lambda: [L.LSTM(4, use_bias=False, implementation=1)], ["UNIDIRECTIONAL_SEQUENCE_LSTM"]),
    "lstm_unrolled": (lambda: [L.LSTM(4, unroll=True, dropout=0.5, recurrent_dropout=0.5)],
                      ["UNIDIRECTIONAL_SEQUENCE_LSTM"]),
    "stacked_lstms": (lambda: [L.LSTM(6, return_sequences=True), L.LSTM(4, return_sequences=True), L.LSTM(5),
                               L.Dense(3)], ["UNIDIRECTIONAL_SEQUENCE_LSTM"] * 3),
    "bidirectional": (lambda: [L.Bidirectional(L.LSTM(4))], ["BIDIRECTIONAL_SEQUENCE_LSTM"]),
    "bidirectional_sequences": (lambda: [L.Bidirectional(L.LSTM(4, return_sequences=True))],
                                ["BIDIRECTIONAL_SEQUENCE_LSTM"]),
    "bidirectional_sum": (lambda: [L.Bidirectional(L.LSTM(4, return_sequences=True), merge_mode="sum")],
                          ["BIDIRECTIONAL_SEQUENCE_LSTM"]),
    "bidirectional_mul_last": (lambda: [L.Bidirectional(L.LSTM(4), merge_mode="mul")],
                               ["BIDIRECTIONAL_SEQUENCE_LSTM"]),
    "bidirectional_ave": (lambda: [L.Bidirectional(L.LSTM(5, return_sequences=True, use_bias=False),
                                                   merge_mode="ave")], ["BIDIRECTIONAL_SEQUENCE_LSTM"]),
    "bidirectional_stacked": (lambda: [L.Bidirectional(L.LSTM(4, return_sequences=True)),
                                       L.Bidirectional(L.LSTM(3))], ["BIDIRECTIONAL_SEQUENCE_LSTM"] * 2),
    "simple_rnn": (lambda: [L.SimpleRNN(8)], ["UNIDIRECTIONAL_SEQUENCE_RNN"]),
    "simple_rnn_relu_backwards": (lambda: [L.SimpleRNN(6, activation="relu", go_backwards=True,
                                                       return_sequences=True)], ["UNIDIRECTIONAL_SEQUENCE_RNN"]),
    "simple_rnn_no_bias": (lambda: [L.SimpleRNN(4, use_bias=False, return_sequences=True)],
                           ["UNIDIRECTIONAL_SEQUENCE_RNN"]),
}
# name: (layers, the reason the report gives)
LOOPS = {
    "gru": (lambda: [L.GRU(6)], "TFLite has no fused GRU operator"),
    "lstm_relu": (lambda: [L.LSTM(4, activation="relu")], "its activation is relu"),
    "lstm_hard_sigmoid": (lambda: [L.LSTM(4, recurrent_activation="hard_sigmoid")],
                          "its recurrent activation is hard_sigmoid"),
    "simple_rnn_sigmoid": (lambda: [L.SimpleRNN(4, activation="sigmoid")], "its activation is sigmoid"),
}
ALL = {**{k: v[0] for k, v in FUSED.items()}, **{k: v[0] for k, v in LOOPS.items()}}


def random_weights(model: keras.Model, seed: int) -> None:
    """Seeded weights, biases too (Keras would start them at zero)."""
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])


@functools.cache
def keras_model(name: str, batch_size: int | None) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=batch_size), *ALL[name]()])
    random_weights(model, sorted(ALL).index(name))
    return model


@functools.cache
def converted(name: str, batch_size: int | None) -> tuple[bytes, numlite.converter.api.ConversionReport]:
    converter = numlite.TFLiteConverter.from_keras_model(keras_model(name, batch_size))
    return converter.convert(), converter.report


def keras_outputs(model: keras.Model, x: np.ndarray) -> list[np.ndarray]:
    out = model(x, training=False)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def assert_matches_keras(model: keras.Model, data: bytes, x: np.ndarray) -> None:
    expected = keras_outputs(model, x)
    for runtime, run in RUNTIMES:
        actual = run(data, [x])
        assert len(actual) == len(expected), f"{runtime}: {len(actual)} outputs, Keras {len(expected)}"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, what=f"{runtime} output {k}: ")


def interpreters(data: bytes) -> list[tuple[str, object]]:
    return [("LiteRT", litert_interpreter(data)), ("numlite", numlite.Interpreter(model_content=data))]


def recurrent_ops(data: bytes) -> list[str]:
    return sorted(op for op in all_op_names(data) if op in RECURRENT_OPS)


# -- fused layers ------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size, batch", [(None, 1), (None, 3), (4, 4)])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_layer_matches_keras(name, batch_size, batch):
    data, _ = converted(name, batch_size)
    x = seeded_values((batch, STEPS, FEATURES), tf.float32, batch)
    assert_matches_keras(keras_model(name, batch_size), data, x)


@pytest.mark.parametrize("batch_size", [None, 4])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_each_layer_is_one_fused_op(name, batch_size):
    data, report = converted(name, batch_size)
    assert recurrent_ops(data) == sorted(FUSED[name][1]), sorted(all_op_names(data))
    assert report.layers and all(": fused into " in line for line in report.layers), report.layers
    assert len(report.layers) == len(FUSED[name][1])


@pytest.mark.parametrize("batch_size, ops", [
    (4, ["FILL", "FILL", "STRIDED_SLICE", "UNIDIRECTIONAL_SEQUENCE_LSTM"]),
    # zeros shaped like the input's first column, gathered to the state's width, copied into
    # each state (GATHERs, which LiteRT's XNNPACK delegate leaves to LiteRT)
    (None, ["GATHER", "GATHER", "GATHER", "STRIDED_SLICE", "STRIDED_SLICE", "UNIDIRECTIONAL_SEQUENCE_LSTM",
            "ZEROS_LIKE"]),
])
def test_lstm_model_is_one_op_and_no_cell_clip(batch_size, ops):
    """A Keras LSTM model: the LSTM op, its last step, and the writes that zero its states
    before each run; Keras clips nothing, neither does the op."""
    data, _ = converted("lstm", batch_size)
    assert sorted(all_op_names(data)) == ops
    m = numlite.model.read_model(data)
    (op,) = [op for _, _, op in m.iter_operators() if m.op_name(op) == "UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert op.builtin_options.cell_clip == 0 and op.builtin_options.proj_clip == 0
    assert not op.builtin_options.time_major


def test_official_converter_keeps_the_keras3_lstm_a_loop():
    """What the fusion is for: the official converter's model of the same layer is a WHILE loop."""
    official = tf.lite.TFLiteConverter.from_keras_model(keras_model("lstm", 4)).convert()
    assert "WHILE" in all_op_names(official) and "UNIDIRECTIONAL_SEQUENCE_LSTM" not in all_op_names(official)


@pytest.mark.parametrize("name", ["lstm_sequences", "bidirectional", "simple_rnn"])
def test_invokes_in_a_row_are_independent_and_resize(name):
    """A stateless layer's states are zeroed before every run: the same input gives the same
    output after another input, in both runtimes; one interpreter resized to other batches
    (larger and smaller) sizes the state tensors again (LiteRT allocates variable tensors
    once per allocation, so the zero states must be sized before it does)."""
    model = keras_model(name, None)
    data, _ = converted(name, None)
    xs = [seeded_values((batch, STEPS, FEATURES), tf.float32, seed) for batch, seed in
          ((2, 7), (2, 8), (2, 7), (6, 9), (1, 10), (9, 11))]
    for runtime, interpreter in interpreters(data):
        index, out = interpreter.get_input_details()[0]["index"], interpreter.get_output_details()[0]["index"]
        for k, x in enumerate(xs):
            if k == 0 or x.shape != xs[k - 1].shape:
                interpreter.resize_tensor_input(index, x.shape)
                interpreter.allocate_tensors()
            interpreter.set_tensor(index, x)
            interpreter.invoke()
            assert_close(interpreter.get_tensor(out), keras_outputs(model, x)[0], what=f"{runtime} invoke {k}: ")


# -- states ------------------------------------------------------------------------------------


@functools.cache
def state_model(kind: str, batch_size: int | None, return_sequences: bool) -> keras.Model:
    """A layer returning its final states as model outputs."""
    keras.utils.set_random_seed(0)
    x = keras.Input((STEPS, FEATURES), batch_size=batch_size)
    if kind == "lstm":
        outputs = L.LSTM(4, return_state=True, return_sequences=return_sequences, go_backwards=True)(x)
    else:
        outputs = L.SimpleRNN(4, return_state=True, return_sequences=return_sequences)(x)
    model = keras.Model(x, list(outputs))
    random_weights(model, 3)
    return model


@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("kind", ["lstm", "simple_rnn"])
def test_return_state(kind, batch_size, return_sequences):
    model = state_model(kind, batch_size, return_sequences)
    converter = numlite.TFLiteConverter.from_keras_model(model)
    data = converter.convert()
    assert recurrent_ops(data) == ["UNIDIRECTIONAL_SEQUENCE_LSTM" if kind == "lstm" else "UNIDIRECTIONAL_SEQUENCE_RNN"]
    assert_matches_keras(model, data, seeded_values((2, STEPS, FEATURES), tf.float32, 4))


@pytest.fixture(scope="module")
def stateful():
    """A stateful LSTM (batch 2, sequences) and numlite's model of it, converted from a fresh state."""
    keras.utils.set_random_seed(0)
    layer = L.LSTM(4, stateful=True, return_sequences=True)
    model = keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=2), layer, L.Dense(2)])
    random_weights(model, 5)
    layer.reset_states()
    converter = numlite.TFLiteConverter.from_keras_model(model)
    return model, layer, converter.convert()


def _stateful_expected(model, layer, xs):
    layer.reset_states()
    expected = [keras_outputs(model, x)[0] for x in xs]
    layer.reset_states()
    return expected


def _invoke(interpreter, x):
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def test_stateful_lstm_continues_across_invokes(stateful):
    """Each invoke starts from the states the previous one ended with, as the Keras layer
    called repeatedly does (in numlite and LiteRT); the states live in resource variables."""
    model, layer, data = stateful
    assert recurrent_ops(data) == ["UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert {"READ_VARIABLE", "ASSIGN_VARIABLE"} <= set(all_op_names(data))
    xs = [seeded_values((2, STEPS, FEATURES), tf.float32, seed) for seed in range(4)]
    expected = _stateful_expected(model, layer, xs)
    assert not np.allclose(expected[0], _stateful_expected(model, layer, xs[1:2])[0], atol=1e-3)  # state matters
    for runtime, interpreter in interpreters(data):
        interpreter.allocate_tensors()
        for k, (x, e) in enumerate(zip(xs, expected)):
            assert_close(_invoke(interpreter, x), e, what=f"{runtime} invoke {k}: ")


def test_stateful_lstm_resets(stateful):
    """numlite's reset_all_variables restores the state the model was converted with (zeros
    here), like Keras's reset_states. (LiteRT's keeps resource variables, as docs/fusions.md says; a
    fresh LiteRT interpreter starts from the initial state.)"""
    model, layer, data = stateful
    xs = [seeded_values((2, STEPS, FEATURES), tf.float32, seed) for seed in range(3)]
    expected = _stateful_expected(model, layer, xs)
    interpreter = numlite.Interpreter(model_content=data)
    interpreter.allocate_tensors()
    for x in xs:
        _invoke(interpreter, x)
    interpreter.reset_all_variables()
    for k, (x, e) in enumerate(zip(xs, expected)):
        assert_close(_invoke(interpreter, x), e, what=f"numlite after reset, invoke {k}: ")
    fresh = litert_interpreter(data)
    fresh.allocate_tensors()
    assert_close(_invoke(fresh, xs[0]), expected[0], what="a fresh LiteRT interpreter: ")


# -- layers that keep their loop ---------------------------------------------------------------


@pytest.mark.parametrize("batch_size, batch", [(None, 3), (4, 4)])
@pytest.mark.parametrize("name", sorted(LOOPS))
def test_unfusable_layers_stay_loops_and_say_why(name, batch_size, batch):
    data, report = converted(name, batch_size)
    assert recurrent_ops(data) == ["WHILE"]
    (line,) = report.layers
    assert "not fused" in line and LOOPS[name][1] in line and "WHILE loop" in line, line
    assert line in str(report)
    x = seeded_values((batch, STEPS, FEATURES), tf.float32, batch)
    assert_matches_keras(keras_model(name, batch_size), data, x)


@functools.cache
def masked_model(batch_size: int | None) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((STEPS,), batch_size=batch_size, dtype="int32"),
                              L.Embedding(10, FEATURES, mask_zero=True), L.LSTM(4)])
    random_weights(model, 6)
    return model


@pytest.mark.parametrize("batch_size", [None, 2])
def test_masked_lstm_keeps_its_loop(batch_size):
    """mask_zero padding: the fused op has no mask, so the layer stays an exact loop."""
    model = masked_model(batch_size)
    converter = numlite.TFLiteConverter.from_keras_model(model)
    data = converter.convert()
    assert recurrent_ops(data) == ["WHILE"]
    assert "masked" in converter.report.layers[0]
    ids = np.array([[1, 2, 3, 0, 0], [4, 0, 5, 6, 7]], np.int32)
    assert_matches_keras(model, data, ids)


@functools.cache
def bidirectional_pair_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((STEPS, FEATURES)), L.Bidirectional(L.LSTM(4), merge_mode=None)])
    random_weights(model, 8)
    return model


def test_bidirectional_without_merge_is_grouped_from_two_lstms():
    """merge_mode=None returns both directions: the wrapper is not routed, each direction is
    its own fused LSTM, and the pair (one reading the sequence reversed) is then grouped into
    one BIDIRECTIONAL_SEQUENCE_LSTM whose outputs are both returned."""
    model = bidirectional_pair_model()
    converter = numlite.TFLiteConverter.from_keras_model(model)
    data = converter.convert()
    assert recurrent_ops(data) == ["BIDIRECTIONAL_SEQUENCE_LSTM"]
    lines = converter.report.layers
    assert any("Bidirectional" in line and "merge mode is None" in line for line in lines), lines
    assert sum("fused into UNIDIRECTIONAL_SEQUENCE_LSTM" in line for line in lines) == 2, lines
    assert sum("grouped into one BIDIRECTIONAL_SEQUENCE_LSTM" in line for line in lines) == 1, lines
    assert_matches_keras(model, data, seeded_values((3, STEPS, FEATURES), tf.float32, 9))


# -- the marked functions compute what Keras does --------------------------------------------------


@pytest.fixture
def without_keras_fusions():
    """The Keras fusions unregistered for one test: the marked functions are inlined."""
    saved = {name: numlite.fusion.lookup(name) for name in (LSTM, BIDIRECTIONAL_LSTM, SIMPLE_RNN)}
    for name in saved:
        numlite.fusion.unregister(name)
    yield
    for name, fusion in saved.items():
        numlite.fusion.register(name)(fusion)


@pytest.mark.parametrize("name", ["lstm_backwards_sequences", "bidirectional", "simple_rnn", "stacked_lstms"])
def test_marked_functions_inline_to_keras_math(name, without_keras_fusions):
    """With no fusion claiming them, the functions numlite marks inline to the layer's own loop,
    which still gives Keras's results: marking a layer changes nothing TF computes. (Loop
    recognition is off: it would fuse the inlined LSTM loops again.)"""
    model = keras_model(name, None)
    converter = numlite.TFLiteConverter.from_keras_model(model)
    converter.fuse_keras_loops = False
    data = converter.convert()
    assert "WHILE" in all_op_names(data) and not {"UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM"} & set(
        all_op_names(data))
    assert_matches_keras(model, data, seeded_values((2, STEPS, FEATURES), tf.float32, 10))


def test_the_users_model_is_left_as_it_was():
    model = keras_model("bidirectional_stacked", None)
    x = seeded_values((2, STEPS, FEATURES), tf.float32, 11)
    before = keras_outputs(model, x)[0]
    converted("bidirectional_stacked", None)
    numlite.TFLiteConverter.from_keras_model(model)
    for layer in model._flatten_layers(include_self=True, recursive=True):
        assert "inner_loop" not in vars(layer) and "call" not in vars(layer), layer.name
    assert_close(keras_outputs(model, x)[0], before)


class ReversingLSTM(keras.layers.LSTM):
    """An LSTM whose recurrence is not Keras's: it reverses its states before running."""

    def inner_loop(self, sequences, initial_state, mask, training=False):
        return super().inner_loop(sequences, list(reversed(initial_state)), mask, training=training)


def test_a_subclass_changing_the_recurrence_is_not_routed_but_its_loop_is_recognised():
    """The layer is not routed to the fusion (its recurrence is not Keras's), but its loop is
    still an LSTM loop (on swapped initial states), which loop recognition fuses, exactly."""
    keras.utils.set_random_seed(0)
    h = keras.Input((4,))
    x = keras.Input((STEPS, FEATURES))
    model = keras.Model([x, h], ReversingLSTM(4)(x, initial_state=[h, keras.ops.zeros_like(h)]))
    random_weights(model, 12)
    converter = numlite.TFLiteConverter.from_keras_model(model)
    data = converter.convert()
    assert recurrent_ops(data) == ["UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert "overrides inner_loop" in converter.report.layers[0], converter.report.layers
    assert "fused into UNIDIRECTIONAL_SEQUENCE_LSTM by loop recognition" in converter.report.layers[0]
    inputs = [seeded_values((2, STEPS, FEATURES), tf.float32, 13), seeded_values((2, 4), tf.float32, 14)]
    expected = np.asarray(model(inputs))
    for runtime, run in RUNTIMES:
        assert_close(run(data, inputs)[0], expected, what=f"{runtime}: ")


def test_report_lists_each_recurrent_layer():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((STEPS, FEATURES)), L.LSTM(4, return_sequences=True, name="first"),
                              L.GRU(3, return_sequences=True, name="second"), L.SimpleRNN(2, name="third")])
    converter = numlite.TFLiteConverter.from_keras_model(model)
    converter.convert()
    assert converter.report.layers == [
        "first (LSTM): fused into UNIDIRECTIONAL_SEQUENCE_LSTM",
        "second (GRU): not fused: TFLite has no fused GRU operator; kept as a WHILE loop",
        "third (SimpleRNN): fused into UNIDIRECTIONAL_SEQUENCE_RNN",
    ]
    assert "layer first (LSTM): fused into UNIDIRECTIONAL_SEQUENCE_LSTM" in str(converter.report)


# -- a fused LSTM beside a loop, with a dynamic batch ------------------------------------------------


def _loop_beside_or_before_lstm(batch_size: int | None, before: bool) -> keras.Model:
    """A masked LSTM (a WHILE loop) beside a backward LSTM, both on the input; or a GRU loop
    whose output a fused LSTM reads (``before``)."""
    keras.utils.set_random_seed(5)
    x = keras.Input((STEPS, FEATURES), batch_size=batch_size)
    if before:
        model = keras.Model(x, L.LSTM(6, return_sequences=True)(L.GRU(4, return_sequences=True)(x)))
    else:
        model = keras.Model(x, [L.LSTM(4)(L.Masking(0.0)(x)), L.LSTM(6, go_backwards=True, return_sequences=True)(x)])
    random_weights(model, 11)
    return model


def test_an_lstm_beside_a_loop_is_prepared_before_it_and_runs_right_in_litert():
    """LiteRT prepares the ops after one whose output it sizes while running (the masked
    layer's WHILE, its FILL of a computed shape) only at invoke time, and a state variable
    resized then is not the one its LSTM reads (0.03 off Keras before): numlite runs every op
    that does not depend on such an op first."""
    model = _loop_beside_or_before_lstm(None, before=False)
    converter = numlite.TFLiteConverter.from_keras_model(model)
    data = converter.convert()
    ops = [numlite.model.read_model(data).op_name(op) for op in numlite.model.read_model(data).subgraphs[0].operators]
    assert ops.index("UNIDIRECTIONAL_SEQUENCE_LSTM") < ops.index("WHILE"), ops
    assert not converter.report.warnings
    assert_matches_keras(model, data, seeded_values((3, STEPS, FEATURES), tf.float32, 12))


def test_an_lstm_after_a_loop_with_a_dynamic_batch_warns_that_litert_gets_it_wrong():
    """An LSTM reading a GRU loop's output must come after the loop; with a dynamic batch LiteRT
    resizes its state while running and computes it wrong (pinned here: if LiteRT is fixed,
    the warning goes). numlite's interpreter gives Keras's result; with a fixed batch, so
    does LiteRT, and there is no warning."""
    x = seeded_values((3, STEPS, FEATURES), tf.float32, 13)
    dynamic = _loop_beside_or_before_lstm(None, before=True)
    converter = numlite.TFLiteConverter.from_keras_model(dynamic)
    data = converter.convert()
    assert len(converter.report.warnings) == 1 and "fixed batch" in converter.report.warnings[0]
    expected = keras_outputs(dynamic, x)
    assert_close(run_numlite(data, [x])[0], expected[0])
    assert np.max(np.abs(run_litert(data, [x])[0] - expected[0])) > 1e-3
    fixed = _loop_beside_or_before_lstm(3, before=True)
    converter = numlite.TFLiteConverter.from_keras_model(fixed)
    data = converter.convert()
    assert not converter.report.warnings
    assert_matches_keras(fixed, data, x)
