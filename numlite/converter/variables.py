"""Resource variables: which ones the program assigns, and freezing the others into constants.

The official converter's idea, done over the whole program: a variable that no node assigns,
directly or inside any branch, loop body or callee, is read-only and each read of it becomes a
constant. A variable that is assigned stays a variable (VAR_HANDLE / READ_VARIABLE /
ASSIGN_VARIABLE in the model, initialised by a CALL_ONCE subgraph) so state survives invokes.
"""

from __future__ import annotations

import numpy as np

from numlite.converter.graph import Graph, Value, call_arguments
from numlite.converter.lowering import Variable
from numlite.converter.passes import SIDE_EFFECT_OPS, WHILE_OPS


def trace_resources(graph: Graph, roots: dict[Value, Variable]) -> dict[Value, Variable]:
    """Follow resource values from ``roots`` into every function they are passed to.

    Returns, for every resource value of the program that refers to a known variable, that
    variable (loop results that pass a resource through refer to the same one).
    """
    resources = dict(roots)
    for g in graph.walk():  # callers are visited before their callees
        for node in g.nodes:
            if node.op == "VarHandleOp" and "value" in node.attrs:
                resources[node.outputs[0]] = node.attrs["value"]
            passed = call_arguments(node)
            for callee in (f.graph for f in node.functions() if f.graph is not None):
                for arg, value in zip(callee.inputs, passed):
                    if value in resources:
                        resources[arg] = resources[value]
            if node.op in WHILE_OPS:
                for out, value in zip(node.outputs, node.inputs):
                    if value in resources:
                        resources[out] = resources[value]
    return resources


def shape_variable_reads(graph: Graph, resources: dict[Value, Variable]) -> None:
    """Give every read of a known variable the variable's shape (and so, after shape
    inference, what is computed from it). A SavedModel's functions are stored without the
    shapes of their variables, so a read comes back with an unknown shape; a fusion that
    checks its weights' shapes (tf_keras's LSTM) needs them before calls are inlined."""
    for g in graph.walk():
        for node in g.nodes:
            variable = resources.get(node.inputs[0]) if node.op == "ReadVariableOp" and node.inputs else None
            if variable is not None:
                known, actual = node.outputs[0].shape, tuple(np.shape(variable.value))
                if known is None or (len(known) == len(actual) and all(k in (None, a) for k, a in zip(known, actual))):
                    node.outputs[0].shape = actual


def assigned_variables(graph: Graph, resources: dict[Value, Variable]) -> set[int]:
    """ids of the variables some node of the program writes."""
    return {id(resources[n.inputs[0]]) for g in graph.walk() for n in g.nodes
            if n.op in SIDE_EFFECT_OPS and n.inputs and n.inputs[0] in resources}


def freeze_read_only(graph: Graph, resources: dict[Value, Variable], mutable: set[int] | None = None) -> int:
    """Replace every read of a variable nothing assigns by a constant; returns how many.

    ``mutable`` (ids of variables) defaults to those this graph assigns; pass the set for the
    whole program when several signatures share variables.
    """
    if mutable is None:
        mutable = assigned_variables(graph, resources)
    frozen = 0
    for g in graph.walk():
        for node in list(g.nodes):
            variable = resources.get(node.inputs[0]) if node.inputs else None
            if variable is None or id(variable) in mutable:
                continue
            if node.op == "ReadVariableOp":
                value = np.asarray(variable.value).astype(node.outputs[0].dtype)
                node.op, node.inputs, node.control_inputs = "Const", [], []
                node.attrs = {"value": value, "dtype": node.outputs[0].dtype}
                node.outputs[0].shape = tuple(value.shape)  # TF may not have known it
                node.source = None
                frozen += 1
            elif node.op == "ResourceGather":
                params = g.make_const(variable.value, f"{node.name}/params", node.attrs["dtype"])
                axis = g.make_const(np.array(0, np.int32), f"{node.name}/axis")
                g.nodes[g.nodes.index(node):g.nodes.index(node)] = [params.node, axis.node]
                node.op = "GatherV2"
                node.inputs = [params, node.inputs[1], axis]
                node.attrs = {"batch_dims": node.attrs.get("batch_dims", 0)}
                node.source = None
                frozen += 1
    return frozen
