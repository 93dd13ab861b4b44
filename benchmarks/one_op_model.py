"""One-operator ``.tflite`` models written with numlite's writer, for the builtin op sweep.

    model, inputs = one_op("ADD", [x(a), k(b)], [out(np.float32)], {"fused_activation_function": 1})

``x(value)`` is a model input (``value`` is what the sweep feeds it), ``k(value)`` a constant,
``v(value)`` a variable tensor (state that LiteRT's RNN/SVDF kernels update), ``None`` an omitted
optional input; ``out(dtype)`` an output. ``q=(scale, zero_point)`` quantizes a tensor per
tensor, ``q=(scales, zero_points, axis)`` per channel. Output shapes may be left empty: both
LiteRT and numlite size outputs in prepare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from numlite.model import schema, write_model
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Options, Quantization, Subgraph, Tensor

QuantSpec = tuple  # (scale, zero_point) or (scales, zero_points, quantized_dimension)


@dataclass
class In:
    """One operator input: its value, and whether it is a model input, a constant or a variable."""

    value: np.ndarray
    kind: str = "input"  # "input", "const" or "variable"
    q: QuantSpec | None = None
    type: str | None = None  # a tensor type name where the dtype does not say it (RESOURCE)


@dataclass
class Out:
    dtype: Any
    q: QuantSpec | None = None
    shape: tuple[int, ...] = ()
    type: str | None = None


def x(value: Any, q: QuantSpec | None = None, type: str | None = None) -> In:
    """A model input fed ``value``."""
    return In(np.asarray(value), "input", q, type)


def k(value: Any, q: QuantSpec | None = None, type: str | None = None) -> In:
    """A constant tensor holding ``value``."""
    return In(np.asarray(value), "const", q, type)


def v(value: Any, q: QuantSpec | None = None) -> In:
    """A variable tensor starting at ``value`` (kernels write their state there)."""
    return In(np.asarray(value), "variable", q)


def out(dtype: Any, q: QuantSpec | None = None, shape: Sequence[int] = (), type: str | None = None) -> Out:
    return Out(dtype, q, tuple(shape), type)


def quantization(q: QuantSpec | None) -> Quantization | None:
    if q is None:
        return None
    if len(q) == 3:
        scales, zps, axis = q
        return Quantization(np.asarray(scales, np.float32).reshape(-1), np.asarray(zps, np.int64).reshape(-1),
                            quantized_dimension=int(axis))
    return Quantization(np.array([q[0]], np.float32), np.array([q[1]], np.int64))


def string_buffer(values: np.ndarray) -> np.ndarray:
    """A STRING tensor's buffer: int32 count n, n + 1 int32 offsets from the start, the bytes."""
    items = [s if isinstance(s, bytes) else str(s).encode() for s in np.asarray(values, object).reshape(-1)]
    header = 4 * (len(items) + 2)
    offsets = np.cumsum([header] + [len(s) for s in items]).astype("<i4")
    data = np.int32(len(items)).astype("<i4").tobytes() + offsets.tobytes() + b"".join(items)
    return np.frombuffer(data, np.uint8)


def _type_name(value: np.ndarray, override: str | None) -> str:
    if override is not None:
        return override
    if value.dtype == object:
        return "STRING"
    return schema.type_name_of(value.dtype)


def _bytes(value: np.ndarray, type_name: str) -> np.ndarray:
    if type_name == "STRING":
        return string_buffer(value)
    return np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)


