"""The converter's quantization settings, as ``tf.lite.TFLiteConverter`` spells them.

TensorFlow-free: the settings accept TensorFlow's own objects (``tf.lite.Optimize.DEFAULT``,
``tf.lite.OpsSet.TFLITE_BUILTINS_INT8``, ``tf.int8``, ``tf.float16``) as well as numlite's and
NumPy's, and keep them as plain names and NumPy dtypes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from numlite.errors import ConversionError


class Optimize(enum.Enum):
    """What to optimize for; like ``tf.lite.Optimize``. Only ``DEFAULT`` matters: the two others
    are deprecated aliases of it, as in TensorFlow."""

    DEFAULT = "DEFAULT"
    OPTIMIZE_FOR_SIZE = "OPTIMIZE_FOR_SIZE"
    OPTIMIZE_FOR_LATENCY = "OPTIMIZE_FOR_LATENCY"


# Operator sets of ``tf.lite.OpsSet`` that change what quantization produces.
INT8_ONLY = "TFLITE_BUILTINS_INT8"
INT16X8 = "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8"
BUILTINS = "TFLITE_BUILTINS"
_KNOWN_OPS_SETS = {BUILTINS, INT8_ONLY, INT16X8, "SELECT_TF_OPS"}


@dataclass
class TargetSpec:
    """Like ``tf.lite.TargetSpec``: the operator sets and the types the model may use."""

    supported_ops: set[Any] = field(default_factory=lambda: {BUILTINS})
    supported_types: list[Any] = field(default_factory=list)


@dataclass
class QuantizationSettings:
    """The quantization-related attributes of a converter, normalised."""

    optimizations: list[Optimize] = field(default_factory=list)
    supported_ops: set[str] = field(default_factory=lambda: {BUILTINS})
    supported_types: list[np.dtype] = field(default_factory=list)
    representative_dataset: Callable[[], Iterable[Any]] | None = None
    inference_input_type: np.dtype = np.dtype(np.float32)
    inference_output_type: np.dtype = np.dtype(np.float32)

    @classmethod
    def from_converter(cls, converter: Any) -> "QuantizationSettings":
        """Read and check a converter's ``optimizations``, ``target_spec``,
        ``representative_dataset`` and ``inference_*_type`` attributes."""
        spec = converter.target_spec
        settings = cls(
            optimizations=[_optimize(o) for o in (converter.optimizations or [])],
            supported_ops={_ops_set(s) for s in (spec.supported_ops or [BUILTINS])},
            supported_types=[dtype(t, "target_spec.supported_types") for t in (spec.supported_types or [])],
            representative_dataset=converter.representative_dataset,
            inference_input_type=dtype(converter.inference_input_type or np.float32, "inference_input_type"),
            inference_output_type=dtype(converter.inference_output_type or np.float32, "inference_output_type"),
        )
        settings.check()
        return settings

    @property
    def int16_activations(self) -> bool:
        """16x8 quantization: int16 activations, int8 weights."""
        return INT16X8 in self.supported_ops

    @property
    def integer_only(self) -> bool:
        """Every operator must be quantized (no float fallback)."""
        return INT8_ONLY in self.supported_ops or (self.int16_activations and BUILTINS not in self.supported_ops)

    def mode(self) -> str:
        """"none", "float16", "dynamic_range" or "full_integer"."""
        if not self.optimizations:
            return "none"
        if self.representative_dataset is not None:
            return "full_integer"
        if np.dtype(np.float16) in self.supported_types:
            return "float16"
        return "dynamic_range"

    def check(self) -> None:
        """Refuse combinations the official converter refuses, with the reason."""
        io_types = {self.inference_input_type, self.inference_output_type}
        allowed = {np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)}
        for t in io_types - allowed:
            raise ConversionError(f"inference input/output type {t} is not supported: use float32, int8, uint8 or int16")
        if io_types - {np.dtype(np.float32)} and self.mode() != "full_integer":
            raise ConversionError(
                "inference_input_type / inference_output_type other than float32 need full-integer quantization: "
                "set optimizations=[Optimize.DEFAULT] and a representative_dataset")
        if np.dtype(np.int16) in io_types and not self.int16_activations:
            raise ConversionError("int16 inference types need the 16x8 operator set "
                                  f"(target_spec.supported_ops={{{INT16X8}}})")
        if self.int16_activations and io_types & {np.dtype(np.int8), np.dtype(np.uint8)}:
            raise ConversionError("16x8 quantization takes float32 or int16 inference types, not int8/uint8")
        if (self.integer_only or self.int16_activations) and self.mode() != "full_integer":
            raise ConversionError(
                "an integer-only operator set needs a representative_dataset to calibrate the activations")


def dtype(value: Any, what: str) -> np.dtype:
    """A NumPy dtype from a NumPy type, a dtype or a ``tf.DType``."""
    value = getattr(value, "as_numpy_dtype", value)  # tf.DType
    try:
        return np.dtype(value)
    except TypeError as e:
        raise ConversionError(f"{what}: {value!r} is not a data type") from e


def _optimize(value: Any) -> Optimize:
    name = getattr(value, "name", value)
    try:
        return Optimize(getattr(value, "value", name)) if not isinstance(value, Optimize) else value
    except ValueError:
        pass
    try:
        return Optimize[str(name)]
    except KeyError:
        raise ConversionError(f"optimizations: unknown value {value!r} (use numlite.Optimize.DEFAULT)") from None


def _ops_set(value: Any) -> str:
    name = str(getattr(value, "name", value))
    if name not in _KNOWN_OPS_SETS:
        raise ConversionError(f"target_spec.supported_ops: unknown operator set {value!r}")
    if name == "SELECT_TF_OPS":
        raise ConversionError("target_spec.supported_ops: numlite writes builtin operators only (no SELECT_TF_OPS)")
    return name
