"""The model verifier: malformed or oversized models are rejected with a ModelError naming the
place, before anything is allocated; real models pass, and LiteRT rejects what numlite rejects."""

from __future__ import annotations

import importlib

import flatbuffers
import numpy as np
import pytest
import tensorflow as tf
import tflite

import numlite
import numlite.model.verifier as verifier
from helpers import convert, convert_keras, litert_interpreter
from numlite.model import (
    Buffer,
    DimensionMetadata,
    Model,
    Operator,
    OperatorCode,
    Options,
    Quantization,
    Sparsity,
    Subgraph,
    Tensor,
    read_model,
    write_model,
)
from numlite.model.verifier import verify_flatbuffer, verify_model, verify_subgraph_calls


def small_model() -> bytes:
    return convert(
        lambda a, b: tf.nn.relu(a * b + 1.0) - b,
        [tf.TensorSpec((2, 3), tf.float32), tf.TensorSpec((3,), tf.float32)],
        key="verifier-small",
    )


def keras_model() -> bytes:
    def build():
        tf.keras.utils.set_random_seed(2)
        inputs = tf.keras.Input((6, 6, 2), batch_size=1)
        x = tf.keras.layers.Conv2D(3, 3, padding="same", activation="relu")(inputs)
        x = tf.keras.layers.Flatten()(x)
        return tf.keras.Model(inputs, tf.keras.layers.Dense(4)(x))

    return convert_keras(build, "verifier-keras")


def while_model() -> bytes:
    def fn(x):
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), [tf.constant(0), x])
        return y

    return convert(fn, [tf.TensorSpec((2,), tf.float32)], key="verifier-while")


def quantized_conv_model() -> bytes:
    # Dynamic-range quantization stores the conv filter as int8 with one scale per output
    # channel (the converter only quantizes weights of 1024 elements or more).
    weights = np.random.default_rng(0).uniform(-1, 1, (3, 3, 8, 32)).astype(np.float32)
    return convert(
        lambda x: tf.nn.conv2d(x, weights, 1, "SAME"),
        [tf.TensorSpec((1, 5, 5, 8), tf.float32)],
        key="verifier-quantized-conv",
        optimizations=[tf.lite.Optimize.DEFAULT],
    )


def string_model() -> bytes:
    return convert(
        lambda x: tf.equal(x, tf.constant(["a", "bc"])), [tf.TensorSpec((2,), tf.string)], key="verifier-string"
    )


def tensor_named(model: Model, name_part: str, subgraph: int = 0) -> tuple[int, Tensor]:
    for i, t in enumerate(model.subgraphs[subgraph].tensors):
        if name_part in t.name:
            return i, t
    raise AssertionError(f"no tensor named like {name_part!r}")


def constant_index(model: Model, subgraph: int = 0) -> int:
    return next(i for i, t in enumerate(model.subgraphs[subgraph].tensors) if len(model.buffers[t.buffer]))


def rejects(model: Model, match: str) -> None:
    with pytest.raises(numlite.ModelError, match=match):
        verify_model(model)


# ------------------------------------------------------------------------------ real models pass


@pytest.mark.parametrize("make", [small_model, keras_model, while_model, quantized_conv_model, string_model])
def test_converted_models_pass(make):
    content = make()
    verify_flatbuffer(content)
    model = read_model(content)  # which verifies too
    verify_model(model, file_size=len(content))
    verify_model(read_model(write_model(model)))  # and so does what numlite writes


def test_quantized_model_exercises_the_per_channel_checks():
    model = read_model(quantized_conv_model())
    per_channel = [
        t for t in model.subgraphs[0].tensors
        if t.quantization is not None and t.quantization.scale is not None and len(t.quantization.scale) > 1
    ]
    assert per_channel, "the converter stored no per-channel quantization; the test checks nothing"
    t = per_channel[0]
    t.quantization = Quantization(
        scale=t.quantization.scale[:-1], zero_point=t.quantization.zero_point[:-1],
        quantized_dimension=t.quantization.quantized_dimension,
    )  # fmt: skip
    rejects(model, "per-channel scales, but dimension")


