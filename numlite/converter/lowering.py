"""Lowering: each converter graph becomes one TFLite subgraph, node by node.

A lowering rule (registered in :data:`numlite.converter.lower.RULES` by TF op type) receives the
:class:`SubgraphLowering` and the node, and returns one TFLite tensor per TF output. Rules read
their inputs with ``cx.input(node, i)`` (or ``cx.const_input`` for values they need at
conversion time), and emit TFLite operators with ``cx.emit``. ``emit`` folds an operator whose
inputs are all constants by running numlite's own kernel on them, so rules never need a
special case for constant inputs.

Functions called by control flow become further subgraphs via
:meth:`ProgramLowering.lower_function`. Resource variables never cross subgraph boundaries:
a resource value is bound to its :class:`Variable`, and each subgraph that reads or writes it
opens its own VAR_HANDLE by shared name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np

from numlite.converter.builder import TFLITE_TYPES, ModelBuilder, SubgraphBuilder, TensorRef, options_for
from numlite.converter.graph import Graph, Node, Value
from numlite.errors import ConversionError, NumliteError
from numlite.kernels import evaluate

# Folding at conversion time never makes a constant larger than this (or than its inputs).
MAX_FOLDED_BYTES = 1 << 20


@dataclass(eq=False)
class Variable:
    """A resource variable of the program: its shared name and initial value."""

    name: str
    value: np.ndarray


@dataclass(eq=False)
class OutSpec:
    """Name, shape (-1 where dynamic, None for unknown rank) and TFLite type of a new tensor."""

    name: str
    shape: tuple[int, ...] | None
    type: str


Lowered = Union[TensorRef, Variable, None]
Rule = Callable[["SubgraphLowering", Node], Sequence[Lowered]]


def tflite_type(dtype: str) -> str:
    try:
        return TFLITE_TYPES[dtype]
    except KeyError:
        raise ConversionError(f"TensorFlow dtype {dtype} has no TFLite equivalent") from None


def tflite_shape(value: Value) -> tuple[int, ...] | None:
    return None if value.shape is None else tuple(-1 if d is None else d for d in value.shape)


class ProgramLowering:
    """Lowers a whole program (entry graphs and every function they call) into one model."""

    def __init__(self, rules: dict[str, Rule], resources: dict[Value, Variable]) -> None:
        self.rules = rules
        self.resources = resources
        self.builder = ModelBuilder()
        self.variables: dict[str, Variable] = {}  # variables that stay variables, by shared name
        self.entries: list[int] = []  # subgraphs that are signatures' entry points

    def lower_entry(self, graph: Graph, input_names: list[str]) -> tuple[int, list[TensorRef], list[TensorRef]]:
        """Lower a signature's graph; returns its subgraph index, input and output tensors."""
        specs = [OutSpec(name, tflite_shape(v), tflite_type(v.dtype)) for name, v in zip(input_names, graph.inputs)]
        index, inputs, outputs = self.lower_function(graph, specs, name=graph.name)
        self.entries.append(index)
        return index, inputs, outputs

    def lower_function(
        self, graph: Graph, args: Sequence[OutSpec | Variable], name: str | None = None,
        extra_inputs: Sequence[OutSpec] = (), loop_body: bool = False,
    ) -> tuple[int, list[TensorRef], list[TensorRef]]:
        """Lower ``graph`` into a new subgraph whose inputs have the given specs.

        An argument given as a :class:`Variable` is bound to that variable instead of becoming an
        input. ``extra_inputs`` come first and are unused (a Case branch receives the branch
        index it does not need). Returns the subgraph index, its input tensors and its output
        tensors (results that are variables are left out of the outputs).
        """
        if len(args) != len(graph.inputs):
            raise ConversionError(f"function {graph.name!r} takes {len(graph.inputs)} arguments, given {len(args)}")
        cx, inputs = self.new_subgraph(name or graph.name, list(extra_inputs), graph)
        for value, arg in zip(graph.inputs, args):
            if isinstance(arg, Variable):
                cx.env[value] = arg
            else:
                ref = cx.builder.tensor(arg.name, arg.shape, arg.type)
                cx.env[value] = ref
                inputs.append(ref)
        cx.lower_nodes()
        outputs = [t for t in (cx.value(v) for v in graph.outputs) if isinstance(t, TensorRef)]
        if loop_body:
            outputs = [cx.copy(t) if t in inputs and inputs.index(t) != k else t for k, t in enumerate(outputs)]
        cx.finish(inputs, outputs)
        return cx.builder.index, inputs, outputs

    def new_subgraph(self, name: str, inputs: list[OutSpec], graph: Graph | None = None
                     ) -> tuple[SubgraphLowering, list[TensorRef]]:
        """An empty subgraph with the given inputs, for rules that build one by hand; call
        ``cx.finish(inputs, outputs)`` when it is complete."""
        cx = SubgraphLowering(self, self.builder.subgraph(name), graph or Graph(name))
        return cx, [cx.builder.tensor(s.name, s.shape, s.type) for s in inputs]


