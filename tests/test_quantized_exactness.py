"""Exact integer accumulation at the edge of float32's exact range, against LiteRT.

numlite's integer and hybrid convolutions and matmuls accumulate in float32 when prepare can
prove every partial sum stays an exact float32 (``max |x| * sum |w| <= 2**24``), in float64
otherwise (numlite/kernels/quantized_blocks.py). These models sit on both sides of that bound
with every weight at +-127 (per-channel symmetric weights: each channel's largest weight is
127), inputs at the ends of the int8 range and input zero points at either edge (-128, 127).

The weights are arranged so that the first half of each output channel's terms are positive and
the rest negative: the running sum climbs past ``2**24`` (where float32 can no longer hold every
integer) and comes back down to a small result that the output scale resolves finely, so a
float32 accumulation beyond the bound would round partial sums and show in the outputs. Integer
outputs must equal LiteRT's reference kernels bit for bit and stay within one quantum of its
default kernels; hybrid (float) outputs match the reference kernels to float32 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter
from ai_edge_litert.interpreter import OpResolverType

from numlite.kernels.quantized_blocks import accumulation_dtype
from helpers import convert, run_interpreter, run_numlite

F32_DEPTH = 1024  # 128 * 127 * 1024 <= 2**24: float32 accumulation is exact
# 128 * 127 * 9216 > 2**24: float64 is needed. The running sums reach 4608 * 127 * 127, deep enough
# that a float32 accumulation (OpenBLAS's, which spreads a sum over several accumulators) does
# round: forcing float32 here makes these tests fail.
F64_DEPTH = 9216


def _signs(depth: int) -> np.ndarray:
    """+1 for the first half of the accumulation order, -1 after (each output channel shifted a
    little, so that channels differ)."""
    return np.where(np.arange(depth) < depth // 2, 1.0, -1.0).astype(np.float32)


def _weights(depth: int, channels: int, scale: float) -> np.ndarray:
    """``[depth, channels]`` of +-scale: every weight quantizes to +-127."""
    columns = [np.roll(_signs(depth), 37 * j) for j in range(channels)]
    return (np.stack(columns, axis=1) * scale).astype(np.float32)


def _pointwise_model(depth: int):
    w = _weights(depth, 6, 0.05).reshape(1, 1, depth, 6)

    def pointwise(x):
        return tf.nn.conv2d(x, w, 1, "VALID")

    return pointwise, [tf.TensorSpec([1, 8, 8, depth], tf.float32)]


def _conv3x3_model(depth: int):
    channels = depth // 9  # im2col order is (ky, kx, channel): signs follow that order
    w = _weights(depth, 4, 0.05).reshape(3, 3, channels, 4)

    def conv3x3(x):
        return tf.nn.conv2d(x, w, 1, "VALID")

    return conv3x3, [tf.TensorSpec([1, 10, 10, channels], tf.float32)]


def _fc_model(depth: int):
    w = _weights(depth, 5, 0.05)

    def fc(x):
        return tf.matmul(x, w)

    return fc, [tf.TensorSpec([64, depth], tf.float32)]


MODELS = {"pointwise": _pointwise_model, "conv3x3": _conv3x3_model, "fc": _fc_model}


def _sparse(shape, seed: int, count: float = 2) -> np.ndarray:
    """Where a few values (about ``count`` per accumulation) differ from the constant."""
    return np.random.default_rng(seed).random(shape) < count / shape[-1]


def _near_constant(shape, value: float, seed: int, spread: float, count: float = 2) -> np.ndarray:
    """``value`` everywhere but a few places drawn from ``value +- spread``: the balanced
    weights cancel the constant, leaving small results."""
    rng = np.random.default_rng(seed + 1000)
    x = np.full(shape, value, np.float32)
    mask = _sparse(shape, seed, count)
    x[mask] = (value + rng.uniform(-spread, spread, int(mask.sum()))).astype(np.float32)
    return x


def _full_integer(name: str, depth: int, edge: str) -> bytes:
    """int8 model; ``edge`` "low": inputs calibrated on [0, 1] (zero point -128), "high": on
    [-1, 0] (zero point 127)."""
    fn, specs = MODELS[name](depth)
    value = 1.0 if edge == "low" else -1.0

    def data():
        for k in range(6):
            # sparser than the test inputs: a narrow output range, finely quantized
            yield [np.clip(_near_constant(s.shape, value, 10 + k, 1.0, 1), min(0, value), max(0, value)) for s in specs]

    return convert(
        fn,
        specs,
        key=("exact_bound", name, depth, edge),
        optimizations=[tf.lite.Optimize.DEFAULT],
        representative_dataset=data,
        target_spec=tf.lite.TargetSpec(supported_ops=[tf.lite.OpsSet.TFLITE_BUILTINS_INT8]),
        inference_input_type=tf.int8,
        inference_output_type=tf.int8,
    )


def _litert(model: bytes, inputs, reference: bool) -> list[np.ndarray]:
    kwargs = {"experimental_op_resolver_type": OpResolverType.BUILTIN_REF} if reference else {}
    return run_interpreter(LiteRTInterpreter(model_content=model, **kwargs), inputs)


def _int8_inputs(model: bytes, edge: str, seed: int) -> list[np.ndarray]:
    """The int8 extreme (127 for the low edge, -128 for the high one) almost everywhere, any
    int8 value at a few places."""
    rng = np.random.default_rng(seed)
    extreme = 127 if edge == "low" else -128
    values = []
    for d in LiteRTInterpreter(model_content=model).get_input_details():
        x = np.full(d["shape"], extreme, np.int8)
        mask = _sparse(x.shape, seed + 100)
        x[mask] = rng.integers(-128, 128, int(mask.sum()))
        values.append(x)
    return values


def test_bound_chooses_float32_only_when_exact():
    assert accumulation_dtype(128, 127 * F32_DEPTH) == np.float32
    assert accumulation_dtype(128, 1 << 17) == np.float32
    assert accumulation_dtype(128, (1 << 17) + 1) == np.float64  # 2**24 / 128 = 2**17
    assert accumulation_dtype(128, 127 * F64_DEPTH) == np.float64
    assert accumulation_dtype(255, 127 * F64_DEPTH) == np.float64
    assert accumulation_dtype(1 << 16, 1 << 40) is None


@pytest.mark.parametrize("edge", ["low", "high"])
@pytest.mark.parametrize("depth", [F32_DEPTH, F64_DEPTH])
@pytest.mark.parametrize("name", list(MODELS))
def test_int8_accumulation_is_exact(name, depth, edge):
    if name == "conv3x3" and depth % 9:
        depth = 9 * (depth // 9)  # 1017 = 9 * 113: still on the float32 side
    model = _full_integer(name, depth, edge)
    for seed in (0, 1):
        inputs = _int8_inputs(model, edge, seed)
        actual = run_numlite(model, inputs)
        for a, ref, default in zip(actual, _litert(model, inputs, True), _litert(model, inputs, False)):
            assert a.dtype == ref.dtype == np.int8
            assert np.unique(ref).size > 8, "the outputs should resolve the small results finely"
            np.testing.assert_array_equal(a, ref)
            assert np.abs(a.astype(np.int64) - default).max() <= 1


@pytest.mark.parametrize("name", ["conv3x3", "fc"])
def test_hybrid_accumulation_is_exact(name):
    """Dynamic range: inputs quantized to 255 steps per batch (centered values up to 255),
    weights +-127 over 9216 terms: float64 accumulation; the float outputs (small after the
    cancellation) match LiteRT to float32 rounding.

    Compared with LiteRT's default kernels: at this depth its reference hybrid CONV_2D
    (BUILTIN_REF) departs from them by up to about 300 accumulator units (2.4e-3 here), further
    from TensorFlow's float result than either, while numlite (before and after the float32 path
    existed) agrees with the default kernels to 1.5e-8. The FULLY_CONNECTED reference agrees."""
    fn, specs = MODELS[name](F64_DEPTH)
    model = convert(fn, specs, key=("exact_bound_hybrid", name), optimizations=[tf.lite.Optimize.DEFAULT])
    for seed in (0, 1):
        inputs = [_near_constant(s.shape, 1.0, seed, 1.0) for s in specs]
        actual = run_numlite(model, inputs)
        references = [_litert(model, inputs, False)]
        if name == "fc":
            references.append(_litert(model, inputs, True))
        for expected in references:
            for a, ref in zip(actual, expected):
                assert np.abs(ref).max() < 2, "the cancellation should leave small results"
                assert np.unique(ref).size > 8
                np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ requantization
# The closed forms of quantized_blocks.Requantizer and fixed_point.multiply_by_quantized_multiplier
# against gemmlowp's two steps as fixed_point writes them one by one (saturating_rounding_doubling_
# high_mul, rounding_divide_by_pot: what the LiteRT comparisons of every quantized op rest on),
# over the whole int32 range, both signs of multiplier and every shift.


def _gemmlowp_steps(x: np.ndarray, m: np.ndarray, shift: np.ndarray) -> np.ndarray:
    from numlite.kernels import fixed_point as fp

    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    wrapped = (x.astype(np.int64) << left).astype(np.int32)
    return fp.rounding_divide_by_pot(fp.saturating_rounding_doubling_high_mul(wrapped, m), right).astype(np.int64)


def _cases(seed: int, channels: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(1 << 31), 1 << 31, (40, channels), dtype=np.int64)
    x[:9] = np.array([-(1 << 31), (1 << 31) - 1, -1, 0, 1, -(1 << 30), 1 << 30, -2, 2])[:, None]
    x[9:20] = rng.integers(-4096, 4096, (11, channels))
    return rng, x


def _add_ties(x: np.ndarray, m: np.ndarray, shift: np.ndarray, rng) -> None:
    """Rows 20..39 of ``x``: values whose high product ``v`` is a tie of the final rounding
    (``v = (k + 1/2) * 2**e``, both signs), and their neighbours: where rounding halves away
    from zero and the sign handling matter; the rest of the range rarely meets them."""
    for c in range(x.shape[1]):
        mult, e = int(np.ravel(m)[c % np.size(m)]), -int(np.ravel(shift)[c % np.size(shift)])
        if e < 1 or mult == 0:
            continue
        for row in range(20, 40, 2):
            k = int(rng.integers(0, max(2, (1 << 30) >> (e + 2))))
            v = (k * (1 << e) + (1 << (e - 1))) * (-1 if row % 4 else 1)
            guess = (v * (1 << 31)) // mult
            x[row, c], x[row + 1, c] = guess, guess + 1


@pytest.mark.parametrize("seed", range(40))
def test_multiply_by_quantized_multiplier_closed_forms(seed):
    from numlite.kernels import fixed_point as fp

    rng, x = _cases(seed, 6)
    m = rng.integers(-(1 << 31), 1 << 31, 6, dtype=np.int64)
    shift = rng.integers(-31, 31, 6)
    m[0], m[1], shift[2] = 1 << 30, (1 << 31) - 1, 0
    if seed % 4 == 0:
        m[3] = -(1 << 31)  # the saturating product
    _add_ties(x, m, shift, rng)
    x = np.clip(x, -(1 << 31), (1 << 31) - 1)
    for mult, sh in ((m, shift), (m[1], shift[1]), (m[4], -shift[4] - 1)):
        expected = _gemmlowp_steps(x.astype(np.int32), mult, sh)
        np.testing.assert_array_equal(fp.multiply_by_quantized_multiplier(x.astype(np.int32), mult, sh), expected)
        np.testing.assert_array_equal(fp.multiply_by_quantized_multiplier(x, mult, sh), expected)  # wrapped to int32 first
        np.testing.assert_array_equal(fp.FixedMultiplier(mult, sh)(x), expected)  # its constants made once


@pytest.mark.parametrize("seed", range(40))
def test_requantizer_matches_reference_rescaling(seed):
    from numlite.kernels import fixed_point as fp
    from numlite.kernels.quantized_blocks import Requantizer

    channels = 5
    rng, x = _cases(seed, channels)
    exponents = rng.uniform(-40, 3, channels) if seed % 2 else np.full(channels, rng.uniform(-30, -1))
    real = 2.0**exponents * rng.uniform(0.5, 1.0, channels)
    m, shift = fp.quantize_multiplier(real)
    zp = int(rng.integers(-128, 128))
    act = (-128, 127) if seed % 3 else tuple(sorted(int(v) for v in rng.integers(-128, 128, 2)))
    offset = rng.integers(-(1 << 20), 1 << 20, channels)
    _add_ties(x, m, shift, rng)
    x = np.clip(x, -(1 << 31) - offset, (1 << 31) - 1 - offset)
    x[20:] -= offset  # the ties are of the totals
    total = x + offset  # what the requantizer sees: accumulators plus the per-channel offset
    m64, s64 = m.astype(np.int64), shift.astype(np.int64)
    expected = {
        "fixed": _gemmlowp_steps(total.astype(np.int32), m64, s64),  # the 8-bit accumulator wraps to int32
        "wide": fp.multiply_by_quantized_multiplier_int64(total, m64, s64).astype(np.int64),
        "real": np.clip(fp.round_half_away(total.astype(np.float64) * real), -(2.0**62), 2.0**62).astype(np.int64),
    }
    for mode, values in expected.items():
        for times in (1, 4):  # per pixel, and over rows of four pixels (tiled vectors)
            requantizer = Requantizer(mode, m, shift, real, zp, act).tiled(times)
            rows = x.reshape(-1, times * channels) if times > 1 else x
            shape = (rows.shape[0], rows.shape[1])
            dtype = np.float64 if mode == "real" else np.int64
            out = np.empty(shape, np.int8)
            requantizer(rows.astype(np.float64), np.tile(offset, times), out, np.empty(shape, dtype), np.empty(shape, dtype))
            np.testing.assert_array_equal(out.reshape(x.shape), np.clip(values + zp, *act), err_msg=f"{mode} x{times}")
