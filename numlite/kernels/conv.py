"""Convolutions: CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV (float32, NHWC).

Layouts follow TFLite: CONV_2D filters are ``[out_c, kh, kw, in_c / groups]``, DEPTHWISE_CONV_2D
filters ``[1, kh, kw, in_c * depth_multiplier]`` and TRANSPOSE_CONV weights
``[out_c, kh, kw, in_c]``. Output sizes and SAME padding are computed as LiteRT's
``ComputePaddingHeightWidth`` does (the extra odd pixel of padding goes at the bottom/right).

How the work is laid out:
  * CONV_2D is one BLAS matmul. A 1x1, stride-1 convolution multiplies the input viewed as
    ``[N*H*W, C]`` directly; any other one first gathers an im2col matrix from a strided view
    of the (once-allocated, zero-bordered) padded input. The weight matrix is laid out once at
    prepare when the filter is constant.
  * DEPTHWISE_CONV_2D accumulates one shifted strided view of the input per filter tap, laid
    out by ``TapSource`` so that every output row is one long contiguous run (pooling too).
  * TRANSPOSE_CONV is one matmul to per-tap contributions, scattered (col2im) with one strided
    add per tap.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from numlite.errors import PrepareError
from numlite.kernels import hybrid
from numlite.kernels.base import Kernel, Spec, TensorInfo, fused_activation, register, scratch
from numlite.kernels.operands import input_weights_bias, transpose_conv_operands

SAME, VALID = 0, 1


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


class PaddedInput:
    """A buffer holding the input surrounded by a constant border, allocated once.

    The border is written at construction and never touched again; ``fill(x)`` only copies
    the interior. With no padding the input itself is used and nothing is allocated.
    """

    def __init__(self, shape: tuple[int, ...], pads: tuple[int, int, int, int], dtype: np.dtype, value: float = 0.0):
        top, bottom, left, right = pads
        self.needed = any(pads)
        if self.needed:
            n, h, w, c = shape
            self.buffer = scratch((n, h + top + bottom, w + left + right, c), dtype, fill=value)
            self.interior = self.buffer[:, top : top + h, left : left + w, :]

    def fill(self, x: np.ndarray) -> np.ndarray:
        if not self.needed:
            return x
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
    to make every output row one run of ``OW * C`` values. Padding is a constant border
    written once at construction. A horizontal stride ``s > 1`` would break rows into runs of
    ``C``; the padded columns are therefore dealt into ``s`` phase planes (plane ``p`` holds
    padded columns ``p, p + s, p + 2s, ...``) in which each tap's row is contiguous again.
    ``repeat > 1`` repeats every channel that many times (depthwise multipliers). When no
    padding, phase or repetition is needed the input itself is viewed and nothing is copied.
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
    ) -> None:
        n, h, w, c = in_shape
        top, bottom, left, right = pads
        self.out_hw, self.strides, self.dilations = out_hw, strides, dilations
        self.row_shape = (n, out_hw[0], out_hw[1] * c * repeat)
        sw = strides[1]
        self.direct = not any(pads) and sw == 1 and repeat == 1
        if self.direct:
            return
        hp, wq = h + top + bottom, -(-(w + left + right) // sw)
        planes6 = scratch((sw, n, hp, wq, c, repeat), dtype, fill=fill_value)
        self.planes = planes6.reshape(sw, n, hp, wq, c * repeat)
        # Where each phase of input columns goes: (destination view, input column slice).
        self.fills = []
        for p in range(sw):
            first = (p - left) % sw  # first input column whose padded column is in plane p
            if first >= w:
                continue
            count = len(range(first, w, sw))
            j0 = (first + left) // sw
            self.fills.append((planes6[p, :, top : top + h, j0 : j0 + count], slice(first, None, sw)))

    def _plane_view(self, ky: int, kx: int) -> np.ndarray:
        (oh, ow), (sh, sw), (dh, dw) = self.out_hw, self.strides, self.dilations
        y0, offset = ky * dh, kx * dw
        plane, j0 = offset % sw, offset // sw
        view = self.planes[plane, :, y0 : y0 + (oh - 1) * sh + 1 : sh, j0 : j0 + ow, :]
        return _merge_rows(view)

    def fill(self, x: np.ndarray) -> None:
        """Copy this invocation's input in (only the interior; the border stays as built)."""
        self.source = x
        if not self.direct:
            for dst, cols in self.fills:
                np.copyto(dst, x[:, :, cols, :, None])

    def tap(self, ky: int, kx: int) -> np.ndarray:
        """``[N, OH, OW * C]``: what tap (ky, kx) meets for every output pixel."""
        if self.direct:
            return _merge_rows(tap_view(self.source, ky, kx, self.out_hw, self.strides, self.dilations))
        return self._plane_view(ky, kx)


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


