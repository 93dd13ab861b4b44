"""How much denormal inputs slow numlite down, with and without flushing, beside LiteRT.

    python benchmarks/denormals.py [--runs N]

One model of element-wise math that NumPy computes slowly on denormals (exp, sqrt, logistic,
division, a 256x256 matmul) on a 1x256x256 input, converted by the official converter. Each
interpreter runs it on a normal input (uniform in [-1, 1]) and on the same input scaled into
the denormal range (times 1e-39); the table gives the medians and the slowdown denormal/normal.
numlite runs with ``flush_denormals`` on (its default, as LiteRT's XNNPACK) and off.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

import numlite


def build() -> bytes:
    import tensorflow as tf

    w = np.random.default_rng(1).uniform(-1, 1, (256, 256)).astype(np.float32)

    def fn(x):
        y = tf.exp(x) + tf.sqrt(tf.abs(x)) + tf.sigmoid(x) + x / 3.0
        return tf.matmul(y[0], w)

    concrete = tf.function(fn, input_signature=[tf.TensorSpec([1, 256, 256], tf.float32)]).get_concrete_function()
    with contextlib.redirect_stdout(io.StringIO()):
        return tf.lite.TFLiteConverter.from_concrete_functions([concrete], fn).convert()


def median_ms(interpreter, x: np.ndarray, runs: int) -> float:
    interpreter.allocate_tensors()
    index = interpreter.get_input_details()[0]["index"]
    interpreter.set_tensor(index, x)
    interpreter.invoke()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    model = build()
    normal = np.random.default_rng(0).uniform(-1, 1, (1, 256, 256)).astype(np.float32)
    denormal = (normal * np.float32(1e-39)).astype(np.float32)
    interpreters = {
        "numlite (flush_denormals=True, default)": lambda: numlite.Interpreter(model_content=model, jit=False),
        "numlite (flush_denormals=False)": lambda: numlite.Interpreter(model_content=model, flush_denormals=False, jit=False),
        "LiteRT (default, XNNPACK)": lambda: LiteRT(model_content=model),
    }
    print("| interpreter | normal ms | denormal ms | slowdown |")
    print("|---|---|---|---|")
    for name, make in interpreters.items():
        a, b = median_ms(make(), normal, args.runs), median_ms(make(), denormal, args.runs)
        print(f"| {name} | {a:.3f} | {b:.3f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
