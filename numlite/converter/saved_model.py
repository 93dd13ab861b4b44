"""A TF2 SavedModel's signatures read from its files, without loading the SavedModel.

``tf.saved_model.load`` rebuilds every function a SavedModel holds before one signature can
be called. A tf_keras model saves every layer's call traces, hundreds of functions: a
Bidirectional LSTM took 1.9-2.1 s to load and convert in a fresh process (4.8 s to load in one
that had built other models), and 0.10 s to read and convert. The converter needs much less: each
signature's function definition and the functions it calls, and what that function captures
(variables, whose values are in the checkpoint, and constants). All of it is in the files:

- ``saved_model.pb``: the signatures (``signature_def``: which output is which), the function
  library, and the object graph, whose signature map names each signature's function and lists
  the objects it captures, in order (``bound_inputs``);
- ``variables/``: the checkpoint. Its own object graph has the same node ids as the
  SavedModel's; each variable's node gives the key its value is stored under.

What this reader does not understand (a capture that is neither a plain variable, a constant nor
another resource, a variable the checkpoint does not hold) makes
:func:`read_signatures` return None: the converter then loads the SavedModel through TensorFlow,
which handles every case and reports captures numlite cannot convert.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Hashable

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.framework import function_def_to_graph

from numlite.converter.graph import Graph
from numlite.converter.importer import Importer
from numlite.errors import ConversionError

_CHECKPOINT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VARIABLE_VALUE = "VARIABLE_VALUE"


@dataclass(frozen=True)
class Capture:
    """What one captured input of a function is bound to: a variable (``key`` identifies it
    across signatures, ``name`` is its name, ``read()`` its value), a constant (``read()``), or
    a resource that is not a variable (``kind == "resource"``)."""

    kind: str
    key: Hashable = None
    name: str | None = None
    read: Callable[[], np.ndarray] | None = None


class SavedSignature:
    """One signature of a SavedModel, read from its files: importable like a concrete function
    (:meth:`import_graph`), with the captures to bind and the library its fusions read."""

    def __init__(self, function: Any, library: Any, output_names: list[str], captures: list[Capture]) -> None:
        self.function = function  # the signature's FunctionDef
        self.library = library  # FunctionDefLibrary: the functions it calls, transitively
        self.output_names = output_names
        self.captures = captures

    @property
    def functions(self) -> dict[str, Any]:
        """The FunctionDefs it calls, by name (the fusions read their attributes)."""
        return {f.signature.name: f for f in self.library.function}

    def import_graph(self, key: str) -> Graph:
        """The signature's function as a Graph: the arguments its inputs, the captures its
        ``captured`` placeholders (in :attr:`captures`' order)."""
        importer = Importer(self.library)
        with importer.library_graph.as_default():
            func_graph = function_def_to_graph.function_def_to_graph(self.function)
        num_args = len(self.function.signature.input_arg) - len(self.captures)
        graph = importer.import_func_graph(func_graph, key, num_inputs=num_args)
        graph.output_names = list(self.output_names)
        return graph


def read_signatures(path: str, saved_model: Any, tags: Any) -> dict[str, SavedSignature] | None:
    """Every signature of the TF2 SavedModel at ``path`` (``saved_model``: its parsed
    ``saved_model.pb``; ``tags``: which meta graph) by key, in the SavedModel's order. None
    where this reader cannot tell what a signature captures (see the module's docstring)."""
    meta_graph = _meta_graph(saved_model, tags, path)
    objects = meta_graph.object_graph_def
    signature_map = _child(objects, 0, "signatures")
    if signature_map is None:
        return None
    checkpoint = _Checkpoint(path)
    library = {f.signature.name: f for f in meta_graph.graph_def.library.function}
    signatures: dict[str, SavedSignature] = {}
    for child in objects.nodes[signature_map].children:
        node = objects.nodes[child.node_id]
        if node.WhichOneof("kind") != "bare_concrete_function":
            return None
        name = node.bare_concrete_function.concrete_function_name
        signature_def = meta_graph.signature_def.get(child.local_name)
        if name not in library or name not in objects.concrete_functions or signature_def is None:
            return None
        captures = [_capture(objects, checkpoint, meta_graph.graph_def, node_id)
                    for node_id in objects.concrete_functions[name].bound_inputs]
        output_names = _output_names(signature_def, len(library[name].signature.output_arg))
        if None in captures or output_names is None:
            return None
        signatures[child.local_name] = SavedSignature(library[name], _reachable(library, name), output_names,
                                                      captures)
    return signatures


def root_children(saved_model: Any, tags: Any) -> set[str]:
    """The names of the root object's attributes (``serve``, ``signatures``, ...)."""
    meta_graph = _meta_graph(saved_model, tags)
    if not meta_graph.object_graph_def.nodes:
        return set()
    return {c.local_name for c in meta_graph.object_graph_def.nodes[0].children}


# -- the parts -----------------------------------------------------------------------------


def _meta_graph(saved_model: Any, tags: Any, path: str = "") -> Any:
    """The meta graph ``tags`` names (a tag or a list of them), or the only one."""
    graphs = list(saved_model.meta_graphs)
    held = [sorted(g.meta_info_def.tags) for g in graphs]
    if tags is None:
        if len(graphs) != 1:
            raise ConversionError(f"SavedModel {path!r} holds {len(graphs)} meta graphs (tagged {held}): name one "
                                  "with tags")
        return graphs[0]
    wanted = {tags} if isinstance(tags, str) else set(tags)
    chosen = [g for g in graphs if set(g.meta_info_def.tags) == wanted]
    if not chosen:
        raise ConversionError(f"SavedModel {path!r} has no meta graph tagged {sorted(wanted)}; it has {held}")
    return chosen[0]


def _child(objects: Any, node_id: int, name: str) -> int | None:
    return next((c.node_id for c in objects.nodes[node_id].children if c.local_name == name), None)


def _output_names(signature_def: Any, count: int) -> list[str] | None:
    """Output i of the signature's function is the ``signature_def`` output whose tensor is
    the i-th output of its call (``StatefulPartitionedCall:i``)."""
    by_index: dict[int, str] = {}
    for name, info in signature_def.outputs.items():
        _, _, index = info.name.rpartition(":")
        if not index.isdigit():
            return None
        by_index[int(index)] = name
    if sorted(by_index) != list(range(count)):
        return None
    return [by_index[i] for i in range(count)]


def _capture(objects: Any, checkpoint: _Checkpoint, graph_def: Any, node_id: int) -> Capture | None:
    """What the object ``node_id`` binds a captured input to, None if not known here."""
    node = objects.nodes[node_id]
    kind = node.WhichOneof("kind")
    if kind == "variable":
        variable = node.variable
        if variable.experimental_distributed_variable_components:
            return None
        key = checkpoint.key_of(node_id)
        if key is None:
            return None
        return Capture("variable", ("saved", node_id), variable.name or None, lambda: checkpoint.read(key))
    if kind == "constant":
        const = next((n for n in graph_def.node if n.name == node.constant.operation), None)
        if const is None or const.op != "Const":
            return None
        value = tf.make_ndarray(const.attr["value"].tensor)
        return Capture("constant", read=lambda: value)
    if kind == "resource":
        return Capture("resource")
    return None  # assets, captured tensors of other functions: TensorFlow's loader knows them


def _reachable(library: dict[str, Any], name: str) -> Any:
    """A FunctionDefLibrary of ``name`` and every function it calls, transitively (If and While
    branches, calls, functions in attributes of any node)."""
    seen, stack = {name}, [name]
    while stack:
        for node in library[stack.pop()].node_def:
            for callee in _callees(node):
                if callee in library and callee not in seen:
                    seen.add(callee)
                    stack.append(callee)
    reachable = tf.compat.v1.GraphDef().library
    reachable.function.extend(library[n] for n in library if n in seen)
    return reachable


def _callees(node: Any) -> list[str]:
    names = [node.op]  # a function called as an op by its own name
    for value in node.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names


class _Checkpoint:
    """The SavedModel's variables: values by checkpoint key, read when asked."""

    def __init__(self, path: str) -> None:
        self.prefix = os.path.join(path, "variables", "variables")
        self._reader: Any = None
        self._keys: dict[int, str] | None = None

    def key_of(self, node_id: int) -> str | None:
        """The key of the value of the variable at object-graph node ``node_id``."""
        if self._keys is None:
            self._keys = self._variable_keys()
        return self._keys.get(node_id)

    def read(self, key: str) -> np.ndarray:
        return np.asarray(self._reader.get_tensor(key))

    def _variable_keys(self) -> dict[int, str]:
        try:
            self._reader = tf.train.load_checkpoint(self.prefix)
            proto = trackable_object_graph_pb2.TrackableObjectGraph()
            proto.ParseFromString(self._reader.get_tensor(_CHECKPOINT_GRAPH_KEY))
        except (tf.errors.OpError, ValueError):
            return {}
        return {node_id: attribute.checkpoint_key for node_id, node in enumerate(proto.nodes)
                for attribute in node.attributes if attribute.name == _VARIABLE_VALUE}
