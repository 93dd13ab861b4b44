"""Compare numlite's converter with the official one on whole Keras models and control flow.

    python benchmarks/convert.py [--models mobilenetv2,resnet50,efficientnetb0,mlp,smallcnn,lstm,cf_...]
                                 [--runs N] [--json PATH]

Each Keras model is built once (random weights, seed 0, batch-norm statistics calibrated on
random images as the conversion tests do), then converted ``--runs`` times by each converter,
``numlite.TFLiteConverter.from_keras_model(model).convert()`` against
``tf.lite.TFLiteConverter.from_keras_model(model).convert()``, the two alternating. The
control-flow models are ``benchmarks/control_flow.py``'s functions (a loop, a matrix loop, a
loop with a cond and an inner loop, a cond), traced and converted from their concrete function
by each converter in the same way. The SavedModel rows are folders written once (a Keras 3
``model.export``, signatures ``serve`` and ``serving_default``; a tf_keras ``model.save``, which
holds every layer's call traces), converted by each converter's ``from_saved_model``.
Reported: the median conversion time (tracing the model included, for both), the file size and
the operator count of the result, and the ratios numlite/official, as a Markdown table and as
JSON (see benchmarks/README.md). A converter that fails gets its error in the row. The script
exits with status 1, naming each model and both counts, where numlite's converter made more
operators than the official one, its LSTM state writes not counted (:func:`state_writes`;
tests/test_convert_models.py checks that, and the results against TensorFlow, on these same
models).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# benchmarks/run.py, for its Keras applications and report helpers, and control_flow.py, for its
# control-flow functions (imported after the path is set).
import control_flow  # noqa: E402
import run as whole_models  # noqa: E402

import numlite  # noqa: E402
from numlite.model import read_model  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "convert_results.json")

# ----------------------------------------------------------------------------- models


def calibrate_batch_norm(model: Any, images: np.ndarray) -> Any:
    """Set every batch-norm layer's moving statistics to those of ``images`` (one training-mode
    pass with momentum 0). Fresh statistics leave a deep random network's activations shrinking
    layer after layer (MobileNetV2's logits are about 1e-11); calibrated ones keep them of order
    one, so that comparing outputs means something."""
    import tensorflow as tf

    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            layer.momentum = 0.0
    model(images.astype(np.float32), training=True)
    return model


def _calibrated(build: Callable[[], Any], batch: int = 4) -> Callable[[], Any]:
    def calibrated_build() -> Any:
        import tensorflow as tf

        tf.keras.utils.set_random_seed(0)
        model = build()
        shape = (batch,) + tuple(model.inputs[0].shape[1:])
        return calibrate_batch_norm(model, np.random.default_rng(1).uniform(-1, 1, shape))

    return calibrated_build


def _mlp() -> Any:
    import tensorflow as tf

    return tf.keras.Sequential([
        tf.keras.Input((64,)),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(128, activation="tanh"),
        tf.keras.layers.Dense(64, activation="relu6"),
        tf.keras.layers.Dense(10),
    ])  # fmt: skip


def _small_cnn() -> Any:
    """Conv, depthwise and strided conv, each with batch norm and an activation; max and
    global average pooling; a dense head."""
    import tensorflow as tf

    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        layers.Conv2D(16, 3, padding="same"),
        layers.BatchNormalization(),
        layers.ReLU(),
        layers.MaxPooling2D(),
        layers.DepthwiseConv2D(3, padding="same"),
        layers.BatchNormalization(),
        layers.Activation("relu6"),
        layers.Conv2D(32, 3, strides=2),
        layers.BatchNormalization(),
        layers.ReLU(),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10),
    ])  # fmt: skip


def _lstm() -> Any:
    """Keras LSTM over 20 steps of 16 features, then a dense head. The batch is fixed (1): the
    official converter cannot convert a Keras 3 RNN whose batch is dynamic."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((20, 16), batch_size=1),
        tf.keras.layers.LSTM(32),
        tf.keras.layers.Dense(10),
    ])  # fmt: skip


