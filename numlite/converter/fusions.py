"""Composite fusion: calls of functions that implement a named operation become fused ops.

Runs right after import, before calls are inlined (:func:`fuse_composites`). A function whose
attributes say it implements ``name`` (``_implements`` / ``experimental_implements``, a plain
name or a ``NameAttrList`` in text form with attributes) is offered to the fusion registered
for ``name`` in :mod:`numlite.fusion`, or, when its signature carries ``tfl_fusable_op: true``,
becomes one CUSTOM op named ``name``. The fusion sees the call's arguments and the function's
attributes, checks them against its contract and emits TFLite operators; the call node is
replaced by one converter node per operator (op type :data:`FUSED_OP`), which the lowering
emits as is. Operators whose inputs are all constant by then (weight transforms) are computed
at conversion time by numlite's kernels, so only the fused op reaches the file.

A variable the function receives is read at the call (the fused op gets its value, which
freezing turns into a constant when nothing assigns it); a function that assigns one cannot
be fused.
"""

from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from numlite import fusion as api
from numlite.converter.builder import TFLITE_TYPES, options_for
from numlite.converter.graph import FuncRef, Graph, Node, Value
from numlite.converter.importer import decode_attr
from numlite.converter.lower import lowers
from numlite.converter.lowering import SubgraphLowering, Variable
from numlite.converter.passes import CALL_OPS, SIDE_EFFECT_OPS
from numlite.converter.variables import trace_resources
from numlite.errors import ConversionError, NumliteError
from numlite.model import schema

FUSED_OP = "_NumliteFusedOp"  # a converter node standing for one TFLite operator a fusion emitted
IMPLEMENTS_ATTRS = ("_implements", "experimental_implements", "tf._implements")
# tf_keras marks its LSTM/GRU functions for Grappler with ``api_implements: "lstm_<uuid>"`` and
# puts the attributes the conversion needs (time_major, go_backwards) beside it on the function.
KERAS_IMPLEMENTS_ATTR = "api_implements"
_KERAS_INTERNAL_ATTRS = ("api_implements", "api_preferred_device", "forward_function_name", "backward_function_name")
FUSABLE_ATTR = "tfl_fusable_op"
# Attribute kinds the official converter stores in a tfl_fusable_op's custom options.
_OPTION_KINDS = ("i", "f", "s", "b")


class Implements:
    """What a function implements: the operation's name and its attributes (decoded values,
    and the AttrValue kind of each when the function's definition was available)."""

    def __init__(self, name: str, attrs: dict[str, Any], kinds: dict[str, str] | None = None) -> None:
        self.name = name
        self.attrs = attrs
        self.kinds = kinds

    @property
    def fusable(self) -> bool:
        return self.attrs.get(FUSABLE_ATTR) is True


def library_of(func: Any) -> dict[str, Any]:
    """The function definitions a concrete function's graph carries, by name (empty when it
    has none), for :func:`fuse_composites` to read attributes exactly as TF stored them."""
    graph = getattr(func, "graph", None)
    if graph is None or not hasattr(graph, "as_graph_def"):
        return {}
    return {f.signature.name: f for f in graph.as_graph_def().library.function}


@dataclass
class Fused:
    """What :func:`fuse_composites` did: calls replaced, by fusion name, and one line per call
    a fusion declined (kept as the function it calls, inlined later) saying why."""

    applied: Counter = field(default_factory=Counter)
    declined: list[str] = field(default_factory=list)


def fuse_composites(graph: Graph, functions: Mapping[str, Any] | None = None,
                    variables: Mapping[Value, Variable] | None = None) -> Fused:
    """Replace every call of a function implementing a fusable operation, in ``graph`` and
    every graph it calls, by the ops its fusion emits. ``functions`` (name to FunctionDef)
    gives the exact attribute kinds; ``variables`` (the graph's captured resources) the shapes
    of the variables passed to a fused function."""
    fused = Fused()
    resources = trace_resources(graph, dict(variables or {}))
    for g in graph.walk():  # a replaced call's callee is never visited: it is gone
        k = 0
        while k < len(g.nodes):
            node = g.nodes[k]
            ref = node.attrs.get("f")
            found = _fusion_for(ref, functions) if node.op in CALL_OPS and isinstance(ref, FuncRef) else None
            if found is None:
                k += 1
                continue
            implements, fusion, key = found
            try:
                new_nodes = _replace_call(g, node, ref.graph, implements, fusion, resources)
            except api.FusionDeclined as e:
                fused.declined.append(f"{_layer_of(node)} (function {ref.graph.name!r} implementing "
                                      f"{implements.name!r}): not fused: {e}; kept as a WHILE loop")
                k += 1
                continue
            g.nodes[k:k + 1] = new_nodes
            k += len(new_nodes)
            fused.applied[key] += 1
    return fused


