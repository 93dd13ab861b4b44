"""Compile a generated module in a child process, for ``jit="auto"``.

A compile in a thread of the interpreter's process holds the GIL for most of its seconds
(Numba's typing and lowering are Python), so the NumPy invokes it was meant not to delay ran
up to several times slower meanwhile. ``"auto"`` therefore compiles in a child process, on
another core: the child loads the module, compiles ``main`` for the arenas' types and lets
Numba write its cache beside the module; the interpreter's process then loads the machine
code from that cache (milliseconds, once Numba is imported).

    python -m numlite.jit.compile_child MODULE_PATH DTYPE[,DTYPE...]

``DTYPE`` are the arenas' dtypes in order (the compiled signature is a tuple of 1-D arrays of
these, and the int64 control array). Exit status 0 when the cache holds the compiled code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

CHILD_TIMEOUT_S = 600.0


def compile_module(path: Path, dtypes: Sequence[np.dtype]) -> None:
    """Compile ``main`` of the module at ``path`` for arenas of ``dtypes`` (in this process)."""
    import numba

    from numlite.jit import cache
    from numlite.jit.kernels.common import CTL_SIZE

    module = cache.load_module(path)
    arenas = tuple(np.zeros(1, dtype) for dtype in dtypes)
    module.main.compile((numba.typeof(arenas), numba.typeof(np.zeros(CTL_SIZE, np.int64))))


def compile_elsewhere(path: Path, dtypes: Sequence[np.dtype]) -> str | None:
    """Run :func:`compile_module` in a child process; None when it succeeded, else why not."""
    command = [sys.executable, "-m", "numlite.jit.compile_child", str(path), ",".join(np.dtype(d).str for d in dtypes)]
    env = {**os.environ, "NUMLITE_JIT": "0"}  # the child imports numlite; it needs no engine of its own
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else f"exit status {done.returncode}"
    return None


def main(argv: Sequence[str]) -> int:
    path, dtypes = Path(argv[0]), [np.dtype(d) for d in argv[1].split(",") if d]
    compile_module(path, dtypes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
