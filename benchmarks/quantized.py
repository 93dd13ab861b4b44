"""Quantized models: numlite's quantized files against the official converter's, and numlite's
interpreter against LiteRT on them.

    python benchmarks/quantized.py [--models mlp,smallcnn,mobilenetv2,lstm] [--forms dynamic,float16,int8]
                                   [--runs N] [--warmup N] [--threads N] [--json PATH]

Each model is built with Keras (seeded random weights) and converted twice per form, by
``numlite.TFLiteConverter`` and by ``tf.lite.TFLiteConverter`` with the same settings
(``dynamic``: ``Optimize.DEFAULT``; ``float16``: plus ``supported_types=[float16]``; ``int8``:
plus a seeded representative dataset, ``TFLITE_BUILTINS_INT8`` and int8 inputs/outputs). Columns:
file sizes and their ratio; median ``invoke()`` times, interleaved after warm-up, of LiteRT
(default delegate, ``--threads`` threads) on the official file and on numlite's file and of
numlite on numlite's file; the latency ratio numlite/LiteRT on the same (numlite's) file; the
largest difference between the two interpreters' outputs on that file (in output quanta for
int8). Nothing is asserted: tests/test_convert_quantize*.py and tests/test_quantized_models.py
check correctness.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

import numlite

FORMS = ("dynamic", "float16", "int8")


# -- models ------------------------------------------------------------------------------------


def _mlp() -> Any:
    import keras

    return keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                             keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])


def _smallcnn() -> Any:
    import keras

    L = keras.layers
    return keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(16, 3, activation="relu"), L.MaxPooling2D(),
                             L.Conv2D(32, 3, activation="relu"), L.DepthwiseConv2D(3, activation="relu6"),
                             L.Conv2D(64, 1, activation="relu"), L.GlobalAveragePooling2D(), L.Dense(10)])


def _mobilenetv2() -> Any:
    import keras

    return keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10,
                                          classifier_activation=None)


def _lstm() -> Any:
    import keras

    return keras.Sequential([keras.Input((20, 16), batch_size=1), keras.layers.LSTM(64),
                             keras.layers.Dense(10)])


MODELS: dict[str, Callable[[], Any]] = {"mlp": _mlp, "smallcnn": _smallcnn, "mobilenetv2": _mobilenetv2,
                                        "lstm": _lstm}


def build(name: str) -> Any:
    """The model with seeded weights scaled by fan-in (activations of order one throughout)."""
    import keras

    keras.utils.set_random_seed(0)
    model = MODELS[name]()
    rng = np.random.default_rng(0)
    for v in model.weights:
        shape, path = tuple(v.shape), v.path
        if "moving_variance" in path or "gamma" in path:  # batch norm: positive, near 1
            value = rng.uniform(0.5, 1.5, shape)
        elif len(shape) == 1:  # biases, betas, means
            value = rng.uniform(-0.1, 0.1, shape)
        else:
            value = rng.uniform(-1, 1, shape) * np.sqrt(3.0 / int(np.prod(shape[:-1])))
        v.assign(value.astype(np.float32))
    return model


def _batch(model: Any) -> int:
    return model.inputs[0].shape[0] or 1


def sample(model: Any, seed: int) -> np.ndarray:
    shape = (_batch(model), *model.inputs[0].shape[1:])
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _configure(converter: Any, form: str, model: Any) -> None:
    import tensorflow as tf

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if form == "float16":
        converter.target_spec.supported_types = [tf.float16]
    elif form == "int8":
        converter.representative_dataset = lambda: ([sample(model, 100 + k)] for k in range(8))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8


def convert_both(name: str, model: Any, form: str) -> tuple[bytes | str, bytes | str]:
    """(numlite's file or its error, the official file or the official converter's error)."""
    ours = numlite.TFLiteConverter.from_keras_model(model)
    _configure(ours, form, model)
    try:
        mine: bytes | str = ours.convert()
    except numlite.ConversionError as e:
        mine = str(e).splitlines()[0][:160]
    return mine, official_model(name, form)


def official_model(name: str, form: str) -> bytes | str:
    """The official converter's file, converted in a child process (the model is rebuilt there
    from the same seed): the converter crashes its process on some models (a segmentation fault
    on a Keras 3 LSTM in full integer, TF 2.21)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "official.tflite")
        child = subprocess.run([sys.executable, __file__, "--official-child", name, form, path],
                               capture_output=True, text=True)
        if child.returncode != 0:
            return f"the official converter crashed (exit code {child.returncode})"
        with open(path, "rb") as f:
            data = f.read()
    return data.decode()[len("error: "):] if data.startswith(b"error: ") else data


