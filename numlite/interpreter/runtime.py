"""Running one subgraph: an execution plan of prepared kernels over planned memory.

``allocate()`` prepares every node in order (shapes and dtypes flow from the inputs), computes
once the nodes whose inputs are all known (constant folding), places the remaining
intermediates in one arena and binds each node to the arrays it reads and writes. ``invoke()``
then only walks the plan calling ``eval``. A node whose output shape depends on data (or on a
tensor that does) is marked dynamic and re-prepared each time it runs, and its outputs are
allocated on the spot, as TFLite does for dynamic tensors.

Invoking is cheap: once a plan has no dynamic node, it is compiled into a :class:`Program`, one
generated Python function that calls every node's bound ``eval`` (or, for the small element-wise
kernels that offer it, their one NumPy call, see :func:`direct_call`) on arrays bound as closure
variables, with no per-node dispatch, list walking or checks. Control-flow ops build programs for
their callees with the callers' buffers substituted for the callees' inputs and outputs
(:meth:`SubgraphRuntime.program`), so a loop iteration is two function calls and no rebinding.
The loop of ``invoke()`` remains for what programs leave out: dynamic nodes, and invokes that are
watched (cancellation, profiling), which need a hook around every node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence

import numpy as np

from numlite.errors import CancelledError, InvokeError, NumliteError, PrepareError
from numlite.interpreter.planner import Lifetime, plan_arena
from numlite.kernels import Kernel, Node, Spec, TensorInfo
from numlite.kernels.base import QuantizedDispatch, copy_into, nothing
from numlite.kernels.scratchpad import Scratchpad, ScratchUser
from numlite.model.ir import Model

if TYPE_CHECKING:
    from numlite.interpreter.interpreter import Interpreter


@dataclass
class Step:
    """One node of the execution plan, bound to the arrays it reads and writes."""

    index: int
    op_name: str
    kernel: Kernel
    inputs: list[int]
    outputs: list[int]
    dynamic: bool = False  # re-prepared at every run (its shapes depend on data)
    folded: bool = False  # computed at allocation; skipped at invoke
    prepared_for: tuple | None = None  # the TensorInfos of its inputs at the last prepare
    ins: list[np.ndarray | None] = field(default_factory=list)
    outs: list[np.ndarray | None] = field(default_factory=list)


class SubgraphRuntime:
    """Tensors, kernels and memory of one subgraph of a model."""

    def __init__(self, interpreter: "Interpreter", index: int, kernels: dict[str, type[Kernel]]) -> None:
        self.interpreter = interpreter
        self.model: Model = interpreter.model
        self.index = index
        self.graph = self.model.subgraphs[index]
        n = len(self.graph.tensors)
        self.shapes: list[tuple[int, ...] | None] = [t.shape for t in self.graph.tensors]
        self.dtypes: list[np.dtype] = [_dtype_of(t) for t in self.graph.tensors]
        self.arrays: list[np.ndarray | None] = [None] * n
        self.constant = [False] * n  # value in the model's buffers
        self.known = [False] * n  # value fixed at allocation: constants and folded outputs
        self.dynamic = [False] * n  # shape known only at run time
        self.arena: np.ndarray = np.zeros(0, np.uint8)
        self.arena_bytes = 0
        self.arena_plan: list[tuple[int, int, int]] = []  # (tensor, offset, bytes)
        self.scratch_plan: list[tuple[ScratchUser, int, int]] = []  # (kernel, offset, bytes) of working memory
        self.allocated = False
        self.allocation_error: Exception | None = None  # why the last allocate() failed
        self.inputs_set: set[int] = set()  # inputs given data since their memory was made
        self.kernels = kernels
        self.plan: list[Step] = []
        self.steps: list[Step] = []
        self.generation = 0  # bumped by bind(): programs built before are stale
        self._program: Program | None = None  # the plan on its own bound arrays, when valid
        self._stable_invokes = 0  # invokes since the arrays were last rebound
        # Nodes whose prepared kernels release_weights() dropped, with the place of their
        # working memory in the arena (None: they had none): prepared again before NumPy runs them.
        self.released: dict[int, tuple[int, int] | None] = {}
        self._load_constants()

    # -- construction ---------------------------------------------------------------------------

    def _load_constants(self) -> None:
        for i, t in enumerate(self.graph.tensors):
            value = self.model.constant(self.graph, i)
            if value is not None and not t.is_variable:
                self.arrays[i] = value
                self.constant[i] = True

    def _make_step(self, n: int, op: Any, kernels: dict[str, type[Kernel]]) -> Step:
        name = self.model.op_name(op)
        # STABLEHLO_* operators keep their options in builtin_options_2; no operator has both.
        options = op.builtin_options if op.builtin_options is not None else op.builtin_options2
        node = Node(name, n, self.index, options, op.custom_options, op.inputs, op.outputs, self, op.custom_options_format)
        return Step(n, name, kernels[name](node), list(op.inputs), list(op.outputs))

    def where(self, step: Step) -> str:
        """How errors name a node: "subgraph 0, node 3 (CONV_2D)"."""
        return f"subgraph {self.index}, node {step.index} ({step.op_name})"

    # -- allocation -----------------------------------------------------------------------------

    def allocate(self) -> None:
        """Prepare every node, fold what is constant, plan the arena and bind arrays."""
        try:
            self._allocate()
            self.allocation_error = None
        except NumliteError as e:
            self.allocation_error = e
            raise

    def _allocate(self) -> None:
        self.allocated = False
        self.released = {}  # (their prepared_for is None: prepared below with the rest)
        g = self.graph
        if not self.plan:
            self.plan = [self._make_step(n, op, self.kernels) for n, op in enumerate(g.operators)]
        persistent = set(g.inputs) | set(g.outputs) | {i for i, t in enumerate(g.tensors) if t.is_variable}
        self.known = list(self.constant)
        self.dynamic = [False] * len(g.tensors)
        for step in self.plan:
            if any(self.dynamic[i] for i in step.inputs if i >= 0):
                # Downstream of a dynamic tensor: prepared at run time, when shapes are known.
                step.dynamic, step.folded, step.prepared_for = True, False, None
                for o in step.outputs:
                    if o >= 0:
                        self.shapes[o], self.dynamic[o] = None, True
                continue
            infos = self._infos(step)
            if _same_inputs(step.prepared_for, infos):
                # Same inputs as last time: keep the outputs' shapes and folded values, so a
                # re-allocation re-prepares only from the first node whose inputs changed.
                for o in step.outputs:
                    if o >= 0:
                        self.known[o], self.dynamic[o] = step.folded, step.dynamic
                continue
            self._prepare(step, infos)
            step.prepared_for = tuple(infos)
            step.dynamic = any(self.dynamic[o] for o in step.outputs if o >= 0)
            step.folded = False
            if not step.dynamic and step.kernel.foldable and self._all_known(step):
                self._fold(step)
        try:
            self._place_tensors(persistent)
        except (MemoryError, ValueError) as e:  # absurd shapes in a corrupt or hostile model
            raise PrepareError(f"subgraph {self.index}: cannot allocate tensor memory: {e}") from e
        self.bind()
        self.allocated = True

    def _infos(self, step: Step, at_runtime: bool = False) -> list[TensorInfo | None]:
        infos: list[TensorInfo | None] = []
        for i in step.inputs:
            if i < 0:
                infos.append(None)
                continue
            t = self.graph.tensors[i]
            value = self.arrays[i] if (self.known[i] or at_runtime) else None
            shape = tuple(value.shape) if at_runtime and value is not None else self.shapes[i]
            infos.append(TensorInfo(shape, self.dtypes[i], value, t.quantization, t.name))
        return infos

    def _prepare(self, step: Step, infos: list[TensorInfo | None]) -> list[Spec]:
        for i, info in zip(step.inputs, infos):
            if info is not None and info.shape is None:
                raise PrepareError(f"{self.where(step)}: input tensor {i} has no shape")
        try:
            specs = step.kernel.prepare(infos)
        except NumliteError as e:
            raise PrepareError(f"{self.where(step)}: {e}") from e
        except Exception as e:  # a kernel bug or an input it did not expect
            raise PrepareError(f"{self.where(step)}: {type(e).__name__}: {e}") from e
        if len(specs) != len(step.outputs):
            raise PrepareError(f"{self.where(step)}: kernel produced {len(specs)} outputs, the model has {len(step.outputs)}")
        for o, spec in zip(step.outputs, specs):
            if o < 0:
                continue
            declared = self.dtypes[o]
            if np.dtype(spec.dtype) != declared:
                name = self.graph.tensors[o].name
                raise PrepareError(
                    f"{self.where(step)}: output tensor {o} ({name!r}) is declared {declared.name}"
                    f" but the op computes {np.dtype(spec.dtype).name}"
                )
            if spec.shape is not None:
                _check_output_shape(self.where(step), o, spec.shape, declared)
            self.shapes[o] = None if spec.shape is None else tuple(int(d) for d in spec.shape)
            self.dynamic[o] = spec.shape is None
        return specs

    def _all_known(self, step: Step) -> bool:
        shapes_suffice = step.kernel.reads_only_shapes
        return all(i < 0 or self.known[i] or shapes_suffice for i in step.inputs) and all(
            o >= 0 and o not in self.graph.inputs and not self.graph.tensors[o].is_variable for o in step.outputs
        )

    def _fold(self, step: Step) -> None:
        """Compute a node whose inputs are all known now, once, and keep its outputs."""
        ins = [self._known_or_placeholder(i) for i in step.inputs]
        outs = [np.empty(self.shapes[o], self.dtypes[o]) for o in step.outputs]
        with np.errstate(all="ignore"):  # as inside invoke (Interpreter._invoke)
            self._eval(step, ins, outs)
        for o, value in zip(step.outputs, outs):
            self.arrays[o] = value
            self.known[o] = True
        step.folded = True

    def _known_or_placeholder(self, i: int) -> np.ndarray | None:
        if i < 0:
            return None
        if self.known[i]:
            return self.arrays[i]
        # Only the shape matters (reads_only_shapes): a zero-stride array costs no memory.
        return np.lib.stride_tricks.as_strided(np.zeros(1, self.dtypes[i]), self.shapes[i], [0] * len(self.shapes[i]))

    def _place_tensors(self, persistent: set[int]) -> None:
        """Give every tensor computed at invoke its memory: own arrays for graph inputs,
        outputs and variables (and every tensor when preserving all), the arena for the rest."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for s, step in enumerate(self.plan):
            if step.folded:
                continue
            for i in step.inputs:
                if i >= 0:
                    last[i] = s
            for o in step.outputs:
                if o >= 0:
                    first.setdefault(o, s)
                    last.setdefault(o, s)
        preserve = self.interpreter.preserve_all_tensors
        lifetimes = []
        for i, t in enumerate(self.graph.tensors):
            if self.known[i] or self.dynamic[i]:
                continue
            if i in persistent or preserve:
                self._own_array(i)
            elif i in first:
                nbytes = int(np.prod(self.shapes[i], dtype=np.int64)) * self.dtypes[i].itemsize
                lifetimes.append(Lifetime(i, nbytes, first[i], last[i]))
        shares = self._in_place_shares(lifetimes, last)
        # A kernel's working memory is a temporary of its step (as in TFLite): it shares bytes
        # with the tensors that are not alive then. Numbered after the tensors.
        n = len(self.graph.tensors)
        users = {s: _scratch_user(step.kernel) for s, step in enumerate(self.plan) if not step.folded and not step.dynamic}
        temporaries = [Lifetime(n + s, user.scratch_bytes, s, s) for s, user in users.items() if user is not None]
        offsets, size = plan_arena(lifetimes + temporaries, shares)
        self.arena_plan = [(t.tensor, offsets[t.tensor], t.nbytes) for t in lifetimes]
        self.scratch_plan = [(users[t.tensor - n], offsets[t.tensor], t.nbytes) for t in temporaries]
        self.arena_bytes = size
        self.use_arena(self.interpreter.arena.region(self.index, size))

    def _in_place_shares(self, lifetimes: list[Lifetime], last: dict[int, int]) -> dict[int, tuple[int, int]]:
        """Arena outputs that may take over an input's memory, as ``output -> (input, byte
        offset)``: the kernel allows it (:func:`in_place_inputs`), the input is an arena tensor
        of the output's shape and dtype (or only of its size, for kernels whose output is the
        input's bytes in another shape, ``same_bytes``: RESHAPE then copies nothing) that no
        later node reads, and no other output took it already. A SPLIT whose parts are
        consecutive slices of its input's bytes (:func:`output_parts_of`; SPLIT_V and UNPACK
        too) hands each part its slice under the same conditions, and copies nothing. Each
        output of a WHILE may take the input at its position (:func:`outputs_over_inputs`)."""
        arena = {t.tensor for t in lifetimes}
        shares: dict[int, tuple[int, int]] = {}
        taken: set[int] = set()
        for s, step in enumerate(self.plan):
            if step.folded or step.dynamic or not step.outputs:
                continue
            pos = output_parts_of(step.kernel)
            if pos is not None:
                i = step.inputs[pos] if pos < len(step.inputs) else -1
                if i in arena and i not in taken and last.get(i) == s and all(o in arena for o in step.outputs):
                    offset = 0
                    for o in step.outputs:  # consecutive parts, in order
                        shares[o] = (i, offset)
                        offset += _size(self.shapes[o]) * self.dtypes[o].itemsize
                    taken.add(i)
                continue
            if outputs_over_inputs(step.kernel):  # a WHILE: output k over input k
                for o, i in zip(step.outputs, step.inputs):
                    same = self.dtypes[i] == self.dtypes[o] and self.shapes[i] == self.shapes[o]
                    if o in arena and i in arena and i not in taken and last.get(i) == s and same:
                        shares[o] = (i, 0)
                        taken.add(i)
                continue
            o = step.outputs[0]
            if o not in arena:
                continue
            regrouped = getattr(step.kernel, "same_bytes", False)  # RESHAPE & co: any shape
            for pos in in_place_inputs(step.kernel):
                i = step.inputs[pos] if pos < len(step.inputs) else -1
                if (
                    i in arena and i not in taken and last.get(i) == s and self.dtypes[i] == self.dtypes[o]
                    and (self.shapes[i] == self.shapes[o] or (regrouped and _size(self.shapes[i]) == _size(self.shapes[o])))
                ):  # fmt: skip
                    shares[o] = (i, 0)
                    taken.add(i)
                    break
        return shares

    def use_arena(self, buffer: np.ndarray) -> None:
        """Put the arena's tensors in ``buffer`` (the interpreter moves them into one arena
        shared by all subgraphs); the caller rebinds the plan."""
        self.arena = buffer
        # An output computed in place of its input gets the input's own array object, not a
        # second view of the same bytes: NumPy recognises ``out is input`` at once, but spends
        # ~0.16 us per ufunc call proving that two distinct views may overlap (0.34 against
        # 0.19 us for a multiply on 32 values, a third of a loop body's small calls).
        views: dict[tuple, np.ndarray] = {}
        for t, offset, nbytes in self.arena_plan:
            key = (offset, nbytes, self.dtypes[t], self.shapes[t])
            if key not in views:
                views[key] = buffer[offset : offset + nbytes].view(self.dtypes[t]).reshape(self.shapes[t])
            self.arrays[t] = views[key]
        for user, offset, nbytes in self.scratch_plan:
            user.pad = Scratchpad(buffer[offset : offset + nbytes])

    def _own_array(self, i: int) -> None:
        shape, dtype = self.shapes[i], self.dtypes[i]
        current = self.arrays[i]
        if current is not None and current.shape == shape and current.dtype == dtype and current.flags.writeable:
            return  # keep the data: inputs set before a re-allocation and variables survive it
        t = self.graph.tensors[i]
        initial = self.model.constant(self.graph, i) if t.is_variable else None
        self.arrays[i] = np.array(initial, dtype) if initial is not None else np.full(shape, _variable_fill(t), dtype)
        self.inputs_set.discard(i)  # new memory holds no input data yet

    def bind(self) -> None:
        """Bind every node to the arrays it reads and writes (again after the arena moved)."""
        self.slots: dict[int, list[tuple[list, int]]] = {}  # where each tensor's array is bound
        for step in self.plan:
            step.ins = [self.arrays[i] if i >= 0 else None for i in step.inputs]
            step.outs = [self.arrays[o] if o >= 0 else None for o in step.outputs]
            if not step.folded and not step.dynamic:
                for arrays, indices in ((step.ins, step.inputs), (step.outs, step.outputs)):
                    for pos, t in enumerate(indices):
                        if t >= 0:
                            self.slots.setdefault(t, []).append((arrays, pos))
        self.steps = [s for s in self.plan if not s.folded]
        self.has_dynamic = any(s.dynamic for s in self.steps)
        self.generation += 1
        self._program, self._stable_invokes = None, 0

    # -- while the compiled engine runs this subgraph -------------------------------------------

    def release_weights(self, keep: Collection[int] = ()) -> int:
        """Drop the weights that kernels laid out at prepare (packed filters, tiled biases:
        ``Kernel.derives_weights``) while the compiled engine runs this subgraph with its own
        copies; :meth:`prepare_released` prepares those nodes again before the NumPy engine
        next runs them. ``keep``: nodes whose kernels still run (the compiled model's islands).
        Each node gets a fresh kernel, so nothing (a program, the scratch plan) holds the old
        one. Returns the number of nodes it released now."""
        before = len(self.released)
        places = {user: (offset, nbytes) for user, offset, nbytes in self.scratch_plan}
        for step in self.plan:
            kernel = step.kernel
            if step.folded or step.dynamic or step.index in keep or step.index in self.released or not kernel.derives_weights:
                continue
            self.released[step.index] = places.pop(_scratch_user(kernel), None)
            step.kernel = type(kernel)(kernel.node)
            step.prepared_for = None  # an allocate_tensors() meanwhile prepares it with the rest
        self.scratch_plan = [(user, offset, nbytes) for user, (offset, nbytes) in places.items()]
        self._program, self._stable_invokes = None, 0  # it holds the old kernels' evals
        return len(self.released) - before

    def prepare_released(self) -> None:
        """Prepare again the nodes :meth:`release_weights` dropped, each into the working
        memory the arena plan gave it (the same inputs ask for the same bytes; a kernel that
        asked for more would carve the interpreter's shared pad instead)."""
        for index, place in self.released.items():
            step = self.plan[index]
            infos = self._infos(step)
            self._prepare(step, infos)
            step.prepared_for = tuple(infos)
            user = _scratch_user(step.kernel)
            if user is not None and place is not None and user.scratch_bytes <= place[1]:
                offset, nbytes = place
                user.pad = Scratchpad(self.arena[offset : offset + nbytes])
                self.scratch_plan.append((user, offset, nbytes))
        self.released = {}
        self._program, self._stable_invokes = None, 0

    # -- calls from control-flow kernels ---------------------------------------------------------

    def resize_inputs(self, shapes: list[tuple[int, ...]]) -> None:
        """Give the subgraph's inputs new shapes; it must be allocated again if any changed."""
        for i, shape in zip(self.graph.inputs, shapes):
            if self.shapes[i] != tuple(shape):
                self.shapes[i] = tuple(shape)
                self.allocated = False

    def rebind(self, tensor: int, array: np.ndarray) -> None:
        """Make the nodes of this subgraph read and write ``array`` as ``tensor``, without copying.

        Control-flow kernels use this to hand a subgraph the caller's buffers as its inputs and
        outputs (the spec's "pass buffer pointers" idea). The array must have the tensor's
        shape and dtype.
        """
        self.arrays[tensor] = array
        for arrays, pos in self.slots.get(tensor, ()):
            arrays[pos] = array
        self._program, self._stable_invokes = None, 0  # it holds the arrays it was built on

    def program(self, bound: dict[int, np.ndarray]) -> "Program | None":
        """The plan compiled for a binding of tensors to arrays (see :class:`Program`), or None
        when the plan has a dynamic node (which must run through ``invoke()``).

        ``bound`` maps tensors of this subgraph (normally all its inputs and every output it
        computes) to the caller's arrays of their shape and dtype; the other tensors keep the
        arrays the subgraph bound. The program stays valid until ``generation`` changes, and is
        not affected by ``rebind`` of the tensors it binds.
        """
        if self.has_dynamic:
            return None
        if self.released:
            self.prepare_released()
        return Program(self, bound)

    def reset_variables(self) -> None:
        """Restore every variable tensor to its initial value (zeros when it has none)."""
        for i, t in enumerate(self.graph.tensors):
            if t.is_variable and self.arrays[i] is not None:
                initial = self.model.constant(self.graph, i)
                if initial is None:
                    self.arrays[i].fill(_variable_fill(t))
                else:
                    np.copyto(self.arrays[i], initial.reshape(self.arrays[i].shape))

    # -- invoke ---------------------------------------------------------------------------------

    def invoke(self) -> None:
        """Run the plan once; inputs must have been set."""
        if self.released:  # the compiled engine ran it until now (see release_weights)
            self.prepare_released()
        interpreter = self.interpreter
        if not interpreter.watching:
            program = self._program
            if program is not None:
                program.call()
                return
            if self._stable_invokes and not self.has_dynamic:
                # Compiled on the second invoke on the same arrays: subgraphs that control-flow
                # ops rebind at every call (their dynamic paths) never pay for compiling.
                self._program = Program(self, {})
                self._program.call()
                return
            self._stable_invokes += 1
        step = None
        try:
            for step in self.steps:
                if interpreter.watching:  # cancellation or profiling asked for
                    interpreter.before_op(self, step)
                if step.dynamic:
                    self._prepare_at_runtime(step)
                step.kernel.eval(step.ins, step.outs)
                if step.dynamic:
                    self._store_dynamic_outputs(step)
                if interpreter.watching:
                    interpreter.after_op(self, step)
        except (PrepareError, CancelledError):
            raise  # already says where
        except Exception as e:
            raise self._invoke_error(step, e) from e

    def _eval(self, step: Step, ins: list, outs: list) -> None:
        try:
            step.kernel.eval(ins, outs)
        except Exception as e:
            raise self._invoke_error(step, e) from e

    def _invoke_error(self, step: Step | None, e: Exception) -> InvokeError:
        where = self.where(step) if step is not None else f"subgraph {self.index}"
        detail = str(e) if isinstance(e, NumliteError) else f"{type(e).__name__}: {e}"
        if step is None or isinstance(e, InvokeError):  # a callee's error already lists its tensors
            return InvokeError(f"{where} failed: {detail}")
        return InvokeError(
            f"{where} failed: {detail}; inputs: {self.describe(step.inputs)}; outputs: {self.describe(step.outputs)}"
        )

    def describe(self, tensors: list[int]) -> str:
        """``3 'conv/x' float32 (1, 8, 8, 3)`` for each tensor, as errors name them."""
        parts = []
        for i in tensors:
            if i < 0:
                parts.append("(omitted)")
                continue
            shape = self.arrays[i].shape if self.arrays[i] is not None else self.shapes[i]
            parts.append(f"{i} {self.graph.tensors[i].name!r} {self.dtypes[i].name} {tuple(shape) if shape is not None else '?'}")
        return "[" + ", ".join(parts) + "]"

    def _prepare_at_runtime(self, step: Step) -> None:
        """Re-prepare a dynamic node with the actual input arrays and allocate its outputs."""
        infos = self._infos(step, at_runtime=True)
        specs = self._prepare(step, infos)
        step.ins = [info.value if info is not None else None for info in infos]
        step.outs = []
        for o, spec in zip(step.outputs, specs):
            if o < 0 or spec.shape is None:
                step.outs.append(None)
            else:
                step.outs.append(np.empty(spec.shape, spec.dtype))

    def _store_dynamic_outputs(self, step: Step) -> None:
        for o, value in zip(step.outputs, step.outs):
            if o < 0:
                continue
            if value is None:
                raise NumliteError(f"the kernel did not produce output tensor {o}")
            self.arrays[o] = np.asarray(value, self.dtypes[o])
            self.shapes[o] = tuple(value.shape)


