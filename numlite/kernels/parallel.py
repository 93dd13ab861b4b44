"""Splitting a heavy kernel's work over threads, and keeping BLAS out of their way.

NumPy runs each call on one core (BLAS aside) but releases the GIL while it computes, so a
kernel whose work divides into independent pieces (row blocks of a depthwise convolution's
output, blocks of a large element-wise op's output: :class:`ElementwiseSplit`) can run them on
several Python threads at once. Kernels built on BLAS products leave the threading to BLAS
(:data:`SPLIT_BLAS_KERNELS`). :func:`run` hands a list of tasks to a small pool
of worker threads and the calling thread alike; every thread takes the next task from one
shared iterator until none is left (work stealing). On a machine whose cores are busy with
other processes a worker may wake late or not at all; the caller then simply takes more of the
tasks, so a split never waits on a sleeping thread for more than the one task it is running.

While the tasks run, OpenBLAS is held to one thread (its own pool would otherwise spin up
beside ours on every small matmul of every task) and the workers take the caller's
floating-point environment, so that the interpreter's flush-to-zero mode holds in them too.

How many threads a kernel may use is decided at prepare (:func:`threads_for`): the
interpreter's ``num_threads`` (all usable cores by default), fewer when the work is too small to
pay for waking a thread. How many it does use is decided at each run: no more than the cores
other processes leave idle (:func:`idle_cores`, from ``/proc/stat``). On a loaded machine an
extra Python thread does not just find no core: when the OS preempts it while it holds the GIL,
the caller stalls until it runs again, and a split measures slower than no split at all.
"""

from __future__ import annotations

import ctypes
import glob
import itertools
import math
import os
import threading
import time
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from numlite.fpenv import load_libm

Task = Callable[[int], None]  # called with the thread's slot: 0 the caller, 1.. the workers

# Work (multiply-adds or element operations) below which an op is not split: waking a worker
# takes from tens of microseconds to over a millisecond (an idle virtual CPU), and two threads
# then hand the GIL back and forth at every NumPy call, so only ops of a millisecond or more
# gain (measured on a 2-core VM: 16M multiply-adds is about 0.3 ms of BLAS).
MIN_SPLIT_WORK = 1 << 24

# Fewest matmul rows per block when a product is cut into blocks of rows: every block streams
# the whole weight matrix through the cache, so thin blocks of a layer with many weights
# (ResNet50's 7x7x512 3x3 convolutions: 49 rows, 9 MiB of weights) multiply its memory traffic.
MIN_BLOCK_ROWS = 256


def cpu_count() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def requested_threads(node: Any) -> int:
    """The interpreter's ``num_threads`` for a kernel's node (None or -1: every usable core)."""
    runtime = getattr(node, "runtime", None)
    interpreter = getattr(runtime, "interpreter", None)
    n = getattr(interpreter, "num_threads", None)
    if n is None or n == -1:
        return cpu_count()
    return max(1, int(n))


# Whether kernels whose work is BLAS matmuls (float CONV_2D, FULLY_CONNECTED) cut them into
# row blocks on numlite's threads, with BLAS held to one thread each. Off: BLAS threading its
# own products measures faster (2 cores, OpenBLAS 0.3.31, num_threads=2: ResNet50 38 -> 30 ms,
# EfficientNetB0 15.3 -> 14.6 ms; its 56x56 3x3 layers 1.28 ms split, 0.82 ms BLAS-threaded),
# and the thin layers that cannot be cut (7x7 outputs) were on BLAS's threads already.
SPLIT_BLAS_KERNELS = False