def _layer_of(call: Node) -> str:
    """A Keras layer's name from its call's scope (``model/lstm/PartitionedCall`` -> ``lstm``)."""
    parts = call.name.split("/")
    return parts[-2] if len(parts) >= 2 else call.name


# -- what a function implements -----------------------------------------------------------------


def implements_of(callee: Graph, functions: Mapping[str, Any] | None = None) -> Implements | None:
    """The operation ``callee`` implements, from its FunctionDef when ``functions`` has it,
    else from the attributes the importer decoded."""
    fdef = (functions or {}).get(callee.name)
    if fdef is not None:
        for key in IMPLEMENTS_ATTRS:
            if key in fdef.attr:
                return _from_attr_value(callee.name, fdef.attr[key])
        if KERAS_IMPLEMENTS_ATTR in fdef.attr and fdef.attr[KERAS_IMPLEMENTS_ATTR].s:
            return _keras_implements(fdef.attr[KERAS_IMPLEMENTS_ATTR].s.decode("utf-8", "replace"),
                                     {k: decode_attr(v) for k, v in fdef.attr.items()},
                                     {k: v.WhichOneof("value") or "none" for k, v in fdef.attr.items()})
        return None
    keras_name = callee.attrs.get(KERAS_IMPLEMENTS_ATTR)
    if isinstance(keras_name, str) and keras_name and not any(callee.attrs.get(k) for k in IMPLEMENTS_ATTRS):
        return _keras_implements(keras_name, dict(callee.attrs), None)
    for key in IMPLEMENTS_ATTRS:
        value = callee.attrs.get(key)
        if isinstance(value, FuncRef):
            return Implements(value.name, dict(value.attrs))
        if isinstance(value, str) and value:
            return _from_text(callee.name, value)
    return None


def _keras_implements(name: str, attrs: dict[str, Any], kinds: dict[str, str] | None) -> Implements:
    """What a tf_keras RNN function implements: ``api_implements`` names it, and its other
    public attributes (time_major, go_backwards) are the operation's attributes."""
    keep = [k for k in attrs if not k.startswith("_") and k not in _KERAS_INTERNAL_ATTRS]
    return Implements(name, {k: attrs[k] for k in keep}, None if kinds is None else {k: kinds[k] for k in keep})


def _from_attr_value(function: str, av: Any) -> Implements | None:
    kind = av.WhichOneof("value")
    if kind == "func":
        return _from_name_attr_list(av.func)
    if kind == "s" and av.s:
        return _from_text(function, av.s.decode("utf-8", "replace"))
    return None


def _from_text(function: str, text: str) -> Implements:
    """A plain name, or a ``NameAttrList`` in protobuf text form."""
    text = text.strip()
    if text.isidentifier() or not any(c in text for c in ':{ '):
        return Implements(text, {}, {})
    from google.protobuf import text_format
    from tensorflow.core.framework.attr_value_pb2 import NameAttrList

    try:
        parsed = text_format.Parse(text, NameAttrList())
    except text_format.ParseError as e:
        raise ConversionError(f"function {function!r}: its implements signature {text!r} does not parse: {e}") from None
    return _from_name_attr_list(parsed)


def _from_name_attr_list(nal: Any) -> Implements:
    attrs = {key: decode_attr(av) for key, av in nal.attr.items()}
    kinds = {key: av.WhichOneof("value") or "none" for key, av in nal.attr.items()}
    return Implements(nal.name, attrs, kinds)


