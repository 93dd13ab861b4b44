"""Compiled invokes: a subgraph's plan runs as one generated function (``runtime.Program``),
control-flow ops call their callees' programs with their own buffers bound, and
``num_threads`` limits the BLAS pool during invoke. What must hold: the same results as LiteRT
on every invoke (the first ones take the loop path, later ones the compiled one), errors that
name the failing node, hooks (cancellation, profiling) still seeing every node."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf
from threadpoolctl import threadpool_info

import numlite
from numlite.interpreter.runtime import direct_call
from numlite.kernels import KERNELS, parallel
from numlite.kernels.base import copy_into, dot_into

from helpers import assert_close, convert, op_names, run_litert

S = tf.TensorSpec


def _nested(n, m, x):
    def inner(j, v):
        return j + 1, tf.tanh(v * 1.01 + 0.1)

    def body(i, v):
        v = tf.cond(tf.reduce_sum(v) > 0, lambda: v * 0.5 - 0.1, lambda: tf.abs(v) + 0.2)
        return i + 1, tf.while_loop(lambda j, v: j < m, inner, [tf.constant(0), v])[1]

    return tf.while_loop(lambda i, v: i < n, body, [tf.constant(0), x])[1]


@pytest.fixture(scope="module")
def nested_model():
    return convert(_nested, [S((), tf.int32), S((), tf.int32), S((16,), tf.float32)], key="programs-nested")


def _feed(interpreter, values):
    for d, v in zip(interpreter.get_input_details(), values):
        interpreter.set_tensor(d["index"], v)


def _inputs(model, n, m, seed):
    x = np.random.default_rng(seed).uniform(-1, 1, 16).astype(np.float32)
    by_name = {"n": np.int32(n), "m": np.int32(m), "x": x}
    details = numlite.Interpreter(model_content=model).get_input_details()
    return [np.asarray(by_name[d["name"].split(":")[0]], d["dtype"]) for d in details]


def test_repeated_invokes_match_litert(nested_model):
    """The main subgraph's loop path first, its compiled program after; the loops' programs
    with different counts and data each time."""
    interpreter = numlite.Interpreter(model_content=nested_model)
    interpreter.allocate_tensors()
    for k, (n, m) in enumerate([(3, 2), (4, 3), (1, 5), (6, 1), (5, 4), (0, 3), (7, 2)]):
        values = _inputs(nested_model, n, m, seed=k)
        _feed(interpreter, values)
        interpreter.invoke()
        actual = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        for a, e in zip(actual, run_litert(nested_model, values)):
            assert_close(a, e, what=f"invoke {k} (n={n}, m={m})")


def test_compiled_and_watched_invokes_agree(nested_model):
    """Profiling takes the hooked loop path: results are the same as the compiled path's, and
    the profiler sees every node of every callee."""
    values = _inputs(nested_model, 4, 3, seed=7)
    results = []
    for profile in (False, True):
        interpreter = numlite.Interpreter(model_content=nested_model, profile=profile)
        interpreter.allocate_tensors()
        _feed(interpreter, values)
        for _ in range(3):
            interpreter.invoke()
        results.append([interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()])
        if profile:
            counts = {}
            for e in interpreter.profiler.op_events:
                counts[e.op] = counts.get(e.op, 0) + 1
            assert counts["TANH"] == 3 * 4 * 3  # three invokes of 4 outer x 3 inner iterations
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def _failing_mul(calls_before_failure):
    calls = [0]

    def mul(a, b, **options):
        calls[0] += 1
        if calls[0] > calls_before_failure:
            raise ValueError("boom")
        return a * b

    return mul


def _third_invoke_error(model: bytes, n: int, mul) -> str:
    """The message of the InvokeError the third invoke raises, ``n`` iterations and a zero
    [4] vector in, with ``mul`` running the model's MUL."""
    interpreter = numlite.Interpreter(model_content=model, custom_ops={"MUL": mul})
    interpreter.allocate_tensors()
    _feed(interpreter, [np.int32(n), np.zeros(4, np.float32)])
    interpreter.invoke()
    interpreter.invoke()
    with pytest.raises(numlite.InvokeError) as info:
        interpreter.invoke()
    return str(info.value)


