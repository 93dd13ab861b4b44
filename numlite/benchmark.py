"""Time numlite against LiteRT on one model: what ``numlite bench`` and ``benchmarks/run.py`` measure.

For each thread count asked for, one numlite interpreter (``num_threads=n``, which limits the
BLAS pool) and, when ``ai_edge_litert`` is importable, one LiteRT interpreter (``num_threads=n``,
default delegate) load the same file and get the same input. All are warmed up, then invoked in
turn ``runs`` times, the order rotating every run so that none always runs on caches another
warmed; each timed ``invoke()`` follows untimed ones of the same interpreter, long enough for
the other interpreters' worker threads to fall asleep (:data:`SETTLE_S`); each time is the
wall-clock ``invoke()`` alone. Reported: median milliseconds, the ratio
numlite/LiteRT per thread count, numlite's arena and all the memory it allocates to run
(:func:`traced_memory`), the largest output difference, and numlite's per-invoke Python
overhead (:func:`python_overhead`).

Nothing here imports TensorFlow; LiteRT is optional.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

import numlite
from numlite.interpreter.threads import supported as blas_threads_supported
from numlite.model import read_model_file
from numlite.startup_logs import startup_noise_hidden


# Interpreters timed alternately in one process disturb each other through their worker
# threads: OpenBLAS's spin for about 2**28 cycles (~0.1 s) after each product before sleeping,
# XNNPACK's for a shorter while, and an interpreter timed while the other's threads still spin
# loses a core to them (LiteRT's ResNet50 at 2 threads: 18 ms alone, 35 ms right after a
# numlite invoke). So before each timed invoke :func:`measure` invokes the same interpreter
# untimed for this long: the previous interpreter's threads fall asleep meanwhile, and the timed
# invoke finds its own threads awake and the cores at speed, as in a loop of invokes of one
# interpreter. (A pause instead measures a cold start: idle cores clock down, and both runtimes
# then ran up to 2x slower.)
SETTLE_S = 0.12


def litert_available() -> bool:
    """Whether ``ai_edge_litert`` can be imported (its interpreter is the reference)."""
    try:
        from ai_edge_litert.interpreter import Interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def seeded_inputs(details: Sequence[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """One value per input: floats uniform in [-1, 1], integers in [0, 10), random bools."""
    rng = np.random.default_rng(seed)
    values = []
    for d in details:
        shape, dtype = tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])
        if dtype.kind == "f":
            values.append(rng.uniform(-1.0, 1.0, shape).astype(dtype))
        elif dtype.kind == "b":
            values.append(rng.random(shape) < 0.5)
        else:
            values.append(rng.integers(0, 10, shape).astype(dtype))
    return values


def _feed(interpreter: Any, inputs: Sequence[np.ndarray]) -> None:
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)


def _warm(interpreter: Any, inputs: Sequence[np.ndarray], warmup: int) -> None:
    """Feed the inputs and invoke ``warmup`` times, at least once, so that a failing invoke
    shows before the timed runs."""
    _feed(interpreter, inputs)
    for _ in range(max(warmup, 1)):
        interpreter.invoke()


def _keep_busy(interpreter: Any, seconds: float) -> None:
    """Invoke ``interpreter`` untimed for at least ``seconds`` (once at least)."""
    end = time.perf_counter() + seconds
    interpreter.invoke()
    while time.perf_counter() < end:
        interpreter.invoke()


def _timed_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def max_abs_diff(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float | str:
    """The largest absolute difference over all outputs (a string when shapes differ)."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs vs {len(expected)}"
    worst = 0.0
    for a, e in zip(actual, expected):
        if a.shape != e.shape:
            return f"shape {a.shape} vs {e.shape}"
        if a.size:
            worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))))
    return worst


