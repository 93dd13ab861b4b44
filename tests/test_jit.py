"""numlite.jit, the compiled engine: every compiled kernel against LiteRT and the NumPy engine,
control flow compiled as native loops, bounds checks and cancellation in compiled code, the
module cache reused by a second process, and numlite without Numba.

Numba compiles slowly (seconds per model), so the models are few and shared: one model holds
a node of every compiled kernel (each node's output is a graph output, judged on its own), one
holds a WHILE whose body runs an IF and a GATHER. The cache lives in a per-session folder."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any, Sequence

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter, run_interpreter

import numlite
from numlite import jit
from numlite.interpreter import denormals
from numlite.errors import CancelledError, InvokeError
from numlite.model import write_model
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Options, Quantization, Subgraph, Tensor

pytest.importorskip("numba")

TYPES = {np.dtype(np.float32): "FLOAT32", np.dtype(np.int32): "INT32", np.dtype(np.bool_): "BOOL", np.dtype(np.int8): "INT8"}


class Graphs:
    """Models of several subgraphs written with numlite's writer."""

    def __init__(self) -> None:
        self.model = Model()

    def subgraph(self) -> "Graph":
        self.model.subgraphs.append(Subgraph())
        return Graph(self, self.model.subgraphs[-1])

    def opcode(self, op: str) -> int:
        for k, code in enumerate(self.model.operator_codes):
            if code.builtin == op:
                return k
        self.model.operator_codes.append(OperatorCode(op, version=1))
        return len(self.model.operator_codes) - 1

    def bytes(self) -> bytes:
        return write_model(self.model)


class Graph:
    def __init__(self, graphs: Graphs, graph: Subgraph) -> None:
        self.graphs, self.graph = graphs, graph

    def tensor(self, shape: Sequence[int], dtype: Any = np.float32, value: Any = None, name: str = "") -> int:
        buffer = 0
        if value is not None:
            data = np.ascontiguousarray(value, dtype)
            self.graphs.model.buffers.append(Buffer(np.frombuffer(data.tobytes(), np.uint8)))
            buffer = len(self.graphs.model.buffers) - 1
        t = Tensor(name or f"t{len(self.graph.tensors)}", tuple(int(d) for d in shape), TYPES[np.dtype(dtype)], buffer)
        self.graph.tensors.append(t)
        return len(self.graph.tensors) - 1

    def const(self, value: Any, dtype: Any = np.float32) -> int:
        value = np.asarray(value, dtype)
        return self.tensor(value.shape, dtype, value)

    def input(self, shape: Sequence[int], dtype: Any = np.float32) -> int:
        t = self.tensor(shape, dtype)
        self.graph.inputs.append(t)
        return t

    def op(self, name: str, ins: Sequence[int], shape: Sequence[int], dtype: Any = np.float32, options: Options | None = None,
           output: bool = True) -> int:
        out = self.tensor(shape, dtype, name=f"{name.lower()}_{len(self.graph.operators)}")
        self.graph.operators.append(Operator(self.graphs.opcode(name), list(ins), [out], builtin_options=options))
        if output:
            self.graph.outputs.append(out)
        return out