def test_error_in_compiled_loop_body_names_the_node():
    def f(n, x):
        return tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 3.0 + 1.0), [tf.constant(0), x])[1]

    model = convert(f, [S((), tf.int32), S((4,), tf.float32)], key="programs-failing-body")
    # Fail on the 30th MUL, in the third invoke: the WHILE runs its callees' programs from its
    # first eval on, and the main subgraph is compiled by then too.
    message = _third_invoke_error(model, 10, _failing_mul(29))
    assert message.startswith("subgraph 0, node 0 (WHILE) failed: subgraph 2, node")
    assert "(MUL) failed: ValueError: boom" in message


def test_error_in_compiled_main_subgraph_names_the_node():
    def f(x):
        return tf.nn.relu(x * 2.0) + 1.0

    model = convert(f, [S((4,), tf.float32)], key="programs-failing-main")
    interpreter = numlite.Interpreter(model_content=model, custom_ops={"MUL": _failing_mul(2)})
    interpreter.allocate_tensors()
    _feed(interpreter, [np.ones(4, np.float32)])
    interpreter.invoke()
    interpreter.invoke()  # the second invoke compiles the plan
    with pytest.raises(numlite.InvokeError, match=r"subgraph 0, node \d+ \(MUL\) failed: ValueError: boom"):
        interpreter.invoke()


def test_direct_calls_only_where_eval_is_the_kernel_class_own():
    """A subclass that overrides eval does not get its parent's one-call shortcut."""
    Add = KERNELS["ADD"].plain

    class Doubled(Add):
        def eval(self, ins, outs):
            super().eval(ins, outs)
            outs[0] *= 2

    a, b, out = np.ones(3, np.float32), np.ones(3, np.float32), np.empty(3, np.float32)
    for cls, expected in ((Add, np.add), (Doubled, None)):
        kernel = cls.__new__(cls)
        kernel.activation = None
        call = direct_call(kernel, [a, b], [out])
        assert (call[0] if call else None) is expected


def _blas_threads() -> int:
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def test_num_threads_limits_blas_during_invoke_only(monkeypatch):
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)  # idle cores: None keeps the pool's size
    seen = []

    def spy(a, b, **options):
        seen.append(_blas_threads())
        return a * b

    def f(x):
        return x * 3.0

    model = convert(f, [S((4,), tf.float32)], key="programs-threads")
    before = _blas_threads()
    for threads in (1, None):
        interpreter = numlite.Interpreter(model_content=model, num_threads=threads, custom_ops={"MUL": spy})
        interpreter.allocate_tensors()
        _feed(interpreter, [np.ones(4, np.float32)])
        interpreter.invoke()
        assert _blas_threads() == before  # restored after the invoke
    assert seen == [1, before]


def test_loop_programs_follow_reallocation():
    """Resizing the input re-prepares the WHILE (new scratch buffers, new callee memory): its
    cached programs must not keep writing into the old ones."""

    def f(n, x):
        return tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + 1.0), [tf.constant(0), x])[1]

    model = convert(f, [S((), tf.int32), S((None,), tf.float32)], key="programs-resized-loop")
    interpreter = numlite.Interpreter(model_content=model)
    x_index = interpreter.get_input_details()[1]["index"]
    for size, n in [(4, 3), (4, 2), (6, 5), (6, 4), (4, 3), (4, 6)]:
        interpreter.resize_tensor_input(x_index, [size])
        interpreter.allocate_tensors()
        values = [np.int32(n), np.linspace(-1, 1, size, dtype=np.float32)]
        for _ in range(2):  # the second invoke runs the compiled main subgraph
            _feed(interpreter, values)
            interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        litert = run_litert_resized(model, values)
        assert_close(actual, litert, what=f"size {size}, n {n}")