def measure(
    model_path: str,
    runs: int = 10,
    warmup: int = 2,
    threads: Sequence[int] = (1,),
    seed: int = 0,
    inputs: Sequence[np.ndarray] | None = None,
    litert: bool | None = None,
    overhead: bool = True,
    settle: float = SETTLE_S,
    jit: bool = False,
) -> dict[str, Any]:
    """Measure one model (see the module docstring). Errors of either interpreter are recorded
    in the result (``numlite_error``, ``litert_error``), not raised.

    Args:
      inputs: the input values, in input order (default: :func:`seeded_inputs` from ``seed``).
      litert: time LiteRT too (default: when it is importable).
      overhead: also measure :func:`python_overhead`.
      settle: seconds of untimed invokes of an interpreter before each of its timed ones
        (see :data:`SETTLE_S`); 0 for none.
      jit: also time numlite's compiled engine (``Interpreter(jit=True)``, docs/jit.md) in the
        same alternating runs: ``jit_ms``, ``jit_ratio`` (to LiteRT), ``jit_compile_s`` (its
        ``allocate_tensors()``: a compile, or a load from the cache), ``jit_compiled`` and, when
        the model stays on NumPy, ``jit_reason``.
    """
    model = read_model_file(model_path)
    row: dict[str, Any] = {
        "path": model_path,
        "file_bytes": os.path.getsize(model_path),
        "ops": sum(1 for _ in model.iter_operators()),
        "subgraphs": len(model.subgraphs),
        "threads": [int(t) for t in threads],
        "blas_threads_limited": blas_threads_supported(),
    }
    use_litert = litert_available() if litert is None else litert
    contenders: list[tuple[str, int, Any]] = []  # (who, threads, interpreter)
    mine: Any = None
    for n in threads:
        try:
            interpreter = numlite.Interpreter(model_path=model_path, num_threads=n, jit=False)  # the NumPy engine ("--jit": the compiled one)
            interpreter.allocate_tensors()
            if inputs is None:
                inputs = seeded_inputs(interpreter.get_input_details(), seed)
            _warm(interpreter, inputs, warmup)
        except Exception as e:  # numlite errors and kernel bugs alike: report, do not crash
            row["numlite_error"] = _one_line(e)
            break
        # the largest over the thread counts (blocks per thread can change working memory)
        row["numlite_arena_bytes"] = max(int(interpreter.arena_bytes), row.get("numlite_arena_bytes", 0))
        contenders.append(("numlite", n, interpreter))
        mine = interpreter
    compiled: Any = None
    if jit and mine is not None:
        compiled = _add_compiled(row, contenders, model_path, threads, inputs, warmup)
    theirs: Any = None
    if use_litert:
        from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

        for n in threads:
            try:
                with startup_noise_hidden():  # LiteRT announces its XNNPACK delegate on stderr
                    interpreter = LiteRTInterpreter(model_path=model_path, num_threads=n)
                    interpreter.allocate_tensors()
                if inputs is None:
                    inputs = seeded_inputs(interpreter.get_input_details(), seed)
                _warm(interpreter, inputs, warmup)
            except Exception as e:
                row["litert_error"] = _one_line(e)
                break
            contenders.append(("litert", n, interpreter))
            theirs = interpreter

    times: dict[tuple[str, int], list[float]] = {(who, n): [] for who, n, _ in contenders}
    for r in range(runs):
        k = r % max(len(contenders), 1)
        order = contenders[k:] + contenders[:k]
        for who, n, interpreter in order if r % 2 == 0 else reversed(order):
            if settle > 0 and len(contenders) > 1:
                _keep_busy(interpreter, settle)
            times[(who, n)].append(_timed_ms(interpreter.invoke))
    for who in ("numlite", "litert", "jit"):
        row[f"{who}_ms"] = {str(n): statistics.median(t) for (w, n), t in times.items() if w == who and t}
        row[f"{who}_runs_ms"] = {str(n): t for (w, n), t in times.items() if w == who}
    for key, who in (("ratio", "numlite"), ("jit_ratio", "jit")):
        row[key] = {
            n: row[f"{who}_ms"][n] / row["litert_ms"][n]
            for n in row[f"{who}_ms"]
            if n in row["litert_ms"] and row["litert_ms"][n] > 0
        }
    if not jit:
        for key in ("jit_ms", "jit_runs_ms", "jit_ratio"):
            del row[key]
    if mine is not None and theirs is not None:
        expected = _outputs(theirs)
        row["max_abs_diff"] = max_abs_diff(_outputs(mine), expected)
        row["litert_output_max_abs"] = max((float(np.max(np.abs(e))) for e in expected if e.size), default=0.0)
        if compiled is not None:
            row["jit_max_abs_diff"] = max_abs_diff(_outputs(compiled), expected)
    if mine is not None and inputs is not None:
        row["numlite_traced_bytes"] = max(traced_memory(model_path, inputs, n) for n in threads)
    if overhead and mine is not None and inputs is not None:
        reference = max(row["numlite_ms"].values(), default=1.0)
        try:
            row["python_overhead_ms"] = python_overhead(model_path, inputs, max(runs, 1), reference)
        except Exception as e:
            row["python_overhead_error"] = _one_line(e)
    return row


