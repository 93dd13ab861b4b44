"""The generator: a prepared subgraph (and the subgraphs its IF and WHILE nodes call) becomes
the source of a Python module holding one ``@njit`` function, ``run(A, ctl)``, and its entry
point ``main(A, ctl)``, which sets the FP mode (flush-to-zero), calls ``run`` and restores it.

Memory is one flat array per dtype (the *arenas*, passed as one tuple ``A``); every tensor is
a slice of its dtype's arena at an offset planned here (tensors whose lifetimes do not overlap
share bytes: :meth:`Arenas.plan`), so the generated code names each tensor as a local view,
``t16 = a0[64:96]``, and every node is a line or a loop over those views with static shapes::

    @njit(cache=True, nogil=True)
    def run(A, ctl):
        a0 = A[0]
        t1 = a0[0:1]
        ...
        # subgraph 0, node 0: WHILE
        while True:
            if ctl[0] != 0: return cancelled(ctl, 0, 0, 1)
            # subgraph 1, node 0: LESS
            t9[0] = t2[0] < t3[0]
            ...

The subgraphs an IF or WHILE calls are generated in place (inlined at each call site, bound
to that site's buffers), so a model is one function: Numba compiles it as one unit, which is
what costs time (a function per kernel or per subgraph cost a separate compile each).

Constants (model weights, folded tensors, index maps the emitters compute) are arrays of
their own, read in place through their addresses in ``ctl`` (``c3 = carray(at(ctl[9],
np.float32), 12)``): a model's weights are not copied, and they are not in the source, and the
numbers of the finished source (sizes, offsets, loop counts, scalar constants) are lifted into
``ctl`` (:func:`lift`; ``t16 = a0[N3:N4]``), so the source (and the compiled code, cached by
Numba) depends only on the model's structure: models of one structure and other sizes share it. ``main`` returns 0, or 1 after a kernel recorded an error in the control array ``ctl``
(see :mod:`numlite.jit.kernels.common`) together with the index of its call-site chain in
:attr:`Generator.traces`.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from numlite.jit.kernels import EMITTERS, QUANTIZED_EMITTERS, NotCompiled, loops
from numlite.kernels import KERNELS, OWN_KERNELS

if TYPE_CHECKING:
    from numlite.interpreter.runtime import SubgraphRuntime

MAX_DEPTH = 32  # nested IF/WHILE call sites (recursion is refused)
ARENA_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64))
# Ops that only move elements: compiled on quantized tensors when the output keeps the input's
# scale and zero point (as LiteRT requires of them). Every other op with a quantized operand
# needs an emitter of QUANTIZED_EMITTERS (numlite/jit/kernels/quantized*.py).
MOVES_ELEMENTS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "SLICE", "STRIDED_SLICE", "GATHER", "TOPK_V2"}
# Ops that store or load a variable's bytes whatever their scale (LiteRT does not requantize).
STATE_OPS = {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}


@dataclass(frozen=True)
class Slot:
    """A tensor's (or a constant's) place: ``size`` elements of dtype number ``arena``. A
    tensor's offset in its dtype's arena is planned once the whole function is generated
    (:meth:`Arenas.plan`); a constant is an array of its own, read in place."""

    arena: int
    key: int  # unique in the generated function
    size: int
    constant: bool = False
    dynamic: bool = False  # an array allocated at run time (its shape lives in local variables)

    @property
    def name(self) -> str:
        return f"{'c' if self.constant else 't'}{self.key}"


@dataclass
class Operand:
    """What an emitter sees of a node's input or output."""

    name: str  # the local variable holding the flat view
    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None  # the value when known at generation (constants, folded)
    slot: Slot
    symbolic: tuple[int | str, ...] | None = None  # a small int vector's elements as expressions (SHAPE's output)

    @property
    def size(self) -> int:
        return self.slot.size

    @property
    def dynamic(self) -> bool:
        """Whether a dimension is known only at run time (``shape`` then holds the names of
        the local variables, or expressions, giving those dimensions)."""
        return any(isinstance(d, str) for d in self.shape)

    @property
    def count(self) -> str:
        """The element count as an expression of the generated code."""
        if not self.dynamic:
            return str(self.size)
        return " * ".join(f"{d}" for d in self.shape) if self.shape else "1"


@dataclass
class JitNode:
    """One operator as its emitter sees it."""

    op_name: str
    subgraph: int
    index: int
    options: Any
    ins: list[Operand | None]
    outs: list[Any]  # Operand; for a node with run-time shapes, Pending until the emitter calls g.result
    dynamic: bool = False  # an operand's shape is known only at run time (see FunctionGen.result)
    kernel: Any = None  # the NumPy engine's prepared kernel (quantized emitters read its parameters)
    # The element-wise chain this node computes as it stores its output (numlite.jit.fusion):
    # its emitter must take it (take_epilogue), or the node is not compiled.
    epilogue: str | None = None
    epilogue_taken: bool = False

    def take_epilogue(self) -> str | None:
        """The epilogue's name (a key of ``kernels.epilogues.CODES``; None: none), which the
        emitter now computes into ``outs[0]``."""
        self.epilogue_taken = True
        return self.epilogue


@dataclass
class Pending:
    """An output of a node with run-time shapes, before its emitter gives its shape."""

    tensor: int
    dtype: np.dtype


class ShapeChanged(NotCompiled):
    """A subgraph output computed in another shape than the static buffer its call site gave it
    (a WHILE's state that changes shape); ``site`` is the caller's FunctionGen."""

    def __init__(self, site: Any, position: int, shape: tuple, message: str) -> None:
        super().__init__(message)
        self.site, self.position, self.shape = site, position, shape


