"""The ``numlite`` command line: inspect and run, npz round trips against LiteRT, and errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

import numlite
from helpers import assert_close, convert, convert_keras
from numlite.cli.main import main
from numlite.model import read_model, write_model

BIAS = np.array([0.5, -0.25, 1.0, -2.0], np.float32)


def _two_outputs(x, y):
    return tf.nn.relu(x * y + BIAS), x - y


def _specs():
    return [tf.TensorSpec((2, 4), tf.float32, name="x"), tf.TensorSpec((2, 4), tf.float32, name="y")]


@pytest.fixture(scope="module")
def model_bytes():
    return convert(_two_outputs, _specs(), key="cli-two-outputs")


@pytest.fixture(scope="module")
def model_file(model_bytes, tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "two_outputs.tflite"
    path.write_bytes(model_bytes)
    return str(path)


def _litert_outputs(model: bytes, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """LiteRT's outputs keyed by output tensor name, inputs matched by input tensor name."""
    interpreter = LiteRTInterpreter(model_content=model)
    interpreter.allocate_tensors()
    for d in interpreter.get_input_details():
        interpreter.set_tensor(d["index"], feed[d["name"]])
    interpreter.invoke()
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def _assert_one_line_error(capsys, code):
    out, err = capsys.readouterr()
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------- inspect


def test_inspect_prints_operators_tensors_and_arena(model_file, capsys):
    assert main(["inspect", model_file, "--full-names"]) == 0
    out = capsys.readouterr().out
    model = numlite.model.read_model_file(model_file)
    graph = model.subgraphs[0]
    assert {model.op_name(op) for op in graph.operators} == {"MUL", "ADD", "SUB"}
    for name in ("MUL", "ADD", "SUB", "fused_activation_function=RELU", "fused_activation_function=NONE"):
        assert name in out
    for t in graph.tensors:
        assert t.name in out
    # The constant bias is marked with its buffer size.
    (bias,) = [t for i, t in enumerate(graph.tensors) if model.constant(graph, i) is not None]
    bias_line = next(line for line in out.splitlines() if bias.name in line and "constant" in line)
    assert "16" in bias_line and "[4]" in bias_line
    interpreter = numlite.Interpreter(model_path=model_file)
    interpreter.allocate_tensors()
    assert f"Arena: {interpreter.arena_bytes} B" in out or f"Arena: {interpreter.arena_bytes:,} B" in out


def test_inspect_json_names_enums(tmp_path, capsys):
    """Padding and activation come out as names; the arena line reports a kernel failure
    instead of stopping the summary."""
    w = np.random.default_rng(0).uniform(-1, 1, (3, 3, 2, 4)).astype(np.float32)
    model = read_model(convert(lambda x: tf.nn.relu6(tf.nn.conv2d(x, w, 2, "VALID")), [tf.TensorSpec((1, 9, 9, 2))]))
    assert [model.op_name(op) for op in model.subgraphs[0].operators] == ["CONV_2D"]
    # An op no kernel exists for, so the arena cannot be planned.
    model.operator_codes.append(numlite.model.OperatorCode("CUSTOM", custom_code="NoSuchOp"))
    model.subgraphs[0].operators[0].opcode_index = len(model.operator_codes) - 1
    model.subgraphs[0].operators[0].custom_options = b"\x01\x02"
    path = tmp_path / "custom.tflite"
    path.write_bytes(write_model(model))

    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    op = info["subgraphs"][0]["operators"][0]
    assert op["op"] == "CUSTOM" and op["custom_code"] == "NoSuchOp"
    assert op["options"]["padding"] == "VALID"
    assert op["options"]["fused_activation_function"] == "RELU6"
    assert op["options"]["stride_w"] == 2
    assert info["arena_bytes"] is None and "NoSuchOp" in info["arena_error"]

    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "CUSTOM(NoSuchOp)" in out and "padding=VALID" in out and "fused_activation_function=RELU6" in out
    assert "Arena: unavailable: error:" in out and "NoSuchOp" in out

    # Running it is an error, reported on one line.
    _assert_one_line_error(capsys, main(["run", str(path)]))


