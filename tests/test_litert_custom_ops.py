"""The custom ops LiteRT's BuiltinOpResolver registers, built into numlite, judged by LiteRT.

LiteRT 2.3 registers five custom codes beside the builtins (tflite/core/kernels/register.cc):
TFLite_Detection_PostProcess, AudioSpectrogram, Mfcc, NumericVerify, aeq.hadamard_rotation.
Each test writes a one-op (or two-op) model with numlite's writer, the op's options a
flexbuffer map as the official converter stores them, and runs it in LiteRT (default resolver,
one thread) and numlite. Floats within 1e-5, classes and counts exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

import numlite
from helpers import assert_close, litert_interpreter, run_interpreter
from numlite.errors import InvokeError, PrepareError
from numlite.kernels import KERNELS
from numlite.model import write_model
from numlite.model.ir import Buffer, Model, Operator, OperatorCode, Quantization, Subgraph, Tensor

REGISTERED = ["NumericVerify", "Mfcc", "AudioSpectrogram", "TFLite_Detection_PostProcess", "aeq.hadamard_rotation"]


def _model(ops, tensors, inputs, outputs, consts=None) -> bytes:
    """A model of CUSTOM ops: ``ops`` are (custom code, input names, output names, options
    dict or raw bytes); ``tensors`` name -> (shape, type[, Quantization]); ``consts`` name -> array."""
    consts = consts or {}
    m, g, index, codes = Model(), Subgraph(), {}, {}
    for name, (shape, type_, *quant) in tensors.items():
        buffer = 0
        if name in consts:
            m.buffers.append(Buffer(np.frombuffer(np.ascontiguousarray(consts[name]).tobytes(), np.uint8)))
            buffer = len(m.buffers) - 1
        index[name] = len(g.tensors)
        g.tensors.append(Tensor(name, tuple(shape), type_, buffer, quant[0] if quant else None))
    for code, ins, outs, options in ops:
        if code not in codes:
            codes[code] = len(m.operator_codes)
            m.operator_codes.append(OperatorCode("CUSTOM", code, 1))
        raw = options if isinstance(options, (bytes, type(None))) else flexbuffers.Dumps(options)
        g.operators.append(Operator(codes[code], [index[n] for n in ins], [index[n] for n in outs], custom_options=raw))
    g.inputs, g.outputs = [index[n] for n in inputs], [index[n] for n in outputs]
    m.subgraphs.append(g)
    return write_model(m)


def _both(model: bytes, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(LiteRT's outputs, numlite's outputs)."""
    expected = run_interpreter(litert_interpreter(model), inputs)
    actual = run_interpreter(numlite.Interpreter(model_content=model), inputs)
    return expected, actual


def _numlite_error(model: bytes, inputs: list[np.ndarray] = ()) -> str:
    it = numlite.Interpreter(model_content=model)
    with pytest.raises((PrepareError, InvokeError)) as e:
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
    return str(e.value)


def test_litert_registers_these_custom_ops_and_numlite_has_them():
    """The list from register.cc, confirmed on the installed wheel: each code allocates in
    LiteRT's builtin resolver (an unknown code does not), and each has a numlite kernel."""
    x = {"x": ((2, 8), "FLOAT32"), "y": ((2, 8), "FLOAT32")}
    litert_interpreter(_model([("aeq.hadamard_rotation", ["x"], ["y"], {"hadamard_size": 8})], x, ["x"], ["y"]),
                       builtin_only=True).allocate_tensors()
    with pytest.raises(RuntimeError, match="unresolved custom op: NotRegistered"):
        litert_interpreter(_model([("NotRegistered", ["x"], ["y"], {})], x, ["x"], ["y"])).allocate_tensors()
    assert all(name in KERNELS for name in REGISTERED)


# -- TFLite_Detection_PostProcess --------------------------------------------------------------------


def _detection_model(n, columns, options, quantized=False, anchors_value=None, batch=1, rows=None):
    outputs = options["max_detections"] * options.get("max_classes_per_detection", 1)
    t = "UINT8" if quantized else "FLOAT32"
    qb = Quantization(np.array([0.05], np.float32), np.array([128])) if quantized else None
    qs = Quantization(np.array([1 / 255], np.float32), np.array([0])) if quantized else None
    tensors = {"boxes": ((batch, n, 4), t, qb), "scores": ((batch, n, columns), t, qs), "anchors": ((rows or n, 4), t, qs),
               "det_boxes": ((1, outputs, 4), "FLOAT32"), "det_classes": ((1, outputs), "FLOAT32"),
               "det_scores": ((1, outputs), "FLOAT32"), "count": ((1,), "FLOAT32")}
    consts = {} if anchors_value is None else {"anchors": anchors_value}
    return _model([("TFLite_Detection_PostProcess", ["boxes", "scores", "anchors"],
                    ["det_boxes", "det_classes", "det_scores", "count"], options)],
                  tensors, ["boxes", "scores"], ["det_boxes", "det_classes", "det_scores", "count"], consts)


