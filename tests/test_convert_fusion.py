"""Operation fusion in numlite's converter: composite functions (``experimental_implements``)
replaced by fused ops before inlining, the ``numlite.fusion`` registry, ``tfl_fusable_op``
custom ops with the official converter's ``custom_options``, and pattern fusions of raw tf.nn
ops (convolution / matmul + bias + activation, batch norm, scales) checked by operator counts
and by outputs against TensorFlow, in numlite and in LiteRT.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers import (all_op_names, assert_close, assert_converts, litert_interpreter, run_litert, run_numlite,
                     seeded_values)

import numlite
import numlite.fusion
from numlite.model import read_model


def f32(*shape):
    return tf.TensorSpec(shape, tf.float32)


def weights(shape, seed, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(np.float32)


def signature(name, **attrs):
    """An implements signature in the spec's text form, with ``tfl_fusable_op`` unless given."""
    parts = [f'name: "{name}"']
    for key, value in attrs.items():
        parts.append(f"attr {{key: \"{key}\" value {{ {value} }} }}")
    return " ".join(parts)


def convert_module(module, method, official=False):
    """Convert ``module.method`` (a tf.function with an input signature) with numlite (returns
    the bytes and the report) or with the official converter (the bytes)."""
    concrete = method.get_concrete_function()
    if official:  # with the module as trackable, it keeps functions (and so fuses) as numlite does
        return tf.lite.TFLiteConverter.from_concrete_functions([concrete], module).convert()
    converter = numlite.TFLiteConverter.from_concrete_functions([concrete], module)
    return converter.convert(), converter.report


def operators(model):
    """(op name, operator) of subgraph 0, and the model."""
    m = read_model(model)
    return [(m.op_name(op), op) for op in m.subgraphs[0].operators], m


def custom_op(model, name):
    ops, m = operators(model)
    found = [op for n, op in ops if n == name]
    assert len(found) == 1, [n for n, _ in ops]
    return found[0], m


def litert_refuses(model, name):
    """LiteRT loads the file and refuses to allocate it for want of the custom op ``name``."""
    interpreter = litert_interpreter(model, builtin_only=True)
    with pytest.raises(RuntimeError, match=name):
        interpreter.allocate_tensors()


@pytest.fixture
def registry():
    """Fusions a test registers are forgotten afterwards."""
    before = set(numlite.fusion.registered())
    yield numlite.fusion
    for name in set(numlite.fusion.registered()) - before:
        numlite.fusion.unregister(name)


# -- the spec's tfl_fusable_op example -----------------------------------------------------------

SPEC_SIGNATURE = signature("my_custom_fused_op", tfl_fusable_op="b: true", example_option="i: 10")


@tf.function(experimental_implements=SPEC_SIGNATURE)
def my_custom_fused_op(input_1, input_2):
    # Stands for processing the TF graph does not express: the fused op does it.
    output_1 = tf.constant(0.0, dtype=tf.float32, name="first_output")
    output_2 = tf.constant(0.0, dtype=tf.float32, name="second_output")
    return output_1, output_2


class SpecModel(tf.Module):
    def __init__(self):
        super().__init__()
        self.conv_1 = tf.keras.layers.Conv2D(filters=1, kernel_size=(3, 3))
        self.conv_2 = tf.keras.layers.Conv2D(filters=1, kernel_size=(3, 3))

    @tf.function(input_signature=[f32(1, 28, 28, 3), f32(1, 28, 28, 3)])
    def simple_eval(self, input_a, input_b):
        return my_custom_fused_op(self.conv_1(input_a), self.conv_2(input_b))


@pytest.fixture(scope="module")
def spec_models():
    tf.keras.utils.set_random_seed(0)
    module = SpecModel()
    model, report = convert_module(module, module.simple_eval)
    return module, model, report, convert_module(module, module.simple_eval, official=True)


