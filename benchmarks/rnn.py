"""Latency of Keras 3 recurrent models: numlite's fused conversion against the official one.

    python benchmarks/rnn.py [--models lstm,bilstm,lstm_batch8] [--runs N] [--warmup N] [--threads N]
                             [--json out.json]

Each Keras model (random weights, seed 0) is converted twice: by numlite
(``numlite.TFLiteConverter.from_keras_model``: one UNIDIRECTIONAL_SEQUENCE_LSTM or
BIDIRECTIONAL_SEQUENCE_LSTM per layer) and by the official ``tf.lite.TFLiteConverter`` (Keras
3's LSTM stays a WHILE loop there). Then, on one seeded input and in one process, four
interpreter/model pairs are timed, their invokes interleaved (the order rotates every run):
LiteRT on the official model (the baseline), LiteRT on numlite's model, numlite on numlite's
model and numlite on the official model. Reported: median invoke times, each as a ratio to the
baseline, operator counts and the largest difference from Keras. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

import numlite
from numlite.model import read_model

STEPS, FEATURES = 20, 16


def _sequential(batch: int, *layers: Callable[[Any], Any]) -> Callable[[], Any]:
    def build() -> Any:
        import keras

        keras.utils.set_random_seed(0)
        return keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=batch), *[make(keras) for make in layers]])

    return build


MODELS: dict[str, tuple[str, Callable[[], Any]]] = {
    "lstm": ("1x20x16 → LSTM 32 → Dense 10 (benchmarks/convert.py's model)",
             _sequential(1, lambda k: k.layers.LSTM(32), lambda k: k.layers.Dense(10))),
    "bilstm": ("1x20x16 → Bidirectional(LSTM 32) → Dense 10",
               _sequential(1, lambda k: k.layers.Bidirectional(k.layers.LSTM(32)), lambda k: k.layers.Dense(10))),
    "lstm_batch8": ("8x20x16 → LSTM 64 (sequences) → LSTM 32 → Dense 10",
                    _sequential(8, lambda k: k.layers.LSTM(64, return_sequences=True), lambda k: k.layers.LSTM(32),
                                lambda k: k.layers.Dense(10))),
}
DEFAULT_MODELS = ",".join(MODELS)


def convert_both(build: Callable[[], Any]) -> tuple[Any, bytes, bytes]:
    """The Keras model, numlite's conversion and the official one."""
    import tensorflow as tf

    model = build()
    ours = numlite.TFLiteConverter.from_keras_model(model).convert()
    with contextlib.redirect_stdout(sys.stderr):  # the official exporter prints
        official = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    return model, ours, official


def _ops(data: bytes) -> dict[str, int]:
    m = read_model(data)
    counts: dict[str, int] = {}
    for _, _, op in m.iter_operators():
        counts[m.op_name(op)] = counts.get(m.op_name(op), 0) + 1
    return counts


def _interpreters(ours: bytes, official: bytes, threads: int) -> dict[str, Any]:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    return {
        "LiteRT official": LiteRT(model_content=official, num_threads=threads),
        "LiteRT numlite": LiteRT(model_content=ours, num_threads=threads),
        "numlite numlite": numlite.Interpreter(model_content=ours, jit=False),
        "numlite official": numlite.Interpreter(model_content=official, jit=False),
    }


def _prepare(interpreter: Any, x: np.ndarray) -> Callable[[], np.ndarray]:
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    out = interpreter.get_output_details()[0]["index"]

    def run() -> np.ndarray:
        interpreter.invoke()
        return interpreter.get_tensor(out)

    return run


def benchmark(name: str, runs: int, warmup: int, threads: int, seed: int) -> dict[str, Any]:
    model, ours, official = convert_both(MODELS[name][1])
    x = np.random.default_rng(seed).uniform(-1, 1, tuple(model.inputs[0].shape)).astype(np.float32)
    expected = np.asarray(model(x, training=False))
    runners = {key: _prepare(it, x) for key, it in _interpreters(ours, official, threads).items()}
    diffs = {}
    for key, run in runners.items():
        for _ in range(max(warmup, 1)):
            result = run()
        diffs[key] = float(np.max(np.abs(result - expected)))
    times: dict[str, list[float]] = {key: [] for key in runners}
    keys = list(runners)
    for r in range(runs):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            start = time.perf_counter()
            runners[key]()
            times[key].append((time.perf_counter() - start) * 1e3)
    medians = {key: statistics.median(v) for key, v in times.items()}
    base = medians["LiteRT official"]
    return {"model": name, "numlite_ops": _ops(ours), "official_ops": _ops(official), "ms": medians,
            "ratio": {key: v / base for key, v in medians.items()}, "max_abs_diff_vs_keras": diffs, "runs": times}


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| model | numlite ops | official ops | LiteRT, official model (ms) | LiteRT, numlite model | "
            "numlite, numlite model | numlite, official model | max abs diff vs Keras | note |")
    lines = [head, "|" + "---|" * 9]
    for row in rows:
        ms, ratio = row["ms"], row["ratio"]

        def cell(key: str) -> str:
            return f"{ms[key]:.3f} ms ({ratio[key]:.2f}x)"

        diffs = row["max_abs_diff_vs_keras"]
        wrong = [key for key, d in diffs.items() if d > 1e-4]
        note = "; ".join(f"{key}: off by {diffs[key]:.2g} after repeated invokes" for key in wrong)
        lines.append(f"| {row['model']} | {sum(row['numlite_ops'].values())} | {sum(row['official_ops'].values())} | "
                     f"{ms['LiteRT official']:.3f} | {cell('LiteRT numlite')} | {cell('numlite numlite')} | "
                     f"{cell('numlite official')} | {max(d for k, d in diffs.items() if k not in wrong):.1e} "
                     f"| {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="LiteRT's num_threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    rows = []
    for name in names:
        print(f"# {name}: {MODELS[name][0]}", file=sys.stderr)
        rows.append(benchmark(name, args.runs, args.warmup, args.threads, args.seed))
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
