"""Comparisons, logical ops and SELECT / SELECT_V2 against LiteRT: broadcasting (4-D; the
converter inserts BROADCAST_TO before 5-D comparisons, but keeps 5-D SELECT_V2),
dtypes, ties and NaN, and SELECT's scalar and rank-1 conditions."""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

import numlite
from helpers import assert_matches_litert, convert, op_names, run_litert, run_numlite
from numlite.model import read_model, write_model

COMPARISONS = {
    "LESS": tf.less,
    "LESS_EQUAL": tf.less_equal,
    "GREATER": tf.greater,
    "GREATER_EQUAL": tf.greater_equal,
    "EQUAL": tf.equal,
    "NOT_EQUAL": tf.not_equal,
}

SHAPES = [((2, 3), (2, 3)), ((4, 1, 3), (5, 1)), ((1, 6), ()), ((), (3, 2)), ((2, 1, 3, 1), (1, 4, 1, 5))]


def discrete(rng, shape, dtype):
    """Few distinct values, so that ties (equal elements) are frequent."""
    return (rng.integers(-2, 3, shape) * 2).astype(dtype)


def comparison_model(name, shapes, dtype):
    fn = COMPARISONS[name]
    model = convert(lambda a, b: fn(a, b), [tf.TensorSpec(s, dtype) for s in shapes], key=("cmp", name, shapes, dtype))
    assert op_names(model) == [name]
    return model


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_float_comparison(name, shapes):
    rng = np.random.default_rng(1)
    a = discrete(rng, shapes[0], np.float32) / 4
    b = discrete(rng, shapes[1], np.float32) / 4
    if a.size > 2:
        a.flat[1] = np.nan  # NaN compares false, and not-equal true
    assert_matches_litert(comparison_model(name, shapes, tf.float32), [a, b])


INTEGER_CASES = [(name, dtype) for dtype in (tf.int32, tf.int64) for name in sorted(COMPARISONS)]
# The official converter emits int16 comparisons only for these (the others need TF Select).
INTEGER_CASES += [("LESS", tf.int16), ("GREATER_EQUAL", tf.int16), ("EQUAL", tf.int16)]


@pytest.mark.parametrize("name,dtype", INTEGER_CASES, ids=str)
def test_integer_comparison(name, dtype):
    rng = np.random.default_rng(2)
    npt = dtype.as_numpy_dtype
    a = discrete(rng, (3, 4), npt)
    a.flat[:2] = [np.iinfo(npt).min, np.iinfo(npt).max]
    b = discrete(rng, (4,), npt)
    assert_matches_litert(comparison_model(name, ((3, 4), (4,)), dtype), [a, b])


@pytest.mark.parametrize("name", ["EQUAL", "NOT_EQUAL"])
def test_bool_comparison(name):
    rng = np.random.default_rng(3)
    a, b = rng.random((4, 1, 3)) < 0.5, rng.random((5, 1)) < 0.5
    assert_matches_litert(comparison_model(name, ((4, 1, 3), (5, 1)), tf.bool), [a, b])


@pytest.mark.parametrize("name", ["EQUAL", "NOT_EQUAL"])
def test_string_comparison(name):
    a = np.array([b"ab", b"c", b"", b"xyz"], dtype=object)
    b = np.array([b"ab", b"d", b"", b"xy"], dtype=object)
    assert_matches_litert(comparison_model(name, ((4,), (4,)), tf.string), [a, b])


def test_comparison_of_mixed_dtypes_is_rejected():
    m = read_model(comparison_model("LESS", ((2, 3), (2, 3)), tf.float32))
    g = m.subgraphs[0]
    g.tensors[g.inputs[1]].type = "INT32"
    model = write_model(m)
    with pytest.raises(RuntimeError):
        LiteRTInterpreter(model_content=model).allocate_tensors()
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=model).allocate_tensors()


def test_uint8_comparison_is_rejected():
    """LiteRT compares uint8 through the inputs' quantization scales and aborts the process
    without them, so it cannot be run here; numlite refuses such a model at allocation."""
    model = convert(lambda a, b: tf.equal(a, b), [tf.TensorSpec((6,), tf.uint8)] * 2)
    assert op_names(model) == ["EQUAL"]
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=model).allocate_tensors()


# ----------------------------------------------------------------------------- logical

LOGICAL = {"LOGICAL_AND": tf.logical_and, "LOGICAL_OR": tf.logical_or}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_binary(name, shapes):
    fn = LOGICAL[name]
    model = convert(lambda a, b: fn(a, b), [tf.TensorSpec(s, tf.bool) for s in shapes], key=("logical", name, shapes))
    assert op_names(model) == [name]
    assert_matches_litert(model)


@pytest.mark.parametrize("shape", [(), (3, 4, 5)], ids=str)
def test_logical_not(shape):
    model = convert(lambda a: tf.logical_not(a), [tf.TensorSpec(shape, tf.bool)], key=("not", shape))
    assert op_names(model) == ["LOGICAL_NOT"]
    assert_matches_litert(model)


def test_logical_of_floats_is_rejected():
    m = read_model(convert(lambda a, b: tf.logical_and(a, b), [tf.TensorSpec((3,), tf.bool)] * 2))
    for t in m.subgraphs[0].tensors:
        t.type = "FLOAT32"
    model = write_model(m)
    with pytest.raises(RuntimeError):
        LiteRTInterpreter(model_content=model).allocate_tensors()
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=model).allocate_tensors()


# ----------------------------------------------------------------------------- select

