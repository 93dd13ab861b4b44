"""The StableHLO operators LiteRT 2.3's builtin resolver runs (models converted from JAX or from
PyTorch through litert-torch), with LiteRT's semantics where it departs from the StableHLO spec:

* STABLEHLO_ADD, _MULTIPLY, _MAXIMUM, _MINIMUM, _AND: element-wise on two tensors of one shape
  and dtype (no broadcasting). Integers wrap around; bools add as OR and multiply as AND.
  MAXIMUM is C++'s ``std::max(a, b)`` (``b if a < b else a``) and MINIMUM ``std::min``
  (``b if b < a else a``): a NaN in the second operand is ignored, one in the first is kept.
* STABLEHLO_SHIFT_LEFT: int8, int16 and int32; a shift past the width (or negative) gives 0.
* STABLEHLO_PAD: edge padding (negative: cropping) and interior padding with a scalar value.
* STABLEHLO_GATHER / STABLEHLO_SCATTER: the spec's general forms (no batching dimensions: the
  TFLite options have none); gather clamps its start indices into the operand, scatter skips
  updates that fall outside it. Scatter's update computation is read off its subgraph as LiteRT
  does: no operator means replace, one STABLEHLO_ADD/_MULTIPLY/_MAXIMUM/_MINIMUM means combine
  the operand's value with the update's; updates apply in row-major order of the updates.
* STABLEHLO_REDUCE_WINDOW (the deprecated REDUCE_WINDOW, which shares LiteRT's kernel, is in
  numlite.kernels.xla_window on the builtin-sweep branch): base dilation and padding filled with the init value, then each window reduced in row-major
  order starting from the init value; the body subgraph must be one ADD, MUL, MAXIMUM, MINIMUM,
  LOGICAL_AND or LOGICAL_OR (builtin or STABLEHLO_).
* STABLEHLO_RNG_BIT_GENERATOR: Philox-4x32-10 (DEFAULT, PHILOX) or Threefry-2x32-20 bits from
  an explicit uint64 state; outputs the new state and the bits.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, copy_into, register, scratch
from numlite.kernels.random import Philox
from numlite.kernels.xla_window import window_taps

FLOATS = (np.float16, np.float32, np.float64)
INTEGERS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
ELEMENTWISE_DTYPES = (*FLOATS, *INTEGERS, np.bool_)
INDEX_DTYPES = (np.int32, np.int64)


def options_of(kernel: Kernel, type_name: str):
    """The node's options table, which must be ``type_name`` (LiteRT refuses the model without it)."""
    o = kernel.options
    if o is None or o.type_name != type_name:
        found = "none" if o is None else o.type_name
        raise kernel.fail(f"needs {type_name} in builtin_options_2, the operator has {found}")
    return o


def _ints(values, name: str, kernel: Kernel, length: int | None = None, default: int | None = None) -> list[int]:
    """An options vector as Python ints, checked to have ``length`` entries (a missing or
    empty vector is ``default`` repeated, when a default exists)."""
    if values is None or len(values) == 0:
        if default is not None and length is not None:
            return [default] * length
        values = []
    out = [int(v) for v in values]
    if length is not None and len(out) != length:
        raise kernel.fail(f"option {name} has {len(out)} entries, the operand's rank is {length}")
    return out


def _dims(values: Sequence[int], rank: int, name: str, kernel: Kernel) -> list[int]:
    """Dimension numbers, each in [0, rank)."""
    for d in values:
        if not 0 <= d < rank:
            raise kernel.fail(f"option {name} names dimension {d}, out of range for rank {rank}")
    if len(set(values)) != len(values):
        raise kernel.fail(f"option {name} repeats a dimension: {list(values)}")
    return list(values)


# ----------------------------------------------------------------------------- element-wise


