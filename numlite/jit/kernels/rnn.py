"""UNIDIRECTIONAL_SEQUENCE_LSTM on float32 as one compiled loop over the time steps, which also
runs the full-kernel LSTM op (one step) and both directions of BIDIRECTIONAL_SEQUENCE_LSTM (the
backward one reversed in time); RNN, UNIDIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_RNN
on float32 as an inlined loop (:func:`rnn_sequence`); SVDF on float32 (:func:`svdf_step`, at
the end).

The semantics are those of the NumPy kernel (:mod:`numlite.kernels.rnn`, LiteRT's float LSTM):
gates stacked in the order input, forget, cell, output (input left out under CIFG), optional
peephole weights, layer-norm coefficients and projection, cell and projection clipping, the
fused activation on the cell gate and on the new cell state (NONE leaves the cell gate's
pre-activation in place, as LiteRT does). The final states are written back into the op's two
state inputs, which the model keeps as variable tensors between invokes.

The weights are constants stacked at generation into row-major ``[inputs, gates]`` blocks, so
that every product is a row of the state or input times a contiguous row of weights, which
LLVM vectorizes. The sequence runs in one function compiled once per machine for every LSTM
node (the sizes and flags are parameters, not literals), a loop kernel
(:mod:`numlite.jit.kernels.loops`, kind :data:`KIND`) the model's function calls through its
address: called as a Numba function, its code was linked into every model and optimized again
there (a model of one LSTM layer compiled in 3.6 s, now 0.8 s; docs/jit.md, next step 9). A
loop kernel takes one input, one output and one working buffer, so the node's lines copy the
two states into the working buffer before the call and back after it (``batch * (n_cell +
n_output)`` values). The activations use the vectorizable approximations of
:mod:`numlite.jit.kernels.transcendental`.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, clip, kernel, require
from numlite.jit.kernels.conv import call
from numlite.jit.kernels.transcendental import sigmoid32, tanh32

F = np.float32
F32 = np.dtype(np.float32)
KIND = 13  # the loop kernel kind of an LSTM direction (numlite.jit.kernels.loops)
NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = range(6)  # LiteRT's fused activation codes
LN_EPSILON = F(1e-8)  # LiteRT's MeanStddevNormalization
# dims: the sizes and strides the kernel takes (an int64 constant of the generated model);
# REVERSE: run from the last step to the first (a bidirectional op's backward direction);
# OUT_COLUMN: where the outputs start in each output row (its place in a merged output)
STEPS, BATCH, N_INPUT, N_CELL, N_OUTPUT, X_STEP, X_BATCH, OUT_STEP, OUT_BATCH, REVERSE, OUT_COLUMN = range(11)
# flags
CIFG, PEEPHOLE, LAYER_NORM, PROJECTION, ACTIVATION = range(5)
# The loop kernel's int64 parameters: the dims (11), the flags (5), where each float32 constant
# starts in its constants (the two clips first, at 0; wx, wh, bias, peep, norm, proj, proj_bias,
# then their end) and where each part of its working buffer starts (h, c, the gates, the hidden
# row, then their end).
P_DIMS, P_FLAGS, P_FLOATS, P_BUFFER = 0, 11, 16, 24


@kernel
def _activate(code, v):
    """LiteRT's ApplyActivationToVector on one value (NONE: ``v`` itself)."""
    if code == TANH:
        return tanh32(v)
    if code == RELU:
        return v if v > 0 or v != v else F(0)  # (common.relu's int 0 would make this float64)
    if code == RELU6:
        return clip(v, F(0), F(6))
    if code == RELU_N1_TO_1:
        return clip(v, F(-1), F(1))
    if code == SIGN_BIT:
        return F(1) if np.signbit(v) else F(0)
    return v


