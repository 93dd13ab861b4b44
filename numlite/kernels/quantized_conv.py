"""Full-integer CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL and TRANSPOSE_CONV.

Arithmetic as LiteRT's reference integer kernels: every output channel accumulates
``(x - x_zp) * (w - w_zp)`` over its window, adds the integer bias, is rescaled by a fixed-point
multiplier (per channel when the weights are), shifted by the output zero point and clamped to
the fused activation's range. Supported forms:

* int8 activations, int8 weights (per channel or per tensor), int32 bias;
* 16x8: int16 activations (zero point 0), int8 weights, int64 (or int32) bias, the int64
  accumulator and LiteRT's 64-bit rescaling (FULLY_CONNECTED rescales it its own way, below);
* uint8 activations with uint8 weights (the legacy per-tensor form, weight zero point honoured).

How the accumulators are computed exactly (numlite/kernels/quantized_blocks.py): BLAS matmuls of
the raw integer inputs by the centered weights ``w - w_zp``, in float32 when prepare proves
``max|x| * max_o sum_k |w[k, o] - w_zp| <= 2**24`` from the constant weights (every partial sum,
in any order BLAS adds them, is then an integer float32 holds), in float64 otherwise (exact below
``2**53``; prepare refuses larger bounds). The input zero point comes out afterwards through the
weights' column sums, folded with the bias into one per-channel offset (padding holds the zero
point, whose products that offset cancels, as LiteRT skips those points). CONV_2D and
DEPTHWISE_CONV_2D run in blocks of output rows shared among threads, each block requantized in
place (LiteRT's MultiplyByQuantizedMultiplier in int64 closed forms) while in cache; the 8-bit
accumulator is wrapped to int32 as C++ does unless prepare proves it never leaves that range.

Rounding of exact halves in 8-bit CONV_2D and DEPTHWISE_CONV_2D: as ai-edge-litert's builtin
kernels (the interpreter without its XNNPACK delegate), not its reference kernels (BUILTIN_REF),
which round every half away from zero (gemmlowp's RoundingDivideByPOT). Measured
(tests/test_quantized_conv.py, forms with many exact halves): the builtin ungrouped CONV_2D
(int8 and uint8) rounds halves at the final right shift up, ``(v + 2**(e-1)) >> e``; the int8
DEPTHWISE_CONV_2D does so on the channels of whole 8-channel blocks and rounds the remaining
``C % 8`` away from zero (its scalar remainder loop); the grouped CONV_2D and the uint8
DEPTHWISE_CONV_2D round all away from zero (``halves_up`` of each kernel). uint8 convolutions
rescale by the float32 product of the scales (LiteRT's legacy multiplier, which
PopulateConvolutionQuantizationParams keeps for uint8).
Grouped convolutions, TRANSPOSE_CONV and BATCH_MATMUL keep one whole matmul (centered operands).

FULLY_CONNECTED rescales differently from the others in ai-edge-litert 2.3's reference kernels:
not by the fixed-point multiplier at all but by the real factor ``input_scale * weight_scale /
output_scale`` in double, rounding ``acc * factor`` to the nearest integer. Measured on 4 x 65536
outputs of each form (int8 and 16x8, per channel and per tensor; tests/test_quantized_conv.py):
that matched every output, while one rounding of ``acc * multiplier`` (TFLITE_SINGLE_ROUNDING)
missed 3 of the 16x8 ones, gemmlowp's double rounding about 200 and float32 factors dozens. The
16x8 int64 accumulator is not narrowed: sums beyond 2**32 still come out in range or saturate.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import numpy as np

from numlite.kernels import parallel
from numlite.kernels.base import Kernel, Spec, TensorInfo, has_scale, register
from numlite.kernels.conv import (
    PaddedInput,
    TapSource,
    _expect_rank,
    _spatial_options,
    block_parts,
    conv_groups,
    conv_window,
    depthwise_multiplier,
    expect_output_shape_vector,
    filter_taps,
    grouped_im2col,
    grouped_weight_matrix,
    im2col_copies,
    plane_groups,
    row_blocks,
    tap_view,
    transpose_conv_canvas,
    transpose_conv_output_shape,
    transpose_conv_shapes,
    transpose_conv_weight_matrix,
)
from numlite.kernels.fixed_point import activation_range, dtype_range, quantize_multiplier
from numlite.kernels.operands import (
    adjoint_options,
    batch_matmul_shape,
    fully_connected_options,
    fully_connected_shape,
    input_weights_bias,
    transpose_conv_operands,
)
from numlite.kernels.quantized_blocks import (
    FLOAT32_EXACT,
    FLOAT64_EXACT,
    RAW_MAGNITUDE,
    Requantizer,
    accumulation_dtype,
    column_l1,
)
from numlite.kernels.scratchpad import ScratchUser

F64 = np.dtype(np.float64)
INT8, UINT8, INT16 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)
ACTIVATION_TYPES = (INT8, UINT8, INT16)
EXACT_DEPTH = 1 << 29  # float64 accumulation of centered 8-bit (or 16x8) products stays exact below this depth
# Working memory of one block (im2col rows, accumulators, requantization buffers): blocks are cut
# so that it stays in a core's L2 cache, where the requantization's passes run fastest.
BLOCK_BYTES = 1 << 20


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
    requant_mode = "fixed"  # FULLY_CONNECTED: "real" (see the top); 16x8 kernels: "wide"

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
        self.in_dtype = x.dtype
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
        self.x_range = dtype_range(x.dtype)
        self.requantizer = self.make_requantizer(wrap=True)

    def make_requantizer(self, wrap: bool) -> Requantizer:
        """The output stage; ``wrap`` False once prepare proved the 8-bit accumulator (bias
        included) never leaves int32."""
        mode = self.requant_mode if self.requant_mode == "real" else ("wide" if self.wide else "fixed")
        up = self.halves_up(len(self.real))
        return Requantizer(mode, self.multiplier, self.shift, self.real, self.out_zp, (self.act_min, self.act_max), wrap, up)

    def halves_up(self, channels: int) -> bool | np.ndarray:
        """Which output channels round exact halves up at the 8-bit rescale's right shift
        (False: all away from zero, gemmlowp's RoundingDivideByPOT; the kernels whose LiteRT
        builtin counterparts round them up override this, see docs/operators.md)."""
        return False

    def input_deviation(self) -> int:
        """The largest ``|x - x_zp|`` of the input's dtype."""
        low, high = self.x_range
        return max(abs(low - self.x_zp), abs(high - self.x_zp))

    def needs_wrap(self, l1: int, bias: TensorInfo | None) -> bool:
        """Whether ``acc + bias`` may leave int32 (accumulators bounded by ``|x - zp| * l1``)."""
        largest_bias = 1 << 31 if bias is not None and bias.value is None else 0
        if bias is not None and bias.value is not None and bias.size:
            largest_bias = int(np.abs(bias.value.astype(np.int64)).max())
        return self.input_deviation() * l1 + largest_bias >= 1 << 31

    def centered(self, x: np.ndarray) -> np.ndarray:
        """``x - zero_point`` as exact float64 (the matmul operand)."""
        return np.subtract(x, self.x_zp, dtype=np.float64)

    def requantize(self, acc: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
        """Exact accumulator (float holding integers, channels last) -> output values."""
        dtype = F64 if self.requantizer.mode == "real" else np.dtype(np.int64)
        work, tmp = np.empty(acc.shape, dtype), np.empty(acc.shape, dtype)
        offset = 0 if bias is None else bias.astype(np.int64)
        self.requantizer(acc, offset, out.reshape(acc.shape), work, tmp)

    def check_depth(self, depth: int) -> None:
        if depth >= EXACT_DEPTH:
            raise self.fail(f"accumulation depth {depth} is too large for exact integer accumulation")

    def exact_dtype(self, max_input: int, l1: int) -> np.dtype:
        """float32 or float64, whichever is exact for these bounds (see quantized_blocks)."""
        dtype = accumulation_dtype(max_input, l1)
        if dtype is None:
            raise self.fail(f"accumulations up to {max_input} * {l1} are too large to compute exactly")
        return dtype

    def weight_magnitude(self) -> int:
        """The largest ``|w - w_zp|`` a weight of this kernel can have (8-bit weights)."""
        return max(abs(-128 - self.w_zp), abs(255 - self.w_zp)) if self.w_zp else 128


def typed_offset(offset: np.ndarray, acc_dtype: np.dtype, acc_bound: int) -> np.ndarray:
    """The int64 per-channel offset in the accumulators' float dtype when adding it there is
    exact (``acc_bound + max|offset|`` at most ``2**24`` for float32, below ``2**53`` for
    float64), so that the requantizer adds it in place; else as it is (added in int64)."""
    bound = acc_bound + (int(np.abs(offset).max()) if offset.size else 0)
    if bound <= FLOAT32_EXACT or (acc_dtype == F64 and bound < FLOAT64_EXACT):
        return offset.astype(acc_dtype)
    return offset


def _weights_centered(kernel: QuantizedKernel, w: np.ndarray) -> np.ndarray:
    return np.subtract(w, kernel.w_zp, dtype=np.float64)


def _integer_centered(kernel: QuantizedKernel, w: np.ndarray) -> np.ndarray:
    return w.astype(np.int64) - kernel.w_zp


class _QuantizedWindowConv(ScratchUser, QuantizedKernel):
    """Shared prepare and eval of the integer CONV_2D and DEPTHWISE_CONV_2D (also driven by the
    hybrid kernels, which set ``input_magnitude``, ``pad_value`` and ``finish`` before ``plan``
    and then call ``run_blocks`` with centered inputs).

    Both run in blocks of output rows shared among threads (``parallel``), in float32 or
    float64 (``quantized_blocks.accumulation_dtype``) on the raw input values, padding filled
    with the zero point; ``finish`` turns each block's exact accumulators into outputs while
    they are in cache (for the integer kernels: ``offset`` = bias - zp * weight sums, then the
    requantizer).
    """

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

    channel_axis: int  # the filter's axis of output channels
    input_magnitude: int | None = None  # largest |input| the matmul sees (None: the dtype's raw range)
    pad_value: float | None = None  # what padding holds (None: the input zero point)
    finish = None  # the hybrid's (acc, out_rows, batch, slot) callback; None: requantize

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w, bias = input_weights_bias(ins)
        out = self.output_info()
        self.check_types(x, w, bias, out)
        _expect_rank(self, w, 4, "filter")
        # uint8: LiteRT's PopulateConvolutionQuantizationParams overwrites the per-channel
        # multiplier with the legacy one of the float32 scale product (measured: off by one
        # quantum on exact halves otherwise)
        self.set_requantization(x, w, out, w.shape[self.channel_axis], float_product=x.dtype == UINT8)
        shape = self.plan(x, w, bias)
        self.requantizer = self.make_requantizer(wrap=True)  # again: its rounding may depend on the plan (groups)
        self.offset = None
        if self.fast:
            self.row_pixels = shape[2]  # the requantizer works on whole output rows
            wrap = True if self.wide else self.needs_wrap(self.l1, bias)
            self.requantizer = self.make_requantizer(wrap).tiled(self.row_pixels)
            if w.value is not None and (bias is None or bias.value is not None):
                self.offset = self._offset(self.colsum, None if bias is None else bias.value)
        return [Spec(shape, x.dtype)]

    def _offset(self, colsum: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """Per channel: the bias less the input zero point times the centered weights' sum,
        repeated along an output row."""
        offset = -self.x_zp * colsum
        offset = offset if bias is None else offset + bias.astype(np.int64)
        return np.tile(typed_offset(offset, self.acc_dtype, self.max_input * self.l1), self.row_pixels)

    def fast_setup(self, x: TensorInfo) -> None:
        """Common prepare of the blocked path: the accumulation bound and padding value."""
        self.max_input = RAW_MAGNITUDE[x.dtype] if self.input_magnitude is None else self.input_magnitude
        self.fill = self.x_zp if self.pad_value is None else self.pad_value
        self.acc_dtype = self.exact_dtype(self.max_input, self.l1)

    def requant_buffers(self, rows: int, channels: int) -> list:
        return [] if self.finish is not None else self.requantizer.buffers(rows, channels)

    def plan(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None) -> tuple[int, ...]:
        """Checks shapes and lays out the geometry (and constant weights); the output shape."""
        raise NotImplementedError

    def accumulate(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The exact accumulators ``[n, oh, ow, out_c]`` (float64) of centered inputs ``x``
        (the grouped CONV_2D's path)."""
        raise NotImplementedError

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        if not self.fast:
            self.requantize(self.accumulate(self.centered(x), w), bias, out)
            return
        if self.offset is None or self.dynamic_weights:  # weights or bias computed at run time
            if self.dynamic_weights:
                self.load_weights(w)
            self.current_offset = self._offset(self.colsum, bias)
        else:
            self.current_offset = self.offset
        self.run_blocks(x, out)

    def block_finish(self, acc: np.ndarray, out_rows: np.ndarray, batch: int, slot: int) -> None:
        """Requantize one block: ``acc`` ``[pixels, out_c]`` exact accumulators of raw inputs."""
        work, tmp = self.bufs[slot]
        width = self.current_offset.shape[0]
        self.requantizer(acc.reshape(-1, width), self.current_offset, out_rows.reshape(-1, width), work, tmp)


# ----------------------------------------------------------------------------- CONV_2D


@register("CONV_2D", quantized=True)
class QuantizedConv2D(_QuantizedWindowConv):
    """Integer 2-D convolution: blocks of output rows, each one exact im2col matmul (of the
    input pixels directly for a 1x1 stride-1 convolution), requantized while in cache. A grouped
    convolution is one exact float64 im2col matmul per group."""

    channel_axis = 0

    def halves_up(self, channels: int) -> bool:
        """Every channel of an ungrouped int8 or uint8 convolution: LiteRT's builtin CONV_2D
        rounds their halves up (measured); its grouped one away from zero."""
        return self.in_dtype in (INT8, UINT8) and getattr(self, "groups", 1) == 1

    def plan(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None) -> tuple[int, ...]:
        self.groups = conv_groups(self, x, w, bias)
        n, h, wd, c = x.shape
        out_c, kh, kw, group_c = w.shape
        strides, dilations, (oh, ow), (top, bottom, left, right) = conv_window(self, (h, wd), (kh, kw))
        self.pads = ((0, 0), (top, bottom), (left, right), (0, 0))
        self.window = (n, oh, ow, kh, kw, c)
        self.steps = (strides[0], strides[1], dilations[0], dilations[1])
        self.depth = kh * kw * group_c
        self.fast = self.groups == 1
        if not self.fast:
            self.check_depth(self.depth)
            self.weights = None if w.value is None else self._matrix(w.value)
            return (n, oh, ow, out_c)
        self.dynamic_weights = w.value is None
        if w.value is not None:
            centered = _integer_centered(self, w.value).reshape(out_c, self.depth).T
            self.l1 = column_l1(centered)
        else:
            self.l1 = self.depth * self.weight_magnitude()
        self.fast_setup(x)
        if w.value is not None:
            self._load_centered(centered)
        self.pointwise = kh == kw == 1 and strides == (1, 1) and not any((top, bottom, left, right))
        specs = []
        if not self.pointwise:
            self.padded = PaddedInput(x.shape, (top, bottom, left, right), self.acc_dtype, value=self.fill, shared=True)
            if self.padded.needed:
                specs.append((self.padded.shape, self.acc_dtype))
        rows = n * oh * ow
        work = rows * self.depth * out_c
        self.threads = min(parallel.threads_for(self.node, work), max(1, rows // parallel.MIN_BLOCK_ROWS))
        self.run = parallel.runner(self.threads)
        parts = block_parts(self.threads)
        row_bytes = (self.depth + 3 * out_c) * 8  # im2col, accumulator and requantization rows
        parts = max(parts, -(-rows * row_bytes // BLOCK_BYTES))
        self.blocks = row_blocks(n, oh, min(parts, max(1, n * oh)))
        most = max((y1 - y0 for _, y0, y1 in self.blocks), default=0) * ow
        per_slot = [((most, self.depth if not self.pointwise else c), self.acc_dtype), ((most, out_c), self.acc_dtype)]
        per_slot += self.requant_buffers(most, out_c)
        self.per_slot = len(per_slot)
        self.want_scratch(specs + per_slot * self.threads)
        self.tasks = [partial(self._block, b, y0, y1) for b, y0, y1 in self.blocks]
        self.copies_of = None
        return (n, oh, ow, out_c)

    def _load_centered(self, centered: np.ndarray) -> None:
        """The ``[depth, out_c]`` integer weights (zero point taken out) as the matmul operand."""
        self.matrix = np.ascontiguousarray(centered, dtype=self.acc_dtype)
        self.colsum = centered.sum(axis=0)

    def load_weights(self, w: np.ndarray) -> None:
        self._load_centered(_integer_centered(self, w).reshape(w.shape[0], self.depth).T)

    def _attach(self) -> None:
        arrays = self.take_scratch()
        self.copies_of = None  # the im2col copies are made again over the new scratch
        if not self.pointwise and self.padded.needed:
            self.padded.attach(arrays.pop(0))
        k = self.per_slot
        slots = [arrays[i * k : (i + 1) * k] for i in range(self.threads)]
        self.cols = [s[0] for s in slots]
        self.accs = [s[1] for s in slots]
        self.bufs = [s[2:] for s in slots]

    def run_blocks(self, x: np.ndarray, out: np.ndarray) -> None:
        """Compute every block of ``out`` from ``x`` (raw integers, or the hybrid's centered values)."""
        if self.scratch_stale():
            self._attach()
        if self.pointwise:
            self.source = x.reshape(-1, x.shape[3])
        else:
            src = self.padded.fill(x)
            if self.copies_of is not src:  # each block's im2col copy by contiguous runs, per slot
                source = grouped_im2col(src, self.window, self.steps, 1)[0]
                self.copies = {(b, y0): im2col_copies(self.cols, source[b, y0:y1]) for b, y0, y1 in self.blocks}
                self.copies_of = src
        self.out_pixels = out.reshape(-1, out.shape[3])
        self.run(self.tasks)

    def _block(self, b: int, y0: int, y1: int, slot: int) -> None:
        n, oh, ow = self.window[:3]
        r0, r1 = (b * oh + y0) * ow, (b * oh + y1) * ow
        rows = r1 - r0
        if self.pointwise:
            lhs = self.source[r0:r1]
            if lhs.dtype != self.acc_dtype:
                lhs = np.copyto(self.cols[slot][:rows], lhs) or self.cols[slot][:rows]
        else:
            lhs, runs_dst, runs_src = self.copies[b, y0][slot]
            np.copyto(runs_dst, runs_src)
        acc = self.accs[slot][:rows]
        np.matmul(lhs, self.matrix, out=acc)
        (self.finish or self.block_finish)(acc, self.out_pixels[r0:r1], b, slot)

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
    The input is laid out once per invoke (``TapSource``: padded with the zero point, channels
    repeated ``m`` times), then blocks of output rows accumulate one multiply-add of a shifted
    view per filter tap and are requantized while in cache."""

    channel_axis = 3

    def halves_up(self, channels: int) -> bool | np.ndarray:
        """int8: the channels of whole 8-channel blocks (LiteRT's builtin DEPTHWISE_CONV_2D
        rescales them with its vector code, halves up); the rest as its scalar remainder loop,
        gemmlowp's halves away from zero. uint8: every channel away from zero (measured)."""
        return self.in_dtype == INT8 and np.arange(channels) < channels // 8 * 8

    def plan(self, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None) -> tuple[int, ...]:
        self.multiplier_c = depthwise_multiplier(self, x, w, bias)
        n, h, wd, _ = x.shape
        _, kh, kw, out_c = w.shape
        strides, dilations, (oh, ow), pads = conv_window(self, (h, wd), (kh, kw))
        self.taps = filter_taps(kh, kw)
        self.steps = (strides, dilations)
        self.out_shape = (n, oh, ow, out_c)
        self.fast = True
        self.dynamic_weights = w.value is None
        if w.value is not None:
            centered = _integer_centered(self, w.value)[0].reshape(kh * kw, out_c)
            self.l1 = column_l1(centered)
        else:
            self.l1 = kh * kw * self.weight_magnitude()
        self.fast_setup(x)
        self.source = TapSource(
            x.shape, pads, (oh, ow), strides, dilations, self.acc_dtype, self.fill, self.multiplier_c, shared=True
        )
        if w.value is not None:
            self._load_centered(centered)
        work = n * oh * ow * out_c * len(self.taps)
        self.threads = parallel.threads_for(self.node, work)
        self.run = parallel.runner(self.threads)
        parts = max(block_parts(self.threads), -(-n * oh * ow * out_c * 32 // BLOCK_BYTES))
        self.blocks = row_blocks(n, oh, min(parts, max(1, n * oh)))
        most = max((y1 - y0 for _, y0, y1 in self.blocks), default=0)
        per_slot = [((most, ow * out_c), self.acc_dtype), ((most, ow * out_c), self.acc_dtype)]
        per_slot += self.requant_buffers(most * ow, out_c)
        self.per_slot = len(per_slot)
        specs = [] if self.source.direct else [(self.source.plane_shape, self.acc_dtype)]
        self.want_scratch(specs + per_slot * self.threads)
        self.tasks = [partial(self._block, b, y0, y1) for b, y0, y1 in self.blocks]
        self.views_of = None
        return self.out_shape

    def _load_centered(self, centered: np.ndarray) -> None:
        """``[taps, out_c]`` integer weights: each tap's along an output row, and their sums."""
        ow = self.out_shape[2]
        self.tap_rows = [np.tile(row.astype(self.acc_dtype), ow) for row in centered]
        self.colsum = centered.sum(axis=0)
        self.views_of = None  # the einsum's stacked weights are made again from these rows

    def load_weights(self, w: np.ndarray) -> None:
        self._load_centered(_integer_centered(self, w)[0].reshape(-1, w.shape[3]))

    def _attach(self) -> None:
        arrays = self.take_scratch()
        if not self.source.direct:
            self.source.attach(arrays.pop(0))
        k = self.per_slot
        slots = [arrays[i * k : (i + 1) * k] for i in range(self.threads)]
        self.accs = [s[0] for s in slots]
        self.prods = [s[1] for s in slots]
        self.bufs = [s[2:] for s in slots]
        self.views_of = None

    def run_blocks(self, x: np.ndarray, out: np.ndarray) -> None:
        """Compute every block of ``out`` from ``x`` (raw integers, or the hybrid's centered values)."""
        if self.scratch_stale():
            self._attach()
        self.source.fill(x)
        if self.views_of is None or (self.source.direct and self.views_of is not x):
            self.views = [self.source.tap(ky, kx) for ky, kx in self.taps]
            self.views_of = x
            self.tap_planes = None
            if len(self.taps) > 1:  # one einsum per phase plane sums its taps (one pass, not two per tap)
                strides, dilations = self.steps
                self.tap_planes = plane_groups(self.views, self.taps, strides[1], dilations[1], self.tap_rows, {})
        self.out_pixels = out.reshape(-1, out.shape[3])
        self.run(self.tasks)

    def _block(self, b: int, y0: int, y1: int, slot: int) -> None:
        n, oh, ow, out_c = self.out_shape
        rows = y1 - y0
        acc = self.accs[slot][:rows]
        if self.tap_planes is not None:
            # Exact in any order of summation: every partial sum is an integer within the
            # accumulation dtype's exact range (prepare's bound), as with the passes below.
            for k, (view, weights) in enumerate(self.tap_planes):
                product = self.prods[slot][:rows] if k else acc
                np.einsum("hiyx,yxi->hi", view[b, y0:y1], weights, out=product)
                if k:
                    np.add(acc, product, out=acc)
        else:
            views, weights = self.views, self.tap_rows
            np.multiply(views[0][b, y0:y1], weights[0], out=acc)
            if len(views) > 1:
                product = self.prods[slot][:rows]
                for view, row in zip(views[1:], weights[1:]):
                    np.multiply(view[b, y0:y1], row, out=product)
                    np.add(acc, product, out=acc)
        r0 = (b * oh + y0) * ow
        (self.finish or self.block_finish)(acc.reshape(-1, out_c), self.out_pixels[r0 : r0 + rows * ow], b, slot)


# ----------------------------------------------------------------------------- TRANSPOSE_CONV


@register("TRANSPOSE_CONV", quantized=True)
class QuantizedTransposeConv(QuantizedKernel):
    """Integer transposed convolution, inputs (output_shape, weights, input[, bias]): one exact
    matmul to per-tap contributions, scattered with one strided add per tap (col2im)."""

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

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
class QuantizedFullyConnected(ScratchUser, QuantizedKernel):
    """Integer ``input @ weights.T + bias``, weights ``[units, depth]`` per channel or per tensor;
    the input is read as ``[size // depth, depth]``, the output keeps the input's leading
    dimensions under ``keep_num_dims``. One exact matmul of the raw inputs (float32 when the
    weights allow, see quantized_blocks), the zero point taken out with the bias."""

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

    requant_mode = "real"

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w, bias = input_weights_bias(ins)
        fully_connected_options(self)
        out = self.output_info()
        self.check_types(x, w, bias, out)
        self.depth, out_shape = fully_connected_shape(self, x, w, bias, whole_rows=True)
        self.check_depth(self.depth)
        self.set_requantization(x, w, out, w.shape[0])  # in double, per tensor too (see the top)
        units = w.shape[0]
        self.batch = x.size // self.depth if self.depth else 0
        self.dynamic_weights = w.value is None
        if w.value is not None:
            centered = _integer_centered(self, w.value)
            l1 = column_l1(centered.T)
        else:
            l1 = self.depth * self.weight_magnitude()
        self.acc_dtype = self.exact_dtype(RAW_MAGNITUDE[x.dtype], l1)
        self.x_dtype, self.l1 = x.dtype, l1
        if w.value is not None:
            self._load_centered(centered)
        self.offset = None
        if w.value is not None and (bias is None or bias.value is not None):
            self.offset = self._offset(None if bias is None else bias.value)
        self.run = parallel.runner(1)
        self.tasks = [self._compute]
        rows = max(self.batch, 0)
        operands = [((rows, self.depth), self.acc_dtype), ((rows, units), self.acc_dtype)]
        self.want_scratch(operands + self.requantizer.buffers(rows, units))
        return [Spec(out_shape, x.dtype)]

    def _load_centered(self, centered: np.ndarray) -> None:
        """``[units, depth]`` integer weights (zero point out) as the ``[depth, units]`` operand."""
        self.matrix = np.ascontiguousarray(centered.T, dtype=self.acc_dtype)
        self.colsum = centered.sum(axis=1)

    def _offset(self, bias: np.ndarray | None) -> np.ndarray:
        """Per unit: the bias less the input zero point times the centered weights' sum, float64
        (the requantizer works in double here)."""
        offset = -self.x_zp * self.colsum
        offset = offset if bias is None else offset + bias.astype(np.int64)
        return typed_offset(offset, self.acc_dtype, RAW_MAGNITUDE[self.x_dtype] * self.l1)

    def eval(self, ins, outs):
        x, w, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        if self.batch == 0 or self.depth == 0:  # nothing to multiply: the bias alone
            self.requantize(np.zeros((self.batch, out.size // max(self.batch, 1))), bias, out)
            return
        if self.dynamic_weights:
            self._load_centered(_integer_centered(self, w))
        if self.scratch_stale():
            self.lhs, self.acc, self.work, self.tmp = self.take_scratch()
        self.current_offset = self.offset if self.offset is not None else self._offset(bias)
        self.x, self.out = x, out
        self.run(self.tasks)

    def _compute(self, slot: int) -> None:
        np.copyto(self.lhs, self.x.reshape(self.batch, self.depth))
        np.matmul(self.lhs, self.matrix, out=self.acc)
        self.requantizer(self.acc, self.current_offset, self.out.reshape(self.acc.shape), self.work, self.tmp)


# ----------------------------------------------------------------------------- BATCH_MATMUL


@register("BATCH_MATMUL", quantized=True)
class QuantizedBatchMatMul(QuantizedKernel):
    """Integer batched ``lhs @ rhs`` (both per-tensor quantized, int8 or int16) with broadcast
    batch dimensions; ``adj_x`` / ``adj_y`` transpose either operand's last two dimensions.
    Centered operands in float32 when every partial sum is provably exact there, else float64."""

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
        depth = lhs.shape[-2] if self.adj_x else lhs.shape[-1]
        self.check_depth(depth)
        self.set_requantization(lhs, rhs, out, 1, float_product=True)
        low, high = dtype_range(rhs.dtype)
        rhs_deviation = max(abs(low - self.w_zp), abs(high - self.w_zp))
        self.acc_dtype = self.exact_dtype(self.input_deviation(), depth * rhs_deviation)
        return [Spec(shape, lhs.dtype)]

    def eval(self, ins, outs):
        lhs, rhs = ins
        a = np.subtract(lhs, self.x_zp, dtype=self.acc_dtype)
        b = np.subtract(rhs, self.w_zp, dtype=self.acc_dtype)
        if self.adj_x:
            a = a.swapaxes(-1, -2)
        if self.adj_y:
            b = b.swapaxes(-1, -2)
        self.requantize(np.matmul(a, b), None, outs[0])
