import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow is the reference, so its graph must compute what its ops define. With oneDNN's graph
# rewrites on, TF 2.21 on an AVX-512 AMD EPYC (family 26) computes the layer-normalised LSTM cell
# of test_convert_lstm_contracts.py wrong inside a tf.function (0.16 off a float64 evaluation of the
# same math; eager TF, and the same tf.function with the rewrites off, agree with it to 1e-7). The
# plain (Eigen) kernels are TensorFlow's own; they are read before TensorFlow is first imported.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(__file__))

# -- every kernel test on both engines (issue 24) ---------------------------------------------------
#
# The test files in ENGINE_FILES run each test twice: on the NumPy engine ("numpy") and on the
# compiled engine ("jit"). The jit run sets NUMLITE_JIT=1, so every numlite.Interpreter(...) the test
# makes without an explicit jit= compiles at allocate_tensors(); the test compares its outputs with
# LiteRT or TensorFlow exactly as on NumPy (the reference is never numlite). After a jit run, every
# interpreter it made is checked: a model the report calls compiled ran its invokes in compiled code;
# one that stayed on NumPy did so for a NotCompiled reason (an op, dtype or form not covered), never
# because compiling raised. What ran where is recorded (user_properties, so it crosses pytest-xdist)
# and summed per file at the end of the session, with the ops and forms that fell back.

import collections  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

#
# Not test_builtin_ops.py (the builtin sweep): its cases run numlite with jit=False, and compiling each
# of its one-op forms would cost a Numba compile apiece (about 500, minutes of CI). Its NumPy side runs
# once; tests/test_jit_sweep.py judges the compiled engine on every sweep form it covers, merged into
# models of a few nodes (one compile each), against the same LiteRT outputs.
ENGINE_FILES = {
    "test_activations.py", "test_binary.py", "test_control_flow.py", "test_dense.py",
    "test_indexing.py", "test_layout.py", "test_logical.py", "test_reduce.py", "test_selection.py",
    "test_shape.py", "test_sweep_kernels.py", "test_unary.py",
}  # fmt: skip
# NUMLITE_TEST_JIT: "off" runs the NumPy engine only. Every jit case compiles its model; models of one
# structure generate the same source (their sizes are run-time values: numlite/jit/codegen.py, lift), so
# a case whose form was compiled before, by either xdist worker, loads it from the session's cache.
JIT_TESTS = os.environ.get("NUMLITE_TEST_JIT", "on")

JIT_PROPERTY = "numlite_jit"  # the user_properties entry of a jit run: a list of (state, reason) per interpreter


def pytest_generate_tests(metafunc):
    if "engine" in metafunc.fixturenames and os.path.basename(str(metafunc.definition.path)) in ENGINE_FILES:
        metafunc.parametrize("engine", ["numpy", "jit"] if JIT_TESTS != "off" else ["numpy"], indirect=True)


