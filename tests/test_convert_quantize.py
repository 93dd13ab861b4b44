"""Post-training quantization in numlite's converter: dynamic range (``optimizations=[DEFAULT]``,
int8 weights for hybrid kernels) and float16 (``supported_types=[float16]``, float16 weights
behind DEQUANTIZE), against the official converter given the same model and the same settings.

The reference for accuracy is the float Keras / TensorFlow model itself. Quantization changes
results by design, so the check is relative: numlite's file, run in LiteRT and in numlite, must
be within the official converter's own error on the same model and input,
``numlite_err <= 1.5 * official_err + 1e-6``. Both converters quantize the same weights the same
way (the tests below check that the int8 and float16 weights are byte-identical), so the errors
are nearly equal; the factor leaves room for what legitimately differs -- the float graph each
converter builds (a fused LSTM against the official converter's WHILE loop, another summation
order) and activations quantized on the fly that land on other rounding ties -- while a real
mistake (a wrong scale, axis or rounding) moves outputs by far more. The ``1e-6`` covers
models whose official error is zero (an embedding lookup copies rows exactly).

File sizes must be within 5 % of the official file's (numlite's files are usually smaller), and a
weight-heavy model must shrink about 4x (dynamic range) or 2x (float16).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from helpers import run_litert, run_numlite

import numlite
from numlite.model import read_model

L = keras.layers
MODES = ("dynamic_range", "float16")
BATCH = 2


# -- models ------------------------------------------------------------------------------------


BIAS = {"bias_initializer": "random_normal"}  # Keras's zero biases would be dropped: keep some


def _mlp() -> keras.Model:
    inp = keras.Input((256,), batch_size=BATCH)
    x = L.Dense(128, activation="relu", **BIAS)(inp)  # 32768 weights: int8 per channel
    x = L.Dense(16, activation="relu", **BIAS)(x)  # 2048: int8
    return keras.Model(inp, L.Dense(4, **BIAS)(x))  # 64: stays float


def _cnn() -> keras.Model:
    inp = keras.Input((12, 12, 8), batch_size=BATCH)
    x = L.Conv2D(16, 3, padding="same", activation="relu", **BIAS)(inp)  # 1152 weights: int8
    x = L.DepthwiseConv2D(3, padding="same", **BIAS)(x)  # 144: stays float
    x = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)  # 4608: int8
    x = L.DepthwiseConv2D(5, depth_multiplier=2, padding="same", activation="relu")(x)  # 1600: int8
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inp, L.Dense(10)(x))  # 640: stays float


def _lstm() -> keras.Model:
    inp = keras.Input((5, 40), batch_size=BATCH)
    x = L.LSTM(32)(inp)  # input weights 32x40, recurrent 32x32: every matrix >= 1024, int8
    return keras.Model(inp, L.Dense(4)(x))


def _bilstm() -> keras.Model:
    inp = keras.Input((5, 32), batch_size=BATCH)
    x = L.Bidirectional(L.LSTM(32))(inp)
    return keras.Model(inp, L.Dense(4)(x))


def _embedding() -> keras.Model:
    inp = keras.Input((6,), batch_size=BATCH, dtype="int32")
    x = L.Embedding(300, 16)(inp)  # a GATHER of a 4800-element table
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(inp, L.Dense(3)(x))


BUILDERS: dict[str, Callable[[], keras.Model]] = {
    "mlp": _mlp, "cnn": _cnn, "lstm": _lstm, "bilstm": _bilstm, "embedding": _embedding,
}
_KERAS: dict[str, keras.Model] = {}
_FILES: dict[tuple, tuple[bytes, Any]] = {}


def keras_model(name: str) -> keras.Model:
    if name not in _KERAS:
        keras.utils.set_random_seed(0)
        _KERAS[name] = BUILDERS[name]()
    return _KERAS[name]


def model_input(name: str) -> np.ndarray:
    spec = keras_model(name).inputs[0]
    rng = np.random.default_rng(1)
    if spec.dtype == "int32":
        return rng.integers(0, 300, tuple(spec.shape)).astype(np.int32)
    return rng.uniform(-2, 2, tuple(spec.shape)).astype(np.float32)


def configure(converter: Any, mode: str | None) -> Any:
    """Set a converter (official or numlite) for ``mode``, as tf.lite spells it."""
    if mode is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if mode == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter


def converted(name: str, mode: str | None, official: bool) -> tuple[bytes, Any]:
    """The model ``name`` converted by the official converter or numlite's (cached), with
    numlite's conversion report."""
    key = (name, mode, official)
    if key not in _FILES:
        if official:
            converter = configure(tf.lite.TFLiteConverter.from_keras_model(keras_model(name)), mode)
            _FILES[key] = (converter.convert(), None)
        else:
            converter = configure(numlite.TFLiteConverter.from_keras_model(keras_model(name)), mode)
            _FILES[key] = (converter.convert(), converter.report)
    return _FILES[key]


