"""Ops that move elements around without computing on them: TRANSPOSE, CONCATENATION, PACK,
UNPACK, SPLIT, SPLIT_V, TILE, REVERSE_V2, SPACE_TO_DEPTH, DEPTH_TO_SPACE, SPACE_TO_BATCH_ND,
BATCH_TO_SPACE_ND, MATRIX_DIAG, MATRIX_SET_DIAG and REVERSE_SEQUENCE.

Each eval is one or a few ``np.copyto`` calls from a strided view of the input into the
preallocated outputs. When an output shape depends on an input value prepare does not know
(a computed perm, axis, size_splits or multiples), the outputs are ``Spec(None, ...)`` and the
runtime prepares again at every invoke with the values.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, TensorInfo, byte_runs, copy_into, nothing, register
from numlite.model.ir import Quantization

F32, I8, U8, I16, U16, I32, U32, I64, BOOL, F16 = (
    np.float32, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.bool_, np.float16,
)
# Types LiteRT moves by element size alone (any 8/16/32/64-bit type).
ANY_FIXED = (F32, I8, U8, I16, U16, I32, U32, I64, BOOL, F16, np.uint64, np.float64)
# TRANSPOSE and TILE move complex64 too in LiteRT (PACK, CONCATENATION, SPLIT... refuse it).
WITH_COMPLEX = ANY_FIXED + (np.complex64,)


def _quant(t: TensorInfo) -> tuple[float, int]:
    """Per-tensor (scale, zero_point) of an input, (0.0, 0) when it has none, as LiteRT sees it."""
    return _quant_params(t.quantization)


def _quant_params(q: Quantization | None) -> tuple[float, int]:
    if q is None or q.scale is None or len(q.scale) == 0:
        return 0.0, 0
    zp = int(q.zero_point[0]) if q.zero_point is not None and len(q.zero_point) else 0
    return float(np.float32(q.scale[0])), zp


def _output_quant(kernel: Kernel, k: int = 0) -> tuple[float, int]:
    """(scale, zero_point) of the kernel's k-th output tensor, read from the model."""
    runtime = kernel.node.runtime
    o = kernel.node.outputs[k]
    if runtime is None or o < 0:
        return 0.0, 0
    return _quant_params(runtime.graph.tensors[o].quantization)


def _axis_value(kernel: Kernel, t: TensorInfo) -> int:
    if t.size != 1:
        raise kernel.fail(f"axis must have one element, it has shape {t.shape}")
    kernel.expect_dtype(t, I32, I64)
    return int(t.value.reshape(-1)[0])


class RunCopies:
    """A kernel's ``np.copyto(dst, src)`` pairs, views of its input and output arrays copied
    by contiguous runs (``byte_runs``: a channel split of 1x56x56x64 in four 56 -> 27 us) and
    made again only when the runtime hands the kernel other arrays."""

    def __init__(self) -> None:
        self.arrays: tuple = ()
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def __call__(self, arrays: tuple, make: Callable[[], list[tuple[np.ndarray, np.ndarray]]]) -> None:
        """Copy the pairs ``make()`` returns for these ``arrays`` (compared by identity)."""
        if len(arrays) != len(self.arrays) or any(a is not b for a, b in zip(arrays, self.arrays)):
            self.pairs = [byte_runs(dst, src) for dst, src in make()]
            self.arrays = arrays
        for dst, src in self.pairs:
            np.copyto(dst, src)