def test_spec_example_becomes_one_custom_op_with_official_options(spec_models):
    _, model, report, official = spec_models
    assert sorted(all_op_names(model)) == ["CONV_2D", "CONV_2D", "my_custom_fused_op"]
    op, m = custom_op(model, "my_custom_fused_op")
    official_op, official_m = custom_op(official, "my_custom_fused_op")
    assert op.custom_options == official_op.custom_options
    assert m.operator_codes[op.opcode_index].builtin == "CUSTOM"
    # Two inputs (the convolutions), two outputs of the function's result type (float32 scalars).
    assert len(op.inputs) == 2 and len(op.outputs) == 2
    sg = m.subgraphs[0]
    producers = {t for o in sg.operators for t in o.outputs if m.op_name(o) == "CONV_2D"}
    assert set(op.inputs) == producers
    assert [(sg.tensors[t].type, tuple(sg.tensors[t].shape)) for t in op.outputs] == [("FLOAT32", ())] * 2
    assert report.fusions == {"my_custom_fused_op": 1}
    assert "fusions: my_custom_fused_op x1" in str(report)


def test_spec_example_loads_in_litert_which_lacks_the_op(spec_models):
    litert_refuses(spec_models[1], "my_custom_fused_op")


def test_spec_example_runs_in_numlite_with_a_python_op(spec_models):
    module, model, _, _ = spec_models

    def fused(a, b, example_option):
        return np.float32(a.max() * example_option), np.float32(b.min())

    x = seeded_values((1, 28, 28, 3), tf.float32, 1)
    y = seeded_values((1, 28, 28, 3), tf.float32, 2)
    first, second = run_numlite(model, [x, y], custom_ops={"my_custom_fused_op": fused})
    assert_close(first, np.float32(module.conv_1(x).numpy().max() * 10))
    assert_close(second, np.float32(module.conv_2(y).numpy().min()))


def test_custom_options_of_every_attribute_kind_match_the_official_converter():
    attrs = dict(tfl_fusable_op="b: true", small="i: 3", negative="i: -7", wide="i: 5000000000",
                 ratio="f: 0.1", half="f: 0.5", label='s: "hello"', on="b: true", off="b: false")

    @tf.function(experimental_implements=signature("kinds_op", **attrs))
    def kinds_op(x):
        return x * 2.0

    class Module(tf.Module):
        @tf.function(input_signature=[f32(2, 3)])
        def f(self, x):
            return kinds_op(x + 1.0)

    module = Module()
    model, _ = convert_module(module, module.f)
    op, _ = custom_op(model, "kinds_op")
    official_op, _ = custom_op(convert_module(module, module.f, official=True), "kinds_op")
    assert op.custom_options == official_op.custom_options


def test_unsupported_attribute_kind_is_refused_naming_the_function():
    @tf.function(experimental_implements=signature("list_op", tfl_fusable_op="b: true", sizes="list { i: [1, 2] }"))
    def list_op(x):
        return x * 2.0

    class Module(tf.Module):
        @tf.function(input_signature=[f32(2)])
        def f(self, x):
            return list_op(x)

    module = Module()
    with pytest.raises(numlite.ConversionError, match=r"list_op.*'sizes'.*kind 'list'"):
        convert_module(module, module.f)


def test_an_unclaimed_composite_is_inlined():
    @tf.function(experimental_implements="nobody_fuses_this")
    def composite(x):
        return tf.nn.relu(x) * 3.0

    model = assert_converts(lambda x: composite(x) + 1.0, [f32(4)], [seeded_values((4,), tf.float32)])
    assert "CUSTOM" not in all_op_names(model) and "nobody_fuses_this" not in all_op_names(model)


# -- embedding lookup ---------------------------------------------------------------------------

TABLE = weights((10, 3), 7, 1.0)


def embedding_module(name, ids_dtype=tf.int32, ids_shape=(None,)):
    @tf.function(experimental_implements=name)
    def lookup(embs, ids_vec):
        return tf.gather(embs, ids_vec)

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.table = tf.Variable(TABLE)

        @tf.function(input_signature=[tf.TensorSpec(ids_shape, ids_dtype)])
        def f(self, ids):
            return lookup(self.table, ids)

    return Module()


