"""Convolutions: CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV (float32, NHWC).

Layouts follow TFLite: CONV_2D filters are ``[out_c, kh, kw, in_c / groups]``, DEPTHWISE_CONV_2D
filters ``[1, kh, kw, in_c * depth_multiplier]`` and TRANSPOSE_CONV weights
``[out_c, kh, kw, in_c]``. Output sizes and SAME padding are computed as LiteRT's
``ComputePaddingHeightWidth`` does (the extra odd pixel of padding goes at the bottom/right).

How the work is laid out:
  * CONV_2D is one BLAS matmul. A 1x1, stride-1 convolution multiplies the input viewed as
    ``[N*H*W, C]`` directly; any other one first gathers an im2col matrix from a strided view
    of the (once-allocated, zero-bordered) padded input. The weight matrix is laid out once at
    prepare when the filter is constant, except for thin products of deep filters on several
    BLAS threads, which read the filter as stored (``STORED_MAX_ROWS``).
  * DEPTHWISE_CONV_2D sums its taps with one einsum over a strided view of the padded input
    (multiplier 1), else accumulates one shifted strided view of the input per filter tap,
    laid out by ``TapSource`` so that every output row is one long contiguous run (the
    quantized pools too).
  * TRANSPOSE_CONV is one matmul to per-tap contributions, scattered (col2im) with one strided
    add per tap.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from numlite.errors import PrepareError
from numlite.kernels import hybrid, parallel
from numlite.kernels.base import Kernel, Spec, TensorInfo, byte_runs, register, scratch
from numlite.kernels.clamp import clamp
from numlite.kernels.scratchpad import ScratchUser, border_views, check_size
from numlite.kernels.operands import input_weights_bias, transpose_conv_operands

SAME, VALID = 0, 1
FLOAT32 = np.dtype(np.float32)


# ----------------------------------------------------------------------------- geometry


def window_geometry(padding: int, size: int, filter_size: int, stride: int, dilation: int = 1) -> tuple[int, int, int]:
    """``(out_size, pad_before, pad_after)`` along one spatial axis, as LiteRT computes them.

    SAME gives ``ceil(size / stride)`` outputs, VALID ``(size + stride - effective) // stride``
    (never below zero: LiteRT leaves a failed size at 0). The total padding is
    ``max((out - 1) * stride + effective - size, 0)``, its floor half going before.
    """
    if padding not in (SAME, VALID):
        raise PrepareError(f"unknown padding {padding} (0 is SAME, 1 is VALID)")
    if stride <= 0 or dilation <= 0 or filter_size <= 0:
        raise PrepareError(f"stride ({stride}), dilation ({dilation}) and filter size ({filter_size}) must be positive")
    effective = (filter_size - 1) * dilation + 1
    if padding == SAME:
        out = (size + stride - 1) // stride
    else:
        out = max((size + stride - effective) // stride, 0)
    total = max((out - 1) * stride + effective - size, 0)
    return out, total // 2, total - total // 2


def output_window(
    padding: int,
    in_hw: tuple[int, int],
    filter_hw: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int] = (1, 1),
) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """``((oh, ow), (top, bottom, left, right))`` of a 2-D window sliding over ``in_hw``."""
    oh, top, bottom = window_geometry(padding, in_hw[0], filter_hw[0], strides[0], dilations[0])
    ow, left, right = window_geometry(padding, in_hw[1], filter_hw[1], strides[1], dilations[1])
    return (oh, ow), (top, bottom, left, right)


def filter_taps(kh: int, kw: int) -> list[tuple[int, int]]:
    """Every ``(ky, kx)`` of a ``kh x kw`` window, row by row."""
    return [(ky, kx) for ky in range(kh) for kx in range(kw)]


def grouped_im2col(src: np.ndarray, window: tuple[int, ...], steps: tuple[int, int, int, int], groups: int) -> np.ndarray:
    """A read-only strided view ``[g, n, oh, ow, kh, kw, c/g]`` of the padded input ``src``:
    the im2col rows of each group; ``window`` is ``(n, oh, ow, kh, kw, c)``, ``steps``
    ``(stride_h, stride_w, dilation_h, dilation_w)``."""
    n, oh, ow, kh, kw, c = window
    sh, sw, dh, dw = steps
    s0, s1, s2, s3 = src.strides
    view = as_strided(src, (n, oh, ow, kh, kw, c), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3), writeable=False)
    return view.reshape(n, oh, ow, kh, kw, groups, c // groups).transpose(5, 0, 1, 2, 3, 4, 6)


def grouped_weight_matrix(f: np.ndarray, groups: int, depth: int) -> np.ndarray:
    """CONV_2D filters ``[out_c, kh, kw, in_c/g]`` as ``[g, depth, out_c/g]`` matmul operands."""
    return np.ascontiguousarray(f.reshape(groups, f.shape[0] // groups, depth).transpose(0, 2, 1))


def transpose_conv_weight_matrix(wts: np.ndarray) -> np.ndarray:
    """TRANSPOSE_CONV weights ``[out_c, kh, kw, in_c]`` as ``[in_c, kh * kw * out_c]``."""
    return np.ascontiguousarray(wts.transpose(3, 1, 2, 0).reshape(wts.shape[3], -1))


# A shared padded buffer up to this many elements is filled whole before its interior is
# copied in: one call instead of one per border (each costs about half a microsecond; a small
# CNN's three 3x3 layers wrote twelve borders an invoke).
WHOLE_FILL_ELEMENTS = 1 << 14


class PaddedInput:
    """A buffer holding the input surrounded by a constant border.

    Owned (the default): allocated once, the border written at construction and never touched
    again; ``fill(x)`` only copies the interior. Shared (``shared=True``): the kernel gives it
    memory from the interpreter's scratchpad with :meth:`attach`, which other kernels also
    write, so ``fill`` writes the border again each time. With no padding the input itself is
    used and nothing is allocated.
    """

    def __init__(
        self, shape: tuple[int, ...], pads: tuple[int, int, int, int], dtype: np.dtype, value: float = 0.0, shared: bool = False
    ):
        top, bottom, left, right = pads
        self.needed = any(pads)
        self.value, self.shared = value, shared
        self.borders: list[np.ndarray] = []
        if self.needed:
            n, h, w, c = shape
            self.shape = (n, h + top + bottom, w + left + right, c)
            check_size(self.shape, dtype)
            self.box = ((0, top, left, 0), (n, top + h, left + w, c))
            if not shared:
                self.attach(scratch(self.shape, dtype, fill=value))

    def attach(self, buffer: np.ndarray) -> None:
        """Use ``buffer`` (of the padded shape) from now on."""
        (_, top, left, _), (_, bottom, right, _) = self.box
        self.buffer = buffer
        self.interior = buffer[:, top:bottom, left:right, :]
        self.borders = border_views(buffer, *self.box) if self.shared else []
        if len(self.borders) > 1 and buffer.size <= WHOLE_FILL_ELEMENTS:
            self.borders = [buffer]  # one fill of it all, the interior overwritten next

    def fill(self, x: np.ndarray) -> np.ndarray:
        if not self.needed:
            return x
        for border in self.borders:
            border.fill(self.value)
        np.copyto(self.interior, x)
        return self.buffer


def tap_view(src: np.ndarray, ky: int, kx: int, out_hw: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int]) -> np.ndarray:
    """The pixels of ``src`` that filter tap (ky, kx) meets for every output pixel: ``[N, OH, OW, C]``."""
    (oh, ow), (sh, sw), (dh, dw) = out_hw, strides, dilations
    y0, x0 = ky * dh, kx * dw
    return src[:, y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw, :]


class TapSource:
    """The input laid out so that each filter tap is a view ``[N, OH, OW * C]`` whose rows are
    contiguous, for kernels that loop over taps (depthwise convolution, pooling).

    NumPy is fast on long contiguous inner loops and slow on many short ones, so the point is
    to make every output row one run of ``OW * C`` values. Padding is a constant border.
    A horizontal stride ``s > 1`` would break rows into runs of
    ``C``; the padded columns are therefore dealt into ``s`` phase planes (plane ``p`` holds
    padded columns ``p, p + s, p + 2s, ...``) in which each tap's row is contiguous again.
    ``repeat > 1`` repeats every channel that many times (depthwise multipliers). When no
    padding, phase or repetition is needed the input itself is viewed and nothing is copied.
    Owned or shared memory as in :class:`PaddedInput` (``plane_shape`` is what to attach).
    """

    def __init__(
        self,
        in_shape: tuple[int, ...],
        pads: tuple[int, int, int, int],
        out_hw: tuple[int, int],
        strides: tuple[int, int],
        dilations: tuple[int, int],
        dtype: np.dtype,
        fill_value: float = 0.0,
        repeat: int = 1,
        shared: bool = False,
    ) -> None:
        n, h, w, c = in_shape
        top, bottom, left, right = pads
        self.out_hw, self.strides, self.dilations = out_hw, strides, dilations
        self.row_shape = (n, out_hw[0], out_hw[1] * c * repeat)
        sw = strides[1]
        self.direct = not any(pads) and sw == 1 and repeat == 1
        self.fill_value, self.shared = fill_value, shared
        self.fills: list = []
        self.borders: list[np.ndarray] = []
        if self.direct:
            return
        hp, wq = h + top + bottom, -(-(w + left + right) // sw)
        self.plane_shape = (sw, n, hp, wq, c, repeat)
        check_size(self.plane_shape, dtype)  # before anything loops over the planes
        # Per phase plane with input columns: (plane, first input column, count, first plane column).
        self.layout = []
        for p in range(sw):
            first = (p - left) % sw  # first input column whose padded column is in plane p
            if first < w:
                self.layout.append((p, first, len(range(first, w, sw)), (first + left) // sw))
        self.rows = (top, top + h)
        if not shared:
            self.attach(scratch(self.plane_shape, dtype, fill=fill_value))

    def attach(self, planes6: np.ndarray) -> None:
        """Use ``planes6`` (of ``plane_shape``) from now on."""
        sw, n, hp, wq, c, repeat = self.plane_shape
        self.planes = planes6.reshape(sw, n, hp, wq, c * repeat)
        top, bottom = self.rows
        # Where each phase of input columns goes: (destination view, input column slice).
        self.fills = [(planes6[p, :, top:bottom, j0 : j0 + count], slice(first, None, sw)) for p, first, count, j0 in self.layout]
        self.borders = []
        if self.shared:
            with_input = {p for p, *_ in self.layout}
            for p, first, count, j0 in self.layout:
                self.borders += border_views(planes6[p], (0, top, j0, 0, 0), (n, bottom, j0 + count, c, repeat))
            self.borders += [planes6[p] for p in range(sw) if p not in with_input]

    def _plane_view(self, ky: int, kx: int) -> np.ndarray:
        (oh, ow), (sh, sw), (dh, dw) = self.out_hw, self.strides, self.dilations
        y0, offset = ky * dh, kx * dw
        plane, j0 = offset % sw, offset // sw
        view = self.planes[plane, :, y0 : y0 + (oh - 1) * sh + 1 : sh, j0 : j0 + ow, :]
        return _merge_rows(view)

    def fill(self, x: np.ndarray) -> None:
        """Copy this invocation's input in (and, in shared memory, the border)."""
        self.source = x
        for border in self.borders:
            border.fill(self.fill_value)
        for dst, cols in self.fills:
            np.copyto(dst, x[:, :, cols, :, None])

    def tap(self, ky: int, kx: int) -> np.ndarray:
        """``[N, OH, OW * C]``: what tap (ky, kx) meets for every output pixel."""
        if self.direct:
            return _merge_rows(tap_view(self.source, ky, kx, self.out_hw, self.strides, self.dilations))
        return self._plane_view(ky, kx)


