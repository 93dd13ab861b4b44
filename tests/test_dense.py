"""FULLY_CONNECTED and BATCH_MATMUL against LiteRT: shapes, keep_num_dims, bias, fused
activations, weights known only at run time, adjoints, broadcast batch dimensions, Keras."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, convert_keras, op_names, run_litert
from numlite.model import read_model, write_model


def _weights(shape, seed, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(np.float32)


def _edit(model, change):
    """Re-serialize ``model`` after ``change(model, subgraph, op)`` edits its last operator."""
    m = read_model(model)
    change(m, m.subgraphs[0], m.subgraphs[0].operators[-1])
    return write_model(m)


def _assert_both_reject(model, inputs):
    """LiteRT refuses the model, and numlite raises a PrepareError at allocation."""
    with pytest.raises(Exception):
        run_litert(model, inputs)
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=model).allocate_tensors()


# ----------------------------------------------------------------------------- FULLY_CONNECTED

# (input shape, units, with bias)
FC_CASES = [
    ((4, 6), 3, False),
    ((1, 16), 10, True),
    ((5, 1), 4, True),
    ((2, 3, 8), 5, True),  # rank 3: the converter sets keep_num_dims
    ((2, 2, 3, 4), 6, False),
]


@pytest.mark.parametrize("shape,units,with_bias", FC_CASES, ids=str)
def test_fully_connected(shape, units, with_bias):
    w = _weights((shape[-1], units), 1)
    b = _weights((units,), 2)

    def fn(x):
        y = tf.matmul(x, w)
        return y + b if with_bias else y

    model = convert(fn, [tf.TensorSpec(shape, tf.float32)], key=("fc", shape, units, with_bias))
    assert op_names(model) == ["FULLY_CONNECTED"], op_names(model)
    m = read_model(model)
    op = m.subgraphs[0].operators[0]
    assert (len(op.inputs) == 3 and op.inputs[2] >= 0) == with_bias
    assert op.builtin_options.keep_num_dims == (len(shape) > 2)
    assert_matches_litert(model)


ACTIVATIONS = {
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "relu_n1_to_1": lambda y: tf.clip_by_value(y, -1.0, 1.0),
}


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_fully_connected_fused_activation(activation):
    w = _weights((8, 6), 3, scale=1.5)
    b = _weights((6,), 4)
    fn = ACTIVATIONS[activation]
    model = convert(lambda x: fn(tf.matmul(x, w) + b), [tf.TensorSpec((3, 8), tf.float32)], key=("fc act", activation))
    assert op_names(model) == ["FULLY_CONNECTED"], op_names(model)
    assert_matches_litert(model)


def test_fully_connected_flattens_input_without_keep_num_dims():
    """keep_num_dims off: a [2, 3, 4] input is read as [6, 4] and the output is [6, units]."""
    w = _weights((4, 5), 5)
    model = convert(lambda x: tf.matmul(x, w), [tf.TensorSpec((6, 4), tf.float32)], key="fc flatten")

    def rank3(m, g, op):
        g.tensors[op.inputs[0]].shape = (2, 3, 4)
        g.tensors[op.inputs[0]].shape_signature = None
        assert not op.builtin_options.keep_num_dims

    edited = _edit(model, rank3)
    x = np.random.default_rng(6).uniform(-2, 2, (2, 3, 4)).astype(np.float32)
    (expected,) = assert_matches_litert(edited, [x])
    assert expected.shape == (6, 5)


def test_fully_connected_weights_known_only_at_run_time():
    model = convert(
        lambda x, w: tf.matmul(x, w, transpose_b=True),
        [tf.TensorSpec((4, 6), tf.float32), tf.TensorSpec((3, 6), tf.float32)],
        key="fc runtime weights",
    )
    assert op_names(model) == ["FULLY_CONNECTED"], op_names(model)
    assert_matches_litert(model)


def test_fully_connected_batch_resize():
    w = _weights((6, 3), 7)
    model = convert(lambda x: tf.nn.relu(tf.matmul(x, w)), [tf.TensorSpec((2, 6), tf.float32)], key="fc resize")
    x = np.random.default_rng(8).uniform(-2, 2, (5, 6)).astype(np.float32)
    assert_matches_litert(model, [x])


def test_fully_connected_large_weights_against_one_row_are_read_as_stored():
    """One row against weights over ``STORED_LAYOUT_BYTES`` reads them in the model's own
    [units, depth] layout, with no transposed copy (a classifier head's weights are not
    doubled in memory); resized to more rows, the kernel transposes them once again."""
    from numlite.kernels.dense import STORED_LAYOUT_BYTES

    w, b = _weights((1024, 640), 10, scale=0.1), _weights((640,), 11)
    assert w.nbytes >= STORED_LAYOUT_BYTES
    model = convert(lambda x: tf.matmul(x, w) + b, [tf.TensorSpec((1, 1024), tf.float32)], key="fc stored layout")
    assert op_names(model) == ["FULLY_CONNECTED"], op_names(model)
    assert_matches_litert(model)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    kernel, constant = sg.plan[0].kernel.impl, sg.arrays[sg.plan[0].inputs[1]]
    assert np.shares_memory(kernel.weights, constant)
    x = np.random.default_rng(12).uniform(-1, 1, (3, 1024)).astype(np.float32)
    assert_matches_litert(model, [x])
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [3, 1024])
    interpreter.allocate_tensors()
    assert not np.shares_memory(sg.plan[0].kernel.impl.weights, constant)
    assert sg.plan[0].kernel.impl.weights.flags.c_contiguous


@pytest.mark.parametrize("code", [4, 5])  # TANH, SIGN_BIT
def test_fully_connected_non_clamp_activation_is_rejected_like_litert(code):
    w = _weights((6, 3), 9)
    model = convert(lambda x: tf.matmul(x, w), [tf.TensorSpec((2, 6), tf.float32)], key="fc tanh")

    def fuse(m, g, op):
        op.builtin_options.fused_activation_function = code

    _assert_both_reject(_edit(model, fuse), [np.zeros((2, 6), np.float32)])


def test_fully_connected_bias_size_mismatch_is_rejected_like_litert():
    w = _weights((6, 3), 10)
    b = _weights((3,), 11)
    model = convert(lambda x: tf.matmul(x, w) + b, [tf.TensorSpec((2, 6), tf.float32)], key="fc bad bias")

    def bad_bias(m, g, op):
        bias = g.tensors[op.inputs[2]]
        m.buffers[bias.buffer].data = np.zeros(4, np.float32).view(np.uint8)
        bias.shape = (4,)

    _assert_both_reject(_edit(model, bad_bias), [np.zeros((2, 6), np.float32)])


# ----------------------------------------------------------------------------- BATCH_MATMUL

# (lhs shape, rhs shape, adj_x, adj_y)
BMM_CASES = [
    ((2, 3, 4), (2, 4, 5), False, False),
    ((2, 4, 3), (2, 4, 5), True, False),
    ((2, 3, 4), (2, 5, 4), False, True),
    ((3, 4, 2), (3, 5, 4), True, True),
    ((3, 4), (2, 4, 5), False, False),  # rank 2 by rank 3
    ((2, 3, 4), (4, 5), False, False),  # rank 3 by rank 2
    ((2, 1, 3, 4), (1, 5, 4, 6), False, False),  # batch dimensions broadcast both ways
    ((1, 2, 1, 3, 4), (2, 1, 3, 5, 4), False, True),  # rank 5
    ((4, 1, 7), (4, 7, 1), False, False),  # vector products
]


@pytest.mark.parametrize("lhs,rhs,adj_x,adj_y", BMM_CASES, ids=str)
def test_batch_matmul(lhs, rhs, adj_x, adj_y):
    model = convert(
        lambda a, b: tf.linalg.matmul(a, b, adjoint_a=adj_x, adjoint_b=adj_y),
        [tf.TensorSpec(lhs, tf.float32), tf.TensorSpec(rhs, tf.float32)],
        key=("bmm", lhs, rhs, adj_x, adj_y),
    )
    assert op_names(model) == ["BATCH_MATMUL"], op_names(model)
    options = read_model(model).subgraphs[0].operators[0].builtin_options
    assert (options.adj_x, options.adj_y) == (adj_x, adj_y)
    assert_matches_litert(model)


def test_batch_matmul_adjoint_flags_written_by_numlite():
    """Flip both adjoints of a converted model (square matrices keep it well formed)."""
    model = convert(
        lambda a, b: tf.linalg.matmul(a, b), [tf.TensorSpec((2, 4, 4), tf.float32)] * 2, key="bmm square"
    )

    def flip(m, g, op):
        op.builtin_options.adj_x = True
        op.builtin_options.adj_y = True

    assert_matches_litert(_edit(model, flip))


def test_batch_matmul_inner_mismatch_is_rejected_like_litert():
    model = convert(
        lambda a, b: tf.linalg.matmul(a, b),
        [tf.TensorSpec((2, 3, 4), tf.float32), tf.TensorSpec((2, 4, 5), tf.float32)],
        key="bmm mismatch",
    )

    def adjoint(m, g, op):
        op.builtin_options.adj_y = True

    _assert_both_reject(_edit(model, adjoint), [np.zeros((2, 3, 4), np.float32), np.zeros((2, 4, 5), np.float32)])


def test_batch_matmul_batch_mismatch_is_rejected_like_litert():
    model = convert(
        lambda a, b: tf.linalg.matmul(a, b),
        [tf.TensorSpec((2, 3, 4), tf.float32), tf.TensorSpec((2, 4, 5), tf.float32)],
        key="bmm batch mismatch",
    )

    def three(m, g, op):
        g.tensors[op.inputs[1]].shape = (3, 4, 5)
        g.tensors[op.inputs[1]].shape_signature = None

    _assert_both_reject(_edit(model, three), [np.zeros((2, 3, 4), np.float32), np.zeros((3, 4, 5), np.float32)])


# ----------------------------------------------------------------------------- Keras


def test_keras_dense_stack():
    def build():
        tf.keras.utils.set_random_seed(0)
        inputs = tf.keras.Input((12,), batch_size=3)
        hidden = tf.keras.layers.Dense(16, activation="relu")(inputs)
        hidden = tf.keras.layers.Dense(8, activation="relu6")(hidden)
        return tf.keras.Model(inputs, tf.keras.layers.Dense(5, use_bias=False)(hidden))

    model = convert_keras(build, "keras dense stack")
    assert op_names(model) == ["FULLY_CONNECTED"] * 3, op_names(model)
    assert_matches_litert(model)


def test_keras_dense_on_sequences():
    def build():
        tf.keras.utils.set_random_seed(0)
        inputs = tf.keras.Input((5, 7), batch_size=2)
        return tf.keras.Model(inputs, tf.keras.layers.Dense(4)(inputs))

    model = convert_keras(build, "keras dense sequences")
    assert "FULLY_CONNECTED" in op_names(model), op_names(model)
    assert_matches_litert(model)
