"""Fast exact integer accumulation and requantization for the quantized heavy kernels.

The integer CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (and their hybrid forms) compute
``sum((x - x_zp) * (w - w_zp))`` exactly, then rescale it. Two things make that fast here:

* **float32 when it is exact.** BLAS has no integer matmul, but a float one is exact as long as
  every product and every partial sum it forms is an integer float can hold. With the raw
  input values (not centered) the partial sums of output channel ``o``, in whatever order BLAS
  adds them, are bounded by ``max|x| * sum_k |w[k, o] - w_zp|``; prepare proves that bound from
  the actual (constant) weights and picks float32 when it is at most ``2**24`` (every integer of
  that size is a float32), float64 otherwise (exact below ``2**53``). The input zero point is
  taken out afterwards through the weights' column sums: ``sum((x - zp) * w) = sum(x * w) -
  zp * sum(w)``, folded with the bias into one per-channel offset; padding is filled with the
  zero point, whose products the same correction cancels (LiteRT skips those points).
* **requantization in place.** :class:`Requantizer` applies LiteRT's per-channel fixed-point
  rescaling (MultiplyByQuantizedMultiplier) to blocks of accumulators in preallocated int64
  memory with a handful of in-place NumPy passes, in closed forms equal to gemmlowp's two
  roundings (:meth:`Requantizer._fixed`), for real layers as one rounding shift
  (:meth:`Requantizer._fused`), per-channel vectors repeated along output rows so that NumPy's
  inner loops stay long (:meth:`Requantizer.tiled`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from numlite.kernels import fixed_point

try:  # the clip ufunc itself: np.clip adds microseconds of Python around it per call
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover - other NumPy layouts
    _clip = np.clip

F32, F64, I32, I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64)
FLOAT32_EXACT = 1 << 24  # every integer of magnitude up to this is a float32
FLOAT64_EXACT = 1 << 53
SIGN_FIX = np.int64(-(1 << 31))

# From this many accumulators the requantizer passes through int32 where it can: float32 ->
# int32 -> int64 is two fast casts where one float32 -> int64 cast is slower than both, and an
# int32 clamp twice as fast as an int64 one (36864 values: 6.2 against 9.4 us, and 8.6 against
# 12.8); on fewer values the extra calls cost more (crossing over at about 6000).
NARROW_FROM = 4096

# Largest magnitude of a raw (uncentered) input value of each integer dtype.
RAW_MAGNITUDE = {np.dtype(np.int8): 128, np.dtype(np.uint8): 255, np.dtype(np.int16): 32768}


def column_l1(weights: np.ndarray) -> int:
    """``max_o sum_k |weights[k, o]|`` of an integer-valued ``[depth, channels]`` matrix."""
    if weights.size == 0:
        return 0
    return int(np.abs(weights.astype(np.int64)).sum(axis=0).max())


def accumulation_dtype(max_input: int, l1: int) -> np.dtype | None:
    """float32 if every partial sum of ``input * weights`` is provably an exact float32
    (``max_input * l1 <= 2**24``), float64 if exact there, None if neither."""
    bound = int(max_input) * int(l1)
    if bound <= FLOAT32_EXACT:
        return F32
    if bound < FLOAT64_EXACT:
        return F64
    return None


class Requantizer:
    """Int accumulators (bias and zero-point correction added) to output integers, per channel.

    ``mode``: ``"fixed"`` (8-bit kernels: int32 accumulator, LiteRT's
    MultiplyByQuantizedMultiplier), ``"wide"`` (16x8: int64 accumulator, the multiplier reduced
    to 16 bits) or ``"real"`` (FULLY_CONNECTED: ``round(acc * real)`` in double, see
    quantized_conv). Per-tensor parameters are kept as scalars (cheaper than broadcasting).
    ``wrap``: whether the 8-bit accumulator may leave int32 (then it wraps, as C++ does).
    ``halves_up`` (``"fixed"`` mode; one bool, or one per channel): the channels whose exact
    halves at the right shift round up, ``(v + 2**(e-1)) >> e``, as LiteRT's builtin CONV_2D
    and DEPTHWISE_CONV_2D do; the others round them away from zero (gemmlowp).
    """

    def __init__(
        self,
        mode: str,
        multiplier: np.ndarray,
        shift: np.ndarray,
        real: np.ndarray,
        out_zp: int,
        act_range: tuple[int, int],
        wrap: bool = True,
        halves_up: bool | np.ndarray = False,
    ) -> None:
        self.mode, self.wrap = mode, wrap
        self.out_zp = int(out_zp)
        low, high = act_range[0] - self.out_zp, act_range[1] - self.out_zp
        self.low, self.high = (np.float64(low), np.float64(high)) if mode == "real" else (np.int64(low), np.int64(high))
        self.act_low, self.act_high = np.int64(act_range[0]), np.int64(act_range[1])
        self.act_low32, self.act_high32 = np.int32(act_range[0]), np.int32(act_range[1])
        self.zp_folded = False
        m = np.asarray(multiplier, np.int64).reshape(-1)
        s = np.asarray(shift, np.int64).reshape(-1)
        up = np.asarray(halves_up, bool).reshape(-1)
        self.real = _scalar_or(np.asarray(real, np.float64).reshape(-1))
        if mode == "wide":
            reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, np.int64(0x7FFF))
            total = 15 - s
            if np.any(total < 1):
                self.mode = "wide_general"  # shifts no real model has: the reference helper
                self.multiplier, self.shift = m, s
                return
            self.multiplier = _scalar_or(reduced)
            self.round = _scalar_or(np.int64(1) << (total - 1))
            self.right = _scalar_or(total)
        elif mode == "fixed" and fixed_point.SINGLE_ROUNDING:
            self.mode = "single"
            total = 31 - s
            self.multiplier = _scalar_or(m)
            self.round = _scalar_or(np.int64(1) << (total - 1))
            self.right = _scalar_or(total)
        elif mode == "fixed" and np.all(s <= -1) and np.all((m > 1 << 30) | up):
            self.mode = "fused"  # the usual case: one rounding shift (see _fused)
            self.multiplier = _scalar_or(m)
            # the sign term of gemmlowp's rounding, on the channels rounding halves away from zero
            self.sign_fix = _scalar_or(np.where(up, np.int64(0), SIGN_FIX))
            total = 31 - s
            rounding = (np.int64(1) << 30) + (np.int64(1) << (total - 1))
            # The output zero point joins the rounding constant (exact: a multiple of the
            # divisor) while every term stays below 2**63.
            self.zp_folded = bool(np.all(total <= 53)) and abs(self.out_zp) <= 128
            if self.zp_folded:
                rounding = rounding + (np.int64(self.out_zp) << total)
            self.round = _scalar_or(rounding)
            self.right = _scalar_or(total)
        elif mode == "fixed":
            left, right = np.maximum(s, 0), np.maximum(-s, 0)
            self.left = _scalar_or(left) if np.any(left > 0) else None
            self.multiplier = _scalar_or(m)
            self.any_right = bool(np.any(right > 0))
            away = np.broadcast_to((right > 0) & ~up, np.broadcast_shapes(right.shape, up.shape))
            self.any_away = bool(np.any(away))
            self.mask = None if np.all(away) else _scalar_or(np.where(away, np.int64(-1), np.int64(0)))
            self.half = _scalar_or(np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), np.int64(0)))
            self.right = _scalar_or(right)

    def tiled(self, times: int) -> "Requantizer":
        """This requantizer for rows of ``times`` pixels of ``C`` channels (``[..., times * C]``):
        per-channel vectors repeated, so that NumPy's inner loops run over whole rows instead of
        ``C`` values at a time (slow when ``C`` is small)."""
        other = copy.copy(self)
        for name in ("multiplier", "shift", "round", "right", "left", "mask", "half", "real", "sign_fix"):
            value = getattr(self, name, None)
            if isinstance(value, np.ndarray):
                setattr(other, name, np.tile(value, times))
        return other

    def buffers(self, rows: int, channels: int) -> list[tuple[tuple[int, int], np.dtype]]:
        """Scratch one call needs for ``rows x channels`` accumulators: the working array
        (float64 in ``real`` mode, else int64) and a temporary of the same shape."""
        dtype = F64 if self.mode == "real" else I64
        return [((rows, channels), dtype), ((rows, channels), dtype)]

    def __call__(self, acc: np.ndarray, offset: Any, out: np.ndarray, work: np.ndarray, tmp: np.ndarray) -> None:
        """``out = requantized(acc + offset)``: ``acc`` exact integers (float or int) ``[rows, C]``,
        ``offset`` per channel (``[C]``, or 0), ``out`` the ``[rows, C]`` output view (for a
        :meth:`tiled` one: ``[rows, times * C]`` and offsets tiled likewise), ``work`` and
        ``tmp`` scratch from :meth:`buffers` (as large or larger, cut here). An ``offset`` of
        ``acc``'s dtype is added to ``acc`` in place (the caller proved the sums exact there),
        any other is added after the conversion to the working dtype."""
        t = work.reshape(-1)[: acc.size].reshape(acc.shape)
        tmp = tmp.reshape(-1)[: acc.size].reshape(acc.shape)
        # int32 scratch in tmp's memory for the larger blocks (NARROW_FROM)
        narrow = tmp.reshape(-1).view(I32)[: acc.size].reshape(acc.shape) if acc.size >= NARROW_FROM else None
        if isinstance(offset, np.ndarray) and offset.dtype == acc.dtype:
            np.add(acc, offset, out=acc)
            self._load(acc, t, narrow)
        else:  # the exact integers converted, then the offset added in the working dtype
            self._load(acc, t, narrow)
            if not (np.ndim(offset) == 0 and offset == 0):
                np.add(t, offset, out=t, casting="unsafe")
        mode = self.mode
        if mode == "fused":
            self._fused(t, tmp)
            if self.zp_folded and narrow is not None:
                # The results are below 2**30 here (an int32 times a multiplier below 2**31,
                # shifted right by 32 or more): clamped as int32, twice as fast as int64.
                np.copyto(narrow, t, casting="unsafe")
                _clip(narrow, self.act_low32, self.act_high32, out=out, casting="unsafe")
                return
            if self.zp_folded:
                _clip(t, self.act_low, self.act_high, out=out, casting="unsafe")
                return
        elif mode == "real":
            self._real(t, tmp)
        elif mode == "fixed":
            self._fixed(t, tmp)
        elif mode == "wide" or mode == "single":
            if mode == "single" and self.wrap:
                _wrap32(t)
            np.multiply(t, self.multiplier, out=t)
            np.add(t, self.round, out=t)
            np.right_shift(t, self.right, out=t)
            _wrap32(t)
        else:
            t[...] = fixed_point.multiply_by_quantized_multiplier_int64(t, self.multiplier, self.shift)
        _clip(t, self.low, self.high, out=t)
        np.add(t, self.out_zp, out=out, casting="unsafe")

    def _load(self, acc: np.ndarray, t: np.ndarray, narrow: np.ndarray | None) -> None:
        """``t = acc`` in the working dtype (exact integers; float32 ones are within 2**24, so
        int32 holds them on the way to int64)."""
        if narrow is not None and acc.dtype == F32 and self.mode != "real":
            np.copyto(narrow, acc, casting="unsafe")
            np.copyto(t, narrow)
        else:
            np.copyto(t, acc, casting="unsafe")

    def _fused(self, t: np.ndarray, tmp: np.ndarray) -> None:
        """:meth:`_fixed` as one rounding, for multipliers above ``2**30`` and right shifts
        ``e >= 1`` (every layer of a real model): ``floor((floor(a / 2**31) + c) / 2**e) ==
        floor((a + c * 2**31) / 2**(31 + e))`` for integers ``a`` and ``c``, so with ``a = x * m +
        2**30`` and ``c = 2**(e-1) - (v < 0)`` (``v`` the high product) both steps are
        ``(x * m + 2**30 + 2**(30+e) - (v < 0) * 2**31) >> (31 + e)``; and ``v < 0`` iff ``x * m <
        -2**30`` iff ``x < 0`` when ``m > 2**30``. Every term stays below ``2**63``. For an int32
        ``x`` held in int64, ``x & -2**31`` is that ``-(x < 0) * 2**31`` in one pass
        (``sign_fix``, per channel). Channels rounding halves up (``halves_up``) have ``c =
        2**(e-1)``: no sign term (``sign_fix`` 0; when no channel has one the pass is skipped),
        and any multiplier."""
        if self.wrap:
            _wrap32(t)
        away = not (np.ndim(self.sign_fix) == 0 and self.sign_fix == 0)
        if away:
            np.bitwise_and(t, self.sign_fix, out=tmp)
        np.multiply(t, self.multiplier, out=t)
        if away:
            np.add(t, tmp, out=t)
        np.add(t, self.round, out=t)
        np.right_shift(t, self.right, out=t)

    def _fixed(self, t: np.ndarray, tmp: np.ndarray) -> None:
        """gemmlowp's double rounding, in closed forms on int64:

        * SaturatingRoundingDoublingHighMul(a, m) = ``(a * m + 2**30) >> 31`` (arithmetic shift).
          For ``a * m >= 0`` that is the nudge-and-divide itself; for ``a * m < 0`` gemmlowp
          truncates ``(a * m + 1 - 2**30) / 2**31`` toward zero, i.e. takes its ceiling, which is
          ``floor((a * m + 1 - 2**30 + 2**31 - 1) / 2**31)``: the same expression. It saturates
          only for ``a == m == INT32_MIN``, and a multiplier is never negative.
        * RoundingDivideByPOT(v, e) (halves away from zero) = ``(v + 2**(e-1) - (v < 0)) >> e``
          for ``e >= 1``; ``v >> 63`` is that ``-(v < 0)``; on the ``halves_up`` channels
          ``(v + 2**(e-1)) >> e`` (LiteRT's builtin convolutions, see quantized_conv).
        """
        if self.wrap:
            _wrap32(t)
        if self.left is not None:
            np.left_shift(t, self.left, out=t)
            _wrap32(t)
        np.multiply(t, self.multiplier, out=t)
        np.add(t, 1 << 30, out=t)
        np.right_shift(t, 31, out=t)
        if self.any_right:
            if self.any_away:
                np.right_shift(t, 63, out=tmp)
                if self.mask is not None:
                    np.bitwise_and(tmp, self.mask, out=tmp)
                np.add(t, tmp, out=t)
            np.add(t, self.half, out=t)
            np.right_shift(t, self.right, out=t)

    def _real(self, t: np.ndarray, tmp: np.ndarray) -> None:
        """``round_half_away(acc * real)`` (see quantized_conv), clamped later."""
        np.multiply(t, self.real, out=t)
        np.abs(t, out=tmp)
        np.add(tmp, 0.5, out=tmp)
        np.floor(tmp, out=tmp)
        np.copysign(tmp, t, out=t)
        _clip(t, -(2.0**62), 2.0**62, out=t)


def _wrap32(t: np.ndarray) -> None:
    """Two's-complement wrap of int64 values to the int32 range, in place."""
    np.add(t, 1 << 31, out=t)
    np.bitwise_and(t, (1 << 32) - 1, out=t)
    np.subtract(t, 1 << 31, out=t)


def _scalar_or(values: np.ndarray) -> Any:
    """A per-channel vector, or its one value as a NumPy scalar when all channels agree."""
    values = np.asarray(values).reshape(-1)
    if values.size and np.all(values == values[0]):
        return values.dtype.type(values[0])
    return values
