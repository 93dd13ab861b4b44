"""The default engine mode, ``jit="auto"`` (``NUMLITE_JIT`` unset): a cold model never imports
Numba; a hot one is compiled in a child process and taken over mid-run, its state (a resource
variable), outputs and inputs intact, against LiteRT; the child process never outlives its use
(the interpreter re-allocated for other shapes, collected, the process exiting or killed); a
child that fails leaves the model on NumPy, with the reason in ``jit_report()``.

The hot threshold (``AUTO_HOT_SECONDS``) is set to 0 so that the third invoke of a tiny model
starts the compile. Each test that needs a compile that is still running uses a cache folder of
its own (a compile found in the cache would be loaded at once)."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, litert_interpreter

import numlite
from numlite.jit import compile_child, engine

pytest.importorskip("numba")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from one_op_model import Graph, k, model, out, x  # noqa: E402
from test_jit_quantized import mismatched_variable_model  # noqa: E402


def accumulator() -> bytes:
    """``acc += x`` on a [2] float32 resource variable (initialised by a CALL_ONCE subgraph),
    ``acc`` the output: each output depends on every invoke before."""
    return mismatched_variable_model((2,))


F32 = np.float32
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(numlite.__file__)))


def adder() -> bytes:
    """``x + 1.5`` on a resizable input."""
    main = Graph()
    y = main.add(out(F32), "y")
    main.op("ADD", [main.add(x(np.ones(2, F32)), "x"), main.add(k(np.array([1.5], F32)))], [y], {"fused_activation_function": 0})
    main.output(y)
    return model(main)[0]


@pytest.fixture
def hot(monkeypatch, tmp_path):
    """The default mode, hot after AUTO_MIN_INVOKES invokes, and a cache folder of this test's own."""
    monkeypatch.delenv("NUMLITE_JIT", raising=False)
    monkeypatch.setenv("NUMLITE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(engine, "AUTO_HOT_SECONDS", 0.0)
    return tmp_path


def invoke(interpreter, value: np.ndarray) -> np.ndarray:
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], value)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def child_of(interpreter, timeout: float = 60.0):
    """The running child compile of the main subgraph (it starts once the thread has written
    the module, which imports Numba first)."""
    manager = interpreter._jit
    deadline = time.monotonic() + timeout
    while 0 not in manager.children:
        assert 0 in manager.pending and time.monotonic() < deadline, manager.report()
        manager.pending[0].join(0.05)
    return manager.children[0]