def _detection_inputs(n, columns, seed, score_step=None, quantized=False):
    rng = np.random.default_rng(seed)
    anchors = np.stack([rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n),
                        rng.uniform(0.1, 0.4, n), rng.uniform(0.1, 0.4, n)], 1).astype(np.float32)
    boxes = rng.normal(0, 1, (1, n, 4)).astype(np.float32)
    scores = rng.uniform(0, 1, (1, n, columns)).astype(np.float32)
    if score_step:  # coarse scores: ties inside anchors and across classes
        scores = (np.round(scores / score_step) * score_step).astype(np.float32)
    if quantized:
        boxes = np.clip(np.round(boxes / 0.05 + 128), 0, 255).astype(np.uint8)
        scores = np.clip(np.round(scores * 255), 0, 255).astype(np.uint8)
        anchors = np.clip(np.round(anchors * 255), 0, 255).astype(np.uint8)
    return boxes, scores, anchors


def _options(**overrides):
    options = dict(max_detections=10, max_classes_per_detection=1, nms_score_threshold=0.1, nms_iou_threshold=0.5,
                   num_classes=4, y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)
    options.update(overrides)
    return options


DETECTION_CASES = {
    # name: (anchors, score columns, options, score step, quantized)
    "fast": (50, 5, _options(), None, False),
    "fast_3_classes_each_tied": (60, 7, _options(num_classes=6, max_classes_per_detection=3), 0.25, False),
    "fast_more_slots_than_classes": (40, 3, _options(num_classes=2, max_classes_per_detection=3), None, False),
    "fast_no_background": (50, 5, _options(num_classes=5, max_classes_per_detection=2), None, False),
    "fast_many": (300, 21, _options(num_classes=20, max_detections=100, nms_iou_threshold=0.6), None, False),
    "fast_few": (50, 5, _options(nms_score_threshold=0.97, nms_iou_threshold=0.3), None, False),
    "fast_nothing_passes": (50, 5, _options(nms_score_threshold=2.0), None, False),
    "regular_default_per_class": (50, 5, _options(use_regular_nms=True), None, False),
    "regular_3_per_class": (50, 5, _options(use_regular_nms=True, detections_per_class=3, max_detections=20), None, False),
    "regular_tied": (80, 7, _options(use_regular_nms=True, num_classes=6, max_detections=30), 0.25, False),
    "regular_many": (300, 21, _options(use_regular_nms=True, num_classes=20, max_detections=100, detections_per_class=10),
                     None, False),
    "regular_nothing_passes": (50, 5, _options(use_regular_nms=True, nms_score_threshold=2.0), None, False),
    "scales": (50, 5, _options(y_scale=5.0, x_scale=7.5, h_scale=2.5, w_scale=3.0, nms_iou_threshold=1.0), None, False),
    "uint8_fast": (64, 5, _options(max_classes_per_detection=2), None, True),
    "uint8_regular": (64, 5, _options(use_regular_nms=True), None, True),
}


@pytest.mark.parametrize("case", DETECTION_CASES)
def test_detection_postprocess_matches_litert(case):
    n, columns, options, step, quantized = DETECTION_CASES[case]
    boxes, scores, anchors = _detection_inputs(n, columns, seed=len(case), score_step=step, quantized=quantized)
    model = _detection_model(n, columns, options, quantized, anchors)
    expected, actual = _both(model, [boxes, scores])
    count = int(expected[3][0])
    assert actual[3].dtype == np.float32 and actual[3][0] == count
    if "nothing_passes" in case:
        assert count == 0
    elif case == "fast_few":
        assert 0 < count < options["max_detections"]
    elif case == "regular_3_per_class":
        assert count == 12  # 3 boxes for each of 4 classes, under max_detections=20
    else:
        assert count == options["max_detections"]
    per_detection = options["max_classes_per_detection"]
    if options.get("use_regular_nms"):
        written = np.arange(options["max_detections"])  # LiteRT zeroes every slot past the count
    else:  # fast NMS writes min(slots, classes) slots per detection, leaving the rest as they were
        written = (np.arange(count)[:, None] * per_detection + np.arange(min(per_detection, options["num_classes"]))).ravel()
    assert_close(actual[0][0, written], expected[0][0, written], what="boxes: ")
    assert_close(actual[1][0, written], expected[1][0, written], rtol=0, atol=0, what="classes: ")
    assert_close(actual[2][0, written], expected[2][0, written], what="scores: ")
    rest = np.setdiff1d(np.arange(actual[1].shape[1]), written)
    assert not actual[0][0, rest].any() and not actual[1][0, rest].any() and not actual[2][0, rest].any()
    if case == "fast_3_classes_each_tied":
        # The case reaches the libstdc++ partial_sort order: in some detection, classes of equal
        # score come out highest index first, which a stable sort would never give.
        classes = expected[1][0, written].reshape(count, per_detection)
        tied = expected[2][0, written].reshape(count, per_detection)
        assert ((tied[:, 1:] == tied[:, :-1]) & (classes[:, 1:] < classes[:, :-1])).any()


