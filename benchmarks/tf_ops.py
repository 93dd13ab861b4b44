"""Which TensorFlow ops numlite's converter lowers, next to the official converter's.

    python benchmarks/tf_ops.py [--ops Add,Conv2D] [--json out.json] [--markdown out.md]

Every case of ``tf_op_cases.py`` (one TF op type on function arguments, with one dtype or
attribute variant) is converted twice: by ``tf.lite.TFLiteConverter`` with
``target_spec.supported_ops = [TFLITE_BUILTINS]`` (no Flex, no custom ops) and by
``numlite.TFLiteConverter``. Each file that comes out runs in LiteRT and in numlite's
interpreter, and its results are compared with TensorFlow's (float32 within the case's
tolerance, integers and bools exactly; random ops by the case's check). The script prints a
Markdown table, op | case | official | numlite | TFLite ops emitted | match, and the counts:
an op type counts for the official converter when it converts at least one of its cases, and
for numlite when numlite converts every case the official converter converts and its files
match TensorFlow in both interpreters. ``--json`` writes every result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
# This checkout's numlite (not another one installed in the environment), and the cases.
for path in (os.path.dirname(HERE), HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

# tf_op_cases sets TensorFlow's environment before importing it.
from tf_op_cases import CASES, LEFT_OUT, Case  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter  # noqa: E402

import numlite  # noqa: E402
from numlite.model import read_model  # noqa: E402

RUNTIMES = ("LiteRT", "numlite")
OK = "ok"


@dataclass
class Conversion:
    """What one converter made of a case: the error, or the operators and how each
    interpreter's results compare with TensorFlow's (``"ok"`` or what differs)."""

    converted: bool
    error: str = ""
    ops: list[str] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)

    @property
    def matches(self) -> bool:
        return self.converted and len(self.runs) == len(RUNTIMES) and all(r == OK for r in self.runs.values())


@dataclass
class Result:
    """One case swept: the official converter's conversion and numlite's."""

    op: str
    variant: str
    official: Conversion
    numlite: Conversion
    seconds: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.op}[{self.variant}]"


# -- one case ------------------------------------------------------------------------------------


def trace(case: Case) -> tuple[Any, Any]:
    """The case's tf.function (within a tf.Module that tracks them, when it captures
    variables), and its concrete function; the op must be in the graph."""
    function = tf.function(case.fn, input_signature=list(case.specs), autograph=False)
    concrete = function.get_concrete_function()
    func = function
    if case.variables:
        func = tf.Module()
        func.function, func.state = function, list(case.variables)
    graph_def = concrete.graph.as_graph_def()
    types = {n.op for n in graph_def.node} | {n.op for f in graph_def.library.function for n in f.node_def}
    if case.op not in types:
        raise AssertionError(f"{case.id}: the traced graph has no {case.op} op (it has {sorted(types)})")
    return func, concrete


def convert_official(func: Any, concrete: Any) -> bytes:
    """``tf.lite.TFLiteConverter`` limited to TFLite builtins."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], func)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def convert_numlite(concrete: Any) -> bytes:
    return numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()


def official_error(error: Exception) -> str:
    """The gist of the official converter's error: the ops it could not lower."""
    text = str(error)
    found = re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", text)
    if found:
        return "not lowered to builtins: " + ", ".join(sorted(set(found)))
    lines = [line.strip() for line in text.splitlines() if "error:" in line]
    return _short(lines[0].split("error:", 1)[1] if lines else text)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def operators(model: bytes) -> list[str]:
    """The operators of every subgraph, in order."""
    m = read_model(model)
    return [m.op_name(op) for _, _, op in m.iter_operators()]


