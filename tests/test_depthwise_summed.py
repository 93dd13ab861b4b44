"""DEPTHWISE_CONV_2D's einsum paths: every tap of a block of output rows summed by one einsum
over a strided view of the padded input, against LiteRT. Stride-1 layers of multiplier 1 take
the rows form by default; the channel threshold of the strided (windows) form is lowered so
that all of test_conv.py's multiplier-1 cases take an einsum too."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert
from numlite.kernels import conv, parallel
from test_conv import DEPTHWISE_CASES, _as_graph_input, _edit, _weights
from test_parallel_kernels import _assert_split_matches_litert


@pytest.fixture
def summed_everywhere(monkeypatch):
    monkeypatch.setattr(conv, "SUMMED_MIN_CHANNELS_STRIDED", 1)


def _depthwise_kernel(model, **options):
    interpreter = numlite.Interpreter(model_content=model, **options)
    interpreter.allocate_tensors()
    step = next(s for s in interpreter.subgraph(0).plan if s.op_name == "DEPTHWISE_CONV_2D")
    return getattr(step.kernel, "impl", None) or step.kernel


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=str)
def test_summed_depthwise_matches_litert(summed_everywhere, case):
    shape, kernel, multiplier, strides, padding, dilations = case
    w = _weights(kernel + (shape[3], multiplier), 20)
    b = _weights((shape[3] * multiplier,), 21)
    model = convert(
        lambda x: tf.nn.relu6(tf.nn.depthwise_conv2d(x, w, (1,) + strides + (1,), padding, dilations=dilations) + b),
        [tf.TensorSpec(shape, tf.float32)],
        key=("depthwise summed", case),
    )
    # Multiplier 1 with more than one tap takes the einsum path; the others keep the taps.
    expected = None if multiplier != 1 or kernel == (1, 1) else "rows" if strides[1] == 1 else "windows"
    assert _depthwise_kernel(model).summed == expected
    assert_matches_litert(model)


FORMS = [((1, 9, 9, 128), 2, "windows"), ((1, 9, 9, 8), 2, None), ((1, 7, 7, 384), 1, "rows"), ((1, 6, 5, 3), 1, "rows")]


@pytest.mark.parametrize("shape,stride,form", FORMS)
def test_forms_chosen_by_default(shape, stride, form):
    w = _weights((5, 5, shape[3], 1), 22)
    b = _weights((shape[3],), 23)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, stride, stride, 1), "SAME") + b,
        [tf.TensorSpec(shape, tf.float32)],
        key=("depthwise wide", shape, stride),
    )
    assert _depthwise_kernel(model).summed == form
    assert_matches_litert(model)


def test_summed_depthwise_split_over_threads(summed_everywhere, monkeypatch):
    monkeypatch.setattr(parallel, "MIN_SPLIT_WORK", 1)
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)
    w = _weights((3, 3, 6, 1), 24)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, 2, 2, 1), "SAME"),
        [tf.TensorSpec((2, 13, 11, 6), tf.float32)],
        key="dw summed split",
    )
    kernel = _assert_split_matches_litert(model)
    assert kernel.summed


@pytest.mark.parametrize("stride", [1, 2])
def test_summed_depthwise_with_weights_known_only_at_run_time(summed_everywhere, stride):
    """The filter and bias are graph inputs: read from the input lists at every eval."""
    w, b = _weights((3, 3, 4, 1), 25), _weights((4,), 26)
    model = convert(
        lambda x: tf.nn.depthwise_conv2d(x, w, (1, stride, stride, 1), "SAME") + b,
        [tf.TensorSpec((1, 7, 6, 4), tf.float32)],
        key=("dw summed runtime", stride),
    )
    values = []

    def inputs(m, g, op):
        values.extend(_as_graph_input(m, g, i) for i in op.inputs[1:])

    model = _edit(model, inputs)
    assert _depthwise_kernel(model).summed
    x = np.random.default_rng(27).uniform(-2, 2, (1, 7, 6, 4)).astype(np.float32)
    assert_matches_litert(model, [x] + values)
    assert_matches_litert(model, [x] + [v * 2 for v in values])
