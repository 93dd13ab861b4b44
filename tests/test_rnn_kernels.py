"""Recurrent kernels (UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, LSTM,
UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, RNN) against LiteRT on the same file.

Two sources of models:

* the official converter on tf_keras (Keras 2) LSTMs with a fixed batch, which it fuses into
  UNIDIRECTIONAL_SEQUENCE_LSTM (Bidirectional gives two of them around a REVERSE_V2);
* models written with numlite's own writer for what the converter never emits: peephole,
  projection, clipping, layer norm, CIFG, every fused activation, diagonal recurrent weights,
  time-major layouts, the bidirectional ops with merged outputs and aux inputs, the one-step
  LSTM and RNN. Weights are seeded random numbers of order one; LiteRT judges.

The states are variable tensors that both runtimes carry from one invoke to the next, so every
comparison runs several invokes in a row (and ``reset_all_variables`` in between where it says).
Tolerance: float32 rtol = atol = 1e-5; LiteRT sums the gates' dot products in another order
than BLAS, which stays far below that for these sizes.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from helpers import assert_close, litert_interpreter

import numlite
from numlite.model import read_model, write_model
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Options, Subgraph, Tensor

INVOKES = 3

# ----------------------------------------------------------------------------- running


def run_invokes(interpreter: Any, inputs: Sequence[np.ndarray], invokes: int = INVOKES,
                reset_after: int | None = None) -> list[list[np.ndarray]]:
    """Allocate, then invoke ``invokes`` times on the same inputs (the state carries over),
    calling ``reset_all_variables`` after invoke number ``reset_after``; every output of
    every invoke."""
    interpreter.allocate_tensors()
    results = []
    for k in range(invokes):
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        results.append([interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()])
        if reset_after == k:
            interpreter.reset_all_variables()
    return results


def assert_matches_litert(model: bytes, inputs: Sequence[np.ndarray], invokes: int = INVOKES,
                          reset_after: int | None = None) -> list[list[np.ndarray]]:
    """numlite gives LiteRT's outputs at every invoke; returns LiteRT's."""
    expected = run_invokes(litert_interpreter(model), inputs, invokes, reset_after)
    actual = run_invokes(numlite.Interpreter(model_content=model), inputs, invokes, reset_after)
    for k, (got, want) in enumerate(zip(actual, expected)):
        assert len(got) == len(want)
        for j, (a, e) in enumerate(zip(got, want)):
            assert_close(a, e, what=f"invoke {k}, output {j}: ")
    return expected


def ops_of(model: bytes) -> list[str]:
    m = read_model(model)
    return [m.op_name(op) for op in m.subgraphs[0].operators]


# ----------------------------------------------------------------------------- hand-made models

VAR = "variable"  # marks a state operand in ModelSpec inputs


class OpModel:
    """One operator in a model built with numlite's writer: graph inputs, constant weights,
    variable state tensors, omitted operands (None)."""

    def __init__(self, op: str, options: Options | None) -> None:
        self.model = Model(operator_codes=[OperatorCode(op, version=1)], subgraphs=[Subgraph()])
        self.graph = self.model.subgraphs[0]
        self.options = options
        self.operands: list[int] = []

    def _tensor(self, name: str, shape: Sequence[int], data: np.ndarray | None = None, variable: bool = False) -> int:
        buffer = 0
        if data is not None:
            self.model.buffers.append(Buffer(np.frombuffer(np.ascontiguousarray(data, np.float32).tobytes(), np.uint8)))
            buffer = len(self.model.buffers) - 1
        self.graph.tensors.append(Tensor(name, tuple(int(d) for d in shape), "FLOAT32", buffer, is_variable=variable))
        return len(self.graph.tensors) - 1

    def input(self, name: str, shape: Sequence[int]) -> "OpModel":
        index = self._tensor(name, shape)
        self.graph.inputs.append(index)
        self.operands.append(index)
        return self

    def weight(self, name: str, value: np.ndarray | None) -> "OpModel":
        self.operands.append(-1 if value is None else self._tensor(name, value.shape, value))
        return self

    def state(self, name: str, shape: Sequence[int]) -> "OpModel":
        self.operands.append(self._tensor(name, shape, variable=True))
        return self

    def build(self, outputs: Sequence[Sequence[int]]) -> bytes:
        outs = [self._tensor(f"output_{k}", shape) for k, shape in enumerate(outputs)]
        self.graph.outputs = outs
        self.graph.operators = [Operator(0, self.operands, outs, builtin_options=self.options)]
        return write_model(self.model)


def rng_weights(seed: int):
    rng = np.random.default_rng(seed)
    return lambda *shape, scale=1.0: (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


@functools.cache
def lstm_weights(seed: int, n_input: int, n_cell: int, n_output: int, cifg: bool, peephole: bool,
                 projection: bool, projection_bias: bool, layer_norm: bool, diagonal: bool = False,
                 n_aux: int = 0) -> dict[str, np.ndarray | None]:
    """One direction's operands by name, None where omitted. Weights are scaled by
    1/sqrt(fan-in) so that gates stay in the range where they do not saturate."""
    w = rng_weights(seed)
    gates = ["forget", "cell", "output"] if cifg else ["input", "forget", "cell", "output"]
    out: dict[str, np.ndarray | None] = {}
    for g in ["input", "forget", "cell", "output"]:
        on = g in gates
        out[f"input_to_{g}"] = w(n_cell, n_input, scale=2 / np.sqrt(n_input)) if on else None
        rec_shape = (n_cell,) if diagonal else (n_cell, n_output)
        out[f"recurrent_to_{g}"] = w(*rec_shape, scale=2 / np.sqrt(n_output)) if on else None
        out[f"{g}_bias"] = w(n_cell) if on else None
        out[f"{g}_layer_norm"] = (w(n_cell) + 1.0).astype(np.float32) if on and layer_norm else None
        out[f"aux_to_{g}"] = w(n_cell, n_aux, scale=2 / np.sqrt(max(n_aux, 1))) if on and n_aux else None
    for g in ["input", "forget", "output"]:
        out[f"cell_to_{g}"] = w(n_cell) if peephole and g in gates else None
    out["projection"] = w(n_output, n_cell, scale=2 / np.sqrt(n_cell)) if projection else None
    out["projection_bias"] = w(n_output) if projection and projection_bias else None
    return out


GATES = ["input", "forget", "cell", "output"]


def add_lstm_weights(m: OpModel, w: dict[str, np.ndarray | None], prefix: str = "") -> None:
    """The 17 weight operands of one direction, in LiteRT's order."""
    for kind in ("input_to_{}", "recurrent_to_{}"):
        for g in GATES:
            m.weight(prefix + kind.format(g), w[kind.format(g)])
    for g in ("input", "forget", "output"):
        m.weight(f"{prefix}cell_to_{g}", w[f"cell_to_{g}"])
    for g in GATES:
        m.weight(f"{prefix}{g}_bias", w[f"{g}_bias"])
    m.weight(prefix + "projection", w["projection"]).weight(prefix + "projection_bias", w["projection_bias"])


