"""Layout ops against LiteRT: TRANSPOSE, CONCATENATION, PACK, UNPACK, SPLIT, SPLIT_V, TILE,
REVERSE_V2, SPACE_TO_DEPTH, DEPTH_TO_SPACE, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, MATRIX_DIAG,
MATRIX_SET_DIAG and REVERSE_SEQUENCE, with negative axes, run-time perms/axes/sizes, dtypes,
None batch dimensions and the inputs LiteRT rejects."""

import math

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, op_names, run_numlite
from numlite.model import Quantization, read_model, write_model
from test_shape import assert_both_reject, set_constant, values

DTYPES = [tf.float32, tf.int32, tf.int64, tf.bool, tf.int8, tf.uint8]


def typed_model(fn, shapes, dtype, key, refused=()):
    """Convert ``fn`` for inputs of ``dtype``. For dtypes in ``refused`` the converter will not
    emit the op (it asks for a TF Select op) although LiteRT's kernel supports them, so the
    model is converted for int32 and its computed tensors are retyped."""
    if dtype not in refused:
        return convert(fn, [tf.TensorSpec(s, dtype) for s in shapes], key=key + (dtype,))
    model = read_model(convert(fn, [tf.TensorSpec(s, tf.int32) for s in shapes], key=key + (tf.int32,)))
    g = model.subgraphs[0]
    for i, t in enumerate(g.tensors):
        if model.constant(g, i) is None:
            t.type = dtype.name.upper()
    return write_model(model)


# ----------------------------------------------------------------------------- TRANSPOSE

TRANSPOSES = [
    ((2, 3), [1, 0]),
    ((2, 3, 4), [2, 0, 1]),
    ((1, 2, 3, 4), [0, 3, 1, 2]),
    ((2, 1, 3, 2, 2), [4, 2, 0, 3, 1]),
    ((2, 3, 2, 1, 2, 3), [5, 4, 3, 2, 1, 0]),
]


@pytest.mark.parametrize("shape,perm", TRANSPOSES, ids=str)
def test_transpose(shape, perm):
    model = convert(lambda x: tf.transpose(x, perm), [tf.TensorSpec(shape, tf.float32)], key=("transpose", shape, tuple(perm)))
    assert op_names(model) == ["TRANSPOSE"]
    assert_matches_litert(model, [values(shape, np.float32)])


TILED_TRANSPOSES = [
    ((1, 40, 40, 64), [0, 3, 1, 2], tf.float32),  # NHWC -> NCHW: H and W merged, cut into tiles
    ((2, 9, 300, 48), [3, 0, 1, 2], tf.float32),  # batch, H and W merged
    ((600, 4, 40), [1, 2, 0], tf.int8),  # the strided output axis is the batch
    ((2, 3, 6, 300, 40), [1, 4, 0, 2, 3], tf.int32),  # a batch axis between the others
]


@pytest.mark.parametrize("shape,perm,dtype", TILED_TRANSPOSES, ids=str)
def test_transpose_in_tiles(shape, perm, dtype):
    """Transposes whose innermost output axis is strided in the input copy tiles cut along it
    (``transpose_tiles``), every element exactly where LiteRT puts it."""
    from numlite.kernels.layout import transpose_tiles

    assert transpose_tiles(shape, tuple(perm)) is not None  # these take the tiled path
    model = convert(lambda x: tf.transpose(x, perm), [tf.TensorSpec(shape, dtype)], key=("transpose-tiles", shape, tuple(perm), dtype))
    assert op_names(model) == ["TRANSPOSE"]
    assert_matches_litert(model, [values(shape, dtype.as_numpy_dtype)])


