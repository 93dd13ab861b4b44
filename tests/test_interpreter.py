"""The Interpreter's behaviour around the kernels: state, errors, memory, details, signatures."""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

import numlite
from helpers import assert_close, convert, convert_keras, random_inputs, run_litert
from numlite.interpreter.runtime import direct_call, in_place_inputs
from numlite.kernels import Kernel, Spec
from numlite.model import read_model, write_model


def chain_model():
    def f(a, b):
        x = a * b
        for k in range(6):
            x = tf.nn.relu(x + float(k)) * b - a
        return x, a + b

    return convert(f, [tf.TensorSpec((4, 8), tf.float32), tf.TensorSpec((4, 8), tf.float32)])


def dynamic_batch_model():
    return convert(lambda a, b: a * b + b, [tf.TensorSpec((None, 3), tf.float32), tf.TensorSpec((3,), tf.float32)])


def keras_model():
    def build():
        tf.keras.utils.set_random_seed(2)
        inputs = tf.keras.Input((10, 10, 3), batch_size=1, name="pixels")
        x = tf.keras.layers.Conv2D(6, 3, activation="relu")(inputs)
        x = tf.keras.layers.Conv2D(6, 3, padding="same")(x)
        x = tf.keras.layers.Flatten()(x)
        return tf.keras.Model(inputs, tf.keras.layers.Dense(4, name="scores")(x))

    return convert_keras(build, "interpreter-keras")


def test_invoke_before_allocate_is_a_state_error():
    interpreter = numlite.Interpreter(model_content=chain_model())
    with pytest.raises(numlite.StateError, match="allocate_tensors"):
        interpreter.invoke()
    with pytest.raises(numlite.StateError):
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], np.zeros((4, 8), np.float32))


def test_invoke_after_resize_needs_allocate():
    interpreter = numlite.Interpreter(model_content=dynamic_batch_model())
    interpreter.allocate_tensors()
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [5, 3])
    with pytest.raises(numlite.StateError):
        interpreter.invoke()


def test_set_tensor_checks_dtype_and_shape():
    interpreter = numlite.Interpreter(model_content=chain_model())
    interpreter.allocate_tensors()
    index = interpreter.get_input_details()[0]["index"]
    with pytest.raises(numlite.InvalidInputError, match="FLOAT64 but expected type FLOAT32"):
        interpreter.set_tensor(index, np.zeros((4, 8)))
    with pytest.raises(ValueError, match="dimension mismatch"):  # also a ValueError, as in tf.lite
        interpreter.set_tensor(index, np.zeros((4, 9), np.float32))
    with pytest.raises(numlite.InvalidInputError, match="out of range"):
        interpreter.set_tensor(1000, np.zeros((4, 8), np.float32))


def test_interpreter_is_reusable_across_invokes():
    model = chain_model()
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    for seed in range(3):
        inputs = random_inputs(model, seed)
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
        for d, expected in zip(interpreter.get_output_details(), run_litert(model, inputs)):
            assert_close(interpreter.get_tensor(d["index"]), expected)


def test_resize_to_new_batch_sizes_matches_litert():
    model = dynamic_batch_model()
    interpreter = numlite.Interpreter(model_content=model)
    assert list(interpreter.get_input_details()[0]["shape_signature"]) == [-1, 3]
    for batch in (1, 4, 7):
        a = np.random.default_rng(batch).normal(size=(batch, 3)).astype(np.float32)
        b = np.arange(3, dtype=np.float32)
        interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [batch, 3], strict=True)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], a)
        interpreter.set_tensor(interpreter.get_input_details()[1]["index"], b)
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, [a, b])[0])


def test_strict_resize_only_changes_unknown_dimensions():
    for cls in (numlite.Interpreter, LiteRTInterpreter):
        interpreter = cls(model_content=dynamic_batch_model())
        with pytest.raises(RuntimeError, match="only allows mutating unknown dimensions"):
            interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], [2, 4], strict=True)


