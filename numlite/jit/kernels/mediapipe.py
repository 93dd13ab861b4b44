"""MediaPipe's MaxPoolingWithArgmax2D on float32 NHWC (the NumPy kernel is in
:mod:`numlite.kernels.mediapipe`, whose geometry this reads): max_pool_argmax.cc's loop, the
window clipped to the input, the first strict maximum above float32's lowest value winning
(NaN never wins), its place in the window written as ``y * filter_w + x + 0.1``. A kernel of
the caller's ``custom_ops`` stays on NumPy. (MaxUnpooling2D is not compiled: its errors quote
the offending float index, which the compiled code does not format.)"""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import clip, kernel, require

F32 = np.dtype(np.float32)


@kernel
def max_pool_argmax(x, values, places, n, h, w, c, oh, ow, fh, fw, sh, sw, top, left, act, low, high):
    lowest = np.float32(np.finfo(np.float32).min)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                q = ((b * oh + oy) * ow + ox) * c
                for ch in range(c):
                    best, where = lowest, 0
                    for fy in range(fh):
                        iy = oy * sh - top + fy
                        if iy < 0 or iy >= h:
                            continue
                        for fx in range(fw):
                            ix = ox * sw - left + fx
                            if ix < 0 or ix >= w:
                                continue
                            v = x[((b * h + iy) * w + ix) * c + ch]
                            if v > best:
                                best, where = v, fy * fw + fx
                    values[q + ch] = clip(best, low, high) if act else best
                    places[q + ch] = np.float32(where) + np.float32(0.1)


@emits("MaxPoolingWithArgmax2D")
def emit_max_pool_argmax(node: Any, g: Any) -> None:
    from numlite.kernels.mediapipe import ACTIVATION_RANGES, MaxPoolingWithArgmax2D

    require(type(node.kernel) is MaxPoolingWithArgmax2D, "a custom_ops kernel of MaxPoolingWithArgmax2D is not compiled")
    (x,) = node.ins
    values, places = node.outs
    require(all(t.dtype == F32 for t in (x, values, places)), "MaxPoolingWithArgmax2D is compiled on float32 only")
    if values.size == 0:
        return
    k = node.kernel
    p = k.params
    n, h, w, c = x.shape
    bounds = ACTIVATION_RANGES[p.activation]
    low, high = (f"np.float32({float(v)!r})" if np.isfinite(v) else "np.float32(np.inf)" for v in (bounds or (0.0, 0.0)))
    g.line(f"{g.kernel(max_pool_argmax)}({x.name}, {values.name}, {places.name}, {n}, {h}, {w}, {c}, {k.out_hw[0]}, "
           f"{k.out_hw[1]}, {p.filter[0]}, {p.filter[1]}, {p.strides[0]}, {p.strides[1]}, {k.pads[0]}, {k.pads[1]}, "
           f"{int(bounds is not None)}, {low}, {high})")