def _with_random_biases(build: Callable[[], Any]) -> Callable[[], Any]:
    """The model with every bias drawn from [-1, 1] (Keras starts them at zero), seeded: its
    outputs stay of order one whatever scale its first layer applies."""

    def biased_build() -> Any:
        import tensorflow as tf

        tf.keras.utils.set_random_seed(0)
        model = build()
        rng = np.random.default_rng(2)
        for layer in model.layers:
            if getattr(layer, "bias", None) is not None:
                layer.bias.assign(rng.uniform(-1, 1, layer.bias.shape).astype(np.float32))
        return model

    return biased_build


def _cnn_temperature() -> Any:
    """The reported small CNN: three conv and max-pooling stages, global average pooling, a
    dense layer whose logits are divided by a temperature of 0.25, softmax (numlite made one
    DIV more than the official converter, which folds it into the dense layer's weights)."""
    import tensorflow as tf

    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        layers.Conv2D(16, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10),
        layers.Lambda(lambda logits: logits / 0.25),
        layers.Softmax(),
    ])  # fmt: skip


def _rescaled_cnn() -> Any:
    """Keras' Rescaling(1/255) in front of a convolution, which the official converter folds into
    the convolution's weights; two convolutions, global average pooling, a dense head."""
    import tensorflow as tf

    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        layers.Rescaling(1 / 255.0),
        layers.Conv2D(16, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10),
    ])  # fmt: skip


def _converge(x: Any) -> Any:
    """The reported loop: ``x = x * 0.5 + 1`` until it stops changing, at most 100 times (numlite
    copied ``x`` into ``prev`` on every iteration: 12 operators, the official converter 11)."""
    import tensorflow as tf

    return tf.while_loop(lambda x, prev: tf.abs(x - prev) > 1e-6, lambda x, prev: (x * 0.5 + 1, x),
                         (x * 0.5 + 1, x), maximum_iterations=100)[0]


def _iterate_ten_times(x: Any) -> Any:
    """A loop whose condition is ``True``, bounded by ``maximum_iterations`` (numlite kept the
    ``and True``: 6 operators, the official converter 5)."""
    import tensorflow as tf

    return tf.while_loop(lambda x: True, lambda x: [x * 0.5 + 1], [x], maximum_iterations=10)


def _scalar_loop(fn: Callable[[Any], Any]) -> Callable[[], tuple[Callable[..., Any], list[Any]]]:
    def build() -> tuple[Callable[..., Any], list[Any]]:
        import tensorflow as tf

        return fn, [tf.TensorSpec((), tf.float32, name="x")]

    return build


@dataclass
class SavedModelFolder:
    """A Keras model written as a SavedModel into a temporary folder, which lives as long as
    this object does."""

    keras: Any
    folder: tempfile.TemporaryDirectory

    @property
    def path(self) -> str:
        return self.folder.name


def _saved(build: Callable[[], Any], save: Callable[[Any, str], None]) -> Callable[[], SavedModelFolder]:
    def saved_build() -> SavedModelFolder:
        model = build()
        folder = tempfile.TemporaryDirectory(prefix="numlite_convert_")
        with contextlib.redirect_stdout(sys.stderr):  # exporters print; keep stdout for the table
            save(model, folder.name)
        return SavedModelFolder(model, folder)

    return saved_build


def _export(model: Any, folder: str) -> None:
    """Keras 3's ``model.export``: endpoints ``serve`` and ``serving_default``."""
    model.export(folder, verbose=False)


def _tf_keras_save(model: Any, folder: str) -> None:
    """tf_keras's ``model.save`` to a folder: a SavedModel holding every layer's call traces."""
    model.save(folder)


def _tf_keras_bidirectional_lstm() -> Any:
    """tf_keras Bidirectional LSTM 32 over 20 steps of 16 features, then a dense head."""
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    return tf_keras.Sequential([
        tf_keras.Input((20, 16), batch_size=1),
        tf_keras.layers.Bidirectional(tf_keras.layers.LSTM(32)),
        tf_keras.layers.Dense(10),
    ])  # fmt: skip


