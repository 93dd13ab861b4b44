"""numlite's converter on TensorFlow's array, shape and indexing ops.

Every model is converted by numlite and run in both numlite and LiteRT; both must give
TensorFlow's results. Each test also checks that the TFLite op it is about is in the model, so
that the lowering (not constant folding) is what is tested: inputs are function arguments.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, conversion_error, run_litert, run_numlite, seeded_values
from helpers import check_conversion as check

import numlite


def spec(*shape, dtype=tf.float32):
    return tf.TensorSpec(shape, dtype)


X4 = seeded_values((3, 4, 5, 6), tf.float32, 1)


# -- StridedSlice ------------------------------------------------------------------------------

SLICES = [
    lambda x: x[:, 1:3],  # begin and end masks
    lambda x: x[1:, :-1, ::2],
    lambda x: x[..., 2],  # ellipsis, shrink
    lambda x: x[:, tf.newaxis, 1, ..., ::-1],  # new axis, shrink, ellipsis, negative stride
    lambda x: x[::-1, -1, 3:0:-2],
    lambda x: x[-2:, -3:, ..., tf.newaxis],
    lambda x: x[:, tf.newaxis, :, tf.newaxis, 1:4, 0],  # effective rank 6 in LiteRT's kernel
    lambda x: x[tf.newaxis, ..., tf.newaxis],
    lambda x: x[:, ::-1, ..., 0:2, 1],  # an ellipsis standing for no axis
    lambda x: x[..., 1, 2, 3, 4],
    lambda x: x[1, ..., tf.newaxis, 2, :, 3],
]


@pytest.mark.parametrize("index", range(len(SLICES)))
def test_strided_slice_masks(index):
    names = check(SLICES[index], [spec(None, 4, 5, 6)], [X4], ["STRIDED_SLICE"])
    assert set(names) <= {"STRIDED_SLICE", "EXPAND_DIMS"}  # constant indices made dense at conversion


def test_strided_slice_with_an_end_computed_from_the_run_time_shape():
    check(lambda x: x[:, : tf.shape(x)[1] - 1], [spec(None, None, 5, 6)], [X4], ["SHAPE", "STRIDED_SLICE"])


def test_strided_slice_with_run_time_begin_an_ellipsis_and_new_axes():
    def fn(x, b):
        return x[b:, ..., tf.newaxis, 1], x[..., b, tf.newaxis]

    for b in [0, 2, -1]:
        check(fn, [spec(None, 4, 5, 6), spec(dtype=tf.int32)], [X4, np.array(b, np.int32)],
              ["CONCATENATION", "GATHER", "STRIDED_SLICE", "EXPAND_DIMS"])


def test_strided_slice_int64_index_tensors():
    def fn(x, begin, end, strides):
        return tf.strided_slice(x, begin, end, strides, shrink_axis_mask=0b100)

    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    int64_spec = spec(3, dtype=tf.int64)
    for begin, end, strides in [((0, 1, 2), (2, 4, 3), (1, 1, 1)), ((2, 3, 4), (0, 0, 5), (-1, -2, 1))]:
        check(fn, [spec(3, 4, 5), int64_spec, int64_spec, int64_spec],
              [X4[0, :3], i64(*begin), i64(*end), i64(*strides)], ["CAST", "STRIDED_SLICE"])


# -- Reshape, Squeeze, ExpandDims, Shape, Size, Rank -------------------------------------------


RESHAPES = [
    (lambda x: tf.reshape(x, [-1, 2, 3]), spec(None, 6), (4, 6)),
    (lambda x: tf.reshape(x, [tf.shape(x)[0], -1]), spec(None, 3, 4), (2, 3, 4)),
    (lambda x: tf.reshape(x, [tf.shape(x)[0] * tf.shape(x)[1], 2, 2]), spec(None, None, 4), (2, 3, 4)),
    (lambda x: tf.reshape(x, tf.concat([tf.shape(x)[:2], [2, 2]], 0)), spec(None, None, 4), (3, 2, 4)),
    (lambda x: tf.reshape(x, tf.reverse(tf.shape(x, out_type=tf.int64), [0])), spec(None, None), (2, 5)),
    (lambda x: tf.reshape(x, []), spec(1, 1), (1, 1)),
]


@pytest.mark.parametrize("index", range(len(RESHAPES)))
def test_reshape(index):
    fn, input_spec, shape = RESHAPES[index]
    check(fn, [input_spec], [seeded_values(shape, tf.float32, index)], ["RESHAPE"])


@pytest.mark.parametrize("axis", [None, [1], [-1], [1, 3]])
def test_squeeze_static(axis):
    check(lambda x: tf.squeeze(x, axis), [spec(2, 1, 3, 1)], [seeded_values((2, 1, 3, 1), tf.float32)], ["SQUEEZE"])


@pytest.mark.parametrize("batch", [1, 3])
def test_squeeze_without_axes_on_a_dynamic_batch_squeezes_a_batch_of_one(batch):
    check(lambda x: tf.squeeze(x), [spec(None, 1, 3)], [seeded_values((batch, 1, 3), tf.float32)], ["SQUEEZE"])


def test_squeeze_with_axes_and_dynamic_batch():
    check(lambda x: tf.squeeze(x, [-2]), [spec(None, 3, 1, 2)], [seeded_values((2, 3, 1, 2), tf.float32)], ["SQUEEZE"])


@pytest.mark.parametrize("axis", [0, 2, -1, np.int64(1)])
def test_expand_dims(axis):
    check(lambda x: tf.expand_dims(x, axis), [spec(None, 3)], [seeded_values((2, 3), tf.float32)], ["EXPAND_DIMS"])


def test_expand_dims_with_a_computed_int64_axis():
    def fn(x, axis):
        return tf.expand_dims(x, axis)

    check(fn, [spec(2, 3), spec(dtype=tf.int64)], [seeded_values((2, 3), tf.float32), np.array(-1, np.int64)],
          ["EXPAND_DIMS"])


@pytest.mark.parametrize("out_type", [tf.int32, tf.int64])
def test_shape_and_size_of_dynamic_shapes(out_type):
    def fn(x):
        return tf.shape(x, out_type=out_type), tf.size(x, out_type=out_type)

    for shape in [(2, 3, 4), (1, 5, 4)]:
        check(fn, [spec(None, None, 4)], [seeded_values(shape, tf.float32)], ["SHAPE", "REDUCE_PROD"])


def test_rank_and_size_of_an_input_of_unknown_rank():
    def fn(x):
        return tf.rank(x), tf.size(x), x * 2.0

    for shape in [(2, 3), (4,), (1, 2, 3, 2)]:
        check(fn, [tf.TensorSpec(None, tf.float32)], [seeded_values(shape, tf.float32)], ["SHAPE", "REDUCE_PROD"])


def test_rank_of_a_dynamic_shape_is_a_constant():
    names = check(lambda x: (tf.rank(x), x + 1.0), [spec(None, None, 3)], [seeded_values((2, 4, 3), tf.float32)], [])
    assert names == ["ADD"]


# -- Transpose, Concat, Pack, Unpack ------------------------------------------------------------


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), np.array([0, 2, 1], np.int64)])
def test_transpose(perm):
    check(lambda x: tf.transpose(x, perm), [spec(None, 4, 5)], [seeded_values((3, 4, 5), tf.float32)], ["TRANSPOSE"])


def test_transpose_with_a_computed_perm():
    def fn(x, perm):
        return tf.transpose(x, perm)

    check(fn, [spec(2, 3, 4), spec(3, dtype=tf.int64)], [seeded_values((2, 3, 4), tf.float32), np.array([2, 0, 1], np.int64)],
          ["CAST", "TRANSPOSE"])


def test_transpose_of_rank_9_is_refused():
    message = conversion_error(lambda x: tf.transpose(x), [spec(*([1] * 9))])
    assert "'transpose'" in message and "TRANSPOSE supports inputs of rank 8 at most" in message


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.int64, tf.bool])
def test_concat(axis, dtype):
    def fn(a, b, c):
        return tf.concat([a, b, c], axis)

    inputs = [seeded_values((2, 3, 4), dtype, s) for s in range(3)]
    check(fn, [spec(None, 3, 4, dtype=dtype)] * 3, inputs, ["CONCATENATION"])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.int64, tf.bool, tf.float16])
def test_pack_and_unpack(axis, dtype):
    def fn(a, b):
        stacked = tf.stack([a, b], axis)
        return (stacked,) + tuple(tf.unstack(stacked, axis=axis))

    inputs = [seeded_values((2, 3), dtype, s) for s in range(2)]
    # LiteRT's PACK has no bool or float16 kernel and its UNPACK no int64 one: other ops stand in.
    concat_unpack = ["EXPAND_DIMS", "CONCATENATION", "UNPACK"]
    ops = {tf.bool: concat_unpack, tf.float16: concat_unpack, tf.int64: ["PACK", "GATHER"]}.get(dtype, ["PACK", "UNPACK"])
    check(fn, [spec(2, 3, dtype=dtype)] * 2, inputs, ops)


def test_unpack_dynamic_batch():
    check(lambda x: tf.unstack(x, axis=1), [spec(None, 3, 2)], [seeded_values((4, 3, 2), tf.float32)], ["UNPACK"])


# -- Slice, Split, SplitV, Tile, Fill, Pad -----------------------------------------------------


def test_slice_with_constant_and_int64_bounds():
    def fn(x):
        return tf.slice(x, [0, 1, 2], [-1, 2, 3]), tf.slice(x, tf.constant([1, 0, 0], tf.int64), tf.constant([1, -1, 2], tf.int64))

    check(fn, [spec(None, 4, 5)], [seeded_values((3, 4, 5), tf.float32)], ["SLICE"])


def test_slice_with_run_time_bounds():
    def fn(x, begin, size):
        return tf.slice(x, begin, size)

    for begin, size in [((0, 1), (2, -1)), ((1, 3), (1, 2))]:
        check(fn, [spec(2, 5), spec(2, dtype=tf.int32), spec(2, dtype=tf.int32)],
              [seeded_values((2, 5), tf.float32), np.array(begin, np.int32), np.array(size, np.int32)], ["SLICE"])


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_split(axis):
    check(lambda x: tf.split(x, 2, axis=axis), [spec(4, 6, 2)], [seeded_values((4, 6, 2), tf.float32)], ["SPLIT"])


def test_split_dynamic_batch_int32():
    check(lambda x: tf.split(x, 3, axis=1), [spec(None, 6, dtype=tf.int32)], [seeded_values((2, 6), tf.int32)], ["SPLIT"])


@pytest.mark.parametrize("sizes", [[1, -1, 2], [3, 3], np.array([2, 1, 3], np.int64)])
def test_split_v(sizes):
    check(lambda x: tf.split(x, sizes, axis=-1), [spec(None, 6)], [seeded_values((3, 6), tf.float32)], ["SPLIT_V"])


@pytest.mark.parametrize("sizes", [3, [1, -1, 2]])
def test_split_of_bool_tensors_gathers_the_parts(sizes):
    # LiteRT's SPLIT and SPLIT_V have no bool kernel.
    names = check(lambda x: tf.split(x, sizes, axis=1), [spec(None, 6, dtype=tf.bool)], [seeded_values((2, 6), tf.bool)],
                  ["GATHER"])
    assert "SPLIT" not in names and "SPLIT_V" not in names


def test_split_of_bool_tensors_along_a_dynamic_axis_is_refused():
    message = conversion_error(lambda x: tf.split(x, 2, axis=0), [spec(None, 6, dtype=tf.bool)])
    assert "(Split)" in message and "static size along axis 0" in message


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.bool])
def test_tile(dtype):
    check(lambda x: tf.tile(x, [2, 1, 3]), [spec(None, 2, 3, dtype=dtype)], [seeded_values((2, 2, 3), dtype)], ["TILE"])


def test_tile_with_run_time_int64_multiples():
    def fn(x, multiples):
        return tf.tile(x, multiples)

    check(fn, [spec(2, 3), spec(2, dtype=tf.int64)], [seeded_values((2, 3), tf.float32), np.array([3, 2], np.int64)],
          ["TILE"])


def test_fill_with_a_run_time_shape_and_value():
    def fn(x, value):
        return tf.fill(tf.shape(x), value), tf.fill(tf.shape(x, out_type=tf.int64)[:1], value * 2)

    check(fn, [spec(None, 3), spec()], [seeded_values((2, 3), tf.float32), np.float32(1.5)], ["FILL", "SHAPE"])


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.int64, tf.bool])
def test_ones_like_and_zeros_like(dtype):
    ops = ["FILL", "ZEROS_LIKE"] if dtype != tf.bool else ["FILL"]

    def fn(x):
        return tf.ones_like(x), tf.zeros_like(x)

    check(fn, [spec(None, 3, dtype=dtype)], [seeded_values((2, 3), dtype)], ops)


PADDINGS = [[0, 0], [1, 2], [2, 0]]


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32])
def test_pad_and_pad_v2(dtype):
    def fn(x):
        return tf.pad(x, PADDINGS), tf.pad(x, PADDINGS, constant_values=7)

    check(fn, [spec(None, 3, 4, dtype=dtype)], [seeded_values((2, 3, 4), dtype)], ["PAD", "PADV2"])


def test_pad_with_run_time_int64_paddings():
    def fn(x, paddings):
        return tf.pad(x, paddings)

    check(fn, [spec(2, 3), spec(2, 2, dtype=tf.int64)], [seeded_values((2, 3), tf.float32), np.array([[1, 0], [2, 1]], np.int64)],
          ["PAD"])


def test_pad_of_rank_6_is_refused():
    message = conversion_error(lambda x: tf.pad(x, [[0, 1]] * 6), [spec(*([2] * 6))])
    assert "(Pad)" in message and "PAD supports inputs of rank 5 at most" in message


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad(mode):
    check(lambda x: tf.pad(x, PADDINGS, mode=mode), [spec(None, 3, 4)], [seeded_values((2, 3, 4), tf.float32)], ["MIRROR_PAD"])


# -- gathers and scatters ----------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
def test_gather(axis, index_dtype):
    def fn(params, indices):
        return tf.gather(params, indices, axis=axis)

    indices = np.array([[0, 2], [1, 1], [2, 0]], index_dtype.as_numpy_dtype)
    check(fn, [spec(3, 3, 3), spec(3, 2, dtype=index_dtype)], [seeded_values((3, 3, 3), tf.float32), indices], ["GATHER"])


@pytest.mark.parametrize("axis,batch_dims", [(2, 1), (1, 1), (2, -1), (-1, 2)])
def test_gather_with_batch_dims(axis, batch_dims):
    def fn(params, indices):
        return tf.gather(params, indices, axis=axis, batch_dims=batch_dims)

    indices = np.array([[0, 2, 2], [2, 1, 0]], np.int32)
    check(fn, [spec(None, 3, 3), spec(2, 3, dtype=tf.int32)], [seeded_values((2, 3, 3), tf.float32), indices], ["GATHER"])


def test_unsupported_types_are_refused_with_the_node_named():
    message = conversion_error(lambda x: tf.cumsum(x, 1), [spec(2, 3, dtype=tf.int8)])
    assert "'Cumsum'" in message and "LiteRT's CUMSUM does not support INT8 tensors" in message
    message = conversion_error(lambda x: tf.unique(x)[0], [spec(4, dtype=tf.bool)])
    assert "'Unique'" in message and "does not support BOOL" in message


def test_gather_v1():
    def fn(params, indices):
        return tf.raw_ops.Gather(params=params, indices=indices)

    check(fn, [spec(None, 2, dtype=tf.int32), spec(4, dtype=tf.int64)],
          [seeded_values((5, 2), tf.int32), np.array([4, 0, 0, 2], np.int64)], ["GATHER"])


def test_gather_nd():
    def fn(params, indices):
        return tf.gather_nd(params, indices)

    indices = np.array([[0, 1], [2, 0], [1, 1]], np.int64)
    check(fn, [spec(3, 2, 4), spec(3, 2, dtype=tf.int64)], [seeded_values((3, 2, 4), tf.float32), indices], ["GATHER_ND"])


def test_scatter_nd_sums_repeated_indices():
    def fn(indices, updates):
        return tf.scatter_nd(indices, updates, [4, 3])

    indices = np.array([[0], [2], [0]], np.int32)
    check(fn, [spec(3, 1, dtype=tf.int32), spec(3, 3)], [indices, seeded_values((3, 3), tf.float32)], ["SCATTER_ND"])


def test_scatter_nd_with_int64_indices_and_shape():
    def fn(indices, updates, shape):
        return tf.scatter_nd(indices, updates, shape)

    check(fn, [spec(2, 2, dtype=tf.int64), spec(2, dtype=tf.int32), spec(2, dtype=tf.int64)],
          [np.array([[1, 1], [0, 2]], np.int64), np.array([5, -3], np.int32), np.array([2, 3], np.int64)], ["SCATTER_ND"])


# -- Range, BroadcastTo, Where, ReverseV2 ------------------------------------------------------


@pytest.mark.parametrize("dtype,args", [
    (tf.int32, (2, 11, 3)), (tf.int32, (5, -4, -2)), (tf.int64, (0, 5, 1)),
    (tf.float32, (0.5, 3.0, 0.25)), (tf.float32, (1.0, -2.0, -0.7)),
])
def test_range(dtype, args):
    def fn(start, limit, delta):
        return tf.range(start, limit, delta)

    values = [np.array(v, dtype.as_numpy_dtype) for v in args]
    check(fn, [spec(dtype=dtype)] * 3, values, ["RANGE"])


def test_broadcast_to():
    def fn(x, y):
        return tf.broadcast_to(x, [2, 3, 4]), tf.broadcast_to(x, tf.shape(y, out_type=tf.int64))

    check(fn, [spec(3, 1), spec(None, 3, 4)], [seeded_values((3, 1), tf.float32), seeded_values((5, 3, 4), tf.float32)],
          ["BROADCAST_TO"])


@pytest.mark.parametrize("dtype", [tf.bool, tf.float32, tf.int32])
def test_where_coordinates(dtype):
    x = seeded_values((3, 4), dtype, 3)
    if dtype != tf.bool:
        x = np.where(x > 0, x, 0).astype(x.dtype)
    check(lambda x: tf.where(x), [spec(None, 4, dtype=dtype)], [x], ["WHERE"])


@pytest.mark.parametrize("axes", [[1], [-1], [0, 1], [0, 2], [2, 0, 3]])
def test_reverse(axes):
    names = check(lambda x: tf.reverse(x, axes), [spec(None, 3, 4, 2)], [seeded_values((2, 3, 4, 2), tf.float32)],
                  ["REVERSE_V2"])
    runs = {(1,): 1, (3,): 1, (0, 1): 1, (0, 2): 2, (0, 2, 3): 2}[tuple(sorted(a % 4 for a in axes))]
    assert names.count("REVERSE_V2") == runs


# -- TopK, OneHot, Cumsum, Unique, ReverseSequence ---------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32])
def test_top_k_values_and_indices(dtype):
    def fn(x):
        return tuple(tf.math.top_k(x, 3))

    x = seeded_values((2, 3, 6), dtype, 4, int_range=(0, 4))  # small integers: ties
    check(fn, [spec(None, 3, 6, dtype=dtype)], [x], ["TOPK_V2"])


def test_top_k_with_run_time_k():
    def fn(x, k):
        return tuple(tf.math.top_k(x, k))

    check(fn, [spec(4, 5), spec(dtype=tf.int32)], [seeded_values((4, 5), tf.float32), np.array(2, np.int32)], ["TOPK_V2"])


def test_top_k_int64_indices():
    def fn(x):
        return tuple(tf.raw_ops.TopKV2(input=x, k=2, index_type=tf.int64))

    check(fn, [spec(None, 5)], [seeded_values((3, 5), tf.float32)], ["TOPK_V2", "CAST"])


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
def test_one_hot(axis, index_dtype):
    def fn(indices):
        return tf.one_hot(indices, 4, on_value=2.5, off_value=-1.0, axis=axis)

    indices = np.array([[0, 3, 1], [2, -1, 4]], index_dtype.as_numpy_dtype)  # -1 and 4: all off
    check(fn, [spec(None, 3, dtype=index_dtype)], [indices], ["ONE_HOT"])


def test_one_hot_int_output():
    check(lambda i: tf.one_hot(i, 3, dtype=tf.int32), [spec(4, dtype=tf.int32)], [np.array([2, 0, 1, 1], np.int32)], ["ONE_HOT"])


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [1, -1])
def test_cumsum(exclusive, reverse, axis):
    def fn(x, n):
        return (tf.math.cumsum(x, axis, exclusive=exclusive, reverse=reverse),
                tf.math.cumsum(n, axis, exclusive=exclusive, reverse=reverse))

    check(fn, [spec(None, 4, 3), spec(None, 4, 3, dtype=tf.int32)],
          [seeded_values((2, 4, 3), tf.float32), seeded_values((2, 4, 3), tf.int32)], ["CUMSUM"])


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.int64])
@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
def test_unique(dtype, index_dtype):
    def fn(x):
        return tuple(tf.unique(x, out_idx=index_dtype))

    check(fn, [spec(None, dtype=dtype)], [np.array([3, 1, 3, 0, 1, 7, 0], dtype.as_numpy_dtype)], ["UNIQUE"])


@pytest.mark.parametrize("seq_axis,batch_axis", [(1, 0), (0, 1), (2, 0)])
def test_reverse_sequence(seq_axis, batch_axis):
    def fn(x, lengths):
        return tf.reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=batch_axis)

    x = seeded_values((3, 3, 4), tf.float32)
    check(fn, [spec(3, 3, 4), spec(3, dtype=tf.int64)], [x, np.array([1, 3, 0], np.int64)], ["REVERSE_SEQUENCE"])


# -- block rearrangements and resizing ---------------------------------------------------------


@pytest.mark.parametrize("block", [2, 3])
def test_depth_to_space_and_back(block):
    def fn(x):
        up = tf.nn.depth_to_space(x, block)
        return up, tf.nn.space_to_depth(up * 2.0, block)

    channels = 2 * block * block
    check(fn, [spec(None, 2, 3, channels)], [seeded_values((2, 2, 3, channels), tf.float32)], ["DEPTH_TO_SPACE", "SPACE_TO_DEPTH"])


@pytest.mark.parametrize("shape,block,paddings", [
    ((2, 4, 6, 3), [2, 3], [[0, 0], [0, 0]]),
    ((1, 3, 5, 2), [2, 2], [[1, 0], [2, 1]]),
    ((2, 5, 3), [2], [[1, 2]]),  # one spatial dim
    ((2, 4, 3, 2), [2], [[0, 2]]),  # one spatial dim, trailing dims merged into channels
])
def test_space_to_batch_and_back(shape, block, paddings):
    def fn(x):
        batched = tf.space_to_batch_nd(x, block, paddings)
        return batched, tf.batch_to_space(batched * 2.0, block, paddings)

    check(fn, [spec(None, *shape[1:])], [seeded_values(shape, tf.float32)], ["SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"])


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("size", [(6, 9), (2, 3)])
@pytest.mark.parametrize("corners", ["align", "half_pixel", "legacy"])
def test_resize(method, size, corners):
    options = {"align": dict(align_corners=True), "half_pixel": dict(half_pixel_centers=True), "legacy": {}}[corners]
    raw = tf.raw_ops.ResizeBilinear if method == "bilinear" else tf.raw_ops.ResizeNearestNeighbor

    def fn(x):
        return raw(images=x, size=size, **options)

    op = "RESIZE_BILINEAR" if method == "bilinear" else "RESIZE_NEAREST_NEIGHBOR"
    check(fn, [spec(None, 4, 5, 2)], [seeded_values((2, 4, 5, 2), tf.float32)], [op])


@pytest.mark.parametrize("dtype", [tf.uint8, tf.int32])
def test_resize_integer_images(dtype):
    # TF's bilinear resize of integers outputs unrounded float32: the rule casts the image first.
    def fn(x, size):
        return (tf.raw_ops.ResizeBilinear(images=x, size=size, half_pixel_centers=True),
                tf.raw_ops.ResizeNearestNeighbor(images=x, size=size, half_pixel_centers=True))

    x = seeded_values((1, 3, 4, 2), dtype, int_range=(0, 100))
    check(fn, [spec(None, 3, 4, 2, dtype=dtype), spec(2, dtype=tf.int32)], [x, np.array([5, 7], np.int32)],
          ["CAST", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])


# -- diagonals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32])
def test_matrix_diag_and_set_diag(dtype):
    def fn(d, m):
        return tf.linalg.diag(d), tf.linalg.set_diag(m, d[..., :3])

    check(fn, [spec(None, 4, dtype=dtype), spec(None, 3, 5, dtype=dtype)],
          [seeded_values((2, 4), dtype), seeded_values((2, 3, 5), dtype, 1)], ["MATRIX_DIAG", "MATRIX_SET_DIAG"])


def test_off_main_diagonals_are_refused():
    message = conversion_error(lambda d: tf.linalg.diag(d, k=1), [spec(3)])
    assert "main diagonal" in message and "MatrixDiagV3" in message
    message = conversion_error(lambda d: tf.linalg.diag(d, num_rows=5), [spec(3)])
    assert "num_rows" in message
    message = conversion_error(lambda m, d: tf.linalg.set_diag(m, d, k=-1), [spec(3, 3), spec(2)])
    assert "main diagonal" in message


# -- Einsum -------------------------------------------------------------------------------------

EINSUMS = [
    # equation, operand shapes (None: dynamic), expected op
    ("bij,bjk->bik", [(None, 3, 4), (None, 4, 5)], "BATCH_MATMUL"),
    ("bhqd,bhkd->bhqk", [(None, 2, 3, 4), (None, 2, 5, 4)], "BATCH_MATMUL"),
    ("bhqk,bkhd->bqhd", [(None, 2, 3, 5), (None, 5, 2, 4)], "BATCH_MATMUL"),
    ("ij,jk->ik", [(3, 4), (4, 5)], "BATCH_MATMUL"),
    ("ij,kj->ki", [(3, 4), (5, 4)], "BATCH_MATMUL"),
    ("bij,bj->bi", [(None, 3, 4), (None, 4)], "BATCH_MATMUL"),  # matrix times vector
    ("i,j->ij", [(3,), (4,)], "BATCH_MATMUL"),  # outer product
    ("bi,bi->b", [(None, 3), (None, 3)], "BATCH_MATMUL"),  # dot products
    ("abc,abd->acd", [(None, None, 3), (None, None, 2)], "BATCH_MATMUL"),  # contraction over two dynamic axes
    ("bqhd,bkhd->bhqk", [(None, None, 2, 4), (None, None, 2, 4)], "BATCH_MATMUL"),
    ("...ij,...jk->...ik", [(None, 2, 3, 4), (None, 2, 4, 5)], "BATCH_MATMUL"),
    ("...ij,...jk->...ik", [(1, 2, 3), (4, 3, 5)], "BATCH_MATMUL"),  # a batch axis of 1 broadcasts
    ("...ij,jk->...ik", [(None, 2, 3, 4), (4, 5)], "BATCH_MATMUL"),
    ("ij->ji", [(None, 3)], "TRANSPOSE"),
    ("abc->cab", [(None, 3, 4)], "TRANSPOSE"),
]


@pytest.mark.parametrize("index", range(len(EINSUMS)))
def test_einsum(index):
    equation, shapes, op = EINSUMS[index]

    def fn(*operands):
        return tf.einsum(equation, *operands)

    concrete = [tuple(2 if d is None else d for d in s) for s in shapes]
    concrete[-1] = tuple(3 if d is None and k else c for k, (d, c) in enumerate(zip(shapes[-1], concrete[-1])))
    if len(shapes) == 2:  # dims shared by both operands take the same size
        a, b = equation.split("->")[0].replace("...", "").split(",")
        sizes = {c: n for c, n in zip(a[::-1], concrete[0][::-1])}
        concrete[1] = tuple(sizes.get(c, n) for c, n in zip(b[::-1], concrete[1][::-1]))[::-1]
    inputs = [seeded_values(s, tf.float32, k) for k, s in enumerate(concrete)]
    check(fn, [spec(*s) for s in shapes], inputs, [op], rtol=1e-5, atol=1e-5)


DENSE_EINSUMS = [
    ("abc,cd->abd", (None, 3, 4), (4, 5)),  # Keras EinsumDense
    ("abc,cde->abde", (None, None, 4), (4, 2, 3)),  # attention query projection, dynamic sequence
    ("abcd,cde->abe", (None, 3, 2, 4), (2, 4, 5)),  # attention output projection
    ("ab,cb->ac", (None, 4), (3, 4)),
]


@pytest.mark.parametrize("index", range(len(DENSE_EINSUMS)))
def test_einsum_with_constant_weights_is_a_fully_connected_layer(index):
    equation, shape, weight_shape = DENSE_EINSUMS[index]
    kernel = seeded_values(weight_shape, tf.float32, 9)

    def fn(x):
        return tf.einsum(equation, x, tf.constant(kernel))

    concrete = tuple(2 if d is None else d for d in shape)
    names = check(fn, [spec(*shape)], [seeded_values(concrete, tf.float32)], ["FULLY_CONNECTED"])
    assert "BATCH_MATMUL" not in names


@pytest.mark.parametrize("equation,shapes,ops", [
    ("ij->i", [(2, 3)], ["SUM"]),
    ("bij->b", [(2, 3, 4)], ["SUM"]),
    ("ij,jk->i", [(2, 3), (3, 4)], ["SUM", "BATCH_MATMUL"]),
    ("ij,kl->ik", [(2, 3), (4, 5)], ["SUM", "BATCH_MATMUL"]),
    ("bij,bjk->b", [(2, 3, 4), (2, 4, 5)], ["SUM", "BATCH_MATMUL"]),
])
def test_einsums_that_sum_a_letter_of_one_operand(equation, shapes, ops):
    """A letter in one operand only and not kept is summed over (SUM) before the product."""
    inputs = [seeded_values(s, tf.float32, k) for k, s in enumerate(shapes)]
    check(lambda *operands: tf.einsum(equation, *operands), [spec(*s) for s in shapes], inputs, ops)


@pytest.mark.parametrize("equation,shapes,message", [
    ("ii,ij->ij", [(3, 3), (3, 4)], "repeats a letter"),
    ("abcdij,abcdjk->abcdik", [(1, 1, 1, 2, 3, 4), (1, 1, 1, 2, 4, 5)], "BATCH_MATMUL takes 3 at most"),
])
def test_unsupported_einsums_are_refused(equation, shapes, message):
    error = conversion_error(lambda *operands: tf.einsum(equation, *operands), [spec(*s) for s in shapes])
    assert "(Einsum)" in error and message in error


# -- Keras layers built from these ops ----------------------------------------------------------


def keras_outputs_match(model, inputs, ops):
    """Convert a Keras model with numlite; numlite and LiteRT must give the model's results."""
    tflite = numlite.TFLiteConverter.from_keras_model(model).convert()
    expected = model(inputs, training=False)
    expected = [t.numpy() for t in (expected if isinstance(expected, list) else [expected])]
    for run in (run_numlite, run_litert):
        actual = run(tflite, [inputs])
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
    names = all_op_names(tflite)
    assert all(op in names for op in ops), names


