"""Check a model before anything is allocated for it.

numlite runs models it did not write, so every model is checked when it is read, in two passes,
and anything wrong raises :class:`~numlite.ModelError` naming the place (subgraph, node, tensor,
buffer), never an IndexError, struct.error or MemoryError from deeper down:

- :func:`verify_flatbuffer` checks the raw bytes, as ``flatbuffers::Verifier`` does for LiteRT
  (the ``flatbuffers`` Python package has no verifier): every table, vtable, vector and string
  reachable from the root lies inside the buffer and is aligned, strings are NUL-terminated,
  union types are known, and the offset/size fields of large models (buffers and custom options
  stored after the flatbuffer) stay inside the file. The walk is driven by the generated
  ``tflite`` bindings, so it follows the schema without a hand-written table per type.
- :func:`verify_model` checks what the bytes mean: every tensor, buffer, subgraph and opcode
  index in range, operator codes known, constant buffers exactly as large as their tensors'
  shapes and types say, shapes small enough that a forged one cannot ask for huge memory,
  quantization and sparsity parameters consistent, no subgraph that ends up calling itself,
  signatures that name real tensors of real subgraphs.

The limits are module constants: raise them for unusually large models, or lower them (e.g.
``numlite.model.verifier.MAX_TENSOR_BYTES = 2**28``) to run untrusted models in little memory.
They bound the shapes the model declares, not those kernels compute from data at run time.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from numlite.errors import ModelError
from numlite.model import schema
from numlite.model.ir import Model, Subgraph, Tensor

# --------------------------------------------------------------------------------- limits

MAX_RANK = 32
"""Dimensions of a tensor: NumPy 1.x arrays have at most 32 (TFLite kernels use at most 6)."""

MAX_TENSOR_ELEMENTS = 2**31
"""Elements of one tensor: TFLite counts elements in int32-sized fields on most paths."""

MAX_TENSOR_BYTES = 4 * 2**30
"""Bytes of one tensor (4 GiB): far above any real model's largest activation or weight."""

MAX_SUBGRAPH_BYTES = 16 * 2**30
"""Bytes of all tensors of one subgraph that are not constants (16 GiB): what allocation could
ask for at most, before the arena planner shares memory between them."""

MAX_CALL_DEPTH = 32
"""How deeply control-flow ops (IF, WHILE, CALL_ONCE...) may nest subgraph calls; each level
costs Python stack frames in the runtime."""

MAX_FLATBUFFER_DEPTH = 64
"""Nesting of flatbuffer tables (the default of ``flatbuffers::Verifier``)."""

MAX_FLATBUFFER_TABLES = 1_000_000
"""Tables visited in one flatbuffer (the default of ``flatbuffers::Verifier``). A file is also
limited to one table per 4 bytes, which only a file that shares tables between parents (no
TFLite writer does) can exceed: sharing is how a small file would make the reader build a huge
model."""


# ============================================================================ flatbuffer structure

_SCALAR_SIZES = {
    "Bool": 1, "Int8": 1, "Uint8": 1, "Int16": 2, "Uint16": 2, "Int32": 4, "Uint32": 4,
    "Int64": 8, "Uint64": 8, "Float32": 4, "Float64": 8,
}  # fmt: skip

# Union fields of the schema and the enum that names their table types.
_UNION_ENUMS = {
    ("Operator", "BuiltinOptions"): "BuiltinOptions",
    ("Operator", "BuiltinOptions2"): "BuiltinOptions2",
    ("QuantizationParameters", "Details"): "QuantizationDetails",
    ("DimensionMetadata", "ArraySegments"): "SparseIndexVector",
    ("DimensionMetadata", "ArrayIndices"): "SparseIndexVector",
}

# (offset field, size field) pairs addressing bytes after the flatbuffer, by table type.
_EXTERNAL_RANGES = {
    "Buffer": ("Offset", "Size"),
    "Operator": ("LargeCustomOptionsOffset", "LargeCustomOptionsSize"),
}


