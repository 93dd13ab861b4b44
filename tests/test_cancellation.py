"""Stopping a running invoke: cancel() from another thread, or a check_cancelled callback."""

import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import convert, run_litert


def endless_loop_model():
    """Counts to n; with n = 2**31 - 1 it would run for hours."""

    def f(n, x):
        return tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, tf.sin(x) * 0.5 + x * 0.5), [0, x])

    return convert(f, [tf.TensorSpec([], tf.int32), tf.TensorSpec([8], tf.float32)])


def feed(interpreter, n):
    details = interpreter.get_input_details()
    interpreter.set_tensor(details[0]["index"], np.array(n, np.int32))
    interpreter.set_tensor(details[1]["index"], np.linspace(-1, 1, 8, dtype=np.float32))


def test_cancel_from_another_thread_stops_an_endless_loop():
    model = endless_loop_model()
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    feed(interpreter, 2**31 - 1)
    timer = threading.Timer(0.3, interpreter.cancel)
    timer.start()
    start = time.perf_counter()
    with pytest.raises(numlite.CancelledError, match="cancelled before subgraph"):
        interpreter.invoke()
    assert time.perf_counter() - start < 10  # stopped long before the loop could end
    timer.join()

    feed(interpreter, 5)  # the next invoke runs normally
    interpreter.invoke()
    expected = run_litert(model, [np.array(5, np.int32), np.linspace(-1, 1, 8, dtype=np.float32)])
    for d, value in zip(interpreter.get_output_details(), expected):
        np.testing.assert_allclose(interpreter.get_tensor(d["index"]), value, rtol=1e-5, atol=1e-5)


def test_check_cancelled_callback():
    calls = []

    def check():
        calls.append(1)
        return len(calls) > 50  # give up after 50 operators

    interpreter = numlite.Interpreter(model_content=endless_loop_model(), check_cancelled=check)
    interpreter.allocate_tensors()
    feed(interpreter, 2**31 - 1)
    with pytest.raises(numlite.CancelledError):
        interpreter.invoke()
    assert len(calls) == 51


def test_cancel_before_invoke_does_not_stop_it():
    interpreter = numlite.Interpreter(model_content=endless_loop_model())
    interpreter.allocate_tensors()
    feed(interpreter, 3)
    interpreter.cancel()
    interpreter.invoke()  # the flag is cleared when an invoke starts, as in LiteRT


def test_cancel_from_inside_a_compiled_loop_stops_it_before_the_next_body():
    """A compiled WHILE loop looks for cancel() before each cond and body (not each node): a
    SIN overridden in Python that cancels at its 50th call is called 50 times, no more, and the
    next invoke runs the loop to its end with LiteRT's results."""
    model = endless_loop_model()
    calls = []
    interpreter = None

    def sin(x, **_):
        calls.append(1)
        if len(calls) == 50:
            interpreter.cancel()
        return np.sin(x)

    interpreter = numlite.Interpreter(model_content=model, custom_ops={"SIN": sin})
    interpreter.allocate_tensors()
    feed(interpreter, 5)
    interpreter.invoke()
    interpreter.invoke()  # the second invoke on the same arrays compiles the loop
    (while_step,) = [s for s in interpreter.subgraph(0).steps if s.op_name == "WHILE"]
    assert while_step.kernel.recent_loops, "the loop did not run compiled"
    calls.clear()
    feed(interpreter, 2**31 - 1)
    with pytest.raises(numlite.CancelledError, match="cancelled before subgraph"):
        interpreter.invoke()
    assert len(calls) == 50

    feed(interpreter, 7)
    interpreter.invoke()
    expected = run_litert(model, [np.array(7, np.int32), np.linspace(-1, 1, 8, dtype=np.float32)])
    for d, value in zip(interpreter.get_output_details(), expected):
        np.testing.assert_allclose(interpreter.get_tensor(d["index"]), value, rtol=1e-5, atol=1e-5)
