"""WHILE and IF: the callee subgraphs are generated inline, at the call site, bound to the
caller's buffers (an ``if`` over the two branches, a ``while`` around the cond and the body),
so that a whole loop runs in compiled code.

A WHILE keeps its state in its outputs' buffers: the inputs are copied in once, the cond
writes one boolean, the body reads the state and writes a scratch set, which is copied back
after each iteration (small states: nanoseconds). Each iteration first polls the cancel flag
(``ctl[0]``), so ``Interpreter.cancel()`` stops a compiled loop."""

from __future__ import annotations

import contextlib
from typing import Iterator

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import copy, require


@emits("WHILE")
def emit_while(node, g) -> None:
    if node.dynamic:  # a state that may change shape: see numlite.jit.kernels.dynamic
        from numlite.jit.kernels.dynamic import emit_while as emit_dynamic_while

        emit_dynamic_while(node, g)
        return
    state = node.outs
    for x, y in zip(node.ins, state):
        require(x.shape == y.shape and x.dtype == y.dtype, "a WHILE whose state changes shape is not compiled in this milestone")
        copy(g, y, x)
    scratch = [g.temp(y.shape, y.dtype) for y in state]
    with iteration(node, g, state, scratch) as passed:
        for k, (y, s) in enumerate(zip(state, scratch)):
            if k not in passed:  # a variable the body passes through unchanged stays put
                copy(g, y, s)


@contextlib.contextmanager
def iteration(node, g, state, scratch) -> Iterator[set[int]]:
    """The loop of a WHILE on ``state``: the cancel poll, the cond, the body writing into
    ``scratch`` (None: where the body computes it); gives the positions the body passes
    through, in the loop, for the code that carries the state to the next iteration."""
    options = node.options
    flag = g.temp((), "bool")
    g.line("while True:")
    with g.indented():
        g.poll()
        g.inline(options.cond_subgraph_index, state, [flag])
        g.line(f"if not {flag.name}[0]:")
        g.line("    break")
        yield g.inline(options.body_subgraph_index, state, scratch, pass_through=True)


emit_while.run_time_shapes = True


@emits("IF")
def emit_if(node, g) -> None:
    options = node.options
    cond, args = node.ins[0], node.ins[1:]
    require(cond.size == 1, "an IF whose condition is not one value is not compiled")
    for index, opening in ((options.then_subgraph_index, f"if {cond.name}[0]:"), (options.else_subgraph_index, "else:")):
        g.line(opening)
        with g.indented():
            g.line("pass")  # a branch may need no code (nothing computed, no copy)
            g.inline(index, args, node.outs)
