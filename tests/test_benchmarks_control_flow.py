"""benchmarks/control_flow.py: its models convert to the control-flow ops they are meant to
exercise, and its main prints one table row per case (nothing here depends on timings)."""

import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from numlite.model import read_model

SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "control_flow.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("benchmarks_control_flow", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cf-bench-cache"))  # fresh: main converts every model


def _ops_per_subgraph(data: bytes) -> list[set[str]]:
    model = read_model(data)
    ops: list[set[str]] = [set() for _ in model.subgraphs]
    for s, _, op in model.iter_operators():
        ops[s].add(model.op_name(op))
    return ops


def test_models_contain_their_control_flow(bench, cache_dir):
    expected = {  # main subgraph's control-flow op, and how many WHILE / IF the model has in all
        "cf_trivial_loop": ("WHILE", 1, 0),
        "cf_matrix_loop": ("WHILE", 1, 0),
        "cf_nested": ("WHILE", 2, 1),
        "cf_cond": ("IF", 0, 1),
        **{name: ("WHILE", 1, 0) for name in ("cf_map_fn", "cf_scan", "cf_tensor_array", "cf_grow")},
    }
    assert set(bench.MODELS) == set(expected)
    assert set(bench.KERAS_MODELS) == {"cf_keras_lstm", "cf_keras_gru"}  # (not converted here: Keras costs seconds)
    for name, (main_op, n_while, n_if) in expected.items():
        with open(bench.model_path(name, cache_dir), "rb") as f:
            ops = _ops_per_subgraph(f.read())
        assert main_op in ops[0], (name, ops)
        assert sum("WHILE" in s for s in ops) == n_while, (name, ops)
        assert sum("IF" in s for s in ops) == n_if, (name, ops)
    # The nested model's IF and inner WHILE sit in a loop body, not in the main subgraph.
    with open(bench.model_path("cf_nested", cache_dir), "rb") as f:
        ops = _ops_per_subgraph(f.read())
    assert any({"IF", "WHILE"} <= s for s in ops[1:]), ops


def test_orthogonal_matrix_is_orthogonal(bench):
    q = bench.orthogonal_matrix().astype(np.float64)
    np.testing.assert_allclose(q @ q.T, np.eye(q.shape[0]), atol=1e-5)


def test_main_prints_a_row_per_case(bench, cache_dir, tmp_path, capsys):
    out_json = tmp_path / "cf.json"
    cases = ["trivial_loop", "matrix_loop", "nested", "cond_then", "cond_else", "grow"]  # (the other loops: as grow, slower)
    assert set(cases) <= set(bench.CASES)
    code = bench.main(
        ["--runs", "1", "--warmup", "1", "--iterations", "20", "--cache-dir", cache_dir, "--json", str(out_json), "--cases", ",".join(cases)]
    )
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| case |"))
    rows = [line for line in lines[header + 2 :] if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == cases
    n_columns = len(bench.COLUMNS)
    for r in rows:
        cells = [c.strip() for c in r.strip().strip("|").split(" | ")]
        assert len(cells) == n_columns, r
        assert cells[-1] == "", r  # no note: converted, numlite ran, LiteRT memory measured

    results = json.loads(out_json.read_text())["results"]
    assert [r["case"] for r in results] == cases
    by_case = {r["case"]: r for r in results}
    assert by_case["trivial_loop"]["iterations"] == 20
    assert by_case["nested"]["iterations"] == 20 and by_case["nested"]["iteration_label"] == "2x10"
    assert "iterations" not in by_case["cond_then"]
    for r in results:
        assert isinstance(r["max_abs_diff"], float) and r["max_abs_diff"] <= 1e-4, r
        assert set(r["control_flow_counters"]) == {"bytes_copied", "arrays_allocated"}
        assert r["numlite_arena_bytes"] >= 0 and r["litert_rss_growth_bytes"] >= 0
