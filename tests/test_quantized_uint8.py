"""Legacy uint8 models (TF1 quantization-aware training) against LiteRT.

Models come from the official converter's TF1 path (``tf.compat.v1.lite.TFLiteConverter``) with
``inference_type = tf.uint8``: the graphs carry fake-quant nodes (as quantization-aware training
leaves them) on the inputs, the weights and the outputs, so every tensor is uint8 with per-tensor
asymmetric parameters, weights included (their zero points are not 128: LiteRT's uint8 kernels
subtract them as ``filter_offset``). numlite must equal LiteRT's reference kernels
(``OpResolverType.BUILTIN_REF``) bit for bit and be within one quantum of its default kernels.

Graphs are built in their own ``tf.Graph`` and v1 ``Session``, so nothing here switches the
process to graph mode.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from helpers import run_interpreter
from numlite.errors import PrepareError
from numlite.model import read_model, write_model
from test_quantized_ops import assert_matches_reference, assert_op_quantized, edge_rows, narrow_inputs, quantized_model

UINT8 = np.dtype(np.uint8)
X4 = [(2, 9, 7, 5)]
ROW = [(6, 45)]
PAIR = [(4, 8), (4, 8)]
# quantized_input_stats (mean, std): real = (q - mean) / std, over about [-3, 5]
INPUT_STATS = (96.0, 32.0)
INPUT_RANGE = (-3.0, 4.96875)

_MODELS: dict = {}


def fake_quant(t, low: float, high: float):
    return tf.quantization.fake_quant_with_min_max_vars(t, low, high)


def uint8_model(build, shapes, key, out_range=(-4.0, 4.0), float_io=False) -> bytes:
    """``build(*inputs)`` between fake-quant nodes, converted with uint8 inference by the TF1
    converter (cached for the session). ``out_range`` None leaves the output to keep its
    input's parameters (ops that must not change them, such as RESHAPE)."""
    cache_key = (key, out_range, float_io)
    if cache_key not in _MODELS:
        graph = tf.Graph()
        with graph.as_default():
            xs = [tf.compat.v1.placeholder(tf.float32, s, name=f"x{i}") for i, s in enumerate(shapes)]
            y = build(*[fake_quant(x, *INPUT_RANGE) for x in xs])
            if out_range is not None:
                y = fake_quant(y, *out_range)
            with tf.compat.v1.Session(graph=graph) as session:
                converter = tf.compat.v1.lite.TFLiteConverter.from_session(session, xs, [y])
                converter.inference_type = tf.uint8
                converter.quantized_input_stats = {f"x{i}": INPUT_STATS for i in range(len(xs))}
                if float_io:
                    converter.inference_input_type = converter.inference_output_type = tf.float32
                _MODELS[cache_key] = converter.convert()
    return _MODELS[cache_key]


def constant_weights(shape, low: float, high: float, seed: int = 0):
    """Seeded constant weights fake-quantized to [low, high] (an asymmetric range gives the
    uint8 weights a zero point other than 128)."""
    values = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
    return fake_quant(tf.constant(values), low, high)


def find_op(model: bytes, op: str):
    m = read_model(model)
    found = [o for o in m.subgraphs[0].operators if m.op_name(o) == op]
    assert found, f"{op} not in {[m.op_name(o) for o in m.subgraphs[0].operators]}"
    return found[0]


def assert_op_uint8(model: bytes, op: str, output_dtype=UINT8, input_index: int = 0) -> dict:
    """``op`` is in the model with a uint8 input (``input_index``) carrying a scale and an
    ``output_dtype`` output; returns numlite's tensor details by index."""
    node = find_op(model, op)
    details = {d["index"]: d for d in numlite.Interpreter(model_content=model).get_tensor_details()}
    x = details[node.inputs[input_index]]
    assert x["dtype"] == UINT8 and x["quantization"][0] > 0, x
    assert details[node.outputs[0]]["dtype"] == output_dtype
    return details


