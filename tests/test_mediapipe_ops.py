"""MediaPipe's custom operators, built into numlite (numlite/kernels/mediapipe.py).

The three ops LiteRT's default XNNPACK delegate claims (Convolution2DTransposeBias,
MaxPoolingWithArgmax2D, MaxUnpooling2D) are judged by LiteRT on one-op models written with
numlite's writer, with the raw TfLite*Params bytes MediaPipe's converter stores. The three
landmark ops, which stock LiteRT cannot run, are judged by NumPy derivations of MediaPipe's
formulas written here, loop by loop, and by invariants (identity, known rotations and scales,
samples at integer points).
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from flatbuffers import flexbuffers

import numlite
from helpers import assert_close, litert_interpreter, run_interpreter
from numlite.model import write_model
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Subgraph, Tensor

SAME, VALID = 1, 2


def _model(ops: list[tuple[str, list[str], list[str], bytes | None]], tensors: dict[str, tuple], consts: dict[str, np.ndarray] = {},
           inputs: list[str] = (), outputs: list[str] = (), version: int = 1) -> bytes:
    """A float32 model of CUSTOM ops: ``ops`` are (custom code, input names, output names,
    custom_options), ``tensors`` name -> shape, ``consts`` name -> value."""
    m = Model()
    g = Subgraph()
    index = {}
    for name, shape in tensors.items():
        buffer = 0
        if name in consts:
            m.buffers.append(Buffer(np.frombuffer(np.asarray(consts[name], np.float32).tobytes(), np.uint8)))
            buffer = len(m.buffers) - 1
        index[name] = len(g.tensors)
        g.tensors.append(Tensor(name, tuple(shape), "FLOAT32", buffer))
    codes: dict[str, int] = {}
    for code, ins, outs, options in ops:
        if code not in codes:
            codes[code] = len(m.operator_codes)
            m.operator_codes.append(OperatorCode("CUSTOM", code, version))
        g.operators.append(Operator(codes[code], [index[n] for n in ins], [index[n] for n in outs], custom_options=options))
    g.inputs = [index[n] for n in inputs]
    g.outputs = [index[n] for n in outputs]
    m.subgraphs.append(g)
    return write_model(m)


def _pool_params(padding: int, stride: tuple[int, int], filter: tuple[int, int], activation: int = 0) -> bytes:
    """TfLitePoolParams as MediaPipe's converter stores it: padding, stride_width, stride_height,
    filter_width, filter_height, activation, and the four ints of the computed padding."""
    return struct.pack("<10i", padding, stride[1], stride[0], filter[1], filter[0], activation, 0, 0, 0, 0)


def _tconv_params(padding: int, stride: tuple[int, int]) -> bytes:
    """TfLiteTransposeConvParams (padding, stride_width, stride_height): the 12 bytes of the
    public selfie segmentation models."""
    return struct.pack("<3i", padding, stride[1], stride[0])


def _floats(shape, seed, low=-1.0, high=1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _numlite(model: bytes, inputs: list[np.ndarray], **kwargs) -> list[np.ndarray]:
    return run_interpreter(numlite.Interpreter(model_content=model, **kwargs), inputs)


# -- the ops LiteRT's XNNPACK delegate claims ---------------------------------------------------------


def _tconv_model(x_shape, kernel, out_channels, stride, padding, seed) -> tuple[bytes, tuple]:
    n, h, w, c = x_shape
    pads = [0, 0]
    if padding == SAME:  # MediaPipe's output size, which the model declares
        pads = [max(0, k - (size - 1) % s - 1) for k, size, s in zip(kernel, (h, w), stride)]
    out = (n, stride[0] * (h - 1) + kernel[0] - pads[0], stride[1] * (w - 1) + kernel[1] - pads[1], out_channels)
    weights = _floats((out_channels, *kernel, c), seed + 1)
    bias = _floats((out_channels,), seed + 2)
    model = _model([("Convolution2DTransposeBias", ["x", "w", "b"], ["y"], _tconv_params(padding, stride))],
                   {"x": x_shape, "w": weights.shape, "b": bias.shape, "y": out}, {"w": weights, "b": bias}, ["x"], ["y"])
    return model, out


def test_litert_runs_the_three_ops_only_through_xnnpack():
    """The premise of the comparisons below: LiteRT 2.3's default resolver runs these ops
    because XNNPACK claims them; without the delegate they are unresolved custom ops."""
    model, _ = _tconv_model((1, 3, 3, 2), (3, 3), 2, (2, 2), SAME, 0)
    run_interpreter(litert_interpreter(model), [_floats((1, 3, 3, 2), 0)])
    with pytest.raises(RuntimeError, match="unresolved custom op: Convolution2DTransposeBias"):
        litert_interpreter(model, builtin_only=True).allocate_tensors()


@pytest.mark.parametrize(
    "x_shape, kernel, stride, padding",
    [
        ((1, 4, 4, 3), (3, 3), (2, 2), SAME),
        ((1, 4, 4, 3), (3, 3), (2, 2), VALID),
        ((2, 5, 3, 4), (4, 2), (2, 1), SAME),  # SAME trims 3 rows: MediaPipe's size, not in * stride
        ((1, 3, 5, 2), (2, 2), (1, 1), VALID),
        ((1, 5, 5, 3), (3, 3), (3, 3), SAME),
        ((1, 8, 8, 16), (2, 2), (2, 2), SAME),  # the selfie segmentation models' last layer
    ],
)
def test_transpose_conv_bias_matches_litert(x_shape, kernel, stride, padding):
    model, out = _tconv_model(x_shape, kernel, 5, stride, padding, seed=sum(x_shape) + kernel[0])
    x = _floats(x_shape, 7)
    (expected,) = run_interpreter(litert_interpreter(model), [x])
    (actual,) = _numlite(model, [x])
    assert actual.shape == expected.shape == out
    assert_close(actual, expected)


def test_transpose_conv_bias_compiled_matches_litert(jit_cache_dir, monkeypatch):
    """The compiled engine's Convolution2DTransposeBias (numlite/jit/kernels/transpose_conv.py),
    two geometries in one model (one compile): SAME with stride 2, and SAME trimming 3 rows with
    strides (2, 1) and a batch of 2; judged by LiteRT, as the NumPy engine is above."""
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)
    shapes = [((1, 4, 4, 3), (3, 3), (2, 2), SAME), ((2, 5, 3, 4), (4, 2), (2, 1), SAME)]
    tensors, consts, ops = {}, {}, []
    for k, (x_shape, kernel, stride, padding) in enumerate(shapes):
        pads = [max(0, kk - (size - 1) % s - 1) for kk, size, s in zip(kernel, x_shape[1:3], stride)]
        out = (x_shape[0], stride[0] * (x_shape[1] - 1) + kernel[0] - pads[0], stride[1] * (x_shape[2] - 1) + kernel[1] - pads[1], 5)
        consts[f"w{k}"], consts[f"b{k}"] = _floats((5, *kernel, x_shape[3]), 11 + k), _floats((5,), 21 + k)
        tensors.update({f"x{k}": x_shape, f"w{k}": consts[f"w{k}"].shape, f"b{k}": (5,), f"y{k}": out})
        ops.append(("Convolution2DTransposeBias", [f"x{k}", f"w{k}", f"b{k}"], [f"y{k}"], _tconv_params(padding, stride)))
    model = _model(ops, tensors, consts, ["x0", "x1"], ["y0", "y1"])
    xs = [_floats(x_shape, 30 + k) for k, (x_shape, *_) in enumerate(shapes)]
    expected = run_interpreter(litert_interpreter(model), xs)
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    actual = run_interpreter(interpreter, xs)
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    for a, e in zip(actual, expected):
        assert_close(a, e)


def _pool_model(x_shape, filter, stride, padding, activation=0) -> tuple[bytes, tuple]:
    n, h, w, c = x_shape
    if padding == SAME:
        out = (n, -(-h // stride[0]), -(-w // stride[1]), c)
    else:
        out = (n, (h - filter[0]) // stride[0] + 1, (w - filter[1]) // stride[1] + 1, c)
    opts = _pool_params(padding, stride, filter, activation)
    return _model([("MaxPoolingWithArgmax2D", ["x"], ["v", "i"], opts)], {"x": x_shape, "v": out, "i": out},
                  inputs=["x"], outputs=["v", "i"]), out


def _litert_positions(indices: np.ndarray, fh: int) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT (XNNPACK) writes ``x * fh + y`` as uint32 bits into the float32 tensor."""
    k = indices.view(np.uint32).astype(np.int64)
    return k % fh, k // fh


