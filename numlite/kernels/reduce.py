"""Reductions along axes: MEAN, SUM, REDUCE_MAX/MIN/PROD, REDUCE_ANY/ALL, ARG_MAX/ARG_MIN and
CUMSUM; and by segment: SEGMENT_SUM and UNSORTED_SEGMENT_SUM/MAX/MIN/PROD.

The reducers take the axes as an int32 tensor (negative axes count from the end, duplicates
count once, an empty list reduces nothing) and a ``keep_dims`` option. Like LiteRT they work
in the input's own type: integer sums and products wrap, integer MEAN sums in int64 and then
divides truncating toward zero, as C++ integer division does.

A float32 SUM or MEAN over consecutive axes (a global average pool: H and W of NHWC) is one
BLAS product of the input, viewed as ``[before, reduced, after]``, with a vector of ones:
several times faster than NumPy's strided reduction, and more accurate (BLAS keeps several
partial sums).

REDUCE_MAX and REDUCE_MIN of large float or integer tensors over consecutive axes halve the
reduced axis in each call, ``max(first half, second half)``, so that every call runs over long
contiguous runs (NumPy's own reduction visits one short run per output row or column: 3-4x
slower); a reduction over the last axis transposes first. Order does not matter for extrema.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels import parallel
from numlite.kernels.base import Kernel, Spec, TensorInfo, dot_into, normalize_axis, register
from numlite.kernels.layout import transposed_copies
from numlite.kernels.scratchpad import ScratchUser

# Below this many reduced elements NumPy's own sum costs no more than the product.
BLAS_SUM_FROM = 16
# Extrema reduced by halving (module docstring) from this many input elements and this many
# reduced ones; rows of fewer than TREE_MIN_RUN values after the reduced axes are transposed
# first, in tiles (layout.transposed_copies; a 56x56x64 image's maximum over its channels:
# 205 -> 140 us with one transposing copy, 87 us in tiles; over H and W 95 -> 35 us).
TREE_FROM = 1 << 14
TREE_MIN_REDUCED = 8
TREE_MIN_RUN = 16


def resolve_axes(axis_values: np.ndarray, ndim: int) -> tuple[int, ...]:
    """Normalized, de-duplicated axes in first-seen order (a scalar input reduces nothing)."""
    if ndim == 0:
        return ()
    axes: list[int] = []
    for a in np.asarray(axis_values).reshape(-1).tolist():
        a = normalize_axis(int(a), ndim)
        if a not in axes:
            axes.append(a)
    return tuple(axes)


def reduced_shape(shape: tuple[int, ...], axes: Sequence[int], keep_dims: bool) -> tuple[int, ...]:
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _is_quantized(t: TensorInfo) -> bool:
    q = t.quantization
    return q is not None and q.scale is not None and len(q.scale) > 0 and float(q.scale[0]) != 0.0


class Reducer(Kernel):
    """Shared prepare of the axis-tensor reductions; subclasses implement ``reduce``."""

    dtypes: tuple = (np.float32, np.int32, np.int64)
    block: tuple[int, int, int] | None = None  # a float32 sum done as a product (module docstring)

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, axis = ins
        self.expect_dtype(x, *self.dtypes)
        self.expect_dtype(axis, np.int32)
        self.check_quantization(x)
        if axis.value is None:
            return [Spec(None, x.dtype)]  # the output rank depends on the axis values
        self.axes = resolve_axes(axis.value, x.ndim)
        self.keep_dims = bool(self.options.keep_dims) if self.options is not None else False
        self.count = int(np.prod([x.shape[a] for a in self.axes], dtype=np.int64))
        self.kept_shape = reduced_shape(x.shape, self.axes, True)
        self.block = None
        if x.dtype == np.float32 and self.count >= BLAS_SUM_FROM and self.axes:
            self.block = sum_block(x.shape, self.axes)
            if self.block is not None:
                self.ones = np.ones(self.block[1], np.float32)
                self.run = parallel.runner(1)
        return [Spec(reduced_shape(x.shape, self.axes, self.keep_dims), x.dtype)]

    def blas_sum(self, x: np.ndarray, out: np.ndarray) -> None:
        """The float32 sum over ``self.block``'s middle axis as a product with ones."""
        if self.run is parallel.serial:
            _sum_product(x, self.ones, self.block, out, 0)
        else:
            self.run([lambda slot: _sum_product(x, self.ones, self.block, out, slot)])

    def check_quantization(self, x: TensorInfo) -> None:
        """Reducers that would need requantization reject quantized inputs."""

    def eval(self, ins, outs):
        out = outs[0]
        # Reduce with keepdims into a view of the output, so that one code path serves both.
        self.reduce(ins[0], self.axes, out.reshape(self.kept_shape))

    def reduce(self, x: np.ndarray, axes: tuple[int, ...], out: np.ndarray) -> None:
        raise NotImplementedError