def _fusion_for(ref: FuncRef, functions: Mapping[str, Any] | None) -> tuple[Implements, Any, str] | None:
    """What the called function implements, its fusion and the key the report counts it by
    (the registered name: ``lstm_*`` rather than each layer's ``lstm_<uuid>``)."""
    if ref.graph is None:
        return None
    implements = implements_of(ref.graph, functions)
    if implements is None:
        return None
    found = api.match(implements.name)
    if found is None and implements.fusable:
        found = implements.name, _custom_op_fusion(ref.graph.name, implements)
    return None if found is None else (implements, found[1], found[0])


def _custom_op_fusion(function: str, implements: Implements) -> Callable[..., Any]:
    """The fusion of a ``tfl_fusable_op`` function: one CUSTOM op named by the signature, on
    every argument, producing the function's results, its other attributes as options."""
    options = {k: v for k, v in implements.attrs.items() if k != FUSABLE_ATTR}
    for key, value in options.items():
        kind = (implements.kinds or {}).get(key) or _kind_of(value)
        if kind not in _OPTION_KINDS:
            raise ConversionError(
                f"function {function!r} implements {implements.name!r} with attribute {key!r} of kind {kind!r}: "
                "a fused custom op's options hold ints, floats, strings and bools (i, f, s, b) only")
    # The official converter reads a bool attribute as a 1-bit integer, sign-extended: true is -1.
    custom_options = api.encode_options({k: -int(v) if isinstance(v, bool) else v for k, v in options.items()})

    def fuse(b: api.Builder, *args: api.Tensor, **attrs: Any) -> Any:  # attrs: already in custom_options
        return b.custom(implements.name, list(args), options=custom_options)

    return fuse


def _kind_of(value: Any) -> str:
    """The AttrValue kind of a decoded attribute value (when no FunctionDef says)."""
    for kind, types in (("b", bool), ("i", int), ("f", float), ("s", str)):
        if isinstance(value, types):
            return kind
    return type(value).__name__


# -- replacing a call ---------------------------------------------------------------------------


def _replace_call(g: Graph, call: Node, callee: Graph, implements: Implements, fusion: Any,
                  resources: Mapping[Value, Variable]) -> list[Node]:
    """The nodes that replace ``call``: variable reads, constants and the fused ops."""
    where = f"function {callee.name!r} (called by node {call.name!r}) implements {implements.name!r}"
    b = _Builder(g, call, callee, implements, where, resources)
    kwargs = {k: v for k, v in implements.attrs.items() if k != FUSABLE_ATTR}
    try:
        if callable(getattr(fusion, "fuse", None)):
            if callable(getattr(fusion, "check", None)):
                _invoke(fusion.check, b, kwargs, where)
            returned = _invoke(fusion.fuse, b, kwargs, where)
        else:
            returned = _invoke(fusion, b, kwargs, where)
        b.finish(returned)
    except api.FusionError as e:
        raise ConversionError(f"{where}, but {e}") from None
    except ConversionError:
        raise
    except (NumliteError, TypeError, ValueError, KeyError, IndexError) as e:
        raise ConversionError(f"{where}: its fusion failed: {type(e).__name__}: {e}") from e
    for other in g.nodes:
        if call in other.control_inputs:
            other.control_inputs = [c for c in other.control_inputs if c is not call]
    return b.nodes


def emit_fusion(g: Graph, call: Node, callee: Graph, implements: Implements, fn: Callable[..., Any],
                where: str) -> tuple[list[Node], list[Value]]:
    """Run fusion ``fn`` for a call that is not (or not yet) in ``g``: the nodes it emits and the
    values it computes for the call's results, without rewiring anything (for passes that
    recognise a fusable computation themselves and build the call to describe it)."""
    b = _Builder(g, call, callee, implements, where, {})
    try:
        returned = _invoke(fn, b, {}, where)
        if isinstance(returned, api.Tensor):
            returned = [returned]
        values = [b._value(t) for t in returned]
    except api.FusionError as e:
        raise ConversionError(f"{where}, but {e}") from None
    return b.nodes, values