@kernel
def _layer_norm(g, start, n, coefficients, bias):
    """LiteRT's MeanStddevNormalization of ``g[start:start + n]``, then coefficients and bias."""
    total = F(0)
    for j in range(n):
        total += g[start + j]
    mean = total / F(n)
    squares = F(0)
    for j in range(n):
        d = g[start + j] - mean
        squares += d * d
    scale = F(1) / np.sqrt(squares / F(n) + LN_EPSILON)
    for j in range(n):
        g[start + j] = (g[start + j] - mean) * scale * coefficients[start + j] + bias[start + j]


@body
def lstm_sequence(x, wx, wh, bias, peep, norm, proj, proj_bias, h, c, out, gates, hidden, dims, flags, clips):
    """The whole sequence; ``h`` and ``c`` hold the state before and after. ``gates`` is
    scratch of one step's stacked gates of one batch row, ``hidden`` of its output before
    the projection."""
    steps, batch, n_in, n, n_out = dims[STEPS], dims[BATCH], dims[N_INPUT], dims[N_CELL], dims[N_OUTPUT]
    cifg, peephole, layer_norm, projection = flags[CIFG], flags[PEEPHOLE], flags[LAYER_NORM], flags[PROJECTION]
    code = flags[ACTIVATION]
    cell_clip, proj_clip = clips[0], clips[1]
    width = (3 if cifg else 4) * n
    f_at = 0 if cifg else n  # where the forget, cell and output gates start in ``gates``
    c_at, o_at = f_at + n, f_at + 2 * n
    for s in range(steps):
        t = steps - 1 - s if dims[REVERSE] else s
        for b in range(batch):
            for j in range(width):
                gates[j] = F(0) if layer_norm else bias[j]
            x_at = t * dims[X_STEP] + b * dims[X_BATCH]
            for k in range(n_in):
                v = x[x_at + k]
                row = wx[k * width : (k + 1) * width]
                for j in range(width):
                    gates[j] += v * row[j]
            state = h[b * n_out : (b + 1) * n_out]
            for k in range(n_out):
                v = state[k]
                row = wh[k * width : (k + 1) * width]
                for j in range(width):
                    gates[j] += v * row[j]
            cell = c[b * n : (b + 1) * n]
            if peephole:
                for j in range(n):
                    if not cifg:
                        gates[j] += peep[j] * cell[j]
                    gates[f_at + j] += peep[n + j] * cell[j]
            if layer_norm:
                if not cifg:
                    _layer_norm(gates, 0, n, norm, bias)
                _layer_norm(gates, f_at, n, norm, bias)
                _layer_norm(gates, c_at, n, norm, bias)
            for j in range(n):
                forget = sigmoid32(gates[f_at + j])
                update = _activate(code, gates[c_at + j])
                gate_in = F(1) - forget if cifg else sigmoid32(gates[j])
                new = forget * cell[j] + update * gate_in
                if cell_clip > 0:
                    new = clip(new, -cell_clip, cell_clip)
                cell[j] = new
                gates[c_at + j] = update  # what NONE multiplies the output gate by
                if peephole:
                    gates[o_at + j] += peep[2 * n + j] * new
            if layer_norm:
                _layer_norm(gates, o_at, n, norm, bias)
            for j in range(n):
                squashed = _activate(code, cell[j]) if code != NONE else gates[c_at + j]
                hidden[j] = sigmoid32(gates[o_at + j]) * squashed
            out_at = t * dims[OUT_STEP] + b * dims[OUT_BATCH] + dims[OUT_COLUMN]
            if projection:
                for k in range(n_out):
                    state[k] = proj_bias[k]
                for j in range(n):
                    v = hidden[j]
                    row = proj[j * n_out : (j + 1) * n_out]
                    for k in range(n_out):
                        state[k] += v * row[k]
                if proj_clip > 0:
                    for k in range(n_out):
                        state[k] = clip(state[k], -proj_clip, proj_clip)
            else:
                for k in range(n):
                    state[k] = hidden[k]
            for k in range(n_out):
                out[out_at + k] = state[k]
    return 0


