"""The loop kernels' C entry points, one per op kind and form (``serial``, ``parallel``), shared
by every node of every loop-kernel op (CONV_2D, DEPTHWISE_CONV_2D, the pools, SOFTMAX, PAD, the
float32 LSTMs' sequences, and the large float32 FULLY_CONNECTED, SUM/MEAN and ADD/SUB/MUL).

A node's generated line is ``run(x, out, src, ctl, np.int64(a), np.int64(p), np.int64(f),
np.int64(nf), np.int64(kind))``: its input, output and working buffer (arena views), and the
``ctl`` slots of the table of entry points (:func:`entry`), of its int64 parameters and of its
float32 constants, which the kernel reads in place (``conv.call``). Each op kind has two parts,
compiled once, on their own, and cached on disk: ``setup`` (a padded copy of the input, say)
returns a number of units of work (output rows, blocks of output pixels), and ``units(u0, u1)``
computes units ``[u0, u1)``. The serial entry point of a kind runs them all in one call; the
parallel one runs one unit per ``prange`` step on the interpreter's ``num_threads``. Each entry
point is a C function (``cfunc``) taking each array as its data and size.

One entry point per kind, compiled only when a model needs that kind: the generator only
*names* the table (:func:`entry` compiles nothing), the engine fills the kinds a model uses
(:func:`ensure`) before its first run, from Numba's disk cache when it can, and a cold compile
can share the kinds out among processes (``numlite.jit.compile_child``). One entry point for
every kind (as before) cost every model the compile of every kind (about 15 s of CPU, once per
machine), all of it in one process.

Why so: Numba's parallel compile (parfors) of a whole kernel took 3-27 s per kernel here
(DEPTHWISE_CONV_2D 27 s, against 5 s serial), because it compiles the loop body again inside
its gufunc. Here the parallel function holds only a loop of calls to the serial bodies. The
calls go straight to the bodies: Numba links a callee's code into its caller and optimizes the
result again, so every level of calls in between costs the bodies' optimization once more
(a dispatch level of its own cost 5 s here)."""

from __future__ import annotations

import os
import re
import threading
import types as pytypes
from typing import Any, Iterable, Sequence

import numpy as np
from llvmlite import ir
from numba import carray, prange, types
from numba.extending import intrinsic

from numlite.jit.kernels import NotCompiled
from numlite.jit.kernels.activations import SOFTMAX, softmax_setup, softmax_units
from numlite.jit.kernels.binary import KIND as BINARY
from numlite.jit.kernels.binary import binary_setup, binary_units
from numlite.jit.kernels.common import CTL_SIZE, at, body, sources_digest
from numlite.jit.kernels.conv import KIND_CONV, KIND_DEPTHWISE, conv_setup, conv_units, depthwise_setup, depthwise_units
from numlite.jit.kernels.dense import KIND as DENSE
from numlite.jit.kernels.dense import fc_setup, fc_units
from numlite.jit.kernels.pad import KIND as PAD
from numlite.jit.kernels.pad import pad_setup
from numlite.jit.kernels.pooling import KIND as POOL
from numlite.jit.kernels.pooling import pool_setup, pool_units
from numlite.jit.kernels.quantized_conv import KIND_BYTE_CONV, KIND_BYTE_DEPTHWISE, byte_conv_setup, byte_conv_units, byte_depthwise_setup, \
    byte_depthwise_units
from numlite.jit.kernels.reduce import KIND as MEAN
from numlite.jit.kernels.reduce import mean_setup
from numlite.jit.kernels.rnn import KIND as LSTM
from numlite.jit.kernels.rnn import lstm_setup

