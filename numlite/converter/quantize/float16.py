"""Post-training quantization: float16 (not written yet)."""

from __future__ import annotations

from numlite.converter.quantize.options import QuantizationSettings
from numlite.errors import ConversionError
from numlite.model.ir import Model


def quantize_float16(model: Model, settings: QuantizationSettings) -> list[str]:
    """Quantize ``model`` in place; return report lines."""
    raise ConversionError("float16 quantization is not implemented yet")
