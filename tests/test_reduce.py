"""Reductions (numeric and logical), arg-extrema and cumulative sums against LiteRT: axes
(negative, duplicated, empty, run-time), keep_dims, integer rounding and wrap-around."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, op_names, run_litert, run_numlite
from numlite.kernels.base import dot_into
from numlite.model import read_model, write_model

REDUCERS = {
    "MEAN": tf.reduce_mean,
    "SUM": tf.reduce_sum,
    "REDUCE_MAX": tf.reduce_max,
    "REDUCE_MIN": tf.reduce_min,
    "REDUCE_PROD": tf.reduce_prod,
}

# (input shape, axes): negative axes, several axes, all axes, the 4-D spatial mean.
FLOAT_CASES = [
    ((2, 3, 4), [1]),
    ((2, 3, 4), [-1, 0]),
    ((5,), [0]),
    ((2, 3, 4, 5), [1, 2]),
    ((2, 3, 4, 5), [0, 1, 2, 3]),
    ((3, 2, 4), [-2]),
]


def _reduce_model(name, shape, axes, keep_dims, dtype=tf.float32):
    fn = REDUCERS[name]
    return convert(
        lambda x: fn(x, axis=axes, keepdims=keep_dims),
        [tf.TensorSpec(shape, dtype)],
        key=("reduce", name, shape, tuple(axes), keep_dims, dtype),
    )


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("shape,axes", FLOAT_CASES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_float_reduce(name, shape, axes, keep_dims):
    model = _reduce_model(name, shape, axes, keep_dims)
    assert name in op_names(model), op_names(model)
    rng = np.random.default_rng(0)
    low = 0.5 if name == "REDUCE_PROD" else -2.0  # keep products of order one
    x = rng.uniform(low, 1.5, shape).astype(np.float32)
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_integer_reduce(name, dtype):
    model = _reduce_model(name, (3, 4, 5), [0, -1], False, dtype)
    assert name in op_names(model), op_names(model)
    rng = np.random.default_rng(1)
    high = 4 if name == "REDUCE_PROD" else 50
    x = rng.integers(-high, high, (3, 4, 5)).astype(dtype.as_numpy_dtype)
    assert_matches_litert(model, [x])


def test_integer_mean_truncates_toward_zero():
    """Sums that do not divide evenly, of both signs: LiteRT's integer MEAN truncates."""
    model = _reduce_model("MEAN", (4, 3), [1], False, tf.int32)
    x = np.array([[1, 1, 0], [-1, -1, 0], [2, 2, 1], [-5, -2, 1]], np.int32)
    expected = assert_matches_litert(model, [x])
    assert expected[0].tolist() == [0, 0, 1, -2]  # sanity of the premise: truncation, not floor


def test_integer_sum_wraps():
    model = _reduce_model("SUM", (4,), [0], False, tf.int32)
    x = np.array([2**31 - 1, 5, 2**31 - 1, 7], np.int32)
    assert_matches_litert(model, [x])


def test_integer_prod_wraps():
    model = _reduce_model("REDUCE_PROD", (4,), [0], True, tf.int32)
    x = np.array([65536, 65537, 3, -7], np.int32)
    assert_matches_litert(model, [x])


def _retyped(model_bytes: bytes, type_name: str) -> bytes:
    """The model with its input and output tensors retyped (the converter only emits int32
    and int64 integer reductions; LiteRT also runs 8/16-bit and bool ones)."""
    model = read_model(model_bytes)
    graph = model.subgraphs[0]
    for i in graph.inputs + graph.outputs:
        graph.tensors[i].type = type_name
    return write_model(model)


SMALL_TYPES = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16}


SMALL_CASES = [(name, t) for name in ("REDUCE_MAX", "REDUCE_MIN") for t in sorted(SMALL_TYPES)]
SMALL_CASES += [("REDUCE_PROD", "INT8"), ("REDUCE_PROD", "INT16")]  # LiteRT's PROD has no uint8


