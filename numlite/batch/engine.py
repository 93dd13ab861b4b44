"""Running chunks of examples: in this process, in a local process pool, the same code in Ray
actors (:mod:`numlite.batch.ray_backend`).

A chunk is a list of consecutive ``(index, payload)`` pairs. Chunks are cut at multiples of
``chunk_size`` (by example index), a multiple of the batch size, so that which examples share
an invoke depends on the data alone, never on the backend, the number of workers or where a
resumed run started.
"""

from __future__ import annotations

import collections
import contextlib
import concurrent.futures as futures
import multiprocessing
import os
import sys
import types
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from numlite.batch.runner import ModelRunner, Result
from numlite.batch.sources import FileReader, load_payload, sequence_steps
from numlite.errors import NumliteError, StateError


@dataclass(frozen=True)
class Plan:
    """What every worker must agree on; small and picklable (the model travels separately)."""

    signature: str | None
    batch_size: int
    sequences: bool
    reset_between: bool
    num_threads: int | None


class Worker:
    """One interpreter, allocated once, running chunks (a process pool worker, a Ray actor, or
    the calling process)."""

    def __init__(self, model: Any, plan: Plan) -> None:
        self.plan = plan
        self.runner = ModelRunner(model, plan.signature, plan.batch_size, plan.num_threads)
        self.reader = FileReader(self.runner.spec)

    def run_chunk(self, chunk: list[tuple[int, Any]]) -> list[Result]:
        if not self.plan.sequences:
            return self.runner.run(chunk, lambda i, p: load_payload(p, self.reader, f"example {i}"))
        results = []
        for index, payload in chunk:
            where = f"sequence {index}"
            try:
                steps = sequence_steps(load_payload(payload, self.reader, where), where)
            except NumliteError as e:
                results.append(Result(index, error=" ".join(str(e).split())))
                continue
            results.append(self.runner.run_sequence(index, steps, self.plan.reset_between))
        return results


def chunks(items: Iterable[tuple[int, Any]], size: int) -> Iterator[list[tuple[int, Any]]]:
    """Consecutive items, cut where the example index crosses a multiple of ``size``."""
    chunk: list[tuple[int, Any]] = []
    for index, payload in items:
        if chunk and index // size != chunk[-1][0] // size:
            yield chunk
            chunk = []
        chunk.append((index, payload))
    if chunk:
        yield chunk


def run_inline(model: Any, plan: Plan, chunk_iter: Iterable[list[tuple[int, Any]]]) -> Iterator[list[Result]]:
    worker = Worker(model, plan)
    for chunk in chunk_iter:
        yield worker.run_chunk(chunk)


# -- the local process pool ---------------------------------------------------------------------

_WORKER: Worker | None = None


def _init_worker(model: Any, plan: Plan) -> None:
    global _WORKER
    _WORKER = Worker(model, plan)


def _run_in_worker(chunk: list[tuple[int, Any]]) -> list[Result]:
    assert _WORKER is not None
    return _WORKER.run_chunk(chunk)


def run_pool(
    model: Any, plan: Plan, chunk_iter: Iterable[list[tuple[int, Any]]], workers: int, in_flight: int | None = None,
) -> Iterator[list[Result]]:  # fmt: skip
    """Chunks run by ``workers`` processes, results yielded in input order, at most
    ``in_flight`` chunks (default 2 per worker) submitted and not yet yielded, so memory stays
    bounded however long the input is."""
    limit = in_flight or 2 * workers
    # spawn, not fork: the caller may have started threads (BLAS, TensorFlow, Ray) that a
    # forked child would inherit in an undefined state.
    context = multiprocessing.get_context("spawn")
    pool = futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(model, plan))
    with _main_module_hidden():
        # The pool starts a process per submit until it has ``workers`` (none idle yet), so
        # these start them all now, while the workers need not re-run the caller's script.
        started = [pool.submit(_ping) for _ in range(workers)]
    for f in started:
        _result(f)
    pending: collections.deque[futures.Future] = collections.deque()
    try:
        for chunk in chunk_iter:
            pending.append(pool.submit(_run_in_worker, chunk))
            while len(pending) >= limit:
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _ping() -> list[Result]:
    return []


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start spawned workers without importing the caller's ``__main__`` (a script importing
    TensorFlow would import it in every worker; nothing of it is needed: workers run numlite
    code on picklable data). The stand-in is in place only while processes start."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _result(future: futures.Future) -> list[Result]:
    try:
        return future.result()
    except futures.process.BrokenProcessPool as e:
        raise StateError(f"a batch worker process died ({e}); the results written so far are kept") from None


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
