"""``num_threads`` on a busy machine (numlite.kernels.parallel.threads_now, docs/jit.md,
"Threads on a busy machine"): an invoke uses no more threads than the cores other processes
leave idle, measured from ``/proc/stat``. These tests feed the measurement fixed numbers (a
file of their own, a clock and the process's CPU time as parameters), so nothing depends on
the load of the machine that runs them. The compiled engine's side (its outputs bit for bit
at either count) is in tests/test_jit_conv.py, on that file's model."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from numlite.interpreter import threads as blas_threads
from numlite.kernels import parallel


@pytest.mark.parametrize(
    "requested, idle, expected",
    [(1, 0.0, 1), (1, 8.0, 1), (2, 2.0, 2), (2, 1.6, 2), (2, 1.4, 1), (2, 0.0, 1), (4, 2.6, 3), (4, 64.0, 4), (8, 0.4, 1)],
)
def test_threads_fit_the_idle_cores(requested, idle, expected):
    assert parallel.fit_threads(requested, idle) == expected


def _stat(path, per_cpu: list[tuple[int, int]]) -> None:
    """A /proc/stat of cpus with (busy, idle) ticks each: user holds the busy ticks."""
    total_busy, total_idle = sum(b for b, _ in per_cpu), sum(i for _, i in per_cpu)
    lines = [f"cpu  {total_busy} 0 0 {total_idle} 0 0 0 0 0 0"]
    lines += [f"cpu{k} {b} 0 0 {i} 0 0 0 0 0 0" for k, (b, i) in enumerate(per_cpu)]
    lines += ["intr 12345 1 2 3", "ctxt 999"]
    path.write_text("\n".join(lines) + "\n")


def test_idle_cores_count_only_the_cores_this_process_may_use(tmp_path):
    """Two of four cpus are this process's (its affinity); the others' busy time is not counted,
    and this process's own CPU time is taken off: what is left is other processes' work."""
    stat = tmp_path / "stat"
    clock, own = [100.0], [10.0]
    _stat(stat, [(0, 0)] * 4)
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.50 0.40 0.30 1/345 12345\n")  # runnable now: the calling thread alone
    idle = parallel._IdleCores(stat=str(stat), own=lambda: own[0], clock=lambda: clock[0], cpus=[1, 3], loadavg=str(loadavg))
    tick = idle.tick
    assert idle.cores == 2
    assert idle() == 2.0  # no window yet: the cores less the threads runnable now, the caller's not counted
    # one second later: cpu1 busy 1 s, cpu3 busy 1 s, of which this process 0.5 s; cpus 0 and 2 busy, not ours
    clock[0] += 1.0
    own[0] += 0.5
    _stat(stat, [(int(1 / tick), 0), (int(1 / tick), 0), (int(1 / tick), 0), (int(1 / tick), 0)])
    assert idle() == pytest.approx(2.0 - 1.5)
    assert parallel.fit_threads(2, idle()) == 1
    # within the window the last figure is kept, without reading the file
    stat.write_text("not a stat file\n")
    clock[0] += parallel._IdleCores.WINDOW / 2
    assert idle() == pytest.approx(0.5)


def test_idle_cores_of_a_quiet_machine_and_an_unreadable_file(tmp_path):
    stat = tmp_path / "stat"
    clock, own = [0.0], [0.0]
    _stat(stat, [(0, 0), (0, 0)])
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("5.10 4.00 3.00 4/345 12345\n")  # three runnable threads besides the caller
    idle = parallel._IdleCores(stat=str(stat), own=lambda: own[0], clock=lambda: clock[0], cpus=[0, 1], loadavg=str(loadavg))
    assert idle() == 0.0  # the first window: no core idle
    clock[0] += 0.5
    own[0] += 0.9  # this process alone is busy: 0.9 s of the 0.9 s busy time is its own
    _stat(stat, [(int(0.45 / idle.tick), 0), (int(0.45 / idle.tick), 0)])
    assert idle() == pytest.approx(2.0)
    clock[0] += 0.5
    stat.write_text("cpu0 x y\n")  # unreadable from now on: the last figure stays
    assert idle() == pytest.approx(2.0)
    assert not idle.readable
    missing = parallel._IdleCores(stat=str(tmp_path / "none"), cpus=[0, 1, 2], loadavg=str(tmp_path / "none"))
    assert missing() == 3.0  # no /proc/stat (another OS): every core counts as idle


@pytest.mark.parametrize("requested", [2, None])
@pytest.mark.parametrize("idle, inside", [(64.0, 2), (0.3, 1)])
def test_blas_pool_shrinks_while_the_cores_are_busy(monkeypatch, idle, inside, requested):
    """``num_threads=2``, or none (the pool's own size, 2 here), sizes OpenBLAS's pool at 2 on
    idle cores, at 1 while other processes take them; the size from before comes back after
    the invoke."""
    if not blas_threads.supported():
        pytest.fail("threadpoolctl found no BLAS in NumPy: num_threads cannot size a pool here")
    controller = blas_threads._controllers()[0]
    monkeypatch.setattr(parallel, "idle_cores", lambda: idle)
    monkeypatch.setattr(blas_threads, "_DEFAULT_SIZES", {})  # None: the size found at the first entry, 2 here
    original = controller.get_num_threads()
    controller.set_num_threads(2)
    try:
        with blas_threads.BlasThreads(requested):
            assert controller.get_num_threads() == inside
            np.dot(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))  # the pool in use
        assert controller.get_num_threads() == 2
    finally:
        controller.set_num_threads(original)


@pytest.mark.parametrize("idle", [0.0, 0.6, 1.4, 1.6, 2.6, 64.0])
def test_threads_now_fits_the_measured_idle_cores(monkeypatch, idle):
    monkeypatch.setattr(parallel, "idle_cores", lambda: idle)
    assert [parallel.threads_now(n) for n in range(1, 9)] == [parallel.fit_threads(n, idle) for n in range(1, 9)]


def test_a_shrunk_pool_does_not_become_the_default(monkeypatch):
    """Without ``num_threads`` an invoke asks for the pool's size at the first entry, and
    restores that size: a pool that another thread's invoke shrank meanwhile (and restores
    itself) is left alone on idle cores, and not taken for the size to restore on busy ones."""
    if not blas_threads.supported():
        pytest.fail("threadpoolctl found no BLAS in NumPy: num_threads cannot size a pool here")
    controller = blas_threads._controllers()[0]
    idle = [64.0]
    monkeypatch.setattr(parallel, "idle_cores", lambda: idle[0])
    monkeypatch.setattr(blas_threads, "_DEFAULT_SIZES", {})
    original = controller.get_num_threads()
    controller.set_num_threads(2)
    try:
        with blas_threads.BlasThreads(None):
            assert controller.get_num_threads() == 2
        controller.set_num_threads(1)  # another thread's invoke, on busy cores, in the middle
        with blas_threads.BlasThreads(None):
            assert controller.get_num_threads() == 1  # untouched on idle cores
        assert controller.get_num_threads() == 1
        idle[0] = 0.0
        with blas_threads.BlasThreads(None):
            assert controller.get_num_threads() == 1
        assert controller.get_num_threads() == 2  # the default, not the size found
    finally:
        controller.set_num_threads(original)


def test_this_process_s_other_threads_count_as_busy_for_the_compiled_engine(monkeypatch):
    """Threads that were running before numlite (OpenBLAS's workers, spinning after NumPy's
    BLAS calls in this process) leave fewer cores to the compiled engine's parallel regions
    (``threads_now(..., foreign=True)``), not to the NumPy engine; a thread that ended is
    dropped."""
    clock, cpu = [0.0], {7: 10.0, 8: 3.0}
    foreign = parallel._ForeignThreads(tids=[7, 8], cpu=lambda tid: cpu.get(tid), clock=lambda: clock[0])
    assert foreign() == 0.0  # the first window has nothing to compare with
    clock[0] += 0.25
    cpu[7] += 0.25  # spinning the whole window
    cpu[8] += 0.05
    assert foreign() == pytest.approx(1.2)
    clock[0] += 0.1
    cpu[7] += 0.1
    assert foreign() == pytest.approx(1.2)  # within the window: the figure stands
    clock[0] += 0.25
    del cpu[8]  # ended
    assert foreign() == pytest.approx(0.1 / 0.35)  # thread 7's 0.1 s since the last read
    assert foreign.tids == [7]
    monkeypatch.setattr(parallel, "idle_cores", lambda: 2.0)
    monkeypatch.setattr(parallel, "foreign_busy", lambda: 0.9)
    assert parallel.threads_now(2) == 2 and parallel.threads_now(2, foreign=True) == 1
    monkeypatch.setattr(parallel, "foreign_busy", lambda: 0.3)
    assert parallel.threads_now(2, foreign=True) == 2


def test_a_thread_s_cpu_time_is_read_from_proc():
    """``_thread_cpu_seconds`` on a real thread: it grows while the thread works; None for a
    thread that does not exist."""
    if not os.path.exists("/proc/self/task"):
        pytest.fail("no /proc/self/task on this machine: the compiled engine cannot see OpenBLAS's workers here")
    started, done = threading.Event(), threading.Event()
    tid = []

    def work() -> None:
        tid.append(threading.get_native_id())
        started.set()
        data = np.random.default_rng(0).random(1 << 20)
        while not done.is_set():
            np.sort(data)  # releases the GIL

    thread = threading.Thread(target=work)
    thread.start()
    try:
        started.wait()
        before = parallel._thread_cpu_seconds(tid[0])
        deadline = time.monotonic() + 5.0
        while parallel._thread_cpu_seconds(tid[0]) <= before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert parallel._thread_cpu_seconds(tid[0]) > before
    finally:
        done.set()
        thread.join()
    assert parallel._thread_cpu_seconds(2**31 - 7) is None
