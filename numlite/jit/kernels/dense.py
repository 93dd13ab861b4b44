"""FULLY_CONNECTED on float32 as compiled loops: with constant weights, stored transposed once
([K, N]), each output row accumulates ``x[m, k] * w_t[k, :]`` over ``k`` (a contiguous inner
loop LLVM vectorizes, summing each output in ``k`` order as a plain dot product does); with
weights from data, one dot product per output. Then the bias and the fused activation in one
pass. (Numba's ``np.dot`` would call BLAS, but needs SciPy and costs seconds of compile time
for reshapes and their error paths; see docs/jit.md.)

A node of at least :data:`KERNEL_MIN_WORK` multiply-adds with constant weights is a loop kernel
(:mod:`numlite.jit.kernels.loops`, kind :data:`KIND`), compiled once per machine and called
through its address: its lines, inlined into the model's function, cost about a second of the
model's compile each (MobileNetV2's classifier; docs/jit.md, "Compile time of dense and
element-wise ops"). Its units are rows, or with ``num_threads`` blocks of output columns of a
row, shared among the threads. Every output is summed in the same order either way, so both
forms give the same bits."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import conv, emits
from numlite.jit.kernels.binary import activation_range
from numlite.jit.kernels.common import body, clip, each, kernel, require
from numlite.jit.kernels.conv import call

F32 = np.dtype(np.float32)
KIND = 10  # the loop kernel kind (numlite.jit.kernels.loops)
KERNEL_MIN_WORK = 1 << 14  # multiply-adds; smaller nodes stay inline (a call costs more than their loop)
# NumPy's BLAS (kernels/blas.py) takes a node of at least this many rows and multiply-adds: with
# few rows sgemm gains nothing on the loop kernel, which streams the weights once per row.
BLAS_MIN_ROWS = 2
BLAS_MIN_WORK = 1 << 16
BLAS_MIN_BATCH_WORK = 1 << 9  # BATCH_MATMUL's own kernel, an element loop, is 10-45x slower above it
M, K, N, ACT, BIAS, BLOCK = range(6)  # the int64 parameters; the float32 ones: low, high, bias[N], w_t[K * N]


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


@body
def fc_setup(x, o, src, f, p):
    """The number of units: blocks of ``p[BLOCK]`` output columns, per row."""
    return p[M] * ((p[N] + p[BLOCK] - 1) // p[BLOCK])


@body
def fc_units(x, o, src, f, p, u0, u1):
    """Units ``[u0, u1)``: output columns ``[c0, c1)`` of row ``r``. Each output adds its
    products in ``k`` order from 0, as :func:`rows_times_transposed` does, four ``k`` at a
    time in a register (a quarter of the loads and stores of the row; the same additions in
    the same order), then ``+ bias`` and the clamp (as the inlined form's element loop)."""
    k, n, act, bias, block = p[K], p[N], p[ACT], p[BIAS], p[BLOCK]
    blocks = (n + block - 1) // block
    low, high = f[0], f[1]
    w_t = f[2 + n :]
    for u in range(u0, u1):
        r = u // blocks
        c0 = (u - r * blocks) * block
        c1 = min(c0 + block, n)
        row = o[r * n + c0 : r * n + c1]
        xs = x[r * k : (r + 1) * k]
        width = c1 - c0
        for c in range(width):
            row[c] = 0
        j = 0
        while j + 4 <= k:
            v0, v1, v2, v3 = xs[j], xs[j + 1], xs[j + 2], xs[j + 3]
            w0 = w_t[j * n + c0 : j * n + c1]
            w1 = w_t[(j + 1) * n + c0 : (j + 1) * n + c1]
            w2 = w_t[(j + 2) * n + c0 : (j + 2) * n + c1]
            w3 = w_t[(j + 3) * n + c0 : (j + 3) * n + c1]
            for c in range(width):
                acc = row[c]
                acc += v0 * w0[c]
                acc += v1 * w1[c]
                acc += v2 * w2[c]
                acc += v3 * w3[c]
                row[c] = acc
            j += 4
        while j < k:
            v = xs[j]
            weights = w_t[j * n + c0 : j * n + c1]
            for c in range(width):
                row[c] += v * weights[c]
            j += 1
        if bias:
            b = f[2 + c0 : 2 + c1]  # slices indexed from 0: no wraparound test, so LLVM vectorizes
            for c in range(width):
                row[c] = row[c] + b[c]
        if act:
            for c in range(width):
                row[c] = clip(row[c], low, high)


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
    clamp = activation_range(node, out)
    if w.value is not None and m >= BLAS_MIN_ROWS and m * k * n >= BLAS_MIN_WORK and _by_blas(g, node, x, out, m, k, n):
        _bias_and_activation(g, out, bias, n, clamp)
        return
    if w.value is not None and m * k * n >= KERNEL_MIN_WORK and (bias is None or bias.value is not None):
        w_t = np.asarray(w.value, np.float32).reshape(n, k).T
        b = np.zeros(n, np.float32) if bias is None else np.asarray(bias.value, np.float32).reshape(n)
        floats = np.concatenate([np.array(clamp or (0.0, 0.0), np.float32), b, w_t.reshape(-1)])
        # Units: whole rows, or with threads and fewer than two rows per thread, one block of
        # columns per thread and row (a multiple of 16). Not smaller: each unit reads its block
        # of every row of w_t, and blocks of 256 columns took twice the time of whole rows.
        threads = g.gen.threads if m * k * n >= conv.PARALLEL_MIN_WORK else 1
        block = n if threads <= 1 or m >= 2 * threads else min(n, 16 * -(-n // (16 * threads)))
        call(g, KIND, x, out, x, [m, k, n, int(clamp is not None), int(bias is not None), block], floats, work=m * k * n)
        return
    if w.value is not None:
        w_t = g.const(np.ascontiguousarray(np.asarray(w.value, np.float32).reshape(n, k).T))
        g.line(f"{g.kernel(rows_times_transposed)}({x.name}, {w_t}, {out.name}, {m}, {k}, {n})")
    else:
        g.line(f"{g.kernel(rows_dot_rows)}({x.name}, {w.name}, {out.name}, {m}, {k}, {n})")
    _bias_and_activation(g, out, bias, n, clamp)


def _bias_and_activation(g, out, bias, n: int, clamp) -> None:
    """``out += bias`` row by row (no index modulo: LLVM vectorizes it), then the clamp."""
    if getattr(out, "dynamic", False):  # a count known only at run time: one element loop
        if bias is not None or clamp is not None:
            plus = (lambda i: f" + {bias.name}[{i} % {n}]") if bias is not None else (lambda i: "")
            each(g, out, lambda i: f"{out.name}[{i}]{plus(i)}", clamp)
        return
    if bias is not None and out.size:
        g.line(f"{g.kernel(add_to_rows)}({out.name}, {bias.name}, {out.size // n}, {n})")
    if clamp is not None:
        each(g, out, lambda i: f"{out.name}[{i}]", clamp)


@kernel
def add_to_rows(o, b, m, n):
    for r in range(m):
        row = o[r * n : (r + 1) * n]
        for c in range(n):
            row[c] = row[c] + b[c]


def _by_blas(g, node, x, out, m: int, k: int, n: int) -> bool:
    """``out = x @ w_t`` by NumPy's BLAS (its ``sgemm``, the NumPy engine's product) on the NumPy
    kernel's own transposed weights ``w_t`` ([k, n]), read in place; False where no BLAS was
    found or the kernel holds no such array."""
    from numlite.jit.kernels import blas

    found = blas.sgemm_address()
    w_t = getattr(node.kernel, "weights", None)
    if found is None or not isinstance(w_t, np.ndarray) or w_t.shape != (k, n) or w_t.dtype != F32 or not w_t.flags.c_contiguous:
        return False
    address, width = found
    product = blas.product_64 if width == 64 else blas.product_32
    slot = g.gen.arenas.const(w_t, interpreters=True)  # the interpreter's array, read in place
    g.gen.slots.add(slot)
    g.line(f"{g.kernel(product)}({x.name}, {slot.name}, {out.name}, ctl, np.int64({g.address(address)}), {m}, {n}, {k})")
    g.gen.blas = True
    return True


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
    from numlite.jit.kernels import blas

    found = blas.sgemm_address()
    if found is not None and m >= BLAS_MIN_ROWS and m * k * n >= BLAS_MIN_BATCH_WORK:
        address, width = found
        product = blas.batch_product_64 if width == 64 else blas.batch_product_32
        g.line(f"{g.kernel(product)}({lhs.name}, {rhs.name}, {out.name}, {lb}, {rb}, ctl, np.int64({g.address(address)}), "
               f"{m}, {n}, {k}, {int(adj_x)}, {int(adj_y)}, {ls[-1]}, {rs[-1]})")
        g.gen.blas = True
        return
    g.line(f"{g.kernel(batch_matmul)}({lhs.name}, {rhs.name}, {out.name}, {lb}, {rb}, {m}, {k}, {n}, {lsi}, {lsk}, {rsk}, {rsj})")
