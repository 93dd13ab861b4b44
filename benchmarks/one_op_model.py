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


def one_op(
    op: str,
    inputs: Sequence[In | None],
    outputs: Sequence[Out],
    options: dict[str, Any] | None = None,
    *,
    options_type: str | None = None,
    options2: tuple[str, dict[str, Any]] | None = None,
    custom_options: bytes | None = None,
    version: int = 1,
    intermediates: Sequence[Out] = (),
) -> tuple[bytes, list[np.ndarray]]:
    """The model bytes of one ``op`` node and the values to feed its model inputs, in order."""
    model = Model(operator_codes=[OperatorCode(op, version=version)])
    sg = Subgraph()
    feeds: list[np.ndarray] = []
    in_indices: list[int] = []
    for n, spec in enumerate(inputs):
        if spec is None:
            in_indices.append(-1)
            continue
        type_name = _type_name(spec.value, spec.type)
        tensor = Tensor(f"in{n}", tuple(spec.value.shape), type_name, quantization=quantization(spec.q))
        if spec.kind == "input":
            sg.inputs.append(len(sg.tensors))
            feeds.append(spec.value)
        elif spec.kind == "variable":
            tensor.is_variable = True
            if spec.value.size and np.any(spec.value):  # LiteRT zeroes variables without data
                model.buffers.append(Buffer(_bytes(spec.value, type_name)))
                tensor.buffer = len(model.buffers) - 1
        else:
            model.buffers.append(Buffer(_bytes(spec.value, type_name)))
            tensor.buffer = len(model.buffers) - 1
        in_indices.append(len(sg.tensors))
        sg.tensors.append(tensor)
    out_indices = []
    for n, o in enumerate(outputs):
        type_name = o.type or schema.type_name_of(o.dtype)
        out_indices.append(len(sg.tensors))
        sg.outputs.append(len(sg.tensors))
        sg.tensors.append(Tensor(f"out{n}", o.shape, type_name, quantization=quantization(o.q)))
    inter = []
    for n, o in enumerate(intermediates):
        inter.append(len(sg.tensors))
        sg.tensors.append(Tensor(f"intermediate{n}", o.shape, o.type or schema.type_name_of(o.dtype),
                                 quantization=quantization(o.q)))
    opts = None
    type_name = options_type or schema.options_type_for_op(op)
    if options is not None or type_name is not None:
        if type_name is None:
            raise ValueError(f"{op} has no options table; name one with options_type")
        opts = Options(type_name, **(options or {}))
    opts2 = Options(options2[0], **options2[1]) if options2 else None
    sg.operators.append(Operator(0, in_indices, out_indices, opts, opts2, custom_options, intermediates=inter))
    model.subgraphs.append(sg)
    return write_model(model), feeds