# kind -> (setup, units): the kinds without units do all their work in setup
KINDS: dict[int, tuple[Any, Any]] = {
    KIND_CONV: (conv_setup, conv_units), KIND_DEPTHWISE: (depthwise_setup, depthwise_units), POOL: (pool_setup, pool_units),
    SOFTMAX: (softmax_setup, softmax_units), DENSE: (fc_setup, fc_units), BINARY: (binary_setup, binary_units),
    MEAN: (mean_setup, None), PAD: (pad_setup, None), KIND_BYTE_CONV: (byte_conv_setup, byte_conv_units),
    KIND_BYTE_DEPTHWISE: (byte_depthwise_setup, byte_depthwise_units), LSTM: (lstm_setup, None),
}  # fmt: skip
# The kinds on bytes: their input, output and working buffer are int8 arrays, and their
# constants (float32 words in ctl's table, as every kind's) are read as bytes.
BYTES = frozenset({KIND_BYTE_CONV, KIND_BYTE_DEPTHWISE})
PARALLEL = frozenset(kind for kind, (_, units) in KINDS.items() if units is not None)  # the kinds with units to share
TABLE_SIZE = 16  # entries of a table of entry points (every kind is below it)
# Seconds of each kind's cold compile, bodies included (Numba's event recorder, MobileNetV2 on
# the shared 2-core machine of docs/jit.md, "Cold compile and memory"): how a cold compile is
# shared out among processes (share), in the unit of the model's estimate
# (engine.CompiledModel.model_cost) and of a child's imports (compile_child.STARTUP_SECONDS).
COST: dict[int, float] = {KIND_CONV: 5.5, KIND_DEPTHWISE: 4.5, POOL: 1.3, SOFTMAX: 1.0, DENSE: 2.0, BINARY: 1.3, MEAN: 2.3, PAD: 0.8,
                          KIND_BYTE_CONV: 3.0, KIND_BYTE_DEPTHWISE: 3.0, LSTM: 7.0}  # fmt: skip
# (LSTM: 7.4 s on its own after MEAN's 1.2, time.perf_counter around ensure(), the Zen 4 machine, 2026-12-03)

# The templates of the entry points. SETUP and UNITS are not names of this module: each entry
# point is this code with a globals dict of its own that binds them to its kind's bodies.
SETUP: Any = None
UNITS: Any = None
CONSTANTS: Any = np.float32  # how the kind reads its float32 constants: np.int8 for the kinds on BYTES
WORD = 1  # (their elements per float32 word)


def _serial(xp, nx, op, no, sp, ns, cp, nctl, kp, kf, nf, kind):
    x, o, src, ctl = carray(xp, nx), carray(op, no), carray(sp, ns), carray(cp, nctl)
    p = carray(at(ctl[kp], np.int64), 32)  # at most 32 parameters: only those the kind knows are read
    f = carray(at(ctl[kf], CONSTANTS), WORD * nf)
    UNITS(x, o, src, f, p, np.int64(0), SETUP(x, o, src, f, p))


def _setup_only(xp, nx, op, no, sp, ns, cp, nctl, kp, kf, nf, kind):
    x, o, src, ctl = carray(xp, nx), carray(op, no), carray(sp, ns), carray(cp, nctl)
    p = carray(at(ctl[kp], np.int64), 32)
    f = carray(at(ctl[kf], CONSTANTS), WORD * nf)
    SETUP(x, o, src, f, p)


def _parallel(xp, nx, op, no, sp, ns, cp, nctl, kp, kf, nf, kind):
    x, o, src, ctl = carray(xp, nx), carray(op, no), carray(sp, ns), carray(cp, nctl)
    p = carray(at(ctl[kp], np.int64), 32)
    f = carray(at(ctl[kf], CONSTANTS), WORD * nf)
    n = SETUP(x, o, src, f, p)
    for u in prange(n):
        first = np.int64(u)  # int64: one signature of each body
        UNITS(x, o, src, f, p, first, first + 1)


# -- called through an address ---------------------------------------------------------------------
#
# A model's generated function does not call the entry points as Numba functions: Numba would
# link their code (every body) into the model's function and optimize it all again, about 20 s
# per model here. It calls the C entry point of its node's kind through its address, read from
# a table (one per form, serial or parallel) that the node's constants name.

_F32P, _I8P = types.CPointer(types.float32), types.CPointer(types.int8)
_C_SIGNATURE = types.void(_F32P, types.int64, _F32P, types.int64, _F32P, types.int64, types.CPointer(types.int64), types.int64,
                          types.int64, types.int64, types.int64, types.int64)  # fmt: skip
_C_BYTES_SIGNATURE = types.void(_I8P, types.int64, _I8P, types.int64, _I8P, types.int64, types.CPointer(types.int64), types.int64,
                                types.int64, types.int64, types.int64, types.int64)  # fmt: skip
