"""Normalizations over the last axis: SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION and
LOCAL_RESPONSE_NORMALIZATION (float32).

SOFTMAX and LOG_SOFTMAX subtract the row maximum first, as LiteRT does, so large logits do not
overflow. L2_NORMALIZATION divides by ``max(sqrt(sum(x*x)), 1e-6)``: LiteRT clamps the norm,
not the squared norm. LOCAL_RESPONSE_NORMALIZATION (4-D input) scales each value by
``(bias + alpha * sum of x² over channels c-radius..c+radius) ** -beta``; alpha is not divided
by the window size (TensorFlow's convention).
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, dot_into, register

# LiteRT hard-codes this epsilon in its L2 normalization kernel (it is not read from the model).
L2_EPSILON = np.float32(1e-6)


class _LastAxis(Kernel):
    """One float32 input of rank >= 1, one output of the same shape."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        x = ins[0]
        self.expect_dtype(x, np.float32)
        if x.ndim < 1:
            raise self.fail("input must have at least one dimension")
        return [Spec(x.shape, x.dtype)]


# SOFTMAX of at least this many rows shifts every row by the tensor's maximum instead of its own:
# softmax is shift-invariant, and NumPy reduces a whole tensor in one fast call where it takes
# each short row on its own (3136 rows of 64: 192 us for the rows' maxima, 7 for the tensor's),
# and the rows' sums are one BLAS product with ones (66 -> 8 us). Exact-range rows only: where a
# row's sum comes out below SHIFTED_MIN_SUM (its values far below the tensor's maximum, where
# the exponentials lose precision or vanish) or the maximum is not finite, every row is
# computed with its own maximum, as LiteRT does. The results differ from LiteRT's by roundings
# of the shifted values (a few ulps).
SHIFTED_FROM_ROWS = 16
SHIFTED_MIN_SUM = np.float32(2.0**-100)


@register("SOFTMAX")
class Softmax(_LastAxis):
    bound: tuple = ()  # (input, output, its views and the rows' buffer): see _bind

    def prepare(self, ins):
        specs = super().prepare(ins)
        self.beta = np.array(self.options.beta if self.options is not None else 1.0, np.float32)
        self.scaled = bool(self.beta != 1)
        self.bound = ()
        depth = ins[0].shape[-1] if ins[0].ndim else 1
        rows = ins[0].size // depth if depth else 0
        self.shifted = rows >= SHIFTED_FROM_ROWS and depth > 1 and bool(self.beta > 0)
        self.ones = np.ones(depth, np.float32) if self.shifted else None
        self.peak = np.empty((), np.float32)
        return specs

    def _shifted(self, rows: np.ndarray, result: np.ndarray, sums: np.ndarray) -> bool:
        """The softmax of every row shifted by the tensor's maximum (see SHIFTED_FROM_ROWS);
        False, with ``result`` half-done, when a row needs its own maximum."""
        peak = self.peak
        np.maximum.reduce(rows.reshape(-1), 0, None, peak)
        if not np.isfinite(peak):
            return False
        np.subtract(rows, peak, result)
        if self.scaled:
            np.multiply(result, self.beta, result)
        np.exp(result, result)
        dot_into(result, self.ones, sums)
        if np.minimum.reduce(sums) < SHIFTED_MIN_SUM:
            return False
        np.divide(result, sums[:, None], result)
        return True

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        bound = self.bound
        if not bound or bound[0] is not x or bound[1] is not out:
            bound = self.bound = self._bind(x, out)
        _, _, rows, result, extremes = bound
        if self.shifted and rows.ndim == 2 and self._shifted(rows, result, extremes[0]):
            return
        np.maximum.reduce(rows, -1, None, extremes[0])
        np.subtract(rows, extremes[1], result)
        if self.scaled:
            np.multiply(result, self.beta, result)
        np.exp(result, result)
        np.add.reduce(result, -1, None, extremes[0])
        np.divide(result, extremes[1], result)

    @staticmethod
    def _bind(x: np.ndarray, out: np.ndarray) -> tuple:
        """Views of these arrays made once: the rows as ``[rows, depth]`` (one row: a vector,
        and its maximum and sum a 0-d array, which NumPy handles with less overhead per call
        than a [1, 1] one: 2.1 us against 3.4 for a classifier's ten logits), and a buffer for
        each row's maximum, then its sum (``[rows]``, and ``[rows, 1]`` to broadcast)."""
        depth = x.shape[-1]
        if x.flags.c_contiguous and out.flags.c_contiguous:
            rows, result = x.reshape(-1, depth), out.reshape(-1, depth)
        else:
            rows, result = x, out
        if rows.ndim == 2 and rows.shape[0] == 1:
            rows, result = rows[0], result[0]
        reduced = np.empty(rows.shape[:-1], np.float32)
        return x, out, rows, result, (reduced, reduced[..., None] if reduced.ndim else reduced)


@register("LOG_SOFTMAX")
class LogSoftmax(_LastAxis):
    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
        log_sum = np.log(np.exp(out).sum(axis=-1, keepdims=True))
        out -= log_sum


@register("L2_NORMALIZATION")
class L2Normalization(_LastAxis):
    def prepare(self, ins):
        specs = super().prepare(ins)
        # LiteRT rejects any fused activation here (its kernels never implemented one), so a
        # model that asks for one fails to allocate there; numlite fails the same way.
        code = getattr(self.options, "fused_activation_function", 0) if self.options is not None else 0
        if code != 0:
            raise self.fail(f"fused activation {code} is not supported by L2_NORMALIZATION")
        return specs

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if x.size == 0:
            return
        norm = np.sqrt(np.einsum("...i,...i->...", x, x)[..., None])
        np.maximum(norm, L2_EPSILON, out=norm)
        np.divide(x, norm, out=out)


@register("LOCAL_RESPONSE_NORMALIZATION")
class LocalResponseNormalization(_LastAxis):
    def prepare(self, ins):
        specs = super().prepare(ins)
        x = ins[0]
        if x.ndim != 4:
            raise self.fail(f"input must have rank 4, got shape {x.shape}")
        o = self.options
        if o is None:
            raise self.fail("missing options")
        if o.radius < 0:
            raise self.fail(f"radius must not be negative, got {o.radius}")
        # Offsets beyond the last channel add nothing: a radius of C - 1 already spans them all.
        self.radius = min(int(o.radius), max(x.shape[3] - 1, 0))
        self.bias, self.alpha, self.beta = np.float32(o.bias), np.float32(o.alpha), np.float32(o.beta)
        self.squares = np.empty(x.shape, np.float32)
        return specs

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        sq = self.squares
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            np.multiply(x, x, out=sq)
            sq *= self.alpha  # LiteRT scales the squares before summing them
            np.copyto(out, sq)
            for d in range(1, self.radius + 1):  # one shifted add per window offset
                out[..., d:] += sq[..., :-d]
                out[..., :-d] += sq[..., d:]
            out += self.bias
            # LiteRT's special cases for the common exponents (same values, other rounding).
            if self.beta == 1:
                np.reciprocal(out, out=out)
            elif self.beta == 0.5:
                np.sqrt(out, out=out)
                np.reciprocal(out, out=out)
            else:
                np.power(out, -self.beta, out=out)
            out *= x
