"""Working memory shared by the heavy kernels of one interpreter.

The kernels of an interpreter run one at a time, so their scratch arrays (a zero-bordered copy
of a convolution's input, im2col blocks, per-thread products) need not coexist: one buffer as
large as the largest single request serves them all, instead of the sum of every node's.

A kernel states at prepare how many bytes it will want (:meth:`Scratchpad.reserve`) and takes
its arrays at eval (:meth:`Scratchpad.carve`), binding views to them once. Whenever the buffer
is replaced (a later, larger request) the pad's ``generation`` changes and each kernel carves
its arrays again on its next eval. Since other kernels write the same memory in between, a
kernel may assume nothing about what its scratch held before this eval: constant borders are
written again every time (they are small next to the interior).
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np

from numlite.errors import PrepareError
from numlite.kernels.base import scratch

ALIGN = 64  # bytes: each array starts on a cache line


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


def check_size(shape: Sequence[int], dtype: Any) -> None:
    """Refuse (PrepareError) working memory beyond the bound the model verifier sets on tensors,
    so that forged options (a huge filter, stride or padding) cannot ask for gigabytes."""
    from numlite.model import verifier  # read at call time: tests may lower the bound

    nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    if nbytes > verifier.MAX_TENSOR_BYTES:
        raise PrepareError(f"needs {nbytes} bytes of working memory for shape {tuple(shape)}, over the limit")


def nbytes_of(specs: Sequence[tuple[tuple[int, ...], Any]]) -> int:
    """Bytes that :meth:`Scratchpad.carve` takes for these ``(shape, dtype)`` arrays."""
    return sum(_aligned(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize) for shape, dtype in specs)


class Scratchpad:
    """One growing byte buffer, carved into arrays from its start by each kernel in turn."""

    def __init__(self) -> None:
        self.buffer = np.empty(0, np.uint8)
        self.reserved = 0
        self.generation = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now (the largest request seen so far once every kernel has run)."""
        return int(self.buffer.nbytes)

    def reserve(self, nbytes: int) -> None:
        """Note a kernel's need at prepare; memory is allocated by the first carve."""
        self.reserved = max(self.reserved, int(nbytes))

    def carve(self, specs: Sequence[tuple[tuple[int, ...], Any]]) -> list[np.ndarray]:
        """Arrays of the given shapes and dtypes, one after the other in the buffer."""
        need = max(nbytes_of(specs), self.reserved)
        if need > self.buffer.nbytes:
            raw = scratch((need + ALIGN,), np.uint8)  # refused beyond the verifier's bound
            start = (-raw.ctypes.data) % ALIGN
            self.buffer = raw[start : start + need]
            self.generation += 1
        arrays, offset = [], 0
        for shape, dtype in specs:
            dtype = np.dtype(dtype)
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            arrays.append(self.buffer[offset : offset + size].view(dtype).reshape(shape))
            offset += _aligned(size)
        return arrays


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