def test_unsupported_operators_are_all_listed_at_allocation():
    model = read_model(chain_model())
    model.operator_codes[0].builtin = "CALL"  # no kernel: not an operator LiteRT executes either
    model.operator_codes[1].builtin, model.operator_codes[1].custom_code = "CUSTOM", "MyFancyOp"
    interpreter = numlite.Interpreter(model_content=write_model(model))
    with pytest.raises(numlite.UnsupportedOperatorError) as info:
        interpreter.allocate_tensors()
    message = str(info.value)
    assert "CALL (subgraph 0, node" in message and "MyFancyOp (subgraph 0, node" in message


def test_custom_op_in_python():
    """A custom op implemented as a numlite kernel, checked against TensorFlow itself."""

    class HalfSquare(Kernel):
        def prepare(self, ins):
            return [Spec(ins[0].shape, ins[0].dtype)]

        def eval(self, ins, outs):
            np.multiply(ins[0], ins[0], out=outs[0])
            outs[0] *= 0.5

    model = read_model(convert(lambda x: tf.nn.relu(x), [tf.TensorSpec((3, 5), tf.float32)]))
    model.operator_codes[0].builtin, model.operator_codes[0].custom_code = "CUSTOM", "HalfSquare"
    model.subgraphs[0].operators[0].builtin_options = None
    interpreter = numlite.Interpreter(model_content=write_model(model), custom_kernels={"HalfSquare": HalfSquare})
    interpreter.allocate_tensors()
    x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), (0.5 * tf.square(x)).numpy())


def test_kernel_failure_names_the_node():
    class Broken(Kernel):
        def prepare(self, ins):
            return [Spec(ins[0].shape, ins[0].dtype)]

        def eval(self, ins, outs):
            raise ZeroDivisionError("boom")

    model = read_model(convert(lambda x: tf.nn.relu(x), [tf.TensorSpec((3,), tf.float32)]))
    model.operator_codes[0].builtin, model.operator_codes[0].custom_code = "CUSTOM", "Broken"
    interpreter = numlite.Interpreter(model_content=write_model(model), custom_kernels={"Broken": Broken})
    interpreter.allocate_tensors()
    x = interpreter.get_input_details()[0]
    interpreter.set_tensor(x["index"], np.ones(3, np.float32))
    with pytest.raises(numlite.InvokeError, match=r"subgraph 0, node 0 \(Broken\).*boom") as info:
        interpreter.invoke()
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert f"inputs: [{x['index']} {x['name']!r} float32 (3,)]" in str(info.value)  # the offending tensors


def test_inputs_without_data_are_named():
    interpreter = numlite.Interpreter(model_content=chain_model())
    interpreter.allocate_tensors()
    first, second = interpreter.get_input_details()
    interpreter.set_tensor(first["index"], np.ones((4, 8), np.float32))
    with pytest.raises(numlite.StateError, match=rf"without data: \[{second['index']} {second['name']!r}"):
        interpreter.invoke()


def test_failed_allocation_leaves_a_clear_state_and_recovers():
    model = dynamic_batch_model()
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    interpreter.resize_tensor_input(interpreter.get_input_details()[1]["index"], [5])  # (n, 3) * (5,) fails
    with pytest.raises(numlite.PrepareError):
        interpreter.allocate_tensors()
    with pytest.raises(numlite.StateError, match="last allocate_tensors\(\) failed"):
        interpreter.invoke()
    interpreter.resize_tensor_input(interpreter.get_input_details()[1]["index"], [3])
    interpreter.allocate_tensors()
    a, b = np.ones((1, 3), np.float32), np.arange(3, dtype=np.float32)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], a)
    interpreter.set_tensor(interpreter.get_input_details()[1]["index"], b)
    interpreter.invoke()
    assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, [a, b])[0])


