"""Legacy text and hashing ops: SKIP_GRAM (string n-grams with skips) and LSH_PROJECTION
(locality sensitive hashing of rows of bytes with farmhash's Fingerprint64).

Both follow LiteRT's kernels (tflite/kernels/skip_gram.cc, lsh_projection.cc) bit for bit,
including their quirks: SKIP_GRAM splits words the way its loop does (a first word after
leading whitespace is dropped), and LSH_PROJECTION hashes each input row's raw bytes after the seed's.
"""

from __future__ import annotations

import struct

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, register

STRING = np.dtype(np.object_)

# ----------------------------------------------------------------------------- Fingerprint64

_MASK = (1 << 64) - 1
_K0, _K1, _K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F


def _fetch64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 8], "little")


def _fetch32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 4], "little")


def _rotate(value: int, shift: int) -> int:
    """A right rotation of a 64-bit value."""
    return value if shift == 0 else ((value >> shift) | (value << (64 - shift))) & _MASK


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _hash_len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _MASK
    a ^= a >> 47
    b = ((v ^ a) * mul) & _MASK
    b ^= b >> 47
    return (b * mul) & _MASK


def _hash_len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = _K2 + n * 2
        a = (_fetch64(s, 0) + _K2) & _MASK
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & _MASK
        d = ((_rotate(a, 25) + b) * mul) & _MASK
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = _K2 + n * 2
        return _hash_len16((n + (_fetch32(s, 0) << 3)) & _MASK, _fetch32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _MASK) * _K2) & _MASK
    return _K2


def _ends(s: bytes, first: int) -> tuple[int, int, int, int, int]:
    """``(mul, a, b, c, d)`` of the 17-64 byte hashes: the first two and last two words mixed,
    the first word by ``first``."""
    n = len(s)
    mul = _K2 + n * 2
    return (mul, (_fetch64(s, 0) * first) & _MASK, _fetch64(s, 8), (_fetch64(s, n - 8) * mul) & _MASK,
            (_fetch64(s, n - 16) * _K2) & _MASK)


def _hash_len17to32(s: bytes) -> int:
    mul, a, b, c, d = _ends(s, _K1)
    return _hash_len16((_rotate((a + b) & _MASK, 43) + _rotate(c, 30) + d) & _MASK,
                       (a + _rotate((b + _K2) & _MASK, 18) + c) & _MASK, mul)


