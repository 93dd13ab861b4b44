"""Custom ops written in Python: ``numlite.Interpreter(custom_ops={name: function or Kernel class})``.

The models come from the official converter: a ``tf.function`` with an ``experimental_implements``
signature carrying ``tfl_fusable_op`` becomes one CUSTOM op named by the signature, its other
attributes stored as flexbuffer ``custom_options`` (the spec's operation-fusion example). LiteRT
refuses such a model without a registered C++ op; numlite runs it with a Python one. Expected
values come from TensorFlow: the layers feeding the fused op, or the composite's own body.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from flatbuffers import flexbuffers

import numlite
from numlite.kernels import KERNELS, Kernel, Spec
from numlite.kernels.custom import python_op
from numlite.model import read_model, write_model

from helpers import assert_close, convert, litert_interpreter, op_names, run_numlite, seeded_values, tf_outputs

FUSED = "my_custom_fused_op"
OPTION = 10
IMAGE = tf.TensorSpec([1, 28, 28, 3], tf.float32)


def _implements(name: str, **int_attrs: int) -> str:
    """An implements signature in the spec's form: a fusable op with integer attributes."""
    attrs = " ".join(f'attr {{key: "{k}" value {{ i: {v} }} }}' for k, v in int_attrs.items())
    return f'name: "{name}" attr {{key: "tfl_fusable_op" value {{ b: true }} }} {attrs}'


@tf.function(experimental_implements=_implements(FUSED, example_option=OPTION))
def my_custom_fused_op(input_1, input_2):
    # As in the spec: the body stands for processing the graph does not express.
    return tf.constant(0.0, tf.float32, name="first_output"), tf.constant(0.0, tf.float32, name="second_output")


class SpecModel(tf.Module):
    """The spec's example module: two Conv2D layers feeding the fused op."""

    def __init__(self) -> None:
        super().__init__()
        tf.keras.utils.set_random_seed(0)
        self.conv_1 = tf.keras.layers.Conv2D(filters=1, kernel_size=(3, 3), bias_initializer="glorot_uniform")
        self.conv_2 = tf.keras.layers.Conv2D(filters=1, kernel_size=(3, 3), bias_initializer="glorot_uniform")
        for layer in (self.conv_1, self.conv_2):
            layer.build(IMAGE.shape)
        # tf.Module does not track Keras 3 layers; tracking their variables lets the converter
        # freeze them (otherwise it emits variables without initial values).
        self.tracked = [w.value for w in self.conv_1.weights + self.conv_2.weights]

    @tf.function(input_signature=[IMAGE, IMAGE])
    def simple_eval(self, input_a, input_b):
        return my_custom_fused_op(self.conv_1(input_a), self.conv_2(input_b))


@pytest.fixture(scope="module")
def spec_model() -> tuple[bytes, SpecModel]:
    module = SpecModel()
    concrete = module.simple_eval.get_concrete_function()
    return tf.lite.TFLiteConverter.from_concrete_functions([concrete], module).convert(), module


def _images(seed: int = 0) -> list[np.ndarray]:
    return [seeded_values(IMAGE.shape, tf.float32, seed), seeded_values(IMAGE.shape, tf.float32, seed + 1)]


