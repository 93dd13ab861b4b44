"""Indexing ops: SLICE, STRIDED_SLICE, GATHER, GATHER_ND, DYNAMIC_UPDATE_SLICE, EMBEDDING_LOOKUP,
EMBEDDING_LOOKUP_SPARSE, SCATTER_ND, SPARSE_TO_DENSE, ONE_HOT and HASHTABLE_LOOKUP.

The index tensors (begin/size/end/strides) usually are constants, so prepare turns them into a
tuple of Python slices once and eval is a single NumPy copy. When they are computed at run time
prepare returns an unknown output shape and the runtime prepares again at every invoke with the
values. Out-of-range indices are errors, as in LiteRT: nothing ever wraps around silently.
"""

from __future__ import annotations

import numpy as np

from numlite.errors import InvokeError, PrepareError
from numlite.kernels.base import Kernel, Spec, copy_into, register

# Element types the data inputs of these ops may have (LiteRT copies raw bytes, so every
# fixed-size type works; these are the ones numlite models use).
DATA = (np.float32, np.float16, np.int32, np.int64, np.int16, np.int8, np.uint8, np.bool_)
INDEX = (np.int32, np.int64)

INT32_MIN = -(2**31)


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


# ----------------------------------------------------------------------------------- SLICE


@register("SLICE")
class Slice(Kernel):
    """``input[begin : begin + size]`` per axis; a size of -1 means "to the end"."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        x, begin, size = ins
        self.expect_dtype(x, *DATA, np.complex64)  # LiteRT slices complex64 too
        self.expect_dtype(begin, *INDEX)
        if size.dtype != begin.dtype:
            raise self.fail(f"begin and size have different dtypes: {begin.dtype.name} and {size.dtype.name}")
        if begin.ndim != 1 or size.ndim != 1:
            raise self.fail("begin and size must be 1-D")
        if begin.size != x.ndim or size.size != x.ndim:
            raise self.fail(f"begin and size need {x.ndim} elements (the input rank), got {begin.size} and {size.size}")
        if begin.value is None or size.value is None:
            return [Spec(None, x.dtype)]
        self.index = self._index(x.shape, _ints(begin.value), _ints(size.value))
        return [Spec(tuple(s.stop - s.start for s in self.index), x.dtype)]

    def _index(self, shape: tuple[int, ...], begins: list[int], sizes: list[int]) -> tuple[slice, ...]:
        index = []
        for axis, (dim, b, s) in enumerate(zip(shape, begins, sizes)):
            if b < 0 or b > dim:
                raise self.fail(f"begin {b} is out of range for axis {axis} of size {dim}")
            if s == -1:
                s = dim - b
            elif s < 0 or b + s > dim:
                raise self.fail(f"size {s} from begin {b} does not fit axis {axis} of size {dim}")
            index.append(slice(b, b + s))
        return tuple(index)

    def eval(self, ins, outs):
        np.copyto(outs[0], ins[0][self.index])


# --------------------------------------------------------------------------- STRIDED_SLICE


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1) if i >= 0 else False


class _StridedPlan:
    """What LiteRT's BuildStridedSliceParams derives from the masks: ellipsis and new axes
    expanded into an "effective" input shape, and per effective axis begin/end/stride with
    begin/end/shrink masks (new axes become size-1 axes sliced [0:1])."""

    def __init__(self, shape: tuple[int, ...], begin_count: int, options) -> None:
        ellipsis = options.ellipsis_mask
        new_axis = options.new_axis_mask
        # A new-axis bit at an ellipsis position has no effect.
        added = sum(1 for i in range(begin_count) if not _bit(ellipsis, i) and _bit(new_axis, i))
        rank = len(shape) + added
        ellipsis_axes: set[int] = set()
        new_axes: set[int] = set()
        ellipsis_start, expanded = rank, 0
        i = 0
        while i < rank:
            if _bit(ellipsis, i):
                ellipsis_start = i
                end = max(i + 1, min(i + 1 + added + len(shape) - begin_count, rank))
                expanded = end - i - 1
                ellipsis_axes.update(range(i, end))
                i = end
                continue
            if _bit(new_axis, i - expanded):
                new_axes.add(i)
            i += 1
        # kind per effective axis: "full" (whole axis), "new", or the original spec index.
        self.kinds: list[object] = []
        eff_shape: list[int] = []
        added_axes = added_ellipsis = 0
        for i in range(rank):
            if i in ellipsis_axes:
                added_ellipsis = max(0, i - ellipsis_start)
                self.kinds.append("full")
                eff_shape.append(shape[i - added_axes])
            elif i in new_axes:
                self.kinds.append("new")
                eff_shape.append(1)
                added_axes += 1
            elif i >= begin_count + expanded:
                self.kinds.append("full")
                eff_shape.append(shape[i - added_axes])
            else:
                self.kinds.append(i - added_ellipsis)
                eff_shape.append(shape[i - added_axes])
        self.shape = tuple(eff_shape)
        self.options = options

    def strides(self, strides: list[int]) -> list[int]:
        """The stride of every effective axis (1 for whole and new axes)."""
        return [strides[k] if isinstance(k, int) else 1 for k in self.kinds]

    def axes(self, begin: list[int], end: list[int], strides: list[int]) -> list[tuple[int, int, int, bool]]:
        """(start, stop, stride, shrink) per effective axis, clamped as LiteRT's StartForAxis
        and EndForAxis do: start into [0, n] (forward) or [-1, n-1] (backward), and likewise
        the stop; masks override; ``offset`` makes the end relative to the clamped start."""
        o = self.options
        result = []
        for axis, (kind, n) in enumerate(zip(self.kinds, self.shape)):
            if kind == "new":
                result.append((0, 1, 1, False))
                continue
            if kind == "full":
                b = e = 0
                stride, bmask, emask, shrink = 1, True, True, False
            else:
                b, e, stride = begin[kind], end[kind], strides[kind]
                bmask, emask, shrink = _bit(o.begin_mask, kind), _bit(o.end_mask, kind), _bit(o.shrink_axis_mask, kind)
            start = b + n if b < 0 else b
            start = min(max(start, 0), n) if stride > 0 else min(max(start, -1), n - 1)
            if bmask:
                start = 0 if stride > 0 else n - 1
            if shrink:
                stop = start if start >= n else start + 1
            else:
                stop = e + start if o.offset else e
                stop = stop + n if stop < 0 else stop
                stop = min(max(stop, 0), n) if stride > 0 else min(max(stop, -1), n - 1)
                if emask:
                    stop = n if stride > 0 else -1
            result.append((start, stop, stride, shrink))
        return result


def _count(length: int, stride: int) -> int:
    """Elements of a range of signed ``length`` walked with ``stride`` (LiteRT's formula)."""
    if (length < 0) != (stride < 0):
        return 0
    if stride < 0:
        return int((length + 1) / stride) + 1  # C division truncates toward zero
    return 0 if length == 0 else (length - 1) // stride + 1


@register("STRIDED_SLICE")
class StridedSlice(Kernel):
    """NumPy-style ``input[begin:end:stride]`` with TFLite's masks and clamping."""

    def prepare(self, ins):
        self.expect_inputs(ins, 4)
        x, begin, end, strides = ins
        self.expect_dtype(x, *DATA, np.complex64)
        for t in (begin, end, strides):
            self.expect_dtype(t, np.int32)  # LiteRT supports int32 index tensors only
            if t.ndim != 1:
                raise self.fail(f"{t.name!r} must be 1-D, has shape {t.shape}")
        if begin.size != end.size:
            raise self.fail(f"begin has {begin.size} elements but end has {end.size}")
        if strides.size < begin.size:
            raise self.fail(f"strides has {strides.size} elements, fewer than begin's {begin.size}")
        if begin.size > 31:
            raise self.fail("at most 31 indices are supported")
        o = self.options
        self.plan = _StridedPlan(x.shape, begin.size, o)
        self.index: tuple | None = None
        if strides.value is None or end.value is None or (begin.value is None and not o.offset):
            return [Spec(None, x.dtype)]
        stride_list = self.plan.strides(_ints(strides.value))
        if 0 in stride_list:
            raise self.fail("stride value has to be non-zero")
        if INT32_MIN in stride_list:
            raise self.fail("stride value INT32_MIN is not supported")
        if o.offset:
            shape = self._offset_shape(_ints(end.value), stride_list)
        else:
            axes = self.plan.axes(_ints(begin.value), _ints(end.value), _ints(strides.value))
            shape = tuple(_count(stop - start, s) for start, stop, s, shrink in axes if not shrink)
        self.shape = shape
        if begin.value is not None:
            self.index = self._index(_ints(begin.value), _ints(end.value), _ints(strides.value))
        return [Spec(shape, x.dtype)]

    def _offset_shape(self, end: list[int], strides: list[int]) -> tuple[int, ...]:
        # With ``offset`` LiteRT takes each output size straight from the end tensor (indexed
        # by effective axis), without clamping against the input.
        shape = []
        for axis, kind in enumerate(self.plan.kinds):
            if isinstance(kind, int) and _bit(self.options.shrink_axis_mask, kind):
                continue
            if axis >= len(end):
                raise self.fail("offset with an ellipsis or new axis past the given indices is not supported")
            shape.append(_count(end[axis], strides[axis]))
        return tuple(shape)

    def _index(self, begin: list[int], end: list[int], strides: list[int]) -> tuple:
        index: list[object] = []
        for axis, (start, stop, stride, shrink) in enumerate(self.plan.axes(begin, end, strides)):
            n = self.plan.shape[axis]
            if shrink:
                # LiteRT copies nothing for a shrunk axis whose start is out of range or whose
                # stride is negative, leaving the output unwritten: refuse instead.
                if not 0 <= start < n or stride < 0:
                    raise self.fail(f"shrink index {start} is out of range for axis {axis} of size {n}")
                index.append(start)
            elif stride > 0:
                index.append(slice(start, stop, stride))
            elif start < 0:
                index.append(slice(0, 0))  # nothing: walking backwards from before the axis
            else:
                index.append(slice(start, None if stop < 0 else stop, stride))
        index = tuple(index)
        got = np.empty(self.plan.shape, np.bool_)[index].shape
        if got != tuple(self.shape):
            raise self.fail(f"slice of {got} elements does not fill the output of shape {tuple(self.shape)}")
        return index

    def eval(self, ins, outs):
        index = self.index
        if index is None:  # begin known only now (offset mode with a computed begin)
            try:
                index = self._index(_ints(ins[1]), _ints(ins[2]), _ints(ins[3]))
            except PrepareError as e:  # LiteRT would leave part of the output unwritten
                raise InvokeError(str(e)) from None
        np.copyto(outs[0], ins[0].reshape(self.plan.shape)[index])


# ---------------------------------------------------------------------------------- GATHER


def _check_positions(idx: np.ndarray, limit: int, what: str) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= limit):
        bad = idx[(idx < 0) | (idx >= limit)].reshape(-1)[0]
        raise InvokeError(f"{what} index {int(bad)} is out of range [0, {limit})")