@pytest.mark.parametrize("name", ["embedding_lookup", "embedding_matmul"])
def test_embedding_lookup_fuses_to_one_op_matching_tf(name):
    module = embedding_module(name)
    model, report = convert_module(module, module.f)
    assert all_op_names(model) == ["EMBEDDING_LOOKUP"]
    assert report.fusions == {name: 1}
    ids = np.array([3, 0, 9, 3, 5], np.int32)
    expected = module.f(ids).numpy()
    for run in (run_numlite, run_litert):
        (actual,) = run(model, [ids])
        assert_close(actual, expected, what=f"{run.__name__}: ")


def test_embedding_lookup_operands_as_the_official_converter_orders_them():
    module = embedding_module("embedding_matmul")  # the name the official converter fuses

    def operands(model):
        """The only op's name and its operands: (type, rank, constant?) of each."""
        ops, m = operators(model)
        assert len(ops) == 1, [n for n, _ in ops]
        (name, op), sg = ops[0], m.subgraphs[0]
        return name, [(sg.tensors[t].type, len(sg.tensors[t].shape), m.constant(sg, t) is not None) for t in op.inputs]

    ours = operands(convert_module(module, module.f)[0])
    theirs = operands(convert_module(module, module.f, official=True))
    assert ours == theirs == ("EMBEDDING_LOOKUP", [("INT32", 1, False), ("FLOAT32", 2, True)])


def test_embedding_lookup_fuses_in_a_saved_model(tmp_path):
    """A loaded SavedModel's functions read variables of unknown shape; the fusion still sees
    the table's shape (from the variable) and the lookup still fuses."""
    module = embedding_module("embedding_lookup")
    tf.saved_model.save(module, str(tmp_path), signatures=module.f.get_concrete_function())
    converter = numlite.TFLiteConverter.from_saved_model(str(tmp_path))
    model = converter.convert()
    assert all_op_names(model) == ["EMBEDDING_LOOKUP"] and converter.report.fusions == {"embedding_lookup": 1}
    ids = np.array([9, 2, 2], np.int32)
    for run in (run_numlite, run_litert):
        (actual,) = run(model, [ids])
        assert_close(actual, module.f(ids).numpy(), what=f"{run.__name__}: ")


@pytest.mark.parametrize("ids_dtype, ids_shape, message", [
    (tf.int64, (4,), "ids .*must be int32"),
    (tf.int32, (2, 4), "ids .*must be a vector"),
])
def test_embedding_lookup_contract_violations_name_the_function(ids_dtype, ids_shape, message):
    module = embedding_module("embedding_lookup", ids_dtype, ids_shape)
    expected = f"function '.*lookup.*' .*implements 'embedding_lookup', but the {message}"
    with pytest.raises(numlite.ConversionError, match=expected):
        convert_module(module, module.f)


# -- user-registered fusions ---------------------------------------------------------------------

LN_SIGNATURE = signature("test_layer_norm", epsilon="f: 0.001")


@tf.function(experimental_implements=LN_SIGNATURE)
def layer_norm(x, gamma, beta):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + 0.001) * gamma + beta


class LayerNormModel(tf.Module):
    def __init__(self):
        super().__init__()
        self.gamma = tf.Variable(np.linspace(0.5, 1.5, 6, dtype=np.float32))
        self.beta = tf.Variable(np.linspace(-1.0, 1.0, 6, dtype=np.float32))

    @tf.function(input_signature=[f32(None, 6)])
    def f(self, x):
        return layer_norm(tf.nn.relu(x), self.gamma, self.beta)


def python_layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    variance = np.square(x - mean).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(variance + epsilon) * gamma + beta).astype(np.float32)


