"""The LSTM conversion matrix: Keras LSTM models saved the ways users save them, converted by
numlite, run in LiteRT and in numlite, and compared with Keras.

    python benchmarks/lstm_matrix.py [--flavors tf_keras,keras3] [--paths a,b] [--batches 1,2,None]
                                     [--cases a,b] [--json PATH]

One row per (Keras flavor, case), one column per (save path, batch): ``fused`` when the file
holds the expected fused ops and no WHILE and matches Keras, ``loop`` when it keeps a WHILE and
matches, ``wrong`` when it converts but does not match, ``error`` when it does not convert (the
JSON keeps each message). Each case is its own model here; ``tests/test_convert_lstm_matrix.py``
converts the same cases grouped into one model per (flavor, path, batch), which is faster.

Flavors: tf_keras (Keras 2, whose LSTM functions carry ``api_implements``) and Keras 3 (whose
LSTMs are plain while loops in a SavedModel). Paths: ``TFLiteConverter.from_keras_model``,
``from_concrete_functions`` of a ``tf.function`` calling the model, ``model.save(dir)``
(tf_keras), ``tf.saved_model.save(model, dir)``, a ``tf.Module`` holding the model with a
``tf.function(input_signature=...)`` saved with that signature, ``model.export(dir,
input_signature=...)``, and a ``.keras`` file converted by the command line
(``numlite convert m.keras``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

STEPS, FEATURES = 5, 3
DYNAMIC_BATCH_RUN = 3  # the batch a dynamic-batch model is run with
FLAVORS = ("tf_keras", "keras3")
BATCHES: tuple[int | None, ...] = (1, 2, None)
LSTM, BIDI = "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM"


def keras_module(flavor: str) -> Any:
    """``tf_keras`` or ``keras`` (3)."""
    if flavor == "tf_keras":
        import tf_keras

        return tf_keras
    import keras

    return keras


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One kind of LSTM model: its layers on the input (outputs by name; a layer's extra outputs
    are named ``<name>_1``, ``<name>_2``, as tf_keras names a layer's outputs in a SavedModel),
    and what its conversion must hold: ``lstms`` UNIDIRECTIONAL and ``bidis`` BIDIRECTIONAL
    LSTM ops and no WHILE; or, for ``loop`` cases (no exact fused form), a WHILE loop and a
    report line containing ``loop``."""

    build: Callable[[Any, Any, str], dict[str, Any]]  # (keras module, input, name) -> outputs
    lstms: int = 0
    bidis: int = 0
    flavors: tuple[str, ...] = FLAVORS
    fixed_batch_only: bool = False
    stateful: bool = False
    loop: str | None = None  # what the report says of a layer kept as a loop


def _lstm(units: int, **options: Any) -> Callable[[Any, Any, str], dict[str, Any]]:
    return lambda K, x, name: {name: K.layers.LSTM(units, name=name, **options)(x)}


def _bidirectional(merge_mode: str, return_sequences: bool = True) -> Callable[[Any, Any, str], dict[str, Any]]:
    def build(K: Any, x: Any, name: str) -> dict[str, Any]:
        layer = K.layers.Bidirectional(K.layers.LSTM(4, return_sequences=return_sequences), merge_mode=merge_mode,
                                       name=name)
        return {name: layer(x)}

    return build


def _stacked(K: Any, x: Any, name: str) -> dict[str, Any]:
    y = K.layers.LSTM(5, return_sequences=True, name=f"{name}_first")(x)
    return {name: K.layers.LSTM(3, name=name)(y)}


def _return_state(K: Any, x: Any, name: str) -> dict[str, Any]:
    sequence, h, c = K.layers.LSTM(8, return_sequences=True, return_state=True, name=name)(x)
    return {name: sequence, f"{name}_1": h, f"{name}_2": c}


def _conv1d(K: Any, x: Any, name: str) -> dict[str, Any]:
    y = K.layers.Conv1D(6, 3, padding="same", activation="relu", name=f"{name}_conv")(x)
    return {name: K.layers.LSTM(4, name=name)(y)}


def _time_major(K: Any, x: Any, name: str) -> dict[str, Any]:
    """tf_keras's time-major LSTM between transposes (TF ops on Keras tensors, which a .keras
    file stores by name, unlike a Lambda's Python code), named by a linear activation."""
    import tensorflow as tf

    y = K.layers.LSTM(7, time_major=True, return_sequences=True, name=f"{name}_lstm")(tf.transpose(x, [1, 0, 2]))
    return {name: K.layers.Activation("linear", name=name)(tf.transpose(y, [1, 0, 2]))}


def _masked(K: Any, x: Any, name: str) -> dict[str, Any]:
    return {name: K.layers.LSTM(4, name=name)(K.layers.Masking(0.0, name=f"{name}_mask")(x))}


