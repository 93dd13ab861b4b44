"""numlite.jit's convolution, pooling, PAD and SOFTMAX loop kernels (docs/jit.md,
"Convolutions") against LiteRT and the NumPy engine, and ``num_threads``.

Numba compiles slowly, so one model (written with numlite's writer) holds every form, each
node's output a graph output judged on its own: CONV_2D with strides, dilations, SAME and
VALID, groups, 1x1 (a GEMM), output channels that do not fill a 16-channel block and pixel
counts that do not fill a 4-pixel tile; DEPTHWISE_CONV_2D with channels that fill 8 lanes,
do not, and a depth multiplier; both pools clipped at the borders; PAD and PADV2; SOFTMAX
with a beta and large logits. The same model runs with ``num_threads=2`` (the parallel
kernels). A CNN made by the official converter runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest
from helpers import litert_interpreter, run_interpreter
from test_jit import Graphs, _assert_same, _matches_litert_and_numpy, jit_cache, rng_floats  # noqa: F401  (a fixture)

import numlite
from numlite.kernels import parallel
from numlite.model.ir import Options

numba = pytest.importorskip("numba")
from numlite.jit.kernels import conv, simd  # noqa: E402  (imports Numba)

SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3


def _out(size: int, k: int, stride: int, dilation: int, padding: int) -> int:
    span = (k - 1) * dilation + 1
    return -(-size // stride) if padding == SAME else (size - span) // stride + 1


def conv_model() -> tuple[bytes, list[np.ndarray]]:
    g = Graphs()
    m = g.subgraph()
    n, h, w, c = 2, 9, 7, 6  # 126 output pixels at stride 1: not a multiple of the 4-pixel tile
    x = m.input((n, h, w, c))
    wide = m.input((1, 5, 6, 19))  # 19 channels: two full 8-lane blocks and 3 more
    logits = m.input((3, 10))
    broad = m.input((1, 4, 11, 40))  # 40 channels, 11 columns: 4-pixel tiles of 3- and 5-wide windows inside
    seed = 100

    def consts(*shapes: tuple[int, ...]) -> list[int]:
        nonlocal seed
        seed += 1
        return [m.const(rng_floats(s, seed + k, -1.0, 1.0)) for k, s in enumerate(shapes)]

    # CONV_2D: (out channels, kh, kw, padding, strides, dilations, activation, groups)
    convs = [
        (16, 3, 3, SAME, (1, 1), (1, 1), RELU, 1),  # one full block
        (5, 3, 3, SAME, (1, 1), (1, 1), NONE, 1),  # 5 of 16 channels
        (17, 1, 1, VALID, (1, 1), (1, 1), RELU6, 1),  # 1x1: a GEMM over the pixels; 16 + 1 channels
        (33, 2, 3, VALID, (2, 1), (1, 2), RELU_N1_TO_1, 1),  # strides and dilations: taps not contiguous
        (7, 3, 2, SAME, (2, 3), (2, 1), NONE, 1),  # SAME with an odd padded pixel at the bottom/right
        (4, 3, 3, SAME, (1, 1), (1, 1), RELU, 2),  # two groups of 3 input channels
        (6, 1, 1, SAME, (2, 2), (1, 1), NONE, 3),  # strided 1x1, three groups
    ]
    for oc, kh, kw, padding, (sh, sw), (dh, dw), act, groups in convs:
        f, b = consts((oc, kh, kw, c // groups), (oc,))
        shape = (n, _out(h, kh, sh, dh, padding), _out(w, kw, sw, dw, padding), oc)
        m.op("CONV_2D", [x, f, b], shape, options=Options("Conv2DOptions", padding=padding, stride_h=sh, stride_w=sw,
             fused_activation_function=act, dilation_h_factor=dh, dilation_w_factor=dw))  # fmt: skip
    f, b = consts((24, 1, 1, 19), (24,))
    m.op("CONV_2D", [wide, f, b], (1, 5, 6, 24), options=Options("Conv2DOptions", padding=VALID, stride_h=1, stride_w=1))
    # DEPTHWISE_CONV_2D: (input, channels, multiplier, k, padding, stride, dilation, activation)
    depthwise = [
        (x, c, 1, 3, SAME, 1, 1, RELU6),  # 6 channels: one masked block
        (x, c, 2, 3, VALID, 2, 1, NONE),  # a depth multiplier
        (x, c, 4, 3, SAME, 1, 1, NONE),  # 24 channels: a 16-lane tile (machines with AVX-512) and an 8-lane one
        (x, c, 7, 3, SAME, 1, 1, RELU6),  # 42 channels: a 32-channel tile (AVX-512), an 8-lane one, 2 masked
        (x, c, 1, 3, SAME, 1, 2, RELU),  # dilated
        (x, c, 1, 5, SAME, 2, 1, RELU_N1_TO_1),
        (wide, 19, 1, 3, SAME, 2, 1, RELU6),  # full 8-lane blocks and a masked one
        (broad, 40, 1, 3, SAME, 1, 1, NONE),  # 32 + 8 channels: with AVX-512, rows of 3 shared input columns
        (broad, 40, 1, 5, SAME, 1, 1, RELU6),  # and of 5
        (broad, 40, 2, 3, VALID, 3, 1, RELU6),  # one output row: at num_threads=2 its channels are cut in two shares
    ]
    for src, ch, mult, k, padding, s, d, act in depthwise:
        ih, iw = (h, w) if src == x else (5, 6) if src == wide else (4, 11)
        f, b = consts((1, k, k, ch * mult), (ch * mult,))
        shape = (n if src == x else 1, _out(ih, k, s, d, padding), _out(iw, k, s, d, padding), ch * mult)
        m.op("DEPTHWISE_CONV_2D", [src, f, b], shape, options=Options("DepthwiseConv2DOptions", padding=padding, stride_h=s,
             stride_w=s, depth_multiplier=mult, fused_activation_function=act, dilation_h_factor=d, dilation_w_factor=d))  # fmt: skip
    for name in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        for src, ch, padding, k, s, act in [(x, c, VALID, 2, 2, NONE), (x, c, SAME, 3, 2, RELU), (wide, 19, SAME, 2, 1, RELU6)]:
            ih, iw = (h, w) if src == x else (5, 6)
            shape = (1 if src == wide else n, _out(ih, k, s, 1, padding), _out(iw, k, s, 1, padding), ch)
            m.op(name, [src], shape, options=Options("Pool2DOptions", padding=padding, stride_h=s, stride_w=s, filter_height=k,
                 filter_width=k, fused_activation_function=act))  # fmt: skip
    m.op("PAD", [x, m.const([[0, 0], [1, 2], [0, 1], [0, 0]], np.int32)], (n, h + 3, w + 1, c))
    m.op("PADV2", [logits, m.const([[1, 0], [2, 3]], np.int32), m.const(-0.5)], (4, 15))
    m.op("SOFTMAX", [logits], (3, 10), options=Options("SoftmaxOptions", beta=1.0))
    m.op("SOFTMAX", [logits], (3, 10), options=Options("SoftmaxOptions", beta=0.25))
    inputs = [rng_floats((n, h, w, c), 1), rng_floats((1, 5, 6, 19), 2), rng_floats((3, 10), 3, -40.0, 40.0), rng_floats((1, 4, 11, 40), 4)]
    return g.bytes(), inputs


@pytest.fixture(scope="module")
def convs(jit_cache):
    model, inputs = conv_model()
    compiled = {}
    for threads in (1, 2):
        interpreter = numlite.Interpreter(model_content=model, jit=True, num_threads=threads)
        with pytest.MonkeyPatch.context() as patch:  # every node parallel, however small
            patch.setattr(conv, "PARALLEL_MIN_WORK", 0)
            interpreter.allocate_tensors()
        compiled[threads] = interpreter
    return model, inputs, compiled


def test_every_conv_form_matches_litert_and_numpy(convs):
    model, inputs, compiled = convs
    interpreter = compiled[1]
    report = interpreter.jit_report()["subgraphs"][0]
    names = [d["name"] for d in interpreter.get_output_details()]
    assert report["compiled"] and report["operators"] == len(names), report  # every node compiled
    for seed in (0, 1):  # twice: the second invoke reuses the arenas and the padded buffers
        feed = [rng_floats(v.shape, 30 + 3 * seed + k, -2.0, 2.0) * (20.0 if k == 2 else 1.0) for k, v in enumerate(inputs)]
        _matches_litert_and_numpy(model, run_interpreter(interpreter, feed), feed, names)


def test_tile_width_follows_the_machine_and_the_environment():
    """16-lane tiles where the machine has AVX-512, unless NUMLITE_JIT_LANES=8; the byte tiles
    of int8 (vpdpbusd) where it also has AVX512-VNNI, under the same switch."""
    assert conv.WIDE == (simd._has_avx512() and os.environ.get("NUMLITE_JIT_LANES") != "8")
    assert conv.TILE == (8 if conv.WIDE else 4)
    assert simd.VNNI == (conv.WIDE and simd._has_vnni())


def test_eight_lane_tiles_match_litert(tmp_path):
    """The 8-lane tiles (machines without AVX-512) on every convolution form, epilogue and int8
    convolution, and the int8 kernels without the byte tiles (FULLY_CONNECTED's int32 loops, the
    float32 path of the int8 convolutions), forced by NUMLITE_JIT_LANES=8 in a process of its
    own (a no-op where the machine has no AVX-512: the rest of the suite runs them there); its
    own caches."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tests = ["tests/test_jit_conv.py::test_tile_width_follows_the_machine_and_the_environment",
             "tests/test_jit_conv.py::test_every_conv_form_matches_litert_and_numpy", "tests/test_jit_fusion.py",
             "tests/test_jit_quantized.py::test_int8_convolutions_and_pools_are_bit_exact_with_litert",
             "tests/test_jit_quantized.py::test_every_quantized_form_is_bit_exact_with_litert"]  # fmt: skip
    env = {**os.environ, "NUMLITE_JIT_LANES": "8", "NUMLITE_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", *tests], cwd=root, env=env,
                          capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert done.returncode == 0 and "8 passed" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]


