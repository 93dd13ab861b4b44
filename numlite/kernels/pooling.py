"""2-D pooling over NHWC float32 tensors: AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D.

Windows and SAME padding are those of the convolutions (``conv.window_geometry``). Padding
never takes part: MAX_POOL_2D pads with -inf, AVERAGE_POOL_2D pads with zeros and divides each
sum by the number of in-bounds pixels of its window, as LiteRT's reference kernel does.
A window's maximum (or sum) is the maximum over its rows of the maxima along them, so every
pool is reduced in two passes: first each output row's ``fh`` input rows into one row, whole
rows at a time (long contiguous runs), then that row's windows along it, ``fw`` strided views.
That is ``fh + fw - 2`` NumPy calls instead of one per tap, and fewer values touched
(ResNet50's 3x3/2 pool over 114x114x64: 310 -> 184 us). Windows that tile the input (filter
equal to stride, no padding: Keras' default 2x2 pooling) need no padded copy: plain reshapes of
the input are their rows and columns.
L2_POOL_2D is ``sqrt(mean of x²)`` over the in-bounds pixels of each window: an average pool of
the squared input followed by a square root, then the fused activation.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, register
from numlite.kernels.clamp import clamp
from numlite.kernels.conv import PaddedInput, output_window
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
    """Shared prepare and two-pass reduction of the pools; subclasses set the padding value,
    the ufunc combining two values, and what happens after the last one. The padded input
    and the rows' partial results are working memory (the interpreter's scratchpad)."""

    pad_value: float = 0.0
    ufunc: np.ufunc  # combines two values of a window

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 1)
        (x,) = ins
        if x.dtype != FLOAT:
            raise self.fail(f"input {x.name!r} has dtype {x.dtype.name}; only float32 is supported")
        pads, strides, self.geometry = pool_window(self, x)
        n, _, _, c = x.shape
        oh, ow = self.geometry[2:4]
        fh, fw = self.geometry[6:8]
        self.activation = clamp(self.options)
        self.tiled = (fh, fw) == strides and not any(pads) and fh * fw > 1
        self.bound: tuple | None = None
        if self.tiled:  # rows first into scratch (when columns follow), then columns
            self.want_scratch([((n, oh, ow * fw * c), FLOAT)] if fh > 1 and fw > 1 else [])
            return [Spec((n, oh, ow, c), FLOAT)]
        self.padded = PaddedInput(x.shape, pads, FLOAT, self.pad_value, shared=True)
        self.width = (ow - 1) * strides[1] + fw  # the padded columns that windows cover
        rows = [((n, oh, self.width, c), FLOAT)] if fh > 1 and fw > 1 else []  # the rows pass's result
        self.want_scratch(([(self.padded.shape, FLOAT)] if self.padded.needed else []) + rows)
        return [Spec((n, oh, ow, c), FLOAT)]

    def finish(self, acc: np.ndarray) -> None:
        pass

    def _reduce(self, views: list[np.ndarray], out: np.ndarray) -> list[Callable[[], None]]:
        """The calls that make ``out`` the ufunc over ``views`` (at least one)."""
        combine = type(self).ufunc
        if len(views) == 1:
            return [partial(np.copyto, out, views[0])]
        return [partial(combine, views[0], views[1], out=out)] + [partial(combine, out, view, out=out) for view in views[2:]]

    def _tiled_calls(self, x: np.ndarray, out: np.ndarray) -> list[Callable[[], None]]:
        n, oh, ow, c = out.shape
        fh, fw = self.geometry[6:8]
        rows = x[:, : oh * fh, : ow * fw].reshape(n, oh, fh, ow * fw * c)
        if fw == 1:
            acc = out.reshape(n, oh, ow * c)
        elif fh == 1:
            acc = rows[:, :, 0]
        else:
            acc = self.take_scratch()[0]
        calls = self._reduce([rows[:, :, j] for j in range(fh)], acc) if fh > 1 else []
        if fw > 1:
            cols = acc.reshape(n, oh, ow, fw * c)
            calls += self._reduce([cols[..., j * c : (j + 1) * c] for j in range(fw)], out)
        return calls

    def _separable_calls(self, x: np.ndarray, out: np.ndarray) -> list[Callable[[], None]]:
        """Rows pass: each output row's ``fh`` padded input rows into one (all columns).
        Columns pass: the ``fw`` values of each window along that row."""
        _, _, oh, ow, _, _, fh, fw, (sh, sw) = self.geometry
        arrays = self.take_scratch()
        if self.padded.needed:
            self.padded.attach(arrays.pop(0))
        src = self.padded.buffer if self.padded.needed else x
        rows = [src[:, ky : ky + (oh - 1) * sh + 1 : sh, : self.width] for ky in range(fh)]  # [N, OH, width, C]
        if fw == 1:  # no columns pass: the rows pass reads the windows' columns only
            return self._reduce([r[:, :, : (ow - 1) * sw + 1 : sw] for r in rows], out)
        if fh == 1:
            acc, calls = rows[0], []
        else:
            acc = arrays[0]
            calls = self._reduce(rows, acc)
        return calls + self._reduce([acc[:, :, kx : kx + (ow - 1) * sw + 1 : sw] for kx in range(fw)], out)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if out.size == 0:
            return
        if self.scratch_stale() or self.bound is None or self.bound[0] is not x or self.bound[1] is not out:
            # The passes' calls on views of these arrays, made again only when they change
            # (building the views took a small pool's time again: 32x32x16 2x2 10.6 -> 6.9 us).
            self.calls = self._tiled_calls(x, out) if self.tiled else self._separable_calls(x, out)
            self.bound = (x, out)
        if not self.tiled:
            self.padded.fill(x)
        for call in self.calls:
            call()
        n, oh, ow, c = out.shape
        self.finish(out.reshape(n, oh, ow * c))
        if self.activation is not None:
            self.activation(out)


@register("MAX_POOL_2D")
class MaxPool2D(Pool2D):
    pad_value = -np.inf
    ufunc = np.maximum


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
