"""LiteRT's debugging surface on numlite's Interpreter: ``_get_ops_details()``,
``_get_op_details(i)``, ``_get_tensor_details(i, s)``, ``_get_full_signature_list()`` and the
rest of what ``dir()`` of LiteRT's Interpreter shows.

The same files (from the official converter: a small CNN, a WHILE loop, a quantized CNN, two
signatures; a hand-made unknown custom op) go to LiteRT and numlite, and every structure
returned must be equal: same keys in the same order, same Python and NumPy types, arrays equal
exactly, for every op and every tensor of every subgraph. LiteRT describes operators of
subgraph 0 only; numlite's ``subgraph_index`` extension is checked against the operators
LiteRT's own flatbuffer schema reads from the file, typed by LiteRT's tensor details.
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert import schema_py_generated as litert_schema
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import SignatureRunner as LiteRTSignatureRunner

import numlite
from helpers import convert, convert_keras, litert_interpreter
from numlite.model import read_model, write_model

# LiteRT names that have no numlite counterpart on purpose (docs/debugging-api.md says why).
NOT_MIRRORED = {"__del__"}  # LiteRT's destructor orders C++ objects; numlite holds none


def _cnn() -> tf.keras.Model:
    tf.keras.utils.set_random_seed(1)
    inputs = tf.keras.Input((8, 8, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    x = tf.keras.layers.MaxPooling2D()(x)
    x = tf.keras.layers.Flatten()(x)
    x = tf.keras.layers.Dense(6, use_bias=False)(x)  # FULLY_CONNECTED with an omitted bias (-1)
    return tf.keras.Model(inputs, tf.keras.layers.Softmax()(tf.keras.layers.Dense(5)(x)))


def _loop(n, x):
    return tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 1.5 + 1.0), [tf.constant(0), x])[1]


def _calibration():
    rng = np.random.default_rng(0)
    for _ in range(4):
        yield [rng.uniform(-1, 1, (1, 8, 8, 3)).astype(np.float32)]


class TwoSignatures(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="b"),
                                  tf.TensorSpec([None, 3], tf.float32, name="a")])
    def combine(self, b, a):
        return {"sum": a + b, "prod": a * b}

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32, name="x")])
    def project(self, x):
        return {"y": tf.nn.relu(x) * 2.0}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, bytes]:
    module = TwoSignatures()
    folder = str(tmp_path_factory.mktemp("debug-api") / "saved")
    tf.saved_model.save(module, folder, signatures={"combine": module.combine, "project": module.project})
    custom = read_model(convert(lambda x: tf.nn.relu(x) * 3.0, [tf.TensorSpec([2, 3], tf.float32)], key="debug-api-custom"))
    first = custom.subgraphs[0].operators[0]
    custom.operator_codes[first.opcode_index].builtin = "CUSTOM"
    custom.operator_codes[first.opcode_index].custom_code = "MyUnknownOp"
    first.builtin_options = None
    return {
        "cnn": convert_keras(_cnn, "debug-api-cnn"),
        "while": convert(_loop, [tf.TensorSpec([], tf.int32), tf.TensorSpec([2, 3], tf.float32)], key="debug-api-while"),
        "quantized": _quantized(),
        "signatures": tf.lite.TFLiteConverter.from_saved_model(folder).convert(),
        "custom": write_model(custom),
    }


_QUANTIZED: list[bytes] = []


def _quantized() -> bytes:
    if not _QUANTIZED:  # int8 throughout, per-channel weights
        converter = tf.lite.TFLiteConverter.from_keras_model(_cnn())
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = _calibration
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
        _QUANTIZED.append(converter.convert())
    return _QUANTIZED[0]


MODELS = ["cnn", "while", "quantized", "signatures", "custom"]


def assert_same(ours, theirs, where: str = "") -> None:
    """Deep equality: same types at every level, dict keys in the same order, arrays exactly
    equal in dtype, shape and values."""
    assert type(ours) is type(theirs), f"{where}: {type(ours).__name__} != LiteRT's {type(theirs).__name__}"
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} != LiteRT's {list(theirs)}"
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), f"{where}: {len(ours)} items != LiteRT's {len(theirs)}"
        for k, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{k}]")
    elif isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, f"{where}: {ours!r} != LiteRT's {theirs!r}"
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
    else:
        assert ours == theirs, f"{where}: {ours!r} != LiteRT's {theirs!r}"


def _pair(model: bytes, **kwargs) -> tuple[numlite.Interpreter, LiteRTInterpreter]:
    return numlite.Interpreter(model_content=model, **kwargs), litert_interpreter(model, builtin_only=True, **kwargs)


def _model_tensor_counts(model: bytes) -> list[int]:
    return [len(sg.tensors) for sg in read_model(model).subgraphs]


def _compare_everything(ours: numlite.Interpreter, theirs: LiteRTInterpreter, model: bytes, when: str) -> None:
    assert_same(ours._get_ops_details(), theirs._get_ops_details(), f"{when} _get_ops_details()")
    assert ours.num_subgraphs() == theirs.num_subgraphs()
    for s, count in enumerate(_model_tensor_counts(model)):
        # LiteRT appends its kernels' scratch tensors after the model's at allocation; the
        # model's own come first, with the same indices.
        theirs_listed = theirs.get_tensor_details(s)
        assert all(d["index"] >= count for d in theirs_listed[count:]), f"{when}: LiteRT lists tensors out of order"
        assert_same(ours.get_tensor_details(s), theirs_listed[:count], f"{when} get_tensor_details({s})")
        for i in range(count):
            assert_same(ours._get_tensor_details(i, s), theirs._get_tensor_details(i, s), f"{when} tensor {i} of {s}")
    assert_same(ours._get_full_signature_list(), theirs._get_full_signature_list(), f"{when} signatures")
    assert_same(ours.get_signature_list(), theirs.get_signature_list(), f"{when} get_signature_list()")


@pytest.mark.parametrize("name", MODELS)
def test_details_equal_litert_before_and_after_allocation(models, name):
    model = models[name]
    ours, theirs = _pair(model)
    _compare_everything(ours, theirs, model, "before allocate_tensors")
    if name == "custom":  # LiteRT cannot allocate it either (test_unknown_custom_op below)
        return
    ours.allocate_tensors()
    theirs.allocate_tensors()
    _compare_everything(ours, theirs, model, "after allocate_tensors")


def _litert_ops_from_file(model: bytes, theirs: LiteRTInterpreter, s: int) -> list[dict]:
    """What LiteRT's ``_get_op_details`` would say about the operators of subgraph ``s``: the
    file read by LiteRT's own schema, dtypes from LiteRT's tensor details."""
    m = litert_schema.ModelT.InitFromPackedBuf(model, 0)
    names = {v: k for k, v in vars(litert_schema.BuiltinOperator).items() if not k.startswith("_")}
    ops = []
    for n, op in enumerate(m.subgraphs[s].operators or []):
        code = m.operatorCodes[op.opcodeIndex]
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)  # as LiteRT's GetBuiltinCode
        inputs = np.array(op.inputs if op.inputs is not None else [], np.int32)
        outputs = np.array(op.outputs if op.outputs is not None else [], np.int32)
        ops.append({
            "index": n,
            "op_name": code.customCode.decode() if names[builtin] == "CUSTOM" else names[builtin],
            "inputs": inputs,
            "outputs": outputs,
            "operand_types": [theirs._get_tensor_details(int(i), s)["dtype"] for i in inputs if i != -1],
            "result_types": [theirs._get_tensor_details(int(i), s)["dtype"] for i in outputs if i != -1],
        })  # fmt: skip
    return ops


@pytest.mark.parametrize("name", ["while", "signatures"])
def test_ops_of_every_subgraph(models, name):
    """``_get_ops_details(s)`` / ``_get_op_details(i, s)`` for every subgraph; for subgraph 0
    the reference is first checked against LiteRT's own ``_get_ops_details()``."""
    model = models[name]
    ours, theirs = _pair(model)
    assert theirs.num_subgraphs() > 1
    assert_same(_litert_ops_from_file(model, theirs, 0), theirs._get_ops_details(), "reference, subgraph 0")
    for s in range(theirs.num_subgraphs()):
        expected = _litert_ops_from_file(model, theirs, s)
        assert expected, f"subgraph {s} has no operators: the test would check nothing"
        assert_same(ours._get_ops_details(s), expected, f"subgraph {s}")
        for n in range(len(expected)):
            assert_same(ours._get_op_details(n, subgraph_index=s), expected[n], f"node {n} of subgraph {s}")
    assert [op["op_name"] for op in ours._get_ops_details(0)] == (["WHILE"] if name == "while" else ["ADD", "MUL"])


