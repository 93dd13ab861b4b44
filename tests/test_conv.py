"""CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV against LiteRT: shapes, strides, dilations,
SAME/VALID padding, groups, depth multipliers, fused activations, bias, Keras layers, and
weights known only at run time."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_close, assert_matches_litert, convert, convert_keras, op_names, run_litert, run_numlite
from numlite.model import read_model, write_model

ACTIVATIONS = {
    "none": lambda y: y,
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "relu_n1_to_1": lambda y: tf.clip_by_value(y, -1.0, 1.0),
}


def _weights(shape, seed, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(np.float32)


def _only_op(model, name):
    """The single operator ``name`` of a converted model (checks the activation was fused)."""
    assert op_names(model) == [name], op_names(model)
    m = read_model(model)
    return m, m.subgraphs[0], m.subgraphs[0].operators[0]


def _edit(model, change):
    """Re-serialize ``model`` after ``change(model, subgraph, op)`` edits its single operator."""
    m = read_model(model)
    change(m, m.subgraphs[0], m.subgraphs[0].operators[0])
    return write_model(m)


def _as_graph_input(m, g, tensor):
    """Turn a constant tensor into an input of the graph, so kernels see it only at run time."""
    value = m.constant(g, tensor).copy()
    g.tensors[tensor].buffer = 0
    g.inputs.append(tensor)
    return value


def _assert_both_reject(model):
    """LiteRT refuses the model at allocation, and so must numlite (with a PrepareError)."""
    with pytest.raises(Exception):
        run_litert(model, [np.zeros(s, np.float32) for s in _input_shapes(model)])
    interpreter = numlite.Interpreter(model_content=model)
    with pytest.raises(numlite.PrepareError):
        interpreter.allocate_tensors()


def _input_shapes(model):
    m = read_model(model)
    g = m.subgraphs[0]
    return [g.tensors[i].shape for i in g.inputs]


# ----------------------------------------------------------------------------- CONV_2D

# (input shape, filter hwio, strides, padding, dilations)
CONV_CASES = [
    ((1, 7, 6, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((2, 7, 6, 3), (3, 3, 3, 4), (2, 2), "SAME", (1, 1)),
    ((2, 8, 9, 4), (3, 2, 4, 5), (2, 3), "SAME", (1, 1)),
    ((1, 9, 8, 2), (3, 3, 2, 3), (1, 1), "VALID", (1, 1)),
    ((2, 10, 11, 3), (5, 4, 3, 2), (3, 2), "VALID", (1, 1)),
    ((1, 9, 9, 2), (3, 3, 2, 3), (1, 1), "SAME", (2, 2)),
    ((1, 12, 10, 2), (3, 2, 2, 3), (1, 1), "VALID", (3, 2)),
    ((3, 5, 5, 8), (1, 1, 8, 6), (1, 1), "SAME", (1, 1)),
    ((2, 7, 7, 4), (1, 1, 4, 5), (2, 2), "VALID", (1, 1)),
    ((1, 4, 4, 3), (5, 5, 3, 2), (1, 1), "SAME", (1, 1)),  # filter larger than the image
    ((1, 6, 5, 3), (6, 5, 3, 4), (1, 1), "VALID", (1, 1)),  # a single output pixel
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d(case):
    shape, hwio, strides, padding, dilations = case
    w = _weights(hwio, 1)
    b = _weights(hwio[-1:], 2)
    model = convert(
        lambda x: tf.nn.conv2d(x, w, strides, padding, dilations=dilations) + b,
        [tf.TensorSpec(shape, tf.float32)],
        key=("conv2d", case),
    )
    _, _, op = _only_op(model, "CONV_2D")
    assert (op.builtin_options.dilation_h_factor, op.builtin_options.dilation_w_factor) == dilations
    assert_matches_litert(model)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("kernel", [(1, 1), (3, 3)])
def test_conv2d_fused_activation(kernel, activation):
    w = _weights(kernel + (4, 6), 3, scale=1.0)
    fn = ACTIVATIONS[activation]
    model = convert(
        lambda x: fn(tf.nn.conv2d(x, w, 1, "SAME")), [tf.TensorSpec((2, 6, 6, 4), tf.float32)], key=("conv act", kernel, activation)
    )
    _only_op(model, "CONV_2D")
    assert_matches_litert(model)


@pytest.mark.parametrize("code", [4, 5])  # TANH, SIGN_BIT: LiteRT has no clamp range for them
def test_conv2d_fused_tanh_and_sign_bit_written_by_numlite(code):
    w = _weights((3, 3, 2, 3), 4)
    model = convert(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [tf.TensorSpec((1, 5, 5, 2), tf.float32)], key="conv tanh")

    def fuse(m, g, op):
        op.builtin_options.fused_activation_function = code

    assert_matches_litert(_edit(model, fuse))


@pytest.mark.parametrize(
    "shape,hwio,strides,padding",
    [
        ((1, 6, 6, 4), (3, 3, 2, 6), 1, "SAME"),
        ((2, 7, 8, 6), (3, 3, 2, 9), 2, "VALID"),
        ((1, 5, 5, 4), (1, 1, 1, 8), 1, "SAME"),  # as many groups as input channels
        ((2, 5, 5, 6), (1, 1, 3, 4), 1, "VALID"),
    ],
    ids=str,
)
def test_grouped_conv2d(shape, hwio, strides, padding):
    w = _weights(hwio, 5)
    model = convert(
        lambda x: tf.nn.conv2d(x, w, strides, padding), [tf.TensorSpec(shape, tf.float32)], key=("grouped", shape, hwio)
    )
    m, g, op = _only_op(model, "CONV_2D")
    assert g.tensors[op.inputs[1]].shape[3] < shape[3]  # the filter sees one group's channels
    assert_matches_litert(model)


# (padding, stride, output channels, whether the padded input fits in the output)
PADDED_IN_OUTPUT_CASES = [("SAME", 1, 16, True), ("SAME", 2, 64, True), ("SAME", 2, 16, False), ("VALID", 1, 16, False)]


@pytest.mark.parametrize("padding,stride,out_c,fits", PADDED_IN_OUTPUT_CASES, ids=str)
def test_single_block_conv_pads_its_input_in_its_output(padding, stride, out_c, fits):
    """A convolution computed in one im2col block lays its zero-bordered input out in its own
    output's bytes when they are enough (the matmul writes them only after the im2col copy):
    no working memory for it. The border is written again at every invoke, over the previous
    results; new inputs at each of several invokes of one allocation still give LiteRT's."""
    w, b = _weights((3, 3, 8, out_c), 30), _weights((out_c,), 31)
    model = convert(
        lambda x: tf.nn.conv2d(x, w, stride, padding) + b - 2.0,  # negative sums: a stale border would show
        [tf.TensorSpec((1, 9, 8, 8), tf.float32)],
        key=("conv padded in output", padding, stride, out_c),
    )
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    (s,) = [k for k, step in enumerate(sg.plan) if step.op_name == "CONV_2D"]
    kernel = sg.plan[s].kernel.impl
    assert kernel.padded_in_output == fits and len(kernel.blocks) == 1
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-1, 1, (1, 9, 8, 8)).astype(np.float32)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        assert_close(actual, run_litert(model, [x])[0])
    if kernel.padded.needed:
        assert np.shares_memory(kernel.padded.buffer, sg.arrays[sg.plan[s].outputs[0]]) == fits
    assert (kernel.scratch_bytes == kernel.cols[0].nbytes) == (fits or padding == "VALID")  # the im2col block only


