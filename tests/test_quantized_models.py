"""Whole quantized models from the official converter, run in numlite and in LiteRT.

Four models (a small CNN, an MLP, MobileNetV2 at 96 x 96 with alpha 0.35 and random weights, a
tf_keras LSTM, which fuses to UNIDIRECTIONAL_SEQUENCE_LSTM) in five forms each (MobileNetV2, the
slowest to convert and run, in three: its ops are the CNN's, so float16 and float-interface int8
would add time and no kernel; the LSTM in three, see ``SKIPPED_FORMS``):

* ``dynamic``: dynamic-range quantization (``Optimize.DEFAULT`` alone): int8 weights, hybrid ops;
* ``float16``: float16 weights dequantized at load (``supported_types=[tf.float16]``);
* ``int8``: full integer with a seeded representative dataset, int8 input and output;
* ``int8_float_io``: the same with float input and output (QUANTIZE / DEQUANTIZE at the ends);
* ``16x8``: int16 activations with int8 weights.

Full-integer forms must equal LiteRT's reference kernels (BUILTIN_REF) bit for bit and stay
within one quantum of its default kernels (one output quantum after the final DEQUANTIZE); the
8-bit ones with convolutions equal its builtin kernels (without the XNNPACK delegate) instead, whose convolutions
round exact halves as numlite's do (see test_official_quantized_model), and stay within one
quantum per op of the reference kernels.
Float forms are compared with a float tolerance, explained at ``FLOAT_TOLERANCE``.

Forms needing an op numlite lacks are ``xfail(strict=True)`` naming the op, so that they fail
(as XPASS) the day it lands.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from helpers import run_interpreter, run_numlite

BATCH = 2
SHAPES = {"cnn": (16, 16, 3), "mlp": (20,), "mobilenet_v2": (96, 96, 3), "lstm": (6, 40)}
FORMS = ["dynamic", "float16", "int8", "int8_float_io", "16x8"]
# Not generated at all (see the top). The LSTM: float16 weights are the float kernel behind
# DEQUANTIZE (the CNN and MLP cover that), and the official converter refuses 16x8 ("Quantization
# to 16x8-bit not yet supported for op: 'UNIDIRECTIONAL_SEQUENCE_LSTM'"); each tf_keras LSTM
# conversion costs ~7 s of CPU.
SKIPPED_FORMS = {"mobilenet_v2": ("float16", "int8_float_io"), "lstm": ("float16", "16x8")}


def _cnn() -> tf.keras.Model:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input(SHAPES["cnn"], batch_size=BATCH),
        layers.Conv2D(16, 3, activation="relu"), layers.MaxPooling2D(), layers.DepthwiseConv2D(3, padding="same"),
        layers.Conv2D(32, 3, activation="relu6"), layers.AveragePooling2D(2), layers.Flatten(),
        layers.Dense(48, activation="tanh"), layers.Dense(10),
    ])


def _mlp() -> tf.keras.Model:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input(SHAPES["mlp"], batch_size=BATCH),
        layers.Dense(64, activation="relu"), layers.Dense(64, activation="sigmoid"), layers.Dense(32), layers.Dense(8),
    ])


def _mobilenet_v2() -> tf.keras.Model:
    return tf.keras.applications.MobileNetV2(
        input_shape=SHAPES["mobilenet_v2"], alpha=0.35, weights=None, classes=16, classifier_activation=None)


def _lstm() -> tf_keras.Model:
    inputs = tf_keras.Input(SHAPES["lstm"], batch_size=BATCH)
    x = tf_keras.layers.LSTM(32)(inputs)
    return tf_keras.Model(inputs, tf_keras.layers.Dense(16)(x))


BUILDERS = {"cnn": _cnn, "mlp": _mlp, "mobilenet_v2": _mobilenet_v2, "lstm": _lstm}


@functools.cache
def keras_model(name: str):
    """The model with seeded weights (biases too) of order one at each layer's output."""
    tf_keras.utils.set_random_seed(0)
    tf.keras.utils.set_random_seed(0)
    model = BUILDERS[name]()
    rng = np.random.default_rng(sorted(BUILDERS).index(name))
    weights = []
    for w in model.get_weights():
        fan_in = int(np.prod(w.shape[:-1])) if w.ndim > 1 else 1
        if w.ndim == 1:  # biases, batch-norm parameters: near their usual values
            weights.append(w + rng.uniform(-0.2, 0.2, w.shape))
        else:
            weights.append(rng.uniform(-1, 1, w.shape).astype(np.float32) * np.float32(np.sqrt(3 / max(fan_in, 1))))
    model.set_weights([w.astype(np.float32) for w in weights])
    return model


