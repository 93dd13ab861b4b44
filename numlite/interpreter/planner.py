"""Place intermediate tensors in one arena, reusing memory whose tenants are dead.

The strategy is TFLite's greedy-by-size planner: take tensors largest first and put each at the
lowest offset whose gap, among tensors alive at the same time, is big enough. Two tensors may
share bytes only if their lifetimes (first producing step to last consuming step, inclusive) do
not overlap, so an op's output never aliases one of its own inputs, with one exception: an
element-wise op that may write over an input (``Kernel.inplace``, the runtime decides when)
shares that input's memory when the input dies there (``shares``), as LiteRT's in-place ops do.
A swish ``x * sigmoid(x)`` then needs two buffers of its size, not three. Likewise the parts of
a SPLIT along its outermost axis are the consecutive slices of a dying input's memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALIGNMENT = 64  # bytes; keeps every tensor aligned for SIMD loads, as TFLite's arena does
# Tensors of at most this many bytes (a loop's counters, a condition's boolean) are aligned
# to it only: they need no SIMD loads, and a loop's subgraphs hold many of them.
SMALL = 16


@dataclass(frozen=True)
class Lifetime:
    """A tensor to place: its size in bytes and the plan steps during which it is alive."""

    tensor: int
    nbytes: int
    first: int
    last: int


def align(n: int, alignment: int = ALIGNMENT) -> int:
    """``n`` rounded up to a multiple of ``alignment``."""
    return (n + alignment - 1) // alignment * alignment


def alignment(nbytes: int) -> int:
    """The alignment of a tensor (or working array) of ``nbytes`` bytes in the arena."""
    return SMALL if nbytes <= SMALL else ALIGNMENT


def aligned_zeros(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes starting on an ``ALIGNMENT`` boundary (NumPy promises 16), so that
    every offset the plan aligns is aligned in memory too."""
    raw = np.zeros(nbytes + ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start : start + nbytes]


def plan_arena(lifetimes: list[Lifetime], shares: dict[int, tuple[int, int]] | None = None) -> tuple[dict[int, int], int]:
    """Offsets for every tensor and the arena size they need, in bytes. ``shares`` maps a tensor
    to ``(host, byte offset)``: the tensor takes over the host's memory from that offset on (an
    in-place output its input's at 0, a SPLIT's part its slice of the input). Each tree of them
    is placed as one tenant living from the first one's birth to the last one's death."""
    if shares:
        return _plan_shared(lifetimes, shares)
    placed: list[tuple[int, int, Lifetime]] = []  # (offset, aligned size, lifetime), sorted by offset
    offsets: dict[int, int] = {}
    order = sorted(lifetimes, key=lambda t: (-t.nbytes, t.first, t.tensor))
    for t in order:
        unit = alignment(t.nbytes)
        size = align(max(t.nbytes, 1), unit)
        best_offset, best_gap = None, None
        cursor = 0
        for offset, other_size, other in placed:
            if other.last < t.first or other.first > t.last:
                continue  # not alive at the same time: its bytes are free for us
            start = align(cursor, unit)
            gap = offset - start
            if gap >= size and (best_gap is None or gap < best_gap):
                best_offset, best_gap = start, gap
            cursor = max(cursor, offset + other_size)
        offset = best_offset if best_offset is not None else align(cursor, unit)
        offsets[t.tensor] = offset
        placed.append((offset, size, t))
        placed.sort(key=lambda p: p[0])
    arena = max((o + s for o, s, _ in placed), default=0)
    return offsets, arena


def _plan_shared(lifetimes: list[Lifetime], shares: dict[int, tuple[int, int]]) -> tuple[dict[int, int], int]:
    by_tensor = {t.tensor: t for t in lifetimes}

    def root(t: int) -> tuple[int, int]:
        """The tenant that owns ``t``'s memory, and where in it ``t`` starts."""
        at = 0
        while t in shares and shares[t][0] in by_tensor:
            t, offset = shares[t]
            at += offset
        return t, at

    groups: dict[int, list[tuple[Lifetime, int]]] = {}
    for t in lifetimes:
        r, at = root(t.tensor)
        groups.setdefault(r, []).append((t, at))
    merged = [
        Lifetime(r, max(at + m.nbytes for m, at in members), min(m.first for m, _ in members), max(m.last for m, _ in members))
        for r, members in groups.items()
    ]
    offsets, size = plan_arena(merged)
    return {t.tensor: offsets[r] + at for r, members in groups.items() for t, at in members}, size


class SharedArena:
    """One buffer holding the arenas of all subgraphs of a model.

    Two subgraphs are active at the same time only when one calls the other (directly or
    through others). So each subgraph's region starts after the regions of all its callers,
    and subgraphs never active together (the two branches of an IF, a loop's cond and body,
    the bodies of two loops) start at the same offset and share bytes.
    """

    def __init__(self, callees: dict[int, list[int]]) -> None:
        self.callees = {s: sorted(set(c)) for s, c in callees.items()}
        self.buffer = np.zeros(0, np.uint8)
        self.bases: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.private: dict[int, int] = {}  # regions that did not fit, until the next layout

    @property
    def total_bytes(self) -> int:
        return int(self.buffer.size) + sum(self.private.values())

    def region(self, subgraph: int, size: int) -> np.ndarray:
        """Memory for ``size`` bytes of subgraph ``subgraph``'s arena: its place in the shared
        buffer when it fits there, else a private buffer (until ``layout`` runs again)."""
        self.sizes[subgraph] = size
        base = self.bases.get(subgraph)
        if base is not None and size <= self._capacity(subgraph, base):
            self.private.pop(subgraph, None)
            return self.buffer[base : base + size]
        self.private[subgraph] = size
        return aligned_zeros(size)

    def _capacity(self, subgraph: int, base: int) -> int:
        # It may grow until its first callee's region begins; nothing else is live beside it.
        limits = [self.bases[c] for c in self.callees.get(subgraph, ()) if c in self.bases]
        return (min(limits) if limits else self.buffer.size) - base

    def layout(self) -> dict[int, np.ndarray]:
        """Place every subgraph with a known size; returns each one's region of the new buffer."""
        callers: dict[int, list[int]] = {s: [] for s in self.sizes}
        for s, targets in self.callees.items():
            for c in targets:
                if c in callers and s in self.sizes:
                    callers[c].append(s)
        bases: dict[int, int] = {}

        def base_of(s: int) -> int:  # the call graph is acyclic (checked when the model loads)
            if s not in bases:
                bases[s] = max((base_of(c) + align(self.sizes[c]) for c in callers[s]), default=0)
            return bases[s]

        for s in self.sizes:
            base_of(s)
        total = max((bases[s] + align(self.sizes[s]) for s in self.sizes), default=0)
        self.buffer = aligned_zeros(total)
        self.bases, self.private = bases, {}
        return {s: self.buffer[bases[s] : bases[s] + self.sizes[s]] for s in self.sizes}
