"""numlite's converter on neural-network ops: convolutions, matrix products, pooling, batch
normalization, the Keras layers built from them, and the model-level fusions (bias, scale,
padding, activation) that make them single TFLite operators.

Every model is converted by numlite and run in both numlite and LiteRT; both must give
TensorFlow's results. Weights are closed-over constants (as in a frozen model); the data is
always a function argument, so the op under test runs rather than being constant-folded.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_close, assert_converts, run_litert, run_numlite, seeded_values

import numlite
from numlite.model import read_model


def f32(*shape):
    return tf.TensorSpec(shape, tf.float32)


def weights(shape, seed, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(np.float32)


def data(shape, seed=0):
    return seeded_values(shape, tf.float32, seed)


def only_op(model):
    """The single operator of a model (after asserting there is just one) and its subgraph."""
    m = read_model(model)
    assert all_op_names(model) == [m.op_name(m.subgraphs[0].operators[0])], all_op_names(model)
    return m.subgraphs[0].operators[0], m.subgraphs[0]


def activation_of(op):
    return op.builtin_options.fused_activation_function


def assert_keras_converts(model, x, rtol=1e-5, atol=1e-5):
    """Convert a Keras model with numlite; numlite and LiteRT must give ``model(x)``."""
    tflite = numlite.TFLiteConverter.from_keras_model(model).convert()
    expected = model(x, training=False).numpy()
    for run in (run_numlite, run_litert):
        (actual,) = run(tflite, [x])
        assert_close(actual, expected, rtol, atol, what=f"{run.__name__}: ")
    return tflite


# -- Conv2D ------------------------------------------------------------------------------------

# input (batch dynamic), filter HWIO, strides, dilations, padding
CONV_CASES = [
    ((2, 7, 7, 3), (3, 3, 3, 4), (1, 1), (1, 1), "SAME"),
    ((2, 8, 9, 3), (3, 2, 3, 5), (2, 2), (1, 1), "SAME"),
    ((2, 9, 9, 2), (3, 3, 2, 4), (2, 1), (1, 1), "VALID"),
    ((1, 10, 9, 4), (3, 3, 4, 2), (1, 1), (2, 3), "SAME"),
    ((3, 11, 11, 2), (2, 3, 2, 3), (1, 1), (2, 2), "VALID"),
    ((2, 5, 5, 6), (1, 1, 6, 8), (1, 1), (1, 1), "VALID"),
    ((2, 7, 8, 3), (3, 3, 3, 4), (1, 2), (1, 1), [[0, 0], [1, 2], [0, 1], [0, 0]]),  # EXPLICIT
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d(case):
    shape, kernel, strides, dilations, padding = case
    w = weights(kernel, 1)
    model = assert_converts(
        lambda x: tf.nn.conv2d(x, w, strides, padding, dilations=dilations),
        [f32(None, *shape[1:])], [data(shape)])
    assert "CONV_2D" in all_op_names(model)
    assert ("PAD" in all_op_names(model)) == isinstance(padding, list)  # these explicit pads are not SAME's


def test_conv2d_explicit_padding_equal_to_same_becomes_same():
    """Explicit pads that are SAME's for the (static) input size fold into the convolution."""
    w = weights((3, 3, 2, 4), 2)
    model = assert_converts(lambda x: tf.nn.conv2d(x, w, 2, [[0, 0], [0, 1], [0, 1], [0, 0]]),
                            [f32(None, 8, 8, 2)], [data((2, 8, 8, 2))])
    op, _ = only_op(model)
    assert op.builtin_options.padding == 0  # SAME


def test_conv2d_filter_known_only_at_run_time():
    model = assert_converts(lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"), [f32(None, 6, 6, 3), f32(3, 3, 3, 2)],
                            [data((2, 6, 6, 3)), data((3, 3, 3, 2), 1)])
    assert all_op_names(model) == ["TRANSPOSE", "CONV_2D"]