@pytest.mark.parametrize("name,type_name", SMALL_CASES, ids=str)
def test_small_integer_reduce(name, type_name):
    """Non-quantized 8/16-bit reductions work in the input type (products wrap)."""
    model = _retyped(_reduce_model(name, (3, 6), [1], False, tf.int32), type_name)
    dtype = SMALL_TYPES[type_name]
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (3, 6), endpoint=True).astype(dtype)
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("name", ["SUM", "MEAN"])
def test_unquantized_int8_sum_and_mean_are_rejected(name):
    """LiteRT runs 8-bit SUM/MEAN as requantizing kernels; without quantization parameters its
    results are meaningless (scale 0/0). numlite refuses such models at allocation."""
    model = _retyped(_reduce_model(name, (3, 6), [1], False, tf.int32), "INT8")
    with pytest.raises(numlite.PrepareError, match="dtype int8"):
        numlite.Interpreter(model_content=model).allocate_tensors()


@pytest.mark.parametrize("name", ["REDUCE_MAX", "REDUCE_MIN"])
def test_bool_reduce_is_rejected(name):
    """LiteRT accepts a bool REDUCE_MAX/MIN at allocation and fails at invoke; numlite fails
    at allocation."""
    model = _retyped(_reduce_model(name, (4, 5), [1], True, tf.int32), "BOOL")
    x = np.random.default_rng(3).random((4, 5)) < 0.3
    with pytest.raises(RuntimeError):
        run_litert(model, [x])
    with pytest.raises(numlite.PrepareError, match="dtype bool"):
        numlite.Interpreter(model_content=model).allocate_tensors()


def _with_axis(model_bytes: bytes, new_axis: list[int]) -> bytes:
    """Rewrite the constant axis tensor of the model's only reduction (same length)."""
    model = read_model(model_bytes)
    graph = model.subgraphs[0]
    op = graph.operators[0]
    axis_tensor = graph.tensors[op.inputs[1]]
    data = np.array(new_axis, np.int32)
    assert axis_tensor.shape == data.shape
    model.buffers[axis_tensor.buffer].data = np.frombuffer(data.tobytes(), np.uint8)
    return write_model(model)


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_duplicate_axes(name, keep_dims):
    """TensorFlow refuses duplicate axes, so they are written into a converted model."""
    model = _with_axis(_reduce_model(name, (2, 3, 4), [0, 1, 2], keep_dims), [2, -1, 0])
    rng = np.random.default_rng(3)
    assert_matches_litert(model, [rng.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)])


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("name", ["MEAN", "SUM", "REDUCE_MAX"])
def test_runtime_axes(name, keep_dims):
    """The axes as a model input: the output shape is known only at invoke; an empty axis
    list reduces nothing."""
    fn = REDUCERS[name]
    model = convert(
        lambda x, axis: fn(x, axis=axis, keepdims=keep_dims),
        [tf.TensorSpec((2, 3, 4), tf.float32), tf.TensorSpec((None,), tf.int32)],
        key=("runtime-axes", name, keep_dims),
    )
    assert name in op_names(model)
    x = np.random.default_rng(4).uniform(-2, 2, (2, 3, 4)).astype(np.float32)
    for axes in ([1], [-1, 0], [], [2, 0, 1]):
        assert_matches_litert(model, [x, np.array(axes, np.int32)])


@pytest.mark.parametrize("axes", [[1], [0, 2], [-1, 0, 1]], ids=str)
@pytest.mark.parametrize("name", ["REDUCE_MAX", "REDUCE_MIN"])
def test_max_min_with_nan(name, axes):
    """LiteRT's reducer keeps the new element unless it is strictly worse, so a NaN is
    replaced by the element after it: only trailing NaNs survive. Compared with LiteRT's builtin
    kernels: with its default delegate, XNNPACK takes whole reductions, and which NaN survives
    there depends on the SIMD micro-kernel the CPU selects (on some machines NaNs are skipped)."""
    model = _reduce_model(name, (3, 4, 5), axes, False)
    rng = np.random.default_rng(10)
    x = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    x[0, 0, :] = np.nan
    x[1, :, 4] = np.nan
    x[2, 3, 0] = np.nan
    assert_matches_litert(model, [x], builtin_only=True)


