"""``numlite.TFLiteConverter``: TensorFlow programs to ``.tflite`` bytes.

Modelled on ``tf.lite.TFLiteConverter``::

    converter = numlite.TFLiteConverter.from_saved_model("model_dir")
    tflite_bytes = converter.convert()
    print(converter.report)

The pipeline: import each signature's graph and every function it calls
(:mod:`~numlite.converter.importer`), inline plain calls, bind captured variables and freeze
the read-only ones, fold constants with TensorFlow, lower to TFLite builtins (control flow to
IF/WHILE subgraphs), optimize the model (fuse biases, scales and activations; drop dead code;
store identical buffers once) and write it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.util import nest

from numlite.converter import fusions, optimize, passes
from numlite.converter import saved_model as saved_model_files
from numlite.converter.bidirectional import group_in_model
from numlite.converter.graph import Graph, Value, call_arguments
from numlite.converter.importer import Importer, evaluate_nodes, refine_shapes
from numlite.converter.keras_loops import fuse_keras_lstm_loops
from numlite.converter.lower import RULES
from numlite.converter.lowering import ProgramLowering, Variable
from numlite.converter.quantize import QuantizationSettings, quantize
from numlite.converter.quantize.options import TargetSpec
from numlite.converter.raising import raise_control_flow, uses_v1_control_flow
from numlite.converter.variables import assigned_variables, freeze_read_only, shape_variable_reads, trace_resources
from numlite.errors import ConversionError
from numlite.model import Model, write_model
from numlite.model.ir import SignatureDef

# Ops that need no lowering rule: they are removed before lowering or carry no computation.
_NO_RULE_NEEDED = frozenset({"Const", "NoOp"})


@dataclass
class ConversionReport:
    """What a conversion produced: operators by type, subgraphs, size and time."""

    op_counts: dict[str, int] = field(default_factory=dict)
    subgraphs: int = 0
    size_bytes: int = 0
    seconds: float = 0.0
    frozen_variables: int = 0
    variables: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    fusions: dict[str, int] = field(default_factory=dict)  # composite fusions applied, by name
    layers: list[str] = field(default_factory=list)  # Keras recurrent layers: fused, or why not
    quantization: list[str] = field(default_factory=list)  # what post-training quantization did
    warnings: list[str] = field(default_factory=list)  # what the file does not do right everywhere

    @property
    def operators(self) -> int:
        return sum(self.op_counts.values())

    def __str__(self) -> str:
        ops = ", ".join(f"{name} x{n}" for name, n in sorted(self.op_counts.items(), key=lambda kv: (-kv[1], kv[0])))
        lines = [
            f"{self.operators} operators in {self.subgraphs} subgraph(s), {self.size_bytes:,} bytes, "
            f"converted in {self.seconds:.2f} s",
            f"signatures: {', '.join(self.signatures)}",
            f"operators: {ops}",
        ]
        if self.frozen_variables or self.variables:
            lines.append(f"variables: {self.frozen_variables} read(s) frozen into constants; "
                         f"{len(self.variables)} kept as variables{': ' + ', '.join(self.variables) if self.variables else ''}")
        if self.fusions:
            lines.append("fusions: " + ", ".join(f"{name} x{n}" for name, n in sorted(self.fusions.items())))
        lines.extend(f"layer {line}" for line in self.layers)
        lines.extend(f"quantization: {line}" for line in self.quantization)
        lines.extend(f"warning: {line}" for line in self.warnings)
        return "\n".join(lines)


class TFLiteConverter:
    """Converts TensorFlow concrete functions (from a SavedModel, a Keras model, or given
    directly) into a ``.tflite`` model. Use the ``from_*`` constructors."""

    def __init__(self, functions: Sequence[tuple[str, Any]], trackable_obj: Any = None) -> None:
        if not functions:
            raise ConversionError("nothing to convert: no concrete functions were given")
        self._functions = list(functions)
        self._trackable = trackable_obj  # keeps variables alive while converting
        self.report: ConversionReport | None = None
        self._layer_lines: list[str] = []  # from_keras_model: how each recurrent layer converts
        # Keras 3 LSTM loops (in SavedModels, traced functions) recognised and fused; False keeps
        # every loop a WHILE (see converter/keras_loops.py).
        self.fuse_keras_loops = True
        # Post-training quantization, as tf.lite.TFLiteConverter spells it (see converter/quantize).
        self.optimizations: list[Any] = []
        self.target_spec = TargetSpec()
        self.representative_dataset: Callable[[], Iterable[Any]] | None = None
        self.inference_input_type: Any = None  # float32 unless full-integer quantized
        self.inference_output_type: Any = None

    # -- constructors --------------------------------------------------------------------------

    @classmethod
    def from_concrete_functions(cls, funcs: Sequence[Any], trackable_obj: Any = None) -> TFLiteConverter:
        """One signature per concrete function: ``serving_default`` for a single function,
        else each function's name."""
        funcs = list(funcs)
        if len(funcs) == 1:
            return cls([("serving_default", funcs[0])], trackable_obj)
        return cls([(_function_key(f), f) for f in funcs], trackable_obj)

    @classmethod
    def from_saved_model(cls, saved_model_dir: str, signature_keys: Sequence[str] | None = None,
                         tags: Any = None) -> TFLiteConverter:
        """Every signature of the SavedModel (or those named), each becoming a signature def. A
        TF1 SavedModel is loaded into a session and frozen, each signature like a frozen graph.
        A Keras 3 ``model.export`` folder writes its endpoint twice, as ``serve`` and
        ``serving_default``: unless keys are named, only ``serving_default`` is converted, as the
        official converter does. Signatures that compute the same thing share one subgraph."""
        path = str(saved_model_dir)
        saved_model = _parse_saved_model(path)
        if all(not mg.object_graph_def.nodes for mg in saved_model.meta_graphs):  # written by TF1's builder
            return cls(_tf1_signatures(path, signature_keys, tags))
        read = saved_model_files.read_signatures(path, saved_model, tags)
        if read is not None:  # no need to load the SavedModel (see converter/saved_model.py)
            keys = _signature_keys(path, list(read), signature_keys, saved_model_files.root_children(saved_model, tags))
            return cls([(k, read[k]) for k in keys])
        loaded = tf.saved_model.load(path, tags=tags)
        signatures = dict(loaded.signatures)
        keys = _signature_keys(path, list(signatures), signature_keys, set(dir(loaded)))
        return cls([(k, signatures[k]) for k in keys], loaded)

    @classmethod
    def from_frozen_graph(cls, graph_def_file: str, input_arrays: Sequence[str], output_arrays: Sequence[str],
                          input_shapes: dict[str, Sequence[int | None]] | None = None) -> TFLiteConverter:
        """A frozen TF1 ``GraphDef`` file (``.pb``): ``input_arrays`` name the placeholders fed (their
        shapes overridable with ``input_shapes``, ``{name: [dims]}``, None for a dynamic dimension),
        ``output_arrays`` the tensors computed. TF1 control flow (Switch/Merge, Enter/Exit loops) is
        raised to IF/WHILE. The tensors of the ``.tflite`` model keep the arrays' names."""
        graph_def = tf.compat.v1.GraphDef()
        try:
            with open(graph_def_file, "rb") as f:
                graph_def.ParseFromString(f.read())
        except (OSError, DecodeError) as e:
            raise ConversionError(f"cannot read a GraphDef from {graph_def_file!r}: {e}") from e
        return cls([("serving_default", _FrozenGraph(graph_def, list(input_arrays), list(output_arrays),
                                                     dict(input_shapes or {})))])

    @classmethod
    def from_keras_model(cls, model: Any) -> TFLiteConverter:
        """A Keras model called with ``training=False`` on its inputs (batch dimension dynamic).
        Its Keras 3 LSTM, SimpleRNN and Bidirectional(LSTM) layers become TFLite's fused
        recurrent ops where the math is the same (:mod:`numlite.converter.keras_rnn`); the
        report lists each recurrent layer, fused or why not."""
        from numlite.converter.keras_rnn import route_rnn_layers

        specs = [tf.TensorSpec(tuple(t.shape), t.dtype, name=_input_name(t, i)) for i, t in enumerate(model.inputs)]

        def call(*args):
            return model(list(args) if len(args) > 1 else args[0], training=False)

        with route_rnn_layers(model) as layer_lines:
            concrete = tf.function(call, input_signature=specs, autograph=False).get_concrete_function()
        converter = cls([("serving_default", concrete)], model)
        converter._layer_lines = layer_lines
        return converter

    # -- conversion ----------------------------------------------------------------------------

    def convert(self) -> bytes:
        """Convert and return the ``.tflite`` bytes; ``self.report`` describes the result."""
        start = time.perf_counter()
        model, report = self._convert_model()
        data = write_model(model)
        report.size_bytes = len(data)
        report.seconds = time.perf_counter() - start
        self.report = report
        return data

    def _convert_model(self) -> tuple[Model, ConversionReport]:
        variables: dict[Any, Variable] = {}
        entries: list[tuple[str, Graph, dict[Value, Variable]]] = []
        fused: Counter = Counter()
        declined: list[str] = []
        for key, func in self._functions:
            graph, roots = _import(key, func, variables)
            if uses_v1_control_flow(graph):
                raise_control_flow(graph)
            shape_variable_reads(graph, trace_resources(graph, roots))
            refine_shapes(graph)  # from the variables' shapes to the fused functions' arguments
            library = func.functions if isinstance(func, saved_model_files.SavedSignature) else fusions.library_of(func)
            composites = fusions.fuse_composites(graph, library, roots)  # before inlining
            fused.update(composites.applied)
            declined += composites.declined
            entries.append((key, graph, roots))

        # Which variables are assigned is a property of the whole program, every signature.
        for _, graph, _ in entries:
            passes.inline_calls(graph)
            passes.remove_identities(graph)
        roots = {v: var for _, _, entry_roots in entries for v, var in entry_roots.items()}
        resources: dict[Value, Variable] = {}
        for _, graph, _ in entries:
            resources.update(trace_resources(graph, roots))
        assigned = set().union(*(assigned_variables(graph, resources) for _, graph, _ in entries))
        frozen = 0
        for _, graph, _ in entries:
            frozen += freeze_read_only(graph, resources, assigned)
            _simplify(graph)
        # Keras 3 LSTMs in a SavedModel: recognised by their loops, once the weights are constants.
        # (from_keras_model routed its layers to fusions already and reports them itself.)
        loop_lines = list(dict.fromkeys(line for _, graph, _ in entries for line in _fuse_keras_loops(graph))) \
            if self.fuse_keras_loops else []
        # A function a fusion declined is inlined: its loop's own line would say it twice.
        declined = list(dict.fromkeys(declined))
        said = {line.split(" ", 1)[0] for line in declined}
        loop_lines = declined + [line for line in loop_lines if line.split(" ", 1)[0] not in said]
        layer_lines = _merge_layer_lines(self._layer_lines, loop_lines)

        _check_supported([g for _, g, _ in entries])
        lowering = ProgramLowering(RULES, resources)
        signatures = []
        for (key, graph, _), (_, source) in zip(entries, self._functions):
            frozen_graph = isinstance(source, _FrozenGraph)
            input_names = graph.input_names if frozen_graph else [f"{key}_{name}:0" for name in graph.input_names]
            index, inputs, outputs = lowering.lower_entry(graph, input_names)
            signatures.append(_signature(lowering.builder.model, key, index, graph, inputs, outputs,
                                         keep_names=frozen_graph))
        model = lowering.builder.model
        model.signature_defs = signatures
        optimize.add_variable_initializer(lowering)
        optimize.optimize_model(model)
        quantization = quantize(model, QuantizationSettings.from_converter(self))
        # After quantization, which makes integer LSTMs of unidirectional ones only (LiteRT has
        # no integer bidirectional LSTM): the pairs still float are grouped.
        layer_lines = layer_lines + group_in_model(model)
        warnings = optimize.run_sized_ops_first(model)

        report = ConversionReport(
            op_counts=dict(Counter(model.op_name(op) for _, _, op in model.iter_operators())),
            subgraphs=len(model.subgraphs),
            frozen_variables=frozen,
            variables=sorted(lowering.variables),
            signatures=[s.key for s in signatures],
            fusions=dict(fused),
            layers=list(layer_lines),
            quantization=quantization,
            warnings=warnings,
        )
        return model, report