@pytest.mark.parametrize("groups", [2, 3])
def test_grouped_conv2d(groups):
    """TFLite's CONV_2D is grouped when the input has a multiple of the filter's channels,
    as TF's Conv2D is: one operator, no split."""
    w = weights((3, 3, 2, 2 * groups), 3)
    image = data((2, 6, 6, 2 * groups))
    model = assert_converts(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [f32(None, 6, 6, 2 * groups)], [image])
    assert all_op_names(model) == ["CONV_2D"]
    # LiteRT's own kernel (not only its default XNNPACK delegate) runs grouped convolutions.
    assert_close(run_litert(model, [image], builtin_only=True)[0], tf.nn.conv2d(image, w, 1, "SAME").numpy())


def test_keras_grouped_conv2d():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((8, 8, 6)), tf.keras.layers.Conv2D(4, 3, groups=2, activation="relu")])
    tflite = assert_keras_converts(model, data((2, 8, 8, 6)))
    assert all_op_names(tflite) == ["CONV_2D"]


# -- DepthwiseConv2dNative ---------------------------------------------------------------------

# input (batch dynamic), kernel, depth multiplier, strides, dilations, padding
DEPTHWISE_CASES = [
    ((2, 7, 7, 3), (3, 3), 1, (1, 1), (1, 1), "SAME"),
    ((2, 8, 9, 4), (3, 3), 2, (2, 2), (1, 1), "SAME"),
    ((1, 9, 9, 2), (5, 5), 3, (1, 1), (1, 1), "VALID"),
    ((2, 10, 9, 3), (3, 3), 1, (1, 1), (2, 2), "SAME"),
    ((1, 11, 11, 2), (3, 2), 2, (1, 1), (2, 3), "VALID"),
    ((2, 7, 7, 3), (3, 3), 1, (2, 2), (1, 1), [[0, 0], [1, 1], [1, 1], [0, 0]]),  # EXPLICIT
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=str)
def test_depthwise_conv2d(case):
    shape, kernel, multiplier, strides, dilations, padding = case
    w = weights(kernel + (shape[3], multiplier), 4)
    # TF's own DepthwiseConv2dNative kernel supports dilations only when TF runs with oneDNN,
    # which it enables on some CPUs only; tf.nn.depthwise_conv2d computes the same everywhere.
    model = assert_converts(
        lambda x: tf.compat.v1.nn.depthwise_conv2d_native(x, w, (1, *strides, 1), padding,
                                                          dilations=(1, *dilations, 1)),
        [f32(None, *shape[1:])], [data(shape)],
        reference=lambda x: tf.nn.depthwise_conv2d(x, w, (1, *strides, 1), padding, dilations=dilations))
    assert "DEPTHWISE_CONV_2D" in all_op_names(model)


def test_keras_depthwise_conv2d_with_bias_and_relu6():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((9, 9, 4)),
        tf.keras.layers.DepthwiseConv2D(3, strides=2, depth_multiplier=2, bias_initializer="random_normal"),
        tf.keras.layers.ReLU(6.0),
    ])  # fmt: skip
    tflite = assert_keras_converts(model, data((3, 9, 9, 4)))
    op, _ = only_op(tflite)
    assert activation_of(op) == 3  # RELU6


def test_keras_separable_conv2d():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 3)),
        tf.keras.layers.SeparableConv2D(5, 3, padding="same", depth_multiplier=2, activation="relu",
                                        bias_initializer="random_normal"),
    ])  # fmt: skip
    tflite = assert_keras_converts(model, data((2, 8, 8, 3)))
    assert all_op_names(tflite) == ["DEPTHWISE_CONV_2D", "CONV_2D"]


# -- Conv2DBackpropInput -----------------------------------------------------------------------


@pytest.mark.parametrize("strides, padding", [(2, "same"), (2, "valid"), (1, "same"), (3, "valid")])
def test_keras_conv2d_transpose(strides, padding):
    """Keras builds the output shape at run time from the (dynamic) batch; bias and ReLU fold
    into the TRANSPOSE_CONV."""
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((5, 6, 3)),
        tf.keras.layers.Conv2DTranspose(4, 3, strides=strides, padding=padding, activation="relu",
                                        bias_initializer="random_normal"),
    ])  # fmt: skip
    tflite = assert_keras_converts(model, data((2, 5, 6, 3)))
    ops = all_op_names(tflite)
    assert ops.count("TRANSPOSE_CONV") == 1 and "ADD" not in ops and "RELU" not in ops, ops


