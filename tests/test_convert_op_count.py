"""numlite's converter makes no more operators than the official one (tf.lite.TFLiteConverter) on
the same model, and still computes what TensorFlow does.

The families where it used to make more: a scale or offset by a constant folded into the weights
and bias of the fully connected layer or convolution before it, a division as well as a
multiplication (a softmax temperature); the same before the layer (Keras' Rescaling and
Normalization in front of it); ``x and True`` (a loop's ``maximum_iterations`` on a condition
that is a constant) even where it makes a subgraph's output; a loop body's copy of an argument
it returns at another position, where nothing can observe what the copy protects (``x, prev ->
f(x), x`` until they converge); the second of two identical signatures (Keras 3's ``export``).
Each model runs in LiteRT and in numlite against TensorFlow (float32 at rtol = atol = 1e-5,
outputs of order one), and its operators, counted over every subgraph, are at most the official
converter's.
"""

from __future__ import annotations

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from helpers import (all_op_names, assert_close, assert_converts, convert, litert_interpreter, run_litert, run_numlite,
                     seeded_values)

import numlite


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


# -- Keras models, from the model and from a SavedModel ---------------------------------------

HEADS = {  # name: (input shape, the layers on an input) for a Keras module `K`
    "temperature_softmax": ((12,), lambda K, x: K.layers.Softmax()(K.layers.Lambda(lambda t: t / 0.7)(
        K.layers.Dense(8)(x)))),
    "rescaled_cnn": ((10, 10, 3), lambda K, x: K.layers.Lambda(lambda t: t * 2.0)(K.layers.Dense(6)(
        K.layers.Flatten()(K.layers.MaxPooling2D()(K.layers.Conv2D(4, 3, activation="relu")(
            K.layers.Rescaling(1 / 255.0)(x))))))),
    "normalized_dense_batch_norm": ((12,), lambda K, x: K.layers.BatchNormalization()(
        K.layers.Dense(8, use_bias=False)(K.layers.Normalization(mean=np.linspace(-1, 1, 12),
                                                                 variance=np.linspace(0.5, 2, 12))(x)))),
}
KERAS = {"keras2": tf_keras, "keras3": keras}


@functools.cache
def keras_model(flavor, head):
    K = KERAS[flavor]
    K.utils.set_random_seed(0)
    shape, layers = HEADS[head]
    x = K.Input(shape)
    model = K.Model(x, layers(K, x))
    rng = np.random.default_rng(1)  # biases and batch-norm statistics away from their defaults
    model.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) if w.ndim == 1 else w
                       for w in model.get_weights()])
    return model


def keras_input(model, seed=0):
    shape = (3,) + tuple(model.inputs[0].shape[1:])
    return seeded_values(shape, tf.float32, seed) * np.float32(100.0 if len(shape) == 4 else 1.0)


def save(model, flavor, path):
    if flavor == "keras3":
        model.export(path, verbose=False)
    else:
        tf.saved_model.save(model, path)
    return path


def assert_keras_conversion(model, ours, official):
    x = keras_input(model)
    expected = model(x, training=False).numpy()
    assert np.abs(expected).max() > 0.1, "reference output too small to compare"
    for run in (run_litert, run_numlite):
        (actual,) = run(ours, [x])
        assert_close(actual, expected, what=f"{run.__name__}: ")
    assert len(all_op_names(ours)) <= len(all_op_names(official)), (all_op_names(ours), all_op_names(official))


@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("flavor", list(KERAS))
def test_keras_model(flavor, head):
    model = keras_model(flavor, head)
    ours = numlite.TFLiteConverter.from_keras_model(model).convert()
    official = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    assert_keras_conversion(model, ours, official)


@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("flavor", list(KERAS))
def test_keras_saved_model(flavor, head, tmp_path):
    model = keras_model(flavor, head)
    path = save(model, flavor, str(tmp_path / "saved"))
    ours = numlite.TFLiteConverter.from_saved_model(path).convert()
    official = tf.lite.TFLiteConverter.from_saved_model(path).convert()
    assert_keras_conversion(model, ours, official)


def test_keras3_export_signatures_share_one_subgraph(tmp_path):
    """``serve`` and ``serving_default`` are one function: named both (without keys only
    serving_default converts, see test_convert_api), both signatures stay and run one subgraph."""
    model = keras_model("keras3", "temperature_softmax")
    ours = numlite.TFLiteConverter.from_saved_model(save(model, "keras3", str(tmp_path / "saved")),
                                                    signature_keys=["serve", "serving_default"]).convert()
    assert len(numlite.model.read_model(ours).subgraphs) == 1
    x = keras_input(model, seed=3)
    expected = model(x, training=False).numpy()
    for runtime, interpreter in (("numlite", numlite.Interpreter(model_content=ours)),
                                 ("LiteRT", litert_interpreter(ours))):
        signatures = interpreter.get_signature_list()
        assert sorted(signatures) == ["serve", "serving_default"]
        for key, names in signatures.items():
            (actual,) = interpreter.get_signature_runner(key)(**{names["inputs"][0]: x}).values()
            assert_close(actual, expected, what=f"{runtime} {key}: ")