def assert_asymmetric_uint8_weights(model: bytes, op: str) -> None:
    """``op`` runs on uint8 and its weights are uint8 with a zero point away from the middle."""
    node = find_op(model, op)
    transpose = op == "TRANSPOSE_CONV"  # inputs: output shape, weights, input
    w = assert_op_uint8(model, op, input_index=2 if transpose else 0)[node.inputs[1]]
    assert w["dtype"] == UINT8, w
    assert w["quantization"][1] not in (0, 128), w["quantization"]


def uint8_inputs(model: bytes, seed: int = 1) -> list[np.ndarray]:
    """Inputs over the whole uint8 range."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, d["shape"]).astype(np.uint8) for d in LiteRTInterpreter(model_content=model).get_input_details()]


def edge_inputs(model: bytes, seed: int = 2) -> list[np.ndarray]:
    """uint8 inputs whose first values are both ends of the range and values around the zero
    point, the rest random."""
    values = uint8_inputs(model, seed)
    for x in values:
        flat = x.reshape(-1)
        flat[:20] = np.arange(20)
        flat[20:40] = 255 - np.arange(20)
        flat[40:50] = int(INPUT_STATS[0]) - 5 + np.arange(10)
    return values


# -- convolutions (uint8 weights with their own zero point) ----------------------------------

CONVOLUTIONS = {
    "conv-same-relu": (
        "CONV_2D",
        lambda x: tf.nn.relu(tf.nn.conv2d(x, constant_weights((3, 3, 5, 7), -0.4, 1.0), 1, "SAME")
                             + tf.constant(np.linspace(-1, 1, 7, dtype=np.float32))),
    ),
    "conv-valid-stride2": ("CONV_2D", lambda x: tf.nn.conv2d(x, constant_weights((2, 3, 5, 4), -1.0, 0.3), 2, "VALID")),
    "depthwise-multiplier2": (
        "DEPTHWISE_CONV_2D",
        lambda x: tf.nn.depthwise_conv2d(x, constant_weights((3, 3, 5, 2), -0.5, 1.0), [1, 1, 1, 1], "SAME"),
    ),
    "depthwise-stride2-relu6": (
        "DEPTHWISE_CONV_2D",
        lambda x: tf.nn.relu6(tf.nn.depthwise_conv2d(x, constant_weights((3, 3, 5, 1), -1.0, 0.6), [1, 2, 2, 1], "VALID")),
    ),
    "transpose-conv": (
        "TRANSPOSE_CONV",
        lambda x: tf.nn.conv2d_transpose(x, constant_weights((3, 3, 4, 5), -0.7, 1.0), (2, 17, 13, 4), 2, "SAME"),
    ),
}


@pytest.mark.parametrize("name", sorted(CONVOLUTIONS))
def test_convolution(name):
    op, build = CONVOLUTIONS[name]
    model = uint8_model(build, X4, name, out_range=(-6.0, 10.0))
    assert_asymmetric_uint8_weights(model, op)
    assert_matches_reference(model, uint8_inputs(model))
    assert_matches_reference(model, edge_inputs(model))


FULLY_CONNECTED = {
    "plain": lambda x: tf.matmul(x, constant_weights((45, 10), -1.0, 0.5)),
    "bias-relu": lambda x: tf.nn.relu(tf.matmul(x, constant_weights((45, 10), -0.3, 1.0))
                                      + tf.constant(np.linspace(-2, 2, 10, dtype=np.float32))),
}


@pytest.mark.parametrize("name", sorted(FULLY_CONNECTED))
def test_fully_connected(name):
    model = uint8_model(FULLY_CONNECTED[name], ROW, ("fc", name), out_range=(-8.0, 8.0))
    assert_asymmetric_uint8_weights(model, "FULLY_CONNECTED")
    assert_matches_reference(model, uint8_inputs(model))
    assert_matches_reference(model, edge_inputs(model))


# -- element-wise arithmetic ------------------------------------------------------------------

ARITHMETIC = {
    "add": ("ADD", lambda x, y: x + y, PAIR),
    "sub-broadcast": ("SUB", lambda x, y: x - y, [(4, 8), (1, 8)]),
    "mul-broadcast": ("MUL", lambda x, y: x * y, [(4, 8), (4, 1)]),
    # enough elements that a wrong rounding of a multiplier shows
    "add-large": ("ADD", lambda x, y: x + y, [(64, 64), (64, 64)]),
    "mul-large": ("MUL", lambda x, y: x * y, [(64, 64), (64, 64)]),
}


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_arithmetic(name):
    op, build, shapes = ARITHMETIC[name]
    model = uint8_model(build, shapes, name, out_range=(-7.0, 9.0))
    assert_op_uint8(model, op)
    assert_matches_reference(model, uint8_inputs(model))


def test_add_with_fused_relu6():
    model = uint8_model(lambda x, y: tf.nn.relu6(x + y), PAIR, "add-relu6", out_range=(0.0, 6.0))
    assert_op_uint8(model, "ADD")
    assert "RELU6" not in [read_model(model).op_name(o) for o in read_model(model).subgraphs[0].operators]
    assert_matches_reference(model, uint8_inputs(model))


# -- activations ------------------------------------------------------------------------------

ACTIVATIONS = {
    "SOFTMAX": (tf.nn.softmax, (0.0, 1.0)),
    "LOGISTIC": (tf.sigmoid, (0.0, 1.0)),
    "TANH": (tf.tanh, (-1.0, 1.0)),
    "RELU": (tf.nn.relu, (-1.0, 5.0)),
    "RELU6": (tf.nn.relu6, (-0.5, 6.0)),
    "RELU_N1_TO_1": (lambda x: tf.clip_by_value(x, -1.0, 1.0), (-1.0, 1.0)),
    "LEAKY_RELU": (lambda x: tf.nn.leaky_relu(x, 0.2), (-1.0, 5.0)),
    "HARD_SWISH": (lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, (-0.5, 5.0)),
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activation(op):
    """Output ranges as the converter's own for these ops where LiteRT fixes them (SOFTMAX and
    LOGISTIC 1/256 from 0, TANH 1/128 around 128)."""
    build, out_range = ACTIVATIONS[op]
    model = uint8_model(build, ROW, ("act", op), out_range=out_range)
    assert_op_uint8(model, op)
    assert_matches_reference(model, uint8_inputs(model))
    assert_matches_reference(model, edge_inputs(model))


# -- LOG_SOFTMAX and L2_NORMALIZATION (int8 too: one kernel for both) -------------------------

# Input ranges of LOG_SOFTMAX: differences reach below LiteRT's input radius only when wide.
# "radius": a scale just below 1/8, where that radius (31 * 2**26 >> shift quanta, 248) is almost
# 31 in real terms, so that a row's log-sum-exp above 1 moves the cutoff (adjusted_diff_min).
_RADIUS_SCALE = 255 * 0.125 * 0.999 / (INPUT_RANGE[1] - INPUT_RANGE[0])
LOG_SOFTMAX_RANGES = {
    "fine": (-1.0, 1.5),
    "unit": INPUT_RANGE,
    "wide": (-24.0, 24.0),
    "radius": (INPUT_RANGE[0] * _RADIUS_SCALE, INPUT_RANGE[1] * _RADIUS_SCALE),
}


@pytest.mark.parametrize("name", sorted(LOG_SOFTMAX_RANGES))
def test_log_softmax(name):
    """LiteRT's fixed-point log-softmax (exp sum in Q12.19, gemmlowp's log of it), output 1/16
    steps below zero point 255; its default kernels use a float table instead."""
    low, high = LOG_SOFTMAX_RANGES[name]
    scale = high / INPUT_RANGE[1]
    model = uint8_model(lambda x: tf.nn.log_softmax(fake_quant(x * scale, low, high)), ROW, ("log-softmax", name),
                        out_range=None)
    assert_op_uint8(model, "LOG_SOFTMAX")
    assert_matches_reference(model, uint8_inputs(model))
    assert_matches_reference(model, edge_inputs(model))
    assert_matches_reference(model, [np.random.default_rng(6).integers(100, 110, ROW[0]).astype(np.uint8)])
    # rows with several maxima and values all the way down
    spread = np.random.default_rng(7).integers(0, 12, ROW[0]).astype(np.uint8)
    spread[:, :8] = 255 - np.arange(6)[:, None]
    assert_matches_reference(model, [spread])


@pytest.mark.parametrize("scale", [0.3, 8.0], ids=["fine", "wide"])
def test_log_softmax_int8(scale):
    model = quantized_model(lambda x: tf.nn.log_softmax(x * scale), [tf.TensorSpec(ROW[0], tf.float32)], ("log-softmax", scale))
    assert_op_quantized(model, "LOG_SOFTMAX", np.int8)
    assert_matches_reference(model)
    assert_matches_reference(model, narrow_inputs(model, 10))
    assert_matches_reference(model, narrow_inputs(model, 100))


def test_l2_normalization():
    """``x - zp`` times LiteRT's fixed-point inverse square root of the row's sum of squares, on
    the output scale 1/128 around 128; rows at the zero point (sum 0) and one quantum from it
    (sum 1) take LiteRT's special case."""
    model = uint8_model(lambda x: tf.math.l2_normalize(x, -1), ROW, "l2-normalization", out_range=None)
    assert_op_uint8(model, "L2_NORMALIZATION")
    assert_matches_reference(model, uint8_inputs(model))
    x = edge_inputs(model)[0]
    zero_point = int(INPUT_STATS[0])
    x[3] = zero_point
    x[4] = zero_point
    x[4, 7] = zero_point + 1
    x[5] = zero_point
    x[5, :3] = (zero_point - 1, zero_point + 2, 255)
    assert_matches_reference(model, [x])