# ------------------------------------------------------------------------------ flatbuffer structure


def _field_position(table, slot: int) -> int:
    """Byte position of a field of a generated table object (0 if absent)."""
    o = table._tab.Offset(4 + 2 * slot)
    return table._tab.Pos + o if o else 0


def test_root_offset_outside_the_buffer():
    content = bytearray(small_model())
    content[0:4] = (len(content) + 100).to_bytes(4, "little")
    with pytest.raises(numlite.ModelError, match="malformed TFLite flatbuffer at root"):
        read_model(bytes(content))


def test_vector_longer_than_the_buffer():
    content = bytearray(small_model())
    tensor = tflite.Model.GetRootAs(bytes(content), 0).Subgraphs(0).Tensors(1)
    start = tensor._tab.Vector(tensor._tab.Offset(4)) - 4  # the shape vector's length field
    content[start : start + 4] = (10**6).to_bytes(4, "little")
    with pytest.raises(numlite.ModelError, match=r"subgraphs\[0\]\.tensors\[1\]\.shape: vector of 1000000"):
        read_model(bytes(content))


def test_string_without_terminator():
    content = bytearray(small_model())
    tensor = tflite.Model.GetRootAs(bytes(content), 0).Subgraphs(0).Tensors(0)
    start = tensor._tab.Indirect(_field_position(tensor, 3))  # the name string
    length = int.from_bytes(content[start : start + 4], "little")
    content[start + 4 + length] = ord("x")
    with pytest.raises(numlite.ModelError, match="not NUL-terminated"):
        read_model(bytes(content))


def test_vtable_outside_the_buffer():
    content = bytearray(small_model())
    tensor = tflite.Model.GetRootAs(bytes(content), 0).Subgraphs(0).Tensors(0)
    content[tensor._tab.Pos : tensor._tab.Pos + 4] = (-(10**6)).to_bytes(4, "little", signed=True)
    with pytest.raises(numlite.ModelError, match=r"tensors\[0\]: Tensor table .* vtable outside the buffer"):
        read_model(bytes(content))


def test_unknown_options_type():
    content = bytearray(small_model())
    op = tflite.Model.GetRootAs(bytes(content), 0).Subgraphs(0).Operators(0)
    position = _field_position(op, 3)  # builtin_options_type
    assert position
    content[position] = 250
    with pytest.raises(numlite.ModelError, match="unknown BuiltinOptions type 250"):
        read_model(bytes(content))


def _module(name: str):
    return importlib.import_module(f"tflite.{name}")


