"""LSTM fusion contracts: tf_keras (Keras 2) LSTM layers, whose function tf_keras marks
``api_implements: "lstm_<uuid>"``, and the spec's bring-your-own cells ``LSTMCellSimple`` and
``LayerNormalizedLstmCellSimple``, each converted by numlite into one UNIDIRECTIONAL_SEQUENCE_LSTM
and checked against TensorFlow in LiteRT (and in numlite once it has the LSTM kernel).

LiteRT's kernel keeps its state in variable tensors and overwrites them with the final state, so
a model whose state tensors are only set when allocated (the official converter's) starts its
second invoke from the first one's final state. numlite's models reset the state before the op
at every invoke: consecutive invokes must give TensorFlow's result each time.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from helpers import all_op_names, assert_close, litert_interpreter, run_litert, run_numlite, seeded_values

import numlite
import numlite.fusion
from numlite.kernels import KERNELS
from numlite.model import read_model

LSTM_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
STEPS, FEATURES = 5, 3
numlite_kernel = pytest.mark.skipif(LSTM_OP not in KERNELS, reason="numlite has no UNIDIRECTIONAL_SEQUENCE_LSTM kernel yet")


def run_twice(model: bytes, inputs, runtime: str = "LiteRT") -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The outputs of two consecutive invokes of one interpreter on the same inputs (each input
    resized to its value's shape first)."""
    it = litert_interpreter(model) if runtime == "LiteRT" else numlite.Interpreter(model_content=model)
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], x.shape)
    it.allocate_tensors()
    runs = []
    for _ in range(2):
        for d, x in zip(details, inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        runs.append([it.get_tensor(d["index"]).copy() for d in it.get_output_details()])
    return runs[0], runs[1]


def assert_runs_like(model: bytes, inputs, expected: list[np.ndarray], runtime: str = "LiteRT") -> None:
    """Both invokes give TensorFlow's outputs (a state left over from the first would not)."""
    first, second = run_twice(model, inputs, runtime)
    assert len(first) == len(expected)
    for k, (a, b, e) in enumerate(zip(first, second, expected)):
        assert_close(a, e, what=f"{runtime} invoke 1, output {k}: ")
        assert_close(b, e, what=f"{runtime} invoke 2, output {k}: ")


def lstm_options(model: bytes) -> list:
    m = read_model(model)
    return [op.builtin_options for sg in m.subgraphs for op in sg.operators if m.op_name(op) == LSTM_OP]


# -- tf_keras LSTM layers ------------------------------------------------------------------------

KERAS2 = {
    "sequences": lambda: [tf_keras.layers.LSTM(4, return_sequences=True)],
    "last": lambda: [tf_keras.layers.LSTM(4)],
    "backwards_sequences": lambda: [tf_keras.layers.LSTM(4, return_sequences=True, go_backwards=True)],
    "backwards_last": lambda: [tf_keras.layers.LSTM(4, go_backwards=True)],
    "stacked": lambda: [tf_keras.layers.LSTM(6, return_sequences=True), tf_keras.layers.LSTM(4, go_backwards=True),
                        tf_keras.layers.Dense(2)],
}
LAYER_COUNT = {"stacked": 2}


@functools.cache
def keras2_model(name: str, batch_size: int | None) -> tf_keras.Model:
    """tf_keras layers on [batch_size, 5, 3] inputs with seeded weights (biases too)."""
    inputs = tf_keras.Input((STEPS, FEATURES), batch_size=batch_size)
    x = inputs
    for layer in KERAS2[name]():
        x = layer(x)
    model = tf_keras.Model(inputs, x)
    rng = np.random.default_rng(sorted(KERAS2).index(name))
    model.set_weights([rng.uniform(-0.7, 0.7, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@functools.cache
def keras2_numlite(name: str, batch_size: int | None) -> tuple[bytes, str]:
    converter = numlite.TFLiteConverter.from_keras_model(keras2_model(name, batch_size))
    return converter.convert(), str(converter.report)


# Each layout with a fixed batch or one known only at run time (the official converter refuses
# the latter: its TensorListReserve needs a static element shape).
CASES = [("sequences", 2), ("sequences", None), ("last", 2), ("last", None), ("backwards_sequences", None),
         ("backwards_last", 2), ("stacked", None)]


@pytest.mark.parametrize("name,batch_size", CASES)
def test_tf_keras_lstm_is_one_fused_op_per_layer_without_cell_clip(name, batch_size):
    model, report = keras2_numlite(name, batch_size)
    ops = all_op_names(model)
    assert ops.count(LSTM_OP) == LAYER_COUNT.get(name, 1), ops
    assert "WHILE" not in ops and "FULLY_CONNECTED" not in ops[:ops.index(LSTM_OP)], ops  # weights folded away
    # Keras's math exactly: tanh, no cell clip (the official converter writes 10.0).
    for options in lstm_options(model):
        assert options.cell_clip == 0.0 and options.proj_clip == 0.0 and options.fused_activation_function == 4
    assert f"lstm_* x{LAYER_COUNT.get(name, 1)}" in report


@pytest.mark.parametrize("name,batch_size", CASES)
def test_tf_keras_lstm_matches_tf_in_litert_at_every_invoke(name, batch_size):
    model, _ = keras2_numlite(name, batch_size)
    for batch in ((2,) if batch_size else (1, 3)):
        x = seeded_values((batch, STEPS, FEATURES), np.float32, batch)
        expected = keras2_model(name, batch_size)(x).numpy()
        assert_runs_like(model, [x], [expected])


@numlite_kernel
@pytest.mark.parametrize("name,batch_size", CASES)
def test_tf_keras_lstm_matches_tf_in_numlite_at_every_invoke(name, batch_size):
    model, _ = keras2_numlite(name, batch_size)
    for batch in ((2,) if batch_size else (1, 3)):
        x = seeded_values((batch, STEPS, FEATURES), np.float32, batch)
        assert_runs_like(model, [x], [keras2_model(name, batch_size)(x).numpy()], runtime="numlite")


def test_official_tf_keras_lstm_carries_state_into_the_next_invoke_numlite_does_not():
    """Why numlite writes the state before each run: the official converter's model (state
    tensors initialised once, at allocation) gives TF's result once, then another."""
    keras_model = keras2_model("sequences", 2)
    official = tf.lite.TFLiteConverter.from_keras_model(keras_model).convert()
    x = seeded_values((2, STEPS, FEATURES), np.float32, 7)
    expected = keras_model(x).numpy()
    (first,), (second,) = run_twice(official, [x])
    assert_close(first, expected)
    assert np.abs(second - expected).max() > 1e-2  # the leaked state (0.29 when measured)
    model, _ = keras2_numlite("sequences", 2)
    assert_runs_like(model, [x], [expected])


def test_tf_keras_time_major_lstm():
    inputs = tf_keras.Input((2, FEATURES), batch_size=STEPS)  # [time, batch, features]
    layer = tf_keras.layers.LSTM(4, time_major=True, return_sequences=True)
    keras_model = tf_keras.Model(inputs, layer(inputs))
    rng = np.random.default_rng(5)
    keras_model.set_weights([rng.uniform(-0.7, 0.7, w.shape).astype(np.float32) for w in keras_model.get_weights()])
    model = numlite.TFLiteConverter.from_keras_model(keras_model).convert()
    assert all_op_names(model).count(LSTM_OP) == 1
    assert [o.time_major for o in lstm_options(model)] == [True]
    x = seeded_values((STEPS, 2, FEATURES), np.float32, 3)
    assert_runs_like(model, [x], [keras_model(x).numpy()])


def test_tf_keras_lstm_states_come_out_of_the_fused_op():
    """``return_state=True``: h is the last output, c the op's cell state variable after it ran."""
    inputs = tf_keras.Input((STEPS, FEATURES), batch_size=2)
    out, h, c = tf_keras.layers.LSTM(4, return_state=True)(inputs)
    keras_model = tf_keras.Model(inputs, [out, h, tf_keras.layers.Dense(3)(c)])
    rng = np.random.default_rng(6)
    keras_model.set_weights([rng.uniform(-0.7, 0.7, w.shape).astype(np.float32) for w in keras_model.get_weights()])
    model = numlite.TFLiteConverter.from_keras_model(keras_model).convert()
    assert all_op_names(model).count(LSTM_OP) == 1
    x = seeded_values((2, STEPS, FEATURES), np.float32, 4)
    expected = [t.numpy() for t in keras_model(x)]
    first, _ = run_twice(model, [x])
    by_shape = sorted(range(3), key=lambda k: (first[k].shape[-1], k))  # output order: by name in LiteRT
    expected_by_shape = sorted(range(3), key=lambda k: (expected[k].shape[-1], k))
    ordered = [expected[k] for k in _reorder(by_shape, expected_by_shape)]
    assert_runs_like(model, [x], ordered)
    if LSTM_OP in KERNELS:  # numlite's kernel leaves the final state in the variables too
        assert_runs_like(model, [x], ordered, runtime="numlite")


def _reorder(actual_order: list[int], expected_order: list[int]) -> list[int]:
    """The permutation taking the expected outputs to the model's output order (matched by
    their last dimension; out and h, both 4 wide, are equal)."""
    mapping = dict(zip(actual_order, expected_order))
    return [mapping[k] for k in range(len(actual_order))]


def test_masked_tf_keras_lstm_is_a_loop_and_the_report_says_why():
    """The fused op cannot skip masked steps: the fusion declines the function, which is inlined
    as tf_keras wrote it (a WHILE loop) and gives Keras's results."""
    tf_keras.utils.set_random_seed(3)
    inputs = tf_keras.Input((STEPS,), batch_size=2, dtype="int32")
    x = tf_keras.layers.Embedding(10, FEATURES, mask_zero=True)(inputs)
    keras_model = tf_keras.Model(inputs, tf_keras.layers.LSTM(4)(x))
    converter = numlite.TFLiteConverter.from_keras_model(keras_model)
    data = converter.convert()
    ops = all_op_names(data)
    assert "WHILE" in ops and "UNIDIRECTIONAL_SEQUENCE_LSTM" not in ops, ops
    assert any("standard_lstm" in line and "not fused: it is masked" in line for line in converter.report.layers), \
        converter.report.layers
    ids = np.array([[3, 1, 0, 0, 0], [4, 2, 7, 9, 0]], np.int32)[:, :STEPS]  # masked trailing steps
    expected = keras_model(ids).numpy()
    for run in (run_litert, run_numlite):
        assert_close(run(data, [ids])[0], expected)


# -- bring your own LSTM: the spec's LSTMCellSimple contract -------------------------------------

GATE_ORDER = ("cell", "input", "forget", "output")
LN_EPSILON = 1e-8  # the fused op's layer normalisation epsilon


def cell_math(x, weight, bias, projection, layer_norm_scale=None, cifg=False, cell_clip=0.0):
    """The contract's LSTM in plain TF: zero state, packed weight [n_input + n_output, G * n_cell]
    with gates cell, input, forget, output (no input gate for CIFG), projection [n_cell, n_output]
    when of rank 2, optional per-gate layer normalisation of ``W [x, h]`` before the bias. ``x`` is
    [batch, time, n_input] (all outputs) or [batch, n_input] (one step)."""
    gates = [g for g in GATE_ORDER if not (cifg and g == "input")]
    n_cell = weight.shape[1] // len(gates)
    n_output = projection.shape[1] if len(projection.shape) == 2 else n_cell
    step = len(x.shape) == 2
    seq = x[:, None] if step else x
    h = tf.zeros([tf.shape(x)[0], n_output])
    c = tf.zeros([tf.shape(x)[0], n_cell])
    outputs = []
    for t in range(seq.shape[1]):
        z = tf.split(tf.matmul(tf.concat([seq[:, t], h], 1), weight), len(gates), axis=1)
        b = tf.split(bias, len(gates))
        pre = {}
        for k, g in enumerate(gates):
            v = z[k]
            if layer_norm_scale is not None:
                mean, var = tf.nn.moments(v, [1], keepdims=True)
                v = (v - mean) / tf.sqrt(var + LN_EPSILON) * tf.split(layer_norm_scale, 4)[GATE_ORDER.index(g)]
            pre[g] = v + b[k]
        f = tf.sigmoid(pre["forget"])
        i = 1.0 - f if cifg else tf.sigmoid(pre["input"])
        c = f * c + i * tf.tanh(pre["cell"])
        if cell_clip:
            c = tf.clip_by_value(c, -cell_clip, cell_clip)
        h = tf.sigmoid(pre["output"]) * tf.tanh(c)
        if len(projection.shape) == 2:
            h = tf.matmul(h, projection)
        outputs.append(h)
    return outputs[0] if step else tf.stack(outputs, axis=1)


class Cell(tf.Module):
    """A model calling a contract cell on its weights (variables, frozen at conversion)."""

    def __init__(self, implements, n_input, n_cell, n_output, projection, layer_norm, cifg, step, seed,
                 cell_clip=0.0, batch=None):
        gates = 3 if cifg else 4
        rng = np.random.default_rng(seed)
        self.weight = tf.Variable(rng.uniform(-0.6, 0.6, (n_input + n_output, gates * n_cell)).astype(np.float32))
        self.bias = tf.Variable(rng.uniform(-0.6, 0.6, (gates * n_cell,)).astype(np.float32))
        shape = (n_cell, n_output) if projection else (1,)  # not of rank 2: no projection
        self.projection = tf.Variable(rng.uniform(-0.6, 0.6, shape).astype(np.float32))
        self.scale = tf.Variable(rng.uniform(0.5, 1.5, (4 * n_cell,)).astype(np.float32)) if layer_norm else None
        in_shape = [batch, n_input] if step else [batch, STEPS, n_input]

        @tf.function(experimental_implements=implements, autograph=False)
        def plain(x, weight, bias, projection):
            return cell_math(x, weight, bias, projection, cifg=cifg, cell_clip=cell_clip)

        @tf.function(experimental_implements=implements, autograph=False)
        def normalized(x, weight, bias, projection, layer_norm_scale):
            return cell_math(x, weight, bias, projection, layer_norm_scale, cifg=cifg, cell_clip=cell_clip)

        @tf.function(input_signature=[tf.TensorSpec(in_shape, tf.float32)], autograph=False)
        def call(x):
            if layer_norm:
                return normalized(x, self.weight, self.bias, self.projection, self.scale)
            return plain(x, self.weight, self.bias, self.projection)

        self.call = call


BYO = {  # name: (implements, n_input, n_cell, n_output, projection, layer_norm, cifg, step)
    "simple": ("LSTMCellSimple", 3, 4, 4, False, False, False, False),
    "projection": ("LSTMCellSimple", 3, 5, 2, True, False, False, False),
    "cifg": ("LSTMCellSimple,CoupleInputForgetGates", 3, 4, 4, False, False, True, False),
    "one_step": ("LSTMCellSimple", 3, 4, 3, True, False, False, True),
    "layer_norm": ("LayerNormalizedLstmCellSimple", 3, 4, 4, False, True, False, False),
    "layer_norm_projection": ("LayerNormalizedLstmCellSimple", 2, 5, 3, True, True, False, False),
    "layer_norm_cifg": ("LayerNormalizedLstmCellSimple,CoupleInputForgetGates", 3, 4, 4, False, True, True, False),
}


@functools.cache
def byo(name: str, batch: int | None = 2, cell_clip: float = 0.0) -> tuple[Cell, bytes]:
    implements, *spec = BYO[name]
    if cell_clip:
        implements = f'name: "{implements}" attr {{key: "cell_clip" value {{f: {cell_clip}}}}}'
    module = Cell(implements, *spec, seed=sorted(BYO).index(name), cell_clip=cell_clip, batch=batch)
    converter = numlite.TFLiteConverter.from_concrete_functions([module.call.get_concrete_function()], module)
    return module, converter.convert()


def byo_input(name: str, batch: int, seed: int = 0) -> np.ndarray:
    _, n_input, *_, step = BYO[name]
    return seeded_values((batch, n_input) if step else (batch, STEPS, n_input), np.float32, seed)


@pytest.mark.parametrize("name", sorted(BYO))
def test_byo_cell_is_one_fused_op_matching_tf_in_litert(name):
    module, model = byo(name)
    ops = all_op_names(model)
    assert ops.count(LSTM_OP) == 1 and "FULLY_CONNECTED" not in ops and "WHILE" not in ops, ops
    m = read_model(model)
    (op,) = [op for op in m.subgraphs[0].operators if m.op_name(op) == LSTM_OP]
    cifg, layer_norm, projection = BYO[name][6], BYO[name][5], BYO[name][4]
    assert (op.inputs[1] < 0) == cifg  # no input_to_input_weights: CIFG
    assert (op.inputs[16] >= 0) == projection
    assert all(op.inputs[k] >= 0 for k in range(21 if cifg else 20, 24)) == layer_norm
    x = byo_input(name, 2)
    assert_runs_like(model, [x], [module.call(x).numpy()])


@numlite_kernel
@pytest.mark.parametrize("name", sorted(BYO))
def test_byo_cell_matches_tf_in_numlite(name):
    module, model = byo(name)
    x = byo_input(name, 2)
    assert_runs_like(model, [x], [module.call(x).numpy()], runtime="numlite")


@pytest.mark.parametrize("name", ["simple", "one_step", "layer_norm_projection"])
def test_byo_cell_with_a_dynamic_batch(name):
    module, model = byo(name, batch=None)
    for batch in (1, 3):
        x = byo_input(name, batch, seed=batch)
        assert_runs_like(model, [x], [module.call(x).numpy()])


def test_byo_cell_clip_comes_from_the_signature():
    module, model = byo("simple", cell_clip=0.25)
    assert [o.cell_clip for o in lstm_options(model)] == [0.25]
    x = byo_input("simple", 2) * 4  # large enough for the cell state to reach the clip
    expected = module.call(x).numpy()
    assert not np.allclose(expected, byo("simple")[0].call(x).numpy(), atol=1e-3)  # the clip matters
    assert_runs_like(model, [x], [expected])


def test_byo_cell_with_a_weight_off_the_contract_names_the_function():
    @tf.function(experimental_implements="LSTMCellSimple", autograph=False)
    def cell(x, weight, bias, projection):
        return x[:, :, :2] + tf.reduce_sum(weight) + tf.reduce_sum(bias) + tf.reduce_sum(projection)

    def call(x):
        return cell(x, tf.ones([5, 7]), tf.ones([7]), tf.ones([1]))

    concrete = tf.function(call, input_signature=[tf.TensorSpec([2, STEPS, 3])], autograph=False).get_concrete_function()
    with pytest.raises(numlite.ConversionError, match=r"implements 'LSTMCellSimple'.*7 columns, not 4 gates"):
        numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()


# -- your own fusion with lstm_op ------------------------------------------------------------------


def test_user_fusion_with_lstm_op_and_peepholes():
    """A fusion of one's own, calling numlite.fusion.rnn.lstm_op, with the optional peephole
    weights: the cell in TF (Keras gate layout plus peepholes) against LiteRT."""
    from numlite.fusion.rnn import lstm_op

    units, rng = 4, np.random.default_rng(11)
    kernel = rng.uniform(-0.6, 0.6, (FEATURES, 4 * units)).astype(np.float32)
    recurrent = rng.uniform(-0.6, 0.6, (units, 4 * units)).astype(np.float32)
    bias = rng.uniform(-0.6, 0.6, (4 * units,)).astype(np.float32)
    peep = rng.uniform(-0.6, 0.6, (3, units)).astype(np.float32)

    @tf.function(experimental_implements="test_peephole_lstm", autograph=False)
    def peephole_lstm(x, kernel, recurrent, bias, peep):
        h = tf.zeros([tf.shape(x)[0], units])
        c = tf.zeros([tf.shape(x)[0], units])
        outs = []
        for t in range(x.shape[1]):
            zi, zf, zc, zo = tf.split(tf.matmul(x[:, t], kernel) + tf.matmul(h, recurrent) + bias, 4, axis=1)
            i = tf.sigmoid(zi + peep[0] * c)
            f = tf.sigmoid(zf + peep[1] * c)
            c = f * c + i * tf.tanh(zc)
            h = tf.sigmoid(zo + peep[2] * c) * tf.tanh(c)
            outs.append(h)
        return tf.stack(outs, axis=1)

    def fuse(b, x, kernel, recurrent, bias, peep):
        gates = ("input", "forget", "cell", "output")
        k = b.op("SPLIT", [0, b.op("TRANSPOSE", [kernel, [1, 0]], outputs=[b.spec((4 * units, FEATURES), "float32")])],
                 outputs=[b.spec((units, FEATURES), "float32")] * 4, num_splits=4)
        r = b.op("SPLIT", [0, b.op("TRANSPOSE", [recurrent, [1, 0]], outputs=[b.spec((4 * units, units), "float32")])],
                 outputs=[b.spec((units, units), "float32")] * 4, num_splits=4)
        bs = b.op("SPLIT", [0, bias], outputs=[b.spec((units,), "float32")] * 4, num_splits=4)
        p = b.op("UNPACK", [peep], outputs=[b.spec((units,), "float32")] * 3, num=3, axis=0)
        weights = {f"input_to_{g}_weights": k[n] for n, g in enumerate(gates)}
        weights.update({f"recurrent_to_{g}_weights": r[n] for n, g in enumerate(gates)})
        weights.update({f"{g}_gate_bias": bs[n] for n, g in enumerate(gates)})
        weights.update({"cell_to_input_weights": p[0], "cell_to_forget_weights": p[1], "cell_to_output_weights": p[2]})
        return lstm_op(b, x, weights, name="peephole")

    def call(x):
        return peephole_lstm(x, kernel, recurrent, bias, peep)

    numlite.fusion.register("test_peephole_lstm")(fuse)
    try:
        concrete = tf.function(call, input_signature=[tf.TensorSpec([None, STEPS, FEATURES])],
                               autograph=False).get_concrete_function()
        model = numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()
    finally:
        numlite.fusion.unregister("test_peephole_lstm")
    assert all_op_names(model).count(LSTM_OP) == 1
    x = seeded_values((3, STEPS, FEATURES), np.float32, 2)
    assert_runs_like(model, [x], [concrete(tf.constant(x)).numpy()])


def test_prefix_registrations_are_listed_and_matched():
    assert "lstm_*" in numlite.fusion.registered()
    key, fusion = numlite.fusion.match("lstm_0b5a")
    assert key == "lstm_*" and fusion is numlite.fusion.lookup("lstm_anything")
    assert numlite.fusion.match("lstm") is None
    assert numlite.fusion.match("LSTMCellSimple")[0] == "LSTMCellSimple"
    assert numlite.fusion.match("LSTMCellSimple,CoupleInputForgetGates")[0] == "LSTMCellSimple,*"


def test_numlite_resets_the_fused_lstm_state_the_official_file_carries_over():
    """Why numlite's tf_keras LSTM has two operators more than the official converter's (two
    FILLs zeroing its state before each run): LiteRT's LSTM overwrites its state tensors with
    the final state, and the official file never resets them, so its second invoke starts
    from the first one's end (pinned: if that changes, the FILLs can go)."""
    tf_keras.utils.set_random_seed(4)
    inputs = tf_keras.Input((STEPS, FEATURES), batch_size=2)
    keras_model = tf_keras.Model(inputs, tf_keras.layers.LSTM(4, return_sequences=True)(inputs))
    ours = numlite.TFLiteConverter.from_keras_model(keras_model).convert()
    official = tf.lite.TFLiteConverter.from_keras_model(keras_model).convert()
    assert sorted(all_op_names(ours)) == ["FILL", "FILL", "UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert all_op_names(official) == ["UNIDIRECTIONAL_SEQUENCE_LSTM"]
    first, second = (seeded_values((2, STEPS, FEATURES), np.float32, seed) for seed in (21, 22))
    expected = keras_model(second).numpy()
    for name, data, interpreter_of in (("official in LiteRT", official, litert_interpreter),
                                       ("numlite in LiteRT", ours, litert_interpreter),
                                       ("numlite in numlite", ours, lambda d: numlite.Interpreter(model_content=d))):
        interpreter = interpreter_of(data)
        interpreter.allocate_tensors()
        index, out = interpreter.get_input_details()[0]["index"], interpreter.get_output_details()[0]["index"]
        for x in (first, second):
            interpreter.set_tensor(index, x)
            interpreter.invoke()
        error = np.max(np.abs(interpreter.get_tensor(out) - expected))
        assert (error > 1e-2) if name.startswith("official") else (error < 1e-5), (name, error)