class Generated:
    """The source of one generated Python function built from node calls, and the function.

    Every value the code uses (kernels' bound ``eval`` methods or direct ufuncs, their
    argument arrays, the runtimes and steps the hooks are told about) is a closure variable
    ``cN`` of the generated ``run``; ``c0`` is the interpreter. :meth:`node` appends one node:
    the check of ``interpreter.watching`` (so that ``cancel()`` from another thread stops the
    invoke before the next node; a loop checks only before its cond and body) and the call,
    or nothing for a node the memory plan did, or Python arithmetic for single values
    (:func:`scalar_statement`). ``run`` raising names its node through :meth:`failed`, from
    the traceback's line: nothing is counted at run time.
    """

    _HEADER = 3  # "def make(v):", the unpacking, "def run():": the body starts on line 4

    def __init__(self, interpreter: Any) -> None:
        self.values: list[Any] = [interpreter]
        self.names: dict[int, str] = {id(interpreter): "c0"}
        self.lines: list[str] = []
        self.nodes: dict[int, tuple[SubgraphRuntime, Step]] = {}  # line -> the node it calls
        self.code: Any = None

    def name(self, value: Any) -> str:
        """The closure variable holding ``value`` (one per object)."""
        key = id(value)
        if key not in self.names:
            self.values.append(value)
            self.names[key] = f"c{len(self.values) - 1}"
        return self.names[key]

    def line(self, text: str, indent: int = 2) -> None:
        self.lines.append("    " * indent + text)

    def node(
        self, runtime: "SubgraphRuntime", step: Step, fn: Callable[..., Any], args: Sequence[Any], indent: int = 2,
        watched: bool = True,
    ) -> None:
        """Append the call of one node, after the check of ``interpreter.watching`` unless
        ``watched`` is False (the caller checked it already)."""
        if watched:
            self.line(f"if c0.watching: c0.before_op({self.name(runtime)}, {self.name(step)})", indent)
        if fn is nothing:  # the memory plan did its work (a RESHAPE or SPLIT of a dying input)
            return
        for text in scalar_statement(fn, args, self.name) or [f"{self.name(fn)}({', '.join(self.name(a) for a in args)})"]:
            self.line(text, indent)
            self.nodes[self._HEADER + len(self.lines)] = (runtime, step)

    def compile(self, filename: str) -> Callable[[], Any]:
        source = "\n".join([
            "def make(v):",
            f"    {', '.join(f'c{i}' for i in range(len(self.values)))}, = v",
            "    def run():",
            *self.lines,
            "        return",
            "    return run",
        ])  # fmt: skip
        namespace: dict[str, Any] = {"__name__": "numlite.interpreter.generated"}  # warnings name numlite
        exec(compile(source, filename, "exec"), namespace)
        run = namespace["make"](self.values)
        self.code = run.__code__
        return run

    def failed(self, e: Exception) -> "InvokeError | Exception":
        """The ``InvokeError`` naming the node that raised ``e`` (``e`` itself if none did)."""
        tb = self._frame(e)
        found = self.nodes.get(tb.tb_lineno) if tb is not None else None
        if found is None:
            return e
        runtime, step = found
        return runtime._invoke_error(step, e)

    def _frame(self, e: BaseException) -> Any:
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                return tb
            tb = tb.tb_next
        return None


