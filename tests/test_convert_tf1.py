"""TF1 graphs: control flow v1 (Switch/Merge, Enter/Exit loops, TensorArrays) raised to IF/WHILE.

The graphs are built by ``tests/tf1_graphs.py`` in a separate process (control flow v2 must be
off before any graph exists, which this process cannot undo), frozen, and their
``tf.compat.v1.Session`` results stored next to them. Each is converted by numlite and run in
numlite and in LiteRT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRT

import numlite
from helpers import all_op_names, run_by_name
from numlite.converter import TFLiteConverter
from numlite.errors import ConversionError

HERE = os.path.dirname(__file__)

# case: operators the converted model must hold (control flow raised, not dropped or flattened)
CASES = {
    "cond": {"IF": 1},
    "cond_several_outputs": {"IF": 1},
    "while_loop": {"WHILE": 1},
    "while_invariants": {"WHILE": 1},
    "nested_while_2": {"WHILE": 2},
    "nested_while_3": {"WHILE": 3},
    "cond_in_while": {"WHILE": 1, "IF": 1},
    "while_in_cond": {"WHILE": 1, "IF": 1},
    "dynamic_rnn_lstm": {"WHILE": 1},
    "tensor_array_accumulate": {"WHILE": 1},
    "while_dynamic_batch": {"WHILE": 1},
    "while_growing": {"WHILE": 1},
    "control_dependencies": {"WHILE": 1, "IF": 1},
    "map_fn_and_scan": {"WHILE": 2},
    "case_and_max_iterations": {"WHILE": 1, "IF": 2},
}


@pytest.fixture(scope="session")
def tf1_dir(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("tf1"))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    subprocess.run([sys.executable, os.path.join(HERE, "tf1_graphs.py"), out], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return out


@pytest.fixture(scope="session")
def cases(tf1_dir) -> dict:
    with open(os.path.join(tf1_dir, "cases.json")) as f:
        return json.load(f)


def test_every_built_case_is_tested(cases):
    assert set(cases) == set(CASES)


def convert_case(tf1_dir: str, meta: dict, name: str, **kwargs) -> bytes:
    converter = TFLiteConverter.from_frozen_graph(os.path.join(tf1_dir, f"{name}.pb"), meta["inputs"],
                                                  meta["outputs"], **kwargs)
    return converter.convert()


def check_against_session(tf1_dir: str, meta: dict, name: str, model: bytes) -> None:
    data = np.load(os.path.join(tf1_dir, f"{name}.npz"))
    for k in range(meta["runs"]):
        inputs = {n: data[f"run{k}/in/{n}"] for n in meta["inputs"]}
        expected = [data[f"run{k}/out/{n}"] for n in meta["outputs"]]
        for runtime, cls in (("numlite", numlite.Interpreter), ("LiteRT", LiteRT)):
            for out_name, got, want in zip(meta["outputs"], run_by_name(cls, model, inputs, meta["outputs"]), expected):
                where = f"{runtime}, run {k}, output {out_name}"
                assert got.shape == want.shape, where
                assert got.dtype == want.dtype, where
                if want.dtype.kind == "f":
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=where)
                else:
                    np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tf1_graph_converts_and_matches_session(tf1_dir, cases, name):
    model = convert_case(tf1_dir, cases[name], name)
    ops = all_op_names(model)
    for op, count in CASES[name].items():
        assert ops.count(op) == count, f"{name}: {ops}"
    assert "CUSTOM" not in ops and "DELEGATE" not in ops
    check_against_session(tf1_dir, cases[name], name, model)


def test_dynamic_rnn_tensor_arrays_become_plain_tensors(tf1_dir, cases):
    """dynamic_rnn reads its input TensorArray and writes its output one inside the loop: both
    are plain tensors (GATHER to read, DYNAMIC_UPDATE_SLICE to write), no TF fallback."""
    ops = all_op_names(convert_case(tf1_dir, cases["dynamic_rnn_lstm"], "dynamic_rnn_lstm"))
    assert "DYNAMIC_UPDATE_SLICE" in ops and "GATHER" in ops
    assert not [op for op in ops if op.startswith("Flex")]


def test_input_shapes_fix_a_dynamic_batch(tf1_dir, cases):
    meta = cases["while_dynamic_batch"]
    dynamic = numlite.Interpreter(model_content=convert_case(tf1_dir, meta, "while_dynamic_batch"))
    assert list(dynamic.get_input_details()[0]["shape_signature"]) == [-1, 3]
    fixed_model = convert_case(tf1_dir, meta, "while_dynamic_batch", input_shapes={"x": [5, 3]})
    fixed = numlite.Interpreter(model_content=fixed_model)
    assert list(fixed.get_input_details()[0]["shape_signature"]) == [5, 3]
    data = np.load(os.path.join(tf1_dir, "while_dynamic_batch.npz"))  # run 1 feeds 5 rows
    for cls in (numlite.Interpreter, LiteRT):
        (got,) = run_by_name(cls, fixed_model, {"x": data["run1/in/x"]}, ["out"])
        np.testing.assert_allclose(got, data["run1/out/out"], rtol=1e-5, atol=1e-5)


def test_tf1_saved_model(tf1_dir):
    """A TF1 SavedModel (variables, a cond in a while loop) through ``from_saved_model``."""
    converter = TFLiteConverter.from_saved_model(os.path.join(tf1_dir, "saved_model"))
    model = converter.convert()
    assert converter.report.signatures == ["serving_default"]
    assert {"WHILE", "IF"} <= set(all_op_names(model))
    data = np.load(os.path.join(tf1_dir, "saved_model.npz"))
    for cls in (numlite.Interpreter, LiteRT):
        result = cls(model_content=model).get_signature_runner()(x=data["x"])
        np.testing.assert_allclose(result["y"], data["y"], rtol=1e-5, atol=1e-5)


def test_cli_converts_a_frozen_graph(tf1_dir, cases, tmp_path, capsys):
    from numlite.cli.main import main

    out = tmp_path / "model.tflite"
    source = os.path.join(tf1_dir, "while_invariants.pb")
    assert main(["convert", source, "--inputs", "x,w,n", "--outputs", "i,h,total", "-o", str(out)]) == 0
    assert "WHILE x1" in capsys.readouterr().out
    check_against_session(tf1_dir, cases["while_invariants"], "while_invariants", out.read_bytes())
    assert main(["convert", source, "--inputs", "x"]) == 1
    assert "needs --inputs and --outputs" in capsys.readouterr().err


# -- what cannot be converted fails clearly ------------------------------------------------------


def frozen_errors(tf1_dir: str, name: str, inputs: list[str], outputs: list[str]) -> str:
    with pytest.raises(ConversionError) as info:
        TFLiteConverter.from_frozen_graph(os.path.join(tf1_dir, f"{name}.pb"), inputs, outputs).convert()
    return str(info.value)


def test_value_taken_out_of_a_loop_body_is_refused(tf1_dir):
    message = frozen_errors(tf1_dir, "while_loop", ["x"], ["while/add_1"])
    assert "while/while_context" in message and "while/add_1:0" in message


def test_value_taken_out_of_a_branch_is_refused(tf1_dir):
    # cond/Switch_1:1 is x as seen by the true branch only: dead when the predicate is false.
    message = frozen_errors(tf1_dir, "cond", ["x", "y"], ["cond/Switch_1:1"])
    assert "cond/Switch_1" in message


def test_frozen_graph_argument_errors(tf1_dir):
    assert "not a tensor of the graph" in frozen_errors(tf1_dir, "cond", ["x", "nope"], ["out"])
    assert "'y'" in frozen_errors(tf1_dir, "cond", ["x"], ["out"])  # y is read but not fed
    with pytest.raises(ConversionError, match="cannot read a GraphDef"):
        TFLiteConverter.from_frozen_graph(os.path.join(tf1_dir, "cases.json"), ["x"], ["out"])


def test_loop_with_two_loop_conds_is_refused(tf1_dir):
    """A hand-edited loop frame whose structure is not a while loop's names the frame."""
    graph_def = tf.compat.v1.GraphDef()
    with open(os.path.join(tf1_dir, "while_loop.pb"), "rb") as f:
        graph_def.ParseFromString(f.read())
    extra = graph_def.node.add()
    extra.CopyFrom(next(n for n in graph_def.node if n.op == "LoopCond"))
    extra.name = "while/LoopCond_extra"
    switch = next(n for n in graph_def.node if n.op == "Switch")
    switch.input[1] = "while/LoopCond_extra"
    path = os.path.join(tf1_dir, "two_loop_conds.pb")
    with open(path, "wb") as f:
        f.write(graph_def.SerializeToString())
    with pytest.raises(ConversionError, match=r"while loop 'while/while_context' has 2 LoopCond"):
        TFLiteConverter.from_frozen_graph(path, ["x"], ["out"]).convert()
