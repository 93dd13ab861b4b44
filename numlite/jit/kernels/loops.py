"""The loop kernels' two entry points: ``serial`` and ``parallel``, shared by every node of
every loop-kernel op (CONV_2D, DEPTHWISE_CONV_2D, the pools, SOFTMAX, PAD, and the large float32
FULLY_CONNECTED, SUM/MEAN and ADD/SUB/MUL).

A node's generated line is ``serial(x, out, src, ctl, np.int64(p), np.int64(f),
np.int64(nf), np.int64(kind))``: its input, output and working buffer (arena views), and the
``ctl`` slots of its int64 parameters and float32 constants, which the kernel reads in place
(``conv.call``). Each op kind has two parts, compiled once, on their own, and cached on disk:
``setup`` (a padded copy of the input, say) returns a number of units of work (output rows,
blocks of output pixels), and ``units(u0, u1)`` computes units ``[u0, u1)``. ``serial`` runs
them all in one call; ``parallel`` runs one unit per ``prange`` step on the interpreter's
``num_threads``. Both are C entry points (``cfunc``), taking each array as its data and size.

Why so: Numba's parallel compile (parfors) of a whole kernel took 3-27 s per kernel here
(DEPTHWISE_CONV_2D 27 s, against 5 s serial), because it compiles the loop body again inside
its gufunc. Here the parallel function holds only a loop of calls to the serial bodies. The
calls go straight to the bodies: Numba links a callee's code into its caller and optimizes the
result again, so every level of calls in between costs the bodies' optimization once more
(a dispatch level of its own cost 5 s here)."""

from __future__ import annotations

import os
import types as pytypes
from typing import Any

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, prange, types
from numba.extending import intrinsic

from numlite.jit.kernels.activations import SOFTMAX, softmax_setup, softmax_units
from numlite.jit.kernels.binary import KIND as BINARY
from numlite.jit.kernels.binary import binary_setup, binary_units
from numlite.jit.kernels.common import at, kernel
from numlite.jit.kernels.conv import KIND_CONV, KIND_DEPTHWISE, conv_setup, conv_units, depthwise_setup, depthwise_units
from numlite.jit.kernels.dense import KIND as DENSE
from numlite.jit.kernels.dense import fc_setup, fc_units
from numlite.jit.kernels.pad import pad_setup
from numlite.jit.kernels.pooling import KIND as POOL
from numlite.jit.kernels.pooling import pool_setup, pool_units
from numlite.jit.kernels.reduce import KIND as MEAN
from numlite.jit.kernels.reduce import mean_setup

PARALLEL = frozenset({KIND_CONV, KIND_DEPTHWISE, POOL, SOFTMAX, DENSE, BINARY})  # the kinds with units to share


def serial(xp, nx, op, no, sp, ns, cp, nctl, kp, kf, nf, kind):
    x, o, src, ctl = carray(xp, nx), carray(op, no), carray(sp, ns), carray(cp, nctl)
    p = carray(at(ctl[kp], np.int64), 32)  # at most 32 parameters: only those the kind knows are read
    f = carray(at(ctl[kf], np.float32), nf)
    if kind == KIND_CONV:
        conv_units(x, o, src, f, p, np.int64(0), conv_setup(x, o, src, f, p))
    elif kind == KIND_DEPTHWISE:
        depthwise_units(x, o, src, f, p, np.int64(0), depthwise_setup(x, o, src, f, p))
    elif kind == POOL:
        pool_units(x, o, src, f, p, np.int64(0), pool_setup(x, o, src, f, p))
    elif kind == SOFTMAX:
        softmax_units(x, o, src, f, p, np.int64(0), softmax_setup(x, o, src, f, p))
    elif kind == DENSE:
        fc_units(x, o, src, f, p, np.int64(0), fc_setup(x, o, src, f, p))
    elif kind == BINARY:
        binary_units(x, o, src, f, p, np.int64(0), binary_setup(x, o, src, f, p))
    elif kind == MEAN:
        mean_setup(x, o, src, f, p)
    else:
        pad_setup(x, o, src, f, p)


