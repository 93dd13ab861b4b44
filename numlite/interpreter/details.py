"""LiteRT's debugging surface on ``numlite.Interpreter``: the underscored methods scripts call.

Scripts written against ``tf.lite.Interpreter`` / ``ai_edge_litert.interpreter.Interpreter``
reach past the public API to list a model's operators (``_get_ops_details``), read one tensor's
details (``_get_tensor_details``) or a signature's tensor indices (``_get_full_signature_list``).
:class:`InterpreterDetails` gives ``numlite.Interpreter`` those methods with LiteRT's keys and
values: the same dictionaries, numpy int32 arrays where LiteRT returns arrays, numpy scalar
types (``numpy.float32``...) as dtypes, lists where LiteRT returns lists.

What differs, and why (see docs/debugging-api.md):

- numlite has no delegates, so ``_get_ops_details()`` lists the model's operators only, before
  and after ``allocate_tensors()``; LiteRT appends one ``DELEGATE`` node per partition that its
  default XNNPACK delegate takes (created lazily at the first ``allocate_tensors()``).
- ``_get_op_details`` and ``_get_ops_details`` take an optional ``subgraph_index`` (LiteRT's
  reach subgraph 0 only); with the default they return exactly what LiteRT returns.
- ``_native_handle()`` (a ``tflite::Interpreter*`` for C++ extensions) and the attributes that
  hold LiteRT's C++ objects (``_interpreter``, the pybind wrapper; ``_delegates``...) have no
  meaning without LiteRT's C++ runtime: they raise :class:`numlite.UnavailableError` saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from numlite.errors import InvalidInputError, UnavailableError

if TYPE_CHECKING:
    from numlite.interpreter.runtime import SubgraphRuntime
    from numlite.model import Model


# Instance attributes of LiteRT's Interpreter that hold its C++ objects, with what numlite offers.
LITERT_INTERNALS = {
    "_interpreter": "LiteRT's C++ InterpreterWrapper (NumNodes, NodeName, TensorType...); numlite's Interpreter"
                    " methods (_get_ops_details, _get_tensor_details...) and interpreter.subgraph(i) give the same facts",
    "_delegates": "LiteRT's C++ delegates; numlite has none (it accepts and ignores experimental_delegates)",
    "_custom_op_registerers": "the C++ functions that register LiteRT custom ops; numlite takes Python ones:"
                              " Interpreter(custom_ops={name: function or Kernel class})",
    "_metrics": "LiteRT's usage metrics; numlite keeps none",
}


class InterpreterDetails:
    """The detail methods LiteRT's Python Interpreter has beyond its public API.

    Mixed into :class:`numlite.Interpreter`; it relies on the interpreter's ``model``,
    ``subgraph(index)``, ``_tensor_details(index, subgraph_index)`` and ``_signatures``.
    """

    model: "Model"
    _signatures: dict[str, Any]
    _compress_zero_points: bool

    def subgraph(self, index: int = 0) -> "SubgraphRuntime":  # implemented by Interpreter
        raise NotImplementedError

    def _tensor_details(self, tensor_index: int, subgraph_index: int) -> dict[str, Any]:  # by Interpreter
        raise NotImplementedError

    # -- operators ------------------------------------------------------------------------------

    def _get_op_details(self, op_index: int, subgraph_index: int = 0) -> dict[str, Any]:
        """One operator (node) as LiteRT describes it.

        Returns ``{"index", "op_name", "inputs", "outputs", "operand_types", "result_types"}``:
        ``op_name`` is the builtin name (``"CONV_2D"``) or a custom op's code; ``inputs`` and
        ``outputs`` are int32 arrays of tensor indices (-1 for an omitted optional input);
        ``operand_types`` and ``result_types`` list the dtypes (``numpy.float32``...) of the
        tensors that are present. ``subgraph_index`` is numlite's addition (LiteRT describes
        subgraph 0 only).

        Raises:
          InvalidInputError (a ValueError, as in LiteRT): the node or subgraph does not exist.
        """
        runtime = self.subgraph(subgraph_index)  # checks the subgraph index
        operators = self.model.subgraphs[runtime.index].operators
        index = int(op_index)
        if not 0 <= index < len(operators):
            raise InvalidInputError(
                f"Invalid node index {op_index}: subgraph {runtime.index} has {len(operators)} operator(s)"
            )
        op = operators[index]
        outputs_list = list(op.outputs)
        if runtime.allocated and self.model.op_name(op) == "WHILE":
            outputs_list = self._while_outputs_as_prepared(runtime.index, op)
        inputs = np.array(op.inputs, np.int32)
        outputs = np.array(outputs_list, np.int32)
        return {
            "index": index,
            "op_name": self.model.op_name(op),
            "inputs": inputs,
            "outputs": outputs,
            "operand_types": [self._tensor_details(i, runtime.index)["dtype"] for i in op.inputs if i != -1],
            "result_types": [self._tensor_details(i, runtime.index)["dtype"] for i in outputs_list if i != -1],
        }

    def _while_outputs_as_prepared(self, subgraph_index: int, op: Any) -> list[int]:
        """A WHILE node's outputs as LiteRT reports them once the node is prepared: an output
        that nothing in its subgraph reads (no operator, not a subgraph output) and whose loop
        variable the body passes through unchanged (body output k is body input k) becomes -1.
        LiteRT's WHILE kernel drops such outputs at prepare time so as not to copy them."""
        graph = self.model.subgraphs[subgraph_index]
        body_index = getattr(op.builtin_options, "body_subgraph_index", None)
        if body_index is None or not 0 <= body_index < len(self.model.subgraphs):
            return list(op.outputs)
        body = self.model.subgraphs[body_index]
        read = set(graph.outputs)
        for other in graph.operators:
            read.update(other.inputs)
        outputs = list(op.outputs)
        for k, o in enumerate(outputs):
            passthrough = k < len(body.inputs) and k < len(body.outputs) and body.outputs[k] == body.inputs[k]
            if o != -1 and passthrough and o not in read:
                outputs[k] = -1
        return outputs

    def _get_ops_details(self, subgraph_index: int = 0) -> list[dict[str, Any]]:
        """Every operator of a subgraph (default: the main one), in the model's order, each as
        :meth:`_get_op_details` describes it."""
        runtime = self.subgraph(subgraph_index)
        count = len(self.model.subgraphs[runtime.index].operators)
        return [self._get_op_details(n, runtime.index) for n in range(count)]

    # -- tensors and signatures -----------------------------------------------------------------

    def _get_tensor_details(self, tensor_index: int, subgraph_index: int = 0) -> dict[str, Any]:
        """One tensor's details, the dictionary ``get_tensor_details()`` lists (name, index,
        shape, shape_signature, dtype, quantization, quantization_parameters,
        sparsity_parameters). LiteRT 2.x requires ``subgraph_index``; older tf.lite had none,
        so it defaults to the main subgraph here.

        Raises:
          InvalidInputError (a ValueError, as in LiteRT): no such tensor or subgraph.
        """
        return self._tensor_details(int(tensor_index), int(subgraph_index))

    def _get_full_signature_list(self) -> dict[str, dict[str, dict[str, int]]]:
        """Every SignatureDef with its tensor indices:
        ``{key: {"inputs": {name: tensor index}, "outputs": {name: tensor index}}}``, names in
        alphabetical order as LiteRT lists them. (``get_signature_list()`` gives the names
        only.)"""
        return {
            key: {"inputs": dict(sorted(s.inputs.items())), "outputs": dict(sorted(s.outputs.items()))}
            for key, s in self._signatures.items()
        }

    @property
    def _signature_defs(self) -> dict[str, dict[str, list[str]]]:
        """What LiteRT keeps from ``get_signature_list()`` at construction (its
        ``get_signature_runner`` reads it)."""
        return self.get_signature_list()  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that do not exist: LiteRT's C++ objects get an explanation.
        if name in LITERT_INTERNALS:
            raise UnavailableError(
                f"numlite.Interpreter has no {name}: in LiteRT it holds {LITERT_INTERNALS[name]}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- memory safety and native handles -------------------------------------------------------

    def _safe_to_run(self) -> bool:
        """Whether calls that may reallocate memory are safe. LiteRT says no while a NumPy view
        from ``tensor()`` is alive, because reallocating would leave the view dangling; a
        numlite view keeps the array it views alive, so it is always safe (a view held across
        ``allocate_tensors()`` may then show an old buffer, never freed memory)."""
        return True

    def _ensure_safe(self) -> None:
        """LiteRT raises RuntimeError here while views from ``tensor()`` are alive; numlite's
        views cannot dangle (see :meth:`_safe_to_run`), so there is nothing to check."""

    def _native_handle(self) -> int:
        """LiteRT returns the address of its C++ ``tflite::Interpreter`` for C++ extensions;
        numlite runs in NumPy and has none."""
        raise UnavailableError(
            "_native_handle() returns a pointer to LiteRT's C++ tflite::Interpreter, for C++ extensions;"
            " numlite runs models in NumPy and has no C++ interpreter. Extend numlite in Python instead"
            " (custom_ops=, interpreter.subgraph(i), the profiler), or use ai_edge_litert for C++ extensions"
        )

    @property
    def experimental_compress_quantization_zero_points(self) -> bool:
        """The constructor's ``experimental_compress_quantization_zero_points``: when set,
        tensor details report a per-channel tensor's zero points as one value when they are
        all equal, as LiteRT does."""
        return self._compress_zero_points


def compress_zero_points(zero_points: np.ndarray) -> np.ndarray:
    """LiteRT's ``experimental_compress_quantization_zero_points``: per-channel zero points
    that are all equal are kept as one (the scales stay per channel)."""
    if len(zero_points) > 1 and bool(np.all(zero_points == zero_points[0])):
        return zero_points[:1]
    return zero_points
