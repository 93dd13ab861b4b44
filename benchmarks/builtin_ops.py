"""Which LiteRT builtin operators numlite's interpreter runs, form by form, against LiteRT's.

    python benchmarks/builtin_ops.py [--ops ADD,CONV_2D] [--json out.json] [--markdown docs/builtin-op-coverage.md]

Every case of ``builtin_op_cases.py`` (and ``builtin_op_cases_stablehlo.py`` where it exists) is
a one-op model written with numlite's writer: one BuiltinOperator in one form (dtype,
quantization, rank, options, broadcasting). Each model runs in LiteRT
(``ai_edge_litert.interpreter.Interpreter(model_content=...)``, the builtin resolver with its
default XNNPACK delegate; where that refuses it, once more with
``BUILTIN_WITHOUT_DEFAULT_DELEGATES``) and in numlite, and numlite's outputs are compared with
LiteRT's (float32 within the case's tolerance, integers and bools exactly, random ops by the
case's check). A form counts for LiteRT when LiteRT allocates and invokes it; for numlite when
numlite then runs it and matches. A form LiteRT refuses is recorded with LiteRT's error, never
counted. The script prints a Markdown table, op | LiteRT runs | numlite runs | forms tested, with
the counts at the top.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
for path in (os.path.dirname(HERE), HERE):  # this checkout's numlite, and the case files
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter  # noqa: E402
from ai_edge_litert.interpreter import OpResolverType  # noqa: E402

import numlite  # noqa: E402
from builtin_op_case import OpCase  # noqa: E402
from numlite.model import schema  # noqa: E402

OK = "ok"


def load_cases() -> tuple[list[OpCase], dict[str, str]]:
    """Every case and every op recorded as not runnable, from both case files."""
    import builtin_op_cases

    cases, not_runnable = list(builtin_op_cases.CASES), dict(builtin_op_cases.NOT_RUNNABLE)
    try:
        import builtin_op_cases_stablehlo as stablehlo
    except ImportError:  # the stablehlo cases are written on another branch
        stablehlo = None
    if stablehlo is not None:
        cases += stablehlo.CASES
        not_runnable.update(stablehlo.NOT_RUNNABLE)
    return cases, not_runnable


def case_id(case: OpCase) -> str:
    return f"{case.op}-{case.form}"


@dataclass
class Result:
    """One case swept. ``litert``: "ok", "ok without XNNPACK", or LiteRT's error;
    ``numlite``: "ok", or what failed or differed (empty when LiteRT did not run the form)."""

    op: str
    form: str
    litert: str
    numlite: str
    seconds: float = 0.0

    @property
    def litert_runs(self) -> bool:
        return self.litert.startswith(OK)

    @property
    def numlite_runs(self) -> bool:
        return self.litert_runs and self.numlite == OK


def run(interpreter: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Allocate, feed the inputs in order, invoke, and return copies of every output."""
    interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    return [np.array(interpreter.get_tensor(d["index"])) for d in interpreter.get_output_details()]


def run_litert(model: bytes, inputs: Sequence[np.ndarray]) -> tuple[str, list[list[np.ndarray]] | None]:
    """LiteRT's status and outputs: its builtin kernels without the XNNPACK delegate first (the
    reference numlite follows), then the default resolver with the delegate, whose float and
    quantized arithmetic differs at the edges. ("ok", [builtin outputs, default outputs]) when
    both run, "ok without XNNPACK" / "ok with XNNPACK only" when one does, (LiteRT's error, None)
    when neither does."""
    runs, errors = [], []
    for resolver in (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, None):
        kwargs = {} if resolver is None else {"experimental_op_resolver_type": resolver}
        try:
            with _quiet():
                runs.append(run(LiteRTInterpreter(model_content=model, **kwargs), inputs))
        except Exception as e:  # LiteRT refuses the form: its message is the record
            runs.append(None)
            errors.append(_short(f"{type(e).__name__}: {e}"))
    builtin, default = runs
    if builtin is None and default is None:
        return errors[-1], None
    status = OK if builtin is not None and default is not None else (
        f"{OK} without XNNPACK" if default is None else f"{OK} with XNNPACK only")
    return status, [r for r in runs if r is not None]