def test_delegate_nodes_are_litert_only(models):
    """LiteRT's default XNNPACK delegate appends DELEGATE nodes at allocation; numlite has no
    delegates, so its list is the model's operators, LiteRT's list without them."""
    model = models["cnn"]
    ours = numlite.Interpreter(model_content=model)
    theirs = LiteRTInterpreter(model_content=model)
    ours.allocate_tensors()
    theirs.allocate_tensors()
    mine, litert = ours._get_ops_details(), theirs._get_ops_details()
    assert len(litert) > len(mine) and {op["op_name"] for op in litert[len(mine):]} == {"DELEGATE"}
    assert_same(mine, litert[: len(mine)], "model nodes")


def test_compressed_zero_points(models):
    """``experimental_compress_quantization_zero_points``: per-channel zero points that are all
    equal come out as one, as in LiteRT."""
    model = models["quantized"]
    ours, theirs = _pair(model, experimental_compress_quantization_zero_points=True)
    assert ours.experimental_compress_quantization_zero_points is True
    assert theirs.experimental_compress_quantization_zero_points is True
    assert numlite.Interpreter(model_content=model).experimental_compress_quantization_zero_points is False
    compressed = [d for d in theirs.get_tensor_details() if len(d["quantization_parameters"]["scales"]) > 1]
    assert compressed and all(len(d["quantization_parameters"]["zero_points"]) == 1 for d in compressed)
    assert_same(ours.get_tensor_details(), theirs.get_tensor_details(), "compressed")


