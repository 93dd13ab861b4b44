"""TensorFlow graphs and their function library into numlite's converter graph form.

The main graph of a concrete function is read from its ``FuncGraph``, whose tensors already
carry TensorFlow's inferred shapes. Every function a node refers to (an If's branches, a
While's cond and body, a PartitionedCall's callee) is imported from the library as its own
:class:`~numlite.converter.graph.Graph` for that call site, recursively, so functions stay
functions until the passes decide what to inline.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import function_def_to_graph

from numlite.converter.graph import FuncRef, Graph, Node, Shape, Value, call_arguments
from numlite.errors import ConversionError

def dtype_name(dtype: Any) -> str:
    """TF dtype name without a TF1 ``_ref`` suffix ("float32", "resource", "variant")."""
    return tf.as_dtype(dtype).base_dtype.name


def shape_of(shape: tf.TensorShape) -> Shape:
    if shape.rank is None:
        return None
    return tuple(None if d is None else int(d) for d in shape.as_list())


def decode_attr(av: Any) -> Any:
    """One ``AttrValue`` as a plain Python value (dtype names, shape tuples, arrays, FuncRefs)."""
    kind = av.WhichOneof("value")
    if kind == "list":
        for _, items in av.list.ListFields():
            return [_decode_item(_list_kind(av.list, items), item) for item in items]
        return []
    if kind is None:
        return None
    return _decode_item(kind, getattr(av, kind))


def _list_kind(lst: Any, items: Any) -> str:
    for descriptor, values in lst.ListFields():
        if values is items:
            return descriptor.name
    raise AssertionError("unreachable")


def _decode_item(kind: str, item: Any) -> Any:
    if kind == "s":
        try:
            return item.decode("utf-8")
        except UnicodeDecodeError:
            return bytes(item)
    if kind == "type":
        return dtype_name(item)
    if kind == "shape":
        return None if item.unknown_rank else tuple(None if d.size < 0 else int(d.size) for d in item.dim)
    if kind == "tensor":
        return tf.make_ndarray(item)
    if kind == "func":
        return FuncRef(item.name, {k: decode_attr(a) for k, a in item.attr.items()})
    return item  # i, f, b, placeholder


class Importer:
    """Imports graphs against one function library (a GraphDef's ``library``)."""

    def __init__(self, library: Any) -> None:
        self.functions = {f.signature.name: f for f in library.function}
        self.library_graph = tf.Graph()  # holds the library so that nested calls resolve
        with self.library_graph.as_default():
            tf.graph_util.import_graph_def(tf.compat.v1.GraphDef(library=library), name="")
        self._func_graphs: dict[tuple, Any] = {}

    # -- whole graphs --------------------------------------------------------------------------

    def import_func_graph(self, func_graph: Any, name: str, num_inputs: int | None = None) -> Graph:
        """A ``FuncGraph`` as a Graph; its first ``num_inputs`` inputs are the arguments, any
        further inputs (captures) stay as Placeholder values in ``graph.captured``."""
        inputs = list(func_graph.inputs)
        n = len(inputs) if num_inputs is None else num_inputs
        graph = self.import_graph(func_graph, name, inputs[:n], list(func_graph.outputs), captured=inputs[n:])
        graph.output_names = [f"output_{i}" for i in range(len(graph.outputs))]
        return graph

    def import_graph(self, tf_graph: Any, name: str, inputs: list[Any], outputs: list[Any],
                     captured: list[Any] = ()) -> Graph:
        """The operations of a ``tf.Graph`` as a Graph with the given input and output tensors.

        The graph may hold cycles (a TF1 while loop's NextIteration feeds its Merge), so every
        node is created before any is wired to its inputs.
        """
        graph = Graph(name)
        values: dict[str, Value] = {}
        nodes: dict[str, Node] = {}
        input_names = {t.name for t in [*inputs, *captured]}
        operations = tf_graph.get_operations()
        for op in operations:
            node = self._node(op, values, nodes)
            if op.type != "Placeholder" or op.outputs[0].name not in input_names:
                graph.nodes.append(node)
        for op in operations:
            self._wire(op, values, nodes)
        graph.inputs = [values[t.name] for t in inputs]
        graph.captured = [values[t.name] for t in captured]
        graph.outputs = [values[t.name] for t in outputs]
        graph.input_names = [v.node.name for v in graph.inputs]
        for node in graph.nodes:
            self._import_callees(node)
        return graph

    def import_function(self, name: str, input_shapes: list[Shape] | None = None) -> Graph:
        """Library function ``name`` as a Graph, with the given argument shapes where the
        function does not record its own."""
        fdef = self.functions.get(name)
        if fdef is None:
            raise ConversionError(f"function {name!r} is called but not in the function library")
        key = (name, repr(input_shapes))
        if key not in self._func_graphs:
            shapes = None
            if input_shapes is not None and not fdef.arg_attr:
                shapes = [tf.TensorShape(s) for s in input_shapes]
            with self.library_graph.as_default():
                self._func_graphs[key] = function_def_to_graph.function_def_to_graph(fdef, input_shapes=shapes)
        graph = self.import_func_graph(self._func_graphs[key], name)
        graph.attrs = {k: decode_attr(v) for k, v in fdef.attr.items()}
        graph.input_names = [a.name for a in fdef.signature.input_arg]
        graph.output_names = [a.name for a in fdef.signature.output_arg]
        return graph

    # -- nodes ---------------------------------------------------------------------------------

    def _node(self, op: Any, values: dict[str, Value], nodes: dict[str, Node]) -> Node:
        node = Node(
            op=op.type,
            name=op.name,
            attrs={k: decode_attr(v) for k, v in op.node_def.attr.items() if not k.startswith("_output_shapes")},
            inputs=[],
            source=op.node_def,
        )
        node.outputs = [Value(node, i, dtype_name(t.dtype), shape_of(t.shape)) for i, t in enumerate(op.outputs)]
        for v in node.outputs:
            values[v.name] = v
        nodes[op.name] = node
        if op.type == "Const":
            node.attrs["value"] = np.asarray(node.attrs["value"])
        return node

    def _wire(self, op: Any, values: dict[str, Value], nodes: dict[str, Node]) -> None:
        node = nodes[op.name]
        try:
            node.inputs = [values[t.name] for t in op.inputs]
        except KeyError as e:
            raise ConversionError(f"node {op.name!r} ({op.type}) reads {e.args[0]!r}, which the graph does not define") from None
        node.control_inputs = [nodes[c.name] for c in op.control_inputs if c.name in nodes]

    def _import_callees(self, node: Node) -> None:
        """Import every function the node calls, with the shapes of the arguments it passes."""
        args: list[Shape] = [() if v is None else v.shape for v in call_arguments(node)]  # For's index: scalar
        if node.op in ("While", "StatelessWhile") and node.attrs.get("output_shapes"):
            args = list(node.attrs["output_shapes"])
        for ref in node.functions():
            ref.graph = self.import_function(ref.name, args)


def make_node(op: str, name: str, inputs: list[Value], attrs: dict[str, Any],
              outputs: list[tuple[str, Shape]]) -> Node:
    """A new node with a NodeDef behind it (so TensorFlow can infer its shapes and fold it).
    ``attrs`` take plain values: dtype names for ``type`` attributes (say so with a ``dtype:``
    prefix, as in ``{"element_dtype": "dtype:float32"}``), ints, bools, strings."""
    nd = tf.compat.v1.NodeDef(op=op, name=name)
    for key, value in attrs.items():
        if isinstance(value, str) and value.startswith("dtype:"):
            nd.attr[key].type = tf.as_dtype(value[len("dtype:"):]).as_datatype_enum
        elif isinstance(value, bool):
            nd.attr[key].b = value
        elif isinstance(value, int):
            nd.attr[key].i = value
        else:
            nd.attr[key].s = str(value).encode()
    node = Node(op, name, {k: decode_attr(a) for k, a in nd.attr.items()}, list(inputs), source=nd)
    node.outputs = [Value(node, i, dtype, shape) for i, (dtype, shape) in enumerate(outputs)]
    return node


def set_type_attr(node: Node, attr: str, dtype: str) -> None:
    """Change a ``type`` attribute of a node and of the NodeDef behind it."""
    node.attrs[attr] = dtype
    if node.source is not None:
        nd = tf.compat.v1.NodeDef()
        nd.CopyFrom(node.source)
        nd.attr[attr].type = tf.as_dtype(dtype).as_datatype_enum
        node.source = nd


class _GraphDefWriter:
    """Writes converter nodes back into a GraphDef so TensorFlow can run or shape them.

    Values from outside the written nodes become Const nodes (small constants, or all of them
    when ``values_needed``) or Placeholders of the right dtype and shape.
    """

    def __init__(self, values_needed: bool) -> None:
        self.gd = tf.compat.v1.GraphDef()
        # Without a producer version TF reads a Placeholder's scalar shape as "unknown" (the
        # meaning it had in GraphDefs older than version 21).
        self.gd.versions.producer = tf.version.GRAPH_DEF_VERSION
        self.names: dict[Value, str] = {}
        self.values_needed = values_needed

    def ref(self, v: Value) -> str:
        if v not in self.names:
            nd = self.gd.node.add(name=f"x{len(self.gd.node)}")
            dtype = tf.as_dtype(v.dtype)
            nd.attr["dtype"].type = dtype.as_datatype_enum
            const = v.const
            if const is not None and (self.values_needed or const.size <= 64):
                nd.op = "Const"
                nd.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(const, dtype=dtype))
            else:
                nd.op = "Placeholder"
                nd.attr["shape"].shape.CopyFrom(tf.TensorShape(v.shape).as_proto())
            self.names[v] = f"{nd.name}:0"
        return self.names[v]

    def add(self, node: Node) -> str:
        inputs = [self.ref(v) for v in node.inputs]
        nd = self.gd.node.add()
        nd.CopyFrom(node.source)
        nd.name = f"n{len(self.gd.node)}"
        del nd.input[:]
        nd.input.extend(inputs)
        nd.ClearField("device")
        if "_class" in nd.attr:  # colocation with nodes that are not written
            del nd.attr["_class"]
        for v in node.outputs:
            self.names[v] = f"{nd.name}:{v.index}"
        return nd.name

    def import_into(self, graph: tf.Graph) -> None:
        with graph.as_default():
            tf.graph_util.import_graph_def(self.gd, name="")


