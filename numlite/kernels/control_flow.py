"""Control flow: IF, WHILE and CALL_ONCE run other subgraphs of the model.

The callee subgraphs are prepared with the shapes of the caller's inputs (at allocation, and
again when those shapes change) and invoked with the caller's buffers bound directly as their
inputs and outputs, so that data moves between subgraphs without copies when shapes are static:

* IF binds the branch's inputs to its own inputs and the branch's outputs to its own outputs.
* WHILE keeps the loop state in two buffer sets, its own outputs and a scratch set (working
  memory the arena plan gives the WHILE's step; variables the body passes through unchanged
  need none). Each iteration the body reads one set and writes the other, then they swap (the
  spec's "RVO" idea, made safe by double buffering: a body never reads the buffer it writes).
  Per invoke it copies the initial state in once and, when the loop ends on the scratch set,
  the final state out once: nothing per iteration. An output may take over the memory of its
  input when that input dies at the WHILE (``outputs_over_inputs``): no copy in for it.

When shapes change between iterations, or a branch's output shape depends on data, the op runs
its callee on copies and lets the callee re-prepare for the new shapes (the dynamic path).
``Interpreter.control_flow_counters`` counts what the ops copied and allocated in the last invoke.

Binding buffers costs nothing per call: the ops do not rebind their callees' tensors each time
but keep compiled programs of them (``SubgraphRuntime.program``) with the buffers substituted,
one per arrangement of buffers (a WHILE has two: state in its outputs or in its scratch set).
A WHILE inlines both arrangements' node calls into one generated loop (``runtime.LoopProgram``),
so an iteration costs its nodes' calls and a read of the cond's boolean; the loop also makes
the copies in and out and counts them. Inside a compiled program an IF or WHILE is one call
(``direct``): a function bound to its arrays that checks only the hooks and its callees'
generations before running the branch's program or the whole loop, and runs ``eval`` otherwise.
Watched invokes (cancellation, profiling) and callees with dynamic nodes take the rebinding path,
which calls the hooks around every node.
"""

from __future__ import annotations

from operator import is_
from typing import TYPE_CHECKING, Sequence

import numpy as np

from numlite.errors import CancelledError, NumliteError, PrepareError
from numlite.kernels.base import Kernel, Spec, TensorInfo, copy_into, register
from numlite.kernels.scratchpad import ScratchUser

if TYPE_CHECKING:
    from numlite.interpreter.runtime import LoopProgram, Program, SubgraphRuntime

# Bindings an op remembers for a look-up by identity before its keyed cache: a loop body's ops
# see two (the WHILE's state in its outputs, then in its scratch set), nested loops a few more.
RECENT = 4


