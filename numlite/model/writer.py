"""Write numlite's model objects back to ``.tflite`` flatbuffer bytes.

The writer is what the converter emits models with, so it writes everything the reader reads:
a model read and written again runs bit-identically in LiteRT. Constant buffers are aligned to
16 bytes, as the official converter aligns them, so kernels may map them directly.
"""

from __future__ import annotations

from typing import Any, Callable

import flatbuffers
import numpy as np
import tflite

from numlite.model import schema
from numlite.model.ir import DimensionMetadata, Model, Operator, Options, Quantization, Sparsity, Subgraph, Tensor

_BUFFER_ALIGNMENT = 16
_module = schema.generated_module


def write_model(model: Model) -> bytes:
    """Serialize a model to flatbuffer bytes with the "TFL3" file identifier."""
    return _Writer(model).write()


class _Writer:
    def __init__(self, model: Model) -> None:
        self.model = model
        size = sum(len(b) for b in model.buffers) + 1024 * 1024
        self.b = flatbuffers.Builder(size)

    # -- helpers ------------------------------------------------------------------------------

    def table(self, module: Any, prefix: str, fields: list[tuple[str, Any]]) -> int:
        """Build a table with ``module.<prefix>Add<Field>(builder, value)`` for each field set."""
        getattr(module, f"{prefix}Start")(self.b)
        for name, value in fields:
            if value is not None:
                getattr(module, f"{prefix}Add{name}")(self.b, value)
        return getattr(module, f"{prefix}End")(self.b)

    def offsets(self, items: list[Any], make: Callable[[Any], int]) -> int:
        """A vector of tables, built in order and referenced in order."""
        built = [make(item) for item in items]
        self.b.StartVector(4, len(built), 4)
        for off in reversed(built):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def numbers(self, values: Any, dtype: Any) -> int | None:
        if values is None:
            return None
        return self.b.CreateNumpyVector(np.ascontiguousarray(np.asarray(values, dtype=dtype)).reshape(-1))

    def string(self, s: str | None) -> int | None:
        return None if s is None else self.b.CreateString(s)

    def raw_bytes(self, data: np.ndarray, alignment: int) -> int:
        n = int(data.size)
        self.b.StartVector(1, n, alignment)
        self.b.head -= n
        self.b.Bytes[self.b.head : self.b.head + n] = np.ascontiguousarray(data, np.uint8).tobytes()
        return self.b.EndVector()  # the length StartVector was given (passing it again is deprecated)

    # -- tables -------------------------------------------------------------------------------

    def write(self) -> bytes:
        m = self.model
        # Buffers go first so that they sit at the end of the file, after all metadata.
        buffers = self.offsets(list(m.buffers), self.buffer)
        metadata_buffer = self.numbers(m.metadata_buffer, np.int32) if m.metadata_buffer else None
        metadata = self.offsets(m.metadata, lambda md: self.table(
            _module("Metadata"), "Metadata", [("Name", self.string(md.name)), ("Buffer", md.buffer)]
        )) if m.metadata else None
        signatures = self.offsets(m.signature_defs, self.signature) if m.signature_defs else None
        subgraphs = self.offsets(m.subgraphs, self.subgraph)
        codes = self.offsets(m.operator_codes, self.operator_code)
        description = self.string(m.description)
        root = self.table(_module("Model"), "Model", [
            ("Version", m.version),
            ("OperatorCodes", codes),
            ("Subgraphs", subgraphs),
            ("Description", description),
            ("Buffers", buffers),
            ("MetadataBuffer", metadata_buffer),
            ("Metadata", metadata),
            ("SignatureDefs", signatures),
        ])
        self.b.Finish(root, file_identifier=b"TFL3")
        return bytes(self.b.Output())

    def buffer(self, buf: Any) -> int:
        data = self.raw_bytes(buf.data, _BUFFER_ALIGNMENT) if len(buf) else None
        return self.table(_module("Buffer"), "Buffer", [("Data", data)])

    def operator_code(self, oc: Any) -> int:
        code = schema.BUILTIN_OPERATOR_CODES[oc.builtin]
        custom = self.string(oc.custom_code)
        return self.table(_module("OperatorCode"), "OperatorCode", [
            ("DeprecatedBuiltinCode", min(code, schema.PLACEHOLDER_FOR_GREATER_OP_CODES)),
            ("CustomCode", custom),
            ("Version", oc.version),
            ("BuiltinCode", code),
        ])

    def signature(self, s: Any) -> int:
        def tensor_maps(mapping: dict[str, int]) -> int:
            return self.offsets(list(mapping.items()), lambda kv: self.table(
                _module("TensorMap"), "TensorMap", [("Name", self.string(kv[0])), ("TensorIndex", kv[1])]
            ))

        inputs, outputs, key = tensor_maps(s.inputs), tensor_maps(s.outputs), self.string(s.key)
        return self.table(_module("SignatureDef"), "SignatureDef", [
            ("Inputs", inputs), ("Outputs", outputs), ("SignatureKey", key), ("SubgraphIndex", s.subgraph_index),
        ])

    def subgraph(self, sg: Subgraph) -> int:
        tensors = self.offsets(sg.tensors, self.tensor)
        inputs = self.numbers(sg.inputs, np.int32)
        outputs = self.numbers(sg.outputs, np.int32)
        operators = self.offsets(sg.operators, self.operator)
        name = self.string(sg.name)
        return self.table(_module("SubGraph"), "SubGraph", [
            ("Tensors", tensors), ("Inputs", inputs), ("Outputs", outputs), ("Operators", operators), ("Name", name),
        ])

    def tensor(self, t: Tensor) -> int:
        shape = self.numbers(t.shape, np.int32)
        name = self.string(t.name)
        quantization = self.quantization(t.quantization) if t.quantization is not None else None
        sparsity = self.sparsity(t.sparsity) if t.sparsity is not None else None
        signature = self.numbers(t.shape_signature, np.int32) if t.shape_signature is not None else None
        return self.table(_module("Tensor"), "Tensor", [
            ("Shape", shape),
            ("Type", schema.TENSOR_TYPE_CODES[t.type]),
            ("Buffer", t.buffer),
            ("Name", name),
            ("Quantization", quantization),
            ("IsVariable", t.is_variable or None),
            ("Sparsity", sparsity),
            ("ShapeSignature", signature),
            ("HasRank", t.has_rank or None),
        ])

    def quantization(self, q: Quantization) -> int:
        fields = [
            ("Min", self.numbers(q.min, np.float32)),
            ("Max", self.numbers(q.max, np.float32)),
            ("Scale", self.numbers(q.scale, np.float32)),
            ("ZeroPoint", self.numbers(q.zero_point, np.int64)),
            ("QuantizedDimension", q.quantized_dimension),
        ]
        return self.table(_module("QuantizationParameters"), "QuantizationParameters", fields)

    def sparsity(self, s: Sparsity) -> int:
        order = self.numbers(s.traversal_order, np.int32)
        block_map = self.numbers(s.block_map, np.int32)
        dims = self.offsets(s.dim_metadata, self.dimension)
        return self.table(_module("SparsityParameters"), "SparsityParameters", [
            ("TraversalOrder", order), ("BlockMap", block_map), ("DimMetadata", dims),
        ])

    def dimension(self, d: DimensionMetadata) -> int:
        segments_type, segments = self.index_vector(d.array_segments)
        indices_type, indices = self.index_vector(d.array_indices)
        return self.table(_module("DimensionMetadata"), "DimensionMetadata", [
            ("Format", tflite.DimensionType.SPARSE_CSR if d.format == "SPARSE_CSR" else None),
            ("DenseSize", d.dense_size or None),
            ("ArraySegmentsType", segments_type),
            ("ArraySegments", segments),
            ("ArrayIndicesType", indices_type),
            ("ArrayIndices", indices),
        ])

    def index_vector(self, values: np.ndarray | None) -> tuple[int | None, int | None]:
        if values is None:
            return None, None
        kinds = {np.dtype(np.int32): (1, "Int32Vector"), np.dtype(np.uint16): (2, "Uint16Vector"),
                 np.dtype(np.uint8): (3, "Uint8Vector")}
        kind, name = kinds.get(np.asarray(values).dtype, (1, "Int32Vector"))
        vec = self.numbers(values, {1: np.int32, 2: np.uint16, 3: np.uint8}[kind])
        return kind, self.table(_module(name), name, [("Values", vec)])

    def operator(self, op: Operator) -> int:
        inputs = self.numbers(op.inputs, np.int32)
        outputs = self.numbers(op.outputs, np.int32)
        options = self.options(op.builtin_options)
        options2 = self.options(op.builtin_options2)
        custom = self.numbers(np.frombuffer(op.custom_options, np.uint8), np.uint8) if op.custom_options is not None else None
        mutating = self.numbers(op.mutating_variable_inputs, np.bool_) if op.mutating_variable_inputs else None
        intermediates = self.numbers(op.intermediates, np.int32) if op.intermediates else None
        fields = [
            ("OpcodeIndex", op.opcode_index),
            ("Inputs", inputs),
            ("Outputs", outputs),
            ("BuiltinOptionsType", schema.BUILTIN_OPTIONS_CODES[op.builtin_options.type_name] if options else None),
            ("BuiltinOptions", options),
            ("CustomOptions", custom),
            ("CustomOptionsFormat", op.custom_options_format or None),
            ("MutatingVariableInputs", mutating),
            ("Intermediates", intermediates),
            ("BuiltinOptions2Type", schema.BUILTIN_OPTIONS2_CODES[op.builtin_options2.type_name] if options2 else None),
            ("BuiltinOptions2", options2),
        ]
        return self.table(_module("Operator"), "Operator", fields)

    def options(self, opts: Options | None) -> int | None:
        if opts is None:
            return None
        module = schema.generated_module(opts.type_name)
        values = []
        for f in schema.option_fields(opts.type_name):
            value = getattr(opts, f.name)
            if value is None or f.kind == "table":
                continue
            if f.kind == "vector":
                value = self.numbers(value, schema.numpy_element_type(f.element))
            elif f.kind == "string":
                value = self.string(value)
            values.append((f.camel, value))
        return self.table(module, opts.type_name, values)
