"""Where generated modules and Numba's compiled code live, and how they are keyed.

The folder is ``$NUMLITE_CACHE_DIR/jit`` when that variable is set, else
``$XDG_CACHE_HOME/numlite/jit``, else ``~/.cache/numlite/jit``. A generated module is named
by a hash of its source, numlite's and Numba's versions and the source of numlite's compiled
kernels (Numba's cache checks only the generated file itself, not the kernels it calls); the
source holds the model's structure only: no weights (read in place through their addresses),
and no sizes, offsets or scalar constants (read from ``ctl``: numlite/jit/codegen.py, ``lift``),
so a module serves every model of that structure, whatever its sizes. Numba keeps the
compiled code beside it, in ``__pycache__`` (``njit(cache=True)``): a second process that
builds the same module loads that code instead of compiling.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

_kernel_hash: str | None = None


def cache_dir() -> Path:
    """The folder of generated modules (created on demand)."""
    root = os.environ.get("NUMLITE_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "numlite")
    return Path(root) / "jit"


def _kernels_source_hash() -> str:
    global _kernel_hash
    if _kernel_hash is None:
        h = hashlib.sha256()
        here = Path(__file__).parent
        for path in sorted(here.rglob("*.py")):
            h.update(path.relative_to(here).as_posix().encode())
            h.update(path.read_bytes())
        _kernel_hash = h.hexdigest()
    return _kernel_hash


def model_key(model: Any) -> str:
    """A hash of a model: its structure (subgraphs, tensors, operators, options) and the bytes
    of its buffers (read in place, not copied)."""
    h = hashlib.sha256()
    with np.printoptions(threshold=sys.maxsize):  # no "..." in the reprs of long arrays
        h.update(repr((model.operator_codes, model.subgraphs)).encode())
    for buffer in model.buffers:
        data = np.ascontiguousarray(buffer.data)
        h.update(len(data).to_bytes(8, "little"))
        h.update(memoryview(data).cast("B"))
    return h.hexdigest()


def index_key(model_hash: str, root: int, shapes: Any) -> str:
    parts = (model_hash, root, shapes, _numlite_version(), _numba_version(), _target())
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=None)
def _target() -> str:
    """What of the machine decides which kernels the generator calls (kernels.simd: AVX-512's
    wide tiles, AVX512-VNNI's byte tiles, and ``NUMLITE_JIT_LANES``, which turns both off): a
    cache folder shared by two machines, or a run with and without the variable, must not hand
    one the other's module (its loop kernels of another kind, an instruction it lacks). Read
    through llvmlite, not Numba: the index is looked up before Numba is imported."""
    try:
        from llvmlite import binding

        features = binding.get_host_cpu_features().flatten().split(",")
    except Exception:  # (a platform llvmlite cannot tell: no such features)
        features = []
    wanted = [f for f in features if f in ("+avx512f", "+avx512vnni")]
    return ",".join(sorted(wanted)) + ";lanes=" + os.environ.get("NUMLITE_JIT_LANES", "")


@functools.lru_cache(maxsize=None)
def _numba_version() -> str:
    """Numba's version without importing it (once: a metadata lookup takes ~10 ms)."""
    from importlib.metadata import version

    return version("numba")


def remember(key: str, module: Path) -> None:
    """Record that the module ``module`` serves index ``key``."""
    folder = cache_dir() / "index"
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(module.name)
    os.replace(tmp, folder / key)


def recall(key: str) -> Path | None:
    """The module recorded for ``key``, when it and its file exist."""
    try:
        name = (cache_dir() / "index" / key).read_text().strip()
    except OSError:
        return None
    path = cache_dir() / name
    return path if name and path.exists() else None


@functools.lru_cache(maxsize=None)
def _numlite_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numlite")
    except PackageNotFoundError:
        return "unknown"


def module_key(source: str) -> str:
    import numba

    h = hashlib.sha256()
    for part in (source, _numlite_version(), numba.__version__, _kernels_source_hash()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def write_module(source: str) -> Path:
    """The path of the module holding ``source``, written unless it exists (rewriting it would
    change its time stamp, which invalidates Numba's cache of it)."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"numlite_jit_{module_key(source)}.py"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)  # atomic: a concurrent process sees the whole file or none
    return path


_LOADING = threading.Lock()


def load_module(path: Path) -> ModuleType:
    """Import a generated module from its file (once per process). Under a lock: ``"auto"``'s
    lookup thread and its compile thread may load one module at once, and the second would
    otherwise find it in ``sys.modules`` before its code ran (no ``main`` yet)."""
    with _LOADING:
        return _load_module(path)


def _load_module(path: Path) -> ModuleType:
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
