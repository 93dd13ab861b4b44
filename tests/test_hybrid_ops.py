"""Hybrid (dynamic-range) ops against LiteRT: int8 weights, float32 activations quantized on the fly.

Models come from the official converter with ``optimizations = [tf.lite.Optimize.DEFAULT]``
(tf_keras LSTM layers fuse to UNIDIRECTIONAL_SEQUENCE_LSTM, which that makes hybrid; a function
marked ``experimental_implements="embedding_matmul"`` becomes a hybrid EMBEDDING_LOOKUP with one
scale per table row). A few options the converter always sets one way (asymmetric input
quantization, batch-major layout) are flipped by editing the converted model.

Tolerances: the hybrid math is float32 after exact integer dot products, so outputs match
LiteRT's reference kernels (BUILTIN_REF) and its default kernels to float32 rounding (1e-5 on
outputs of order one; the differences seen are a few ulp, from NumPy's and LiteRT's tanh and
sigmoid). An embedding lookup is one rounding (int8 times scale): exactly equal.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from helpers import convert, run_interpreter, run_numlite

LSTM_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
STEPS, FEATURES = 5, 40  # hybrid quantization needs weights of 1024 elements or more


def litert(model: bytes, inputs, reference: bool) -> list[np.ndarray]:
    kwargs = {"experimental_op_resolver_type": OpResolverType.BUILTIN_REF} if reference else {}
    return run_interpreter(LiteRTInterpreter(model_content=model, **kwargs), inputs)


def op_tensors(model: bytes, op: str) -> list[np.dtype]:
    """The dtypes of every input (None when omitted) of each ``op`` in subgraph 0."""
    m = numlite.model.read_model(model)
    sg = m.subgraphs[0]
    found = [[sg.tensors[i].dtype if i >= 0 else None for i in node.inputs]
             for node in sg.operators if m.op_name(node) == op]
    assert found, f"{op} is not in the model"
    return found


def edit_options(model: bytes, op: str, **values) -> bytes:
    """The model with ``values`` set in the options of every ``op``."""
    m = numlite.model.read_model(model)
    for node in m.subgraphs[0].operators:
        if m.op_name(node) == op:
            for name, value in values.items():
                assert hasattr(node.builtin_options, name)
                setattr(node.builtin_options, name, value)
    return numlite.model.write_model(m)


def assert_matches(model: bytes, inputs, exact: bool = False, default_bound: float = 1e-5) -> None:
    """numlite against LiteRT's reference kernels (rtol = atol = 1e-5, or exactly) and its
    default kernels (within ``default_bound``, or exactly)."""
    actual = run_numlite(model, inputs)
    for reference in (True, False):
        expected = litert(model, inputs, reference)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and a.shape == e.shape
            if exact:
                np.testing.assert_array_equal(a, e, err_msg=f"reference={reference}")
            elif reference:
                np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_allclose(a, e, rtol=0, atol=default_bound, err_msg="default kernels")


# ------------------------------------------------------------------------------ LSTM

KERAS_LSTMS = {  # two conversions only: the official converter takes seconds per LSTM model
    "sequences": lambda: [tf_keras.layers.LSTM(32, return_sequences=True)],
    "stacked": lambda: [tf_keras.layers.LSTM(40, return_sequences=True, go_backwards=True), tf_keras.layers.LSTM(24)],
}
BATCH = {"sequences": STEPS}  # batch == steps: the same model read time-major is valid too


@functools.cache
def keras_lstm(name: str) -> bytes:
    """A tf_keras LSTM model with seeded weights, dynamic-range quantized by the official converter."""
    tf_keras.utils.set_random_seed(0)
    inputs = tf_keras.Input((STEPS, FEATURES), batch_size=BATCH.get(name, 3))
    x = inputs
    for layer in KERAS_LSTMS[name]():
        x = layer(x)
    model = tf_keras.Model(inputs, x)
    rng = np.random.default_rng(sorted(KERAS_LSTMS).index(name))
    model.set_weights([rng.uniform(-0.3, 0.3, w.shape).astype(np.float32) for w in model.get_weights()])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def lstm_input(name: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (BATCH.get(name, 3), STEPS, FEATURES)).astype(np.float32)


def test_tf_keras_lstm_is_a_hybrid_fused_op():
    first, second = op_tensors(keras_lstm("stacked"), LSTM_OP)
    assert first[0] == np.float32
    assert all(d == np.int8 for d in first[1:9])  # input and recurrent weights
    assert all(d == np.float32 for d in first[12:16])  # gate biases
    # The second layer's matrices (24 x 40, 24 x 24) are under the converter's 1024-element
    # threshold: it stays float, fed by the hybrid one.
    assert all(d == np.float32 for d in second if d is not None)
    m = numlite.model.read_model(keras_lstm("sequences"))
    (options,) = [n.builtin_options for n in m.subgraphs[0].operators if m.op_name(n) == LSTM_OP]
    assert options.asymmetric_quantize_inputs and not options.time_major


@pytest.mark.parametrize("asymmetric", [True, False], ids=["asymmetric", "symmetric"])
@pytest.mark.parametrize("name", sorted(KERAS_LSTMS))
def test_hybrid_lstm_matches_litert(name, asymmetric):
    model = edit_options(keras_lstm(name), LSTM_OP, asymmetric_quantize_inputs=asymmetric)
    for seed in (0, 1):
        assert_matches(model, [lstm_input(name, seed)])


@pytest.mark.parametrize("asymmetric", [True, False], ids=["asymmetric", "symmetric"])
def test_hybrid_lstm_time_major(asymmetric):
    model = edit_options(keras_lstm("sequences"), LSTM_OP, time_major=True, asymmetric_quantize_inputs=asymmetric)
    assert_matches(model, [lstm_input("sequences", 2)])


def test_hybrid_lstm_state_carries_into_the_next_invoke_as_in_litert():
    """The official model's states are variables: the second invoke starts from the first's end."""
    model, x = keras_lstm("stacked"), lstm_input("stacked", 3)
    runs = {}
    for name, it in (("numlite", numlite.Interpreter(model_content=model)),
                     ("LiteRT", LiteRTInterpreter(model_content=model,
                                                  experimental_op_resolver_type=OpResolverType.BUILTIN_REF))):
        it.allocate_tensors()
        index, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
        runs[name] = []
        for _ in range(2):
            it.set_tensor(index, x)
            it.invoke()
            runs[name].append(it.get_tensor(out).copy())
    assert np.abs(runs["LiteRT"][0] - runs["LiteRT"][1]).max() > 1e-3  # the state did carry over
    for a, e in zip(runs["numlite"], runs["LiteRT"]):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_hybrid_lstm_with_per_channel_weights_is_refused():
    m = numlite.model.read_model(keras_lstm("sequences"))
    sg = m.subgraphs[0]
    node = next(n for n in sg.operators if m.op_name(n) == LSTM_OP)
    q = sg.tensors[node.inputs[2]].quantization  # input-to-forget weights [32, 40]
    q.scale = np.repeat(q.scale, 32)
    q.zero_point = np.zeros(32, np.int64)
    q.quantized_dimension = 0
    with pytest.raises(numlite.errors.NumliteError, match=r"UNIDIRECTIONAL_SEQUENCE_LSTM.*one scale"):
        run_numlite(numlite.model.write_model(m), [lstm_input("sequences", 0)])


# ------------------------------------------------------------------------------ BIDIRECTIONAL_SEQUENCE_LSTM

BILSTM_OP = "BIDIRECTIONAL_SEQUENCE_LSTM"


@functools.cache
def keras_bilstm(sequences: bool) -> bytes:
    """A Keras 3 Bidirectional(LSTM) with seeded weights, dynamic-range quantized by numlite's
    converter (the official one keeps two loops; numlite fuses one BIDIRECTIONAL_SEQUENCE_LSTM,
    which LiteRT runs with its hybrid kernel)."""
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((STEPS, FEATURES), batch_size=3)
    x = keras.layers.Bidirectional(keras.layers.LSTM(32, return_sequences=sequences))(inputs)
    model = keras.Model(inputs, x)
    rng = np.random.default_rng(5)
    model.set_weights([rng.uniform(-0.3, 0.3, w.shape).astype(np.float32) for w in model.get_weights()])
    converter = numlite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [numlite.Optimize.DEFAULT]
    return converter.convert()


@pytest.mark.parametrize("asymmetric", [True, False], ids=["asymmetric", "symmetric"])
@pytest.mark.parametrize("sequences", [False, True], ids=["last", "sequences"])
def test_hybrid_bidirectional_lstm_matches_litert(sequences, asymmetric):
    model = keras_bilstm(sequences)
    (dtypes,) = op_tensors(model, BILSTM_OP)
    assert dtypes[0] == np.float32
    assert all(d == np.int8 for d in dtypes[1:9] + dtypes[18:26])  # both directions' matrices
    model = edit_options(model, BILSTM_OP, asymmetric_quantize_inputs=asymmetric)
    for seed in (0, 1):
        assert_matches(model, [lstm_input("stacked", seed)])


# ------------------------------------------------------------------------------ EMBEDDING_LOOKUP

TABLE = np.random.default_rng(11).normal(0, 1, (100, 16)).astype(np.float32)  # 1600 elements: quantized


@functools.cache
def embedding_model() -> bytes:
    @tf.function(experimental_implements="embedding_matmul")
    def lookup(table, ids):
        return tf.gather(table, ids)

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.table = tf.Variable(TABLE)

        @tf.function(input_signature=[tf.TensorSpec((None,), tf.int32)])
        def f(self, ids):
            return lookup(self.table, ids)

    module = Module()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.f.get_concrete_function()], module)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


IDS = np.array([3, 0, 99, 3, 57, 12], np.int32)


def test_hybrid_embedding_lookup_per_row_scales():
    model = embedding_model()
    ((ids, table),) = op_tensors(model, "EMBEDDING_LOOKUP")
    assert ids == np.int32 and table == np.int8
    m = numlite.model.read_model(model)
    sg = m.subgraphs[0]
    assert len(sg.tensors[sg.operators[0].inputs[1]].quantization.scale) == TABLE.shape[0]  # one per row
    assert_matches(model, [IDS], exact=True)  # int8 times its scale: one rounding


def test_hybrid_embedding_lookup_one_scale():
    m = numlite.model.read_model(embedding_model())
    sg = m.subgraphs[0]
    q = sg.tensors[sg.operators[0].inputs[1]].quantization
    q.scale, q.zero_point = q.scale[:1].copy(), q.zero_point[:1].copy()
    assert_matches(numlite.model.write_model(m), [IDS], exact=True)


def test_hybrid_embedding_lookup_out_of_range_id_is_refused():
    with pytest.raises(numlite.errors.NumliteError, match="EMBEDDING_LOOKUP"):
        run_numlite(embedding_model(), [np.array([1, 100], np.int32)])


# ------------------------------------------------------------------------------ rounding ties

RNG = np.random.default_rng(5)
DW_W = RNG.normal(0, 0.5, (3, 3, 64, 2)).astype(np.float32)
CONV_W = RNG.normal(0, 0.2, (3, 3, 16, 32)).astype(np.float32)
FC_W = RNG.normal(0, 0.2, (64, 32)).astype(np.float32)
FC_B = RNG.normal(0, 0.5, 32).astype(np.float32)


def _depthwise(x):
    return tf.nn.depthwise_conv2d(x, DW_W, [1, 1, 1, 1], "SAME")


def _conv(x):
    return tf.nn.conv2d(x, CONV_W, 1, "SAME")


def _fc(x):
    return tf.matmul(x, FC_W) + FC_B


TIE_CASES = {  # fn, input shape, op, the largest sum of |weights| feeding one output
    "depthwise": (_depthwise, (2, 6, 6, 64), "DEPTHWISE_CONV_2D", np.abs(DW_W).sum(axis=(0, 1)).max()),
    "conv": (_conv, (2, 6, 6, 16), "CONV_2D", np.abs(CONV_W).sum(axis=(0, 1, 2)).max()),
    "fully_connected": (_fc, (4, 64), "FULLY_CONNECTED", np.abs(FC_W).sum(axis=0).max()),
}


def tie_input(shape, seed: int) -> np.ndarray:
    """Values k / 127.5 over [-2, 2], both ends present: the asymmetric scale is 4 / 255, so
    every odd k sits on a rounding tie, where the zero point (-1 here) is added after rounding."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-255, 256, shape) / 127.5
    flat = x.reshape(shape[0], -1)
    flat[:, 0], flat[:, 1] = -2.0, 2.0
    return x.astype(np.float32)


