"""SavedModels read from their files (numlite/converter/saved_model.py), not loaded.

For every way a user writes a SavedModel (tf_keras ``model.save``, ``tf.saved_model.save`` of a
Keras 3 model or of a ``tf.Module`` with state and several signatures, Keras 3 ``model.export``
with and without an input signature, functions capturing constants, recurrent layers whose
fusions read the function library), ``from_saved_model``:

- converts without calling ``tf.saved_model.load``, and the file gives TensorFlow's outputs in
  numlite and in LiteRT;
- writes the same model as when it loads the SavedModel through TensorFlow (the path it falls
  back to): the same operators, tensor shapes and types, constants and signatures.

A capture the reader does not know falls back to TensorFlow's loader; a resource that is not a
variable is refused with the same error either way.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_close, run_litert, run_numlite, seeded_values

import numlite
from numlite.converter import saved_model as saved_model_files
from numlite.model import read_model


def f32(*shape):
    return tf.TensorSpec(shape, tf.float32)


class Accumulator(tf.Module):
    """State assigned by one signature and read by another, a read-only weight, and an
    eager constant captured by a function (saved as a constant of the object graph)."""

    def __init__(self):
        super().__init__()
        self.total = tf.Variable(np.array([1.0, -2.0, 0.5], np.float32))
        self.scale = tf.Variable(np.float32(1.5))
        offset = tf.constant(np.array([0.25, 0.5, -1.0], np.float32))

        @tf.function(input_signature=[f32(3)])
        def add(x):
            self.total.assign_add(x * self.scale + offset)
            return {"total": self.total.read_value()}

        self.add = add

    @tf.function(input_signature=[f32(3)])
    def get(self, x):
        return {"scaled": self.total * x}


def _tf_keras_cnn():
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    layers = tf_keras.layers
    return tf_keras.Sequential([tf_keras.Input((8, 3)), layers.Conv1D(4, 3, activation="relu"), layers.Flatten(),
                                layers.Dense(2, activation="tanh")])


def _keras3_cnn(batch=None):
    tf.keras.utils.set_random_seed(1)
    layers = tf.keras.layers
    return tf.keras.Sequential([tf.keras.Input((6, 6, 2), batch_size=batch), layers.Conv2D(3, 3, activation="relu"),
                                layers.Flatten(), layers.Dense(2, activation="tanh")])


def _tf_keras_lstm():
    import tf_keras

    tf_keras.utils.set_random_seed(2)
    return tf_keras.Sequential([tf_keras.Input((5, 3)), tf_keras.layers.LSTM(4, return_sequences=True)])


def _calls(model, shape) -> list[tuple[str, dict, dict]]:
    """One call of serving_default on a seeded input: (key, inputs, expected outputs)."""
    x = seeded_values(shape, tf.float32, 3)
    return [("serving_default", {"x": x}, {"y": np.asarray(model(x))})]


def _save_tf_keras_model(folder):
    model = _tf_keras_cnn()
    model.save(folder)  # tf_keras: a SavedModel folder, the layers' traces included
    x = seeded_values((2, 8, 3), tf.float32, 3)
    (name,) = tf.saved_model.load(folder).signatures["serving_default"].structured_input_signature[1]
    (out,) = model.output_names
    return [("serving_default", {name: x}, {out: model(x).numpy()})]


def _save_keras3_model(folder):
    model = _keras3_cnn()
    module = tf.Module()
    module.model = model
    module.serve = tf.function(lambda x: {"y": model(x)}, input_signature=[f32(None, 6, 6, 2)])
    tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
    return _calls(model, (2, 6, 6, 2))


def _save_keras3_export(folder, signature: bool):
    model = _keras3_cnn(batch=None if signature else 2)
    options = {"input_signature": [tf.TensorSpec((None, 6, 6, 2), tf.float32, name="x")]} if signature else {}
    model.export(folder, verbose=False, **options)
    x = seeded_values((2, 6, 6, 2), tf.float32, 3)
    signature_function = tf.saved_model.load(folder).signatures["serving_default"]
    (name,) = signature_function.structured_input_signature[1]
    (out,) = signature_function.structured_outputs
    return [("serving_default", {name: x}, {out: np.asarray(model(x))})]


def _save_stateful_module(folder):
    module = Accumulator()
    tf.saved_model.save(module, folder, signatures={"add": module.add, "get": module.get})
    reference = Accumulator()
    calls = []
    for step in range(3):
        x = seeded_values((3,), tf.float32, 10 + step)
        calls.append(("add", {"x": x}, {k: v.numpy() for k, v in reference.add(x).items()}))
        calls.append(("get", {"x": x}, {k: v.numpy() for k, v in reference.get(x).items()}))
    return calls


def _save_tf_keras_lstm(folder):
    model = _tf_keras_lstm()
    model.save(folder)
    x = seeded_values((2, 5, 3), tf.float32, 3)
    (name,) = tf.saved_model.load(folder).signatures["serving_default"].structured_input_signature[1]
    (out,) = model.output_names
    return [("serving_default", {name: x}, {out: model(x).numpy()})]


WRITERS: dict[str, Callable] = {
    "tf_keras model.save": _save_tf_keras_model,
    "tf.saved_model.save, Keras 3 in a tf.Module": _save_keras3_model,
    "model.export with an input signature": lambda folder: _save_keras3_export(folder, True),
    "model.export, fixed batch": lambda folder: _save_keras3_export(folder, False),
    "tf.Module, state shared by two signatures, a captured constant": _save_stateful_module,
    "tf_keras LSTM model.save (a fused function)": _save_tf_keras_lstm,
}


@pytest.fixture(scope="module", params=list(WRITERS))
def saved(request, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("saved") / "model")
    return folder, WRITERS[request.param](folder)


def _convert(folder: str) -> tuple[bytes, numlite.TFLiteConverter]:
    converter = numlite.TFLiteConverter.from_saved_model(folder)
    return converter.convert(), converter


def test_converts_without_loading_and_gives_tensorflows_outputs(saved, monkeypatch):
    folder, calls = saved
    with monkeypatch.context() as patch:
        patch.setattr(tf.saved_model, "load", _refuse_to_load)
        model, converter = _convert(folder)
    assert all(isinstance(f, saved_model_files.SavedSignature) for _, f in converter._functions)
    for runtime in ("numlite", "LiteRT"):
        interpreter = numlite.Interpreter(model_content=model) if runtime == "numlite" else _litert(model)
        for step, (key, inputs, expected) in enumerate(calls):  # in order: state carries over
            got = interpreter.get_signature_runner(key)(**inputs)
            assert sorted(got) == sorted(expected), (runtime, key, sorted(got))
            for name, value in expected.items():
                assert_close(got[name], value, what=f"{runtime}, call {step} ({key}) {name}: ")


def test_writes_the_model_loading_the_saved_model_writes(saved, monkeypatch):
    folder, _ = saved
    read, read_converter = _convert(folder)
    with monkeypatch.context() as patch:
        patch.setattr(saved_model_files, "read_signatures", lambda *args: None)
        loaded, loaded_converter = _convert(folder)
    assert not any(isinstance(f, saved_model_files.SavedSignature) for _, f in loaded_converter._functions)
    assert _contents(read_model(read)) == _contents(read_model(loaded))
    assert read_converter.report.layers == loaded_converter.report.layers
    assert read_converter.report.fusions == loaded_converter.report.fusions


def test_a_lookup_table_is_refused_with_the_same_error_either_way(tmp_path, monkeypatch):
    module = tf.Module()
    keys, values = tf.constant([1, 2, 3], tf.int64), tf.constant([10.0, 20.0, 30.0])
    module.table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), -1.0)
    module.f = tf.function(lambda x: {"y": module.table.lookup(x)}, input_signature=[tf.TensorSpec([None], tf.int64)])
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.f})
    messages = []
    for reader in (saved_model_files.read_signatures, lambda *args: None):
        with monkeypatch.context() as patch:
            patch.setattr(saved_model_files, "read_signatures", reader)
            with pytest.raises(numlite.ConversionError, match="not a variable.*LookupTableFindV2") as error:
                _convert(str(tmp_path))
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_a_capture_the_reader_does_not_know_falls_back_to_loading(tmp_path):
    """An asset (a file the SavedModel carries) captured as its path: TensorFlow's loader
    knows where the folder is, so the conversion loads the SavedModel."""
    vocabulary = tmp_path / "words.txt"
    vocabulary.write_text("a\nbb\nccc\n")
    module = tf.Module()
    module.asset = tf.saved_model.Asset(str(vocabulary))
    module.f = tf.function(lambda x: {"y": x * tf.cast(tf.strings.length(module.asset.asset_path), tf.float32)},
                           input_signature=[f32(None)])
    folder = str(tmp_path / "model")
    tf.saved_model.save(module, folder, signatures={"serving_default": module.f})
    assert saved_model_files.read_signatures(folder, _parsed(folder), None) is None
    model, converter = _convert(folder)
    assert not any(isinstance(f, saved_model_files.SavedSignature) for _, f in converter._functions)
    x = seeded_values((4,), tf.float32, 1)
    # The loaded SavedModel's asset is the folder's copy: its path's length is the factor.
    factor = np.float32(len(os.path.join(folder, "assets", "words.txt")))
    for run in (run_numlite, run_litert):
        assert_close(run(model, [x])[0], x * factor)


def test_tags_that_name_no_meta_graph_are_an_error(tmp_path):
    module = tf.Module()
    module.f = tf.function(lambda x: {"y": x + 1.0}, input_signature=[f32(2)])
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.f})
    with pytest.raises(numlite.ConversionError, match="no meta graph tagged.*'train'.*serve"):
        numlite.TFLiteConverter.from_saved_model(str(tmp_path), tags=["train"])


# -- helpers -----------------------------------------------------------------------------------


def _refuse_to_load(*args, **kwargs):
    raise AssertionError("tf.saved_model.load was called")


def _litert(model: bytes):
    from helpers import litert_interpreter

    return litert_interpreter(model)


def _parsed(folder: str):
    from tensorflow.python.saved_model import loader_impl

    return loader_impl.parse_saved_model(folder)


def _contents(model) -> list:
    """Operators, tensor shapes and types, constant values of every subgraph, and the
    signatures (key, subgraph, input and output names)."""
    subgraphs = [([(model.op_name(op), op.inputs, op.outputs) for op in sg.operators],
                  [(t.shape, t.type, None if model.constant(sg, i) is None else model.constant(sg, i).tobytes())
                   for i, t in enumerate(sg.tensors)]) for sg in model.subgraphs]
    signatures = sorted((s.key, s.subgraph_index, sorted(s.inputs.items()), sorted(s.outputs.items()))
                        for s in model.signature_defs)
    return [subgraphs, signatures]