def test_interpreter_is_usable_after_a_failed_invoke():
    calls = []

    class FailsOnce(Kernel):
        def prepare(self, ins):
            return [Spec(ins[0].shape, ins[0].dtype)]

        def eval(self, ins, outs):
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("transient")
            np.maximum(ins[0], 0, out=outs[0])

    model = read_model(convert(lambda x: tf.nn.relu(x), [tf.TensorSpec((4,), tf.float32)]))
    model.operator_codes[0].builtin, model.operator_codes[0].custom_code = "CUSTOM", "FailsOnce"
    interpreter = numlite.Interpreter(model_content=write_model(model), custom_kernels={"FailsOnce": FailsOnce})
    interpreter.allocate_tensors()
    x = np.array([-1, 2, -3, 4], np.float32)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    with pytest.raises(numlite.InvokeError, match="transient"):
        interpreter.invoke()
    interpreter.invoke()
    assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), tf.nn.relu(x).numpy())


def test_prepare_failure_names_the_node():
    model = read_model(convert(lambda a, b: a + b, [tf.TensorSpec((2, 3), tf.float32)] * 2))
    model.subgraphs[0].tensors[model.subgraphs[0].inputs[1]].shape = (4, 5)  # no longer broadcastable
    interpreter = numlite.Interpreter(model_content=write_model(model))
    with pytest.raises(numlite.PrepareError, match=r"subgraph 0, node 0 \(ADD\).*do not broadcast"):
        interpreter.allocate_tensors()


def test_preserve_all_tensors_matches_litert_intermediates():
    model = chain_model()
    inputs = random_inputs(model)
    ours = numlite.Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    theirs = LiteRTInterpreter(model_content=model, experimental_preserve_all_tensors=True)
    for interpreter in (ours, theirs):
        interpreter.allocate_tensors()
        for d, value in zip(interpreter.get_input_details(), inputs):
            interpreter.set_tensor(d["index"], value)
        interpreter.invoke()
    compared = 0
    for d in theirs.get_tensor_details():
        expected = theirs.get_tensor(d["index"])
        assert_close(ours.get_tensor(d["index"]), expected, what=d["name"])
        compared += 1
    assert compared == len(read_model(model).subgraphs[0].tensors)


def test_arena_reuses_memory_without_overlapping_live_tensors():
    interpreter = numlite.Interpreter(model_content=chain_model())
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    intermediates = [a for a in sg.arrays if a is not None and np.shares_memory(a, sg.arena)]
    total = sum(a.nbytes for a in intermediates)
    assert 0 < interpreter.arena_bytes < total  # memory is shared between tensors
    first, last = {}, {}
    for s, step in enumerate(sg.steps):
        for i in step.inputs:
            last[i] = s
        for o in step.outputs:
            first.setdefault(o, s)
            last.setdefault(o, s)
    # The one exception: an element-wise op writing over an input that dies there (in place).
    in_place = {
        (step.inputs[pos], step.outputs[0]) for s, step in enumerate(sg.steps)
        for pos in in_place_inputs(step.kernel) if last.get(step.inputs[pos]) == s
    }  # fmt: skip
    in_arena = [i for i, a in enumerate(sg.arrays) if a is not None and sg.arena.size and np.shares_memory(a, sg.arena)]
    shared = 0
    for x in in_arena:
        for y in in_arena:
            if x < y and not (last[x] < first[y] or last[y] < first[x]):
                if (x, y) in in_place and np.shares_memory(sg.arrays[x], sg.arrays[y]):
                    a, b = sg.arrays[x], sg.arrays[y]
                    assert a.ctypes.data == b.ctypes.data and a.nbytes == b.nbytes, (x, y)  # the very same bytes
                    # ... through the very same array: NumPy checks two views for overlap at
                    # every ufunc call (~0.16 us), one array written in place costs nothing
                    assert a.shape != b.shape or a is b, (x, y)
                    shared += 1
                    continue
                assert not np.shares_memory(sg.arrays[x], sg.arrays[y]), (x, y)
    assert shared > 0  # the chain's ADD, RELU, MUL and SUB write over their dying inputs


def test_in_place_ops_halve_a_swish_arena_and_match_litert():
    """x * sigmoid(x) on a large x: the MUL writes over the sigmoid (or x), so the arena holds
    two tensors of x's size, not three, and the results stay LiteRT's."""

    def swish(a):
        x = a * 2.0
        return tf.reduce_sum(x * tf.sigmoid(x), axis=1)

    model = convert(swish, [tf.TensorSpec((16, 1024), tf.float32)])
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    size = 16 * 1024 * 4
    assert 2 * size <= interpreter.arena_bytes < 3 * size
    inputs = random_inputs(model)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
    for _ in range(2):  # the second invoke runs the compiled program
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, inputs)[0])


