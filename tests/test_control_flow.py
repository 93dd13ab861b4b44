"""Control flow against LiteRT and TensorFlow: IF (tf.cond), WHILE (tf.while_loop, tf.map_fn,
tf.scan, autograph's ``for i in tf.range``), nesting, loop state whose shape changes across
iterations, what WHILE copies per invoke, and models whose subgraph references are broken.

Every model comes from the official converter; expected values come from LiteRT, and LiteRT is
itself checked against TensorFlow running the same tf.function (the premise of the comparison).

Left out because the official converter cannot produce them with builtin ops:
* ``tf.switch_case``: the converter refuses it ("'tf.Case' op is neither a custom op nor a flex
  op" from a tf.Module, "Failed to functionalize Control Flow V1 ops" from a bare tf.function),
  with or without autograph. There is no CASE builtin, so no lowering to nested IF happens.
* ``tf.map_fn`` / ``tf.scan`` over zero rows: the converted model fails in LiteRT itself
  ("Invalid tensor size" / "gather index out of bounds"), so there is nothing to compare.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from helpers import (
    assert_close,
    assert_matches_litert,
    convert,
    litert_interpreter,
    run_interpreter,
    run_litert,
    run_numlite,
)

import numlite
from numlite.model import read_model, write_model

S = tf.TensorSpec
_AUTOGRAPH_MODELS: dict[Any, bytes] = {}


def convert_autograph(fn: Callable, specs: Sequence[tf.TensorSpec], key: Any) -> bytes:
    """Like helpers.convert but with autograph on, so that Python ``for``/``if`` over tensors
    become tf.while_loop / tf.cond (cached for the session under ``key``)."""
    cache_key = (key, repr(list(specs)))
    if cache_key not in _AUTOGRAPH_MODELS:
        func = tf.function(fn, input_signature=list(specs), autograph=True)
        converter = tf.lite.TFLiteConverter.from_concrete_functions([func.get_concrete_function()], func)
        _AUTOGRAPH_MODELS[cache_key] = converter.convert()
    return _AUTOGRAPH_MODELS[cache_key]


def subgraph_ops(model: bytes) -> list[list[str]]:
    """Operator names of every subgraph."""
    m = read_model(model)
    return [[m.op_name(op) for op in sg.operators] for sg in m.subgraphs]


def all_ops(model: bytes) -> list[str]:
    return [name for ops in subgraph_ops(model) for name in ops]


def tf_outputs(fn: Callable, inputs: Sequence[np.ndarray], autograph: bool = False) -> list[np.ndarray]:
    """What TensorFlow computes for ``fn`` (as a graph, like the converted model)."""
    result = tf.function(fn, autograph=autograph)(*[tf.constant(x) for x in inputs])
    return [np.asarray(t) for t in tf.nest.flatten(result)]


def check(
    model: bytes,
    fn: Callable,
    inputs: Sequence[np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-5,
    autograph: bool = False,
) -> list[np.ndarray]:
    """numlite == LiteRT on ``inputs``, and LiteRT == TensorFlow (the outputs of these models
    are in the order the function returns them)."""
    expected = assert_matches_litert(model, inputs, rtol=rtol, atol=atol)
    reference = tf_outputs(fn, inputs, autograph)
    assert len(reference) == len(expected)
    for k, (e, r) in enumerate(zip(expected, reference)):
        assert_close(e, r, rtol, atol, what=f"premise, LiteRT vs TensorFlow output {k}: ")
    return expected


class Pair:
    """A numlite and a LiteRT interpreter on the same model, invoked together, so that a test
    can run a sequence of invokes on one interpreter (state left over by an earlier invoke must
    not leak into the next one)."""

    def __init__(self, model: bytes) -> None:
        self.numlite = numlite.Interpreter(model_content=model)
        self.litert = litert_interpreter(model)

    def run(self, inputs: Sequence[np.ndarray], rtol: float = 1e-5, atol: float = 1e-5) -> list[np.ndarray]:
        expected, actual = (run_interpreter(it, inputs) for it in (self.litert, self.numlite))
        assert len(actual) == len(expected)
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol, atol, what=f"output {k}: ")
        return expected


def f32(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def i32(v: int) -> np.ndarray:
    return np.array(v, np.int32)


# ----------------------------------------------------------------------------- IF (tf.cond)


@pytest.mark.parametrize("pred", [True, False])
def test_cond_scalar_predicate_input(pred):
    fn = lambda p, x: tf.cond(p, lambda: x * 2.0 + 1.0, lambda: tf.sin(x) - 1.0)
    model = convert(fn, [S((), tf.bool), S((), tf.float32)], key="cond_scalar")
    assert subgraph_ops(model)[0] == ["IF"]
    check(model, fn, [np.array(pred), np.array(0.75, np.float32)])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_tensor_predicate_from_data(sign):
    """The predicate is computed from the data; +x and -x take the two branches."""
    w = f32(4, 5, seed=7)
    fn = lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: tf.matmul(x, w), lambda: tf.tanh(x[:, :1]) * 3.0 + tf.zeros([3, 5]))
    model = convert(fn, [S((3, 4), tf.float32)], key="cond_tensor")
    assert "IF" in subgraph_ops(model)[0]
    x = np.abs(f32(3, 4, seed=1)) * sign
    check(model, fn, [x])


@pytest.mark.parametrize("dtype", [tf.int32, tf.bool])
@pytest.mark.parametrize("pred", [True, False])
def test_cond_integer_and_bool_outputs(pred, dtype):
    if dtype == tf.int32:
        fn = lambda p, x: tf.cond(p, lambda: x * 3, lambda: x - 7)
    else:
        fn = lambda p, x: tf.cond(p, lambda: x > 2, lambda: x < 0)
    model = convert(fn, [S((), tf.bool), S((6,), tf.int32)], key=("cond_int", dtype))
    assert subgraph_ops(model)[0] == ["IF"]
    check(model, fn, [np.array(pred), np.array([-3, 0, 1, 2, 5, 40], np.int32)])


@pytest.mark.parametrize("pred", [True, False])
def test_cond_branch_passes_inputs_through(pred):
    """One branch returns its inputs unchanged (a subgraph without operators)."""
    fn = lambda p, x, y: tf.cond(p, lambda: (x, y), lambda: (x + 1.0, y * 2.0))
    model = convert(fn, [S((), tf.bool), S((3,), tf.float32), S((2, 2), tf.float32)], key="cond_passthrough")
    assert subgraph_ops(model)[0] == ["IF"]
    assert [] in subgraph_ops(model)[1:]
    check(model, fn, [np.array(pred), f32(3, seed=1), f32(2, 2, seed=2)])


def test_cond_passthrough_sequence_and_aliasing():
    """Alternate a pass-through branch and a computing one on one interpreter; after each
    invoke, set a new input WITHOUT invoking and read the output again: LiteRT's IF copies the
    branch result into its own output, so the output must not follow the input."""
    fn = lambda p, x: tf.cond(p, lambda: x, lambda: x * -2.0)
    model = convert(fn, [S((), tf.bool), S((4,), tf.float32)], key="cond_passthrough_alias")
    pair = Pair(model)
    for k, p in enumerate([True, False, True, True, False]):
        pair.run([np.array(p), f32(4, seed=k)])
        after = []
        for it in (pair.litert, pair.numlite):
            it.set_tensor(it.get_input_details()[1]["index"], f32(4, seed=100 + k))
            after.append(it.get_tensor(it.get_output_details()[0]["index"]))
        assert_close(after[1], after[0], what="output read after a new set_tensor: ")


def test_cond_output_shape_depends_on_data():
    """Branches return x[:2] and x: the IF output has shape signature [-1]. Alternate the taken
    branch on one interpreter so the output is resized back and forth."""
    fn = lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: x[:2], lambda: x)
    model = convert(fn, [S((5,), tf.float32)], key="cond_dynamic_shape")
    assert "IF" in subgraph_ops(model)[0]
    g = read_model(model).subgraphs[0]
    assert g.tensors[g.outputs[0]].shape_signature == (-1,)
    pair = Pair(model)
    shapes = []
    for k, sign in enumerate([1.0, -1.0, 1.0, 1.0, -1.0]):
        x = np.abs(f32(5, seed=k)) * np.float32(sign)
        (out,) = pair.run([x])
        (ref,) = tf_outputs(fn, [x])
        assert_close(out, ref, what="premise: ")
        shapes.append(out.shape)
    assert shapes == [(2,), (5,), (2,), (2,), (5,)]


def test_cond_with_dynamic_input_shape():
    """The input's first dimension is unknown; resize between invokes."""
    fn = lambda x: tf.cond(tf.reduce_mean(x) > 0, lambda: tf.reduce_sum(x, axis=0) * 2.0, lambda: tf.reduce_max(x, axis=0))
    model = convert(fn, [S((None, 3), tf.float32)], key="cond_dynamic_input")
    assert "IF" in subgraph_ops(model)[0]
    pair = Pair(model)
    for k, rows in enumerate([4, 1, 7, 4]):
        x = f32(rows, 3, seed=k) + np.float32(0.6 if k % 2 else -0.6)
        (out,) = pair.run([x])
        assert_close(out, tf_outputs(fn, [x])[0], what="premise: ")


