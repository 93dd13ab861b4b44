"""Ops that make or re-view tensors from shapes: RESHAPE, SQUEEZE, EXPAND_DIMS, SHAPE,
BROADCAST_TO, BROADCAST_ARGS, FILL, ZEROS_LIKE and RANGE.

RESHAPE, SQUEEZE and EXPAND_DIMS only copy the data into an output of another shape. Several
of these ops take their output shape from an input's *value* (RESHAPE's shape tensor,
EXPAND_DIMS's axis, FILL's dims, RANGE's scalars); when prepare does not know that value the
output is returned as ``Spec(None, ...)`` and the runtime prepares the node again at every
invoke with the actual values, as LiteRT does with its dynamic tensors.

TFLite has no ONES_LIKE builtin: the converter lowers ``tf.ones_like`` to SHAPE + BROADCAST_TO
(or a FILL), so there is nothing to register for it.
"""

from __future__ import annotations

import math
import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, broadcast_shape, copy_into, nothing, register

# TensorType codes SHAPE's out_type may name.
_OUT_TYPES = {2: np.dtype(np.int32), 4: np.dtype(np.int64)}
MAX_RANK = 8


def _scalar(t: TensorInfo) -> int | float | bool:
    """The single element of a tensor that must hold exactly one."""
    return t.value.reshape(-1)[0].item()


class _Copy(Kernel):
    """Shared eval of the ops that only give the input's data a new shape.

    The output may take over the input's memory (``inplace``, whatever its shape:
    ``same_bytes``) when the input dies here; the op then has nothing left to do."""

    inplace = (0,)
    same_bytes = True

    def eval(self, ins, outs):
        np.copyto(outs[0], ins[0].reshape(outs[0].shape))

    def direct(self, ins, outs):
        """One ``copyto`` from a view of the input in the output's shape, made once (when the
        input's memory allows a view: a reshape of a contiguous array is one), or no work at
        all when the output is the input's memory."""
        x, out = ins[0], outs[0]
        if x is None or out is None or not x.flags.c_contiguous:
            return None
        view = x.reshape(out.shape)
        if out.flags.c_contiguous and view.__array_interface__["data"][0] == out.__array_interface__["data"][0]:
            return nothing, ()
        return copy_into, (out, view)


@register("RESHAPE")
class Reshape(_Copy):
    """The new shape comes from the shape tensor when it is an int32 vector (as in LiteRT, any
    other shape tensor is ignored), else from ``options.new_shape``; one entry may be -1."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1, 2)
        x = ins[0]
        shape_in = ins[1] if len(ins) == 2 else None
        if shape_in is not None and shape_in.ndim == 1 and shape_in.dtype == np.int32:
            if shape_in.size == 0:  # an empty shape (a scalar) has no data to wait for
                shape = []
            elif shape_in.value is None:
                return [Spec(None, x.dtype)]
            else:
                shape = [int(d) for d in shape_in.value]
        else:
            new_shape = getattr(self.options, "new_shape", None) if self.options is not None else None
            shape = [] if new_shape is None else [int(d) for d in new_shape]
            if shape == [0]:  # legacy converters wrote [0] for a scalar
                shape = []
        return [Spec(self._resolve(x.shape, shape), x.dtype)]

    def _resolve(self, in_shape: tuple[int, ...], shape: list[int]) -> tuple[int, ...]:
        """Fill in the -1 entry the way LiteRT's ResizeOutput does, zero-sized dims included."""
        n_in = math.prod(in_shape)
        nonzero_in = math.prod(d for d in in_shape if d != 0)
        stretch = [i for i, d in enumerate(shape) if d == -1]
        if len(stretch) > 1:
            raise self.fail(f"new shape {shape} has more than one -1")
        if any(d < -1 for d in shape):
            raise self.fail(f"new shape {shape} has a negative dimension")
        known = [d for d in shape if d != -1]
        n_out = math.prod(known)
        if stretch:
            nonzero_out = math.prod(d for d in known if d != 0)
            shape[stretch[0]] = 0 if (n_in == 0 and n_out != 0) else nonzero_in // nonzero_out
            n_out *= shape[stretch[0]]
        if n_out != n_in:
            raise self.fail(f"cannot reshape {n_in} elements of shape {in_shape} to {shape}")
        return tuple(shape)