def test_l2_normalization_int8():
    model = quantized_model(lambda x: tf.math.l2_normalize(x, -1), [tf.TensorSpec(ROW[0], tf.float32)], "l2-normalization")
    assert_op_quantized(model, "L2_NORMALIZATION", np.int8)
    assert_matches_reference(model)
    x = edge_rows(model)
    zero_point = int(LiteRTInterpreter(model_content=model).get_input_details()[0]["quantization"][1])
    x[3] = zero_point
    x[4] = zero_point
    x[4, 0] = zero_point + 1
    assert_matches_reference(model, [x])


# -- pooling, layout, resizing, reductions ----------------------------------------------------

SPATIAL = {
    "MAX_POOL_2D": (lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), None),
    "AVERAGE_POOL_2D": (lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"), None),
    "AVERAGE_POOL_2D-valid": (lambda x: tf.nn.avg_pool2d(x, (2, 3), (1, 2), "VALID"), None),
    "RESHAPE": (lambda x: tf.reshape(x, (2, -1)), None),
    "TRANSPOSE": (lambda x: tf.transpose(x, (0, 3, 1, 2)), None),
    "PAD": (lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]]), None),
    "RESIZE_BILINEAR": (lambda x: tf.compat.v1.image.resize_bilinear(x, (13, 11)), None),
    "RESIZE_BILINEAR-half-pixel": (
        lambda x: tf.compat.v1.image.resize_bilinear(x, (13, 11), half_pixel_centers=True), None),
    "RESIZE_BILINEAR-align-corners": (
        lambda x: tf.compat.v1.image.resize_bilinear(x, (13, 11), align_corners=True), None),
    "RESIZE_NEAREST_NEIGHBOR": (lambda x: tf.compat.v1.image.resize_nearest_neighbor(x, (13, 11)), None),
    "MEAN": (lambda x: tf.reduce_mean(x, axis=(1, 2), keepdims=True), (-2.0, 3.0)),
    "MEAN-last": (lambda x: tf.reduce_mean(x, axis=-1), (-1.0, 1.5)),
    "SUM": (lambda x: tf.reduce_sum(x, axis=-1), (-20.0, 30.0)),
    "SUM-hw": (lambda x: tf.reduce_sum(x, axis=(1, 2)), (-60.0, 90.0)),
    "SUM-saturating": (lambda x: tf.reduce_sum(x, axis=(1, 2)), (-5.0, 6.0)),
}


