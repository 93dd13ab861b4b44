"""The STABLEHLO_* operators (benchmarks/builtin_op_cases_stablehlo.py) against LiteRT's builtin
resolver, which is the ground truth: each case is a one-op model written with numlite's writer,
run in both over two invokes (numlite's second runs its compiled plan). Floats within the
case's tolerance, integers and bools exact. The ops LiteRT cannot run are checked to still fail
in LiteRT as NOT_RUNNABLE says, so the list follows LiteRT when it gains kernels."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter

import numlite
from numlite.errors import NumliteError
from numlite.model import Options, read_model, write_model

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))

from builtin_op_cases_stablehlo import CASES, NOT_RUNNABLE, one_op, values  # noqa: E402

_MODELS: dict[str, tuple[bytes, list[np.ndarray]]] = {}


def _built(case) -> tuple[bytes, list[np.ndarray]]:
    key = f"{case.op}/{case.form}"
    if key not in _MODELS:
        _MODELS[key] = case.build()
    return _MODELS[key]


def _invokes(interpreter, inputs: list[np.ndarray], count: int = 2) -> list[list[np.ndarray]]:
    interpreter.allocate_tensors()
    runs = []
    for _ in range(count):
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        runs.append([np.array(interpreter.get_tensor(d["index"])) for d in interpreter.get_output_details()])
    return runs


def test_cases_are_unique_and_cover_what_litert_runs():
    keys = [(c.op, c.form) for c in CASES]
    assert len(keys) == len(set(keys))
    ops = {c.op for c in CASES}
    assert ops == {"STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM", "STABLEHLO_AND",
                   "STABLEHLO_SHIFT_LEFT", "STABLEHLO_PAD", "STABLEHLO_GATHER", "STABLEHLO_SCATTER",
                   "STABLEHLO_REDUCE_WINDOW", "STABLEHLO_RNG_BIT_GENERATOR", "STABLEHLO_COMPOSITE",
                   "STABLEHLO_CASE"}
    assert not ops & set(NOT_RUNNABLE)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.op}-{c.form}" for c in CASES])
def test_matches_litert(case):
    model, inputs = _built(case)
    assert read_model(model).op_name(read_model(model).subgraphs[0].operators[0]) == case.op
    expected = _invokes(litert_interpreter(model, builtin_only=True), inputs)
    actual = _invokes(numlite.Interpreter(model_content=model), inputs)
    for run, (a_run, e_run) in enumerate(zip(actual, expected)):
        assert len(a_run) == len(e_run)
        if case.check is not None:
            case.check(e_run, a_run)
            continue
        for k, (a, e) in enumerate(zip(a_run, e_run)):
            assert_close(a, e, case.rtol, case.atol, what=f"invoke {run}, output {k}: ")


@pytest.mark.parametrize("op", sorted(NOT_RUNNABLE))
def test_litert_cannot_run(op):
    x = values((3,), np.float32)
    model, _ = one_op(op, [x, x], [((3,), np.float32)])
    with pytest.raises(Exception) as error:
        litert_interpreter(model, builtin_only=True).allocate_tensors()
    assert NOT_RUNNABLE[op] in str(error.value)


def test_stablehlo_case_reads_and_writes_with_its_options():
    # STABLEHLO_CASE (209) and StablehloCaseOptions are newer than the tflite bindings.
    case = next(c for c in CASES if c.op == "STABLEHLO_CASE")
    model = read_model(_built(case)[0])
    op = model.subgraphs[0].operators[0]
    assert model.op_name(op) == "STABLEHLO_CASE"
    assert list(op.builtin_options2.branch_subgraph_indices) == [1, 2, 3]
    assert write_model(model) == _built(case)[0]


def test_unknown_operator_code_is_refused_naming_it():
    # A code newer than numlite's schema (LiteRT's after 209) is refused as the model is read.
    data = bytearray(_built(CASES[0])[0])
    model = read_model(bytes(data))
    model.operator_codes[0].builtin = "STABLEHLO_CASE"
    data = bytearray(write_model(model))
    at = data.find((209).to_bytes(4, "little"))  # OperatorCode.builtin_code, an int32
    data[at] = 250
    with pytest.raises(NumliteError, match="operator code 0: unknown builtin operator UNKNOWN_BUILTIN_250"):
        numlite.Interpreter(model_content=bytes(data))


def _edit(case_op: str, form: str, **changes) -> bytes:
    model = read_model(_built(next(c for c in CASES if c.op == case_op and c.form == form))[0])
    op = model.subgraphs[0].operators[0]
    op.builtin_options2 = Options(op.builtin_options2.type_name, **{**op.builtin_options2.fields(), **changes})
    return write_model(model)


@pytest.mark.parametrize("op, form, changes, message", [
    ("STABLEHLO_PAD", "f32-r2-edges", {"interior_padding": np.array([0], np.int64)}, "interior_padding has 1 entries"),
    ("STABLEHLO_PAD", "f32-r2-edges", {"interior_padding": np.array([0, -1], np.int64)}, "must not be negative"),
    ("STABLEHLO_GATHER", "f32-rows", {"start_index_map": np.array([5], np.int64)}, "names dimension 5"),
    ("STABLEHLO_GATHER", "f32-rows", {"slice_sizes": np.array([1, 9], np.int64)}, "does not fit"),
    ("STABLEHLO_SCATTER", "f32-rows", {"index_vector_dim": 4}, "index_vector_dim 4 is out of range"),
    ("STABLEHLO_REDUCE_WINDOW", "f32-maxpool-2x2-s2", {"window_strides": np.array([1, 0, 2, 1], np.int64)},
     "window_strides must be positive"),
])
def test_bad_options_are_refused_naming_the_node(op, form, changes, message):
    with pytest.raises(NumliteError, match=message) as error:
        numlite.Interpreter(model_content=_edit(op, form, **changes)).allocate_tensors()
    assert f"subgraph 0, node 0 ({op})" in str(error.value)


def test_unsupported_bodies_are_refused():
    # LiteRT takes only one-operator bodies of a few kinds; so does numlite, saying which.
    model = read_model(_built(next(c for c in CASES if c.form == "f32-sum-padded"))[0])
    model.subgraphs[1].operators[0].opcode_index = len(model.operator_codes)
    from numlite.model import OperatorCode
    model.operator_codes.append(OperatorCode("STABLEHLO_SHIFT_LEFT"))
    with pytest.raises(NumliteError, match="reduction body STABLEHLO_SHIFT_LEFT is not supported"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()


@pytest.mark.parametrize("op, form", [
    ("STABLEHLO_PAD", "f32-r2-edges"), ("STABLEHLO_GATHER", "f32-rows"), ("STABLEHLO_SCATTER", "f32-rows"),
    ("STABLEHLO_REDUCE_WINDOW", "u8-sum"), ("STABLEHLO_COMPOSITE", "f32-gelu"), ("STABLEHLO_CASE", "branch-0"),
])
def test_missing_options_are_refused_naming_the_node(op, form):
    # LiteRT refuses these models as it reads them ("Could not get 'stablehlo.pad' operation parameters").
    model = read_model(_built(next(c for c in CASES if c.op == op and c.form == form))[0])
    model.subgraphs[0].operators[0].builtin_options2 = None
    with pytest.raises(NumliteError, match=rf"subgraph 0, node 0 \({op}\).*needs \w+Options in builtin_options_2"):
        numlite.Interpreter(model_content=write_model(model)).allocate_tensors()
