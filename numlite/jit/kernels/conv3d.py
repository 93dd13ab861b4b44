"""CONV_3D and CONV_3D_TRANSPOSE on float32 NDHWC (the NumPy kernels are in
:mod:`numlite.kernels.conv3d`, whose geometry, SAME/VALID padding, strides and dilations per
spatial axis, these read from the prepared kernel).

Both gather: each output voxel's ``out_c`` channels start at 0 and add, tap by tap (``kd``,
``kh``, ``kw`` in order), the input voxel that tap reads there, its input channels in order,
each times a row of the weights along the output channels (contiguous, so LLVM vectorizes the
inner loop); then the bias and the fused clamp. CONV_3D's filter ``[kd, kh, kw, in_c, out_c]``
is already in that layout; CONV_3D_TRANSPOSE's ``[kd, kh, kw, out_c, in_c]`` is packed once
at generation (a filter from data stays on NumPy). A transposed convolution's output voxel
``p`` reads input voxel ``i`` through tap ``k`` where ``i * stride + k * dilation = p +
before`` along each axis."""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.binary import activation_range
from numlite.jit.kernels.common import kernel, require
from numlite.jit.kernels.transpose_conv import add_tap, finish_row

F32 = np.dtype(np.float32)
# The geometry array's entries: the input, output and filter sizes, strides, dilations, and the
# padding before each spatial axis.
N, D, H, W, C, OD, OH, OW, OC, KD, KH, KW, SD, SH, SW, DD, DH, DW, PD, PH, PW = range(21)


@kernel
def _tap(p, o, k, axis_in, axis_stride, axis_dilation, axis_pad, transposed):
    """The input coordinate tap ``k`` reads for output coordinate ``o`` along one axis, or -1."""
    if not transposed:
        i = o * p[axis_stride] + k * p[axis_dilation] - p[axis_pad]
        return i if 0 <= i < p[axis_in] else -1
    j = o + p[axis_pad] - k * p[axis_dilation]
    if j < 0 or j % p[axis_stride] != 0 or j // p[axis_stride] >= p[axis_in]:
        return -1
    return j // p[axis_stride]


@kernel
def conv3d(x, w, bias, o, p, transposed, has_bias, act, low, high):
    """The whole convolution (see the module's docstring); ``w`` is ``[kd, kh, kw, in_c,
    out_c]``, ``p`` the geometry."""
    c_in, c_out = p[C], p[OC]
    for b in range(p[N]):
        for od in range(p[OD]):
            for oh in range(p[OH]):
                for ow in range(p[OW]):
                    q = (((b * p[OD] + od) * p[OH] + oh) * p[OW] + ow) * c_out
                    row = o[q : q + c_out]
                    for c in range(c_out):
                        row[c] = 0
                    for kd in range(p[KD]):
                        z = _tap(p, od, kd, D, SD, DD, PD, transposed)
                        if z < 0:
                            continue
                        for kh in range(p[KH]):
                            y = _tap(p, oh, kh, H, SH, DH, PH, transposed)
                            if y < 0:
                                continue
                            for kw in range(p[KW]):
                                xx = _tap(p, ow, kw, W, SW, DW, PW, transposed)
                                if xx < 0:
                                    continue
                                s = (((b * p[D] + z) * p[H] + y) * p[W] + xx) * c_in
                                t = ((kd * p[KH] + kh) * p[KW] + kw) * c_in
                                add_tap(row, x, s, w, t, c_in, c_out)
                    finish_row(row, bias, c_out, has_bias, act, low, high)


def _emit(node: Any, g: Any, x: Any, weights: np.ndarray | str, bias: Any, out: Any, kernel_size: tuple, before: list[int],
          transposed: bool) -> None:
    k = node.kernel
    geometry = np.array([*x.shape, *out.shape[1:], *kernel_size, *k.strides, *k.dilations, *before], np.int64)
    clamp_to = activation_range(node, out)
    low, high = (f"np.float32({float(v)!r})" if np.isfinite(v) else "np.float32(np.inf)" for v in (clamp_to or (0.0, 0.0)))
    w = weights if isinstance(weights, str) else g.const(weights)
    bias_name = bias.name if bias is not None else w  # not read without a bias
    g.line(f"{g.kernel(conv3d)}({x.name}, {w}, {bias_name}, {out.name}, {g.const(geometry)}, {int(transposed)}, "
           f"{int(bias is not None)}, {int(clamp_to is not None)}, {low}, {high})")


def _float32(node: Any, *operands: Any) -> None:
    require(all(t.dtype == F32 for t in operands if t is not None),
            f"{node.op_name} on {', '.join(t.dtype.name for t in operands if t is not None)} is not compiled")


@emits("CONV_3D")
def emit_conv3d(node: Any, g: Any) -> None:
    """Filter constant or from data (read as stored), bias optional."""
    x, w = node.ins[0], node.ins[1]
    bias = node.ins[2] if len(node.ins) > 2 else None
    (out,) = node.outs
    _float32(node, x, w, bias, out)
    if out.size == 0:
        return
    before = [before for before, _ in node.kernel.pads[1:4]]
    _emit(node, g, x, w.name, bias, out, w.shape[:3], before, False)


@emits("CONV_3D_TRANSPOSE")
def emit_conv3d_transpose(node: Any, g: Any) -> None:
    """A constant output shape (else a run-time shape: NumPy) and a constant filter."""
    _, w, x = node.ins[:3]
    bias = node.ins[3] if len(node.ins) > 3 else None
    (out,) = node.outs
    _float32(node, x, w, bias, out)
    require(w.value is not None, "CONV_3D_TRANSPOSE with a filter from data is not compiled")
    if out.size == 0:
        return
    packed = np.ascontiguousarray(np.asarray(w.value, np.float32).transpose(0, 1, 2, 4, 3))  # [kd, kh, kw, in_c, out_c]
    _emit(node, g, x, packed, bias, out, w.shape[:3], list(node.kernel.before), True)