@pytest.mark.parametrize("name", sorted(SPATIAL))
def test_spatial(name):
    """Ops that keep their input's parameters get no output fake-quant (the converter requires
    equal parameters); MEAN and SUM rescale to an output range of their own. SUM follows
    LiteRT's default kernel (float rescaling, as for int8 and int16), one quantum from its
    reference kernel (integer rescaling)."""
    build, out_range = SPATIAL[name]
    model = uint8_model(build, X4, ("spatial", name), out_range=out_range)
    assert_op_uint8(model, name.split("-")[0])
    follows_default = name.startswith("SUM")
    assert_matches_reference(model, uint8_inputs(model), follows_default=follows_default)
    assert_matches_reference(model, edge_inputs(model), follows_default=follows_default)



def test_concatenation_of_differently_scaled_inputs():
    # y * 2 gets a range of its own: the concatenation requantizes one input to the output's
    build = lambda x, y: tf.concat([x, fake_quant(y * 2.0, -8.0, 8.0)], -1)  # noqa: E731
    model = uint8_model(build, [(2, 3, 4), (2, 3, 5)], "concat", out_range=(-8.0, 8.0))
    details = assert_op_uint8(model, "CONCATENATION")
    node = find_op(model, "CONCATENATION")
    assert len({details[i]["quantization"] for i in node.inputs}) == 2
    assert_matches_reference(model, uint8_inputs(model))