# The three applications are run.py's (224x224x3, logits: classifier_activation=None); a
# control-flow model is a (function, input specs) pair, converted from its concrete function.
KERAS_MODELS: dict[str, Callable[[], Any]] = {
    "mobilenetv2": _calibrated(whole_models.MODELS["mobilenetv2"]),
    "resnet50": _calibrated(whole_models.MODELS["resnet50"]),
    "efficientnetb0": _calibrated(whole_models.MODELS["efficientnetb0"]),
    "mlp": _calibrated(_mlp, batch=16),
    "smallcnn": _calibrated(_small_cnn, batch=16),
    "lstm": _lstm,
    "cnn_temperature": _with_random_biases(_cnn_temperature),
    "rescaled_cnn": _with_random_biases(_rescaled_cnn),
}
CONTROL_FLOW_MODELS = {
    **control_flow.MODELS,
    "cf_converge": _scalar_loop(_converge),
    "cf_constant_condition": _scalar_loop(_iterate_ten_times),
}
SAVED_MODELS: dict[str, Callable[[], SavedModelFolder]] = {
    "cnn_temperature_export": _saved(_with_random_biases(_cnn_temperature), _export),
    "bilstm_tf_keras_save": _saved(_tf_keras_bidirectional_lstm, _tf_keras_save),
}
MODELS: dict[str, Callable[[], Any]] = {**KERAS_MODELS, **CONTROL_FLOW_MODELS, **SAVED_MODELS}
DEFAULT_MODELS = ",".join(MODELS)

# ----------------------------------------------------------------------------- measuring


def _concrete(source: tuple[Callable[..., Any], list[Any]]) -> tuple[Any, Any]:
    """Trace a control-flow model's function: (concrete function, the tf.function)."""
    import tensorflow as tf

    fn, specs = source
    func = tf.function(fn, input_signature=specs, autograph=False)
    return func.get_concrete_function(), func


def convert_numlite(model: Any) -> bytes:
    if isinstance(model, tuple):
        concrete, func = _concrete(model)
        return numlite.TFLiteConverter.from_concrete_functions([concrete], func).convert()
    if isinstance(model, SavedModelFolder):
        return numlite.TFLiteConverter.from_saved_model(model.path).convert()
    return numlite.TFLiteConverter.from_keras_model(model).convert()


def convert_official(model: Any) -> bytes:
    import tensorflow as tf

    with contextlib.redirect_stdout(sys.stderr):  # the exporter prints; keep stdout for the table
        if isinstance(model, tuple):
            concrete, func = _concrete(model)
            return tf.lite.TFLiteConverter.from_concrete_functions([concrete], func).convert()
        if isinstance(model, SavedModelFolder):
            return tf.lite.TFLiteConverter.from_saved_model(model.path).convert()
        return tf.lite.TFLiteConverter.from_keras_model(model).convert()


CONVERTERS = {"numlite": convert_numlite, "official": convert_official}


def op_count(data: bytes) -> int:
    """Operators of every subgraph."""
    return sum(1 for _ in read_model(data).iter_operators())


def state_writes(data: bytes) -> int:
    """Operators that write a variable tensor: numlite sets an LSTM's state variables before the
    op at every invoke (FILL for zeros). The official converter's file sets them only when the
    interpreter allocates, so its second invoke starts where the first ended (docs/fusions.md)."""
    model = read_model(data)
    return sum(1 for sg in model.subgraphs for op in sg.operators
               if any(i >= 0 and sg.tensors[i].is_variable for i in op.outputs))


def _timed(convert: Callable[[Any], bytes], model: Any) -> tuple[bytes, float]:
    start = time.perf_counter()
    data = convert(model)
    return data, time.perf_counter() - start


def benchmark(name: str, model: Any, runs: int) -> dict[str, Any]:
    """Convert ``model`` ``runs`` times with each converter (alternating which goes first);
    a converter's error ends up in the row."""
    row: dict[str, Any] = {"model": name}
    times: dict[str, list[float]] = {who: [] for who in CONVERTERS}
    for r in range(runs):
        order = list(CONVERTERS) if r % 2 == 0 else list(CONVERTERS)[::-1]
        for who in order:
            if f"{who}_error" in row:
                continue
            try:
                data, seconds = _timed(CONVERTERS[who], model)
            except Exception as e:  # report, do not crash
                row[f"{who}_error"] = f"{type(e).__name__}: {whole_models._one_line(e, 300)}"
                continue
            times[who].append(seconds)
            row[f"{who}_bytes"], row[f"{who}_ops"] = len(data), op_count(data)
            row[f"{who}_state_writes"] = state_writes(data)
    for who, seconds in times.items():
        row[f"{who}_runs_s"] = seconds
        if seconds:
            row[f"{who}_s"] = statistics.median(seconds)
    for what in ("ops", "bytes", "s"):
        if row.get(f"numlite_{what}") is not None and row.get(f"official_{what}"):
            row[f"{what}_ratio"] = row[f"numlite_{what}"] / row[f"official_{what}"]
    return row


