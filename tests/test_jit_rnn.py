"""The compiled recurrent ops (numlite/jit/kernels/rnn.py) against LiteRT: every option of the
float UNIDIRECTIONAL_SEQUENCE_LSTM, and the float RNN and UNIDIRECTIONAL_SEQUENCE_RNN, on one-op
models written with numlite's writer (the states are variable tensors, carried from one invoke
to the next, as LiteRT keeps them, and zeroed by ``reset_all_variables``), and numlite's fused
conversion of a Keras LSTM end to end."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter

import numlite

pytest.importorskip("numba")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from one_op_model import k, one_op, out, v, x  # noqa: E402

F = np.float32
TANH = 4


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NUMLITE_CACHE_DIR", str(tmp_path_factory.mktemp("jit-cache")))
        yield


def lstm_model(n_in=3, n=4, n_out=None, batch=2, steps=5, cifg=False, peephole=False, projection_bias=False,
               layer_norm=False, time_major=False, activation=TANH, cell_clip=0.0, proj_clip=0.0, seed=0):
    """One UNIDIRECTIONAL_SEQUENCE_LSTM; a projection when ``n_out`` is given."""
    rng = np.random.default_rng(seed)
    r = lambda *shape, low=-0.5, high=0.5: rng.uniform(low, high, shape).astype(F)  # noqa: E731
    width = n_out or n
    w, rec, bias = [k(r(n, n_in)) for _ in "ifco"], [k(r(n, width)) for _ in "ifco"], [k(r(n)) for _ in "ifco"]
    peep = [k(r(n)) for _ in "ifo"] if peephole else [None] * 3
    norm = [k(r(n, low=0.5, high=1.5)) for _ in "ifco"] if layer_norm else []
    if cifg:
        w[0] = rec[0] = bias[0] = peep[0] = None
        norm[:1] = [None] if layer_norm else []
    projection = [k(r(width, n)), k(r(width)) if projection_bias else None] if n_out else [None, None]
    shape = (steps, batch) if time_major else (batch, steps)
    ins = [x(r(*shape, n_in, low=-2, high=2)), *w, *rec, *peep, *bias, *projection,
           v(np.zeros((batch, width), F)), v(np.zeros((batch, n), F)), *norm]
    options = {"fused_activation_function": activation, "time_major": time_major, "cell_clip": cell_clip,
               "proj_clip": proj_clip}
    return one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [out(F, shape=(*shape, width))], options)


FORMS = {
    "plain": {},
    "time-major": {"time_major": True},
    "cifg": {"cifg": True},
    "peephole": {"peephole": True},
    "peephole-cifg-cell-clip": {"peephole": True, "cifg": True, "cell_clip": 0.4},
    "projection": {"n_out": 3},
    "projection-bias-clip": {"n_out": 5, "projection_bias": True, "proj_clip": 0.3},
    "layer-norm": {"layer_norm": True},
    "layer-norm-cifg-peephole": {"layer_norm": True, "cifg": True, "peephole": True},
    "relu": {"activation": 1},
    "relu6": {"activation": 3},
    "no-activation": {"activation": 0},
    "wide": {"n": 33, "n_in": 17, "batch": 3},
}


def _invokes(interpreter, feeds, times: int) -> list[np.ndarray]:
    interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(d["index"], value)
    outputs = []
    for _ in range(times):  # the second invoke starts from the state the first one left
        interpreter.invoke()
        outputs.append(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))
    return outputs


@pytest.mark.parametrize("form", FORMS)
def test_compiled_lstm_matches_litert(form):
    model, feeds = lstm_model(**FORMS[form])
    want = _invokes(litert_interpreter(model), feeds, 2)
    compiled = numlite.Interpreter(model_content=model, jit=True)
    got = _invokes(compiled, feeds, 2)
    assert compiled.jit_report()["subgraphs"][0]["compiled"], compiled.jit_report()
    for step, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, what=f"{form}, invoke {step}")
    assert not np.allclose(want[0], want[1])  # the state was carried: the two invokes differ
    compiled.reset_all_variables()  # back to zero states: the first invoke's output again
    compiled.invoke()
    assert_close(compiled.get_tensor(compiled.get_output_details()[0]["index"]), want[0], what=f"{form} after reset")


def rnn_model(op: str, activation: int, time_major: bool = False, seed: int = 0):
    """One RNN (a single step, input ``[batch, n_in]``) or UNIDIRECTIONAL_SEQUENCE_RNN of 3 inputs
    and 5 units over 4 steps, batch 2; its state a variable tensor."""
    rng = np.random.default_rng(seed)
    r = lambda *shape, scale=0.6: rng.uniform(-scale, scale, shape).astype(F)  # noqa: E731
    n_in, n, batch, steps = 3, 5, 2, 4
    shape = (batch, n_in) if op == "RNN" else ((steps, batch, n_in) if time_major else (batch, steps, n_in))
    ins = [x(r(*shape, scale=2.0)), k(r(n, n_in)), k(r(n, n)), k(r(n)), v(np.zeros((batch, n), F))]
    options = {"fused_activation_function": activation}
    if op != "RNN":
        options["time_major"] = time_major
    return one_op(op, ins, [out(F, shape=(*shape[:-1], n))], options)


RNN_FORMS = {
    "rnn-tanh": ("RNN", TANH, False),
    "rnn-relu": ("RNN", 1, False),
    "sequence-rnn-tanh": ("UNIDIRECTIONAL_SEQUENCE_RNN", TANH, False),
    "sequence-rnn-time-major-relu6": ("UNIDIRECTIONAL_SEQUENCE_RNN", 3, True),
}


@pytest.mark.parametrize("form", RNN_FORMS)
def test_compiled_rnn_state_across_invokes_matches_litert(form):
    """Three invokes, each starting from the state the one before left (LiteRT's outputs
    differ from invoke to invoke), then ``reset_all_variables``: the first invoke's output again."""
    model, feeds = rnn_model(*RNN_FORMS[form])
    want = _invokes(litert_interpreter(model), feeds, 3)
    compiled = numlite.Interpreter(model_content=model, jit=True)
    got = _invokes(compiled, feeds, 3)
    assert compiled.jit_report()["subgraphs"][0]["compiled"], compiled.jit_report()
    assert np.max(np.abs(want[0])) > 0.1  # outputs of order one
    for step, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, what=f"{form}, invoke {step}")
    assert not np.allclose(want[0], want[1])  # the state was carried: the invokes differ
    compiled.reset_all_variables()
    compiled.invoke()
    assert_close(compiled.get_tensor(compiled.get_output_details()[0]["index"]), want[0], what=f"{form} after reset")