def _gather_position(x: np.ndarray, pos: np.ndarray, out: np.ndarray, axis: int = 0) -> None:
    """``out = x[..., pos, ...]`` (``pos`` 0-d, on ``axis``), checked as LiteRT checks it."""
    i = pos.item()
    if not 0 <= i < x.shape[axis]:
        raise InvokeError(f"gather index {i} is out of range [0, {x.shape[axis]})")
    copy_into(out, x[(slice(None),) * axis + (i,)] if axis else x[i])


# The most rows of a GATHER's input for which its direct call keeps a view of each.
ROW_VIEWS = 1024


def _gather_row(rows: list[np.ndarray], pos: np.ndarray, out: np.ndarray) -> None:
    """``out = rows[pos]`` (``pos`` 0-d), checked as LiteRT checks it."""
    i = pos.item()
    if not 0 <= i < len(rows):
        raise InvokeError(f"gather index {i} is out of range [0, {len(rows)})")
    copy_into(out, rows[i])


@register("GATHER")
class Gather(Kernel):
    """``params`` indexed along ``axis`` by ``positions``, with leading ``batch_dims`` shared."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, pos = ins
        self.expect_dtype(x, *DATA)
        self.expect_dtype(pos, np.int16, np.int32, np.int64)
        axis = self.options.axis if self.options is not None else 0
        batch_dims = self.options.batch_dims if self.options is not None else 0
        axis = axis + x.ndim if axis < 0 else axis
        if not 0 <= axis < x.ndim:
            raise self.fail(f"axis {axis} is out of range for rank {x.ndim}")
        batch_dims = batch_dims + pos.ndim if batch_dims < 0 else batch_dims
        if not (0 <= batch_dims <= axis and batch_dims < x.ndim and batch_dims <= pos.ndim):
            raise self.fail(f"batch_dims {batch_dims} is invalid for axis {axis} and positions of rank {pos.ndim}")
        if x.shape[:batch_dims] != pos.shape[:batch_dims]:
            raise self.fail(f"batch dimensions differ: {x.shape[:batch_dims]} and {pos.shape[:batch_dims]}")
        self.axis, self.batch_dims = axis, batch_dims
        # One position (a loop's time step): a plain index, no gather machinery.
        self.single = pos.shape == () and not batch_dims
        shape = x.shape[:axis] + pos.shape[batch_dims:] + x.shape[axis + 1 :]
        if batch_dims:
            batch = int(np.prod(x.shape[:batch_dims], dtype=np.int64))
            outer = int(np.prod(x.shape[batch_dims:axis], dtype=np.int64))
            inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
            self.params_shape = (batch, outer, x.shape[axis], inner)
            self.positions_shape = (batch, 1, -1)
            self.grid = (np.arange(batch).reshape(-1, 1, 1), np.arange(outer).reshape(1, -1, 1))
        return [Spec(shape, x.dtype)]

    def direct(self, ins, outs):
        """One position along the first axis (a loop reading its time step): one function
        call on the arrays; see ``numlite.interpreter.runtime.direct_call``. Up to
        ``ROW_VIEWS`` positions, the call picks from views of the rows made now (0.18 us
        against 0.40 for indexing the array at each call, a loop step's [1, 16] input)."""
        if not self.single or self.axis != 0 or any(a is None for a in (*ins, *outs)):
            return None
        if ins[0].shape[0] <= ROW_VIEWS:
            return _gather_row, (list(ins[0]), ins[1], outs[0])
        return _gather_position, (ins[0], ins[1], outs[0])

    def eval(self, ins, outs):
        x, pos = ins
        if self.single:
            _gather_position(x, pos, outs[0], self.axis)
            return
        _check_positions(pos, x.shape[self.axis], "gather")
        if not self.batch_dims:
            # checked above: "clip" skips NumPy's own check and the copy of the output it makes
            # for it (4096 rows of a [1000, 64] table: 58 -> 18 us)
            np.take(x, pos, axis=self.axis, out=outs[0], mode="clip")
            return
        picked = x.reshape(self.params_shape)[self.grid[0], self.grid[1], pos.reshape(self.positions_shape)]
        np.copyto(outs[0], picked.reshape(outs[0].shape))


@register("GATHER_ND")
class GatherNd(Kernel):
    """Slices of ``params`` addressed by the rows of ``indices`` (last axis = coordinates)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        params, indices = ins
        self.expect_dtype(params, *DATA)
        self.expect_dtype(indices, np.int16, np.int32, np.int64)
        if params.ndim < 1:
            raise self.fail("params must be at least a vector")
        if indices.ndim < 1:
            raise self.fail("indices must be at least a vector")
        nd = indices.shape[-1]
        if nd > params.ndim:
            raise self.fail(f"index depth {nd} exceeds the params rank {params.ndim}")
        self.nd = nd
        self.limits = np.array(params.shape[:nd], np.int64)
        self.slice_shape = params.shape[nd:]
        self.n_slices = int(np.prod(indices.shape[:-1], dtype=np.int64))
        # Row of the slice table params.reshape(-1, slice_size) that each coordinate picks.
        self.weights = np.array([int(np.prod(params.shape[i + 1 : nd], dtype=np.int64)) for i in range(nd)], np.int64)
        return [Spec(indices.shape[:-1] + self.slice_shape, params.dtype)]

    def eval(self, ins, outs):
        params, indices = ins
        if params.size == 0 and indices.size:
            raise InvokeError("gather_nd from an empty params tensor")
        coords = indices.reshape(self.n_slices, self.nd).astype(np.int64)
        if coords.size and ((coords < 0).any() or (coords >= self.limits).any()):
            raise InvokeError(f"gather_nd index is out of bounds for params of shape {params.shape}")
        if outs[0].size == 0:
            return
        table = params.reshape(-1, outs[0].size // self.n_slices)
        np.take(table, coords @ self.weights, axis=0, out=outs[0].reshape(self.n_slices, -1), mode="clip")  # checked above


# ----------------------------------------------------------------------- DYNAMIC_UPDATE_SLICE


@register("DYNAMIC_UPDATE_SLICE")
class DynamicUpdateSlice(Kernel):
    """``operand`` with ``update`` written at ``start``; starts are clamped so the update fits
    (XLA semantics), so no start index is ever out of range."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        operand, update, start = ins
        self.expect_dtype(operand, *DATA)
        if update.dtype != operand.dtype:
            raise self.fail(f"update dtype {update.dtype.name} differs from operand dtype {operand.dtype.name}")
        self.expect_dtype(start, *INDEX)
        if start.ndim != 1 or start.size != operand.ndim:
            raise self.fail(f"start indices must be a vector of {operand.ndim} elements, got shape {start.shape}")
        if update.ndim != operand.ndim:
            raise self.fail(f"update rank {update.ndim} differs from operand rank {operand.ndim}")
        if any(u > o for u, o in zip(update.shape, operand.shape)):
            raise self.fail(f"update of shape {update.shape} is larger than operand of shape {operand.shape}")
        self.limits = np.array([o - u for o, u in zip(operand.shape, update.shape)], np.int64)
        return [Spec(operand.shape, operand.dtype)]

    def eval(self, ins, outs):
        operand, update, start = ins
        out = outs[0]
        if out is not operand:
            np.copyto(out, operand)
        begin = np.clip(start.astype(np.int64), 0, self.limits)
        out[tuple(slice(int(b), int(b) + n) for b, n in zip(begin, update.shape))] = update


# --------------------------------------------------------------------------- EMBEDDING_LOOKUP


@register("EMBEDDING_LOOKUP")
class EmbeddingLookup(Kernel):
    """Rows of a table (input 1) picked by int32 ids (input 0). A quantized int8/uint8 table
    with a float output is dequantized by its scale (per row when per-axis), as LiteRT's
    hybrid path does."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        ids, table = ins
        if ids.ndim != 1:
            raise self.fail(f"ids must be 1-D, have shape {ids.shape}")
        self.expect_dtype(ids, np.int32)
        self.expect_dtype(table, *DATA)
        if table.ndim < 2:
            raise self.fail(f"the table must have rank 2 or more, has shape {table.shape}")
        out_dtype = self._output_dtype(table.dtype)
        self.scale = None
        q = table.quantization
        if out_dtype != table.dtype:
            if out_dtype != np.float32 or table.dtype not in (np.dtype(np.int8), np.dtype(np.uint8)):
                raise self.fail(f"cannot look up a {table.dtype.name} table into {out_dtype.name}")
            if q is None or q.scale is None or len(q.scale) == 0:
                raise self.fail("a hybrid lookup needs a quantized table")
            if q.zero_point is not None and len(q.zero_point) and int(q.zero_point[0]) != 0:
                raise self.fail("a hybrid lookup needs symmetric quantization (zero point 0)")
            scale = np.asarray(q.scale, np.float32)
            if scale.size > 1:
                if q.quantized_dimension != 0 or scale.size != table.shape[0]:
                    raise self.fail("per-axis scales must be one per table row")
                self.scale = scale.reshape((-1,) + (1,) * (table.ndim - 1))
            else:
                self.scale = scale.reshape(())
        return [Spec((ids.shape[0],) + table.shape[1:], out_dtype)]

    def _output_dtype(self, default: np.dtype) -> np.dtype:
        """The dtype the model declares for the output: it selects the hybrid path."""
        runtime = self.node.runtime
        if runtime is not None and self.node.outputs and self.node.outputs[0] >= 0:
            return runtime.graph.tensors[self.node.outputs[0]].dtype
        return default

    def eval(self, ins, outs):
        ids, table = ins
        _check_positions(ids, table.shape[0], "embedding lookup")
        if self.scale is None:
            np.take(table, ids, axis=0, out=outs[0], mode="clip")  # checked above
            return
        # LiteRT reads the stored bytes as int8 even for a uint8 table.
        rows = table.view(np.int8)[ids].astype(np.float32)
        scale = self.scale[ids] if self.scale.ndim else self.scale
        np.multiply(rows, scale, out=outs[0])


@register("EMBEDDING_LOOKUP_SPARSE")
class EmbeddingLookupSparse(Kernel):
    """A sparse batch of weighted lookups combined per output slot: lookup ``i`` takes row
    ``ids[i]`` of ``params`` (input 4, float32, rank >= 2) times ``weights[i]`` into the slot
    named by the first ``rank - 1`` coordinates of ``indices[i]`` (the last coordinate only
    orders the lookups of one slot); ``dense_shape`` (int32) gives the slots' shape and its
    last entry is unused. The output is ``dense_shape[:-1] + params.shape[1:]``; a slot no
    lookup names is zero.

    combiner (option): 0 SUM (the weighted sum), 1 MEAN (divided by the sum of the weights),
    2 SQRTN (divided by the square root of the sum of squared weights). As in LiteRT, slots
    combine runs of consecutive lookups: a slot named again after another one is divided per
    run (TF requires the indices sorted, so that never happens in its models)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 5)
        ids, indices, dense_shape, weights, params = ins
        for t in (ids, indices, dense_shape):
            self.expect_dtype(t, np.int32)
        self.expect_dtype(weights, np.float32)
        self.expect_dtype(params, np.float32)
        if ids.ndim != 1 or indices.ndim != 2 or dense_shape.ndim != 1 or weights.ndim != 1 or params.ndim < 2:
            raise self.fail(f"needs 1-D ids, 2-D indices, 1-D dense_shape and weights and params of rank >= 2; got "
                            f"{ids.shape}, {indices.shape}, {dense_shape.shape}, {weights.shape}, {params.shape}")
        if not indices.shape[0] == ids.shape[0] == weights.shape[0]:
            raise self.fail(f"ids {ids.shape}, indices {indices.shape} and weights {weights.shape} must have one row "
                            "per lookup")
        if dense_shape.shape[0] != indices.shape[1] or indices.shape[1] < 1:
            raise self.fail(f"dense_shape {dense_shape.shape} must have one entry per index column {indices.shape}")
        self.combiner = int(getattr(self.options, "combiner", 0) or 0)
        if self.combiner not in (0, 1, 2):
            raise self.fail(f"unknown combiner {self.combiner}")
        if dense_shape.value is None:
            return [Spec(None, np.dtype(np.float32))]
        return [Spec(self._shape(dense_shape.value, params.shape, PrepareError), np.dtype(np.float32))]

    @staticmethod
    def _shape(dense_shape: np.ndarray, params: tuple[int, ...], error: type[Exception]) -> tuple[int, ...]:
        slots = _ints(dense_shape)[:-1]
        if any(d < 0 for d in slots):
            raise error(f"dense_shape {_ints(dense_shape)} has a negative dimension")
        return tuple(slots) + tuple(params[1:])

    def eval(self, ins, outs):
        ids, indices, dense_shape, weights, params = ins
        if outs[0] is None:
            outs[0] = np.empty(self._shape(dense_shape, params.shape, InvokeError), np.float32)
        out = outs[0]
        _check_positions(ids, params.shape[0], "embedding lookup sparse")
        slots = out.shape[:indices.shape[1] - 1]
        coords = indices[:, :-1]
        if np.any(coords < 0) or np.any(coords >= np.array(slots, np.int64)):
            raise InvokeError(f"embedding lookup sparse: indices {indices.tolist()[:4]} fall outside dense_shape "
                              f"{_ints(dense_shape)}")
        flat = out.reshape((-1,) + params.shape[1:])  # a view: the output is contiguous
        flat.fill(0)
        if not ids.size:
            return
        slot = np.ravel_multi_index(tuple(coords.T), slots) if coords.shape[1] else np.zeros(ids.size, np.intp)
        # Runs of consecutive lookups into one slot, in order (LiteRT's buckets).
        starts = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1]])
        for start, stop in zip(starts, np.r_[starts[1:], ids.size]):
            acc = flat[slot[start]]
            total = squares = np.float32(0)
            for i in range(start, stop):  # one float32 sum per lookup, in LiteRT's order
                w = weights[i]
                acc += params[ids[i]] * w
                squares += w * w
                total += w
            with np.errstate(divide="ignore", invalid="ignore"):  # zero weights: inf/nan, as in C++
                if self.combiner == 1:
                    acc /= total
                elif self.combiner == 2:
                    acc /= np.sqrt(squares)


