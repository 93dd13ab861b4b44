"""Element-wise ops: arithmetic, comparisons, logic, math functions, activations, selection and
casts, and the normalizations over the last axis (softmax, L2, local response).

Most TensorFlow ops map to one TFLite builtin. Where LiteRT has no kernel for a type TensorFlow
allows (SQUARE, RELU or ABS on integers...), or no builtin at all (Softplus, Expm1, Tan, Erf,
IsNan...), the op is composed from builtins that compute the same function; compositions follow
TensorFlow's own kernels (its Softplus thresholds, Eigen's expm1 and log1p algorithms) so that
they agree with TensorFlow to float rounding when the builtins are exactly rounded (LiteRT's
XNNPACK delegate approximates EXP, LOG, SIN and COS: absolute errors of ~1e-7 remain, relative
precision near zero does not). Erf and Erfc come from GELU, whose exact form is ``x/2 *
erfc(-x / sqrt(2))``. What cannot be expressed exactly (int64 division: LiteRT divides int32
only) is refused.

Three activations that TensorFlow spells as several ops become one builtin with the same math:
``tf.nn.gelu`` (and ``0.5 * x * (1 + erf(x / sqrt(2)))``) becomes GELU, ``x * relu6(x + 3) / 6``
HARD_SWISH and ``tf.math.l2_normalize`` over the last axis L2_NORMALIZATION. The rule of the
pattern's last node emits the builtin; what was lowered for the inner nodes is then unread and
the optimizer removes it.
"""

from __future__ import annotations

import math

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node, Value
from numlite.converter.lower import lowers
from numlite.converter.lower.array import require_types
from numlite.converter.lower.nn import reshape
from numlite.converter.lowering import SubgraphLowering

FLOAT = ("FLOAT32",)
FLOAT_INT32 = ("FLOAT32", "INT32")
NUMBERS = ("FLOAT32", "INT32", "INT64")
INTEGERS = ("INT32", "INT64")
BOOL = ("BOOL",)
STRING = ("STRING",)
BITWISE = ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32")

# TF op -> (TFLite builtin, the input types LiteRT's kernel takes).
_BINARY = {
    "AddV2": ("ADD", NUMBERS), "Add": ("ADD", NUMBERS), "Sub": ("SUB", NUMBERS), "Mul": ("MUL", NUMBERS),
    "RealDiv": ("DIV", FLOAT_INT32), "Div": ("DIV", FLOAT_INT32), "FloorDiv": ("FLOOR_DIV", FLOAT_INT32),
    "FloorMod": ("FLOOR_MOD", NUMBERS), "Maximum": ("MAXIMUM", NUMBERS), "Minimum": ("MINIMUM", NUMBERS),
    "Pow": ("POW", FLOAT_INT32), "SquaredDifference": ("SQUARED_DIFFERENCE", FLOAT_INT32),
    "Less": ("LESS", NUMBERS), "LessEqual": ("LESS_EQUAL", NUMBERS), "Greater": ("GREATER", NUMBERS),
    "GreaterEqual": ("GREATER_EQUAL", NUMBERS), "Equal": ("EQUAL", NUMBERS + BOOL + STRING),
    "NotEqual": ("NOT_EQUAL", NUMBERS + BOOL + STRING), "LogicalAnd": ("LOGICAL_AND", BOOL),
    "LogicalOr": ("LOGICAL_OR", BOOL), "BitwiseXor": ("BITWISE_XOR", BITWISE),
    "RightShift": ("RIGHT_SHIFT", BITWISE),
}  # fmt: skip

_UNARY = {
    "Abs": ("ABS", FLOAT_INT32), "Neg": ("NEG", NUMBERS), "Exp": ("EXP", FLOAT), "Log": ("LOG", FLOAT),
    "Sqrt": ("SQRT", FLOAT), "Rsqrt": ("RSQRT", FLOAT), "Square": ("SQUARE", FLOAT), "Sin": ("SIN", FLOAT),
    "Cos": ("COS", FLOAT), "Tanh": ("TANH", FLOAT), "Sigmoid": ("LOGISTIC", FLOAT), "Relu": ("RELU", FLOAT),
    "Relu6": ("RELU6", FLOAT), "Elu": ("ELU", FLOAT), "Floor": ("FLOOR", FLOAT), "Ceil": ("CEIL", FLOAT),
    "Round": ("ROUND", FLOAT), "Rint": ("ROUND", FLOAT), "Sign": ("SIGN", FLOAT_INT32),
    "LogicalNot": ("LOGICAL_NOT", BOOL),
}  # fmt: skip

SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
GELU_CUBIC = 0.044715
L2_EPSILON = 1e-12  # tf.math.l2_normalize's default: LiteRT's L2_NORMALIZATION clamps the norm at its root
# TensorFlow's Softplus kernel: x above -threshold gives x, below threshold exp(x).
SOFTPLUS_THRESHOLD = np.log(np.finfo(np.float32).eps) + np.float32(2)
SELU_SCALE, SELU_SCALE_ALPHA = 1.0507009873554804934193349852946, 1.7580993408473768599402175208123
ERF_SERIES_LIMIT = 0.125  # below it erf's Taylor series, above it the GELU identity (see erf)


class Composer:
    """Emits the builtins of one composed lowering: intermediate tensors are named after the
    node and have the node's output shape unless another is given."""

    def __init__(self, cx: SubgraphLowering, node: Node) -> None:
        self.cx, self.node = cx, node
        self.shape = cx.out(node).shape

    def op(self, op: str, *inputs: TensorRef, type_: str | None = None, shape="out", **options) -> TensorRef:
        """``op`` on ``inputs``; the result has the first input's type unless ``type_`` is given."""
        spec = self.cx.spec(f"{self.node.name}/{op.lower()}", self.shape if shape == "out" else shape,
                            type_ or inputs[0].type)
        return self.cx.emit1(op, list(inputs), spec, **options)

    def test(self, op: str, *inputs: TensorRef, shape="out") -> TensorRef:
        """A comparison or logical op: a bool result."""
        return self.op(op, *inputs, type_="BOOL", shape=shape)

    def select(self, condition: TensorRef, then: TensorRef, otherwise: TensorRef, shape="out") -> TensorRef:
        """SELECT_V2: ``then`` where ``condition`` holds, else ``otherwise``."""
        return self.op("SELECT_V2", condition, then, otherwise, type_=then.type, shape=shape)

    def const(self, value: float, type_: str = "FLOAT32") -> TensorRef:
        return self.cx.const(value, f"{self.node.name}/const", type_)


def _unsupported(cx: SubgraphLowering, node: Node, x: TensorRef, op: str, types: tuple[str, ...]):
    return cx.fail(node, f"{x.type} input is not supported: TFLite has no {op} kernel for it "
                         f"(LiteRT's {op} takes {', '.join(types)})")


def _float_input(cx: SubgraphLowering, node: Node, i: int = 0) -> TensorRef:
    """Input ``i``, which must be float32 (the ops composed here have float kernels only)."""
    x = cx.input(node, i)
    if x.type != "FLOAT32":
        raise cx.fail(node, f"{x.type} input is not supported (this op is lowered for float32 only)")
    return x


# -- arithmetic and comparisons -----------------------------------------------------------------


@lowers(*_BINARY)
def binary(cx: SubgraphLowering, node: Node):
    """One builtin, or a fused activation when the node ends one (see the module docstring)."""
    fused = _fused_activation(cx, node) if node.op in ("Mul", "RealDiv") else None
    if fused is not None:
        return [fused]
    a, b = cx.input(node, 0), cx.input(node, 1)
    op, types = _BINARY[node.op]
    if a.type not in types:
        if node.op == "SquaredDifference" and a.type in INTEGERS:
            difference = Composer(cx, node).op("SUB", a, b)
            return [cx.emit1("MUL", [difference, difference], cx.out(node))]
        raise _unsupported(cx, node, a, op, types)
    return [cx.emit1(op, [a, b], cx.out(node))]


