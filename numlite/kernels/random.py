"""Random numbers: RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL.

The numbers are TensorFlow's (and LiteRT's): a Philox-4x32-10 counter-based generator whose
64-bit key is ``seed`` and whose counter starts at ``seed2`` in its upper 64 bits; each call
gives four 32-bit words and advances the counter by one. Both seeds 0 mean unseeded (fresh
seeds from the operating system). The generator is set up at prepare and advanced by every
invoke, so that successive invokes give new numbers and an interpreter prepared again starts
over, as LiteRT's kernels do.

* uniform floats in [0, 1): a word's low 23 bits as the mantissa of a float in [1, 2), minus 1;
* standard normal floats: Box-Muller on each pair of words (the first through sin, the second
  through cos);
* multinomial samples: the inverse of each row's cumulative (unnormalized, float64)
  distribution at a uniform double made of two words (52 bits), the row's generator reading
  on where the previous row stopped; each invoke then skips the generator far ahead (as TF
  does, for ops that draw an unknown number of words).
"""

from __future__ import annotations

import copy

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, register

_MASK = np.uint64(0xFFFFFFFF)
_MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)
FLOAT32 = np.dtype(np.float32)


class Philox:
    """Philox-4x32-10: a 128-bit counter encrypted with a 64-bit key, four words per step."""

    def __init__(self, seed: int, seed2: int) -> None:
        seed, seed2 = seed & (2**64 - 1), seed2 & (2**64 - 1)
        self.key = (seed & 0xFFFFFFFF, seed >> 32)
        self.counter = seed2 << 64  # the counter as one 128-bit integer; word 0 is its lowest

    def skip(self, steps: int) -> None:
        self.counter = (self.counter + steps) % 2**128

    def words(self, steps: int) -> np.ndarray:
        """The next ``steps`` results, ``[steps, 4]`` uint32; the counter moves past them."""
        low64, high64 = np.uint64(self.counter & (2**64 - 1)), np.uint64(self.counter >> 64)
        low = low64 + np.arange(steps, dtype=np.uint64)  # wraps around 2^64...
        high = high64 + (low < low64).astype(np.uint64)  # ...carrying into the upper half
        counters = np.stack([low & _MASK, low >> np.uint64(32), high & _MASK, high >> np.uint64(32)], axis=1)
        self.skip(steps)
        return self._encrypt(counters)

    def _encrypt(self, c: np.ndarray) -> np.ndarray:
        k0, k1 = self.key
        for _ in range(10):
            p0, p1 = c[:, 0] * _MULTIPLIERS[0], c[:, 2] * _MULTIPLIERS[1]
            c = np.stack([(p1 >> np.uint64(32)) ^ c[:, 1] ^ np.uint64(k0), p1 & _MASK,
                          (p0 >> np.uint64(32)) ^ c[:, 3] ^ np.uint64(k1), p0 & _MASK], axis=1)
            k0, k1 = (k0 + _KEY_STEPS[0]) & 0xFFFFFFFF, (k1 + _KEY_STEPS[1]) & 0xFFFFFFFF
        return c.astype(np.uint32)


