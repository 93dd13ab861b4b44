"""3-D convolutions: CONV_3D and CONV_3D_TRANSPOSE (float32, NDHWC).

Layouts follow TFLite (and TensorFlow, whose Conv3D filters are the same): CONV_3D filters
are ``[kd, kh, kw, in_c, out_c]``, CONV_3D_TRANSPOSE filters ``[kd, kh, kw, out_c, in_c]``.
Output sizes and SAME padding are the 2-D convolutions' (``conv.window_geometry``) along each
of the three spatial axes; both ops take an optional bias and a fused activation.

CONV_3D is one matmul of an im2col matrix (every filter tap's strided view of the padded
input, side by side) with the filter viewed as ``[taps * in_c, out_c]``. CONV_3D_TRANSPOSE is
one matmul to per-tap contributions, each added into a strided view of a full-size output,
whose padded border is then cut away.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, register, scratch
from numlite.kernels.clamp import clamp
from numlite.kernels.conv import window_geometry

FLOAT32 = np.dtype(np.float32)


class _Conv3DBase(Kernel):
    """Options shared by both ops: strides, dilations, padding and the fused activation."""

    def _options(self) -> None:
        o = self.options
        self.strides = tuple(int(getattr(o, f"stride_{a}", 1) or 1) for a in "dhw")
        self.dilations = tuple(int(getattr(o, f"dilation_{a}_factor", 1) or 1) for a in "dhw")
        self.padding = int(getattr(o, "padding", 0))
        self.activation = clamp(o)

    def _bias(self, bias: TensorInfo | None, channels: int) -> None:
        if bias is not None:
            self.expect_dtype(bias, np.float32)
            if bias.size != channels:
                raise self.fail(f"bias has {bias.size} values for {channels} output channels")

    def _finish(self, out: np.ndarray, bias: np.ndarray | None) -> None:
        if bias is not None:
            out += bias
        if self.activation is not None:
            self.activation(out)


@register("CONV_3D")
class Conv3D(_Conv3DBase):
    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        x, w = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        self.expect_dtype(x, np.float32)
        self.expect_dtype(w, np.float32)
        if x.ndim != 5 or w.ndim != 5:
            raise self.fail(f"input {x.shape} and filter {w.shape} must both have rank 5")
        if w.shape[3] != x.shape[4]:
            raise self.fail(f"the filter's {w.shape[3]} input channels differ from the input's {x.shape[4]}")
        self._bias(bias, w.shape[4])
        self._options()
        geometry = [window_geometry(self.padding, size, k, s, d)
                    for size, k, s, d in zip(x.shape[1:4], w.shape[:3], self.strides, self.dilations)]
        self.out_size = tuple(g[0] for g in geometry)
        self.pads = [(0, 0)] + [(g[1], g[2]) for g in geometry] + [(0, 0)]
        return [Spec((x.shape[0],) + self.out_size + (w.shape[4],), FLOAT32)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        x, w = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        padded = np.pad(x, self.pads)
        taps = []
        for offsets in itertools.product(*(range(k) for k in w.shape[:3])):
            window = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                           for o, d, n, s in zip(offsets, self.dilations, self.out_size, self.strides))
            taps.append(padded[(slice(None),) + window])
        columns = scratch(outs[0].shape[:4] + (len(taps), x.shape[4]), np.float32)
        for k, tap in enumerate(taps):
            columns[..., k, :] = tap
        out = outs[0]
        np.matmul(columns.reshape(-1, len(taps) * x.shape[4]), w.reshape(-1, w.shape[4]), out=out.reshape(-1, w.shape[4]))
        self._finish(out, bias)


@register("CONV_3D_TRANSPOSE")
class Conv3DTranspose(_Conv3DBase):
    """Inputs: the output shape (int32 [5]), the filter, the input and an optional bias. The
    padding is the one of the forward convolution from the output to the input, which must
    give the input's size back."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3, 4)
        shape, w, x = ins[0], ins[1], ins[2]
        bias = ins[3] if len(ins) > 3 else None
        self.expect_dtype(shape, np.int32)
        self.expect_dtype(x, np.float32)
        self.expect_dtype(w, np.float32)
        if shape.shape != (5,) or x.ndim != 5 or w.ndim != 5:
            raise self.fail(f"output shape {shape.shape}, input {x.shape} and filter {w.shape} must describe rank-5 tensors")
        if w.shape[4] != x.shape[4]:
            raise self.fail(f"the filter's {w.shape[4]} input channels differ from the input's {x.shape[4]}")
        self._bias(bias, w.shape[3])
        self._options()
        if shape.value is None:
            return [Spec(None, FLOAT32)]
        return [Spec(self._geometry(tuple(int(d) for d in shape.value), x.shape, w.shape), FLOAT32)]

    def _geometry(self, out: tuple[int, ...], x: tuple[int, ...], w: tuple[int, ...]) -> tuple[int, ...]:
        if out[0] != x[0] or out[4] != w[3]:
            raise self.fail(f"output shape {out} does not fit the input {x} and filter {w}")
        self.before = []
        for size, given, k, s, d in zip(out[1:4], x[1:4], w[:3], self.strides, self.dilations):
            computed, before, _ = window_geometry(self.padding, size, k, s, d)
            if computed != given:
                raise self.fail(f"an output of shape {out} would be convolved to {computed}, not the input's {given}")
            self.before.append(before)
        return out

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        shape, w, x = ins[0], ins[1], ins[2]
        bias = ins[3] if len(ins) > 3 else None
        if outs[0] is None:
            outs[0] = np.empty(self._geometry(tuple(int(d) for d in shape), x.shape, w.shape), np.float32)
        out = outs[0]
        kd, kh, kw, out_c, in_c = w.shape
        # Every tap's contribution at once: [N, D, H, W, taps, out_c].
        per_tap = (x.reshape(-1, in_c) @ w.reshape(-1, in_c).T).reshape(x.shape[:4] + (kd * kh * kw, out_c))
        full_size = [max((n - 1) * s + (k - 1) * d + 1, b + o)  # what the taps reach, or the crop
                     for n, s, k, d, b, o in zip(x.shape[1:4], self.strides, w.shape[:3], self.dilations, self.before,
                                                 out.shape[1:4])]
        full = scratch((x.shape[0], *full_size, out_c), np.float32, fill=0.0)
        for k, offsets in enumerate(itertools.product(range(kd), range(kh), range(kw))):
            window = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                           for o, d, n, s in zip(offsets, self.dilations, x.shape[1:4], self.strides))
            full[(slice(None),) + window] += per_tap[..., k, :]
        crop = tuple(slice(b, b + n) for b, n in zip(self.before, out.shape[1:4]))
        out[...] = full[(slice(None),) + crop]
        self._finish(out, bias)