def test_bad_indices_raise_value_errors_like_litert(models):
    ours, theirs = _pair(models["cnn"])
    for it in (ours, theirs):
        with pytest.raises(ValueError, match="node index"):
            it._get_op_details(99)
        with pytest.raises(ValueError, match="node index"):
            it._get_op_details(-1)
        with pytest.raises(ValueError, match="tensor index"):
            it._get_tensor_details(99, 0)
        with pytest.raises(ValueError, match="out of range"):
            it.get_tensor_details(5)
    with pytest.raises(numlite.InvalidInputError, match="subgraph index 3 is out of range"):
        ours._get_ops_details(3)  # (LiteRT has no subgraph argument here)


def test_every_litert_method_exists():
    """Everything ``dir()`` shows on LiteRT's Interpreter and SignatureRunner, public or
    underscored, exists on numlite's (``NOT_MIRRORED`` apart)."""
    for litert_class, ours in ((LiteRTInterpreter, numlite.Interpreter), (LiteRTSignatureRunner, numlite.SignatureRunner)):
        missing = sorted(set(dir(litert_class)) - set(dir(ours)) - NOT_MIRRORED)
        assert not missing, f"{ours.__name__} lacks {missing}"


def test_memory_safety_and_native_handle(models):
    ours, theirs = _pair(models["cnn"])
    ours.allocate_tensors()
    view = ours.tensor(ours.get_input_details()[0]["index"])()
    assert ours._safe_to_run() is True  # a numlite view keeps its array alive: nothing dangles
    ours._ensure_safe()
    ours.allocate_tensors()
    del view
    assert isinstance(theirs._native_handle(), int)
    with pytest.raises(numlite.UnavailableError, match="no C\\+\\+ interpreter") as info:
        ours._native_handle()
    assert isinstance(info.value, NotImplementedError)


def test_unknown_custom_op(models):
    """A model with an op no one has: both describe it (op_name is the custom code) before
    allocation, and both refuse it at allocate_tensors, numlite naming node and fix."""
    model = models["custom"]
    ours, theirs = _pair(model)
    assert ours._get_op_details(0)["op_name"] == theirs._get_op_details(0)["op_name"] == "MyUnknownOp"
    with pytest.raises(numlite.UnsupportedOperatorError, match=r"custom op MyUnknownOp \(subgraph 0, node 0\).*custom_ops="):
        ours.allocate_tensors()
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="unresolved custom op: MyUnknownOp"):
        theirs.allocate_tensors()


# -- numlite ops MODEL / numlite.ops_report ----------------------------------------------------


