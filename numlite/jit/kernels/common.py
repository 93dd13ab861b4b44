"""Helpers every compiled family uses: error reporting through the control array, copies,
index-map gathers, and the element-wise loops the families build their kernels from.

The control array ``ctl`` (int64) is shared by all the functions of one compiled model:

====  ===========================================================================
0     cancel flag: the interpreter's ``cancel()`` sets it; compiled loops poll it
1     error code (:data:`CODES`), 0 when none
2, 3  subgraph and node of the failing node
4, 5  the values the message quotes (the bad index, its bound)
6     how many control-flow call sites the error went through (``unwind``)
7...  those call sites, innermost first, as (subgraph, node) pairs
====  ===========================================================================
"""

from __future__ import annotations

import numpy as np
from numba import njit

CTL_SIZE = 64
GATHER_INDEX = 1
CANCELLED = 2
# The messages the Python side raises for each code, as the NumPy kernels word them.
CODES = {GATHER_INDEX: "gather index {a} is out of range [0, {b})"}


@njit(cache=False)
def fail(ctl, sub, node):
    """Record where a kernel failed (it set the code and values already); returns 1."""
    ctl[2] = sub
    ctl[3] = node
    return 1


@njit(cache=False)
def cancelled(ctl, sub, node):
    """Stop at a loop's poll of the cancel flag; returns 1."""
    ctl[1] = CANCELLED
    ctl[2] = sub
    ctl[3] = node
    return 1


@njit(cache=False)
def unwind(ctl, sub, node):
    """A callee failed: add this call site (a WHILE or IF node) to the trace; returns 1."""
    d = ctl[6]
    if 8 + 2 * d < ctl.size:
        ctl[7 + 2 * d] = sub
        ctl[8 + 2 * d] = node
        ctl[6] = d + 1
    return 1


@njit(cache=False)
def copy(dst, src):
    for i in range(dst.size):
        dst[i] = src[i]


@njit(cache=False)
def take(src, index, dst):
    """``dst[i] = src[index[i]]``: every data-movement op with static parameters (slices,
    transposes, broadcasts), its index map computed once at generation."""
    for i in range(dst.size):
        dst[i] = src[index[i]]


@njit(cache=False)
def clamp(x, low, high):
    """A fused activation's range, as LiteRT applies it (NaN stays NaN)."""
    for i in range(x.size):
        v = x[i]
        if v < low:
            x[i] = low
        elif v > high:
            x[i] = high


def binary_kernels(op):
    """The four compiled forms of an element-wise binary ``op(x, y)``: both operands of the
    output's size, the first a single value, the second a single value, and any broadcast
    through index maps (``ia``, ``ib``: the operand element of each output element)."""

    @njit(cache=False)
    def same(a, b, o):
        for i in range(o.size):
            o[i] = op(a[i], b[i])

    @njit(cache=False)
    def left(a, b, o):
        x = a[0]
        for i in range(o.size):
            o[i] = op(x, b[i])

    @njit(cache=False)
    def right(a, b, o):
        y = b[0]
        for i in range(o.size):
            o[i] = op(a[i], y)

    @njit(cache=False)
    def mapped(a, b, ia, ib, o):
        for i in range(o.size):
            o[i] = op(a[ia[i]], b[ib[i]])

    return {"same": same, "left": left, "right": right, "mapped": mapped}


def unary_kernel(op):
    """The compiled loop of an element-wise ``op(x)``."""

    @njit(cache=False)
    def kernel(a, o):
        for i in range(o.size):
            o[i] = op(a[i])

    return kernel


def broadcast_map(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    """For each element of ``out_shape`` (C order), the flat index of the element of an operand
    of ``shape`` that broadcasting reads."""
    if int(np.prod(shape, dtype=np.int64)) == 1:
        return np.zeros(int(np.prod(out_shape, dtype=np.int64)), np.int64)
    iota = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return np.ascontiguousarray(np.broadcast_to(iota, out_shape)).reshape(-1)


def emit_broadcast(g, kernels, a, b, out) -> None:
    """The line of a binary element-wise node: the cheapest of ``kernels``' forms for the
    operands' static shapes (see :func:`binary_kernels`)."""
    n = out.size
    if a.size == n and b.size == n and a.shape == b.shape:
        g.line(f"{g.kernel(kernels['same'])}({a.name}, {b.name}, {out.name})")
    elif a.size == 1 and b.size == n and b.shape == out.shape:
        g.line(f"{g.kernel(kernels['left'])}({a.name}, {b.name}, {out.name})")
    elif b.size == 1 and a.size == n and a.shape == out.shape:
        g.line(f"{g.kernel(kernels['right'])}({a.name}, {b.name}, {out.name})")
    else:
        ia = g.const(broadcast_map(a.shape, out.shape))
        ib = g.const(broadcast_map(b.shape, out.shape))
        g.line(f"{g.kernel(kernels['mapped'])}({a.name}, {b.name}, {ia}, {ib}, {out.name})")


def index_map(node, moved: int = 0) -> np.ndarray:
    """The flat index, into input ``moved``, of each output element of a data-movement node
    whose other inputs are all known (a slice with constant bounds, a transpose, a gather of
    constant positions): numlite's own NumPy kernel run once on the input's element numbers.
    Raises NotCompiled when a parameter is data, or the kernel refuses integer inputs."""
    from numlite.errors import NumliteError
    from numlite.jit.kernels import NotCompiled
    from numlite.kernels import evaluate

    x = node.ins[moved]
    values = [t.value if t is not None else None for t in node.ins]
    if any(v is None for k, v in enumerate(values) if k != moved and node.ins[k] is not None):
        raise NotCompiled(f"{node.op_name} with parameters computed at run time is not compiled")
    for dtype in (np.int64, np.int32):
        if x.size >= np.iinfo(dtype).max:
            continue
        values[moved] = np.arange(x.size, dtype=dtype).reshape(x.shape)
        try:
            result = evaluate(node.op_name, node.options, values, len(node.outs))
        except NumliteError:
            continue  # the kernel does not take this dtype
        if result is not None and tuple(result[0].shape) == node.outs[0].shape:
            return result[0].astype(np.int64).reshape(-1)
    raise NotCompiled(f"{node.op_name}: no index map for its {x.dtype.name} input")