@lowers("TruncateDiv")
def truncate_div(cx: SubgraphLowering, node: Node):
    """Integer DIV truncates toward zero (int32 only in LiteRT); floats are truncated after."""
    x, y = cx.input(node, 0), cx.input(node, 1)
    if x.type == "INT32":
        return [cx.emit1("DIV", [x, y], cx.out(node))]
    if x.type != "FLOAT32":
        raise _unsupported(cx, node, x, "DIV", FLOAT_INT32)
    c = Composer(cx, node)
    quotient = c.op("DIV", x, y)
    negative = c.test("LESS", quotient, c.const(0.0))
    return [c.select(negative, c.op("CEIL", quotient), c.op("FLOOR", quotient))]


@lowers("TruncateMod", "Mod")
def truncate_mod(cx: SubgraphLowering, node: Node):
    """The remainder with the sign of x (C's ``%`` and ``fmod``), from FLOOR_MOD's, whose sign is y's."""
    x, y = cx.input(node, 0), cx.input(node, 1)
    if x.type not in NUMBERS:
        raise _unsupported(cx, node, x, "FLOOR_MOD", NUMBERS)
    c = Composer(cx, node)
    if x.type == "FLOAT32":
        # fmod(x, y) = sign(x) * fmod(|x|, |y|), and FLOOR_MOD of non-negatives is fmod: exact,
        # where adjusting FLOOR_MOD's result by y would round.
        magnitude = c.op("FLOOR_MOD", _abs(c, x), _abs(c, y))
        return [c.select(c.test("LESS", x, c.const(0.0), shape=x.shape), c.op("NEG", magnitude), magnitude)]
    # Integers: where the signs of x and y differ, a non-zero floor remainder r becomes r - y.
    remainder = c.op("FLOOR_MOD", x, y)
    zero = c.const(0, x.type)
    signs_differ = c.test("NOT_EQUAL", c.test("LESS", x, zero, shape=x.shape), c.test("LESS", y, zero, shape=y.shape))
    adjust = c.test("LOGICAL_AND", signs_differ, c.test("NOT_EQUAL", remainder, zero))
    return [c.select(adjust, c.op("SUB", remainder, y), remainder)]


@lowers("Atan2")
def atan2(cx: SubgraphLowering, node: Node):
    """ATAN2, whose LiteRT kernel does not broadcast: inputs of different shapes are broadcast
    first, by subtracting zeros of the other's shape (exact, signed zeros included)."""
    y, x = _float_input(cx, node, 0), _float_input(cx, node, 1)
    if not (y.is_static and y.shape == x.shape):
        c = Composer(cx, node)
        y, x = (c.op("SUB", a, c.op("ZEROS_LIKE", b, shape=b.shape)) for a, b in ((y, x), (x, y)))
    return [cx.emit1("ATAN2", [y, x], cx.out(node))]


@lowers("BiasAdd", "BiasAddV1")
def bias_add(cx: SubgraphLowering, node: Node):
    """ADD; channels-first (NCHW) adds the bias reshaped to [C, 1, ...], which broadcasts
    along the channel axis (a constant bias is reshaped at conversion time)."""
    x, bias = cx.input(node, 0), cx.input(node, 1)
    require_types(cx, node, x, NUMBERS, "ADD")
    data_format = node.attrs.get("data_format", "NHWC")
    if data_format in ("NCHW", "NC..."):
        if x.rank is None:
            raise cx.fail(node, "a channels-first BiasAdd needs an input of known rank")
        channels = bias.shape[0] if bias.shape and bias.shape[0] >= 0 else -1
        bias = reshape(cx, bias, (channels,) + (1,) * (x.rank - 2), f"{node.name}/bias")
    elif data_format not in ("NHWC", "N...C"):
        raise cx.fail(node, f"data_format {data_format} is not supported")
    return [cx.emit1("ADD", [x, bias], cx.out(node))]


@lowers("DivNoNan", "MulNoNan")
def no_nan(cx: SubgraphLowering, node: Node):
    """``x / y`` (``x * y``) with 0 where y is 0, whatever x is (inf and NaN included)."""
    x, y = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    zero = c.const(0.0)
    result = c.op("DIV" if node.op == "DivNoNan" else "MUL", x, y)
    return [c.select(c.test("EQUAL", y, zero, shape=y.shape), zero, result)]