# Unidirectional cases have LSTMs of sizes no other case has: any LSTM over the input and one
# over its reverse, of one size, become one BIDIRECTIONAL_SEQUENCE_LSTM (it computes the same),
# and a model holding every case would pair them across cases.
CASES: dict[str, Case] = {
    "sequences": Case(_lstm(3, return_sequences=True), lstms=1),
    "last": Case(_lstm(5), lstms=1),
    "go_backwards": Case(_lstm(6, return_sequences=True, go_backwards=True), lstms=1),
    "time_major": Case(_time_major, lstms=1, flavors=("tf_keras",)),  # Keras 3's LSTM has no time_major
    "stacked": Case(_stacked, lstms=2),
    "bidirectional_concat": Case(_bidirectional("concat"), bidis=1),
    "bidirectional_sum": Case(_bidirectional("sum"), bidis=1),
    "bidirectional_mul": Case(_bidirectional("mul"), bidis=1),
    "bidirectional_ave": Case(_bidirectional("ave"), bidis=1),
    "bidirectional_last": Case(_bidirectional("concat", return_sequences=False), bidis=1),
    "return_state": Case(_return_state, lstms=1),
    "conv1d": Case(_conv1d, lstms=1),
    "stateful": Case(_lstm(4, return_sequences=True, stateful=True), lstms=1, fixed_batch_only=True, stateful=True),
    # The fused op cannot skip masked steps: the layer stays a loop, and the report says why.
    "masked": Case(_masked, loop="not fused: it is masked"),
}


def applies(case: Case, flavor: str, path: str, batch: int | None) -> bool:
    """Whether the combination exists (stateful layers need a fixed batch, some paths and cases
    one flavor)."""
    return flavor in case.flavors and flavor in PATHS[path].flavors and not (case.fixed_batch_only and batch is None)


def build_model(flavor: str, names: tuple[str, ...], batch: int | None, seed: int = 0) -> Any:
    """One Keras model computing the named cases from one input [batch, STEPS, FEATURES],
    with random weights of order one (biases too), outputs a dict by name."""
    K = keras_module(flavor)
    K.utils.set_random_seed(seed)
    x = K.Input((STEPS, FEATURES), batch_size=batch, name="sequence")
    outputs: dict[str, Any] = {}
    for name in names:
        outputs.update(CASES[name].build(K, x, name))
    model = K.Model(x, outputs)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
    reset_states(model)
    return model


def reset_states(model: Any) -> None:
    """Zero the states of a model's stateful layers (tf_keras and Keras 3 spell it differently)."""
    for layer in model.layers:
        if getattr(layer, "stateful", False):
            (getattr(layer, "reset_states", None) or layer.reset_state)()


def inputs_for(batch: int | None, stateful: bool, seed: int = 0) -> list[np.ndarray]:
    """The inputs a model is run on: one batch; two in a row for a stateful model (the second
    starts from the first's final state). Values in [-2, 2], no exact zeros (a mask)."""
    rng = np.random.default_rng(seed)
    rows = batch or DYNAMIC_BATCH_RUN
    return [rng.uniform(-2, 2, (rows, STEPS, FEATURES)).astype(np.float32) for _ in range(2 if stateful else 1)]


