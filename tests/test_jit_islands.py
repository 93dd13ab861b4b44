"""Islands (numlite/jit/kernels/islands.py, docs/jit.md "Islands"): a node without a compiled
kernel runs on the NumPy engine from inside the compiled code of the model around it, instead
of sending the whole model to the NumPy engine. Builtin ops LiteRT runs (BITCAST has no
compiled kernel) are judged by LiteRT; a Python custom op by its own definition."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import run_interpreter
from test_jit import Graphs, jit_cache, rng_floats  # noqa: F401  (a fixture)

import numlite
from numlite.errors import InvokeError
from numlite.kernels import KERNELS, Kernel, Spec
from numlite.model.ir import Operator, OperatorCode, Options

pytest.importorskip("numba")

SIGN = np.int32(-(2**31))  # the float32 sign bit, as an int32


def bitcast_model() -> tuple[bytes, list[np.ndarray]]:
    """Eight operators, two of them islands (BITCAST to int32 and back): ``-(x + y)`` by
    flipping the sign bit of its int32 view (BITWISE_XOR), then compiled ops on it."""
    g = Graphs()
    m = g.subgraph()
    x, y = m.input((2, 3, 4)), m.input((2, 3, 4))
    a = m.op("ADD", [x, y], (2, 3, 4), options=Options("AddOptions"), output=False)
    bits = m.op("BITCAST", [a], (2, 3, 4), np.int32, output=False)
    flipped = m.op("BITWISE_XOR", [bits, m.const(np.full((2, 3, 4), SIGN), np.int32)], (2, 3, 4), np.int32)
    negated = m.op("BITCAST", [flipped], (2, 3, 4), output=False)
    e = m.op("MUL", [negated, x], (2, 3, 4), options=Options("MulOptions"))
    f = m.op("TANH", [e], (2, 3, 4), output=False)
    g_ = m.op("SUB", [f, y], (2, 3, 4), options=Options("SubOptions"), output=False)
    m.op("ABS", [g_], (2, 3, 4))
    return g.bytes(), [rng_floats((2, 3, 4), 1), rng_floats((2, 3, 4), 2)]


def _litert(model: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=model)
    interpreter.allocate_tensors()
    return run_interpreter(interpreter, inputs)


def test_builtin_ops_without_a_compiled_kernel_run_as_islands_and_match_litert(jit_cache):
    model, inputs = bitcast_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report
    assert [name.split(":")[0] for name in report["islands"]] == ["subgraph 0, node 1 (BITCAST)", "subgraph 0, node 3 (BITCAST)"]
    assert "no compiled kernel for BITCAST" in report["islands"][0]
    expected = _litert(model, inputs)
    for _ in range(3):  # (the lean invoke from the second on)
        got = run_interpreter(interpreter, inputs)
        np.testing.assert_array_equal(got[0], expected[0])  # int32: the flipped bits
        for ours, theirs in zip(got[1:], expected[1:]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], -(inputs[0] + inputs[1]) * inputs[0])  # two exact roundings, any runtime
    assert "BITCAST" in interpreter._jit.engines[0].source and "island" in interpreter._jit.engines[0].source


def custom_op_model() -> tuple[bytes, list[np.ndarray]]:
    """ADD, a CUSTOM op ``MySoftsign``, SIN, MUL: one island in four operators."""
    g = Graphs()
    m = g.subgraph()
    x = m.input((2, 3, 4))
    a = m.op("ADD", [x, m.const(0.5)], (2, 3, 4), options=Options("AddOptions"), output=False)
    g.model.operator_codes.append(OperatorCode("CUSTOM", "MySoftsign"))
    soft = m.tensor((2, 3, 4), name="softsign")
    m.graph.operators.append(Operator(len(g.model.operator_codes) - 1, [a], [soft]))
    s = m.op("SIN", [soft], (2, 3, 4), output=False)
    m.op("MUL", [s, m.const(2.0)], (2, 3, 4), options=Options("MulOptions"))
    return g.bytes(), [rng_floats((2, 3, 4), 3)]


def softsign(v: np.ndarray) -> np.ndarray:
    return v / (1 + np.abs(v))


def test_a_python_custom_op_runs_as_an_island_of_the_compiled_model(jit_cache):
    model, inputs = custom_op_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True, custom_ops={"MySoftsign": softsign})
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"] and report["islands"] == ["subgraph 0, node 1 (MySoftsign): no compiled kernel for MySoftsign"]
    expected = np.sin(softsign(inputs[0] + np.float32(0.5))) * np.float32(2.0)
    for _ in range(3):
        np.testing.assert_allclose(run_interpreter(interpreter, inputs)[0], expected, rtol=1e-5, atol=1e-5)


def test_a_builtin_the_user_overrides_is_never_replaced_by_numlites_compiled_kernel(jit_cache):
    """``custom_ops={"SIN": fn}``: the compiled engine runs the user's SIN (an island), not its
    own; with two overrides in four operators, too many islands: the NumPy engine, saying why."""
    model, inputs = custom_op_model()

    def loud_sin(v: np.ndarray) -> np.ndarray:
        return np.sin(v) * np.float32(10)

    ops = {"MySoftsign": softsign, "SIN": loud_sin}
    expected = loud_sin(softsign(inputs[0] + np.float32(0.5))) * np.float32(2.0)
    interpreter = numlite.Interpreter(model_content=model, jit=True, custom_ops=ops)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert not report["compiled"] and "too many to run as islands" in report["reason"]
    np.testing.assert_allclose(run_interpreter(interpreter, inputs)[0], expected, rtol=1e-5, atol=1e-5)

    g = Graphs()  # one override among eight operators: an island
    m = g.subgraph()
    x = m.input((5,))
    v = x
    for k in range(7):
        v = m.op("ADD", [v, m.const(0.125 * k)], (5,), options=Options("AddOptions"), output=False)
    m.op("SIN", [v], (5,))
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True, custom_ops={"SIN": loud_sin})
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"] and report["islands"] == ["subgraph 0, node 7 (SIN): SIN is the interpreter's custom op"]
    value = rng_floats((5,), 4)
    total = value
    for k in range(7):
        total = total + np.float32(0.125 * k)
    np.testing.assert_allclose(run_interpreter(interpreter, [value])[0], loud_sin(total), rtol=1e-5, atol=1e-5)


def test_an_island_that_raises_fails_the_invoke_as_the_numpy_engine_does(jit_cache):
    model, inputs = custom_op_model()
    broken = [True]

    def flaky(v: np.ndarray) -> np.ndarray:
        if broken[0]:
            raise ValueError("boom")
        return softsign(v)

    messages = []
    for jit in (True, False):
        interpreter = numlite.Interpreter(model_content=model, jit=jit, custom_ops={"MySoftsign": flaky})
        interpreter.allocate_tensors()
        assert bool(interpreter.jit_report()["subgraphs"].get(0, {}).get("compiled")) == jit
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
        with pytest.raises(InvokeError) as caught:
            interpreter.invoke()
        messages.append(str(caught.value))
        assert isinstance(caught.value.__cause__, ValueError)
        broken[0] = False  # the interpreter goes on: the next invoke succeeds
        interpreter.invoke()
        expected = np.sin(softsign(inputs[0] + np.float32(0.5))) * np.float32(2.0)
        np.testing.assert_allclose(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected, rtol=1e-5, atol=1e-5)
        broken[0] = True
    assert messages[0] == messages[1]
    assert messages[0].startswith("subgraph 0, node 1 (MySoftsign) failed: ValueError: boom; inputs: [")


def test_a_kernel_registered_for_a_builtin_is_never_replaced_by_the_compiled_one(jit_cache, monkeypatch):
    """``@numlite.kernels.register("SIN")`` on a user's class makes it every interpreter's SIN
    (as ``register`` does to the table): compiled models run it as an island."""

    class LoudSin(Kernel):
        def prepare(self, ins):
            return [Spec(ins[0].shape, ins[0].dtype)]

        def eval(self, ins, outs):
            np.multiply(np.sin(ins[0]), np.float32(10), out=outs[0])

    monkeypatch.setitem(KERNELS, "SIN", LoudSin)
    g = Graphs()
    m = g.subgraph()
    v = m.input((5,))
    for k in range(7):
        v = m.op("ADD", [v, m.const(0.125 * k)], (5,), options=Options("AddOptions"), output=False)
    m.op("SIN", [v], (5,))
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True)
    interpreter.allocate_tensors()
    assert interpreter.jit_report()["subgraphs"][0]["islands"] == ["subgraph 0, node 7 (SIN): SIN is the interpreter's custom op"]
    value = rng_floats((5,), 5)
    total = value
    for k in range(7):
        total = total + np.float32(0.125 * k)
    np.testing.assert_allclose(run_interpreter(interpreter, [value])[0], np.sin(total) * np.float32(10), rtol=1e-5, atol=1e-5)


def test_inside_a_loop_body_an_op_without_a_kernel_keeps_the_model_on_numpy(jit_cache):
    """A callback per iteration would cost more than the NumPy engine's loop: no island in a
    WHILE body; the report names the body's node."""
    g = Graphs()
    main, cond, body = (g.subgraph() for _ in range(3))
    x, n = main.input((6,)), main.input((), np.int32)
    a = main.op("ADD", [x, main.const(0.5)], (6,), options=Options("AddOptions"), output=False)
    outs = [main.tensor((), np.int32), main.tensor((), np.int32), main.tensor((6,))]
    main.graph.operators.append(Operator(g.opcode("WHILE"), [main.const(0, np.int32), n, a], outs,
                                         builtin_options=Options("WhileOptions", cond_subgraph_index=1, body_subgraph_index=2)))
    main.graph.outputs = [outs[2]]
    i, n_, v = cond.input((), np.int32), cond.input((), np.int32), cond.input((6,))
    cond.op("LESS", [i, n_], (), np.bool_)
    i, n_, v = body.input((), np.int32), body.input((), np.int32), body.input((6,))
    g.model.operator_codes.append(OperatorCode("CUSTOM", "MySoftsign"))
    soft = body.tensor((6,), name="softsign")
    body.graph.operators.append(Operator(len(g.model.operator_codes) - 1, [v], [soft]))
    body.graph.outputs = [body.op("ADD", [i, body.const(1, np.int32)], (), np.int32, output=False), n_, soft]
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True, custom_ops={"MySoftsign": softsign})
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert not report["compiled"] and "subgraph 2, node 0 (MySoftsign): no compiled kernel for MySoftsign" in report["reason"]
    value = rng_floats((6,), 6)
    expected = value + np.float32(0.5)
    for _ in range(3):
        expected = softsign(expected)
    np.testing.assert_allclose(run_interpreter(interpreter, [value, np.int32(3)])[0], expected, rtol=1e-5, atol=1e-5)