def tiny_flatbuffer(
    buffer_offset: int = 0, buffer_size: int = 0, custom_offset: int = 0, custom_size: int = 0, copies: int = 1
) -> bytes:
    """A model built field by field: one subgraph (listed ``copies`` times, all the same table)
    whose output is constant tensor 0, stored in buffer 1 at ``buffer_offset`` (a large-model
    buffer) when given; with ``custom_offset``, a CUSTOM op with large custom options."""
    b = flatbuffers.Builder(0)
    T, S, B, M, O, C = (_module(n) for n in ("Tensor", "SubGraph", "Buffer", "Model", "Operator", "OperatorCode"))
    name = b.CreateString("c")
    T.StartShapeVector(b, 1)
    b.PrependInt32(2)
    shape = b.EndVector()
    T.Start(b)
    T.AddShape(b, shape)
    T.AddType(b, tflite.TensorType.FLOAT32)
    T.AddBuffer(b, 1)
    T.AddName(b, name)
    tensor = T.End(b)
    ops = []
    if custom_offset:
        O.StartOutputsVector(b, 1)
        b.PrependInt32(0)
        outputs = b.EndVector()
        O.Start(b)
        O.AddOutputs(b, outputs)
        O.AddLargeCustomOptionsOffset(b, custom_offset)
        O.AddLargeCustomOptionsSize(b, custom_size)
        ops.append(O.End(b))
    S.StartTensorsVector(b, 1)
    b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    S.StartOutputsVector(b, 1)
    b.PrependInt32(0)
    outputs = b.EndVector()
    S.StartOperatorsVector(b, len(ops))
    for op in ops:
        b.PrependUOffsetTRelative(op)
    operators = b.EndVector()
    S.Start(b)
    S.AddTensors(b, tensors)
    S.AddOutputs(b, outputs)
    S.AddOperators(b, operators)
    subgraph = S.End(b)
    buffers = []
    for offset, size in ((0, 0), (buffer_offset, buffer_size)):
        B.Start(b)
        if offset:
            B.AddOffset(b, offset)
            B.AddSize(b, size)
        buffers.append(B.End(b))
    custom = b.CreateString("MyOp")
    C.Start(b)
    C.AddBuiltinCode(b, tflite.BuiltinOperator.CUSTOM)
    C.AddCustomCode(b, custom)
    code = C.End(b)
    vectors = []
    for items in ([subgraph] * copies, buffers, [code]):
        b.StartVector(4, len(items), 4)
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        vectors.append(b.EndVector())
    M.Start(b)
    M.AddVersion(b, 3)
    M.AddSubgraphs(b, vectors[0])
    M.AddBuffers(b, vectors[1])
    M.AddOperatorCodes(b, vectors[2])
    b.Finish(M.End(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_large_model_buffer_after_the_flatbuffer():
    # Models over 2 GB keep weights after the flatbuffer, addressed by offset and size.
    values = np.array([1.5, -2.0], np.float32)
    size = len(tiny_flatbuffer(buffer_offset=1 << 20, buffer_size=8))  # same layout, any offset
    offset = (size + 15) // 16 * 16
    content = tiny_flatbuffer(buffer_offset=offset, buffer_size=8).ljust(offset, b"\0") + values.tobytes()
    model = read_model(content)
    np.testing.assert_array_equal(model.constant(model.subgraphs[0], 0), values)
    with pytest.raises(numlite.ModelError, match=r"buffers\[1\]: data at file offset .* lies outside"):
        read_model(content[:-1])


def test_large_custom_options_outside_the_file():
    content = tiny_flatbuffer(custom_offset=1 << 20, custom_size=16)
    with pytest.raises(numlite.ModelError, match=r"operators\[0\]: data at file offset 1048576 of 16 bytes"):
        read_model(content)


def test_tables_shared_between_parents_are_bounded():
    read_model(tiny_flatbuffer(copies=3))  # a few shared subgraphs are tolerated
    with pytest.raises(numlite.ModelError, match="tables shared"):
        read_model(tiny_flatbuffer(copies=2000))


# ------------------------------------------------------------------------------ indices


def test_tensor_buffer_index_out_of_range():
    model = read_model(small_model())
    i = constant_index(model)
    model.subgraphs[0].tensors[i].buffer = len(model.buffers) + 3
    rejects(model, rf"subgraph 0, tensor {i} \('.*'\) refers to buffer {len(model.buffers) + 3}")


def test_operator_input_out_of_range_is_rejected_when_read():
    model = read_model(small_model())
    model.subgraphs[0].operators[0].inputs[0] = 99
    with pytest.raises(numlite.ModelError, match=r"subgraph 0: node 0 \(\w+\) input refers to tensor 99"):
        numlite.Interpreter(model_content=write_model(model))


def test_optional_inputs_are_allowed():
    model = read_model(small_model())
    model.subgraphs[0].operators[0].inputs.append(-1)
    verify_model(model)
    model.subgraphs[0].operators[0].inputs[-1] = -2
    rejects(model, "input refers to tensor -2")


def test_operator_output_out_of_range():
    model = read_model(small_model())
    model.subgraphs[0].operators[1].outputs = [len(model.subgraphs[0].tensors)]
    rejects(model, r"node 1 \(\w+\) output refers to tensor")


def test_tensor_both_input_and_output_of_a_node():
    model = read_model(small_model())
    op = model.subgraphs[0].operators[0]
    op.outputs = [op.inputs[0]]
    rejects(model, "is both an input and an output")


def test_a_node_writing_a_constant_is_rejected():
    """Fuzz case 1961: a node's output pointed at a buffer of data. The NumPy engine failed at
    invoke (a read-only array) while the compiled engine ran it. LiteRT's kernels write into the
    model's own bytes (mapped read-only when the model is a file), and its XNNPACK delegate
    rejects some such nodes: numlite rejects the model, naming the node and the tensor."""
    model = read_model(small_model())
    model.buffers.append(Buffer(np.frombuffer(np.ones((2, 3), np.float32).tobytes(), np.uint8)))
    output = model.subgraphs[0].operators[0].outputs[0]
    tensor = model.subgraphs[0].tensors[output]
    assert tensor.shape == (2, 3) and tensor.type == "FLOAT32"
    tensor.buffer = len(model.buffers) - 1
    match = rf"subgraph 0, node 0 \(MUL\): output tensor {output} \('.*'\) is a constant \(buffer {tensor.buffer} holds its data\)"
    rejects(model, match)
    with pytest.raises(numlite.ModelError, match=match):
        numlite.Interpreter(model_content=write_model(model), jit=False)
    tensor.is_variable = True  # state a node writes in place: allowed
    verify_model(model)


def test_opcode_index_out_of_range():
    model = read_model(small_model())
    model.subgraphs[0].operators[2].opcode_index = 40
    rejects(model, "subgraph 0, node 2: opcode index 40 out of range")


def test_unknown_builtin_operator():
    model = read_model(small_model())
    model.operator_codes[0].builtin = "UNKNOWN_BUILTIN_999"
    rejects(model, "operator code 0: unknown builtin operator")


def test_custom_operator_without_custom_code():
    model = read_model(small_model())
    model.operator_codes[0] = OperatorCode("CUSTOM", None)
    rejects(model, "CUSTOM operator without a custom code")


def test_subgraph_inputs_and_outputs_in_range():
    model = read_model(small_model())
    model.subgraphs[0].outputs = [-1]
    rejects(model, "subgraph 0: output list refers to tensor -1")


def test_signatures_point_at_real_tensors_of_real_subgraphs():
    model = read_model(keras_model())
    assert model.signature_defs
    sig = model.signature_defs[0]
    name = next(iter(sig.inputs))
    sig.inputs[name] = 500
    rejects(model, rf"signature '{sig.key}': input '{name}' refers to tensor 500")
    sig.inputs[name] = 0
    sig.subgraph_index = 4
    rejects(model, rf"signature '{sig.key}' refers to subgraph 4")


# ------------------------------------------------------------------------------ buffers and shapes


def test_buffer_size_must_match_shape_and_type():
    model = read_model(small_model())
    i = constant_index(model)
    t = model.subgraphs[0].tensors[i]
    t.shape = (7,)
    rejects(model, rf"tensor {i} .*: buffer {t.buffer} has 4 bytes, but shape \(7,\) of FLOAT32 needs 28")
    t.shape, t.type = (), "FLOAT64"
    rejects(model, "needs 8")


def test_packed_int4_constants_are_accepted():
    model = read_model(small_model())
    i = constant_index(model)
    t = model.subgraphs[0].tensors[i]
    model.buffers[t.buffer] = Buffer(np.zeros(3, np.uint8))
    t.shape, t.type = (5,), "INT4"  # 5 four-bit values in 3 bytes
    verify_model(model)


def test_constants_need_a_known_shape_and_a_representable_type():
    model = read_model(small_model())
    t = model.subgraphs[0].tensors[constant_index(model)]
    t.shape = (-1,)
    rejects(model, "constant tensor with an unknown dimension")
    t.shape, t.type = (2,), "BFLOAT16"
    rejects(model, "constant data of type BFLOAT16")


@pytest.mark.parametrize(
    "shape, match",
    [
        ((2, -2), "invalid shape"),
        ((1,) * 33, "33 dimensions, more than numlite's limit of 32"),
        ((2**31 - 1, 2), "elements, more than numlite's limit"),
        ((2**29, 3), "needs 6442450944 bytes, more than numlite's limit"),
    ],
)
def test_forged_shapes_are_bounded(shape, match):
    model = read_model(small_model())
    model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].shape = shape
    with pytest.raises(numlite.ModelError, match=match):
        numlite.Interpreter(model_content=write_model(model))


def test_runtime_memory_of_a_subgraph_is_bounded():
    model = read_model(small_model())
    sg = model.subgraphs[0]
    runtime = [t for t in sg.tensors if not len(model.buffers[t.buffer])]
    for t in runtime:
        t.shape = (2**30,)  # 4 GiB each: allowed alone, not all together
    assert len(runtime) * 2**32 > verifier.MAX_SUBGRAPH_BYTES
    rejects(model, "subgraph 0: its tensors computed at run time need")


def test_limits_are_module_constants(monkeypatch):
    content = keras_model()
    numlite.Interpreter(model_content=content)
    monkeypatch.setattr(verifier, "MAX_TENSOR_BYTES", 100)
    with pytest.raises(numlite.ModelError, match=r"more than numlite's limit of 100 \(numlite.model.verifier"):
        numlite.Interpreter(model_content=content)


def test_string_buffers():
    model = read_model(string_model())
    i, t = next((i, t) for i, t in enumerate(model.subgraphs[0].tensors) if t.type == "STRING" and len(model.buffers[t.buffer]))
    data = np.array(model.buffers[t.buffer].data)
    good = data.copy()
    data[:4] = np.frombuffer(np.int32(3).tobytes(), np.uint8)  # 3 strings in a 2-element tensor
    model.buffers[t.buffer] = Buffer(data)
    rejects(model, "cannot hold 3 strings|holds 3 strings")
    data = good.copy()
    data[8:12] = np.frombuffer(np.int32(1000).tobytes(), np.uint8)  # an offset past the end
    model.buffers[t.buffer] = Buffer(data)
    rejects(model, "string offsets outside")
    model.buffers[t.buffer] = Buffer(good[:2])
    rejects(model, "has no string count")


# ------------------------------------------------------------------------------ quantization


@pytest.mark.parametrize(
    "quantization, match",
    [
        (Quantization(np.ones(2, np.float32), np.zeros(3, np.int64)), "2 scales but 3 zero points"),
        (Quantization(np.ones(2, np.float32), None), "2 scales but no zero points"),
        (Quantization(np.ones(2, np.float32), np.zeros(2, np.int64), quantized_dimension=5), "quantized dimension 5"),
        (Quantization(np.ones(3, np.float32), np.zeros(3, np.int64)), "3 per-channel scales, but dimension 0"),
    ],
)
def test_inconsistent_quantization_is_rejected_as_by_litert(quantization, match):
    model = read_model(small_model())
    model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]].quantization = quantization  # shape (2, 3)
    content = write_model(model)
    with pytest.raises(numlite.ModelError, match=match):
        numlite.Interpreter(model_content=content)
    with pytest.raises((ValueError, RuntimeError), match="quantization|zero_point|scale"):
        litert_interpreter(content).allocate_tensors()


