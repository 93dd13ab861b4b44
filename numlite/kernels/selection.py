"""Selecting elements by value: TOPK_V2 (the k largest along the last axis), WHERE with
one input (the coordinates of the true/non-zero elements, a data-dependent shape), UNIQUE
(the distinct values of a vector, also data-dependent) and BUCKETIZE (the interval of sorted
boundaries each value falls in)."""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, register


@register("TOPK_V2")
class TopKV2(Kernel):
    """Values and indices of the k largest entries of each last-axis row, largest first;
    equal values keep their original order (the lower index comes first), as in LiteRT."""

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        x, k = ins
        self.expect_dtype(x, np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64)
        self.expect_dtype(k, np.int32)
        if k.size != 1:
            raise self.fail(f"k must be a single value, it has {k.size} elements")
        if x.ndim < 1:
            raise self.fail("input must have at least one dimension")
        index_type = self.node.runtime.dtypes[self.node.outputs[1]]
        if index_type not in (np.dtype(np.int32), np.dtype(np.int16)):
            raise self.fail(f"indices must be int32 or int16, the model declares {index_type.name}")
        if k.value is None:
            return [Spec(None, x.dtype), Spec(None, index_type)]
        self.k = int(k.value.reshape(-1)[0])
        if not 0 <= self.k <= x.shape[-1]:
            raise self.fail(f"k={self.k} is outside [0, {x.shape[-1]}] (the last dimension)")
        shape = x.shape[:-1] + (self.k,)
        return [Spec(shape, x.dtype), Spec(shape, index_type)]

    def eval(self, ins, outs):
        x = ins[0]
        n = x.shape[-1]
        if self.k == 0 or x.size == 0:
            return
        # A stable ascending sort of the reversed row, read backwards, is a descending sort in
        # which equal values appear in increasing original index.
        order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., : -self.k - 1 : -1]
        index = (n - 1) - order
        outs[1][...] = index
        outs[0][...] = np.take_along_axis(x, index, axis=-1)


@register("WHERE")
class Where(Kernel):
    """Coordinates (int64, shape [num_true, rank]) of the true or non-zero elements, in
    row-major order."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.expect_dtype(ins[0], np.bool_, np.float32, np.int32, np.int64, np.int8, np.uint8)
        return [Spec(None, np.dtype(np.int64))]

    def eval(self, ins, outs):
        cond = ins[0]
        if cond.ndim == 0:  # a scalar has one empty coordinate when it is true
            outs[0] = np.zeros((int(bool(cond)), 0), np.int64)
            return
        outs[0] = np.argwhere(cond).astype(np.int64, copy=False)


@register("UNIQUE")
class Unique(Kernel):
    """The distinct values of a 1-D input in order of first appearance (output 0, its length
    known only after eval) and, for every input element, the position of its value in that
    list (output 1, int32 or int64 as the ``idx_out_type`` option says). -0.0 and 0.0 count as
    one value, the first seen. NaN inputs are not reproduced: LiteRT files values in a
    std::map, whose lookups NaN makes arbitrary."""

    DTYPES = (np.int8, np.int16, np.uint16, np.int32, np.int64, np.float32, np.uint8)

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_dtype(x, *self.DTYPES)
        if x.ndim != 1:
            raise self.fail(f"input must be 1-D, it has shape {x.shape}")
        code = self.options.idx_out_type if self.options is not None else 2
        index_types = {2: np.dtype(np.int32), 4: np.dtype(np.int64)}  # schema TensorType codes
        if code not in index_types:
            raise self.fail(f"index output type {code} is not int32 or int64")
        return [Spec(None, x.dtype), Spec(x.shape, index_types[code])]

    def eval(self, ins, outs):
        x = ins[0]
        # np.unique sorts; reorder its values by first occurrence.
        _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        outs[0] = x[first[order]]
        outs[1][...] = rank[inverse.reshape(-1)]


@register("BUCKETIZE")
class Bucketize(Kernel):
    """For each value, how many of the (sorted) boundaries are at or below it: bucket i holds
    [boundaries[i - 1], boundaries[i]). int32 output; float32, float64, int32, int64 input."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        (x,) = ins
        self.expect_dtype(x, np.float32, np.float64, np.int32, np.int64)
        boundaries = getattr(self.options, "boundaries", None)
        self.boundaries = np.zeros(0, np.float32) if boundaries is None else np.asarray(boundaries, np.float32)
        if np.any(np.diff(self.boundaries) < 0):
            raise self.fail("the boundaries must be sorted")
        return [Spec(x.shape, np.dtype(np.int32))]

    def eval(self, ins, outs):
        outs[0][...] = np.searchsorted(self.boundaries, ins[0], side="right")
