"""The compiled kernels, one module per op family (named as in :mod:`numlite.kernels`), and
the ONE table that maps an op name to its emitter.

An emitter is a function ``emit(node, g)`` registered with ``@emits("ADD", ...)``. It reads
the node (:class:`numlite.jit.codegen.JitNode`: op, options, operands with static shapes,
dtypes and known values) and writes the node's code into the function being generated
through ``g`` (:class:`numlite.jit.codegen.FunctionGen`): an element-wise loop,
``each(g, out, lambda i: f"{a.name}[{i}] + {b.name}[{i}]")``, or the call of an inlined
``@kernel`` of this package on the operands' flat buffers, ``g.line(f"{g.kernel(fn)}(...)")``
(see :mod:`numlite.jit.kernels.common`). An emitter
that cannot compile the node as it is (a dtype, an option or a form not covered yet) raises
:class:`NotCompiled` with the reason; the model then stays on the NumPy engine and the jit
report names the node and the reason.

Every tensor reaches a kernel as a flat, C-contiguous 1-D view of one dtype's arena; shapes
are static and written into the generated source as literals (see :mod:`numlite.jit.codegen`).
Importing this package imports Numba and every family module.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable


class NotCompiled(Exception):
    """A node (or subgraph) the compiled engine does not cover; the message says why."""


Emitter = Callable[[Any, Any], None]
EMITTERS: dict[str, Emitter] = {}
# The emitters of nodes with quantized (affine integer) operands, beside the plain ones, as
# numlite.kernels.base keeps QUANTIZED_KERNELS beside KERNELS (the generator picks the table).
QUANTIZED_EMITTERS: dict[str, Emitter] = {}


def emits(*op_names: str, quantized: bool = False) -> Callable[[Emitter], Emitter]:
    """Decorator: register ``fn`` as the emitter of the named ops (``quantized``: of their
    nodes with quantized operands)."""
    table = QUANTIZED_EMITTERS if quantized else EMITTERS

    def decorate(fn: Emitter) -> Emitter:
        for name in op_names:
            if name in table:
                raise ValueError(f"{name} has two compiled emitters")
            table[name] = fn
        return fn

    return decorate


for _module in pkgutil.iter_modules(__path__):
    if _module.name != "common":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["EMITTERS", "QUANTIZED_EMITTERS", "NotCompiled", "emits"]