def rng_floats(shape, seed, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def kernels_model() -> tuple[bytes, list[np.ndarray]]:
    """One node of each compiled kernel (in each of its forms), every output a graph output."""
    g = Graphs()
    m = g.subgraph()
    x = m.input((2, 3, 4))
    y = m.input((3, 1))
    pos = m.input((5,), np.int32)
    a = m.input((4, 3), np.int32)
    b = m.input((3,), np.int32)
    add = lambda act: Options("AddOptions", fused_activation_function=act)  # noqa: E731
    m.op("ADD", [x, y], (2, 3, 4), options=add(1))  # broadcast through index maps, RELU
    m.op("SUB", [x, m.const(0.25)], (2, 3, 4), options=Options("SubOptions", fused_activation_function=3))
    m.op("MUL", [m.const(1.5), x], (2, 3, 4), options=Options("MulOptions"))
    m.op("DIV", [x, m.const(rng_floats((2, 3, 4), 7, 0.5, 2.0))], (2, 3, 4), options=Options("DivOptions"))
    m.op("MAXIMUM", [x, y], (2, 3, 4))
    m.op("MINIMUM", [x, m.const(0.1)], (2, 3, 4))
    less = m.op("LESS", [x, y], (2, 3, 4), np.bool_)
    greater = m.op("GREATER", [x, m.const(-0.5)], (2, 3, 4), np.bool_)
    m.op("LESS_EQUAL", [a, b], (4, 3), np.bool_)
    m.op("GREATER_EQUAL", [a, b], (4, 3), np.bool_)
    m.op("EQUAL", [a, b], (4, 3), np.bool_)
    m.op("NOT_EQUAL", [a, m.const(3, np.int32)], (4, 3), np.bool_)
    both = m.op("LOGICAL_AND", [less, greater], (2, 3, 4), np.bool_)
    m.op("LOGICAL_OR", [less, greater], (2, 3, 4), np.bool_)
    m.op("LOGICAL_NOT", [both], (2, 3, 4), np.bool_)
    m.op("SELECT_V2", [both, x, y], (2, 3, 4))
    m.op("SELECT", [less, x, m.const(rng_floats((2, 3, 4), 8))], (2, 3, 4))
    m.op("CAST", [x], (2, 3, 4), np.int32)
    m.op("CAST", [a], (4, 3), np.float32)
    m.op("CAST", [a], (4, 3), np.bool_)
    m.op("CAST", [less], (2, 3, 4), np.float32)
    for name in ("ABS", "NEG", "TANH", "LOGISTIC", "RELU", "RELU6", "RELU_N1_TO_1", "SQUARE", "SIN", "COS"):
        m.op(name, [x], (2, 3, 4))
    e = m.op("EXP", [x], (2, 3, 4))
    for name in ("LOG", "SQRT", "RSQRT"):
        m.op(name, [e], (2, 3, 4))
    for name in ("ABS", "NEG"):
        m.op(name, [a], (4, 3), np.int32)
    ops = [("ADD", add(0)), ("SUB", None), ("MUL", None), ("MAXIMUM", None), ("MINIMUM", None)]
    for name, options in ops:
        m.op(name, [a, b], (4, 3), np.int32, options=options)  # integers, broadcast along rows
    m.op("FLOOR_MOD", [a, m.const([3, -2, 5], np.int32)], (4, 3), np.int32)  # floored: the divisor's sign
    m.op("FLOOR_MOD", [x, m.const(0.75)], (2, 3, 4))
    m.op("RESHAPE", [x, m.const([6, 4], np.int32)], (6, 4))
    m.op("EXPAND_DIMS", [y, m.const(0, np.int32)], (1, 3, 1))
    m.op("SQUEEZE", [y], (3,), options=Options("SqueezeOptions", squeeze_dims=[1]))
    m.op("CONCATENATION", [x, x], (2, 6, 4), options=Options("ConcatenationOptions", axis=1))
    m.op("CONCATENATION", [a, a], (8, 3), np.int32, options=Options("ConcatenationOptions", axis=0))
    m.op("TRANSPOSE", [x, m.const([2, 0, 1], np.int32)], (4, 2, 3))
    m.op("SLICE", [x, m.const([0, 1, 1], np.int32), m.const([2, 2, -1], np.int32)], (2, 2, 3))
    m.op("STRIDED_SLICE", [x, m.const([1, 0, 3], np.int32), m.const([2, 3, 0], np.int32), m.const([1, 2, -1], np.int32)],
         (2, 3), options=Options("StridedSliceOptions", shrink_axis_mask=1))
    m.op("GATHER", [x, pos], (2, 5, 4), options=Options("GatherOptions", axis=1))  # positions from data
    m.op("GATHER", [x, m.const([2, 0], np.int32)], (2, 3, 2), options=Options("GatherOptions", axis=2))
    w = m.const(rng_floats((5, 4), 9, -0.5, 0.5))
    m.op("FULLY_CONNECTED", [x, w, m.const(rng_floats((5,), 10))], (6, 5), options=Options("FullyConnectedOptions", fused_activation_function=1))
    m.op("FULLY_CONNECTED", [x, w, -1], (2, 3, 5), options=Options("FullyConnectedOptions", keep_num_dims=True))
    m.op("SUM", [x, m.const([1], np.int32)], (2, 1, 4), options=Options("ReducerOptions", keep_dims=True))
    m.op("MEAN", [x, m.const([0, 2], np.int32)], (3,), options=Options("ReducerOptions"))
    m.op("SUM", [a, m.const([0], np.int32)], (3,), np.int32, options=Options("ReducerOptions"))
    inputs = [
        rng_floats((2, 3, 4), 1), rng_floats((3, 1), 2),
        np.array([2, 0, 1, 1, 2], np.int32),
        np.random.default_rng(3).integers(-5, 6, (4, 3)).astype(np.int32),
        np.array([3, -2, 0], np.int32),
    ]
    return g.bytes(), inputs


def loop_model() -> bytes:
    """``while i < n: v = tanh(if sum(v) > 0: v * 0.5 - 0.1 else |v| + 0.2) * table[k] + v; i += 1``,
    the outputs i and v; ``k`` picks the table's row (a GATHER of a position from data)."""
    g = Graphs()
    main, cond, body, then, other = (g.subgraph() for _ in range(5))
    n, v, k = main.input((), np.int32), main.input((4,)), main.input((), np.int32)
    zero = main.const(0, np.int32)
    outs = [main.tensor((), np.int32), main.tensor((), np.int32), main.tensor((4,)), main.tensor((), np.int32)]
    main.graph.operators.append(Operator(g.opcode("WHILE"), [zero, n, v, k], outs, builtin_options=Options("WhileOptions", cond_subgraph_index=1, body_subgraph_index=2)))
    main.graph.outputs = [outs[0], outs[2]]
    i, n_, v_, k_ = cond.input((), np.int32), cond.input((), np.int32), cond.input((4,)), cond.input((), np.int32)
    cond.op("LESS", [i, n_], (), np.bool_)
    i, n_, v_, k_ = body.input((), np.int32), body.input((), np.int32), body.input((4,)), body.input((), np.int32)
    total = body.op("SUM", [v_, body.const([0], np.int32)], (), options=Options("ReducerOptions"), output=False)
    positive = body.op("GREATER", [total, body.const(0.0)], (), np.bool_, output=False)
    picked = body.tensor((4,))
    body.graph.operators.append(Operator(g.opcode("IF"), [positive, v_], [picked], builtin_options=Options("IfOptions", then_subgraph_index=3, else_subgraph_index=4)))
    row = body.op("GATHER", [body.const(rng_floats((6, 4), 11, -1, 1)), k_], (4,), options=Options("GatherOptions"), output=False)
    mixed = body.op("TANH", [body.op("MUL", [picked, row], (4,), output=False)], (4,), output=False)
    step = body.op("ADD", [i, body.const(1, np.int32)], (), np.int32, output=False)
    new_v = body.op("ADD", [mixed, body.op("MUL", [v_, body.const(0.5)], (4,), output=False)], (4,), output=False)
    body.graph.outputs = [step, n_, new_v, k_]  # n and k pass through
    x = then.input((4,))
    then.op("SUB", [then.op("MUL", [x, then.const(0.5)], (4,), output=False), then.const(0.1)], (4,))
    x = other.input((4,))
    other.op("ADD", [other.op("ABS", [x], (4,), output=False), other.const(0.2)], (4,))
    return g.bytes()


def reuse_model() -> bytes:
    """Intermediates that die (fused RELU6 and RELU: loops of several lines), then a WHILE
    whose body keeps ``e`` alive across two other intermediates: ``v = tanh(relu(v * 0.9 + c)) - v * 0.9``.
    The arena planner shares memory between the dead ones; a wrong lifetime changes the output."""
    g = Graphs()
    main, cond, body = (g.subgraph() for _ in range(3))
    x, n = main.input((32,)), main.input((), np.int32)
    a = main.op("ADD", [x, main.const(rng_floats((32,), 1))], (32,), options=Options("AddOptions", fused_activation_function=3), output=False)
    c = main.op("TANH", [main.op("MUL", [a, a], (32,), options=Options("MulOptions"), output=False)], (32,), output=False)
    d = main.op("SUB", [c, x], (32,), options=Options("SubOptions"), output=False)
    outs = [main.tensor((), np.int32), main.tensor((), np.int32), main.tensor((32,))]
    main.graph.operators.append(Operator(g.opcode("WHILE"), [main.const(0, np.int32), n, d], outs,
                                         builtin_options=Options("WhileOptions", cond_subgraph_index=1, body_subgraph_index=2)))
    main.graph.outputs = [outs[0], outs[2]]
    i, n_, v = cond.input((), np.int32), cond.input((), np.int32), cond.input((32,))
    cond.op("LESS", [i, n_], (), np.bool_)
    i, n_, v = body.input((), np.int32), body.input((), np.int32), body.input((32,))
    e = body.op("MUL", [v, body.const(0.9)], (32,), options=Options("MulOptions"), output=False)
    f = body.op("ADD", [e, body.const(rng_floats((32,), 2))], (32,), options=Options("AddOptions", fused_activation_function=1), output=False)
    new_v = body.op("SUB", [body.op("TANH", [f], (32,), output=False), e], (32,), options=Options("SubOptions"), output=False)
    body.graph.outputs = [body.op("ADD", [i, body.const(1, np.int32)], (), np.int32, output=False), n_, new_v]
    return g.bytes()


@pytest.fixture(scope="module")
def jit_cache(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("numlite-jit-cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NUMLITE_CACHE_DIR", folder)
        yield folder


def _compiled(interpreter: Any) -> dict[str, Any]:
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report
    return report


def _assert_same(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], names: Sequence[str], against: str) -> None:
    assert len(actual) == len(expected)
    for got, want, name in zip(actual, expected, names):
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype, got.shape, want.shape)
        if got.dtype.kind == "f":
            assert_close(got, want, what=f"{name} against {against}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{name} against {against}")