def _random_transpose(seed: int) -> tuple[bytes, tuple[int, ...], str]:
    """A TRANSPOSE model of a random shape (rank 2-5, at most 200K elements, lengths that often
    reach the tiled and run-copy paths) and perm: a converted template of that rank with its
    shapes and perm replaced; float32 or retyped to int8 or int16."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(2, 6))
    shape = [int(d) for d in rng.choice([1, 2, 3, 7, 16, 33, 64, 96, 300], rank)]
    if seed % 2:  # channels of a length the tiles are for (see the perm below)
        shape[-1] = int(rng.choice([33, 64, 96]))
    while math.prod(shape) > 200_000:  # halve the longest axis (not the channels kept above)
        shape[int(np.argmax(shape[:-1] if seed % 2 else shape))] //= 2
    perm = [int(p) for p in rng.permutation(rank)]
    if seed % 2:  # the channels moved before the other axes, in order (NHWC -> NCHW's kind)
        perm = list(range(rank - 1))
        perm.insert(int(rng.integers(0, max(1, rank - 2))), rank - 1)
    reverse = list(range(rank))[::-1]
    model = read_model(convert(lambda x: tf.transpose(x, reverse), [tf.TensorSpec((2,) * rank, tf.float32)], key=("transpose-template", rank)))
    g = model.subgraphs[0]
    (x, perm_tensor), (out,) = g.operators[0].inputs, g.operators[0].outputs
    dtype = str(rng.choice(["FLOAT32", "INT8", "INT16"]))
    for t, dims in ((x, shape), (out, [shape[p] for p in perm])):
        g.tensors[t].shape, g.tensors[t].shape_signature, g.tensors[t].type = tuple(dims), None, dtype
    set_constant(model, perm_tensor, np.array(perm, np.int32))
    return write_model(model), tuple(shape), dtype


@pytest.mark.parametrize("seed", range(30))
def test_transpose_random_geometries(seed):
    """Whichever way numlite copies (in tiles, by contiguous runs, or one plain copy), every
    element lands where LiteRT puts it."""
    model, shape, dtype = _random_transpose(seed)
    assert op_names(model) == ["TRANSPOSE"]
    assert_matches_litert(model, [values(shape, np.dtype(dtype.lower()), seed)])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_transpose_dtypes(dtype):
    model = convert(lambda x: tf.transpose(x, [2, 0, 1]), [tf.TensorSpec((2, 3, 4), dtype)], key=("transpose", dtype))
    assert op_names(model) == ["TRANSPOSE"]
    assert_matches_litert(model, [values((2, 3, 4), dtype)])


@pytest.mark.parametrize("perm", [[2, 0, 1], [-1, 0, -2], [0, 1, 2], [-3, -1, -2]], ids=str)
def test_transpose_perm_given_at_run_time(perm):
    """A computed perm makes the output shape dynamic; negative entries count from the end."""
    model = convert(
        lambda x, p: tf.transpose(x, p), [tf.TensorSpec((2, 3, 4), tf.float32), tf.TensorSpec((3,), tf.int32)], key="transpose-input"
    )
    assert op_names(model) == ["TRANSPOSE"]
    assert_matches_litert(model, [values((2, 3, 4), np.float32), np.array(perm, np.int32)])


def test_transpose_with_none_batch():
    model = convert(lambda x: tf.transpose(x, [0, 2, 1]), [tf.TensorSpec([None, 3, 4], tf.float32)], key="transpose-none")
    assert op_names(model) == ["TRANSPOSE"]
    for batch in (1, 3):
        assert_matches_litert(model, [values((batch, 3, 4), np.float32, batch)])


def _transpose_model(rank):
    shape = tuple(range(2, 2 + rank))
    perm = list(range(rank))[::-1]
    return read_model(convert(lambda x: tf.transpose(x, perm), [tf.TensorSpec(shape, tf.float32)], key=("transpose", shape, tuple(perm))))


def test_transpose_constant_negative_perm():
    model = _transpose_model(3)  # (2, 3, 4)
    op = model.subgraphs[0].operators[0]
    set_constant(model, op.inputs[1], np.array([-2, -1, 0], np.int32))
    model.subgraphs[0].tensors[op.outputs[0]].shape = (3, 4, 2)
    expected = assert_matches_litert(write_model(model), [values((2, 3, 4), np.float32)])
    assert expected[0].shape == (3, 4, 2)


@pytest.mark.parametrize("rank", [7, 8])
def test_transpose_up_to_rank_8(rank):
    """The converter stops at rank 6, but LiteRT's kernel transposes up to 8 dims."""
    model = _transpose_model(6)
    op = model.subgraphs[0].operators[0]
    shape = (2, 1, 3, 2, 1, 2, 2, 3)[:rank]
    perm = [rank - 2, 0, rank - 1] + list(range(1, rank - 2))
    model.subgraphs[0].tensors[op.inputs[0]].shape = shape
    model.subgraphs[0].tensors[op.outputs[0]].shape = tuple(shape[p] for p in perm)
    set_constant(model, op.inputs[1], np.array(perm, np.int32))
    assert_matches_litert(write_model(model), [values(shape, np.float32)])


@pytest.mark.parametrize("perm,match", [([1, 1, 0], "duplicate"), ([0, 3, 1], "out of bounds")], ids=str)
def test_transpose_rejects_bad_perm(perm, match):
    model = _transpose_model(3)
    set_constant(model, model.subgraphs[0].operators[0].inputs[1], np.array(perm, np.int32))
    assert_both_reject(write_model(model), [values((2, 3, 4), np.float32)], match)


# ----------------------------------------------------------------------------- CONCATENATION

CONCATS = [
    ([(2, 3), (2, 4)], -1),
    ([(2, 3), (5, 3)], 0),
    ([(1, 2, 3, 2), (1, 2, 1, 2), (1, 2, 4, 2)], 2),
    ([(2, 2, 3), (2, 1, 3), (2, 2, 3), (2, 3, 3)], -2),
    ([(3,), (0,), (2,)], 0),
]