def test_conv2d_transpose_static_output_shape():
    w = weights((3, 3, 2, 4), 5)  # H W out in
    model = assert_converts(lambda x: tf.nn.conv2d_transpose(x, w, (2, 9, 9, 2), 2, "VALID"),
                            [f32(2, 4, 4, 4)], [data((2, 4, 4, 4))])
    assert all_op_names(model) == ["TRANSPOSE_CONV"]


# -- MatMul and BatchMatMul --------------------------------------------------------------------


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_constant_weights(transpose_a, transpose_b):
    b = weights((6, 4) if transpose_b else (4, 6), 6)
    a_shape = (4, None) if transpose_a else (None, 4)
    model = assert_converts(
        lambda a: tf.linalg.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b),
        [f32(*a_shape)], [data((4, 3) if transpose_a else (3, 4))])
    assert all_op_names(model) == ["BATCH_MATMUL" if transpose_a else "FULLY_CONNECTED"]


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_both_operands_at_run_time(transpose_a, transpose_b):
    model = assert_converts(
        lambda a, b: tf.linalg.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b),
        [f32(*((5, 3) if transpose_a else (3, 5))), f32(*((4, 5) if transpose_b else (5, 4)))],
        [data((5, 3) if transpose_a else (3, 5), 1), data((4, 5) if transpose_b else (5, 4), 2)])
    assert all_op_names(model) == ["BATCH_MATMUL"]


def _batch_matmul_v2(x, y, adj_x, adj_y):
    return tf.raw_ops.BatchMatMulV2(x=x, y=y, adj_x=adj_x, adj_y=adj_y)


def _batch_matmul_v3(x, y, adj_x, adj_y):
    return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=tf.float32, adj_x=adj_x, adj_y=adj_y)


# x shape, y shape (before the adjoints), with broadcasting batch dimensions
BATCH_CASES = [
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((3, 4), (2, 4, 2)),
]


@pytest.mark.parametrize("version", [_batch_matmul_v2, _batch_matmul_v3], ids=["V2", "V3"])
@pytest.mark.parametrize("adj_x, adj_y", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shapes", BATCH_CASES, ids=str)
def test_batch_matmul(version, adj_x, adj_y, shapes):
    x_shape, y_shape = shapes
    swap = lambda s, adj: s[:-2] + (s[-1], s[-2]) if adj else s  # noqa: E731
    x_shape, y_shape = swap(x_shape, adj_x), swap(y_shape, adj_y)
    model = assert_converts(lambda x, y: version(x, y, adj_x, adj_y), [f32(*x_shape), f32(*y_shape)],
                            [data(x_shape, 1), data(y_shape, 2)])
    assert all_op_names(model) == ["BATCH_MATMUL"]


@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize("x_shape", [(None, 3, 4), (None, 2, 3, 4), (None, 4)], ids=str)
def test_batch_matmul_constant_matrix_is_fully_connected_keeping_batch_dims(adj_y, x_shape):
    y = weights((5, 4) if adj_y else (4, 5), 7)
    model = assert_converts(lambda x: _batch_matmul_v3(x, y, False, adj_y), [f32(*x_shape)],
                            [data((2,) + x_shape[1:], 3)])
    op, _ = only_op(model)
    assert all_op_names(model) == ["FULLY_CONNECTED"] and op.builtin_options.keep_num_dims


def test_batch_matmul_constant_matrix_with_adjoint_x():
    y = weights((3, 5), 8)
    model = assert_converts(lambda x: _batch_matmul_v2(x, y, True, False), [f32(None, 3, 4)], [data((2, 3, 4))])
    assert all_op_names(model) == ["BATCH_MATMUL"]


def test_keras_dense_on_rank3_inputs():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((5, 8)),
        tf.keras.layers.Dense(6, activation="relu", bias_initializer="random_normal"),
        tf.keras.layers.Dense(3),
    ])  # fmt: skip
    tflite = assert_keras_converts(model, data((2, 5, 8)))
    assert all_op_names(tflite) == ["FULLY_CONNECTED", "FULLY_CONNECTED"]