def test_inspect_shows_signatures_and_shape_signature(tmp_path, capsys):
    model = _keras_signature_model()
    path = tmp_path / "sig.tflite"
    path.write_bytes(model)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "serving_default" in out
    assert "[-1, 3]" in out  # the batch dimension of the shape signature


# ----------------------------------------------------------------------------- run


def test_run_with_random_inputs(model_file, tmp_path, capsys):
    assert main(["run", model_file, "--seed", "3", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    interpreter = numlite.Interpreter(model_path=model_file)
    for d in interpreter.get_output_details():
        assert d["name"] in out
    assert "[2, 4]" in out and "float32" in out
    assert "random (seed 3)" in out
    assert "first invoke" in out and "median of 2" in out

    # The same seed gives the same inputs, another seed other inputs.
    outputs = []
    for seed in (3, 3, 4):
        target = tmp_path / f"out{len(outputs)}.npz"
        assert main(["run", model_file, "--seed", str(seed), "--repeat", "0", "--output", str(target)]) == 0
        with np.load(target) as saved:
            outputs.append({k: saved[k] for k in saved.files})
    capsys.readouterr()
    for key in outputs[0]:
        np.testing.assert_array_equal(outputs[0][key], outputs[1][key])
    assert any(not np.array_equal(outputs[0][k], outputs[2][k]) for k in outputs[0])


@pytest.mark.parametrize("keys", ["names", "positions"])
def test_run_npz_round_trip_matches_litert(model_bytes, model_file, tmp_path, capsys, keys):
    rng = np.random.default_rng(7)
    details = LiteRTInterpreter(model_content=model_bytes).get_input_details()
    feed = {d["name"]: rng.uniform(-2, 2, (2, 4)).astype(np.float32) for d in details}
    if keys == "names":
        stored = feed
    else:  # arr_0, arr_1 in input order, as np.savez(path, *arrays) writes them; float64 is converted
        stored = {f"arr_{k}": feed[d["name"]].astype(np.float64) for k, d in enumerate(details)}
    np.savez(tmp_path / "in.npz", **stored)

    target = tmp_path / "out.npz"
    assert main(["run", model_file, "--inputs", str(tmp_path / "in.npz"), "--output", str(target)]) == 0
    assert "Saved 2 output(s)" in capsys.readouterr().out
    expected = _litert_outputs(model_bytes, feed)
    with np.load(target) as saved:
        assert sorted(saved.files) == sorted(expected)
        for name, value in expected.items():
            assert_close(saved[name], value, what=f"{name}: ")


def _keras_signature_model():
    def build():
        a, b = tf.keras.Input((3,), name="a"), tf.keras.Input((3,), name="b")
        return tf.keras.Model([a, b], [tf.keras.layers.Add()([a, b]), tf.keras.layers.Subtract()([a, b])])

    return convert_keras(build, key="cli-signature")


def test_run_signature_matches_litert(tmp_path, capsys):
    model = _keras_signature_model()
    path = tmp_path / "sig.tflite"
    path.write_bytes(model)
    rng = np.random.default_rng(11)
    feed = {"a": rng.uniform(-1, 1, (1, 3)).astype(np.float32), "b": rng.uniform(-1, 1, (1, 3)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    target = tmp_path / "out.npz"
    args = ["run", str(path), "--signature", "serving_default", "--inputs", str(tmp_path / "in.npz")]
    assert main(args + ["--output", str(target)]) == 0
    capsys.readouterr()
    expected = LiteRTInterpreter(model_content=model).get_signature_runner("serving_default")(**feed)
    with np.load(target) as saved:
        assert sorted(saved.files) == sorted(expected)
        for name, value in expected.items():
            assert_close(saved[name], value, what=f"{name}: ")


# ----------------------------------------------------------------------------- bench


def test_bench_times_numlite_and_litert_side_by_side(model_file, tmp_path, capsys):
    target = tmp_path / "bench.json"
    assert main(["bench", model_file, "--runs", "3", "--warmup", "1", "--threads", "1,2", "--json", str(target)]) == 0
    out = capsys.readouterr().out
    assert "numlite/LiteRT" in out and "Python overhead" in out
    row = json.loads(target.read_text())
    assert row["threads"] == [1, 2]
    assert row["ops"] == sum(1 for _ in read_model(open(model_file, "rb").read()).iter_operators())
    for who in ("numlite", "litert"):
        assert set(row[f"{who}_ms"]) == {"1", "2"}
        assert all(len(runs) == 3 for runs in row[f"{who}_runs_ms"].values())
        assert all(ms > 0 for ms in row[f"{who}_ms"].values())
    assert row["ratio"]["1"] == pytest.approx(row["numlite_ms"]["1"] / row["litert_ms"]["1"])
    assert row["max_abs_diff"] <= 1e-5  # the two interpreters ran the same input
    assert row["numlite_arena_bytes"] == numlite_arena(model_file)
    # tracemalloc sees NumPy's arrays: at least the arena, which allocate_tensors makes
    assert row["numlite_traced_bytes"] >= row["numlite_arena_bytes"] > 0
    assert "numlite memory" in out
    assert 0 < row["python_overhead_ms"]


def test_bench_prints_no_litert_startup_notice(model_file):
    """LiteRT announces its XNNPACK delegate once per process on stderr: a fresh process, so
    that the notice would be printed here if numlite let it through."""
    done = subprocess.run([sys.executable, "-m", "numlite", "bench", model_file, "--runs", "1", "--threads", "1",
                           "--no-overhead"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "numlite/LiteRT" in done.stdout
    assert "XNNPACK" not in done.stderr, done.stderr


def test_bench_without_litert(model_file, capsys):
    assert main(["bench", model_file, "--runs", "2", "--threads", "1", "--no-litert", "--no-overhead"]) == 0
    out = capsys.readouterr().out
    assert "numlite ms" in out and "LiteRT ms" not in out and "Python overhead" not in out


def test_bench_times_the_compiled_engine_too(model_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NUMLITE_CACHE_DIR", str(tmp_path / "cache"))
    target = tmp_path / "bench.json"
    assert main(["bench", model_file, "--runs", "2", "--threads", "1", "--no-overhead", "--jit", "--json", str(target)]) == 0
    out = capsys.readouterr().out
    assert "jit/LiteRT" in out and "compiled engine: compiled;" in out
    row = json.loads(target.read_text())
    assert row["jit_compiled"] is True and "jit_reason" not in row
    assert len(row["jit_runs_ms"]["1"]) == 2
    assert row["jit_ratio"]["1"] == pytest.approx(row["jit_ms"]["1"] / row["litert_ms"]["1"])
    assert row["jit_max_abs_diff"] <= 1e-5  # the compiled engine ran the same input
    assert row["jit_compile_s"]["1"] > 0


def numlite_arena(path: str) -> int:
    interpreter = numlite.Interpreter(model_path=path)
    interpreter.allocate_tensors()
    return interpreter.arena_bytes


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("command", ["inspect", "run", "bench"])
def test_missing_file_is_a_one_line_error(tmp_path, capsys, command):
    line = _assert_one_line_error(capsys, main([command, str(tmp_path / "missing.tflite")]))
    assert "missing.tflite" in line


@pytest.mark.parametrize("command", ["inspect", "run", "bench"])
def test_non_tflite_file_is_a_one_line_error(tmp_path, capsys, command):
    path = tmp_path / "notes.tflite"
    path.write_text("these are not the flatbuffers you are looking for\n")
    line = _assert_one_line_error(capsys, main([command, str(path)]))
    assert "not a TFLite" in line


def test_npz_without_an_input_is_a_one_line_error(model_file, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", something_else=np.zeros((2, 4), np.float32))
    line = _assert_one_line_error(capsys, main(["run", model_file, "--inputs", str(tmp_path / "in.npz")]))
    assert "something_else" in line


def test_unknown_signature_is_a_one_line_error(model_file, capsys):
    _assert_one_line_error(capsys, main(["run", model_file, "--signature", "nope"]))


def test_usage_errors_return_an_exit_code(capsys):
    assert main([]) == 2
    assert main(["run", "m.tflite", "--repeat", "-1"]) == 2
    assert main(["bench", "m.tflite", "--threads", "0"]) == 2
    assert main(["--help"]) == 0
    capsys.readouterr()


# ----------------------------------------------------------------------------- entry points


def test_console_script_and_python_m(model_file):
    script = os.path.join(os.path.dirname(sys.executable), "numlite")
    assert os.path.exists(script), "the numlite console script is not installed in this environment"
    done = subprocess.run([script, "inspect", model_file], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "SUB" in done.stdout and "Arena:" in done.stdout

    command = [sys.executable, "-m", "numlite", "run", model_file + ".missing"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- run --profile / --trace


def test_run_profile_prints_the_summary_and_trace_is_valid_json(model_bytes, model_file, tmp_path, capsys):
    ops = ["MUL", "ADD", "SUB"]
    rng = np.random.default_rng(5)
    details = LiteRTInterpreter(model_content=model_bytes).get_input_details()
    feed = {d["name"]: rng.uniform(-2, 2, (2, 4)).astype(np.float32) for d in details}
    np.savez(tmp_path / "in.npz", **feed)
    trace_path = tmp_path / "trace.json"
    args = ["run", model_file, "--repeat", "2", "--profile", "--trace", str(trace_path)]
    args += ["--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "o.npz")]
    assert main(args) == 0
    out = capsys.readouterr().out
    # The summary comes after the outputs, one row per op type with its number of runs.
    assert out.index("Summary by node type") > out.index("Outputs")
    assert "Invokes: 3" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ") and line.split()}
    for op in ops:
        assert op in rows and rows[op][2] == "3", rows.get(op)  # nodes, then count: 3 invokes
    assert f"Saved a Chrome trace of {3 * (len(ops) + 1)} event(s) to {trace_path}" in out

    with open(trace_path, encoding="utf-8") as f:
        trace = json.load(f)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["name"] for e in complete) == sorted(["invoke"] * 3 + ops * 3)
    invokes = [e for e in complete if e["name"] == "invoke"]
    for e in complete:
        assert e["dur"] > 0 and e["pid"] == 0 and e["tid"] == 0
        if e["name"] != "invoke":  # inside one of the invokes
            assert any(i["ts"] <= e["ts"] and e["ts"] + e["dur"] <= i["ts"] + i["dur"] + 1e-6 for i in invokes)

    # Profiling changes no output: the saved outputs match LiteRT's on the same inputs.
    expected = _litert_outputs(model_bytes, feed)
    with np.load(tmp_path / "o.npz") as saved:
        for name, value in expected.items():
            assert_close(saved[name], value, what=f"{name}: ")


def test_run_without_profile_prints_no_profile(model_file, capsys):
    assert main(["run", model_file, "--repeat", "0"]) == 0
    out = capsys.readouterr().out
    assert "Summary by node type" not in out and "Chrome trace" not in out and "profiling" not in out


def test_run_trace_alone_and_unwritable_trace(model_file, tmp_path, capsys):
    trace_path = tmp_path / "t.json"
    assert main(["run", model_file, "--repeat", "0", "--trace", str(trace_path)]) == 0
    out = capsys.readouterr().out
    assert "Summary by node type" not in out and "Saved a Chrome trace of 4 event(s)" in out
    assert len([e for e in json.loads(trace_path.read_text())["traceEvents"] if e["ph"] == "X"]) == 4
    line = _assert_one_line_error(capsys, main(["run", model_file, "--trace", str(tmp_path / "no" / "t.json")]))
    assert "trace" in line
