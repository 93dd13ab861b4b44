"""Working memory of the heavy kernels: im2col blocks, a zero-bordered copy of an input,
per-thread products.

A kernel lists at prepare the arrays it will want (:meth:`ScratchUser.want_scratch`) and takes
them at eval (:meth:`ScratchUser.take_scratch`), binding views to them once. Like TFLite's
temporaries, that memory lives in the arena for the duration of the node's step: the runtime
plans it beside the tensors and hands the kernel a :class:`Scratchpad` over its bytes, which
other steps' tensors use when the node is not running. A kernel without a planned place (a node
prepared at run time, under dynamic shapes) carves from the interpreter's shared pad, one
buffer as large as the largest such request. Each new buffer has a new ``generation``; a kernel
carves again on its next eval when its pad's generation is not the one it carved from. Since
other nodes write the same memory in between, a kernel may assume nothing about what its
scratch held before this eval: constant borders are written again every time (they are small
next to the interior).
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Sequence

import numpy as np

from numlite.errors import PrepareError
from numlite.interpreter.planner import align, alignment
from numlite.kernels.base import scratch

ALIGN = 64  # bytes: each array starts on a cache line (small ones as the arena places them)


def check_size(shape: Sequence[int], dtype: Any) -> None:
    """Refuse (PrepareError) working memory beyond the bound the model verifier sets on tensors,
    so that forged options (a huge filter, stride or padding) cannot ask for gigabytes."""
    from numlite.model import verifier  # read at call time: tests may lower the bound

    nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    if nbytes > verifier.MAX_TENSOR_BYTES:
        raise PrepareError(f"needs {nbytes} bytes of working memory for shape {tuple(shape)}, over the limit")


def _layout(specs: Sequence[tuple[tuple[int, ...], Any]]) -> tuple[list[tuple[int, int, np.dtype]], int]:
    """Where :meth:`Scratchpad.carve` puts each array, ``(offset, bytes, dtype)``, and the
    bytes it takes in all: aligned as the arena aligns tensors."""
    places, end = [], 0
    for shape, dtype in specs:
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        offset = align(end, alignment(size))
        places.append((offset, size, dtype))
        end = offset + size
    return places, end


def nbytes_of(specs: Sequence[tuple[tuple[int, ...], Any]]) -> int:
    """Bytes that :meth:`Scratchpad.carve` takes for these ``(shape, dtype)`` arrays."""
    return _layout(specs)[1]


_generations = itertools.count(1)  # unique across pads: a kernel may move from one to another


class Scratchpad:
    """A byte buffer carved into arrays from its start: the bytes the arena plan gave one node
    (``buffer``), or the interpreter's shared pad, which grows to the largest request."""

    def __init__(self, buffer: np.ndarray | None = None) -> None:
        self.buffer = np.empty(0, np.uint8) if buffer is None else buffer
        self.generation = next(_generations)

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return int(self.buffer.nbytes)

    def carve(self, specs: Sequence[tuple[tuple[int, ...], Any]]) -> list[np.ndarray]:
        """Arrays of the given shapes and dtypes, one after the other in the buffer (a larger
        one replaces it first if needed)."""
        need = nbytes_of(specs)
        if need > self.buffer.nbytes:
            raw = scratch((need + ALIGN,), np.uint8)  # refused beyond the verifier's bound
            start = (-raw.ctypes.data) % ALIGN
            self.buffer = raw[start : start + need]
            self.generation = next(_generations)
        places, _ = _layout(specs)
        return [
            self.buffer[offset : offset + size].view(dtype).reshape(shape)
            for (shape, _), (offset, size, dtype) in zip(specs, places)
        ]


_PADS: "weakref.WeakKeyDictionary[Any, Scratchpad]" = weakref.WeakKeyDictionary()


def scratchpad_for(node: Any) -> Scratchpad:
    """The scratchpad of the interpreter running ``node`` (a private one outside an interpreter)."""
    interpreter = getattr(getattr(node, "runtime", None), "interpreter", None)
    if interpreter is None:
        return Scratchpad()
    try:
        pad = _PADS.get(interpreter)
        if pad is None:
            pad = _PADS[interpreter] = Scratchpad()
        return pad
    except TypeError:  # not weakly referenceable: keep one per kernel
        return Scratchpad()


class ScratchUser:
    """Mixin of kernels with working memory (see the module's docstring): they list it at
    prepare and carve it at eval, when stale."""

    scratch_specs: list = []
    generation = -1

    def want_scratch(self, specs: Sequence[tuple[tuple[int, ...], Any]]) -> None:
        """Note the arrays eval will carve (each checked by :func:`check_size`); until the
        runtime plans their place, they come from the shared pad."""
        self.scratch_specs = list(specs)
        for shape, dtype in self.scratch_specs:
            check_size(shape, dtype)
        self.pad = scratchpad_for(self.node)  # type: ignore[attr-defined]
        self.generation = -1

    def scratch_stale(self) -> bool:
        return bool(self.scratch_specs) and self.generation != self.pad.generation

    def take_scratch(self) -> list[np.ndarray]:
        if not self.scratch_specs:
            return []
        arrays = self.pad.carve(self.scratch_specs)
        self.generation = self.pad.generation
        return arrays

    @property
    def scratch_bytes(self) -> int:
        """Bytes of working memory this kernel carves."""
        return nbytes_of(self.scratch_specs)


def border_views(buffer: np.ndarray, start: Sequence[int], stop: Sequence[int]) -> list[np.ndarray]:
    """Views covering every element of ``buffer`` outside the box ``[start, stop)`` (one slab
    before and one after the box along each axis, within the box on earlier axes)."""
    views = []
    inner: list[slice] = []
    for axis, (a, b) in enumerate(zip(start, stop)):
        n = buffer.shape[axis]
        a, b = max(0, min(a, n)), max(0, min(b, n))
        rest = [slice(None)] * (buffer.ndim - axis - 1)
        if a > 0:
            views.append(buffer[tuple(inner + [slice(0, a)] + rest)])
        if b < n:
            views.append(buffer[tuple(inner + [slice(max(a, b), n)] + rest)])
        inner.append(slice(a, max(a, b)))
    return [v for v in views if v.size]