def parallel(xp, nx, op, no, sp, ns, cp, nctl, kp, kf, nf, kind):
    x, o, src, ctl = carray(xp, nx), carray(op, no), carray(sp, ns), carray(cp, nctl)
    p = carray(at(ctl[kp], np.int64), 32)
    f = carray(at(ctl[kf], np.float32), nf)
    if kind == KIND_CONV:
        n = conv_setup(x, o, src, f, p)
    elif kind == KIND_DEPTHWISE:
        n = depthwise_setup(x, o, src, f, p)
    elif kind == POOL:
        n = pool_setup(x, o, src, f, p)
    elif kind == DENSE:
        n = fc_setup(x, o, src, f, p)
    elif kind == BINARY:
        n = binary_setup(x, o, src, f, p)
    else:
        n = softmax_setup(x, o, src, f, p)
    for u in prange(n):
        first = np.int64(u)  # int64: one signature of each body
        if kind == KIND_CONV:
            conv_units(x, o, src, f, p, first, first + 1)
        elif kind == KIND_DEPTHWISE:
            depthwise_units(x, o, src, f, p, first, first + 1)
        elif kind == POOL:
            pool_units(x, o, src, f, p, first, first + 1)
        elif kind == DENSE:
            fc_units(x, o, src, f, p, first, first + 1)
        elif kind == BINARY:
            binary_units(x, o, src, f, p, first, first + 1)
        else:
            softmax_units(x, o, src, f, p, first, first + 1)


# -- called through an address ---------------------------------------------------------------------
#
# A model's generated function does not call ``serial`` or ``parallel`` as Numba functions: Numba
# would link their code (every body) into the model's function and optimize it all again, about
# 20 s per model here. It calls a C entry point of theirs (``cfunc``, compiled once per process,
# cached on disk) through its address, which the node's constants hold.

_F32P = types.CPointer(types.float32)
_C_SIGNATURE = types.void(_F32P, types.int64, _F32P, types.int64, _F32P, types.int64, types.CPointer(types.int64), types.int64,
                          types.int64, types.int64, types.int64, types.int64)  # fmt: skip
_ENTRIES: dict[bool, Any] = {}
OMP_SPIN_COUNT = 20000  # libgomp's spins before a worker sleeps (about 0.2 ms; its default 300,000)
_ADDRESSES: dict[bool, np.ndarray] = {}


def entry(threads: bool) -> np.ndarray:
    """A one-element int64 array holding the address of the C entry point of ``parallel``
    (``threads``) or ``serial``, compiled (or loaded from the disk cache) on first use; the
    generator makes it a constant of the model. The array lives as long as the process, as
    the compiled code does."""
    if threads not in _ADDRESSES:
        # OpenMP workers (Numba's "omp" threading layer, libgomp) spin after a parallel region
        # for the next one, 300,000 spins (about 3 ms) by default, then sleep. Sleeping at once
        # (OMP_WAIT_POLICY=PASSIVE) makes every region pay a wake-up: a 64x64 matmul loop at
        # num_threads=2 took 98 ms for 1000 iterations, against 17 ms spinning 20,000 (about
        # 0.2 ms), and MobileNetV2 13.2 ms against 8.4 (docs/jit.md, "OpenMP's wait policy").
        # Spinning without bound is no better: where runnable threads outnumber cores the
        # spinner takes the core the interpreter's thread needs. Set before the threading layer
        # is loaded (at the first parallel kernel); a policy or spin count of the user's own is kept.
        if threads and "OMP_WAIT_POLICY" not in os.environ:
            os.environ.setdefault("GOMP_SPINCOUNT", str(OMP_SPIN_COUNT))
        fn = parallel if threads else serial
        # Numba's disk cache checks only the time stamp of this file, not of the bodies it links
        # in: the bodies' sources are part of the cached function's name instead.
        named = pytypes.FunctionType(fn.__code__, fn.__globals__, f"{fn.__name__}_{_bodies_digest()}")
        named.__qualname__ = named.__name__
        named.__module__ = fn.__module__
        options = dict(cache=True, nogil=True, error_model="numpy", parallel=threads)
        _ENTRIES[threads] = cfunc(_C_SIGNATURE, **options)(named)
        _ADDRESSES[threads] = np.array([_ENTRIES[threads].address], np.int64)
    return _ADDRESSES[threads]


def _bodies_digest() -> str:
    import hashlib
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in ("activations.py", "binary.py", "common.py", "conv.py", "dense.py", "pad.py", "pooling.py", "reduce.py", "simd.py"):
        with open(os.path.join(here, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


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


@kernel
def run(x, o, src, ctl, ka, kp, kf, nf, kind):
    """The generated code's call of a loop kernel: ``ctl[ka]`` holds the address of the array
    holding the entry point's address (:func:`entry`)."""
    _call_address(_load(ctl[ka]), x, o, src, ctl, kp, kf, nf, kind)