# (input shape, axes): large enough for the halving reduction (``reduce.TREE_FROM``), with odd
# and even reduced lengths, over leading, middle and last axes.
TREE_CASES = [
    ((1, 56, 56, 64), [1, 2]),  # a global max pool: 3136 values per channel
    ((1, 56, 56, 64), [3]),  # over channels: transposed first
    ((2, 37, 45, 20), [1, 2]),  # 1665 values, odd at several halvings
    ((3, 41, 29, 17), [2, 3]),  # the last axes of an odd length: transposed
    ((300, 9, 33), [0]),  # a leading axis
]


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("shape,axes", TREE_CASES, ids=str)
@pytest.mark.parametrize("name", ["REDUCE_MAX", "REDUCE_MIN"])
def test_large_extrema_by_halving(name, shape, axes, keep_dims):
    from numlite.kernels import reduce

    model = _reduce_model(name, shape, axes, keep_dims)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    (step,) = [s for s in interpreter.subgraph(0).plan if s.op_name == name]
    assert step.kernel.tree is not None and reduce.TREE_FROM <= int(np.prod(shape))
    rng = np.random.default_rng(11)
    for k in range(2):  # a second invoke with other values: the halving buffers are reused
        x = rng.uniform(-5, 5, shape).astype(np.float32)
        assert_matches_litert(model, [x])


@pytest.mark.parametrize("name", ["REDUCE_MAX", "REDUCE_MIN"])
def test_large_extrema_with_nan_and_integers(name):
    """The halving path keeps LiteRT's NaN rule (builtin kernels) and integer inputs exact."""
    model = _reduce_model(name, (1, 40, 40, 24), [1, 2], False)
    rng = np.random.default_rng(12)
    x = rng.uniform(-2, 2, (1, 40, 40, 24)).astype(np.float32)
    x[rng.random(x.shape) < 0.01] = np.nan
    x[0, -1, -1, :3] = np.nan  # trailing NaNs survive
    assert_matches_litert(model, [x], builtin_only=True)
    int_model = _reduce_model(name, (1, 40, 40, 24), [3], True, tf.int32)
    assert_matches_litert(int_model, [rng.integers(-1000, 1000, (1, 40, 40, 24)).astype(np.int32)])


def test_axis_out_of_range_is_rejected():
    model = _with_axis(_reduce_model("SUM", (2, 3), [1], False), [2])
    interpreter = numlite.Interpreter(model_content=model)
    with pytest.raises(numlite.PrepareError, match="axis"):
        interpreter.allocate_tensors()


def test_empty_input_mean_and_max():
    """Reducing an empty axis: MEAN gives NaN, REDUCE_MAX/MIN -inf/+inf, SUM 0."""
    for name in ("MEAN", "REDUCE_MAX", "REDUCE_MIN", "SUM", "REDUCE_PROD"):
        model = convert(
            lambda x, fn=REDUCERS[name]: fn(x, axis=1),
            [tf.TensorSpec((3, None), tf.float32)],
            key=("empty", name),
        )
        x = np.zeros((3, 0), np.float32)
        expected = run_litert(model, [x])
        actual = run_numlite(model, [x])
        np.testing.assert_array_equal(actual[0], expected[0])


# ----------------------------------------------------------------------------- ARG_MAX / ARG_MIN

ARG_CASES = [((4, 5), -1), ((4, 5), 0), ((2, 3, 4), 1), ((7,), 0)]


@pytest.mark.parametrize("output_type", [tf.int32, tf.int64])
@pytest.mark.parametrize("shape,axis", ARG_CASES, ids=str)
@pytest.mark.parametrize("name,fn", [("ARG_MAX", tf.math.argmax), ("ARG_MIN", tf.math.argmin)])
def test_arg_min_max(name, fn, shape, axis, output_type):
    model = convert(
        lambda x: fn(x, axis=axis, output_type=output_type),
        [tf.TensorSpec(shape, tf.float32)],
        key=(name, shape, axis, output_type),
    )
    assert name in op_names(model)
    rng = np.random.default_rng(5)
    assert_matches_litert(model, [rng.uniform(-2, 2, shape).astype(np.float32)])


@pytest.mark.parametrize("dtype", [tf.int32, tf.uint8, tf.int8])
@pytest.mark.parametrize("name,fn", [("ARG_MAX", tf.math.argmax), ("ARG_MIN", tf.math.argmin)])
def test_arg_min_max_ties_take_first_index(name, fn, dtype):
    model = convert(
        lambda x: fn(x, axis=1, output_type=tf.int32), [tf.TensorSpec((6, 8), dtype)], key=(name, "ties", dtype)
    )
    assert name in op_names(model)
    rng = np.random.default_rng(6)
    x = rng.integers(0, 3, (6, 8)).astype(dtype.as_numpy_dtype)  # many ties
    expected = assert_matches_litert(model, [x])
    pick = np.argmax if name == "ARG_MAX" else np.argmin
    np.testing.assert_array_equal(expected[0], pick(x, axis=1))  # premise: first index wins


