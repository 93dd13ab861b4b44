"""TF1 control flow raised to functional If and While.

TensorFlow 1 (and TensorFlow 2 with control flow v2 disabled) writes ``tf.cond`` and
``tf.while_loop`` into one graph as dataflow primitives: Switch sends a value down one of two
outputs, Merge forwards whichever input arrives, and a loop is a *frame* entered through Enter,
iterated through Merge/Switch/NextIteration under a LoopCond and left through Exit. TFLite has
only functional IF and WHILE, so this module finds those structures again and rebuilds them as
If and While nodes whose branches, condition and body are graphs of their own.

*Loops* come from frame analysis: every node runs in a frame (Enter opens a child frame named by
its ``frame_name``, Exit returns to the parent, every other node runs where its inputs live).
Each frame directly under the graph's top level is one loop: its Merges fed by an Enter are the
loop variables, the LoopCond's input is the condition, the NextIterations' inputs are the next
values, and constant Enters are loop invariants, passed through the body unchanged. Everything
in the frame, nested frames included, is copied into the condition and body graphs, which are
then raised in turn: nesting is recursion.

*Conds* come from a liveness analysis over the (now loop-free) top level: the value a Switch
sends down output ``b`` is live only when its predicate ``p`` is ``b``, which we record as the
assumption ``(p, b)``; a node's assumptions are the union of its inputs'; a Merge whose inputs
hold ``(p, 0)`` and ``(p, 1)`` closes the cond on ``p`` and drops that assumption. The Merges
that close a cond at the top level (no assumption left) become one If; the nodes assuming
``(p, b)`` that they read form branch ``b``; the values they read from outside (what the Switches
were given, or anything else) become the If's arguments. Branches are raised in turn.

Loop-variable shapes are found as TensorFlow finds them: start from the values entering the loop,
infer the body, and relax every dimension the body changes, until nothing changes.

``tf.TensorArray`` ops (handle plus a scalar "flow" that orders them) are first rewritten into the
TensorList ops that TF2 uses, the flow becoming the list itself, so that the existing tensor list
lowering turns them into plain tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from numlite.converter.graph import FuncRef, Graph, Node, Shape, Value
from numlite.converter.importer import infer_shapes, make_node, set_type_attr
from numlite.converter.passes import prune
from numlite.errors import ConversionError

SWITCH = frozenset({"Switch", "RefSwitch"})
MERGE = frozenset({"Merge", "RefMerge"})
ENTER = frozenset({"Enter", "RefEnter"})
EXIT = frozenset({"Exit", "RefExit"})
NEXT_ITERATION = frozenset({"NextIteration", "RefNextIteration"})
V1_CONTROL_FLOW_OPS = SWITCH | MERGE | ENTER | EXIT | NEXT_ITERATION | {"LoopCond"}
# Ops a TensorArray flow (or a predicate) passes through unchanged.
_FORWARDING = ENTER | EXIT | NEXT_ITERATION | SWITCH | MERGE | {"Identity", "RefIdentity"}
_MAX_SHAPE_ROUNDS = 6


def uses_v1_control_flow(graph: Graph) -> bool:
    """Whether any graph of the program holds TF1 control flow or TensorArrays to rewrite."""
    return any(_needs_raising(g) for g in graph.walk())


def _needs_raising(g: Graph) -> bool:
    return any(n.op in V1_CONTROL_FLOW_OPS or n.op.startswith("TensorArray") for n in g.nodes)


def raise_control_flow(graph: Graph) -> None:
    """Rewrite every Switch/Merge/Enter/Exit/NextIteration/LoopCond structure of ``graph`` (and
    of the graphs it calls) into If and While nodes; TensorArrays become tensor lists. Raises
    :class:`ConversionError` naming the nodes of any structure that cannot be raised."""
    for g in list(graph.walk()):
        if _needs_raising(g):
            tensor_arrays_to_lists(g)
            prune(g)
            _raise(g)
    prune(graph)
    left = [f"{n.name} ({n.op})" for g in graph.walk() for n in g.nodes if n.op in V1_CONTROL_FLOW_OPS]
    if left:
        raise ConversionError("TF1 control flow that is not a cond or a while loop cannot be raised: "
                              + ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else ""))


def _raise(g: Graph) -> None:
    """Raise the loops directly in ``g``, then its conds (branches and bodies recursively)."""
    infer_shapes(g)
    while True:
        frames = _frames(g)
        loop = next((f for f in frames.values() if f.parent is _ROOT), None)
        if loop is None:
            break
        _raise_loop(g, loop, frames)
        infer_shapes(g)
    while _raise_next_cond(g):
        infer_shapes(g)


# -- frames ------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Frame:
    name: str
    parent: _Frame | None

    def within(self, other: _Frame) -> bool:
        frame: _Frame | None = self
        while frame is not None:
            if frame is other:
                return True
            frame = frame.parent
        return False

    def __repr__(self) -> str:
        return "the top level" if self.parent is None else f"loop frame {self.name!r}"


_ROOT = _Frame("", None)


def _frames(g: Graph) -> dict[Node, _Frame]:
    """The frame each node runs in (an Enter runs in the frame it opens, an Exit in the frame it
    leaves). Raises if a node reads values from two frames."""
    frame: dict[Node, _Frame] = {}
    children: dict[tuple[int, str], _Frame] = {}
    members = set(g.nodes)

    def out_frame(node: Node) -> _Frame | None:
        if node not in members:
            return _ROOT  # an argument of the graph
        f = frame.get(node)
        return f.parent if f is not None and node.op in EXIT else f

    def frame_of(node: Node) -> _Frame | None:
        sources = [s for s in [v.node for v in node.inputs] + node.control_inputs if not _free(s)]
        known = [out_frame(s) for s in sources if out_frame(s) is not None]
        if sources and not known:
            return None
        if node.op in ENTER:
            parent = known[0] if known else _ROOT
            key = (id(parent), str(node.attrs.get("frame_name", "")))
            if key not in children:
                children[key] = _Frame(key[1], parent)
            return children[key]
        return known[0] if known else _ROOT

    pending = list(g.nodes)
    while pending:
        progress = []
        for node in pending:
            f = frame_of(node)
            if f is not None:
                frame[node] = f
                progress.append(node)
        if not progress:
            raise ConversionError(f"cannot tell which frame nodes run in: {', '.join(n.name for n in pending[:5])}")
        done = set(progress)
        pending = [n for n in pending if n not in done]

    for node in g.nodes:
        expected = frame[node].parent if node.op in ENTER else frame[node]
        for source in [v.node for v in node.inputs] + node.control_inputs:
            if not _free(source) and out_frame(source) is not expected:
                raise ConversionError(
                    f"node {node.name!r} ({node.op}) runs in {frame[node]!r} but reads {source.name!r} "
                    f"from {out_frame(source)!r}: values enter a loop only through Enter")
    return frame


# -- loops -------------------------------------------------------------------------------------


@dataclass
class _LoopVariable:
    enter: Node
    merge: Node
    switch: Node
    next_iteration: Node


def _raise_loop(g: Graph, frame: _Frame, frames: dict[Node, _Frame]) -> None:
    members = [n for n in g.nodes if frames[n].within(frame)]
    own = [n for n in members if frames[n] is frame]
    where = f"while loop {frame.name!r}"
    loop_conds = [n for n in own if n.op == "LoopCond"]
    if len(loop_conds) != 1:
        raise ConversionError(f"{where} has {len(loop_conds)} LoopCond nodes, not one: cannot raise it")
    loop_cond = loop_conds[0]
    users = g.consumers()

    variables: list[_LoopVariable] = []
    merged: set[Node] = set()
    for merge in (n for n in own if n.op in MERGE):
        enter = next((v.node for v in merge.inputs if v.node.op in ENTER), None)
        step = next((v.node for v in merge.inputs if v.node.op in NEXT_ITERATION), None)
        if enter is None:
            continue  # a cond inside the loop body
        if len(merge.inputs) != 2 or step is None:
            raise ConversionError(f"{where}: Merge {merge.name!r} joins {sorted(v.node.op for v in merge.inputs)}, not an Enter and a NextIteration")
        switch = next((u for u in users.get(merge.outputs[0], []) if u.op in SWITCH
                       and u.inputs[1] is loop_cond.outputs[0]), None)
        if switch is None:
            raise ConversionError(f"{where}: loop variable {merge.name!r} has no Switch on {loop_cond.name!r}")
        variables.append(_LoopVariable(enter, merge, switch, step))
        merged.add(enter)
    invariants = [n for n in own if n.op in ENTER and n not in merged]
    for enter in invariants:
        if not enter.attrs.get("is_constant", False):
            raise ConversionError(f"{where}: Enter {enter.name!r} is neither a loop variable nor constant")

    structure = {loop_cond, *(n for v in variables for n in (v.enter, v.merge, v.switch, v.next_iteration)), *invariants}
    exits = {}
    for node in own:
        if node.op in EXIT:
            source = node.inputs[0]
            k = next((k for k, v in enumerate(variables) if source is v.switch.outputs[0]), None)
            if k is None:
                raise ConversionError(f"{where}: Exit {node.name!r} does not leave through a loop variable's Switch")
            exits[node] = k
    structure |= set(exits)

    dtypes = [v.enter.inputs[0].dtype for v in variables] + [e.inputs[0].dtype for e in invariants]
    invariant_shapes = [e.inputs[0].shape for e in invariants]
    shapes = [v.enter.inputs[0].shape for v in variables]
    member_set = set(members)
    name = _unique(g, loop_cond.name.rsplit("/", 1)[0] if "/" in loop_cond.name else loop_cond.name)
    inside = member_set - structure
    carried = [v.merge for v in variables] + invariants

    def arguments(arg_shapes: list[Shape]) -> tuple[list[Value], dict[Value, Value]]:
        """Placeholders for the loop variables and invariants, and what they stand for."""
        args = _placeholders(carried, dtypes, arg_shapes)
        bound = {v.merge.outputs[0]: a for v, a in zip(variables, args)}
        bound.update({e.outputs[0]: a for e, a in zip(invariants, args[len(variables):])})
        return args, bound

    for _ in range(_MAX_SHAPE_ROUNDS):
        body_args, body_map = arguments(shapes + invariant_shapes)
        body_map.update({v.switch.outputs[1]: a for v, a in zip(variables, body_args)})
        # The body runs only when the condition held: a read of LoopCond there reads its input.
        aliases = {loop_cond.outputs[0]: loop_cond.inputs[0]}
        body_results = [v.next_iteration.inputs[0] for v in variables]
        body_g = _extract(g, f"{name}_body", inside, body_map, body_results, aliases, where)
        body_g.outputs += body_args[len(variables):]
        body_g.inputs = body_args
        _raise(body_g)
        relaxed = [_relax(s, out.shape) for s, out in zip(shapes, body_g.outputs)]
        if relaxed == shapes:
            break
        shapes = relaxed
    else:
        raise ConversionError(f"{where}: the shapes of its loop variables do not settle")
    cond_args, cond_map = arguments(shapes + invariant_shapes)
    cond_g = _extract(g, f"{name}_cond", inside, cond_map, [loop_cond.inputs[0]], {}, where)
    cond_g.inputs = cond_args
    _raise(cond_g)

    outputs = [(dtype, shape) for dtype, shape in zip(dtypes, shapes + invariant_shapes)]
    node = Node("While", name, {
        "cond": FuncRef(cond_g.name, {}, cond_g), "body": FuncRef(body_g.name, {}, body_g),
        "T": dtypes, "output_shapes": [s for _, s in outputs], "parallel_iterations": 10,
    }, [v.enter.inputs[0] for v in variables] + [e.inputs[0] for e in invariants])
    node.outputs = [Value(node, i, dtype, shape) for i, (dtype, shape) in enumerate(outputs)]
    _check_nothing_escapes(g, member_set, set(exits), where)
    anchor = min((g.nodes.index(e) for e in exits), default=g.nodes.index(members[0]))
    _replace(g, member_set, anchor, node, {e.outputs[0]: node.outputs[k] for e, k in exits.items()})


# -- conds -------------------------------------------------------------------------------------

_Assumption = tuple[Value, int]  # (predicate, branch): live only when the predicate is that branch


def _predicate(v: Value) -> Value:
    """A predicate with the Identities TF1 puts in front of it (``pred_id``) looked through."""
    while v.node.op in ("Identity", "RefIdentity") and v.node.inputs:
        v = v.node.inputs[0]
    return v


@dataclass
class _Liveness:
    values: dict[Value, frozenset[_Assumption]]
    nodes: dict[Node, frozenset[_Assumption]]
    closes: dict[Node, Value]  # Merge -> the predicate of the cond it closes


def _liveness(g: Graph) -> _Liveness:
    live = _Liveness({}, {}, {})
    for node in g.nodes:
        ins = [live.values.get(v, frozenset()) for v in node.inputs]
        ins += [live.nodes.get(c, frozenset()) for c in node.control_inputs]
        if node.op in MERGE:
            state = _merge_state(node, ins[:len(node.inputs)], live)
        else:
            state = frozenset().union(*ins)
            dead = {p for p, b in state if (p, 1 - b) in state}
            if dead:
                raise ConversionError(f"node {node.name!r} ({node.op}) reads both branches of the cond on "
                                      f"{next(iter(dead)).name!r}: it can never run")
        live.nodes[node] = state
        for v in node.outputs:
            live.values[v] = state
        if node.op in SWITCH:
            p = _predicate(node.inputs[1])
            for b in (0, 1):
                live.values[node.outputs[b]] = state | {(p, b)}
    return live


def _merge_state(node: Node, ins: list[frozenset], live: _Liveness) -> frozenset:
    if len(ins) != 2:
        raise ConversionError(f"Merge {node.name!r} joins {len(ins)} values: only two-way conds can be raised")
    closed = {p for p, b in ins[0] if (p, 1 - b) in ins[1]}
    if len(closed) != 1:
        raise ConversionError(f"Merge {node.name!r} does not join the two branches of one cond "
                              f"(its inputs {node.inputs[0].name} and {node.inputs[1].name})")
    p = closed.pop()
    live.closes[node] = p
    return (ins[0] | ins[1]) - {(p, 0), (p, 1)}


def _raise_next_cond(g: Graph) -> bool:
    """Raise one outermost cond of ``g`` (all its Merges that need no other of them); False if
    ``g`` has none left."""
    live = _liveness(g)
    outer = [m for m, p in live.closes.items() if not live.nodes[m]]
    if not outer:
        return False
    p = live.closes[outer[0]]
    group = [m for m in outer if live.closes[m] is p]
    group = [m for m in group if not (_ancestors(m) & (set(group) - {m}))]
    _raise_cond(g, p, group, live)
    return True


def _ancestors(node: Node) -> set[Node]:
    seen: set[Node] = set()
    stack = [v.node for v in node.inputs] + list(node.control_inputs)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(v.node for v in n.inputs)
            stack.extend(n.control_inputs)
    return seen


def _raise_cond(g: Graph, p: Value, merges: list[Node], live: _Liveness) -> None:
    where = f"cond on {p.name!r} (Merge {merges[0].name!r})"
    if p.dtype != "bool":
        raise ConversionError(f"{where}: the predicate is {p.dtype}, not bool")
    graph_args: list[Value] = []  # the values the If passes in
    branch_members: list[set[Node]] = []
    results: list[list[Value]] = []
    for b in (0, 1):
        outs = []
        for m in merges:
            k = next(i for i, v in enumerate(m.inputs) if (p, b) in live.values[v])
            outs.append(m.inputs[k])
        members = _branch_members(outs, p, b, live)
        for node in sorted(members, key=g.nodes.index):
            for v in node.inputs:
                outer = _outer_value(v, members, p, b)
                if outer is not None and outer not in graph_args:
                    graph_args.append(outer)
        for v in outs:
            outer = _outer_value(v, members, p, b)
            if outer is not None and outer not in graph_args:
                graph_args.append(outer)
        branch_members.append(members)
        results.append(outs)

    name = _unique(g, merges[0].name.rsplit("/", 1)[0] if "/" in merges[0].name else merges[0].name)
    branches = []
    for b, suffix in ((1, "true"), (0, "false")):
        members = branch_members[b]
        args = _placeholders([v.node for v in graph_args], [v.dtype for v in graph_args], [v.shape for v in graph_args],
                             names=[f"{name}/{suffix}/arg{i}" for i in range(len(graph_args))])
        mapping = {}
        by_outer = dict(zip(graph_args, args))
        for node in members:
            for v in node.inputs:
                outer = _outer_value(v, members, p, b)
                if outer is not None:
                    mapping[v] = by_outer[outer]
        for v in results[b]:
            outer = _outer_value(v, members, p, b)
            if outer is not None:
                mapping[v] = by_outer[outer]
        branch = _extract(g, f"{name}_{suffix}", members, mapping, results[b], {}, where)
        branch.inputs = args
        _raise(branch)
        branches.append(branch)
    then_g, else_g = branches

    shapes = [_relax(t.shape, e.shape) for t, e in zip(then_g.outputs, else_g.outputs)]
    dtypes = [m.outputs[0].dtype for m in merges]
    node = Node("If", name, {
        "then_branch": FuncRef(then_g.name, {}, then_g), "else_branch": FuncRef(else_g.name, {}, else_g),
        "Tcond": "bool", "Tin": [v.dtype for v in graph_args], "Tout": dtypes, "output_shapes": shapes,
    }, [p, *graph_args])
    node.outputs = [Value(node, i, dtype, shape) for i, (dtype, shape) in enumerate(zip(dtypes, shapes))]
    inside = branch_members[0] | branch_members[1]
    users = g.consumers()
    for m in merges:
        if users.get(m.outputs[1]):
            raise ConversionError(f"{where}: the branch index output of {m.name!r} is used; it cannot be raised")
    _check_nothing_escapes(g, inside | set(merges), set(merges), where)
    anchor = min(g.nodes.index(m) for m in merges)
    _replace(g, inside | set(merges), anchor, node, {m.outputs[0]: node.outputs[i] for i, m in enumerate(merges)})


def _branch_members(outs: list[Value], p: Value, b: int, live: _Liveness) -> set[Node]:
    """The nodes of branch ``b`` of the cond on ``p`` that its results need."""
    members: set[Node] = set()
    stack = [v.node for v in outs]
    while stack:
        node = stack.pop()
        if node in members or (p, b) not in live.nodes.get(node, frozenset()):
            continue
        members.add(node)
        stack.extend(v.node for v in node.inputs)
        stack.extend(node.control_inputs)
    return members


def _outer_value(v: Value, members: set[Node], p: Value, b: int) -> Value | None:
    """What the If passes in for ``v`` when a branch reads it (None: computed in the branch)."""
    if v.node in members or _free(v.node):
        return None
    if v.node.op in SWITCH and v.index == b and _predicate(v.node.inputs[1]) is p:
        return v.node.inputs[0]
    return v


# -- shared ------------------------------------------------------------------------------------


def _placeholders(nodes: list[Node], dtypes: list[str], shapes: list[Shape], names: list[str] | None = None) -> list[Value]:
    values = []
    for i, (node, dtype, shape) in enumerate(zip(nodes, dtypes, shapes)):
        p = Node("Placeholder", names[i] if names else node.name, {"dtype": dtype, "shape": shape}, [])
        p.outputs = [Value(p, 0, dtype, shape)]
        values.append(p.outputs[0])
    return values


def _extract(g: Graph, name: str, allowed: set[Node], mapping: dict[Value, Value], outputs: list[Value],
             aliases: dict[Value, Value], where: str) -> Graph:
    """A new graph computing ``outputs`` from copies of the nodes in ``allowed`` they need;
    ``mapping`` binds outside values (to the new graph's arguments). Copies keep ``g``'s order."""
    def resolve(v: Value) -> Value:
        return aliases.get(v, v)

    needed: set[Node] = set()
    stack = [resolve(v).node for v in outputs if resolve(v) not in mapping]
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        if node not in allowed and not _free(node):
            raise ConversionError(f"{where}: it reads {node.name!r} ({node.op}), which is not part of it "
                                  f"(values enter a loop through Enter, a branch through Switch)")
        needed.add(node)
        stack.extend(resolve(v).node for v in node.inputs if resolve(v) not in mapping)
        stack.extend(c for c in node.control_inputs if c in allowed)

    graph = Graph(name)
    copies: dict[Value, Value] = dict(mapping)
    order = [n for n in g.nodes if n in needed]
    clones = {}
    for node in order:
        clone = Node(node.op, node.name, dict(node.attrs), [], source=node.source)
        clone.outputs = [Value(clone, v.index, v.dtype, v.shape) for v in node.outputs]
        copies.update(zip(node.outputs, clone.outputs))
        clones[node] = clone
        graph.nodes.append(clone)
    for node in order:
        clones[node].inputs = [copies[resolve(v)] for v in node.inputs]
        clones[node].control_inputs = [clones[c] for c in node.control_inputs if c in clones]
    graph.outputs = [copies[resolve(v)] for v in outputs]
    return graph


def _free(node: Node) -> bool:
    """A constant with no inputs at all: valid in any frame or branch, copied where needed."""
    return node.op == "Const" and not node.inputs and not node.control_inputs


def _check_nothing_escapes(g: Graph, inside: set[Node], leaving: set[Node], where: str) -> None:
    for node in g.nodes:
        if node in inside:
            continue
        for v in node.inputs:
            if v.node in inside and v.node not in leaving:
                raise ConversionError(f"{where}: {node.name!r} reads {v.name}, computed inside it")
    for v in g.outputs:
        if v.node in inside and v.node not in leaving:
            raise ConversionError(f"{where}: the graph's result {v.name} is computed inside it")


def _replace(g: Graph, removed: set[Node], anchor: int, node: Node, results: dict[Value, Value]) -> None:
    """Replace the ``removed`` nodes by ``node``, placed where ``g.nodes[anchor]`` was."""
    before = [n for n in g.nodes[:anchor] if n not in removed]
    after = [n for n in g.nodes[anchor:] if n not in removed]
    g.nodes = before + [node] + after
    g.substitute(results)
    for other in g.nodes:
        other.control_inputs = [c for c in other.control_inputs if c not in removed]


def _unique(g: Graph, name: str) -> str:
    taken = {n.name for n in g.nodes}
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    return candidate


def _relax(a: Shape, b: Shape) -> Shape:
    """The most precise shape both ``a`` and ``b`` have."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


# -- TensorArrays ------------------------------------------------------------------------------


def tensor_arrays_to_lists(g: Graph) -> None:
    """Rewrite TensorArrayV3 ops into tensor list ops: the list travels where the flow went."""
    creators = [n for n in g.nodes if n.op == "TensorArrayV3"]
    if not creators:
        return
    mapping: dict[Value, Value] = {}
    replaced: dict[Node, Node] = {}
    shapes = _element_shapes(g, creators)
    for ta in creators:
        element_shape = _shape_const(g, ta, shapes[ta])
        dtype = ta.attrs["dtype"]
        reserve = make_node("TensorListReserve", f"{ta.name}/list", [element_shape, ta.inputs[0]],
                            {"element_dtype": f"dtype:{dtype}", "shape_type": "dtype:int32"}, [("variant", ())])
        replaced[ta] = reserve
        mapping[ta.outputs[1]] = reserve.outputs[0]
    for node in list(g.nodes):
        if not node.op.startswith("TensorArray") or node.op == "TensorArrayV3":
            continue
        ta = _creator(node.inputs[0], node)
        new = _list_op(g, node, ta, ta.attrs["dtype"], shapes[ta])
        if new is not None:
            replaced[node] = new
            mapping.update(zip(node.outputs, new.outputs))
    for old, new in replaced.items():
        at = g.nodes.index(old)
        g.nodes[at:at] = [new]
    g.substitute(mapping)
    _retype_flows(g)


def _element_shapes(g: Graph, creators: list[Node]) -> dict[Node, Shape]:
    """Each TensorArray's element shape: as declared, else as an unstack (a scatter of a whole
    tensor, written before any loop, so of known shape) tells it."""
    shapes: dict[Node, Shape] = {ta: ta.attrs.get("element_shape") for ta in creators}
    for node in g.nodes:
        if node.op == "TensorArrayScatterV3":
            ta = _creator(node.inputs[0], node)
            value = node.inputs[2].shape
            if value is not None and len(value) >= 1:
                shapes[ta] = _more_precise(shapes[ta], tuple(value[1:]))
    return shapes


def _more_precise(declared: Shape, seen: Shape) -> Shape:
    if declared is None:
        return seen
    if seen is None or len(seen) != len(declared):
        return declared
    return tuple(d if d is not None else s for d, s in zip(declared, seen))


def _list_op(g: Graph, node: Node, ta: Node, dtype: str, element_shape: Shape) -> Node | None:
    handle, *rest = node.inputs
    name = f"{node.name}/list"
    attrs = {"element_dtype": f"dtype:{dtype}"}
    shape_of_item = tuple(element_shape) if element_shape is not None else None
    if node.op == "TensorArrayWriteV3":
        index, value, flow = rest
        return make_node("TensorListSetItem", name, [flow, index, value], attrs, [("variant", ())])
    if node.op == "TensorArrayReadV3":
        index, flow = rest
        shape = _shape_const(g, node, element_shape)
        return make_node("TensorListGetItem", name, [flow, index, shape], attrs, [(dtype, shape_of_item)])
    if node.op == "TensorArrayGatherV3":
        indices, flow = rest
        shape = _shape_const(g, node, element_shape)
        out = None if shape_of_item is None else (indices.shape[0] if indices.shape else None, *shape_of_item)
        return make_node("TensorListGather", name, [flow, indices, shape], attrs, [(dtype, out)])
    if node.op == "TensorArrayScatterV3":
        indices, value, flow = rest
        return make_node("TensorListScatterIntoExistingList", name, [flow, value, indices], attrs, [("variant", ())])
    if node.op == "TensorArraySizeV3":
        (flow,) = rest
        return make_node("TensorListLength", name, [flow], {}, [("int32", ())])
    if node.op == "TensorArrayCloseV3":
        return None
    raise ConversionError(f"{node.op} {node.name!r} (on TensorArray {ta.name!r}) cannot be converted")


def _shape_const(g: Graph, before: Node, shape: Shape) -> Value:
    """An element shape operand (-1 for unknown), placed before ``before``."""
    dims = np.array(-1, np.int32) if shape is None else np.array([-1 if d is None else d for d in shape], np.int32)
    c = g.make_const(dims, f"{before.name}/element_shape")
    g.nodes.insert(g.nodes.index(before), c.node)
    return c


def _creator(handle: Value, user: Node) -> Node:
    v = handle
    while v.node.op in _FORWARDING:
        v = v.node.inputs[0]
    if v.node.op != "TensorArrayV3":
        raise ConversionError(f"{user.op} {user.name!r} reads a TensorArray that {v.node.name!r} ({v.node.op}) "
                              "makes; only TensorArrayV3 arrays can be converted")
    return v.node


def _retype_flows(g: Graph) -> None:
    """Values forwarded from a list are lists too (their ``T`` attributes follow)."""
    changed = True
    while changed:
        changed = False
        for node in g.nodes:
            if node.op not in _FORWARDING or not node.inputs:
                continue
            data = node.inputs if node.op in MERGE else node.inputs[:1]
            forwarded = node.outputs[:1] if node.op in MERGE else node.outputs  # a Merge's index stays
            if any(v.dtype == "variant" for v in data) and forwarded[0].dtype != "variant":
                for v in forwarded:
                    v.dtype, v.shape = "variant", ()
                set_type_attr(node, "T", "variant")
                changed = True
