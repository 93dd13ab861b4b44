"""numlite's converter on TensorFlow's element-wise math, activations and reductions.

Every model is converted by numlite and run in both numlite and LiteRT; both must give
TensorFlow's results. Each test also checks that the TFLite ops it is about are in the model, so
that the lowering (not constant folding) is what is tested: inputs are function arguments.
Ops TFLite has no builtin for are composed from builtins; those are checked on inputs of order
one and on large magnitudes in every runtime, and with ``atol=0`` (relative error only) where
the composition keeps TensorFlow's relative precision near zero: that needs exactly rounded
builtins, so it is checked with numlite and LiteRT's builtin kernels, not with the XNNPACK
delegate LiteRT applies by default (see ``check_with_exact_kernels``).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import all_op_names, assert_close, conversion_error, numlite_convert, run_litert, run_numlite
from helpers import check_conversion as check
from helpers import seeded_values, tf_outputs

import numlite

F32, I32, I64, BOOL = tf.float32, tf.int32, tf.int64, tf.bool
NP = {F32: np.float32, I32: np.int32, I64: np.int64, BOOL: np.bool_}


def spec(*shape, dtype=F32):
    return tf.TensorSpec(shape, dtype)


def values(shape, dtype, seed=0, low=None, high=None):
    """Seeded inputs: ``seeded_values`` (integers in [-20, 20]), or uniform in [low, high)."""
    rng = np.random.default_rng(seed)
    if low is None:
        return seeded_values(shape, dtype, seed, int_range=(-20, 21))
    if dtype in (I32, I64):
        return rng.integers(low, high, shape).astype(NP[dtype])
    return rng.uniform(low, high, shape).astype(np.float32)


def operand(shape, dtype, seed):
    """Small values with ties across inputs (integers in [-4, 4], floats in eighths of [-3, 3])."""
    if dtype == BOOL:
        return values(shape, dtype, seed)
    x = values(shape, F32, seed, -3, 3)
    return (np.round(x * 8) / 8).astype(np.float32) if dtype == F32 else np.round(x * 1.4).astype(NP[dtype])


def nonzero(shape, dtype, seed):
    """Divisors: non-zero values of both signs (integers in [-7, 7], floats |y| in [0.5, 4])."""
    rng = np.random.default_rng(seed)
    sign = np.where(rng.random(shape) < 0.5, -1, 1)
    if dtype in (I32, I64):
        return (sign * rng.integers(1, 8, shape)).astype(NP[dtype])
    return (sign * rng.uniform(0.5, 4, shape)).astype(np.float32)


def pairwise(fn):
    """A function of 2n inputs giving ``fn`` of each consecutive pair (several cases, one model)."""
    return lambda *xs: tuple(fn(xs[i], xs[i + 1]) for i in range(0, len(xs), 2))


# Input shape pairs: equal, dynamic batch against a vector, both sides broadcast, scalar and
# matrix: (spec a, spec b, value a, value b).
SHAPE_PAIRS = [((2, 3), (2, 3), (2, 3), (2, 3)),
               ((None, 3), (3,), (4, 3), (3,)),
               ((4, 1, 3), (2, 1), (4, 1, 3), (2, 1)),
               ((), (2, 2), (), (2, 2))]  # fmt: skip


# -- binary arithmetic ---------------------------------------------------------------------------

BINARY = {  # name: (function, TFLite op, dtypes, whether the second input must be non-zero)
    "add": (tf.add, "ADD", (F32, I32, I64), False),
    "sub": (tf.subtract, "SUB", (F32, I32, I64), False),
    "mul": (tf.multiply, "MUL", (F32, I32, I64), False),
    "maximum": (tf.maximum, "MAXIMUM", (F32, I32, I64), False),
    "minimum": (tf.minimum, "MINIMUM", (F32, I32, I64), False),
    "realdiv": (tf.math.truediv, "DIV", (F32,), True),
    "div": (lambda a, b: tf.raw_ops.Div(x=a, y=b), "DIV", (F32, I32), True),
    "floordiv": (tf.math.floordiv, "FLOOR_DIV", (F32, I32), True),
    "floormod": (tf.math.floormod, "FLOOR_MOD", (F32, I32, I64), True),
    "truncatediv": (tf.truncatediv, "DIV", (F32, I32), True),
    "truncatemod": (tf.truncatemod, "FLOOR_MOD", (F32, I32, I64), True),
    "mod": (lambda a, b: tf.raw_ops.Mod(x=a, y=b), "FLOOR_MOD", (F32, I32, I64), True),
    "squared_difference": (tf.math.squared_difference, "SQUARED_DIFFERENCE", (F32, I32), False),
    "squared_difference_int64": (tf.math.squared_difference, "SUB", (I64,), False),
    "less": (tf.less, "LESS", (F32, I32, I64), False),
    "less_equal": (tf.less_equal, "LESS_EQUAL", (F32, I32, I64), False),
    "greater": (tf.greater, "GREATER", (F32, I32, I64), False),
    "greater_equal": (tf.greater_equal, "GREATER_EQUAL", (F32, I32, I64), False),
    "equal": (tf.equal, "EQUAL", (F32, I32, I64, BOOL), False),
    "not_equal": (tf.not_equal, "NOT_EQUAL", (F32, I32, I64, BOOL), False),
    "logical_and": (tf.logical_and, "LOGICAL_AND", (BOOL,), False),
    "logical_or": (tf.logical_or, "LOGICAL_OR", (BOOL,), False),
}
BINARY_CASES = [(name, dtype) for name, (_, _, dtypes, _) in BINARY.items() for dtype in dtypes]


@pytest.mark.parametrize("name,dtype", BINARY_CASES, ids=[f"{n}-{d.name}" for n, d in BINARY_CASES])
def test_binary(name, dtype):
    """Each op on every pair of SHAPE_PAIRS, in one model."""
    fn, op, _, divides = BINARY[name]
    specs, inputs = [], []
    for k, (spec_a, spec_b, shape_a, shape_b) in enumerate(SHAPE_PAIRS):
        specs += [spec(*spec_a, dtype=dtype), spec(*spec_b, dtype=dtype)]
        b = nonzero(shape_b, dtype, 2 * k + 1) if divides else operand(shape_b, dtype, 2 * k + 1)
        inputs += [values(shape_a, dtype, 2 * k) if divides else operand(shape_a, dtype, 2 * k), b]
    check(pairwise(fn), specs, inputs, [op])


def test_string_equality():
    a = np.array([b"ab", b"", b"xyz", b"\x00"], dtype=object)
    b = np.array([b"ab", b"x", b"xy", b"\x00"], dtype=object)
    fn = lambda x, y: (tf.equal(x, y), tf.not_equal(y, x))  # noqa: E731
    check(fn, [spec(None, dtype=tf.string)] * 2, [a, b], ["EQUAL", "NOT_EQUAL"])


def test_integer_division_signs_follow_tensorflow():
    """Every sign combination, exact multiples and zero dividends, for each division and
    remainder flavour (int64 has FLOOR_MOD only: LiteRT divides int32 only)."""
    x = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1, 20, -2147483647], np.int32)
    y = np.array([2, 2, -2, -2, 3, -3, 5, -7, 7, -3, 2], np.int32)

    def int32_fn(a, b):
        return (tf.raw_ops.Div(x=a, y=b), tf.math.floordiv(a, b), tf.math.floormod(a, b),
                tf.truncatediv(a, b), tf.truncatemod(a, b))

    check(int32_fn, [spec(None, dtype=I32)] * 2, [x, y], ["DIV", "FLOOR_DIV", "FLOOR_MOD"])
    x64 = np.append(x.astype(np.int64), [-(2**62) - 1, 2**62 + 3])
    y64 = np.append(y.astype(np.int64), [-(2**40), 3])
    check(lambda a, b: (tf.math.floormod(a, b), tf.truncatemod(a, b)), [spec(None, dtype=I64)] * 2, [x64, y64],
          ["FLOOR_MOD"])


def test_float_remainders_are_exact():
    """fmod and floor mod of values whose quotient is large or whose remainder is tiny."""
    x = np.array([5.5, -5.5, 5.5, -5.5, 1e7 + 1, -3e-9, 3e-9, 100.0, -0.0, 7.25], np.float32)
    y = np.array([2, 2, -2, -2, 3, 1, -1, 0.3, 2, 0.5], np.float32)
    fn = lambda a, b: (tf.truncatemod(a, b), tf.math.floormod(a, b), tf.truncatediv(a, b))  # noqa: E731
    check(fn, [spec(10), spec(10)], [x, y], ["FLOOR_MOD", "DIV"], rtol=0, atol=0)


def test_pow():
    base = values((2, 3), F32, 1, 0.1, 3.0)
    check(tf.pow, [spec(None, 3), spec(3)], [base, values((3,), F32, 2, -2, 3)], ["POW"])
    ints = values((4, 3), I32, 1, -4, 5)
    check(tf.pow, [spec(4, 3, dtype=I32), spec(3, dtype=I32)], [ints, np.array([0, 2, 3], np.int32)], ["POW"])


def test_atan2_broadcasts_its_inputs():
    """LiteRT's ATAN2 needs equal shapes: the lowering broadcasts both (signed zeros kept)."""
    y = np.array([[0.0, -0.0, 1.0], [-1.0, 2.0, -0.0]], np.float32)
    x = np.array([-1.0, -2.0, 0.5], np.float32)
    check(tf.math.atan2, [spec(None, 3), spec(3)], [y, x], ["ATAN2", "ZEROS_LIKE"])
    check(tf.math.atan2, [spec(2, 3), spec(2, 3)], [y, np.stack([x, -x])], ["ATAN2"])


