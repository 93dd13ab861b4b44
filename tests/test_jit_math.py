"""The compiled engine's float math against LiteRT: division by zero (inf and NaN, never an
exception from compiled code) and the vectorizable exp-based TANH and LOGISTIC
(numlite/jit/kernels/transcendental.py) over their whole range, NaN and infinities included."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter, run_interpreter

import numlite

pytest.importorskip("numba")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from one_op_model import one_op, out, x  # noqa: E402

# Every float32 step of [-30, 30] would be slow to compare; 20001 points cover the curve, the
# switch between the series and the exp form of tanh (|x| = 0.25), the saturation, and the
# extremes where exp overflows or underflows.
SPECIAL = np.float32([0.0, -0.0, 0.25, -0.25, 0.2499999, 1e-30, -1e-30, 1e-6, 40.0, -40.0, 88.7, 88.73, -87.3, -87.4,
                      -104.0, 200.0, -200.0, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan])
VALUES = np.concatenate([np.linspace(-30, 30, 20001, dtype=np.float32), SPECIAL])


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NUMLITE_CACHE_DIR", str(tmp_path_factory.mktemp("jit-cache")))
        yield


def _compiled(model: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interpreter = numlite.Interpreter(model_content=model, jit=True)
    interpreter.allocate_tensors()
    assert interpreter.jit_report()["subgraphs"][0]["compiled"], interpreter.jit_report()
    return run_interpreter(interpreter, inputs)


@pytest.mark.parametrize("op", ["TANH", "LOGISTIC"])
def test_tanh_and_logistic_match_litert_everywhere(op):
    model = one_op(op, [x(VALUES)], [out(np.float32, shape=VALUES.shape)], None)[0]
    want = run_interpreter(litert_interpreter(model), [VALUES])[0]
    got = _compiled(model, [VALUES])[0]
    assert_close(got, want, what=op)  # NaN where LiteRT has NaN, the limits at +-inf
    assert np.array_equal(np.isnan(got), np.isnan(VALUES)) and np.isnan(want[-1])


def test_division_by_zero_gives_what_litert_gives():
    """Numba's default error model raises ZeroDivisionError in compiled code; the generated
    functions use NumPy's, so 1/0, -1/0 and 0/0 give inf, -inf and NaN as in LiteRT."""
    a, b = np.float32([1, -1, 0, 4, 3]), np.float32([0, 0, 0, 2, -0.0])
    model = one_op("DIV", [x(a), x(b)], [out(np.float32, shape=(5,))], {"fused_activation_function": 0})[0]
    want = run_interpreter(litert_interpreter(model), [a, b])[0]
    got = _compiled(model, [a, b])[0]
    np.testing.assert_array_equal(got, want)
    assert np.isinf(got[0]) and np.isnan(got[2])