# form (True: parallel) -> the addresses of its entry points by kind (0 until ensure() fills it)
_TABLES: dict[bool, np.ndarray] = {threads: np.zeros(TABLE_SIZE, np.int64) for threads in (False, True)}
_ENTRIES: dict[tuple[bool, int], Any] = {}  # the compiled entry points (alive as long as the process)
_LOCK = threading.RLock()  # the engine fills tables from background threads too
OMP_SPIN_COUNT = 20000  # libgomp's spins before a worker sleeps (about 0.2 ms; its default 300,000)


def entry(threads: bool) -> np.ndarray:
    """The table of entry points of the ``parallel`` (``threads``) or serial form: an int64
    array of addresses, indexed by kind, which the generator makes a constant of the model.
    Nothing is compiled here: :func:`ensure` fills the kinds a model uses before it runs. The
    array lives as long as the process, as the compiled code does."""
    return _TABLES[threads]


def spec(threads: bool, kind: int) -> str:
    """The name of an entry point on a command line: ``s0`` (serial CONV_2D), ``p12``..."""
    return f"{'p' if threads else 's'}{kind}"


def parse(text: str) -> tuple[bool, int]:
    """The entry point named by :func:`spec`."""
    return text[0] == "p", int(text[1:])


def used(lines: Sequence[str], alias: str | None, constants: Sequence[tuple[Any, np.ndarray, bool]]) -> frozenset[tuple[bool, int]]:
    """The entry points (form, kind) that the generated ``lines`` call (before codegen.lift, so
    with their numbers): ``alias`` is the generated module's name of :func:`run`, ``constants``
    the generator's (a node's line names the ctl slot of its table among them, and its kind)."""
    if alias is None:
        return frozenset()
    tables = {table.ctypes.data: threads for threads, table in _TABLES.items()}
    form = {CTL_SIZE + k: tables[flat.ctypes.data] for k, (_, flat, _) in enumerate(constants) if flat.ctypes.data in tables}
    call = re.compile(rf"\b{re.escape(alias)}\(.*, ctl, np\.int64\((\d+)\), (?:np\.int64\(\d+\), ){{3}}np\.int64\((\d+)\)\)")
    found, calls = set(), 0
    for line in lines:
        calls += len(re.findall(rf"\b{re.escape(alias)}\(", line))
        for table_slot, kind in call.findall(line):
            found.add((form[int(table_slot)], int(kind)))
            calls -= 1
    if calls or any(kind not in KINDS for _, kind in found):  # an entry left empty would be called: never
        raise NotCompiled("a loop kernel's call is not of the form numlite.jit.kernels.loops.used reads")
    return frozenset(found)


def ensure(needed: Iterable[tuple[bool, int]], compile_missing: bool = True) -> list[tuple[bool, int]]:
    """Fill the tables' entries of ``needed``: loaded from Numba's disk cache, else compiled
    (and cached) when ``compile_missing``. Returns the entries left empty (none when
    ``compile_missing``)."""
    missing = []
    with _LOCK:
        for threads, kind in sorted(needed):
            if (threads, kind) not in _ENTRIES and not _install(threads, kind, compile_missing):
                missing.append((threads, kind))
    return missing


def _install(threads: bool, kind: int, compile_missing: bool) -> bool:
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    if threads and "OMP_WAIT_POLICY" not in os.environ:
        # OpenMP workers (Numba's "omp" threading layer, libgomp) spin after a parallel region
        # for the next one, 300,000 spins (about 3 ms) by default, then sleep. Sleeping at once
        # (OMP_WAIT_POLICY=PASSIVE) makes every region pay a wake-up: a 64x64 matmul loop at
        # num_threads=2 took 98 ms for 1000 iterations, against 17 ms spinning 20,000 (about
        # 0.2 ms), and MobileNetV2 13.2 ms against 8.4 (docs/jit.md, "OpenMP's wait policy").
        # Spinning without bound is no better: where runnable threads outnumber cores the
        # spinner takes the core the interpreter's thread needs. Set before the threading layer
        # is loaded (at the first parallel kernel); a policy or spin count of the user's own is kept.
        os.environ.setdefault("GOMP_SPINCOUNT", str(OMP_SPIN_COUNT))
    setup, units = KINDS[kind]
    template = _parallel if threads else _serial if units is not None else _setup_only
    signature, constants, word = (_C_BYTES_SIGNATURE, np.int8, 4) if kind in BYTES else (_C_SIGNATURE, np.float32, 1)
    # Numba's disk cache checks only the time stamp of this file, not of the bodies it links
    # in: the bodies' sources are part of the cached function's name instead.
    name = f"{'parallel' if threads else 'serial'}_{kind}_{sources_digest()}"
    bound = {"SETUP": setup, "UNITS": units, "CONSTANTS": constants, "WORD": word}
    fn = pytypes.FunctionType(template.__code__, {**template.__globals__, **bound}, name)
    fn.__qualname__ = name
    fn.__module__ = template.__module__
    options = dict(nogil=True, error_model="numpy", parallel=threads)
    entry_point = CFunc(fn, sigutils.normalize_signature(signature), locals={}, options=options)  # as numba.cfunc makes it
    entry_point.enable_caching()
    if not _load_cached(entry_point):
        if not compile_missing:
            return False
        entry_point.compile()
    _ENTRIES[threads, kind] = entry_point
    _TABLES[threads][kind] = entry_point.address
    return True