@lowers("Xdivy", "Xlogy", "Xlog1py")
def x_times(cx: SubgraphLowering, node: Node):
    """``x / y``, ``x * log(y)``, ``x * log1p(y)``, with 0 where x is 0 (even for y 0 or NaN).
    log1p is LOG(1 + y): its absolute error (below 1e-7 times |x|) is what a product with x
    keeps; TFLite's own lowering of Xlog1py is the same."""
    x, y = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    zero = c.const(0.0)
    if node.op == "Xdivy":
        result = c.op("DIV", x, y)
    else:
        argument = y if node.op == "Xlogy" else c.op("ADD", y, c.const(1.0), shape=y.shape)
        result = c.op("MUL", x, c.op("LOG", argument, shape=y.shape))
    return [c.select(c.test("EQUAL", x, zero, shape=x.shape), zero, result)]


@lowers("AddN")
def add_n(cx: SubgraphLowering, node: Node):
    """ADD_N (float32 and int32 in LiteRT), or a chain of ADDs for int64."""
    inputs = cx.inputs(node)
    if len(inputs) == 1:
        return inputs
    if inputs[0].type in FLOAT_INT32:
        return [cx.emit1("ADD_N", inputs, cx.out(node))]
    require_types(cx, node, inputs[0], NUMBERS, "ADD")
    c = Composer(cx, node)
    total = inputs[0]
    for x in inputs[1:-1]:
        total = c.op("ADD", total, x)
    return [cx.emit1("ADD", [total, inputs[-1]], cx.out(node))]


@lowers("ClipByValue")
def clip_by_value(cx: SubgraphLowering, node: Node):
    """``max(min(x, high), low)``, in TensorFlow's order (which decides when low > high)."""
    x, low, high = cx.inputs(node)
    require_types(cx, node, x, NUMBERS, "MINIMUM")
    upper = Composer(cx, node).op("MINIMUM", x, high)
    return [cx.emit1("MAXIMUM", [upper, low], cx.out(node))]


# -- unary math ---------------------------------------------------------------------------------


def _abs(c: Composer, x: TensorRef) -> TensorRef:
    """|x|: ABS, or a select for int64 (which LiteRT's ABS lacks)."""
    if x.type in FLOAT_INT32:
        return c.op("ABS", x, shape=x.shape)
    negative = c.test("LESS", x, c.const(0, x.type), shape=x.shape)
    return c.select(negative, c.op("NEG", x, shape=x.shape), x, shape=x.shape)


def _integer_unary(c: Composer, op: str, x: TensorRef) -> TensorRef | None:
    """The integer form of a unary op whose LiteRT kernel is float only (or int32 only)."""
    zero = c.const(0, x.type)
    if op == "ABS":
        return _abs(c, x)
    if op == "SQUARE":
        return c.op("MUL", x, x)
    if op == "RELU":
        return c.op("MAXIMUM", x, zero)
    if op == "RELU6":
        return c.op("MINIMUM", c.op("MAXIMUM", x, zero), c.const(6, x.type))
    if op == "SIGN":  # (x > 0) - (x < 0)
        positive, negative = (c.op("CAST", c.test(test, x, zero), type_=x.type) for test in ("GREATER", "LESS"))
        return c.op("SUB", positive, negative)
    return None


@lowers(*_UNARY)
def unary(cx: SubgraphLowering, node: Node):
    x = cx.input(node, 0)
    op, types = _UNARY[node.op]
    if x.type in types:
        return [cx.emit1(op, [x], cx.out(node))]
    composed = _integer_unary(Composer(cx, node), op, x) if x.type in INTEGERS else None
    if composed is None:
        raise _unsupported(cx, node, x, op, types)
    return [composed]


@lowers("Reciprocal", "Inv")
def reciprocal(cx: SubgraphLowering, node: Node):
    x = _float_input(cx, node)
    return [cx.emit1("DIV", [Composer(cx, node).const(1.0), x], cx.out(node))]