def refine_shapes(graph: Graph) -> None:
    """Run TensorFlow's shape inference again over every graph of the program, now that
    variables are constants and arguments are specialized, and keep the more precise shapes.

    Functions imported from a SavedModel often carry no argument shapes, so TF first inferred
    unknown dimensions everywhere downstream of their variable reads.
    """
    for g in graph.walk():
        _infer(g, replace=False)


def infer_shapes(graph: Graph) -> None:
    """Infer the shapes of one graph's nodes afresh from its argument shapes (callees and
    nodes that call functions keep theirs): for graphs built by the converter itself, whose
    first shapes may be wrong, not merely imprecise."""
    _infer(graph, replace=True)


def _infer(g: Graph, replace: bool) -> None:
    writer = _GraphDefWriter(values_needed=False)
    # A variable read is written as a placeholder of the read's shape: TF cannot see the
    # variable's shape through a handle placeholder, numlite may know it (shape_variable_reads).
    members = [n for n in g.nodes if n.source is not None and not any(True for _ in n.functions())
               and n.op != "ReadVariableOp"]
    for node in members:
        writer.add(node)
    tf_graph = tf.Graph()
    try:
        writer.import_into(tf_graph)
    except (ValueError, tf.errors.OpError):
        return  # shapes stay as first inferred
    for node in members:
        for v in node.outputs:
            inferred = tf_graph.get_tensor_by_name(writer.names[v]).shape
            v.shape = shape_of(inferred) if replace else _merge(v.shape, inferred)


