"""What the compiled families share: element-wise loops written into the generated source,
index maps, and the few ``@kernel`` functions (gathers, products, sums) that are not one
expression per element.

Element-wise ops are not functions at all: an emitter gives an expression per output element
(``lambda i: f"{a.name}[{i}] + {b.name}[{i}]"``) and :func:`each` writes the loop into the
generated function (no loop for a single element: a loop's counter and state are then plain
loads and stores). Numba then compiles one function per model, the cost that dominates
(about 0.1 s per distinct kernel function otherwise, on an idle core).

The control array ``ctl`` (int64) of a compiled model:

====  ===========================================================================
0     cancel flag: the interpreter's ``cancel()`` sets it; compiled loops poll it
1     error code (:data:`CODES`), 0 when none
2, 3  subgraph and node of the failing node
4, 5  the values the message quotes (the bad index, its bound)
6     the failing node's call-site chain (an index into the generator's ``traces``:
      the IF and WHILE nodes it sits in)
7     1: flush denormals to zero while the model runs (:func:`fp_enter`), as the
      NumPy engine's ``FlushDenormals`` context does; 0: leave the FP mode alone
8...  the addresses of the model's constants, read in place (:func:`at`)
====  ===========================================================================
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Any, Callable, Sequence

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _machine() -> str:
    import platform

    return platform.machine().lower()


def kernel(fn):
    """A compiled kernel: ``njit`` with ``inline="always"``, so Numba inlines it into the
    generated function (no call per node, no separate LLVM module per kernel). NumPy's error
    model, as the generated functions: float division by zero gives inf or NaN."""
    return njit(inline="always", error_model="numpy")(fn)


_HERE = os.path.dirname(os.path.abspath(__file__))
_DIGEST: str | None = None


def sources_digest() -> str:
    """A hash of the source of every module of this package (read once per process), and of
    ``NUMLITE_JIT_LANES`` (which changes the convolution kernels' code: simd.AVX512)."""
    global _DIGEST
    if _DIGEST is None:
        digest = hashlib.sha256(os.environ.get("NUMLITE_JIT_LANES", "").encode())
        for name in sorted(os.listdir(_HERE)):
            if name.endswith(".py"):
                with open(os.path.join(_HERE, name), "rb") as f:
                    digest.update(name.encode() + b"\0" + f.read())
        _DIGEST = digest.hexdigest()[:16]
    return _DIGEST


def _register_cache_locator() -> None:
    """Numba's disk cache checks only the stamp of a function's own file, but a body's compiled
    code holds the kernels it calls from other modules (simd.py's intrinsics, epilogues.py):
    editing one of those left stale code in a developer's ``__pycache__`` (a test passed on
    the old code). For the functions of this package, the stamp also holds
    :func:`sources_digest`, so any edit here recompiles them (once). An install never changes,
    so users see no difference. Numba's own locators are kept for everything else, and a user's
    ``NUMBA_CACHE_DIR`` still comes first."""
    from numba.core import caching

    class KernelsCacheLocator(caching.InTreeCacheLocator):
        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if os.path.dirname(os.path.abspath(py_file)) != _HERE:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self) -> Any:
            return super().get_source_stamp(), sources_digest()

    classes = getattr(getattr(caching, "CacheImpl", None), "_locator_classes", None)
    if isinstance(classes, list) and caching.InTreeCacheLocator in classes:  # (else another Numba: its own rules)
        classes.insert(classes.index(caching.InTreeCacheLocator), KernelsCacheLocator)


_register_cache_locator()


def body(fn):
    """A part of a loop kernel (see :mod:`numlite.jit.kernels.loops`), or a kernel called as a
    function of its own: compiled once, on its own, cached on disk. ``error_model="numpy"``: no
    exception paths in the loops (divisors are checked at generation), which would compile
    string formatting."""
    return njit(cache=True, nogil=True, error_model="numpy")(fn)


CTL_SIZE = 8
FLUSH = 7  # the ctl slot of the flush-to-zero flag
GATHER_INDEX = 1
CANCELLED = 2
# The messages the Python side raises for each code, as the NumPy kernels word them.
CODES = {GATHER_INDEX: "gather index {a} is out of range [0, {b})"}
# Codes from here on: a check of a shape known only at run time, its message in the generated
# model's own table (FunctionGen.fail_if), its values in ctl past the constants' addresses.
DYNAMIC_ERROR = 1000


@kernel
def fail(ctl, sub, node, trace):
    """Record where a kernel failed (it set the code and values already); returns 1."""
    ctl[2] = sub
    ctl[3] = node
    ctl[6] = trace
    return 1


@kernel
def cancelled(ctl, sub, node, trace):
    """Stop at a loop's poll of the cancel flag; returns 1."""
    ctl[1] = CANCELLED
    return fail(ctl, sub, node, trace)