class Arenas:
    """The memory of one compiled model: an arena per dtype for its tensors, where tensors
    whose lifetimes do not overlap share bytes (planned by numlite's own arena planner), and
    its constants, each an array of its own that the compiled code reads in place through its
    address (``ctl[CTL_SIZE + k]``). A constant that is the interpreter's own array (a weight
    in the model's buffers, a folded tensor) is therefore not copied."""

    def __init__(self) -> None:
        self.dtypes: list[np.dtype] = []
        self.sizes: list[int] = []  # elements of each arena, once planned
        self.offsets: dict[Slot, int] = {}  # tensor -> element offset in its arena, once planned
        self.constants: list[tuple[Slot, np.ndarray, bool]] = []  # (slot, flat array, shared with the interpreter)
        self._known: dict[int, tuple[np.ndarray, Slot]] = {}  # id -> (array kept alive, slot)
        self._keys = 0

    def _dtype(self, dtype: Any) -> int:
        dtype = np.dtype(dtype)
        if dtype not in self.dtypes:
            if dtype not in ARENA_DTYPES:
                raise NotCompiled(f"tensors of {dtype.name} are not compiled")
            self.dtypes.append(dtype)
            self.sizes.append(0)
        return self.dtypes.index(dtype)

    def _slot(self, dtype: Any, size: int, constant: bool) -> Slot:
        self._keys += 1
        return Slot(self._dtype(dtype), self._keys, int(size), constant)

    def alloc(self, dtype: Any, size: int) -> Slot:
        """A tensor's slot (placed by :meth:`plan`)."""
        return self._slot(dtype, size, False)

    def dynamic(self, dtype: Any) -> Slot:
        """The slot of an array the compiled code allocates at run time (not in the arenas)."""
        self._keys += 1
        return Slot(self._dtype(dtype), self._keys, 0, False, True)

    def const(self, value: np.ndarray, dtype: Any = None, interpreters: bool = False) -> Slot:
        """A slot holding ``value`` (the same slot for the same array object); ``interpreters``
        says that ``value`` is the interpreter's own array (reported as not copied when it is
        read in place)."""
        found = self._known.get(id(value))
        if found is not None:
            return found[1]
        flat = np.asarray(value, dtype).reshape(-1)  # a view when it can be
        if not flat.flags.c_contiguous or flat.ctypes.data % max(flat.dtype.itemsize, 1):
            flat = flat.copy()  # the compiled code reads it as an aligned C array
        slot = self._slot(flat.dtype, flat.size, True)
        self.constants.append((slot, flat, interpreters and np.may_share_memory(flat, value)))
        self._known[id(value)] = (value, slot)
        return slot

    def plan(self, lines: Sequence[str], slots: set[Slot], pinned: set[Slot]) -> None:
        """Place the tensors, from their lifetimes in the generated ``lines``: the first and
        last line naming them. In straight code that is the order they run in; a lifetime that
        reaches into a loop (``for``, ``while``) but is not inside it is extended over the whole
        loop, as a later iteration runs its earlier lines again. ``pinned`` tensors (the root's
        inputs and outputs, which hold values between invokes) live throughout."""
        from numlite.interpreter.planner import Lifetime, plan_arena

        tensors = {s.name: s for s in slots if not s.constant and not s.dynamic}
        first: dict[Slot, int] = {}
        last: dict[Slot, int] = {}
        loops: list[tuple[int, int]] = []
        open_loops: list[tuple[int, int]] = []  # (indent, first line)
        for n, text in enumerate(lines):
            stripped = text.lstrip()
            indent = len(text) - len(stripped)
            while open_loops and indent <= open_loops[-1][0]:
                loops.append((open_loops.pop()[1], n - 1))
            if stripped.startswith(("for ", "while ")):
                open_loops.append((indent, n))
            for name in _NAMES.findall(text):
                slot = tensors.get(name)
                if slot is not None:
                    first.setdefault(slot, n)
                    last[slot] = n
        loops += [(start, len(lines) - 1) for _, start in open_loops]
        span: dict[Slot, tuple[int, int]] = {}
        for slot in tensors.values():
            if slot in pinned:
                span[slot] = (-1, len(lines))
            elif slot in first:
                span[slot] = _over_loops(first[slot], last[slot], loops)
            else:
                span[slot] = (-1, -1)  # named nowhere: its view is never used
        for a in range(len(self.dtypes)):
            itemsize = self.dtypes[a].itemsize
            mine = [(s, span[s]) for s in tensors.values() if s.arena == a]
            offsets, nbytes = plan_arena([Lifetime(s.key, s.size * itemsize, f, l) for s, (f, l) in mine])
            self.offsets.update((s, offsets[s.key] // itemsize) for s, _ in mine)
            self.sizes[a] = nbytes // itemsize

    @property
    def arena_bytes(self) -> int:
        return sum(n * d.itemsize for d, n in zip(self.dtypes, self.sizes))

    def constant_bytes(self, shared: bool) -> int:
        """Bytes of the constants read in place from the interpreter's arrays (``shared``),
        or of those the generator made (index maps, repacked weights, converted dtypes)."""
        return sum(flat.nbytes for _, flat, s in self.constants if s == shared)

    def build(self) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The arenas (zeroed) and the constants' addresses, in the order of :attr:`constants`."""
        from numlite.interpreter.planner import aligned_zeros

        arenas = tuple(aligned_zeros(max(n, 1) * d.itemsize).view(d) for d, n in zip(self.dtypes, self.sizes))
        addresses = np.array([flat.ctypes.data for _, flat, _ in self.constants], np.int64)
        return arenas, addresses

    def view(self, arrays: Sequence[np.ndarray], slot: Slot, shape: tuple[int, ...]) -> np.ndarray:
        offset = self.offsets[slot]
        return arrays[slot.arena][offset : offset + slot.size].reshape(shape)


_NAMES = re.compile(r"\bt\d+\b")
_INT64_MAX = (1 << 63) - 1
_STRUCTURAL_CALLS = {"fail", "cancelled"}  # their numbers name a subgraph, node and call-site chain


def lift(lines: Sequence[str]) -> tuple[list[str], list[int], list[float]]:
    """The numbers of generated code (sizes, offsets, constants' slots, loop counts, scalar
    constants) as run-time values, so that models of one structure have byte-identical source
    and share one compile: each integer becomes ``N<k>`` and each float ``F<k>``, in order of
    occurrence, and their values are returned (the engine writes them into ``ctl``). Kept
    literal: the index of the arena tuple (``A[0]``: Numba needs a constant to index a
    heterogeneous tuple), a slot of ``ctl`` (``ctl[0]``, the cancel flag; ``ctl[9]``, a
    constant's address: the order of the constants is the structure's), the node an error
    names (``fail(ctl, 2, 3, 1)``), a 0 that is not a slice bound (the element of a
    one-element tensor, ``return 0``: part of the structure, and cheaper as a constant), and
    integers beyond int64. An integer read from the
    int64 ``ctl`` types as an integer literal does (int64), and a float from the float64
    array as a float literal does (float64), so the code computes exactly as with literals
    (``np.float32(F3)`` rounds the same double)."""
    text = "\n".join(lines) + "\n"
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
              if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    numbers: list[int] = []
    floats: list[float] = []
    edits: list[tuple[int, int, int, str]] = []  # (row, start, end, name)
    open_brackets: list[tuple[str, str]] = []  # (bracket, the name before it)
    for n, tok in enumerate(tokens):
        if tok.string in ("(", "[", "{"):
            open_brackets.append((tok.string, tokens[n - 1].string if n else ""))
        elif tok.string in (")", "]", "}") and open_brackets:
            open_brackets.pop()
        if tok.type != tokenize.NUMBER:
            continue
        before = tokens[n - 1].string if n else ""
        after = tokens[n + 1].string if n + 1 < len(tokens) else ""
        inside = open_brackets[-1] if open_brackets else ("", "")
        if inside in (("[", "A"), ("[", "ctl")) or inside[1] in _STRUCTURAL_CALLS:
            continue
        value: int | float
        try:
            value = int(tok.string, 0)
        except ValueError:
            try:
                value = float(tok.string)
            except ValueError:  # an imaginary number
                continue
            edits.append((tok.start[0], tok.start[1], tok.end[1], f"F{len(floats)}"))
            floats.append(value)
            continue
        if value > _INT64_MAX or (value == 0 and not (inside[0] == "[" and ":" in (before, after))):
            continue
        edits.append((tok.start[0], tok.start[1], tok.end[1], f"N{len(numbers)}"))
        numbers.append(value)
    out = text.split("\n")
    for row, start, end, name in reversed(edits):  # right to left: the columns stay valid
        line = out[row - 1]
        out[row - 1] = line[:start] + name + line[end:]
    return out[: len(lines)], numbers, floats


def _over_loops(first: int, last: int, loops: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """A lifetime (lines ``first`` to ``last``) widened over every loop it reaches into
    without being inside it (again after each widening: loops nest)."""
    changed = True
    while changed:
        changed = False
        for start, end in loops:
            if first <= end and last >= start and not (start <= first and last <= end):
                if first > start or last < end:
                    first, last, changed = min(first, start), max(last, end), True
    return first, last


JIT_OPTIONS = 'cache=True, nogil=True, error_model="numpy"'  # of the generated functions


class Generator:
    """Generates the module of one root subgraph and everything it calls."""

    def __init__(self, interpreter: Any, root: int) -> None:
        self.interpreter = interpreter
        self.root = root
        self.arenas = Arenas()
        self.lines: list[str] = []
        self.slots: set[Slot] = set()
        self.imports: dict[int, tuple[str, str, str]] = {}  # id(kernel) -> (module, expression, alias)
        self.stack: list[int] = []
        self.traces: list[tuple[tuple[int, int], ...]] = []  # call-site chains, outermost first
        self.generations: dict[int, int] = {}  # subgraph -> generation when generated
        self.inputs: list[tuple[int, Slot, tuple[int, ...]]] = []  # root inputs: tensor, slot, shape
        self.outputs: list[tuple[int, Slot, tuple[int, ...]]] = []
        # Root outputs of run-time shape: (tensor, dtype, rank, offset of its dims in ctl past
        # DIMS); run returns their arrays after its code (0 or 1) and writes their dims in ctl.
        self.dynamic_outputs: list[tuple[int, np.dtype, int, int]] = []
        self.tail = ""  # what every return of run adds to its code: the placeholders of those arrays
        self.messages: list[tuple[str, bool]] = []  # run-time shape errors: (template, a PrepareError)
        self.error_values = 0  # ctl slots (from ERRORS) the messages' values take
        self.results: list[Operand] = []  # the outputs of the subgraph generated last
        self.names = 0  # counter of local variable names
        self.ops = 0
        # State kept across invokes (numlite/jit/kernels/variables.py): resource variables by
        # handle, each an array of its own (not in the arenas, so never shared by lifetime),
        # and the CALL_ONCE kernels whose initialisers must have run before a compiled invoke.
        self.variables: dict[int, tuple[Slot, np.ndarray]] = {}
        self.call_once: list[Any] = []
        self.threads = _threads(getattr(interpreter, "num_threads", None))  # for the loop kernels' prange
        self.parallel = False  # an emitter called a parallel loop kernel: the engine sets the thread count
        self.blas = False  # an emitter calls NumPy's BLAS (kernels/blas.py): the engine sizes its pool
        self.loop_kernels: frozenset[tuple[bool, int]] = frozenset()  # (parallel, kind) of the loop kernels called
        # Islands (kernels/islands.py): (subgraph, node, inputs as (slot, shape) or None for the
        # runtime's own array, outputs as (slot, shape), why the node is not compiled)
        self.islands: list[tuple[int, int, list, list, str]] = []
        self.island_table: np.ndarray | None = None
        self.numbers: list[int] = []  # the integers and floats lifted out of the source (see lift)
        self.floats: list[float] = []

    def generate(self) -> str:
        """The module's source; raises NotCompiled naming what is not covered."""
        from numlite.jit.kernels.common import CTL_SIZE, FLUSH, HELPERS

        runtime = self.interpreter.subgraph(self.root)
        g = runtime.graph
        out_slots: list[Slot | None] = []
        for tensors, where in ((g.inputs, self.inputs), (g.outputs, self.outputs)):
            for t in tensors:
                shape = runtime.shapes[t]
                if where is self.outputs and t >= 0 and runtime.dynamic[t] and t not in g.inputs:
                    if runtime.dtypes[t] not in ARENA_DTYPES:
                        raise NotCompiled(f"subgraph {self.root}, tensor {t}: tensors of {runtime.dtypes[t].name} are not compiled")
                    out_slots.append(None)  # an array of run-time shape, returned by run
                    self.dynamic_outputs.append((t, runtime.dtypes[t], -1, -1))
                    continue
                if shape is None or runtime.dynamic[t]:
                    raise NotCompiled(f"subgraph {self.root}: tensor {t} has a shape known only at run time")
                # One array per tensor, as in the interpreter: an input listed twice, and an output
                # that is also an input (a node may write it: the input's view is what is read back)
                twice = [slot for u, slot, _ in self.inputs if u == t]
                try:
                    where.append((t, twice[0] if twice else self.arenas.alloc(runtime.dtypes[t], _size(shape)), tuple(shape)))
                except NotCompiled as e:
                    raise NotCompiled(f"subgraph {self.root}, tensor {t}: {e}") from None
                if where is self.outputs:
                    out_slots.append(where[-1][1])
        self.tail = "".join(f", e{j}" for j in range(len(self.dynamic_outputs)))
        self.subgraph(self.root, [s for _, s, _ in self.inputs], out_slots, (), 1)
        if len(self.islands) * ISLANDS_AT_MOST[1] > self.ops * ISLANDS_AT_MOST[0]:
            sub, node, _, _, reason = self.islands[0]
            op = self.interpreter.subgraph(sub).plan[node].op_name
            raise NotCompiled(f"subgraph {sub}, node {node} ({op}): {reason}; {len(self.islands)} of the {self.ops} operators are not"
                              f" compiled, too many to run as islands (at most {ISLANDS_AT_MOST[0]} in {ISLANDS_AT_MOST[1]})")
        returned = self._return_dynamic_outputs([k for k, slot in enumerate(out_slots) if slot is None])
        arenas = self.arenas
        # The loop kernels' entry points the lines call: the engine has them compiled (or loaded)
        # before the model runs, possibly in other processes while the model compiles.
        alias = self.imports.get(id(loops.run), (None, None, None))[2]
        self.loop_kernels = loops.used(self.lines, alias, arenas.constants)
        arenas.plan(self.lines, self.slots, {s for _, s, _ in (*self.inputs, *self.outputs)})
        # error_model="numpy": a float division by zero gives inf or NaN, as in the NumPy engine
        # and LiteRT (Numba's default raises ZeroDivisionError), and loops with a division
        # vectorize (no zero check per element).
        body = [f"@njit({JIT_OPTIONS})", "def run(A, ctl):"]
        body += [f"    a{a} = A[{a}]" for a in sorted({s.arena for s in self.slots if not s.constant and not s.dynamic})]
        body += [f"    e{j} = np.empty(0, np.{dtype.name})" for j, (_, dtype, _, _) in enumerate(self.dynamic_outputs)]
        if self.messages or self.dynamic_outputs:  # ctl slots past the constants' addresses
            body += [f"    ERRORS = {CTL_SIZE + len(arenas.constants)}", f"    DIMS = {CTL_SIZE + len(arenas.constants) + self.error_values}"]
        tensors = sorted((s for s in self.slots if not s.constant and not s.dynamic), key=lambda s: (s.arena, arenas.offsets[s], s.key))
        body += [f"    {s.name} = a{s.arena}[{arenas.offsets[s]}:{arenas.offsets[s] + s.size}]" for s in tensors]
        number = {slot: k for k, (slot, _, _) in enumerate(arenas.constants)}
        # Only the constants the lines name: a loop kernel reads its node's weights through their
        # addresses, and each unused view line still costs compile time (MobileNetV2: 106 of them)
        named = set(re.findall(r"\bc\d+\b", "\n".join(self.lines) + returned))
        body += [
            f"    {s.name} = carray(at(ctl[{CTL_SIZE + number[s]}], np.{arenas.dtypes[s.arena].name}), {s.size})"
            for s in sorted((s for s in self.slots if s.constant and s.name in named), key=lambda s: number[s])
        ]  # fmt: skip
        body += self.lines + [f"    return 0{returned}"]
        body = body[:2] + self._lift(body[2:]) + [""]
        # The entry point: the model's code between setting and restoring the FP mode (run has
        # several returns; a second function keeps the restore on every path).
        # A cancel() before this invoke does not stop it (as on NumPy): the flag is cleared here,
        # with the error code, where it costs nothing (two NumPy stores cost ~0.2 us).
        body += [f"@njit({JIT_OPTIONS})", "def main(A, ctl):", "    ctl[0] = 0", "    ctl[1] = 0", f"    saved = fp_enter(ctl[{FLUSH}])",
                 "    result = run(A, ctl)", f"    fp_exit(saved, ctl[{FLUSH}])", "    return result"]
        modules = sorted({m for m, _, _ in self.imports.values()})
        header = [
            f"# Generated by numlite.jit from subgraph {self.root} of a model: {self.ops} operators,",
            "# arenas " + ", ".join(d.name for d in self.arenas.dtypes) + f", {len(self.arenas.constants)} constants;"
            + f" {len(self.numbers)} integers and {len(self.floats)} floats in ctl (see codegen.lift).",
            "# Content-addressed cache file: do not edit.",
            "import math",
            "",
            "import numpy as np",
            "from numba import carray, njit",
            "",
            f"from numlite.jit.kernels.common import {', '.join(HELPERS)}",
            "from numlite.jit.kernels.transcendental import exp32, sigmoid32, tanh32",
            *[f"import {m}" for m in modules],
            *[f"{alias} = {m}.{path}" for m, path, alias in self.imports.values()],
            "",
        ]
        return "\n".join(header + body) + "\n"

    @property
    def numbers_at(self) -> int:
        """The ``ctl`` slot of the floats' address, followed by the integers (see :func:`lift`):
        past the fixed slots, the constants' addresses, the values of run-time shape errors and
        the dims of outputs of run-time shape."""
        from numlite.jit.kernels.common import CTL_SIZE

        return CTL_SIZE + len(self.arenas.constants) + self.error_values + sum(r for _, _, r, _ in self.dynamic_outputs)

    @property
    def ctl_size(self) -> int:
        """The length of the control array (see :attr:`numbers_at`)."""
        return self.numbers_at + 1 + len(self.numbers)

    def _lift(self, lines: list[str]) -> list[str]:
        """``run``'s body with its numbers lifted (:func:`lift`) and read at its top."""
        lines, self.numbers, self.floats = lift(lines)
        at = self.numbers_at
        top = [f"    F = carray(at(ctl[{at}], np.float64), {len(self.floats)})"] if self.floats else []
        top += [f"    F{k} = F[{k}]" for k in range(len(self.floats))]
        top += [f"    N{k} = ctl[{at + 1 + k}]" for k in range(len(self.numbers))]
        return top + lines

    def _return_dynamic_outputs(self, positions: list[int]) -> str:
        """Lines giving each root output of run-time shape to ``run``'s return (a fresh array:
        an arena view would be overwritten by the next invoke) and its dims in ctl."""
        outputs, offset = [], 0
        for j, ((t, dtype, _, _), k) in enumerate(zip(self.dynamic_outputs, positions)):
            result = self.results[k]
            fresh = result.slot.dynamic and not result.slot.constant
            self.lines.append(f"    r{j} = {result.name}" + ("" if fresh else ".copy()"))
            for d, dim in enumerate(result.shape):
                self.lines.append(f"    ctl[DIMS + {offset + d}] = {dim}")
            outputs.append((t, dtype, len(result.shape), offset))
            offset += len(result.shape)
        self.dynamic_outputs = outputs
        return "".join(f", r{j}" for j in range(len(outputs)))

    def name(self, prefix: str = "v") -> str:
        """A fresh local variable name of the generated function."""
        self.names += 1
        return f"{prefix}{self.names}"

    def kernel(self, fn: Any) -> str:
        """The module-level alias of a kernel of :mod:`numlite.jit.kernels` (imported once)."""
        if id(fn) not in self.imports:
            module, expression = _locate(fn)
            self.imports[id(fn)] = (module, expression, f"k{len(self.imports)}")
        return self.imports[id(fn)][2]

    def trace(self, chain: tuple[tuple[int, int], ...]) -> int:
        if chain not in self.traces:
            self.traces.append(chain)
        return self.traces.index(chain)

    def subgraph(
        self, index: int, in_slots: Sequence[Slot], out_slots: Sequence[Slot | None], chain: tuple[tuple[int, int], ...],
        depth: int, pass_through: bool = False, in_ops: Sequence[Operand | None] = (), site: Any = None,
    ) -> set[int]:
        """Write subgraph ``index``'s code at this place, reading its inputs from ``in_slots``
        (or ``in_ops``, operands of run-time shape) and writing its outputs to ``out_slots``
        (None: left where they are computed, for the caller to take from :attr:`results`).
        With ``pass_through``, an output that is the input at its position is left in the
        input's slot (not copied); returns those positions."""
        if index in self.stack or len(self.stack) >= MAX_DEPTH:
            raise NotCompiled(f"subgraph {index} is called recursively or too deep")
        runtime = self.interpreter.subgraph(index)
        if not runtime.allocated:
            raise NotCompiled(f"subgraph {index} is not prepared")
        if self.generations.setdefault(index, runtime.generation) != runtime.generation:
            raise NotCompiled(f"subgraph {index} changed while it was generated")
        self.stack.append(index)
        try:
            fg = FunctionGen(self, runtime, list(in_slots), list(out_slots), chain, depth)
            fg.site = site
            for t, op in zip(runtime.graph.inputs, in_ops):
                if op is not None:
                    fg.ops[t] = op
            passed = fg.emit_all(pass_through)
            self.results = fg.results
            return passed
        finally:
            self.stack.pop()


class FunctionGen:
    """The code of one subgraph at one call site; what emitters write into (``g``)."""

    def __init__(
        self, gen: Generator, runtime: "SubgraphRuntime", in_slots: list[Slot], out_slots: list[Slot],
        chain: tuple[tuple[int, int], ...], depth: int,
    ) -> None:
        self.gen = gen
        self.runtime = runtime
        self.in_slots, self.out_slots = in_slots, out_slots
        self.chain = chain  # the IF and WHILE nodes this code sits in
        self.home: dict[int, Slot] = {}  # where each tensor's value is, once written
        # Tensors whose shape here differs from the runtime's static one (run-time shapes,
        # and what nodes computed from them): their operands as this code sees them.
        self.ops: dict[int, Operand] = {}
        self.results: list[Operand] = []  # the subgraph's outputs, once generated
        self.site: Any = None  # the caller's FunctionGen, named by ShapeChanged
        self.depth = depth
        self.where = (runtime.index, -1)
        self._pending: tuple[Any, dict[int, Slot]] | None = None  # the node whose outputs result() gives
        self.nest: Any = None  # the loop nest of the element-wise loop being written (kernels.common.each)

    # -- the API of emitters ---------------------------------------------------------------------

    def line(self, text: str) -> None:
        self.gen.lines.append("    " * self.depth + text)

    @contextlib.contextmanager
    def indented(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def kernel(self, fn: Any) -> str:
        return self.gen.kernel(fn)

    def const(self, value: np.ndarray) -> str:
        """The local name of a constant's view (an index map, a table)."""
        slot = self.gen.arenas.const(value)
        self.gen.slots.add(slot)
        return slot.name

    def address(self, value: np.ndarray) -> int:
        """The ``ctl`` slot that holds the address of constant ``value``, for a loop kernel
        that reads it itself (``carray(at(ctl[k], np.float32), n)`` inside the kernel): the
        generated function gets no local view of it (each view line costs its compile time)."""
        from numlite.jit.kernels.common import CTL_SIZE

        slot = self.gen.arenas.const(value)
        return CTL_SIZE + next(k for k, (s, _, _) in enumerate(self.gen.arenas.constants) if s == slot)

    def temp(self, shape: tuple[int, ...], dtype: Any) -> Operand:
        """A buffer of this call site (a WHILE's scratch state, its condition)."""
        slot = self.gen.arenas.alloc(dtype, _size(shape))
        self.gen.slots.add(slot)
        return Operand(slot.name, tuple(shape), np.dtype(dtype), None, slot)

    def _site(self) -> str:
        sub, node = self.where
        return f"ctl, {sub}, {node}, {self.gen.trace(self.chain)}"

    def check(self, call: str) -> None:
        """A kernel call that returns 1 after recording an error: stop there, naming this node."""
        self.line(f"if {call}: return fail({self._site()}){self.gen.tail}")

    def poll(self) -> None:
        """Stop when the cancel flag is set (once per loop iteration)."""
        self.line(f"if ctl[0] != 0: return cancelled({self._site()}){self.gen.tail}")

    def fail_if(self, condition: str, template: str, values: Sequence[str], prepare: bool = True) -> None:
        """Stop with an error naming this node when ``condition`` holds at run time: the message
        is ``template.format(*values)``, the values computed by the generated code (a check of
        a shape known only at run time, worded as the NumPy kernel's prepare words it; with
        ``prepare`` the error is the PrepareError the NumPy engine raises then)."""
        from numlite.jit.kernels.common import DYNAMIC_ERROR

        gen = self.gen
        code = DYNAMIC_ERROR + len(gen.messages)
        gen.messages.append((template, prepare))
        gen.error_values = max(gen.error_values, len(values))
        self.line(f"if {condition}:")
        with self.indented():
            for k, v in enumerate(values):
                self.line(f"ctl[ERRORS + {k}] = {v}")
            self.line(f"ctl[1] = {code}")
            self.line(f"return fail({self._site()}){gen.tail}")

    def name(self, prefix: str = "v") -> str:
        """A fresh local variable name."""
        return self.gen.name(prefix)

    def result(self, node: JitNode, k: int, shape: Sequence[int | str], alias: Operand | None = None,
               symbolic: tuple[int | str, ...] | None = None) -> Operand:
        """Output ``k`` of a node with run-time shapes, of ``shape`` (ints, or expressions of
        the generated code): a buffer in the arenas when every dim is known here, else an
        array allocated at run time, its dims in local variables (``t19 = np.empty(...)``,
        ``t19_0 = ...``). ``alias``: the output is that operand's array in another shape (a
        RESHAPE of an array allocated at run time, which nothing writes again)."""
        pending = node.outs[k]
        assert isinstance(pending, Pending) and self._pending is not None
        t, dtype = pending.tensor, pending.dtype
        claimed = self._pending[1]
        shape = tuple(int(d) if not isinstance(d, str) else d for d in shape)
        if all(isinstance(d, int) for d in shape):
            size = _size(shape)
            slot = claimed.get(t)
            if slot is None or slot.size != size:
                slot = self.gen.arenas.alloc(dtype, size)
            self.gen.slots.add(slot)
            op = Operand(slot.name, shape, dtype, None, slot, symbolic)
            if alias is not None and alias.size == size:
                from numlite.jit.kernels.common import copy

                copy(self, op, alias)
        else:
            slot = alias.slot if alias is not None and alias.slot.dynamic else self.gen.arenas.dynamic(dtype)
            dims: list[int | str] = []
            for d, dim in enumerate(shape):
                if isinstance(dim, str) and not dim.isidentifier():  # a variable already is one (the same dim, seen as such)
                    name = self.name(f"{slot.name}_") if alias is not None else f"{slot.name}_{d}"
                    self.line(f"{name} = {dim}")
                    dim = name
                dims.append(dim)
            op = Operand(slot.name, tuple(dims), dtype, None, slot, symbolic)
            if alias is None or not alias.slot.dynamic:
                self.line(f"{slot.name} = np.empty({op.count}, np.{dtype.name})")
                if alias is not None:
                    from numlite.jit.kernels.common import copy

                    copy(self, op, alias)
        return self.bind(node, k, op)

    def bind(self, node: JitNode, k: int, op: Operand) -> Operand:
        """Make ``op`` output ``k`` of a node with run-time shapes (see :meth:`result`)."""
        pending = node.outs[k]
        assert isinstance(pending, Pending)
        self.gen.slots.add(op.slot)
        self.home[pending.tensor] = op.slot
        self.ops[pending.tensor] = op
        node.outs[k] = op
        return op

    def mark(self) -> tuple:
        """The state of generation here, to :meth:`rollback` to (a WHILE generated again once
        it knows which of its state changes shape)."""
        gen = self.gen
        return len(gen.lines), set(gen.slots), gen.ops, dict(self.home), dict(self.ops), self.depth

    def rollback(self, mark: tuple) -> None:
        gen = self.gen
        del gen.lines[mark[0]:]
        gen.slots = set(mark[1])
        gen.ops = mark[2]
        self.home, self.ops, self.depth = dict(mark[3]), dict(mark[4]), mark[5]

    def inline(self, index: int, ins: Sequence[Operand], outs: Sequence[Operand | None], pass_through: bool = False) -> set[int]:
        """Write subgraph ``index``'s code here, bound to these operands' buffers (see
        :meth:`Generator.subgraph`). An output given as None is left where the callee
        computes it; :attr:`Generator.results` holds every output's operand after the call.
        Operands of run-time shape (and outputs computed in another shape than their static
        buffer: :class:`ShapeChanged`) are taken only at a call site with run-time shapes."""
        callee = self.gen.interpreter.subgraph(index)
        g = callee.graph
        if len(g.inputs) != len(ins) or len(g.outputs) != len(outs):
            raise NotCompiled(f"subgraph {index} takes {len(g.inputs)} inputs and gives {len(g.outputs)} outputs")
        for t, op in [*zip(g.inputs, ins), *zip(g.outputs, outs)]:
            if op is not None and callee.dtypes[t] != op.dtype:
                raise NotCompiled(f"subgraph {index} is prepared for other dtypes than this call site's")
        for t, op in zip(g.inputs, ins):  # (an output computed in another shape: ShapeChanged, from emit_all)
            if not op.dynamic and (callee.dynamic[t] or callee.shapes[t] is None or _size(callee.shapes[t]) != op.size):
                raise NotCompiled(f"subgraph {index} is prepared for other shapes than this call site's")
        chain = self.chain + (self.where,)
        in_ops = [o if o.dynamic else None for o in ins]
        return self.gen.subgraph(index, [o.slot for o in ins], [o.slot if o is not None else None for o in outs], chain, self.depth,
                                 pass_through, in_ops, self)

    # -- generation ------------------------------------------------------------------------------

    def emit_all(self, pass_through: bool) -> set[int]:
        rt, g = self.runtime, self.runtime.graph
        for t, slot in zip(g.inputs, self.in_slots):
            self.home.setdefault(t, slot)
            self.gen.slots.add(slot)
        claimed: dict[int, Slot] = {}  # outputs a node computes go straight into their slot
        for t, slot in zip(g.outputs, self.out_slots):
            if slot is None:
                continue
            self.gen.slots.add(slot)
            if t >= 0 and t not in self.home and not rt.known[t]:
                claimed.setdefault(t, slot)
        from numlite.jit import fusion
        from numlite.jit.kernels.common import require
        from numlite.jit.kernels.dynamic import elementwise_shape

        epilogues = fusion.find(rt)
        fused: dict[int, int] = {}  # node -> the node whose epilogue computes it
        kernels = getattr(self.gen.interpreter, "kernels", KERNELS)  # with the interpreter's custom_ops
        for step in rt.plan:
            # Operands whose shape here is not the runtime's (run-time shapes, a WHILE state
            # that changes shape), and operands the runtime folded into constants but that are
            # computed here (a SHAPE of such an operand, what follows from it).
            changed = [t for t in step.inputs if t in self.ops and (self.ops[t].dynamic or self.ops[t].shape != tuple(rt.shapes[t] or ()))]
            if step.folded and not changed and not any(t in self.ops and rt.known[t] for t in step.inputs):
                continue  # computed once by the runtime
            where = f"subgraph {rt.index}, node {step.index} ({step.op_name})"
            if step.index in fused:
                self.line(f"# {where}: computed by node {fused[step.index]}'s epilogue")
                continue
            quantized = _quantized(rt, step)
            emitter = (QUANTIZED_EMITTERS if quantized else EMITTERS).get(step.op_name)
            mark = self.mark()
            if emitter is not None and kernels.get(step.op_name) is not OWN_KERNELS.get(step.op_name):
                if self._island(step, where, changed, f"{step.op_name} is the interpreter's custom op", claimed):
                    continue  # (the user's kernel, not numlite's)
                raise NotCompiled(f"{where}: {step.op_name} is the interpreter's custom op")
            if emitter is None:
                reason = f"no compiled kernel for {step.op_name}" + (" on quantized operands" if quantized else "")
                if self._island(step, where, changed, reason, claimed):
                    continue
                raise NotCompiled(f"{where}: {reason}")
            try:
                ins = [self._read(t, where) if t >= 0 else None for t in step.inputs]
                # Run-time shapes: the node's own (its shapes depend on data), or an operand's
                # here (a WHILE state that changes shape, what nodes computed from one).
                dynamic = step.dynamic or bool(changed)
                epilogue = epilogues.get(step.index) if not dynamic and not quantized else None
                if not dynamic:  # (with an epilogue, the node writes the chain's output)
                    outs = self._outputs(step.outputs if epilogue is None else [epilogue.output], claimed, where)
                elif not quantized and (step.op_name in _ELEMENTWISE_SHAPES or getattr(emitter, "run_time_shapes", False)):
                    if any(t < 0 for t in step.outputs):
                        raise NotCompiled(f"{where}: an omitted output is not compiled")
                    outs = [Pending(t, rt.dtypes[t]) for t in step.outputs]  # given shapes by g.result
                else:
                    raise NotCompiled(f"{where}: its shapes are computed at run time")
            except NotCompiled as e:
                self.rollback(mark)
                if self._island(step, where, changed, str(e), claimed):
                    continue
                raise NotCompiled(str(e) if str(e).startswith("subgraph ") else f"{where}: {e}") from None
            self.where = (rt.index, step.index)
            self.line(f"# {where}")
            kernel = getattr(step.kernel, "impl", None) or step.kernel  # a QuantizedDispatch's chosen kernel
            node = JitNode(step.op_name, rt.index, step.index, step.kernel.options, ins, outs, dynamic, kernel)
            node.epilogue = epilogue.name if epilogue is not None else None
            self._pending = (node, claimed)
            try:
                if dynamic and step.op_name in _ELEMENTWISE_SHAPES:  # the static emitter, on run-time counts
                    require(len(step.outputs) == 1, f"{step.op_name} with {len(step.outputs)} outputs is not compiled")
                    self.result(node, 0, elementwise_shape(node))
                emitter(node, self)
                if any(isinstance(o, Pending) for o in node.outs):
                    raise NotCompiled("an output of run-time shape was not computed")
                if node.epilogue is not None and not node.epilogue_taken:
                    raise NotCompiled(f"its {node.epilogue} epilogue was not computed")
            except ShapeChanged:
                raise
            except NotCompiled as e:
                self.rollback(mark)
                if self._island(step, where, changed, str(e), claimed):
                    continue
                raise NotCompiled(str(e) if str(e).startswith("subgraph ") else f"{where}: {e}") from None
            except Exception as e:  # an emitter's bug or a form it did not expect: stay on NumPy
                raise NotCompiled(f"{where}: {type(e).__name__}: {e}") from e
            finally:
                self._pending = None
            if step.folded:  # computed here after all: what reads it must not take the runtime's value
                self.ops.update((t, op) for t, op in zip(step.outputs, node.outs))
            self.gen.ops += 1
            if epilogue is not None:
                fused.update((n, step.index) for n in epilogue.nodes)
                self.gen.ops += len(epilogue.nodes)
        passed = set()
        for k, (t, slot) in enumerate(zip(g.outputs, self.out_slots)):  # pass-through, constant, repeated outputs
            source = self._read(t, f"subgraph {rt.index}, output tensor {t}")
            self.results.append(source)
            if pass_through and k < len(g.inputs) and g.inputs[k] == t:
                passed.add(k)
                continue
            if slot is None:
                continue
            if source.dynamic or source.size != slot.size:
                raise ShapeChanged(self.site, k, source.shape, f"subgraph {rt.index}: output {k} is computed in a shape known only at run time")
            if source.slot != slot:
                from numlite.jit.kernels.common import copy

                copy(self, Operand(slot.name, source.shape, source.dtype, None, slot), source)
        return passed

    def _island(self, step: Any, where: str, changed: Sequence[int], reason: str, claimed: dict[int, Slot]) -> bool:
        """Write ``step`` as an island (:mod:`numlite.jit.kernels.islands`): its NumPy kernel
        called back from the compiled code. Only in the root's own code, for a node of static
        shapes that is not control flow and neither reads nor writes a variable tensor or a
        value the compiled code holds outside the arenas; False (nothing written) otherwise."""
        rt, gen = self.runtime, self.gen
        if self.chain or rt.index != gen.root or step.dynamic or changed or step.op_name in _CONTROL_FLOW:
            return False
        tensors = rt.graph.tensors
        if any(t < 0 or tensors[t].is_variable for t in step.outputs) or any(t >= 0 and tensors[t].is_variable for t in step.inputs):
            return False
        mark = self.mark()
        try:
            ins = []
            for t in step.inputs:
                if t < 0 or (rt.known[t] and t not in self.ops and t not in self.home):
                    ins.append(None)  # the runtime's own array (a constant, a folded value)
                    continue
                op = self._read(t, where)
                if op.dynamic or op.slot.constant:
                    raise NotCompiled("an operand outside the arenas")
                ins.append((op.slot, op.shape))
            outs = self._outputs(step.outputs, claimed, where)
        except NotCompiled:
            self.rollback(mark)
            return False
        from numlite.jit.kernels.islands import island

        if gen.island_table is None:
            gen.island_table = np.zeros(1, np.int64)  # the callback's address: filled by the engine
        number = len(gen.islands)
        reason = reason[len(where) + 2 :] if reason.startswith(f"{where}: ") else reason
        gen.islands.append((rt.index, step.index, ins, [(o.slot, o.shape) for o in outs], reason))
        self.where = (rt.index, step.index)
        names = [op[0].name for op in ins if op is not None] + [o.name for o in outs]
        # (the reason stays out of the source, which keys the cache: it may name objects)
        self.line(f"# {where}: an island, run by the NumPy engine; operands {' '.join(names)}")
        self.check(f"{self.kernel(island)}(ctl, np.int64({self.address(gen.island_table)}), np.int64({number}))")
        gen.ops += 1
        return True

    def _outputs(self, tensors: Sequence[int], claimed: dict[int, Slot], where: str) -> list[Operand]:
        """A node's output tensors as operands, each in its graph output's slot or a new one."""
        rt, outs = self.runtime, []
        for t in tensors:
            if t < 0:
                raise NotCompiled(f"{where}: an omitted output is not compiled")
            if rt.graph.tensors[t].is_variable:  # written in place, as the state ops write it
                slot = self._variable_slot(t, where)
            else:
                slot = claimed.get(t)
                if slot is None or slot.size != _size(rt.shapes[t]):  # (a caller's buffer of another shape: ShapeChanged)
                    slot = self.gen.arenas.alloc(rt.dtypes[t], _size(rt.shapes[t]))
            self.home[t] = slot
            self.gen.slots.add(slot)
            outs.append(Operand(slot.name, tuple(rt.shapes[t]), rt.dtypes[t], None, slot))
        return outs

    def _variable_slot(self, t: int, where: str) -> Slot:
        """A variable tensor (state an op such as an LSTM keeps, or a FILL resets): read and
        written in place in the interpreter's array, which reset_all_variables restores in place."""
        rt = self.runtime
        if rt.arrays[t] is None:
            raise NotCompiled(f"{where}: variable tensor {t} has no array to work in")
        slot = self.gen.arenas.const(rt.arrays[t], interpreters=True)
        if not any(s == slot and shared for s, _, shared in self.gen.arenas.constants):
            raise NotCompiled(f"{where}: variable tensor {t} cannot be read in place")
        self.home[t] = slot
        return slot

    def _read(self, t: int, where: str) -> Operand:
        rt = self.runtime
        if t in self.ops:
            op = self.ops[t]
            self.gen.slots.add(op.slot)
            return op
        slot = self.home.get(t)
        value = None
        if slot is None and rt.graph.tensors[t].is_variable and rt.arrays[t] is not None:
            slot = self._variable_slot(t, where)
        elif slot is None:
            if not rt.known[t] or rt.arrays[t] is None:
                raise NotCompiled(f"{where}: tensor {t} is read before it is computed")
            value = rt.arrays[t]
            if value.dtype.kind not in "biuf":
                raise NotCompiled(f"{where}: constant tensor {t} of {value.dtype.name} is not compiled")
            slot = self.gen.arenas.const(value, interpreters=True)
        self.gen.slots.add(slot)
        shape = rt.shapes[t] if rt.shapes[t] is not None else np.shape(value)
        return Operand(slot.name, tuple(shape), rt.dtypes[t], value, slot)


# At most this fraction of a model's operators run as islands (kernels/islands.py): an island
# costs about what the NumPy engine's invoke of that node does, plus a callback, so a model
# mostly of islands runs faster on the NumPy engine alone.
ISLANDS_AT_MOST = (1, 4)
_CONTROL_FLOW = {"WHILE", "IF", "CALL_ONCE"}  # never islands: their bodies are subgraphs of the compiled code

# Ops whose output has the broadcast shape of their inputs and whose emitters are element-wise
# loops (common.each, common.index): compiled on run-time shapes as they are.
_ELEMENTWISE_SHAPES = {
    "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "FLOOR_MOD", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
    "EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT",
    "SQUARE", "SIN", "COS", "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "LOGISTIC", "CAST",
}


def _quantized(rt: "SubgraphRuntime", step: Any) -> bool:
    """Whether the node has quantized operands and does more than move elements of one scale
    (then its emitter comes from QUANTIZED_EMITTERS)."""
    def params(t: int) -> tuple | None:
        q = rt.graph.tensors[t].quantization if t >= 0 else None
        if q is None or q.scale is None or not len(q.scale):
            return None
        zero = q.zero_point if q.zero_point is not None else ()
        return tuple(np.asarray(q.scale, np.float64).tolist()), tuple(np.asarray(zero, np.int64).tolist())

    if step.op_name in STATE_OPS or not any(params(t) is not None for t in (*step.inputs, *step.outputs)):
        return False
    if not step.inputs or not step.outputs:
        return True
    data, out = step.inputs[0], step.outputs[0]
    return not (step.op_name in MOVES_ELEMENTS and params(data) is not None and params(data) == params(out))


def _threads(num_threads: int | None) -> int:
    """The thread count of the compiled loop kernels: the interpreter's ``num_threads``
    (None or -1: every thread Numba has), at most Numba's ``NUMBA_NUM_THREADS``."""
    import numba

    most = int(numba.config.NUMBA_NUM_THREADS)
    return most if num_threads is None or num_threads < 1 else min(int(num_threads), most)


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


_LOCATIONS: dict[int, tuple[str, str]] = {}


def _locate(fn: Any) -> tuple[str, str]:
    """The module of :mod:`numlite.jit.kernels` holding ``fn`` and the expression that reaches
    it there (``take``, or ``KERNELS['ADD'][0]['same']`` for kernels kept in tables)."""
    if id(fn) not in _LOCATIONS:
        for module_name, module in list(sys.modules.items()):
            if module_name.startswith("numlite.jit.kernels") and module is not None:
                for attribute, value in vars(module).items():
                    _index_kernels(module_name, attribute, value, 3)
    if id(fn) not in _LOCATIONS:
        raise NotCompiled(f"kernel {fn!r} is not reachable from a module of numlite.jit.kernels")
    return _LOCATIONS[id(fn)]


def _index_kernels(module: str, path: str, value: Any, depth: int) -> None:
    if hasattr(value, "py_func"):  # a Numba dispatcher
        _LOCATIONS.setdefault(id(value), (module, path))
    elif depth and isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, (str, int)):
                _index_kernels(module, f"{path}[{key!r}]", item, depth - 1)
    elif depth and isinstance(value, tuple):
        for k, item in enumerate(value):
            _index_kernels(module, f"{path}[{k}]", item, depth - 1)