@lowers("Tan")
def tan(cx: SubgraphLowering, node: Node):
    c = Composer(cx, node)
    x = _float_input(cx, node)
    return [c.op("DIV", c.op("SIN", x), c.op("COS", x))]


def _expm1(c: Composer, x: TensorRef) -> TensorRef:
    """exp(x) - 1 without cancellation near 0: Eigen's generic_expm1, which TensorFlow runs."""
    one, minus_one = c.const(1.0), c.const(-1.0)
    u = c.op("EXP", x)
    u_minus_one = c.op("SUB", u, one)
    log_u = c.op("LOG", u)
    result = c.op("MUL", u_minus_one, c.op("DIV", x, log_u))
    result = c.select(c.test("EQUAL", log_u, u), u, result)  # exp(x) = +inf
    result = c.select(c.test("EQUAL", u_minus_one, minus_one), minus_one, result)
    return c.select(c.test("EQUAL", u, one), x, result)


def _log1p(c: Composer, x: TensorRef) -> TensorRef:
    """log(1 + x) without cancellation near 0: Eigen's generic_log1p, which TensorFlow runs,
    ``x * log(1 + x) / ((1 + x) - 1)``, whose correction factor is exactly 1 where 1 + x is
    exact. Where it is, the LOG itself is the result, so that log1p(-1) stays -inf (LiteRT's
    arithmetic kernels clamp infinities to the float range)."""
    one = c.const(1.0)
    x_plus_one = c.op("ADD", x, one)
    log = c.op("LOG", x_plus_one)
    rounded_x = c.op("SUB", x_plus_one, one)
    result = c.select(c.test("EQUAL", rounded_x, x), log, c.op("MUL", x, c.op("DIV", log, rounded_x)))
    # x itself where 1 + x rounds to 1, and for +inf.
    keep_x = c.test("LOGICAL_OR", c.test("EQUAL", x_plus_one, one), c.test("EQUAL", x, c.const(np.inf)))
    return c.select(keep_x, x, result)


@lowers("Expm1")
def expm1(cx: SubgraphLowering, node: Node):
    return [_expm1(Composer(cx, node), _float_input(cx, node))]


@lowers("Log1p")
def log1p(cx: SubgraphLowering, node: Node):
    return [_log1p(Composer(cx, node), _float_input(cx, node))]


def _erfc(c: Composer, z: TensorRef) -> TensorRef:
    """erfc(z) = GELU(y) / (y / 2) with y = -sqrt(2) z, from GELU(y) = y/2 * erfc(-y / sqrt(2))
    (TFLite has no ERF or ERFC builtin). Beyond |z| = 10, erfc is 0 or 2 in float32: z is held
    there (by selects, which keep NaN) so that GELU never sees an infinity. Scaling z rounds,
    so in the far tail the relative error grows to about 2 z^2 float32 epsilons (1e-5 near
    z = 6.5, where erfc is 4e-20); absolute errors stay below 1e-7."""
    high, low = c.const(10.0), c.const(-10.0)
    z = c.select(c.test("GREATER", z, high), high, z)
    z = c.select(c.test("LESS", z, low), low, z)
    y = c.op("MUL", z, c.const(-math.sqrt(2.0)))
    ratio = c.op("DIV", c.op("GELU", y, approximate=False), c.op("MUL", y, c.const(0.5)))
    return c.select(c.test("EQUAL", y, c.const(0.0)), c.const(1.0), ratio)


def _erf_series(c: Composer, x: TensorRef) -> TensorRef:
    """erf by its Taylor series 2/sqrt(pi) * x * (1 - x^2/3 + x^4/10 - x^6/42): for
    |x| < ERF_SERIES_LIMIT the next term is below 3e-10 relative, far under float32's epsilon."""
    s = c.op("MUL", x, x)
    poly = c.const(-1 / 42)
    for coefficient in (1 / 10, -1 / 3, 1.0):
        poly = c.op("ADD", c.op("MUL", poly, s), c.const(coefficient))
    return c.op("MUL", x, c.op("MUL", poly, c.const(2 / math.sqrt(math.pi))))


@lowers("Erfc")
def erfc(cx: SubgraphLowering, node: Node):
    return [_erfc(Composer(cx, node), _float_input(cx, node))]