# -- helpers -----------------------------------------------------------------------------------


def _function_key(func: Any) -> str:
    name = getattr(func, "name", None) or func.graph.name
    name = name.decode() if isinstance(name, bytes) else str(name)
    match = re.fullmatch(r"__inference_(.*)_\d+", name)
    return match.group(1) if match else name


def _input_name(tensor: Any, i: int) -> str:
    name = getattr(tensor, "name", None) or f"input_{i}"
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", name.split(":")[0])


def _import(key: str, func: Any, variables: dict[Any, Variable]) -> tuple[Graph, dict[Value, Variable]]:
    """Import one signature's function (a concrete function, a SavedModel's signature read
    from its files, or a frozen graph); returns its graph and its captured variables."""
    if isinstance(func, _FrozenGraph):
        return func.import_graph(key)
    if isinstance(func, saved_model_files.SavedSignature):
        graph = func.import_graph(key)
        return graph, _bind_captures(key, graph, func.captures, variables)
    fg = func.graph
    captured = list(func.captured_inputs)
    importer = Importer(fg.as_graph_def().library)
    graph = importer.import_func_graph(fg, key, num_inputs=len(fg.inputs) - len(captured))
    graph.output_names = _output_names(func, len(graph.outputs))
    names = {id(v.handle): v.name.split(":")[0] for v in getattr(fg, "variables", ())}
    return graph, _bind_captures(key, graph, [_eager_capture(t, names) for t in captured], variables)


