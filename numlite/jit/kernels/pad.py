"""PAD and PADV2 on float32 (rank 1-4, constant non-negative paddings, a constant pad value) as
a loop kernel (see ``conv.py``): the output is filled with the pad value, then each run of the
input's last axis is copied to its place. MobileNetV2 pads before its strided depthwise
convolutions; without this kernel the whole model stayed on NumPy. MIRROR_PAD: an index map.
STABLEHLO_PAD (any dtype): an index map with -1 for the padding value."""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, each, require, take
from numlite.jit.kernels.conv import call

F32 = np.dtype(np.float32)


KIND = 4  # the loop kernel kind (numlite.jit.kernels.loops)


@body
def pad_setup(x, o, src, f, p):
    """The whole PAD (one thread: a copy); no units."""
    value = f[0]  # p: the input's shape, the output's, the paddings before (rank 4)
    d0, d1, d2, d3 = p[0], p[1], p[2], p[3]
    e1, e2, e3 = p[5], p[6], p[7]
    b0, b1, b2, b3 = p[8], p[9], p[10], p[11]
    for q in range(o.size):
        o[q] = value
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                s = ((i0 * d1 + i1) * d2 + i2) * d3
                t = (((i0 + b0) * e1 + i1 + b1) * e2 + i2 + b2) * e3 + b3
                for i3 in range(d3):
                    o[t + i3] = x[s + i3]
    return 0


@emits("PAD", "PADV2")
def emit_pad(node: Any, g: Any) -> None:
    x, paddings = node.ins[0], node.ins[1]
    constant = node.ins[2] if len(node.ins) > 2 else None
    out = node.outs[0]
    require(x.dtype == F32 == out.dtype, f"{node.op_name} of {x.dtype.name} is not compiled")
    require(paddings.value is not None and (constant is None or constant.value is not None),
            f"{node.op_name} with paddings or a pad value computed at run time is not compiled")
    rank = len(x.shape)
    pairs = np.asarray(paddings.value, np.int64).reshape(-1, 2)
    require(1 <= rank <= 4 and pairs.shape[0] == rank and pairs.min(initial=0) >= 0,
            f"{node.op_name} of rank {rank} by paddings {pairs.tolist()} is not compiled")
    shape = (1,) * (4 - rank) + tuple(x.shape)
    before = [0] * (4 - rank) + [int(a) for a, _ in pairs]
    padded = tuple(d + int(a) + int(b) for d, (a, b) in zip(x.shape, pairs))
    require(padded == tuple(out.shape), f"{node.op_name} into {out.shape} is not compiled")
    if out.size == 0:
        return
    value = np.float32(np.asarray(constant.value).reshape(-1)[0]) if constant is not None else np.float32(0)
    big = (1,) * (4 - rank) + padded
    call(g, KIND, x, out, x, [*shape, *big, *before], np.array([value], np.float32))


@emits("MIRROR_PAD")
def emit_mirror_pad(node: Any, g: Any) -> None:
    """MIRROR_PAD (REFLECT or SYMMETRIC) with constant paddings: an index map made by numlite's
    own kernel (paddings from data stay on NumPy)."""
    require(node.ins[0].dtype == node.outs[0].dtype, "MIRROR_PAD between dtypes is not compiled")
    take(g, node)


def stablehlo_pad_map(node: Any) -> np.ndarray:
    """For each output element of a STABLEHLO_PAD, the flat index of the input element it
    holds, or -1 where it holds the padding value: numlite's own kernel run once on the
    input's element numbers, padded with -1 (so edge cropping and interior padding are the
    kernel's)."""
    from numlite.kernels import evaluate

    x = node.ins[0]
    numbers = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    result = evaluate(node.op_name, node.options, [numbers, np.array(-1, np.int64)], 1)
    require(result is not None and tuple(result[0].shape) == tuple(node.outs[0].shape), "STABLEHLO_PAD: no index map")
    return result[0].astype(np.int64).reshape(-1)


@emits("STABLEHLO_PAD")
def emit_stablehlo_pad(node: Any, g: Any) -> None:
    """STABLEHLO_PAD (edge padding, negative edges cropping, interior padding) of any dtype:
    ``out[i] = x[map[i]]``, or the padding value (input 1, read at run time) where the map
    holds -1."""
    (x, value), (out,) = node.ins, node.outs
    require(x.dtype == value.dtype == out.dtype, "STABLEHLO_PAD between dtypes is not compiled")
    if out.size == 0:
        return
    m = g.const(stablehlo_pad_map(node))
    each(g, out, lambda i: f"{x.name}[{m}[{i}]] if {m}[{i}] >= 0 else {value.name}[0]")
