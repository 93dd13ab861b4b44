"""numlite.jit with shapes known only at run time: loops the official converter makes from
TensorLists (map_fn, TensorArray), a WHILE state that grows (``shape_invariants``), Keras 3
LSTM/GRU loops (SPLIT), each compiled and compared with LiteRT and TensorFlow; the run-time
checks of SLICE bounds and RESHAPE counts, which must raise the NumPy engine's very error; an
output whose shape changes from invoke to invoke; cancelling a compiled loop that grows.

Numba compiles slowly, so each model is compiled once for the module (``compiled``) and its
tests share it; the models come from the session's conversion cache (tests/helpers.py)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
import pytest
from helpers import assert_close, convert, litert_interpreter, run_interpreter
from test_jit import Graphs, jit_cache  # noqa: F401 (jit_cache: the module's compile cache, a fixture)

import numlite
from numlite.errors import CancelledError, NumliteError
from numlite.model.ir import Operator, Options

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

ROWS, WIDTH = 50, 16


def _map_fn(x):
    return tf.map_fn(lambda r: tf.tanh(r) * 2.0, x)


def _tensor_array(x):
    rows = tf.TensorArray(tf.float32, size=ROWS)
    _, rows = tf.while_loop(lambda i, rows: i < ROWS, lambda i, rows: (i + 1, rows.write(i, x * tf.cast(i, tf.float32))), [0, rows])
    return rows.stack()


def _grow(x, n, limit):
    """A row appended ``n`` times, or until there are ``limit`` rows: the cond reads the shape of
    the growing state (a SHAPE the runtime folds for the initial shape, computed in the loop)."""

    def body(i, acc):
        return i + 1, tf.concat([acc, acc[-1:] * 0.5 + 1.0], 0)

    invariants = [tf.TensorShape([]), tf.TensorShape([None, 4])]
    cond = lambda i, acc: tf.logical_and(i < n, tf.shape(acc)[0] < limit)  # noqa: E731
    return tf.while_loop(cond, body, [0, x], shape_invariants=invariants)[1]


def _floats(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


# name -> (function, input signature, inputs); the TensorList loops and the growing state
FUNCTIONS: dict[str, tuple[Callable, list, list[np.ndarray]]] = {
    "map_fn": (_map_fn, [tf.TensorSpec((ROWS, WIDTH), tf.float32)], [_floats((ROWS, WIDTH), 1)]),
    "tensor_array": (_tensor_array, [tf.TensorSpec((WIDTH,), tf.float32)], [_floats((WIDTH,), 3)]),
    "grow": (_grow, [tf.TensorSpec((1, 4), tf.float32), tf.TensorSpec((), tf.int32), tf.TensorSpec((), tf.int32)],
             [_floats((1, 4), 4), np.int32(30), np.int32(20)]),  # stops at 20 rows
}


def _keras(kind: str) -> tuple[bytes, Any]:
    """A Keras 3 LSTM(32) or GRU(32) over 20 steps of 8 features, batch 1, and its conversion
    (built here, not taken from the session's cache: the model itself gives the expected
    values; the module builds it once)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((20, 8), batch_size=1)
    model = keras.Model(inputs, {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[kind](32)(inputs))
    return tf.lite.TFLiteConverter.from_keras_model(model).convert(), model


_COMPILED: dict[str, tuple[bytes, Any, list[np.ndarray], list[np.ndarray]]] = {}


@pytest.fixture(scope="module")
def compiled(jit_cache):  # noqa: F811 (the fixture imported above)
    """name -> (model, its compiled interpreter, inputs, TensorFlow's outputs); built on first
    use, once for the module."""

    def get(name: str):
        if name not in _COMPILED:
            if name in FUNCTIONS:
                fn, specs, inputs = FUNCTIONS[name]
                model = convert(fn, specs, key=("jit-dynamic", name))
                expected = [np.asarray(fn(*[tf.constant(v) for v in inputs]))]
            else:
                model, keras_model = _keras(name.split("_")[1])
                inputs = [_floats((1, 20, 8), 5)]
                expected = [np.asarray(keras_model(inputs[0]))]
            interpreter = numlite.Interpreter(model_content=model, jit=True)
            interpreter.allocate_tensors()
            _COMPILED[name] = (model, interpreter, inputs, expected)
        return _COMPILED[name]

    return get


# Left to benchmarks/control_flow.py, to keep this file within its time budget (a compile
# costs 5-15 s on a loaded machine): scan, whose loop is map_fn's (a TensorList lowered to
# SLICE and CONCATENATION, a GATHER of the row), and keras_gru, whose ops are keras_lstm's.
@pytest.mark.parametrize("name", [*FUNCTIONS, "keras_lstm"])
def test_loop_of_run_time_shapes_runs_compiled_as_litert_and_tensorflow(compiled, name):
    model, interpreter, inputs, expected = compiled(name)
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    got = run_interpreter(interpreter, inputs)
    litert = litert_interpreter(model)
    litert.allocate_tensors()
    want = run_interpreter(litert, inputs)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        assert_close(g, w, what=f"{name} against LiteRT")
    assert len(expected) == len(got)
    for g, w in zip(got, expected):
        assert_close(g, w, what=f"{name} against TensorFlow")
    assert [list(d["shape"]) for d in interpreter.get_output_details()] == [list(d["shape"]) for d in litert.get_output_details()]


def test_output_shape_follows_the_loop_count_from_invoke_to_invoke(compiled):
    model, interpreter, inputs, _ = compiled("grow")
    litert = litert_interpreter(model)
    litert.allocate_tensors()
    for n in (0, 7, 3):
        feed = [inputs[0], np.int32(n), np.int32(1000)]
        got, want = run_interpreter(interpreter, feed)[0], run_interpreter(litert, feed)[0]
        assert got.shape == want.shape == (n + 1, 4)
        assert_close(got, want, what=f"grow by {n}")
        index = interpreter.get_output_details()[0]["index"]
        assert tuple(interpreter.get_output_details()[0]["shape"]) == (n + 1, 4)
        assert interpreter.tensor(index)().shape == (n + 1, 4)


def test_cancel_stops_a_compiled_loop_whose_state_grows(compiled):
    _, interpreter, inputs, _ = compiled("grow")
    details = interpreter.get_input_details()
    interpreter.set_tensor(details[0]["index"], inputs[0])
    for d in details[1:]:
        interpreter.set_tensor(d["index"], np.int32(2**31 - 1))  # hours of iterations, uncancelled
    timer = threading.Timer(0.3, interpreter.cancel)
    started = time.perf_counter()
    timer.start()
    with pytest.raises(CancelledError, match=r"subgraph 0, node 0 \(WHILE\)"):
        interpreter.invoke()
    timer.join()
    assert time.perf_counter() - started < 30
    interpreter.set_tensor(details[1]["index"], np.int32(2))  # n (the inputs keep the signature's order)
    interpreter.invoke()  # runs normally again
    assert interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).shape == (3, 4)


