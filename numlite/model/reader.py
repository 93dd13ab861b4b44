"""Read a ``.tflite`` flatbuffer into numlite's model objects.

Constant buffers are not copied: each ``Buffer.data`` is a NumPy view over the file's bytes
(memory-mapped when reading from a path). Every model is checked before it is returned
(:mod:`numlite.model.verifier`): its flatbuffer structure before it is parsed, then its indices,
buffer sizes, shape bounds and subgraph calls. Any problem raises ``ModelError`` naming where it
is, never an IndexError or struct.error from deep inside the bindings.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

import numpy as np
import tflite

from numlite.errors import ModelError
from numlite.model import schema
from numlite.model.ir import (
    Buffer,
    DimensionMetadata,
    Metadata,
    Model,
    Operator,
    OperatorCode,
    Options,
    Quantization,
    SignatureDef,
    Sparsity,
    Subgraph,
    Tensor,
)
from numlite.model.verifier import verify_flatbuffer, verify_model

_IDENTIFIER = b"TFL3"


def read_model_file(path: str | os.PathLike) -> Model:
    """Read a model from a file, memory-mapping it so large weights are never copied."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise ModelError(f"{path}: the file is empty, not a TFLite model")
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ModelError(f"cannot read model file {path}: {e}") from e
    return read_model(data, source=str(path))


