"""Simulated quantization: FakeQuantWithMinMaxArgs/Vars and QuantizeAndDequantizeV2/V3/V4
become a QUANTIZE to 8 bits and a DEQUANTIZE back to float32, as the official converter makes
them (quantization-aware training leaves these ops in a model).

The quantization parameters are TensorFlow's: FakeQuant nudges [min, max] so that zero is a
quantized value (an asymmetric scale and zero point); QuantizeAndDequantize uses a scale that
fits the larger side of the range, with zero point 0 (symmetric, signed or not). TFLite's
QUANTIZE saturates to its storage type (uint8 or int8): where TF's quantized range is narrower
(narrow_range, or fewer than 8 bits), the input is first clamped to the range's float bounds
with MAXIMUM/MINIMUM. TF rounds ties (exact halves of the step) up or to even where QUANTIZE
rounds them away from zero; other values round the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.elementwise import _float_input
from numlite.converter.lowering import SubgraphLowering
from numlite.model.ir import Quantization

_STORAGE = {"UINT8": (0, 255), "INT8": (-128, 127)}


@dataclass(frozen=True)
class Grid:
    """Values ``scale * (q - zero_point)`` for integers q in [low, high]."""

    scale: float
    zero_point: int
    low: int
    high: int


def fake_quant_grid(minimum: float, maximum: float, bits: int, narrow: bool) -> Grid:
    """TF FakeQuant's grid: [min, max] nudged (in float32) so that 0 falls on a step."""
    f32 = np.float32
    low, high = (1 if narrow else 0), (1 << bits) - 1
    scale = (f32(maximum) - f32(minimum)) / (f32(high) - f32(low))
    zero_from_min = f32(low) - f32(minimum) / scale
    zero_point = low if zero_from_min < low else high if zero_from_min > high else int(np.floor(zero_from_min + f32(0.5)))
    return Grid(float(scale), zero_point, low, high)


def symmetric_grid(minimum: float, maximum: float, bits: int, signed: bool, narrow: bool) -> Grid | None:
    """TF QuantizeAndDequantize's grid: zero point 0, the step that fits the side of the range
    that needs the larger one (None when neither side of the range has a step)."""
    f32 = np.float32
    low = -(1 << (bits - 1)) + int(narrow) if signed else 0
    high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    big = np.finfo(np.float32).max
    from_min = f32(low) / f32(minimum) if low * minimum > 0 else big
    from_max = f32(high) / f32(maximum) if high * maximum > 0 else big
    if from_min == from_max == big:
        return None
    step = f32(minimum) / f32(low) if from_min < from_max else f32(maximum) / f32(high)
    return Grid(float(step), 0, low, high)


def _quantize_dequantize(cx: SubgraphLowering, node: Node, grid: Grid) -> TensorRef:
    """QUANTIZE and DEQUANTIZE on ``grid``, clamping first where it is narrower than storage."""
    x = _float_input(cx, node, 0)
    storage = "UINT8" if grid.low >= 0 else "INT8"
    first, last = _STORAGE[storage]
    name, shape = node.name, cx.out(node).shape
    for op, q, bound in (("MAXIMUM", grid.low, first), ("MINIMUM", grid.high, last)):
        if q != bound:  # storage would saturate elsewhere: clamp to the grid's end in float
            end = np.float32(grid.scale) * np.float32(q - grid.zero_point)
            x = cx.emit1(op, [x, cx.const(end, f"{name}/{op.lower()}")], cx.spec(f"{name}/{op.lower()}", shape, "FLOAT32"))
    quantized = cx.emit1("QUANTIZE", [x], cx.spec(f"{name}/quantized", shape, storage), fold=False)
    cx.builder.sg.tensors[quantized.index].quantization = Quantization(
        scale=np.array([grid.scale], np.float32), zero_point=np.array([grid.zero_point], np.int64))
    return cx.emit1("DEQUANTIZE", [quantized], cx.out(node), fold=False)


@lowers("FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars")
def fake_quant(cx: SubgraphLowering, node: Node):
    if node.op == "FakeQuantWithMinMaxArgs":
        minimum, maximum = float(node.attrs.get("min", -6.0)), float(node.attrs.get("max", 6.0))
    else:
        minimum, maximum = (float(cx.require_const(node, i, what)) for i, what in ((1, "min"), (2, "max")))
    bits = int(node.attrs.get("num_bits", 8))
    if not 2 <= bits <= 8:
        raise cx.fail(node, f"num_bits={bits} is not supported (2 to 8)")
    if not minimum < maximum:
        raise cx.fail(node, f"the range [{minimum}, {maximum}] is empty")
    return [_quantize_dequantize(cx, node, fake_quant_grid(minimum, maximum, bits, bool(node.attrs.get("narrow_range"))))]


@lowers("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3", "QuantizeAndDequantizeV4")
def quantize_and_dequantize(cx: SubgraphLowering, node: Node):
    """With ``range_given`` (the range as constants) and one range for the whole tensor."""
    if not node.attrs.get("range_given", False):
        raise cx.fail(node, "range_given=False (the range of the values at run time) is not supported")
    if int(node.attrs.get("axis", -1)) != -1:
        raise cx.fail(node, "a range per slice (axis != -1) is not supported")
    minimum, maximum = (float(cx.require_const(node, i, what)) for i, what in ((1, "input_min"), (2, "input_max")))
    if node.op == "QuantizeAndDequantizeV3":
        bits = int(cx.require_const(node, 3, "num_bits"))
    else:
        bits = int(node.attrs.get("num_bits", 8))
    signed = bool(node.attrs.get("signed_input", True))
    if not 2 <= bits <= 8:
        raise cx.fail(node, f"num_bits={bits} is not supported (2 to 8)")
    grid = symmetric_grid(minimum, maximum, bits, signed, bool(node.attrs.get("narrow_range")))
    if grid is None or minimum > maximum:
        raise cx.fail(node, f"the range [{minimum}, {maximum}] cannot be quantized")
    return [_quantize_dequantize(cx, node, grid)]