def error(outputs: list[np.ndarray], expected: np.ndarray) -> float:
    assert len(outputs) == 1 and outputs[0].shape == expected.shape, [o.shape for o in outputs]
    return float(np.max(np.abs(outputs[0].astype(np.float64) - expected)))


def expected_output(name: str) -> np.ndarray:
    return np.asarray(keras_model(name)(model_input(name))).astype(np.float64)


def official_error(name: str, mode: str) -> float:
    return error(run_litert(converted(name, mode, True)[0], [model_input(name)]), expected_output(name))


def tensor_types(data: bytes) -> Counter:
    """How many constant tensors of each type the model holds."""
    m = read_model(data)
    return Counter(t.type for sg in m.subgraphs for i, t in enumerate(sg.tensors) if m.constant(sg, i) is not None)


# The numlite runs whose hybrid kernel numlite does not have yet.
MISSING_KERNEL: dict[tuple[str, str], str] = {}
CASES = [(name, mode) for name in BUILDERS for mode in MODES]


def _numlite_case(name: str, mode: str) -> Any:
    reason = MISSING_KERNEL.get((name, mode))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, mode, marks=marks, id=f"{name}-{mode}")


# -- accuracy and size against the official converter -----------------------------------------


@pytest.mark.parametrize("name, mode", CASES)
def test_litert_runs_numlite_file_within_official_error(name, mode):
    data, _ = converted(name, mode, False)
    ours = error(run_litert(data, [model_input(name)]), expected_output(name))
    theirs = official_error(name, mode)
    assert ours <= 1.5 * theirs + 1e-6, f"numlite's file errs by {ours:.3g}, the official file by {theirs:.3g}"


@pytest.mark.parametrize("name, mode", [_numlite_case(name, mode) for name, mode in CASES])
def test_numlite_runs_numlite_file_within_official_error(name, mode):
    data, _ = converted(name, mode, False)
    ours = error(run_numlite(data, [model_input(name)]), expected_output(name))
    theirs = official_error(name, mode)
    assert ours <= 1.5 * theirs + 1e-6, f"numlite's file errs by {ours:.3g}, the official file by {theirs:.3g}"


@pytest.mark.parametrize("name, mode", CASES)
def test_size_close_to_official(name, mode):
    ours, theirs = len(converted(name, mode, False)[0]), len(converted(name, mode, True)[0])
    assert ours <= 1.05 * theirs, f"numlite {ours} bytes, official {theirs}"


@pytest.mark.parametrize("mode, factor", [("dynamic_range", 3.5), ("float16", 1.9)])
def test_weight_heavy_model_shrinks(mode, factor):
    float_size = len(converted("mlp", None, False)[0])
    assert float_size >= factor * len(converted("mlp", mode, False)[0])


@pytest.mark.parametrize("name, mode", CASES)
def test_quantized_weights_present(name, mode):
    """The files really hold quantized weights (no test above passes on a float file by luck)."""
    types = tensor_types(converted(name, mode, False)[0])
    if mode == "float16":
        assert types["FLOAT16"] > 0 and types["FLOAT32"] == 0, types
    else:
        assert types["INT8"] > 0, types


