"""Which operators a model uses, and whether numlite and the installed LiteRT can run each.

>>> report = numlite.ops_report("model.tflite")
>>> print(report)               # the table ``numlite ops model.tflite`` prints
>>> report.numlite_can_run      # False if some operator has no numlite kernel

numlite can run an operator when it has a kernel registered under its name (the builtin name,
or a custom op's code: numlite's own kernels, plus any given in ``custom_ops=``, as
``numlite.Interpreter`` resolves them).

Whether LiteRT (``ai_edge_litert``) can run it is asked of LiteRT itself, with one small probe
model per operator, so that one failure cannot hide another:

- a builtin: a model holding only its operator code (builtin and version). LiteRT's
  InterpreterBuilder resolves every operator code when the interpreter is created and refuses
  one its op resolver lacks ("Didn't find op for builtin opcode 'X' version 'N'").
- a custom op: LiteRT accepts unknown custom codes at creation and reports them when it
  prepares the node ("Encountered unresolved custom op: X", or "Select TensorFlow op(s) ... not
  supported" for Flex ops). The probe is a one-node model made of the op's first node in the
  model (its input and output tensors, constants and options), allocated in a child process:
  LiteRT checks for an unresolved op before running any kernel code, so an error other than
  those (or a crash of a real kernel on the probe) shows that LiteRT has the op.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping

from numlite.kernels import KERNELS
from numlite.model import Model, read_model, read_model_file, write_model
from numlite.model.ir import Buffer, Operator, OperatorCode, Subgraph, Tensor

LITERT_NOT_INSTALLED = "LiteRT not installed"


@dataclass
class OpSupport:
    """One operator the model uses (one operator code: a builtin or custom code at a version).

    ``litert`` is None when LiteRT was not asked (not installed, or ``litert=False``).
    """

    name: str  # the builtin name ("CONV_2D") or the custom op's code
    custom: bool
    version: int
    nodes: int  # how many nodes use it, in all subgraphs
    subgraphs: list[int]
    numlite: bool
    numlite_detail: str
    litert: bool | None = None
    litert_detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class OpsReport:
    """The operators of a model with what can run them; ``str()`` gives the CLI's table."""

    ops: list[OpSupport] = field(default_factory=list)
    litert_version: str | None = None  # None: LiteRT was not asked
    litert_note: str = ""  # why LiteRT was not asked

    @property
    def numlite_can_run(self) -> bool:
        """Whether numlite has a kernel for every operator (the CLI's exit code is 0 then)."""
        return all(op.numlite for op in self.ops)

    @property
    def numlite_missing(self) -> list[OpSupport]:
        return [op for op in self.ops if not op.numlite]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ops": [op.to_dict() for op in self.ops],
            "numlite_can_run": self.numlite_can_run,
            "litert_version": self.litert_version,
            "litert_note": self.litert_note,
        }

    def __str__(self) -> str:
        rows = [["operator", "version", "nodes", "subgraphs", "numlite", "LiteRT"]]
        for op in self.ops:
            label = f"{op.name} (custom)" if op.custom else op.name
            rows.append([
                label, str(op.version), str(op.nodes), ",".join(map(str, op.subgraphs)),
                _verdict(op.numlite, op.numlite_detail), _verdict(op.litert, op.litert_detail, self.litert_note),
            ])  # fmt: skip
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        litert = f"LiteRT {self.litert_version}" if self.litert_version else (self.litert_note or "LiteRT not asked")
        missing = self.numlite_missing
        verdict = (
            "numlite can run every operator"
            if not missing
            else f"numlite cannot run {len(missing)} operator(s): " + ", ".join(op.name for op in missing)
        )
        total = sum(op.nodes for op in self.ops)
        lines.append(f"{len(self.ops)} operator(s), {total} node(s); {verdict}; {litert}")
        return "\n".join(lines)