def run_litert_resized(model, values):
    from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

    interpreter = LiteRTInterpreter(model_content=model)
    interpreter.resize_tensor_input(interpreter.get_input_details()[1]["index"], list(values[1].shape))
    interpreter.allocate_tensors()
    _feed(interpreter, values)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def _cell_loop(xs, w, u, b):
    """A hand-written LSTM cell over the time steps of ``xs`` (the official converter's shape
    of loop: GATHER by the step, two FULLY_CONNECTED, a bias broadcast, SPLIT, LOGISTIC, TANH,
    RESHAPE, though the official converter drops the reshapes); the recurrent weights ``u`` are
    a loop variable, so not a constant in the body (a BATCH_MATMUL)."""

    def body(t, h, c, u):
        z = tf.matmul(tf.reshape(tf.gather(xs, t), (1, -1)), w) + tf.matmul(h, u) + b
        i, f, g, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.reshape(tf.sigmoid(o) * tf.tanh(c), (1, -1))
        return t + 1, h, c, u * 1.0

    steps = tf.shape(xs)[0]
    zeros = tf.zeros((1, 8))
    return tf.while_loop(lambda t, h, c, u: t < steps, body, [tf.constant(0), zeros, zeros, u])[1]


def test_small_op_fast_paths_in_a_loop_body_match_litert():
    """FULLY_CONNECTED, SPLIT, LOGISTIC and broadcasting ADD run in a compiled loop body as one
    call each (``direct``), on views made when the program is built; GATHER of one
    position indexes directly. Repeated invokes (loop path first, then compiled) and new inputs
    must keep matching LiteRT, and large negative gates (exp overflowing to inf inside
    LOGISTIC) must give 0 without a warning."""
    rng = np.random.default_rng(7)
    w = rng.uniform(-0.5, 0.5, (6, 32)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (32,)).astype(np.float32)
    model = convert(
        lambda xs, u: _cell_loop(xs, w, u, b), [S((5, 6), tf.float32), S((8, 32), tf.float32)], key="programs-cell-loop"
    )
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    body = next(interpreter.subgraph(s) for s in range(1, len(interpreter.model.subgraphs))
                if "SPLIT" in [st.op_name for st in interpreter.subgraph(s).plan])  # fmt: skip
    fast = {st.op_name for st in body.steps if direct_call(st.kernel, st.ins, st.outs) is not None}
    assert {"FULLY_CONNECTED", "SPLIT", "LOGISTIC", "ADD"} <= fast
    for seed, scale in [(1, 1.0), (1, 1.0), (2, 1.0), (3, 400.0)]:  # the last: exp overflows
        data = np.random.default_rng(seed)
        values = [data.uniform(-scale, scale, (5, 6)).astype(np.float32), data.uniform(-0.5, 0.5, (8, 32)).astype(np.float32)]
        _feed(interpreter, values)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        assert_close(actual, run_litert(model, values)[0], what=f"seed {seed}")


def test_reshape_is_one_copy_from_a_view_made_once():
    model = convert(lambda x: tf.reshape(x * 2.0, (3, -1)) + 1.0, [S((2, 6), tf.float32)], key="programs-reshape")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    (step,) = [st for st in interpreter.subgraph(0).steps if st.op_name == "RESHAPE"]
    fn, args = direct_call(step.kernel, step.ins, step.outs)
    assert fn is copy_into and np.shares_memory(args[1], step.ins[0])
    for seed in (1, 2, 3):  # the second invoke on runs the compiled plan
        x = np.random.default_rng(seed).uniform(-1, 1, (2, 6)).astype(np.float32)
        _feed(interpreter, [x])
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, [x])[0])


