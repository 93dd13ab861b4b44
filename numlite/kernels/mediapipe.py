"""MediaPipe's custom operators, built in: models from MediaPipe run with no ``custom_ops=``.

Six ops (their CUSTOM codes), with the semantics of MediaPipe's reference kernels in
``mediapipe/util/tflite/operations/`` (github.com/google-ai-edge/mediapipe):

- ``Convolution2DTransposeBias``: a transposed convolution with a bias input.
- ``MaxPoolingWithArgmax2D``: max pooling that also outputs where each maximum was.
- ``MaxUnpooling2D``: the inverse scatter, putting each value back where the indices say.
- ``Landmarks2TransformMatrix``: a 4x4 crop transform from a face's landmarks.
- ``TransformTensorBilinear`` (and its version-1 name ``TransformTensor``): bilinear resampling
  of an image through such a matrix.
- ``TransformLandmarks``: landmarks mapped through such a matrix.

How their options arrive: the first three carry the raw bytes of a C struct in
``custom_options`` (``TfLiteTransposeConvParams``, ``TfLitePoolParams``: little-endian int32
fields), the last three a flexbuffer map. The landmark ops have two versions, chosen by the
operator code's version, as MediaPipe's resolver and LiteRT's GPU delegate choose them.

A ``custom_ops={name: ...}`` entry of the interpreter still replaces any of these kernels.

Where LiteRT differs: its default XNNPACK delegate claims the first three ops, and its argmax
indices are another encoding (window position ``x * filter_height + y``, column-major, stored as
the uint32 bit pattern in the float32 tensor) than MediaPipe's kernel (``y * filter_width + x +
0.1`` as a float value). numlite writes MediaPipe's encoding; its ``MaxUnpooling2D`` reads either
(see :func:`_window_positions`). See docs/mediapipe-ops.md.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Sequence

import numpy as np

from numlite.errors import InvalidInputError
from numlite.kernels.base import Kernel, Spec, TensorInfo, register, scratch
from numlite.kernels.flex_options import decode_flexbuffer

FLOAT = np.dtype(np.float32)
LOWEST = np.float32(np.finfo(np.float32).min)  # what MediaPipe's max starts from

SAME, VALID = 1, 2  # TfLitePadding (0 is kTfLitePaddingUnknown)
PADDINGS = {SAME: "SAME", VALID: "VALID"}

# TfLiteFusedActivation -> clamp range, as TFLite's CalculateActivationRange gives it: only the
# RELU family clamps; TANH (4), SIGN_BIT (5) and SIGMOID (6) leave the range open.
ACTIVATION_RANGES: dict[int, tuple[float, float] | None] = {
    0: None,
    1: (0.0, math.inf),
    2: (-1.0, 1.0),
    3: (0.0, 6.0),
    4: None,
    5: None,
    6: None,
}


# ----------------------------------------------------------------------------- shared helpers


def _cdiv(a: int, b: int) -> int:
    """C's integer division (truncates toward zero), as TFLite's padding helpers use it."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _compute_padding(stride: int, in_size: int, filter_size: int, out_size: int) -> int:
    """TFLite's ``ComputePadding`` with dilation 1: the leading padding, never negative."""
    return max(_cdiv((out_size - 1) * stride + filter_size - in_size, 2), 0)


def _struct_fields(kernel: Kernel, struct_name: str, names: Sequence[str]) -> dict[str, int]:
    """The leading int32 fields of a C struct stored raw in ``custom_options``: what MediaPipe's
    kernels read through ``custom_initial_data``. Trailing fields (a struct written by a newer
    TFLite) are ignored; fewer bytes than the fields read is an error naming them."""
    data = kernel.node.custom_options
    need = 4 * len(names)
    if data is None or len(data) < need:
        have = 0 if data is None else len(data)
        raise kernel.fail(
            f"custom_options hold {have} bytes; {kernel.node.op_name} reads a {struct_name} from them,"
            f" whose fields {', '.join(names)} need {need} bytes"
        )
    return dict(zip(names, struct.unpack_from(f"<{len(names)}i", bytes(data))))


def _flex_options(kernel: Kernel) -> dict[str, Any]:
    """``custom_options`` decoded as the flexbuffer map MediaPipe's converter writes, or an error
    naming what they are instead (unlike ``Kernel.custom_options``, which gives ``{}``)."""
    data = kernel.node.custom_options
    if not data:
        return {}
    decoded = decode_flexbuffer(kernel, data)
    if not isinstance(decoded, dict):
        raise kernel.fail(f"custom_options are a flexbuffer {type(decoded).__name__}, not a map")
    return decoded