def index(operand: Any, out: Any, i: str, g: Any) -> str:
    """The expression reading the element of ``operand`` that broadcasting pairs with output
    element ``i``: ``a[0]`` for a single value, ``a[i]`` for the output's shape, inside
    :func:`each`'s two nested loops (see :class:`Nest`) an index of their counters, else through
    an index map (a constant of the generated model)."""
    if not operand.dynamic and operand.size == 1:
        return f"{operand.name}[0]"
    if tuple(operand.shape) == tuple(out.shape):
        return f"{operand.name}[{i}]"
    if operand.dynamic or out.dynamic:
        from numlite.jit.kernels.dynamic import trailing_index

        return trailing_index(operand, out, i)
    nest = getattr(g, "nest", None)
    if nest is not None and nest.out is out:
        return f"{operand.name}[{nest.index(operand.shape)}]"
    if nest is not None:  # probing another output's operands: no nest for this loop
        nest.shapes.append(None)
        return f"{operand.name}[0]"
    return f"{operand.name}[{g.const(broadcast_map(operand.shape, out.shape))}[{i}]]"


NESTED_INDEX = "io * ni + ic"  # the output's element in Nest's loops


class Nest:
    """Broadcasting without an index map: the output's elements as two nested loops, ``io``
    over the leading ``split`` dimensions and ``ic`` over the rest, so that every operand's
    element is ``io``, ``ic``, or ``io * inner + ic`` (a squeeze-and-excite gate
    ``[1, h, w, c] * [1, 1, 1, c]`` reads ``b[ic]``). A map costs 8 bytes of constant per
    output element and a gather per read (a [1, 112, 112, 96] MUL: 0.83 ms with its map,
    0.11 ms nested); the nest keeps the loads contiguous, so LLVM vectorizes the inner loop.

    :func:`each` first calls the element's expression with a Nest that only records the
    shapes :func:`index` is asked for (``split`` None), then picks a split all of them fit.
    The inner count is one local, ``ni``, in the loop's range and in every index: lifted into
    ``ctl`` as separate numbers (:func:`numlite.jit.codegen.lift`), LLVM could not tell the
    rows of two views of one arena apart, and did not vectorize (0.97 ms against 0.14)."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.shapes: list[tuple[int, ...] | None] = []  # the broadcast operands (None: no nest)
        self.split: int | None = None

    def index(self, shape: tuple[int, ...]) -> str:
        if self.split is None:
            self.shapes.append(tuple(shape))
            return "0"
        lead, rest = _parts(shape, self.out.shape, self.split)
        if lead == "all" and rest == "all":
            return NESTED_INDEX
        return {("one", "all"): "ic", ("all", "one"): "io", ("one", "one"): "0"}[(lead, rest)]

    def choose(self) -> bool:
        """Pick the split every recorded operand fits, the one with the longest inner loop."""
        if not self.shapes or None in self.shapes:
            return False
        rank = len(self.out.shape)
        for split in range(1, rank):
            if all("some" not in _parts(s, self.out.shape, split) for s in self.shapes):
                self.split = split
                return True
        return False


def _parts(shape: tuple[int, ...], out_shape: tuple[int, ...], split: int) -> tuple[str, str]:
    """How an operand of ``shape`` meets the output's leading ``split`` dimensions and the rest:
    ``all`` (the output's own), ``one`` (a single element, broadcast) or ``some`` (neither)."""
    padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)

    def part(mine: tuple[int, ...], theirs: tuple[int, ...]) -> str:
        return "all" if mine == theirs else ("one" if _size(mine) == 1 else "some")

    return part(padded[:split], tuple(out_shape[:split])), part(padded[split:], tuple(out_shape[split:]))


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def each(g: Any, out: Any, expression: Callable[[str], str], clamp: tuple[float, float] | None = None) -> None:
    """Write ``out[i] = expression(i)`` for every element (optionally clamped to a fused
    activation's range, NaN kept, as LiteRT clamps). A count known only at run time (an
    operand of run-time shape) is always a loop."""
    if not out.dynamic and out.size == 0:
        return
    i = "0" if not out.dynamic and out.size == 1 else "i"
    nest = _nest(g, out, expression) if i == "i" and not out.dynamic and len(out.shape) > 1 else None
    if nest is not None:
        i = NESTED_INDEX
        g.nest = nest
    try:
        value = expression(i)
    finally:
        g.nest = None
    body = [f"{out.name}[{i}] = {value}"]
    if clamp is not None:
        low, high = (repr(float(v)) if np.isfinite(v) else "np.inf" for v in clamp)
        body = [f"v = {value}", f"if v < {low}: v = {low}", f"elif v > {high}: v = {high}", f"{out.name}[{i}] = v"]
    if i == "0":
        for text in body:
            g.line(text)
        return
    loops = [f"for i in range({out.count}):"]
    if nest is not None:
        g.line(f"ni = {_size(out.shape[nest.split:])}")
        loops = [f"for io in range({_size(out.shape[:nest.split])}):", "for ic in range(ni):"]
    with contextlib.ExitStack() as stack:
        for text in loops:
            g.line(text)
            stack.enter_context(g.indented())
        for text in body:
            g.line(text)


