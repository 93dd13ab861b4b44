"""Builds TF1 graphs with control flow v1 (Switch/Merge/Enter/Exit/NextIteration/LoopCond), frozen.

Run as a script in a fresh process (control flow v2 must be off before any graph is built):
``python tests/tf1_graphs.py OUT_DIR``. For every case it writes ``OUT_DIR/<case>.pb`` (a frozen
GraphDef) and ``OUT_DIR/<case>.npz`` (the inputs fed and the outputs ``tf.compat.v1.Session``
computed), and ``OUT_DIR/cases.json`` (input and output tensor names per case).
"""

from __future__ import annotations

import collections
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_v2_behavior()
v1.disable_control_flow_v2()

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def placeholder(shape, name, dtype=tf.float32):
    return v1.placeholder(dtype, shape, name=name)


def rng_inputs(feeds):
    rng = np.random.default_rng(0)
    values = {}
    for t, spec in feeds.items():
        if isinstance(spec, np.ndarray):
            values[t] = spec
        else:
            values[t] = rng.standard_normal(spec).astype(np.float32)
    return values


@case
def cond():
    x = placeholder([3], "x")
    y = placeholder([3], "y")
    pred = tf.reduce_sum(x) > tf.reduce_sum(y)
    out = v1.cond(pred, lambda: x * 2.0 + y, lambda: tf.square(y) - 1.0)
    return {x: [3], y: [3]}, [tf.identity(out, "out")], [{x: np.float32([5, 5, 5]), y: np.float32([1, 2, 3])}]


@case
def cond_several_outputs():
    x = placeholder([2, 3], "x")
    flag = placeholder([], "flag", tf.bool)

    def then():
        return tf.reduce_sum(x, 1), x * 3.0, tf.constant(7, tf.int32)

    def other():
        return tf.reduce_max(x, 1), x, tf.shape(x)[0]  # forwards x unchanged

    a, b, c = v1.cond(flag, then, other)
    outs = [tf.identity(a, "a"), tf.identity(b, "b"), tf.identity(c, "c")]
    return {x: [2, 3], flag: np.array(True)}, outs, [{flag: np.array(False)}]


@case
def while_loop():
    x = placeholder([4], "x")
    i = tf.constant(0)
    _, out = v1.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * 1.5 + 1.0), [i, x])
    return {x: [4]}, [tf.identity(out, "out")], []


@case
def while_invariants():
    x = placeholder([3], "x")
    w = placeholder([3, 3], "w")
    n = placeholder([], "n", tf.int32)
    bias = tf.constant([0.1, -0.2, 0.3])

    def body(i, h, total):
        h = tf.tanh(tf.linalg.matvec(w, h) + bias)  # w, bias: loop invariants
        return i + 1, h, total + tf.reduce_sum(h)

    i, h, total = v1.while_loop(lambda i, h, t: i < n, body, [tf.constant(0), x, tf.constant(0.0)])
    outs = [tf.identity(i, "i"), tf.identity(h, "h"), tf.identity(total, "total")]
    return {x: [3], w: [3, 3], n: np.array(4, np.int32)}, outs, [{n: np.array(0, np.int32)}]


@case
def nested_while_2():
    x = placeholder([2], "x")

    def outer(i, acc):
        def inner(j, a):
            return j + 1, a + x * tf.cast(i * j, tf.float32)

        _, acc = v1.while_loop(lambda j, a: j < i, inner, [tf.constant(0), acc])
        return i + 1, acc

    _, out = v1.while_loop(lambda i, a: i < 4, outer, [tf.constant(0), tf.zeros([2])])
    return {x: [2]}, [tf.identity(out, "out")], []


@case
def nested_while_3():
    x = placeholder([2], "x")

    def level1(i, acc):
        def level2(j, acc):
            def level3(k, acc):
                return k + 1, acc * 0.9 + x * tf.cast(i + j + k, tf.float32)

            _, acc = v1.while_loop(lambda k, a: k < 2, level3, [tf.constant(0), acc])
            return j + 1, acc

        _, acc = v1.while_loop(lambda j, a: j < 3, level2, [tf.constant(0), acc])
        return i + 1, acc

    _, out = v1.while_loop(lambda i, a: i < 3, level1, [tf.constant(0), tf.ones([2])])
    return {x: [2]}, [tf.identity(out, "out")], []


