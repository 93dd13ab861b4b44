"""Calibration for full-integer quantization: the range of every float activation.

The float model is run by numlite's own interpreter (never TensorFlow) on each sample of the
representative dataset, and the smallest and largest value each float tensor takes over all
samples is recorded -- the global min/max that TFLite's calibrator records too. TensorFlow-free.

The main subgraph's tensors are read after each invoke (every intermediate kept). Tensors of the
subgraphs that control-flow ops call (IF branches, WHILE cond and body, nested to any depth) are
overwritten at each call and iteration, so they are read as each operator finishes, through the
interpreter's per-operator hooks (the profiler's ``before_op``/``after_op``, installed with
``numlite.interpreter.profiler.profile``): a read-only observer, every call and iteration seen.

A sample is what ``tf.lite.TFLiteConverter`` accepts from a ``representative_dataset``
generator: a list (or tuple) of arrays in the order of the model's inputs, a dict keyed by the
signature's input names, or a ``(signature_key, dict)`` pair. Arrays may be NumPy arrays,
``tf.Tensor``s or anything ``np.asarray`` takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from numlite.errors import ConversionError, NumliteError
from numlite.model.ir import Model
from numlite.model.writer import write_model


@dataclass
class Range:
    """The calibrated range of one tensor."""

    min: float
    max: float

    def union(self, other: "Range") -> "Range":
        return Range(min(self.min, other.min), max(self.max, other.max))


Ranges = dict[int, dict[int, Range]]  # subgraph index -> tensor index -> range


def calibrate(model: Model, dataset: Callable[[], Iterable[Any]], subgraphs: Iterable[int] = (0,),
              capture: dict[tuple[int, int], list[list[np.ndarray | None]]] | None = None) -> Ranges:
    """Run the float ``model`` on every sample of ``dataset()``; return the range of each float
    tensor computed at run time (inputs included) in each of ``subgraphs``, by subgraph and
    tensor index. A callee that never ran (a branch never taken) has no ranges.

    ``capture`` maps (subgraph, node) to a list that receives, at each run of that operator, a
    copy of its input arrays (None for omitted inputs): values an operator keeps inside, such as
    a fused LSTM's cell state, are computed from them."""
    from numlite.interpreter.interpreter import Interpreter  # the converter's only use of it
    from numlite.interpreter.profiler import profile

    callees = sorted(set(subgraphs) - {0})
    watched = {s: _watched(model, s) for s in {0, *callees}}
    interpreter = Interpreter(model_content=write_model(model), experimental_preserve_all_tensors=True)
    recorder = _Recorder(model, {s: set(watched[s]) for s in callees}, capture or {})
    samples = 0
    for sample in dataset():
        feeds = _feeds(model, sample, samples)
        recorder.sample = samples
        if callees or capture:
            with profile(interpreter, recorder):  # type: ignore[arg-type]  # a duck-typed observer
                _run(interpreter, feeds, samples)
            recorder.record_folded(interpreter)
        else:
            _run(interpreter, feeds, samples)
        for i in watched[0]:
            recorder.record(0, i, interpreter.get_tensor(i))
        samples += 1
    if samples == 0:
        raise ConversionError("representative_dataset yielded no samples: calibration needs at least one")
    return {s: recorder.ranges.get(s, {}) for s in watched}


def _watched(model: Model, s: int) -> list[int]:
    """The float tensors of subgraph ``s`` computed at run time (no constants, no variables)."""
    sg = model.subgraphs[s]
    return [i for i, t in enumerate(sg.tensors) if t.type == "FLOAT32" and model.constant(sg, i) is None
            and not t.is_variable]