class Program:
    """A subgraph's plan as one generated Python function, for one binding of its tensors.

    ``run()`` calls each node in order, as straight-line code: ``c3(c4, c5, c6)`` where ``c3``
    and its arguments are closure variables bound when the program is built (a kernel's bound
    ``eval`` with its input and output lists, or the single call of :func:`direct_call`); see
    :class:`Generated`. ``call()`` is ``run()`` with errors turned into the ``InvokeError``
    that names the failing node. ``outputs`` holds the array of each graph output under this
    binding; ``calls`` the ``(step, function, arguments)`` of each node, for code that
    generates a larger function around them (:class:`LoopProgram`).
    """

    __slots__ = ("runtime", "run", "outputs", "generation", "calls", "_generated")

    def __init__(self, runtime: SubgraphRuntime, bound: dict[int, np.ndarray]) -> None:
        self.runtime = runtime
        self.generation = runtime.generation
        self.calls: list[tuple[Step, Callable[..., Any], tuple]] = []
        generated = Generated(runtime.interpreter)
        for step in runtime.steps:
            if bound:
                ins = [bound.get(t, a) if t >= 0 else a for t, a in zip(step.inputs, step.ins)]
                outs = [bound.get(t, a) if t >= 0 else a for t, a in zip(step.outputs, step.outs)]
            else:
                ins, outs = list(step.ins), list(step.outs)
            direct = direct_call(step.kernel, ins, outs)
            fn, args = direct if direct is not None else (step.kernel.eval, (ins, outs))
            merged = None
            if self.calls:
                merged = merge_adjacent(self.calls[-1], fn, tuple(args)) or fuse_times_input(runtime, self.calls[-1], step, fn, args)
            if merged is not None:  # one call covers this node and the previous one
                self.calls[-1] = merged
                continue
            self.calls.append((step, fn, tuple(args)))
        for step, fn, args in self.calls:
            generated.node(runtime, step, fn, args)
        self.run: Callable[[], None] = generated.compile(f"<numlite subgraph {runtime.index}>")
        self._generated = generated
        arrays = runtime.arrays
        self.outputs = [bound.get(o, arrays[o]) for o in runtime.graph.outputs]

    def call(self) -> None:
        """``run()``, with errors naming the node that raised them."""
        try:
            self.run()
        except (PrepareError, CancelledError):
            raise  # already says where
        except Exception as e:
            raise self.error(e) from e

    def error(self, e: Exception) -> Exception:
        """The ``InvokeError`` for an exception ``run()`` raised: it names the failing node."""
        failed = self._generated.failed(e)
        return failed if failed is not e else self.runtime._invoke_error(None, e)


