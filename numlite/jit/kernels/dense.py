"""FULLY_CONNECTED on float32 as compiled loops: with constant weights, stored transposed once
([K, N]), each output row accumulates ``x[m, k] * w_t[k, :]`` over ``k`` (a contiguous inner
loop LLVM vectorizes, summing each output in ``k`` order as a plain dot product does); with
weights from data, one dot product per output. Then the bias and the fused activation in one
pass. (Numba's ``np.dot`` would call BLAS, but needs SciPy and costs seconds of compile time
for reshapes and their error paths; see docs/jit.md.)"""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.binary import activation_range
from numlite.jit.kernels.common import each, kernel, require

F32 = np.dtype(np.float32)


@kernel
def rows_times_transposed(x, w_t, o, m, k, n):
    for r in range(m):
        row = o[r * n : (r + 1) * n]  # row views: simpler indexing, which LLVM vectorizes
        for c in range(n):
            row[c] = 0
        for j in range(k):
            v = x[r * k + j]
            weights = w_t[j * n : (j + 1) * n]
            for c in range(n):
                row[c] += v * weights[c]


@kernel
def rows_dot_rows(x, w, o, m, k, n):
    for r in range(m):
        for c in range(n):
            acc = np.float32(0)
            for j in range(k):
                acc += x[r * k + j] * w[c * k + j]
            o[r * n + c] = acc


@emits("FULLY_CONNECTED")
def emit(node, g) -> None:
    x, w = node.ins[0], node.ins[1]
    bias = node.ins[2] if len(node.ins) > 2 else None
    out = node.outs[0]
    require(all(t is None or t.dtype == F32 for t in (x, w, bias, out)) and len(w.shape) == 2,
            "FULLY_CONNECTED is compiled for float32 inputs, weights and bias only")
    require(len(node.outs) == 1 and (node.options is None or node.options.weights_format == 0),
            "FULLY_CONNECTED with shuffled weights is not compiled")
    n, k = w.shape
    m = x.size // k if k else 0
    require(m * n == out.size and k > 0, f"FULLY_CONNECTED of {x.shape} by {w.shape} into {out.shape} is not compiled")
    if w.value is not None:
        w_t = g.const(np.ascontiguousarray(np.asarray(w.value, np.float32).reshape(n, k).T))
        g.line(f"{g.kernel(rows_times_transposed)}({x.name}, {w_t}, {out.name}, {m}, {k}, {n})")
    else:
        g.line(f"{g.kernel(rows_dot_rows)}({x.name}, {w.name}, {out.name}, {m}, {k}, {n})")
    clamp = activation_range(node, out)
    if bias is not None or clamp is not None:
        plus = (lambda i: f" + {bias.name}[{i} % {n}]") if bias is not None else (lambda i: "")
        each(g, out, lambda i: f"{out.name}[{i}]{plus(i)}", clamp)


# -- BATCH_MATMUL -----------------------------------------------------------------------------------


@kernel
def batch_matmul(lhs, rhs, o, lb, rb, m, k, n, lsi, lsk, rsk, rsj):
    """``o[b] = lhs[lb[b]] @ rhs[rb[b]]`` ([m, k] by [k, n], each read through its strides, so
    that adj_x and adj_y are transposed reads); each output summed in ``k`` order in float32."""
    for b in range(lb.size):
        ob = b * m * n
        for q in range(m * n):
            o[ob + q] = 0
        for i in range(m):
            row = ob + i * n
            for j in range(k):
                v = lhs[lb[b] + i * lsi + j * lsk]
                r0 = rb[b] + j * rsk
                for c in range(n):
                    o[row + c] += v * rhs[r0 + c * rsj]


@emits("BATCH_MATMUL")
def emit_batch_matmul(node, g) -> None:
    """Float32 BATCH_MATMUL with broadcast batch dims and adj_x / adj_y (an int8 rhs, the hybrid
    form, is not compiled)."""
    lhs, rhs = node.ins
    out = node.outs[0]
    kernel_ = node.kernel
    require(lhs.dtype == rhs.dtype == out.dtype == F32 and getattr(kernel_, "hybrid", None) is None,
            f"BATCH_MATMUL of {lhs.dtype.name} by {rhs.dtype.name} is not compiled")
    if out.size == 0:
        return
    adj_x, adj_y = kernel_.adj_x, kernel_.adj_y
    ls, rs = tuple(lhs.shape), tuple(rhs.shape)
    m, k = (ls[-1], ls[-2]) if adj_x else (ls[-2], ls[-1])
    n = rs[-2] if adj_y else rs[-1]
    lsi, lsk = (1, ls[-1]) if adj_x else (ls[-1], 1)
    rsk, rsj = (1, rs[-1]) if adj_y else (rs[-1], 1)
    batch = tuple(out.shape[:-2])

    def offsets(shape):  # each output batch's first element in the operand (broadcast)
        dims = tuple(shape[:-2])
        iota = np.arange(int(np.prod(dims, dtype=np.int64)), dtype=np.int64).reshape(dims) * (shape[-2] * shape[-1])
        return np.ascontiguousarray(np.broadcast_to(iota, batch)).reshape(-1)

    lb, rb = g.const(offsets(ls)), g.const(offsets(rs))
    g.line(f"{g.kernel(batch_matmul)}({lhs.name}, {rhs.name}, {out.name}, {lb}, {rb}, {m}, {k}, {n}, {lsi}, {lsk}, {rsk}, {rsj})")