def sample(name: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (BATCH, *SHAPES[name])).astype(np.float32)


def _representative(name: str):
    def data():
        for seed in range(100, 104):
            yield [sample(name, seed)]

    return data


@functools.cache
def quantized(name: str, form: str) -> bytes:
    """``name`` converted by the official converter in ``form`` (cached for the session)."""
    model = keras_model(name)
    if name == "lstm":  # tf_keras's LSTM fuses only through the Keras path (a bare function keeps its loop)
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
    else:
        # A concrete function of a fixed input spec converts in a fraction of from_keras_model's
        # time (which exports a whole SavedModel first). Without a trackable object the converter
        # freezes every variable it captures (given the model, it kept Keras 3's batch-norm
        # statistics as READ_VARIABLE ops).
        spec = tf.TensorSpec((BATCH, *SHAPES[name]), tf.float32)
        function = tf.function(lambda x: model(x, training=False), input_signature=[spec])
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if form == "float16":
        converter.target_spec.supported_types = [tf.float16]
    elif form != "dynamic":
        converter.representative_dataset = _representative(name)
        wide = form == "16x8"
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 if wide
            else tf.lite.OpsSet.TFLITE_BUILTINS_INT8
        ]
        if form != "int8_float_io":
            converter.inference_input_type = converter.inference_output_type = tf.int16 if wide else tf.int8
    return converter.convert()


def model_inputs(model: bytes, name: str, seed: int) -> list[np.ndarray]:
    """A seeded float sample, quantized with the model's own input parameters when it takes integers."""
    x = sample(name, seed)
    (detail,) = LiteRTInterpreter(model_content=model).get_input_details()
    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return [x]
    scale, zero_point = detail["quantization"]
    info = np.iinfo(dtype)
    return [np.clip(np.round(x / scale) + zero_point, info.min, info.max).astype(dtype)]