def test_user_fusion_of_layer_norm_runs_with_a_python_kernel(registry):
    @registry.register("test_layer_norm")
    def fuse_layer_norm(b, x, gamma, beta, epsilon):
        b.require(x.dtype == "float32", "x must be float32")
        return b.custom("TestLayerNorm", [x, gamma, beta], options={"epsilon": epsilon})

    module = LayerNormModel()
    model, report = convert_module(module, module.f)
    assert sorted(all_op_names(model)) == ["RELU", "TestLayerNorm"]
    assert report.fusions == {"test_layer_norm": 1}
    op, m = custom_op(model, "TestLayerNorm")
    sg = m.subgraphs[0]
    # The variables the function received are read (and frozen) at the call.
    np.testing.assert_array_equal(m.constant(sg, op.inputs[1]), module.gamma.numpy())
    np.testing.assert_array_equal(m.constant(sg, op.inputs[2]), module.beta.numpy())
    x = seeded_values((5, 6), tf.float32, 3)
    (actual,) = run_numlite(model, [x], custom_ops={"TestLayerNorm": python_layer_norm})
    assert_close(actual, module.f(x).numpy(), rtol=1e-5, atol=1e-5)
    litert_refuses(model, "TestLayerNorm")


def test_user_fusion_with_constant_transforms_leaves_only_the_fused_op(registry):
    @registry.register("test_layer_norm")
    class ScaledLayerNorm:
        """A class fusion: check, then fuse, handing the op gamma doubled (folded away)."""

        def check(self, b, x, gamma, beta, epsilon):
            b.require(x.rank == 2, f"x must be a matrix, has shape {x.shape}")

        def fuse(self, b, x, gamma, beta, epsilon):
            doubled = b.op("MUL", [gamma, np.float32(2.0)], outputs=[b.spec(gamma.shape, "float32")])
            return b.custom("TestLayerNorm", [x, doubled, beta], options={"epsilon": epsilon})

    module = LayerNormModel()
    model, _ = convert_module(module, module.f)
    assert sorted(all_op_names(model)) == ["RELU", "TestLayerNorm"]
    op, m = custom_op(model, "TestLayerNorm")
    np.testing.assert_array_equal(m.constant(m.subgraphs[0], op.inputs[1]), module.gamma.numpy() * 2)


def test_fusion_whose_parameters_do_not_fit_the_function_is_a_clear_error(registry):
    @registry.register("test_layer_norm")
    def two_arguments(b, x, gamma):
        return b.custom("TestLayerNorm", [x, gamma])

    module = LayerNormModel()
    with pytest.raises(numlite.ConversionError,
                       match=r"function '.*layer_norm.*' .*implements 'test_layer_norm', but its 3 argument\(s\) "
                             r"\(x, gamma, beta\) and attributes \['epsilon'\] do not fit the fusion"):
        convert_module(module, module.f)


def test_fusion_contract_check_failure_names_the_function(registry):
    @registry.register("test_layer_norm")
    def needs_static_batch(b, x, gamma, beta, epsilon):
        b.require(None not in x.shape, f"x must have a static shape, has {x.shape}")
        return b.custom("TestLayerNorm", [x, gamma, beta])

    module = LayerNormModel()
    with pytest.raises(numlite.ConversionError,
                       match=r"function '.*layer_norm.*' \(called by node '.*'\) implements 'test_layer_norm', "
                             r"but x must have a static shape, has \(None, 6\)"):
        convert_module(module, module.f)


def test_fusion_returning_the_wrong_results_is_a_clear_error(registry):
    @registry.register("test_layer_norm")
    def wrong_dtype(b, x, gamma, beta, epsilon):
        return b.custom("TestLayerNorm", [x], outputs=[b.spec(x.shape, "int32")])

    module = LayerNormModel()
    with pytest.raises(numlite.ConversionError, match="result 0 is float32, the fusion gives int32"):
        convert_module(module, module.f)


def test_registering_a_name_twice_needs_replace(registry):
    registry.register("test_twice")(lambda b, x: x)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("test_twice")(lambda b, x: x)
    registry.register("test_twice", replace=True)(lambda b, x: x)


def test_fusion_package_does_not_import_tensorflow():
    code = "import sys, numlite.fusion; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- pattern fusions -----------------------------------------------------------------------------

W_CONV, W_DEPTHWISE, W_DENSE = weights((3, 3, 3, 4), 1), weights((3, 3, 3, 2), 2), weights((5, 4), 3)
BIAS4, BIAS6, SCALE4 = weights((4,), 4), weights((6,), 5), weights((4,), 6) + 1.0