# ----------------------------------------------------------------------------- report

COLUMNS = [
    "model", "numlite ops", "official ops", "ops ratio", "numlite size", "official size", "size ratio",
    "numlite s", "official s", "time ratio", "note",
]  # fmt: skip


def _number(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] * len(COLUMNS)) + "|"]
    for r in rows:
        errors = [f"{who}: {r[f'{who}_error']}" for who in CONVERTERS if f"{who}_error" in r]
        note = "; ".join(errors) or r.get("error", "")
        if r.get("numlite_state_writes"):
            note = "; ".join(filter(None, [note, f"numlite's ops include {r['numlite_state_writes']} LSTM state writes"]))
        cells = [
            r["model"],
            _number(r.get("numlite_ops"), "d"),
            _number(r.get("official_ops"), "d"),
            _number(r.get("ops_ratio"), ".2f"),
            whole_models._size(r.get("numlite_bytes")),
            whole_models._size(r.get("official_bytes")),
            _number(r.get("bytes_ratio"), ".4f"),
            _number(r.get("numlite_s"), ".2f"),
            _number(r.get("official_s"), ".2f"),
            _number(r.get("s_ratio"), ".2f"),
            whole_models._one_line(Exception(note), 300) if note else "",
        ]
        lines.append("| " + " | ".join(whole_models._cell(c) for c in cells) + " |")
    return "\n".join(lines)


def more_operators_than_official(rows: list[dict[str, Any]]) -> list[str]:
    """One line for each row where numlite's converter made more operators than the official
    one, not counting its LSTM state writes (:func:`state_writes`), naming the model and both
    counts."""
    return [f"{r['model']}: numlite {r['numlite_ops']} operators, official {r['official_ops']}"
            for r in rows
            if r.get("numlite_ops") is not None and r.get("official_ops") is not None
            and r["numlite_ops"] - r.get("numlite_state_writes", 0) > r["official_ops"]]


def environment(runs: int) -> dict[str, Any]:
    import importlib.metadata

    import tensorflow as tf

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "numlite": numlite.__version__,
        "tensorflow": tf.__version__,
        "keras": importlib.metadata.version("keras") if whole_models._has_dist("keras") else None,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare numlite's converter with the official one on Keras models.")
    parser.add_argument(
        "--models", default=DEFAULT_MODELS, help=f"comma-separated, from {', '.join(MODELS)} (default: all)"
    )
    parser.add_argument("--runs", type=int, default=3, help="conversions per converter and model (default 3)")
    parser.add_argument(
        "--json", metavar="PATH", default=DEFAULT_JSON, help=f"where to write the results (default {DEFAULT_JSON})"
    )
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    rows = []
    for name in names:
        whole_models._log(f"{name}: building, then {args.runs} conversion(s) with each converter")
        try:
            with contextlib.redirect_stdout(sys.stderr):
                model = MODELS[name]()
        except Exception as e:  # a model Keras cannot build is a row, not a crash
            error = f"building failed: {type(e).__name__}: {whole_models._one_line(e, 200)}"
            rows.append({"model": name, "error": error})
            continue
        rows.append(benchmark(name, model, args.runs))

    env = environment(args.runs)
    print(
        f"numlite {env['numlite']} vs the official converter of TensorFlow {env['tensorflow']} on {env['cpu_count']}"
        f" CPU(s); conversion times are medians of {args.runs} run(s), tracing included; ratios are numlite/official.\n"
    )
    print(markdown(rows))
    with open(args.json, "w") as f:
        json.dump({"environment": env, "results": rows}, f, indent=2)
    whole_models._log(f"wrote {args.json}")
    excess = more_operators_than_official(rows)
    if excess:
        whole_models._log("FAILED: numlite's converter made more operators than the official converter on "
                          f"{len(excess)} model(s):\n  " + "\n  ".join(excess))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
