"""Time numlite against LiteRT on a fixed suite of models made by the official converter.

    python benchmarks/run.py [--models mobilenetv2,resnet50,...] [--runs N] [--warmup N]
                             [--threads 1,2] [--seed N] [--json out.json] [--no-memory]
                             [--no-jit] [--compile-times]

The suite (see ``SUITE`` and benchmarks/README.md): three Keras applications with batch-norm
statistics calibrated on random images (``benchmarks/convert.py``'s builders), an MLP, a small
CNN, a Keras 3 LSTM (the official converter's WHILE loop, and numlite's fused conversion), and
``benchmarks/control_flow.py``'s loop models (a 1000-iteration WHILE, a matmul loop, nested
control flow). Each model is built with TensorFlow on first use and cached under
``benchmarks/.cache/``. For every thread count, numlite (``num_threads``: the BLAS pool) and
LiteRT (``num_threads``, XNNPACK) run in this one process on the same input, warmed up, then
invoked alternately; medians are reported with numlite's arena, a LiteRT memory estimate, the
per-invoke Python overhead (kernels stubbed) and the output difference, as a Markdown table and
optionally JSON (``numlite.benchmark`` does the measuring). Nothing here asserts anything.

numlite's compiled engine (``Interpreter(jit=True)``, docs/jit.md) is timed in the same
alternating runs when Numba is available (``--no-jit`` leaves it out): its columns, the reason
when a model stays on the NumPy engine, and a second table of issue 24's targets (``TARGETS``:
jit/LiteRT per group of models, the fixed cost of a tiny model's set_tensor + invoke +
get_tensor from ``jit_overhead.py``, and MobileNetV2's resident memory with ``jit=True``
against the NumPy engine's, in child processes, unless ``--no-memory``). ``--compile-times`` adds MobileNetV2's compile time, cold
(an empty cache, in a child process) and warm (a second child on the same cache).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

import numlite
import numlite.benchmark
from numlite.kernels import KERNELS
from numlite.model import read_model_file

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # convert.py, rnn.py and control_flow.py, imported when needed
    sys.path.insert(0, HERE)
DEFAULT_CACHE = os.path.join(HERE, ".cache")


# ----------------------------------------------------------------------------- models


def _application(name: str) -> Callable[[], Any]:
    def build() -> Any:
        import tensorflow as tf

        # Logits rather than softmax: with random weights the probabilities are all ~1/1000,
        # which would hide any disagreement between the interpreters.
        return getattr(tf.keras.applications, name)(weights=None, input_shape=(224, 224, 3), classifier_activation=None)

    return build


def _mlp() -> Any:
    import tensorflow as tf

    return tf.keras.Sequential([
        tf.keras.Input((784,)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])  # fmt: skip


def _smallcnn() -> Any:
    import tensorflow as tf

    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        layers.Conv2D(16, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10, activation="softmax"),
    ])  # fmt: skip


def _elementwise() -> Any:
    """Only ADD/SUB/MUL on a large tensor: a model the element-wise kernels alone can run."""
    import tensorflow as tf

    layers = tf.keras.layers
    a = tf.keras.Input((128, 128, 16), name="a")
    b = tf.keras.Input((128, 128, 16), name="b")
    x = layers.Multiply()([layers.Add()([a, b]), layers.Subtract()([a, b])])
    return tf.keras.Model([a, b], layers.Add()([layers.Multiply()([x, a]), b]))


# Keras builders (no BN calibration), also used by convert.py, which calibrates the applications.
MODELS: dict[str, Callable[[], Any]] = {
    "mobilenetv2": _application("MobileNetV2"),
    "resnet50": _application("ResNet50"),
    "efficientnetb0": _application("EfficientNetB0"),
    "mlp": _mlp,
    "smallcnn": _smallcnn,
    "elementwise": _elementwise,  # not in the suite; a sanity check of this script
}

LOOP_ITERATIONS = 1000  # fed to control_flow.py's loop models (nested: 100 outer x 10 inner)

Feed = Callable[[list[dict[str, Any]], int], list[np.ndarray]]  # (input details, seed) -> values


@dataclass(frozen=True)
class BenchModel:
    """One row of the suite: how to get the converted file and what to feed it."""

    what: str
    path: Callable[[str], str]  # cache_dir -> path of the .tflite file (built on first use)
    feed: Feed | None = None  # None: seeded_inputs
    group: str = "float"  # which of issue 24's targets the row counts for (TARGETS)


def _keras_official(name: str, build: Callable[[], Callable[[], Any]], cache_name: str) -> Callable[[str], str]:
    """A Keras model converted by tf.lite.TFLiteConverter (build() returns the model builder,
    imported lazily: convert.py and rnn.py import this script)."""

    def path(cache_dir: str) -> str:
        def convert() -> bytes:
            import tensorflow as tf

            tf.keras.utils.set_random_seed(0)  # the same random weights every time
            return tf.lite.TFLiteConverter.from_keras_model(build()()).convert()

        return cached_model(cache_name, cache_dir, convert)

    return path


def _calibrated(name: str) -> Callable[[], Any]:
    import convert as converters  # benchmarks/convert.py: BN statistics from random images

    return converters.KERAS_MODELS[name]


def _lstm_builder() -> Callable[[], Any]:
    import rnn  # benchmarks/rnn.py

    return rnn.MODELS["lstm"][1]


def _lstm_numlite(cache_dir: str) -> str:
    def convert() -> bytes:
        return numlite.TFLiteConverter.from_keras_model(_lstm_builder()()).convert()

    return cached_model("lstm-numlite", cache_dir, convert)


def _quantized_official(name: str) -> Callable[[str], str]:
    """benchmarks/quantized.py's model ``name`` in full integer (int8 inputs and outputs),
    converted by the official converter (in a child process, as quantized.py does)."""

    def path(cache_dir: str) -> str:
        def convert() -> bytes:
            import quantized  # benchmarks/quantized.py

            data = quantized.official_model(name, "int8")
            if isinstance(data, str):
                raise RuntimeError(f"the official converter failed on {name} int8: {data}")
            return data

        return cached_model(f"{name}-int8-official", cache_dir, convert)

    return path


def _int8_feed(details: list[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """int8 inputs over their whole range (seeded_inputs would give only 0..9)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, tuple(d["shape"])).astype(d["dtype"]) for d in details]


