"""numlite.batch and ``numlite predict``: batch inference over datasets.

The reference for every run is one numlite Interpreter invoked example by example through the
plain tf.lite API (bit for bit), itself checked against LiteRT on the same model. A model with a
dynamic batch axis stacks examples into one invoke, where a batched matmul rounds differently
from one row at a time: those runs are compared bit for bit with one interpreter invoked on the
same batches, and within 1e-5 with the per-example reference.
"""

from __future__ import annotations

import io
import os
import sys
import subprocess
import zipfile
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_close, convert, run_litert

import numlite
from numlite import batch
from numlite.batch.cli import Progress
from numlite.batch.store import iter_results
from numlite.cli.main import main as cli_main
from numlite.model import SignatureDef, read_model, write_model

S = tf.TensorSpec
RNG = np.random.default_rng(7)
W = RNG.standard_normal((8, 5)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)
N = 21  # examples: not a multiple of the batch or chunk sizes


def _dense(x, n):
    return tf.nn.softmax(tf.matmul(x, W) + B), tf.reduce_sum(n, axis=-1)


def dynamic_model() -> bytes:
    """Inputs x [?, 8] float32 and n [?, 3] int32; outputs softmax scores [?, 5] and an int sum."""
    return convert(_dense, [S([None, 8], tf.float32), S([None, 3], tf.int32)], key="batch-dynamic")


def fixed_model() -> bytes:
    """The same function with a fixed batch of 1."""
    return convert(_dense, [S([1, 8], tf.float32), S([1, 3], tf.int32)], key="batch-fixed")


def other_model() -> bytes:
    """The dense model with other weights, for --compare."""
    return convert(lambda x, n: _dense(x * 1.01, n), [S([None, 8], tf.float32), S([None, 3], tf.int32)], key="batch-other")


def signature_model() -> bytes:
    """The dynamic model with a signature def (numlite's writer): inputs features/counts."""
    m = read_model(dynamic_model())
    sg = m.subgraphs[0]
    m.signature_defs = [SignatureDef("classify", 0, {"features": sg.inputs[0], "counts": sg.inputs[1]},
                                     {"probs": sg.outputs[0], "total": sg.outputs[1]})]
    return write_model(m)


class Accumulator(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.acc = tf.Variable(np.zeros((1, 3), np.float32))

    @tf.function(input_signature=[S((1, 3), tf.float32)])
    def step(self, x):
        self.acc.assign(self.acc * 0.5 + x)
        return tf.tanh(self.acc)


_STATEFUL: list[bytes] = []


def stateful_model() -> bytes:
    """A resource variable (VAR_HANDLE) accumulating the inputs, input x [1, 3]."""
    if not _STATEFUL:
        module = Accumulator()
        concrete = module.step.get_concrete_function()
        _STATEFUL.append(tf.lite.TFLiteConverter.from_concrete_functions([concrete], module).convert())
    return _STATEFUL[0]


def examples(n: int = N, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-2, 2, (n, 8)).astype(np.float32), "n": rng.integers(-50, 50, (n, 3)).astype(np.int32)}


def names(model: bytes) -> tuple[list[str], list[str]]:
    it = numlite.Interpreter(model_content=model)
    return [d["name"] for d in it.get_input_details()], [d["name"] for d in it.get_output_details()]


def per_example(model: bytes, data: dict[str, np.ndarray], rows: int = 1) -> list[dict[str, np.ndarray]]:
    """The reference: one interpreter, the tf.lite API, ``rows`` examples per invoke in order."""
    it = numlite.Interpreter(model_content=model)
    ins = {d["name"]: d["index"] for d in it.get_input_details()}
    outs = {d["name"]: d["index"] for d in it.get_output_details()}
    total = len(next(iter(data.values())))
    expected = []
    for start in range(0, total, rows):
        feeds = {k: v[start : start + rows] for k, v in data.items()}
        for k, v in feeds.items():
            it.resize_tensor_input(ins[k], v.shape)
        it.allocate_tensors()
        for k, v in feeds.items():
            it.set_tensor(ins[k], v)
        it.invoke()
        got = {k: it.get_tensor(i) for k, i in outs.items()}
        expected += [{k: v[j] for k, v in got.items()} for j in range(len(feeds["x"]))]
    return expected