def _invoke(fn: Callable[..., Any], b: _Builder, kwargs: dict[str, Any], where: str) -> Any:
    """Call a fusion with the builder, the arguments and the attributes, after checking that
    they fit its parameters (so a mismatch names the function, not a Python frame)."""
    try:
        inspect.signature(fn).bind(b, *b.args, **kwargs)
    except TypeError as e:
        names = ", ".join(a.name for a in b.args)
        raise ConversionError(
            f"{where}, but its {len(b.args)} argument(s) ({names}) and attributes {sorted(kwargs)} do not fit "
            f"the fusion {getattr(fn, '__qualname__', fn)}{inspect.signature(fn)}: {e}") from None
    except ValueError:
        pass  # no signature to check (a builtin): the call itself will say
    return fn(b, *b.args, **kwargs)


class _Builder(api.Builder):
    """Builds the converter nodes that replace one call."""

    def __init__(self, g: Graph, call: Node, callee: Graph, implements: Implements, where: str,
                 resources: Mapping[Value, Variable]) -> None:
        self.graph, self.call, self.where, self._resources = g, call, where, resources
        self.function, self.name = callee.name, implements.name
        self.attrs = {k: v for k, v in implements.attrs.items() if k != FUSABLE_ATTR}
        self.nodes: list[Node] = []
        self._taken = {n.name for n in g.nodes}
        self._made: set[Value] = set()
        names = callee.input_names if len(callee.input_names) == len(callee.inputs) else []
        self.args = [self._argument(i, v, callee, names[i] if names else f"arg{i}")
                     for i, v in enumerate(call.inputs[:len(callee.inputs)])]
        self.results = [api.Tensor(f"result {i}", v.dtype, v.shape) for i, v in enumerate(call.outputs)]

    # -- arguments -------------------------------------------------------------------------------

    def _argument(self, i: int, value: Value, callee: Graph, name: str) -> api.Tensor:
        if value.dtype == "resource":
            value = self._read(i, value, callee, name)
        return api.Tensor(name, value.dtype, value.shape, value.const, value)

    def _read(self, i: int, handle: Value, callee: Graph, name: str) -> Value:
        """A read of variable argument ``i`` at the call, typed as the function reads it."""
        arg = callee.inputs[i]
        users = [n for n in callee.nodes if arg in n.inputs]
        if any(n.op in SIDE_EFFECT_OPS for n in users):
            raise ConversionError(f"{self.where}, but it assigns variable argument {name!r}: a fused op cannot")
        reads = [n for n in users if n.op == "ReadVariableOp"]
        if not reads:
            raise ConversionError(f"{self.where}, but it uses variable argument {name!r} other than by reading it")
        node = Node("ReadVariableOp", self._unique(f"{self.call.name}/{name}/read"), {"dtype": reads[0].attrs["dtype"]},
                    [handle])
        variable = self._resources.get(handle)  # its shape, which a loaded SavedModel's reads may not say
        shape = tuple(np.shape(variable.value)) if variable is not None else reads[0].outputs[0].shape
        node.outputs = [Value(node, 0, reads[0].outputs[0].dtype, shape)]
        self.nodes.append(node)
        return node.outputs[0]

    # -- the Builder API -------------------------------------------------------------------------

    def op(self, op_name: str, inputs: Sequence[api.Operand], outputs: Sequence[api.Tensor] | None = None,
           **options: Any) -> api.Tensor | list[api.Tensor]:
        if op_name not in schema.BUILTIN_OPERATOR_CODES or op_name == "CUSTOM":
            raise ConversionError(f"{self.where}: its fusion emits {op_name!r}, which is not a TFLite builtin "
                                  "operator (use b.custom for a custom op)")
        try:
            options_for(op_name, **options)
        except TypeError as e:
            raise ConversionError(f"{self.where}: its fusion gives {op_name} invalid options: {e}") from None
        return self._emit(op_name, inputs, outputs, {"op": op_name, "options": dict(options),
                                                     "custom_code": None, "custom_options": None})

    def custom(self, code: str, inputs: Sequence[api.Operand], options: Mapping[str, Any] | bytes | None = None,
               outputs: Sequence[api.Tensor] | None = None) -> api.Tensor | list[api.Tensor]:
        if not isinstance(code, str) or not code:
            raise ConversionError(f"{self.where}: a custom op needs a non-empty name, got {code!r}")
        encoded = options if isinstance(options, (bytes, bytearray)) else api.encode_options(options or {})
        return self._emit("CUSTOM", inputs, outputs, {"op": "CUSTOM", "options": {}, "custom_code": code,
                                                      "custom_options": bytes(encoded)})

    def variable(self, shape: Sequence[int | None], dtype: str, initial: api.Tensor | None = None,
                 name: str | None = None) -> api.Tensor:
        """A variable tensor written before every run by an op of its own: FILL with zeros, or a
        copy of ``initial``: a GATHER of every index of its last axis, or where that axis is not
        static a TRANSPOSE by the identity permutation. LiteRT requires a stateful op's state
        operands to be variable tensors and overwrites them with the final state, so a file
        whose state tensor is only initialised at allocation (what the official converter
        writes) gives another result at the second invoke. (A GATHER, which LiteRT's XNNPACK
        delegate never takes: with a dynamic batch and a WHILE elsewhere in the model, a state
        the delegate writes is not the one the LSTM reads.)"""
        spec = self.spec(shape, dtype, f"{self.call.name}/{name or 'state'}")
        if spec.dtype not in TFLITE_TYPES:
            raise ConversionError(f"{self.where}: a variable of dtype {dtype!r} has no TFLite equivalent")
        if initial is None:
            if spec.shape is None or any(d is None for d in spec.shape):
                raise self.fail(f"a zero variable needs a static shape, got {spec.shape}; pass initial= "
                                "(zeros made from the input's shape) for dimensions known at run time")
            op, inputs = "FILL", [np.array(spec.shape, np.int32), np.zeros((), spec.dtype)]
        else:
            if not isinstance(initial, api.Tensor) or initial.dtype != spec.dtype or not _compatible(initial.shape, spec.shape):
                raise self.fail(f"the initial value of variable {spec.name!r} must be a {spec.dtype} tensor of "
                                f"shape {list(spec.shape or [])}, got {initial!r}")
            op, inputs, options = _copy_of(initial, spec)
            return self._emit(op, inputs, [spec], {"op": op, "options": options, "custom_code": None,
                                                   "custom_options": None, "variable": True})
        return self._emit(op, inputs, [spec], {"op": op, "options": {}, "custom_code": None,
                                               "custom_options": None, "variable": True})

    def is_zeros(self, t: api.Tensor) -> bool:
        if super().is_zeros(t):
            return True
        value = t.ref
        while isinstance(value, Value) and value.node is not None and value.node.op in ("Identity", "IdentityN"):
            value = value.node.inputs[value.index if value.node.op == "IdentityN" else 0]
        if not isinstance(value, Value) or value.node is None:
            return False
        node = value.node
        if node.op == "ZerosLike":
            return True
        fill = node.inputs[1].const if node.op == "Fill" and len(node.inputs) == 2 else None
        return fill is not None and not np.any(fill)

    def const(self, value: Any, dtype: str | None = None, name: str | None = None) -> api.Tensor:
        array = np.asarray(value)
        if dtype is None and array.dtype == np.float64:
            dtype = "float32"  # Python floats: TFLite's float type
        elif dtype is None and array.dtype == np.int64 and not isinstance(value, np.ndarray):
            dtype = "int32"  # Python ints: TFLite's index type
        if dtype is not None:
            array = array.astype(dtype)
        c = self.graph.make_const(array, self._unique(name or f"{self.call.name}/const"))
        self.nodes.append(c.node)
        return api.Tensor(c.node.name, c.dtype, c.shape, array, c)

    # -- emitting --------------------------------------------------------------------------------

    def _emit(self, label: str, inputs: Sequence[api.Operand], outputs: Sequence[api.Tensor] | None,
              attrs: dict[str, Any]) -> api.Tensor | list[api.Tensor]:
        values, omitted = [], []
        for k, x in enumerate(inputs):
            if x is None:
                omitted.append(k)
            else:
                values.append(self._value(x))
        specs = list(self.results if outputs is None else outputs)
        for s in specs:
            if not isinstance(s, api.Tensor) or s.dtype not in TFLITE_TYPES:
                raise ConversionError(f"{self.where}: an output of its {label} op is not a spec with a TFLite "
                                      f"dtype: {s!r}")
        name = self.call.name if outputs is None else (specs[0].name if attrs.get("variable")
                                                        else f"{self.call.name}/{label.lower()}")
        node = Node(FUSED_OP, self._unique(name), {**attrs, "omitted": omitted}, values)
        node.outputs = [Value(node, i, s.dtype, s.shape) for i, s in enumerate(specs)]
        self.nodes.append(node)
        self._made.update(node.outputs)
        made = [api.Tensor(node.name if i == 0 else f"{node.name}:{i}", v.dtype, v.shape, None, v)
                for i, v in enumerate(node.outputs)]
        return made[0] if len(made) == 1 else made

    def _value(self, x: api.Operand) -> Value:
        if isinstance(x, api.Tensor):
            if not isinstance(x.ref, Value):
                raise ConversionError(f"{self.where}: its fusion passes {x!r}, which this builder did not make")
            return x.ref
        return self.const(x).ref

    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self._taken:
            name, k = f"{base}_{k}", k + 1
        self._taken.add(name)
        return name

    def finish(self, returned: Any) -> None:
        """Check what the fusion returned against the function's results and rewire them."""
        if isinstance(returned, api.Tensor):
            returned = [returned]
        if not isinstance(returned, (list, tuple)):
            raise self.fail(f"its fusion returned {type(returned).__name__}, not the tensor(s) replacing the results")
        results = list(returned)
        if len(results) != len(self.results):
            raise self.fail(f"its fusion returned {len(results)} tensor(s) for the function's "
                            f"{len(self.results)} result(s)")
        mapping: dict[Value, Value] = {}
        for k, (got, want) in enumerate(zip(results, self.results)):
            value = self._value(got)
            if value.dtype != want.dtype:
                raise self.fail(f"result {k} is {want.dtype}, the fusion gives {value.dtype}")
            if not _compatible(value.shape, want.shape):
                raise self.fail(f"result {k} has shape {list(want.shape)}, the fusion gives {list(value.shape)}")
            mapping[self.call.outputs[k]] = value
        self.graph.substitute(mapping)


