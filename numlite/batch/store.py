"""Output files written chunk by chunk, valid after every chunk, and read back for ``resume``.

Two formats, chosen by the path's suffix:

Each :meth:`Store.write` call writes one chunk (whatever results it is given, in order; the
caller decides how often: see ``predict_to_file``).

``.npz`` (a zip of ``.npy`` members, ``np.load`` reads it): a ``meta`` member (JSON text: format
version, the model's SHA-256, signature, output names, batch and chunk sizes), then per chunk
``c000000.out0`` ... (each output of the chunk's successful examples, stacked; when their
shapes differ, one member per example: ``c000000.out0.e3``), ``c000000.errors`` (one string per
example, empty when it succeeded) and last ``c000000.index`` (the example indices): a chunk
counts only once its index is there. The file is reopened in append mode and closed after each
chunk, which rewrites zip's central directory, so between chunks it is a complete zip. If the
process dies while a chunk is written, the central directory is missing; opening it again
(resume or read) recovers every complete chunk from the members' own headers and rewrites the
file once.

``.parquet``: a folder (a Parquet dataset: ``pandas.read_parquet`` and ``pyarrow.parquet``
read it whole) with ``_numlite_meta.json`` and one ``part-000000.parquet`` per chunk, each
written beside and renamed into place, so a part exists only once complete. Columns: ``index``
(int64), ``error`` (string, null on success), and per output its values flattened (a list
column, null on failure) and ``<output>.shape`` (a list of int64).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from numlite.batch.runner import Result
from numlite.errors import InvalidInputError

FORMAT = "numlite-batch"
VERSION = 1
PARQUET_META = "_numlite_meta.json"


def model_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_store(path: str | os.PathLike, meta: dict[str, Any], resume: bool) -> "Store":
    """A store for ``path`` (.npz or .parquet). Without ``resume`` an existing file is replaced;
    with it, its completed examples are kept (``store.done``), after checking that it was
    written by the same model, signature and batching."""
    path = str(path)
    if path.endswith(".npz"):
        return NpzStore(path, meta, resume)
    if path.endswith(".parquet"):
        return ParquetStore(path, meta, resume)
    raise InvalidInputError(f"{path}: the output must be a .npz or .parquet path")


class Store:
    path: str
    meta: dict[str, Any]
    done: int = 0  # examples already in the file, always the first ones
    chunks: int = 0

    def write(self, results: list[Result]) -> None:
        raise NotImplementedError

    def _check_resumable(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if old.get("format") != FORMAT:
            raise InvalidInputError(f"{self.path}: not a numlite batch output; cannot resume from it")
        keys = ("model_sha256", "signature", "outputs", "batch_size", "chunk_size", "sequences")
        differ = [k for k in keys if old.get(k) != new.get(k)]
        if differ:
            raise InvalidInputError(
                f"{self.path}: cannot resume: the file was written with another "
                + ", ".join(f"{k} ({old.get(k)!r}, now {new.get(k)!r})" for k in differ)
            )


# -- npz ----------------------------------------------------------------------------------------


def _npy_bytes(value: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(value), allow_pickle=False)
    return buffer.getvalue()


def _stackable(values: list[np.ndarray]) -> bool:
    return len({(v.shape, v.dtype.str) for v in values}) <= 1


class NpzStore(Store):
    def __init__(self, path: str, meta: dict[str, Any], resume: bool) -> None:
        self.path, self.meta = path, meta
        if resume and os.path.exists(path):
            old = _npz_meta(path)  # recovers complete chunks first if the file was cut short
            self._check_resumable(old, meta)
            with zipfile.ZipFile(path) as z:
                index_members = [n for n in z.namelist() if n.endswith(".index.npy")]
                self.chunks = len(index_members)
                self.done = sum(_npy_load(z, n).size for n in index_members)
            return
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("meta.npy", _npy_bytes(np.array(json.dumps(meta))))

    def write(self, results: list[Result]) -> None:
        prefix = f"c{self.chunks:06d}"
        names = self.meta["outputs"]
        ok = [r for r in results if r.ok]
        members = []
        for k, name in enumerate(names):
            values = [r.outputs[name] for r in ok]  # type: ignore[index]
            if _stackable(values):
                stacked = np.stack(values) if values else np.zeros((0,), np.float32)
                members.append((f"{prefix}.out{k}.npy", stacked))
            else:
                members += [(f"{prefix}.out{k}.e{j}.npy", v) for j, v in enumerate(values)]
        members.append((f"{prefix}.errors.npy", np.array([r.error or "" for r in results], dtype=str)))
        members.append((f"{prefix}.index.npy", np.array([r.index for r in results], np.int64)))  # last: complete
        with zipfile.ZipFile(self.path, "a") as z:
            for name, value in members:
                z.writestr(name, _npy_bytes(value))
        self.chunks += 1
        self.done += len(results)


def _npy_load(z: zipfile.ZipFile, name: str) -> np.ndarray:
    with z.open(name) as f:
        return np.lib.format.read_array(f, allow_pickle=False)


def _npz_meta(path: str) -> dict[str, Any]:
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        _recover_npz(path)
        z = zipfile.ZipFile(path)
    with z:
        try:
            return json.loads(str(_npy_load(z, "meta.npy")))
        except (KeyError, ValueError) as e:
            raise InvalidInputError(f"{path}: not a numlite batch output ({e})") from None


_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


def _recover_npz(path: str) -> None:
    """Rewrite a zip whose central directory is missing (the writer died mid-chunk) with the
    members of its complete chunks, read from their local headers."""
    with open(path, "rb") as f:
        data = f.read()
    members, offset = [], 0
    while offset + _LOCAL_HEADER.size <= len(data):
        sig, _, flags, method, _, _, _, size, _, name_len, extra_len = _LOCAL_HEADER.unpack_from(data, offset)
        start = offset + _LOCAL_HEADER.size + name_len + extra_len
        if sig != b"PK\x03\x04" or flags & 0x08 or method != zipfile.ZIP_STORED or start + size > len(data):
            break
        name = data[offset + _LOCAL_HEADER.size : offset + _LOCAL_HEADER.size + name_len].decode()
        members.append((name, data[start : start + size]))
        offset = start + size
    if not members or members[0][0] != "meta.npy":
        raise InvalidInputError(f"{path}: not a numlite batch output, and not a readable zip")
    last_complete = max((k for k, (n, _) in enumerate(members) if n.endswith(".index.npy")), default=0)
    tmp = path + ".recover"
    with zipfile.ZipFile(tmp, "w") as z:
        for name, payload in members[: last_complete + 1]:
            z.writestr(name, payload)
    os.replace(tmp, path)


def _iter_npz(path: str) -> Iterator[Result]:
    meta = _npz_meta(path)
    names = meta["outputs"]
    with zipfile.ZipFile(path) as z:
        members = set(z.namelist())
        chunk = 0
        while f"c{chunk:06d}.index.npy" in members:
            prefix = f"c{chunk:06d}"
            index = _npy_load(z, f"{prefix}.index.npy")
            errors = _npy_load(z, f"{prefix}.errors.npy")
            outs: dict[str, Any] = {}
            for k, name in enumerate(names):
                if f"{prefix}.out{k}.npy" in members:
                    outs[name] = _npy_load(z, f"{prefix}.out{k}.npy")
                else:
                    outs[name] = [_npy_load(z, f"{prefix}.out{k}.e{j}.npy") for j in range(int((errors == "").sum()))]
            j = 0
            for i, error in zip(index, errors):
                if error:
                    yield Result(int(i), error=str(error))
                else:
                    yield Result(int(i), {n: np.asarray(outs[n][j]) for n in names})
                    j += 1
            chunk += 1


# -- parquet ------------------------------------------------------------------------------------


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise InvalidInputError(
            "writing .parquet needs pyarrow: pip install 'numlite[parquet]' (or write .npz)"
        ) from None
    return pyarrow


class ParquetStore(Store):
    def __init__(self, path: str, meta: dict[str, Any], resume: bool) -> None:
        self.path, self.meta = path, meta
        self.pa = _pyarrow()
        meta_path = Path(path) / PARQUET_META
        if resume and meta_path.exists():
            self._check_resumable(json.loads(meta_path.read_text()), meta)
            parts = _parts(path)
            self.chunks = len(parts)
            self.done = sum(self.pa.parquet.ParquetFile(p).metadata.num_rows for p in parts)
            return
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        os.makedirs(path)
        meta_path.write_text(json.dumps(meta))

    def write(self, results: list[Result]) -> None:
        pa = self.pa
        columns: dict[str, Any] = {
            "index": pa.array([r.index for r in results], pa.int64()),
            "error": pa.array([r.error for r in results], pa.string()),
        }
        for name in self.meta["outputs"]:
            values = [None if not r.ok else np.asarray(r.outputs[name]) for r in results]  # type: ignore[index]
            dtype = next((v.dtype for v in values if v is not None), np.dtype(np.float32))
            columns[name] = pa.array([None if v is None else v.reshape(-1) for v in values],
                                     pa.list_(pa.from_numpy_dtype(dtype)))
            columns[f"{name}.shape"] = pa.array([None if v is None else list(v.shape) for v in values],
                                                pa.list_(pa.int64()))
        table = pa.table(columns)
        final = os.path.join(self.path, f"part-{self.chunks:06d}.parquet")
        pa.parquet.write_table(table, final + ".tmp")
        os.replace(final + ".tmp", final)  # a part is there whole or not at all
        self.chunks += 1
        self.done += len(results)


def _parts(path: str) -> list[str]:
    return sorted(str(p) for p in Path(path).glob("part-*.parquet"))


def _iter_parquet(path: str) -> Iterator[Result]:
    pa = _pyarrow()
    meta = json.loads((Path(path) / PARQUET_META).read_text())
    for part in _parts(path):
        table = pa.parquet.read_table(part)
        cols = {name: table.column(name).to_pylist() for name in table.column_names if not name.endswith(".shape")}
        shapes = {name: table.column(f"{name}.shape").to_pylist() for name in meta["outputs"]}
        types = {name: table.schema.field(name).type.value_type.to_pandas_dtype() for name in meta["outputs"]}
        for row, (index, error) in enumerate(zip(cols["index"], cols["error"])):
            if error is not None:
                yield Result(int(index), error=error)
            else:
                yield Result(int(index), {
                    n: np.asarray(cols[n][row], dtype=types[n]).reshape(shapes[n][row]) for n in meta["outputs"]
                })  # fmt: skip


def iter_results(path: str | os.PathLike) -> Iterator[Result]:
    """The results stored in a batch output file, in example order, one chunk in memory at a time."""
    path = str(path)
    if not os.path.exists(path):
        raise InvalidInputError(f"{path}: no such file")
    if path.endswith(".parquet"):
        return _iter_parquet(path)
    return _iter_npz(path)


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata a batch output file was written with."""
    path = str(path)
    if path.endswith(".parquet"):
        return json.loads((Path(path) / PARQUET_META).read_text())
    return _npz_meta(path)
