"""Quantized (affine int8/uint8, int16) nodes, bit-exact with numlite's NumPy kernels
(numlite/kernels/quantized*.py), which are themselves exact with LiteRT.

Every parameter is computed once, at generation, by the NumPy engine's own prepared kernel
(``node.kernel``): the same fixed-point multipliers, shifts, clamps and tables, baked into the
generated code as literals or read in place as constants. So the two engines cannot disagree
on a rounding.

* **Element-wise ops of one 8-bit input** (QUANTIZE between integer types, DEQUANTIZE, RELU,
  RELU6, RELU_N1_TO_1, LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH, ABS): a 256-entry table, made
  by running the prepared NumPy kernel once on every value of the input's dtype, and indexed
  by the element's bits. (LiteRT computes LOGISTIC and TANH through such tables too.)
* **ADD, SUB, MUL on 8 bits**: the NumPy kernel's own table of all 65536 input pairs (made at
  its prepare by the op's fixed-point arithmetic), read in place: no copy, one load per element.
* **QUANTIZE from float32**: ``x / scale`` in float32 rounded to nearest (halves to even, as
  LiteRT), plus the zero point, saturated (per tensor).
* **FULLY_CONNECTED** (int8 or int16 inputs, constant int8 weights per tensor or per channel,
  int32 or int64 bias): exact dot products of the raw input and the weights (int32 sums when
  generation proves they cannot leave int32, else int64; the weights read in place, or padded
  with zeros when their rows are short); the input's zero point comes out with the bias in one
  per-unit offset; each sum is then rescaled as ai-edge-litert's reference kernel does
  (``round(acc * real)`` in double, see numlite/kernels/quantized_conv.py), clamped to the
  fused activation, plus the output's zero point.
* **MEAN** (8-bit, constant axes, at most 1024 values per output): the sums, then the NumPy
  kernel's table of the rescaled mean of every possible sum, read in place.
* **CONCATENATION** (inputs of the output's scale, as LiteRT requires for int8), **MAXIMUM**,
  **MINIMUM** (LiteRT compares the raw values): the plain emitters' code on integers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import each, index, kernel, require
from numlite.jit.kernels.simd import VNNI, dot_u8s8, i32x16_zero, load_i32x16, narrow_store16, splat_i32x16

INT8, UINT8, INT16 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)
EIGHT_BIT = (INT8, UINT8)
F32 = np.dtype(np.float32)
PAD_DEPTH = 64  # FULLY_CONNECTED's rows shorter than PAD_BELOW are padded to a multiple of this
PAD_BELOW = 256  # (see emit_fully_connected)


def _shared(g, array: np.ndarray) -> str:
    """The local name of the NumPy kernel's own array, read in place (not copied)."""
    slot = g.gen.arenas.const(array, interpreters=True)
    g.gen.slots.add(slot)
    return slot.name


def _bits(operand) -> str:
    """The expression turning element ``i`` of an 8-bit operand into its bits (0..255)."""
    return "{} & 255" if operand.dtype == INT8 else "{}"


# -- element-wise ops of one 8-bit input: a table of 256 entries ----------------------------------------