@pytest.mark.parametrize("count", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [F32, I32, I64], ids=str)
def test_add_n(count, dtype):
    inputs = [values((2, 3), dtype, seed) for seed in range(count)]
    ops = [] if count == 1 else ["ADD_N"] if dtype != I64 else ["ADD"]
    check(lambda *xs: tf.raw_ops.AddN(inputs=list(xs)) * 2, [spec(None, 3, dtype=dtype)] * count, inputs, ops + ["MUL"])


@pytest.mark.parametrize("dtype", [F32, I32, I64], ids=str)
def test_clip_by_value(dtype):
    x = values((3, 4), dtype, 1)
    low, high = tf.constant(-1, dtype), tf.constant(5, dtype)
    scalar = lambda t: tf.raw_ops.ClipByValue(t=t, clip_value_min=low, clip_value_max=high)  # noqa: E731
    check(scalar, [spec(None, 4, dtype=dtype)], [x], ["MINIMUM", "MAXIMUM"])
    tensors = lambda t, low, high: tf.raw_ops.ClipByValue(t=t, clip_value_min=low, clip_value_max=high)  # noqa: E731
    low, high = values((3, 4), dtype, 2), values((3, 4), dtype, 3)  # some low > high: TF's order decides
    check(tensors, [spec(3, 4, dtype=dtype)] * 3, [x, low, high], ["MINIMUM", "MAXIMUM"])
    check(lambda t: tf.clip_by_value(t, -3, 4), [spec(None, 4, dtype=dtype)], [x], ["MINIMUM", "MAXIMUM"])