# ----------------------------------------------------------------------------- WHILE


def _several_vars(n, x, y):
    def body(i, a, b, c):
        return i + 1, a * 0.5 + tf.sin(b), b + 0.001, c + i

    return tf.while_loop(lambda i, a, b, c: i < n, body, [tf.constant(0), x, y, tf.constant(7)])


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_while_iteration_counts(n):
    """Counter, two float vectors and an int accumulator; 0, 1 and 1000 iterations."""
    model = convert(_several_vars, [S((), tf.int32), S((3,), tf.float32), S((3,), tf.float32)], key="while_several")
    assert subgraph_ops(model)[0] == ["WHILE"]
    # a float32 accumulator of 1000 steps: round-off of order 1000 * eps
    out = check(model, _several_vars, [i32(n), f32(3, seed=1), f32(3, seed=2)], rtol=1e-4, atol=1e-4)
    assert out[0] == max(n, 0)


def test_while_same_interpreter_different_counts():
    """One interpreter, several invokes with different iteration counts (including zero after
    many): the loop must restart from the inputs every invoke."""
    model = convert(_several_vars, [S((), tf.int32), S((3,), tf.float32), S((3,), tf.float32)], key="while_several")
    pair = Pair(model)
    for k, n in enumerate([5, 0, 17, 1, 0, 3]):
        pair.run([i32(n), f32(3, seed=k), f32(3, seed=k + 10)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [0, 3, 200])
def test_while_matrix_state(n):
    """The state is a matrix multiplied by an orthogonal matrix each iteration (norms stay of
    order one)."""
    q = np.linalg.qr(np.random.default_rng(5).normal(size=(4, 4)))[0].astype(np.float32)
    fn = lambda n, x: tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, tf.matmul(a, q)), [0, x])[1]
    model = convert(fn, [S((), tf.int32), S((3, 4), tf.float32)], key="while_matrix")
    assert "WHILE" in subgraph_ops(model)[0]
    assert {"FULLY_CONNECTED", "BATCH_MATMUL"} & set(all_ops(model))
    # 200 matrix products in float32 by different BLAS: errors of a few 1e-6 accumulate
    check(model, fn, [i32(n), f32(3, 4, seed=3)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scale", [0.2, 1.0, 30.0])
def test_while_condition_on_data(scale):
    """Loop until the data crosses a threshold (no counter); scale 30 already starts past it."""
    fn = lambda x: tf.while_loop(lambda y: tf.reduce_sum(y) < 10.0, lambda y: (y * 1.5 + 0.1,), [x])[0]
    model = convert(fn, [S((3,), tf.float32)], key="while_on_data")
    assert subgraph_ops(model)[0] == ["WHILE"]
    check(model, fn, [np.abs(f32(3, seed=4)) * np.float32(scale) + np.float32(0.01)])


def _range_accumulator(n, x):
    acc = tf.zeros([3])
    total = tf.constant(0)
    for i in tf.range(n):
        acc += tf.cos(x * tf.cast(i, tf.float32)) * 0.01
        total += i * i
    return acc, total


@pytest.mark.parametrize("n", [0, 1, 50])
def test_for_range_with_autograph(n):
    """``for i in tf.range(n)`` with Python accumulators, converted with autograph on."""
    model = convert_autograph(_range_accumulator, [S((), tf.int32), S((3,), tf.float32)], key="for_range")
    assert "WHILE" in subgraph_ops(model)[0]
    check(model, _range_accumulator, [i32(n), f32(3, seed=6)], autograph=True)


# Loop bodies that move buffers around: a loop that double-buffers or binds the caller's
# arrays directly must still behave like LiteRT, which copies.


def _swap(n, x, y):
    return tf.while_loop(lambda i, a, b: i < n, lambda i, a, b: (i + 1, b, a), [tf.constant(0), x, y])


def _rotate_and_duplicate(n, x, y, z):
    body = lambda i, a, b, c, d: (i + 1, c, a, b * 0.5, a)  # rotate three, and one output twice
    return tf.while_loop(lambda i, *_: i < n, body, [tf.constant(0), x, y, z, x])


def _constant_from_body(n, x):
    body = lambda i, a, b: (i + 1, tf.constant([1.0, -2.0, 3.0]), a * 2.0 + b)
    return tf.while_loop(lambda i, a, b: i < n, body, [tf.constant(0), x, x])


def _input_reused_after_loop(n, x):
    out = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 0.5 - 1.0), [tf.constant(0), x])[1]
    return out + x, x * 3.0


