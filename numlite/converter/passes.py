"""Clean-up passes on the converter graph form, before lowering.

- :func:`inline_calls`: PartitionedCall / StatefulPartitionedCall bodies spliced into their
  callers (after fusion has had its chance to claim composite functions).
- :func:`remove_identities`: Identity and friends replaced by their input.
- :func:`fold_shapes`: Shape/Size/Rank of statically shaped values become constants.
- :func:`fold_constants`: every node whose inputs are all constants is evaluated by TensorFlow
  itself (one session run per graph), so the folded values are TF's own.
- :func:`specialize_calls`: constant arguments of control flow are moved into the callee, where
  they fold further, instead of being passed at run time.
- :func:`prune`: dead nodes removed (side-effecting nodes and what they read are kept).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from numlite.converter.graph import FuncRef, Graph, Node, Value

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
IDENTITY_OPS = frozenset({"Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics",
                          "EnsureShape", "DebugIdentity", "PlaceholderWithDefault"})
IF_OPS = frozenset({"If", "StatelessIf"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
CONTROL_FLOW_OPS = IF_OPS | WHILE_OPS | CASE_OPS | {"For"}

# Nodes kept by pruning even when nothing reads their outputs.
SIDE_EFFECT_OPS = frozenset({
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "ResourceScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub",
})
# Ops that are dropped outright: checks and markers with no effect on results.
DROPPED_OPS = frozenset({"NoOp", "Assert", "Print", "PrintV2"})

# Nodes never evaluated at conversion time even with constant inputs.
_UNFOLDABLE = frozenset({
    "Placeholder", "Const", "VarHandleOp", "ReadVariableOp", "RandomUniform", "RandomStandardNormal",
    "RandomUniformInt", "TruncatedNormal", "Multinomial", "RandomShuffle", "StatelessRandomUniformV2",
    "StatelessRandomNormalV2", "StatelessRandomUniformIntV2", "StatelessRandomGetKeyCounter",
    "RngReadAndSkip", "RngBitGenerator", "Timestamp",
}) | CALL_OPS | CONTROL_FLOW_OPS | SIDE_EFFECT_OPS | DROPPED_OPS


def inline_calls(graph: Graph, keep: Callable[[FuncRef], bool] = lambda ref: False) -> None:
    """Splice every call's body into its caller, in this graph and every graph it calls.

    ``keep(ref)`` may claim a call (a fusion does) so that it stays a call.
    """
    for g in graph.walk():
        k = 0
        while k < len(g.nodes):  # spliced bodies are scanned in turn, so nested calls go too
            node = g.nodes[k]
            ref = node.attrs.get("f")
            if node.op in CALL_OPS and isinstance(ref, FuncRef) and ref.graph is not None and not keep(ref):
                _splice(g, node, ref.graph, node.inputs)
            else:
                k += 1


def remove_identities(graph: Graph) -> None:
    """Replace Identity-like nodes (and IdentityN) by their inputs everywhere."""
    for g in graph.walk():
        mapping: dict[Value, Value] = {}
        for node in g.nodes:
            if node.op in IDENTITY_OPS and node.inputs:
                mapping[node.outputs[0]] = node.inputs[0]
            elif node.op == "IdentityN":
                mapping.update(zip(node.outputs, node.inputs))
        g.substitute(mapping)
        g.nodes = [n for n in g.nodes if not (n.op in IDENTITY_OPS and n.inputs or n.op == "IdentityN")]


def fold_shapes(graph: Graph) -> None:
    """Shape, ShapeN, Size and Rank of values with static shapes become constants."""
    for g in graph.walk():
        mapping: dict[Value, Value] = {}
        nodes: list[Node] = []
        for node in g.nodes:
            values = _shape_facts(node)
            if values is None:
                nodes.append(node)
                continue
            for v, array in zip(node.outputs, values):
                c = g.make_const(array, node.name if v.index == 0 else f"{node.name}_{v.index}", v.dtype)
                nodes.append(c.node)
                mapping[v] = c
        g.nodes = nodes
        g.substitute(mapping)


def _shape_facts(node: Node) -> list[np.ndarray] | None:
    if node.op == "Rank" and node.inputs[0].shape is not None:
        return [np.array(len(node.inputs[0].shape), np.int32)]
    if node.op not in ("Shape", "ShapeN", "Size") or not all(_static(v) for v in node.inputs):
        return None
    dtype = node.outputs[0].dtype
    if node.op == "Size":
        return [np.array(int(np.prod(node.inputs[0].shape)), dtype)]
    return [np.array(v.shape, dtype) for v in node.inputs]


def _static(v: Value) -> bool:
    return v.is_static and v.dtype not in ("variant", "resource")


def fold_constants(graph: Graph, evaluate: Callable[[Graph, list[Node], list[Value]], list[np.ndarray]],
                   max_bytes: int = 1 << 20) -> None:
    """Evaluate, in every graph, the nodes whose inputs are all constants.

    ``evaluate(graph, nodes, values)`` runs ``nodes`` (in order) and returns the requested
    values; the converter passes TensorFlow's own evaluator. A node is not folded when its
    result would be larger than both its inputs and ``max_bytes`` (a Fill of a big shape stays
    a FILL instead of bloating the file).
    """
    for g in graph.walk():
        constant: set[Node] = set()
        folded: list[Node] = []
        for node in g.nodes:
            if node.op == "Const":
                constant.add(node)
            elif (node.op not in _UNFOLDABLE and node.source is not None and node.inputs and all(v.node in constant for v in node.inputs)
                  and all(v.dtype not in ("resource", "variant") for v in node.outputs)
                  and not _grows(node, max_bytes)):
                constant.add(node)
                folded.append(node)
        if not folded:
            continue
        users = g.consumers()
        outputs = set(g.outputs)
        wanted = [v for n in folded for v in n.outputs
                  if v in outputs or any(u not in constant for u in users.get(v, []))]
        if not wanted:
            continue
        results = evaluate(g, folded, wanted)
        mapping: dict[Value, Value] = {}
        new_consts: dict[Node, list[Node]] = {}
        for v, array in zip(wanted, results):
            c = g.make_const(np.asarray(array), v.name.replace(":", "_") if v.index else v.node.name, v.dtype)
            mapping[v] = c
            new_consts.setdefault(v.node, []).append(c.node)
        g.substitute(mapping)
        nodes: list[Node] = []
        for node in g.nodes:  # each folded result takes the place of the node that made it
            nodes.extend(new_consts.get(node, [node]))
        g.nodes = nodes


def _grows(node: Node, max_bytes: int) -> bool:
    out = 0
    for v in node.outputs:
        if not v.is_static:
            return False
        out += int(np.prod(v.shape)) * _itemsize(v.dtype)
    into = sum(v.const.nbytes for v in node.inputs if v.const is not None)
    return out > max(into, max_bytes)


def _itemsize(dtype: str) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return 8


def specialize_calls(graph: Graph) -> bool:
    """Simplify control flow on what is known at conversion time: an If or Case on a constant
    becomes the branch taken, inlined; constant arguments of If/Case (any) and While
    (loop-invariant ones) move into the callees. Returns True if anything changed."""
    changed = False
    for g in list(graph.walk()):
        for node in list(g.nodes):
            taken = _branch_taken(node)
            if taken is not None:
                _splice(g, node, taken, node.inputs[1:])
                changed = True
            elif node.op in IF_OPS or node.op in CASE_OPS:
                changed |= _specialize_branches(node)
            elif node.op in WHILE_OPS:
                changed |= _specialize_loop(g, node)
    return changed


def _branch_taken(node: Node) -> Graph | None:
    """The branch an If/Case on a constant takes (an out-of-range Case index takes the last)."""
    if not (node.op in IF_OPS or node.op in CASE_OPS) or node.inputs[0].const is None:
        return None
    value = node.inputs[0].const
    if node.op in IF_OPS:
        if value.size != 1:
            return None
        return node.attrs["then_branch" if bool(value.reshape(())) else "else_branch"].graph
    branches = node.attrs["branches"]
    index = int(value)
    return branches[index if 0 <= index < len(branches) else -1].graph


def _splice(g: Graph, node: Node, callee: Graph, args: list[Value]) -> None:
    """Replace ``node`` in ``g`` by ``callee``'s nodes, its arguments bound to ``args``."""
    bound = dict(zip(callee.inputs, args))
    taken = {n.name for n in g.nodes}
    clash = any(inner.name in taken for inner in callee.nodes)
    for inner in callee.nodes:
        if clash:  # names stay TF's own unless they would be ambiguous in the caller
            inner.name = f"{node.name}/{inner.name}"
        inner.inputs = [bound.get(v, v) for v in inner.inputs]
    at = g.nodes.index(node)
    g.nodes[at:at + 1] = callee.nodes
    g.substitute(dict(zip(node.outputs, (bound.get(v, v) for v in callee.outputs))))
    for other in g.nodes:
        if node in other.control_inputs:
            other.control_inputs = [c for c in other.control_inputs if c is not node]


