"""Calibration for full-integer quantization: the range of every float activation.

The float model is run by numlite's own interpreter (never TensorFlow) on each sample of the
representative dataset, with every intermediate tensor kept, and the smallest and largest value
each float tensor of the main subgraph takes over all samples is recorded -- the global min/max
that TFLite's calibrator records too. TensorFlow-free.

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


def calibrate(model: Model, dataset: Callable[[], Iterable[Any]]) -> dict[int, Range]:
    """Run the float ``model`` on every sample of ``dataset()``; return the range of each float
    tensor of subgraph 0 that is computed at run time (inputs included), by tensor index."""
    from numlite.interpreter.interpreter import Interpreter  # the converter's only use of it

    sg = model.subgraphs[0]
    watched = [i for i, t in enumerate(sg.tensors) if t.type == "FLOAT32" and model.constant(sg, i) is None
               and not t.is_variable]
    interpreter = Interpreter(model_content=write_model(model), experimental_preserve_all_tensors=True)
    ranges: dict[int, Range] = {}
    samples = 0
    for sample in dataset():
        feeds = _feeds(model, sample, samples)
        _run(interpreter, feeds, samples)
        for i in watched:
            value = interpreter.get_tensor(i)
            if value.size == 0:
                continue
            if not np.all(np.isfinite(value)):
                raise ConversionError(f"calibration sample {samples}: tensor {sg.tensors[i].name!r} takes a "
                                      "non-finite value; a quantized model cannot represent it")
            seen = Range(float(value.min()), float(value.max()))
            ranges[i] = ranges[i].union(seen) if i in ranges else seen
        samples += 1
    if samples == 0:
        raise ConversionError("representative_dataset yielded no samples: calibration needs at least one")
    return ranges


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