def assert_identical(results: list[batch.Result], expected: list[dict[str, np.ndarray]], skip: set[int] = frozenset()) -> None:
    assert [r.index for r in results] == list(range(len(expected)))
    for r, e in zip(results, expected):
        if r.index in skip:
            continue
        assert r.ok, r.error
        assert r.outputs.keys() == e.keys()
        for k in e:
            assert r.outputs[k].dtype == e[k].dtype and r.outputs[k].shape == e[k].shape, (r.index, k)
            assert r.outputs[k].tobytes() == e[k].tobytes(), f"example {r.index}, output {k}: not bit for bit"


def write_files(folder: Any, data: dict[str, np.ndarray]) -> None:
    """Examples 0-9 stacked in one .npz, 10-14 as single-example .npz files, the rest stacked in
    another .npz: sorted names keep that order."""
    os.makedirs(folder, exist_ok=True)
    np.savez(os.path.join(folder, "a.npz"), **{k: v[:10] for k, v in data.items()})
    for i in range(10, 15):
        np.savez(os.path.join(folder, f"b{i:02d}.npz"), **{k: v[i] for k, v in data.items()})
    np.savez(os.path.join(folder, "c.npz"), **{k: v[15:] for k, v in data.items()})


# ----------------------------------------------------------------------------- grounding


def test_numlite_matches_litert_on_the_batch_models():
    data = examples(4)
    for model in (dynamic_model(), fixed_model()):
        rows = 4 if model is dynamic_model() else 1
        for start in range(0, 4, rows):
            inputs = [data["x"][start : start + rows], data["n"][start : start + rows]]
            expected = run_litert(model, inputs)
            got = per_example(model, {k: v[start : start + rows] for k, v in data.items()}, rows)
            for k, name in enumerate(names(model)[1]):
                actual = np.stack([g[name] for g in got])
                assert_close(actual, expected[k], what=f"{name}: ")


# ----------------------------------------------------------------------------- local backend


@pytest.mark.parametrize("workers", [0, 2])
def test_every_input_kind_bit_for_bit_per_example(workers, tmp_path):
    """Fixed batch of 1: each example its own invoke, identical to the per-example reference."""
    model, data = fixed_model(), examples()
    expected = per_example(model, data)
    write_files(tmp_path / "files", data)
    kinds = {
        "arrays": data,
        "feed dicts": [{k: v[i] for k, v in data.items()} for i in range(N)],
        "generator": ({k: v[i][np.newaxis] for k, v in data.items()} for i in range(N)),  # with a batch axis of 1
        "files": str(tmp_path / "files"),
    }
    if workers == 2:  # a pool per kind costs a few seconds: the pool reads files, the rest run in process too
        kinds = {"files": kinds["files"], "arrays": kinds["arrays"]}
    for kind, inputs in kinds.items():
        results = list(batch.predict(model, inputs, workers=workers))
        assert_identical(results, expected)


def test_dynamic_batch_is_resized_to_the_batch(tmp_path):
    """Batches of 4 (aligned on example indices 0, 4, 8...): bit for bit what one interpreter
    gives on the same batches, within 1e-5 of one invoke per example; batch_size=1 is the
    per-example reference exactly."""
    model, data = dynamic_model(), examples()
    batched = per_example(model, data, rows=4)
    write_files(tmp_path / "files", data)
    results = list(batch.predict(model, str(tmp_path / "files"), workers=2, batch_size=4))
    assert_identical(results, batched)
    for r, e in zip(results, per_example(model, data)):
        for k in e:
            assert_close(r.outputs[k], e[k])  # float32 matmul over 8 terms, rounded per batch layout
    assert_identical(list(batch.predict(model, data, workers=0, batch_size=1)), per_example(model, data))
    # Feed dicts one by one with other chunk sizes: the same batches, the same bits.
    feeds = [{k: v[i] for k, v in data.items()} for i in range(N)]
    assert_identical(list(batch.predict(model, feeds, workers=0, batch_size=4, chunk_size=12)), batched)