@pytest.fixture(scope="module")
def kernels(jit_cache):
    model, inputs = kernels_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    return model, inputs, interpreter


def _allocated(model: bytes) -> tuple[bytes, Any]:
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    return model, interpreter


@pytest.fixture(scope="module")
def loop(jit_cache):
    return _allocated(loop_model())


@pytest.fixture(scope="module")
def reuse(jit_cache):
    return _allocated(reuse_model())


def _matches_litert_and_numpy(model: bytes, got: Sequence[np.ndarray], feed: Sequence[np.ndarray], names: Sequence[str]) -> None:
    litert = litert_interpreter(model)
    litert.allocate_tensors()
    _assert_same(got, run_interpreter(litert, feed), names, "LiteRT")
    numpy_engine = numlite.Interpreter(model_content=model, jit=False)
    numpy_engine.allocate_tensors()
    _assert_same(got, run_interpreter(numpy_engine, feed), names, "the NumPy engine")


def test_every_compiled_kernel_matches_litert_and_numpy(kernels):
    model, inputs, interpreter = kernels
    report = _compiled(interpreter)
    names = [d["name"] for d in interpreter.get_output_details()]
    assert report["operators"] == len(names)  # every node compiled
    for seed in (0, 1):  # twice: the second invoke reuses the arenas
        feed = [v if k > 1 else rng_floats(v.shape, 20 + 3 * seed + k) for k, v in enumerate(inputs)]
        _matches_litert_and_numpy(model, run_interpreter(interpreter, feed), feed, names)


def _same_error(interpreter: Any, model: bytes, feed: Sequence[np.ndarray]) -> str:
    """The InvokeError message of a compiled invoke, checked equal to the NumPy engine's."""
    with pytest.raises(InvokeError) as compiled:
        run_interpreter(interpreter, feed)
    numpy_engine = numlite.Interpreter(model_content=model, jit=False)
    numpy_engine.allocate_tensors()
    with pytest.raises(InvokeError) as reference:
        run_interpreter(numpy_engine, feed)
    assert str(compiled.value) == str(reference.value)
    return str(compiled.value)


def test_gather_position_out_of_range_raises_the_numpy_error(kernels):
    model, inputs, interpreter = kernels
    bad = [*inputs[:2], np.array([0, 1, 3, 0, 0], np.int32), *inputs[3:]]
    assert "(GATHER) failed: gather index 3 is out of range [0, 3)" in _same_error(interpreter, model, bad)
    assert len(run_interpreter(interpreter, inputs)) > 0  # the next invoke runs normally


@pytest.mark.parametrize("n, k", [(0, 0), (1, 5), (7, 2), (40, 3)])
def test_compiled_loop_with_if_matches_litert_and_numpy(loop, n, k):
    model, interpreter = loop
    assert _compiled(interpreter)["subgraphs"] == [0, 1, 2, 3, 4]
    feed = [np.int32(n), rng_floats((4,), n), np.int32(k)]
    got = run_interpreter(interpreter, feed)
    _matches_litert_and_numpy(model, got, feed, ["i", "v"])
    assert got[0] == max(n, 0)