def test_reshape_of_a_dying_tensor_takes_its_memory_and_copies_nothing():
    """RESHAPE's output takes over its input's bytes when the input dies there (whatever the
    shapes, same size): the arena holds one of the two and the compiled node does no work."""

    def f(a):
        return tf.reduce_sum(tf.reshape(a * 2.0, (8, -1)), axis=1)

    model = convert(f, [tf.TensorSpec((4, 256), tf.float32)])
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    (step,) = [st for st in sg.steps if st.op_name == "RESHAPE"]
    x, y = sg.arrays[step.inputs[0]], sg.arrays[step.outputs[0]]
    assert x.shape != y.shape and x.ctypes.data == y.ctypes.data and x.nbytes == y.nbytes
    fn, args = direct_call(step.kernel, step.ins, step.outs)
    assert fn is not np.copyto and args == ()
    inputs = random_inputs(model)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
    for _ in range(2):  # the second invoke runs the compiled program
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, inputs)[0])


def _invokes_match_litert(interpreter, model):
    """Three invokes on random inputs (the second on runs the compiled program), each giving
    LiteRT's output."""
    inputs = random_inputs(model)
    expected = run_litert(model, inputs)[0]
    for _ in range(3):
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
        interpreter.invoke()
        assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), expected)


def _split_gates(op, shape, axis, reread):
    """x * 2 cut in four along ``axis`` by ``op`` (SPLIT, SPLIT_V of sizes 1, 2, 3, 2 eighths,
    or UNPACK); the parts go through LOGISTIC, TANH, RELU and a MUL (in place where they may)
    and are put back together, and with ``reread`` the result is multiplied by the cut input,
    which is then still read after the cut."""

    def f(a):
        x = a * 2.0
        if op == "SPLIT":
            i, g, r, o = tf.split(x, 4, axis=axis)
        elif op == "SPLIT_V":
            eighth = shape[axis] // 8
            i, g, r, o = tf.split(x, [eighth, 2 * eighth, 3 * eighth, 2 * eighth], axis=axis)
        else:
            i, g, r, o = tf.unstack(x, axis=axis)
        parts = [tf.sigmoid(i), tf.tanh(g), tf.nn.relu(r), o * 3.0]
        y = tf.stack(parts, axis=axis) if op == "UNPACK" else tf.concat(parts, axis=axis)
        if not reread:
            return y
        return tf.reduce_sum(y) * x  # x read after y

    return convert(f, [tf.TensorSpec(shape, tf.float32)], key=("split-gates", op, shape, axis, reread))


@pytest.mark.parametrize(
    "op, shape, axis, reread, shared",
    [
        ("SPLIT", (1, 128), 1, False, True),  # an LSTM step's gates: consecutive slices of the input
        ("SPLIT", (8, 4, 3), 0, False, True),  # outermost axis
        ("SPLIT", (1, 1, 64, 3), 2, False, True),  # leading ones, then the split axis
        ("SPLIT", (2, 64), 1, False, False),  # parts interleave in memory: copied
        ("SPLIT", (1, 128), 1, True, False),  # the input is read again later: copied
        ("SPLIT_V", (1, 16, 2), 1, False, True),  # parts of different sizes
        ("SPLIT_V", (2, 16), 1, False, False),
        ("UNPACK", (4, 8, 3), 0, False, True),  # a sequence unstacked into its steps
        ("UNPACK", (1, 4, 8), 1, False, True),
        ("UNPACK", (8, 4), 1, False, False),
        ("UNPACK", (4, 8, 3), 0, True, False),
    ],
)
def test_split_parts_take_their_slices_of_a_dying_input(op, shape, axis, reread, shared):
    """SPLIT, SPLIT_V or UNPACK along the outermost axis of more than one element, of an input
    that dies there, gives each part its slice of the input's memory and copies nothing (no
    call in the compiled program); elsewhere it copies. Results are LiteRT's on every invoke."""
    model = _split_gates(op, shape, axis, reread)
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    (step,) = [st for st in sg.steps if st.op_name == op]
    x = sg.arrays[step.inputs[1 if op == "SPLIT" else 0]]
    parts = [sg.arrays[o] for o in step.outputs]
    fn, args = direct_call(step.kernel, step.ins, step.outs)
    if shared:
        assert [p.ctypes.data - x.ctypes.data for p in parts] == list(np.cumsum([0] + [p.nbytes for p in parts[:-1]]))
        assert fn.__name__ == "nothing" and args == ()
    else:
        assert not any(np.shares_memory(p, x) for p in parts)
        assert fn.__name__ != "nothing"
    _invokes_match_litert(interpreter, model)


