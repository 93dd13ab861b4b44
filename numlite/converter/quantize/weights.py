"""Symmetric quantization of constant weights, computed as the official converter computes it.

Shared by dynamic-range and full-integer quantization. TensorFlow-free.

The official converter (its MLIR quantizer) quantizes a weight tensor symmetrically (zero point 0)
to the narrow range [-qmax, qmax] (qmax = 127 for int8, so that -q is always representable):
for each channel (or the whole tensor) it takes ``min`` and ``max`` of the values, widens a range
narrower than 1e-6 to at least [-5e-7, 5e-7] (so an all-zero channel gets a tiny scale, never 0),
takes ``half_range = max(|min|, |max|)`` and ``scale = half_range / qmax`` in double precision,
then ``q = round(value / scale)`` in double, halves away from zero, clamped. The file stores the
scale as float32. (TFLite's older C++ utilities multiply by a float32 inverse instead; the two
agree except at rare ties, and the converter's files are what numlite must reproduce.)
"""

from __future__ import annotations

import numpy as np

F32 = np.dtype(np.float32)
_NEAR_ZERO = 1e-6  # a range narrower than this is widened around zero (the converter's rule)

__all__ = ["quantize_symmetric", "dequantize", "nonzero_scales", "qmax"]


def qmax(bits: int) -> int:
    """The largest magnitude of a narrow-range symmetric ``bits``-bit integer (127 for 8 bits)."""
    if not 2 <= bits <= 32:
        raise ValueError(f"cannot quantize to {bits} bits")
    return (1 << (bits - 1)) - 1


def _storage(bits: int) -> np.dtype:
    return np.dtype(np.int8 if bits <= 8 else np.int16 if bits <= 16 else np.int32)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """``std::round``: halves away from zero (``np.round`` would round them to even)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_symmetric(values: np.ndarray, axis: int | None, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Quantize float ``values`` symmetrically to signed ``bits``-bit integers.

    ``axis=None``: one scale for the whole tensor (per-tensor); otherwise one scale per index
    along ``axis`` (per-channel, TFLite's ``quantized_dimension``). Returns ``(q, scales)``:
    ``q`` of ``values``' shape (int8 for 8 bits, int16 up to 16, int32 beyond) and float32
    ``scales`` of shape ``[1]`` or ``[values.shape[axis]]``; ``values ~= q * scale``.
    """
    x = np.asarray(values, dtype=F32)
    top = qmax(bits)
    if axis is None:
        flat = x.reshape(1, -1)
    else:
        axis = axis % x.ndim if x.ndim else 0
        flat = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
    if flat.shape[1] == 0:
        low = high = np.zeros(flat.shape[0])
    else:
        low, high = flat.min(axis=1).astype(np.float64), flat.max(axis=1).astype(np.float64)
    tiny = high - low <= _NEAR_ZERO  # widened so that no scale is zero (nothing to divide by)
    low = np.where(tiny, np.minimum(low, -_NEAR_ZERO / 2), low)
    high = np.where(tiny, np.maximum(high, _NEAR_ZERO / 2), high)
    scales = np.maximum(np.abs(low), np.abs(high)) / top  # float64, as the converter divides
    q = _round_half_away(flat.astype(np.float64) / scales[:, None])
    q = np.clip(q, -top, top).astype(_storage(bits))
    scales = scales.astype(F32)
    if axis is None:
        return q.reshape(x.shape), scales
    moved = (x.shape[axis],) + x.shape[:axis] + x.shape[axis + 1:]
    return np.moveaxis(q.reshape(moved), 0, axis), scales


def dequantize(q: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    """``q * scale`` in float32, per tensor (``axis=None``) or per channel along ``axis``."""
    scales = np.asarray(scales, F32)
    if axis is None:
        return (q.astype(F32) * scales.reshape(())).astype(F32)
    shape = [1] * q.ndim
    shape[axis] = -1
    return (q.astype(F32) * scales.reshape(shape)).astype(F32)


def nonzero_scales(scales: np.ndarray) -> np.ndarray:
    """``scales`` with zeros replaced by 1, for scales from elsewhere (``quantize_symmetric``
    never returns a zero scale) that a kernel or file must not hold."""
    scales = np.asarray(scales, F32)
    return np.where(scales == 0, F32.type(1), scales).astype(F32)
