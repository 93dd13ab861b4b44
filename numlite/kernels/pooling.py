"""2-D pooling over NHWC float32 tensors: AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D.

Windows and SAME padding are those of the convolutions (``conv.window_geometry``). Padding
never takes part: MAX_POOL_2D pads with -inf, AVERAGE_POOL_2D pads with zeros and divides each
sum by the number of in-bounds pixels of its window, as LiteRT's reference kernel does. Both
loop over the window's taps only, reducing one strided view of the input per tap; windows that
tile the input (filter equal to stride, no padding: Keras' default 2x2 pooling) are reduced
first along their rows, then along their columns, in fewer and longer NumPy calls.
L2_POOL_2D is ``sqrt(mean of x²)`` over the in-bounds pixels of each window: an average pool of
the squared input followed by a square root, then the fused activation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, register
from numlite.kernels.clamp import clamp
from numlite.kernels.conv import TapSource, filter_taps, output_window
from numlite.kernels.scratchpad import ScratchUser

FLOAT = np.dtype(np.float32)


def _valid_counts(size: int, out: int, pad: int, filter_size: int, stride: int) -> np.ndarray:
    """How many pixels of each output's window lie inside the input, along one axis."""
    origin = np.arange(out) * stride - pad
    return np.minimum(filter_size, size - origin) - np.maximum(0, -origin)


def window_counts(geometry: tuple) -> np.ndarray:
    """``[OH, OW]``: how many input pixels each output's window covers (``geometry`` as
    ``pool_window`` returns it)."""
    h, w, oh, ow, top, left, fh, fw, strides = geometry
    return np.multiply.outer(_valid_counts(h, oh, top, fh, strides[0]), _valid_counts(w, ow, left, fw, strides[1]))


def pool_window(kernel: Kernel, x: TensorInfo) -> tuple[tuple[int, int, int, int], tuple[int, int], tuple]:
    """Checks a pool's rank-4 input and options; ``(pads, strides, geometry)`` with
    ``geometry = (h, w, oh, ow, top, left, fh, fw, strides)``. List the window's taps only once
    the padded source exists: building it rejects an absurd window (a malformed model) first."""
    if x.ndim != 4:
        raise kernel.fail(f"input must have rank 4, got shape {x.shape}")
    opts = kernel.options
    if opts is None:
        raise kernel.fail("missing options")
    _, h, w, _ = x.shape
    fh, fw = int(opts.filter_height), int(opts.filter_width)
    strides = (int(opts.stride_h), int(opts.stride_w))
    if min(strides) <= 0 or min(fh, fw) <= 0:
        raise kernel.fail(f"strides {strides} and window ({fh}, {fw}) must be positive")
    (oh, ow), pads = output_window(opts.padding, (h, w), (fh, fw), strides)
    return pads, strides, (h, w, oh, ow, pads[0], pads[2], fh, fw, strides)