# ------------------------------------------------------------------------------- SCATTER_ND


@register("SPARSE_TO_DENSE")
class SparseToDense(Kernel):
    """A tensor of ``output_shape`` holding ``default_value`` except at the given indices
    (a scalar or a vector of indices into a 1-D output, or [N, rank] coordinates), which take
    the values (one each, or one scalar for all); a later repeated index overwrites."""

    DTYPES = (np.float32, np.int32, np.int64, np.int8, np.uint8)

    def prepare(self, ins):
        self.expect_inputs(ins, 4)
        indices, shape, values, default = ins
        self.expect_dtype(indices, *INDEX)
        self.expect_dtype(shape, *INDEX)
        self.expect_dtype(values, *self.DTYPES)
        if default.dtype != values.dtype or default.size != 1:
            raise self.fail("default_value must be one value of the values' dtype")
        if indices.ndim > 2 or shape.ndim != 1 or values.ndim > 1:
            raise self.fail(f"unsupported shapes: indices {indices.shape}, output_shape {shape.shape}, values {values.shape}")
        if shape.value is None:
            return [Spec(None, values.dtype)]
        return [Spec(tuple(_ints(shape.value)), values.dtype)]

    def eval(self, ins, outs):
        indices, shape, values, default = ins
        out = outs[0]
        if out is None:
            out = outs[0] = np.empty(tuple(_ints(shape)), values.dtype)
        coordinates = indices.reshape(-1, 1) if indices.ndim < 2 else indices
        if coordinates.shape[1] != out.ndim:
            raise InvokeError(f"indices of {coordinates.shape[1]} coordinates for an output of rank {out.ndim}")
        if values.ndim == 1 and values.shape[0] != coordinates.shape[0]:
            raise InvokeError(f"{values.shape[0]} values for {coordinates.shape[0]} indices")
        if coordinates.size and (coordinates.min() < 0 or np.any(coordinates.max(axis=0) >= out.shape)):
            raise InvokeError(f"an index is out of range for the output shape {out.shape}")
        out[...] = default.reshape(())
        out[tuple(coordinates.T)] = values