@pytest.mark.parametrize("name,fn", [("ARG_MAX", tf.math.argmax), ("ARG_MIN", tf.math.argmin)])
def test_arg_min_max_with_nan(name, fn):
    """LiteRT skips NaNs (index 0 for an all-NaN row). Rows of 3: LiteRT's SIMD kernel for
    longer rows handles NaNs in a position- and CPU-dependent way that numlite does not mimic."""
    model = convert(lambda x: fn(x, axis=-1, output_type=tf.int32), [tf.TensorSpec((8, 3), tf.float32)], key=(name, "nan"))
    nan = np.nan
    x = np.array(
        [[nan, 1, 2], [1, nan, 5], [1, 2, nan], [nan] * 3, [4, nan, -4], [nan, nan, 3], [-1, nan, -1], [2, 2, nan]],
        np.float32,
    )
    assert_matches_litert(model, [x])


def test_bool_arg_max():
    """The converter rejects a bool argmax; LiteRT's kernel takes it (retyped model)."""
    model = _retyped(convert(lambda x: tf.math.argmax(x, axis=1, output_type=tf.int32), [tf.TensorSpec((4, 6), tf.int32)]), "BOOL")
    model = read_model(model)
    graph = model.subgraphs[0]
    graph.tensors[graph.outputs[0]].type = "INT32"
    x = np.random.default_rng(9).random((4, 6)) < 0.4
    assert_matches_litert(write_model(model), [x])


def test_int64_arg_max_is_rejected():
    model = read_model(convert(lambda x: tf.math.argmax(x, axis=1, output_type=tf.int32), [tf.TensorSpec((4, 6), tf.int32)]))
    graph = model.subgraphs[0]
    graph.tensors[graph.inputs[0]].type = "INT64"
    data = write_model(model)
    with pytest.raises(RuntimeError, match="input type"):
        run_litert(data, [np.zeros((4, 6), np.int64)])
    with pytest.raises(numlite.PrepareError, match="dtype int64"):
        numlite.Interpreter(model_content=data).allocate_tensors()


def test_arg_max_runtime_axis():
    model = convert(
        lambda x, a: tf.math.argmax(x, axis=a[0], output_type=tf.int32),
        [tf.TensorSpec((3, 4, 5), tf.float32), tf.TensorSpec((1,), tf.int32)],
    )
    assert "ARG_MAX" in op_names(model)
    x = np.random.default_rng(7).uniform(-1, 1, (3, 4, 5)).astype(np.float32)
    for axis in (0, 2, -2):
        assert_matches_litert(model, [x, np.array([axis], np.int32)])


# ----------------------------------------------------------------------------- CUMSUM


@pytest.fixture(params=["slabs", "numpy"])
def scan_path(request, monkeypatch):
    """CUMSUM by whole slabs (reduce.SCAN_MIN_SLAB lowered to 1) or by NumPy's accumulate."""
    from numlite.kernels import reduce

    monkeypatch.setattr(reduce, "SCAN_MIN_SLAB", 1 if request.param == "slabs" else 1 << 40)
    return request.param


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,axis", [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -2), ((6,), 0)], ids=str)
def test_cumsum(shape, axis, exclusive, reverse, scan_path):
    model = convert(
        lambda x: tf.math.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse),
        [tf.TensorSpec(shape, tf.float32)],
        key=("cumsum", shape, axis, exclusive, reverse),
    )
    assert "CUMSUM" in op_names(model)
    assert_matches_litert(model)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, True)])
def test_integer_cumsum(dtype, exclusive, reverse, scan_path):
    model = convert(
        lambda x: tf.math.cumsum(x, axis=-1, exclusive=exclusive, reverse=reverse),
        [tf.TensorSpec((3, 6), dtype)],
        key=("cumsum", dtype, exclusive, reverse),
    )
    assert "CUMSUM" in op_names(model)
    x = np.random.default_rng(8).integers(-100, 100, (3, 6)).astype(dtype.as_numpy_dtype)
    assert_matches_litert(model, [x])
    info = np.iinfo(dtype.as_numpy_dtype)  # sums that wrap around, as LiteRT's do
    assert_matches_litert(model, [np.full((3, 6), info.max // 3, dtype.as_numpy_dtype)])


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, True)])
@pytest.mark.parametrize("axis", [1, 3])
def test_large_cumsum_by_slabs(axis, exclusive, reverse):
    """An image's running sum along H (slabs of W x C values) or along the channels (slabs of
    H x W values, strided), at the default thresholds, as LiteRT sums them."""
    from numlite.kernels import reduce

    shape = (1, 20, 24, 16)
    model = convert(
        lambda x: tf.math.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse),
        [tf.TensorSpec(shape, tf.float32)],
        key=("cumsum", shape, axis, exclusive, reverse),
    )
    assert np.prod(shape) // shape[axis] >= reduce.SCAN_MIN_SLAB
    x = np.random.default_rng(9).uniform(-3, 3, shape).astype(np.float32)
    assert_matches_litert(model, [x])


