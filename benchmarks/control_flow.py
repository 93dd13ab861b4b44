"""Time numlite against LiteRT on control-flow models (WHILE, IF) made by the official converter.

    python benchmarks/control_flow.py [--cases trivial_loop,matrix_loop,nested,cond_then,cond_else,map_fn,scan,
                                                tensor_array,grow,keras_lstm,keras_gru]
                                      [--iterations N] [--runs N] [--warmup N] [--threads N]
                                      [--seed N] [--json out.json] [--no-memory] [--jit]

Each model is a small ``tf.function`` built with TensorFlow, converted with
``tf.lite.TFLiteConverter`` and cached under ``benchmarks/.cache/`` (as ``run.py`` does). Loop
counts are model inputs, so ``--iterations`` changes what is fed, not the model. Both
interpreters run in this one process on the same input: warm-up, then alternating timed invokes,
medians. The Markdown table adds per-iteration times, numlite's shared and separate arenas, its
control-flow counters and a LiteRT memory estimate (see benchmarks/README.md for the columns).
``--jit`` adds numlite's compiled engine (``Interpreter(jit=True)``, docs/jit.md) as a third
interpreter in the same alternating runs: its times, its ratio to LiteRT, and the seconds its
``allocate_tensors()`` took to compile (or, with a warm cache, ``NUMLITE_CACHE_DIR``, to load)
the model. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
from typing import Any, Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# benchmarks/run.py, for its caching, timing and report helpers (imported after the path is set).
import run as whole_models  # noqa: E402

import numlite  # noqa: E402
from numlite.errors import UnsupportedOperatorError  # noqa: E402
from numlite.model import read_model_file  # noqa: E402

DEFAULT_CACHE = whole_models.DEFAULT_CACHE
DEFAULT_ITERATIONS = 1000
INNER_ITERATIONS = 10  # of the nested model's inner loop; the outer count is iterations // 10
MATRIX_SIZE = 64
NESTED_SIZE = 16
COND_SHAPE = (8, 32)

# ----------------------------------------------------------------------------- models
#
# Each builder returns ``(fn, specs)``: a Python function of TensorFlow tensors and its input
# signature. TensorFlow is imported only here, so a run from the cache does not need it.

ModelBuilder = Callable[[], tuple[Callable[..., Any], list[Any]]]


def build_trivial_loop() -> tuple[Callable[..., Any], list[Any]]:
    """``while i < n: i, v = i + 1, v * 0.999 + 0.5``: per-iteration overhead, almost no work."""
    import tensorflow as tf

    def fn(n, x):
        def body(i, v):
            return i + 1, v * 0.999 + 0.5

        return tf.while_loop(lambda i, v: i < n, body, [tf.constant(0), x])

    return fn, [tf.TensorSpec((), tf.int32, name="n"), tf.TensorSpec((), tf.float32, name="x")]


def orthogonal_matrix(size: int = MATRIX_SIZE, seed: int = 0) -> np.ndarray:
    """A fixed orthogonal float32 matrix: repeated products keep the state's norm, so 1000
    iterations neither overflow nor vanish."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((size, size)))
    return q.astype(np.float32)


def build_matrix_loop() -> tuple[Callable[..., Any], list[Any]]:
    """``while i < n: a = a @ Q`` on a [64, 64] state with a constant orthogonal ``Q``
    (the converter makes the product a FULLY_CONNECTED with ``Q`` as weights)."""
    import tensorflow as tf

    q = tf.constant(orthogonal_matrix())

    def fn(n, a):
        def body(i, m):
            return i + 1, tf.matmul(m, q)

        return tf.while_loop(lambda i, m: i < n, body, [tf.constant(0), a])[1]

    return fn, [
        tf.TensorSpec((), tf.int32, name="n"),
        tf.TensorSpec((MATRIX_SIZE, MATRIX_SIZE), tf.float32, name="a"),
    ]


