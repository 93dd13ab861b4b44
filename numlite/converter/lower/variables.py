"""Variables the program assigns: reads and writes through VAR_HANDLE by shared name.

Read-only variables never get here: the converter froze them into constants before lowering.

A VarHandleOp of a variable the function creates itself (not one it captures, nor one of a TF1
graph, whose initial value the importer knows) has no initial value: it becomes a
:class:`LocalVariable`, opened by its shared name like the others but left out of the
variable initializer, so that reading it before an assignment fails as in TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lowering import SubgraphLowering, Variable, tflite_type


@dataclass(eq=False)
class LocalVariable(Variable):
    """A variable without an initial value: its type and shape come from its VarHandleOp."""

    type: str = "FLOAT32"
    shape: tuple[int, ...] | None = None


def _handle(cx: SubgraphLowering, variable: Variable) -> TensorRef:
    """The variable's VAR_HANDLE in this subgraph; a local variable stays out of the
    program's initialized variables (it has no value to start from)."""
    handle = cx.var_handle(variable)
    if isinstance(variable, LocalVariable):
        cx.program.variables.pop(variable.name, None)
    return handle


def _read(cx: SubgraphLowering, node: Node, name: str, shape=None):
    variable = cx.variable(node, 0)
    if isinstance(variable, LocalVariable):
        stored_shape, stored_type = variable.shape, variable.type
    else:
        stored_shape, stored_type = variable.value.shape, _type(variable.value)
    spec = cx.spec(name, stored_shape if shape is None else shape, cx.out(node).type if node.outputs else stored_type)
    return cx.emit1("READ_VARIABLE", [_handle(cx, variable)], spec, fold=False)


def _type(value: np.ndarray) -> str:
    from numlite.model import schema

    return schema.type_name_of(value.dtype)


@lowers("ReadVariableOp")
def read_variable(cx: SubgraphLowering, node: Node):
    return [_read(cx, node, node.name, shape=cx.out(node).shape)]


@lowers("AssignVariableOp")
def assign_variable(cx: SubgraphLowering, node: Node):
    handle = _handle(cx, cx.variable(node, 0))
    cx.emit("ASSIGN_VARIABLE", [handle, cx.input(node, 1)], [], fold=False)
    return []


@lowers("AssignAddVariableOp", "AssignSubVariableOp")
def assign_update(cx: SubgraphLowering, node: Node):
    variable = cx.variable(node, 0)
    current = _read(cx, node, f"{node.name}/read")
    op = "ADD" if node.op == "AssignAddVariableOp" else "SUB"
    updated = cx.emit1(op, [current, cx.input(node, 1)], cx.spec(f"{node.name}/value", current.shape, current.type))
    cx.emit("ASSIGN_VARIABLE", [_handle(cx, variable), updated], [], fold=False)
    return []


@lowers("ResourceGather")
def resource_gather(cx: SubgraphLowering, node: Node):
    params = _read(cx, node, f"{node.name}/params")
    if node.attrs.get("batch_dims", 0):
        raise cx.fail(node, "batch_dims is not supported")
    return [cx.emit1("GATHER", [params, cx.input(node, 1)], cx.out(node), axis=0)]


@lowers("VarHandleOp")
def var_handle(cx: SubgraphLowering, node: Node):
    """The variable the handle refers to: a known one, or the function's own (local) one."""
    output = node.outputs[0]
    if output in cx.env or output in cx.program.resources:
        return [cx.value(output)]
    shape = node.attrs.get("shape")
    known = shape is not None and all(d is not None and d >= 0 for d in shape)
    return [LocalVariable(str(node.attrs.get("shared_name") or node.name), None, tflite_type(node.attrs["dtype"]),
                          tuple(shape) if known else None)]


@lowers("VarIsInitializedOp")
def var_is_initialized(cx: SubgraphLowering, node: Node):
    """True for a variable with an initial value; whether a local one is assigned yet is only
    known at run time."""
    if isinstance(cx.variable(node, 0), LocalVariable):
        raise cx.fail(node, "whether a variable the function creates is initialized is only known at run time")
    return [cx.const(np.array(True), node.name)]
