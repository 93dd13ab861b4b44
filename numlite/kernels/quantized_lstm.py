"""The full-integer ("8x8_16") UNIDIRECTIONAL_SEQUENCE_LSTM and LSTM, as LiteRT's integer kernel.

Tensors: int8 input, output and output state ``h`` (the state shares the output's scale and
zero point), int8 weights (one scale each, symmetric), int32 biases, an int16 cell state ``c``
whose scale is a power of two ``2**cell_scale``, and five *intermediate* tensors on the node:
the four gates' matmul outputs (their scales matter only with layer normalisation) and the
hidden value ``o * tanh(c)`` (scale ``s_hid``, zero point ``zp_hid``).

Each gate is computed in int16, Q3.12 without layer norm (``s_gate = 2**-12``), else at its
intermediate's scale::

    acc  = clamp16(MBQM(x . W + bias - zp_x * rowsum(W), eff_x))      (bias here only without LN)
    gate = clamp16(acc + MBQM(h . R - zp_h * rowsum(R), eff_h))
    gate = clamp16(gate + MBQM(w_peephole * c, eff_c))                (peephole LSTMs)
    gate = LayerNorm(gate; coefficients, bias)                         (layer-norm LSTMs, -> Q3.12)

``eff_x = s_W * s_x / s_gate`` and ``eff_h = s_R * s_h / s_gate`` are float32 expressions turned
into fixed-point multipliers (``MBQM`` is LiteRT's MultiplyByQuantizedMultiplier, double
rounding, see ``numlite.kernels.fixed_point``); LiteRT precomputes the zero-point row sums.
Input, forget and output gates then go through gemmlowp's int16 fixed-point ``logistic``
(Q3.12 -> Q0.15), the cell gate through its ``tanh``, and::

    c = clamp16(RDBPOT(f * c, 15) + RDBPOT(i * g, 30 + cell_scale))    (i = 1 - f under CIFG)
    c = clip(c, quantized cell_clip)
    o's peephole sees the new c
    hid = clamp8(MBQM(o * tanh(c), 2**-15 / s_hid * 2**-15) + zp_hid)  (tanh of c read as Q(15 + cell_scale))
    h = clamp8(MBQM(hid . P + b_P - zp_hid * rowsum(P), s_P * s_hid / s_h) + zp_h), clipped
                                                                       (projection; else h = hid)

RDBPOT is gemmlowp's rounding division by a power of two. The integer layer norm is LiteRT's
ApplyLayerNorm: mean and variance with 10 extra bits, ``1 / sqrt(variance)`` as a multiplier
(GetInvSqrtQuantizedMultiplierExp), the variance floored by a guard of ``10000 * s_coef``.

gemmlowp's int16 ``logistic`` and ``tanh`` are exact functions of one int16, so they are
evaluated once on all 65536 inputs (a vectorised emulation of gemmlowp's int16 arithmetic, with
its wrapping additions and saturating products) and then read as lookup tables. The input
terms of every time step are one matmul; the time loop then does one recurrent matmul per step.

Not supported (clear errors): int16 activations (LiteRT's LSTM has no such kernel either),
LiteRT's 8x8_8 form (12 intermediates), diagonal recurrent weights, the BASIC LSTM kernel.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, has_scale, register
from numlite.kernels.clamp import clip_ufunc as _clip  # np.clip adds microseconds of Python a call
from numlite.kernels.fixed_point import FixedMultiplier, inv_sqrt_multiplier, quantize_multiplier
from numlite.kernels.fixed_point import multiply_by_quantized_multiplier as mbqm
from numlite.kernels.rnn import _check_state, _get, _lstm_operands, _sequence_dims, _sequence_shape, _time_major

INT8, INT16, INT32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
F32 = np.float32
GATE_SCALE = F32(2.0**-12)  # Q3.12, the gates' scale without layer normalisation
GATE_NAMES = ("input", "forget", "cell", "output")


# ----------------------------------------------------------------------------- gemmlowp, int16
# Raw int16 values held in int64 arrays; each helper returns what gemmlowp's int16 code returns.


def _wrap16(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to int16 (C++ conversion of an int result to int16_t)."""
    return ((np.asarray(x, np.int64) + 32768) & 0xFFFF) - 32768