@register("CONV_2D")
class Conv2D(Kernel):
    """2-D convolution, grouped when the input has a multiple of the filter's channels."""

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any

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
        self.activation = fused_activation(self.options)

        self.groups = groups
        self.rows = n * oh * ow  # rows of the matmul: one per output pixel
        self.depth = kh * kw * group_c  # columns of the im2col matrix of one group
        self.pointwise = kh == kw == 1 and strides == (1, 1) and not any((top, bottom, left, right))
        if not self.pointwise:
            self.padded = PaddedInput(x.shape, (top, bottom, left, right), np.dtype(np.float32))
            self.window = (n, oh, ow, kh, kw, c)
            self.window_steps = (strides[0], strides[1], dilations[0], dilations[1])
            # Group-major im2col rows, so that each group's matrix is contiguous for BLAS.
            self.col = scratch((groups, self.rows, self.depth), np.float32)
            self.col_view = self.col.reshape(groups, n, oh, ow, kh, kw, group_c)
        self.weights = None if f.value is None else self._weight_matrix(f.value)
        self.bias = None if bias.value is None else tiled(bias.value, ow)
        return [Spec((n, oh, ow, out_c), np.dtype(np.float32))]

    def _weight_matrix(self, f: np.ndarray) -> np.ndarray:
        """``[out_c, kh, kw, in_c/g]`` as ``[g, depth, out_c/g]``."""
        return grouped_weight_matrix(f, self.groups, self.depth)

    def _im2col(self, x: np.ndarray) -> np.ndarray:
        np.copyto(self.col_view, grouped_im2col(self.padded.fill(x), self.window, self.window_steps, self.groups))
        return self.col

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, f, bias = ins[0], ins[1], ins[2]
        weights = self.weights if self.weights is not None else self._weight_matrix(f)
        out = outs[0]
        if out.size == 0:
            return
        g = self.groups
        n, oh, ow, out_c = out.shape
        if self.pointwise:
            lhs = x.reshape(self.rows, g, -1).transpose(1, 0, 2)
        else:
            lhs = self._im2col(x)
        if g == 1:
            np.matmul(lhs[0], weights[0], out=out.reshape(self.rows, out_c))
        else:
            np.matmul(lhs, weights, out=out.reshape(self.rows, g, out_c // g).transpose(1, 0, 2))
        rows = out.reshape(n * oh, ow * out_c)
        np.add(rows, self.bias if self.bias is not None else tiled(bias, ow), out=rows)
        if self.activation is not None:
            self.activation(out)


# ----------------------------------------------------------------------------- DEPTHWISE_CONV_2D


@register("DEPTHWISE_CONV_2D")
class DepthwiseConv2D(Kernel):
    """Per-channel convolution; output channel ``i * m + j`` filters input channel ``i``.

    The depth multiplier ``m`` is the ratio of filter to input channels, as LiteRT's builtin
    kernel derives it. A positive ``depth_multiplier`` option that disagrees is an error, as
    LiteRT's default (XNNPACK) delegate fails on it; zero or negative is ignored (the delegate
    then leaves the node to the builtin kernel). The input's channels are
    repeated ``m`` times, which turns the op into a multiplier-1 depthwise convolution over
    the output channels: one multiply-add of a shifted input view per filter tap.
    """

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
        self.activation = fused_activation(self.options)
        self.source = TapSource(x.shape, pads, (oh, ow), strides, dilations, np.dtype(np.float32), repeat=multiplier)
        self.taps = filter_taps(kh, kw)
        self.product = np.empty(self.source.row_shape, np.float32)  # one tap's products
        self.weights = None if f.value is None else self._tap_weights(f.value, ow)
        self.bias = None if bias is None or bias.value is None else tiled(bias.value, ow)
        return [Spec((n, oh, ow, out_c), np.dtype(np.float32))]

    @staticmethod
    def _tap_weights(f: np.ndarray, ow: int) -> np.ndarray:
        """``[1, kh, kw, C]`` as ``[kh, kw, OW * C]``: each tap's weights along an output row."""
        return np.tile(f[0], (1, 1, ow))

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, f, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        ow = out.shape[2]
        weights = self.weights if self.weights is not None else self._tap_weights(f, ow)
        self.source.fill(x)
        acc = out.reshape(self.source.row_shape)
        for i, (ky, kx) in enumerate(self.taps):
            if i == 0:
                np.multiply(self.source.tap(ky, kx), weights[ky, kx], out=acc)
            else:
                np.multiply(self.source.tap(ky, kx), weights[ky, kx], out=self.product)
                np.add(acc, self.product, out=acc)
        if bias is not None:
            np.add(acc, self.bias if self.bias is not None else tiled(bias, ow), out=acc)
        if self.activation is not None:
            self.activation(out)


# ----------------------------------------------------------------------------- TRANSPOSE_CONV


@register("TRANSPOSE_CONV")
class TransposeConv(Kernel):
    """Transposed convolution; inputs are (output_shape, weights, input[, bias]).

    Each input pixel adds ``input[b, y, x, :] @ weights[:, ky, kx, :].T`` to output pixel
    ``(y * stride_h + ky - pad_top, x * stride_w + kx - pad_left)``; contributions falling
    outside the requested output are dropped. The padding is LiteRT's: computed as if the
    *output* were the input of a forward convolution.
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 3, 4)
        shape_t, wts, x, bias = transpose_conv_operands(ins)
        expect_output_shape_vector(self, shape_t)
        _expect_float(self, x, wts, bias)
        (h, w), (kh, kw) = transpose_conv_shapes(self, x, wts, bias)
        n, out_c = x.shape[0], wts.shape[0]
        strides, _ = _spatial_options(self, dilated=False)
        self.activation = fused_activation(self.options)
        self.weights = None if wts.value is None else self._weight_matrix(wts.value)
        if shape_t.value is None:
            return [Spec(None, np.dtype(np.float32))]  # prepared again with the value at invoke

        out_shape = transpose_conv_output_shape(self, shape_t.value, x, wts)
        oh, ow = out_shape[1], out_shape[2]
        (canvas_h, canvas_w), (top, left) = transpose_conv_canvas(self.options.padding, (h, w), (kh, kw), strides, (oh, ow))
        self.geometry = ((h, w), strides, (1, 1))
        self.taps = filter_taps(kh, kw)
        self.rows = n * h * w
        self.col = scratch((n, h, w, kh, kw, out_c), np.float32)
        self.direct = (top, left, canvas_h, canvas_w) == (0, 0, oh, ow)
        self.canvas = None if self.direct else scratch((n, canvas_h, canvas_w, out_c), np.float32)
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
