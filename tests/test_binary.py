"""Element-wise binary ops against LiteRT: broadcasting, dtypes and fused activations; ATAN2
and ADD_N (no broadcasting)."""

import os
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, litert_interpreter, op_names, run_litert

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from one_op_model import In, Out, one_op  # noqa: E402

SHAPES = [((2, 3), (2, 3)), ((4, 1, 3), (5, 1)), ((1, 6), ()), ((2, 3, 4, 5), (5,))]

OPS = {
    "ADD": tf.add,
    "SUB": tf.subtract,
    "MUL": tf.multiply,
    "DIV": tf.divide,
    "SQUARED_DIFFERENCE": tf.math.squared_difference,
    "MAXIMUM": tf.maximum,
    "MINIMUM": tf.minimum,
    "FLOOR_DIV": tf.math.floordiv,
    "FLOOR_MOD": tf.math.floormod,
}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(OPS))
def test_float_binary(name, shapes):
    fn = OPS[name]
    model = convert(lambda a, b: fn(a, b), [tf.TensorSpec(s, tf.float32) for s in shapes], key=(name, shapes))
    assert name in op_names(model)
    rng = np.random.default_rng(1)
    a = rng.uniform(-3, 3, shapes[0]).astype(np.float32)
    b = rng.uniform(0.5, 3, shapes[1]).astype(np.float32) * rng.choice([-1, 1], shapes[1]).astype(np.float32)
    assert_matches_litert(model, [a, b])


@pytest.mark.parametrize("name", sorted(OPS))
def test_compiled_binary_calls_raise_no_warning(name):
    """From the second invoke on, a node runs as its direct ufunc call in a generated program:
    none may warn (NumPy 2.4 deprecates np.maximum/np.minimum's positional output, which
    then also took a slow path), so every invoke runs with warnings as errors. Results are
    LiteRT's each time."""
    fn = OPS[name]
    shapes = ((1, 32), (1, 32))
    model = convert(lambda a, b: fn(a, b), [tf.TensorSpec(s, tf.float32) for s in shapes], key=(name, shapes))
    rng = np.random.default_rng(2)
    inputs = [rng.uniform(0.5, 3, s).astype(np.float32) * rng.choice([-1, 1], s).astype(np.float32) for s in shapes]
    expected = run_litert(model, inputs)[0]
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            interpreter.invoke()
            np.testing.assert_allclose(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected,
                                       rtol=1e-5, atol=1e-5)  # fmt: skip


