"""Shapes known only at run time in compiled code: what the element-wise families need (the
broadcast shape of operands of run-time shape and the index of an operand's element), the
wording of shapes in error messages, and the WHILE whose state changes shape.

A tensor of run-time shape is an array the compiled code allocates (``np.empty`` of its
element count, 1-D, owned by Numba's runtime) and its dims are local variables of the
generated function (``t19_0``), or literals where they are known (see
:meth:`numlite.jit.codegen.FunctionGen.result`). Such an array is never written again once
its node computed it, so operands may share it (a RESHAPE, a WHILE state passed on)."""

from __future__ import annotations

from typing import Any, Sequence

from numlite.jit.kernels import NotCompiled
from numlite.jit.kernels.common import copy, require


def _strip(shape: Sequence[Any]) -> tuple:
    """``shape`` without its leading 1s (they do not change the order of elements)."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def elementwise_shape(node: Any) -> tuple:
    """The output shape of an element-wise node (its inputs broadcast), in the forms compiled
    with run-time dims: equal dims, or dims against 1."""
    shapes = [tuple(x.shape) for x in node.ins if x is not None]
    rank = max(len(s) for s in shapes)
    result: list[Any] = []
    for dims in zip(*[(1,) * (rank - len(s)) + s for s in shapes]):
        known = {d for d in dims if d != 1}
        if len(known) > 1:
            raise NotCompiled(f"broadcasting dims {' and '.join(str(d) for d in dims)} known only at run time is not compiled")
        result.append(known.pop() if known else 1)
    return tuple(result)


def trailing_index(operand: Any, out: Any, i: str) -> str:
    """The element of ``operand`` that broadcasting pairs with output element ``i``, when
    shapes are known only at run time: the operand's shape (leading 1s aside) must be the end
    of the output's, so its elements repeat every ``count`` output elements."""
    shape = _strip(operand.shape)
    require(len(shape) <= len(out.shape) and tuple(out.shape[len(out.shape) - len(shape):]) == shape,
            f"broadcasting {operand.shape} to {out.shape} at run time is not compiled")
    return f"{operand.name}[{i} % ({operand.count})]"


def shape_text(shape: Sequence[Any], as_list: bool = False) -> tuple[str, list[str]]:
    """A shape as the NumPy kernels word it in messages (``(3, 4)``, ``(5,)`` or ``[3, 4]``),
    a ``str.format`` template with a ``{}`` per dim known only at run time, and those dims."""
    parts = ["{}" if isinstance(d, str) else str(d) for d in shape]
    if as_list:
        return "[" + ", ".join(parts) + "]", [d for d in shape if isinstance(d, str)]
    text = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return text, [d for d in shape if isinstance(d, str)]


def emit_while(node: Any, g: Any) -> None:
    """A WHILE whose state may change shape (the NumPy engine prepares it at run time). Each
    loop variable is first assumed to keep its initial shape; a dim the body changes becomes a
    local variable, and the loop is generated again (at most once per dim). A variable of
    static shape keeps the double-buffered state of the static WHILE; one of run-time shape is
    an array rebound after each iteration to the body's result (all rebound at once, so a
    permutation of variables is right)."""
    from numlite.jit.codegen import ShapeChanged

    specs: list[list[Any]] = [[d if isinstance(d, int) else None for d in x.shape] for x in node.ins]
    for _ in range(sum(len(s) for s in specs) + len(specs) + 1):
        mark = g.mark()
        outs = list(node.outs)
        try:
            _while(node, g, specs)
            return
        except ShapeChanged as e:
            if e.site is not g:
                raise
            g.rollback(mark)
            node.outs[:] = outs
            spec = specs[e.position]
            require(len(e.shape) == len(spec), f"a WHILE state that changes rank ({len(spec)} to {len(e.shape)}) is not compiled")
            widened = [d if d == s else None for d, s in zip(spec, e.shape)]
            require(widened != spec, "a WHILE state shape did not settle")
            specs[e.position] = widened
    raise NotCompiled("a WHILE state shape did not settle")


def _while(node: Any, g: Any, specs: list[list[Any]]) -> None:
    from numlite.jit.codegen import Operand, ShapeChanged
    from numlite.jit.kernels.control_flow import iteration

    state, scratch = [], []
    for k, (x, spec) in enumerate(zip(node.ins, specs)):
        if all(d is not None for d in spec):
            y = g.result(node, k, spec)
            copy(g, y, x)
            state.append(y)
            scratch.append(g.temp(y.shape, y.dtype))
            continue
        slot = g.gen.arenas.dynamic(x.dtype)
        dims = [f"{slot.name}_{d}" if s is None else s for d, s in enumerate(spec)]
        g.line(", ".join([slot.name, *[d for d in dims if isinstance(d, str)]]) + " = "
               + ", ".join([x.name if x.slot.dynamic else f"{x.name}.copy()", *[str(x.shape[d]) for d, s in enumerate(dims) if isinstance(s, str)]]))
        state.append(g.bind(node, k, Operand(slot.name, tuple(dims), x.dtype, None, slot)))
        scratch.append(None)
    with iteration(node, g, state, scratch) as passed:
        results = g.gen.results
        names, values = [], []
        for k, (y, s, r) in enumerate(zip(state, scratch, results)):
            if k in passed:
                continue
            if s is not None:  # static: copied back from the scratch buffer
                if tuple(r.shape) != tuple(y.shape):
                    raise ShapeChanged(g, k, tuple(r.shape), f"WHILE state {k} changes shape")
                copy(g, y, s)
                continue
            if len(r.shape) != len(y.shape) or any(isinstance(d, int) and d != e for d, e in zip(y.shape, r.shape)):
                raise ShapeChanged(g, k, tuple(r.shape), f"WHILE state {k} changes shape")
            names.append(y.name)
            values.append(r.name if r.slot.dynamic and not r.slot.constant else f"{r.name}.copy()")
            for d, e in zip(y.shape, r.shape):
                if isinstance(d, str):
                    names.append(d)
                    values.append(str(e))
        if names:
            g.line(f"{', '.join(names)} = {', '.join(values)}")