@dataclass(frozen=True)
class _Field:
    """One field of a schema table, as the verifier walks it."""

    name: str  # CamelCase, as the bindings spell it
    slot: int  # position in the vtable
    kind: str  # scalar, string, table, union, vector (of scalars), tables, strings
    size: int  # bytes of a scalar, or of one vector element
    target: str | None = None  # table type (table, tables) or union enum name (union)
    type_slot: int = -1  # union: the slot of its type field


@functools.cache
def _layout(type_name: str) -> tuple[_Field, ...]:
    """The fields of schema table ``type_name``, read from its generated module."""
    module = schema.generated_module(type_name)
    cls = getattr(module, type_name)
    prefix = f"{type_name}Add"
    fields: list[_Field] = []
    slots: dict[str, int] = {}
    for fn_name, fn in vars(module).items():
        if not fn_name.startswith(prefix) or not callable(fn):
            continue
        camel = fn_name[len(prefix):]
        m = re.search(r"Prepend(\w+?)Slot\((\d+)", inspect.getsource(fn))
        if m is None:
            raise RuntimeError(f"unexpected generated code for {fn_name}")  # a bindings change
        prim, slot = m.group(1), int(m.group(2))
        slots[camel] = slot
        if prim != "UOffsetTRelative":
            fields.append(_Field(camel, slot, "scalar", _SCALAR_SIZES[prim]))
            continue
        source = inspect.getsource(getattr(cls, camel))
        imported = re.search(r"from tflite\.(\w+) import", source)
        target = imported.group(1) if imported else None
        if "_tab.Union(" in source:
            fields.append(_Field(camel, slot, "union", 4, _UNION_ENUMS[(type_name, camel)]))
        elif "_tab.Vector(" in source:
            if "Indirect" in source:
                fields.append(_Field(camel, slot, "tables", 4, target))
            elif "_tab.String(" in source:
                fields.append(_Field(camel, slot, "strings", 4))
            else:
                start = inspect.getsource(getattr(module, f"{type_name}Start{camel}Vector"))
                element = int(re.search(r"StartVector\((\d+),", start).group(1))
                fields.append(_Field(camel, slot, "vector", element))
        elif "_tab.String(" in source:
            fields.append(_Field(camel, slot, "string", 4))
        else:
            fields.append(_Field(camel, slot, "table", 4, target))
    # A union's value is read together with its type field, named "<Union>Type".
    return tuple(
        _Field(f.name, f.slot, f.kind, f.size, f.target, slots[f.name + "Type"]) if f.kind == "union" else f
        for f in sorted(fields, key=lambda f: f.slot)
    )


@functools.cache
def _union_members(enum: str) -> dict[int, str]:
    if enum == "BuiltinOptions2":  # with the members newer than the tflite bindings
        return {k: v for k, v in schema.BUILTIN_OPTIONS2_NAMES.items() if k != 0}
    cls = getattr(importlib.import_module(f"tflite.{enum}"), enum)
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int) and v != 0}


_U8 = struct.Struct("<B").unpack_from
_U16 = struct.Struct("<H").unpack_from
_U16x2 = struct.Struct("<HH").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_UNSIGNED = {1: _U8, 2: _U16, 4: _U32, 8: _U64}


def _where(path: tuple) -> str:
    """The dotted place of a (parent, FieldName, index) chain: ``subgraphs[0].tensors[3].shape``."""
    parts = []
    while path:
        path, name, index = path
        name = schema.snake_case(name)
        parts.append(name if index is None else f"{name}[{index}]")
    return ".".join(reversed(parts)) or "root"


def verify_flatbuffer(data: Any, source: str = "model content") -> None:
    """Check the flatbuffer structure of a ``.tflite`` file's bytes (see the module docstring)."""
    _FlatbufferWalk(data, source).run()