# -- pooling -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pool, op_name", [(tf.nn.max_pool2d, "MAX_POOL_2D"), (tf.nn.avg_pool2d, "AVERAGE_POOL_2D")])
@pytest.mark.parametrize("ksize, strides, padding", [(2, 2, "VALID"), (3, 2, "SAME"), ((3, 2), (1, 2), "VALID"),
                                                     (3, 1, "SAME")])
def test_pooling(pool, op_name, ksize, strides, padding):
    model = assert_converts(lambda x: pool(x, ksize, strides, padding), [f32(None, 7, 8, 3)], [data((2, 7, 8, 3))])
    assert all_op_names(model) == [op_name]


# -- batch normalization -----------------------------------------------------------------------


def _batch_norm_parameters(channels, seed):
    rng = np.random.default_rng(seed)
    gamma, beta, mean = (rng.uniform(-1, 1, channels).astype(np.float32) for _ in range(3))
    return gamma, beta, mean, rng.uniform(0.5, 2, channels).astype(np.float32)


def test_fused_batch_norm_inference():
    gamma, beta, mean, variance = _batch_norm_parameters(4, 9)

    def fn(x):
        return tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, mean, variance, epsilon=1e-3, is_training=False)[0]

    model = assert_converts(fn, [f32(None, 5, 5, 4)], [data((2, 5, 5, 4))])
    assert all_op_names(model) == ["MUL", "ADD"]


def test_fused_batch_norm_statistics_at_run_time():
    gamma, beta, _, _ = _batch_norm_parameters(3, 10)

    def fn(x, mean, variance):
        return tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, mean, variance, is_training=False)[0]

    variance = np.random.default_rng(11).uniform(0.5, 2, 3).astype(np.float32)
    model = assert_converts(fn, [f32(2, 4, 4, 3), f32(3), f32(3)], [data((2, 4, 4, 3)), data((3,), 1), variance])
    assert "RSQRT" in all_op_names(model)


def test_fused_batch_norm_in_training_mode_is_refused():
    gamma, beta, _, _ = _batch_norm_parameters(3, 12)

    def fn(x):
        return tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, is_training=True)[0]

    concrete = tf.function(fn, input_signature=[f32(2, 4, 4, 3)]).get_concrete_function()
    with pytest.raises(numlite.ConversionError, match="FusedBatchNorm.*training mode"):
        numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()


# -- Keras layers built from several ops -------------------------------------------------------


def test_keras_conv1d():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((12, 3)),
        tf.keras.layers.Conv1D(5, 3, strides=2, padding="same", activation="relu", bias_initializer="random_normal"),
        tf.keras.layers.Conv1D(4, 2, dilation_rate=2, bias_initializer="random_normal"),
    ])  # fmt: skip
    tflite = assert_keras_converts(model, data((2, 12, 3)))
    ops = all_op_names(tflite)
    # The biases (added after the SQUEEZE, and the BATCH_TO_SPACE_ND of the dilated one) and
    # the ReLU move above those layout ops into the convolutions.
    assert ops.count("CONV_2D") == 2 and not {"ADD", "RELU"} & set(ops), ops


# -- fusions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("activation, code", [(tf.nn.relu, 1), (tf.nn.relu6, 3)])
def test_conv_bias_batch_norm_and_activation_become_one_conv(activation, code):
    w, bias = weights((3, 3, 3, 4), 13), weights((4,), 14)
    gamma, beta, mean, variance = _batch_norm_parameters(4, 15)

    def fn(x):
        y = tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), bias)
        y = tf.compat.v1.nn.fused_batch_norm(y, gamma, beta, mean, variance, is_training=False)[0]
        return activation(y)

    model = assert_converts(fn, [f32(None, 6, 6, 3)], [data((2, 6, 6, 3))])
    op, _ = only_op(model)
    assert activation_of(op) == code


