"""CONV_2D and DEPTHWISE_CONV_2D on float32 NHWC as register-blocked loop kernels.

**CONV_2D** is an implicit GEMM in XNNPACK's manner. The filter ``[oc, kh, kw, in_c / groups]``
is packed once, at generation, into blocks of 16 output channels, ``[groups, blocks, kh, kw,
in_c / groups, 16]`` (zeros past the last channel), and the bias into the same blocks. The
micro-kernel keeps a tile of output pixels by one 16-channel block in 8 registers
(:mod:`numlite.jit.kernels.simd`): 8 pixels in 16-lane registers on machines with AVX-512, 4
pixels in pairs of 8-lane registers elsewhere (:data:`WIDE`). For every filter tap and input
channel it loads 16 weights once, broadcasts each pixel's input value and adds the products.
The tile starts at the bias; the fused activation (and an epilogue,
:mod:`numlite.jit.kernels.epilogues`) is applied when it is stored. The pixels are any
consecutive output pixels, across rows and images (each has its own input offset, as
XNNPACK's indirection buffer gives it), so a 1x1 convolution is a plain GEMM over all pixels
and a 7x7 output fills its tiles. The pixels left over take a 1-pixel tile.
Where a filter tap can fall outside the input (SAME padding), the input is first copied into a
zero-bordered working buffer, so the inner loop has no bounds test. With a dilation of 1 and
no groups, a filter row's taps are contiguous in the input, so the inner loop runs along
``kw * in_c`` values at once.

**DEPTHWISE_CONV_2D** runs along channels: for each output pixel and each block of 8
channels (32, in two 16-lane registers, with AVX-512), the taps' products are added in one
register (the filter is already ``[kh, kw, channels]``; the last block of a row masks its
loads and stores). With a depth multiplier
above 1, each input channel is first repeated into a working buffer.

Both sum in float32 with fused multiply-adds (``llvm.fmuladd``), as XNNPACK does: within
4.5e-6 of LiteRT on the sweep of ``tests/test_jit_conv.py``. The order of the sum over the
taps and channels is that of the packed filter, the same as LiteRT's reference kernel.

A kernel is one function per op kind (``@loop_kernel``), called, not inlined: a node costs
the model's compile one call line. Its sizes and options travel in one int64 constant and its
packed weights, bias and activation range in one float32 constant, both read by the kernel
through their addresses in ``ctl`` (``g.address``), with no local view in the generated
function. With ``num_threads`` above 1 the parallel twin of each kernel runs: a ``prange``
over blocks of output pixels (CONV_2D) or output rows (DEPTHWISE_CONV_2D, the pools).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from numlite.jit.kernels import emits
from numlite.jit.kernels.binary import activation_range
from numlite.jit.kernels.common import body, require
from numlite.jit.kernels.epilogues import CODES, NONE, lanes
from numlite.jit.kernels.simd import AVX512, clamp, fma, fma16, halves, load, load16, load_n, splat, splat16, store, store_n

F32 = np.dtype(np.float32)
KIND_CONV, KIND_DEPTHWISE = 0, 1  # loop kernel kinds (numlite.jit.kernels.loops)
BLOCK = 16  # output channels per register block of CONV_2D (two vectors of 8)
# The tile of output pixels by one 16-channel block: 8 pixels in 16-lane values (one zmm each)
# where the machine has AVX-512, else 4 pixels in pairs of 8-lane values (two ymm each). Either
# way 8 accumulators, the independent chains two FMA pipes of latency 4 need; the wide tile
# loads each tap's 16 weights once for 8 pixels, and runs twice the lanes per instruction on
# cores with 512-bit datapaths (AMD Zen 5 here: docs/jit.md, "Wide tiles").
WIDE = AVX512
TILE = 8 if WIDE else 4
LANES = 8


# A node parallelizes only with at least this many multiply-adds (or values read): a parallel
# region costs each thread a wake-up and a barrier (microseconds on an idle machine, a time
# slice on a loaded one), which a small pool or SOFTMAX does not repay.
PARALLEL_MIN_WORK = 1 << 18


def call(g: Any, kind: int, x: Any, out: Any, src: Any, params: list[int], floats: np.ndarray, work: int = 0) -> None:
    """A node's call of the loop kernel of ``kind`` (:mod:`numlite.jit.kernels.loops`):
    ``run(x, out, src, ctl, a, p, f, nf, kind)``, where ``a``, ``p`` and ``f`` are the ``ctl``
    slots of the kernel's address, the node's int64 parameters and its float32 constants
    (``nf`` of them). ``np.int64(...)``: an
    integer literal would make Numba compile the kernel again for every value. The parallel
    form when the interpreter runs more than one thread and the node's ``work`` is at least
    :data:`PARALLEL_MIN_WORK`."""
    from numlite.jit.kernels import loops

    parallel = g.gen.threads > 1 and kind in loops.PARALLEL and work >= PARALLEL_MIN_WORK
    g.gen.parallel |= parallel
    floats = np.ascontiguousarray(floats, np.float32)
    ka = g.address(loops.entry(parallel))
    p = g.address(np.array(params, np.int64))
    f = g.address(floats)
    g.line(f"{g.kernel(loops.run)}({x.name}, {out.name}, {src.name}, ctl, np.int64({ka}), np.int64({p}), np.int64({f}), "
           f"np.int64({floats.size}), np.int64({kind}))")


# -- the padded input (shared by the convolutions) ------------------------------------------------


@body
def pad_into(x, src, n, h, w, c, hs, ws, top, left):
    """``src`` (``[n, hs, ws, c]``) = zeros, with ``x`` (``[n, h, w, c]``) at ``(top, left)``
    (the rows and columns of ``x`` past ``hs`` or ``ws`` are never read by a window). Only
    the border is zeroed. The loops index views from 0 (Numba cannot prove ``s + q`` is not
    negative, and a possibly negative index keeps LLVM from vectorizing the loop: 0.9 ns an
    element against 0.03)."""
    rows, cols = min(h, hs - top), min(w, ws - left)
    span = ws * c
    for b in range(n):
        for y in range(hs):
            row = src[(b * hs + y) * span : (b * hs + y + 1) * span]
            iy = y - top
            if iy < 0 or iy >= rows:
                fill(row, 0, span, 0)
                continue
            line = x[(b * h + iy) * w * c : (b * h + iy) * w * c + cols * c]
            fill(row, 0, left * c, 0)
            inner = row[left * c : (left + cols) * c]
            for q in range(cols * c):
                inner[q] = line[q]
            fill(row, (left + cols) * c, span, 0)


@njit(inline="always")
def fill(a, start, stop, value):
    """``a[start:stop] = value`` (a view indexed from 0: see :func:`pad_into`)."""
    part = a[start:stop]
    for q in range(part.size):
        part[q] = value


# -- CONV_2D --------------------------------------------------------------------------------------

# The int64 parameters of a CONV_2D node (see emit_conv).
N, H, W, C, HS, WS, OH, OW, OC, KH, KW, SH, SW, DH, DW, TOP, LEFT, GROUPS, CG, OG, BLOCKS, CHUNK, ACT, PADDED, FSIZE, EPILOGUE, \
    SPLIT = range(27)


@njit(inline="always")
def _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin):
    """The offset in the source of output pixel ``(b, oy, ox)``'s first tap (channel ``cin``),
    and the next pixel's coordinates (no division: a tile's 4 pixels cost a few adds)."""
    offset = ((b * hs + oy * sh) * ws + ox * sw) * c + cin
    ox += 1
    if ox == ow:
        ox = 0
        oy += 1
        if oy == oh:
            oy = 0
            b += 1
    return offset, b, oy, ox


@njit(inline="always")
def unit_span(u, chunk, pixels, split, blocks):
    """Unit ``u`` of a convolution: its channel blocks ``[g0, g1)`` (the ``u // parts``-th
    ``split``-th of ``blocks``, where ``parts`` is the number of chunks) and output pixels
    ``[m0, m1)`` (chunk ``u % parts``). Share-major: consecutive units, which a thread takes
    together, read the same weights."""
    parts = (pixels + chunk - 1) // chunk
    share = u // parts
    m0 = (u - share * parts) * chunk
    return m0, min(m0 + chunk, pixels), share * blocks // split, (share + 1) * blocks // split


@njit(inline="always")
def coordinates(m, oh, ow):
    """Output pixel ``m``'s ``(b, oy, ox)``."""
    b = m // (oh * ow)
    oy = (m - b * oh * ow) // ow
    return b, oy, m - (b * oh + oy) * ow