class SubgraphCall(Kernel):
    """Shared machinery of the ops that invoke subgraphs."""

    foldable = False

    @property
    def counters(self) -> dict[str, int]:
        return self.node.runtime.interpreter.control_flow_counters

    def callee(self, index: int, role: str, n_inputs: int, n_outputs: int | None) -> "SubgraphRuntime":
        """The runtime of subgraph ``index``, checked to take ``n_inputs`` inputs (and give
        ``n_outputs`` outputs, when given)."""
        sg = self.node.runtime.interpreter.subgraph(index)
        g = sg.graph
        if len(g.inputs) != n_inputs or (n_outputs is not None and len(g.outputs) != n_outputs):
            want = f"{n_inputs} inputs" + (f" and {n_outputs} outputs" if n_outputs is not None else "")
            raise self.fail(
                f"{role} subgraph {index} takes {len(g.inputs)} inputs and gives {len(g.outputs)} outputs, "
                f"but this op needs {want}"
            )
        return sg

    def prepare_callee(self, sg: "SubgraphRuntime", role: str, ins: Sequence[TensorInfo]) -> list[Spec]:
        """Prepare a callee for these input shapes; return its output specs (shape None: dynamic)."""
        for k, (i, info) in enumerate(zip(sg.graph.inputs, ins)):
            if sg.dtypes[i] != info.dtype:
                raise self.fail(
                    f"input {k} is {info.dtype.name} but {role} subgraph {sg.index} expects {sg.dtypes[i].name}"
                )
        self.ensure_prepared(sg, [info.shape for info in ins])
        return [Spec(None if sg.dynamic[o] else sg.shapes[o], sg.dtypes[o]) for o in sg.graph.outputs]

    @staticmethod
    def ensure_prepared(sg: "SubgraphRuntime", shapes: Sequence[tuple[int, ...]]) -> None:
        sg.resize_inputs([tuple(s) for s in shapes])
        if not sg.allocated:
            sg.allocate()

    def run_on_copies(self, sg: "SubgraphRuntime", arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The dynamic path: prepare ``sg`` for these arrays' shapes, run it, and take its outputs.

        Outputs the callee allocated during this run (its dynamic tensors) are taken as they
        are; only outputs living in the callee's own reused buffers are copied.
        """
        self.ensure_prepared(sg, [a.shape for a in arrays])
        for i, a in zip(sg.graph.inputs, arrays):
            sg.rebind(i, a)
        sg.invoke()
        results = []
        for o in sg.graph.outputs:
            value = sg.arrays[o]
            if not sg.dynamic[o] or o in sg.graph.inputs:
                value = np.array(value, copy=True)
                self.counters["arrays_allocated"] += 1
                self.counters["bytes_copied"] += value.nbytes
            results.append(value)
        return results

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        if dst is not src:
            copy_into(dst, src)
            self.counters["bytes_copied"] += dst.nbytes

    def copy_all(self, dsts: Sequence[np.ndarray], srcs: Sequence[np.ndarray]) -> None:
        """``copy`` for each pair, counted once."""
        nbytes = 0
        for dst, src in zip(dsts, srcs):
            if dst is not src:
                copy_into(dst, src)
                nbytes += dst.nbytes
        if nbytes:
            self.counters["bytes_copied"] += nbytes

    def cached_program(self, sg: "SubgraphRuntime", bound: dict[int, np.ndarray]) -> "Program | None":
        """``sg``'s program for this binding, built once and kept while ``sg`` keeps its memory
        (keyed by the arrays' identities; the program holds them, so the ids stay theirs)."""
        cache = self.__dict__.setdefault("_program_cache", {})
        key = (sg.index, sg.generation, *((t, id(a)) for t, a in bound.items()))
        program = cache.get(key, False)
        if program is False:
            if len(cache) >= 16:  # buffers keep changing (an op fed by dynamic tensors): start over
                cache.clear()
            program = cache[key] = sg.program(bound)
        return program


def _run(program: "Program") -> None:
    """Run a callee's program; its errors name the callee's failing node."""
    try:
        program.run()
    except (PrepareError, CancelledError):
        raise
    except Exception as e:
        raise program.error(e) from e


def _run_loop(loop: "LoopProgram") -> None:
    """Run a WHILE's compiled loop (which counts the bytes it copies); its errors name the node
    that raised them."""
    try:
        loop.run()
    except (PrepareError, CancelledError):
        raise
    except Exception as e:
        failed = loop.error(e)
        if failed is e:
            raise
        raise failed from e


def _truth(cond: np.ndarray) -> bool:
    if cond.size != 1:
        raise NumliteError(f"the condition must have one element, it has shape {cond.shape}")
    return bool(cond.item())


@register("IF")
class If(SubgraphCall):
    """``outputs = then(inputs[1:]) if inputs[0] else else(inputs[1:])``."""

    def prepare(self, ins):
        if len(ins) < 1:
            raise self.fail("expects a condition input")
        cond, args = ins[0], list(ins[1:])
        if cond.size != 1:
            raise self.fail(f"the condition must have one element, it has shape {cond.shape}")
        return self.prepare_branches(
            [(self.options.then_subgraph_index, "then"), (self.options.else_subgraph_index, "else")], args
        )

    def prepare_branches(self, branches: Sequence[tuple[int, str]], args: Sequence[TensorInfo]) -> list[Spec]:
        """Prepare the branch subgraphs (index, role) for these arguments and return the
        outputs' specs: each output's dtype must agree across branches, and its shape is static
        when every branch gives it the same one (also STABLEHLO_CASE's and COMPOSITE's)."""
        n_out = len(self.node.outputs)
        self.branches = [self.callee(index, role, len(args), n_out) for index, role in branches]
        all_specs = [self.prepare_callee(b, role, args) for b, (_, role) in zip(self.branches, branches)]
        specs = []
        for k, outs in enumerate(zip(*all_specs)):
            first = outs[0]
            for (_, role), other in zip(branches[1:], outs[1:]):
                if other.dtype != first.dtype:
                    raise self.fail(
                        f"output {k} is {first.dtype.name} in the {branches[0][1]} branch but {other.dtype.name} in the {role} branch"
                    )
            specs.append(Spec(first.shape if all(o.shape == first.shape for o in outs) else None, first.dtype))
        self.arg_shapes = [a.shape for a in args]
        self.static = all(s.shape is not None for s in specs)
        # Outputs the branch computes can be computed straight into ours; pass-through and
        # constant outputs cannot (their tensors are the branch's inputs or constants).
        self.computed = [
            {o for o in b.graph.outputs if o not in b.graph.inputs and not b.known[o]} for b in self.branches
        ]
        self.ready: list[int | None] = [None] * len(branches)  # each branch's generation once prepared for us
        self.recent_calls: list[list[tuple]] = [[] for _ in branches]  # per branch: (generation, args, outs, program, copies)
        return specs

    def eval(self, ins, outs):
        self.run_branch(0 if _truth(ins[0]) else 1, ins[1:], outs)

    def run_branch(self, taken: int, args: Sequence[np.ndarray], outs: list[np.ndarray | None]) -> None:
        """Run branch ``taken`` on ``args`` into ``outs`` (through its compiled program when the
        shapes are static and no hook watches)."""
        branch = self.branches[taken]
        if not self.static:
            outs[:] = self.run_on_copies(branch, args)
            return
        if self.ready[taken] != branch.generation or not branch.allocated:
            self.ensure_prepared(branch, self.arg_shapes)  # the branch may be shared with another op
            self.ready[taken] = branch.generation
        g = branch.graph
        if not self.node.runtime.interpreter.watching:
            program, copies = self._program(taken, branch, args, outs)
            if program is not None:
                _run(program)
                if copies:  # only pass-through and constant outputs copy
                    self.copy_all(outs, program.outputs)
                return
        for i, a in zip(g.inputs, args):
            branch.rebind(i, a)
        for o, out in zip(g.outputs, outs):
            if o in self.computed[taken]:
                branch.rebind(o, out)
        branch.invoke()
        for o, out in zip(g.outputs, outs):
            self.copy(out, branch.arrays[o])  # only pass-through and constant outputs copy

    def direct(self, ins, outs):
        """Inside a compiled program (``runtime.direct_call``): a function of no arguments
        that runs the branch the condition picks through its program with our arrays bound,
        both built now, checking only that no hook watches and neither branch was prepared
        again since (else it runs ``eval``). None when the outputs' shapes are not static or a
        branch has no program."""
        if not self.static or any(a is None for a in (*ins, *outs)):
            return None
        args = ins[1:]
        programs = []
        for taken, branch in enumerate(self.branches):
            if self.ready[taken] != branch.generation or not branch.allocated:
                self.ensure_prepared(branch, self.arg_shapes)
                self.ready[taken] = branch.generation
            program, copies = self._program(taken, branch, args, outs)
            if program is None:
                return None
            programs.append((program, copies))
        return self._bound_call(ins, outs, programs), ()

    def _bound_call(self, ins: list, outs: list, programs: list[tuple["Program", bool]]):
        interpreter = self.node.runtime.interpreter
        (then_program, then_copies), (else_program, else_copies) = programs
        then_branch, else_branch = self.branches
        then_generation, else_generation = then_branch.generation, else_branch.generation
        cond, eval_, copy_all = ins[0], self.eval, self.copy_all

        def call() -> None:
            if interpreter.watching or then_branch.generation != then_generation or else_branch.generation != else_generation:
                return eval_(ins, outs)
            if cond.item():
                program, copies = then_program, then_copies
            else:
                program, copies = else_program, else_copies
            _run(program)
            if copies:  # only pass-through and constant outputs copy
                copy_all(outs, program.outputs)

        return call

    def _program(
        self, taken: int, branch: "SubgraphRuntime", args: Sequence[np.ndarray], outs: Sequence[np.ndarray]
    ) -> tuple["Program | None", bool]:
        """The branch's program with our arguments and outputs bound (the last one again when
        the arrays and the branch's memory are those of the last call), and whether any of its
        outputs must be copied into ours after it ran."""
        recent = self.recent_calls[taken]
        for generation, known_args, known_outs, program, copies in recent:
            if generation == branch.generation and all(map(is_, known_args, args)) and all(map(is_, known_outs, outs)):
                return program, copies
        g = branch.graph
        bound = dict(zip(g.inputs, args))
        for o, out in zip(g.outputs, outs):
            if o in self.computed[taken]:
                bound.setdefault(o, out)
        program = self.cached_program(branch, bound)
        copies = program is not None and any(o is not p for o, p in zip(outs, program.outputs))
        recent[:] = [(branch.generation, list(args), list(outs), program, copies), *recent[: RECENT - 1]]
        return program, copies


@register("WHILE")
class While(ScratchUser, SubgraphCall):
    """``while cond(state): state = body(state)``; the outputs are the final state."""

    # Output k may be input k's memory when that input dies here: the loop reads its inputs
    # only to copy them into the state, which starts in the outputs (a copy onto itself, none).
    outputs_over_inputs = True

    def prepare(self, ins):
        n = len(ins)
        if len(self.node.outputs) != n:
            raise self.fail(f"has {n} inputs but {len(self.node.outputs)} outputs; they must match")
        self.cond = self.callee(self.options.cond_subgraph_index, "cond", n, 1)
        self.body = self.callee(self.options.body_subgraph_index, "body", n, n)
        cond_out = self.prepare_callee(self.cond, "cond", ins)[0]
        if cond_out.shape is not None and int(np.prod(cond_out.shape)) != 1:
            raise self.fail(f"cond subgraph {self.cond.index} returns shape {cond_out.shape}, not one boolean")
        body_out = self.prepare_callee(self.body, "body", ins)
        self.scratch_specs = []  # until _plan_buffers: none on the dynamic path
        for k, (spec, info) in enumerate(zip(body_out, ins)):
            if spec.dtype != info.dtype:
                raise self.fail(f"loop variable {k} is {info.dtype.name} but body returns {spec.dtype.name}")
        self.shapes = [info.shape for info in ins]
        self.static = all(spec.shape == info.shape for spec, info in zip(body_out, ins))
        if not self.static:
            return [Spec(None, info.dtype) for info in ins]
        self._plan_buffers(ins)
        return [Spec(info.shape, info.dtype) for info in ins]

    def _plan_buffers(self, ins) -> None:
        """Sort the loop variables: those the body computes are double-buffered; those it passes
        through unchanged stay put; the rest (outputs that are another input, a constant, or
        a repeated tensor) are copied after each iteration."""
        g = self.body.graph
        self.buffered, self.invariant, self.copied = [], [], []
        seen = set()
        for k, (i, o) in enumerate(zip(g.inputs, g.outputs)):
            if o == i:
                self.invariant.append(k)
            elif o in g.inputs or self.body.known[o] or o in seen:
                self.copied.append(k)
            else:
                self.buffered.append(k)
            seen.add(o)
        self.want_scratch([(info.shape, info.dtype) for k, info in enumerate(ins) if k not in self.invariant])
        self.scratch: list[np.ndarray | None] = [None] * len(ins)  # carved at eval (``_carve``)
        self._forget_loops()
        self.ready: tuple | None = None  # the callees' generations once prepared for our shapes

    def _forget_loops(self) -> None:
        self.__dict__.pop("_loop_cache", None)  # programs bound to the previous scratch set
        self.recent_loops: list[tuple] = []  # (generations, inputs, outputs, loop program), latest first

    def _carve(self) -> None:
        """The scratch set from our working memory, again when the memory plan moved it."""
        if self.scratch_stale():
            carved = iter(self.take_scratch())
            self.scratch = [None if k in self.invariant else next(carved) for k in range(len(self.scratch))]
            self._forget_loops()

    def eval(self, ins, outs):
        if not self.static:
            outs[:] = self._run_dynamic(ins)
            return
        cond, body = self.cond, self.body
        if self.ready != (cond.generation, body.generation) or not (cond.allocated and body.allocated):
            for sg in (cond, body):  # callees may be shared with another op of other shapes
                self.ensure_prepared(sg, self.shapes)
            self.ready = (cond.generation, body.generation)
        self._carve()
        if not self.node.runtime.interpreter.watching:
            loop = self._loop_program(ins, outs)
            if loop is not None:
                _run_loop(loop)
                return
        # watched (hooks around every node) or a callee with dynamic nodes
        self.copy_all(outs, ins)
        state, spare = self._buffer_sets(outs)
        while self._iterate(state, spare):
            state, spare = spare, state
        self.copy_all(outs, state)  # the loop ended on the scratch set: one copy out

    def direct(self, ins, outs):
        """Inside a compiled program (``runtime.direct_call``): a function of no arguments
        that runs this binding's whole loop (``LoopProgram``, built now), checking only that no
        hook watches and neither callee was prepared again since (else it runs ``eval``).
        None when the state's shapes change or a callee has no program."""
        if not self.static or any(a is None for a in (*ins, *outs)):
            return None
        cond, body = self.cond, self.body
        if self.ready != (cond.generation, body.generation) or not (cond.allocated and body.allocated):
            for sg in (cond, body):
                self.ensure_prepared(sg, self.shapes)
            self.ready = (cond.generation, body.generation)
        self._carve()
        loop = self._loop_program(ins, outs)
        if loop is None:
            return None
        return self._bound_call(list(ins), list(outs), loop), ()

    def _bound_call(self, ins: list, outs: list, loop: "LoopProgram"):
        interpreter = self.node.runtime.interpreter
        cond, body = self.cond, self.body
        cond_generation, body_generation = cond.generation, body.generation
        eval_ = self.eval

        def call() -> None:
            if interpreter.watching or cond.generation != cond_generation or body.generation != body_generation:
                return eval_(ins, outs)
            _run_loop(loop)

        return call

    def _buffer_sets(self, outs: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The two sets the state alternates between: our outputs, and the scratch set with
        the invariant variables' buffers shared (never written)."""
        state, spare = list(outs), list(self.scratch)
        for k in self.invariant:
            spare[k] = state[k]
        return state, spare

    def _loop_program(self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> "LoopProgram | None":
        """The whole loop as one function (``runtime.LoopProgram``): the copy of our inputs into
        the state, its two phases (state in our outputs, then in the scratch set) and the copy
        out when it ends on the scratch set; None when a callee has no program (dynamic nodes).
        Cached by the arrays' identity."""
        generations = (self.cond.generation, self.body.generation)
        for known_generations, known_ins, known_outs, loop in self.recent_loops:
            if known_generations == generations and all(map(is_, known_ins, ins)) and all(map(is_, known_outs, outs)):
                return loop  # arrays seen lately
        key = (*generations, *map(id, ins), *map(id, outs))
        cache = self.__dict__.setdefault("_loop_cache", {})
        if key not in cache:
            from numlite.interpreter.runtime import LoopProgram  # (runtime imports the kernels)

            if len(cache) >= 8:
                cache.clear()
            state, spare = self._buffer_sets(outs)
            phases = [self._phase(state, spare), self._phase(spare, state)]
            loop = None
            if None not in phases:
                entry = [(o, i) for o, i in zip(outs, ins) if o is not i]
                exit_ = [(o, s) for o, s in zip(outs, spare) if o is not s]
                loop = LoopProgram(self.node.runtime.interpreter, phases, entry, exit_)
            cache[key] = (loop, [*ins, *outs])  # keeps the ids valid
        self.recent_loops = [(generations, list(ins), list(outs), cache[key][0]), *self.recent_loops[: RECENT - 1]]
        return cache[key][0]

    def _phase(self, state: list[np.ndarray], spare: list[np.ndarray]) -> tuple | None:
        """The cond's program, the array of its boolean, the body's program and the copies an
        iteration makes after it, for the state in ``state`` (None: a callee has no program)."""
        cond, body = self.cond, self.body
        bound = dict(zip(cond.graph.inputs, state))
        out = cond.graph.outputs[0]
        if out not in bound and not cond.known[out]:
            bound[out] = np.empty(cond.shapes[out], cond.dtypes[out])  # the boolean's own buffer
        cond_program = cond.program(bound)
        g = body.graph
        bound = dict(zip(g.inputs, state))
        for k in self.buffered:
            bound.setdefault(g.outputs[k], spare[k])
        body_program = body.program(bound)
        if cond_program is None or body_program is None:
            return None
        copies = [(spare[k], body_program.outputs[k]) for k in self.copied]
        copies = [(d, s) for d, s in copies if d is not s]
        return cond_program, cond_program.outputs[0], body_program, copies

    def _iterate(self, state: list[np.ndarray], spare: list[np.ndarray]) -> bool:
        """One iteration by rebinding the callees' tensors and invoking them (the path that
        runs the per-node hooks, and the one for callees with dynamic nodes)."""
        cond, body = self.cond, self.body
        for i, a in zip(cond.graph.inputs, state):
            cond.rebind(i, a)
        cond.invoke()
        if not _truth(cond.arrays[cond.graph.outputs[0]]):
            return False
        body_outputs = body.graph.outputs
        for i, a in zip(body.graph.inputs, state):
            body.rebind(i, a)
        for k in self.buffered:
            body.rebind(body_outputs[k], spare[k])
        body.invoke()
        for k in self.copied:
            self.copy(spare[k], body.arrays[body_outputs[k]])
        for k in self.buffered:  # a node that sizes its output at run time wrote elsewhere
            self.copy(spare[k], body.arrays[body_outputs[k]])
        return True

    def _run_dynamic(self, ins) -> list[np.ndarray]:
        state = [np.array(x, copy=True) for x in ins]
        self.counters["arrays_allocated"] += len(state)
        self.counters["bytes_copied"] += sum(s.nbytes for s in state)
        while _truth(self.run_on_copies(self.cond, state)[0]):
            state = self.run_on_copies(self.body, state)
        return state


@register("CALL_ONCE")
class CallOnce(SubgraphCall):
    """Run the init subgraph on the first invoke, once per interpreter however many signatures
    share it (and again after ``reset_all_variables``, which restores the initial state)."""

    def prepare(self, ins):
        self.init = self.callee(self.options.init_subgraph_index, "init", 0, 0)
        self.ensure_prepared(self.init, [])
        return []

    def eval(self, ins, outs):
        done = self.node.runtime.interpreter.initialized
        key = self.options.init_subgraph_index  # one initialiser per interpreter, shared by signatures
        if key not in done:
            self.ensure_prepared(self.init, [])
            self.init.invoke()
            done.add(key)