# -- comparisons ------------------------------------------------------------------------------

COMPARISONS = {
    "LESS": tf.math.less,
    "LESS_EQUAL": tf.math.less_equal,
    "GREATER": tf.math.greater,
    "GREATER_EQUAL": tf.math.greater_equal,
    "EQUAL": tf.math.equal,
    "NOT_EQUAL": tf.math.not_equal,
}


def comparison_model(op: str) -> bytes:
    """A uint8 comparison of two differently scaled inputs. The converter leaves NOT_EQUAL in
    float (it dequantizes around it), so that one is the converter's uint8 EQUAL model with the
    operator code changed: LiteRT's NOT_EQUAL has the same uint8 form and no options."""
    if op == "NOT_EQUAL":
        m = read_model(comparison_model("EQUAL"))
        (code,) = [c for c in m.operator_codes if c.builtin == "EQUAL"]
        code.builtin = "NOT_EQUAL"
        return write_model(m)
    compare = COMPARISONS[op]
    build = lambda x, y: tf.cast(compare(x, fake_quant(y * 0.5, -1.0, 3.0)), tf.float32)  # noqa: E731
    return uint8_model(build, PAIR, ("compare", op), out_range=(0.0, 1.0))


@pytest.mark.parametrize("op", sorted(COMPARISONS))
def test_comparison_of_differently_scaled_inputs(op):
    """The second input rescaled to a range of its own: comparing the stored bytes would be
    wrong. Bool outputs (cast to float and quantized after) equal both LiteRT kernels."""
    model = comparison_model(op)
    details = assert_op_uint8(model, op, output_dtype=np.bool_)
    node = find_op(model, op)
    assert details[node.inputs[1]]["dtype"] == UINT8
    assert details[node.inputs[0]]["quantization"] != details[node.inputs[1]]["quantization"]
    # inputs near each other, so that EQUAL has equal pairs to find
    x = np.random.default_rng(3).integers(60, 140, (4, 8)).astype(np.uint8)
    y = np.random.default_rng(4).integers(100, 120, (4, 8)).astype(np.uint8)
    assert_matches_reference(model, [x, y], exact_default=True)
    assert_matches_reference(model, uint8_inputs(model), exact_default=True)


# -- QUANTIZE / DEQUANTIZE --------------------------------------------------------------------