@register("SCATTER_ND")
class ScatterNd(Kernel):
    """A zero tensor of the given shape into which slices of ``updates`` are added at the
    coordinates in the rows of ``indices``; duplicate coordinates add up in order (integers
    wrap, bools OR). Every coordinate must lie inside its axis, as LiteRT checks."""

    DTYPES = (np.float32, np.uint8, np.bool_, np.int8, np.int32, np.int64)

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        indices, updates, shape_t = ins
        self.expect_dtype(updates, *self.DTYPES)
        self.expect_dtype(indices, np.int32)  # LiteRT implements int32 indices only
        if shape_t.dtype != indices.dtype:
            raise self.fail(f"indices and shape must have the same dtype, not {indices.dtype.name} and {shape_t.dtype.name}")
        if indices.ndim < 1 or updates.ndim < 1 or shape_t.ndim != 1:
            raise self.fail("indices and updates must be at least 1-D and shape 1-D")
        if shape_t.value is None:
            return [Spec(None, updates.dtype)]
        shape = tuple(_ints(shape_t.value))
        if any(d < 0 for d in shape):
            raise self.fail(f"shape {shape} has a negative dimension")
        outer = indices.ndim - 1
        nd = indices.shape[-1]
        if indices.shape[:outer] != updates.shape[:outer]:
            raise self.fail(f"indices {indices.shape} and updates {updates.shape} differ in their leading dims")
        if updates.ndim - outer != len(shape) - nd or updates.shape[outer:] != shape[nd:]:
            raise self.fail(f"updates of shape {updates.shape} do not fit indices {indices.shape} into shape {shape}")
        self.nd = nd
        self.n_slices = int(np.prod(indices.shape[:outer], dtype=np.int64))
        self.rows = int(np.prod(shape[:nd], dtype=np.int64))  # slices the output holds
        self.limits = np.array(shape[:nd], np.int64)
        # Row of the output's slice table each coordinate moves by (the flat stride / slice size).
        self.weights = np.array([int(np.prod(shape[j + 1 : nd], dtype=np.int64)) for j in range(nd)], np.int64)
        return [Spec(shape, updates.dtype)]

    def eval(self, ins, outs):
        indices, updates, _ = ins
        out = outs[0]
        out.fill(0)
        if self.n_slices == 0 or updates.size == 0:
            return
        coords = indices.reshape(self.n_slices, self.nd).astype(np.int64)
        if (coords < 0).any() or (coords >= self.limits).any():
            raise InvokeError(f"scatter_nd index is out of bounds for the output of shape {out.shape}")
        rows = coords @ self.weights
        table = out.reshape(self.rows, -1)
        slices = updates.reshape(self.n_slices, -1)
        if out.dtype == np.bool_:
            np.logical_or.at(table, rows, slices)
        else:
            np.add.at(table, rows, slices)


