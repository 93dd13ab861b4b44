"""Indexing ops against LiteRT: SLICE, STRIDED_SLICE (all masks, offset, negative strides,
clamping), GATHER (axis, batch_dims), GATHER_ND, DYNAMIC_UPDATE_SLICE, EMBEDDING_LOOKUP,
SCATTER_ND (duplicates, bounds) and ONE_HOT (axis, dtypes, run-time depth)."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla

import numlite
from helpers import seeded_values, assert_matches_litert, convert, op_names, run_litert, run_numlite
from numlite.model import OperatorCode, Quantization, read_model, write_model

DTYPES = [tf.int32, tf.int64, tf.bool, tf.int8, tf.uint8]


def values(shape, dtype, seed=0):
    return seeded_values(shape, dtype, seed)


def assert_both_fail(model, inputs):
    """LiteRT rejects these inputs; numlite must raise its own error, not return numbers."""
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, inputs)
    with pytest.raises(numlite.NumliteError):
        run_numlite(model, inputs)


def set_constant(model, tensor_index, value):
    """Replace the data (and shape) of a constant tensor of subgraph 0 of a read model."""
    t = model.subgraphs[0].tensors[tensor_index]
    t.shape = tuple(value.shape)
    model.buffers[t.buffer].data = np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)


# ------------------------------------------------------------------------------------ SLICE

SLICES = [
    ((3, 4), [1, 0], [-1, 2]),
    ((2, 3, 4), [0, 1, 1], [2, -1, 2]),
    ((5,), [2], [3]),  # (an empty slice is folded away by the converter)
    ((4, 3, 2, 5), [1, 0, 1, 2], [2, 3, -1, 3]),
    ((2, 1, 3, 2, 2, 3), [1, 0, 1, 0, 1, 0], [-1, -1, 2, 1, 1, -1]),  # rank 6: LiteRT's generic path
]


@pytest.mark.parametrize("shape,begin,size", SLICES, ids=str)
def test_slice(shape, begin, size):
    model = convert(lambda x: tf.slice(x, begin, size), [tf.TensorSpec(shape, tf.float32)], key=("slice", shape))
    assert "SLICE" in op_names(model)
    assert_matches_litert(model)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_slice_dtypes(dtype):
    model = convert(lambda x: tf.slice(x, [1, 1], [2, -1]), [tf.TensorSpec((3, 4), dtype)], key=("slice", dtype))
    assert "SLICE" in op_names(model)
    assert_matches_litert(model, [values((3, 4), dtype)])


def test_slice_int64_begin_and_size():
    # The converter narrows constant int64 begin/size to int32; widen them back by editing.
    m = read_model(convert(lambda x: tf.slice(x, [0, 2], [2, -1]), [tf.TensorSpec((3, 5), tf.float32)], key="slice64"))
    op = m.subgraphs[0].operators[0]
    assert m.op_name(op) == "SLICE"
    for i in op.inputs[1:]:
        value = m.constant(m.subgraphs[0], i).astype(np.int64)
        m.subgraphs[0].tensors[i].type = "INT64"
        set_constant(m, i, value)
    assert_matches_litert(write_model(m))


def test_slice_begin_computed_at_run_time():
    """The begin comes from an input, so the output shape is known only at invoke (size -1)."""
    model = convert(
        lambda x, b: tf.slice(x, b * 2, [-1, 2]),
        [tf.TensorSpec((6, 5), tf.float32), tf.TensorSpec((2,), tf.int32)],
        key="slice-dynamic",
    )
    assert "SLICE" in op_names(model)
    x = values((6, 5), tf.float32)
    for b in ([0, 0], [1, 1], [2, 0]):
        assert_matches_litert(model, [x, np.array(b, np.int32)])
    assert_both_fail(model, [x, np.array([4, 0], np.int32)])  # begin 8 is past the axis


def test_slice_static_size_dynamic_begin():
    model = convert(
        lambda x, b: tf.slice(x, b, [2, 3]), [tf.TensorSpec((4, 5), tf.float32), tf.TensorSpec((2,), tf.int32)], key="slice-dyn2"
    )
    assert "SLICE" in op_names(model)
    x = values((4, 5), tf.float32)
    for b in ([0, 0], [2, 2], [1, 0]):
        assert_matches_litert(model, [x, np.array(b, np.int32)])


# ---------------------------------------------------------------------------- STRIDED_SLICE

PYTHON_SLICES = {
    "1:,::2": lambda x: x[1:, ::2],
    "...,1": lambda x: x[..., 1],
    "::-1": lambda x: x[::-1],
    ":,newaxis": lambda x: x[:, tf.newaxis],
    "-3:-1,1::-1": lambda x: x[-3:-1, 1::-1],
    "5:0:-2": lambda x: x[5:0:-2],
    "-1": lambda x: x[-1],
    "1:-1,2": lambda x: x[1:-1, 2],
    "-10:10,-9:": lambda x: x[-10:10, -9:],  # clamped
    # (empty slices such as x[3:1] are folded away by the converter)
    "::-2,::3": lambda x: x[::-2, ::3],
    "...,::-1,1": lambda x: x[..., ::-1, 1],
    "newaxis,...,1:3,newaxis": lambda x: x[tf.newaxis, ..., 1:3, tf.newaxis],
    "4:-10:-1,-1:": lambda x: x[4:-10:-1, -1:],
}


@pytest.mark.parametrize("name", sorted(PYTHON_SLICES))
def test_python_slicing(name):
    fn = PYTHON_SLICES[name]
    model = convert(lambda x: fn(x), [tf.TensorSpec((6, 5, 3), tf.float32)], key=("pyslice", name))
    assert {"STRIDED_SLICE", "SLICE", "RESHAPE"} & set(op_names(model)), op_names(model)
    x = values((6, 5, 3), tf.float32)
    expected = assert_matches_litert(model, [x])
    np.testing.assert_array_equal(expected[0], fn(tf.constant(x)).numpy())


STRIDED = [
    # begin, end, strides, begin_mask, end_mask, shrink_axis_mask
    ([1, 0, 2], [5, 4, 0], [2, 1, -1], 0, 0, 0),
    ([1, 3, 0], [4, 0, 3], [1, -1, 1], 1, 0, 0),
    ([-2, -1, 1], [-5, -6, 2], [-1, -2, 1], 0, 2, 4),
    ([0, 2, 1], [0, 3, 2], [1, 1, 1], 5, 5, 2),
    ([2, 0, 0], [3, 5, 3], [1, 2, 1], 0, 0, 1),
    ([7, -7, 5], [-8, 9, -9], [-3, 3, -1], 0, 0, 0),  # begins and ends out of range
    ([1, 1], [4, 4], [1, 2], 0, 0, 0),  # fewer indices than the rank: the rest is whole
]


@pytest.mark.parametrize("spec", STRIDED, ids=str)
def test_strided_slice_masks(spec):
    begin, end, strides, bm, em, sm = spec
    model = convert(
        lambda x: tf.strided_slice(x, begin, end, strides, begin_mask=bm, end_mask=em, shrink_axis_mask=sm),
        [tf.TensorSpec((6, 5, 3), tf.float32)],
        key=("ss", str(spec)),
    )
    assert "STRIDED_SLICE" in op_names(model)
    assert_matches_litert(model)


UNKNOWN_RANK = {
    "...,1": lambda x: x[..., 1],
    "1:,...,newaxis,0": lambda x: x[1:, ..., tf.newaxis, 0],
    "newaxis,...,::-1": lambda x: x[tf.newaxis, ..., ::-1],
    "::2,newaxis,...": lambda x: x[::2, tf.newaxis, ...],
    "-1,...,1:3": lambda x: x[-1, ..., 1:3],
}


@pytest.mark.parametrize("shape", [(4, 5, 3), (3, 4), (2, 3, 2, 4)], ids=str)
@pytest.mark.parametrize("name", sorted(UNKNOWN_RANK))
def test_ellipsis_and_new_axis_masks(name, shape):
    """With an input of unknown rank the converter cannot expand ``...`` or ``tf.newaxis``,
    so the model keeps ellipsis_mask and new_axis_mask for the kernel to apply."""
    fn = UNKNOWN_RANK[name]
    model = convert(lambda x: fn(x), [tf.TensorSpec(None, tf.float32)], key=("unknown-rank", name))
    opts = [op.builtin_options for op in read_model(model).subgraphs[0].operators]
    assert any(o.ellipsis_mask for o in opts if o is not None)
    x = values(shape, tf.float32)
    expected = assert_matches_litert(model, [x])
    specs = 2 + ("newaxis" in name)  # indices besides the ellipsis, new axes included
    if len(shape) + name.count("newaxis") > specs:
        np.testing.assert_array_equal(expected[0], fn(tf.constant(x)).numpy())
    # else the ellipsis should cover no axis; LiteRT always expands it to at least one, so
    # LiteRT (and numlite, which follows it) differ from TensorFlow there.


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_slice_dtypes(dtype):
    model = convert(lambda x: x[::-1, 1::2], [tf.TensorSpec((4, 5), dtype)], key=("ss-dtype", dtype))
    assert "STRIDED_SLICE" in op_names(model)
    assert_matches_litert(model, [values((4, 5), dtype)])


def test_strided_slice_indices_computed_at_run_time():
    model = convert(
        lambda x, b, e: tf.strided_slice(x, b, e, [1, -1]),
        [tf.TensorSpec((5, 4), tf.float32), tf.TensorSpec((2,), tf.int32), tf.TensorSpec((2,), tf.int32)],
        key="ss-dynamic",
    )
    assert "STRIDED_SLICE" in op_names(model)
    x = values((5, 4), tf.float32)
    # (LiteRT's Python API cannot read an empty dynamic output, so every case is non-empty)
    for b, e in [([0, 3], [5, -5]), ([1, -1], [3, 1]), ([-2, 2], [9, 0]), ([4, 9], [5, -9])]:
        assert_matches_litert(model, [x, np.array(b, np.int32), np.array(e, np.int32)])


def test_strided_slice_strides_computed_at_run_time():
    model = convert(
        lambda x, s: tf.strided_slice(x, [0, 3], [5, 0], s),
        [tf.TensorSpec((5, 4), tf.float32), tf.TensorSpec((2,), tf.int32)],
        key="ss-strides",
    )
    x = values((5, 4), tf.float32)
    for s in ([1, -1], [2, -2], [3, -3]):
        assert_matches_litert(model, [x, np.array(s, np.int32)])


def test_strided_slice_offset():
    """``x[b : b + 2]`` with a run-time b becomes STRIDED_SLICE with offset=True: the end
    tensor holds sizes relative to the begin."""
    model = convert(
        lambda x, b: tf.strided_slice(x, b, b + [2, 3]),
        [tf.TensorSpec((5, 4), tf.float32), tf.TensorSpec((2,), tf.int32)],
        key="ss-offset",
    )
    m = read_model(model)
    assert any(op.builtin_options is not None and getattr(op.builtin_options, "offset", False) for op in m.subgraphs[0].operators)
    x = values((5, 4), tf.float32)
    for b in ([0, 0], [3, 1], [1, 0], [-5, -4]):
        assert_matches_litert(model, [x, np.array(b, np.int32)])


def test_strided_slice_zero_stride_is_rejected():
    model = read_model(convert(lambda x: x[::2], [tf.TensorSpec((6, 2), tf.float32)], key="ss-zero"))
    op = model.subgraphs[0].operators[0]
    assert model.op_name(op) == "STRIDED_SLICE"
    strides = model.constant(model.subgraphs[0], op.inputs[3]).copy()
    strides[0] = 0
    set_constant(model, op.inputs[3], strides)
    bad = write_model(model)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(bad, [values((6, 2), tf.float32)])
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=bad).allocate_tensors()


def test_strided_slice_rejects_int64_indices():
    model = read_model(convert(lambda x: x[1:], [tf.TensorSpec((6, 2), tf.float32)], key="ss-int64"))
    op = model.subgraphs[0].operators[0]
    for i in op.inputs[1:]:
        t = model.subgraphs[0].tensors[i]
        value = model.constant(model.subgraphs[0], i).astype(np.int64)
        t.type = "INT64"
        set_constant(model, i, value)
    bad = write_model(model)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(bad, [values((6, 2), tf.float32)])
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=bad).allocate_tensors()


# ----------------------------------------------------------------------------------- GATHER

GATHERS = [
    # params shape, indices shape, axis, batch_dims
    ((5, 4), (3,), 0, 0),
    ((3, 4), (2, 2), 1, 0),
    ((3, 4, 2), (5,), -1, 0),
    ((3, 4, 2), (2, 3), -2, 0),
    ((3, 4, 5), (3, 2), 1, 1),
    ((2, 3, 4, 5), (2, 3, 2), 2, 2),
    ((2, 3, 4, 5), (2, 6), -1, 1),
    ((2, 3, 4), (2, 5), 2, -1),
    ((4, 3), (), 0, 0),  # scalar index drops the axis
]


@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64], ids=str)
@pytest.mark.parametrize("case", GATHERS, ids=str)
def test_gather(case, index_dtype):
    shape, ishape, axis, batch_dims = case
    model = convert(
        lambda x, i: tf.gather(x, i, axis=axis, batch_dims=batch_dims),
        [tf.TensorSpec(shape, tf.float32), tf.TensorSpec(ishape, index_dtype)],
        key=("gather", case, index_dtype),
    )
    assert "GATHER" in op_names(model)
    rng = np.random.default_rng(3)
    x = values(shape, tf.float32)
    idx = rng.integers(0, shape[axis], ishape).astype(index_dtype.as_numpy_dtype)
    expected = assert_matches_litert(model, [x, idx])
    np.testing.assert_array_equal(expected[0], tf.gather(x, idx, axis=axis, batch_dims=batch_dims).numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_dtypes(dtype):
    model = convert(
        lambda x, i: tf.gather(x, i, axis=1),
        [tf.TensorSpec((3, 4), dtype), tf.TensorSpec((5,), tf.int32)],
        key=("gather-dtype", dtype),
    )
    assert "GATHER" in op_names(model)
    assert_matches_litert(model, [values((3, 4), dtype), np.array([3, 0, 1, 1, 2], np.int32)])


def test_gather_from_constant_params():
    table = np.random.default_rng(5).uniform(-1, 1, (6, 3)).astype(np.float32)
    model = convert(lambda i: tf.gather(table, i), [tf.TensorSpec((4,), tf.int32)], key="gather-const")
    assert "GATHER" in op_names(model)
    assert_matches_litert(model, [np.array([5, 0, 2, 5], np.int32)])


@pytest.mark.parametrize("bad", [[1, 4], [-1, 0]], ids=str)
def test_gather_out_of_range_is_an_error(bad):
    model = convert(
        lambda x, i: tf.gather(x, i, axis=1), [tf.TensorSpec((3, 4), tf.float32), tf.TensorSpec((2,), tf.int32)], key="gather-oob"
    )
    assert_both_fail(model, [values((3, 4), tf.float32), np.array(bad, np.int32)])


def test_gather_rejects_bad_axis():
    model = read_model(
        convert(lambda x, i: tf.gather(x, i, axis=1), [tf.TensorSpec((3, 4), tf.float32), tf.TensorSpec((2,), tf.int32)], key="gather-oob")
    )
    model.subgraphs[0].operators[0].builtin_options.axis = 2
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


# -------------------------------------------------------------------------------- GATHER_ND

GATHER_NDS = [((3, 4), (2, 2)), ((3, 4), (2, 1)), ((2, 3, 4), (2, 3, 2)), ((2, 3, 4), (5, 3)), ((4, 3, 2), (2, 2, 1))]


@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64], ids=str)
@pytest.mark.parametrize("shapes", GATHER_NDS, ids=str)
def test_gather_nd(shapes, index_dtype):
    shape, ishape = shapes
    model = convert(
        lambda x, i: tf.gather_nd(x, i),
        [tf.TensorSpec(shape, tf.float32), tf.TensorSpec(ishape, index_dtype)],
        key=("gather_nd", shapes, index_dtype),
    )
    assert "GATHER_ND" in op_names(model)
    rng = np.random.default_rng(4)
    limits = np.array(shape[: ishape[-1]])
    idx = (rng.random(ishape) * limits).astype(index_dtype.as_numpy_dtype)
    expected = assert_matches_litert(model, [values(shape, tf.float32), idx])
    np.testing.assert_array_equal(expected[0], tf.gather_nd(values(shape, tf.float32), idx).numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_nd_dtypes(dtype):
    model = convert(
        lambda x, i: tf.gather_nd(x, i),
        [tf.TensorSpec((3, 4), dtype), tf.TensorSpec((3, 2), tf.int32)],
        key=("gather_nd-dtype", dtype),
    )
    assert_matches_litert(model, [values((3, 4), dtype), np.array([[2, 3], [0, 0], [1, 2]], np.int32)])


def test_gather_nd_batch_dims():
    model = convert(
        lambda x, i: tf.gather_nd(x, i, batch_dims=1),
        [tf.TensorSpec((3, 4, 5), tf.float32), tf.TensorSpec((3, 2, 1), tf.int32)],
        key="gather_nd-batch",
    )
    assert "GATHER_ND" in op_names(model)
    assert_matches_litert(model, [values((3, 4, 5), tf.float32), np.array([[[3], [0]], [[1], [1]], [[2], [3]]], np.int32)])


@pytest.mark.parametrize("bad", [[[0, 5], [1, 1]], [[3, 0], [1, 1]], [[0, -1], [1, 1]]], ids=str)
def test_gather_nd_out_of_range_is_an_error(bad):
    """Even [0, 5] on a (3, 4) tensor, whose flat offset is inside the tensor, is rejected."""
    model = convert(
        lambda x, i: tf.gather_nd(x, i), [tf.TensorSpec((3, 4), tf.float32), tf.TensorSpec((2, 2), tf.int32)], key="gather_nd-oob"
    )
    assert_both_fail(model, [values((3, 4), tf.float32), np.array(bad, np.int32)])


# --------------------------------------------------------------------- DYNAMIC_UPDATE_SLICE

UPDATES = [
    ((5, 4), (2, 2), [1, 1]),
    ((5, 4), (2, 3), [4, 3]),  # clamped back so the update fits
    ((5, 4), (2, 3), [-3, -1]),  # clamped to 0
    ((3, 4, 5), (1, 4, 2), [2, 1, 7]),
    ((6,), (6,), [2]),  # update as large as the operand
    ((4, 3), (0, 3), [1, 0]),  # empty update
]


@pytest.mark.parametrize("case", UPDATES, ids=str)
def test_dynamic_update_slice(case):
    shape, ushape, start = case
    model = convert(
        lambda x, u, i: xla.dynamic_update_slice(x, u, i),
        [tf.TensorSpec(shape, tf.float32), tf.TensorSpec(ushape, tf.float32), tf.TensorSpec((len(shape),), tf.int32)],
        key=("dus", shape, ushape),
    )
    assert "DYNAMIC_UPDATE_SLICE" in op_names(model)
    assert_matches_litert(model, [values(shape, tf.float32), values(ushape, tf.float32, seed=1), np.array(start, np.int32)])


# (the converter does not map a uint8 XlaDynamicUpdateSlice to a builtin op)
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool, tf.int8], ids=str)
def test_dynamic_update_slice_dtypes(dtype):
    model = convert(
        lambda x, u, i: xla.dynamic_update_slice(x, u, i),
        [tf.TensorSpec((4, 5), dtype), tf.TensorSpec((2, 2), dtype), tf.TensorSpec((2,), tf.int64)],
        key=("dus-dtype", dtype),
    )
    assert "DYNAMIC_UPDATE_SLICE" in op_names(model)
    assert_matches_litert(model, [values((4, 5), dtype), values((2, 2), dtype, seed=2), np.array([3, 1], np.int64)])


def test_dynamic_update_slice_rejects_large_update():
    model = read_model(
        convert(
            lambda x, u, i: xla.dynamic_update_slice(x, u, i),
            [tf.TensorSpec((5, 4), tf.float32), tf.TensorSpec((2, 2), tf.float32), tf.TensorSpec((2,), tf.int32)],
            key=("dus", (5, 4), (2, 2)),
        )
    )
    graph = model.subgraphs[0]
    graph.tensors[graph.operators[0].inputs[1]].shape = (2, 5)
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


# ------------------------------------------------------------------------- EMBEDDING_LOOKUP


def embedding_model(table_shape, n_ids, constant_table=None):
    """The converter emits GATHER for embedding lookups; rewrite that GATHER (axis 0) into an
    EMBEDDING_LOOKUP, whose inputs are ids first, then the table."""
    if constant_table is None:
        fn = lambda t, i: tf.nn.embedding_lookup(t, i)  # noqa: E731
        specs = [tf.TensorSpec(table_shape, tf.float32), tf.TensorSpec((n_ids,), tf.int32)]
    else:
        fn = lambda i: tf.nn.embedding_lookup(constant_table, i)  # noqa: E731
        specs = [tf.TensorSpec((n_ids,), tf.int32)]
    model = read_model(convert(fn, specs, key=("embedding", table_shape, n_ids, constant_table is None)))
    (op,) = model.subgraphs[0].operators
    assert model.op_name(op) == "GATHER" and op.builtin_options.axis == 0
    model.operator_codes.append(OperatorCode("EMBEDDING_LOOKUP"))
    op.opcode_index = len(model.operator_codes) - 1
    op.inputs = [op.inputs[1], op.inputs[0]]
    op.builtin_options = None
    return model


@pytest.mark.parametrize("table_shape,n_ids", [((5, 4), 3), ((6, 2, 3), 4), ((3, 2), 7)], ids=str)
def test_embedding_lookup(table_shape, n_ids):
    model = write_model(embedding_model(table_shape, n_ids))
    assert op_names(model) == ["EMBEDDING_LOOKUP"]
    ids = np.random.default_rng(6).integers(0, table_shape[0], n_ids).astype(np.int32)
    assert_matches_litert(model, [values(table_shape, tf.float32), ids])


def test_embedding_lookup_constant_table_and_bad_ids():
    table = values((7, 3), tf.float32)
    model = write_model(embedding_model((7, 3), 4, constant_table=table))
    assert_matches_litert(model, [np.array([6, 0, 0, 3], np.int32)])
    assert_both_fail(model, [np.array([6, 7, 0, 3], np.int32)])
    assert_both_fail(model, [np.array([-1, 0, 0, 3], np.int32)])


@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
def test_embedding_lookup_hybrid_int8_table(per_row):
    """An int8 table with a float output is dequantized by the table's scale(s)."""
    model = embedding_model((5, 3), 4, constant_table=values((5, 3), tf.float32))
    graph = model.subgraphs[0]
    table = graph.tensors[graph.operators[0].inputs[1]]
    table.type = "INT8"
    set_constant(model, graph.operators[0].inputs[1], values((5, 3), tf.int8, seed=7))
    scale = np.linspace(0.01, 0.05, 5 if per_row else 1).astype(np.float32)
    table.quantization = Quantization(scale=scale, zero_point=np.zeros(scale.size, np.int64), quantized_dimension=0)
    assert_matches_litert(write_model(model), [np.array([4, 0, 2, 2], np.int32)])