class _Recorder:
    """Collects tensor ranges; as an interpreter observer (the profiler's interface), it reads
    the outputs of every operator of the watched callees when the operator finishes, and the
    callees' inputs before their first operator reads them, and copies the inputs of the
    operators asked for. Never writes anything."""

    def __init__(self, model: Model, watched: dict[int, set[int]],
                 capture: dict[tuple[int, int], list[list[np.ndarray | None]]]) -> None:
        self.model = model
        self.watched = watched
        self.capture = capture
        self.inputs = {s: [i for i in model.subgraphs[s].inputs if i in watched[s]] for s in watched}
        self.ranges: Ranges = {}
        self.sample = 0

    def record(self, s: int, i: int, value: np.ndarray | None) -> None:
        if value is None or value.size == 0:
            return
        if not np.all(np.isfinite(value)):
            where = f"tensor {self.model.subgraphs[s].tensors[i].name!r}" + (f" of subgraph {s}" if s else "")
            raise ConversionError(f"calibration sample {self.sample}: {where} takes a non-finite value; a "
                                  "quantized model cannot represent it")
        seen = Range(float(value.min()), float(value.max()))
        ranges = self.ranges.setdefault(s, {})
        ranges[i] = ranges[i].union(seen) if i in ranges else seen

    def record_folded(self, interpreter: Any) -> None:
        """Outputs the callees computed once at allocation (constant folding): no op runs them."""
        for s, tensors in self.watched.items():
            runtime = interpreter.subgraph(s)
            for step in getattr(runtime, "plan", ()):
                for o in step.outputs if step.folded else ():
                    if o in tensors:
                        self.record(s, o, runtime.arrays[o])

    # -- the interpreter's observer interface (see numlite.interpreter.profiler.Profiler) ---------

    def begin_invoke(self, runtime: Any) -> None:
        pass

    def end_invoke(self, runtime: Any) -> None:
        pass

    def before_op(self, runtime: Any, step: Any) -> None:
        calls = self.capture.get((runtime.index, step.index))
        if calls is not None:
            calls.append([np.array(runtime.arrays[i], copy=True) if i >= 0 else None for i in step.inputs])
        if step is runtime.steps[0] and runtime.index in self.watched:  # a call of the callee begins
            for i in self.inputs[runtime.index]:
                self.record(runtime.index, i, runtime.arrays[i])

    def after_op(self, runtime: Any, step: Any) -> None:
        tensors = self.watched.get(runtime.index)
        if tensors is not None:
            for o in step.outputs:
                if o in tensors:
                    self.record(runtime.index, o, runtime.arrays[o])


def _feeds(model: Model, sample: Any, number: int) -> dict[int, np.ndarray]:
    """The input tensor index -> value of one dataset sample."""
    sg = model.subgraphs[0]
    where = f"representative_dataset sample {number}"
    if isinstance(sample, tuple) and len(sample) == 2 and isinstance(sample[0], str) and isinstance(sample[1], dict):
        key, sample = sample
        if key not in {s.key for s in model.signature_defs}:
            raise ConversionError(f"{where}: the model has no signature {key!r}")
    if isinstance(sample, dict):
        names = next((s.inputs for s in model.signature_defs if s.subgraph_index == 0), None)
        if names is None:
            names = {sg.tensors[i].name: i for i in sg.inputs}
        unknown = set(sample) - set(names)
        missing = set(names) - set(sample)
        if unknown or missing:
            raise ConversionError(f"{where}: input names {sorted(sample)} do not match the signature's "
                                  f"{sorted(names)}")
        return {names[k]: _array(v, where) for k, v in sample.items()}
    if isinstance(sample, np.ndarray) or not isinstance(sample, (list, tuple)):
        sample = [sample]  # a lone array for a one-input model (tf.lite accepts it too)
    if len(sample) != len(sg.inputs):
        raise ConversionError(f"{where} has {len(sample)} arrays; the model has {len(sg.inputs)} inputs")
    return {i: _array(v, where) for i, v in zip(sg.inputs, sample)}


def _array(value: Any, where: str) -> np.ndarray:
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    if array.dtype == np.float64:
        array = array.astype(np.float32)  # NumPy's default; TF's calibrator casts alike
    return array


def _run(interpreter: Any, feeds: dict[int, np.ndarray], number: int) -> None:
    try:
        details = {d["index"]: d for d in interpreter.get_input_details()}
        resized = False
        for index, value in feeds.items():
            if tuple(details[index]["shape"]) != value.shape:
                interpreter.resize_tensor_input(index, value.shape)
                resized = True
        if resized or number == 0:
            interpreter.allocate_tensors()
        for index, value in feeds.items():
            interpreter.set_tensor(index, value.astype(details[index]["dtype"], copy=False)
                                   if value.dtype.kind == np.dtype(details[index]["dtype"]).kind else value)
        interpreter.invoke()
    except (NumliteError, ValueError) as e:
        raise ConversionError(f"calibration failed on representative_dataset sample {number}: {e}") from e