def read_model(data: bytes | bytearray | memoryview | mmap.mmap, source: str = "model content") -> Model:
    """Read a model from flatbuffer bytes (kept alive by the arrays that view them)."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if len(data) < 8:
        raise ModelError(f"{source}: {len(data)} bytes is too short to be a TFLite model")
    if data[4:8] != _IDENTIFIER:
        raise ModelError(
            f"{source}: not a TFLite flatbuffer (file identifier is {bytes(data[4:8])!r}, expected {_IDENTIFIER!r})"
        )
    verify_flatbuffer(data, source)
    try:
        fb = tflite.Model.GetRootAs(data, 0)
        model = _Reader(data).model(fb)
    except ModelError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, UnicodeDecodeError, OverflowError) as e:
        raise ModelError(f"{source}: malformed or truncated TFLite flatbuffer ({type(e).__name__}: {e})") from e
    verify_model(model, file_size=len(data))
    return model


def _vector(obj: Any, name: str) -> np.ndarray | None:
    if getattr(obj, f"{name}IsNone")():
        return None
    value = getattr(obj, f"{name}AsNumpy")()
    return value if isinstance(value, np.ndarray) else np.zeros(0)


def _ints(obj: Any, name: str) -> list[int]:
    value = _vector(obj, name)
    return [] if value is None else [int(v) for v in value]


def _string(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8")


class _Reader:
    def __init__(self, data: Any) -> None:
        self.data = data
        self.size = len(data)

    def model(self, fb: tflite.Model) -> Model:
        model = Model(
            operator_codes=[self.operator_code(fb.OperatorCodes(i)) for i in range(fb.OperatorCodesLength())],
            buffers=[self.buffer(fb.Buffers(i), i) for i in range(fb.BuffersLength())],
            description=_string(fb.Description()),
            version=fb.Version(),
            metadata=[Metadata(_string(m.Name()) or "", m.Buffer()) for m in map(fb.Metadata, range(fb.MetadataLength()))],
            metadata_buffer=_ints(fb, "MetadataBuffer"),
            signature_defs=[self.signature(fb.SignatureDefs(i)) for i in range(fb.SignatureDefsLength())],
        )
        model.subgraphs = [self.subgraph(fb.Subgraphs(i)) for i in range(fb.SubgraphsLength())]
        return model

    def operator_code(self, oc: tflite.OperatorCode) -> OperatorCode:
        # Old files only set the int8 deprecated field; new ones set both (the larger one wins).
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        name = schema.BUILTIN_OPERATOR_NAMES.get(code, f"{schema.UNKNOWN_BUILTIN}{code}")
        return OperatorCode(name, _string(oc.CustomCode()), oc.Version())

    def buffer(self, b: tflite.Buffer, index: int) -> Buffer:
        offset, size = b.Offset(), b.Size()
        if offset > 1:
            # Models over 2 GB keep buffers after the flatbuffer, addressed by file offset.
            if offset + size > self.size:
                raise ModelError(f"buffer {index} lies outside the file (offset {offset}, size {size})")
            return Buffer(np.frombuffer(self.data, np.uint8, size, offset))
        data = _vector(b, "Data")
        if data is None:
            return Buffer()
        return Buffer(data)

    def signature(self, s: tflite.SignatureDef) -> SignatureDef:
        def maps(n: int, get) -> dict[str, int]:
            return {_string(get(i).Name()) or "": get(i).TensorIndex() for i in range(n)}

        return SignatureDef(
            key=_string(s.SignatureKey()) or "",
            subgraph_index=s.SubgraphIndex(),
            inputs=maps(s.InputsLength(), s.Inputs),
            outputs=maps(s.OutputsLength(), s.Outputs),
        )

    def subgraph(self, sg: tflite.SubGraph) -> Subgraph:
        return Subgraph(
            tensors=[self.tensor(sg.Tensors(i)) for i in range(sg.TensorsLength())],
            inputs=_ints(sg, "Inputs"),
            outputs=_ints(sg, "Outputs"),
            operators=[self.operator(sg.Operators(i)) for i in range(sg.OperatorsLength())],
            name=_string(sg.Name()),
        )

    def tensor(self, t: tflite.Tensor) -> Tensor:
        type_code = t.Type()
        if type_code not in schema.TENSOR_TYPE_NAMES:
            raise ModelError(f"tensor {_string(t.Name())!r} has unknown type code {type_code}")
        signature = _vector(t, "ShapeSignature")
        return Tensor(
            name=_string(t.Name()) or "",
            shape=tuple(_ints(t, "Shape")),
            type=schema.TENSOR_TYPE_NAMES[type_code],
            buffer=t.Buffer(),
            quantization=self.quantization(t.Quantization()),
            is_variable=bool(t.IsVariable()),
            sparsity=self.sparsity(t.Sparsity()),
            shape_signature=None if signature is None else tuple(int(v) for v in signature),
            has_rank=bool(t.HasRank()),
        )

    def quantization(self, q: tflite.QuantizationParameters | None) -> Quantization | None:
        if q is None:
            return None
        return Quantization(
            scale=_vector(q, "Scale"),
            zero_point=_vector(q, "ZeroPoint"),
            min=_vector(q, "Min"),
            max=_vector(q, "Max"),
            quantized_dimension=q.QuantizedDimension(),
        )

    def sparsity(self, s: tflite.SparsityParameters | None) -> Sparsity | None:
        if s is None:
            return None
        dims = []
        for i in range(s.DimMetadataLength()):
            d = s.DimMetadata(i)
            dims.append(
                DimensionMetadata(
                    format="SPARSE_CSR" if d.Format() == tflite.DimensionType.SPARSE_CSR else "DENSE",
                    dense_size=d.DenseSize(),
                    array_segments=self.sparse_index_vector(d.ArraySegmentsType(), d.ArraySegments()),
                    array_indices=self.sparse_index_vector(d.ArrayIndicesType(), d.ArrayIndices()),
                )
            )
        return Sparsity(_ints(s, "TraversalOrder"), _ints(s, "BlockMap"), dims)

    def sparse_index_vector(self, kind: int, table: Any) -> np.ndarray | None:
        names = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}
        if table is None or kind not in names:
            return None
        cls = getattr(tflite, names[kind])
        vec = cls()
        vec.Init(table.Bytes, table.Pos)
        return _vector(vec, "Values")

    def operator(self, op: tflite.Operator) -> Operator:
        custom = None
        if not op.CustomOptionsIsNone():
            custom = bytes(op.CustomOptionsAsNumpy())
        elif op.LargeCustomOptionsSize() > 0:
            start, size = op.LargeCustomOptionsOffset(), op.LargeCustomOptionsSize()
            custom = bytes(self.data[start : start + size])
        return Operator(
            opcode_index=op.OpcodeIndex(),
            inputs=_ints(op, "Inputs"),
            outputs=_ints(op, "Outputs"),
            builtin_options=self.options(schema.BUILTIN_OPTIONS_NAMES, op.BuiltinOptionsType(), op.BuiltinOptions()),
            builtin_options2=self.options(schema.BUILTIN_OPTIONS2_NAMES, op.BuiltinOptions2Type(), op.BuiltinOptions2()),
            custom_options=custom,
            custom_options_format=op.CustomOptionsFormat(),
            mutating_variable_inputs=[bool(v) for v in _ints(op, "MutatingVariableInputs")],
            intermediates=_ints(op, "Intermediates"),
        )

    def options(self, names: dict[int, str], kind: int, table: Any) -> Options | None:
        if kind == 0 or table is None:
            return None
        type_name = names.get(kind)
        if type_name is None:
            raise ModelError(f"unknown builtin options type {kind} (from a schema newer than numlite's)")
        module = schema.generated_module(type_name)
        fb = getattr(module, type_name)()
        fb.Init(table.Bytes, table.Pos)
        values = {}
        for f in schema.option_fields(type_name):
            if f.kind == "scalar":
                values[f.name] = getattr(fb, f.camel)()
            elif f.kind == "vector":
                values[f.name] = _vector(fb, f.camel)
            elif f.kind == "string":
                values[f.name] = _string(getattr(fb, f.camel)())
            # Nested tables (only in StableHLO options) are not represented.
        return Options(type_name, **values)