def test_consecutive_element_wise_calls_on_adjacent_memory_are_one_call():
    """An LSTM step's input and forget gates are slices of one buffer after a SPLIT, each
    through LOGISTIC in place: the compiled program makes one LOGISTIC call over both (the
    cell gate's TANH and the output gate's LOGISTIC stay apart: not the same function, or not
    next to it). Results are LiteRT's on every invoke."""

    def f(a):
        i, fg, g, o = tf.split(a * 2.0, 4, axis=1)  # Keras's gate order
        return tf.concat([tf.sigmoid(i), tf.sigmoid(fg), tf.tanh(g), tf.sigmoid(o) * 3.0], axis=1)

    model = convert(f, [tf.TensorSpec((1, 64), tf.float32)], key="merge-adjacent-gates")
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    _invokes_match_litert(interpreter, model)
    sg = interpreter.subgraph(0)
    logistic = [(fn, args) for step, fn, args in sg._program.calls if step.op_name == "LOGISTIC"]
    nodes = [st for st in sg.steps if st.op_name == "LOGISTIC"]
    assert len(nodes) == 3 and len(logistic) == len(nodes) - 1
    (split,) = [st for st in sg.steps if st.op_name == "SPLIT"]
    gates = sg.arrays[split.inputs[1]]
    (merged,) = [args[0] for _, args in logistic if args[0].size == 32]
    assert merged.ctypes.data == gates.ctypes.data  # the input and forget gates, together


def test_merge_adjacent_keeps_the_two_calls_results():
    """merge_adjacent joins x1|x2 -> o1|o2 when both pairs follow each other in one buffer and
    the merged output is the merged input or apart from it; it refuses other layouts."""
    from numlite.interpreter.runtime import merge_adjacent

    buffer = np.arange(1, 65, dtype=np.float32) / 16
    x1, x2, o1, o2 = buffer[0:8], buffer[8:16], buffer[32:40], buffer[40:48]
    expected = np.tanh(buffer[0:16])
    merged = merge_adjacent((None, np.tanh, (x1, o1)), np.tanh, (x2, o2))
    assert merged is not None
    merged[1](*merged[2])
    np.testing.assert_array_equal(buffer[32:48], expected)  # the two calls' results
    assert merge_adjacent((None, np.tanh, (x1, o1)), np.tanh, (buffer[9:17], o2)) is None  # a gap
    assert merge_adjacent((None, np.tanh, (x1, o1)), np.exp, (x2, o2)) is None  # other function
    assert merge_adjacent((None, np.tanh, (x1, buffer[4:12])), np.tanh, (x2, buffer[12:20])) is None  # overlap
    other = np.zeros(8, np.float32)
    assert merge_adjacent((None, np.tanh, (x1, o1)), np.tanh, (x2, other)) is None  # another buffer
    in_place = merge_adjacent((None, np.tanh, (x1, x1)), np.tanh, (x2, x2))
    assert in_place is not None and in_place[2][0] is in_place[2][1]


