"""MAX_POOL_2D and AVERAGE_POOL_2D on float32 NHWC as a loop kernel (see ``conv.py``), with the
geometry of ``numlite.kernels.pooling`` (SAME/VALID as the convolutions) and the fused RELU /
RELU_N1_TO_1 / RELU6.

Padding never takes part: each window is clipped to the input. The maximum propagates NaN as
``np.maximum`` does (numlite's NumPy kernel); the average divides each window's sum by its
number of in-bounds pixels, as LiteRT's kernels do. Each output pixel's channels are one
contiguous row, so the inner loop runs along channels, 8 at a time
(:mod:`numlite.jit.kernels.simd`; the last block of a row masks its loads and stores). With
``num_threads`` above 1 the output rows are shared among the threads. L2_POOL_2D: an inlined
scalar kernel, root mean square of the in-bounds pixels."""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, clip, kernel, require
from numlite.jit.kernels.conv import LANES, call, clamp_range, geometry
from numlite.jit.kernels.simd import add, clamp, div, fill, load, load_n, store, store_n, vmax

F32 = np.dtype(np.float32)


KIND = 2  # the loop kernel kind (numlite.jit.kernels.loops)


@body
def pool_setup(x, o, src, f, p):
    """The number of units (output rows)."""
    return p[0] * p[4]


@body
def pool_units(x, o, src, f, p, u0, u1):
    """Output rows ``[u0, u1)``."""
    n, h, w, c, oh, ow = p[0], p[1], p[2], p[3], p[4], p[5]
    fh, fw, sh, sw, top, left = p[6], p[7], p[8], p[9], p[10], p[11]
    average, act = p[12], p[13]
    low, high = f[0], f[1]
    for row in range(u0, u1):
        b = row // oh
        oy = row - b * oh
        y0 = max(oy * sh - top, 0)
        y1 = min(oy * sh - top + fh, h)
        for ox in range(ow):
            x0 = max(ox * sw - left, 0)
            x1 = min(ox * sw - left + fw, w)
            q = (row * ow + ox) * c
            count = max((y1 - y0) * (x1 - x0), 1)
            for ch in range(0, c, LANES):
                lanes = min(LANES, c - ch)
                acc = fill(0.0) if average else fill(-np.inf)
                for iy in range(y0, y1):
                    for ix in range(x0, x1):
                        s = ((b * h + iy) * w + ix) * c + ch
                        v = load(x, s) if lanes == LANES else load_n(x, s, lanes)
                        acc = add(acc, v) if average else vmax(acc, v)
                if average:  # the float32 sum divided by the count, rounded once
                    acc = div(acc, fill(float(count)))
                if act:
                    acc = clamp(acc, low, high)
                if lanes == LANES:
                    store(o, q + ch, acc)
                else:
                    store_n(o, q + ch, acc, lanes)


def _window(node: Any) -> tuple:
    """``(x, out, (n, h, w, c, oh, ow, fh, fw, sh, sw, top, left))`` of a float32 NHWC pool."""
    (x,), (out,) = node.ins, node.outs
    require(x.dtype == F32 == out.dtype, f"{node.op_name} of {x.dtype.name} is not compiled")
    require(len(x.shape) == len(out.shape) == 4, f"{node.op_name} of {x.shape} is not compiled")
    opts = node.options
    require(opts is not None, f"{node.op_name} without options is not compiled")
    n, h, w, c = x.shape
    fh, fw = int(opts.filter_height), int(opts.filter_width)
    (sh, sw), _, (oh, ow), (top, left) = geometry(node, x, fh, fw, dilated=False)
    require(out.shape == (n, oh, ow, c), f"{node.op_name} into {out.shape} is not compiled")
    return x, out, (n, h, w, c, oh, ow, fh, fw, sh, sw, top, left)


@emits("MAX_POOL_2D", "AVERAGE_POOL_2D")
def emit_pool(node: Any, g: Any) -> None:
    x, out, (n, h, w, c, oh, ow, fh, fw, sh, sw, top, left) = _window(node)
    if out.size == 0:
        return
    act, limits = clamp_range(node, out)
    average = int(node.op_name == "AVERAGE_POOL_2D")
    call(g, KIND, x, out, x, [n, h, w, c, oh, ow, fh, fw, sh, sw, top, left, average, act, 0], np.array(limits, np.float32),
         out.size * fh * fw)


# -- L2_POOL_2D (an inlined kernel: a rarer op, not worth a loop kernel's entry points) -----------


@kernel
def l2_pool(x, o, n, h, w, c, oh, ow, fh, fw, sh, sw, top, left, act, low, high):
    """``sqrt(sum of x² / count)`` over each window's in-bounds pixels, in float32 (the squares,
    their sum, the division by the count and the root each rounded to float32, as the NumPy
    kernel's average pool of the squared input), then the fused clamp."""
    for b in range(n):
        for oy in range(oh):
            y0, y1 = max(oy * sh - top, 0), min(oy * sh - top + fh, h)
            for ox in range(ow):
                x0, x1 = max(ox * sw - left, 0), min(ox * sw - left + fw, w)
                count = np.float32(max((y1 - y0) * (x1 - x0), 1))
                q = ((b * oh + oy) * ow + ox) * c
                for ch in range(c):
                    acc = np.float32(0.0)
                    for iy in range(y0, y1):
                        for ix in range(x0, x1):
                            v = x[((b * h + iy) * w + ix) * c + ch]
                            acc += v * v
                    r = np.sqrt(acc / count)
                    if act:
                        r = clip(r, low, high)
                    o[q + ch] = r


@emits("L2_POOL_2D")
def emit_l2_pool(node: Any, g: Any) -> None:
    x, out, (n, h, w, c, oh, ow, fh, fw, sh, sw, top, left) = _window(node)
    if out.size == 0:
        return
    act, (low, high) = clamp_range(node, out)
    bounds = ", ".join(f"np.float32({v!r})" if np.isfinite(v) else "np.float32(np.inf)" for v in (float(low), float(high)))
    g.line(f"{g.kernel(l2_pool)}({x.name}, {out.name}, {n}, {h}, {w}, {c}, {oh}, {ow}, {fh}, {fw}, {sh}, {sw}, {top}, {left}, {act}, {bounds})")
