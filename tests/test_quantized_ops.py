"""Full-integer (int8, and int16 "16x8") kernels against LiteRT.

Models come from the official converter with post-training full-integer quantization and a
seeded representative dataset. numlite must equal LiteRT's reference kernels
(``OpResolverType.BUILTIN_REF``) bit for bit and be within one quantum of its default kernels;
both are checked on the same integer inputs, spread over the whole range of the type.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from helpers import convert, run_interpreter
from numlite.kernels import KERNELS
from numlite.kernels import fixed_point as fp
from numlite.model import read_model

S = tf.TensorSpec
F = tf.float32
X4 = [S((2, 9, 7, 5), F)]
ROW = [S((4, 64), F)]


def quantized_model(fn, specs, key, int16=False, float_io=False):
    """``fn`` converted to a full-integer model (cached for the session)."""

    def representative():
        rng = np.random.default_rng(0)
        for _ in range(16):
            yield [rng.uniform(-2, 2, s.shape).astype(np.float32) for s in specs]

    ops = (
        [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        if int16
        else [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    )
    options = dict(
        optimizations=[tf.lite.Optimize.DEFAULT],
        representative_dataset=representative,
        target_spec=tf.lite.TargetSpec(supported_ops=ops),
    )
    if not float_io:
        options["inference_input_type"] = options["inference_output_type"] = tf.int16 if int16 else tf.int8
    return convert(fn, specs, key=("quantized", key, int16, float_io), **options)


def integer_inputs(model, seed=1):
    """Inputs over the whole range of each integer input type (floats in [-2.5, 2.5])."""
    rng = np.random.default_rng(seed)
    values = []
    for d in LiteRTInterpreter(model_content=model).get_input_details():
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            values.append(rng.uniform(-2.5, 2.5, d["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            values.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(dtype))
    return values


def assert_op_quantized(model, op, dtype):
    """The model really runs ``op`` on ``dtype`` tensors that carry a scale."""
    m = read_model(model)
    graph = m.subgraphs[0]
    found = [o for o in graph.operators if m.op_name(o) == op]
    assert found, f"{op} not in {[m.op_name(o) for o in graph.operators]}"
    out = graph.tensors[found[0].outputs[0]]
    assert out.quantization is not None and len(out.quantization.scale) == 1
    it = numlite.Interpreter(model_content=model)
    dtypes = {d["index"]: d["dtype"] for d in it.get_tensor_details()}
    assert dtypes[found[0].inputs[0]] == dtype and dtypes[found[0].outputs[0]] == dtype


def assert_matches_reference(model, inputs=None, exact_default=False):
    """numlite == LiteRT BUILTIN_REF exactly, and within one quantum of LiteRT's default."""
    inputs = integer_inputs(model) if inputs is None else inputs
    reference = run_interpreter(
        LiteRTInterpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF), inputs
    )
    default = run_interpreter(LiteRTInterpreter(model_content=model), inputs)
    ours = run_interpreter(numlite.Interpreter(model_content=model), inputs)
    for k, (r, d, o) in enumerate(zip(reference, default, ours)):
        assert o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_array_equal(o, r, err_msg=f"output {k} vs LiteRT reference kernels")
        gap = np.abs(o.astype(np.int64) - d.astype(np.int64)).max(initial=0)
        assert gap <= (0 if exact_default else 1), f"output {k}: {gap} quanta from LiteRT's default kernels"


# -- fixed point ------------------------------------------------------------------------------


def test_quantize_multiplier_round_trips():
    reals = np.array([0.3, 1e-3, 0.75, 1.0, 3.5, 2.0**-40, 0.0])
    mult, shift = fp.quantize_multiplier(reals)
    for r, m, s in zip(reals, mult, shift):
        if r < 2.0**-31:
            assert (m, s) == (0, 0)
        else:
            assert 1 << 30 <= m < 1 << 31
            assert abs(m * 2.0 ** (int(s) - 31) - r) <= r * 2.0**-30


def test_rounding_divide_by_pot_rounds_half_away_from_zero():
    x = np.array([5, -5, 6, -6, 7, -7, 4, -4], np.int32)
    np.testing.assert_array_equal(fp.rounding_divide_by_pot(x, 2), [1, -1, 2, -2, 2, -2, 1, -1])


def test_activation_range():
    assert fp.activation_range(1, 0.5, -10, np.int8) == (-10, 127)
    assert fp.activation_range(3, 0.05, -128, np.int8) == (-128, -8)
    assert fp.activation_range(0, 0.05, 3, np.int16) == (-32768, 32767)


def test_quantized_kernels_dispatch_beside_float_ones():
    assert KERNELS["ADD"].quantized.__name__ == "QuantizedAdd"
    assert KERNELS["ADD"].plain.__name__ == "Add"


# -- element-wise arithmetic ------------------------------------------------------------------

ARITHMETIC = {
    "add": (lambda x, y: x + y, [S((4, 8), F), S((4, 8), F)], "ADD"),
    "add_broadcast_relu": (lambda x, y: tf.nn.relu(x + y), [S((2, 4, 8), F), S((8,), F)], "ADD"),
    "sub": (lambda x, y: x - y, [S((4, 8), F), S((1, 8), F)], "SUB"),
    "mul": (lambda x, y: x * y, [S((4, 8), F), S((4, 1), F)], "MUL"),
    # enough elements that a wrong rounding variant of the multiplier shows
    "mul_large": (lambda x, y: x * y, [S((64, 64), F), S((64, 64), F)], "MUL"),
}