@lowers("Erf")
def erf(cx: SubgraphLowering, node: Node):
    """erf(x) = erfc(-x) - 1, which loses erf's relative precision near 0 (1 + erf(x) is
    rounded): there the Taylor series instead."""
    c = Composer(cx, node)
    x = _float_input(cx, node)
    identity = c.op("SUB", _erfc(c, c.op("NEG", x)), c.const(1.0))
    small = c.test("LESS", c.op("ABS", x), c.const(ERF_SERIES_LIMIT))
    return [c.select(small, _erf_series(c, x), identity)]


@lowers("IsNan")
def is_nan(cx: SubgraphLowering, node: Node):
    x = _float_input(cx, node)
    return [cx.emit1("NOT_EQUAL", [x, x], cx.out(node))]  # only NaN differs from itself


@lowers("IsInf", "IsFinite")
def is_inf_or_finite(cx: SubgraphLowering, node: Node):
    """|x| == inf, or |x| < inf (false for NaN)."""
    c = Composer(cx, node)
    x = _float_input(cx, node)
    return [c.test("EQUAL" if node.op == "IsInf" else "LESS", c.op("ABS", x), c.const(np.inf))]


# -- activations --------------------------------------------------------------------------------


@lowers("Softplus")
def softplus(cx: SubgraphLowering, node: Node):
    """TensorFlow's kernel: x where x > -threshold, exp(x) where x < threshold, else
    log1p(exp(x)); threshold = log(epsilon) + 2, so nothing overflows or underflows. NaN takes
    the x branch (the test is x <= -threshold), which keeps it whatever EXP makes of it."""
    c = Composer(cx, node)
    x = _float_input(cx, node)
    exp = c.op("EXP", x)
    result = c.select(c.test("LESS", x, c.const(SOFTPLUS_THRESHOLD)), exp, _log1p(c, exp))
    return [c.select(c.test("LESS_EQUAL", x, c.const(-SOFTPLUS_THRESHOLD)), result, x)]


@lowers("Softsign")
def softsign(cx: SubgraphLowering, node: Node):
    """x / (|x| + 1), as TensorFlow's kernel."""
    c = Composer(cx, node)
    x = _float_input(cx, node)
    return [c.op("DIV", x, c.op("ADD", c.op("ABS", x), c.const(1.0)))]


@lowers("Selu")
def selu(cx: SubgraphLowering, node: Node):
    """scale * x for x >= 0, scale * alpha * (exp(x) - 1) below: ELU times the scale of its side."""
    c = Composer(cx, node)
    x = _float_input(cx, node)
    scale = c.select(c.test("LESS", x, c.const(0.0)), c.const(SELU_SCALE_ALPHA), c.const(SELU_SCALE))
    return [c.op("MUL", c.op("ELU", x), scale)]


@lowers("LeakyRelu")
def leaky_relu(cx: SubgraphLowering, node: Node):
    x = _float_input(cx, node)
    return [cx.emit1("LEAKY_RELU", [x], cx.out(node), alpha=float(node.attrs.get("alpha", 0.2)))]


@lowers("Softmax")
def softmax(cx: SubgraphLowering, node: Node):
    x = _float_input(cx, node)
    return [cx.emit1("SOFTMAX", [x], cx.out(node), beta=1.0)]


@lowers("LogSoftmax")
def log_softmax(cx: SubgraphLowering, node: Node):
    x = _float_input(cx, node)
    return [cx.emit1("LOG_SOFTMAX", [x], cx.out(node))]


@lowers("LRN")
def local_response_normalization(cx: SubgraphLowering, node: Node):
    """LOCAL_RESPONSE_NORMALIZATION: the same window over channels and formula, alpha not
    divided by the window size in either."""
    x = _float_input(cx, node)
    if x.rank is not None and x.rank != 4:
        raise cx.fail(node, f"the input must have rank 4 (NHWC), it has shape {x.shape}")
    a = node.attrs
    return [cx.emit1("LOCAL_RESPONSE_NORMALIZATION", [x], cx.out(node), radius=int(a.get("depth_radius", 5)),
                     bias=float(a.get("bias", 1.0)), alpha=float(a.get("alpha", 1.0)), beta=float(a.get("beta", 0.5)))]