def _bool_and_int64_state(n, x):
    body = lambda i, flag, k, a: (i + 1, tf.logical_not(flag), k * 3 + tf.cast(i, tf.int64), tf.where(flag, a, -a))
    return tf.while_loop(lambda i, *_: i < n, body, [tf.constant(0), tf.constant(True), tf.constant(1, tf.int64), x])


BUFFER_CASES = {
    "constant_from_body": (_constant_from_body, [S((), tf.int32), S((3,), tf.float32)]),
    "input_reused_after_loop": (_input_reused_after_loop, [S((), tf.int32), S((4,), tf.float32)]),
    "bool_and_int64_state": (_bool_and_int64_state, [S((), tf.int32), S((3,), tf.float32)]),
}


def _buffer_case(case: str, n: int, seed: int = 0) -> tuple[Callable, bytes, list[np.ndarray]]:
    fn, specs = {**BUFFER_CASES, **PERMUTING_CASES}[case]
    model = convert(fn, specs, key=("buffers", case))
    assert "WHILE" in subgraph_ops(model)[0]
    inputs = [i32(n)] + [f32(*spec.shape, seed=seed + k) for k, spec in enumerate(specs[1:])]
    return fn, model, inputs


@pytest.mark.parametrize("n", [0, 1, 2, 7])
@pytest.mark.parametrize("case", sorted(BUFFER_CASES))
def test_while_body_moves_buffers(case, n):
    fn, model, inputs = _buffer_case(case, n)
    check(model, fn, inputs)


# Bodies whose outputs are a PERMUTATION of their inputs (pass-through tensors in other
# positions). LiteRT 2.3 gets these wrong: after each iteration its WHILE copies body output k
# into body input k one by one, in place, so `(a, b) -> (b, a)` reads an input it has already
# overwritten and yields (b, b). TensorFlow's semantics are unambiguous, and numlite follows
# TensorFlow here: these cases compare numlite with TensorFlow, and
# test_litert_while_permutation_bug pins down LiteRT's behaviour (it fails if LiteRT changes).
PERMUTING_CASES = {
    "swap": (_swap, [S((), tf.int32), S((3,), tf.float32), S((3,), tf.float32)]),
    "rotate_and_duplicate": (_rotate_and_duplicate, [S((), tf.int32)] + [S((2, 2), tf.float32)] * 3),
}


def _assert_matches_tensorflow(fn: Callable, actual: Sequence[np.ndarray], inputs: Sequence[np.ndarray]) -> None:
    reference = tf_outputs(fn, inputs)
    assert len(actual) == len(reference)
    for k, (a, r) in enumerate(zip(actual, reference)):
        assert_close(a, r, what=f"numlite vs TensorFlow output {k}: ")


@pytest.mark.parametrize("n", [0, 1, 2, 7])
@pytest.mark.parametrize("case", sorted(PERMUTING_CASES))
def test_while_body_permutes_loop_variables(case, n):
    fn, model, inputs = _buffer_case(case, n)
    _assert_matches_tensorflow(fn, run_numlite(model, inputs), inputs)
    if n == 0:  # the body never runs: LiteRT is right, and must agree too
        assert_matches_litert(model, inputs)


