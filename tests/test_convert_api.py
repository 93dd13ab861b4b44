"""numlite.TFLiteConverter's entry points, variables, signatures, clean-up passes, errors and the
``numlite convert`` command. Every model numlite writes runs in numlite and in LiteRT and both
must give TensorFlow's results."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_close, litert_interpreter, run_litert, run_numlite, seeded_values

import numlite
from numlite.cli.main import main as cli


def f32(*shape):
    return tf.TensorSpec(shape, tf.float32)


def runtimes(model: bytes):
    """A fresh numlite and LiteRT interpreter for the model, allocated."""
    interpreters = [("numlite", numlite.Interpreter(model_content=model)), ("LiteRT", litert_interpreter(model))]
    for _, interpreter in interpreters:
        interpreter.allocate_tensors()
    return interpreters


def invoke(interpreter, *inputs):
    for d, x in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], x)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


# -- variables ----------------------------------------------------------------------------------


class Counter(tf.Module):
    """State assigned at top level, inside a loop body and inside a branch."""

    def __init__(self):
        super().__init__()
        self.total = tf.Variable(np.array([1.0, -2.0, 0.5], np.float32))
        self.steps = tf.Variable(0)
        self.scale = tf.Variable(np.float32(1.5))  # read-only: frozen into a constant

    @tf.function(input_signature=[f32(3)], autograph=False)
    def __call__(self, x):
        self.total.assign_add(x * self.scale)

        def body(i):
            self.steps.assign_add(1)
            return (i + 1,)

        tf.while_loop(lambda i: i < 2, body, (0,))
        tf.cond(self.steps > 3, lambda: self.total.assign(self.total * 0.5), lambda: self.total.read_value())
        return {"total": self.total.read_value(), "steps": self.steps.read_value()}


def test_assigned_variables_keep_state_across_invokes_and_read_only_ones_are_frozen():
    counter = Counter()
    converter = numlite.TFLiteConverter.from_concrete_functions([counter.__call__.get_concrete_function()], counter)
    model = converter.convert()
    assert converter.report.frozen_variables >= 1 and len(converter.report.variables) == 2
    names = all_op_names(model)
    assert names[0] == "CALL_ONCE" and "ASSIGN_VARIABLE" in names and "WHILE" in names and "IF" in names

    inputs = [seeded_values((3,), tf.float32, seed) for seed in range(4)]
    expected = [[np.asarray(t) for t in tf.nest.flatten(counter(tf.constant(x)))] for x in inputs]  # TF, in order
    for runtime, interpreter in runtimes(model):
        for step, (x, want) in enumerate(zip(inputs, expected)):
            got = invoke(interpreter, x)
            for k, (a, e) in enumerate(zip(got, want)):
                assert_close(a, e, what=f"{runtime} invoke {step} output {k}: ")


def test_reset_all_variables_restores_the_converted_initial_state():
    counter = Counter()
    model = numlite.TFLiteConverter.from_concrete_functions([counter.__call__.get_concrete_function()], counter).convert()
    x = seeded_values((3,), tf.float32)
    first = [np.asarray(t) for t in tf.nest.flatten(counter(tf.constant(x)))]
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    invoke(interpreter, x)
    invoke(interpreter, x)
    interpreter.reset_all_variables()
    for a, e in zip(invoke(interpreter, x), first):
        assert_close(a, e)


def test_keras3_model_wrapped_in_a_tf_module_and_saved_converts_correctly(tmp_path):
    # The official converter keeps this model's weights as variables without an initializer
    # and LiteRT then computes with whatever memory holds; numlite reads the captured variables.
    tf.keras.utils.set_random_seed(0)
    keras_model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3, activation="tanh"),
                                       tf.keras.layers.Dense(2)])

    class Wrapper(tf.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        @tf.function(input_signature=[f32(None, 4)])
        def __call__(self, x):
            return {"y": self.m(x)}

    tf.saved_model.save(Wrapper(keras_model), str(tmp_path))
    x = seeded_values((5, 4), tf.float32)
    expected = keras_model(x).numpy()
    official = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path)).convert()
    assert not np.allclose(run_litert(official, [x])[0], expected, atol=1e-3)  # the trap is real
    model = numlite.TFLiteConverter.from_saved_model(str(tmp_path)).convert()
    assert "VAR_HANDLE" not in all_op_names(model)
    for run in (run_numlite, run_litert):
        assert_close(run(model, [x])[0], expected)


# -- SavedModels and signatures -----------------------------------------------------------------


class TwoSignatures(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.array([[1.0, -1.0], [0.5, 2.0], [-3.0, 0.25]], np.float32))

    @tf.function(input_signature=[f32(None, 3)])
    def project(self, x):
        return {"projected": tf.matmul(x, self.w)}

    @tf.function(input_signature=[f32(None, 3), f32(None, 3)])
    def combine(self, a, b):
        return {"sum": a + b, "product": a * b}


@pytest.fixture(scope="module")
def two_signatures(tmp_path_factory):
    module = TwoSignatures()
    path = str(tmp_path_factory.mktemp("saved") / "two")
    tf.saved_model.save(module, path, signatures={"project": module.project, "combine": module.combine})
    return path, module


def test_every_signature_of_a_saved_model_becomes_a_signature_def(two_signatures):
    path, module = two_signatures
    model = numlite.TFLiteConverter.from_saved_model(path).convert()
    a, b = seeded_values((4, 3), tf.float32, 1), seeded_values((4, 3), tf.float32, 2)
    for runtime, interpreter in runtimes(model):
        assert interpreter.get_signature_list() == {
            "combine": {"inputs": ["a", "b"], "outputs": ["product", "sum"]},
            "project": {"inputs": ["x"], "outputs": ["projected"]},
        }, runtime
        got = interpreter.get_signature_runner("combine")(a=a, b=b)
        assert_close(got["sum"], a + b, what=f"{runtime} sum: ")
        assert_close(got["product"], a * b, what=f"{runtime} product: ")
        got = interpreter.get_signature_runner("project")(x=a)
        assert_close(got["projected"], module.project(a)["projected"].numpy(), what=f"{runtime} project: ")


def test_signature_keys_choose_which_signatures_convert(two_signatures):
    path, _ = two_signatures
    model = numlite.TFLiteConverter.from_saved_model(path, signature_keys=["project"]).convert()
    assert list(numlite.Interpreter(model_content=model).get_signature_list()) == ["project"]
    with pytest.raises(numlite.ConversionError, match="no signature"):
        numlite.TFLiteConverter.from_saved_model(path, signature_keys=["missing"])


def test_dynamic_batch_stays_dynamic_so_inputs_can_be_resized(two_signatures):
    path, module = two_signatures
    model = numlite.TFLiteConverter.from_saved_model(path, signature_keys=["project"]).convert()
    detail = numlite.Interpreter(model_content=model).get_input_details()[0]
    assert list(detail["shape_signature"]) == [-1, 3]
    for batch in (1, 7):
        x = seeded_values((batch, 3), tf.float32, batch)
        for run in (run_numlite, run_litert):  # both resize the input to the batch given
            assert_close(run(model, [x])[0], module.project(x)["projected"].numpy())


def test_several_concrete_functions_become_several_signatures():
    module = TwoSignatures()
    funcs = [module.project.get_concrete_function(), module.combine.get_concrete_function()]
    model = numlite.TFLiteConverter.from_concrete_functions(funcs, module).convert()
    assert sorted(numlite.Interpreter(model_content=model).get_signature_list()) == ["combine", "project"]


# -- clean-up passes ----------------------------------------------------------------------------


def test_dead_code_identities_and_repeated_constants_are_removed():
    weights = np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32)

    def fn(x, flag):
        unused = tf.reduce_sum(tf.exp(x))  # noqa: F841 - dead code
        y = tf.identity(tf.identity(x))
        # The same 16 KiB weights in both branches and at top level: stored once. (A scale of y
        # would fold into weights of its own, as the official converter folds it: a ReLU does not.)
        z = tf.cond(flag, lambda: tf.matmul(y, weights), lambda: tf.matmul(tf.nn.relu(y), weights))
        return tf.matmul(z, weights)

    concrete = tf.function(fn, input_signature=[f32(2, 64), tf.TensorSpec([], tf.bool)]).get_concrete_function()
    model = numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()
    names = all_op_names(model)
    assert "EXP" not in names and "SUM" not in names
    m = numlite.model.read_model(model)
    assert sum(1 for b in m.buffers if len(b) == weights.nbytes) == 1
    assert len(model) < 2 * weights.nbytes
    x = seeded_values((2, 64), tf.float32)
    for flag in (True, False):
        expected = concrete(tf.constant(x), tf.constant(flag)).numpy()
        for run in (run_numlite, run_litert):
            assert_close(run(model, [x, np.array(flag)])[0], expected, rtol=1e-4, atol=1e-4)  # 64-term sums, twice


# -- errors -------------------------------------------------------------------------------------


def test_unsupported_ops_are_listed_in_one_error_with_their_nodes():
    def fn(x):
        counts = tf.raw_ops.Bincount(arr=tf.cast(x, tf.int32), size=4, weights=tf.zeros([0]), name="my_bincount")
        return tf.strings.length(tf.strings.as_string(x), name="my_length"), counts

    concrete = tf.function(fn, input_signature=[f32(3)]).get_concrete_function()
    with pytest.raises(numlite.ConversionError) as error:
        numlite.TFLiteConverter.from_concrete_functions([concrete]).convert()
    message = str(error.value)
    for op, node in [("AsString", "AsString"), ("Bincount", "my_bincount"), ("StringLength", "my_length")]:
        assert f"{op}: " in message and node in message


# -- the command line ---------------------------------------------------------------------------


def test_cli_converts_a_saved_model_and_prints_a_summary(two_signatures, tmp_path, capsys):
    path, _ = two_signatures
    out = tmp_path / "model.tflite"
    assert cli(["convert", path, "-o", str(out), "--signature", "combine"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "ADD x1" in printed and "MUL x1" in printed and "subgraph" in printed
    a, b = seeded_values((2, 3), tf.float32, 1), seeded_values((2, 3), tf.float32, 2)
    got = numlite.Interpreter(model_path=str(out)).get_signature_runner("combine")(a=a, b=b)
    assert_close(got["sum"], a + b)


def test_cli_converts_a_keras_file(tmp_path, capsys):
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((5,)), tf.keras.layers.Dense(4, activation="relu")])
    path = tmp_path / "m.keras"
    model.save(path)
    assert cli(["convert", str(path)]) == 0
    assert "FULLY_CONNECTED x1" in capsys.readouterr().out
    x = seeded_values((3, 5), tf.float32)
    for run in (run_numlite, run_litert):
        assert_close(run(open(f"{path}.tflite", "rb").read(), [x])[0], model(x).numpy())


def test_cli_reports_a_missing_source(tmp_path, capsys):
    assert cli(["convert", str(tmp_path / "nothing")]) == 1
    assert "no such file or folder" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "nothing.tflite")


def test_keras_export_saved_model_converts_as_compactly_as_the_official_converter(tmp_path):
    # Keras 3's model.export() writes functions without argument shapes: numlite infers them
    # again once the variables are constants, so biases and batch norms still fold.
    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((16, 16, 3)), layers.Conv2D(8, 3), layers.BatchNormalization(), layers.ReLU(),
        layers.DepthwiseConv2D(3, padding="same"), layers.BatchNormalization(), layers.ReLU(6.0),
        layers.GlobalAveragePooling2D(), layers.Dense(4),
    ])
    images = seeded_values((4, 16, 16, 3), tf.float32)
    for layer in model.layers:  # batch statistics of order one, so the check means something
        if isinstance(layer, layers.BatchNormalization):
            layer.momentum = 0.0
    model(images, training=True)
    model.export(str(tmp_path), verbose=False)
    converter = numlite.TFLiteConverter.from_saved_model(str(tmp_path), signature_keys=["serving_default"])
    ours = converter.convert()
    official = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path)).convert()
    assert len(all_op_names(ours)) <= len(all_op_names(official)) and len(ours) <= len(official)
    expected = model(images, training=False).numpy()
    for run in (run_numlite, run_litert):
        assert_close(run(ours, [images])[0], expected)


@pytest.fixture(scope="module")
def exported_cnn(tmp_path_factory):
    """A Keras 3 ``model.export`` folder: its endpoint is written twice, ``serve`` and
    ``serving_default``."""
    tf.keras.utils.set_random_seed(1)
    layers = tf.keras.layers
    model = tf.keras.Sequential([tf.keras.Input((12, 12, 3)), layers.Conv2D(6, 3, activation="relu"),
                                 layers.MaxPooling2D(), layers.Flatten(), layers.Dense(5)])
    path = str(tmp_path_factory.mktemp("exported") / "cnn")
    model.export(path, verbose=False)
    return path, model


def test_a_keras_export_converts_its_default_endpoint_once(exported_cnn):
    """As the official converter does: without signature keys, a model.export folder converts
    serving_default alone, and the file has no more operators than the official one."""
    path, model = exported_cnn
    assert sorted(tf.saved_model.load(path).signatures) == ["serve", "serving_default"]
    converter = numlite.TFLiteConverter.from_saved_model(path)
    ours = converter.convert()
    official = tf.lite.TFLiteConverter.from_saved_model(path).convert()
    assert converter.report.signatures == ["serving_default"]
    assert len(all_op_names(ours)) <= len(all_op_names(official)), (all_op_names(ours), all_op_names(official))
    x = seeded_values((2, 12, 12, 3), tf.float32, 3)
    for run in (run_numlite, run_litert):
        assert_close(run(ours, [x])[0], model(x).numpy())


def test_signatures_computing_the_same_share_one_subgraph(exported_cnn):
    """Named explicitly, both endpoints of the export convert, as two signature defs of one
    subgraph: the computation is stored once, and each signature runs in LiteRT and numlite."""
    path, model = exported_cnn
    ours = numlite.TFLiteConverter.from_saved_model(path, signature_keys=["serve", "serving_default"]).convert()
    single = numlite.TFLiteConverter.from_saved_model(path, signature_keys=["serving_default"]).convert()
    parsed = numlite.model.read_model(ours)
    assert len(parsed.subgraphs) == 1 and [s.subgraph_index for s in parsed.signature_defs] == [0, 0]
    assert all_op_names(ours) == all_op_names(single)
    x = seeded_values((3, 12, 12, 3), tf.float32, 4)
    for runtime, interpreter in runtimes(ours):
        for key in ("serve", "serving_default"):
            runner = interpreter.get_signature_runner(key)
            (name,) = runner.get_input_details()
            (out,) = runner(**{name: x}).values()
            assert_close(out, model(x).numpy(), what=f"{runtime} {key}: ")


def test_a_module_saved_with_one_function_under_two_keys_stores_it_once(tmp_path):
    module = tf.Module()
    module.w = tf.Variable(seeded_values((3, 4), tf.float32, 5))
    module.f = tf.function(lambda x: {"y": tf.nn.relu(tf.matmul(x, module.w))}, input_signature=[f32(None, 3)])
    tf.saved_model.save(module, str(tmp_path), signatures={"a": module.f, "b": module.f})
    ours = numlite.TFLiteConverter.from_saved_model(str(tmp_path)).convert()
    parsed = numlite.model.read_model(ours)
    assert len(parsed.subgraphs) == 1 and sorted(s.key for s in parsed.signature_defs) == ["a", "b"]
    x = seeded_values((2, 3), tf.float32, 6)
    for runtime, interpreter in runtimes(ours):
        for key in ("a", "b"):
            assert_close(interpreter.get_signature_runner(key)(x=x)["y"], module.f(x)["y"].numpy(),
                         what=f"{runtime} {key}: ")


def test_a_subgraph_whose_variable_tensor_carries_state_is_not_shared():
    """Two identical subgraphs whose variable tensor is read before anything writes it (state
    from the previous invoke) each keep their own; without the variable they are one."""
    from numlite.converter.optimize import remove_dead_code, share_identical_signatures
    from numlite.model.ir import Model, Operator, OperatorCode, SignatureDef, Subgraph, Tensor

    def model(variable: bool) -> Model:
        def accumulate() -> Subgraph:  # out = x + state
            tensors = [Tensor("x", (2,)), Tensor("state", (2,), is_variable=variable), Tensor("out", (2,))]
            return Subgraph(tensors, [0], [2], [Operator(0, [0, 1], [2])])

        m = Model(operator_codes=[OperatorCode("ADD")], subgraphs=[accumulate(), accumulate()])
        m.signature_defs = [SignatureDef("a", 0, {"x": 0}, {"out": 2}), SignatureDef("b", 1, {"x": 0}, {"out": 2})]
        return m

    stateful, stateless = model(True), model(False)
    for m in (stateful, stateless):
        share_identical_signatures(m)
        remove_dead_code(m)
    assert len(stateful.subgraphs) == 2 and [s.subgraph_index for s in stateful.signature_defs] == [0, 1]
    assert len(stateless.subgraphs) == 1 and [s.subgraph_index for s in stateless.signature_defs] == [0, 0]


def test_a_captured_resource_that_is_not_a_variable_is_refused_by_name():
    """A lookup table captured by the function (the official converter needs Flex for it)."""
    keys, values = tf.constant([1, 2, 3], tf.int64), tf.constant([10.0, 20.0, 30.0])
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), -1.0)
    lookup = tf.function(lambda x: table.lookup(x), input_signature=[tf.TensorSpec([None], tf.int64)])
    converter = numlite.TFLiteConverter.from_concrete_functions([lookup.get_concrete_function()], table)
    with pytest.raises(numlite.ConversionError, match="not a variable.*LookupTableFindV2"):
        converter.convert()


@pytest.mark.parametrize("flavor", ["keras3", "tf_keras"])
def test_cli_loads_a_keras_file_with_the_keras_that_saved_it_and_lambdas_only_when_asked(flavor, tmp_path, capsys):
    """A .keras file written by tf_keras (Keras 2) is loaded by tf_keras, one written by Keras 3
    by Keras 3; a Lambda layer's Python code runs only with --no-safe-mode (Keras's safe_mode)."""
    if flavor == "tf_keras":
        import tf_keras as keras_module
    else:
        import keras as keras_module
    keras_module.utils.set_random_seed(0)
    x = keras_module.Input((5,))
    double = keras_module.layers.Lambda(lambda t: t * 2.0)  # stored as Python bytecode
    model = keras_module.Model(x, double(keras_module.layers.Dense(3)(x)))
    path = str(tmp_path / "lambda.keras")
    model.save(path)
    assert cli(["convert", path]) == 1
    assert "--no-safe-mode" in capsys.readouterr().err
    assert cli(["convert", path, "--no-safe-mode"]) == 0
    values = seeded_values((2, 5), tf.float32, 7)
    for run in (run_numlite, run_litert):
        assert_close(run(open(f"{path}.tflite", "rb").read(), [values])[0], np.asarray(model(values)))
    assert cli(["convert", str(tmp_path), "--no-safe-mode"]) == 1  # a folder is no Keras file