def _verdict(ok: bool | None, detail: str, unknown: str = "") -> str:
    if ok is None:
        return unknown or "-"
    return ("yes" if ok else "no") + (f" ({detail})" if detail else "")


def ops_report(
    model: str | os.PathLike | bytes | Model,
    custom_ops: Mapping[str, Any] | None = None,
    litert: bool = True,
) -> OpsReport:
    """Every operator ``model`` uses: builtin name or custom code, version, how many nodes, in
    which subgraphs, whether numlite can run it and whether the installed LiteRT can.

    Args:
      model: a ``.tflite`` path, the model's bytes, or a :class:`numlite.model.Model`.
      custom_ops: the ``custom_ops=`` table you would give ``numlite.Interpreter``; operators
        named in it count as runnable by numlite.
      litert: ask LiteRT (``ai_edge_litert``) too; when it is not installed the report says
        "LiteRT not installed" instead of failing.

    Returns:
      An :class:`OpsReport`; ``str(report)`` is the table ``numlite ops`` prints and
      ``report.numlite_can_run`` is False when some operator has no numlite kernel.

    Raises:
      ModelError: the file is not a valid model.
    """
    if isinstance(model, Model):
        m = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        m = read_model(bytes(model))
    else:
        m = read_model_file(model)
    kernels = set(KERNELS) | set(custom_ops or {})
    uses: dict[int, OpSupport] = {}
    first_use: dict[int, tuple[int, Operator]] = {}
    for s, _, op in m.iter_operators():
        code = m.operator_codes[op.opcode_index]
        entry = uses.get(op.opcode_index)
        if entry is None:
            name = code.name
            has = name in kernels
            detail = "" if has else "no kernel"
            if has and custom_ops and name in custom_ops:
                detail = "custom_ops"
            entry = uses[op.opcode_index] = OpSupport(name, code.builtin == "CUSTOM", code.version, 0, [], has, detail)
            first_use[op.opcode_index] = (s, op)
        entry.nodes += 1
        if s not in entry.subgraphs:
            entry.subgraphs.append(s)
    report = OpsReport(ops=list(uses.values()))
    if not litert:
        report.litert_note = "LiteRT not asked"
        return report
    try:
        import ai_edge_litert  # noqa: F401
        from ai_edge_litert.interpreter import Interpreter  # noqa: F401
    except ImportError:
        report.litert_note = LITERT_NOT_INSTALLED
        return report
    report.litert_version = _litert_version()
    customs = []
    for index, entry in uses.items():
        if entry.custom:
            customs.append((entry, _one_node_model(m, m.operator_codes[index], *first_use[index])))
        else:
            entry.litert, entry.litert_detail = _litert_has_builtin(m.operator_codes[index])
    if customs:
        verdicts = _probe_custom_ops([probe for _, probe in customs])
        for (entry, _), (ok, detail) in zip(customs, verdicts):
            entry.litert, entry.litert_detail = ok, detail
    return report


def _litert_version() -> str:
    try:
        from importlib.metadata import version

        return version("ai-edge-litert")
    except Exception:  # noqa: BLE001 (a development install may have no metadata)
        return "(unknown version)"


