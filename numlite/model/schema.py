"""Facts about the TFLite schema, read once from the ``tflite`` flatbuffer bindings.

Everything else in numlite speaks in plain names ("CONV_2D", "Conv2DOptions", ``np.float32``);
this module is the one place that knows the schema's numeric codes and generated classes.
Option tables are handled generically: their fields, kinds and defaults are discovered by
reflection over the generated code, so every option type in the schema reads and writes
without a hand-written case per op.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
import tflite

# ----------------------------------------------------------------------------- enums


def _enum_names(cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


# Codes of LiteRT's schema (2.3) that the ``tflite`` bindings (2.18) do not name yet; their
# option tables live in numlite.model.generated. A code neither knows reads as
# "UNKNOWN_BUILTIN_<code>", which the verifier refuses (ModelError naming the operator code).
_NEWER_OPERATORS = {209: "STABLEHLO_CASE"}
_NEWER_OPTIONS2 = {23: "StablehloCaseOptions"}

BUILTIN_OPERATOR_NAMES: dict[int, str] = {**_NEWER_OPERATORS, **_enum_names(tflite.BuiltinOperator)}
BUILTIN_OPERATOR_CODES: dict[str, int] = {v: k for k, v in BUILTIN_OPERATOR_NAMES.items()}
BUILTIN_OPTIONS_NAMES: dict[int, str] = _enum_names(tflite.BuiltinOptions)
BUILTIN_OPTIONS_CODES: dict[str, int] = {v: k for k, v in BUILTIN_OPTIONS_NAMES.items()}
BUILTIN_OPTIONS2_NAMES: dict[int, str] = {**_NEWER_OPTIONS2, **_enum_names(tflite.BuiltinOptions2)}
BUILTIN_OPTIONS2_CODES: dict[str, int] = {v: k for k, v in BUILTIN_OPTIONS2_NAMES.items()}
TENSOR_TYPE_NAMES: dict[int, str] = _enum_names(tflite.TensorType)
TENSOR_TYPE_CODES: dict[str, int] = {v: k for k, v in TENSOR_TYPE_NAMES.items()}
ACTIVATION_NAMES: dict[int, str] = _enum_names(tflite.ActivationFunctionType)
PADDING_NAMES: dict[int, str] = _enum_names(tflite.Padding)

# The deprecated int8 builtin_code field can only hold codes below this value.
PLACEHOLDER_FOR_GREATER_OP_CODES = 127

# Tensor types as NumPy dtypes. RESOURCE and VARIANT hold handles, STRING holds bytes objects;
# INT4 is stored packed in int8 buffers. BFLOAT16 has no NumPy dtype and is left out.
_DTYPES: dict[str, Any] = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "FLOAT64": np.float64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "BOOL": np.bool_,
    "COMPLEX64": np.complex64,
    "COMPLEX128": np.complex128,
    "STRING": np.object_,
    "RESOURCE": np.int32,
    "VARIANT": np.object_,
    "INT4": np.int8,
}


def numpy_type(type_name: str) -> type:
    """The NumPy scalar type (``np.float32``...) that holds elements of a TFLite tensor type."""
    try:
        return _DTYPES[type_name]
    except KeyError:
        raise NotImplementedError(f"tensor type {type_name} has no NumPy equivalent") from None


def type_name_of(dtype: Any) -> str:
    """The TFLite tensor type name for a NumPy dtype (inverse of :func:`numpy_type`)."""
    dtype = np.dtype(dtype)
    for name, t in _DTYPES.items():
        if np.dtype(t) == dtype and name not in ("RESOURCE", "VARIANT", "INT4"):
            return name
    raise NotImplementedError(f"NumPy dtype {dtype} has no TFLite tensor type")


# ----------------------------------------------------------------------------- option tables


@dataclass(frozen=True)
class OptionField:
    """One field of an options table, as the generated bindings describe it."""

    name: str  # snake_case, as numlite exposes it
    camel: str  # CamelCase, as the generated accessor and Add function spell it
    kind: str  # "scalar", "vector", "string" or "table"
    element: str | None  # flatbuffers number type for scalars and vectors ("Int32", "Bool", ...)
    default: Any


_SNAKE_1 = re.compile(r"(.)([A-Z][a-z]+)")
_SNAKE_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(camel: str) -> str:
    """``DilationWFactor`` -> ``dilation_w_factor``."""
    return _SNAKE_2.sub(r"\1_\2", _SNAKE_1.sub(r"\1_\2", camel)).lower()


UNKNOWN_BUILTIN = "UNKNOWN_BUILTIN_"  # how the reader names a code no schema here knows


@functools.cache
def generated_module(type_name: str):
    """The generated module of a schema table (``tflite.Conv2DOptions``, ``tflite.Buffer``;
    tables newer than the ``tflite`` package from ``numlite.model.generated``)."""
    if type_name in _NEWER_OPTIONS2.values():
        return importlib.import_module(f"numlite.model.generated.{type_name}")
    return importlib.import_module(f"tflite.{type_name}")


@functools.cache
def option_fields(type_name: str) -> tuple[OptionField, ...]:
    """The fields of options table ``type_name`` in schema order, with their defaults."""
    module = generated_module(type_name)
    cls = getattr(module, type_name)
    prefix = f"{type_name}Add"
    camels = [n[len(prefix):] for n in vars(module) if n.startswith(prefix)]
    empty = _empty_table(cls, module, type_name)
    fields = []
    for camel in camels:
        source = inspect.getsource(getattr(cls, camel))
        number = re.search(r"number_types\.(\w+)Flags", source.replace("UOffsetTFlags", ""))
        element = number.group(1) if number else None
        if hasattr(module, f"{type_name}Start{camel}Vector"):
            kind, default = ("vector", None) if element else ("table", None)
        elif "self._tab.String(" in source:
            kind, default = "string", None
        elif "Indirect" in source:
            kind, default = "table", None
        else:
            kind, default = "scalar", getattr(empty, camel)()
        fields.append(OptionField(snake_case(camel), camel, kind, element, default))
    return tuple(fields)


def _empty_table(cls, module, type_name):
    builder = flatbuffers.Builder(16)
    getattr(module, f"{type_name}Start")(builder)
    builder.Finish(getattr(module, f"{type_name}End")(builder))
    return cls.GetRootAs(builder.Output(), 0)


def numpy_element_type(element: str) -> type:
    """NumPy type of a flatbuffers number type name ("Int32" -> np.int32)."""
    return {"Bool": np.bool_, "Float32": np.float32, "Float64": np.float64}.get(
        element, getattr(np, element.lower(), None)
    )


# Builtin operators whose options table is not simply "<CamelCaseName>Options".
_OPTIONS_OF_OP: dict[str, str | None] = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "LOG_SOFTMAX": "LogSoftmaxOptions",
    "CONCATENATION": "ConcatenationOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "LSTM": "LSTMOptions",
    "RNN": "RNNOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "TOPK_V2": "TopKV2Options",
    "SELECT_V2": "SelectV2Options",
    "WHERE": "WhereOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "IF": "IfOptions",
    "WHILE": "WhileOptions",
    "CALL_ONCE": "CallOnceOptions",
    "VAR_HANDLE": "VarHandleOptions",
    "READ_VARIABLE": "ReadVariableOptions",
    "ASSIGN_VARIABLE": "AssignVariableOptions",
    "FLOOR_DIV": "FloorDivOptions",
    "FLOOR_MOD": "FloorModOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions",
    "MIRROR_PAD": "MirrorPadOptions",
    "SPLIT_V": "SplitVOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "GATHER_ND": "GatherNdOptions",
    "SCATTER_ND": "ScatterNdOptions",
    "DYNAMIC_UPDATE_SLICE": "DynamicUpdateSliceOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "EMBEDDING_LOOKUP": None,
    "CONV_3D": "Conv3DOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "RANDOM_UNIFORM": "RandomOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions",
    "MULTINOMIAL": "RandomOptions",
    "SVDF": "SVDFOptions",
    "LSH_PROJECTION": "LSHProjectionOptions",
}


def options_type_for_op(op_name: str) -> str | None:
    """The options table an operator uses (None if it has none).

    Used by writers that build operators from scratch; a model read from a file keeps the
    option type it was written with.
    """
    if op_name in _OPTIONS_OF_OP:
        return _OPTIONS_OF_OP[op_name]
    guess = "".join(part.capitalize() for part in op_name.split("_")) + "Options"
    return guess if guess in BUILTIN_OPTIONS_CODES else None