def sum_block(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, int, int] | None:
    """``(before, reduced, after)`` sizes when ``axes`` are consecutive (in any order), else None."""
    first, last = min(axes), max(axes)
    if last - first + 1 != len(axes):
        return None
    size = lambda dims: int(np.prod(dims, dtype=np.int64))  # noqa: E731
    return size(shape[:first]), size(shape[first : last + 1]), size(shape[last + 1 :])


def sum_call(x: np.ndarray, ones: np.ndarray, block: tuple[int, int, int], out: np.ndarray) -> tuple | None:
    """``(function, arguments)``: the float32 sum over ``block``'s middle axis as ONE BLAS call
    on views of these C-contiguous arrays, for a caller that keeps it: np.dot's C function for a
    matrix-vector or vector-matrix product (a third of np.matmul's cost per call on a loop
    body's [1, 16] row: 0.19 us against 0.63), np.matmul for a batch of them. None when an
    array is not contiguous."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        return None
    before, reduced, after = block
    if after == 1:
        return dot_into, (x.reshape(before, reduced), ones, out.reshape(before))
    if before == 1:
        return dot_into, (ones, x.reshape(reduced, after), out.reshape(after))
    return np.matmul, (ones, x.reshape(before, reduced, after), out.reshape(before, after))


def _sum_product(x: np.ndarray, ones: np.ndarray, block: tuple[int, int, int], out: np.ndarray, slot: int) -> None:
    before, reduced, after = block
    if after == 1:
        np.matmul(x.reshape(before, reduced), ones, out=out.reshape(before))
    else:
        np.matmul(ones, x.reshape(before, reduced, after), out=out.reshape(before, after))


@register("SUM")
class Sum(Reducer):
    # 8/16-bit SUM in LiteRT is a requantizing kernel (quantized models), not implemented here.
    dtypes = (np.float32, np.int32, np.int64)

    def reduce(self, x, axes, out):
        if self.block is not None and x.size:
            self.blas_sum(x, out)
            return
        np.add.reduce(x, axis=axes, dtype=x.dtype, out=out, keepdims=True)  # np.sum, less overhead

    def direct(self, ins, outs):
        """The product with ones as one BLAS call on views made once (``sum_call``)."""
        x, out = ins[0], outs[0]
        if self.block is None or self.run is not parallel.serial or x is None or not x.size or out is None:
            return None
        return sum_call(x, self.ones, self.block, out)


@register("REDUCE_PROD")
class Prod(Reducer):
    dtypes = (np.float32, np.int32, np.int64, np.int8, np.int16)  # 8/16-bit products wrap
    # (quantized int8/int16 inputs go to QuantizedReduceProd, numlite/kernels/quantized.py)

    def reduce(self, x, axes, out):
        np.prod(x, axis=axes, dtype=x.dtype, out=out, keepdims=True)


class _Extremum(ScratchUser, Reducer):
    # LiteRT accepts bool at prepare but its kernel fails on it at invoke; numlite rejects it.
    dtypes = (np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16)
    ufunc: np.ufunc

    def prepare(self, ins):
        specs = super().prepare(ins)
        self.tree: tuple[int, int, int] | None = None  # (before, reduced, after), transposed when after is 1
        self.transposing: tuple | None = None  # (input, rows, tile copies) of the transposed form
        x = ins[0]
        block = sum_block(x.shape, self.axes) if specs[0].shape is not None and self.axes else None
        if block is not None and x.size >= TREE_FROM and block[1] >= TREE_MIN_REDUCED:
            before, reduced, after = block
            if after == 1 and before >= TREE_MIN_RUN:  # the last axes: [reduced, before] first
                self.tree = (1, reduced, before)
                self.want_scratch([((reduced, before), x.dtype), ((reduced // 2, before), x.dtype)])
                return specs
            if after >= TREE_MIN_RUN:
                self.tree = block
                self.want_scratch([((before, reduced // 2, after), x.dtype)])
                return specs
        self.want_scratch([])
        return specs

    def _tree(self, x: np.ndarray, out: np.ndarray) -> None:
        """``out`` = the extremum over the middle axis of x viewed ``[before, reduced, after]``,
        halving it per call (an odd last row folded into the first)."""
        arrays = self.take_scratch() if self.scratch_stale() else self.tree_buffers
        self.tree_buffers = arrays
        combine = type(self).ufunc
        before, n, after = self.tree
        if len(arrays) == 2:  # transposed: the reduced values of each output in one column
            rows = arrays[0]
            if self.transposing is None or self.transposing[0] is not x or self.transposing[1] is not rows:
                self.transposing = (x, rows, transposed_copies(rows, x.reshape(after, n).T))
            for dst, src in self.transposing[2]:
                np.copyto(dst, src)
            current, halves = rows.reshape(1, n, after), arrays[1].reshape(1, -1, after)
        else:
            current, halves = x.reshape(before, n, after), arrays[0]
        while n > 1:
            h = n // 2
            combine(current[:, :h], current[:, h : 2 * h], out=halves[:, :h])
            if n % 2:
                combine(halves[:, 0], current[:, 2 * h], out=halves[:, 0])
            current, n = halves, h
        np.copyto(out.reshape(before, after), current[:, 0])

    def check_quantization(self, x):
        # The maximum of quantized values is the quantized maximum only when the output
        # shares the input's parameters, which LiteRT requires.
        out_q = self.node.runtime.graph.tensors[self.node.outputs[0]].quantization
        if x.dtype.itemsize < 4 and not _same_quantization(x.quantization, out_q):
            raise self.fail("input and output quantization parameters differ")

    def reduce(self, x, axes, out):
        if self.count == 0 and x.size == 0 and out.size > 0:
            # An empty reduction yields the reducer's initial value, as in LiteRT.
            out.fill(self.initial(x.dtype))
            return
        if self.tree is not None and x.flags.c_contiguous:
            self._tree(x, out)
        else:
            type(self).ufunc.reduce(x, axis=axes, out=out, keepdims=True)
        if x.dtype.kind == "f" and np.isnan(out).any():
            self.reduce_with_nans(x, axes, out)

    def reduce_with_nans(self, x: np.ndarray, axes: tuple[int, ...], out: np.ndarray) -> None:
        """LiteRT reduces in memory order with ``cur = in unless in is beyond cur``, so a NaN
        does not stick: it is replaced by the next element. The result is NaN when the last
        element is NaN, else the extremum of the elements after the last NaN."""
        rest = [a for a in range(x.ndim) if a not in axes]
        # Reduced axes last, in their memory order, flattened: the order LiteRT visits them.
        rows = np.transpose(x, rest + sorted(axes)).reshape([x.shape[a] for a in rest] + [-1])
        n = rows.shape[-1]
        isnan = np.isnan(rows)
        last_nan = np.where(isnan.any(-1), n - 1 - np.argmax(isnan[..., ::-1], axis=-1), -1)
        after = np.arange(n) > last_nan[..., None]
        fill = np.float32(-np.inf if type(self).ufunc is np.maximum else np.inf)
        result = type(self).ufunc.reduce(np.where(after, rows, fill), axis=-1)
        out[...] = np.where(last_nan == n - 1, np.float32(np.nan), result).reshape(out.shape)

    def initial(self, dtype: np.dtype):
        raise NotImplementedError


@register("REDUCE_MAX")
class ReduceMax(_Extremum):
    ufunc = np.maximum

    def initial(self, dtype):
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@register("REDUCE_MIN")
class ReduceMin(_Extremum):
    ufunc = np.minimum

    def initial(self, dtype):
        return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


@register("REDUCE_ANY")
class ReduceAny(Reducer):
    """Logical OR over the axes (bool only); an empty reduction gives False."""

    dtypes = (np.bool_,)

    def reduce(self, x, axes, out):
        np.any(x, axis=axes, out=out, keepdims=True)


@register("REDUCE_ALL")
class ReduceAll(Reducer):
    """Logical AND over the axes (bool only); an empty reduction gives True."""

    dtypes = (np.bool_,)

    def reduce(self, x, axes, out):
        np.all(x, axis=axes, out=out, keepdims=True)


@register("MEAN")
class Mean(Reducer):
    # 8/16-bit MEAN in LiteRT is a requantizing kernel (quantized models), not implemented here.
    dtypes = (np.float32, np.int32, np.int64)

    bound: tuple = ()  # (input, output, the sum's function or None, its arguments): see _bind

    def prepare(self, ins):
        self.bound = ()
        return super().prepare(ins)

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        bound = self.bound
        if not bound or bound[0] is not x or bound[1] is not out:
            bound = self.bound = self._bind(x, out)
        if bound[2] is not None:
            bound[2](*bound[3])
            np.divide(out, self.divisor, out)
            return
        if x.size == 0:
            # LiteRT fills the output with quiet NaN (0 for integer types).
            out.fill(np.nan if out.dtype.kind == "f" else 0)
            return
        target = out.reshape(reduced_shape(x.shape, self.axes, True))
        if x.dtype.kind == "f":
            if self.block is not None:
                self.blas_sum(x, target)
            else:
                np.sum(x, axis=self.axes, dtype=x.dtype, out=target, keepdims=True)
            np.divide(target, np.asarray(self.count, x.dtype), out=target)
            return
        # Integers: sum in int64 (wrapping), then divide truncating toward zero and narrow.
        total = np.sum(x, axis=self.axes, dtype=np.int64, keepdims=True)
        quotient = np.abs(total) // np.int64(self.count)
        np.negative(quotient, out=quotient, where=total < 0)
        target[...] = quotient.astype(out.dtype, copy=False)

    def _bind(self, x: np.ndarray, out: np.ndarray) -> tuple:
        """For a float32 mean over consecutive axes (a global average pool) on one thread: the
        sum as one BLAS call on views made once (``sum_call``), kept with the arrays for the
        next calls (``bound``; no call where this does not apply)."""
        if self.block is None or self.run is not parallel.serial or not x.size or x.dtype != np.float32:
            return (x, out, None)
        call = sum_call(x, self.ones, self.block, out)
        if call is None:
            return (x, out, None)
        self.divisor = np.array(self.count, np.float32)  # 0-d: cheaper than a scalar operand
        return (x, out, *call)


def _same_quantization(a, b) -> bool:
    def params(q):
        if q is None or q.scale is None or len(q.scale) == 0:
            return (0.0, 0)
        zp = int(q.zero_point[0]) if q.zero_point is not None and len(q.zero_point) else 0
        return (float(np.float32(q.scale[0])), zp)

    return params(a) == params(b)


class ArgMinMax(Kernel):
    """ARG_MAX / ARG_MIN along one axis; ties resolve to the first index, like LiteRT's
    strict comparisons. The index type comes from the ``output_type`` option."""

    pick = staticmethod(np.argmax)

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, axis = ins
        self.expect_dtype(x, np.float32, np.int32, np.int8, np.uint8, np.bool_)
        self.expect_dtype(axis, np.int32, np.int64)
        if axis.size != 1:
            raise self.fail(f"axis must have exactly one element, it has {axis.size}")
        if x.ndim < 1:
            raise self.fail("input must have at least one dimension")
        code = self.options.output_type if self.options is not None else 4
        types = {2: np.dtype(np.int32), 4: np.dtype(np.int64)}
        if code not in types:
            raise self.fail(f"unsupported index output type {code}")
        if axis.value is None:
            return [Spec(None, types[code])]
        self.axis = normalize_axis(int(axis.value.reshape(-1)[0]), x.ndim)
        if x.shape[self.axis] == 0:
            raise self.fail("cannot take the arg-extremum of an empty axis")
        shape = tuple(d for i, d in enumerate(x.shape) if i != self.axis)
        return [Spec(shape, types[code])]

    def eval(self, ins, outs):
        x = ins[0]
        if x.dtype.kind == "f" and np.isnan(x).any():
            # LiteRT skips NaNs (index 0 when a row is all NaN). This is exact for its scalar
            # loop; rows of 4 or more may go through its SIMD kernel, which treats NaNs in
            # ways that depend on their position and the CPU, and is not reproduced.
            isnan = np.isnan(x)
            all_nan = np.expand_dims(isnan.all(axis=self.axis), self.axis)
            nan_pick = np.nanargmax if type(self).pick is np.argmax else np.nanargmin
            outs[0][...] = nan_pick(np.where(all_nan, np.float32(0), x), axis=self.axis)
            return
        outs[0][...] = type(self).pick(x, axis=self.axis)


@register("ARG_MAX")
class ArgMax(ArgMinMax):
    pick = staticmethod(np.argmax)


@register("ARG_MIN")
class ArgMin(ArgMinMax):
    pick = staticmethod(np.argmin)


# CUMSUM adds slab after slab (all values at one position along the axis) when the slabs are
# large enough and not too many: one add of whole slabs per step, in LiteRT's own order, where
# NumPy's accumulate walks each line along the axis on its own (56x56x64 along H: 1988 -> 68
# us; along the channels 611 -> 305).
SCAN_MIN_SLAB = 64
SCAN_MAX_STEPS = 4096


def _scan_by_slabs(x: np.ndarray, out: np.ndarray, exclusive: bool) -> None:
    """Running sums along the first axis of these views, slab by slab (``[k : k + 1]``: views
    even of a 1-D array)."""
    if exclusive:
        out[:1] = 0
        for k in range(1, x.shape[0]):
            np.add(out[k - 1 : k], x[k - 1 : k], out=out[k : k + 1])
        return
    np.copyto(out[:1], x[:1])
    for k in range(1, x.shape[0]):
        np.add(out[k - 1 : k], x[k : k + 1], out=out[k : k + 1])


@register("CUMSUM")
class Cumsum(Kernel):
    """Running sum along an axis, optionally exclusive (starting from 0) and/or reversed."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, axis = ins
        self.expect_dtype(x, np.float32, np.int32, np.int64)
        self.expect_dtype(axis, np.int32)
        if axis.size != 1:
            raise self.fail(f"axis must be a scalar, it has {axis.size} elements")
        if x.ndim < 1:
            raise self.fail("input must have at least one dimension")
        self.axis = None
        if axis.value is not None:
            self.axis = normalize_axis(int(axis.value.reshape(-1)[0]), x.ndim)
        self.exclusive = bool(getattr(self.options, "exclusive", False))
        self.reverse = bool(getattr(self.options, "reverse", False))
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        axis = self.axis if self.axis is not None else normalize_axis(int(ins[1].reshape(-1)[0]), x.ndim)
        if x.size == 0:
            return
        if self.reverse:  # a reversed scan is a forward scan over flipped views
            x, out = np.flip(x, axis), np.flip(out, axis)
        n = x.shape[axis]
        slab = x.size // n
        if slab >= SCAN_MIN_SLAB and n <= SCAN_MAX_STEPS and not np.may_share_memory(x, out):
            _scan_by_slabs(np.moveaxis(x, axis, 0), np.moveaxis(out, axis, 0), self.exclusive)
            return
        if not self.exclusive:
            np.cumsum(x, axis=axis, dtype=x.dtype, out=out)
            return
        n = x.shape[axis]
        head = [slice(None)] * x.ndim
        head[axis] = slice(0, 1)
        out[tuple(head)] = 0
        if n > 1:
            src = [slice(None)] * x.ndim
            dst = [slice(None)] * x.ndim
            src[axis], dst[axis] = slice(0, n - 1), slice(1, n)
            np.cumsum(x[tuple(src)], axis=axis, dtype=x.dtype, out=out[tuple(dst)])


