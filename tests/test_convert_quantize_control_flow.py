"""Full-integer quantization of models with control flow (IF and WHILE subgraphs).

numlite quantizes every subgraph IF and WHILE call, calibrated inside each call and iteration,
and passes integers across the boundaries (one set of parameters per value crossing them). The
official converter quantizes the callees' insides too but keeps IF and WHILE float (a QUANTIZE
and a DEQUANTIZE at each callee's ends), and refuses control flow in 16x8 mode. So:

* int8: numlite's file, run in LiteRT, must be about as accurate against TensorFlow's float
  results as the official file of the same model (the bound of test_convert_quantize_full.py);
* 16x8: the official converter has no file of the model; the reference is its 16x8 file of the
  same math without control flow (the loop unrolled, the branches chosen in Python), which
  quantizes the same values over the same kind of ranges;
* numlite's interpreter runs numlite's files bit for bit as LiteRT's reference kernels.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import OpResolverType

import numlite
from numlite.converter.quantize.calibration import calibrate
from numlite.converter.quantize.full_integer import called_subgraphs
from numlite.model import read_model
from helpers import litert_interpreter, numlite_convert, run_interpreter

INT8_ONLY = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
INT16X8 = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
BUILTINS = [tf.lite.OpsSet.TFLITE_BUILTINS]
STEPS = 3  # loop iterations

_rng = np.random.default_rng(11)
W1 = _rng.normal(0, 0.4, (8, 8)).astype(np.float32)
W2 = _rng.normal(0, 0.4, (8, 8)).astype(np.float32)
W3 = _rng.normal(0, 0.4, (8, 4)).astype(np.float32)
B1 = _rng.normal(0, 0.2, (8,)).astype(np.float32)
B2 = _rng.normal(0, 0.2, (8,)).astype(np.float32)


# -- models: the control-flow form and, where the official converter needs one, the same math
# -- without control flow ---------------------------------------------------------------------


def _then(h: tf.Tensor) -> tf.Tensor:
    return tf.nn.tanh(tf.matmul(h, W2) + B2)


def _else(h: tf.Tensor) -> tf.Tensor:
    return tf.matmul(h, W2) * 0.5 + 1.0


def _cond(x: tf.Tensor) -> tf.Tensor:
    """A branch chosen by the data (a comparison with a constant), a dense layer before and after.
    The predicate is a MEAN, not a SUM: ai-edge-litert 2.3's reference int8 SUM reads memory it
    did not write (see test_quantized_ops), so a SUM would make the reference-kernel test flaky."""
    h = tf.nn.relu(tf.matmul(x, W1) + B1)
    y = tf.cond(tf.reduce_mean(x) > 0.0, lambda: _then(h), lambda: _else(h))
    return tf.matmul(y, W3)


def _step(h: tf.Tensor) -> tf.Tensor:
    return tf.nn.tanh(tf.matmul(h, W2) + B2) * 2.0


def _while(x: tf.Tensor) -> tf.Tensor:
    """A loop-carried value (tanh's fixed range joined with a wider one) and a counter."""
    h0 = tf.matmul(x, W1) + B1
    _, h = tf.while_loop(lambda i, h: i < STEPS, lambda i, h: (i + 1, _step(h)), [tf.constant(0), h0])
    return tf.matmul(h, W3)


def _while_unrolled(x: tf.Tensor) -> tf.Tensor:
    h = tf.matmul(x, W1) + B1
    for _ in range(STEPS):
        h = _step(h)
    return tf.matmul(h, W3)


def _odd(h: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(h, W1) - B1)


def _nested(x: tf.Tensor) -> tf.Tensor:
    """A cond inside a loop body, on the counter: both branches run in every invoke."""
    h0 = tf.matmul(x, W1)

    def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: _then(h), lambda: _odd(h))

    _, h = tf.while_loop(lambda i, h: i < STEPS, body, [tf.constant(0), h0])
    return tf.matmul(h, W3)


def _nested_unrolled(x: tf.Tensor) -> tf.Tensor:
    h = tf.matmul(x, W1)
    for i in range(STEPS):
        h = _then(h) if i % 2 == 0 else _odd(h)
    return tf.matmul(h, W3)