@pytest.fixture(scope="session")
def jit_cache_dir(tmp_path_factory):
    """One cache of compiled modules for the session, shared by the xdist workers (the modules are
    keyed by their source and written atomically): one-op models of one structure compile once."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / "numlite-jit-cache"
    folder.mkdir(exist_ok=True)
    return str(folder)


@pytest.fixture(scope="session", autouse=True)
def session_jit_cache(jit_cache_dir):
    """Every test's compiled modules go to the session's cache, never the user's: a test that
    compiles without choosing a folder (jit=True, or "auto" once a model is hot) must not find
    modules an earlier run left in ~/.cache, nor leave its own there (the suite's time is a clean
    machine's). A test that sets NUMLITE_CACHE_DIR itself overrides this one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)
        yield jit_cache_dir


@pytest.fixture(autouse=True)
def engine(request):
    """"numpy" (every test outside ENGINE_FILES), or "jit": see the comment above."""
    name = getattr(request, "param", "numpy")
    if name != "jit":
        if hasattr(request, "param"):  # the numpy side of ENGINE_FILES: the NumPy engine, never "auto"'s switch
            request.getfixturevalue("monkeypatch").setenv("NUMLITE_JIT", "0")
        yield name  # (other tests run with the default, "auto", as users do)
        return
    from numlite import jit

    if not jit.available():
        pytest.skip(f"the compiled engine needs Numba: {jit.status()}")
    from numlite.jit import engine as jit_engine

    made, runs = [], collections.Counter()

    def record(event, manager, root):
        if event == "made":
            made.append(manager)
        elif event in ("ran on numpy", "ran compiled"):
            runs[event, id(manager), root] += 1

    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(jit_engine, "OBSERVERS", [record])
    monkeypatch.setenv("NUMLITE_JIT", "1")
    monkeypatch.setenv("NUMLITE_CACHE_DIR", request.getfixturevalue("jit_cache_dir"))
    yield name
    outcomes = []
    for manager in made:
        if manager.mode is not True:
            continue  # an explicit jit="auto" of the test itself
        roots = manager.report()["subgraphs"]
        if not roots:
            outcomes.append(("not allocated", ""))  # allocate_tensors failed before the engine saw it
            continue
        for root, entry in roots.items():
            reason = entry.get("reason", "")
            if entry["compiled"]:
                assert not runs["ran on numpy", id(manager), root], f"subgraph {root} is reported compiled but ran on NumPy"
                ran = runs["ran compiled", id(manager), root]
                outcomes.append(("compiled" if ran else "compiled, not invoked", ""))
            else:
                assert reason.startswith("runs on NumPy: ") and "compiling failed" not in reason, \
                    f"the compiled engine failed on subgraph {root} instead of a NotCompiled fallback: {reason!r}"
                outcomes.append(("numpy", reason))
    request.node.user_properties.append((JIT_PROPERTY, outcomes))


_JIT_RUNS: list[tuple[str, list]] = []  # (file, [(state, reason) per interpreter]) of every jit run


def pytest_runtest_logreport(report):
    if report.when != "teardown":  # the engine fixture records at its teardown
        return
    for key, value in report.user_properties:
        if key == JIT_PROPERTY:
            _JIT_RUNS.append((report.nodeid.split("::")[0].rsplit("/", 1)[-1], value))


def _fallback_form(reason: str) -> str:
    """A fallback reason without its subgraph and node numbers, to count equal forms together."""
    reason = re.sub(r"subgraph \d+, node \d+ ", "", reason.removeprefix("runs on NumPy: "))
    return re.sub(r"(subgraph \d+[:,] )?tensor \d+", "a tensor", reason)


def pytest_terminal_summary(terminalreporter):
    if not _JIT_RUNS:
        return
    write = terminalreporter.write_line
    write("")
    write(f"jit engine (NUMLITE_TEST_JIT={JIT_TESTS}): test cases per file (compiled: every interpreter of the case ran "
          "compiled; numpy: at least one stayed on NumPy, for the reasons below; none: the case made no interpreter, or "
          "none allocated)")
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    forms: collections.Counter = collections.Counter()
    for file, outcomes in _JIT_RUNS:
        states = {s for s, _ in outcomes}
        state = "numpy" if "numpy" in states else "compiled" if "compiled" in states else "none"
        files[file][state] += 1
        forms.update(_fallback_form(r) for s, r in outcomes if s == "numpy")
    total = sum((c for c in files.values()), collections.Counter())
    for file, counts in [*sorted(files.items()), ("total", total)]:
        write(f"  {file:32} " + " ".join(f"{counts[k]:5} {k}" for k in ("compiled", "numpy", "none")))
    if forms:
        write("jit engine: forms that stay on NumPy (interpreters)")
        for form, count in sorted(forms.items(), key=lambda kv: (-kv[1], kv[0])):
            write(f"  {count:5}  {form}")