# ----------------------------------------------------------------------------- REDUCE_ANY / ALL

LOGICAL = {"REDUCE_ANY": tf.reduce_any, "REDUCE_ALL": tf.reduce_all}
LOGICAL_CASES = [((3, 4), [1]), ((2, 3, 4), [-1, 0]), ((2, 3, 4), [0, 1, 2]), ((5,), [0]), ((2, 3, 4, 5), [1, 2])]


def _logical_model(name, shape, axes, keep_dims):
    fn = LOGICAL[name]
    return convert(
        lambda x: fn(x, axis=axes, keepdims=keep_dims),
        [tf.TensorSpec(shape, tf.bool)],
        key=("logical-reduce", name, shape, tuple(axes), keep_dims),
    )


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("shape,axes", LOGICAL_CASES, ids=str)
@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_reduce(name, shape, axes, keep_dims):
    model = _logical_model(name, shape, axes, keep_dims)
    assert op_names(model) == [name]
    rng = np.random.default_rng(len(shape))
    # Mostly-true for ALL and mostly-false for ANY, so that both outcomes occur.
    p = 0.85 if name == "REDUCE_ALL" else 0.15
    assert_matches_litert(model, [rng.random(shape) < p])


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_reduce_duplicate_and_runtime_axes(name):
    model = _with_axis(_logical_model(name, (2, 3, 4), [0, 1, 2], True), [2, -1, 0])
    x = np.random.default_rng(5).random((2, 3, 4)) < 0.5
    assert_matches_litert(model, [x])
    fn = LOGICAL[name]
    runtime = convert(
        lambda x, axis: fn(x, axis=axis),
        [tf.TensorSpec((2, 3, 4), tf.bool), tf.TensorSpec((None,), tf.int32)],
        key=("logical-runtime-axes", name),
    )
    for axes in ([1], [-1, 0], []):
        assert_matches_litert(runtime, [x, np.array(axes, np.int32)])


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_reduce_of_empty_axis(name):
    """An empty reduction: ANY gives False, ALL gives True."""
    fn = LOGICAL[name]
    model = convert(lambda x: fn(x, axis=1), [tf.TensorSpec((3, None), tf.bool)], key=("logical-empty", name))
    assert name in op_names(model)
    x = np.zeros((3, 0), np.bool_)
    np.testing.assert_array_equal(run_numlite(model, [x])[0], run_litert(model, [x])[0])


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_reduce_rejects_non_bool(name):
    model = _retyped(_logical_model(name, (3, 4), [1], False), "INT32")
    with pytest.raises(RuntimeError):
        run_litert(model, [np.ones((3, 4), np.int32)])
    with pytest.raises(numlite.PrepareError, match="dtype int32"):
        numlite.Interpreter(model_content=model).allocate_tensors()


@pytest.mark.parametrize(
    "shape,axes",
    [((1, 6, 6, 8), [1, 2]), ((2, 6, 6, 8), [1, 2]), ((3, 40), [1]), ((20, 3), [0])],
    ids=["global pool", "global pool, batch 2", "last axis", "first axis"],
)
@pytest.mark.parametrize("name", ["MEAN", "SUM"])
def test_float_mean_and_sum_as_one_product_on_repeated_invokes(name, shape, axes, engine):
    """A float32 MEAN or SUM over consecutive axes of 16 values or more is one BLAS product with
    ones (and MEAN's division), on views made at the first invoke (MEAN) or when the plan is
    compiled at the second (SUM's direct call), then reused: new data at each invoke of one
    allocation must still match LiteRT (order-one results: values offset from zero)."""
    model = _reduce_model(name, shape, axes, False)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(0.5 * seed - 1, 2.0, shape).astype(np.float32)
        expected = run_litert(model, [x])[0]
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    if engine != "numpy":
        return  # the NumPy engine's own machinery (the compiled engine runs none of it)
    (step,) = [st for st in interpreter.subgraph(0).steps if st.op_name == name]
    kernel = getattr(step.kernel, "impl", step.kernel)  # the float kernel behind the dispatch
    if name == "MEAN":
        assert kernel.bound[2] is not None  # the product path ran
    else:
        assert interpreter.subgraph(0)._program.calls[0][1] in (np.matmul, dot_into)  # SUM direct


