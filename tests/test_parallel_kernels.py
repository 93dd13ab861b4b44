"""Heavy float kernels split over threads (numlite.kernels.parallel) against LiteRT.

The kernels only split work that is large enough, in blocks that are not too thin, and only
onto cores other processes leave idle, so these tests lower the thresholds and report every
core idle: each model then runs as blocks on several threads, and must still give LiteRT's
results. Convolutions and fully connected layers split only with ``SPLIT_BLAS_KERNELS`` (by
default BLAS threads their products), which these tests turn on."""

import threading

import numpy as np
import pytest
import tensorflow as tf

import numlite
from helpers import assert_close, convert, random_inputs, run_litert
from numlite.interpreter.denormals import SUPPORTED as FLUSH_SUPPORTED
from numlite.interpreter.denormals import FlushDenormals
from numlite.kernels import parallel


@pytest.fixture
def split_everything(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_SPLIT_WORK", 1)
    monkeypatch.setattr(parallel, "MIN_BLOCK_ROWS", 8)
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)
    monkeypatch.setattr(parallel, "SPLIT_BLAS_KERNELS", True)  # off by default: kept, and tested


def _weights(shape, seed):
    return np.random.default_rng(seed).uniform(-0.5, 0.5, shape).astype(np.float32)


def _kernel(interpreter, node=0):
    kernel = interpreter.subgraph(0).plan[node].kernel
    return getattr(kernel, "impl", None) or kernel


def _assert_split_matches_litert(model, threads=3):
    inputs = random_inputs(model)
    expected = run_litert(model, inputs)
    interpreter = numlite.Interpreter(model_content=model, num_threads=threads)
    interpreter.allocate_tensors()
    kernel = _kernel(interpreter)
    assert kernel.threads == threads
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    for _ in range(2):  # the second invoke reuses the tasks bound by the first
        interpreter.invoke()
        actual = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        for a, e in zip(actual, expected):
            assert_close(a, e)
    assert len(kernel.tasks) > 1
    return kernel


