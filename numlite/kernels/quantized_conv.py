"""Full-integer CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL and TRANSPOSE_CONV.

Arithmetic as LiteRT's reference integer kernels: every output channel accumulates
``(x - x_zp) * (w - w_zp)`` over its window, adds the integer bias, is rescaled by a fixed-point
multiplier (per channel when the weights are), shifted by the output zero point and clamped to
the fused activation's range. Supported forms:

* int8 activations, int8 weights (per channel or per tensor), int32 bias;
* 16x8: int16 activations (zero point 0), int8 weights, int64 (or int32) bias, the int64
  accumulator and LiteRT's 64-bit rescaling (FULLY_CONNECTED rescales it its own way, below);
* uint8 activations with uint8 weights (the legacy per-tensor form, weight zero point honoured).

Why float64 matmuls are exact here: every product ``(x - x_zp) * (w - w_zp)`` is an integer of
magnitude at most ``65535 * 255 < 2**24`` (16x8: ``65535 * 255``; 8-bit: ``255 * 255``), and every
partial sum of a depth-``K`` accumulation at most ``K * 2**24``. Integers below ``2**53`` are
exactly representable in float64, so for any ``K < 2**29`` every product and every partial sum
(in whatever order BLAS adds them, fused multiply-adds included) is exact: the float64 result *is*
the integer accumulator. Prepare refuses larger depths. The 8-bit accumulator is then wrapped to
int32 as C++ does.

FULLY_CONNECTED rescales differently from the others in ai-edge-litert 2.3's reference kernels:
not by the fixed-point multiplier at all but by the real factor ``input_scale * weight_scale /
output_scale`` in double, rounding ``acc * factor`` to the nearest integer. Measured on 4 x 65536
outputs of each form (int8 and 16x8, per channel and per tensor; tests/test_quantized_conv.py):
that matched every output, while one rounding of ``acc * multiplier`` (TFLITE_SINGLE_ROUNDING)
missed 3 of the 16x8 ones, gemmlowp's double rounding about 200 and float32 factors dozens. The
16x8 int64 accumulator is not narrowed: sums beyond 2**32 still come out in range or saturate.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, has_scale, register
from numlite.kernels.conv import (
    _expect_rank,
    _spatial_options,
    conv_groups,
    conv_window,
    depthwise_multiplier,
    expect_output_shape_vector,
    filter_taps,
    grouped_im2col,
    grouped_weight_matrix,
    tap_view,
    transpose_conv_canvas,
    transpose_conv_output_shape,
    transpose_conv_shapes,
    transpose_conv_weight_matrix,
)
from numlite.kernels.fixed_point import (
    activation_range,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
    quantize_multiplier,
    round_half_away,
)
from numlite.kernels.operands import (
    adjoint_options,
    batch_matmul_shape,
    fully_connected_options,
    fully_connected_shape,
    input_weights_bias,
    transpose_conv_operands,
)

INT8, UINT8, INT16 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)
ACTIVATION_TYPES = (INT8, UINT8, INT16)
EXACT_DEPTH = 1 << 29  # float64 accumulation stays exact below this many products (see above)


# ----------------------------------------------------------------------------- parameters


def _params(t: TensorInfo) -> tuple[np.ndarray, np.ndarray]:
    """``(scale float32[], zero_point int64[])`` of a quantized tensor (zero points default to 0)."""
    q = t.quantization
    scale = np.asarray(q.scale, np.float32).reshape(-1)
    zp = q.zero_point
    zp = np.zeros(len(scale), np.int64) if zp is None or len(zp) == 0 else np.asarray(zp, np.int64).reshape(-1)
    return scale, zp


class QuantizedKernel(Kernel):
    """Shared prepare steps: checking tensor types and computing the requantization."""

    weights_index = 1
    activation_index = 0

    @classmethod
    def handles(cls, ins: Sequence[TensorInfo | None]) -> bool:
        """Integer activations carrying a scale (float activations go to the float or hybrid kernel)."""
        x = ins[cls.activation_index] if len(ins) > cls.activation_index else None
        return x is not None and x.dtype in ACTIVATION_TYPES and has_scale(x)

    def check_types(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None, out: TensorInfo) -> None:
        """The combinations LiteRT's integer kernels accept; sets ``self.wide`` (16x8)."""
        for t, what in ((x, "input"), (w, "weights"), (out, "output")):
            if not has_scale(t):
                raise self.fail(f"{what} {t.name!r} ({t.dtype.name}) has no quantization parameters")
        if out.dtype != x.dtype:
            raise self.fail(f"output {out.name!r} is {out.dtype.name}, the input {x.dtype.name}")
        allowed_w = (UINT8,) if x.dtype == UINT8 else (INT8,)
        if w.dtype not in allowed_w:
            raise self.fail(f"weights {w.name!r} are {w.dtype.name}; {x.dtype.name} activations need {allowed_w[0].name}")
        self.wide = x.dtype == INT16
        allowed_b = (np.dtype(np.int64), np.dtype(np.int32)) if self.wide else (np.dtype(np.int32),)
        if bias is not None and bias.dtype not in allowed_b:
            names = " or ".join(d.name for d in allowed_b)
            raise self.fail(f"bias {bias.name!r} is {bias.dtype.name}; {x.dtype.name} activations need {names}")
        if self.wide:
            for t, what in ((x, "input"), (out, "output")):
                if np.any(_params(t)[1] != 0):
                    raise self.fail(f"int16 {what} {t.name!r} must have zero point 0")

    def output_info(self) -> TensorInfo:
        out = self.declared_outputs()[0]
        if out is None:
            raise self.fail("the output is omitted")
        return out

    def set_requantization(
        self, x: TensorInfo, w: TensorInfo, out: TensorInfo, channels: int, float_product: bool = False
    ) -> None:
        """Per-channel multipliers and shifts, offsets and the activation clamp.

        ``float_product``: the input and weight scales are multiplied in float32 before the
        division in double (LiteRT's GetQuantizedConvolutionMultipler, used by per-tensor
        FULLY_CONNECTED and BATCH_MATMUL); otherwise everything is in double
        (PopulateConvolutionQuantizationParams).
        """
        x_scale, x_zp = _params(x)
        w_scale, w_zp = _params(w)
        o_scale, o_zp = _params(out)
        if len(w_scale) not in (1, channels):
            raise self.fail(f"weights {w.name!r} have {len(w_scale)} scales for {channels} output channels")
        if float_product:
            product = (x_scale[0] * w_scale).astype(np.float64)
        else:
            product = np.float64(x_scale[0]) * w_scale.astype(np.float64)
        real = product / np.float64(o_scale[0])
        self.real = np.broadcast_to(real, (channels,)).copy()
        mult, shift = quantize_multiplier(self.real)
        self.multiplier, self.shift = mult.astype(np.int64), shift.astype(np.int64)
        self.x_zp, self.out_zp = int(x_zp[0]), int(o_zp[0])
        if np.any(w_zp[1:] != w_zp[0]):
            raise self.fail(f"weights {w.name!r} have differing zero points")
        self.w_zp = int(w_zp[0])
        code = int(getattr(self.options, "fused_activation_function", 0) or 0) if self.options is not None else 0
        self.act_min, self.act_max = activation_range(code, float(o_scale[0]), self.out_zp, out.dtype)
        self.out_dtype = out.dtype

    def centered(self, x: np.ndarray) -> np.ndarray:
        """``x - zero_point`` as exact float64 (the matmul operand)."""
        return np.subtract(x, self.x_zp, dtype=np.float64)

    def requantize(self, acc: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
        """Exact accumulator (float64 holding integers, channels last) -> output values."""
        total = acc.astype(np.int64)
        if bias is not None:
            total += bias.astype(np.int64)
        scaled = self.rescale(total)
        scaled += self.out_zp
        np.clip(scaled, self.act_min, self.act_max, out=scaled)
        out[...] = scaled.reshape(out.shape)

    def rescale(self, total: np.ndarray) -> np.ndarray:
        """The int64 accumulators (bias added) times the output multiplier, as int64."""
        if self.wide:
            return multiply_by_quantized_multiplier_int64(total, self.multiplier, self.shift).astype(np.int64)
        return multiply_by_quantized_multiplier(total.astype(np.int32), self.multiplier, self.shift).astype(np.int64)

    def check_depth(self, depth: int) -> None:
        if depth >= EXACT_DEPTH:
            raise self.fail(f"accumulation depth {depth} is too large for exact integer accumulation")


def _weights_centered(kernel: QuantizedKernel, w: np.ndarray) -> np.ndarray:
    return np.subtract(w, kernel.w_zp, dtype=np.float64)


class _QuantizedWindowConv(QuantizedKernel):
    """Shared prepare and eval of the integer CONV_2D and DEPTHWISE_CONV_2D (also driven by the
    hybrid kernels, which call ``plan`` and ``accumulate`` directly)."""

    channel_axis: int  # the filter's axis of output channels

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w, bias = input_weights_bias(ins)
        out = self.output_info()
        self.check_types(x, w, bias, out)
        _expect_rank(self, w, 4, "filter")
        self.set_requantization(x, w, out, w.shape[self.channel_axis])
        return [Spec(self.plan(x, w, bias), x.dtype)]

    def plan(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None) -> tuple[int, ...]:
        """Checks shapes and lays out the geometry (and constant weights); the output shape."""
        raise NotImplementedError

    def accumulate(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The exact accumulators ``[n, oh, ow, out_c]`` (float64) of centered inputs ``x``."""
        raise NotImplementedError

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        self.requantize(self.accumulate(self.centered(x), w), bias, out)


# ----------------------------------------------------------------------------- CONV_2D


@register("CONV_2D", quantized=True)
class QuantizedConv2D(_QuantizedWindowConv):
    """Integer 2-D convolution (grouped when the input has a multiple of the filter's channels):
    one exact float64 im2col matmul per group."""

    channel_axis = 0

    def plan(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None) -> tuple[int, ...]:
        self.groups = conv_groups(self, x, w, bias)
        n, h, wd, c = x.shape
        out_c, kh, kw, group_c = w.shape
        strides, dilations, (oh, ow), (top, bottom, left, right) = conv_window(self, (h, wd), (kh, kw))
        self.pads = ((0, 0), (top, bottom), (left, right), (0, 0))
        self.window = (n, oh, ow, kh, kw, c)
        self.steps = (strides[0], strides[1], dilations[0], dilations[1])
        self.depth = kh * kw * group_c
        self.check_depth(self.depth)
        self.weights = None if w.value is None else self._matrix(w.value)
        return (n, oh, ow, out_c)

    def _matrix(self, w: np.ndarray) -> np.ndarray:
        """``[out_c, kh, kw, in_c/g]`` as centered ``[g, depth, out_c/g]`` float64."""
        return grouped_weight_matrix(_weights_centered(self, w), self.groups, self.depth)

    def accumulate(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        weights = self.weights if self.weights is not None else self._matrix(w)
        # Padding with 0 after centering is LiteRT's skipping of points outside the image.
        cols = grouped_im2col(np.pad(x, self.pads), self.window, self.steps, self.groups)
        acc = np.matmul(cols.reshape(self.groups, -1, self.depth), weights)  # [g, rows, out_c/g]
        n, oh, ow = self.window[:3]
        return acc.transpose(1, 0, 2).reshape(n, oh, ow, -1)


# ----------------------------------------------------------------------------- DEPTHWISE_CONV_2D


@register("DEPTHWISE_CONV_2D", quantized=True)
class QuantizedDepthwiseConv2D(_QuantizedWindowConv):
    """Integer depthwise convolution; output channel ``i * m + j`` filters input channel ``i``.
    One exact float64 multiply-add of a shifted window per filter tap."""

    channel_axis = 3

    def plan(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None) -> tuple[int, ...]:
        self.multiplier_c = depthwise_multiplier(self, x, w, bias)
        n, h, wd, _ = x.shape
        _, kh, kw, out_c = w.shape
        strides, dilations, (oh, ow), (top, bottom, left, right) = conv_window(self, (h, wd), (kh, kw))
        self.pads = ((0, 0), (top, bottom), (left, right), (0, 0))
        self.geometry = ((oh, ow), strides, dilations)
        self.taps = filter_taps(kh, kw)
        self.out_shape = (n, oh, ow, out_c)
        self.weights = None if w.value is None else self._taps(w.value)
        return self.out_shape

    def _taps(self, w: np.ndarray) -> np.ndarray:
        """``[1, kh, kw, c*m]`` as centered ``[kh, kw, c, m]`` float64."""
        return _weights_centered(self, w)[0].reshape(w.shape[1], w.shape[2], -1, self.multiplier_c)

    def accumulate(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        weights = self.weights if self.weights is not None else self._taps(w)
        src = np.pad(x, self.pads)
        n, oh, ow, out_c = self.out_shape
        acc = np.zeros((n, oh, ow, out_c // self.multiplier_c, self.multiplier_c))
        for ky, kx in self.taps:
            acc += tap_view(src, ky, kx, *self.geometry)[..., None] * weights[ky, kx]
        return acc.reshape(n, oh, ow, out_c)


# ----------------------------------------------------------------------------- TRANSPOSE_CONV


@register("TRANSPOSE_CONV", quantized=True)
class QuantizedTransposeConv(QuantizedKernel):
    """Integer transposed convolution, inputs (output_shape, weights, input[, bias]): one exact
    matmul to per-tap contributions, scattered with one strided add per tap (col2im)."""

    activation_index = 2

    def prepare(self, ins):
        self.expect_inputs(ins, 3, 4)
        shape_t, w, x, bias = transpose_conv_operands(ins)
        out = self.output_info()
        self.check_types(x, w, bias, out)
        expect_output_shape_vector(self, shape_t)
        (h, wd), (kh, kw) = transpose_conv_shapes(self, x, w, bias)
        n, c, out_c = x.shape[0], x.shape[3], w.shape[0]
        self.check_depth(c * kh * kw)
        strides, _ = _spatial_options(self, dilated=False)
        self.set_requantization(x, w, out, out_c)
        self.weights = None if w.value is None else self._matrix(w.value)
        if shape_t.value is None:
            return [Spec(None, x.dtype)]
        out_shape = transpose_conv_output_shape(self, shape_t.value, x, w)
        oh, ow = out_shape[1], out_shape[2]
        (canvas_h, canvas_w), (top, left) = transpose_conv_canvas(self.options.padding, (h, wd), (kh, kw), strides, (oh, ow))
        self.geometry = ((h, wd), strides, (1, 1))
        self.taps = filter_taps(kh, kw)
        self.canvas_shape = (n, canvas_h, canvas_w, out_c)
        self.crop = (slice(None), slice(top, top + oh), slice(left, left + ow), slice(None))
        return [Spec(out_shape, x.dtype)]

    def _matrix(self, w: np.ndarray) -> np.ndarray:
        """``[out_c, kh, kw, in_c]`` as centered ``[in_c, kh * kw * out_c]`` float64."""
        return transpose_conv_weight_matrix(_weights_centered(self, w))

    def eval(self, ins, outs):
        _, w, x, bias = transpose_conv_operands(ins)
        out = outs[0]
        if out.size == 0:
            return
        weights = self.weights if self.weights is not None else self._matrix(w)
        n, h, wd, c = x.shape
        kh, kw = w.shape[1], w.shape[2]
        col = (self.centered(x).reshape(-1, c) @ weights).reshape(n, h, wd, kh, kw, -1)
        canvas = np.zeros(self.canvas_shape)
        for ky, kx in self.taps:
            target = tap_view(canvas, ky, kx, *self.geometry)
            target += col[:, :, :, ky, kx, :]
        self.requantize(canvas[self.crop], bias, out)


# ----------------------------------------------------------------------------- FULLY_CONNECTED


@register("FULLY_CONNECTED", quantized=True)
class QuantizedFullyConnected(QuantizedKernel):
    """Integer ``input @ weights.T + bias``, weights ``[units, depth]`` per channel or per tensor;
    the input is read as ``[size // depth, depth]``, the output keeps the input's leading
    dimensions under ``keep_num_dims``."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w, bias = input_weights_bias(ins)
        fully_connected_options(self)
        out = self.output_info()
        self.check_types(x, w, bias, out)
        self.depth, out_shape = fully_connected_shape(self, x, w, bias, whole_rows=True)
        self.check_depth(self.depth)
        self.set_requantization(x, w, out, w.shape[0])  # in double, per tensor too (see the top)
        self.weights = None if w.value is None else np.ascontiguousarray(_weights_centered(self, w.value).T)
        return [Spec(out_shape, x.dtype)]

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        weights = self.weights if self.weights is not None else _weights_centered(self, w).T
        acc = self.centered(x).reshape(-1, self.depth) @ weights
        self.requantize(acc, bias, out)

    def rescale(self, total: np.ndarray) -> np.ndarray:
        """``total * real factor`` in double, rounded half away from zero (see the top).

        ``total`` is far below 2**53 (depth < 2**29 products below 2**24), so it converts to
        float64 exactly; the one rounding is that of the product.
        """
        scaled = round_half_away(total.astype(np.float64) * self.real)
        return np.clip(scaled, -(2.0**62), 2.0**62).astype(np.int64)


# ----------------------------------------------------------------------------- BATCH_MATMUL


@register("BATCH_MATMUL", quantized=True)
class QuantizedBatchMatMul(QuantizedKernel):
    """Integer batched ``lhs @ rhs`` (both per-tensor quantized, int8 or int16) with broadcast
    batch dimensions; ``adj_x`` / ``adj_y`` transpose either operand's last two dimensions."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        lhs, rhs = ins
        out = self.output_info()
        if rhs.dtype != lhs.dtype or lhs.dtype == UINT8:
            raise self.fail(f"operands are {lhs.dtype.name} and {rhs.dtype.name}; int8 or int16 pairs are supported")
        for t in (lhs, rhs, out):
            if not has_scale(t):
                raise self.fail(f"{t.name!r} has no quantization parameters")
            if len(_params(t)[0]) != 1:
                raise self.fail(f"{t.name!r} must be quantized per tensor")
        if out.dtype != lhs.dtype:
            raise self.fail(f"output {out.name!r} is {out.dtype.name}, the inputs {lhs.dtype.name}")
        self.wide = lhs.dtype == INT16
        self.adj_x, self.adj_y = adjoint_options(self)
        shape = batch_matmul_shape(self, lhs, rhs, self.adj_x, self.adj_y)
        self.check_depth(lhs.shape[-2] if self.adj_x else lhs.shape[-1])
        self.set_requantization(lhs, rhs, out, 1, float_product=True)
        return [Spec(shape, lhs.dtype)]

    def eval(self, ins, outs):
        lhs, rhs = ins
        a = self.centered(lhs)
        b = _weights_centered(self, rhs)
        if self.adj_x:
            a = a.swapaxes(-1, -2)
        if self.adj_y:
            b = b.swapaxes(-1, -2)
        self.requantize(np.matmul(a, b), None, outs[0])