@register("SQUEEZE")
class Squeeze(_Copy):
    """Drops the listed size-1 dims (negative ones count from the end), or every size-1 dim."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        x = ins[0]
        if x.ndim > MAX_RANK:
            raise self.fail(f"input rank {x.ndim} exceeds {MAX_RANK}")
        dims = getattr(self.options, "squeeze_dims", None) if self.options else None
        if dims is None or len(dims) == 0:
            drop = {i for i, d in enumerate(x.shape) if d == 1}
        else:
            drop = set()
            for d in dims:
                i = int(d) + x.ndim if d < 0 else int(d)
                if not (0 <= i < x.ndim and x.shape[i] == 1):
                    raise self.fail(f"cannot squeeze dimension {int(d)} of shape {x.shape}")
                drop.add(i)
        return [Spec(tuple(d for i, d in enumerate(x.shape) if i not in drop), x.dtype)]


@register("EXPAND_DIMS")
class ExpandDims(_Copy):
    """Inserts a size-1 dim at the axis given by a one-element int32/int64 tensor; a negative
    axis counts from the end of the *output* (-1 appends)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, axis_t = ins
        self.expect_dtype(axis_t, np.int32, np.int64)
        if axis_t.size != 1:
            raise self.fail(f"axis must have one element, it has shape {axis_t.shape}")
        if axis_t.value is None:
            return [Spec(None, x.dtype)]
        axis = int(_scalar(axis_t))
        if axis < 0:
            axis += x.ndim + 1
        if not 0 <= axis <= x.ndim:
            raise self.fail(f"axis {_scalar(axis_t)} is out of range for rank {x.ndim}")
        return [Spec(x.shape[:axis] + (1,) + x.shape[axis:], x.dtype)]


@register("SHAPE")
class Shape(Kernel):
    """The input's shape as a vector of ``options.out_type`` (int32 or int64). Only the input's
    shape is read, so the value is known at prepare (as in LiteRT) and what depends on it, such
    as a RESHAPE to ``[tf.shape(x)[0], -1]``, keeps a static shape."""

    reads_only_shapes = True

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        out_type = getattr(self.options, "out_type", 2) if self.options is not None else 2
        if out_type not in _OUT_TYPES:
            raise self.fail(f"unsupported out_type {out_type}; SHAPE produces int32 or int64")
        return [Spec((ins[0].ndim,), _OUT_TYPES[out_type])]

    def eval(self, ins, outs):
        outs[0][...] = ins[0].shape


def _int_vector(kernel: Kernel, t: TensorInfo, what: str) -> None:
    """Checks that ``t`` is a 1-D int32/int64 tensor (a shape, dims or multiples input)."""
    if t.ndim != 1:
        raise kernel.fail(f"{what} must be 1-D, it has shape {t.shape}")
    kernel.expect_dtype(t, np.int32, np.int64)


@register("BROADCAST_TO")
class BroadcastTo(Kernel):
    """Broadcasts the input to the shape held by the second input (NumPy/TF rules, one way)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, shape_t = ins
        _int_vector(self, shape_t, "shape")
        if x.dtype == np.object_:
            raise self.fail("string tensors are not supported")
        if x.ndim > shape_t.shape[0]:
            raise self.fail(f"input of rank {x.ndim} cannot broadcast to rank {shape_t.shape[0]}")
        if shape_t.value is None:
            return [Spec(None, x.dtype)]
        shape = tuple(int(d) for d in shape_t.value)
        tail = shape[len(shape) - x.ndim :]
        if any(d < 0 or d > np.iinfo(np.int32).max for d in shape) or any(
            a != 1 and a != b for a, b in zip(x.shape, tail)
        ):
            raise self.fail(f"shape {x.shape} does not broadcast to {shape}")
        return [Spec(shape, x.dtype)]

    def eval(self, ins, outs):
        np.copyto(outs[0], ins[0])


@register("FILL")
class Fill(Kernel):
    """A tensor of shape ``dims`` (1-D int32/int64, non-negative) filled with a scalar."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        dims_t, value = ins
        _int_vector(self, dims_t, "dims")
        if value.ndim != 0:
            raise self.fail(f"value must be a scalar, it has shape {value.shape}")
        if value.dtype == np.object_:
            raise self.fail("string tensors are not supported")
        if dims_t.value is None:
            return [Spec(None, value.dtype)]
        dims = tuple(int(d) for d in dims_t.value)
        if any(d < 0 for d in dims):
            raise self.fail(f"fill dimensions must be >= 0, got {dims}")
        return [Spec(dims, value.dtype)]

    def eval(self, ins, outs):
        np.copyto(outs[0], ins[1])