def threads_for(node: Any, work: float, blas: bool = False) -> int:
    """Threads worth using for ``work`` multiply-adds on this node (1 for a kernel whose work
    is BLAS products, ``blas``, unless :data:`SPLIT_BLAS_KERNELS`)."""
    n = requested_threads(node)
    if n <= 1 or work < MIN_SPLIT_WORK or (blas and not SPLIT_BLAS_KERNELS):
        return 1
    return int(min(n, max(1, work // max(1, MIN_SPLIT_WORK // 2))))


def split(total: int, parts: int, minimum: int = 1) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges cutting ``range(total)`` into at most ``parts`` nearly equal pieces
    of at least ``minimum`` each (one piece when ``total`` is small)."""
    parts = max(1, min(parts, total // max(minimum, 1)))
    bounds = [total * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


# ----------------------------------------------------------------------------- idle cores


class _IdleCores:
    """Cores not used by other processes, from the change of the busy time of the cores this
    process may run on (their ``cpuN`` lines of ``/proc/stat``, so a container's or a
    ``taskset``'s cores, not the host's) minus this process's own CPU time, over windows of
    about a quarter second. The files, the process's CPU time (``own``), the clock and the
    cpus are parameters for the tests."""

    WINDOW = 0.25

    def __init__(self, stat: str = "/proc/stat", own: Callable[[], float] | None = None,
                 clock: Callable[[], float] = time.monotonic, cpus: Sequence[int] | None = None,
                 loadavg: str = "/proc/loadavg") -> None:
        self.tick = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
        self.cpus = frozenset(cpus if cpus is not None else _affinity())
        self.cores = max(1, len(self.cpus)) if self.cpus else cpu_count()
        self.idle = float(self.cores)
        self.last: tuple[float, float, float] | None = None
        self.stat = stat
        self.own = own or _own_cpu_seconds
        self.clock = clock
        self.loadavg = loadavg
        self.readable = os.path.exists(stat)
        self.next_read = -math.inf if self.readable else math.inf  # when the figure is read again

    def _busy_seconds(self) -> float:
        busy = 0
        with open(self.stat, "rb") as f:
            for line in f:
                if not line.startswith(b"cpu"):
                    break  # the cpu lines come first
                fields = line.split()
                if fields[0] == b"cpu" or (self.cpus and int(fields[0][3:]) not in self.cpus):
                    continue
                # user nice system idle iowait irq softirq steal: all but idle and iowait are busy
                values = [int(v) for v in fields[1:9]]
                busy += sum(values) - values[3] - values[4]
        return busy * self.tick

    def __call__(self) -> float:
        now = self.clock()
        if now < self.next_read:  # within the window (forever when /proc/stat cannot be read)
            return self.idle
        try:
            busy = self._busy_seconds()
        except (OSError, ValueError, IndexError):
            self.readable = False
            self.next_read = math.inf
            return self.idle
        self.next_read = now + self.WINDOW
        own = self.own()
        if self.last is not None:
            then, busy0, own0 = self.last
            others = ((busy - busy0) - (own - own0)) / (now - then)
            self.idle = min(float(self.cores), max(0.0, self.cores - others))
        else:
            self.idle = self._runnable_now()
        self.last = (now, busy, own)
        return self.idle

    def _runnable_now(self) -> float:
        """The first window's figure, before there is a change to measure: the cores less the
        threads runnable right now (``/proc/loadavg``'s fourth field, the calling thread taken
        off). That count is the whole machine's (a container may see its host's), so it errs
        towards fewer threads, for a quarter second."""
        try:
            with open(self.loadavg, "rb") as f:
                runnable = int(f.read().split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            return float(self.cores)
        return min(float(self.cores), max(0.0, self.cores - (runnable - 1)))


def _affinity() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset()


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


idle_cores = _IdleCores()


class _ForeignThreads:
    """The cores' worth of CPU that this process's threads started before numlite (OpenBLAS's
    workers, which NumPy's import starts; a framework's pools) used over the last window of
    about a quarter second, from ``/proc/self/task/<tid>/stat``. ``idle_cores`` counts them as
    this process's own, but they are not numlite's: after each BLAS call of NumPy's, in this
    process, OpenBLAS's workers spin for about 0.1 s, on the core a compiled parallel region's
    second thread needs (docs/jit.md, "Threads on a busy machine"). The thread ids, the file
    reader and the clock are parameters for the tests."""

    WINDOW = 0.25

    def __init__(self, tids: Sequence[int] | None = None, cpu: Callable[[int], float | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.tids = list(tids) if tids is not None else _threads_before_numlite()
        self.cpu = cpu or _thread_cpu_seconds
        self.clock = clock
        self.busy = 0.0
        self.last: tuple[float, dict[int, float]] | None = None  # (when, each thread's CPU seconds then)
        self.next_read = -math.inf if self.tids else math.inf

    def __call__(self) -> float:
        now = self.clock()
        if now < self.next_read:
            return self.busy
        self.next_read = now + self.WINDOW
        seconds = {tid: used for tid in self.tids if (used := self.cpu(tid)) is not None}  # (a thread that ended is dropped)
        self.tids = list(seconds)
        if not seconds:
            self.next_read = math.inf
        if self.last is not None:
            then, before = self.last
            used = sum(s - before.get(tid, s) for tid, s in seconds.items())
            self.busy = max(0.0, used / max(now - then, 1e-9))
        self.last = (now, seconds)
        return self.busy


def _threads_before_numlite() -> list[int]:
    """The ids of this process's threads now (at numlite's import), the calling one aside."""
    try:
        here = threading.get_native_id()
        return [int(t) for t in os.listdir("/proc/self/task") if int(t) != here]
    except (OSError, ValueError, AttributeError):
        return []


_TICK = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _thread_cpu_seconds(tid: int) -> float | None:
    """A thread's user and system CPU seconds, or None when it has ended."""
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _TICK  # utime, stime (fields 14 and 15 of stat)
    except (OSError, ValueError, IndexError):
        return None


foreign_busy = _ForeignThreads()
foreign_busy()  # the baseline: the first figure an invoke reads is then the rate since numlite's import


def fit_threads(requested: int, idle: float) -> int:
    """Threads to run ``requested`` threads' work on when other processes leave ``idle`` cores
    idle: no more than those (rounded to nearest), and at least the calling thread."""
    if requested <= 1:
        return 1
    return max(1, min(requested, int(idle + 0.5)))


def threads_now(requested: int, foreign: bool = False) -> int:
    """The threads a parallel run may use now: ``requested`` (the interpreter's
    ``num_threads``), fewer while other processes keep the cores busy (:func:`idle_cores`,
    re-read at most every quarter second, so a small invoke pays a comparison).

    Why: a fork-join region (OpenMP's, OpenBLAS's) waits at its end for every thread it woke,
    and on a core taken by another process a thread runs only when the scheduler gives it a
    time slice, milliseconds later. Their workers also spin between regions on the core the
    calling thread needs. On a 2-core machine at load 4.6, the compiled smallcnn took 7.5 ms
    at ``num_threads=2`` against 0.18 ms at 1 (docs/jit.md, "Threads on a busy machine").
    With ``foreign`` (the compiled engine, whose parallel regions are OpenMP's), the threads
    of this process that are not numlite's (:data:`foreign_busy`: OpenBLAS's workers) count
    as other processes do."""
    if requested <= 1:
        return 1
    idle = idle_cores()
    if foreign:  # also leave the cores this process's other threads keep busy (foreign_busy)
        idle -= foreign_busy()
    idle = int(idle + 0.5)  # fit_threads, inlined: this runs at every invoke
    return requested if idle >= requested else idle if idle > 1 else 1


# ----------------------------------------------------------------------------- OpenBLAS


def _load_openblas() -> tuple[Any, Any] | None:
    """NumPy's bundled OpenBLAS ``(set_num_threads, get_num_threads)``, or None if not found."""
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "lib*openblas*.so*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"), ("openblas", "")):
            try:
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}")
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}")
            except AttributeError:
                continue
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, getter
    return None


