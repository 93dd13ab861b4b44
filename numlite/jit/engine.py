"""The compiled engine of one interpreter: when to compile, running compiled, errors.

:class:`CompiledModel` is one root subgraph compiled: the generated module (see
:mod:`numlite.jit.codegen`), its arenas (the constants are read in place, through their
addresses), and ``run()``, which calls the compiled ``main`` (which releases the GIL and sets
the flush-to-zero mode itself) through the overload's entry point, and turns an error code
into the numlite error the NumPy engine raises (naming the node, through every IF and WHILE it
sits in). The root's inputs and outputs are views of the arenas, made the interpreter's own
arrays of those tensors (:meth:`CompiledModel.attach`), so ``set_tensor`` writes straight
into the compiled model's input, ``get_tensor`` and ``tensor()`` read its output, and an
invoke copies nothing.

:class:`JitManager` decides when (the interpreter's ``jit`` argument):

* ``True``: compile at ``allocate_tensors()`` (and again after a resize), then run compiled;
* ``"auto"``: run on NumPy at once; once a root subgraph has spent ``AUTO_HOT_SECONDS`` in
  NumPy invokes, generate its module there and compile it from a background thread, in a
  child process (:mod:`numlite.jit.compile_child`: a compile in this process would hold the
  GIL and slow the NumPy invokes meanwhile), then load it from the cache; invokes switch to
  it when it is ready. A model compiled before (by any process: the cache's index
  names the module for the model's hash and input shapes) is loaded in the background right
  at ``allocate_tensors()``, which takes milliseconds once Numba is imported;
* a model the engine does not cover (an op without compiled kernel, dynamic shapes) stays on
  NumPy; so does an invoke whose resource variables are not ready for the compiled code (see
  numlite/jit/kernels/variables.py); :meth:`JitManager.report` (``Interpreter.jit_report()``) and
  the ``numlite.jit`` logger say why, naming the node.

Watched invokes (profiling, ``check_cancelled``) always run on NumPy; ``cancel()`` sets the
flag compiled loops poll, so it stops a compiled invoke too.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from numlite.errors import CancelledError, InvokeError
from numlite.jit import status
from numlite.kernels.base import copy_into
from numlite.interpreter.threads import BlasThreads
from numlite.kernels.parallel import threads_now

if TYPE_CHECKING:
    from numlite.interpreter.runtime import SubgraphRuntime

log = logging.getLogger("numlite.jit")

AUTO_HOT_SECONDS = 0.5  # NumPy invoke time after which "auto" compiles a root subgraph
AUTO_MIN_INVOKES = 3  # ...and at least this many invokes (one slow first invoke is not "hot")
COST_SECONDS, COST_LINES = 7.0, 640  # a model's compile, roughly (CompiledModel.model_cost)

# Observers of the engines (the test suite records with them what ran where): each is called as
# ``observer(event, manager, root)``. Events: "made" (a JitManager was made; root -1),
# "compiled" (manager.last[root] was compiled, or loaded from a cache), "ran on numpy" and
# "ran compiled" (an invoke of root). Nothing is called, and nothing costs, while it is empty.
OBSERVERS: list[Callable[[str, "JitManager", int], None]] = []


def _notify(event: str, manager: "JitManager", root: int) -> None:
    for observer in list(OBSERVERS):
        observer(event, manager, root)


def _flushes(interpreter: Any) -> bool:
    """Whether the interpreter flushes denormals while it runs (``flush_denormals``)."""
    from numlite.interpreter import denormals

    return denormals.SUPPORTED and isinstance(interpreter._float_mode, denormals.FlushDenormals)


class CompiledModel:
    """One root subgraph (and its callees) compiled; see the module docstring."""

    def __init__(self, interpreter: Any, root: int) -> None:
        from numlite.jit.codegen import Generator

        started = time.perf_counter()
        self.interpreter = interpreter
        self.root = root
        gen = Generator(interpreter, root)
        self._take(gen, gen.generate())  # NotCompiled when the model is not covered
        self.generate_seconds = time.perf_counter() - started
        self.compile_seconds: float | None = None
        self.cache_hit = False
        self.reused = False  # main was compiled before for these types, in this process (the same source)
        self.compiled_in_child = False
        self.path = None
        self.fn: Callable[..., int] | None = None

    def _take(self, gen: Any, source: str) -> None:
        self.source = source
        self.generations = dict(gen.generations)
        self.operators = gen.ops
        self.arenas = gen.arenas
        self.inputs = gen.inputs
        self.outputs = gen.outputs
        self.traces = list(gen.traces)
        from numlite.jit.kernels.variables import State

        # resource variables and CALL_ONCE: bound to the interpreter's store before invokes
        self.state = State(self.interpreter, gen.variables, gen.call_once) if gen.variables or gen.call_once else None
        self.threads = gen.threads if gen.parallel else 0  # the prange loops' thread count (0: none)
        self.blas = gen.blas  # BLAS runs in it: num_threads sizes BLAS's pool around the call
        self._one_blas_thread = BlasThreads(1)
        # Run-time shapes: the ctl slots of error values and of the dims of root outputs of
        # run-time shape (returned by the compiled function after its code, see _run_dynamic).
        from numlite.jit.kernels.common import CTL_SIZE

        self.ctl_size = gen.ctl_size
        from numlite.jit.kernels import loops

        # filled (loops.ensure) before the model first runs; a parallel entry point's serial
        # twin too: an invoke on one thread (threads_now) calls the serial form
        self.loop_kernels = gen.loop_kernels | {(False, kind) for threads, kind in gen.loop_kernels if threads}
        parallel_table = loops.entry(True).ctypes.data
        # the ctl slots that hold the address of the parallel form's table of entry points
        self.table_slots = [CTL_SIZE + k for k, (_, flat, _) in enumerate(gen.arenas.constants) if flat.ctypes.data == parallel_table]
        self.tables = {True: parallel_table, False: loops.entry(False).ctypes.data}
        # The numbers lifted out of the source (codegen.lift): written into ctl by _bind.
        self.numbers_at = gen.numbers_at
        self.numbers = np.array(gen.numbers, np.int64)
        self.floats = np.array(gen.floats, np.float64)
        self.messages = list(gen.messages)
        self.errors_at = CTL_SIZE + len(gen.arenas.constants)
        self.dims_at = self.errors_at + gen.error_values
        self.dynamic_outputs = list(gen.dynamic_outputs)
        self.islands = list(gen.islands)
        self.island_table = gen.island_table
        subgraph = self.interpreter.subgraph
        self._watched = [(subgraph(i), g) for i, g in self.generations.items()]

    def refresh(self) -> bool:
        """After the runtimes were prepared again (``allocate_tensors`` rebinds them even when
        nothing changed): keep the compiled function when the generated source is the same,
        with arenas built anew from the runtimes' current constants. False when it differs."""
        from numlite.jit.codegen import Generator
        from numlite.jit.kernels import NotCompiled

        self.interpreter.subgraph(self.root).prepare_released()  # the generator reads the kernels
        gen = Generator(self.interpreter, self.root)
        try:
            source = gen.generate()
        except NotCompiled:
            return False
        if source != self.source:
            return False
        self._take(gen, source)
        self._bind()
        return True

    def compile(self, compiled_in_child: bool = False) -> None:
        """Write and load the module, build the arenas, and compile (or load from Numba's
        cache) ``main`` for their types. ``compiled_in_child``: a child process compiled it
        (:mod:`numlite.jit.compile_child`), so this loads its machine code from the cache."""
        import numba

        from numlite.jit import cache
        from numlite.jit.kernels.common import FLUSH, FLUSHES_INLINE

        started = time.perf_counter()
        self.path = cache.write_module(self.source)
        helpers = None if compiled_in_child else self._kernels_elsewhere()
        module = cache.load_module(self.path)
        self.ctl = np.zeros(self.ctl_size, np.int64)
        flushes = _flushes(self.interpreter)
        self.ctl[FLUSH] = flushes
        self.sets_float_mode = FLUSHES_INLINE or not flushes  # else the interpreter's context does it
        self._bind()
        self.compiled_in_child = compiled_in_child
        fn = module.main
        # The compiled overload's own entry point: no dispatch on the argument types (about
        # 0.5 us of Numba's dispatcher per call); the arenas' types never change for a source.
        signature = (numba.typeof(self.A), numba.typeof(self.ctl))
        self.reused = signature in fn.overloads
        try:
            entry = fn.compile(signature)
        except BaseException:
            if helpers is not None:
                helpers.kill()
            raise
        if helpers is not None:
            helpers.wait()  # (what they failed to compile is compiled below, here)
        self.cache_hit = bool(fn.stats.cache_hits) and not fn.stats.cache_misses
        from numlite.jit.kernels import loops

        loops.ensure(self.loop_kernels)  # the code calls them through their addresses: never run without
        self.compile_seconds = time.perf_counter() - started
        self.fn = entry

    @property
    def model_cost(self) -> float:
        """The CPU seconds the model's own function takes to compile, roughly (how a cold
        compile's work is shared out: numlite.jit.compile_child): MobileNetV2's module
        (COST_LINES lines) took about COST_SECONDS s of CPU on the machine of docs/jit.md."""
        return COST_SECONDS * self.source.count("\n") / COST_LINES

    def _kernels_elsewhere(self) -> Any:
        """``jit=True`` on a machine where Numba's cache lacks loop kernels this model calls:
        the kernels the model's compile here is not given (numlite.jit.kernels.loops.share) are
        compiled in child processes meanwhile (None when there are none); this process
        compiles the others now."""
        from numlite.jit import compile_child
        from numlite.jit.kernels import loops

        missing = loops.ensure(self.loop_kernels, compile_missing=False)
        if not missing:
            return None
        model_cost = 0.0 if compile_child.compiled_before(self.path) else self.model_cost
        shares = loops.share(missing, model_cost, compile_child.workers(), startup=compile_child.STARTUP_SECONDS)
        mine, theirs = shares[0][1], [items for _, items in shares[1:]]  # the model's share (first) is this process's
        helpers = compile_child.Child([compile_child.command(None, (), items) for items in theirs]) if theirs else None
        if helpers is not None and helpers.start_error is not None:
            helpers = None  # compiled here, by the final ensure
        loops.ensure(mine)
        return helpers

    def _bind(self) -> None:
        """The arenas (constants copied in) and the views of the root's inputs and outputs,
        which :meth:`attach` makes the interpreter's own arrays of those tensors."""
        from numlite.jit.kernels.common import CTL_SIZE

        self.A, addresses = self.arenas.build()
        self.ctl[CTL_SIZE : CTL_SIZE + len(addresses)] = addresses  # (self.arenas keeps them alive)
        at = self.numbers_at
        self.ctl[at] = self.floats.ctypes.data  # (self.floats keeps them alive)
        self.ctl[at + 1 : at + 1 + len(self.numbers)] = self.numbers
        runtime = self.interpreter.subgraph(self.root)
        self.views = [(t, self.arenas.view(self.A, slot, shape)) for t, slot, shape in self.inputs]
        self.views += [
            (t, self.arenas.view(self.A, slot, shape)) for t, slot, shape in self.outputs
            if not runtime.known[t] and t not in runtime.graph.inputs
        ]  # fmt: skip
        self.attached = False
        self._runs_attached = 0  # compiled runs since: the NumPy engine's weights go at the second (see run)
        self.copies: tuple[list, list] | None = None  # "auto": see _keep_arrays
        self._bind_islands()

    def _bind_islands(self) -> None:
        """The islands' NumPy kernels, each with its operands as arena views (or the runtime's
        own arrays of constants), and the callback the compiled code calls them through
        (kernels/islands.py), its address in the model's island table."""
        self._island_error: BaseException | None = None
        if not self.islands:
            return
        from numlite.jit.kernels.islands import CALLBACK

        self._island_runs = []
        for sub, node, ins, outs, _ in self.islands:
            runtime = self.interpreter.subgraph(sub)
            step = runtime.plan[node]
            arrays = [None if t < 0 else runtime.arrays[t] if spec is None else self.arenas.view(self.A, *spec)
                      for t, spec in zip(step.inputs, ins)]  # fmt: skip
            self._island_runs.append((step.kernel, arrays, [self.arenas.view(self.A, *spec) for spec in outs]))
        self._callback = CALLBACK(self._run_island)  # (kept alive by this model)
        self.island_table[0] = ctypes.cast(self._callback, ctypes.c_void_p).value

    def _run_island(self, number: int) -> int:
        """The callback: island ``number``'s NumPy kernel on the arenas; 1 after recording
        what it raised (a ctypes callback must not raise)."""
        try:
            kernel, ins, outs = self._island_runs[number]
            kernel.eval(ins, outs)
            return 0
        except BaseException as e:  # noqa: BLE001  (raised by the engine after the compiled code returns)
            from numlite.jit.kernels.islands import ISLAND

            self._island_error = e
            self.ctl[1] = ISLAND
            return 1

    def attach(self) -> None:
        """Make the arena views of the root's inputs and outputs the arrays the interpreter (and
        its NumPy engine) reads and writes for those tensors: ``set_tensor`` writes the compiled
        model's input, ``get_tensor`` reads its output, and an invoke copies nothing. The values
        they hold now (inputs set before a re-allocation) move into the views. Runs in the
        interpreter's thread (a background compile only builds the views)."""
        runtime = self.interpreter.subgraph(self.root)
        jit = getattr(self.interpreter, "_jit", None)
        if jit is not None and jit.mode == "auto" and self._keep_arrays(runtime):
            self.attached = True
            return
        for t, view in self.views:
            current = runtime.arrays[t]
            if current is not None and current is not view and current.shape == view.shape:
                copy_into(view, current)
            runtime.rebind(t, view)
        self.attached = True

    def _keep_arrays(self, runtime: Any) -> bool:
        """``"auto"`` switches engines under a running program, which may hold the arrays of
        ``tensor()`` across invokes (LiteRT forbids it; numlite's NumPy engine keeps them
        valid until a re-allocation). So the interpreter keeps its arrays, and each compiled
        run copies the inputs into the arenas and the outputs out (``self.copies``; a few
        microseconds, nothing next to a model hot enough to compile)."""
        inputs = {t for t, _, _ in self.inputs}
        copy_in, copy_out = [], []
        for t, view in self.views:
            current = runtime.arrays[t]
            if current is None or current.shape != view.shape or current.dtype != view.dtype:
                return False  # nothing held to go stale: bind as jit=True does
            (copy_in if t in inputs else copy_out).append((current, view))
        self.copies = (copy_in, copy_out)
        return True

    def current(self) -> bool:
        """Whether every subgraph it was generated from is still prepared as it was."""
        for runtime, generation in self._watched:
            if not runtime.allocated or runtime.generation != generation:
                return False
        return True

    def cancel(self) -> None:
        ctl = getattr(self, "ctl", None)
        if ctl is not None:
            ctl[0] = 1

    def run(self) -> None:
        """One invoke (the inputs and outputs are the arena views: see :meth:`attach`; the
        compiled ``main`` clears the cancel flag and the error code)."""
        if OBSERVERS:
            _notify("ran compiled", self.interpreter._jit, self.root)
        if self.copies is not None:
            self._run_copying()
        else:
            self._run_arenas()
        if self._runs_attached < 2:
            self._runs_attached += 1
            if self._runs_attached == 2:  # (not at the first: see _drop_numpy_weights)
                self._drop_numpy_weights()

    def _drop_numpy_weights(self) -> None:
        """Drop the weights the NumPy engine's kernels laid out at prepare, a second copy of
        what this model packed (ResNet50: 44-94 MiB), and give the pages back; they are
        prepared again if NumPy runs the subgraph later (SubgraphRuntime.release_weights).
        Done at the second compiled run after an attach (or when the invoke goes lean), so
        that a program calling allocate_tensors() before every invoke does not lay them out
        again each time (ResNet50: 110 ms more an allocate). Islands keep their kernels."""
        runtime = self.interpreter.subgraph(self.root)
        if runtime.release_weights(keep={node for sub, node, *_ in self.islands if sub == self.root}):
            _give_back_freed_memory()

    def lean(self) -> Callable[[], bool] | None:
        """The whole of a plain invoke in one closure, for ``Interpreter.invoke`` to call while
        it returns True: the checks of :meth:`current` and of the variables' binding, the
        copies of ``"auto"``, the call and its error. It returns False, having run nothing,
        once a runtime was prepared again or the variables need binding: the interpreter then
        takes its full path, which builds a new one. None for a model that runs threads, BLAS
        or outputs of run-time shape (their invokes cost far more than these checks). An
        invoke of a tiny model costs about a microsecond; each Python call on the way a tenth
        of one (the streaming model of benchmarks/jit_quantized.py: 2.15 us through
        :meth:`run` against 0.97 for the compiled call alone)."""
        if self.dynamic_outputs or self.blas or self.threads or not self.sets_float_mode or not self.attached:
            return None
        if self._runs_attached < 2:  # later invokes skip run(), which would drop them
            self._runs_attached = 2
            self._drop_numpy_weights()
        watched = tuple(self._watched)
        fn, arenas, ctl, error = self.fn, self.A, self.ctl, self._error
        state = self.state
        store = state.store if state is not None else None
        copy_in, copy_out = self.copies if self.copies is not None else ((), ())
        manager, root = self.interpreter._jit, self.root

        def invoke() -> bool:
            for runtime, generation in watched:
                if runtime.generation != generation or not runtime.allocated:
                    return False
            if state is not None and store.version != state.version:
                return False
            if OBSERVERS:
                _notify("ran compiled", manager, root)
            for array, view in copy_in:
                np.copyto(view, array)
            if fn(arenas, ctl):
                raise error()
            for array, view in copy_out:
                np.copyto(array, view)
            return True

        return invoke

    def _run_arenas(self) -> None:
        if self.dynamic_outputs:
            self._run_dynamic()
        elif self._state_bound() and self._call():
            raise self._error()

    def _run_copying(self) -> None:
        """:meth:`run` of ``"auto"``, whose interpreter kept its own arrays (see :meth:`_keep_arrays`)."""
        if not self._state_bound():
            return  # it ran on NumPy, on the interpreter's arrays
        copy_in, copy_out = self.copies
        for array, view in copy_in:
            np.copyto(view, array)
        self._run_arenas()
        for array, view in copy_out:
            np.copyto(array, view)

    def _run_dynamic(self) -> None:
        """:meth:`run` of a model with root outputs of run-time shape: the compiled function
        returns their arrays after its code, and their dims in ctl; they become the
        interpreter's arrays of those tensors, with their shapes (as the NumPy engine stores a
        dynamic node's outputs)."""
        if not self._state_bound():
            return
        result = self._call()
        if result[0]:
            raise self._error()
        runtime = self.interpreter.subgraph(self.root)
        ctl, at = self.ctl, self.dims_at
        for array, (t, _, rank, offset) in zip(result[1:], self.dynamic_outputs):
            shape = tuple(int(d) for d in ctl[at + offset : at + offset + rank])
            runtime.arrays[t] = array.reshape(shape)
            runtime.shapes[t] = shape

    def _state_bound(self) -> bool:
        """A model with variables first makes its variables' arrays the interpreter's (see
        numlite/jit/kernels/variables.py). When it cannot (a variable without value, or of
        another shape), this invoke runs on NumPy, and this returns False."""
        state = self.state
        if state is None or state.ready() or state.bind():
            return True
        interpreter = self.interpreter
        with interpreter._float_mode, interpreter._threads, np.errstate(all="ignore"):
            interpreter.subgraph(self.root).invoke()
        return False

    def _call(self) -> Any:
        """The compiled ``main``; a model with parallel loop kernels runs on the interpreter's
        ``num_threads``. Numba's thread count belongs to the calling thread
        (``numba.set_num_threads``), so two interpreters with different counts can run at once
        in two threads; the caller's count is restored. (It is set here, not in the compiled
        ``main``: a function calling Numba's thread-count functions cannot be cached.)"""
        if self.blas:
            # num_threads sizes NumPy's BLAS pool, as on the NumPy engine; but beside Numba's
            # parallel loop kernels BLAS runs on one thread. Both pools' workers spin for a while
            # after their work, each on the core the other's needs: MobileNetV2 with its 1x1
            # convolutions as BLAS products (a trial) took 250 ms at two threads against 55 on
            # the loop kernels alone (load 4.6) and 21 against 19 at one thread.
            with self._one_blas_thread if self.threads else self.interpreter._threads:
                return self._call_numba()
        return self._call_numba()

    def _call_numba(self) -> Any:
        if not self.threads:
            return self.fn(self.A, self.ctl)
        # Fewer threads while other processes keep the cores busy: a parallel region waits at
        # its end for every worker it woke, and a worker on a busy core waits for a time slice
        # (docs/jit.md, "Threads on a busy machine"). On one thread the nodes call the serial
        # entry points (a parallel region of one thread costs about 13 us more). Both forms
        # give the same bits, so the count may change from one invoke to the next.
        threads = threads_now(self.threads, foreign=True)
        table = self.tables[threads > 1]
        ctl = self.ctl
        for slot in self.table_slots:
            ctl[slot] = table
        if threads == 1:
            return self.fn(self.A, ctl)
        import numba

        saved = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            if _threadsafe_layer():
                return self.fn(self.A, self.ctl)
            with _WORKQUEUE:
                return self.fn(self.A, self.ctl)
        finally:
            numba.set_num_threads(saved)

    def _error(self) -> Exception:
        from numlite.errors import PrepareError
        from numlite.jit.kernels.common import CANCELLED, CODES, DYNAMIC_ERROR
        from numlite.jit.kernels.islands import ISLAND

        ctl = self.ctl
        code, sub, node = int(ctl[1]), int(ctl[2]), int(ctl[3])
        runtime = self.interpreter.subgraph(sub)
        step = runtime.plan[node]
        if code == CANCELLED:
            return CancelledError(f"invoke cancelled before {runtime.where(step)}")
        if code == ISLAND and self._island_error is not None:  # as the NumPy engine's invoke wraps it
            cause, self._island_error = self._island_error, None
            if isinstance(cause, (PrepareError, CancelledError)) or not isinstance(cause, Exception):
                return cause  # (already names its node; a KeyboardInterrupt as it is)
            error = runtime._invoke_error(step, cause)
            error.__cause__ = cause
            return error  # (islands are never inside control flow: no callers to name)
        if code >= DYNAMIC_ERROR and code - DYNAMIC_ERROR < len(self.messages):
            # A check of a run-time shape: the NumPy engine finds it when it prepares the node
            # at run time, so it raises the prepare error, naming the node alone.
            template, prepare = self.messages[code - DYNAMIC_ERROR]
            values = [int(v) for v in ctl[self.errors_at : self.errors_at + template.count("{}")]]
            if prepare:
                return PrepareError(f"{runtime.where(step)}: {template.format(*values)}")
            message = template.format(*values)
        else:
            message = CODES.get(code, "compiled kernel error {code}").format(a=int(ctl[4]), b=int(ctl[5]), code=code)
        error: Exception = runtime._invoke_error(step, InvokeError(message))
        for caller_index, node_index in reversed(self.traces[int(ctl[6])]):  # the IF and WHILE nodes it sits in
            caller = self.interpreter.subgraph(caller_index)
            error = caller._invoke_error(caller.plan[node_index], error)
        return error