# -- segments ------------------------------------------------------------------------------------


class _Segments(Kernel):
    """Rows of ``data`` (float32 or int32) combined into the output row their int32 segment id
    names; a segment no row names holds ``empty(dtype)``. Integer results wrap, as in C++."""

    combine: np.ufunc

    @staticmethod
    def empty(dtype: np.dtype) -> Any:
        return 0

    def _check(self, data: TensorInfo, ids: TensorInfo) -> None:
        self.expect_dtype(data, np.float32, np.int32)
        self.expect_dtype(ids, np.int32)
        if ids.ndim != 1 or data.ndim < 1 or ids.shape[0] != data.shape[0]:
            raise self.fail(f"segment ids {ids.shape} must be a vector as long as the data's first dimension {data.shape}")

    def _fill(self, data: np.ndarray, ids: np.ndarray, out: np.ndarray) -> None:
        out[...] = self.empty(out.dtype)
        # ids may span the data's leading dimensions (UNSORTED_SEGMENT_*): each id picks one
        # slice of the data's remaining dimensions.
        ids = ids.reshape(-1)
        data = data.reshape((ids.size,) + out.shape[1:])
        rows = ids >= 0  # negative ids are dropped, as TF does
        with np.errstate(over="ignore"):
            self.combine.at(out, ids[rows], data[rows])