def test_error_inside_a_compiled_loop_names_each_node(loop):
    model, interpreter = loop
    message = _same_error(interpreter, model, [np.int32(3), rng_floats((4,), 0), np.int32(6)])
    assert message.startswith("subgraph 0, node 0 (WHILE) failed: subgraph 2, node 3 (GATHER) failed: gather index 6")


def test_cancel_stops_a_long_compiled_loop(loop):
    model, interpreter = loop
    for d, value in zip(interpreter.get_input_details(), [np.int32(2**31 - 1), rng_floats((4,), 0), np.int32(1)]):
        interpreter.set_tensor(d["index"], value)
    timer = threading.Timer(0.3, interpreter.cancel)
    started = time.perf_counter()
    timer.start()
    with pytest.raises(CancelledError, match=r"subgraph 0, node 0 \(WHILE\)"):
        interpreter.invoke()  # ~10^3 s of iterations uncancelled
    timer.join()
    assert time.perf_counter() - started < 30
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], np.int32(5))
    interpreter.invoke()  # runs normally again
    assert interpreter.get_tensor(interpreter.get_output_details()[0]["index"]) == 5


def test_second_process_loads_the_compiled_module_from_the_cache(loop, jit_cache, tmp_path):
    model, interpreter = loop
    path = tmp_path / "loop.tflite"
    path.write_bytes(model)
    script = (
        "import numpy as np, numlite\n"
        f"it_path = {str(path)!r}\n"
        "it = numlite.Interpreter(model_path=it_path, jit=True)\n"
        "it.allocate_tensors()\n"
        "r = it.jit_report()['subgraphs'][0]\n"
        "auto = numlite.Interpreter(model_path=it_path, jit='auto')\n"
        "auto.allocate_tensors()\n"
        "auto._jit.wait(120)\n"
        "print(r['compiled'], r['cache_hit'], r['module'], auto.jit_report()['subgraphs'][0]['compiled'])\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(numlite.__file__)))
    env = {**os.environ, "NUMLITE_CACHE_DIR": jit_cache, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    compiled, cache_hit, module, auto_compiled = done.stdout.split()
    assert (compiled, cache_hit, auto_compiled) == ("True", "True", "True"), done.stdout
    assert module == interpreter.jit_report()["subgraphs"][0]["module"]
    assert os.path.dirname(module) == os.path.join(jit_cache, "jit")


def test_the_cache_index_keys_on_what_changes_the_generated_kernels(monkeypatch):
    """A module generated for the byte tiles (AVX512-VNNI) calls kernels another machine may
    lack: the model's index key holds the machine's AVX-512 and VNNI, and NUMLITE_JIT_LANES,
    so a shared cache folder or a run with the variable finds its own module."""
    from numlite.jit import cache

    def key() -> str:
        cache._target.cache_clear()
        return cache.index_key("model", 0, ((1, 4),))

    monkeypatch.delenv("NUMLITE_JIT_LANES", raising=False)
    plain = key()
    monkeypatch.setenv("NUMLITE_JIT_LANES", "8")
    assert key() != plain
    monkeypatch.delenv("NUMLITE_JIT_LANES")
    assert key() == plain
    other = "+avx512f;lanes=" if "+avx512vnni" in cache._target() else "+avx512f,+avx512vnni;lanes="
    monkeypatch.setattr(cache, "_target", lambda: other)  # a machine with or without VNNI, unlike this one
    assert cache.index_key("model", 0, ((1, 4),)) != plain


def test_auto_compiles_a_hot_model_in_the_background(jit_cache, monkeypatch):
    from numlite.jit import engine

    g = Graphs()
    m = g.subgraph()
    x = m.input((5,))
    m.op("MUL", [m.op("ADD", [x, m.const(0.5)], (5,), options=Options("AddOptions"), output=False), x], (5,),
         options=Options("MulOptions"))
    monkeypatch.setattr(engine, "AUTO_HOT_SECONDS", 0.0)
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit="auto")
    interpreter.allocate_tensors()
    feed = [rng_floats((5,), 4)]
    first = run_interpreter(interpreter, feed)
    assert not interpreter.jit_report()["subgraphs"]  # never compiled: nothing until it is hot
    for _ in range(engine.AUTO_MIN_INVOKES):
        run_interpreter(interpreter, feed)
    interpreter._jit.wait(120)
    report = _compiled(interpreter)
    # compiled by a child process (the GIL stays free for NumPy invokes), loaded from the cache
    assert report["compiled_in_child"] and report["cache_hit"], report
    _assert_same(run_interpreter(interpreter, feed), first, ["y"], "its NumPy invokes")


def test_auto_drops_the_numpy_weights_after_the_switch_and_prepares_them_for_numpy(jit_cache, monkeypatch):
    """Under ``"auto"`` the NumPy engine ran the convolutions (their laid-out weights in use)
    before the switch; by the second compiled invoke they are released, and a watched invoke
    afterwards (NumPy) prepares them again. Every result against LiteRT."""
    from numlite.jit import engine

    g = Graphs()
    m = g.subgraph()
    x = m.input((1, 8, 7, 5))
    y = m.op("CONV_2D", [x, m.const(rng_floats((12, 3, 3, 5), 1)), m.const(rng_floats((12,), 2))], (1, 8, 7, 12),
             options=Options("Conv2DOptions", padding=0, stride_h=1, stride_w=1), output=False)  # fmt: skip
    m.op("DEPTHWISE_CONV_2D", [y, m.const(rng_floats((1, 3, 3, 12), 3)), m.const(rng_floats((12,), 4))], (1, 8, 7, 12),
         options=Options("DepthwiseConv2DOptions", padding=0, stride_h=1, stride_w=1, depth_multiplier=1))  # fmt: skip
    model = g.bytes()
    monkeypatch.setattr(engine, "AUTO_HOT_SECONDS", 0.0)
    interpreter = numlite.Interpreter(model_content=model, jit="auto")
    interpreter.allocate_tensors()
    litert = litert_interpreter(model)
    litert.allocate_tensors()
    runtime = interpreter._subgraphs[0]

    def check(feed: list[np.ndarray], against: str) -> None:
        for d, value in zip(interpreter.get_input_details(), feed):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        got = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        _assert_same(got, run_interpreter(litert, feed), ["y"], f"LiteRT ({against})")

    for k in range(engine.AUTO_MIN_INVOKES):
        check([rng_floats((1, 8, 7, 5), 10 + k)], "NumPy, before the switch")
    interpreter._jit.wait(120)
    assert _compiled(interpreter)["compiled"] and runtime.released == {}
    for k in range(2):
        check([rng_floats((1, 8, 7, 5), 20 + k)], "compiled")
    assert sorted(runtime.plan[i].op_name for i in runtime.released) == ["CONV_2D", "DEPTHWISE_CONV_2D"]
    interpreter.check_cancelled = lambda: False
    check([rng_floats((1, 8, 7, 5), 30)], "NumPy, after the release")
    assert runtime.released == {}
    interpreter.check_cancelled = None
    check([rng_floats((1, 8, 7, 5), 31)], "compiled again")


def test_auto_loads_a_model_compiled_before_at_allocate(loop):
    model, compiled = loop
    interpreter = numlite.Interpreter(model_content=model, jit="auto")
    interpreter.allocate_tensors()  # the cache's index knows this model: loading starts now
    interpreter._jit.wait(120)
    feed = [np.int32(6), rng_floats((4,), 6), np.int32(2)]
    got = run_interpreter(interpreter, feed)
    assert _compiled(interpreter)["module"] == compiled.jit_report()["subgraphs"][0]["module"]
    _assert_same(got, run_interpreter(compiled, feed), ["i", "v"], "jit=True")


def test_resize_recompiles_and_uncovered_models_stay_on_numpy(jit_cache):
    g = Graphs()
    m = g.subgraph()
    x, y = m.input((2,)), m.input((2,))
    m.op("ADD", [x, y], (2,), options=Options("AddOptions"))
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True)
    interpreter.allocate_tensors()
    first = _compiled(interpreter)["module"]
    for d in interpreter.get_input_details():
        interpreter.resize_tensor_input(d["index"], (3,))
    interpreter.allocate_tensors()
    assert _compiled(interpreter)["module"] == first  # sizes are run-time values of the same code (codegen.lift)
    got = run_interpreter(interpreter, [np.float32([1, 2, 3]), np.float32([0.5, 0.25, 4])])
    np.testing.assert_array_equal(got[0], np.float32([1.5, 2.25, 7]))

    m.op("BITCAST", [x], (3,), np.int32)  # no compiled kernel yet
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert not report["compiled"] and "node 1 (BITCAST): no compiled kernel" in report["reason"]
    assert len(run_interpreter(interpreter, [np.float32([1, 2]), np.float32([3, 4])])) == 2

    g = Graphs()  # quantized int8 DIV has no compiled kernel (tests/test_jit_quantized.py has those): NumPy engine
    m = g.subgraph()
    x, y = m.input((2,), np.int8), m.input((2,), np.int8)
    out = m.op("DIV", [x, y], (2,), np.int8, options=Options("DivOptions"))
    for t, scale in ((x, 0.5), (y, 0.25), (out, 0.5)):
        m.graph.tensors[t].quantization = Quantization(scale=np.float32([scale]), zero_point=np.int64([0]))
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert not report["compiled"] and "node 0 (DIV): no compiled kernel for DIV on quantized operands" in report["reason"]