@case
def cond_in_while():
    x = placeholder([3], "x")

    def body(i, v):
        v = v1.cond(tf.equal(i % 2, 0), lambda: v * 2.0, lambda: v - x)
        return i + 1, v

    _, out = v1.while_loop(lambda i, v: i < 5, body, [tf.constant(0), x])
    return {x: [3]}, [tf.identity(out, "out")], []


@case
def while_in_cond():
    x = placeholder([3], "x")
    flag = placeholder([], "flag", tf.bool)

    def looped():
        _, v = v1.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * v + 0.5), [tf.constant(0), x])
        return v

    out = v1.cond(flag, looped, lambda: x - 1.0)
    return {x: [3], flag: np.array(True)}, [tf.identity(out, "out")], [{flag: np.array(False)}]


LSTMState = collections.namedtuple("LSTMState", ["c", "h"])


@case
def while_growing():
    """A loop variable whose shape changes every iteration (a shape invariant)."""
    x = placeholder([1, 2], "x")

    def body(i, rows):
        return i + 1, tf.concat([rows, rows[-1:] * 2.0 + 1.0], axis=0)

    _, rows = v1.while_loop(lambda i, r: i < 3, body, [tf.constant(0), x],
                            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])])
    return {x: [1, 2]}, [tf.identity(rows, "rows")], []


@case
def control_dependencies():
    """Control edges inside a loop body and a branch (an assertion, an ordering)."""
    x = placeholder([3], "x")

    def body(i, v):
        with tf.control_dependencies([v1.assert_less(i, 100)]):
            v = tf.identity(v * 0.5)
        with tf.control_dependencies([v]):
            w = v1.cond(tf.reduce_sum(v) > 0, lambda: v + 1.0, lambda: v - 1.0)
        return i + 1, w

    _, out = v1.while_loop(lambda i, v: i < 4, body, [tf.constant(0), x])
    return {x: [3]}, [tf.identity(out, "out")], []


@case
def map_fn_and_scan():
    """tf.map_fn and tf.scan under control flow v1: TensorArrays read and written in a loop."""
    x = placeholder([4, 3], "x")
    squared = tf.map_fn(lambda row: tf.reduce_sum(row * row), x)
    running = v1.scan(lambda acc, row: acc * 0.5 + row, x, initializer=tf.zeros([3]))
    return {x: [4, 3]}, [tf.identity(squared, "squared"), tf.identity(running, "running")], []


@case
def case_and_max_iterations():
    """tf.case (nested v1 conds) and a while loop bounded by maximum_iterations."""
    x = placeholder([2], "x")
    k = placeholder([], "k", tf.int32)
    picked = tf.case([(tf.equal(k, 0), lambda: x + 1.0), (tf.equal(k, 1), lambda: x * 3.0)],
                     default=lambda: -x, exclusive=True)
    _, looped = v1.while_loop(lambda i, v: tf.reduce_sum(v) < 1e6, lambda i, v: [i + 1, v * 2.0 + 1.0],
                              [tf.constant(0), picked], maximum_iterations=5)
    outs = [tf.identity(picked, "picked"), tf.identity(looped, "looped")]
    return {x: [2], k: np.array(0, np.int32)}, outs, [{k: np.array(1, np.int32)}, {k: np.array(7, np.int32)}]