def _nest(g: Any, out: Any, expression: Callable[[str], str]) -> Nest | None:
    """The nest of two loops the expression's broadcast operands fit (None: one loop; no operand
    broadcasts, or one would need an index map all the same)."""
    probe = Nest(out)
    g.nest = probe
    try:
        expression("i")
    finally:
        g.nest = None
    return probe if probe.choose() else None


def copy(g: Any, dst: Any, src: Any) -> None:
    """``dst = src`` element by element (same size)."""
    each(g, dst, lambda i: f"{src.name}[{i}]")


def broadcast_map(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    """For each element of ``out_shape`` (C order), the flat index of the element of an operand
    of ``shape`` that broadcasting reads."""
    if int(np.prod(shape, dtype=np.int64)) == 1:
        return np.zeros(int(np.prod(out_shape, dtype=np.int64)), np.int64)
    iota = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return np.ascontiguousarray(np.broadcast_to(iota, out_shape)).reshape(-1)


def index_map(node: Any, moved: int = 0) -> np.ndarray:
    """The flat index, into input ``moved``, of each output element of a data-movement node
    whose other inputs are all known (a slice with constant bounds, a transpose, a gather of
    constant positions): numlite's own NumPy kernel run once on the input's element numbers.
    Raises NotCompiled when a parameter is data, or the kernel refuses integer inputs."""
    from numlite.errors import NumliteError
    from numlite.jit.kernels import NotCompiled
    from numlite.kernels import evaluate

    x = node.ins[moved]
    values = [t.value if t is not None else None for t in node.ins]
    if any(v is None for k, v in enumerate(values) if k != moved and node.ins[k] is not None):
        raise NotCompiled(f"{node.op_name} with parameters computed at run time is not compiled")
    for dtype in (np.int64, np.int32):
        if x.size >= np.iinfo(dtype).max:
            continue
        values[moved] = np.arange(x.size, dtype=dtype).reshape(x.shape)
        try:
            result = evaluate(node.op_name, node.options, values, len(node.outs))
        except NumliteError:
            continue  # the kernel does not take this dtype
        if result is not None and tuple(result[0].shape) == node.outs[0].shape:
            return result[0].astype(np.int64).reshape(-1)
    raise NotCompiled(f"{node.op_name}: no index map for its {x.dtype.name} input")


def take(g: Any, node: Any, moved: int = 0) -> None:
    """A data-movement node as ``out[i] = x[map[i]]``; or, when the map is runs of equal length
    at a constant stride (a slice of whole rows, a ring buffer's shift), as copies of those runs
    (:func:`runs`: no map to read, and loops LLVM vectorizes)."""
    x, out = node.ins[moved], node.outs[0]
    positions = index_map(node, moved)
    found = runs(positions)
    if found is None:
        m = g.const(positions)
        each(g, out, lambda i: f"{x.name}[{m}[{i}]]")
        return
    start, length, stride, count = found
    if count == 1:
        copy_run(g, out.name, 0, x.name, start, length)
        return
    g.line(f"for r in range({count}):")
    with g.indented():
        copy_run(g, out.name, f"r * {length}", x.name, f"{start} + r * {stride}", length)


def copy_run(g: Any, dst: str, dst_at: int | str, src: str, src_at: int | str, length: int | str) -> None:
    """``dst[dst_at + i] = src[src_at + i]`` for ``i < length``, through views that start at 0:
    Numba cannot prove an index like ``at + i`` non-negative, and its wraparound test for
    negative indices keeps LLVM from vectorizing the loop (a copy of 160 bytes: 84-114 ns
    against 4-5 through views)."""
    names = []
    for array, at in ((dst, dst_at), (src, src_at)):
        if at == 0:
            names.append(array)
            continue
        view = g.name("v")
        g.line(f"{view} = {array}[{at} : {at} + {length}]")
        names.append(view)
    g.line(f"for i in range({length}):")
    g.line(f"    {names[0]}[i] = {names[1]}[i]")


def runs(positions: np.ndarray) -> tuple[int, int, int, int] | None:
    """``(start, length, stride, count)`` when ``positions`` is ``count`` runs of ``length``
    consecutive positions, run ``r`` from ``start + r * stride``; None otherwise (or when
    empty). A single position is one run of one."""
    n = positions.size
    if n == 0:
        return None
    start = int(positions[0])
    breaks = np.flatnonzero(np.diff(positions) != 1)
    length = int(breaks[0]) + 1 if breaks.size else n
    if n % length:
        return None
    count = n // length
    stride = int(positions[length]) - start if count > 1 else 0
    k = np.arange(n, dtype=np.int64)
    if not np.array_equal(positions, start + (k // length) * stride + k % length):
        return None
    return start, length, stride, count


def require(condition: bool, message: str) -> None:
    if not condition:
        from numlite.jit.kernels import NotCompiled

        raise NotCompiled(message)


def same_dtypes(operands: Sequence[Any], allowed: Sequence[np.dtype], what: str) -> None:
    dtypes = {t.dtype for t in operands}
    require(len(dtypes) == 1 and dtypes <= set(allowed), f"{what} of {', '.join(sorted(d.name for d in dtypes))} is not compiled")


# -- scalar helpers the generated expressions call (inlined) ---------------------------------------


@kernel
def max_nan(x, y):
    return x if x > y or x != x else y


@kernel
def min_nan(x, y):
    return x if x < y or x != x else y


@kernel
def relu(x):
    return x if x > 0 or x != x else 0  # not x * 0, which is NaN for -inf (0 stores as x's type)


@kernel
def clip(x, low, high):
    return low if x < low else (high if x > high else x)


@kernel
def saturate(x, low, high, smallest, largest):
    """LiteRT's float -> integer CAST: NaN and values above the range give the maximum, values
    below it the minimum, the rest truncate toward zero."""
    if x != x or x > high:
        return largest
    if x < low:
        return smallest
    return int(x)


# -- the floating-point mode, set and restored inside the compiled function -------------------------
#
# The NumPy engine flushes denormals with ctypes calls of fegetenv/fesetenv around an invoke
# (numlite.interpreter.denormals), about 2.7 us of a 7.5 us compiled invoke of a tiny model. On
# x86-64 the compiled function does it itself: STMXCSR/LDMXCSR, a few nanoseconds. LLVM models
# LDMXCSR as reading and writing memory, so no load of an arena moves above it and no store
# below the restore. On other machines these are no-ops (FLUSHES_INLINE is False) and the
# interpreter keeps the ctypes context.

FLUSHES_INLINE = _machine() in ("x86_64", "amd64")
_MXCSR_FLUSH = 0x8000 | 0x0040  # FTZ | DAZ, as FlushDenormals sets them


def _mxcsr(builder: Any, name: str, slot: Any) -> None:
    from llvmlite import ir

    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [slot.type]), name)
    builder.call(fn, [slot])


@intrinsic
def fp_enter(typingctx: Any, flush: Any) -> Any:
    """When ``flush`` is not 0, set flush-to-zero and denormals-are-zero; returns the mode to
    give :func:`fp_exit` (the caller's MXCSR)."""
    from llvmlite import ir

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        if not FLUSHES_INLINE:
            return ir.Constant(ir.IntType(64), 0)
        i32 = ir.IntType(32)
        slot = cgutils.alloca_once(builder, i32)
        _mxcsr(builder, "llvm.x86.sse.stmxcsr", slot)
        saved = builder.load(slot)
        with builder.if_then(builder.icmp_signed("!=", args[0], ir.Constant(args[0].type, 0))):
            builder.store(builder.or_(saved, ir.Constant(i32, _MXCSR_FLUSH)), slot)
            _mxcsr(builder, "llvm.x86.sse.ldmxcsr", slot)
        return builder.zext(saved, ir.IntType(64))

    return types.int64(flush), codegen


@intrinsic
def fp_exit(typingctx: Any, saved: Any, flush: Any) -> Any:
    """Restore the caller's mode that :func:`fp_enter` returned (when it changed it)."""
    from llvmlite import ir

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        if FLUSHES_INLINE:
            with builder.if_then(builder.icmp_signed("!=", args[1], ir.Constant(args[1].type, 0))):
                slot = cgutils.alloca_once(builder, ir.IntType(32))
                builder.store(builder.trunc(args[0], ir.IntType(32)), slot)
                _mxcsr(builder, "llvm.x86.sse.ldmxcsr", slot)
        return context.get_dummy_value()

    return types.none(saved, flush), codegen


@intrinsic
def at(typingctx: Any, address: Any, dtype: Any) -> Any:
    """The int64 ``address`` as a pointer to ``dtype`` (a NumPy scalar type), for
    ``carray(at(ctl[k], np.float32), n)``: a constant read in place where the interpreter
    keeps it (the generated code holds no copy of the model's weights)."""
    element = getattr(dtype, "instance_type", None)
    if element is None:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return types.CPointer(element)(address, dtype), codegen


HELPERS = ("fail", "cancelled", "max_nan", "min_nan", "relu", "clip", "saturate", "fp_enter", "fp_exit", "at")  # imported by every generated module