def _eager_capture(tensor: Any, names: dict[int, str]) -> saved_model_files.Capture:
    """What a concrete function's captured eager tensor is: a variable's handle, another
    resource, or a constant."""
    if tensor.dtype != tf.resource:
        return saved_model_files.Capture("constant", read=lambda: np.asarray(tensor))
    if not _is_variable(tensor):
        return saved_model_files.Capture("resource")
    return saved_model_files.Capture("variable", id(tensor), names.get(id(tensor)), lambda: _read(tensor))


def _bind_captures(key: str, graph: Graph, captures: list[saved_model_files.Capture],
                   variables: dict[Any, Variable]) -> dict[Value, Variable]:
    """Bind ``graph.captured`` to ``captures``: constants become Const nodes; variables are
    returned by placeholder, one Variable per variable of the program (``variables``, by
    capture key, is shared by every signature)."""
    roots: dict[Value, Variable] = {}
    consts: dict[Value, Value] = {}
    for placeholder, capture in zip(graph.captured, captures):
        if capture.kind == "constant":
            c = graph.make_const(capture.read(), placeholder.node.name, placeholder.dtype)
            graph.nodes.insert(0, c.node)
            consts[placeholder] = c
        elif capture.kind == "variable":
            if capture.key not in variables:
                variables[capture.key] = Variable(_unique_name(capture.name, variables), capture.read())
            roots[placeholder] = variables[capture.key]
        else:
            readers = sorted(_readers(graph, placeholder))
            raise ConversionError(
                f"function {key!r} captures resource {placeholder.node.name!r}, which is not a variable (a "
                f"lookup table or another TF resource), read by {', '.join(readers[:3]) or 'no node'}: numlite "
                "converts resource variables only")
    graph.substitute(consts)
    return roots