def test_sum_over_last_axes_is_one_product_with_ones():
    model = convert(lambda x: tf.reduce_sum(x * 2.0, axis=[1, 2]), [S((3, 4, 8), tf.float32)], key="programs-sum")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    (step,) = [st for st in interpreter.subgraph(0).steps if st.op_name == "SUM"]
    fn, args = direct_call(step.kernel, step.ins, step.outs)
    assert fn is dot_into and np.shares_memory(args[0], step.ins[0]) and np.shares_memory(args[2], step.outs[0])
    for seed in (1, 2, 3):  # the second invoke on runs the compiled plan
        x = np.random.default_rng(seed).uniform(-1, 1, (3, 4, 8)).astype(np.float32)
        _feed(interpreter, [x])
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, [x])[0])


@pytest.mark.parametrize("batch", [1, 3])
def test_fully_connected_direct_call_is_one_dot_and_the_bias(batch):
    """A FULLY_CONNECTED of one block runs as ``np.dot`` (its bias added after, in the output's
    shape at batch 1) in compiled programs; with a fused activation it keeps its block."""
    rng = np.random.default_rng(11)
    w = rng.uniform(-0.5, 0.5, (12, 7)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (7,)).astype(np.float32)
    cases = {
        "bias": (lambda x: tf.matmul(x, w) + b, "_dot_plus_bias"),
        "no bias": (lambda x: tf.matmul(x, w) * 2.0, "dot"),
        "relu": (lambda x: tf.nn.relu(tf.matmul(x, w) + b), "_block"),
    }
    for name, (fn, expected) in cases.items():
        model = convert(fn, [S((batch, 12), tf.float32)], key=("programs-fc", name, batch))
        interpreter = numlite.Interpreter(model_content=model)
        interpreter.allocate_tensors()
        (step,) = [st for st in interpreter.subgraph(0).steps if st.op_name == "FULLY_CONNECTED"]
        fn_called, _ = direct_call(step.kernel, step.ins, step.outs)
        assert fn_called.__name__ == expected, (name, fn_called)
        for seed in (1, 2, 3):  # the second invoke on runs the compiled plan
            x = np.random.default_rng(seed).uniform(-1, 1, (batch, 12)).astype(np.float32)
            _feed(interpreter, [x])
            interpreter.invoke()
            actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
            assert_close(actual, run_litert(model, [x])[0], what=f"{name}, seed {seed}")


def test_logical_and_of_a_loop_condition_is_one_call():
    """``i < n and i < m`` as the loop's condition: LOGICAL_AND's direct call is one ufunc
    call (the compiled loop itself compares in Python, see below); the loop stops on
    whichever bound comes first, as in LiteRT."""
    fn = lambda n, m, x: tf.while_loop(
        lambda i, v: tf.logical_and(i < n, i < m), lambda i, v: (i + 1, v * 1.5 - 0.25), [tf.constant(0), x]
    )[1]
    model = convert(fn, [S((), tf.int32), S((), tf.int32), S((4,), tf.float32)], key="programs-logical-and")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    cond = next(interpreter.subgraph(s) for s in range(1, len(interpreter.model.subgraphs))
                if "LOGICAL_AND" in [st.op_name for st in interpreter.subgraph(s).plan])  # fmt: skip
    (step,) = [st for st in cond.steps if st.op_name == "LOGICAL_AND"]
    assert direct_call(step.kernel, step.ins, step.outs)[0] is np.logical_and
    x = np.random.default_rng(5).uniform(-1, 1, 4).astype(np.float32)
    for n, m in [(3, 5), (6, 2), (4, 4), (0, 3)]:
        values = [np.int32(n), np.int32(m), x]
        _feed(interpreter, values)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        assert_close(actual, run_litert(model, values)[0], what=f"n={n}, m={m}")


def _loop_sources(interpreter):
    """The generated source lines of every compiled WHILE loop of the main subgraph."""
    lines = []
    for step in interpreter.subgraph(0).steps:
        if step.op_name == "WHILE":
            for *_, loop in step.kernel.recent_loops:
                lines += loop._generated.lines
    return lines