class _Elementwise(Kernel):
    """Two operands of one shape and dtype (LiteRT's ElementwisePrepare: no broadcasting)."""

    dtypes: tuple = ELEMENTWISE_DTYPES

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        a, b = ins
        if a.dtype != b.dtype:
            raise self.fail(f"operands have dtypes {a.dtype.name} and {b.dtype.name}; they must be the same")
        if a.shape != b.shape:
            raise self.fail(f"operands have shapes {a.shape} and {b.shape}; they must be the same (no broadcasting)")
        self.expect_dtype(a, *self.dtypes)
        return [Spec(a.shape, a.dtype)]


@register("STABLEHLO_ADD")
class StablehloAdd(_Elementwise):
    def eval(self, ins, outs):
        np.add(ins[0], ins[1], out=outs[0])


@register("STABLEHLO_MULTIPLY")
class StablehloMultiply(_Elementwise):
    def eval(self, ins, outs):
        np.multiply(ins[0], ins[1], out=outs[0])


@register("STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM")
class StablehloMaxMin(_Elementwise):
    """C++'s ``std::max(a, b)``: ``b`` only where ``a < b``; ``std::min(a, b)``: ``b`` only
    where ``b < a`` (so a NaN first operand is kept, a NaN second one ignored)."""

    def eval(self, ins, outs):
        a, b = ins
        copy_into(outs[0], a)
        np.copyto(outs[0], b, where=np.less(a, b) if self.node.op_name == "STABLEHLO_MAXIMUM" else np.less(b, a))


@register("STABLEHLO_AND")
class StablehloAnd(_Elementwise):
    """Bitwise AND of integers, logical AND of bools."""

    dtypes = (*INTEGERS, np.bool_)

    def eval(self, ins, outs):
        np.bitwise_and(ins[0], ins[1], out=outs[0])


@register("STABLEHLO_SHIFT_LEFT")
class StablehloShiftLeft(_Elementwise):
    """``lhs << rhs``. LiteRT's int8 and int16 shift as C ints and keep the low bits, so any
    shift of 8 (16) or more gives 0, as NumPy's does; for int32 a shift of 32 or more (or a
    negative one) is undefined in LiteRT's C++ and 0 here, as in the StableHLO reference."""

    dtypes = (np.int8, np.int16, np.int32)

    def eval(self, ins, outs):
        np.left_shift(ins[0], ins[1], out=outs[0])


# ----------------------------------------------------------------------------- pad