def _control_flow(model: str, case: str) -> tuple[Callable[[str], str], Feed]:
    """One of control_flow.py's models, fed like its case, with LOOP_ITERATIONS."""

    def path(cache_dir: str) -> str:
        import control_flow

        return control_flow.model_path(model, cache_dir)

    def feed(details: list[dict[str, Any]], seed: int) -> list[np.ndarray]:
        import control_flow

        return control_flow.case_inputs(control_flow.CASES[case], details, LOOP_ITERATIONS, seed)

    return path, feed


SUITE: dict[str, BenchModel] = {
    name: BenchModel(f"tf.keras.applications.{app}, 224x224x3, logits, BN statistics calibrated",
                     _keras_official(name, lambda name=name: _calibrated(name), f"{name}-calibrated"), group="vision")
    for name, app in (("mobilenetv2", "MobileNetV2"), ("resnet50", "ResNet50"), ("efficientnetb0", "EfficientNetB0"))
}  # fmt: skip
SUITE.update({
    "mlp": BenchModel("784 → Dense 512 → Dense 256 → Dense 10 (softmax)", _keras_official("mlp", lambda: _mlp, "mlp")),
    "smallcnn": BenchModel("32x32x3 → 3 Conv2D + max pooling → GAP → Dense 10",
                           _keras_official("smallcnn", lambda: _smallcnn, "smallcnn")),
    "lstm": BenchModel("1x20x16 → Keras 3 LSTM 32 → Dense 10, official converter (a WHILE loop)",
                       _keras_official("lstm", _lstm_builder, "lstm-official"), group="control"),
    "lstm_fused": BenchModel("the same LSTM model converted by numlite (one UNIDIRECTIONAL_SEQUENCE_LSTM)",
                             _lstm_numlite, group="fused_lstm"),
    "while_loop": BenchModel(f"WHILE of i + 1 and a scalar update, {LOOP_ITERATIONS} iterations",
                             *_control_flow("cf_trivial_loop", "trivial_loop"), group="control"),
    "matmul_loop": BenchModel(f"WHILE: [64,64] state times a constant [64,64], {LOOP_ITERATIONS} iterations",
                              *_control_flow("cf_matrix_loop", "matrix_loop"), group="control"),
    "nested": BenchModel("WHILE (100) whose body has an IF and an inner WHILE (10)",
                         *_control_flow("cf_nested", "nested"), group="control"),
    "smallcnn_int8": BenchModel("benchmarks/quantized.py's small CNN (conv, depthwise, 1x1), full int8, official converter",
                                _quantized_official("smallcnn"), _int8_feed, group="int8"),
    "mobilenetv2_int8": BenchModel("MobileNetV2 0.35, 96x96x3, full int8, official converter",
                                   _quantized_official("mobilenetv2"), _int8_feed, group="int8"),
    "elementwise": BenchModel("ADD/SUB/MUL on two 1x128x128x16 inputs (not in the default suite)",
                              _keras_official("elementwise", lambda: _elementwise, "elementwise")),
})  # fmt: skip
DEFAULT_MODELS = ",".join(n for n in SUITE if n != "elementwise")