def sequence_input(seed: int, time: int, batch: int, depth: int, time_major: bool) -> np.ndarray:
    shape = (time, batch, depth) if time_major else (batch, time, depth)
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


# ----------------------------------------------------------------------------- probe
# ----------------------------------------------------------------------------- official converter

BATCH, STEPS, FEATURES = 2, 5, 3

KERAS_LAYERS = {
    "sequences": lambda: [tf_keras.layers.LSTM(6, return_sequences=True)],
    "last_step": lambda: [tf_keras.layers.LSTM(6)],
    "go_backwards": lambda: [tf_keras.layers.LSTM(5, go_backwards=True, return_sequences=True)],
    "time_major": lambda: [tf_keras.layers.LSTM(4, time_major=True, return_sequences=True)],
    # Two UNIDIRECTIONAL_SEQUENCE_LSTMs, the backward one on a REVERSE_V2 of the input. (One
    # Keras model of each kind: converting them is what takes the time here.)
    "bidirectional": lambda: [tf_keras.layers.Bidirectional(tf_keras.layers.LSTM(3))],
}
LSTM_COUNT = {"bidirectional": 2}


@functools.cache
def keras_model(name: str) -> tf_keras.Model:
    """The layers on [2, 5, 3] inputs with seeded weights of order one (biases too)."""
    tf_keras.utils.set_random_seed(0)
    model = tf_keras.Sequential([tf_keras.Input((STEPS, FEATURES), batch_size=BATCH), *KERAS_LAYERS[name]()])
    rng = np.random.default_rng(sorted(KERAS_LAYERS).index(name))
    model.set_weights([rng.uniform(-0.8, 0.8, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@functools.cache
def keras_tflite(name: str) -> bytes:
    return tf.lite.TFLiteConverter.from_keras_model(keras_model(name)).convert()


def keras_input(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (BATCH, STEPS, FEATURES)).astype(np.float32)


@pytest.mark.parametrize("name", sorted(KERAS_LAYERS))
def test_keras_lstm_matches_litert(name):
    """Three invokes in a row: the state tensors carry over from one to the next in both."""
    model = keras_tflite(name)
    assert ops_of(model).count("UNIDIRECTIONAL_SEQUENCE_LSTM") == LSTM_COUNT.get(name, 1), ops_of(model)
    x = keras_input()
    expected = assert_matches_litert(model, [x])
    # The premise: the first invoke (zero states) is Keras' own result.
    assert_close(expected[0][0], keras_model(name)(x).numpy(), what="LiteRT vs Keras: ")
    assert not np.allclose(expected[1][0], expected[0][0], atol=1e-3), "the state did not carry over"


def test_keras_lstm_reset_all_variables():
    """After reset_all_variables the states are zero again: the next invoke repeats the first."""
    model = keras_tflite("last_step")
    x = keras_input(2)
    expected = assert_matches_litert(model, [x], invokes=3, reset_after=1)
    assert_close(expected[2][0], expected[0][0], what="after reset: ")


def test_keras_lstm_state_survives_reallocation():
    """allocate_tensors again with the same shapes keeps the states (LiteRT does not reset
    them there either)."""
    model = keras_tflite("sequences")
    x = keras_input(3)
    results = []
    for interpreter in (litert_interpreter(model), numlite.Interpreter(model_content=model)):
        first = run_invokes(interpreter, [x], invokes=1)[0][0]
        second = run_invokes(interpreter, [x], invokes=1)[0][0]  # allocates again, then invokes
        results.append((first, second))
    (lit_first, lit_second), (ours_first, ours_second) = results
    assert not np.allclose(lit_first, lit_second, atol=1e-3)
    assert_close(ours_first, lit_first, what="first invoke: ")
    assert_close(ours_second, lit_second, what="after re-allocation: ")


# ----------------------------------------------------------------------------- UNIDIRECTIONAL_SEQUENCE_LSTM

LSTM_VARIANTS = {
    "plain": {},
    "cifg": dict(cifg=True),
    "peephole": dict(peephole=True),
    "cifg_peephole": dict(cifg=True, peephole=True),
    "projection": dict(projection=True, n_output=3),
    "projection_bias_clip": dict(projection=True, projection_bias=True, n_output=3, proj_clip=0.3),
    "cell_clip": dict(cell_clip=0.4),
    "layer_norm": dict(layer_norm=True),
    "layer_norm_cifg_peephole": dict(layer_norm=True, cifg=True, peephole=True),
    "everything": dict(layer_norm=True, peephole=True, projection=True, projection_bias=True, n_output=2,
                       cell_clip=0.7, proj_clip=0.5),
    "time_major": dict(time_major=True),
    "diagonal": dict(diagonal=True),
    "diagonal_peephole_cifg": dict(diagonal=True, peephole=True, cifg=True),
    "batch_1": dict(batch=1),
}


def lstm_spec(seed: int = 0, n_input: int = 3, n_cell: int = 4, n_output: int | None = None, batch: int = 2,
              cifg: bool = False, peephole: bool = False, projection: bool = False, projection_bias: bool = False,
              layer_norm: bool = False, diagonal: bool = False, **_: Any) -> dict[str, np.ndarray | None]:
    n_output = n_output if projection else n_cell
    return lstm_weights(seed, n_input, n_cell, n_output, cifg, peephole, projection, projection_bias, layer_norm, diagonal)


def unidirectional_lstm(steps: int = 5, batch: int = 2, n_input: int = 3, n_cell: int = 4, activation: int = 4,
                        cell_clip: float = 0.0, proj_clip: float = 0.0, time_major: bool = False,
                        diagonal: bool = False, seed: int = 0, **variant: Any) -> tuple[bytes, np.ndarray]:
    """A one-op model and an input for it."""
    w = lstm_spec(seed, n_input, n_cell, batch=batch, diagonal=diagonal, **variant)
    n_output = (w["projection"].shape[0]) if w["projection"] is not None else n_cell
    options = Options("UnidirectionalSequenceLSTMOptions", fused_activation_function=activation, cell_clip=cell_clip,
                      proj_clip=proj_clip, time_major=time_major, diagonal_recurrent_tensors=diagonal)
    m = OpModel("UNIDIRECTIONAL_SEQUENCE_LSTM", options)
    m.input("input", (steps, batch, n_input) if time_major else (batch, steps, n_input))
    add_lstm_weights(m, w)
    m.state("output_state", (batch, n_output)).state("cell_state", (batch, n_cell))
    if variant.get("layer_norm"):
        for g in GATES:
            m.weight(f"{g}_layer_norm", w[f"{g}_layer_norm"])
    out = (steps, batch, n_output) if time_major else (batch, steps, n_output)
    return m.build([out]), sequence_input(seed + 1, steps, batch, n_input, time_major)


@pytest.mark.parametrize("variant", sorted(LSTM_VARIANTS))
def test_unidirectional_lstm_variants(variant):
    model, x = unidirectional_lstm(**LSTM_VARIANTS[variant])
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("activation", [0, 1, 2, 3, 5], ids=["none", "relu", "relu_n1_to_1", "relu6", "sign_bit"])
def test_unidirectional_lstm_activations(activation):
    """The fused activation is the cell's (LiteRT's gate and output activation). With NONE,
    LiteRT never writes act(c), so h = o * (cell gate): numlite keeps that."""
    model, x = unidirectional_lstm(activation=activation, seed=3)
    assert_matches_litert(model, [x])


def test_unidirectional_lstm_reset_all_variables():
    model, x = unidirectional_lstm(peephole=True, seed=4)
    expected = assert_matches_litert(model, [x], invokes=4, reset_after=1)
    assert_close(expected[2][0], expected[0][0], what="after reset: ")


# ----------------------------------------------------------------------------- BIDIRECTIONAL_SEQUENCE_LSTM


def bidirectional_lstm(merge: bool = False, time_major: bool = True, aux: str = "none", steps: int = 4,
                       batch: int = 2, n_input: int = 3, n_aux: int = 2, activation: int = 4,
                       cell_clip: float = 0.0, proj_clip: float = 0.0, fw: dict | None = None,
                       bw: dict | None = None) -> tuple[bytes, list[np.ndarray]]:
    """Both directions have 4 cells and 4 outputs (LiteRT checks the backward weights against
    the forward sizes and the input's depth, even when the backward direction reads the aux
    input). aux: "none"; "weights" (an aux input both directions read through their aux weights);
    "backward" (an aux input without weights: the backward direction's own input)."""
    bw_input = n_aux if aux == "backward" else n_input
    with_aux = n_aux if aux == "weights" else 0
    fw_w = lstm_weights(10, n_input, 4, *_sizes(fw or {}, 4), n_aux=with_aux)
    bw_w = lstm_weights(11, bw_input, 4, *_sizes(bw or {}, 4), n_aux=with_aux)
    n_fw, n_bw = _outputs(fw_w, 4), _outputs(bw_w, 4)
    options = Options("BidirectionalSequenceLSTMOptions", fused_activation_function=activation, cell_clip=cell_clip,
                      proj_clip=proj_clip, merge_outputs=merge, time_major=time_major)
    m = OpModel("BIDIRECTIONAL_SEQUENCE_LSTM", options)
    m.input("input", _seq_shape(steps, batch, n_input, time_major))
    add_lstm_weights(m, fw_w, "fw_")
    add_lstm_weights(m, bw_w, "bw_")
    m.state("fw_h", (batch, n_fw)).state("fw_c", (batch, 4)).state("bw_h", (batch, n_bw)).state("bw_c", (batch, 4))
    inputs = [sequence_input(20, steps, batch, n_input, time_major)]
    if aux == "none":
        m.weight("aux", None)
    else:
        m.input("aux", _seq_shape(steps, batch, n_aux, time_major))
        inputs.append(sequence_input(21, steps, batch, n_aux, time_major))
    for prefix, w in (("fw_", fw_w), ("bw_", bw_w)):
        for g in GATES:
            m.weight(f"{prefix}aux_to_{g}", w[f"aux_to_{g}"])
    if merge:
        outs = [_seq_shape(steps, batch, n_fw + n_bw, time_major)]
    else:
        outs = [_seq_shape(steps, batch, n_fw, time_major), _seq_shape(steps, batch, n_bw, time_major)]
    return m.build(outs), inputs


def _sizes(v: dict, n_cell: int) -> tuple:
    """lstm_weights' positional flags after n_cell: n_output, cifg, peephole, projection,
    projection_bias, layer_norm."""
    projection = v.get("projection", False)
    n_output = v.get("n_output", n_cell) if projection else n_cell
    return (n_output, v.get("cifg", False), v.get("peephole", False), projection, v.get("projection_bias", False), False)


def _outputs(w: dict, n_cell: int) -> int:
    return w["projection"].shape[0] if w["projection"] is not None else n_cell


def _seq_shape(steps: int, batch: int, depth: int, time_major: bool) -> tuple[int, int, int]:
    return (steps, batch, depth) if time_major else (batch, steps, depth)


BIDI_VARIANTS = {
    "separate": dict(),
    "merged": dict(merge=True),
    "batch_major": dict(time_major=False),
    "aux_weights": dict(aux="weights"),
    "aux_backward_input": dict(aux="backward", merge=True, n_aux=3),
    "cifg_peephole_projection": dict(fw=dict(cifg=True, peephole=True),
                                     bw=dict(projection=True, projection_bias=True), proj_clip=0.4),
    "aux_weights_cifg_clip": dict(aux="weights", fw=dict(cifg=True), bw=dict(cifg=True, peephole=True),
                                  cell_clip=0.5, time_major=False),
    "relu6": dict(activation=3, merge=True),
}


@pytest.mark.parametrize("variant", sorted(BIDI_VARIANTS))
def test_bidirectional_lstm(variant):
    model, inputs = bidirectional_lstm(**BIDI_VARIANTS[variant])
    assert_matches_litert(model, inputs)


def test_bidirectional_lstm_reset_all_variables():
    model, inputs = bidirectional_lstm(merge=True)
    expected = assert_matches_litert(model, inputs, invokes=3, reset_after=0)
    assert_close(expected[1][0], expected[0][0], what="after reset: ")


# ----------------------------------------------------------------------------- LSTM (one step)


def one_step_lstm(batch: int = 2, n_input: int = 3, n_cell: int = 4, activation: int = 4, cell_clip: float = 0.0,
                  proj_clip: float = 0.0, seed: int = 5, **variant: Any) -> tuple[bytes, np.ndarray]:
    w = lstm_spec(seed, n_input, n_cell, **variant)
    n_output = _outputs(w, n_cell)
    m = OpModel("LSTM", Options("LSTMOptions", fused_activation_function=activation, cell_clip=cell_clip,
                                proj_clip=proj_clip))
    m.input("input", (batch, n_input))
    add_lstm_weights(m, w)
    m.state("output_state", (batch, n_output)).state("cell_state", (batch, n_cell))
    if variant.get("layer_norm"):
        for g in GATES:
            m.weight(f"{g}_layer_norm", w[f"{g}_layer_norm"])
    x = np.random.default_rng(seed).uniform(-2, 2, (batch, n_input)).astype(np.float32)
    return m.build([(batch, n_output)]), x


ONE_STEP_VARIANTS = {
    "plain": {},
    "cifg_peephole": dict(cifg=True, peephole=True),
    "projection_clips": dict(projection=True, projection_bias=True, n_output=2, cell_clip=0.3, proj_clip=0.2),
    "layer_norm": dict(layer_norm=True, peephole=True),
    "relu": dict(activation=1),
}


@pytest.mark.parametrize("variant", sorted(ONE_STEP_VARIANTS))
def test_lstm_one_step(variant):
    """Each invoke is one more time step of the same LSTM (the states carry it)."""
    model, x = one_step_lstm(**ONE_STEP_VARIANTS[variant])
    assert_matches_litert(model, [x], invokes=4)


# ----------------------------------------------------------------------------- RNN family


def rnn_weights(seed: int, n_input: int, units: int, n_aux: int = 0) -> list[np.ndarray]:
    w = rng_weights(seed)
    weights = [w(units, n_input, scale=2 / np.sqrt(n_input)), w(units, units, scale=1.5 / np.sqrt(units)), w(units)]
    return weights + ([w(units, n_aux, scale=2 / np.sqrt(n_aux))] if n_aux else [])


def one_step_rnn(activation: int, batch: int = 2, n_input: int = 3, units: int = 4) -> tuple[bytes, np.ndarray]:
    m = OpModel("RNN", Options("RNNOptions", fused_activation_function=activation))
    m.input("input", (batch, n_input))
    for k, value in enumerate(rnn_weights(30, n_input, units)):
        m.weight(f"w{k}", value)
    m.state("hidden_state", (batch, units))
    x = np.random.default_rng(31).uniform(-2, 2, (batch, n_input)).astype(np.float32)
    return m.build([(batch, units)]), x


ACTIVATIONS = [0, 1, 2, 3, 4, 5]
ACTIVATION_IDS = ["none", "relu", "relu_n1_to_1", "relu6", "tanh", "sign_bit"]


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=ACTIVATION_IDS)
def test_rnn_one_step(activation):
    model, x = one_step_rnn(activation)
    assert_matches_litert(model, [x], invokes=4)


def sequence_rnn(activation: int = 4, time_major: bool = False, steps: int = 5, batch: int = 2, n_input: int = 3,
                 units: int = 4) -> tuple[bytes, np.ndarray]:
    m = OpModel("UNIDIRECTIONAL_SEQUENCE_RNN", Options("SequenceRNNOptions", fused_activation_function=activation,
                                                       time_major=time_major))
    m.input("input", _seq_shape(steps, batch, n_input, time_major))
    for k, value in enumerate(rnn_weights(32, n_input, units)):
        m.weight(f"w{k}", value)
    m.state("hidden_state", (batch, units))
    return m.build([_seq_shape(steps, batch, units, time_major)]), sequence_input(33, steps, batch, n_input, time_major)


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=ACTIVATION_IDS)
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
def test_unidirectional_sequence_rnn(activation, time_major):
    model, x = sequence_rnn(activation, time_major)
    assert_matches_litert(model, [x])


def bidirectional_rnn(merge: bool = False, time_major: bool = False, aux: str = "none", activation: int = 4,
                      steps: int = 4, batch: int = 2, n_input: int = 3, n_aux: int = 2) -> tuple[bytes, list[np.ndarray]]:
    options = Options("BidirectionalSequenceRNNOptions", fused_activation_function=activation,
                      time_major=time_major, merge_outputs=merge)
    m = OpModel("BIDIRECTIONAL_SEQUENCE_RNN", options)
    m.input("input", _seq_shape(steps, batch, n_input, time_major))
    with_aux = n_aux if aux == "weights" else 0
    fw = rnn_weights(40, n_input, 4, with_aux)
    bw = rnn_weights(41, n_aux if aux == "backward" else n_input, 3, with_aux)
    for prefix, w, units in (("fw", fw, 4), ("bw", bw, 3)):
        for k, value in enumerate(w[:3]):
            m.weight(f"{prefix}{k}", value)
        m.state(f"{prefix}_hidden", (batch, units))
    inputs = [sequence_input(42, steps, batch, n_input, time_major)]
    if aux == "none":
        m.weight("aux", None)
    else:
        m.input("aux", _seq_shape(steps, batch, n_aux, time_major))
        inputs.append(sequence_input(43, steps, batch, n_aux, time_major))
    m.weight("fw_aux", fw[3] if with_aux else None).weight("bw_aux", bw[3] if with_aux else None)
    if merge:
        outs = [_seq_shape(steps, batch, 7, time_major)]
    else:
        outs = [_seq_shape(steps, batch, 4, time_major), _seq_shape(steps, batch, 3, time_major)]
    return m.build(outs), inputs


BIDI_RNN_VARIANTS = {
    "separate": dict(),
    "merged": dict(merge=True),
    "time_major": dict(time_major=True),
    "merged_time_major_relu": dict(merge=True, time_major=True, activation=1),
    "aux_weights": dict(aux="weights"),
    "aux_backward_input": dict(aux="backward", merge=True, n_aux=3, time_major=True),
}


@pytest.mark.parametrize("variant", sorted(BIDI_RNN_VARIANTS))
def test_bidirectional_sequence_rnn(variant):
    model, inputs = bidirectional_rnn(**BIDI_RNN_VARIANTS[variant])
    assert_matches_litert(model, inputs)


def assert_matches_litert_equivalent(model: bytes, inputs: list[np.ndarray], reference: bytes,
                                     reference_inputs: list[np.ndarray], to_ours) -> None:
    """numlite on ``model`` gives what LiteRT computes on an equivalent ``reference`` model
    (its outputs mapped by ``to_ours``), at every invoke: for layouts where LiteRT's own kernel
    is wrong."""
    expected = run_invokes(litert_interpreter(reference), reference_inputs)
    actual = run_invokes(numlite.Interpreter(model_content=model), inputs)
    for k, (got, want) in enumerate(zip(actual, expected)):
        want = to_ours(want)
        assert len(got) == len(want)
        for j, (a, e) in enumerate(zip(got, want)):
            assert_close(a, e, what=f"invoke {k}, output {j}: ")


def batch_major(arrays: list[np.ndarray]) -> list[np.ndarray]:
    return [np.ascontiguousarray(a.swapaxes(0, 1)) for a in arrays]


def test_bidirectional_lstm_merged_batch_major():
    """LiteRT's merged batch-major output is wrong from the second batch row on (its backward
    half differs from the same op's unmerged output, which agrees with the time-major form).
    numlite's merged output is the concatenation of LiteRT's unmerged outputs."""
    model, inputs = bidirectional_lstm(merge=True, time_major=False)
    separate, _ = bidirectional_lstm(merge=False, time_major=False)
    assert_matches_litert_equivalent(model, inputs, separate, inputs, lambda outs: [np.concatenate(outs, axis=-1)])


def test_bidirectional_rnn_backward_aux_input_batch_major():
    """With an aux input and no aux weights the backward RNN reads the aux input; LiteRT's
    batch-major loop reads the main input there instead (its time-major loop reads the aux
    input). numlite does what the time-major kernel does, in either layout."""
    model, inputs = bidirectional_rnn(aux="backward", n_aux=3, time_major=False)
    reference, _ = bidirectional_rnn(aux="backward", n_aux=3, time_major=True)
    assert_matches_litert_equivalent(model, inputs, reference, batch_major(inputs), batch_major)


def test_bidirectional_rnn_aux_weights_time_major():
    """LiteRT's time-major loop steps through the aux input with the main input's depth, so an
    aux input of another depth is read at the wrong places; its batch-major loop is right and
    is the reference."""
    model, inputs = bidirectional_rnn(aux="weights", n_aux=2, time_major=True)
    reference, _ = bidirectional_rnn(aux="weights", n_aux=2, time_major=False)
    assert_matches_litert_equivalent(model, inputs, reference, batch_major(inputs), batch_major)


def test_sequence_rnn_reset_all_variables():
    model, x = sequence_rnn()
    expected = assert_matches_litert(model, [x], invokes=3, reset_after=0)
    assert_close(expected[1][0], expected[0][0], what="after reset: ")


# ----------------------------------------------------------------------------- refused models


def edited(model: bytes, edit) -> bytes:
    m = read_model(model)
    edit(m.subgraphs[0], m.subgraphs[0].operators[0])
    return write_model(m)


def assert_both_refuse(model: bytes, numlite_match: str) -> None:
    """LiteRT fails to allocate the model; numlite raises a PrepareError naming the node."""
    with pytest.raises(RuntimeError):
        litert_interpreter(model).allocate_tensors()
    with pytest.raises(numlite.PrepareError, match=numlite_match) as info:
        numlite.Interpreter(model_content=model).allocate_tensors()
    assert "node 0" in str(info.value), info.value


def _not_variable(graph, op) -> None:
    graph.tensors[op.inputs[18]].is_variable = False


def _drop_input_to_input(graph, op) -> None:
    op.inputs[1] = -1  # CIFG, but the recurrent-to-input weights and input bias remain


def _wrong_bias(graph, op) -> None:
    op.inputs[13] = op.inputs[17]  # the projection bias (3 values) as the forget bias


@pytest.mark.parametrize("edit, message", [
    (_not_variable, "must be a variable tensor"),
    (_drop_input_to_input, "CIFG"),
    (_wrong_bias, "forget gate bias"),
], ids=["state_not_variable", "half_cifg", "bias_shape"])
def test_bad_unidirectional_lstm_is_refused(edit, message):
    model, _ = unidirectional_lstm(projection=True, projection_bias=True, n_output=3)
    assert_both_refuse(edited(model, edit), message)


def test_bidirectional_lstm_directions_of_different_sizes_are_refused():
    model, _ = bidirectional_lstm(bw=dict(projection=True, n_output=2))
    assert_both_refuse(model, "LiteRT requires them equal")


def test_bidirectional_rnn_backward_aux_input_of_another_depth_is_refused():
    model, _ = bidirectional_rnn(aux="backward", n_aux=2, time_major=True)
    assert_both_refuse(model, "depth 2")


def test_basic_lstm_kernel_is_refused():
    model, _ = one_step_lstm()
    basic = edited(model, lambda graph, op: setattr(op.builtin_options, "kernel_type", 1))
    with pytest.raises(numlite.PrepareError, match="BASIC"):
        numlite.Interpreter(model_content=basic).allocate_tensors()


def test_quantized_weights_are_refused():
    """Hybrid (int8-weight) recurrent ops are not implemented: a clear error, not wrong numbers."""
    model, _ = sequence_rnn()

    def to_int8(graph, op) -> None:
        graph.tensors[op.inputs[1]].type = "INT8"

    m = read_model(model)
    to_int8(m.subgraphs[0], m.subgraphs[0].operators[0])
    weights = m.subgraphs[0].tensors[m.subgraphs[0].operators[0].inputs[1]]
    m.buffers[weights.buffer] = Buffer(np.zeros(int(np.prod(weights.shape)), np.uint8))
    with pytest.raises(numlite.PrepareError, match="only float32"):
        numlite.Interpreter(model_content=write_model(m)).allocate_tensors()