# -- loops and conditions ---------------------------------------------------------------------


def _converge_with_max_iterations(x):
    """The reported loop: x = x * 0.5 + 1 until it stops changing (numlite 12 operators, the
    official converter 11, before the copy of ``x`` into ``prev`` went)."""
    return tf.while_loop(lambda x, prev: tf.abs(x - prev) > 1e-6, lambda x, prev: (x * 0.5 + 1, x),
                         [x * 0.5 + 1, x], maximum_iterations=100)[0]


def _converge_with_counter(x):
    loop = tf.while_loop(lambda i, x, prev: tf.logical_and(i < 100, tf.abs(x - prev) > 1e-6),
                         lambda i, x, prev: (i + 1, x * 0.5 + 1, x), [0, x * 0.5 + 1, x])
    return loop[0], loop[1]


def _converge_previous_first(x):
    return tf.while_loop(lambda prev, x: tf.abs(x - prev) > 1e-6, lambda prev, x: (x, x * 0.5 + 1), [x, x * 0.5 + 1])[1]


def _converge_vector(x):
    return tf.while_loop(lambda x, prev: tf.reduce_max(tf.abs(x - prev)) > 1e-6, lambda x, prev: (x * 0.5 + 1, x),
                         [x * 0.5 + 1, x])[0]


def _iterate_with_constant_condition(x):
    return tf.while_loop(lambda x: True, lambda x: [x * 0.5 + 1], [x], maximum_iterations=10)


LOOPS = {  # name: (function, input specs, inputs)
    "converge_with_max_iterations": (_converge_with_max_iterations, [f32()], [np.float32(5.0)]),
    "converge_with_counter": (_converge_with_counter, [f32()], [np.float32(-3.0)]),
    "converge_previous_first": (_converge_previous_first, [f32()], [np.float32(7.0)]),
    "converge_vector": (_converge_vector, [f32(None, 3)], [data((2, 3))]),
    "constant_condition_with_max_iterations": (_iterate_with_constant_condition, [f32()], [np.float32(0.5)]),
}


@pytest.mark.parametrize("name", list(LOOPS))
def test_loop(name):
    fn, specs, inputs = LOOPS[name]
    names = assert_as_compact_as_official(fn, specs, [np.asarray(x) for x in inputs])
    assert "RESHAPE" not in names, names  # no copy of x into prev
    if name == "constant_condition_with_max_iterations":
        assert "LOGICAL_AND" not in names, names  # i < 10 and True


def _shift_returning_previous(x, n):
    return tf.while_loop(lambda i, x, prev: i < n, lambda i, x, prev: (i + 1, x * 0.5 + 1, x), [0, x * 0.5 + 1, x])


def _shift_reading_previous(x, n):
    return tf.while_loop(lambda i, x, prev: i < n, lambda i, x, prev: (i + 1, x * 0.5 + prev, x),
                         [0, x * 0.5 + 1, x])[1]


def _shift_twice(x, n):
    def body(i, x, prev, before):
        return i + 1, x * 0.5 + 1, x, prev

    return tf.while_loop(lambda i, x, prev, before: tf.logical_and(i < n, tf.abs(x - before) > 0.3), body,
                         [0, x * 0.5 + 1, x, x - 1])[1]


@pytest.mark.parametrize("fn", [_shift_returning_previous, _shift_reading_previous, _shift_twice])
def test_loop_copies_that_are_observed_stay(fn):
    """Where the loop's result ``prev`` is read, or the body reads ``prev``, or ``prev`` is
    returned as the next ``before``, LiteRT's WHILE would hand on the new ``x`` instead: numlite
    keeps one copy. The official converter leaves it out, and its model computes something else
    in LiteRT; these are the models on which numlite has one operator more."""
    specs, inputs = [f32(), tf.TensorSpec((), tf.int32)], [np.asarray(np.float32(5.0)), np.asarray(np.int32(4))]
    names = all_op_names(assert_converts(fn, specs, inputs))
    official = convert(fn, specs)
    assert names.count("RESHAPE") == 1 and len(names) == len(all_op_names(official)) + 1
    concrete = tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()
    expected = [np.asarray(t) for t in tf.nest.flatten(concrete(*inputs))]
    assert any(not np.allclose(a, e) for a, e in zip(run_litert(official, inputs), expected))


@pytest.mark.parametrize("fn", [
    lambda x: tf.logical_and(x > 0.0, True),
    lambda x: tf.logical_or(tf.zeros((2, 3), tf.bool), x > 0.5),
])
def test_and_true_or_false_producing_an_output_go(fn):
    assert assert_as_compact_as_official(fn, [f32(2, 3)], [data((2, 3))]) == ["GREATER"]