def _number(kernel: Kernel, options: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    """Option ``key`` as an int or a float; missing (without a default) or another type is an
    error naming the key."""
    if key not in options:
        if default is None:
            raise kernel.fail(f"custom_options lack {key!r} (they have {sorted(options)})")
        return default
    value = options[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        ok = ok and float(value).is_integer()
    if not ok or not math.isfinite(float(value)):
        raise kernel.fail(f"custom option {key!r} must be a finite {kind.__name__}, got {value!r}")
    return kind(value)


def _int_list(kernel: Kernel, options: dict[str, Any], key: str, length: int | None = None) -> list[int]:
    """Option ``key`` as a list of ints (a flexbuffer typed vector)."""
    if key not in options:
        raise kernel.fail(f"custom_options lack {key!r} (they have {sorted(options)})")
    value = options[key]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise kernel.fail(f"custom option {key!r} must be a vector of integers, got {value!r}")
    if length is not None and len(value) != length:
        raise kernel.fail(f"custom option {key!r} must hold {length} integers, got {list(value)}")
    return [int(v) for v in value]


def _pairs(values: list[int]) -> list[tuple[int, int]]:
    """A flat subset list as index pairs; an odd last index pairs with itself (as MediaPipe's
    parser does)."""
    pairs = [(values[k], values[k + 1]) for k in range(0, len(values) - 1, 2)]
    if len(values) % 2:
        pairs.append((values[-1], values[-1]))
    return pairs


def _op_version(kernel: Kernel) -> int | None:
    """The version of the node's operator code (MediaPipe registers the landmark ops per
    version); None outside an interpreter."""
    runtime = kernel.node.runtime
    if runtime is None or kernel.node.index < 0:
        return None
    op = runtime.graph.operators[kernel.node.index]
    return int(runtime.model.operator_codes[op.opcode_index].version)


def _versioned(kernel: Kernel, x: TensorInfo, ranks: dict[int, int]) -> int:
    """The op's version (1 or 2), checked against the rank its landmark input must have
    (``ranks``: version -> rank); without a known version, the one the rank implies."""
    version = _op_version(kernel)
    if version is None:
        version = next((v for v, r in ranks.items() if r == x.ndim), min(ranks))
    if version not in ranks:
        raise kernel.fail(f"operator version {version} is not supported (MediaPipe defines versions {sorted(ranks)})")
    if x.ndim != ranks[version]:
        raise kernel.fail(f"version {version} expects input {x.name!r} of rank {ranks[version]}, got shape {x.shape}")
    return version


def _expect_float(kernel: Kernel, *tensors: TensorInfo) -> None:
    for t in tensors:
        if t.dtype != FLOAT:
            raise kernel.fail(f"input {t.name!r} has dtype {t.dtype.name}; MediaPipe's kernel takes float32 only")


def _expect_matrix(kernel: Kernel, m: TensorInfo) -> None:
    """A transform matrix input: 16 float32 values, the row-major 4x4 ``[1, 4, 4]`` that
    ``Landmarks2TransformMatrix`` outputs (the kernels read its first two rows)."""
    _expect_float(kernel, m)
    if m.size != 16:
        raise kernel.fail(f"matrix input {m.name!r} must hold a 4x4 matrix (16 values), got shape {m.shape}")


# ----------------------------------------------------------------------------- the pooling ops


class _PoolParams:
    """The TfLitePoolParams fields a MediaPipe pooling op reads, checked."""

    FIELDS = ("padding", "stride_width", "stride_height", "filter_width", "filter_height", "activation")

    def __init__(self, kernel: Kernel, check_padding: bool) -> None:
        p = _struct_fields(kernel, "TfLitePoolParams", self.FIELDS)
        self.padding, self.activation = p["padding"], p["activation"]
        self.strides = (p["stride_height"], p["stride_width"])
        self.filter = (p["filter_height"], p["filter_width"])
        if min(self.strides) <= 0 or min(self.filter) <= 0:
            raise kernel.fail(
                f"TfLitePoolParams strides (h, w) = {self.strides} and filter (h, w) = {self.filter} must be positive"
            )
        if check_padding and self.padding not in PADDINGS:
            raise kernel.fail(f"TfLitePoolParams padding is {self.padding}; expected 1 (SAME) or 2 (VALID)")
        if self.activation not in ACTIVATION_RANGES:
            raise kernel.fail(f"TfLitePoolParams activation is {self.activation}, not a TfLiteFusedActivation (0-6)")


def _rank4(kernel: Kernel, t: TensorInfo) -> None:
    if t.ndim != 4:
        raise kernel.fail(f"input {t.name!r} must have rank 4 (NHWC), got shape {t.shape}")


def _declared_float_outputs(kernel: Kernel) -> None:
    for k, out in enumerate(kernel.declared_outputs()):
        if out is not None and out.dtype != FLOAT:
            raise kernel.fail(f"output {k} ({out.name!r}) is declared {out.dtype.name}; MediaPipe's kernel writes float32")


@register("MaxPoolingWithArgmax2D")
class MaxPoolingWithArgmax2D(Kernel):
    """Max pooling of an NHWC float32 tensor with the position of each maximum.

    Follows mediapipe/util/tflite/operations/max_pool_argmax.cc. Options: a raw
    TfLitePoolParams (padding, strides, filter, fused activation). Output 0 is the pooled
    maximum (clamped by the activation), output 1 the index of the maximum inside its window,
    ``y * filter_width + x`` counted from the window's padded origin, written as the float
    ``index + 0.1``. Pixels outside the input never win; the first of equal maxima (row-major)
    wins; NaN never wins and a window with nothing above float32's lowest value gives that
    value and index 0, as the reference loop does.
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 1)
        (x,) = ins
        _expect_float(self, x)
        _rank4(self, x)
        p = self.params = _PoolParams(self, check_padding=True)
        n, h, w, c = x.shape
        outs = []
        for size, f, s in zip((h, w), p.filter, p.strides):
            out = (size + s - 1) // s if p.padding == SAME else _cdiv(size - f + s, s)
            if out <= 0:
                raise self.fail(f"a {f}-wide VALID window does not fit the input's size {size}")
            outs.append(out)
        self.out_hw = tuple(outs)
        self.pads = tuple(_compute_padding(s, size, f, o) for s, size, f, o in zip(p.strides, (h, w), p.filter, outs))
        _declared_float_outputs(self)
        # The padded copy the windows are cut from: rows from -pad to the last window's end.
        self.padded_hw = tuple((o - 1) * s + f for o, s, f in zip(outs, p.strides, p.filter))
        scratch((n, *self.padded_hw, c), FLOAT)  # refuses an absurd window before eval allocates it
        shape = (n, *outs, c)
        return [Spec(shape, FLOAT), Spec(shape, FLOAT)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        x = ins[0]
        p = self.params
        n, h, w, c = x.shape
        (ph, pw), (top, left), (fh, fw), (sh, sw) = self.padded_hw, self.pads, p.filter, p.strides
        padded = np.full((n, ph, pw, c), -np.inf, FLOAT)
        rows, cols = min(h, ph - top), min(w, pw - left)
        # NaN is never "greater than" the running maximum in the reference loop: it cannot win.
        padded[:, top : top + rows, left : left + cols] = np.where(np.isnan(x), -np.inf, x)[:, :rows, :cols]
        windows = np.lib.stride_tricks.sliding_window_view(padded, (fh, fw), axis=(1, 2))[:, ::sh, ::sw]
        oh, ow = self.out_hw
        flat = windows[:, :oh, :ow].reshape(n, oh, ow, c, fh * fw)  # row-major within the window
        best = flat.max(axis=-1)
        found = best > LOWEST  # the reference keeps index 0 and LOWEST when no pixel beats LOWEST
        index = np.where(found, np.argmax(flat == best[..., None], axis=-1), 0)
        value = np.where(found, best, LOWEST)
        bounds = ACTIVATION_RANGES[p.activation]
        if bounds is not None:
            value = np.clip(value, *bounds)
        np.copyto(outs[0], value)
        np.add(index.astype(FLOAT), np.float32(0.1), out=outs[1])


def _window_positions(indices: np.ndarray, filter_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``(y, x)`` inside the window for each argmax index, in either encoding a runtime writes:

    - MediaPipe's kernel: the float value ``y * filter_width + x + 0.1`` (truncated to an int);
    - LiteRT's XNNPACK delegate: the uint32 ``x * filter_height + y`` stored as the float32's
      bits (a denormal, or 0.0).

    The two cannot be confused: the bit patterns of the integers XNNPACK writes are denormal
    floats (below 2**23), which MediaPipe never writes (its values are at least 0.1), and 0.0
    means window position 0 in both. Any other value (negative, NaN, past the window) is an
    error naming it.
    """
    fh, fw = filter_hw
    size = fh * fw
    bits = np.ascontiguousarray(indices, FLOAT).view(np.uint32)
    packed = bits < (1 << 23)  # zero or denormal: XNNPACK's integer bits
    with np.errstate(invalid="ignore"):
        as_float = np.where(packed, 0, np.trunc(np.where(packed, 0, indices)))
    bad = np.where(packed, bits >= size, ~((as_float >= 0) & (as_float < size)))
    if bad.any():
        k = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidInputError(
            f"argmax index {float(indices[k])!r} at {k} is not a position in a {fh}x{fw} window"
            f" (0 to {size - 1}, as a float or as the uint32 bits LiteRT's XNNPACK writes)"
        )
    mp = as_float.astype(np.int64)
    packed_bits = bits.astype(np.int64)
    y = np.where(packed, packed_bits % fh, mp // fw)
    x = np.where(packed, packed_bits // fh, mp % fw)
    return y, x


@register("MaxUnpooling2D")
class MaxUnpooling2D(Kernel):
    """Scatters pooled values back to the positions their argmax indices name.

    Follows mediapipe/util/tflite/operations/max_unpooling.cc. Inputs: values and indices, both
    NHWC float32 of one shape; options: a raw TfLitePoolParams (strides and filter used). The
    output is ``filter`` times larger along height and width and zero where no value lands;
    value ``(y, x)`` goes to ``y * stride - pad + window_y`` (likewise along x), a later value
    overwriting an earlier one at the same place. Indices may be in MediaPipe's encoding or in
    the one LiteRT's XNNPACK delegate writes (:func:`_window_positions`); one that names a place
    outside the output is an error (the reference kernel would write out of bounds).
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 2)
        values, indices = ins
        _expect_float(self, values, indices)
        _rank4(self, values)
        _rank4(self, indices)
        if values.shape != indices.shape:
            raise self.fail(f"values {values.shape} and indices {indices.shape} must have one shape")
        p = self.params = _PoolParams(self, check_padding=False)  # MediaPipe's kernel never reads it
        n, h, w, c = values.shape
        out_hw = (h * p.filter[0], w * p.filter[1])
        self.pads = tuple(_compute_padding(s, o, f, i) for s, o, f, i in zip(p.strides, out_hw, p.filter, (h, w)))
        _declared_float_outputs(self)
        return [Spec((n, *out_hw, c), FLOAT)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        values, indices = ins
        out = outs[0]
        p = self.params
        n, h, w, c = values.shape
        wy, wx = _window_positions(indices, p.filter)
        oy = (np.arange(h) * p.strides[0] - self.pads[0])[None, :, None, None] + wy
        ox = (np.arange(w) * p.strides[1] - self.pads[1])[None, None, :, None] + wx
        oh, ow = out.shape[1:3]
        outside = (oy < 0) | (oy >= oh) | (ox < 0) | (ox >= ow)
        if outside.any():
            k = tuple(int(i) for i in np.argwhere(outside)[0])
            raise InvalidInputError(
                f"argmax index {float(indices[k])!r} at {k} puts its value at ({int(oy[k])}, {int(ox[k])}),"
                f" outside the {oh}x{ow} output"
            )
        b = np.arange(n)[:, None, None, None]
        ch = np.arange(c)[None, None, None, :]
        flat = ((b * oh + oy) * ow + ox) * c + ch
        target = out if out.flags.c_contiguous else np.empty(out.shape, FLOAT)
        target.fill(0)
        # One assignment in the input's C order: of two values landing on one place the later
        # stays, as in the reference loop.
        target.reshape(-1)[flat.reshape(-1)] = values.reshape(-1)
        if target is not out:
            np.copyto(out, target)


# ----------------------------------------------------------------------------- transposed convolution


@register("Convolution2DTransposeBias")
class Convolution2DTransposeBias(Kernel):
    """A transposed convolution plus a bias, NHWC float32.

    Follows mediapipe/util/tflite/operations/transpose_conv_bias.cc. Inputs: the data
    ``[N, H, W, I]``, weights ``[O, KH, KW, I]`` (OHWI) and bias ``[O]``; options: a raw
    TfLiteTransposeConvParams (padding, stride_width, stride_height; no activation is applied).
    The output size is ``stride * (in - 1) + kernel - pad`` per axis, where ``pad`` is 0 for
    VALID and ``max(0, kernel - (in - 1) % stride - 1)`` for SAME, its first half cut off the
    top/left of the full transposed convolution.
    """

    FIELDS = ("padding", "stride_width", "stride_height")

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 3)
        x, weights, bias = ins
        _expect_float(self, x, weights, bias)
        _rank4(self, x)
        if weights.ndim != 4 or bias.ndim != 1:
            raise self.fail(f"weights must be OHWI (rank 4) and bias rank 1, got {weights.shape} and {bias.shape}")
        if weights.shape[3] != x.shape[3]:
            raise self.fail(f"weights {weights.shape} (OHWI) do not take the input's {x.shape[3]} channels")
        if weights.shape[0] != bias.shape[0]:
            raise self.fail(f"bias {bias.shape} does not match the weights' {weights.shape[0]} output channels")
        p = _struct_fields(self, "TfLiteTransposeConvParams", self.FIELDS)
        if p["padding"] not in PADDINGS:
            raise self.fail(f"TfLiteTransposeConvParams padding is {p['padding']}; expected 1 (SAME) or 2 (VALID)")
        self.strides = (p["stride_height"], p["stride_width"])
        if min(self.strides) <= 0:
            raise self.fail(f"TfLiteTransposeConvParams strides (h, w) = {self.strides} must be positive")
        n, h, w, _ = x.shape
        o, kh, kw, _ = weights.shape
        if min(kh, kw) <= 0:
            raise self.fail(f"weights {weights.shape} have an empty kernel")
        self.full_hw = ((h - 1) * self.strides[0] + kh, (w - 1) * self.strides[1] + kw)
        pads = [0, 0]
        if p["padding"] == SAME:
            pads = [max(0, k - (size - 1) % s - 1) for k, size, s in zip((kh, kw), (h, w), self.strides)]
        self.out_hw = tuple(full - pad for full, pad in zip(self.full_hw, pads))
        self.offsets = tuple(pad // 2 for pad in pads)
        _declared_float_outputs(self)
        scratch((n, *self.full_hw, o), FLOAT)  # refuses absurd strides before eval allocates
        return [Spec((n, *self.out_hw, o), FLOAT)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        x, weights, bias = ins
        n, h, w, _ = x.shape
        o, kh, kw, _ = weights.shape
        sh, sw = self.strides
        full = np.zeros((n, *self.full_hw, o), FLOAT)
        # Each kernel tap adds the input times that tap's [I, O] matrix to a strided grid of
        # the full output: kh * kw matrix products instead of a loop over pixels.
        for ky in range(kh):
            for kx in range(kw):
                full[:, ky : ky + sh * (h - 1) + 1 : sh, kx : kx + sw * (w - 1) + 1 : sw] += x @ weights[:, ky, kx, :].T
        top, left = self.offsets
        oh, ow = self.out_hw
        np.add(full[:, top : top + oh, left : left + ow], bias, out=outs[0])


# ----------------------------------------------------------------------------- the landmark ops


def _rotation(r: float) -> np.ndarray:
    return np.array([[math.cos(r), -math.sin(r)], [math.sin(r), math.cos(r)]])


@register("Landmarks2TransformMatrix")
class Landmarks2TransformMatrix(Kernel):
    """The 4x4 matrix that maps a crop's pixel grid to where it lies in the source, from landmarks.

    Follows mediapipe/util/tflite/operations/landmarks_to_transform_matrix.cc (options parsed as
    LiteRT's GPU delegate does, tflite/delegates/gpu/common/mediapipe/landmarks_to_transform_matrix.cc).
    Output ``[1, 4, 4]`` float32, row-major.

    Version 2 (MediaPipe's CPU resolver): input ``[1, N, 3]`` landmarks (x, y, z). Options
    ``subset_idxs`` (index pairs, flattened), ``left_rotation_idx``, ``right_rotation_idx``,
    ``target_rotation_radians`` (default 0), ``output_height``, ``output_width``, ``scale_x``,
    ``scale_y``. The rotation is ``r = target - atan2(yr - yl, xr - xl)``; the subset's
    landmarks rotated by ``r`` give a box (center c rotated back, width, height); the matrix is
    ``T(c) R(-r) S(scale_x * width / output_width, scale_y * height / output_height)
    T(-output_width / 2, -output_height / 2)``.

    Version 1: input ``[1, 1, 1, 3N]``; options ``input_hw``, ``output_hw``, ``dimensions``
    (3), ``landmarks_range``, ``bbox_size_multiplier``, ``left_rotation_idx``,
    ``right_rotation_idx``, ``subset``; the matrix maps the output's [-1, 1] coordinates through
    the rotated, scaled box to the input's pixels (see the source).
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 1)
        (x,) = ins
        _expect_float(self, x)
        self.version = _versioned(self, x, {1: 4, 2: 3})
        opts = _flex_options(self)
        if self.version == 2:
            if x.shape[0] != 1 or x.shape[2] != 3:
                raise self.fail(f"version 2 expects landmarks [1, N, 3], got {x.shape}")
            count = x.shape[1]
            subset = _int_list(self, opts, "subset_idxs")
            self.target = _number(self, opts, "target_rotation_radians", float, 0.0)
            self.out_size = (_number(self, opts, "output_width", int), _number(self, opts, "output_height", int))
            self.scale = (_number(self, opts, "scale_x", float), _number(self, opts, "scale_y", float))
            if min(self.out_size) <= 0 or min(self.scale) <= 0:
                raise self.fail(
                    f"output_width/output_height {self.out_size} and scale_x/scale_y {self.scale} must be positive"
                )
        else:
            if x.shape[:3] != (1, 1, 1) or x.shape[3] % 3:
                raise self.fail(f"version 1 expects landmarks [1, 1, 1, 3N], got {x.shape}")
            count = x.shape[3] // 3
            subset = _int_list(self, opts, "subset")
            if _number(self, opts, "dimensions", int) != 3:
                raise self.fail(f"custom option 'dimensions' must be 3, got {opts['dimensions']!r}")
            self.input_hw = _int_list(self, opts, "input_hw", 2)
            self.output_hw = _int_list(self, opts, "output_hw", 2)
            self.range = _number(self, opts, "landmarks_range", int)
            self.multiplier = _number(self, opts, "bbox_size_multiplier", float)
            if min(self.input_hw + self.output_hw) <= 0 or self.range <= 0 or self.multiplier == 0:
                raise self.fail(
                    f"input_hw {self.input_hw}, output_hw {self.output_hw} and landmarks_range {self.range} must be"
                    f" positive, bbox_size_multiplier ({self.multiplier}) nonzero"
                )
        self.left = _number(self, opts, "left_rotation_idx", int)
        self.right = _number(self, opts, "right_rotation_idx", int)
        if not subset:
            raise self.fail("the subset of landmarks is empty")
        used = [self.left, self.right, *subset]
        if min(used) < 0 or max(used) >= count:
            raise self.fail(f"landmark indices {sorted(set(used))} must lie in [0, {count}) (the input has {count})")
        self.subset = np.array(_pairs(subset)).reshape(-1)
        return [Spec((1, 4, 4), FLOAT)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        points = ins[0].reshape(-1, 3).astype(np.float64)
        matrix = self._v2(points) if self.version == 2 else self._v1(points)
        np.copyto(outs[0], matrix.reshape(1, 4, 4), casting="unsafe")

    def _v2(self, points: np.ndarray) -> np.ndarray:
        (xl, yl), (xr, yr) = points[self.left, :2], points[self.right, :2]
        r = self.target - math.atan2(yr - yl, xr - xl)
        rotated = points[self.subset, :2] @ _rotation(r).T
        low, high = rotated.min(axis=0), rotated.max(axis=0)
        width, height = high - low
        center = _rotation(-r) @ ((low + high) / 2)
        out_w, out_h = self.out_size
        t = np.eye(4)
        t[:2, 3] = center
        rot = np.eye(4)
        rot[:2, :2] = _rotation(-r)
        scale = np.diag([self.scale[0] * width / out_w, self.scale[1] * height / out_h, 1.0, 1.0])
        shift = np.eye(4)
        shift[:2, 3] = (-out_w / 2, -out_h / 2)
        return t @ rot @ scale @ shift

    def _v1(self, points: np.ndarray) -> np.ndarray:
        (xl, yl), (xr, yr) = points[self.left, :2], points[self.right, :2]
        with np.errstate(divide="ignore", invalid="ignore"):  # a vertical eye line: atan(+-inf)
            alpha = -math.atan(np.float64(yr - yl) / np.float64(xr - xl))
        rotated = points[self.subset, :2] @ _rotation(alpha).T
        # The reference starts its box from +-100000, so farther landmarks are clipped to it.
        low = np.minimum(rotated.min(axis=0), 100000.0)
        high = np.maximum(rotated.max(axis=0), -100000.0)
        size = (high - low) * self.multiplier
        lr = float(self.range)
        middle = _rotation(-alpha) @ ((high + low) / 2)
        scale = np.diag([size[0] / lr, size[1] / lr, 1.0])
        rotation = np.eye(3)
        rotation[:2, :2] = _rotation(-alpha)
        rotation[:2, 2] = middle / lr * 2.0 - 1.0
        (ih, iw), (oh, ow) = self.input_hw, self.output_hw
        to_relative = np.array([[2.0 / (ow - 1.0), 0, -1.0], [0, 2.0 / (oh - 1.0), -1.0], [0, 0, 1.0]])
        to_absolute = np.array([[(iw - 1.0) / 2, 0, (iw - 1.0) / 2], [0, (ih - 1.0) / 2, (ih - 1.0) / 2], [0, 0, 1.0]])
        m = to_absolute @ rotation @ scale @ to_relative
        out = np.eye(4)  # the 3x3 result spread over a 4x4 with z left alone
        out[:2, :2], out[:2, 3] = m[:2, :2], m[:2, 2]
        out[2, :3] = m[2]
        return out


@register("TransformTensorBilinear", "TransformTensor")
class TransformTensorBilinear(Kernel):
    """Samples an image at the places a 4x4 matrix maps the output's pixels to, bilinearly.

    Follows mediapipe/util/tflite/operations/transform_tensor_bilinear.cc (options as LiteRT's GPU
    delegate parses them). Inputs: the image ``[1, H, W, C]`` float32 and the matrix (16
    float32, row-major). Output ``[1, OH, OW, C]``: the model's declared shape, as MediaPipe's
    kernel takes it; the options' ``output_height``/``output_width`` (version 2) or
    ``output_size`` (version 1, name ``TransformTensor``) when the declaration leaves it open,
    and an error when they disagree with it.

    Output pixel ``(x, y)`` reads the image at ``(m00 x + m01 y + m03, m10 x + m11 y + m13)``;
    version 2 first aligns pixel centers (``m03 += (m00 + m01 - 1) / 2``, likewise ``m13``).
    A place outside ``[0, W - 1] x [0, H - 1]`` (or not a number) gives 0; inside, the four
    neighbours are blended, a neighbour past the last row or column counting as 0.
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 2)
        image, matrix = ins
        _expect_float(self, image)
        _rank4(self, image)
        _expect_matrix(self, matrix)
        if image.shape[0] != 1:
            raise self.fail(f"the image must have batch 1 (MediaPipe's kernel reads one), got {image.shape}")
        version = _op_version(self) or 2
        if self.node.op_name == "TransformTensor":
            version = 1
        if version not in (1, 2):
            raise self.fail(f"operator version {version} is not supported (MediaPipe defines versions 1 and 2)")
        self.align_centers = version == 2
        opts = _flex_options(self)
        size: tuple[int, int] | None = None
        if version == 2 and ("output_height" in opts or "output_width" in opts):
            size = (_number(self, opts, "output_height", int), _number(self, opts, "output_width", int))
        elif version == 1:
            if "mode" in opts and opts["mode"] not in ("bilinear", b"bilinear"):
                raise self.fail(f"custom option 'mode' is {opts['mode']!r}; only 'bilinear' is defined")
            if "output_size" in opts:
                size = tuple(_int_list(self, opts, "output_size", 2))  # type: ignore[assignment]
        signature: tuple[int, ...] | None = None
        if self.node.runtime is not None and self.node.outputs[0] >= 0:
            t = self.node.runtime.graph.tensors[self.node.outputs[0]]
            signature = t.shape_signature if t.shape_signature is not None else t.shape
        if signature is not None and len(signature) == 4 and min(signature) > 0:
            shape = tuple(int(d) for d in signature)
            if size is not None and tuple(shape[1:3]) != size:
                raise self.fail(f"the options' output size {size} differs from the declared output shape {shape}")
            if shape[0] != 1 or shape[3] != image.shape[3]:
                raise self.fail(f"declared output shape {shape} must be [1, OH, OW, {image.shape[3]}]")
        elif size is not None:
            shape = (1, *size, image.shape[3])
        else:
            raise self.fail("neither the declared output shape nor the options give the output size")
        if min(shape) <= 0:
            raise self.fail(f"output size {shape[1:3]} must be positive")
        return [Spec(shape, FLOAT)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        image, matrix = ins
        _, h, w, c = image.shape
        _, oh, ow, _ = outs[0].shape
        m = matrix.reshape(-1)[:8].astype(FLOAT).reshape(2, 4)
        if self.align_centers:
            m[:, 3] += np.float32(0.5) * m[:, 0] + np.float32(0.5) * m[:, 1] - np.float32(0.5)
        ys, xs = np.meshgrid(np.arange(oh, dtype=FLOAT), np.arange(ow, dtype=FLOAT), indexing="ij")
        zero = np.float32(0)
        # The reference's float dot product with (x, y, 0, 1), term by term.
        with np.errstate(invalid="ignore", over="ignore"):
            tx = m[0, 0] * xs + m[0, 1] * ys + m[0, 2] * zero + m[0, 3]
            ty = m[1, 0] * xs + m[1, 1] * ys + m[1, 2] * zero + m[1, 3]
            inside = (tx >= 0) & (tx <= w - 1) & (ty >= 0) & (ty <= h - 1)  # NaN is outside
        tx, ty = np.where(inside, tx, 0), np.where(inside, ty, 0)
        fx, fy = np.floor(tx), np.floor(ty)
        x0, y0 = fx.astype(np.int64), fy.astype(np.int64)
        right, lower = (tx - fx).astype(np.float64)[..., None], (ty - fy).astype(np.float64)[..., None]
        pixels = image[0]

        def read(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
            ok = (yy < h) & (xx < w)
            return np.where(ok[..., None], pixels[np.minimum(yy, h - 1), np.minimum(xx, w - 1)], 0).astype(np.float64)

        upper = (1 - right) * read(y0, x0) + right * read(y0, x0 + 1)
        below = (1 - right) * read(y0 + 1, x0) + right * read(y0 + 1, x0 + 1)
        result = lower * below + (1 - lower) * upper
        np.copyto(outs[0][0], np.where(inside[..., None], result, 0), casting="unsafe")


@register("TransformLandmarks")
class TransformLandmarks(Kernel):
    """Landmarks mapped through a 4x4 matrix: ``x' = m00 x + m01 y + m03``, ``y' = m10 x + m11 y
    + m13``, z (when there is one) unchanged.

    Follows mediapipe/util/tflite/operations/transform_landmarks.cc (options as LiteRT's GPU
    delegate parses them). Inputs: landmarks and the matrix (16 float32); output: the
    landmarks' shape. Version 2 (MediaPipe's CPU resolver): landmarks ``[1, N, D]``, D = 2 or
    3, no options. Version 1: landmarks ``[1, H, W, C]`` holding C / ``dimensions`` landmarks per
    pixel; options ``dimensions`` (2 or 3) and ``scale`` (multiplies the translation).
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 2)
        points, matrix = ins
        _expect_float(self, points)
        _expect_matrix(self, matrix)
        version = _versioned(self, points, {1: 4, 2: 3})
        if points.shape[0] != 1:
            raise self.fail(f"landmarks must have batch 1 (MediaPipe's kernel reads one), got {points.shape}")
        if version == 2:
            self.dimensions, self.scale = points.shape[2], 1.0
        else:
            opts = _flex_options(self)
            self.dimensions = _number(self, opts, "dimensions", int)
            self.scale = _number(self, opts, "scale", float)
            if self.scale == 0:
                raise self.fail("custom option 'scale' must be nonzero")
        if self.dimensions not in (2, 3):
            raise self.fail(f"landmarks must have 2 or 3 dimensions, got {self.dimensions} (shape {points.shape})")
        if points.shape[-1] % self.dimensions:
            raise self.fail(f"the last axis of {points.shape} is not a whole number of {self.dimensions}-D landmarks")
        return [Spec(points.shape, FLOAT)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        points, matrix = ins
        m = matrix.reshape(-1)[:8].astype(FLOAT).reshape(2, 4).copy()
        m[:, 3] *= np.float32(self.scale)
        p = points.reshape(-1, self.dimensions)
        result = p.copy()  # z, when there is one, stays as it is
        zero = np.float32(0)
        with np.errstate(invalid="ignore", over="ignore"):
            for row in range(2):  # the reference's float dot product with (x, y, 0, 1)
                result[:, row] = m[row, 0] * p[:, 0] + m[row, 1] * p[:, 1] + m[row, 2] * zero + m[row, 3]
        np.copyto(outs[0], result.reshape(points.shape))
