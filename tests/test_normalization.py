"""SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION against LiteRT:
ranks, beta, large logits, the L2 epsilon, the kernel's refusal of fused activations and LRN's
radius/bias/alpha/beta."""

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert, op_names, run_litert
from numlite.model import read_model, write_model

SHAPES = [(7,), (3, 5), (2, 3, 4), (2, 2, 3, 5), (1, 2, 2, 2, 6)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax(shape):
    model = convert(lambda x: tf.nn.softmax(x), [tf.TensorSpec(shape, tf.float32)], key=("softmax", shape))
    assert "SOFTMAX" in op_names(model)
    assert_matches_litert(model, seed=1)


@pytest.mark.parametrize("beta", [0.5, 2.0, -1.0])
def test_softmax_beta(beta):
    """The converter always writes beta=1 (a scale stays a separate MUL), so beta is set with
    numlite's writer and LiteRT judges."""
    model = read_model(convert(lambda x: tf.nn.softmax(x), [tf.TensorSpec((3, 6), tf.float32)], key=("softmax", (3, 6))))
    model.subgraphs[0].operators[0].builtin_options.beta = beta
    assert_matches_litert(write_model(model), seed=2)


def test_softmax_large_logits_are_stable():
    model = convert(lambda x: tf.nn.softmax(x), [tf.TensorSpec((2, 4), tf.float32)], key="softmax-large")
    x = np.array([[1000, 999, -1000, 0], [-500, -501, -502, -800]], np.float32)
    expected = assert_matches_litert(model, [x])
    assert np.isfinite(expected[0]).all()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_log_softmax(shape):
    model = convert(lambda x: tf.nn.log_softmax(x), [tf.TensorSpec(shape, tf.float32)], key=("log_softmax", shape))
    assert "LOG_SOFTMAX" in op_names(model)
    assert_matches_litert(model, seed=3)


def test_log_softmax_large_logits_are_stable():
    model = convert(lambda x: tf.nn.log_softmax(x), [tf.TensorSpec((2, 3), tf.float32)], key="log_softmax-large")
    x = np.array([[300, 0, -300], [88, 89, 90]], np.float32)
    # Log-probabilities of order 600 only agree to float32 precision relative to their size.
    assert_matches_litert(model, [x], rtol=1e-5, atol=1e-4)


def _l2_model(shape):
    return convert(lambda x: tf.math.l2_normalize(x, axis=-1), [tf.TensorSpec(shape, tf.float32)], key=("l2", shape))


@pytest.mark.parametrize("shape", SHAPES[:4], ids=str)
def test_l2_normalization(shape):
    model = _l2_model(shape)
    assert op_names(model) == ["L2_NORMALIZATION"], op_names(model)
    assert_matches_litert(model, seed=4)


def test_l2_normalization_epsilon_clamps_the_norm():
    """LiteRT divides by max(norm, 1e-6), not by sqrt(max(norm^2, 1e-6)) as TensorFlow does:
    tiny rows are scaled up to at most norm/1e-6, zero rows stay zero."""
    model = _l2_model((4, 3))
    x = np.array([[1e-8, 2e-8, 0], [0, 0, 0], [1e-4, -1e-4, 0], [3e-7, 4e-7, 0]], np.float32)
    expected = assert_matches_litert(model, [x])
    np.testing.assert_allclose(expected[0][0], [0.01, 0.02, 0], rtol=1e-5)  # the premise


def test_l2_normalization_rank_5():
    """Older LiteRT kernels stopped at rank 4; the current one takes any rank."""
    model = _l2_model((1, 2, 2, 2, 3))
    assert op_names(model) == ["L2_NORMALIZATION"]
    assert_matches_litert(model, seed=5)


@pytest.mark.parametrize("activation", [1, 3])
def test_l2_normalization_fused_activation_is_rejected(activation):
    """The converter never fuses an activation into L2_NORMALIZATION and LiteRT refuses one."""
    model = read_model(_l2_model((2, 3)))
    model.subgraphs[0].operators[0].builtin_options.fused_activation_function = activation
    data = write_model(model)
    with pytest.raises(RuntimeError, match="activation"):
        run_litert(data, [np.ones((2, 3), np.float32)])
    with pytest.raises(numlite.PrepareError, match="activation"):
        numlite.Interpreter(model_content=data).allocate_tensors()


def test_softmax_rejects_integer_input():
    model = read_model(convert(lambda x: tf.nn.softmax(x), [tf.TensorSpec((2, 3), tf.float32)], key=("softmax", (2, 3))))
    graph = model.subgraphs[0]
    for t in graph.inputs + graph.outputs:
        graph.tensors[t].type = "INT32"
    with pytest.raises(numlite.PrepareError, match="dtype int32"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


# ----------------------------------------------------------------------------- LOCAL_RESPONSE_NORMALIZATION

# (input shape, depth_radius, bias, alpha, beta): beta 1 and 0.5 take LiteRT's special cases;
# radii of 0, of about the channel count and beyond it.
LRN_CASES = [
    ((1, 3, 3, 8), 2, 1.5, 0.5, 0.75),
    ((2, 2, 3, 5), 3, 1.0, 0.2, 1.0),
    ((2, 3, 2, 5), 1, 2.0, 1.0, 0.5),
    ((1, 2, 2, 4), 0, 1.0, 1.0, 0.75),
    ((1, 2, 3, 6), 9, 0.5, 0.1, 2.0),
    ((3, 1, 1, 16), 5, 1.0, 1e-4, 0.75),  # the AlexNet settings
]


@pytest.mark.parametrize("case", LRN_CASES, ids=str)
def test_local_response_normalization(case):
    shape, radius, bias, alpha, beta = case
    model = convert(
        lambda x: tf.nn.local_response_normalization(x, radius, bias, alpha, beta),
        [tf.TensorSpec(shape, tf.float32)],
        key=("lrn", case),
    )
    assert op_names(model) == ["LOCAL_RESPONSE_NORMALIZATION"]
    x = np.random.default_rng(6).uniform(-2, 2, shape).astype(np.float32)
    (expected,) = assert_matches_litert(model, [x])
    reference = tf.nn.local_response_normalization(x, radius, bias, alpha, beta).numpy()
    np.testing.assert_allclose(expected, reference, rtol=1e-5, atol=1e-5)  # the premise


def test_local_response_normalization_rejects_rank_3():
    model = read_model(
        convert(
            lambda x: tf.nn.local_response_normalization(x, 2, 1.5, 0.5, 0.75),
            [tf.TensorSpec((1, 3, 3, 8), tf.float32)],
            key=("lrn", LRN_CASES[0]),
        )
    )
    g = model.subgraphs[0]
    for t in g.inputs + g.outputs:
        g.tensors[t].shape = (3, 3, 8)
        g.tensors[t].shape_signature = None
    data = write_model(model)
    with pytest.raises(RuntimeError):
        run_litert(data, [np.ones((3, 3, 8), np.float32)])
    with pytest.raises(numlite.PrepareError, match="rank 4"):
        numlite.Interpreter(model_content=data).allocate_tensors()


@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("shape", [(1, 10), (4, 6)], ids=str)
def test_softmax_views_reused_across_invokes(shape, beta):
    """SOFTMAX reduces into a buffer of its own, on views of its arrays made at the first
    invoke (one row: a vector and 0-d maximum and sum): new logits at every invoke of one
    interpreter still give LiteRT's probabilities."""
    model = read_model(convert(lambda x: tf.nn.softmax(x), [tf.TensorSpec(shape, tf.float32)], key=("softmax", shape)))
    model.subgraphs[0].operators[0].builtin_options.beta = beta
    content = write_model(model)
    interpreter = numlite.Interpreter(model_content=content)
    interpreter.allocate_tensors()
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-4, 4, shape).astype(np.float32)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        np.testing.assert_allclose(actual, run_litert(content, [x])[0], rtol=1e-5, atol=1e-5)


def _many_rows_softmax(beta=1.0):
    model = read_model(convert(lambda x: tf.nn.softmax(x), [tf.TensorSpec((40, 33), tf.float32)], key=("softmax", (40, 33))))
    model.subgraphs[0].operators[0].builtin_options.beta = beta
    return write_model(model)


@pytest.mark.parametrize("beta", [1.0, 0.5, -1.0])
def test_softmax_of_many_rows_shifted_by_the_tensor_maximum(beta):
    """From normalization.SHIFTED_FROM_ROWS rows (with beta > 0) every row is shifted by the
    tensor's maximum: LiteRT's probabilities on ordinary logits, on rows whose logits sit far
    below the others' (exponentials that would vanish: every row then takes its own maximum),
    and on infinities and NaN (each row as LiteRT computes it)."""
    from numlite.kernels import normalization

    content = _many_rows_softmax(beta)
    interpreter = numlite.Interpreter(model_content=content)
    interpreter.allocate_tensors()
    (step,) = interpreter.subgraph(0).plan
    assert step.kernel.impl.shifted == (beta > 0) and 40 >= normalization.SHIFTED_FROM_ROWS
    rng = np.random.default_rng(4)
    ordinary = rng.uniform(-6, 6, (40, 33)).astype(np.float32)
    far_below = ordinary.copy()
    far_below[7] -= 300  # alone it is an ordinary softmax; against the others' maximum it would vanish
    far_below[8] -= 60
    special = ordinary.copy()
    special[3, 5], special[4, :], special[5, 2], special[6, 0] = np.inf, -np.inf, np.nan, -np.inf
    for x in (ordinary, far_below, special, ordinary + 50):
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        expected = run_litert(content, [x])[0]
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-7)
        assert np.array_equal(np.isnan(actual), np.isnan(expected))