def build_nested() -> tuple[Callable[..., Any], list[Any]]:
    """An outer loop (``n`` times) whose body takes a ``tf.cond`` on the state's sum and then
    runs an inner loop (``m`` times): IF and WHILE inside a WHILE body."""
    import tensorflow as tf

    def fn(n, m, x):
        def inner_body(j, v):
            return j + 1, tf.tanh(v * 1.01 + 0.1)

        def body(i, v):
            v = tf.cond(tf.reduce_sum(v) > 0, lambda: v * 0.5 - 0.1, lambda: tf.abs(v) + 0.2)
            _, v = tf.while_loop(lambda j, v: j < m, inner_body, [tf.constant(0), v])
            return i + 1, v

        return tf.while_loop(lambda i, v: i < n, body, [tf.constant(0), x])[1]

    return fn, [
        tf.TensorSpec((), tf.int32, name="n"),
        tf.TensorSpec((), tf.int32, name="m"),
        tf.TensorSpec((NESTED_SIZE,), tf.float32, name="x"),
    ]


def build_cond() -> tuple[Callable[..., Any], list[Any]]:
    """``tf.cond(p > 0, relu(2x + 1) - 0.5, 3 tanh(x) - x)``: an IF with a few ops per branch."""
    import tensorflow as tf

    def fn(p, x):
        return tf.cond(p > 0, lambda: tf.nn.relu(x * 2.0 + 1.0) - 0.5, lambda: tf.tanh(x) * 3.0 - x)

    return fn, [tf.TensorSpec((), tf.float32, name="p"), tf.TensorSpec(COND_SHAPE, tf.float32, name="x")]


LIST_ROWS, LIST_WIDTH = 50, 16  # the [rows, width] input of the TensorList-style loops
GROW_WIDTH = 4
RNN_STEPS, RNN_FEATURES, RNN_UNITS = 20, 8, 32


def build_map_fn() -> tuple[Callable[..., Any], list[Any]]:
    """``tf.map_fn(lambda r: tanh(r) * 2, x)`` over 50 rows: the converter lowers the
    TensorList to SLICE and CONCATENATION with sizes computed from the loop counter (shapes
    known only at run time)."""
    import tensorflow as tf

    def fn(x):
        return tf.map_fn(lambda r: tf.tanh(r) * 2.0, x)

    return fn, [tf.TensorSpec((LIST_ROWS, LIST_WIDTH), tf.float32, name="x")]


def build_scan() -> tuple[Callable[..., Any], list[Any]]:
    """``tf.scan(lambda a, r: a * 0.9 + r, x)`` over 50 rows (a TensorList, as map_fn)."""
    import tensorflow as tf

    def fn(x):
        return tf.scan(lambda a, r: a * 0.9 + r, x)

    return fn, [tf.TensorSpec((LIST_ROWS, LIST_WIDTH), tf.float32, name="x")]


def build_tensor_array() -> tuple[Callable[..., Any], list[Any]]:
    """A WHILE writing ``x * i`` into a TensorArray of 50 rows, then ``stack()``."""
    import tensorflow as tf

    def fn(x):
        rows = tf.TensorArray(tf.float32, size=LIST_ROWS)

        def body(i, rows):
            return i + 1, rows.write(i, x * tf.cast(i, tf.float32))

        _, rows = tf.while_loop(lambda i, rows: i < LIST_ROWS, body, [0, rows])
        return rows.stack()

    return fn, [tf.TensorSpec((LIST_WIDTH,), tf.float32, name="x")]


def build_grow() -> tuple[Callable[..., Any], list[Any]]:
    """``acc = concat([acc, acc[-1:] * 0.5 + 1])`` ``n`` times (``shape_invariants`` [None, 4]):
    a loop state that grows by a row per iteration."""
    import tensorflow as tf

    def fn(x, n):
        def body(i, acc):
            return i + 1, tf.concat([acc, acc[-1:] * 0.5 + 1.0], 0)

        invariants = [tf.TensorShape([]), tf.TensorShape([None, GROW_WIDTH])]
        return tf.while_loop(lambda i, acc: i < n, body, [0, x], shape_invariants=invariants)[1]

    return fn, [tf.TensorSpec((1, GROW_WIDTH), tf.float32, name="x"), tf.TensorSpec((), tf.int32, name="n")]