def test_signature_runner_feeds_by_signature_names():
    model, data = signature_model(), examples()
    feeds = {"features": data["x"], "counts": data["n"]}
    results = list(batch.predict(model, feeds, workers=0, batch_size=1))
    plain_names = names(dynamic_model())[1]
    reference = per_example(dynamic_model(), data)
    expected = [{"probs": e[plain_names[0]], "total": e[plain_names[1]]} for e in reference]
    assert_identical(results, expected)
    bad = list(batch.predict(model, {"x": data["x"], "n": data["n"]}, workers=0))
    assert "the model's signature inputs are ['features', 'counts']" in bad[0].error


def test_failures_are_recorded_and_the_run_goes_on(tmp_path):
    model, data = dynamic_model(), examples()
    feeds = [{k: v[i] for k, v in data.items()} for i in range(N)]
    feeds[3] = {"x": data["x"][3].astype(np.float64), "n": data["n"][3]}
    feeds[5] = {"x": data["x"][5][:6], "n": data["n"][5]}
    feeds[6] = {"x": data["x"][6]}
    results = list(batch.predict(model, feeds, workers=0, batch_size=1))
    assert results[3].error == "example 3: input 'x' has dtype float64, the model expects float32"
    assert results[5].error == "example 5: input 'x' has shape (6,), the model expects (8,) per example"
    assert results[6].error.startswith("example 6: missing ['n']")
    assert_identical(results, per_example(model, data), skip={3, 5, 6})
    # An unreadable file among good ones: one failed example naming the file.
    write_files(tmp_path / "files", data)
    (tmp_path / "files" / "b12.npz").write_bytes(b"not a zip")
    results = list(batch.predict(model, str(tmp_path / "files"), workers=0, batch_size=1))
    assert results[12].error.startswith(f"example 12: {tmp_path / 'files' / 'b12.npz'}: cannot read it as .npz")
    assert_identical(results, per_example(model, data), skip={12})


def test_memory_is_bounded_by_the_chunks_in_flight():
    """The driver reads no further ahead than the chunks in flight, however long the input."""
    model, data = fixed_model(), examples(1)
    read = []

    def endless():
        i = 0
        while True:
            read.append(i)
            yield {k: v[0] for k, v in data.items()}
            i += 1

    stream = batch.predict(model, endless(), workers=2, chunk_size=4)
    first = [next(stream) for _ in range(8)]
    stream.close()  # shuts the pool down
    assert [r.index for r in first] == list(range(8)) and all(r.ok for r in first)
    # 2 chunks per worker in flight (4) after the 2 chunks taken, and the one example read to
    # see that a chunk ended: 6 chunks of 4, + 1; a run reading all it can would never stop.
    assert len(read) <= 4 * (2 * 2 + 2) + 1


# ----------------------------------------------------------------------------- stateful models


def test_stateful_sequences_reset_between_them():
    model = stateful_model()
    assert batch.ModelSpec.of(read_model(model)).stateful
    rng = np.random.default_rng(3)
    seqs = [rng.uniform(-1, 1, (steps, 3)).astype(np.float32) for steps in (4, 2, 5)]
    (signature,) = numlite.Interpreter(model_content=model).get_signature_list().values()
    (in_name,), (out_name,) = signature["inputs"], signature["outputs"]  # fed by signature names

    def reference(reset: bool) -> list[np.ndarray]:
        it = numlite.Interpreter(model_content=model)
        it.allocate_tensors()
        outs = []
        for seq in seqs:
            if reset:
                it.reset_all_variables()
            steps = []
            for x in seq:
                it.set_tensor(it.get_input_details()[0]["index"], x[np.newaxis])
                it.invoke()
                steps.append(it.get_tensor(it.get_output_details()[0]["index"])[0])
            outs.append(np.stack(steps))
        return outs

    for reset, workers in ((True, 2), (False, 0)):
        inputs = [{in_name: s} for s in seqs]  # each a dict of arrays with a leading step axis
        results = list(batch.predict(model, inputs, sequences=True, reset_between=reset, workers=workers))
        for r, e in zip(results, reference(reset)):
            assert r.ok, r.error
            assert r.outputs[out_name].tobytes() == e.tobytes() and r.outputs[out_name].shape == e.shape
    # Without sequences= the examples are one sequence, in order, on one interpreter.
    flat = np.concatenate(seqs)
    results = list(batch.predict(model, {in_name: flat}, workers=2))
    expected = reference(False)
    assert np.concatenate([r.outputs[out_name][np.newaxis] for r in results]).tobytes() == np.concatenate(expected).tobytes()