def test_float_inputs_and_outputs_quantize_and_dequantize():
    build = lambda x: tf.nn.depthwise_conv2d(x, constant_weights((3, 3, 5, 1), -0.5, 1.0), [1, 1, 1, 1], "SAME")  # noqa: E731
    model = uint8_model(build, X4, "float-io", out_range=(-6.0, 10.0), float_io=True)
    m = read_model(model)
    names = [m.op_name(o) for o in m.subgraphs[0].operators]
    assert names == ["QUANTIZE", "DEPTHWISE_CONV_2D", "DEQUANTIZE"], names
    assert_op_uint8(model, "DEPTHWISE_CONV_2D")
    x = np.random.default_rng(5).uniform(-6.0, 7.0, X4[0]).astype(np.float32)
    x.reshape(-1)[:4] = [-1e6, 1e6, 0.0, 0.5 * 0.03137255]  # saturation and a rounding tie
    assert_matches_reference(model, [x])


def test_requantize_uint8_to_uint8():
    # max pooling keeps its input's parameters: the converter requantizes its result to the
    # output's fake-quant range
    model = uint8_model(lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), X4, "requantize", out_range=(-2.0, 3.0))
    names = [read_model(model).op_name(o) for o in read_model(model).subgraphs[0].operators]
    assert names == ["MAX_POOL_2D", "QUANTIZE"], names
    details = assert_op_uint8(model, "QUANTIZE")
    node = find_op(model, "QUANTIZE")
    assert details[node.inputs[0]]["quantization"] != details[node.outputs[0]]["quantization"]
    assert_matches_reference(model, uint8_inputs(model))
    assert_matches_reference(model, edge_inputs(model))


# -- refused by LiteRT ------------------------------------------------------------------------


REFUSED = {
    "BATCH_MATMUL": (lambda x, y: tf.matmul(x, y), [(2, 4, 8), (2, 8, 3)]),
    "EXP": (tf.exp, ROW),
    "ABS": (tf.abs, ROW),
    "SQUARED_DIFFERENCE": (tf.math.squared_difference, PAIR),
}


@pytest.mark.parametrize("op", sorted(REFUSED))
def test_uint8_forms_litert_refuses_are_refused(op):
    """The converter writes these ops on uint8 tensors, which LiteRT's kernels refuse (at
    prepare or at invoke, reference and default kernels alike); numlite refuses them at
    prepare with an error naming the node and the type, rather than computing on raw bytes."""
    build, shapes = REFUSED[op]
    model = uint8_model(build, shapes, ("refused", op))
    assert_op_uint8(model, op)
    inputs = uint8_inputs(model)
    for kwargs in ({}, {"experimental_op_resolver_type": OpResolverType.BUILTIN_REF}):
        # (BATCH_MATMUL's default kernel fails inside the XNNPACK delegate, which names the op)
        with pytest.raises(RuntimeError, match=rf"\({op}\) failed to (prepare|invoke)|delegate {op} node"):
            run_interpreter(LiteRTInterpreter(model_content=model, **kwargs), inputs)
    with pytest.raises(PrepareError, match=rf"node 0 \({op}\).*uint8"):
        numlite.Interpreter(model_content=model).allocate_tensors()


def test_uint8_model_outputs_are_stable_across_runs():
    """One interpreter invoked twice on different inputs gives each input's own results (state
    kept between invocations, such as a requantizer's buffers, must not leak)."""
    model = uint8_model(CONVOLUTIONS["conv-same-relu"][1], X4, "conv-same-relu", out_range=(-6.0, 10.0))
    first, second = uint8_inputs(model, 7), uint8_inputs(model, 8)
    it = numlite.Interpreter(model_content=model)
    a = run_interpreter(it, first)[0].copy()
    b = run_interpreter(it, second)[0]
    np.testing.assert_array_equal(a, run_interpreter(numlite.Interpreter(model_content=model), first)[0])
    np.testing.assert_array_equal(b, run_interpreter(numlite.Interpreter(model_content=model), second)[0])