def tap_rectangles(
    in_hw: tuple[int, int],
    out_hw: tuple[int, int],
    pads: tuple[int, int, int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    taps: Sequence[tuple[int, int]],
) -> list[tuple[int, int, int, int, int, int]]:
    """For each tap, ``(y0, y1, x0, x1, iy, ix)``: the rectangle of output pixels whose window
    meets that tap inside the input (empty when ``y1 <= y0`` or ``x1 <= x0``) and the input pixel
    its first corner reads. Outside it the tap falls on padding, which adds nothing."""

    def valid(size: int, out: int, pad: int, offset: int, stride: int) -> tuple[int, int]:
        low = max(0, -(-(pad - offset) // stride))
        high = min(out, (size - 1 + pad - offset) // stride + 1)
        return low, max(low, high)

    (h, w), (oh, ow), (top, _, left, _) = in_hw, out_hw, pads
    rects = []
    for ky, kx in taps:
        y0, y1 = valid(h, oh, top, ky * dilations[0], strides[0])
        x0, x1 = valid(w, ow, left, kx * dilations[1], strides[1])
        rects.append((y0, y1, x0, x1, y0 * strides[0] + ky * dilations[0] - top, x0 * strides[1] + kx * dilations[1] - left))
    return rects


def _grid_view(views: list[list[np.ndarray]]) -> np.ndarray | None:
    """``views[i][j]``, all of one shape and strides, as one view ``[*shape, I, J]`` when their
    first elements lie on a grid of constant steps along i and j, else None."""
    base = views[0][0]

    def at(v: np.ndarray) -> int:
        return v.__array_interface__["data"][0]

    step_i = at(views[1][0]) - at(base) if len(views) > 1 else 0
    step_j = at(views[0][1]) - at(base) if len(views[0]) > 1 else 0
    for i, row in enumerate(views):
        for j, v in enumerate(row):
            if v.shape != base.shape or v.strides != base.strides or at(v) != at(base) + i * step_i + j * step_j:
                return None
    return as_strided(base, base.shape + (len(views), len(views[0])), base.strides + (step_i, step_j))


def plane_groups(
    views: list[np.ndarray],
    taps: list[tuple[int, int]],
    stride_w: int,
    dilation_w: int,
    tap_rows: list[np.ndarray],
    weights: dict[int, np.ndarray],
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Depthwise taps regrouped for one einsum per phase plane (one plane at horizontal stride
    1): ``(view [..., OW * C, KH, n], weights [KH, n, OW * C])``, the ``n`` taps of a plane
    being a grid of equally spaced rows and columns of it, or None if they are not. ``views``
    and ``tap_rows`` are per tap (``TapSource.tap`` views and each tap's weights along an
    output row); ``weights`` caches the stacked weights by plane."""
    kh = taps[-1][0] + 1
    index = {tap: k for k, tap in enumerate(taps)}
    groups = []
    for plane in range(stride_w):
        kxs = [kx for kx in range(taps[-1][1] + 1) if kx * dilation_w % stride_w == plane]
        if not kxs:
            continue
        view = _grid_view([[views[index[ky, kx]] for kx in kxs] for ky in range(kh)])
        if view is None:
            return None
        if plane not in weights:
            weights[plane] = np.stack([np.stack([tap_rows[index[ky, kx]] for kx in kxs]) for ky in range(kh)])
        groups.append((view, weights[plane]))
    return groups


def im2col_copies(cols: list[np.ndarray], window: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per thread slot (one im2col buffer each in ``cols``): ``(im2col rows, destination,
    source)``, the copy laying out a block's ``window`` view ``[rows, ow, ...]`` in the slot's
    rows by contiguous runs (``byte_runs``)."""
    rows = window.shape[0] * window.shape[1]
    return [(c[:rows], *byte_runs(c[:rows].reshape(window.shape), window)) for c in cols]


def _merge_rows(view: np.ndarray) -> np.ndarray:
    """``[N, OH, OW, C]`` -> ``[N, OH, OW * C]``, a view whenever each row is contiguous."""
    n, oh, ow, c = view.shape
    return view.reshape(n, oh, ow * c)


def tiled(values: np.ndarray, times: int) -> np.ndarray:
    """A per-channel vector repeated along a row of ``times`` pixels, so that it broadcasts
    against ``[..., OW * C]`` rows in one long inner loop rather than many short ones."""
    return np.tile(values.reshape(-1), times)


def _spatial_options(kernel: Kernel, dilated: bool = True) -> tuple[tuple[int, int], tuple[int, int]]:
    opts = kernel.options
    if opts is None:
        raise kernel.fail("missing options")
    strides = (int(opts.stride_h), int(opts.stride_w))
    dilations = (int(opts.dilation_h_factor), int(opts.dilation_w_factor)) if dilated else (1, 1)
    if min(strides) <= 0:
        raise kernel.fail(f"strides must be positive, got {strides}")
    if min(dilations) <= 0:
        raise kernel.fail(f"dilation factors must be positive, got {dilations}")
    return strides, dilations


def conv_window(
    kernel: Kernel, in_hw: tuple[int, int], filter_hw: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """``(strides, dilations, (oh, ow), (top, bottom, left, right))`` from a convolution's options."""
    strides, dilations = _spatial_options(kernel)
    out_hw, pads = output_window(kernel.options.padding, in_hw, filter_hw, strides, dilations)
    return strides, dilations, out_hw, pads


def conv_groups(kernel: Kernel, x: TensorInfo, f: TensorInfo, bias: TensorInfo | None) -> int:
    """Checks CONV_2D shapes (input and filter of rank 4, channels, bias); the number of groups."""
    _expect_rank(kernel, x, 4, "input")
    _expect_rank(kernel, f, 4, "filter")
    c = x.shape[3]
    out_c, group_c = f.shape[0], f.shape[3]
    if group_c <= 0 or c % group_c:
        raise kernel.fail(f"input channels {c} are not a multiple of the filter's {group_c}")
    groups = c // group_c
    if out_c % groups:
        raise kernel.fail(f"{out_c} output channels cannot be split into {groups} groups")
    if bias is not None and bias.size != out_c:
        raise kernel.fail(f"bias has {bias.size} elements, expected {out_c}")
    return groups


def depthwise_multiplier(kernel: Kernel, x: TensorInfo, f: TensorInfo, bias: TensorInfo | None) -> int:
    """Checks DEPTHWISE_CONV_2D shapes and the depth_multiplier option; the multiplier."""
    _expect_rank(kernel, x, 4, "input")
    _expect_rank(kernel, f, 4, "filter")
    c = x.shape[3]
    one, out_c = f.shape[0], f.shape[3]
    if one != 1:
        raise kernel.fail(f"filter must have shape [1, kh, kw, channels], got {f.shape}")
    if c == 0 or out_c % c:
        raise kernel.fail(f"filter channels {out_c} are not a multiple of input channels {c}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_c):
        raise kernel.fail(f"bias must have shape ({out_c},), got {bias.shape}")
    option = int(kernel.options.depth_multiplier) if kernel.options is not None else 0
    if option > 0 and option * c != out_c:
        raise kernel.fail(f"depth_multiplier option {option} disagrees with {c} input and {out_c} filter channels")
    return out_c // c


def expect_output_shape_vector(kernel: Kernel, shape_t: TensorInfo) -> None:
    """TRANSPOSE_CONV's first input: the output shape as int32 ``[4]``."""
    if shape_t.dtype != np.int32:
        raise kernel.fail(f"output shape must be int32, got {shape_t.dtype.name}")
    if shape_t.ndim != 1 or shape_t.size != 4:
        raise kernel.fail(f"output shape must be a 1-D tensor of 4 elements, got shape {shape_t.shape}")


def transpose_conv_shapes(
    kernel: Kernel, x: TensorInfo, wts: TensorInfo, bias: TensorInfo | None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Checks TRANSPOSE_CONV's input, weights and bias shapes; ``((h, w), (kh, kw))``."""
    _expect_rank(kernel, x, 4, "input")
    _expect_rank(kernel, wts, 4, "weights")
    _, h, w, c = x.shape
    out_c, kh, kw, in_c = wts.shape
    if in_c != c:
        raise kernel.fail(f"weights have {in_c} input channels, the input has {c}")
    if bias is not None and bias.size != out_c:
        raise kernel.fail(f"bias has {bias.size} elements, expected {out_c}")
    return (h, w), (kh, kw)


def transpose_conv_output_shape(kernel: Kernel, value: np.ndarray, x: TensorInfo, wts: TensorInfo) -> tuple[int, ...]:
    """The requested output shape, checked against the input's batch and the weights' channels."""
    out_shape = tuple(int(d) for d in value)
    if out_shape[0] != x.shape[0]:
        raise kernel.fail(f"output batch {out_shape[0]} differs from input batch {x.shape[0]}")
    if out_shape[3] != wts.shape[0]:
        raise kernel.fail(f"output shape has {out_shape[3]} channels, the weights {wts.shape[0]}")
    if min(out_shape) < 0:
        raise kernel.fail(f"negative output shape {out_shape}")
    return out_shape


def transpose_conv_canvas(
    padding: int, in_hw: tuple[int, int], filter_hw: tuple[int, int], strides: tuple[int, int], out_hw: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((canvas_h, canvas_w), (top, left))``: a scatter canvas large enough for every
    contribution and the cropped output, and where the output starts in it. The padding is
    LiteRT's: computed as if the *output* were the input of a forward convolution."""
    (h, w), (kh, kw), (oh, ow) = in_hw, filter_hw, out_hw
    _, top, _ = window_geometry(padding, oh, kh, strides[0])
    _, left, _ = window_geometry(padding, ow, kw, strides[1])
    canvas_h = max((h - 1) * strides[0] + kh, top + oh) if h else top + oh
    canvas_w = max((w - 1) * strides[1] + kw, left + ow) if w else left + ow
    return (canvas_h, canvas_w), (top, left)


def _expect_float(kernel: Kernel, *tensors: TensorInfo | None) -> None:
    for t in tensors:
        if t is not None and t.dtype != np.float32:
            raise kernel.fail(
                f"input {t.name!r} has dtype {t.dtype.name}; expected float32 (or integer activations"
                " with quantization parameters, or int8 weights with float32 activations)"
            )


def _expect_rank(kernel: Kernel, t: TensorInfo, rank: int, what: str) -> None:
    if t.ndim != rank:
        raise kernel.fail(f"{what} must have rank {rank}, got shape {t.shape}")


# ----------------------------------------------------------------------------- CONV_2D

# A product of at most this many output pixels against at least STORED_MIN_DEPTH weights per
# channel, with BLAS on more than one thread, reads the filter as stored, ``[out_c, depth]``,
# and writes its transpose (``filter @ lhs.T``, then one transposing add of the bias): OpenBLAS
# shares that orientation of a thin product better between its threads (ResNet50's 7x7 layers,
# 49 pixels, depth 1024-4608: 0.80-0.93 of the time at 2 threads; the model 1.5% faster), and
# the filter needs no transposed copy (ResNet50 at 2 threads allocates 54 MiB in all, not 100).
# At one thread the product is 0.98-1.11 of the time and the model 1-2% slower: it keeps the copy.
STORED_MAX_ROWS = 64
STORED_MIN_DEPTH = 1024
# When one thread computes a whole im2col convolution, its blocks are still cut so that the
# im2col scratch stays under about this many bytes (ResNet50's first layer would need 7 MiB).
COL_BLOCK_BYTES = 1 << 21
# Likewise for the padded, phase-split input rows a strided depthwise block lays out.
PLANE_BLOCK_BYTES = 1 << 18
# Depthwise convolutions of multiplier 1 sum their taps with one einsum (a multiply-add per tap
# and element, where the taps take a multiply and an add, two passes). At a horizontal stride
# of 1 its inner loop runs along whole output rows (OW * C values; EfficientNetB0's and
# MobileNetV2's layers: 1.5-2x faster than the taps). Strided layers of at least this many
# channels sum over a window view whose inner loop runs along the channels (1.2-1.7x faster
# from 144 channels on, no phase-split copy); narrower ones keep the taps (112x112x32: 3x).
SUMMED_MIN_CHANNELS_STRIDED = 128


def row_blocks(n: int, oh: int, parts: int) -> list[tuple[int, int, int]]:
    """``(batch, first_row, stop_row)`` blocks of output rows, about ``parts`` in all, none
    crossing from one batch element into the next (their strided views do not merge)."""
    per_batch = max(1, -(-parts // max(n, 1)))
    return [(b, y0, y1) for b in range(n) for y0, y1 in parallel.split(oh, per_batch)]


def block_parts(threads: int) -> int:
    """Blocks per op: one for a single thread, else a few per thread, so that a thread held up
    by another process leaves its share to the others (``parallel``)."""
    return 1 if threads <= 1 else 3 * threads


@register("CONV_2D")
class Conv2D(ScratchUser, Kernel):
    """2-D convolution, grouped when the input has a multiple of the filter's channels.

    An ungrouped convolution runs in blocks of output rows. Each block is one BLAS matmul (of
    the input's pixels directly for a 1x1 stride-1 convolution, else of an im2col block copied
    from a strided view of the zero-bordered input into per-thread scratch), then the bias and
    the clamp while the block is still in cache. BLAS threads each product (``num_threads``);
    with ``parallel.SPLIT_BLAS_KERNELS`` the blocks are shared among numlite's threads instead,
    OpenBLAS running each one on a single thread. A thin product of a deep filter on several
    BLAS threads (``stored``) is one block computed transposed, ``filter @ lhs.T``, against
    the filter as stored. A grouped convolution is one
    batched matmul over a group-major im2col matrix. The padded input and the im2col memory
    are working memory (``scratchpad``); a single block lays its padded input out in its own
    output, which the matmul overwrites only after the im2col copy.
    """

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any
    padded_in_output = False

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if (specs := hybrid.route(self, ins, hybrid.HybridConv2D)) is not None:  # int8 weights, float activations
            return specs
        self.expect_inputs(ins, 2, 3)
        x, f, bias = input_weights_bias(ins)
        if bias is None:  # LiteRT: "has_bias was not true"
            raise self.fail("CONV_2D needs a bias input (LiteRT rejects convolutions without one)")
        _expect_float(self, x, f, bias)
        groups = conv_groups(self, x, f, bias)
        n, h, w, c = x.shape
        out_c, kh, kw, group_c = f.shape
        strides, dilations, (oh, ow), (top, bottom, left, right) = conv_window(self, (h, w), (kh, kw))
        self.activation = clamp(self.options)

        self.groups = groups
        self.rows = n * oh * ow  # rows of the matmul: one per output pixel
        self.depth = kh * kw * group_c  # columns of the im2col matrix of one group
        self.pointwise = kh == kw == 1 and strides == (1, 1) and not any((top, bottom, left, right))
        if not self.pointwise:
            self.padded = PaddedInput(x.shape, (top, bottom, left, right), np.dtype(np.float32), shared=True)
            self.window = (n, oh, ow, kh, kw, c)
            self.window_steps = (strides[0], strides[1], dilations[0], dilations[1])
        self.bound: tuple | None = None  # the (input, output) arrays the blocks view
        self.cols: list[np.ndarray] = []  # im2col memory, carved from the scratchpad
        padded = not self.pointwise and self.padded.needed
        cols = self._plan_blocks(n, oh, ow, out_c) if groups == 1 else []
        self.stored = (
            groups == 1
            and f.value is not None
            and bias.value is not None
            and len(self.blocks) == 1
            and parallel.requested_threads(self.node) > 1
            and 0 < self.rows <= STORED_MAX_ROWS
            and self.depth >= STORED_MIN_DEPTH
        )
        self.weights = None  # [groups, depth, out_c / groups], when laid out at prepare
        if self.stored:  # the filter as stored; the product's transpose is working memory
            self.matrix = f.value.reshape(out_c, self.depth)
            self.bias_vector = bias.value
            cols.append(((out_c, self.rows), np.float32))
        elif f.value is not None:
            self.weights = self._weight_matrix(f.value)
            self.matrix = self.weights[0]
        self.bias = None if bias.value is None else tiled(bias.value, ow)
        self.bias_row = self.bias
        if groups != 1 and not self.pointwise:  # group-major im2col rows: each group's matrix contiguous for BLAS
            cols.append(((groups, self.rows, self.depth), np.float32))
        # One block reads the padded input only to lay out its im2col rows, before its matmul
        # writes the output: the padded input can be the output's own bytes until then (a
        # small CNN's 3x3 layer: its working memory 168 -> 147 KiB, the model's arena under LiteRT's).
        fits = padded and n * oh * ow * out_c >= math.prod(self.padded.shape)
        self.padded_in_output = fits and groups == 1 and len(self.blocks) == 1
        self.want_scratch(([(self.padded.shape, np.float32)] if padded and not self.padded_in_output else []) + cols)
        return [Spec((n, oh, ow, out_c), np.dtype(np.float32))]

    def _plan_blocks(self, n: int, oh: int, ow: int, out_c: int) -> list:
        """Plans the row blocks; the im2col scratch they need (one block per thread)."""
        work = self.rows * self.depth * out_c
        most_parts = max(1, self.rows // parallel.MIN_BLOCK_ROWS)
        self.threads = min(parallel.threads_for(self.node, work, blas=True), most_parts)
        self.run = parallel.runner(self.threads)
        parts = block_parts(self.threads)
        if not self.pointwise:
            parts = max(parts, -(-self.rows * self.depth * 4 // COL_BLOCK_BYTES))
        self.blocks = row_blocks(n, oh, min(parts, most_parts))
        if self.pointwise or not self.rows:
            return []
        most = max(y1 - y0 for _, y0, y1 in self.blocks) * ow
        return [((most, self.depth), np.float32)] * self.threads

    def _attach(self) -> None:
        """Carve the scratch: the padded input first (unless it goes in the output), then the
        im2col memory."""
        arrays = self.take_scratch()
        if not self.pointwise and self.padded.needed and not self.padded_in_output:
            self.padded.attach(arrays.pop(0))
        if self.stored:
            self.product_t = arrays.pop()
        self.cols = arrays

    def _weight_matrix(self, f: np.ndarray) -> np.ndarray:
        """``[out_c, kh, kw, in_c/g]`` as ``[g, depth, out_c/g]``."""
        return grouped_weight_matrix(f, self.groups, self.depth)

    def _bind(self, x: np.ndarray, out: np.ndarray) -> None:
        """Build the blocks' tasks over views of this input, output and scratch (again only
        when the runtime hands the node other arrays or the scratchpad moved)."""
        n, oh, ow, out_c = out.shape
        pixels = out.reshape(-1, out_c)
        out_rows = out.reshape(n * oh, ow * out_c)
        if self.padded_in_output:
            self.padded.attach(pixels.reshape(-1)[: math.prod(self.padded.shape)].reshape(self.padded.shape))
        if self.pointwise:
            source = x.reshape(-1, x.shape[3])
        else:
            src = self.padded.buffer if self.padded.needed else x
            source = grouped_im2col(src, self.window, self.window_steps, 1)[0]
        self.tasks = []
        for b, y0, y1 in self.blocks:
            r0, r1 = b * oh + y0, b * oh + y1
            dst, rows = pixels[r0 * ow : r1 * ow], out_rows[r0:r1]
            if self.stored:
                lhs = source if self.pointwise else im2col_copies(self.cols, source[b, y0:y1])
                self.tasks.append(partial(self._stored_block, lhs, dst))
            elif self.pointwise:
                self.tasks.append(partial(self._pointwise_block, source[r0 * ow : r1 * ow], dst, rows))
            else:
                self.tasks.append(partial(self._im2col_block, im2col_copies(self.cols, source[b, y0:y1]), dst, rows))
        self.bound = (x, out)

    def _pointwise_block(self, lhs: np.ndarray, dst: np.ndarray, rows: np.ndarray, slot: int) -> None:
        np.matmul(lhs, self.matrix, out=dst)
        self._finish(rows)

    def _im2col_block(self, copies: list, dst: np.ndarray, rows: np.ndarray, slot: int) -> None:
        col, runs_dst, runs_src = copies[slot]
        np.copyto(runs_dst, runs_src)
        np.matmul(col, self.matrix, out=dst)
        self._finish(rows)

    def _stored_block(self, lhs: np.ndarray | list, dst: np.ndarray, slot: int) -> None:
        """The whole (thin) product as ``filter @ lhs.T``, transposed back by the bias's add."""
        if not self.pointwise:  # lhs: the im2col copies (im2col_copies)
            col, runs_dst, runs_src = lhs[slot]
            np.copyto(runs_dst, runs_src)
            lhs = col
        np.matmul(self.matrix, lhs.T, out=self.product_t)
        np.add(self.product_t.T, self.bias_vector, out=dst)
        if self.activation is not None:
            self.activation(dst)

    def _finish(self, rows: np.ndarray) -> None:
        np.add(rows, self.bias_row, out=rows)
        if self.activation is not None:
            self.activation(rows)

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, f, bias = ins[0], ins[1], ins[2]
        out = outs[0]
        if out.size == 0:
            return
        stale = self.scratch_stale()
        if stale:
            self._attach()
        if self.groups != 1:
            return self._eval_grouped(x, f, bias, out)
        if self.weights is None and not self.stored:  # a filter computed at run time
            self.matrix = self._weight_matrix(f)[0]
        if self.bias is None:
            self.bias_row = tiled(bias, out.shape[2])
        if stale or self.bound is None or self.bound[0] is not x or self.bound[1] is not out:
            self._bind(x, out)
        if not self.pointwise:
            self.padded.fill(x)
        self.run(self.tasks)

    def _eval_grouped(self, x: np.ndarray, f: np.ndarray, bias: np.ndarray, out: np.ndarray) -> None:
        weights = self.weights if self.weights is not None else self._weight_matrix(f)
        g = self.groups
        n, oh, ow, out_c = out.shape
        if self.pointwise:
            lhs = x.reshape(self.rows, g, -1).transpose(1, 0, 2)
        else:
            src = self.padded.fill(x)
            lhs = self.cols[0]
            np.copyto(lhs.reshape((g,) + self.window[:5] + (-1,)), grouped_im2col(src, self.window, self.window_steps, g))
        np.matmul(lhs, weights, out=out.reshape(self.rows, g, out_c // g).transpose(1, 0, 2))
        rows = out.reshape(n * oh, ow * out_c)
        np.add(rows, self.bias if self.bias is not None else tiled(bias, ow), out=rows)
        if self.activation is not None:
            self.activation(out)


# ----------------------------------------------------------------------------- DEPTHWISE_CONV_2D


@register("DEPTHWISE_CONV_2D")
class DepthwiseConv2D(ScratchUser, Kernel):
    """Per-channel convolution; output channel ``i * m + j`` filters input channel ``i``.

    The depth multiplier ``m`` is the ratio of filter to input channels, as LiteRT's builtin
    kernel derives it. A positive ``depth_multiplier`` option that disagrees is an error, as
    LiteRT's default (XNNPACK) delegate fails on it; zero or negative is ignored (the delegate
    then leaves the node to the builtin kernel). The input's channels are
    repeated ``m`` times, which turns the op into a multiplier-1 depthwise convolution over
    the output channels: one multiply-add of a shifted input view per filter tap, over blocks
    of output rows shared among threads (``parallel``), each thread with its own product
    scratch (from the interpreter's scratchpad).

    Layers of multiplier 1 and more than one tap sum all taps of a block of output rows with
    one einsum (a multiply-add per tap: one pass, not two) over a strided view of the padded
    input (copied once per eval into the scratchpad): at a horizontal stride of 1 the view
    ``[rows, OW * C, KH, KW]`` of rows of pixels against each tap's weights along a row (the
    einsum's inner loop is a whole output row); strided layers of enough channels
    (``SUMMED_MIN_CHANNELS_STRIDED``) the windows ``[rows, OW, KH, KW, C]`` against the
    filter (inner loop along the channels).

    The other layers loop over the taps. A 1x1 filter of horizontal stride 1 and multiplier 1
    reads the input itself, over the rectangle of outputs where it falls inside the image
    (``tap_rectangles``). Otherwise the taps read a padded, phase-split copy (``TapSource``),
    whose rows stay contiguous where a strided view's would not; each block lays out only the
    input rows its windows cover, into its thread's scratch, so that the copy stays small and
    in cache. The taps that fall in one phase plane form a grid of its rows and columns, so
    they too are summed by one einsum per plane (``_tap_groups``; two at stride 2).
    """

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if (specs := hybrid.route(self, ins, hybrid.HybridDepthwiseConv2D)) is not None:  # int8 weights, float activations
            return specs
        self.expect_inputs(ins, 2, 3)
        x, f, bias = input_weights_bias(ins)
        _expect_float(self, x, f, bias)
        multiplier = depthwise_multiplier(self, x, f, bias)
        n, h, w, c = x.shape
        _, kh, kw, out_c = f.shape
        strides, dilations, (oh, ow), pads = conv_window(self, (h, w), (kh, kw))
        self.activation = clamp(self.options)
        self.taps = filter_taps(kh, kw)
        self.summed: str | None = None  # "rows" or "windows": which einsum sums the taps
        if multiplier == 1 and len(self.taps) > 1:
            if strides[1] == 1:
                self.summed = "rows"
            elif out_c >= SUMMED_MIN_CHANNELS_STRIDED:
                self.summed = "windows"
        self.clipped = strides[1] == 1 and multiplier == 1 and not self.summed
        if self.summed:
            self.source = None
            self.padded = PaddedInput(x.shape, pads, FLOAT32, shared=True)
            self.window = (pads, strides, dilations, multiplier)
        elif self.clipped:
            self.source = None
            self.rects = tap_rectangles((h, w), (oh, ow), pads, strides, dilations, self.taps)
            self.row_step = strides[0]
        else:
            self.source = None
            self.window = (pads, strides, dilations, multiplier)
        if self.summed:  # the einsum's filter operand (None: read at each eval)
            self.weights, self.tap_rows = (None if f.value is None else self._summed_filter(f.value, ow)), None
            self.filter = self.weights
        else:
            self.weights = None if f.value is None else self._tap_weights(f.value, ow)
            self.tap_rows = None if self.weights is None else [self.weights[ky, kx] for ky, kx in self.taps]
        self.bias = None if bias is None or bias.value is None else tiled(bias.value, ow)
        self.bias_row = self.bias
        work = n * oh * ow * out_c * len(self.taps)
        self.threads = parallel.threads_for(self.node, work)
        self.run = parallel.runner(self.threads)
        parts = block_parts(self.threads)
        if not self.clipped and not self.summed:  # padded input rows of ~PLANE_BLOCK_BYTES per block at most
            parts = max(parts, -(-n * (h + pads[0] + pads[1]) * (w + pads[2] + pads[3]) * out_c * 4 // PLANE_BLOCK_BYTES))
        self.blocks = row_blocks(n, oh, min(parts, max(n * oh, 1)))
        most = max((y1 - y0 for _, y0, y1 in self.blocks), default=0)
        products = [((most, ow * out_c), np.float32)] * (self.threads if len(self.taps) > 1 or self.clipped else 0)
        self.products: list[np.ndarray] = []
        planes = []
        if self.summed:
            self.want_scratch([(self.padded.shape, FLOAT32)] if self.padded.needed else [])
            self.bound = None
            return [Spec((n, oh, ow, out_c), np.dtype(np.float32))]
        if not self.clipped:
            self.block_sources = [self._block_sources(x.shape, (kh, kw), block, ow) for block in self.blocks]
            largest = max((int(np.prod(s[0][2].plane_shape)) for s in self.block_sources), default=0)
            planes = [((largest,), np.float32)] * self.threads
        self.want_scratch(planes + products)
        self.bound: tuple | None = None
        return [Spec((n, oh, ow, out_c), np.dtype(np.float32))]

    def _block_sources(self, in_shape: tuple[int, ...], filter_hw: tuple[int, int], block: tuple[int, int, int], ow: int) -> list:
        """One ``(first input row, stop row, TapSource)`` per thread for a block of output rows:
        the input rows its windows meet, padded as the whole input is at the edges."""
        _, h, w, c = in_shape
        (top, _, left, right), strides, dilations, multiplier = self.window
        _, y0, y1 = block
        first = y0 * strides[0] - top  # padded-input row of the block's first window
        stop = (y1 - 1) * strides[0] + (filter_hw[0] - 1) * dilations[0] - top + 1
        r0, r1 = min(max(first, 0), h), max(min(stop, h), 0)
        r1 = max(r0, r1)
        pads = (r0 - first, stop - r0 - (r1 - r0), left, right)
        return [
            (r0, r1, TapSource((1, r1 - r0, w, c), pads, (y1 - y0, ow), strides, dilations, FLOAT32, repeat=multiplier, shared=True))
            for _ in range(self.threads)
        ]

    def _attach(self) -> None:
        arrays = self.take_scratch()
        if self.summed:
            if arrays:
                self.padded.attach(arrays[0].reshape(self.padded.shape))
            return
        if not self.clipped:
            planes, arrays = arrays[: self.threads], arrays[self.threads :]
            for sources in self.block_sources:
                for plane, (_, _, source) in zip(planes, sources):
                    source.attach(plane[: int(np.prod(source.plane_shape))].reshape(source.plane_shape))
        self.products = arrays

    @staticmethod
    def _tap_weights(f: np.ndarray, ow: int) -> np.ndarray:
        """``[1, kh, kw, C]`` as ``[kh, kw, OW * C]``: each tap's weights along an output row."""
        return np.tile(f[0], (1, 1, ow))

    def _bind(self, x: np.ndarray, out: np.ndarray) -> None:
        if self.summed:
            self._bind_summed(x, out)
            return
        if self.clipped:
            self._bind_clipped(x, out)
            return
        n, oh, ow, c = out.shape
        acc = out.reshape(n, oh, ow * c)
        self.tasks = []
        self.group_weights: dict[int, np.ndarray] = {}  # per phase plane, shared by the blocks
        for (b, y0, y1), sources in zip(self.blocks, self.block_sources):
            per_slot = []
            for r0, r1, source in sources:
                views = [source.tap(ky, kx)[0] for ky, kx in self.taps]
                per_slot.append((source, x[b : b + 1, r0:r1], self._tap_groups(views) or views))
            self.tasks.append(partial(self._block, per_slot, acc[b, y0:y1]))
        self.bound = (x, out)

    def _tap_groups(self, views: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """The taps' views regrouped for einsum (:func:`plane_groups`); each plane's weights
        are stacked once per binding, for all blocks and threads (one copy per block took 3.7
        MB in MobileNetV2's first depthwise layer)."""
        _, strides, dilations, _ = self.window
        return plane_groups(views, self.taps, strides[1], dilations[1], self.tap_rows, self.group_weights)

    def _bind_clipped(self, x: np.ndarray, out: np.ndarray) -> None:
        """Tasks reading each tap's rectangle straight from the input. A block starts from a
        tap that covers all of it (the centre one, for SAME padding), else from zeros."""
        n, oh, ow, c = out.shape
        flat = [p.reshape(-1) for p in self.products]
        self.tasks = []
        for b, by0, by1 in self.blocks:
            first, rest = None, []
            for row, (y0, y1, x0, x1, iy, ix) in zip(self.tap_rows, self.rects):
                top, bottom = max(y0, by0), min(y1, by1)
                if top >= bottom or x0 >= x1:
                    continue
                rows, width = bottom - top, (x1 - x0) * c
                start = iy + (top - y0) * self.row_step
                stop = start + (rows - 1) * self.row_step + 1
                view = x[b, start : stop : self.row_step, ix : ix + x1 - x0].reshape(rows, width)
                acc = out[b, top:bottom, x0:x1].reshape(rows, width)
                if first is None and (top, bottom, x0, x1) == (by0, by1, 0, ow):
                    first = (view, row, acc)
                else:
                    products = [p[: rows * width].reshape(rows, width) for p in flat]
                    rest.append((view, row[:width], acc, products))
            block = out[b, by0:by1].reshape(by1 - by0, ow * c)
            self.tasks.append(partial(self._clipped_block, first, rest, block))
        self.bound = (x, out)

    def _summed_filter(self, f: np.ndarray, ow: int) -> np.ndarray:
        """The filter ``[1, KH, KW, C]`` as the einsum takes it: along an output row per tap
        (``[KH, KW, OW * C]``) for the rows form, ``[KH, KW, C]`` for the windows form."""
        return self._tap_weights(f, ow) if self.summed == "rows" else f[0]

    def _bind_summed(self, x: np.ndarray, out: np.ndarray) -> None:
        """Tasks summing every tap of a block of output rows with one einsum over a view of the
        padded input (filled once per eval, before them): ``[rows, OW * C, KH, KW]`` (rows
        form: a pixel's C values follow the previous pixel's, so at stride 1 a tap's window
        along a row is one run) or ``[rows, OW, KH, KW, C]`` (windows form)."""
        n, oh, ow, c = out.shape
        _, strides, dilations, _ = self.window
        kh, kw = self.taps[-1][0] + 1, self.taps[-1][1] + 1
        src = self.padded.buffer if self.padded.needed else x
        self.tasks = []
        for b, y0, y1 in self.blocks:
            s0, s1, s2 = src[b].strides
            start = src[b, y0 * strides[0] :]  # the block's first window row onwards
            rows = out[b, y0:y1].reshape(y1 - y0, ow * c)
            if self.summed == "rows":  # s1 == c * s2: eval made the input contiguous
                view = as_strided(start, (y1 - y0, ow * c, kh, kw), (s0 * strides[0], s2, s0 * dilations[0], s1 * dilations[1]))
                self.tasks.append(partial(self._summed_block, "hiyx,yxi->hi", view, rows, rows))
            else:
                shape = (y1 - y0, ow, kh, kw, c)
                view = as_strided(start, shape, (s0 * strides[0], s1 * strides[1], s0 * dilations[0], s1 * dilations[1], s2))
                self.tasks.append(partial(self._summed_block, "hwyxc,yxc->hwc", view, out[b, y0:y1], rows))
        self.bound = (x, out)

    def _summed_block(self, subscripts: str, view: np.ndarray, acc: np.ndarray, rows: np.ndarray, slot: int) -> None:
        np.einsum(subscripts, view, self.filter, out=acc)
        self._finish(rows)

    def _clipped_block(self, first: tuple | None, rest: list, block: np.ndarray, slot: int) -> None:
        if first is None:
            block.fill(0)
        else:
            np.multiply(first[0], first[1], out=first[2])
        for view, row, acc, products in rest:
            product = products[slot]
            np.multiply(view, row, out=product)
            np.add(acc, product, out=acc)
        self._finish(block)

    def _finish(self, acc: np.ndarray) -> None:
        if self.bias_row is not None:
            np.add(acc, self.bias_row, out=acc)
        if self.activation is not None:
            self.activation(acc)

    def _block(self, per_slot: list[tuple], acc: np.ndarray, slot: int) -> None:
        source, rows, views = per_slot[slot]
        source.fill(rows)
        if isinstance(views[0], tuple):  # einsum per phase plane (``_tap_groups``)
            np.einsum("hiyx,yxi->hi", views[0][0], views[0][1], out=acc)
            if len(views) > 1:  # one tap (a 1x1 filter) has one plane and no product scratch
                product = self.products[slot][: acc.shape[0]]
                for view, weights in views[1:]:
                    np.einsum("hiyx,yxi->hi", view, weights, out=product)
                    np.add(acc, product, out=acc)
            self._finish(acc)
            return
        weights = self.tap_rows
        np.multiply(views[0], weights[0], out=acc)
        if len(views) > 1:
            product = self.products[slot][: acc.shape[0]]
            for view, row in zip(views[1:], weights[1:]):
                np.multiply(view, row, out=product)
                np.add(acc, product, out=acc)
        self._finish(acc)

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, f, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        ow = out.shape[2]
        stale = self.scratch_stale()
        if self.summed:
            if self.weights is None:  # a filter computed at run time, read by the tasks
                self.filter = self._summed_filter(f, ow)
            if not self.padded.needed and not x.flags.c_contiguous:  # the views need plain rows
                x = np.ascontiguousarray(x)
        elif self.weights is None:  # a filter computed at run time: the tasks hold its rows
            weights = self._tap_weights(f, ow)
            self.tap_rows = [weights[ky, kx] for ky, kx in self.taps]
            stale = True
        if bias is not None and self.bias is None:
            self.bias_row = tiled(bias, ow)
        if stale:
            self._attach()
        if stale or self.bound is None or self.bound[0] is not x or self.bound[1] is not out:
            self._bind(x, out)
        if self.summed:
            self.padded.fill(x)
        self.run(self.tasks)


# ----------------------------------------------------------------------------- TRANSPOSE_CONV


@register("TRANSPOSE_CONV")
class TransposeConv(ScratchUser, Kernel):
    """Transposed convolution; inputs are (output_shape, weights, input[, bias]).

    Each input pixel adds ``input[b, y, x, :] @ weights[:, ky, kx, :].T`` to output pixel
    ``(y * stride_h + ky - pad_top, x * stride_w + kx - pad_left)``; contributions falling
    outside the requested output are dropped. The padding is LiteRT's: computed as if the
    *output* were the input of a forward convolution. The contributions and the canvas come
    from the interpreter's scratchpad.
    """

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 3, 4)
        shape_t, wts, x, bias = transpose_conv_operands(ins)
        expect_output_shape_vector(self, shape_t)
        _expect_float(self, x, wts, bias)
        (h, w), (kh, kw) = transpose_conv_shapes(self, x, wts, bias)
        n, out_c = x.shape[0], wts.shape[0]
        strides, _ = _spatial_options(self, dilated=False)
        self.activation = clamp(self.options)
        self.weights = None if wts.value is None else self._weight_matrix(wts.value)
        if shape_t.value is None:
            return [Spec(None, np.dtype(np.float32))]  # prepared again with the value at invoke

        out_shape = transpose_conv_output_shape(self, shape_t.value, x, wts)
        oh, ow = out_shape[1], out_shape[2]
        (canvas_h, canvas_w), (top, left) = transpose_conv_canvas(self.options.padding, (h, w), (kh, kw), strides, (oh, ow))
        self.geometry = ((h, w), strides, (1, 1))
        self.taps = filter_taps(kh, kw)
        self.rows = n * h * w
        self.direct = (top, left, canvas_h, canvas_w) == (0, 0, oh, ow)
        specs = [((n, h, w, kh, kw, out_c), np.float32)]
        self.want_scratch(specs + ([] if self.direct else [((n, canvas_h, canvas_w, out_c), np.float32)]))
        self.canvas = None
        self.crop = (slice(None), slice(top, top + oh), slice(left, left + ow), slice(None))
        self.bias = None if bias is None or bias.value is None else tiled(bias.value, ow)
        return [Spec(out_shape, np.dtype(np.float32))]

    _weight_matrix = staticmethod(transpose_conv_weight_matrix)

    def eval(self, ins, outs):
        _, wts, x, bias = transpose_conv_operands(ins)
        weights = self.weights if self.weights is not None else self._weight_matrix(wts)
        out = outs[0]
        if out.size == 0:
            return
        n, oh, ow, out_c = out.shape
        if self.scratch_stale():
            self.col, self.canvas = (self.take_scratch() + [None])[:2]
        np.matmul(x.reshape(self.rows, -1), weights, out=self.col.reshape(self.rows, -1))
        canvas = out if self.direct else self.canvas
        canvas.fill(0)
        for ky, kx in self.taps:
            target = tap_view(canvas, ky, kx, *self.geometry)
            np.add(target, self.col[:, :, :, ky, kx, :], out=target)
        if not self.direct:
            np.copyto(out, canvas[self.crop])
        if bias is not None:
            rows = out.reshape(n * oh, ow * out_c)
            np.add(rows, self.bias if self.bias is not None else tiled(bias, ow), out=rows)
        if self.activation is not None:
            self.activation(out)
