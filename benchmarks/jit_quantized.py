"""int8 models on numlite's compiled engine against LiteRT, in the same process.

    python benchmarks/jit_quantized.py [--models stream,mlp,smallcnn,mobilenetv2] [--tflite PATH ...]
                                       [--repeats N] [--seconds S]

Models: ``stream``, a keyword-spotting-style streaming model whose ring buffer of feature frames
is a tf.Variable (READ_VARIABLE / ASSIGN_VARIABLE, a CALL_ONCE initialiser), three dense layers;
``mlp``, ``smallcnn``, ``mobilenetv2``: the Keras models of benchmarks/quantized.py; all converted
by the official converter with full integer quantization (a representative dataset, int8 inputs
and outputs). ``--tflite`` adds files (a real wake-word model, for example). Per model: whether
numlite compiles it (else the reason), the median ``invoke()`` time of numlite's compiled engine,
LiteRT (1 thread, its default delegate) and numlite's NumPy engine, over ``--repeats`` rounds
that alternate between them (each round about ``--seconds`` per interpreter), the ratio
jit / LiteRT of the medians and of the best rounds (the machine's load moves the medians of
microsecond invokes most), and the time of the compiled interpreter's ``allocate_tensors()``
(the compile, or loading it from numlite's cache: ``NUMLITE_CACHE_DIR``). A streaming model
keeps its state across the rounds, in all three. Nothing is asserted: tests/test_jit_quantized.py checks that
the outputs are bit-exact.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

import numlite


def streaming_model() -> bytes:
    """A keyword-spotting-style streaming model: each invoke shifts a ring buffer of the last
    six feature frames (a tf.Variable) by the two new ones, then three dense layers over the
    buffer; full integer quantization by the official converter (the buffer stays float32
    between QUANTIZE and DEQUANTIZE, as the converter leaves resource variables)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)

    class Stream(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.frames = tf.Variable(np.zeros((1, 6, 20), np.float32))
            self.w1 = tf.constant(rng.uniform(-1, 1, (120, 32)).astype(np.float32) * 0.15)
            self.b1 = tf.constant(rng.uniform(-0.1, 0.1, (32,)).astype(np.float32))
            self.w2 = tf.constant(rng.uniform(-1, 1, (32, 16)).astype(np.float32) * 0.3)
            self.w3 = tf.constant(rng.uniform(-1, 1, (16, 1)).astype(np.float32) * 0.5)

        @tf.function(input_signature=[tf.TensorSpec((1, 2, 20), tf.float32)])
        def step(self, features):
            frames = tf.concat([self.frames[:, 2:, :], features], axis=1)
            self.frames.assign(frames)
            h = tf.nn.relu(tf.reshape(frames, (1, 120)) @ self.w1 + self.b1)
            h = tf.nn.relu6(h @ self.w2)
            return tf.sigmoid(h @ self.w3)

    module = Stream()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.step.get_concrete_function()], module)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([rng.uniform(-1, 1, (1, 2, 20)).astype(np.float32)] for _ in range(16))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


def keras_model(name: str) -> bytes:
    """A model of benchmarks/quantized.py, int8 by the official converter (in a child process)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import quantized

    data = quantized.official_model(name, "int8")
    if isinstance(data, str):
        raise RuntimeError(data)
    return data


def measure(name: str, data: bytes, repeats: int, seconds: float, threads: int = 1) -> dict[str, Any]:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    compiled = numlite.Interpreter(model_content=data, jit=True, num_threads=threads)
    started = time.perf_counter()
    compiled.allocate_tensors()
    allocate = time.perf_counter() - started
    report = compiled.jit_report()["subgraphs"][0]
    interpreters = {"jit": compiled, "litert": LiteRT(model_content=data, num_threads=threads),
                    "numpy": numlite.Interpreter(model_content=data, num_threads=threads, jit=False)}
    rng = np.random.default_rng(0)
    feeds = []
    for d in compiled.get_input_details():
        info = np.iinfo(d["dtype"]) if np.dtype(d["dtype"]).kind in "iu" else None
        shape = tuple(d["shape"])
        feeds.append(rng.integers(info.min, info.max + 1, shape).astype(d["dtype"]) if info else rng.standard_normal(shape).astype(d["dtype"]))
    calls = {}
    for key, it in interpreters.items():
        if key != "jit":
            it.allocate_tensors()
        for d, value in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], value)
        it.invoke()
        calls[key] = it.invoke
    counts = {}
    for key, call in calls.items():  # invokes per round: about `seconds`
        started = time.perf_counter()
        call()
        counts[key] = max(1, int(seconds / max(time.perf_counter() - started, 1e-7)))
    times: dict[str, list[float]] = {key: [] for key in calls}
    for r in range(repeats):
        order = list(calls)[r % len(calls):] + list(calls)[: r % len(calls)]
        for key in order:
            call, n = calls[key], counts[key]
            started = time.perf_counter()
            for _ in range(n):
                call()
            times[key].append((time.perf_counter() - started) / n * 1e6)
    medians = {key: statistics.median(v) for key, v in times.items()}
    best = {key: min(v) for key, v in times.items()}
    return {"model": name, "compiled": report["compiled"], "reason": report.get("reason"), "allocate_s": allocate,
            "us": medians, "ratio": medians["jit"] / medians["litert"], "best_ratio": best["jit"] / best["litert"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="stream,mlp,smallcnn,mobilenetv2")
    parser.add_argument("--tflite", nargs="*", default=[])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=0.05)
    parser.add_argument("--threads", default="1", help="comma-separated num_threads of all three interpreters, e.g. 1,2")
    args = parser.parse_args(argv)
    models = [(m, (streaming_model if m == "stream" else lambda m=m: keras_model(m))) for m in args.models.split(",") if m]
    models += [(os.path.basename(p), lambda p=p: open(p, "rb").read()) for p in args.tflite]
    print(f"{'model':<28} {'thr':>3} {'jit us':>9} {'LiteRT us':>10} {'NumPy us':>10} {'jit/LiteRT':>10} {'best ratio':>10} {'allocate s':>10}  compiled")
    for name, build in models:
        data = build()
        for threads in (int(t) for t in args.threads.split(",")):
            report(name, threads, measure(name, data, args.repeats, args.seconds, threads))


def report(name: str, threads: int, r: dict[str, Any]) -> None:
    us = r["us"]
    state = "yes" if r["compiled"] else f"no: {r['reason']}"
    print(f"{name:<28} {threads:>3} {us['jit']:>9.2f} {us['litert']:>10.2f} {us['numpy']:>10.2f} {r['ratio']:>10.2f} {r['best_ratio']:>10.2f} "
          f"{r['allocate_s']:>10.2f}  {state}", flush=True)


if __name__ == "__main__":
    main()