@pytest.mark.parametrize("shapes,axis", CONCATS, ids=str)
def test_concatenation(shapes, axis):
    specs = [tf.TensorSpec(s, tf.float32) for s in shapes]
    model = convert(lambda *xs: tf.concat(list(xs), axis), specs, key=("concat", tuple(shapes), axis))
    assert op_names(model) == ["CONCATENATION"]
    assert_matches_litert(model, [values(s, np.float32, k) for k, s in enumerate(shapes)])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_concatenation_dtypes(dtype):
    model = convert(lambda a, b: tf.concat([a, b], 1), [tf.TensorSpec((2, 3), dtype), tf.TensorSpec((2, 2), dtype)], key=("concat", dtype))
    assert op_names(model) == ["CONCATENATION"]
    assert_matches_litert(model, [values((2, 3), dtype, 1), values((2, 2), dtype, 2)])


def test_concatenation_with_none_batch():
    model = convert(
        lambda a, b: tf.concat([a, b], -1), [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None, 2], tf.float32)], key="concat-none"
    )
    for batch in (1, 4):
        assert_matches_litert(model, [values((batch, 3), np.float32, 1), values((batch, 2), np.float32, 2)])


def _concat_model(dtype):
    return read_model(
        convert(lambda a, b: tf.concat([a, b], 1), [tf.TensorSpec((2, 3), dtype), tf.TensorSpec((2, 2), dtype)], key=("concat", dtype))
    )


def test_concatenation_fused_activation_float():
    """The converter never fuses an activation into CONCATENATION. LiteRT's default (XNNPACK)
    float path and its builtin eval both ignore one, so numlite must not clamp."""
    model = _concat_model(tf.float32)
    model.subgraphs[0].operators[0].builtin_options.fused_activation_function = 1  # RELU
    expected = assert_matches_litert(write_model(model), [values((2, 3), np.float32, 1), values((2, 2), np.float32, 2)])
    assert (expected[0] < 0).any()


def test_concatenation_fused_activation_int32_is_rejected():
    """For other dtypes LiteRT's builtin prepare rejects a fused activation."""
    model = _concat_model(tf.int32)
    model.subgraphs[0].operators[0].builtin_options.fused_activation_function = 1
    assert_both_reject(write_model(model), [values((2, 3), np.int32, 1), values((2, 2), np.int32, 2)], "fused activation")


def _quantize(model, params, type_name):
    """Make every tensor of the (one-op) model ``type_name`` with (scale, zero_point) params."""
    g = model.subgraphs[0]
    op = g.operators[0]
    for t, (scale, zero_point) in zip(list(op.inputs) + list(op.outputs), params):
        g.tensors[t].type = type_name
        g.tensors[t].quantization = Quantization(scale=np.array([scale], np.float32), zero_point=np.array([zero_point], np.int64))
    return write_model(model)


@pytest.mark.parametrize(
    "params",
    [[(0.5, 10), (0.173, 200), (0.3, 7)], [(0.5, 0), (0.25, 1), (1.0, 5)], [(0.02, 0), (0.5, 128), (0.02, 0)], [(1.0, 3)] * 3],
    ids=str,
)
def test_concatenation_uint8_requantizes(params):
    """uint8 inputs with other scales/zero points than the output are requantized (LiteRT's
    ConcatenationWithScaling); every uint8 value is tried, so rounding ties and clamping show."""
    model = _quantize(_concat_model(tf.float32), params, "UINT8")
    every = np.arange(256, dtype=np.uint8)
    first = np.resize(every, (43, 2, 3))  # all 256 values over 43 runs
    second = np.resize(every[::-1], (43, 2, 2))
    for a, b in zip(first, second):
        assert_matches_litert(model, [a, b])


def test_concatenation_int8_rejects_mismatched_quantization():
    model = _quantize(_concat_model(tf.float32), [(0.5, 1), (0.25, 1), (0.5, 1)], "INT8")
    assert_both_reject(model, [values((2, 3), np.int8), values((2, 2), np.int8)], "scale and zero point")


def test_concatenation_int8_with_shared_quantization():
    model = _quantize(_concat_model(tf.float32), [(0.5, -3)] * 3, "INT8")
    assert_matches_litert(model, [values((2, 3), np.int8, 1), values((2, 2), np.int8, 2)])


def test_concatenation_rejects_mismatched_shapes():
    model = _concat_model(tf.float32)
    model.subgraphs[0].tensors[model.subgraphs[0].operators[0].inputs[1]].shape = (3, 2)
    assert_both_reject(write_model(model), [values((2, 3), np.float32), values((3, 2), np.float32)], "differ outside axis")


# ----------------------------------------------------------------------------- PACK / UNPACK

PACKS = [((2, 3), 2, 0), ((2, 3), 3, 1), ((2, 3), 2, -1), ((2, 3), 4, -3), ((), 3, 0), ((4,), 2, -1)]


@pytest.mark.parametrize("shape,count,axis", PACKS, ids=str)
def test_pack(shape, count, axis):
    specs = [tf.TensorSpec(shape, tf.float32)] * count
    model = convert(lambda *xs: tf.stack(list(xs), axis), specs, key=("pack", shape, count, axis))
    assert op_names(model) == ["PACK"]
    assert_matches_litert(model, [values(shape, np.float32, k) for k in range(count)])