def _merge(known: Shape, inferred: tf.TensorShape) -> Shape:
    """The more precise of two compatible shapes (``known`` wins where they disagree)."""
    if inferred.rank is None:
        return known
    if known is None:
        return shape_of(inferred)
    if len(known) != inferred.rank:
        return known
    return tuple(k if k is not None else i for k, i in zip(known, inferred.as_list()))


def evaluate_nodes(graph: Graph, nodes: list[Node], wanted: list[Value],
                   given: dict[Value, Value] | None = None) -> list[np.ndarray]:
    """Run ``nodes`` (whose inputs are constants or each other) in TensorFlow and return the
    values of ``wanted``: constant folding with TF's own kernels, in one session run.

    ``given`` reads values as others (a constant, or a result of an earlier node of ``nodes``):
    a function's body run on chosen arguments. Const nodes among ``nodes`` are written as their
    values wherever they are read."""
    writer = _GraphDefWriter(values_needed=True)
    for value, replacement in (given or {}).items():
        if replacement.const is not None:
            writer.names[value] = writer.ref(replacement)
    for node in nodes:
        if node.op == "Const":
            continue
        for v in node.inputs:
            if given and v in given and v not in writer.names:
                writer.names[v] = writer.ref(given[v])
        writer.add(node)
    fetches = [writer.ref(given[v]) if given and v in given and v not in writer.names else writer.ref(v)
               for v in wanted]
    with tf.Graph().as_default() as g:
        writer.import_into(g)
        with tf.compat.v1.Session(graph=g) as session:
            return session.run(fetches)