def _readers(graph: Graph, value: Value) -> set[str]:
    """The nodes that read ``value`` ("name (op)"), followed into the functions it is passed
    to: a SavedModel's signature passes its captures on to the function that uses them."""
    readers: set[str] = set()
    for node in graph.nodes:
        if value not in node.inputs:
            continue
        callees = [f.graph for f in node.functions() if f.graph is not None]
        if not callees:
            readers.add(f"{node.name} ({node.op})")
        for callee in callees:
            for argument, passed in zip(callee.inputs, call_arguments(node)):
                if passed is value:
                    readers |= _readers(callee, argument)
    return readers


def _signature_keys(path: str, available: list[str], wanted: Sequence[str] | None, root_names: set[str]) -> list[str]:
    """The signatures to convert: those ``wanted``, else every one ``available``, except that
    a Keras 3 ``model.export`` folder converts ``serving_default`` only (``root_names``: the
    attributes of the SavedModel's root object)."""
    if not available:
        raise ConversionError(f"SavedModel {path!r} has no signatures")
    keys = list(wanted) if wanted else list(available)
    if not wanted and _is_keras_export(root_names, keys):
        keys = [tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
    missing = [k for k in keys if k not in available]
    if missing:
        raise ConversionError(f"SavedModel {path!r} has no signature(s) {missing}; it has {sorted(available)}")
    return keys


def _is_keras_export(root_names: set[str], keys: list[str]) -> bool:
    """Whether a SavedModel is a Keras 3 ``model.export`` artifact with its default endpoint
    under two keys: its root has a ``serve`` endpoint and there is a ``serving_default``
    signature, and not the ``_default_save_signature`` that ``model.save``/``tf.saved_model.save``
    add."""
    return (len(keys) > 1 and tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY in keys and "serve" in root_names
            and "_default_save_signature" not in root_names)


def _parse_saved_model(path: str) -> Any:
    """The SavedModel proto of the folder ``path`` (``saved_model.pb`` or ``.pbtxt``)."""
    from tensorflow.python.saved_model import loader_impl

    try:
        return loader_impl.parse_saved_model(path)
    except OSError as e:
        raise ConversionError(f"cannot read a SavedModel from {path!r}: {e}") from e


def _tf1_signatures(path: str, keys: Sequence[str] | None, tags: Any) -> list[tuple[str, _FrozenGraph]]:
    """Each signature of a TF1 SavedModel as a frozen graph (variables become constants)."""
    tags = list(tags) if tags else [tf.saved_model.SERVING]
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, tags, path)
        signatures = dict(meta.signature_def)
        wanted = list(keys) if keys else sorted(signatures)
        missing = [k for k in wanted if k not in signatures]
        if missing:
            raise ConversionError(f"SavedModel {path!r} has no signature(s) {missing}; it has {sorted(signatures)}")
        entries = []
        for key in wanted:
            sig = signatures[key]
            inputs, outputs = dict(sig.inputs), dict(sig.outputs)
            fetched = [_op_name(t.name) for t in outputs.values()]
            frozen = tf.compat.v1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), fetched)
            entries.append((key, _FrozenGraph(frozen, [t.name for t in inputs.values()], [t.name for t in outputs.values()],
                                              {}, names=(list(inputs), list(outputs)))))
    return entries


