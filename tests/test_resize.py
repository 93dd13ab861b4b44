"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR against LiteRT: up/down sampling by integer
and fractional factors, align_corners, half_pixel_centers, run-time sizes, integer images."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, op_names, run_litert
from numlite.model import read_model, write_model

# (input H, W) -> (output H, W): 2x up (LiteRT's special path), fractional up/down, to 1 pixel.
SIZES = [((3, 4), (6, 8)), ((4, 5), (7, 3)), ((5, 7), (2, 3)), ((3, 3), (1, 1)), ((1, 1), (3, 2)), ((6, 4), (6, 9))]
# align_corners and half_pixel_centers exclude each other.
MODES = [(False, False), (True, False), (False, True)]

OPS = {
    "RESIZE_BILINEAR": tf.compat.v1.image.resize_bilinear,
    "RESIZE_NEAREST_NEIGHBOR": tf.compat.v1.image.resize_nearest_neighbor,
}


def _resize_model(name, in_hw, out_hw, align_corners, half_pixel_centers, dtype=tf.float32, channels=3):
    fn = OPS[name]
    shape = (2, *in_hw, channels)
    return convert(
        lambda x: fn(x, out_hw, align_corners=align_corners, half_pixel_centers=half_pixel_centers),
        [tf.TensorSpec(shape, dtype)],
        key=(name, in_hw, out_hw, align_corners, half_pixel_centers, dtype, channels),
    )


@pytest.mark.parametrize("align_corners,half_pixel_centers", MODES, ids=str)
@pytest.mark.parametrize("in_hw,out_hw", SIZES, ids=str)
@pytest.mark.parametrize("name", sorted(OPS))
def test_float_resize(name, in_hw, out_hw, align_corners, half_pixel_centers):
    model = _resize_model(name, in_hw, out_hw, align_corners, half_pixel_centers)
    assert op_names(model) == [name], op_names(model)
    assert_matches_litert(model, seed=1)


@pytest.mark.parametrize("name", sorted(OPS))
def test_image_resize_api(name):
    """tf.image.resize (half-pixel centers) on a larger image with many channels."""
    method = "bilinear" if name == "RESIZE_BILINEAR" else "nearest"
    model = convert(
        lambda x: tf.image.resize(x, (13, 10), method=method), [tf.TensorSpec((1, 9, 16, 10), tf.float32)], key=(name, "api")
    )
    assert name in op_names(model)
    assert_matches_litert(model, seed=2)


@pytest.mark.parametrize("name", sorted(OPS))
def test_runtime_size(name):
    """The size as a model input: the output shape is known only at invoke."""
    fn = OPS[name]
    model = convert(
        lambda x, size: fn(x, size, half_pixel_centers=True),
        [tf.TensorSpec((1, 4, 5, 2), tf.float32), tf.TensorSpec((2,), tf.int32)],
        key=(name, "runtime"),
    )
    assert name in op_names(model)
    x = np.random.default_rng(3).uniform(-1, 1, (1, 4, 5, 2)).astype(np.float32)
    for size in ([8, 10], [3, 7], [4, 5]):
        assert_matches_litert(model, [x, np.array(size, np.int32)])


