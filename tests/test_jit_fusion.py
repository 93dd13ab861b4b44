"""Element-wise chains fused into the CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED that
produces their input (numlite/jit/fusion.py, docs/jit.md "Epilogues"): LOGISTIC, TANH,
HARD_SWISH and swish (LOGISTIC then MUL) computed as the producer stores its output.

Judged three ways: against LiteRT and the NumPy engine (the guide's tolerances), and bit for
bit against the compiled engine with fusion turned off (the epilogue computes the same float32
operations as the unfused nodes). The chains that must not fuse (an intermediate read
elsewhere, a node in between, a MUL with its own activation) are in the same model, and the
generated source says which nodes were fused."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import run_interpreter
from test_jit import Graphs, _matches_litert_and_numpy, jit_cache, rng_floats  # noqa: F401  (a fixture)

import numlite
from numlite.model.ir import Options

numba = pytest.importorskip("numba")
from numlite.jit import fusion  # noqa: E402

SAME, VALID = 0, 1
NONE, RELU, RELU6 = 0, 1, 3
FUSED = "'s epilogue"  # the generated comment of a node computed by its producer's epilogue


def _conv_options(padding: int = SAME, stride: int = 1, act: int = NONE) -> Options:
    return Options("Conv2DOptions", padding=padding, stride_h=stride, stride_w=stride, fused_activation_function=act,
                   dilation_h_factor=1, dilation_w_factor=1)  # fmt: skip


def fusion_model() -> tuple[bytes, list[np.ndarray], int]:
    """Every producer with every epilogue, and chains that must not fuse; returns the model,
    its inputs and the number of nodes that fuse."""
    g = Graphs()
    m = g.subgraph()
    n, h, w, c = 2, 9, 7, 6  # 126 pixels: whole 4-pixel tiles and one left over
    x = m.input((n, h, w, c))
    rows = m.input((3, 40))  # FULLY_CONNECTED by BLAS (3 x 40 x 600 multiply-adds)
    row = m.input((1, 300))  # FULLY_CONNECTED's loop kernel (one row, 300 x 64)
    small = m.input((1, 8))  # FULLY_CONNECTED inlined (8 x 5)
    seed = 200

    def const(shape: tuple[int, ...]) -> int:
        nonlocal seed
        seed += 1
        return m.const(rng_floats(shape, seed, -0.6, 0.6))

    def conv(oc: int, k: int, padding: int = SAME, stride: int = 1, act: int = NONE, output: bool = False) -> int:
        oh, ow = (-(-h // stride), -(-w // stride)) if padding == SAME else ((h - k) // stride + 1, (w - k) // stride + 1)
        return m.op("CONV_2D", [x, const((oc, k, k, c)), const((oc,))], (n, oh, ow, oc), options=_conv_options(padding, stride, act),
                    output=output)  # fmt: skip

    def depthwise(mult: int, padding: int, stride: int) -> int:
        oh, ow = (-(-h // stride), -(-w // stride)) if padding == SAME else ((h - 3) // stride + 1, (w - 3) // stride + 1)
        options = Options("DepthwiseConv2DOptions", padding=padding, stride_h=stride, stride_w=stride, depth_multiplier=mult,
                          fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1)  # fmt: skip
        return m.op("DEPTHWISE_CONV_2D", [x, const((1, 3, 3, c * mult)), const((c * mult,))], (n, oh, ow, c * mult), options=options,
                    output=False)  # fmt: skip

    def dense(source: int, k: int, units: int, batch: int) -> int:
        options = Options("FullyConnectedOptions", fused_activation_function=NONE, weights_format=0, keep_num_dims=False)
        return m.op("FULLY_CONNECTED", [source, const((units, k)), const((units,))], (batch, units), options=options, output=False)

    def unary(op: str, t: int, output: bool = True) -> int:
        return m.op(op, [t], m.graph.tensors[t].shape, output=output)

    def swish(t: int, sigmoid_first: bool = False, act: int = NONE, output: bool = True) -> int:
        s = unary("LOGISTIC", t, output=False)
        ins = [s, t] if sigmoid_first else [t, s]
        return m.op("MUL", ins, m.graph.tensors[t].shape, options=Options("MulOptions", fused_activation_function=act), output=output)

    # fused: 13 nodes
    swish(conv(16, 3))  # one full 16-channel block
    swish(conv(5, 1, VALID, act=RELU6), sigmoid_first=True)  # the producer's clamp first; MUL's operands swapped
    unary("TANH", conv(19, 3, stride=2))  # a full block and 3 channels of another
    unary("HARD_SWISH", conv(7, 3))
    swish(depthwise(1, SAME, 1))  # 6 channels: masked lanes, border pixels and 4-pixel tiles
    unary("LOGISTIC", depthwise(2, VALID, 2))
    swish(dense(rows, 40, 600, 3))
    unary("HARD_SWISH", dense(row, 300, 64, 1))
    unary("TANH", dense(small, 8, 5, 1))
    # not fused
    unary("LOGISTIC", conv(8, 3, output=True))  # the convolution's output is a graph output too
    t = conv(8, 1, VALID)
    s = unary("LOGISTIC", t, output=True)  # the LOGISTIC's output is a graph output too
    m.op("MUL", [t, s], m.graph.tensors[t].shape)
    t = conv(8, 1, VALID)
    m.op("ABS", [x], (n, h, w, c))  # a node between the producer and its activation
    unary("TANH", t)
    swish(conv(8, 1, VALID), act=RELU)  # a MUL with its own activation
    t = conv(8, 1, VALID)
    unary("LOGISTIC", t, output=True)
    m.op("MUL", [t, t], m.graph.tensors[t].shape)  # a MUL of the output by itself: read twice, not a swish
    inputs = [rng_floats(m.graph.tensors[t].shape, 7 + k, -2.0, 2.0) for k, t in enumerate(m.graph.inputs)]
    return g.bytes(), inputs, 13


@pytest.fixture(scope="module")
def fused(jit_cache, tmp_path_factory):
    model, inputs, count = fusion_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True, num_threads=1)
    interpreter.allocate_tensors()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fusion, "find", lambda runtime: {})
        # a cache of its own: the cache's index would give this model the fused module
        patch.setenv("NUMLITE_CACHE_DIR", str(tmp_path_factory.mktemp("unfused")))
        unfused = numlite.Interpreter(model_content=model, jit=True, num_threads=1)
        unfused.allocate_tensors()
    return model, inputs, count, interpreter, unfused


def test_chains_fuse_into_their_producer_and_match_litert(fused):
    model, inputs, count, interpreter, unfused = fused
    for engine in (interpreter, unfused):
        report = engine.jit_report()["subgraphs"][0]
        assert report["compiled"] and report["operators"] == len(engine._get_ops_details()), report
    assert interpreter._jit.engines[0].source.count(FUSED) == count, interpreter._jit.engines[0].source
    assert unfused._jit.engines[0].source.count(FUSED) == 0
    names = [d["name"] for d in interpreter.get_output_details()]
    for seed in (0, 1):  # twice: the second invoke reuses the arenas
        feed = [rng_floats(v.shape, 40 + 5 * seed + k, -2.0, 2.0) for k, v in enumerate(inputs)]
        got = run_interpreter(interpreter, feed)
        _matches_litert_and_numpy(model, got, feed, names)
        for a, b, name in zip(got, run_interpreter(unfused, feed), names):
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: fused and unfused compiled code differ")


def test_converted_keras_activations_fuse(jit_cache):
    """Keras' swish, sigmoid, tanh and hard_swish after Conv2D, DepthwiseConv2D and Dense, as
    the official converter writes them (swish as LOGISTIC and MUL)."""
    tf = pytest.importorskip("tensorflow")
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(1)
    model = tf.keras.Sequential([
        tf.keras.Input((12, 10, 3), batch_size=1),
        layers.Conv2D(24, 3, strides=2, padding="same", activation="swish"),
        layers.DepthwiseConv2D(3, padding="same"),
        layers.Activation("swish"),
        layers.Conv2D(16, 1, activation="hard_swish"),
        layers.Conv2D(8, 3, activation="sigmoid"),
        layers.Flatten(),
        layers.Dense(64, activation="tanh"),
        layers.Dense(10, activation="swish"),
    ])  # fmt: skip
    content = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    interpreter = numlite.Interpreter(model_content=content, jit=True, num_threads=1)
    interpreter.allocate_tensors()
    assert interpreter.jit_report()["subgraphs"][0]["compiled"]
    source = interpreter._jit.engines[0].source
    ops = [d["op_name"] for d in interpreter._get_ops_details()]
    activations = sum(op in ("LOGISTIC", "MUL", "TANH", "HARD_SWISH") for op in ops)
    assert activations >= 8, ops  # the converter kept them as nodes
    assert source.count(FUSED) == activations, (ops, source)
    feed = [rng_floats((1, 12, 10, 3), 9)]
    names = [d["name"] for d in interpreter.get_output_details()]
    _matches_litert_and_numpy(content, run_interpreter(interpreter, feed), feed, names)