@pytest.mark.parametrize("name", sorted(TIE_CASES))
def test_hybrid_rounding_ties(name):
    fn, shape, op, weight_sum = TIE_CASES[name]
    model = convert(fn, [tf.TensorSpec(shape, tf.float32)], key=(name, "hybrid ties"),
                    optimizations=[tf.lite.Optimize.DEFAULT])
    ((x_type, w_type, *_),) = op_tensors(model, op)
    assert x_type == np.float32 and w_type == np.int8
    # LiteRT's default CONV_2D and FULLY_CONNECTED run in XNNPACK, which quantizes the inputs its
    # own way: each quantized input may then differ by one step (4 / 255) from the reference's,
    # an output by that step times its weights' magnitudes (1% more for their own rounding).
    # Its DEPTHWISE_CONV_2D is LiteRT's own kernel, as the reference's.
    bound = 1e-5 if op == "DEPTHWISE_CONV_2D" else 4 / 255 * weight_sum * 1.01
    for seed in range(3):
        assert_matches(model, [tie_input(shape, seed)], default_bound=bound)


def test_hybrid_rounds_just_below_half_like_litert():
    """LiteRT's input quantizer sends the largest float32 below 0.5 to 1, as ``floor(x + 0.5)``
    does (the sum is a tie that rounds to even, 1.0) and C's round() would not (0): numlite's
    ``round_half_away`` is that expression, and this test fails with an exact round. Symmetric
    quantization of an input whose largest magnitude is 127 uses the factor 127 / 127 = 1, so
    the input values are quantized as they are."""
    fn, shape, op, weight_sum = TIE_CASES["fully_connected"]
    model = convert(fn, [tf.TensorSpec(shape, tf.float32)], key=("fully_connected", "hybrid ties"),
                    optimizations=[tf.lite.Optimize.DEFAULT])
    model = edit_options(model, op, asymmetric_quantize_inputs=False)
    below_half = np.nextafter(np.float32(0.5), np.float32(0))
    rng = np.random.default_rng(11)
    x = rng.choice(np.array([below_half, -below_half, 1.5, -2.5, 0.0], np.float32), shape)
    x[:, 0], x[:, 1] = -127.0, 127.0
    assert_matches(model, [x], default_bound=weight_sum * 1.01)  # XNNPACK: see test_hybrid_rounding_ties