# -- activations TensorFlow spells as several ops -------------------------------------------------


def _fused_activation(cx: SubgraphLowering, node: Node) -> TensorRef | None:
    """GELU, HARD_SWISH or L2_NORMALIZATION of x if ``node`` ends one of their patterns and
    keeps x's shape, else None."""
    out = node.outputs[0]
    if out.dtype != "float32" or out.shape is None:
        return None
    gelu = _gelu(node)
    if gelu is not None and gelu[0].shape == out.shape:
        return cx.emit1("GELU", [_lowered(cx, node, gelu[0])], cx.out(node), approximate=gelu[1])
    x = _hard_swish(node)
    if x is not None and x.shape == out.shape:
        return cx.emit1("HARD_SWISH", [_lowered(cx, node, x)], cx.out(node))
    x = _l2_normalize(node)
    if x is not None and x.shape == out.shape:
        return cx.emit1("L2_NORMALIZATION", [_lowered(cx, node, x)], cx.out(node))
    return None


def _lowered(cx: SubgraphLowering, node: Node, value: Value) -> TensorRef:
    tensor = cx.value(value)
    if not isinstance(tensor, TensorRef):
        raise cx.fail(node, f"{value.name} is not a tensor here")
    return tensor


def _number(value: Value) -> float | None:
    """The value of a float32 constant with one element, else None."""
    c = value.const
    return float(c.reshape(())) if c is not None and c.size == 1 and c.dtype == np.float32 else None


def _equals(value: float | None, target: float) -> bool:
    """Whether a constant is ``target`` once both are float32, as the model holds them."""
    return value is not None and np.float32(value) == np.float32(target)


def _producer(value: Value, *ops: str) -> Node | None:
    return value.node if value.node.op in ops else None


def _product(value: Value, depth: int = 4) -> tuple[list[Value], float]:
    """``value`` as a product: its factors that are not constants, and the product of the
    constant ones, looking through Mul, Neg and division by a constant."""
    node = value.node
    number = _number(value)
    if number is not None:
        return [], number
    if depth and node.op == "Mul":
        (a, ca), (b, cb) = (_product(v, depth - 1) for v in node.inputs)
        return a + b, ca * cb
    if depth and node.op == "Neg":
        factors, scale = _product(node.inputs[0], depth - 1)
        return factors, -scale
    divisor = _number(node.inputs[1]) if node.op == "RealDiv" else None
    if depth and divisor:
        factors, scale = _product(node.inputs[0], depth - 1)
        return factors, scale / divisor
    return [value], 1.0


def _scaled(value: Value, scale: float) -> Value | None:
    """v if ``value`` is ``v * scale`` (in any of the forms :func:`_product` reads)."""
    factors, found = _product(value)
    return factors[0] if len(factors) == 1 and _equals(found, scale) else None


def _plus(value: Value, number: float) -> Value | None:
    """v if ``value`` is ``v + number`` (either operand order)."""
    node = _producer(value, "AddV2", "Add")
    if node is not None:
        for v, c in (node.inputs, node.inputs[::-1]):
            if _equals(_number(c), number):
                return v
    return None


def _two_factors(node: Node, scale: float) -> list[tuple[Value, Value]]:
    """Both orders of the two non-constant factors of ``node``'s result, if it is their
    product times ``scale``."""
    factors, found = _product(node.outputs[0])
    return [(factors[0], factors[1]), (factors[1], factors[0])] if len(factors) == 2 and _equals(found, scale) else []


def _gelu(node: Node) -> tuple[Value, bool] | None:
    """(x, approximate) if ``node`` computes ``0.5 * x * cdf`` with cdf 2 * Phi(x) as tf.nn.gelu
    writes it (erfc(-x / sqrt(2)), or 1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)) when
    approximate) or as BERT does (1 + erf(x / sqrt(2)))."""
    for x, cdf in _two_factors(node, 0.5):
        erfc = _producer(cdf, "Erfc")
        if erfc is not None and _scaled(erfc.inputs[0], -SQRT_HALF) is x:
            return x, False
        inner = _plus(cdf, 1.0)
        function = None if inner is None else _producer(inner, "Erf", "Tanh")
        if function is not None and function.op == "Erf" and _scaled(function.inputs[0], SQRT_HALF) is x:
            return x, False
        if function is not None and function.op == "Tanh" and _is_gelu_tanh_argument(function.inputs[0], x):
            return x, True
    return None