# (With three equal shapes the converter emits SELECT, tested below.)
SELECT_V2_SHAPES = [
    ((3, 1), (4,), (3, 4)),
    ((), (2, 3), (2, 3)),
    ((2, 1, 3), (1, 4, 1), (3,)),
    ((4,), (), ()),
    ((2, 1, 3, 1, 2), (1, 2, 1, 4, 1), (2,)),
]


def select_v2_model(shapes, dtype=tf.float32):
    specs = [tf.TensorSpec(shapes[0], tf.bool)] + [tf.TensorSpec(s, dtype) for s in shapes[1:]]
    model = convert(lambda c, x, y: tf.where(c, x, y), specs, key=("select_v2", shapes, dtype))
    assert op_names(model) == ["SELECT_V2"]
    return model


@pytest.mark.parametrize("shapes", SELECT_V2_SHAPES, ids=str)
def test_select_v2(shapes):
    assert_matches_litert(select_v2_model(shapes))


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool, tf.int8, tf.int16], ids=str)
def test_select_v2_dtypes(dtype):
    assert_matches_litert(select_v2_model(((3, 1), (4,), (3, 4)), dtype))


def select_model(shapes, dtype=tf.float32):
    specs = [tf.TensorSpec(shapes[0], tf.bool)] + [tf.TensorSpec(s, dtype) for s in shapes[1:]]
    model = convert(lambda c, x, y: tf.raw_ops.Select(condition=c, x=x, y=y), specs, key=("select", shapes, dtype))
    assert op_names(model) == ["SELECT"]
    return model


@pytest.mark.parametrize(
    "shapes",
    [((2, 3), (2, 3), (2, 3)), ((3,), (3, 2, 4), (3, 2, 4)), ((), (2, 3), (2, 3)), ((5,), (5,), (5,)), ((1,), (1, 4), (1, 4))],
    ids=str,
)
def test_select(shapes):
    """Same shapes; a rank-1 condition picking whole rows; a scalar condition."""
    assert_matches_litert(select_model(shapes))


@pytest.mark.parametrize("dtype", [tf.int32, tf.bool], ids=str)
def test_select_dtypes(dtype):
    assert_matches_litert(select_model(((3,), (3, 2, 4), (3, 2, 4)), dtype))


# Large selects pick bits (logical.SELECT_BITS_FROM): shapes with broadcasting and dtypes of
# every width, compared bit for bit with LiteRT (signed zeros and NaN payloads included).
LARGE_SELECTS = [
    ("SELECT_V2", ((1, 1, 24, 16), (2, 12, 24, 16), (2, 12, 24, 16))),  # a condition per pixel column
    ("SELECT_V2", ((2, 12, 24, 16), (16,), ())),  # x and y broadcast
    ("SELECT", ((30,), (30, 8, 9), (30, 8, 9))),  # a rank-1 condition picks rows
    ("SELECT", ((40, 50), (40, 50), (40, 50))),
]


@pytest.mark.parametrize("dtype", [tf.float32, tf.int8, tf.int16, tf.int64, tf.bool], ids=str)
@pytest.mark.parametrize("op,shapes", LARGE_SELECTS, ids=str)
def test_large_select_picks_bits(op, shapes, dtype):
    from numlite.kernels import logical

    model = (select_v2_model if op == "SELECT_V2" else select_model)(shapes, dtype)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    (step,) = interpreter.subgraph(0).plan
    assert step.kernel.bits is not None and np.prod(step.outs[0].shape) >= logical.SELECT_BITS_FROM
    rng = np.random.default_rng(3)
    for k in range(2):  # the mask is working memory: a second invoke with another condition
        inputs = [rng.random(shapes[0]) < 0.5]
        for shape in shapes[1:]:
            if dtype == tf.float32:
                value = rng.standard_normal(shape).astype(np.float32)
                value.reshape(-1)[:4] = [-0.0, np.nan, -np.inf, np.inf][: value.size]
            elif dtype == tf.bool:
                value = rng.random(shape) < 0.5
            else:
                info = np.iinfo(dtype.as_numpy_dtype)
                value = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype.as_numpy_dtype)
            inputs.append(np.asarray(value))
        (expected,) = run_litert(model, inputs)
        actual = run_numlite(model, inputs)[0]
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[actual.dtype.itemsize]
        np.testing.assert_array_equal(actual.view(width), expected.view(width))


def test_select_rank_one_condition_must_match_rows():
    """A rank-1 condition resized to a length other than the rows of x: both refuse it."""
    model = select_model(((3,), (3, 2, 4), (3, 2, 4)))
    for interpreter, error in [(LiteRTInterpreter(model_content=model), RuntimeError),
                               (numlite.Interpreter(model_content=model), numlite.PrepareError)]:  # fmt: skip
        interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [2])
        with pytest.raises(error):
            interpreter.allocate_tensors()


def test_select_single_element_keeps_declared_shape():
    """With one element everywhere LiteRT keeps the output shape the model declares, here
    edited to (1, 1, 1) though the inputs broadcast to (1, 1)."""
    m = read_model(select_v2_model(((1, 1), (1,), ())))
    g = m.subgraphs[0]
    g.tensors[g.outputs[0]].shape = (1, 1, 1)
    model = write_model(m)
    for cond in (True, False):
        inputs = [np.array([[cond]]), np.array([2.0], np.float32), np.array(-3.0, np.float32)]
        expected = assert_matches_litert(model, inputs)
        assert expected[0].shape == (1, 1, 1)