def test_numlite_fused_keras_lstm_runs_compiled():
    """A Keras LSTM as numlite's converter fuses it (one UNIDIRECTIONAL_SEQUENCE_LSTM, then the
    Dense layer), compiled whole, against LiteRT on the same file."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((20, 16), batch_size=1), keras.layers.LSTM(32), keras.layers.Dense(10)])
    data = numlite.TFLiteConverter.from_keras_model(model).convert()
    feeds = [np.random.default_rng(1).uniform(-1, 1, (1, 20, 16)).astype(F)]
    compiled = numlite.Interpreter(model_content=data, jit=True)
    got = _invokes(compiled, feeds, 1)[0]
    assert compiled.jit_report()["subgraphs"][0]["compiled"], compiled.jit_report()
    want = _invokes(litert_interpreter(data), feeds, 1)[0]
    assert np.max(np.abs(want)) > 0.1  # outputs of order one, not a vanishing signal
    assert_close(got, want)


def recurrent_ops_model() -> tuple[bytes, list[np.ndarray]]:
    """One graph of the other stateful recurrent ops the compiled engine covers, each with its
    variable states: SVDF (rank 2, bias, TANH), BIDIRECTIONAL_SEQUENCE_RNN (time-major, merged
    outputs of 3 + 2 units, the backward direction reading the aux input), BIDIRECTIONAL_SEQUENCE_LSTM
    (batch-major, two outputs, peepholes) and the full-kernel LSTM op (CIFG, projection).

    Two forms are left out because LiteRT's own results there are not a reference: a batch-major
    BIDIRECTIONAL_SEQUENCE_LSTM with merged outputs (LiteRT's second batch row comes out
    saturated, unlike its unmerged outputs of the same inputs), and a batch-major
    BIDIRECTIONAL_SEQUENCE_RNN whose backward input is the aux input (LiteRT's batch-major loop
    reads the main input there, its time-major loop the aux input; numlite reads the aux input
    in both)."""
    from one_op_model import Graph, model

    rng = np.random.default_rng(3)
    r = lambda *shape, low=-0.5, high=0.5: rng.uniform(low, high, shape).astype(F)  # noqa: E731
    zeros = lambda *shape: v(np.zeros(shape, F))  # noqa: E731
    g = Graph()

    def node(op, inputs, n_outputs, options):
        ins = [-1 if spec is None else g.add(spec) for spec in inputs]
        outs = [g.add(out(F)) for _ in range(n_outputs)]
        g.op(op, ins, outs, options)
        g.output(*outs)

    node("SVDF", [x(r(2, 3, low=-2, high=2)), k(r(4, 3)), k(r(4, 3)), k(r(2)), zeros(2, 12)], 1,
         {"rank": 2, "fused_activation_function": 4})
    rnn = lambda units: [k(r(units, 3)), k(r(units, units)), k(r(units)), zeros(2, units)]  # noqa: E731
    node("BIDIRECTIONAL_SEQUENCE_RNN", [x(r(4, 2, 3, low=-2, high=2)), *rnn(3), *rnn(2), x(r(4, 2, 3, low=-2, high=2)), None, None],
         1, {"time_major": True, "fused_activation_function": 4, "merge_outputs": True})
    lstm = lambda n: [*(k(r(n, 3)) for _ in "ifco"), *(k(r(n, n)) for _ in "ifco"), *(k(r(n)) for _ in "ifo"),  # noqa: E731
                      *(k(r(n)) for _ in "ifco"), None, None]
    node("BIDIRECTIONAL_SEQUENCE_LSTM", [x(r(2, 4, 3, low=-2, high=2)), *lstm(4), *lstm(4), *(zeros(2, 4) for _ in range(4)),
                                         *[None] * 9], 2,
         {"fused_activation_function": 4, "time_major": False, "merge_outputs": False})
    cifg = [None, *(k(r(4, 3)) for _ in "fco"), None, *(k(r(4, 2)) for _ in "fco"), None, None, None, None,
            *(k(r(4)) for _ in "fco"), k(r(2, 4)), k(r(2))]
    node("LSTM", [x(r(2, 3, low=-2, high=2)), *cifg, zeros(2, 2), zeros(2, 4)], 1, {"fused_activation_function": 4})
    return model(g)


@pytest.mark.parametrize("jit", [False, True], ids=["numpy", "jit"])
def test_recurrent_states_carry_across_invokes(jit):
    """Three invokes of the merged recurrent ops, each starting from the states the last one
    left, against LiteRT's three invokes, on both engines (the jit case compiled whole); then
    ``reset_all_variables`` gives the first invoke's outputs again."""
    data, feeds = recurrent_ops_model()
    reference = litert_interpreter(data)
    interpreter = numlite.Interpreter(model_content=data, jit=jit)
    for engine in (reference, interpreter):
        engine.allocate_tensors()
        for d, value in zip(engine.get_input_details(), feeds):
            engine.set_tensor(d["index"], value)
    assert not jit or interpreter.jit_report()["subgraphs"][0]["compiled"], interpreter.jit_report()
    first = None
    for step in range(3):
        reference.invoke()
        interpreter.invoke()
        want = [reference.get_tensor(d["index"]) for d in reference.get_output_details()]
        got = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        for n, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, what=f"output {n}, invoke {step}")
            assert np.max(np.abs(b)) > 0.05, f"output {n} vanishes"  # a signal the states change
        first = first or want
    assert all(not np.allclose(a, b) for a, b in zip(first, want))  # every op carried its state
    interpreter.reset_all_variables()
    interpreter.invoke()
    for n, b in enumerate(first):
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[n]["index"]), b, what=f"output {n} after reset")
