"""The cases of the TF op sweep: one small ``tf.function`` per TF op type and variant.

Shared by ``benchmarks/tf_ops.py`` (which prints the coverage table) and
``tests/test_convert_tf_ops.py`` (which requires numlite to convert whatever the official
converter converts). Each :class:`Case` calls one TensorFlow op (``tf.raw_ops``, so that the
graph holds exactly that op type) on function arguments with a concrete input signature, so
that nothing is constant-folded away; the op's attributes and its inputs that TensorFlow needs
to be constants (axes, sizes, paddings) are constants of the function. Ops that only exist
together with others (tensor lists, control flow, variables) get the smallest chain that
contains them.

Inputs are seeded and of order one (floats in [-2, 2] unless the op's domain is narrower,
integers in [-5, 5]); a case's seed comes from its name. ``LEFT_OUT`` lists the op types the
sweep does not try, with the reason.
"""

from __future__ import annotations

import inspect
import os
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow is the reference: its plain kernels, not oneDNN's graph rewrites (tests/conftest.py).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

F32, I32, I64, BOOL, U8, F64 = tf.float32, tf.int32, tf.int64, tf.bool, tf.uint8, tf.float64
C64 = tf.complex64
NUMBERS = (F32, I32, I64)

Check = Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None]


@dataclass(frozen=True)
class Arg:
    """One function argument: the value's shape and dtype, the signature's shape (None dims are
    dynamic; default: the value's), and the range of its random values (or a fixed value)."""

    shape: tuple[int, ...]
    dtype: Any = F32
    low: float | None = None
    high: float | None = None
    signature: tuple[int | None, ...] | None = None
    value: Any = None
    step: float | None = None  # round floats to multiples of it (ties between inputs)
    zeros: float = 0.0  # the fraction of elements set to zero
    nonzero: bool = False  # no zeros (divisors): |floats| >= 0.25, integers != 0

    def spec(self, index: int) -> tf.TensorSpec:
        shape = self.shape if self.signature is None else self.signature
        return tf.TensorSpec(shape, self.dtype, name=f"x{index}")

    def make(self, rng: np.random.Generator) -> np.ndarray:
        """The argument's value: the fixed one, or seeded random values in its range."""
        dtype = tf.as_dtype(self.dtype)
        if self.value is not None:
            return np.asarray(self.value, dtype.as_numpy_dtype)
        if dtype == tf.bool:
            return rng.random(self.shape) < 0.5
        if dtype.is_complex:
            real, imag = (rng.uniform(-2, 2, self.shape) for _ in range(2))
            return (real + 1j * imag).astype(dtype.as_numpy_dtype)
        if dtype.is_floating:
            low, high = (-2.0 if self.low is None else self.low), (2.0 if self.high is None else self.high)
            x = rng.uniform(low, high, self.shape)
            if self.step:
                x = np.round(x / self.step) * self.step
            if self.nonzero:
                x = np.where(np.abs(x) < 0.25, np.where(x < 0, -0.25, 0.25) - x, x)
        else:
            low = (0 if dtype.is_unsigned else -5) if self.low is None else int(self.low)
            high = 6 if self.high is None else int(self.high)
            x = rng.integers(low, high, self.shape)
            if self.nonzero:
                x = np.where(x == 0, high - 1, x)
        if self.zeros:
            x = np.where(rng.random(self.shape) < self.zeros, 0, x)
        return np.asarray(x).astype(dtype.as_numpy_dtype)


@dataclass(frozen=True)
class Case:
    """One converter test: ``fn`` on arguments of ``specs`` computes the op ``op``.

    ``rtol``/``atol`` bound the difference from TensorFlow's float results (integers and bools
    must be equal). ``check``, for ops whose values are random, replaces the comparison with
    TensorFlow's values by a check of what any correct result satisfies; it receives the
    outputs and TensorFlow's outputs (whose shapes and dtypes must still agree)."""

    op: str
    variant: str
    fn: Callable[..., Any]
    specs: tuple[tf.TensorSpec, ...]
    inputs: tuple[np.ndarray, ...]
    rtol: float = 1e-5
    atol: float = 1e-5
    check: Check | None = None
    why: str = ""  # why the tolerance is wider than the default, or what the check checks
    # Where the official converter's file is known not to give TF's results: how it fails.
    official_defect: str = ""
    # Where numlite's file has more operators than the official converter's: why.
    more_ops: str = ""
    # Variables the function captures (the official converter finds them on a tf.Module).
    variables: tuple[Any, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.op}[{self.variant}]"


CASES: list[Case] = []

# Op types the sweep does not try, and why.
LEFT_OUT: dict[str, str] = {}

# Cases whose official file does not give TF's results (measured with TF 2.21): how it fails.
OFFICIAL_DEFECTS = {
    "SegmentSum[float32 constant ids with a gap]": "LiteRT's SEGMENT_SUM refuses ids that skip a value (TF makes "
                                                   "that segment a row of zeros)",
    "Lgamma[float32]": "with a dynamic batch its 56-op lowering fails to prepare (a SUB of shapes [3, 4] and [0, 4])",
    "IsInf[float32 inf and nan]": "it compares the absolute value with the largest finite float32 (its constant "
                                  "for infinity), so it finds no infinity",
    "ReverseV2[float32 axes [0, 2]]": "one REVERSE_V2 of non-adjacent axes, which LiteRT refuses at invoke",
    "NonMaxSuppressionV3[float32 fewer than the maximum]": "the indices stay padded to max_output_size, where TF's "
                                                          "output holds only the selected ones",
    "NonMaxSuppressionV4[float32 unpadded]": "the indices stay padded to max_output_size, where TF's output holds "
                                             "only the selected ones",
    "FakeQuantWithMinMaxArgs[float32 narrow]": "no clamp to the narrow range: values below it quantize to 0 where "
                                               "TF's quantize to 1",
    "QuantizeAndDequantizeV2[float32]": "it quantizes asymmetrically, as FakeQuant, where TF's scale is symmetric "
                                        "(zero point 0)",
    "QuantizeAndDequantizeV2[float32 narrow]": "it quantizes asymmetrically, as FakeQuant, where TF's scale is "
                                               "symmetric (zero point 0)",
    "QuantizeAndDequantizeV4[float32]": "it quantizes asymmetrically, as FakeQuant, where TF's scale is symmetric "
                                        "(zero point 0)",
}

_PRECISION = ("numlite follows TF's kernel (its thresholds, Eigen's expm1 and log1p algorithms), which keeps the "
              "relative precision near 0 and for large x that the official converter's two or three ops lose")
_NMS = ("TFLite's op pads its outputs to max_output_size; TF's unpadded outputs hold only the selected boxes: "
        "numlite cuts them (a RESHAPE of the count, a SLICE per output); the official file keeps them padded")
_NARROW = "TF clamps to the narrow range; QUANTIZE alone saturates at the storage type's end (a MAXIMUM first)"
# Where numlite's file has more operators than the official one (by case, or by op for all its cases): why.
MORE_OPS = {
    "Softplus": _PRECISION, "Expm1": _PRECISION, "Log1p": _PRECISION,
    "ReverseV2[float32 axes [0, 2]]": "LiteRT's REVERSE_V2 reverses adjacent axes only: one op per run of axes",
    "NonMaxSuppressionV3": _NMS, "NonMaxSuppressionV4[float32 unpadded]": _NMS,
    "NonMaxSuppressionV5[float32]": _NMS,
    "FakeQuantWithMinMaxArgs[float32 narrow]": _NARROW, "QuantizeAndDequantizeV2[float32 narrow]": _NARROW,
    "TensorListLength": "a list of dynamic length keeps a spare row (numlite/converter/lower/tensor_list.py): its "
                        "length is the row count minus one",
}


def add(op: str, variant: str, fn: Callable[..., Any], args: Sequence[Arg], **options: Any) -> None:
    """Append a case; the arguments' values are seeded by the case's name."""
    name = f"{op}[{variant}]"
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    options.setdefault("official_defect", OFFICIAL_DEFECTS.get(name, ""))
    options.setdefault("more_ops", MORE_OPS.get(name, MORE_OPS.get(op, "")))
    CASES.append(Case(op, variant, fn, tuple(a.spec(i) for i, a in enumerate(args)),
                      tuple(a.make(rng) for a in args), **options))


def raw(op: str, names: Sequence[str] | None = None, **fixed: Any) -> Callable[..., Any]:
    """``fn(*tensors)`` calling ``tf.raw_ops.<op>`` with the tensors as its first inputs (or
    the inputs ``names``) and ``fixed`` as its other arguments (constants and attributes)."""
    function = getattr(tf.raw_ops, op)
    params = [p for p in inspect.signature(function).parameters if p not in fixed and p != "name"]

    def fn(*xs):
        return function(**dict(zip(names or params, xs)), **fixed)

    fn.__name__ = op
    return fn


def dtype_name(dtype: Any) -> str:
    return tf.as_dtype(dtype).name


# -- element-wise: unary -------------------------------------------------------------------------

# op: (dtypes, low, high) of the input; None keeps the default range.
UNARY: dict[str, tuple[tuple[Any, ...], float | None, float | None]] = {
    "Abs": (NUMBERS, None, None), "Neg": (NUMBERS, None, None), "Square": (NUMBERS, None, None),
    "Sign": (NUMBERS, None, None), "Relu": (NUMBERS, None, None), "Relu6": ((F32, I32), -8, 8),
    "Elu": ((F32,), None, None), "Selu": ((F32,), None, None), "Softplus": ((F32,), None, None),
    "Softsign": ((F32,), None, None), "Sigmoid": ((F32,), None, None), "Tanh": ((F32,), None, None),
    "Exp": ((F32,), None, None), "Expm1": ((F32,), None, None), "Log": ((F32,), 0.05, 3),
    "Log1p": ((F32,), -0.9, 3), "Sqrt": ((F32,), 0, 3), "Rsqrt": ((F32,), 0.1, 3),
    "Reciprocal": ((F32,), None, None), "Inv": ((F32,), None, None),
    "Sin": ((F32,), None, None), "Cos": ((F32,), None, None), "Tan": ((F32,), -1.2, 1.2),
    "Asin": ((F32,), -0.95, 0.95), "Acos": ((F32,), -0.95, 0.95), "Atan": ((F32,), None, None),
    "Sinh": ((F32,), None, None), "Cosh": ((F32,), None, None), "Asinh": ((F32,), None, None),
    "Acosh": ((F32,), 1.05, 3), "Atanh": ((F32,), -0.95, 0.95),
    "Floor": ((F32,), None, None), "Ceil": ((F32,), None, None), "Round": ((F32, I32), None, None),
    "Rint": ((F32,), None, None), "Erf": ((F32,), None, None), "Erfc": ((F32,), None, None),
    "Erfinv": ((F32,), -0.95, 0.95), "Ndtri": ((F32,), 0.05, 0.95), "Lgamma": ((F32,), 0.2, 3),
    "Digamma": ((F32,), 0.2, 3), "BesselI0e": ((F32,), None, None), "BesselI1e": ((F32,), None, None),
    "IsFinite": ((F32,), None, None), "IsInf": ((F32,), None, None), "IsNan": ((F32,), None, None),
    "LogicalNot": ((BOOL,), None, None), "Invert": ((I32, I64, U8), None, None),
    "PopulationCount": ((I32,), -100, 100),
    "ZerosLike": ((F32, I32, I64, BOOL), None, None), "OnesLike": ((F32, I32, I64, BOOL), None, None),
}  # fmt: skip