def run_model(interpreter_class: Callable[..., Any], model: bytes, case: Case) -> list[np.ndarray]:
    """Run the model on the case's inputs, fed by name (the order of a model's input tensors
    need not be the function's): through its signature, or (a model without one) to the input
    tensors named after the arguments; the outputs in the function's order."""
    it = interpreter_class(model_content=model)
    feeds = {spec.name: value for spec, value in zip(case.specs, case.inputs)}
    if it.get_signature_list():
        results = it.get_signature_runner()(**feeds)
        names = sorted(results, key=lambda n: (len(n), n))  # output_0, output_1, ..., output_10
        return [np.array(results[n]) for n in names]
    details = {d["name"].split(":")[0].rsplit("_", 1)[-1]: d for d in it.get_input_details()}
    if sorted(details) != sorted(feeds):
        raise AssertionError(f"the model's inputs {sorted(details)} are not the case's {sorted(feeds)}")
    for name, value in feeds.items():
        if tuple(details[name]["shape"]) != value.shape:
            it.resize_tensor_input(details[name]["index"], value.shape)
    it.allocate_tensors()
    for name, value in feeds.items():
        it.set_tensor(details[name]["index"], value)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def compare(case: Case, actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> str:
    """``"ok"``, or how the outputs differ from TensorFlow's."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, TF has {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"output {k}: {a.dtype}{list(a.shape)}, TF {e.dtype}{list(e.shape)}"
    try:
        if case.check is not None:
            case.check(actual, expected)
            return OK
        for k, (a, e) in enumerate(zip(actual, expected)):
            if e.dtype.kind in "fc":
                np.testing.assert_allclose(a, e, rtol=case.rtol, atol=case.atol, err_msg=f"output {k}")
            else:
                np.testing.assert_array_equal(a, e, err_msg=f"output {k}")
    except AssertionError as e:
        return "differs from TF: " + _short(" ".join(str(e).split("\n")[1:4]))
    return OK


def _runs(case: Case, model: bytes, expected: Sequence[np.ndarray]) -> dict[str, str]:
    runs = {}
    for runtime, cls in zip(RUNTIMES, (LiteRTInterpreter, numlite.Interpreter)):
        try:
            runs[runtime] = compare(case, run_model(cls, model, case), expected)
        except Exception as e:  # an interpreter refusing the model is a result, not a crash
            runs[runtime] = f"fails: {type(e).__name__}: {_short(e)}"
    return runs


def sweep(case: Case) -> Result:
    """Convert a case with both converters and run every file in both interpreters."""
    start = time.perf_counter()
    func, concrete = trace(case)
    models: dict[str, bytes | None] = {}
    conversions: dict[str, Conversion] = {}
    for name, convert in (("official", lambda: convert_official(func, concrete)), ("numlite", lambda: convert_numlite(concrete))):
        try:
            models[name] = convert()
            conversions[name] = Conversion(True, ops=operators(models[name]))
        except Exception as e:
            models[name] = None
            if name == "official":
                error = official_error(e)
            elif isinstance(e, numlite.ConversionError):
                error = _short(str(e).replace("the model uses TensorFlow ops numlite cannot convert:", "no rule:"))
            else:
                error = f"crashed: {type(e).__name__}: {_short(e)}"
            conversions[name] = Conversion(False, error=error)
    # TensorFlow runs after both conversions: a case that assigns variables changes them.
    expected = [np.asarray(t) for t in tf.nest.flatten(concrete(*[tf.constant(x) for x in case.inputs]))]
    for name, model in models.items():
        if model is not None:
            conversions[name].runs = _runs(case, model, expected)
    return Result(case.op, case.variant, conversions["official"], conversions["numlite"], time.perf_counter() - start)


# -- the report ----------------------------------------------------------------------------------


@dataclass
class Counts:
    """Op types and cases converted: by the official converter, and by numlite where the
    official converter converts (numlite's file matching TF in both interpreters)."""

    official_ops: int
    numlite_ops: int
    official_cases: int
    numlite_cases: int
    numlite_only_ops: list[str]
    missing_ops: list[str]


def count(results: Sequence[Result]) -> Counts:
    by_op: dict[str, list[Result]] = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    official = {op for op, rs in by_op.items() if any(r.official.converted for r in rs)}
    covered = {op for op in official if all(r.numlite.matches for r in by_op[op] if r.official.converted)}
    numlite_only = sorted(op for op, rs in by_op.items() if op not in official and any(r.numlite.matches for r in rs))
    return Counts(len(official), len(covered), sum(r.official.converted for r in results),
                  sum(r.official.converted and r.numlite.matches for r in results), numlite_only,
                  sorted(official - covered))


def _cell(conversion: Conversion) -> str:
    if not conversion.converted:
        return "no: " + conversion.error.replace("|", "\\|")
    count = len(conversion.ops)
    return f"yes ({count} op{'' if count == 1 else 's'})"


def _ops_cell(result: Result) -> str:
    def summary(c: Conversion) -> str:
        if not c.converted:
            return "—"
        counts = Counter(c.ops)
        return ", ".join(f"{op}" + (f" x{n}" if n > 1 else "") for op, n in counts.items()) or "(none)"

    official, mine = summary(result.official), summary(result.numlite)
    return official if official == mine else f"{official} / numlite: {mine}"


def _match_cell(result: Result) -> str:
    parts = []
    for name, c in (("official", result.official), ("numlite", result.numlite)):
        if not c.converted:
            continue
        bad = [f"{runtime}: {outcome}" for runtime, outcome in c.runs.items() if outcome != OK]
        parts.append(f"{name} file: " + ("; ".join(bad) if bad else "ok"))
    return "; ".join(parts).replace("|", "\\|") or "—"


def markdown(results: Sequence[Result]) -> str:
    """The table and the counts, as Markdown."""
    c = count(results)
    lines = [
        f"numlite/official: **{c.numlite_ops}/{c.official_ops}** op types "
        f"({c.numlite_cases}/{c.official_cases} cases; {len(results)} cases of "
        f"{len({r.op for r in results})} op types swept)",
        "",
        "| op | case | official | numlite | TFLite ops emitted (official / numlite) | match |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r.op} | {r.variant} | {_cell(r.official)} | {_cell(r.numlite)} | {_ops_cell(r)} | {_match_cell(r)} |")
    lines += ["", f"Op types the official converter lowers and numlite does not (fully): "
                  f"{', '.join(c.missing_ops) or 'none'}",
              f"Op types numlite converts and the official converter does not: {', '.join(c.numlite_only_ops) or 'none'}"]
    return "\n".join(lines)


def notes_markdown(cases: Sequence[Case]) -> str:
    """The cases' known official defects and numlite's extra operators, and the ops left out."""
    lines = ["Cases whose official file does not give TF's results:", "",
             "| case | what the official file does |", "|---|---|"]
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines += [f"| {c.id} | {cell(c.official_defect)} |" for c in cases if c.official_defect]
    lines += ["", "Cases where numlite's file has more operators than the official one:", "",
              "| case | why |", "|---|---|"]
    lines += [f"| {c.id} | {cell(c.more_ops)} |" for c in cases if c.more_ops]
    lines += ["", "TF ops the sweep does not try:", "", "| ops | why |", "|---|---|"]
    lines += [f"| {cell(ops)} | {cell(why)} |" for ops, why in LEFT_OUT.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated TF op types (default: every case)")
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(argv)
    wanted = set(args.ops.split(",")) if args.ops else None
    cases = [c for c in CASES if wanted is None or c.op in wanted]
    if wanted and not cases:
        parser.error(f"no cases for {sorted(wanted)}")
    start = time.perf_counter()
    results = []
    broken = []
    for k, case in enumerate(cases):
        try:
            results.append(sweep(case))
        except Exception as e:  # the case itself is wrong (TF cannot run it, or lacks the op)
            broken.append(f"{case.id}: {type(e).__name__}: {_short(e)}")
        print(f"[{k + 1}/{len(cases)}] {case.id}", file=sys.stderr, flush=True)
    table = markdown(results) + "\n\n" + notes_markdown(cases)
    print(table)
    if broken:
        print("\nCases that could not run (fix them in tf_op_cases.py):\n" + "\n".join(broken))
    print(f"\n{len(cases)} cases in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tensorflow": tf.__version__, "counts": asdict(count(results)),
                       "results": [asdict(r) | {"id": r.id} for r in results]}, f, indent=1)


if __name__ == "__main__":
    main()