# (input shape, filter hwio, strides, padding): thin products of a deep filter (ResNet50's
# 7x7 layers have 49 pixels and depths of 1024 to 4608)
STORED_FILTER_CASES = [
    ((1, 7, 7, 128), (3, 3, 128, 24), (1, 1), "SAME"),  # im2col of the padded input
    ((1, 4, 4, 1024), (1, 1, 1024, 40), (1, 1), "VALID"),  # pointwise: the input itself
    ((1, 8, 8, 1024), (1, 1, 1024, 16), (2, 2), "VALID"),  # strided 1x1: im2col of 16 pixels
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", STORED_FILTER_CASES, ids=str)
def test_thin_deep_conv_reads_its_filter_as_stored(case, threads):
    """With BLAS on two threads, a product of few output pixels and a deep filter reads the
    filter as stored and writes its transpose, which the bias's add transposes back (relu6
    fused, several invokes with new inputs); on one thread it keeps the transposed copy."""
    shape, hwio, strides, padding = case
    w, b = _weights(hwio, 40, scale=0.1), _weights(hwio[3:], 41)
    model = convert(
        lambda x: tf.nn.relu6(tf.nn.conv2d(x, w, strides, padding) + b),
        [tf.TensorSpec(shape, tf.float32)],
        key=("conv stored filter", case),
    )
    interpreter = numlite.Interpreter(model_content=model, num_threads=threads)
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    (step,) = [step for step in sg.plan if step.op_name == "CONV_2D"]
    kernel = step.kernel.impl
    assert kernel.stored == (threads == 2)
    assert (kernel.weights is None) == (threads == 2)  # no transposed copy of the filter
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        expected = run_litert(model, [x])[0]
        assert 0 < expected.max() and expected.min() < 6 and np.ptp(expected) > 1  # relu6 clips some, not all
        assert_close(actual, expected)


def test_conv2d_weights_known_only_at_run_time():
    """Filter and bias fed as graph inputs: the weight matrix is laid out at eval."""
    w = _weights((3, 3, 3, 4), 6)
    b = _weights((4,), 7)
    model = convert(
        lambda x: tf.nn.relu(tf.nn.conv2d(x, w, 2, "SAME") + b), [tf.TensorSpec((2, 7, 7, 3), tf.float32)], key="conv runtime"
    )
    values = []

    def inputs(m, g, op):
        values.extend(_as_graph_input(m, g, i) for i in op.inputs[1:])

    edited = _edit(model, inputs)
    x = np.random.default_rng(8).uniform(-2, 2, (2, 7, 7, 3)).astype(np.float32)
    assert_matches_litert(edited, [x] + values)


def test_conv2d_batch_resize():
    """Re-preparing after a batch resize rebuilds the padded and im2col buffers."""
    w = _weights((3, 3, 2, 3), 9)
    model = convert(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [tf.TensorSpec((1, 5, 5, 2), tf.float32)], key="conv resize")
    x = np.random.default_rng(10).uniform(-2, 2, (3, 5, 5, 2)).astype(np.float32)
    assert_matches_litert(model, [x])


def test_conv2d_without_bias_is_rejected_like_litert():
    w = _weights((3, 3, 2, 3), 11)
    model = convert(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [tf.TensorSpec((1, 5, 5, 2), tf.float32)], key="conv no bias")

    def drop_bias(m, g, op):
        op.inputs = op.inputs[:2]

    _assert_both_reject(_edit(model, drop_bias))


def test_conv2d_channels_not_multiple_of_filter_is_rejected_like_litert():
    w = _weights((3, 3, 4, 3), 12)
    model = convert(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [tf.TensorSpec((1, 5, 5, 4), tf.float32)], key="conv bad channels")

    def five_channels(m, g, op):
        g.tensors[op.inputs[0]].shape = (1, 5, 5, 5)
        g.tensors[op.inputs[0]].shape_signature = None

    _assert_both_reject(_edit(model, five_channels))


def test_conv2d_zero_stride_is_rejected_like_litert():
    w = _weights((3, 3, 2, 3), 13)
    model = convert(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [tf.TensorSpec((1, 5, 5, 2), tf.float32)], key="conv zero stride")

    def zero_stride(m, g, op):
        op.builtin_options.stride_w = 0

    _assert_both_reject(_edit(model, zero_stride))


# ----------------------------------------------------------------------------- DEPTHWISE_CONV_2D

# (input shape, (kh, kw), multiplier, strides, padding, dilations)
DEPTHWISE_CASES = [
    ((1, 7, 7, 4), (3, 3), 1, (1, 1), "SAME", (1, 1)),
    ((2, 8, 7, 3), (3, 3), 1, (2, 2), "SAME", (1, 1)),
    ((2, 9, 9, 5), (5, 5), 1, (2, 2), "VALID", (1, 1)),
    ((1, 8, 10, 3), (3, 2), 2, (1, 3), "SAME", (1, 1)),
    ((2, 6, 6, 2), (2, 3), 3, (2, 1), "VALID", (1, 1)),
    ((1, 10, 9, 4), (3, 3), 1, (1, 1), "SAME", (2, 2)),
    ((1, 11, 11, 2), (3, 2), 2, (1, 1), "VALID", (2, 3)),
    ((3, 4, 4, 6), (1, 1), 1, (1, 1), "SAME", (1, 1)),
    ((2, 5, 6, 3), (1, 1), 2, (1, 1), "SAME", (1, 1)),  # one tap, a multiplier: one phase plane
    ((1, 7, 7, 2), (1, 1), 3, (2, 2), "VALID", (1, 1)),
    ((1, 3, 3, 2), (5, 5), 1, (1, 1), "SAME", (1, 1)),  # filter larger than the image
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=str)
def test_depthwise_conv2d(case):
    shape, kernel, multiplier, strides, padding, dilations = case
    w = _weights(kernel + (shape[3], multiplier), 20)
    b = _weights((shape[3] * multiplier,), 21)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1,) + strides + (1,), padding, dilations=dilations) + b,
        [tf.TensorSpec(shape, tf.float32)],
        key=("depthwise", case),
    )
    _, g, op = _only_op(model, "DEPTHWISE_CONV_2D")
    assert g.tensors[op.inputs[1]].shape[3] == shape[3] * multiplier
    assert (op.builtin_options.dilation_h_factor, op.builtin_options.dilation_w_factor) == dilations
    assert_matches_litert(model)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_depthwise_conv2d_fused_activation(activation):
    w = _weights((3, 3, 4, 2), 22, scale=1.0)
    fn = ACTIVATIONS[activation]
    model = convert(
        lambda x: fn(tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME")),
        [tf.TensorSpec((2, 6, 5, 4), tf.float32)],
        key=("depthwise act", activation),
    )
    assert op_names(model)[-1] == "DEPTHWISE_CONV_2D"
    assert_matches_litert(model)


@pytest.mark.parametrize("activation", [1, 2, 3, 4])  # RELU, RELU_N1_TO_1, RELU6, TANH (no clamp)
def test_depthwise_conv2d_fused_activation_written_by_numlite(activation):
    w = _weights((3, 3, 3, 2), 23, scale=1.5)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME"), [tf.TensorSpec((1, 6, 6, 3), tf.float32)], key="dw options"
    )

    def fuse(m, g, op):
        op.builtin_options.fused_activation_function = activation

    assert_matches_litert(_edit(model, fuse))