def litert(model: bytes, inputs, reference: bool | str) -> list[np.ndarray]:
    """LiteRT's reference kernels (True), its default ones (False) or its builtin kernels
    without the XNNPACK delegate ("builtin")."""
    resolver = {True: OpResolverType.BUILTIN_REF, "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    kwargs = {"experimental_op_resolver_type": resolver[reference]} if reference else {}
    return run_interpreter(LiteRTInterpreter(model_content=model, **kwargs), inputs)


def op_types(model: bytes) -> set[tuple[str, str]]:
    """(op, dtype of its first input) for every op of subgraph 0."""
    m = numlite.model.read_model(model)
    sg = m.subgraphs[0]
    return {(m.op_name(n), sg.tensors[n.inputs[0]].dtype.name) for n in sg.operators if n.inputs and n.inputs[0] >= 0}


# Float forms. float16: the weights are float16 values widened to float32, the math is float32:
# 1e-5 (relative to outputs of order one to ten, hence rtol too). dynamic: each hybrid op
# re-quantizes its float input to int8; a last-bit difference in a float op before it (NumPy's
# and LiteRT's tanh, sigmoid, exp and summation orders differ by an ulp) can move one quantized
# value across a rounding boundary, one step of max|x| / 127 (or range / 255), and that step
# times the weights reaches the output. Such flips are rare but over a whole network they occur,
# so hybrid models get that bound: 2e-3 relative to the output's magnitude.
FLOAT_TOLERANCE = {"float16": (1e-5, 1e-5), "dynamic": (2e-3, 2e-3)}

MISSING: dict[tuple[str, str], str] = {}  # (model, form): the ops numlite lacks for it, or gets wrong


def _cases():
    for name in BUILDERS:
        for form in FORMS:
            if form in SKIPPED_FORMS.get(name, ()):
                continue
            marks = []
            if (name, form) in MISSING:
                marks.append(pytest.mark.xfail(strict=True, reason=MISSING[name, form]))
            yield pytest.param(name, form, marks=marks, id=f"{name}-{form}")


@pytest.mark.parametrize("name, form", list(_cases()))
def test_official_quantized_model(name, form):
    model = quantized(name, form)
    types = op_types(model)
    if name == "lstm":  # fused, not a WHILE loop
        assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in {op for op, _ in types}, types
    if form in ("int8", "16x8"):
        wide = "int16" if form == "16x8" else "int8"
        assert all(dtype != "float32" for _, dtype in types), types  # no float op left
        assert any(dtype == wide for _, dtype in types), types
    # LiteRT's default kernels may round each op one quantum away from its reference kernels
    # (test_quantized_conv.py checks that op by op); through a network those differences
    # compound, so whole models are held to one quantum per integer op (the reference
    # kernels themselves were 4 quanta from the default ones on the CNN).
    layers = sum(1 for op, dtype in types if dtype in ("int8", "int16"))
    for seed in (0, 1):
        inputs = model_inputs(model, name, seed)
        actual = run_numlite(model, inputs)
        reference, default = litert(model, inputs, True), litert(model, inputs, False)
        # 8-bit full-integer forms with convolutions: numlite's CONV_2D and DEPTHWISE_CONV_2D round
        # exact halves as LiteRT's builtin kernels, not as its reference kernels
        # (numlite/kernels/quantized_conv.py); the others (the LSTM's builtin kernel differs from
        # the reference one, which numlite follows) are held to the reference kernels
        convolutions = any(op in ("CONV_2D", "DEPTHWISE_CONV_2D") for op, _ in types)
        eight_bit = form in ("int8", "int8_float_io") and convolutions
        exact = litert(model, inputs, "builtin") if eight_bit else reference
        kernels = "builtin kernels" if eight_bit else "reference kernels"
        for a, r, e, d in zip(actual, reference, exact, default):
            assert a.dtype == r.dtype and a.shape == r.shape
            if form in FLOAT_TOLERANCE:
                rtol, atol = FLOAT_TOLERANCE[form]
                atol *= max(1.0, float(np.abs(r).max()))
                np.testing.assert_allclose(a, r, rtol=rtol, atol=atol, err_msg="reference kernels")
                np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, err_msg="default kernels")
            elif a.dtype.kind == "f":  # full integer inside, float at the ends
                quantum = _dequantize_scale(model)
                if eight_bit:
                    # The integers before the final DEQUANTIZE are equal (measured); LiteRT's
                    # builtin DEQUANTIZE forms the float product its own way (last bits), hence
                    # the float32 tolerance; within one quantum per op of the reference kernels.
                    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=kernels)
                    assert np.abs(a - r).max() <= layers * quantum * (1 + 1e-6)
                else:
                    np.testing.assert_array_equal(a, e, err_msg=kernels)
                assert np.abs(a - d).max() <= layers * quantum * (1 + 1e-6)
            else:
                np.testing.assert_array_equal(a, e, err_msg=kernels)
                if eight_bit:
                    assert np.abs(a.astype(np.int64) - r).max() <= layers
                assert np.abs(a.astype(np.int64) - d).max() <= layers


def _dequantize_scale(model: bytes) -> float:
    """The scale of the tensor the model's final DEQUANTIZE reads."""
    m = numlite.model.read_model(model)
    sg = m.subgraphs[0]
    (node,) = [n for n in sg.operators if m.op_name(n) == "DEQUANTIZE" and n.outputs[0] in sg.outputs]
    return float(sg.tensors[node.inputs[0]].quantization.scale[0])