def test_a_detection_models_post_process_is_an_island_and_matches_litert(jit_cache):
    """What an SSD-style detection file ends with: boxes and class logits from compiled ops
    (here ADD, MUL, LOGISTIC), then LiteRT's TFLite_Detection_PostProcess custom op (no compiled
    kernel: an island of four outputs). Judged by LiteRT: classes and the count exactly."""
    from flatbuffers import flexbuffers

    n, columns = 50, 5
    options = dict(max_detections=10, max_classes_per_detection=1, nms_score_threshold=0.1, nms_iou_threshold=0.5,
                   num_classes=4, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)  # fmt: skip
    rng = np.random.default_rng(7)
    anchors = np.stack([rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.4, n),
                        rng.uniform(0.1, 0.4, n)], 1).astype(np.float32)  # fmt: skip
    g = Graphs()
    m = g.subgraph()
    raw_boxes, logits = m.input((1, n, 4)), m.input((1, n, columns))
    shifted = m.op("ADD", [raw_boxes, m.const(0.25)], (1, n, 4), options=Options("AddOptions"), output=False)
    boxes = m.op("MUL", [shifted, m.const(0.8)], (1, n, 4), options=Options("MulOptions"), output=False)
    scores = m.op("LOGISTIC", [logits], (1, n, columns), output=False)
    g.model.operator_codes.append(OperatorCode("CUSTOM", "TFLite_Detection_PostProcess"))
    outs = [m.tensor((1, 10, 4)), m.tensor((1, 10)), m.tensor((1, 10)), m.tensor((1,))]
    m.graph.operators.append(Operator(len(g.model.operator_codes) - 1, [boxes, scores, m.const(anchors)], outs,
                                      custom_options=bytes(flexbuffers.Dumps(options))))  # fmt: skip
    m.graph.outputs = outs
    model = g.bytes()
    inputs = [rng.normal(0, 1, (1, n, 4)).astype(np.float32), rng.normal(-1, 2, (1, n, columns)).astype(np.float32)]
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"] and report["islands"] == [
        "subgraph 0, node 3 (TFLite_Detection_PostProcess): no compiled kernel for TFLite_Detection_PostProcess"]
    expected = _litert(model, inputs)
    assert int(expected[3][0]) == options["max_detections"]  # every slot written
    for _ in range(2):
        got = run_interpreter(interpreter, inputs)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[1], expected[1])
        np.testing.assert_allclose(got[2], expected[2], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[3], expected[3])