def _give_back_freed_memory() -> None:
    """Return the heap's free pages to the system (glibc's ``malloc_trim``; elsewhere nothing).
    Arrays freed in the middle of the heap otherwise stay resident: under ``"auto"`` the
    NumPy engine's weights sit below the compiled model's, and ResNet50 kept 346 MiB of
    resident memory after dropping them against 223 with the trim (25 ms, once)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


try:
    _LIBC: Any = ctypes.CDLL(None)  # the process's own symbols: glibc's on Linux
except OSError:  # (Windows)
    _LIBC = None


# Numba's "workqueue" threading layer (where neither OpenMP nor TBB is found) aborts the process
# when two threads run parallel code at once: parallel invokes take turns there.
_WORKQUEUE = threading.Lock()
_LAYER: list[str] = []


def _threadsafe_layer() -> bool:
    """Whether Numba's threading layer, once loaded, is one that two threads may use at once."""
    if not _LAYER:
        import numba

        try:
            _LAYER.append(numba.threading_layer())
        except ValueError:  # not loaded before the first parallel kernel
            return False
    return _LAYER[0] != "workqueue"


class JitManager:
    """The compiled engine of one interpreter, by root subgraph; see the module docstring."""

    def __init__(self, interpreter: Any, mode: bool | str) -> None:
        self.interpreter = interpreter
        self.mode = mode
        self.engines: dict[int, CompiledModel] = {}  # ready to run
        # The root's CompiledModel.lean() closure, once an invoke ran it plainly; forgotten
        # whenever the engines change (it also checks itself on every call).
        self.lean: Callable[[], bool] | None = None
        self.reasons: dict[int, str] = {}  # why a root runs on NumPy
        self.numpy_seconds: dict[int, float] = {}
        self.numpy_invokes: dict[int, int] = {}
        self.pending: dict[int, threading.Thread] = {}
        self.last: dict[int, CompiledModel] = {}  # the last one built, for the report
        self.input_shapes: dict[int, tuple] = {}  # the root's input shapes at the last allocate
        self._model_hash: str | None = None
        # "auto": the models waiting for their child compile, the children, and a count per root
        # that abandoning a compile bumps (a background thread installs its result only if the
        # count is still the one it started with). The background threads hold this manager by
        # a weak reference while they wait, so an interpreter nobody uses any more is collected,
        # and its finalizer kills its children (also at exit: weakref.finalize's atexit).
        self.building: dict[int, CompiledModel] = {}
        self.children: dict[int, Any] = {}  # root -> compile_child.Child
        self._epoch: dict[int, int] = {}
        self.loading: set[int] = set()  # roots found in the cache's index, being loaded
        self.looked_up: dict[int, tuple] = {}  # the input shapes a root was last looked up for
        self._finalizer = weakref.finalize(self, _kill_children, self.children)
        if OBSERVERS:
            _notify("made", self, -1)

    # -- building ---------------------------------------------------------------------------------

    def allocated(self, sg: "SubgraphRuntime") -> None:
        """After ``allocate_tensors``: ``True`` compiles now."""
        engine = self.engines.get(sg.index)
        if engine is not None and (engine.current() or engine.refresh()):
            return
        self.engines.pop(sg.index, None)
        self.lean = None
        shapes = tuple(sg.shapes[i] for i in sg.graph.inputs)
        if self.input_shapes.get(sg.index) != shapes:  # new shapes: maybe compilable now, not hot yet
            self.input_shapes[sg.index] = shapes
            self.reasons.pop(sg.index, None)
            self.numpy_seconds.pop(sg.index, None)
            self.numpy_invokes.pop(sg.index, None)
            self.abandon(sg.index)  # a compile for the old shapes would be of no use
        if self.mode is True:
            built = self._generate(sg.index)
            if built is not None:
                self._compile(built)
        elif sg.index not in self.pending and self.looked_up.get(sg.index) != shapes and _index_exists():
            # Compiled before (by any process)? Looked up in the background, once per shapes:
            # the model's hash and the versions in the key take 10-100 ms; if so, loaded there.
            self.looked_up[sg.index] = shapes
            self._start_background(sg.index, generate_there=True)

    def current_epoch(self, root: int, epoch: int) -> bool:
        """Whether the background work started at ``epoch`` for ``root`` is still wanted (see :meth:`abandon`)."""
        return self._epoch.get(root, 0) == epoch

    def abandon(self, root: int) -> None:
        """Forget the background compile of ``root``, killing its child process."""
        self._epoch[root] = self._epoch.get(root, 0) + 1
        self.pending.pop(root, None)
        built = self.building.pop(root, None)
        if built is not None and self.last.get(root) is built:
            del self.last[root]  # the report then tells nothing of it
        child = self.children.pop(root, None)
        if child is not None:
            child.kill()

    def _index_key(self, root: int) -> str | None:
        """The cache index key of this model, root and input shapes (None without Numba)."""
        from importlib.util import find_spec

        from numlite.jit import cache

        if find_spec("numba") is None:
            return None
        if self._model_hash is None:
            self._model_hash = cache.model_key(self.interpreter.model)
        sg = self.interpreter.subgraph(root)
        return cache.index_key(self._model_hash, root, tuple(sg.shapes[i] for i in sg.graph.inputs))

    def _cached_before(self, root: int) -> bool:
        from numlite.jit import cache

        key = self._index_key(root)
        return key is not None and cache.recall(key) is not None

    def _generate(self, root: int) -> CompiledModel | None:
        from numlite import jit

        if self.interpreter.preserve_all_tensors:  # (first: no import of Numba for nothing)
            self.reasons[root] = "runs on NumPy: experimental_preserve_all_tensors keeps every intermediate tensor readable"
            return None
        if not jit.available():
            self.reasons[root] = status()
            return None
        from numlite.jit.kernels import NotCompiled

        try:
            built = CompiledModel(self.interpreter, root)
        except NotCompiled as e:
            self.reasons[root] = f"runs on NumPy: {e}"
            log.info("numlite.jit: subgraph %d %s", root, self.reasons[root])
            return None
        self.last[root] = built
        return built

    def _compile(self, built: CompiledModel, compiled_in_child: bool = False, epoch: int | None = None) -> None:
        """Compile (or load) ``built`` and install it; ``epoch``: only if not abandoned since."""
        try:
            built.compile(compiled_in_child)
        except Exception as e:  # a kernel that does not type: a bug of numlite.jit, not the model's
            self._failed(built.root, f"compiling failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            return
        if epoch is not None and not self.current_epoch(built.root, epoch):
            return  # abandoned meanwhile (re-allocated for other shapes)
        self.reasons.pop(built.root, None)
        self.lean = None
        self.engines[built.root] = built  # invoke checks, in the interpreter's thread, that it is current
        if OBSERVERS:
            _notify("compiled", self, built.root)
        key = self._index_key(built.root)
        if key is not None and built.path is not None:
            from numlite.jit import cache

            cache.remember(key, built.path)

    def _failed(self, root: int, why: str) -> None:
        self.reasons[root] = f"runs on NumPy: {why}"
        log.warning("numlite.jit: subgraph %d %s", root, self.reasons[root])

    # -- invoking ---------------------------------------------------------------------------------

    def ready(self, sg: "SubgraphRuntime") -> CompiledModel | None:
        """The compiled model of ``sg`` when there is one and it is current (else None: the
        invoke runs on NumPy, through :meth:`invoke`)."""
        engine = self.engines.get(sg.index)
        if engine is None:
            return None
        if engine.current() or engine.refresh():
            if not engine.attached:
                engine.attach()
            return engine
        self.lean = None
        del self.engines[sg.index]  # prepared for other shapes: rebuilt at allocate (True) or when hot
        return None

    def fast(self, sg: "SubgraphRuntime") -> CompiledModel | None:
        """The compiled model of ``sg`` when it can run at once: current, bound to the
        interpreter's arrays and setting the FP mode itself (else None: the interpreter takes
        its usual path, through :meth:`ready`)."""
        engine = self.engines.get(sg.index)
        if engine is not None and engine.attached and engine.sets_float_mode and engine.current():
            return engine
        return None

    def invoke(self, sg: "SubgraphRuntime", numpy_invoke: Callable[[], None]) -> None:
        """Run ``sg`` compiled when it is :meth:`ready`, else on NumPy (counting the time
        ``"auto"`` uses to find hot models)."""
        engine = self.ready(sg)
        if engine is not None:
            engine.run()
            return
        if OBSERVERS:
            _notify("ran on numpy", self, sg.index)
        pending = self.pending.get(sg.index)
        if self.mode != "auto" or sg.index in self.reasons or (pending is not None and not pending.lookup):  # type: ignore[attr-defined]
            numpy_invoke()  # (a lookup in the cache's index goes on counting: it may find nothing)
            return
        started = time.perf_counter()
        numpy_invoke()
        self.numpy_seconds[sg.index] = self.numpy_seconds.get(sg.index, 0.0) + time.perf_counter() - started
        self.numpy_invokes[sg.index] = self.numpy_invokes.get(sg.index, 0) + 1
        if self.numpy_seconds[sg.index] >= AUTO_HOT_SECONDS and self.numpy_invokes[sg.index] >= AUTO_MIN_INVOKES:
            self._start_background(sg.index)

    def _start_background(self, root: int, generate_there: bool = False) -> None:
        """Compile ``root`` in the background. The source is generated here (it reads the
        runtimes' state), then compiled in a child process (:mod:`numlite.jit.compile_child`)
        that a thread waits for; or, when ``generate_there`` (a model found in the cache index),
        generated and loaded in the thread (importing Numba then costs the caller nothing;
        invoke checks the result is still current). Nothing here raises into the caller's
        invoke: a failure leaves the model on NumPy, with the reason in the report."""
        epoch = self._epoch.get(root, 0)
        if generate_there:
            target: Callable[..., None] = _load_in_background
        else:
            try:
                built = self._generate(root)
            except Exception as e:  # a bug of the generator: the user's invoke goes on, on NumPy
                self._failed(root, f"generating failed ({type(e).__name__}: {e})")
                return
            if built is None:
                return
            self.building[root] = built
            target = _compile_in_child
        thread = threading.Thread(target=target, args=(weakref.ref(self), root, epoch), name=f"numlite-jit-{root}", daemon=True)
        thread.lookup = generate_there  # type: ignore[attr-defined]
        self.pending[root] = thread
        thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for background compiles (tests, benchmarks)."""
        for thread in list(self.pending.values()):
            thread.join(timeout)

    def cancel(self) -> None:
        for engine in list(self.engines.values()):
            engine.cancel()

    # -- reporting --------------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """What runs compiled and what does not, and why."""
        roots: dict[int, dict[str, Any]] = {}
        # (a root whose background thread only looks the model up in the cache's index is not
        # reported before it finds it: ``loading``)
        for root in sorted(set(self.last) | set(self.reasons) | set(self.engines) | set(self.building) | self.loading):
            built = self.engines.get(root) or self.last.get(root)
            entry: dict[str, Any] = {"compiled": root in self.engines}
            if root in self.children:
                entry["state"] = "compiling in a child process"
            elif root in self.building or root in self.loading:
                entry["state"] = "compiling in the background"
            if root in self.reasons:
                entry["reason"] = self.reasons[root]
            if built is not None:
                entry.update(
                    operators=built.operators, subgraphs=sorted(built.generations), module=str(built.path) if built.path else None,
                    generate_seconds=built.generate_seconds, compile_seconds=built.compile_seconds, cache_hit=built.cache_hit,
                    compiled_in_child=built.compiled_in_child, reused=built.reused,
                    arena_bytes=built.arenas.arena_bytes, constant_bytes=built.arenas.constant_bytes(shared=False),
                    shared_constant_bytes=built.arenas.constant_bytes(shared=True),
                    state_bytes=built.state.nbytes if built.state is not None else 0,  # within constant_bytes
                    islands=[f"subgraph {sub}, node {node} ({self.interpreter.subgraph(sub).plan[node].op_name}): {reason}"
                             for sub, node, _, _, reason in built.islands],
                )  # fmt: skip
            roots[root] = entry
        return {"mode": self.mode, "numba": status(), "subgraphs": roots}


# -- "auto": the background threads (module functions: they hold the manager by a weak reference) --


def _kill_children(children: dict[int, Any]) -> None:
    """The manager's finalizer: kill its child compiles (garbage collection, or exit)."""
    for root in list(children):
        child = children.pop(root, None)
        if child is not None:
            child.kill()


def _index_exists() -> bool:
    """Whether the cache has an index (where nothing was ever compiled, no lookup at all)."""
    from numlite.jit import cache

    return (cache.cache_dir() / "index").is_dir()


def _finished(ref: "weakref.ref[JitManager]", root: int) -> None:
    manager = ref()
    if manager is not None and manager.pending.get(root) is threading.current_thread():
        del manager.pending[root]


def _compile_in_child(ref: "weakref.ref[JitManager]", root: int, epoch: int) -> None:
    """Write the module of ``manager.building[root]``, compile it in a child process, then load
    it from the cache (or, where no child can be started, compile it in this thread)."""
    from numlite.jit import cache
    from numlite.jit.compile_child import compile_once

    try:
        manager = ref()
        built = manager.building.get(root) if manager is not None else None
        if manager is None or built is None or not manager.current_epoch(root, epoch):
            return
        path, dtypes = cache.write_module(built.source), built.arenas.dtypes
        kernels, model_cost = built.loop_kernels, built.model_cost
        del manager, built  # no strong reference while waiting: the interpreter may be collected
        # Once over all processes (batch workers of one model): under the module's lock, children
        # compile it (and the loop kernels it needs, when new) unless another process did
        # meanwhile, then this one loads it from the cache.
        child = compile_once(path, dtypes, kernels, model_cost)  # children are killed at once when this process exits
        manager = ref()
        if child is None:  # compiled by another process: loaded here
            if manager is not None and manager.current_epoch(root, epoch):
                manager._compile(manager.building.pop(root), compiled_in_child=True, epoch=epoch)
            return
        if manager is None:
            child.kill()
            return
        manager.children[root] = child
        if not manager.current_epoch(root, epoch):  # abandoned while it started (see abandon)
            child.kill()
        del manager
        why = child.wait()
        manager = ref()
        if manager is None or not manager.current_epoch(root, epoch) or child.killed:
            return  # collected, re-allocated, or the process is exiting: nothing to report
        manager.children.pop(root, None)
        built = manager.building.pop(root)
        if why is None or child.start_error is not None:  # compiled there, or no child possible: compile here
            manager._compile(built, compiled_in_child=why is None, epoch=epoch)
        else:
            manager._failed(root, f"compiling failed in a child process ({why})")
    except Exception as e:  # never an exception in a thread's traceback: the model stays on NumPy
        manager = ref()
        if manager is not None:
            manager._failed(root, f"compiling failed ({type(e).__name__}: {e})")
    finally:
        _finished(ref, root)


def _load_in_background(ref: "weakref.ref[JitManager]", root: int, epoch: int) -> None:
    """Look ``root`` up in the cache's index; if found, generate it and load its compiled code."""
    from numlite.jit import compile_child

    try:
        manager = ref()
        if manager is None:
            return
        if compile_child.EXITING or not manager._cached_before(root):
            return
        manager.loading.add(root)
        try:
            made = manager._generate(root)
            if made is not None:
                manager._compile(made, epoch=epoch)
        finally:
            manager.loading.discard(root)
    except Exception as e:
        manager = ref()
        if manager is not None:
            manager._failed(root, f"loading the compiled code failed ({type(e).__name__}: {e})")
    finally:
        _finished(ref, root)
