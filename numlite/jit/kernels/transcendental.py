"""exp, tanh and the logistic function on float32 as arithmetic LLVM can vectorize.

``math.exp`` and ``np.tanh`` compile to a call of the C library per element, which no loop
vectorizes: a TANH on 256 elements cost more than LiteRT's whole vectorized kernel, and an LSTM
step makes five such activations per cell. These scalar functions use only float arithmetic,
``floor`` and one bit cast, so a loop of them becomes SIMD code (about 2 ns an element against
40 for ``np.tanh``, measured here on 4096 elements; the generated functions must use
``error_model="numpy"``, or the division's zero check keeps the loop scalar).

Accuracy, measured against float64 on every float32 step of [-20, 20] (2e6 points) and the
extremes: exp within 1e-7 relative; tanh and the logistic function within 9e-8 absolute and
2e-7 relative, as far from the exact value as LiteRT's own approximations and far inside
the 1e-5 the tests allow. NaN gives NaN; large arguments give the limits (exp: +inf above
88.72, 0 or a denormal below -87.3, which the flush-to-zero mode of an invoke flushes).
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import intrinsic

from numlite.jit.kernels.common import kernel

F = np.float32
# ln 2 split in two (Cody and Waite): the high part has few mantissa bits, so n * LN2_HIGH is
# exact for the |n| <= 128 used here, and the reduced argument keeps its low bits.
LN2_HIGH, LN2_LOW = F(0.693359375), F(-2.12194440e-4)
LOG2_E = F(1.4426950408889634)
EXP_HIGH, EXP_LOW = F(88.72283), F(-87.33654)  # e^x is finite and normal between these
TANH_SERIES_BELOW = F(0.25)
ROUNDER = F(12582912.0)  # 1.5 * 2^23  # below this |x|, tanh's odd series (cancellation-free)


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the int32 ``bits`` (a bit cast, no conversion)."""
    signature = types.float32(types.int32)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return signature, codegen


@kernel
def exp32(x):
    """e^x: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor polynomial of degree 7
    (truncation below 5e-9 relative), then times 2^n built from its exponent bits. 2^(n-1)
    times 2 keeps n = 128 (x close to 88.72) finite."""
    v = EXP_LOW if x < EXP_LOW else (EXP_HIGH if x > EXP_HIGH else x)  # NaN stays NaN
    n = (v * LOG2_E + ROUNDER) - ROUNDER  # round to nearest: the sum's ulp is 1
    r = v - n * LN2_HIGH - n * LN2_LOW
    p = F(1.0 / 5040)
    p = p * r + F(1.0 / 720)
    p = p * r + F(1.0 / 120)
    p = p * r + F(1.0 / 24)
    p = p * r + F(1.0 / 6)
    p = p * r + F(0.5)
    p = p * r + F(1.0)
    p = p * r + F(1.0)
    scale = _float_from_bits(np.int32((np.int32(n) + 126) << 23))
    e = p * scale * F(2.0)
    return F(np.inf) if x > EXP_HIGH else e


@kernel
def tanh32(x):
    """tanh: (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x; below TANH_SERIES_BELOW the
    odd series to x^9 (truncation below 3e-9), where 1 - e^-2|x| would lose bits."""
    a = abs(x)
    e = exp32(F(-2.0) * a)
    t = (F(1.0) - e) / (F(1.0) + e)
    s = x * x
    series = x * (F(1.0) + s * (F(-1.0 / 3) + s * (F(2.0 / 15) + s * (F(-17.0 / 315) + s * F(62.0 / 2835)))))
    signed = t if x >= 0 else -t
    return series if a < TANH_SERIES_BELOW else signed


@kernel
def sigmoid32(x):
    """The logistic function 1 / (1 + e^-x)."""
    return F(1.0) / (F(1.0) + exp32(-x))
