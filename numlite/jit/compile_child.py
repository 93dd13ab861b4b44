"""Compile a generated module in a child process, for ``jit="auto"``.

A compile in a thread of the interpreter's process holds the GIL for most of its seconds
(Numba's typing and lowering are Python), so the NumPy invokes it was meant not to delay ran
up to several times slower meanwhile. ``"auto"`` therefore compiles in a child process, on
another core: the child loads the module, compiles ``main`` for the arenas' types and lets
Numba write its cache beside the module; the interpreter's process then loads the machine
code from that cache (milliseconds, once Numba is imported).

    python -m numlite.jit.compile_child MODULE_PATH DTYPE[,DTYPE...] [KERNEL[,KERNEL...]]

``DTYPE`` are the arenas' dtypes in order (the compiled signature is a tuple of 1-D arrays of
these, and the int64 control array). ``KERNEL`` are loop kernels' entry points to compile too
(``s0``: serial CONV_2D, see :func:`numlite.jit.kernels.loops.spec`). ``MODULE_PATH`` and
``DTYPE`` are ``-`` in a child that compiles entry points only. Exit status 0 when the cache
holds the compiled code.

A cold compile is shared out among :func:`workers` children (:func:`compile_once`): the
model's function in one, and the loop kernels it needs and Numba's cache does not hold yet
(a first compile on a machine, about 15 s of CPU for MobileNetV2's) spread over them all, the
heaviest first, so that the compile's wall time is about its CPU time divided by the workers.
The model's function does not need them compiled: it calls them through addresses, which the
interpreter's process writes once it loads them from the cache.

The child never outlives its use (:class:`Child`): the interpreter that started it kills it
when it is garbage-collected, re-allocated for other shapes, or at exit; and the child exits by
itself when its parent dies without a word (killed, or a ``multiprocessing`` worker leaving
with ``os._exit``), because it watches its stdin, a pipe the parent alone holds. Processes
that compile the same module take turns on a lock beside it: the first compiles, the others
then load its result from Numba's cache (the batch workers of one model start one compile's
worth of work, not one each). A plain subprocess, no ``multiprocessing``: nothing of the
parent's ``__main__`` is re-run, on any platform.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Iterable, Sequence

import numpy as np

CHILD_TIMEOUT_S = 600.0
STARTUP_SECONDS = 2.5  # a child's imports (numlite, Numba) before it compiles anything
EXITING = False  # set at exit: no child starts any more, and the running ones are killed
_LIVE: "set[Child]" = set()  # the children running now


@atexit.register
def _at_exit() -> None:
    global EXITING
    EXITING = True
    for child in list(_LIVE):
        child.kill()


def compile_module(path: Path | None, dtypes: Sequence[np.dtype], kernels: Sequence[str] = ()) -> None:
    """Compile ``main`` of the module at ``path`` (None: none) for arenas of ``dtypes``, and the
    loop kernels' entry points ``kernels`` (in this process, into Numba's disk cache)."""
    import numba

    from numlite.jit import cache
    from numlite.jit.kernels import loops
    from numlite.jit.kernels.common import CTL_SIZE

    if path is not None:
        module = cache.load_module(path)
        arenas = tuple(np.zeros(1, dtype) for dtype in dtypes)
        module.main.compile((numba.typeof(arenas), numba.typeof(np.zeros(CTL_SIZE, np.int64))))
    loops.ensure([loops.parse(k) for k in kernels])


def command(path: Path | None, dtypes: Sequence[np.dtype], kernels: Sequence[tuple[bool, int]] = ()) -> list[str]:
    """The arguments of a child (after ``python -m numlite.jit.compile_child``): see the module docstring."""
    from numlite.jit.kernels import loops

    shown = ",".join(np.dtype(d).str for d in dtypes) if path is not None else "-"
    return [str(path) if path is not None else "-", shown, ",".join(loops.spec(*k) for k in kernels)]


class Child:
    """One compile in child processes (one per job: the arguments of :func:`command`), started
    at construction, waited for by :meth:`wait` (in a background thread), stopped by
    :meth:`kill` (from any thread, any number of times).

    ``start_error`` is set (and nothing runs) when no child can be started here: a frozen
    application, whose ``sys.executable`` is not a Python, or an OS error."""

    def __init__(self, jobs: Sequence[Sequence[str]], lock: IO[bytes] | None = None) -> None:
        self.killed = False
        self._held = lock  # the module's lock (compile_once), released when the children end
        self.start_error: str | None = None
        self._processes: list[tuple[subprocess.Popen, IO[bytes]]] = []
        self._lock = threading.Lock()
        if EXITING:
            self.killed = True
            self._release()
            return
        if getattr(sys, "frozen", False):
            self.start_error = "a frozen application cannot start a Python child process"
            self._release()
            return
        env = {**os.environ, "NUMLITE_JIT": "0"}  # the child imports numlite; it needs no engine of its own
        for job in jobs:
            stderr: IO[bytes] = tempfile.TemporaryFile()  # a file, not a pipe: nothing to drain while waiting
            try:
                process = subprocess.Popen(
                    [sys.executable, "-m", "numlite.jit.compile_child", *job], stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                    creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),  # no console window on Windows
                )  # fmt: skip
            except (OSError, subprocess.SubprocessError) as e:
                stderr.close()
                self.start_error = f"{type(e).__name__}: {e}"
                self.kill()  # the ones started already: this compile happens in the caller's process
                self.killed = False
                for _, started in self._processes:
                    started.close()
                self._processes = []
                return
            with self._lock:
                self._processes.append((process, stderr))
        _LIVE.add(self)
        if EXITING:  # the exit began while it started (see _at_exit: one of the two kills it)
            self.kill()

    @property
    def pids(self) -> list[int]:
        """The children's process ids."""
        return [process.pid for process, _ in self._processes]

    def wait(self) -> str | None:
        """Wait for the children: None when they compiled, else why not (the first failure's
        last stderr line; ``"killed"`` after :meth:`kill`)."""
        if not self._processes:
            return "killed" if self.killed else self.start_error
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        why = None
        try:
            for process, stderr in self._processes:
                try:
                    process.wait(max(deadline - time.monotonic(), 0))
                except subprocess.TimeoutExpired:  # a failure to report (not a kill: see ``killed``)
                    self.kill()
                    self.killed = False
                    return f"the child compile took more than {CHILD_TIMEOUT_S:.0f} s"
                if why is None and process.returncode != 0 and not self.killed:
                    stderr.seek(0)
                    lines = stderr.read().decode(errors="replace").strip().splitlines()
                    why = lines[-1] if lines else f"exit status {process.returncode}"
        finally:
            self._close_stdin()
            self._release()
            _LIVE.discard(self)
            for _, stderr in self._processes:
                stderr.close()
        return "killed" if self.killed else why

    def kill(self) -> None:
        """Stop the children now (they may leave a module without compiled code: the next
        compile of it starts over; Numba writes its cache files atomically)."""
        with self._lock:
            self.killed = True
            for process, _ in self._processes:
                if process.poll() is None:
                    try:
                        process.kill()
                        process.wait(5)  # reaped here: no zombie left, whoever waits next
                    except (OSError, subprocess.TimeoutExpired):  # it ended meanwhile, or hangs in the kernel
                        pass
        self._close_stdin()
        self._release()
        _LIVE.discard(self)

    def _release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()  # closing the file releases its lock

    def _close_stdin(self) -> None:
        for process, _ in self._processes:
            if process.stdin is not None and not process.stdin.closed:
                try:
                    process.stdin.close()
                except OSError:
                    pass