def _slice_reshape_model() -> bytes:
    """``part = x[5,4][begin : begin + (2, -1)]`` with ``begin`` an input (bounds known at run
    time), then, each an output: ``part`` reshaped to ``[-1, 3]`` (a count checked at run
    time), ``part`` and ``x[other : other + (1, -1)]`` concatenated on axis 0 (dims checked at
    run time), ``part[:, position]`` (GATHER on a run-time shape, its position checked), and
    the row squeezed and then expanded (SQUEEZE, EXPAND_DIMS on a run-time shape)."""
    g = Graphs()
    m = g.subgraph()
    x, begin, other, position = m.input((5, 4)), m.input((2,), np.int32), m.input((2,), np.int32), m.input((1,), np.int32)
    part = m.op("SLICE", [x, begin, m.const([2, -1], np.int32)], (2, 3))  # declared as for begin (i, 1)
    m.op("RESHAPE", [part, m.const([-1, 3], np.int32)], (2, 3))
    row = m.op("SLICE", [x, other, m.const([1, -1], np.int32)], (1, 3), output=False)
    m.op("CONCATENATION", [part, row], (3, 3), options=Options("ConcatenationOptions", axis=0))
    m.op("GATHER", [part, position], (2, 1), options=Options("GatherOptions", axis=1))
    squeezed = m.op("SQUEEZE", [row], (3,), options=Options("SqueezeOptions", squeeze_dims=[0]))
    m.op("EXPAND_DIMS", [squeezed, m.const(-1, np.int32)], (3, 1))
    return g.bytes()


