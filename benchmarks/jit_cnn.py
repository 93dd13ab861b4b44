"""Time numlite's compiled engine (``Interpreter(jit=True)``, docs/jit.md) on float CNNs made
by the official converter, against LiteRT and numlite's NumPy engine, at a thread count.

    python benchmarks/jit_cnn.py [--models smallcnn,mobileblock,mobilenetv2,mlp] [--threads 1,2]
                                 [--runs N] [--warmup N] [--seed N] [--busy N] [--no-builtin]
                                 [--no-numpy]
                                 [--every-core-idle]

The models: ``run.py``'s ``smallcnn`` (three 3x3 CONV_2D + RELU, two MAX_POOL_2D, a global
average (MEAN), FULLY_CONNECTED, SOFTMAX on 32x32x3), ``mobileblock`` (a MobileNet-style
stack: CONV_2D, DEPTHWISE_CONV_2D with RELU6, 1x1 CONV_2D, MAX_POOL_2D, a strided depthwise,
AVERAGE_POOL_2D, FULLY_CONNECTED, SOFTMAX on 64x64x3) and ``run.py``'s ``mobilenetv2``
(Keras' MobileNetV2 at 224x224x3), and, not in the default list, ``run.py``'s ``mlp``
(784-512-256-10), ``resnet50`` and ``efficientnetb0``. Each is converted once and cached under
``benchmarks/.cache/`` (``run.py``'s cache). For each thread count, four interpreters run in
this one process on the same input: LiteRT with its default XNNPACK delegate, LiteRT's builtin
kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``), numlite's NumPy engine and numlite's compiled
engine, at every thread count of ``--threads`` (all of them alternate in one loop, so the
thread counts are compared in the same minutes); warm-up, then alternating timed invokes,
medians in microseconds.
``--busy N`` starts N processes that spin on a core each (``while True: pass``) before the
interpreters are made, and kills them when the timing ends: the machine shared with other jobs
(docs/jit.md, "Threads on a busy machine"). The load average is printed beside the table.
``--every-core-idle`` makes numlite take every core for idle, so it runs on ``num_threads``
whatever the load, as it did before ``numlite.kernels.parallel.threads_now``.
The table also gives the compiled engine's ``allocate_tensors()`` time (its compile, or its
load from the cache, ``NUMLITE_CACHE_DIR``) and the largest difference of its outputs from
LiteRT's. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Iterator, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import run as whole_models  # noqa: E402  (its model cache, builders and timing)

import numlite  # noqa: E402


def _mobileblock() -> Any:
    import tensorflow as tf

    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((64, 64, 3), batch_size=1),
        layers.Conv2D(16, 3, strides=2, padding="same", activation="relu6"),
        layers.DepthwiseConv2D(3, padding="same", activation="relu6"),
        layers.Conv2D(32, 1, activation="relu6"),
        layers.MaxPooling2D(),
        layers.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation="relu6"),
        layers.Conv2D(64, 1, activation="relu6"),
        layers.AveragePooling2D(4),
        layers.Flatten(),
        layers.Dense(10, activation="softmax"),
    ])  # fmt: skip


MODELS = {
    "smallcnn": whole_models.SUITE["smallcnn"].path,
    "mobileblock": whole_models._keras_official("mobileblock", lambda: _mobileblock, "jit_mobileblock"),
    "mobilenetv2": whole_models.SUITE["mobilenetv2"].path,
    "mlp": whole_models.SUITE["mlp"].path,
    "resnet50": whole_models.SUITE["resnet50"].path,
    "efficientnetb0": whole_models.SUITE["efficientnetb0"].path,
}
DEFAULT_MODELS = "smallcnn,mobileblock,mobilenetv2"


def benchmark(name: str, path: str, runs: int, warmup: int, seed: int, threads: Sequence[int] = (1,),
              builtin: bool = True, numpy_engine: bool = True) -> list[dict[str, Any]]:
    """One row per thread count of ``threads``; the interpreters of every count alternate."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    interpreters: dict[tuple[str, int], Any] = {}
    rows = {t: {"model": name, "threads": t} for t in threads}
    for t in threads:
        interpreters["litert", t] = LiteRT(model_path=path, num_threads=t)
        if builtin:
            interpreters["litert_builtin", t] = LiteRT(
                model_path=path, num_threads=t, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        if numpy_engine:
            interpreters["numpy", t] = numlite.Interpreter(model_path=path, num_threads=t, jit=False)
        for it in interpreters.values():
            it.allocate_tensors()
        started = time.perf_counter()
        jitted = numlite.Interpreter(model_path=path, num_threads=t, jit=True)
        jitted.allocate_tensors()
        rows[t]["jit_allocate_s"] = time.perf_counter() - started
        report = jitted.jit_report()["subgraphs"][0]
        rows[t]["compiled"] = report["compiled"] or report.get("reason")
        interpreters["jit", t] = jitted
    inputs = whole_models.seeded_inputs(jitted.get_input_details(), seed)
    for it in interpreters.values():
        for d, value in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], value)
        for _ in range(warmup):
            it.invoke()
    times: dict[tuple[str, int], list[float]] = {key: [] for key in interpreters}
    order = list(interpreters.items())
    for r in range(runs):  # alternate who goes first: none always runs on another's warm caches
        for key, it in order[r % len(order):] + order[: r % len(order)]:
            times[key].append(whole_models._timed(it.invoke) * 1e3)
    for (who, t), values in times.items():
        rows[t][f"{who}_us"] = statistics.median(values)
    for t in threads:
        litert = interpreters["litert", t]
        expected = [litert.get_tensor(d["index"]) for d in litert.get_output_details()]
        for who in ("numpy", "jit") if numpy_engine else ("jit",):
            it = interpreters[who, t]
            got = [it.get_tensor(d["index"]) for d in it.get_output_details()]
            rows[t][f"{who}_max_abs_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(got, expected))
    return [rows[t] for t in threads]


@contextlib.contextmanager
def busy_machine(hogs: int) -> Iterator[None]:
    """``hogs`` processes spinning on a core each while the block runs (none for 0); killed after."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        if procs:
            time.sleep(1.0)  # the scheduler and the load figures see them
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | threads | LiteRT µs | LiteRT builtin µs | numlite NumPy µs | numlite jit µs | jit / LiteRT | jit / LiteRT builtin"
        " | jit / NumPy | jit allocate s | jit max diff |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        builtin = r.get("litert_builtin_us")  # (not timed with --no-builtin)
        builtin_us, builtin_ratio = ("-", "-") if builtin is None else (f"{builtin:.0f}", f"{r['jit_us'] / builtin:.2f}x")
        numpy_us, numpy_ratio = ("-", "-") if "numpy_us" not in r else (f"{r['numpy_us']:.0f}", f"{r['jit_us'] / r['numpy_us']:.2f}x")
        lines.append(
            f"| {r['model']} | {r['threads']} | {r['litert_us']:.0f} | {builtin_us} | {numpy_us} | {r['jit_us']:.0f}"
            f" | {r['jit_us'] / r['litert_us']:.2f}x | {builtin_ratio} | {numpy_ratio}"
            f" | {r['jit_allocate_s']:.2f} | {r['jit_max_abs_diff']:.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, of {','.join(MODELS)}")
    parser.add_argument("--threads", default="1", help="comma-separated num_threads values (default 1)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=whole_models.DEFAULT_CACHE)
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="spin N processes while timing")
    parser.add_argument("--no-builtin", action="store_true", help="leave out LiteRT's builtin kernels")
    parser.add_argument("--no-numpy", action="store_true",
                        help="leave out numlite's NumPy engine (its OpenBLAS workers spin after its invokes, on the cores "
                             "the others' second threads need: docs/jit.md, 'Threads on a busy machine')")
    parser.add_argument("--every-core-idle", action="store_true",
                        help="numlite sees every core idle: num_threads whatever the load (the behaviour before threads_now)")
    args = parser.parse_args(argv)
    if args.every_core_idle:
        from numlite.kernels import parallel

        parallel.idle_cores = lambda: float(1 << 10)
    threads = [int(t) for t in args.threads.split(",")]
    paths = {name: MODELS[name](args.cache_dir) for name in args.models.split(",")}  # converted before the hogs start
    rows = []
    with busy_machine(args.busy):
        for name, path in paths.items():
            for row in benchmark(name, path, args.runs, args.warmup, args.seed, threads, not args.no_builtin,
                                 not args.no_numpy):
                if row["compiled"] is not True:
                    print(f"{name}: not compiled: {row['compiled']}", file=sys.stderr)
                rows.append(row)
            print(f"{name}: load average {os.getloadavg()[0]:.2f} after its timing", file=sys.stderr)
    print(markdown(rows))
    print(f"\n{args.busy} spinning processes; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