# The float predicates' point: infinities and NaN among ordinary values.
SPECIAL = np.array([0.0, -0.0, 1e-7, -1.5, 1.0, np.inf, -np.inf, np.nan], np.float32)


def _unary_cases() -> None:
    for op, (dtypes, low, high) in UNARY.items():
        for dtype in dtypes:
            add(op, dtype_name(dtype), raw(op), [Arg((3, 4), dtype, low, high, signature=(None, 4))])
    # The official converter's Lgamma fails with a dynamic batch: a static shape too; and the
    # reflection side, poles included.
    add("Lgamma", "float32 static shape", raw("Lgamma"), [Arg((3, 4), low=0.2, high=3)])
    add("Lgamma", "float32 negative and poles", raw("Lgamma"),
        [Arg((12,), value=[-2.5, -1.3, -0.7, -0.2, 0.3, 0.45, -3.0, 0.0, -1.0, 1.0, 2.0, 7.5])])
    for op in ("IsFinite", "IsInf", "IsNan"):
        add(op, "float32 inf and nan", raw(op), [Arg(SPECIAL.shape, F32, value=SPECIAL)])


_unary_cases()


# -- element-wise: binary ------------------------------------------------------------------------


def _pair(op: str, variant: str, x: Arg, y: Arg, **options: Any) -> None:
    add(op, variant, raw(op), [x, y], **options)


def _binary(op: str, dtypes: Sequence[Any], x: dict | None = None, y: dict | None = None, **options: Any) -> None:
    """Equal shapes for each dtype, and a broadcast against a dynamic batch for the first."""
    x, y = x or {}, y or {}
    for dtype in dtypes:
        _pair(op, dtype_name(dtype), Arg((3, 4), dtype, **x), Arg((3, 4), dtype, **y), **options)
    dtype = dtypes[0]
    _pair(op, f"{dtype_name(dtype)} broadcast", Arg((3, 1, 4), dtype, signature=(None, 1, 4), **x),
          Arg((2, 1), dtype, **y), **options)


def _binary_cases() -> None:
    ties = {"step": 0.5}
    for op in ("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"):
        _binary(op, NUMBERS, ties, ties)
    for op in ("Less", "LessEqual", "Greater", "GreaterEqual"):
        _binary(op, NUMBERS, ties, ties)
    for op in ("Equal", "NotEqual"):
        _binary(op, NUMBERS + (BOOL,), ties, ties)
    divisor = {"nonzero": True}
    for op in ("Div", "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Mod"):
        _binary(op, NUMBERS, None, divisor)
    _binary("RealDiv", (F32,), None, divisor)
    _binary("DivNoNan", (F32,), None, {"zeros": 0.3})
    inf_nan = np.array([np.inf, -np.inf, np.nan, 1.0, np.inf, np.nan], np.float32)
    for op in ("DivNoNan", "MulNoNan"):  # 0 where y is 0, even for an infinite or NaN x
        _pair(op, "float32 inf and nan", Arg((6,), value=inf_nan), Arg((6,), value=[0, 0, 0, 0, 2, 2]))
    _binary("MulNoNan", (F32,), None, {"zeros": 0.3})
    _binary("Pow", (F32,), {"low": 0.1, "high": 2}, {"low": -2, "high": 2})
    _binary("Pow", (I32, I64), {"low": -3, "high": 4}, {"low": 0, "high": 4})
    _binary("Atan2", (F32,))
    _binary("Xdivy", (F32,), {"zeros": 0.3}, divisor)
    _binary("Xlogy", (F32,), {"zeros": 0.3}, {"low": 0.1, "high": 3})
    _binary("Xlog1py", (F32,), {"zeros": 0.3}, {"low": -0.5, "high": 3})
    _binary("NextAfter", (F32,))
    _binary("Igamma", (F32,), {"low": 0.5, "high": 3}, {"low": 0.1, "high": 3})
    _binary("Igammac", (F32,), {"low": 0.5, "high": 3}, {"low": 0.1, "high": 3})
    _binary("Zeta", (F32,), {"low": 1.5, "high": 4}, {"low": 0.5, "high": 3})
    _binary("Polygamma", (F32,), {"low": 0, "high": 3, "step": 1}, {"low": 0.5, "high": 3})
    for op in ("LogicalAnd", "LogicalOr"):
        _binary(op, (BOOL,))
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        _binary(op, (I32, I64, U8), {"low": -100, "high": 100}, {"low": -100, "high": 100})
    for op in ("LeftShift", "RightShift"):
        _binary(op, (I32, I64), {"low": -100, "high": 100}, {"low": 0, "high": 9})
    add("ApproximateEqual", "float32", raw("ApproximateEqual", tolerance=0.5), [Arg((3, 4)), Arg((3, 4))])
    add("Betainc", "float32", raw("Betainc"), [Arg((3, 4), low=0.5, high=3), Arg((3, 4), low=0.5, high=3),
                                               Arg((3, 4), low=0, high=1)])
    for dtype in NUMBERS:
        add("AddN", dtype_name(dtype), lambda a, b, c: tf.raw_ops.AddN(inputs=[a, b, c]), [Arg((3, 4), dtype)] * 3)
    for dtype in (F32, I32):
        add("ClipByValue", f"{dtype_name(dtype)} scalar bounds",
            lambda x: tf.raw_ops.ClipByValue(t=x, clip_value_min=np.array(-1, x.dtype.as_numpy_dtype),
                                             clip_value_max=np.array(1, x.dtype.as_numpy_dtype)),
            [Arg((3, 4), dtype)])
    add("ClipByValue", "float32 tensor bounds", raw("ClipByValue"),
        [Arg((3, 4)), Arg((3, 4), low=-2, high=0), Arg((3, 4), low=0, high=2)])
    for dtype in (F32, I32, BOOL):
        add("Select", dtype_name(dtype), raw("Select"), [Arg((3, 4), BOOL), Arg((3, 4), dtype), Arg((3, 4), dtype)])
    add("Select", "float32 row condition", raw("Select"), [Arg((3,), BOOL), Arg((3, 4)), Arg((3, 4))])
    for dtype in (F32, I32, I64):
        add("SelectV2", dtype_name(dtype), raw("SelectV2"), [Arg((3, 4), BOOL), Arg((3, 4), dtype), Arg((3, 4), dtype)])
    add("SelectV2", "float32 broadcast", raw("SelectV2"),
        [Arg((4,), BOOL), Arg((3, 1), signature=(None, 1)), Arg((1, 4))])
    for dtype in (F32, I32):
        add("BiasAdd", dtype_name(dtype), raw("BiasAdd"), [Arg((2, 3, 4), dtype, signature=(None, 3, 4)), Arg((4,), dtype)])
    add("BiasAdd", "float32 NCHW", raw("BiasAdd", data_format="NCHW"), [Arg((2, 3, 4, 5)), Arg((3,))])
    add("BiasAddV1", "float32", raw("BiasAddV1"), [Arg((2, 3, 4)), Arg((4,))])
    casts = [(F32, I32), (F32, I64), (F32, BOOL), (F32, U8), (I32, F32), (I32, I64), (I32, BOOL),
             (I64, F32), (I64, I32), (BOOL, F32), (BOOL, I32), (U8, F32)]
    for source, target in casts:
        low = 0 if target == U8 else None
        add("Cast", f"{dtype_name(source)} to {dtype_name(target)}", raw("Cast", DstT=target),
            [Arg((3, 4), source, low=low, high=3 if target == U8 else None, step=0.5 if source == F32 else None)])
    add("Bitcast", "float32 to int32", raw("Bitcast", type=I32), [Arg((3, 4))])
    add("Bitcast", "int32 to float32", raw("Bitcast", type=F32), [Arg((3, 4), I32, low=0x3F000000, high=0x40000000)])
    add("Bitcast", "float32 to uint8 (a new last axis)", raw("Bitcast", type=U8), [Arg((3, 4))])


_binary_cases()


# -- activations and normalizations --------------------------------------------------------------


def _activation_cases() -> None:
    for op in ("Softmax", "LogSoftmax"):
        add(op, "float32", raw(op), [Arg((3, 5), signature=(None, 5))])
        add(op, "float32 rank 3", raw(op), [Arg((2, 3, 5))])
    for alpha in (0.2, 0.01):
        add("LeakyRelu", f"float32 alpha {alpha}", raw("LeakyRelu", alpha=alpha), [Arg((3, 4), signature=(None, 4))])
    add("LRN", "float32", raw("LRN"), [Arg((1, 3, 3, 8))])
    add("LRN", "float32 radius 2", raw("LRN", depth_radius=2, bias=2.0, alpha=0.5, beta=0.75), [Arg((2, 3, 3, 6))])


_activation_cases()


# -- reductions and scans ------------------------------------------------------------------------


