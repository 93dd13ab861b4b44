"""numlite's farmhash Fingerprint64 (the hash of LSH_PROJECTION, numlite/kernels/text.py)
against TensorFlow's, which is farmhash's own C++: ``tf.strings.to_hash_bucket_fast`` is
``Fingerprint64(s) mod num_buckets``. Every length from 0 to 200 bytes (each of farmhash's
length paths and several 64-byte loops) and a few longer ones. LSH_PROJECTION itself is
matched with LiteRT by the builtin sweep (tests/test_builtin_ops.py)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from numlite.kernels.text import fingerprint64


def test_fingerprint64_matches_tensorflows_farmhash():
    rng = np.random.default_rng(0)
    keys = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in [*range(201), 255, 256, 257, 1000]]
    buckets = 2**63 - 1  # the largest bucket count: the hash modulo 2**63 - 1, nearly all its bits
    expected = tf.strings.to_hash_bucket_fast(keys, buckets).numpy()
    actual = np.array([fingerprint64(k) % buckets for k in keys], np.int64)
    mismatched = [len(k) for k, a, e in zip(keys, actual, expected) if a != e]
    assert not mismatched, f"Fingerprint64 differs from TensorFlow's for keys of {mismatched} bytes"