def _trunc_div(x: np.ndarray, d: int) -> np.ndarray:
    """C++ integer division (toward zero)."""
    return np.where(x >= 0, x // d, -((-x) // d))


def _srdhm16(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int16."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = _wrap16(_trunc_div(ab + nudge, 1 << 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def _rdbpot(x: np.ndarray, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT (halves away from zero); the same for any integer width."""
    x = np.asarray(x, np.int64)
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _srmbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT on int16: saturating left shift or rounding right shift."""
    if exponent <= 0:
        return _rdbpot(x, -exponent) if exponent else np.asarray(x, np.int64)
    threshold = (1 << (15 - exponent)) - 1
    shifted = np.clip(np.asarray(x, np.int64) << exponent, -32768, 32767)
    return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, shifted))


def _constant16(raw32: int) -> int:
    """gemmlowp's fixed-point constants are written as int32 raws; int16 rounds off 16 bits."""
    return int(_rdbpot(np.int64(raw32), 16))


def _exp_on_quarter_interval16(a: np.ndarray) -> np.ndarray:
    """exp(a) for Q0.15 ``a`` in [-1/4, 0): gemmlowp's Taylor expansion around -1/8."""
    constant_term, one_third = _constant16(1895147668), _constant16(715827883)
    x = _wrap16(a + (1 << 12))  # a + 1/8
    x2 = _srdhm16(x, x)
    x3 = _srdhm16(x2, x)
    x4 = _srdhm16(x2, x2)
    x4_over_4 = _rdbpot(x4, 2)
    poly = _rdbpot(_wrap16(_srdhm16(_wrap16(x4_over_4 + x3), one_third) + x2), 1)
    return np.clip(constant_term + _srdhm16(constant_term, _wrap16(x + poly)), -32768, 32767)  # saturating add


_EXP_BARREL = {-2: 1672461947, -1: 1302514674, 0: 790015084, 1: 290630308, 2: 39332535, 3: 720401, 4: 242}


def _exp_on_negative_values16(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """exp(a) as Q0.15 for int16 ``a`` <= 0 with ``integer_bits`` integer bits."""
    fractional_bits = 15 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = _wrap16((a & (quarter - 1)) - quarter)
    result = _exp_on_quarter_interval16(_srmbpot16(a_mod_quarter_minus_quarter, integer_bits))
    remainder = _wrap16(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL.items():
        if integer_bits > exponent:
            bit = remainder & (1 << (fractional_bits + exponent))
            result = np.where(bit != 0, _srdhm16(result, _constant16(multiplier)), result)
    if integer_bits > 5:
        clamp = _constant16(-(1 << (36 - integer_bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, 32767, result)


def _newton_reciprocal16(a: np.ndarray) -> np.ndarray:
    """The Q2.13 Newton-Raphson iterate of 1 / (1 + a) (as raw int16) for Q0.15 ``a`` in [0, 1)."""
    total = np.asarray(a, np.int64) + 32767
    half_denominator = _wrap16(_trunc_div(total + np.where(total >= 0, 1, -1), 2))  # RoundingHalfSum
    x = _wrap16(_constant16(1515870810) + _srdhm16(half_denominator, _constant16(-1010580540)))
    for _ in range(3):
        one_minus = _wrap16((1 << 13) - _srdhm16(half_denominator, x))
        x = _wrap16(x + _srmbpot16(_srdhm16(x, one_minus), 2))
    return x


def gemmlowp_logistic16(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp::logistic of int16 FixedPoint<int16, integer_bits> raws -> Q0.15 raws."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, _wrap16(-a))
    exp = _exp_on_negative_values16(_wrap16(-magnitude), integer_bits)
    if_positive = _srmbpot16(_newton_reciprocal16(exp), 1)  # x / 2 read as Q1.14, to Q0.15
    result = np.where(positive, if_positive, _wrap16(32767 - if_positive))
    return np.where(a == 0, _constant16(1 << 30), result)


def gemmlowp_tanh16(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp::tanh of int16 FixedPoint<int16, integer_bits> raws -> Q0.15 raws."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    n = np.where(negative, a, _wrap16(-a))  # -|a|, wrapping as gemmlowp's negation does
    exp = _exp_on_negative_values16(n, integer_bits + 1)  # exp(2 n): one more integer bit
    t = _srmbpot16(_wrap16(_newton_reciprocal16(exp) - (1 << 13)), 2)  # (1 - e) / (1 + e)
    return np.where(a == 0, 0, np.where(negative, _wrap16(-t), t))


@functools.cache
def _table(function: str, integer_bits: int) -> np.ndarray:
    """The function on every int16 input, indexed by ``raw + 32768``."""
    raws = np.arange(-32768, 32768, dtype=np.int64)
    values = (gemmlowp_logistic16 if function == "logistic" else gemmlowp_tanh16)(raws, integer_bits)
    table = values.astype(np.int16)
    table.flags.writeable = False
    return table


def _lookup(table: np.ndarray, raw: np.ndarray) -> np.ndarray:
    return table[np.asarray(raw, np.int64) + 32768].astype(np.int64)


# ----------------------------------------------------------------------------- layer norm


def _layer_norm(v: np.ndarray, p: "_LayerNorm") -> np.ndarray:
    """LiteRT's integer ApplyLayerNorm over the last axis of ``v`` [batch, gates, n_cell]:
    mean and variance with 10 extra bits, the inverse standard deviation as a multiplier,
    then coefficients and bias, rescaled to Q3.12."""
    n = v.shape[-1]
    total = v.sum(axis=-1, keepdims=True)
    mean = _trunc_div(total * 1024, n)
    variance = (v * v).sum(axis=-1, keepdims=True) * ((1 << 20) // n) - mean * mean
    variance = _trunc_div(variance, 1 << 20)
    variance = np.where(variance < 1, p.guard[None, :, None], variance)
    inv, inv_shift = inv_sqrt_multiplier(variance)
    rescaled = mbqm(_wrap32(1024 * v - mean), inv, inv_shift).astype(np.int64)
    weighted = _wrap32(rescaled * p.coefficients + p.bias)
    weighted = _trunc_div(weighted + np.where(weighted > 0, 512, -512), 1024)
    return _clamp16(mbqm(weighted, p.mult[None, :, None], p.shift[None, :, None] + 12).astype(np.int64))


class _LayerNorm:
    """One integer LSTM's layer-norm parameters, gates stacked: coefficients and biases
    [G, n_cell], multipliers, shifts and variance guards [G]."""

    def __init__(self, coefficients, bias, mult, shift, guard) -> None:
        self.coefficients, self.bias = coefficients, bias
        self.mult, self.shift, self.guard = mult, shift, guard

    def gates(self, part: slice) -> "_LayerNorm":
        """The parameters of some of the gates."""
        return _LayerNorm(self.coefficients[part], self.bias[part], self.mult[part], self.shift[part], self.guard[part])


# ----------------------------------------------------------------------------- the kernel


INT16_LOW, INT16_HIGH, INT8_LOW, INT8_HIGH = np.int64(-32768), np.int64(32767), np.int64(-128), np.int64(127)


def _clamp16(x: np.ndarray) -> np.ndarray:
    return _clip(x, INT16_LOW, INT16_HIGH)


def _wrap32(x: np.ndarray) -> np.ndarray:
    """C++ int32 arithmetic as compiled (two's-complement wrap)."""
    return np.asarray(x, np.int64).astype(np.int32).astype(np.int64)


def _zero_point(q) -> int:
    zp = None if q is None else q.zero_point
    return int(zp[0]) if zp is not None and len(zp) else 0


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", quantized=True)
class QuantizedUnidirectionalSequenceLstm(Kernel):
    """The integer UNIDIRECTIONAL_SEQUENCE_LSTM (int8 input with a scale); float and hybrid
    LSTMs stay with numlite.kernels.rnn. The states persist across invokes like the float op's."""

    foldable = False  # updates its state tensors

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        self.expect_inputs(ins, 20, 24)
        if len(ins) not in (20, 24):
            raise self.fail(f"expects 20 or 24 inputs, got {len(ins)}")
        x = ins[0]
        if x.dtype != INT8:
            raise self.fail(
                f"input {x.name!r} is {x.dtype.name}: the integer LSTM supports int8 activations only"
                " (LiteRT's 8x8_16 kernel; int16 activations are not supported)"
            )
        if self.options is None:
            raise self.fail("missing options")
        if getattr(self.options, "diagonal_recurrent_tensors", False):
            raise self.fail("diagonal recurrent weights are not supported by the integer LSTM")
        self.ops = _lstm_operands(1, 18, 20 if len(ins) == 24 else -1)
        steps, batch, n_input = self.dims(x)
        self.one_row_at_a_time = not self.time_major  # how LiteRT steps through the batch
        self._check_shapes(ins, n_input)
        _check_state(self, ins, self.ops.output_state, batch * self.n_output, "output state")
        _check_state(self, ins, self.ops.cell_state, batch * self.n_cell, "cell state")
        self._check_types(ins)
        self._quantization(ins)
        self.weights = self._stack(ins) if self._all_constant(ins) else None
        return [Spec(self.output_shape(steps, batch), INT8)]

    def dims(self, x: TensorInfo) -> tuple[int, int, int]:
        """(steps, batch, features) of the input."""
        self.time_major = bool(self.options.time_major)
        return _sequence_dims(self, x, self.time_major)

    def output_shape(self, steps: int, batch: int) -> tuple[int, ...]:
        return _sequence_shape(steps, batch, self.n_output, self.time_major)

    def sequence(self, a: np.ndarray) -> np.ndarray:
        """A [time, batch, ...] view of the input or output."""
        return _time_major(a, self.time_major)

    # -- prepare: operands ----------------------------------------------------------------------

    def _need(self, ins, index: int, what: str) -> TensorInfo:
        t = _get(ins, index)
        if t is None:
            raise self.fail(f"the {what} (input {index}) is missing")
        return t

    def _expect(self, ins, index: int, shape: tuple[int, ...], what: str) -> TensorInfo:
        t = self._need(ins, index, what)
        if tuple(t.shape) != shape:
            raise self.fail(f"the {what} {t.name!r} (input {index}) has shape {t.shape}, expected {shape}")
        return t

    def _check_shapes(self, ins, n_input: int) -> None:
        """Sizes and which optional parts (CIFG, peephole, projection, layer norm) the op has."""
        o = self.ops
        forget = self._need(ins, o.input_to[1], "input-to-forget weights")
        recurrent = self._need(ins, o.recurrent[1], "recurrent-to-forget weights")
        for t, what in ((forget, "input-to-forget"), (recurrent, "recurrent-to-forget")):
            if t.ndim != 2:
                raise self.fail(f"{what} weights {t.name!r} must have rank 2, got shape {t.shape}")
        self.n_cell, self.n_output = n, n_out = int(forget.shape[0]), int(recurrent.shape[1])
        self.cifg = _get(ins, o.input_to[0]) is None
        if self.cifg and (_get(ins, o.recurrent[0]) is not None or _get(ins, o.bias[0]) is not None):
            raise self.fail("without input-to-input weights (CIFG) the recurrent-to-input weights and input gate bias must be omitted")
        self.gates = (1, 2, 3) if self.cifg else (0, 1, 2, 3)  # i, f, g, o present
        for k in self.gates:
            self._expect(ins, o.input_to[k], (n, n_input), f"input-to-{GATE_NAMES[k]} weights")
            self._expect(ins, o.recurrent[k], (n, n_out), f"recurrent-to-{GATE_NAMES[k]} weights")
            self._expect(ins, o.bias[k], (n,), f"{GATE_NAMES[k]} gate bias")
        peep = [_get(ins, i) for i in o.peephole]  # i, f, o
        self.peephole = peep[2] is not None
        wanted = [self.peephole and not self.cifg, self.peephole, self.peephole]
        if [p is not None for p in peep] != wanted:
            raise self.fail("peephole weights must be all present (cell-to-input only without CIFG) or all omitted")
        for k, index in enumerate(o.peephole):
            if wanted[k]:
                self._expect(ins, index, (n,), "peephole weights")
        if self.peephole and n_out > n:  # LiteRT's peephole loop runs over n_output values
            raise self.fail(f"peephole weights with more outputs ({n_out}) than cells ({n}): LiteRT reads past"
                            " the peephole weights there")
        self.projection = _get(ins, o.projection) is not None
        if self.projection:
            self._expect(ins, o.projection, (n_out, n), "projection weights")
            if _get(ins, o.projection_bias) is not None:
                self._expect(ins, o.projection_bias, (n_out,), "projection bias")
        elif _get(ins, o.projection_bias) is not None:
            raise self.fail("a projection bias needs projection weights")
        elif n_out != n:
            raise self.fail(f"without projection the output size ({n_out}) must equal the cell size ({n})")
        self.layer_norm = _get(ins, o.layer_norm[1]) is not None
        norms = [_get(ins, i) is not None for i in o.layer_norm]
        if norms != [self.layer_norm and k in self.gates for k in range(4)]:
            raise self.fail("layer-norm coefficients must be given for every gate the LSTM has, or for none")
        for k in self.gates if self.layer_norm else ():
            self._expect(ins, o.layer_norm[k], (n,), f"{GATE_NAMES[k]} layer-norm coefficients")

    def _check_types(self, ins) -> None:
        o = self.ops
        wanted = [(o.input_to[k], INT8, "weights") for k in self.gates]
        wanted += [(o.recurrent[k], INT8, "weights") for k in self.gates]
        wanted += [(o.bias[k], INT32, "bias") for k in self.gates]
        wanted += [(i, INT16, "peephole weights") for i in o.peephole if _get(ins, i) is not None]
        wanted += [(i, INT16, "layer-norm coefficients") for i in o.layer_norm if _get(ins, i) is not None]
        wanted += [(o.projection, INT8, "projection weights"), (o.projection_bias, INT32, "projection bias")]
        wanted += [(o.output_state, INT8, "output state"), (o.cell_state, INT16, "cell state")]
        for index, dtype, what in wanted:
            t = _get(ins, index)
            if t is not None and t.dtype != dtype:
                raise self.fail(f"the {what} {t.name!r} (input {index}) is {t.dtype.name}; the int8 LSTM needs {dtype.name}")

    # -- prepare: quantization ------------------------------------------------------------------

    def _scale(self, t: TensorInfo, index: int, what: str) -> tuple[np.float32, int]:
        if not has_scale(t) or len(t.quantization.scale) != 1:
            raise self.fail(f"the {what} {t.name!r} (input {index}) needs one (per-tensor) quantization scale")
        return F32(t.quantization.scale[0]), _zero_point(t.quantization)

    def _intermediates(self) -> list[tuple[np.float32, int]]:
        """(scale, zero point) of the op's intermediate tensors: the gates' matmul outputs
        (used with layer norm) and the hidden value ``o * tanh(c)`` (the fifth)."""
        runtime = self.node.runtime
        if runtime is None:
            raise self.fail("the integer LSTM needs its intermediate tensors, known only inside an interpreter")
        indices = runtime.graph.operators[self.node.index].intermediates
        if len(indices) != 5:
            raise self.fail(f"the integer LSTM needs 5 intermediate tensors, the node has {len(indices)}")
        found = []
        for k, index in enumerate(indices):
            t = runtime.graph.tensors[index]
            q = t.quantization
            if q is None or q.scale is None or len(q.scale) == 0:
                needed = k == 4 or (self.layer_norm and k in self.gates)
                if needed:
                    raise self.fail(f"the LSTM's intermediate tensor {t.name!r} (intermediate {k}) has no quantization parameters")
                found.append((F32(1), 0))
            else:
                found.append((F32(q.scale[0]), _zero_point(q)))
        return found

    def _quantization(self, ins) -> None:
        """LiteRT's Prepare-time parameters (PopulateQuantizedLstmParams8x8_16): effective
        multipliers computed in float32 as there, zero points, quantized clips."""
        o = self.ops
        input_scale, self.input_zp = self._scale(ins[0], 0, "input")
        state_scale, self.state_zp = self._scale(ins[o.output_state], o.output_state, "output state")
        cell_scale, _ = self._scale(ins[o.cell_state], o.cell_state, "cell state")
        log2 = math.log2(float(cell_scale))
        self.cell_shift = round(log2)
        if abs(log2 - self.cell_shift) >= 1e-3:
            raise self.fail(f"the cell state's scale {float(cell_scale)} is not a power of two")
        if not 0 <= 15 + self.cell_shift <= 6:
            raise self.fail(f"the cell state's scale 2**{self.cell_shift} is outside LiteRT's range (2**-15 to 2**-9)")
        inter = self._intermediates()
        gate_scale = [inter[k][0] if self.layer_norm else GATE_SCALE for k in range(4)]
        hidden_scale, self.hidden_zp = inter[4]
        w = lambda i: self._scale(ins[i], i, "weights")[0]  # noqa: E731
        self.input_mult, self.input_shift = self._per_gate([F32(w(o.input_to[k]) * input_scale) / gate_scale[k] for k in self.gates])
        self.rec_mult, self.rec_shift = self._per_gate([F32(w(o.recurrent[k]) * state_scale) / gate_scale[k] for k in self.gates])
        self.peephole_params = {}
        for k, index in zip((0, 1, 3), o.peephole):
            if _get(ins, index) is not None:  # double arithmetic stored as float, as LiteRT's
                real = F32(2.0**self.cell_shift * float(self._scale(ins[index], index, "peephole weights")[0]) / float(gate_scale[k]))
                self.peephole_params[k] = quantize_multiplier(float(real))
        hidden = F32(2.0**-15 / float(hidden_scale) * 2.0**-15)
        self.hidden_mult, self.hidden_shift = quantize_multiplier(float(hidden))
        if self.projection:
            proj_scale = self._scale(ins[o.projection], o.projection, "projection weights")[0]
            self.proj_mult, self.proj_shift = quantize_multiplier(float(F32(proj_scale * hidden_scale) / state_scale))
        clip, proj_clip = F32(self.options.cell_clip), F32(self.options.proj_clip)
        if clip < 0 or proj_clip < 0:
            raise self.fail(f"cell_clip ({float(clip)}) and proj_clip ({float(proj_clip)}) must not be negative")
        self.cell_clip = int(np.clip(clip / cell_scale, -32768.0, 32767.0)) if clip > 0 else 0
        out_scale = self._scale(self.declared_outputs()[0], 0, "output")[0] if proj_clip > 0 else F32(1)
        self.proj_clip = int(np.clip(proj_clip / out_scale, -128.0, 127.0)) if proj_clip > 0 else 0
        self.tanh_bits = 15 + self.cell_shift
        # The rescalings of every step, their constants made once (FixedMultiplier)
        self.input_rescale = FixedMultiplier(self.input_mult, self.input_shift)
        self.rec_rescale = FixedMultiplier(self.rec_mult, self.rec_shift)
        self.hidden_rescale = FixedMultiplier(self.hidden_mult, self.hidden_shift)
        self.proj_rescale = FixedMultiplier(self.proj_mult, self.proj_shift) if self.projection else None
        self.norm_scales = [self._scale(ins[o.layer_norm[k]], o.layer_norm[k], "layer-norm coefficients")[0]
                            for k in self.gates] if self.layer_norm else []

    def _per_gate(self, reals: list) -> tuple[np.ndarray, np.ndarray]:
        """One multiplier per gate, repeated over that gate's n_cell columns."""
        mult, shift = quantize_multiplier(np.array([float(r) for r in reals]))
        return np.repeat(mult.astype(np.int64), self.n_cell), np.repeat(shift.astype(np.int64), self.n_cell)

    def _weight_indices(self) -> list[int]:
        o = self.ops
        return [*o.input_to, *o.recurrent, *o.bias, *o.peephole, *o.layer_norm, o.projection, o.projection_bias]

    def _all_constant(self, ins) -> bool:
        return all(_get(ins, i) is None or ins[i].value is not None for i in self._weight_indices())

    def _stack(self, ins) -> dict:
        """Weights as exact float64 matmul operands [depth, G * n_cell] (gates in order i, f,
        g, o, i left out under CIFG) and the effective biases LiteRT precomputes: the zero
        points times the weights' row sums (and the gate bias, without layer norm), in int32."""
        o = self.ops
        value = lambda i: None if _get(ins, i) is None else np.asarray(getattr(ins[i], "value", ins[i])).astype(np.int64)  # noqa: E731
        cat = lambda idx: np.concatenate([value(idx[k]) for k in self.gates])  # noqa: E731
        w, r, bias = cat(o.input_to), cat(o.recurrent), cat(o.bias)
        input_bias = -self.input_zp * w.sum(axis=1) + (0 if self.layer_norm else bias)
        stacked = {
            "input": w.T.astype(np.float64), "recurrent": r.T.astype(np.float64),
            "input_bias": _wrap32(input_bias), "recurrent_bias": _wrap32(-self.state_zp * r.sum(axis=1)),
            "peephole": {k: value(i) for k, i in zip((0, 1, 3), o.peephole) if _get(ins, i) is not None},
        }
        if self.projection:
            p = value(o.projection)
            proj_bias = value(o.projection_bias)
            stacked["projection"] = p.T.astype(np.float64)
            stacked["projection_bias"] = _wrap32((0 if proj_bias is None else proj_bias) - self.hidden_zp * p.sum(axis=1))
        if self.layer_norm:
            mult, shift = quantize_multiplier(np.array([float(s) for s in self.norm_scales]))
            guard = np.array([max(1, int(F32(10000) * s)) for s in self.norm_scales], np.int64)
            coefficients = np.stack([value(o.layer_norm[k]) for k in self.gates])
            stacked["layer_norm"] = _LayerNorm(coefficients, bias.reshape(len(self.gates), -1),
                                               mult.astype(np.int64), shift.astype(np.int64), guard)
        return stacked

    # -- eval -----------------------------------------------------------------------------------

    def eval(self, ins, outs):
        s = self.weights if self.weights is not None else self._stack(ins)
        x, out = self.sequence(ins[0]), self.sequence(outs[0])
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0 or batch == 0:
            return
        h = ins[self.ops.output_state].reshape(batch, self.n_output)
        c = ins[self.ops.cell_state].reshape(batch, self.n_cell)
        # The input terms of every step at once (exact: float64 sums of int8 products).
        dots = (x.reshape(steps * batch, -1).astype(np.float64) @ s["input"]).astype(np.int64) + s["input_bias"]
        from_input = _clamp16(self.input_rescale(dots))
        from_input = from_input.reshape(steps, batch, len(self.gates), self.n_cell)
        cell = c.astype(np.int64)
        for t in range(steps):
            cell = self._step(from_input[t], h, cell, s)
            out[t] = h
        c[...] = cell

    def _step(self, from_input: np.ndarray, h: np.ndarray, cell: np.ndarray, s: dict) -> np.ndarray:
        """One time step: writes the new output state into ``h``, returns the new cell state."""
        rec = (h.astype(np.float64) @ s["recurrent"]).astype(np.int64) + s["recurrent_bias"]
        rec = self.rec_rescale(rec).reshape(from_input.shape)
        gates = _clamp16(from_input + rec)  # [batch, G, n_cell]
        slot = {k: g for g, k in enumerate(self.gates)}
        for k in (0, 1):  # the peepholes of i and f see the old cell state
            if k in self.peephole_params and k in slot:
                gates[:, slot[k]] = self._peephole(gates[:, slot[k]], s["peephole"][k], cell, k)
        norm = s.get("layer_norm")
        if norm is not None:  # i, f, g now; o after its peephole saw the new cell state
            done = slice(0, len(self.gates) - 1)
            gates[:, done] = _layer_norm(gates[:, done], norm.gates(done))
        sigmoid = _table("logistic", 3)
        forget = _lookup(sigmoid, gates[:, slot[1]])
        modulation = _lookup(_table("tanh", 3), gates[:, slot[2]])
        entry = 32767 - forget if self.cifg else _lookup(sigmoid, gates[:, slot[0]])
        cell = _wrap16(_rdbpot(forget * cell, 15))
        cell = _clamp16(cell + _wrap16(_rdbpot(entry * modulation, 30 + self.cell_shift)))
        if self.cell_clip > 0:
            cell = np.clip(cell, -self.cell_clip, self.cell_clip)
        output_gate = gates[:, slot[3]]
        if 3 in self.peephole_params:
            output_gate = self._peephole(output_gate, s["peephole"][3], cell, 3)
        if norm is not None:
            output_gate = _layer_norm(output_gate[:, None], norm.gates(slice(len(self.gates) - 1, None)))[:, 0]
        product = _lookup(sigmoid, output_gate) * _lookup(_table("tanh", self.tanh_bits), cell)
        hidden = _clip(self.hidden_rescale(product) + self.hidden_zp, INT8_LOW, INT8_HIGH)
        if self.projection:
            dots = (hidden.astype(np.float64) @ s["projection"]).astype(np.int64) + s["projection_bias"]
            hidden = _clip(self.proj_rescale(dots) + self.state_zp, INT8_LOW, INT8_HIGH)
            if self.proj_clip > 0:
                hidden = np.clip(hidden, -self.proj_clip, self.proj_clip)
        h[...] = hidden
        return cell

    def _peephole(self, gate: np.ndarray, weights: np.ndarray, cell: np.ndarray, k: int) -> np.ndarray:
        """LiteRT's VectorBatchVectorCwiseProductAccumulate: ``gate + MBQM(w * c)``, saturated.

        LiteRT passes it n_output as the vector size: with a projection to fewer outputs than
        cells, a batch-major sequence (stepped one batch row at a time) updates the first
        n_output cells of each row; a time-major one (or the one-step LSTM, whole batch at once)
        the first ``batch * n_output`` entries of the flat [batch, n_cell] buffers, the weights
        repeating every n_output. Reproduced as such."""
        mult, shift = self.peephole_params[k]
        width = self.n_output
        rows = gate.reshape(gate.shape[0] if self.one_row_at_a_time else 1, -1).copy()
        cells = cell.reshape(rows.shape)
        used = width * (1 if self.one_row_at_a_time else gate.shape[0])
        w = weights[np.arange(used) % width]
        rows[:, :used] = _clamp16(rows[:, :used] + mbqm(w * cells[:, :used], mult, shift).astype(np.int64))
        return rows.reshape(gate.shape)


@register("LSTM", quantized=True)
class QuantizedLstm(QuantizedUnidirectionalSequenceLstm):
    """One step of the integer LSTM (the full kernel, LiteRT's same 8x8_16 code with one time
    step): input [batch, features] -> output [batch, n_output], states updated in place."""

    def dims(self, x: TensorInfo) -> tuple[int, int, int]:
        if getattr(self.options, "kernel_type", 0) != 0:
            raise self.fail(f"LSTM kernel type {self.options.kernel_type} (BASIC) is not supported; only FULL")
        if x.ndim != 2:
            raise self.fail(f"input {x.name!r} must have rank 2, got shape {x.shape}")
        self.time_major = True  # LiteRT runs its time-major path, the whole batch at once
        return 1, int(x.shape[0]), int(x.shape[1])

    def output_shape(self, steps: int, batch: int) -> tuple[int, ...]:
        return (batch, self.n_output)

    def sequence(self, a: np.ndarray) -> np.ndarray:
        return a[None]
