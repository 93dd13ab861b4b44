"""Compiled invokes: a subgraph's plan runs as one generated function (``runtime.Program``),
control-flow ops call their callees' programs with their own buffers bound, and
``num_threads`` limits the BLAS pool during invoke. What must hold: the same results as LiteRT
on every invoke (the first ones take the loop path, later ones the compiled one), errors that
name the failing node, hooks (cancellation, profiling) still seeing every node."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from threadpoolctl import threadpool_info

import numlite
from numlite.interpreter.runtime import direct_call
from numlite.kernels import KERNELS

from helpers import assert_close, convert, run_litert

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


def test_error_in_compiled_loop_body_names_the_node():
    def f(n, x):
        return tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 3.0 + 1.0), [tf.constant(0), x])[1]

    model = convert(f, [S((), tf.int32), S((4,), tf.float32)], key="programs-failing-body")
    # Fail on the 30th MUL, in the third invoke: the WHILE runs its callees' programs from its
    # first eval on, and the main subgraph is compiled by then too.
    interpreter = numlite.Interpreter(model_content=model, custom_ops={"MUL": _failing_mul(29)})
    interpreter.allocate_tensors()
    _feed(interpreter, [np.int32(10), np.zeros(4, np.float32)])
    interpreter.invoke()
    interpreter.invoke()
    with pytest.raises(numlite.InvokeError) as info:
        interpreter.invoke()
    message = str(info.value)
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


def test_num_threads_limits_blas_during_invoke_only():
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
