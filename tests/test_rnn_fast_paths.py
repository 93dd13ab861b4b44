"""The float LSTM kernels' fast paths (numlite/kernels/rnn.py: ``TanhLstm`` for tanh LSTMs
without CIFG or peepholes, ``FastLstm`` for the other float LSTMs without layer norm or diagonal
weights) against LiteRT, where tests/test_rnn_kernels.py does not reach them: projection and
both clips together with peepholes, CIFG or another activation; longer batch-major sequences;
weights that are graph inputs (not constants, so stacked at every invoke); and the same kernel
run on other arrays than the interpreter's (its per-binding views rebuilt, then rebuilt back).

Tolerance: float32 rtol = atol = 1e-5, as in tests/test_rnn_kernels.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter
from test_rnn_kernels import (GATES, OpModel, assert_matches_litert, lstm_spec, run_invokes,
                              sequence_input, unidirectional_lstm)

import numlite
from numlite.model.ir import Options

FAST_VARIANTS = {  # not layer norm, not diagonal: the fast paths
    "peephole_projection_clips": dict(peephole=True, projection=True, projection_bias=True, n_output=3,
                                      cell_clip=0.4, proj_clip=0.3),
    "cifg_projection_relu": dict(cifg=True, projection=True, n_output=2, activation=1),
    "none_peephole_projection": dict(activation=0, peephole=True, projection=True, projection_bias=True,
                                     n_output=3),
    "sign_bit_cifg_clip": dict(activation=5, cifg=True, cell_clip=0.5),
    "tanh_long_batch_major": dict(steps=13, batch=3, n_input=5, n_cell=8, projection=True, projection_bias=True,
                                  n_output=6, cell_clip=0.9, proj_clip=0.8),
    "tanh_long_time_major": dict(steps=11, batch=3, n_input=5, n_cell=8, time_major=True),
    "peephole_long_batch_major": dict(steps=9, batch=3, n_input=4, n_cell=6, peephole=True),
}


@pytest.mark.parametrize("variant", sorted(FAST_VARIANTS))
def test_fast_lstm_variants(variant):
    model, x = unidirectional_lstm(seed=7, **FAST_VARIANTS[variant])
    assert_matches_litert(model, [x])


def lstm_with_input_weights(peephole: bool) -> tuple[bytes, list[np.ndarray]]:
    """A batch-major UNIDIRECTIONAL_SEQUENCE_LSTM whose input and recurrent weights are graph
    inputs, and the values to feed: the input, then those weights."""
    batch, steps, n_input, n_cell = 2, 5, 3, 4
    w = lstm_spec(11, n_input, n_cell, batch=batch, peephole=peephole)
    options = Options("UnidirectionalSequenceLSTMOptions", fused_activation_function=4, cell_clip=0.0,
                      proj_clip=0.0, time_major=False)
    m = OpModel("UNIDIRECTIONAL_SEQUENCE_LSTM", options)
    m.input("input", (batch, steps, n_input))
    feeds = [sequence_input(12, steps, batch, n_input, False)]
    for kind in ("input_to_{}", "recurrent_to_{}"):
        for g in GATES:
            m.input(kind.format(g), w[kind.format(g)].shape)
            feeds.append(w[kind.format(g)])
    for g in ("input", "forget", "output"):
        m.weight(f"cell_to_{g}", w[f"cell_to_{g}"])
    for g in GATES:
        m.weight(f"{g}_bias", w[f"{g}_bias"])
    m.weight("projection", None).weight("projection_bias", None)
    m.state("output_state", (batch, n_cell)).state("cell_state", (batch, n_cell))
    return m.build([(batch, steps, n_cell)]), feeds


@pytest.mark.parametrize("peephole", [False, True], ids=["tanh_path", "general_fast_path"])
def test_lstm_weights_as_graph_inputs(peephole):
    model, feeds = lstm_with_input_weights(peephole)
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("variant", ["plain", "peephole"])
def test_lstm_kernel_on_other_arrays(variant):
    """The kernel keeps views of the arrays it ran on; given other output and state arrays it
    must build new ones (and go back to the interpreter's after)."""
    model, x = unidirectional_lstm(seed=9, peephole=variant == "peephole")
    expected = run_invokes(litert_interpreter(model), [x], invokes=2)
    interpreter = numlite.Interpreter(model_content=model)
    first = run_invokes(interpreter, [x], invokes=1)
    assert_close(first[0][0], expected[0][0], what="interpreter, invoke 0: ")
    step = interpreter._subgraphs[0].steps[0]  # the LSTM node: its kernel and bound arrays
    ins = [None if a is None else a.copy() for a in step.ins]
    for state in (18, 19):
        ins[state][...] = 0  # fresh states, as LiteRT's first invoke
    for k in range(2):
        outs = [np.full_like(step.outs[0], np.nan)]
        step.kernel.eval(ins, outs)
        assert_close(outs[0], expected[k][0], what=f"other arrays, invoke {k}: ")
    interpreter.invoke()  # back on the interpreter's arrays, whose states saw one invoke
    output = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    assert_close(output, expected[1][0], what="interpreter, invoke 1: ")


STACKED_VARIANTS = {  # tanh LSTMs without projection: TanhLstm's stacked product [h | x_t | 1]
    "batch_1": dict(steps=9, batch=1, n_input=5, n_cell=8),
    "batch_3_clip": dict(steps=7, batch=3, n_input=4, n_cell=6, cell_clip=0.3),
    "time_major_batch_2": dict(steps=6, batch=2, n_input=3, n_cell=5, time_major=True),
}


@pytest.mark.parametrize("stacked", [True, False], ids=["stacked", "input_product_per_sequence"])
@pytest.mark.parametrize("variant", sorted(STACKED_VARIANTS))
def test_tanh_lstm_stacked_step_product(variant, stacked, monkeypatch):
    """Each step's gates as one product of ``[h | x_t | 1]`` with the stacked weights (inputs up
    to ``STACKED_MAX_INPUTS`` wide), or the sequence's input product once and the recurrent one
    per step: both give LiteRT's outputs and states over invokes that carry the state."""
    from numlite.kernels import rnn

    monkeypatch.setattr(rnn, "STACKED_MAX_INPUTS", 64 if stacked else 0)
    model, x = unidirectional_lstm(seed=3, **STACKED_VARIANTS[variant])
    assert_matches_litert(model, [x])
    interpreter = numlite.Interpreter(model_content=model)
    run_invokes(interpreter, [x], invokes=1)
    (step,) = interpreter.subgraph(0).steps
    kernel = getattr(step.kernel, "impl", step.kernel)
    fast = kernel.lstm.fast
    assert isinstance(fast, rnn.TanhLstm) and (fast.plan_.xh is not None) == stacked
    assert (kernel.gates.size == 0) == stacked  # the stacked rows need no input projections