class LoopProgram:
    """A whole WHILE loop as one generated function, from the programs of its two phases.

    A WHILE's state alternates between two buffer sets (see ``control_flow.While``): phase 0
    reads the state from its outputs, phase 1 from its scratch set. Each phase is the cond's
    program, a test of its boolean, the body's program and the copies of the loop variables the
    body does not compute in place. ``run()`` first makes the ``entry`` copies (the WHILE's
    inputs into its outputs), then inlines both phases' node calls in one ``while`` loop, so
    that an iteration costs its nodes' calls and no more (no calls of the programs, no
    unpacking, no swapping of lists); when the loop ends in phase 1 it makes the ``exit``
    copies (the scratch set into the outputs). Before returning it adds the bytes it copied to
    the interpreter's ``control_flow_counters`` (a constant per way out of the loop, or one
    that grows with the iterations when the phases copy too). A ``cancel()`` stops it before
    the next cond or body (the first node of each checks ``watching``), and errors name the
    node that raised them (:meth:`error`).
    """

    __slots__ = ("run", "_generated")

    def __init__(
        self,
        interpreter: Any,
        phases: Sequence[tuple[Program, np.ndarray, Program, list]],
        entry: Sequence[tuple[np.ndarray, np.ndarray]] = (),
        exit: Sequence[tuple[np.ndarray, np.ndarray]] = (),
    ) -> None:
        generated = Generated(interpreter)
        copy = generated.name(copy_into)

        def copies(pairs: Sequence[tuple[np.ndarray, np.ndarray]], indent: int) -> None:
            for dst, src in pairs:
                generated.line(f"{copy}({generated.name(dst)}, {generated.name(src)})", indent)

        per_phase = [sum(dst.nbytes for dst, _ in pairs) for _, _, _, pairs in phases]
        counted = any(per_phase)  # iterations matter only for copies

        def leave(phase: int, indent: int) -> None:
            """Count the bytes copied (phases alternate from phase 0: ``n`` bodies ran) and return."""
            fixed = sum(dst.nbytes for dst, _ in entry) + (sum(dst.nbytes for dst, _ in exit) if phase == 1 else 0)
            total = f"{fixed} + (n + 1) // 2 * {per_phase[0]} + n // 2 * {per_phase[-1]}" if counted else str(fixed)
            if counted or fixed:
                generated.line(f'c0.control_flow_counters["bytes_copied"] += {total}', indent)
            generated.line("return", indent)

        copies(entry, 2)
        generated.line("n = 0")
        generated.line("while True:")
        for phase, (cond, truth, body, pairs) in enumerate(phases):
            # ``watching`` is checked once before the cond and once before the body, not before
            # every node: a loop program runs only when it was false as the invoke began, so
            # only a cancel() can set it (from another thread, or from a custom op in the loop),
            # and 25 checks were 6% of an LSTM step of small nodes.
            condition = scalar_condition(cond.calls, truth, generated.name)
            if condition is not None:  # e.g. i < n: compared in Python, no ufunc call
                first = cond.calls[0][0]
                generated.line(f"if c0.watching: c0.before_op({generated.name(cond.runtime)}, {generated.name(first)})", 3)
                generated.line(f"if not ({condition}):", indent=3)
                generated.line(f"{generated.name(truth)}.fill(False)", indent=4)  # as the cond would leave it
            else:
                for k, (step, fn, args) in enumerate(cond.calls):
                    generated.node(cond.runtime, step, fn, args, indent=3, watched=k == 0)
                generated.line(f"if not {generated.name(truth)}.item():", indent=3)
            if phase == 1:
                copies(exit, 4)
            leave(phase, 4)
            for k, (step, fn, args) in enumerate(body.calls):
                generated.node(body.runtime, step, fn, args, indent=3, watched=k == 0)
            copies(pairs, 3)
            if counted:
                generated.line("n += 1", indent=3)
        self.run: Callable[[], None] = generated.compile("<numlite while loop>")
        self._generated = generated

    def error(self, e: Exception) -> Exception:
        """The ``InvokeError`` naming the node that raised ``e`` in ``run()`` (``e`` itself when
        no node did)."""
        return self._generated.failed(e)