class Pool2D(ScratchUser, Kernel):
    """Shared prepare and tap loop of the pools; subclasses set the padding value, the
    reduction of one tap into the accumulator, and what happens after the last tap. A padded
    or strided input is laid out in the interpreter's scratchpad."""

    pad_value: float = 0.0
    ufunc: np.ufunc  # combines two taps

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 1)
        (x,) = ins
        if x.dtype != FLOAT:
            raise self.fail(f"input {x.name!r} has dtype {x.dtype.name}; only float32 is supported")
        pads, strides, self.geometry = pool_window(self, x)
        oh, ow = self.geometry[2:4]
        fh, fw = self.geometry[6:8]
        self.activation = clamp(self.options)
        self.tiled = (fh, fw) == strides and not any(pads) and fh * fw > 1
        if self.tiled:  # rows first into scratch (when columns follow), then columns
            n, _, _, c = x.shape
            self.want_scratch([((n, oh, ow * fw * c), FLOAT)] if fh > 1 and fw > 1 else [])
            self.rows_sum: np.ndarray | None = None
            return [Spec((n, oh, ow, c), FLOAT)]
        self.source = TapSource(x.shape, pads, (oh, ow), strides, (1, 1), FLOAT, self.pad_value, shared=True)
        self.want_scratch([] if self.source.direct else [(self.source.plane_shape, FLOAT)])
        self.taps = filter_taps(*self.geometry[6:8])
        return [Spec((x.shape[0], oh, ow, x.shape[3]), FLOAT)]

    @staticmethod
    def reduce(acc: np.ndarray, view: np.ndarray) -> None:
        raise NotImplementedError

    def finish(self, acc: np.ndarray) -> None:
        pass

    def _eval_tiled(self, x: np.ndarray, out: np.ndarray) -> None:
        n, oh, ow, c = out.shape
        fh, fw = self.geometry[6:8]
        combine = type(self).ufunc
        rows = x[:, : oh * fh, : ow * fw].reshape(n, oh, fh, ow * fw * c)
        if fw == 1:
            acc = out.reshape(n, oh, ow * c)
        elif fh == 1:
            acc = rows[:, :, 0]
        else:
            if self.scratch_stale():
                self.rows_sum = self.take_scratch()[0]
            acc = self.rows_sum
        if fh > 1:
            combine(rows[:, :, 0], rows[:, :, 1], out=acc)
            for j in range(2, fh):
                combine(acc, rows[:, :, j], out=acc)
        if fw > 1:
            cols = acc.reshape(n, oh, ow, fw * c)
            combine(cols[..., :c], cols[..., c : 2 * c], out=out)
            for j in range(2, fw):
                combine(out, cols[..., j * c : (j + 1) * c], out=out)
        self.finish(out.reshape(n, oh, ow * c))
        if self.activation is not None:
            self.activation(out)

    def eval(self, ins, outs):
        out = outs[0]
        if out.size == 0:
            return
        if self.tiled:
            return self._eval_tiled(ins[0], out)
        if self.scratch_stale():
            self.source.attach(self.take_scratch()[0])
        self.source.fill(ins[0])
        acc = out.reshape(self.source.row_shape)
        for i, (ky, kx) in enumerate(self.taps):
            if i == 0:
                np.copyto(acc, self.source.tap(ky, kx))
            else:
                type(self).reduce(acc, self.source.tap(ky, kx))
        self.finish(acc)
        if self.activation is not None:
            self.activation(out)


@register("MAX_POOL_2D")
class MaxPool2D(Pool2D):
    pad_value = -np.inf
    ufunc = np.maximum

    @staticmethod
    def reduce(acc, view):
        np.maximum(acc, view, out=acc)


@register("AVERAGE_POOL_2D")
class AveragePool2D(Pool2D):
    pad_value = 0.0
    ufunc = np.add

    def prepare(self, ins):
        specs = super().prepare(ins)
        counts = window_counts(self.geometry)
        if counts.size and (counts == counts.flat[0]).all():
            self.counts = np.float32(counts.flat[0])  # no window is clipped: one divisor
        else:  # one divisor per output pixel, repeated along the channels of each row
            self.counts = np.repeat(counts.astype(np.float32), ins[0].shape[3], axis=1)
        return specs

    @staticmethod
    def reduce(acc, view):
        np.add(acc, view, out=acc)

    def finish(self, acc):
        np.divide(acc, self.counts, out=acc)


@register("L2_POOL_2D")
class L2Pool2D(AveragePool2D):
    """The root mean square of each window (padding excluded from the count, as in LiteRT)."""

    def prepare(self, ins):
        specs = super().prepare(ins)
        self.squared = np.empty(ins[0].shape, FLOAT)
        return specs

    def eval(self, ins, outs):
        with np.errstate(over="ignore"):  # |x| > 1.8e19 squares to inf, as in float32 C++
            np.multiply(ins[0], ins[0], out=self.squared)
        super().eval([self.squared], outs)

    def finish(self, acc):
        super().finish(acc)
        np.sqrt(acc, out=acc)