def _numlite_positions(indices: np.ndarray, fw: int) -> tuple[np.ndarray, np.ndarray]:
    """numlite writes MediaPipe's kernel's float ``y * fw + x + 0.1``."""
    k = indices.astype(np.int64)
    return k // fw, k % fw


# XNNPACK takes only windows that tile the input (filter == stride); with SAME padding the
# padding then goes after the input for 2-wide windows, so no window starts in it.
POOLS = [((1, 4, 6, 3), (2, 2), SAME), ((2, 5, 7, 2), (2, 2), SAME), ((1, 6, 6, 2), (2, 3), VALID),
         ((1, 7, 5, 4), (3, 2), VALID)]


@pytest.mark.parametrize("x_shape, filter, padding", POOLS)
def test_max_pool_argmax_matches_litert(x_shape, filter, padding):
    model, out = _pool_model(x_shape, filter, filter, padding)
    x = _floats(x_shape, 3)  # distinct values: one maximum per window
    values, indices = run_interpreter(litert_interpreter(model), [x])
    actual_values, actual_indices = _numlite(model, [x])
    assert actual_values.shape == out
    assert_close(actual_values, values)
    # Same position of the maximum, each runtime in its own encoding.
    for a, b in zip(_numlite_positions(actual_indices, filter[1]), _litert_positions(indices, filter[0])):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(actual_indices, actual_indices.astype(np.int64).astype(np.float32) + np.float32(0.1))