TABLED = ("QUANTIZE", "DEQUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "LEAKY_RELU", "HARD_SWISH", "ABS")


def byte_table(node) -> np.ndarray:
    """The prepared NumPy kernel's output for each of the 256 values of the 8-bit input, in
    the order of their bits."""
    (x,), (out,) = node.ins, node.outs
    values = np.arange(256, dtype=np.uint8).view(x.dtype)
    table = np.empty(256, out.dtype)
    with np.errstate(all="ignore"):
        node.kernel.eval([values], [table])
    return table


@emits(*TABLED, quantized=True)
def emit_tabled(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    if node.op_name == "QUANTIZE" and x.dtype == F32:
        emit_quantize(node, g)
        return
    require(x.dtype in EIGHT_BIT and x.shape == out.shape and node.kernel is not None,
            f"quantized {node.op_name} of {x.dtype.name} is not compiled (8-bit inputs only)")
    # a per-channel DEQUANTIZE's parameters differ along an axis: not one table
    require(np.ndim(getattr(node.kernel, "scale", 0)) == 0, f"per-channel {node.op_name} is not compiled")
    table = g.const(byte_table(node))
    bits = _bits(x)
    each(g, out, lambda i: f"{table}[{bits.format(f'{x.name}[{i}]')}]")


# -- QUANTIZE from float32 ---------------------------------------------------------------------------


@kernel
def quantize_f32(x, scale, zero, low, high):
    """numlite's Quantize.eval on one float32 value (as LiteRT: the float32 quotient rounded
    to nearest, halves to even, NaN as 0, saturated)."""
    q = x / scale
    if q != q:
        q = np.float32(0.0)
    r = np.rint(q)
    if r > 2.0**40:
        r = 2.0**40
    elif r < -(2.0**40):
        r = -(2.0**40)
    v = np.int64(r) + zero
    return low if v < low else (high if v > high else v)


def emit_quantize(node, g) -> None:
    (x,), (out,) = node.ins, node.outs
    k = node.kernel
    require(not k.per_channel and not k.requantize, "per-channel QUANTIZE is not compiled")
    scale = repr(float(np.float32(k.out_scale)))
    low, high = k.range
    call = g.kernel(quantize_f32)
    each(g, out, lambda i: f"{call}({x.name}[{i}], np.float32({scale}), {int(k.out_zp)}, {low}, {high})")


# -- ADD, SUB, MUL: the NumPy kernel's table of every pair ----------------------------------------------


@emits("ADD", "SUB", "MUL", quantized=True)
def emit_pairs(node, g) -> None:
    a, b = node.ins
    (out,) = node.outs
    table = getattr(node.kernel, "table", None)
    require(a.dtype in EIGHT_BIT and table is not None and table.size == 65536,
            f"quantized {node.op_name} of {a.dtype.name} is not compiled (8-bit inputs only)")
    name = _shared(g, table)
    left, right = _bits(a), _bits(b)
    each(g, out, lambda i: f"{name}[(({left.format(index(a, out, i, g))}) << 8) | ({right.format(index(b, out, i, g))})]")


# -- CONCATENATION, MAXIMUM, MINIMUM: the raw values -----------------------------------------------------


@emits("CONCATENATION", quantized=True)
def emit_concatenation(node, g) -> None:
    from numlite.jit.kernels.layout import emit_concatenation as plain

    require(not any(node.kernel.rescale), "CONCATENATION requantizing its inputs is not compiled")
    plain(node, g)


@emits("MAXIMUM", "MINIMUM", quantized=True)
def emit_extremum(node, g) -> None:
    a, b = node.ins
    (out,) = node.outs
    require(a.dtype == b.dtype == out.dtype and a.dtype.kind in "iu", f"quantized {node.op_name} of mixed dtypes is not compiled")
    pick = "max" if node.op_name == "MAXIMUM" else "min"
    each(g, out, lambda i: f"{pick}({index(a, out, i, g)}, {index(b, out, i, g)})")


# -- fixed-point rescaling, for kernels with 8-bit accumulators (CONV_2D, DEPTHWISE_CONV_2D) ----------


@kernel
def multiply_by_quantized_multiplier(x, multiplier, shift):
    """LiteRT's MultiplyByQuantizedMultiplier of an int32 ``x`` (gemmlowp's double rounding, as
    numlite.kernels.fixed_point computes it in its closed forms): the int32 result, in int64.
    ``multiplier`` is never INT32_MIN (QuantizeMultiplier gives [2**30, 2**31) or 0). The
    compiled CONV_2D and DEPTHWISE_CONV_2D kernels rescale their int32 sums with it, per
    channel (multipliers and shifts from the NumPy kernel's ``multiplier`` and ``shift``)."""
    a = np.int64(np.int32(np.int64(x) << (shift if shift > 0 else 0)))  # C++ wraps the shifted int32
    v = (a * multiplier + (1 << 30)) >> 31
    if shift < 0:
        v = (v + (v >> 63) + (np.int64(1) << (-shift - 1))) >> -shift
    return v


# -- MEAN: a sum, then the NumPy kernel's table of every sum's mean ------------------------------------


@emits("MEAN", quantized=True)
def emit_mean(node, g) -> None:
    from numlite.jit.kernels.reduce import sums

    x, axes = node.ins
    (out,) = node.outs
    table = getattr(node.kernel, "table", None)
    require(axes.value is not None and table is not None and x.dtype in EIGHT_BIT,
            "quantized MEAN is compiled for 8-bit inputs over constant axes, at most 1024 values per output")
    acc = sums(node, g, np.int64)  # exact: at most 1024 * 255
    name = _shared(g, table)
    each(g, out, lambda i: f"{name}[{acc.name}[{i}] - {int(node.kernel.lowest)}]")


# -- FULLY_CONNECTED ---------------------------------------------------------------------------------


# The FULLY_CONNECTED kernels are not inlined (plain njit): compiled once per signature and
# called, as inlining LLVM's vectorized reductions into every node cost 2-3 s of compile per
# node (measured on this loaded machine), for a call that costs nanoseconds.


@njit(nogil=True)
def dot_rows_int32(x, w, acc, m, k, n):
    """``acc[r, c] = x[r] . w[c]`` in int32 arithmetic (exact: generation proved no partial
    sum leaves int32), four weight rows at a time (``n`` is a multiple of 4: rows padded with
    zeros), so that each input load serves four products (LLVM turns the products into
    pairwise multiply-adds)."""
    for r in range(m):
        row = x[r * k : (r + 1) * k]
        for c in range(0, n, 4):
            w0 = w[c * k : (c + 1) * k]
            w1 = w[(c + 1) * k : (c + 2) * k]
            w2 = w[(c + 2) * k : (c + 3) * k]
            w3 = w[(c + 3) * k : (c + 4) * k]
            a0 = np.int32(0)
            a1 = np.int32(0)
            a2 = np.int32(0)
            a3 = np.int32(0)
            for j in range(k):
                v = np.int32(row[j])
                a0 = np.int32(a0 + v * np.int32(w0[j]))
                a1 = np.int32(a1 + v * np.int32(w1[j]))
                a2 = np.int32(a2 + v * np.int32(w2[j]))
                a3 = np.int32(a3 + v * np.int32(w3[j]))
            acc[r * n + c] = a0
            acc[r * n + c + 1] = a1
            acc[r * n + c + 2] = a2
            acc[r * n + c + 3] = a3


@njit(inline="always")
def flip_row(x, xu, r, k, depth):
    """``xu[:k] = x[r * k : (r + 1) * k] + 128`` as unsigned bytes (the sign bit flipped:
    ``vpdpbusd``'s unsigned operand), zeros to ``depth``."""
    row = x[r * k : (r + 1) * k]
    for j in range(k):
        xu[j] = row[j] ^ np.int8(-128)
    for j in range(k, depth):
        xu[j] = 0


@njit(nogil=True)
def byte_dot_rows(x, xu, w, acc, m, k, depth, n16):
    """``acc[r, c] = (x[r] + 128) . w[c]`` in int32 lanes, by ``vpdpbusd`` (AVX512-VNNI: 4
    products a lane, unsigned input bytes by signed weights): each row's bytes, their sign bit
    flipped, into ``xu`` (``depth``, a multiple of 4: zeros past ``k``), then 4 blocks of 16
    units at a time (4 independent sums, one broadcast of 4 input bytes for 4 instructions).
    ``w`` is packed per 16-unit block, per 4 depths, 16 units' 4 bytes (``depth * 16`` bytes a
    block); the caller takes ``128 * sum(w[c])`` off each sum."""
    blocks = n16 // 16
    span = depth * 16
    for r in range(m):
        flip_row(x, xu, r, k, depth)
        b = 0
        while b < blocks:
            four = b + 4 <= blocks
            a0, a1, a2, a3 = i32x16_zero(), i32x16_zero(), i32x16_zero(), i32x16_zero()
            wp = b * span
            for j in range(0, depth, 4):
                v = splat_i32x16(xu, j)
                a0 = dot_u8s8(a0, v, load_i32x16(w, wp))
                if four:
                    a1 = dot_u8s8(a1, v, load_i32x16(w, wp + span))
                    a2 = dot_u8s8(a2, v, load_i32x16(w, wp + 2 * span))
                    a3 = dot_u8s8(a3, v, load_i32x16(w, wp + 3 * span))
                wp += 64
            q = r * n16 + b * 16
            narrow_store16(acc, q, a0, 16, -2147483648, 2147483647)
            if four:
                narrow_store16(acc, q + 16, a1, 16, -2147483648, 2147483647)
                narrow_store16(acc, q + 32, a2, 16, -2147483648, 2147483647)
                narrow_store16(acc, q + 48, a3, 16, -2147483648, 2147483647)
            b += 4 if four else 1


@njit(nogil=True)
def dot_rows_int64(x, w, acc, m, k, n):
    """``acc[r, c] = x[r] . w[c]`` in int64 (sums that may leave int32: 16x8 over long rows)."""
    for r in range(m):
        row = x[r * k : (r + 1) * k]
        for c in range(n):
            weights = w[c * k : (c + 1) * k]
            a = np.int64(0)
            for j in range(k):
                a += np.int64(row[j]) * np.int64(weights[j])
            acc[r * n + c] = a


@njit(nogil=True)
def requantize_rows(acc, stride, offset, real, o, m, n, low, high, zero):
    """``o[r, c] = clamp(round(real[c] * (acc[r, c] + offset[c])), low, high) + zero`` (double,
    halves away from zero), as numlite's Requantizer in its ``real`` mode; ``acc``'s rows are
    ``stride`` long."""
    for r in range(m):
        for c in range(n):
            v = np.float64(acc[r * stride + c] + offset[c]) * real[c]
            v = np.floor(np.abs(v) + 0.5) if v >= 0 else -np.floor(np.abs(v) + 0.5)
            v = low if v < low else (high if v > high else v)
            o[r * n + c] = np.int64(v) + zero


@emits("FULLY_CONNECTED", quantized=True)
def emit_fully_connected(node, g) -> None:
    x, w = node.ins[0], node.ins[1]
    bias = node.ins[2] if len(node.ins) > 2 else None
    out = node.outs[0]
    k = node.kernel
    require(x.dtype in (INT8, INT16) and w.dtype == INT8 and out.dtype == x.dtype and len(node.outs) == 1,
            f"quantized FULLY_CONNECTED of {x.dtype.name} by {w.dtype.name} is not compiled")
    require(w.value is not None and (bias is None or bias.value is not None),
            "quantized FULLY_CONNECTED with weights or bias computed at run time is not compiled")
    require(getattr(k, "requant_mode", None) == "real" and k.w_zp == 0, "this FULLY_CONNECTED form is not compiled")
    n, depth = w.shape
    m = x.size // depth if depth else 0
    require(m * n == out.size and depth > 0, f"FULLY_CONNECTED of {x.shape} by {w.shape} into {out.shape} is not compiled")
    weights = np.asarray(w.value).reshape(n, depth)
    offset = -k.x_zp * weights.sum(axis=1, dtype=np.int64)
    if bias is not None:
        offset = offset + np.asarray(bias.value).reshape(-1).astype(np.int64)
    real = np.ascontiguousarray(np.broadcast_to(np.asarray(k.real, np.float64), (n,)))
    low, high = float(k.act_min - k.out_zp), float(k.act_max - k.out_zp)
    # every partial sum of raw inputs times weights is within |x|max * max_c sum_k |w[c, k]|
    largest = -int(np.iinfo(x.dtype).min)
    narrow = largest * int(np.abs(weights.astype(np.int64)).sum(axis=1).max()) < 2**31
    if narrow and VNNI and x.dtype == INT8:
        # int8 by int8 on bytes: the weights packed for vpdpbusd, 128 * sum(w) off the offset
        depth_p, n_p = -(-depth // 4) * 4, -(-n // 16) * 16
        padded = np.zeros((n_p, depth_p), np.int8)
        padded[:n, :depth] = weights
        packed = padded.reshape(n_p // 16, 16, depth_p // 4, 4).transpose(0, 2, 1, 3)
        offset = offset - 128 * weights.sum(axis=1, dtype=np.int64)
        acc = g.temp((m * n_p,), np.int32)
        xu = g.temp((depth_p,), INT8)
        g.line(f"{g.kernel(byte_dot_rows)}({x.name}, {xu.name}, {g.const(packed.reshape(-1))}, {acc.name}, {m}, {depth}, {depth_p}, "
               f"{n_p})")
    elif narrow:
        # weights padded with zeros to a multiple of 4 rows (the kernel's blocks) of PAD_DEPTH
        # (short rows only: the vectorized loop's scalar remainder costs more than the padding
        # there, 120: 0.36 us against 0.2 for 128, measured; long rows are read in place)
        depth_p = -(-depth // PAD_DEPTH) * PAD_DEPTH if depth < PAD_BELOW else depth
        n_p = -(-n // 4) * 4
        packed = np.zeros((n_p, depth_p), np.int8)
        packed[:n, :depth] = weights
        w_name = w.name if packed.shape == weights.shape else g.const(packed.reshape(-1))
        x_name = x.name
        if depth_p != depth:
            x_name = g.temp((m * depth_p,), x.dtype).name
            g.line(f"for r in range({m}):")
            g.line(f"    for j in range({depth}):")
            g.line(f"        {x_name}[r * {depth_p} + j] = {x.name}[r * {depth} + j]")
            g.line(f"    for j in range({depth}, {depth_p}):")
            g.line(f"        {x_name}[r * {depth_p} + j] = 0")
        acc = g.temp((m * n_p,), np.int64)
        g.line(f"{g.kernel(dot_rows_int32)}({x_name}, {w_name}, {acc.name}, {m}, {depth_p}, {n_p})")
    else:
        n_p = n
        acc = g.temp((m * n,), np.int64)
        g.line(f"{g.kernel(dot_rows_int64)}({x.name}, {w.name}, {acc.name}, {m}, {depth}, {n})")
    g.line(f"{g.kernel(requantize_rows)}({acc.name}, {n_p}, {g.const(offset)}, {g.const(real)}, {out.name}, {m}, {n}, "
           f"{low!r}, {high!r}, {int(k.out_zp)})")
