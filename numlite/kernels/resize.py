"""Image resizing of NHWC tensors: RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR.

The second input is an int32 tensor ``[new_height, new_width]``. Source coordinates follow
LiteRT exactly, computed in float32: ``scale = in / out`` (``(in - 1) / (out - 1)`` with
``align_corners``), ``src = dst * scale`` or, with ``half_pixel_centers``,
``(dst + 0.5) * scale - 0.5`` for bilinear and ``(dst + 0.5) * scale`` for nearest neighbor.
Nearest neighbor floors the source coordinate (rounds half away from zero with
``align_corners``) and clamps it to the image.

Float bilinear resizing is separable: each output row is first interpolated between its two
source rows (whole rows at a time), then each output pixel between its two source columns of
that row, ``a + (b - a) * t`` both times (the form of XNNPACK's kernel, LiteRT's default).
It runs in blocks of output rows whose working memory stays small and in cache (ten NumPy
calls a block). Integer images: uint8 bilinear interpolates in float32 with LiteRT's reference
products and rounds half up; int8 and int16 use LiteRT's 10-bit fixed-point interpolation.
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, register
from numlite.kernels.scratchpad import ScratchUser

FLOAT = np.dtype(np.float32)
# Working memory of one block of output rows of a float bilinear resize (its two rows passes and
# its columns product): blocks of about this size keep the passes in cache without many calls.
BLOCK_BYTES = 1 << 20


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


class Resize(Kernel):
    """Shared prepare: a 4-D image, a constant or run-time size, output [N, h, w, C]."""

    dtypes: tuple = (np.float32, np.uint8, np.int8, np.int16)

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, size = ins
        self.expect_dtype(x, *self.dtypes)
        self.expect_dtype(size, np.int32)
        if x.ndim != 4:
            raise self.fail(f"input must be 4-D (NHWC), it has rank {x.ndim}")
        if size.ndim != 1 or size.size != 2:
            raise self.fail(f"size must be a 1-D tensor of 2 elements, it has shape {size.shape}")
        self.align_corners = bool(getattr(self.options, "align_corners", False))
        self.half_pixel_centers = bool(getattr(self.options, "half_pixel_centers", False))
        if size.value is None:
            return [Spec(None, x.dtype)]  # the output shape depends on the size values
        out_h, out_w = (int(v) for v in size.value.reshape(-1))
        if out_h <= 0 or out_w <= 0:
            raise self.fail(f"output size must be positive, got {out_h}x{out_w}")
        self.plan(x.shape[1], x.shape[2], out_h, out_w, x.dtype)
        return [Spec((x.shape[0], out_h, out_w, x.shape[3]), x.dtype)]

    def plan(self, in_h: int, in_w: int, out_h: int, out_w: int, dtype: np.dtype) -> None:
        raise NotImplementedError


@register("RESIZE_NEAREST_NEIGHBOR")
class ResizeNearestNeighbor(Resize):
    # LiteRT copies float32 elements as int32 bits, so int32 images work too; int64 does not.
    dtypes = (np.float32, np.uint8, np.int8, np.int16, np.int32)

    def source_index(self, in_size: int, out_size: int) -> np.ndarray:
        scale = _scale(in_size, out_size, self.align_corners)
        offset = np.float32(0.5 if self.half_pixel_centers else 0.0)
        pos = (np.arange(out_size, dtype=np.float32) + offset) * scale  # float32, as LiteRT
        exact = pos.astype(np.float64)
        if self.align_corners:  # std::round: half away from zero (pos is never negative)
            idx = np.floor(exact + 0.5)
        else:
            idx = np.floor(exact)
        idx = np.minimum(idx.astype(np.int64), in_size - 1)
        if self.half_pixel_centers:
            idx = np.maximum(idx, 0)
        return idx

    def plan(self, in_h, in_w, out_h, out_w, dtype):
        self.rows, self.cols = self.source_index(in_h, out_h), self.source_index(in_w, out_w)
        # each output pixel's source pixel in the image's [H * W] pixels: one gather of whole
        # pixels, no intermediate (56x56x64 -> 112x112: 197 -> 43 us; LiteRT 122)
        self.pixels = (self.rows[:, None] * in_w + self.cols[None, :]).reshape(-1)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        n, h, w, c = x.shape
        if out.size == 0:
            return
        if not out.flags.c_contiguous:  # (the flat view below must be the output itself)
            np.take(x[:, self.rows], self.cols, axis=2, out=out)
            return
        np.take(x.reshape(n, h * w, c), self.pixels, 1, out.reshape(n, -1, c), "clip")


@register("RESIZE_BILINEAR")
class ResizeBilinear(ScratchUser, Resize):
    def prepare(self, ins):
        self.blocks: list[tuple[int, int, int]] = []
        specs = super().prepare(ins)
        # LiteRT's kernel refuses the combination (only its XNNPACK delegate runs float ones).
        if self.align_corners and self.half_pixel_centers:
            raise self.fail("if half_pixel_centers is True, align_corners must be False")
        shape = specs[0].shape
        if shape is not None and specs[0].dtype == FLOAT:  # blocks of output rows, per image
            n, out_h, out_w, c = shape
            w = ins[0].shape[2]
            per_row = (2 * w + out_w) * c * FLOAT.itemsize
            rows = max(1, min(out_h, BLOCK_BYTES // max(per_row, 1)))
            self.blocks = [(b, r, min(r + rows, out_h)) for b in range(n) for r in range(0, out_h, rows)]
            self.want_scratch([((rows, w, c), FLOAT), ((rows, w, c), FLOAT), ((rows, out_w * c), FLOAT)])
            # The columns pass reads each pixel's left source and the difference to the next
            # column (one subtraction over the narrower rows, not over the output); where both
            # sources are one column (clamped at an edge) the weight is 0. Each weight is
            # repeated along its pixel's channels: a multiply along whole rows (twice as fast
            # as broadcasting one weight per pixel).
            x0, x1, dx = self.cols
            self.difference_columns = np.minimum(x0, max(w - 2, 0))
            self.column_weights = np.repeat(np.where(x1 > x0, dx[:, 0], np.float32(0)), c)
        else:
            self.want_scratch([])
        return specs

    def interpolation(self, in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lower and upper source indices and the float32 source coordinate of each output."""
        scale = _scale(in_size, out_size, self.align_corners)
        dst = np.arange(out_size, dtype=np.float32)
        if self.half_pixel_centers:
            src = (dst + np.float32(0.5)) * scale - np.float32(0.5)
        else:
            src = dst * scale
        lower = np.maximum(np.floor(src).astype(np.int64), 0)
        upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
        return lower, upper, src

    def interpolation_fixed(self, in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The same in LiteRT's 10-bit fixed point (int8/int16 kernels)."""
        if self.align_corners and out_size > 1:
            scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
        else:
            scale = ((1 << 10) * in_size + out_size // 2) // out_size
        dst = np.arange(out_size, dtype=np.int64)
        if self.half_pixel_centers:
            src = dst * scale + scale // 2 - (1 << 9)
        else:
            src = dst * scale
        # C++ division truncates toward zero; src can be slightly negative with half pixels.
        lower = np.maximum(np.trunc(src / (1 << 10)).astype(np.int64), 0)
        upper = np.minimum(np.trunc((src + (1 << 10) - 1) / (1 << 10)).astype(np.int64), in_size - 1)
        return lower, upper, src

    def plan(self, in_h, in_w, out_h, out_w, dtype):
        self.fixed_point = dtype in (np.int8, np.int16)
        if self.fixed_point:
            y0, y1, ys = self.interpolation_fixed(in_h, out_h)
            x0, x1, xs = self.interpolation_fixed(in_w, out_w)
            one = 1 << 10
            dy = (ys - one * y0)[:, None, None]
            dx = (xs - one * x0)[None, :, None]
            self.weights = [(one - dy) * (one - dx), dy * (one - dx), (one - dy) * dx, dy * dx]
            self.corners = [(y0, x0), (y1, x0), (y0, x1), (y1, x1)]
            return
        y0, y1, ys = self.interpolation(in_h, out_h)
        x0, x1, xs = self.interpolation(in_w, out_w)
        one = np.float32(1)
        dy = (ys - y0.astype(np.float32))[:, None, None]
        dx = (xs - x0.astype(np.float32))[None, :, None]
        self.rows, self.cols = (y0, y1, dy), (x0, x1, dx[0])
        # uint8: corner weights in the order LiteRT's reference accumulates them, products taken
        # in float32 (its rounding of the result is exact only so).
        self.weights = [(one - dy) * (one - dx), (one - dy) * dx, dy * (one - dx), dy * dx]
        self.corners = [(y0, x0), (y0, x1), (y1, x0), (y1, x1)]

    def _eval_float(self, x: np.ndarray, out: np.ndarray) -> None:
        """Per block of output rows: the rows pass (each output row between its two source
        rows, all columns), then the columns pass (each pixel between its two source columns)."""
        if self.scratch_stale():
            self.scratch = self.take_scratch()
        top, bottom, right = self.scratch
        (y0, y1, dy), x0, columns, dx = self.rows, self.cols[0], self.difference_columns, self.column_weights
        out_w, c = out.shape[2:]
        for b, r0, r1 in self.blocks:
            k = r1 - r0
            upper, lower, product, dst = top[:k], bottom[:k], right[:k], out[b, r0:r1]
            np.take(x[b], y0[r0:r1], 0, upper, "clip")  # indices are in range: "clip" skips a copy
            np.take(x[b], y1[r0:r1], 0, lower, "clip")
            np.subtract(lower, upper, lower)
            np.multiply(lower, dy[r0:r1], lower)
            np.add(upper, lower, upper)
            np.take(upper, x0, 1, dst, "clip")
            if upper.shape[1] > 1:  # lower now holds each row's differences between neighbouring columns
                np.subtract(upper[:, 1:], upper[:, :-1], lower[:, :-1])
                np.take(lower, columns, 1, product.reshape(k, out_w, c), "clip")
                np.multiply(product, dx, product)
                rows = dst.reshape(k, out_w * c)
                np.add(rows, product, rows)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if self.fixed_point:
            acc = np.zeros(out.shape, np.int64)
            for (rows, cols), w in zip(self.corners, self.weights):
                acc += x[:, rows][:, :, cols].astype(np.int64) * w
            # Round half away from zero at 2^20, then truncate as C++ division does.
            acc += np.where(acc > 0, 1 << 19, -(1 << 19))
            out[...] = np.trunc(acc / float(1 << 20)).astype(out.dtype)
            return
        if out.dtype == np.float32 and out.flags.c_contiguous:
            if out.size:
                self._eval_float(x, out)
            return
        acc = np.zeros(out.shape, np.float32)
        for (rows, cols), w in zip(self.corners, self.weights):
            acc += x[:, rows][:, :, cols] * w
        if out.dtype != np.float32:  # uint8: LiteRT's kernel adds 0.5 and truncates the float result
            acc += np.float32(0.5)
        out[...] = acc.astype(out.dtype)