# ----------------------------------------------------------------------------- files and resume


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
def test_resume_after_an_interruption_gives_the_same_file(suffix, tmp_path):
    model, data = dynamic_model(), examples()
    options = dict(workers=0, batch_size=4, chunk_size=4, flush_seconds=0)  # written after every chunk
    full = tmp_path / f"full{suffix}"
    batch.predict_to_file(model, data, full, **options)
    expected = list(iter_results(full))
    assert_identical(expected, per_example(model, data, rows=4))

    out = tmp_path / f"cut{suffix}"
    seen = []

    def stop_after_two(chunk):
        seen.append(chunk)
        if len(seen) == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        batch.predict_to_file(model, data, out, on_chunk=stop_after_two, **options)
    assert [r.index for r in iter_results(out)] == list(range(8))  # valid, holding the completed chunks
    if suffix == ".npz":
        assert len(np.load(out).files) == 1 + 4 * 2  # meta; 2 outputs, errors, index per chunk
        # A process killed while writing its third chunk: members with no central directory.
        with open(out, "r+b") as f:
            data_end = zipfile.ZipFile(out).start_dir
            f.seek(data_end)
            f.write(b"PK\x03\x04" + b"\x00" * 40)
            f.truncate()
    summary = batch.predict_to_file(model, data, out, resume=True, **options)
    assert (summary.resumed, summary.computed, summary.total) == (8, N - 8, N)
    assert_identical(list(iter_results(out)), per_example(model, data, rows=4))
    with pytest.raises(numlite.InvalidInputError, match="cannot resume: the file was written with another batch_size"):
        batch.predict_to_file(model, data, out, resume=True, workers=0, batch_size=2, chunk_size=4)
    # With the default flushing, an interruption still keeps every chunk computed before it.
    out = tmp_path / f"late{suffix}"
    seen.clear()
    with pytest.raises(Interrupt):
        batch.predict_to_file(model, data, out, on_chunk=stop_after_two, workers=0, batch_size=4, chunk_size=4)
    assert [r.index for r in iter_results(out)] == list(range(8))


# ----------------------------------------------------------------------------- command line


