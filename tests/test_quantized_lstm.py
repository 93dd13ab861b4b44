"""The full-integer UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT, on official-converter models.

tf_keras LSTMs (the official converter fuses them into UNIDIRECTIONAL_SEQUENCE_LSTM) converted
with a seeded representative dataset to int8 input and output: int8 activations and weights,
int32 biases, an int16 cell state. Each model packs several LSTMs (different units and input
sizes, ``return_sequences`` True and False) so that one conversion (~7 s) covers them all.
numlite must equal LiteRT's reference kernels (BUILTIN_REF) bit for bit and stay within one
quantum of its default kernels, invoke after invoke (the states are variable tensors that carry
over) and after ``reset_all_variables``.

The converter never emits the LSTM's other integer forms, so the official models are also
rewritten (numlite's reader and writer) into them, LiteRT again judging: time-major layout,
CIFG, peephole weights, projection (with bias, to fewer outputs than cells, with its clip),
cell clip, layer normalisation (int16 coefficients, scaled intermediates).

Keras 3 LSTMs are not covered: TF 2.21's official converter crashes (SIGSEGV) converting a
full-int8 Keras 3 LSTM, so there is no reference model to compare with.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite
from numlite.errors import PrepareError
from numlite.model.ir import Buffer, OperatorCode, Options, Quantization, Tensor

# name: (batch, steps, features, [(units, return_sequences), ...] applied in sequence)
MODELS = {
    "stacked_batch3": (3, 5, 7, [(12, True), (6, False)]),
    "single_batch1": (1, 4, 3, [(20, True)]),
}
CELL_STATE = 19  # the cell state's input index in UNIDIRECTIONAL_SEQUENCE_LSTM


def _build(name: str) -> tf_keras.Model:
    batch, steps, features, layers = MODELS[name]
    tf_keras.utils.set_random_seed(0)
    inputs = tf_keras.Input((steps, features), batch_size=batch)
    x, outputs = inputs, []
    for units, sequences in layers:
        x = tf_keras.layers.LSTM(units, return_sequences=sequences)(x)
        outputs.append(x)
    model = tf_keras.Model(inputs, outputs)
    # weights of order one at each gate (uniform, variance 1 / fan-in), biases near Keras's
    rng = np.random.default_rng(sorted(MODELS).index(name))
    weights = []
    for w in model.get_weights():
        if w.ndim == 1:
            weights.append(w + rng.uniform(-0.3, 0.3, w.shape))
        else:
            weights.append(rng.uniform(-1, 1, w.shape) * np.sqrt(3 / w.shape[0]))
    model.set_weights([w.astype(np.float32) for w in weights])
    return model


def _sample(name: str, seed: int) -> np.ndarray:
    batch, steps, features, _ = MODELS[name]
    return np.random.default_rng(seed).uniform(-1, 1, (batch, steps, features)).astype(np.float32)


@functools.cache
def quantized(name: str) -> bytes:
    """``name`` converted to full int8 (int8 input and output) by the official converter."""
    converter = tf.lite.TFLiteConverter.from_keras_model(_build(name))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([_sample(name, seed)] for seed in range(100, 104))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


def _quantized_input(model: bytes, name: str, seed: int) -> np.ndarray:
    (detail,) = LiteRTInterpreter(model_content=model).get_input_details()
    assert detail["dtype"] == np.int8
    scale, zero_point = detail["quantization"]
    x = np.clip(np.round(_sample(name, seed) / scale) + zero_point, -128, 127).astype(np.int8)
    return x.reshape(detail["shape"])  # a rewritten model may read the sample in another shape


class _Session:
    """One interpreter kept across invokes (the LSTM states live in it)."""

    def __init__(self, interpreter) -> None:
        self.it = interpreter
        self.it.allocate_tensors()

    def __call__(self, x: np.ndarray) -> list[np.ndarray]:
        self.it.set_tensor(self.it.get_input_details()[0]["index"], x)
        self.it.invoke()
        return [self.it.get_tensor(d["index"]).copy() for d in self.it.get_output_details()]


def _lstm_nodes(model: bytes):
    m = numlite.model.read_model(model)
    sg = m.subgraphs[0]
    return sg, [n for n in sg.operators if m.op_name(n) == "UNIDIRECTIONAL_SEQUENCE_LSTM"]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_official_model_is_integer_lstm(name):
    sg, nodes = _lstm_nodes(quantized(name))
    assert len(nodes) == len(MODELS[name][3])
    for node in nodes:
        dtypes = [sg.tensors[i].dtype.name if i >= 0 else None for i in node.inputs]
        assert dtypes[0] == "int8" and dtypes[CELL_STATE] == "int16", dtypes
        assert set(dtypes[1:9]) == {"int8"} and set(dtypes[12:16]) == {"int32"}, dtypes
        assert sg.tensors[node.outputs[0]].dtype.name == "int8"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_litert_across_invokes(name):
    model = quantized(name)
    numlite_it = numlite.Interpreter(model_content=model)
    ours = _Session(numlite_it)
    reference = _Session(LiteRTInterpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF))
    default = _Session(LiteRTInterpreter(model_content=model))
    first = _quantized_input(model, name, 0)
    # the same input twice: only the carried-over states make the second invoke differ
    inputs = [first, first, _quantized_input(model, name, 1)]
    results = []
    for step, x in enumerate(inputs):
        a, r, d = ours(x), reference(x), default(x)
        results.append(r)
        for k, (ai, ri, di) in enumerate(zip(a, r, d)):
            assert ai.dtype == ri.dtype == np.int8 and ai.shape == ri.shape
            np.testing.assert_array_equal(ai, ri, err_msg=f"invoke {step}, output {k}: reference kernels")
            assert np.abs(ai.astype(np.int32) - di).max() <= 1, f"invoke {step}, output {k}: default kernels"
    assert any(not np.array_equal(p, q) for p, q in zip(results[0], results[1])), "the states had no effect"
    # back to the initial states (LiteRT's: an int8 state holds its zero point)
    numlite_it.reset_all_variables()
    reference.it.reset_all_variables()
    for k, (ai, ri) in enumerate(zip(ours(first), reference(first))):
        np.testing.assert_array_equal(ai, ri, err_msg=f"after reset, output {k}")
        np.testing.assert_array_equal(ai, results[0][k], err_msg=f"after reset, output {k} vs the first invoke")


@pytest.mark.parametrize("seed", [2, 3])
def test_extreme_inputs(seed):
    """Inputs over the whole int8 range saturate gates and cell state: still bit-exact."""
    name = "stacked_batch3"
    model = quantized(name)
    batch, steps, features, _ = MODELS[name]
    x = np.random.default_rng(seed).integers(-128, 128, (batch, steps, features)).astype(np.int8)
    ours = _Session(numlite.Interpreter(model_content=model))(x)
    reference = _Session(LiteRTInterpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF))(x)
    for a, r in zip(ours, reference):
        np.testing.assert_array_equal(a, r)


def _mutated(name: str, change, which: int = 0) -> bytes:
    """Model ``name`` with its LSTM node number ``which`` rewritten by ``change(model, subgraph,
    node, rng)``."""
    m = numlite.model.read_model(quantized(name))
    sg = m.subgraphs[0]
    node = [n for n in sg.operators if m.op_name(n) == "UNIDIRECTIONAL_SEQUENCE_LSTM"][which]
    change(m, sg, node, np.random.default_rng(7))
    return numlite.model.write_model(m)


def _set_type(index: int, type_name: str):
    def change(m, sg, node, rng):
        sg.tensors[node.inputs[index]].type = type_name

    return change


def _drop_intermediates(m, sg, node, rng):
    node.intermediates = node.intermediates[:4]


@pytest.mark.parametrize(
    "change, message",
    [
        (_set_type(0, "INT16"), "int8 activations only"),
        (_set_type(CELL_STATE, "INT8"), "cell state"),
        (_drop_intermediates, "5 intermediate tensors"),
    ],
    ids=["int16-activations", "int8-cell-state", "no-hidden-intermediate"],
)
def test_unsupported_integer_lstm_is_a_clear_error(change, message):
    model = _mutated("single_batch1", change)
    with pytest.raises(PrepareError, match=rf"node \d+ \(UNIDIRECTIONAL_SEQUENCE_LSTM\).*{message}"):
        numlite.Interpreter(model_content=model).allocate_tensors()


# ----------------------------------------------------------------------------- rewritten variants


def _add_tensor(m, sg, name: str, values: np.ndarray, type_name: str, scale: float) -> int:
    """A constant tensor with one scale (zero point 0); returns its index."""
    m.buffers.append(Buffer(np.frombuffer(np.ascontiguousarray(values).tobytes(), np.uint8)))
    quantization = Quantization(scale=np.array([scale], np.float32), zero_point=np.array([0], np.int64))
    sg.tensors.append(Tensor(name, tuple(values.shape), type_name, len(m.buffers) - 1, quantization))
    return len(sg.tensors) - 1


def _ints(rng, shape, low: int, high: int, dtype) -> np.ndarray:
    return rng.integers(low, high, shape).astype(dtype)


def _cifg(m, sg, node, rng):
    for i in (1, 5, 12):  # input-to-input, recurrent-to-input weights, input gate bias
        node.inputs[i] = -1


def _peephole(m, sg, node, rng, gates=(9, 10, 11)):
    n = sg.tensors[node.inputs[2]].shape[0]
    for i in gates:
        node.inputs[i] = _add_tensor(m, sg, f"peephole{i}", _ints(rng, (n,), -12000, 12000, np.int16), "INT16", 2.0**-14)


def _cifg_peephole(m, sg, node, rng):
    _cifg(m, sg, node, rng)
    _peephole(m, sg, node, rng, gates=(10, 11))


def _time_major(m, sg, node, rng):
    """Read the [batch, time, features] input as [time, batch, features]."""
    node.builtin_options.time_major = True
    batch = sg.tensors[node.inputs[0]].shape[1]
    for i in (18, 19):
        state = sg.tensors[node.inputs[i]]
        state.shape = state.shape_signature = (batch, state.shape[-1])


def _cell_clip(m, sg, node, rng):
    node.builtin_options.cell_clip = 0.4


def _projection(outputs: int, bias: bool, clip: float):
    """Project the hidden state to ``outputs`` values: new recurrent weights [cells, outputs],
    states and output resized (the LSTM must be the model's last op)."""

    def change(m, sg, node, rng):
        n = sg.tensors[node.inputs[2]].shape[0]
        for i in (5, 6, 7, 8):
            old = sg.tensors[node.inputs[i]]
            node.inputs[i] = _add_tensor(m, sg, f"recurrent{i}", _ints(rng, (n, outputs), -127, 128, np.int8), "INT8",
                                         float(old.quantization.scale[0]))
        node.inputs[16] = _add_tensor(m, sg, "projection", _ints(rng, (outputs, n), -127, 128, np.int8), "INT8", 0.004)
        if bias:
            node.inputs[17] = _add_tensor(m, sg, "projection_bias", _ints(rng, (outputs,), -3000, 3000, np.int32), "INT32", 1e-5)
        state = sg.tensors[node.inputs[18]]
        state.shape = state.shape_signature = (state.shape[0], outputs)
        out = sg.tensors[node.outputs[0]]
        out.shape = out.shape_signature = (*out.shape[:-1], outputs)
        for op in sg.operators:  # a last-step STRIDED_SLICE after it (return_sequences=False)
            if op.inputs and op.inputs[0] == node.outputs[0]:
                sliced = sg.tensors[op.outputs[0]]
                sliced.shape = sliced.shape_signature = (*sliced.shape[:-1], outputs)
        node.builtin_options.proj_clip = clip

    return change


def _layer_norm(m, sg, node, rng):
    n = sg.tensors[node.inputs[2]].shape[0]
    for k, i in enumerate((20, 21, 22, 23)):
        node.inputs[i] = _add_tensor(m, sg, f"norm{k}", _ints(rng, (n,), 8000, 24000, np.int16), "INT16", 2.0**-14)
    for k in range(4):  # the gates' matmul outputs get a scale, as the converter would give them
        t = sg.tensors[node.intermediates[k]]
        t.type = "INT16"
        t.quantization = Quantization(scale=np.array([0.0008 * (k + 1)], np.float32), zero_point=np.array([0], np.int64))


def _one_step_lstm(m, sg, node, rng):
    """The sequence op as the one-step LSTM op, its 4 time steps read as a batch of 4."""
    m.operator_codes.append(OperatorCode("LSTM", version=4))
    node.opcode_index = len(m.operator_codes) - 1
    seq = node.builtin_options
    node.builtin_options = Options("LSTMOptions", fused_activation_function=seq.fused_activation_function,
                                   cell_clip=seq.cell_clip, proj_clip=seq.proj_clip)
    for i in (node.inputs[0], node.outputs[0], node.inputs[18], node.inputs[19]):
        t = sg.tensors[i]
        t.shape = t.shape_signature = (4, t.shape[-1])


def _projection_peephole(outputs: int, time_major: bool = False):
    """Both: LiteRT then runs its peephole loop over the first n_output values of each
    n_cell-wide row (see the kernel)."""

    def change(m, sg, node, rng):
        _projection(outputs, bias=True, clip=0.0)(m, sg, node, rng)
        _peephole(m, sg, node, rng)
        if time_major:
            _time_major(m, sg, node, rng)

    return change


# variant: (model, rewrite, which LSTM of the model)
VARIANTS = {
    "time_major": ("stacked_batch3", _time_major),
    "cifg": ("stacked_batch3", _cifg),
    "peephole": ("stacked_batch3", _peephole),
    "cifg_peephole": ("stacked_batch3", _cifg_peephole),
    "cell_clip": ("stacked_batch3", _cell_clip),
    "layer_norm": ("stacked_batch3", _layer_norm),
    "one_step_lstm_op": ("single_batch1", _one_step_lstm),
    "projection": ("single_batch1", _projection(7, bias=True, clip=0.0)),
    "projection_clip_no_bias": ("single_batch1", _projection(20, bias=False, clip=0.05)),
    "projection_peephole": ("single_batch1", _projection_peephole(7)),
    "projection_peephole_batch3": ("stacked_batch3", _projection_peephole(4), 1),
    "projection_peephole_time_major": ("stacked_batch3", _projection_peephole(4, time_major=True), 1),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rewritten_variant_matches_litert(variant):
    name, change, *which = VARIANTS[variant]
    model = _mutated(name, change, *which)
    ours = _Session(numlite.Interpreter(model_content=model))
    reference = _Session(LiteRTInterpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF))
    default = _Session(LiteRTInterpreter(model_content=model))
    for step, seed in enumerate((0, 1, 0)):
        x = _quantized_input(model, name, seed)
        for k, (a, r, d) in enumerate(zip(ours(x), reference(x), default(x))):
            assert a.shape == r.shape
            np.testing.assert_array_equal(a, r, err_msg=f"invoke {step}, output {k}: reference kernels")
            assert np.abs(a.astype(np.int32) - d).max() <= 1, f"invoke {step}, output {k}: default kernels"