def test_an_island_keeps_the_weights_its_numpy_kernel_laid_out(jit_cache, monkeypatch):
    """Under the compiled engine the NumPy engine's convolution kernels give up their laid-out
    weights (SubgraphRuntime.release_weights), but not an island's: a user's CONV_2D class
    (here numlite's own, subclassed) runs on them at every invoke. Judged by LiteRT."""
    from numlite.kernels.conv import Conv2D

    class MyConv2D(Conv2D):
        pass

    monkeypatch.setitem(KERNELS, "CONV_2D", MyConv2D)
    g = Graphs()
    m = g.subgraph()
    x = m.input((1, 6, 5, 3))
    v = x
    for k in range(5):
        v = m.op("ADD", [v, m.const(0.25 * k)], (1, 6, 5, 3), options=Options("AddOptions"), output=False)
    f, b = m.const(rng_floats((4, 3, 3, 3), 7)), m.const(rng_floats((4,), 8))
    v = m.op("CONV_2D", [v, f, b], (1, 6, 5, 4), options=Options("Conv2DOptions", padding=0, stride_h=1, stride_w=1), output=False)
    m.op("DEPTHWISE_CONV_2D", [v, m.const(rng_floats((1, 3, 3, 4), 9)), m.const(rng_floats((4,), 10))], (1, 6, 5, 4),
         options=Options("DepthwiseConv2DOptions", padding=0, stride_h=1, stride_w=1, depth_multiplier=1))  # fmt: skip
    model = g.bytes()
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    assert [name.split(":")[0] for name in interpreter.jit_report()["subgraphs"][0]["islands"]] == ["subgraph 0, node 5 (CONV_2D)"]
    runtime = interpreter._subgraphs[0]
    for seed in (1, 2):
        feed = [rng_floats((1, 6, 5, 3), seed)]
        expected = _litert(model, feed)
        for got in (run_interpreter(interpreter, feed), _invoke(interpreter, feed)):  # released by the second run at most
            np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5)
        assert list(runtime.released) == [6]  # the compiled DEPTHWISE_CONV_2D's; the island's kept
        np.testing.assert_allclose(_invoke(interpreter, feed)[0], expected[0], rtol=1e-5, atol=1e-5)


def _invoke(interpreter, feed):
    """Set the inputs and invoke without allocating again (run_interpreter allocates)."""
    for d, value in zip(interpreter.get_input_details(), feed):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