_BLAS = _load_openblas()


class _BlasSingleThread:
    """Context: OpenBLAS on one thread inside, its previous count restored after."""

    def __enter__(self) -> int:
        if _BLAS is None:
            return 0
        self.previous = _BLAS[1]()
        if self.previous != 1:
            _BLAS[0](1)
        return self.previous

    def __exit__(self, *exc: Any) -> None:
        if _BLAS is not None and self.previous != 1:
            _BLAS[0](self.previous)


# ----------------------------------------------------------------------------- FP environment


_LIBM = load_libm()
_ENV_BYTES = 64  # larger than fenv_t on every glibc platform


def _get_env(buffer: Any) -> bytes:
    if _LIBM is None:
        return b""
    _LIBM.fegetenv(buffer)
    return buffer.raw


# ----------------------------------------------------------------------------- the pool


class _Job:
    __slots__ = ("tasks", "count", "finished", "done", "error", "env")

    def __init__(self, tasks: Sequence[Task], env: bytes) -> None:
        self.tasks = iter(tasks)  # next() on a list iterator is atomic under the GIL
        self.count = len(tasks)
        self.finished = itertools.count(1)
        self.done = threading.Lock()
        self.done.acquire()  # released by whichever thread finishes the last task
        self.error: BaseException | None = None
        self.env = env

    def work(self, slot: int) -> None:
        for task in self.tasks:
            try:
                task(slot)
            except BaseException as e:  # handed to the caller, which raises it
                if self.error is None:
                    self.error = e
            if next(self.finished) == self.count:
                self.done.release()


