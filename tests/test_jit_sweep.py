"""The builtin operator sweep on the compiled engine: every form of benchmarks/builtin_op_cases*.py
that the compiled engine covers, judged against LiteRT's outputs for that form.

tests/test_builtin_ops.py runs each form as a one-op model on the NumPy engine (its
``builtin_ops.run_numlite`` passes ``jit=False``). Compiling each form alone would cost a Numba
compile per form (0.5-3 s, about 500 forms: minutes of CI), so this file, not the sweep, judges
the compiled kernels:

- every form LiteRT runs, whose op has a compiled emitter and whose model has one subgraph, is
  allocated on the NumPy engine and handed to the generator (as the engine does at
  ``allocate_tensors``, without compiling): a form it refuses (``NotCompiled``) stays on NumPy,
  and the summary counts it by reason;
- the forms it generates are merged into models of at most ``MAX_NODES`` nodes (their subgraphs
  side by side), each compiled once with ``jit=True`` (forms of one generated source are spread
  over models of one source, which share a compile: see ``plan``), asserted to have compiled
  whole and run compiled, invoked once as the sweep invokes;
- each form's outputs are compared with LiteRT's outputs of its one-op model, which the sweep's
  machinery computed (``builtin_ops.litert_outcomes``, one LiteRT child process per test
  process, shared with test_builtin_ops.py) exactly as the sweep compares them
  (``builtin_ops.compare_runs``: the case's tolerance, integers and bools exactly).

A failure names the form (the sweep's case id). A merged model that fails as a whole (an
exception, or not compiled whole) is run again form by form to name the forms that fail.
"""

from __future__ import annotations

import collections
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pytest

import numlite
from numlite.model import read_model, write_model
from numlite.model.ir import Model, Subgraph

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import builtin_ops  # noqa: E402

CASES, _ = builtin_ops.load_cases()
BY_ID = {builtin_ops.case_id(c): c for c in CASES}

# Nodes per merged model, measured (docs/jit.md, "Testing both engines"): all the forms compiled
# in chunks of 4, 8 and 16 nodes took 158, 147 and 144 s (load 1.2-2.4), but one chunk of 64 nodes
# took 126 s (Numba's time grows faster than the function); 8 fails smaller and shards finer.
MAX_NODES = 8
# The families of merged models are dealt round-robin to this many tests (xdist's workers share them).
SHARDS = 6
# The forms this file judges: fewer means forms silently left out (a generator refusing more
# than it did, or the plan broken). 520 were judged when this was written, 575 after the kernels of
# helper jit-ops3 (SVDF, TOPK_V2, SCATTER_ND, the segment ops, ...): raise it as coverage grows.
FLOOR = 575


def merged(models: list[bytes]) -> bytes:
    """One model whose subgraph 0 holds the subgraph 0 of each one-op model side by side (their
    inputs and outputs in order)."""
    out = Model(subgraphs=[Subgraph()])
    graph = out.subgraphs[0]
    codes: dict[tuple, int] = {}
    for data in models:
        m = read_model(data)
        (sub,) = m.subgraphs
        base_tensor, base_buffer = len(graph.tensors), len(out.buffers) - 1
        out.buffers.extend(m.buffers[1:])
        for t in sub.tensors:
            t.buffer = t.buffer and t.buffer + base_buffer  # buffer 0: no data
            graph.tensors.append(t)
        shift = lambda indices: [i + base_tensor if i >= 0 else i for i in indices]  # noqa: E731
        for op in sub.operators:
            code = m.operator_codes[op.opcode_index]
            op.opcode_index = codes.setdefault((code.builtin, code.custom_code, code.version), len(codes))
            if op.opcode_index == len(out.operator_codes):
                out.operator_codes.append(code)
            op.inputs, op.outputs, op.intermediates = shift(op.inputs), shift(op.outputs), shift(op.intermediates)
            graph.operators.append(op)
        graph.inputs += shift(sub.inputs)
        graph.outputs += shift(sub.outputs)
    return write_model(out)