class SubgraphLowering:
    """The state of lowering one graph into one subgraph: what each TF value became."""

    def __init__(self, program: ProgramLowering, builder: SubgraphBuilder, graph: Graph) -> None:
        self.program = program
        self.builder = builder
        self.graph = graph
        self.env: dict[Value, Lowered] = {}
        self._handles: dict[str, TensorRef] = {}

    # -- walking -------------------------------------------------------------------------------

    def lower_nodes(self) -> None:
        for node in self.graph.nodes:
            if node.op == "Const":
                self.env[node.outputs[0]] = self.const(node.attrs["value"], node.name, tflite_type(node.outputs[0].dtype))
                continue
            rule = self.program.rules.get(node.op)
            if rule is None:
                raise self.fail(node, f"no lowering for TensorFlow op {node.op}")
            try:
                results = list(rule(self, node))
            except (ConversionError, NumliteError):
                raise
            except Exception as e:
                raise self.fail(node, f"lowering failed: {type(e).__name__}: {e}") from e
            if len(results) != len(node.outputs):
                raise self.fail(node, f"lowering gave {len(results)} results for {len(node.outputs)} outputs")
            for value, result in zip(node.outputs, results):
                self.env[value] = result

    def lower_inline(self, graph: Graph, args: Sequence[Lowered]) -> list[Lowered]:
        """Lower a function's nodes into this subgraph with its arguments bound to ``args``."""
        inner = SubgraphLowering(self.program, self.builder, graph)
        inner._handles = self._handles
        inner.env.update(zip(graph.inputs, args))
        inner.lower_nodes()
        return [inner.value(v) for v in graph.outputs]

    def copy(self, x: TensorRef) -> TensorRef:
        """A new tensor holding the same value as ``x`` (a RESHAPE to its own shape, which LiteRT
        does not alias with a subgraph input)."""
        if x.shape is not None and sum(d < 0 for d in x.shape) <= 1:
            shape = self.const(np.array(x.shape, np.int32), f"{x.name}/copy_shape")
        else:
            shape = self.emit1("SHAPE", [x], self.spec(f"{x.name}/copy_shape", (x.rank if x.rank is not None else -1,), "INT32"))
        return self.emit1("RESHAPE", [x, shape], self.spec(f"{x.name}/copy", x.shape, x.type), fold=False)

    def finish(self, inputs: Sequence[TensorRef], outputs: Sequence[TensorRef]) -> None:
        """Set the subgraph's input and output tensors."""
        self.builder.sg.inputs = [t.index for t in inputs]
        self.builder.sg.outputs = [t.index for t in outputs]

    def value(self, value: Value) -> Lowered:
        """What a TF value became (a tensor, or the variable a resource refers to)."""
        if value in self.env:
            return self.env[value]
        if value.dtype == "resource" and value in self.program.resources:
            return self.program.resources[value]
        raise ConversionError(f"{self.where()}: value {value.name} is used before it is defined")

    # -- what rules use ------------------------------------------------------------------------

    def input(self, node: Node, i: int) -> TensorRef:
        """Input ``i`` of ``node`` as a tensor of this subgraph."""
        ref = self.value(node.inputs[i])
        if not isinstance(ref, TensorRef):
            raise self.fail(node, f"input {i} ({node.inputs[i].name}) is not a tensor here")
        return ref

    def inputs(self, node: Node) -> list[TensorRef]:
        return [self.input(node, i) for i in range(len(node.inputs))]

    def const_input(self, node: Node, i: int) -> np.ndarray | None:
        """The value of input ``i`` if it is known at conversion time, else None."""
        ref = self.value(node.inputs[i])
        return ref.value if isinstance(ref, TensorRef) else None

    def require_const(self, node: Node, i: int, what: str = "") -> np.ndarray:
        value = self.const_input(node, i)
        if value is None:
            raise self.fail(node, f"input {i} ({what or node.inputs[i].name}) must be a constant")
        return value

    def variable(self, node: Node, i: int) -> Variable:
        ref = self.value(node.inputs[i])
        if not isinstance(ref, Variable):
            raise self.fail(node, f"input {i} ({node.inputs[i].name}) is not a known resource variable")
        return ref

    def out(self, node: Node, i: int = 0, shape: Any = "same", type_: str | None = None) -> OutSpec:
        """The spec of TF output ``i`` of ``node``, optionally with another shape or type."""
        value = node.outputs[i]
        name = node.name if i == 0 else f"{node.name}:{i}"
        return OutSpec(
            name,
            tflite_shape(value) if shape == "same" else (None if shape is None else tuple(shape)),
            type_ or tflite_type(value.dtype),
        )

    def spec(self, name: str, shape: Sequence[int] | None, type_: str) -> OutSpec:
        return OutSpec(name, None if shape is None else tuple(int(d) for d in shape), type_)

    def const(self, value: Any, name: str, type_: str | None = None) -> TensorRef:
        return self.builder.const(value, name, type_)

    def emit(
        self,
        op_name: str,
        inputs: Sequence[TensorRef | None],
        outputs: Sequence[OutSpec],
        custom_code: str | None = None,
        custom_options: bytes | None = None,
        fold: bool = True,
        **options: Any,
    ) -> list[TensorRef]:
        """Append a TFLite operator (or fold it if every input is a constant); returns its outputs."""
        opts = options_for(op_name, **options) if custom_code is None else None
        if fold and custom_code is None:
            folded = self._fold(op_name, inputs, outputs, opts)
            if folded is not None:
                return folded
        refs = [self.builder.tensor(s.name, s.shape, s.type) for s in outputs]
        self.builder.op(op_name, inputs, refs, opts, custom_code, custom_options)
        return refs

    def emit1(self, op_name: str, inputs: Sequence[TensorRef | None], output: OutSpec, **options: Any) -> TensorRef:
        """``emit`` for the common one-output case."""
        return self.emit(op_name, inputs, [output], **options)[0]

    def var_handle(self, variable: Variable) -> TensorRef:
        """This subgraph's VAR_HANDLE for a variable (one per variable per subgraph)."""
        self.program.variables[variable.name] = variable
        if variable.name not in self._handles:
            ref = self.builder.tensor(f"{variable.name}/handle", (), "RESOURCE")
            self.builder.op("VAR_HANDLE", [], [ref], options_for("VAR_HANDLE", container="", shared_name=variable.name))
            self._handles[variable.name] = ref
        return self._handles[variable.name]

    def where(self) -> str:
        return f"function {self.graph.name!r}"

    def fail(self, node: Node, message: str) -> ConversionError:
        """An error naming the TF node, its op and the function it is in."""
        return ConversionError(f"{self.where()}, node {node.name!r} ({node.op}): {message}")

    # -- folding -------------------------------------------------------------------------------

    def _fold(self, op_name: str, inputs: Sequence[TensorRef | None], outputs: Sequence[OutSpec],
              opts: Any) -> list[TensorRef] | None:
        present = [t for t in inputs if t is not None]
        if not present or any(t.value is None for t in present):
            return None
        limit = max(MAX_FOLDED_BYTES, sum(t.value.nbytes for t in present))
        try:
            outs = evaluate(op_name, opts, [None if t is None else t.value for t in inputs], len(outputs),
                            [None if t is None else t.name for t in inputs], max_output_bytes=limit)
        except NumliteError:
            return None  # leave it to run time, where the error names the node
        if outs is None:
            return None
        return [self.const(np.asarray(v), s.name, s.type) for v, s in zip(outs, outputs)]