@pytest.mark.parametrize("option", [0, -1, 1, 2])
def test_depthwise_conv2d_depth_multiplier_option(option):
    """The multiplier is the ratio of channel counts. LiteRT's XNNPACK delegate fails on a
    positive option that disagrees, and leaves a zero or negative one to the builtin kernel,
    which ignores it."""
    w = _weights((3, 3, 2, 3), 38)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME"), [tf.TensorSpec((1, 5, 5, 2), tf.float32)], key="dw mult"
    )

    def set_multiplier(m, g, op):
        assert op.builtin_options.depth_multiplier == 3
        op.builtin_options.depth_multiplier = option

    edited = _edit(model, set_multiplier)
    if option > 0:
        _assert_both_reject(edited)
    else:
        assert_matches_litert(edited)


def test_depthwise_conv2d_without_bias():
    """LiteRT's depthwise prepare accepts two inputs, but its kernels (builtin and XNNPACK)
    then crash reading the missing bias, so TensorFlow gives the expected values here."""
    w = _weights((3, 3, 3, 2), 24)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, 2, 2, 1), "SAME"), [tf.TensorSpec((2, 7, 7, 3), tf.float32)], key="dw no bias"
    )

    def drop_bias(m, g, op):
        op.inputs = op.inputs[:2]

    x = np.random.default_rng(29).uniform(-2, 2, (2, 7, 7, 3)).astype(np.float32)
    (actual,) = run_numlite(_edit(model, drop_bias), [x])
    expected = tf.nn.depthwise_conv2d(x, w, (1, 2, 2, 1), "SAME").numpy()
    assert_close(actual, expected)