@dataclass
class Form:
    """One sweep case the compiled engine covers: its one-op model, feeds and node count."""

    cid: str
    model: bytes
    feeds: list[np.ndarray]
    nodes: int
    outputs: int
    source: str  # the generated module of its one-op model (sizes lifted out: one per structure)


@dataclass
class Plan:
    """The forms merged for compiling, and why each other form is not judged here. A family is a
    list of merged models of one structure (the m-th model holds the m-th form of each of its
    structures), so its models after the first reuse the first one's compile."""

    families: list[list[list[Form]]] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)  # case id -> why it is not judged compiled
    broken: dict[str, str] = field(default_factory=dict)  # case id -> the generator's exception (a defect)

    @property
    def judged(self) -> int:
        return sum(len(forms) for family in self.families for forms in family)

    @property
    def models(self) -> int:
        return sum(len(family) for family in self.families)


def classify(cid: str, outcome: builtin_ops.LiteRTOutcome) -> Form | str:
    """The form, when the compiled engine's generator takes it; else why it is not judged here.
    Raises what the generator raises other than NotCompiled (a defect)."""
    from numlite.jit.codegen import Generator
    from numlite.jit.kernels import EMITTERS, QUANTIZED_EMITTERS, NotCompiled

    case = BY_ID[cid]
    if outcome[1] is None:
        return "LiteRT refuses the form (the sweep records its error)"
    if case.op not in EMITTERS and case.op not in QUANTIZED_EMITTERS:
        return f"no compiled kernel for {case.op}"
    model, feeds = case.build()
    subgraphs = read_model(model).subgraphs
    if len(subgraphs) != 1:
        return "more than one subgraph (merging keeps subgraph 0 only)"
    if len(feeds) != len(subgraphs[0].inputs):
        return "not every input is fed (the merged model's feeds would shift)"
    interpreter = numlite.Interpreter(model_content=model, jit=False)
    interpreter.allocate_tensors()  # LiteRT runs it, and so does the sweep's NumPy side
    try:
        source = Generator(interpreter, 0).generate()  # what the engine runs at allocate_tensors(), without compiling
    except NotCompiled as e:
        return f"stays on NumPy: {str(e).split(': ', 1)[-1]}"  # the reason without the node's place
    return Form(cid, model, feeds, len(subgraphs[0].operators), len(subgraphs[0].outputs), source)


@lru_cache(maxsize=1)
def plan() -> Plan:
    """Every sweep case classified, the generated forms in merged models of at most MAX_NODES nodes.
    Forms of one structure (the same one-op source: ABS-f32-r1 and -r4) are grouped by how many
    there are, and the m-th models of a family hold the m-th form of each structure, so the
    family's models share one source, hence one compile."""
    outcomes, result = builtin_ops.litert_outcomes(CASES), Plan()
    structures: dict[str, list[Form]] = collections.defaultdict(list)
    for cid in BY_ID:
        try:
            form = classify(cid, outcomes[cid])
        except Exception as e:  # numlite's allocate_tensors() would raise it (LiteRT runs the form): a defect
            result.broken[cid] = f"{type(e).__name__}: {e}"
            continue
        if isinstance(form, str):
            result.left[cid] = form
            continue
        structures[form.source].append(form)
    by_count: dict[int, list[list[Form]]] = collections.defaultdict(list)
    for forms in structures.values():
        by_count[len(forms)].append(forms)
    for count, groups in sorted(by_count.items()):
        chunk: list[list[Form]] = []  # structures, each a list of `count` forms
        for forms in groups + [[]]:  # (an empty structure ends the last family)
            if chunk and (not forms or sum(f[0].nodes for f in chunk) + forms[0].nodes > MAX_NODES):
                result.families.append([[f[m] for f in chunk] for m in range(count)])
                chunk = []
            if forms:
                chunk.append(forms)
    return result


COMPILES: collections.Counter = collections.Counter()  # merged models compiled, and reused (a family's)


