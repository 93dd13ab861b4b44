"""FFTs and complex numbers: RFFT2D (and RFFT, as an RFFT2D of one row), Real, Imag and
ComplexAbs of complex64 tensors."""

from __future__ import annotations

import numpy as np

from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input, require_types
from numlite.converter.lowering import SubgraphLowering

_TO_REAL = {"Real": "REAL", "Imag": "IMAG", "ComplexAbs": "COMPLEX_ABS"}


@lowers("RFFT2D")
def rfft2d(cx: SubgraphLowering, node: Node):
    x = cx.input(node, 0)
    require_types(cx, node, x, ("FLOAT32",), "RFFT2D")
    return [cx.emit1("RFFT2D", [x, int32_input(cx, node, 1)], cx.out(node))]


@lowers("RFFT")
def rfft(cx: SubgraphLowering, node: Node):
    """The last axis as a [1, n] image: RESHAPE, RFFT2D with fft_length [1, n], RESHAPE."""
    x = cx.input(node, 0)
    require_types(cx, node, x, ("FLOAT32",), "RFFT2D")
    length = cx.require_const(node, 1, "fft_length")
    out = cx.out(node)
    if x.shape is None or x.shape[-1] < 0 or sum(d < 0 for d in x.shape[:-1]) > 1 or out.shape is None:
        raise cx.fail(node, "the input needs a known rank, a static last axis and at most one other unknown dim")
    rows = x.shape[:-1] + (1, x.shape[-1])
    image = cx.emit1("RESHAPE", [x, cx.const(np.array(rows, np.int32), f"{node.name}/rows")],
                     cx.spec(f"{node.name}/rows", rows, x.type))
    lengths = cx.const(np.array([1, int(length.reshape(-1)[0])], np.int32), f"{node.name}/fft_length")
    spectrum_shape = out.shape[:-1] + (1, out.shape[-1])
    spectrum = cx.emit1("RFFT2D", [image, lengths], cx.spec(f"{node.name}/spectrum", spectrum_shape, out.type))
    return [cx.emit1("RESHAPE", [spectrum, cx.const(np.array(out.shape, np.int32), f"{node.name}/shape")], out)]


@lowers(*_TO_REAL)
def complex_to_real(cx: SubgraphLowering, node: Node):
    """REAL, IMAG or COMPLEX_ABS (complex64 to float32)."""
    x = cx.input(node, 0)
    op = _TO_REAL[node.op]
    require_types(cx, node, x, ("COMPLEX64",), op)
    return [cx.emit1(op, [x], cx.out(node))]