def test_max_pool_argmax_compiled_matches_litert(jit_cache_dir, monkeypatch):
    """The compiled engine's MaxPoolingWithArgmax2D (numlite/jit/kernels/mediapipe.py), the
    four geometries of POOLS in one model (one compile), judged by LiteRT as the NumPy engine
    is above: the values, and the same place of each maximum in each runtime's encoding."""
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)
    tensors, ops = {}, []
    for k, (x_shape, filter, padding) in enumerate(POOLS):
        _, out = _pool_model(x_shape, filter, filter, padding)
        tensors.update({f"x{k}": x_shape, f"v{k}": out, f"i{k}": out})
        ops.append(("MaxPoolingWithArgmax2D", [f"x{k}"], [f"v{k}", f"i{k}"], _pool_params(padding, filter, filter)))
    model = _model(ops, tensors, inputs=[f"x{k}" for k in range(len(POOLS))],
                   outputs=[name for k in range(len(POOLS)) for name in (f"v{k}", f"i{k}")])
    xs = [_floats(x_shape, 40 + k) for k, (x_shape, _, _) in enumerate(POOLS)]
    expected = run_interpreter(litert_interpreter(model), xs)
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    actual = run_interpreter(interpreter, xs)
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    for k, (_, filter, _) in enumerate(POOLS):
        assert_close(actual[2 * k], expected[2 * k])
        for a, b in zip(_numlite_positions(actual[2 * k + 1], filter[1]), _litert_positions(expected[2 * k + 1], filter[0])):
            np.testing.assert_array_equal(a, b)
        places = actual[2 * k + 1]
        np.testing.assert_array_equal(places, places.astype(np.int64).astype(np.float32) + np.float32(0.1))  # MediaPipe's + 0.1


def test_argmax_index_conventions():
    """The maximum at each place of a 2x3 window: MediaPipe's kernel (numlite) counts row-major
    and writes a float plus 0.1; LiteRT's XNNPACK counts column-major and writes uint32 bits."""
    fh, fw = 2, 3
    model, _ = _pool_model((1, fh, fw, 1), (fh, fw), (fh, fw), VALID)
    for y in range(fh):
        for x in range(fw):
            image = np.full((1, fh, fw, 1), -1, np.float32)
            image[0, y, x, 0] = 5
            _, litert = run_interpreter(litert_interpreter(model), [image])
            _, ours = _numlite(model, [image])
            assert litert.view(np.uint32).item() == x * fh + y
            assert ours.item() == np.float32(y * fw + x) + np.float32(0.1)


def test_argmax_window_starting_in_the_padding_differs_from_litert():
    """4x4 windows over 5x5 with SAME padding start one row and column before the input. LiteRT
    repeats the edge into the padding and reports the first copy (a place in the padding row),
    MediaPipe's kernel the pixel itself; values agree."""
    model, _ = _pool_model((1, 5, 5, 1), (4, 4), (4, 4), SAME)
    x = _floats((1, 5, 5, 1), 2, -2.0, -1.0)
    x[0, 0, 4, 0] = -0.5  # the maximum of window (0, 1), on the input's first row
    values, indices = run_interpreter(litert_interpreter(model), [x])
    ours_values, ours = _numlite(model, [x])
    assert_close(ours_values, values)
    # Window (0, 1) starts at input row -1, column 3: the pixel is at window (y=1, x=1).
    assert (_numlite_positions(ours, 4)[0][0, 0, 1, 0], _numlite_positions(ours, 4)[1][0, 0, 1, 0]) == (1, 1)
    assert (_litert_positions(indices, 4)[0][0, 0, 1, 0], _litert_positions(indices, 4)[1][0, 0, 1, 0]) == (0, 1)