class Graph:
    """A subgraph under construction: tensors made by ``add`` (an In, or an Out for a computed
    tensor; or the shorthands ``input``, ``const`` and ``tensor``), operators by ``op``.
    ``model(*graphs)`` writes a model, this graph first."""

    def __init__(self, name: str | None = None) -> None:
        self.sg = Subgraph(name=name)
        self.feeds: list[np.ndarray] = []
        self.buffers: list[np.ndarray] = []  # (data) of this graph's constants, numbered from 1
        self.ops: list[tuple[str, Operator, int]] = []

    def add(self, spec: In | Out, name: str | None = None) -> int:
        """A tensor: a model input, constant or variable (In), or a computed one (Out)."""
        index = len(self.sg.tensors)
        name = name or f"t{index}"
        if isinstance(spec, Out):
            self.sg.tensors.append(Tensor(name, spec.shape, spec.type or schema.type_name_of(spec.dtype),
                                          quantization=quantization(spec.q)))
            return index
        type_name = _type_name(spec.value, spec.type)
        tensor = Tensor(name, tuple(spec.value.shape), type_name, quantization=quantization(spec.q))
        if spec.kind == "input":
            self.sg.inputs.append(index)
            self.feeds.append(spec.value)
        elif spec.kind == "variable":
            tensor.is_variable = True
            if spec.value.size and np.any(spec.value):  # LiteRT zeroes variables without data
                tensor.buffer = self._buffer(_bytes(spec.value, type_name))
        else:
            tensor.buffer = self._buffer(_bytes(spec.value, type_name))
        self.sg.tensors.append(tensor)
        return index

    def input(self, shape: Sequence[int], dtype: Any) -> int:
        """A subgraph input of this shape (a called subgraph's argument; in the main graph, a
        model input fed zeros)."""
        return self.add(x(np.zeros(tuple(shape), dtype)), f"in{len(self.sg.inputs)}")

    def const(self, value: Any, dtype: Any = None) -> int:
        return self.add(k(np.asarray(value, dtype)), f"const{len(self.sg.tensors)}")

    def tensor(self, shape: Sequence[int], dtype: Any) -> int:
        """A computed tensor."""
        return self.add(out(dtype, shape=shape))

    def _buffer(self, data: np.ndarray) -> int:
        self.buffers.append(data)
        return -len(self.buffers)  # renumbered when the model is written

    def op(self, op: str, inputs: Sequence[int], outputs: Sequence[int], options: dict[str, Any] | Options | None = None,
           *, options_type: str | None = None, options2: tuple[str, dict[str, Any]] | Options | None = None,
           custom_options: bytes | None = None, version: int = 1, intermediates: Sequence[int] = ()) -> None:
        """One operator. ``options``: its builtin options' fields (the table named by the op, or
        ``options_type``) or an Options; ``options2``: (table, fields) or an Options."""
        opts = options if isinstance(options, Options) else None
        type_name = options_type or schema.options_type_for_op(op)
        if opts is None and (options is not None or type_name is not None):
            if type_name is None:
                raise ValueError(f"{op} has no options table; name one with options_type")
            opts = Options(type_name, **(options or {}))
        opts2 = options2 if isinstance(options2, Options) or options2 is None else Options(options2[0], **options2[1])
        node = Operator(0, list(inputs), list(outputs), opts, opts2, custom_options, intermediates=list(intermediates))
        self.sg.operators.append(node)
        self.ops.append((op, node, version))

    def output(self, *indices: int) -> None:
        self.sg.outputs.extend(indices)


def model(*graphs: Graph) -> tuple[bytes, list[np.ndarray]]:
    """The model bytes of these subgraphs (the first is the main one) and its feeds."""
    m = Model()
    codes: dict[tuple[str, int], int] = {}
    for g in graphs:
        base = len(m.buffers)
        m.buffers.extend(Buffer(d) for d in g.buffers)
        for t in g.sg.tensors:
            if t.buffer < 0:
                t.buffer = base - 1 - t.buffer
        for op, node, version in g.ops:
            if (op, version) not in codes:
                codes[(op, version)] = len(m.operator_codes)
                m.operator_codes.append(OperatorCode(op, version=version))
            node.opcode_index = codes[(op, version)]
        m.subgraphs.append(g.sg)
    return write_model(m), graphs[0].feeds


def one_op(
    op: str,
    inputs: Sequence[In | None],
    outputs: Sequence[Out],
    options: dict[str, Any] | None = None,
    *,
    intermediates: Sequence[Out] = (),
    **op_kwargs: Any,
) -> tuple[bytes, list[np.ndarray]]:
    """The model bytes of one ``op`` node and the values to feed its model inputs, in order
    (``op_kwargs``: options_type, options2, custom_options, version; see Graph.op)."""
    g = Graph()
    ins = [-1 if spec is None else g.add(spec, f"in{n}") for n, spec in enumerate(inputs)]
    outs = [g.add(o, f"out{n}") for n, o in enumerate(outputs)]
    inter = [g.add(o, f"intermediate{n}") for n, o in enumerate(intermediates)]
    g.op(op, ins, outs, options, intermediates=inter, **op_kwargs)
    g.output(*outs)
    return model(g)