def test_repeated_invokes_take_the_lean_path_and_notice_every_change(jit_cache, monkeypatch):
    """Once a compiled model has run plainly, ``invoke`` calls one closure
    (``CompiledModel.lean``) that checks nothing changed: a re-allocation, a resize, a profiler,
    check_cancelled and a cancel() between invokes each take the full path again, with the
    right results."""
    from numlite.interpreter.profiler import profile
    from numlite.jit import engine as jit_engine

    g = Graphs()
    m = g.subgraph()
    x, y = m.input((2,)), m.input((2,))
    m.op("MUL", [x, y], (2,), options=Options("MulOptions"))
    interpreter = numlite.Interpreter(model_content=g.bytes(), jit=True)
    interpreter.allocate_tensors()
    events: list[str] = []
    monkeypatch.setattr(jit_engine, "OBSERVERS", [lambda event, manager, root: events.append(event)])
    manager = interpreter._jit
    (a, b), (out,) = ([d["index"] for d in details] for details in (interpreter.get_input_details(), interpreter.get_output_details()))

    def product(u: list[float], v: list[float]) -> np.ndarray:
        interpreter.set_tensor(a, np.float32(u))
        interpreter.set_tensor(b, np.float32(v))
        interpreter.invoke()
        return interpreter.get_tensor(out)

    assert manager.lean is None
    np.testing.assert_array_equal(product([1, 2], [3, 4]), np.float32([3, 8]))  # binds the arrays: the full path
    lean = manager.lean
    assert lean is not None
    np.testing.assert_array_equal(product([5, 6], [7, 8]), np.float32([35, 48]))
    np.testing.assert_array_equal(product([1, 3], [2, 2]), np.float32([2, 6]))
    assert manager.lean is lean and events == ["ran compiled"] * 3

    interpreter.allocate_tensors()  # prepared again, same shapes: the closure runs nothing
    assert not lean()
    np.testing.assert_array_equal(product([2, 3], [2, 2]), np.float32([4, 6]))
    for index in (a, b):
        interpreter.resize_tensor_input(index, (3,))
    interpreter.allocate_tensors()
    np.testing.assert_array_equal(product([1, 2, 3], [2, 2, 2]), np.float32([2, 4, 6]))
    np.testing.assert_array_equal(product([1, 2, 3], [3, 3, 3]), np.float32([3, 6, 9]))
    assert manager.lean is not None and manager.lean is not lean

    events.clear()
    with profile(interpreter) as prof:  # a profiled invoke runs on NumPy
        np.testing.assert_array_equal(product([1, 1, 1], [4, 5, 6]), np.float32([4, 5, 6]))
    assert [e.op for e in prof.events if e.kind == "op"] == ["MUL"] and "ran compiled" not in events
    interpreter.check_cancelled = lambda: False
    np.testing.assert_array_equal(product([1, 1, 2], [4, 5, 6]), np.float32([4, 5, 12]))
    assert "ran compiled" not in events
    interpreter.check_cancelled = None
    interpreter.cancel()  # before the invoke: it does not stop it
    np.testing.assert_array_equal(product([2, 2, 2], [4, 5, 6]), np.float32([8, 10, 12]))
    assert events[-1] == "ran compiled" and manager.lean is not None