# ---------------------------------------------------------------------------------- ONE_HOT


@register("ONE_HOT")
class OneHot(Kernel):
    """``on_value`` where ``indices == j`` along a new axis of size ``depth``, else
    ``off_value``; indices outside [0, depth) give a row of ``off_value``. int64 indices are
    narrowed to int before the comparison, as in LiteRT."""

    DTYPES = (np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_)  # LiteRT's eval types

    def prepare(self, ins):
        self.expect_inputs(ins, 4)
        indices, depth, on, off = ins
        self.expect_dtype(indices, np.int32, np.int64)
        self.expect_dtype(depth, np.int32)
        self.expect_dtype(on, *self.DTYPES)
        if off.dtype != on.dtype:
            raise self.fail(f"on_value and off_value have different dtypes: {on.dtype.name} and {off.dtype.name}")
        for t in (depth, on, off):
            if t.size != 1:
                raise self.fail(f"{t.name!r} must have one element, it has shape {t.shape}")
        axis = self.options.axis if self.options is not None else -1
        axis = indices.ndim if axis == -1 else axis  # only -1 counts from the end
        if not 0 <= axis <= indices.ndim:
            raise self.fail(f"axis {axis} is out of range for an output of rank {indices.ndim + 1}")
        if depth.value is None:
            return [Spec(None, on.dtype)]
        d = int(depth.value.reshape(-1)[0])
        if d < 0:
            raise self.fail(f"depth must not be negative, got {d}")
        prefix = int(np.prod(indices.shape[:axis], dtype=np.int64))
        suffix = int(np.prod(indices.shape[axis:], dtype=np.int64))
        self.views = ((prefix, 1, suffix), (prefix, d, suffix))
        self.classes = np.arange(d, dtype=np.int32).reshape(1, d, 1)
        return [Spec(indices.shape[:axis] + (d,) + indices.shape[axis:], on.dtype)]

    def eval(self, ins, outs):
        indices, _, on, off = ins
        out = outs[0].reshape(self.views[1])
        if out.size == 0:
            return
        hot = indices.astype(np.int32, copy=False).reshape(self.views[0]) == self.classes
        out.fill(off.reshape(-1)[0])
        np.copyto(out, on.reshape(-1)[0], where=hot)