def _conv_outputs(module: SpecModel, images: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """What TensorFlow feeds the fused op."""
    return module.conv_1(images[0]).numpy(), module.conv_2(images[1]).numpy()


def _by_signature(interpreter: numlite.Interpreter, images: list[np.ndarray]) -> list[np.ndarray]:
    """The model's outputs in the Python op's order (``output_0``, ``output_1``)."""
    result = interpreter.get_signature_runner()(input_a=images[0], input_b=images[1])
    return [result["output_0"], result["output_1"]]


def _fused_node(model: bytes) -> int:
    return op_names(model).index(FUSED)


def test_official_converter_emits_the_fused_op_with_its_option(spec_model):
    model, _ = spec_model
    m = read_model(model)
    fused = [op for op in m.subgraphs[0].operators if m.op_name(op) == FUSED]
    assert len(fused) == 1 and m.operator_codes[fused[0].opcode_index].builtin == "CUSTOM"
    assert flexbuffers.Loads(fused[0].custom_options) == {"example_option": OPTION}


def test_spec_example_runs_with_a_python_function(spec_model):
    model, module = spec_model
    seen = []

    def fused(input_1, input_2, example_option):
        seen.append(example_option)
        # Declared as scalars by the composite's outputs, so the op returns scalars.
        return np.max(input_1 * input_2) * example_option, np.mean(input_1**2 + input_2**2) / example_option

    interpreter = numlite.Interpreter(model_content=model, custom_ops={FUSED: fused})
    for seed in (0, 5):
        images = _images(seed)
        a, b = _conv_outputs(module, images)
        expected = [np.max(a * b) * OPTION, np.mean(a**2 + b**2) / OPTION]
        for k, (actual, want) in enumerate(zip(_by_signature(interpreter, images), expected)):
            assert_close(actual, np.asarray(want, np.float32), what=f"seed {seed} output {k}: ")
    assert seen == [OPTION, OPTION]


def test_litert_refuses_the_spec_model_naming_the_custom_op(spec_model):
    model, _ = spec_model
    interpreter = litert_interpreter(model)
    with pytest.raises(RuntimeError, match=f"unresolved custom op: {FUSED}"):
        interpreter.allocate_tensors()


def test_unregistered_custom_op_fails_at_allocation_naming_it(spec_model):
    model, _ = spec_model
    interpreter = numlite.Interpreter(model_content=model)
    with pytest.raises(numlite.UnsupportedOperatorError) as info:
        interpreter.allocate_tensors()
    assert f"custom op {FUSED} (subgraph 0, node {_fused_node(model)})" in str(info.value)
    assert "custom_ops=" in str(info.value)  # says how to fix it


def test_result_contradicting_a_static_output_names_the_node(spec_model):
    model, _ = spec_model
    full_tensors = lambda x, y, example_option: (x * example_option + y, x - y)  # noqa: E731
    wrong_dtype = lambda x, y, example_option: (np.float64(x.max()), np.float32(0))  # noqa: E731
    for fn, problem in ((full_tensors, r"has shape \(1, 26, 26, 1\) but .* static shape \(\)"), (wrong_dtype, "float64")):
        interpreter = numlite.Interpreter(model_content=model, custom_ops={FUSED: fn})
        with pytest.raises(numlite.InvokeError, match=rf"subgraph 0, node {_fused_node(model)} \({FUSED}\).*{problem}"):
            _by_signature(interpreter, _images())


def test_dynamic_python_op_ignores_placeholder_shapes(spec_model):
    """The spec's composite declares dummy scalar outputs; python_op(dynamic=True) takes the
    shapes from the results instead."""
    model, module = spec_model
    fused = python_op(lambda x, y, example_option: (x * example_option + y, np.maximum(x, y)), dynamic=True)
    interpreter = numlite.Interpreter(model_content=model, custom_ops={FUSED: fused})
    images = _images(2)
    a, b = _conv_outputs(module, images)
    actual = _by_signature(interpreter, images)
    assert_close(actual[0], a * OPTION + b)
    assert_close(actual[1], np.maximum(a, b))


def test_function_that_cannot_take_the_options_fails_at_allocation(spec_model):
    model, _ = spec_model
    interpreter = numlite.Interpreter(model_content=model, custom_ops={FUSED: lambda x, y: (x, y)})
    with pytest.raises(numlite.PrepareError, match=rf"node {_fused_node(model)} \({FUSED}\).*example_option"):
        interpreter.allocate_tensors()


class FusedKernel(Kernel):
    """The class form: prepare sizes the outputs (like a LiteRT custom op resizing its
    outputs), eval fills the arrays the runtime preallocated."""

    filled: list[np.ndarray] = []

    def prepare(self, ins):
        self.expect_inputs(ins, 2)
        if ins[0].shape != ins[1].shape:
            raise self.fail(f"inputs differ in shape: {ins[0].shape} and {ins[1].shape}")
        self.scale = np.float32(self.custom_options["example_option"])
        declared = self.declared_outputs()
        assert [d.dtype for d in declared] == [np.dtype(np.float32)] * 2  # the model's metadata
        return [Spec(ins[0].shape, ins[0].dtype), Spec((), ins[0].dtype)]

    def eval(self, ins, outs):
        np.multiply(ins[0], self.scale, out=outs[0])
        outs[0] += ins[1]
        outs[1][...] = np.max(ins[0] * ins[1])
        FusedKernel.filled = list(outs)


def test_kernel_class_fills_preallocated_outputs(spec_model):
    model, module = spec_model
    interpreter = numlite.Interpreter(model_content=model, custom_ops={FUSED: FusedKernel})
    images = _images(3)
    a, b = _conv_outputs(module, images)
    actual = _by_signature(interpreter, images)
    assert_close(actual[0], a * OPTION + b)
    assert_close(actual[1], np.max(a * b))
    outputs = {d["name"]: d["index"] for d in interpreter.get_output_details()}
    first = interpreter.get_signature_runner().get_output_details()["output_0"]["index"]
    assert first in outputs.values()
    assert np.shares_memory(FusedKernel.filled[0], interpreter.tensor(first)())  # written in place


def test_raw_custom_options_and_non_map_options(spec_model):
    """Options that are not a flexbuffer map give a function no keyword arguments; the class
    form still sees the raw bytes."""
    model, _ = spec_model
    m = read_model(model)
    node = _fused_node(model)
    raw = flexbuffers.Dumps([1, 2, 3])
    m.subgraphs[0].operators[node].custom_options = raw
    edited = write_model(m)
    calls = []

    def fused(x, y, **options):
        calls.append(options)
        return np.float32(1), np.float32(2)

    numlite.Interpreter(model_content=edited, custom_ops={FUSED: fused}).get_signature_runner()(
        input_a=_images()[0], input_b=_images()[1]
    )
    assert calls == [{}]

    class Raw(FusedKernel):
        def prepare(self, ins):
            assert self.custom_options == {} and self.node.custom_options == raw
            return [Spec(ins[0].shape, ins[0].dtype), Spec((), ins[0].dtype)]

    numlite.Interpreter(model_content=edited, custom_ops={FUSED: Raw}).allocate_tensors()


# -- a custom op whose output shape depends on data ---------------------------------------------------


@tf.function(experimental_implements=_implements("keep_above", tenths=5))
def keep_above(x):
    return tf.boolean_mask(x, x > 0.5)


class KeepAboveModel(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def run(self, x):
        return keep_above(x) * 2.0 + 1.0


def test_python_op_with_a_data_dependent_output_shape():
    """The output's shape signature is (-1,): allocated from the result at each invoke, and the
    ops after it are prepared again for it."""
    # The official converter keeps the composite from a tf.Module's method (it inlines it when
    # converting a bare tf.function).
    module = KeepAboveModel()
    concrete = module.run.get_concrete_function()
    model = tf.lite.TFLiteConverter.from_concrete_functions([concrete], module).convert()
    assert "keep_above" in op_names(model)
    m = read_model(model)
    fused = next(op for op in m.subgraphs[0].operators if m.op_name(op) == "keep_above")
    assert m.subgraphs[0].tensors[fused.outputs[0]].shape_signature == (-1,)

    def keep(x, tenths):
        return x[x > tenths / 10]

    interpreter = numlite.Interpreter(model_content=model, custom_ops={"keep_above": keep})
    for seed, n in ((0, 7), (1, 40), (2, 1)):
        x = seeded_values([n], tf.float32, seed)
        interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [n])
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        (expected,) = tf_outputs(concrete, [x])
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected, what=f"n={n}: ")


