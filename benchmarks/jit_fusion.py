"""Time numlite's compiled engine with and without epilogue fusion (numlite/jit/fusion.py,
docs/jit.md "Epilogues") against LiteRT, in one process.

    python benchmarks/jit_fusion.py [--models efficientnetb0,...] [--threads 1] [--runs N]

For each model (``jit_cnn.py``'s, converted by the official converter and cached), three
interpreters alternate invokes on one input: LiteRT (XNNPACK), the compiled engine as it runs
by default (activation chains fused into their CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED)
and the compiled engine with fusion turned off (its own cache folder, so it compiles its own
module). Prints medians in microseconds, the ratios, the number of nodes fused and the largest
difference of each engine's outputs from LiteRT's. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import jit_cnn  # noqa: E402  (its models)
import run as whole_models  # noqa: E402

import numlite  # noqa: E402


def _compiled(path: str, threads: int, fuse: bool) -> Any:
    from numlite.jit import fusion

    saved_find, saved_cache = fusion.find, os.environ.get("NUMLITE_CACHE_DIR")
    try:
        if not fuse:
            fusion.find = lambda runtime: {}
            os.environ["NUMLITE_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "numlite-jit-unfused")
        interpreter = numlite.Interpreter(model_path=path, num_threads=threads, jit=True)
        interpreter.allocate_tensors()
    finally:
        fusion.find = saved_find
        if saved_cache is None:
            os.environ.pop("NUMLITE_CACHE_DIR", None)
        else:
            os.environ["NUMLITE_CACHE_DIR"] = saved_cache
    report = interpreter.jit_report()["subgraphs"][0]
    if not report["compiled"]:
        raise SystemExit(f"{path}: not compiled: {report.get('reason')}")
    return interpreter


def benchmark(name: str, path: str, threads: int, runs: int, warmup: int) -> str:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    interpreters = {"litert": LiteRT(model_path=path, num_threads=threads)}
    interpreters["litert"].allocate_tensors()
    interpreters["fused"] = _compiled(path, threads, True)
    interpreters["unfused"] = _compiled(path, threads, False)
    fused_nodes = interpreters["fused"]._jit.engines[0].source.count("'s epilogue")
    inputs = whole_models.seeded_inputs(interpreters["fused"].get_input_details(), 0)
    for it in interpreters.values():
        for d, value in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], value)
        for _ in range(warmup):
            it.invoke()
    times: dict[str, list[float]] = {key: [] for key in interpreters}
    order = list(interpreters.items())
    for r in range(runs):
        for key, it in order[r % len(order):] + order[: r % len(order)]:
            times[key].append(whole_models._timed(it.invoke) * 1e3)
    us = {key: statistics.median(values) for key, values in times.items()}
    litert = interpreters["litert"]
    expected = [litert.get_tensor(d["index"]) for d in litert.get_output_details()]

    def diff(key: str) -> float:
        it = interpreters[key]
        return max(float(np.max(np.abs(it.get_tensor(d["index"]) - e))) for d, e in zip(it.get_output_details(), expected))

    return (f"| {name} | {threads} | {fused_nodes} | {us['litert']:.0f} | {us['fused']:.0f} | {us['unfused']:.0f} "
            f"| {us['fused'] / us['litert']:.2f}x | {us['unfused'] / us['litert']:.2f}x | {us['fused'] / us['unfused']:.3f} "
            f"| {diff('fused'):.1e} | {diff('unfused'):.1e} |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="efficientnetb0", help=f"comma-separated, of {','.join(jit_cnn.MODELS)}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--cache-dir", default=whole_models.DEFAULT_CACHE)
    args = parser.parse_args(argv)
    print("| model | threads | nodes fused | LiteRT µs | fused µs | unfused µs | fused / LiteRT | unfused / LiteRT"
          " | fused / unfused | fused max diff | unfused max diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.models.split(","):
        path = jit_cnn.MODELS[name](args.cache_dir)
        print(benchmark(name, path, args.threads, args.runs, args.warmup), flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
