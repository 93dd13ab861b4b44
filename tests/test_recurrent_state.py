"""SVDF and the hybrid RNN carry state in a variable tensor from one invoke to the next (the
builtin sweep runs one invoke from a zero state): numlite's outputs equal LiteRT's over four
invokes with different inputs, then again after ``reset_all_variables`` zeroes the state."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

import numlite

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

from one_op_model import k, one_op, out, v, x  # noqa: E402

F32 = np.float32


def _floats(shape, seed, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(F32)


def _int8(shape, seed):
    return np.random.default_rng(seed).integers(-127, 128, shape).astype(np.int8)


# name: (op, inputs (the first is fed), options)
MODELS = {
    # memory 4 with 5 invokes: the oldest activations leave the memory
    "svdf-f32-rank2-relu": ("SVDF", [x(_floats((2, 3), 0)), k(_floats((6, 3), 1)), k(_floats((6, 4), 2)),
                                      k(_floats((3,), 3)), v(np.zeros((2, 24), F32))],
                            {"rank": 2, "fused_activation_function": 1}),
    "svdf-hybrid-asymmetric": ("SVDF", [x(_floats((2, 3), 4)), k(_int8((4, 3), 5), (0.01, 0)),
                                        k(_int8((4, 3), 6), (0.02, 0)), k(_floats((4,), 7)),
                                        v(np.zeros((2, 12), F32))],
                               {"rank": 1, "fused_activation_function": 0, "asymmetric_quantize_inputs": True}),
    "rnn-hybrid-tanh": ("RNN", [x(_floats((2, 3), 8)), k(_int8((4, 3), 9), (0.01, 0)), k(_int8((4, 4), 10), (0.01, 0)),
                                k(_floats((4,), 11)), v(np.zeros((2, 4), F32))],
                        {"fused_activation_function": 4}),
}


def _outputs(interpreter, feeds, reset_after: int) -> list[np.ndarray]:
    interpreter.allocate_tensors()
    index = interpreter.get_input_details()[0]["index"]
    results = []
    for n, feed in enumerate(feeds):
        if n == reset_after:
            interpreter.reset_all_variables()
        interpreter.set_tensor(index, feed)
        interpreter.invoke()
        results.append(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy())
    return results


@pytest.mark.parametrize("name", sorted(MODELS))
def test_state_across_invokes_and_reset(name):
    op, inputs, options = MODELS[name]
    content, first = one_op(op, inputs, [out(F32)], options)
    shape = first[0].shape
    first = _floats(shape, 100, -2, 2)
    feeds = [first, first] + [_floats(shape, 101 + n, -2, 2) for n in range(3)] + [first]
    expected = _outputs(LiteRTInterpreter(model_content=content), feeds, reset_after=5)
    actual = _outputs(numlite.Interpreter(model_content=content), feeds, reset_after=5)
    # The state matters (one input twice gives two outputs) and the reset zeroes it (the first
    # input after it gives the first output again).
    assert not np.allclose(expected[1], expected[0]) and np.array_equal(expected[5], expected[0])
    for n, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=f"invoke {n}")
