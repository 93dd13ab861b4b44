"""FULLY_CONNECTED on float32 as compiled loops. Inlined (small nodes): with constant weights,
stored transposed once ([K, N]), each output row accumulates ``x[m, k] * w_t[k, :]`` over ``k``
(a contiguous inner loop LLVM vectorizes, summing each output in ``k`` order as a plain dot
product does); with weights from data, one dot product per output. Then the bias and the fused
activation in one pass. (Numba's ``np.dot`` would call BLAS, but needs SciPy and costs seconds
of compile time for reshapes and their error paths; see docs/jit.md.)

A node of at least :data:`KERNEL_MIN_WORK` multiply-adds with constant weights is a loop kernel
(:mod:`numlite.jit.kernels.loops`, kind :data:`KIND`), compiled once per machine and called
through its address: its lines, inlined into the model's function, cost about a second of the
model's compile each (MobileNetV2's classifier; docs/jit.md, "Compile time of dense and
element-wise ops"). It reads the model's weights in place, ``[N, K]`` (no second copy: 5 MB
for MobileNetV2's classifier), one dot product per output in eight partial sums. Its units are
rows, or with ``num_threads`` blocks of output columns of a row, shared among the threads.
Every output is summed in the same order either way, so both forms give the same bits."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from numlite.jit.kernels import conv, emits
from numlite.jit.kernels.binary import activation_range
from numlite.jit.kernels.common import body, clip, each, kernel, require
from numlite.jit.kernels.conv import call
from numlite.jit.kernels.epilogues import CODES, NONE, epilogue_value
from numlite.jit.kernels.epilogues import emit as emit_epilogue
from numlite.jit.kernels.simd import f32x8, fill, fma, load, load_n

F32 = np.dtype(np.float32)
KIND = 10  # the loop kernel kind (numlite.jit.kernels.loops)
KERNEL_MIN_WORK = 1 << 14  # multiply-adds; smaller nodes stay inline (a call costs more than their loop)
# NumPy's BLAS (kernels/blas.py) takes a node of at least this many rows and multiply-adds: with
# few rows sgemm gains nothing on the loop kernel, which streams the weights once per row.
BLAS_MIN_ROWS = 2
BLAS_MIN_WORK = 1 << 16
BLAS_MIN_BATCH_WORK = 1 << 9  # BATCH_MATMUL's own kernel, an element loop, is 10-45x slower above it
M, K, N, ACT, BIAS, BLOCK, EPILOGUE = range(7)  # the int64 parameters; the float32 ones: low, high, bias[N] (the weights: src)


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


@intrinsic
def _lanes_sum(typingctx, v):
    """The sum of the eight lanes of ``v``, lane 0 first."""
    if v != f32x8:
        return None

    def codegen(context, builder, signature, args):
        total = builder.extract_element(args[0], ir.Constant(ir.IntType(32), 0))
        for lane in range(1, 8):
            total = builder.fadd(total, builder.extract_element(args[0], ir.Constant(ir.IntType(32), lane)))
        return total

    return types.float32(v), codegen


@njit(inline="always")
def _dot(xs, w, k):
    """``xs . w`` over ``k`` values: eight partial sums (``j`` modulo 8), then their sum."""
    acc = fill(0.0)
    j = 0
    while j + 8 <= k:
        acc = fma(load(xs, j), load(w, j), acc)
        j += 8
    if j < k:
        acc = fma(load_n(xs, j, k - j), load_n(w, j, k - j), acc)
    return _lanes_sum(acc)


@njit(inline="always")
def _finish(total, c, f, bias, act, low, high, epi):
    """An output: ``+ bias``, the clamp and the epilogue, as the inlined form's element loops."""
    if bias:
        total = total + f[2 + c]
    if act:
        total = clip(total, low, high)
    return epilogue_value(total, epi)


