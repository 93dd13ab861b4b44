"""Model-level passes after lowering, on numlite's model objects.

- :func:`add_variable_initializer`: a CALL_ONCE subgraph that gives every kept variable its
  initial value, called first thing by every signature.
- :func:`remove_unneeded_loop_copies`: a loop body's copy of an argument it returns at another
  position dropped where nothing can observe what the copy protects.
- :func:`remove_identity_ops`: multiplications and divisions by one, additions and
  subtractions of zero, ``and True`` and ``or False``, identity transposes and reshapes dropped.
- :func:`remove_duplicate_ops`: a pure operator computing what an earlier one computes dropped.
- :func:`fuse_into_producers`: a PAD by SAME's amounts folded into the convolution after it;
  the reshapes around a fully connected layer folded into it; a per-channel MUL, DIV, ADD or SUB
  after a convolution, transposed convolution or fully connected layer folded into its
  weights and bias (moved above reshapes that keep the channels first), and a scalar or
  per-input-channel one before a convolution or fully connected layer; RELU/RELU6/RELU_N1_TO_1
  fused into the op before.
- :func:`share_identical_signatures`: signatures whose subgraphs compute the same thing run one.
- :func:`remove_dead_code`: operators whose results nobody reads, then unused tensors,
  subgraphs and buffers; identical buffers stored once.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from numlite.converter.builder import options_for
from numlite.kernels import KERNELS
from numlite.model import schema
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Options, Subgraph, Tensor

if TYPE_CHECKING:
    from numlite.converter.lowering import ProgramLowering

_CALL_OPTIONS = {
    "IF": ("then_subgraph_index", "else_subgraph_index"),
    "WHILE": ("cond_subgraph_index", "body_subgraph_index"),
    "CALL_ONCE": ("init_subgraph_index",),
}
_SIDE_EFFECTS = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE"})
# Ops with constant weights whose output channels (the last axis) have a bias: its input index.
_BIAS_INPUT = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2, "TRANSPOSE_CONV": 3}
_WINDOWED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})  # padded windows, zeros count
# Layout ops that never move an element to another position on the (last) channel axis.
_CHANNEL_KEEPING = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "BATCH_TO_SPACE_ND"})
_SAME, _VALID = 0, 1
# Weighted ops that a scale or offset of their input can fold into (see _fold_input_op).
_TAKES_INPUT_FOLDS = frozenset({"FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"})
# Ops whose LiteRT kernels apply a fused activation (float).
_FUSES_ACTIVATION = frozenset(_BIAS_INPUT) | {"ADD", "SUB", "MUL", "DIV", "AVERAGE_POOL_2D", "MAX_POOL_2D"}
_ACTIVATIONS = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}
# x op c == x when c is all this.
_IDENTITY = {"MUL": 1.0, "DIV": 1.0, "ADD": 0.0, "SUB": 0.0, "LOGICAL_AND": True, "LOGICAL_OR": False}
_AFFINE = frozenset({"MUL", "DIV", "ADD", "SUB"})  # elementwise scales and offsets, which can fold into weights
_CONSTANT_SECOND = frozenset({"SUB", "DIV"})  # not commutative: folds only x op c
# (MAXIMUM bound, MINIMUM bound) pairs that clamp to an activation's range.
_CLAMPS = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}


def optimize_model(model: Model) -> None:
    """Run every model-level pass."""
    remove_unneeded_loop_copies(model)
    for index in range(len(model.subgraphs)):
        remove_identity_ops(model, index)
        fuse_into_producers(model, index)
        remove_duplicate_ops(model, index)
    share_identical_signatures(model)
    remove_dead_code(model)


# -- variables ---------------------------------------------------------------------------------


def add_variable_initializer(lowering: ProgramLowering) -> None:
    """If any variable stays a variable, build its initializer and call it from every entry."""
    if not lowering.variables:
        return
    init, _ = lowering.new_subgraph("variable_initializer", [])
    for name, variable in sorted(lowering.variables.items()):
        handle = init.var_handle(variable)
        init.emit("ASSIGN_VARIABLE", [handle, init.const(variable.value, f"{name}/initial_value")], [], fold=False)
    init.finish([], [])
    model = lowering.builder.model
    code = lowering.builder.opcode("CALL_ONCE")
    for entry in lowering.entries:
        call = Operator(code, [], [], options_for("CALL_ONCE", init_subgraph_index=init.builder.index))
        model.subgraphs[entry].operators.insert(0, call)


# -- fusion ------------------------------------------------------------------------------------


class _Uses:
    """Who produces and who reads each tensor of a subgraph."""

    def __init__(self, sg: Subgraph) -> None:
        self.producer: dict[int, Operator] = {}
        self.readers: dict[int, list[Operator]] = {}
        for op in sg.operators:
            for t in op.outputs:
                self.producer[t] = op
            for t in op.inputs:
                if t >= 0:
                    self.readers.setdefault(t, []).append(op)
        self.outputs = set(sg.outputs)

    def only_reader(self, tensor: int) -> Operator | None:
        readers = self.readers.get(tensor, [])
        return readers[0] if len(readers) == 1 and tensor not in self.outputs else None


def remove_identity_ops(model: Model, index: int) -> None:
    """Drop operators that pass a tensor through unchanged: their readers read it instead.

    ``x * 1``, ``x / 1``, ``x + 0`` and ``x - 0`` by constants (Keras' ``silu`` multiplies by a
    beta of 1, an unadapted Normalization subtracts 0 and divides by 1), when the constant does
    not broadcast ``x`` to another shape; ``x and True``, ``x or False`` (a loop's
    ``maximum_iterations`` joins its condition to a constant one); TRANSPOSE by the identity
    permutation (``tensordot`` makes one); RESHAPE to the shape ``x`` has. Exact, but for
    ``-0.0 + 0.0`` being ``+0.0``: a zero's sign is the only thing that can differ. Where the
    operator produces a subgraph output, the operator making ``x`` writes that output instead;
    when ``x`` is the subgraph's input or another output, the operator stays.
    """
    sg = model.subgraphs[index]
    producer = {t: op for op in sg.operators for t in op.outputs}
    ends = set(sg.inputs) | set(sg.outputs)
    replaced: dict[int, int] = {}

    def resolved(t: int) -> int:
        while t in replaced:
            t = replaced[t]
        return t

    kept = []
    for op in sg.operators:
        op.inputs = [resolved(t) for t in op.inputs]
        out = op.outputs[0] if len(op.outputs) == 1 else None
        # (A variable's writer resets a state: it stays.)
        x = _passed_through(model, sg, op) if out is not None and not sg.tensors[out].is_variable else None
        if x is not None and out not in sg.outputs:
            replaced[out] = x
        elif x is not None and x in producer and x not in ends and not sg.tensors[x].is_variable:
            maker = producer[x]
            maker.outputs = [out if t == x else t for t in maker.outputs]
            producer[out] = maker
            replaced[x] = out
        else:
            kept.append(op)
    sg.operators = kept
    for op in kept:
        op.inputs = [resolved(t) for t in op.inputs]


def share_identical_signatures(model: Model) -> None:
    """A signature whose subgraph computes exactly what an earlier signature's does (Keras 3's
    ``export`` writes ``serve`` and ``serving_default``, one function twice) runs the earlier
    one's subgraph: the model keeps both signatures but one copy of the operators. Subgraphs
    are alike when their operators, tensors (type, shape, data; not names) and the subgraphs
    they call are; the duplicate, called by nothing then, goes with the dead code. A subgraph
    whose variable tensors carry state from one invoke to the next (read before anything
    writes them, here or in a subgraph it calls) keeps its own: two signatures would share it."""
    keys: dict[int, tuple[tuple, list[int]]] = {}
    first: dict[tuple, int] = {}
    for signature in model.signature_defs:
        index = signature.subgraph_index
        if _carries_state(model, index):
            continue
        key, order = _subgraph_key(model, index, keys)
        earlier = first.setdefault(key, index)
        if earlier == index:
            continue
        position = {t: k for k, t in enumerate(order)}
        earlier_order = keys[earlier][1]
        signature.inputs = {name: earlier_order[position[t]] for name, t in signature.inputs.items()}
        signature.outputs = {name: earlier_order[position[t]] for name, t in signature.outputs.items()}
        signature.subgraph_index = earlier


def _carries_state(model: Model, index: int, seen: set[int] | None = None) -> bool:
    """Whether subgraph ``index`` or one it calls reads a variable tensor before writing it."""
    seen = set() if seen is None else seen
    if index in seen:
        return False
    seen.add(index)
    sg = model.subgraphs[index]
    written: set[int] = set()
    for op in sg.operators:
        if any(t >= 0 and sg.tensors[t].is_variable and t not in written for t in op.inputs):
            return True
        written.update(op.outputs)
    return any(_carries_state(model, c, seen) for op in sg.operators for c in _callees(model, op))


def _subgraph_key(model: Model, index: int, keys: dict[int, tuple[tuple, list[int]]]) -> tuple[tuple, list[int]]:
    """What subgraph ``index`` computes, as a hashable key, and its tensors in the order the key
    numbers them (inputs, then each operator's tensors, then the outputs). Memoized in ``keys``."""
    if index in keys:
        return keys[index]
    sg = model.subgraphs[index]
    number: dict[int, int] = {-1: -1}
    order: list[int] = []

    def numbered(tensors: list[int]) -> tuple[int, ...]:
        for t in tensors:
            if t not in number:
                number[t] = len(order)
                order.append(t)
        return tuple(number[t] for t in tensors)

    parts: list[tuple] = [numbered(sg.inputs)]
    for op in sg.operators:
        code = model.operator_codes[op.opcode_index]
        callees = {field: _subgraph_key(model, getattr(op.builtin_options, field), keys)[0]
                   for field in _CALL_OPTIONS.get(model.op_name(op), ()) if op.builtin_options is not None}
        parts.append((code.builtin, code.custom_code, code.version, _options_key(op.builtin_options, callees),
                      _options_key(op.builtin_options2, {}), op.custom_options, op.custom_options_format,
                      tuple(op.mutating_variable_inputs), numbered(op.inputs), numbered(op.outputs),
                      numbered(op.intermediates)))
    parts.append(numbered(sg.outputs))
    parts.append(tuple(_tensor_key(model, sg.tensors[t]) for t in order))
    keys[index] = (tuple(parts), order)
    return keys[index]


def _options_key(options: Options | None, replaced: dict[str, Any]) -> tuple | None:
    """Options as a hashable key, with the fields in ``replaced`` given those values instead."""
    if options is None:
        return None
    return (options.type_name,) + tuple(
        (name, replaced[name] if name in replaced else _value_key(value)) for name, value in options.fields().items())


def _tensor_key(model: Model, t: Tensor) -> tuple:
    data = model.buffers[t.buffer].data if 0 < t.buffer < len(model.buffers) else None
    content = None if data is None or data.size == 0 else hashlib.blake2b(data.tobytes(), digest_size=20).digest()
    return (t.type, tuple(t.shape), _dims(t), t.is_variable, t.has_rank, repr(t.quantization), repr(t.sparsity), content)


def _value_key(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_value_key(v) for v in value)
    return value


def remove_unneeded_loop_copies(model: Model) -> None:
    """Let a loop body return an argument itself at another position where the copy lowering
    made of it is never observed.

    A body result that is the body's argument j at position k != j is lowered as a copy, since
    LiteRT's WHILE, moving results to arguments one position after the other, may alias the two
    and hand the body argument k the new value of j (a swap ``(a, b) -> (b, a)`` would return
    ``(b, b)``). Only the body's argument k and the WHILE's result k can see that: the condition
    receives the results before any is moved. Where the body never reads its argument k and no
    one reads the WHILE's result k (``x, prev -> f(x), x`` until ``|x - prev|`` is small, the
    result being ``x``), the copy goes, as the official converter makes such loops."""
    uses = [_Uses(sg) for sg in model.subgraphs]
    callers: dict[int, list[tuple[int, Operator]]] = {}
    for index, sg in enumerate(model.subgraphs):
        for op in sg.operators:
            for callee in _callees(model, op):
                callers.setdefault(callee, []).append((index, op))
    for body_index, calls in callers.items():
        if not all(model.op_name(op) == "WHILE" and op.builtin_options.body_subgraph_index == body_index
                   for _, op in calls):
            continue
        body, body_uses = model.subgraphs[body_index], uses[body_index]
        for k, result in enumerate(body.outputs):
            j = _copied_argument(model, body, body_uses.producer.get(result))
            if (j is None or j == k or k >= len(body.inputs) or body_uses.readers.get(body.inputs[k])
                    or body.inputs[k] in body.outputs):
                continue
            if all(k < len(op.outputs) and not uses[at].readers.get(op.outputs[k]) and op.outputs[k] not in uses[at].outputs
                   for at, op in calls):
                body.outputs[k] = body.inputs[j]


def _copied_argument(model: Model, sg: Subgraph, op: Operator | None) -> int | None:
    """If ``op`` copies an input of ``sg`` (a RESHAPE to that input's own shape), its position."""
    if op is None or model.op_name(op) != "RESHAPE" or op.inputs[0] not in sg.inputs:
        return None
    x = op.inputs[0]
    shape = model.constant(sg, op.inputs[1]) if len(op.inputs) > 1 else None
    if len(op.inputs) > 1 and _dims(sg.tensors[op.inputs[1]]) == (0,):
        shape = np.zeros(0, np.int32)  # a scalar's shape: no data to store
    dims = _dims(sg.tensors[x])
    # (With at most one dimension known only at run time, the element count fixes it.)
    same_shape = (shape is not None and dims.count(-1) <= 1 and tuple(shape.tolist()) == dims
                  and _dims(sg.tensors[op.outputs[0]]) == dims)
    shape_of_x = len(op.inputs) > 1 and any(
        model.op_name(o) == "SHAPE" and o.inputs == [x] and o.outputs == [op.inputs[1]] for o in sg.operators)
    return sg.inputs.index(x) if same_shape or shape_of_x else None


def remove_duplicate_ops(model: Model, index: int) -> None:
    """Drop a pure operator (one numlite's kernels may fold) that reads the same tensors with the
    same options as an earlier one: its readers read the earlier one's outputs (Keras'
    Bidirectional transposes its input once per direction). Runs after the fusions, which may
    need an operator to have a single reader. An operator producing a subgraph output stays."""
    sg = model.subgraphs[index]
    earlier: dict[tuple, list[Operator]] = {}
    replaced: dict[int, int] = {}
    kept = []
    for op in sg.operators:
        op.inputs = [replaced.get(t, t) for t in op.inputs]
        kernel = KERNELS.get(model.op_name(op))
        if (kernel is None or not kernel.foldable or op.custom_options is not None
                or any(sg.tensors[t].is_variable for t in op.outputs)):  # each state its own tensor
            kept.append(op)
            continue
        candidates = earlier.setdefault((op.opcode_index, tuple(op.inputs)), [])
        twin = next((o for o in candidates if _computes_alike(sg, o, op)), None)
        if twin is None or any(t in sg.outputs for t in op.outputs):
            kept.append(op)
            candidates.append(op)
        else:
            replaced.update(zip(op.outputs, twin.outputs))
    sg.operators = kept


def _computes_alike(sg: Subgraph, a: Operator, b: Operator) -> bool:
    """Whether two operators of one code and inputs have equal options and alike outputs."""
    return (a.builtin_options == b.builtin_options and len(a.outputs) == len(b.outputs)
            and all(sg.tensors[x].type == sg.tensors[y].type and _dims(sg.tensors[x]) == _dims(sg.tensors[y])
                    for x, y in zip(a.outputs, b.outputs)))


def _passed_through(model: Model, sg: Subgraph, op: Operator) -> int | None:
    """The tensor ``op`` passes through unchanged, if it does (see :func:`remove_identity_ops`)."""
    name, out = model.op_name(op), sg.tensors[op.outputs[0]]
    if len(op.inputs) != 2 or getattr(op.builtin_options, "fused_activation_function", 0) != 0:
        return None
    if name == "TRANSPOSE":
        perm = model.constant(sg, op.inputs[1])
        passed = perm is not None and np.array_equal(perm, np.arange(perm.size))
        return op.inputs[0] if passed else None
    if name == "RESHAPE":
        # Equal shapes with at most one dimension known only at run time: the same at run time.
        dims = _dims(sg.tensors[op.inputs[0]])
        return op.inputs[0] if dims and dims == _dims(out) and dims.count(-1) <= 1 else None
    if name not in _IDENTITY:
        return None
    for k in (1,) if name in _CONSTANT_SECOND else (1, 0):  # the constant's position: first only if commutative
        x, c = op.inputs[1 - k], model.constant(sg, op.inputs[k])
        t = sg.tensors[x]
        # (An unknown rank is stored as shape (): only a scalar constant is known not to broadcast.)
        if (c is not None and np.all(c == _IDENTITY[name]) and t.type == out.type and c.ndim <= len(_dims(out))
                and _dims(t) == _dims(out)):
            return x
    return None


def _dims(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape_signature if t.shape_signature is not None else t.shape)


def fuse_into_producers(model: Model, index: int) -> None:
    """Fold PADs into the convolutions after them and reshapes around fully connected layers
    into them; then, until nothing changes, move per-channel ops above the layout ops that
    separate them from a convolution, and fold per-channel MUL/ADD/SUB by constants and
    RELU-style activations into the ops before them (scales and biases first, so that an
    activation never blocks a fold)."""
    sg = model.subgraphs[index]
    _merge_pairs(model, sg, (_fold_pad, _fold_flatten, _keep_num_dims, _clamp_to_activation))
    _max_zero_to_relu(model, sg)
    changed = True
    while changed:
        hoisted = _hoist_channel_ops(model, sg)
        changed = _merge_pairs(model, sg, (_fold_channel_op, _fold_input_op, _fuse_activation)) or hoisted


def _merge_pairs(model: Model, sg: Subgraph, fusions: tuple) -> bool:
    """Apply each fusion wherever it fits; returns whether any did. A fusion merges ``op`` and
    the only reader of its result, ``after``, into ``op``, which then produces ``after``'s result."""
    merged = False
    for fuse in fusions:
        changed = True
        while changed:
            changed = False
            uses = _Uses(sg)
            for op in list(sg.operators):
                after = uses.only_reader(op.outputs[0]) if len(op.outputs) == 1 and op in sg.operators else None
                if after is not None and len(after.outputs) == 1 and fuse(model, sg, op, after):
                    op.outputs = list(after.outputs)
                    sg.operators.remove(after)
                    uses = _Uses(sg)
                    changed = merged = True
    return merged


def _hoist_channel_ops(model: Model, sg: Subgraph) -> bool:
    """Move activations and MUL/ADD/SUB by per-channel constants above layout ops that leave
    the channel axis last and of the same size (so every element keeps its channel), towards
    the convolution that can absorb them: Keras' Conv1D adds its bias after squeezing the
    convolution's result, a dilated one after a BATCH_TO_SPACE_ND too. Returns whether any moved."""
    moved = False
    uses = _Uses(sg)
    for layout in list(sg.operators):
        if model.op_name(layout) not in _CHANNEL_KEEPING:
            continue
        source, middle = layout.inputs[0], layout.outputs[0]
        producer, after = uses.producer.get(source), uses.only_reader(middle)
        if producer is None or after is None or uses.only_reader(source) is not layout:
            continue
        source_dims, middle_dims = _dims(sg.tensors[source]), _dims(sg.tensors[middle])
        channels = source_dims[-1] if source_dims else -1
        keeps_channels = channels >= 0 and middle_dims[-1:] == (channels,)
        rank = min(len(source_dims), len(middle_dims))
        towards_weights = model.op_name(producer) in _BIAS_INPUT or model.op_name(producer) in _CHANNEL_KEEPING
        if towards_weights and keeps_channels and _per_channel_op(model, sg, after, middle, channels, rank):
            _swap(sg, layout, after)
            uses = _Uses(sg)
            moved = True
    return moved


def _per_channel_op(model: Model, sg: Subgraph, op: Operator, x: int, channels: int, rank: int) -> bool:
    """Whether ``op`` applies one function to every element of a channel of ``x``."""
    return model.op_name(op) in _ACTIVATIONS or _channel_operand(model, sg, op, x, channels, rank) is not None


def _swap(sg: Subgraph, layout: Operator, after: Operator) -> None:
    """``layout`` then ``after`` become ``after`` then ``layout``: ``after`` reads what
    ``layout`` read, into the tensor between them, which takes the shape of what it reads."""
    source, middle, result = layout.inputs[0], layout.outputs[0], after.outputs[0]
    after.inputs = [source if t == middle else t for t in after.inputs]
    after.outputs = [middle]
    layout.inputs = [middle] + layout.inputs[1:]
    layout.outputs = [result]
    moved_to, moved_from = sg.tensors[middle], sg.tensors[source]
    moved_to.shape, moved_to.shape_signature = moved_from.shape, moved_from.shape_signature
    sg.operators.remove(after)
    sg.operators.insert(sg.operators.index(layout), after)


def _fusable(sg: Subgraph, op: Operator, after: Operator) -> bool:
    """Both float, and ``op`` has no fused activation of its own yet."""
    float_out = all(sg.tensors[t].type == "FLOAT32" for t in (op.outputs[0], after.outputs[0]))
    return float_out and getattr(op.builtin_options, "fused_activation_function", None) == 0


def _fold_pad(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    """A PAD by exactly SAME's amounts before a VALID convolution (Keras' ZeroPadding2D before
    a strided convolution, TF's EXPLICIT padding): the PAD becomes the convolution with SAME
    padding. The input's spatial size must be static, as SAME's amounts depend on it."""
    if model.op_name(op) != "PAD" or model.op_name(after) not in _WINDOWED or after.inputs[0] != op.outputs[0]:
        return False
    options = after.builtin_options
    pads = model.constant(sg, op.inputs[1])
    x_dims, filter_dims = _dims(sg.tensors[op.inputs[0]]), _dims(sg.tensors[after.inputs[1]])
    if options.padding != _VALID or pads is None or len(x_dims) != 4 or min(x_dims[1:3] + filter_dims[1:3]) < 0:
        return False
    same = [[0, 0],
            _same_padding(x_dims[1], filter_dims[1], options.stride_h, options.dilation_h_factor),
            _same_padding(x_dims[2], filter_dims[2], options.stride_w, options.dilation_w_factor),
            [0, 0]]  # fmt: skip
    if pads.tolist() != same:
        return False
    options.padding = _SAME
    _become(op, after, [op.inputs[0]] + after.inputs[1:])
    return True


def _become(op: Operator, after: Operator, inputs: list[int]) -> None:
    """``op`` turns into ``after`` reading ``inputs`` (the fusion loop then gives it ``after``'s
    result and drops ``after``): for fusions that remove the first of the two operators."""
    op.opcode_index, op.builtin_options, op.inputs = after.opcode_index, after.builtin_options, inputs


def _fold_flatten(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    """A RESHAPE read only by a FULLY_CONNECTED that flattens its input anyway (without
    keep_num_dims it reads any input as rows of its depth): the FULLY_CONNECTED reads the
    RESHAPE's input, when that ends in an axis of the depth (Keras' Dense on rank-3 inputs)."""
    if model.op_name(op) != "RESHAPE" or model.op_name(after) != "FULLY_CONNECTED" or after.inputs[0] != op.outputs[0]:
        return False
    depth = _dims(sg.tensors[after.inputs[1]])[-1]  # weights are [units, depth]
    if after.builtin_options.keep_num_dims or depth < 0 or _dims(sg.tensors[op.inputs[0]])[-1:] != (depth,):
        return False
    _become(op, after, [op.inputs[0]] + after.inputs[1:])
    return True


def _keep_num_dims(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    """A FULLY_CONNECTED whose rows a RESHAPE gives the input's leading dimensions back to:
    the FULLY_CONNECTED with keep_num_dims. With at most one of those dimensions known only
    at run time, the element count fixes it, so the two shapes are the same at run time."""
    if model.op_name(op) != "FULLY_CONNECTED" or model.op_name(after) != "RESHAPE" or op.builtin_options.keep_num_dims:
        return False
    units, depth = _dims(sg.tensors[op.inputs[1]])
    x_dims = _dims(sg.tensors[op.inputs[0]])
    if min(units, depth) < 0 or len(x_dims) < 2 or x_dims[-1] != depth or x_dims.count(-1) > 1:
        return False
    if _dims(sg.tensors[after.outputs[0]]) != x_dims[:-1] + (units,):
        return False
    op.builtin_options.keep_num_dims = True
    return True


def _same_padding(size: int, kernel: int, stride: int, dilation: int) -> list[int]:
    """[before, after] amounts of SAME padding (TF's and TFLite's: the odd one after)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return [total // 2, total - total // 2]


def _clamp_to_activation(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    """MAXIMUM by a scalar constant then MINIMUM by another, in either order (``tf.clip_by_value``,
    ``tf.minimum(tf.maximum(x, -1), 1)``), clamping to [0, 6] or [-1, 1]: RELU6 or RELU_N1_TO_1,
    which the op before may then absorb. Exact for every value but NaN (LiteRT's clamps map it
    into the range), the rewrite the official converter makes too."""
    names = (model.op_name(op), model.op_name(after))
    if sorted(names) != ["MAXIMUM", "MINIMUM"]:
        return False
    first, second = _clamp_bound(model, sg, op, op.inputs), _clamp_bound(model, sg, after, [op.outputs[0]])
    if first is None or second is None or second[0] != op.outputs[0]:
        return False
    bounds = {names[0]: first[1], names[1]: second[1]}
    activation = _CLAMPS.get((bounds["MAXIMUM"], bounds["MINIMUM"]))
    if activation is None:
        return False
    _become_op(model, op, activation, [first[0]])
    return True


def _max_zero_to_relu(model: Model, sg: Subgraph) -> None:
    """MAXIMUM of a float tensor and a scalar zero (``tf.maximum(x, 0.)``) is RELU (exact but
    for NaN, see :func:`_clamp_to_activation`), which the op before may then absorb."""
    for op in sg.operators:
        if model.op_name(op) == "MAXIMUM":
            bound = _clamp_bound(model, sg, op, op.inputs)
            if bound is not None and bound[1] == 0.0:
                _become_op(model, op, "RELU", [bound[0]])
    _merge_pairs(model, sg, (_fuse_activation,))


def _clamp_bound(model: Model, sg: Subgraph, op: Operator, candidates: list[int]) -> tuple[int, float] | None:
    """For a float32 binary op of one of ``candidates`` and a scalar constant that does not
    broadcast it to another shape: that operand and the constant's value."""
    if len(op.inputs) != 2 or len(op.outputs) != 1 or getattr(op.builtin_options, "fused_activation_function", 0):
        return None
    out = sg.tensors[op.outputs[0]]
    for k in (0, 1):
        x, c = op.inputs[k], model.constant(sg, op.inputs[1 - k])
        t = sg.tensors[x]
        if (x in candidates and c is not None and c.size == 1 and c.dtype == np.float32 and t.type == out.type == "FLOAT32"
                and c.ndim <= len(_dims(out)) and _dims(t) == _dims(out) and model.constant(sg, x) is None):
            return x, float(c.reshape(()))
    return None


def _become_op(model: Model, op: Operator, name: str, inputs: list[int]) -> None:
    """Turn ``op`` into builtin ``name`` (which has no options) reading ``inputs``."""
    op.opcode_index = _opcode(model, name)
    op.inputs, op.builtin_options, op.builtin_options2 = inputs, None, None


def _opcode(model: Model, name: str) -> int:
    for k, code in enumerate(model.operator_codes):
        if code.builtin == name and code.custom_code is None:
            return k
    model.operator_codes.append(OperatorCode(name))
    return len(model.operator_codes) - 1


def _fuse_activation(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    name, next_name = model.op_name(op), model.op_name(after)
    if next_name not in _ACTIVATIONS or name not in _FUSES_ACTIVATION or not _fusable(sg, op, after):
        return False
    op.builtin_options.fused_activation_function = _ACTIVATIONS[next_name]
    return True


def _fold_channel_op(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    """A MUL/DIV/ADD/SUB by a per-channel constant after a weighted op, folded into weights and
    bias; the folded op's own activation moves onto the weighted op."""
    name = model.op_name(op)
    if name not in _BIAS_INPUT or not _fusable(sg, op, after):
        return False
    # The weights give the channel count even where the output's shape is unknown.
    weights_shape = sg.tensors[op.inputs[1]].shape
    channels = weights_shape[-1] if name == "DEPTHWISE_CONV_2D" else weights_shape[0]
    channel = _channel_operand(model, sg, after, op.outputs[0], channels, len(_dims(sg.tensors[op.outputs[0]])))
    if channel is None or not _fold_channel(model, sg, op, name, model.op_name(after), channel):
        return False
    op.builtin_options.fused_activation_function = getattr(after.builtin_options, "fused_activation_function", 0)
    return True


def _fold_input_op(model: Model, sg: Subgraph, op: Operator, after: Operator) -> bool:
    """A MUL/DIV/ADD/SUB of a tensor by a constant, scalar or one value per input channel, read
    only by a fully connected layer or convolution (Keras' Rescaling before the first layer, a
    scale before a Dense): a scale folds into the weights of each input channel, an offset into
    the bias as the sum of the offsets times the weights that read them. An offset only where
    the windows read no padding, which it would not offset. The two become ``after`` reading
    the tensor."""
    name = model.op_name(after)
    operands = _affine_operands(model, sg, op)
    if name not in _TAKES_INPUT_FOLDS or operands is None or after.inputs[0] != op.outputs[0]:
        return False
    x, constant = operands
    weights = model.constant(sg, after.inputs[1])
    x_dims = _dims(sg.tensors[x])
    depth = _input_depth(name, weights, x_dims)
    if depth is None or _dims(sg.tensors[op.outputs[0]]) != x_dims:  # the constant broadcasts x
        return False
    c = _per_channel(model, sg, constant, depth, len(x_dims))
    if c is None or (x_dims[-1:] != (depth,) and np.any(c != c[0])):  # per channel needs x's channels
        return False
    how = model.op_name(op)
    if how in ("MUL", "DIV"):
        folded = _scaled(weights, _along_input_channels(c, name, weights), how)
        if not _keeps_precision(weights, folded):
            return False
        after.inputs[1] = _new_const(model, sg, folded, sg.tensors[after.inputs[1]].name)
    else:
        bias = _bias(model, sg, after, name, _output_channels(name, weights))
        if bias is None or not _reads_no_padding(after, name, x_dims, weights):
            return False
        offset = _along_input_channels(c if how == "ADD" else -c, name, weights).astype(np.float64)
        summed = weights.astype(np.float64) * offset  # each weight times what its input is offset by
        per_output = summed.sum(axis=1) if name == "FULLY_CONNECTED" else summed.sum(
            axis=(0, 1, 2) if name == "DEPTHWISE_CONV_2D" else (1, 2, 3))
        new_bias = (bias.astype(np.float64) + per_output).astype(np.float32)
        if not np.all(np.isfinite(new_bias)):
            return False
        _store_bias(model, sg, after, name, new_bias)
    _become(op, after, [x] + after.inputs[1:])
    return True


def _affine_operands(model: Model, sg: Subgraph, op: Operator) -> tuple[int, int] | None:
    """For a float32 MUL/DIV/ADD/SUB without a fused activation of a tensor computed at run time
    and a constant (second for DIV and SUB): (that tensor, the constant)."""
    how = model.op_name(op)
    if (how not in _AFFINE or len(op.inputs) != 2 or len(op.outputs) != 1
            or getattr(op.builtin_options, "fused_activation_function", 0) != 0):
        return None
    for k in (1,) if how in _CONSTANT_SECOND else (1, 0):
        x, constant = op.inputs[1 - k], op.inputs[k]
        if (model.constant(sg, constant) is not None and model.constant(sg, x) is None
                and sg.tensors[x].type == sg.tensors[op.outputs[0]].type == "FLOAT32"):
            return x, constant
    return None


def _input_depth(name: str, weights: np.ndarray | None, x_dims: tuple[int, ...]) -> int | None:
    """How many input channels ``op``'s float32 weights read (a depthwise convolution's: the
    input's, which must be known), or None."""
    if weights is None or weights.dtype != np.float32:
        return None
    if name == "FULLY_CONNECTED":
        return weights.shape[1]
    if name == "CONV_2D":
        return weights.shape[3]
    channels = x_dims[-1] if x_dims else -1
    return channels if channels > 0 and weights.shape[3] % channels == 0 else None


def _output_channels(name: str, weights: np.ndarray) -> int:
    return weights.shape[3] if name == "DEPTHWISE_CONV_2D" else weights.shape[0]


def _along_input_channels(c: np.ndarray, name: str, weights: np.ndarray) -> np.ndarray:
    """A per-input-channel vector shaped to broadcast over ``weights``: FULLY_CONNECTED's
    [units, depth] and CONV_2D's [out, h, w, in] read input channels on their last axis; a
    depthwise convolution's [1, h, w, in * multiplier] reads input channel i in outputs
    i * multiplier to (i + 1) * multiplier - 1."""
    if name == "DEPTHWISE_CONV_2D":
        c = np.repeat(c, weights.shape[3] // len(c))
    return c.reshape((1,) * (weights.ndim - 1) + (-1,))


def _reads_no_padding(op: Operator, name: str, x_dims: tuple[int, ...], weights: np.ndarray) -> bool:
    """Whether every window of ``op`` lies inside its input: VALID padding, or SAME's amounts all
    zero (a 1x1 kernel, or a stride that tiles a static input exactly)."""
    if name == "FULLY_CONNECTED" or op.builtin_options.padding == _VALID:
        return True
    options = op.builtin_options
    if len(x_dims) != 4 or min(x_dims[1:3]) < 0:
        return False
    return not any(_same_padding(x_dims[1], weights.shape[1], options.stride_h, options.dilation_h_factor)
                   + _same_padding(x_dims[2], weights.shape[2], options.stride_w, options.dilation_w_factor))


def _channel_operand(model: Model, sg: Subgraph, op: Operator, x: int, channels: int, rank: int) -> np.ndarray | None:
    """If ``op`` is ``x`` times, divided by, plus or minus a per-channel constant (see
    :func:`_per_channel`), that constant as a vector of ``channels``."""
    how = model.op_name(op)
    other = [t for t in op.inputs if t != x]
    if how not in _AFFINE or len(other) != 1 or (how in _CONSTANT_SECOND and op.inputs[1] != other[0]):
        return None
    return _per_channel(model, sg, other[0], channels, rank)


def _per_channel(model: Model, sg: Subgraph, tensor: int, channels: int, rank: int) -> np.ndarray | None:
    """A constant that broadcasts along the last axis of a rank-``rank`` tensor of ``channels``
    channels only (and so leaves its shape as it is), as a vector of one value per channel."""
    value = model.constant(sg, tensor)
    if value is None or value.dtype != np.float32 or channels <= 0 or value.ndim > rank:
        return None
    if value.ndim == 0:
        return np.full(channels, value, np.float32)
    if value.shape[-1] in (1, channels) and all(d == 1 for d in value.shape[:-1]):
        return np.broadcast_to(value.reshape(-1), (channels,)).astype(np.float32)
    return None


def _fold_channel(model: Model, sg: Subgraph, op: Operator, name: str, how: str, c: np.ndarray) -> bool:
    """``op``'s output channels scaled (MUL, DIV) or offset (ADD, SUB) by ``c``, in its weights and bias."""
    weights = model.constant(sg, op.inputs[1])
    if weights is None or weights.dtype != np.float32:
        return False
    bias = _bias(model, sg, op, name, len(c))
    if bias is None:
        return False
    if how in ("MUL", "DIV"):
        # Output channels are the weights' first axis, but DEPTHWISE_CONV_2D's last.
        axis_shape = (1, 1, 1, -1) if name == "DEPTHWISE_CONV_2D" else (-1,) + (1,) * (weights.ndim - 1)
        new_weights, new_bias = _scaled(weights, c.reshape(axis_shape), how), _scaled(bias, c, how)
        if not (_keeps_precision(weights, new_weights) and _keeps_precision(bias, new_bias)):
            return False
        op.inputs[1] = _new_const(model, sg, new_weights, sg.tensors[op.inputs[1]].name)
    else:
        new_bias = (bias + c if how == "ADD" else bias - c).astype(np.float32)
    _store_bias(model, sg, op, name, new_bias)
    return True


def _scaled(values: np.ndarray, c: np.ndarray, how: str) -> np.ndarray:
    """``values`` times (MUL) or divided by (DIV) ``c``, in float32: a division stays one (each
    folded value correctly rounded), which is at least as close as the official converter's
    multiplication by the rounded reciprocal."""
    with np.errstate(all="ignore"):
        return (values * c if how == "MUL" else values / c).astype(np.float32)


def _keeps_precision(original: np.ndarray, folded: np.ndarray) -> bool:
    """Whether folded float32 values still compute what the op did: all finite (a division by
    zero or an overflow is not), and no nonzero value pushed to zero or among the subnormals,
    where float32 loses its relative precision."""
    tiny = np.finfo(np.float32).tiny
    return bool(np.all(np.isfinite(folded)) and np.all((np.abs(folded) >= tiny) | (original == 0)))


def _bias(model: Model, sg: Subgraph, op: Operator, name: str, channels: int) -> np.ndarray | None:
    """``op``'s constant bias (zeros where it has none), or None if it is computed at run time."""
    position = _BIAS_INPUT[name]
    bias_index = op.inputs[position] if len(op.inputs) > position else -1
    return model.constant(sg, bias_index) if bias_index >= 0 else np.zeros(channels, np.float32)


def _store_bias(model: Model, sg: Subgraph, op: Operator, name: str, bias: np.ndarray) -> None:
    """Give ``op`` the float32 ``bias`` as a new constant (a FULLY_CONNECTED none if it is zero)."""
    position = _BIAS_INPUT[name]
    bias_index = op.inputs[position] if len(op.inputs) > position else -1
    if name == "FULLY_CONNECTED" and not bias.any():
        op.inputs[position:] = []  # its bias is optional: a zero one would only take space
        return
    bias_name = sg.tensors[bias_index].name if bias_index >= 0 else f"{sg.tensors[op.outputs[0]].name}/bias"
    op.inputs[position:] = [_new_const(model, sg, bias.astype(np.float32), bias_name)]


def _new_const(model: Model, sg: Subgraph, value: np.ndarray, name: str) -> int:
    model.buffers.append(Buffer(np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)))
    sg.tensors.append(Tensor(name, tuple(value.shape), schema.type_name_of(value.dtype), buffer=len(model.buffers) - 1))
    return len(sg.tensors) - 1


# -- dead code ---------------------------------------------------------------------------------


# Ops whose outputs LiteRT sizes only while running (after the first, LiteRT prepares every op
# at invoke time): control flow and data-dependent sizes, and ops whose shape operands (these
# positions) are not constants.
_SIZED_WHILE_RUNNING = frozenset({"WHILE", "IF", "WHERE", "UNIQUE", "NON_MAX_SUPPRESSION_V4",
                                  "NON_MAX_SUPPRESSION_V5"})
_SHAPE_OPERANDS = {
    "FILL": (0,), "RESHAPE": (1,), "BROADCAST_TO": (1,), "TILE": (1,), "RANGE": (0, 1, 2), "PAD": (1,),
    "PADV2": (1,), "MIRROR_PAD": (1,), "SLICE": (1, 2), "STRIDED_SLICE": (1, 2, 3), "RESIZE_BILINEAR": (1,),
    "RESIZE_NEAREST_NEIGHBOR": (1,), "SPLIT": (0,), "SPLIT_V": (1, 2), "TOPK_V2": (1,), "ONE_HOT": (1,),
    "TRANSPOSE": (1,), "EXPAND_DIMS": (1,), "SPARSE_TO_DENSE": (1,), "MEAN": (1,), "SUM": (1,),
    "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_PROD": (1,), "REDUCE_ANY": (1,), "REDUCE_ALL": (1,),
    "ARG_MAX": (1,), "ARG_MIN": (1,),
}
# Stateful ops whose only state is in their variable-tensor operands.
_STATE_IN_OPERANDS = frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "LSTM",
                                "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "RNN", "SVDF"})


def run_sized_ops_first(model: Model) -> list[str]:
    """In each subgraph, run every operator that does not depend on one LiteRT sizes only while
    running (a WHILE, an IF, a WHERE...) before the first such operator, the order otherwise kept.

    LiteRT prepares the operators after such an op only at invoke time, and an LSTM's state
    variable resized then is not the one the LSTM reads: a Keras 3 model with a masked layer (a
    WHILE loop, and a FILL of a computed shape) before a fused LSTM, both on the input, with a
    dynamic batch, gave LiteRT results 0.03 off Keras's. Moved first, the LSTM and the ops zeroing its state are prepared
    with the rest when tensors are allocated. Data dependencies, the order of the ops touching
    each variable tensor, and the order of every op with other effects are kept.

    Returns a warning per stateful op that must still come after one (its input comes out of a
    loop) and whose state has a dimension known only at run time: LiteRT computes it wrong."""
    warnings = []
    for index, sg in enumerate(model.subgraphs):
        depends = _depends_on_sized_while_running(model, sg)
        late = [op for op, d in zip(sg.operators, depends) if d]
        sg.operators = [op for op, d in zip(sg.operators, depends) if not d] + late
        for op in late:
            states = [t for t in op.inputs if t >= 0 and sg.tensors[t].is_variable]
            if model.op_name(op) in _STATE_IN_OPERANDS and any(-1 in _dims(sg.tensors[t]) for t in states):
                warnings.append(
                    f"{model.op_name(op)} {sg.tensors[op.outputs[0]].name!r} (subgraph {index}): its input comes out of "
                    "a loop (or another op LiteRT sizes while running) and its state has a dimension known only at run "
                    "time; LiteRT resizes the state while running and computes this op wrong (numlite computes it "
                    "right): give the model a fixed batch to run it in LiteRT")
    return warnings


def _depends_on_sized_while_running(model: Model, sg: Subgraph) -> list[bool]:
    """For each operator, whether it depends on one of :data:`_SIZED_WHILE_RUNNING` (through
    a tensor, a variable tensor both touch, or an earlier op with effects of its own)."""
    tainted_tensors: set[int] = set()
    variable_tainted: set[int] = set()  # variable tensors touched by a dependent op
    effects_tainted = False
    result = []
    for op in sg.operators:
        name = model.op_name(op)
        kernel = KERNELS.get(name)
        ordered = name not in _STATE_IN_OPERANDS and (kernel is None or not kernel.foldable)
        touched = [t for t in (*op.inputs, *op.outputs) if t >= 0 and sg.tensors[t].is_variable]
        sized_while_running = name in _SIZED_WHILE_RUNNING or any(
            k < len(op.inputs) and op.inputs[k] >= 0 and model.constant(sg, op.inputs[k]) is None
            for k in _SHAPE_OPERANDS.get(name, ()))
        dependent = (sized_while_running or any(t in tainted_tensors for t in op.inputs)
                     or any(t in variable_tainted for t in touched) or (ordered and effects_tainted))
        if dependent:
            tainted_tensors.update(op.outputs)
            variable_tainted.update(touched)
            effects_tainted |= ordered
        result.append(dependent)
    return result


def remove_dead_code(model: Model) -> None:
    """Drop unread pure operators and unused subgraphs; store identical buffers once and give
    each subgraph one tensor per distinct constant; drop the tensors and buffers left unused."""
    effects = _subgraphs_with_side_effects(model)
    for sg in model.subgraphs:
        _remove_dead_operators(model, sg, effects)
    _remove_unused_subgraphs(model)
    _share_buffers(model)
    for index, sg in enumerate(model.subgraphs):
        _share_constant_tensors(sg)
        new_index = _remove_unused_tensors(sg)
        for s in model.signature_defs:
            if s.subgraph_index == index:
                s.inputs = {k: new_index[v] for k, v in s.inputs.items()}
                s.outputs = {k: new_index[v] for k, v in s.outputs.items()}
    _drop_unused_buffers(model)


def _callees(model: Model, op: Operator) -> list[int]:
    fields = _CALL_OPTIONS.get(model.op_name(op), ())
    return [getattr(op.builtin_options, f) for f in fields if op.builtin_options is not None]


def _subgraphs_with_side_effects(model: Model) -> set[int]:
    effects = {i for i, sg in enumerate(model.subgraphs)
               if any(model.op_name(op) in _SIDE_EFFECTS for op in sg.operators)}
    changed = True
    while changed:
        changed = False
        for i, sg in enumerate(model.subgraphs):
            if i not in effects and any(c in effects for op in sg.operators for c in _callees(model, op)):
                effects.add(i)
                changed = True
    return effects


def _remove_dead_operators(model: Model, sg: Subgraph, effects: set[int]) -> None:
    live = set(sg.outputs)
    kept = []
    for op in reversed(sg.operators):
        needed = (any(t in live for t in op.outputs) or model.op_name(op) in _SIDE_EFFECTS
                  or any(c in effects for c in _callees(model, op)))
        if needed:
            kept.append(op)
            live.update(t for t in op.inputs if t >= 0)
    sg.operators = kept[::-1]


def _remove_unused_subgraphs(model: Model) -> None:
    roots = {0} | {s.subgraph_index for s in model.signature_defs}
    reachable, stack = set(), list(roots)
    while stack:
        i = stack.pop()
        if i in reachable:
            continue
        reachable.add(i)
        stack.extend(c for op in model.subgraphs[i].operators for c in _callees(model, op))
    order = [i for i in range(len(model.subgraphs)) if i in reachable]
    new_index = {old: new for new, old in enumerate(order)}
    model.subgraphs = [model.subgraphs[i] for i in order]
    for sg in model.subgraphs:
        for op in sg.operators:
            for f in _CALL_OPTIONS.get(model.op_name(op), ()):
                setattr(op.builtin_options, f, new_index[getattr(op.builtin_options, f)])
    for s in model.signature_defs:
        s.subgraph_index = new_index[s.subgraph_index]


def _remove_unused_tensors(sg: Subgraph) -> dict[int, int]:
    """Drop tensors nothing refers to; returns old index -> new index."""
    used = set(sg.inputs) | set(sg.outputs)
    for op in sg.operators:
        used.update(t for t in op.inputs if t >= 0)
        used.update(op.outputs)
        used.update(op.intermediates)
    order = sorted(used)
    new_index = {old: new for new, old in enumerate(order)}
    new_index[-1] = -1
    sg.tensors = [sg.tensors[i] for i in order]
    sg.inputs = [new_index[t] for t in sg.inputs]
    sg.outputs = [new_index[t] for t in sg.outputs]
    for op in sg.operators:
        op.inputs = [new_index[t] for t in op.inputs]
        op.outputs = [new_index[t] for t in op.outputs]
        op.intermediates = [new_index[t] for t in op.intermediates]
    return new_index


def _share_buffers(model: Model) -> None:
    """Point every tensor whose data equals another's at one buffer (buffer 0 stays empty)."""
    buffers = [Buffer()]
    by_content: dict[bytes, int] = {}
    for sg in model.subgraphs:
        for t in sg.tensors:
            if t.buffer == 0 or len(model.buffers[t.buffer]) == 0:
                t.buffer = 0
                continue
            data = model.buffers[t.buffer].data
            key = hashlib.blake2b(data.tobytes(), digest_size=20).digest() + len(data).to_bytes(8, "little")
            if key not in by_content:
                by_content[key] = len(buffers)
                buffers.append(model.buffers[t.buffer])
            t.buffer = by_content[key]
    model.buffers = buffers


def _share_constant_tensors(sg: Subgraph) -> None:
    """Operators reading equal constants (same buffer, type and shape, no quantization) read one
    tensor: each tensor costs its own entry and name in the file."""
    first: dict[tuple, int] = {}
    same: dict[int, int] = {}
    ends = set(sg.inputs) | set(sg.outputs)
    for i, t in enumerate(sg.tensors):
        if t.buffer == 0 or i in ends or t.is_variable or t.sparsity is not None or t.quantization is not None:
            continue
        same[i] = first.setdefault((t.buffer, t.type, tuple(t.shape)), i)
    for op in sg.operators:
        op.inputs = [same.get(t, t) for t in op.inputs]


def _drop_unused_buffers(model: Model) -> None:
    """Keep only the buffers some tensor uses (buffer 0 stays first and empty)."""
    used = sorted({t.buffer for sg in model.subgraphs for t in sg.tensors} - {0})
    new_index = {old: new for new, old in enumerate([0] + used)}
    model.buffers = [model.buffers[i] for i in [0] + used]
    for sg in model.subgraphs:
        for t in sg.tensors:
            t.buffer = new_index[t.buffer]