def test_an_input_a_node_overwrites_is_the_output_read_back(jit_cache):
    """A graph input that a node writes and that is also a graph output (a forged model: fuzz case
    3798): the interpreter has one array for it, so get_tensor reads what the node wrote, as in LiteRT."""
    g = Graphs()
    m = g.subgraph()
    x, y = m.input((3,)), m.input((3,))
    z = m.op("ADD", [x, y], (3,), options=Options("AddOptions"))  # reads y before it is overwritten
    m.graph.operators.append(Operator(g.opcode("TANH"), [z], [y]))
    m.graph.outputs.append(y)
    model, interpreter = _allocated(g.bytes())
    _compiled(interpreter)
    feed = [rng_floats((3,), 50), rng_floats((3,), 51)]
    got = run_interpreter(interpreter, feed)
    _matches_litert_and_numpy(model, got, feed, ["z", "y"])
    assert_close(got[1], np.tanh(got[0]), what="y, written over the input")  # not the input read back


def test_without_numba_everything_runs_on_numpy(monkeypatch, loop):
    model, _ = loop
    monkeypatch.setattr(jit, "_probe", (False, "numba cannot be imported (test)"))
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()
    assert report["numba"] == "unavailable: numba cannot be imported (test)" and not report["subgraphs"][0]["compiled"]
    got = run_interpreter(interpreter, [np.int32(4), rng_floats((4,), 5), np.int32(0)])
    assert got[0] == 4
    monkeypatch.setenv("NUMLITE_JIT", "0")
    assert numlite.Interpreter(model_content=model, jit=True).jit_report() == {"mode": False, "subgraphs": {}}
    monkeypatch.setenv("NUMLITE_JIT", "1")
    assert numlite.Interpreter(model_content=model).jit_report()["mode"] is True


def test_control_flow_models_of_the_converter_compile_and_match(jit_cache):
    """The loops test_control_flow.py converts with the official converter: a permutation of the
    loop variables, bool and int64 state, a constant from the body, an IF in a WHILE (i % 3),
    a WHILE in a WHILE. Judged against TensorFlow (LiteRT gets permutations wrong, see
    test_control_flow.py) and the NumPy engine, over several loop counts on one interpreter."""
    import tensorflow as tf
    import test_control_flow as cf
    from helpers import convert

    S = tf.TensorSpec
    cases = {
        "swap": (cf._swap, [S((), tf.int32), S((3,), tf.float32), S((3,), tf.float32)], ("buffers", "swap")),
        "bool_and_int64_state": (cf._bool_and_int64_state, [S((), tf.int32), S((3,), tf.float32)], ("buffers", "bool_and_int64_state")),
        "constant_from_body": (cf._constant_from_body, [S((), tf.int32), S((3,), tf.float32)], ("buffers", "constant_from_body")),
        "cond_in_while": (cf._cond_in_while, [S((), tf.int32), S((4,), tf.float32)], "cond_in_while"),
        "while_in_while": (cf._while_in_while, [S((), tf.int32), S((), tf.int32), S((2, 3), tf.float32)], "while_in_while"),
    }
    for name, (fn, specs, key) in cases.items():
        model = convert(fn, specs, key=key)
        interpreter = numlite.Interpreter(model_content=model, jit=True)
        interpreter.allocate_tensors()
        _compiled(interpreter)
        numpy_engine = numlite.Interpreter(model_content=model, jit=False)
        numpy_engine.allocate_tensors()
        for n in (0, 1, 7):
            feed = [np.array(n if s.shape == () and s.dtype == tf.int32 else 0, np.int32) if s.dtype == tf.int32
                    else rng_floats(s.shape, n, -1, 1) for s in specs]
            if name == "while_in_while":
                feed[1] = np.int32(n + 2)
            got = run_interpreter(interpreter, feed)
            labels = [f"{name} n={n} output {k}" for k in range(len(got))]
            _assert_same(got, run_interpreter(numpy_engine, feed), labels, "the NumPy engine")
            _assert_same(got, cf.tf_outputs(fn, feed), labels, "TensorFlow")


