"""Quantized convolutions and matrix products against LiteRT, on official-converter models.

Full-integer models (int8, and 16x8: int16 activations with int8 weights) must equal LiteRT's
reference kernels (BUILTIN_REF) bit for bit and stay within one quantum of its default kernels;
8-bit CONV_2D and DEPTHWISE_CONV_2D equal its builtin kernels instead (without the XNNPACK
delegate), which round exact halves differently from the reference kernels (tests at the end).
Dynamic-range (hybrid) models, whose activations are quantized on the fly, are float: they match
the reference kernels to float32 rounding (atol 1e-5 on outputs of order 10: the same integer dot
products, scaled and biased in float32; LiteRT's default kernels may add the terms in another
order, moving the last bits, hence the same bound for them).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from helpers import convert, run_interpreter, run_numlite

RNG = np.random.default_rng(7)
CONV_W = RNG.normal(0, 0.4, (3, 3, 4, 6)).astype(np.float32)
CONV_B = RNG.normal(0, 0.5, 6).astype(np.float32)
GROUP_W = RNG.normal(0, 0.4, (3, 3, 2, 6)).astype(np.float32)
DW_W = RNG.normal(0, 0.5, (3, 3, 4, 2)).astype(np.float32)
FC_W = RNG.normal(0, 0.4, (10, 5)).astype(np.float32)
FC_B = RNG.normal(0, 0.5, 5).astype(np.float32)
MM_W = RNG.normal(0, 0.5, (6, 7)).astype(np.float32)
TC_W = RNG.normal(0, 0.5, (3, 3, 5, 4)).astype(np.float32)  # [h, w, out_c, in_c]
# Hybrid models need weights of at least 1024 elements (smaller ones stay float).
H_CONV_W = RNG.normal(0, 0.2, (3, 3, 16, 32)).astype(np.float32)
H_CONV_B = RNG.normal(0, 0.5, 32).astype(np.float32)
H_DW_W = RNG.normal(0, 0.5, (3, 3, 64, 2)).astype(np.float32)
H_FC_W = RNG.normal(0, 0.2, (64, 32)).astype(np.float32)
H_FC_B = RNG.normal(0, 0.5, 32).astype(np.float32)
H_MM_W = RNG.normal(0, 0.5, (2, 48, 32)).astype(np.float32)


def _conv(x):
    return tf.nn.relu(tf.nn.conv2d(x, CONV_W, 2, "SAME") + CONV_B)


def _dilated(x):
    return tf.nn.relu6(tf.nn.conv2d(x, CONV_W, 1, "VALID", dilations=2) + CONV_B)


def _grouped(x):
    return tf.nn.conv2d(x, GROUP_W, 1, "SAME") + CONV_B


def _depthwise(x):
    return tf.nn.depthwise_conv2d(x, DW_W, [1, 2, 2, 1], "SAME") + 0.1


def _fc(x):
    return tf.nn.relu6(tf.matmul(x, FC_W) + FC_B)


def _fc3d(x):  # a matmul by a constant: FULLY_CONNECTED with keep_num_dims
    return tf.matmul(x, MM_W)


def _bmm(a, b):
    return tf.matmul(a, b)


def _bmm_adj(a, b):
    return tf.matmul(a, b, adjoint_b=True)


def _tconv(x):
    return tf.nn.conv2d_transpose(x, TC_W, [2, 15, 15, 5], 2, "SAME")


def _spec(*shape):
    return tf.TensorSpec(list(shape), tf.float32)


def _representative(specs):
    def data():
        rng = np.random.default_rng(1)
        for _ in range(8):
            yield [rng.uniform(-2, 2, s.shape).astype(np.float32) for s in specs]

    return data


def full_integer(fn, specs, wide=False, per_channel=True, io=None):
    """``fn`` quantized by the official converter with a representative dataset: int8, or 16x8."""
    ops = (
        [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        if wide
        else [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    )
    io = io if io is not None else (tf.int16 if wide else tf.int8)
    options = dict(
        optimizations=[tf.lite.Optimize.DEFAULT],
        representative_dataset=_representative(specs),
        target_spec=tf.lite.TargetSpec(supported_ops=ops),
        inference_input_type=io,
        inference_output_type=io,
    )
    if not per_channel:
        options["_experimental_disable_per_channel"] = True
    return convert(fn, specs, key=(fn.__name__, wide, per_channel, repr(io)), **options)


def dynamic_range(fn, specs):
    return convert(fn, specs, key=(fn.__name__, "dynamic"), optimizations=[tf.lite.Optimize.DEFAULT])


def op_tensors(model: bytes, op: str) -> list[tuple[str, object]]:
    """(dtype, quantization) of every input and output of the first ``op`` in subgraph 0."""
    m = numlite.model.read_model(model)
    sg = m.subgraphs[0]
    for node in sg.operators:
        if m.op_name(node) == op:
            return [(sg.tensors[i].dtype, sg.tensors[i].quantization) for i in list(node.inputs) + list(node.outputs) if i >= 0]
    raise AssertionError(f"{op} is not in the model's ops {[m.op_name(n) for n in sg.operators]}")


def integer_inputs(model: bytes, seed: int = 0) -> list[np.ndarray]:
    """Seeded values over an input's whole range (floats in [-2, 2] for float inputs)."""
    rng = np.random.default_rng(seed)
    values = []
    for d in LiteRTInterpreter(model_content=model).get_input_details():
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            values.append(rng.uniform(-2, 2, d["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            values.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(dtype))
    return values


def litert(model: bytes, inputs, reference: bool | str) -> list[np.ndarray]:
    """LiteRT's reference kernels (True), its default ones (False) or its builtin kernels
    without the XNNPACK delegate ("builtin")."""
    resolver = {True: OpResolverType.BUILTIN_REF, "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    kwargs = {"experimental_op_resolver_type": resolver[reference]} if reference else {}
    return run_interpreter(LiteRTInterpreter(model_content=model, **kwargs), inputs)


# numlite rounds the exact halves of these ops' 8-bit rescale as LiteRT's builtin kernels, which
# differ there from its reference kernels (numlite/kernels/quantized_conv.py; the halves tests below)
HALVES_AS_BUILTIN = ("CONV_2D", "DEPTHWISE_CONV_2D")


def check_integer(model: bytes, op: str, dtype, default_bound: int = 1, seeds=(0, 1), float_bound: float = 1e-5) -> None:
    """``op`` runs on ``dtype`` activations; numlite equals BUILTIN_REF (8-bit CONV_2D and
    DEPTHWISE_CONV_2D: LiteRT's builtin kernels, and within one quantum of BUILTIN_REF) and is
    within ``default_bound`` quanta (``float_bound`` for float outputs) of LiteRT's default kernels."""
    types = op_tensors(model, op)
    assert types[0][0] == np.dtype(dtype) or types[2][0] == np.dtype(dtype), types
    assert types[-1][0] == np.dtype(dtype)
    builtin = op in HALVES_AS_BUILTIN and np.dtype(dtype) in (np.dtype(np.int8), np.dtype(np.uint8))
    for seed in seeds:
        inputs = integer_inputs(model, seed)
        actual = run_numlite(model, inputs)
        if builtin:
            for a, r in zip(actual, litert(model, inputs, True)):
                assert np.abs(a.astype(np.int64) - r).max() <= 1
        exact = litert(model, inputs, "builtin" if builtin else True)
        for a, r, d in zip(actual, exact, litert(model, inputs, False)):
            assert a.dtype == r.dtype
            if a.dtype.kind == "f":  # float32 rounding of the scaled integer sums (see the top)
                np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(a, r)
            if a.dtype.kind == "f":
                np.testing.assert_allclose(a, d, rtol=0, atol=float_bound)
            else:
                assert np.abs(a.astype(np.int64) - d).max() <= default_bound


# ------------------------------------------------------------------------------ int8


@pytest.mark.parametrize(
    "fn, specs, op",
    [
        (_conv, [_spec(2, 8, 8, 4)], "CONV_2D"),
        (_dilated, [_spec(1, 9, 9, 4)], "CONV_2D"),
        (_grouped, [_spec(1, 5, 5, 4)], "CONV_2D"),
        (_depthwise, [_spec(2, 7, 7, 4)], "DEPTHWISE_CONV_2D"),
        (_fc, [_spec(3, 10)], "FULLY_CONNECTED"),
        (_fc3d, [_spec(2, 3, 6)], "FULLY_CONNECTED"),
        (_bmm, [_spec(2, 3, 6), _spec(2, 6, 7)], "BATCH_MATMUL"),
        (_bmm_adj, [_spec(1, 3, 6), _spec(2, 7, 6)], "BATCH_MATMUL"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_int8_per_channel(fn, specs, op):
    model = full_integer(fn, specs)
    if op != "BATCH_MATMUL":
        weights = op_tensors(model, op)[1]
        assert weights[0] == np.int8 and len(weights[1].scale) > 1  # per-channel weights
    check_integer(model, op, np.int8)


@pytest.mark.parametrize("fn, op", [(_conv, "CONV_2D"), (_fc, "FULLY_CONNECTED")], ids=["conv", "fc"])
def test_int8_per_tensor(fn, op):
    specs = [_spec(2, 8, 8, 4)] if op == "CONV_2D" else [_spec(3, 10)]
    model = full_integer(fn, specs, per_channel=False)
    assert len(op_tensors(model, op)[1][1].scale) == 1
    check_integer(model, op, np.int8)


def test_int8_transpose_conv():
    model = full_integer(_tconv, [_spec(2, 8, 8, 4)])
    # LiteRT's optimized TRANSPOSE_CONV itself differs from its reference kernel by up to 2
    # quanta on this model; numlite is checked bit-exact against the reference.
    check_integer(model, "TRANSPOSE_CONV", np.int8, default_bound=2)


def test_int8_float_interface():
    """Float inputs and outputs: QUANTIZE and DEQUANTIZE around the integer convolution."""
    model = full_integer(_conv, [_spec(2, 8, 8, 4)], io=tf.float32)
    quantum = float(op_tensors(model, "CONV_2D")[-1][1].scale[0])
    # One quantum of the int8 output, dequantized (float32 rounding of the product aside).
    check_integer(model, "CONV_2D", np.int8, float_bound=quantum * (1 + 1e-6))


def _depthwise_variant(kernel: int, stride: int, dilation: int, multiplier: int, padding: str):
    """A depthwise layer (named after its geometry, which keys the model cache)."""
    w = np.random.default_rng(kernel * 100 + multiplier).normal(0, 0.5, (kernel, kernel, 5, multiplier)).astype(np.float32)

    def fn(x):
        return tf.nn.relu(tf.nn.depthwise_conv2d(x, w, [1, stride, stride, 1], padding, dilations=[dilation, dilation]) + 0.1)

    fn.__name__ = f"depthwise_{kernel}x{kernel}_s{stride}_d{dilation}_m{multiplier}_{padding}"
    return fn


DEPTHWISE_VARIANTS = [
    (3, 1, 1, 1, "SAME"),  # one phase plane: one einsum sums the nine taps
    (3, 2, 1, 1, "SAME"),  # two phase planes: an einsum each
    (3, 1, 2, 1, "VALID"),
    (5, 2, 1, 2, "VALID"),  # channels repeated for the multiplier
    (3, 3, 1, 1, "SAME"),  # three planes, one of them with a single column of taps
    (1, 1, 1, 2, "SAME"),  # one tap: a multiply, no einsum
]


@pytest.mark.parametrize("wide", [False, True], ids=["int8", "16x8"])
@pytest.mark.parametrize("geometry", DEPTHWISE_VARIANTS, ids=lambda g: "k{}_s{}_d{}_m{}_{}".format(*g))
def test_depthwise_taps_summed_per_plane(geometry, wide):
    """The integer depthwise layer sums each phase plane's taps with one einsum (exact: every
    partial sum is an integer within the accumulation dtype's exact range): bit for bit as
    LiteRT's reference kernels, over batches and at every stride, dilation and multiplier."""
    fn = _depthwise_variant(*geometry)
    model = full_integer(fn, [_spec(2, 11, 11, 5)], wide=wide)
    check_integer(model, "DEPTHWISE_CONV_2D", np.int16 if wide else np.int8, seeds=(0, 1, 2))
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], integer_inputs(model)[0])
    interpreter.invoke()
    (step,) = [s for s in interpreter.subgraph(0).plan if s.op_name == "DEPTHWISE_CONV_2D"]
    planes = step.kernel.impl.tap_planes
    assert (planes is not None) == (geometry[0] > 1)
    if planes is not None:
        assert len(planes) == min(geometry[1], geometry[0])  # one einsum per phase plane with taps


# ------------------------------------------------------------------------------ 16x8


@pytest.mark.parametrize(
    "fn, specs, op",
    [
        (_conv, [_spec(2, 8, 8, 4)], "CONV_2D"),
        (_depthwise, [_spec(2, 7, 7, 4)], "DEPTHWISE_CONV_2D"),
        (_fc, [_spec(3, 10)], "FULLY_CONNECTED"),
        (_tconv, [_spec(2, 8, 8, 4)], "TRANSPOSE_CONV"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_16x8(fn, specs, op):
    model = full_integer(fn, specs, wide=True)
    tensors = op_tensors(model, op)
    assert any(t[0] == np.int8 for t in tensors[:-1])  # int8 weights
    if op != "TRANSPOSE_CONV":
        assert tensors[2][0] == np.int64  # int64 bias
    check_integer(model, op, np.int16)


# ------------------------------------------------------------------------------ FULLY_CONNECTED rescaling

# 2048 rows of 32 outputs: LiteRT's FULLY_CONNECTED rounds ``acc * multiplier`` once, where the
# other kernels round twice (gemmlowp's doubling high multiply, then a rounding shift); the two
# differ on a few dozen of these 65536 outputs, and so does a multiplier computed from the
# float32 product of the scales (per tensor, 16x8) instead of the double one.
FC_BIG_W = RNG.normal(0, 0.3, (64, 32)).astype(np.float32)
FC_BIG_B = RNG.normal(0, 0.5, 32).astype(np.float32)
# Accumulators past 2**32 whose rescaled values are still in the int16 range (the calibration
# sees inputs at +-2, so the output scale covers sums of 4096 maximal products).
FC_DEEP_W = np.where(np.arange(4) % 2 == 0, 0.5, -0.5).astype(np.float32) * np.ones((4096, 1), np.float32)


def _fc_big(x):
    return tf.matmul(x, FC_BIG_W) + FC_BIG_B


def _fc_deep(x):
    return tf.matmul(x, FC_DEEP_W)


@pytest.mark.parametrize("wide", [False, True], ids=["int8", "16x8"])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
def test_fully_connected_rounds_once(wide, per_channel):
    model = full_integer(_fc_big, [_spec(2048, 64)], wide=wide, per_channel=per_channel)
    assert (len(op_tensors(model, "FULLY_CONNECTED")[1][1].scale) > 1) == per_channel
    check_integer(model, "FULLY_CONNECTED", np.int16 if wide else np.int8, seeds=(0,))


def test_16x8_fully_connected_int64_accumulator():
    """Sums beyond int32 (and products with the multiplier beyond int64) rescale exactly."""

    def extremes():
        for value in (2.0, -2.0):
            yield [np.full((4, 4096), value, np.float32)]

    ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    model = convert(_fc_deep, [_spec(4, 4096)], key="fc_deep_16x8", optimizations=[tf.lite.Optimize.DEFAULT],
                    representative_dataset=extremes, target_spec=tf.lite.TargetSpec(supported_ops=ops),
                    inference_input_type=tf.int16, inference_output_type=tf.int16)
    x = np.zeros((4, 4096), np.int16)
    x[0], x[1], x[2, :3000], x[3, :1500] = 32767, -32768, 32767, 32767  # |acc| up to 1.7e10
    (actual,) = run_numlite(model, [x])
    (reference,) = litert(model, [x], True)
    np.testing.assert_array_equal(actual, reference)
    assert np.abs(reference[2:]).max() < 32767  # in range, so a wrapped accumulator would show


# ------------------------------------------------------------------------------ dynamic range


def _h_conv(x):
    return tf.nn.relu(tf.nn.conv2d(x, H_CONV_W, 1, "SAME") + H_CONV_B)


def _h_depthwise(x):
    return tf.nn.depthwise_conv2d(x, H_DW_W, [1, 1, 1, 1], "SAME")


def _h_fc(x):
    return tf.nn.relu(tf.matmul(x, H_FC_W) + H_FC_B)


def _h_bmm(x):
    return tf.matmul(x, H_MM_W)


@pytest.mark.parametrize(
    "fn, specs, op",
    [
        (_h_conv, [_spec(2, 6, 6, 16)], "CONV_2D"),
        (_h_depthwise, [_spec(2, 6, 6, 64)], "DEPTHWISE_CONV_2D"),
        (_h_fc, [_spec(3, 64)], "FULLY_CONNECTED"),
        (_h_bmm, [_spec(2, 5, 48)], "BATCH_MATMUL"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_dynamic_range(fn, specs, op):
    model = dynamic_range(fn, specs)
    tensors = op_tensors(model, op)
    assert tensors[0][0] == np.float32 and tensors[1][0] == np.int8, tensors  # a hybrid op
    check_integer(model, op, np.float32)


def test_dynamic_range_symmetric_fully_connected():
    """asymmetric_quantize_inputs off (the converter sets it on): symmetric per-row quantization."""
    model = dynamic_range(_h_fc, [_spec(3, 64)])
    m = numlite.model.read_model(model)
    for node in m.subgraphs[0].operators:
        if m.op_name(node) == "FULLY_CONNECTED":
            assert node.builtin_options.asymmetric_quantize_inputs
            node.builtin_options.asymmetric_quantize_inputs = False
    model = numlite.model.write_model(m)
    # LiteRT's default (XNNPACK) kernel quantizes the rows its own way: each input then differs
    # by at most one symmetric step (max|row| / 127) from the reference's quantized value, so
    # an output by at most that step times the sum of its weights' magnitudes (1% for the
    # weights' own quantization).
    peak = max(np.abs(x).max() for x in integer_inputs(model, 0) + integer_inputs(model, 1))
    bound = peak / 127 * np.abs(H_FC_W).sum(axis=0).max() * 1.01
    check_integer(model, "FULLY_CONNECTED", np.float32, float_bound=bound)


def test_float16_weights():
    model = convert(
        _conv, [_spec(2, 8, 8, 4)], key=("conv", "float16"),
        optimizations=[tf.lite.Optimize.DEFAULT], target_spec=tf.lite.TargetSpec(supported_types=[tf.float16]),
    )
    m = numlite.model.read_model(model)
    assert "DEQUANTIZE" in [m.op_name(n) for n in m.subgraphs[0].operators]
    check_integer(model, "CONV_2D", np.float32)


def test_int8_input_without_scale_is_refused():
    model = bytearray(full_integer(_fc, [_spec(3, 10)]))
    m = numlite.model.read_model(bytes(model))
    sg = m.subgraphs[0]
    node = next(n for n in sg.operators if m.op_name(n) == "FULLY_CONNECTED")
    sg.tensors[node.outputs[0]].quantization = None
    with pytest.raises(numlite.errors.NumliteError, match="FULLY_CONNECTED"):
        run_numlite(numlite.model.write_model(m), integer_inputs(bytes(model)))


# ------------------------------------------------------------------------------ rounding of halves


def _halves_forms() -> tuple[bytes, list[np.ndarray], list[str]]:
    """Forms beyond test_jit_quantized's whose sums rescale to exact halves often (rescales of
    exactly 2**-k: per-tensor weights of scale 0.01, output scale a power of two times the
    scale product): a grouped int8 CONV_2D, uint8 CONV_2D and DEPTHWISE_CONV_2D (12 channels:
    one whole 8-channel block and a remainder) and a 20-channel int8 DEPTHWISE_CONV_2D."""
    from one_op_model import Graph, k, model, out, x

    rng = np.random.default_rng(3)
    g, names, xs = Graph(), [], 0.05
    options = {"padding": 0, "stride_h": 1, "stride_w": 1, "fused_activation_function": 0, "dilation_h_factor": 1, "dilation_w_factor": 1}

    def ints(dtype, shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)

    def node(name, op, src, weights, w_zp, out_dtype, power, out_zp):
        channels = weights[0] if op == "CONV_2D" else weights[3]
        f = g.add(k(ints(out_dtype, weights), (0.01, w_zp)))
        b = g.add(k(rng.integers(-3000, 3000, channels).astype(np.int32), (xs * 0.01, 0)))
        o = g.add(out(out_dtype, (xs * 0.01 * 2**power, out_zp), (1, 12, 12, channels)), name)
        g.op(op, [src, f, b], [o], options if op == "CONV_2D" else {**options, "depth_multiplier": 1})
        g.output(o)
        names.append(name)

    t = g.add(x(ints(np.int8, (1, 12, 12, 16)), (xs, -7)), "t")
    tu = g.add(x(ints(np.uint8, (1, 12, 12, 12)), (xs, 131)), "tu")
    t20 = g.add(x(ints(np.int8, (1, 12, 12, 20)), (xs, -7)), "t20")
    node("grouped", "CONV_2D", t, (16, 3, 3, 8), 0, np.int8, 7, -5)  # two groups of 8 channels
    node("conv_uint8", "CONV_2D", tu, (8, 3, 3, 12), 120, np.uint8, 7, 128)
    node("depthwise_uint8", "DEPTHWISE_CONV_2D", tu, (1, 3, 3, 12), 120, np.uint8, 5, 128)
    node("depthwise_20", "DEPTHWISE_CONV_2D", t20, (1, 3, 3, 20), 0, np.int8, 5, -5)
    data, feeds = model(g)
    return data, feeds, names


@pytest.fixture(scope="module")
def halves_models():
    """test_jit_quantized's int8 (and uint8) convolution forms, with its exact-halves ones, and
    the forms above."""
    from test_jit_quantized import conv_forms

    data, feeds, names = conv_forms()
    convs = [n for n in names if "pool" not in n and "split" not in n]
    return [(data, feeds, convs), _halves_forms()]


@pytest.mark.parametrize("seed", [0, 1])
def test_8bit_convolutions_round_halves_as_litert_builtin_kernels(halves_models, seed):
    """CONV_2D and DEPTHWISE_CONV_2D bit-exact with LiteRT's builtin kernels (without the XNNPACK
    delegate), which round exact halves at the rescale's right shift up in ungrouped CONV_2D and
    in int8 DEPTHWISE_CONV_2D's whole 8-channel blocks, away from zero elsewhere; the forms have
    such halves (checked: LiteRT's reference kernels, rounding them all away from zero, differ)."""
    from helpers import litert_interpreter
    from test_jit_quantized import run

    differing = 0
    for data, feeds, names in halves_models:
        rng = np.random.default_rng(seed)
        fresh = [rng.integers(np.iinfo(f.dtype).min, np.iinfo(f.dtype).max + 1, f.shape).astype(f.dtype) for f in feeds]
        builtin = run(litert_interpreter(data, builtin_only=True), fresh)
        reference = run(LiteRTInterpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF), fresh)
        ours = run(numlite.Interpreter(model_content=data), fresh)
        for name in names:
            assert ours[name].dtype == builtin[name].dtype, name
            np.testing.assert_array_equal(ours[name], builtin[name], err_msg=name)
            differing += int(np.count_nonzero(builtin[name] != reference[name]))
    assert differing > 0  # the forms do tell the two roundings apart