def test_depthwise_conv2d_weights_known_only_at_run_time():
    w = _weights((3, 3, 3, 2), 25)
    b = _weights((6,), 26)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, 1, 2, 1), "SAME") + b,
        [tf.TensorSpec((1, 6, 7, 3), tf.float32)],
        key="dw runtime",
    )
    values = []

    def inputs(m, g, op):
        values.extend(_as_graph_input(m, g, i) for i in op.inputs[1:])

    x = np.random.default_rng(27).uniform(-2, 2, (1, 6, 7, 3)).astype(np.float32)
    assert_matches_litert(_edit(model, inputs), [x] + values)


def test_depthwise_conv2d_bad_filter_is_rejected_like_litert():
    """Filter channels must be a multiple of the input channels (LiteRT checks it at eval)."""
    w = _weights((3, 3, 4, 1), 28)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME"), [tf.TensorSpec((1, 5, 5, 4), tf.float32)], key="dw bad"
    )

    def three_channels(m, g, op):
        g.tensors[op.inputs[0]].shape = (1, 5, 5, 3)
        g.tensors[op.inputs[0]].shape_signature = None

    _assert_both_reject(_edit(model, three_channels))


@pytest.mark.parametrize("op_name", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_strided_and_dilated_written_by_numlite(op_name, padding):
    """TensorFlow refuses strides together with dilations; LiteRT's kernels take both."""
    w = _weights((3, 3, 3, 2), 37)
    if op_name == "CONV_2D":
        fn = lambda x: tf.nn.conv2d(x, w, 1, padding)  # noqa: E731
    else:
        fn = lambda x: tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), padding)  # noqa: E731
    model = convert(fn, [tf.TensorSpec((2, 13, 12, 3), tf.float32)], key=("stride+dilation", op_name, padding))

    def strided_dilated(m, g, op):
        o = op.builtin_options
        o.stride_h, o.stride_w, o.dilation_h_factor, o.dilation_w_factor = 2, 3, 3, 2

    assert_matches_litert(_edit(model, strided_dilated))


