"""Small edits of a model that post-training quantization makes: who reads which tensor, new
constant tensors, DEQUANTIZE operators, operator versions. TensorFlow-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numlite.model import schema
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Quantization, Subgraph, Tensor


@dataclass(frozen=True)
class Use:
    """Operator ``op`` (position ``node`` in its subgraph) reads the tensor at input ``slot``."""

    op: Operator
    node: int
    slot: int


def uses(sg: Subgraph) -> dict[int, list[Use]]:
    """Every tensor's readers, in execution order."""
    found: dict[int, list[Use]] = {}
    for node, op in enumerate(sg.operators):
        for slot, t in enumerate(op.inputs):
            if t >= 0:
                found.setdefault(t, []).append(Use(op, node, slot))
    return found


def float_constant(model: Model, sg: Subgraph, index: int) -> np.ndarray | None:
    """The value of a dense FLOAT32 constant tensor, or None for anything else (activations,
    variables, sparse or already quantized tensors, subgraph inputs and outputs)."""
    t = sg.tensors[index]
    if (t.type != "FLOAT32" or t.is_variable or t.sparsity is not None or index in sg.inputs
            or index in sg.outputs or (t.quantization is not None and not t.quantization.is_empty())):
        return None
    return model.constant(sg, index)


def add_constant(model: Model, sg: Subgraph, value: np.ndarray, name: str,
                 quantization: Quantization | None = None) -> int:
    """A new constant tensor holding ``value`` (its own buffer); returns its index."""
    data = np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)
    model.buffers.append(Buffer(data))
    sg.tensors.append(Tensor(name, tuple(value.shape), schema.type_name_of(value.dtype),
                             buffer=len(model.buffers) - 1, quantization=quantization))
    return len(sg.tensors) - 1


def set_data(model: Model, tensor: Tensor, value: np.ndarray) -> None:
    """Point ``tensor`` at a new buffer holding ``value`` (its old buffer may serve others)."""
    model.buffers.append(Buffer(np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)))
    tensor.buffer = len(model.buffers) - 1
    tensor.type = schema.type_name_of(value.dtype)


def add_activation(sg: Subgraph, like: Tensor, name: str, type_name: str,
                   quantization: Quantization | None = None) -> int:
    """A new computed tensor of ``like``'s shape with another type; returns its index."""
    sg.tensors.append(Tensor(name, like.shape, type_name, quantization=quantization,
                             shape_signature=like.shape_signature, has_rank=like.has_rank))
    return len(sg.tensors) - 1


def opcode(model: Model, name: str, version: int = 1) -> int:
    """The index of builtin ``name``'s operator code, added if missing, its version raised to
    at least ``version`` (one code serves every operator of the type, as in the official
    converter's files: a version only tells LiteRT which kernel features the file needs)."""
    for k, code in enumerate(model.operator_codes):
        if code.builtin == name and code.custom_code is None:
            code.version = max(code.version, version)
            return k
    model.operator_codes.append(OperatorCode(name, version=version))
    return len(model.operator_codes) - 1


def require_version(model: Model, op: Operator, version: int) -> None:
    """Raise the version of ``op``'s operator code to at least ``version``."""
    code = model.operator_codes[op.opcode_index]
    code.version = max(code.version, version)


def dequantize_op(model: Model, source: int, target: int, version: int) -> Operator:
    """A DEQUANTIZE operator reading tensor ``source`` and writing ``target``."""
    return Operator(opcode(model, "DEQUANTIZE", version), [source], [target])


def constant_bytes(model: Model) -> int:
    """The bytes of every constant tensor's data (each buffer once)."""
    used = {t.buffer for sg in model.subgraphs for t in sg.tensors}
    return sum(len(model.buffers[b]) for b in used if 0 < b < len(model.buffers))


def kib(n: int) -> str:
    """A byte count for the report."""
    return f"{n / 1024:,.1f} KiB"