# -- the same file as the official converter ---------------------------------------------------


def _weights(data: bytes) -> Counter:
    """Every quantized constant as (type, shape, bytes, scales, quantized dimension)."""
    m = read_model(data)
    found: Counter = Counter()
    for sg in m.subgraphs:
        for i, t in enumerate(sg.tensors):
            value = m.constant(sg, i)
            if value is None or t.type not in ("INT8", "FLOAT16"):
                continue
            q = t.quantization
            scales = () if q is None or q.scale is None else tuple(np.asarray(q.scale, np.float32).tolist())
            dim = q.quantized_dimension if scales and len(scales) > 1 else None
            found[(t.type, value.shape, value.tobytes(), scales, dim)] += 1
    return found


def _op_counts(data: bytes) -> Counter:
    """The operators quantization made or changed: DEQUANTIZE and every op reading a quantized
    constant (the float graphs around them may differ between the converters, e.g. SELECT
    against SELECT_V2)."""
    m = read_model(data)
    found: Counter = Counter()
    for _, _, op in m.iter_operators():
        sg = next(sg for sg in m.subgraphs if op in sg.operators)
        quantized = any(i >= 0 and sg.tensors[i].type in ("INT8", "FLOAT16") for i in op.inputs)
        if quantized or m.op_name(op) == "DEQUANTIZE":
            found[m.op_name(op)] += 1
    return found


@pytest.mark.parametrize("name", ["mlp", "cnn", "embedding"])
@pytest.mark.parametrize("mode", MODES)
def test_same_operators_and_weights_as_official(name, mode):
    ours, theirs = converted(name, mode, False)[0], converted(name, mode, True)[0]
    assert _op_counts(ours) == _op_counts(theirs)
    assert _weights(ours) == _weights(theirs)


def _versions(data: bytes) -> dict[str, int]:
    """The versions of the operators quantization made or changed."""
    m = read_model(data)
    return {m.op_name(op): m.operator_codes[op.opcode_index].version for _, _, op in m.iter_operators()
            if m.op_name(op) in _op_counts(data)}


@pytest.mark.parametrize("name", ["mlp", "cnn", "embedding"])
def test_hybrid_options_and_versions_as_official(name):
    ours, theirs = converted(name, "dynamic_range", False)[0], converted(name, "dynamic_range", True)[0]
    assert _versions(ours) == _versions(theirs)

    def flags(data):
        m = read_model(data)
        return sorted((m.op_name(op), bool(getattr(op.builtin_options, "asymmetric_quantize_inputs", False)))
                      for _, _, op in m.iter_operators() if m.op_name(op) in _op_counts(data))

    assert flags(ours) == flags(theirs)


RNG = np.random.default_rng(7)
SHARED = tf.constant(RNG.normal(0, 0.2, (64, 64)).astype(np.float32))
TABLE = tf.constant(RNG.normal(0, 0.2, (100, 16)).astype(np.float32))
SMALL = tf.constant(RNG.normal(0, 0.2, (64, 8)).astype(np.float32))
STACK = tf.constant(RNG.normal(0, 0.2, (3, 64, 64)).astype(np.float32))


def _shared_weights(x, b, ids):
    """Two layers sharing one weight, the same weight read by a MUL (which needs it float), a
    batched matmul with a constant right-hand side, a gathered table, a matrix too small."""
    h = tf.matmul(tf.matmul(x, SHARED), SHARED)
    return h, tf.tile(x, [32, 1]) * SHARED, tf.matmul(b, STACK), tf.gather(TABLE, ids), tf.matmul(x, SMALL)


SHARED_SPECS = [tf.TensorSpec([BATCH, 64]), tf.TensorSpec([3, 4, 64]), tf.TensorSpec([5], tf.int32)]
_FUNCTION_FILES: dict[tuple, tuple[bytes, Any]] = {}