def test_embedding_lookup_rejects_2d_ids():
    model = embedding_model((5, 4), 3)
    graph = model.subgraphs[0]
    graph.tensors[graph.operators[0].inputs[0]].shape = (3, 1)
    with pytest.raises(numlite.PrepareError):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


# ------------------------------------------------------------------------------- SCATTER_ND

# (indices shape, output shape): whole rows, single elements, slices of a rank-3 tensor,
# index lists of rank 3, and an index depth of 0 (every update lands on the whole output).
SCATTER_CASES = [
    ((4, 1), (5, 3)),
    ((6, 2), (3, 4)),
    ((5, 2), (3, 4, 2)),
    ((2, 3, 1), (4, 2, 3)),
    ((3, 0), (2, 2)),
]


def scatter_indices(indices_shape, out_shape, seed):
    """In-range indices with duplicates (coordinates drawn from a small range)."""
    rng = np.random.default_rng(seed)
    nd = indices_shape[-1]
    limits = np.array(out_shape[:nd], np.int64).reshape((1,) * (len(indices_shape) - 1) + (nd,))
    return (rng.integers(0, 1 << 20, indices_shape) % np.maximum(limits, 1)).astype(np.int32)


def scatter_model(indices_shape, out_shape, dtype=tf.float32):
    nd = indices_shape[-1]
    updates_shape = indices_shape[:-1] + out_shape[nd:]
    model = convert(
        lambda i, u: tf.scatter_nd(i, u, out_shape),
        [tf.TensorSpec(indices_shape, tf.int32), tf.TensorSpec(updates_shape, dtype)],
        key=("scatter_nd", indices_shape, out_shape, dtype),
    )
    return model, updates_shape


