"""aeq.hadamard_rotation: a normalized fast Walsh-Hadamard transform over blocks of features.

Semantics read from LiteRT 2.3's ``tflite/kernels/hadamard_rotation.cc`` (a custom op its
``BuiltinOpResolver`` registers, used by rotation-quantized language models).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, register
from numlite.kernels.flex_options import FlexOptions, expect_arity

FLOAT32 = np.dtype(np.float32)


@register("aeq.hadamard_rotation")
class HadamardRotation(Kernel):
    """The input ``[features, size]`` or ``[batch, features, size]`` float32, with each block of
    ``hadamard_size`` values transformed by the Walsh-Hadamard butterflies in float32 and scaled
    by ``1/sqrt(hadamard_size)``. As in LiteRT, the ``batch * features * (size //
    hadamard_size)`` blocks are consecutive in the flat data (so a size that is not a multiple
    leaves the flat tail unchanged), and the ``random_binary_vector`` option is not applied.

    Refused where LiteRT computes nothing meaningful: a ``hadamard_size`` that is not a positive
    power of two (LiteRT copies the input, or divides by zero), int32 input (LiteRT transforms
    its bits as floats), other ranks. Source: LiteRT's ``tflite/kernels/hadamard_rotation.cc``.
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if not hasattr(self, "size"):
            self.size = FlexOptions(self).as_int("hadamard_size")
            if self.size < 1 or self.size & (self.size - 1):
                raise self.fail(f"hadamard_size is {self.size}; it must be a positive power of two")
        expect_arity(self, ins, 1, 1)
        x = ins[0]
        self.expect_dtype(x, np.float32)
        if x.ndim not in (2, 3):
            raise self.fail(f"input {x.name!r} has shape {x.shape}; it must be [features, size] or [batch, features, size]")
        self.blocks = x.size // x.shape[-1] * (x.shape[-1] // self.size)
        return [Spec(x.shape, FLOAT32)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        out = outs[0]
        flat = np.array(ins[0], FLOAT32).reshape(-1)
        n = self.size
        data = flat[: self.blocks * n].reshape(self.blocks, n)
        h = 1
        while h < n:  # one butterfly stage: pairs h apart within blocks of 2h
            pairs = data.reshape(self.blocks, n // (2 * h), 2, h)
            x, y = pairs[:, :, 0, :].copy(), pairs[:, :, 1, :].copy()
            np.add(x, y, out=pairs[:, :, 0, :])
            np.subtract(x, y, out=pairs[:, :, 1, :])
            h *= 2
        data *= np.float32(1.0 / math.sqrt(n))
        out[...] = flat.reshape(out.shape)
