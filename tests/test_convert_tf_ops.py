"""Every TF op the official converter lowers to TFLite builtins, numlite's converter lowers too.

The cases are the sweep's (``benchmarks/tf_op_cases.py``; ``benchmarks/tf_ops.py`` prints them
as a table). Each case is one TF op on function arguments, converted at test time by
``tf.lite.TFLiteConverter`` limited to TFLITE_BUILTINS and by numlite. Where the official
converter converts it, numlite must convert it too, and both files must give TensorFlow's
results in LiteRT and in numlite's interpreter; numlite's file must not have more operators
than the official one unless the case says why. Where the official converter does not convert
it, numlite's file (if numlite converts it) must give TensorFlow's results, and a refusal must
be a ConversionError. A case whose official file is known not to give TensorFlow's results
says so (``official_defect``), and that must still be true.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))

import tf_ops  # noqa: E402
from tf_op_cases import CASES, Case  # noqa: E402


def _failures(conversion: tf_ops.Conversion) -> list[str]:
    return [f"{runtime}: {outcome}" for runtime, outcome in conversion.runs.items() if outcome != tf_ops.OK]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_tf_op(case: Case) -> None:
    result = tf_ops.sweep(case)
    official, mine = result.official, result.numlite
    assert not mine.error.startswith("crashed"), f"numlite's converter {mine.error}"
    if official.converted:
        assert mine.converted, f"the official converter emits {official.ops}; numlite: {mine.error}"
        if case.official_defect:
            assert _failures(official), f"the official file now gives TF's results: drop {case.official_defect!r}"
        else:
            assert not _failures(official), f"official file: {_failures(official)}"
        if case.more_ops:  # the reason must still apply
            assert len(mine.ops) > len(official.ops), f"numlite no longer needs more ops: drop {case.more_ops!r}"
        else:
            assert len(mine.ops) <= len(official.ops), f"numlite emits {mine.ops}, the official converter {official.ops}"
    assert len(mine.runs) == (2 if mine.converted else 0)
    assert not _failures(mine), f"numlite's file: {_failures(mine)}"


def test_cases_are_distinct_and_cover_numlites_rules() -> None:
    """One id per case, and a case for every TF op numlite has a rule for (but its own)."""
    from numlite.converter.lower import RULES

    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    swept = {c.op for c in CASES}
    assert sorted(set(RULES) - swept - {"_NumliteFusedOp"}) == []