def keras_rnn(kind: str) -> bytes:
    """A Keras 3 ``LSTM(32)`` or ``GRU(32)`` over 20 steps of 8 features, batch 1, converted
    with ``TFLiteConverter.from_keras_model`` (a WHILE over the steps, SPLIT of the gates).

    The dynamic-batch variant (``keras.Input((20, 8))`` without ``batch_size``, or
    ``model.export``) is not here: the official converter (TensorFlow 2.21) refuses it with
    builtin ops ("'tf.TensorListReserve' op requires element_shape to be static")."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inputs = keras.Input((RNN_STEPS, RNN_FEATURES), batch_size=1, name="x")  # the input "serving_default_x:0"
    layer = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[kind](RNN_UNITS)
    model = keras.Model(inputs, layer(inputs))
    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


MODELS: dict[str, ModelBuilder] = {
    "cf_trivial_loop": build_trivial_loop,
    "cf_matrix_loop": build_matrix_loop,
    "cf_nested": build_nested,
    "cf_cond": build_cond,
    "cf_map_fn": build_map_fn,
    "cf_scan": build_scan,
    "cf_tensor_array": build_tensor_array,
    "cf_grow": build_grow,
}
# Models converted from Keras (not from a function and its signature): name -> bytes.
KERAS_MODELS: dict[str, Callable[[], bytes]] = {
    "cf_keras_lstm": lambda: keras_rnn("lstm"),
    "cf_keras_gru": lambda: keras_rnn("gru"),
}


def convert(builder: ModelBuilder) -> bytes:
    """Convert a builder's function with the official converter (from a concrete function)."""
    import tensorflow as tf

    fn, specs = builder()
    func = tf.function(fn, input_signature=specs, autograph=False)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([func.get_concrete_function()], func)
    return converter.convert()


def model_path(model: str, cache_dir: str) -> str:
    make = KERAS_MODELS[model] if model in KERAS_MODELS else (lambda: convert(MODELS[model]))
    return whole_models.cached_model(model, cache_dir, make)


# ----------------------------------------------------------------------------- cases


@dataclasses.dataclass(frozen=True)
class Case:
    """One table row: a model and what is fed to it."""

    name: str
    model: str
    what: str
    feed: Callable[[int, np.random.Generator], dict[str, np.ndarray]]  # (iterations, rng) -> inputs by name
    iterations: Callable[[int], int] | None = None  # loop-body runs for --iterations (None: no loop)
    iteration_label: Callable[[int], str] | None = None


