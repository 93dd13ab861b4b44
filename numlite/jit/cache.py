"""Where generated modules and Numba's compiled code live, and how they are keyed.

The folder is ``$NUMLITE_CACHE_DIR/jit`` when that variable is set, else
``$XDG_CACHE_HOME/numlite/jit``, else ``~/.cache/numlite/jit``. A generated module is named
by a hash of its source, numlite's and Numba's versions and the source of numlite's compiled
kernels (Numba's cache checks only the generated file itself, not the kernels it calls); the
source holds the model's structure and static shapes but no weights, which are copied into
the arenas at run time, so a module serves every model of that structure. Numba keeps the
compiled code beside it, in ``__pycache__`` (``njit(cache=True)``): a second process that
builds the same module loads that code instead of compiling.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

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


def module_key(source: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    import numba

    try:
        numlite_version = version("numlite")
    except PackageNotFoundError:
        numlite_version = "unknown"
    h = hashlib.sha256()
    for part in (source, numlite_version, numba.__version__, _kernels_source_hash()):
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


def load_module(path: Path) -> ModuleType:
    """Import a generated module from its file (once per process)."""
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