def keras_outputs(model: Any, xs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """What Keras computes on each input in turn (from zero states)."""
    reset_states(model)
    results = [{k: np.asarray(v) for k, v in model(x, training=False).items()} for x in xs]
    reset_states(model)
    return results


# ----------------------------------------------------------------------------- save paths


@dataclass(frozen=True)
class Path:
    """How a model reaches the converter: ``convert(model, flavor, batch, folder, traces)``
    returns the ``.tflite`` bytes and numlite's conversion report (as text). ``traces=False``
    saves a tf_keras model without its layers' traced call functions (``save_traces=False``):
    the signatures the converter reads are the same, and saving is many times faster (tf_keras
    traces every layer's call, its time growing faster than the number of LSTM layers)."""

    convert: Callable[[Any, str, int | None, str, bool], tuple[bytes, str]]
    flavors: tuple[str, ...] = FLAVORS


def _spec(batch: int | None) -> Any:
    import tensorflow as tf

    return tf.TensorSpec((batch, STEPS, FEATURES), tf.float32)


def _from_saved_model(folder: str) -> tuple[bytes, str]:
    import numlite

    converter = numlite.TFLiteConverter.from_saved_model(folder)
    data = converter.convert()
    return data, str(converter.report)


@contextlib.contextmanager
def _layer_traces(flavor: str, traces: bool) -> Any:
    """tf_keras's own switch for a model saved by ``tf.saved_model.save`` (``model.save``
    takes ``save_traces``)."""
    if flavor != "tf_keras" or traces:
        yield
        return
    from tf_keras.src.saving.legacy.saved_model import utils

    with utils.keras_option_scope(save_traces=False, in_tf_saved_model_scope=utils.in_tf_saved_model_scope()):
        yield


def _via_keras_model(model: Any, flavor: str, batch: int | None, folder: str, traces: bool) -> tuple[bytes, str]:
    import numlite

    converter = numlite.TFLiteConverter.from_keras_model(model)
    return converter.convert(), str(converter.report)


def _via_concrete_function(model: Any, flavor: str, batch: int | None, folder: str, traces: bool
                           ) -> tuple[bytes, str]:
    import tensorflow as tf

    import numlite

    function = tf.function(lambda x: model(x, training=False))
    converter = numlite.TFLiteConverter.from_concrete_functions([function.get_concrete_function(_spec(batch))], model)
    return converter.convert(), str(converter.report)


def _via_model_save(model: Any, flavor: str, batch: int | None, folder: str, traces: bool) -> tuple[bytes, str]:
    model.save(folder, **({} if traces else {"save_traces": False}))
    return _from_saved_model(folder)


def _via_tf_saved_model_save(model: Any, flavor: str, batch: int | None, folder: str, traces: bool
                             ) -> tuple[bytes, str]:
    import tensorflow as tf

    with _layer_traces(flavor, traces):
        tf.saved_model.save(model, folder)
    return _from_saved_model(folder)


def _via_module(model: Any, flavor: str, batch: int | None, folder: str, traces: bool) -> tuple[bytes, str]:
    import tensorflow as tf

    module = tf.Module()
    module.model = model
    module.serve = tf.function(lambda x: model(x, training=False), input_signature=[_spec(batch)])
    with _layer_traces(flavor, traces):
        tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
    return _from_saved_model(folder)


def _via_export(model: Any, flavor: str, batch: int | None, folder: str, traces: bool) -> tuple[bytes, str]:
    # Keras 3 takes the signature; tf_keras's export has no such argument and uses the model's
    # input shape (its batch included).
    options = {"verbose": False, "input_signature": [_spec(batch)]} if flavor == "keras3" else {}
    with contextlib.redirect_stdout(io.StringIO()):  # tf_keras prints the endpoint it wrote
        model.export(folder, **options)
    return _from_saved_model(folder)


def _via_keras_file(model: Any, flavor: str, batch: int | None, folder: str, traces: bool) -> tuple[bytes, str]:
    from numlite.cli.main import main

    os.makedirs(folder, exist_ok=True)
    path, output = os.path.join(folder, "model.keras"), os.path.join(folder, "model.tflite")
    model.save(path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["convert", path, "-o", output])
    if code != 0:
        raise RuntimeError(f"numlite convert exited with {code}: {err.getvalue().strip()}")
    with open(output, "rb") as f:
        return f.read(), out.getvalue()


PATHS: dict[str, Path] = {
    "from_keras_model": Path(_via_keras_model),
    "from_concrete_functions": Path(_via_concrete_function),
    "model.save": Path(_via_model_save, flavors=("tf_keras",)),  # Keras 3 saves .keras files only
    "tf.saved_model.save": Path(_via_tf_saved_model_save),
    "tf.Module": Path(_via_module),
    "model.export": Path(_via_export),
    ".keras (CLI)": Path(_via_keras_file),
}


# ----------------------------------------------------------------------------- one conversion


@dataclass
class Outcome:
    """What became of one model on one path: the ops it converted to, whether both runtimes
    matched Keras, or the error."""

    ops: dict[str, int] = field(default_factory=dict)
    report: str = ""
    file: str | None = None  # where the converted model was written
    error: str | None = None  # conversion failed
    mismatch: str | None = None  # converted, but a runtime's outputs differ from Keras's

    @property
    def loops(self) -> int:
        return self.ops.get("WHILE", 0)

    def status(self, lstms: int, bidis: int) -> str:
        """fused / loop / wrong / error (``lstms`` and ``bidis``: the fused ops expected)."""
        if self.error:
            return "error"
        if self.mismatch:
            return "wrong"
        if self.loops:
            return "loop"
        return "fused" if (self.ops.get(LSTM, 0), self.ops.get(BIDI, 0)) == (lstms, bidis) else "other"


def op_counts(data: bytes) -> dict[str, int]:
    from numlite.model import read_model

    model = read_model(data)
    counts: dict[str, int] = {}
    for _, _, op in model.iter_operators():
        counts[model.op_name(op)] = counts.get(model.op_name(op), 0) + 1
    return counts


def run_signature(interpreter: Any, xs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The ``serving_default`` runner (the only signature) called on each input in turn."""
    runner = interpreter.get_signature_runner()
    (name,) = runner.get_input_details()
    return [{k: np.array(v) for k, v in runner(**{name: x}).items()} for x in xs]


def compare(data: bytes, expected: list[dict[str, np.ndarray]], xs: list[np.ndarray], tolerance: float = 1e-5,
            compiled: bool = False) -> str | None:
    """None when LiteRT and numlite both give Keras's outputs (LSTM outputs and states are of
    order one, so the tolerance is absolute and relative alike), else what differs. With
    ``compiled``, numlite's compiled engine too (``jit=True``), which must compile every subgraph."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    import numlite

    runtimes = [("LiteRT", LiteRT(model_content=data)), ("numlite", numlite.Interpreter(model_content=data, jit=False))]
    if compiled:
        runtimes.append(("numlite compiled", numlite.Interpreter(model_content=data, jit=True)))
    for runtime, interpreter in runtimes:
        got = run_signature(interpreter, xs)
        if runtime == "numlite compiled":
            left = {k: v.get("reason") for k, v in interpreter.jit_report()["subgraphs"].items() if not v["compiled"]}
            if left:
                return f"{runtime}: subgraphs left on NumPy: {left}"
        for call, (g, e) in enumerate(zip(got, expected)):
            if sorted(g) != sorted(e):
                return f"{runtime}: outputs {sorted(g)}, Keras's {sorted(e)}"
            for key in e:
                if g[key].shape != e[key].shape or not np.allclose(g[key], e[key], rtol=tolerance, atol=tolerance):
                    worst = np.max(np.abs(g[key] - e[key])) if g[key].shape == e[key].shape else g[key].shape
                    return f"{runtime}: output {key!r} of call {call} differs from Keras's (by {worst})"
    return None


def convert_and_check(flavor: str, names: tuple[str, ...], path: str, batch: int | None, folder: str,
                      model: Any = None, traces: bool = True, compiled: bool = False) -> Outcome:
    """Build the model of ``names`` (or take ``model``, built so), take it down ``path``, run
    the result against Keras (with ``compiled``, on numlite's compiled engine too)."""
    model = model or build_model(flavor, names, batch)
    stateful = any(CASES[n].stateful for n in names)
    xs = inputs_for(batch, stateful)
    expected = keras_outputs(model, xs)
    outcome = Outcome()
    try:
        data, outcome.report = PATHS[path].convert(model, flavor, batch, folder, traces)
    except Exception as e:  # noqa: BLE001 (the matrix records every failure)
        outcome.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        return outcome
    outcome.ops = op_counts(data)
    os.makedirs(folder, exist_ok=True)
    outcome.file = os.path.join(folder, "converted.tflite")
    with open(outcome.file, "wb") as f:
        f.write(data)
    try:
        outcome.mismatch = compare(data, expected, xs, compiled=compiled)
    except Exception as e:  # noqa: BLE001
        outcome.mismatch = f"{type(e).__name__}: {e}"
    return outcome


# ----------------------------------------------------------------------------- the table


def _batch_label(batch: int | None) -> str:
    return "None" if batch is None else str(batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flavors", default=",".join(FLAVORS))
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--batches", default="1,2,None")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", metavar="PATH", help="also write every cell (ops, report, errors) as JSON")
    args = parser.parse_args(argv)
    flavors, paths, cases = args.flavors.split(","), args.paths.split(","), args.cases.split(",")
    batches = [None if b == "None" else int(b) for b in args.batches.split(",")]
    columns = [(p, b) for p in paths for b in batches]
    cells: list[dict[str, Any]] = []
    start = time.perf_counter()
    print("| flavor | case | " + " | ".join(f"{p} / {_batch_label(b)}" for p, b in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    with tempfile.TemporaryDirectory() as tmp:
        for flavor in flavors:
            for name in cases:
                case, row = CASES[name], []
                for path, batch in columns:
                    if not applies(case, flavor, path, batch):
                        row.append("n/a")
                        continue
                    folder = os.path.join(tmp, f"{flavor}-{name}-{len(cells)}")
                    outcome = convert_and_check(flavor, (name,), path, batch, folder)
                    status = outcome.status(case.lstms, case.bidis)
                    row.append(status)
                    cells.append({"flavor": flavor, "case": name, "path": path, "batch": batch, "status": status,
                                  "ops": outcome.ops, "error": outcome.error, "mismatch": outcome.mismatch,
                                  "report": outcome.report})
                print(f"| {flavor} | {name} | " + " | ".join(row) + " |", flush=True)
    totals: dict[str, int] = {}
    for cell in cells:
        totals[cell["status"]] = totals.get(cell["status"], 0) + 1
    print(f"\n{len(cells)} cells in {time.perf_counter() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