@pytest.mark.parametrize("indices_shape,out_shape", SCATTER_CASES, ids=str)
def test_scatter_nd(indices_shape, out_shape):
    model, updates_shape = scatter_model(indices_shape, out_shape)
    assert op_names(model) == ["SCATTER_ND"]
    assert_matches_litert(model, [scatter_indices(indices_shape, out_shape, 1), values(updates_shape, tf.float32)])


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool], ids=str)
def test_scatter_nd_dtypes(dtype):
    """Integer duplicates add (and wrap), bool duplicates OR."""
    model, updates_shape = scatter_model((8, 1), (3, 2), dtype)
    assert op_names(model) == ["SCATTER_ND"]
    indices = np.array([[0], [2], [0], [0], [2], [1], [0], [2]], np.int32)
    updates = values(updates_shape, dtype, seed=3)
    if dtype == tf.int32:
        updates[:4] = 2**30  # four of these on row 0 wrap around
    assert_matches_litert(model, [indices, updates])


def test_scatter_nd_shape_given_at_run_time():
    model = convert(
        lambda i, u, s: tf.scatter_nd(i, u, s),
        [tf.TensorSpec((4, 1), tf.int32), tf.TensorSpec((4, 3), tf.float32), tf.TensorSpec((2,), tf.int32)],
        key="scatter_nd runtime shape",
    )
    assert op_names(model) == ["SCATTER_ND"]
    indices = np.array([[1], [0], [1], [4]], np.int32)
    updates = values((4, 3), tf.float32)
    for rows in (5, 7):
        assert_matches_litert(model, [indices, updates, np.array([rows, 3], np.int32)])