def _reduction_cases() -> None:
    for op in ("Sum", "Mean", "Max", "Min", "Prod", "EuclideanNorm"):
        dtypes = (F32,) if op == "EuclideanNorm" else NUMBERS
        low, high = (-1.5, 1.5) if op == "Prod" else (None, None)
        for dtype in dtypes:
            add(op, dtype_name(dtype), raw(op, axis=np.array(1, np.int32)),
                [Arg((3, 4, 5), dtype, low, high, signature=(None, 4, 5))])
        add(op, "float32 axes [0, 2] keep_dims", raw(op, axis=np.array([0, 2], np.int32), keep_dims=True),
            [Arg((3, 4, 5), F32, low, high)])
        add(op, "float32 axis -1 int64", raw(op, axis=np.array([-1], np.int64)), [Arg((3, 4, 5), F32, low, high)])
    for op in ("Any", "All"):
        add(op, "bool", raw(op, axis=np.array(1, np.int32)), [Arg((3, 4, 5), BOOL)])
        add(op, "bool axes [0, 2] keep_dims", raw(op, axis=np.array([0, 2], np.int32), keep_dims=True),
            [Arg((3, 4, 5), BOOL)])
    for op in ("ArgMax", "ArgMin"):
        for dtype in NUMBERS:
            add(op, dtype_name(dtype), raw(op, dimension=np.array(1, np.int32)),
                [Arg((3, 6), dtype, step=0.5, signature=(None, 6))])
        add(op, "float32 axis 0 int32 output", raw(op, dimension=np.array(0, np.int32), output_type=I32),
            [Arg((3, 6), step=0.5)])
    for op in ("Cumsum", "Cumprod", "CumulativeLogsumexp"):
        dtypes = (F32,) if op == "CumulativeLogsumexp" else NUMBERS
        low, high = (-1.5, 1.5) if op == "Cumprod" else (None, None)
        for dtype in dtypes:
            add(op, dtype_name(dtype), raw(op, axis=np.array(1, np.int32)),
                [Arg((3, 5), dtype, low, high, signature=(None, 5))])
        add(op, "float32 exclusive reverse axis 0", raw(op, axis=np.array(0, np.int32), exclusive=True, reverse=True),
            [Arg((4, 3), F32, low, high)])
    add("L2Loss", "float32", raw("L2Loss"), [Arg((3, 4))])
    segment_ids = np.array([0, 0, 1, 2, 2, 2], np.int32)
    for op in ("SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"):
        for dtype in (F32, I32):
            add(op, dtype_name(dtype), raw(op), [Arg((6, 3), dtype), Arg((6,), I32, value=segment_ids)])
    # TF leaves a skipped id a row of zeros; LiteRT's SEGMENT_SUM refuses gaps (constant ids: numlite's lowering avoids it)
    add("SegmentSum", "float32 constant ids with a gap", lambda x: tf.raw_ops.SegmentSum(
        data=x, segment_ids=np.array([0, 0, 2, 2, 3, 5], np.int32)), [Arg((6, 3))])
    unsorted_ids = np.array([3, 0, 3, 1, 0, 3], np.int32)  # segment 2 is empty
    for op in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"):
        for dtype in (F32, I32):
            add(op, dtype_name(dtype), raw(op, num_segments=np.array(4, np.int32)),
                [Arg((6, 3), dtype), Arg((6,), I32, value=unsorted_ids)])
    add("UnsortedSegmentSum", "float32 a negative id", raw("UnsortedSegmentSum", num_segments=np.array(3, np.int32)),
        [Arg((5, 2)), Arg((5,), I32, value=[2, -1, 0, 2, 1])])
    add("Bincount", "int32", raw("Bincount", size=np.array(6, np.int32), weights=np.zeros(0, np.int32)),
        [Arg((8,), I32, low=0, high=6)])
    add("DenseBincount", "int32", raw("DenseBincount", size=np.array(6, np.int32), weights=np.zeros(0, np.int32)),
        [Arg((8,), I32, low=0, high=6)])


_reduction_cases()


# -- shapes and layout ---------------------------------------------------------------------------

ALL_TYPES = (F32, I32, I64, BOOL)


def i32(*values: Any) -> np.ndarray:
    return np.array(values, np.int32)


def _shape_cases() -> None:
    for dtype in ALL_TYPES:
        add("Reshape", dtype_name(dtype), raw("Reshape", shape=i32(2, 6)), [Arg((3, 4), dtype)])
    add("Reshape", "float32 -1 with a dynamic batch", raw("Reshape", shape=i32(-1, 2, 2)), [Arg((3, 4), signature=(None, 4))])
    add("Reshape", "float32 shape argument", raw("Reshape"), [Arg((3, 4)), Arg((2,), I32, value=[6, 2])])
    for dtype in (F32, BOOL):
        add("Squeeze", dtype_name(dtype), raw("Squeeze"), [Arg((3, 1, 4, 1), dtype)])
    add("Squeeze", "float32 axis 1", raw("Squeeze", axis=[1]), [Arg((3, 1, 4, 1), signature=(None, 1, 4, 1))])
    for dtype in (F32, I32, BOOL):
        add("ExpandDims", dtype_name(dtype), raw("ExpandDims", axis=np.array(0, np.int32)), [Arg((3, 4), dtype)])
    add("ExpandDims", "float32 axis -1", raw("ExpandDims", axis=np.array(-1, np.int64)), [Arg((3, 4), signature=(None, 4))])
    for out in (I32, I64):
        add("Shape", dtype_name(out), raw("Shape", out_type=out), [Arg((3, 4), signature=(None, 4))])
        add("Size", dtype_name(out), raw("Size", out_type=out), [Arg((3, 4), signature=(None, 4))])
    add("ShapeN", "int32", lambda a, b: tf.raw_ops.ShapeN(input=[a, b]), [Arg((3, 4), signature=(None, 4)), Arg((2,))])
    add("Rank", "float32", raw("Rank"), [Arg((3, 4), signature=(None, 4))])
    add("Fill", "float32", raw("Fill"), [Arg((2,), I32, value=[2, 3]), Arg((), F32)])
    add("Fill", "int32 constant dims", raw("Fill", dims=i32(2, 3)), [Arg((), I32)])
    add("Empty", "float32 zeros", raw("Empty", dtype=F32, init=True), [Arg((2,), I32, value=[2, 3])])
    for dtype in (F32, I32, BOOL):
        add("BroadcastTo", dtype_name(dtype), raw("BroadcastTo", shape=i32(2, 3, 4)), [Arg((3, 1), dtype)])
    add("BroadcastTo", "float32 shape argument", raw("BroadcastTo"), [Arg((3, 1)), Arg((3,), I32, value=[2, 3, 4])])
    for op in ("BroadcastArgs", "BroadcastGradientArgs"):
        add(op, "int32", raw(op), [Arg((3,), I32, value=[2, 3, 1]), Arg((2,), I32, value=[1, 4])])
    for dtype, (start, limit, delta) in ((F32, (0.5, 4.0, 0.75)), (I32, (1, 12, 3)), (I64, (10, -2, -4))):
        add("Range", dtype_name(dtype), raw("Range"),
            [Arg((), dtype, value=start), Arg((), dtype, value=limit), Arg((), dtype, value=delta)])
    add("LinSpace", "float32", raw("LinSpace", num=np.array(5, np.int32)), [Arg((), value=-1.5), Arg((), value=2.0)])
    for dtype in ALL_TYPES:
        add("Transpose", dtype_name(dtype), raw("Transpose", perm=i32(1, 0, 2)), [Arg((2, 3, 4), dtype)])
    add("Transpose", "float32 perm [2, 0, 1]", raw("Transpose", perm=np.array([2, 0, 1], np.int64)),
        [Arg((2, 3, 4), signature=(None, 3, 4))])
    add("ConjugateTranspose", "float32", raw("ConjugateTranspose", perm=i32(1, 0)), [Arg((3, 4))])
    for dtype in ALL_TYPES:
        add("ConcatV2", dtype_name(dtype), lambda a, b, c: tf.raw_ops.ConcatV2(values=[a, b, c], axis=np.array(1, np.int32)),
            [Arg((2, 3), dtype), Arg((2, 1), dtype), Arg((2, 2), dtype)])
    add("ConcatV2", "float32 axis -1 dynamic batch",
        lambda a, b: tf.raw_ops.ConcatV2(values=[a, b], axis=np.array(-1, np.int64)),
        [Arg((3, 2, 2), signature=(None, 2, 2)), Arg((3, 2, 1), signature=(None, 2, 1))])
    add("Concat", "float32", lambda a, b: tf.raw_ops.Concat(concat_dim=np.array(0, np.int32), values=[a, b]),
        [Arg((2, 3)), Arg((1, 3))])
    for dtype in ALL_TYPES:
        add("Pack", dtype_name(dtype), lambda a, b: tf.raw_ops.Pack(values=[a, b]), [Arg((2, 3), dtype), Arg((2, 3), dtype)])
        add("Unpack", dtype_name(dtype), raw("Unpack", num=3), [Arg((3, 2), dtype)])
    add("Pack", "float32 axis -1", lambda a, b, c: tf.raw_ops.Pack(values=[a, b, c], axis=-1), [Arg((2, 3))] * 3)
    add("Unpack", "float32 axis 1", raw("Unpack", num=4, axis=1), [Arg((2, 4, 3), signature=(None, 4, 3))])
    for dtype in ALL_TYPES:
        add("Split", dtype_name(dtype), raw("Split", axis=np.array(1, np.int32), num_split=2), [Arg((2, 4), dtype)])
        add("SplitV", dtype_name(dtype), raw("SplitV", size_splits=i32(1, -1, 2), axis=np.array(1, np.int32), num_split=3),
            [Arg((2, 6), dtype)])
    add("Split", "float32 axis -1 dynamic batch", raw("Split", axis=np.array(-1, np.int32), num_split=3),
        [Arg((2, 3, 6), signature=(None, 3, 6))])
    for dtype in ALL_TYPES:
        add("Tile", dtype_name(dtype), raw("Tile", multiples=i32(2, 1, 3)), [Arg((2, 3, 1), dtype)])
    add("Tile", "float32 multiples argument", raw("Tile"), [Arg((2, 3)), Arg((2,), I32, value=[3, 2])])
    for dtype in ALL_TYPES:
        add("ReverseV2", dtype_name(dtype), raw("ReverseV2", axis=i32(1)), [Arg((2, 3, 4), dtype)])
    add("ReverseV2", "float32 axes [0, 2]", raw("ReverseV2", axis=np.array([0, 2], np.int64)), [Arg((2, 3, 4))])
    add("Reverse", "float32", raw("Reverse", dims=np.array([True, False])), [Arg((3, 4))])
    for dtype in (F32, I32):
        add("ReverseSequence", dtype_name(dtype), raw("ReverseSequence", seq_dim=1, batch_dim=0),
            [Arg((3, 5, 2), dtype), Arg((3,), I32, value=[2, 5, 0])])
    add("ReverseSequence", "float32 int64 lengths seq_dim 0", raw("ReverseSequence", seq_dim=0, batch_dim=1),
        [Arg((5, 3)), Arg((3,), I64, value=[1, 4, 3])])


_shape_cases()