def _outer(iterations: int) -> int:
    return max(1, iterations // INNER_ITERATIONS)


CASES: dict[str, Case] = {
    c.name: c
    for c in [
        Case(
            "trivial_loop", "cf_trivial_loop", "WHILE: i + 1 and a scalar float update",
            lambda n, rng: {"n": np.int32(n), "x": np.float32(rng.uniform(-1, 1))},
            iterations=lambda n: n,
        ),
        Case(
            "matrix_loop", "cf_matrix_loop", "WHILE: [64,64] state times a constant orthogonal [64,64]",
            lambda n, rng: {"n": np.int32(n), "a": rng.uniform(-1, 1, (MATRIX_SIZE, MATRIX_SIZE)).astype(np.float32)},
            iterations=lambda n: n,
        ),
        Case(
            "nested", "cf_nested", "WHILE whose body has an IF and an inner WHILE",
            lambda n, rng: {
                "n": np.int32(_outer(n)),
                "m": np.int32(INNER_ITERATIONS),
                "x": rng.uniform(-1, 1, NESTED_SIZE).astype(np.float32),
            },
            iterations=lambda n: _outer(n) * INNER_ITERATIONS,
            iteration_label=lambda n: f"{_outer(n)}x{INNER_ITERATIONS}",
        ),
        Case(
            "cond_then", "cf_cond", "IF taking the then branch (MUL, ADD+ReLU, SUB)",
            lambda n, rng: {"p": np.float32(1.0), "x": rng.uniform(-1, 1, COND_SHAPE).astype(np.float32)},
        ),
        Case(
            "cond_else", "cf_cond", "IF taking the else branch (TANH, MUL, SUB)",
            lambda n, rng: {"p": np.float32(-1.0), "x": rng.uniform(-1, 1, COND_SHAPE).astype(np.float32)},
        ),
        Case(
            "map_fn", "cf_map_fn", "tf.map_fn over [50,16] (TensorList: SLICE, CONCATENATION of run-time sizes)",
            lambda n, rng: {"x": rng.uniform(-1, 1, (LIST_ROWS, LIST_WIDTH)).astype(np.float32)},
            iterations=lambda n: LIST_ROWS,
        ),
        Case(
            "scan", "cf_scan", "tf.scan over [50,16] (TensorList, as map_fn)",
            lambda n, rng: {"x": rng.uniform(-1, 1, (LIST_ROWS, LIST_WIDTH)).astype(np.float32)},
            iterations=lambda n: LIST_ROWS,
        ),
        Case(
            "tensor_array", "cf_tensor_array", "TensorArray write loop, 50 steps, then stack",
            lambda n, rng: {"x": rng.uniform(-1, 1, LIST_WIDTH).astype(np.float32)},
            iterations=lambda n: LIST_ROWS,
        ),
        Case(
            "grow", "cf_grow", "WHILE whose [None,4] state grows a row per iteration (concat)",
            lambda n, rng: {"x": rng.uniform(-1, 1, (1, GROW_WIDTH)).astype(np.float32), "n": np.int32(max(1, n // 10))},
            iterations=lambda n: max(1, n // 10),
        ),
        Case(
            "keras_lstm", "cf_keras_lstm", "Keras 3 LSTM(32) over 20 steps, batch 1 (WHILE, SPLIT)",
            lambda n, rng: {"serving_default_x:0": rng.uniform(-1, 1, (1, RNN_STEPS, RNN_FEATURES)).astype(np.float32)},
            iterations=lambda n: RNN_STEPS,
        ),
        Case(
            "keras_gru", "cf_keras_gru", "Keras 3 GRU(32) over 20 steps, batch 1 (WHILE, SPLIT)",
            lambda n, rng: {"serving_default_x:0": rng.uniform(-1, 1, (1, RNN_STEPS, RNN_FEATURES)).astype(np.float32)},
            iterations=lambda n: RNN_STEPS,
        ),
    ]
}  # fmt: skip
DEFAULT_CASES = ",".join(CASES)


def case_inputs(case: Case, details: Sequence[dict[str, Any]], iterations: int, seed: int) -> list[np.ndarray]:
    """The case's values in the order of ``details`` (matched by input name)."""
    feed = case.feed(iterations, np.random.default_rng(seed))
    names = [d["name"] for d in details]
    if sorted(names) != sorted(feed):
        raise ValueError(f"model inputs {names} do not match the case's {sorted(feed)}")
    return [np.asarray(feed[name], dtype=d["dtype"]).reshape(tuple(d["shape"])) for name, d in zip(names, details)]


# ----------------------------------------------------------------------------- measuring


def _feed(interpreter: Any, inputs: Sequence[np.ndarray]) -> None:
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)


def benchmark(
    case: Case, path: str, runs: int, warmup: int, threads: int, iterations: int, seed: int, jit: bool = False
) -> dict[str, Any]:
    """Time one case in both interpreters (three with ``jit``); errors of numlite end up in the row."""
    from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

    row: dict[str, Any] = {"case": case.name, "model": case.model, "path": path, "what": case.what}
    if case.iterations is not None:
        row["iterations"] = case.iterations(iterations)
        row["iteration_label"] = case.iteration_label(iterations) if case.iteration_label else str(row["iterations"])

    litert = LiteRTInterpreter(model_path=path, num_threads=threads)
    litert.allocate_tensors()
    inputs = case_inputs(case, litert.get_input_details(), iterations, seed)
    _feed(litert, inputs)

    mine: numlite.Interpreter | None = None
    try:
        mine = numlite.Interpreter(model_path=path, jit=False)  # the NumPy engine (--jit: the compiled one)
        mine.allocate_tensors()
        row["numlite_arena_bytes"] = int(mine.arena_bytes)
        separate = getattr(mine, "separate_arena_bytes", None)  # newer numlite only
        row["numlite_separate_arena_bytes"] = int(separate) if separate is not None else None
        _feed(mine, inputs)
        mine.invoke()  # the first invoke: its counters are the ones reported
        row["control_flow_counters"] = dict(getattr(mine, "control_flow_counters", {}) or {})
        for _ in range(warmup - 1):
            mine.invoke()
    except UnsupportedOperatorError as e:
        row["numlite_error"] = "no kernel for " + ", ".join(whole_models._missing_kernels(path))
        row["numlite_error_full"] = whole_models._one_line(e)
        mine = None
    except Exception as e:  # numlite errors and kernel bugs alike: report, do not crash
        row["numlite_error"] = f"{type(e).__name__}: {whole_models._one_line(e)}"
        mine = None

    jitted = _jit_interpreter(row, path, inputs, warmup) if jit else None

    for _ in range(max(warmup, 1)):
        litert.invoke()

    litert_ms: list[float] = []
    numlite_ms: list[float] = []
    jit_ms: list[float] = []
    for r in range(runs):
        # Alternate which goes first, so neither always runs on the other's warm caches.
        order = [(litert_ms, litert), (numlite_ms, mine), (jit_ms, jitted)]
        for times, interpreter in order[r % 3 :] + order[: r % 3]:
            if interpreter is not None:
                times.append(whole_models._timed(interpreter.invoke))
    row["litert_ms"] = statistics.median(litert_ms) if litert_ms else None
    row["numlite_ms"] = statistics.median(numlite_ms) if numlite_ms else None
    row["litert_runs_ms"], row["numlite_runs_ms"] = litert_ms, numlite_ms
    if row["litert_ms"] and row["numlite_ms"]:
        row["ratio"] = row["numlite_ms"] / row["litert_ms"]
    if jitted is not None:
        row["numlite_jit_ms"] = statistics.median(jit_ms) if jit_ms else None
        row["numlite_jit_runs_ms"] = jit_ms
        if row["litert_ms"] and row["numlite_jit_ms"]:
            row["jit_ratio"] = row["numlite_jit_ms"] / row["litert_ms"]
        expected = [litert.get_tensor(d["index"]) for d in litert.get_output_details()]
        row["jit_max_abs_diff"] = whole_models._max_abs_diff(
            [jitted.get_tensor(d["index"]) for d in jitted.get_output_details()], expected
        )
    if row.get("iterations"):
        for who in ("litert", "numlite", "numlite_jit"):
            if row.get(f"{who}_ms") is not None:
                row[f"{who}_us_per_iteration"] = row[f"{who}_ms"] * 1e3 / row["iterations"]

    if mine is not None:
        if runs:  # the counters of a later invoke, to show whether the first one was special
            row["control_flow_counters_last"] = dict(getattr(mine, "control_flow_counters", {}) or {})
        expected = [litert.get_tensor(d["index"]) for d in litert.get_output_details()]
        actual = [mine.get_tensor(d["index"]) for d in mine.get_output_details()]
        row["max_abs_diff"] = whole_models._max_abs_diff(actual, expected)
        row["litert_output_max_abs"] = max((float(np.max(np.abs(e))) for e in expected if e.size), default=0.0)
    return row


def _jit_interpreter(row: dict[str, Any], path: str, inputs: Sequence[np.ndarray], warmup: int) -> Any:
    """numlite with its compiled engine, allocated (compiling the model, or loading it from the
    cache) and warmed up; None, with the reason in the row, when it does not run compiled."""
    import time

    jitted = numlite.Interpreter(model_path=path, jit=True)
    started = time.perf_counter()
    jitted.allocate_tensors()
    row["numlite_jit_allocate_s"] = time.perf_counter() - started
    report = jitted.jit_report()["subgraphs"].get(0, {})
    row["numlite_jit_report"] = report
    if not report.get("compiled"):
        row["numlite_jit_error"] = report.get("reason", "not compiled")
        return None
    _feed(jitted, inputs)
    for _ in range(max(warmup, 1)):
        jitted.invoke()
    return jitted


def tensor_ranges(interpreter: Any, model: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The address ranges of LiteRT's non-constant tensors with data now, in ALL subgraphs: the
    main subgraph's inputs and outputs apart (numlite's arena does not hold them).

    Reads each tensor through the wrapper's ``tensor(base, index, subgraph)`` view; 0-d tensors
    come back as NumPy scalars (copies, no address) and are left out.
    """
    wrapper = interpreter._interpreter
    main = model.subgraphs[0]
    excluded: list[tuple[int, int]] = []
    ranges: list[tuple[int, int]] = []
    for s, graph in enumerate(model.subgraphs):
        for i in range(len(graph.tensors)):
            if model.constant(graph, i) is not None:
                continue
            try:
                view = wrapper.tensor(wrapper, i, s)
            except ValueError:  # no data: a tensor the plan does not use, or freed
                continue
            if not isinstance(view, np.ndarray) or not view.nbytes:
                continue
            start = view.__array_interface__["data"][0]
            span = (start, start + view.nbytes)
            (excluded if s == 0 and (i in main.inputs or i in main.outputs) else ranges).append(span)
    return ranges, excluded


def tensor_footprint(snapshots: list[tuple[list[tuple[int, int]], list[tuple[int, int]]]]) -> int:
    """Bytes covered by the ranges of several :func:`tensor_ranges` snapshots, each address
    counted once. LiteRT allocates a callee's arena when the control-flow op is prepared and
    frees it after the op runs, so the callees' tensors have data only in a snapshot taken
    after ``allocate_tensors()`` and before ``invoke()``; the caller's, in both."""
    ranges = [r for snapshot, _ in snapshots for r in snapshot]
    excluded = [r for _, snapshot in snapshots for r in snapshot]
    total, reach = 0, 0
    for begin, end in sorted(ranges):  # the size of the union of the ranges...
        if any(b < end and begin < e for b, e in excluded):  # ...that are not the model's inputs/outputs
            continue
        begin = max(begin, reach)
        if end > begin:
            total += end - begin
            reach = end
    return total


def litert_memory_child(case_name: str, path: str, iterations: int, seed: int) -> None:
    """Body of the measuring subprocess (one fresh process per case): prints one JSON line."""
    from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
    from ai_edge_litert.interpreter import OpResolverType

    with open(path, "rb") as f:
        content = f.read()
    interpreter = LiteRTInterpreter(
        model_content=content, num_threads=1,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )  # fmt: skip
    inputs = case_inputs(CASES[case_name], interpreter.get_input_details(), iterations, seed)
    model = read_model_file(path)
    before = whole_models._rss_bytes()
    interpreter.allocate_tensors()
    allocated = tensor_ranges(interpreter, model)  # the callees' arenas exist only now
    _feed(interpreter, inputs)
    interpreter.invoke()
    after = whole_models._rss_bytes()
    result = {"rss_growth_bytes": after - before}
    print(json.dumps(result), flush=True)  # in case reading the tensors fails below
    result["tensor_bytes"] = tensor_footprint([allocated, tensor_ranges(interpreter, model)])
    print(json.dumps(result), flush=True)


def litert_memory(case: Case, path: str, iterations: int, seed: int) -> dict[str, Any]:
    """Run :func:`litert_memory_child` in a fresh interpreter process."""
    command = [
        sys.executable, os.path.abspath(__file__), "--litert-memory-child", case.name,
        "--model-path", path, "--iterations", str(iterations), "--seed", str(seed),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"litert_memory_error": "timed out"}
    result: dict[str, Any] = {}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            result = {f"litert_{k}": v for k, v in json.loads(line).items()}
            break
    if done.returncode != 0 or "litert_tensor_bytes" not in result:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result["litert_memory_error"] = (
            f"measurement failed (exit {done.returncode}): {whole_models._one_line(Exception(tail), 200)}"
        )
    return result


# ----------------------------------------------------------------------------- report

COLUMNS = [
    "case", "iterations", "numlite ms", "LiteRT ms", "numlite µs/iter", "LiteRT µs/iter", "numlite/LiteRT",
    "numlite-jit ms", "numlite-jit µs/iter", "numlite-jit/LiteRT", "jit allocate s (cache)",
    "numlite shared arena", "numlite separate arenas (sum)", "LiteRT tensors (est.)", "LiteRT RSS growth (est.)",
    "CF bytes copied", "CF arrays allocated", "max abs diff", "max abs output", "note",
]  # fmt: skip


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    if n < 2**14:
        return f"{n} B"
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def _number(value: float | None, fmt: str) -> str:
    return format(value, fmt) if value is not None else "-"


def _jit_allocate(r: dict[str, Any]) -> str:
    if r.get("numlite_jit_allocate_s") is None:
        return "-"
    hit = (r.get("numlite_jit_report") or {}).get("cache_hit")
    return f"{r['numlite_jit_allocate_s']:.2f} ({'warm' if hit else 'cold'})"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] * len(COLUMNS)) + "|"]
    for r in rows:
        diff = r.get("max_abs_diff")
        counters = r.get("control_flow_counters") or {}
        note = r.get("error") or r.get("numlite_error") or ""
        if r.get("numlite_jit_error"):
            note = (note + "; " if note else "") + f"jit: {r['numlite_jit_error']}"
        jit_diff = r.get("jit_max_abs_diff")
        if isinstance(jit_diff, float) and isinstance(r.get("max_abs_diff"), float) and jit_diff > max(r["max_abs_diff"], 1e-5):
            note = (note + "; " if note else "") + f"jit max abs diff {jit_diff:.3g}"
        if r.get("litert_memory_error"):
            note = (note + "; " if note else "") + f"LiteRT memory: {r['litert_memory_error']}"
        ran = r.get("numlite_ms") is not None or "numlite_arena_bytes" in r
        cells = [
            r["case"],
            r.get("iteration_label", "-"),
            _number(r.get("numlite_ms"), ".3f"),
            _number(r.get("litert_ms"), ".3f"),
            _number(r.get("numlite_us_per_iteration"), ".2f"),
            _number(r.get("litert_us_per_iteration"), ".2f"),
            _number(r.get("ratio"), ".2f") + ("x" if r.get("ratio") is not None else ""),
            _number(r.get("numlite_jit_ms"), ".3f"),
            _number(r.get("numlite_jit_us_per_iteration"), ".3f"),
            _number(r.get("jit_ratio"), ".3f") + ("x" if r.get("jit_ratio") is not None else ""),
            _jit_allocate(r),
            _bytes(r.get("numlite_arena_bytes")) if ran else "-",
            _bytes(r.get("numlite_separate_arena_bytes")) if ran else "-",
            _bytes(r["litert_tensor_bytes"]) if "litert_tensor_bytes" in r else "-",
            _bytes(r["litert_rss_growth_bytes"]) if "litert_rss_growth_bytes" in r else "-",
            str(counters.get("bytes_copied", "-")),
            str(counters.get("arrays_allocated", "-")),
            (f"{diff:.3g}" if isinstance(diff, float) else str(diff)) if diff is not None else "-",
            _number(r.get("litert_output_max_abs"), ".3g"),
            whole_models._one_line(Exception(note), 300) if note else "",
        ]
        lines.append("| " + " | ".join(whole_models._cell(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time numlite against LiteRT on converted control-flow models.")
    parser.add_argument(
        "--cases", default=DEFAULT_CASES, help=f"comma-separated, from {', '.join(CASES)} (default: all)"
    )
    parser.add_argument(
        "--iterations", type=int, default=DEFAULT_ITERATIONS,
        help=f"loop iterations fed to the loop models (default {DEFAULT_ITERATIONS}; the nested model runs"
        f" iterations // {INNER_ITERATIONS} outer x {INNER_ITERATIONS} inner)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=10, help="timed invokes per interpreter (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed invokes per interpreter first (default 2)")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="LiteRT num_threads (default: all cores)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE, help="where converted models are kept")
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the LiteRT memory estimate (a subprocess per case)"
    )
    parser.add_argument(
        "--jit", action="store_true",
        help="also time numlite's compiled engine (Numba; the compiled code is cached in NUMLITE_CACHE_DIR)",
    )  # fmt: skip
    parser.add_argument("--litert-memory-child", metavar="CASE", help=argparse.SUPPRESS)
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.litert_memory_child:
        litert_memory_child(args.litert_memory_child, args.model_path, args.iterations, args.seed)
        return 0

    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")

    rows = []
    for name in names:
        case = CASES[name]
        try:
            path = model_path(case.model, args.cache_dir)
        except Exception as e:  # a failed conversion is a row, not a crash
            rows.append(
                {
                    "case": name,
                    "model": case.model,
                    "error": f"conversion failed: {type(e).__name__}: {whole_models._one_line(e, 200)}",
                }
            )
            continue
        whole_models._log(f"{name}: timing ({args.warmup} warm-up + {args.runs} alternating runs each)")
        try:
            row = benchmark(case, path, args.runs, args.warmup, args.threads, args.iterations, args.seed, args.jit)
        except Exception as e:  # LiteRT itself failed: still report the rest
            row = {
                "case": name,
                "model": case.model,
                "path": path,
                "error": f"LiteRT: {type(e).__name__}: {whole_models._one_line(e, 200)}",
            }
        if not args.no_memory:
            row.update(litert_memory(case, path, args.iterations, args.seed))
        rows.append(row)

    env = whole_models.environment(args.threads, args.runs, args.warmup, args.seed)
    env["iterations"] = args.iterations
    print(
        f"numlite {env['numlite']} (NumPy {env['numpy']}) vs ai-edge-litert {env['ai_edge_litert']}"
        f" (num_threads={args.threads}) on {env['cpu_count']} CPU(s); medians of {args.runs} alternating runs"
        f" after {args.warmup} warm-up runs; --iterations {args.iterations}.\n"
    )
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": rows}, f, indent=2)
        whole_models._log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