@pytest.mark.parametrize("dtype", [F32, I32], ids=str)
def test_bias_add(dtype):
    check(tf.nn.bias_add, [spec(None, 2, 3, dtype=dtype), spec(3, dtype=dtype)],
          [values((2, 2, 3), dtype, 1), values((3,), dtype, 2)], ["ADD"])


# -- unary math ----------------------------------------------------------------------------------

UNARY = {  # name: (function, TFLite op, dtypes, input range for floats)
    "abs": (tf.abs, "ABS", (F32, I32), (-3, 3)),
    "abs_int64": (tf.abs, "SELECT_V2", (I64,), None),
    "neg": (tf.negative, "NEG", (F32, I32, I64), (-3, 3)),
    "square": (tf.square, "SQUARE", (F32,), (-3, 3)),
    "square_int": (tf.square, "MUL", (I32, I64), None),
    "sign": (tf.sign, "SIGN", (F32, I32), (-3, 3)),
    "sign_int64": (tf.sign, "CAST", (I64,), None),
    "relu": (tf.nn.relu, "RELU", (F32,), (-3, 3)),
    "relu_int": (tf.nn.relu, "MAXIMUM", (I32, I64), None),
    "relu6": (tf.nn.relu6, "RELU6", (F32,), (-3, 9)),
    "relu6_int": (tf.nn.relu6, "MINIMUM", (I32, I64), None),
    "exp": (tf.exp, "EXP", (F32,), (-6, 6)),
    "log": (tf.math.log, "LOG", (F32,), (0.01, 8)),
    "sqrt": (tf.sqrt, "SQRT", (F32,), (0, 4)),
    "rsqrt": (tf.math.rsqrt, "RSQRT", (F32,), (0.05, 4)),
    "sin": (tf.sin, "SIN", (F32,), (-7, 7)),
    "cos": (tf.cos, "COS", (F32,), (-7, 7)),
    "tanh": (tf.tanh, "TANH", (F32,), (-5, 5)),
    "sigmoid": (tf.sigmoid, "LOGISTIC", (F32,), (-8, 8)),
    "elu": (tf.nn.elu, "ELU", (F32,), (-5, 5)),
    "floor": (tf.floor, "FLOOR", (F32,), (-4, 4)),
    "ceil": (tf.math.ceil, "CEIL", (F32,), (-4, 4)),
    "round": (tf.round, "ROUND", (F32,), (-4, 4)),
    "rint": (tf.math.rint, "ROUND", (F32,), (-4, 4)),
    "logical_not": (tf.logical_not, "LOGICAL_NOT", (BOOL,), None),
}
UNARY_CASES = [(name, dtype) for name, (_, _, dtypes, _) in UNARY.items() for dtype in dtypes]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=[f"{n}-{d.name}" for n, d in UNARY_CASES])
def test_unary(name, dtype):
    """Each op on a matrix with a dynamic batch and on a scalar, in one model."""
    fn, op, _, bounds = UNARY[name]
    x = values((3, 5), dtype, 1, *bounds) if dtype == F32 else values((3, 5), dtype, 1)
    if name in ("round", "rint"):
        x[0] = [-2.5, -1.5, -0.5, 0.5, 2.5]  # halves round to even
    check(lambda t, s: (fn(t), fn(s)), [spec(None, 5, dtype=dtype), spec(dtype=dtype)], [x, np.asarray(x[1, 1])], [op])


