"""int8 (and uint8) CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D and AVERAGE_POOL_2D, bit-exact with
LiteRT's integer kernels (numlite's NumPy kernels in numlite/kernels/quantized_conv.py and
quantized.py are the reference; their prepared parameters, ``node.kernel``, are used as they are).

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

**Pools** are plain loops over int32 accumulators, channels innermost: the maximum of the raw
values (the window clipped to the input), or the sum divided by the in-bounds count rounded half
away from zero with C's truncating division, as LiteRT's reference ``AveragePool``; both clamped
to the fused activation.

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
from numlite.jit.kernels.conv import conv_node, depthwise_node, geometry
from numlite.jit.kernels.quantized import multiply_by_quantized_multiplier

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
    l1 = np.abs(weights).reshape(-1, channels).sum(axis=0) if depthwise else np.abs(weights).reshape(channels, -1).sum(axis=1)
    info = np.iinfo(x.dtype)
    deviation = max(abs(int(info.min) - k.x_zp), abs(int(info.max) - k.x_zp))
    require(deviation * int(l1.max(initial=0)) <= FLOAT32_EXACT,
            f"quantized {node.op_name} whose sums may exceed 2**24 (float32's exact integers) is not compiled")
    biases = np.zeros(channels, np.int64) if bias is None else np.asarray(bias.value).reshape(-1).astype(np.int64)
    require(biases.size == channels, f"bias of {biases.size} elements for {channels} channels is not compiled")
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
    """Integer MAX_POOL_2D / AVERAGE_POOL_2D over NHWC (``acc``: ``c`` int32 of working memory)."""
    for b in range(n):
        for oy in range(oh):
            y0 = max(oy * sh - top, 0)
            y1 = min(oy * sh - top + fh, h)
            for ox in range(ow):
                x0 = max(ox * sw - left, 0)
                x1 = min(ox * sw - left + fw, w)
                for ch in range(c):
                    acc[ch] = 0 if average else -2147483648
                for iy in range(y0, y1):
                    for ix in range(x0, x1):
                        s = ((b * h + iy) * w + ix) * c
                        if average:
                            for ch in range(c):
                                acc[ch] += np.int32(x[s + ch])
                        else:
                            for ch in range(c):
                                acc[ch] = max(acc[ch], np.int32(x[s + ch]))
                q = ((b * oh + oy) * ow + ox) * c
                count = max((y1 - y0) * (x1 - x0), 1)
                half = count // 2
                for ch in range(c):
                    v = acc[ch]
                    if average:  # C's truncating division, rounded half away from zero
                        v = (v + half) // count if v > 0 else -((half - v) // count)
                    o[q + ch] = low if v < low else (high if v > high else v)


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
    acc = g.temp((c,), np.int32)
    average = int(node.op_name == "AVERAGE_POOL_2D")
    g.line(f"{g.kernel(pool_int)}({x.name}, {out.name}, {acc.name}, {n}, {h}, {w}, {c}, {oh}, {ow}, {fh}, {fw}, {sh}, {sw}, "
           f"{top}, {left}, {average}, {low}, {high})")


# -- SPLIT, SPLIT_V: raw values --------------------------------------------------------------------


@emits("SPLIT", "SPLIT_V", quantized=True)
def emit_split(node: Any, g: Any) -> None:
    from numlite.jit.kernels.layout import emit_split as plain

    plain(node, g)