# The converter lowers a bool stack to RESHAPE + CONCATENATION (LiteRT's PACK has no bool).
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.int8, tf.uint8], ids=str)
def test_pack_dtypes(dtype):
    model = convert(lambda a, b: tf.stack([a, b], 1), [tf.TensorSpec((3, 2), dtype)] * 2, key=("pack", dtype))
    assert op_names(model) == ["PACK"]
    assert_matches_litert(model, [values((3, 2), dtype, 1), values((3, 2), dtype, 2)])


def test_pack_rejects_values_count_mismatch():
    model = read_model(convert(lambda a, b: tf.stack([a, b], 1), [tf.TensorSpec((3, 2), tf.int32)] * 2, key=("pack", tf.int32)))
    model.subgraphs[0].operators[0].builtin_options.values_count = 3
    assert_both_reject(write_model(model), [values((3, 2), np.int32)] * 2, "values_count")


UNPACKS = [((3, 2), 0), ((3, 2), 1), ((2, 3, 4), -1), ((2, 3, 4), -2), ((5,), 0)]


@pytest.mark.parametrize("shape,axis", UNPACKS, ids=str)
def test_unpack(shape, axis):
    model = convert(lambda x: tf.unstack(x, axis=axis), [tf.TensorSpec(shape, tf.float32)], key=("unpack", shape, axis))
    assert op_names(model) == ["UNPACK"]
    assert_matches_litert(model, [values(shape, np.float32)])


# The converter refuses an int64 UNPACK (it asks for a TF Select op); LiteRT has none either.
@pytest.mark.parametrize("dtype", [tf.int32, tf.bool, tf.int8, tf.uint8], ids=str)
def test_unpack_dtypes(dtype):
    model = convert(lambda x: tf.unstack(x, axis=1), [tf.TensorSpec((2, 3), dtype)], key=("unpack", dtype))
    assert op_names(model) == ["UNPACK"]
    assert_matches_litert(model, [values((2, 3), dtype)])


def test_unpack_rejects_num_mismatch():
    model = read_model(convert(lambda x: tf.unstack(x, axis=1), [tf.TensorSpec((2, 3), tf.int32)], key=("unpack", tf.int32)))
    model.subgraphs[0].operators[0].builtin_options.axis = 0  # size 2, but 3 outputs
    assert_both_reject(write_model(model), [values((2, 3), np.int32)], "num=3")


# ----------------------------------------------------------------------------- SPLIT / SPLIT_V

SPLITS = [((3, 4), 2, -1), ((6, 2), 3, 0), ((2, 6, 2), 6, 1), ((2, 3), 1, 0), ((2, 2, 4), 2, -3)]


@pytest.mark.parametrize("shape,num,axis", SPLITS, ids=str)
def test_split(shape, num, axis):
    model = convert(lambda x: tf.split(x, num, axis=axis), [tf.TensorSpec(shape, tf.float32)], key=("split", shape, num, axis))
    assert op_names(model) == ["SPLIT"]
    assert_matches_litert(model, [values(shape, np.float32)])


# LiteRT's SPLIT has no bool.
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.int8, tf.uint8], ids=str)
def test_split_dtypes(dtype):
    model = typed_model(lambda x: tf.split(x, 2, axis=1), [(3, 4)], dtype, ("split",), refused=[tf.int64])
    assert op_names(model) == ["SPLIT"]
    assert_matches_litert(model, [values((3, 4), dtype)])


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_split_axis_given_at_run_time(axis):
    model = convert(
        lambda x, a: tf.split(x, 2, axis=a), [tf.TensorSpec((4, 2), tf.float32), tf.TensorSpec([], tf.int32)], key="split-input"
    )
    assert op_names(model) == ["SPLIT"]
    assert_matches_litert(model, [values((4, 2), np.float32), np.array(axis, np.int32)])


def test_split_with_none_batch():
    model = convert(lambda x: tf.split(x, 3, axis=-1), [tf.TensorSpec([None, 6], tf.float32)], key="split-none")
    assert op_names(model) == ["SPLIT"]
    for batch in (1, 4):
        assert_matches_litert(model, [values((batch, 6), np.float32, batch)])


def test_split_rejects_uneven_split():
    model = read_model(typed_model(lambda x: tf.split(x, 2, axis=1), [(3, 4)], tf.int32, ("split",)))
    set_constant(model, model.subgraphs[0].operators[0].inputs[0], np.array(0, np.int32))
    assert_both_reject(write_model(model), [values((3, 4), np.int32)], "does not split evenly")


SPLIT_VS = [((5, 4), [1, -1, 2], 0), ((3, 6), [2, 4], -1), ((2, 7, 2), [3, 0, 4], 1), ((2, 4), [-1], 1), ((4, 3), [1, 1, 1, 1], -2)]


