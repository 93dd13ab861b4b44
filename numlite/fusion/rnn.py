"""Recurrent fusions: the emitter of TFLite's fused LSTM op, for fusions to call.

:func:`lstm_op` emits one UNIDIRECTIONAL_SEQUENCE_LSTM from weights named as the op's operands
(``input_to_forget_weights``...), so a fusion only has to slice its own weight layout into those
tensors (with ``b.op`` on its arguments: the slices fold away at conversion time)::

    from numlite.fusion.rnn import lstm_op

    @numlite.fusion.register("my_lstm")
    def fuse(b, x, kernel, recurrent_kernel, bias):
        ...  # transpose and split the packed weights into the op's tensors
        return lstm_op(b, x, {"input_to_input_weights": w_i, ...})

This module never imports TensorFlow.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from numlite.fusion import Builder, Operand, Tensor

__all__ = ["GATES", "LSTM_OPERANDS", "keras_lstm", "last_step", "layer_norm_lstm_cell_simple", "lstm_cell_simple", "lstm_op",
           "lstm_op_with_states", "slice2d", "split_gates", "transpose", "zeros_like_batch"]

GATES = ("input", "forget", "cell", "output")

# The op's 24 operands in order; the two states (18, 19) are variable tensors.
LSTM_OPERANDS = (
    "input",
    *(f"input_to_{g}_weights" for g in GATES),
    *(f"recurrent_to_{g}_weights" for g in GATES),
    "cell_to_input_weights", "cell_to_forget_weights", "cell_to_output_weights",
    *(f"{g}_gate_bias" for g in GATES),
    "projection_weights", "projection_bias",
    "output_state", "cell_state",
    *(f"{g}_layer_norm_coefficients" for g in GATES),
)
_WEIGHTS = frozenset(LSTM_OPERANDS) - {"input", "output_state", "cell_state"}
_REQUIRED = ("input_to_forget_weights", "input_to_cell_weights", "input_to_output_weights",
             "recurrent_to_forget_weights", "recurrent_to_cell_weights", "recurrent_to_output_weights",
             "forget_gate_bias", "cell_gate_bias", "output_gate_bias")
_TANH = 4  # ActivationFunctionType.TANH


def lstm_op(b: Builder, x: Tensor, weights: Mapping[str, Operand], *, time_major: bool = False,
            state: tuple[Tensor, Tensor] | None = None, cell_clip: float = 0.0, proj_clip: float = 0.0,
            name: str = "lstm", zeros_from: Tensor | None = None) -> Tensor:
    """Emit one UNIDIRECTIONAL_SEQUENCE_LSTM; returns its output Tensor (the whole sequence,
    [batch, time, n_output], or [time, batch, n_output] when time_major).

    ``weights`` maps the op's operand names to tensors or arrays (constants):
    ``input_to_{input,forget,cell,output}_weights`` [n_cell, n_input],
    ``recurrent_to_{...}_weights`` [n_cell, n_output], ``{...}_gate_bias`` [n_cell]; optionally
    the peephole ``cell_to_{input,forget,output}_weights`` [n_cell], ``projection_weights``
    [n_output, n_cell] and ``projection_bias`` [n_output], and
    ``{...}_layer_norm_coefficients`` [n_cell]. Without ``input_to_input_weights`` the cell is
    CIFG (coupled input and forget gates), as the op defines. ``state`` is None (zeros) or the
    initial ``(h0, c0)`` ([batch, n_output], [batch, n_cell]). The activation is tanh; clips are
    0 (none) unless given. Each invoke starts from ``state`` (the op's state tensors are
    variables that LiteRT's kernel overwrites, so they are reset before every run). Zero states
    for a batch known at run time only are made from ``zeros_from`` (default ``x``), a tensor of
    ``x``'s shape: the sequence before it was reversed, so that both directions of a
    bidirectional pair make theirs from the same tensor, once."""
    return _emit_lstm(b, x, weights, time_major=time_major, state=state, cell_clip=cell_clip,
                      proj_clip=proj_clip, name=name, zeros_from=zeros_from)[0]


def lstm_op_with_states(b: Builder, x: Tensor, weights: Mapping[str, Operand], *, time_major: bool = False,
                        state: tuple[Tensor, Tensor] | None = None, cell_clip: float = 0.0, proj_clip: float = 0.0,
                        name: str = "lstm", zeros_from: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`lstm_op`, also returning the final states ``(output, h, c)`` ([batch, n_output],
    [batch, n_cell]). LiteRT's kernel (and numlite's) leaves them in its variable state
    operands; each is read by a GATHER of all its columns placed after the op: an exact copy no
    pass removes as an identity and that LiteRT's XNNPACK delegate leaves to run in order. An
    unused one is dropped with dead code."""
    out, h_var, c_var = _emit_lstm(b, x, weights, time_major=time_major, state=state, cell_clip=cell_clip,
                                   proj_clip=proj_clip, name=name, zeros_from=zeros_from)
    return out, _read_state(b, h_var, f"{name}/final_output_state"), _read_state(b, c_var, f"{name}/final_cell_state")


def _read_state(b: Builder, var: Tensor, name: str) -> Tensor:
    columns = var.shape[1]
    return b.op("GATHER", [var, np.arange(columns, dtype=np.int32)], outputs=[b.spec(var.shape, var.dtype, name)],
                axis=1, batch_dims=0)


def _emit_lstm(b: Builder, x: Tensor, weights: Mapping[str, Operand], *, time_major: bool, state: Any,
               cell_clip: float, proj_clip: float, name: str, zeros_from: Tensor | None = None
               ) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`lstm_op`, also returning its two state variables (output, cell)."""
    unknown = sorted(set(weights) - _WEIGHTS)
    b.require(not unknown, f"{name}: unknown LSTM weight(s) {unknown}; the op's are {sorted(_WEIGHTS)}")
    missing = [k for k in _REQUIRED if weights.get(k) is None]
    b.require(not missing, f"{name}: the LSTM needs {missing}")
    w = {k: _tensor(b, v) for k, v in weights.items() if v is not None}
    b.require(x.dtype == "float32", f"{name}: the input must be float32, it is {x.dtype}")
    b.require(x.rank == 3, f"{name}: the input must have rank 3 ([batch, time, features]), it has shape {_shape(x)}")
    for k, t in w.items():
        b.require(t.dtype == "float32", f"{name}: {k} must be float32, it is {t.dtype}")
    n_cell, n_input = _dims(b, w["input_to_forget_weights"], 2, "input_to_forget_weights", name)
    _, n_output = _dims(b, w["recurrent_to_forget_weights"], 2, "recurrent_to_forget_weights", name)
    _check_shapes(b, w, x, n_cell, n_input, n_output, name)
    if time_major:
        time, batch = x.shape[0], x.shape[1]
    else:
        batch, time = x.shape[0], x.shape[1]
    b.require(zeros_from is None or zeros_from.shape == x.shape, f"{name}: zeros_from must have the input's shape")
    h0, c0 = _states(b, state, zeros_from or x, time_major, n_output, n_cell, name)
    operands = [x] + [w.get(k) for k in LSTM_OPERANDS[1:18]] + [h0, c0] + [w.get(k) for k in LSTM_OPERANDS[20:]]
    out_shape = (time, batch, n_output) if time_major else (batch, time, n_output)
    out = b.op("UNIDIRECTIONAL_SEQUENCE_LSTM", operands, outputs=[b.spec(out_shape, "float32", name)],
               fused_activation_function=_TANH, cell_clip=float(cell_clip), proj_clip=float(proj_clip),
               time_major=bool(time_major), asymmetric_quantize_inputs=False)
    return out, h0, c0


# -- tf_keras LSTM ------------------------------------------------------------------------------

# tf_keras's standard_lstm: these tensor arguments (mask and sequence_lengths join them when the
# layer is masked or ragged) and five results: last output, outputs, h, c, runtime.
_KERAS_ARGS = ("inputs", "init_h", "init_c", "kernel", "recurrent_kernel", "bias")


def keras_lstm(b: Builder, *args: Tensor, time_major: bool = False, go_backwards: bool = False,
               **others: Any) -> list[Tensor]:
    """The function tf_keras marks ``lstm_<uuid>`` (``standard_lstm``): one
    UNIDIRECTIONAL_SEQUENCE_LSTM on the input (reversed in time for ``go_backwards``, as Keras
    processes it), its last step as ``last_output`` and ``h``, and ``c`` read from the op's cell
    state variable, which holds the final state after it. Kernel [n_input, 4u] and
    recurrent kernel [u, 4u] hold the gates in Keras's i, f, c, o order: transposed and split."""
    names = [a.name for a in args]
    b.require(not others, f"unexpected attributes {sorted(others)} for a tf_keras LSTM")
    masked = [a.name for a in args[6:]] or [a.name for a in args if a.dtype == "bool"]
    if masked or "mask" in names or "sequence_lengths" in names:
        raise b.decline("it is masked or ragged (it takes a mask or sequence lengths): the fused op cannot skip "
                        "steps")
    b.require(len(args) == len(_KERAS_ARGS) and (names == list(_KERAS_ARGS) or all(n.startswith("arg") for n in names)),
              f"it takes {names}, tf_keras's standard_lstm takes {list(_KERAS_ARGS)}")
    b.require(len(b.results) == 5, f"it returns {len(b.results)} results, tf_keras's standard_lstm 5 "
              "(last_output, outputs, h, c, runtime)")
    x, init_h, init_c, kernel, recurrent_kernel, bias = args
    n_input, units4 = _dims(b, kernel, 2, "the kernel", "tf_keras LSTM")
    b.require(units4 % 4 == 0, f"the kernel has {units4} columns, not 4 gates of equal size")
    units = units4 // 4
    b.require(_static(recurrent_kernel) == (units, units4),
              f"the recurrent kernel must be [{units}, {units4}], it is {_shape(recurrent_kernel)}")
    b.require(_static(bias) == (units4,), f"the bias must be [{units4}], it is {_shape(bias)}")
    b.require(x.rank == 3, f"the inputs must have rank 3, they have shape {_shape(x)}")
    time_axis = 0 if time_major else 1
    forward = x
    if go_backwards:  # Keras runs the reversed sequence and returns the outputs in that order
        x = b.op("REVERSE_V2", [x, np.array([time_axis], np.int32)], outputs=[b.spec(x.shape, x.dtype)])
    weights = {}
    for prefix, w in (("input_to", kernel), ("recurrent_to", recurrent_kernel)):
        for gate, part in zip(GATES, split_gates(b, transpose(b, w), 4)):
            weights[f"{prefix}_{gate}_weights"] = part
    for gate, part in zip(GATES, split_gates(b, bias, 4)):
        weights[f"{gate}_gate_bias"] = part
    out, _, c = lstm_op_with_states(b, x, weights, time_major=time_major, state=_initial_state(b, init_h, init_c),
                                    name="lstm", zeros_from=forward)
    last = last_step(b, out, time_major)
    seq_len = None if b.results[1].shape is None else b.results[1].shape[time_axis]
    if seq_len == 1 and x.shape[time_axis] != 1:  # return_sequences=False: the last step, [batch, 1, units]
        outputs = last_step(b, out, time_major, keep_dims=True)
    else:
        outputs = out
    runtime = b.const(np.ones(b.results[4].shape or (), np.float32))  # RUNTIME_CPU, a constant in Keras too
    return [last, outputs, last, c, runtime]


def _initial_state(b: Builder, init_h: Tensor, init_c: Tensor) -> tuple[Tensor, Tensor] | None:
    """None (zeros, which lstm_op makes so that LiteRT sizes them when preparing) when both are
    known zeros (Keras's own initial state), else the tensors."""
    if all(b.is_zeros(t) for t in (init_h, init_c)):
        return None
    return init_h, init_c


# -- the spec's "bring your own LSTM" cells ------------------------------------------------------

CIFG_TOKEN = "CoupleInputForgetGates"


def lstm_cell_simple(b: Builder, x: Tensor, weight: Tensor, bias: Tensor, projection: Tensor, *,
                     cell_clip: float = 0.0, proj_clip: float = 0.0) -> Tensor:
    """``LSTMCellSimple``: ``fn(input, weight, bias, projection)`` with the weight
    [n_input + n_output, G * n_cell] (input rows then recurrent rows; gate columns in cell,
    input, forget, output order, G = 4, or cell, forget, output when the implements name
    carries ``,CoupleInputForgetGates``), the bias [G * n_cell] in the same order, and the
    projection [n_cell, n_output] (a tensor of any other rank: no projection). The input is
    [batch, time, n_input] (the result is the whole output sequence) or [batch, n_input] (one
    step, the result [batch, n_output]); the state starts at zero. Clips are attributes of the
    signature (``cell_clip``, ``proj_clip``), 0 (none) by default."""
    return _cell_simple(b, x, weight, bias, projection, None, cell_clip, proj_clip)


def layer_norm_lstm_cell_simple(b: Builder, x: Tensor, weight: Tensor, bias: Tensor, projection: Tensor,
                                layer_norm_scale: Tensor, *, cell_clip: float = 0.0,
                                proj_clip: float = 0.0) -> Tensor:
    """``LayerNormalizedLstmCellSimple``: :func:`lstm_cell_simple` plus ``layer_norm_scale``
    [4 * n_cell] (cell, input, forget, output; the input part unused by a CIFG cell), the
    coefficients of the op's per-gate layer normalisation (of ``W x + R h``, before the bias)."""
    return _cell_simple(b, x, weight, bias, projection, layer_norm_scale, cell_clip, proj_clip)


def _cell_simple(b: Builder, x: Tensor, weight: Tensor, bias: Tensor, projection: Tensor,
                 layer_norm_scale: Tensor | None, cell_clip: float, proj_clip: float) -> Tensor:
    tokens = [t.strip() for t in b.name.split(",")]
    unknown = [t for t in tokens[1:] if t != CIFG_TOKEN]
    b.require(not unknown, f"unknown option(s) {unknown} in {b.name!r} (only {CIFG_TOKEN!r})")
    cifg = CIFG_TOKEN in tokens[1:]
    gates = ("cell", "forget", "output") if cifg else ("cell", "input", "forget", "output")
    b.require(len(b.results) == 1, f"it returns {len(b.results)} results, the contract one (the output)")
    rows, cols = _dims(b, weight, 2, "the weight (argument 1)", b.name)
    b.require(cols % len(gates) == 0, f"the weight has {cols} columns, not {len(gates)} gates of equal size")
    n_cell = cols // len(gates)
    has_projection = projection.rank == 2
    n_output = _dims(b, projection, 2, "the projection (argument 3)", b.name)[1] if has_projection else n_cell
    if has_projection:
        b.require(_static(projection)[0] == n_cell, f"the projection must have {n_cell} rows, it is {_shape(projection)}")
    n_input = rows - n_output
    b.require(n_input > 0, f"the weight has {rows} rows, not n_input + n_output (n_output {n_output})")
    b.require(_static(bias) == (cols,), f"the bias must be [{cols}], it is {_shape(bias)}")
    b.require(x.rank in (2, 3), f"the input must be [batch, time, {n_input}] or [batch, {n_input}], it is {_shape(x)}")
    wt = transpose(b, weight)  # [G * n_cell, n_input + n_output]
    weights: dict[str, Any] = {}
    for k, gate in enumerate(gates):
        rows_k = slice2d(b, wt, (k * n_cell, 0), (n_cell, rows))
        weights[f"input_to_{gate}_weights"] = slice2d(b, rows_k, (0, 0), (n_cell, n_input))
        weights[f"recurrent_to_{gate}_weights"] = slice2d(b, rows_k, (0, n_input), (n_cell, n_output))
    for gate, part in zip(gates, split_gates(b, bias, len(gates))):
        weights[f"{gate}_gate_bias"] = part
    if has_projection:
        weights["projection_weights"] = transpose(b, projection)
    if layer_norm_scale is not None:
        b.require(_static(layer_norm_scale) == (4 * n_cell,),
                  f"the layer norm scale must be [{4 * n_cell}], it is {_shape(layer_norm_scale)}")
        for gate, part in zip(GATES_LN, split_gates(b, layer_norm_scale, 4)):
            if gate in gates:
                weights[f"{gate}_layer_norm_coefficients"] = part
    step = x.rank == 2
    seq = x if not step else b.op("EXPAND_DIMS", [x, np.int32(1)], outputs=[b.spec((x.shape[0], 1, x.shape[1]), x.dtype)])
    out = lstm_op(b, seq, weights, cell_clip=cell_clip, proj_clip=proj_clip, name=b.name.split(",")[0])
    return last_step(b, out, False) if step else out


GATES_LN = ("cell", "input", "forget", "output")  # the layout of the layer norm scale


# -- weight transforms (constant at conversion time, so they fold away) ---------------------------


def transpose(b: Builder, w: Tensor) -> Tensor:
    """``w`` [m, n] transposed to [n, m]."""
    m, n = _dims(b, w, 2, w.name, "transpose")
    return b.op("TRANSPOSE", [w, np.array([1, 0], np.int32)], outputs=[b.spec((n, m), w.dtype)])


def split_gates(b: Builder, w: Tensor, n: int) -> list[Tensor]:
    """``w`` split into ``n`` equal parts along dimension 0."""
    shape = _static(w)
    b.require(shape is not None and shape[0] % n == 0, f"{w.name} {_shape(w)} does not split into {n} gates")
    part = (shape[0] // n, *shape[1:])
    return b.op("SPLIT", [np.int32(0), w], outputs=[b.spec(part, w.dtype) for _ in range(n)], num_splits=n)


def slice2d(b: Builder, w: Tensor, begin: tuple[int, int], size: tuple[int, int]) -> Tensor:
    return b.op("SLICE", [w, np.array(begin, np.int32), np.array(size, np.int32)], outputs=[b.spec(size, w.dtype)])


def last_step(b: Builder, out: Tensor, time_major: bool, keep_dims: bool = False) -> Tensor:
    """The last time step of an LSTM's output sequence: [batch, n] (or [batch, 1, n] /
    [1, batch, n] with ``keep_dims``)."""
    t = 0 if time_major else 1
    other = 1 - t
    begin = np.zeros(3, np.int32)
    begin[t] = -1
    masks = (1 << other) | (1 << 2)  # whole batch and feature axes
    if keep_dims:
        shape = list(out.shape)
        shape[t] = 1
        return b.op("STRIDED_SLICE", [out, begin, np.zeros(3, np.int32), np.ones(3, np.int32)],
                    outputs=[b.spec(shape, out.dtype)], begin_mask=masks, end_mask=masks | (1 << t))
    shape = (out.shape[other], out.shape[2])
    return b.op("STRIDED_SLICE", [out, begin, np.zeros(3, np.int32), np.ones(3, np.int32)],
                outputs=[b.spec(shape, out.dtype)], begin_mask=masks, end_mask=masks, shrink_axis_mask=1 << t)


def _static(t: Tensor) -> tuple[int, ...] | None:
    if t.shape is None or any(d is None for d in t.shape):
        return None
    return tuple(int(d) for d in t.shape)


def _tensor(b: Builder, value: Operand) -> Tensor:
    return value if isinstance(value, Tensor) else b.const(np.asarray(value, np.float32))


def _dims(b: Builder, t: Tensor, rank: int, what: str, name: str) -> tuple[int, ...]:
    b.require(t.shape is not None and len(t.shape) == rank and all(d is not None for d in t.shape),
              f"{name}: {what} must have a static shape of rank {rank}, it has {_shape(t)}")
    return tuple(int(d) for d in t.shape)


def _check_shapes(b: Builder, w: dict[str, Tensor], x: Tensor, n_cell: int, n_input: int, n_output: int,
                  name: str) -> None:
    """Every weight has the shape the op reads it with (LiteRT checks the same at Prepare)."""
    b.require(x.shape[2] in (None, n_input), f"{name}: the input has {x.shape[2]} features, the weights {n_input}")
    expected: dict[str, tuple[int, ...]] = {}
    for g in GATES:
        expected[f"input_to_{g}_weights"] = (n_cell, n_input)
        expected[f"recurrent_to_{g}_weights"] = (n_cell, n_output)
        expected[f"{g}_gate_bias"] = (n_cell,)
        expected[f"{g}_layer_norm_coefficients"] = (n_cell,)
    for g in ("input", "forget", "output"):
        expected[f"cell_to_{g}_weights"] = (n_cell,)
    expected["projection_weights"] = (n_output, n_cell)
    expected["projection_bias"] = (n_output,)
    for k, t in w.items():
        b.require(t.shape is not None and tuple(t.shape) == expected[k],
                  f"{name}: {k} must have shape {list(expected[k])}, it has {_shape(t)}")
    cifg = "input_to_input_weights" not in w
    for k in ("recurrent_to_input_weights", "input_gate_bias"):
        b.require((k in w) != cifg,
                  f"{name}: {k} must be given {'without' if cifg else 'with'} input_to_input_weights "
                  "(CIFG drops the whole input gate)")
    b.require(not (cifg and "cell_to_input_weights" in w),
              f"{name}: a CIFG cell (no input_to_input_weights) has no cell_to_input_weights")
    peepholes = [k for k in ("cell_to_forget_weights", "cell_to_output_weights") if k in w]
    b.require(len(peepholes) in (0, 2), f"{name}: peepholes need both cell_to_forget and cell_to_output weights")
    b.require(("cell_to_input_weights" in w) == (bool(peepholes) and not cifg),
              f"{name}: a peephole cell with an input gate needs cell_to_input_weights, and only then")
    b.require("projection_bias" not in w or "projection_weights" in w, f"{name}: a projection bias needs projection_weights")
    b.require(n_output == n_cell or "projection_weights" in w,
              f"{name}: n_output ({n_output}) differs from n_cell ({n_cell}) without projection_weights")
    norms = [f"{g}_layer_norm_coefficients" for g in GATES if f"{g}_layer_norm_coefficients" in w]
    wanted = 3 if cifg else 4
    b.require(len(norms) in (0, wanted) and ("input_layer_norm_coefficients" not in w or not cifg),
              f"{name}: layer normalisation needs coefficients for every gate the cell has, got {norms}")


def _states(b: Builder, state: Any, x: Tensor, time_major: bool, n_output: int, n_cell: int, name: str
            ) -> tuple[Tensor, Tensor]:
    """The op's two state operands: variable tensors set to the initial state before each run."""
    batch_axis = 1 if time_major else 0
    batch = x.shape[batch_axis]
    if state is None:
        if batch is not None:
            return (b.variable((batch, n_output), "float32", name=f"{name}/output_state"),
                    b.variable((batch, n_cell), "float32", name=f"{name}/cell_state"))
        state = (zeros_like_batch(b, x, batch_axis, n_output), zeros_like_batch(b, x, batch_axis, n_cell))
    b.require(isinstance(state, (tuple, list)) and len(state) == 2, f"{name}: state must be (h0, c0)")
    h0, c0 = state
    for t, what, n in ((h0, "h0", n_output), (c0, "c0", n_cell)):
        b.require(isinstance(t, Tensor) and t.dtype == "float32" and t.rank == 2 and t.shape[1] in (None, n)
                  and (batch is None or t.shape[0] in (None, batch)),
                  f"{name}: {what} must be a float32 [batch, {n}] tensor, it is {t!r}")
    return (b.variable((h0.shape[0] if batch is None else batch, n_output), "float32", initial=h0,
                       name=f"{name}/output_state"),
            b.variable((c0.shape[0] if batch is None else batch, n_cell), "float32", initial=c0,
                       name=f"{name}/cell_state"))


def zeros_like_batch(b: Builder, x: Tensor, batch_axis: int, n: int, name: str | None = None) -> Tensor:
    """Zeros [batch, n] for a batch known only at run time, from ops whose output shapes follow
    from their input shapes alone (zeros like x[:, 0, :1], its one column gathered n times):
    LiteRT then sizes the state variable when it prepares the model. A FILL of x's size would be
    sized only while running, and LiteRT corrupts memory when a variable tensor is resized at
    that point. (A GATHER rather than an ADD of zeros [1, n]: LiteRT's XNNPACK delegate would
    take the ADD, and with a dynamic batch and a WHILE elsewhere in the model the state it
    computes is not the one the LSTM reads.)"""
    begin, end, strides = np.zeros(3, np.int32), np.ones(3, np.int32), np.ones(3, np.int32)
    masks = 1 << batch_axis
    batch = x.shape[batch_axis]
    column = b.op("STRIDED_SLICE", [x, begin, end, strides],
                  outputs=[b.spec((batch, 1), x.dtype, name and f"{name}/first_column")],
                  begin_mask=masks, end_mask=masks, shrink_axis_mask=1 << (1 - batch_axis))
    zero = b.op("ZEROS_LIKE", [column], outputs=[b.spec((batch, 1), x.dtype, name and f"{name}/zero")])
    return b.op("GATHER", [zero, np.zeros(n, np.int32)], outputs=[b.spec((batch, n), x.dtype, name and f"{name}/zeros")],
                axis=1, batch_dims=0)


def _shape(t: Tensor) -> str:
    return "unknown" if t.shape is None else str(list(t.shape))