def _specialize_branches(node: Node) -> bool:
    branches = [f.graph for f in node.functions()]
    if any(b is None for b in branches):
        return False
    keep = [i for i, v in enumerate(node.inputs[1:]) if v.const is None]
    if len(keep) == len(node.inputs) - 1:
        return False
    for b in branches:
        _bind_consts(b, {i: node.inputs[1 + i] for i in range(len(node.inputs) - 1) if i not in keep})
        b.inputs = [b.inputs[i] for i in keep]
    node.inputs = [node.inputs[0]] + [node.inputs[1 + i] for i in keep]
    _drop_list_attr(node, "Tin", keep)
    return True


def _specialize_loop(g: Graph, node: Node) -> bool:
    cond, body = node.attrs["cond"].graph, node.attrs["body"].graph
    if cond is None or body is None:
        return False
    invariant = {i for i, v in enumerate(node.inputs)
                 if v.const is not None and body.outputs[i] is body.inputs[i]}
    if not invariant:
        return False
    for callee in (cond, body):
        _bind_consts(callee, {i: node.inputs[i] for i in invariant})
    g.substitute({node.outputs[i]: node.inputs[i] for i in invariant})
    _keep_loop_variables(node, [i for i in range(len(node.inputs)) if i not in invariant])
    return True