def _detection_model(second_op: str) -> bytes:
    """TFLite_Detection_PostProcess (a custom op LiteRT has built in, numlite has not) beside a
    builtin or another custom op; options as LiteRT's kernel reads them."""
    from flatbuffers import flexbuffers

    from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Subgraph, Tensor

    fb = flexbuffers.Builder()
    with fb.Map():
        for key, value in dict(max_detections=3, max_classes_per_detection=1, num_classes=2, detections_per_class=3).items():
            fb.Int(key, value)
        for key, value in dict(nms_score_threshold=0.3, nms_iou_threshold=0.5, y_scale=10.0, x_scale=10.0,
                               h_scale=5.0, w_scale=5.0).items():
            fb.Float(key, value)
        fb.Bool("use_regular_nms", False)
    anchors = np.random.default_rng(0).uniform(0, 1, (4, 4)).astype(np.float32)
    tensors = [Tensor("boxes", (1, 4, 4)), Tensor("scores", (1, 4, 3)), Tensor("anchors", (4, 4), buffer=1),
               Tensor("detection_boxes", (1, 3, 4)), Tensor("detection_classes", (1, 3)),
               Tensor("detection_scores", (1, 3)), Tensor("count", (1,)), Tensor("y", (1, 4, 4))]
    second = OperatorCode("CUSTOM", second_op) if second_op != "RELU" else OperatorCode("RELU")
    model = Model(
        operator_codes=[OperatorCode("CUSTOM", "TFLite_Detection_PostProcess"), second],
        subgraphs=[Subgraph(tensors=tensors, inputs=[0, 1], outputs=[3, 4, 5, 6, 7], operators=[
            Operator(0, [0, 1, 2], [3, 4, 5, 6], custom_options=bytes(fb.Finish())), Operator(1, [0], [7])])],
        buffers=[Buffer(), Buffer(anchors.view(np.uint8).reshape(-1))],
    )  # fmt: skip
    return write_model(model)


def _file(tmp_path, name: str, content: bytes) -> str:
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(content)
    return str(path)


def _rows(report) -> dict[str, tuple]:
    return {op.name: (op.custom, op.version, op.nodes, op.subgraphs, op.numlite, op.litert) for op in report.ops}


def _row(table: str, name: str) -> str:
    """One row of the table the CLI prints, its columns (two or more spaces apart) joined by |."""
    import re

    (line,) = [line for line in table.splitlines() if line.split(" ")[0] == name]
    return " | ".join(re.split(r"\s{2,}", line.strip()))


def _litert_allocates(model: bytes) -> bool:
    try:
        litert_interpreter(model, builtin_only=True).allocate_tensors()
    except RuntimeError:
        return False
    return True