def run_compiled(forms: list[Form]) -> list[np.ndarray]:
    """Allocate the forms' merged model with jit=True, check that it compiled whole and that its
    invoke ran compiled, invoke once and return every output."""
    from numlite.jit import engine as jit_engine

    runs = collections.Counter()
    observer = lambda event, manager, root: runs.update([event])  # noqa: E731
    jit_engine.OBSERVERS.append(observer)
    try:
        interpreter = numlite.Interpreter(model_content=merged([f.model for f in forms]), jit=True)
        outputs = builtin_ops.run(interpreter, [x for f in forms for x in f.feeds])
    finally:
        jit_engine.OBSERVERS.remove(observer)
    report = interpreter.jit_report()["subgraphs"][0]
    assert report["compiled"], f"not compiled whole: {report.get('reason')}"
    assert runs["ran compiled"] == 1 and not runs["ran on numpy"], dict(runs)
    COMPILES.update(["reused" if report["reused"] or report["cache_hit"] else "compiled"])
    return outputs


def judge(forms: list[Form]) -> dict[str, str]:
    """Each form's difference from LiteRT ("ok" when it matches), running the forms merged, or one
    by one when the merged model fails as a whole."""
    outcomes = builtin_ops.litert_outcomes(CASES)
    try:
        outputs = run_compiled(forms)
    except Exception as e:
        if len(forms) == 1:
            return {forms[0].cid: f"{type(e).__name__}: {e}"}
        verdicts = {}
        for form in forms:
            verdicts.update(judge([form]))
        if all(v == builtin_ops.OK for v in verdicts.values()):  # only the merged model fails
            verdicts = {f.cid: f"fails merged with {[g.cid for g in forms]}: {type(e).__name__}: {e}" for f in forms}
        return verdicts
    verdicts, start = {}, 0
    for form in forms:
        actual = outputs[start : start + form.outputs]
        start += form.outputs
        verdicts[form.cid] = builtin_ops.compare_runs(BY_ID[form.cid], outcomes[form.cid][1], actual)
    return verdicts


def summary(left: dict[str, str]) -> list[str]:
    """One line per reason, the op's name in it generalized: "12  no compiled kernel for <op> (CUMSUM, ...)"."""
    ops_by_reason: dict[str, list[str]] = collections.defaultdict(list)
    for cid, reason in left.items():
        op = BY_ID[cid].op
        ops_by_reason[reason.replace(op, "<op>")].append(op)
    lines = []
    for reason, ops in sorted(ops_by_reason.items(), key=lambda item: -len(item[1])):
        named = f" ({', '.join(sorted(set(ops)))})" if "<op>" in reason else ""
        lines.append(f"{len(ops):4d}  {reason}{named}")
    return lines


@pytest.fixture(autouse=True)
def jit_cache(jit_cache_dir, monkeypatch):
    from numlite import jit

    if not jit.available():
        pytest.skip(f"the compiled engine needs Numba: {jit.status()}")
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)


def test_plan_judges_the_covered_forms():
    """Prints what is judged compiled and why the rest is not; the generator raised nothing but
    NotCompiled, and the forms judged are not fewer than FLOOR."""
    p = plan()
    print(f"\ncompiled engine on the builtin sweep: {p.judged} forms compiled and judged in {p.models}"
          f" merged models, {len(p.families)} families of one source each; {len(p.left)} not judged here:")
    for line in summary(p.left):
        print(f"  {line}")
    assert not p.broken, "allocate_tensors or the generator raised (not NotCompiled):\n" + "\n".join(f"{k}: {v}" for k, v in p.broken.items())
    assert p.judged >= FLOOR, f"only {p.judged} forms judged compiled (floor {FLOOR})"


@pytest.mark.parametrize("shard", range(SHARDS))
def test_compiled_forms_match_litert(shard):
    families = plan().families[shard::SHARDS]
    assert families, "no merged model in this shard"
    verdicts = {}
    for family in families:
        for forms in family:
            verdicts.update(judge(forms))
    print(f"\nshard {shard}: {len(verdicts)} forms compiled and judged in {sum(map(len, families))} merged models"
          f" (in this process so far: {dict(COMPILES)})")
    failed = {cid: v for cid, v in verdicts.items() if v != builtin_ops.OK}
    assert not failed, "compiled forms that differ from LiteRT:\n" + "\n".join(f"{k}: {v}" for k, v in failed.items())