# --------------------------------------------------------------------------- HASHTABLE_LOOKUP


@register("HASHTABLE_LOOKUP")
class HashtableLookup(Kernel):
    """The legacy key-value lookup: for each int32 ``lookup`` id, the row of ``values`` whose
    entry in the sorted int32 ``keys`` equals it (a binary search, as LiteRT's), or a row of
    zeros (an empty string) where no key does; ``hits`` (uint8) says which were found."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        lookup, keys, values = ins
        self.expect_dtype(lookup, np.int32)
        self.expect_dtype(keys, np.int32)
        if lookup.ndim != 1 or keys.ndim != 1 or values.ndim < 1 or values.shape[0] != keys.shape[0] or not keys.shape[0]:
            raise self.fail(f"needs 1-D lookup and keys and values with a row per key; got {lookup.shape}, {keys.shape}, "
                            f"{values.shape}")
        n = lookup.shape[0]
        return [Spec((n,) + tuple(values.shape[1:]), values.dtype), Spec((n,), np.dtype(np.uint8))]

    def eval(self, ins, outs):
        lookup, keys, values = ins
        at = np.searchsorted(keys, lookup).clip(0, len(keys) - 1)
        hit = keys[at] == lookup
        out = outs[0]
        out[...] = b"" if out.dtype == object else 0
        out[hit] = values[at[hit]]
        outs[1][...] = hit