def test_while_body_permutes_loop_variables_reused_interpreter():
    it = None
    for k, n in enumerate([3, 4, 0, 5, 2]):
        fn, model, inputs = _buffer_case("rotate_and_duplicate", n, seed=10 * k)
        it = it or numlite.Interpreter(model_content=model)
        it.allocate_tensors()
        for d, value in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], value)
        it.invoke()
        _assert_matches_tensorflow(fn, [it.get_tensor(d["index"]) for d in it.get_output_details()], inputs)


def test_loop_variables_moved_each_iteration_are_counted(engine):
    """A swap's two loop variables are copied after every body (neither is computed in place):
    two more iterations copy two more pairs of [3] floats, with the loop compiled as one
    function (``LoopProgram``) as without it."""
    fn, model, inputs = _buffer_case("swap", 5)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    copied = {}
    for n in (5, 7, 5, 7):
        inputs[0] = i32(n)
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        copied.setdefault(n, set()).add(interpreter.control_flow_counters["bytes_copied"])
        _assert_matches_tensorflow(fn, [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()], inputs)
    if engine == "numpy":  # the NumPy engine's own machinery (the compiled engine runs none of it)
        assert len(copied[5]) == len(copied[7]) == 1, copied
        assert copied[7].pop() - copied[5].pop() == 2 * 2 * 3 * 4


def test_litert_while_permutation_bug():
    """The evidence for the comment above: LiteRT's swap loop returns its second input twice."""
    fn, model, inputs = _buffer_case("swap", 1)
    _, a, b = run_litert(model, inputs)
    _, ta, tb = tf_outputs(fn, inputs)
    np.testing.assert_array_equal(ta, inputs[2])  # TensorFlow swaps
    np.testing.assert_array_equal(tb, inputs[1])
    np.testing.assert_array_equal(a, inputs[2])  # LiteRT: (b, b)
    np.testing.assert_array_equal(b, inputs[2])


@pytest.mark.parametrize("pred", [True, False])
def test_cond_branches_duplicate_and_swap_inputs(pred):
    fn = lambda p, x, y: tf.cond(p, lambda: (y, x, x), lambda: (x * 2.0, tf.constant([5.0, 6.0, 7.0]), y))
    model = convert(fn, [S((), tf.bool), S((3,), tf.float32), S((3,), tf.float32)], key="cond_swap")
    assert subgraph_ops(model)[0] == ["IF"]
    check(model, fn, [np.array(pred), f32(3, seed=1), f32(3, seed=2)])


def test_cond_swap_on_repeated_invokes(engine):
    """The same IF on one interpreter, its predicate alternating over invokes: from the second
    invoke the main subgraph is compiled and calls the IF directly (``If.direct``), whose
    branches copy pass-through, duplicated and constant outputs into the IF's outputs."""
    fn = lambda p, x, y: tf.cond(p, lambda: (y, x, x), lambda: (x * 2.0, tf.constant([5.0, 6.0, 7.0]), y))
    model = convert(fn, [S((), tf.bool), S((3,), tf.float32), S((3,), tf.float32)], key="cond_swap")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()  # once: the invokes after the first run the compiled plan
    for k, pred in enumerate([True, False, True, True, False, False, True]):
        inputs = [np.array(pred), f32(3, seed=10 + k), f32(3, seed=20 + k)]
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        for j, expected in enumerate(run_litert(model, inputs)):
            assert_close(interpreter.get_tensor(interpreter.get_output_details()[j]["index"]), expected, what=f"invoke {k}, output {j}: ")
    if engine == "numpy":  # the NumPy engine's own machinery (the compiled engine runs none of it)
        program = interpreter.subgraph(0)._program
        assert program is not None and [fn.__qualname__ for _, fn, _ in program.calls] == ["If._bound_call.<locals>.call"]


# ----------------------------------------------------------------------------- nesting


def _cond_in_while(n, x):
    def body(i, a):
        a = tf.cond(i % 3 == 0, lambda: a * -0.5, lambda: a + tf.sin(a))
        return i + 1, a

    return tf.while_loop(lambda i, a: i < n, body, [tf.constant(0), x])[1]


@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_cond_inside_while(n):
    model = convert(_cond_in_while, [S((), tf.int32), S((4,), tf.float32)], key="cond_in_while")
    ops = subgraph_ops(model)
    assert ops[0] == ["WHILE"] and any("IF" in o for o in ops[1:])
    check(model, _cond_in_while, [i32(n), f32(4, seed=8)])


def _while_in_while(n, m, x):
    def inner(a):
        return tf.while_loop(lambda j, b: j < m, lambda j, b: (j + 1, b * 0.9 + 0.05), [tf.constant(0), a])[1]

    def body(i, a, count):
        return i + 1, inner(a) - 0.1, count + m

    return tf.while_loop(lambda i, a, c: i < n, body, [tf.constant(0), x, tf.constant(0)])[1:]


@pytest.mark.parametrize("n,m", [(0, 3), (3, 0), (1, 1), (4, 5), (20, 30)])
def test_while_inside_while(n, m):
    model = convert(_while_in_while, [S((), tf.int32), S((), tf.int32), S((2, 3), tf.float32)], key="while_in_while")
    assert all_ops(model).count("WHILE") == 2
    check(model, _while_in_while, [i32(n), i32(m), f32(2, 3, seed=9)])


