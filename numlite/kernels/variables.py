"""Resource variables: VAR_HANDLE, READ_VARIABLE and ASSIGN_VARIABLE.

A VAR_HANDLE names a variable by (container, shared_name) and outputs an integer handle; the
values live in the interpreter, shared by every subgraph, until ``reset_all_variables`` clears
them (the converter's CALL_ONCE initialiser then assigns them again on the next invoke).
Reading a variable nobody assigned is an error: LiteRT silently returns whatever memory is
there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.errors import NumliteError
from numlite.kernels.base import Kernel, Spec, register


class VariableStore:
    """The resources of one interpreter: the variables (a handle per name, and the values), and
    the hash tables of numlite/kernels/hashtable.py by table id."""

    def __init__(self) -> None:
        self.values: dict[int, np.ndarray] = {}
        self.handles: dict[tuple[str, str], int] = {}
        self.names: list[tuple[str, str]] = []
        self.tables: dict[int, Any] = {}  # table_id -> HashTable
        # Bumped whenever a variable's array is replaced or forgotten (not when it is written in
        # place): the compiled engine keeps variables in arrays of its own, which it puts here,
        # and checks with one comparison per invoke that they are still the ones in use.
        self.version = 0

    def clear(self) -> None:
        """Forget every variable's value (handles stay valid; hash tables stay filled, as
        LiteRT keeps its resources: their import runs once)."""
        self.values.clear()
        self.version += 1

    def handle(self, container: str, shared_name: str) -> int:
        key = (container, shared_name)
        if key not in self.handles:
            self.handles[key] = len(self.names)
            self.names.append(key)
        return self.handles[key]

    def describe(self, handle: int) -> str:
        container, name = self.names[handle] if 0 <= handle < len(self.names) else ("?", f"#{handle}")
        return f"{container}/{name}" if container else name

    def read(self, handle: int) -> np.ndarray:
        if handle not in self.values:
            raise NumliteError(
                f"variable {self.describe(handle)!r} is read before anything assigned it"
                " (LiteRT would return uninitialised memory here)"
            )
        return self.values[handle]

    def assign(self, handle: int, value: np.ndarray) -> None:
        current = self.values.get(handle)
        if current is not None and current.shape == value.shape and current.dtype == value.dtype:
            np.copyto(current, value)  # reuse the variable's memory
        else:
            self.values[handle] = np.array(value, copy=True)
            self.version += 1


def _handle(array: np.ndarray) -> int:
    return int(array.reshape(-1)[0])


@register("VAR_HANDLE")
class VarHandle(Kernel):
    """Outputs the handle of the variable named by the options (folded at allocation)."""

    def prepare(self, ins):
        store = self.node.runtime.interpreter.variables
        self.handle = store.handle(self.options.container or "", self.options.shared_name or "")
        out = self.node.outputs[0]
        return [Spec(self.node.runtime.graph.tensors[out].shape, self.node.runtime.dtypes[out])]

    def eval(self, ins, outs):
        outs[0].fill(self.handle)


@register("READ_VARIABLE")
class ReadVariable(Kernel):
    """The current value of a variable."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self.store = self.node.runtime.interpreter.variables
        rt, out = self.node.runtime, self.node.outputs[0]
        t = rt.graph.tensors[out]
        signature = t.shape_signature if t.shape_signature is not None else t.shape
        # LiteRT sizes a rank-0 output at invoke (it cannot tell a scalar from an unranked tensor)
        static = len(signature) > 0 and all(d >= 0 for d in signature)
        self.dtype = rt.dtypes[out]
        return [Spec(tuple(t.shape) if static else None, self.dtype)]

    def eval(self, ins, outs):
        value = self.store.read(_handle(ins[0]))
        if value.dtype != self.dtype:  # LiteRT: "variable_tensor->type != output->type"
            raise NumliteError(f"variable holds {value.dtype.name}, the model reads it as {self.dtype.name}")
        if outs[0] is None:
            outs[0] = np.array(value, copy=True)
        elif value.shape != outs[0].shape:
            raise NumliteError(f"variable has shape {value.shape}, the model declares {outs[0].shape}")
        else:
            np.copyto(outs[0], value)


@register("ASSIGN_VARIABLE")
class AssignVariable(Kernel):
    """Store a value in a variable (the value is copied)."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        self.store = self.node.runtime.interpreter.variables
        return []

    def eval(self, ins, outs):
        self.store.assign(_handle(ins[0]), ins[1])
