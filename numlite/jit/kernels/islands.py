"""Islands: nodes without a compiled kernel, run by the NumPy engine from inside the compiled
code of the model around them.

A model holding one op the compiled engine does not cover (a user's custom op written in
Python, a detection post-process, a MediaPipe transform, a form of an op not compiled) used to
run whole on the NumPy engine. Now, in the root subgraph's own code (not inside an IF or a
WHILE, where a call per iteration would cost more than the NumPy engine's loop), such a node
is an *island*: the generated code calls back into Python, where the NumPy kernel the runtime
prepared evaluates the node on views of the compiled arenas, and the compiled code goes on. A
node whose shapes are known only at run time is never an island (its outputs would not fit
the arenas' plan), nor a control-flow node.

The generated line is ``if island(ctl, np.int64(k), np.int64(i)): return fail(...)``:
``ctl[k]`` holds the address of the model's table of one callback address (a constant of the
model, filled by the engine; a ctypes callback, which takes the GIL), ``i`` the island's
number. The callback returns 1 after recording the exception the NumPy kernel raised (error
code :data:`ISLAND`), which the engine raises as the NumPy engine would, naming the node. The
operands are named on the line before (a comment), so that the arena plan keeps them alive
across the call as for any other node.

What an island costs: the callback and the NumPy kernel's call, about as much as that node on
the NumPy engine (docs/jit.md, "Islands")."""

from __future__ import annotations

import ctypes
from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from numlite.jit.kernels.common import kernel

ISLAND = 3  # ctl[1] after an island's NumPy kernel raised (common.CODES' codes: 1, 2)
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)  # (island number) -> 0, or 1 after an error


@intrinsic
def _call_back(typingctx: Any, table: Any, number: Any) -> Any:
    """Call the callback whose address is the int64 at address ``table`` with ``number``."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
        address = builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))
        return builder.call(builder.inttoptr(address, fnty.as_pointer()), [args[1]])

    return types.int64(types.int64, types.int64), codegen


@kernel
def island(ctl, slot, number):
    """Run island ``number`` on the NumPy engine (the callback whose table ``ctl[slot]``
    addresses); True when its kernel raised."""
    return _call_back(ctl[slot], number) != 0
