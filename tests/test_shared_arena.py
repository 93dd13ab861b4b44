"""One arena for the whole model: subgraphs never active together share memory."""

import numpy as np
import tensorflow as tf

import numlite
from helpers import assert_matches_litert, convert
from numlite.interpreter.interpreter import subgraph_calls


def nested_model():
    """A loop whose body holds a cond and an inner loop: seven subgraphs."""

    def f(n, x):
        def outer_body(i, x):
            y = tf.cond(
                tf.reduce_sum(x) > 0,
                lambda: tf.tanh(x @ tf.ones([16, 16]) * 0.01) + 1.0,
                lambda: tf.sin(x) * 2.0 - 1.0,
            )
            _, y = tf.while_loop(lambda j, y: j < 3, lambda j, y: (j + 1, tf.cos(y) * 0.5), [0, y])
            return i + 1, y

        return tf.while_loop(lambda i, x: i < n, outer_body, [0, x])[1]

    return convert(f, [tf.TensorSpec([], tf.int32), tf.TensorSpec([16, 16], tf.float32)])


def test_nested_control_flow_matches_litert():
    model = nested_model()
    for n in (0, 1, 5):
        x = np.random.default_rng(n).normal(size=(16, 16)).astype(np.float32)
        assert_matches_litert(model, [np.array(n, np.int32), x])


def test_shared_arena_is_smaller_than_separate_arenas():
    interpreter = numlite.Interpreter(model_content=nested_model())
    interpreter.allocate_tensors()
    assert len(interpreter._subgraphs) == 7
    assert 0 < interpreter.arena_bytes < interpreter.separate_arena_bytes


def test_subgraphs_active_together_never_share_bytes():
    model = nested_model()
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    calls = {s: {c for _, _, c in targets} for s, targets in subgraph_calls(interpreter.model).items()}

    def descendants(s):
        found = set()
        for c in calls[s]:
            found |= {c} | descendants(c)
        return found

    arenas = {i: sg.arena for i, sg in interpreter._subgraphs.items() if sg.arena.size}
    shared_pairs = 0
    for a in arenas:
        for b in arenas:
            if a < b:
                overlap = np.shares_memory(arenas[a], arenas[b])
                if b in descendants(a) or a in descendants(b):
                    assert not overlap, (a, b)
                shared_pairs += overlap
    assert shared_pairs > 0  # siblings (branches, cond and body) do share


def test_results_survive_reallocation_of_the_shared_arena():
    model = nested_model()
    interpreter = numlite.Interpreter(model_content=model)
    x = np.random.default_rng(0).normal(size=(16, 16)).astype(np.float32)
    expected = assert_matches_litert(model, [np.array(4, np.int32), x])[0]
    for _ in range(2):  # allocating again re-lays the arena; bindings must follow
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], np.array(4, np.int32))
        interpreter.set_tensor(interpreter.get_input_details()[1]["index"], x)
        interpreter.invoke()
        np.testing.assert_allclose(
            interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected, rtol=1e-5, atol=1e-5
        )


def test_planner_aligns_small_tensors_to_16_bytes_and_others_to_64():
    """A loop's counters and booleans take 16-byte slots, not 64-byte ones; a tensor placed
    after them still starts on a 64-byte boundary, and no two tensors alive together overlap."""
    from numlite.interpreter.planner import Lifetime, plan_arena

    lifetimes = [Lifetime(0, 4, 0, 3), Lifetime(1, 1, 0, 3), Lifetime(2, 8, 1, 2), Lifetime(3, 256, 0, 3), Lifetime(4, 100, 2, 3)]
    offsets, size = plan_arena(lifetimes)
    for t in lifetimes:
        assert offsets[t.tensor] % (16 if t.nbytes <= 16 else 64) == 0
        for u in lifetimes:
            if u.tensor != t.tensor and not (u.last < t.first or t.last < u.first):
                assert offsets[t.tensor] + t.nbytes <= offsets[u.tensor] or offsets[u.tensor] + u.nbytes <= offsets[t.tensor]
    assert size == 256 + 128 + 3 * 16  # 64-byte slots for the three small ones would take 192