def _outputs(interpreter: Any) -> list[np.ndarray]:
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _add_compiled(
    row: dict[str, Any], contenders: list, model_path: str, threads: Sequence[int],
    inputs: Sequence[np.ndarray], warmup: int,
) -> Any:
    """Add one compiled-engine interpreter per thread count to ``contenders``; record its
    compile (or cache load) time and whether the model compiled. Returns the last one."""
    compiled: Any = None
    for n in threads:
        try:
            interpreter = numlite.Interpreter(model_path=model_path, num_threads=n, jit=True)
            start = time.perf_counter()
            interpreter.allocate_tensors()
            row.setdefault("jit_compile_s", {})[str(n)] = time.perf_counter() - start
            report = interpreter.jit_report()
            reasons = [s.get("reason") for s in report["subgraphs"].values() if not s.get("compiled")]
            if not report["subgraphs"]:  # NUMLITE_JIT=0, or Numba missing
                reasons = [f"not compiled (jit mode {report['mode']}, numba {report.get('numba', '?')})"]
            row["jit_compiled"] = not reasons
            if reasons:
                row["jit_reason"] = str(reasons[0])
            else:  # what the compiled engine holds beside the model's buffers (it reads those in place)
                row["jit_memory_bytes"] = sum(s["arena_bytes"] + s["constant_bytes"] for s in report["subgraphs"].values())
            _warm(interpreter, inputs, warmup)
        except Exception as e:
            row["jit_error"] = _one_line(e)
            break
        contenders.append(("jit", n, interpreter))
        compiled = interpreter
    return compiled


def traced_memory(model_path: str, inputs: Sequence[np.ndarray], num_threads: int = 1) -> int:
    """Bytes that a fresh interpreter's ``allocate_tensors()`` and first two invokes leave
    allocated, as ``tracemalloc`` counts them (NumPy reports its arrays to it): the arena, the
    buffers kernels keep, weights laid out again for BLAS, the Python objects of the plan and
    the compiled programs. The model is loaded and the input made before the first reading;
    call it after the kernel modules are imported (a first interpreter imports them)."""
    import tracemalloc

    interpreter = numlite.Interpreter(model_path=model_path, num_threads=num_threads, jit=False)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        interpreter.allocate_tensors()
        _feed(interpreter, inputs)
        interpreter.invoke()
        interpreter.invoke()  # the second one compiles the plan
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()


# ----------------------------------------------------------------------------- Python overhead


def _noop(ins: Any, outs: Any) -> None:
    """A kernel's eval that computes nothing (the outputs keep whatever they held)."""


def _drives_control(runtime: Any, step: Any) -> bool:
    """Nodes whose outputs are all integer or boolean scalars: loop counters, their
    comparisons, branch conditions. Kept real so that stubbed loops still end; they cost about
    what a no-op call costs anyway."""
    outputs = [o for o in step.outputs if o >= 0]
    for o in outputs:
        shape, dtype = runtime.shapes[o], runtime.dtypes[o]
        if shape is None or dtype.kind not in "biu" or int(np.prod(shape, dtype=np.int64)) > 1:
            return False
    return bool(outputs)


def stub_kernels(interpreter: numlite.Interpreter) -> int:
    """Make every node's eval a no-op, except control-flow ops (they run their subgraphs) and
    the scalar integer/bool nodes of :func:`_drives_control`. Call after ``allocate_tensors``;
    returns the number of nodes stubbed."""
    from numlite.kernels.control_flow import SubgraphCall

    stubbed = 0
    for runtime in interpreter._subgraphs.values():
        for step in runtime.plan:
            if step.folded or isinstance(step.kernel, SubgraphCall) or _drives_control(runtime, step):
                continue
            step.kernel.eval = _noop
            stubbed += 1
        if runtime.allocated:
            runtime.bind()  # programs compiled before hold the real evals
    return stubbed


def python_overhead(model_path: str, inputs: Sequence[np.ndarray], runs: int, reference_ms: float) -> float:
    """Median time of ``invoke()`` with the kernels stubbed (:func:`stub_kernels`): what the
    interpreter itself costs per invoke (dispatch, control flow, copies between subgraphs),
    without the kernels' arithmetic. A stubbed invoke that runs far longer than a real one (a
    loop whose end depends on stubbed float math) is cancelled and raises CancelledError."""
    interpreter = numlite.Interpreter(model_path=model_path, jit=False)  # the NumPy engine's kernels, stubbed
    interpreter.allocate_tensors()
    _feed(interpreter, inputs)
    stub_kernels(interpreter)
    guard = threading.Timer(max(5.0, 50 * reference_ms / 1e3), interpreter.cancel)
    guard.start()
    try:
        interpreter.invoke()
        interpreter.invoke()  # and once more, as the timed runs will: compiled on this one
    finally:
        guard.cancel()
    return statistics.median(_timed_ms(interpreter.invoke) for _ in range(runs))