def test_lifetimes_reaching_into_a_loop_cover_the_whole_loop():
    """t1 is read in every iteration, so t3 (written later in the loop) may not take its bytes
    though t1's last line comes before t3's first; t4 (after the loop) may."""
    from numlite.jit.codegen import Arenas

    arenas = Arenas()
    t1, t2, t3, t4 = (arenas.alloc(np.float32, 16) for _ in range(4))
    lines = ["    t1[0] = 1", "    while True:", "        t2[0] = t1[0]", "        t3[0] = t2[0]", "        break", "    t4[0] = t3[0]"]
    arenas.plan(lines, {t1, t2, t3, t4}, set())
    at = arenas.offsets
    assert len({at[t1], at[t2], at[t3]}) == 3 and at[t4] in (at[t1], at[t2])
    assert arenas.arena_bytes == 3 * 64


def test_tensors_share_the_arena_and_match_litert_and_numpy(reuse):
    model, interpreter = reuse
    report = _compiled(interpreter)
    arenas = interpreter._jit.engines[0].arenas
    assert report["arena_bytes"] < sum(s.size * arenas.dtypes[s.arena].itemsize for s in arenas.offsets)  # memory shared
    assert report["constant_bytes"] == 0 and report["shared_constant_bytes"] == 4 * (32 + 1 + 32) + 2 * 4  # read in place
    for n in (0, 1, 6):
        feed = [rng_floats((32,), 30 + n), np.int32(n)]
        _matches_litert_and_numpy(model, run_interpreter(interpreter, feed), feed, ["i", "v"])


def test_inputs_and_outputs_are_the_arena_itself(reuse):
    """set_tensor writes the compiled model's input and get_tensor copies its output (no copies
    in invoke); inputs stay set across invokes and re-allocations; a watched invoke runs the
    NumPy engine on the same arrays."""
    model, interpreter = reuse
    x, n = (d["index"] for d in interpreter.get_input_details())
    v = interpreter.get_output_details()[1]["index"]
    first = run_interpreter(interpreter, [rng_floats((32,), 40), np.int32(4)])[1]
    engine = interpreter._jit.engines[0]
    live = interpreter.tensor(v)
    assert all(np.shares_memory(interpreter.tensor(t)(), engine.A[0]) for t in (x, v))
    interpreter.invoke()  # the inputs are still set
    np.testing.assert_array_equal(interpreter.get_tensor(v), first)
    interpreter.allocate_tensors()  # rebinds to new arenas: the inputs move with them
    interpreter.invoke()
    np.testing.assert_array_equal(interpreter.get_tensor(v), first)
    interpreter.set_tensor(n, np.int32(2))
    interpreter.invoke()
    second = interpreter.get_tensor(v)
    assert not np.array_equal(second, first)
    np.testing.assert_array_equal(live(), second)  # tensor() is the arena's view
    interpreter.check_cancelled = lambda: False  # watched: this invoke runs on NumPy
    try:
        interpreter.set_tensor(n, np.int32(4))
        interpreter.invoke()
        assert_close(interpreter.get_tensor(v), first, what="the NumPy engine on the arena's arrays")
    finally:
        interpreter.check_cancelled = None


@pytest.mark.skipif(not denormals.SUPPORTED, reason="no FTZ/DAZ control on this platform")
def test_compiled_code_flushes_denormals_and_restores_the_callers_mode(jit_cache, loop):
    """As the NumPy engine (tests/test_denormals.py): LiteRT's default kernels read denormals
    as zero, its builtin ones compute with them, and the caller's mode is left as it was,
    also after a compiled invoke that failed."""
    g = Graphs()
    m = g.subgraph()
    m.op("MUL", [m.input((4,)), m.const(1e30)], (4,), options=Options("MulOptions"))
    model = g.bytes()
    denormal = np.array([1e-40, -3e-39, 1e-38, 1.0], np.float32)
    for flush, builtin_only in ((True, False), (False, True)):
        interpreter = numlite.Interpreter(model_content=model, jit=True, flush_denormals=flush)
        got = run_interpreter(interpreter, [denormal])[0]
        _compiled(interpreter)
        expected = run_interpreter(litert_interpreter(model, builtin_only=builtin_only), [denormal])[0]
        assert (expected[0] == 0) == flush  # LiteRT flushes with its default kernels only
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0, err_msg=f"flush_denormals={flush}")  # no atol: the values are 1e-10
        assert np.float32(1e-40) * np.float32(1e30) != 0
    _, looping = loop
    with pytest.raises(InvokeError):
        run_interpreter(looping, [np.int32(3), rng_floats((4,), 0), np.int32(6)])  # fails inside the compiled loop
    assert np.float32(1e-40) * np.float32(1e30) != 0