MODELS: dict[str, tuple[Callable, Callable | None]] = {
    "cond": (_cond, None),
    "while": (_while, _while_unrolled),
    "nested": (_nested, _nested_unrolled),
}
SHAPE = (2, 8)
_FUNCTIONS: dict[Callable, Any] = {}
_CONVERTED: dict[tuple, bytes] = {}


def _function(fn: Callable) -> tuple[Any, Any]:
    if fn not in _FUNCTIONS:
        func = tf.function(fn, input_signature=[tf.TensorSpec(SHAPE, tf.float32)], autograph=False)
        _FUNCTIONS[fn] = (func.get_concrete_function(), func)
    return _FUNCTIONS[fn]


def _samples(count: int, seed: int) -> list[np.ndarray]:
    """Inputs of both signs of sum (both branches of ``_cond`` taken)."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, SHAPE).astype(np.float32) for _ in range(count)]


def _quantize(converter_class: Any, fn: Callable, ops: Any = None, io_type: Any = tf.float32,
              data: list[np.ndarray] | None = None) -> bytes:
    """``fn`` quantized by ``converter_class`` (official or numlite), cached."""
    data = _samples(24, seed=0) if data is None else data
    key = (converter_class.__module__, fn, repr(ops), repr(io_type), tuple(x.tobytes() for x in data))
    if key not in _CONVERTED:
        concrete, func = _function(fn)
        converter = converter_class.from_concrete_functions([concrete], func)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x] for x in data)
        converter.inference_input_type = converter.inference_output_type = io_type
        if ops is not None:
            converter.target_spec.supported_ops = ops
        _CONVERTED[key] = converter.convert()
    return _CONVERTED[key]


def _run(interpreter: Any, x: np.ndarray) -> np.ndarray:
    """Float in, float out, whatever the model's interface types (quantized as a caller would)."""
    d = interpreter.get_input_details()[0]
    if np.dtype(d["dtype"]) != np.float32:
        scale, zero = d["quantization"]
        info = np.iinfo(d["dtype"])
        x = np.clip(np.round(x / scale) + zero, info.min, info.max).astype(d["dtype"])
    (y,) = run_interpreter(interpreter, [x])
    if y.dtype != np.float32:
        scale, zero = interpreter.get_output_details()[0]["quantization"]
        y = (y.astype(np.float32) - zero) * np.float32(scale)
    return y


def _error(model: bytes, fn: Callable, inputs: list[np.ndarray]) -> float:
    """Largest difference between LiteRT running ``model`` and TensorFlow running ``fn``."""
    return max(float(np.abs(_run(litert_interpreter(model), x) - fn(tf.constant(x)).numpy()).max()) for x in inputs)


def _output_quantum(model: bytes) -> float:
    m = read_model(model)
    sg = m.subgraphs[0]
    producers = {t: op for op in sg.operators for t in op.outputs}
    (t,) = sg.outputs
    op = producers.get(t)
    source = op.inputs[0] if op is not None and m.op_name(op) in ("DEQUANTIZE", "QUANTIZE") else t
    return float(sg.tensors[source].quantization.scale[0])


def _ops(model: bytes) -> list[tuple[int, str]]:
    m = read_model(model)
    return [(s, m.op_name(op)) for s, _, op in m.iter_operators()]


# -- accuracy ----------------------------------------------------------------------------------

CASES = [("cond", None, tf.float32), ("cond", INT8_ONLY, tf.int8), ("while", None, tf.float32),
         ("while", INT8_ONLY, tf.int8), ("nested", INT8_ONLY, tf.float32),
         ("while", INT16X8, tf.float32), ("nested", INT16X8, tf.int16)]
IDS = [f"{name}-{'16x8' if ops is INT16X8 else 'int8'}-{io.name}" for name, ops, io in CASES]