class _FrozenGraph:
    """A frozen GraphDef with the tensors fed and fetched: imported like a function whose
    arguments are the input arrays (named as the arrays, or by ``names``: signature keys)."""

    def __init__(self, graph_def: Any, inputs: list[str], outputs: list[str], shapes: dict[str, Any],
                 names: tuple[list[str], list[str]] | None = None) -> None:
        if not inputs or not outputs:
            raise ConversionError("from_frozen_graph needs input_arrays and output_arrays")
        self.graph_def, self.inputs, self.outputs, self.shapes = graph_def, inputs, outputs, shapes
        self.names = names or ([_op_name(n) for n in inputs], [_op_name(n) for n in outputs])

    def import_graph(self, key: str) -> tuple[Graph, dict[Value, Variable]]:
        graph_def = tf.compat.v1.GraphDef()
        graph_def.CopyFrom(self.graph_def)
        by_name = {n.name: n for n in graph_def.node}
        for name, shape in self.shapes.items():
            node = by_name.get(_op_name(name))
            if node is None or node.op not in ("Placeholder", "PlaceholderWithDefault"):
                raise ConversionError(f"input_shapes names {name!r}, which is not a placeholder of the graph")
            node.attr["shape"].shape.CopyFrom(tf.TensorShape(list(shape)).as_proto())
        tf_graph = tf.Graph()
        try:
            with tf_graph.as_default():
                tf.graph_util.import_graph_def(graph_def, name="")
        except (ValueError, tf.errors.OpError) as e:
            raise ConversionError(f"TensorFlow cannot import the graph: {e}") from e
        inputs = [_tensor(tf_graph, name, "input") for name in self.inputs]
        outputs = [_tensor(tf_graph, name, "output") for name in self.outputs]
        for t in inputs:
            if t.op.type not in ("Placeholder", "PlaceholderWithDefault"):
                raise ConversionError(f"input array {t.name!r} is a {t.op.type}, not a placeholder")
        graph = Importer(graph_def.library).import_graph(tf_graph, key, inputs, outputs)
        graph.input_names, graph.output_names = (list(n) for n in self.names)
        readers = graph.consumers()
        for node in graph.nodes:
            if node.op == "Placeholder":  # the fed ones are the graph's inputs, not its nodes
                users = [n.name for n in readers.get(node.outputs[0], [])]
                if users:
                    raise ConversionError(f"placeholder {node.name!r} is read by {users[:3]} but is not among "
                                          f"the input arrays {self.inputs}")
        return graph, {}


def _op_name(tensor_name: str) -> str:
    return tensor_name.split(":")[0]


def _tensor(tf_graph: Any, name: str, role: str) -> Any:
    try:
        return tf_graph.get_tensor_by_name(name if ":" in name else f"{name}:0")
    except (KeyError, ValueError):
        raise ConversionError(f"{role} array {name!r} is not a tensor of the graph") from None


