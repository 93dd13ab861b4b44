"""Throughput of numlite.batch: examples per second over a dataset, against a plain loop.

    python benchmarks/batch.py [--models cnn,mobilenet_v2] [--examples N] [--batch-size N]
                               [--repeats N] [--no-ray] [--json out.json]

Each Keras model (random weights, seed 0) is converted by the official ``tf.lite.TFLiteConverter``
(batch dimension dynamic). Its examples (seeded, float32) are written as one stacked ``.npy`` per
64 examples in a temporary folder, the way ``numlite predict`` reads a dataset. Then, per model:

- ``loop``: one numlite Interpreter in this process, one invoke per example, arrays in memory
  (the baseline a user writes by hand);
- ``loop, batched``: the same interpreter resized to ``--batch-size`` examples per invoke;
- ``local`` with 1 and 2 workers (``workers=1`` runs in this process, 2 is a process pool) and
  ``ray`` with 1 and 2 actors on a local Ray instance, each through ``numlite.batch.predict`` on
  the files, batched.

Each configuration runs ``--repeats`` times, the configurations interleaved (on a machine shared
with other jobs, load comes and goes). Reported: examples/s over the whole call (pool or actor
start-up included), median and best of the repeats, and the median seconds until the first
chunk of results (start-up plus one chunk). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numlite  # noqa: E402
from numlite import batch  # noqa: E402


def _cnn() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(16, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax"),
    ])  # fmt: skip


def _mobilenet() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    return keras.applications.MobileNetV2(weights=None)


MODELS: dict[str, tuple[Callable[[], Any], int]] = {  # builder, default number of examples
    "cnn": (_cnn, 8192),
    "mobilenet_v2": (_mobilenet, 48),
}


def convert(build: Callable[[], Any]) -> bytes:
    import tensorflow as tf

    return tf.lite.TFLiteConverter.from_keras_model(build()).convert()


def loop(model: bytes, data: np.ndarray, rows: int) -> dict[str, float]:
    """A hand-written loop over one interpreter, ``rows`` examples per invoke."""
    it = numlite.Interpreter(model_content=model)
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    it.allocate_tensors()
    begin, first = time.perf_counter(), None
    for start in range(0, len(data), rows):
        x = data[start : start + rows]
        if tuple(it.get_input_details()[0]["shape"]) != x.shape:
            it.resize_tensor_input(inp, x.shape)
            it.allocate_tensors()
        it.set_tensor(inp, x)
        it.invoke()
        it.get_tensor(out)
        first = first or time.perf_counter()
    return _rates(len(data), begin, first, time.perf_counter())


def run_batch(model: bytes, folder: str, n: int, **options: Any) -> dict[str, float]:
    begin, first, count = time.perf_counter(), None, 0
    job = batch.plan(model, folder, **options)
    for chunk in job.results():
        count += len(chunk)
        assert all(r.ok for r in chunk), [r.error for r in chunk if not r.ok][:1]
        first = first or time.perf_counter()
    assert count == n
    return _rates(n, begin, first, time.perf_counter())


def _rates(n: int, begin: float, first: float | None, end: float) -> dict[str, float]:
    return {"examples_per_s": n / (end - begin), "first_result_s": (first or end) - begin}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--examples", type=int, default=None, help="examples per model (default: per model)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    if not args.no_ray:
        import ray

        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    for name in args.models.split(","):
        build, default_n = MODELS[name]
        n = args.examples or default_n
        model = convert(build)
        shape = tuple(numlite.Interpreter(model_content=model).get_input_details()[0]["shape"][1:])
        data = np.random.default_rng(0).uniform(-1, 1, (n, *shape)).astype(np.float32)
        with tempfile.TemporaryDirectory() as folder:
            for k, start in enumerate(range(0, n, 64)):
                np.save(os.path.join(folder, f"part{k:05d}.npy"), data[start : start + 64])
            runs: list[tuple[str, Callable[[], dict[str, float]]]] = [
                ("loop", lambda: loop(model, data, 1)),
                (f"loop, batch {args.batch_size}", lambda: loop(model, data, args.batch_size)),
            ]
            for backend in ["local"] + ([] if args.no_ray else ["ray"]):
                for workers in (1, 2):
                    runs.append((f"{backend}, {workers} worker{'s' if workers > 1 else ''}",
                                 lambda b=backend, w=workers: run_batch(
                                     model, folder, n, backend=b, workers=w, batch_size=args.batch_size)))
            measured: dict[str, list[dict[str, float]]] = {label: [] for label, _ in runs}
            for _ in range(args.repeats):
                for label, run in runs:
                    measured[label].append(run())
                    m = measured[label][-1]
                    print(f"{name:>13} {label:>18}: {m['examples_per_s']:8.1f} examples/s, first result "
                          f"{m['first_result_s']:6.2f} s", flush=True)
            for label, ms in measured.items():
                rates = [m["examples_per_s"] for m in ms]
                rows.append({
                    "model": name, "examples": n, "run": label, "runs": ms,
                    "median_examples_per_s": statistics.median(rates), "best_examples_per_s": max(rates),
                    "median_first_result_s": statistics.median(m["first_result_s"] for m in ms),
                })  # fmt: skip
    print()
    print("| model | examples | run | examples/s (median) | examples/s (best) | first results after (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['examples']} | {r['run']} | {r['median_examples_per_s']:.1f} | "
              f"{r['best_examples_per_s']:.1f} | {r['median_first_result_s']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.platform(), "cores": os.cpu_count(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