def test_two_threads_match_one_and_run_concurrently(convs, monkeypatch):
    """``num_threads=2`` runs the parallel kernels; its results equal one thread's within the
    float32 tolerance (every output element is summed in the same order by one thread, so in
    fact exactly). Two interpreters with different counts invoke at once, in two threads.
    (Every core reported idle: on a busy machine an invoke would run on fewer threads; and
    every node parallel, as the fixture compiled it: run_interpreter allocates again.)"""
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)
    monkeypatch.setattr(conv, "PARALLEL_MIN_WORK", 0)
    model, inputs, compiled = convs
    one, two = compiled[1], compiled[2]
    assert two.jit_report()["subgraphs"][0]["compiled"]
    assert two._jit.engines[0].threads == min(2, numba.config.NUMBA_NUM_THREADS)
    assert one._jit.engines[0].threads == 0  # serial kernels: no thread count to set
    names = [d["name"] for d in one.get_output_details()]
    expected = run_interpreter(one, inputs)
    _assert_same(run_interpreter(two, inputs), expected, names, "num_threads=1")
    results: dict[int, list] = {}

    def work(interpreter: Any, key: int) -> None:
        for _ in range(20):
            interpreter.invoke()
        results[key] = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]

    threads = [threading.Thread(target=work, args=(it, k)) for k, it in compiled.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in compiled:
        _assert_same(results[k], expected, names, f"num_threads={k} run concurrently")
    assert two._jit.engines[0].threads == min(2, numba.config.NUMBA_NUM_THREADS)  # still the parallel kernels



@pytest.mark.parametrize("threads", [2, 3, 4])
def test_convolution_units_cover_every_output_once_and_share_it_fairly(threads):
    """``conv.work_units`` cuts a convolution's output pixels and channel blocks into
    ``prange`` units (``conv.unit_span``): every (pixel, block) pair in exactly one unit, and
    under Numba's static schedule (a thread takes a run of consecutive units, the first runs
    one longer) no thread gets more than an even share plus one unit, and on two threads plus
    one tile of the blocks, where pixels alone would give one thread 4 of a 7x7 layer's 7
    tiles."""
    for pixels, blocks in [(49, 80), (49, 1), (196, 6), (196, 36), (784, 2), (126, 3), (25, 1), (1, 4), (3136, 9), (12544, 6)]:
        chunk, split = conv.work_units(pixels, blocks, threads)
        assert chunk % conv.TILE == 0 and 1 <= split <= blocks
        count = -(-pixels // chunk) * split
        seen = np.zeros((pixels, blocks), np.int64)
        work = []
        for u in range(count):
            m0, m1, g0, g1 = conv.unit_span(u, chunk, pixels, split, blocks)
            seen[m0:m1, g0:g1] += 1
            work.append((m1 - m0) * (g1 - g0))
        assert (seen == 1).all(), (pixels, blocks, threads)
        each, extra = divmod(count, threads)
        starts = np.cumsum([0] + [each + (t < extra) for t in range(threads)])
        busiest = max(sum(work[starts[t] : starts[t + 1]]) for t in range(threads))
        slack = conv.TILE * blocks if threads == 2 else max(work)
        assert busiest <= pixels * blocks / threads + slack, (pixels, blocks, threads, chunk, split, busiest)
    assert conv.work_units(49, 80, 2)[1] == 2  # MobileNetV2's 7x7 layers cut their channels
    assert conv.work_units(12544, 6, 1) == (12544, 1)  # one thread: one unit
    # conv_model's 1x1 CONV_2D to 17 channels (2 blocks) over 126 pixels runs with its
    # channels cut at num_threads=2: test_two_threads_match_one_and_run_concurrently holds
    # that form to one thread's results
    assert conv.work_units(2 * 9 * 7, 2, 2)[1] == 2
    # and DEPTHWISE_CONV_2D's: 7 rows of MobileNetV2's last layers, and conv_model's one row
    assert conv.depthwise_split(7, 960, 2) == 2 and conv.depthwise_split(1, 80, 2) == 2 and conv.depthwise_split(112, 32, 2) == 1
    assert conv.depthwise_split(7, 960, 1) == 1

@pytest.mark.parametrize("idle", [0.2, 64.0])
def test_two_threads_use_the_cores_other_processes_leave_idle(convs, monkeypatch, idle):
    """While other processes keep the cores busy (idle_cores below 1.5), ``num_threads=2`` runs
    its nodes' serial entry points on the calling thread; on idle cores the parallel ones on
    two threads. The outputs are one thread's bit for bit either way, and the caller's Numba
    thread count is restored after each invoke."""
    from numlite.jit.kernels import loops

    model, inputs, compiled = convs
    monkeypatch.setattr(parallel, "idle_cores", lambda: idle)
    monkeypatch.setattr(conv, "PARALLEL_MIN_WORK", 0)  # as compiled (run_interpreter allocates again)
    counts: list[int] = []
    set_threads = numba.set_num_threads
    monkeypatch.setattr(numba, "set_num_threads", lambda n: counts.append(n) or set_threads(n))
    before = numba.get_num_threads()
    names = [d["name"] for d in compiled[1].get_output_details()]
    expected = run_interpreter(compiled[1], inputs)
    counts.clear()
    got = run_interpreter(compiled[2], inputs)
    for a, b, name in zip(got, expected, names):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}: num_threads=2 with {idle} idle cores against 1 thread")
    engine = compiled[2]._jit.engines[0]
    assert engine.table_slots, "the model's nodes call no parallel entry point"
    busy = idle < 1.5
    assert {int(engine.ctl[slot]) for slot in engine.table_slots} == {loops.entry(not busy).ctypes.data}
    assert counts == ([] if busy else [min(2, numba.config.NUMBA_NUM_THREADS), before]), counts
    assert numba.get_num_threads() == before


def test_converter_cnn_compiles_and_matches(jit_cache):
    tf = pytest.importorskip("tensorflow")
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((17, 15, 3), batch_size=1),
        layers.Conv2D(12, 3, strides=2, padding="same", activation="relu6"),
        layers.DepthwiseConv2D(3, padding="same", activation="relu6"),
        layers.Conv2D(20, 1, activation="relu"),
        layers.ZeroPadding2D(((0, 1), (0, 1))),
        layers.DepthwiseConv2D(3, strides=2, padding="valid"),
        layers.MaxPooling2D(),
        layers.AveragePooling2D(2, padding="same"),
        layers.Flatten(),
        layers.Dense(10, activation="softmax"),
    ])  # fmt: skip
    content = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    interpreter = numlite.Interpreter(model_content=content, jit=True, num_threads=1)
    interpreter.allocate_tensors()
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], report
    feed = [rng_floats((1, 17, 15, 3), 5)]
    names = [d["name"] for d in interpreter.get_output_details()]
    _matches_litert_and_numpy(content, run_interpreter(interpreter, feed), feed, names)