def test_node_overlap_and_buffer_size_are_rejected_as_by_litert():
    for mutate in ("overlap", "size"):
        model = read_model(small_model())
        if mutate == "overlap":
            op = model.subgraphs[0].operators[0]
            op.outputs = [op.inputs[0]]
        else:
            model.subgraphs[0].tensors[constant_index(model)].shape = (9,)
        content = write_model(model)
        with pytest.raises(numlite.ModelError):
            numlite.Interpreter(model_content=content)
        with pytest.raises((ValueError, RuntimeError)):
            litert_interpreter(content).allocate_tensors()


# ------------------------------------------------------------------------------ sparsity


def test_sparsity_is_bounded():
    model = read_model(keras_model())
    i, t = next((i, t) for i, t in enumerate(model.subgraphs[0].tensors) if len(model.buffers[t.buffer]) and len(t.shape) == 4)
    t.sparsity = Sparsity(list(range(4)), [], [DimensionMetadata("DENSE", d) for d in t.shape])
    verify_model(model)  # a dense layout of the whole tensor
    t.sparsity.dim_metadata[1] = DimensionMetadata("DENSE", 2**20)
    rejects(model, rf"tensor {i} .*: sparsity level 1 addresses")
    t.sparsity = Sparsity([0, 1, 2], [], [DimensionMetadata("DENSE", d) for d in t.shape[:3]])
    rejects(model, "3 traversal levels")
    levels = [DimensionMetadata("DENSE", d) for d in t.shape[:3]] + [DimensionMetadata("SPARSE_CSR")]
    t.sparsity = Sparsity(list(range(4)), [], levels)
    rejects(model, "lacks its segments or indices")


