"""Large element-wise ops split into blocks over threads (``parallel.ElementwiseSplit``) and
written over their dying inputs (in place), against LiteRT.

As in test_parallel_kernels.py, the thresholds are lowered and every core reported idle, so
that small models run their element-wise ops as blocks on several threads."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_close, convert, random_inputs, run_litert
from numlite.kernels import parallel


@pytest.fixture
def split_everything(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_SPLIT_WORK", 1)
    monkeypatch.setattr(parallel, "MIN_ELEMENTWISE_BLOCK", 1)
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)
    monkeypatch.setattr(parallel, "SPLIT_ELEMENTWISE", True)  # off by default: kept, and tested


def _kernels(interpreter):
    return [getattr(s.kernel, "impl", None) or s.kernel for s in interpreter.subgraph(0).plan]


def _assert_matches_litert(model, ops, threads=3):
    """Runs ``model`` twice (the second time as the compiled program) and checks that every
    node of the listed op types ran split."""
    inputs = random_inputs(model, low=-6.0, high=6.0)
    expected = run_litert(model, inputs)
    interpreter = numlite.Interpreter(model_content=model, num_threads=threads)
    interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    for _ in range(2):
        interpreter.invoke()
        actual = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        for a, e in zip(actual, expected):
            assert_close(a, e)
    plan = interpreter.subgraph(0).plan
    split = [k for step, k in zip(plan, _kernels(interpreter)) if step.op_name in ops]
    assert {s.op_name for s in plan} >= set(ops)
    for kernel in split:
        assert kernel.split is not None and kernel.split.threads == threads
        assert len(kernel.split.tasks) > 1


SHAPE = (2, 14, 13, 6)


def test_swish_and_squeeze_excite_split(split_everything):
    """LOGISTIC, MUL of equal shapes and MUL by a broadcast [1, 1, 1, C] scale."""
    scale = np.random.default_rng(1).uniform(0.5, 1.5, (1, 1, 1, SHAPE[-1])).astype(np.float32)

    def f(x):
        y = x * tf.sigmoid(x)
        return (y * tf.sigmoid(tf.constant(scale) * y[:1, :1, :1, :])) + x

    model = convert(f, [tf.TensorSpec(SHAPE, tf.float32)], key="split swish")
    _assert_matches_litert(model, {"LOGISTIC", "MUL", "ADD"})


def test_fused_activation_applies_to_every_block(split_everything):
    """SUB with a fused RELU6, then MUL by a [C] vector (fewer dimensions: passed whole)."""
    vector = np.random.default_rng(2).uniform(-2, 2, (SHAPE[-1],)).astype(np.float32)
    model = convert(
        lambda a, b: tf.nn.relu6(a - b) * tf.constant(vector), [tf.TensorSpec(SHAPE, tf.float32)] * 2, key="split sub relu6"
    )
    _assert_matches_litert(model, {"SUB", "MUL"})


@pytest.mark.parametrize("op", ["tanh", "hard_swish", "relu6", "exp"])
def test_unary_split(split_everything, op):
    fn = {
        "tanh": tf.tanh,
        "hard_swish": lambda x: x * tf.nn.relu6(x + 3.0) / 6.0,
        "relu6": tf.nn.relu6,
        "exp": tf.exp,
    }[op]
    name = {"tanh": "TANH", "hard_swish": "HARD_SWISH", "relu6": "RELU6", "exp": "EXP"}[op]
    model = convert(lambda x: fn(x) * 1.5, [tf.TensorSpec(SHAPE, tf.float32)], key=("split unary", op))
    _assert_matches_litert(model, {name})


def test_small_ops_are_not_split():
    """With the real thresholds a small op is one NumPy call (no split, direct in the program)."""
    model = convert(lambda x: x * tf.sigmoid(x), [tf.TensorSpec((4, 8), tf.float32)], key="small swish")
    interpreter = numlite.Interpreter(model_content=model, num_threads=2)
    interpreter.allocate_tensors()
    assert all(getattr(k, "split", None) is None for k in _kernels(interpreter))


def test_large_ops_are_split_only_when_enabled(monkeypatch):
    """A large swish would be worth two threads by the work thresholds, but element-wise ops
    are split only under ``parallel.SPLIT_ELEMENTWISE`` (off: in networks the split measured
    slower). Both ways give LiteRT's result."""
    model = convert(lambda x: x * tf.sigmoid(x), [tf.TensorSpec((1, 128, 128, 32), tf.float32)], key="large swish")
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)
    inputs = random_inputs(model)
    expected = run_litert(model, inputs)
    for enabled in (False, True):
        monkeypatch.setattr(parallel, "SPLIT_ELEMENTWISE", enabled)
        interpreter = numlite.Interpreter(model_content=model, num_threads=2)
        interpreter.allocate_tensors()
        split = [getattr(k, "split", None) is not None for k in _kernels(interpreter)]
        assert any(split) == enabled  # the LOGISTIC (the multiply is too little work)
        for _ in range(2):
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
            interpreter.invoke()
            assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected[0])