def _invoke(interpreter: Any, feed: list[np.ndarray]) -> list[np.ndarray]:
    """Set the inputs and invoke, without allocating again (run_interpreter allocates)."""
    for d, value in zip(interpreter.get_input_details(), feed):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def _unprepared(kernel: Any) -> bool:
    """A fresh kernel: no state beyond its node (a dispatcher that chose no kernel yet)."""
    return set(vars(kernel)) <= {"node", "options", "impl"} and getattr(kernel, "impl", None) is None


def test_numpy_kernels_drop_their_weights_under_the_compiled_engine_and_prepare_again(convs):
    """From the compiled model's second run after an allocate, the NumPy engine's CONV_2D and
    DEPTHWISE_CONV_2D kernels give up what they laid out at prepare (the compiled model packed
    its own copies): nothing holds the old kernels. A watched invoke (a cancellation check runs the NumPy engine)
    prepares them again and matches LiteRT; so do the compiled invokes before and after it,
    and an allocate_tensors() in between."""
    import gc
    import weakref

    model, inputs, compiled = convs
    interpreter = compiled[2]
    runtime = interpreter._subgraphs[0]
    names = [d["name"] for d in interpreter.get_output_details()]
    litert = litert_interpreter(model)
    heavy = [s.index for s in runtime.plan if s.op_name in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    for seed in (0, 1):
        feed = [rng_floats(v.shape, 60 + 3 * seed + k) for k, v in enumerate(inputs)]
        expected = run_interpreter(litert, feed)
        with pytest.MonkeyPatch.context() as patch:  # as the fixture compiled it
            patch.setattr(conv, "PARALLEL_MIN_WORK", 0)
            interpreter.allocate_tensors()  # prepares every node again; the compiled model is kept
        assert runtime.released == {}
        old = [weakref.ref(runtime.plan[i].kernel) for i in heavy]
        _assert_same(_invoke(interpreter, feed), expected, names, "LiteRT (compiled)")
        assert runtime.released == {}  # kept at the first compiled run after an allocate
        _assert_same(_invoke(interpreter, feed), expected, names, "LiteRT (compiled, second run)")
        assert sorted(runtime.released) == heavy
        gc.collect()
        assert all(ref() is None for ref in old), "a released kernel is still held"
        assert all(_unprepared(runtime.plan[i].kernel) for i in heavy)
        interpreter.check_cancelled = lambda: False  # watched: the NumPy engine runs it
        try:
            _assert_same(_invoke(interpreter, feed), expected, names, "LiteRT (NumPy after the release)")
        finally:
            interpreter.check_cancelled = None
        assert runtime.released == {} and not any(_unprepared(runtime.plan[i].kernel) for i in heavy)
        _assert_same(_invoke(interpreter, feed), expected, names, "LiteRT (compiled again)")
