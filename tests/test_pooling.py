"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D against LiteRT: window sizes, strides, SAME/VALID
padding (averages over in-bounds pixels only), fused activations, batch resizes and Keras
layers."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, convert_keras, op_names, run_litert
from numlite.model import OperatorCode, read_model, write_model

POOLS = {"MAX_POOL_2D": tf.nn.max_pool2d, "AVERAGE_POOL_2D": tf.nn.avg_pool2d}

# (input shape, window (h, w), strides (h, w), padding)
CASES = [
    ((1, 6, 6, 3), (2, 2), (2, 2), "VALID"),
    ((2, 7, 8, 4), (3, 3), (2, 2), "SAME"),
    ((2, 7, 8, 4), (3, 3), (2, 2), "VALID"),
    ((1, 9, 7, 2), (2, 3), (1, 2), "SAME"),
    ((1, 10, 10, 5), (4, 4), (3, 3), "SAME"),  # windows clipped unevenly at both ends
    ((3, 5, 6, 2), (1, 1), (2, 3), "VALID"),
    ((1, 3, 3, 4), (5, 5), (1, 1), "SAME"),  # window larger than the image
    ((1, 7, 7, 8), (7, 7), (1, 1), "VALID"),  # global pooling
    ((2, 5, 5, 3), (2, 2), (3, 3), "SAME"),  # stride larger than the window
    # Overlapping windows, reduced along rows, then along the columns of the rows' results.
    ((1, 13, 13, 4), (3, 3), (2, 2), "VALID"),  # ResNet50's 3x3/2 pool (after its ZeroPadding2D)
    ((1, 12, 12, 3), (3, 3), (2, 2), "VALID"),  # the last row and column in no window
    ((2, 8, 7, 3), (3, 3), (1, 1), "SAME"),  # stride 1, padding on every side
    ((1, 9, 10, 2), (3, 1), (2, 2), "SAME"),  # rows only, every other column
    ((1, 9, 10, 2), (1, 3), (2, 1), "VALID"),  # columns only, every other row
    # Windows that tile the input (filter = stride, no padding): rows, then columns.
    ((2, 7, 9, 3), (2, 3), (2, 3), "VALID"),  # a row and no column left over
    ((1, 8, 8, 4), (2, 2), (2, 2), "SAME"),  # SAME that needs no padding
    ((1, 5, 8, 2), (1, 2), (1, 2), "VALID"),  # columns only
    ((2, 6, 5, 2), (3, 1), (3, 1), "VALID"),  # rows only
]


def _edit(model, change):
    m = read_model(model)
    change(m, m.subgraphs[0], m.subgraphs[0].operators[0])
    return write_model(m)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool(name, case):
    shape, window, strides, padding = case
    fn = POOLS[name]
    model = convert(lambda x: fn(x, window, strides, padding), [tf.TensorSpec(shape, tf.float32)], key=(name, case))
    assert op_names(model) == [name], op_names(model)
    x = np.random.default_rng(0).uniform(-2, 2, shape).astype(np.float32)
    (expected,) = assert_matches_litert(model, [x])
    # LiteRT agrees with TensorFlow, which never counts padding (in averages nor maxima).
    np.testing.assert_allclose(expected, fn(x, window, strides, padding).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_converter_fused_relu(name):
    fn = POOLS[name]
    model = convert(lambda x: tf.nn.relu(fn(x, 3, 2, "SAME")), [tf.TensorSpec((2, 7, 7, 3), tf.float32)], key=(name, "relu"))
    names = op_names(model)
    assert names[0] == name, names
    assert_matches_litert(model)


@pytest.mark.parametrize("code", [1, 2, 3, 4])  # RELU, RELU_N1_TO_1, RELU6, TANH (no clamp)
@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_fused_activation_written_by_numlite(name, code):
    fn = POOLS[name]
    model = convert(lambda x: fn(x, 2, 1, "SAME"), [tf.TensorSpec((1, 5, 6, 3), tf.float32)], key=(name, "options"))

    def fuse(m, g, op):
        op.builtin_options.fused_activation_function = code

    # Inputs up to +-8 so that RELU6 and RELU_N1_TO_1 both clip.
    x = np.random.default_rng(code).uniform(-8, 8, (1, 5, 6, 3)).astype(np.float32)
    assert_matches_litert(_edit(model, fuse), [x])


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_batch_resize(name):
    fn = POOLS[name]
    model = convert(lambda x: fn(x, 3, 2, "SAME"), [tf.TensorSpec((1, 6, 6, 2), tf.float32)], key=(name, "resize"))
    x = np.random.default_rng(1).uniform(-2, 2, (4, 6, 6, 2)).astype(np.float32)
    assert_matches_litert(model, [x])


def test_max_pool_negative_inputs_ignore_padding():
    """All-negative inputs: a padded border must never win the maximum."""
    model = convert(lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), [tf.TensorSpec((1, 6, 5, 2), tf.float32)], key="max neg")
    x = np.random.default_rng(2).uniform(-9, -1, (1, 6, 5, 2)).astype(np.float32)
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_zero_stride_is_rejected_like_litert(name):
    fn = POOLS[name]
    model = convert(lambda x: fn(x, 2, 2, "VALID"), [tf.TensorSpec((1, 4, 4, 1), tf.float32)], key=(name, "zero stride"))

    def zero_stride(m, g, op):
        op.builtin_options.stride_h = 0

    bad = _edit(model, zero_stride)
    with pytest.raises(Exception):
        run_litert(bad, [np.zeros((1, 4, 4, 1), np.float32)])
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=bad).allocate_tensors()