@pytest.mark.parametrize("x_shape, filter, padding", POOLS[:3])
def test_pool_then_unpool_matches_litert(x_shape, filter, padding):
    """The pair as MediaPipe's segmentation models chain them, and numlite's unpooling of
    LiteRT's own indices (its encoding is read too)."""
    _, out = _pool_model(x_shape, filter, filter, padding)
    up = (out[0], out[1] * filter[0], out[2] * filter[1], out[3])
    opts = _pool_params(padding, filter, filter)
    unpool_opts = _pool_params(VALID, filter, filter)  # XNNPACK refuses an unpooling marked SAME
    chain = _model([("MaxPoolingWithArgmax2D", ["x"], ["v", "i"], opts), ("MaxUnpooling2D", ["v", "i"], ["y"], unpool_opts)],
                   {"x": x_shape, "v": out, "i": out, "y": up}, inputs=["x"], outputs=["y"])
    x = _floats(x_shape, 5)
    (expected,) = run_interpreter(litert_interpreter(chain), [x])
    (actual,) = _numlite(chain, [x])
    assert_close(actual, expected)

    unpool = _model([("MaxUnpooling2D", ["v", "i"], ["y"], unpool_opts)], {"v": out, "i": out, "y": up}, inputs=["v", "i"], outputs=["y"])
    values = _floats(out, 6)
    litert_indices = np.random.default_rng(1).integers(0, filter[0] * filter[1], out).astype(np.uint32).view(np.float32)
    (expected,) = run_interpreter(litert_interpreter(unpool), [values, litert_indices])
    (actual,) = _numlite(unpool, [values, litert_indices])
    assert_close(actual, expected)


# -- MediaPipe's CPU kernels beyond what XNNPACK takes: overlapping windows, activations -----------------


