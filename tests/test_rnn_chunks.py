"""Long sequences run in chunks of steps (``rnn.run_sequence``), each from the state the
previous one left, so that a sequence op's per-step buffers stay under
``SEQUENCE_CHUNK_BYTES``. Here the bound is made tiny, so every variant of the LSTM and RNN
sequence ops (fast paths, stacked rows, layer norm, diagonal weights, both directions,
batch- and time-major) runs in chunks of one or a few steps: the outputs and carried states
must still be LiteRT's over several invokes."""

from __future__ import annotations

import pytest
from test_rnn_fast_paths import FAST_VARIANTS, STACKED_VARIANTS
from test_rnn_kernels import (BIDI_RNN_VARIANTS, BIDI_VARIANTS, LSTM_VARIANTS, assert_matches_litert,
                              bidirectional_lstm, bidirectional_rnn, sequence_rnn, unidirectional_lstm)

import numlite
from numlite.kernels import rnn


@pytest.fixture(params=[1, 200], ids=["one step", "a few steps"])
def small_chunks(request, monkeypatch):
    monkeypatch.setattr(rnn, "SEQUENCE_CHUNK_BYTES", request.param)
    return request.param


def _directions(model: bytes) -> list:
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    kernel = interpreter.subgraph(0).plan[0].kernel
    kernel = getattr(kernel, "impl", kernel)
    return [d for d in (getattr(kernel, name, None) for name in ("lstm", "rnn", "fw", "bw")) if d is not None]


@pytest.mark.parametrize("variant", sorted(LSTM_VARIANTS))
def test_unidirectional_lstm_in_chunks(small_chunks, variant):
    model, x = unidirectional_lstm(**LSTM_VARIANTS[variant])
    assert all(d.chunk == 1 or small_chunks > 1 for d in _directions(model))
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("variant", sorted(FAST_VARIANTS))
def test_fast_lstm_in_chunks(small_chunks, variant):
    model, x = unidirectional_lstm(seed=7, **FAST_VARIANTS[variant])
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("variant", sorted(STACKED_VARIANTS))
def test_stacked_tanh_lstm_in_chunks(small_chunks, variant):
    model, x = unidirectional_lstm(seed=3, **STACKED_VARIANTS[variant])
    (direction,) = _directions(model)
    assert direction.fast.stacked is not None and direction.chunk < max(x.shape[:2])  # of the steps
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("variant", sorted(BIDI_VARIANTS))
def test_bidirectional_lstm_in_chunks(small_chunks, variant):
    model, inputs = bidirectional_lstm(**BIDI_VARIANTS[variant])
    assert_matches_litert(model, inputs)


@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
def test_sequence_rnn_in_chunks(small_chunks, time_major):
    model, x = sequence_rnn(4, time_major)
    assert all(d.chunk == 1 or small_chunks > 1 for d in _directions(model))
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("variant", sorted(BIDI_RNN_VARIANTS))
def test_bidirectional_rnn_in_chunks(small_chunks, variant):
    model, inputs = bidirectional_rnn(**BIDI_RNN_VARIANTS[variant])
    assert_matches_litert(model, inputs)


def test_long_sequence_buffers_stay_bounded():
    """At the default bound, a 600-step LSTM keeps per-step buffers for a chunk of steps, not
    for the whole sequence, and still gives LiteRT's outputs."""
    model, x = unidirectional_lstm(steps=600, batch=1, n_input=80, n_cell=128, seed=11)
    (direction,) = _directions(model)
    width = direction.bias_width() * 4  # bytes of one step's input projections
    assert direction.chunk < 600 and direction.chunk * width <= rnn.SEQUENCE_CHUNK_BYTES
    assert_matches_litert(model, [x], invokes=2)