@njit(inline="always")
def pixels8(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin):
    """:func:`_pixel` of 8 consecutive output pixels: their 8 offsets, then the next pixel's
    coordinates."""
    s0, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s1, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s2, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s3, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s4, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s5, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s6, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    s7, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
    return s0, s1, s2, s3, s4, s5, s6, s7, b, oy, ox


@body
def conv_setup(x, o, src, f, p):
    """Copy the input into its padded buffer when the node has one; the number of units (of
    ``CHUNK`` output pixels by a ``SPLIT``-th of the channel blocks: :func:`work_units`)."""
    if p[PADDED]:
        pad_into(x, src, p[N], p[H], p[W], p[C], p[HS], p[WS], p[TOP], p[LEFT])
    return (p[N] * p[OH] * p[OW] + p[CHUNK] - 1) // p[CHUNK] * p[SPLIT]


@body
def conv_units(x, o, src, f, p, u0, u1):
    """Units ``[u0, u1)`` (:func:`unit_span`), read from ``src`` (the padded input) or ``x``."""
    n, c, hs, ws = p[N], p[C], p[HS], p[WS]
    if not p[PADDED]:
        src = x
    oh, ow, oc, kh, kw, sh, sw = p[OH], p[OW], p[OC], p[KH], p[KW], p[SH], p[SW]
    dh, dw, groups, cg, og, blocks, chunk, act = p[DH], p[DW], p[GROUPS], p[CG], p[OG], p[BLOCKS], p[CHUNK], p[ACT]
    epi = p[EPILOGUE]
    low, high = f[p[FSIZE] - 2], f[p[FSIZE] - 1]
    merged = dw == 1 and cg == c  # a filter row's taps are contiguous in the source
    linear = WIDE and kh == 1 and kw == 1 and sh == 1 and sw == 1 and hs == oh and ws == ow  # pixel m reads src[m * c:]
    run = kw * cg if merged else cg
    columns = 1 if merged else kw
    pixels = n * oh * ow
    taps = kh * kw * cg * BLOCK  # packed weights per block
    bias0 = groups * blocks * taps
    for u in range(u0, u1):
        m0, m1, g0, g1 = unit_span(u, chunk, pixels, p[SPLIT], groups * blocks)
        for gb in range(g0, g1):
            gi = gb // blocks
            ch = gi * og + (gb - gi * blocks) * BLOCK  # the block's first output channel
            count = min(BLOCK, (gi + 1) * og - ch)
            wb = gb * taps
            bias = bias0 + gb * BLOCK
            m = m0
            b, oy, ox = coordinates(m0, oh, ow)
            cin = gi * cg
            while WIDE and m + TILE <= m1:
                if linear:
                    s0 = m * c + cin
                    s1, s2, s3, s4, s5, s6, s7 = s0 + c, s0 + 2 * c, s0 + 3 * c, s0 + 4 * c, s0 + 5 * c, s0 + 6 * c, s0 + 7 * c
                else:
                    s0, s1, s2, s3, s4, s5, s6, s7, b, oy, ox = pixels8(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
                a0 = load16(f, bias)
                a1, a2, a3, a4, a5, a6, a7 = a0, a0, a0, a0, a0, a0, a0
                wp = wb
                for ky in range(kh):
                    for kx in range(columns):
                        t = (ky * dh * ws + kx * dw) * c
                        for j in range(t, t + run):
                            wv = load16(f, wp)
                            a0 = fma16(splat16(src, s0 + j), wv, a0)
                            a1 = fma16(splat16(src, s1 + j), wv, a1)
                            a2 = fma16(splat16(src, s2 + j), wv, a2)
                            a3 = fma16(splat16(src, s3 + j), wv, a3)
                            a4 = fma16(splat16(src, s4 + j), wv, a4)
                            a5 = fma16(splat16(src, s5 + j), wv, a5)
                            a6 = fma16(splat16(src, s6 + j), wv, a6)
                            a7 = fma16(splat16(src, s7 + j), wv, a7)
                            wp += BLOCK
                q = m * oc + ch
                _store16(o, q, a0, count, act, low, high, epi)
                _store16(o, q + oc, a1, count, act, low, high, epi)
                _store16(o, q + 2 * oc, a2, count, act, low, high, epi)
                _store16(o, q + 3 * oc, a3, count, act, low, high, epi)
                _store16(o, q + 4 * oc, a4, count, act, low, high, epi)
                _store16(o, q + 5 * oc, a5, count, act, low, high, epi)
                _store16(o, q + 6 * oc, a6, count, act, low, high, epi)
                _store16(o, q + 7 * oc, a7, count, act, low, high, epi)
                m += TILE
            if linear:  # the leftover pixels' coordinates (the wide tiles did not step them)
                b, oy, ox = coordinates(m, oh, ow)
            while not WIDE and m + TILE <= m1:
                s0, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
                s1, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
                s2, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
                s3, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
                a00 = load(f, bias)
                a01 = load(f, bias + LANES)
                a10, a11, a20, a21, a30, a31 = a00, a01, a00, a01, a00, a01
                wp = wb
                for ky in range(kh):
                    for kx in range(columns):
                        t = (ky * dh * ws + kx * dw) * c
                        for j in range(t, t + run):
                            w0 = load(f, wp)
                            w1 = load(f, wp + LANES)
                            a00, a01 = _madd(src, s0 + j, w0, w1, a00, a01)
                            a10, a11 = _madd(src, s1 + j, w0, w1, a10, a11)
                            a20, a21 = _madd(src, s2 + j, w0, w1, a20, a21)
                            a30, a31 = _madd(src, s3 + j, w0, w1, a30, a31)
                            wp += BLOCK
                q = m * oc + ch
                _store(o, q, a00, a01, count, act, low, high, epi)
                _store(o, q + oc, a10, a11, count, act, low, high, epi)
                _store(o, q + 2 * oc, a20, a21, count, act, low, high, epi)
                _store(o, q + 3 * oc, a30, a31, count, act, low, high, epi)
                m += TILE
            while m < m1:
                s0, b, oy, ox = _pixel(b, oy, ox, oh, ow, hs, ws, c, sh, sw, cin)
                a00 = load(f, bias)
                a01 = load(f, bias + LANES)
                wp = wb
                for ky in range(kh):
                    for kx in range(columns):
                        t = (ky * dh * ws + kx * dw) * c
                        for j in range(t, t + run):
                            a00, a01 = _madd(src, s0 + j, load(f, wp), load(f, wp + LANES), a00, a01)
                            wp += BLOCK
                _store(o, m * oc + ch, a00, a01, count, act, low, high, epi)
                m += 1


@njit(inline="always")
def _madd(src, i, w0, w1, a0, a1):
    """One pixel's row of the tile: ``src[i]`` times the 16 weights ``w0, w1``, added."""
    v = splat(src, i)
    return fma(v, w0, a0), fma(v, w1, a1)


@njit(inline="always")
def _store16(o, q, a, count, act, low, high, epi):
    """:func:`_store` of a 16-lane row."""
    a0, a1 = halves(a)
    _store(o, q, a0, a1, count, act, low, high, epi)


@njit(inline="always")
def _store(o, q, a0, a1, count, act, low, high, epi):
    """The store step of a tile's row: ``count`` (1-16) channels at ``o[q]``, clamped to the
    fused activation's range when ``act``, then through the epilogue ``epi`` (see
    :mod:`numlite.jit.kernels.epilogues`). (The int8 kinds of quantized_conv requantize in
    their own store steps.)"""
    if act:
        a0 = clamp(a0, low, high)
        a1 = clamp(a1, low, high)
    if epi != NONE:
        a0, a1 = lanes(a0, a1, epi)
    if count == BLOCK:
        store(o, q, a0)
        store(o, q + LANES, a1)
    elif count > LANES:
        store(o, q, a0)
        store_n(o, q + LANES, a1, count - LANES)
    else:
        store_n(o, q, a0, count)


# -- DEPTHWISE_CONV_2D ----------------------------------------------------------------------------

# Its int64 parameters: the first 17 as CONV_2D's (no padded source: HS, WS are H, W; the
# working buffer holds the input with each channel repeated by the multiplier, EXPANDED), then:
MULT = 17
EXPANDED = PADDED
# The grain of a DEPTHWISE_CONV_2D's channel shares (SPLIT, as CONV_2D's): whole tiles of the
# widest kind, so that only the last share has a masked tail.
CHANNEL_GRAIN = 2 * BLOCK if WIDE else LANES


@njit(inline="always")
def _dw_tile(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi, full):
    """4 output pixels (input offsets ``s + k * step``) by 8 channels from ``ch``, all taps
    inside the input: 4 independent sums (one chain of fused multiply-adds would wait on
    each other's latency: 3x slower), each tap's weights loaded once. ``full``: 8 channels,
    else the ``c - ch`` left (masked)."""
    count = LANES if full else c - ch
    a0 = load(f, bias + ch) if full else load_n(f, bias + ch, count)
    a1, a2, a3 = a0, a0, a0
    for ky in range(kh):
        for kx in range(kw):
            t = s + ky * row + kx * col + ch
            wp = (ky * kw + kx) * c + ch
            if full:
                wv = load(f, wp)
                a0 = fma(load(x, t), wv, a0)
                a1 = fma(load(x, t + step), wv, a1)
                a2 = fma(load(x, t + 2 * step), wv, a2)
                a3 = fma(load(x, t + 3 * step), wv, a3)
            else:
                wv = load_n(f, wp, count)
                a0 = fma(load_n(x, t, count), wv, a0)
                a1 = fma(load_n(x, t + step, count), wv, a1)
                a2 = fma(load_n(x, t + 2 * step, count), wv, a2)
                a3 = fma(load_n(x, t + 3 * step, count), wv, a3)
    if act:
        a0, a1, a2, a3 = clamp(a0, low, high), clamp(a1, low, high), clamp(a2, low, high), clamp(a3, low, high)
    if epi != NONE:
        a0, a1 = lanes(a0, a1, epi)
        a2, a3 = lanes(a2, a3, epi)
    if full:
        store(o, q + ch, a0)
        store(o, q + c + ch, a1)
        store(o, q + 2 * c + ch, a2)
        store(o, q + 3 * c + ch, a3)
    else:
        store_n(o, q + ch, a0, count)
        store_n(o, q + c + ch, a1, count)
        store_n(o, q + 2 * c + ch, a2, count)
        store_n(o, q + 3 * c + ch, a3, count)


@njit(inline="always")
def _dw_tile32(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi):
    """:func:`_dw_tile` on 32 full channels in 16-lane values (the wide tile: see WIDE): 8
    independent sums, as the FMA pipes' latency needs (4 ran at half speed)."""
    a0 = load16(f, bias + ch)
    b0 = load16(f, bias + ch + BLOCK)
    a1, a2, a3, b1, b2, b3 = a0, a0, a0, b0, b0, b0
    for ky in range(kh):
        for kx in range(kw):
            t = s + ky * row + kx * col + ch
            wp = (ky * kw + kx) * c + ch
            wa, wb = load16(f, wp), load16(f, wp + BLOCK)
            a0 = fma16(load16(x, t), wa, a0)
            b0 = fma16(load16(x, t + BLOCK), wb, b0)
            a1 = fma16(load16(x, t + step), wa, a1)
            b1 = fma16(load16(x, t + step + BLOCK), wb, b1)
            a2 = fma16(load16(x, t + 2 * step), wa, a2)
            b2 = fma16(load16(x, t + 2 * step + BLOCK), wb, b2)
            a3 = fma16(load16(x, t + 3 * step), wa, a3)
            b3 = fma16(load16(x, t + 3 * step + BLOCK), wb, b3)
    for k, (a, b) in enumerate(((a0, b0), (a1, b1), (a2, b2), (a3, b3))):
        _store16(o, q + k * c + ch, a, BLOCK, act, low, high, epi)
        _store16(o, q + k * c + ch + BLOCK, b, BLOCK, act, low, high, epi)


@njit(inline="always")
def _dw_row3(x, f, t, wp, col, a0, a1, a2, a3):
    """One filter row of a 3-wide, stride-1 window for 4 neighbouring pixels on 16 channels:
    the 6 input columns they cover are loaded once (pixel ``k`` reads columns ``k..k+2``), the
    3 weights once. Each sum takes its taps in the order of :func:`_dw_tile32`'s (same bits)."""
    w0, w1, w2 = load16(f, wp), load16(f, wp + col), load16(f, wp + 2 * col)
    x0, x1, x2 = load16(x, t), load16(x, t + col), load16(x, t + 2 * col)
    a0 = fma16(x0, w0, a0)
    a0 = fma16(x1, w1, a0)
    a1 = fma16(x1, w0, a1)
    a0 = fma16(x2, w2, a0)
    a1 = fma16(x2, w1, a1)
    a2 = fma16(x2, w0, a2)
    x3, x4, x5 = load16(x, t + 3 * col), load16(x, t + 4 * col), load16(x, t + 5 * col)
    a1 = fma16(x3, w2, a1)
    a2 = fma16(x3, w1, a2)
    a3 = fma16(x3, w0, a3)
    a2 = fma16(x4, w2, a2)
    a3 = fma16(x4, w1, a3)
    a3 = fma16(x5, w2, a3)
    return a0, a1, a2, a3


@njit(inline="always")
def _dw_row5(x, f, t, wp, col, a0, a1, a2, a3):
    """:func:`_dw_row3` for a 5-wide window (EfficientNet's): 8 input columns, 5 weights."""
    w0, w1, w2, w3, w4 = load16(f, wp), load16(f, wp + col), load16(f, wp + 2 * col), load16(f, wp + 3 * col), load16(f, wp + 4 * col)
    v = load16(x, t)
    a0 = fma16(v, w0, a0)
    v = load16(x, t + col)
    a0, a1 = fma16(v, w1, a0), fma16(v, w0, a1)
    v = load16(x, t + 2 * col)
    a0, a1, a2 = fma16(v, w2, a0), fma16(v, w1, a1), fma16(v, w0, a2)
    v = load16(x, t + 3 * col)
    a0, a1, a2, a3 = fma16(v, w3, a0), fma16(v, w2, a1), fma16(v, w1, a2), fma16(v, w0, a3)
    v = load16(x, t + 4 * col)
    a0, a1, a2, a3 = fma16(v, w4, a0), fma16(v, w3, a1), fma16(v, w2, a2), fma16(v, w1, a3)
    v = load16(x, t + 5 * col)
    a1, a2, a3 = fma16(v, w4, a1), fma16(v, w3, a2), fma16(v, w2, a3)
    v = load16(x, t + 6 * col)
    a2, a3 = fma16(v, w4, a2), fma16(v, w3, a3)
    v = load16(x, t + 7 * col)
    a3 = fma16(v, w4, a3)
    return a0, a1, a2, a3


@njit(inline="always")
def _dw_tile_rows32(x, f, o, s, q, ch, c, kh, kw, row, col, bias, act, low, high, epi):
    """:func:`_dw_tile32` for a 3- or 5-wide window at stride 1 and dilation 1 (MobileNet's
    and EfficientNet's): each input column loaded once for the 4 pixels (:func:`_dw_row3`,
    :func:`_dw_row5`); a 3-wide row takes 18 loads for 24 multiply-adds, against 30."""
    a0 = load16(f, bias + ch)
    b0 = load16(f, bias + ch + BLOCK)
    a1, a2, a3, b1, b2, b3 = a0, a0, a0, b0, b0, b0
    for ky in range(kh):
        t = s + ky * row + ch
        wp = ky * kw * c + ch
        if kw == 3:
            a0, a1, a2, a3 = _dw_row3(x, f, t, wp, c, a0, a1, a2, a3)
            b0, b1, b2, b3 = _dw_row3(x, f, t + BLOCK, wp + BLOCK, c, b0, b1, b2, b3)
        else:
            a0, a1, a2, a3 = _dw_row5(x, f, t, wp, c, a0, a1, a2, a3)
            b0, b1, b2, b3 = _dw_row5(x, f, t + BLOCK, wp + BLOCK, c, b0, b1, b2, b3)
    for k, (a, b) in enumerate(((a0, b0), (a1, b1), (a2, b2), (a3, b3))):
        _store16(o, q + k * c + ch, a, BLOCK, act, low, high, epi)
        _store16(o, q + k * c + ch + BLOCK, b, BLOCK, act, low, high, epi)


@njit(inline="always")
def _dw_tile16(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi):
    """:func:`_dw_tile` on 16 full channels in 16-lane values (the wide tile: see WIDE)."""
    a0 = load16(f, bias + ch)
    a1, a2, a3 = a0, a0, a0
    for ky in range(kh):
        for kx in range(kw):
            t = s + ky * row + kx * col + ch
            wv = load16(f, (ky * kw + kx) * c + ch)
            a0 = fma16(load16(x, t), wv, a0)
            a1 = fma16(load16(x, t + step), wv, a1)
            a2 = fma16(load16(x, t + 2 * step), wv, a2)
            a3 = fma16(load16(x, t + 3 * step), wv, a3)
    _store16(o, q + ch, a0, BLOCK, act, low, high, epi)
    _store16(o, q + c + ch, a1, BLOCK, act, low, high, epi)
    _store16(o, q + 2 * c + ch, a2, BLOCK, act, low, high, epi)
    _store16(o, q + 3 * c + ch, a3, BLOCK, act, low, high, epi)


@njit(inline="always")
def _dw_pixel(x, f, o, b, iy0, ix0, q, c, c0, c1, h, w, kh, kw, dh, dw, bias, act, low, high, epi):
    """Channels ``[c0, c1)`` of one output pixel whose window may reach outside the input
    (taps outside are skipped), 32 channels at a time: four independent sums (masked: a block
    past ``c1`` is neither read nor written)."""
    for ch in range(c0, c1, 4 * LANES):
        n0 = min(LANES, c1 - ch)
        n1 = min(LANES, max(c1 - ch - LANES, 0))
        n2 = min(LANES, max(c1 - ch - 2 * LANES, 0))
        n3 = min(LANES, max(c1 - ch - 3 * LANES, 0))
        a0 = load_n(f, bias + ch, n0)
        a1 = load_n(f, bias + ch + LANES, n1)
        a2 = load_n(f, bias + ch + 2 * LANES, n2)
        a3 = load_n(f, bias + ch + 3 * LANES, n3)
        for ky in range(kh):
            iy = iy0 + ky * dh
            if iy < 0 or iy >= h:
                continue
            for kx in range(kw):
                ix = ix0 + kx * dw
                if ix < 0 or ix >= w:
                    continue
                t = ((b * h + iy) * w + ix) * c + ch
                wp = (ky * kw + kx) * c + ch
                a0 = fma(load_n(x, t, n0), load_n(f, wp, n0), a0)
                a1 = fma(load_n(x, t + LANES, n1), load_n(f, wp + LANES, n1), a1)
                a2 = fma(load_n(x, t + 2 * LANES, n2), load_n(f, wp + 2 * LANES, n2), a2)
                a3 = fma(load_n(x, t + 3 * LANES, n3), load_n(f, wp + 3 * LANES, n3), a3)
        if act:
            a0, a1, a2, a3 = clamp(a0, low, high), clamp(a1, low, high), clamp(a2, low, high), clamp(a3, low, high)
        if epi != NONE:
            a0, a1 = lanes(a0, a1, epi)
            a2, a3 = lanes(a2, a3, epi)
        store_n(o, q + ch, a0, n0)
        store_n(o, q + ch + LANES, a1, n1)
        store_n(o, q + ch + 2 * LANES, a2, n2)
        store_n(o, q + ch + 3 * LANES, a3, n3)


@body
def depthwise_setup(x, o, src, f, p):
    """With a depth multiplier ``m`` above 1, each input channel repeated ``m`` times into
    ``src`` (output channel ``ci * m + j`` reads input channel ``ci``), so that the units
    run along channels as for ``m == 1``; the number of units (output rows by a ``SPLIT``-th
    of the channels: :func:`depthwise_split`)."""
    if p[EXPANDED]:
        c, m = p[C], p[MULT]
        for pixel in range(p[N] * p[H] * p[W]):
            for ci in range(c):
                v = x[pixel * c + ci]
                for j in range(m):
                    src[(pixel * c + ci) * m + j] = v
    return p[N] * p[OH] * p[SPLIT]


@body
def depthwise_units(x, o, src, f, p, u0, u1):
    """Units ``[u0, u1)``: unit ``u`` is output row ``u % rows`` of the ``u // rows``-th
    share of the channels (share-major, as :func:`unit_span`), whose bounds are multiples of
    :data:`CHANNEL_GRAIN` but the last."""
    n, h, w = p[N], p[H], p[W]
    oh, ow, oc, kh, kw, sh, sw, dh, dw = p[OH], p[OW], p[OC], p[KH], p[KW], p[SH], p[SW], p[DH], p[DW]
    top, left, act, epi = p[TOP], p[LEFT], p[ACT], p[EPILOGUE]
    c = oc  # the input's channels, repeated by the multiplier in src (depthwise_setup)
    if p[EXPANDED]:
        x = src
    low, high = f[p[FSIZE] - 2], f[p[FSIZE] - 1]
    bias = kh * kw * oc
    # the output columns whose windows lie inside the input's columns
    lo = min((left + sw - 1) // sw, ow)
    hi = max(min(ow, (w - 1 - (kw - 1) * dw + left) // sw + 1), lo)
    row, col, step = dh * w * c, dw * c, sw * c
    rows = WIDE and (kw == 3 or kw == 5) and dw == 1 and sw == 1  # neighbouring pixels share input columns
    total, split = n * oh, p[SPLIT]
    grains = (c + CHANNEL_GRAIN - 1) // CHANNEL_GRAIN
    for u in range(u0, u1):
        share = u // total
        r = u - share * total
        c0, c1 = min(share * grains // split * CHANNEL_GRAIN, c), min((share + 1) * grains // split * CHANNEL_GRAIN, c)
        b = r // oh
        oy = r - b * oh
        iy0 = oy * sh - top
        q0 = r * ow * oc
        inside = iy0 >= 0 and iy0 + (kh - 1) * dh < h
        start, stop = (lo, hi) if inside else (ow, ow)
        for ox in range(0, start):
            _dw_pixel(x, f, o, b, iy0, ox * sw - left, q0 + ox * c, c, c0, c1, h, w, kh, kw, dh, dw, bias, act, low, high, epi)
        ox = start
        while ox + 4 <= stop:
            s = ((b * h + iy0) * w + ox * sw - left) * c
            q = q0 + ox * c
            ch = c0
            while rows and ch + 2 * BLOCK <= c1:
                _dw_tile_rows32(x, f, o, s, q, ch, c, kh, kw, row, col, bias, act, low, high, epi)
                ch += 2 * BLOCK
            while WIDE and ch + 2 * BLOCK <= c1:
                _dw_tile32(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi)
                ch += 2 * BLOCK
            while WIDE and ch + BLOCK <= c1:
                _dw_tile16(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi)
                ch += BLOCK
            while ch + LANES <= c1:
                _dw_tile(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi, True)
                ch += LANES
            if ch < c1:  # only in the last share (c1 == c): the others end on a grain
                _dw_tile(x, f, o, s, q, ch, c, kh, kw, step, row, col, bias, act, low, high, epi, False)
            ox += 4
        for ox in range(ox, ow):
            _dw_pixel(x, f, o, b, iy0, ox * sw - left, q0 + ox * c, c, c0, c1, h, w, kh, kw, dh, dw, bias, act, low, high, epi)


# -- the emitters ---------------------------------------------------------------------------------


def geometry(node: Any, x: Any, kh: int, kw: int, dilated: bool = True) -> tuple:
    """``(strides, dilations, (oh, ow), (top, left))`` from the node's options, as the NumPy
    kernel computed them at prepare (it validated them: an invalid one never gets here)."""
    from numlite.kernels.conv import output_window

    opts = node.options
    require(opts is not None, f"{node.op_name} without options is not compiled")
    strides = (int(opts.stride_h), int(opts.stride_w))
    dilations = (int(opts.dilation_h_factor), int(opts.dilation_w_factor)) if dilated else (1, 1)
    (oh, ow), (top, _, left, _) = output_window(opts.padding, x.shape[1:3], (kh, kw), strides, dilations)
    return strides, dilations, (oh, ow), (top, left)


def clamp_range(node: Any, out: Any) -> tuple[int, list[float]]:
    """``(act, [low, high])``: whether the node clamps, and to what (float32)."""
    clamp_to = activation_range(node, out)
    return int(clamp_to is not None), list(clamp_to or (0.0, 0.0))


def source(g: Any, x: Any, geo: tuple, window: tuple[int, int]) -> tuple[Any, list[int]]:
    """The input the kernel's windows read: ``x`` itself, or a zero-bordered working buffer
    (a temporary of the arenas) when a window can reach outside ``x``; and the parameters
    ``[n, h, w, c, hs, ws]`` plus ``padded, top, left``."""
    n, h, w, c = x.shape
    (sh, sw), (dh, dw), (oh, ow), (top, left) = geo
    hs = (oh - 1) * sh + (window[0] - 1) * dh + 1  # the rows and columns the windows cover
    ws = (ow - 1) * sw + (window[1] - 1) * dw + 1
    padded = top > 0 or left > 0 or hs > h or ws > w
    if not padded:
        return x, [n, h, w, c, h, w], [0, 0, 0]
    return g.temp((n, hs, ws, c), F32), [n, h, w, c, hs, ws], [1, top, left]


def _operands(node: Any) -> tuple:
    """``(x, filter, bias or None, out)``: float32, rank 4, constant filter and bias."""
    x, f = node.ins[0], node.ins[1]
    bias = node.ins[2] if len(node.ins) > 2 else None
    out = node.outs[0]
    require(all(t is None or t.dtype == F32 for t in (x, f, bias, out)),
            f"{node.op_name} is compiled for float32 input, filter and bias only")
    require(len(x.shape) == len(f.shape) == len(out.shape) == 4 and len(node.outs) == 1,
            f"{node.op_name} of input {x.shape} and filter {f.shape} is not compiled")
    require(f.value is not None and (bias is None or bias.value is not None),
            f"{node.op_name} with a filter or bias computed at run time is not compiled")
    return x, f, bias, out


def _bias(bias: Any, channels: int) -> np.ndarray:
    if bias is None:
        return np.zeros(channels, np.float32)
    require(bias.size == channels, f"bias of {bias.size} elements for {channels} channels is not compiled")
    return np.asarray(bias.value, np.float32).reshape(-1)


def _busiest(units: list[int], threads: int) -> int:
    """The work of the busiest thread when Numba's static schedule shares ``units`` out:
    thread ``t`` takes the ``t``-th run of consecutive units, the first runs one longer."""
    each, extra = divmod(len(units), threads)
    loads, at = [], 0
    for t in range(threads):
        take = each + (t < extra)
        loads.append(sum(units[at : at + take]))
        at += take
    return max(loads)


def depthwise_split(rows: int, channels: int, threads: int) -> int:
    """Into how many shares of its channels (whole grains of :data:`CHANNEL_GRAIN` channels)
    a DEPTHWISE_CONV_2D cuts its output rows' work: 1 on one thread; else the fewest shares
    whose busiest thread has the least work (7 rows share 4 against 3 on two threads; 7 rows
    of two channel halves, 7 against 7)."""
    grains = -(-channels // CHANNEL_GRAIN)
    if threads <= 1 or rows <= 0:
        return 1
    best = None
    for split in range(1, min(grains, 4 * threads) + 1):
        shares = [min((k + 1) * grains // split * CHANNEL_GRAIN, channels) - min(k * grains // split * CHANNEL_GRAIN, channels)
                  for k in range(split)]  # fmt: skip
        key = (_busiest([share for share in shares for _ in range(rows)], threads) * (1 + 0.002 * split * rows), split)
        best = key if best is None or key < best else best
    return best[1]


def work_units(pixels: int, blocks: int, threads: int, tile: int = TILE) -> tuple[int, int]:
    """How a convolution's work is cut into ``prange`` units: ``(chunk, split)``, each unit
    ``chunk`` output pixels (whole tiles) by a ``split``-th of the ``blocks`` channel blocks
    (:func:`unit_span`). One unit on one thread. Else at least 4 chunks per thread where there
    are tiles enough (a chunk's input stays in cache across its blocks), and of those cuts the
    one whose busiest thread has the least work, Numba's static schedule given (thread ``t``
    takes the ``t``-th run of consecutive units, the first ones one more), then the one of
    fewest units. Pixels alone cannot share a small image fairly: 49 pixels are 7 tiles of 8,
    4 against 3 on two threads, so a 7x7 layer also cuts its channel blocks."""
    if threads <= 1 or pixels <= 0:
        return max(pixels, 1), 1
    tiles = -(-pixels // tile)
    best: tuple[float, int, int, int] | None = None
    for split in range(1, min(blocks, 4 * threads) + 1):
        shares = [(s + 1) * blocks // split - s * blocks // split for s in range(split)]
        for cuts in range(min(tiles, 4 * threads), min(tiles, 8 * threads) + 1):
            chunk = -(-tiles // cuts) * tile
            sizes = [min(chunk, pixels - k * chunk) for k in range(-(-pixels // chunk))]
            units = [size * share for share in shares for size in sizes]  # in unit_span's order
            key = (_busiest(units, threads) * (1 + 0.002 * len(units)), len(units), chunk, split)
            if best is None or key < best:
                best = key
    return best[2], best[3]


@emits("CONV_2D")
def emit_conv(node: Any, g: Any) -> None:
    x, f, bias, out = _operands(node)
    act, limits = clamp_range(node, out)
    epilogue = epilogue_code(node)
    conv_node(node, g, x, out, np.asarray(f.value, np.float32), _bias(bias, f.shape[0]), act, limits, epilogue)


def epilogue_code(node: Any) -> int:
    """The loop kernels' code of the node's epilogue (``epilogues.NONE``: none), taken."""
    name = node.take_epilogue()
    return NONE if name is None else CODES[name]


def conv_node(node: Any, g: Any, x: Any, out: Any, weights: np.ndarray, biases: np.ndarray, act: int, limits: list[float],
              epilogue: int = NONE) -> None:  # fmt: skip
    """A CONV_2D node's call of the loop kernel: float32 input ``x`` and output ``out``
    (operands or temporaries), the ``[oc, kh, kw, cg]`` filter and the bias as float32 arrays
    (packed here), the fused activation's clamp (``act``, ``limits``) and the epilogue after
    it (:mod:`numlite.jit.kernels.epilogues`). The int8 CONV_2D
    (:mod:`numlite.jit.kernels.quantized_conv`) calls it on centered values."""
    n, h, w, c = x.shape
    oc, kh, kw, cg = weights.shape
    require(cg > 0 and c % cg == 0 and oc % (c // cg) == 0, f"CONV_2D of {c} channels by filter {weights.shape} is not compiled")
    groups = c // cg
    geo = geometry(node, x, kh, kw)
    (sh, sw), (dh, dw), (oh, ow), _ = geo
    require(out.shape == (n, oh, ow, oc), f"CONV_2D into {out.shape} is not compiled")
    if out.size == 0:
        return
    og = oc // groups
    blocks = -(-og // BLOCK)
    packed = np.zeros((groups, blocks * BLOCK, kh, kw, cg), np.float32)
    packed[:, :og] = weights.reshape(groups, og, kh, kw, cg)
    packed = packed.reshape(groups, blocks, BLOCK, kh, kw, cg).transpose(0, 1, 3, 4, 5, 2)
    padded_biases = np.zeros((groups, blocks * BLOCK), np.float32)
    padded_biases[:, :og] = biases.reshape(groups, og)
    floats = np.concatenate([packed.reshape(-1), padded_biases.reshape(-1), np.array(limits, np.float32)])
    src, sizes, padding = source(g, x, geo, (kh, kw))
    chunk, split = work_units(n * oh * ow, groups * blocks, g.gen.threads)
    params = [*sizes, oh, ow, oc, kh, kw, sh, sw, dh, dw, padding[1], padding[2], groups, cg, og, blocks, chunk, act, padding[0],
              floats.size, epilogue, split]  # fmt: skip
    call(g, KIND_CONV, x, out, src, params, floats, out.size * kh * kw * cg)


@emits("DEPTHWISE_CONV_2D")
def emit_depthwise(node: Any, g: Any) -> None:
    x, f, bias, out = _operands(node)
    act, limits = clamp_range(node, out)
    depthwise_node(node, g, x, out, np.asarray(f.value, np.float32), _bias(bias, f.shape[3]), act, limits, epilogue_code(node))


def depthwise_node(node: Any, g: Any, x: Any, out: Any, weights: np.ndarray, biases: np.ndarray, act: int,
                   limits: list[float], epilogue: int = NONE) -> None:  # fmt: skip
    """A DEPTHWISE_CONV_2D node's call of the loop kernel, as :func:`conv_node` (filter
    ``[1, kh, kw, oc]``)."""
    n, h, w, c = x.shape
    one, kh, kw, oc = weights.shape
    require(one == 1 and c > 0 and oc % c == 0, f"DEPTHWISE_CONV_2D of {c} channels by filter {weights.shape} is not compiled")
    geo = geometry(node, x, kh, kw)
    (sh, sw), (dh, dw), (oh, ow), _ = geo
    require(out.shape == (n, oh, ow, oc), f"DEPTHWISE_CONV_2D into {out.shape} is not compiled")
    if out.size == 0:
        return
    floats = np.concatenate([weights.reshape(-1), biases, np.array(limits, np.float32)])
    top, left = geo[3]
    expanded = oc > c
    src = g.temp((n, h, w, oc), F32) if expanded else x
    split = depthwise_split(n * oh, oc, g.gen.threads)
    params = [n, h, w, c, h, w, oh, ow, oc, kh, kw, sh, sw, dh, dw, top, left, oc // c, 0, 0, 0, 0, act, int(expanded), floats.size,
              epilogue, split]  # fmt: skip
    call(g, KIND_DEPTHWISE, x, out, src, params, floats, out.size * kh * kw)