def test_scatter_nd_rejects_out_of_range_coordinates():
    """Coordinate (0, 5) of a 3x4 output is flat position 5, inside the tensor, but LiteRT
    checks each coordinate against its axis: it fails, and so does numlite."""
    model, _ = scatter_model((3, 2), (3, 4))
    updates = values((3,), tf.float32)
    assert_matches_litert(model, [np.array([[0, 3], [2, 0], [0, 3]], np.int32), updates])
    assert_both_fail(model, [np.array([[0, 5], [2, 0], [0, 1]], np.int32), updates])
    assert_both_fail(model, [np.array([[0, 1], [3, 0], [1, 1]], np.int32), updates])
    assert_both_fail(model, [np.array([[0, 1], [-1, 0], [1, 1]], np.int32), updates])


def test_scatter_nd_bad_coordinate_fails_alike_on_both_engines(engine):
    """Coordinates read from data: the compiled kernel checks them and raises the NumPy
    kernel's InvokeError, word for word, where LiteRT fails too; good coordinates after a
    failed invoke run again."""
    model, _ = scatter_model((3, 2), (3, 4))
    updates = values((3,), tf.float32)
    good, bad = np.array([[0, 3], [2, 0], [0, 3]], np.int32), np.array([[0, 1], [2, 4], [1, 1]], np.int32)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, [bad, updates])
    interpreter = numlite.Interpreter(model_content=model)  # compiled on the jit side (NUMLITE_JIT=1)
    interpreter.allocate_tensors()
    assert engine == "numpy" or interpreter.jit_report()["subgraphs"][0]["compiled"], interpreter.jit_report()
    indices, updates_in = (d["index"] for d in interpreter.get_input_details())
    interpreter.set_tensor(updates_in, updates)
    interpreter.set_tensor(indices, bad)
    with pytest.raises(numlite.InvokeError) as error:
        interpreter.invoke()
    assert str(error.value) == "subgraph 0, node 0 (SCATTER_ND) failed: scatter_nd index is out of bounds for the output of shape (3, 4)"
    interpreter.set_tensor(indices, good)
    interpreter.invoke()
    np.testing.assert_array_equal(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]),
                                  run_litert(model, [good, updates])[0])