def test_detection_postprocess_runs_again_with_new_inputs():
    """A second invoke overwrites the first one's detections (slots past the count are zeros)."""
    n, columns = 50, 5
    model = _detection_model(n, columns, _options(), anchors_value=_detection_inputs(n, columns, 0)[2])
    it = numlite.Interpreter(model_content=model)
    lite = litert_interpreter(model)
    for seed, threshold_scale in ((1, 1.0), (2, 0.102)):
        boxes, scores, _ = _detection_inputs(n, columns, seed)
        scores = (scores * threshold_scale).astype(np.float32)
        expected = run_interpreter(lite, [boxes, scores])
        actual = run_interpreter(it, [boxes, scores])
        count = int(expected[3][0])
        assert actual[3][0] == count
        assert_close(actual[1][0, :count], expected[1][0, :count], rtol=0, atol=0)
        assert_close(actual[0][0, :count], expected[0][0, :count])
        assert not actual[2][0, count:].any()
    assert count < 10  # the second run found fewer boxes than the first


BAD_DETECTION = {
    # name: (options, or raw custom_options bytes; shape changes; what the error says)
    "not_a_flexbuffer_map": (b"\x01\x02\x03", {}, "not the map TFLite_Detection_PostProcess reads"),
    "a_string_option": (_options(num_classes="four"), {}, "'num_classes' must be a number"),
    "iou_zero": (_options(nms_iou_threshold=0.0), {}, "nms_iou_threshold is 0.0"),
    "scale_absent": ({k: v for k, v in _options().items() if k != "h_scale"}, {}, "h_scale is 0"),
    "classes_mismatch": (_options(num_classes=2), {}, "5 columns for num_classes=2"),
    "batch_2": (_options(), {"batch": 2}, "batch must be 1"),
    "anchors_too_few": (_options(), {"rows": 20}, "anchors (20, 4)"),
    "regular_zero_per_class": (_options(use_regular_nms=True, detections_per_class=0), {}, "detections_per_class=0"),
}


@pytest.mark.parametrize("case", BAD_DETECTION)
def test_detection_postprocess_refuses_bad_models(case):
    options, shapes, message = BAD_DETECTION[case]
    if isinstance(options, bytes):
        model = _model([("TFLite_Detection_PostProcess", ["boxes", "scores", "anchors"], ["b", "c", "s", "k"], options)],
                       {"boxes": ((1, 50, 4), "FLOAT32"), "scores": ((1, 50, 5), "FLOAT32"), "anchors": ((50, 4), "FLOAT32"),
                        "b": ((1, 10, 4), "FLOAT32"), "c": ((1, 10), "FLOAT32"), "s": ((1, 10), "FLOAT32"),
                        "k": ((1,), "FLOAT32")}, ["boxes", "scores", "anchors"], ["b", "c", "s", "k"])
    else:
        model = _detection_model(50, 5, options, **shapes)
    error = _numlite_error(model)
    assert "node 0 (TFLite_Detection_PostProcess)" in error and message in error, error


def test_detection_postprocess_negative_anchor_size_fails_in_both():
    n, columns = 20, 5
    boxes, scores, anchors = _detection_inputs(n, columns, 3)
    anchors[7, 2] = -0.2  # a negative height: ymin > ymax after decoding
    model = _detection_model(n, columns, _options(), anchors_value=anchors)
    with pytest.raises(RuntimeError):
        run_interpreter(litert_interpreter(model), [boxes, scores])
    assert "decoded box 7" in _numlite_error(model, [boxes, scores])