def convert_function(fn: Callable, specs: list, mode: str, official: bool) -> tuple[bytes, Any]:
    key = (fn, mode, official)
    if key not in _FUNCTION_FILES:
        concrete = tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()
        cls = tf.lite.TFLiteConverter if official else numlite.TFLiteConverter
        converter = configure(cls.from_concrete_functions([concrete], concrete), mode)
        _FUNCTION_FILES[key] = (converter.convert(), None if official else converter.report)
    return _FUNCTION_FILES[key]


def _function_inputs(specs: list) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 100, s.shape).astype(np.int32) if s.dtype == tf.int32
            else rng.uniform(-2, 2, s.shape).astype(np.float32) for s in specs]


@pytest.mark.parametrize("mode", MODES)
def test_shared_weights_as_official(mode):
    ours, theirs = (convert_function(_shared_weights, SHARED_SPECS, mode, o)[0] for o in (False, True))
    assert _op_counts(ours) == _op_counts(theirs)
    assert _weights(ours) == _weights(theirs)
    assert len(ours) <= 1.05 * len(theirs)
    inputs = _function_inputs(SHARED_SPECS)
    concrete = tf.function(_shared_weights, input_signature=SHARED_SPECS, autograph=False).get_concrete_function()
    expected = [np.asarray(t) for t in concrete(*[tf.constant(x) for x in inputs])]
    official = run_litert(theirs, inputs)
    for runtime in (run_litert, run_numlite):
        for k, (a, o, e) in enumerate(zip(runtime(ours, inputs), official, expected)):
            ours_err, theirs_err = np.abs(a - e).max(), np.abs(o - e).max()
            assert ours_err <= 1.5 * theirs_err + 1e-6, f"output {k}: {ours_err} vs official {theirs_err}"


def test_shared_weight_quantized_once_and_kept_float_for_mul():
    data, report = convert_function(_shared_weights, SHARED_SPECS, "dynamic_range", False)
    m = read_model(data)
    sg = m.subgraphs[0]
    fc_weights = {op.inputs[1] for op in sg.operators if m.op_name(op) == "FULLY_CONNECTED"
                  and sg.tensors[op.inputs[1]].type == "INT8"}
    assert len(fc_weights) == 1  # both layers read one int8 tensor
    mul = next(op for op in sg.operators if m.op_name(op) == "MUL")
    assert any(sg.tensors[i].type == "FLOAT32" and m.constant(sg, i) is not None for i in mul.inputs)
    assert "dynamic range: kept float, weights under 1024 elements: FULLY_CONNECTED x1" in report.quantization
    assert any("GATHER x1 reads an int8 table" in line for line in report.quantization)


# -- LSTMs: all weights or none ----------------------------------------------------------------


def test_lstm_weights_all_or_none_as_official():
    """The official converter fuses tf_keras LSTMs itself and quantizes one only when each of its
    weight matrices has 1024 elements or more: of a 32-unit LSTM on 40 features (matrices 32x40
    and 32x32) all eight, of a 16-unit one on 80 features (16x80 but 16x16) none. numlite (which
    fuses tf_keras LSTMs too) must choose the same inputs. One model holds both, as the official
    converter takes long over each tf_keras LSTM."""
    tf_keras.utils.set_random_seed(0)
    layers = tf_keras.layers
    inputs = [layers.Input((5, features), batch_size=BATCH) for features in (40, 80)]
    model = tf_keras.Model(inputs, [layers.LSTM(32)(inputs[0]), layers.LSTM(16)(inputs[1])])
    specs = [tf.TensorSpec(i.shape) for i in inputs]
    concrete = tf.function(lambda a, b: model([a, b]), input_signature=specs).get_concrete_function()

    def lstm_input_types(cls: Any) -> dict[tuple, list[str]]:
        m = read_model(configure(cls.from_concrete_functions([concrete], model), "dynamic_range").convert())
        sg = m.subgraphs[0]
        return {sg.tensors[op.inputs[0]].shape: [sg.tensors[i].type if i >= 0 else "-" for i in op.inputs]
                for op in sg.operators if m.op_name(op) == "UNIDIRECTIONAL_SEQUENCE_LSTM"}

    ours = lstm_input_types(numlite.TFLiteConverter)
    assert ours == lstm_input_types(tf.lite.TFLiteConverter)
    assert ours[(BATCH, 5, 40)][1:9] == ["INT8"] * 8 and "INT8" not in ours[(BATCH, 5, 80)]