@register("STABLEHLO_PAD")
class StablehloPad(Kernel):
    """Edge padding ``edge_padding_low/high`` (negative values crop) and ``interior_padding``
    between elements, all filled with the scalar ``padding_value`` (input 1)."""

    MAX_RANK = 8  # TFLITE_STABLEHLO_PAD_PARAMS_MAX_DIMENSION_COUNT

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, value = ins
        if value.dtype != x.dtype or value.size != 1:
            raise self.fail(f"the padding value must be one {x.dtype.name}, it is {value.dtype.name} of shape {value.shape}")
        rank = x.ndim
        if not 1 <= rank <= self.MAX_RANK:
            raise self.fail(f"the operand's rank must be 1 to {self.MAX_RANK}, it is {rank}")
        o = options_of(self, "StablehloPadOptions")
        low = _ints(o.edge_padding_low, "edge_padding_low", self, rank)
        high = _ints(o.edge_padding_high, "edge_padding_high", self, rank)
        interior = _ints(o.interior_padding, "interior_padding", self, rank)
        if any(i < 0 for i in interior):
            raise self.fail(f"interior_padding must not be negative: {interior}")
        shape = [lo + hi + d + max(d - 1, 0) * i for d, lo, hi, i in zip(x.shape, low, high, interior)]
        if any(d <= 0 for d in shape):
            # LiteRT gives every dimension 0 when one would be empty or negative.
            self.copies: list = []
            return [Spec((0,) * rank, x.dtype)]
        # Per axis: which input elements land in the output, and where (a strided slice each).
        src, dst = [], []
        for d, lo, step, n in zip(x.shape, low, (i + 1 for i in interior), shape):
            first = max(0, -(lo // step)) if lo < 0 else 0  # the first element at position >= 0
            last = min(d - 1, (n - 1 - lo) // step)  # the last at position < n
            if first > last:
                src = None
                break
            src.append(slice(first, last + 1))
            dst.append(slice(lo + first * step, lo + last * step + 1, step))
        self.copies = [] if src is None else [(tuple(dst), tuple(src))]
        return [Spec(tuple(shape), x.dtype)]

    def eval(self, ins, outs):
        out = outs[0]
        if out.size == 0:
            return
        out.fill(ins[1].reshape(-1)[0])
        for dst, src in self.copies:
            out[dst] = ins[0][src]


# ----------------------------------------------------------------------------- gather / scatter


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The index array with its index vectors along the last axis (an index_vector_dim equal
    to the rank means vectors of one element)."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _check_index_vector_dim(kernel: Kernel, indices: TensorInfo, index_vector_dim: int) -> int:
    if not 0 <= index_vector_dim <= indices.ndim:
        raise kernel.fail(f"index_vector_dim {index_vector_dim} is out of range for indices of rank {indices.ndim}")
    return indices.shape[index_vector_dim] if index_vector_dim < indices.ndim else 1


@register("STABLEHLO_GATHER")
class StablehloGather(Kernel):
    """Slices of ``slice_sizes`` of the operand at start indices read from ``start_indices``
    (clamped so the slice fits in the operand), batch dimensions first in the order of the
    indices, the slice's dimensions at ``offset_dims`` (``collapsed_slice_dims`` dropped)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        operand, indices = ins
        self.expect_dtype(indices, *INDEX_DTYPES)
        o = options_of(self, "StablehloGatherOptions")
        rank = operand.ndim
        self.slice_sizes = _ints(o.slice_sizes, "slice_sizes", self, rank)
        for d, (size, dim) in enumerate(zip(self.slice_sizes, operand.shape)):
            if not 0 <= size <= dim:
                raise self.fail(f"slice_sizes[{d}] = {size} does not fit in the operand's dimension {dim}")
        self.collapsed = _dims(_ints(o.collapsed_slice_dims, "collapsed_slice_dims", self), rank, "collapsed_slice_dims", self)
        if any(self.slice_sizes[d] > 1 for d in self.collapsed):
            raise self.fail(f"collapsed_slice_dims {self.collapsed} must have slice size 0 or 1")
        self.start_map = _dims(_ints(o.start_index_map, "start_index_map", self), rank, "start_index_map", self)
        self.index_vector_dim = int(o.index_vector_dim)
        n = _check_index_vector_dim(self, indices, self.index_vector_dim)
        if n != len(self.start_map):
            raise self.fail(f"index vectors have {n} elements but start_index_map has {len(self.start_map)}")
        batch = [d for k, d in enumerate(indices.shape) if k != self.index_vector_dim]
        self.offset_shape = [s for d, s in enumerate(self.slice_sizes) if d not in self.collapsed]
        out_rank = len(batch) + len(self.offset_shape)
        offset_dims = sorted(_dims(_ints(o.offset_dims, "offset_dims", self), out_rank, "offset_dims", self))
        if len(offset_dims) != len(self.offset_shape):
            raise self.fail(f"offset_dims {offset_dims} must name one result dimension per uncollapsed slice dimension")
        self.dtype = operand.dtype
        # The gathered values come out [batch..., offset...]; this puts them in result order.
        batch_dims = [d for d in range(out_rank) if d not in offset_dims]
        self.order = [0] * out_rank
        for k, d in enumerate(batch_dims):
            self.order[d] = k
        for k, d in enumerate(offset_dims):
            self.order[d] = len(batch_dims) + k
        shape = [0] * out_rank
        for k, d in enumerate(batch_dims):
            shape[d] = batch[k]
        for k, d in enumerate(offset_dims):
            shape[d] = self.offset_shape[k]
        return [Spec(tuple(shape), operand.dtype)]

    def eval(self, ins, outs):
        operand, indices = ins
        out = outs[0]
        if out.size == 0:
            return
        vectors = _index_vectors(indices, self.index_vector_dim).astype(np.int64)
        batch_rank = vectors.ndim - 1
        offsets = np.indices(self.offset_shape, dtype=np.int64) if self.offset_shape else np.zeros((0,), np.int64)
        lookup = []
        k = 0
        for d in range(operand.ndim):
            start = np.zeros(vectors.shape[:-1], np.int64)
            if d in self.start_map:
                start = vectors[..., self.start_map.index(d)]
            start = np.clip(start, 0, operand.shape[d] - self.slice_sizes[d])
            start = start.reshape(start.shape + (1,) * len(self.offset_shape))
            if d in self.collapsed:
                lookup.append(start)
            else:
                lookup.append(start + offsets[k].reshape((1,) * batch_rank + offsets[k].shape))
                k += 1
        values = operand[tuple(lookup)]
        copy_into(out, np.transpose(values.reshape(values.shape), self.order) if self.order else values)


# LiteRT reads the update computation off the scatter's subgraph: no operator means replace.
_SCATTER_UPDATES: dict[str | None, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    None: lambda old, new: new,
    "STABLEHLO_ADD": np.add,
    "STABLEHLO_MULTIPLY": np.multiply,
    "STABLEHLO_MAXIMUM": lambda old, new: np.where(old < new, new, old),  # std::max(old, new)
    "STABLEHLO_MINIMUM": lambda old, new: np.where(new < old, new, old),  # std::min(old, new)
}


def _body_op(kernel: Kernel, index: int, role: str) -> str | None:
    """The one operator of a body subgraph (None when it has none), or a PrepareError."""
    model = kernel.node.runtime.interpreter.model
    if not 0 <= index < len(model.subgraphs):
        raise kernel.fail(f"{role} subgraph {index} does not exist: the model has {len(model.subgraphs)}")
    ops = model.subgraphs[index].operators
    if len(ops) > 1:
        raise kernel.fail(f"{role} subgraph {index} has {len(ops)} operators; only one is supported (as in LiteRT)")
    return model.op_name(ops[0]) if ops else None


@register("STABLEHLO_SCATTER")
class StablehloScatter(Kernel):
    """The operand with ``updates`` combined into it at the indices ``scatter_indices`` give:
    each update element goes to ``start + window offset``, the start read from the indices
    (through ``scatter_dims_to_operand_dims``), the window offset from the update's
    ``update_window_dims`` (``inserted_window_dims`` of the operand get 0). Updates falling
    outside the operand are skipped; repeated targets combine in row-major update order."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        operand, indices, updates = ins
        self.expect_dtype(indices, *INDEX_DTYPES)
        self.expect_dtype(operand, *ELEMENTWISE_DTYPES)
        if updates.dtype != operand.dtype:
            raise self.fail(f"updates are {updates.dtype.name} but the operand is {operand.dtype.name}")
        o = options_of(self, "StablehloScatterOptions")
        rank = operand.ndim
        self.window_dims = _dims(_ints(o.update_window_dims, "update_window_dims", self), updates.ndim,
                                 "update_window_dims", self)
        self.inserted = _dims(_ints(o.inserted_window_dims, "inserted_window_dims", self), rank,
                              "inserted_window_dims", self)
        if len(self.window_dims) + len(self.inserted) != rank:
            raise self.fail(f"update_window_dims {self.window_dims} and inserted_window_dims {self.inserted} "
                            f"must together cover the operand's {rank} dimensions")
        self.to_operand = _dims(_ints(o.scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims", self), rank,
                                "scatter_dims_to_operand_dims", self)
        self.index_vector_dim = int(o.index_vector_dim)
        n = _check_index_vector_dim(self, indices, self.index_vector_dim)
        if n != len(self.to_operand):
            raise self.fail(f"index vectors have {n} elements but scatter_dims_to_operand_dims has {len(self.to_operand)}")
        self.scatter_dims = [d for d in range(updates.ndim) if d not in self.window_dims]
        batch = [d for k, d in enumerate(indices.shape) if k != self.index_vector_dim]
        if [updates.shape[d] for d in self.scatter_dims] != batch:
            raise self.fail(f"updates of shape {updates.shape} do not match the indices' batch shape {tuple(batch)}")
        body = _body_op(self, int(o.update_computation_subgraph_index), "update computation")
        if body not in _SCATTER_UPDATES:
            raise self.fail(f"the update computation {body} is not supported: only none (replace), STABLEHLO_ADD, "
                            "_MULTIPLY, _MAXIMUM and _MINIMUM are (as in LiteRT)")
        self.combine = _SCATTER_UPDATES[body]
        return [Spec(operand.shape, operand.dtype)]

    def eval(self, ins, outs):
        operand, indices, updates = ins
        out = outs[0]
        copy_into(out, operand)
        if updates.size == 0 or out.size == 0:
            return
        vectors = _index_vectors(indices, self.index_vector_dim).astype(np.int64)
        grid = np.indices(updates.shape, dtype=np.int64)
        starts = vectors[tuple(grid[d] for d in self.scatter_dims)]  # updates.shape + (n,)
        window = iter(self.window_dims)
        targets = []
        for d in range(out.ndim):
            t = np.zeros(updates.shape, np.int64) if d in self.inserted else grid[next(window)].copy()
            if d in self.to_operand:
                t += starts[..., self.to_operand.index(d)]
            targets.append(t.reshape(-1))
        inside = np.ones(updates.size, bool)
        for t, size in zip(targets, out.shape):
            inside &= (t >= 0) & (t < size)
        flat = np.ravel_multi_index([t[inside] for t in targets], out.shape)
        values = updates.reshape(-1)[inside]
        # Row-major order matters when targets repeat: apply the k-th update of every target in
        # round k, so each round writes distinct elements, in order.
        order = np.argsort(flat, kind="stable")
        sorted_flat = flat[order]
        first = np.searchsorted(sorted_flat, sorted_flat, side="left")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order)) - first
        target = out.reshape(-1)  # a view: out is contiguous
        for k in range(int(rank.max(initial=-1)) + 1):
            pick = rank == k
            where, new = flat[pick], values[pick]
            target[where] = self.combine(target[where], new)


# ----------------------------------------------------------------------------- reduce_window


def _max(accu, x):
    return np.where(accu >= x, accu, x)  # LiteRT's Max: a >= b ? a : b


def _min(accu, x):
    return np.where(accu <= x, accu, x)  # LiteRT's Min: a <= b ? a : b


def _all(accu, x):
    return np.logical_and(accu, x).astype(accu.dtype)


def _any(accu, x):
    return np.logical_or(accu, x).astype(accu.dtype)


_REDUCTIONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "ADD": np.add, "STABLEHLO_ADD": np.add,
    "MUL": np.multiply, "STABLEHLO_MULTIPLY": np.multiply,
    "MAXIMUM": _max, "STABLEHLO_MAXIMUM": _max,
    "MINIMUM": _min, "STABLEHLO_MINIMUM": _min,
    "LOGICAL_AND": _all, "STABLEHLO_AND": _all,
    "LOGICAL_OR": _any, "STABLEHLO_OR": _any,
}
REDUCE_WINDOW_DTYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float32, np.float64)


