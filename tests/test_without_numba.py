"""numlite where Numba has no wheels (Pyodide, unusual platforms: pyproject's environment
markers leave it out there): the interpreter's core test files run in a child pytest in which
``import numba`` fails, with the compiled engine asked for (``NUMLITE_JIT=1``), so that every
interpreter has to notice and run on the NumPy engine."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = ["tests/test_interpreter.py", "tests/test_control_flow.py"]

# sitecustomize runs at the start of every Python process with it on the path: the child pytest
# and the processes its tests start.
SITECUSTOMIZE = '''
import sys

sys.modules["numba"] = None  # "import numba" raises ImportError
'''

CHECK = '''
import sys

import pytest


@pytest.fixture(autouse=True)
def _numba_stays_missing():
    yield
    import numlite.jit

    assert not numlite.jit.available() and sys.modules["numba"] is None
'''


def test_the_core_suite_passes_without_numba(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "numba_check.py").write_text(CHECK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT]), "NUMLITE_JIT": "1",
           "NUMLITE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-p", "numba_check", "-p", "no:xdist", *CORE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert not (tmp_path / "cache").exists()  # nothing was compiled or written to the jit cache