# ------------------------------------------------------------------------------ subgraph calls


def test_subgraph_calling_itself():
    model = read_model(while_model())
    op = model.subgraphs[0].operators[0]
    body = op.builtin_options.body_subgraph_index
    op.builtin_options = Options("WhileOptions", cond_subgraph_index=0, body_subgraph_index=body)
    with pytest.raises(numlite.ModelError, match=r"cycle: subgraph 0 node 0 \(WHILE\) -> subgraph 0"):
        numlite.Interpreter(model_content=write_model(model))


def test_call_to_a_missing_subgraph():
    model = read_model(while_model())
    model.subgraphs[0].operators[0].builtin_options.body_subgraph_index = 7
    rejects(model, r"subgraph 0, node 0 \(WHILE\) calls subgraph 7, but the model has 3")


def call_chain(length: int) -> Model:
    """Subgraph k calls subgraph k + 1 with CALL_ONCE, ``length`` calls deep."""
    subgraphs = [
        Subgraph(operators=[Operator(0, [], [], Options("CallOnceOptions", init_subgraph_index=k + 1))])
        for k in range(length)
    ]
    return Model(operator_codes=[OperatorCode("CALL_ONCE")], subgraphs=subgraphs + [Subgraph()])


def test_call_depth_is_bounded_without_recursion():
    verify_subgraph_calls(call_chain(verifier.MAX_CALL_DEPTH))
    with pytest.raises(numlite.ModelError, match="nest deeper than"):
        verify_subgraph_calls(call_chain(verifier.MAX_CALL_DEPTH + 1))
    with pytest.raises(numlite.ModelError, match="nest deeper than"):
        verify_subgraph_calls(call_chain(5000))  # far beyond Python's recursion limit
    model = call_chain(3)
    model.subgraphs[3].operators = [Operator(0, [], [], Options("CallOnceOptions", init_subgraph_index=1))]
    cycle = "cycle: subgraph 1 node 0 .* -> subgraph 2; subgraph 2 .*; subgraph 3 node 0 .* -> subgraph 1$"
    with pytest.raises(numlite.ModelError, match=cycle):
        verify_subgraph_calls(model)


# ------------------------------------------------------------------------------ nothing else escapes


def test_hand_built_models_with_wrong_value_kinds():
    model = Model(subgraphs=[Subgraph(tensors=[Tensor("t", ("a", 2))])])
    rejects(model, "malformed model: TypeError")
    rejects(Model(), "no subgraphs")
