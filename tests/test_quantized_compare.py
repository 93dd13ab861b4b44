"""Quantized (int8) comparisons against LiteRT: each input scaled by its own scale before the
comparison, so inputs with different scales or zero points compare by value.

Models from the official converter with full-integer quantization (which quantizes comparisons
in int8); numlite must equal LiteRT's reference kernels and its default kernels exactly (bool).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import numlite
from numlite.errors import NumliteError
from numlite.model import read_model, write_model
from test_quantized_ops import assert_matches_reference, quantized_model

S = tf.TensorSpec
F = tf.float32
PAIR = [S((3, 40), F), S((3, 40), F)]
COMPARISONS = {
    "less": tf.math.less,
    "less_equal": tf.math.less_equal,
    "greater": tf.math.greater,
    "greater_equal": tf.math.greater_equal,
    "equal": tf.math.equal,
    "not_equal": tf.math.not_equal,
}


def _two_scales(compare):
    # y's range is a third of x's: the inputs get different scales and zero points, so comparing
    # the stored integers would be wrong; the ReLU makes x's zero point the type's minimum.
    return lambda x, y: compare(tf.nn.relu(x) - 0.5, y * 0.3)


@pytest.mark.parametrize("name", COMPARISONS)
def test_comparison_of_differently_scaled_inputs(name):
    model = quantized_model(_two_scales(COMPARISONS[name]), PAIR, key=("compare", name))
    m = read_model(model)
    assert name.upper() in {m.op_name(o) for o in m.subgraphs[0].operators}
    assert_matches_reference(model, exact_default=True)


def test_comparison_with_a_broadcast_constant():
    model = quantized_model(lambda x: tf.math.greater(x, 0.25), [S((4, 33), F)], key=("compare", "const"))
    assert_matches_reference(model, exact_default=True)


def test_equal_values_at_one_scale_compare_equal():
    # One tensor compared with itself through two ops of equal parameters: all equal.
    model = quantized_model(lambda x: tf.math.equal(tf.nn.relu(x), tf.nn.relu(x)), [S((2, 16), F)],
                            key=("compare", "self"))
    assert_matches_reference(model, exact_default=True)


def test_int8_without_scale_is_refused():
    # The model's int8 inputs feed LESS directly; without their parameters LiteRT aborts.
    model = read_model(quantized_model(tf.math.less, PAIR, key=("compare", "plain")))
    graph = model.subgraphs[0]
    assert [model.op_name(o) for o in graph.operators] == ["LESS"]
    for i in graph.operators[0].inputs:
        graph.tensors[i].quantization = None
    with pytest.raises(NumliteError, match=r"node 0 \(LESS\).*int8"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()
