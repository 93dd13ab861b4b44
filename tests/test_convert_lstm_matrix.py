"""The LSTM conversion matrix: {tf_keras, Keras 3} x {every way a model reaches the converter}
x {batch 1, batch 2, dynamic batch} x {every kind of LSTM model} (``benchmarks/lstm_matrix.py``
defines the cases and paths, and prints the same matrix one model per cell).

Here the cases of a flavor are one model (its outputs by case name, built once per batch), so
that each path and batch saves, loads and converts one model: every file must run in LiteRT
and in numlite with Keras's own outputs (LSTM outputs and states are of order one: 1e-5
absolute and relative), hold one fused op per LSTM layer (one BIDIRECTIONAL_SEQUENCE_LSTM per
Bidirectional layer) and no WHILE but the masked layer's, whose report line says why it is a
loop. Stateful layers, whose state carries from one invoke to the next, are a model of their
own, run twice; those of one path (COMPILED_PATH) also on numlite's compiled engine, which
must compile them whole and give Keras's outputs as well.

tf_keras traces every layer's call functions when it saves a model, in a time that grows
faster than the number of layers (one LSTM: seconds; twenty: minutes). ``model.save`` and
``tf.saved_model.save`` need those traces (the serving signature is made from them), so there
each case is a model of its own. A ``tf.Module`` names its signature itself: its tf_keras
model is saved without the layers' traces (``save_traces=False``), which changes nothing the
converter reads: test_layer_traces_change_nothing_the_converter_reads saves one model both
ways and requires the same file.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import tempfile

import pytest

from numlite.model import read_model

SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "lstm_matrix.py")


def _load_matrix():
    spec = importlib.util.spec_from_file_location("benchmarks_lstm_matrix", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


matrix = _load_matrix()
CASES, PATHS = matrix.CASES, matrix.PATHS
_FOLDER = tempfile.TemporaryDirectory(prefix="numlite-lstm-matrix-")


def _cases(flavor: str, stateful: bool) -> tuple[str, ...]:
    return tuple(n for n, c in CASES.items() if flavor in c.flavors and c.stateful == stateful)


# The stateful files of this path also run on the compiled engine (jit=True), against Keras like the
# others: their state carries from invoke to invoke in compiled code. (Not the models of every case:
# 13 fused LSTM layers in one model compile in 44-120 s cold, measured on 2026-12-03, and every one
# matched LiteRT to 2e-7; test_jit_rnn.py compiles each LSTM form on its own.)
COMPILED_PATH = "tf.Module"
_TRACED = ("model.save", "tf.saved_model.save")  # tf_keras paths that must save the layers' traces


def _groups(flavor: str, path: str, stateful: bool) -> list[tuple[str, ...]]:
    """The models a path converts: every case in one, or each alone where tf_keras saves traces."""
    names = _cases(flavor, stateful)
    return [(n,) for n in names] if flavor == "tf_keras" and path in _TRACED else [names]


def _cells(batches, stateful: bool) -> list:
    return [pytest.param(flavor, path, batch, names, id=f"{flavor}-{path}-{batch}" + (
        f"-{names[0]}" if len(names) == 1 and not stateful else "")) for flavor in matrix.FLAVORS for path in PATHS
            if flavor in PATHS[path].flavors for batch in batches for names in _groups(flavor, path, stateful)]


@functools.cache
def model(flavor: str, names: tuple[str, ...], batch: int | None):
    return matrix.build_model(flavor, names, batch)


@functools.cache
def outcome(flavor: str, path: str, batch: int | None, names: tuple[str, ...]):
    folder = os.path.join(_FOLDER.name, f"{flavor}-{path}-{batch}-{'-'.join(names)[:80]}".replace(" ", "_"))
    # See the module's docstring. (A stateful tf_keras model, one layer, saves its traces: its
    # state variables are tracked through them.)
    traces = path in _TRACED or len(names) == 1
    return names, matrix.convert_and_check(flavor, names, path, batch, folder, model(flavor, names, batch),
                                           traces=traces, compiled=path == COMPILED_PATH and all(CASES[n].stateful for n in names))


def _check(names: tuple[str, ...], result) -> None:
    assert result.error is None, result.error
    assert result.mismatch is None, result.mismatch
    lstms = sum(CASES[n].lstms for n in names)
    bidis = sum(CASES[n].bidis for n in names)
    loops = [n for n in names if CASES[n].loop]
    got = (result.ops.get(matrix.LSTM, 0), result.ops.get(matrix.BIDI, 0), result.ops.get("WHILE", 0))
    assert got == (lstms, bidis, len(loops)), (got, result.ops, result.report)
    layer_lines = [line for line in result.report.splitlines() if line.startswith("layer ")]
    for name in loops:
        assert any(name in line and CASES[name].loop in line for line in layer_lines), (name, layer_lines)


@pytest.mark.parametrize("flavor, path, batch, names", _cells(matrix.BATCHES, stateful=False))
def test_lstm_models_fuse_and_match_keras(flavor, path, batch, names):
    _check(*outcome(flavor, path, batch, names))


@pytest.mark.parametrize("flavor, path, batch, names", _cells([1, 2], stateful=True))
def test_stateful_lstm_carries_its_state_across_invokes(flavor, path, batch, names):
    """Two invokes in a row give what Keras gives for two calls in a row (convert_and_check
    runs the stateful model twice)."""
    _check(*outcome(flavor, path, batch, names))


def test_every_case_is_in_the_matrix():
    """Each case of the issue's list is built for both flavors (time_major: tf_keras only)."""
    assert {n for n in CASES if not CASES[n].stateful} >= {
        "sequences", "last", "go_backwards", "time_major", "stacked", "bidirectional_concat", "bidirectional_sum",
        "bidirectional_mul", "bidirectional_ave", "return_state", "conv1d", "masked"}
    assert set(PATHS) == {"from_keras_model", "from_concrete_functions", "model.save", "tf.saved_model.save",
                          "tf.Module", "model.export", ".keras (CLI)"}


def test_layer_traces_change_nothing_the_converter_reads():
    """A tf_keras model in a tf.Module saved with its layers' traces (the default) and without
    converts to the same operators, tensors and weights; both files match Keras."""
    names, path = ("bidirectional_last",), "tf.Module"
    files = []
    for traces in (True, False):
        folder = os.path.join(_FOLDER.name, f"traces-{path}-{traces}".replace(" ", "_"))
        built = matrix.build_model("tf_keras", names, 2)
        result = matrix.convert_and_check("tf_keras", names, path, 2, folder, built, traces=traces)
        assert result.error is None and result.mismatch is None, (result.error, result.mismatch)
        with open(result.file, "rb") as f:
            files.append(read_model(f.read()))
    with_traces, without = files
    assert _contents(with_traces) == _contents(without)


def _contents(model) -> list:
    """Operators, tensor shapes and types, and constant values of every subgraph."""
    return [([(model.op_name(op), op.inputs, op.outputs) for op in sg.operators],
             [(t.shape, t.type, None if model.constant(sg, i) is None else model.constant(sg, i).tobytes())
              for i, t in enumerate(sg.tensors)]) for sg in model.subgraphs]