class LSTMCell:
    """TF1's ``LSTMCell`` math (one kernel over [input, h], gates i, j, f, o, forget bias 1),
    written out: TF 2.16+ keeps the original class in Keras 2, which this project does not
    install (``tf_keras`` would replace the ``tensorflow-cpu`` package)."""

    def __init__(self, units):
        self.units = units
        self.state_size = LSTMState(units, units)
        self.output_size = units

    def zero_state(self, batch_size, dtype):
        zeros = tf.zeros([batch_size, self.units], dtype)
        return LSTMState(zeros, zeros)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        return self.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        c, h = state
        with v1.variable_scope("lstm_cell", reuse=v1.AUTO_REUSE):
            kernel = v1.get_variable("kernel", [inputs.shape[-1] + self.units, 4 * self.units],
                                     initializer=v1.glorot_uniform_initializer(seed=1))
            bias = v1.get_variable("bias", [4 * self.units], initializer=v1.random_normal_initializer(seed=2))
        gates = tf.nn.bias_add(tf.matmul(tf.concat([inputs, h], 1), kernel), bias)
        i, j, f, o = tf.split(gates, 4, axis=1)
        c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
        h = tf.tanh(c) * tf.sigmoid(o)
        return h, LSTMState(c, h)


@case
def dynamic_rnn_lstm():
    x = placeholder([2, 5, 3], "x")
    cell = LSTMCell(4)
    outputs, state = v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    outs = [tf.identity(outputs, "outputs"), tf.identity(state.c, "c"), tf.identity(state.h, "h")]
    return {x: [2, 5, 3]}, outs, []


@case
def tensor_array_accumulate():
    x = placeholder([4], "x")
    ta = tf.TensorArray(tf.float32, size=6, element_shape=[4])

    def body(i, v, ta):
        v = v * 0.5 + tf.cast(i, tf.float32)
        return i + 1, v, ta.write(i, v)

    _, _, ta = v1.while_loop(lambda i, v, ta: i < 6, body, [tf.constant(0), x, ta])
    return {x: [4]}, [tf.identity(ta.stack(), "stacked")], []


@case
def while_dynamic_batch():
    x = placeholder([None, 3], "x")

    def body(i, v):
        return i + 1, tf.nn.relu(v - 0.25) + tf.reduce_mean(v, axis=1, keepdims=True)

    _, out = v1.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])
    return {x: [2, 3]}, [tf.identity(out, "out")], [{x: np.arange(15, dtype=np.float32).reshape(5, 3) / 7}]


def build(name, out_dir):
    graph = tf.Graph()
    with graph.as_default():
        feeds, outputs, extra_feeds = CASES[name]()
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            base = rng_inputs(feeds)
            runs = [base] + [{**base, **extra} for extra in extra_feeds]
            results = [session.run(outputs, {t: v for t, v in feed.items()}) for feed in runs]
            names = [t.name.split(":")[0] for t in outputs]
            frozen = v1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), names)
    with open(os.path.join(out_dir, f"{name}.pb"), "wb") as f:
        f.write(frozen.SerializeToString())
    arrays = {}
    for k, (feed, result) in enumerate(zip(runs, results)):
        for t, v in feed.items():
            arrays[f"run{k}/in/{t.name.split(':')[0]}"] = np.asarray(v)
        for t, v in zip(outputs, result):
            arrays[f"run{k}/out/{t.name.split(':')[0]}"] = np.asarray(v)
    np.savez(os.path.join(out_dir, f"{name}.npz"), **arrays)
    return {"inputs": [t.name.split(":")[0] for t in feeds], "outputs": names, "runs": len(runs)}


def build_saved_model(out_dir):
    """A TF1 SavedModel (variables, a cond inside a while loop) with a serving signature."""
    graph = tf.Graph()
    with graph.as_default():
        x = placeholder([2, 3], "x")
        w = v1.get_variable("w", initializer=np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3))

        def body(i, h):
            h = tf.matmul(h, w)
            h = v1.cond(tf.reduce_sum(h) > 0, lambda: tf.tanh(h), lambda: h * 0.5)
            return i + 1, h

        _, y = v1.while_loop(lambda i, h: i < 4, body, [tf.constant(0), x])
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            value = rng_inputs({x: [2, 3]})[x]
            result = session.run(y, {x: value})
            v1.saved_model.simple_save(session, os.path.join(out_dir, "saved_model"), {"x": x}, {"y": y})
    np.savez(os.path.join(out_dir, "saved_model.npz"), x=value, y=result)


def main(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    meta = {name: build(name, out_dir) for name in CASES}
    build_saved_model(out_dir)
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
