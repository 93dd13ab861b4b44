"""Special functions TFLite has no builtin for, composed from builtins: Lgamma.

``lgamma(x) = log|Gamma(x)|`` for x >= 1/2 by Lanczos' approximation with the six coefficients
of Numerical Recipes' ``gammln`` (g = 5; relative error below 2e-10, far under float32's
rounding), and below 1/2 by the reflection formula ``log(pi / |sin(pi x)|) - lgamma(1 - x)``.
The series ``sum c_j / (x + j)`` is one DIV over a new last axis of six denominators and one
SUM, so the whole function is 27 builtins (TFLite's own lowering of Lgamma is 56).
"""

from __future__ import annotations

import math

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.elementwise import Composer, _float_input
from numlite.converter.lowering import SubgraphLowering

# Numerical Recipes' gammln: Gamma(x) ~ sqrt(2 pi) (x + 5.5)^(x + 0.5) e^-(x + 5.5) (c0 + sum c_j / (x + j)) / x;
# the constants here carry the sqrt(2 pi) factor.
_SQRT_2PI = 2.5066282746310005
_LANCZOS = np.array([76.18009172947146, -86.50532032941677, 24.01409824083091, -1.231739572450155,
                     0.1208650973866179e-2, -0.5395239384953e-5]) * _SQRT_2PI
_LANCZOS_0 = 1.000000000190015 * _SQRT_2PI


def _lgamma_right(c: Composer, x: TensorRef) -> TensorRef:
    """lgamma for x >= 1/2: ``(x + 0.5) log(x + 5.5) - (x + 5.5) + log(series / x)``."""
    t = c.op("ADD", x, c.const(5.5))
    power = c.op("SUB", c.op("MUL", c.op("ADD", x, c.const(0.5)), c.op("LOG", t)), t)
    shape = None if x.shape is None else x.shape + (1,)
    column = c.op("EXPAND_DIMS", x, c.cx.const(np.array(-1, np.int32), f"{c.node.name}/axis"), shape=shape)
    denominators = c.op("ADD", column, c.cx.const(np.arange(1, 7, dtype=np.float32), f"{c.node.name}/steps"),
                        shape=None if x.shape is None else x.shape + (6,))
    terms = c.op("DIV", c.cx.const(_LANCZOS.astype(np.float32), f"{c.node.name}/lanczos"), denominators,
                 shape=denominators.shape)
    series = c.op("SUM", terms, c.cx.const(np.array([-1], np.int32), f"{c.node.name}/last"), keep_dims=False)
    series = c.op("ADD", series, c.const(_LANCZOS_0))
    return c.op("ADD", power, c.op("LOG", c.op("DIV", series, x)))


@lowers("Lgamma")
def lgamma(cx: SubgraphLowering, node: Node):
    """log|Gamma(x)|; +inf at the poles (0, -1, -2...), as TensorFlow. The reflection reads
    sin(pi x) as sin(pi r) with r = x - round(x), exact in float32, so that it keeps its
    precision near the poles and is exactly 0 on them."""
    c = Composer(cx, node)
    x = _float_input(cx, node)
    one = c.const(1.0)
    left = c.test("LESS", x, c.const(0.5))
    right = _lgamma_right(c, c.select(left, c.op("SUB", one, x), x))
    r = c.op("SUB", x, c.op("ROUND", x))
    sine = c.op("ABS", c.op("SIN", c.op("MUL", r, c.const(math.pi))))
    reflected = c.op("SUB", c.op("SUB", c.const(math.log(math.pi)), c.op("LOG", sine)), right)
    reflected = c.select(c.test("EQUAL", r, c.const(0.0)), c.const(np.inf), reflected)
    return [c.select(left, reflected, right)]