def test_scatter_nd_rejects_mismatched_updates():
    model = read_model(scatter_model((4, 1), (5, 3))[0])
    g = model.subgraphs[0]
    g.tensors[g.inputs[1]].shape = (4, 2)  # slices of 2 into rows of 3
    g.tensors[g.inputs[1]].shape_signature = None
    data = write_model(model)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(data, [np.zeros((4, 1), np.int32), np.zeros((4, 2), np.float32)])
    with pytest.raises(numlite.PrepareError, match="do not fit"):
        numlite.Interpreter(model_content=data).allocate_tensors()


# ---------------------------------------------------------------------------------- ONE_HOT

# (indices shape, depth, axis)
ONE_HOT_CASES = [((4,), 5, -1), ((4,), 3, 0), ((2, 3), 4, 0), ((2, 3), 4, 1), ((2, 3), 2, -1), ((2, 2, 3), 6, 1)]


@pytest.mark.parametrize("indices_shape,depth,axis", ONE_HOT_CASES, ids=str)
def test_one_hot(indices_shape, depth, axis):
    model = convert(
        lambda i: tf.one_hot(i, depth, on_value=2.5, off_value=-1.0, axis=axis),
        [tf.TensorSpec(indices_shape, tf.int32)],
        key=("one_hot", indices_shape, depth, axis),
    )
    assert op_names(model) == ["ONE_HOT"]
    indices = np.random.default_rng(2).integers(-2, depth + 2, indices_shape).astype(np.int32)  # some out of range
    assert_matches_litert(model, [indices])


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool], ids=str)
def test_one_hot_dtypes(dtype):
    on, off = (True, False) if dtype == tf.bool else (7, -3)
    model = convert(
        lambda i: tf.one_hot(i, 4, on_value=tf.constant(on, dtype), off_value=tf.constant(off, dtype)),
        [tf.TensorSpec((5,), tf.int32)],
        key=("one_hot", dtype),
    )
    assert op_names(model) == ["ONE_HOT"]
    assert_matches_litert(model, [np.array([0, 3, 4, -1, 1], np.int32)])