def _while_in_cond(p, n, x):
    loop = lambda: tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, tf.tanh(a * 1.3)), [tf.constant(0), x])[1]
    return tf.cond(p, loop, lambda: x * 10.0)


@pytest.mark.parametrize("pred,n", [(True, 0), (True, 6), (False, 6)])
def test_while_inside_cond_branch(pred, n):
    model = convert(_while_in_cond, [S((), tf.bool), S((), tf.int32), S((5,), tf.float32)], key="while_in_cond")
    ops = subgraph_ops(model)
    assert ops[0] == ["IF"] and any("WHILE" in o for o in ops[1:])
    check(model, _while_in_cond, [np.array(pred), i32(n), f32(5, seed=10)])


def _three_levels(n, m, x):
    """while -> cond -> while."""

    def inner(a):
        return tf.while_loop(lambda j, b: j < m, lambda j, b: (j + 1, b * 0.5 + 0.25), [tf.constant(0), a])[1]

    def body(i, a):
        return i + 1, tf.cond(i % 2 == 0, lambda: inner(a), lambda: -a)

    return tf.while_loop(lambda i, a: i < n, body, [tf.constant(0), x])[1]


@pytest.mark.parametrize("n,m", [(0, 2), (1, 0), (5, 3)])
def test_three_levels_while_cond_while(n, m):
    model = convert(_three_levels, [S((), tf.int32), S((), tf.int32), S((3,), tf.float32)], key="three_levels")
    ops = all_ops(model)
    assert ops.count("WHILE") == 2 and ops.count("IF") == 1
    check(model, _three_levels, [i32(n), i32(m), f32(3, seed=11)])


def test_three_levels_reused_interpreter():
    model = convert(_three_levels, [S((), tf.int32), S((), tf.int32), S((3,), tf.float32)], key="three_levels")
    pair = Pair(model)
    for k, (n, m) in enumerate([(5, 3), (0, 0), (4, 1), (7, 2)]):
        pair.run([i32(n), i32(m), f32(3, seed=k)])


# ----------------------------------------------------------------------------- shapes changing across iterations


def _growing(n, x):
    def body(i, acc):
        return i + 1, tf.concat([acc, x * tf.cast(i, tf.float32)], 0)

    shapes = [tf.TensorShape([]), tf.TensorShape([None])]
    return tf.while_loop(lambda i, acc: i < n, body, [tf.constant(0), x], shape_invariants=shapes)[1]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_growing_tensor_under_shape_invariants(n):
    model = convert(_growing, [S((), tf.int32), S((2,), tf.float32)], key="growing")
    assert subgraph_ops(model)[0] == ["WHILE"]
    (out,) = check(model, _growing, [i32(n), f32(2, seed=12)])
    assert out.shape == (2 * (n + 1),)


def test_growing_tensor_reused_interpreter():
    """Long, then short, then long again on one interpreter."""
    model = convert(_growing, [S((), tf.int32), S((2,), tf.float32)], key="growing")
    pair = Pair(model)
    for k, n in enumerate([6, 0, 2, 9]):
        (out,) = pair.run([i32(n), f32(2, seed=k)])
        assert out.shape == (2 * (n + 1),)


def _growing_matrix(n, x):
    """Rows appended and a shrinking companion: two loop variables of changing shape. (The tail
    keeps one row: LiteRT's Python API cannot return an empty output, "Invalid tensor size".)"""

    def body(i, rows, tail):
        return i + 1, tf.concat([rows, tail[:1] * 0.5], 0), tail[1:]

    shapes = [tf.TensorShape([]), tf.TensorShape([None, 3]), tf.TensorShape([None, 3])]
    return tf.while_loop(lambda i, r, t: tf.logical_and(i < n, tf.shape(t)[0] > 1), body, [tf.constant(0), x[:1], x], shape_invariants=shapes)[1:]


@pytest.mark.parametrize("n", [0, 2, 10])
def test_growing_and_shrinking_loop_variables(n):
    model = convert(_growing_matrix, [S((), tf.int32), S((6, 3), tf.float32)], key="growing_matrix")
    assert "WHILE" in subgraph_ops(model)[0]
    check(model, _growing_matrix, [i32(n), f32(6, 3, seed=13)])


# ----------------------------------------------------------------------------- map_fn and scan


@pytest.mark.parametrize("rows", [1, 4])
def test_map_fn(rows):
    """The converter lowers tf.map_fn to a WHILE over builtin ops (no Select ops needed)."""
    fn = lambda x: tf.map_fn(lambda r: tf.reduce_sum(r) * r, x)
    model = convert(fn, [S((rows, 3), tf.float32)], key=("map_fn", rows))
    assert "WHILE" in subgraph_ops(model)[0]
    check(model, fn, [f32(rows, 3, seed=14)])


def test_map_fn_dynamic_rows():
    fn = lambda x: tf.map_fn(lambda r: tf.reduce_sum(r) * r, x)
    model = convert(fn, [S((None, 3), tf.float32)], key="map_fn_dynamic")
    assert "WHILE" in subgraph_ops(model)[0]
    pair = Pair(model)
    for k, rows in enumerate([4, 1, 6]):  # zero rows fails in LiteRT itself (see module docstring)
        x = f32(rows, 3, seed=k)
        (out,) = pair.run([x])
        assert_close(out, tf_outputs(fn, [x])[0], what="premise: ")