# -- AudioSpectrogram and Mfcc ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "samples, channels, window, stride, squared",
    [
        (16000, 1, 480, 320, True),  # speech commands: 30 ms windows every 20 ms at 16 kHz
        (16000, 1, 480, 320, False),
        (1000, 2, 200, 77, False),  # two channels, a window that is not a power of two
        (1000, 1, 256, 256, True),
        (100, 1, 300, 10, True),  # shorter than one window: no frames
        (50, 3, 2, 1, False),  # the smallest window
    ],
)
def test_audio_spectrogram_matches_litert(samples, channels, window, stride, squared):
    x = np.random.default_rng(samples + window).uniform(-1, 1, (samples, channels)).astype(np.float32)
    model = _model([("AudioSpectrogram", ["x"], ["y"], dict(window_size=window, stride=stride, magnitude_squared=squared))],
                   {"x": ((samples, channels), "FLOAT32"), "y": ((1, 1, 1), "FLOAT32")}, ["x"], ["y"])
    (expected,), (actual,) = _both(model, [x])
    frames = 0 if samples < window else 1 + (samples - window) // stride
    assert expected.shape == (channels, frames, (1 << (window - 1).bit_length()) // 2 + 1)
    assert_close(actual, expected)


def _mfcc_model(shape, options, spectrogram_first=None):
    tensors = {"spectrogram": (shape, "FLOAT32"), "rate": ((1,), "INT32"), "mfcc": ((1, 1, 1), "FLOAT32")}
    ops = [("Mfcc", ["spectrogram", "rate"], ["mfcc"], options)]
    inputs = ["spectrogram", "rate"]
    if spectrogram_first is not None:  # wav -> AudioSpectrogram -> Mfcc, as speech-commands models run
        tensors["wav"] = (spectrogram_first[0], "FLOAT32")
        ops.insert(0, ("AudioSpectrogram", ["wav"], ["spectrogram"], spectrogram_first[1]))
        inputs = ["wav", "rate"]
    return _model(ops, tensors, inputs, ["mfcc"])


MFCC_OPTIONS = dict(upper_frequency_limit=4000, lower_frequency_limit=20, filterbank_channel_count=40, dct_coefficient_count=13)


@pytest.mark.parametrize(
    "shape, rate, options",
    [
        ((1, 49, 257), 16000, MFCC_OPTIONS),  # the speech-commands defaults
        ((2, 5, 129), 8000, dict(upper_frequency_limit=3000.7, lower_frequency_limit=300.2,  # read as 3000 and 300
                                 filterbank_channel_count=20, dct_coefficient_count=20)),
        ((1, 3, 257), 16000, dict(MFCC_OPTIONS, filterbank_channel_count=10, dct_coefficient_count=1)),
        ((1, 4, 65), 16000, dict(MFCC_OPTIONS, upper_frequency_limit=7900, lower_frequency_limit=0)),
        ((1, 4, 65), 16000, dict(MFCC_OPTIONS, upper_frequency_limit=8200)),  # past the last bin: all zeros
    ],
)
def test_mfcc_matches_litert(shape, rate, options):
    x = (np.random.default_rng(shape[2]).uniform(0, 1, shape) ** 4 * 100).astype(np.float32)
    (expected,), (actual,) = _both(_mfcc_model(shape, options), [x, np.array([rate], np.int32)])
    assert expected.shape == (shape[0], shape[1], options["dct_coefficient_count"])
    assert_close(actual, expected)
    assert expected.any() == (options["upper_frequency_limit"] < 8000)


def test_spectrogram_into_mfcc_matches_litert():
    wav = np.random.default_rng(5).uniform(-0.5, 0.5, (16000, 1)).astype(np.float32)
    model = _mfcc_model((1, 49, 257), MFCC_OPTIONS,
                        ((16000, 1), dict(window_size=480, stride=320, magnitude_squared=True)))
    (expected,), (actual,) = _both(model, [wav, np.array([16000], np.int32)])
    assert expected.shape == (1, 49, 13)
    assert_close(actual, expected)


@pytest.mark.parametrize(
    "options, rate, message",
    [
        (dict(MFCC_OPTIONS, dct_coefficient_count=41), 16000, "dct_coefficient_count is 41"),
        (dict(MFCC_OPTIONS, lower_frequency_limit=4000), 16000, "must be above lower_frequency_limit"),
        (MFCC_OPTIONS, 0, "the sample rate is 0"),
    ],
)
def test_mfcc_options_litert_cannot_initialize_are_errors_in_both(options, rate, message):
    model = _mfcc_model((1, 3, 257), options)
    inputs = [np.ones((1, 3, 257), np.float32), np.array([rate], np.int32)]
    with pytest.raises(RuntimeError, match="mfcc.cc"):
        run_interpreter(litert_interpreter(model), inputs)
    error = _numlite_error(model, inputs)
    assert "node 0 (Mfcc)" in error and message in error


@pytest.mark.parametrize("options, message", [(dict(window_size=1, stride=1), "window_size is 1"),
                                              (dict(window_size=64), "stride is 0"),
                                              (None, "has no custom_options")])
def test_audio_spectrogram_bad_options(options, message):
    model = _model([("AudioSpectrogram", ["x"], ["y"], options)], {"x": ((100, 1), "FLOAT32"), "y": ((1, 1, 1), "FLOAT32")},
                   ["x"], ["y"])
    error = _numlite_error(model)
    assert "node 0 (AudioSpectrogram)" in error and message in error


# -- NumericVerify and aeq.hadamard_rotation ----------------------------------------------------------------


@pytest.mark.parametrize("type_, dtype, zero_point", [("INT8", np.int8, 3), ("UINT8", np.uint8, 128), ("INT16", np.int16, 0)])
def test_numeric_verify_matches_litert(type_, dtype, zero_point):
    """13 values: a block of 8 in LiteRT's vectorized dequantization, 5 in its scalar tail."""
    reference = np.random.default_rng(zero_point).uniform(-1, 1, (13,)).astype(np.float32)
    info = np.iinfo(dtype)
    q = np.clip(np.round(reference / 0.01) + zero_point, info.min, info.max).astype(dtype)
    quant = Quantization(np.array([0.01], np.float32), np.array([zero_point]))
    model = _model([("NumericVerify", ["q", "ref"], ["diff"], dict(tolerance=5.0, log_if_failed=True))],
                   {"q": ((13,), type_, quant), "ref": ((13,), "FLOAT32"), "diff": ((13,), "FLOAT32")}, ["q", "ref"], ["diff"])
    (expected,), (actual,) = _both(model, [q, reference])
    np.testing.assert_array_equal(actual, expected)  # the same float32 arithmetic, bit for bit
    q[9] += 10  # 0.1 off: over 5 x scale = 0.05
    with pytest.raises(RuntimeError, match="Mismatch"):
        run_interpreter(litert_interpreter(model), [q, reference])
    assert "element 9" in _numlite_error(model, [q, reference])


@pytest.mark.parametrize("shape, size", [((4, 16), 16), ((2, 3, 256), 128), ((3, 10), 4), ((2, 8), 1)])
def test_hadamard_rotation_matches_litert(shape, size):
    x = np.random.default_rng(size).normal(0, 1, shape).astype(np.float32)
    model = _model([("aeq.hadamard_rotation", ["x"], ["y"], dict(hadamard_size=size, random_binary_vector=[1, -1] * 2))],
                   {"x": (shape, "FLOAT32"), "y": (shape, "FLOAT32")}, ["x"], ["y"])
    (expected,), (actual,) = _both(model, [x])
    assert_close(actual, expected)


def test_hadamard_rotation_refuses_a_size_that_is_not_a_power_of_two():
    """LiteRT prints an error and copies the input through; numlite refuses the model."""
    model = _model([("aeq.hadamard_rotation", ["x"], ["y"], dict(hadamard_size=3))],
                   {"x": ((4, 12), "FLOAT32"), "y": ((4, 12), "FLOAT32")}, ["x"], ["y"])
    assert "hadamard_size is 3" in _numlite_error(model)


def test_official_converter_speech_features_run_like_litert_and_tensorflow():
    """The official converter (allow_custom_ops) turns tf.raw_ops.AudioSpectrogram and Mfcc into
    these custom ops, the frequency limits stored as floats; both runtimes give TensorFlow's values."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([4000, 1], tf.float32)])
    def features(wav):
        spectrogram = tf.raw_ops.AudioSpectrogram(input=wav, window_size=480, stride=320, magnitude_squared=True)
        return tf.raw_ops.Mfcc(spectrogram=spectrogram, sample_rate=tf.constant(16000), upper_frequency_limit=4000.0,
                               lower_frequency_limit=20.0, filterbank_channel_count=40, dct_coefficient_count=13)

    converter = tf.lite.TFLiteConverter.from_concrete_functions([features.get_concrete_function()], features)
    converter.allow_custom_ops = True
    model = converter.convert()
    read = numlite.model.read_model(model)
    assert [read.op_name(op) for op in read.subgraphs[0].operators][-2:] == ["AudioSpectrogram", "Mfcc"]
    wav = np.random.default_rng(9).uniform(-0.5, 0.5, (4000, 1)).astype(np.float32)
    (expected,), (actual,) = _both(model, [wav])
    assert expected.shape == (1, 12, 13)  # 1 + (4000 - 480) // 320 frames
    assert_close(actual, expected)
    assert_close(actual, features(wav).numpy())
