"""Post-training quantization of a converted model (the converter's last step).

The converter lowers a TensorFlow program to a float ``Model`` first; the settings below then
rewrite that model, as the official converter's post-training quantization does:

- ``optimizations=[Optimize.DEFAULT]`` alone: dynamic-range quantization (int8 weights, float
  activations quantized on the fly by hybrid kernels) -- ``dynamic_range.py``;
- plus ``target_spec.supported_types=[float16]``: float16 weights behind DEQUANTIZE -- ``float16.py``;
- plus a ``representative_dataset``: full-integer quantization calibrated by running numlite's own
  interpreter on the float model (int8 activations, or int16 with the 16x8 ops set) --
  ``full_integer.py``.

Without ``Optimize.DEFAULT`` (or ``OPTIMIZE_FOR_SIZE``/``OPTIMIZE_FOR_LATENCY``, its deprecated
aliases) nothing is quantized, whatever else is set, as with the official converter.
"""

from __future__ import annotations

from numlite.converter.quantize.options import Optimize, QuantizationSettings
from numlite.model.ir import Model

__all__ = ["Optimize", "QuantizationSettings", "quantize"]


def quantize(model: Model, settings: QuantizationSettings) -> list[str]:
    """Quantize ``model`` in place as ``settings`` ask; return lines for the conversion report."""
    mode = settings.mode()
    if mode == "none":
        return []
    if mode == "float16":
        from numlite.converter.quantize.float16 import quantize_float16

        return quantize_float16(model, settings)
    if mode == "dynamic_range":
        from numlite.converter.quantize.dynamic_range import quantize_dynamic_range

        return quantize_dynamic_range(model, settings)
    from numlite.converter.quantize.full_integer import quantize_full_integer

    return quantize_full_integer(model, settings)