def run_numlite(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return run(numlite.Interpreter(model_content=model, jit=False), inputs)


def compare_runs(case: OpCase, runs: Sequence[Sequence[np.ndarray]], actual: Sequence[np.ndarray]) -> str:
    """"ok" when numlite's outputs match LiteRT's builtin kernels' (or, where they differ from
    them, the XNNPACK delegate's), else how they differ from the builtin kernels'."""
    outcomes = [compare(case, expected, actual) for expected in runs]
    return OK if OK in outcomes else outcomes[0]


def compare(case: OpCase, expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> str:
    """"ok", or how numlite's outputs differ from LiteRT's."""
    if case.check is not None:
        try:
            case.check(list(expected), list(actual))
        except AssertionError as e:
            return _short(f"check failed: {e}")
        return OK
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, LiteRT {len(expected)}"
    for n, (a, e) in enumerate(zip(actual, expected)):
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"output {n}: {a.dtype}{list(a.shape)}, LiteRT {e.dtype}{list(e.shape)}"
        if e.dtype.kind in "fc":
            if not np.allclose(a, e, rtol=case.rtol, atol=case.atol, equal_nan=True):
                err = float(np.max(np.abs(a.astype(np.complex128) - e))) if a.size else 0.0
                return f"output {n}: max abs difference {err:.3g}"
        elif not np.array_equal(a, e):
            return f"output {n}: {int(np.sum(a != e))} of {a.size} elements differ"
    return OK


# -- LiteRT in a child process ------------------------------------------------------------------------
# Some forms abort LiteRT's process (an unquantized int16 SUB fails a check in its kernel), so
# LiteRT runs the cases in a child process that stores each result as it finishes; where the
# child dies, the case it was running is recorded as a crash and a new child takes the rest.

LiteRTOutcome = tuple[str, list[list[np.ndarray]] | None]


_OUTCOMES: dict[tuple[str, ...], dict[str, LiteRTOutcome]] = {}  # by the case ids asked, per process


def litert_outcomes(cases: Sequence[OpCase]) -> dict[str, LiteRTOutcome]:
    """LiteRT's status and outputs for every case, by case id. Kept for the process (do not
    change the dict): tests/test_builtin_ops.py and tests/test_jit_sweep.py share one LiteRT run."""
    ids = [case_id(c) for c in cases]
    if tuple(ids) not in _OUTCOMES:
        _OUTCOMES[tuple(ids)] = _run_litert_outcomes(ids)
    return _OUTCOMES[tuple(ids)]


def _run_litert_outcomes(ids: list[str]) -> dict[str, LiteRTOutcome]:
    results: dict[str, LiteRTOutcome] = {}
    with tempfile.TemporaryDirectory(prefix="builtin-ops-") as tmp:
        todo = list(ids)
        while todo:
            with open(os.path.join(tmp, "todo.json"), "w") as f:
                json.dump(todo, f)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--litert-worker", tmp],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            done = 0
            for n, cid in enumerate(todo):
                path = os.path.join(tmp, f"{n}.pkl")
                if not os.path.exists(path):
                    break
                with open(path, "rb") as f:
                    results[cid] = pickle.load(f)
                os.remove(path)
                done += 1
            if done < len(todo):
                why = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
                results[todo[done]] = (_short(f"LiteRT crashes (exit status {proc.returncode}): {why[0]}"), None)
                done += 1
            todo = todo[done:]
    return results


def _litert_worker(tmp: str) -> None:
    with open(os.path.join(tmp, "todo.json")) as f:
        todo = json.load(f)
    cases = {case_id(c): c for c in load_cases()[0]}
    for n, cid in enumerate(todo):
        sys.stderr.write(f"running {cid}\n")
        sys.stderr.flush()
        try:
            model, inputs = cases[cid].build()
        except Exception as e:  # a defect of the case, reported as its result
            outcome: LiteRTOutcome = (_short(f"the case cannot be built: {type(e).__name__}: {e}"), None)
        else:
            outcome = run_litert(model, inputs)
        with open(os.path.join(tmp, f"{n}.tmp"), "wb") as f:
            pickle.dump(outcome, f)
        os.replace(os.path.join(tmp, f"{n}.tmp"), os.path.join(tmp, f"{n}.pkl"))


def sweep(case: OpCase, litert: LiteRTOutcome | None = None) -> tuple[Result, list[list[np.ndarray]] | None,
                                                                      list[np.ndarray] | None]:
    """Run one case in numlite against LiteRT's outcome (run here when not given: only for
    cases known not to crash LiteRT); the result, LiteRT's runs and numlite's outputs."""
    start = time.perf_counter()
    model, inputs = case.build()
    status, expected = litert if litert is not None else run_litert(model, inputs)
    actual, outcome = None, ""
    if expected is not None:
        try:
            actual = run_numlite(model, inputs)
            outcome = compare_runs(case, expected, actual)
        except Exception as e:  # numlite's failure is the result being measured
            outcome = _short(f"{type(e).__name__}: {e}")
    return Result(case.op, case.form, status, outcome, time.perf_counter() - start), expected, actual


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def _quiet():
    """LiteRT prints its refusals to stderr besides raising them."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# -- the table -------------------------------------------------------------------------------------


def builtin_ops() -> list[str]:
    """Every BuiltinOperator of the schema, by name."""
    return sorted(schema.BUILTIN_OPERATOR_CODES)


def markdown(results: Sequence[Result], not_runnable: dict[str, str], cases_by_op: dict[str, int]) -> str:
    by_op: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_op[r.op].append(r)
    ops = builtin_ops()
    litert_ops = [op for op in ops if any(r.litert_runs for r in by_op[op])]
    numlite_ops = [op for op in litert_ops if all(r.numlite_runs for r in by_op[op] if r.litert_runs)]
    litert_forms = sum(r.litert_runs for r in results)
    numlite_forms = sum(r.numlite_runs for r in results)
    untested = [op for op in ops if not by_op[op] and op not in not_runnable]
    lines = [
        f"- BuiltinOperators in the schema: {len(ops)}",
        f"- ops LiteRT runs in at least one form: {len(litert_ops)}; numlite matches LiteRT on every one of"
        f" their forms: {len(numlite_ops)} of {len(litert_ops)}",
        f"- forms: {len(results)} swept, {litert_forms} run by LiteRT, {numlite_forms} of those run and matched"
        f" by numlite; {len(results) - litert_forms} refused by LiteRT (recorded, not counted)",
        f"- not runnable as a one-op model: {len(not_runnable)}; ops without a case: {len(untested)}"
        + (f" ({', '.join(untested)})" if untested else ""),
        "",
        "| op | LiteRT runs | numlite runs | forms tested |",
        "|---|---|---|---|",
    ]
    for op in ops:
        rs = by_op[op]
        if not rs:
            reason = not_runnable.get(op, "no case")
            lines.append(f"| {op} | - | - | not runnable: {_cell(reason)} |")
            continue
        ran = [r for r in rs if r.litert_runs]
        forms = []
        for r in rs:
            if not r.litert_runs:
                forms.append(f"{r.form} (LiteRT refuses: {_cell(r.litert)})")
            elif r.numlite != OK:
                forms.append(f"{r.form} (numlite: {_cell(r.numlite)})")
            elif r.litert != OK:
                forms.append(f"{r.form} (LiteRT {r.litert[len(OK) + 1:]})")
            else:
                forms.append(r.form)
        lines.append(f"| {op} | {len(ran)}/{len(rs)} | {sum(r.numlite_runs for r in rs)}/{len(ran)} | {', '.join(forms)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return _short(text, 120).replace("|", "\\|")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated BuiltinOperator names (default: every case)")
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--markdown", help="write the table to this file (below its first '## The table' line if it has one)")
    parser.add_argument("--litert-worker", help=argparse.SUPPRESS)  # the child process running LiteRT
    args = parser.parse_args(argv)
    if args.litert_worker:
        _litert_worker(args.litert_worker)
        return 0
    cases, not_runnable = load_cases()
    if args.ops:
        wanted = set(args.ops.split(","))
        cases = [c for c in cases if c.op in wanted]
    outcomes = litert_outcomes(cases)
    results = []
    for case in cases:
        result, _, _ = sweep(case, outcomes[case_id(case)])
        results.append(result)
        if result.litert_runs and result.numlite != OK:
            print(f"FAIL {case_id(case)}: {result.numlite}", file=sys.stderr)
    counts: dict[str, int] = defaultdict(int)
    for c in cases:
        counts[c.op] += 1
    table = markdown(results, not_runnable, counts)
    print(table)
    print(f"{len(results)} forms in {sum(r.seconds for r in results):.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    if args.markdown:
        _write_markdown(args.markdown, table)
    return 0 if all(r.numlite_runs for r in results if r.litert_runs) else 1


MARK = "## The table"


def _write_markdown(path: str, table: str) -> None:
    """Replace everything below the file's ``## The table`` heading (the prose above stays)."""
    head = f"# LiteRT builtin operator coverage\n\n{MARK}\n\n"
    if os.path.exists(path):
        text = open(path).read()
        if MARK in text:
            head = text[: text.index(MARK)] + MARK + "\n\n"
    with open(path, "w") as f:
        f.write(head + table)


if __name__ == "__main__":
    sys.exit(main())