# -- math TFLite has no builtin for --------------------------------------------------------------

def check_with_exact_kernels(fn, specs, inputs, **tolerances):
    """``check`` for numlite and LiteRT's builtin kernels only. LiteRT's default XNNPACK
    delegate computes EXP, LOG, SIN and COS by approximations (absolute errors of ~1e-7 near
    LOG's and COS's zeros, EXP(NaN) = 0, LOG(x) = inf beyond ~1e38): compositions that keep
    TensorFlow's relative precision where a result is tiny need exactly rounded builtins."""
    model, concrete = numlite_convert(fn, specs)
    expected = tf_outputs(concrete, inputs)
    builtin = run_litert(model, inputs, builtin_only=True)
    for runtime, outputs in (("numlite", run_numlite(model, inputs)), ("LiteRT builtin", builtin)):
        assert len(outputs) == len(expected)
        for k, (a, e) in enumerate(zip(outputs, expected)):
            assert_close(a, e, what=f"{runtime} output {k}: ", **tolerances)


ORDER_ONE = np.linspace(-3, 3, 61, dtype=np.float32)
LARGE = np.concatenate([np.arange(-50, 51), [-1e4, -100, 100, 1e4]]).astype(np.float32)
TINY = np.concatenate([np.geomspace(1e-30, 1e-2, 29), -np.geomspace(1e-30, 1e-2, 29), [0.0]]).astype(np.float32)
SPECIAL = np.float32([-np.inf, np.inf, np.nan])
NEGATIVE = np.arange(-50, 1, dtype=np.float32)  # results stay normal floats (TF flushes subnormals to 0)
HUGE = np.geomspace(1e-2, 3e38, 41).astype(np.float32)
WELL_CONDITIONED_TAN = LARGE[(np.abs(np.cos(LARGE.astype(np.float64))) > 0.01) & (np.abs(LARGE) <= 50)]

