"""Shared test machinery: build models with the official converter and compare numlite with LiteRT.

Every model is built at test time from a small tf.function or Keras model and converted with
``tf.lite.TFLiteConverter``; conversions are cached for the session, keyed by what built them.
Expected values always come from LiteRT (``ai_edge_litert``) or TensorFlow, never from numlite.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

import numlite

_MODELS: dict[Any, bytes] = {}


def _closure_key(fn: Callable) -> tuple:
    cells = fn.__closure__ or ()
    values = []
    for c in cells:
        v = c.cell_contents
        values.append(v.tobytes() if isinstance(v, np.ndarray) else repr(v))
    code = fn.__code__  # two lambdas in one test function share a qualname, never their code
    return (fn.__module__, fn.__qualname__, code.co_firstlineno, code.co_code, repr(code.co_consts), tuple(values))


def convert(fn: Callable, specs: Sequence[tf.TensorSpec], key: Any = None, **converter_options: Any) -> bytes:
    """Convert ``fn(*tensors)`` with the official converter (cached for the session).

    ``specs`` are the input signature; ``key`` names the model in the cache (by default the
    function and the values it closes over, plus the specs).
    """
    cache_key = (key if key is not None else _closure_key(fn), repr(list(specs)), repr(sorted(converter_options.items())))
    if cache_key not in _MODELS:
        func = tf.function(fn, input_signature=list(specs), autograph=False)
        concrete = func.get_concrete_function()
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], func)
        for name, value in converter_options.items():
            setattr(converter, name, value)
        _MODELS[cache_key] = converter.convert()
    return _MODELS[cache_key]


def convert_keras(build: Callable[[], tf.keras.Model], key: Any) -> bytes:
    """Convert a Keras model made by ``build()`` (cached for the session under ``key``)."""
    if key not in _MODELS:
        converter = tf.lite.TFLiteConverter.from_keras_model(build())
        _MODELS[key] = converter.convert()
    return _MODELS[key]


def random_inputs(model: bytes, seed: int = 0, low: float = -2.0, high: float = 2.0) -> list[np.ndarray]:
    """Seeded random values for every input of a model, in input-details order."""
    rng = np.random.default_rng(seed)
    details = LiteRTInterpreter(model_content=model).get_input_details()
    values = []
    for d in details:
        shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
        if dtype.kind == "f":
            values.append(rng.uniform(low, high, shape).astype(dtype))
        elif dtype.kind == "b":
            values.append(rng.random(shape) < 0.5)
        else:
            values.append(rng.integers(int(low) - 3, int(high) + 4, shape).astype(dtype))
    return values


def seeded_values(shape: Sequence[int], dtype: Any, seed: int = 0, int_range: tuple[int, int] = (-50, 100)) -> np.ndarray:
    """Seeded inputs of order one (floats in [-2, 2], integers in ``int_range``, random bools)."""
    rng = np.random.default_rng(seed)
    dtype = tf.as_dtype(dtype)
    if dtype.is_floating:
        return rng.uniform(-2, 2, shape).astype(dtype.as_numpy_dtype)
    if dtype == tf.bool:
        return rng.random(shape) < 0.5
    low = 0 if dtype.is_unsigned else int_range[0]
    return rng.integers(low, int_range[1], shape).astype(dtype.as_numpy_dtype)


def run_interpreter(interpreter: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Resize (if needed), allocate, set every input, invoke; return every output."""
    details = interpreter.get_input_details()
    assert len(details) == len(inputs), f"model has {len(details)} inputs, test gave {len(inputs)}"
    for d, value in zip(details, inputs):
        if tuple(d["shape"]) != value.shape:
            interpreter.resize_tensor_input(d["index"], value.shape)
    interpreter.allocate_tensors()
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def litert_interpreter(model: bytes, builtin_only: bool = False, **kwargs: Any) -> LiteRTInterpreter:
    """LiteRT's interpreter; ``builtin_only`` turns off the default XNNPACK delegate, which
    absorbs some ops (DEQUANTIZE of weights) and differs from LiteRT's own kernels at edges."""
    if builtin_only:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    return LiteRTInterpreter(model_content=model, **kwargs)


def run_litert(model: bytes, inputs: Sequence[np.ndarray], builtin_only: bool = False) -> list[np.ndarray]:
    return run_interpreter(litert_interpreter(model, builtin_only), inputs)