# ----------------------------------------------------------------------------- TRANSPOSE_CONV

# (input shape, filter (kh, kw, out_c, in_c), output shape, strides, padding)
TRANSPOSE_CASES = [
    ((1, 4, 4, 3), (3, 3, 2, 3), (1, 8, 8, 2), (2, 2), "SAME"),
    ((2, 5, 5, 4), (3, 3, 5, 4), (2, 10, 9, 5), (2, 2), "SAME"),
    ((2, 5, 5, 4), (3, 3, 5, 4), (2, 11, 11, 5), (2, 2), "VALID"),
    ((1, 3, 4, 2), (2, 2, 3, 2), (1, 6, 8, 3), (2, 2), "VALID"),  # stride equal to the filter
    ((1, 3, 3, 2), (1, 1, 3, 2), (1, 9, 9, 3), (3, 3), "SAME"),  # stride larger than the filter
    ((1, 4, 5, 3), (5, 3, 2, 3), (1, 4, 5, 2), (1, 1), "SAME"),
    ((1, 4, 5, 3), (4, 3, 2, 3), (1, 14, 12, 2), (3, 2), "VALID"),  # output beyond the last tap
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=str)
@pytest.mark.parametrize("with_bias", [False, True])
def test_transpose_conv(case, with_bias):
    shape, hwoi, out_shape, strides, padding = case
    w = _weights(hwoi, 30)
    b = _weights(hwoi[2:3], 31)

    def fn(x):
        y = tf.nn.conv2d_transpose(x, w, out_shape, strides, padding)
        return y + b if with_bias else y

    model = convert(fn, [tf.TensorSpec(shape, tf.float32)], key=("transpose", case, with_bias))
    _, _, op = _only_op(model, "TRANSPOSE_CONV")
    assert (len(op.inputs) == 4 and op.inputs[3] >= 0) == with_bias
    assert_matches_litert(model)


