"""A custom op's flexbuffer ``custom_options``, read the way LiteRT's C++ kernels read them.

LiteRT's built-in custom kernels (``TFLite_Detection_PostProcess``, ``AudioSpectrogram``,
``Mfcc``, ``NumericVerify``, ``aeq.hadamard_rotation``) take their options from
``flexbuffers::GetRoot(buffer).AsMap()`` and read each key with ``AsInt32``/``AsInt64``/
``AsFloat``/``AsBool``. Those reads convert between numbers (a float read as an int is
truncated toward zero, an int read as a float is converted) and give 0 or false for a key
the map lacks: that null read is LiteRT's default unless a kernel checks ``IsNull`` and
supplies its own, which :class:`FlexOptions` callers pass as ``default``.

Where LiteRT reads garbage instead (options that are not a flexbuffer map, a string or a
vector where a number belongs, an integer beyond int32), numlite refuses the model with a
``PrepareError`` naming the node and the key.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from numlite.kernels.base import Kernel, TensorInfo

INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_RANGE = (-(2**63), 2**63 - 1)


def decode_flexbuffer(kernel: Kernel, data: bytes) -> Any:
    """``custom_options`` decoded from flexbuffer, or an error naming the node if they are not one."""
    from flatbuffers import flexbuffers  # only models with custom options need it

    try:
        return flexbuffers.Loads(bytes(data))
    except Exception as e:  # truncated, or not a flexbuffer at all
        raise kernel.fail(f"custom_options ({len(data)} bytes) are not a flexbuffer: {type(e).__name__}: {e}") from None


class FlexOptions:
    """The decoded options map of one node, with LiteRT's typed reads."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.op = kernel.node.op_name
        data = kernel.node.custom_options
        if not data:
            raise kernel.fail(f"has no custom_options; {self.op} reads its options from a flexbuffer map")
        decoded = decode_flexbuffer(kernel, data)
        if not isinstance(decoded, dict):
            raise kernel.fail(f"custom_options are a flexbuffer {type(decoded).__name__}, not the map {self.op} reads")
        self.values: dict[str, Any] = decoded

    def has(self, key: str) -> bool:
        """False where LiteRT's ``m[key].IsNull()`` is true (missing, or a flexbuffer null)."""
        return self.values.get(key) is not None

    def _number(self, key: str) -> int | float | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, float)):
            return value
        raise self.kernel.fail(f"custom option {key!r} must be a number, got {type(value).__name__} {value!r}")

    def as_int(self, key: str, default: int = 0, bits: int = 32) -> int:
        """``AsInt32`` (``bits=32``) or ``AsInt64``: a float truncates toward zero, a bool is 0/1."""
        value = self._number(key)
        if value is None:
            return default
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.kernel.fail(f"custom option {key!r} must be a finite number, got {value!r}")
            value = int(value)  # C++'s static_cast<int64_t>(double): toward zero
        low, high = INT32_RANGE if bits == 32 else INT64_RANGE
        if not low <= value <= high:
            raise self.kernel.fail(f"custom option {key!r} = {value} does not fit the int{bits} {self.op} reads")
        return int(value)

    def as_float(self, key: str, default: float = 0.0) -> float:
        """``AsFloat``: the value rounded to float32 (returned as a Python float)."""
        value = self._number(key)
        if value is None:
            return default
        return float(np.float32(value))

    def as_bool(self, key: str, default: bool = False) -> bool:
        """``AsBool``: true for a nonzero number (a float is truncated first, as flexbuffers does)."""
        value = self._number(key)
        if value is None:
            return default
        if isinstance(value, float) and not math.isfinite(value):
            raise self.kernel.fail(f"custom option {key!r} must be a finite number, got {value!r}")
        return int(value) != 0


def expect_arity(kernel: Kernel, ins: Sequence[TensorInfo | None], inputs: int, outputs: int) -> None:
    """What LiteRT's custom kernels check first (``NumInputs``/``NumOutputs``): exactly
    ``inputs`` inputs, none omitted, and ``outputs`` outputs."""
    kernel.expect_inputs(ins, inputs)
    if len(kernel.node.outputs) != outputs:
        raise kernel.fail(f"has {len(kernel.node.outputs)} outputs; {kernel.node.op_name} writes {outputs}")
    missing = [k for k, t in enumerate(ins) if t is None]
    if missing:
        raise kernel.fail(f"input(s) {missing} are omitted; {kernel.node.op_name} needs all {inputs}")