def official_child(name: str, form: str, path: str) -> None:
    import tensorflow as tf

    model = build(name)
    official = tf.lite.TFLiteConverter.from_keras_model(model)
    _configure(official, form, model)
    try:
        data = official.convert()
    except Exception as e:  # noqa: BLE001 - reported in the table
        data = ("error: " + str(e).splitlines()[0][:80]).encode()
    with open(path, "wb") as f:
        f.write(data)


# -- timing ------------------------------------------------------------------------------------


def _runner(interpreter: Any, x: np.ndarray) -> Callable[[], None]:
    interpreter.allocate_tensors()
    detail = interpreter.get_input_details()[0]
    if detail["dtype"] == np.int8:
        scale, zero = detail["quantization"]
        x = np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)
    interpreter.set_tensor(detail["index"], x)
    return interpreter.invoke


def _output(interpreter: Any) -> np.ndarray:
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def measure(name: str, form: str, runs: int, warmup: int, threads: int) -> dict[str, Any]:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    model = build(name)
    ours, theirs = convert_both(name, model, form)
    if isinstance(ours, str):
        return {"model": name, "form": form, "numlite_bytes": None, "ms": {}, "note": f"numlite converter: {ours}",
                "official_bytes": len(theirs) if isinstance(theirs, bytes) else None, "ratio": None,
                "official_error": None if isinstance(theirs, bytes) else theirs, "max_diff": None, "diff_unit": "abs"}
    x = sample(model, 1)
    interpreters = {"litert_numlite_file": LiteRT(model_content=ours, num_threads=threads),
                    "numlite": numlite.Interpreter(model_content=ours, jit=False)}
    if isinstance(theirs, bytes):
        interpreters["litert_official_file"] = LiteRT(model_content=theirs, num_threads=threads)
    calls, failure = {}, None
    for k, it in interpreters.items():
        try:
            calls[k] = _runner(it, x)
        except numlite.NumliteError as e:  # a kernel numlite lacks: reported in the table
            failure = f"numlite: {str(e).splitlines()[0][:120]}"
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(warmup):
        for call in calls.values():
            call()
    order = list(calls)
    for r in range(runs):
        for k in (order if r % 2 == 0 else order[::-1]):
            start = time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - start)
    medians = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    row = {"model": name, "form": form, "numlite_bytes": len(ours),
           "official_bytes": len(theirs) if isinstance(theirs, bytes) else None,
           "official_error": None if isinstance(theirs, bytes) else theirs, "ms": medians, "note": failure,
           "ratio": None, "max_diff": None, "diff_unit": "abs"}
    if "numlite" in calls:
        a, b = _output(interpreters["numlite"]), _output(interpreters["litert_numlite_file"])
        row.update(ratio=medians["numlite"] / medians["litert_numlite_file"], diff_unit="quanta" if a.dtype == np.int8
                   else "abs", max_diff=float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| model | form | numlite size | official size | size ratio | LiteRT, official file (ms) | "
            "LiteRT, numlite file (ms) | numlite, numlite file (ms) | numlite/LiteRT | max diff | note |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ms = r["ms"]
        official = r["official_bytes"]
        lines.append("| " + " | ".join([
            r["model"], r["form"], f"{r['numlite_bytes'] / 1024:.1f} KiB" if r["numlite_bytes"] else "-",
            f"{official / 1024:.1f} KiB" if official else "-",
            f"{r['numlite_bytes'] / official:.3f}" if official and r["numlite_bytes"] else "-",
            f"{ms['litert_official_file']:.3f}" if "litert_official_file" in ms else "-",
            f"{ms['litert_numlite_file']:.3f}" if "litert_numlite_file" in ms else "-", f"{ms['numlite']:.3f}" if "numlite" in ms else "-",
            f"{r['ratio']:.2f}x" if r["ratio"] else "-",
            "-" if r["max_diff"] is None else f"{r['max_diff']:.3g}" + (" quanta" if r["diff_unit"] == "quanta" else ""),
            "; ".join(filter(None, [r["note"], r["official_error"] and f"official converter failed: {r['official_error']}"]))])
            + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    parser.add_argument("--official-child", nargs=3, metavar=("MODEL", "FORM", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.official_child:
        official_child(*args.official_child)
        return 0
    rows = []
    for name in args.models.split(","):
        for form in args.forms.split(","):
            print(f"{name} {form} ...", file=sys.stderr, flush=True)
            rows.append(measure(name, form, args.runs, args.warmup, args.threads))
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