def _unique_name(name: str | None, variables: dict[Any, Variable]) -> str:
    taken = {v.name for v in variables.values()}
    base = name or f"variable_{len(variables)}"
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _is_variable(handle: Any) -> bool:
    """Whether an eager resource handle is a variable's (its handle data says its dtype)."""
    data = resource_variable_ops.get_eager_safe_handle_data(handle)
    return data is not None and bool(getattr(data, "is_set", True)) and len(data.shape_and_type) > 0


def _read(handle: Any) -> np.ndarray:
    """The current value of the variable behind an eager resource handle."""
    data = resource_variable_ops.get_eager_safe_handle_data(handle)
    dtype = tf.as_dtype(data.shape_and_type[0].dtype)
    return tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype).numpy()


def _output_names(func: Any, count: int) -> list[str]:
    structured = getattr(func, "structured_outputs", None)
    if isinstance(structured, dict):
        paths = [p for p, _ in nest.flatten_with_joined_string_paths(structured)]
        if len(paths) == count:
            return paths
    return [f"output_{i}" for i in range(count)]


def _merge_layer_lines(layer_lines: list[str], loop_lines: list[str]) -> list[str]:
    """The report's layer lines: from_keras_model's own (one per recurrent layer), a layer it
    kept as a loop updated when loop recognition fused that loop; else the loops' lines."""
    if not layer_lines:
        return loop_lines
    fused = {line.split(" ", 1)[0] for line in loop_lines if "fused into" in line}
    merged = []
    for line in layer_lines:
        name = line.split(" ", 1)[0]
        # Keras's name scopes may add a suffix to the layer's name (lstm -> lstm_1).
        if line.endswith("kept as a WHILE loop") and any(re.fullmatch(re.escape(name) + r"(_\d+)?", f) for f in fused):
            line = line.replace("kept as a WHILE loop", "but its loop computes a Keras LSTM: fused into "
                                "UNIDIRECTIONAL_SEQUENCE_LSTM by loop recognition")
        merged.append(line)
    return merged


def _fuse_keras_loops(graph: Graph) -> list[str]:
    lines = fuse_keras_lstm_loops(graph)
    if any("fused into" in line for line in lines):
        passes.prune(graph)  # the loops and their lists
    return lines


def _simplify(graph: Graph) -> None:
    """Fold and specialize until nothing changes, then prune."""
    for _ in range(8):
        refine_shapes(graph)
        passes.fold_shapes(graph)
        passes.fold_constants(graph, evaluate_nodes)
        changed = passes.specialize_calls(graph)
        changed |= passes.remove_dead_loop_variables(graph)
        passes.remove_identities(graph)
        if not changed:
            break
    passes.prune(graph)


def _check_supported(graphs: list[Graph]) -> None:
    """One error listing every TF op type no rule lowers, with the nodes that use it."""
    missing: dict[str, list[str]] = {}
    for root in graphs:
        for g in root.walk():
            for node in g.nodes:
                if node.op not in RULES and node.op not in _NO_RULE_NEEDED:
                    missing.setdefault(node.op, []).append(node.name)
    if missing:
        lines = [f"  {op}: {', '.join(names[:5])}{f' and {len(names) - 5} more' if len(names) > 5 else ''}"
                 for op, names in sorted(missing.items())]
        raise ConversionError("the model uses TensorFlow ops numlite cannot convert:\n" + "\n".join(lines))


def _signature(model: Model, key: str, index: int, graph: Graph, inputs: list, outputs: list,
               keep_names: bool = False) -> SignatureDef:
    """The signature def of an entry subgraph; its computed outputs get the official converter's
    names (an output that is an input or a constant keeps its own): ``StatefulPartitionedCall:i``
    for functions, the output array's own name for frozen graphs (``keep_names``)."""
    sg = model.subgraphs[index]
    renamed: set[int] = set()
    for i, ref in enumerate(outputs):
        if ref.value is None and ref not in inputs and ref.index not in renamed:
            sg.tensors[ref.index].name = graph.output_names[i] if keep_names else f"StatefulPartitionedCall:{i}"
            renamed.add(ref.index)
    names = [n for n, v in zip(graph.output_names, graph.outputs) if v.dtype != "resource"]
    return SignatureDef(
        key=key,
        subgraph_index=index,
        inputs={name: ref.index for name, ref in zip(graph.input_names, inputs)},
        outputs={name: ref.index for name, ref in zip(names, outputs)},
    )