CONDITIONS = {
    "less": lambda i, n, f, v: i < n,
    "and": lambda i, n, f, v: tf.logical_and(i < n, tf.not_equal(i, 7)),
    "or": lambda i, n, f, v: tf.logical_or(i < n, tf.less_equal(f, -1e30)),
    "float": lambda i, n, f, v: tf.logical_and(f < 50.0, i >= 0),  # NaN f: compares false
    "greater": lambda i, n, f, v: tf.greater(n, i),
    "vector": lambda i, n, f, v: tf.logical_and(i < n, tf.reduce_all(v < 1e6)),  # no Python form
}


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_scalar_loop_condition_is_compared_in_python(name):
    """A cond of comparisons and logical ops on single values is a Python expression over the
    values' item() in the compiled loop (no ufunc call); with a comparison of vectors, which
    has none, the cond's calls run as they are. Either way every count of iterations, a NaN included,
    matches LiteRT, on repeated invokes."""
    condition = CONDITIONS[name]
    fn = lambda n, x: tf.while_loop(
        lambda i, f, v: condition(i, n, f, v), lambda i, f, v: (i + 1, f * 2.0 + 1.0, v * 1.5 - 0.25), [tf.constant(0), x[0], x]
    )  # fmt: skip
    model = convert(fn, [S((), tf.int32), S((4,), tf.float32)], key=("programs-scalar-cond", name))
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    x = np.random.default_rng(6).uniform(-1, 1, 4).astype(np.float32)
    nan = x.copy()
    nan[0] = np.nan
    for n, values in [(5, x), (0, x), (12, x), (3, nan), (9, x)]:
        inputs = [np.int32(n), values]
        expected = run_litert(model, inputs)
        for _ in range(2):  # the second invoke on the same arrays runs the compiled loop
            _feed(interpreter, inputs)
            interpreter.invoke()
            for d, value in zip(interpreter.get_output_details(), expected):
                assert_close(interpreter.get_tensor(d["index"]), value, what=f"{name}, n={n}")
    lines = _loop_sources(interpreter)
    assert lines, "the loop did not run compiled"
    python_compare = any(".item() " in line and "if not ((" in line for line in lines)
    assert python_compare == (name != "vector"), lines


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
def test_scalar_integer_arithmetic_in_python_wraps_as_litert(dtype):
    """A loop's 0-d integer ADD, SUB and MUL run as Python arithmetic on item() in the
    compiled loop; results out of the dtype's range go through the ufunc and wrap, as in
    LiteRT (k * 3 + 1 overflows int32 within 21 iterations, int64 within 41)."""
    fn = lambda n, k0: tf.while_loop(
        lambda i, k, d: i < n, lambda i, k, d: (i + 1, k * 3 + 1, d - k), [tf.constant(0), k0, k0 - k0]
    )  # fmt: skip
    model = convert(fn, [S((), tf.int32), S((), dtype)], key=("programs-scalar-int", dtype.name))
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for n in (0, 3, 25, 50, 7):
        inputs = [np.int32(n), np.array(5, dtype.as_numpy_dtype)]
        expected = run_litert(model, inputs)
        for _ in range(2):  # the second invoke on the same arrays runs the compiled loop
            _feed(interpreter, inputs)
            interpreter.invoke()
            for d, value in zip(interpreter.get_output_details(), expected):
                np.testing.assert_array_equal(interpreter.get_tensor(d["index"]), value, err_msg=f"n={n}")
    lines = _loop_sources(interpreter)
    assert any("[()] = " in line and ".item() * " in line for line in lines), lines