def model_path(name: str, cache_dir: str) -> str:
    """The suite model's converted file, built and converted on first use (the file name
    carries the TF version, so a TensorFlow upgrade converts again)."""
    return SUITE[name].path(cache_dir)


def model_inputs(name: str, details: list[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """What the suite feeds model ``name``: its case's values, or seeded random values."""
    feed = SUITE[name].feed
    return feed(details, seed) if feed is not None else seeded_inputs(details, seed)


def cached_model(name: str, cache_dir: str, convert: Callable[[], bytes]) -> str:
    """Path of ``<cache_dir>/<name>-tf<version>.tflite``, written with ``convert()`` first if it
    is not there yet (shared with the other benchmark scripts)."""
    import importlib.metadata

    tf_dist = "tensorflow-cpu" if _has_dist("tensorflow-cpu") else "tensorflow"
    tf_version = importlib.metadata.version(tf_dist)
    path = os.path.join(cache_dir, f"{name}-tf{tf_version}.tflite")
    if not os.path.exists(path):
        _log(f"{name}: building and converting (cached as {os.path.relpath(path)})")
        with contextlib.redirect_stdout(sys.stderr):  # the exporter prints; keep stdout for the table
            data = convert()
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # never leave a half-written model in the cache
    return path


def _has_dist(name: str) -> bool:
    import importlib.metadata

    try:
        importlib.metadata.version(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


# ----------------------------------------------------------------------------- measuring


seeded_inputs = numlite.benchmark.seeded_inputs  # floats in [-1, 1], small integers, random bools


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def _one_line(error: BaseException, limit: int | None = None) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _missing_kernels(path: str) -> list[str]:
    model = read_model_file(path)
    return sorted({model.op_name(op) for _, _, op in model.iter_operators()} - set(KERNELS))


def benchmark(
    name: str, path: str, runs: int, warmup: int, threads: list[int], seed: int, jit: bool = False
) -> dict[str, Any]:
    """Measure one model with numlite.benchmark.measure (errors of either side end up in the row);
    ``jit`` adds numlite's compiled engine to the same alternating runs."""
    details = numlite.Interpreter(model_path=path).get_input_details()
    row: dict[str, Any] = {"model": name, "group": SUITE[name].group}
    row.update(numlite.benchmark.measure(
        path, runs=runs, warmup=warmup, threads=threads, seed=seed, inputs=model_inputs(name, details, seed),
        litert=True, jit=jit,
    ))  # fmt: skip
    if "numlite_error" in row and "no kernel" in row["numlite_error"].lower():
        row["numlite_error"] = "no kernel for " + ", ".join(_missing_kernels(path))
    return row


def _op_count(path: str) -> int:
    return sum(1 for _ in read_model_file(path).iter_operators())


_max_abs_diff = numlite.benchmark.max_abs_diff  # control_flow.py's name for it


# LiteRT's Python API does not expose its arena size, so it is estimated twice, in a fresh
# process (so that memory freed by earlier work cannot be reused) with LiteRT's builtin kernels
# and without the default XNNPACK delegate (which keeps its own copies of weights and buffers):
#
# * arena span: the address range covered by the non-constant tensors LiteRT placed in the
#   same block as the model's inputs, read through ``interpreter.tensor(i)`` after a run. The
#   planner packs tensors into one buffer with no gap larger than the largest tensor, so the
#   block is grown from the input by at most that gap. Persistent and dynamic tensors (kept
#   elsewhere) are left out. Unlike numlite's arena, LiteRT's holds the inputs and outputs.
#   Control-flow models: every subgraph's tensors, read after allocate_tensors() (the callees'
#   arenas exist only then) and after the run (``control_flow.tensor_footprint``).
# * RSS growth: the growth of resident memory over allocate_tensors() plus the first invoke
#   (the arena's pages are only touched when the model runs), with the model bytes and the
#   input already resident before the first reading. It also counts scratch memory outside the
#   arena (ruy's packing buffers...) and allocator overhead: an upper bound.


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _arena_span(interpreter: Any, constant: set[int]) -> int:
    """Bytes spanned by the block of tensors that holds the first input (see above)."""
    blocks = []
    for d in interpreter.get_tensor_details():
        if d["index"] in constant:
            continue
        try:
            view = interpreter.tensor(d["index"])()
        except ValueError:  # no data: a tensor the plan does not use
            continue
        if view.nbytes:
            start = view.__array_interface__["data"][0]
            blocks.append((start, start + view.nbytes))
    first = interpreter.get_input_details()[0]["index"]
    start = interpreter.tensor(first)().__array_interface__["data"][0]
    gap = max(end - begin for begin, end in blocks) + 64  # + the planner's alignment
    lo, hi = start, start
    for begin, end in sorted(blocks):  # grow upward from the input...
        if begin >= lo and begin <= hi + gap:
            hi = max(hi, end)
    for begin, end in sorted(blocks, reverse=True):  # ...and downward
        if begin < lo and end >= lo - gap:
            lo = begin
    return hi - lo


def litert_memory_child(path: str, seed: int, name: str | None = None, xnnpack: bool = False) -> None:
    """Body of the measuring subprocess: prints one JSON line. With ``xnnpack``, LiteRT as it
    is timed (its default delegate, which packs the weights again) and its RSS growth only."""
    from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
    from ai_edge_litert.interpreter import OpResolverType

    with open(path, "rb") as f:
        content = f.read()
    builtin = {} if xnnpack else {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    interpreter = LiteRTInterpreter(model_content=content, num_threads=1, **builtin)
    details = interpreter.get_input_details()
    inputs = model_inputs(name, details, seed) if name in SUITE else seeded_inputs(details, seed)
    model = read_model_file(path)
    spans = not xnnpack  # the tensors' addresses: only with the builtin kernels (see above)
    before = _rss_bytes()
    interpreter.allocate_tensors()
    if spans and len(model.subgraphs) > 1:  # control flow: the callees' arenas exist only before invoke
        import control_flow

        allocated = control_flow.tensor_ranges(interpreter, model)
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    growth = _rss_bytes() - before
    if xnnpack:
        print(json.dumps({"rss_growth_xnnpack_bytes": growth}), flush=True)
        return
    result = {"rss_growth_bytes": growth}
    print(json.dumps(result), flush=True)  # in case reading the tensors fails below
    graph = model.subgraphs[0]
    constant = {i for i in range(len(graph.tensors)) if model.constant(graph, i) is not None}
    if len(model.subgraphs) > 1:  # control flow: every subgraph's tensors, as control_flow.py counts them
        snapshots = [allocated, control_flow.tensor_ranges(interpreter, model)]
        result["arena_span_bytes"] = control_flow.tensor_footprint(snapshots)
    else:
        result["arena_span_bytes"] = _arena_span(interpreter, constant)
    print(json.dumps(result), flush=True)


def litert_memory(path: str, seed: int, name: str | None = None) -> dict[str, Any]:
    """Run :func:`litert_memory_child` in fresh interpreter processes: builtin kernels, then
    XNNPACK."""
    result: dict[str, Any] = {}
    for xnnpack, expected in ((False, "litert_arena_span_bytes"), (True, "litert_rss_growth_xnnpack_bytes")):
        command = [sys.executable, os.path.abspath(__file__), "--litert-memory-child", path, "--seed", str(seed)]
        command += (["--models", name] if name else []) + (["--xnnpack"] if xnnpack else [])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            result["litert_memory_error"] = "timed out"
            continue
        for line in reversed(done.stdout.splitlines()):
            if line.startswith("{"):
                result.update({f"litert_{k}": v for k, v in json.loads(line).items()})
                break
        if done.returncode != 0 or expected not in result:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            tail = _one_line(Exception(tail), 200)
            result["litert_memory_error"] = f"measurement failed (exit {done.returncode}): {tail}"
    return result


# ----------------------------------------------------------------------------- report

def columns(threads: list[int], jit: bool = False) -> list[str]:
    engines = ("numlite ms", "LiteRT ms", "numlite/LiteRT") + (("jit ms", "jit/LiteRT") if jit else ())
    per_thread = [f"{c} ({n}T)" for n in threads for c in engines]
    return ["model", "ops", *per_thread, "Python overhead ms", "numlite arena", "LiteRT arena (est.)",
            "numlite memory (traced)", *(["jit memory (arenas + constants)"] if jit else []), "LiteRT RSS growth (est.)",
            "LiteRT RSS growth, XNNPACK (est.)", "max abs diff", "max abs output", "note"]  # fmt: skip


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 2**10:
        return f"{n} B"
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(rows: list[dict[str, Any]], threads: list[int], jit: bool = False) -> str:
    names = columns(threads, jit)
    lines = ["| " + " | ".join(names) + " |", "|" + "|".join(["---"] * len(names)) + "|"]
    for r in rows:
        diff = r.get("max_abs_diff")
        notes = [r.get("error") or r.get("numlite_error") or ""]
        notes += [f"LiteRT: {r['litert_error']}" if r.get("litert_error") else ""]
        notes += [f"overhead: {r['python_overhead_error']}" if r.get("python_overhead_error") else ""]
        notes += [f"LiteRT memory: {r['litert_memory_error']}" if r.get("litert_memory_error") else ""]
        notes += [f"jit: {r.get('jit_error') or r.get('jit_reason')}" if jit and not r.get("jit_compiled") else ""]
        note = "; ".join(n for n in notes if n)
        per_thread = []
        for n in map(str, threads):
            numlite_ms, litert_ms = r.get("numlite_ms", {}).get(n), r.get("litert_ms", {}).get(n)
            ratio = r.get("ratio", {}).get(n)
            per_thread += [_ms(numlite_ms), _ms(litert_ms), _ratio(ratio)]
            if jit:
                per_thread += [_ms(r.get("jit_ms", {}).get(n)), _ratio(r.get("jit_ratio", {}).get(n))]
        overhead = r.get("python_overhead_ms")
        cells = [
            r["model"],
            str(r.get("ops", "-")),
            *per_thread,
            _ms(overhead),
            _size(r.get("numlite_arena_bytes")),
            _size(r.get("litert_arena_span_bytes")),
            _size(r.get("numlite_traced_bytes")),
            *([_size(r.get("jit_memory_bytes"))] if jit else []),
            _size(r.get("litert_rss_growth_bytes")),
            _size(r.get("litert_rss_growth_xnnpack_bytes")),
            (f"{diff:.3g}" if isinstance(diff, float) else str(diff)) if diff is not None else "-",
            f"{r['litert_output_max_abs']:.3g}" if r.get("litert_output_max_abs") is not None else "-",
            _one_line(Exception(note), 300) if note else "",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


# Issue 24's targets for the compiled engine, as (what, group, thread count, statistic, bound):
# the statistic of jit/LiteRT over the group's rows at that thread count must be <= bound.
TARGETS = [
    ("control flow: median jit/LiteRT", "control", 1, "median", 1.0),
    ("control flow: slowest jit/LiteRT", "control", 1, "max", 2.0),
    ("int8 models: slowest jit/LiteRT", "int8", 1, "max", 2.0),
    ("fused float LSTM: jit/LiteRT", "fused_lstm", 1, "max", 1.2),
    ("vision at 2 threads: median jit/LiteRT", "vision", 2, "median", 1.5),
]


def targets(rows: list[dict[str, Any]]) -> str:
    """Issue 24's targets against this run's jit/LiteRT ratios, as a Markdown table. A row that
    did not compile still counts with its time (it ran on the NumPy engine), and is named."""
    lines = ["| target | bound | measured | rows (jit/LiteRT) | met |", "|---|---|---|---|---|"]
    for what, group, n, statistic, bound in TARGETS:
        mine = [r for r in rows if r.get("group") == group]
        ratios = {r["model"]: r["jit_ratio"][str(n)] for r in mine if str(n) in r.get("jit_ratio", {})}
        if not ratios:
            lines.append(f"| {what} ({n}T) | <= {bound} | - | {len(mine)} rows, none timed at {n} thread(s) | - |")
            continue
        value = statistics.median(ratios.values()) if statistic == "median" else max(ratios.values())
        listed = ", ".join(
            f"{m} {v:.2f}x" + ("" if next(r for r in mine if r["model"] == m).get("jit_compiled") else " (on NumPy)")
            for m, v in ratios.items()
        )
        lines.append(f"| {what} ({n}T) | <= {bound} | {value:.2f}x | {listed} | {'yes' if value <= bound else 'no'} |")
    return "\n".join(lines)


TINY_INVOKE_BOUND_US = 5.0  # set_tensor + invoke + get_tensor of a one-ADD model
COMPILE_BOUNDS_S = {"cold": 15.0, "warm": 1.0}  # MobileNetV2's allocate_tensors(jit=True)


def tiny_invoke_row() -> str:
    """A targets-table row: the median µs of a tiny model's set_tensor + invoke + get_tensor on
    the compiled engine, and LiteRT's in the same repeats (benchmarks/jit_overhead.py)."""
    import jit_overhead
    from numlite.startup_logs import startup_noise_hidden

    with startup_noise_hidden():  # LiteRT's XNNPACK notice
        rows = jit_overhead.timing(loops=5000, repeats=7)
    got = {r["interpreter"]: r["median_us"] for r in rows if r["what"].startswith("set_tensor")}
    jit_us = got["numlite-jit"]
    return (f"| tiny model: set_tensor + invoke + get_tensor | <= {TINY_INVOKE_BOUND_US:g} µs | {jit_us:.1f} µs"
            f" | LiteRT {got['LiteRT']:.1f} µs, NumPy engine {got['numlite']:.1f} µs"
            f" | {'yes' if jit_us <= TINY_INVOKE_BOUND_US else 'no'} |")


def compile_seconds(path: str) -> dict[str, float | str]:
    """allocate_tensors(jit=True) of ``path`` in a child process on an empty cache (cold), then
    in a second child on that cache (warm); the children import numlite (and Numba) before
    the clock starts."""
    import tempfile

    child = (
        "import sys, time, numlite, numba; i = numlite.Interpreter(model_path=sys.argv[1], jit=True); "
        "t = time.perf_counter(); i.allocate_tensors(); s = time.perf_counter() - t; "
        "r = i.jit_report()['subgraphs']; ok = r and all(v['compiled'] for v in r.values()); "
        "print(s if ok else 'not compiled: ' + str([v.get('reason') for v in r.values()]))"
    )
    result: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMLITE_CACHE_DIR": cache}
        for what in ("cold", "warm"):
            done = subprocess.run([sys.executable, "-c", child, path], capture_output=True, text=True, env=env)
            out = done.stdout.strip().splitlines()
            if done.returncode != 0 or not out:
                result[what] = f"failed: {_one_line(Exception(done.stderr.strip()[-300:]), 200)}"
                break
            try:
                result[what] = float(out[-1])
            except ValueError:
                result[what] = out[-1][:200]
                break
    return result


# What a child process's resident memory (MiB) grows by from before numlite's import to after
# the model's allocate_tensors() and three invokes, and by importing Numba and the compiled
# kernels (the compiled engine only).
_MEMORY_CHILD = """
import json, os, sys
import numpy as np

def resident():
    # (all, file-backed) MiB: file-backed pages are shared libraries' code and data, shared by
    # every process that maps them
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "RssFile"))

data, jit = open(sys.argv[1], "rb").read(), sys.argv[2] == "1"
stages = [("start", resident())]
import numlite
from numlite.benchmark import seeded_inputs
stages.append(("numlite's import", resident()))
if jit:
    import numba, numlite.jit.kernels
stages.append(("Numba's and the compiled kernels' import", resident()))
interpreter = numlite.Interpreter(model_content=data, jit=jit)
interpreter.allocate_tensors()
stages.append(("allocate_tensors", resident()))
feed = seeded_inputs(interpreter.get_input_details(), 0)
for _ in range(3):
    for d, value in zip(interpreter.get_input_details(), feed):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
stages.append(("three invokes", resident()))
report = interpreter.jit_report()["subgraphs"].get(0, {}) if jit else {"compiled": True}
growth = {name: [now[0] - was[0], now[1] - was[1]] for (_, was), (name, now) in zip(stages, stages[1:])}
print(json.dumps({"stages": growth, "compiled": bool(report.get("compiled"))}))
"""


def memory_row(name: str, path: str) -> str:
    """A targets-table row: the resident memory a fresh process gains from importing numlite to
    three invokes of ``path``, with ``jit=True`` (on a warm cache: the child runs twice) against
    the NumPy engine (``jit=False``, which never imports Numba), and where the compiled engine's
    growth comes from (stage by stage, and how much of it is shared libraries' pages). Linux only."""
    if not os.path.exists("/proc/self/status"):
        return f"| memory: {name}, jit=True / NumPy engine | <= 1.0x | - | needs /proc | - |"
    got: dict[bool, dict] = {}
    for jit in (False, True, True):
        done = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, path, str(int(jit))], capture_output=True, text=True)
        out = done.stdout.strip().splitlines()
        if done.returncode != 0 or not out:
            return f"| memory: {name}, jit=True / NumPy engine | <= 1.0x | - | {_cell(done.stderr.strip()[-200:])} | no |"
        got[jit] = json.loads(out[-1])
    numpy_mib = sum(all_ for all_, _ in got[False]["stages"].values())
    jit_mib = sum(all_ for all_, _ in got[True]["stages"].values())
    shared = sum(file for _, file in got[True]["stages"].values())
    stages = ", ".join(f"{stage} {all_:.1f}" for stage, (all_, _) in got[True]["stages"].items())
    ratio = jit_mib / numpy_mib
    note = "" if got[True]["compiled"] else " (not compiled)"
    return (f"| memory: {name}, jit=True / NumPy engine | <= 1.0x | {ratio:.2f}x | NumPy engine {numpy_mib:.1f} MiB, "
            f"jit=True {jit_mib:.1f} MiB{note}: {stages}; {shared:.1f} MiB of it shared libraries' pages | "
            f"{'yes' if ratio <= 1.0 else 'no'} |")


def compile_rows(name: str, seconds: dict[str, float | str]) -> list[str]:
    rows = []
    for what, bound in COMPILE_BOUNDS_S.items():
        value = seconds.get(what, "-")
        if isinstance(value, float):
            rows.append(f"| {name} compile, {what} cache | <= {bound:g} s | {value:.2f} s | | {'yes' if value <= bound else 'no'} |")
        else:
            rows.append(f"| {name} compile, {what} cache | <= {bound:g} s | - | {_cell(str(value))} | no |")
    return rows


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def environment(threads: Any, runs: int, warmup: int, seed: int) -> dict[str, Any]:
    """The machine and versions behind a run (CPU model, cores, NumPy and its BLAS)."""
    import importlib.metadata

    def version(dist: str) -> str | None:
        return importlib.metadata.version(dist) if _has_dist(dist) else None

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "blas": _blas(),
        "threadpoolctl": version("threadpoolctl"),
        "numlite": numlite.__version__,
        "ai_edge_litert": version("ai-edge-litert"),
        "tensorflow": version("tensorflow-cpu") or version("tensorflow"),
        "threads": threads,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "runs": runs,
        "warmup": warmup,
        "seed": seed,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _blas() -> str:
    """NumPy's BLAS as threadpoolctl sees it: 'openblas 0.3.31 (Haswell, pthreads, 2 threads)'."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    found = [
        f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')}, {i.get('threading_layer')},"
        f" {i.get('num_threads')} threads)"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    if pinned:  # see benchmarks/README.md, "BLAS kernels"
        found.append(f"kernels pinned by OPENBLAS_CORETYPE={pinned}")
    return "; ".join(found) or "none found"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _thread_list(text: str) -> list[int]:
    counts = [int(t) for t in text.split(",") if t.strip()]
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1, got {text!r}")
    return list(dict.fromkeys(counts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time numlite against LiteRT on a fixed suite of models.")
    parser.add_argument(
        "--models", default=DEFAULT_MODELS, help=f"comma-separated, from {', '.join(SUITE)} (default {DEFAULT_MODELS})"
    )
    parser.add_argument("--runs", type=int, default=10, help="timed invokes per interpreter (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed invokes per interpreter first (default 2)")
    parser.add_argument(
        "--threads", type=_thread_list, default=[1, 2],
        help="num_threads of both interpreters, comma-separated: one column group each (default 1,2)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE, help="where converted models are kept")
    parser.add_argument(
        "--no-memory", action="store_true",
        help="skip the LiteRT memory estimate (a subprocess per model) and the memory target (three)"
    )
    parser.add_argument(
        "--no-jit", dest="jit", action="store_false",
        help="leave out numlite's compiled engine (by default it is timed too when Numba is available)",
    )  # fmt: skip
    parser.add_argument(
        "--compile-times", action="store_true",
        help="also time MobileNetV2's compile by the compiled engine, cold and warm (two child processes)",
    )  # fmt: skip
    parser.add_argument("--litert-memory-child", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--xnnpack", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.litert_memory_child:
        litert_memory_child(args.litert_memory_child, args.seed, args.models if args.models in SUITE else None, args.xnnpack)
        return 0

    if args.jit:
        import numlite.jit

        args.jit = numlite.jit.available()
        if not args.jit:
            _log(f"the compiled engine is left out: {numlite.jit.status()}")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(SUITE)}")

    rows = []
    for name in names:
        try:
            path = model_path(name, args.cache_dir)
        except Exception as e:  # a failed conversion is a row, not a crash
            rows.append({"model": name, "error": f"conversion failed: {type(e).__name__}: {_one_line(e, 200)}"})
            continue
        _log(f"{name}: timing ({args.warmup} warm-up + {args.runs} alternating runs each, threads {args.threads})")
        try:
            row = benchmark(name, path, args.runs, args.warmup, args.threads, args.seed, jit=args.jit)
        except Exception as e:  # a failure outside the interpreters' own: still report the rest
            row = {"model": name, "path": path, "error": f"{type(e).__name__}: {_one_line(e, 200)}"}
        if not args.no_memory:
            row.update(litert_memory(path, args.seed, name))
        rows.append(row)

    env = environment(args.threads, args.runs, args.warmup, args.seed)
    print(
        f"numlite {env['numlite']} (NumPy {env['numpy']}, {env['blas']}) vs ai-edge-litert {env['ai_edge_litert']}"
        f" on {env['cpu_count']} x {env['cpu_model']}; num_threads {args.threads} for both; medians of"
        f" {args.runs} alternating runs after {args.warmup} warm-up runs.\n"
    )
    print(markdown(rows, args.threads, args.jit))
    if args.jit:
        print("\nIssue 24's targets for the compiled engine (jit/LiteRT in this run):\n")
        lines = [targets(rows), tiny_invoke_row()]
        if not args.no_memory:
            lines.append(memory_row("mobilenetv2", model_path("mobilenetv2", args.cache_dir)))
        if args.compile_times:
            seconds = compile_seconds(model_path("mobilenetv2", args.cache_dir))
            lines += compile_rows("mobilenetv2", seconds)
            if args.json:
                env["mobilenetv2_compile_s"] = seconds
        print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": rows}, f, indent=2)
        _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
