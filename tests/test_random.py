"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL against LiteRT: seeded ops give
LiteRT's numbers at every invoke (each invoke draws new ones), and an interpreter allocated
again starts over."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_close, convert, litert_interpreter

import numlite

SHAPE = np.array([5, 7], np.int32)  # 35 values: the last step of four words is cut short

MODELS = {
    "uniform": (lambda s: tf.raw_ops.RandomUniform(shape=s, dtype=tf.float32, seed=3, seed2=9), [tf.TensorSpec((2,), tf.int32)]),
    "normal": (lambda s: tf.raw_ops.RandomStandardNormal(shape=s, dtype=tf.float32, seed=-4, seed2=2**40),
               [tf.TensorSpec((2,), tf.int32)]),
    "multinomial": (lambda x: tf.raw_ops.Multinomial(logits=x, num_samples=np.int32(9), seed=7, seed2=1),
                    [tf.TensorSpec((3, 4), tf.float32)]),
}


def inputs(name: str) -> list[np.ndarray]:
    if name == "multinomial":
        return [np.random.default_rng(0).uniform(-2, 2, (3, 4)).astype(np.float32)]
    return [SHAPE]


def invokes(interpreter, values: list[np.ndarray], count: int) -> list[np.ndarray]:
    """The first output after each of ``count`` invokes of one interpreter."""
    for d, v in zip(interpreter.get_input_details(), values):
        interpreter.resize_tensor_input(d["index"], v.shape)
    interpreter.allocate_tensors()
    results = []
    for _ in range(count):
        for d, v in zip(interpreter.get_input_details(), values):
            interpreter.set_tensor(d["index"], v)
        interpreter.invoke()
        results.append(np.array(interpreter.get_tensor(interpreter.get_output_details()[0]["index"])))
    return results


@pytest.mark.parametrize("name", sorted(MODELS))
def test_seeded_random_ops_give_litert_numbers_at_every_invoke(name):
    fn, specs = MODELS[name]
    model = convert(fn, specs, key=f"random-{name}")
    expected = invokes(litert_interpreter(model), inputs(name), 3)
    actual = invokes(numlite.Interpreter(model_content=model), inputs(name), 3)
    assert not np.array_equal(expected[0], expected[1])  # each invoke draws new numbers
    for a, e in zip(actual, expected):
        assert_close(a, e)


def test_allocating_for_new_shapes_starts_over_as_in_litert():
    fn, specs = MODELS["multinomial"]
    model = convert(fn, specs, key="random-multinomial")
    logits = inputs("multinomial")[0]
    runs = []
    for interpreter in (litert_interpreter(model), numlite.Interpreter(model_content=model)):
        first = invokes(interpreter, [logits], 2)
        again = invokes(interpreter, [logits[:2]], 1)  # prepared again for two rows
        runs.append(first + again)
    for a, e in zip(*reversed(runs)):
        assert_close(a, e)
    assert_close(runs[1][2], runs[1][0][:2])  # the same stream from its start
