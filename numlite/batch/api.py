"""``numlite.batch.predict``: one call to run a model over a whole dataset."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from numlite.batch import engine
from numlite.batch.runner import ModelSpec, Result, load_model
from numlite.batch.sources import is_ray_dataset, make_source
from numlite.batch.store import FORMAT, VERSION, model_digest, open_store
from numlite.errors import InvalidInputError
from numlite.interpreter import Interpreter

DEFAULT_BATCH = 32  # examples per invoke for a model with a dynamic batch axis
CHUNK_EXAMPLES = 16  # at least this many examples per chunk sent to a worker (IPC cost)
FLUSH_BYTES = 64 << 20  # outputs held before they are written, at most
RESULT_OVERHEAD = 600  # bytes of Python objects per Result beyond its arrays (measured: ~600 for one output)


@dataclass
class Job:
    """A prediction run, planned: the model, where the examples come from, how to split them."""

    model: Any  # what workers load: a path (read by each worker) or the model's bytes
    model_bytes: bytes
    spec: ModelSpec
    plan: engine.Plan
    inputs: Any
    source: Any  # a Source, or None for a Ray Dataset
    workers: int
    chunk_size: int
    backend: str
    address: str | None
    in_order: bool  # one worker, examples in order: state carries over between them

    @property
    def total(self) -> int | None:
        if self.source is None:
            return None
        return self.source.length

    def meta(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "model_sha256": model_digest(self.model_bytes),
            "signature": self.spec.signature_key, "outputs": list(self.spec.outputs),
            "batch_size": self.plan.batch_size, "chunk_size": self.chunk_size, "sequences": self.plan.sequences,
        }  # fmt: skip

    def results(self, start: int = 0) -> Iterator[list[Result]]:
        """Chunks of results, in example order, starting after the first ``start`` examples."""
        if self.backend == "ray":
            from numlite.batch import ray_backend

            yield from ray_backend.run(self, start)
            return
        chunk_iter = engine.chunks(self.source.stream(start), self.chunk_size)
        if self.workers <= 1:
            yield from engine.run_inline(self.model, self.plan, chunk_iter)
        else:
            yield from engine.run_pool(self.model, self.plan, chunk_iter, self.workers)


def plan(
    model: str | os.PathLike | bytes,
    inputs: Any,
    *,
    workers: int | None = None,
    batch_size: int | None = None,
    backend: str = "local",
    signature: str | None = None,
    address: str | None = None,
    sequences: bool = False,
    reset_between: bool = True,
    chunk_size: int | None = None,
    num_threads: int | None = None,
) -> Job:
    """Check the arguments and the model, and plan the run (see :func:`predict`)."""
    if backend not in ("local", "ray"):
        raise InvalidInputError(f"backend must be 'local' or 'ray', got {backend!r}")
    if address is not None and backend != "ray":
        raise InvalidInputError("address= joins a Ray cluster: it needs backend='ray'")
    if workers is not None and workers < 0:
        raise InvalidInputError(f"workers must be >= 0, got {workers}")
    if batch_size is not None and batch_size < 1:
        raise InvalidInputError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(model, (bytes, bytearray, memoryview)):
        model_bytes = bytes(model)
        shipped: Any = model_bytes
    else:
        try:
            with open(model, "rb") as f:
                model_bytes = f.read()
        except OSError as e:
            raise InvalidInputError(f"{model}: cannot read the model: {e.strerror}") from None
        shipped = os.path.abspath(model) if backend == "local" else model_bytes
    parsed = load_model(model_bytes)
    spec = ModelSpec.of(parsed, signature)
    Interpreter(model_content=parsed)._check_supported()  # an unsupported op: one clear error here, not in every worker
    if is_ray_dataset(inputs) and backend != "ray":
        source = make_source(inputs.iter_rows(), spec, sequences)
    elif is_ray_dataset(inputs):
        source = None
    else:
        source = make_source(inputs, spec, sequences)
    batched = spec.dynamic_batch and not spec.stateful and not sequences
    batch = (batch_size or DEFAULT_BATCH) if batched else 1
    in_order = (spec.stateful and not sequences) or (sequences and not reset_between)
    n_workers = engine.default_workers() if workers is None else workers
    if in_order:
        n_workers = 1  # state carries from one example (or sequence) to the next: one interpreter, in order
    if sequences:
        size = chunk_size or 1
    else:
        size = chunk_size or max(batch, CHUNK_EXAMPLES)
    size = math.ceil(size / batch) * batch  # chunks never split a batch
    if num_threads is None and n_workers > 1:
        num_threads = max(1, engine.default_workers() // n_workers)  # BLAS threads per worker: no oversubscription
    job_plan = engine.Plan(spec.signature_key, batch, sequences, reset_between, num_threads)
    return Job(shipped, model_bytes, spec, job_plan, inputs, source, n_workers, size, backend, address, in_order)


def predict(model: str | os.PathLike | bytes, inputs: Any, **options: Any) -> Iterator[Result]:
    """Run ``model`` on every example of ``inputs``; yield one :class:`Result` per example, in
    input order, as they are computed.

    Args:
      model: a ``.tflite`` path or the model's bytes.
      inputs: an iterable of feed dicts (keyed by signature input name, or by input tensor name
        for a model without signatures), a dict of arrays whose first axis runs over the
        examples, a ``.npy``/``.npz`` path or folder (or a list of them), or a Ray Dataset whose
        columns are the inputs.
      workers: processes (local) or actors (Ray); None: one per core. 0 or 1 run in this process.
      batch_size: examples per invoke for a model whose batch dimension is dynamic (default 32);
        a model with a fixed batch of 1 is invoked per example.
      backend: ``"local"`` (a process pool) or ``"ray"`` (Ray Data actors).
      signature: the signature to run (required when the model has several).
      address: with ``backend="ray"``, the Ray cluster to join (default: start a local instance).
      sequences: each item of ``inputs`` is a sequence of examples (a list of feed dicts, or a
        dict of arrays with a leading step axis; a file holds one sequence), run in order on one
        interpreter; its result has each output stacked over the steps. For stateful models.
      reset_between: reset the model's state (``reset_all_variables``) before each sequence.
        False carries the state over, so all sequences then run in order on one worker.
      chunk_size: examples (sequences) per chunk sent to a worker and written to a file.
      num_threads: BLAS threads per interpreter (default: the cores shared among workers).

    A stateful model (resource variables, variable tensors) given without ``sequences`` runs
    its examples in order on one interpreter, one invoke each. A failing example gives a Result
    with ``error`` set and the run goes on.
    """
    job = plan(model, inputs, **options)
    for chunk in job.results():
        yield from chunk


@dataclass
class Summary:
    """What :func:`predict_to_file` did."""

    total: int  # examples in the file at the end
    resumed: int  # examples already there when it started
    computed: int
    failed: int  # of the computed ones
    seconds: float

    @property
    def rate(self) -> float:
        return self.computed / self.seconds if self.seconds > 0 else 0.0


def predict_to_file(
    model: str | os.PathLike | bytes,
    inputs: Any,
    output: str | os.PathLike,
    *,
    resume: bool = False,
    progress: Callable[[int, int | None, int], None] | None = None,
    on_chunk: Callable[[list[Result]], None] | None = None,
    flush_seconds: float | None = None,
    **options: Any,
) -> Summary:
    """:func:`predict` into an ``.npz`` file or a ``.parquet`` folder, written as results
    arrive (see :mod:`numlite.batch.store`). With ``resume``, the examples already in
    ``output`` are not computed again. ``progress(done, total, failed)`` is called after each
    chunk (total is None when unknown); ``on_chunk(results)`` sees each chunk's results.

    Results are flushed to the file every ``flush_seconds`` (default: 2 s, growing with the
    run's length to at most 60 s, i.e. 1/50 of the time elapsed), after 64 MiB of results, at
    the end, and when the run stops on an exception (Ctrl-C included): a process killed
    outright loses at most the last interval. Each flush reopens the file, whose directory
    grows with the flushes, so flushing every chunk of a long run would cost time quadratic in
    its length; ``flush_seconds=0`` does it anyway (tests)."""
    job = plan(model, inputs, **options)
    store = open_store(output, job.meta(), resume)
    start, failed, begin = store.done, 0, time.perf_counter()
    total = job.total
    pending: list[Result] = []
    pending_bytes, last_flush = 0, begin

    def flush() -> None:
        nonlocal pending, pending_bytes, last_flush
        if pending:
            store.write(pending)
        pending, pending_bytes, last_flush = [], 0, time.perf_counter()

    if progress is not None:
        progress(start, total, 0)
    try:
        for chunk in job.results(start):
            pending += chunk
            pending_bytes += sum(RESULT_OVERHEAD + sum(v.nbytes for v in (r.outputs or {}).values()) for r in chunk)
            failed += sum(not r.ok for r in chunk)
            now = time.perf_counter()
            interval = flush_seconds if flush_seconds is not None else min(60.0, max(2.0, (now - begin) / 50))
            if now - last_flush >= interval or pending_bytes >= FLUSH_BYTES:
                flush()
            if on_chunk is not None:
                on_chunk(chunk)
            if progress is not None:
                progress(store.done + len(pending), total, failed)
    finally:
        flush()  # what was computed before an interruption is kept (whole work chunks only)
    return Summary(store.done, start, store.done - start, failed, time.perf_counter() - begin)
