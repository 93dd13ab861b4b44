"""Where examples come from: feed dicts, dicts of stacked arrays, ``.npy``/``.npz`` files or
folders of them (and Ray Datasets, which the backends read themselves).

The driver turns inputs into ``(index, payload)`` pairs. A payload is self-contained and small
enough to send to a worker process: a feed dict, a sequence of them, a reference to one row of
a file (:class:`FileRef`, read by the worker so that file data never crosses a pipe), or a
:class:`Failed` placeholder for a file that could not be read. :func:`load_payload` turns a
payload into feeds on the worker.
"""

from __future__ import annotations

import bisect
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from numlite.batch.runner import ModelSpec
from numlite.errors import InvalidInputError

FILE_SUFFIXES = (".npy", ".npz")


@dataclass(frozen=True)
class FileRef:
    """Row ``row`` of the arrays of a ``.npy``/``.npz`` file (``None``: the whole file is one
    example, or one sequence)."""

    path: str
    row: int | None


@dataclass(frozen=True)
class Failed:
    """An example that failed before it reached a worker (an unreadable file)."""

    message: str


def is_ray_dataset(inputs: Any) -> bool:
    return type(inputs).__module__.startswith("ray.data") and hasattr(inputs, "map_batches")


def is_paths(inputs: Any) -> bool:
    if isinstance(inputs, (str, os.PathLike)):
        return True
    return isinstance(inputs, (list, tuple)) and bool(inputs) and all(isinstance(p, (str, os.PathLike)) for p in inputs)


class Source:
    """Examples in order. ``length`` is their number when known before reading them all.
    ``get(i)`` (indexable sources only) returns the payload of example ``i``."""

    length: int | None = None
    indexable = False

    def stream(self, start: int = 0) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def get(self, index: int) -> Any:
        raise NotImplementedError


class ArraySource(Source):
    """A dict of arrays whose first axis runs over the examples (or sequences)."""

    indexable = True

    def __init__(self, arrays: Mapping[str, Any]) -> None:
        self.arrays = {str(k): np.asarray(v) for k, v in arrays.items()}
        lengths = {k: (v.shape[0] if v.ndim else None) for k, v in self.arrays.items()}
        if not lengths or None in lengths.values() or len(set(lengths.values())) != 1:
            raise InvalidInputError(
                "a dict of inputs needs arrays with one leading example axis of the same length, got shapes "
                + str({k: v.shape for k, v in self.arrays.items()})
            )
        self.length = next(iter(lengths.values()))

    def get(self, index: int) -> dict[str, np.ndarray]:
        return {k: v[index] for k, v in self.arrays.items()}

    def stream(self, start: int = 0) -> Iterator[tuple[int, Any]]:
        for i in range(start, self.length):
            yield i, self.get(i)


class ListSource(Source):
    """A sequence held in memory: feed dicts (or sequences of them)."""

    indexable = True

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items
        self.length = len(items)

    def get(self, index: int) -> Any:
        return self.items[index]

    def stream(self, start: int = 0) -> Iterator[tuple[int, Any]]:
        for i in range(start, self.length):
            yield i, self.items[i]


class IterableSource(Source):
    """Any other iterable of feed dicts, read once, as it goes."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items
        self.length = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]

    def stream(self, start: int = 0) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(self.items):
            if i >= start:
                yield i, item


class FileSource(Source):
    """``.npy``/``.npz`` files and folders of them (walked recursively, in sorted order).

    A file whose arrays have the rank of one example (or sequence) is one example; one whose
    arrays have one more axis holds one example per row of that axis. A file whose header cannot
    be read is one failed example.
    """

    indexable = True

    def __init__(self, paths: Any, spec: ModelSpec, sequences: bool = False) -> None:
        self.entries: list[tuple[str, int | None, str | None]] = []  # path, rows (None: one), error
        for path in _walk(paths):
            try:
                rows = _rows(path, spec, sequences)
                self.entries.append((path, rows, None))
            except InvalidInputError as e:
                self.entries.append((path, None, str(e)))
        self.starts = []
        total = 0
        for _, rows, _ in self.entries:
            self.starts.append(total)
            total += 1 if rows is None else rows
        self.length = total

    def get(self, index: int) -> Any:
        k = bisect.bisect_right(self.starts, index) - 1
        path, rows, error = self.entries[k]
        if error is not None:
            return Failed(error)
        return FileRef(path, None if rows is None else index - self.starts[k])

    def stream(self, start: int = 0) -> Iterator[tuple[int, Any]]:
        for i in range(start, self.length):
            yield i, self.get(i)


def make_source(inputs: Any, spec: ModelSpec, sequences: bool = False) -> Source:
    """The :class:`Source` for any accepted kind of ``inputs`` (not a Ray Dataset)."""
    if isinstance(inputs, Source):
        return inputs
    if is_paths(inputs):
        return FileSource(inputs, spec, sequences)
    if isinstance(inputs, Mapping):
        return ArraySource(inputs)
    if isinstance(inputs, (list, tuple)):
        return ListSource(inputs)
    if isinstance(inputs, Iterable):
        return IterableSource(inputs)
    raise InvalidInputError(
        f"cannot read examples from a {type(inputs).__name__}: give feed dicts, a dict of arrays with a "
        "leading example axis, .npy/.npz paths or folders, or a Ray Dataset"
    )


def _walk(paths: Any) -> Iterator[str]:
    for p in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*") if f.suffix in FILE_SUFFIXES and f.is_file())
            if not found:
                raise InvalidInputError(f"{p}: the folder holds no .npy or .npz file")
            yield from found
        elif p.exists():
            if p.suffix not in FILE_SUFFIXES:
                raise InvalidInputError(f"{p}: expected a .npy or .npz file, or a folder of them")
            yield str(p)
        else:
            raise InvalidInputError(f"{p}: no such file or folder")


# -- reading files ------------------------------------------------------------------------------


def _headers(path: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of each array of a .npy/.npz file, read from the headers alone."""
    try:
        if path.endswith(".npy"):
            with open(path, "rb") as f:
                return {"": _npy_header(f)}
        with zipfile.ZipFile(path) as z:
            out = {}
            for name in z.namelist():
                if name.endswith(".npy"):
                    with z.open(name) as f:
                        out[name[:-4]] = _npy_header(f)
            return out
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise InvalidInputError(f"{path}: cannot read it as {Path(path).suffix}: {e}") from None