def uniform_floats(words: np.ndarray) -> np.ndarray:
    """Floats in [0, 1) from 32-bit words: the low 23 bits as a mantissa of [1, 2), minus 1."""
    return ((words & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


def box_muller(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two standard normal floats from each pair of words, in float32 as TF computes them."""
    u1 = np.maximum(uniform_floats(first), np.float32(1e-7))
    angle = (2 * np.pi * uniform_floats(second).astype(np.float64)).astype(np.float32)
    radius = np.sqrt(np.float32(-2) * np.log(u1))
    return np.sin(angle) * radius, np.cos(angle) * radius


def uniform_doubles(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """Doubles in [0, 1) from pairs of words: 20 bits of the first and the 32 of the second as
    the mantissa of a double in [1, 2), minus 1."""
    mantissa = ((high.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | low.astype(np.uint64)
    return (mantissa | np.uint64(1023 << 52)).view(np.float64) - 1.0


class _Random(Kernel):
    """A stateful op: never folded; its generator is set up when the interpreter allocates
    (prepares) the node, not when the runtime prepares it again at an invoke because its
    output's shape is only known then."""

    foldable = False
    rng: Philox | None = None

    def _seed(self) -> None:
        runtime = self.node.runtime
        if self.rng is not None and runtime is not None and getattr(runtime, "allocated", False):
            return  # prepared again during an invoke: the numbers go on
        # LiteRT reads the options' 64-bit seeds into 32-bit ints: the low 32 bits, signed.
        seed, seed2 = (int(np.int64(getattr(self.options, name, 0) or 0).astype(np.int32)) for name in ("seed", "seed2"))
        if seed == 0 and seed2 == 0:  # unseeded: different numbers in every interpreter
            seed, seed2 = (int(v) for v in np.random.SeedSequence().generate_state(2, np.uint64))
        self.rng = Philox(seed, seed2)


class _RandomFloats(_Random):
    """A float32 tensor of the shape given by a 1-D int32 input."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (shape,) = ins
        self.expect_dtype(shape, np.int32)
        if shape.ndim != 1:
            raise self.fail(f"shape must be 1-D, it has shape {shape.shape}")
        self._seed()
        if shape.value is None:
            return [Spec(None, FLOAT32)]
        return [Spec(tuple(int(d) for d in shape.value), FLOAT32)]

    def eval(self, ins, outs):
        if outs[0] is None:
            outs[0] = np.empty(tuple(int(d) for d in ins[0]), np.float32)
        out = outs[0].reshape(-1)
        words = self.rng.words(-(-out.size // 4)).reshape(-1)
        out[...] = self.values(words)[: out.size]


@register("RANDOM_UNIFORM")
class RandomUniform(_RandomFloats):
    @staticmethod
    def values(words: np.ndarray) -> np.ndarray:
        return uniform_floats(words)


@register("RANDOM_STANDARD_NORMAL")
class RandomStandardNormal(_RandomFloats):
    @staticmethod
    def values(words: np.ndarray) -> np.ndarray:
        sines, cosines = box_muller(words[0::2], words[1::2])
        return np.stack([sines, cosines], axis=1).reshape(-1)


@register("MULTINOMIAL")
class Multinomial(_Random):
    """Inputs: float32 logits [batch, classes] and an int32 scalar sample count; output
    [batch, samples] class indices (int64 or int32, as the model declares). Infinite and NaN
    logits have probability 0."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        logits, count = ins
        self.expect_dtype(logits, np.float32)
        self.expect_dtype(count, np.int32)
        if logits.ndim != 2 or logits.shape[1] < 1 or count.ndim != 0:
            raise self.fail(f"logits {logits.shape} must be [batch, classes >= 1] and num_samples a scalar")
        self.dtype = np.dtype(self.node.runtime.dtypes[self.node.outputs[0]]) if self.node.runtime else np.dtype(np.int64)
        if self.dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
            raise self.fail(f"the output must be int64 or int32, not {self.dtype.name}")
        self._seed()
        if count.value is None:
            return [Spec(None, self.dtype)]
        return [Spec((logits.shape[0], int(count.value)), self.dtype)]

    def eval(self, ins, outs):
        logits, count = ins
        batch, samples = logits.shape[0], int(count)
        if samples < 0:
            raise InvokeError(f"num_samples must not be negative, got {samples}")
        if outs[0] is None:
            outs[0] = np.empty((batch, samples), self.dtype)
        start = copy.copy(self.rng)
        self.rng.skip(batch * (-(-samples // 4) * 4) * 2 * 256)
        # Two words per sample, the rows drawing one after another from one stream of words.
        words = start.words(-(-batch * samples // 2)).reshape(-1)[: 2 * batch * samples].reshape(batch, samples, 2)
        draws = uniform_doubles(words[..., 0], words[..., 1])
        finite = np.isfinite(logits)
        peak = np.where(finite, logits, -np.inf).max(axis=1, initial=np.finfo(np.float32).min).astype(np.float64)
        weights = np.where(finite, np.exp(logits.astype(np.float64) - peak[:, None]), 0.0)
        cdf = np.cumsum(weights, axis=1)
        for row in range(batch):
            outs[0][row] = np.searchsorted(cdf[row], draws[row] * cdf[row, -1], side="right")