# -- EMBEDDING_LOOKUP (numlite's fusion; the official converter writes a GATHER) ---------------


@tf.function(experimental_implements="embedding_lookup")
def _lookup(table, ids):
    return tf.gather(table, ids)


EMBEDDINGS = tf.constant(RNG.normal(0, 0.2, (200, 16)).astype(np.float32))
LOOKUP_SPECS = [tf.TensorSpec([6], tf.int32)]


def _embedding_lookup(ids):
    return _lookup(EMBEDDINGS, ids) * 2.0


def _lookup_errors(runtime: Callable) -> tuple[float, float]:
    ours = convert_function(_embedding_lookup, LOOKUP_SPECS, "dynamic_range", False)[0]
    theirs = convert_function(_embedding_lookup, LOOKUP_SPECS, "dynamic_range", True)[0]
    inputs = [np.random.default_rng(5).integers(0, 200, (6,)).astype(np.int32)]
    expected = np.asarray(_embedding_lookup(tf.constant(inputs[0])))
    return np.abs(runtime(ours, inputs)[0] - expected).max(), np.abs(run_litert(theirs, inputs)[0] - expected).max()


def test_embedding_lookup_gets_int8_table():
    data, report = convert_function(_embedding_lookup, LOOKUP_SPECS, "dynamic_range", False)
    m = read_model(data)
    sg = m.subgraphs[0]
    op = next(op for op in sg.operators if m.op_name(op) == "EMBEDDING_LOOKUP")
    table = sg.tensors[op.inputs[1]]
    assert table.type == "INT8" and len(table.quantization.scale) == 1
    assert any("EMBEDDING_LOOKUP x1 (per tensor)" in line for line in report.quantization)
    ours, theirs = _lookup_errors(run_litert)
    assert ours <= 1.5 * theirs + 1e-6


def test_embedding_lookup_runs_in_numlite():
    ours, theirs = _lookup_errors(run_numlite)
    assert ours <= 1.5 * theirs + 1e-6


# -- reports and errors ------------------------------------------------------------------------


def test_reports_say_what_was_quantized():
    _, dynamic = converted("mlp", "dynamic_range", False)
    assert dynamic.quantization[0] == "dynamic range: int8 weights (symmetric) for FULLY_CONNECTED x2 (per channel)"
    assert "dynamic range: kept float, weights under 1024 elements: FULLY_CONNECTED x1" in dynamic.quantization
    assert "quantization: dynamic range" in str(dynamic)
    _, half = converted("mlp", "float16", False)
    assert half.quantization[0] == "float16: 6 float32 constant(s) stored as float16, each behind a DEQUANTIZE"
    _, plain = converted("mlp", None, False)
    assert plain.quantization == []


def test_nothing_large_enough_is_reported():
    small = tf.constant(np.ones((8, 4), np.float32))
    data, report = convert_function(lambda x: tf.matmul(x, small), [tf.TensorSpec([2, 8])], "dynamic_range", False)
    assert report.quantization[0].startswith("dynamic range: nothing quantized")
    assert tensor_types(data)["INT8"] == 0


@pytest.mark.parametrize("settings, message", [
    ({"inference_input_type": tf.int8}, "need full-integer quantization"),
    ({"target_spec.supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]}, "needs a representative_dataset"),
])
def test_unsupported_combinations_refused(settings, message):
    converter = configure(numlite.TFLiteConverter.from_keras_model(keras_model("mlp")), "dynamic_range")
    for key, value in settings.items():
        target = converter.target_spec if key.startswith("target_spec.") else converter
        setattr(target, key.split(".")[-1], value)
    with pytest.raises(numlite.ConversionError, match=message):
        converter.convert()
