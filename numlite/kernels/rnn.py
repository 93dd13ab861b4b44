"""Recurrent ops (float32): UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, LSTM (full
kernel), UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, RNN and SVDF, with LiteRT's
formulas; the hybrid (int8 weight) forms of the sequence LSTMs, RNN and SVDF.

An LSTM step, gates in LiteRT's order input (i), forget (f), cell (g), output (o)::

    i = sigmoid(LN(W_xi x + W_hi h + w_ci * c) + b_i)     (absent under CIFG: i = 1 - f)
    f = sigmoid(LN(W_xf x + W_hf h + w_cf * c) + b_f)
    g = act(LN(W_xg x + W_hg h) + b_g)
    c = clip(f * c + i * g, cell_clip)
    o = sigmoid(LN(W_xo x + W_ho h + w_co * c) + b_o)      (the peephole sees the new c)
    h = clip(W_p (o * act(c)) + b_p, proj_clip)            (without projection: o * act(c))

``w_c*`` are the optional peephole vectors, ``LN(v) = coefficients * (v - mean) / sqrt(var +
1e-8)`` applies only when layer-norm coefficients are given (the bias is then added after it,
otherwise bias and LN merge into a plain sum), ``act`` is the op's fused activation and a clip of
0 means none. With ``diagonal_recurrent_tensors`` the recurrent weights are vectors
(``W_h* h`` becomes ``w_h* * h``). Two LiteRT behaviours are kept on purpose: with activation
NONE LiteRT never writes ``act(c)``, so ``h`` is ``o * g`` (the buffer still holds the cell
gate); SIGN_BIT is ``1`` for negative values (and -0.0), ``0`` otherwise.

The bidirectional ops take an aux input: with aux weights both directions add its projection;
without them it is the backward direction's input. Three LiteRT bugs are not reproduced (numlite
computes what LiteRT's own other layout computes, see tests/test_rnn_kernels.py): its merged
batch-major BIDIRECTIONAL_SEQUENCE_LSTM output is wrong from the second batch row on; its
batch-major BIDIRECTIONAL_SEQUENCE_RNN backward pass reads the main input instead of the aux
input; its time-major BIDIRECTIONAL_SEQUENCE_RNN steps through an aux input with the main
input's depth.

The states (``output_state`` h and ``cell_state`` c, an RNN's hidden state, an SVDF's memory)
are variable tensors: read at the start of each invoke and overwritten with the final state, so
they persist across invokes (and re-allocations) until ``reset_all_variables``, as in LiteRT.

Speed: the input projections of every time step are one BLAS matmul; the time loop then does
one recurrent matmul per step for all gates at once. Float LSTMs without layer norm or diagonal
weights run :class:`FastLstm` (gates reordered so the sigmoids are one call, every view and
temporary bound once per binding of the arrays, ``h`` written straight into the output), and
tanh LSTMs without CIFG or peepholes :class:`TanhLstm` (nine NumPy calls a step); the other
variants and the hybrid LSTM take the general :meth:`LstmDirection.step`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, dot_into, register, scratch
from numlite.kernels.hybrid import asymmetric_quantize, quantize_centered, symmetric_quantize

FLOAT = np.dtype(np.float32)
LN_EPSILON = np.float32(1e-8)  # LiteRT's MeanStddevNormalization constant

NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = range(6)


# ----------------------------------------------------------------------------- activations


def _activate(code: int, src: np.ndarray, dst: np.ndarray) -> None:
    """``dst = act(src)`` as LiteRT's ApplyActivationToVector: NONE writes nothing."""
    if code == NONE:
        return
    if code == RELU:
        np.maximum(src, 0, out=dst)
    elif code == RELU_N1_TO_1:
        np.clip(src, -1, 1, out=dst)
    elif code == RELU6:
        np.clip(src, 0, 6, out=dst)
    elif code == TANH:
        np.tanh(src, out=dst)
    else:  # SIGN_BIT
        np.copyto(dst, np.signbit(src))


def _sigmoid(x: np.ndarray) -> None:
    """In place. exp overflows to inf for very negative x, giving the right limit 0: callers
    run it under ``np.errstate(over="ignore")`` (once per sequence, not per step)."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)


def _check_activation(kernel: Kernel, code: int) -> int:
    if code not in range(6):
        raise kernel.fail(f"unknown fused activation function {code}")
    return code


# 0-d arrays, not scalars: NumPy 2 spends about 0.16 us more on a scalar operand per call
# (activations.py), and a time step makes two or three such calls.
_ONE, _HALF = np.array(1, np.float32), np.array(0.5, np.float32)


def _clip(x: np.ndarray, bound: np.float32) -> None:
    """Clip to [-bound, bound] in place; 0 means no clipping (ufuncs: np.clip's Python
    wrapper costs more than the work at these sizes)."""
    if bound > 0:
        np.minimum(x, bound, out=x)  # out by keyword: NumPy 2.4 deprecates it positional here
        np.maximum(x, -bound, out=x)


# ----------------------------------------------------------------------------- shared checks


def _check_float(kernel: Kernel, ins: Sequence[TensorInfo | None]) -> None:
    for t in ins:
        if t is not None and t.dtype != FLOAT:
            raise kernel.fail(
                f"input {t.name!r} has dtype {t.dtype.name}; only float32 is supported"
                " (hybrid int8-weight LSTMs run as UNIDIRECTIONAL_SEQUENCE_LSTM or BIDIRECTIONAL_SEQUENCE_LSTM only;"
                " fully quantized recurrent ops are not implemented)"
            )


def _is_hybrid(ins: Sequence[TensorInfo | None], weights: int) -> bool:
    """Float input with integer weights (the dynamic-range form), judged on the weights at
    ``weights`` (input-to-forget for an LSTM, always present)."""
    w, x = _get(ins, weights), ins[0]
    return x is not None and x.dtype == FLOAT and w is not None and w.dtype.kind in "iu"


def _check_state(kernel: Kernel, ins: Sequence[TensorInfo | None], index: int, elements: int, what: str) -> None:
    """A state operand must be present, be a variable tensor (LiteRT's GetVariableInput finds
    nothing otherwise) and hold ``elements`` values."""
    t = ins[index]
    if t is None:
        raise kernel.fail(f"the {what} (input {index}) is missing")
    runtime = kernel.node.runtime
    if runtime is not None and not runtime.graph.tensors[kernel.node.inputs[index]].is_variable:
        raise kernel.fail(f"the {what} {t.name!r} (input {index}) must be a variable tensor")
    if t.size != elements:
        raise kernel.fail(f"the {what} {t.name!r} has shape {t.shape}, expected {elements} elements")


def _sequence_dims(kernel: Kernel, x: TensorInfo, time_major: bool) -> tuple[int, int, int]:
    """(max_time, batch, features) of a rank-3 sequence input."""
    if x.ndim != 3:
        raise kernel.fail(f"input {x.name!r} must have rank 3, got shape {x.shape}")
    t, b = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    return int(t), int(b), int(x.shape[2])


def _time_major(a: np.ndarray, time_major: bool) -> np.ndarray:
    """A [time, batch, ...] view of a sequence stored either way."""
    return a if time_major else a.swapaxes(0, 1)


def _sequence_shape(time: int, batch: int, depth: int, time_major: bool) -> tuple[int, int, int]:
    return (time, batch, depth) if time_major else (batch, time, depth)


def _check_backward_input(kernel: Kernel, aux: TensorInfo | None, n_input: int, bw_from_aux: bool) -> None:
    """An aux input without aux weights is the backward direction's input; LiteRT checks the
    backward weights against the main input's depth, so both depths must agree."""
    if bw_from_aux and aux.shape[2] != n_input:
        raise kernel.fail(
            f"the aux input {aux.name!r} (the backward input, as it has no aux weights) has depth {aux.shape[2]},"
            f" the input {n_input}: LiteRT requires them equal"
        )


# ----------------------------------------------------------------------------- LSTM


@dataclass(frozen=True)
class LstmOperands:
    """Where one LSTM direction's tensors are among an op's inputs (-1: not an operand)."""

    input_to: tuple[int, int, int, int]  # i, f, c, o
    recurrent: tuple[int, int, int, int]
    peephole: tuple[int, int, int]  # i, f, o
    bias: tuple[int, int, int, int]
    projection: int
    projection_bias: int
    output_state: int
    cell_state: int
    layer_norm: tuple[int, int, int, int] = (-1, -1, -1, -1)
    aux: tuple[int, int, int, int] = (-1, -1, -1, -1)


def _lstm_operands(base: int, states: int, layer_norm: int = -1, aux: int = -1) -> LstmOperands:
    """The layout of LiteRT's LSTM ops: 17 weights from ``base`` (4 input, 4 recurrent,
    3 peephole, 4 bias, projection weights and bias), then the two states elsewhere."""
    r = lambda start, n: tuple(start + k for k in range(n)) if start >= 0 else (-1,) * n  # noqa: E731
    return LstmOperands(
        input_to=r(base, 4), recurrent=r(base + 4, 4), peephole=r(base + 8, 3), bias=r(base + 11, 4),
        projection=base + 15, projection_bias=base + 16, output_state=states, cell_state=states + 1,
        layer_norm=r(layer_norm, 4), aux=r(aux, 4),
    )