def _split_pack_model() -> bytes:
    """SPLIT_V, UNPACK and PACK (the static layout emitters the Keras loops' SPLIT shares)."""
    g = Graphs()
    m = g.subgraph()
    x = m.input((2, 6, 3))
    parts = [m.tensor((2, size, 3)) for size in (1, 3, 2)]
    m.graph.operators.append(Operator(
        g.opcode("SPLIT_V"), [x, m.const([1, -1, 2], np.int32), m.const(1, np.int32)], parts,
        builtin_options=Options("SplitVOptions", num_splits=3)))
    m.graph.outputs.extend(parts)
    rows = [m.tensor((6, 3)) for _ in range(2)]
    m.graph.operators.append(Operator(
        g.opcode("UNPACK"), [x], rows, builtin_options=Options("UnpackOptions", num=2, axis=0)))
    m.graph.outputs.extend(rows)
    m.op("PACK", rows, (6, 2, 3), options=Options("PackOptions", values_count=2, axis=1))
    return g.bytes()


@pytest.fixture(scope="module")
def slicing(jit_cache):  # noqa: F811
    model = _slice_reshape_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    return model, interpreter


def _outcome(interpreter: Any, feed: list[np.ndarray]) -> Any:
    try:
        return run_interpreter(interpreter, feed)
    except NumliteError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("begin, other, position", [
    ((2, 1), (0, 1), 2), ((0, 1), (4, 1), 0),  # valid
    ((4, 0), (0, 0), 0), ((6, 0), (0, 0), 0), ((-1, 0), (0, 0), 0), ((0, 5), (0, 0), 0),  # SLICE bounds
    ((1, 0), (0, 0), 0),  # RESHAPE: 8 elements into rows of 3
    ((2, 1), (0, 2), 0),  # CONCATENATION: (2, 3) and (1, 2)
    ((2, 1), (0, 1), 3),  # GATHER: position 3 of 3
])
def test_run_time_bounds_and_counts_fail_as_on_numpy(slicing, begin, other, position):
    """Bounds from data (SLICE), element counts (RESHAPE), dims (CONCATENATION) and positions
    (GATHER) on run-time shapes are checked in compiled code, and a failure is the NumPy
    engine's error, word for word. Valid inputs give LiteRT's values and shapes."""
    model, interpreter = slicing
    assert interpreter.jit_report()["subgraphs"][0]["compiled"]
    feed = [np.arange(20, dtype=np.float32).reshape(5, 4), np.array(begin, np.int32), np.array(other, np.int32), np.array([position], np.int32)]
    numpy_engine = numlite.Interpreter(model_content=model, jit=False)
    numpy_engine.allocate_tensors()
    got, want = _outcome(interpreter, feed), _outcome(numpy_engine, feed)
    if isinstance(want, tuple):
        assert got == want
        return
    litert = litert_interpreter(model, builtin_only=True)  # (XNNPACK refuses the declared shapes)
    litert.allocate_tensors()
    for g, w in zip(got, run_interpreter(litert, feed)):
        assert g.shape == w.shape
        assert_close(g, w, what=f"slice at {begin}")


def test_messages_of_the_run_time_checks(slicing):
    _, interpreter = slicing
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    feed = lambda begin, other, position: [x, np.array(begin, np.int32), np.array(other, np.int32), np.array([position], np.int32)]  # noqa: E731
    assert _outcome(interpreter, feed((4, 0), (0, 0), 0)) == (
        "PrepareError", "subgraph 0, node 0 (SLICE): size 2 from begin 4 does not fit axis 0 of size 5")
    assert _outcome(interpreter, feed((1, 0), (0, 0), 0)) == (
        "PrepareError", "subgraph 0, node 1 (RESHAPE): cannot reshape 8 elements of shape (2, 4) to [2, 3]")
    assert _outcome(interpreter, feed((2, 1), (0, 2), 0)) == (
        "PrepareError", "subgraph 0, node 3 (CONCATENATION): shapes (2, 3) and (1, 2) differ outside axis 0")
    assert _outcome(interpreter, feed((2, 1), (0, 1), 3)) == (
        "InvokeError", "subgraph 0, node 4 (GATHER) failed: gather index 3 is out of range [0, 3)")


def test_split_v_unpack_and_pack_compiled(jit_cache):  # noqa: F811
    model = _split_pack_model()
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    assert interpreter.jit_report()["subgraphs"][0]["compiled"], interpreter.jit_report()
    feed = [_floats((2, 6, 3), 6)]
    litert = litert_interpreter(model)
    litert.allocate_tensors()
    for g, w in zip(run_interpreter(interpreter, feed), run_interpreter(litert, feed)):
        np.testing.assert_array_equal(g, w)  # elements moved, not computed