# op producing a pre-activation, its input shape, the TFLite op it must become
LAYERS = {
    "conv": (lambda x: tf.nn.bias_add(tf.nn.conv2d(x, W_CONV, 1, "SAME"), BIAS4), (2, 6, 6, 3), "CONV_2D"),
    "depthwise": (lambda x: tf.nn.bias_add(tf.nn.depthwise_conv2d(x, W_DEPTHWISE, [1, 1, 1, 1], "VALID"), BIAS6),
                  (2, 6, 6, 3), "DEPTHWISE_CONV_2D"),
    "matmul": (lambda x: tf.nn.bias_add(tf.matmul(x, W_DENSE), BIAS4), (3, 5), "FULLY_CONNECTED"),
}
# activation, the fused activation code it must become (None: stays a separate op)
ACTIVATIONS = {
    "none": (lambda y: y, 0),
    "relu": (tf.nn.relu, 1),
    "relu6": (tf.nn.relu6, 3),
    "clip_n1_1": (lambda y: tf.clip_by_value(y, -1.0, 1.0), 2),
    "max_min_n1_1": (lambda y: tf.minimum(tf.maximum(y, -1.0), 1.0), 2),
    "max_zero": (lambda y: tf.maximum(y, 0.0), 1),
    "max_min_0_6": (lambda y: tf.minimum(tf.maximum(y, 0.0), 6.0), 3),
    # LiteRT's convolutions ignore a fused TANH and its FULLY_CONNECTED rejects one, so Tanh
    # stays an op of its own (the official converter keeps it apart too).
    "tanh": (tf.nn.tanh, None),
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("layer", list(LAYERS))
def test_layer_bias_and_activation_fuse_into_one_op(layer, activation):
    build, shape, op_name = LAYERS[layer]
    act, code = ACTIVATIONS[activation]
    x = seeded_values(shape, tf.float32, 1) * 2
    model = assert_converts(lambda v: act(build(v)), [f32(None, *shape[1:])], [x], key=("fusion", layer, activation))
    ops, _ = operators(model)
    assert [n for n, _ in ops] == ([op_name] if code is not None else [op_name, "TANH"])
    assert ops[0][1].builtin_options.fused_activation_function == (code or 0)


@pytest.mark.parametrize("name, build", [
    ("batch_normalization", lambda x: tf.nn.relu(tf.nn.batch_normalization(
        tf.nn.conv2d(x, W_CONV, 1, "VALID"), BIAS4, SCALE4, BIAS4 * 0.5, SCALE4, 1e-3))),
    ("fused_batch_norm", lambda x: tf.compat.v1.nn.fused_batch_norm(
        tf.nn.conv2d(x, W_CONV, 1, "VALID"), SCALE4, BIAS4, BIAS4 * 0.5, SCALE4, 1e-3, is_training=False)[0]),
    ("mul_add", lambda x: tf.nn.relu6(tf.nn.conv2d(x, W_CONV, 2, "SAME") * SCALE4 + BIAS4)),
    ("depthwise_mul_sub", lambda x: tf.nn.depthwise_conv2d(x, W_DEPTHWISE, [1, 1, 1, 1], "SAME") * 2.0 - BIAS6),
    ("dense_scale", lambda x: tf.matmul(x, W_DENSE) * SCALE4 + 1.0),
])
def test_batch_norm_and_constant_scales_fold_into_the_layer(name, build):
    shape = (3, 5) if name == "dense_scale" else (2, 7, 7, 3)
    x = seeded_values(shape, tf.float32, 2)
    model = assert_converts(build, [f32(*shape)], [x], key=("fold", name))
    assert len(all_op_names(model)) == 1, all_op_names(model)


def test_clamp_that_is_no_activation_stays():
    x = seeded_values((2, 5), tf.float32, 3)
    model = assert_converts(lambda v: tf.clip_by_value(tf.matmul(v, W_DENSE), -0.5, 1.0), [f32(2, 5)], [x])
    assert all_op_names(model) == ["FULLY_CONNECTED", "MINIMUM", "MAXIMUM"]
