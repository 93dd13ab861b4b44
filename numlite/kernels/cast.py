"""CAST: convert a tensor's elements to the dtype the model declares for the output (and
BITCAST: read its bytes as that dtype).

LiteRT's conversions (``CastValue`` in its cast kernel), which NumPy's ``astype`` does not all
share:

* floating -> integer saturates: NaN gives the integer maximum, values below the range its
  minimum, values above it its maximum; in-range values truncate toward zero (static_cast).
* float16 and float64 inputs are first widened/narrowed as C++ does: float16 -> integer goes
  through float32, and every conversion *to* float16 goes through float32 (so float64 and
  int64 round twice, as ``fp16_ieee_from_fp32_value(static_cast<float>(x))`` does).
* anything -> bool is ``x != 0`` (NaN is true); bool -> number gives 0 or 1.
* integer -> narrower integer wraps modulo 2^bits (two's complement), as astype does.
* complex64 -> real keeps the real part.
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, register

SUPPORTED = tuple(
    np.dtype(t)
    for t in (
        np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.bool_, np.complex64,
    )
)


def _saturation_bounds(src: np.dtype, dst: np.dtype) -> tuple[np.generic, np.generic]:
    """The float range ``[low, high]`` of src that converts to dst without saturating: the
    integer limits as floats, with the maximum stepped down when rounding took it above the
    integer maximum (float32(INT32_MAX) is 2^31)."""
    info = np.iinfo(dst)
    low = src.type(info.min)  # a power of two (or zero): exact
    high = src.type(info.max)
    if int(high) > info.max:
        high = np.nextafter(high, src.type(0))
    return low, high


class _Cast:
    """The conversion from one dtype to another, chosen once at prepare."""

    def __init__(self, src: np.dtype, dst: np.dtype) -> None:
        self.src, self.dst = src, dst
        self.real_part = src.kind == "c" and dst.kind != "c"
        if self.real_part:  # std::real, then as from float32
            self.src = np.dtype(np.float32)
        if self.src == np.float16 and dst.kind in "iu":
            self.src = np.dtype(np.float32)  # half -> float -> integer
        self.via_float32 = dst == np.float16 and src != np.float16
        if self.src.kind == "f" and dst.kind in "iu":
            self.low, self.high = _saturation_bounds(self.src, dst)
            self.max = dst.type(np.iinfo(dst).max)

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        if self.real_part:
            x = x.real
        if self.dst == np.bool_:
            np.not_equal(x, 0, out=out)
        elif self.src.kind == "f" and self.dst.kind in "iu":
            if x.dtype != self.src:
                x = x.astype(self.src)
            with np.errstate(invalid="ignore"):
                # below the range: the minimum (exact as a float); in range: truncation
                out[...] = np.clip(x, self.low, self.high).astype(self.dst)
                np.copyto(out, self.max, where=~(x <= self.high))  # above the range, and NaN
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # float64 -> float32 may overflow to inf
                # integer wrap-around, widening, float rounding: NumPy's unsafe casts
                out[...] = x.astype(np.float32) if self.via_float32 else x


@register("CAST")
class Cast(Kernel):
    """The output dtype is the one the model declares for the output tensor."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_dtype(x, *SUPPORTED)
        dst = self._declared_output_dtype()
        if dst not in SUPPORTED:
            raise self.fail(f"cannot cast to {dst.name}")
        self.cast = _Cast(x.dtype, dst)
        return [Spec(x.shape, dst)]

    def _declared_output_dtype(self) -> np.dtype:
        runtime = self.node.runtime
        if runtime is not None and self.node.outputs and self.node.outputs[0] >= 0:
            return np.dtype(runtime.dtypes[self.node.outputs[0]])
        code = getattr(self.options, "out_data_type", None) if self.options is not None else None
        if code is None:
            raise self.fail("the output dtype is unknown")
        from numlite.model import schema

        return np.dtype(schema.numpy_type(schema.TENSOR_TYPE_NAMES[code]))

    def eval(self, ins, outs):
        self.cast(ins[0], outs[0])


@register("BITCAST")
class Bitcast(Kernel):
    """The input's bytes read as the output's dtype (the one the model declares). A wider
    input gains a last axis of ``in_size / out_size`` elements; a narrower one loses its last
    axis, which must hold ``out_size / in_size`` elements."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        runtime = self.node.runtime
        if runtime is None:
            raise self.fail("the output dtype is unknown")
        self.dtype = np.dtype(runtime.dtypes[self.node.outputs[0]])
        if x.dtype.kind in "OV" or self.dtype.kind in "OV":
            raise self.fail(f"cannot bitcast {x.dtype.name} to {self.dtype.name}")
        size, out_size = x.dtype.itemsize, self.dtype.itemsize
        if size > out_size:
            shape = x.shape + (size // out_size,)
        elif size < out_size:
            if not x.shape or x.shape[-1] != out_size // size:
                raise self.fail(f"the last dimension of {x.shape} must be {out_size // size} to bitcast "
                                f"{x.dtype.name} to {self.dtype.name}")
            shape = x.shape[:-1]
        else:
            shape = x.shape
        return [Spec(tuple(shape), self.dtype)]

    def eval(self, ins, outs):
        outs[0].reshape(-1).view(np.uint8)[...] = np.ascontiguousarray(ins[0]).reshape(-1).view(np.uint8)