def test_map_fn_two_outputs_two_dtypes():
    fn = lambda x, y: tf.map_fn(
        lambda a: (a[0] * 2.0, tf.cast(tf.reduce_sum(a[1]), tf.int32)), (x, y), fn_output_signature=(tf.float32, tf.int32)
    )
    model = convert(fn, [S((4, 3), tf.float32), S((4, 2), tf.float32)], key="map_fn_two")
    assert "WHILE" in subgraph_ops(model)[0]
    check(model, fn, [f32(4, 3, seed=15), f32(4, 2, seed=16, low=-5, high=5)])


@pytest.mark.parametrize("rows", [1, 5])
def test_scan(rows):
    fn = lambda x: tf.scan(lambda a, r: a * 0.5 + r, x)
    model = convert(fn, [S((rows, 3), tf.float32)], key=("scan", rows))
    assert "WHILE" in subgraph_ops(model)[0]
    check(model, fn, [f32(rows, 3, seed=17)])


def test_scan_dynamic_rows():
    fn = lambda x: tf.scan(lambda a, r: a * 0.5 + r, x)
    model = convert(fn, [S((None, 3), tf.float32)], key="scan_dynamic")
    pair = Pair(model)
    for k, rows in enumerate([5, 1, 3]):
        x = f32(rows, 3, seed=k)
        (out,) = pair.run([x])
        assert_close(out, tf_outputs(fn, [x])[0], what="premise: ")


# ----------------------------------------------------------------------------- what WHILE copies


def _vector_loop(n, x):
    return tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 0.999 + 0.001), [tf.constant(0), x])[1]


def test_control_flow_counters_do_not_grow_with_iterations():
    """A static-shape loop over a [64] float vector copies and allocates the same amount in 10
    and in 1000 iterations: nothing per iteration. (Counts of the other parity are compared
    with each other: a double-buffered loop may copy its final state out once when it ends on
    its scratch buffers, which depends on the parity only, not on the count.)"""
    model = convert(_vector_loop, [S((), tf.int32), S((64,), tf.float32)], key="vector_loop")
    assert subgraph_ops(model)[0] == ["WHILE"]
    pair = Pair(model)
    x = f32(64, seed=18)
    pair.run([i32(10), x], rtol=1e-4, atol=1e-4)  # warm up: one-time allocations are done now
    counters: dict[int, list[dict]] = {}
    for n in (1000, 10, 1001, 11, 1000, 11):
        pair.run([i32(n), x], rtol=1e-4, atol=1e-4)
        c = dict(pair.numlite.control_flow_counters)
        assert {"bytes_copied", "arrays_allocated"} <= set(c), c
        assert all(isinstance(c[k], int) and c[k] >= 0 for k in ("bytes_copied", "arrays_allocated")), c
        counters.setdefault(n, []).append(c)
    for short, long in ((10, 1000), (11, 1001)):
        for c in counters[long] + counters[short]:
            assert c["bytes_copied"] == counters[short][0]["bytes_copied"], counters
            assert c["arrays_allocated"] == counters[short][0]["arrays_allocated"], counters
    # bounded: a few copies of the 64-float state (+ counter) in and out, not one per iteration
    for c in counters.values():
        assert c[0]["bytes_copied"] <= 4 * (64 * 4 + 8), counters


def test_control_flow_counters_fresh_interpreters_agree():
    """The first invoke of a fresh interpreter too: 10 and 1000 iterations cost the same."""
    model = convert(_vector_loop, [S((), tf.int32), S((64,), tf.float32)], key="vector_loop")
    firsts = []
    for n in (10, 1000):
        pair = Pair(model)
        pair.run([i32(n), f32(64, seed=19)], rtol=1e-4, atol=1e-4)
        firsts.append(dict(pair.numlite.control_flow_counters))
    assert firsts[0]["bytes_copied"] == firsts[1]["bytes_copied"], firsts
    assert firsts[0]["arrays_allocated"] == firsts[1]["arrays_allocated"], firsts


# ----------------------------------------------------------------------------- broken models


def _edited(model: bytes, edit: Callable[[Any], None]) -> bytes:
    m = read_model(model)
    edit(m)
    return write_model(m)


def _construction_error(model: bytes) -> str:
    """The error numlite raises building the interpreter or allocating it (never at invoke)."""
    with pytest.raises((numlite.ModelError, numlite.PrepareError)) as info:
        numlite.Interpreter(model_content=model).allocate_tensors()
    return str(info.value)


def _op(m: Any, name: str, subgraph: int = 0) -> tuple[int, Any]:
    for n, op in enumerate(m.subgraphs[subgraph].operators):
        if m.op_name(op) == name:
            return n, op
    raise AssertionError(f"no {name} in subgraph {subgraph}")


def _names_node(message: str, subgraph: int, node: int) -> bool:
    return re.search(rf"subgraph {subgraph}\b.*\bnode {node}\b", message) is not None


def _if_model() -> bytes:
    fn = lambda p, x: tf.cond(p, lambda: x * 2.0 + 1.0, lambda: tf.sin(x) - 1.0)
    return convert(fn, [S((), tf.bool), S((), tf.float32)], key="cond_scalar")


def _while_model() -> bytes:
    return convert(_several_vars, [S((), tf.int32), S((3,), tf.float32), S((3,), tf.float32)], key="while_several")


@pytest.mark.parametrize("field", ["then_subgraph_index", "else_subgraph_index"])
@pytest.mark.parametrize("bad", [3, 99, -1])
def test_if_subgraph_index_out_of_range(field, bad):
    def edit(m):
        _, op = _op(m, "IF")
        setattr(op.builtin_options, field, bad)

    message = _construction_error(_edited(_if_model(), edit))
    assert _names_node(message, 0, 0), message
    assert str(bad) in message, message


