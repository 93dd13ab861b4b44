"""``backend="ray"``: the same workers as Ray Data actors (``map_batches`` with an actor class,
one numlite Interpreter each, allocated once), on a local Ray instance or a cluster.

Examples from an indexable source (arrays, a list of feed dicts, files) are not sent through
Ray at all: the dataset holds chunk numbers, and each actor reads its chunk's examples from
the source, which is put once in Ray's object store (files: only their table; each actor
reads the rows it runs, so the files must be reachable at the same path on every node). A Ray
Dataset is mapped directly, its rows being the examples. Results come back pickled, one row per
chunk, in input order (``preserve_order``).

Ray is imported only here, so ``numlite.batch`` imports without it.
"""

from __future__ import annotations

import logging
import pickle
import re
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from numlite.batch.engine import Plan, Worker
from numlite.batch.runner import Result
from numlite.batch.sources import ListSource, Source
from numlite.errors import InvalidInputError

if TYPE_CHECKING:
    from numlite.batch.api import Job


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        raise InvalidInputError("backend='ray' needs Ray: pip install 'numlite[ray]'") from None
    return ray


def ensure_ray(address: str | None, workers: int) -> Any:
    """Ray, initialised: joining ``address``, or a local instance with a CPU per worker (and
    one for Ray Data's own tasks) when none is running."""
    ray = _ray()
    if not ray.is_initialized():
        # Ray started here logs warnings only: its INFO lines (dataset plans, start-up) would
        # bury numlite predict's progress. A caller who initialised Ray keeps its own settings.
        quiet = dict(log_to_driver=False, logging_level=logging.WARNING)
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        if address is not None:
            ray.init(address=address, **quiet)
        else:
            from numlite.batch.engine import default_workers

            ray.init(num_cpus=max(default_workers(), workers) + 1, include_dashboard=False, **quiet)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # results in input order
    context.enable_progress_bars = False  # numlite predict draws its own
    return ray


def _resolve(value: Any) -> Any:
    """An object-store reference passed to an actor's constructor, fetched (once per actor)."""
    import ray

    return ray.get(value) if isinstance(value, ray.ObjectRef) else value


class ChunkActor:
    """Runs the chunks whose numbers the dataset holds: chunk ``c`` is examples
    ``[c * size, (c + 1) * size)`` of the source, from ``start`` on."""

    def __init__(self, model: Any, plan: Plan, source: Source, size: int, start: int, total: int) -> None:
        self.worker = Worker(_resolve(model), plan)
        self.source, self.size, self.start, self.total = _resolve(source), size, start, total

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = []
        for c in batch["chunk"]:
            first, last = max(self.start, int(c) * self.size), min(self.total, (int(c) + 1) * self.size)
            chunk = [(i, self.source.get(i)) for i in range(first, last)]
            out.append(pickle.dumps(self.worker.run_chunk(chunk)))
        return {"results": np.array(out, dtype=object)}


class RowActor:
    """Runs batches of a Ray Dataset's rows (columns named by the model's inputs). Indices are
    positions in the batch; the driver renumbers them."""

    def __init__(self, model: Any, plan: Plan) -> None:
        self.worker = Worker(_resolve(model), plan)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = len(next(iter(batch.values()))) if batch else 0
        rows = [(j, {k: v[j] for k, v in batch.items()}) for j in range(n)]
        return {"results": np.array([pickle.dumps(self.worker.run_chunk(rows))], dtype=object)}


def _strategy(ray: Any, workers: int, in_order: bool) -> dict[str, Any]:
    strategy = ray.data.ActorPoolStrategy(size=workers, **({"max_tasks_in_flight_per_actor": 1} if in_order else {}))
    return {"compute": strategy}


def run(job: "Job", start: int) -> Iterator[list[Result]]:
    workers = max(1, job.workers)
    ray = ensure_ray(job.address, workers)
    model_ref = ray.put(job.model_bytes)  # shipped once through the object store: no shared path needed
    options = dict(_strategy(ray, workers, job.in_order), batch_size=1, batch_format="numpy")
    if job.source is None:
        yield from _run_dataset(ray, job, model_ref, start, options)
        return
    source = job.source if job.source.indexable else ListSource([item for _, item in job.source.stream()])  # read whole
    total, size = source.length, job.chunk_size
    if start >= total:
        return
    chunk_ids = [{"chunk": c} for c in range(start // size, -(-total // size))]
    ds = ray.data.from_items(chunk_ids, override_num_blocks=min(len(chunk_ids), 4 * workers))
    ds = ds.map_batches(
        ChunkActor, fn_constructor_kwargs=dict(model=model_ref, plan=job.plan, source=ray.put(source), size=size,
                                               start=start, total=total), **options)  # fmt: skip
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        for blob in batch["results"]:
            yield pickle.loads(blob)


def _run_dataset(ray: Any, job: "Job", model_ref: Any, start: int, options: dict[str, Any]) -> Iterator[list[Result]]:
    ds = job.inputs
    if start:
        ds = ds.split_at_indices([start])[1]  # reads (not runs) the rows before the resume point
    options = dict(options, batch_size=job.chunk_size)
    ds = ds.map_batches(RowActor, fn_constructor_kwargs=dict(model=model_ref, plan=job.plan), **options)
    offset = start
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        for blob in batch["results"]:
            results = pickle.loads(blob)
            yield [_renumber(r, offset) for r in results]
            offset += len(results)


_EXAMPLE = re.compile(r"^example (\d+):")


def _renumber(result: Result, offset: int) -> Result:
    """A result of a Ray Dataset batch, its index (and its message's) made global."""
    index = offset + result.index
    error = result.error
    if error is not None:
        error = _EXAMPLE.sub(f"example {index}:", error, count=1)
    return Result(index, result.outputs, error)