@pytest.mark.parametrize("sequence", [6, None])
def test_keras_multi_head_attention(sequence):
    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((sequence, 8))
    outputs = tf.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(inputs, inputs)
    model = tf.keras.Model(inputs, outputs)
    keras_outputs_match(model, seeded_values((3, 6, 8), tf.float32), ["FULLY_CONNECTED", "BATCH_MATMUL", "SOFTMAX"])


def test_keras_layout_layers():
    layers = tf.keras.layers
    inputs = tf.keras.Input((4, 5, 3))
    nearest, bilinear = layers.UpSampling2D(2)(inputs), layers.UpSampling2D(2, interpolation="bilinear")(inputs)
    x = layers.Concatenate(-1)([nearest, bilinear])
    x = layers.Cropping2D(((0, 1), (1, 2)))(layers.ZeroPadding2D(((1, 0), (2, 1)))(x))
    x = layers.Flatten()(layers.Permute((2, 1, 3))(x))
    repeated = layers.RepeatVector(2)(layers.Flatten()(inputs))
    model = tf.keras.Model(inputs, [x, repeated])
    keras_outputs_match(model, seeded_values((2, 4, 5, 3), tf.float32),
                        ["RESIZE_BILINEAR", "PAD", "STRIDED_SLICE", "TRANSPOSE", "TILE", "CONCATENATION"])
