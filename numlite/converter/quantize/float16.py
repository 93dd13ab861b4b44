"""Float16 quantization: weights stored as float16, turned back to float32 by DEQUANTIZE.

What the official converter does with ``optimizations=[Optimize.DEFAULT]`` and
``target_spec.supported_types=[float16]``, checked against its files (TF 2.21), and so numlite:

- every float32 constant an operator reads becomes float16, whatever its size (biases,
  scalars), in every subgraph (IF branches, WHILE bodies); numlite keeps float32 the initial
  values of variables it keeps (read only by ASSIGN_VARIABLE): they are state, not weights;
- values beyond float16's range are clamped to +-65504 (not made infinite), the others rounded
  to the nearest float16, ties to even;
- one DEQUANTIZE (version 3, float16 input) per constant at the start of its subgraph writes the
  float32 tensor the operators read, so a constant several operators share is dequantized once
  and the operators themselves are unchanged (float kernels; the runtime may fold the DEQUANTIZE
  at load time);
- the float32 data is dropped: the file holds about half the bytes of weights.
"""

from __future__ import annotations

import numpy as np

from numlite.converter.optimize import remove_dead_code
from numlite.converter.quantize import model_edit as edit
from numlite.converter.quantize.options import QuantizationSettings
from numlite.model.ir import Model, Operator, Subgraph

F16_MAX = float(np.finfo(np.float16).max)
DEQUANTIZE_FLOAT16_VERSION = 3  # the version LiteRT needs for DEQUANTIZE of float16


def quantize_float16(model: Model, settings: QuantizationSettings) -> list[str]:
    """Store every float32 constant of ``model`` as float16 behind a DEQUANTIZE, in place;
    return lines for the conversion report."""
    before = edit.constant_bytes(model)
    count = sum(_quantize_subgraph(model, sg) for sg in model.subgraphs)
    remove_dead_code(model)  # the float32 buffers nothing reads any more
    if not count:
        return ["float16: nothing quantized (no float32 constants)"]
    return [f"float16: {count} float32 constant(s) stored as float16, each behind a DEQUANTIZE",
            f"float16: constant data {edit.kib(before)} -> {edit.kib(edit.constant_bytes(model))}"]


def to_float16(values: np.ndarray) -> np.ndarray:
    """float32 values as float16, clamped to float16's finite range as the official converter
    clamps them."""
    return np.clip(values, -F16_MAX, F16_MAX).astype(np.float16)


def _quantize_subgraph(model: Model, sg: Subgraph) -> int:
    """Turn ``sg``'s float32 constants into DEQUANTIZE outputs; returns how many."""
    dequantize: list[Operator] = []
    for index, readers in sorted(edit.uses(sg).items()):
        value = edit.float_constant(model, sg, index)
        if value is None or all(model.op_name(use.op) == "ASSIGN_VARIABLE" for use in readers):
            continue
        t = sg.tensors[index]
        half = edit.add_constant(model, sg, to_float16(value), f"{t.name}/float16")
        t.buffer = 0  # now computed, by the DEQUANTIZE
        dequantize.append(edit.dequantize_op(model, half, index, DEQUANTIZE_FLOAT16_VERSION))
    # After any CALL_ONCE (variable initialisation comes first, as the converter emits it).
    start = 0
    while start < len(sg.operators) and model.op_name(sg.operators[start]) == "CALL_ONCE":
        start += 1
    sg.operators[start:start] = dequantize
    return len(dequantize)