# name: (function, ops in the model, inputs checked in every runtime with rtol = atol = 1e-5,
# inputs checked with numlite and LiteRT's builtin kernels with atol = 0: relative error only)
COMPOSED = {
    "softplus": (tf.nn.softplus, ["EXP", "LOG"], [ORDER_ONE, LARGE, TINY, SPECIAL], [NEGATIVE, TINY]),
    "softsign": (tf.nn.softsign, ["ABS", "DIV"], [ORDER_ONE, LARGE, TINY], [LARGE, TINY]),
    "selu": (tf.nn.selu, ["ELU"], [ORDER_ONE, LARGE], [ORDER_ONE[ORDER_ONE >= 0], LARGE[LARGE >= 0]]),
    "reciprocal": (tf.math.reciprocal, ["DIV"], [ORDER_ONE, LARGE, TINY], [LARGE[LARGE != 0], TINY[TINY != 0]]),
    "inv": (lambda x: tf.raw_ops.Inv(x=x), ["DIV"], [ORDER_ONE, LARGE], []),
    "expm1": (tf.math.expm1, ["EXP", "LOG"], [ORDER_ONE, LARGE, SPECIAL[:2]], [TINY, ORDER_ONE, LARGE, SPECIAL]),
    "log1p": (tf.math.log1p, ["LOG"],
              [np.abs(LARGE), ORDER_ONE[ORDER_ONE > -1], np.float32([-1, np.inf, np.nan, 1e30])],
              [TINY, HUGE, np.float32([-1, -0.5, np.inf, np.nan])]),
    "tan": (tf.math.tan, ["SIN", "COS"], [ORDER_ONE, WELL_CONDITIONED_TAN], [LARGE[np.abs(LARGE) <= 50]]),
    "erf": (tf.math.erf, ["GELU"], [ORDER_ONE, LARGE, SPECIAL], []),
    "erf_near_zero": (tf.math.erf, ["GELU"], [], [TINY, np.linspace(-0.5, 0.5, 41, dtype=np.float32)]),
    "erfc": (tf.math.erfc, ["GELU"], [ORDER_ONE, LARGE, TINY, SPECIAL], [np.linspace(-10, 6, 161, dtype=np.float32)]),
    "is_nan": (tf.math.is_nan, ["NOT_EQUAL"], [np.float32([np.nan, np.inf, -np.inf, 0, -1, 3e38])], []),
    "is_inf": (tf.math.is_inf, ["ABS", "EQUAL"], [np.float32([np.nan, np.inf, -np.inf, 0, -1, 3e38])], []),
    "is_finite": (tf.math.is_finite, ["ABS", "LESS"], [np.float32([np.nan, np.inf, -np.inf, 0, -1, 3e38])], []),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_composed_math(name):
    """Each composition on its input sets, through one model with a dynamic length."""
    fn, ops, inputs, relative_inputs = COMPOSED[name]
    for x in inputs:
        check(lambda t: fn(t), [spec(None)], [x], ops)
    for x in relative_inputs:
        check_with_exact_kernels(lambda t: fn(t), [spec(None)], [x], atol=0)
    grid, scalar = ORDER_ONE[:60].reshape(2, 10, 3), np.asarray(ORDER_ONE[40])
    check(lambda t, s: (fn(t), fn(s)), [spec(2, None, 3), spec()], [grid, scalar], ops)


def test_composed_math_keeps_shapes_and_broadcasts():
    def fn(x):
        return tf.nn.softplus(x) + tf.math.expm1(x) * tf.math.log1p(tf.abs(x)) - tf.math.erf(x[:, :1])

    check(fn, [spec(None, 4)], [values((3, 4), F32, 1)], ["EXP", "LOG", "GELU"])


# -- activations ---------------------------------------------------------------------------------

X_ACT = np.concatenate([np.linspace(-8, 8, 33), [-50, -20, -5.5, 20, 50]]).astype(np.float32).reshape(2, -1)


def bert_gelu(x):
    return x * 0.5 * (1.0 + tf.math.erf(x / tf.math.sqrt(2.0)))


def mobilenet_hard_swish(x):
    return x * tf.nn.relu6(x + 3.0) / 6.0


# name: (function, the model's ops, all of them)
FUSED = {
    "tf_gelu": (lambda x: tf.nn.gelu(x, approximate=False), ["GELU"]),
    "tf_gelu_tanh": (lambda x: tf.nn.gelu(x, approximate=True), ["GELU"]),
    "keras_gelu": (lambda x: keras.activations.gelu(x), ["GELU"]),
    "keras_gelu_tanh": (lambda x: keras.activations.gelu(x, approximate=True), ["GELU"]),
    "bert_gelu": (bert_gelu, ["GELU"]),
    "keras_hard_swish": (lambda x: keras.activations.hard_swish(x), ["HARD_SWISH"]),
    "mobilenet_hard_swish": (mobilenet_hard_swish, ["HARD_SWISH"]),
    "l2_normalize": (lambda x: tf.math.l2_normalize(x, axis=-1), ["L2_NORMALIZATION"]),
    "swish": (tf.nn.swish, ["LOGISTIC", "MUL"]),
    "keras_silu": (lambda x: keras.activations.silu(x), ["LOGISTIC", "MUL"]),
    "keras_hard_sigmoid": (lambda x: keras.activations.hard_sigmoid(x), ["ADD", "DIV"]),
    "leaky_relu": (lambda x: tf.nn.leaky_relu(x, alpha=0.3), ["LEAKY_RELU"]),
}
# Activations built on Softplus (composed): name: (function, some of the model's ops)
ON_SOFTPLUS = {
    "keras_mish": (lambda x: keras.activations.mish(x), ["EXP", "LOG", "TANH", "MUL"]),
    "keras_log_sigmoid": (lambda x: keras.activations.log_sigmoid(x), ["EXP", "LOG", "NEG"]),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_activation(name):
    """Activations TF spells as several ops become the builtin with the same math (only it)."""
    fn, ops = FUSED[name]
    names = check(lambda t: fn(t), [spec(None, X_ACT.shape[1])], [X_ACT], ops)
    assert sorted(names) == sorted(ops)


@pytest.mark.parametrize("name", sorted(ON_SOFTPLUS))
def test_activation_on_softplus(name):
    fn, ops = ON_SOFTPLUS[name]
    check(lambda t: fn(t), [spec(None, X_ACT.shape[1])], [X_ACT], ops)


KERAS_ACTIVATIONS = sorted(
    name for name in dir(keras.activations)
    if not name.startswith("_") and name not in ("get", "serialize", "deserialize", "threshold")
)
KERAS_X = np.concatenate([np.linspace(-8, 8, 33), [-50, -20, -5.5, 20, 50, 0, 1e-3]]).astype(np.float32).reshape(2, -1)


@pytest.mark.parametrize("name", KERAS_ACTIVATIONS + ["threshold"])
def test_keras_activation(name):
    """Every activation Keras has, as its TensorFlow backend writes it."""
    fn = getattr(keras.activations, name)
    if name == "threshold":
        fn = lambda x: keras.activations.threshold(x, threshold=0.5, default_value=-1.0)  # noqa: E731
    check(lambda t: fn(t), [spec(None, KERAS_X.shape[1])], [KERAS_X], [])


@pytest.mark.parametrize("name", ["bert_gelu", "tf_gelu_tanh", "mobilenet_hard_swish", "l2_normalize"])
def test_fused_activation_on_rank_4(name):
    x = values((2, 3, 4, 5), F32, 1, -6, 6)
    assert check(lambda t: FUSED[name][0](t), [spec(None, 3, 4, 5)], [x], FUSED[name][1]) == FUSED[name][1]


NOT_FUSED = {  # patterns whose math differs from the builtin's: primitive ops remain
    "gelu_other_scale": (lambda x: 0.4 * x * (1.0 + tf.math.erf(x / tf.math.sqrt(2.0))), "GELU"),
    "hard_swish_other_shift": (lambda x: x * tf.nn.relu6(x + 2.0) / 6.0, "HARD_SWISH"),
    "l2_normalize_first_axis": (lambda x: tf.math.l2_normalize(x, axis=0), "L2_NORMALIZATION"),
    "l2_normalize_other_epsilon": (lambda x: tf.math.l2_normalize(x, axis=-1, epsilon=1e-3), "L2_NORMALIZATION"),
    "gelu_of_other_value": (lambda x: 0.5 * x * (1.0 + tf.math.erf(tf.abs(x) / tf.math.sqrt(2.0))), "GELU"),
}


@pytest.mark.parametrize("name", sorted(NOT_FUSED))
def test_patterns_with_other_math_are_not_fused(name):
    fn, fused = NOT_FUSED[name]
    names = check(lambda t: fn(t), [spec(None, X_ACT.shape[1])], [X_ACT * 0.25], [])
    assert len(names) > 2, names  # the primitive ops, not one builtin
    assert names.count(fused) == (1 if fused == "GELU" else 0)  # Erf itself is composed with a GELU


def test_pattern_whose_constant_broadcasts_x_is_not_fused():
    """x of shape (3,) and a constant of shape (1, 1): the result has shape (1, 3), which the
    builtin (whose output is x's shape) would not give."""
    fn = lambda x: x * tf.nn.relu6(x + tf.constant([[3.0]])) / 6.0  # noqa: E731
    names = check(fn, [spec(3)], [np.float32([-4, 0.5, 2])], ["MUL"])
    assert "HARD_SWISH" not in names


@pytest.mark.parametrize("shape", [(5,), (None, 5), (2, None, 5), (2, 3, 4, 5), (None, 2, 3, 2, 5)], ids=str)
def test_normalizations_over_the_last_axis(shape):
    concrete = tuple(2 if d is None else d for d in shape)
    x = values(concrete, F32, 1, -10, 10)
    check(lambda t: tf.nn.softmax(t), [spec(*shape)], [x], ["SOFTMAX"])
    check(lambda t: tf.nn.log_softmax(t), [spec(*shape)], [x], ["LOG_SOFTMAX"])
    check(lambda t: tf.math.l2_normalize(t, axis=-1), [spec(*shape)], [x], ["L2_NORMALIZATION"])


@pytest.mark.parametrize("radius,bias,alpha,beta", [(5, 1.0, 1.0, 0.5), (2, 2.0, 0.1, 0.75), (1, 0.5, 0.3, 1.0)])
def test_local_response_normalization(radius, bias, alpha, beta):
    def fn(x):
        return tf.nn.local_response_normalization(x, depth_radius=radius, bias=bias, alpha=alpha, beta=beta)

    check(fn, [spec(None, 3, 4, 7)], [values((2, 3, 4, 7), F32, 1)], ["LOCAL_RESPONSE_NORMALIZATION"])


def test_keras_model_with_activation_layers():
    """Dense layers with Keras activations, through ``from_keras_model``: the fused builtins
    follow the fully connected layers, the compositions work on their outputs."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    x = inputs
    for activation in ("gelu", "hard_swish", "softplus", "selu", "swish", "mish"):
        x = keras.layers.Dense(8, activation=activation)(x)
    x = keras.layers.UnitNormalization()(x)  # epsilon 1e-24 on the squared norm: not L2_NORMALIZATION's
    model = keras.Model(inputs, keras.layers.Dense(4, activation="log_softmax")(x))
    tflite = numlite.TFLiteConverter.from_keras_model(model).convert()
    ops = all_op_names(tflite)
    assert {"GELU", "HARD_SWISH", "ELU", "LOGISTIC", "TANH", "LOG_SOFTMAX"} <= set(ops)
    assert "L2_NORMALIZATION" not in ops and ops.count("FULLY_CONNECTED") == 7
    x = seeded_values((3, 6), F32)
    expected = model(x, training=False).numpy()
    for run in (run_numlite, run_litert):
        assert_close(run(tflite, [x])[0], expected)


# -- reductions ----------------------------------------------------------------------------------

REDUCTIONS = {
    "sum": (tf.reduce_sum, "SUM", (F32, I32, I64)),
    "mean": (tf.reduce_mean, "MEAN", (F32, I32, I64)),
    "max": (tf.reduce_max, "REDUCE_MAX", (F32, I32, I64)),
    "min": (tf.reduce_min, "REDUCE_MIN", (F32, I32, I64)),
    "prod": (tf.reduce_prod, "REDUCE_PROD", (F32, I32, I64)),
    "any": (tf.reduce_any, "REDUCE_ANY", (BOOL,)),
    "all": (tf.reduce_all, "REDUCE_ALL", (BOOL,)),
}
REDUCTION_CASES = [(name, dtype) for name, (_, _, dtypes) in REDUCTIONS.items() for dtype in dtypes]
AXES = [1, [0, 2], -1, [-1, 0], None, [2, -2]]


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("name,dtype", REDUCTION_CASES, ids=[f"{n}-{d.name}" for n, d in REDUCTION_CASES])
def test_reduction(name, dtype, keep_dims):
    """Each reduction over every axis list of AXES (scalar, list, negative, all), in one model."""
    fn, op, _ = REDUCTIONS[name]
    x = values((2, 3, 4), dtype, 1, -3, 4) if name == "prod" else values((2, 3, 4), dtype, 1)
    all_axes = lambda t: tuple(fn(t, axis=axis, keepdims=keep_dims) for axis in AXES)  # noqa: E731
    check(all_axes, [spec(None, 3, 4, dtype=dtype)], [x], [op])


def test_reduction_with_int64_axes_and_no_axes():
    x = values((2, 3, 4), F32, 1)
    check(lambda t: tf.reduce_sum(t, axis=tf.constant([0, -1], tf.int64)), [spec(None, 3, 4)], [x], ["SUM"])
    names = check(lambda t: tf.reduce_max(t, axis=tf.zeros([0], tf.int32)) + 1.0, [spec(None, 3, 4)], [x], ["ADD"])
    assert "REDUCE_MAX" not in names


@pytest.mark.parametrize("output_type", [I32, I64], ids=str)
@pytest.mark.parametrize("dtype", [F32, I32, tf.int8, tf.uint8], ids=str)
@pytest.mark.parametrize("tf_fn,op", [(tf.math.argmax, "ARG_MAX"), (tf.math.argmin, "ARG_MIN")], ids=["max", "min"])
def test_arg_max_and_min(tf_fn, op, dtype, output_type):
    if dtype == F32:
        x = values((3, 4, 5), F32, 1, -3, 3)
    else:  # small integers: ties, which pick the first index
        x = values((3, 4, 5), I32, 1, -3, 4).astype(dtype.as_numpy_dtype)
    check(lambda t: tuple(tf_fn(t, axis=axis, output_type=output_type) for axis in (0, 1, -1)),
          [spec(None, 4, 5, dtype=dtype)], [x], [op])


# -- selection and casts -------------------------------------------------------------------------


def test_select_v1_with_a_vector_condition_picks_rows():
    fn = lambda c, a, b: tf.raw_ops.Select(condition=c, x=a, y=b)  # noqa: E731
    cond = np.array([True, False, True])
    check(fn, [spec(None, dtype=BOOL), spec(None, 4), spec(None, 4)],
          [cond, values((3, 4), F32, 1), values((3, 4), F32, 2)], ["SELECT"])
    check(fn, [spec(None, dtype=BOOL), spec(None, 2, 2, dtype=I64), spec(None, 2, 2, dtype=I64)],
          [cond, values((3, 2, 2), I64, 1), values((3, 2, 2), I64, 2)], ["SELECT"])
    check(fn, [spec(3, 4, dtype=BOOL), spec(3, 4, dtype=I32), spec(3, 4, dtype=I32)],
          [values((3, 4), BOOL, 3), values((3, 4), I32, 1), values((3, 4), I32, 2)], ["SELECT_V2"])
    check(fn, [spec(None, dtype=BOOL), spec(None), spec(None)], [cond, values((3,), F32, 1), values((3,), F32, 2)],
          ["SELECT_V2"])
    unknown_rank = [tf.TensorSpec(None, BOOL), tf.TensorSpec(None, F32), tf.TensorSpec(None, F32)]
    assert "known rank" in conversion_error(fn, unknown_rank)


@pytest.mark.parametrize("dtype", [F32, I32, I64, BOOL], ids=str)
def test_select_v2_broadcasts(dtype):
    fn = lambda c, a, b: tf.where(c, a, b)  # noqa: E731
    check(fn, [spec(None, 1, 3, dtype=BOOL), spec(4, 1, dtype=dtype), spec(dtype=dtype)],
          [values((2, 1, 3), BOOL, 3), values((4, 1), dtype, 1), values((), dtype, 2)], ["SELECT_V2"])


CAST_TYPES = [F32, I32, I64, BOOL]


@pytest.mark.parametrize("source", CAST_TYPES, ids=str)
@pytest.mark.parametrize("target", CAST_TYPES, ids=str)
def test_cast(source, target):
    x = values((3, 4), source, 1)
    if source == F32:
        x = x * np.float32(30)  # fractions of both signs truncate toward zero
        x[0, :2] = 0.0
    ops = [] if source == target else ["CAST"]
    check(lambda t: tf.cast(t, target), [spec(None, 4, dtype=source)], [x], ops)


# -- refusals ------------------------------------------------------------------------------------

REFUSED = {
    "int64 division": (lambda a, b: tf.math.floordiv(a, b), I64, "FLOOR_DIV"),
    "int64 true division": (lambda a, b: tf.raw_ops.Div(x=a, y=b), I64, "DIV"),
    "int64 truncated division": (lambda a, b: tf.truncatediv(a, b), I64, "DIV"),
    "int64 power": (lambda a, b: tf.pow(a, b), I64, "POW"),
    "int64 arg max": (lambda a, b: tf.math.argmax(a + b, axis=0), I64, "ARG_MAX"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_types_are_refused(name):
    fn, dtype, op = REFUSED[name]
    message = conversion_error(fn, [spec(3, dtype=dtype)] * 2)
    assert op in message and "INT64" in message
