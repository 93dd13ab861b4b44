"""``num_threads``: the size of the BLAS thread pool while an invoke runs.

numlite's heavy kernels (convolutions, fully connected layers, matrix products) run in NumPy's
BLAS, whose thread pool is process-wide. ``Interpreter(num_threads=n)`` limits that pool to
``n`` threads for the duration of each ``invoke()`` (without a ``num_threads``, the pool keeps
its size, the BLAS default) and restores the previous size afterwards,
through ``threadpoolctl`` (which knows how to reach OpenBLAS, MKL and BLIS). Without
``threadpoolctl`` installed, or for a BLAS it does not know, the limit is not applied
(:data:`SUPPORTED` tells which) and BLAS keeps its own thread count, as before.

While other processes keep the cores busy, an invoke uses fewer threads than ``n``, as few as
one (:func:`numlite.kernels.parallel.threads_now`, from the idle time of the cores, re-read at
most every quarter second): OpenBLAS's workers wait for work spinning and yielding, and a
product split over a worker that the scheduler does not run waits for it. MobileNetV2 on the
NumPy engine took 726 ms at ``num_threads=2`` on a 2-core machine at load 4.6, against 41 ms at
one thread (docs/jit.md, "Threads on a busy machine").

The pool is shared by the whole process: two interpreters invoked at the same time from two
threads with different ``num_threads`` would change each other's pool.
"""

from __future__ import annotations

from typing import Any

from numlite.kernels.parallel import threads_now

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


_OPENBLAS_ONLY: tuple[Any, Any] | None | bool = False  # False: not looked up yet


def _openblas_only() -> tuple[Any, Any] | None:
    """NumPy's OpenBLAS ``(set, get)`` C functions when it is the one BLAS threadpoolctl
    found (then the pool is resized by them directly: 0.4 us against threadpoolctl's 1.8 per
    invoke, which matters for models of tens of microseconds), else None."""
    global _OPENBLAS_ONLY
    if _OPENBLAS_ONLY is False:
        from numlite.kernels import parallel  # NumPy's OpenBLAS, found by its file name

        libs = _controllers()
        single = len(libs) == 1 and libs[0].internal_api == "openblas" and parallel._BLAS is not None
        _OPENBLAS_ONLY = parallel._BLAS if single else None
    return _OPENBLAS_ONLY


_DEFAULT_SIZES: dict[int, int] = {}  # id of a BLAS's controller (0: OpenBLAS's direct calls) -> its size at first use


def _default_size(key: int, current: int) -> int:
    """The pool's size the first time an interpreter without ``num_threads`` entered it: what
    such an interpreter asks for. Not the size at each invoke: an invoke of another thread that
    shrank the pool meanwhile would make the smaller size stick."""
    return _DEFAULT_SIZES.setdefault(key, current)


class BlasThreads:
    """Context manager: the BLAS pool has ``n`` threads inside (None: as many as it had when
    the first such context entered it, the BLAS default), fewer while other processes keep the
    cores busy (:func:`~numlite.kernels.parallel.threads_now`); its previous size after.

    Entering costs one get (and, when the size differs, one set) per BLAS library: under a
    microsecond for NumPy's OpenBLAS alone, a few through threadpoolctl otherwise.
    """

    __slots__ = ("n", "_saved", "_previous", "_inside")

    def __init__(self, n: int | None) -> None:
        self.n = None if n is None else int(n)
        self._saved: list[tuple[Any, int]] = []
        self._previous = 0
        self._inside = 0  # the pool's size inside, this time

    def __enter__(self) -> BlasThreads:
        if self.n is None:
            default = _DEFAULT_SIZES.get(0)
            if default is not None and threads_now(default) == default:
                return self  # idle cores: the pool as it is, untouched (nothing to restore)
        # Restored after: the size found, or for None the default size (another thread's
        # invoke may have shrunk the pool meanwhile: restored, that size would stick).
        openblas = _openblas_only()
        if openblas is not None:
            set_threads, get_threads = openblas
            current = get_threads()
            self._previous = current if self.n is not None else _default_size(0, current)
            n = self._inside = threads_now(self.n if self.n is not None else self._previous)
            if current != n:
                set_threads(n)
            return self
        saved = []
        for lib in _controllers():
            current = lib.get_num_threads()
            previous = current if self.n is not None else _default_size(id(lib), current)
            n = threads_now(self.n if self.n is not None else previous)
            if current != n:
                lib.set_num_threads(n)
            if previous != n:
                saved.append((lib, previous))
        self._saved = saved
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous:
            if self._previous != self._inside:
                _OPENBLAS_ONLY[0](self._previous)  # type: ignore[index]
            self._previous = 0
            return
        for lib, previous in self._saved:
            lib.set_num_threads(previous)
        self._saved = []