def test_scalar_float_arithmetic_in_python_is_float32_arithmetic():
    """A loop's 0-d float32 ADD, SUB and MUL as Python arithmetic (double, rounded to float32
    at each store) give LiteRT's float32 results bit for bit over many iterations, through
    overflow to inf, NaN and signed zeros."""
    fn = lambda n, a, b: tf.while_loop(
        lambda i, x, y, z: i < n,
        lambda i, x, y, z: (i + 1, x * a + b, y * 1.7 - x, z * -0.0 + y * 1e-30), [tf.constant(0), a, b, a],
    )  # fmt: skip
    model = convert(fn, [S((), tf.int32), S((), tf.float32), S((), tf.float32)], key="programs-scalar-float")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    rng = np.random.default_rng(8)
    cases = [(n, a, b) for n in (1, 40, 200) for a, b in rng.uniform(-3, 3, (3, 2)).astype(np.float32)]
    cases += [(300, np.float32(1.9), np.float32(1e30)), (20, np.float32(np.nan), np.float32(1)), (5, np.float32(-0.0), np.float32(0.0))]
    for n, a, b in cases:
        inputs = [np.int32(n), np.float32(a), np.float32(b)]
        expected = run_litert(model, inputs)
        for _ in range(2):
            _feed(interpreter, inputs)
            interpreter.invoke()
            for d, value in zip(interpreter.get_output_details(), expected):
                np.testing.assert_array_equal(interpreter.get_tensor(d["index"]), value, err_msg=f"n={n}, a={a}, b={b}")
                assert np.signbit(interpreter.get_tensor(d["index"])) == np.signbit(value)
    lines = _loop_sources(interpreter)
    assert any("[()] = " in line and ".item() * " in line for line in lines), lines


def test_nested_control_flow_calls_its_callees_directly(nested_model):
    """In the outer loop's compiled body the IF and the inner WHILE are functions bound to
    their arrays (``direct``), not their ``eval``: repeated invokes with other counts and data
    still match LiteRT, and a watched invoke in between (a cancellation check: the hooked
    rebinding path) does not disturb the next compiled ones."""
    interpreter = numlite.Interpreter(model_content=nested_model)
    interpreter.allocate_tensors()
    for k, (n, m) in enumerate([(2, 3), (5, 2), (3, 4)]):
        values = _inputs(nested_model, n, m, seed=20 + k)
        _feed(interpreter, values)
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(nested_model, values)[0])
    outer = next(st.kernel for st in interpreter.subgraph(0).steps if st.op_name == "WHILE")
    loop = outer.recent_loops[0][3]
    called = [v for v in loop._generated.values if callable(v) and getattr(v, "__qualname__", "").endswith("_bound_call.<locals>.call")]
    assert {c.__qualname__.split(".")[0] for c in called} == {"If", "While"}, called
    checks = []
    interpreter.check_cancelled = lambda: checks.append(1) and False
    for k, (n, m) in enumerate([(4, 1), (1, 6), (6, 3)]):
        values = _inputs(nested_model, n, m, seed=30 + k)
        _feed(interpreter, values)
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(nested_model, values)[0])
        if k == 0:
            assert len(checks) > n * m  # the hooks saw every node of the loops
            interpreter.check_cancelled = None  # the next invokes compiled again


def test_error_in_a_nested_loop_body_names_the_inner_node():
    """A failure inside the inner loop's body, reached through the outer loop's compiled body
    and the inner WHILE's direct call, names the failing node of the inner body."""

    def f(n, x):
        def body(i, v):
            inner = tf.while_loop(lambda j, w: j < 3, lambda j, w: (j + 1, w * 3.0 + 1.0), [tf.constant(0), v])[1]
            return i + 1, inner - 1.0

        return tf.while_loop(lambda i, v: i < n, body, [tf.constant(0), x])[1]

    model = convert(f, [S((), tf.int32), S((4,), tf.float32)], key="programs-failing-nested")
    # 2 outer x 3 inner MULs per invoke: fail in the third invoke, when both loops are compiled.
    message = _third_invoke_error(model, 2, _failing_mul(14))
    assert message.startswith("subgraph 0, node 0 (WHILE) failed: subgraph "), message
    assert message.count("(WHILE) failed") == 2, message  # the outer and the inner loop
    assert "(MUL) failed: ValueError: boom" in message, message


