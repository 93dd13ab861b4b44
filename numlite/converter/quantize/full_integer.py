"""Post-training quantization: full_integer (not written yet)."""

from __future__ import annotations

from numlite.converter.quantize.options import QuantizationSettings
from numlite.errors import ConversionError
from numlite.model.ir import Model


def quantize_full_integer(model: Model, settings: QuantizationSettings) -> list[str]:
    """Quantize ``model`` in place; return report lines."""
    raise ConversionError("full_integer quantization is not implemented yet")
