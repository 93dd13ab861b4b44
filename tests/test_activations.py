"""Activation ops against LiteRT: the RELU family, TANH, LOGISTIC, LEAKY_RELU (alpha),
HARD_SWISH, GELU (exact and approximate), PRELU (alpha broadcast), ELU and RELU_0_TO_1."""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from helpers import assert_close, assert_matches_litert, convert, convert_keras, op_names, run_numlite
from numlite.model import OperatorCode, read_model, write_model
from test_unary import SPECIALS, retyped, run_litert_builtin

# op name -> (TensorFlow function, low, high): ranges reach the saturated parts of each curve
ACTIVATIONS = {
    "RELU": (tf.nn.relu, -3.0, 3.0),
    "RELU6": (tf.nn.relu6, -4.0, 10.0),
    "RELU_N1_TO_1": (lambda x: tf.clip_by_value(x, -1.0, 1.0), -3.0, 3.0),
    "TANH": (tf.tanh, -12.0, 12.0),
    "LOGISTIC": (tf.sigmoid, -30.0, 30.0),
    "HARD_SWISH": (lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, -6.0, 6.0),
}


def activation_model(name, shape, dtype=tf.float32):
    fn = ACTIVATIONS[name][0]
    model = convert(lambda x: fn(x), [tf.TensorSpec(shape, dtype)], key=("activation", name, shape))
    assert op_names(model) == [name]
    return model


@pytest.mark.parametrize("shape", [(), (4, 33), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(name, shape):
    _, low, high = ACTIVATIONS[name]
    x = np.random.default_rng(len(shape)).uniform(low, high, shape).astype(np.float32)
    assert_matches_litert(activation_model(name, shape), [x])


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_special_values(name):
    """NaN, infinities, zeros and huge values, against LiteRT's builtin kernels."""
    model = activation_model(name, SPECIALS.shape)
    assert_close(run_numlite(model, [SPECIALS])[0], run_litert_builtin(model, [SPECIALS])[0])


def test_logistic_keeps_its_relative_accuracy_in_the_tail():
    """Down to sigmoid(-87) ~ 1.6e-38 every output is within 1e-5 of LiteRT's and of float64
    *relative to itself* (atol at float32's smallest normal number): a formula that cancels
    (0.5 + 0.5 * tanh(x / 2)) or rounds its exponent (exp2(x * log2(e))) would not be."""
    model = activation_model("LOGISTIC", (4096,))
    x = np.linspace(-87, 12, 4096).astype(np.float32)
    ours = run_numlite(model, [x])[0]
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(ours, exact, rtol=1e-6, atol=1.2e-38)  # a few ulps
    np.testing.assert_allclose(ours, run_litert_builtin(model, [x])[0], rtol=1e-5, atol=1.2e-38)


@pytest.mark.parametrize("name", ["TANH", "LOGISTIC"])
def test_float16_activation(name):
    model = retyped(activation_model(name, (64,)), "FLOAT16")
    x = np.linspace(-9, 9, 64).astype(np.float16)
    assert_matches_litert(model, [x], rtol=1e-3, atol=1e-3)  # float16 results: one half-ulp is ~5e-4


@pytest.mark.parametrize("alpha", [0.2, 0.01, 2.0, -0.5])
def test_leaky_relu(alpha):
    """alpha > 1 and alpha < 0 tell a select (x > 0 ? x : alpha x) from max(x, alpha x)."""
    model = convert(lambda x: tf.nn.leaky_relu(x, alpha), [tf.TensorSpec((3, 40), tf.float32)], key=("leaky", alpha))
    assert op_names(model) == ["LEAKY_RELU"]
    assert_matches_litert(model)
    assert_close(run_numlite(model, [SPECIALS.reshape(3, 8).repeat(5, axis=1)])[0],
                 run_litert_builtin(model, [SPECIALS.reshape(3, 8).repeat(5, axis=1)])[0])  # fmt: skip


def _same_bits(actual, expected):
    """Equal bit for bit (-0.0 and 0.0 told apart), NaN where LiteRT has NaN."""
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan].view(np.int32), expected[~nan].view(np.int32))