@body
def lstm_setup(x, o, src, f, p):
    """The loop kernel's entry: one direction's whole sequence (:func:`lstm_sequence`), its
    constants read from ``f`` and its states and scratch from ``src`` at the offsets in ``p``."""
    dims, flags = p[P_DIMS:P_FLAGS], p[P_FLAGS:P_FLOATS]
    w, b = p[P_FLOATS:P_BUFFER], p[P_BUFFER : P_BUFFER + 5]
    lstm_sequence(x, f[w[0] : w[1]], f[w[1] : w[2]], f[w[2] : w[3]], f[w[3] : w[4]], f[w[4] : w[5]], f[w[5] : w[6]],
                  f[w[6] : w[7]], src[b[0] : b[1]], src[b[1] : b[2]], o, src[b[2] : b[3]], src[b[3] : b[4]], dims, flags,
                  f[0:2])  # fmt: skip
    return 0


@intrinsic
def _copy(typingctx, to, to_at, source, source_at, n):
    """``to[to_at:to_at + n] = source[source_at:source_at + n]`` (float32) as one ``memcpy``:
    an element loop, vectorized behind overlap checks, cost each model seconds of compile for
    its LSTMs' states. The generator checked the sizes."""
    def codegen(context, builder, signature, args):
        target = context.make_array(signature.args[0])(context, builder, args[0])
        origin = context.make_array(signature.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(builder, builder.gep(target.data, [args[1]]), builder.gep(origin.data, [args[3]]), args[4], 4)
        return context.get_dummy_value()

    return types.none(to, types.int64, source, types.int64, types.int64), codegen


@kernel
def state_in(src, at, state, n):
    """``src[at:at + n] = state``: a state into the loop kernel's working buffer."""
    _copy(src, at, state, 0, n)


@kernel
def state_out(state, src, at, n):
    """``state = src[at:at + n]``: the state the sequence left, back into its tensor."""
    _copy(state, 0, src, at, n)


def _value(operand) -> np.ndarray | None:
    return None if operand is None else np.asarray(operand.value, np.float32)


@emits("UNIDIRECTIONAL_SEQUENCE_LSTM")
def emit(node, g) -> None:
    ins, (out,) = node.ins, node.outs
    require(len(ins) in (20, 24), "UNIDIRECTIONAL_SEQUENCE_LSTM with aux inputs is not compiled")
    o = node.options
    require(not getattr(o, "diagonal_recurrent_tensors", False), "an LSTM with diagonal recurrent weights is not compiled")
    _require_float(node)
    steps, batch = (ins[0].shape[0], ins[0].shape[1]) if o.time_major else (ins[0].shape[1], ins[0].shape[0])
    layer_norm = len(ins) == 24 and ins[21] is not None
    _lstm_direction(g, node, 0, ins[0], ins[18], ins[19], out, steps, batch, bool(o.time_major), layer_norm)


@emits("LSTM")
def emit_lstm_step(node, g) -> None:
    """The full-kernel LSTM op: one step of the sequence kernel, input ``[batch, n_in]``."""
    ins, (out,) = node.ins, node.outs
    _require_float(node)
    layer_norm = len(ins) == 24 and ins[21] is not None
    _lstm_direction(g, node, 0, ins[0], ins[18], ins[19], out, 1, ins[0].shape[0], True, layer_norm)


@emits("BIDIRECTIONAL_SEQUENCE_LSTM")
def emit_bidirectional_lstm(node, g) -> None:
    """Two directions of the sequence kernel (the backward one from the last step), each
    writing its own output or its columns of the merged one; weights 1-17 forward, 18-34
    backward, states 35-38. An aux input without aux weights is the backward input (LiteRT's
    non-stacking mode); aux weights are not compiled."""
    ins, o = node.ins, node.options
    _require_float(node)
    require(all(ins[k] is None for k in range(40, 48)), "BIDIRECTIONAL_SEQUENCE_LSTM with aux weights is not compiled")
    x, aux = ins[0], ins[39]
    steps, batch = (x.shape[0], x.shape[1]) if o.time_major else (x.shape[1], x.shape[0])
    fw_out, bw_out = (node.outs[0], node.outs[0]) if o.merge_outputs else node.outs
    width = ins[8].shape[1]  # the forward outputs (n_output): recurrent_to_output is [n_cell, n_output], never omitted
    _lstm_direction(g, node, 0, x, ins[35], ins[36], fw_out, steps, batch, bool(o.time_major), False)
    _lstm_direction(g, node, 17, aux if aux is not None else x, ins[37], ins[38], bw_out, steps, batch, bool(o.time_major),
                    False, reverse=True, column=width if o.merge_outputs else 0)


def _require_float(node) -> None:
    require(all(t is None or t.dtype == F32 for t in (*node.ins, *node.outs)), f"{node.op_name} is compiled on float32 only")


def _lstm_direction(g, node, base: int, x, h, c, out, steps: int, batch: int, time_major: bool, layer_norm: bool,
                    reverse: bool = False, column: int = 0) -> None:
    """One call of :func:`lstm_sequence` for the direction whose weights are the op's inputs
    ``base + 1`` to ``base + 17`` (the unidirectional layout: input weights 1-4, recurrent 5-8,
    peephole 9-11, biases 12-15, projection 16-17; layer-norm coefficients 20-23), writing
    ``out``'s rows from ``column`` (out's row width may hold both directions)."""
    ins, o = node.ins, node.options
    at = lambda k: ins[base + k]  # noqa: E731
    weights = [at(k) for k in range(1, 18) if at(k) is not None] + ([ins[k] for k in range(20, 24) if ins[k] is not None]
                                                                      if layer_norm else [])
    require(all(t.value is not None for t in weights), "an LSTM whose weights are computed at run time is not compiled")
    cifg = at(1) is None
    gates = range(1, 4) if cifg else range(4)
    stack = lambda first: np.concatenate([_value(at(first + k)) for k in gates], axis=0)  # noqa: E731  [G*n, m]
    wx, wh, bias = stack(1), stack(5), np.concatenate([_value(at(12 + k)) for k in gates])
    n, n_in, n_out = at(2).shape[0], wx.shape[1], wh.shape[1]
    norm = np.concatenate([_value(ins[20 + k]) for k in gates]) if layer_norm else np.zeros(1, F)
    peephole = at(10) is not None
    peep = np.concatenate([_value(at(9)) if at(9) is not None else np.zeros(n, F), _value(at(10)), _value(at(11))]) \
        if peephole else np.zeros(1, F)  # fmt: skip
    proj = _value(at(16))
    proj_bias = _value(at(17)) if at(17) is not None else np.zeros(n_out, F)
    row = out.shape[-1]  # the output row's width (both directions' when merged)
    if time_major:
        strides = (batch * n_in, n_in, batch * row, row)
    else:
        strides = (n_in, steps * n_in, row, steps * row)
    require(h.size == batch * n_out and c.size == batch * n and out.size == steps * batch * row and column + n_out <= row,
            f"{node.op_name} state or output sizes do not match")  # the NumPy kernel's prepare checks these
    if out.size == 0:
        return
    dims = [steps, batch, n_in, n, n_out, *strides, int(reverse), column]
    flags = [cifg, peephole, layer_norm, proj is not None, int(o.fused_activation_function)]
    parts = [np.array([o.cell_clip, o.proj_clip], F)] + [np.ascontiguousarray(a, F).reshape(-1) for a in (
        wx.T, wh.T, bias, peep, norm, proj.T if proj is not None else np.zeros(1, F), proj_bias)]  # fmt: skip
    starts = np.cumsum([0] + [a.size for a in parts])[1:].tolist()  # each constant's start after the clips, and the end
    buffer = np.cumsum([0, h.size, c.size, (3 if cifg else 4) * n, n]).tolist()  # h, c, the gates, the hidden row
    src = g.temp((buffer[-1],), F32)
    g.line(f"{g.kernel(state_in)}({src.name}, {buffer[0]}, {h.name}, {h.size})")
    g.line(f"{g.kernel(state_in)}({src.name}, {buffer[1]}, {c.name}, {c.size})")
    call(g, KIND, x, out, src, dims + flags + starts + buffer, np.concatenate(parts))
    g.line(f"{g.kernel(state_out)}({h.name}, {src.name}, {buffer[0]}, {h.size})")
    g.line(f"{g.kernel(state_out)}({c.name}, {src.name}, {buffer[1]}, {c.size})")


# -- RNN and UNIDIRECTIONAL_SEQUENCE_RNN (float32) ------------------------------------------------


@kernel
def rnn_sequence(x, w, w_h, bias, h, out, pre, steps, batch, n_in, units, x_step, x_batch, out_step, out_batch, code,
                 reverse, column):
    """``h = act(W x + b + W_h h)`` for each step and batch row, in the NumPy kernel's order
    (the input's products summed in ``k`` order, then the bias, then the state's products), the
    new state written over ``h`` (the op's variable tensor) and into the output. ``w`` is
    ``[units, n_in]`` and ``w_h`` ``[units, units]`` as stored (constant or from data);
    ``pre`` is scratch of one row's ``units``. ``reverse``: from the last step to the first;
    ``column``: where the outputs start in each output row (a merged bidirectional output)."""
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            x_at = t * x_step + b * x_batch
            state = h[b * units : (b + 1) * units]
            for j in range(units):
                acc = F(0)
                row = w[j * n_in : (j + 1) * n_in]
                for k in range(n_in):
                    acc += x[x_at + k] * row[k]
                pre[j] = acc + bias[j]
            for j in range(units):
                acc = F(0)
                row = w_h[j * units : (j + 1) * units]
                for k in range(units):
                    acc += state[k] * row[k]
                pre[j] += acc
            out_at = t * out_step + b * out_batch + column
            for j in range(units):
                v = _activate(code, pre[j])
                state[j] = v
                out[out_at + j] = v


@emits("RNN", "UNIDIRECTIONAL_SEQUENCE_RNN")
def emit_rnn(node, g) -> None:
    """A basic RNN on float32 (the hybrid, int8-weight RNN stays on NumPy): one step (RNN,
    input ``[batch, n_in]``) or a sequence, batch- or time-major; the state is the op's
    variable tensor (input 4), updated in place."""
    x = node.ins[0]
    (out,) = node.outs
    _require_float(node)
    require(all(t is not None for t in node.ins), f"{node.op_name} with an omitted input is not compiled")
    if node.op_name == "RNN":
        steps, batch, time_major = 1, x.shape[0], True
    else:
        time_major = bool(node.options.time_major)
        steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    _rnn_direction(g, node, 1, x, out, steps, batch, time_major)


@emits("BIDIRECTIONAL_SEQUENCE_RNN")
def emit_bidirectional_rnn(node, g) -> None:
    """Two directions of :func:`rnn_sequence` (the backward one from the last step), each
    writing its own output or its columns of the merged one; weights, recurrent weights, bias
    and state at inputs 1-4 forward, 5-8 backward. An aux input without aux weights is the
    backward input (LiteRT's non-stacking mode); aux weights are not compiled."""
    ins, o = node.ins, node.options
    _require_float(node)
    require(ins[10] is None and ins[11] is None, "BIDIRECTIONAL_SEQUENCE_RNN with aux weights is not compiled")
    require(all(ins[k] is not None for k in range(1, 9)), f"{node.op_name} with an omitted input is not compiled")
    x, aux = ins[0], ins[9]
    time_major = bool(o.time_major)
    steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    fw_out, bw_out = (node.outs[0], node.outs[0]) if o.merge_outputs else node.outs
    _rnn_direction(g, node, 1, x, fw_out, steps, batch, time_major)
    _rnn_direction(g, node, 5, aux if aux is not None else x, bw_out, steps, batch, time_major, reverse=True,
                   column=ins[1].shape[0] if o.merge_outputs else 0)


def _rnn_direction(g, node, first: int, x, out, steps: int, batch: int, time_major: bool, reverse: bool = False,
                   column: int = 0) -> None:
    """One call of :func:`rnn_sequence` for the direction whose weights, recurrent weights, bias
    and state are the op's inputs ``first`` to ``first + 3``, writing ``out``'s rows from
    ``column``."""
    w, w_h, bias, h = node.ins[first : first + 4]
    units, n_in, row = w.shape[0], x.shape[-1], out.shape[-1]
    require(h.size == batch * units and out.size == steps * batch * row and column + units <= row,
            f"{node.op_name} state or output sizes do not match")
    if out.size == 0:
        return
    x_step, x_batch = (batch * n_in, n_in) if time_major else (n_in, steps * n_in)
    out_step, out_batch = (batch * row, row) if time_major else (row, steps * row)
    pre = g.temp((units,), F32)
    code = int(node.options.fused_activation_function)
    g.line(f"{g.kernel(rnn_sequence)}({x.name}, {w.name}, {w_h.name}, {bias.name}, {h.name}, {out.name}, {pre.name}, "
           f"{steps}, {batch}, {n_in}, {units}, {x_step}, {x_batch}, {out_step}, {out_batch}, {code}, {int(reverse)}, {column})")


# -- SVDF (float32) ---------------------------------------------------------------------------------


@kernel
def svdf_step(x, feature, time, bias, state, out, batch, n_in, filters, memory, units, rank, code):
    """One SVDF step in the NumPy kernel's order: each filter's memory (a row of ``state``, the
    op's variable tensor, updated in place) shifts one place left and takes the feature
    ``feature[f] . x[b]`` at its end; each filter's memory dotted with its time weights, the
    ``rank`` filters of a unit summed, the bias added (``bias`` holds 0 when the op has none),
    the fused activation applied. ``feature`` is ``[filters, n_in]``, ``time`` ``[filters,
    memory]``, as stored."""
    for b in range(batch):
        s = state[b * filters * memory : (b + 1) * filters * memory]
        row = x[b * n_in : (b + 1) * n_in]
        for f in range(filters):
            m = s[f * memory : (f + 1) * memory]
            for j in range(memory - 1):
                m[j] = m[j + 1]
            w = feature[f * n_in : (f + 1) * n_in]
            acc = F(0)
            for k in range(n_in):
                acc += row[k] * w[k]
            m[memory - 1] = acc
        for u in range(units):
            total = F(0)
            for r in range(rank):
                f = u * rank + r
                m = s[f * memory : (f + 1) * memory]
                w = time[f * memory : (f + 1) * memory]
                dot = F(0)
                for j in range(memory):
                    dot += m[j] * w[j]
                total += dot
            out[b * units + u] = _activate(code, total + bias[u])


@emits("SVDF")
def emit_svdf(node, g) -> None:
    """Float32 SVDF, weights constant or from data (the hybrid, int8-weight SVDF stays on
    NumPy); the state is the op's variable tensor (input 4), updated in place."""
    x, feature, time, bias, state = node.ins
    (out,) = node.outs
    _require_float(node)
    k = node.kernel
    batch, n_in = x.shape
    filters = feature.shape[0]
    require(state.size == batch * filters * k.memory and out.size == batch * k.units, "SVDF state or output sizes do not match")
    if out.size == 0:
        return
    bias_name = bias.name if bias is not None else g.const(np.zeros(k.units, F))
    g.line(f"{g.kernel(svdf_step)}({x.name}, {feature.name}, {time.name}, {bias_name}, {state.name}, {out.name}, {batch}, "
           f"{n_in}, {filters}, {k.memory}, {k.units}, {k.rank}, {int(node.options.fused_activation_function)})")