@body
def fc_units(x, o, w, f, p, u0, u1):
    """Units ``[u0, u1)``: output columns ``[c0, c1)`` of row ``r``. ``w`` is the node's
    weights, ``[N, K]``, the model's own array read in place (no transposed copy): each
    output is a dot product of the input row with a weight row, summed in eight partial sums
    (``k`` modulo 8, fused multiply-adds) then added lane by lane. Four outputs at a time share
    the loads of the input row. An output is summed the same way whatever unit holds it, so the
    serial and parallel forms give the same bits."""
    k, n, act, bias, block, epi = p[K], p[N], p[ACT], p[BIAS], p[BLOCK], p[EPILOGUE]
    blocks = (n + block - 1) // block
    low, high = f[0], f[1]
    for u in range(u0, u1):
        r = u // blocks
        c0 = (u - r * blocks) * block
        c1 = min(c0 + block, n)
        xs = x[r * k : (r + 1) * k]
        row = o[r * n : (r + 1) * n]
        c = c0
        while c + 4 <= c1:
            w0, w1 = w[c * k : (c + 1) * k], w[(c + 1) * k : (c + 2) * k]
            w2, w3 = w[(c + 2) * k : (c + 3) * k], w[(c + 3) * k : (c + 4) * k]
            a0, a1, a2, a3 = fill(0.0), fill(0.0), fill(0.0), fill(0.0)
            j = 0
            while j + 8 <= k:
                v = load(xs, j)
                a0 = fma(v, load(w0, j), a0)
                a1 = fma(v, load(w1, j), a1)
                a2 = fma(v, load(w2, j), a2)
                a3 = fma(v, load(w3, j), a3)
                j += 8
            if j < k:
                v = load_n(xs, j, k - j)
                a0 = fma(v, load_n(w0, j, k - j), a0)
                a1 = fma(v, load_n(w1, j, k - j), a1)
                a2 = fma(v, load_n(w2, j, k - j), a2)
                a3 = fma(v, load_n(w3, j, k - j), a3)
            row[c] = _finish(_lanes_sum(a0), c, f, bias, act, low, high, epi)
            row[c + 1] = _finish(_lanes_sum(a1), c + 1, f, bias, act, low, high, epi)
            row[c + 2] = _finish(_lanes_sum(a2), c + 2, f, bias, act, low, high, epi)
            row[c + 3] = _finish(_lanes_sum(a3), c + 3, f, bias, act, low, high, epi)
            c += 4
        while c < c1:
            row[c] = _finish(_dot(xs, w[c * k : (c + 1) * k], k), c, f, bias, act, low, high, epi)
            c += 1


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
    epilogue = node.take_epilogue()  # (numlite.jit.fusion) computed in the loop kernel, else after the clamp
    if w.value is not None and m >= BLAS_MIN_ROWS and m * k * n >= BLAS_MIN_WORK and _by_blas(g, node, x, out, m, k, n):
        _bias_and_activation(g, out, bias, n, clamp)
        emit_epilogue(g, out, epilogue)
        return
    if w.value is not None and m * k * n >= KERNEL_MIN_WORK and (bias is None or bias.value is not None):
        b = np.zeros(n, np.float32) if bias is None else np.asarray(bias.value, np.float32).reshape(n)
        floats = np.concatenate([np.array(clamp or (0.0, 0.0), np.float32), b])  # the weights: read in place (w)
        # Units: whole rows, or with threads and fewer than two rows per thread, one block of
        # columns per thread and row (a multiple of 16). Not smaller: each unit reads its block
        # of every row of w_t, and blocks of 256 columns took twice the time of whole rows.
        threads = g.gen.threads if m * k * n >= conv.PARALLEL_MIN_WORK else 1
        block = n if threads <= 1 or m >= 2 * threads else min(n, 16 * -(-n // (16 * threads)))
        params = [m, k, n, int(clamp is not None), int(bias is not None), block, NONE if epilogue is None else CODES[epilogue]]
        call(g, KIND, x, out, w, params, floats, work=m * k * n)
        return
    if w.value is not None:
        w_t = g.const(np.ascontiguousarray(np.asarray(w.value, np.float32).reshape(n, k).T))
        g.line(f"{g.kernel(rows_times_transposed)}({x.name}, {w_t}, {out.name}, {m}, {k}, {n})")
    else:
        g.line(f"{g.kernel(rows_dot_rows)}({x.name}, {w.name}, {out.name}, {m}, {k}, {n})")
    _bias_and_activation(g, out, bias, n, clamp)
    emit_epilogue(g, out, epilogue)


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
            out = o[ob + i * n : ob + (i + 1) * n]  # (a view from 0: see indexing.copy_row)
            for j in range(k):
                v = lhs[lb[b] + i * lsi + j * lsk]
                r0 = rb[b] + j * rsk
                if rsj == 1:  # a contiguous rhs row: vectorized
                    rhs_row = rhs[r0 : r0 + n]
                    for c in range(n):
                        out[c] += v * rhs_row[c]
                else:
                    for c in range(n):
                        out[c] += v * rhs[r0 + c * rsj]


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