def _reference_argmax(x, filter, stride, padding, clamp=None):
    """max_pool_argmax.cc's loop: windows clipped to the input, first strict maximum wins."""
    n, h, w, c = x.shape
    (fh, fw), (sh, sw) = filter, stride
    if padding == SAME:
        oh, ow = -(-h // sh), -(-w // sw)
    else:
        oh, ow = (h - fh + sh) // sh, (w - fw + sw) // sw
    top = max(((oh - 1) * sh + fh - h) // 2, 0)
    left = max(((ow - 1) * sw + fw - w) // 2, 0)
    values = np.zeros((n, oh, ow, c), np.float32)
    indices = np.zeros((n, oh, ow, c), np.float32)
    for b, oy, ox, ch in np.ndindex(n, oh, ow, c):
        best, where = np.finfo(np.float32).min, 0
        for fy in range(fh):
            for fx in range(fw):
                iy, ix = oy * sh - top + fy, ox * sw - left + fx
                if 0 <= iy < h and 0 <= ix < w and x[b, iy, ix, ch] > best:
                    best, where = x[b, iy, ix, ch], fy * fw + fx
        values[b, oy, ox, ch] = best if clamp is None else min(max(best, clamp[0]), clamp[1])
        indices[b, oy, ox, ch] = np.float32(where) + np.float32(0.1)
    return values, indices


@pytest.mark.parametrize("filter, stride, padding, activation, clamp", [
    ((3, 3), (2, 2), SAME, 0, None),
    ((3, 2), (1, 2), VALID, 3, (0.0, 6.0)),  # RELU6
    ((2, 3), (2, 1), SAME, 1, (0.0, math.inf)),  # RELU
])
def test_max_pool_argmax_overlapping_windows_and_activations(filter, stride, padding, activation, clamp):
    x = _floats((1, 5, 6, 2), 9, -3, 8)
    model, _ = _pool_model(x.shape, filter, stride, padding, activation)
    expected_values, expected_indices = _reference_argmax(x, filter, stride, padding, clamp)
    values, indices = _numlite(model, [x])
    assert_close(values, expected_values)
    np.testing.assert_array_equal(indices, expected_indices)


def test_unpool_with_overlapping_windows_against_a_scatter():
    """max_unpooling.cc with stride < filter: output filter times larger, padding from
    ComputePadding, later values overwrite earlier ones."""
    filter, stride = (3, 3), (2, 2)
    values = _floats((1, 3, 4, 2), 11)
    positions = np.random.default_rng(2).integers(0, 9, values.shape)
    indices = positions.astype(np.float32) + np.float32(0.1)
    out = (1, 9, 12, 2)
    expected = np.zeros(out, np.float32)
    pads = [max(((n - 1) * s + f - n * f) // 2, 0) for n, s, f in zip((3, 4), stride, filter)]
    for b, y, x, c in np.ndindex(values.shape):
        k = int(indices[b, y, x, c])
        expected[b, y * stride[0] - pads[0] + k // 3, x * stride[1] - pads[1] + k % 3, c] = values[b, y, x, c]
    model = _model([("MaxUnpooling2D", ["v", "i"], ["y"], _pool_params(SAME, stride, filter))],
                   {"v": values.shape, "i": values.shape, "y": out}, inputs=["v", "i"], outputs=["y"])
    (actual,) = _numlite(model, [values, indices])
    np.testing.assert_array_equal(actual, expected)


# -- the landmark ops ------------------------------------------------------------------------------


def _flex(**options) -> bytes:
    return bytes(flexbuffers.Dumps(options))


def _matrix(a, b, tx, c, d, ty) -> np.ndarray:
    """A 4x4 ``[1, 4, 4]`` with the 2-D affine part given."""
    m = np.eye(4, dtype=np.float32)
    m[0, [0, 1, 3]] = a, b, tx
    m[1, [0, 1, 3]] = c, d, ty
    return m.reshape(1, 4, 4)


def _transform_landmarks(points_shape, options=None, version=2) -> bytes:
    return _model([("TransformLandmarks", ["p", "m"], ["y"], options)], {"p": points_shape, "m": (1, 4, 4), "y": points_shape},
                  inputs=["p", "m"], outputs=["y"], version=version)


@pytest.mark.parametrize("dims", [3, 2])
def test_transform_landmarks_v2(dims):
    points = _floats((1, 7, dims), 1, -50, 200)
    model = _transform_landmarks(points.shape)
    (same,) = _numlite(model, [points, np.eye(4, dtype=np.float32).reshape(1, 4, 4)])
    np.testing.assert_array_equal(same, points)
    # A quarter turn and a shift: (x, y) -> (-y + 10, x - 5).
    (turned,) = _numlite(model, [points, _matrix(0, -1, 10, 1, 0, -5)])
    np.testing.assert_array_equal(turned[..., 0], -points[..., 1] + 10)
    np.testing.assert_array_equal(turned[..., 1], points[..., 0] - 5)
    if dims == 3:
        np.testing.assert_array_equal(turned[..., 2], points[..., 2])
    m = _floats((1, 4, 4), 4, -2, 2)
    (actual,) = _numlite(model, [points, m])
    expected = points.copy()
    for k in range(7):
        x, y = points[0, k, :2].astype(np.float64)
        expected[0, k, 0] = m[0, 0, 0] * x + m[0, 0, 1] * y + m[0, 0, 3]
        expected[0, k, 1] = m[0, 1, 0] * x + m[0, 1, 1] * y + m[0, 1, 3]
    assert_close(actual, expected, rtol=1e-5, atol=1e-4)  # values up to ~800: float32 sums


def test_transform_landmarks_v1_scales_the_translation():
    points = _floats((1, 2, 3, 6), 2, -1, 1)  # two 3-D landmarks per pixel
    model = _transform_landmarks(points.shape, _flex(dimensions=3, scale=4.0), version=1)
    (actual,) = _numlite(model, [points, _matrix(2, 0, 1.5, 0, 3, -2)])
    p = points.reshape(-1, 3)
    expected = np.stack([2 * p[:, 0] + 4 * 1.5, 3 * p[:, 1] + 4 * -2, p[:, 2]], 1).reshape(points.shape)
    assert_close(actual, expected)


def _bilinear_reference(image, m, out_hw, align_centers):
    """transform_tensor_bilinear.cc's loop, in float64."""
    _, h, w, c = image.shape
    m = m.reshape(4, 4).astype(np.float64)
    tx0, ty0 = m[0, 3], m[1, 3]
    if align_centers:
        tx0 += (m[0, 0] + m[0, 1] - 1) / 2
        ty0 += (m[1, 0] + m[1, 1] - 1) / 2
    out = np.zeros((1, *out_hw, c))

    def pixel(y, x):
        return image[0, y, x] if 0 <= y < h and 0 <= x < w else np.zeros(c)

    for oy, ox in np.ndindex(*out_hw):
        sx = m[0, 0] * ox + m[0, 1] * oy + tx0
        sy = m[1, 0] * ox + m[1, 1] * oy + ty0
        if not (0 <= sx <= w - 1 and 0 <= sy <= h - 1):
            continue
        x0, y0 = math.floor(sx), math.floor(sy)
        fx, fy = sx - x0, sy - y0
        top = (1 - fx) * pixel(y0, x0) + fx * pixel(y0, x0 + 1)
        bottom = (1 - fx) * pixel(y0 + 1, x0) + fx * pixel(y0 + 1, x0 + 1)
        out[0, oy, ox] = fy * bottom + (1 - fy) * top
    return out.astype(np.float32)


def _bilinear(image_shape, out_hw, version=2, options=None, name="TransformTensorBilinear") -> bytes:
    if options is None:
        options = _flex(output_height=out_hw[0], output_width=out_hw[1])
    return _model([(name, ["x", "m"], ["y"], options)], {"x": image_shape, "m": (1, 4, 4), "y": (1, *out_hw, image_shape[3])},
                  inputs=["x", "m"], outputs=["y"], version=version)


def test_transform_tensor_bilinear_invariants():
    image = _floats((1, 6, 7, 3), 3)
    model = _bilinear(image.shape, (6, 7))
    identity = np.eye(4, dtype=np.float32).reshape(1, 4, 4)
    (same,) = _numlite(model, [image, identity])
    np.testing.assert_array_equal(same, image)  # the center alignment adds 0 for a unit scale
    # An integer shift samples integer points: the pixels, and zeros past the edge.
    (shifted,) = _numlite(model, [image, _matrix(1, 0, 2, 0, 1, -1)])
    expected = np.zeros_like(image)
    expected[0, 1:, :5] = image[0, :5, 2:]
    np.testing.assert_array_equal(shifted, expected)


@pytest.mark.parametrize("version, name", [(2, "TransformTensorBilinear"), (1, "TransformTensor")])
def test_transform_tensor_bilinear_against_the_formula(version, name):
    image = _floats((1, 9, 8, 2), 4)
    angle = 0.3
    m = _matrix(1.6 * math.cos(angle), -1.6 * math.sin(angle), 3.2, 1.6 * math.sin(angle), 1.6 * math.cos(angle), 0.9)
    options = _flex(output_height=6, output_width=5) if version == 2 else _flex(mode="bilinear", output_size=[6, 5])
    model = _bilinear(image.shape, (6, 5), version, options, name)
    (actual,) = _numlite(model, [image, m])
    assert_close(actual, _bilinear_reference(image, m, (6, 5), align_centers=version == 2))
    assert (actual == 0).any() and (actual != 0).any()  # the crop reaches past the image


def _reference_l2tm_v2(points, subset, left, right, target, out_w, out_h, scale_x, scale_y):
    """landmarks_to_transform_matrix.cc version 2, step by step."""
    lx, ly = points[left, :2]
    rx, ry = points[right, :2]
    r = target - math.atan2(ry - ly, rx - lx)
    chosen = points[subset, :2].astype(np.float64)
    rot = np.array([[math.cos(r), -math.sin(r)], [math.sin(r), math.cos(r)]])
    turned = chosen @ rot.T
    low, high = turned.min(0), turned.max(0)
    cx, cy = rot.T @ ((low + high) / 2)  # rotation by -r
    width, height = high - low
    sx, sy = scale_x * width / out_w, scale_y * height / out_h
    c, s = math.cos(-r), math.sin(-r)
    # shift(c) . rot(-r) . scale . shift(-out/2), multiplied out
    a = np.array([[c * sx, -s * sy], [s * sx, c * sy]])
    t = np.array([cx, cy]) - a @ np.array([out_w / 2, out_h / 2])
    m = np.eye(4)
    m[:2, :2], m[:2, 3] = a, t
    return m.reshape(1, 4, 4)


def _l2tm(points_shape, options, version=2) -> bytes:
    return _model([("Landmarks2TransformMatrix", ["p"], ["m"], options)], {"p": points_shape, "m": (1, 4, 4)},
                  inputs=["p"], outputs=["m"], version=version)


L2TM = dict(subset_idxs=[0, 1, 2, 3, 4], left_rotation_idx=0, right_rotation_idx=1, target_rotation_radians=0.0,
            output_height=16, output_width=20, scale_x=1.5, scale_y=1.25)


def test_landmarks_to_transform_matrix_v2_against_the_formula():
    points = _floats((1, 6, 3), 5, 0, 100)
    model = _l2tm(points.shape, _flex(**L2TM))
    (actual,) = _numlite(model, [points])
    expected = _reference_l2tm_v2(points[0], [0, 1, 2, 3, 4, 4], 0, 1, 0.0, 20, 16, 1.5, 1.25)
    assert_close(actual, expected.astype(np.float32), rtol=1e-5, atol=1e-4)  # float32 of values ~100


def test_landmarks_to_transform_matrix_v2_known_box_and_rotation():
    """An upright 40x20 box centered at (50, 30) maps the 20x16 crop onto itself; the same box
    turned by 30 degrees gives the rotation back. TransformLandmarks then takes the crop's
    corners to the box's."""
    corners = np.array([[30, 20], [70, 20], [70, 40], [30, 40]], np.float64)
    opts = dict(L2TM, subset_idxs=[0, 1, 2, 3], scale_x=1.0, scale_y=1.0)
    for angle in (0.0, math.radians(30)):
        rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        box = (corners - (50, 30)) @ rot.T + (50, 30)
        points = np.concatenate([box, np.zeros((4, 1))], 1).astype(np.float32)[None]
        (m,) = _numlite(_l2tm(points.shape, _flex(**opts)), [points])
        expected = np.eye(4)
        expected[:2, :2] = rot @ np.diag([40 / 20, 20 / 16])
        expected[:2, 3] = (50, 30) - expected[:2, :2] @ (10, 8)
        assert_close(m[0], expected.astype(np.float32), atol=1e-4)
        crop = np.array([[[0, 0, 0], [20, 0, 0], [20, 16, 0], [0, 16, 0]]], np.float32)
        (mapped,) = _numlite(_transform_landmarks(crop.shape), [crop, m])
        assert_close(mapped[0, :, :2], box.astype(np.float32), atol=1e-4)


def test_landmarks_to_transform_matrix_v1_against_the_formula():
    points = _floats((1, 1, 1, 15), 6, 0, 1)
    opts = dict(input_hw=[64, 48], output_hw=[32, 24], dimensions=3, landmarks_range=1, bbox_size_multiplier=1.5,
                left_rotation_idx=0, right_rotation_idx=2, subset=[0, 1, 2, 3, 4])
    (actual,) = _numlite(_l2tm(points.shape, _flex(**opts), version=1), [points])
    p = points.reshape(-1, 3).astype(np.float64)
    alpha = -math.atan((p[2, 1] - p[0, 1]) / (p[2, 0] - p[0, 0]))
    ca, sa = math.cos(alpha), math.sin(alpha)
    turned = [(x * ca - y * sa, x * sa + y * ca) for x, y in p[[0, 1, 2, 3, 4, 4], :2]]
    low, high = np.min(turned, 0), np.max(turned, 0)
    size = (high - low) * 1.5
    mx, my = (high + low) / 2
    rmx, rmy = mx * ca + my * sa, -mx * sa + my * ca  # rotated by -alpha
    rotation = np.array([[ca, sa, rmx * 2 - 1], [-sa, ca, rmy * 2 - 1], [0, 0, 1]])
    scale = np.diag([size[0], size[1], 1])
    to_relative = np.array([[2 / 23, 0, -1], [0, 2 / 31, -1], [0, 0, 1]])
    to_absolute = np.array([[47 / 2, 0, 47 / 2], [0, 63 / 2, 63 / 2], [0, 0, 1]])
    itm = to_absolute @ rotation @ scale @ to_relative
    expected = np.array([[itm[0, 0], itm[0, 1], 0, itm[0, 2]], [itm[1, 0], itm[1, 1], 0, itm[1, 2]],
                         [itm[2, 0], itm[2, 1], itm[2, 2], 0], [0, 0, 0, 1]], np.float32)
    assert_close(actual[0], expected, atol=1e-4)


# -- bad options and shapes -------------------------------------------------------------------------


def _prepare_error(model: bytes, match: str) -> None:
    with pytest.raises(numlite.PrepareError, match=match) as info:
        numlite.Interpreter(model_content=model).allocate_tensors()
    assert "subgraph 0, node 0" in str(info.value)


@pytest.mark.parametrize("options, match", [
    (b"\x01\x00\x00\x00", "hold 4 bytes.*TfLiteTransposeConvParams.*need 12"),
    (None, "hold 0 bytes"),
    (struct.pack("<3i", 0, 2, 2), "padding is 0"),
    (struct.pack("<3i", 1, 0, 2), "strides .* must be positive"),
])
def test_bad_transpose_conv_options(options, match):
    w, b = np.zeros((2, 3, 3, 2), np.float32), np.zeros(2, np.float32)
    model = _model([("Convolution2DTransposeBias", ["x", "w", "b"], ["y"], options)],
                   {"x": (1, 3, 3, 2), "w": w.shape, "b": b.shape, "y": (1, 6, 6, 2)}, {"w": w, "b": b}, ["x"], ["y"])
    _prepare_error(model, match)


def test_bad_transpose_conv_shapes():
    w, b = np.zeros((2, 3, 3, 4), np.float32), np.zeros(3, np.float32)
    model = _model([("Convolution2DTransposeBias", ["x", "w", "b"], ["y"], _tconv_params(SAME, (2, 2)))],
                   {"x": (1, 3, 3, 2), "w": w.shape, "b": b.shape, "y": (1, 6, 6, 2)}, {"w": w, "b": b}, ["x"], ["y"])
    _prepare_error(model, "do not take the input's 2 channels")


@pytest.mark.parametrize("options, match", [
    (b"\x02\x00", "hold 2 bytes.*TfLitePoolParams"),
    (_pool_params(SAME, (2, 2), (0, 2)), "must be positive"),
    (_pool_params(7, (2, 2), (2, 2)), "padding is 7"),
    (_pool_params(SAME, (2, 2), (2, 2), activation=9), "activation is 9"),
])
def test_bad_pool_options(options, match):
    model = _model([("MaxPoolingWithArgmax2D", ["x"], ["v", "i"], options)], {"x": (1, 4, 4, 1), "v": (1, 2, 2, 1), "i": (1, 2, 2, 1)},
                   inputs=["x"], outputs=["v", "i"])
    _prepare_error(model, match)


def test_pool_needs_rank_4():
    model = _model([("MaxPoolingWithArgmax2D", ["x"], ["v", "i"], _pool_params(SAME, (2, 2), (2, 2)))],
                   {"x": (4, 4, 1), "v": (2, 2, 1), "i": (2, 2, 1)}, inputs=["x"], outputs=["v", "i"])
    _prepare_error(model, "must have rank 4")


@pytest.mark.parametrize("bad", [np.float32(4.1), np.float32(-1.0), np.float32(np.nan), np.uint32(7).view(np.float32)])
def test_unpool_index_outside_the_window_is_an_invoke_error(bad):
    opts = _pool_params(SAME, (2, 2), (2, 2))
    model = _model([("MaxUnpooling2D", ["v", "i"], ["y"], opts)], {"v": (1, 2, 2, 1), "i": (1, 2, 2, 1), "y": (1, 4, 4, 1)},
                   inputs=["v", "i"], outputs=["y"])
    indices = np.full((1, 2, 2, 1), 0.1, np.float32)
    indices[0, 1, 0, 0] = bad
    with pytest.raises(numlite.InvokeError, match=r"node 0 \(MaxUnpooling2D\).*argmax index .* at \(0, 1, 0, 0\)"):
        _numlite(model, [np.ones((1, 2, 2, 1), np.float32), indices])


@pytest.mark.parametrize("options, match", [
    (b"\x00\x01\x02", "custom_options .*not a (flexbuffer|map)"),
    (bytes(flexbuffers.Dumps([1, 2])), "not a map"),
    (_flex(**{k: v for k, v in L2TM.items() if k != "scale_x"}), "lack 'scale_x'"),
    (_flex(**dict(L2TM, subset_idxs=[0, 9])), r"must lie in \[0, 6\)"),
    (_flex(**dict(L2TM, output_width=0)), "must be positive"),
    (_flex(**dict(L2TM, left_rotation_idx="eye")), "must be a finite int"),
])
def test_bad_landmarks_to_transform_matrix_options(options, match):
    _prepare_error(_l2tm((1, 6, 3), options), match)


def test_landmark_ops_check_version_and_rank():
    _prepare_error(_l2tm((1, 1, 1, 18), _flex(**L2TM), version=2), "version 2 expects input 'p' of rank 3")
    _prepare_error(_transform_landmarks((1, 5, 3), version=3), "operator version 3 is not supported")
    _prepare_error(_transform_landmarks((1, 5, 4)), "2 or 3 dimensions")
    _prepare_error(_transform_landmarks((1, 2, 2, 6), _flex(dimensions=3, scale=0.0), version=1), "'scale' must be nonzero")
    _prepare_error(_bilinear((1, 4, 4, 2), (3, 3), options=_flex(output_height=5, output_width=3)), "differs from the declared")
    _prepare_error(_bilinear((1, 4, 4, 2), (3, 3), 1, _flex(mode="nearest"), "TransformTensor"), "only 'bilinear'")


# -- a user's kernel still wins --------------------------------------------------------------------------


def test_custom_ops_entry_overrides_the_built_in_kernel():
    model, out = _tconv_model((1, 3, 3, 2), (3, 3), 2, (2, 2), SAME, 0)
    calls = []

    def mine(x, weights, bias):
        calls.append(weights.shape)
        return np.full(out, 7, np.float32)

    (actual,) = _numlite(model, [_floats((1, 3, 3, 2), 1)], custom_ops={"Convolution2DTransposeBias": mine})
    assert calls == [(2, 3, 3, 2)]
    np.testing.assert_array_equal(actual, np.full(out, 7, np.float32))