@pytest.mark.parametrize("shape,sizes,axis", SPLIT_VS, ids=str)
def test_split_v(shape, sizes, axis):
    model = convert(lambda x: tf.split(x, sizes, axis=axis), [tf.TensorSpec(shape, tf.float32)], key=("split-v", shape, tuple(sizes), axis))
    if op_names(model) == ["SPLIT"]:
        pytest.fail("the converter turned this SPLIT_V into SPLIT")
    assert op_names(model) == ["SPLIT_V"], op_names(model)
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.int8, tf.uint8], ids=str)
def test_split_v_dtypes(dtype):
    model = convert(lambda x: tf.split(x, [1, 3], axis=1), [tf.TensorSpec((3, 4), dtype)], key=("split-v", dtype))
    assert op_names(model) == ["SPLIT_V"]
    assert_matches_litert(model, [values((3, 4), dtype)])


@pytest.mark.parametrize("sizes", [[1, 2, 3], [3, -1, 0], [-1, 1, 1]], ids=str)
def test_split_v_sizes_given_at_run_time(sizes):
    model = convert(
        lambda x, s: tf.split(x, s, num=3, axis=1), [tf.TensorSpec((2, 6), tf.float32), tf.TensorSpec((3,), tf.int32)], key="split-v-input"
    )
    assert op_names(model) == ["SPLIT_V"]
    sizes = np.array(sizes, np.int32)
    if (sizes == 0).any():  # LiteRT's Python get_tensor cannot return an empty dynamic output
        return
    assert_matches_litert(model, [values((2, 6), np.float32), sizes])


@pytest.mark.parametrize("sizes,match", [([2, 3], "do not sum"), ([-1, -1], "more than one -1"), ([5, -1], "exceed")], ids=str)
def test_split_v_rejects_bad_sizes(sizes, match):
    model = read_model(convert(lambda x: tf.split(x, [1, 3], axis=1), [tf.TensorSpec((3, 4), tf.int32)], key=("split-v", tf.int32)))
    set_constant(model, model.subgraphs[0].operators[0].inputs[1], np.array(sizes, np.int32))
    assert_both_reject(write_model(model), [values((3, 4), np.int32)], match)


# ----------------------------------------------------------------------------- TILE

# (All-ones multiples are folded away by the converter.)
TILES = [((3, 4), [2, 3]), ((2, 1, 3), [1, 4, 2]), ((5,), [3]), ((2, 3), [1, 2]), ((1, 2, 1, 2), [2, 1, 3, 2])]


@pytest.mark.parametrize("shape,multiples", TILES, ids=str)
def test_tile(shape, multiples):
    model = convert(lambda x: tf.tile(x, multiples), [tf.TensorSpec(shape, tf.float32)], key=("tile", shape, tuple(multiples)))
    assert op_names(model) == ["TILE"]
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tile_dtypes(dtype):
    model = typed_model(lambda x: tf.tile(x, [2, 3]), [(2, 3)], dtype, ("tile",), refused=[tf.int8])
    assert op_names(model) == ["TILE"]
    assert_matches_litert(model, [values((2, 3), dtype)])


@pytest.mark.parametrize("mult_dtype", [tf.int32, tf.int64], ids=str)
@pytest.mark.parametrize("multiples", [[2, 1], [1, 3], [3, 2]], ids=str)
def test_tile_multiples_given_at_run_time(multiples, mult_dtype):
    model = convert(
        lambda x, m: tf.tile(x, m), [tf.TensorSpec((2, 3), tf.int32), tf.TensorSpec((2,), mult_dtype)], key=("tile-input", mult_dtype)
    )
    assert op_names(model) == ["TILE"]
    assert_matches_litert(model, [values((2, 3), np.int32), np.array(multiples, mult_dtype.as_numpy_dtype)])


def test_tile_with_none_batch():
    model = convert(lambda x: tf.tile(x, [1, 2]), [tf.TensorSpec([None, 3], tf.float32)], key="tile-none")
    for batch in (1, 3):
        assert_matches_litert(model, [values((batch, 3), np.float32, batch)])


# ----------------------------------------------------------------------------- REVERSE_V2

REVERSES = [((3, 4), [0]), ((3, 4), [-1]), ((2, 3, 4), [0, 1]), ((2, 3, 4), [2, 1]), ((2, 3, 4, 2), [1, 2, 3]), ((5,), [0])]


@pytest.mark.parametrize("shape,axes", REVERSES, ids=str)
def test_reverse(shape, axes):
    model = convert(lambda x: tf.reverse(x, axes), [tf.TensorSpec(shape, tf.float32)], key=("reverse", shape, tuple(axes)))
    assert op_names(model) == ["REVERSE_V2"]
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reverse_dtypes(dtype):
    model = typed_model(lambda x: tf.reverse(x, [1]), [(2, 3, 2)], dtype, ("reverse",), refused=[tf.int8])
    assert op_names(model) == ["REVERSE_V2"]
    assert_matches_litert(model, [values((2, 3, 2), dtype)])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_reverse_axis_given_at_run_time(axis):
    model = convert(lambda x, a: tf.reverse(x, a), [tf.TensorSpec((3, 4), tf.float32), tf.TensorSpec((1,), tf.int32)], key="reverse-input")
    assert op_names(model) == ["REVERSE_V2"]
    assert_matches_litert(model, [values((3, 4), np.float32), np.array([axis], np.int32)])


