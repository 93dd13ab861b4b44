"""The kernels added for the TF op sweep (benchmarks/tf_ops.py) against LiteRT, on models the
official converter makes: dtypes and edge cases TensorFlow's own results cannot pin down
(shifts past the bit width, values on bucket boundaries, empty segments, padded box lists),
over three invokes of one interpreter (the second and later run numlite's compiled plan)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_close, convert, litert_interpreter, op_names

import numlite

S = tf.TensorSpec

def ints(shape, dtype, low, high, seed=0):
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def floats(shape, low=-2.0, high=2.0, seed=0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def boxes(count: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    corner = r.uniform(0, 0.6, (count, 2))
    flip = r.random(count) < 0.3  # some boxes given with their corners the other way round
    box = np.concatenate([corner, corner + r.uniform(0.1, 0.4, (count, 2))], 1)
    box[flip] = box[flip][:, [2, 3, 0, 1]]
    return box.astype(np.float32)


nms_limits = dict(max_output_size=np.int32(7), iou_threshold=np.float32(0.3), score_threshold=np.float32(0.2))

# name: (TFLite op, function, specs, inputs)
CASES: dict[str, tuple[str, Callable[..., Any], list[S], list[np.ndarray]]] = {
    "bitwise_xor int8": ("BITWISE_XOR", tf.bitwise.bitwise_xor, [S((3, 4), tf.int8)] * 2,
                         [ints((3, 4), np.int8, -128, 128), ints((3, 4), np.int8, -128, 128, 1)]),
    "bitwise_xor int16 broadcast": ("BITWISE_XOR", tf.bitwise.bitwise_xor, [S((2, 1, 4), tf.int16), S((3, 1), tf.int16)],
                                    [ints((2, 1, 4), np.int16, -30000, 30000), ints((3, 1), np.int16, -30000, 30000, 1)]),
    "bitwise_xor uint32": ("BITWISE_XOR", tf.bitwise.bitwise_xor, [S((5,), tf.uint32)] * 2,
                           [ints((5,), np.uint32, 0, 2**32), ints((5,), np.uint32, 0, 2**32, 1)]),
    # Shifts past the width and negative ones: LiteRT clamps them to [0, bits - 1].
    "right_shift int32 clamped": ("RIGHT_SHIFT", tf.bitwise.right_shift, [S((8,), tf.int32)] * 2,
                                  [np.array([-2**31, -7, -1, 5, 2**31 - 1, 100, -100, 3], np.int32),
                                   np.array([31, 1, 40, 2, 35, -3, 0, 32], np.int32)]),
    "right_shift uint8": ("RIGHT_SHIFT", tf.bitwise.right_shift, [S((6,), tf.uint8)] * 2,
                          [np.array([255, 128, 7, 0, 200, 99], np.uint8), np.array([7, 8, 1, 3, 200, 2], np.uint8)]),
    "bitcast int32 to int8": ("BITCAST", lambda x: tf.bitcast(x, tf.int8), [S((2, 3), tf.int32)],
                              [ints((2, 3), np.int32, -2**31, 2**31 - 1)]),
    "bitcast uint8 to float32": ("BITCAST", lambda x: tf.bitcast(x, tf.float32), [S((3, 4), tf.uint8)],
                                 [np.frombuffer(floats((3,)).tobytes(), np.uint8).reshape(3, 4).copy()]),
    "segment_sum": ("SEGMENT_SUM", lambda x, i: tf.math.segment_sum(x, i), [S((6, 2)), S((6,), tf.int32)],
                    [floats((6, 2)), np.array([0, 0, 1, 2, 2, 3], np.int32)]),
    "unsorted_segment_max empty segments": ("UNSORTED_SEGMENT_MAX", lambda x, i: tf.math.unsorted_segment_max(x, i, 5),
                                            [S((4, 3), tf.int32), S((4,), tf.int32)],
                                            [ints((4, 3), np.int32, -9, 9), np.array([3, 0, 3, 1], np.int32)]),
    "unsorted_segment_min empty segments": ("UNSORTED_SEGMENT_MIN", lambda x, i: tf.math.unsorted_segment_min(x, i, 4),
                                            [S((4, 3)), S((4,), tf.int32)], [floats((4, 3)), np.array([3, 0, 3, 1], np.int32)]),
    "unsorted_segment_prod": ("UNSORTED_SEGMENT_PROD", lambda x, i: tf.math.unsorted_segment_prod(x, i, 3),
                              [S((5, 2)), S((5,), tf.int32)], [floats((5, 2)), np.array([2, 0, 0, 2, 1], np.int32)]),
    "broadcast_args int64": ("BROADCAST_ARGS", lambda a, b: tf.raw_ops.BroadcastArgs(s0=a, s1=b), [S((3,), tf.int64)] * 2,
                             [np.array([4, 1, 3], np.int64), np.array([1, 5, 3], np.int64)]),
    # Values exactly on a boundary go to the bucket above it.
    "bucketize on the boundaries": ("BUCKETIZE", lambda x: tf.raw_ops.Bucketize(input=x, boundaries=[-1.0, 0.0, 0.5, 2.0]),
                                    [S((8,))], [np.array([-1, -1.5, 0, 0.25, 0.5, 2, 3, -0.0], np.float32)]),
    "bucketize int64": ("BUCKETIZE", lambda x: tf.raw_ops.Bucketize(input=x, boundaries=[-2.0, 1.0, 3.0]),
                        [S((6,), tf.int64)], [np.array([-3, -2, 0, 1, 2, 5], np.int64)]),
    "sparse_to_dense 1-D indices": ("SPARSE_TO_DENSE", lambda i, v: tf.raw_ops.SparseToDense(
        sparse_indices=i, output_shape=np.int32([7]), sparse_values=v, default_value=np.float32(-1)),
        [S((3,), tf.int32), S((3,))], [np.array([1, 4, 6], np.int32), floats((3,))]),
    "conv_3d_transpose stride 2": ("CONV_3D_TRANSPOSE", lambda x: tf.nn.conv3d_transpose(
        x, floats((3, 2, 3, 4, 2), -0.5, 0.5, 3), [1, 5, 4, 6, 4], [1, 2, 2, 2, 1], "SAME"), [S((1, 3, 2, 3, 2))],
        [floats((1, 3, 2, 3, 2))]),
    "conv_3d with a bias and relu": ("CONV_3D", lambda x: tf.nn.relu(tf.nn.conv3d(
        x, floats((2, 2, 3, 3, 4), -0.5, 0.5, 4), [1, 1, 2, 1, 1], "SAME") + floats((4,), seed=5)), [S((2, 3, 5, 4, 3))],
        [floats((2, 3, 5, 4, 3))]),
    "non_max_suppression_v4 padded": ("NON_MAX_SUPPRESSION_V4", lambda b, s: tf.raw_ops.NonMaxSuppressionV4(
        boxes=b, scores=s, pad_to_max_output_size=True, **nms_limits), [S((20, 4)), S((20,))],
        [boxes(20, 0), floats((20,), 0, 1, 1)]),
    "non_max_suppression_v5 soft": ("NON_MAX_SUPPRESSION_V5", lambda b, s: tf.raw_ops.NonMaxSuppressionV5(
        boxes=b, scores=s, soft_nms_sigma=np.float32(0.3), pad_to_max_output_size=True, **nms_limits)[:2],
        [S((20, 4)), S((20,))], [boxes(20, 2), floats((20,), 0, 1, 3)]),
    "rfft2d": ("RFFT2D", lambda x: tf.signal.rfft2d(x, [4, 8]), [S((2, 4, 8))], [floats((2, 4, 8))]),
    "complex_abs of rfft2d": ("COMPLEX_ABS", lambda x: tf.abs(tf.signal.rfft2d(x, [2, 4])), [S((3, 2, 4))],
                              [floats((3, 2, 4))]),
}


def invokes(interpreter: Any, inputs: list[np.ndarray], count: int = 3) -> list[list[np.ndarray]]:
    """The outputs of ``count`` invokes of one interpreter, the inputs fed to the tensors named
    after the function's arguments (x0, x1...: a model's input order need not be theirs)."""
    interpreter.allocate_tensors()
    by_name = {d["name"].split(":")[0].rsplit("_", 1)[-1]: d["index"] for d in interpreter.get_input_details()}
    results = []
    for _ in range(count):
        for k, value in enumerate(inputs):
            interpreter.set_tensor(by_name[f"x{k}"], value)
        interpreter.invoke()
        results.append([np.array(interpreter.get_tensor(d["index"])) for d in interpreter.get_output_details()])
    return results


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_litert_at_every_invoke(name):
    op, fn, specs, inputs = CASES[name]
    named = [tf.TensorSpec(s.shape, s.dtype, name=f"x{k}") for k, s in enumerate(specs)]
    model = convert(fn, named, key=f"sweep-kernel-{name}")
    assert op in op_names(model)
    expected = invokes(litert_interpreter(model), inputs)
    actual = invokes(numlite.Interpreter(model_content=model), inputs)
    for run_actual, run_expected in zip(actual, expected):
        assert len(run_actual) == len(run_expected)
        for a, e in zip(run_actual, run_expected):
            assert_close(a, e)