def run_by_name(interpreter_class: Any, model: bytes, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    """Run ``model`` in ``interpreter_class`` (numlite's or LiteRT's) feeding and fetching tensors
    by name, resizing inputs whose shape differs from the model's."""
    it = interpreter_class(model_content=model)
    details = {d["name"]: d for d in it.get_input_details()}
    for name, value in inputs.items():
        if tuple(details[name]["shape"]) != value.shape:
            it.resize_tensor_input(details[name]["index"], value.shape)
    it.allocate_tensors()
    for name, value in inputs.items():
        it.set_tensor(details[name]["index"], value)
    it.invoke()
    by_name = {d["name"]: d for d in it.get_output_details()}
    return [it.get_tensor(by_name[name]["index"]) for name in outputs]


def run_numlite(model: bytes, inputs: Sequence[np.ndarray], **kwargs: Any) -> list[np.ndarray]:
    return run_interpreter(numlite.Interpreter(model_content=model, **kwargs), inputs)


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5, what: str = "") -> None:
    """Floats within tolerance (NaNs in the same places), integers and bools exactly equal."""
    assert actual.dtype == expected.dtype, f"{what}dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def assert_matches_litert(
    model: bytes,
    inputs: Sequence[np.ndarray] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    seed: int = 0,
    builtin_only: bool = False,
) -> list[np.ndarray]:
    """Run ``model`` in numlite and LiteRT on the same inputs and compare every output.

    Returns LiteRT's outputs so that a test can also check them against TensorFlow.
    """
    if inputs is None:
        inputs = random_inputs(model, seed)
    expected = run_litert(model, inputs, builtin_only)
    actual = run_numlite(model, inputs)
    assert len(actual) == len(expected)
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, e, rtol, atol, what=f"output {k}: ")
    return expected


def op_names(model: bytes) -> list[str]:
    """The operators of subgraph 0, to check that a test exercises the op it means to."""
    m = numlite.model.read_model(model)
    return [m.op_name(op) for op in m.subgraphs[0].operators]


# -- numlite's converter ------------------------------------------------------------------------

_NUMLITE_MODELS: dict[Any, bytes] = {}


def numlite_convert(fn: Callable, specs: Sequence[tf.TensorSpec], key: Any = None) -> tuple[bytes, Any]:
    """Convert ``fn(*tensors)`` with numlite's converter; returns the model and the concrete
    function it came from (cached for the session like ``convert``)."""
    cache_key = (key if key is not None else _closure_key(fn), repr(list(specs)), "numlite")
    if cache_key not in _NUMLITE_MODELS:
        concrete = tf.function(fn, input_signature=list(specs), autograph=False).get_concrete_function()
        _NUMLITE_MODELS[cache_key] = (numlite.TFLiteConverter.from_concrete_functions([concrete]).convert(), concrete)
    return _NUMLITE_MODELS[cache_key]


def tf_outputs(concrete: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """TensorFlow's own results, flattened in the order of the converted model's outputs."""
    return [np.asarray(t) for t in tf.nest.flatten(concrete(*[tf.constant(x) for x in inputs]))]


def assert_converts(
    fn: Callable,
    specs: Sequence[tf.TensorSpec],
    inputs: Sequence[np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-5,
    key: Any = None,
    reference: Callable | None = None,
) -> bytes:
    """Convert ``fn`` with numlite, run the model in numlite and in LiteRT, and check that both
    give TensorFlow's results on ``inputs``. Returns the model. ``reference``, when given, is the
    TF function whose results are expected (the same math, where TF's kernel for ``fn``'s op is
    missing on this machine)."""
    model, concrete = numlite_convert(fn, specs, key)
    if reference is not None:
        concrete = tf.function(reference, input_signature=list(specs), autograph=False).get_concrete_function()
    expected = tf_outputs(concrete, inputs)
    for runtime, run in (("numlite", run_numlite), ("LiteRT", run_litert)):
        actual = run(model, inputs)
        assert len(actual) == len(expected), f"{runtime}: {len(actual)} outputs, TF has {len(expected)}"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol, atol, what=f"{runtime} output {k}: ")
    return model


def all_op_names(model: bytes) -> list[str]:
    """The operators of every subgraph."""
    m = numlite.model.read_model(model)
    return [m.op_name(op) for _, _, op in m.iter_operators()]


def check_conversion(fn: Callable, specs: Sequence[tf.TensorSpec], inputs: Sequence[np.ndarray], ops: Sequence[str],
                     **tolerances: Any) -> list[str]:
    """``assert_converts``, and check that the model has every op in ``ops`` (so that a test
    exercises the lowering it means to); returns the model's op names."""
    names = all_op_names(assert_converts(fn, specs, inputs, **tolerances))
    missing = [op for op in ops if op not in names]
    assert not missing, f"{missing} not in the model's ops {names}"
    return names


def conversion_error(fn: Callable, specs: Sequence[tf.TensorSpec]) -> str:
    """The message of the ConversionError that converting ``fn`` with numlite raises."""
    import pytest

    concrete = tf.function(fn, input_signature=list(specs), autograph=False).get_concrete_function()
    with pytest.raises(numlite.ConversionError) as info:
        numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()
    return str(info.value)