@pytest.mark.parametrize("block_bytes", [1, 1 << 12, None], ids=["one row", "a few rows", "default"])
@pytest.mark.parametrize("align_corners,half_pixel_centers", MODES, ids=str)
def test_float_bilinear_in_blocks_of_rows(monkeypatch, align_corners, half_pixel_centers, block_bytes):
    """The float bilinear resize runs in blocks of output rows (per image of the batch), its
    rows pass and columns pass in working memory from the arena: blocks of one row, of a few
    and the default give LiteRT's results, over several invokes of one allocation with new
    images (a stale working buffer would show)."""
    from numlite.kernels import resize

    if block_bytes is not None:
        monkeypatch.setattr(resize, "BLOCK_BYTES", block_bytes)
    model = _resize_model("RESIZE_BILINEAR", (9, 11), (20, 17), align_corners, half_pixel_centers, channels=8)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    (step,) = interpreter.subgraph(0).plan
    rows = max(1, min(20, (block_bytes or resize.BLOCK_BYTES) // ((2 * 11 + 17) * 8 * 4)))
    assert len(step.kernel.blocks) == 2 * -(-20 // rows)  # two images
    needed = rows * (2 * 11 + 17) * 8 * 4  # two rows passes of 11 columns, the product of 17
    assert needed <= step.kernel.scratch_bytes < needed + 3 * 64  # (each array on a 64-byte boundary)
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-4, 4, (2, 9, 11, 8)).astype(np.float32)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        np.testing.assert_allclose(actual, run_litert(model, [x])[0], rtol=1e-5, atol=1e-5)


def _retyped(model_bytes: bytes, type_name: str) -> bytes:
    """The model with its input and output retyped: TensorFlow's bilinear resize always
    outputs float, so integer RESIZE_BILINEAR models are written by numlite."""
    model = read_model(model_bytes)
    graph = model.subgraphs[0]
    for i in graph.inputs + graph.outputs:
        graph.tensors[i].type = type_name
    return write_model(model)


BILINEAR_INT_TYPES = {"UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16}


@pytest.mark.parametrize("align_corners,half_pixel_centers", MODES, ids=str)
@pytest.mark.parametrize("in_hw,out_hw", SIZES[:4], ids=str)
@pytest.mark.parametrize("type_name", sorted(BILINEAR_INT_TYPES))
def test_integer_bilinear(type_name, in_hw, out_hw, align_corners, half_pixel_centers):
    """uint8 interpolates in float and rounds half up; int8 uses 10-bit fixed point."""
    model = _retyped(_resize_model("RESIZE_BILINEAR", in_hw, out_hw, align_corners, half_pixel_centers), type_name)
    dtype = BILINEAR_INT_TYPES[type_name]
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max, (2, *in_hw, 3), endpoint=True).astype(dtype)
    assert_matches_litert(model, [x])


NEAREST_INT_TYPES = {"UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32}


@pytest.mark.parametrize("align_corners,half_pixel_centers", MODES, ids=str)
@pytest.mark.parametrize("type_name", sorted(NEAREST_INT_TYPES))
def test_integer_nearest_neighbor(type_name, align_corners, half_pixel_centers):
    """The converter only emits float resizes (integer ones need TF Select), so the types are
    written by numlite; nearest neighbor copies values of any type."""
    model = _retyped(_resize_model("RESIZE_NEAREST_NEIGHBOR", (5, 4), (7, 9), align_corners, half_pixel_centers), type_name)
    dtype = NEAREST_INT_TYPES[type_name]
    x = np.random.default_rng(4).integers(-100, 100, (2, 5, 4, 3)).astype(dtype)
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("in_hw,out_hw", [((2, 3), (16, 24)), ((3, 2), (12, 8))], ids=str)
def test_uint8_bilinear_8x_half_pixel(in_hw, out_hw):
    """LiteRT has a dedicated uint8 kernel for 8x upsampling with half-pixel centers and depth
    a multiple of 8 (the 4x case goes through the generic kernel)."""
    model = _retyped(_resize_model("RESIZE_BILINEAR", in_hw, out_hw, False, True, channels=8), "UINT8")
    x = np.random.default_rng(6).integers(0, 255, (2, *in_hw, 8), endpoint=True).astype(np.uint8)
    assert_matches_litert(model, [x])


def _both_flags(name, type_name):
    """TensorFlow forbids align_corners with half_pixel_centers, so numlite writes the model."""
    model = read_model(_resize_model(name, (3, 4), (7, 9), True, False))
    model.subgraphs[0].operators[0].builtin_options.half_pixel_centers = True
    graph = model.subgraphs[0]
    for i in graph.inputs + graph.outputs:
        graph.tensors[i].type = type_name
    x = np.random.default_rng(7).uniform(0, 100, (2, 3, 4, 3)).astype(graph.tensors[graph.inputs[0]].dtype)
    return write_model(model), x


@pytest.mark.parametrize("type_name", ["FLOAT32", "UINT8", "INT8"])
def test_nearest_with_align_corners_and_half_pixel_centers(type_name):
    """LiteRT's nearest-neighbor kernel runs it: rounded align-corners coordinates, offset."""
    model, x = _both_flags("RESIZE_NEAREST_NEIGHBOR", type_name)
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("type_name", ["UINT8", "INT8"])
def test_bilinear_with_align_corners_and_half_pixel_centers_is_rejected(type_name):
    """LiteRT's bilinear kernel refuses the combination at prepare. (For float32 its XNNPACK
    delegate claims the node first and computes something; numlite follows the kernel.)"""
    model, x = _both_flags("RESIZE_BILINEAR", type_name)
    with pytest.raises(RuntimeError, match="align_corners"):
        run_litert(model, [x])
    with pytest.raises(numlite.PrepareError, match="align_corners"):
        numlite.Interpreter(model_content=model).allocate_tensors()


@pytest.mark.parametrize("name", sorted(OPS))
def test_int64_image_is_rejected(name):
    """LiteRT fails such a model at invoke; numlite at allocation."""
    model = _retyped(_resize_model(name, (3, 4), (6, 8), False, False), "INT64")
    with pytest.raises(RuntimeError, match="type"):
        run_litert(model, [np.zeros((2, 3, 4, 3), np.int64)])
    with pytest.raises(numlite.PrepareError, match="dtype int64"):
        numlite.Interpreter(model_content=model).allocate_tensors()


def test_non_4d_input_is_rejected():
    model = read_model(_resize_model("RESIZE_NEAREST_NEIGHBOR", (3, 4), (6, 8), False, False))
    graph = model.subgraphs[0]
    graph.tensors[graph.inputs[0]].shape = (2, 3, 4)
    with pytest.raises(numlite.PrepareError, match="4-D"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()