def test_reverse_rejects_non_contiguous_axes():
    model = convert(lambda x: tf.reverse(x, [0, 2]), [tf.TensorSpec((2, 3, 4), tf.float32)], key=("reverse", (2, 3, 4), (0, 2)))
    assert op_names(model) == ["REVERSE_V2"]
    assert_both_reject(model, [values((2, 3, 4), np.float32)], "not contiguous")


# ----------------------------------------------------------------------------- SPACE_TO_DEPTH / DEPTH_TO_SPACE

BLOCK_DTYPES = [tf.float32, tf.int32, tf.int64, tf.int8, tf.uint8]


@pytest.mark.parametrize("shape,block", [((1, 4, 6, 3), 2), ((2, 6, 3, 2), 3), ((1, 2, 2, 1), 2), ((2, 4, 4, 5), 4)], ids=str)
def test_space_to_depth(shape, block):
    model = convert(lambda x: tf.nn.space_to_depth(x, block), [tf.TensorSpec(shape, tf.float32)], key=("s2d", shape, block))
    assert op_names(model) == ["SPACE_TO_DEPTH"]
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("shape,block", [((1, 2, 3, 8), 2), ((2, 2, 1, 18), 3), ((1, 1, 1, 4), 2), ((2, 3, 2, 32), 4)], ids=str)
def test_depth_to_space(shape, block):
    model = convert(lambda x: tf.nn.depth_to_space(x, block), [tf.TensorSpec(shape, tf.float32)], key=("d2s", shape, block))
    assert op_names(model) == ["DEPTH_TO_SPACE"]
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("dtype", BLOCK_DTYPES, ids=str)
def test_space_depth_dtypes(dtype):
    fn = lambda x: (tf.nn.space_to_depth(x, 2), tf.nn.depth_to_space(x, 2))  # noqa: E731
    model = typed_model(fn, [(2, 4, 2, 4)], dtype, ("s2d-d2s",), refused=[tf.int8, tf.uint8])
    assert sorted(op_names(model)) == ["DEPTH_TO_SPACE", "SPACE_TO_DEPTH"]
    assert_matches_litert(model, [values((2, 4, 2, 4), dtype)])


def test_space_to_depth_with_none_batch():
    model = convert(lambda x: tf.nn.space_to_depth(x, 2), [tf.TensorSpec([None, 4, 4, 2], tf.float32)], key="s2d-none")
    for batch in (1, 3):
        assert_matches_litert(model, [values((batch, 4, 4, 2), np.float32, batch)])


def test_block_ops_reject_bad_block_size():
    model = read_model(
        convert(lambda x: tf.nn.depth_to_space(x, 2), [tf.TensorSpec((1, 2, 3, 8), tf.float32)], key=("d2s", (1, 2, 3, 8), 2))
    )
    model.subgraphs[0].operators[0].builtin_options.block_size = 3  # 8 channels are not 3 * 3 * c
    assert_both_reject(write_model(model), [values((1, 2, 3, 8), np.float32)], "multiple of block_size")
    model = read_model(
        convert(lambda x: tf.nn.space_to_depth(x, 2), [tf.TensorSpec((1, 4, 6, 3), tf.float32)], key=("s2d", (1, 4, 6, 3), 2))
    )
    model.subgraphs[0].operators[0].builtin_options.block_size = 4  # 6 is not a multiple of 4
    assert_both_reject(write_model(model), [values((1, 4, 6, 3), np.float32)], "multiples of block_size")


# ----------------------------------------------------------------------------- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND

# (input shape, block shape, paddings): 4-D and 3-D inputs, uneven and zero paddings.
S2B_CASES = [
    ((1, 4, 4, 3), [2, 2], [[0, 0], [0, 0]]),
    ((2, 4, 4, 3), [2, 2], [[1, 1], [0, 2]]),
    ((2, 5, 3, 2), [3, 1], [[1, 0], [0, 0]]),
    ((1, 2, 3, 1), [2, 3], [[1, 1], [2, 1]]),
    ((2, 6, 3), [3], [[1, 2]]),
    ((3, 4, 2), [2], [[0, 0]]),
]
# (input shape, block shape, crops)
B2S_CASES = [
    ((4, 2, 2, 3), [2, 2], [[0, 0], [0, 0]]),
    ((8, 2, 2, 3), [2, 2], [[0, 1], [1, 0]]),
    ((6, 3, 2, 2), [3, 1], [[2, 1], [0, 1]]),
    ((6, 2, 2, 1), [2, 3], [[1, 1], [2, 1]]),
    ((6, 2, 3), [3], [[1, 1]]),
    ((4, 3, 2), [2], [[0, 0]]),
]