# -- overriding a builtin kernel ----------------------------------------------------------------------


def test_python_function_overrides_a_builtin_kernel():
    """ADD with a fused RELU: the function gets ADD's options, so it can honour the activation."""
    model = convert(lambda a, b: tf.nn.relu(a + b), [tf.TensorSpec([4, 5], tf.float32)] * 2)
    assert op_names(model) == ["ADD"]
    calls = []

    def my_add(a, b, fused_activation_function, **_):
        calls.append(fused_activation_function)
        total = np.add(a, b)
        return np.maximum(total, 0) if fused_activation_function == 1 else total  # 1: RELU

    inputs = [seeded_values([4, 5], tf.float32, 0), seeded_values([4, 5], tf.float32, 1)]
    (actual,) = run_numlite(model, inputs, custom_ops={"ADD": my_add})
    assert calls == [1]
    assert_close(actual, tf.nn.relu(inputs[0] + inputs[1]).numpy())
    assert KERNELS["ADD"].__module__ == "numlite.kernels.binary"  # only that interpreter changed


def test_custom_ops_table_is_checked():
    model = convert(lambda a: a * 2.0, [tf.TensorSpec([3], tf.float32)])
    with pytest.raises(numlite.InvalidInputError, match="'MUL'.*not a numlite.kernels.Kernel subclass"):
        numlite.Interpreter(model_content=model, custom_ops={"MUL": dict})
    with pytest.raises(numlite.InvalidInputError, match="'MUL'.*expected a function or a Kernel class"):
        numlite.Interpreter(model_content=model, custom_ops={"MUL": 3})
    with pytest.raises(numlite.InvalidInputError, match="both custom_ops and custom_kernels"):
        numlite.Interpreter(model_content=model, custom_ops={"MUL": np.multiply}, custom_kernels={"MUL": np.multiply})
