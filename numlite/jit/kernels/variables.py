"""Resource variables in compiled code: VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE.

Each variable the compiled model reads or assigns is an array of its own (its *state*), made at
generation with the shape and dtype every use of it agrees on, outside the arenas (so it is
never shared by lifetime), read and written in place through its address, like a constant.
A READ_VARIABLE is a copy from it, an ASSIGN_VARIABLE a copy into it.

The interpreter keeps variables in its :class:`numlite.kernels.variables.VariableStore`. Before
a compiled invoke, :class:`State` makes the compiled arrays the store's own (one comparison of
the store's ``version`` per invoke when nothing changed): it copies each variable's value into
its compiled array and puts that array in the store. So ``reset_all_variables``, NumPy invokes,
other signatures and the store see the same values. An invoke whose CALL_ONCE initialiser has
not run (the first, and the first after ``reset_all_variables``) runs on the NumPy engine, which
runs it; so does one whose variable nothing assigned yet, or holds another shape or dtype than
the compiled code expects (the NumPy engine raises its own error, or assigns it first).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import copy, require


def _handle(node: Any) -> int:
    handle = node.ins[0]
    require(handle is not None and handle.value is not None and handle.size == 1,
            f"{node.op_name} of a variable handle computed at run time is not compiled")
    return int(np.asarray(handle.value).reshape(-1)[0])


def state(g: Any, node: Any, handle: int, like: Any) -> Any:
    """The compiled array of variable ``handle`` (an operand of ``like``'s shape and dtype),
    made at its first use; another shape or dtype elsewhere stays on NumPy (whose READ_VARIABLE
    raises on the mismatch)."""
    from numlite.jit.codegen import Operand

    known = g.gen.variables.get(handle)
    if known is None:
        array = np.zeros(like.shape, like.dtype)
        slot = g.gen.arenas.const(array)
        g.gen.variables[handle] = (slot, array)
    else:
        slot, array = known
        require(array.shape == tuple(like.shape) and array.dtype == like.dtype,
                f"variable {handle} is used as {array.dtype.name}{list(array.shape)} and as {like.dtype.name}{list(like.shape)}")
    g.gen.slots.add(slot)
    return Operand(slot.name, array.shape, array.dtype, None, slot)


@emits("READ_VARIABLE")
def emit_read(node, g) -> None:
    out = node.outs[0]
    copy(g, out, state(g, node, _handle(node), out))


@emits("ASSIGN_VARIABLE")
def emit_assign(node, g) -> None:
    value = node.ins[1]
    require(value is not None, "ASSIGN_VARIABLE without a value is not compiled")
    target = state(g, node, _handle(node), value)
    copy(g, target, value)


@emits("VAR_HANDLE")
def emit_handle(node, g) -> None:
    """(Folded at allocation in practice: its output is a constant.)"""
    out = node.outs[0]
    require(out.size == 1 and hasattr(node.kernel, "handle"), "VAR_HANDLE is not prepared")
    g.line(f"{out.name}[0] = {int(node.kernel.handle)}")


@emits("CALL_ONCE")
def emit_call_once(node, g) -> None:
    """No code: the NumPy engine runs the initialiser (see :class:`State`)."""
    require(len(g.gen.stack) == 1 and node.kernel is not None, "CALL_ONCE inside control flow is not compiled")
    g.gen.call_once.append(node.kernel)


class State:
    """The variables of one compiled model, bound to its interpreter's store before invokes."""

    def __init__(self, interpreter: Any, variables: dict[int, tuple[Any, np.ndarray]], call_once: list[Any]) -> None:
        self.interpreter = interpreter
        self.store = interpreter.variables
        self.arrays = [(handle, array) for handle, (_, array) in sorted(variables.items())]
        self.call_once = call_once
        self.version = -1  # the store's version when the arrays were last put there

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for _, array in self.arrays)

    def ready(self) -> bool:
        """Whether the compiled arrays are the store's (checked before every compiled invoke)."""
        return self.store.version == self.version

    def bind(self) -> bool:
        """Make the compiled arrays the store's, values copied in. False (then the invoke runs
        on NumPy): an initialiser has not run yet (the NumPy engine runs it, and raises its
        errors as it does), or a variable has no value, or not the compiled shape and dtype."""
        initialized = self.interpreter.initialized
        if any(kernel.options.init_subgraph_index not in initialized for kernel in self.call_once):
            return False
        values = self.store.values
        for handle, array in self.arrays:
            current = values.get(handle)
            if current is None or current.shape != array.shape or current.dtype != array.dtype:
                return False
        for handle, array in self.arrays:
            if values[handle] is not array:
                np.copyto(array, values[handle])
                values[handle] = array
        self.store.version += 1
        self.version = self.store.version
        return True