def test_one_hot_int64_indices_are_narrowed():
    """LiteRT compares ``static_cast<int>(index)``: 2**32 + 2 selects class 2."""
    model = convert(lambda i: tf.one_hot(i, 4), [tf.TensorSpec((5,), tf.int64)], key="one_hot int64")
    assert op_names(model) == ["ONE_HOT"]
    assert_matches_litert(model, [np.array([0, 2**32 + 2, 3, -(2**40), 5], np.int64)])


def test_one_hot_depth_given_at_run_time():
    model = convert(
        lambda i, d: tf.one_hot(i, d, axis=0), [tf.TensorSpec((2, 3), tf.int32), tf.TensorSpec((), tf.int32)], key="one_hot runtime depth"
    )
    assert op_names(model) == ["ONE_HOT"]
    indices = np.array([[0, 1, 2], [5, 3, -1]], np.int32)
    for depth in (1, 4, 6):
        assert_matches_litert(model, [indices, np.array(depth, np.int32)])


def test_one_hot_rejects_negative_depth():
    model = read_model(convert(lambda i: tf.one_hot(i, 4), [tf.TensorSpec((5,), tf.int32)], key="one_hot -depth"))
    depth = model.subgraphs[0].operators[0].inputs[1]
    set_constant(model, depth, np.array(-2, np.int32))
    data = write_model(model)
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(data, [np.zeros((5,), np.int32)])
    with pytest.raises(numlite.PrepareError, match="depth must not be negative"):
        numlite.Interpreter(model_content=data).allocate_tensors()


