"""The builtin operator sweep (benchmarks/builtin_ops.py) as tests: every form of every
BuiltinOperator in benchmarks/builtin_op_cases.py (and builtin_op_cases_stablehlo.py where it
exists), a one-op model run by LiteRT and by numlite. Where LiteRT runs a form, numlite must run
it and match LiteRT's builtin kernels (or its XNNPACK delegate's, where they differ): float32
within the case's tolerance, integers and bools exactly. A form LiteRT refuses has nothing to
match (the sweep records LiteRT's error, never counting it): numlite must run it or refuse it
with its own error, never crash; a form numlite is known not to
match yet is a strict xfail naming the gap, so that closing it fails the test until it is removed
from KNOWN_GAPS.

LiteRT runs all the forms once per session, in a child process (some forms abort LiteRT).

The sweep runs on the NumPy engine only (``builtin_ops.run_numlite`` passes ``jit=False``; this
file is not in conftest's ENGINE_FILES): a compile per one-op form would cost minutes of CI.
tests/test_jit_sweep.py judges the compiled engine on every form it covers, several forms merged
into one model per compile, against the same LiteRT outputs.
"""

from __future__ import annotations

import os
import sys

import pytest

from numlite.errors import NumliteError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import builtin_ops  # noqa: E402

CASES, NOT_RUNNABLE = builtin_ops.load_cases()
BY_ID = {builtin_ops.case_id(c): c for c in CASES}


def _gaps(reason: str, *ids: str) -> dict[str, str]:
    return dict.fromkeys(ids, reason)


# case id -> why numlite does not match LiteRT there yet (measured by the sweep; see
# docs/builtin-op-coverage.md). Each is a strict xfail: closing a gap fails until it is removed.
KNOWN_GAPS: dict[str, str] = {
    **_gaps("LiteRT's defect: its int16 NOT_EQUAL answers False everywhere; numlite computes x != y",
            "NOT_EQUAL-i16q"),
}


@pytest.fixture(scope="session")
def litert_outcomes():
    return builtin_ops.litert_outcomes(CASES)


def _param(cid: str):
    if cid in KNOWN_GAPS:
        return pytest.param(cid, id=cid, marks=pytest.mark.xfail(reason=KNOWN_GAPS[cid], strict=True))
    return pytest.param(cid, id=cid)


def test_case_ids_are_unique():
    assert len(BY_ID) == len(CASES)


def test_every_builtin_operator_has_a_case_or_a_reason():
    covered = {c.op for c in CASES} | set(NOT_RUNNABLE)
    missing = [op for op in builtin_ops.builtin_ops() if op not in covered]
    assert not missing, f"BuiltinOperators without a case or a NOT_RUNNABLE reason: {missing}"


def test_known_gaps_name_existing_cases():
    assert not set(KNOWN_GAPS) - set(BY_ID)


@pytest.mark.parametrize("cid", [_param(cid) for cid in BY_ID])
def test_numlite_matches_litert(cid, litert_outcomes):
    case = BY_ID[cid]
    status, runs = litert_outcomes[cid]
    if runs is None:
        # LiteRT refuses this form (the docs table records why), so there is nothing to match:
        # numlite must still not crash on it, running it or refusing it with its own error.
        model, inputs = case.build()
        try:
            builtin_ops.run_numlite(model, inputs)
        except NumliteError:
            pass
        return
    result, _, _ = builtin_ops.sweep(case, (status, runs))
    assert result.numlite == builtin_ops.OK, f"{cid}: {result.numlite}"


def test_complex64_through_set_tensor_and_get_tensor():
    """complex64 fed with set_tensor, multiplied, transposed and sliced, read with get_tensor:
    numlite's values equal LiteRT's; a complex128 value is refused, as LiteRT refuses it."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
    from one_op_model import Graph, model, out, x

    import numlite

    a = (np.arange(6, dtype=np.float32).reshape(2, 3) - 1j * np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    b = (np.float32(0.5) + 2j * np.arange(3, dtype=np.float32)).astype(np.complex64)
    g = Graph()
    ia, ib = g.add(x(a.astype(np.complex64))), g.add(x(b))
    prod, perm, moved = g.add(out(np.complex64)), g.add(x(np.array([1, 0], np.int32))), g.add(out(np.complex64))
    g.op("MUL", [ia, ib], [prod], {"fused_activation_function": 0})
    g.op("TRANSPOSE", [prod, perm], [moved])
    g.output(prod, moved)
    content, feeds = model(g)
    results = []
    for cls in (LiteRTInterpreter, numlite.Interpreter):
        it = cls(model_content=content)
        it.allocate_tensors()
        for d, value in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], value)
        it.invoke()
        results.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
        assert [d["dtype"] for d in it.get_output_details()] == [np.complex64, np.complex64]
        with pytest.raises(ValueError):
            it.set_tensor(it.get_input_details()[0]["index"], a.astype(np.complex128))
    for expected, actual in zip(*results):
        assert actual.dtype == np.complex64 and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
