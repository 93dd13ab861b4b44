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
from pathlib import Path
from typing import IO, Sequence

import numpy as np

CHILD_TIMEOUT_S = 600.0
EXITING = False  # set at exit: no child starts any more, and the running ones are killed
_LIVE: "set[Child]" = set()  # the children running now


@atexit.register
def _at_exit() -> None:
    global EXITING
    EXITING = True
    for child in list(_LIVE):
        child.kill()


def compile_module(path: Path, dtypes: Sequence[np.dtype]) -> None:
    """Compile ``main`` of the module at ``path`` for arenas of ``dtypes`` (in this process)."""
    import numba

    from numlite.jit import cache
    from numlite.jit.kernels.common import CTL_SIZE

    module = cache.load_module(path)
    arenas = tuple(np.zeros(1, dtype) for dtype in dtypes)
    module.main.compile((numba.typeof(arenas), numba.typeof(np.zeros(CTL_SIZE, np.int64))))


class Child:
    """One compile in a child process: started at construction, waited for by :meth:`wait`
    (in a background thread), stopped by :meth:`kill` (from any thread, any number of times).

    ``start_error`` is set (and nothing runs) when no child can be started here: a frozen
    application, whose ``sys.executable`` is not a Python, or an OS error."""

    def __init__(self, path: Path, dtypes: Sequence[np.dtype], lock: IO[bytes] | None = None) -> None:
        self.killed = False
        self._held = lock  # the module's lock (compile_once), released when the child ends
        self.start_error: str | None = None
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        if EXITING:
            self.killed = True
            self._release()
            return
        if getattr(sys, "frozen", False):
            self.start_error = "a frozen application cannot start a Python child process"
            self._release()
            return
        command = [sys.executable, "-m", "numlite.jit.compile_child", str(path), ",".join(np.dtype(d).str for d in dtypes)]
        env = {**os.environ, "NUMLITE_JIT": "0"}  # the child imports numlite; it needs no engine of its own
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # a file, not a pipe: nothing to drain while waiting
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._stderr, env=env,
                creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),  # no console window on Windows
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            self._stderr.close()
            self.start_error = f"{type(e).__name__}: {e}"
            self._release()
            return
        _LIVE.add(self)
        if EXITING:  # the exit began while it started (see _at_exit: one of the two kills it)
            self.kill()

    def wait(self) -> str | None:
        """Wait for the child: None when it compiled, else why not (``"killed"`` after :meth:`kill`)."""
        process = self._process
        if process is None:
            return "killed" if self.killed else self.start_error
        try:
            process.wait(CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a failure to report (not a kill: see ``killed``)
            process.kill()
            process.wait()
            self._stderr.close()
            return f"the child compile took more than {CHILD_TIMEOUT_S:.0f} s"
        finally:
            self._close_stdin()
            self._release()
            _LIVE.discard(self)
        with self._stderr:
            if self.killed:
                return "killed"
            if process.returncode != 0:
                self._stderr.seek(0)
                lines = self._stderr.read().decode(errors="replace").strip().splitlines()
                return lines[-1] if lines else f"exit status {process.returncode}"
        return None

    def kill(self) -> None:
        """Stop the child now (it may leave a module without compiled code: the next compile
        of it starts over; Numba writes its cache files atomically)."""
        with self._lock:
            self.killed = True
            process = self._process
            if process is not None and process.poll() is None:
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
        process = self._process
        if process is not None and process.stdin is not None and not process.stdin.closed:
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


def compiled_before(path: Path) -> bool:
    """Whether Numba's cache beside the module holds compiled code of it (its index file)."""
    return any((path.parent / "__pycache__").glob(f"{path.stem}.main-*.nbi"))


def compile_once(path: Path, dtypes: Sequence[np.dtype]) -> "Child | None":
    """The module's compile, once over every process: under its lock (waited for without using
    a core, while another process compiles it), None when Numba's cache holds its compiled code
    already, else a started :class:`Child`, which holds the lock until it ends."""
    lock = _lock_file(path)
    if compiled_before(path):
        lock.close()
        return None
    return Child(path, dtypes, lock)


def main(argv: Sequence[str]) -> int:
    _exit_with_parent()
    path, dtypes = Path(argv[0]), [np.dtype(d) for d in argv[1].split(",") if d]
    compile_module(path, dtypes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