def gone(pid: int, zombie: bool = False) -> bool:
    """Whether the process ``pid`` has ended and was reaped (``zombie``: or ended, waiting for
    its parent, as an orphan may wait for a container's init that reaps nobody)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return zombie and f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_hot_model_switches_to_compiled_code_mid_run(hot):
    data = accumulator()
    interpreter = numlite.Interpreter(model_content=data)  # the default: "auto"
    lite = litert_interpreter(data, builtin_only=True)  # XNNPACK does not take the int32 handle
    interpreter.allocate_tensors()
    lite.allocate_tensors()
    assert interpreter.jit_report()["mode"] == "auto"
    rng = np.random.default_rng(3)
    # arrays of tensor() held across invokes, and so across the switch (numlite's NumPy engine
    # keeps them valid until a re-allocation; the switch must not leave them stale)
    held_in = interpreter.tensor(interpreter.get_input_details()[0]["index"])()
    held_out = interpreter.tensor(interpreter.get_output_details()[0]["index"])()
    for step in range(10):
        value = rng.standard_normal(2).astype(F32)
        expected = invoke(lite, value)
        if step % 2:
            assert_close(invoke(interpreter, value), expected, what=f"invoke {step}: ")
        else:
            held_in[...] = value
            interpreter.invoke()
        assert_close(held_out, expected, what=f"invoke {step}, the held output: ")
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected, what=f"invoke {step}: ")
        # the input set before the switch is still the model's input after it
        np.testing.assert_array_equal(interpreter.get_tensor(interpreter.get_input_details()[0]["index"]), value)
        if step == engine.AUTO_MIN_INVOKES - 1:
            assert 0 in interpreter._jit.pending  # the third invoke made it hot
            interpreter._jit.wait(120)
            report = interpreter.jit_report()["subgraphs"][0]
            assert report["compiled"] and report["compiled_in_child"] and report["cache_hit"], report
            assert not interpreter._jit.children
            # another process (a batch worker) hot on this model starts no child of its own:
            # under the module's lock it finds the compiled code in the cache, and loads it
            built = interpreter._jit.engines[0]
            assert compile_child.compile_once(Path(report["module"]), built.arenas.dtypes) is None
    # the invokes after the wait ran the compiled code, on the variable the NumPy invokes left
    assert interpreter._jit.fast(interpreter.subgraph(0)) is not None


def test_a_reallocated_or_collected_interpreter_kills_its_child(hot):
    data = adder()
    interpreter = numlite.Interpreter(model_content=data)
    interpreter.allocate_tensors()
    for _ in range(engine.AUTO_MIN_INVOKES):
        invoke(interpreter, np.ones(2, F32))
    child = child_of(interpreter)
    pids = child.pids
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [3])
    interpreter.allocate_tensors()  # other shapes: the compile for [2] is of no use
    assert pids and child.killed and all(gone(pid) for pid in pids)
    interpreter._jit.wait(30)
    assert not interpreter._jit.pending and not interpreter.jit_report()["subgraphs"], interpreter.jit_report()
    lite = litert_interpreter(data)
    lite.resize_tensor_input(lite.get_input_details()[0]["index"], [3])
    lite.allocate_tensors()
    value = np.array([1.0, -2.0, 3.5], F32)
    assert_close(invoke(interpreter, value), invoke(lite, value))
    for _ in range(engine.AUTO_MIN_INVOKES):  # hot again, for the new shape
        invoke(interpreter, value)
    child = child_of(interpreter)
    pids = child.pids
    del interpreter
    gc.collect()
    assert pids and child.killed and all(gone(pid) for pid in pids)


@pytest.mark.skipif(shutil.which("false") is None, reason="needs a program that exits with status 1")
def test_a_failing_child_compile_leaves_the_model_on_numpy(hot, monkeypatch):
    monkeypatch.setattr(sys, "executable", shutil.which("false"))  # the child exits with status 1
    data = adder()
    interpreter = numlite.Interpreter(model_content=data)
    lite = litert_interpreter(data)
    interpreter.allocate_tensors()
    lite.allocate_tensors()
    value = np.array([0.25, -4.0], F32)
    for _ in range(engine.AUTO_MIN_INVOKES):
        invoke(interpreter, value)
    interpreter._jit.wait(60)
    report = interpreter.jit_report()["subgraphs"][0]
    assert not report["compiled"] and report["reason"] == "runs on NumPy: compiling failed in a child process (exit status 1)"
    assert_close(invoke(interpreter, value), invoke(lite, value))  # on NumPy, no exception
    assert 0 not in interpreter._jit.pending  # and no second try


SCRIPT = """
import os, signal, sys
import numpy as np
import numlite
from numlite.jit import engine
engine.AUTO_HOT_SECONDS = 0.0
interpreter = numlite.Interpreter(model_path=sys.argv[1])
interpreter.allocate_tensors()
def invoke():
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], np.ones(2, np.float32))
    interpreter.invoke()
for _ in range(engine.AUTO_MIN_INVOKES - 1):
    invoke()
print("numba" in sys.modules, interpreter.jit_report()["mode"], flush=True)
if sys.argv[2] != "cold":
    invoke()  # hot: the compile starts
    manager = interpreter._jit
    while 0 not in manager.children:
        manager.pending[0].join(0.05)
    print(*manager.children[0].pids, flush=True)
    if sys.argv[2] == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
"""


def run_script(tmp_path, how: str) -> tuple[subprocess.CompletedProcess, float]:
    path = tmp_path / "adder.tflite"
    path.write_bytes(adder())
    env = {k: v for k, v in os.environ.items() if k != "NUMLITE_JIT"}
    env.update(PYTHONPATH=ROOT, NUMLITE_CACHE_DIR=str(tmp_path / f"cache-{how}"))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path), how],
                          capture_output=True, text=True, env=env, timeout=120)
    return done, time.monotonic() - started


def test_a_cold_model_never_imports_numba(tmp_path):
    done, _ = run_script(tmp_path, "cold")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.split() == ["False", "auto"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["exits", "killed"])
def test_no_child_outlives_its_process(tmp_path, how):
    """A process that exits while its child compiles kills it at exit, without a word or a
    wait; one that is killed leaves a child that sees its stdin close, and exits too."""
    done, _ = run_script(tmp_path, how)
    lines = done.stdout.split("\n")
    assert lines[0] == "False auto", done.stdout + done.stderr  # cold until the third invoke
    pids = [int(pid) for pid in lines[1].split()]
    assert pids
    if how == "exits":
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert all(gone(pid) for pid in pids)
    else:
        assert done.returncode == -9
        deadline = time.monotonic() + 30  # a child notices once it runs its own code (imports first)
        for pid in pids:
            while not gone(pid, zombie=True):
                assert time.monotonic() < deadline, f"the child {pid} of a killed process still runs"
                time.sleep(0.1)