@pytest.mark.parametrize("field", ["cond_subgraph_index", "body_subgraph_index"])
@pytest.mark.parametrize("bad", [3, 1000, -2])
def test_while_subgraph_index_out_of_range(field, bad):
    def edit(m):
        _, op = _op(m, "WHILE")
        setattr(op.builtin_options, field, bad)

    message = _construction_error(_edited(_while_model(), edit))
    assert _names_node(message, 0, 0), message
    assert str(bad) in message, message


def test_while_body_calls_its_parent():
    """A WHILE whose body is subgraph 0 itself: an infinite recursion, refused up front."""

    def edit(m):
        _, op = _op(m, "WHILE")
        op.builtin_options.body_subgraph_index = 0

    message = _construction_error(_edited(_while_model(), edit))
    assert "subgraph" in message and "node" in message, message
    assert re.search(r"cycl|recurs", message, re.IGNORECASE), message


def test_indirect_cycle_through_nested_loops():
    """Outer WHILE -> body with an inner WHILE whose body is the outer body again."""
    model = convert(_while_in_while, [S((), tf.int32), S((), tf.int32), S((2, 3), tf.float32)], key="while_in_while")

    def edit(m):
        outer_body = m.subgraphs[0].operators[0].builtin_options.body_subgraph_index
        _, inner = _op(m, "WHILE", outer_body)
        inner.builtin_options.body_subgraph_index = outer_body

    message = _construction_error(_edited(model, edit))
    assert "subgraph" in message and "node" in message, message
    assert re.search(r"cycl|recurs", message, re.IGNORECASE), message


@pytest.mark.parametrize("field", ["then_subgraph_index", "else_subgraph_index"])
def test_if_branch_is_its_parent(field):
    """An IF whose branch is subgraph 0, the subgraph holding the IF."""

    def edit(m):
        _, op = _op(m, "IF")
        setattr(op.builtin_options, field, 0)

    message = _construction_error(_edited(_if_model(), edit))
    assert "subgraph" in message and "node" in message, message
    assert re.search(r"cycl|recurs", message, re.IGNORECASE), message


def test_loop_in_branch_calls_the_branch():
    """IF -> branch holding a WHILE whose cond is that branch again."""
    model = convert(_while_in_cond, [S((), tf.bool), S((), tf.int32), S((5,), tf.float32)], key="while_in_cond")

    def edit(m):
        _, op = _op(m, "IF")
        branch = op.builtin_options.then_subgraph_index
        loop_sg = next(s for s in (branch, op.builtin_options.else_subgraph_index) if "WHILE" in [m.op_name(o) for o in m.subgraphs[s].operators])
        _, loop = _op(m, "WHILE", loop_sg)
        loop.builtin_options.cond_subgraph_index = loop_sg  # the loop's cond runs the subgraph holding the loop

    message = _construction_error(_edited(model, edit))
    assert re.search(r"cycl|recurs", message, re.IGNORECASE), message


def test_while_body_input_count_mismatch():
    """The body takes one input fewer than the WHILE passes it."""

    def edit(m):
        _, op = _op(m, "WHILE")
        body = m.subgraphs[op.builtin_options.body_subgraph_index]
        body.inputs = body.inputs[:-1]

    message = _construction_error(_edited(_while_model(), edit))
    assert "subgraph" in message and "node" in message, message
    assert "input" in message, message


def test_while_cond_input_count_mismatch():
    def edit(m):
        _, op = _op(m, "WHILE")
        cond = m.subgraphs[op.builtin_options.cond_subgraph_index]
        cond.inputs = cond.inputs[:-1]

    message = _construction_error(_edited(_while_model(), edit))
    assert "subgraph" in message and "node" in message, message


def test_while_body_output_count_mismatch():
    def edit(m):
        _, op = _op(m, "WHILE")
        body = m.subgraphs[op.builtin_options.body_subgraph_index]
        body.outputs = body.outputs[:-1]

    message = _construction_error(_edited(_while_model(), edit))
    assert "subgraph" in message and "node" in message, message


def test_if_branch_output_count_mismatch():
    model = convert(
        lambda p, x, y: tf.cond(p, lambda: (x, y), lambda: (x + 1.0, y * 2.0)),
        [S((), tf.bool), S((3,), tf.float32), S((2, 2), tf.float32)],
        key="cond_passthrough",
    )

    def edit(m):
        _, op = _op(m, "IF")
        branch = m.subgraphs[op.builtin_options.else_subgraph_index]
        branch.outputs = branch.outputs[:1]

    message = _construction_error(_edited(model, edit))
    assert _names_node(message, 0, _op(read_model(model), "IF")[0]), message


def test_while_cond_must_return_a_bool():
    """The cond subgraph returns one of its float inputs instead of the LESS result (the
    subgraph itself stays consistent); LiteRT's WHILE demands a bool scalar there."""

    def edit(m):
        _, op = _op(m, "WHILE")
        cond = m.subgraphs[op.builtin_options.cond_subgraph_index]
        cond.outputs = [cond.inputs[1]]

    with pytest.raises(numlite.NumliteError) as info:
        it = numlite.Interpreter(model_content=_edited(_while_model(), edit))
        it.allocate_tensors()
    assert "subgraph" in str(info.value), str(info.value)