def _get(ins: Sequence, index: int):
    return ins[index] if 0 <= index < len(ins) else None


@dataclass
class LstmWeights:
    """One direction's weights stacked for BLAS: gate blocks in order i, f, g, o (i left out
    under CIFG), each ``n_cell`` wide."""

    input_to: np.ndarray  # [n_input, G * n_cell]
    aux: np.ndarray | None  # [n_aux, G * n_cell]
    recurrent: np.ndarray  # [n_output, G * n_cell], or [G * n_cell] when diagonal
    bias: np.ndarray  # [G * n_cell]
    peephole: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]  # i, f, o
    layer_norm: np.ndarray | None  # [G, n_cell]
    projection: np.ndarray | None  # [n_cell, n_output]
    projection_bias: np.ndarray | None  # [n_output]


class LstmDirection:
    """One LSTM direction of an op: validates its operands at prepare, stacks its weights
    (once when they are constants) and runs the time loop."""

    part = 0  # the first step of the chunk being run (``run_sequence``)

    def __init__(self, kernel: Kernel, ops: LstmOperands, diagonal: bool = False) -> None:
        self.kernel, self.ops, self.diagonal = kernel, ops, diagonal

    # -- prepare --------------------------------------------------------------------------------

    def prepare(self, ins: Sequence[TensorInfo | None], n_input: int, batch: int, n_aux: int | None) -> None:
        """Check every operand against LiteRT's rules; sets n_cell, n_output and the flags."""
        ops, fail = self.ops, self.kernel.fail
        forget_in = self._need(ins, ops.input_to[1], "input-to-forget weights")
        if forget_in.ndim != 2:
            raise fail(f"input-to-forget weights {forget_in.name!r} must have rank 2, got shape {forget_in.shape}")
        self.n_cell = int(forget_in.shape[0])
        forget_rec = self._need(ins, ops.recurrent[1], "recurrent-to-forget weights")
        if self.diagonal:
            self.n_output = self.n_cell
        elif forget_rec.ndim != 2:
            raise fail(f"recurrent-to-forget weights {forget_rec.name!r} must have rank 2, got shape {forget_rec.shape}")
        else:
            self.n_output = int(forget_rec.shape[1])
        self.cifg = _get(ins, ops.input_to[0]) is None
        gates = range(1, 4) if self.cifg else range(4)
        self._check_gate_operands(ins, gates, n_input, n_aux)
        self._check_optional_operands(ins)
        _check_state(self.kernel, ins, ops.output_state, batch * self.n_output, "output state")
        _check_state(self.kernel, ins, ops.cell_state, batch * self.n_cell, "cell state")
        self.use_aux = n_aux is not None and _get(ins, ops.aux[1]) is not None
        self.weights = self.stack(ins) if self._all_constant(ins) else None
        self.fast = None if self.weights is None or not self.fast_path() else _fast_lstm(self, self.weights)

    def _check_gate_operands(self, ins, gates: range, n_input: int, n_aux: int | None) -> None:
        ops, n, fail = self.ops, self.n_cell, self.kernel.fail
        names = "input forget cell output".split()
        if self.cifg:
            for idx, what in ((ops.recurrent[0], "recurrent-to-input weights"), (ops.bias[0], "input gate bias")):
                if _get(ins, idx) is not None:
                    raise fail(f"without input-to-input weights (CIFG) the {what} (input {idx}) must be omitted")
        rec_shape = (n,) if self.diagonal else (n, self.n_output)
        for k in gates:
            self._expect(ins, ops.input_to[k], (n, n_input), f"input-to-{names[k]} weights")
            self._expect(ins, ops.recurrent[k], rec_shape, f"recurrent-to-{names[k]} weights")
            self._expect(ins, ops.bias[k], (n,), f"{names[k]} gate bias")
        aux = [_get(ins, i) for i in ops.aux]
        if any(a is not None for a in aux):
            if n_aux is None:
                raise fail("auxiliary input weights are given without an auxiliary input")
            for k in gates:
                self._expect(ins, ops.aux[k], (n, n_aux), f"aux-input-to-{names[k]} weights")

    def _check_optional_operands(self, ins) -> None:
        ops, n, fail = self.ops, self.n_cell, self.kernel.fail
        peep = [_get(ins, i) for i in ops.peephole]
        self.peephole = peep[2] is not None
        if (peep[1] is None) != (peep[2] is None) or (self.cifg and peep[0] is not None) or (
            not self.cifg and self.peephole and peep[0] is None
        ):
            raise fail("peephole weights must be all present (cell-to-input only without CIFG) or all omitted")
        for k, idx in enumerate(ops.peephole):
            if peep[k] is not None:
                self._expect(ins, idx, (n,), "peephole weights")
        norms = [_get(ins, i) for i in ops.layer_norm]
        self.layer_norm = norms[1] is not None
        if self.layer_norm:
            wanted = range(1, 4) if self.cifg else range(4)
            if any(norms[k] is None for k in wanted) or (self.cifg and norms[0] is not None):
                raise fail("layer-norm coefficients must be given for every gate the LSTM has")
            for k in wanted:
                self._expect(ins, ops.layer_norm[k], (n,), "layer-norm coefficients")
        elif any(t is not None for t in norms):
            raise fail("layer-norm coefficients need the forget gate's")
        proj, proj_bias = _get(ins, ops.projection), _get(ins, ops.projection_bias)
        self.projection = proj is not None
        if proj is None:
            if proj_bias is not None:
                raise fail("a projection bias needs projection weights")
            if self.n_output != n:
                raise fail(f"without projection the output size ({self.n_output}) must equal the cell size ({n})")
        else:
            self._expect(ins, ops.projection, (self.n_output, n), "projection weights")
            if proj_bias is not None:
                self._expect(ins, ops.projection_bias, (self.n_output,), "projection bias")

    def _need(self, ins, index: int, what: str) -> TensorInfo:
        t = _get(ins, index)
        if t is None:
            raise self.kernel.fail(f"the {what} (input {index}) is missing")
        return t

    def _expect(self, ins, index: int, shape: tuple[int, ...], what: str) -> None:
        t = self._need(ins, index, what)
        if tuple(t.shape) != shape:
            raise self.kernel.fail(f"the {what} {t.name!r} (input {index}) has shape {t.shape}, expected {shape}")

    def fast_path(self) -> bool:
        """Whether :class:`FastLstm` runs this direction: float weights, full recurrent
        matrices and no layer norm (those take the general :meth:`step`)."""
        return type(self) is LstmDirection and not self.diagonal and not self.layer_norm

    def bias_width(self) -> int:
        """Width of the stacked gates: 3 or 4 blocks of n_cell."""
        return (3 if self.cifg else 4) * self.n_cell

    def _weight_indices(self) -> list[int]:
        o = self.ops
        return [*o.input_to, *o.recurrent, *o.peephole, *o.bias, o.projection, o.projection_bias, *o.layer_norm, *o.aux]

    def _all_constant(self, ins) -> bool:
        return all(_get(ins, i) is None or ins[i].value is not None for i in self._weight_indices())

    # -- weights --------------------------------------------------------------------------------

    def stack(self, ins: Sequence) -> LstmWeights:
        """Stack the gates' operands (arrays, or TensorInfos with values) for BLAS."""
        value = lambda i: None if _get(ins, i) is None else np.asarray(getattr(ins[i], "value", ins[i]), FLOAT)  # noqa: E731
        gates = range(1, 4) if self.cifg else range(4)
        o = self.ops
        cat = lambda idx: np.concatenate([value(idx[k]) for k in gates], axis=0)  # noqa: E731
        return LstmWeights(
            input_to=np.ascontiguousarray(cat(o.input_to).T),
            aux=np.ascontiguousarray(cat(o.aux).T) if self.use_aux else None,
            recurrent=cat(o.recurrent) if self.diagonal else np.ascontiguousarray(cat(o.recurrent).T),
            bias=cat(o.bias),
            peephole=tuple(value(i) for i in o.peephole),
            layer_norm=np.stack([value(o.layer_norm[k]) for k in gates]) if self.layer_norm else None,
            projection=None if value(o.projection) is None else np.ascontiguousarray(value(o.projection).T),
            projection_bias=value(o.projection_bias),
        )

    # -- eval -----------------------------------------------------------------------------------

    def run(self, ins: Sequence, x: np.ndarray, aux: np.ndarray | None, out: np.ndarray, columns: slice,
            reverse: bool, params: "LstmParams", gates: np.ndarray, outs: Sequence) -> None:
        """Run the whole sequence. ``x``, ``aux`` and ``out`` are [time, batch, ...] views;
        ``columns`` is where this direction writes in ``out``'s last axis; ``gates`` is scratch
        of [time, batch, G * n_cell]; ``outs`` the op's output arrays (``ins`` and ``outs``
        identify the arrays ``x``, ``aux`` and ``out`` are views of)."""
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0 or batch == 0:
            return
        if self.fast_path():
            fast = self.fast if self.fast is not None else _fast_lstm(self, self.stack(ins))
            fast.run(ins, outs, x, aux, out, columns, reverse, params, gates, self)
            return
        w = self.weights if self.weights is not None else self.stack(ins)
        h = ins[self.ops.output_state].reshape(-1, self.n_output)
        c = ins[self.ops.cell_state].reshape(-1, self.n_cell)
        flat = gates.reshape(steps * batch, -1)
        np.matmul(x.reshape(steps * batch, -1), w.input_to, out=flat)
        if w.aux is not None:
            flat += aux.reshape(steps * batch, -1) @ w.aux
        if w.layer_norm is None:
            flat += w.bias  # with layer norm the bias comes after the normalisation
        with np.errstate(over="ignore"):
            for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
                g = gates[t]
                if self.diagonal:
                    g += np.tile(h, (1, g.shape[1] // h.shape[1])) * w.recurrent
                else:
                    g += h @ w.recurrent
                out[t, :, columns] = self.step(g, h, c, w, params)

    def step(self, g: np.ndarray, h: np.ndarray, c: np.ndarray, w: LstmWeights, params: "LstmParams") -> np.ndarray:
        """One time step on the gates' pre-activations ``g`` [batch, G * n_cell] (input and
        recurrent terms summed); updates ``h`` and ``c`` in place and returns ``h``."""
        n, first = self.n_cell, 0 if self.cifg else 1  # first: the forget gate's block
        blocks = g.reshape(g.shape[0], -1, n)  # [batch, G, n_cell]
        peep_i, peep_f, peep_o = w.peephole
        if peep_f is not None:
            if not self.cifg:
                blocks[:, 0] += peep_i * c
            blocks[:, first] += peep_f * c
        if w.layer_norm is not None:  # i, f and g now; o once the peephole saw the new c
            _layer_norm(blocks[:, : first + 2], w.layer_norm[: first + 2], w.bias.reshape(-1, n)[: first + 2])
        _sigmoid(blocks[:, : first + 1])
        forget, cell = blocks[:, first], blocks[:, first + 1]
        _activate(params.activation, cell, cell)
        c *= forget
        if self.cifg:
            np.subtract(1, forget, out=forget)
            c += cell * forget
        else:
            c += cell * blocks[:, 0]
        _clip(c, params.cell_clip)
        output = blocks[:, first + 2]
        if peep_o is not None:
            output += peep_o * c
        if w.layer_norm is not None:
            _layer_norm(output[:, None], w.layer_norm[first + 2 :], w.bias.reshape(-1, n)[first + 2 :])
        _sigmoid(output)
        _activate(params.activation, c, cell)  # NONE leaves the cell gate there, as in LiteRT
        output *= cell
        if w.projection is None:
            h[...] = output
        else:
            self.project(output, h, w)
            _clip(h, params.proj_clip)
        return h

    def project(self, output: np.ndarray, h: np.ndarray, w: LstmWeights) -> None:
        """``h = W_p output + b_p`` (before the projection clip)."""
        np.matmul(output, w.projection, out=h)
        if w.projection_bias is not None:
            h += w.projection_bias


def _layer_norm(v: np.ndarray, coefficients: np.ndarray, bias: np.ndarray) -> None:
    """In place over the last axis of ``v`` [batch, gates, n_cell]: LiteRT's
    MeanStddevNormalization, then the coefficients, then the bias."""
    mean = v.mean(axis=-1, keepdims=True)
    v -= mean
    variance = np.mean(v * v, axis=-1, keepdims=True)
    v /= np.sqrt(variance + LN_EPSILON)
    v *= coefficients
    v += bias


@dataclass(frozen=True)
class LstmParams:
    activation: int
    cell_clip: float
    proj_clip: float


def _lstm_params(kernel: Kernel) -> LstmParams:
    o = kernel.options
    if o is None:
        raise kernel.fail("missing options")
    code = _check_activation(kernel, o.fused_activation_function)
    cell_clip, proj_clip = float(o.cell_clip), float(o.proj_clip)
    if cell_clip < 0 or proj_clip < 0:  # LiteRT's Prepare checks these
        raise kernel.fail(f"cell_clip ({cell_clip}) and proj_clip ({proj_clip}) must not be negative")
    return LstmParams(code, np.float32(cell_clip), np.float32(proj_clip))


# ----------------------------------------------------------------------------- long sequences

# A sequence op keeps buffers of one row per step (each step's input projections, or
# TanhLstm's rows [h | x_t | 1]) for at most about this many bytes: a longer sequence runs in
# chunks of steps, each starting from the state the previous one wrote, so its memory does
# not grow with the sequence (LiteRT's kernels keep one step's) while the input product of a
# chunk is still one large matmul.
SEQUENCE_CHUNK_BYTES = 1 << 18
# Plans a fast LSTM direction keeps (one per chunk and binding of its arrays).
MAX_PLANS = 256


def plan_chunks(direction, steps: int, batch: int, width: int) -> int:
    """Set ``direction.chunk``, the steps one :func:`run_sequence` call covers, so that a
    ``[chunk, batch, width]`` float32 buffer stays under ``SEQUENCE_CHUNK_BYTES``."""
    direction.chunk = max(1, min(steps, SEQUENCE_CHUNK_BYTES // max(1, batch * width * FLOAT.itemsize)))
    return direction.chunk


def sequence_scratch(direction, steps: int, batch: int, width: int) -> np.ndarray:
    """The ``[chunk, batch, width]`` buffer of a direction's per-step values (:func:`plan_chunks`)."""
    return scratch((plan_chunks(direction, steps, batch, width), batch, width), FLOAT)


def run_sequence(direction, ins, x, aux, out, columns, reverse, setting, buffer, outs) -> None:
    """``direction.run`` (an LSTM's or RNN's: same arguments) over the whole sequence,
    ``direction.chunk`` steps at a time, the last chunk first when ``reverse``. Each call
    leaves its final state in the state inputs, where the next one starts."""
    steps, chunk = x.shape[0], getattr(direction, "chunk", x.shape[0])
    if steps <= chunk:
        direction.part = 0
        direction.run(ins, x, aux, out, columns, reverse, setting, buffer, outs)
        return
    starts = range(0, steps, chunk)
    for t0 in reversed(starts) if reverse else starts:
        part = slice(t0, min(t0 + chunk, steps))
        direction.part = t0  # which chunk (the fast LSTM keeps a plan for each)
        part_aux = None if aux is None else aux[part]
        direction.run(ins, x[part], part_aux, out[part], columns, reverse, setting, buffer[: part.stop - t0], outs)


# ----------------------------------------------------------------------------- float LSTM, fast path


def _activation_call(code: int):
    """``act(src, dst)`` as one call, or None for NONE (which writes nothing)."""
    if code == NONE:
        return None
    if code == TANH:
        return np.tanh
    return lambda src, dst: _activate(code, src, dst)


class _Plan:
    """The time loop's views for one binding of a direction's arrays (output, states, input
    layout): each step's gate blocks and output rows, and the loop's temporaries."""

    __slots__ = ("key", "states", "gates", "steps", "h", "c", "c3", "rows", "tmp", "ig", "ptmp", "xh", "hs", "order", "product")

    def __init__(self) -> None:
        self.xh = None  # TanhLstm's rows [h | x_t | 1] when it stacks its weights


# Widest input whose product TanhLstm makes at every step together with the recurrent one.
STACKED_MAX_INPUTS = 64


class FastLstm:
    """A float LSTM direction without layer norm or diagonal weights, laid out for few NumPy
    calls per step.

    The gate blocks are reordered so the sigmoid gates are contiguous and first: i, f, o, g
    (f, o, g under CIFG); one sigmoid call then covers all of them (without peepholes). Their
    weight columns, biases and peephole vectors are negated once here, so the gates hold
    ``-z`` and the sigmoid is ``1 / (1 + exp(-z))`` in three in-place ufuncs; negation is
    exact in floating point, so this computes the same values. Each step writes ``h``
    straight into the output rows and reads the previous step's rows as its ``h``; the state
    gets the last ``h`` at the end. Views and temporaries are built once per binding of the
    arrays (:meth:`plan`)."""

    def __init__(self, direction: LstmDirection, w: LstmWeights) -> None:
        n = self.n = direction.n_cell
        self.cifg, self.n_output = direction.cifg, direction.n_output
        blocks = [0, 2, 1] if self.cifg else [0, 1, 3, 2]  # from i, f, g, o (f, g, o) order
        perm = np.concatenate([np.arange(b * n, (b + 1) * n) for b in blocks])
        sign = np.ones(perm.size, FLOAT)
        sign[:-n] = -1  # the sigmoid gates
        self.input_to = np.ascontiguousarray(w.input_to[:, perm] * sign)
        self.aux = None if w.aux is None else np.ascontiguousarray(w.aux[:, perm] * sign)
        self.recurrent = np.ascontiguousarray(w.recurrent[:, perm] * sign)
        self.bias = np.ascontiguousarray(w.bias[perm] * sign)
        peep_i, peep_f, peep_o = w.peephole
        self.peep_if = None if peep_f is None else -np.stack([peep_f] if self.cifg else [peep_i, peep_f])
        self.peep_o = None if peep_o is None else -peep_o
        self.projection, self.projection_bias = w.projection, w.projection_bias
        self.width = perm.size
        self.plan_ = None  # the latest plan
        self.plans: dict[tuple, _Plan] = {}  # by binding: one per chunk of a long sequence
        self.temporaries: dict[str, np.ndarray] = {}  # the loop's buffers, shared by the plans

    def run(self, ins: Sequence, outs: Sequence, x: np.ndarray, aux: np.ndarray | None, out: np.ndarray,
            columns: slice, reverse: bool, params: LstmParams, gates: np.ndarray, direction: LstmDirection) -> None:
        """As :meth:`LstmDirection.run` (non-empty ``x``)."""
        # The op's arrays by identity (held by the plan, so no other array takes their ids):
        # the same objects are the same memory, strides and shapes.
        key = (*map(id, ins), *map(id, outs), direction.part)  # a chunk of a long sequence: its first step
        plan = self.plan_
        if plan is None or plan.key != key:
            plan = self.plans.get(key)
            if plan is None:
                if len(self.plans) >= MAX_PLANS:  # the arrays keep changing: start over
                    self.plans.clear()
                h, c = ins[direction.ops.output_state], ins[direction.ops.cell_state]
                plan = self.plans[key] = self.plan(key, x, out, columns, reverse, h, c, gates)
                plan.states = (list(ins), list(outs))
            self.plan_ = plan
        self.project_inputs(plan, x, aux)
        self.loop(plan, params)

    def temporary(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A loop buffer of this direction, shared by its plans: they run one at a time, each
        writing its buffers before it reads them (the first rows from the state inputs)."""
        size = int(np.prod(shape))
        buffer = self.temporaries.get(name)
        if buffer is None or buffer.size < size:
            buffer = self.temporaries[name] = np.empty(size, FLOAT)
        return buffer[:size].reshape(shape)

    def plan(self, key, x, out, columns, reverse, h, c, gates) -> _Plan:
        """Each step's views (in the order the loop takes them) and the temporaries."""
        steps, batch = x.shape[0], x.shape[1]
        plan = _Plan()
        plan.key = key
        # batch-major input: project it in its own order and step through [batch, time] views
        batch_major = not x.flags.c_contiguous and x.swapaxes(0, 1).flags.c_contiguous
        plan.gates = gates.reshape(batch, steps, -1).swapaxes(0, 1) if batch_major else gates
        n, width = self.n, self.width
        sig = width - n  # the sigmoid gates' columns
        peep = 0 if self.peep_if is None else self.peep_if.shape[0] * n  # the gates before o
        f0 = 0 if self.cifg else n
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        plan.steps = []
        for t in order:
            g = plan.gates[t]
            first = g[:, :peep] if peep else g[:, :sig]  # sigmoid before the cell update
            plan.steps.append((g, first, g[:, :peep].reshape(batch, -1, n) if peep else None, g[:, :n],
                               g[:, f0:f0 + n], g[:, sig - n:sig], g[:, sig:], out[t, :, columns]))
        plan.h = h.reshape(batch, self.n_output)
        plan.c = c.reshape(batch, n)
        plan.c3 = plan.c[:, None, :]
        plan.tmp = self.temporary("tmp", (batch, width))
        plan.ig = self.temporary("ig", (batch, n))
        plan.ptmp = self.temporary("ptmp", (batch, peep // n, n)) if peep else None
        return plan

    def project_inputs(self, plan: _Plan, x: np.ndarray, aux: np.ndarray | None) -> None:
        """All steps' input terms and biases: one matmul into the gates."""
        g = plan.gates
        if g.flags.c_contiguous and not x.flags.c_contiguous:  # a chunk of a batch-major input
            np.matmul(x, self.input_to, out=g)  # a product per step: no copy of the chunk
            if aux is not None and self.aux is not None:
                g += aux @ self.aux
            flat = g
        elif g.flags.c_contiguous:
            flat = g.reshape(-1, self.width)
            np.matmul(x.reshape(flat.shape[0], -1), self.input_to, out=flat)
            if aux is not None and self.aux is not None:
                flat += aux.reshape(flat.shape[0], -1) @ self.aux
        else:  # batch-major: the same rows in [batch, time] order
            flat = g.swapaxes(0, 1).reshape(-1, self.width)
            np.matmul(x.swapaxes(0, 1).reshape(flat.shape[0], -1), self.input_to, out=flat)
            if aux is not None and self.aux is not None:
                flat += aux.swapaxes(0, 1).reshape(flat.shape[0], -1) @ self.aux
        flat += self.bias

    def loop(self, plan: _Plan, params: LstmParams) -> None:
        """The time loop: gates, c and h of every step, then the final states."""
        with np.errstate(over="ignore"):  # exp overflows to inf for very negative z: sigmoid 0
            self._loop(plan, params)

    def _loop(self, plan: _Plan, params: LstmParams) -> None:
        # np.dot: less per-call overhead than np.matmul at these sizes (tmp is C-contiguous, as it needs);
        # outputs positional: keyword arguments cost a ufunc call more than the work here
        dot, matmul, add, multiply, exp, reciprocal = dot_into, np.matmul, np.add, np.multiply, np.exp, np.reciprocal
        act = _activation_call(params.activation)
        cell_clip, proj_clip = params.cell_clip, params.proj_clip
        recurrent, tmp, ig, c = self.recurrent, plan.tmp, plan.ig, plan.c
        peep_if, peep_o, c3, ptmp = self.peep_if, self.peep_o, plan.c3, plan.ptmp
        projection, projection_bias, cifg = self.projection, self.projection_bias, self.cifg
        one = _ONE
        prev = plan.h
        for g, first, first3, i, f, o, cell, h in plan.steps:
            dot(prev, recurrent, tmp)
            add(g, tmp, g)
            if peep_if is not None:  # i and f see the old c
                multiply(peep_if, c3, ptmp)
                add(first3, ptmp, first3)
            exp(first, first)  # sigmoid of -(-z)
            add(first, one, first)
            reciprocal(first, first)
            if act is not None:
                act(cell, cell)
            multiply(c, f, c)
            if cifg:
                np.subtract(one, f, ig)
                multiply(ig, cell, ig)
            else:
                multiply(i, cell, ig)
            add(c, ig, c)
            if cell_clip > 0:
                _clip(c, cell_clip)
            if peep_if is not None:  # o sees the new c
                multiply(peep_o, c, ig)
                add(o, ig, o)
                exp(o, o)
                add(o, one, o)
                reciprocal(o, o)
            if act is not None:  # NONE leaves the cell gate there, as in LiteRT
                act(c, cell)
            if projection is None:
                multiply(o, cell, h)
            else:
                multiply(o, cell, ig)
                matmul(ig, projection, h)
                if projection_bias is not None:
                    add(h, projection_bias, h)
                _clip(h, proj_clip)
            prev = h
        np.copyto(plan.h, prev)


class TanhLstm(FastLstm):
    """:class:`FastLstm` for the common case (tanh activation, no CIFG, no peepholes) in nine
    NumPy calls per step.

    The gate blocks are laid out g, f, i, o with the sigmoid gates' weights and biases halved
    (exact: a power of two), so one tanh over the whole row gives ``act(g)`` and
    ``tanh(z / 2)``, and ``sigmoid(z) = 0.5 + 0.5 tanh(z / 2)`` is two more calls. Each
    step's activated gates go into a row ``[c | g | f | i | o]`` whose first block holds the
    cell state it starts from, so ``[f, i] * [c, g]`` is one multiply and the new ``c`` one add
    of its halves, written straight into the other row's ``c`` block (two rows alternate)."""

    def __init__(self, direction: LstmDirection, w: LstmWeights) -> None:
        n = self.n = direction.n_cell
        self.cifg, self.n_output = False, direction.n_output
        perm = np.concatenate([np.arange(b * n, (b + 1) * n) for b in (2, 1, 0, 3)])  # g, f, i, o
        scale = np.full(perm.size, 0.5, FLOAT)
        scale[:n] = 1
        self.input_to = np.ascontiguousarray(w.input_to[:, perm] * scale)
        self.aux = None if w.aux is None else np.ascontiguousarray(w.aux[:, perm] * scale)
        self.recurrent = np.ascontiguousarray(w.recurrent[:, perm] * scale)
        self.bias = np.ascontiguousarray(w.bias[perm] * scale)
        self.peep_if = self.peep_o = None
        self.projection, self.projection_bias = w.projection, w.projection_bias
        self.width = perm.size
        self.plan_ = None  # the latest plan
        self.plans: dict[tuple, _Plan] = {}  # by binding: one per chunk of a long sequence
        self.temporaries: dict[str, np.ndarray] = {}  # the loop's buffers, shared by the plans
        # Small inputs without projection or auxiliary input: each step's gates are ONE product,
        # ``[h | x_t | 1] @ [recurrent; input_to; bias]`` (a row of the previous h, the step's
        # input and a one), instead of the step's recurrent product plus its share of the
        # sequence's input product: a NumPy call less per step (2.9 -> 2.6 us on [1, 16] inputs
        # of 32 units), for a product a little deeper.
        n_in = self.input_to.shape[0]
        self.stacked = None
        if self.aux is None and self.projection is None and n_in <= STACKED_MAX_INPUTS:
            self.stacked = np.ascontiguousarray(np.concatenate([self.recurrent, self.input_to, self.bias[None, :]]))

    def plan(self, key, x, out, columns, reverse, h, c, gates) -> _Plan:
        """As :meth:`FastLstm.plan`, with the two alternating rows; with ``stacked`` weights,
        the rows ``[h | x_t | 1]`` of every step (``xh``), each step writing its h into the
        next one's, copied to the output after the loop (``hs``: those h in time order)."""
        if self.stacked is not None:
            return self._stacked_plan(key, x, out, columns, reverse, h, c)
        steps, batch = x.shape[0], x.shape[1]
        plan = _Plan()
        plan.key = key
        batch_major = not x.flags.c_contiguous and x.swapaxes(0, 1).flags.c_contiguous
        plan.gates = gates.reshape(batch, steps, -1).swapaxes(0, 1) if batch_major else gates
        n = self.n
        rows = self.temporary("rows", (2, batch, 5 * n))  # [c | g | f | i | o], alternating
        plan.rows = rows
        plan.steps = []
        for k, t in enumerate(range(steps - 1, -1, -1) if reverse else range(steps)):
            row, following = rows[k % 2], rows[(k + 1) % 2]
            plan.steps.append((plan.gates[t], row[:, n:], row[:, 2 * n:], row[:, 2 * n:4 * n], row[:, :2 * n],
                               row[:, 4 * n:], following[:, :n], out[t, :, columns]))
        plan.h = h.reshape(batch, self.n_output)
        plan.c = c.reshape(batch, n)
        plan.tmp = self.temporary("tmp", (batch, self.width))
        plan.ig = self.temporary("ig", (batch, 2 * n))  # [f * c | i * g]
        plan.ptmp = self.temporary("ptmp", (batch, n))  # tanh(c), then o * tanh(c) before a projection
        return plan

    def _stacked_plan(self, key, x, out, columns, reverse, h, c) -> _Plan:
        steps, batch = x.shape[0], x.shape[1]
        n, n_out, n_in = self.n, self.n_output, self.input_to.shape[0]
        plan = _Plan()
        plan.key = key
        plan.xh = self.temporary("xh", (steps + 1, batch, n_out + n_in + 1))
        plan.xh[..., n_out + n_in] = 1
        rows = self.temporary("rows", (2, batch, 5 * n))  # [c | g | f | i | o], alternating
        plan.rows = rows
        # matmul where the gates' block of a row is not one run (a batch of several)
        plan.product = dot_into if batch == 1 else np.matmul
        plan.steps = []
        for k in range(steps):
            row, following = rows[k % 2], rows[(k + 1) % 2]
            plan.steps.append((plan.xh[k], row[:, n:], row[:, 2 * n:], row[:, 2 * n:4 * n], row[:, :2 * n],
                               row[:, 4 * n:], following[:, :n], plan.xh[k + 1, :, :n_out]))
        plan.order = slice(None, None, -1) if reverse else slice(None)  # step k's time index
        plan.hs = (out[plan.order][:, :, columns], plan.xh[1:, :, :n_out])
        plan.h = h.reshape(batch, n_out)
        plan.c = c.reshape(batch, n)
        plan.tmp = None  # the recurrent product goes straight into the gates
        plan.ig = self.temporary("ig", (batch, 2 * n))  # [f * c | i * g]
        plan.ptmp = self.temporary("ptmp", (batch, n))  # tanh(c)
        return plan

    def project_inputs(self, plan: _Plan, x: np.ndarray, aux: np.ndarray | None) -> None:
        if plan.xh is None:
            return super().project_inputs(plan, x, aux)
        n_out, n_in = self.n_output, self.input_to.shape[0]
        np.copyto(plan.xh[:-1, :, n_out : n_out + n_in], x[plan.order])  # each step's input

    def loop(self, plan: _Plan, params: LstmParams) -> None:
        """The time loop in nine calls a step (plus the clips and projection when present),
        eight with stacked weights (a step's first item is then its row ``[h | x_t | 1]``,
        else its share of the input product)."""
        dot, matmul, add, multiply, tanh = dot_into, np.matmul, np.add, np.multiply, np.tanh
        cell_clip, proj_clip = params.cell_clip, params.proj_clip
        recurrent, tmp, products, act = self.recurrent, plan.tmp, plan.ig, plan.ptmp
        fc, ig = products[:, :self.n], products[:, self.n:]
        projection, projection_bias = self.projection, self.projection_bias
        half = _HALF
        stacked = plan.xh is not None
        if stacked:
            product, weights = plan.product, self.stacked
            np.copyto(plan.xh[0, :, :self.n_output], plan.h)  # the first step's h
        np.copyto(plan.rows[0, :, :self.n], plan.c)  # the first step's c
        prev = plan.h
        c_new = None
        for source, active, sig, fi, cg, o, c_new, h in plan.steps:
            if stacked:
                product(source, weights, active)
            else:
                dot(prev, recurrent, tmp)
                add(source, tmp, active)
            tanh(active, active)
            multiply(sig, half, sig)  # sigmoid(z) = 0.5 + 0.5 tanh(z / 2)
            add(sig, half, sig)
            multiply(fi, cg, products)
            add(fc, ig, c_new)
            if cell_clip > 0:
                _clip(c_new, cell_clip)
            tanh(c_new, act)
            if projection is None:
                multiply(o, act, h)
            else:
                multiply(o, act, act)
                matmul(act, projection, h)
                if projection_bias is not None:
                    add(h, projection_bias, h)
                _clip(h, proj_clip)
            prev = h
        if stacked:
            np.copyto(*plan.hs)  # every step's h into the output, in time order
        np.copyto(plan.h, prev)
        np.copyto(plan.c, c_new)


def _gate_scratch(direction: LstmDirection, steps: int, batch: int) -> np.ndarray:
    """Working memory for a direction's input projections, ``[chunk, batch, G * n_cell]``
    (see :func:`plan_chunks`); an empty array when its fast path makes each step's gates
    with one product of its own row ``[h | x_t | 1]`` (``TanhLstm.stacked``) and reads none."""
    width = direction.bias_width()
    if getattr(direction.fast, "stacked", None) is not None:
        n_in = direction.fast.input_to.shape[0]
        plan_chunks(direction, steps, batch, direction.n_output + n_in + 1)  # the chunks of its rows
        return np.empty((0, batch, width), FLOAT)
    return sequence_scratch(direction, steps, batch, width)


def _fast_lstm(direction: LstmDirection, w: LstmWeights) -> FastLstm:
    """The fast path for a direction (see :meth:`LstmDirection.fast_path`)."""
    options = direction.kernel.options
    if options.fused_activation_function == TANH and not direction.cifg and not direction.peephole:
        return TanhLstm(direction, w)
    return FastLstm(direction, w)


# ----------------------------------------------------------------------------- hybrid LSTM


@dataclass
class HybridLstmWeights(LstmWeights):
    """A hybrid direction's weights: the int8 matrices as exact float64 matmul operands, each
    column's weight scale beside them (a gate's block shares its tensor's one scale), the
    peephole vectors already dequantized (LiteRT recovers them so, in float32)."""

    input_scale: np.ndarray | None = None  # [G * n_cell] float32
    aux_scale: np.ndarray | None = None
    recurrent_scale: np.ndarray | None = None
    projection_scale: np.ndarray | None = None  # [n_output]


class HybridLstmDirection(LstmDirection):
    """One direction of a dynamic-range LSTM (int8 weights with one scale each, float32
    activations, biases, layer-norm coefficients and states), as LiteRT's EvalHybrid.

    Each gate starts from its bias (zero with layer norm), then adds, in this order, one term per
    weight matrix: the vector it multiplies (the input, the aux input, the output state ``h``)
    quantized per batch row to int8 (symmetrically, or with a zero point under
    ``asymmetric_quantize_inputs``), its exact integer dot product with the weights, as float32
    times ``row_scale * weight_scale``. Then the peephole term (int8 weights times their scale,
    times ``c``), layer norm and activations as in the float LSTM. The projection quantizes
    ``o * act(c)`` the same way and adds its terms to the projection bias. Each addition rounds
    to float32 as LiteRT's does; the input terms of every step are computed at once."""

    def __init__(self, kernel: Kernel, ops: LstmOperands, asymmetric: bool) -> None:
        super().__init__(kernel, ops, diagonal=False)
        self.quantize = asymmetric_quantize if asymmetric else symmetric_quantize

    def prepare(self, ins: Sequence[TensorInfo | None], n_input: int, batch: int, n_aux: int | None) -> None:
        self.scales = self._check_types(ins)
        super().prepare(ins, n_input, batch, n_aux)

    def _check_types(self, ins) -> dict[int, np.float32]:
        """int8 weights with one scale and zero point 0 (returns the scales by input index);
        everything else float32."""
        o, fail = self.ops, self.kernel.fail
        quantized = [*o.input_to, *o.recurrent, *o.peephole, o.projection, *o.aux]
        scales = {}
        for index in quantized:
            t = _get(ins, index)
            if t is None:
                continue
            q = t.quantization
            if t.dtype != np.int8 or q is None or q.scale is None or len(q.scale) != 1:
                got = "no scale" if q is None or q.scale is None or len(q.scale) == 0 else f"{len(q.scale)} scales"
                raise fail(f"hybrid LSTM weights {t.name!r} (input {index}) must be int8 with one scale"
                           f" (per-tensor), got {t.dtype.name} with {got}")
            if q.zero_point is not None and np.any(np.asarray(q.zero_point) != 0):
                raise fail(f"hybrid LSTM weights {t.name!r} (input {index}) must be symmetric (zero point 0)")
            scales[index] = np.float32(q.scale[0])
        floats = [0, *o.bias, o.projection_bias, *o.layer_norm, o.output_state, o.cell_state]
        for index in floats:
            t = _get(ins, index)
            if t is not None and t.dtype != FLOAT:
                raise fail(f"{t.name!r} (input {index}) is {t.dtype.name}; a hybrid LSTM needs float32 there")
        return scales

    def stack(self, ins: Sequence) -> HybridLstmWeights:
        value = lambda i: None if _get(ins, i) is None else np.asarray(getattr(ins[i], "value", ins[i]))  # noqa: E731
        gates = range(1, 4) if self.cifg else range(4)
        o, n = self.ops, self.n_cell

        def matrix(idx):  # the gates' int8 blocks [G * n_cell, depth], transposed, and column scales
            ints = np.concatenate([value(idx[k]) for k in gates], axis=0).astype(np.float64)
            return np.ascontiguousarray(ints.T), np.repeat(np.array([self.scales[idx[k]] for k in gates], FLOAT), n)

        def recovered(i):  # LiteRT's VectorScalarMultiply: scale * int8, in float32
            return None if _get(ins, i) is None else self.scales[i] * value(i).astype(FLOAT)

        floats = lambda i: None if _get(ins, i) is None else value(i).astype(FLOAT)  # noqa: E731
        input_to, input_scale = matrix(o.input_to)
        recurrent, recurrent_scale = matrix(o.recurrent)
        aux, aux_scale = matrix(o.aux) if self.use_aux else (None, None)
        projection = projection_scale = None
        if _get(ins, o.projection) is not None:
            projection = np.ascontiguousarray(value(o.projection).astype(np.float64).T)
            projection_scale = np.full(self.n_output, self.scales[o.projection], FLOAT)
        return HybridLstmWeights(
            input_to=input_to, aux=aux, recurrent=recurrent,
            bias=np.concatenate([floats(o.bias[k]) for k in gates]),
            peephole=tuple(recovered(i) for i in o.peephole),
            layer_norm=np.stack([floats(o.layer_norm[k]) for k in gates]) if self.layer_norm else None,
            projection=projection, projection_bias=floats(o.projection_bias),
            input_scale=input_scale, aux_scale=aux_scale, recurrent_scale=recurrent_scale,
            projection_scale=projection_scale,
        )

    def product(self, rows: np.ndarray, weights: np.ndarray, column_scale: np.ndarray) -> np.ndarray:
        """LiteRT's hybrid MatrixBatchVectorMultiplyAccumulate term for each row of ``rows``
        [n, depth]: the row quantized, its exact dot products with the int8 ``weights`` as
        float32, times ``row_scale * weight_scale`` (that product rounded first, as LiteRT)."""
        q, scale, offset = self.quantize(rows)
        dot = ((q - offset[:, None]) @ weights).astype(FLOAT)
        return dot * (scale[:, None] * column_scale[None, :])

    def run(self, ins: Sequence, x: np.ndarray, aux: np.ndarray | None, out: np.ndarray, columns: slice,
            reverse: bool, params: "LstmParams", gates: np.ndarray, outs: Sequence) -> None:
        w = self.weights if self.weights is not None else self.stack(ins)
        h = ins[self.ops.output_state].reshape(-1, self.n_output)
        c = ins[self.ops.cell_state].reshape(-1, self.n_cell)
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0 or batch == 0:
            return
        flat = gates.reshape(steps * batch, -1)
        flat[...] = 0 if w.layer_norm is not None else w.bias  # with layer norm the bias comes after it
        flat += self.product(x.reshape(steps * batch, -1), w.input_to, w.input_scale)
        if w.aux is not None:
            flat += self.product(aux.reshape(steps * batch, -1), w.aux, w.aux_scale)
        with np.errstate(over="ignore"):
            for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
                g = gates[t]
                g += self.product(h, w.recurrent, w.recurrent_scale)
                out[t, :, columns] = self.step(g, h, c, w, params)

    def project(self, output: np.ndarray, h: np.ndarray, w: LstmWeights) -> None:
        h[...] = 0 if w.projection_bias is None else w.projection_bias
        h += self.product(output, w.projection, w.projection_scale)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM")
class UnidirectionalSequenceLstm(Kernel):
    """An LSTM over a sequence [batch, time, input] (or [time, batch, input] when time_major):
    20 inputs (24 with layer-norm coefficients), one output [.., n_output]."""

    foldable = False  # updates its state tensors

    def prepare(self, ins):
        self.expect_inputs(ins, 20, 24)
        if len(ins) not in (20, 24):
            raise self.fail(f"expects 20 or 24 inputs, got {len(ins)}")
        self.params = _lstm_params(self)
        self.time_major = bool(self.options.time_major)
        diagonal = bool(getattr(self.options, "diagonal_recurrent_tensors", False))
        operands = _lstm_operands(1, 18, 20 if len(ins) == 24 else -1)
        if _is_hybrid(ins, operands.input_to[1]):
            if diagonal:
                raise self.fail("a hybrid (int8-weight) LSTM cannot have diagonal recurrent weights")
            asymmetric = bool(getattr(self.options, "asymmetric_quantize_inputs", False))
            self.lstm = HybridLstmDirection(self, operands, asymmetric)
        else:
            _check_float(self, ins)
            self.lstm = LstmDirection(self, operands, diagonal)
        steps, batch, n_input = _sequence_dims(self, ins[0], self.time_major)
        self.lstm.prepare(ins, n_input, batch, None)
        self.gates = _gate_scratch(self.lstm, steps, batch)
        return [Spec(_sequence_shape(steps, batch, self.lstm.n_output, self.time_major), FLOAT)]

    def eval(self, ins, outs):
        x = _time_major(ins[0], self.time_major)
        out = _time_major(outs[0], self.time_major)
        run_sequence(self.lstm, ins, x, None, out, slice(None), False, self.params, self.gates, outs)


@register("LSTM")
class Lstm(Kernel):
    """One LSTM step (the full kernel): input [batch, input] -> output [batch, n_output],
    states updated in place. The basic kernel (kernel_type 1) is not implemented."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 20, 24)
        if len(ins) not in (20, 24):
            raise self.fail(f"expects 20 or 24 inputs, got {len(ins)}")
        if self.options is not None and self.options.kernel_type != 0:
            raise self.fail(f"LSTM kernel type {self.options.kernel_type} (BASIC) is not supported; only FULL")
        _check_float(self, ins)
        self.params = _lstm_params(self)
        x = ins[0]
        if x.ndim != 2:
            raise self.fail(f"input {x.name!r} must have rank 2, got shape {x.shape}")
        self.lstm = LstmDirection(self, _lstm_operands(1, 18, 20 if len(ins) == 24 else -1))
        batch = int(x.shape[0])
        self.lstm.prepare(ins, int(x.shape[1]), batch, None)
        self.gates = _gate_scratch(self.lstm, 1, batch)
        return [Spec((batch, self.lstm.n_output), FLOAT)]

    def eval(self, ins, outs):
        self.lstm.run(ins, ins[0][None], None, outs[0][None], slice(None), False, self.params, self.gates, outs)


class _BidirectionalSequence(Kernel):
    """Shared by the bidirectional LSTM and RNN: the output count, the aux input, the output
    specs and the run of both directions. Subclasses' prepare sets ``fw`` and ``bw`` (directions
    whose ``run`` takes the same arguments), ``setting`` (what ``run`` is given after
    ``reverse``), ``scratch`` (one buffer per direction) and ``fw_width`` (forward outputs)."""

    foldable = False
    aux_index: int  # of the aux input

    def check_output_count(self) -> None:
        if len(self.node.outputs) != (1 if self.merge else 2):
            raise self.fail(f"expects {1 if self.merge else 2} outputs (merge_outputs={self.merge}), got {len(self.node.outputs)}")

    def aux_width(self, ins, steps: int, batch: int) -> int | None:
        """The aux input's depth (None without one), its steps and batch checked against the input's."""
        aux = ins[self.aux_index]
        if aux is None:
            return None
        a_steps, a_batch, n_aux = _sequence_dims(self, aux, self.time_major)
        if (a_steps, a_batch) != (steps, batch):
            raise self.fail(f"aux input {aux.name!r} of shape {aux.shape} does not match the input's {ins[0].shape}")
        return n_aux

    def output_specs(self, steps: int, batch: int, fw_n: int, bw_n: int) -> list[Spec]:
        if self.merge:
            return [Spec(_sequence_shape(steps, batch, fw_n + bw_n, self.time_major), FLOAT)]
        return [Spec(_sequence_shape(steps, batch, fw_n, self.time_major), FLOAT),
                Spec(_sequence_shape(steps, batch, bw_n, self.time_major), FLOAT)]

    def eval(self, ins, outs):
        tm = lambda a: None if a is None else _time_major(a, self.time_major)  # noqa: E731
        x, aux = tm(ins[0]), tm(ins[self.aux_index])
        fw_out = tm(outs[0])
        bw_out = fw_out if self.merge else tm(outs[1])
        bw_x, shared_aux = (aux, None) if self.bw_from_aux else (x, aux)
        fw_scratch, bw_scratch = self.scratch
        run_sequence(self.fw, ins, x, shared_aux, fw_out, slice(0, self.fw_width), False, self.setting, fw_scratch, outs)
        bw_cols = slice(self.fw_width, None) if self.merge else slice(None)
        run_sequence(self.bw, ins, bw_x, shared_aux, bw_out, bw_cols, True, self.setting, bw_scratch, outs)


@register("BIDIRECTIONAL_SEQUENCE_LSTM")
class BidirectionalSequenceLstm(_BidirectionalSequence):
    """Two LSTMs over one sequence, the backward one from the last step to the first: 48
    inputs (forward weights 1-17, backward 18-34, states 35-38, aux input 39 and its weights
    40-47), outputs forward and backward, or one concatenated under merge_outputs.

    An aux input with aux weights feeds both directions besides the input; an aux input
    without aux weights is the backward direction's own input (LiteRT's "non-stacking" mode).
    """

    aux_index = 39

    def prepare(self, ins):
        self.expect_inputs(ins, 48)
        self.setting = _lstm_params(self)
        o = self.options
        self.time_major, self.merge = bool(o.time_major), bool(o.merge_outputs)
        self.check_output_count()
        aux = ins[39]
        has_aux_weights = any(ins[i] is not None for i in range(40, 48))
        self.bw_from_aux = aux is not None and not has_aux_weights
        fw_ops, bw_ops = _lstm_operands(1, 35, aux=40), _lstm_operands(18, 37, aux=44)
        if _is_hybrid(ins, fw_ops.input_to[1]):
            # LiteRT's EvalHybrid once per direction, as the unidirectional hybrid LSTM
            asymmetric = bool(getattr(o, "asymmetric_quantize_inputs", False))
            if aux is not None and aux.dtype != FLOAT:
                raise self.fail(f"aux input {aux.name!r} is {aux.dtype.name}; a hybrid LSTM needs float32 there")
            self.fw = HybridLstmDirection(self, fw_ops, asymmetric)
            self.bw = HybridLstmDirection(self, bw_ops, asymmetric)
        else:
            _check_float(self, ins)
            self.fw, self.bw = LstmDirection(self, fw_ops), LstmDirection(self, bw_ops)
        steps, batch, n_input = _sequence_dims(self, ins[0], self.time_major)
        n_aux = self.aux_width(ins, steps, batch)
        _check_backward_input(self, aux, n_input, self.bw_from_aux)
        self.fw.prepare(ins, n_input, batch, None if self.bw_from_aux else n_aux)
        self.bw.prepare(ins, n_input, batch, None if self.bw_from_aux else n_aux)
        if (self.bw.n_cell, self.bw.n_output) != (self.fw.n_cell, self.fw.n_output):
            # LiteRT checks the backward weights against the forward sizes.
            raise self.fail(
                f"the backward LSTM has {self.bw.n_cell} cells and {self.bw.n_output} outputs, the forward one"
                f" {self.fw.n_cell} and {self.fw.n_output}: LiteRT requires them equal"
            )
        self.scratch = (_gate_scratch(self.fw, steps, batch), _gate_scratch(self.bw, steps, batch))
        self.fw_width = self.fw.n_output
        return self.output_specs(steps, batch, self.fw.n_output, self.bw.n_output)


# ----------------------------------------------------------------------------- RNN


class RnnDirection:
    """One basic RNN direction, ``h = act(W x + W_aux aux + W_h h + b)``: weights [units,
    input], recurrent weights [units, units], bias [units], hidden state [batch, units]."""

    def __init__(self, kernel: Kernel, weights: int, recurrent: int, bias: int, state: int, aux: int = -1) -> None:
        self.kernel, self.indices = kernel, (weights, recurrent, bias, state, aux)

    def prepare(self, ins, n_input: int, batch: int, n_aux: int | None) -> None:
        weights, recurrent, bias, state, aux = self.indices
        fail = self.kernel.fail
        w = _get(ins, weights)
        if w is None or w.ndim != 2:
            raise fail(f"the weights (input {weights}) must have rank 2")
        self.units = int(w.shape[0])
        expect = {weights: (self.units, n_input), recurrent: (self.units, self.units), bias: (self.units,)}
        self.use_aux = n_aux is not None and _get(ins, aux) is not None
        if self.use_aux:
            expect[aux] = (self.units, n_aux)
        for index, shape in expect.items():
            t = _get(ins, index)
            if t is None or tuple(t.shape) != shape:
                got = "missing" if t is None else f"shape {t.shape}"
                raise fail(f"input {index} must have shape {shape}, got {got}")
        _check_state(self.kernel, ins, state, batch * self.units, "hidden state")
        used = [weights, recurrent, bias] + ([aux] if self.use_aux else [])
        self.stacked = self.stack(ins) if all(ins[i].value is not None for i in used) else None

    def stack(self, ins) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        value = lambda i: np.asarray(getattr(ins[i], "value", ins[i]), FLOAT)  # noqa: E731
        weights, recurrent, bias, _, aux = self.indices
        return (np.ascontiguousarray(value(weights).T), np.ascontiguousarray(value(recurrent).T), value(bias),
                np.ascontiguousarray(value(aux).T) if self.use_aux else None)

    def run(self, ins, x: np.ndarray, aux: np.ndarray | None, out: np.ndarray, columns: slice, reverse: bool,
            activation: int, pre: np.ndarray, outs: Sequence) -> None:
        """``x``, ``aux``, ``out`` are [time, batch, ...] views; ``pre`` is [time, batch, units]
        scratch for the input projections (``outs``, the op's outputs, as for the LSTM: unused)."""
        w, w_h, b, w_aux = self.stacked if self.stacked is not None else self.stack(ins)
        h = ins[self.indices[3]].reshape(-1, self.units)
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0 or batch == 0:
            return
        flat = pre.reshape(steps * batch, -1)
        np.matmul(x.reshape(steps * batch, -1), w, out=flat)
        flat += b
        if w_aux is not None:
            flat += aux.reshape(steps * batch, -1) @ w_aux
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            g = pre[t]
            g += h @ w_h
            _activate(activation, g, g)
            h[...] = g
            out[t, :, columns] = g


def _hybrid_scales(kernel: Kernel, ins, weights: Sequence[int], floats: Sequence[int], op: str) -> dict[int, np.float32]:
    """The scale of each int8 weight operand of a hybrid RNN or SVDF (one scale, zero point
    0), by input index; the ``floats`` operands must be float32 (or absent)."""
    scales = {}
    for index in weights:
        t = ins[index]
        q = t.quantization
        if t.dtype != np.int8 or q is None or q.scale is None or len(q.scale) != 1:
            raise kernel.fail(f"hybrid {op} weights {t.name!r} (input {index}) must be int8 with one scale")
        if q.zero_point is not None and np.any(np.asarray(q.zero_point) != 0):
            raise kernel.fail(f"hybrid {op} weights {t.name!r} (input {index}) must be symmetric (zero point 0)")
        scales[index] = np.float32(q.scale[0])
    for index in floats:
        t = ins[index]
        if t is not None and t.dtype != FLOAT:
            raise kernel.fail(f"{t.name!r} (input {index}) is {t.dtype.name}; a hybrid {op} needs float32 there")
    return scales


class HybridRnnDirection(RnnDirection):
    """A basic RNN direction with int8 weights (one scale each, zero point 0) and float32
    input, bias and state, as LiteRT's hybrid RnnBatchStep: ``h = act(b + T(x, W) + T(h, W_h))``
    where each term ``T(v, W)`` quantizes every batch row of ``v`` to int8 (symmetrically, or
    with a zero point under ``asymmetric_quantize_inputs``), takes its exact integer dot
    products with ``W`` and scales them in float32 by ``row_scale * weight_scale`` (that product
    rounded first). Each addition rounds to float32 in this order."""

    def __init__(self, kernel: Kernel, weights: int, recurrent: int, bias: int, state: int, asymmetric: bool) -> None:
        super().__init__(kernel, weights, recurrent, bias, state)
        self.asymmetric = asymmetric

    def prepare(self, ins, n_input: int, batch: int, n_aux: int | None) -> None:
        weights, recurrent, bias, state, _ = self.indices
        self.scales = _hybrid_scales(self.kernel, ins, (weights, recurrent), (0, bias, state), "RNN")
        super().prepare(ins, n_input, batch, n_aux)

    def stack(self, ins) -> tuple[np.ndarray, np.ndarray, np.ndarray, None]:
        """The int8 matrices transposed, as exact float64 matmul operands, and the bias."""
        value = lambda i: np.asarray(getattr(ins[i], "value", ins[i]))  # noqa: E731
        weights, recurrent, bias, _, _ = self.indices
        return (np.ascontiguousarray(value(weights).T, np.float64), np.ascontiguousarray(value(recurrent).T, np.float64),
                value(bias).astype(FLOAT), None)

    def _term(self, rows: np.ndarray, weights: np.ndarray, scale: np.float32) -> np.ndarray:
        centered, row_scale = quantize_centered(rows, self.asymmetric)
        dot = (centered.astype(np.float64) @ weights).astype(FLOAT)  # exact integers, rounded once
        return dot * (row_scale * scale)[:, None]

    def run(self, ins, x: np.ndarray, aux: np.ndarray | None, out: np.ndarray, columns: slice, reverse: bool,
            activation: int, pre: np.ndarray, outs: Sequence) -> None:
        w, w_h, b, _ = self.stacked if self.stacked is not None else self.stack(ins)
        weights, recurrent = self.indices[:2]
        h = ins[self.indices[3]].reshape(-1, self.units)
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0 or batch == 0:
            return
        flat = pre.reshape(steps * batch, -1)
        flat[...] = b  # rows are quantized one by one, so every step's input term at once
        flat += self._term(x.reshape(steps * batch, -1), w, self.scales[weights])
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            g = pre[t]
            g += self._term(h, w_h, self.scales[recurrent])
            _activate(activation, g, g)
            h[...] = g
            out[t, :, columns] = g


def _rnn_activation(kernel: Kernel) -> int:
    if kernel.options is None:
        raise kernel.fail("missing options")
    return _check_activation(kernel, kernel.options.fused_activation_function)


@register("RNN")
class Rnn(Kernel):
    """One step of a basic RNN: input [batch, input], weights, recurrent weights, bias, hidden
    state (a variable tensor) -> output [batch, units]. Float32, or hybrid: int8 weights
    (:class:`HybridRnnDirection`)."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 5)
        if _is_hybrid(ins, 1):
            self.rnn = HybridRnnDirection(self, 1, 2, 3, 4, bool(getattr(self.options, "asymmetric_quantize_inputs", False)))
        else:
            _check_float(self, ins)
            self.rnn = RnnDirection(self, 1, 2, 3, 4)
        self.activation = _rnn_activation(self)
        x = ins[0]
        if x.ndim != 2:
            raise self.fail(f"input {x.name!r} must have rank 2, got shape {x.shape}")
        self.rnn.prepare(ins, int(x.shape[1]), int(x.shape[0]), None)
        self.pre = scratch((1, x.shape[0], self.rnn.units), FLOAT)
        return [Spec((int(x.shape[0]), self.rnn.units), FLOAT)]

    def eval(self, ins, outs):
        self.rnn.run(ins, ins[0][None], None, outs[0][None], slice(None), False, self.activation, self.pre, outs)


@register("UNIDIRECTIONAL_SEQUENCE_RNN")
class UnidirectionalSequenceRnn(Kernel):
    """A basic RNN over a sequence [batch, time, input] (time-major: [time, batch, input])."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 5)
        _check_float(self, ins)
        self.activation = _rnn_activation(self)
        self.time_major = bool(self.options.time_major)
        steps, batch, n_input = _sequence_dims(self, ins[0], self.time_major)
        self.rnn = RnnDirection(self, 1, 2, 3, 4)
        self.rnn.prepare(ins, n_input, batch, None)
        self.pre = sequence_scratch(self.rnn, steps, batch, self.rnn.units)
        return [Spec(_sequence_shape(steps, batch, self.rnn.units, self.time_major), FLOAT)]

    def eval(self, ins, outs):
        x, out = _time_major(ins[0], self.time_major), _time_major(outs[0], self.time_major)
        run_sequence(self.rnn, ins, x, None, out, slice(None), False, self.activation, self.pre, outs)


@register("BIDIRECTIONAL_SEQUENCE_RNN")
class BidirectionalSequenceRnn(_BidirectionalSequence):
    """Two basic RNNs over one sequence, the backward one reversed in time: 12 inputs (input;
    forward weights, recurrent weights, bias, hidden state; the same backward; aux input and
    its forward and backward weights), outputs forward and backward, or one under
    merge_outputs. The aux input behaves as in BIDIRECTIONAL_SEQUENCE_LSTM."""

    aux_index = 9

    def prepare(self, ins):
        self.expect_inputs(ins, 12)
        _check_float(self, ins)
        self.setting = _rnn_activation(self)
        self.time_major, self.merge = bool(self.options.time_major), bool(self.options.merge_outputs)
        self.check_output_count()
        steps, batch, n_input = _sequence_dims(self, ins[0], self.time_major)
        aux = ins[9]
        self.bw_from_aux = aux is not None and ins[10] is None and ins[11] is None
        n_aux = self.aux_width(ins, steps, batch)
        self.fw = RnnDirection(self, 1, 2, 3, 4, aux=10)
        self.bw = RnnDirection(self, 5, 6, 7, 8, aux=11)
        _check_backward_input(self, aux, n_input, self.bw_from_aux)
        self.fw.prepare(ins, n_input, batch, None if self.bw_from_aux else n_aux)
        self.bw.prepare(ins, n_input, batch, None if self.bw_from_aux else n_aux)
        self.scratch = tuple(sequence_scratch(d, steps, batch, d.units) for d in (self.fw, self.bw))
        self.fw_width = self.fw.units
        return self.output_specs(steps, batch, self.fw.units, self.bw.units)



# ----------------------------------------------------------------------------- SVDF


@register("SVDF")
class Svdf(Kernel):
    """One step of a singular value decomposition filter (LiteRT's svdf.cc): input [batch,
    input], weights_feature [filters, input], weights_time [filters, memory], optional bias
    [units], state [batch, filters * memory] (a variable tensor) -> output [batch, units], with
    ``filters = units * rank``. Each step shifts every filter's memory one place left, writes
    the newest feature ``weights_feature @ x`` at its end, dots each filter's memory with its
    time weights, sums the ``rank`` filters of each unit, adds the bias and applies the fused
    activation. Hybrid form: int8 weights (one scale each, zero point 0) with float32 input,
    bias and state; the feature product quantizes each input row to int8 (symmetric, or with a
    zero point under ``asymmetric_quantize_inputs``) and the time weights are dequantized to
    float32, as LiteRT does."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 5)
        x, feature, time, bias = ins[0], ins[1], ins[2], ins[3]
        if self.options is None:
            raise self.fail("missing options")
        self.activation = _check_activation(self, int(self.options.fused_activation_function))
        self.rank = int(self.options.rank)
        self.hybrid = _is_hybrid(ins, 1)
        self.asymmetric = bool(getattr(self.options, "asymmetric_quantize_inputs", False))
        if self.hybrid:
            scales = _hybrid_scales(self, ins, (1, 2), (0, 3, 4), "SVDF")
            self.scales = (scales[1], scales[2])
        else:
            _check_float(self, ins)
        if x.ndim != 2 or feature.ndim != 2 or time.ndim != 2:
            raise self.fail(f"input {x.shape}, weights_feature {feature.shape} and weights_time {time.shape} must "
                            "have rank 2")
        batch, filters, self.memory = int(x.shape[0]), int(feature.shape[0]), int(time.shape[1])
        if self.rank <= 0 or filters % self.rank:
            raise self.fail(f"rank {self.rank} must be positive and divide the {filters} filters")
        self.units = filters // self.rank
        if feature.shape[1] != x.shape[1] or time.shape[0] != filters:
            raise self.fail(f"weights_feature {feature.shape} must be [filters, {x.shape[1]}] and weights_time "
                            f"{time.shape} [{filters}, memory]")
        if bias is not None and tuple(bias.shape) != (self.units,):
            raise self.fail(f"the bias {bias.shape} must have one value per unit ({self.units})")
        _check_state(self, ins, 4, batch * filters * self.memory, "state")
        if ins[4].ndim != 2 or ins[4].shape[0] != batch:
            raise self.fail(f"the state {ins[4].shape} must be [{batch}, {filters * self.memory}]")
        self.weights = self._weights(feature.value, time.value) if feature.value is not None and \
            time.value is not None else None
        return [Spec((batch, self.units), FLOAT)]

    def _weights(self, feature: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The feature weights transposed (exact float64 integers when hybrid) and the time
        weights as float32 (dequantized when hybrid: ``int8 * scale`` in float32)."""
        if self.hybrid:
            return (np.ascontiguousarray(np.asarray(feature).T, np.float64),
                    np.asarray(time).astype(FLOAT) * self.scales[1])
        return np.ascontiguousarray(np.asarray(feature, FLOAT).T), np.asarray(time, FLOAT)

    def eval(self, ins, outs):
        x, bias, out = ins[0], ins[3], outs[0]
        feature, time = self.weights if self.weights is not None else self._weights(ins[1], ins[2])
        batch = x.shape[0]
        state = ins[4].reshape(batch, -1, self.memory)  # [batch, filters, memory], in place
        if self.memory > 1:
            state[:, :, :-1] = state[:, :, 1:].copy()
        if self.hybrid:
            centered, row_scale = quantize_centered(x, self.asymmetric)
            dot = (centered.astype(np.float64) @ feature).astype(FLOAT)  # exact integers, rounded once
            state[:, :, -1] = dot * (row_scale * self.scales[0])[:, None]
        else:
            state[:, :, -1] = x @ feature
        per_filter = np.einsum("bfm,fm->bf", state, time, dtype=FLOAT)
        np.sum(per_filter.reshape(batch, self.units, self.rank), axis=2, dtype=FLOAT, out=out)
        if bias is not None:
            out += bias
        _activate(self.activation, out, out)
