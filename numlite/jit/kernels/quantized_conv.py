"""int8 (and uint8) CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D and AVERAGE_POOL_2D, bit-exact with
LiteRT's integer kernels (numlite's NumPy kernels in numlite/kernels/quantized_conv.py and
quantized.py are the reference; their prepared parameters, ``node.kernel``, are used as they are).

**The byte kinds** (below, where the machine has them): an int8 CONV_2D runs on 8-bit lanes
(``vpdpbusd``, AVX512-VNNI: :data:`KIND_BYTE_CONV`) and an int8 DEPTHWISE_CONV_2D on float32
lanes read from a byte copy of its input (:data:`KIND_BYTE_DEPTHWISE`), each requantizing its
sums in registers as it stores them. A convolution whose one output pixel reads the whole input
(streaming models) has plain kernels of its own on the same machines (:func:`window_conv`,
:func:`window_depthwise`). The other forms (and every form on other machines) take the float32 path:

**The convolutions run the float32 register-blocked loop kernels** (:mod:`numlite.jit.kernels.conv`,
with their parallel twins for ``num_threads``) on exact integers:

1. the input, less its zero point, is copied into a float32 temporary (``x - x_zp``: at most 255
   in magnitude; LiteRT skips the points outside the input, which is a centered value of 0, so
   the float kernels' zero padding is exact too);
2. the filter, less its zero point (0 for int8, the uint8 weights' own otherwise), is packed as
   float32 at generation, with a zero bias and no activation;
3. the kernel's float32 sums are then exact integers: every product is an integer of at most
   2**16, and generation proves that every partial sum, in any order, is at most
   ``max|x - x_zp| * max_c sum |w[c] - w_zp|`` <= 2**24, where float32 holds every integer (the
   NumPy engine's own bound for its float32 BLAS path, ``quantized_blocks``). A node beyond the
   bound stays on NumPy, and the report says why. The sum is then LiteRT's int32 accumulator
   ``sum (x - x_zp) * (w - w_zp)``, exactly;
4. one pass adds the int32 bias (wrapping as C++'s int32 does), rescales each channel by its
   fixed-point multiplier and shift (the NumPy kernel's, per channel or per tensor) with the
   rounding LiteRT's builtin kernels use (:func:`rescale`: halves up at the shift, as the NumPy
   kernels' ``halves_up`` channels; DEPTHWISE_CONV_2D's channels past the last whole 8-channel
   block, grouped CONV_2D and uint8 DEPTHWISE_CONV_2D as gemmlowp, away from zero),
   adds the output zero point and clamps to the fused activation's ``[act_min, act_max]``.

Why float32 and not int8 x int8 -> int32 lanes: the float tile (8-lane FMAs, 30-42 GMAC/s on one
AVX2 core) and its geometry (padding, strides, dilations, groups, depth multipliers, threads)
exist and are tested; an int8 tile needs its own packing and widening multiply-adds. The cost is
the two passes around each node (the input converted, the sums requantized) and float32
temporaries four times the int8 tensors' size (shared by lifetime in the arenas).

int16 activations (16x8) stay on NumPy: their sums need int64 and exceed float32's exact range.

**Pools** take 16 channels at a time in int32 lanes (:mod:`numlite.jit.kernels.simd`): the
maximum of the raw values (the window clipped to the input), or the sum divided by the in-bounds
count rounded half away from zero with C's truncating division, as LiteRT's reference
``AveragePool``; both clamped to the fused activation.

**SPLIT, SPLIT_V** on quantized tensors copy raw values, as LiteRT and the NumPy engine do (they
are not in ``codegen.MOVES_ELEMENTS`` because their data input is not input 0 for SPLIT, and
their outputs are several): the plain emitter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, require
from numlite.jit.kernels.conv import _dw_row3, _dw_row5, _pixel, call, conv_node, coordinates, depthwise_node, fill, geometry, \
    pixels8, unit_span, work_units
from numlite.jit.kernels.quantized import flip_row, multiply_by_quantized_multiplier
from numlite.jit.kernels.simd import AVX512, VNNI, add_i32x16, dot_u8s8, fill_i32x16, fma16, load16, load_i32x16, max_i32x16, \
    mul_i32x16, narrow_store16, requantize_store16, splat_i32x16, to_i32x16, widen16

INT8, UINT8 = np.dtype(np.int8), np.dtype(np.uint8)
F32 = np.dtype(np.float32)
FLOAT32_EXACT = 1 << 24  # every integer up to this magnitude is a float32


@body
def center(x, xf, zero):
    """``xf = x - zero`` as float32 (exact; float32 arithmetic, so that LLVM vectorizes it: an
    int64 to float32 conversion has no AVX2 instruction, and took 1.7 ns an element)."""
    z = np.float32(zero)
    for i in range(x.size):
        xf[i] = np.float32(x[i]) - z


@njit(inline="always")
def rescale(x, multiplier, shift):
    """LiteRT's rescale of an int32 sum in its integer CONV_2D and DEPTHWISE_CONV_2D (the
    builtin kernels of ai-edge-litert, measured): the rounding doubling high multiply
    ``(x * m + 2**30) >> 31``, then a rounding right shift by ``-shift`` that rounds halves UP
    (``(v + 2**(r - 1)) >> r``), not away from zero as gemmlowp's RoundingDivideByPOT (and
    :func:`numlite.jit.kernels.quantized.multiply_by_quantized_multiplier`) does: on
    ``tests/test_jit_quantized.py``'s forms and MobileNetV2 the two differ on 0.1-0.7% of the
    outputs, the negative ones at exactly half, and LiteRT gives the halves-up value every time
    (the NumPy kernels' ``halves_up`` channels round the same way). ``x`` in int64, wrapped to int32 first (C++'s int32 arithmetic)."""
    a = np.int64(np.int32(np.int64(np.int32(x)) << (shift if shift > 0 else 0)))
    v = (a * multiplier + (1 << 30)) >> 31
    if shift < 0:
        v = (v + (np.int64(1) << (-shift - 1))) >> -shift
    return v


@body
def requantize_channels(acc, p, o, pixels, channels, start, away, zero, low, high):
    """``o[m, c] = clamp(rescale(int32(acc[m, c] + bias[c]), mult[c], shift[c]) + zero, low, high)``
    for the channels ``c`` from ``start``, rounded as :func:`rescale` below channel ``away``
    and as gemmlowp (:func:`multiply_by_quantized_multiplier`) from it; ``p`` holds ``bias``,
    ``mult`` and ``shift`` one after the other (``channels`` each)."""
    for m in range(pixels):
        q = m * channels
        for c in range(start, channels):
            x = np.int64(acc[q + c]) + p[c]
            if c < away:
                v = rescale(x, p[channels + c], p[2 * channels + c]) + zero
            else:
                v = multiply_by_quantized_multiplier(x, p[channels + c], p[2 * channels + c]) + zero
            o[q + c] = low if v < low else (high if v > high else v)


@body
def requantize_halves_up(acc, bias, mult, rounding, right, o, pixels, channels, zero, low, high):
    """:func:`requantize_channels` for channels whose shifts are all at most 0, in one rounding:
    ``(a * m + 2**30 + 2**(30 + r)) >> (31 + r)`` equals the two roundings of :func:`rescale`
    (``floor((floor(z) + K) / 2**r) == floor((z + K) / 2**r)`` for an integer ``K``; at
    ``r == 0`` there is no second rounding, and no ``2**(30 + r)``). Written
    so that LLVM vectorizes it: an int32 ``a`` (the float32 sum converted, plus the int32 bias,
    wrapped), the int32 multiplier widened (``vpmuldq``), one shift; 3-4x faster than the
    general loop (2.0 against 6.3-9.3 ns an element, measured at load 5-10)."""
    for m in range(pixels):
        q = m * channels
        for c in range(channels):
            a = np.int32(np.int32(acc[q + c]) + bias[c])
            v = ((np.int64(a) * np.int64(mult[c]) + rounding[c]) >> right[c]) + zero
            o[q + c] = min(max(v, low), high)


def _conv_operands(node: Any) -> tuple:
    x, f = node.ins[0], node.ins[1]
    bias = node.ins[2] if len(node.ins) > 2 else None
    out = node.outs[0]
    k = node.kernel
    require(x.dtype in (INT8, UINT8) and out.dtype == x.dtype and len(node.outs) == 1,
            f"quantized {node.op_name} of {x.dtype.name} is compiled for int8 and uint8 activations (16x8 stays on NumPy)")
    require(k is not None and getattr(k, "requant_mode", None) == "fixed" and not k.wide and getattr(k, "finish", None) is None,
            f"this quantized {node.op_name} form is not compiled")
    require(f.value is not None and (bias is None or bias.value is not None),
            f"quantized {node.op_name} with a filter or bias computed at run time is not compiled")
    require(len(x.shape) == len(f.shape) == len(out.shape) == 4, f"quantized {node.op_name} of {x.shape} by {f.shape} is not compiled")
    return x, f, bias, out, k


@emits("CONV_2D", "DEPTHWISE_CONV_2D", quantized=True)
def emit_conv(node: Any, g: Any) -> None:
    x, f, bias, out, k = _conv_operands(node)
    depthwise = node.op_name == "DEPTHWISE_CONV_2D"
    weights = np.asarray(f.value).astype(np.int64) - k.w_zp
    channels = f.shape[3] if depthwise else f.shape[0]
    biases = np.zeros(channels, np.int64) if bias is None else np.asarray(bias.value).reshape(-1).astype(np.int64)
    require(biases.size == channels, f"bias of {biases.size} elements for {channels} channels is not compiled")
    if _one_window(node, x, f, out, depthwise):
        if depthwise and _window_depthwise_fits(x, k, channels):
            window_depthwise_node(node, g, x, out, weights, biases, k)
            return
        if not depthwise and _byte_tile_fits(x, f, k, channels):
            window_conv_node(node, g, x, out, weights, biases, k)
            return
    if depthwise and _byte_depthwise_fits(x, k, channels, weights, biases):
        byte_depthwise_node(node, g, x, out, weights, biases, k)
        return
    if not depthwise and _byte_tile_fits(x, f, k, channels):
        byte_conv_node(node, g, x, out, weights, biases, k)
        return
    l1 = np.abs(weights).reshape(-1, channels).sum(axis=0) if depthwise else np.abs(weights).reshape(channels, -1).sum(axis=1)
    info = np.iinfo(x.dtype)
    deviation = max(abs(int(info.min) - k.x_zp), abs(int(info.max) - k.x_zp))
    require(deviation * int(l1.max(initial=0)) <= FLOAT32_EXACT,
            f"quantized {node.op_name} whose sums may exceed 2**24 (float32's exact integers) is not compiled")
    if out.size == 0:
        return
    xf = g.temp(x.shape, F32)
    acc = g.temp(out.shape, F32)
    g.line(f"{g.kernel(center)}({x.name}, {xf.name}, {int(k.x_zp)})")
    emit = depthwise_node if depthwise else conv_node
    emit(node, g, xf, acc, weights.astype(np.float32), np.zeros(channels, np.float32), 0, [0.0, 0.0])
    multipliers = np.broadcast_to(np.asarray(k.multiplier, np.int64), (channels,))
    shifts = np.broadcast_to(np.asarray(k.shift, np.int64), (channels,))
    tail = f"{out.name}, {out.size // channels}, {channels}"
    clamp = f"{int(k.out_zp)}, {int(k.act_min)}, {int(k.act_max)})"
    # The channels whose halves LiteRT rounds up come first, the rest away from zero: the NumPy
    # kernel's rule (halves_up: int8 DEPTHWISE_CONV_2D's whole 8-channel blocks, every channel of
    # an ungrouped CONV_2D; none of a grouped CONV_2D or a uint8 DEPTHWISE_CONV_2D)
    away = int(np.count_nonzero(np.broadcast_to(k.halves_up(channels), (channels,))))
    start = 0
    if away and np.all(shifts <= 0) and np.all(shifts >= -31):  # (every term of the one rounding below 2**63)
        right = 31 - shifts
        # (no second rounding at a shift of 0: 2**(30 + r) is then not part of it)
        rounding = (np.int64(1) << 30) + np.where(shifts < 0, np.int64(1) << (right - 1), 0)
        # the bias wrapped to int32 as C++ adds it (it is an int32 tensor: no change)
        consts = [g.const(biases.astype(np.int32)), g.const(multipliers.astype(np.int32)), g.const(rounding), g.const(right)]
        g.line(f"{g.kernel(requantize_halves_up)}({acc.name}, {', '.join(consts)}, {tail}, {clamp}")
        start = away  # the channels rounded away from zero, again
    if start < channels:  # a multiplier above 1 (a left shift first), or the scalar channels
        p = g.const(np.concatenate([biases, multipliers, shifts]))
        g.line(f"{g.kernel(requantize_channels)}({acc.name}, {p}, {tail}, {start}, {away}, {clamp}")


# -- pools ------------------------------------------------------------------------------------------


@body
def pool_int(x, o, acc, n, h, w, c, oh, ow, fh, fw, sh, sw, top, left, average, low, high):
    """Integer MAX_POOL_2D / AVERAGE_POOL_2D over NHWC, 16 channels at a time in int32 lanes
    (simd.widen16: a loop over a pixel's channels, left to LLVM, ran scalar), the window
    clipped to the input; ``acc``: 16 int32 of working memory (the average's division)."""
    for b in range(n):
        for oy in range(oh):
            y0 = max(oy * sh - top, 0)
            y1 = min(oy * sh - top + fh, h)
            for ox in range(ow):
                x0 = max(ox * sw - left, 0)
                x1 = min(ox * sw - left + fw, w)
                q = ((b * oh + oy) * ow + ox) * c
                count = max((y1 - y0) * (x1 - x0), 1)
                half = count // 2
                for c0 in range(0, c, 16):
                    k = min(16, c - c0)
                    a = fill_i32x16(0 if average else -2147483648)
                    for iy in range(y0, y1):
                        for ix in range(x0, x1):
                            v = widen16(x, ((b * h + iy) * w + ix) * c + c0, k)
                            a = add_i32x16(a, v) if average else max_i32x16(a, v)
                    if not average:
                        narrow_store16(o, q + c0, a, k, low, high)
                        continue
                    narrow_store16(acc, 0, a, 16, -2147483648, 2147483647)
                    for j in range(k):  # C's truncating division, rounded half away from zero
                        v = acc[j]
                        v = (v + half) // count if v > 0 else -((half - v) // count)
                        o[q + c0 + j] = low if v < low else (high if v > high else v)


@emits("MAX_POOL_2D", "AVERAGE_POOL_2D", quantized=True)
def emit_pool(node: Any, g: Any) -> None:
    (x,), (out,) = node.ins, node.outs
    k = node.kernel
    require(x.dtype in (INT8, UINT8, np.dtype(np.int16)) and out.dtype == x.dtype and k is not None,
            f"quantized {node.op_name} of {x.dtype.name} is not compiled")
    require(len(x.shape) == len(out.shape) == 4 and node.options is not None, f"quantized {node.op_name} of {x.shape} is not compiled")
    n, h, w, c = x.shape
    fh, fw = int(node.options.filter_height), int(node.options.filter_width)
    (sh, sw), _, (oh, ow), (top, left) = geometry(node, x, fh, fw, dilated=False)
    require(out.shape == (n, oh, ow, c), f"quantized {node.op_name} into {out.shape} is not compiled")
    if out.size == 0:
        return
    low, high = (int(v) for v in k.range)
    acc = g.temp((16,), np.int32)
    average = int(node.op_name == "AVERAGE_POOL_2D")
    g.line(f"{g.kernel(pool_int)}({x.name}, {out.name}, {acc.name}, {n}, {h}, {w}, {c}, {oh}, {ow}, {fh}, {fw}, {sh}, {sw}, "
           f"{top}, {left}, {average}, {low}, {high})")


# -- SPLIT, SPLIT_V: raw values --------------------------------------------------------------------


@emits("SPLIT", "SPLIT_V", quantized=True)
def emit_split(node: Any, g: Any) -> None:
    from numlite.jit.kernels.layout import emit_split as plain

    plain(node, g)


# -- CONV_2D on int8 lanes (AVX512-VNNI) -------------------------------------------------------------
#
# Where the machine has ``vpdpbusd`` (simd.VNNI), the int8 CONV_2D runs on bytes: a tile of 8
# output pixels by 16 channels in 8 registers of int32 sums, as the float32 tile of conv.py, but
# each instruction adds 4 input channels' products (64 where a float32 FMA adds 16), and the
# store step requantizes the sums in registers (simd.requantize_store16): no float32 copy of the
# input, no buffer of sums, no second pass.
#
# ``vpdpbusd`` multiplies unsigned bytes by signed ones. The input is copied into a working
# buffer as ``x + 128`` (an XOR of the sign bit), with a border of ``x_zp + 128`` where a window
# reaches outside it (LiteRT's padding is the zero point: a centered 0); the filter stays int8.
# Then ``sum (x + 128) * w == sum (x - x_zp) * w + (128 + x_zp) * sum w`` for every pixel, so the
# bias is corrected once per channel at generation; int32 sums wrap as LiteRT's do, so the sums
# are LiteRT's accumulators exactly, with no bound to prove. The 4 channels of a dot product are
# 4 consecutive bytes of a filter row (``kw * c`` of them with a dilation of 1, else ``c``),
# padded with zero weights to a multiple of 4: the tile may read up to 3 bytes past a row, which
# the zero weights cancel (the buffer has 64 bytes of slack at its end).

# The int64 parameters of a byte CONV_2D node
(Q_N, Q_H, Q_W, Q_C, Q_HS, Q_WS, Q_OH, Q_OW, Q_OC, Q_KH, Q_KW, Q_SH, Q_SW, Q_DH, Q_DW, Q_TOP, Q_LEFT, Q_BLOCKS, Q_CHUNK, Q_RUN,
 Q_COLUMNS, Q_FILL, Q_ZERO, Q_LOW, Q_HIGH, Q_PARAMS, Q_SPLIT) = range(27)  # fmt: skip
KIND_BYTE_CONV = 8  # its loop kernel kind (numlite.jit.kernels.loops)
TILE = 8  # output pixels of a tile
PARAM_BYTES = 384  # per 16-channel block: bias (16 int32), multiplier (16 int32), rounding, right shift (16 int64 each)
SLACK = 64  # bytes past the working buffer's input, read (times zero weights) by the last dot products


def _byte_tile_fits(x: Any, f: Any, k: Any, channels: int) -> bool:
    """Whether an int8 CONV_2D runs on the byte tile: the machine has it, int8 activations and
    symmetric int8 weights, no groups, and every channel rounded as
    :func:`requantize_halves_up` (halves up, multipliers at most 1)."""
    if not VNNI or x.dtype != INT8 or f.dtype != INT8 or int(k.w_zp) != 0 or x.shape[3] != f.shape[3]:
        return False
    shifts = np.broadcast_to(np.asarray(k.shift, np.int64), (channels,))
    halves_up = np.broadcast_to(k.halves_up(channels), (channels,))
    return bool(np.all(halves_up) and np.all(shifts <= 0) and np.all(shifts >= -31))


@body
def byte_conv_setup(x, o, src, f, p):
    """The input as unsigned bytes (``x + 128``) into the working buffer, with its border of
    the zero point; the number of units (of ``CHUNK`` output pixels by a ``SPLIT``-th of the
    channel blocks: conv.work_units)."""
    n, h, w, c, hs, ws, top, left = p[Q_N], p[Q_H], p[Q_W], p[Q_C], p[Q_HS], p[Q_WS], p[Q_TOP], p[Q_LEFT]
    copy_padded(x, src, n, h, w, c, c, hs, ws, top, left, np.int8(p[Q_FILL]), np.int8(-128))
    return (n * p[Q_OH] * p[Q_OW] + p[Q_CHUNK] - 1) // p[Q_CHUNK] * p[Q_SPLIT]


@njit(inline="always")
def copy_padded(x, src, n, h, w, c, cp, hs, ws, top, left, border, flip):
    """``src`` (``[n, hs, ws, cp]`` bytes) = ``border``, with ``x ^ flip`` (``[n, h, w, c]``) at
    ``(top, left)`` and ``border`` in the channels past ``c`` (the rows and columns of ``x``
    past ``hs`` or ``ws`` are never read by a window): the byte kinds' working buffers, as
    conv.pad_into (views indexed from 0, so that LLVM vectorizes)."""
    rows, cols = min(h, hs - top), min(w, ws - left)
    span = ws * cp
    for b in range(n):
        for y in range(hs):
            row = src[(b * hs + y) * span : (b * hs + y + 1) * span]
            iy = y - top
            if iy < 0 or iy >= rows:
                fill(row, 0, span, border)
                continue
            fill(row, 0, left * cp, border)
            line = x[(b * h + iy) * w * c : (b * h + iy) * w * c + cols * c]
            if c == cp:  # one copy of the row's pixels
                inner = row[left * cp : (left + cols) * cp]
                for q in range(cols * c):
                    inner[q] = line[q] ^ flip
            else:
                for ix in range(cols):
                    pixel, values = row[(left + ix) * cp : (left + ix + 1) * cp], line[ix * c : (ix + 1) * c]
                    for ch in range(c):
                        pixel[ch] = values[ch] ^ flip
                    fill(pixel, c, cp, border)
            fill(row, (left + cols) * cp, span, border)


@body
def byte_conv_units(x, o, src, f, p, u0, u1):
    """Units ``[u0, u1)`` of the byte CONV_2D (conv.unit_span), read from ``src``; ``f``
    holds the packed filter (per 16-channel block, per filter row and column, 4 bytes of 16
    channels at a time), then the blocks' parameters (:data:`PARAM_BYTES` each)."""
    c, hs, ws = p[Q_C], p[Q_HS], p[Q_WS]
    oh, ow, oc, kh, kw, sh, sw, dh, dw = p[Q_OH], p[Q_OW], p[Q_OC], p[Q_KH], p[Q_KW], p[Q_SH], p[Q_SW], p[Q_DH], p[Q_DW]
    blocks, chunk, run, columns = p[Q_BLOCKS], p[Q_CHUNK], p[Q_RUN], p[Q_COLUMNS]
    zero, low, high, params = p[Q_ZERO], p[Q_LOW], p[Q_HIGH], p[Q_PARAMS]
    linear = kh == 1 and kw == 1 and sh == 1 and sw == 1 and hs == oh and ws == ow  # pixel m reads src[m * c:]
    pixels = p[Q_N] * oh * ow
    taps = kh * columns * run * 16  # packed filter bytes per block
    for u in range(u0, u1):
        m0, m1, b0, b1 = unit_span(u, chunk, pixels, p[Q_SPLIT], blocks)
        for blk in range(b0, b1):
            ch = blk * 16
            count = min(16, oc - ch)
            wb = blk * taps
            at = params + blk * PARAM_BYTES
            m = m0
            b, oy, ox = coordinates(m0, oh, ow)
            while m + TILE <= m1:
                if linear:
                    s0 = m * c
                    s1, s2, s3, s4, s5, s6, s7 = s0 + c, s0 + 2 * c, s0 + 3 * c, s0 + 4 * c, s0 + 5 * c, s0 + 6 * c, s0 + 7 * c
                else:
                    s0, s1, s2, s3, s4, s5, s6, s7, b, oy, ox = pixels8(b, oy, ox, oh, ow, hs, ws, c, sh, sw, 0)
                a0 = load_i32x16(f, at)
                a1, a2, a3, a4, a5, a6, a7 = a0, a0, a0, a0, a0, a0, a0
                wp = wb
                for ky in range(kh):
                    for kx in range(columns):
                        t = (ky * dh * ws + kx * dw) * c
                        for j in range(t, t + run, 4):
                            wv = load_i32x16(f, wp)
                            a0 = dot_u8s8(a0, splat_i32x16(src, s0 + j), wv)
                            a1 = dot_u8s8(a1, splat_i32x16(src, s1 + j), wv)
                            a2 = dot_u8s8(a2, splat_i32x16(src, s2 + j), wv)
                            a3 = dot_u8s8(a3, splat_i32x16(src, s3 + j), wv)
                            a4 = dot_u8s8(a4, splat_i32x16(src, s4 + j), wv)
                            a5 = dot_u8s8(a5, splat_i32x16(src, s5 + j), wv)
                            a6 = dot_u8s8(a6, splat_i32x16(src, s6 + j), wv)
                            a7 = dot_u8s8(a7, splat_i32x16(src, s7 + j), wv)
                            wp += 64
                q = m * oc + ch
                requantize_store16(o, q, a0, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + oc, a1, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + 2 * oc, a2, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + 3 * oc, a3, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + 4 * oc, a4, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + 5 * oc, a5, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + 6 * oc, a6, f, at + 64, count, zero, low, high)
                requantize_store16(o, q + 7 * oc, a7, f, at + 64, count, zero, low, high)
                m += TILE
            if linear:  # the leftover pixels' coordinates (the tiles did not step them)
                b, oy, ox = coordinates(m, oh, ow)
            while m < m1:
                s0, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, 0)
                a0 = load_i32x16(f, at)
                wp = wb
                for ky in range(kh):
                    for kx in range(columns):
                        t = (ky * dh * ws + kx * dw) * c
                        for j in range(t, t + run, 4):
                            a0 = dot_u8s8(a0, splat_i32x16(src, s0 + j), load_i32x16(f, wp))
                            wp += 64
                requantize_store16(o, m * oc + ch, a0, f, at + 64, count, zero, low, high)
                m += 1


def _requantization(k: Any, biases: np.ndarray, channels: int) -> np.ndarray:
    """Per 16-channel block, :data:`PARAM_BYTES` bytes: the int32 ``biases`` (wrapped as C++'s
    int32), the channels' multipliers, then the rounding and right shift of
    :func:`requantize_halves_up` (int64), for ``simd.requantize_store16``. Past the last
    channel, zeros (a shift of 31)."""
    blocks = -(-channels // 16)
    multipliers = np.broadcast_to(np.asarray(k.multiplier, np.int64), (channels,))
    shifts = np.broadcast_to(np.asarray(k.shift, np.int64), (channels,))
    right = 31 - shifts
    # (no second rounding at a shift of 0: see requantize_halves_up)
    rounding = (np.int64(1) << 30) + np.where(shifts < 0, np.int64(1) << (right - 1), 0)
    params = np.zeros((blocks, PARAM_BYTES), np.uint8)
    for values, dtype, offset, rest in ((biases, np.int32, 0, 0), (multipliers, np.int32, 64, 0), (rounding, np.int64, 128, 0),
                                        (right, np.int64, 256, 31)):  # fmt: skip
        column = np.full(blocks * 16, rest, dtype)
        column[:channels] = (values & 0xFFFFFFFF).astype(np.uint32).view(np.int32) if dtype == np.int32 else values
        params[:, offset : offset + 16 * np.dtype(dtype).itemsize] = column.reshape(blocks, 16).view(np.uint8)
    return params.reshape(-1)


def _blob(*parts: np.ndarray) -> np.ndarray:
    """Byte arrays one after the other, as the float32 words of a loop kernel's constants
    (``conv.call``), which the byte kinds read as bytes."""
    blob = np.concatenate([part.view(np.uint8) for part in parts])
    floats = np.zeros(-(-blob.size // 4), np.float32)
    floats.view(np.uint8)[: blob.size] = blob
    return floats


def byte_conv_node(node: Any, g: Any, x: Any, out: Any, weights: np.ndarray, biases: np.ndarray, k: Any) -> None:
    """An int8 CONV_2D node's call of the byte tile's loop kernel (``weights`` ``[oc, kh, kw, c]``
    and ``biases`` as int64; ``k`` the NumPy kernel's prepared parameters)."""
    n, h, w, c = x.shape
    oc, kh, kw, _ = weights.shape
    geo = geometry(node, x, kh, kw)
    (sh, sw), (dh, dw), (oh, ow), (top, left) = geo
    require(out.shape == (n, oh, ow, oc), f"CONV_2D into {out.shape} is not compiled")
    if out.size == 0:
        return
    hs, ws = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1  # the rows and columns the windows cover
    merged = dw == 1  # a filter row's taps are contiguous in the source
    columns, run = (1, kw * c) if merged else (kw, c)
    run4 = -(-run // 4) * 4
    blocks = -(-oc // 16)
    packed = np.zeros((blocks * 16, kh, columns, run4), np.int8)
    packed[:oc, :, :, :run] = weights.reshape(oc, kh, columns, run)
    # per block, row, column and 4 bytes of the run: 16 channels' 4 bytes (vpdpbusd's operand)
    packed = packed.reshape(blocks, 16, kh, columns, run4 // 4, 4).transpose(0, 2, 3, 4, 1, 5)
    fill = int(k.x_zp) + 128
    correction = fill * weights.reshape(oc, -1).sum(axis=1)
    floats = _blob(packed.reshape(-1).view(np.uint8), _requantization(k, biases - correction, oc))
    src = g.temp((n * hs * ws * c + SLACK,), INT8)
    chunk, split = work_units(n * oh * ow, blocks, g.gen.threads)
    p = [n, h, w, c, hs, ws, oh, ow, oc, kh, kw, sh, sw, dh, dw, top, left, blocks, chunk, run4, columns, fill - 256 if fill > 127 else fill,
         int(k.out_zp), int(k.act_min), int(k.act_max), packed.size, split]  # fmt: skip
    call(g, KIND_BYTE_CONV, x, out, src, p, floats, out.size * kh * kw * c)


# -- DEPTHWISE_CONV_2D with its requantization in the store step ------------------------------------
#
# The int8 DEPTHWISE_CONV_2D sums in float32 lanes as conv.py's does, from a working buffer of the
# raw int8 input with a border of the zero point and its channels padded to a multiple of 16 (so
# that every load is a whole 16-lane one and no window needs a bounds test). Each load widens 16
# bytes to float32 (simd.load16). Every window then covers input or zero points only, so
# ``sum (x - x_zp) * w == sum x * w - x_zp * sum w`` for every pixel, and the second term joins
# the bias at generation. The sums are exact integers in float32 (generation proves them within
# 2**24, bias included), and each tile converts and requantizes its sums in registers as it
# stores them (simd.to_i32x16, simd.requantize_store16): one byte copy of the input and one pass
# over the output, where the float32 path made a float32 copy, a buffer of sums and a second pass.

# The int64 parameters of a byte DEPTHWISE_CONV_2D node
(D_N, D_H, D_W, D_C, D_HS, D_WS, D_OH, D_OW, D_KH, D_KW, D_SH, D_SW, D_DH, D_DW, D_TOP, D_LEFT, D_CP, D_XZP, D_ZERO, D_LOW, D_HIGH,
 D_BIAS, D_PARAMS) = range(23)  # fmt: skip
KIND_BYTE_DEPTHWISE = 9  # its loop kernel kind (numlite.jit.kernels.loops)


def _byte_depthwise_fits(x: Any, k: Any, channels: int, weights: np.ndarray, biases: np.ndarray) -> bool:
    """Whether an int8 DEPTHWISE_CONV_2D takes the byte kind: the machine's 16-lane tile, int8
    activations, a depth multiplier of 1, every channel rounded as :func:`requantize_halves_up`,
    and every sum with its bias and the zero point's term within float32's exact integers."""
    if not AVX512 or x.dtype != INT8 or x.shape[3] != channels:
        return False
    shifts = np.broadcast_to(np.asarray(k.shift, np.int64), (channels,))
    if not (np.all(np.broadcast_to(k.halves_up(channels), (channels,))) and np.all(shifts <= 0) and np.all(shifts >= -31)):
        return False
    sums = weights.reshape(-1, channels).sum(axis=0)
    l1 = np.abs(weights).reshape(-1, channels).sum(axis=0)
    return bool(np.all(128 * l1 + np.abs(biases - int(k.x_zp) * sums) <= FLOAT32_EXACT))


@body
def byte_depthwise_setup(x, o, src, f, p):
    """The int8 input into the working buffer ``[n, hs, ws, cp]`` with a border of the zero
    point (the channels past ``c`` hold it too: their weights are 0); the number of units
    (output rows)."""
    n, h, w, c, hs, ws, top, left, cp = p[D_N], p[D_H], p[D_W], p[D_C], p[D_HS], p[D_WS], p[D_TOP], p[D_LEFT], p[D_CP]
    copy_padded(x, src, n, h, w, c, cp, hs, ws, top, left, np.int8(p[D_XZP]), np.int8(0))
    return n * p[D_OH]


@body
def byte_depthwise_units(x, o, src, f, p, u0, u1):
    """Output rows ``[u0, u1)``: 4 pixels by 16 or 32 channels at a time (4 or 8 independent
    sums), each window's taps in the filter's order; the pixels past the last 4 one by one."""
    c, hs, ws, oh, ow, kh, kw, sh, sw, dh, dw, cp = p[D_C], p[D_HS], p[D_WS], p[D_OH], p[D_OW], p[D_KH], p[D_KW], p[D_SH], p[D_SW], \
        p[D_DH], p[D_DW], p[D_CP]  # fmt: skip
    zero, low, high, bias, params = p[D_ZERO], p[D_LOW], p[D_HIGH], p[D_BIAS], p[D_PARAMS]
    s = src  # int8: simd.load16 widens its bytes to float32
    fw = f[: 4 * (bias + cp)].view(np.float32)
    row, col, step = dh * ws * cp, dw * cp, sw * cp
    rows = (kw == 3 or kw == 5) and dw == 1 and sw == 1
    for r in range(u0, u1):
        b = r // oh
        oy = r - b * oh
        base = (b * hs + oy * sh) * ws * cp
        q0 = r * ow * c
        ox = 0
        while ox + 4 <= ow:
            t0 = base + ox * step
            ch = 0
            while ch + 32 <= cp:
                _byte_dw_tile(s, fw, o, f, t0, q0 + ox * c, ch, c, cp, kh, kw, step, row, col, bias, params, zero, low, high, True, rows)
                ch += 32
            if ch < cp:
                _byte_dw_tile(s, fw, o, f, t0, q0 + ox * c, ch, c, cp, kh, kw, step, row, col, bias, params, zero, low, high, False, rows)
            ox += 4
        for ox in range(ox, ow):
            t0 = base + ox * step
            for ch in range(0, cp, 16):
                a = load16(fw, bias + ch)
                for ky in range(kh):
                    for kx in range(kw):
                        a = fma16(load16(s, t0 + ky * row + kx * col + ch), load16(fw, (ky * kw + kx) * cp + ch), a)
                requantize_store16(o, q0 + ox * c + ch, to_i32x16(a), f, params + (ch // 16) * PARAM_BYTES + 64, min(16, c - ch),
                                   zero, low, high)  # fmt: skip


@njit(inline="always")
def _byte_dw_tile(s, fw, o, f, t0, q, ch, c, cp, kh, kw, step, row, col, bias, params, zero, low, high, pair, rows):
    """4 neighbouring output pixels (inputs ``t0 + k * step``) by the 16 channels from ``ch``,
    and the 16 after them when ``pair``; ``rows``: a 3- or 5-wide window at stride 1, whose
    pixels share input columns (conv._dw_row3, _dw_row5: the same order of the taps)."""
    a0 = load16(fw, bias + ch)
    a1, a2, a3 = a0, a0, a0
    e0 = load16(fw, bias + ch + 16) if pair else a0
    e1, e2, e3 = e0, e0, e0
    for ky in range(kh):
        if rows:
            t, wp = t0 + ky * row + ch, ky * kw * cp + ch
            if kw == 3:
                a0, a1, a2, a3 = _dw_row3(s, fw, t, wp, col, a0, a1, a2, a3)
                if pair:
                    e0, e1, e2, e3 = _dw_row3(s, fw, t + 16, wp + 16, col, e0, e1, e2, e3)
            else:
                a0, a1, a2, a3 = _dw_row5(s, fw, t, wp, col, a0, a1, a2, a3)
                if pair:
                    e0, e1, e2, e3 = _dw_row5(s, fw, t + 16, wp + 16, col, e0, e1, e2, e3)
            continue
        for kx in range(kw):
            t, wp = t0 + ky * row + kx * col + ch, (ky * kw + kx) * cp + ch
            wv = load16(fw, wp)
            a0, a1 = fma16(load16(s, t), wv, a0), fma16(load16(s, t + step), wv, a1)
            a2, a3 = fma16(load16(s, t + 2 * step), wv, a2), fma16(load16(s, t + 3 * step), wv, a3)
            if pair:
                wv = load16(fw, wp + 16)
                e0, e1 = fma16(load16(s, t + 16), wv, e0), fma16(load16(s, t + step + 16), wv, e1)
                e2, e3 = fma16(load16(s, t + 2 * step + 16), wv, e2), fma16(load16(s, t + 3 * step + 16), wv, e3)
    for k, a in enumerate((a0, a1, a2, a3)):
        _byte_dw_store(o, f, q + k * c, ch, c, params, zero, low, high, a)
    if pair:
        for k, e in enumerate((e0, e1, e2, e3)):
            _byte_dw_store(o, f, q + k * c, ch + 16, c, params, zero, low, high, e)


@njit(inline="always")
def _byte_dw_store(o, f, q, ch, c, params, zero, low, high, a):
    """A pixel's 16 sums from channel ``ch`` requantized into ``o[q + ch:]`` (those below ``c``)."""
    if ch < c:
        requantize_store16(o, q + ch, to_i32x16(a), f, params + (ch // 16) * PARAM_BYTES + 64, min(16, c - ch), zero, low, high)


def byte_depthwise_node(node: Any, g: Any, x: Any, out: Any, weights: np.ndarray, biases: np.ndarray, k: Any) -> None:
    """An int8 DEPTHWISE_CONV_2D node's call of the byte kind (``weights`` ``[1, kh, kw, c]``,
    less the weights' zero point, and ``biases``, as int64; ``k`` the NumPy kernel's prepared
    parameters)."""
    n, h, w, c = x.shape
    _, kh, kw, _ = weights.shape
    (sh, sw), (dh, dw), (oh, ow), (top, left) = geometry(node, x, kh, kw)
    require(out.shape == (n, oh, ow, c), f"DEPTHWISE_CONV_2D into {out.shape} is not compiled")
    if out.size == 0:
        return
    hs, ws = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    cp = -(-c // 16) * 16
    packed = np.zeros((kh, kw, cp), np.float32)
    packed[:, :, :c] = weights.reshape(kh, kw, c)
    bias = np.zeros(cp, np.float32)
    bias[:c] = biases - int(k.x_zp) * weights.reshape(-1, c).sum(axis=0)  # the zero point's term (exact: _byte_depthwise_fits)
    floats = _blob(packed.reshape(-1), bias, _requantization(k, biases, c))
    src = g.temp((n * hs * ws * cp + 16,), INT8)  # (16 bytes of slack: a 16-lane load past the last pixel's channels)
    p = [n, h, w, c, hs, ws, oh, ow, kh, kw, sh, sw, dh, dw, top, left, cp, int(k.x_zp), int(k.out_zp), int(k.act_min), int(k.act_max),
         kh * kw * cp, 4 * (kh * kw * cp + cp)]  # fmt: skip
    call(g, KIND_BYTE_DEPTHWISE, x, out, src, p, floats, out.size * kh * kw)


# -- one window: a convolution whose single output pixel reads the whole input ------------------------
#
# The convolutions of streaming models (the wake-word models of esphome/micro-wake-word-models:
# a ring buffer of the last frames, then a filter as tall as the buffer) have one output pixel
# per example, whose window is the whole input: a CONV_2D is then a FULLY_CONNECTED (the
# input's ``h, w, c`` elements in the filter rows' order) and a DEPTHWISE_CONV_2D one dot
# product of ``kh * kw`` taps per channel. Plain kernels (no tile, no working copy of a padded
# input, no loop-kernel call), requantizing in the store step as the byte kinds do: for those
# models' 1x1 convolutions of 60 channels the byte tile's setup and single-pixel path cost
# about 0.26 us a node, the float32 depthwise path's four calls about 0.32.


def _one_window(node: Any, x: Any, f: Any, out: Any, depthwise: bool) -> bool:
    """Whether the node has one output pixel per example, whose window (no padding, no
    dilation) is the whole input."""
    _, kh, kw, _ = f.shape
    (_, _), (dh, dw), (oh, ow), (top, left) = geometry(node, x, kh, kw)
    return (oh, ow, top, left, dh, dw) == (1, 1, 0, 0, 1, 1) and tuple(x.shape[1:3]) == (kh, kw) and out.size > 0


@njit(nogil=True)
def window_conv(x, xu, f, o, m, k, depth, oc, zero, low, high):
    """``o[r] = requantize((x[r] + 128) . w + bias')`` for each of the ``m`` rows of ``k``
    input bytes: byte_dot_rows' dot products on ``vpdpbusd`` (``xu``: the row, its sign bit
    flipped, zeros to ``depth``, a multiple of 4), up to 4 blocks of 16 channels at a time;
    ``f`` holds the packed filter (``depth * 16`` bytes a block), then each block's
    :data:`PARAM_BYTES` of requantization (the bias corrected for the flip and the zero point)."""
    blocks = (oc + 15) // 16
    span = depth * 16
    params = blocks * span
    for r in range(m):
        flip_row(x, xu, r, k, depth)
        b = 0
        while b < blocks:
            n = min(4, blocks - b)
            at = params + b * PARAM_BYTES
            a0 = load_i32x16(f, at)
            a1 = load_i32x16(f, at + PARAM_BYTES) if n > 1 else a0
            a2 = load_i32x16(f, at + 2 * PARAM_BYTES) if n > 2 else a0
            a3 = load_i32x16(f, at + 3 * PARAM_BYTES) if n > 3 else a0
            wp = b * span
            for j in range(0, depth, 4):
                v = splat_i32x16(xu, j)
                a0 = dot_u8s8(a0, v, load_i32x16(f, wp))
                if n > 1:
                    a1 = dot_u8s8(a1, v, load_i32x16(f, wp + span))
                if n > 2:
                    a2 = dot_u8s8(a2, v, load_i32x16(f, wp + 2 * span))
                if n > 3:
                    a3 = dot_u8s8(a3, v, load_i32x16(f, wp + 3 * span))
                wp += 64
            q, ch = r * oc + b * 16, b * 16
            requantize_store16(o, q, a0, f, at + 64, min(16, oc - ch), zero, low, high)
            if n > 1:
                requantize_store16(o, q + 16, a1, f, at + PARAM_BYTES + 64, min(16, oc - ch - 16), zero, low, high)
            if n > 2:
                requantize_store16(o, q + 32, a2, f, at + 2 * PARAM_BYTES + 64, min(16, oc - ch - 32), zero, low, high)
            if n > 3:
                requantize_store16(o, q + 48, a3, f, at + 3 * PARAM_BYTES + 64, min(16, oc - ch - 48), zero, low, high)
            b += n


def window_conv_node(node: Any, g: Any, x: Any, out: Any, weights: np.ndarray, biases: np.ndarray, k: Any) -> None:
    """An int8 CONV_2D of one window (:func:`_one_window`) as :func:`window_conv` (``weights``
    ``[oc, kh, kw, c]`` and ``biases`` as int64; ``k`` the NumPy kernel's prepared parameters)."""
    oc = weights.shape[0]
    depth = weights[0].size
    depth4, blocks = -(-depth // 4) * 4, -(-oc // 16)
    padded = np.zeros((blocks * 16, depth4), np.int8)
    padded[:oc, :depth] = weights.reshape(oc, depth)
    # per block and 4 bytes of depth: the 16 channels' 4 bytes (vpdpbusd's operand)
    packed = padded.reshape(blocks, 16, depth4 // 4, 4).transpose(0, 2, 1, 3)
    correction = (int(k.x_zp) + 128) * weights.reshape(oc, -1).sum(axis=1)
    blob = np.concatenate([packed.reshape(-1).view(np.uint8), _requantization(k, biases - correction, oc)]).view(np.int8)
    xu = g.temp((depth4,), INT8)
    g.line(f"{g.kernel(window_conv)}({x.name}, {xu.name}, {g.const(blob)}, {out.name}, {x.shape[0]}, {depth}, {depth4}, {oc}, "
           f"{int(k.out_zp)}, {int(k.act_min)}, {int(k.act_max)})")


def _window_depthwise_fits(x: Any, k: Any, channels: int) -> bool:
    """Whether an int8 DEPTHWISE_CONV_2D of one window takes :func:`window_depthwise`: 16-lane
    integers, a depth multiplier of 1, and the channels LiteRT rounds halves up (its whole
    8-channel blocks) within one rounding step (shifts in [-31, 0])."""
    if not AVX512 or x.dtype != INT8 or x.shape[3] != channels:
        return False
    halves = int(np.count_nonzero(np.broadcast_to(k.halves_up(channels), (channels,))))
    shifts = np.broadcast_to(np.asarray(k.shift, np.int64), (channels,))[:halves]
    return bool(np.all(shifts <= 0) and np.all(shifts >= -31))


@njit(nogil=True)
def window_depthwise(x, f, tail, o, m, taps, c, cp, halves, zero, low, high):
    """``o[r, ch] = requantize(sum_t x[r, t, ch] * w[t, ch] + bias'[ch])`` (the input's zero
    point folded into ``bias'``; int32 lanes wrap as LiteRT's sums) for each of the ``m`` rows
    of ``taps * c`` bytes: 16 channels at a time below ``halves`` (LiteRT's vector channels,
    rounded halves up in the store), then LiteRT's scalar remainder channels one by one, rounded
    as gemmlowp. ``f`` holds the weights ``[taps, cp]`` (zeros past ``c``), then each 16-channel
    block's :data:`PARAM_BYTES`; ``tail`` the remainder channels' bias', multiplier and shift."""
    params = taps * cp
    for r in range(m):
        base, q = r * taps * c, r * c
        for ch in range(0, halves, 16):
            count = min(16, c - ch)
            at = params + (ch // 16) * PARAM_BYTES
            a = load_i32x16(f, at)
            for t in range(taps):
                a = add_i32x16(a, mul_i32x16(widen16(x, base + t * c + ch, count), widen16(f, t * cp + ch, 16)))
            requantize_store16(o, q + ch, a, f, at + 64, min(16, halves - ch), zero, low, high)
        for ch in range(halves, c):
            j = 3 * (ch - halves)
            acc = np.int32(tail[j])
            for t in range(taps):
                acc = np.int32(acc + np.int32(x[base + t * c + ch]) * np.int32(f[t * cp + ch]))
            v = multiply_by_quantized_multiplier(acc, tail[j + 1], tail[j + 2]) + zero
            o[q + ch] = low if v < low else (high if v > high else v)


def window_depthwise_node(node: Any, g: Any, x: Any, out: Any, weights: np.ndarray, biases: np.ndarray, k: Any) -> None:
    """An int8 DEPTHWISE_CONV_2D of one window (:func:`_one_window`) as :func:`window_depthwise`
    (``weights`` ``[1, kh, kw, c]`` less the weights' zero point and ``biases``, as int64)."""
    c = weights.shape[3]
    taps = weights.shape[1] * weights.shape[2]
    cp = -(-c // 16) * 16
    halves = int(np.count_nonzero(np.broadcast_to(k.halves_up(c), (c,))))
    flat = weights.reshape(taps, c)
    packed = np.zeros((taps, cp), np.int8)
    packed[:, :c] = flat
    folded = biases - int(k.x_zp) * flat.sum(axis=0)  # sum (x - x_zp) w == sum x w - x_zp sum w (mod 2**32, as the sums wrap)
    wrapped = (folded & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64)
    multipliers = np.broadcast_to(np.asarray(k.multiplier, np.int64), (c,))
    shifts = np.broadcast_to(np.asarray(k.shift, np.int64), (c,))
    tail = np.stack([wrapped, multipliers, shifts], axis=1)[halves:].reshape(-1)
    blob = np.concatenate([packed.reshape(-1).view(np.uint8), _requantization(k, folded, c)]).view(np.int8)
    g.line(f"{g.kernel(window_depthwise)}({x.name}, {g.const(blob)}, {g.const(np.concatenate([tail, [0]]))}, {out.name}, "
           f"{x.shape[0]}, {taps}, {c}, {cp}, {halves}, {int(k.out_zp)}, {int(k.act_min)}, {int(k.act_max)})")