def test_while_body_with_run_time_shaped_nodes_reused_interpreter():
    """A loop whose variables keep their shapes but whose body sizes some outputs at run time
    (the official converter's Keras LSTM: SLICE and CONCATENATION of the output list). The first
    invoke runs the loop on copies; later ones, with the body prepared, swap buffers, and the
    list the body builds must still reach the next iteration (it once came back as zeros every
    other invoke)."""
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 3), batch_size=2)
    model = keras.Model(inputs, keras.layers.LSTM(4)(keras.layers.LSTM(6, return_sequences=True)(inputs)))
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()])
    tflite = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    assert [read_model(tflite).op_name(op) for _, _, op in read_model(tflite).iter_operators()].count("WHILE") == 2
    x = rng.uniform(-1, 1, (2, 5, 3)).astype(np.float32)
    expected = np.asarray(model(x))
    for interpreter in (numlite.Interpreter(model_content=tflite), litert_interpreter(tflite)):
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        for _ in range(3):
            interpreter.invoke()
            assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected)


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_compiled_loop_copies_in_and_out_as_the_watched_loop_does(n, engine):
    """The compiled loop (``LoopProgram``) makes the copy of the inputs into the state and, when
    it ends on its scratch set (an odd count), the copy out itself: it gives LiteRT's outputs,
    and counts the bytes the watched loop (profiling: the rebinding path) counts: the state in
    (the counter, the bound ``n`` the converter makes a loop variable, [64] floats) and, at an
    odd count, the two variables the body changes out (``n`` never leaves its buffer)."""
    model = convert(_vector_loop, [S((), tf.int32), S((64,), tf.float32)], key="vector_loop")
    inputs = [i32(n), f32(64, seed=20)]
    expected = run_litert(model, inputs)
    counted = []
    for profile in (False, True):
        interpreter = numlite.Interpreter(model_content=model, profile=profile)
        for _ in range(2):  # the second invoke runs the cached program
            actual = run_interpreter(interpreter, inputs)
            assert_close(actual[0], expected[0], rtol=1e-5, atol=1e-5)
        counted.append(interpreter.control_flow_counters["bytes_copied"])
    if engine == "numpy":  # the NumPy engine's own machinery (the compiled engine runs none of it)
        assert counted[0] == counted[1] == (4 + 4 + 64 * 4) + (4 + 64 * 4) * (n % 2), counted


def _loop_over_intermediate(n, x):
    start = tf.tanh(x)  # an arena tensor that dies at the WHILE
    return tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 0.999 + 0.001), [tf.constant(0), start])[1] + 1.0


def _byte_range(a: np.ndarray) -> tuple[int, int]:
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_while_state_starts_in_its_dying_input_and_its_scratch_set_is_in_the_arena(n, engine):
    """A WHILE's output takes over the memory of the input at its position when that input
    dies at the WHILE (the [64] vector from TANH): the state starts there with no copy in.
    Its second state set is working memory of the WHILE's step in the arena, apart from every
    tensor alive at that step. Outputs match LiteRT's over several invokes, whichever set the
    loop ends on (the copy out at an odd count)."""
    model = convert(_loop_over_intermediate, [S((), tf.int32), S((64,), tf.float32)], key="loop over intermediate")
    inputs = [i32(n), f32(64, seed=22)]
    expected = run_litert(model, inputs)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for _ in range(3):  # eval, then the compiled program's direct call
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected[0])
        # in: the counter and the bound n (not the vector); out at an odd count: counter and vector
        if engine == "numpy":  # the NumPy engine's own machinery (the compiled engine runs none of it)
            assert interpreter.control_flow_counters["bytes_copied"] == 4 + 4 + (4 + 64 * 4) * (n % 2)
    if engine != "numpy":
        return  # the rest inspects the NumPy engine's arena
    sg = interpreter.subgraph(0)
    (s,) = [k for k, step in enumerate(sg.plan) if step.op_name == "WHILE"]
    step = sg.plan[s]
    (k,) = [k for k, o in enumerate(step.outputs) if sg.shapes[o] == (64,)]
    assert sg.arrays[step.outputs[k]] is sg.arrays[step.inputs[k]]
    read_later = {t for other in sg.plan[s:] for t in other.inputs}
    alive = read_later & {t for other in sg.plan[: s + 1] for t in other.outputs}  # at the WHILE's step
    arena = _byte_range(sg.arena)
    carved = [a for a in step.kernel.scratch if a is not None]
    assert sum(a.nbytes for a in carved) >= 4 + 64 * 4  # the counter and the vector change
    for a in carved:
        lo, hi = _byte_range(a)
        assert arena[0] <= lo and hi <= arena[1]
        for t in alive | set(step.outputs):
            if sg.arrays[t] is not None and t in {p for p, _, _ in sg.arena_plan}:
                t_lo, t_hi = _byte_range(sg.arrays[t])
                assert t_hi <= lo or hi <= t_lo, f"the scratch set overlaps tensor {t}"


def test_compiled_main_subgraph_counts_its_loop_copies(engine):
    """From the second invoke on one allocation, the compiled main subgraph calls its WHILE
    directly (``While.direct``): the loop's copies in and out are still counted, as the first
    invoke (``eval``) counts them, and the outputs still match LiteRT's."""
    model = convert(_vector_loop, [S((), tf.int32), S((64,), tf.float32)], key="vector_loop")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for n in (7, 7, 4, 7, 0):
        inputs = [i32(n), f32(64, seed=21)]
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        actual = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        assert_close(actual, run_litert(model, inputs)[0], what=f"n={n}: ")
        if engine == "numpy":  # the NumPy engine's own machinery (the compiled engine runs none of it)
            assert interpreter.control_flow_counters["bytes_copied"] == (4 + 4 + 64 * 4) + (4 + 64 * 4) * (n % 2), n
    if engine == "numpy":
        program = interpreter.subgraph(0)._program
        assert program is not None and [fn.__qualname__ for _, fn, _ in program.calls] == ["While._bound_call.<locals>.call"]