def _copy_of(initial: api.Tensor, spec: api.Tensor) -> tuple[str, list[Any], dict[str, Any]]:
    """The op, inputs and options that copy ``initial`` exactly (see ``_Builder.variable``)."""
    shape = spec.shape or initial.shape or ()
    if shape and shape[-1] is not None:
        return "GATHER", [initial, np.arange(shape[-1], dtype=np.int32)], {"axis": len(shape) - 1, "batch_dims": 0}
    return "TRANSPOSE", [initial, np.arange(len(shape), dtype=np.int32)], {}


def _compatible(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


# -- lowering ----------------------------------------------------------------------------------


@lowers(FUSED_OP)
def lower_fused_op(cx: SubgraphLowering, node: Node):
    """The TFLite operator a fusion emitted, as it emitted it (folded if its inputs are all
    constant by now, as any operator is)."""
    a = node.attrs
    inputs: list[Any] = list(cx.inputs(node))
    for k in a["omitted"]:
        inputs.insert(k, None)
    outputs = [cx.out(node, i) for i in range(len(node.outputs))]
    if not a.get("variable"):
        return cx.emit(a["op"], inputs, outputs, custom_code=a["custom_code"], custom_options=a["custom_options"],
                       **a["options"])
    # A variable tensor (b.variable): never folded, since the op must rewrite it at every invoke.
    source = inputs[0] if a["op"] in ("TRANSPOSE", "GATHER") else None
    if source is not None and source.value is not None and source.value.size and np.all(source.value == source.value.flat[0]):
        # A uniform initial value known by now (Keras's zero state, folded): FILL stores no array.
        inputs, a = [cx.const(np.array(source.value.shape, np.int32), f"{node.name}/dims"),
                     cx.const(source.value.flat[0], f"{node.name}/value")], {**a, "op": "FILL", "options": {}}
    refs = cx.emit(a["op"], inputs, outputs, fold=False, **a["options"])
    for ref in refs:
        cx.builder.sg.tensors[ref.index].is_variable = True
    return refs
