"""Comparisons (LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL), logical ops
(LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT) and SELECT / SELECT_V2.

Comparisons take two inputs of one dtype, broadcast them and give bool. LiteRT compares
float32, float16, int16, int32 and int64 directly; EQUAL and NOT_EQUAL also bool and strings.
Its uint8/int8 comparisons go through the inputs' quantization scales (``quantized_compare``);
without them LiteRT aborts and numlite refuses them at prepare.

Logical ops are bool only, LOGICAL_AND/OR with broadcasting.

SELECT (v1) picks ``x`` where ``condition`` holds, else ``y``: the condition has the inputs'
shape, or is a scalar (picks all of x or all of y), or is rank 1 with one value per row of x
(picks whole slices along the first dimension); x and y must have the same shape. SELECT_V2
broadcasts all three. When every input and the output hold a single element, LiteRT keeps the
output shape the model declares, whatever the input shapes.
"""

from __future__ import annotations


import numpy as np

from numlite.kernels.base import Kernel, Spec, broadcast_shape, register
from numlite.kernels.scratchpad import ScratchUser

ORDERED = (np.float32, np.float16, np.int16, np.int32, np.int64)
EQUATABLE = ORDERED + (np.bool_, np.object_)  # object: STRING tensors


class Comparison(Kernel):
    """Two inputs of one dtype, broadcast; a bool output computed by ``ufunc``."""

    dtypes: tuple = ORDERED
    ufunc: np.ufunc

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        a, b = ins
        if a.dtype != b.dtype:
            raise self.fail(f"inputs have different dtypes: {a.dtype.name} and {b.dtype.name}")
        if a.dtype in (np.dtype(np.int8), np.dtype(np.uint8)):
            raise self.fail(f"{a.dtype.name} inputs without quantization parameters: LiteRT compares int8 and "
                            "uint8 through their scales (see numlite.kernels.quantized_compare)")
        self.expect_dtype(a, *self.dtypes)
        return [Spec(broadcast_shape(a.shape, b.shape), np.dtype(np.bool_))]

    def eval(self, ins, outs):
        a, b = ins
        if a.dtype == np.object_:  # strings: compare element by element, as bytes
            outs[0][...] = type(self).ufunc(a, b).astype(bool)
        else:
            type(self).ufunc(a, b, out=outs[0])

    def direct(self, ins, outs):
        """The one ufunc call of eval (not for strings); see ``runtime.direct_call``."""
        if ins[0].dtype == np.object_:
            return None
        return type(self).ufunc, (ins[0], ins[1], outs[0])


@register("LESS")
class Less(Comparison):
    ufunc = np.less


@register("LESS_EQUAL")
class LessEqual(Comparison):
    ufunc = np.less_equal


@register("GREATER")
class Greater(Comparison):
    ufunc = np.greater


@register("GREATER_EQUAL")
class GreaterEqual(Comparison):
    ufunc = np.greater_equal


@register("EQUAL")
class Equal(Comparison):
    dtypes = EQUATABLE
    ufunc = np.equal


@register("NOT_EQUAL")
class NotEqual(Comparison):
    dtypes = EQUATABLE
    ufunc = np.not_equal


# ----------------------------------------------------------------------------- logical


class LogicalBinary(Kernel):
    ufunc: np.ufunc

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        a, b = ins
        self.expect_dtype(a, np.bool_)
        self.expect_dtype(b, np.bool_)
        return [Spec(broadcast_shape(a.shape, b.shape), np.dtype(np.bool_))]

    def eval(self, ins, outs):
        type(self).ufunc(ins[0], ins[1], out=outs[0])

    def direct(self, ins, outs):
        """The one ufunc call of eval (a loop condition's ``i < n and j < m``); see
        ``runtime.direct_call``."""
        return type(self).ufunc, (ins[0], ins[1], outs[0])


@register("LOGICAL_AND")
class LogicalAnd(LogicalBinary):
    ufunc = np.logical_and


@register("LOGICAL_OR")
class LogicalOr(LogicalBinary):
    ufunc = np.logical_or