# ----------------------------------------------------------------------------- swish as one call

# Moderate values and the extremes where LOGISTIC then MUL and x / (1 + exp(-x)) could differ:
# exp(-x) overflowing (x below about -88), infinities, NaN, signed zeros.
_SWISH_EDGES = [-np.inf, np.inf, np.nan, -1000.0, -100.0, -89.0, -88.0, -87.0, -50.0, -20.0, -0.0, 0.0, 1e-30, 20.0, 100.0]


def _swish_inputs(seed):
    x = np.random.default_rng(seed).uniform(-12, 12, (4, 64)).astype(np.float32)
    x.flat[: len(_SWISH_EDGES)] = _SWISH_EDGES
    return x


def _swish_model(sigmoid_read_again: bool):
    def f(x):
        s = tf.sigmoid(x)
        return x * s + s if sigmoid_read_again else x * s

    return convert(f, [S((4, 64), tf.float32)], key=("programs-swish", sigmoid_read_again))


def _compiled_ops(interpreter):
    """The op of each call of the main subgraph's compiled program (the first node of a call
    covering several)."""
    return [step.op_name for step, _, _ in interpreter.subgraph(0)._program.calls]


@pytest.mark.parametrize("preserve", [False, True])
def test_swish_is_one_call_when_nothing_else_reads_the_sigmoid(preserve):
    """LOGISTIC then MUL of its input by its output (Keras' swish) is one call of four passes
    in a compiled program, and gives LiteRT's results at the extremes too; with every tensor
    preserved the two nodes stay apart, so the sigmoid stays readable."""
    model = _swish_model(sigmoid_read_again=False)
    assert op_names(model) == ["LOGISTIC", "MUL"]
    interpreter = numlite.Interpreter(model_content=model, experimental_preserve_all_tensors=preserve)
    interpreter.allocate_tensors()
    for seed in range(3):  # the loop path, then the compiled program
        x = _swish_inputs(seed)
        _feed(interpreter, [x])
        interpreter.invoke()
        (expected,) = run_litert(model, [x])
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected)
    assert _compiled_ops(interpreter) == (["LOGISTIC", "MUL"] if preserve else ["LOGISTIC"])
    if preserve:
        sg = interpreter.subgraph(0)
        (logistic,) = [s for s in sg.plan if s.op_name == "LOGISTIC"]
        from ai_edge_litert.interpreter import Interpreter as LiteRT

        litert = LiteRT(model_content=model, experimental_preserve_all_tensors=True)
        litert.allocate_tensors()
        litert.set_tensor(litert.get_input_details()[0]["index"], x)
        litert.invoke()
        assert_close(interpreter.get_tensor(logistic.outputs[0]), litert.get_tensor(logistic.outputs[0]))


def test_swish_stays_two_calls_when_the_sigmoid_is_read_again():
    model = _swish_model(sigmoid_read_again=True)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for seed in range(3):
        x = _swish_inputs(seed)
        _feed(interpreter, [x])
        interpreter.invoke()
        (expected,) = run_litert(model, [x])
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected)
    assert _compiled_ops(interpreter)[:2] == ["LOGISTIC", "MUL"]


def test_profiled_swish_shows_both_nodes():
    """A watched invoke runs the nodes apart: the profiler times LOGISTIC and MUL each."""
    model = _swish_model(sigmoid_read_again=False)
    interpreter = numlite.Interpreter(model_content=model, profile=True)
    interpreter.allocate_tensors()
    x = _swish_inputs(5)
    _feed(interpreter, [x])
    for _ in range(3):
        interpreter.invoke()
    assert sorted({e.op for e in interpreter.profiler.op_events}) == ["LOGISTIC", "MUL"]
    assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, [x])[0])