Call = tuple[Step, Callable[..., Any], tuple]  # a node's step, the function doing its work, its arguments


def merge_adjacent(previous: Call, fn: Callable[..., Any], args: tuple) -> Call | None:
    """One call for two consecutive calls of the same element-wise function ``fn(x, out)``
    whose inputs, and whose outputs, lie one after the other in memory: an LSTM step's input
    and forget gates, slices of one buffer, each through LOGISTIC in place (four ufunc calls
    saved). The merged call keeps the first node (hooks and errors name it). None unless the
    function is element-wise (a one-input ufunc, or ``elementwise`` set on it), both calls take
    C-contiguous arrays of one dtype in one buffer, and the merged output either is the merged
    input or does not overlap it (so no element is read after the first call wrote it)."""
    step, prev_fn, prev_args = previous
    if fn is not prev_fn or len(args) != 2 or len(prev_args) != 2:
        return None
    if not (getattr(fn, "elementwise", False) or (isinstance(fn, np.ufunc) and fn.nin == 1 and fn.nout == 1)):
        return None
    x = _joined(prev_args[0], args[0])
    out = _joined(prev_args[1], args[1])
    if x is None or out is None:
        return None
    same = x.ctypes.data == out.ctypes.data and x.dtype == out.dtype
    if not same and np.shares_memory(x, out):
        return None
    return step, fn, (out, out) if same else (x, out)