def _exit_with_parent() -> None:
    """In the child: leave when stdin reaches its end (the parent closed it, or died)."""

    def watch() -> None:
        try:  # the raw descriptor: a daemon thread inside sys.stdin's buffered reader would hold
            while os.read(0, 4096):  # its lock at shutdown, a fatal error of the interpreter
                pass
        except OSError:
            pass
        os._exit(3)

    threading.Thread(target=watch, name="numlite-jit-parent-watch", daemon=True).start()


def _lock_file(path: Path) -> IO[bytes]:
    """An exclusive lock on ``path`` + ``.lock``, held until the file is closed (or released by
    the OS when this process ends, however it ends): processes compiling one module take turns."""
    handle = open(str(path) + ".lock", "a+b")
    try:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    except ImportError:  # Windows
        import msvcrt

        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises
                break
            except OSError:
                continue
    return handle


def workers() -> int:
    """How many processes share one cold compile: two where a core is idle (the 1-minute load
    average leaves one free), else one. Sharing costs a second process's imports (1.5-2.5 s
    of CPU) and the bodies both need; with no idle core it only adds that CPU to the wall time
    (docs/jit.md, "Cold compile and memory")."""
    cores = os.cpu_count() or 1
    if cores < 2:
        return 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows: no load average
        return 2
    return 2 if load <= cores - 1 else 1


def compiled_before(path: Path) -> bool:
    """Whether Numba's cache holds compiled code of the module (its index file: beside it, or
    under ``NUMBA_CACHE_DIR`` when that is set, where Numba then keeps it)."""
    folder = path.parent / "__pycache__"
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:  # Numba's folder there (its cache locators' get_suitable_cache_subpath, 0.60-0.68)
        import hashlib

        parent = os.path.dirname(os.path.abspath(path))
        folder = Path(root) / f"{os.path.basename(parent)}_{hashlib.sha1(parent.encode()).hexdigest()}"
    return any(folder.glob(f"{path.stem}.main-*.nbi"))


def compile_once(
    path: Path, dtypes: Sequence[np.dtype], kernels: Iterable[tuple[bool, int]] = (), model_cost: float = 1.0
) -> "Child | None":
    """The module's compile, once over every process: under its lock (waited for without using
    a core, while another process compiles it), None when Numba's cache holds its compiled code
    and the loop kernels' entry points ``kernels`` already (those found are loaded here), else
    started children (:class:`Child`, which holds the lock until they end), the work shared out
    among :func:`workers` (``model_cost``: the model's estimated CPU seconds, against
    :data:`numlite.jit.kernels.loops.COST`)."""
    lock = _lock_file(path)
    try:
        model = not compiled_before(path)
        missing = []
        if kernels:
            from numlite.jit.kernels import loops

            missing = loops.ensure(kernels, compile_missing=False)
    except BaseException:
        lock.close()
        raise
    if not model and not missing:
        lock.close()
        return None
    from numlite.jit.kernels import loops

    shares = loops.share(missing, model_cost if model else 0.0, workers())
    return Child([command(path if has_model else None, dtypes, items) for has_model, items in shares], lock)


def main(argv: Sequence[str]) -> int:
    _exit_with_parent()
    path = None if argv[0] == "-" else Path(argv[0])
    dtypes = [np.dtype(d) for d in argv[1].split(",") if d and d != "-"]
    kernels = [k for k in argv[2].split(",") if k] if len(argv) > 2 else []
    compile_module(path, dtypes, kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