def _load_cached(entry_point: Any) -> bool:
    """``CFunc.compile`` up to its cache lookup: True when the disk cache held the code (then
    the entry point is ready), False without compiling anything."""
    try:
        cres = entry_point._cache.load_overload(entry_point._sig, entry_point._targetdescr.target_context)
    except Exception:  # a cache of another Numba, unreadable: compile() will tell
        return False
    if cres is None:
        return False
    entry_point._cache_hits += 1
    entry_point._library = cres.library
    entry_point._wrapper_name = cres.fndesc.llvm_cfunc_wrapper_name
    entry_point._wrapper_address = entry_point._library.get_pointer_to_function(entry_point._wrapper_name)
    return True


def share(
    needed: Iterable[tuple[bool, int]], model_cost: float, workers: int, startup: float = 0.0
) -> list[tuple[bool, list[tuple[bool, int]]]]:
    """Share a cold compile out among ``workers`` processes: the model's function (when
    ``model_cost`` > 0, its CPU seconds) to the first, then the entry points ``needed``,
    heaviest first, each to the least loaded worker (the others start at ``startup`` seconds:
    a child process's imports, where the first worker is the caller's own process). Returns,
    per worker with work, (whether it compiles the model, its entry points), the first
    worker's first."""
    loads = [max(model_cost, 0.0)] + [startup] * (max(workers, 1) - 1)
    items: list[list[tuple[bool, int]]] = [[] for _ in loads]
    for threads, kind in sorted(needed, key=lambda k: (-_cost(*k), k)):
        least = loads.index(min(loads))
        loads[least] += _cost(threads, kind)
        items[least].append((threads, kind))
    shares = [(k == 0 and model_cost > 0, sorted(mine)) for k, mine in enumerate(items)]
    return [share for share in shares if share[0] or share[1]]


def _cost(threads: bool, kind: int) -> float:
    return COST.get(kind, 1.0) * (1.5 if threads else 1.0)  # a parallel entry point compiles parfors too


@intrinsic
def _call_address(typingctx: Any, address: Any, x: Any, o: Any, src: Any, ctl: Any, kp: Any, kf: Any, nf: Any, kind: Any) -> Any:
    """Call the C entry point at ``address`` with the arrays' data and sizes."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        values = []
        for ty, value in zip(signature.args[1:5], args[1:5]):
            array = context.make_array(ty)(context, builder, value)
            values += [array.data, array.nitems]
        values += list(args[5:])
        fnty = ir.FunctionType(ir.VoidType(), [v.type for v in values])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), values)
        return context.get_dummy_value()

    return types.none(types.int64, x, o, src, ctl, types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def _load(typingctx: Any, address: Any) -> Any:
    """The int64 at ``address`` (no ``carray``: its lowering, once per node, cost compile time)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))

    return types.int64(types.int64), codegen


@body
def run(x, o, src, ctl, ka, kp, kf, nf, kind):
    """The generated code's call of a loop kernel: ``ctl[ka]`` holds the address of the table
    of entry points of the node's form (:func:`entry`), whose entry ``kind`` is the node's."""
    _call_address(_load(ctl[ka] + 8 * kind), x, o, src, ctl, kp, kf, nf, kind)
