"""TRANSPOSE_CONV and MediaPipe's Convolution2DTransposeBias custom op on float32 NHWC (the NumPy
kernels are in :mod:`numlite.kernels.conv` and :mod:`numlite.kernels.mediapipe`; the compiled
CONV_2D family module belongs to the tiled convolutions, so the transposed ones have their own).

Both are one inlined kernel, :func:`transpose_conv`: each output pixel starts at 0 and adds,
tap by tap (``ky`` then ``kx``, the NumPy kernels' order of taps), the contribution of the
input pixel that tap carries there (its input channels in order, each times a row of the
weights along the output channels), then the bias, then the fused clamp. An input pixel ``(y, x)`` reaches output pixel
``(y * stride_h + ky - top, x * stride_w + kx - left)``; ``top, left`` are LiteRT's padding
for TRANSPOSE_CONV (computed as if the output were a forward convolution's input) and
MediaPipe's cut of the full output for the custom op. Gathering (each output pixel reads its
taps) instead of scattering keeps every output's sum in that order and writes it once. The
weights (``[out_c, kh, kw, in_c]``) are packed as ``[kh, kw, in_c, out_c]``: once at
generation when constant, at each run when from data. A requested output shape from data (an
output of run-time shape) stays on NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.binary import activation_range
from numlite.jit.kernels.common import clip, kernel, require

F32 = np.dtype(np.float32)


@kernel
def pack_weights(wt, packed, oc, kh, kw, ic):
    """Weights ``[oc, kh, kw, ic]`` as ``[kh, kw, ic, oc]`` (weights from data, at each run)."""
    for c in range(oc):
        for t in range(kh * kw):
            for i in range(ic):
                packed[(t * ic + i) * oc + c] = wt[(c * kh * kw + t) * ic + i]


@kernel
def add_tap(row, x, s, w, t, ic, oc):
    """``row`` (``oc`` outputs) plus the ``ic`` input values ``x[s:]`` times their rows of
    ``oc`` weights from ``w[t * oc:]``, in input-channel order (the inner loop along the
    output channels, contiguous, which LLVM vectorizes). Shared by CONV_3D (``conv3d.py``)."""
    for i in range(ic):
        v = x[s + i]
        block = w[(t + i) * oc : (t + i + 1) * oc]
        for c in range(oc):
            row[c] += v * block[c]


@kernel
def finish_row(row, bias, oc, has_bias, act, low, high):
    """The bias and the fused clamp on an output's ``oc`` sums, in place."""
    for c in range(oc):
        u = row[c] + bias[c] if has_bias else row[c]
        row[c] = clip(u, low, high) if act else u


@kernel
def transpose_conv(x, wp, bias, o, n, h, w, ic, oh, ow, oc, kh, kw, sh, sw, top, left, has_bias, act, low, high):
    """Each output pixel's ``oc`` channels: 0, plus for each tap (``ky`` then ``kx``) that
    carries an input pixel there, that pixel's ``ic`` values times the tap's ``[ic, oc]``
    block of the packed weights ``wp`` (``[kh, kw, ic, oc]``), in input-channel order; then
    the bias and the clamp. The inner loop runs along the output channels (contiguous in ``o``
    and ``wp``), which LLVM vectorizes; each output is still a sum in a fixed order."""
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                q = ((b * oh + oy) * ow + ox) * oc
                row = o[q : q + oc]
                for c in range(oc):
                    row[c] = 0
                for ky in range(kh):
                    yy = oy + top - ky
                    if yy < 0 or yy % sh != 0 or yy // sh >= h:
                        continue
                    for kx in range(kw):
                        xx = ox + left - kx
                        if xx < 0 or xx % sw != 0 or xx // sw >= w:
                            continue
                        add_tap(row, x, ((b * h + yy // sh) * w + xx // sw) * ic, wp, (ky * kw + kx) * ic, ic, oc)
                finish_row(row, bias, oc, has_bias, act, low, high)


def _emit(g: Any, x: Any, wt: Any, bias: Any, out: Any, strides: tuple[int, int], top_left: tuple[int, int],
          clamp_to: tuple[float, float] | None) -> None:
    n, h, w, ic = x.shape
    _, oh, ow, oc = out.shape
    _, kh, kw, _ = wt.shape
    if wt.value is not None:  # packed once, at generation
        packed = g.const(np.ascontiguousarray(np.asarray(wt.value, np.float32).transpose(1, 2, 3, 0)).reshape(-1))
    else:
        packed = g.temp((wt.size,), F32).name
        g.line(f"{g.kernel(pack_weights)}({wt.name}, {packed}, {oc}, {kh}, {kw}, {ic})")
    low, high = (f"np.float32({float(v)!r})" if np.isfinite(v) else "np.float32(np.inf)" for v in (clamp_to or (0.0, 0.0)))
    bias_name = bias.name if bias is not None else packed  # not read without a bias
    g.line(f"{g.kernel(transpose_conv)}({x.name}, {packed}, {bias_name}, {out.name}, {n}, {h}, {w}, {ic}, {oh}, {ow}, {oc}, "
           f"{kh}, {kw}, {strides[0]}, {strides[1]}, {top_left[0]}, {top_left[1]}, {int(bias is not None)}, "
           f"{int(clamp_to is not None)}, {low}, {high})")


def _float32_rank4(node: Any, *operands: Any) -> None:
    require(all(t.dtype == F32 for t in operands if t is not None), f"{node.op_name} on {', '.join(t.dtype.name for t in operands if t is not None)} is not compiled")
    require(all(len(t.shape) == 4 for t in operands[:2]) and not any(t.dynamic for t in operands if t is not None),
            f"{node.op_name} of these shapes is not compiled")


@emits("TRANSPOSE_CONV")
def emit_transpose_conv(node: Any, g: Any) -> None:
    """TRANSPOSE_CONV (output shape, weights, input[, bias]) with the NumPy kernel's geometry."""
    from numlite.kernels.conv import transpose_conv_canvas

    _, wt, x, *rest = node.ins
    bias = rest[0] if rest else None
    (out,) = node.outs
    _float32_rank4(node, x, wt, bias, out)
    if out.size == 0:
        return
    opts = node.options
    require(opts is not None, "TRANSPOSE_CONV without options is not compiled")
    strides = (int(opts.stride_h), int(opts.stride_w))
    _, top_left = transpose_conv_canvas(opts.padding, x.shape[1:3], wt.shape[1:3], strides, out.shape[1:3])
    _emit(g, x, wt, bias, out, strides, top_left, activation_range(node, out))


@emits("Convolution2DTransposeBias")
def emit_transpose_conv_bias(node: Any, g: Any) -> None:
    """MediaPipe's custom op (input, weights, bias; no activation), with the strides and the
    cut the NumPy kernel read from its options. A kernel of the caller's ``custom_ops`` stays
    on NumPy."""
    from numlite.kernels.mediapipe import Convolution2DTransposeBias

    require(type(node.kernel) is Convolution2DTransposeBias, "a custom_ops kernel of Convolution2DTransposeBias is not compiled")
    x, wt, bias = node.ins
    (out,) = node.outs
    _float32_rank4(node, x, wt, bias, out)
    if out.size == 0:
        return
    _emit(g, x, wt, bias, out, node.kernel.strides, node.kernel.offsets, None)