def test_transpose_conv_fused_relu():
    w = _weights((3, 3, 4, 3), 32, scale=1.0)
    b = _weights((4,), 33)
    model = convert(
        lambda x: tf.nn.relu(tf.nn.conv2d_transpose(x, w, (2, 8, 8, 4), 2, "SAME") + b),
        [tf.TensorSpec((2, 4, 4, 3), tf.float32)],
        key="transpose relu",
    )
    _, _, op = _only_op(model, "TRANSPOSE_CONV")
    assert op.builtin_options.fused_activation_function == 1
    assert_matches_litert(model)


def test_transpose_conv_runtime_output_shape_and_weights():
    """Output shape and weights fed as graph inputs: the output is sized at invoke."""
    w = _weights((3, 3, 2, 3), 34)
    model = convert(
        lambda x: tf.nn.conv2d_transpose(x, w, (1, 7, 8, 2), 2, "SAME"), [tf.TensorSpec((1, 4, 4, 3), tf.float32)], key="t dyn"
    )
    values = []

    def inputs(m, g, op):
        values.extend(_as_graph_input(m, g, i) for i in op.inputs[:2])

    x = np.random.default_rng(35).uniform(-2, 2, (1, 4, 4, 3)).astype(np.float32)
    assert_matches_litert(_edit(model, inputs), [x] + values)


def test_transpose_conv_channel_mismatch_is_rejected_like_litert():
    w = _weights((3, 3, 2, 3), 36)
    model = convert(
        lambda x: tf.nn.conv2d_transpose(x, w, (1, 8, 8, 2), 2, "SAME"), [tf.TensorSpec((1, 4, 4, 3), tf.float32)], key="t bad"
    )

    def four_channels(m, g, op):
        g.tensors[op.inputs[2]].shape = (1, 4, 4, 4)
        g.tensors[op.inputs[2]].shape_signature = None

    _assert_both_reject(_edit(model, four_channels))


# ----------------------------------------------------------------------------- Keras layers


def _keras(layer_fn, input_shape, key):
    def build():
        tf.keras.utils.set_random_seed(0)
        inputs = tf.keras.Input(input_shape[1:], batch_size=input_shape[0])
        return tf.keras.Model(inputs, layer_fn()(inputs))

    return convert_keras(build, key)


KERAS_LAYERS = {
    "conv2d": (lambda: tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu"), (2, 9, 9, 3)),
    "conv2d_valid_dilated": (lambda: tf.keras.layers.Conv2D(4, 3, dilation_rate=2, use_bias=False), (1, 10, 10, 5)),
    "conv2d_grouped": (lambda: tf.keras.layers.Conv2D(6, 3, groups=2, padding="same"), (1, 8, 8, 4)),
    "depthwise": (lambda: tf.keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6"), (2, 8, 8, 6)),
    "depthwise_multiplier": (lambda: tf.keras.layers.DepthwiseConv2D((3, 2), strides=2, depth_multiplier=2), (1, 9, 8, 3)),
    "separable": (lambda: tf.keras.layers.SeparableConv2D(8, 3, padding="same", activation="relu"), (2, 8, 8, 4)),
    "conv2d_transpose": (lambda: tf.keras.layers.Conv2DTranspose(5, 3, strides=2, padding="same"), (2, 5, 5, 3)),
    "conv2d_transpose_valid": (lambda: tf.keras.layers.Conv2DTranspose(2, (4, 3), strides=(2, 3), activation="relu"), (1, 4, 4, 3)),
}


@pytest.mark.parametrize("name", sorted(KERAS_LAYERS))
def test_keras_layers(name):
    layer_fn, shape = KERAS_LAYERS[name]
    model = _keras(layer_fn, shape, ("keras conv", name))
    ops = op_names(model)
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"} & set(ops), ops
    assert_matches_litert(model, rtol=1e-5, atol=1e-5)
