"""WHILE and IF: the callee subgraphs become generated functions of their own (one per call
site, bound to the caller's buffers), called from an ``if`` or a ``while`` in the caller's
function, so that a whole loop runs in compiled code.

A WHILE keeps its state in its outputs' buffers: the inputs are copied in once, the cond
writes one boolean, the body reads the state and writes a scratch set, which is copied back
after each iteration (small states: nanoseconds). Each iteration first polls the cancel flag
(``ctl[0]``), so ``Interpreter.cancel()`` stops a compiled loop."""

from __future__ import annotations

from numlite.jit.kernels import NotCompiled, emits
from numlite.jit.kernels.common import copy


@emits("WHILE")
def emit_while(node, g) -> None:
    options = node.options
    state = node.outs
    for x, y in zip(node.ins, state):
        if x.shape != y.shape or x.dtype != y.dtype:
            raise NotCompiled("a WHILE whose state changes shape is not compiled in this milestone")
        g.line(f"{g.kernel(copy)}({y.name}, {x.name})")
    scratch = [g.temp(y.shape, y.dtype) for y in state]
    flag = g.temp((), "bool")
    cond = g.call(options.cond_subgraph_index, state, [flag])
    body = g.call(options.body_subgraph_index, state, scratch)
    g.line("while True:")
    with g.indented():
        g.poll()
        g.check_call(cond)
        g.line(f"if not {flag.name}[0]:")
        g.line("    break")
        g.check_call(body)
        for y, s in zip(state, scratch):
            g.line(f"{g.kernel(copy)}({y.name}, {s.name})")


@emits("IF")
def emit_if(node, g) -> None:
    options = node.options
    cond, args = node.ins[0], node.ins[1:]
    if cond.size != 1:
        raise NotCompiled("an IF whose condition is not one value is not compiled")
    then_call = g.call(options.then_subgraph_index, args, node.outs)
    else_call = g.call(options.else_subgraph_index, args, node.outs)
    g.line(f"if {cond.name}[0]:")
    with g.indented():
        g.check_call(then_call)
    g.line("else:")
    with g.indented():
        g.check_call(else_call)