@pytest.mark.parametrize("alpha", [0.2, 1.0])
def test_leaky_relu_as_a_maximum_is_the_select_bit_for_bit(alpha):
    """With 0 < alpha <= 1 LEAKY_RELU runs as max(x, alpha * x), which must give the select's
    own operands: the same bits as LiteRT's builtin kernel, signed zeros, infinities, NaN
    and values that alpha * x rounds included. (Not subnormals: invoke reads them as zero,
    as LiteRT's default delegate does; see numlite.interpreter.denormals.)"""
    model = convert(lambda x: tf.nn.leaky_relu(x, alpha), [tf.TensorSpec((4096,), tf.float32)], key=("leaky bits", alpha))
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-30, 37, 4096)).astype(np.float32)
    x[: SPECIALS.size] = SPECIALS
    _same_bits(run_numlite(model, [x])[0], run_litert_builtin(model, [x])[0])


def test_prelu_with_slopes_in_0_1_is_the_select_bit_for_bit():
    """Keras' PReLU starts its slopes at 0.25: slopes in (0, 1] run as a maximum, with LiteRT's
    bits (the select's operands) on ordinary and special values alike."""

    def build():
        init = tf.keras.initializers.RandomUniform(0.01, 1.0, seed=4)
        return tf.keras.Sequential([tf.keras.Input((8, 6)), tf.keras.layers.PReLU(alpha_initializer=init, shared_axes=[1])])

    model = convert_keras(build, key=("prelu", "slopes in (0, 1]"))
    assert op_names(model) == ["PRELU"]
    x = np.random.default_rng(8).uniform(-5, 5, (4, 8, 6)).astype(np.float32)
    x.reshape(-1)[: SPECIALS.size] = SPECIALS
    _same_bits(run_numlite(model, [x])[0], run_litert_builtin(model, [x])[0])