def test_pool_rank_3_input_is_rejected_like_litert():
    model = convert(lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), [tf.TensorSpec((1, 4, 4, 2), tf.float32)], key="pool rank")

    def rank3(m, g, op):
        g.tensors[op.inputs[0]].shape = (4, 4, 2)
        g.tensors[op.inputs[0]].shape_signature = None

    bad = _edit(model, rank3)
    with pytest.raises(Exception):
        run_litert(bad, [np.zeros((4, 4, 2), np.float32)])
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=bad).allocate_tensors()


KERAS_LAYERS = {
    "max": lambda: tf.keras.layers.MaxPooling2D(3, strides=2, padding="same"),
    "max_valid": lambda: tf.keras.layers.MaxPooling2D((2, 3)),
    "average": lambda: tf.keras.layers.AveragePooling2D(3, strides=2, padding="same"),
    "average_valid": lambda: tf.keras.layers.AveragePooling2D(2, strides=1),
}


@pytest.mark.parametrize("name", sorted(KERAS_LAYERS))
def test_keras_pooling(name):
    def build():
        inputs = tf.keras.Input((9, 8, 3), batch_size=2)
        return tf.keras.Model(inputs, KERAS_LAYERS[name]()(inputs))

    model = convert_keras(build, ("keras pool", name))
    assert op_names(model)[0] in POOLS, op_names(model)
    assert_matches_litert(model)


# ----------------------------------------------------------------------------- L2_POOL_2D


def _l2_pool_model(case):
    """The converter writes sqrt(avg_pool(x²)) as three ops, never L2_POOL_2D; a converted
    MAX_POOL_2D with the same options gets the L2_POOL_2D opcode instead, and LiteRT judges."""
    shape, window, strides, padding = case
    model = convert(lambda x: tf.nn.max_pool2d(x, window, strides, padding), [tf.TensorSpec(shape, tf.float32)], key=("MAX_POOL_2D", case))

    def to_l2(m, g, op):
        m.operator_codes.append(OperatorCode("L2_POOL_2D"))
        op.opcode_index = len(m.operator_codes) - 1

    return _edit(model, to_l2)


@pytest.mark.parametrize("case", CASES[:7], ids=str)
def test_l2_pool(case):
    shape, window, strides, padding = case
    model = _l2_pool_model(case)
    assert op_names(model) == ["L2_POOL_2D"]
    x = np.random.default_rng(3).uniform(-2, 2, shape).astype(np.float32)
    (expected,) = assert_matches_litert(model, [x])
    # The premise: LiteRT's L2 pool is the root of the average of squares over in-bounds pixels.
    reference = tf.sqrt(tf.nn.avg_pool2d(x * x, window, strides, padding)).numpy()
    np.testing.assert_allclose(expected, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("code", [1, 2, 3, 4])
def test_l2_pool_fused_activation(code):
    case = ((1, 5, 6, 3), (2, 2), (1, 1), "SAME")

    def fuse(m, g, op):
        op.builtin_options.fused_activation_function = code

    model = _edit(_l2_pool_model(case), fuse)
    # Roots of mean squares are >= 0; values up to 8 reach the RELU6 and RELU_N1_TO_1 clamps.
    x = np.random.default_rng(code).uniform(-8, 8, (1, 5, 6, 3)).astype(np.float32)
    assert_matches_litert(model, [x])


def test_l2_pool_rejects_integer_input():
    def to_int(m, g, op):
        for t in op.inputs + op.outputs:
            g.tensors[t].type = "INT32"

    bad = _edit(_l2_pool_model(CASES[0]), to_int)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(bad, [np.zeros((1, 6, 6, 3), np.int32)])
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=bad).allocate_tensors()