def _npy_header(f: Any) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(f)  # the header alone, no data
    return tuple(shape), np.dtype(dtype)


def _match(keys: Sequence[str], spec: ModelSpec, path: str) -> dict[str, str]:
    """Which array of the file feeds which input: by name, or the only array of a file for a
    model with one input."""
    names = [s.name for s in spec.inputs]
    if set(names) <= set(keys):
        return {n: n for n in names}
    if len(names) == 1 and len(keys) == 1:
        return {names[0]: keys[0]}
    shown = [k or "(the .npy array)" for k in keys]
    raise InvalidInputError(f"{path}: its arrays {shown} do not name the model's {spec.input_names_kind}s {names}")


def _rows(path: str, spec: ModelSpec, sequences: bool) -> int | None:
    headers = _headers(path)
    match = _match(list(headers), spec, path)
    extra = 1 if sequences else 0  # a sequence file has a leading step axis, as one example
    counts = set()
    for s in spec.inputs:
        shape = headers[match[s.name]][0]
        rank = spec.example_rank(s) + extra
        if len(shape) == rank:
            counts.add(None)
        elif len(shape) == rank + 1:
            counts.add(shape[0])
        else:
            raise InvalidInputError(
                f"{path}: array for input {s.name!r} has shape {shape}, expected rank {rank} (one "
                f"{'sequence' if sequences else 'example'}) or {rank + 1} (a stack of them)"
            )
    if len(counts) != 1:
        raise InvalidInputError(f"{path}: its arrays disagree on the number of examples: {sorted(counts, key=str)}")
    return counts.pop()


class FileReader:
    """A worker's open files: the last few kept (memory-mapped .npy, loaded .npz arrays)."""

    def __init__(self, spec: ModelSpec, keep: int = 4) -> None:
        self.spec = spec
        self.keep = keep
        self.open: dict[str, dict[str, np.ndarray]] = {}

    def arrays(self, path: str) -> dict[str, np.ndarray]:
        if path not in self.open:
            try:
                if path.endswith(".npy"):
                    data = {"": np.load(path, mmap_mode="r", allow_pickle=False)}
                else:
                    with np.load(path, allow_pickle=False) as z:
                        data = {k: z[k] for k in z.files}
            except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
                raise InvalidInputError(f"{path}: cannot read it: {' '.join(str(e).split())}") from None
            match = _match(list(data), self.spec, path)
            if len(self.open) >= self.keep:
                self.open.pop(next(iter(self.open)))
            self.open[path] = {n: data[k] for n, k in match.items()}
        return self.open[path]

    def read(self, ref: FileRef) -> dict[str, np.ndarray]:
        arrays = self.arrays(ref.path)
        try:
            if ref.row is None:
                return {n: np.asarray(a) for n, a in arrays.items()}
            return {n: np.asarray(a[ref.row]) for n, a in arrays.items()}
        except (OSError, ValueError, IndexError) as e:  # a file changed or truncated since it was scanned
            raise InvalidInputError(f"{ref.path}: cannot read row {ref.row}: {e}") from None


def load_payload(payload: Any, reader: FileReader, where: str) -> Any:
    """The feeds (a dict) of an example payload, or a sequence's steps (a dict of arrays with
    a leading step axis, or a list of feed dicts). Raises InvalidInputError naming ``where``."""
    if isinstance(payload, Failed):
        raise InvalidInputError(f"{where}: {payload.message}")
    if isinstance(payload, FileRef):
        try:
            return reader.read(payload)
        except InvalidInputError as e:
            raise InvalidInputError(f"{where}: {e}") from None
    return payload


def sequence_steps(payload: Any, where: str) -> list[Mapping[str, Any]]:
    """A sequence as a list of step feed dicts."""
    if isinstance(payload, Mapping):
        arrays = {k: np.asarray(v) for k, v in payload.items()}
        lengths = {v.shape[0] if v.ndim else None for v in arrays.values()}
        if len(lengths) != 1 or None in lengths:
            raise InvalidInputError(f"{where}: a sequence's arrays need one leading step axis of the same length")
        return [{k: v[t] for k, v in arrays.items()} for t in range(lengths.pop())]
    if isinstance(payload, Iterable) and not isinstance(payload, (str, bytes)):
        return list(payload)
    raise InvalidInputError(f"{where}: a sequence is a dict of arrays with a leading step axis or a list of feed dicts")
