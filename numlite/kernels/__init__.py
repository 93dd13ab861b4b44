"""Kernels, one module per op family, all registered in ``KERNELS`` by op name.

Importing this package imports every module in it, so a new family only needs a new file
whose classes carry ``@register("OP_NAME")``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Sequence

import numpy as np

from numlite.kernels.base import KERNELS, Kernel, Node, Spec, TensorInfo, register

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

# numlite's own kernel of each op, as registered by this package's modules: what the compiled
# engine's emitters implement. A kernel registered later (``register`` on a user's class, or an
# interpreter's ``custom_ops``) replaces an op's kernel here, not there.
OWN_KERNELS: dict[str, Any] = dict(KERNELS)

__all__ = ["KERNELS", "OWN_KERNELS", "Kernel", "Node", "Spec", "TensorInfo", "evaluate", "register"]


def evaluate(op_name: str, options: Any, inputs: Sequence[np.ndarray | None], outputs: int = 1,
             names: Sequence[str | None] = (), max_output_bytes: int | None = None) -> list[np.ndarray] | None:
    """One pure operator run on arrays by its kernel (prepare, then eval into new outputs): the
    converter's constant folding, and its passes' probes of what an operator computes. None
    when no foldable kernel has that name, or when an output would be larger than
    ``max_output_bytes``; a kernel's NumliteError propagates."""
    kernel_cls = KERNELS.get(op_name)
    if kernel_cls is None or not kernel_cls.foldable:
        return None
    kernel = kernel_cls(Node(op_name, -1, -1, options, None, [-1] * len(inputs), [-1] * outputs, None))
    infos = [None if x is None else TensorInfo(tuple(np.shape(x)), np.asarray(x).dtype, np.asarray(x), None,
                                               (names[k] if k < len(names) else None) or "")
             for k, x in enumerate(inputs)]
    specs = kernel.prepare(infos)
    if max_output_bytes is not None and any(
            s.shape is not None and int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize > max_output_bytes for s in specs):
        return None
    outs = [None if s.shape is None else np.empty(s.shape, s.dtype) for s in specs]
    kernel.eval([None if x is None else np.asarray(x) for x in inputs], outs)
    return outs