def test_cli_predict_and_compare(tmp_path, capsys):
    model_path, other_path = tmp_path / "m.tflite", tmp_path / "o.tflite"
    model_path.write_bytes(dynamic_model())
    other_path.write_bytes(other_model())
    data = examples()
    write_files(tmp_path / "files", data)
    out = tmp_path / "out.npz"
    argv = ["predict", str(model_path), str(tmp_path / "files"), "-o", str(out), "--workers", "0", "--batch-size", "4"]
    assert cli_main(argv) == 0
    text = capsys.readouterr()
    assert f"{N} examples (0 failed) in " in text.out and f"examples/s -> {out}" in text.out
    assert f"predict: {N}/{N} examples" in text.err  # not a terminal: plain progress lines
    assert_identical(list(iter_results(out)), per_example(dynamic_model(), data, rows=4))
    assert cli_main(argv + ["--resume"]) == 0
    assert f"resumed: {N} examples were already in {out}" in capsys.readouterr().out

    png = tmp_path / "diff.png"
    argv = ["predict", str(model_path), str(tmp_path / "files"), "--workers", "0", "--batch-size", "1",
            "--compare", str(other_path), "--plot", str(png)]  # fmt: skip
    assert cli_main(argv) == 0
    report = capsys.readouterr().out
    # The expected differences, from LiteRT's outputs of both models.
    mine = run_litert(dynamic_model(), [data["x"], data["n"]])
    theirs = run_litert(other_model(), [data["x"], data["n"]])
    probs, total = names(dynamic_model())[1]
    diff = np.abs(mine[0].astype(np.float64) - theirs[0])
    top1 = int((mine[0].argmax(-1) != theirs[0].argmax(-1)).sum())
    assert f"output {probs}: {N} examples, max abs diff {diff.max():.3g}, mean abs diff {diff.mean():.3g}" in report
    assert f"top-1 class differs: {top1}/{N} examples" in report
    assert f"output {total}: {N} examples, max abs diff 0, mean abs diff 0" in report
    assert f"{'0 (exact)':>18} {N:>10} 100.00% {'#' * 40}" in report  # the int output: every element equal
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_compare_dequantizes_a_quantized_model(tmp_path, capsys):
    """An int8-output file against the float one: compared as the real numbers they stand for."""
    rng = np.random.default_rng(5)
    specs = [S([None, 8], tf.float32)]
    softmax = lambda x: tf.nn.softmax(tf.matmul(x, W))  # noqa: E731
    calibration = [[rng.uniform(-2, 2, (1, 8)).astype(np.float32)] for _ in range(30)]
    quantized = convert(softmax, specs, key="batch-int8", optimizations=[tf.lite.Optimize.DEFAULT],
                        representative_dataset=lambda: iter(calibration), inference_output_type=tf.int8)
    (tmp_path / "q.tflite").write_bytes(quantized)
    (tmp_path / "f.tflite").write_bytes(convert(softmax, specs, key="batch-float"))
    x = rng.uniform(-2, 2, (N, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    argv = ["predict", str(tmp_path / "q.tflite"), str(tmp_path / "x.npy"), "--compare", str(tmp_path / "f.tflite"),
            "--workers", "0"]  # fmt: skip
    assert cli_main(argv) == 0
    report = capsys.readouterr().out
    (q,), (f,) = run_litert(quantized, [x]), run_litert(convert(softmax, specs, key="batch-float"), [x])
    assert q.dtype == np.int8
    detail = numlite.Interpreter(model_content=quantized).get_output_details()[0]
    scale, zero = detail["quantization"]
    diff = np.abs((q.astype(np.float64) - zero) * scale - f)
    assert diff.max() < 0.5  # dequantized: int8 codes against probabilities would differ by up to 128
    name = detail["name"]
    assert f"output {name}: {N} examples, max abs diff {diff.max():.3g}, mean abs diff {diff.mean():.3g}" in report


def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch):
    model_path = tmp_path / "m.tflite"
    model_path.write_bytes(dynamic_model())
    assert cli_main(["predict", str(model_path), str(tmp_path / "nothing"), "-o", str(tmp_path / "o.npz")]) == 1
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nothing'}: no such file or folder"
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["predict", str(model_path), str(tmp_path), "--compare", str(model_path), "--plot", str(tmp_path / "p.png")]
    assert cli_main(argv) == 1
    assert capsys.readouterr().err.strip() == "error: --plot needs matplotlib: pip install 'numlite[plot]'"


def test_progress_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = Progress(stream)
    progress.update(0, 10, 0)
    progress.update(5, 10, 1)
    progress.finish()
    text = stream.getvalue()
    assert text.startswith("\r[" + "#" * 15 + "." * 15 + "] 5/10 examples, ") and ", 1 failed" in text
    assert "ETA 0:00:0" in text and text.endswith("\n")


def test_batch_imports_without_ray():
    code = "import sys; sys.modules['ray'] = None; import numlite.batch, numlite.batch.ray_backend; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.getcwd(), timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


# ----------------------------------------------------------------------------- Ray backend


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray instance for this module (starting one takes seconds)."""
    import ray

    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_backend_bit_for_bit(ray_local, tmp_path):
    data = examples()
    # Files (read by the actors themselves), dynamic batch of 4: the same batches as locally.
    write_files(tmp_path / "files", data)
    results = list(batch.predict(dynamic_model(), str(tmp_path / "files"), backend="ray", workers=2, batch_size=4))
    assert_identical(results, per_example(dynamic_model(), data, rows=4))
    # A Ray Dataset whose columns are the inputs, fixed batch of 1: one invoke per example.
    ds = ray_local.data.from_items([{k: v[i] for k, v in data.items()} for i in range(N)])
    results = list(batch.predict(fixed_model(), ds, backend="ray", workers=2, chunk_size=8))
    assert_identical(results, per_example(fixed_model(), data))
    # A generator of feed dicts (read whole first with Ray, then indexed like a list or arrays).
    feeds = ({k: v[i] for k, v in data.items()} for i in range(N))
    results = list(batch.predict(dynamic_model(), feeds, backend="ray", workers=2, batch_size=4))
    assert_identical(results, per_example(dynamic_model(), data, rows=4))
