"""UNIDIRECTIONAL_SEQUENCE_LSTM on float32 as one compiled loop over the time steps; RNN and
UNIDIRECTIONAL_SEQUENCE_RNN on float32 as an inlined loop (:func:`rnn_sequence`, at the end).

The semantics are those of the NumPy kernel (:mod:`numlite.kernels.rnn`, LiteRT's float LSTM):
gates stacked in the order input, forget, cell, output (input left out under CIFG), optional
peephole weights, layer-norm coefficients and projection, cell and projection clipping, the
fused activation on the cell gate and on the new cell state (NONE leaves the cell gate's
pre-activation in place, as LiteRT does). The final states are written back into the op's two
state inputs, which the model keeps as variable tensors between invokes.

The weights are constants stacked at generation into row-major ``[inputs, gates]`` blocks, so
that every product is a row of the state or input times a contiguous row of weights, which
LLVM vectorizes. The sequence runs in one function compiled once for every LSTM node (the
sizes and flags are arguments, not literals): inlining it into each generated model would
cost each model the compile of the whole loop nest. The activations use the vectorizable
approximations of :mod:`numlite.jit.kernels.transcendental`.
"""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, clip, kernel, require
from numlite.jit.kernels.transcendental import sigmoid32, tanh32

F = np.float32
F32 = np.dtype(np.float32)
NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = range(6)  # LiteRT's fused activation codes
LN_EPSILON = F(1e-8)  # LiteRT's MeanStddevNormalization
# dims: the sizes and strides the kernel takes (an int64 constant of the generated model)
STEPS, BATCH, N_INPUT, N_CELL, N_OUTPUT, X_STEP, X_BATCH, OUT_STEP, OUT_BATCH = range(9)
# flags
CIFG, PEEPHOLE, LAYER_NORM, PROJECTION, ACTIVATION = range(5)


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
    for t in range(steps):
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
            out_at = t * dims[OUT_STEP] + b * dims[OUT_BATCH]
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


def _value(operand) -> np.ndarray | None:
    return None if operand is None else np.asarray(operand.value, np.float32)


@emits("UNIDIRECTIONAL_SEQUENCE_LSTM")
def emit(node, g) -> None:
    ins, (out,) = node.ins, node.outs
    require(len(ins) in (20, 24), "UNIDIRECTIONAL_SEQUENCE_LSTM with aux inputs is not compiled")
    o = node.options
    require(not getattr(o, "diagonal_recurrent_tensors", False), "an LSTM with diagonal recurrent weights is not compiled")
    require(all(t is None or t.dtype == F32 for t in (*ins, out)), "UNIDIRECTIONAL_SEQUENCE_LSTM is compiled on float32 only")
    weights = [t for k, t in enumerate(ins) if k not in (0, 18, 19) and t is not None]
    require(all(t.value is not None for t in weights), "an LSTM whose weights are computed at run time is not compiled")
    x, h, c = ins[0], ins[18], ins[19]
    cifg = ins[1] is None
    gates = range(1, 4) if cifg else range(4)
    stack = lambda first: np.concatenate([_value(ins[first + k]) for k in gates], axis=0)  # noqa: E731  [G*n, m]
    wx, wh, bias = stack(1), stack(5), np.concatenate([_value(ins[12 + k]) for k in gates])
    n, n_in, n_out = ins[2].shape[0], wx.shape[1], wh.shape[1]
    layer_norm = len(ins) == 24 and ins[21] is not None
    norm = np.concatenate([_value(ins[20 + k]) for k in gates]) if layer_norm else np.zeros(1, F)
    peephole = ins[10] is not None
    peep = np.concatenate([_value(ins[9]) if ins[9] is not None else np.zeros(n, F), _value(ins[10]), _value(ins[11])]) \
        if peephole else np.zeros(1, F)  # fmt: skip
    proj = _value(ins[16])
    proj_bias = _value(ins[17]) if ins[17] is not None else np.zeros(n_out, F)
    if o.time_major:
        steps, batch = x.shape[0], x.shape[1]
        strides = (batch * n_in, n_in, batch * n_out, n_out)
    else:
        batch, steps = x.shape[0], x.shape[1]
        strides = (n_in, steps * n_in, n_out, steps * n_out)
    require(h.size == batch * n_out and c.size == batch * n and out.size == steps * batch * n_out,
            "UNIDIRECTIONAL_SEQUENCE_LSTM state or output sizes do not match")  # the NumPy kernel's prepare checks these
    dims = np.array([steps, batch, n_in, n, n_out, *strides], np.int64)
    flags = np.array([cifg, peephole, layer_norm, proj is not None, int(o.fused_activation_function)], np.int64)
    clips = np.array([o.cell_clip, o.proj_clip], np.float32)
    scratch = g.temp(((3 if cifg else 4) * n,), F32)
    hidden = g.temp((n,), F32)
    constants = [g.const(np.ascontiguousarray(a, F)) for a in (
        wx.T, wh.T, bias, peep, norm, proj.T if proj is not None else np.zeros(1, F), proj_bias)]  # fmt: skip
    arguments = [x.name, *constants, h.name, c.name, out.name, scratch.name, hidden.name]
    arguments += [g.const(dims), g.const(flags), g.const(clips)]
    g.line(f"{g.kernel(lstm_sequence)}({', '.join(arguments)})")