def _is_gelu_tanh_argument(value: Value, x: Value) -> bool:
    """Whether ``value`` is sqrt(2 / pi) * (x + 0.044715 * x^3)."""
    total = _scaled(value, SQRT_2_OVER_PI)
    node = None if total is None else _producer(total, "AddV2", "Add")
    if node is None:
        return False
    for v, cubic in (node.inputs, node.inputs[::-1]):
        power = _scaled(cubic, GELU_CUBIC)
        power = None if power is None else _producer(power, "Pow")
        if v is x and power is not None and power.inputs[0] is x and _equals(_number(power.inputs[1]), 3.0):
            return True
    return False


def _hard_swish(node: Node) -> Value | None:
    """x if ``node`` computes x * relu6(x + 3) / 6 (Keras' hard_swish, MobileNetV3's)."""
    for x, gate in _two_factors(node, 1 / 6):
        relu6 = _producer(gate, "Relu6")
        if relu6 is not None and _plus(relu6.inputs[0], 3.0) is x:
            return x
    return None


def _l2_normalize(node: Node) -> Value | None:
    """x if ``node`` computes x * rsqrt(max(sum(x^2, last axis, keep_dims), 1e-12)), as
    tf.math.l2_normalize does over the last axis with its default epsilon."""
    for x, scale in _two_factors(node, 1.0):
        rsqrt = _producer(scale, "Rsqrt")
        maximum = None if rsqrt is None else _producer(rsqrt.inputs[0], "Maximum")
        if maximum is None or x.shape is None:
            continue
        for total, epsilon in (maximum.inputs, maximum.inputs[::-1]):
            summed = _producer(total, "Sum")
            if summed is not None and _equals(_number(epsilon), L2_EPSILON) and summed.attrs.get("keep_dims") \
                    and _is_last_axis(summed.inputs[1], len(x.shape)) and _is_square_of(summed.inputs[0], x):
                return x
    return None


def _is_last_axis(axes: Value, rank: int) -> bool:
    value = axes.const
    return value is not None and rank > 0 and sorted({int(a) % rank for a in value.reshape(-1)}) == [rank - 1]


def _is_square_of(value: Value, x: Value) -> bool:
    node = _producer(value, "Square", "Mul")
    return node is not None and all(v is x for v in node.inputs)


# -- selection and casts ------------------------------------------------------------------------


@lowers("Cast")
def cast(cx: SubgraphLowering, node: Node):
    x = cx.input(node, 0)
    out = cx.out(node)
    if x.type == out.type:
        return [x]
    return [cx.emit1("CAST", [x], out)]


@lowers("Bitcast")
def bitcast(cx: SubgraphLowering, node: Node):
    """BITCAST: the bytes read as the output type (its shape gains or loses a last axis when
    the element sizes differ, as in TF)."""
    x = cx.input(node, 0)
    out = cx.out(node)
    if x.type == out.type:
        return [x]
    return [cx.emit1("BITCAST", [x], out)]


@lowers("Select", "SelectV2")
def select(cx: SubgraphLowering, node: Node):
    """SELECT_V2, which broadcasts. TF1's Select with a vector condition picks whole rows of
    higher-rank inputs, as LiteRT's SELECT does."""
    cond, a, b = cx.inputs(node)
    if node.op == "Select" and (cond.rank is None or a.rank is None):
        raise cx.fail(node, "Select needs inputs of known rank (a vector condition picks rows)")
    if node.op == "Select" and cond.rank == 1 and a.rank > 1:
        return [cx.emit1("SELECT", [cond, a, b], cx.out(node))]
    return [cx.emit1("SELECT_V2", [cond, a, b], cx.out(node))]