def _litert_has_builtin(code: OperatorCode) -> tuple[bool, str]:
    """Create a LiteRT interpreter on a model holding only this operator code: LiteRT's
    InterpreterBuilder resolves every operator code then, and fails on one it lacks."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    probe = Model(
        operator_codes=[OperatorCode(code.builtin, None, code.version)],
        subgraphs=[Subgraph(tensors=[Tensor("x", (1,), "FLOAT32")], inputs=[0], outputs=[0])],
    )
    try:
        Interpreter(
            model_content=write_model(probe),
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
    except (ValueError, RuntimeError) as e:
        message = " ".join(str(e).split())
        if "Didn't find op for builtin opcode" in message:
            return False, f"no kernel for version {code.version}"
        return False, message
    return True, ""


def _one_node_model(m: Model, code: OperatorCode, subgraph_index: int, op: Operator) -> Model:
    """A model whose only node is ``op`` with its own tensors (constants kept), inputs fed."""
    sg = m.subgraphs[subgraph_index]
    used = list(dict.fromkeys(i for i in list(op.inputs) + list(op.outputs) if 0 <= i < len(sg.tensors)))
    remap = {old: new for new, old in enumerate(used)}
    buffers = [Buffer()]
    tensors = []
    for i in used:
        t = sg.tensors[i]
        data = m.buffers[t.buffer].data if 0 < t.buffer < len(m.buffers) else None
        buffer = 0
        if data is not None and data.size:
            buffers.append(Buffer(data))
            buffer = len(buffers) - 1
        tensors.append(dataclasses.replace(t, buffer=buffer))
    node = dataclasses.replace(
        op,
        opcode_index=0,
        inputs=[remap.get(i, -1) for i in op.inputs],
        outputs=[remap.get(i, -1) for i in op.outputs],
        mutating_variable_inputs=[],
        intermediates=[],
    )
    inputs = [remap[i] for i in op.inputs if i in remap and tensors[remap[i]].buffer == 0 and i not in op.outputs]
    outputs = [remap[i] for i in op.outputs if i in remap]
    return Model(
        operator_codes=[OperatorCode(code.builtin, code.custom_code, code.version)],
        subgraphs=[Subgraph(tensors=tensors, inputs=list(dict.fromkeys(inputs)), outputs=outputs, operators=[node])],
        buffers=buffers,
    )


# The child process: allocate each probe in LiteRT and print one JSON line per probe, flushed
# before the next, so that a kernel crashing on a probe loses no other answer.
_PROBE_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from ai_edge_litert.interpreter import Interpreter, OpResolverType
for k, path in enumerate(sys.argv[1:]):
    try:
        it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        error = None
    except Exception as e:
        error = str(e)
    print(json.dumps({"probe": path, "error": error}), flush=True)
"""


def _probe_custom_ops(probes: list[Model]) -> list[tuple[bool, str]]:
    """LiteRT's verdict on each custom-op probe, from child processes (see the module doc)."""
    verdicts: dict[int, tuple[bool, str]] = {}
    with tempfile.TemporaryDirectory(prefix="numlite-ops-") as folder:
        paths = []
        for k, probe in enumerate(probes):
            path = os.path.join(folder, f"probe{k}.tflite")
            with open(path, "wb") as f:
                f.write(write_model(probe))
            paths.append(path)
        pending = list(range(len(paths)))
        while pending:
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
            try:
                done = subprocess.run(
                    [sys.executable, "-c", _PROBE_SCRIPT] + [paths[k] for k in pending],
                    capture_output=True, text=True, timeout=120, env=env,
                )  # fmt: skip
                stdout, crashed = done.stdout, done.returncode != 0
            except subprocess.TimeoutExpired as e:
                stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                crashed = True
            answered = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
            for k, answer in zip(pending, answered):
                verdicts[k] = _custom_verdict(answer["error"])
            pending = pending[len(answered):]
            if pending and crashed:
                # The probe being prepared crashed the child: only a kernel LiteRT has runs code
                # (an unresolved op is reported before), so LiteRT has this op.
                verdicts[pending[0]] = (True, "its kernel crashed on the probe's tensors")
                pending = pending[1:]
            elif pending:  # the child stopped without crashing or answering: say so
                for k in pending:
                    verdicts[k] = (False, "the LiteRT probe gave no answer")
                pending = []
    return [verdicts[k] for k in range(len(probes))]


def _custom_verdict(error: str | None) -> tuple[bool, str]:
    if error is None:
        return True, ""
    message = " ".join(error.split())
    if "unresolved custom op" in message:
        return False, "unresolved custom op"
    if "Select TensorFlow op" in message:
        return False, "a Flex (Select TF) op: needs the Flex delegate"
    return True, ""  # LiteRT found the op; its kernel refused the probe's tensors