def _weak_hash_len32_with_seeds(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = (_fetch64(s, i + 8 * k) for k in range(4))
    a = (a + w) & _MASK
    b = _rotate((b + a + z) & _MASK, 21)
    c = a
    a = (a + x + y) & _MASK
    b = (b + _rotate(a, 44)) & _MASK
    return (a + z) & _MASK, (b + c) & _MASK


def _hash_len33to64(s: bytes) -> int:
    n = len(s)
    mul, a, b, c, d = _ends(s, _K2)
    y = (_rotate((a + b) & _MASK, 43) + _rotate(c, 30) + d) & _MASK
    z = _hash_len16(y, (a + _rotate((b + _K2) & _MASK, 18) + c) & _MASK, mul)
    e = (_fetch64(s, 16) * mul) & _MASK
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & _MASK
    h = ((z + _fetch64(s, n - 24)) * mul) & _MASK
    return _hash_len16((_rotate((e + f) & _MASK, 43) + _rotate(g, 30) + h) & _MASK,
                       (e + _rotate((f + a) & _MASK, 18) + g) & _MASK, mul)


def fingerprint64(s: bytes) -> int:
    """farmhash's ``Fingerprint64`` (farmhashna's Hash64) of ``s``, as an unsigned 64-bit int:
    the hash LiteRT's LSH_PROJECTION uses (written from farmhash's published algorithm)."""
    n = len(s)
    if n <= 16:
        return _hash_len0to16(s)
    if n <= 32:
        return _hash_len17to32(s)
    if n <= 64:
        return _hash_len33to64(s)
    # Longer: 64-byte blocks through a 56-byte state, then the last 64 bytes.
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _MASK
    z = (_shift_mix((y * _K2 + 113) & _MASK) * _K2) & _MASK
    v = w = (0, 0)
    x = (x * _K2 + _fetch64(s, 0)) & _MASK
    end = ((n - 1) // 64) * 64
    i = 0
    while True:
        x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & _MASK, 37) * _K1) & _MASK
        y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & _MASK, 42) * _K1) & _MASK
        x ^= w[1]
        y = (y + v[0] + _fetch64(s, i + 40)) & _MASK
        z = (_rotate((z + w[0]) & _MASK, 33) * _K1) & _MASK
        v = _weak_hash_len32_with_seeds(s, i, (v[1] * _K1) & _MASK, (x + w[0]) & _MASK)
        w = _weak_hash_len32_with_seeds(s, i + 32, (z + w[1]) & _MASK, (y + _fetch64(s, i + 16)) & _MASK)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    i = n - 64
    w0 = (w[0] + ((n - 1) & 63)) & _MASK
    v0 = (v[0] + w0) & _MASK
    w = ((w0 + v0) & _MASK, w[1])
    v = (v0, v[1])
    x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & _MASK, 37) * mul) & _MASK
    y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & _MASK, 42) * mul) & _MASK
    x ^= (w[1] * 9) & _MASK
    y = (y + v[0] * 9 + _fetch64(s, i + 40)) & _MASK
    z = (_rotate((z + w[0]) & _MASK, 33) * mul) & _MASK
    v = _weak_hash_len32_with_seeds(s, i, (v[1] * mul) & _MASK, (x + w[0]) & _MASK)
    w = _weak_hash_len32_with_seeds(s, i + 32, (z + w[1]) & _MASK, (y + _fetch64(s, i + 16)) & _MASK)
    z, x = x, z
    return _hash_len16((_hash_len16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _MASK,
                       (_hash_len16(v[1], w[1], mul) + x) & _MASK, mul)


# ----------------------------------------------------------------------------- LSH_PROJECTION

SPARSE, DENSE = 1, 2


@register("LSH_PROJECTION")
class LshProjection(Kernel):
    """Signs of random projections: for each float32 seed of ``hash`` ([num_hash, num_bits]),
    the bit ``sum_i weight[i] * Fingerprint64(seed bytes + row i of input) > 0`` (a sum in
    double, each hash read as a signed int64; weights default to 1). type 1 (SPARSE): one int32
    per hash function, its bits packed, plus ``k << num_bits`` for function ``k``; type 2
    (DENSE): every bit as one int32."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2, 3)
        hash_, data = ins[0], ins[1]
        weight = ins[2] if len(ins) == 3 else None
        self.expect_dtype(hash_, np.float32)
        if hash_.ndim != 2 or hash_.shape[1] > 32:
            raise self.fail(f"hash must be [num_hash, num_bits] with at most 32 bits, has shape {hash_.shape}")
        if data.dtype == STRING:
            raise self.fail("the input must hold fixed-size elements, not strings")
        if data.ndim < 1 or data.shape[0] < 1:
            raise self.fail(f"the input needs rank >= 1 and at least one row, has shape {data.shape}")
        if weight is not None:
            self.expect_dtype(weight, np.float32)
            if weight.shape != (data.shape[0],):
                raise self.fail(f"weight {weight.shape} must be one value per input row {data.shape}")
        self.type = int(getattr(self.options, "type", 0) or 0)
        num_hash, num_bits = hash_.shape
        if self.type == SPARSE:
            return [Spec((num_hash,), np.dtype(np.int32))]
        if self.type == DENSE:
            return [Spec((num_hash * num_bits,), np.dtype(np.int32))]
        raise self.fail(f"unknown projection type {self.type} (1 sparse, 2 dense)")

    def eval(self, ins, outs):
        hash_, data = ins[0], ins[1]
        weight = ins[2] if len(ins) == 3 else None
        raw = np.ascontiguousarray(data).tobytes()
        step = len(raw) // data.shape[0]
        rows = [raw[i * step:(i + 1) * step] for i in range(data.shape[0])]
        weights = None if weight is None else [float(w) for w in weight]
        num_hash, num_bits = hash_.shape
        bits = np.empty((num_hash, num_bits), np.int64)
        for (h, b), seed in np.ndenumerate(hash_):
            key = struct.pack("<f", seed)
            score = 0.0
            for i, row in enumerate(rows):  # a double sum in LiteRT's order
                value = float(np.int64(np.uint64(fingerprint64(key + row)).view(np.int64)))
                score += value if weights is None else weights[i] * value
            bits[h, b] = score > 0
        if self.type == DENSE:
            outs[0][...] = bits.reshape(-1)
            return
        packed = np.zeros(num_hash, np.int64)
        for b in range(num_bits):
            packed = (packed << 1) | bits[:, b]
        packed += np.arange(num_hash, dtype=np.int64) << num_bits
        outs[0][...] = packed.astype(np.uint32).view(np.int32)  # int32 arithmetic wraps, as in C++


# ----------------------------------------------------------------------------- SKIP_GRAM

_SPACE = b" \t\n\v\f\r"  # C's isspace


def _words(text: bytes) -> list[bytes]:
    """LiteRT's split: a word ends at each space after the first character and counts only when
    it does not start with one (so a first word after leading whitespace is dropped); what
    follows the last space is a word even when it starts with a space."""
    words, prev = [], 0
    for i in range(1, len(text)):
        if text[i] in _SPACE:
            if i > prev and text[prev] not in _SPACE:
                words.append(text[prev:i])
            prev = i + 1
    if len(text) > prev:
        words.append(text[prev:])
    return words


@register("SKIP_GRAM")
class SkipGram(Kernel):
    """The n-grams of the words of the first string of the input (split at spaces), joined by
    one space: ``ngram_size`` words (all sizes from 1 up with ``include_all_ngrams``), with at
    most ``max_skip_size`` words skipped between two consecutive ones, in LiteRT's order."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.expect_dtype(ins[0], STRING)
        if ins[0].size < 1:
            raise self.fail(f"needs one string, the input has shape {ins[0].shape}")
        self.n = int(getattr(self.options, "ngram_size", 0) or 0)
        self.skip = int(getattr(self.options, "max_skip_size", 0) or 0)
        self.all = bool(getattr(self.options, "include_all_ngrams", False))
        if self.n < 0:
            raise self.fail(f"ngram_size must not be negative, got {self.n}")
        return [Spec(None, STRING)]

    def _include(self, size: int) -> bool:
        return size > 0 and (size <= self.n if self.all else size == self.n)

    def _step_in(self, stack: list[int], depth: int, words: int) -> bool:
        if depth < self.n and stack[depth] + 1 < words:
            return depth == 0 or stack[depth] - stack[depth - 1] <= self.skip
        return False

    def eval(self, ins, outs):
        text = ins[0].reshape(-1)[0]
        if not isinstance(text, bytes):
            raise InvokeError(f"skip gram: the input holds {type(text).__name__}, not bytes")
        words = _words(text)
        grams: list[bytes] = []
        if len(words) >= self.n:
            # LiteRT's iterative depth-first walk: stack[d] is the word at depth d.
            stack, depth = [0] * self.n, 1
            while depth >= 0:
                if self._step_in(stack, depth, len(words)):
                    stack[depth] += 1
                    depth += 1
                    if depth < self.n:
                        stack[depth] = stack[depth - 1]
                else:
                    if self._include(depth):
                        grams.append(b" ".join(words[stack[d]] for d in range(depth)))
                    depth -= 1
        result = np.empty(len(grams), STRING)
        result[:] = grams
        outs[0] = result