@pytest.mark.parametrize("shape,block,pads", S2B_CASES, ids=str)
def test_space_to_batch_nd(shape, block, pads):
    model = convert(
        lambda x: tf.space_to_batch_nd(x, block, pads), [tf.TensorSpec(shape, tf.float32)], key=("s2b", shape, str(block), str(pads))
    )
    assert op_names(model) == ["SPACE_TO_BATCH_ND"]
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("shape,block,crops", B2S_CASES, ids=str)
def test_batch_to_space_nd(shape, block, crops):
    model = convert(
        lambda x: tf.batch_to_space(x, block, crops), [tf.TensorSpec(shape, tf.float32)], key=("b2s", shape, str(block), str(crops))
    )
    assert op_names(model) == ["BATCH_TO_SPACE_ND"]
    assert_matches_litert(model, [values(shape, np.float32)])


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.int8, tf.uint8, tf.bool], ids=str)
def test_space_batch_dtypes(dtype):
    fn = lambda x: (  # noqa: E731
        tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]),
        tf.batch_to_space(x, [2, 2], [[0, 1], [1, 0]]),
    )
    model = typed_model(fn, [(4, 2, 2, 3)], dtype, ("s2b-b2s",), refused=[tf.int8, tf.uint8, tf.bool])
    assert sorted(op_names(model)) == ["BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND"]
    assert_matches_litert(model, [values((4, 2, 2, 3), dtype)])


def test_space_batch_blocks_given_at_run_time():
    model = convert(
        lambda x, block, pads: (tf.space_to_batch_nd(x, block, pads), tf.batch_to_space(x, block, pads)),
        [tf.TensorSpec((4, 4, 2, 3), tf.float32), tf.TensorSpec((2,), tf.int32), tf.TensorSpec((2, 2), tf.int32)],
        key="s2b-b2s-runtime",
    )
    assert sorted(op_names(model)) == ["BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND"]
    x = values((4, 4, 2, 3), np.float32)
    for block, pads in (([2, 2], [[0, 0], [0, 0]]), ([2, 1], [[0, 2], [1, 0]]), ([1, 2], [[1, 1], [0, 0]])):
        assert_matches_litert(model, [x, np.array(block, np.int32), np.array(pads, np.int32)])


def test_space_to_batch_with_none_batch():
    model = convert(lambda x: tf.space_to_batch_nd(x, [2, 2], [[1, 1], [1, 1]]), [tf.TensorSpec([None, 4, 4, 2], tf.float32)], key="s2b-none")
    for batch in (1, 3):
        assert_matches_litert(model, [values((batch, 4, 4, 2), np.float32, batch)])


def test_space_batch_reject_bad_blocks():
    model = read_model(
        convert(lambda x: tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]]), [tf.TensorSpec((1, 4, 4, 3), tf.float32)],
                key=("s2b", (1, 4, 4, 3), str([2, 2]), str([[0, 0], [0, 0]])))
    )  # fmt: skip
    set_constant(model, model.subgraphs[0].operators[0].inputs[1], np.array([3, 2], np.int32))  # 4 % 3 != 0
    assert_both_reject(write_model(model), [values((1, 4, 4, 3), np.float32)], "not multiples of the block shape")
    model = read_model(
        convert(lambda x: tf.batch_to_space(x, [2, 2], [[0, 0], [0, 0]]), [tf.TensorSpec((4, 2, 2, 3), tf.float32)],
                key=("b2s", (4, 2, 2, 3), str([2, 2]), str([[0, 0], [0, 0]])))
    )  # fmt: skip
    crops = model.subgraphs[0].operators[0].inputs[2]
    set_constant(model, crops, np.array([[0, -1], [0, 0]], np.int32))  # negative crops
    assert_both_reject(write_model(model), [values((4, 2, 2, 3), np.float32)], "must not be negative")
    set_constant(model, model.subgraphs[0].operators[0].inputs[1], np.array([3, 1], np.int32))  # batch 4 % 3
    set_constant(model, crops, np.zeros((2, 2), np.int32))
    assert_both_reject(write_model(model), [values((4, 2, 2, 3), np.float32)], "not a multiple")


def test_space_to_batch_rejects_rank_5():
    """The converter refuses rank-5 SpaceToBatchND (it asks for TF Select); a rank-4 model is
    given a rank-5 input instead, which LiteRT's kernel refuses."""
    model = read_model(
        convert(lambda x: tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]]), [tf.TensorSpec((1, 4, 4, 3), tf.float32)],
                key=("s2b", (1, 4, 4, 3), str([2, 2]), str([[0, 0], [0, 0]])))
    )  # fmt: skip
    g = model.subgraphs[0]
    for t, shape in ((g.inputs[0], (1, 4, 4, 3, 1)), (g.outputs[0], (4, 2, 2, 3, 1))):
        g.tensors[t].shape = shape
        g.tensors[t].shape_signature = None
    assert_both_reject(write_model(model), [values((1, 4, 4, 3, 1), np.float32)], "rank 3 or 4")