# ------------------------------------------------------------------------ UNSORTED_SEGMENT_*


def test_unsorted_segment_ids_from_data_on_both_engines(engine):
    """Ids read from data (negative ones dropped, empty segments at the type's lowest value)
    match LiteRT; an id at or past num_segments fails in LiteRT, and numlite raises the NumPy
    kernel's InvokeError word for word on both engines (the compiled kernel checks the ids)."""
    model = convert(lambda x, i: tf.math.unsorted_segment_max(x, i, 4), [tf.TensorSpec((5, 3)), tf.TensorSpec((5,), tf.int32)],
                    key="unsorted_segment_max ids from data")
    assert op_names(model) == ["UNSORTED_SEGMENT_MAX"]
    x = np.random.default_rng(0).uniform(-5, 5, (5, 3)).astype(np.float32)
    interpreter = numlite.Interpreter(model_content=model)  # compiled on the jit side (NUMLITE_JIT=1)
    interpreter.allocate_tensors()
    assert engine == "numpy" or interpreter.jit_report()["subgraphs"][0]["compiled"], interpreter.jit_report()
    data_in, ids_in = (d["index"] for d in interpreter.get_input_details())
    interpreter.set_tensor(data_in, x)
    for ids in ([3, 0, -1, 3, 1], [2, 2, 2, 0, 0]):
        ids = np.array(ids, np.int32)
        interpreter.set_tensor(ids_in, ids)
        interpreter.invoke()
        np.testing.assert_array_equal(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]),
                                      run_litert(model, [x, ids])[0])
    bad = np.array([0, 1, 4, 2, -3], np.int32)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, [x, bad])
    interpreter.set_tensor(ids_in, bad)
    with pytest.raises(numlite.InvokeError) as error:
        interpreter.invoke()
    assert str(error.value) == "subgraph 0, node 0 (UNSORTED_SEGMENT_MAX) failed: segment id 4 is not below num_segments 4"


def test_segment_sum_ids_from_data_on_both_engines(engine):
    """SEGMENT_SUM's output rows are the last id + 1, known only once the ids are: two invokes
    of one allocation with 3 and 5 segments match LiteRT; ids that skip one fail in LiteRT, and
    numlite raises the same error on both engines (a PrepareError naming the node: the NumPy engine
    prepares the node at run time, where its kernel checks the ids)."""
    model = convert(lambda x, i: tf.math.segment_sum(x, i), [tf.TensorSpec((6, 2)), tf.TensorSpec((6,), tf.int32)],
                    key="segment_sum ids from data")
    assert op_names(model) == ["SEGMENT_SUM"]
    x = np.random.default_rng(1).uniform(-5, 5, (6, 2)).astype(np.float32)
    interpreter = numlite.Interpreter(model_content=model)  # compiled on the jit side (NUMLITE_JIT=1)
    interpreter.allocate_tensors()
    assert engine == "numpy" or interpreter.jit_report()["subgraphs"][0]["compiled"], interpreter.jit_report()
    data_in, ids_in = (d["index"] for d in interpreter.get_input_details())
    interpreter.set_tensor(data_in, x)
    for ids in ([0, 0, 1, 1, 1, 2], [0, 1, 2, 2, 3, 4]):
        ids = np.array(ids, np.int32)
        interpreter.set_tensor(ids_in, ids)
        interpreter.invoke()
        np.testing.assert_allclose(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]),
                                   run_litert(model, [x, ids])[0], rtol=1e-5, atol=1e-5)
    bad = np.array([0, 0, 2, 2, 3, 3], np.int32)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, [x, bad])
    interpreter.set_tensor(ids_in, bad)
    with pytest.raises(numlite.PrepareError) as error:
        interpreter.invoke()
    assert str(error.value) == "subgraph 0, node 0 (SEGMENT_SUM): segment ids must start at 0 and grow by 0 or 1, got [0, 0, 2, 2, 3, 3]"
