"""Turning stored weights into float32 / dense tensors: DEQUANTIZE and DENSIFY; and FAKE_QUANT,
float32 rounded to the values a quantized tensor can hold.

DEQUANTIZE maps float16 to float32, and affine-quantized int8/uint8/int16 values to
``scale * (q - zero_point)``, per tensor or per channel along ``quantized_dimension``.

DENSIFY expands a sparse constant (the schema's SparsityParameters: a traversal order of the
original and block dimensions, each stored DENSE or SPARSE_CSR) into its dense tensor. The
constant's value is its flat array of stored values; the positions they go to depend only on
the sparsity metadata, so prepare computes them once and eval is one scatter.
"""

from __future__ import annotations

import numpy as np

from numlite.kernels.base import Kernel, Spec, register
from numlite.model.ir import Sparsity


@register("FAKE_QUANT")
class FakeQuant(Kernel):
    """float32 in, float32 out: each value clamped to ``[min, max]`` nudged so that zero is one
    of the ``2**num_bits`` levels, then rounded to the nearest level (half away from zero), in
    float32 arithmetic as LiteRT's FakeQuantizeArray computes it. LiteRT refuses
    ``narrow_range`` at run time, and so does numlite."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.expect_dtype(ins[0], np.float32)
        o = self.options
        lo, hi, bits = np.float32(o.min), np.float32(o.max), int(o.num_bits)
        if o.narrow_range:
            raise self.fail("narrow_range FAKE_QUANT is not supported at run time (as in LiteRT)")
        if not 2 <= bits <= 16 or not lo <= 0 <= hi or lo >= hi:
            raise self.fail(f"needs min <= 0 <= max, min < max and 2 to 16 bits, got [{lo}, {hi}], {bits} bits")
        qmin, qmax = np.float32(0), np.float32((1 << bits) - 1)
        scale = np.float32((hi - lo) / (qmax - qmin))
        zero_from_min = np.float32(qmin - lo / scale)
        zero = qmin if zero_from_min < qmin else qmax if zero_from_min > qmax else np.float32(_round_away(zero_from_min))
        self.scale, self.inverse = scale, np.float32(np.float32(1) / scale)
        self.low, self.high = np.float32((qmin - zero) * scale), np.float32((qmax - zero) * scale)
        return [Spec(ins[0].shape, np.dtype(np.float32))]

    def eval(self, ins, outs):
        shifted = np.clip(ins[0], self.low, self.high) - self.low
        levels = _round_away(shifted * self.inverse)
        np.add(levels * self.scale, self.low, out=outs[0])


def _round_away(x):
    """std::round: halves away from zero (NumPy's rint rounds them to even)."""
    return np.copysign(np.floor(np.abs(x) + np.float32(0.5)), x)


@register("DEQUANTIZE")
class Dequantize(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        x = ins[0]
        self.expect_dtype(x, np.float16, np.int8, np.uint8, np.int16)
        self.scale = self.zero_point = None
        if x.dtype != np.float16:
            q = x.quantization
            if q is None or q.scale is None or len(q.scale) == 0:
                # LiteRT reads the absent parameters as scale 0 and dequantizes to zeros.
                scale = np.zeros(1, np.float32)
            else:
                scale = np.asarray(q.scale, np.float32)
            if q is None or q.zero_point is None or len(q.zero_point) == 0:
                zp = np.zeros(len(scale), np.int32)
            else:
                zp = np.asarray(q.zero_point, np.int64).astype(np.int32)
            if len(scale) > 1:  # per channel
                if x.dtype == np.int16:
                    raise self.fail("per-channel dequantization supports int8 and uint8 only")
                dim = int(q.quantized_dimension)
                if not 0 <= dim < x.ndim or x.shape[dim] != len(scale) or len(zp) != len(scale):
                    raise self.fail(
                        f"per-channel parameters ({len(scale)} scales along dimension {dim}) do not fit shape {x.shape}"
                    )
                view = [1] * x.ndim
                view[dim] = len(scale)
                self.scale, self.zero_point = scale.reshape(view), zp.reshape(view)
            else:
                self.scale, self.zero_point = scale[0], np.int32(zp[0])
        return [Spec(x.shape, np.dtype(np.float32))]

    def eval(self, ins, outs):
        x, out = ins[0], outs[0]
        if self.scale is None:
            out[...] = x
            return
        # (q - zp) is a small integer, exact in float32, so one float32 product matches LiteRT.
        np.subtract(x, self.zero_point, out=out, dtype=np.float32)
        np.multiply(out, self.scale, out=out)


def sparse_positions(shape: tuple[int, ...], sparsity: Sparsity) -> np.ndarray:
    """Flat dense index of every stored value, in storage order (LiteRT's FormatConverter).

    Walks the traversal levels breadth first while keeping depth-first order: a DENSE level
    of size n gives each parent n children ``parent * n + i``; a SPARSE_CSR level gives parent
    p the children ``segments[p] .. segments[p + 1]`` with coordinates ``indices[child]``.
    """
    rank = len(shape)
    order = [int(v) for v in sparsity.traversal_order]
    metadata = sparsity.dim_metadata
    block_map = [int(v) for v in sparsity.block_map]
    if len(metadata) != len(order) or len(order) != rank + len(block_map):
        raise ValueError(
            f"{len(order)} traversal levels, {len(metadata)} dimension metadata and {len(block_map)} blocks"
            f" do not fit a rank-{rank} tensor"
        )
    if sorted(order[:rank]) != list(range(rank)):
        raise ValueError(f"traversal order {order} must start with the {rank} original dimensions")
    # Block sizes are read the way LiteRT reads them: the dense size of the metadata entry
    # indexed by the block dimension's number.
    block_size = [int(metadata[order[rank + b]].dense_size) for b in range(len(block_map))]

    pos = np.zeros(1, np.int64)
    coords: list[np.ndarray] = []
    for md in metadata:
        if md.format == "DENSE":
            n = int(md.dense_size)
            coords = [np.repeat(c, n) for c in coords]
            coords.append(np.tile(np.arange(n, dtype=np.int64), len(pos)))
            pos = (pos[:, None] * n + np.arange(n, dtype=np.int64)).reshape(-1)
            continue
        segments = np.asarray(md.array_segments if md.array_segments is not None else [], np.int64)
        indices = np.asarray(md.array_indices if md.array_indices is not None else [], np.int64)
        has_segment = pos + 1 < len(segments)  # LiteRT skips parents past the segment array
        pos = pos[has_segment]
        coords = [c[has_segment] for c in coords]
        starts, ends = segments[pos], segments[pos + 1]
        counts = np.maximum(ends - starts, 0)
        first = np.cumsum(counts) - counts
        child = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first - starts, counts)
        keep = child < len(indices)  # and children past the index array
        coords = [np.repeat(c, counts)[keep] for c in coords]
        pos = child[keep]
        coords.append(indices[pos])

    original = [None] * rank
    for level in range(rank):
        original[order[level]] = coords[level]
    for level in range(rank, len(order)):
        b = order[level] - rank
        d = block_map[b]
        original[d] = original[d] * block_size[b] + coords[level]
    if rank == 0:
        return np.zeros(len(pos), np.int64)
    for d, c in enumerate(original):
        if len(c) and (c.min() < 0 or c.max() >= shape[d]):
            raise ValueError(f"sparse coordinates exceed dimension {d} of size {shape[d]}")
    return np.ravel_multi_index(tuple(original), shape).astype(np.int64)


@register("DENSIFY")
class Densify(Kernel):
    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        x = ins[0]
        self.expect_dtype(x, np.float32, np.float16, np.int8, np.int32)
        sparsity = self.node.runtime.graph.tensors[self.node.inputs[0]].sparsity
        if sparsity is None:
            raise self.fail(f"input {x.name!r} is not a sparse tensor")
        try:
            self.positions = sparse_positions(tuple(x.shape), sparsity)
        except ValueError as e:
            raise self.fail(f"bad sparsity parameters: {e}") from None
        if x.value is not None and x.value.size < len(self.positions):
            raise self.fail(f"the sparse tensor stores {x.value.size} values, its metadata needs {len(self.positions)}")
        return [Spec(x.shape, x.dtype)]

    def eval(self, ins, outs):
        out = outs[0]
        out.fill(0)
        out.reshape(-1)[self.positions] = ins[0].reshape(-1)[: len(self.positions)]
