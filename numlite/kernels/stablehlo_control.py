"""StableHLO operators that call subgraphs: STABLEHLO_COMPOSITE and STABLEHLO_CASE.

Both run like IF (numlite.kernels.control_flow): the callee subgraphs are prepared with the
shapes of the caller's arguments, and invoked through their compiled programs with the caller's
buffers bound as their inputs and outputs; an output whose shape differs between branches (or
that a branch computes only at run time) takes the dynamic path.

* STABLEHLO_COMPOSITE (models from litert-torch / JAX: a named high-level op such as
  "odml.rms_norm" with its decomposition) runs ``decomposition_subgraph_index`` on all its
  inputs. Its ``name``, ``version`` and ``composite_attributes`` (a flexbuffer) only identify
  the op; LiteRT's builtin kernel ignores them too.
* STABLEHLO_CASE runs branch ``index`` (input 0, one int32) of ``branch_subgraph_indices`` on
  the other inputs; an index outside [0, N) runs the last branch, as the StableHLO spec and
  LiteRT say.
"""

from __future__ import annotations

import numpy as np

from numlite.errors import NumliteError
from numlite.kernels.base import register
from numlite.kernels.control_flow import If
from numlite.kernels.stablehlo import options_of


@register("STABLEHLO_COMPOSITE")
class StablehloComposite(If):
    """``outputs = decomposition(inputs)``."""

    def prepare(self, ins):
        if len(ins) < 1:  # LiteRT's kernel refuses a composite without inputs
            raise self.fail("expects at least one input")
        o = options_of(self, "StableHLOCompositeOptions")
        return self.prepare_branches([(o.decomposition_subgraph_index, f"decomposition of {o.name!r}")], list(ins))

    def eval(self, ins, outs):
        self.run_branch(0, ins, outs)


@register("STABLEHLO_CASE")
class StablehloCase(If):
    """``outputs = branches[index](inputs[1:])``, the last branch for an index out of range."""

    def prepare(self, ins):
        if len(ins) < 1:
            raise self.fail("expects an index input")
        index = ins[0]
        if index.dtype != np.dtype(np.int32) or index.size != 1:
            raise self.fail(f"the index must be one int32, it is {index.dtype.name} of shape {index.shape}")
        indices = options_of(self, "StablehloCaseOptions").branch_subgraph_indices
        if indices is None or len(indices) == 0:
            raise self.fail("has no branches (branch_subgraph_indices is empty)")
        return self.prepare_branches([(int(b), f"branch {k}") for k, b in enumerate(indices)], list(ins[1:]))

    def eval(self, ins, outs):
        index = ins[0]
        if index.size != 1:
            raise NumliteError(f"the index must have one element, it has shape {index.shape}")
        taken = int(index.reshape(-1)[0])
        last = len(self.branches) - 1
        self.run_branch(taken if 0 <= taken <= last else last, ins[1:], outs)
