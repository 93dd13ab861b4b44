"""The STABLEHLO_* cases of the builtin operator sweep: one-op models written with numlite's
writer, run in LiteRT's builtin resolver and in numlite (tests/test_stablehlo_ops.py; the sweep
imports ``CASES`` and ``NOT_RUNNABLE`` too).

``CASES`` covers every STABLEHLO operator LiteRT 2.3 registers (tflite/core/kernels/register.cc).
``NOT_RUNNABLE`` lists the others with the error LiteRT 2.3 gives for a one-op model of them.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from builtin_op_case import OpCase  # noqa: E402
from one_op_model import Graph, model, x  # noqa: E402

from numlite.model.ir import Options  # noqa: E402

# ----------------------------------------------------------------------------- model building


def binary_body(op: str | None, dtype: Any) -> Graph:
    """A scalar body subgraph ``(x, y) -> op(x, y)`` (``op`` None: ``(x, y) -> y``, no operator)."""
    g = Graph()
    a, b = g.input((), dtype), g.input((), dtype)
    if op is None:
        g.output(b)
    else:
        z = g.tensor((), dtype)
        g.op(op, [a, b], [z])
        g.output(z)
    return g


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def values(shape: Sequence[int], dtype: Any, seed: int = 0) -> np.ndarray:
    """Seeded test values: floats in [-2, 2], integers over their whole range, random bools."""
    r, dtype = rng(seed), np.dtype(dtype)
    if dtype.kind == "f":
        return r.uniform(-2, 2, shape).astype(dtype)
    if dtype.kind == "b":
        return r.random(shape) < 0.5
    info = np.iinfo(dtype)
    return r.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def one_op(op: str, inputs: Sequence[np.ndarray], outputs: Sequence[tuple[Sequence[int], Any]],
           options2: Options | None = None, constants: Sequence[np.ndarray] = (), options: Options | None = None,
           bodies: Sequence[Graph] = ()) -> tuple[bytes, list[np.ndarray]]:
    """A model whose subgraph 0 is one ``op``: fed ``inputs``, then given ``constants``; the
    subgraphs it calls (``bodies``) are subgraphs 1, 2, ..."""
    graph = Graph()
    ins = [graph.add(x(value), f"in{n}") for n, value in enumerate(inputs)] + [graph.const(c) for c in constants]
    outs = [graph.tensor(shape, dtype) for shape, dtype in outputs]
    graph.op(op, ins, outs, options, options2=options2)
    graph.output(*outs)
    return model(graph, *bodies)


# ----------------------------------------------------------------------------- cases

CASES: list[OpCase] = []


def _elementwise(op: str, form: str, a: np.ndarray, b: np.ndarray) -> None:
    CASES.append(OpCase(op, form, lambda: one_op(op, [a, b], [(a.shape, a.dtype)])))


# Element-wise: same shapes, no broadcasting; integers over their whole range (wrapping).
_nan_a = np.array([1.0, np.nan, -2.0, np.nan, 0.0, -0.0, 3.5, -np.inf], np.float32)
_nan_b = np.array([np.nan, 2.0, -3.0, np.nan, -0.0, 0.0, 3.5, 1.0], np.float32)
for _op in ("STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM"):
    _elementwise(_op, "f32-r2", values((3, 5), np.float32, 1), values((3, 5), np.float32, 2))
    _elementwise(_op, "f32-r4", values((2, 1, 3, 4), np.float32, 3), values((2, 1, 3, 4), np.float32, 4))
    _elementwise(_op, "f32-nan-signed-zero", _nan_a, _nan_b)
    _elementwise(_op, "f16-r1", values((9,), np.float16, 5), values((9,), np.float16, 6))
    _elementwise(_op, "f64-r1", values((7,), np.float64, 5), values((7,), np.float64, 6))
    _elementwise(_op, "i32-r3-wrap", values((2, 3, 4), np.int32, 7), values((2, 3, 4), np.int32, 8))
    _elementwise(_op, "i8-r1-wrap", values((16,), np.int8, 9), values((16,), np.int8, 10))
    _elementwise(_op, "i16-r2", values((4, 4), np.int16, 9), values((4, 4), np.int16, 10))
    _elementwise(_op, "i64-r1", values((6,), np.int64, 11), values((6,), np.int64, 12))
    _elementwise(_op, "u8-r2", values((3, 3), np.uint8, 13), values((3, 3), np.uint8, 14))
    _elementwise(_op, "u32-r1", values((5,), np.uint32, 13), values((5,), np.uint32, 14))
    _elementwise(_op, "bool-r1", values((8,), np.bool_, 15), values((8,), np.bool_, 16))
    _elementwise(_op, "f32-scalar", np.array(1.5, np.float32), np.array(-0.25, np.float32))

_elementwise("STABLEHLO_AND", "i32-r2", values((3, 4), np.int32, 1), values((3, 4), np.int32, 2))
_elementwise("STABLEHLO_AND", "u8-r1", values((10,), np.uint8, 3), values((10,), np.uint8, 4))
_elementwise("STABLEHLO_AND", "i64-r1", values((4,), np.int64, 3), values((4,), np.int64, 4))
_elementwise("STABLEHLO_AND", "bool-r3", values((2, 2, 3), np.bool_, 5), values((2, 2, 3), np.bool_, 6))

# Shifts within the C int LiteRT computes in (0..31); int8/int16 keep the low bits.
_elementwise("STABLEHLO_SHIFT_LEFT", "i32-r1", values((12,), np.int32, 1),
             np.array([0, 1, 2, 5, 8, 13, 16, 20, 24, 30, 31, 3], np.int32))
_elementwise("STABLEHLO_SHIFT_LEFT", "i8-past-width", values((12,), np.int8, 2),
             np.array([0, 1, 3, 7, 8, 9, 12, 15, 16, 20, 31, 2], np.int8))
_elementwise("STABLEHLO_SHIFT_LEFT", "i16-r2", values((3, 4), np.int16, 3),
             rng(4).integers(0, 20, (3, 4)).astype(np.int16))


def _pad(form: str, x: np.ndarray, value: Any, low: list[int], high: list[int], interior: list[int]) -> None:
    shape = [max(lo + hi + d + max(d - 1, 0) * i, 0) for d, lo, hi, i in zip(x.shape, low, high, interior)]
    if any(d == 0 for d in shape):
        shape = [0] * len(shape)
    opts = Options("StablehloPadOptions", edge_padding_low=np.array(low, np.int64),
                   edge_padding_high=np.array(high, np.int64), interior_padding=np.array(interior, np.int64))
    CASES.append(OpCase("STABLEHLO_PAD", form, lambda: one_op(
        "STABLEHLO_PAD", [x, np.array(value, x.dtype)], [(shape, x.dtype)], opts)))


_pad("f32-r2-edges", values((3, 4), np.float32), 0.5, [1, 2], [2, 0], [0, 0])
_pad("f32-r2-interior", values((3, 4), np.float32, 1), -1.0, [0, 1], [1, 1], [1, 2])
_pad("f32-r3-crop", values((4, 5, 3), np.float32, 2), 9.0, [-1, 2, 0], [1, -2, -1], [0, 0, 1])
_pad("i32-r2-crop-interior", values((5, 4), np.int32, 3), 7, [-3, -2], [-1, 2], [2, 1])
_pad("i8-r1", values((6,), np.int8, 4), -5, [3], [4], [1])
_pad("bool-r2", values((2, 3), np.bool_, 5), True, [1, 0], [0, 1], [1, 1])
_pad("f32-r4-nhwc", values((1, 3, 3, 2), np.float32, 6), 0.0, [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0])
_pad("f32-empty", values((2, 3), np.float32, 7), 1.0, [-2, 0], [-1, 0], [0, 0])


def _gather(form: str, operand: np.ndarray, indices: np.ndarray, offset_dims, collapsed, start_map,
            index_vector_dim: int, slice_sizes) -> None:
    batch = [d for k, d in enumerate(indices.shape) if k != index_vector_dim]
    offsets = [s for d, s in enumerate(slice_sizes) if d not in collapsed]
    rank = len(batch) + len(offsets)
    shape, b, o = [], iter(batch), iter(offsets)
    for d in range(rank):
        shape.append(next(o) if d in offset_dims else next(b))
    opts = Options("StablehloGatherOptions", offset_dims=np.array(offset_dims, np.int64),
                   collapsed_slice_dims=np.array(collapsed, np.int64), start_index_map=np.array(start_map, np.int64),
                   index_vector_dim=index_vector_dim, slice_sizes=np.array(slice_sizes, np.int64))
    CASES.append(OpCase("STABLEHLO_GATHER", form, lambda: one_op(
        "STABLEHLO_GATHER", [operand, indices], [(shape, operand.dtype)], opts)))


# torch.index_select / embedding: rows of a table.
_gather("f32-rows", values((6, 4), np.float32), np.array([[4], [0], [5], [2]], np.int32), [1], [0], [0], 1, [1, 4])
# Indices out of range are clamped so that the slice fits (negative ones to 0).
_gather("f32-clamped", values((5, 3), np.float32, 1), np.array([[7], [-2], [3]], np.int64), [1], [0], [0], 1, [1, 3])
# 2-D start indices, 2x2 windows, batch of [2, 3].
_gather("i32-windows", values((4, 5), np.int32, 2), rng(3).integers(0, 4, (2, 3, 2)).astype(np.int32),
        [2, 3], [], [0, 1], 2, [2, 2])
# Element gather of a rank-3 operand, index vectors along dimension 0 of the indices.
_gather("f32-points-ivd0", values((3, 4, 5), np.float32, 4), rng(5).integers(0, 3, (2, 6)).astype(np.int32),
        [1], [0, 2], [0, 2], 0, [1, 4, 1])
# Offset dimension before the batch dimension, start index mapped to operand dimension 1.
_gather("u8-offset-first", values((3, 7), np.uint8, 6), np.array([[1], [5], [0]], np.int32), [0], [1], [1], 1, [3, 1])
_gather("bool-rows", values((4, 3), np.bool_, 7), np.array([[3], [1]], np.int64), [1], [0], [0], 1, [1, 3])
_gather("f16-rows", values((4, 3), np.float16, 8), np.array([[2], [2], [0]], np.int32), [1], [0], [0], 1, [1, 3])


def _scatter(form: str, body: str | None, operand: np.ndarray, indices: np.ndarray, updates: np.ndarray,
             window_dims, inserted, to_operand, index_vector_dim: int) -> None:
    def build():
        opts = Options("StablehloScatterOptions", update_window_dims=np.array(window_dims, np.int64),
                       inserted_window_dims=np.array(inserted, np.int64),
                       scatter_dims_to_operand_dims=np.array(to_operand, np.int64), index_vector_dim=index_vector_dim,
                       update_computation_subgraph_index=1)
        return one_op("STABLEHLO_SCATTER", [operand, indices, updates], [(operand.shape, operand.dtype)], opts,
                      bodies=[binary_body(body, operand.dtype)])
    CASES.append(OpCase("STABLEHLO_SCATTER", form, build))


# Element updates with repeated and out-of-range targets (skipped), each computation.
_idx = np.array([[1], [4], [1], [9], [0], [-1], [1]], np.int32)
_scatter("f32-replace-repeats", None, values((6,), np.float32), _idx, values((7,), np.float32, 1), [], [0], [0], 1)
_scatter("f32-add-repeats", "STABLEHLO_ADD", values((6,), np.float32), _idx, values((7,), np.float32, 1),
         [], [0], [0], 1)
_scatter("i32-add-wrap", "STABLEHLO_ADD", values((6,), np.int32), _idx, values((7,), np.int32, 1), [], [0], [0], 1)
_scatter("f32-mul", "STABLEHLO_MULTIPLY", values((6,), np.float32), _idx, values((7,), np.float32, 2), [], [0], [0], 1)
_scatter("f32-max-nan", "STABLEHLO_MAXIMUM", np.array([0, np.nan, 2, 3, -1, 5], np.float32), _idx,
         np.array([5, 1, np.nan, 0, 2, 7, -4], np.float32), [], [0], [0], 1)
_scatter("i16-min", "STABLEHLO_MINIMUM", values((6,), np.int16), _idx, values((7,), np.int16, 3), [], [0], [0], 1)
# Row updates (torch index_put / x.at[idx].set): window dim 1, inserted dim 0.
_scatter("f32-rows", None, values((5, 3), np.float32, 4), np.array([[3], [0], [3]], np.int64),
         values((3, 3), np.float32, 5), [1], [0], [0], 1)
_scatter("i64-rows-add", "STABLEHLO_ADD", values((4, 3), np.int64, 6), np.array([[1], [1], [2]], np.int32),
         values((3, 3), np.int64, 7), [1], [0], [0], 1)
# 2-D points into a matrix, index vectors along dimension 0, partly out of range.
_scatter("f32-points-ivd0", "STABLEHLO_ADD", values((3, 4), np.float32, 8),
         np.array([[0, 2, 1, 3, 2], [1, 3, 0, 0, 4]], np.int32), values((5,), np.float32, 9), [], [0, 1], [0, 1], 0)
# 2x2 windows at 2-D starts; a window crossing the edge is skipped element by element.
_scatter("u8-windows", None, values((4, 4), np.uint8, 10), np.array([[0, 0], [2, 3], [1, 1]], np.int32),
         values((3, 2, 2), np.uint8, 11), [1, 2], [], [0, 1], 1)
_scatter("bool-replace", None, values((5,), np.bool_, 12), np.array([[0], [4], [2]], np.int32),
         values((3,), np.bool_, 13), [], [0], [0], 1)


def _reduce_window(form: str, body: str, operand: np.ndarray, init: Any, window, strides=None, base=None,
                   dilations=None, padding=None) -> None:
    rank = operand.ndim
    strides_, base_, dil_, pad_ = (strides or [1] * rank, base or [1] * rank, dilations or [1] * rank,
                                   padding or [0] * (2 * rank))
    dilated = [(d - 1) * b + 1 for d, b in zip(operand.shape, base_)]
    padded = [d + pad_[2 * i] + pad_[2 * i + 1] for i, d in enumerate(dilated)]
    spans = [(w - 1) * wd + 1 for w, wd in zip(window, dil_)]
    shape = [0 if p < s else (p - s) // st + 1 for p, s, st in zip(padded, spans, strides_)]

    def vec(v):
        return None if v is None else np.array(v, np.int64)

    def build():
        opts = Options("StablehloReduceWindowOptions", window_dimensions=vec(window), window_strides=vec(strides),
                       base_dilations=vec(base), window_dilations=vec(dilations), padding=vec(padding),
                       body_subgraph_index=1)
        return one_op("STABLEHLO_REDUCE_WINDOW", [operand, np.array(init, operand.dtype)], [(shape, operand.dtype)],
                      opts, bodies=[binary_body(body, operand.dtype)])
    CASES.append(OpCase("STABLEHLO_REDUCE_WINDOW", form, build))


_reduce_window("f32-maxpool-2x2-s2", "STABLEHLO_MAXIMUM", values((1, 4, 6, 2), np.float32), -np.inf,
               [1, 2, 2, 1], [1, 2, 2, 1])
_reduce_window("f32-sum-padded", "STABLEHLO_ADD", values((2, 5, 5, 3), np.float32, 1), 0.0,
               [1, 3, 3, 1], [1, 2, 1, 1], padding=[0, 0, 1, 1, 1, 1, 0, 0])
_reduce_window("f32-sum-builtin-add-dilated", "ADD", values((7, 6), np.float32, 2), 0.5, [2, 3], [1, 2],
               dilations=[2, 1])
_reduce_window("f32-base-dilated", "STABLEHLO_ADD", values((3, 4), np.float32, 3), 1.0, [2, 2], base=[2, 3])
_reduce_window("f32-min-crop", "STABLEHLO_MINIMUM", values((6, 5), np.float32, 4), np.inf, [2, 2], [2, 1],
               padding=[-1, 0, 1, -2])
_reduce_window("i32-mul-wrap", "MUL", values((4, 6), np.int32, 5), 1, [2, 3], [2, 3])
_reduce_window("i8-max", "MAXIMUM", values((9,), np.int8, 6), -128, [3], [2], padding=[1, 1])
_reduce_window("i64-min", "MINIMUM", values((5, 4), np.int64, 7), 2**62, [3, 2])
_reduce_window("u8-sum", "STABLEHLO_ADD", values((6,), np.uint8, 8), 3, [4])
_reduce_window("f64-max", "STABLEHLO_MAXIMUM", values((3, 5), np.float64, 9), -1.0, [2, 2], [1, 2])
_reduce_window("bool-all", "LOGICAL_AND", values((4, 4), np.bool_, 10), True, [2, 2], [1, 1])
_reduce_window("bool-stablehlo-and-padded", "STABLEHLO_AND", values((6,), np.bool_, 11), True, [2], [2], padding=[1, 0])
_reduce_window("bool-or", "LOGICAL_OR", values((3, 5), np.bool_, 12), False, [2, 3], [1, 2])
_reduce_window("f32-max-nan", "STABLEHLO_MAXIMUM", np.array([np.nan, 1, 2, np.nan, -1, np.nan], np.float32), 0.0,
               [2], [1])


def _rng_bits(form: str, algorithm: int, state: list[int], shape: Sequence[int], dtype: Any) -> None:
    opts = Options("StablehloRngBitGeneratorOptions", algorithm=algorithm)
    st = np.array(state, np.uint64)
    CASES.append(OpCase("STABLEHLO_RNG_BIT_GENERATOR", form, lambda: one_op(
        "STABLEHLO_RNG_BIT_GENERATOR", [st], [(st.shape, np.uint64), (shape, dtype)], opts)))


_rng_bits("philox-u32", 1, [0x0123456789ABCDEF, 7], (3, 5), np.uint32)
_rng_bits("philox-3-words-i64", 1, [42, 2**32 - 2, 0xFFFFFFFF00000001], (7,), np.int64)
_rng_bits("default-i32-counter-carry", 0, [5, 0xFFFFFFFF], (2, 9), np.int32)
_rng_bits("threefry-u64", 2, [0xDEADBEEF, 0x1234_5678_9ABC_DEF0], (4, 3), np.uint64)
_rng_bits("threefry-i32-odd", 2, [1, 2**32 - 1], (11,), np.int32)


def _composite(form: str, body, inputs: list[np.ndarray], outputs: list[tuple[Sequence[int], Any]],
               name: str = "odml.test") -> None:
    """A STABLEHLO_COMPOSITE whose decomposition subgraph 1 is made by ``body(graph, inputs)``
    (returning its output tensors)."""
    def build():
        d = Graph()
        ins = [d.input(value.shape, value.dtype) for value in inputs]
        d.output(*body(d, ins))
        opts = Options("StableHLOCompositeOptions", name=name, decomposition_subgraph_index=1,
                       composite_attributes=np.zeros(0, np.uint8), version=1)
        return one_op("STABLEHLO_COMPOSITE", inputs, outputs, opts, bodies=[d])
    CASES.append(OpCase("STABLEHLO_COMPOSITE", form, build))


def _mul_add(d: Graph, ins: list[int]) -> list[int]:
    # x * y + x with TFLite builtins, as litert-torch decomposes a composite
    a, b = ins
    shape = d.sg.tensors[a].shape
    p, s = d.tensor(shape, np.float32), d.tensor(shape, np.float32)
    d.op("MUL", [a, b], [p], Options("MulOptions"))
    d.op("ADD", [p, a], [s], Options("AddOptions"))
    return [s]


def _gelu_tanh(d: Graph, ins: list[int]) -> list[int]:
    (a,) = ins
    shape = d.sg.tensors[a].shape
    y = d.tensor(shape, np.float32)
    d.op("GELU", [a], [y], Options("GeluOptions", approximate=True))
    return [y]


def _two_outputs(d: Graph, ins: list[int]) -> list[int]:
    # (x + y with STABLEHLO ops, y passed through, a constant)
    a, b = ins
    shape = d.sg.tensors[a].shape
    s = d.tensor(shape, np.int32)
    d.op("STABLEHLO_ADD", [a, b], [s])
    return [s, b, d.const(np.array([3, 1, 4], np.int32))]


_composite("f32-builtin-decomposition", _mul_add, [values((2, 3), np.float32), values((2, 3), np.float32, 1)],
           [((2, 3), np.float32)])
_composite("f32-gelu", _gelu_tanh, [values((4, 5), np.float32, 2)], [((4, 5), np.float32)], "odml.gelu")
_composite("i32-passthrough-and-constant", _two_outputs, [values((3,), np.int32, 3), values((3,), np.int32, 4)],
           [((3,), np.int32), ((3,), np.int32), ((3,), np.int32)])


def _case(form: str, index: int) -> None:
    """A STABLEHLO_CASE over three branches of ``(x, y)``: x + y, x * y, max(x, y) - with ``index``
    (out of range: the last branch)."""
    def build():
        branches = []
        for op in ("STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM"):
            g = Graph()
            a, b = g.input((2, 3), np.float32), g.input((2, 3), np.float32)
            z = g.tensor((2, 3), np.float32)
            g.op(op, [a, b], [z])
            g.output(z)
            branches.append(g)
        opts = Options("StablehloCaseOptions", branch_subgraph_indices=np.arange(1, 4, dtype=np.int32))
        return one_op("STABLEHLO_CASE", [np.array(index, np.int32), values((2, 3), np.float32, 1),
                                         values((2, 3), np.float32, 2)], [((2, 3), np.float32)], opts, bodies=branches)
    CASES.append(OpCase("STABLEHLO_CASE", form, build))


_case("branch-0", 0)
_case("branch-1", 1)
_case("branch-2", 2)
_case("index-past-end", 7)
_case("index-negative", -1)

# ----------------------------------------------------------------------------- what LiteRT cannot run

_NOT_REGISTERED = (
    "Didn't find op for builtin opcode '{op}' version '1'. An older version of this builtin might be supported. "
    "Are you using an old TFLite binary with a newer model?"
)
# LiteRT 2.3's builtin resolver registers no kernel for these (register.cc): creating a LiteRT
# interpreter for a one-op model of any of them fails with this message, whatever the options.
NOT_RUNNABLE: dict[str, str] = {
    op: _NOT_REGISTERED.format(op=op)
    for op in (
        "STABLEHLO_LOGISTIC", "STABLEHLO_DIVIDE", "STABLEHLO_RESHAPE", "STABLEHLO_CLAMP", "STABLEHLO_CONCATENATE",
        "STABLEHLO_BROADCAST_IN_DIM", "STABLEHLO_CONVOLUTION", "STABLEHLO_SLICE", "STABLEHLO_CUSTOM_CALL",
        "STABLEHLO_REDUCE", "STABLEHLO_ABS", "STABLEHLO_COSINE", "STABLEHLO_EXPONENTIAL", "STABLEHLO_FLOOR",
        "STABLEHLO_LOG", "STABLEHLO_NEGATE", "STABLEHLO_OR", "STABLEHLO_POWER", "STABLEHLO_REMAINDER",
        "STABLEHLO_RSQRT", "STABLEHLO_SELECT", "STABLEHLO_SUBTRACT", "STABLEHLO_TANH", "STABLEHLO_COMPARE",
        "STABLEHLO_CONVERT", "STABLEHLO_DYNAMIC_SLICE", "STABLEHLO_DYNAMIC_UPDATE_SLICE", "STABLEHLO_IOTA",
        "STABLEHLO_DOT_GENERAL", "STABLEHLO_SORT", "STABLEHLO_WHILE", "STABLEHLO_TRANSPOSE", "STABLEHLO_CBRT",
    )
}