def test_ops_builtins_only(models, tmp_path, capsys):
    """Names, versions, node counts and subgraphs as LiteRT's schema reads them from the file;
    numlite and LiteRT both run them (and LiteRT does allocate the model)."""
    from numlite.cli.main import main

    for name in ("cnn", "while", "quantized"):
        model = models[name]
        theirs = litert_interpreter(model, builtin_only=True)
        expected: dict[str, tuple] = {}
        schema = litert_schema.ModelT.InitFromPackedBuf(model, 0)
        for s in range(theirs.num_subgraphs()):
            for op, raw in zip(_litert_ops_from_file(model, theirs, s), schema.subgraphs[s].operators):
                version = schema.operatorCodes[raw.opcodeIndex].version
                custom, _, nodes, subgraphs, _, _ = expected.get(op["op_name"], (False, version, 0, [], True, True))
                expected[op["op_name"]] = (False, version, nodes + 1, subgraphs + [s] * (s not in subgraphs), True, True)
        assert _rows(numlite.ops_report(model)) == expected
        assert _litert_allocates(model)
    path = _file(tmp_path, "while", models["while"])
    assert main(["ops", path]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["operator", "version", "nodes", "subgraphs", "numlite", "LiteRT"]
    assert _row(out, "WHILE") == "WHILE | 1 | 1 | 0 | yes | yes"
    assert _row(out, "ADD") == "ADD | 1 | 2 | 2 | yes | yes"
    assert "4 operator(s), 5 node(s); numlite can run every operator; LiteRT " in out
    assert main(["inspect", "--ops", path]) == 0 and capsys.readouterr().out == out  # the same code


def test_ops_unknown_custom_op(models, tmp_path, capsys):
    """Neither runs it: exit code 3, both verdicts in the table and the JSON."""
    from numlite.cli.main import EXIT_UNSUPPORTED_OPS, main

    model = models["custom"]
    assert not _litert_allocates(model)
    path = _file(tmp_path, "custom", model)
    assert main(["ops", path]) == EXIT_UNSUPPORTED_OPS == 3
    out = capsys.readouterr().out
    assert _row(out, "MyUnknownOp") == "MyUnknownOp (custom) | 1 | 1 | 0 | no (no kernel) | no (unresolved custom op)"
    assert "numlite cannot run 1 operator(s): MyUnknownOp" in out
    assert main(["inspect", "--ops", "--json", path]) == 3
    info = json.loads(capsys.readouterr().out)
    unknown = next(op for op in info["ops"] if op["name"] == "MyUnknownOp")
    assert unknown["custom"] and not unknown["numlite"] and unknown["litert"] is False
    assert info["numlite_can_run"] is False and info["litert_version"]


def test_ops_custom_op_numlite_has(models, tmp_path, capsys, monkeypatch):
    """A custom op with a numlite kernel: one registered under its code (as numlite's own
    kernels are) or given in custom_ops=; the Interpreter then runs the model."""
    from numlite.cli.main import main
    from numlite.kernels import KERNELS

    model = models["custom"]
    triple = lambda x: np.maximum(x, 0) * np.float32(3)  # noqa: E731 (what the op replaced computes)
    report = numlite.ops_report(model, custom_ops={"MyUnknownOp": triple})
    assert report.numlite_can_run and _rows(report)["MyUnknownOp"][4:] == (True, False)
    assert "yes (custom_ops)" in str(report)
    interpreter = numlite.Interpreter(model_content=model, custom_ops={"MyUnknownOp": triple})
    interpreter.allocate_tensors()  # numlite does run it

    monkeypatch.setitem(KERNELS, "MyUnknownOp", interpreter.kernels["MyUnknownOp"])
    assert main(["ops", _file(tmp_path, "custom", model)]) == 0
    assert _row(capsys.readouterr().out, "MyUnknownOp") == "MyUnknownOp (custom) | 1 | 1 | 0 | yes | no (unresolved custom op)"


def test_ops_custom_op_litert_has(tmp_path, capsys):
    """TFLite_Detection_PostProcess: a custom op LiteRT's resolver registers (and allocates the
    model), built into numlite too; beside it an unknown custom op, told apart by the probes."""
    from numlite.cli.main import main

    model = _detection_model("RELU")
    assert _litert_allocates(model)
    rows = _rows(numlite.ops_report(model))
    assert rows == {"TFLite_Detection_PostProcess": (True, 1, 1, [0], True, True), "RELU": (False, 1, 1, [0], True, True)}
    assert main(["ops", _file(tmp_path, "detection", _detection_model("NoSuchOp"))]) == 3
    out = capsys.readouterr().out
    assert _row(out, "TFLite_Detection_PostProcess") == "TFLite_Detection_PostProcess (custom) | 1 | 1 | 0 | yes | yes"
    assert _row(out, "NoSuchOp") == "NoSuchOp (custom) | 1 | 1 | 0 | no (no kernel) | no (unresolved custom op)"


def test_ops_builtin_version_litert_lacks(models):
    m = read_model(models["signatures"])
    add = next(c for c in m.operator_codes if c.builtin == "ADD")
    add.version = 99
    model = write_model(m)
    with pytest.raises(ValueError, match="Didn't find op for builtin opcode 'ADD' version '99'"):
        LiteRTInterpreter(model_content=model)
    rows = _rows(numlite.ops_report(model))
    assert rows["ADD"] == (False, 99, 1, [0], True, False) and rows["MUL"][4:] == (True, True)
    assert "no (no kernel for version 99)" in str(numlite.ops_report(model))


def test_ops_without_litert(models, tmp_path, capsys, monkeypatch):
    from numlite.cli.main import main

    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)  # import ai_edge_litert raises ImportError
    report = numlite.ops_report(models["cnn"])
    assert report.litert_version is None and all(op.litert is None for op in report.ops)
    assert main(["ops", _file(tmp_path, "cnn", models["cnn"])]) == 0
    out = capsys.readouterr().out
    assert _row(out, "CONV_2D") == "CONV_2D | 1 | 1 | 0 | yes | LiteRT not installed"
    assert out.rstrip().endswith("numlite can run every operator; LiteRT not installed")


def test_litert_internals_explain_themselves(models):
    """LiteRT's instance attributes: the signature defs work; the C++ objects raise a clear
    UnavailableError that is also an AttributeError (so hasattr is False)."""
    ours, theirs = _pair(models["signatures"])
    assert_same(ours._signature_defs, theirs._signature_defs, "_signature_defs")
    for name in ("_interpreter", "_delegates", "_custom_op_registerers", "_metrics"):
        assert hasattr(theirs, name) and not hasattr(ours, name)
        with pytest.raises(numlite.UnavailableError, match=f"numlite.Interpreter has no {name}: in LiteRT it holds"):
            getattr(ours, name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'") as info:
        ours.no_such_thing  # noqa: B018
    assert not isinstance(info.value, numlite.UnavailableError)