# ----------------------------------------------------------------------------- MATRIX_DIAG / MATRIX_SET_DIAG


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 1, 5)], ids=str)
@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.int64], ids=str)
def test_matrix_diag(shape, dtype):
    model = convert(lambda x: tf.linalg.diag(x), [tf.TensorSpec(shape, dtype)], key=("diag", shape, dtype))
    assert op_names(model) == ["MATRIX_DIAG"]
    assert_matches_litert(model, [values(shape, dtype)])


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 4), (2, 5, 3), (1, 2, 1, 4)], ids=str)
@pytest.mark.parametrize("dtype", [tf.float32, tf.int32], ids=str)
def test_matrix_set_diag(shape, dtype):
    diag_shape = shape[:-2] + (min(shape[-2:]),)
    model = convert(
        lambda x, d: tf.linalg.set_diag(x, d), [tf.TensorSpec(shape, dtype), tf.TensorSpec(diag_shape, dtype)], key=("set_diag", shape, dtype)
    )
    assert op_names(model) == ["MATRIX_SET_DIAG"]
    assert_matches_litert(model, [values(shape, dtype), values(diag_shape, dtype, 1)])


def test_matrix_set_diag_rejects_wrong_diagonal_length():
    """LiteRT reads the diagonal without checking its shape (past its end when too short);
    numlite refuses a diagonal that is not batch shape + min(rows, cols)."""
    model = read_model(
        convert(lambda x, d: tf.linalg.set_diag(x, d), [tf.TensorSpec((2, 3, 4), tf.float32), tf.TensorSpec((2, 3), tf.float32)],
                key=("set_diag", (2, 3, 4), tf.float32))
    )  # fmt: skip
    g = model.subgraphs[0]
    g.tensors[g.inputs[1]].shape = (2, 2)
    g.tensors[g.inputs[1]].shape_signature = None
    with pytest.raises(numlite.PrepareError, match="diagonal must have shape"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


# ----------------------------------------------------------------------------- REVERSE_SEQUENCE

# (input shape, seq_axis, batch_axis, lengths): batch before and after the sequence axis.
REVERSE_SEQUENCE_CASES = [
    ((3, 5, 2), 1, 0, [0, 5, 3]),
    ((4, 3), 0, 1, [1, 4, 2]),
    ((2, 4, 3, 2), 2, 0, [3, 1]),
    ((4, 2, 3), 0, 2, [4, 0, 2]),
    ((2, 3, 6), 2, 1, [6, 2, 5]),
]


@pytest.mark.parametrize("lengths_dtype", [tf.int32, tf.int64], ids=str)
@pytest.mark.parametrize("shape,seq,batch,lengths", REVERSE_SEQUENCE_CASES, ids=str)
def test_reverse_sequence(shape, seq, batch, lengths, lengths_dtype):
    model = convert(
        lambda x, n: tf.reverse_sequence(x, n, seq_axis=seq, batch_axis=batch),
        [tf.TensorSpec(shape, tf.float32), tf.TensorSpec((shape[batch],), lengths_dtype)],
        key=("reverse_sequence", shape, seq, batch, lengths_dtype),
    )
    assert op_names(model) == ["REVERSE_SEQUENCE"]
    assert_matches_litert(model, [values(shape, np.float32), np.array(lengths, lengths_dtype.as_numpy_dtype)])


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64], ids=str)
def test_reverse_sequence_dtypes(dtype):
    model = convert(
        lambda x, n: tf.reverse_sequence(x, n, seq_axis=1, batch_axis=0),
        [tf.TensorSpec((3, 4), dtype), tf.TensorSpec((3,), tf.int32)],
        key=("reverse_sequence", dtype),
    )
    assert_matches_litert(model, [values((3, 4), dtype), np.array([2, 4, 3], np.int32)])


def _reverse_sequence_model():
    return convert(
        lambda x, n: tf.reverse_sequence(x, n, seq_axis=1, batch_axis=0),
        [tf.TensorSpec((3, 5, 2), tf.float32), tf.TensorSpec((3,), tf.int32)],
        key=("reverse_sequence", (3, 5, 2), 1, 0, tf.int32),
    )


def test_reverse_sequence_negative_lengths_reverse_nothing():
    """TensorFlow refuses negative lengths; the installed LiteRT runs them as "no reversal"."""
    assert_matches_litert(_reverse_sequence_model(), [values((3, 5, 2), np.float32), np.array([-1, 3, -7], np.int32)])


def test_reverse_sequence_rejects_too_long_lengths():
    """A length beyond the sequence makes the installed LiteRT write outside the row (newer
    versions reject it); numlite raises instead of returning numbers."""
    model = _reverse_sequence_model()
    with pytest.raises(numlite.InvokeError, match="exceeds the sequence dimension"):
        run_numlite(model, [values((3, 5, 2), np.float32), np.array([1, 6, 2], np.int32)])