# -- RNN and UNIDIRECTIONAL_SEQUENCE_RNN (float32) ------------------------------------------------


@kernel
def rnn_sequence(x, w, w_h, bias, h, out, pre, steps, batch, n_in, units, x_step, x_batch, out_step, out_batch, code):
    """``h = act(W x + b + W_h h)`` for each step and batch row, in the NumPy kernel's order
    (the input's products summed in ``k`` order, then the bias, then the state's products), the
    new state written over ``h`` (the op's variable tensor) and into the output. ``w`` is
    ``[units, n_in]`` and ``w_h`` ``[units, units]`` as stored (constant or from data);
    ``pre`` is scratch of one row's ``units``."""
    for t in range(steps):
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
            out_at = t * out_step + b * out_batch
            for j in range(units):
                v = _activate(code, pre[j])
                state[j] = v
                out[out_at + j] = v


@emits("RNN", "UNIDIRECTIONAL_SEQUENCE_RNN")
def emit_rnn(node, g) -> None:
    """A basic RNN on float32 (the hybrid, int8-weight RNN stays on NumPy): one step (RNN,
    input ``[batch, n_in]``) or a sequence, batch- or time-major; the state is the op's
    variable tensor (input 4), updated in place."""
    x, w, w_h, bias, h = node.ins
    (out,) = node.outs
    require(all(t is not None and t.dtype == F32 for t in (x, w, w_h, bias, h, out)), f"{node.op_name} is compiled on float32 only")
    o = node.options
    units = w.shape[0]
    if node.op_name == "RNN":
        batch, n_in = x.shape
        steps, time_major = 1, True
    else:
        time_major = bool(o.time_major)
        steps, batch, n_in = (x.shape[0], x.shape[1], x.shape[2]) if time_major else (x.shape[1], x.shape[0], x.shape[2])
    require(h.size == batch * units and out.size == steps * batch * units, f"{node.op_name} state or output sizes do not match")
    if out.size == 0:
        return
    x_step, x_batch = (batch * n_in, n_in) if time_major else (n_in, steps * n_in)
    out_step, out_batch = (batch * units, units) if time_major else (units, steps * units)
    pre = g.temp((units,), F32)
    code = int(o.fused_activation_function)
    g.line(f"{g.kernel(rnn_sequence)}({x.name}, {w.name}, {w_h.name}, {bias.name}, {h.name}, {out.name}, {pre.name}, "
           f"{steps}, {batch}, {n_in}, {units}, {x_step}, {x_batch}, {out_step}, {out_batch}, {code})")