def fuse_times_input(runtime: SubgraphRuntime, previous: Call, step: Step, fn: Callable[..., Any], args: Sequence[Any]) -> Call | None:
    """One call for an element-wise node ``y = f(x)`` followed by a MUL ``x * y`` (or ``y * x``)
    when ``f`` offers the product as one function (``f.times_input(x, y, z)``, which may use
    ``y`` as working memory): LOGISTIC then MUL is swish, in four passes instead of five. Only
    when nothing else can see ``y``: this MUL is its only reader, it is no graph output, and
    tensors are not preserved. The call keeps the first node (hooks and errors name it); a
    watched invoke (profiler, cancellation) runs the two nodes apart."""
    first, prev_fn, prev_args = previous
    fused = getattr(prev_fn, "times_input", None)
    if fused is None or fn is not np.multiply or len(args) != 3 or len(prev_args) != 2:
        return None
    (x,), (y,) = first.inputs, first.outputs
    if x == y or sorted(step.inputs) != sorted((x, y)) or y in runtime.graph.outputs:
        return None
    if runtime.interpreter.preserve_all_tensors or sum(y in s.inputs for s in runtime.steps) != 1:
        return None
    x_array, y_array = prev_args
    a, b, out = args
    if not (x_array.shape == y_array.shape and x_array.size == out.size and a.shape == b.shape == out.shape):
        return None  # (merged LOGISTIC calls cover more than one node's tensors)
    if np.shares_memory(x_array, y_array):
        return None
    x_view, y_view = (a, b) if step.inputs[0] == x else (b, a)
    return first, fused, (x_view, y_view, out)