def test_preserve_all_tensors_stays_on_numpy(reuse):
    model, _ = reuse
    interpreter = numlite.Interpreter(model_content=model, jit=True, experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert not report["compiled"] and "experimental_preserve_all_tensors" in report["reason"]
    assert run_interpreter(interpreter, [rng_floats((32,), 3), np.int32(2)])[0] == 2


def _add_relu6(batch: int, width: int) -> tuple[bytes, np.ndarray]:
    """ADD of a [batch, width] input and a broadcast constant, with a fused RELU6 (floats in the
    source: the clamp's bounds), and a feed."""
    g = Graphs()
    m = g.subgraph()
    x = m.input((batch, width))
    m.op("ADD", [x, m.const(rng_floats((width,), width))], (batch, width), options=Options("AddOptions", fused_activation_function=3))  # RELU6
    return g.bytes(), rng_floats((batch, width), batch, -8.0, 8.0)


def test_models_of_one_structure_share_one_compile(jit_cache, monkeypatch):
    """Sizes, offsets and scalar constants are run-time values (codegen.lift): two models of one
    structure and other sizes generate the same source, and the second does not compile; a
    resize to another batch keeps the compiled code. Each matches LiteRT."""
    from numlite.jit import engine as jit_engine

    compiled: list[Any] = []
    monkeypatch.setattr(jit_engine, "OBSERVERS", [lambda event, manager, root: event == "compiled" and compiled.append(manager.last[root])])
    first, second = _add_relu6(2, 3), _add_relu6(5, 7)
    models = []
    for model, feed in (first, second):
        interpreter = numlite.Interpreter(model_content=model, jit=True)
        interpreter.allocate_tensors()
        got = run_interpreter(interpreter, [feed])
        assert_close(got[0], run_interpreter(litert_interpreter(model), [feed])[0])
        models.append(_compiled(interpreter))
    assert len(compiled) == 2 and compiled[0].source == compiled[1].source and compiled[0].numbers.tolist() != compiled[1].numbers.tolist()
    assert models[0]["module"] == models[1]["module"] and models[1]["reused"]

    model, _ = first  # resized to another batch: the compiled model is kept, with new sizes
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    built = compiled[-1]
    feed = rng_floats((6, 3), 6, -8.0, 8.0)
    got = run_interpreter(interpreter, [feed])  # resizes, then allocates
    assert compiled[-1] is built and interpreter.jit_report()["subgraphs"][0]["compiled"]
    assert_close(got[0], run_interpreter(litert_interpreter(model), [feed])[0])


def test_a_cold_compile_is_shared_out_heaviest_first(monkeypatch):
    """numlite.jit.kernels.loops.share: the model's function and the loop kernels' entry points
    that are not cached yet go to the least loaded of the workers, heaviest first; the model's
    worker comes first (the caller's process takes it under jit=True)."""
    from numlite.jit.kernels import loops
    from numlite.jit.kernels.conv import KIND_CONV, KIND_DEPTHWISE
    from numlite.jit.kernels.pad import KIND as PAD

    monkeypatch.setattr(loops, "COST", {KIND_CONV: 6.0, KIND_DEPTHWISE: 4.0, PAD: 1.0})
    needed = [(False, PAD), (False, KIND_CONV), (False, KIND_DEPTHWISE)]
    # model 6.5 and CONV_2D 6 each open a worker; DEPTHWISE (4) joins the lighter (6), PAD (1) the model's
    assert loops.share(needed, model_cost=6.5, workers=2) == [(True, [(False, PAD)]), (False, [(False, KIND_CONV), (False, KIND_DEPTHWISE)])]
    assert loops.share(needed, model_cost=0.0, workers=2) == [(False, [(False, KIND_CONV)]), (False, [(False, KIND_DEPTHWISE), (False, PAD)])]
    assert loops.share(needed, model_cost=0.0, workers=1) == [(False, sorted(needed))]
    assert loops.share([], model_cost=1.0, workers=2) == [(True, [])]


def broadcast_model() -> tuple[bytes, list[np.ndarray]]:
    """Broadcasting element-wise nodes of the forms users' models hold: a squeeze-and-excite
    gate ``[1, h, w, c] * [1, 1, 1, c]``, a per-pixel mask ``[1, h, w, 1]`` (with a fused
    RELU6), a column against a row, a lower-rank operand, int32 and SELECT_V2; and one whose
    operand broadcasts in the middle dimension, which no two loops fit (an index map)."""
    g = Graphs()
    m = g.subgraph()
    fused = lambda name, act=0: Options(name, fused_activation_function=act)  # noqa: E731
    image, gate, mask = m.input((1, 6, 5, 8)), m.input((1, 1, 1, 8)), m.input((1, 6, 5, 1))
    m.op("MUL", [image, gate], (1, 6, 5, 8), options=fused("MulOptions"))
    m.op("ADD", [image, mask], (1, 6, 5, 8), options=fused("AddOptions", 3))
    column, row = m.input((7, 1)), m.input((1, 9))
    m.op("SUB", [column, row], (7, 9), options=fused("SubOptions"))
    cube, plane = m.input((2, 3, 4)), m.input((3, 4))
    m.op("MUL", [plane, cube], (2, 3, 4), options=fused("MulOptions"))
    ints, int_row = m.input((4, 6), np.int32), m.input((6,), np.int32)
    m.op("ADD", [ints, int_row], (4, 6), np.int32, options=fused("AddOptions"))
    condition = m.input((1, 6, 5, 1), np.bool_)
    m.op("SELECT_V2", [condition, image, gate], (1, 6, 5, 8))
    middle = m.input((2, 1, 4))
    m.op("MUL", [cube, middle], (2, 3, 4), options=fused("MulOptions"))
    rng = np.random.default_rng(5)
    inputs = [rng_floats((1, 6, 5, 8), 50, -8, 8), rng_floats((1, 1, 1, 8), 51), rng_floats((1, 6, 5, 1), 52),
              rng_floats((7, 1), 53), rng_floats((1, 9), 54), rng_floats((2, 3, 4), 55), rng_floats((3, 4), 56),
              rng.integers(-50, 50, (4, 6)).astype(np.int32), rng.integers(-50, 50, 6).astype(np.int32),
              rng.integers(0, 2, (1, 6, 5, 1)).astype(np.bool_), rng_floats((2, 1, 4), 57)]
    return g.bytes(), inputs


def test_broadcasting_runs_as_two_loops_without_index_maps(jit_cache):
    """Broadcast operands that two nested loops fit are read at the loops' counters (no index map
    of the output's size, 8 bytes an element), the others through a map: LiteRT's and the NumPy
    engine's results either way."""
    model, inputs = broadcast_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    report = _compiled(interpreter)
    assert report["operators"] == 7
    source = interpreter._jit.engines[0].source
    assert source.count("for io in range(") == 6, source
    assert source.count("for i in range(") == 1, source  # the middle broadcast
    assert report["constant_bytes"] == 2 * 3 * 4 * 8, report  # its index map, and no other
    names = [d["name"] for d in interpreter.get_output_details()]
    _matches_litert_and_numpy(model, run_interpreter(interpreter, inputs), inputs, names)