def _keep_loop_variables(node: Node, keep: list[int]) -> None:
    """Reduce a While (its inputs, outputs, attributes, and its cond's and body's arguments and
    the body's results) to the loop variables at positions ``keep``."""
    cond, body = node.attrs["cond"].graph, node.attrs["body"].graph
    for callee in (cond, body):
        callee.inputs = [callee.inputs[i] for i in keep]
    body.outputs = [body.outputs[i] for i in keep]
    node.inputs = [node.inputs[i] for i in keep]
    node.outputs = [node.outputs[i] for i in keep]
    for k, v in enumerate(node.outputs):
        v.index = k
    for attr in ("T", "output_shapes"):
        _drop_list_attr(node, attr, keep)


def _bind_consts(callee: Graph, consts: dict[int, Value]) -> None:
    mapping = {}
    for i, v in consts.items():
        c = callee.make_const(v.const, f"{callee.name}/{callee.inputs[i].node.name}", v.dtype)
        callee.nodes.insert(0, c.node)
        mapping[callee.inputs[i]] = c
    callee.substitute(mapping)


def _drop_list_attr(node: Node, attr: str, keep: list[int]) -> None:
    if isinstance(node.attrs.get(attr), list):
        node.attrs[attr] = [node.attrs[attr][i] for i in keep]


def remove_dead_loop_variables(graph: Graph) -> bool:
    """Drop While loop variables that nothing observes: unused after the loop, unread by the
    condition, and feeding nothing in the body but their own next value (the iteration counter
    TF adds to every while_loop, typically). Returns True if any was dropped."""
    changed = False
    effects = _graphs_with_side_effects(graph)
    for g in list(graph.walk()):
        users = g.consumers()
        outputs = set(g.outputs)
        for node in g.nodes:
            if node.op not in WHILE_OPS or node.attrs["cond"].graph is None or node.attrs["body"].graph is None:
                continue
            cond, body = node.attrs["cond"].graph, node.attrs["body"].graph
            cond_reads = _live_values(cond, cond.outputs, effects)
            dead = [k for k, out in enumerate(node.outputs)
                    if out not in outputs and not users.get(out) and cond.inputs[k] not in cond_reads
                    and body.inputs[k] not in _live_values(body, body.outputs[:k] + body.outputs[k + 1:], effects)]
            if dead:
                _keep_loop_variables(node, [k for k in range(len(node.inputs)) if k not in dead])
                changed = True
    return changed


def _live_values(g: Graph, roots: list[Value], effects: set[int]) -> set[Value]:
    """Every value that ``roots`` or the graph's side effects depend on."""
    live: set[Value] = set(roots)
    stack = [v.node for v in roots]
    stack += [n for n in g.nodes if n.op in SIDE_EFFECT_OPS
              or any(f.graph is not None and id(f.graph) in effects for f in n.functions())]
    seen: set[Node] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        live.update(node.inputs)
        stack.extend(v.node for v in node.inputs)
        stack.extend(node.control_inputs)
    return live


def prune(graph: Graph) -> None:
    """Remove nodes nothing needs, in every graph; side-effecting nodes count as needed, and so
    do control flow and calls whose callees have side effects."""
    effects = _graphs_with_side_effects(graph)
    for g in graph.walk():
        live: set[Node] = set()
        stack = [v.node for v in g.outputs]
        stack += [n for n in g.nodes if n.op in SIDE_EFFECT_OPS
                  or any(f.graph is not None and id(f.graph) in effects for f in n.functions())]
        while stack:
            node = stack.pop()
            if node in live:
                continue
            live.add(node)
            stack.extend(v.node for v in node.inputs)
            stack.extend(node.control_inputs)
        g.nodes = [n for n in g.nodes if n in live and n.op not in DROPPED_OPS]
        kept = set(g.nodes)
        for n in g.nodes:
            n.control_inputs = [c for c in n.control_inputs if c in kept]


def _graphs_with_side_effects(graph: Graph) -> set[int]:
    """ids of the graphs that assign variables, directly or through what they call."""
    graphs = list(graph.walk())
    effects = {id(g) for g in graphs if any(n.op in SIDE_EFFECT_OPS for n in g.nodes)}
    changed = True
    while changed:
        changed = False
        for g in graphs:
            if id(g) not in effects and any(
                    f.graph is not None and id(f.graph) in effects for n in g.nodes for f in n.functions()):
                effects.add(id(g))
                changed = True
    return effects