class _Worker:
    def __init__(self, pool: "_Pool", slot: int) -> None:
        self.pool, self.slot = pool, slot
        self.wake = threading.Lock()
        self.wake.acquire()
        self.env = b""
        self.env_buffer = ctypes.create_string_buffer(_ENV_BYTES)
        self.thread = threading.Thread(target=self.loop, name=f"numlite-kernel-{slot}", daemon=True)
        self.thread.start()

    def loop(self) -> None:
        np.seterr(all="ignore")  # this thread's errstate, as the invoking thread's (Interpreter._invoke)
        while True:
            self.wake.acquire()
            job = self.pool.job
            if job is None:
                continue
            if job.env and job.env != self.env and _LIBM is not None:
                self.env_buffer.raw = job.env
                _LIBM.fesetenv(self.env_buffer)
                self.env = job.env
            job.work(self.slot)

    def signal(self) -> None:
        try:
            self.wake.release()
        except RuntimeError:  # already signalled and not yet awake: it will see the job
            pass


class _Pool:
    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.job: _Job | None = None
        self.lock = threading.Lock()  # one split at a time (interpreters in several threads)
        self.env_buffer = ctypes.create_string_buffer(_ENV_BYTES)

    def ensure(self, n: int) -> None:
        while len(self.workers) < n - 1:
            self.workers.append(_Worker(self, len(self.workers) + 1))

    def run(self, tasks: Sequence[Task], threads: int) -> None:
        threads = threads_now(threads)  # only onto cores other processes leave idle
        if threads <= 1 or len(tasks) <= 1 or not self.lock.acquire(blocking=False):
            with _BlasSingleThread():
                for task in tasks:
                    task(0)
            return
        try:
            self.ensure(threads)
            job = _Job(tasks, _get_env(self.env_buffer))
            self.job = job
            with _BlasSingleThread():
                for worker in self.workers[: min(threads, len(tasks)) - 1]:
                    worker.signal()
                job.work(0)
                job.done.acquire()
            self.job = None
        finally:
            self.lock.release()
        if job.error is not None:
            raise job.error


_POOL = _Pool()


def _reset_after_fork() -> None:  # a forked child has none of the parent's threads
    global _POOL
    _POOL = _Pool()
    idle_cores.last, idle_cores.next_read = None, -math.inf  # nor its CPU time: measure anew


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def serial(tasks: Sequence[Task]) -> None:
    """Run the tasks one after the other on the calling thread, OpenBLAS left as it is."""
    for task in tasks:
        task(0)


def runner(threads: int) -> Callable[[Sequence[Task]], None]:
    """What a kernel calls with its tasks at each eval: :func:`serial` on one thread (OpenBLAS
    keeps the interpreter's ``num_threads``: a product too thin to cut into row blocks, such
    as ResNet50's 7x7 layers, still runs on every core through BLAS), else :func:`run` on
    ``threads``."""
    if threads <= 1:
        return serial
    return partial(run, threads=threads)


def run(tasks: Sequence[Task], threads: int) -> None:
    """Run every task once, on up to ``threads`` threads (the caller's included); each task gets
    its thread's slot (0 for the caller, 1 to ``threads - 1`` for workers) to pick its scratch
    memory. Returns when all are done; re-raises the first exception a task raised."""
    _POOL.run(tasks, threads)


# ----------------------------------------------------------------------------- element-wise work