class _ReduceWindow(Kernel):
    """The operand dilated by ``base_dilations`` and padded (negative: cropped) by ``padding``,
    both filled with the init value, then every window of ``window_dimensions`` (elements ``window_dilations`` apart,
    windows ``window_strides`` apart) reduced from the init value in row-major order."""

    MAX_RANK = 6

    def setup(self, x: TensorInfo, init: TensorInfo, window: list[int], strides: list[int], base: list[int],
              dilations: list[int], padding: list[int], body: str | None) -> list[Spec]:
        rank = x.ndim
        self.expect_dtype(x, *REDUCE_WINDOW_DTYPES)
        if init.dtype != x.dtype or init.size != 1:
            raise self.fail(f"the init value must be one {x.dtype.name}, it is {init.dtype.name} of shape {init.shape}")
        if not 1 <= rank <= self.MAX_RANK:
            raise self.fail(f"the operand's rank must be 1 to {self.MAX_RANK}, it is {rank}")
        for name, values in (("window_dimensions", window), ("window_strides", strides),
                             ("base_dilations", base), ("window_dilations", dilations)):
            if any(v <= 0 for v in values):
                raise self.fail(f"{name} must be positive: {values}")
        if body not in _REDUCTIONS:
            raise self.fail(f"the reduction body {body} is not supported: one ADD, MUL, MAXIMUM, MINIMUM, "
                            "LOGICAL_AND or LOGICAL_OR (or their STABLEHLO_ forms) is (as in LiteRT)")
        self.reduce = _REDUCTIONS[body]
        dilated = [(d - 1) * b + 1 if d > 0 else 0 for d, b in zip(x.shape, base)]
        padded = [d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(dilated)]
        if any(p <= 0 for p in padded) and any(padding):
            raise self.fail(f"padding {padding} leaves nothing of the operand's shape {x.shape}")
        spans = [(w - 1) * wd + 1 for w, wd in zip(window, dilations)]
        shape = tuple(0 if p < s else (p - s) // st + 1 for p, s, st in zip(padded, spans, strides))
        self.base, self.padding, self.padded_shape = base, padding, padded
        self.taps = window_taps(window, dilations, strides, shape)
        scratch(tuple(padded), x.dtype)  # refuses forged dilations that would need gigabytes
        return [Spec(shape, x.dtype)]

    def compute(self, x: np.ndarray, init: np.ndarray, out: np.ndarray) -> None:
        if out.size == 0:
            return
        if x.dtype == np.bool_:  # LiteRT reduces bools as int8 bytes
            x, init, out = x.view(np.int8), init.view(np.int8), out.view(np.int8)
        init_value = init.reshape(-1)[0]
        padded = np.full(self.padded_shape, init_value, x.dtype)
        dst, src = [], []
        for d, b, lo, hi, n in zip(x.shape, self.base, self.padding[0::2], self.padding[1::2], self.padded_shape):
            first = -(lo // b) if lo < 0 else 0  # input elements at dilated position >= -lo
            last = min(d - 1, (n - 1 - lo) // b)
            dst.append(slice(lo + first * b, lo + last * b + 1, b))
            src.append(slice(first, last + 1))
        if all(s.start < s.stop for s in src):
            padded[tuple(dst)] = x[tuple(src)]
        accu = np.full(out.shape, init_value, x.dtype)
        for tap in self.taps:
            accu = self.reduce(accu, padded[tap]).astype(x.dtype, copy=False)
        copy_into(out, accu)


@register("STABLEHLO_REDUCE_WINDOW")
class StablehloReduceWindow(_ReduceWindow):
    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, init = ins
        o = options_of(self, "StablehloReduceWindowOptions")
        rank = x.ndim
        if o.window_dimensions is None or len(o.window_dimensions) == 0:
            raise self.fail("window_dimensions must be given")
        window = _ints(o.window_dimensions, "window_dimensions", self, rank)
        strides = _ints(o.window_strides, "window_strides", self, rank, 1)
        base = _ints(o.base_dilations, "base_dilations", self, rank, 1)
        dilations = _ints(o.window_dilations, "window_dilations", self, rank, 1)
        padding = _ints(o.padding, "padding", self, 2 * rank, 0)
        body = _body_op(self, int(o.body_subgraph_index), "body")
        return self.setup(x, init, window, strides, base, dilations, padding, body)

    def eval(self, ins, outs):
        self.compute(ins[0], ins[1], outs[0])


# ----------------------------------------------------------------------------- rng_bit_generator

_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_U32 = np.uint32


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U32(r)) | (x >> _U32(32 - r))


def threefry2x32(key0: int, key1: int, c0: np.ndarray, c1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds on counters ``(c0, c1)`` (uint32 arrays), as XLA and LiteRT
    compute it."""
    k = [_U32(key0), _U32(key1), _U32(key0 ^ key1 ^ 0x1BD11BDA)]
    with np.errstate(over="ignore"):
        x0, x1 = c0 + k[0], c1 + k[1]
        for step in range(5):
            for r in _THREEFRY_ROTATIONS[step % 2]:
                x0 = x0 + x1
                x1 = _rotl(x1, r) ^ x0
            x0 = x0 + k[(step + 1) % 3]
            x1 = x1 + k[(step + 2) % 3] + _U32(step + 1)
    return x0, x1


@register("STABLEHLO_RNG_BIT_GENERATOR")
class StablehloRngBitGenerator(Kernel):
    """``(new_state, bits) = rng_bit_generator(state)``: uint64 state [2] (Threefry) or [2] / [3]
    (Philox: key, counter and a second counter word pair); bits of int32, uint32, int64 or uint64
    in the declared output shape. Each generator call fills the next 2 (Threefry) or 4 (Philox)
    32-bit words and increments the 64-bit counter, LiteRT's way (Philox's third state word is
    not carried into)."""

    foldable = True  # the state is an input: the same state gives the same bits

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        if len(self.node.outputs) != 2:
            raise self.fail(f"expects 2 outputs (new state, bits), has {len(self.node.outputs)}")
        state = ins[0]
        if state.dtype != np.dtype(np.uint64) or state.ndim != 1:
            raise self.fail(f"the state must be a uint64 vector, it is {state.dtype.name} of shape {state.shape}")
        algorithm = int(getattr(self.options, "algorithm", 0)) if self.options is not None else 0
        if algorithm not in (0, 1, 2):
            raise self.fail(f"unknown RNG algorithm {algorithm}")
        self.threefry = algorithm == 2
        if (self.threefry and state.shape[0] != 2) or (not self.threefry and state.shape[0] not in (2, 3)):
            raise self.fail(f"a state of {state.shape[0]} words does not suit {'THREEFRY' if self.threefry else 'PHILOX'}")
        bits = self.declared_outputs()[1]
        if bits is None or bits.dtype not in (np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64)):
            raise self.fail("the bits output must be int32, uint32, int64 or uint64")
        return [Spec(state.shape, state.dtype), Spec(bits.shape, bits.dtype)]

    def eval(self, ins, outs):
        state = ins[0].view(np.uint32)
        new_state, bits = outs[0].view(np.uint32), outs[1]
        words = bits.size * bits.dtype.itemsize // 4
        width = 2 if self.threefry else 4
        calls = -(-words // width)
        low = np.uint64(state[2]) + np.arange(calls, dtype=np.uint64)  # counter words 0 and 1, carried
        count0 = (low & np.uint64(0xFFFFFFFF)).astype(_U32)
        count1 = (np.uint64(state[3]) + (low >> np.uint64(32))).astype(_U32)
        key0, key1 = int(state[0]), int(state[1])
        if self.threefry:
            block = np.stack(threefry2x32(key0, key1, count0, count1), axis=1)
        else:
            high = (state[4], state[5]) if state.size == 6 else (state[0], state[1])
            counters = np.stack([count0, count1, np.full(calls, high[0], _U32), np.full(calls, high[1], _U32)], axis=1)
            block = Philox(key0 | key1 << 32, 0)._encrypt(counters.astype(np.uint64))
        copy_into(bits.reshape(-1).view(np.uint32), block.reshape(-1)[:words])
        copy_into(new_state, state)
        last = np.uint64(state[2]) + np.uint64(calls)  # the counter after the last call
        new_state[2] = _U32(int(last) & 0xFFFFFFFF)
        new_state[3] = _U32((int(state[3]) + (int(last) >> 32)) & 0xFFFFFFFF)