def _slice_cases() -> None:
    for dtype in ALL_TYPES:
        add("Slice", dtype_name(dtype), raw("Slice", begin=i32(1, 0), size=i32(2, -1)), [Arg((4, 5), dtype)])
    add("Slice", "float32 begin and size arguments", raw("Slice"),
        [Arg((4, 5)), Arg((2,), I32, value=[1, 2]), Arg((2,), I32, value=[2, 3])])
    slices = {  # variant: (begin, end, strides, masks)
        "basic": (i32(1, 0), i32(3, 4), i32(1, 2), {}),
        "masks": (i32(1, 2), i32(0, 0), i32(1, -1), {"begin_mask": 0, "end_mask": 3}),
        "shrink": (i32(1, 0), i32(2, 4), i32(1, 1), {"shrink_axis_mask": 1}),
        "ellipsis new axis": (i32(0, 0, 1), i32(0, 0, 3), i32(1, 1, 1), {"ellipsis_mask": 1, "new_axis_mask": 2}),
    }
    for variant, (begin, end, strides, masks) in slices.items():
        for dtype in (F32,) if variant != "basic" else ALL_TYPES:
            name = variant if variant != "basic" else dtype_name(dtype)
            add("StridedSlice", name, raw("StridedSlice", begin=begin, end=end, strides=strides, **masks),
                [Arg((4, 5), dtype)])
    add("StridedSlice", "float32 int64 indices dynamic batch",
        raw("StridedSlice", begin=np.array([0, 1], np.int64), end=np.array([0, -1], np.int64),
            strides=np.array([1, 1], np.int64), begin_mask=1, end_mask=1),
        [Arg((4, 5), signature=(None, 5))])
    add("TensorStridedSliceUpdate", "float32",
        raw("TensorStridedSliceUpdate", begin=i32(1, 0), end=i32(3, 4), strides=i32(1, 2)),
        [Arg((4, 5)), Arg((2, 2))], )
    pads = i32(1, 2, 0, 1).reshape(2, 2)
    for dtype in (F32, I32, I64):
        add("Pad", dtype_name(dtype), raw("Pad", paddings=pads), [Arg((2, 3), dtype)])
        add("PadV2", dtype_name(dtype), raw("PadV2", paddings=pads, constant_values=np.array(7, dtype.as_numpy_dtype)),
            [Arg((2, 3), dtype)])
    add("Pad", "float32 int64 paddings dynamic batch", raw("Pad", paddings=np.array([[0, 0], [1, 1], [2, 0]], np.int64)),
        [Arg((2, 3, 4), signature=(None, 3, 4))])
    for mode in ("REFLECT", "SYMMETRIC"):
        for dtype in (F32, I32):
            add("MirrorPad", f"{dtype_name(dtype)} {mode}", raw("MirrorPad", paddings=pads, mode=mode),
                [Arg((3, 4), dtype)])


_slice_cases()


def _identity_cases() -> None:
    """Ops that compute nothing: the result is the input, which both converters should pass
    through (a one-op model of them has no operator)."""
    add("Identity", "float32", lambda x: tf.raw_ops.Identity(input=x) * 2.0, [Arg((3, 4))])
    add("IdentityN", "float32 and int32", lambda x, y: [t * 2 for t in tf.raw_ops.IdentityN(input=[x, y])],
        [Arg((3, 4)), Arg((2,), I32)])
    add("StopGradient", "float32", lambda x: tf.raw_ops.StopGradient(input=x) * 2.0, [Arg((3, 4))])
    add("PreventGradient", "float32", lambda x: tf.raw_ops.PreventGradient(input=x) * 2.0, [Arg((3, 4))])
    add("Snapshot", "float32", lambda x: tf.raw_ops.Snapshot(input=x) * 2.0, [Arg((3, 4))])
    add("CheckNumerics", "float32", lambda x: tf.raw_ops.CheckNumerics(tensor=x, message="bad") * 2.0, [Arg((3, 4))])
    add("EnsureShape", "float32", lambda x: tf.raw_ops.EnsureShape(input=x, shape=[None, 4]) * 2.0,
        [Arg((3, 4), signature=(None, None))])
    add("PlaceholderWithDefault", "float32", lambda x: tf.raw_ops.PlaceholderWithDefault(input=x, shape=[3, 4]) * 2.0,
        [Arg((3, 4))])


_identity_cases()


# -- blocks, diagonals, Einsum -------------------------------------------------------------------


def _block_cases() -> None:
    for dtype in (F32, I32):
        add("DepthToSpace", dtype_name(dtype), raw("DepthToSpace", block_size=2), [Arg((1, 2, 3, 8), dtype)])
        add("SpaceToDepth", dtype_name(dtype), raw("SpaceToDepth", block_size=2), [Arg((1, 4, 6, 2), dtype)])
    add("DepthToSpace", "float32 dynamic batch", raw("DepthToSpace", block_size=2),
        [Arg((2, 2, 3, 4), signature=(None, 2, 3, 4))])
    add("SpaceToBatchND", "float32", raw("SpaceToBatchND", block_shape=i32(2, 2), paddings=i32(0, 0, 1, 1).reshape(2, 2)),
        [Arg((1, 4, 2, 3))])
    add("SpaceToBatchND", "int32 one block dim", raw("SpaceToBatchND", block_shape=i32(2), paddings=i32(1, 1).reshape(1, 2)),
        [Arg((2, 4, 3), I32)])
    add("BatchToSpaceND", "float32", raw("BatchToSpaceND", block_shape=i32(2, 2), crops=i32(0, 0, 1, 1).reshape(2, 2)),
        [Arg((4, 2, 2, 3))])
    add("BatchToSpaceND", "int32 one block dim", raw("BatchToSpaceND", block_shape=i32(2), crops=i32(0, 1).reshape(1, 2)),
        [Arg((4, 3, 2), I32)])
    add("SpaceToBatch", "float32", raw("SpaceToBatch", paddings=i32(0, 0, 1, 1).reshape(2, 2), block_size=2),
        [Arg((1, 4, 2, 3))])
    add("BatchToSpace", "float32", raw("BatchToSpace", crops=i32(0, 0, 1, 1).reshape(2, 2), block_size=2),
        [Arg((4, 2, 2, 3))])


_block_cases()


def _diagonal_cases() -> None:
    zero = np.array(0, np.int32)
    for dtype in (F32, I32):
        add("MatrixDiag", dtype_name(dtype), raw("MatrixDiag"), [Arg((2, 3), dtype)])
        add("MatrixDiagPart", dtype_name(dtype), raw("MatrixDiagPart"), [Arg((2, 3, 3), dtype)])
        add("MatrixSetDiag", dtype_name(dtype), raw("MatrixSetDiag"), [Arg((2, 3, 4), dtype), Arg((2, 3), dtype)])
    v2_zero = {"k": zero, "num_rows": np.array(-1, np.int32), "num_cols": np.array(-1, np.int32),
               "padding_value": np.array(0, np.float32)}
    add("MatrixDiagV2", "float32", raw("MatrixDiagV2", **v2_zero), [Arg((2, 3))])
    add("MatrixDiagV3", "float32", raw("MatrixDiagV3", **v2_zero), [Arg((2, 3))])
    add("MatrixDiagV3", "float32 k 1", raw("MatrixDiagV3", **{**v2_zero, "k": np.array(1, np.int32)}), [Arg((2, 3))])
    add("MatrixDiagPartV2", "float32", raw("MatrixDiagPartV2", k=zero, padding_value=np.array(0, np.float32)),
        [Arg((2, 3, 4))])
    add("MatrixDiagPartV3", "float32", raw("MatrixDiagPartV3", k=zero, padding_value=np.array(0, np.float32)),
        [Arg((2, 3, 4))])
    add("MatrixDiagPartV3", "float32 band k (-1, 1)",
        raw("MatrixDiagPartV3", k=i32(-1, 1), padding_value=np.array(9, np.float32)), [Arg((2, 3, 4))])
    add("MatrixSetDiagV2", "float32", raw("MatrixSetDiagV2", k=zero), [Arg((2, 3, 4)), Arg((2, 3))])
    add("MatrixSetDiagV3", "float32", raw("MatrixSetDiagV3", k=zero), [Arg((2, 3, 4)), Arg((2, 3))])
    add("MatrixSetDiagV3", "float32 k 1", raw("MatrixSetDiagV3", k=np.array(1, np.int32)), [Arg((2, 3, 4)), Arg((2, 3))])
    for dtype in (F32, I32):
        add("MatrixBandPart", f"{dtype_name(dtype)} lower 1 upper 0",
            raw("MatrixBandPart", num_lower=np.array(1, np.int64), num_upper=np.array(0, np.int64)),
            [Arg((2, 4, 5), dtype)])
    add("MatrixBandPart", "float32 lower -1 upper 2",
        raw("MatrixBandPart", num_lower=np.array(-1, np.int32), num_upper=np.array(2, np.int32)),
        [Arg((4, 5), signature=(None, 5))])
    add("Diag", "float32", raw("Diag"), [Arg((2, 3))])
    add("DiagPart", "float32", raw("DiagPart"), [Arg((2, 3, 2, 3))])
    equations = {
        "ij,jk->ik": ((3, 4), (4, 5)), "bij,bjk->bik": ((2, 3, 4), (2, 4, 5)), "bij->bji": ((2, 3, 4),),
        "bhqd,bhkd->bhqk": ((2, 2, 3, 4), (2, 2, 5, 4)), "ij->j": ((3, 4),), "ii->i": ((3, 3),),
        "i,j->ij": ((3,), (4,)),
    }
    for equation, shapes in equations.items():
        fn = lambda *xs, equation=equation: tf.raw_ops.Einsum(inputs=list(xs), equation=equation)  # noqa: E731
        add("Einsum", equation, fn, [Arg(shape) for shape in shapes])
    add("InvertPermutation", "int32", raw("InvertPermutation"), [Arg((5,), I32, value=[3, 0, 4, 1, 2])])


_diagonal_cases()


# -- indexing ------------------------------------------------------------------------------------


