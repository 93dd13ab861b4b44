"""NumericVerify: the quantization debugger's check of a quantized tensor against its float twin.

Semantics read from LiteRT 2.3's ``tflite/kernels/numeric_verify.cc`` (a custom op its
``BuiltinOpResolver`` registers). Inputs: a quantized tensor (uint8, int8, int16, or float16)
and the float32 reference it approximates; output: ``dequantized - reference`` in float32,
the input's shape. With the option ``log_if_failed`` set and ``tolerance >= 0.1`` an element
differing by more than ``tolerance * scale`` fails the invoke, as in LiteRT; otherwise LiteRT
only logs statistics of the differences, which numlite does not print. Per-tensor integer
inputs are dequantized with the arithmetic of LiteRT's x86 wheels (:func:`optimized_dequantize`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, TensorInfo, register
from numlite.kernels.flex_options import FlexOptions, expect_arity
from numlite.kernels.quantization import Dequantize

FLOAT32 = np.dtype(np.float32)


def optimized_dequantize(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Per-tensor uint8/int8/int16 values dequantized as LiteRT's ``optimized_ops::Dequantize``
    computes them in its x86 wheels (built with SSE4.1, so its NEON code runs through
    NEON_2_SSE): each whole block of 8 values as ``float(q) * scale + float(-zero_point *
    scale)``, two float32 roundings, the rest exactly rounded, ``float(scale * (q - zp))``. The
    two differ by one float32 ulp for some values."""
    flat = values.reshape(-1)
    head = flat.size - flat.size % 8
    out = np.empty(flat.size, FLOAT32)
    scale32 = np.float32(scale)
    out[:head] = flat[:head].astype(FLOAT32) * scale32 + np.float32(-zero_point * np.float64(scale32))
    out[head:] = ((flat[head:].astype(np.float64) - zero_point) * np.float64(scale32)).astype(FLOAT32)
    return out.reshape(values.shape)


@register("NumericVerify")
class NumericVerify(Kernel):
    """``dequantize(input) - reference``; options ``tolerance`` (``AsFloat``) and
    ``log_if_failed`` (``AsBool``), absent ones 0 / false as LiteRT reads them. The
    dequantization is DEQUANTIZE's (per tensor or per channel). Source: LiteRT's
    ``tflite/kernels/numeric_verify.cc``."""

    foldable = False  # a check: it runs at every invoke, as in LiteRT

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if not hasattr(self, "tolerance"):
            m = FlexOptions(self)
            self.tolerance = m.as_float("tolerance")
            self.log_if_failed = m.as_bool("log_if_failed")
            self.dequantize = Dequantize(self.node)
        expect_arity(self, ins, 2, 1)
        x, reference = ins
        self.expect_dtype(x, np.uint8, np.int8, np.int16, np.float16)
        self.expect_dtype(reference, np.float32)
        if reference.size != x.size:
            raise self.fail(f"reference {reference.name!r} {reference.shape} and input {x.name!r} {x.shape} differ in size")
        self.dequantize.prepare([x])
        q = x.quantization
        # LiteRT's tensor params: those of a per-tensor quantization, else 0.
        per_tensor = q is not None and q.scale is not None and len(q.scale) == 1
        scale = float(q.scale[0]) if per_tensor else 0.0
        zero_point = int(q.zero_point[0]) if per_tensor and q.zero_point is not None and len(q.zero_point) else 0
        # DequantizeImpl takes optimized_ops::Dequantize for per-tensor integers, DEQUANTIZE's
        # arithmetic (reference) for per-channel ones and float16.
        self.per_tensor = (scale, zero_point) if per_tensor and x.dtype != np.float16 else None
        self.max_diff = np.float32(np.float32(self.tolerance) * np.float32(scale))
        self.name = x.name
        return [Spec(x.shape, FLOAT32)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        x, reference = ins
        out = outs[0]
        if self.per_tensor is not None:
            out[...] = optimized_dequantize(x, *self.per_tensor)
        else:
            self.dequantize.eval([x], [out])
        np.subtract(out, reference.reshape(out.shape), out=out)
        if self.log_if_failed and self.tolerance >= 0.1:
            over = np.flatnonzero(np.abs(out) > self.max_diff)
            if over.size:
                k = int(over[0])
                raise InvokeError(
                    f"NumericVerify mismatch: element {k} of {self.name!r}, quantized {x.reshape(-1)[k]}, differs from"
                    f" the reference {reference.reshape(-1)[k]} by {abs(out.reshape(-1)[k])} > {self.max_diff}"
                    f" (tolerance {self.tolerance} x scale)"
                )
