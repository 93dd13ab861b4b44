"""Post-training quantization: dynamic_range (not written yet)."""

from __future__ import annotations

from numlite.converter.quantize.options import QuantizationSettings
from numlite.errors import ConversionError
from numlite.model.ir import Model


def quantize_dynamic_range(model: Model, settings: QuantizationSettings) -> list[str]:
    """Quantize ``model`` in place; return report lines."""
    raise ConversionError("dynamic_range quantization is not implemented yet")