def _limits(dtype: np.dtype) -> np.finfo | np.iinfo:
    return np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)


@register("SEGMENT_SUM")
class SegmentSum(_Segments):
    """Ids that start at 0 and grow by 0 or 1 from row to row (LiteRT refuses others, gaps
    included); the output has ``last id + 1`` rows (known once the ids are)."""

    combine = np.add

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        data, ids = ins
        self._check(data, ids)
        if ids.value is None:
            return [Spec(None, data.dtype)]
        return [Spec(self._shape(data.shape, ids.value), data.dtype)]

    def _shape(self, shape: tuple[int, ...], ids: np.ndarray) -> tuple[int, ...]:
        if ids.size and (ids[0] != 0 or np.any((np.diff(ids) != 0) & (np.diff(ids) != 1))):
            raise InvokeError(f"segment ids must start at 0 and grow by 0 or 1, got {ids.tolist()[:8]}")
        return (int(ids[-1]) + 1 if ids.size else 0,) + tuple(shape[1:])

    def eval(self, ins, outs):
        data, ids = ins
        if outs[0] is None:
            outs[0] = np.empty(self._shape(data.shape, ids), data.dtype)
        self._fill(data, ids, outs[0])


class _UnsortedSegments(_Segments):
    """``num_segments`` output rows (an int32 scalar or one-element vector); ids at or past it
    are an error. The ids' shape may be any prefix of the data's (as in LiteRT and TF): the
    output is ``(num_segments,) + data.shape[ids.ndim:]``."""

    def _check(self, data: TensorInfo, ids: TensorInfo) -> None:
        self.expect_dtype(data, np.float32, np.int32)
        self.expect_dtype(ids, np.int32)
        if ids.ndim > data.ndim or tuple(data.shape[:ids.ndim]) != tuple(ids.shape):
            raise self.fail(f"segment ids {ids.shape} must have a shape that is a prefix of the data's {data.shape}")

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        data, ids, count = ins
        self._check(data, ids)
        self.expect_dtype(count, np.int32)
        if count.size != 1 or count.ndim > 1:
            raise self.fail(f"num_segments must be a single value, it has shape {count.shape}")
        if count.value is None:
            return [Spec(None, data.dtype)]
        return [Spec(self._shape(data.shape, ids.ndim, count.value, self.fail), data.dtype)]

    @staticmethod
    def _shape(shape: tuple[int, ...], ids_rank: int, count: np.ndarray, error: Any = InvokeError) -> tuple[int, ...]:
        segments = int(count.reshape(-1)[0])
        if segments < 0:
            raise error(f"num_segments must not be negative, got {segments}")
        return (segments,) + tuple(shape[ids_rank:])

    def eval(self, ins, outs):
        data, ids, count = ins
        shape = self._shape(data.shape, ids.ndim, count)
        if ids.size and ids.max() >= shape[0]:
            raise InvokeError(f"segment id {int(ids.max())} is not below num_segments {shape[0]}")
        if outs[0] is None:
            outs[0] = np.empty(shape, data.dtype)
        self._fill(data, ids, outs[0])


@register("UNSORTED_SEGMENT_SUM")
class UnsortedSegmentSum(_UnsortedSegments):
    combine = np.add


@register("UNSORTED_SEGMENT_PROD")
class UnsortedSegmentProd(_UnsortedSegments):
    combine = np.multiply

    @staticmethod
    def empty(dtype: np.dtype) -> Any:
        return 1


@register("UNSORTED_SEGMENT_MAX")
class UnsortedSegmentMax(_UnsortedSegments):
    """An empty segment holds the type's lowest value (C++'s ``numeric_limits::lowest``)."""

    combine = np.maximum

    @staticmethod
    def empty(dtype: np.dtype) -> Any:
        return _limits(dtype).min


@register("UNSORTED_SEGMENT_MIN")
class UnsortedSegmentMin(_UnsortedSegments):
    """An empty segment holds the type's largest value."""

    combine = np.minimum

    @staticmethod
    def empty(dtype: np.dtype) -> Any:
        return _limits(dtype).max
