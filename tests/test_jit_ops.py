"""Compiled kernels of the ops the kernel test files do not run on the compiled engine, and the
user paths that needed them, judged by LiteRT on the same file.

* The LSTM that numlite converts from a Keras 3 ``model.export`` SavedModel, and from a tf_keras
  ``model.save`` SavedModel (both with a dynamic batch), holds a ZEROS_LIKE (the initial state
  of the batch's size): before it had a compiled kernel, the fused LSTM never ran compiled. Both
  now compile whole and match LiteRT (the Keras 3 file at two batch sizes).
* RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR (align_corners, half_pixel_centers), MIRROR_PAD,
  LOG_SOFTMAX and L2_NORMALIZATION in one model (tests/test_resize.py, test_pad.py and
  test_normalization.py run on the NumPy engine only).
* Positions from data out of range: the compiled engine raises the NumPy engine's error text.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_close, convert, op_names, run_interpreter, run_litert, seeded_values

import numlite
from numlite.errors import InvokeError

STEPS, FEATURES = 5, 3


@pytest.fixture(autouse=True)
def private_cache(jit_cache_dir, monkeypatch):
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)


def compiled(model: bytes, inputs) -> tuple[numlite.Interpreter, list[np.ndarray]]:
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    outputs = run_interpreter(interpreter, inputs)
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report.get("reason")
    return interpreter, outputs


@functools.cache
def lstm_model(flavor: str, folder: str) -> bytes:
    """An LSTM of 6 units with seeded weights, saved with a dynamic batch and converted by numlite."""
    path = os.path.join(folder, flavor)
    rng = np.random.default_rng(7)
    if flavor == "keras3":
        import keras

        keras.utils.set_random_seed(0)
        x = keras.Input((STEPS, FEATURES))
        model = keras.Model(x, keras.layers.LSTM(6, return_sequences=True)(x))
        model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
        model.export(path, verbose=False)
    else:
        import tf_keras

        tf_keras.utils.set_random_seed(0)
        model = tf_keras.Sequential([tf_keras.Input((STEPS, FEATURES)), tf_keras.layers.LSTM(6, return_sequences=True)])
        model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
        model.save(path)
    return numlite.TFLiteConverter.from_saved_model(path, signature_keys=["serving_default"]).convert()


# Each batch size compiles the model again (sizes are literals of the generated code), 5-20 s
# under load: the Keras 3 file runs at two batch sizes, the tf_keras one at one.
@pytest.mark.parametrize("flavor, batches", [("keras3", (1, 3)), ("tf_keras", (2,))])
def test_converted_lstm_with_zeros_like_compiles_whole(flavor, batches, tmp_path_factory):
    folder = str(tmp_path_factory.getbasetemp() / "jit_ops_lstm")
    os.makedirs(folder, exist_ok=True)
    model = lstm_model(flavor, folder)
    ops = op_names(model)
    assert "ZEROS_LIKE" in ops and "UNIDIRECTIONAL_SEQUENCE_LSTM" in ops, ops
    for batch in batches:
        x = seeded_values((batch, STEPS, FEATURES), tf.float32, batch)
        _, (actual,) = compiled(model, [x])
        (expected,) = run_litert(model, [x])
        assert_close(actual, expected, what=f"batch {batch}: ")


def _image_ops(x):
    v1 = tf.compat.v1.image
    return [
        tf.image.resize(x, (7, 5), method="bilinear"),  # half_pixel_centers
        v1.resize_bilinear(x, (6, 4), align_corners=True),
        v1.resize_bilinear(x, (3, 7)),
        tf.image.resize(x, (7, 5), method="nearest"),  # half_pixel_centers
        v1.resize_nearest_neighbor(x, (6, 4), align_corners=True),
        tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]], mode="REFLECT"),
        tf.pad(x, [[0, 1], [2, 0], [1, 1], [0, 0]], mode="SYMMETRIC"),
        tf.nn.log_softmax(x * 20.0),  # large logits: the row's maximum is subtracted first
        tf.math.l2_normalize(x, axis=-1),
    ]


def test_resize_mirror_pad_and_normalizations_compile_and_match_litert():
    model = convert(_image_ops, [tf.TensorSpec((2, 4, 3, 5), tf.float32)], key="jit_ops_image")
    ops = set(op_names(model))
    assert {"RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "MIRROR_PAD", "LOG_SOFTMAX", "L2_NORMALIZATION"} <= ops, ops
    x = np.random.default_rng(3).uniform(-2, 2, (2, 4, 3, 5)).astype(np.float32)
    x[1, 2, 1] = 0.0  # a zero row: the L2 norm is clamped at 1e-6
    _, actual = compiled(model, [x])
    for k, (a, e) in enumerate(zip(actual, run_litert(model, [x]))):
        assert_close(a, e, what=f"output {k}: ")


def test_gather_nd_index_from_data_out_of_range_raises_the_numpy_engines_error():
    model = convert(lambda p, i: tf.gather_nd(p, i), [tf.TensorSpec((3, 4)), tf.TensorSpec((2, 2), tf.int32)],
                    key="jit_ops_gather_nd")
    params = np.arange(12, dtype=np.float32).reshape(3, 4)
    good = np.array([[2, 3], [0, 1]], np.int32)
    interpreter, (actual,) = compiled(model, [params, good])
    (expected,) = run_litert(model, [params, good])
    assert_close(actual, expected)
    messages = []
    for jit in (False, True):
        it = numlite.Interpreter(model_content=model, jit=jit)
        with pytest.raises(InvokeError) as raised:
            run_interpreter(it, [params, np.array([[2, 3], [3, 0]], np.int32)])
        messages.append(str(raised.value))
    assert messages[0] == messages[1] and "gather_nd index is out of bounds for params of shape (3, 4)" in messages[0]
