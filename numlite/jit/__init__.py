"""numlite's compiled engine: each subgraph of a prepared model becomes one Numba function.

``Interpreter(..., jit=True)`` compiles the model at ``allocate_tensors()`` and runs it
compiled; ``jit="auto"`` (the default) runs on NumPy at once and compiles a model that turns
hot in a child process, then switches to it (see :mod:`numlite.jit.engine`): Numba is not
imported before; ``jit=False`` never imports Numba. The environment variable ``NUMLITE_JIT``
(``0``, ``1`` or ``auto``) chooses when the argument is not given; ``NUMLITE_JIT=0`` also turns
off an explicit ``jit=True`` or ``"auto"``.

Numba is optional at run time: where it cannot be imported, :func:`available` is False,
:func:`status` says why, and every interpreter runs on NumPy. The design, the kernel table and
what is covered are described in ``docs/jit.md``.
"""

from __future__ import annotations

import os
from typing import Any

_probe: tuple[bool, str] | None = None  # (available, why not), once Numba was looked for


def available() -> bool:
    """Whether Numba can be imported here (it is imported on the first call, ~1 s)."""
    return _numba_probe()[0]


def status() -> str:
    """``"available (numba 0.68.1)"`` or ``"unavailable: <why>"``."""
    ok, detail = _numba_probe()
    return f"available ({detail})" if ok else f"unavailable: {detail}"


def _numba_probe() -> tuple[bool, str]:
    global _probe
    if _probe is None:
        try:
            import numba  # noqa: F401  (heavy: imported only when a compiled engine is asked for)

            _probe = (True, f"numba {numba.__version__}")
        except Exception as e:  # ImportError, or a Numba built for another NumPy
            _probe = (False, f"numba cannot be imported ({type(e).__name__}: {e})")
    return _probe


def mode_from(jit: Any) -> bool | str:
    """The engine mode for an ``Interpreter(jit=...)`` argument: False, True or ``"auto"``.

    ``None`` takes ``NUMLITE_JIT`` (unset or empty: ``"auto"``); ``NUMLITE_JIT=0`` (or
    ``false``, ``off``, ``no``) turns every mode off."""
    env = os.environ.get("NUMLITE_JIT", "").strip().lower()
    if env in ("0", "false", "off", "no"):
        return False
    if jit is None:
        jit = {"1": True, "true": True, "on": True, "yes": True, "auto": "auto", "": "auto"}.get(env)
        if jit is None:
            from numlite.errors import InvalidInputError

            raise InvalidInputError(f'NUMLITE_JIT must be 0, 1 or auto, got {os.environ["NUMLITE_JIT"]!r}')
    if jit not in (False, True, "auto"):
        from numlite.errors import InvalidInputError

        raise InvalidInputError(f'jit must be False, True or "auto", got {jit!r}')
    return jit