@pytest.mark.parametrize("name, ops, io_type", CASES, ids=IDS)
def test_as_accurate_as_official(name: str, ops: Any, io_type: Any) -> None:
    """numlite's error against TensorFlow is at most 1.5 x the reference's plus one output
    quantum (the bound of test_convert_quantize_full.py, for the same reasons): the official
    file of the same model (int8), or of the same math unrolled (16x8, which the official
    converter refuses for control flow)."""
    fn, unrolled = MODELS[name]
    inputs = _samples(6, seed=99)
    ours = _quantize(numlite.TFLiteConverter, fn, ops, io_type)
    if ops is INT16X8:
        reference, what = _quantize(tf.lite.TFLiteConverter, unrolled, ops, io_type), "official 16x8, unrolled"
    else:
        reference, what = _quantize(tf.lite.TFLiteConverter, fn, ops, io_type), "official"
    ours_error, their_error = _error(ours, fn, inputs), _error(reference, fn, inputs)
    bound = 1.5 * their_error + _output_quantum(ours)
    assert ours_error <= bound, f"numlite's error {ours_error:.5g} > bound {bound:.5g} ({what}: {their_error:.5g})"


@pytest.mark.parametrize("name, ops, io_type", CASES, ids=IDS)
def test_runs_in_numlite_as_in_litert_reference(name: str, ops: Any, io_type: Any) -> None:
    """numlite's interpreter gives LiteRT's reference kernels' results bit for bit (the cond
    model's int8 GREATER included)."""
    model = _quantize(numlite.TFLiteConverter, MODELS[name][0], ops, io_type)
    for x in _samples(3, seed=7):
        ref = litert_interpreter(model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        np.testing.assert_array_equal(_run(numlite.Interpreter(model_content=model), x), _run(ref, x))


# -- structure ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name, ops", [("cond", None), ("while", None), ("nested", INT16X8)],
                         ids=["cond", "while", "nested-16x8"])
def test_integers_cross_subgraph_boundaries(name: str, ops: Any) -> None:
    """Every float op of every subgraph became integer; IF and WHILE pass integers, and each
    value crossing a boundary has one set of parameters on every side of it."""
    m = read_model(_quantize(numlite.TFLiteConverter, MODELS[name][0], ops))
    kind = "INT16" if ops is INT16X8 else "INT8"
    for s, n, op in m.iter_operators():
        sg = m.subgraphs[s]
        if m.op_name(op) in ("QUANTIZE", "DEQUANTIZE"):  # only at the model's float ends, or requantizing
            assert s == 0 or all(sg.tensors[t].type == kind for t in (*op.inputs, *op.outputs)), (s, n)
            continue
        assert all(sg.tensors[t].type != "FLOAT32" for t in (*op.inputs, *op.outputs) if t >= 0), (s, n, m.op_name(op))
        if m.op_name(op) not in ("IF", "WHILE"):
            continue
        o = op.builtin_options
        callees = ([o.then_subgraph_index, o.else_subgraph_index] if m.op_name(op) == "IF"
                   else [o.cond_subgraph_index, o.body_subgraph_index])
        operands = op.inputs[1:] if m.op_name(op) == "IF" else op.inputs
        sides = [[(sg, t) for t in operands]] + [[(m.subgraphs[c], t) for t in m.subgraphs[c].inputs] for c in callees]
        results = [[(sg, t) for t in op.outputs]] + [[(m.subgraphs[c], t) for t in m.subgraphs[c].outputs]
                                                     for c in callees if m.op_name(op) == "IF" or c == callees[1]]
        if m.op_name(op) == "WHILE":
            sides, results = sides + results, []
        for group in (sides, results):
            for values in zip(*group):
                params = {(g.tensors[t].type, tuple(g.tensors[t].quantization.scale),
                           tuple(g.tensors[t].quantization.zero_point))
                          if g.tensors[t].quantization is not None else (g.tensors[t].type,) for g, t in values}
                assert len(params) == 1, (s, n, params)


def test_official_converter_keeps_control_flow_float() -> None:
    """What the official converter does (documented in full_integer.py): under
    TFLITE_BUILTINS_INT8 the callees' insides are integer but IF and WHILE carry floats, each
    callee starting with a QUANTIZE and ending with a DEQUANTIZE; in 16x8 mode it refuses."""
    theirs = _quantize(tf.lite.TFLiteConverter, _while, INT8_ONLY)
    m = read_model(theirs)
    (op,) = [op for op in m.subgraphs[0].operators if m.op_name(op) == "WHILE"]
    assert {m.subgraphs[0].tensors[t].type for t in op.inputs} == {"INT32", "FLOAT32"}
    body = [name for s, name in _ops(theirs) if s == op.builtin_options.body_subgraph_index]
    assert body[0] == "QUANTIZE" and body[-1] == "DEQUANTIZE" and "FULLY_CONNECTED" in body, body
    with pytest.raises(Exception, match="16x8"):
        _quantize(tf.lite.TFLiteConverter, _cond, INT16X8)