def _joined(a: Any, b: Any) -> np.ndarray | None:
    """A 1-D view over ``a`` then ``b`` when ``b``'s bytes follow ``a``'s in the buffer both
    view, else None."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype != b.dtype:
        return None
    if not (a.flags.c_contiguous and b.flags.c_contiguous and a.flags.writeable == b.flags.writeable) or not a.size:
        return None
    if b.ctypes.data != a.ctypes.data + a.nbytes:
        return None
    root_a, root_b = a, b
    while isinstance(root_a.base, np.ndarray):
        root_a = root_a.base
    while isinstance(root_b.base, np.ndarray):
        root_b = root_b.base
    if root_a is not root_b:
        return None
    start = root_a.ctypes.data
    if not (start <= a.ctypes.data and b.ctypes.data + b.nbytes <= start + root_a.nbytes):
        return None
    return np.lib.stride_tricks.as_strided(a.reshape(-1), (a.size + b.size,), (a.itemsize,), writeable=a.flags.writeable)


# The ufuncs of comparisons and logical ops, as Python operators on single values.
_SCALAR_OPERATORS: dict[Any, str] = {
    np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=", np.equal: "==",
    np.not_equal: "!=", np.logical_and: "and", np.logical_or: "or",
}


def scalar_condition(calls: Sequence[Call], truth: np.ndarray, name: Callable[[Any], str]) -> str | None:
    """A loop condition computed in Python: the expression (over ``name(array).item()`` of
    its inputs) of the boolean ``truth`` that ``calls`` (a cond's node calls) compute, when
    every call is a comparison or logical op of single values (``i < n``, ``i < n and t < m``)
    and the last one writes ``truth``; else None.

    Two ``item()`` reads and a Python comparison cost about 0.08 us, the ufunc call and the
    read of its result 0.2: a fifth of a trivial loop's iteration. The results are the
    same: ``item()`` gives Python ints and floats that hold the values exactly, and Python
    compares them as NumPy does (NaN included). The cond's intermediate tensors are not
    written (nothing outside the cond reads them); ``truth`` is set when the loop ends."""
    if not calls or calls[-1][2][-1] is not truth:
        return None
    produced: dict[int, str] = {}
    for _, fn, args in calls:
        operator = _SCALAR_OPERATORS.get(fn)
        if operator is None or len(args) != 3:
            return None
        if not all(isinstance(a, np.ndarray) and a.size == 1 and a.dtype.kind in "biuf" for a in args):
            return None
        a, b, out = args
        if id(out) in produced or out is a or out is b:
            return None
        produced[id(out)] = f"({_scalar_operand(a, produced, name)} {operator} {_scalar_operand(b, produced, name)})"
    return produced[id(truth)]


def _scalar_operand(a: np.ndarray, produced: dict[int, str], name: Callable[[Any], str]) -> str:
    return produced.get(id(a)) or f"{name(a)}.item()"


# ADD, SUB and MUL of single values (a loop's counter, a scalar state) as Python arithmetic.
_SCALAR_ARITHMETIC: dict[Any, str] = {np.add: "+", np.subtract: "-", np.multiply: "*"}
_SCALAR_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))


def scalar_statement(fn: Any, args: Sequence[Any], name: Callable[[Any], str]) -> list[str] | None:
    """The ufunc call ``fn(a, b, out)`` of an ADD, SUB or MUL of 0-d arrays of one dtype as
    Python statements: ``out[()] = a.item() + b.item()`` costs 0.05 us, the ufunc 0.2.

    The result is the same. A float32 sum, difference or product computed in double and
    rounded to float32 once is the correctly rounded float32 result (double has more than
    2 * 24 + 2 bits: rounding twice is harmless for these operations), infinities and NaN
    included (Python raises for none of them), and the flush-to-zero mode invoke sets rounds
    the store as it does NumPy's loops. Integers are exact in Python; a result out of the
    dtype's range (NumPy refuses to store it) falls back to the ufunc, which wraps as LiteRT
    does. None for anything else."""
    operator = _SCALAR_ARITHMETIC.get(fn)
    if operator is None or len(args) != 3:
        return None
    if not all(isinstance(a, np.ndarray) and a.shape == () for a in args):
        return None
    a, b, out = args
    if not (a.dtype == b.dtype == out.dtype and out.dtype in _SCALAR_DTYPES and out.flags.writeable):
        return None
    statement = f"{name(out)}[()] = {name(a)}.item() {operator} {name(b)}.item()"
    if out.dtype.kind == "f":
        return [statement]
    return [f"try: {statement}", f"except OverflowError: {name(fn)}({name(a)}, {name(b)}, {name(out)})"]


def direct_call(kernel: Kernel, ins: list, outs: list) -> tuple[Callable[..., Any], Sequence[Any]] | None:
    """The single call that does a node's work, when its kernel offers one.

    A kernel may define ``direct(ins, outs)`` returning ``(function, args)`` such that
    ``function(*args)`` computes exactly what ``eval(ins, outs)`` does (typically one ufunc with
    its output array positional), or None. It is used only where it describes the eval that
    would run: ``direct`` defined on the class that defines ``eval`` or below it, and no
    per-instance ``eval`` override.
    """
    owner = _describing_eval(kernel, "direct")
    return None if owner is None else owner.direct(ins, outs)


def _scratch_user(kernel: Kernel) -> ScratchUser | None:
    """The kernel that carves working memory at eval (the node's own, or the one its
    dispatcher chose at prepare), None when it wants none."""
    if isinstance(kernel, QuantizedDispatch):
        kernel = kernel.impl  # type: ignore[assignment]
    return kernel if isinstance(kernel, ScratchUser) and kernel.scratch_specs else None


def in_place_inputs(kernel: Kernel) -> tuple[int, ...]:
    """Positions of the inputs whose memory the node's output 0 may share (``inplace`` on the
    kernel class: its eval reads every element of such an input before, or as, it writes that
    element of the output). Trusted only where it describes the eval that runs, as for
    :func:`direct_call`."""
    owner = _describing_eval(kernel, "inplace")
    return () if owner is None else tuple(owner.inplace)


def outputs_over_inputs(kernel: Kernel) -> bool:
    """Whether each output of the node may share the memory of the input at its position
    (``outputs_over_inputs`` on the kernel class: a WHILE, which reads its inputs only to
    start the state in its outputs). Trusted only where it describes the eval that runs, as
    for :func:`direct_call`."""
    owner = _describing_eval(kernel, "outputs_over_inputs")
    return owner is not None and bool(owner.outputs_over_inputs)


def output_parts_of(kernel: Kernel) -> int | None:
    """The position of the input whose bytes the node's outputs are, one after the other in
    order (``parts_of`` on the kernel, set at prepare: a SPLIT, SPLIT_V or UNPACK along the
    outermost axis of more than one element), or None. Trusted only where it describes the
    eval that runs, as for :func:`direct_call`."""
    owner = _describing_eval(kernel, "parts_of")
    parts = None if owner is None else owner.parts_of
    return None if parts is None else int(parts)


def _describing_eval(kernel: Kernel, attribute: str) -> Kernel | None:
    """The kernel whose bound ``eval`` the node runs, when ``attribute`` is declared on the
    class that defines that ``eval`` or on a subclass of it (so it describes that eval, not a
    base class's), and no instance overrides ``eval``; else None."""
    owner = getattr(kernel.eval, "__self__", None)
    if owner is None or "eval" in vars(owner):
        return None
    mro = type(owner).__mro__
    eval_cls = next((c for c in mro if "eval" in c.__dict__), None)
    declaring = next((c for c in mro if attribute in c.__dict__), None)
    if eval_cls is None or declaring is None or not issubclass(declaring, eval_cls):
        return None
    return owner


def _check_output_shape(where: str, tensor: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Shapes computed from data (TILE multiples, FILL dims...) are bounded like the verifier
    bounds the model's own shapes, so no input can make numlite ask for absurd memory."""
    from numlite.model import verifier  # read at call time: tests may lower the bounds

    if any(int(d) < 0 for d in shape):
        raise PrepareError(f"{where}: output tensor {tensor} would have negative dimensions {tuple(shape)}")
    elements = int(np.prod(shape, dtype=np.float64))
    if elements > verifier.MAX_TENSOR_ELEMENTS or elements * dtype.itemsize > verifier.MAX_TENSOR_BYTES:
        raise PrepareError(f"{where}: output tensor {tensor} of shape {tuple(shape)} exceeds numlite's size limits")


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _same_inputs(before: tuple | None, now: list[TensorInfo | None]) -> bool:
    """Whether a node sees the same input shapes, dtypes and known values (the very same
    arrays) as when it was last prepared."""
    if before is None or len(before) != len(now):
        return False
    for a, b in zip(before, now):
        if a is None or b is None:
            if a is not b:
                return False
        elif a.shape != b.shape or a.dtype != b.dtype or a.value is not b.value:
            return False
    return True


def _variable_fill(t: Any) -> int:
    """What a variable tensor without a buffer starts as: zeros, but an int8 one holds its zero
    point (LiteRT's ResetVariableTensor), i.e. the real value 0 (an integer LSTM's output state)."""
    q = t.quantization
    if t.is_variable and t.dtype == np.int8 and q is not None and q.zero_point is not None and len(q.zero_point):
        return int(q.zero_point[0])
    return 0


def _dtype_of(t: Any) -> np.dtype:
    try:
        return t.dtype
    except NotImplementedError:
        return np.dtype(np.object_)
