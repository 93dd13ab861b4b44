"""The worker side of batch inference: one numlite Interpreter, allocated once, that runs
groups of examples and returns one :class:`Result` per example.

:class:`ModelSpec` reads what the driver and every worker need to agree on (input names,
dtypes and shape signatures, output names, whether the model has a batch axis, whether it
keeps state) from the model alone, without allocating anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from numlite.errors import InvalidInputError, NumliteError
from numlite.interpreter import Interpreter
from numlite.model import Model, read_model, read_model_file

Feeds = Mapping[str, Any]


@dataclass
class Result:
    """What became of one example (or one sequence, with ``sequences=True``).

    ``outputs`` maps each output name to its value for this example (the model's output
    without its batch axis when the model has one); ``error`` is None on success, else a
    one-line message naming the example and, where it came from a file, the file.
    """

    index: int
    outputs: dict[str, np.ndarray] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class InputSpec:
    name: str
    dtype: np.dtype
    signature: tuple[int, ...]  # the model's shape signature, -1 for a dynamic dimension


@dataclass
class ModelSpec:
    """How a model is fed, as batch inference sees it.

    ``batch_axis``: every input has a leading dimension that is -1 or 1 in its shape
    signature; an example is then one row of it (the input's shape without that axis), and the
    outputs are split along their first axis. Otherwise an example is the whole input.
    ``dynamic_batch``: that leading dimension is -1 everywhere, so several examples can be
    stacked into one invoke. ``stateful``: the model keeps state from one invoke to the next
    (resource variables or variable tensors), so examples must run in order, one per invoke.
    """

    inputs: list[InputSpec]
    outputs: list[str]
    signature_key: str | None
    batch_axis: bool
    dynamic_batch: bool
    stateful: bool
    input_names_kind: str = "input tensor"
    output_quantization: dict[str, tuple[float, int]] = field(default_factory=dict)  # name: (scale, zero point)

    @classmethod
    def of(cls, model: Model, signature: str | None = None) -> "ModelSpec":
        sigs = {s.key: s for s in model.signature_defs}
        if signature is not None and signature not in sigs:
            raise InvalidInputError(
                f"the model has no signature {signature!r}; its signatures: {sorted(sigs) or 'none'}"
            )
        if signature is None and len(sigs) > 1:
            raise InvalidInputError(
                f"the model has {len(sigs)} signatures ({', '.join(sorted(sigs))}): choose one with signature="
            )
        if sigs:
            sig = sigs[signature] if signature is not None else next(iter(sigs.values()))
            sg = model.subgraphs[sig.subgraph_index]
            in_items, out_items, key = list(sig.inputs.items()), list(sig.outputs.items()), sig.key
        else:
            sg = model.subgraphs[0]
            in_items = [(sg.tensors[i].name, i) for i in sg.inputs]
            out_items, key = [(sg.tensors[i].name, i) for i in sg.outputs], None
        out_names = [n for n, _ in out_items]
        scales = {}  # quantized outputs: real = scale * (q - zero_point), to compare them with float ones
        for name, i in out_items:
            q = sg.tensors[i].quantization
            if q is not None and q.scale is not None and len(q.scale) == 1 and float(q.scale[0]) != 0.0:
                zero = int(q.zero_point[0]) if q.zero_point is not None and len(q.zero_point) else 0
                scales[name] = (float(q.scale[0]), zero)
        inputs = []
        for name, i in in_items:
            t = sg.tensors[i]
            shape_sig = tuple(t.shape_signature) if t.shape_signature is not None else tuple(t.shape)
            inputs.append(InputSpec(name, t.dtype, tuple(int(d) for d in shape_sig)))
        batch_axis = bool(inputs) and all(len(s.signature) >= 1 and s.signature[0] in (-1, 1) for s in inputs)
        dynamic = batch_axis and all(s.signature[0] == -1 for s in inputs)
        stateful = any(model.op_name(op) == "VAR_HANDLE" for _, _, op in model.iter_operators()) or any(
            t.is_variable for g in model.subgraphs for t in g.tensors
        )
        return cls(inputs, out_names, key, batch_axis, dynamic, stateful,
                   "signature input" if key is not None else "input tensor", scales)

    def example_rank(self, spec: InputSpec) -> int:
        return len(spec.signature) - (1 if self.batch_axis else 0)

    def check(self, feeds: Feeds, where: str) -> dict[str, np.ndarray]:
        """The example's arrays, checked against the model: every input given, nothing else,
        exact dtypes, ranks and fixed dimensions. A leading axis of 1 is accepted and dropped
        when the model has a batch axis. Raises InvalidInputError naming ``where`` and the input."""
        if not isinstance(feeds, Mapping):
            raise InvalidInputError(f"{where}: expected a dict of input arrays, got {type(feeds).__name__}")
        names = [s.name for s in self.inputs]
        unknown = sorted(set(feeds) - set(names))
        missing = [n for n in names if n not in feeds]
        if unknown or missing:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unknown {unknown}"] if unknown else [])
            raise InvalidInputError(f"{where}: {', '.join(parts)}; the model's {self.input_names_kind}s are {names}")
        checked = {}
        for spec in self.inputs:
            value = np.asarray(feeds[spec.name])
            rank = self.example_rank(spec)
            if self.batch_axis and value.ndim == rank + 1 and value.shape[:1] == (1,):
                value = value[0]
            want = spec.signature[1:] if self.batch_axis else spec.signature
            if value.dtype != spec.dtype:
                raise InvalidInputError(
                    f"{where}: input {spec.name!r} has dtype {value.dtype}, the model expects {spec.dtype}"
                )
            if value.ndim != rank or any(w != -1 and w != d for w, d in zip(want, value.shape)):
                raise InvalidInputError(
                    f"{where}: input {spec.name!r} has shape {tuple(value.shape)}, the model expects "
                    f"{_shape_text(want)} per example"
                )
            checked[spec.name] = value
        return checked


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join("?" if d == -1 else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def load_model(model: str | os.PathLike | bytes | Model) -> Model:
    if isinstance(model, Model):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return read_model(bytes(model))
    return read_model_file(model)


class ModelRunner:
    """A numlite Interpreter (allocated once per input shape) running examples.

    ``batch_size``: the most examples stacked into one invoke, for a model with a dynamic batch
    axis (1 invokes per example). Stateful models always run one example per invoke.
    """

    def __init__(
        self, model: str | os.PathLike | bytes | Model, signature: str | None = None,
        batch_size: int = 1, num_threads: int | None = None,
    ) -> None:  # fmt: skip
        self.model = load_model(model)
        self.spec = ModelSpec.of(self.model, signature)
        self.interpreter = Interpreter(model_content=self.model, num_threads=num_threads)
        self.batch_size = 1 if self.spec.stateful or not self.spec.dynamic_batch else max(1, int(batch_size))
        self._runner = None
        if self.spec.signature_key is not None:
            self._runner = self.interpreter.get_signature_runner(self.spec.signature_key)
        else:
            self._in = {d["name"]: d["index"] for d in self.interpreter.get_input_details()}
            self._out = [d["index"] for d in self.interpreter.get_output_details()]
        self._shapes: dict[str, tuple[int, ...]] = {}

    def reset(self) -> None:
        """Start a new sequence: the model's state as in a fresh interpreter."""
        self.interpreter.reset_all_variables()

    def invoke(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One invoke on whole input tensors (batch axis included); resizes when shapes change."""
        if self._runner is not None:
            return self._runner(**feeds)
        it = self.interpreter
        shapes = {n: tuple(v.shape) for n, v in feeds.items()}
        if shapes != self._shapes:
            for name, shape in shapes.items():
                it.resize_tensor_input(self._in[name], shape)
            it.allocate_tensors()
            self._shapes = shapes
        for name, value in feeds.items():
            it.set_tensor(self._in[name], value)
        it.invoke()
        return {n: it.get_tensor(i) for n, i in zip(self.spec.outputs, self._out)}

    def run_one(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One checked example in one invoke; its outputs without the batch axis."""
        if not self.spec.batch_axis:
            return self.invoke(feeds)
        out = self.invoke({n: v[np.newaxis] for n, v in feeds.items()})
        return {n: _row(v, 0, 1, n) for n, v in out.items()}

    def run(self, examples: Iterable[tuple[int, Any]], load: Any = None) -> list[Result]:
        """Run ``(index, payload)`` pairs; ``load(index, payload)`` turns a payload into a feed
        dict (a file row read, a failure raised). Consecutive examples of equal shapes are
        stacked up to ``batch_size`` per invoke; a failing example fails alone."""
        results: dict[int, Result] = {}
        ready: list[tuple[int, dict[str, np.ndarray]]] = []
        order = []
        for index, payload in examples:
            order.append(index)
            try:
                feeds = load(index, payload) if load is not None else payload
                ready.append((index, self.spec.check(feeds, f"example {index}")))
            except NumliteError as e:
                results[index] = Result(index, error=_one_line(e))
        for group in _runs_of_equal_shapes(ready, self.batch_size):
            results.update(self._run_group(group))
        return [results[i] for i in order]

    def _run_group(self, group: list[tuple[int, dict[str, np.ndarray]]]) -> dict[int, Result]:
        if len(group) > 1:
            try:
                stacked = self.invoke({n: np.stack([f[n] for _, f in group]) for n in group[0][1]})
                b = len(group)
                if all(v.ndim >= 1 and v.shape[0] == b for v in stacked.values()):
                    return {i: Result(i, {n: _row(v, k, b, n) for n, v in stacked.items()}) for k, (i, _) in enumerate(group)}
            except NumliteError:
                pass  # one example of the group may be at fault: run them one by one to find it
        done = {}
        for index, feeds in group:
            try:
                done[index] = Result(index, self.run_one(feeds))
            except NumliteError as e:
                done[index] = Result(index, error=f"example {index}: {_one_line(e)}")
        return done

    def run_sequence(self, index: int, steps: list[Any], reset: bool) -> Result:
        """Run one sequence's steps in order (state carried from step to step), after
        resetting the state when ``reset``; each output gets a leading step axis."""
        if reset:
            self.reset()
        outs: dict[str, list[np.ndarray]] = {}
        try:
            for t, feeds in enumerate(steps):
                step = self.run_one(self.spec.check(feeds, f"sequence {index}, step {t}"))
                for n, v in step.items():
                    outs.setdefault(n, []).append(v)
            if not steps:
                raise InvalidInputError(f"sequence {index} has no steps")
            return Result(index, {n: _stack(v, f"sequence {index}, output {n!r}") for n, v in outs.items()})
        except NumliteError as e:
            message = _one_line(e)
            return Result(index, error=message if message.startswith("sequence ") else f"sequence {index}: {message}")


def _row(value: np.ndarray, k: int, b: int, name: str) -> np.ndarray:
    if value.ndim == 0 or value.shape[0] != b:
        raise InvalidInputError(f"output {name!r} has shape {value.shape}: no batch axis of {b} to split")
    return np.array(value[k], copy=True)


def _stack(values: list[np.ndarray], where: str) -> np.ndarray:
    if len({(v.shape, v.dtype) for v in values}) != 1:
        raise InvalidInputError(f"{where}: steps gave outputs of different shapes, which cannot be stacked")
    return np.stack(values)


def _runs_of_equal_shapes(ready: list[tuple[int, dict[str, np.ndarray]]], size: int) -> Iterable[list]:
    # Groups never straddle a multiple of ``size`` (by example index), so how examples are
    # chunked between workers, backends or a resumed run never changes which examples share an
    # invoke, and so never changes a bit of the results (a batched matmul rounds differently).
    group: list = []
    for item in ready:
        last = group[-1] if group else None
        if last is not None and (
            last[0] // size != item[0] // size or _shapes(last[1]) != _shapes(item[1]) or len(group) == size
        ):
            yield group
            group = []
        group.append(item)
    if group:
        yield group


def _shapes(feeds: Mapping[str, np.ndarray]) -> tuple:
    return tuple((n, v.shape) for n, v in feeds.items())


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