def test_conv_output_read_twice_is_not_fused():
    """The bias and the activation cannot move into a convolution whose plain result is also
    read elsewhere."""
    w, bias = weights((3, 3, 2, 3), 16), weights((3,), 17)

    def fn(x):
        y = tf.nn.conv2d(x, w, 1, "SAME")
        return tf.nn.relu(y + bias), y * 2.0

    model = assert_converts(fn, [f32(None, 5, 5, 2)], [data((2, 5, 5, 2))])
    assert sorted(all_op_names(model)) == ["ADD", "CONV_2D", "MUL"]
    m = read_model(model)
    conv = next(op for op in m.subgraphs[0].operators if m.op_name(op) == "CONV_2D")
    assert activation_of(conv) == 0


def test_subtraction_of_a_constant_folds_into_the_bias():
    w, shift = weights((4, 3), 18), weights((3,), 19)
    model = assert_converts(lambda x: tf.nn.relu(tf.matmul(x, w) - shift), [f32(None, 4)], [data((3, 4))])
    op, sg = only_op(model)
    assert activation_of(op) == 1 and len(op.inputs) == 3 and op.inputs[2] >= 0


def test_constant_minus_convolution_is_not_folded():
    w = weights((4, 3), 20)
    model = assert_converts(lambda x: 1.0 - tf.matmul(x, w), [f32(None, 4)], [data((3, 4))])
    assert all_op_names(model) == ["FULLY_CONNECTED", "SUB"]


def test_add_and_relu_become_one_add():
    model = assert_converts(lambda x, y: tf.nn.relu(x + y), [f32(None, 4), f32(None, 4)],
                            [data((3, 4), 1), data((3, 4), 2)])
    op, _ = only_op(model)
    assert activation_of(op) == 1


def test_scale_folds_into_depthwise_weights():
    w, scale = weights((3, 3, 3, 2), 21), weights((6,), 22)
    model = assert_converts(lambda x: tf.compat.v1.nn.depthwise_conv2d_native(x, w, (1, 1, 1, 1), "SAME") * scale,
                            [f32(None, 5, 5, 3)], [data((2, 5, 5, 3))])
    assert all_op_names(model) == ["DEPTHWISE_CONV_2D"]


def test_broadcasting_constant_is_not_folded():
    """A constant with more dimensions than the convolution's output changes its shape."""
    w, c = weights((4, 3), 23), weights((2, 1, 3), 24)
    model = assert_converts(lambda x: tf.matmul(x, w) + c, [f32(None, 4)], [data((5, 4))])
    assert all_op_names(model) == ["FULLY_CONNECTED", "ADD"]


def test_multiplying_by_one_and_adding_zero_are_dropped():
    """Keras' silu multiplies by beta = 1, an unadapted Normalization subtracts 0 and divides
    by 1: none of these need an operator."""
    w = weights((3, 3, 3, 4), 25)

    def fn(x):
        y = (x * 1.0 + 0.0 - np.zeros(3, np.float32)) / np.ones((1, 1, 1, 3), np.float32)
        return tf.nn.conv2d(y, w, 1, "SAME") * 1.0

    model = assert_converts(fn, [f32(None, 5, 5, 3)], [data((2, 5, 5, 3))])
    assert all_op_names(model) == ["CONV_2D"]


def test_identity_arithmetic_that_broadcasts_is_kept():
    model = assert_converts(lambda x: x * np.ones((2, 3), np.float32), [f32(None, 3)], [data((1, 3))])
    assert all_op_names(model) == ["MUL"]


def test_identity_arithmetic_producing_an_output_is_kept():
    model = assert_converts(lambda x: (x * 1.0, x + 2.0), [f32(None, 3)], [data((2, 3))])
    assert sorted(all_op_names(model)) == ["ADD", "MUL"]


