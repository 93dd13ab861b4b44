"""The ops helper jit-ops2 compiled (docs/jit.md, "The exact GELU and more ops"), on both engines,
against LiteRT's builtin kernels: the builtin sweep's own forms of each op
(benchmarks/builtin_op_cases*.py), several forms merged into one model per group, so that each
group costs one compile. (The sweep itself, tests/test_builtin_ops.py, runs numlite with
``jit=False`` on both of its engine sides, so it does not test the compiled kernels.)

Each group names its forms; every one is a float or integer form the compiled engine covers,
and the jit case asserts that the whole merged model compiled. Floats within each form's
tolerance (1e-5), integers and bools exactly."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter

import numlite
from numlite.model import read_model, write_model
from numlite.model.ir import Model, Subgraph

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import builtin_ops  # noqa: E402

CASES, _ = builtin_ops.load_cases()
BY_ID = {builtin_ops.case_id(c): c for c in CASES}

# A form per semantic rule, each dtype once or twice (each node is about a second of compile
# under load): float32 with NaNs and signed zeros (std::max's NaN rule), integers that wrap,
# bools (add as OR, multiply as AND), the single-element path; no f16 or u32 forms (float16 and
# uint32 tensors have no arenas). MATRIX_DIAG, MATRIX_SET_DIAG and REVERSE_SEQUENCE are judged
# on both engines by tests/test_layout.py.
GROUPS = {
    "stablehlo": [
        *(f"STABLEHLO_ADD-{f}" for f in ("f32-nan-signed-zero", "f32-scalar", "i8-r1-wrap", "bool-r1", "f64-r1")),
        *(f"STABLEHLO_MULTIPLY-{f}" for f in ("f32-nan-signed-zero", "i32-r3-wrap", "bool-r1", "i64-r1")),
        *(f"STABLEHLO_MAXIMUM-{f}" for f in ("f32-nan-signed-zero", "i32-r3-wrap", "bool-r1", "u8-r2")),
        *(f"STABLEHLO_MINIMUM-{f}" for f in ("f32-nan-signed-zero", "i16-r2", "bool-r1", "f64-r1")),
        *(f"STABLEHLO_AND-{f}" for f in ("i32-r2", "u8-r1", "bool-r3")),
        *(f"STABLEHLO_SHIFT_LEFT-{f}" for f in ("i32-r1", "i8-past-width", "i16-r2")),
        *(f"STABLEHLO_PAD-{f}" for f in ("f32-r2-interior", "f32-r3-crop", "i32-r2-crop-interior", "i8-r1", "bool-r2", "f32-empty")),
    ],
    "nn": ["TRANSPOSE_CONV-f32-same-s2", "TRANSPOSE_CONV-f32-valid-no-bias", "TRANSPOSE_CONV-f32-relu",
           "L2_POOL_2D-f32-same-2x2", "L2_POOL_2D-f32-valid-3x2-relu6",
           "LOCAL_RESPONSE_NORMALIZATION-f32", "LOCAL_RESPONSE_NORMALIZATION-f32-r1"],
    "rnn": ["RNN-f32-tanh", "UNIDIRECTIONAL_SEQUENCE_RNN-f32-time-major", "UNIDIRECTIONAL_SEQUENCE_RNN-f32-batch-major-relu"],
}


def merged(models: list[bytes]) -> bytes:
    """One model whose subgraph 0 holds the subgraph 0 of each one-op model side by side (their
    inputs and outputs in order)."""
    out = Model(subgraphs=[Subgraph()])
    graph = out.subgraphs[0]
    codes: dict[tuple, int] = {}
    for data in models:
        m = read_model(data)
        (sub,) = m.subgraphs
        base_tensor, base_buffer = len(graph.tensors), len(out.buffers) - 1
        out.buffers.extend(m.buffers[1:])
        for t in sub.tensors:
            t.buffer = t.buffer and t.buffer + base_buffer  # buffer 0: no data
            graph.tensors.append(t)
        shift = lambda indices: [i + base_tensor if i >= 0 else i for i in indices]  # noqa: E731
        for op in sub.operators:
            code = m.operator_codes[op.opcode_index]
            op.opcode_index = codes.setdefault((code.builtin, code.custom_code, code.version), len(codes))
            if op.opcode_index == len(out.operator_codes):
                out.operator_codes.append(code)
            op.inputs, op.outputs, op.intermediates = shift(op.inputs), shift(op.outputs), shift(op.intermediates)
            graph.operators.append(op)
        graph.inputs += shift(sub.inputs)
        graph.outputs += shift(sub.outputs)
    return write_model(out)


_BUILT: dict[str, tuple[bytes, list[np.ndarray], list[str]]] = {}


def built(group: str) -> tuple[bytes, list[np.ndarray], list[str]]:
    """The group's merged model, its feeds, and the case id of each output (cached)."""
    if group not in _BUILT:
        models, feeds, owners = [], [], []
        for cid in GROUPS[group]:
            model, inputs = BY_ID[cid].build()
            models.append(model)
            feeds += inputs
            owners += [cid] * len(read_model(model).subgraphs[0].outputs)
        _BUILT[group] = (merged(models), feeds, owners)
    return _BUILT[group]


def _run(interpreter, feeds: list[np.ndarray], invokes: int = 2) -> list[list[np.ndarray]]:
    """Two invokes (the RNN states carry over), each run's outputs copied."""
    interpreter.allocate_tensors()
    runs = []
    for _ in range(invokes):
        for d, value in zip(interpreter.get_input_details(), feeds):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        runs.append([np.array(interpreter.get_tensor(d["index"])) for d in interpreter.get_output_details()])
    return runs


@pytest.mark.parametrize("jit", [False, True], ids=["numpy", "jit"])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_group_matches_litert(group, jit, jit_cache_dir, monkeypatch):
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)
    model, feeds, owners = built(group)
    expected = _run(litert_interpreter(model, builtin_only=True), feeds)
    interpreter = numlite.Interpreter(model_content=model, jit=jit)
    actual = _run(interpreter, feeds)
    if jit:
        report = interpreter.jit_report()["subgraphs"][0]
        assert report["compiled"], report.get("reason")
    for run, (a_run, e_run) in enumerate(zip(actual, expected)):
        assert len(a_run) == len(e_run) == len(owners)
        for a, e, cid in zip(a_run, e_run, owners):
            case = BY_ID[cid]
            assert_close(a, e, case.rtol, case.atol, what=f"{cid}, invoke {run}: ")