@register("ZEROS_LIKE")
class ZerosLike(Kernel):
    """Zeros of the input's shape and dtype (LiteRT supports int32, int64 and float32)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.expect_dtype(ins[0], np.float32, np.int32, np.int64)
        return [Spec(ins[0].shape, ins[0].dtype)]

    def eval(self, ins, outs):
        outs[0].fill(0)


@register("RANGE")
class Range(Kernel):
    """``start, start + delta, ...`` up to (not including) ``limit``, from three scalars.

    Like LiteRT, the length is ceil(|limit - start| / |delta|) (computed in the input dtype),
    and the values are accumulated one ``+= delta`` at a time, which for float32 differs from
    ``start + i * delta`` in the last bits.
    """

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        start, limit, delta = ins
        for t in ins:
            if t.ndim != 0:
                raise self.fail(f"start, limit and delta must be scalars; {t.name!r} has shape {t.shape}")
        # LiteRT's int8/int16 RANGE goes through quantization when the inputs carry it;
        # numlite implements the plain types.
        self.expect_dtype(start, np.float32, np.int32, np.int64)
        if limit.dtype != start.dtype or delta.dtype != start.dtype:
            raise self.fail("start, limit and delta must have the same dtype")
        if any(t.value is None for t in ins):
            return [Spec(None, start.dtype)]
        return [Spec((self._size(start.value[()], limit.value[()], delta.value[()]),), start.dtype)]

    def _size(self, start: np.generic, limit: np.generic, delta: np.generic) -> int:
        if delta == 0:
            raise self.fail("delta must not be 0")
        if not ((start >= limit and delta < 0) or (start <= limit and delta > 0)):
            raise self.fail(f"range from {start} to {limit} never ends with delta {delta}")
        if np.issubdtype(type(start), np.integer):
            span, step = abs(int(limit) - int(start)), abs(int(delta))
            return (span + step - 1) // step
        with np.errstate(over="ignore"):  # float32 arithmetic, as in the C++ kernel
            return int(np.ceil(np.abs((limit - start) / delta)))

    def eval(self, ins, outs):
        out = outs[0]
        if out.size == 0:
            return
        out.fill(ins[2][()])
        out[0] = ins[0][()]
        with np.errstate(over="ignore"):
            np.add.accumulate(out, out=out)


@register("BROADCAST_ARGS")
class BroadcastArgs(Kernel):
    """The shape two shapes broadcast to (1-D int32 or int64 inputs of one dtype)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        a, b = ins
        _int_vector(self, a, "s0")
        _int_vector(self, b, "s1")
        if a.dtype != b.dtype:
            raise self.fail(f"the shapes have different dtypes: {a.dtype.name} and {b.dtype.name}")
        return [Spec((max(a.shape[0], b.shape[0]),), a.dtype)]

    def eval(self, ins, outs):
        outs[0][...] = broadcast_shape(tuple(ins[0].tolist()), tuple(ins[1].tolist()))


@register("RANK")
class Rank(Kernel):
    """The input's number of dimensions as an int32 scalar (LiteRT's RANK), known at prepare."""

    reads_only_shapes = True

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        return [Spec((), np.dtype(np.int32))]

    def eval(self, ins, outs):
        outs[0][...] = ins[0].ndim
