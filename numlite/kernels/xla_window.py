"""The XLA-style window ops of LiteRT's TFLite dialect: DILATE and REDUCE_WINDOW.

DILATE spreads a tensor out: ``dilations[i] - 1`` copies of ``padding_value`` between
neighbours along each axis i, so a dimension d becomes ``(d - 1) * dilations[i] + 1``.

REDUCE_WINDOW (the deprecated TFLite form of STABLEHLO_REDUCE_WINDOW: no padding, no base
dilation) reduces every window of ``window_shape`` taps, ``window_dilations`` apart, placed
``window_strides`` apart, starting from ``init_value``, with the option's ``reduce_function``
(ADD, MUL, MINIMUM, MAXIMUM, ALL, ANY). A dimension d gives
``(d - (w - 1) * dilation - 1) // stride + 1`` windows. Window shape, strides and dilations are
int64 constants, as LiteRT requires.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, register

DATA = (np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_)


@register("DILATE")
class Dilate(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        x, dilations, padding = ins
        self.expect_dtype(x, *DATA, np.uint16, np.uint32, np.uint64)
        self.expect_dtype(dilations, np.int32)
        if dilations.shape != (x.ndim,) or padding.dtype != x.dtype or padding.size != 1:
            raise self.fail(f"needs one int32 dilation per axis of {x.shape} and a padding value of dtype "
                            f"{x.dtype.name}; got dilations {dilations.shape}, padding {padding.dtype.name}{list(padding.shape)}")
        if dilations.value is None:
            return [Spec(None, x.dtype)]
        return [Spec(self._plan(x.shape, dilations.value), x.dtype)]

    def _plan(self, shape: tuple[int, ...], dilations: np.ndarray) -> tuple[int, ...]:
        steps = [int(d) for d in dilations]
        if any(d < 1 for d in steps):
            raise self.fail(f"dilations {steps} must be at least 1")
        self.where = tuple(slice(None, None, d) for d in steps)
        return tuple((n - 1) * d + 1 if n else 0 for n, d in zip(shape, steps))

    def eval(self, ins, outs):
        x, dilations, padding = ins
        if outs[0] is None:
            outs[0] = np.empty(self._plan(x.shape, dilations), x.dtype)
        outs[0][...] = padding.reshape(())
        outs[0][self.where] = x


# ReduceWindowFunction codes of the schema, as NumPy reductions of two arrays.
REDUCERS = {1: np.add, 2: np.multiply, 3: np.minimum, 4: np.maximum, 5: np.logical_and, 6: np.logical_or}


@register("REDUCE_WINDOW")
class ReduceWindow(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 5)
        x, init, shape_t, strides_t, dilations_t = ins
        self.expect_dtype(x, *DATA)
        if init.dtype != x.dtype or init.size != 1:
            raise self.fail(f"init_value must be one {x.dtype.name}, got {init.dtype.name}{list(init.shape)}")
        params = []
        for t, what in ((shape_t, "window_shape"), (strides_t, "window_strides"), (dilations_t, "window_dilations")):
            self.expect_dtype(t, np.int64)
            if t.value is None or t.shape != (x.ndim,):
                raise self.fail(f"{what} must be a constant int64 vector of {x.ndim} values, got {list(t.shape)}")
            params.append([int(v) for v in t.value])
        window, strides, dilations = params
        if x.ndim == 0 or any(v < 1 for v in window + strides + dilations):
            raise self.fail(f"window {window}, strides {strides} and dilations {dilations} must be positive")
        function = getattr(_options2(self), "reduce_function", 0)
        if function not in REDUCERS:
            raise self.fail(f"unsupported reduce_function {function}")
        if function in (5, 6) and x.dtype != np.bool_:
            raise self.fail("ALL and ANY reduce bool tensors")
        self.reduce = REDUCERS[function]
        spans = [(w - 1) * d + 1 for w, d in zip(window, dilations)]
        out_shape = tuple(max((n - s) // st + 1, 0) for n, s, st in zip(x.shape, spans, strides))
        self.taps = window_taps(window, dilations, strides, out_shape)
        return [Spec(out_shape, x.dtype)]

    def eval(self, ins, outs):
        x, init = ins[0], ins[1]
        out = outs[0]
        out[...] = init.reshape(())
        if out.size == 0:
            return
        for tap in self.taps:  # in LiteRT's order: the window's taps, row-major
            self.reduce(out, x[tap], out=out)


def window_taps(window: Sequence[int], dilations: Sequence[int], strides: Sequence[int],
                out_shape: Sequence[int]) -> list[tuple[slice, ...]]:
    """One strided view per window tap, in row-major tap order (LiteRT's reduction order): the
    tap's element of every window, for an input (already padded) of windows ``strides`` apart
    whose taps are ``dilations`` apart. STABLEHLO_REDUCE_WINDOW shares it."""
    return [tuple(slice(t * d, t * d + (o - 1) * st + 1, st) for t, d, o, st in zip(tap, dilations, out_shape, strides))
            for tap in itertools.product(*(range(w) for w in window))]


def _options2(kernel: Kernel):
    """The node's builtin_options2 table (REDUCE_WINDOW keeps its options there), read from the
    model the runtime runs."""
    runtime = kernel.node.runtime
    if runtime is None or kernel.node.index < 0:
        return None
    return runtime.graph.operators[kernel.node.index].builtin_options2