@register("TRANSPOSE")
class Transpose(Kernel):
    """Permutes dims by a 1-D int32 ``perm`` of length rank (negative entries count from the
    end, as LiteRT accepts them); at most 8 dims."""

    MAX_RANK = 8

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, perm_t = ins
        if x.ndim > self.MAX_RANK:
            raise self.fail(f"transpose supports ranks up to {self.MAX_RANK}, got {x.ndim}")
        self.expect_dtype(x, *WITH_COMPLEX)
        self.expect_dtype(perm_t, I32)
        if perm_t.ndim != 1 or perm_t.shape[0] != x.ndim:
            raise self.fail(f"perm of shape {perm_t.shape} does not match input rank {x.ndim}")
        if perm_t.value is None:
            return [Spec(None, x.dtype)]
        perm = [int(p) for p in perm_t.value]
        if any(not -x.ndim <= p < x.ndim for p in perm):
            raise self.fail(f"perm {perm} is out of bounds for rank {x.ndim}")
        self.perm = tuple(p % x.ndim if x.ndim else p for p in perm)
        if len(set(self.perm)) != len(self.perm):
            raise self.fail(f"perm {perm} has duplicate entries")
        self.tiles = transpose_tiles(x.shape, self.perm)
        self.bound: tuple | None = None
        self.copies = RunCopies()
        return [Spec(tuple(x.shape[p] for p in self.perm), x.dtype)]

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if self.tiles is None or not (x.flags.c_contiguous and out.flags.c_contiguous):
            self.copies((x, out), lambda: [(out, x.transpose(self.perm))])
            return
        if self.bound is None or self.bound[0] is not x or self.bound[1] is not out:
            self.pairs = self._tile_views(x, out)
            self.bound = (x, out)
        for dst, src in self.pairs:
            np.copyto(dst, src)

    def _tile_views(self, x: np.ndarray, out: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        shape, strides, block = self.tiles
        src = np.lib.stride_tricks.as_strided(x, shape, tuple(s * x.itemsize for s in strides), writeable=False)
        dst = out.reshape(shape)
        return [(dst[..., a : a + block], src[..., a : a + block]) for a in range(0, shape[-1], block)]


# A transpose whose innermost output axis is strided in the input copies tiles of about this
# many elements, each cut along that axis: NumPy's one strided copy of the whole tensor misses
# the cache on every row (1x56x56x64 NHWC -> NCHW: 115 -> 62 us; 14x14x1024: 406 -> 103).
TRANSPOSE_TILE = 1 << 13
# ... when the input's contiguous rows are this long: shorter rows (a few channels) or longer
# ones measured no faster tiled along that one axis.
TRANSPOSE_ROWS = (32, 2048)


def transposed_copies(dst: np.ndarray, src: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """``np.copyto(dst, src)`` as copies of tiles (see TRANSPOSE_TILE) for a C-contiguous 2-D
    ``dst`` and a ``src`` of its shape whose columns are contiguous (a transposed view)."""
    rows, width = dst.shape
    block = max(16, TRANSPOSE_TILE // max(rows, 1))
    if not TRANSPOSE_ROWS[0] <= rows <= TRANSPOSE_ROWS[1] or width < 2 * block:
        return [(dst, src)]
    return [(dst[:, a : a + block], src[:, a : a + block]) for a in range(0, width, block)]


def transpose_tiles(in_shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple | None:
    """How a C-contiguous ``in_shape`` array transposed by ``perm`` is copied in tiles: the
    output's shape with adjacent axes merged where the input's layout allows, the input's
    element strides along them and the tile width along the last; None for one copy."""
    axes = [p for p in perm if in_shape[p] != 1]
    strides = [math.prod(in_shape[p + 1 :]) for p in range(len(in_shape))]
    shape, steps = [], []
    for p in axes:  # merge an axis into the previous one when the input holds them as one
        if steps and steps[-1] == strides[p] * in_shape[p]:
            shape[-1] *= in_shape[p]
            steps[-1] = strides[p]
        else:
            shape.append(in_shape[p])
            steps.append(strides[p])
    if len(shape) < 2 or steps[-1] == 1:
        return None  # a plain copy, or rows that stay contiguous
    rows = shape[steps.index(1)]  # the length of the input's contiguous rows
    block = max(16, TRANSPOSE_TILE // rows)
    if not TRANSPOSE_ROWS[0] <= rows <= TRANSPOSE_ROWS[1] or shape[-1] < 2 * block:
        return None
    return tuple(shape), tuple(steps), block


@register("CONCATENATION")
class Concatenation(Kernel):
    """Joins inputs of equal rank along ``options.axis`` (negative counts from the end).

    A fused activation is ignored for float32, as in LiteRT's default (XNNPACK) path and its
    builtin eval, and rejected for other dtypes, as LiteRT's builtin prepare does (only float32
    goes to XNNPACK). uint8 inputs whose quantization differs from the output's are
    requantized (as LiteRT's ConcatenationWithScaling does); int8 inputs must share the
    output's quantization.
    """

    DTYPES = (F32, F16, U8, I8, I16, I32, I64, BOOL, U32)

    def prepare(self, ins):
        if len(ins) < 1 or any(t is None for t in ins):
            raise self.fail("expects at least one input and no omitted ones")
        t0 = ins[0]
        self.expect_dtype(t0, *self.DTYPES)
        if self.options is not None and self.options.fused_activation_function != 0 and t0.dtype != F32:
            raise self.fail(f"a fused activation on {t0.dtype.name} CONCATENATION is not supported")
        axis = self.options.axis if self.options is not None else 0
        rank = t0.ndim
        if axis < 0:
            axis += rank
        if not (0 <= axis < rank or (rank == 0 and axis == 0)):
            raise self.fail(f"axis {self.options.axis} is out of range for rank {rank}")
        for t in ins[1:]:
            if t.ndim != rank or t.dtype != t0.dtype:
                raise self.fail(f"inputs differ in rank or dtype: {t0.shape} {t0.dtype.name}, {t.shape} {t.dtype.name}")
            if any(a != b for d, (a, b) in enumerate(zip(t0.shape, t.shape)) if d != axis):
                raise self.fail(f"shapes {t0.shape} and {t.shape} differ outside axis {axis}")
        self.axis = axis
        self.rescale: list[tuple[float, float, int] | None] = [None] * len(ins)
        out_q = _output_quant(self)
        if t0.dtype == I8 and any(_quant(t) != out_q for t in ins):
            raise self.fail("int8 inputs must have the output's scale and zero point")
        if t0.dtype == I16 and (out_q[1] != 0 or any(_quant(t)[1] != 0 for t in ins)):
            raise self.fail("int16 inputs and output must have zero point 0")
        if t0.dtype == U8:
            for i, t in enumerate(ins):
                scale, zp = _quant(t)
                if (scale, zp) != out_q:
                    ratio = np.float32(scale) * (np.float32(1.0) / np.float32(out_q[0]))
                    self.rescale[i] = (ratio, -np.float32(zp) * ratio, out_q[1])
        self.copies = RunCopies()
        if rank == 0:  # scalars concatenate into a vector
            self.axis = 0
            return [Spec((len(ins),), t0.dtype)]
        shape = list(t0.shape)
        shape[axis] = sum(t.shape[axis] for t in ins)
        return [Spec(tuple(shape), t0.dtype)]

    def eval(self, ins, outs):
        out = outs[0]
        if not any(self.rescale):
            self.copies((out, *ins), lambda: self._parts(ins, out))
            return
        start = 0
        index = [slice(None)] * out.ndim
        for x, rescale in zip(ins, self.rescale):
            x = x.reshape(-1) if x.ndim == 0 else x
            index[self.axis] = slice(start, start + x.shape[self.axis])
            start += x.shape[self.axis]
            if rescale is None:
                out[tuple(index)] = x
            else:
                ratio, bias, out_zp = rescale
                y = (x.astype(F32) * ratio + bias).astype(np.float64)
                # std::round (half away from zero); adding 0.5 in float64 is exact for these values
                y = np.trunc(y + np.copysign(0.5, y))
                out[tuple(index)] = np.clip(y.astype(np.int32) + out_zp, 0, 255)

    def _parts(self, ins: list[np.ndarray], out: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(slice of the output, input)`` per input."""
        pairs, start = [], 0
        index = [slice(None)] * out.ndim
        for x in ins:
            x = x.reshape(-1) if x.ndim == 0 else x
            index[self.axis] = slice(start, start + x.shape[self.axis])
            start += x.shape[self.axis]
            pairs.append((out[tuple(index)], x))
        return pairs


@register("PACK")
class Pack(Kernel):
    """Stacks ``values_count`` inputs of one shape along a new dim ``axis`` (-rank-1..rank)."""

    DTYPES = (I32, F32, U8, U32, I8, I16, U16, I64)

    def prepare(self, ins):
        count = self.options.values_count if self.options is not None else 0
        if len(ins) != count or count < 1 or any(t is None for t in ins):
            raise self.fail(f"expects values_count={count} inputs, got {len(ins)}")
        t0 = ins[0]
        axis = self.options.axis
        if axis < 0:
            axis += t0.ndim + 1
        if not 0 <= axis <= t0.ndim:
            raise self.fail(f"axis {self.options.axis} is out of range for rank {t0.ndim + 1}")
        self.expect_dtype(t0, *self.DTYPES)
        for t in ins[1:]:
            if t.shape != t0.shape or t.dtype != t0.dtype:
                raise self.fail(f"inputs differ: {t0.shape} {t0.dtype.name} and {t.shape} {t.dtype.name}")
        out_q = _output_quant(self)
        if any(_quant(t) != out_q for t in ins):
            raise self.fail("inputs must have the output's scale and zero point")
        self.axis = axis
        return [Spec(t0.shape[:axis] + (count,) + t0.shape[axis:], t0.dtype)]

    def eval(self, ins, outs):
        np.stack(ins, axis=self.axis, out=outs[0])


def _split_copies(x: np.ndarray, axis: int, outs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(output, the view of x it receives)`` for consecutive parts of ``x`` along ``axis``."""
    copies = []
    start = 0
    index = [slice(None)] * x.ndim
    for out in outs:
        index[axis] = slice(start, start + out.shape[axis])
        start += out.shape[axis]
        copies.append((out, x[tuple(index)]))
    return copies


def _copy_parts(copies: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for out, part in copies:
        copy_into(out, part)


def _unshared(copies: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The copies whose output is not already the very memory of its part (``_Parts``)."""
    return [(out, part) for out, part in copies if not (out.ctypes.data == part.ctypes.data and part.flags.c_contiguous)]


class _Parts(Kernel):
    """An op whose outputs are consecutive parts of its input ``value`` (SPLIT, SPLIT_V,
    UNPACK). Along the outermost axis of more than one element the parts are consecutive
    slices of the input's bytes (``parts_of``, set at prepare): the memory plan then gives each
    part its slice when the input dies here, and the node copies nothing (an LSTM step's four
    gates); otherwise it copies each part from a view of the input."""

    value = 0  # the position of the input cut into parts
    parts_of: int | None = None  # ``value`` when the memory plan may hand out the parts, else None

    def _parts_contiguous(self, shape: tuple[int, ...], axis: int) -> None:
        self.parts_of = self.value if math.prod(shape[:axis]) == 1 else None

    def _copies(self, x: np.ndarray, outs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        return _split_copies(x, self.axis, outs)

    copies: RunCopies | None = None

    def eval(self, ins, outs):
        if self.copies is None:
            self.copies = RunCopies()
        x = ins[self.value]
        self.copies((x, *outs), lambda: _unshared(self._copies(x, outs)))

    def direct(self, ins, outs):
        """The copies into every output, from views of the input made once; no call at all
        when every output is its part's memory."""
        if ins[self.value] is None or any(out is None for out in outs):
            return None
        copies = [byte_runs(out, part) for out, part in _unshared(self._copies(ins[self.value], outs))]
        return (_copy_parts, (copies,)) if copies else (nothing, ())


@register("UNPACK")
class Unpack(_Parts):
    """Splits the input along ``axis`` into ``num`` outputs of rank - 1 (in place: see
    :class:`_Parts`)."""

    DTYPES = (I32, F32, F16, U8, I8, I16, BOOL)

    def prepare(self, ins):
        self.parts_of = None
        self.expect_inputs(ins, 1)
        x = ins[0]
        num = self.options.num if self.options is not None else 0
        if len(self.node.outputs) != num:
            raise self.fail(f"num={num} but the op has {len(self.node.outputs)} outputs")
        if x.size == 0:
            raise self.fail("input has no elements")
        axis = self.options.axis
        if axis < 0:
            axis += x.ndim
        if not 0 <= axis < x.ndim:
            raise self.fail(f"axis {self.options.axis} is out of range for rank {x.ndim}")
        self.expect_dtype(x, *self.DTYPES)
        if x.shape[axis] != num:
            raise self.fail(f"num={num} but dimension {axis} of {x.shape} has size {x.shape[axis]}")
        if any(_output_quant(self, k) != _quant(x) for k in range(num)):
            raise self.fail("outputs must have the input's scale and zero point")
        self.axis = axis
        self._parts_contiguous(x.shape, axis)
        return [Spec(x.shape[:axis] + x.shape[axis + 1 :], x.dtype)] * num

    def _copies(self, x: np.ndarray, outs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        x = np.moveaxis(x, self.axis, 0)
        return [(out, x[k, ...]) for k, out in enumerate(outs)]  # views, 0-d ones too


@register("SPLIT")
class Split(_Parts):
    """Splits ``value`` (the SECOND input) into ``num_splits`` equal parts along the axis held
    by the first input (in place: see :class:`_Parts`)."""

    DTYPES = (F32, U8, I8, I16, I32, I64)
    value = 1

    def prepare(self, ins):
        self.parts_of = None
        self.expect_inputs(ins, 2)
        axis_t, x = ins
        n = self.options.num_splits if self.options is not None else 0
        if len(self.node.outputs) != n:
            raise self.fail(f"num_splits={n} but the op has {len(self.node.outputs)} outputs")
        self.expect_dtype(x, *self.DTYPES)
        if axis_t.value is None:
            return [Spec(None, x.dtype)] * n
        axis = _axis_value(self, axis_t)
        if axis < 0:
            axis += x.ndim
        if not 0 <= axis < x.ndim:
            raise self.fail(f"axis {_axis_value(self, axis_t)} is out of range for rank {x.ndim}")
        if n == 0 or x.shape[axis] % n:
            raise self.fail(f"dimension {axis} of {x.shape} does not split evenly into {n}")
        self.axis = axis
        self._parts_contiguous(x.shape, axis)
        shape = x.shape[:axis] + (x.shape[axis] // n,) + x.shape[axis + 1 :]
        return [Spec(shape, x.dtype)] * n


@register("SPLIT_V")
class SplitV(_Parts):
    """Splits ``value`` along an axis into parts of the sizes in ``size_splits`` (one of which
    may be -1: whatever remains; in place: see :class:`_Parts`)."""

    DTYPES = (F32, U8, I16, U16, I32, I64, I8)

    def prepare(self, ins):
        self.parts_of = None
        self.expect_inputs(ins, 3)
        x, sizes_t, axis_t = ins
        n = self.options.num_splits if self.options is not None else 0
        if len(self.node.outputs) != n:
            raise self.fail(f"num_splits={n} but the op has {len(self.node.outputs)} outputs")
        self.expect_dtype(x, *self.DTYPES)
        if sizes_t.ndim != 1 or sizes_t.size != n:
            raise self.fail(f"size_splits of shape {sizes_t.shape} does not give {n} sizes")
        self.expect_dtype(sizes_t, I32, I64)
        if sizes_t.value is None or axis_t.value is None:
            return [Spec(None, x.dtype)] * n
        axis = _axis_value(self, axis_t)
        if axis < 0:
            axis += x.ndim
        if not 0 <= axis < x.ndim:
            raise self.fail(f"axis {_axis_value(self, axis_t)} is out of range for rank {x.ndim}")
        sizes = [int(s) for s in sizes_t.value]
        if sizes.count(-1) > 1:
            raise self.fail(f"size_splits {sizes} has more than one -1")
        total = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            if total > x.shape[axis]:
                raise self.fail(f"size_splits {sizes} exceed dimension {axis} of {x.shape}")
            sizes[sizes.index(-1)] = x.shape[axis] - total
        elif total != x.shape[axis]:
            raise self.fail(f"size_splits {sizes} do not sum to dimension {axis} of {x.shape}")
        if any(s < 0 for s in sizes):
            raise self.fail(f"size_splits {sizes} has a negative size")
        self.axis = axis
        self._parts_contiguous(x.shape, axis)
        return [Spec(x.shape[:axis] + (s,) + x.shape[axis + 1 :], x.dtype) for s in sizes]


@register("TILE")
class Tile(Kernel):
    """Repeats the input ``multiples[d]`` times along every dim d."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, mult_t = ins
        self.expect_dtype(x, *WITH_COMPLEX)
        self.expect_dtype(mult_t, I32, I64)
        if mult_t.size != x.ndim:
            raise self.fail(f"{mult_t.size} multiples for an input of rank {x.ndim}")
        if mult_t.value is None:
            return [Spec(None, x.dtype)]
        mult = [int(m) for m in mult_t.value.reshape(-1)]
        if any(m < 0 for m in mult):
            raise self.fail(f"multiples {mult} must be non-negative")
        # The output, seen as (m0, d0, m1, d1, ...), is the input seen as (1, d0, 1, d1, ...)
        # broadcast: one copy, no intermediate.
        self.tiled = tuple(v for m, d in zip(mult, x.shape) for v in (m, d))
        self.spread = tuple(v for d in x.shape for v in (1, d))
        return [Spec(tuple(m * d for m, d in zip(mult, x.shape)), x.dtype)]

    def eval(self, ins, outs):
        np.copyto(outs[0].reshape(self.tiled), ins[0].reshape(self.spread))


@register("REVERSE_V2")
class ReverseV2(Kernel):
    """Reverses the input along the dims in a 1-D int32 axis tensor; LiteRT requires them to be
    contiguous once sorted (so no repeats)."""

    DTYPES = (I32, F32, U8, I8, I16, I64, BOOL, F16)

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, axis_t = ins
        if axis_t.ndim != 1:
            raise self.fail(f"axis must be 1-D, it has shape {axis_t.shape}")
        if x.ndim > 8 or axis_t.size > x.ndim:
            raise self.fail(f"{axis_t.size} axes for an input of rank {x.ndim}")
        self.expect_dtype(x, *self.DTYPES)
        self.expect_dtype(axis_t, I32)
        self.axes = None if axis_t.value is None else self._axes(axis_t.value, x.ndim)
        return [Spec(x.shape, x.dtype)]

    def _axes(self, value: np.ndarray, rank: int) -> tuple[int, ...]:
        axes = sorted(int(a) + rank if a < 0 else int(a) for a in value)
        if any(not 0 <= a < rank for a in axes):
            raise self.fail(f"axes {value.tolist()} are out of range for rank {rank}")
        if any(b != a + 1 for a, b in zip(axes, axes[1:])):
            raise self.fail(f"axes {value.tolist()} are not contiguous")
        return tuple(axes)

    def eval(self, ins, outs):
        axes = self.axes if self.axes is not None else self._axes(ins[1], ins[0].ndim)
        np.copyto(outs[0], np.flip(ins[0], axes))


class _BlockRearrange(Kernel):
    """Shared checks of SPACE_TO_DEPTH and DEPTH_TO_SPACE: 4-D NHWC input, block_size > 0."""

    DTYPES = (F32, U8, I8, I32, I64, U16)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        self.copies((x, out), lambda: [(out.reshape(self.gathered), x.reshape(self.split).transpose(0, 1, 3, 2, 4, 5))])

    def prepare_block(self, ins) -> tuple[TensorInfo, int]:
        """Checks the input and options; the block size (``split`` and ``gathered``, set by
        the subclass, view the input and output so that one transposed copy moves the blocks)."""
        self.copies = RunCopies()
        self.expect_inputs(ins, 1)
        x = ins[0]
        if x.ndim != 4:
            raise self.fail(f"input must be 4-D (NHWC), it has shape {x.shape}")
        self.expect_dtype(x, *self.DTYPES)
        b = self.options.block_size if self.options is not None else 0
        if b <= 0:
            raise self.fail(f"block_size must be positive, got {b}")
        return x, b


@register("SPACE_TO_DEPTH")
class SpaceToDepth(_BlockRearrange):
    """Moves each b x b spatial block into channels: out[n, i, j, (dy*b + dx)*C + c] =
    in[n, i*b + dy, j*b + dx, c]."""

    def prepare(self, ins):
        x, b = self.prepare_block(ins)
        n, h, w, c = x.shape
        if h % b or w % b:
            raise self.fail(f"height and width of {x.shape} must be multiples of block_size {b}")
        self.split = (n, h // b, b, w // b, b, c)
        self.gathered = (n, h // b, w // b, b, b, c)
        return [Spec((n, h // b, w // b, c * b * b), x.dtype)]



@register("DEPTH_TO_SPACE")
class DepthToSpace(_BlockRearrange):
    """The inverse of SPACE_TO_DEPTH (TF's DCR order): out[n, i*b + dy, j*b + dx, c] =
    in[n, i, j, (dy*b + dx)*C + c]."""

    def prepare(self, ins):
        x, b = self.prepare_block(ins)
        n, h, w, c = x.shape
        if c % (b * b):
            raise self.fail(f"channels of {x.shape} must be a multiple of block_size² = {b * b}")
        oc = c // (b * b)
        self.split = (n, h, w, b, b, oc)
        self.gathered = (n, h, b, w, b, oc)
        return [Spec((n, h * b, w * b, oc), x.dtype)]



# --------------------------------------------------------------- SPACE_TO_BATCH / BATCH_TO_SPACE


class _BatchSpace(Kernel):
    """Shared checks of SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND: a 3-D (N, H, C) or 4-D
    (N, H, W, C) input (LiteRT supports no other rank), an int32 block shape with one entry per
    spatial dim and int32 paddings/crops of shape [spatial dims, 2], given as constants or at
    run time. 8- and 16-bit inputs must keep their quantization."""

    def prepare_common(self, ins) -> tuple[TensorInfo, list[int] | None, list[tuple[int, int]] | None]:
        self.expect_inputs(ins, 3)
        x, block_t, pads_t = ins
        if not 3 <= x.ndim <= 4:
            raise self.fail(f"input must have rank 3 or 4, it has shape {x.shape}")
        self.expect_dtype(x, *ANY_FIXED)
        self.expect_dtype(block_t, I32)
        self.expect_dtype(pads_t, I32)
        if x.dtype in (U8, I8, I16) and _quant(x) != _output_quant(self):
            raise self.fail("input and output must have the same scale and zero point")
        m = x.ndim - 2
        if block_t.shape != (m,):
            raise self.fail(f"block shape must have shape ({m},), it has {block_t.shape}")
        if pads_t.shape != (m, 2):
            raise self.fail(f"paddings/crops must have shape ({m}, 2), they have {pads_t.shape}")
        if block_t.value is None or pads_t.value is None:
            return x, None, None
        block = [int(b) for b in block_t.value]
        pads = [(int(a), int(b)) for a, b in pads_t.value.reshape(m, 2)]
        if any(b < 1 for b in block):
            raise self.fail(f"block shape {block} must be positive")
        if any(p < 0 for pair in pads for p in pair):
            raise self.fail(f"paddings/crops {pads} must not be negative")
        return x, block, pads


@register("SPACE_TO_BATCH_ND")
class SpaceToBatchNd(_BatchSpace):
    """Zero-pads the spatial dims, then moves each block offset into the batch: output batch
    ``(offset_h * block_w + offset_w) * N + n`` holds ``padded[n, i*bh + offset_h,
    j*bw + offset_w]``. The padding is the output zero point for 8/16-bit types, else 0."""

    def prepare(self, ins):
        x, block, pads = self.prepare_common(ins)
        if block is None:
            return [Spec(None, x.dtype)]
        n, c, m = x.shape[0], x.shape[-1], len(block)
        padded = [d + a + b for d, (a, b) in zip(x.shape[1:-1], pads)]
        if any(p % b for p, b in zip(padded, block)):
            raise self.fail(f"padded spatial dims {padded} are not multiples of the block shape {block}")
        out_spatial = [p // b for p, b in zip(padded, block)]
        fill = _output_quant(self)[1] if x.dtype in (U8, I8, I16) else 0
        self.padded = np.full((n, *padded, c), fill, x.dtype)
        self.interior = (slice(None),) + tuple(slice(a, a + d) for d, (a, _) in zip(x.shape[1:-1], pads))
        # padded as (N, o1, b1, ..., oM, bM, C), read in the order (b1..bM, N, o1..oM, C).
        self.split = (n, *[v for o, b in zip(out_spatial, block) for v in (o, b)], c)
        self.perm = tuple([2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + [2 * m + 1])
        self.gathered = (*block, n, *out_spatial, c)
        return [Spec((n * int(np.prod(block)), *out_spatial, c), x.dtype)]

    def eval(self, ins, outs):
        np.copyto(self.padded[self.interior], ins[0])
        np.copyto(outs[0].reshape(self.gathered), self.padded.reshape(self.split).transpose(self.perm))


@register("BATCH_TO_SPACE_ND")
class BatchToSpaceNd(_BatchSpace):
    """The inverse of SPACE_TO_BATCH_ND: batch ``(offset_h * block_w + offset_w) * N + n``
    becomes the pixels ``[n, i*bh + offset_h, j*bw + offset_w]``, then the crops are cut off."""

    def prepare(self, ins):
        x, block, crops = self.prepare_common(ins)
        if block is None:
            return [Spec(None, x.dtype)]
        batch, c, m = x.shape[0], x.shape[-1], len(block)
        total = int(np.prod(block))
        if batch % total:
            raise self.fail(f"batch {batch} is not a multiple of the block shape {block}")
        n = batch // total
        spatial = x.shape[1:-1]
        full = [d * b for d, b in zip(spatial, block)]
        out_spatial = [f - a - b for f, (a, b) in zip(full, crops)]
        if any(o < 0 for o in out_spatial):
            raise self.fail(f"crops {crops} exceed the spatial dims {full}")
        # input as (b1..bM, N, i1..iM, C), written in the order (N, i1, b1, ..., iM, bM, C).
        self.split = (*block, n, *spatial, c)
        self.perm = tuple([m] + [v for i in range(m) for v in (m + 1 + i, i)] + [2 * m + 1])
        self.interleaved = (n, *[v for d, b in zip(spatial, block) for v in (d, b)], c)
        self.cropped = (slice(None),) + tuple(slice(a, a + o) for (a, _), o in zip(crops, out_spatial))
        self.full = None if all(a == b == 0 for a, b in crops) else np.empty((n, *full, c), x.dtype)
        return [Spec((n, *out_spatial, c), x.dtype)]

    def eval(self, ins, outs):
        target = outs[0] if self.full is None else self.full
        np.copyto(target.reshape(self.interleaved), ins[0].reshape(self.split).transpose(self.perm))
        if self.full is not None:
            np.copyto(outs[0], self.full[self.cropped])


# ----------------------------------------------------------------------------- MATRIX DIAG

DIAG_DTYPES = (F32, I8, U8, I16, I32, I64)  # LiteRT copies these types; others it misreads as float


def _diagonal(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A writable view of the main diagonal of the trailing (rows, cols) matrices of a
    contiguous array: in the flattened matrix, element (i, i) sits at i * (cols + 1)."""
    flat = x.reshape(x.shape[:-2] + (rows * cols,))
    return flat[..., : min(rows, cols) * (cols + 1) : cols + 1]


@register("MATRIX_DIAG")
class MatrixDiag(Kernel):
    """Square matrices with the input's last axis on the diagonal, zeros elsewhere."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        x = ins[0]
        if x.ndim < 1:
            raise self.fail("input must have at least one dimension")
        self.expect_dtype(x, *DIAG_DTYPES)
        n = x.shape[-1]
        return [Spec(x.shape + (n,), x.dtype)]

    def eval(self, ins, outs):
        out = outs[0]
        out.fill(0)
        n = out.shape[-1]
        np.copyto(_diagonal(out, n, n), ins[0])


@register("MATRIX_SET_DIAG")
class MatrixSetDiag(Kernel):
    """The input matrices with their main diagonal replaced by the second input, whose shape
    must be the batch shape followed by min(rows, cols) (LiteRT reads it without checking)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, diag = ins
        if x.ndim < 2:
            raise self.fail(f"input must have rank 2 or more, it has shape {x.shape}")
        self.expect_dtype(x, *DIAG_DTYPES)
        if diag.dtype != x.dtype:
            raise self.fail(f"diagonal dtype {diag.dtype.name} differs from input dtype {x.dtype.name}")
        want = x.shape[:-2] + (min(x.shape[-2:]),)
        if diag.shape != want:
            raise self.fail(f"diagonal must have shape {want}, it has {diag.shape}")
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        x, diag = ins
        out = outs[0]
        np.copyto(out, x)
        np.copyto(_diagonal(out, *out.shape[-2:]), diag)


# ----------------------------------------------------------------------------- REVERSE_SEQUENCE


@register("REVERSE_SEQUENCE")
class ReverseSequence(Kernel):
    """For each index b along ``batch_dim``, reverses the first ``seq_lengths[b]`` elements
    along ``seq_dim`` and keeps the rest. A length of 0 or 1, or a negative one, reverses
    nothing (the installed LiteRT does not check; newer LiteRT versions reject negative
    lengths). A length beyond the seq_dim is an error: LiteRT would write past the output."""

    DTYPES = (F32, U8, I16, I32, I64)

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, lengths = ins
        self.expect_dtype(x, *self.DTYPES)
        self.expect_dtype(lengths, I32, I64)
        if lengths.ndim != 1:
            raise self.fail(f"seq_lengths must be 1-D, it has shape {lengths.shape}")
        seq, batch = (self.options.seq_dim, self.options.batch_dim) if self.options is not None else (0, 0)
        if not (0 <= seq < x.ndim and 0 <= batch < x.ndim and seq != batch):
            raise self.fail(f"seq_dim {seq} and batch_dim {batch} must be distinct dims of a rank-{x.ndim} input")
        if lengths.shape[0] != x.shape[batch]:
            raise self.fail(f"{lengths.shape[0]} seq_lengths for a batch of {x.shape[batch]}")
        self.dims = (batch, seq)
        self.steps = np.arange(x.shape[seq])
        self.rows = np.arange(x.shape[batch])[:, None]
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        x, lengths = ins
        size = self.steps.size
        if lengths.size and lengths.max() > size:
            raise InvokeError(f"seq_length {int(lengths.max())} exceeds the sequence dimension {size}")
        n = lengths.astype(np.int64)[:, None]
        source = np.where(self.steps < n, n - 1 - self.steps, self.steps)  # [batch, seq]
        view = np.moveaxis(x, self.dims, (0, 1))
        np.copyto(np.moveaxis(outs[0], self.dims, (0, 1)), view[self.rows, source])