INTEGER_CASES = [(name, tf.int32) for name in ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD"]]
# The official converter rejects int64 FLOOR_DIV and FLOOR_MOD (it asks for TF Select ops).
INTEGER_CASES += [(name, tf.int64) for name in ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM"]]


@pytest.mark.parametrize("name,dtype", INTEGER_CASES, ids=str)
def test_integer_binary(name, dtype):
    fn = OPS[name]
    model = convert(lambda a, b: fn(a, b), [tf.TensorSpec((3, 4), dtype), tf.TensorSpec((4,), dtype)], key=(name, dtype))
    assert name in op_names(model)
    rng = np.random.default_rng(2)
    a = rng.integers(-20, 20, (3, 4)).astype(dtype.as_numpy_dtype)
    b = rng.integers(1, 7, (4,)).astype(dtype.as_numpy_dtype) * np.array([1, -1, 1, -1], dtype.as_numpy_dtype)
    assert_matches_litert(model, [a, b])


@pytest.mark.parametrize("activation", [tf.nn.relu, tf.nn.relu6, lambda x: tf.clip_by_value(x, -1.0, 1.0)])
@pytest.mark.parametrize("op", [tf.add, tf.subtract, tf.multiply, tf.divide])
def test_fused_activation(op, activation):
    model = convert(lambda a, b: activation(op(a, b)), [tf.TensorSpec((2, 8), tf.float32)] * 2, key=(op, activation))
    assert len(op_names(model)) == 1, op_names(model)  # the activation is fused into the op
    assert_matches_litert(model)


def test_pow():
    model = convert(lambda a, b: tf.pow(a, b), [tf.TensorSpec((3, 4), tf.float32)] * 2)
    assert "POW" in op_names(model)
    rng = np.random.default_rng(3)
    assert_matches_litert(model, [rng.uniform(0.1, 3, (3, 4)).astype(np.float32), rng.uniform(-2, 2, (3, 4)).astype(np.float32)])


def test_integer_pow():
    model = convert(lambda a, b: tf.pow(a, b), [tf.TensorSpec((6,), tf.int32)] * 2)
    a = np.array([2, -3, 4, 0, 1, 5], np.int32)
    b = np.array([3, 2, 0, 4, 7, 2], np.int32)
    expected = assert_matches_litert(model, [a, b])
    np.testing.assert_array_equal(expected[0], tf.pow(a, b).numpy())


def test_fused_tanh_written_by_numlite():
    """The converter never fuses TANH into ADD; set it with numlite's writer and let LiteRT judge
    (LiteRT treats a fused TANH as "no clamp", so numlite must not apply tanh either)."""
    from numlite.model import read_model, write_model

    model = read_model(convert(lambda a, b: a + b, [tf.TensorSpec((2, 8), tf.float32)] * 2))
    model.subgraphs[0].operators[0].builtin_options.fused_activation_function = 4  # TANH
    assert_matches_litert(write_model(model))


# ----------------------------------------------------------------------------- ATAN2, ADD_N


@pytest.mark.parametrize("shape", [(), (3, 4), (2, 3, 4, 5)], ids=str)
def test_atan2(shape):
    model = convert(lambda y, x: tf.atan2(y, x), [tf.TensorSpec(shape, tf.float32)] * 2, key=("atan2", shape))
    assert op_names(model) == ["ATAN2"]
    rng = np.random.default_rng(4)
    assert_matches_litert(model, [rng.uniform(-3, 3, shape).astype(np.float32), rng.uniform(-3, 3, shape).astype(np.float32)])


def test_atan2_quadrants_and_special_values():
    """Signed zeros pick the quadrant (atan2(+-0, -1) = +-pi), infinities and NaN propagate."""
    model = convert(lambda y, x: tf.atan2(y, x), [tf.TensorSpec((12,), tf.float32)] * 2, key=("atan2", "specials"))
    inf, nan = np.inf, np.nan
    y = np.array([0.0, -0.0, 0.0, -0.0, 1, -1, inf, -inf, inf, nan, 1, 0], np.float32)
    x = np.array([1.0, 1.0, -1.0, -1.0, 0, 0, 1, 1, -inf, 1, nan, 0], np.float32)
    (expected,) = assert_matches_litert(model, [y, x])
    np.testing.assert_allclose(expected, np.arctan2(y, x), rtol=1e-6)  # the premise: C's atan2


def test_div_by_zero_and_special_values():
    """Float DIV by signed zeros gives signed infinities, 0 / 0 and inf / inf NaN, as in LiteRT
    (the compiled engine once raised ZeroDivisionError: Numba's Python error model)."""
    model = convert(lambda x, y: tf.divide(x, y), [tf.TensorSpec((10,), tf.float32)] * 2, key=("div", "specials"))
    inf, nan = np.inf, np.nan
    x = np.array([1.0, -1.0, 1.0, 0.0, -0.0, inf, inf, nan, 3.0, -2.0], np.float32)
    y = np.array([0.0, 0.0, -0.0, 0.0, 0.0, inf, 0.0, 0.0, nan, 0.5], np.float32)
    (expected,) = assert_matches_litert(model, [x, y])
    np.testing.assert_array_equal(np.signbit(expected[:3]), [False, True, True])  # the premise: IEEE signed infinities


# The integer divisions LiteRT runs: DIV on int32/int16/int8, FLOOR_DIV on int32/int16/int8,
# FLOOR_MOD on every integer dtype numlite covers.
INTEGER_DIVISIONS = [("DIV", np.int32), ("FLOOR_DIV", np.int32), ("FLOOR_DIV", np.int16), ("FLOOR_DIV", np.int8),
                     ("FLOOR_MOD", np.int32), ("FLOOR_MOD", np.int64), ("FLOOR_MOD", np.int16), ("FLOOR_MOD", np.int8)]


@pytest.mark.parametrize("op, dtype", INTEGER_DIVISIONS, ids=lambda v: getattr(v, "__name__", v))
def test_integer_division_by_zero_fails_the_invoke(op, dtype):
    """LiteRT fails the invoke of an integer division whose divisor holds a 0 ("Division by 0";
    DIV: "data[i] != zero_point"); numlite raises InvokeError naming the node, where it once gave
    a value (INT_MIN, or 0). Without a 0, both give the same integers."""
    a, b = np.array([7, -7, 3, -4], dtype), np.array([2, 0, -2, 3], dtype)
    data, _ = one_op(op, [In(a), In(b)], [Out(dtype, shape=(4,))])
    litert = litert_interpreter(data)
    interpreter = numlite.Interpreter(model_content=data)
    for it in (litert, interpreter):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], a)
        it.set_tensor(it.get_input_details()[1]["index"], b)
    with pytest.raises(RuntimeError, match="Division by 0|zero_point"):
        litert.invoke()  # the premise: LiteRT refuses
    with pytest.raises(numlite.InvokeError, match=rf"node 0 \({op}\) failed: division by 0"):
        interpreter.invoke()
    b = np.where(b == 0, 5, b).astype(dtype)
    assert_matches_litert(data, [a, b])