@register("LOGICAL_NOT")
class LogicalNot(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.expect_dtype(ins[0], np.bool_)
        return [Spec(ins[0].shape, np.dtype(np.bool_))]

    def eval(self, ins, outs):
        np.logical_not(ins[0], out=outs[0])


# ----------------------------------------------------------------------------- select


# Large selects pick bits: ``y ^ ((x ^ y) & mask)`` with ``mask`` all ones where the condition
# holds, on unsigned-integer views of the same itemsize. Exact for every dtype (the chosen
# operand's bits), four fast passes where a masked copy or np.where takes 8-10x longer on a
# random condition (56x56x64: 889 -> 86 us; LiteRT 76).
SELECT_BITS_FROM = 1024
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class SelectBase(ScratchUser, Kernel):
    """Shared checks of SELECT and SELECT_V2; subclasses give the output shape."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        cond, x, y = ins
        self.expect_dtype(cond, np.bool_)
        if x.dtype != y.dtype:
            raise self.fail(f"x and y have different dtypes: {x.dtype.name} and {y.dtype.name}")
        if x.dtype == np.object_:
            raise self.fail("SELECT does not support string tensors")
        # condition reshaped so that NumPy broadcasting does what LiteRT does (None: as is)
        self.cond_shape: tuple[int, ...] | None = None
        self.bits: type | None = None
        declared = self._declared_output_shape()
        if cond.size == 1 and x.size == 1 and y.size == 1 and declared is not None and _size(declared) == 1:
            self.cond_shape = self.x_shape = self.y_shape = declared
            self.want_scratch([])
            return [Spec(declared, x.dtype)]
        self.x_shape = self.y_shape = None
        shape = self.output_shape(cond, x, y)
        self.bits = _BITS.get(x.dtype.itemsize) if _size(shape) >= SELECT_BITS_FROM else None
        self.want_scratch([(self.cond_shape or tuple(cond.shape), self.bits)] if self.bits is not None else [])
        return [Spec(shape, x.dtype)]

    def output_shape(self, cond, x, y) -> tuple[int, ...]:
        raise NotImplementedError

    def _declared_output_shape(self) -> tuple[int, ...] | None:
        runtime = self.node.runtime
        out = self.node.outputs[0] if self.node.outputs else -1
        if runtime is None or out < 0:
            return None
        shape = runtime.graph.tensors[out].shape
        return None if shape is None else tuple(int(d) for d in shape)

    def eval(self, ins, outs):
        cond, x, y = ins
        if self.cond_shape is not None:
            cond = cond.reshape(self.cond_shape)
        if self.x_shape is not None:
            x = x.reshape(self.x_shape)
            y = y.reshape(self.y_shape)
        out = outs[0]
        if self.bits is not None and not (np.may_share_memory(out, x) or np.may_share_memory(out, y)):
            if self.scratch_stale():
                self.mask = self.take_scratch()[0]
            bits, mask = self.bits, self.mask
            np.subtract(0, cond, out=mask, dtype=bits, casting="unsafe")  # true -> all ones
            xs, ys, picked = x.view(bits), y.view(bits), out.view(bits)
            np.bitwise_xor(xs, ys, picked)
            np.bitwise_and(picked, mask, picked)
            np.bitwise_xor(picked, ys, picked)
            return
        np.copyto(out, y)
        np.copyto(out, x, where=cond)


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


@register("SELECT")
class Select(SelectBase):
    def output_shape(self, cond, x, y):
        if cond.shape == x.shape == y.shape:
            return tuple(x.shape)
        if cond.ndim == 0:
            pass
        elif cond.ndim == 1 and x.ndim >= 1 and cond.shape[0] == x.shape[0]:
            self.cond_shape = (cond.shape[0],) + (1,) * (x.ndim - 1)  # one value per row
        else:
            raise self.fail(
                f"condition of shape {cond.shape} must be a scalar, match the inputs' shape {x.shape}"
                " or be rank 1 matching their first dimension"
            )
        if x.shape != y.shape:
            raise self.fail(f"x and y have different shapes: {x.shape} and {y.shape}")
        return tuple(x.shape)


@register("SELECT_V2")
class SelectV2(SelectBase):
    def output_shape(self, cond, x, y):
        return broadcast_shape(cond.shape, x.shape, y.shape)