class _FlatbufferWalk:
    def __init__(self, data: Any, source: str) -> None:
        self.data = data
        self.size = len(data)
        self.source = source
        self.tables = 0
        self.max_tables = min(MAX_FLATBUFFER_TABLES, self.size // 4 + 1)

    def fail(self, path: tuple, message: str) -> ModelError:
        return ModelError(f"{self.source}: malformed TFLite flatbuffer at {_where(path)}: {message}")

    def run(self) -> None:
        if self.size < 8:
            raise self.fail((), f"{self.size} bytes is too short")
        stack = [(self.offset(0, ()), "Model", (), 1)]
        while stack:
            pos, type_name, path, depth = stack.pop()
            self.table(pos, type_name, path, depth, stack)

    def offset(self, pos: int, path: tuple) -> int:
        """Follow the unsigned 32-bit offset stored at ``pos``."""
        if pos % 4 or pos + 4 > self.size:
            raise self.fail(path, f"offset field at byte {pos} is misaligned or outside the buffer")
        o = _U32(self.data, pos)[0]
        if o == 0 or o >= 2**31 or pos + o + 4 > self.size:
            raise self.fail(path, f"offset {o} at byte {pos} points outside the {self.size}-byte buffer")
        return pos + o

    def vector(self, pos: int, element: int, path: tuple) -> int:
        """Check a vector of ``element``-byte items at ``pos``; returns its length."""
        if pos % 4:
            raise self.fail(path, f"vector at byte {pos} is misaligned")
        n = _U32(self.data, pos)[0]
        if pos + 4 + n * element > self.size:
            raise self.fail(path, f"vector of {n} {element}-byte elements at byte {pos} runs past the end of the buffer")
        return n

    def string(self, pos: int, path: tuple) -> None:
        n = self.vector(pos, 1, path)
        end = pos + 4 + n
        if end >= self.size or self.data[end] != 0:
            raise self.fail(path, f"string at byte {pos} is not NUL-terminated inside the buffer")

    def table(self, pos: int, type_name: str, path: tuple, depth: int, stack: list) -> None:
        if depth > MAX_FLATBUFFER_DEPTH:
            raise self.fail(path, f"tables nested deeper than {MAX_FLATBUFFER_DEPTH}")
        self.tables += 1
        if self.tables > self.max_tables:
            raise self.fail(path, f"more than {self.max_tables} tables in {self.size} bytes (tables shared between parents?)")
        data, size = self.data, self.size
        if pos % 4 or pos + 4 > size:
            raise self.fail(path, f"{type_name} table at byte {pos} is misaligned or outside the buffer")
        vtable = pos - _I32(data, pos)[0]
        if vtable < 0 or vtable % 2 or vtable + 4 > size:
            raise self.fail(path, f"{type_name} table at byte {pos} has its vtable outside the buffer (byte {vtable})")
        vsize, tsize = _U16x2(data, vtable)
        if vsize < 4 or vsize % 2 or vtable + vsize > size or pos + tsize > size:
            raise self.fail(path, f"{type_name} table at byte {pos} has an invalid vtable (sizes {vsize}, {tsize})")

        def field_pos(slot: int) -> int:
            v = 4 + 2 * slot
            return 0 if v >= vsize else _U16(data, vtable + v)[0]

        for f in _layout(type_name):
            fo = field_pos(f.slot)
            if fo == 0:
                continue
            fpos = pos + fo
            width = f.size if f.kind == "scalar" else 4
            if fpos + width > size or fpos % width:
                raise self.fail((path, f.name, None), f"field at byte {fpos} is misaligned or outside the buffer")
            if f.kind == "scalar":
                continue
            fpath = (path, f.name, None)
            target = self.offset(fpos, fpath)
            if f.kind == "string":
                self.string(target, fpath)
            elif f.kind == "table":
                stack.append((target, f.target, fpath, depth + 1))
            elif f.kind == "vector":
                self.vector(target, f.size, fpath)
            elif f.kind == "union":
                to = field_pos(f.type_slot)
                kind = _U8(data, pos + to)[0] if to and pos + to < size else 0
                if kind == 0:
                    continue
                member = _union_members(f.target).get(kind)
                if member is None:
                    raise self.fail(fpath, f"unknown {f.target} type {kind}")
                stack.append((target, member, fpath, depth + 1))
            else:  # vectors of tables or strings
                n = self.vector(target, 4, fpath)
                for i in range(n):
                    element = self.offset(target + 4 + 4 * i, (path, f.name, i))
                    if f.kind == "tables":
                        stack.append((element, f.target, (path, f.name, i), depth + 1))
                    else:
                        self.string(element, (path, f.name, i))

        external = _EXTERNAL_RANGES.get(type_name)
        if external is not None:
            values = []
            for name in external:
                f = next(f for f in _layout(type_name) if f.name == name)
                fo = field_pos(f.slot)
                values.append(_UNSIGNED[f.size](data, pos + fo)[0] if fo else 0)
            offset, length = values
            if offset > 1 and offset + length > size:
                raise self.fail(path, f"data at file offset {offset} of {length} bytes lies outside the {size}-byte file")


# ============================================================================ model semantics

# Tensor types whose elements are Python objects (or handles) rather than fixed-size numbers.
_NON_NUMERIC = ("STRING", "RESOURCE", "VARIANT")


def _itemsize(type_name: str) -> int:
    """Bytes per element of a tensor type, for the memory bounds."""
    if type_name in _NON_NUMERIC:
        return 8  # a pointer per element
    try:
        return np.dtype(schema.numpy_type(type_name)).itemsize
    except NotImplementedError:
        return 2 if type_name == "BFLOAT16" else 1


def verify_model(model: Model, file_size: int | None = None) -> None:
    """Check that a model is consistent and bounded before anything is allocated for it.

    ``file_size`` is the size of the file the model was read from, if any: no buffer can be
    larger. Raises :class:`~numlite.ModelError` naming the first problem found.
    """
    try:
        _verify(model, file_size)
    except ModelError:
        raise
    except (TypeError, ValueError, AttributeError, IndexError, KeyError, OverflowError) as e:
        # Only a model built by hand with values of the wrong kind gets here.
        raise ModelError(f"malformed model: {type(e).__name__}: {e}") from e


def _verify(model: Model, file_size: int | None) -> None:
    if not model.subgraphs:
        raise ModelError("the model has no subgraphs")
    for i, code in enumerate(model.operator_codes):
        if code.builtin not in schema.BUILTIN_OPERATOR_CODES:
            raise ModelError(f"operator code {i}: unknown builtin operator {code.builtin}")
        if code.builtin == "CUSTOM" and not code.custom_code:
            raise ModelError(f"operator code {i}: a CUSTOM operator without a custom code")
    if file_size is not None:
        for b, buffer in enumerate(model.buffers):
            if len(buffer) > file_size:
                raise ModelError(f"buffer {b} has {len(buffer)} bytes, more than the {file_size}-byte file")
    # Metadata buffer indices are not checked: LiteRT runs models whose metadata points nowhere,
    # and numlite only reads metadata to display it (guarded there).
    for s, sg in enumerate(model.subgraphs):
        _verify_subgraph(model, s, sg)
    verify_subgraph_calls(model)
    for sig in model.signature_defs:
        where = f"signature {sig.key!r}"
        if not 0 <= sig.subgraph_index < len(model.subgraphs):
            raise ModelError(f"{where} refers to subgraph {sig.subgraph_index}, but the model has {len(model.subgraphs)}")
        n = len(model.subgraphs[sig.subgraph_index].tensors)
        for kind, names in (("input", sig.inputs), ("output", sig.outputs)):
            for name, i in names.items():
                if not 0 <= i < n:
                    raise ModelError(
                        f"{where}: {kind} {name!r} refers to tensor {i}, but subgraph {sig.subgraph_index} has {n} tensors"
                    )


def _verify_subgraph(model: Model, s: int, sg: Subgraph) -> None:
    n = len(sg.tensors)

    def check(indices: list[int], what: str, optional: bool = False) -> None:
        for i in indices:
            if not (0 <= i < n or (optional and i == -1)):
                raise ModelError(f"subgraph {s}: {what} refers to tensor {i}, but the subgraph has {n} tensors")

    check(sg.inputs, "input list")
    check(sg.outputs, "output list")
    total = 0
    for i, t in enumerate(sg.tensors):
        total += _verify_tensor(model, s, i, t)
    if total > MAX_SUBGRAPH_BYTES:
        raise ModelError(
            f"subgraph {s}: its tensors computed at run time need {total} bytes, more than numlite's limit of"
            f" {MAX_SUBGRAPH_BYTES} (numlite.model.verifier.MAX_SUBGRAPH_BYTES)"
        )
    n_codes = len(model.operator_codes)
    for node, op in enumerate(sg.operators):
        if not 0 <= op.opcode_index < n_codes:
            raise ModelError(f"subgraph {s}, node {node}: opcode index {op.opcode_index} out of range (the model has {n_codes})")
        where = f"node {node} ({model.operator_codes[op.opcode_index].name})"
        # -1 marks an omitted optional tensor; LiteRT accepts it among outputs and
        # intermediates too (CheckTensorIndices), and kernels reject it where it is required.
        check(op.inputs, f"{where} input", optional=True)
        check(op.outputs, f"{where} output", optional=True)
        check(op.intermediates, f"{where} intermediate", optional=True)
        both = (set(op.inputs) & set(op.outputs)) - {-1}
        if both:
            i = min(both)
            raise ModelError(f"subgraph {s}, {where}: tensor {i} ({sg.tensors[i].name!r}) is both an input and an output")
        # A constant's data is the model's, read in place: LiteRT's kernels would write into the
        # model itself, its XNNPACK delegate rejects the node, the engines would differ.
        for i in op.outputs:
            t = sg.tensors[i] if i >= 0 else None
            if t is not None and not t.is_variable and t.type not in ("RESOURCE", "VARIANT") and len(model.buffers[t.buffer]):
                raise ModelError(
                    f"subgraph {s}, {where}: output tensor {i} ({t.name!r}) is a constant (buffer {t.buffer} holds its data)"
                )


def _verify_tensor(model: Model, s: int, i: int, t: Tensor) -> int:
    """Check one tensor; returns the bytes it needs at run time (0 for a constant)."""
    where = f"subgraph {s}, tensor {i} ({t.name!r})"
    n_buffers = len(model.buffers)
    if not 0 <= t.buffer < max(n_buffers, 1):
        raise ModelError(f"{where} refers to buffer {t.buffer}, but the model has {n_buffers}")
    if t.type not in schema.TENSOR_TYPE_CODES:
        raise ModelError(f"{where} has unknown type {t.type}")
    shape = tuple(t.shape)
    for what, dims in (("shape", shape), ("shape signature", t.shape_signature or ())):
        if len(dims) > MAX_RANK:
            raise ModelError(f"{where}: {what} has {len(dims)} dimensions, more than numlite's limit of {MAX_RANK}")
        if any(d < -1 for d in dims):
            raise ModelError(f"{where} has invalid {what} {tuple(dims)}")
    # An unknown (-1) dimension counts as 1: the shape the runtime starts from.
    elements = math.prod(d if d >= 0 else 1 for d in shape)
    itemsize = _itemsize(t.type)
    if elements > MAX_TENSOR_ELEMENTS:
        raise ModelError(
            f"{where}: shape {shape} has {elements} elements, more than numlite's limit of {MAX_TENSOR_ELEMENTS}"
            " (numlite.model.verifier.MAX_TENSOR_ELEMENTS)"
        )
    nbytes = elements * itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise ModelError(
            f"{where}: shape {shape} of {t.type} needs {nbytes} bytes, more than numlite's limit of {MAX_TENSOR_BYTES}"
            " (numlite.model.verifier.MAX_TENSOR_BYTES)"
        )
    _verify_quantization(where, t, shape)
    size = len(model.buffers[t.buffer]) if t.buffer < n_buffers else 0
    if size == 0:
        return nbytes
    data = model.buffers[t.buffer].data
    what = f"{where}: buffer {t.buffer}"
    if t.type == "STRING":
        _verify_strings(what, data, elements if -1 not in shape else None)
    elif t.type in ("RESOURCE", "VARIANT"):
        pass  # handles: their buffers are not read
    else:
        try:
            dtype = np.dtype(schema.numpy_type(t.type))
        except NotImplementedError:
            raise ModelError(f"{what}: constant data of type {t.type}, which numlite cannot represent") from None
        if t.sparsity is not None:
            if size % dtype.itemsize:
                raise ModelError(f"{what} has {size} bytes, not a whole number of {t.type} elements")
            _verify_sparsity(where, t, shape, size // dtype.itemsize)
        else:
            if -1 in shape:
                raise ModelError(f"{where}: a constant tensor with an unknown dimension in shape {shape}")
            expected = {elements * dtype.itemsize}
            if t.type == "INT4":
                expected.add((elements + 1) // 2)  # packed two to a byte
            if size not in expected:
                raise ModelError(
                    f"{what} has {size} bytes, but shape {shape} of {t.type} needs {min(expected)}"
                )
    return nbytes if t.is_variable else 0


def _verify_quantization(where: str, t: Tensor, shape: tuple[int, ...]) -> None:
    """LiteRT's checks when it parses quantization (InterpreterBuilder::ParseQuantization)."""
    q = t.quantization
    if q is None:
        return
    scales = 0 if q.scale is None else len(q.scale)
    zero_points = 0 if q.zero_point is None else len(q.zero_point)
    if scales == 0:
        return  # not quantized
    if q.zero_point is None:
        raise ModelError(f"{where}: quantization has {scales} scales but no zero points")
    if scales != zero_points:
        raise ModelError(f"{where}: quantization has {scales} scales but {zero_points} zero points")
    if scales > 1 and shape:
        qd = q.quantized_dimension
        if not 0 <= qd < len(shape):
            raise ModelError(f"{where}: quantized dimension {qd} is outside its rank-{len(shape)} shape")
        if shape[qd] >= 0 and shape[qd] != scales:
            raise ModelError(
                f"{where}: {scales} per-channel scales, but dimension {qd} of shape {shape} has {shape[qd]} channels"
            )


def _verify_strings(what: str, data: np.ndarray, elements: int | None) -> None:
    """A STRING buffer: int32 count n, n + 1 int32 offsets from the buffer start, the bytes."""
    size = len(data)
    if size < 4:
        raise ModelError(f"{what}: a {size}-byte STRING buffer has no string count")
    n = int(np.frombuffer(data[:4].tobytes(), "<i4")[0])
    if n < 0 or 4 * (n + 2) > size:
        raise ModelError(f"{what}: STRING buffer of {size} bytes cannot hold {n} strings")
    if elements is not None and n != elements:
        raise ModelError(f"{what}: STRING buffer holds {n} strings, the tensor's shape has {elements} elements")
    offsets = np.frombuffer(data[4 : 4 * (n + 2)].tobytes(), "<i4").astype(np.int64)
    if offsets[0] != 4 * (n + 2) or np.any(np.diff(offsets) < 0) or offsets[-1] > size:
        raise ModelError(f"{what}: STRING buffer has string offsets outside its {size} bytes")


def _verify_sparsity(where: str, t: Tensor, shape: tuple[int, ...], stored: int) -> None:
    """Bound what densifying a sparse constant would compute, level by level."""
    sp = t.sparsity
    rank = len(shape)
    if -1 in shape:
        raise ModelError(f"{where}: a sparse tensor with an unknown dimension in shape {shape}")
    levels = len(sp.traversal_order)
    if len(sp.dim_metadata) != levels or levels != rank + len(sp.block_map):
        raise ModelError(
            f"{where}: sparsity has {levels} traversal levels, {len(sp.dim_metadata)} dimension metadata and"
            f" {len(sp.block_map)} block dimensions, which do not fit its rank-{rank} shape"
        )
    if any(not 0 <= d < levels for d in sp.traversal_order) or any(not 0 <= d < rank for d in sp.block_map):
        raise ModelError(f"{where}: sparsity traversal order or block map names a dimension out of range")
    dense = max(math.prod(shape), 1)
    count = 1  # positions reached so far; never more than the dense tensor has elements
    for level, md in enumerate(sp.dim_metadata):
        if md.format == "DENSE":
            if md.dense_size < 0:
                raise ModelError(f"{where}: sparsity level {level} has negative dense size {md.dense_size}")
            count *= md.dense_size
        else:
            if md.array_segments is None or md.array_indices is None:
                raise ModelError(f"{where}: sparse level {level} lacks its segments or indices")
            segments = np.asarray(md.array_segments, np.int64)
            if len(segments) and (segments[0] < 0 or np.any(np.diff(segments) < 0) or segments[-1] > len(md.array_indices)):
                raise ModelError(f"{where}: sparse level {level} has segments that are not an increasing range of its indices")
            count = min(count, len(md.array_indices)) if count else 0
        if count > dense:
            raise ModelError(f"{where}: sparsity level {level} addresses {count} positions in a {dense}-element tensor")


def subgraph_calls(model: Model) -> dict[int, list[tuple[int, str, int]]]:
    """For each subgraph, the subgraphs its operators call: (node, op, callee) triples.

    Calls are read from every option field named ``*_subgraph_index`` (IF, WHILE, CALL_ONCE...)
    or ``*_subgraph_indices`` (STABLEHLO_CASE).
    """
    calls: dict[int, list[tuple[int, str, int]]] = {s: [] for s in range(len(model.subgraphs))}
    for s, n, op in model.iter_operators():
        for options in (op.builtin_options, op.builtin_options2):
            if options is None:
                continue
            for field, value in options.fields().items():
                if field.endswith("subgraph_index"):
                    calls[s].append((n, model.op_name(op), int(value)))
                elif field.endswith("subgraph_indices") and value is not None:  # STABLEHLO_CASE's branches
                    calls[s].extend((n, model.op_name(op), int(v)) for v in value)
    return calls


def verify_subgraph_calls(model: Model) -> None:
    """Reject calls to subgraphs that do not exist, call cycles (a subgraph that would end up
    invoking itself) and nesting deeper than ``MAX_CALL_DEPTH``, naming the nodes involved.

    Calls are read from every option field named ``*_subgraph_index`` (IF, WHILE, CALL_ONCE...).
    """
    count = len(model.subgraphs)
    by_subgraph = subgraph_calls(model)
    calls = [by_subgraph[s] for s in range(count)]
    for s, targets in enumerate(calls):
        for n, op, callee in targets:
            if not 0 <= callee < count:
                raise ModelError(f"subgraph {s}, node {n} ({op}) calls subgraph {callee}, but the model has {count}")
    # Depth-first search without recursion: a forged chain of subgraphs must not overflow
    # Python's stack here. ``height`` is the longest call chain below each finished subgraph.
    height: dict[int, int] = {}
    for root in range(count):
        if root in height:
            continue
        path: list[tuple[int, int]] = [(root, 0)]  # (subgraph, next call to look at)
        on_path = {root}
        while path:
            s, k = path[-1]
            if k < len(calls[s]):
                path[-1] = (s, k + 1)
                callee = calls[s][k][2]
                if callee in on_path:
                    start = next(p for p, (a, _) in enumerate(path) if a == callee)
                    steps = []
                    for a, j in path[start:]:  # the call each subgraph on the cycle is making
                        node, op, target = calls[a][j - 1]
                        steps.append(f"subgraph {a} node {node} ({op}) -> subgraph {target}")
                    raise ModelError("subgraph calls form a cycle: " + "; ".join(steps))
                if callee not in height:
                    if len(path) > MAX_CALL_DEPTH:
                        raise ModelError(
                            f"subgraph calls nest deeper than {MAX_CALL_DEPTH} levels (from subgraph {path[0][0]})"
                        )
                    path.append((callee, 0))
                    on_path.add(callee)
                continue
            height[s] = max((height[c] + 1 for _, _, c in calls[s]), default=0)
            if height[s] > MAX_CALL_DEPTH:
                raise ModelError(f"subgraph calls nest deeper than {MAX_CALL_DEPTH} levels (from subgraph {s})")
            path.pop()
            on_path.discard(s)