# Work units (as MIN_SPLIT_WORK counts them: about 0.02 ns of BLAS each) of one memory pass
# of an element-wise op over one float32 element (about 0.3 ns on large arrays). An op costs
# this times its passes per element (a multiply 1, LOGISTIC about 10: exp alone is ~7).
ELEMENT_PASS_WORK = 16

# Fewest elements per block of a split element-wise op: smaller blocks pay more for the calls
# (a few microseconds each) than the second core gains.
MIN_ELEMENTWISE_BLOCK = 1 << 15

# Whether large element-wise ops are cut into blocks on numlite's threads. Off: on their own
# they gain (np.exp over 1M values 350 -> 189 us on two cores), but inside a network, between
# products that OpenBLAS threads (its workers spin on the second core for a while after each),
# they lose: EfficientNetB0 at two threads 15.1 ms split against 14.3 unsplit, alternating in
# one process (its LOGISTIC ops 3.3 ms at one thread, 4.2 split at two); MobileNetV2 8.0 ms
# either way (it has no large ones). Kept, and tested, for other workloads.
SPLIT_ELEMENTWISE = False


class ElementwiseSplit:
    """An element-wise computation ``fn(*ins, out)`` cut into blocks of the output along its
    first axis longer than one, and run on up to ``threads`` threads (NumPy's ufuncs release
    the GIL). An input of the output's extent on that axis is cut the same way; one that
    broadcasts along it (a squeeze-excite scale ``[1, 1, 1, C]``) is passed whole. Blocks are
    bound to the arrays of the first call and rebound only when the arrays change."""

    def __init__(self, fn: Callable[..., None], shape: Sequence[int], threads: int, parts: int) -> None:
        self.fn = fn
        self.shape = tuple(int(d) for d in shape)
        self.axis = next((k for k, d in enumerate(self.shape) if d > 1), 0)
        extent = self.shape[self.axis] if self.shape else 1
        size = int(np.prod(self.shape, dtype=np.int64))
        rows = max(1, -(-MIN_ELEMENTWISE_BLOCK * extent // max(size, 1)))  # rows per block at least
        self.ranges = split(extent, parts, rows)
        self.threads = threads
        self.run = runner(threads)
        self.tasks: list[Task] = []
        self.bound: tuple = ()

    @classmethod
    def for_node(cls, node: Any, fn: Callable[..., None], shape: Sequence[int], passes: float) -> "ElementwiseSplit | None":
        """The split of ``fn``, an op of ``passes`` memory passes per element over an output
        of ``shape``, or None when it is not worth threads (or only one may be used, or
        :data:`SPLIT_ELEMENTWISE` is off)."""
        if not SPLIT_ELEMENTWISE:
            return None
        size = int(np.prod(shape, dtype=np.int64))
        threads = threads_for(node, size * passes * ELEMENT_PASS_WORK)
        if threads <= 1:
            return None
        split_ = cls(fn, shape, threads, 3 * threads)  # a few per thread: see conv.block_parts
        return split_ if len(split_.ranges) > 1 else None

    def _cut(self, a: np.ndarray, lo: int, hi: int) -> np.ndarray:
        k = self.axis - (len(self.shape) - a.ndim)  # broadcasting aligns trailing axes
        if k < 0 or a.shape[k] == 1:
            return a
        return a[(slice(None),) * k + (slice(lo, hi),)]

    def __call__(self, ins: Sequence[np.ndarray], out: np.ndarray) -> None:
        """``fn(*ins, out)``, block by block on several threads, or as one call when other
        processes leave no second core idle (:func:`run` would run the blocks one by one)."""
        if idle_cores() < 1.5:
            self.fn(*ins, out)
            return
        arrays = (*ins, out)
        if len(arrays) != len(self.bound) or any(a is not b for a, b in zip(arrays, self.bound)):
            fn = self.fn
            self.tasks = [
                partial(_call_block, fn, [self._cut(a, lo, hi) for a in ins], self._cut(out, lo, hi)) for lo, hi in self.ranges
            ]
            self.bound = arrays
        self.run(self.tasks)


def _call_block(fn: Callable[..., None], ins: list[np.ndarray], out: np.ndarray, slot: int) -> None:
    fn(*ins, out)
