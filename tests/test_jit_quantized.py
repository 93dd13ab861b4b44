"""numlite.jit on quantized models and resource variables: every quantized emitter bit-exact
against LiteRT (one model of one node per form, written with numlite's writer, compiled once),
a streaming int8 model whose ring buffer is a tf.Variable (benchmarks/jit_quantized.py, made by
the official converter with full integer quantization) carried over several invokes, then reset, and the errors of
variables that the compiled code cannot take (the NumPy engine's, word for word).

Numba compiles slowly, so the models are few and shared (module fixtures), in a cache folder
of this module's own."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest
from helpers import litert_interpreter

import numlite
from numlite.errors import InvokeError

pytest.importorskip("numba")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from jit_quantized import streaming_model  # noqa: E402
from one_op_model import Graph, k, model, out, v, x  # noqa: E402
from test_jit import jit_cache  # noqa: E402, F401  (the fixture)

I8, U8, I16, I32, I64, F32 = np.int8, np.uint8, np.int16, np.int32, np.int64, np.float32
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module", autouse=True)
def own_cache(jit_cache):
    """This module's models compile into a cache folder of its own (test_jit's fixture)."""
    return jit_cache


def ints(dtype: Any, shape: tuple[int, ...], rng: np.random.Generator = RNG) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def forms() -> tuple[bytes, list[np.ndarray], list[str]]:
    """One node per emitter form, each output a graph output: (model, feeds, output names)."""
    g = Graph()
    A = (0.05, -3)
    a = g.add(x(ints(I8, (2, 3, 8)), A), "a")
    b = g.add(x(ints(I8, (8,)), (0.03, 5)), "b")  # broadcast against a
    c = g.add(x(ints(I8, (2, 3, 8)), A), "c")  # a's parameters (MAXIMUM, MINIMUM, CONCATENATION)
    f = g.add(x((RNG.standard_normal((2, 3, 8)) * 2).astype(F32)), "f")
    u = g.add(x(ints(U8, (2, 3, 8)), (0.04, 128)), "u")
    s = g.add(x(ints(I16, (2, 12)), (1 / 256, 0)), "s")
    long = g.add(x(ints(I16, (1, 600)), (1 / 64, 0)), "long")
    e = g.add(x(ints(I8, (2, 3, 8)), (0.11, 20)), "e")  # of a's shape
    p37, q37 = g.add(x(ints(I8, (1, 37)), (0.02, -9)), "p37"), g.add(x(ints(I8, (1, 37)), (0.3, 100)), "q37")  # 16 + 16 + 5
    u2 = g.add(x(ints(U8, (2, 3, 8)), (0.015, 3)), "u2")
    names = []

    def node(name: str, op: str, inputs: list[int], spec: Any, options: dict | None = None) -> None:
        o = g.add(spec, name)
        g.op(op, inputs, [o], options)
        g.output(o)
        names.append(name)

    relu = {"fused_activation_function": 1}
    node("add_relu", "ADD", [a, b], out(I8, (0.07, 1)), relu)
    node("sub", "SUB", [a, b], out(I8, (0.06, -2)), {"fused_activation_function": 0})
    node("mul", "MUL", [a, b], out(I8, (0.01, 0)), {"fused_activation_function": 0})
    node("add_same_shape_relu6", "ADD", [a, e], out(I8, (0.09, -5)), {"fused_activation_function": 3})
    node("sub_same_shape", "SUB", [e, a], out(I8, (0.08, 3)), {"fused_activation_function": 0})
    node("add_37", "ADD", [p37, q37], out(I8, (0.31, -1)), {"fused_activation_function": 0})
    node("sub_37_relu", "SUB", [q37, p37], out(I8, (0.004, -120)), relu)  # a small scale: most outputs clamped
    node("sub_uint8", "SUB", [u, u2], out(U8, (0.05, 128)), {"fused_activation_function": 0})
    node("add_uint8", "ADD", [u, u], out(U8, (0.09, 120)), {"fused_activation_function": 0})
    node("quantize_int8", "QUANTIZE", [f], out(I8, (0.02, 3)))
    node("quantize_int16", "QUANTIZE", [f], out(I16, (1 / 1000, 0)))
    node("quantize_halves", "QUANTIZE", [f], out(I8, (0.25, 3)))  # exact halves: to even, as LiteRT
    node("requantize_int8", "QUANTIZE", [a], out(I8, (0.1, 7)))
    node("requantize_uint8", "QUANTIZE", [a], out(U8, (0.05, 125)))  # the wake-word models' last node
    node("dequantize", "DEQUANTIZE", [a], out(F32))
    node("relu", "RELU", [a], out(I8, (0.03, -128)))
    node("relu6", "RELU6", [a], out(I8, (0.025, -128)))
    node("logistic", "LOGISTIC", [a], out(I8, (1 / 256, -128)))
    node("tanh", "TANH", [a], out(I8, (1 / 128, 0)))
    node("leaky_relu", "LEAKY_RELU", [a], out(I8, (0.04, -20)), {"alpha": 0.2})
    node("relu_n1_to_1", "RELU_N1_TO_1", [a], out(I8, (1 / 100, 0)))
    node("hard_swish", "HARD_SWISH", [a], out(I8, (0.03, -30)))
    node("abs", "ABS", [a], out(I8, (0.04, -128)))
    node("maximum", "MAXIMUM", [a, c], out(I8, A))
    node("minimum", "MINIMUM", [a, c], out(I8, A))
    node("mean", "MEAN", [a, g.add(k(np.array([1, 2], I32)))], out(I8, (0.02, 6)), {"keep_dims": True})
    node("concatenation", "CONCATENATION", [a, c], out(I8, A), {"axis": -1, "fused_activation_function": 0})
    fc = {"fused_activation_function": 0, "weights_format": 0, "keep_num_dims": False}
    w_tensor = g.add(k(ints(I8, (5, 8)), (0.02, 0)))
    bias = g.add(k(RNG.integers(-2000, 2000, 5).astype(I32), (0.05 * 0.02, 0)))
    node("fc_per_tensor", "FULLY_CONNECTED", [a, w_tensor, bias], out(I8, (0.3, -4)), fc)
    scales = RNG.uniform(0.005, 0.03, 5).astype(F32)
    w_channel = g.add(k(ints(I8, (5, 8)), (scales, np.zeros(5, I64), 0)))
    bias_channel = g.add(k(RNG.integers(-2000, 2000, 5).astype(I32), (0.05 * scales, np.zeros(5, I64), 0)))
    node("fc_per_channel_relu6", "FULLY_CONNECTED", [a, w_channel, bias_channel], out(I8, (0.05, -128)),
         {**fc, "fused_activation_function": 3})
    w70 = g.add(k(ints(I8, (3, 70)), (0.01, 0)))  # a depth padded to 128 in the compiled rows
    flat = g.add(out(I8, A, (1, 48)), "flat")
    g.op("RESHAPE", [a, g.add(k(np.array([1, 48], I32)))], [flat], {"new_shape": [1, 48]})
    w48 = g.add(k(ints(I8, (70, 48)), (0.01, 0)))
    node("fc_no_bias", "FULLY_CONNECTED", [flat, w48, -1], out(I8, (0.4, 2)), fc)
    node("fc_depth_70", "FULLY_CONNECTED", [g.sg.outputs[-1], w70, -1], out(I8, (0.05, 0)), fc)
    s_scales = RNG.uniform(0.002, 0.01, 4).astype(F32)
    w16 = g.add(k(ints(I8, (4, 12)), (s_scales, np.zeros(4, I64), 0)))
    b16 = g.add(k(RNG.integers(-5000, 5000, 4).astype(I64), (s_scales / 256, np.zeros(4, I64), 0)))
    node("fc_16x8", "FULLY_CONNECTED", [s, w16, b16], out(I16, (1 / 512, 0)), fc)
    w_long = g.add(k(np.where(RNG.random((3, 600)) < 0.5, -127, 127).astype(I8), (0.003, 0)))  # sums beyond int32: int64 path
    node("fc_16x8_int64", "FULLY_CONNECTED", [long, w_long, -1], out(I16, (4.0, 0)), fc)
    state = g.add(v(np.zeros(8, F32)), "state")  # a variable tensor (LiteRT takes none with data), read in place
    node("plus_variable", "ADD", [f, state], out(F32), {"fused_activation_function": 0})
    data, feeds = model(g)
    return data, feeds, names


@pytest.fixture(scope="module")
def forms_model():
    data, feeds, names = forms()
    it = numlite.Interpreter(model_content=data, jit=True)
    it.allocate_tensors()
    return data, feeds, names, it


def run(interpreter: Any, feeds: list[np.ndarray], allocate: bool = True) -> dict[str, np.ndarray]:
    if allocate:  # (not for a model compiled with a patched parameter: it would be generated again)
        interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def test_every_quantized_form_compiles(forms_model):
    _, _, names, it = forms_model
    report = it.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    assert report["operators"] == len(names) + 1  # and the RESHAPE


def test_int8_fully_connected_runs_on_bytes_where_the_machine_can(forms_model):
    """With AVX512-VNNI, the int8 FULLY_CONNECTED's dot products are vpdpbusd's
    (quantized.byte_dot_rows); the 16x8 ones keep the int32/int64 loops (both bit-exact: the
    test below)."""
    from numlite.jit.kernels.simd import VNNI

    *_, it = forms_model
    with open(it.jit_report()["subgraphs"][0]["module"]) as f:
        source = f.read()
    assert ("numlite.jit.kernels.quantized.byte_dot_rows" in source) == VNNI
    assert "numlite.jit.kernels.quantized.dot_rows_int64" in source


@pytest.mark.parametrize("seed", [0, 1])
def test_every_quantized_form_is_bit_exact_with_litert(forms_model, seed):
    data, feeds, names, it = forms_model
    rng = np.random.default_rng(seed)
    fresh = []
    for value in feeds:  # other values of the same dtypes (seed 0: the model's own, with the edges)
        if value.dtype == F32:
            fresh.append((rng.standard_normal(value.shape) * 3).astype(F32))
        else:
            info = np.iinfo(value.dtype)
            fresh.append(rng.integers(info.min, info.max + 1, value.shape).astype(value.dtype))
    if seed == 0:
        fresh = [value.copy() for value in feeds]
        fresh[0].reshape(-1)[:2] = (-128, 127)  # the int8 extremes through every form of a
        # QUANTIZE saturates these, and rounds halves away from zero (NaN and values beyond
        # int32 are left out: LiteRT's two paths disagree on them, 127 or -128)
        fresh[3].reshape(-1)[:10] = (1000.0, -1000.0, 2.55, -2.57, 0.01, -0.03, 0.125, -0.125, 0.625, -0.375)
    ours = run(it, fresh)
    # LiteRT's own integer kernels (its default XNNPACK delegate rounds int8 SUB, MUL and
    # LEAKY_RELU otherwise); DEQUANTIZE as the default path computes it (float32 products, as
    # numlite: the builtin kernel multiplies by a double scale)
    reference = run(litert_interpreter(data, builtin_only=True), fresh)
    reference["dequantize"] = run(litert_interpreter(data), fresh)["dequantize"]
    numpy_engine = run(numlite.Interpreter(model_content=data, jit=False), fresh)
    for name in names:
        assert ours[name].dtype == reference[name].dtype, name
        np.testing.assert_array_equal(ours[name], reference[name], err_msg=name)
        np.testing.assert_array_equal(ours[name], numpy_engine[name], err_msg=name)


def test_quantized_forms_not_covered_say_why():
    g = Graph()
    a = g.add(x(ints(I8, (4, 4)), (0.05, 0)))
    o = g.add(out(I8, (0.05, 0)))
    g.op("ADD", [a, a], [o], {"fused_activation_function": 0})
    p = g.add(out(F32))
    g.op("DEQUANTIZE", [g.add(x(ints(I8, (2, 4)), (np.array([0.1, 0.2], F32), np.zeros(2, I64), 0)))], [p])
    g.output(o, p)
    it = numlite.Interpreter(model_content=model(g)[0], jit=True)
    it.allocate_tensors()
    reason = it.jit_report()["subgraphs"][0]["reason"]
    assert reason == ("runs on NumPy: subgraph 0, node 1 (DEQUANTIZE): per-channel DEQUANTIZE is not compiled; 1 of the 2 operators"
                      " are not compiled, too many to run as islands (at most 1 in 4)"), reason


def test_fixed_point_rescaling_matches_the_numpy_reference():
    from numba import njit

    from numlite.jit.kernels.quantized import multiply_by_quantized_multiplier
    from numlite.kernels import fixed_point

    @njit
    def each(x, m, s, out):
        for i in range(x.size):
            out[i] = multiply_by_quantized_multiplier(x[i], m[i], s[i])

    rng = np.random.default_rng(5)
    n = 20000
    x = rng.integers(-(2**31), 2**31, n).astype(I64)
    x[:4] = (-(2**31), 2**31 - 1, 0, -1)
    m, s = fixed_point.quantize_multiplier(rng.uniform(1e-6, 300.0, n) * rng.choice([1e-4, 1.0], n))
    got = np.empty(n, I64)
    each(x, m.astype(I64), s.astype(I64), got)
    expected = np.array([fixed_point.multiply_by_quantized_multiplier(np.int32(a), int(b), int(c)) for a, b, c in zip(x[:2000], m, s)])
    np.testing.assert_array_equal(got[:2000], expected)
    np.testing.assert_array_equal(got, fixed_point.multiply_by_quantized_multiplier(x.astype(I32), m, s))  # per-element arrays


# -- resource variables --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stream():
    data = streaming_model()
    it = numlite.Interpreter(model_content=data, jit=True)
    it.allocate_tensors()
    return data, it


def test_streaming_model_compiles_with_its_variable_ops(stream):
    from numlite.model import read_model

    data, it = stream
    m = read_model(data)
    ops = {m.op_name(op) for op in m.subgraphs[0].operators}
    assert {"CALL_ONCE", "READ_VARIABLE", "ASSIGN_VARIABLE", "FULLY_CONNECTED", "QUANTIZE", "DEQUANTIZE", "LOGISTIC"} <= ops
    report = it.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    assert report["state_bytes"] == 6 * 20 * 4


def test_streaming_state_carries_and_resets_bit_exact(stream):
    data, it = stream
    rng = np.random.default_rng(3)
    frames = [rng.integers(-128, 128, (1, 2, 20)).astype(I8) for _ in range(5)]
    detail = it.get_input_details()[0]
    output = it.get_output_details()[0]["index"]

    def outputs(interpreter: Any) -> list[np.ndarray]:
        result = []
        for value in frames:
            interpreter.set_tensor(detail["index"], value)
            interpreter.invoke()
            result.append(interpreter.get_tensor(output))
        return result

    litert = litert_interpreter(data)
    litert.allocate_tensors()
    expected = outputs(litert)
    first = outputs(it)
    assert len({r.tobytes() for r in expected}) > 1  # the state changes the answer to equal frames
    for ours, theirs in zip(first, expected):
        np.testing.assert_array_equal(ours, theirs)
    compiled = it._jit.engines[0]
    assert it.variables.values[0] is compiled.state.arrays[0][1]  # the store holds the compiled state
    # LiteRT keeps resource variables on reset (tests/test_variables.py); numlite restores the
    # fresh state, so a fresh LiteRT interpreter is the reference after it
    it.reset_all_variables()
    for ours, theirs in zip(outputs(it), expected):
        np.testing.assert_array_equal(ours, theirs)
    assert it.jit_report()["subgraphs"][0]["compiled"]


def test_numpy_invokes_and_compiled_ones_share_the_state(stream):
    data, it = stream
    it.reset_all_variables()
    detail = it.get_input_details()[0]
    value = np.full((1, 2, 20), 50, I8)
    it.set_tensor(detail["index"], value)
    it.invoke()  # compiled
    numpy_engine = numlite.Interpreter(model_content=data, jit=False)
    numpy_engine.allocate_tensors()
    numpy_engine.set_tensor(detail["index"], value)
    numpy_engine.invoke()
    np.testing.assert_array_equal(it.variables.values[0], numpy_engine.variables.values[0])
    # a NumPy invoke (a watched one) writes the same arrays, and the next compiled one reads them
    it.check_cancelled = lambda: False
    it.invoke()
    it.check_cancelled = None
    it.invoke()
    numpy_engine.invoke()
    numpy_engine.invoke()
    np.testing.assert_array_equal(it.variables.values[0], numpy_engine.variables.values[0])
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]),
                                  numpy_engine.get_tensor(numpy_engine.get_output_details()[0]["index"]))


def mismatched_variable_model(initial_shape: tuple[int, ...]) -> bytes:
    """Main: READ_VARIABLE ([2] float32) + x, assigned back; its CALL_ONCE initialiser assigns
    a constant of ``initial_shape``."""
    main, init = Graph(), Graph()
    xs = main.add(x(np.ones(2, F32)), "x")
    handle = main.add(out(I32, shape=()), "handle")
    main.op("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    main.op("VAR_HANDLE", [], [handle], {"container": "", "shared_name": "acc"})
    value = main.add(out(F32, shape=(2,)), "value")
    main.op("READ_VARIABLE", [handle], [value])
    total = main.add(out(F32, shape=(2,)), "total")
    main.op("ADD", [value, xs], [total], {"fused_activation_function": 0})
    main.op("ASSIGN_VARIABLE", [handle, total], [])
    main.output(total)
    h = init.add(out(I32, shape=()), "handle")
    init.op("VAR_HANDLE", [], [h], {"container": "", "shared_name": "acc"})
    init.op("ASSIGN_VARIABLE", [h, init.add(k(np.arange(int(np.prod(initial_shape)), dtype=F32).reshape(initial_shape)))], [])
    return model(main, init)[0]


def test_variable_of_another_shape_gives_the_numpy_error():
    good = mismatched_variable_model((2,))
    it = numlite.Interpreter(model_content=good, jit=True)
    it.allocate_tensors()
    assert it.jit_report()["subgraphs"][0]["compiled"], it.jit_report()
    it.set_tensor(it.get_input_details()[0]["index"], np.array([1.0, 2.0], F32))
    for expected in ([1.0, 3.0], [2.0, 5.0]):
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), np.array(expected, F32))
    bad = mismatched_variable_model((3,))
    messages = []
    for jit in (False, True):
        it = numlite.Interpreter(model_content=bad, jit=jit)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.ones(2, F32))
        with pytest.raises(InvokeError) as e:
            it.invoke()
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert "variable has shape (3,), the model declares (2,)" in messages[0]


# -- int8 convolutions and pools ------------------------------------------------------------------

SAME, VALID = 0, 1


def _size(n: int, kernel: int, stride: int, dilation: int, padding: int) -> int:
    span = (kernel - 1) * dilation + 1
    return -(-n // stride) if padding == SAME else (n - span) // stride + 1


def conv_forms() -> tuple[bytes, list[np.ndarray], list[str]]:
    """One int8 (and uint8) CONV_2D, DEPTHWISE_CONV_2D or pool per form, each output a graph
    output: per-channel and per-tensor weights, SAME and VALID, strides, dilations, groups,
    depth multipliers, every fused activation, non-zero zero points, channel counts that do not
    fill the kernels' 16- and 8-channel blocks, pixel counts that do not fill the 4-pixel tile."""
    rng = np.random.default_rng(17)  # its own: the same model whichever tests ran before
    g = Graph()
    n, h, w, c = 2, 9, 7, 6
    X = (0.05, -7)
    a = g.add(x(ints(I8, (n, h, w, c), rng), X), "a")
    wide = g.add(x(ints(I8, (1, 5, 6, 19), rng), (0.03, 11)), "wide")
    u = g.add(x(ints(U8, (1, 6, 5, 3), rng), (0.04, 131)), "u")
    names = []

    def node(name: str, op: str, inputs: list[int], spec: Any, options: dict) -> None:
        o = g.add(spec, name)
        g.op(op, inputs, [o], options)
        g.output(o)
        names.append(name)

    def weights(shape: tuple[int, ...], axis: int, per_channel: bool, x_scale: float) -> tuple[int, int]:
        channels = shape[axis]
        scales = rng.uniform(0.002, 0.02, channels).astype(F32) if per_channel else np.full(channels, 0.01, F32)
        q = (scales, np.zeros(channels, I64), axis) if per_channel else (0.01, 0)
        f = g.add(k(ints(I8, shape, rng), q))
        bias_q = (x_scale * scales, np.zeros(channels, I64), 0) if per_channel else (x_scale * 0.01, 0)
        return f, g.add(k(rng.integers(-3000, 3000, channels).astype(I32), bias_q))

    # CONV_2D: (out channels, kh, kw, padding, strides, dilations, activation, groups, per channel)
    convs = [
        (16, 3, 3, SAME, (1, 1), (1, 1), 1, 1, True),  # one full block, RELU
        (5, 3, 3, SAME, (1, 1), (1, 1), 0, 1, False),  # 5 of 16 channels, per tensor
        (17, 1, 1, VALID, (1, 1), (1, 1), 3, 1, True),  # 1x1, 16 + 1 channels, RELU6
        (33, 2, 3, VALID, (2, 1), (1, 2), 2, 1, True),  # strides and dilations, RELU_N1_TO_1
        (7, 3, 2, SAME, (2, 3), (2, 1), 0, 1, False),  # SAME, odd padding at the bottom/right
        (4, 3, 3, SAME, (1, 1), (1, 1), 1, 2, True),  # two groups of 3 input channels
    ]
    for i, (oc, kh, kw, padding, (sh, sw), (dh, dw), act, groups, per_channel) in enumerate(convs):
        f, b = weights((oc, kh, kw, c // groups), 0, per_channel, X[0])
        shape = (n, _size(h, kh, sh, dh, padding), _size(w, kw, sw, dw, padding), oc)
        node(f"conv{i}", "CONV_2D", [a, f, b], out(I8, (0.2 + 0.05 * i, 3 - 2 * i), shape),
             {"padding": padding, "stride_h": sh, "stride_w": sw, "fused_activation_function": act,
              "dilation_h_factor": dh, "dilation_w_factor": dw})
    f, b = weights((24, 1, 1, 19), 0, True, 0.03)  # (LiteRT's int8 CONV_2D requires a bias)
    node("conv_wide", "CONV_2D", [wide, f, b], out(I8, (0.3, -128), (1, 5, 6, 24)),
         {"padding": VALID, "stride_h": 1, "stride_w": 1, "fused_activation_function": 0, "dilation_h_factor": 1, "dilation_w_factor": 1})
    # rescales of 0.5-1 (a shift of 0: no rounding shift) and above 1 (a left shift first)
    for i, out_scale in enumerate((7e-4, 2.5e-4)):
        small = g.add(k(rng.integers(-3, 4, (4, 1, 1, c)).astype(I8), (0.01, 0)))
        node(f"rescale{i}", "CONV_2D", [a, small, g.add(k(rng.integers(-300, 300, 4).astype(I32), (X[0] * 0.01, 0)))],
             out(I8, (out_scale, 4), (n, h, w, 4)),
             {"padding": VALID, "stride_h": 1, "stride_w": 1, "fused_activation_function": 0, "dilation_h_factor": 1, "dilation_w_factor": 1})
    # the legacy uint8 form: uint8 weights with a zero point of their own, per tensor
    fu = g.add(k(ints(U8, (4, 3, 3, 3), rng), (0.02, 120)))
    bu = g.add(k(rng.integers(-500, 500, 4).astype(I32), (0.04 * 0.02, 0)))
    node("conv_uint8", "CONV_2D", [u, fu, bu], out(U8, (0.15, 125), (1, 6, 5, 4)),
         {"padding": SAME, "stride_h": 1, "stride_w": 1, "fused_activation_function": 1, "dilation_h_factor": 1, "dilation_w_factor": 1})
    # DEPTHWISE_CONV_2D: (input, channels, multiplier, k, padding, stride, dilation, activation, per channel)
    depthwise = [
        (a, c, 1, 3, SAME, 1, 1, 3, True),  # one masked 8-channel block, RELU6
        (a, c, 2, 3, VALID, 2, 1, 0, False),  # a depth multiplier, per tensor
        (a, c, 1, 3, SAME, 1, 2, 1, True),  # dilated
        (a, c, 1, 5, SAME, 2, 1, 2, True),
        (wide, 19, 1, 3, SAME, 2, 1, 3, True),  # full 8-lane blocks and a masked one
        (wide, 19, 1, 3, SAME, 1, 1, 0, False),  # stride 1: the 4-pixel tiles of the interior
    ]
    # int8 channels in whole 8-channel blocks (the byte kind of quantized_conv, on machines with
    # AVX-512): 16-lane blocks in pairs and alone, 3- and 5-wide rows, strides, dilations
    d40 = g.add(x(ints(I8, (n, h, w, 40), rng), (0.04, 9)), "d40")
    d8 = g.add(x(ints(I8, (1, 6, 9, 8), rng), (0.04, -100)), "d8")
    depthwise += [
        (d40, 40, 1, 3, SAME, 1, 1, 3, True),
        (d40, 40, 1, 5, SAME, 1, 1, 0, True),
        (d40, 40, 1, 3, VALID, 2, 1, 1, False),
        (d40, 40, 1, 3, SAME, 1, 2, 2, True),
        (d8, 8, 1, 3, SAME, 2, 1, 0, True),
    ]
    for i, (src, ch, mult, kk, padding, s, d, act, per_channel) in enumerate(depthwise):
        ih, iw, batch = (h, w, n) if src in (a, d40) else (6, 9, 1) if src == d8 else (5, 6, 1)
        f, b = weights((1, kk, kk, ch * mult), 3, per_channel, X[0] if src == a else 0.04 if src in (d40, d8) else 0.03)
        shape = (batch, _size(ih, kk, s, d, padding), _size(iw, kk, s, d, padding), ch * mult)
        node(f"depthwise{i}", "DEPTHWISE_CONV_2D", [src, f, b], out(I8, (0.1 + 0.02 * i, -3 + i), shape),
             {"padding": padding, "stride_h": s, "stride_w": s, "depth_multiplier": mult, "fused_activation_function": act,
              "dilation_h_factor": d, "dilation_w_factor": d})
    # small rescales, no activation: many negative sums rescale to exactly half (LiteRT rounds
    # them up, numlite's NumPy kernels away from zero: these outputs tell the two apart)
    t = g.add(x(ints(I8, (1, 12, 12, 16), rng), X), "t")
    for i, (op, shape, per_channel) in enumerate([("CONV_2D", (16, 1, 1, 16), True), ("CONV_2D", (16, 3, 3, 16), False),
                                                  ("DEPTHWISE_CONV_2D", (1, 3, 3, 16), True)]):
        f, b = weights(shape, 0 if op == "CONV_2D" else 3, per_channel, X[0])
        options = {"padding": SAME, "stride_h": 1, "stride_w": 1, "fused_activation_function": 0, "dilation_h_factor": 1,
                   "dilation_w_factor": 1, **({"depth_multiplier": 1} if op != "CONV_2D" else {})}
        node(f"halves{i}", op, [t, f, b], out(I8, (X[0] * 0.01 * 2**5 * (1 if i == 2 else 4), -5), (1, 12, 12, 16)), options)
    # LiteRT's DEPTHWISE_CONV_2D rounds the halves of its last 12 % 8 channels away from zero
    t12 = g.add(x(ints(I8, (1, 12, 12, 12), rng), X), "t12")
    f, b = weights((1, 3, 3, 12), 3, True, X[0])
    node("halves_depthwise_12", "DEPTHWISE_CONV_2D", [t12, f, b], out(I8, (X[0] * 0.01 * 2**5, -5), (1, 12, 12, 12)),
         {"padding": SAME, "stride_h": 1, "stride_w": 1, "fused_activation_function": 0, "dilation_h_factor": 1, "dilation_w_factor": 1,
          "depth_multiplier": 1})
    # one window: a single output pixel per example whose window is the whole input (the
    # convolutions of streaming wake-word models), batch 2; depthwise channels past the last
    # whole 8-channel block. The "halves" forms: weights of -1, 0 and 1 and a rescale of 1/8, so
    # that about one output in sixteen is a negative exact half, which LiteRT rounds up in its
    # vector channels and away from zero in the depthwise remainder (checked: either rounding
    # in the other's place fails the bit-exact test)
    ring = g.add(x(ints(I8, (2, 5, 1, 40), rng), (0.05, 3)), "ring")
    frame = g.add(x(ints(I8, (2, 1, 1, 60), rng), (0.02, -128)), "frame")
    ring60 = g.add(x(ints(I8, (2, 9, 1, 60), rng), (0.05, -9)), "ring60")
    ring12 = g.add(x(ints(I8, (32, 3, 2, 12), rng), X), "ring12")
    frames = g.add(x(ints(I8, (32, 1, 1, 24), rng), X), "frames")
    valid = {"padding": VALID, "stride_h": 1, "stride_w": 1, "dilation_h_factor": 1, "dilation_w_factor": 1}

    def unit_weights(shape: tuple[int, ...], channels: int) -> tuple[int, int]:
        f = g.add(k(rng.integers(-1, 2, shape).astype(I8), (0.01, 0)))
        return f, g.add(k(rng.integers(-300, 300, channels).astype(I32), (X[0] * 0.01, 0)))

    for name, src, (oc, kh, kw, ic), per_channel, x_scale, spec, options in [
        ("window_conv", ring, (30, 5, 1, 40), True, 0.05, out(I8, (0.3, -20), (2, 1, 1, 30)), {"fused_activation_function": 1, "stride_h": 3}),
        ("window_1x1", frame, (60, 1, 1, 60), True, 0.02, out(I8, (0.1, 5), (2, 1, 1, 60)), {"fused_activation_function": 3}),
        ("window_1x1_20", frame, (20, 1, 1, 60), False, 0.02, out(I8, (0.04, 0), (2, 1, 1, 20)), {"fused_activation_function": 0}),
    ]:  # fmt: skip
        f, b = weights((oc, kh, kw, ic), 0, per_channel, x_scale)
        node(name, "CONV_2D", [src, f, b], spec, {**valid, **options})
    f, b = unit_weights((20, 1, 1, 24), 20)
    node("window_conv_halves", "CONV_2D", [frames, f, b], out(I8, (X[0] * 0.01 * 8, -5), (32, 1, 1, 20)),
         {**valid, "fused_activation_function": 0})
    for name, src, (kh, kw, ch), per_channel, x_scale, spec, act in [
        ("window_depthwise", ring60, (9, 1, 60), True, 0.05, out(I8, (0.2, 7), (2, 1, 1, 60)), 0),
        ("window_depthwise_relu6", ring60, (9, 1, 60), False, 0.05, out(I8, (0.1, -128), (2, 1, 1, 60)), 3),
    ]:  # fmt: skip
        f, b = weights((1, kh, kw, ch), 3, per_channel, x_scale)
        node(name, "DEPTHWISE_CONV_2D", [src, f, b], spec, {**valid, "fused_activation_function": act, "depth_multiplier": 1})
    f, b = unit_weights((1, 3, 2, 12), 12)
    node("window_depthwise_halves", "DEPTHWISE_CONV_2D", [ring12, f, b], out(I8, (X[0] * 0.01 * 8, -5), (32, 1, 1, 12)),
         {**valid, "fused_activation_function": 0, "depth_multiplier": 1})
    for op in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        for i, (src, q, padding, kk, s, act) in enumerate([(a, X, VALID, 2, 2, 0), (a, X, SAME, 3, 2, 1), (wide, (0.03, 11), SAME, 2, 1, 3)]):
            ih, iw, batch, ch = (h, w, n, c) if src == a else (5, 6, 1, 19)
            shape = (batch, _size(ih, kk, s, 1, padding), _size(iw, kk, s, 1, padding), ch)
            node(f"{op.lower()}{i}", op, [src], out(I8, q, shape),
                 {"padding": padding, "stride_h": s, "stride_w": s, "filter_height": kk, "filter_width": kk, "fused_activation_function": act})
    node("average_pool_uint8", "AVERAGE_POOL_2D", [u], out(U8, (0.04, 131), (1, 3, 3, 3)),
         {"padding": SAME, "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 3, "fused_activation_function": 0})
    s16 = g.add(x(ints(I16, (1, 5, 6, 3), rng), (1 / 512, 0)), "s16")
    for op in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        node(f"{op.lower()}_int16", op, [s16], out(I16, (1 / 512, 0), (1, 3, 3, 3)),
             {"padding": SAME, "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 3, "fused_activation_function": 1})
    parts = [g.add(out(I8, X, (n, h, w, size)), f"split_v{i}") for i, size in enumerate((1, 3, 2))]
    g.op("SPLIT_V", [a, g.add(k(np.array([1, 3, 2], I32))), g.add(k(np.array(3, I32)))], parts, {"num_splits": 3})
    halves = [g.add(out(I8, X, (n, h, w, 3)), f"split{i}") for i in range(2)]
    g.op("SPLIT", [g.add(k(np.array(3, I32))), a], halves, {"num_splits": 2})
    g.output(*parts, *halves)
    names += [f"split_v{i}" for i in range(3)] + ["split0", "split1"]
    data, feeds = model(g)
    return data, feeds, names


@pytest.fixture(scope="module")
def conv_forms_model():
    from numlite.jit.kernels import conv

    from numlite.jit.kernels import quantized_conv

    data, feeds, names = conv_forms()
    compiled, on_bytes = {}, set()
    def spy(emit: Any) -> Any:  # which nodes the byte kinds take (test_byte_kinds_...)
        def spied(node: Any, *args: Any) -> None:
            on_bytes.add(names[node.index])  # (one operator per name, in order)
            emit(node, *args)

        return spied

    for threads in (1, 2):
        it = numlite.Interpreter(model_content=data, jit=True, num_threads=threads)
        with pytest.MonkeyPatch.context() as patch:  # every convolution takes the parallel twin, however small
            patch.setattr(conv, "PARALLEL_MIN_WORK", 0)
            patch.setattr(quantized_conv, "byte_conv_node", spy(quantized_conv.byte_conv_node))
            patch.setattr(quantized_conv, "byte_depthwise_node", spy(quantized_conv.byte_depthwise_node))
            patch.setattr(quantized_conv, "window_conv_node", spy(quantized_conv.window_conv_node))
            patch.setattr(quantized_conv, "window_depthwise_node", spy(quantized_conv.window_depthwise_node))
            it.allocate_tensors()
        compiled[threads] = it
    assert compiled[2]._jit.engines[0].threads == 2 and compiled[1]._jit.engines[0].threads == 0  # the parallel twins ran
    return data, feeds, names, compiled, on_bytes


def test_byte_kinds_take_the_int8_convolutions_they_can(conv_forms_model):
    """On a machine with AVX512-VNNI the int8 CONV_2D runs on the byte tile (quantized_conv's
    KIND_BYTE_CONV), except a grouped one, a multiplier above 1 and the uint8 form; with AVX-512
    the int8 DEPTHWISE_CONV_2D whose channels all round halves up (whole 8-channel blocks) and a
    multiplier of 1 requantizes in its store step (KIND_BYTE_DEPTHWISE); a convolution of one
    window over the whole input takes the plain kernels of the same machines (window_conv on
    bytes, window_depthwise on 16 int32 lanes, its channels past the last 8-channel block scalar,
    rounded away from zero as LiteRT's). The others keep the float32 path, tested here too by the bit-exact test below, and every form is by
    test_jit_conv's 8-lane run, where the byte kinds are off."""
    from numlite.jit.kernels.simd import AVX512, VNNI

    convs = {"conv0", "conv1", "conv2", "conv3", "conv4", "conv_wide", "rescale0", "halves0", "halves1"} if VNNI else set()
    depthwise = {"depthwise6", "depthwise7", "depthwise8", "depthwise9", "depthwise10", "halves2"} if AVX512 else set()
    # a single window over the whole input: quantized_conv.window_conv and window_depthwise
    convs |= {"window_conv", "window_1x1", "window_1x1_20", "window_conv_halves"} if VNNI else set()
    depthwise |= {"window_depthwise", "window_depthwise_relu6", "window_depthwise_halves"} if AVX512 else set()
    assert conv_forms_model[4] == convs | depthwise


@pytest.mark.parametrize("seed", [0, 1])
def test_int8_convolutions_and_pools_are_bit_exact_with_litert(conv_forms_model, seed, monkeypatch):
    from numlite.kernels import parallel

    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)  # the parallel twins on two threads, however busy the machine
    data, feeds, names, compiled, _ = conv_forms_model
    for it in compiled.values():
        report = it.jit_report()["subgraphs"][0]
        assert report["compiled"], report.get("reason")
    rng = np.random.default_rng(seed)
    fresh = [rng.integers(np.iinfo(f.dtype).min, np.iinfo(f.dtype).max + 1, f.shape).astype(f.dtype) for f in feeds]
    fresh[0].reshape(-1)[:4] = (-128, 127, -128, 127)
    # LiteRT's own integer kernels: its default XNNPACK delegate requantizes int8 convolutions
    # in float32 and differs from them by 1 on a few outputs (3 of 2016 in conv0 here)
    reference = run(litert_interpreter(data, builtin_only=True), fresh)
    numpy_engine = run(numlite.Interpreter(model_content=data), fresh)  # the pools and splits: also the NumPy engine's
    for threads, it in compiled.items():
        ours = run(it, fresh, allocate=False)
        assert it._jit.engines[0].threads == (2 if threads == 2 else 0)  # still the parallel twins
        for name in names:
            assert ours[name].dtype == reference[name].dtype, name
            np.testing.assert_array_equal(ours[name], reference[name], err_msg=f"{name}, {threads} threads")
            if "pool" in name or "split" in name:
                np.testing.assert_array_equal(ours[name], numpy_engine[name], err_msg=f"{name}, {threads} threads, NumPy engine")


def test_int8_small_cnn_compiles_whole_and_is_bit_exact():
    """benchmarks/quantized.py's small CNN (CONV_2D, MAX_POOL_2D, DEPTHWISE_CONV_2D, 1x1 CONV_2D,
    MEAN, FULLY_CONNECTED), full int8 by the official converter."""
    from quantized import official_model

    data = official_model("smallcnn", "int8")
    assert isinstance(data, bytes), data
    it = numlite.Interpreter(model_content=data, jit=True)
    it.allocate_tensors()
    report = it.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    litert = litert_interpreter(data, builtin_only=True)
    rng = np.random.default_rng(11)
    shape = tuple(it.get_input_details()[0]["shape"])
    runtime = it._subgraphs[0]
    weighted = sorted(s.index for s in runtime.plan if s.op_name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"))
    for _ in range(2):
        feed = [rng.integers(-128, 128, shape).astype(I8)]
        theirs = run(litert, feed)
        for allocate in (True, False):
            ours = run(it, feed, allocate)
            assert ours.keys() == theirs.keys()
            for name in ours:
                np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
        # The NumPy engine's integer kernels gave up their laid-out weights by the compiled
        # model's second run; a watched invoke (NumPy) prepares them again, and stays bit-exact.
        assert sorted(runtime.released) == weighted and len(weighted) >= 4
        it.check_cancelled = lambda: False
        try:
            ours = run(it, feed, allocate=False)
        finally:
            it.check_cancelled = None
        assert runtime.released == {}
        for name in ours:
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=f"{name} (NumPy after the release)")