def test_explicit_padding_of_an_input_of_unknown_size_stays_a_pad():
    """SAME's amounts depend on the input size, so without it the PAD cannot be folded."""
    w = weights((3, 3, 2, 4), 29)
    model = assert_converts(lambda x: tf.nn.conv2d(x, w, 2, [[0, 0], [0, 1], [0, 1], [0, 0]]),
                            [f32(None, None, None, 2)], [data((2, 8, 8, 2))])
    assert all_op_names(model) == ["PAD", "CONV_2D"]


def test_per_channel_ops_move_above_a_reshape_keeping_the_channels():
    w, bias = weights((3, 3, 2, 4), 32), weights((4,), 33)
    model = assert_converts(lambda x: tf.nn.relu6(tf.reshape(tf.nn.conv2d(x, w, 1, "SAME"), [-1, 20, 4]) * 2.0 + bias),
                            [f32(None, 4, 5, 2)], [data((2, 4, 5, 2))])
    assert all_op_names(model) == ["CONV_2D", "RESHAPE"]


def test_per_channel_ops_stay_after_a_reshape_changing_the_channels():
    w, bias = weights((3, 3, 2, 4), 34), weights((20,), 35)
    model = assert_converts(lambda x: tf.nn.relu(tf.reshape(tf.nn.conv2d(x, w, 1, "SAME"), [-1, 4, 20]) + bias),
                            [f32(None, 4, 5, 2)], [data((2, 4, 5, 2))])
    assert all_op_names(model) == ["CONV_2D", "RESHAPE", "ADD"]


def test_identity_transpose_and_reshape_are_dropped():
    model = assert_converts(lambda x: tf.nn.relu(tf.reshape(tf.transpose(x, [0, 1]), [-1, 3]) + 1.0),
                            [f32(None, 3)], [data((4, 3))])
    op, _ = only_op(model)
    assert all_op_names(model) == ["ADD"] and activation_of(op) == 1


def test_reshapes_around_fully_connected_become_keep_num_dims():
    """tensordot's flatten, matmul, unflatten: one FULLY_CONNECTED keeping the leading dims."""
    w = weights((8, 6), 30)
    model = assert_converts(lambda x: tf.tensordot(x, w, 1), [f32(None, 4, 8)], [data((2, 4, 8))])
    op, _ = only_op(model)
    assert op.builtin_options.keep_num_dims


@pytest.mark.parametrize("x_shape, flat, out_shape", [
    ((None, 4, 8), (-1, 8), (-1, 2, 2, 6)),  # the result is regrouped: its RESHAPE stays
    ((None, 2, 16), (-1, 8), (-1, 4, 6)),  # rows are not the input's last axis: the first stays
])  # fmt: skip
def test_reshapes_that_regroup_rows_stay(x_shape, flat, out_shape):
    w = weights((8, 6), 31)
    model = assert_converts(lambda x: tf.reshape(tf.matmul(tf.reshape(x, flat), w), out_shape), [f32(*x_shape)],
                            [data((2,) + x_shape[1:])])
    assert "RESHAPE" in all_op_names(model) and "FULLY_CONNECTED" in all_op_names(model)


# -- refused cases -----------------------------------------------------------------------------


def _refused(fn, specs, match):
    concrete = tf.function(fn, input_signature=specs).get_concrete_function()
    with pytest.raises(numlite.ConversionError, match=match):
        numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()


def test_channels_first_convolution_is_refused():
    w = weights((3, 3, 2, 4), 26)
    _refused(lambda x: tf.nn.conv2d(x, w, 1, "SAME", data_format="NCHW"), [f32(1, 2, 6, 6)], "Conv2D.*NCHW")


def test_float64_convolution_is_refused():
    w = weights((3, 3, 2, 4), 27).astype(np.float64)
    _refused(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [tf.TensorSpec((1, 6, 6, 2), tf.float64)], "Conv2D.*FLOAT64")


def test_dilated_transposed_convolution_is_refused():
    w = weights((3, 3, 2, 4), 28)
    _refused(lambda x: tf.nn.conv2d_transpose(x, w, (1, 10, 10, 2), 1, "VALID", dilations=2), [f32(1, 6, 6, 4)],
             "Conv2DBackpropInput.*dilat")