def test_details_match_litert():
    model = keras_model()
    ours, theirs = numlite.Interpreter(model_content=model), LiteRTInterpreter(model_content=model)
    ours.allocate_tensors()
    theirs.allocate_tensors()
    pairs = [
        (ours.get_input_details(), theirs.get_input_details()),
        (ours.get_output_details(), theirs.get_output_details()),
        (ours.get_tensor_details(), theirs.get_tensor_details()),
    ]
    for mine, reference in pairs:
        assert len(mine) == len(reference)
        for a, b in zip(mine, reference):
            assert a.keys() == b.keys()
            for key in ("name", "index", "dtype", "quantization", "sparsity_parameters"):
                assert a[key] == b[key], key
            for key in ("shape", "shape_signature"):
                np.testing.assert_array_equal(a[key], b[key])
                assert a[key].dtype == b[key].dtype
            assert a["quantization_parameters"].keys() == b["quantization_parameters"].keys()
    assert ours.get_signature_list() == theirs.get_signature_list()


def test_signature_runner_matches_litert():
    model = keras_model()
    x = np.random.default_rng(5).normal(size=(1, 10, 10, 3)).astype(np.float32)
    results = []
    for cls in (numlite.Interpreter, LiteRTInterpreter):
        interpreter = cls(model_content=model)
        runner = interpreter.get_signature_runner()
        (name,) = runner.get_input_details()
        results.append(runner(**{name: x}))
    assert results[0].keys() == results[1].keys()
    for key in results[1]:
        assert_close(results[0][key], results[1][key])


def test_signature_runner_rejects_bad_calls():
    interpreter = numlite.Interpreter(model_content=keras_model())
    with pytest.raises(ValueError, match="Invalid signature_key"):
        interpreter.get_signature_runner("nope")
    runner = interpreter.get_signature_runner()
    with pytest.raises(ValueError, match="Invalid number of inputs"):
        runner()
    with pytest.raises(ValueError, match="Invalid Input name"):
        runner(wrong=np.zeros((1, 10, 10, 3), np.float32))


def test_constant_subexpressions_are_folded_at_allocation():
    def f(x):
        c = tf.range(6, dtype=tf.float32)  # constant, but computed by ops
        return x * tf.reshape(c * 2.0 + 1.0, (2, 3))

    model = convert(f, [tf.TensorSpec((2, 3), tf.float32)])
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    assert_close(run_litert(model, [np.ones((2, 3), np.float32)])[0], np.array([[1, 3, 5], [7, 9, 11]], np.float32))
    inputs = [np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)]
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
    interpreter.invoke()
    assert_close(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]), run_litert(model, inputs)[0])


def test_running_a_model_never_imports_tensorflow(tmp_path):
    """The interpreter's only dependencies are numpy, flatbuffers and tflite."""
    import subprocess
    import sys

    path = tmp_path / "m.tflite"
    path.write_bytes(keras_model())
    script = (
        "import sys, numpy as np, numlite\n"
        f"it = numlite.Interpreter(model_path={str(path)!r})\n"
        "it.allocate_tensors()\n"
        "d = it.get_input_details()[0]\n"
        "it.set_tensor(d['index'], np.ones(d['shape'], d['dtype']))\n"
        "it.invoke()\n"
        "import numlite.cli.main\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'ai_edge_litert'))\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_reallocation_reprepares_only_nodes_whose_inputs_changed():
    model = convert(lambda x, y: (x * 2.0, y + 1.0), [tf.TensorSpec((None, 3), tf.float32), tf.TensorSpec((4,), tf.float32)])
    interpreter = numlite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    sg = interpreter.subgraph(0)
    x_index = interpreter.get_input_details()[0]["index"]
    prepared = {step.index: step.prepared_for for step in sg.plan}
    interpreter.resize_tensor_input(x_index, [5, 3])
    interpreter.allocate_tensors()
    again = [step.index for step in sg.plan if step.prepared_for is not prepared[step.index]]
    assert again == [s.index for s in sg.plan if x_index in s.inputs]  # only the MUL on x
    inputs = [np.ones((5, 3), np.float32), np.arange(4, dtype=np.float32)]
    for d, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    interpreter.invoke()
    for d, expected in zip(interpreter.get_output_details(), run_litert(model, inputs)):
        assert_close(interpreter.get_tensor(d["index"]), expected)