def _gather_cases() -> None:
    indices = Arg((2, 3), I32, low=0, high=5)
    for dtype in ALL_TYPES:
        add("GatherV2", dtype_name(dtype), raw("GatherV2", axis=np.array(0, np.int32)), [Arg((5, 3), dtype), indices])
    add("GatherV2", "float32 axis 1 int64 indices", raw("GatherV2", axis=np.array(1, np.int64)),
        [Arg((2, 5, 3), signature=(None, 5, 3)), Arg((4,), I64, low=0, high=5)])
    add("GatherV2", "float32 batch_dims 1", raw("GatherV2", axis=np.array(1, np.int32), batch_dims=1),
        [Arg((2, 5, 3)), Arg((2, 4), I32, low=0, high=5)])
    add("Gather", "float32", raw("Gather"), [Arg((5, 3)), indices])
    for dtype in (F32, I32, BOOL):
        add("GatherNd", dtype_name(dtype), raw("GatherNd"), [Arg((3, 4, 5), dtype), Arg((2, 2), I32, value=[[0, 1], [2, 3]])])
    add("GatherNd", "float32 int64 full indices", raw("GatherNd"),
        [Arg((3, 4)), Arg((3, 2), I64, value=[[0, 1], [2, 3], [1, 0]])])
    scatter_indices = Arg((3, 1), I32, value=[[4], [0], [4]])  # a repeated index: its updates add up
    for dtype in (F32, I32):
        add("ScatterNd", dtype_name(dtype), raw("ScatterNd", shape=i32(5, 4)), [scatter_indices, Arg((3, 4), dtype)])
    add("ScatterNd", "float32 int64 element indices", raw("ScatterNd", shape=np.array([3, 4], np.int64)),
        [Arg((2, 2), I64, value=[[0, 1], [2, 3]]), Arg((2,))])
    update_indices = Arg((2, 1), I32, value=[[3], [0]])
    for op in ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax", "TensorScatterMin"):
        for dtype in (F32, I32):
            add(op, dtype_name(dtype), raw(op), [Arg((5, 4), dtype), update_indices, Arg((2, 4), dtype)])
    add("DynamicStitch", "float32", lambda a, b: tf.raw_ops.DynamicStitch(indices=[i32(0, 2), i32(1, 3)], data=[a, b]),
        [Arg((2, 3)), Arg((2, 3))])
    add("ParallelDynamicStitch", "float32",
        lambda a, b: tf.raw_ops.ParallelDynamicStitch(indices=[i32(0, 2), i32(1, 3)], data=[a, b]),
        [Arg((2, 3)), Arg((2, 3))])
    add("DynamicPartition", "float32", raw("DynamicPartition", num_partitions=2),
        [Arg((6, 2)), Arg((6,), I32, value=[1, 0, 0, 1, 1, 0])])
    for dtype in (F32, I32):
        add("OneHot", dtype_name(dtype), raw("OneHot", depth=np.array(4, np.int32), on_value=np.array(5, dtype.as_numpy_dtype),
                                               off_value=np.array(-1, dtype.as_numpy_dtype)),
            [Arg((2, 3), I32, low=-1, high=5)])
    add("OneHot", "float32 axis 0 int64 indices", raw("OneHot", depth=np.array(3, np.int32), on_value=np.array(1.0, np.float32),
                                                        off_value=np.array(0.0, np.float32), axis=0),
        [Arg((4,), I64, low=0, high=3)])
    add("Where", "bool", raw("Where"), [Arg((3, 4), BOOL)])
    add("Where", "float32", raw("Where"), [Arg((3, 4), zeros=0.5)])
    for dtype in (F32, I32):
        add("Unique", dtype_name(dtype), raw("Unique"), [Arg((8,), dtype, step=1.0, low=-3, high=3)])
    add("Unique", "int32 int64 indices", raw("Unique", out_idx=I64), [Arg((8,), I32, low=-3, high=3)])
    add("UniqueV2", "int32", raw("UniqueV2", axis=np.array([0], np.int32)), [Arg((8,), I32, low=-3, high=3)])
    add("UniqueWithCounts", "int32", raw("UniqueWithCounts"), [Arg((8,), I32, low=-3, high=3)])
    for dtype in (F32, I32):
        add("TopKV2", dtype_name(dtype), raw("TopKV2", k=np.array(2, np.int32)), [Arg((3, 6), dtype, step=0.5)])
    add("TopKV2", "float32 k argument", raw("TopKV2"), [Arg((3, 6), signature=(None, 6)), Arg((), I32, value=3)])
    add("InTopKV2", "float32", raw("InTopKV2", k=np.array(2, np.int32)), [Arg((3, 5)), Arg((3,), I32, low=0, high=5)])
    for dtype in (F32, I32):
        add("Bucketize", dtype_name(dtype), raw("Bucketize", boundaries=[-1.0, 0.0, 1.5]), [Arg((3, 4), dtype, step=0.5)])
    add("SparseToDense", "float32", raw("SparseToDense", output_shape=i32(4, 5), default_value=np.array(0.5, np.float32)),
        [Arg((3, 2), I32, value=[[0, 1], [1, 3], [3, 4]]), Arg((3,))])
    add("SparseToDense", "int32 scalar value int64 indices",
        raw("SparseToDense", output_shape=np.array([6], np.int64), default_value=np.array(0, np.int32)),
        [Arg((3,), I64, value=[0, 2, 5]), Arg((), I32, value=7)])
    add("ListDiff", "int32", raw("ListDiff"), [Arg((8,), I32, low=0, high=6), Arg((3,), I32, low=0, high=6)])
    sorted_rows = np.sort(np.random.default_rng(0).uniform(-2, 2, (2, 5)).astype(np.float32), axis=1)
    for op in ("UpperBound", "LowerBound"):
        add(op, "float32", raw(op), [Arg((2, 5), value=sorted_rows), Arg((2, 3))])
    add("HistogramFixedWidth", "float32", raw("HistogramFixedWidth", value_range=np.array([-2, 2], np.float32),
                                               nbins=np.array(5, np.int32)), [Arg((10,))])
    add("Roll", "float32", raw("Roll", shift=np.array(1, np.int32), axis=np.array(1, np.int32)), [Arg((3, 4))])
    add("Roll", "int32 two axes", raw("Roll", shift=i32(1, -2), axis=i32(0, 1)), [Arg((3, 4), I32)])


_gather_cases()


# -- neural-network ops --------------------------------------------------------------------------


def weights(shape: tuple[int, ...], seed: int, scale: float = 0.5) -> np.ndarray:
    """Constant weights of a case (closed over, as a frozen model's are)."""
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(np.float32)