@pytest.mark.parametrize("shape", [(5, 40), (2, 3, 7)], ids=str)
@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(approximate, shape):
    model = convert(lambda x: tf.nn.gelu(x, approximate=approximate), [tf.TensorSpec(shape, tf.float32)],
                    key=("gelu", approximate, shape))  # fmt: skip
    assert op_names(model) == ["GELU"]
    x = np.random.default_rng(7).uniform(-12, 12, shape).astype(np.float32)
    expected = assert_matches_litert(model, [x])
    # and LiteRT agrees with TensorFlow, so the option really selects the formula under test
    np.testing.assert_allclose(expected[0], tf.nn.gelu(x, approximate=approximate).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_special_values(approximate):
    model = convert(lambda x: tf.nn.gelu(x, approximate=approximate), [tf.TensorSpec(SPECIALS.shape, tf.float32)],
                    key=("gelu", approximate, SPECIALS.shape))  # fmt: skip
    assert_close(run_numlite(model, [SPECIALS])[0], run_litert_builtin(model, [SPECIALS])[0])


def test_gelu_dense_grid():
    """Every 1/64 from -9 to 9: the exact GELU's erfc must hold one float32 ulp all along."""
    x = np.arange(-9, 9, 1 / 64, dtype=np.float32)
    model = convert(lambda t: tf.nn.gelu(t, approximate=False), [tf.TensorSpec(x.shape, tf.float32)], key="gelu-grid")
    assert_matches_litert(model, [x], rtol=1e-6, atol=1e-6)


def prelu_model(input_shape, shared_axes):
    def build():
        layer = tf.keras.layers.PReLU(
            alpha_initializer=tf.keras.initializers.RandomUniform(-1.0, 1.0, seed=3), shared_axes=shared_axes
        )
        return tf.keras.Sequential([tf.keras.Input(input_shape), layer])

    model = convert_keras(build, key=("prelu", input_shape, None if shared_axes is None else tuple(shared_axes)))
    assert op_names(model) == ["PRELU"]
    return model


@pytest.mark.parametrize(
    "input_shape,shared_axes",
    [((4, 5, 3), None), ((4, 5, 3), [1, 2]), ((6,), None), ((4, 5, 3), [1]), ((3, 4, 2), [2])],
    ids=str,
)
def test_prelu(input_shape, shared_axes):
    model = prelu_model(input_shape, shared_axes)
    assert_matches_litert(model)
    x = np.random.default_rng(5).uniform(-3, 3, (3,) + input_shape).astype(np.float32)  # batch of 3
    assert_matches_litert(model, [x])


def test_prelu_alpha_growing_the_input_is_rejected():
    """Alpha (4, 5, 3) against an input resized to (1, 1, 5, 3) would broadcast the output to
    (1, 4, 5, 3): LiteRT's PRELU kernel refuses it at allocation and so does numlite. (The
    XNNPACK delegate, when it takes the node, accepts it: numlite follows the builtin kernel.)"""
    model = prelu_model((4, 5, 3), None)
    litert = LiteRTInterpreter(
        model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    litert.resize_tensor_input(litert.get_input_details()[0]["index"], [1, 1, 5, 3])
    with pytest.raises(RuntimeError):
        litert.allocate_tensors()
    ours = numlite.Interpreter(model_content=model)
    ours.resize_tensor_input(ours.get_input_details()[0]["index"], [1, 1, 5, 3])
    with pytest.raises(numlite.PrepareError):
        ours.allocate_tensors()


@pytest.mark.parametrize("name", ["RELU", "TANH", "HARD_SWISH"])
def test_integer_input_rejected(name):
    """LiteRT only finds out at invoke (its eval switches on the type); numlite refuses the
    model at allocate_tensors."""
    model = retyped(activation_model(name, (4,)), "INT32")
    litert = LiteRTInterpreter(model_content=model)
    with pytest.raises(RuntimeError):
        litert.allocate_tensors()
        litert.invoke()
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=model).allocate_tensors()


# ----------------------------------------------------------------------------- ELU, RELU_0_TO_1


@pytest.mark.parametrize("shape", [(), (4, 33), (2, 3, 4, 5)], ids=str)
def test_elu(shape):
    model = convert(lambda x: tf.nn.elu(x), [tf.TensorSpec(shape, tf.float32)], key=("elu", shape))
    assert op_names(model) == ["ELU"]
    x = np.random.default_rng(11).uniform(-8, 3, shape).astype(np.float32)
    assert_matches_litert(model, [x])


def test_elu_special_values():
    model = convert(lambda x: tf.nn.elu(x), [tf.TensorSpec(SPECIALS.shape, tf.float32)], key=("elu", "specials"))
    assert_matches_litert(model, [SPECIALS])


def test_relu_0_to_1_written_by_numlite():
    """The converter lowers tf.clip_by_value(x, 0, 1) to MINIMUM + RELU, never RELU_0_TO_1, so
    the RELU of that model is turned into RELU_0_TO_1 with numlite's writer and LiteRT judges."""
    model = read_model(
        convert(lambda x: tf.clip_by_value(x, 0.0, 1.0), [tf.TensorSpec((3, 40), tf.float32)], key="clip 0 1")
    )
    assert [model.op_name(op) for op in model.subgraphs[0].operators] == ["MINIMUM", "RELU"]
    relu = model.subgraphs[0].operators[1]
    model.operator_codes.append(OperatorCode("RELU_0_TO_1"))
    relu.opcode_index = len(model.operator_codes) - 1
    relu.inputs = [model.subgraphs[0].inputs[0]]  # bypass the MINIMUM: RELU_0_TO_1 alone clamps
    data = write_model(model)
    assert op_names(data)[1] == "RELU_0_TO_1"
    x = np.random.default_rng(12).uniform(-2, 3, (3, 40)).astype(np.float32)
    x[0, :len(SPECIALS)] = SPECIALS
    assert_matches_litert(data, [x])


def test_elu_integer_input_rejected():
    model = retyped(convert(lambda x: tf.nn.elu(x), [tf.TensorSpec((4,), tf.float32)], key=("elu", (4,))), "INT32")
    litert = LiteRTInterpreter(model_content=model)
    with pytest.raises(RuntimeError):
        litert.allocate_tensors()
        litert.invoke()
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=model).allocate_tensors()


def test_exact_gelu_in_blocks(monkeypatch):
    """The exact GELU runs in blocks of activations.GELU_BLOCK values (here 96, so that a
    tensor of 1000 has ten and a partial one), with LiteRT's results to a few ulps, the
    negative tail included, over several invokes (the block buffers are working memory from
    the arena)."""
    from numlite.kernels import activations

    monkeypatch.setattr(activations, "GELU_BLOCK", 96)
    model = convert(lambda x: tf.nn.gelu(x, approximate=False), [tf.TensorSpec((10, 100), tf.float32)], key=("gelu", "blocks"))
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for seed in range(2):
        x = np.random.default_rng(seed).uniform(-9, 9, (10, 100)).astype(np.float32)
        x.reshape(-1)[: SPECIALS.size] = SPECIALS
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        assert_close(actual, run_litert_builtin(model, [x])[0], rtol=1e-6, atol=1e-30)  # as test_gelu_dense_grid
