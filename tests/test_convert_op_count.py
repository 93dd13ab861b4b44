"""numlite's converter makes no more operators than the official one (tf.lite.TFLiteConverter) on
the same model, and still computes what TensorFlow does.

The families where it used to make more: a scale or offset by a constant folded into the weights
and bias of the fully connected layer or convolution before it, a division as well as a
multiplication (a softmax temperature); the same before the layer (Keras' Rescaling and
Normalization in front of it); ``x and True`` (a loop's ``maximum_iterations`` on a condition
that is a constant) even where it makes a subgraph's output. Each model runs in LiteRT and in
numlite against TensorFlow (float32 at rtol = atol = 1e-5, outputs of order one), and its
operators, counted over every subgraph, are at most the official converter's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_converts, convert, seeded_values


def f32(*shape):
    return tf.TensorSpec(shape, tf.float32)


def weights(shape, seed, low=-0.5, high=0.5):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def data(shape, seed=0):
    return seeded_values(shape, tf.float32, seed)


def assert_as_compact_as_official(fn, specs, inputs, **tolerances):
    """``assert_converts`` (numlite's model in numlite and LiteRT against TensorFlow), and the
    model has at most the official converter's operators; returns numlite's op names."""
    ours = all_op_names(assert_converts(fn, specs, inputs, **tolerances))
    theirs = all_op_names(convert(fn, specs))
    assert len(ours) <= len(theirs), f"numlite {ours} against the official {theirs}"
    return ours


# -- a scale or offset after a weighted op ----------------------------------------------------

W_FC, W_CONV, W_DW, W_T = weights((6, 5), 1), weights((3, 3, 3, 5), 2), weights((3, 3, 3, 1), 3), weights((3, 3, 5, 3), 4)
BIAS5 = weights((5,), 5)
PER_CHANNEL = weights((5,), 6, 0.5, 2.0)
PRODUCERS = {  # name: (function of x, input shape, the one op it becomes)
    "fully_connected": (lambda x: tf.matmul(x, W_FC) + BIAS5, (4, 6), "FULLY_CONNECTED"),
    "fully_connected_without_bias": (lambda x: tf.matmul(x, W_FC), (4, 6), "FULLY_CONNECTED"),
    "conv": (lambda x: tf.nn.conv2d(x, W_CONV, 1, "SAME") + BIAS5, (2, 5, 5, 3), "CONV_2D"),
    # A depthwise multiplier of 1 over 3 channels, then 5 output channels would not broadcast:
    # its constants are 3 wide (see DEPTHWISE_CONSTANTS).
    "depthwise": (lambda x: tf.nn.depthwise_conv2d(x, W_DW, [1, 1, 1, 1], "VALID"), (2, 5, 5, 3), "DEPTHWISE_CONV_2D"),
    "transpose_conv": (lambda x: tf.nn.conv2d_transpose(x, W_T, [2, 7, 7, 5], 1, "VALID"), (2, 5, 5, 3), "TRANSPOSE_CONV"),
}
DEPTHWISE_CONSTANTS = {"scalar": np.float32(0.7), "per_channel": weights((3,), 7, 0.5, 2.0)}


@pytest.mark.parametrize("how", ["div", "mul", "add", "sub"])
@pytest.mark.parametrize("constant", ["scalar", "per_channel"])
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_scale_or_offset_after_a_weighted_op_folds_into_it(producer, constant, how):
    """The official converter folds ``y / c`` (as ``y * (1 / c)``, rounding the reciprocal);
    numlite divides the weights and bias by ``c`` itself, each folded value rounded once."""
    make, shape, op = PRODUCERS[producer]
    c = (DEPTHWISE_CONSTANTS if producer == "depthwise" else {"scalar": np.float32(0.7), "per_channel": PER_CHANNEL})[constant]
    apply = {"div": lambda y: y / c, "mul": lambda y: y * c, "add": lambda y: y + c, "sub": lambda y: y - c}[how]
    names = assert_as_compact_as_official(lambda x: apply(make(x)), [f32(*shape)], [data(shape)])
    assert names == [op]


def test_temperature_softmax_after_dense_is_two_ops():
    """``softmax(logits / T)``: the reported small CNN's head."""
    names = assert_as_compact_as_official(lambda x: tf.nn.softmax((tf.matmul(x, W_FC) + BIAS5) / 0.7),
                                          [f32(None, 6)], [data((3, 6))])
    assert names == ["FULLY_CONNECTED", "SOFTMAX"]


@pytest.mark.parametrize("c", [0.0, 1e38])
def test_division_that_would_not_fold_exactly_stays(c):
    """Dividing by zero gives infinities the weights cannot hold; dividing weights of order one
    by 1e38 would leave them among float32's subnormals, short of precision."""
    names = all_op_names(assert_converts(lambda x: (tf.matmul(x, W_FC) + BIAS5) / np.float32(c), [f32(4, 6)],
                                         [data((4, 6))]))
    assert names == ["FULLY_CONNECTED", "DIV"]


def test_scale_that_would_overflow_the_weights_stays():
    big = np.full((6, 5), 8.0, np.float32)
    x = data((4, 6)) * np.float32(1e-3)  # the product itself stays finite
    names = all_op_names(assert_converts(lambda x: tf.matmul(x, big) * np.float32(1e38), [f32(4, 6)], [x]))
    assert names == ["FULLY_CONNECTED", "MUL"]


# -- a scale or offset before a weighted op ---------------------------------------------------

IN_SCALE, IN_OFFSET = weights((3,), 8, 0.5, 2.0), weights((3,), 9, -1.0, 1.0)
W_FC3, W_DW2 = weights((3, 5), 10), weights((3, 3, 3, 2), 11)
CONSUMERS = {  # name: (function of its input, input shape, op, whether its windows read padding)
    "fully_connected": (lambda y: tf.matmul(y, W_FC3) + BIAS5, (4, 3), "FULLY_CONNECTED", False),
    "fully_connected_rank3": (lambda y: tf.einsum("bti,io->bto", y, W_FC3), (2, 4, 3), "FULLY_CONNECTED", False),
    "conv_valid": (lambda y: tf.nn.conv2d(y, W_CONV, 1, "VALID") + BIAS5, (2, 6, 6, 3), "CONV_2D", False),
    "conv_same": (lambda y: tf.nn.conv2d(y, W_CONV, 2, "SAME"), (2, 6, 6, 3), "CONV_2D", True),
    "conv_1x1_same": (lambda y: tf.nn.conv2d(y, W_CONV[1:2, 1:2], 1, "SAME"), (2, 4, 4, 3), "CONV_2D", False),
    "depthwise_valid": (lambda y: tf.nn.depthwise_conv2d(y, W_DW2, [1, 1, 1, 1], "VALID"), (2, 6, 6, 3),
                        "DEPTHWISE_CONV_2D", False),
    "depthwise_same": (lambda y: tf.nn.depthwise_conv2d(y, W_DW2, [1, 1, 1, 1], "SAME"), (2, 6, 6, 3),
                       "DEPTHWISE_CONV_2D", True),
}
INPUT_OPS = {
    "rescale": lambda x: x * (1 / 255.0),
    "divide_per_channel": lambda x: x / IN_SCALE,
    "scale_first": lambda x: IN_SCALE * x,
    "offset": lambda x: x - 0.5,
    "offset_per_channel": lambda x: x + IN_OFFSET,
    "normalize": lambda x: (x - IN_OFFSET) / IN_SCALE,  # Keras' Normalization
    "rescale_and_offset": lambda x: x / 127.5 - 1.0,  # Keras' Rescaling(1 / 127.5, -1)
}


@pytest.mark.parametrize("before", list(INPUT_OPS))
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_scale_or_offset_before_a_weighted_op_folds_into_it(consumer, before):
    """A scale folds into the weights of each input channel; an offset into the bias, where no
    window reads padding (padded zeros would be offset too, which the bias cannot say)."""
    make, shape, op, pads = CONSUMERS[consumer]
    offsets = before.startswith(("offset", "normalize")) or before.endswith("offset")
    x = data(shape) * np.float32(100.0 if before.startswith("rescale") else 1.0)  # pixel-like values for rescales
    names = assert_as_compact_as_official(lambda x: make(INPUT_OPS[before](x)), [f32(*shape)], [x])
    assert names[-1] == op and (len(names) > 1) == (offsets and pads), names


def test_scale_before_a_weighted_op_read_twice_stays():
    names = assert_as_compact_as_official(lambda x: (tf.matmul(x * 0.5, W_FC3), x * 0.5), [f32(4, 3)], [data((4, 3))])
    assert sorted(names) == ["FULLY_CONNECTED", "MUL"]


def test_activation_between_scale_and_weighted_op_stays():
    names = assert_as_compact_as_official(lambda x: tf.matmul(tf.nn.relu(x * 0.5), W_FC3), [f32(4, 3)],
                                          [data((4, 3))])
    assert names == ["MUL", "FULLY_CONNECTED"]


# -- loops and conditions ---------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda x: tf.logical_and(x > 0.0, True),
    lambda x: tf.logical_or(tf.zeros((2, 3), tf.bool), x > 0.5),
])
def test_and_true_or_false_producing_an_output_go(fn):
    assert assert_as_compact_as_official(fn, [f32(2, 3)], [data((2, 3))]) == ["GREATER"]
