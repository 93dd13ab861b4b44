"""``num_threads``: the size of the BLAS thread pool while an invoke runs.

numlite's heavy kernels (convolutions, fully connected layers, matrix products) run in NumPy's
BLAS, whose thread pool is process-wide. ``Interpreter(num_threads=n)`` limits that pool to
``n`` threads for the duration of each ``invoke()`` and restores the previous size afterwards,
through ``threadpoolctl`` (which knows how to reach OpenBLAS, MKL and BLIS). Without
``threadpoolctl`` installed, or for a BLAS it does not know, the limit is not applied
(:data:`SUPPORTED` tells which) and BLAS keeps its own thread count, as before.

The pool is shared by the whole process: two interpreters invoked at the same time from two
threads with different ``num_threads`` would change each other's pool.
"""

from __future__ import annotations

from typing import Any

_CONTROLLERS: list[Any] | None = None


def _controllers() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process (looked up once)."""
    global _CONTROLLERS
    if _CONTROLLERS is None:
        try:
            import numpy  # noqa: F401  # its BLAS must be loaded before the look-up
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _CONTROLLERS = []
        else:
            _CONTROLLERS = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _CONTROLLERS


def supported() -> bool:
    """Whether ``num_threads`` can limit the BLAS pool here (threadpoolctl found a BLAS)."""
    return bool(_controllers())


class BlasThreads:
    """Context manager: the BLAS pool has ``n`` threads inside, its previous size after.

    Entering costs one get (and, when the size differs, one set) per BLAS library: a few
    microseconds, paid only by interpreters created with a ``num_threads``.
    """

    __slots__ = ("n", "_saved")

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self._saved: list[tuple[Any, int]] = []

    def __enter__(self) -> BlasThreads:
        saved = []
        for lib in _controllers():
            current = lib.get_num_threads()
            if current != self.n:
                lib.set_num_threads(self.n)
                saved.append((lib, current))
        self._saved = saved
        return self

    def __exit__(self, *exc: Any) -> None:
        for lib, previous in self._saved:
            lib.set_num_threads(previous)
        self._saved = []