# The converter refuses tf.atan2 on shapes that differ ("requires the same type for all
# operands"), so there is no broadcasting case to compare.


def test_atan2_rejects_mismatched_shapes():
    """Shapes of one rank but different sizes: LiteRT would read past the smaller input."""
    from numlite.model import read_model, write_model

    model = read_model(convert(lambda y, x: tf.atan2(y, x), [tf.TensorSpec((2, 3), tf.float32)] * 2, key=("atan2", (2, 3))))
    g = model.subgraphs[0]
    g.tensors[g.inputs[1]].shape = (2, 1)
    g.tensors[g.inputs[1]].shape_signature = None
    with pytest.raises(numlite.PrepareError, match="different shapes"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


@pytest.mark.parametrize("count", [2, 3, 5])
@pytest.mark.parametrize("dtype", [tf.float32, tf.int32])
def test_add_n(dtype, count):
    shape = (2, 3, 4)
    model = convert(lambda *xs: tf.add_n(list(xs)), [tf.TensorSpec(shape, dtype)] * count, key=("add_n", dtype, count))
    assert op_names(model) == ["ADD_N"]
    assert_matches_litert(model, seed=count)


def test_add_n_int32_wraps():
    model = convert(lambda *xs: tf.add_n(list(xs)), [tf.TensorSpec((2, 3, 4), tf.int32)] * 3, key=("add_n", tf.int32, 3))
    big = np.full((2, 3, 4), 2**30, np.int32)
    assert_matches_litert(model, [big, big, -big + np.arange(24, dtype=np.int32).reshape(2, 3, 4)])


def test_add_n_rejects_mismatched_shapes():
    from numlite.model import read_model, write_model

    model = read_model(convert(lambda *xs: tf.add_n(list(xs)), [tf.TensorSpec((2, 3, 4), tf.float32)] * 3, key=("add_n", tf.float32, 3)))
    g = model.subgraphs[0]
    g.tensors[g.inputs[2]].shape = (3, 4)
    g.tensors[g.inputs[2]].shape_signature = None
    data = write_model(model)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(data, [np.ones((2, 3, 4), np.float32)] * 2 + [np.ones((3, 4), np.float32)])
    with pytest.raises(numlite.PrepareError, match="inputs differ"):
        numlite.Interpreter(model_content=data).allocate_tensors()