# -- calibration -------------------------------------------------------------------------------


def test_calibration_sees_every_iteration() -> None:
    """The range recorded for the loop body's tanh is its range over every iteration of every
    sample (computed here by TensorFlow, iterate by iterate), not only the last one's."""
    model = read_model(numlite_convert(_while, [tf.TensorSpec(SHAPE, tf.float32)])[0])
    data = _samples(5, seed=3)
    ranges = calibrate(model, lambda: ([x] for x in data), called_subgraphs(model))
    (loop,) = [op for op in model.subgraphs[0].operators if model.op_name(op) == "WHILE"]
    body_index = loop.builtin_options.body_subgraph_index
    body = model.subgraphs[body_index]
    (tanh,) = [op for op in body.operators if model.op_name(op) == "TANH"]
    seen = []
    for x in data:
        h = tf.matmul(x, W1) + B1
        for _ in range(STEPS):
            seen.append(tf.nn.tanh(tf.matmul(h, W2) + B2).numpy())
            h = _step(h)
    r = ranges[body_index][tanh.outputs[0]]
    np.testing.assert_allclose([r.min, r.max], [np.min(seen), np.max(seen)], rtol=1e-5, atol=1e-6)
    # and the main subgraph's loop result is the last iterate
    last = [_step_n(x) for x in data]
    r = ranges[0][loop.outputs[1]]
    np.testing.assert_allclose([r.min, r.max], [np.min(last), np.max(last)], rtol=1e-5, atol=1e-6)


def _step_n(x: np.ndarray) -> np.ndarray:
    h = tf.matmul(x, W1) + B1
    for _ in range(STEPS):
        h = _step(h)
    return h.numpy()


def test_branch_never_taken_in_calibration() -> None:
    """A branch the representative dataset never takes has no ranges: with plain
    TFLITE_BUILTINS its ops stay float (between a DEQUANTIZE and a QUANTIZE) and the file still
    runs correctly; with TFLITE_BUILTINS_INT8 the conversion fails naming the subgraph and op."""
    positive = [np.abs(x) for x in _samples(8, seed=0)]  # sum > 0: only the then branch runs
    with pytest.raises(numlite.ConversionError, match=r"FULLY_CONNECTED \(subgraph \d+, node \d+"):
        _quantize(numlite.TFLiteConverter, _cond, INT8_ONLY, data=positive)
    model = _quantize(numlite.TFLiteConverter, _cond, BUILTINS, data=positive)
    assert (0, "IF") in _ops(model)
    assert any(s > 0 and name == "DEQUANTIZE" for s, name in _ops(model))
    # Negative inputs quantize to zeros (below the calibrated range), whose sum takes the else
    # branch. Its result is clamped to the range calibrated for the IF's result (the then
    # branch's only): TensorFlow's values so clamped, to the accuracy of the file calibrated on
    # both branches.
    m = read_model(model)
    (if_op,) = [op for op in m.subgraphs[0].operators if m.op_name(op) == "IF"]
    q = m.subgraphs[0].tensors[if_op.outputs[0]].quantization
    scale, zero = float(q.scale[0]), int(q.zero_point[0])
    zeros = np.zeros(SHAPE, np.float32)
    h = tf.nn.relu(tf.matmul(zeros, W1) + B1)
    expected = tf.matmul(tf.clip_by_value(_else(h), (-128 - zero) * scale, (127 - zero) * scale), W3).numpy()
    error = np.abs(_run(litert_interpreter(model), -np.abs(_samples(1, seed=5)[0])) - expected).max()
    calibrated = _quantize(numlite.TFLiteConverter, _cond)
    assert error <= 1.5 * _error(calibrated, _cond, [zeros]) + _output_quantum(model)