CONV_CASES = [
    ((2, 13, 11, 8), (1, 1, 8, 12), 1, "VALID", tf.nn.relu6),  # pointwise: the pixels as rows
    ((2, 13, 11, 5), (3, 3, 5, 7), 1, "SAME", tf.nn.relu),  # im2col over a padded input
    ((1, 15, 12, 3), (3, 3, 3, 6), 2, "SAME", lambda y: y),  # strided, odd padding
    ((1, 10, 9, 4), (2, 3, 4, 5), 1, "VALID", lambda y: y),  # im2col of the input itself
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def test_conv2d_split_over_threads(split_everything, case):
    shape, hwio, stride, padding, act = case
    w, b = _weights(hwio, 1), _weights(hwio[-1:], 2)
    model = convert(
        lambda x: act(tf.nn.conv2d(x, w, stride, padding) + b), [tf.TensorSpec(shape, tf.float32)], key=("split conv", case)
    )
    kernel = _assert_split_matches_litert(model)
    assert len(kernel.cols) in (0, kernel.threads)  # im2col scratch: one block per thread


@pytest.mark.parametrize("stride,multiplier", [(1, 1), (2, 1), (2, 2)])
def test_depthwise_split_over_threads(split_everything, stride, multiplier):
    """Blocks of output rows over threads; strided layers of few channels sum their taps per
    phase plane with one einsum, whose stacked weights all blocks share (one copy per plane)."""
    w = _weights((3, 3, 6, multiplier), 3)
    b = _weights((6 * multiplier,), 4)
    model = convert(
        lambda x: tf.nn.relu6(tf.nn.depthwise_conv2d(x, w, (1, stride, stride, 1), "SAME") + b),
        [tf.TensorSpec((2, 14, 13, 6), tf.float32)],
        key=("split depthwise", stride, multiplier),
    )
    kernel = _assert_split_matches_litert(model)
    if (stride, multiplier) == (2, 1):
        grouped = [views for task in kernel.tasks for _, _, views in task.args[0] if isinstance(views[0], tuple)]
        assert len(grouped) > 1 and len(grouped[0]) == stride
        for plane in range(stride):
            assert len({id(views[plane][1]) for views in grouped}) == 1


@pytest.mark.parametrize("batch", [1, 300])  # blocks of units, blocks of rows
def test_fully_connected_split_over_threads(split_everything, batch):
    w, b = _weights((40, 96), 5), _weights((96,), 6)
    model = convert(lambda x: tf.nn.relu(tf.matmul(x, w) + b), [tf.TensorSpec((batch, 40), tf.float32)], key=("split fc", batch))
    kernel = _assert_split_matches_litert(model, threads=2)
    assert kernel.by_rows == (batch > 1)


def test_a_task_error_reaches_the_caller(split_everything):
    def fail(slot):
        raise ValueError("task failed")

    with pytest.raises(ValueError, match="task failed"):
        parallel.run([fail, lambda slot: None, lambda slot: None], threads=2)


@pytest.mark.skipif(not FLUSH_SUPPORTED, reason="no flush-to-zero control on this platform")
def test_workers_take_the_callers_flush_to_zero_mode(split_everything):
    """Inside invoke denormals are zero (as in LiteRT); a worker thread must compute so too."""
    tiny = np.full(4, 1e-39, np.float32)  # a denormal
    both = threading.Barrier(2, timeout=10)  # each of two tasks waits for the other: two threads
    results = {}

    def task(slot):
        both.wait()
        results[slot] = tiny * np.float32(1)

    with FlushDenormals():
        parallel.run([task, task], threads=2)
    assert sorted(results) == [0, 1]
    for value in results.values():
        assert not value.any()
    assert (tiny * np.float32(1)).all()  # outside the context denormals are kept


def _byte_range(a: np.ndarray) -> tuple[int, int]:
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def test_working_memory_is_planned_in_the_arena():
    """Pools (with a -inf border), convolutions and depthwise convolutions (zero borders) carve
    their padded inputs and im2col blocks from the arena, as TFLite's temporaries: each from
    bytes that no tensor alive at its step uses, shared with tensors alive at other steps.
    Every invoke writes the borders again, so each op still sees its own padding."""
    w1, b1 = _weights((3, 3, 4, 6), 7), _weights((6,), 8)
    w2, b2 = _weights((5, 5, 6, 1), 9), _weights((6,), 10)

    def net(x):
        y = tf.nn.max_pool2d(x, 3, 2, "SAME")
        y = tf.nn.relu(tf.nn.conv2d(y, w1, 1, "SAME") + b1)
        y = tf.nn.depthwise_conv2d(y, w2, (1, 1, 1, 1), "SAME") + b2
        return tf.nn.avg_pool2d(y - 3.0, 3, 2, "SAME")  # negative values: a zero border would show

    model = convert(net, [tf.TensorSpec((2, 17, 16, 4), tf.float32)], key="shared scratchpad")
    inputs = random_inputs(model)
    expected = run_litert(model, inputs)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    for _ in range(2):
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected[0])
    sg = interpreter.subgraph(0)
    first, last = {}, {}
    for s, step in enumerate(sg.plan):
        for t in [*step.inputs, *step.outputs]:
            if t >= 0:
                first.setdefault(t, s)
                last[t] = s
    arena = _byte_range(sg.arena)
    users = 0
    for s in range(len(sg.plan)):
        kernel = _kernel(interpreter, s)
        if not getattr(kernel, "scratch_specs", None):
            continue
        users += 1
        lo, hi = _byte_range(kernel.pad.buffer)
        assert kernel.pad.nbytes == kernel.scratch_bytes
        assert arena[0] <= lo and hi <= arena[1]  # in the arena...
        for t, _, _ in sg.arena_plan:  # ...apart from every tensor alive at its step
            if first[t] <= s <= last[t]:
                t_lo, t_hi = _byte_range(sg.arrays[t])
                assert t_hi <= lo or hi <= t_lo, f"node {s}'s working memory overlaps tensor {t}"
    assert users >= 3
    tensors_only = max(offset + nbytes for _, offset, nbytes in sg.arena_plan)
    largest_need = max(nbytes for _, _, nbytes in sg.scratch_plan)
    assert sg.arena_bytes < tensors_only + largest_need  # the needs reuse dead tensors' bytes


@pytest.mark.skipif(parallel._BLAS is None, reason="NumPy's OpenBLAS not found: its pool cannot be read")
def test_an_unsplit_kernel_leaves_blas_its_threads(monkeypatch):
    """A convolution too thin to cut into row blocks (ResNet50's 7x7 layers) runs on the
    calling thread, and its matmul must keep the interpreter's BLAS pool (num_threads), not
    be held to one thread as the blocks of a split kernel are. (Every core reported idle: on
    busy cores the pool shrinks, tests/test_busy_threads.py.)"""
    monkeypatch.setattr(parallel, "idle_cores", lambda: 64.0)
    w, b = _weights((3, 3, 64, 64), 11), _weights((64,), 12)  # 1.8M multiply-adds on 49 rows
    model = convert(lambda x: tf.nn.conv2d(x, w, 1, "SAME") + b, [tf.TensorSpec((1, 7, 7, 64), tf.float32)], key="thin conv")
    seen = []
    matmul = np.matmul

    def watched(*args, **kwargs):
        seen.append(parallel._BLAS[1]())
        return matmul(*args, **kwargs)

    interpreter = numlite.Interpreter(model_content=model, num_threads=2)
    interpreter.allocate_tensors()
    kernel = _kernel(interpreter)
    assert kernel.threads == 1 and kernel.run is parallel.serial
    inputs = random_inputs(model)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
    monkeypatch.setattr(np, "matmul", watched)
    interpreter.invoke()
    monkeypatch.undo()
    assert seen and set(seen) == {2}
    assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, inputs)[0])
