"""DILATE with constant dilations: an index map of the input's places in the output (-1 for
the padding value, read at run time), as numlite.kernels.xla_window places them."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, require


@emits("DILATE")
def emit_dilate(node, g) -> None:
    x, dilations, padding = node.ins
    out = node.outs[0]
    require(dilations.value is not None, "DILATE with dilations from data is not compiled")
    require(x.dtype == out.dtype, "DILATE between dtypes is not compiled")
    if out.size == 0:
        return
    places = np.full(out.size, -1, np.int64)
    places.reshape(out.shape)[node.kernel.where] = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    m = g.const(places)
    each(g, out, lambda i: f"{x.name}[{m}[{i}]] if {m}[{i}] >= 0 else {padding.name}[0]")
