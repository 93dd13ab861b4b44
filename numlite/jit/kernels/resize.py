"""RESIZE_NEAREST_NEIGHBOR (an index map, made by numlite's own kernel: align_corners and
half_pixel_centers as it computes them) and RESIZE_BILINEAR on float32, from the source rows,
columns and weights the NumPy kernel planned at prepare, in its float32 order of operations:
each output row between its two source rows, then each pixel between its two source columns."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import kernel, require, take

F32 = np.dtype(np.float32)


@emits("RESIZE_NEAREST_NEIGHBOR")
def emit_nearest(node, g) -> None:
    require(node.ins[0].dtype == node.outs[0].dtype, "RESIZE_NEAREST_NEIGHBOR between dtypes is not compiled")
    take(g, node)


@kernel
def bilinear(x, o, n, h, w, c, oh, ow, y0, y1, dy, x0, dc, dx):
    """``o[b, i, j] = t(x0[j]) + (t(dc[j] + 1) - t(dc[j])) * dx[j]`` with ``t(col)`` the source
    pixel column ``col`` interpolated between rows y0[i] and y1[i] (``+ (x[y1] - x[y0]) * dy``),
    every step rounded to float32 as numlite's ResizeBilinear computes it (dx is 0 where both
    source columns are one; dc is x0 clamped to w - 2)."""
    for b in range(n):
        for i in range(oh):
            r0 = (b * h + y0[i]) * w
            r1 = (b * h + y1[i]) * w
            wy = dy[i]
            for j in range(ow):
                # rows of c values through views that start at 0 (indexed x[a + k], the loop
                # ran scalar: Numba's wraparound test of each index)
                p = ((b * oh + i) * ow + j) * c
                a0 = (r0 + x0[j]) * c
                a1 = (r1 + x0[j]) * c
                top, bottom, out = x[a0 : a0 + c], x[a1 : a1 + c], o[p : p + c]
                if w > 1:
                    d0 = (r0 + dc[j]) * c
                    d1 = (r1 + dc[j]) * c
                    top_left, bottom_left = x[d0 : d0 + c], x[d1 : d1 + c]
                    top_right, bottom_right = x[d0 + c : d0 + 2 * c], x[d1 + c : d1 + 2 * c]
                    wx = dx[j]
                    for k in range(c):
                        t0 = top[k] + (bottom[k] - top[k]) * wy
                        left = top_left[k] + (bottom_left[k] - top_left[k]) * wy
                        right = top_right[k] + (bottom_right[k] - top_right[k]) * wy
                        out[k] = t0 + (right - left) * wx
                else:
                    for k in range(c):
                        out[k] = top[k] + (bottom[k] - top[k]) * wy


@emits("RESIZE_BILINEAR")
def emit_bilinear(node, g) -> None:
    x, out = node.ins[0], node.outs[0]
    k = node.kernel
    require(x.dtype == F32 == out.dtype and getattr(k, "rows", None) is not None and getattr(k, "column_weights", None) is not None,
            f"RESIZE_BILINEAR of {x.dtype.name} is not compiled")
    if out.size == 0:
        return
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    y0, y1, dy = k.rows
    x0 = k.cols[0]
    dx = np.ascontiguousarray(k.column_weights.reshape(ow, c)[:, 0] if c else np.zeros(ow, np.float32), np.float32)
    consts = [g.const(np.ascontiguousarray(v, dtype)) for v, dtype in
              ((y0, np.int64), (y1, np.int64), (np.asarray(dy).reshape(-1), np.float32), (x0, np.int64),
               (k.difference_columns, np.int64), (dx, np.float32))]
    g.line(f"{g.kernel(bilinear)}({x.name}, {out.name}, {n}, {h}, {w}, {c}, {oh}, {ow}, {', '.join(consts)})")
