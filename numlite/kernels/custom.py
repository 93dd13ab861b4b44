"""Custom ops written as plain Python functions, and the ``custom_ops=`` table that holds them.

``Interpreter(custom_ops={"my_fused_swish": fn})`` wraps ``fn`` in a :class:`PythonOp` kernel:
``fn`` gets the op's input arrays positionally (None for an omitted optional input) and its
options as keyword arguments, the decoded flexbuffer map of a custom op's ``custom_options`` or
the fields of a builtin's options when ``fn`` overrides a builtin kernel, and returns an array or
a tuple/list of arrays, one per output.

Where outputs live: an output whose shape the model declares statically (no -1 in its shape
signature) is planned in the arena like any other tensor, and ``fn``'s result must have exactly
that shape and the declared dtype; any other output is dynamic, allocated from the result
itself at each invoke (as LiteRT does for a kernel that resizes its output at eval time).
``python_op(fn, dynamic=True)`` makes every output dynamic, for models whose declared shapes are
placeholders (a composite function that returns dummy constants). A Kernel class passed in the
same table has full control: its ``prepare`` decides shapes, its ``eval`` fills preallocated
outputs.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from numlite.errors import InvalidInputError, InvokeError
from numlite.kernels.base import Kernel, Spec, TensorInfo

CustomOp = Callable[..., Any] | type[Kernel]


class PythonOp(Kernel):
    """Runs ``function`` (set by :func:`python_op`) as the node's kernel."""

    function: Callable[..., Any]
    dynamic: bool = False  # every output takes its shape from the result
    foldable = False  # a user function may have side effects; LiteRT never folds custom ops

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        if node.custom_options is not None:
            self.kwargs = self.custom_options
        else:  # a builtin overridden: its options matter (a fused activation, strides...)
            self.kwargs = self.options.fields() if self.options is not None else {}
        self._checked_arity: int | None = None

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self._check_callable(len(ins))
        specs = []
        for declared, o in zip(self.declared_outputs(), self.node.outputs):
            if declared is None:
                specs.append(Spec(None, np.dtype(np.float32)))
                continue
            static = not self.dynamic and _is_static(self.node.runtime.graph.tensors[o])
            specs.append(Spec(declared.shape if static else None, declared.dtype))
        return specs

    def _check_callable(self, arity: int) -> None:
        """Refuse at allocation, not at the first invoke, a function that cannot take this
        node's inputs and options."""
        if self._checked_arity == arity:
            return
        try:
            signature = inspect.signature(self.function)
        except (TypeError, ValueError):  # builtins and some C callables have none
            signature = None
        if signature is not None:
            try:
                signature.bind(*([None] * arity), **self.kwargs)
            except TypeError as e:
                raise self.fail(
                    f"the Python function {_name(self.function)} cannot be called with the op's {arity} input(s)"
                    f" and options {sorted(self.kwargs)}: {e}"
                ) from None
        self._checked_arity = arity

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        result = self.function(*[_read_only(a) for a in ins], **self.kwargs)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != len(outs):
            raise InvokeError(f"the Python function returned {len(results)} output(s), the model has {len(outs)}")
        for k, (value, out) in enumerate(zip(results, outs)):
            o = self.node.outputs[k]
            if o < 0:
                continue
            value = self._checked(k, o, value, out)
            if out is None:  # dynamic: the result becomes the tensor's memory
                outs[k] = value.copy() if any(a is not None and np.may_share_memory(value, a) for a in ins) else value
            else:
                np.copyto(out, value)

    def _checked(self, k: int, o: int, value: Any, out: np.ndarray | None) -> np.ndarray:
        """The result for output ``k`` as an array of the declared dtype (and of the planned
        shape when the output is static), or an error saying how it differs."""
        runtime = self.node.runtime
        declared = runtime.dtypes[o]
        if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
            # A Python number has no dtype of its own (np.float64 is a float too, and has one).
            value = np.asarray(value, declared)
        if not isinstance(value, (np.ndarray, np.generic)):
            raise InvokeError(f"output {k} of the Python function is a {type(value).__name__}, not a NumPy array")
        value = np.asarray(value)
        t = runtime.graph.tensors[o]
        if value.dtype != declared:
            raise InvokeError(
                f"output {k} of the Python function has dtype {value.dtype.name} but the model declares"
                f" tensor {o} ({t.name!r}) as {declared.name}"
            )
        if out is not None and value.shape != out.shape:
            raise InvokeError(
                f"output {k} of the Python function has shape {value.shape} but the model declares tensor {o}"
                f" ({t.name!r}) with the static shape {out.shape}; return that shape, or register"
                " python_op(fn, dynamic=True) or a Kernel class whose prepare computes the shapes"
            )
        return value


def python_op(function: Callable[..., Any], dynamic: bool = False, name: str | None = None) -> type[Kernel]:
    """The kernel class that runs ``function`` as an op (what ``custom_ops`` does with a function).

    Args:
      function: takes the input arrays positionally and the op's options as keyword arguments;
        returns an array, or a tuple/list with one array per output.
      dynamic: take every output's shape from the result at each invoke, ignoring the shapes the
        model declares (for placeholder declarations); by default only outputs the model leaves
        dynamic are.
      name: the kernel class's name, for messages (default: the function's name).
    """
    if not callable(function) or isinstance(function, type):
        raise InvalidInputError(f"python_op needs a function, got {function!r}")
    label = name or _name(function)
    return type(f"PythonOp[{label}]", (PythonOp,), {"function": staticmethod(function), "dynamic": bool(dynamic)})


def resolve_custom_ops(custom_ops: Mapping[str, CustomOp] | None) -> dict[str, type[Kernel]]:
    """Kernel classes for a ``custom_ops=`` table: Kernel subclasses as they are, other callables
    wrapped by :func:`python_op`; anything else is an error naming the op."""
    kernels: dict[str, type[Kernel]] = {}
    for op_name, impl in (custom_ops or {}).items():
        if not isinstance(op_name, str) or not op_name:
            raise InvalidInputError(f"custom_ops keys are op names (a custom code or a builtin name), got {op_name!r}")
        if isinstance(impl, type):
            if not issubclass(impl, Kernel):
                raise InvalidInputError(
                    f"custom op {op_name!r}: the class {impl.__name__} is not a numlite.kernels.Kernel subclass"
                    " (give a Kernel subclass with prepare and eval, or a plain function)"
                )
            kernels[op_name] = impl
        elif callable(impl):
            kernels[op_name] = python_op(impl, name=op_name)
        else:
            raise InvalidInputError(f"custom op {op_name!r}: expected a function or a Kernel class, got {impl!r}")
    return kernels


def _is_static(tensor: Any) -> bool:
    """Whether the model fixes a tensor's shape: no -1 in its shape signature, and a known rank
    (a shape of () without has_rank may stand for an unknown rank)."""
    signature = tensor.shape_signature if tensor.shape_signature is not None else tensor.shape
    if any(int(d) < 0 for d in signature):
        return False
    return len(tensor.shape) > 0 or bool(tensor.has_rank)


def _read_only(array: np.ndarray | None) -> np.ndarray | None:
    """A read-only view, so that a function cannot scribble over the arena it was handed."""
    if array is None or not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function)