@pytest.mark.parametrize("int16", [False, True], ids=["int8", "int16"])
@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_arithmetic(name, int16):
    fn, specs, op = ARITHMETIC[name]
    model = quantized_model(fn, specs, name, int16)
    assert_op_quantized(model, op, np.int16 if int16 else np.int8)
    assert_matches_reference(model)


def test_quantize_and_dequantize_at_the_ends():
    model = quantized_model(lambda x, y: x * y + x, [S((4, 16), F), S((4, 16), F)], "float_io", float_io=True)
    names = [read_model(model).op_name(o) for o in read_model(model).subgraphs[0].operators]
    assert names[0] == "QUANTIZE" and names[-1] == "DEQUANTIZE", names
    inputs = integer_inputs(model)
    reference = run_interpreter(
        LiteRTInterpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF), inputs
    )
    ours = run_interpreter(numlite.Interpreter(model_content=model), inputs)
    np.testing.assert_array_equal(ours[0], reference[0])


def test_requantize_int8_to_int8():
    # a concatenation of inputs with different ranges makes the converter requantize one
    model = quantized_model(lambda x, y: tf.concat([x, y * 3.0], -1), [S((2, 3, 4), F), S((2, 3, 5), F)], "concat16", True)
    assert "QUANTIZE" in [read_model(model).op_name(o) for o in read_model(model).subgraphs[0].operators]
    assert_matches_reference(model)


# -- activations ------------------------------------------------------------------------------


class _Prelu:
    layer = None

    def __call__(self, x):
        if _Prelu.layer is None:
            _Prelu.layer = tf.keras.layers.PReLU(alpha_initializer=tf.constant_initializer(np.linspace(-0.5, 0.5, 64)))
        return _Prelu.layer(x)


ACTIVATIONS = {
    "RELU": tf.nn.relu,
    "RELU6": tf.nn.relu6,
    "RELU_N1_TO_1": lambda x: tf.clip_by_value(x, -1.0, 1.0),
    "LEAKY_RELU": lambda x: tf.nn.leaky_relu(x, 0.2),
    "LOGISTIC": tf.sigmoid,
    "TANH": tf.tanh,
    "HARD_SWISH": lambda x: x * tf.nn.relu6(x + 3.0) / 6.0,
    "PRELU": _Prelu(),
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activation_int8(op):
    model = quantized_model(ACTIVATIONS[op], ROW, f"act-{op}")
    assert_op_quantized(model, op, np.int8)
    assert_matches_reference(model)


# -- pooling, layout, resizing ----------------------------------------------------------------

SPATIAL = {
    "MAX_POOL_2D": lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"),
    "AVERAGE_POOL_2D": lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"),
    "AVERAGE_POOL_2D-valid": lambda x: tf.nn.avg_pool2d(x, (2, 3), (1, 2), "VALID"),
    "PAD": lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]]),
    "RESHAPE": lambda x: tf.reshape(x, (2, -1)),
    "TRANSPOSE": lambda x: tf.transpose(x, (0, 3, 1, 2)),
    "RESIZE_BILINEAR": lambda x: tf.image.resize(x, (13, 11)),
    "RESIZE_NEAREST_NEIGHBOR": lambda x: tf.image.resize(x, (13, 11), method="nearest"),
}


@pytest.mark.parametrize("int16", [False, True], ids=["int8", "int16"])
@pytest.mark.parametrize("name", sorted(SPATIAL))
def test_spatial(name, int16):
    model = quantized_model(SPATIAL[name], X4, f"spatial-{name}", int16)
    assert_op_quantized(model, name.split("-")[0], np.int16 if int16 else np.int8)
    assert_matches_reference(model)


def test_concatenation_int8():
    model = quantized_model(lambda x, y: tf.concat([x, y * 2.0], -1), [S((2, 3, 4), F), S((2, 3, 5), F)], "concat8")
    assert_op_quantized(model, "CONCATENATION", np.int8)
    assert_matches_reference(model)


# -- reductions -------------------------------------------------------------------------------

REDUCTIONS = {
    "MEAN-hw": lambda x: tf.reduce_mean(x, axis=(1, 2), keepdims=True),
    "MEAN-last": lambda x: tf.reduce_mean(x, axis=-1),
    "SUM": lambda x: tf.reduce_sum(x, axis=(1,)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_int8_matches_default_kernels(name):
    """Known gap: ai-edge-litert 2.3's reference MEAN/SUM use an integer algorithm numlite does
    not reproduce yet (MEAN within one quantum of it); numlite follows LiteRT's default kernels
    bit for bit instead."""
    model = quantized_model(REDUCTIONS[name], X4, f"reduce-{name}")
    assert_op_quantized(model, name.split("-")[0], np.int8)
    inputs = integer_inputs(model)
    default = run_interpreter(LiteRTInterpreter(model_content=model), inputs)
    ours = run_interpreter(numlite.Interpreter(model_content=model), inputs)
    np.testing.assert_array_equal(ours[0], default[0])


# -- details ----------------------------------------------------------------------------------


def test_tensor_details_report_quantization():
    model = quantized_model(ARITHMETIC["add"][0], ARITHMETIC["add"][1], "add")
    ours = numlite.Interpreter(model_content=model)
    theirs = LiteRTInterpreter(model_content=model)
    ours.allocate_tensors()
    theirs.allocate_tensors()
    by_name = {d["name"]: d for d in theirs.get_tensor_details()}
    for d in ours.get_tensor_details():
        t = by_name[d["name"]]
        assert d["quantization"] == pytest.approx(t["quantization"])
        for key in ("scales", "zero_points"):
            np.testing.assert_array_equal(d["quantization_parameters"][key], t["quantization_parameters"][key])
        assert d["quantization_parameters"]["quantized_dimension"] == t["quantization_parameters"]["quantized_dimension"]