@pytest.mark.parametrize("bad", [4, -1], ids=str)
def test_gather_of_one_out_of_range_position_is_an_error(bad):
    """A scalar position (a loop's time step) takes a direct-index path: still checked."""
    model = convert(lambda x, i: tf.gather(x, i), [tf.TensorSpec((4, 3), tf.float32), tf.TensorSpec((), tf.int32)], key="gather-oob-scalar")
    assert_both_fail(model, [values((4, 3), tf.float32), np.array(bad, np.int32)])


@pytest.mark.parametrize("row_views", [True, False], ids=["row views", "indexed"])
def test_gather_of_one_position_on_repeated_invokes(row_views, monkeypatch, engine):
    """A 0-d position along the first axis is one call in the compiled plan (``direct``),
    picking from views of the rows made once (or indexing the array, for inputs of more than
    ``ROW_VIEWS`` rows): new positions and new data at each invoke of one allocation give
    LiteRT's rows, and a position out of range still fails, naming the node, where LiteRT
    fails too."""
    from numlite.kernels import indexing

    monkeypatch.setattr(indexing, "ROW_VIEWS", indexing.ROW_VIEWS if row_views else 0)
    model = convert(
        lambda x, i: tf.gather(x, i) * 2.0, [tf.TensorSpec((5, 3), tf.float32), tf.TensorSpec((), tf.int32)], key="gather-one"
    )
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for k, position in enumerate((4, 0, 2, 3)):  # from the second invoke on, the compiled plan
        x = values((5, 3), tf.float32, seed=k)
        inputs = [x, np.array(position, np.int32)]
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        np.testing.assert_array_equal(actual, run_litert(model, inputs)[0])
    name = "_gather_row" if row_views else "_gather_position"
    assert engine != "numpy" or any(fn.__name__ == name for _, fn, _ in interpreter.subgraph(0)._program.calls)  # its plan
    for bad in (5, -1):
        interpreter.set_tensor(interpreter.get_input_details()[1]["index"], np.array(bad, np.int32))
        with pytest.raises(numlite.InvokeError, match=rf"node \d+ \(GATHER\) failed: gather index {bad} is out of range \[0, 5\)"):
            interpreter.invoke()
        assert_both_fail(model, [x, np.array(bad, np.int32)])
