"""The builtin operator sweep (benchmarks/builtin_ops.py) as tests: every form of every
BuiltinOperator in benchmarks/builtin_op_cases.py (and builtin_op_cases_stablehlo.py where it
exists), a one-op model run by LiteRT and by numlite. Where LiteRT runs a form, numlite must run
it and match LiteRT's builtin kernels (or its XNNPACK delegate's, where they differ): float32
within the case's tolerance, integers and bools exactly. A form LiteRT refuses is skipped with
LiteRT's error (recorded by the sweep, never counted as passing); a form numlite is known not to
match yet is a strict xfail naming the gap, so that closing it fails the test until it is removed
from KNOWN_GAPS.

LiteRT runs all the forms once per session, in a child process (some forms abort LiteRT).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import builtin_ops  # noqa: E402

CASES, NOT_RUNNABLE = builtin_ops.load_cases()
BY_ID = {builtin_ops.case_id(c): c for c in CASES}

# case id -> why numlite does not match LiteRT there yet
KNOWN_GAPS: dict[str, str] = {}


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
    missing = [op for op in builtin_ops.builtin_ops() if op not in covered and not op.startswith("STABLEHLO_")]
    assert not missing, f"BuiltinOperators without a case or a NOT_RUNNABLE reason: {missing}"


def test_known_gaps_name_existing_cases():
    assert not set(KNOWN_GAPS) - set(BY_ID)


@pytest.mark.parametrize("cid", [_param(cid) for cid in BY_ID])
def test_numlite_matches_litert(cid, litert_outcomes):
    case = BY_ID[cid]
    status, runs = litert_outcomes[cid]
    if runs is None:
        pytest.skip(f"LiteRT refuses {cid}: {status}")
    result, _, _ = builtin_ops.sweep(case, (status, runs))
    assert result.numlite == builtin_ops.OK, f"{cid}: {result.numlite}"