def _conv_cases() -> None:
    w = weights((3, 3, 3, 4), 1)
    conv = {  # variant: attributes
        "SAME": {"strides": [1, 1, 1, 1], "padding": "SAME"},
        "VALID stride 2": {"strides": [1, 2, 2, 1], "padding": "VALID"},
        "SAME dilation 2": {"strides": [1, 1, 1, 1], "padding": "SAME", "dilations": [1, 2, 2, 1]},
        "EXPLICIT padding": {"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 2, 1, 0, 0]},
    }
    for variant, attrs in conv.items():
        add("Conv2D", f"float32 {variant}", raw("Conv2D", filter=w, **attrs), [Arg((2, 7, 8, 3), signature=(None, 7, 8, 3))])
    add("Conv2D", "float32 filter argument", raw("Conv2D", strides=[1, 1, 1, 1], padding="VALID"),
        [Arg((1, 5, 5, 3)), Arg((3, 3, 3, 4), low=-0.5, high=0.5)])
    wt = weights((3, 3, 4, 3), 2)  # H W out in
    for variant, (stride, padding, out) in {"SAME stride 2": (2, "SAME", (2, 8, 10, 4)),
                                            "VALID stride 1": (1, "VALID", (2, 6, 7, 4))}.items():
        add("Conv2DBackpropInput", f"float32 {variant}",
            raw("Conv2DBackpropInput", input_sizes=i32(*out), filter=wt, strides=[1, stride, stride, 1], padding=padding,
                names=["out_backprop"]),
            [Arg((2, 4, 5, 3))])
    w3 = weights((2, 3, 3, 2, 4), 3)
    add("Conv3D", "float32 SAME", raw("Conv3D", filter=w3, strides=[1] * 5, padding="SAME"), [Arg((1, 4, 5, 5, 2))])
    add("Conv3D", "float32 VALID stride 2", raw("Conv3D", filter=w3, strides=[1, 2, 2, 2, 1], padding="VALID"),
        [Arg((2, 5, 6, 6, 2), signature=(None, 5, 6, 6, 2))])
    add("Conv3DBackpropInputV2", "float32 VALID", raw("Conv3DBackpropInputV2", input_sizes=i32(2, 4, 5, 5, 2), filter=w3,
                                                      strides=[1] * 5, padding="VALID", names=["out_backprop"]),
        [Arg((2, 3, 3, 3, 4))])
    add("Conv3DBackpropInputV2", "float32 SAME stride 2",
        raw("Conv3DBackpropInputV2", input_sizes=i32(1, 4, 6, 6, 4), filter=weights((2, 3, 3, 4, 2), 4),
            strides=[1, 2, 2, 2, 1], padding="SAME", names=["out_backprop"]),
        [Arg((1, 2, 3, 3, 2))])
    for variant, (multiplier, attrs) in {
        "SAME": (1, {"strides": [1, 1, 1, 1], "padding": "SAME"}),
        "multiplier 2 VALID stride 2": (2, {"strides": [1, 2, 2, 1], "padding": "VALID"}),
    }.items():
        add("DepthwiseConv2dNative", f"float32 {variant}",
            raw("DepthwiseConv2dNative", filter=weights((3, 3, 3, multiplier), 5), **attrs),
            [Arg((2, 7, 8, 3), signature=(None, 7, 8, 3))])
    add("DepthwiseConv2dNativeBackpropInput", "float32 SAME stride 2",
        raw("DepthwiseConv2dNativeBackpropInput", input_sizes=i32(1, 6, 6, 3), filter=weights((3, 3, 3, 1), 6),
            strides=[1, 2, 2, 1], padding="SAME", names=["out_backprop"]),
        [Arg((1, 3, 3, 3))])


_conv_cases()


def _matmul_cases() -> None:
    add("MatMul", "float32 constant weights", raw("MatMul", b=weights((4, 5), 7)), [Arg((3, 4), signature=(None, 4))])
    add("MatMul", "float32 transpose_b constant weights", raw("MatMul", b=weights((5, 4), 8), transpose_b=True),
        [Arg((3, 4))])
    add("MatMul", "float32 two arguments", raw("MatMul"), [Arg((3, 4)), Arg((4, 5))])
    add("MatMul", "float32 transpose_a", raw("MatMul", transpose_a=True), [Arg((4, 3)), Arg((4, 5))])
    for op in ("BatchMatMul", "BatchMatMulV2"):
        add(op, "float32", raw(op), [Arg((2, 3, 4), signature=(None, 3, 4)), Arg((2, 4, 5))])
        add(op, "float32 adj_y", raw(op, adj_y=True), [Arg((2, 3, 4)), Arg((2, 5, 4))])
    add("BatchMatMulV2", "float32 broadcast constant", raw("BatchMatMulV2", y=weights((4, 5), 9)), [Arg((2, 3, 4))])
    add("BatchMatMulV2", "float32 broadcast batch", raw("BatchMatMulV2"), [Arg((2, 1, 3, 4)), Arg((3, 4, 5))])
    add("BatchMatMulV3", "float32", raw("BatchMatMulV3", Tout=F32), [Arg((2, 3, 4)), Arg((2, 4, 5))])
    add("BatchMatMulV3", "int32", raw("BatchMatMulV3", Tout=I32), [Arg((2, 3, 4), I32), Arg((2, 4, 5), I32)])


_matmul_cases()


def _pool_cases() -> None:
    for op in ("AvgPool", "MaxPool"):
        add(op, "float32 2x2 stride 2 VALID", raw(op, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
            [Arg((2, 6, 7, 3), signature=(None, 6, 7, 3))])
        add(op, "float32 3x3 stride 1 SAME", raw(op, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME"),
            [Arg((1, 5, 6, 2))])
    add("MaxPool", "int32", raw("MaxPool", ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        [Arg((1, 4, 4, 2), I32)])
    add("MaxPoolV2", "float32", raw("MaxPoolV2", ksize=i32(1, 2, 2, 1), strides=i32(1, 2, 2, 1), padding="SAME"),
        [Arg((1, 5, 5, 2))])
    for op in ("MaxPool3D", "AvgPool3D"):
        add(op, "float32", raw(op, ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID"),
            [Arg((1, 4, 4, 6, 2))])
    add("MaxPoolWithArgmax", "float32", raw("MaxPoolWithArgmax", ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        [Arg((1, 4, 4, 2))])
    add("Dilation2D", "float32 SAME", raw("Dilation2D", filter=weights((2, 3, 3), 10), strides=[1, 1, 1, 1],
                                           rates=[1, 1, 1, 1], padding="SAME"), [Arg((1, 5, 6, 3))])
    add("Dilation2D", "float32 VALID rate 2", raw("Dilation2D", filter=weights((2, 2, 3), 11), strides=[1, 2, 1, 1],
                                                   rates=[1, 2, 2, 1], padding="VALID"), [Arg((2, 6, 6, 3))])


_pool_cases()


def _batch_norm_cases() -> None:
    channels = 4
    stats = dict(scale=weights((channels,), 12) + 1, offset=weights((channels,), 13),
                 mean=weights((channels,), 14), variance=weights((channels,), 15) + 1)
    for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
        fn = lambda x, op=op: getattr(tf.raw_ops, op)(x=x, is_training=False, **stats)[0]  # noqa: E731
        add(op, "float32 inference", fn, [Arg((2, 3, 3, channels), signature=(None, 3, 3, channels))])


_batch_norm_cases()


def _training_cases() -> None:
    """Losses and gradients: they appear in exported training graphs."""
    add("SoftmaxCrossEntropyWithLogits", "float32", raw("SoftmaxCrossEntropyWithLogits"),
        [Arg((3, 5)), Arg((3, 5), low=0, high=1)])
    add("SparseSoftmaxCrossEntropyWithLogits", "float32", raw("SparseSoftmaxCrossEntropyWithLogits"),
        [Arg((3, 5)), Arg((3,), I32, low=0, high=5)])
    add("BiasAddGrad", "float32", raw("BiasAddGrad"), [Arg((2, 3, 4))])
    for op in ("ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "SoftplusGrad", "LeakyReluGrad"):
        add(op, "float32", raw(op), [Arg((3, 4)), Arg((3, 4), low=-8, high=8)])
    for op, (low, high) in {"SigmoidGrad": (0.01, 0.99), "TanhGrad": (-0.99, 0.99), "SqrtGrad": (0.1, 2),
                            "RsqrtGrad": (0.1, 2)}.items():
        add(op, "float32", raw(op), [Arg((3, 4), low=low, high=high), Arg((3, 4))])


_training_cases()


# -- images --------------------------------------------------------------------------------------


def _boxes(count: int, seed: int) -> np.ndarray:
    """Boxes [y1, x1, y2, x2] of size 0.2 to 0.6 in the unit square, overlapping often."""
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 0.5, (count, 2))
    return np.concatenate([corner, corner + rng.uniform(0.2, 0.5, (count, 2))], 1).astype(np.float32)


def _image_cases() -> None:
    image = Arg((2, 4, 5, 3), low=0, high=1, signature=(None, 4, 5, 3))
    resize = {"": {}, " align_corners": {"align_corners": True}, " half_pixel_centers": {"half_pixel_centers": True}}
    for op in ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic"):
        for variant, attrs in resize.items():
            add(op, f"float32{variant}", raw(op, size=i32(7, 3), **attrs), [image])
    add("ResizeBilinear", "int32 image", raw("ResizeBilinear", size=i32(6, 8)), [Arg((1, 4, 5, 2), I32, low=0, high=100)])
    add("ResizeNearestNeighbor", "int32 image", raw("ResizeNearestNeighbor", size=i32(6, 8)),
        [Arg((1, 4, 5, 2), I32, low=0, high=100)])
    add("ResizeArea", "float32", raw("ResizeArea", size=i32(2, 3)), [image])
    for method in ("bilinear", "nearest"):
        add("CropAndResize", f"float32 {method}", raw("CropAndResize", crop_size=i32(3, 4), method=method),
            [Arg((2, 6, 6, 3)), Arg((3, 4), value=_boxes(3, 0)), Arg((3,), I32, value=[0, 1, 1])])
    boxes, scores = Arg((6, 4), value=_boxes(6, 1)), Arg((6,), low=0, high=1)
    limits = dict(max_output_size=np.array(4, np.int32), iou_threshold=np.array(0.4, np.float32),
                  score_threshold=np.array(0.1, np.float32))
    add("NonMaxSuppressionV3", "float32", raw("NonMaxSuppressionV3", **limits), [boxes, scores])
    add("NonMaxSuppressionV4", "float32 padded", raw("NonMaxSuppressionV4", pad_to_max_output_size=True, **limits),
        [boxes, scores])
    add("NonMaxSuppressionV5", "float32", raw("NonMaxSuppressionV5", soft_nms_sigma=np.array(0.0, np.float32), **limits),
        [boxes, scores])
    # Fewer boxes selected than max_output_size: TF's unpadded outputs are shorter.
    few = dict(limits, max_output_size=np.array(6, np.int32), score_threshold=np.array(0.5, np.float32))
    many_boxes = Arg((10, 4), value=_boxes(10, 2))
    many_scores = Arg((10,), value=[0.9, 0.3, 0.75, 0.55, 0.2, 0.85, 0.6, 0.05, 0.7, 0.65])
    add("NonMaxSuppressionV3", "float32 fewer than the maximum", raw("NonMaxSuppressionV3", **few), [many_boxes, many_scores])
    add("NonMaxSuppressionV4", "float32 unpadded", raw("NonMaxSuppressionV4", **few), [many_boxes, many_scores])
    add("NonMaxSuppressionV5", "float32 soft-NMS padded", raw("NonMaxSuppressionV5", soft_nms_sigma=np.array(0.5, np.float32),
                                                             pad_to_max_output_size=True, **few), [many_boxes, many_scores])
    for op in ("RGBToHSV", "HSVToRGB"):
        add(op, "float32", raw(op), [Arg((2, 3, 3), low=0, high=1)])
    add("AdjustContrastv2", "float32", raw("AdjustContrastv2", contrast_factor=np.array(1.5, np.float32)),
        [Arg((2, 3, 4, 3), low=0, high=1)])
    add("AdjustSaturation", "float32", raw("AdjustSaturation", scale=np.array(0.5, np.float32)), [Arg((3, 4, 3), low=0, high=1)])
    add("AdjustHue", "float32", raw("AdjustHue", delta=np.array(0.2, np.float32)), [Arg((3, 4, 3), low=0, high=1)])
    add("ExtractImagePatches", "float32", raw("ExtractImagePatches", ksizes=[1, 2, 2, 1], strides=[1, 1, 2, 1],
                                               rates=[1, 1, 1, 1], padding="VALID"), [Arg((1, 4, 5, 2))])
    add("ImageProjectiveTransformV3", "float32",
        raw("ImageProjectiveTransformV3", transforms=np.array([[1, 0.2, -1, 0.1, 1, 0.5, 0, 0]], np.float32),
            output_shape=i32(4, 5), fill_value=np.array(0, np.float32), interpolation="BILINEAR"),
        [Arg((1, 4, 5, 2))])
    add("ScaleAndTranslate", "float32", raw("ScaleAndTranslate", size=i32(6, 8), scale=np.array([1.5, 1.6], np.float32),
                                             translation=np.array([0, 0], np.float32)), [Arg((1, 4, 5, 2))])


_image_cases()


# -- random numbers ------------------------------------------------------------------------------


def in_range(low: float, high: float, closed: bool = False) -> Check:
    """Random values: every one in [low, high) ([low, high] when ``closed``)."""

    def check(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> None:
        x = outputs[0]
        inside = (x >= low) & ((x <= high) if closed else (x < high))
        assert inside.all(), f"values outside [{low}, {high}{']' if closed else ')'}: {x[~inside][:5]}"

    return check


def standard_normal(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> None:
    """4096 standard normal samples: mean within 0.1 of 0 and deviation within 0.1 of 1 (both
    about 6 standard errors)."""
    x = outputs[0].astype(np.float64)
    assert np.isfinite(x).all() and abs(x.mean()) < 0.1 and abs(x.std() - 1) < 0.1, (x.mean(), x.std())


def permutation_of(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> None:
    """A shuffle: the same multiset of rows as TensorFlow's result."""
    assert np.array_equal(np.sort(outputs[0], axis=0), np.sort(expected[0], axis=0))


def _random_cases() -> None:
    """Seeded ops give the same numbers in TF, LiteRT and numlite (the first run of a freshly
    traced function): they are compared with TF's values. Unseeded ones, and ops no converter
    lowers, are checked for properties of their values only."""
    shape = i32(64, 64)
    uniform = in_range(0.0, 1.0)
    why = "random: only properties of the values can be checked"
    add("RandomUniform", "float32", lambda: tf.raw_ops.RandomUniform(shape=shape, dtype=F32, seed=1, seed2=2), [])
    add("RandomUniform", "float32 unseeded", lambda: tf.raw_ops.RandomUniform(shape=shape, dtype=F32), [],
        check=uniform, why=why)
    add("RandomStandardNormal", "float32", lambda: tf.raw_ops.RandomStandardNormal(shape=shape, dtype=F32, seed=1, seed2=2),
        [])
    add("RandomStandardNormal", "float32 unseeded", lambda: tf.raw_ops.RandomStandardNormal(shape=shape, dtype=F32),
        [], check=standard_normal, why=why)
    add("TruncatedNormal", "float32", lambda: tf.raw_ops.TruncatedNormal(shape=shape, dtype=F32, seed=1, seed2=2), [],
        check=in_range(-2.0, 2.0, closed=True), why=why)
    add("RandomUniformInt", "int32", lambda: tf.raw_ops.RandomUniformInt(
        shape=shape, minval=np.array(-3, np.int32), maxval=np.array(5, np.int32), seed=1, seed2=2), [],
        check=in_range(-3, 5), why=why)
    add("RandomUniform", "float32 shape argument", lambda s: tf.raw_ops.RandomUniform(shape=s, dtype=F32, seed=3, seed2=4),
        [Arg((2,), I32, value=[8, 7])])
    add("Multinomial", "float32", raw("Multinomial", num_samples=np.array(50, np.int32), seed=1, seed2=2), [Arg((2, 5))])
    add("Multinomial", "float32 int32 samples", raw("Multinomial", num_samples=np.array(7, np.int32), seed=5, seed2=0,
                                                    output_dtype=I32), [Arg((3, 4))])
    add("RandomShuffle", "float32", raw("RandomShuffle", seed=1, seed2=2), [Arg((6, 2))], check=permutation_of, why=why)
    seed = Arg((2,), I64, value=[7, 11])
    add("StatelessRandomUniform", "float32", raw("StatelessRandomUniform", shape=shape, dtype=F32, names=["seed"]),
        [seed], check=uniform, why=why)
    add("StatelessRandomNormal", "float32", raw("StatelessRandomNormal", shape=shape, dtype=F32, names=["seed"]),
        [seed], check=standard_normal, why=why)
    add("StatelessTruncatedNormal", "float32", raw("StatelessTruncatedNormal", shape=shape, dtype=F32, names=["seed"]),
        [seed], check=in_range(-2.0, 2.0, closed=True), why=why)
    add("StatelessRandomUniformV2", "float32",
        raw("StatelessRandomUniformV2", shape=shape, alg=np.array(1, np.int32), dtype=F32, names=["key", "counter"]),
        [Arg((1,), tf.uint64, value=[5]), Arg((2,), tf.uint64, value=[0, 0])], check=uniform, why=why)
    add("StatelessMultinomial", "float32", raw("StatelessMultinomial", num_samples=np.array(50, np.int32),
                                                names=["logits", "seed"]),
        [Arg((2, 5)), seed], check=in_range(0, 5), why=why)


_random_cases()


# -- linear algebra, FFT and complex numbers -----------------------------------------------------


def _linalg_cases() -> None:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (2, 3, 3))
    well_conditioned = (a + 3 * np.eye(3)).astype(np.float32)
    spd = (a @ a.transpose(0, 2, 1) + np.eye(3)).astype(np.float32)
    for op in ("MatrixInverse", "MatrixDeterminant", "LogMatrixDeterminant"):
        add(op, "float32", raw(op), [Arg((2, 3, 3), value=well_conditioned)])
    add("Cholesky", "float32", raw("Cholesky"), [Arg((2, 3, 3), value=spd)])
    add("SelfAdjointEigV2", "float32", raw("SelfAdjointEigV2", compute_v=False), [Arg((2, 3, 3), value=spd)])
    add("Qr", "float32", raw("Qr"), [Arg((2, 4, 3))])
    add("Svd", "float32", raw("Svd", compute_uv=False), [Arg((2, 4, 3))])
    add("MatrixSolve", "float32", raw("MatrixSolve"), [Arg((2, 3, 3), value=well_conditioned), Arg((2, 3, 2))])
    add("MatrixTriangularSolve", "float32", raw("MatrixTriangularSolve"),
        [Arg((2, 3, 3), value=np.tril(well_conditioned)), Arg((2, 3, 2))])
    add("Cross", "float32", raw("Cross"), [Arg((4, 3)), Arg((4, 3))])


_linalg_cases()


def _complex_cases() -> None:
    add("RFFT", "float32", raw("RFFT", fft_length=i32(8)), [Arg((3, 8))])
    add("RFFT2D", "float32", raw("RFFT2D", fft_length=i32(4, 8)), [Arg((2, 4, 8))])
    add("RFFT2D", "float32 cropped", raw("RFFT2D", fft_length=i32(2, 8)), [Arg((3, 4, 10))])
    add("RFFT", "float32 cropped", raw("RFFT", fft_length=i32(8)), [Arg((2, 3, 10))])
    add("IRFFT", "complex64", raw("IRFFT", fft_length=i32(8)), [Arg((3, 5), C64)])
    add("FFT", "complex64", raw("FFT"), [Arg((3, 8), C64)])
    add("Complex", "float32", raw("Complex"), [Arg((3, 4)), Arg((3, 4))])
    for op in ("Real", "Imag", "ComplexAbs", "Angle", "Conj"):
        add(op, "complex64", raw(op), [Arg((3, 4), C64)])
    # The complex results of one-op RFFT cases are read as magnitudes too, as models do.
    add("ComplexAbs", "of an RFFT", lambda x: tf.raw_ops.ComplexAbs(x=tf.raw_ops.RFFT(input=x, fft_length=i32(8))),
        [Arg((3, 8))])


_complex_cases()


# -- quantization --------------------------------------------------------------------------------


def _quantization_cases() -> None:
    add("FakeQuantWithMinMaxArgs", "float32", raw("FakeQuantWithMinMaxArgs", min=-1.5, max=1.0), [Arg((3, 4))])
    add("FakeQuantWithMinMaxArgs", "float32 4 bits narrow", raw("FakeQuantWithMinMaxArgs", min=-1.0, max=2.0, num_bits=4,
                                                                narrow_range=True), [Arg((3, 4))])
    add("FakeQuantWithMinMaxArgs", "float32 narrow", raw("FakeQuantWithMinMaxArgs", min=-1.0, max=2.0, narrow_range=True),
        [Arg((3, 4))])
    add("FakeQuantWithMinMaxArgs", "float32 positive range", raw("FakeQuantWithMinMaxArgs", min=0.5, max=1.5), [Arg((3, 4))])
    add("FakeQuantWithMinMaxVars", "float32", raw("FakeQuantWithMinMaxVars", min=np.array(-1.5, np.float32),
                                                  max=np.array(1.0, np.float32)), [Arg((3, 4))])
    add("FakeQuantWithMinMaxVarsPerChannel", "float32",
        raw("FakeQuantWithMinMaxVarsPerChannel", min=np.array([-1.5, -1, -2, -0.5], np.float32),
            max=np.array([1.0, 1.5, 0.5, 2.0], np.float32)), [Arg((3, 4))])
    qdq = dict(input_min=np.array(-1.5, np.float32), input_max=np.array(1.0, np.float32), range_given=True)
    add("QuantizeAndDequantizeV2", "float32", raw("QuantizeAndDequantizeV2", **qdq), [Arg((3, 4))])
    add("QuantizeAndDequantizeV3", "float32", raw("QuantizeAndDequantizeV3", num_bits=np.array(8, np.int32), **qdq),
        [Arg((3, 4))])
    add("QuantizeAndDequantizeV4", "float32", raw("QuantizeAndDequantizeV4", **qdq), [Arg((3, 4))])
    add("QuantizeAndDequantizeV2", "float32 unsigned 4 bits", raw("QuantizeAndDequantizeV2", signed_input=False, num_bits=4,
                                                                  **{**qdq, "input_min": np.array(0, np.float32)}),
        [Arg((3, 4))])
    add("QuantizeAndDequantizeV2", "float32 narrow", raw("QuantizeAndDequantizeV2", narrow_range=True, **qdq), [Arg((3, 4))])
    add("ApproxTopK", "float32", raw("ApproxTopK", k=2, reduction_dimension=-1), [Arg((3, 6), step=0.5)])


_quantization_cases()


# -- control flow, tensor lists, variables (ops that come with others) ---------------------------


def _function(fn: Callable[..., Any], *specs: tf.TensorSpec) -> Any:
    """A concrete function, for the function attributes of control-flow ops."""
    return tf.function(fn, autograph=False).get_concrete_function(*specs)


def _control_flow_cases() -> None:
    x, s32 = tf.TensorSpec((3,), F32), tf.TensorSpec((), I32)
    double, minus_one = _function(lambda v: [v * 2.0], x), _function(lambda v: [v - 1.0], x)
    branches = dict(then_branch=double, else_branch=minus_one)
    flag, vector, count = Arg((), BOOL, value=True), Arg((3,)), Arg((), I32, value=3)
    add("If", "float32", lambda p, v: tf.raw_ops.If(cond=p, input=[v], Tout=[F32], **branches), [flag, vector])
    add("StatelessIf", "float32", lambda p, v: tf.raw_ops.StatelessIf(cond=p, input=[v], Tout=[F32], **branches),
        [Arg((), BOOL, value=False), vector])
    for op in ("Case", "StatelessCase"):
        add(op, "float32", lambda n, v, op=op: getattr(tf.raw_ops, op)(branch_index=n, input=[v], Tout=[F32],
                                                                        branches=[double, minus_one]),
            [Arg((), I32, value=1), vector])
    cond = _function(lambda i, n, v: i < n, s32, s32, x)
    body = _function(lambda i, n, v: [i + 1, n, v * 2.0], s32, s32, x)
    for op in ("While", "StatelessWhile"):
        add(op, "float32", lambda n, v, op=op: getattr(tf.raw_ops, op)(input=[np.int32(0), n, v], cond=cond, body=body)[2],
            [count, vector])
    step = _function(lambda i, v: [v * 2.0 + tf.cast(i, F32)], s32, x)
    add("For", "float32", lambda n, v: tf.raw_ops.For(start=0, limit=n, delta=1, input=[v], body=step), [count, vector])


_control_flow_cases()


def _tensor_list_cases() -> None:
    from tensorflow.python.ops import list_ops

    def reserve_set_stack(x, y):
        items = list_ops.tensor_list_reserve(element_shape=[3], num_elements=2, element_dtype=F32)
        items = list_ops.tensor_list_set_item(list_ops.tensor_list_set_item(items, 0, x), 1, y)
        return list_ops.tensor_list_stack(items, element_dtype=F32, element_shape=[3])

    for op in ("TensorListReserve", "TensorListSetItem", "TensorListStack"):
        add(op, "float32", reserve_set_stack, [Arg((3,)), Arg((3,))])

    def from_tensor(x):
        return list_ops.tensor_list_from_tensor(x, element_shape=[4])

    rows = [Arg((3, 4))]
    add("TensorListFromTensor", "float32", lambda x: list_ops.tensor_list_get_item(from_tensor(x), 1, F32, [4]) * 2.0, rows)
    add("TensorListGetItem", "float32", lambda x, i: list_ops.tensor_list_get_item(from_tensor(x), i, F32, [4]),
        rows + [Arg((), I32, value=2)])
    add("TensorListGather", "float32", lambda x: list_ops.tensor_list_gather(from_tensor(x), [2, 0], F32, [4]), rows)
    add("TensorListLength", "float32", lambda x: list_ops.tensor_list_length(from_tensor(x)), [Arg((3, 4), signature=(None, 4))])
    add("TensorListElementShape", "float32", lambda x: list_ops.tensor_list_element_shape(from_tensor(x), I32), rows)

    def push_pop(x, y):
        items = list_ops.empty_tensor_list(element_shape=[3], element_dtype=F32, max_num_elements=4)
        items = list_ops.tensor_list_push_back(list_ops.tensor_list_push_back(items, x), y)
        items, last = list_ops.tensor_list_pop_back(items, element_dtype=F32)
        return list_ops.tensor_list_stack(items, element_dtype=F32, element_shape=[3]), last

    for op in ("EmptyTensorList", "TensorListPushBack", "TensorListPopBack"):
        add(op, "float32", push_pop, [Arg((3,)), Arg((3,))])
    add("TensorListConcatV2", "float32", lambda x: list_ops.tensor_list_concat(
        list_ops.tensor_list_from_tensor(x, element_shape=[2, 4]), F32, element_shape=[2, 4]), [Arg((3, 2, 4))])
    add("TensorListSplit", "float32", lambda x: list_ops.tensor_list_stack(
        list_ops.tensor_list_split(x, element_shape=[2, 3], lengths=[2, 2]), F32, element_shape=[2, 3]), [Arg((4, 3))])

    def scatter(x):
        items = list_ops.tensor_list_reserve(element_shape=[3], num_elements=3, element_dtype=F32)
        items = list_ops.tensor_list_scatter(x, [2, 0], input_handle=items)
        return list_ops.tensor_list_get_item(items, 2, F32, [3])

    add("TensorListScatterIntoExistingList", "float32", scatter, [Arg((2, 3))])


_tensor_list_cases()


def _variable_cases() -> None:
    def handle(name: str, shape: Sequence[int], dtype: Any = F32) -> Any:
        return tf.raw_ops.VarHandleOp(dtype=dtype, shape=shape, shared_name=f"tf_op_sweep_{name}")

    def assign_read(x):
        h = handle("assign_read", [3, 4])
        tf.raw_ops.AssignVariableOp(resource=h, value=x)
        return tf.raw_ops.ReadVariableOp(resource=h, dtype=F32)

    for op in ("VarHandleOp", "AssignVariableOp", "ReadVariableOp"):
        add(op, "float32", assign_read, [Arg((3, 4))])

    def update(op: str) -> Callable[..., Any]:
        def fn(x, y):
            h = handle(op, [3, 4])
            tf.raw_ops.AssignVariableOp(resource=h, value=x)
            getattr(tf.raw_ops, op)(resource=h, value=y)
            return tf.raw_ops.ReadVariableOp(resource=h, dtype=F32)

        return fn

    for op in ("AssignAddVariableOp", "AssignSubVariableOp"):
        add(op, "float32", update(op), [Arg((3, 4)), Arg((3, 4))])

    def gather(x, indices):
        h = handle("gather", [5, 3])
        tf.raw_ops.AssignVariableOp(resource=h, value=x)
        return tf.raw_ops.ResourceGather(resource=h, indices=indices, dtype=F32)

    add("ResourceGather", "float32", gather, [Arg((5, 3)), Arg((4,), I32, low=0, high=5)])

    def initialized(x):
        h = handle("initialized", [3])
        tf.raw_ops.AssignVariableOp(resource=h, value=x)
        return tf.raw_ops.VarIsInitializedOp(resource=h), tf.raw_ops.ReadVariableOp(resource=h, dtype=F32)

    add("VarIsInitializedOp", "float32", initialized, [Arg((3,))])
    captured = tf.Variable(weights((3, 4), 16))
    add("ReadVariableOp", "float32 captured variable", lambda x: x * captured, [Arg((3, 4))], variables=(captured,))
    # Captured variables the function assigns (a TF2 model's state): they stay variables.
    state = {op: tf.Variable(weights((3, 4), 17 + k)) for k, op in enumerate(("AssignVariableOp", "AssignAddVariableOp",
                                                                                "AssignSubVariableOp"))}

    def captured_update(op: str) -> Callable[..., Any]:
        def fn(x):
            getattr(tf.raw_ops, op)(resource=state[op].handle, value=x)
            return tf.raw_ops.ReadVariableOp(resource=state[op].handle, dtype=F32)

        return fn

    for op in state:
        add(op, "float32 captured variable", captured_update(op), [Arg((3, 4))], variables=(state[op],))
    table = tf.Variable(weights((5, 3), 20))

    def captured_gather(x, indices):
        tf.raw_ops.AssignAddVariableOp(resource=table.handle, value=x)
        return tf.raw_ops.ResourceGather(resource=table.handle, indices=indices, dtype=F32)

    add("ResourceGather", "float32 captured variable", captured_gather, [Arg((5, 3)), Arg((4,), I32, low=0, high=5)],
        variables=(table,))


_variable_cases()


# -- sparse tensors, lookups, calls and the rest -------------------------------------------------


def _misc_cases() -> None:
    indices = Arg((4, 2), I64, value=[[0, 1], [1, 0], [1, 3], [2, 2]])
    dense_shape = np.array([3, 4], np.int64)
    add("SparseTensorDenseMatMul", "float32", lambda i, v, b: tf.raw_ops.SparseTensorDenseMatMul(
        a_indices=i, a_values=v, a_shape=dense_shape, b=b), [indices, Arg((4,)), Arg((4, 5))])
    add("SparseReshape", "int64", lambda i: tf.raw_ops.SparseReshape(
        input_indices=i, input_shape=dense_shape, new_shape=np.array([2, -1], np.int64)), [indices])
    add("SparseFillEmptyRows", "float32", lambda i, v: tf.raw_ops.SparseFillEmptyRows(
        indices=i, values=v, dense_shape=np.array([4, 4], np.int64), default_value=np.array(0.5, np.float32)),
        [indices, Arg((4,))])
    for op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
        add(op, "float32", raw(op), [Arg((5, 3)), Arg((4,), I32, value=[0, 2, 3, 3]), Arg((4,), I32, value=[0, 0, 1, 2])])
    add("SparseMatMul", "float32", raw("SparseMatMul"), [Arg((3, 4)), Arg((4, 5))])

    def asserted(x):
        tf.raw_ops.Assert(condition=tf.raw_ops.All(input=tf.raw_ops.Less(x=x, y=np.float32(3)), axis=i32(0, 1)), data=[x])
        return x * 2.0

    add("Assert", "float32", asserted, [Arg((3, 4))])
    inner = _function(lambda v: [v * 2.0 + 1.0], tf.TensorSpec((3, 4), F32))
    for op in ("PartitionedCall", "StatefulPartitionedCall"):
        add(op, "float32", lambda v, op=op: getattr(tf.raw_ops, op)(args=[v], Tout=[F32], f=inner)[0], [Arg((3, 4))])
    from tensorflow.compiler.tf2xla.python import xla

    add("XlaDynamicUpdateSlice", "float32", lambda a, b: xla.dynamic_update_slice(a, b, i32(1, 0)),
        [Arg((4, 5)), Arg((2, 5))])
    words = Arg((4,), tf.string, value=[b"ab", b"", b"numlite", b"x y"])
    add("StringJoin", "string", lambda a, b: tf.raw_ops.StringJoin(inputs=[a, b], separator="-"), [words, words])
    add("StringLength", "string", raw("StringLength"), [words])
    add("Substr", "string", raw("Substr", pos=np.int32(0), len=np.int32(2)), [words])
    add("StaticRegexReplace", "string", raw("StaticRegexReplace", pattern="[ab]", rewrite="-"), [words])
    add("AsString", "int32", raw("AsString"), [Arg((4,), I32)])
    add("StringToNumber", "string", raw("StringToNumber", out_type=F32), [Arg((3,), tf.string, value=[b"1.5", b"-2", b"0"])])
    add("StringToHashBucketFast", "string", raw("StringToHashBucketFast", num_buckets=7), [words])
    add("RaggedTensorToTensor", "float32 row splits", lambda v, splits: tf.raw_ops.RaggedTensorToTensor(
        shape=np.array([3, 4], np.int64), values=v, default_value=np.float32(0), row_partition_tensors=[splits],
        row_partition_types=["ROW_SPLITS"]), [Arg((5,)), Arg((4,), I64, value=[0, 2, 2, 5])])
    add("AudioSpectrogram", "float32", raw("AudioSpectrogram", window_size=32, stride=16), [Arg((128, 1), low=-1, high=1)])


_misc_cases()


LEFT_OUT.update({
    "Other string ops (StringSplitV2, RegexReplace, ReduceJoin, DecodeBase64, EncodeBase64, PrintV2, ...)":
        "text processing, like the string cases swept (StringJoin, Substr, StaticRegexReplace...), which the "
        "official converter does not lower to builtins",
    "Gradients of training (Conv2DBackpropFilter, MaxPoolGrad, AvgPoolGrad, FusedBatchNormGradV3, "
    "StridedSliceGrad, ...)":
        "only in training graphs; the sweep keeps the element-wise gradients that the MLIR lowering names "
        "(SigmoidGrad, TanhGrad, ...)",
    "Optimizer updates (ApplyAdam, ResourceApplyAdam, ResourceApplyGradientDescent, SparseApplyAdagrad, ...)":
        "training only: they update variables by a learning rule",
    "Resource scatters (ResourceScatterUpdate, ResourceScatterAdd, ResourceStridedSliceAssign, ...)":
        "updates of resource variables in place; TFLite's variables are assigned whole (ASSIGN_VARIABLE)",
    "TF1 reference variables (VariableV2, Assign, AssignAdd, ScatterUpdate, ...)":
        "TF1 graphs are frozen (variables become constants) before either converter sees them",
    "TF1 control flow (Switch, Merge, Enter, Exit, NextIteration, LoopCond)":
        "no one-op form: they exist as whole TF1 graphs (tests/test_convert_tf1.py converts those)",
    "I/O, datasets, checkpoints, summaries (ReadFile, DecodeJpeg, IteratorGetNext, SaveV2, RestoreV2, "
    "WriteScalarSummary, ...)":
        "not computation of a model: the input pipeline and the training loop's side effects",
    "Hash tables (HashTableV2, LookupTableFindV2, LookupTableImportV2, InitializeTableV2, ...)":
        "the official converter needs Flex for a lookup in a captured table (measured: LookupTableFindV2 and the "
        "table's placeholder are not lowered); numlite refuses a captured table with a ConversionError naming "
        "it and its readers (tests/test_convert_api.py)",
    "Other ragged-tensor ops (RaggedGather, RaggedRange, RaggedTensorFromVariant, ...)":
        "they take or make a ragged tensor's row partitions; RaggedTensorToTensor, which makes a dense tensor, is swept",
    "XLA ops other than XlaDynamicUpdateSlice (XlaCallModule, XlaGather, XlaConv, ...)":
        "they come from jit-compiled or jax2tf exports (XlaCallModule carries a StableHLO module, not TF ops); "
        "the MLIR legalization names XlaDynamicUpdateSlice only",
    "TF's quantized types (QuantizeV2, Dequantize of qint8, QuantizedConv2D, ...)":
        "TF1's own quantized kernels: SavedModels carry float ops with FakeQuant (which the sweep covers)",
    "Collectives and devices (CollectiveReduceV2, NcclAllReduce, TPUReplicatedInput, _Send, _Recv)":
        "multi-device execution, not model math",
    "Const, NoOp, Placeholder":
        "no computation: constants and arguments of every case",
    "_UnaryOpsComposition, _FusedConv2D, _FusedMatMul and TF's other internal ops":
        "made by TF's own graph optimizer at run time, never stored in a SavedModel",
})
