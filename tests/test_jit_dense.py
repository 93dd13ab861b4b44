"""numlite.jit's loop kernels of large float32 FULLY_CONNECTED, SUM/MEAN and ADD/SUB/MUL
(docs/jit.md, "Compile time of dense and element-wise ops") against LiteRT and the NumPy
engine, bit for bit against the inlined form they replace (FULLY_CONNECTED: against its
parallel form), and with ``num_threads=2``.

The kernel test files (tests/test_dense.py, test_reduce.py, test_binary.py) run both engines
on small tensors, which stay inline. One model here (numlite's writer) holds the large forms,
each node's output a graph output: FULLY_CONNECTED with and without bias and activation, a
batch of rows, a ``k`` not a multiple of 4; MEAN and SUM over consecutive
axes (a global average pool) and over axes that are not (the inline form); ADD, SUB and MUL
with fused activations, one of them larger than a unit of the parallel form."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from helpers import run_interpreter
from test_jit import Graphs, _matches_litert_and_numpy, jit_cache, rng_floats  # noqa: F401  (a fixture)

import numlite
from numlite.kernels import parallel
from numlite.model.ir import Options

numba = pytest.importorskip("numba")
from numlite.jit.kernels import binary, conv, dense, reduce  # noqa: E402  (imports Numba)

NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3
LARGE_NODES = 8  # the nodes of dense_model above the kernel thresholds
FULLY_CONNECTED_OUTPUTS = 2  # dense_model's first outputs


def dense_model() -> tuple[bytes, list[np.ndarray]]:
    g = Graphs()
    m = g.subgraph()
    x = m.input((2, 302))  # k = 302: four products at a time, and 2 more
    image = m.input((2, 9, 10, 24))  # 4320 values: a global average pool over 9 x 10
    a, b = m.input((2, 40, 60)), m.input((2, 40, 60))
    big_a, big_b = m.input((2, 100, 100)), m.input((2, 100, 100))  # 20000 values: two parallel units
    fc = lambda act: Options("FullyConnectedOptions", fused_activation_function=act)  # noqa: E731
    # 130 columns; 2 rows: with two threads, two blocks of columns per row (80 and 50)
    m.op("FULLY_CONNECTED", [x, m.const(rng_floats((130, 302), 1, -0.2, 0.2)), m.const(rng_floats((130,), 2))], (2, 130),
         options=fc(RELU6))  # fmt: skip
    m.op("FULLY_CONNECTED", [x, m.const(rng_floats((64, 302), 3, -0.2, 0.2)), -1], (2, 64), options=fc(NONE))
    reducer = lambda keep: Options("ReducerOptions", keep_dims=keep)  # noqa: E731
    m.op("MEAN", [image, m.const([-3, -2], np.int32)], (2, 1, 1, 24), options=reducer(True))
    m.op("SUM", [a, m.const([1], np.int32)], (2, 60), options=reducer(False))
    m.op("MEAN", [a, m.const([0, 2], np.int32)], (40,), options=reducer(False))  # not one block of axes: inline
    m.op("ADD", [a, b], (2, 40, 60), options=Options("AddOptions", fused_activation_function=RELU))
    m.op("SUB", [a, b], (2, 40, 60), options=Options("SubOptions", fused_activation_function=NONE))
    m.op("MUL", [a, b], (2, 40, 60), options=Options("MulOptions", fused_activation_function=RELU_N1_TO_1))
    m.op("ADD", [big_a, big_b], (2, 100, 100), options=Options("AddOptions", fused_activation_function=RELU6))
    inputs = [rng_floats((2, 302), 6), rng_floats((2, 9, 10, 24), 7), rng_floats((2, 40, 60), 8), rng_floats((2, 40, 60), 9),
              rng_floats((2, 100, 100), 10, -8.0, 8.0), rng_floats((2, 100, 100), 11)]  # fmt: skip
    return g.bytes(), inputs


@pytest.fixture(scope="module")
def compiled(jit_cache):
    """The model as loop kernels (one thread; two threads with every kernel node parallel) and
    with every node inlined (the thresholds out of reach)."""
    model, inputs = dense_model()
    result = {}
    for key, threads in (("kernels", 1), ("parallel", 2), ("inline", 1)):
        interpreter = numlite.Interpreter(model_content=model, jit=True, num_threads=threads)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(dense, "BLAS_MIN_ROWS", 1 << 62)  # the loop kernels here (BLAS: the test below)
            if key == "parallel":
                patch.setattr(conv, "PARALLEL_MIN_WORK", 0)
            if key == "inline":
                patch.setattr(dense, "KERNEL_MIN_WORK", 1 << 62)
                patch.setattr(reduce, "KERNEL_MIN_SIZE", 1 << 62)
                patch.setattr(binary, "KERNEL_MIN_SIZE", 1 << 62)
            interpreter.allocate_tensors()
        result[key] = interpreter
    return model, inputs, result


def _run(interpreter, inputs) -> list[np.ndarray]:
    """Set the inputs, invoke, get the outputs, with no re-allocation: allocate_tensors() would
    generate the code again outside the fixture's patches (the inline and parallel forms would
    become the default ones), so the form that ran is checked too."""
    source = interpreter._jit.engines[0].source
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    assert interpreter._jit.engines[0].source == source
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _calls(interpreter) -> int:
    """How many nodes of the generated function call a loop kernel."""
    source = interpreter._jit.engines[0].source
    alias = re.search(r"^(k\d+) = numlite\.jit\.kernels\.loops\.run$", source, re.M)
    return 0 if alias is None else source.count(f"{alias.group(1)}(")


def test_large_nodes_run_as_loop_kernels_and_match_litert(compiled):
    model, inputs, result = compiled
    interpreter = result["kernels"]
    report = interpreter.jit_report()["subgraphs"][0]
    names = [d["name"] for d in interpreter.get_output_details()]
    assert report["compiled"] and report["operators"] == len(names), report
    assert _calls(interpreter) == LARGE_NODES and _calls(result["inline"]) == 0
    # the entry points the engine has compiled (or loaded) before the first run: the kinds called
    kinds = {dense.KIND, reduce.KIND, binary.KIND}
    assert interpreter._jit.engines[0].loop_kernels == {(False, kind) for kind in kinds}
    # the parallel kinds' serial twins too: an invoke on one thread (busy cores) calls those
    parallel_kinds = {dense.KIND, binary.KIND}
    expected = {(True, kind) for kind in parallel_kinds} | {(False, kind) for kind in kinds}
    assert result["parallel"]._jit.engines[0].loop_kernels == expected
    assert result["inline"]._jit.engines[0].loop_kernels == set()
    for seed in (0, 1):  # twice: the second invoke reuses the arenas
        feed = [rng_floats(v.shape, 40 + 7 * seed + k, -3.0, 3.0) for k, v in enumerate(inputs)]
        _matches_litert_and_numpy(model, _run(interpreter, feed), feed, names)


def test_kernels_equal_the_inlined_form_bit_for_bit(compiled, monkeypatch):
    """The same summation order and float32 operations: the SUM/MEAN and ADD/SUB/MUL loop
    kernels (serial and parallel) give exactly the bits of the inlined loops they replace. The
    FULLY_CONNECTED kernel sums each output in eight partial sums, where the inlined loop sums
    in ``k`` order (so it reads the weights in place), so it is held to LiteRT at 1e-5 (the test
    above) and to its parallel form bit for bit: each output is summed alike in every unit."""
    model, inputs, result = compiled
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)  # two threads, however busy the machine
    names = [d["name"] for d in result["kernels"].get_output_details()]
    expected = _run(result["inline"], inputs)
    assert result["parallel"]._jit.engines[0].threads == min(2, numba.config.NUMBA_NUM_THREADS)
    serial = _run(result["kernels"], inputs)
    for got, want, name in zip(_run(result["parallel"], inputs), serial, names):
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: parallel against serial")
    for got, want, name in list(zip(serial, expected, names))[FULLY_CONNECTED_OUTPUTS:]:
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: kernels against the inlined form")


def test_fully_connected_kernel_reads_the_weights_in_place(compiled):
    """No transposed copy of a FULLY_CONNECTED kernel's weights: the model's own buffers are
    read (shared_constant_bytes), and the generator's constants (the other nodes' index maps,
    the biases) are smaller than one copy of them."""
    model, inputs, result = compiled
    weights = (130 * 302 + 64 * 302) * 4
    kernels, inline = (result[key].jit_report()["subgraphs"][0] for key in ("kernels", "inline"))
    assert kernels["shared_constant_bytes"] >= weights
    assert kernels["constant_bytes"] < weights // 2, kernels
    assert inline["constant_bytes"] >= weights  # the inlined form's transposed copy: what the kernel saves


def blas_model() -> tuple[bytes, list[np.ndarray]]:
    """Products of many rows, each of at least dense.BLAS_MIN_WORK multiply-adds: [64, 96] by
    [80, 96] with bias and RELU6, [5, 400] by [40, 400] without bias; and two BATCH_MATMULs."""
    g = Graphs()
    m = g.subgraph()
    x, y = m.input((64, 96)), m.input((5, 400))
    fc = lambda act: Options("FullyConnectedOptions", fused_activation_function=act)  # noqa: E731
    m.op("FULLY_CONNECTED", [x, m.const(rng_floats((80, 96), 12, -0.3, 0.3)), m.const(rng_floats((80,), 13))], (64, 80),
         options=fc(RELU6))  # fmt: skip
    m.op("FULLY_CONNECTED", [y, m.const(rng_floats((40, 400), 14, -0.2, 0.2)), -1], (5, 40), options=fc(NONE))
    # BATCH_MATMUL: [3, 16, 24] by a broadcast [1, 24, 20]; both adjoints, [2, 24, 16] by [2, 20, 24]
    a, b = m.input((3, 16, 24)), m.input((1, 24, 20))
    m.op("BATCH_MATMUL", [a, b], (3, 16, 20), options=Options("BatchMatMulOptions", adj_x=False, adj_y=False))
    c, d = m.input((2, 24, 16)), m.input((2, 20, 24))
    m.op("BATCH_MATMUL", [c, d], (2, 16, 20), options=Options("BatchMatMulOptions", adj_x=True, adj_y=True))
    big_a, big_b = m.input((2, 100, 100)), m.input((2, 100, 100))  # a loop kernel, parallel where forced
    m.op("ADD", [big_a, big_b], (2, 100, 100), options=Options("AddOptions", fused_activation_function=NONE))
    shapes = [(64, 96), (5, 400), (3, 16, 24), (1, 24, 20), (2, 24, 16), (2, 20, 24), (2, 100, 100), (2, 100, 100)]
    return g.bytes(), [rng_floats(shape, 15 + k) for k, shape in enumerate(shapes)]


def test_products_of_many_rows_run_in_numpys_blas(jit_cache, monkeypatch):
    """FULLY_CONNECTED of at least dense.BLAS_MIN_ROWS rows calls the sgemm of NumPy's own BLAS
    on the NumPy kernel's transposed weights, read in place, and BATCH_MATMUL one sgemm per
    batch (broadcast, adjoints as transpose flags): LiteRT's results within 1e-5, and
    at one thread the NumPy engine's bits (the same library call on the same operands).
    ``num_threads`` sizes BLAS's pool around the compiled call, as around a NumPy invoke.
    Without a BLAS found, the loop kernel runs instead."""
    from numlite.interpreter import threads as blas_threads
    from numlite.jit.kernels import blas

    if blas.sgemm_address() is None:  # NumPy's Linux wheels bundle OpenBLAS; macOS's may use Accelerate
        message = "no OpenBLAS sgemm found in NumPy's BLAS: the compiled engine's BLAS path cannot run here"
        pytest.fail(message) if sys.platform == "linux" else pytest.skip(message)
    model, inputs = blas_model()
    entered = []
    enter = blas_threads.BlasThreads.__enter__
    monkeypatch.setattr(blas_threads.BlasThreads, "__enter__", lambda self: entered.append(self.n) or enter(self))
    for threads in (1, 2):
        interpreter = numlite.Interpreter(model_content=model, jit=True, num_threads=threads)
        interpreter.allocate_tensors()
        engine = interpreter._jit.engines[0]
        for kernel in ("product", "batch_product"):  # two calls of each
            alias = re.search(rf"^(k\d+) = numlite\.jit\.kernels\.blas\.{kernel}_\d\d$", engine.source, re.M)
            assert alias is not None and engine.source.count(f"{alias.group(1)}(") == 2, engine.source
        names = [d["name"] for d in interpreter.get_output_details()]
        entered.clear()
        got = run_interpreter(interpreter, inputs)
        assert entered == [threads]  # one compiled invoke, its BLAS pool sized once
        _matches_litert_and_numpy(model, got, inputs, names)
        if threads == 1:
            numpy_engine = numlite.Interpreter(model_content=model, jit=False, num_threads=1)
            numpy_engine.allocate_tensors()
            for a, b, name in zip(got, run_interpreter(numpy_engine, inputs), names):
                np.testing.assert_array_equal(a, b, err_msg=f"{name}: BLAS from compiled code against the NumPy engine")
    # Beside Numba's parallel kernels BLAS runs on one thread (two pools of spinning workers)
    with pytest.MonkeyPatch.context() as patch:  # (run_interpreter allocates again: patched throughout)
        patch.setattr(conv, "PARALLEL_MIN_WORK", 0)
        parallel = numlite.Interpreter(model_content=model, jit=True, num_threads=2)
        parallel.allocate_tensors()
        entered.clear()
        got = run_interpreter(parallel, inputs)
    assert parallel._jit.engines[0].threads == min(2, numba.config.NUMBA_NUM_THREADS)
    assert entered == [1]
    _matches_litert_and_numpy(model, got, inputs, names)
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["constant_bytes"] < 40 * 400 * 4, report  # the weights are the interpreter's, not copies

    monkeypatch.setattr(blas, "_FOUND", None)  # no BLAS: the loop kernel
    interpreter = numlite.Interpreter(model_content=model, jit=True, num_threads=1)
    interpreter.allocate_tensors()
    assert "blas." not in interpreter._jit.engines[0].source
    _matches_litert_and_numpy(model, run_interpreter(interpreter, inputs), inputs, names)


def attention_model() -> "keras.Model":  # noqa: F821  (imported inside)
    """A Keras encoder block over a sequence of 16 steps: a Dense over the sequence, self-attention
    of 2 heads, a Dense to 10 (what a converter makes of it: FULLY_CONNECTED of 16 rows and
    BATCH_MATMULs of the heads)."""
    import keras

    keras.utils.set_random_seed(3)
    inputs = keras.Input((16, 24), batch_size=1)
    h = keras.layers.Dense(128, activation="relu")(inputs)
    h = keras.layers.MultiHeadAttention(num_heads=2, key_dim=32)(h, h)
    return keras.Model(inputs, keras.layers.Dense(10)(h))


@pytest.mark.parametrize("converter", ["official", "numlite"])
def test_converted_attention_block_runs_its_products_in_blas(jit_cache, converter):
    """Models from the converters, not only numlite's writer, reach the BLAS path: a Keras
    encoder block's dense layers over 16 steps (16 rows, >= 2^16 multiply-adds) call BLAS's
    sgemm, and so do its heads' BATCH_MATMULs (both converters write them): LiteRT's results
    within 1e-5, and the NumPy engine's, on the file each converter wrote."""
    from helpers import convert_keras

    from numlite.jit.kernels import blas

    if blas.sgemm_address() is None:
        message = "no OpenBLAS sgemm found in NumPy's BLAS: the compiled engine's BLAS path cannot run here"
        pytest.fail(message) if sys.platform == "linux" else pytest.skip(message)
    if converter == "official":
        model = convert_keras(attention_model, "jit-dense-attention")
    else:
        model = numlite.TFLiteConverter.from_keras_model(attention_model()).convert()
    inputs = [rng_floats((1, 16, 24), 41, -1.0, 1.0)]
    interpreter = numlite.Interpreter(model_content=model, jit=True, num_threads=1)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report
    source = interpreter._jit.engines[0].source
    for kernel in ("product", "batch_product"):  # the dense layers, the heads' products
        assert re.search(rf"^k\d+ = numlite\.jit\.kernels\.blas\.{kernel}_\d\d$", source, re.M), source
    names = [d["name"] for d in interpreter.get_output_details()]
    got = run_interpreter(interpreter, inputs)
    assert np.max(np.abs(got[0])) > 0.1  # outputs of order one
    _matches_litert_and_numpy(model, got, inputs, names)
