"""The cases of the builtin operator sweep (benchmarks/builtin_ops.py): every BuiltinOperator of
the schema except STABLEHLO_* (benchmarks/builtin_op_cases_stablehlo.py), each in several
forms: dtypes (float32, int32/int64, bool, complex64, and int8/uint8/int16 affine-quantized where
LiteRT has a kernel for them), ranks, options and broadcasting. Tensors are tiny: the sweep
measures coverage, not speed. Forms LiteRT refuses stay in the list: the sweep records them.

Each form is one ``case(op, form, inputs, outputs, options)`` call; see one_op_model.py for
``x`` (a model input), ``k`` (a constant), ``v`` (a variable) and ``out``.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable

import numpy as np

from builtin_op_case import OpCase
from one_op_model import Graph, In, Out, k, model, one_op, out, v, x

CASES: list[OpCase] = []
NOT_RUNNABLE: dict[str, str] = {
    "CALL": "not an operator LiteRT executes: no kernel is registered for it in LiteRT's builtin resolver"
    " (the schema keeps the code from an unfinished design; subgraph calls are IF, WHILE, CALL_ONCE)",
    "CUSTOM": "the code of every custom op: what runs is named by the op's custom_code, resolved by"
    " the custom op table, not the builtin resolver (numlite: custom_ops=, see tests/test_custom_ops.py)",
    "DELEGATE": "a node a delegate makes at run time when it takes over part of a graph; a model file"
    " never holds one and no builtin kernel exists",
    "PLACEHOLDER_FOR_GREATER_OP_CODES": "not an operator: the deprecated int8 builtin_code holds 127 when"
    " the real code, in builtin_code, is above 127",
}

OPTION_KEYS = ("options_type", "options2", "custom_options", "version", "intermediates")

F32, I32, I64, I8, U8, I16, BOOL, C64 = (np.dtype(t) for t in (
    np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16, np.bool_, np.complex64))
Q8 = (0.05, 3)       # int8: [-6.55, 6.2]
QU8 = (0.05, 128)    # uint8: [-6.4, 6.35]
Q16 = (1 / 4096, 0)  # int16 symmetric: [-8, 8)


def case(op: str, form: str, inputs: list[In | None], outputs: list[Out], options: dict[str, Any] | None = None,
         *, rtol: float = 1e-5, atol: float = 1e-5, check: Callable | None = None, **model_kwargs: Any) -> None:
    """Add one form of ``op`` to CASES."""
    unknown = set(model_kwargs) - set(OPTION_KEYS)
    if unknown:
        raise TypeError(f"{op}-{form}: unknown arguments {sorted(unknown)}")
    if any(c.op == op and c.form == form for c in CASES):
        raise ValueError(f"duplicate case {op}-{form}")

    def build() -> tuple[bytes, list[np.ndarray]]:
        return one_op(op, inputs, outputs, options, **model_kwargs)

    CASES.append(OpCase(op, form, build, rtol, atol, check))


def _rng(*tag: Any) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(tag).encode()))


def f32(shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0, seed: Any = 0) -> np.ndarray:
    return _rng("f", shape, lo, hi, seed).uniform(lo, hi, shape).astype(np.float32)


def ints(shape: tuple[int, ...], dtype: Any, lo: int | None = None, hi: int | None = None, seed: Any = 0) -> np.ndarray:
    """Integers in [lo, hi] (default: the dtype's whole range, capped to int32's)."""
    info = np.iinfo(dtype)
    lo = max(info.min, -2**31) if lo is None else lo
    hi = min(info.max, 2**31 - 1) if hi is None else hi
    return _rng("i", shape, np.dtype(dtype).name, lo, hi, seed).integers(lo, hi, shape, endpoint=True).astype(dtype)


def bools(shape: tuple[int, ...], seed: Any = 0) -> np.ndarray:
    return _rng("b", shape, seed).random(shape) < 0.5


def c64(shape: tuple[int, ...], seed: Any = 0) -> np.ndarray:
    return (f32(shape, seed=("re", seed)) + 1j * f32(shape, seed=("im", seed))).astype(np.complex64)


def quantized(dtype: Any, q: tuple, shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0, seed: Any = 0) -> np.ndarray:
    """Quantized values of floats uniform in [lo, hi] with (scale, zero_point) ``q``."""
    info = np.iinfo(dtype)
    return np.clip(np.round(f32(shape, lo, hi, seed) / q[0]) + q[1], info.min, info.max).astype(dtype)


QUANT = {I8: Q8, U8: QU8, I16: Q16}


# ============================================================================= element-wise unary

# op: (float input range, quantized dtypes LiteRT may take, extra plain dtypes, options)
UNARY: dict[str, tuple[tuple[float, float], tuple, tuple, dict | None]] = {
    "ABS": ((-2, 2), (I8, I16), (I32,), None),
    "CEIL": ((-2, 2), (), (), None),
    "COS": ((-3, 3), (), (), None),
    "ELU": ((-2, 2), (I8,), (), None),
    "EXP": ((-2, 2), (I8, I16), (), None),
    "FLOOR": ((-2, 2), (), (), None),
    "GELU": ((-3, 3), (I8, U8), (), {"approximate": False}),
    "HARD_SWISH": ((-4, 4), (I8, U8), (), None),
    "LOG": ((0.1, 4), (I8, I16), (), None),
    "LOGISTIC": ((-4, 4), (I8, U8, I16), (), None),
    "NEG": ((-2, 2), (), (I32, I64), None),
    "RELU": ((-2, 2), (I8, U8, I16), (), None),
    "RELU6": ((-2, 8), (I8, U8, I16), (), None),
    "RELU_0_TO_1": ((-1, 2), (I8, U8), (), None),
    "RELU_N1_TO_1": ((-2, 2), (I8, U8), (), None),
    "ROUND": ((-3, 3), (), (), None),
    "RSQRT": ((0.1, 4), (I8, I16), (), None),
    "SIGN": ((-2, 2), (), (I32,), None),
    "SIN": ((-3, 3), (), (), None),
    "SQRT": ((0, 4), (I8, I16), (), None),
    "SQUARE": ((-2, 2), (), (), None),
    "TANH": ((-3, 3), (I8, U8, I16), (), None),
    "LEAKY_RELU": ((-2, 2), (I8, U8, I16), (), {"alpha": 0.2}),
    "LOG_SOFTMAX": ((-3, 3), (I8, U8), (), None),
    "SOFTMAX": ((-3, 3), (I8, U8, I16), (), {"beta": 1.0}),
}
# Quantized outputs where LiteRT fixes them (softmax-like ops want a fixed output range).
FIXED_OUT_Q = {
    ("LOGISTIC", I8): (1 / 256, -128), ("LOGISTIC", U8): (1 / 256, 0), ("LOGISTIC", I16): (1 / 32768, 0),
    ("TANH", I8): (1 / 128, 0), ("TANH", U8): (1 / 128, 128), ("TANH", I16): (1 / 32768, 0),
    ("SOFTMAX", I8): (1 / 256, -128), ("SOFTMAX", U8): (1 / 256, 0), ("SOFTMAX", I16): (1 / 32768, 0),
    ("LOG_SOFTMAX", I8): (16 / 256, 127), ("LOG_SOFTMAX", U8): (16 / 256, 255),
}
for op, ((lo, hi), qtypes, plain, opts) in UNARY.items():
    case(op, "f32-r1", [x(f32((7,), lo, hi, op))], [out(F32)], opts)
    case(op, "f32-r4", [x(f32((2, 3, 2, 4), lo, hi, op))], [out(F32)], opts)
    if op in ("SOFTMAX", "LOG_SOFTMAX"):
        continue
    case(op, "f32-r0", [x(np.float32(f32((1,), lo, hi, op)[0]))], [out(F32)], opts)
    for dt in plain:
        case(op, f"{dt.name}", [x(ints((2, 5), dt, -20, 20, op))], [out(dt)], opts)
for op, ((lo, hi), qtypes, plain, opts) in UNARY.items():
    for dt in qtypes:
        qin = QUANT[dt] if dt != I16 else (max(abs(lo), abs(hi)) / 32767, 0)
        qout = FIXED_OUT_Q.get((op, dt), qin if op not in ("EXP", "LOG", "RSQRT", "SQRT", "ELU", "GELU", "HARD_SWISH")
                               else ((0.06, -100) if dt == I8 else (0.06, 20) if dt == U8 else (8 / 32767, 0)))
        case(op, f"{dt.name}q", [x(quantized(dt, qin, (2, 9), lo, hi, op), qin)], [out(dt, qout)], opts)

# Quantized forms LiteRT computes through a table built at prepare: every 8-bit input value once,
# int16 values every 7 quanta (all 513 samples of its interpolated table, each at several offsets),
# with other scales than the forms above. SQRT and RSQRT fail on inputs below their zero point.
LUT_FORMS = {"ABS": ((0.03, -5), (0.05, 2), (I8,), (3 / 32767, 2 / 32767), {}),
             "EXP": ((0.02, 10), (0.04, -128), (I8,), (3 / 32767, 20 / 32767), {}),
             "LOG": ((0.03, -128), (0.03, 55), (I8,), (8 / 32767, 3 / 32767), {}),
             "ELU": ((0.04, -20), (0.03, -10), (I8,), None, {}),
             "GELU": ((0.03, -7), (0.02, -100), (I8, U8), (4 / 32767, 4 / 32767), {"approximate": True}),
             "SQRT": ((0.02, -128), (0.015, -128), (I8,), (4 / 32767, 2 / 32767), {}),
             "RSQRT": ((0.02, -128), (0.05, -128), (I8,), (4 / 32767, 12 / 32767), {})}
for op, (qin, qout, eight_bit, q16, opts) in LUT_FORMS.items():
    low = qin[1] if op in ("SQRT", "RSQRT") else -128
    for dt in eight_bit:
        shift = 128 if dt == U8 else 0
        values = np.arange(low + shift, 128 + shift).astype(dt)
        case(op, f"{dt.name}q-every-value", [x(values, (qin[0], qin[1] + shift))], [out(dt, (qout[0], qout[1] + shift))],
             opts or None)
    if q16 is not None:
        values = np.arange(0 if op in ("SQRT", "RSQRT") else -32768, 32768, 7).astype(I16)
        case(op, "int16q-every-7th-value", [x(values, (q16[0], 0))], [out(I16, (q16[1], 0))], opts or None)

# Inputs LiteRT's quantized kernels reject at invoke: below the zero point (RSQRT), a negative
# value (SQRT), a divisor at its zero point (DIV).
case("SQRT", "int8q-negative", [x(np.array([5, 0, -3], I8), (0.1, 0))], [out(I8, (0.1, 0))])
case("RSQRT", "int8q-below-zero-point", [x(np.array([5, 1, -3], I8), (0.1, 1))], [out(I8, (0.1, 0))])
case("RSQRT", "int16q-negative", [x(np.array([5, -3], I16), (0.01, 0))], [out(I16, (0.01, 0))])
case("SOFTMAX", "f32-beta0.5", [x(f32((3, 5), seed=1))], [out(F32)], {"beta": 0.5})
case("LEAKY_RELU", "f32-alpha-neg", [x(f32((3, 5), seed=1))], [out(F32)], {"alpha": -0.5})
case("GELU", "f32-approximate", [x(f32((3, 5), -3, 3, seed=1))], [out(F32)], {"approximate": True})
case("CAST", "f32-i32", [x(f32((2, 5), -9, 9))], [out(I32)])
case("CAST", "i32-f32", [x(ints((2, 5), I32, -99, 99))], [out(F32)])
case("CAST", "bool-f32", [x(bools((6,)))], [out(F32)])
case("CAST", "f32-bool", [x(np.array([0, 1.5, -0.0, 2, 0], np.float32))], [out(BOOL)])
case("CAST", "i64-i32", [x(ints((5,), I64, -2**40, 2**40))], [out(I32)])
case("CAST", "u8-i8", [x(ints((2, 4), U8))], [out(I8)])
case("CAST", "i16-i32", [x(ints((2, 4), I16))], [out(I32)])
case("CAST", "f32-c64", [x(f32((2, 3)))], [out(C64)])
case("CAST", "i32-c64", [x(ints((2, 3), I32, -9, 9))], [out(C64)])
case("CAST", "c64-c64", [x(c64((2, 3)))], [out(C64)])
case("CAST", "f32-u8", [x(f32((2, 4), 0, 300))], [out(U8)])
case("CAST", "f32-f16", [x(f32((2, 4)))], [out(np.float16)])
case("ZEROS_LIKE", "f32", [x(f32((2, 3)))], [out(F32)])
case("ZEROS_LIKE", "i32", [x(ints((4,), I32))], [out(I32)])
case("ZEROS_LIKE", "i64-r3", [x(ints((1, 2, 3), I64))], [out(I64)])
case("LOGICAL_NOT", "r2", [x(bools((3, 4)))], [out(BOOL)])
case("LOGICAL_NOT", "r0", [x(np.bool_(True))], [out(BOOL)])


# ============================================================================= element-wise binary

def binary(op: str, a: np.ndarray, b: np.ndarray, dt_out: Any, form: str, opts: dict | None = None,
           qa: tuple | None = None, qb: tuple | None = None, qo: tuple | None = None, const_b: bool = False,
           **kw: Any) -> None:
    case(op, form, [x(a, qa), (k if const_b else x)(b, qb)], [out(dt_out, qo)], opts, **kw)


ARITH = {
    "ADD": {"fused_activation_function": 0}, "SUB": {"fused_activation_function": 0},
    "MUL": {"fused_activation_function": 0}, "DIV": {"fused_activation_function": 0},
    "MAXIMUM": None, "MINIMUM": None, "POW": None, "SQUARED_DIFFERENCE": None,
    "FLOOR_DIV": None, "FLOOR_MOD": None, "ATAN2": None,
}
for op, opts in ARITH.items():
    lo = 0.2 if op in ("POW",) else -2.0
    bnz = dict(lo=0.3, hi=2.0) if op in ("DIV", "FLOOR_DIV", "FLOOR_MOD", "POW") else {}
    binary(op, f32((2, 3), lo, 2, op), f32((2, 3), seed=(op, 1), **bnz), F32, "f32", opts)
    binary(op, f32((2, 1, 3, 1), lo, 2, op), f32((1, 4), seed=(op, 2), **bnz), F32, "f32-bcast-r4", opts)
    if op != "ATAN2":  # LiteRT's ATAN2 does not broadcast (it checks ranks, then runs the flat arrays)
        binary(op, f32((1, 2, 1, 2, 1, 3), lo, 2, op), f32((2, 1, 2, 1, 3, 1), seed=(op, 5), **bnz), F32,
               "f32-bcast-r6", opts)
    else:
        binary(op, f32((1, 2, 1, 2, 1, 3), lo, 2, op), f32((1, 2, 1, 2, 1, 3), seed=(op, 5)), F32, "f32-r6", opts)
    binary(op, f32((5,), lo, 2, op), np.float32(f32((1,), seed=(op, 3), **bnz)[0]), F32, "f32-scalar-const", opts,
           const_b=True)
    if op in ("ATAN2",):
        continue
    nonzero = op in ("DIV", "FLOOR_DIV", "FLOOR_MOD")
    for dt in (I32, I64):
        b = ints((2, 4), dt, 1, 7, (op, 4)) * (np.where(bools((2, 4), op), 1, -1).astype(dt) if nonzero else 1)
        a = ints((2, 4), dt, -30, 30, op) if op != "POW" else ints((2, 4), dt, -3, 3, op)
        binary(op, a, b if op != "POW" else ints((2, 4), dt, 0, 4, op), dt, dt.name, opts)
    small = op == "POW"  # powers that stay inside int32 (LiteRT's overflow is undefined behaviour)
    binary(op, ints((3, 1), I32, -5 if small else -30, 5 if small else 30, op),
           ints((1, 4), I32, 1, 5 if small else 9, (op, 5)), I32, "i32-bcast", opts)
    if op in ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "DIV"):
        qo = {"ADD": (0.1, -2), "SUB": (0.1, 1), "MUL": (0.2, 0), "DIV": (0.1, 0), "SQUARED_DIFFERENCE": (0.1, -128)}
        for dt in (I8, U8, I16):
            q = QUANT[dt] if dt != I16 else (1 / 4096, 0)
            o = qo.get(op, q) if dt == I8 else ((qo[op][0], qo[op][1] + 128 if op != "SQUARED_DIFFERENCE" else 0)
                                               if op in qo and dt == U8 else q if op not in qo else (8 / 32768, 0))
            bq = (q[0] * 1.5, q[1]) if op not in ("MAXIMUM", "MINIMUM") else q
            b = quantized(dt, bq, (2, 1, 3), 0.3 if op == "DIV" else -2, 2, (op, 6))
            binary(op, quantized(dt, q, (2, 4, 3), seed=op), b, dt, f"{dt.name}q-bcast", opts, q, bq, o)
    if op in ("ADD", "SUB", "MUL", "DIV"):
        binary(op, f32((2, 3)), f32((2, 3), seed=1, lo=0.3), F32, "f32-relu6", {"fused_activation_function": 3})
        binary(op, f32((2, 3)), f32((2, 3), seed=1, lo=0.3), F32, "f32-relu-n1-1", {"fused_activation_function": 2})
    if op in ("ADD", "SUB", "MUL"):
        binary(op, ints((2, 3), I16, -200, 200), ints((2, 3), I16, -100, 100, 1), I16, "i16-plain", opts)
# Quantized DIV and SQUARED_DIFFERENCE on every pair of 8-bit values (the divisor without its zero
# point, where LiteRT fails), int16 DIV on a grid of 256 x 255 values.
def _every(dt: Any, step: int = 1, skip: int | None = None) -> np.ndarray:
    info = np.iinfo(dt)
    values = np.arange(info.min, info.max + 1, step)
    return values[values != skip].astype(dt)


binary("DIV", _every(I8).reshape(-1, 1), _every(I8, skip=-10).reshape(1, -1), I8, "int8q-every-pair",
       {"fused_activation_function": 0}, (0.05, 3), (0.04, -10), (0.5, -2))
binary("DIV", _every(U8).reshape(-1, 1), _every(U8, skip=120).reshape(1, -1), U8, "uint8q-every-pair-relu6",
       {"fused_activation_function": 3}, (0.05, 128), (0.03, 120), (0.03, 10))
binary("DIV", _every(I16, 257).reshape(-1, 1), _every(I16, 263, skip=0).reshape(1, -1), I16, "int16q-grid",
       {"fused_activation_function": 0}, (1 / 4096, 0), (1 / 2048, 0), (1 / 512, 0))
binary("DIV", np.array([3, 4, 5], I8), np.array([1, 2, 2], I8), I8, "int8q-zero-divisor", {"fused_activation_function": 0},
       (0.1, 0), (0.1, 2), (0.1, 0))
binary("SQUARED_DIFFERENCE", _every(I8).reshape(-1, 1), _every(I8).reshape(1, -1), I8, "int8q-every-pair",
       None, (0.05, 3), (0.03, -20), (0.2, -128))
binary("MUL", c64((2, 3)), c64((2, 3), 1), C64, "c64", {"fused_activation_function": 0})
binary("MUL", c64((2, 1, 3)), c64((4, 1), 1), C64, "c64-bcast", {"fused_activation_function": 0})
binary("ADD", c64((2, 3)), c64((2, 3), 1), C64, "c64", {"fused_activation_function": 0})
binary("SUB", c64((2, 3)), c64((2, 3), 1), C64, "c64", {"fused_activation_function": 0})
binary("DIV", c64((2, 3)), c64((2, 3), 1), C64, "c64", {"fused_activation_function": 0})
binary("SQUARED_DIFFERENCE", c64((2, 3)), c64((2, 3), 1), C64, "c64")
binary("MAXIMUM", ints((2, 3), I8), ints((2, 3), I8, seed=1), I8, "i8-plain")
binary("MAXIMUM", ints((2, 3), U8), ints((2, 3), U8, seed=1), U8, "u8-plain")
binary("FLOOR_DIV", ints((2, 3), I16, 1, 100), ints((2, 3), I16, 1, 9, 1), I16, "i16")
binary("FLOOR_DIV", ints((2, 3), I8, 1, 100), ints((2, 3), I8, 1, 9, 1), I8, "i8")
binary("FLOOR_MOD", ints((2, 3), I16, -100, 100), ints((2, 3), I16, 1, 9, 1), I16, "i16")
binary("ATAN2", np.array([0, 0, 1, -1, 0, -0.0], np.float32), np.array([0, -1, 0, 0, -0.0, -1], np.float32), F32,
       "f32-zeros")

for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
    a, b = f32((2, 3)), f32((2, 3), seed=1)
    b[0, 0] = a[0, 0]
    binary(op, a, b, BOOL, "f32")
    binary(op, f32((2, 1, 3)), f32((4, 1), seed=1), BOOL, "f32-bcast")
    binary(op, ints((3, 4), I32, -3, 3), ints((3, 4), I32, -3, 3, 1), BOOL, "i32")
    binary(op, ints((3, 4), I64, -3, 3), ints((1, 4), I64, -3, 3, 1), BOOL, "i64-bcast")
    binary(op, quantized(I8, Q8, (2, 5)), quantized(I8, (0.1, -2), (2, 5), seed=1), BOOL, "i8q", qa=Q8, qb=(0.1, -2))
    binary(op, quantized(U8, QU8, (2, 5)), quantized(U8, QU8, (1, 5), seed=1), BOOL, "u8q-bcast", qa=QU8, qb=QU8)
    if op != "NOT_EQUAL":
        binary(op, ints((3, 4), I16, -3, 3), ints((3, 4), I16, -3, 3, 1), BOOL, "i16")
    else:  # LiteRT's NOT_EQUAL takes int16 as quantized only: unquantized, its results vary run to run
        binary(op, ints((3, 4), I16, -3, 3), ints((3, 4), I16, -3, 3, 1), BOOL, "i16q", qa=Q16, qb=Q16)
    if op in ("EQUAL", "NOT_EQUAL"):
        binary(op, bools((2, 3)), bools((2, 3), 1), BOOL, "bool")
        binary(op, c64((2, 2)), np.array([[1, 2], [3, 4]], np.complex64), BOOL, "c64")
for op in ("LOGICAL_AND", "LOGICAL_OR"):
    binary(op, bools((2, 3)), bools((2, 3), 1), BOOL, "same")
    binary(op, bools((2, 1, 3)), bools((4, 1), 1), BOOL, "bcast")
for dt in (I8, I16, I32, U8, np.dtype(np.uint32)):
    binary("BITWISE_XOR", ints((2, 3), dt, seed=dt.name), ints((2, 3), dt, seed=(dt.name, 1)), dt, dt.name)
    binary("RIGHT_SHIFT", ints((2, 3), dt, seed=dt.name), ints((2, 3), dt, 0, dt.itemsize * 8 - 1, (dt.name, 1)), dt,
           dt.name)
binary("BITWISE_XOR", ints((2, 1, 3), I32), ints((4, 1), I32, seed=1), I32, "i32-bcast")
binary("RIGHT_SHIFT", ints((3, 1), I32), ints((1, 2), I32, 0, 31, 1), I32, "i32-bcast")
binary("PRELU", f32((2, 3, 4)), f32((4,), -0.5, 0.5, 1), F32, "f32-alpha-c", const_b=True)
binary("PRELU", f32((2, 3, 4)), f32((3, 4), -0.5, 0.5, 1), F32, "f32-alpha-input")
binary("PRELU", f32((1, 2, 2, 3)), f32((1, 1, 3), -0.5, 0.5, 1), F32, "f32-r4-alpha")
binary("PRELU", quantized(I8, Q8, (1, 2, 2, 3)), ints((1, 1, 3), I8, -50, 50), I8, "i8q", qa=Q8, qb=(0.01, 0),
       qo=(0.06, 0), const_b=True)
binary("PRELU", quantized(U8, QU8, (1, 2, 2, 3)), ints((1, 1, 3), U8, 80, 180), U8, "u8q", qa=QU8, qb=(0.01, 128),
       qo=(0.06, 128), const_b=True)

case("ADD_N", "f32-3", [x(f32((2, 3))), x(f32((2, 3), seed=1)), x(f32((2, 3), seed=2))], [out(F32)])
case("ADD_N", "i32-2", [x(ints((4,), I32, -99, 99)), x(ints((4,), I32, -99, 99, 1))], [out(I32)])
case("ADD_N", "f32-1", [x(f32((2, 2)))], [out(F32)])


# ============================================================================= layout and shape


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


case("RESHAPE", "f32-shape-input", [x(f32((2, 3, 4))), k(i32(4, -1))], [out(F32)])
case("RESHAPE", "f32-new-shape-option", [x(f32((2, 6)))], [out(F32)], {"new_shape": [3, 4]})
case("RESHAPE", "i8q-r0-to-r1", [x(np.int8(5), Q8), k(i32(1))], [out(I8, Q8)])
case("RESHAPE", "bool-dynamic-shape", [x(bools((2, 3))), x(i32(3, 2))], [out(BOOL)])
case("RESHAPE", "c64", [x(c64((2, 3))), k(i32(6))], [out(C64)])
case("RESHAPE", "i64-r5", [x(ints((1, 2, 1, 3, 2), I64)), k(i32(2, 6))], [out(I64)])
case("SQUEEZE", "f32-all", [x(f32((1, 3, 1, 2)))], [out(F32)], {"squeeze_dims": []})
case("SQUEEZE", "i32-axis-neg", [x(ints((1, 3, 1), I32))], [out(I32)], {"squeeze_dims": [-1]})
case("SQUEEZE", "c64", [x(c64((1, 3)))], [out(C64)], {"squeeze_dims": [0]})
case("EXPAND_DIMS", "f32-axis0", [x(f32((2, 3))), k(i32(0))], [out(F32)])
case("EXPAND_DIMS", "i8q-axis-neg", [x(ints((2, 3), I8), Q8), k(np.int32(-1))], [out(I8, Q8)])
case("EXPAND_DIMS", "c64-i64-axis", [x(c64((3,))), k(np.array([1], np.int64))], [out(C64)])
for r, perm in ((2, (1, 0)), (3, (2, 0, 1)), (4, (0, 3, 1, 2)), (5, (4, 1, 0, 3, 2)), (6, (5, 0, 4, 1, 3, 2))):
    shape = (2, 3, 1, 2, 3, 2)[:r]
    case("TRANSPOSE", f"f32-r{r}", [x(f32(shape)), k(np.array(perm, np.int32))], [out(F32)])
case("TRANSPOSE", "i8q-r3", [x(ints((2, 3, 4), I8), Q8), k(i32(1, 2, 0))], [out(I8, Q8)])
case("TRANSPOSE", "bool-r2", [x(bools((2, 3))), k(i32(1, 0))], [out(BOOL)])
case("TRANSPOSE", "i16-r3", [x(ints((2, 3, 4), I16)), k(i32(2, 1, 0))], [out(I16)])
case("TRANSPOSE", "i64-r2", [x(ints((2, 3), I64)), k(i32(1, 0))], [out(I64)])
case("TRANSPOSE", "c64-r2", [x(c64((2, 3))), k(i32(1, 0))], [out(C64)])
case("TRANSPOSE", "f32-perm-input", [x(f32((2, 3, 4))), x(i32(2, 0, 1))], [out(F32)])
case("CONCATENATION", "f32-axis1", [x(f32((2, 3))), x(f32((2, 1), seed=1)), k(f32((2, 2), seed=2))], [out(F32)], {"axis": 1})
case("CONCATENATION", "f32-axis-neg-relu", [x(f32((2, 2, 3))), x(f32((2, 2, 1), seed=1))], [out(F32)],
     {"axis": -1, "fused_activation_function": 1})
case("CONCATENATION", "i8q-rescale", [x(ints((2, 3), I8), Q8), x(ints((1, 3), I8, seed=1), (0.1, -5))], [out(I8, (0.08, 0))],
     {"axis": 0})
case("CONCATENATION", "u8q", [x(ints((2, 3), U8), QU8), x(ints((2, 3), U8, seed=1), QU8)], [out(U8, QU8)], {"axis": 1})
case("CONCATENATION", "i16q", [x(ints((2, 3), I16), (0.01, 0)), x(ints((2, 3), I16, seed=1), (0.01, 0))],
     [out(I16, (0.01, 0))], {"axis": 0})
case("CONCATENATION", "i64-r1", [x(ints((3,), I64)), x(ints((2,), I64, seed=1))], [out(I64)], {"axis": 0})
case("CONCATENATION", "bool", [x(bools((2, 3))), x(bools((2, 3), 1))], [out(BOOL)], {"axis": 0})
case("CONCATENATION", "c64", [x(c64((2, 3))), x(c64((2, 1), 1))], [out(C64)], {"axis": 1})
case("PACK", "f32-axis0", [x(f32((2, 3))), x(f32((2, 3), seed=1))], [out(F32)], {"values_count": 2, "axis": 0})
case("PACK", "i32-axis-last", [x(ints((3,), I32)), x(ints((3,), I32, seed=1)), x(ints((3,), I32, seed=2))], [out(I32)],
     {"values_count": 3, "axis": 1})
case("PACK", "i8q", [x(ints((2, 2), I8), Q8), x(ints((2, 2), I8, seed=1), Q8)], [out(I8, Q8)], {"values_count": 2, "axis": 1})
case("PACK", "i64-axis-neg", [x(ints((2,), I64)), x(ints((2,), I64, seed=1))], [out(I64)], {"values_count": 2, "axis": -1})
case("PACK", "c64", [x(c64((2,))), x(c64((2,), 1))], [out(C64)], {"values_count": 2, "axis": 0})
case("UNPACK", "f32-axis0", [x(f32((3, 2)))], [out(F32)] * 3, {"num": 3, "axis": 0})
case("UNPACK", "i32-axis-neg", [x(ints((2, 2, 3), I32))], [out(I32)] * 3, {"num": 3, "axis": -1})
case("UNPACK", "i8q", [x(ints((2, 3), I8), Q8)], [out(I8, Q8)] * 2, {"num": 2, "axis": 0})
case("UNPACK", "bool", [x(bools((2, 3)))], [out(BOOL)] * 2, {"num": 2, "axis": 0})
case("UNPACK", "c64", [x(c64((2, 3)))], [out(C64)] * 3, {"num": 3, "axis": 1})
case("SPLIT", "f32-axis1", [k(np.int32(1)), x(f32((2, 6)))], [out(F32)] * 3, {"num_splits": 3})
case("SPLIT", "i8q-axis-neg", [k(np.int32(-1)), x(ints((2, 4), I8), Q8)], [out(I8, Q8)] * 2, {"num_splits": 2})
case("SPLIT", "i32-r1", [k(np.int32(0)), x(ints((4,), I32))], [out(I32)] * 4, {"num_splits": 4})
case("SPLIT", "c64", [k(np.int32(0)), x(c64((4, 2)))], [out(C64)] * 2, {"num_splits": 2})
case("SPLIT_V", "f32-sizes", [x(f32((2, 6))), k(i32(1, 3, 2)), k(np.int32(1))], [out(F32)] * 3, {"num_splits": 3})
case("SPLIT_V", "f32-inferred", [x(f32((5, 2))), k(i32(2, -1)), k(np.int32(0))], [out(F32)] * 2, {"num_splits": 2})
case("SPLIT_V", "i8q", [x(ints((4, 3), I8), Q8), k(i32(1, 3)), k(np.int32(0))], [out(I8, Q8)] * 2, {"num_splits": 2})
case("SPLIT_V", "i64-sizes", [x(ints((2, 3), I64)), k(np.array([2, 1], np.int64)), k(np.int32(-1))], [out(I64)] * 2,
     {"num_splits": 2})
case("SLICE", "f32-r2", [x(f32((4, 5))), k(i32(1, 2)), k(i32(2, -1))], [out(F32)])
case("SLICE", "i8q-r4", [x(ints((2, 3, 4, 2), I8), Q8), k(i32(0, 1, 1, 0)), k(i32(2, 2, 2, 1))], [out(I8, Q8)])
case("SLICE", "i64-begin-input", [x(ints((4, 3), I32)), x(np.array([1, 0], np.int64)), k(np.array([2, 3], np.int64))],
     [out(I32)])
case("SLICE", "bool", [x(bools((4,))), k(i32(1)), k(i32(2))], [out(BOOL)])
case("SLICE", "c64", [x(c64((3, 4))), k(i32(1, 1)), k(i32(2, 2))], [out(C64)])
case("SLICE", "r5", [x(f32((2, 2, 2, 3, 2))), k(i32(1, 0, 1, 1, 0)), k(i32(1, 2, 1, 2, -1))], [out(F32)])
STRIDED = {
    "basic": ((4, 5), (1, 0), (3, 5), (1, 2), {}),
    "neg-stride": ((4, 5), (-1, 4), (0, 0), (-1, -2), {"begin_mask": 1}),
    "masks": ((3, 4, 5), (0, 1, 0), (2, 3, 5), (1, 1, 2), {"begin_mask": 5, "end_mask": 2, "shrink_axis_mask": 1}),
    "ellipsis-newaxis": ((2, 3, 4), (0, 0, 1), (0, 0, 3), (1, 1, 1), {"ellipsis_mask": 1, "new_axis_mask": 2}),
    "offset": ((5, 4), (1, 1), (2, 2), (1, 1), {"offset": True}),
    "shrink-last": ((3, 4), (0, 2), (3, 3), (1, 1), {"shrink_axis_mask": 2}),
}
for form, (shape, b, e, s, opts) in STRIDED.items():
    case("STRIDED_SLICE", f"f32-{form}", [x(f32(shape, seed=form)), k(i32(*b)), k(i32(*e)), k(i32(*s))], [out(F32)], opts)
case("STRIDED_SLICE", "i8q", [x(ints((4, 4), I8), Q8), k(i32(0, 1)), k(i32(4, 4)), k(i32(2, 1))], [out(I8, Q8)])
case("STRIDED_SLICE", "i64-begin-input", [x(ints((6,), I64)), x(i32(1)), k(i32(5)), k(i32(2))], [out(I64)])
case("STRIDED_SLICE", "bool", [x(bools((6,))), k(i32(5)), k(i32(0)), k(i32(-2))], [out(BOOL)])
case("STRIDED_SLICE", "c64", [x(c64((6,))), k(i32(1)), k(i32(5)), k(i32(2))], [out(C64)])
case("TILE", "f32", [x(f32((2, 3))), k(i32(2, 1))], [out(F32)])
case("TILE", "i8-r3", [x(ints((1, 2, 2), I8)), k(i32(2, 1, 3))], [out(I8)])
case("TILE", "bool-i64-multiples", [x(bools((2,))), k(np.array([3], np.int64))], [out(BOOL)])
case("TILE", "i64-input-multiples", [x(ints((2, 1), I64)), x(i32(1, 4))], [out(I64)])
case("TILE", "c64", [x(c64((2,))), k(i32(2))], [out(C64)])
# LiteRT registers BROADCAST_TO from version 2 only (version 1 was the flex op's).
case("BROADCAST_TO", "f32", [x(f32((3, 1))), k(i32(2, 3, 4))], [out(F32)], version=2)
case("BROADCAST_TO", "i32-i64-shape", [x(ints((1, 4), I32)), k(np.array([3, 4], np.int64))], [out(I32)], version=2)
case("BROADCAST_TO", "i8q", [x(ints((2, 1), I8), Q8), k(i32(2, 3))], [out(I8, Q8)], version=2)
case("BROADCAST_TO", "bool-dynamic", [x(bools((1,))), x(i32(2, 2))], [out(BOOL)], version=2)
case("BROADCAST_TO", "c64", [x(c64((1, 2))), k(i32(3, 2))], [out(C64)], version=2)
case("BROADCAST_TO", "f32-version1", [x(f32((3, 1))), k(i32(2, 3, 4))], [out(F32)])
case("BROADCAST_ARGS", "i32", [x(i32(2, 1, 3)), x(i32(4, 1))], [out(I32)])
case("BROADCAST_ARGS", "i64", [x(np.array([1, 5], np.int64)), x(np.array([3, 1, 1], np.int64))], [out(I64)])
case("SHAPE", "f32-i32", [x(f32((2, 3, 1)))], [out(I32)], {"out_type": 2})
case("SHAPE", "i8-i64", [x(ints((4,), I8))], [out(I64)], {"out_type": 4})
case("SHAPE", "c64", [x(c64((2, 2)))], [out(I32)], {"out_type": 2})
case("RANK", "f32-r3", [x(f32((2, 3, 1)))], [out(I32)])
case("RANK", "i32-r0", [x(np.int32(4))], [out(I32)])
case("RANK", "bool-r1", [x(bools((3,)))], [out(I32)])
case("FILL", "f32", [x(i32(2, 3)), x(np.float32(1.5))], [out(F32)])
case("FILL", "i64-dims", [k(np.array([3], np.int64)), x(np.int32(7))], [out(I32)])
case("FILL", "bool", [k(i32(2, 2)), x(np.bool_(True))], [out(BOOL)])
case("FILL", "i8q", [k(i32(2, 2)), x(np.int8(-4), Q8)], [out(I8, Q8)])
case("FILL", "i64", [k(i32(2)), x(np.int64(2**40))], [out(I64)])
case("RANGE", "i32", [x(np.int32(2)), x(np.int32(11)), x(np.int32(3))], [out(I32)])
case("RANGE", "f32-neg-delta", [x(np.float32(1)), x(np.float32(-2)), x(np.float32(-0.5))], [out(F32)])
case("RANGE", "i64", [k(np.int64(0)), x(np.int64(5)), k(np.int64(1))], [out(I64)])
case("REVERSE_V2", "f32-axis1", [x(f32((2, 3, 2))), k(i32(1))], [out(F32)])
case("REVERSE_V2", "i8-axes", [x(ints((2, 3, 2), I8)), k(i32(0, 2))], [out(I8)])
case("REVERSE_V2", "bool-neg-axis", [x(bools((2, 3))), k(i32(-1))], [out(BOOL)])
case("REVERSE_V2", "i64-axis0", [x(ints((4,), I64)), k(i32(0))], [out(I64)])
case("REVERSE_V2", "i16", [x(ints((3, 2), I16)), k(i32(1))], [out(I16)])
case("REVERSE_SEQUENCE", "f32", [x(f32((3, 4, 2))), x(i32(1, 4, 2))], [out(F32)], {"seq_dim": 1, "batch_dim": 0})
case("REVERSE_SEQUENCE", "i32-batch1", [x(ints((4, 2, 3), I32)), k(np.array([3, 0], np.int64))], [out(I32)],
     {"seq_dim": 0, "batch_dim": 1})
case("DEPTH_TO_SPACE", "f32-b2", [x(f32((1, 2, 3, 8)))], [out(F32)], {"block_size": 2})
case("DEPTH_TO_SPACE", "i8q", [x(ints((2, 1, 1, 9), I8), Q8)], [out(I8, Q8)], {"block_size": 3})
case("DEPTH_TO_SPACE", "i32", [x(ints((1, 2, 2, 4), I32))], [out(I32)], {"block_size": 2})
case("DEPTH_TO_SPACE", "u8q", [x(ints((1, 1, 2, 4), U8), QU8)], [out(U8, QU8)], {"block_size": 2})
case("SPACE_TO_DEPTH", "f32-b2", [x(f32((1, 4, 6, 2)))], [out(F32)], {"block_size": 2})
case("SPACE_TO_DEPTH", "i8q", [x(ints((2, 3, 3, 1), I8), Q8)], [out(I8, Q8)], {"block_size": 3})
case("SPACE_TO_DEPTH", "i64", [x(ints((1, 2, 2, 1), I64))], [out(I64)], {"block_size": 2})
case("SPACE_TO_BATCH_ND", "f32-pad", [x(f32((1, 3, 4, 2))), k(i32(2, 2)), k(np.array([[1, 0], [0, 2]], np.int32))], [out(F32)])
case("SPACE_TO_BATCH_ND", "i8q-r3", [x(ints((2, 4, 1), I8), Q8), k(i32(2)), k(np.array([[0, 0]], np.int32))], [out(I8, Q8)])
case("SPACE_TO_BATCH_ND", "f32-r4-nopad", [x(f32((2, 2, 4, 1))), k(i32(1, 2)), k(np.zeros((2, 2), np.int32))], [out(F32)])
case("BATCH_TO_SPACE_ND", "f32-crop", [x(f32((4, 2, 3, 1))), k(i32(2, 2)), k(np.array([[1, 0], [0, 1]], np.int32))], [out(F32)])
case("BATCH_TO_SPACE_ND", "i8q-r3", [x(ints((4, 2, 2), I8), Q8), k(i32(2)), k(np.array([[0, 1]], np.int32))], [out(I8, Q8)])
case("BATCH_TO_SPACE_ND", "i32-r4", [x(ints((2, 1, 2, 2), I32)), k(i32(1, 2)), k(np.zeros((2, 2), np.int32))], [out(I32)])
PADS = np.array([[1, 0], [0, 2], [2, 1]], np.int32)
case("PAD", "f32", [x(f32((2, 3, 2))), k(PADS)], [out(F32)])
case("PAD", "i8q", [x(ints((2, 3, 2), I8), Q8), k(PADS)], [out(I8, Q8)])
case("PAD", "i32-i64-pads", [x(ints((2, 2), I32)), k(np.array([[0, 1], [1, 1]], np.int64))], [out(I32)])
case("PAD", "f32-r5", [x(f32((1, 2, 1, 2, 1))), k(np.array([[0, 0], [1, 0], [0, 1], [0, 0], [1, 1]], np.int32))],
     [out(F32)])
case("PAD", "i64-dynamic-pads", [x(ints((3,), I64)), x(np.array([[2, 1]], np.int32))], [out(I64)])
case("PAD", "c64", [x(c64((2,))), k(np.array([[1, 1]], np.int32))], [out(C64)])
case("PADV2", "f32-value", [x(f32((2, 3, 2))), k(PADS), k(np.float32(-3.5))], [out(F32)])
case("PADV2", "i8q-value", [x(ints((2, 3, 2), I8), Q8), k(PADS), k(np.int8(7), Q8)], [out(I8, Q8)])
case("PADV2", "u8q-value", [x(ints((2, 2), U8), QU8), k(np.array([[1, 1], [0, 1]], np.int32)), k(np.uint8(200), QU8)],
     [out(U8, QU8)])
case("PADV2", "i32-value", [x(ints((2, 2), I32)), k(np.array([[1, 1], [0, 1]], np.int32)), k(np.int32(-9))], [out(I32)])
for mode, name in ((0, "reflect"), (1, "symmetric")):
    case("MIRROR_PAD", f"f32-{name}", [x(f32((3, 4))), k(np.array([[1, 2], [2, 0]], np.int32))], [out(F32)], {"mode": mode})
    case("MIRROR_PAD", f"i8q-{name}", [x(ints((2, 3, 3), I8), Q8), k(np.array([[0, 1], [1, 1], [2, 1]], np.int32))],
         [out(I8, Q8)], {"mode": mode})
    case("MIRROR_PAD", f"i64-pads-{name}", [x(ints((4,), I32)), k(np.array([[2, 3]], np.int64))], [out(I32)], {"mode": mode})


# ============================================================================= gather, scatter, select

case("GATHER", "f32-axis0", [x(f32((5, 3))), x(i32(4, 0, 2, 2))], [out(F32)], {"axis": 0})
case("GATHER", "f32-axis1-r2-ids", [x(f32((2, 5, 3))), k(np.array([[1, 4], [0, 0]], np.int32))], [out(F32)], {"axis": 1})
case("GATHER", "i8q-i64-ids", [x(ints((4, 2), I8), Q8), k(np.array([3, 1], np.int64))], [out(I8, Q8)], {"axis": 0})
case("GATHER", "i32-batch-dims", [x(ints((2, 4, 3), I32)), k(np.array([[0, 3], [1, 1]], np.int32))], [out(I32)],
     {"axis": 1, "batch_dims": 1})
case("GATHER", "bool-axis-neg", [x(bools((3, 4))), k(i32(3, 0))], [out(BOOL)], {"axis": -1})
case("GATHER", "i64", [x(ints((5,), I64)), k(i32(4, 4, 0))], [out(I64)], {"axis": 0})
case("GATHER", "c64", [x(c64((4, 2))), k(i32(3, 0))], [out(C64)], {"axis": 0})
case("GATHER", "i16-ids", [x(f32((5, 2))), k(np.array([4, 1], np.int16))], [out(F32)], {"axis": 0})
case("GATHER_ND", "f32-slices", [x(f32((3, 4, 2))), x(np.array([[2], [0]], np.int32))], [out(F32)])
case("GATHER_ND", "f32-elements", [x(f32((3, 4))), k(np.array([[2, 3], [0, 1], [1, 1]], np.int32))], [out(F32)])
case("GATHER_ND", "i8-i64-ids", [x(ints((2, 3), I8)), k(np.array([[1, 2]], np.int64))], [out(I8)])
case("GATHER_ND", "i64-batch", [x(ints((2, 3, 2), I64)), k(np.array([[[0, 1]], [[1, 2]]], np.int32))], [out(I64)])
case("GATHER_ND", "i16-ids", [x(f32((3, 2))), k(np.array([[2], [1]], np.int16))], [out(F32)])
case("SCATTER_ND", "f32", [x(np.array([[1], [3], [1]], np.int32)), x(f32((3, 2))), k(i32(5, 2))], [out(F32)])
case("SCATTER_ND", "i32-elements", [k(np.array([[0, 1], [2, 0]], np.int32)), x(ints((2,), I32)), k(i32(3, 2))], [out(I32)])
case("SCATTER_ND", "i64-updates", [k(np.array([[0], [2]], np.int32)), x(ints((2, 2), I64)), k(i32(4, 2))], [out(I64)])
case("SCATTER_ND", "bool", [k(np.array([[1]], np.int32)), x(np.array([True])), k(i32(3))], [out(BOOL)])
case("EMBEDDING_LOOKUP", "f32", [x(i32(2, 0, 2)), x(f32((3, 4)))], [out(F32)])
case("EMBEDDING_LOOKUP", "f32-r3-table", [x(i32(1, 0)), k(f32((2, 2, 3)))], [out(F32)])
case("EMBEDDING_LOOKUP", "hybrid-i8-table", [x(i32(1, 0, 1)), k(ints((2, 4), I8), (0.1, 0))], [out(F32)])
case("EMBEDDING_LOOKUP", "i8q", [x(i32(1, 0)), x(ints((2, 4), I8), Q8)], [out(I8, Q8)])
case("ONE_HOT", "f32-axis-last", [x(i32(0, 3, -1, 2)), k(np.int32(4)), k(np.float32(2.5)), k(np.float32(-1))], [out(F32)],
     {"axis": -1})
case("ONE_HOT", "i32-axis0", [x(np.array([[1, 0], [2, 5]], np.int32)), k(np.int32(3)), k(np.int32(1)), k(np.int32(0))],
     [out(I32)], {"axis": 0})
case("ONE_HOT", "bool-i64-ids", [x(np.array([1, 0], np.int64)), k(np.int32(2)), k(np.bool_(True)), k(np.bool_(False))],
     [out(BOOL)], {"axis": -1})
case("ONE_HOT", "i8", [x(i32(2, 1)), k(np.int32(3)), k(np.int8(5)), k(np.int8(-5))], [out(I8)], {"axis": 1})
case("SELECT", "f32", [x(bools((2, 3))), x(f32((2, 3))), x(f32((2, 3), seed=1))], [out(F32)])
case("SELECT", "i32-rank1-cond", [x(bools((3,))), x(ints((3, 2), I32)), x(ints((3, 2), I32, seed=1))], [out(I32)])
case("SELECT", "i8q", [x(bools((4,))), x(ints((4,), I8), Q8), x(ints((4,), I8, seed=1), Q8)], [out(I8, Q8)])
case("SELECT", "bool", [x(bools((4,))), x(bools((4,), 1)), x(bools((4,), 2))], [out(BOOL)])
case("SELECT_V2", "f32-bcast", [x(bools((2, 1))), x(f32((1, 3))), x(f32((2, 3), seed=1))], [out(F32)])
case("SELECT_V2", "i64-scalar-cond", [x(np.bool_(False)), x(ints((3,), I64)), x(ints((3,), I64, seed=1))], [out(I64)])
case("SELECT_V2", "u8q-bcast", [x(bools((3, 1))), x(ints((1, 2), U8), QU8), x(ints((3, 2), U8, seed=1), QU8)], [out(U8, QU8)])
case("SELECT_V2", "i16-r4", [x(bools((2, 1, 2, 1))), x(ints((2, 2), I16)), x(ints((1, 2, 1, 2), I16, seed=1))], [out(I16)])
case("WHERE", "bool-r2", [x(np.array([[True, False, True], [False, True, True]]))], [out(I64)])
case("WHERE", "f32-r3", [x(np.array([[[0, 1.5]], [[-1, 0]]], np.float32))], [out(I64)])
case("WHERE", "i32-none", [x(np.zeros((3,), np.int32))], [out(I64)])
case("MATRIX_DIAG", "f32", [x(f32((2, 3)))], [out(F32)])
case("MATRIX_DIAG", "i32-r1", [x(ints((4,), I32))], [out(I32)])
case("MATRIX_DIAG", "i8q", [x(ints((2, 2), I8), Q8)], [out(I8, Q8)])
case("MATRIX_SET_DIAG", "f32-square", [x(f32((2, 3, 3))), x(f32((2, 3), seed=1))], [out(F32)])
case("MATRIX_SET_DIAG", "i32-wide", [x(ints((2, 4), I32)), x(ints((2,), I32, seed=1))], [out(I32)])
case("MATRIX_SET_DIAG", "u8-tall", [x(ints((4, 2), U8)), x(ints((2,), U8, seed=1))], [out(U8)])
case("DYNAMIC_UPDATE_SLICE", "f32", [x(f32((4, 5))), x(f32((2, 2), seed=1)), x(i32(1, 2))], [out(F32)])
case("DYNAMIC_UPDATE_SLICE", "i32-clamped", [x(ints((4, 3), I32)), x(ints((2, 2), I32, seed=1)), x(i32(3, -1))], [out(I32)])
case("DYNAMIC_UPDATE_SLICE", "i8q-i64-start", [x(ints((3, 3), I8), Q8), x(ints((1, 3), I8, seed=1), Q8),
                                               k(np.array([1, 0], np.int64))], [out(I8, Q8)])
case("DYNAMIC_UPDATE_SLICE", "bool", [x(bools((4,))), x(np.array([True, True])), k(i32(1))], [out(BOOL)])
case("SPARSE_TO_DENSE", "f32-1d", [k(i32(1, 4, 6)), k(i32(7)), x(f32((3,))), x(np.float32(-1))], [out(F32)])
case("SPARSE_TO_DENSE", "i32-2d", [k(np.array([[0, 1], [2, 0]], np.int32)), k(i32(3, 2)), x(ints((2,), I32)),
                                   k(np.int32(9))], [out(I32)])
case("SPARSE_TO_DENSE", "i64-scalar-value", [k(np.array([[1], [3]], np.int64)), k(np.array([5], np.int64)),
                                             x(np.int64(4)), k(np.int64(0))], [out(I64)])
case("UNIQUE", "f32-i32", [x(np.array([3, 1, 3, 2, 1, 3], np.float32))], [out(F32), out(I32)], {"idx_out_type": 2})
case("UNIQUE", "i32-i64", [x(np.array([5, 5, 4], np.int32))], [out(I32), out(I64)], {"idx_out_type": 4})
case("UNIQUE", "i8q", [x(np.array([1, -1, 1, 0], np.int8), Q8)], [out(I8, Q8), out(I32)], {"idx_out_type": 2})
case("UNIQUE", "i64", [x(np.array([9, 2, 2, 9, 9], np.int64))], [out(I64), out(I32)], {"idx_out_type": 2})
case("TOPK_V2", "f32", [x(f32((2, 6))), k(np.int32(3))], [out(F32), out(I32)])
case("TOPK_V2", "i32-ties", [x(np.array([[3, 1, 3, 2, 3]], np.int32)), k(np.int32(4))], [out(I32), out(I32)])
case("TOPK_V2", "i8q-r1", [x(ints((7,), I8), Q8), k(np.int32(2))], [out(I8, Q8), out(I32)])
case("TOPK_V2", "u8q-r3", [x(ints((2, 2, 5), U8), QU8), k(np.int32(5))], [out(U8, QU8), out(I32)])
case("TOPK_V2", "i64-k-input", [x(ints((3, 4), I64)), x(np.int32(2))], [out(I64), out(I32)])
case("TOPK_V2", "f32-i64-indices", [x(f32((4,))), k(np.int32(2))], [out(F32), out(I64)])
for op in ("ARG_MAX", "ARG_MIN"):
    case(op, "f32-axis1-i32", [x(f32((3, 4))), k(np.int32(1))], [out(I32)], {"output_type": 2})
    case(op, "f32-axis0-i64", [x(f32((3, 4, 2))), k(np.array([0], np.int64))], [out(I64)], {"output_type": 4})
    case(op, "i8q-axis-neg", [x(ints((2, 5), I8), Q8), k(np.int32(-1))], [out(I32)], {"output_type": 2})
    case(op, "u8-ties", [x(np.array([[4, 9, 9, 4]], np.uint8)), k(np.int32(1))], [out(I32)], {"output_type": 2})
    case(op, "i32", [x(ints((4, 3), I32)), k(np.int32(0))], [out(I64)], {"output_type": 4})
    case(op, "bool", [x(bools((2, 3))), k(np.int32(1))], [out(I32)], {"output_type": 2})
case("CUMSUM", "f32-axis1", [x(f32((2, 4))), k(np.int32(1))], [out(F32)], {"exclusive": False, "reverse": False})
case("CUMSUM", "f32-exclusive-reverse", [x(f32((3, 2))), k(np.int32(0))], [out(F32)], {"exclusive": True, "reverse": True})
case("CUMSUM", "i32-axis-neg", [x(ints((2, 5), I32, -9, 9)), k(np.int32(-1))], [out(I32)], {"exclusive": True})
case("CUMSUM", "i64-reverse", [x(ints((4,), I64, -9, 9)), k(np.int32(0))], [out(I64)], {"reverse": True})
case("BITCAST", "i32-to-i8", [x(ints((2, 3), I32))], [out(I8)])
case("BITCAST", "u8-to-f32", [x(np.frombuffer(f32((3,)).tobytes(), np.uint8).reshape(3, 4).copy())], [out(F32)])
case("BITCAST", "f32-to-i32", [x(f32((4,)))], [out(I32)])
case("BITCAST", "i16-to-u16", [x(ints((3,), I16))], [out(np.uint16)])
case("SEGMENT_SUM", "f32", [x(f32((6, 2))), x(i32(0, 0, 1, 2, 2, 3))], [out(F32)])
case("SEGMENT_SUM", "i32-const-ids", [x(ints((4,), I32, -9, 9)), k(i32(0, 1, 1, 1))], [out(I32)])
for op in ("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN", "UNSORTED_SEGMENT_PROD"):
    case(op, "f32", [x(f32((5, 2))), x(i32(2, 0, 0, 2, 1)), k(np.int32(4))], [out(F32)])
    case(op, "i32-empty-segment", [x(ints((4, 3), I32, -9, 9)), k(i32(3, 0, 3, 1)), k(np.int32(5))], [out(I32)])
    case(op, "f32-r2-ids", [x(f32((2, 2, 3))), k(np.array([[1, 0], [1, 1]], np.int32)), k(np.int32(2))], [out(F32)])
    case(op, "i32-ids-full-shape-negative", [x(ints((2, 3), I32, -9, 9)), x(np.array([[0, -1, 2], [2, 0, 0]], np.int32)),
         k(i32(4))], [out(I32)])
case("BUCKETIZE", "f32-boundaries", [x(np.array([-1, -1.5, 0, 0.25, 0.5, 2, 3, -0.0], np.float32))], [out(I32)],
     {"boundaries": [-1.0, 0.0, 0.5, 2.0]})
case("BUCKETIZE", "i32", [x(ints((2, 3), I32, -5, 5))], [out(I32)], {"boundaries": [-2.0, 1.0, 3.0]})
case("BUCKETIZE", "i64", [x(ints((4,), I64, -5, 5))], [out(I32)], {"boundaries": [0.0]})
case("BUCKETIZE", "f32-no-boundaries", [x(f32((3,)))], [out(I32)], {"boundaries": []})


# ============================================================================= reductions

REDUCERS = {"MEAN": (F32, I8, U8, I16), "SUM": (F32, I8, U8, I16), "REDUCE_MAX": (F32, I8, U8, I16),
            "REDUCE_MIN": (F32, I8, U8, I16), "REDUCE_PROD": (F32, I8, I16)}
for op, dts in REDUCERS.items():
    case(op, "f32-axis1", [x(f32((2, 3, 4))), k(i32(1))], [out(F32)], {"keep_dims": False})
    case(op, "f32-axes-keep", [x(f32((2, 3, 4))), k(i32(0, 2))], [out(F32)], {"keep_dims": True})
    case(op, "f32-all-neg-axes", [x(f32((2, 3))), k(i32(-1, -2))], [out(F32)], {"keep_dims": False})
    case(op, "f32-r4-hw", [x(f32((1, 3, 3, 2))), k(i32(1, 2))], [out(F32)], {"keep_dims": True})
    case(op, "i32", [x(ints((3, 4), I32, -5, 5)), k(i32(1))], [out(I32)], {"keep_dims": False})
    case(op, "i64-dup-axes", [x(ints((3, 4), I64, -5, 5)), k(i32(0, 0))], [out(I64)], {"keep_dims": False})
    for dt in dts[1:]:
        q = QUANT[dt]
        qo = q if op in ("REDUCE_MAX", "REDUCE_MIN") else (q[0] * 2, q[1]) if op != "REDUCE_PROD" else (q[0] * 4, 0)
        case(op, f"{dt.name}q", [x(quantized(dt, q, (2, 3, 4), -1, 1, op), q), k(i32(1))], [out(dt, qo)], {"keep_dims": False})
        case(op, f"{dt.name}q-keep-hw", [x(quantized(dt, q, (1, 2, 3, 2), -1, 1, op), q), k(i32(1, 2))], [out(dt, qo)],
             {"keep_dims": True})
# Quantized SUM and REDUCE_PROD over axes apart (LiteRT's REDUCE_PROD rescales after each product,
# in the input's order), with an output zero point of their own; LiteRT has no uint8 REDUCE_PROD.
for dt, q, qo in ((I8, (0.02, -5), (0.03, 4)), (I16, (1 / 8192, 0), (1 / 1024, 0))):
    case("REDUCE_PROD", f"{dt.name}q-axes-apart", [x(quantized(dt, q, (2, 5, 2), -2, 2, "prod"), q), k(i32(2, 0))],
         [out(dt, qo)], {"keep_dims": False})
for dt, q, qo in ((I8, (0.02, -5), (0.15, 9)), (U8, (0.03, 100), (0.2, 30)), (I16, (1 / 8192, 0), (1 / 1024, 0))):
    case("SUM", f"{dt.name}q-axes-apart", [x(quantized(dt, q, (4, 3, 5), -1, 1.5, "sum"), q), k(i32(0, -1))],
         [out(dt, qo)], {"keep_dims": True})
case("REDUCE_PROD", "uint8q", [x(quantized(U8, QU8, (2, 3), -1, 1), QU8), k(i32(1))], [out(U8, QU8)],
     {"keep_dims": False})
for op in ("REDUCE_ANY", "REDUCE_ALL"):
    case(op, "axis1", [x(bools((3, 4))), k(i32(1))], [out(BOOL)], {"keep_dims": False})
    case(op, "all-keep", [x(bools((2, 2, 3))), k(i32(0, 1, 2))], [out(BOOL)], {"keep_dims": True})
    case(op, "r1", [x(np.array([True, True, False])), k(i32(0))], [out(BOOL)], {"keep_dims": False})


# ============================================================================= convolutions, dense, pooling


def bias_q(in_q: tuple, w_scales: Any, dtype: Any = np.int32, n: int = 1) -> tuple:
    scales = np.asarray(w_scales, np.float64) * in_q[0] * np.ones(n)
    return (scales.astype(np.float32), np.zeros(len(scales), np.int64), 0)


def conv_forms(op: str, x_shape: tuple, w_shape: tuple, out_c: int, opts: dict, forms: tuple = ("f32", "int8q", "uint8q",
               "int16q", "hybrid"), channel_axis: int = 0, **kw: Any) -> None:
    """``op`` on float32 and quantized int8 (per-channel weights), uint8 and int16 inputs, and
    hybrid (float input, int8 weights)."""
    tag = (op, x_shape, w_shape, repr(opts))
    if "f32" in forms:
        case(op, f"f32-{kw.get('form', '')}".rstrip("-"), [x(f32(x_shape, seed=tag)), k(f32(w_shape, -0.5, 0.5, tag)),
             k(f32((out_c,), seed=tag))], [out(F32)], opts)
    wscale = np.linspace(0.004, 0.01, out_c).astype(np.float32)
    if "int8q" in forms:
        xq = (0.05, -3)
        case(op, f"int8q-{kw.get('form', '')}".rstrip("-"), [x(quantized(I8, xq, x_shape, seed=tag), xq),
             k(ints(w_shape, I8, -127, 127, tag), (wscale, np.zeros(out_c, np.int64), channel_axis)),
             k(ints((out_c,), I32, -500, 500, tag), bias_q(xq, wscale))], [out(I8, (0.08, 5))], opts)
    if "uint8q" in forms:
        xq = (0.05, 120)
        case(op, f"uint8q-{kw.get('form', '')}".rstrip("-"), [x(quantized(U8, xq, x_shape, seed=tag), xq),
             k(ints(w_shape, U8, 0, 255, tag), (0.006, 130)), k(ints((out_c,), I32, -500, 500, tag), (0.05 * 0.006, 0))],
             [out(U8, (0.1, 128))], opts)
    if "int16q" in forms:
        xq = (2 / 32768, 0)
        case(op, f"int16q-{kw.get('form', '')}".rstrip("-"), [x(quantized(I16, xq, x_shape, seed=tag), xq),
             k(ints(w_shape, I8, -127, 127, tag), (wscale, np.zeros(out_c, np.int64), channel_axis)),
             k(ints((out_c,), I64, -5000, 5000, tag), bias_q(xq, wscale))], [out(I16, (8 / 32768, 0))], opts)
    if "hybrid" in forms:
        case(op, f"hybrid-{kw.get('form', '')}".rstrip("-"), [x(f32(x_shape, seed=tag)),
             k(ints(w_shape, I8, -127, 127, tag), (wscale, np.zeros(out_c, np.int64), channel_axis)),
             k(f32((out_c,), seed=tag))], [out(F32)], opts, rtol=2e-4, atol=2e-4)
        # hybrid kernels quantize the float input to int8 on the fly: the rounding of that
        # step is LiteRT's own and numlite's matches it, but the float sums of int products
        # scaled back differ in the last bits (2e-4 on outputs of order 1)


conv_forms("CONV_2D", (1, 5, 5, 2), (3, 3, 3, 2), 3, {"padding": 0, "stride_w": 1, "stride_h": 1})
conv_forms("CONV_2D", (2, 6, 5, 3), (4, 2, 3, 3), 4, {"padding": 1, "stride_w": 2, "stride_h": 2,
           "fused_activation_function": 3}, form="valid-s2-relu6", forms=("f32", "int8q", "hybrid"))
conv_forms("CONV_2D", (1, 7, 7, 1), (2, 3, 3, 1), 2, {"padding": 0, "stride_w": 1, "stride_h": 1,
           "dilation_w_factor": 2, "dilation_h_factor": 2}, form="same-dilated", forms=("f32", "int8q"))
case("CONV_2D", "f32-grouped", [x(f32((1, 4, 4, 4))), k(f32((4, 2, 2, 2), -0.5, 0.5)), k(f32((4,)))], [out(F32)],
     {"padding": 1, "stride_w": 1, "stride_h": 1})
case("CONV_2D", "f32-no-bias", [x(f32((1, 4, 4, 2))), k(f32((3, 1, 1, 2), -0.5, 0.5)), None], [out(F32)],
     {"padding": 1, "stride_w": 1, "stride_h": 1})
conv_forms("DEPTHWISE_CONV_2D", (1, 5, 5, 2), (1, 3, 3, 4), 4, {"padding": 0, "stride_w": 1, "stride_h": 1,
           "depth_multiplier": 2}, channel_axis=3)
conv_forms("DEPTHWISE_CONV_2D", (2, 6, 6, 3), (1, 2, 2, 3), 3, {"padding": 1, "stride_w": 2, "stride_h": 1,
           "depth_multiplier": 1, "fused_activation_function": 1, "dilation_w_factor": 2}, channel_axis=3,
           form="valid-s2-dilated-relu", forms=("f32", "int8q", "hybrid"))
conv_forms("FULLY_CONNECTED", (2, 6), (4, 6), 4, {})
conv_forms("FULLY_CONNECTED", (2, 3, 6), (3, 6), 3, {"keep_num_dims": True, "fused_activation_function": 1},
           form="keep-dims-relu", forms=("f32", "int8q", "hybrid"))
case("FULLY_CONNECTED", "f32-no-bias-r4", [x(f32((2, 1, 2, 3))), k(f32((5, 6), -0.5, 0.5)), None], [out(F32)])
case("FULLY_CONNECTED", "f32-weights-input", [x(f32((3, 4))), x(f32((2, 4), seed=1)), x(f32((2,), seed=2))], [out(F32)])
case("FULLY_CONNECTED", "int8q-per-tensor", [x(quantized(I8, Q8, (2, 4)), Q8), k(ints((3, 4), I8, -127, 127), (0.01, 0)),
     k(ints((3,), I32, -99, 99), (0.0005, 0))], [out(I8, (0.05, 0))])
case("TRANSPOSE_CONV", "f32-same-s2", [k(i32(1, 6, 6, 2)), k(f32((2, 3, 3, 3), -0.5, 0.5)), x(f32((1, 3, 3, 3))),
     k(f32((2,)))], [out(F32)], {"padding": 0, "stride_w": 2, "stride_h": 2})
case("TRANSPOSE_CONV", "f32-valid-no-bias", [k(i32(2, 5, 4, 3)), k(f32((3, 2, 2, 1), -0.5, 0.5)), x(f32((2, 4, 3, 1)))],
     [out(F32)], {"padding": 1, "stride_w": 1, "stride_h": 1})
case("TRANSPOSE_CONV", "f32-relu", [k(i32(1, 4, 4, 1)), k(f32((1, 2, 2, 2), -0.5, 0.5)), x(f32((1, 2, 2, 2))), k(f32((1,)))],
     [out(F32)], {"padding": 1, "stride_w": 2, "stride_h": 2, "fused_activation_function": 1})
TCW = np.linspace(0.004, 0.01, 2).astype(np.float32)
case("TRANSPOSE_CONV", "int8q", [k(i32(1, 6, 6, 2)), k(ints((2, 3, 3, 3), I8, -127, 127), (TCW, np.zeros(2, np.int64), 0)),
     x(quantized(I8, (0.05, -3), (1, 3, 3, 3)), (0.05, -3)), k(ints((2,), I32, -99, 99), bias_q((0.05, -3), TCW))],
     [out(I8, (0.06, 2))], {"padding": 0, "stride_w": 2, "stride_h": 2})
case("TRANSPOSE_CONV", "uint8q", [k(i32(1, 4, 4, 1)), k(ints((1, 2, 2, 2), U8), (0.006, 130)),
     x(quantized(U8, QU8, (1, 2, 2, 2)), QU8)], [out(U8, (0.05, 128))], {"padding": 1, "stride_w": 2, "stride_h": 2})
case("TRANSPOSE_CONV", "int16q", [k(i32(1, 4, 4, 2)), k(ints((2, 2, 2, 1), I8, -127, 127), (TCW, np.zeros(2, np.int64), 0)),
     x(quantized(I16, (2 / 32768, 0), (1, 2, 2, 1)), (2 / 32768, 0))], [out(I16, (4 / 32768, 0))],
     {"padding": 1, "stride_w": 2, "stride_h": 2})
case("BATCH_MATMUL", "f32", [x(f32((2, 3, 4))), x(f32((2, 4, 5), seed=1))], [out(F32)])
case("BATCH_MATMUL", "f32-adj-bcast", [x(f32((2, 1, 4, 3))), x(f32((3, 5, 4), seed=1))], [out(F32)], {"adj_x": True, "adj_y": True})
case("BATCH_MATMUL", "f32-const-rhs-r2", [x(f32((3, 4))), k(f32((4, 2), seed=1))], [out(F32)])
case("BATCH_MATMUL", "int8q", [x(quantized(I8, Q8, (2, 3, 4)), Q8), x(quantized(I8, (0.04, 0), (2, 4, 2), seed=1), (0.04, 0))],
     [out(I8, (0.1, -2))])
case("BATCH_MATMUL", "int16q", [x(quantized(I16, (2 / 32768, 0), (1, 3, 4)), (2 / 32768, 0)),
     x(quantized(I16, (2 / 32768, 0), (1, 4, 2), seed=1), (2 / 32768, 0))], [out(I16, (8 / 32768, 0))])
case("BATCH_MATMUL", "hybrid", [x(f32((2, 3, 4))), k(ints((4, 5), I8, -127, 127), (0.01, 0))], [out(F32)],
     {"asymmetric_quantize_inputs": False}, rtol=2e-4, atol=2e-4)  # as hybrid FULLY_CONNECTED
case("BATCH_MATMUL", "i32", [x(ints((2, 3), I32, -9, 9)), x(ints((3, 2), I32, -9, 9, 1))], [out(I32)])
case("CONV_3D", "f32-same", [x(f32((1, 3, 4, 4, 2))), k(f32((2, 2, 2, 2, 3), -0.5, 0.5)), k(f32((3,)))], [out(F32)],
     {"padding": 0, "stride_d": 1, "stride_w": 1, "stride_h": 1})
case("CONV_3D", "f32-valid-s2-dilated-relu", [x(f32((2, 5, 5, 4, 1))), k(f32((2, 2, 2, 1, 2), -0.5, 0.5)), None], [out(F32)],
     {"padding": 1, "stride_d": 2, "stride_w": 1, "stride_h": 2, "dilation_d_factor": 2, "fused_activation_function": 1})
case("CONV_3D_TRANSPOSE", "f32-same-s2", [k(i32(1, 4, 4, 6, 2)), k(f32((2, 2, 3, 2, 3), -0.5, 0.5)), x(f32((1, 2, 2, 3, 3))),
     k(f32((2,)))], [out(F32)], {"padding": 0, "stride_d": 2, "stride_w": 2, "stride_h": 2})
case("CONV_3D_TRANSPOSE", "f32-valid", [k(i32(1, 3, 4, 3, 1)), k(f32((2, 2, 2, 1, 2), -0.5, 0.5)), x(f32((1, 2, 3, 2, 2)))],
     [out(F32)], {"padding": 1, "stride_d": 1, "stride_w": 1, "stride_h": 1})
for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
    case(op, "f32-same-2x2", [x(f32((1, 5, 5, 2)))], [out(F32)], {"padding": 0, "stride_w": 2, "stride_h": 2,
         "filter_width": 2, "filter_height": 2})
    case(op, "f32-valid-3x2-relu6", [x(f32((2, 6, 5, 3), -2, 8))], [out(F32)], {"padding": 1, "stride_w": 1, "stride_h": 2,
         "filter_width": 2, "filter_height": 3, "fused_activation_function": 3})
    if op == "L2_POOL_2D":
        continue
    for dt in (I8, U8, I16):
        q = QUANT[dt]
        case(op, f"{dt.name}q-same", [x(quantized(dt, q, (1, 5, 4, 2), seed=op), q)], [out(dt, q)],
             {"padding": 0, "stride_w": 2, "stride_h": 2, "filter_width": 3, "filter_height": 3})
case("L2_NORMALIZATION", "f32-r2", [x(f32((3, 4)))], [out(F32)])
case("L2_NORMALIZATION", "f32-r4", [x(f32((1, 2, 2, 3)))], [out(F32)])
case("L2_NORMALIZATION", "int8q", [x(quantized(I8, Q8, (2, 5)), Q8)], [out(I8, (1 / 128, 0))])
case("L2_NORMALIZATION", "uint8q", [x(quantized(U8, QU8, (2, 5)), QU8)], [out(U8, (1 / 128, 128))])
case("LOCAL_RESPONSE_NORMALIZATION", "f32", [x(f32((1, 2, 2, 6)))], [out(F32)], {"radius": 2, "bias": 1.0, "alpha": 0.5,
     "beta": 0.75})
case("LOCAL_RESPONSE_NORMALIZATION", "f32-r1", [x(f32((1, 1, 3, 4)))], [out(F32)], {"radius": 1, "bias": 2.0, "alpha": 1.0,
     "beta": 0.5})
for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
    case(op, "f32-up", [x(f32((1, 2, 3, 2))), k(i32(4, 5))], [out(F32)])
    case(op, "f32-align-corners", [x(f32((2, 3, 3, 1))), k(i32(5, 2))], [out(F32)], {"align_corners": True})
    case(op, "f32-half-pixel", [x(f32((1, 3, 2, 2))), k(i32(2, 5))], [out(F32)], {"half_pixel_centers": True})
    case(op, "int8q-up", [x(ints((1, 2, 2, 3), I8), Q8), k(i32(3, 4))], [out(I8, Q8)])
    case(op, "uint8q-half-pixel", [x(ints((1, 3, 3, 1), U8), QU8), k(i32(5, 4))], [out(U8, QU8)], {"half_pixel_centers": True})
    case(op, "int16q", [x(ints((1, 2, 2, 1), I16), Q16), k(i32(3, 3))], [out(I16, Q16)])
    case(op, "f32-size-input", [x(f32((1, 2, 2, 1))), x(i32(3, 1))], [out(F32)])


# ============================================================================= quantization

case("QUANTIZE", "f32-int8", [x(f32((2, 5)))], [out(I8, Q8)])
case("QUANTIZE", "f32-uint8", [x(f32((2, 5)))], [out(U8, QU8)])
case("QUANTIZE", "f32-int16", [x(f32((2, 5)))], [out(I16, Q16)])
case("QUANTIZE", "int8-requantize", [x(ints((2, 5), I8), Q8)], [out(I8, (0.07, -10))])
case("QUANTIZE", "uint8-int8", [x(ints((2, 5), U8), QU8)], [out(I8, (0.05, 0))])
case("QUANTIZE", "int16-int8", [x(ints((2, 5), I16), (0.001, 0))], [out(I8, (0.03, 1))])
case("QUANTIZE", "int16-int16", [x(ints((2, 5), I16), (0.001, 0))], [out(I16, (0.0007, 0))])
case("QUANTIZE", "f32-int8-per-channel", [x(f32((2, 3)))], [out(I8, ([0.01, 0.02, 0.05], [0, 0, 0], 1))])
case("QUANTIZE", "f32-uint8-per-channel-dim0", [x(f32((2, 3, 2), -3, 3))], [out(U8, ([0.02, 0.03], [120, 128], 0))])
case("QUANTIZE", "f32-int16-per-channel-dim2", [x(f32((2, 3, 2)))], [out(I16, ([1 / 4096, 1 / 20000], [0, 0], 2))])
case("DEQUANTIZE", "int8", [x(ints((2, 5), I8), Q8)], [out(F32)])
case("DEQUANTIZE", "uint8", [x(ints((2, 5), U8), QU8)], [out(F32)])
case("DEQUANTIZE", "int16", [x(ints((2, 5), I16), (0.001, 0))], [out(F32)])
case("DEQUANTIZE", "f16", [x(f32((2, 3)).astype(np.float16))], [out(F32)])
case("DEQUANTIZE", "int8-per-channel-const", [k(ints((2, 3), I8), ([0.1, 0.2], [0, 0], 0))], [out(F32)])
case("FAKE_QUANT", "f32-8bit", [x(f32((2, 5), -3, 3))], [out(F32)], {"min": -1.0, "max": 2.0, "num_bits": 8})
case("FAKE_QUANT", "f32-4bit-narrow", [x(f32((3, 4), -3, 3))], [out(F32)], {"min": -2.0, "max": 1.5, "num_bits": 4,
     "narrow_range": True})
case("FAKE_QUANT", "f32-r0", [x(np.float32(0.7))], [out(F32)], {"min": 0.0, "max": 1.0, "num_bits": 3})


# ============================================================================= recurrent


def rnn_weights(tag: Any, n_in: int, units: int) -> list[In]:
    return [k(f32((units, n_in), -0.5, 0.5, (tag, 1))), k(f32((units, units), -0.5, 0.5, (tag, 2))),
            k(f32((units,), -0.5, 0.5, (tag, 3)))]


case("RNN", "f32-tanh", [x(f32((2, 3))), *rnn_weights("rnn", 3, 4), v(np.zeros((2, 4), np.float32))], [out(F32)],
     {"fused_activation_function": 4})
case("RNN", "f32-relu", [x(f32((1, 2))), *rnn_weights("rnn2", 2, 3), v(np.zeros((1, 3), np.float32))], [out(F32)],
     {"fused_activation_function": 1})
case("RNN", "hybrid", [x(f32((2, 3))), k(ints((4, 3), I8, -127, 127), (0.005, 0)), k(ints((4, 4), I8, -127, 127, 1), (0.004, 0)),
     k(f32((4,), -0.5, 0.5)), v(np.zeros((2, 4), np.float32))], [out(F32)], {"fused_activation_function": 4})
case("RNN", "hybrid-asymmetric-relu", [x(f32((3, 5), seed=4)), k(ints((4, 5), I8, -127, 127, 2), (0.01, 0)),
     k(ints((4, 4), I8, -127, 127, 3), (0.02, 0)), k(f32((4,), -0.5, 0.5, 5)), v(np.zeros((3, 4), np.float32))], [out(F32)],
     {"fused_activation_function": 1, "asymmetric_quantize_inputs": True})
case("UNIDIRECTIONAL_SEQUENCE_RNN", "f32-time-major", [x(f32((3, 2, 3))), *rnn_weights("urnn", 3, 4),
     v(np.zeros((2, 4), np.float32))], [out(F32)], {"time_major": True, "fused_activation_function": 4})
case("UNIDIRECTIONAL_SEQUENCE_RNN", "f32-batch-major-relu", [x(f32((2, 4, 3))), *rnn_weights("urnn2", 3, 2),
     v(np.zeros((2, 2), np.float32))], [out(F32)], {"time_major": False, "fused_activation_function": 1})
BIRNN = [x(f32((3, 2, 3))), *rnn_weights("bfw", 3, 4), v(np.zeros((2, 4), np.float32)), *rnn_weights("bbw", 3, 4),
         v(np.zeros((2, 4), np.float32)), None, None, None]
case("BIDIRECTIONAL_SEQUENCE_RNN", "f32-time-major", BIRNN, [out(F32), out(F32)],
     {"time_major": True, "fused_activation_function": 4, "merge_outputs": False})
case("BIDIRECTIONAL_SEQUENCE_RNN", "f32-merged", [x(f32((2, 3, 3))), *BIRNN[1:]], [out(F32)],
     {"time_major": False, "fused_activation_function": 4, "merge_outputs": True})
# The aux input without aux weights is the backward direction's input (time-major: LiteRT's
# batch-major loop reads the main input there instead).
case("BIDIRECTIONAL_SEQUENCE_RNN", "f32-time-major-aux-backward", [*BIRNN[:9], x(f32((3, 2, 3), seed=9)), None, None],
     [out(F32), out(F32)], {"time_major": True, "fused_activation_function": 1, "merge_outputs": False})


def lstm_weights(tag: Any, n_in: int, cells: int, peephole: bool = False, cifg: bool = False) -> list[In | None]:
    """input-to-gate weights (i, f, c, o), recurrent ones, peepholes, gate biases, projection."""
    w = [k(f32((cells, n_in), -0.5, 0.5, (tag, g))) for g in "ifco"]
    r = [k(f32((cells, cells), -0.5, 0.5, (tag, "r", g))) for g in "ifco"]
    p = [k(f32((cells,), -0.5, 0.5, (tag, "p", g))) for g in "ifo"] if peephole else [None] * 3
    b = [k(f32((cells,), -0.5, 0.5, (tag, "b", g))) for g in "ifco"]
    if cifg:
        w[0] = r[0] = b[0] = p[0] = None
    return [*w, *r, *p, *b, None, None]


def lstm(tag: Any, x_shape: tuple, cells: int, batch: int, **kw: Any) -> list[In | None]:
    return [x(f32(x_shape, seed=tag)), *lstm_weights(tag, x_shape[-1], cells, **kw), v(np.zeros((batch, cells), np.float32)),
            v(np.zeros((batch, cells), np.float32)), None, None, None, None]


case("LSTM", "f32", lstm("lstm", (2, 3), 4, 2), [out(F32)], {"fused_activation_function": 4})
case("LSTM", "f32-peephole-cifg-clip", lstm("lstm2", (1, 2), 3, 1, peephole=True, cifg=True), [out(F32)],
     {"fused_activation_function": 4, "cell_clip": 0.5})
case("UNIDIRECTIONAL_SEQUENCE_LSTM", "f32-time-major", lstm("ulstm", (3, 2, 3), 4, 2), [out(F32)],
     {"fused_activation_function": 4, "time_major": True})
case("UNIDIRECTIONAL_SEQUENCE_LSTM", "f32-batch-major-peephole", lstm("ulstm2", (2, 3, 2), 3, 2, peephole=True), [out(F32)],
     {"fused_activation_function": 4, "time_major": False})
BILSTM = [x(f32((3, 2, 3))), *lstm_weights("bl-fw", 3, 4), *lstm_weights("bl-bw", 3, 4)] + \
    [v(np.zeros((2, 4), np.float32)) for _ in range(4)] + [None] * 9
case("BIDIRECTIONAL_SEQUENCE_LSTM", "f32-time-major", BILSTM, [out(F32), out(F32)],
     {"fused_activation_function": 4, "time_major": True, "merge_outputs": False})
case("BIDIRECTIONAL_SEQUENCE_LSTM", "f32-merged", BILSTM, [out(F32)],
     {"fused_activation_function": 4, "time_major": True, "merge_outputs": True})
# Batch-major with two outputs (LiteRT's batch-major merged output is not a reference: its second
# batch row comes out saturated).
case("BIDIRECTIONAL_SEQUENCE_LSTM", "f32-batch-major-peephole",
     [x(f32((2, 3, 3), seed=8)), *lstm_weights("bl-fw2", 3, 4, peephole=True), *lstm_weights("bl-bw2", 3, 4, peephole=True)]
     + [v(np.zeros((2, 4), np.float32)) for _ in range(4)] + [None] * 9, [out(F32), out(F32)],
     {"fused_activation_function": 4, "time_major": False, "merge_outputs": False})
# CIFG (no input gate: the forward width is read from another weight) with a projection, merged.
BILSTM_CIFG = [x(f32((3, 2, 3), seed=10)), *lstm_weights("bl-fw3", 3, 4, cifg=True)[:-2], k(f32((4, 4), -0.5, 0.5, 11)), None,
               *lstm_weights("bl-bw3", 3, 4, cifg=True)[:-2], k(f32((4, 4), -0.5, 0.5, 12)), None,
               *[v(np.zeros((2, 4), np.float32)) for _ in range(4)], *[None] * 9]
case("BIDIRECTIONAL_SEQUENCE_LSTM", "f32-cifg-projection-merged", BILSTM_CIFG, [out(F32)],
     {"fused_activation_function": 4, "time_major": True, "merge_outputs": True})
case("SVDF", "f32-rank1", [x(f32((2, 3))), k(f32((4, 3), -0.5, 0.5, 1)), k(f32((4, 5), -0.5, 0.5, 2)), k(f32((4,), seed=3)),
     v(np.zeros((2, 20), np.float32))], [out(F32)], {"rank": 1, "fused_activation_function": 0})
case("SVDF", "f32-rank2-relu-no-bias", [x(f32((1, 4))), k(f32((6, 4), -0.5, 0.5, 1)), k(f32((6, 3), -0.5, 0.5, 2)), None,
     v(np.zeros((1, 18), np.float32))], [out(F32)], {"rank": 2, "fused_activation_function": 1})
case("SVDF", "hybrid", [x(f32((2, 3))), k(ints((4, 3), I8, -127, 127), (0.005, 0)), k(ints((4, 5), I8, -127, 127, 2), (0.004, 0)),
     k(f32((4,), seed=3)), v(np.zeros((2, 20), np.float32))], [out(F32)], {"rank": 1, "fused_activation_function": 0})
case("SVDF", "hybrid-asymmetric-rank2-relu6", [x(f32((3, 4), seed=4)), k(ints((4, 4), I8, -127, 127, 5), (0.01, 0)),
     k(ints((4, 2), I8, -127, 127, 6), (0.02, 0)), k(f32((2,), seed=7)), v(np.zeros((3, 8), np.float32))], [out(F32)],
     {"rank": 2, "fused_activation_function": 3, "asymmetric_quantize_inputs": True})


# ============================================================================= control flow, variables, tables

def _if_model(cond: bool) -> tuple[bytes, list[np.ndarray]]:
    main, then, other = Graph(), Graph("then"), Graph("else")
    c, a, b = main.add(x(np.bool_(cond))), main.add(x(f32((2, 3)))), main.add(x(f32((2, 3), seed=1)))
    o = main.add(out(F32))
    main.op("IF", [c, a, b], [o], {"then_subgraph_index": 1, "else_subgraph_index": 2})
    main.output(o)
    for g, op in ((then, "ADD"), (other, "MUL")):
        p, q, r = g.add(out(F32, shape=(2, 3))), g.add(out(F32, shape=(2, 3))), g.add(out(F32, shape=(2, 3)))
        g.sg.inputs = [p, q]
        g.op(op, [p, q], [r], {"fused_activation_function": 0})
        g.output(r)
    return model(main, then, other)


def _while_model() -> tuple[bytes, list[np.ndarray]]:
    """i, acc -> (i + 1, acc * 1.5) while i < limit."""
    main, cond, body = Graph(), Graph("cond"), Graph("body")
    i, acc = main.add(x(np.int32(0))), main.add(x(f32((3,))))
    oi, oacc = main.add(out(I32)), main.add(out(F32))
    main.op("WHILE", [i, acc], [oi, oacc], {"cond_subgraph_index": 1, "body_subgraph_index": 2})
    main.output(oi, oacc)
    ci, cacc, limit, res = cond.add(out(I32)), cond.add(out(F32, shape=(3,))), cond.add(k(np.int32(4))), cond.add(out(BOOL))
    cond.sg.inputs = [ci, cacc]
    cond.op("LESS", [ci, limit], [res])
    cond.output(res)
    bi, bacc, one, scale = body.add(out(I32)), body.add(out(F32, shape=(3,))), body.add(k(np.int32(1))), body.add(k(np.float32(1.5)))
    ni, nacc = body.add(out(I32)), body.add(out(F32, shape=(3,)))
    body.sg.inputs = [bi, bacc]
    body.op("ADD", [bi, one], [ni], {"fused_activation_function": 0})
    body.op("MUL", [bacc, scale], [nacc], {"fused_activation_function": 0})
    body.output(ni, nacc)
    return model(main, cond, body)


def _variable_model(call_once: bool) -> tuple[bytes, list[np.ndarray]]:
    """VAR_HANDLE, ASSIGN_VARIABLE of the input (or, with CALL_ONCE, of a constant in an init
    subgraph run once), READ_VARIABLE."""
    main = Graph()
    graphs = [main]
    value = main.add(x(f32((2, 3))))
    handle = main.add(out(np.int32, type="RESOURCE"))
    main.op("VAR_HANDLE", [], [handle], {"container": "", "shared_name": "v"})
    if call_once:
        init = Graph("init")
        h, c = init.add(out(np.int32, type="RESOURCE")), init.add(k(f32((2, 3), seed=9)))
        init.op("VAR_HANDLE", [], [h], {"container": "", "shared_name": "v"})
        init.op("ASSIGN_VARIABLE", [h, c], [])
        main.op("CALL_ONCE", [], [], {"init_subgraph_index": 1})
        graphs.append(init)
    else:
        main.op("ASSIGN_VARIABLE", [handle, value], [])
    read, total = main.add(out(F32)), main.add(out(F32))
    main.op("READ_VARIABLE", [handle], [read])
    main.op("ADD", [read, value], [total], {"fused_activation_function": 0})
    main.output(total)
    return model(*graphs)


def _table_model(key_string: bool) -> tuple[bytes, list[np.ndarray]]:
    """HASHTABLE, HASHTABLE_IMPORT of constant keys and values, HASHTABLE_FIND of the input
    keys (some missing), HASHTABLE_SIZE."""
    g = Graph()
    words = np.array([b"a", b"bb", b"ccc", b"d"], object)
    numbers = np.array([7, -1, 30, 4], np.int64)
    keys, values = (words, numbers) if key_string else (numbers, words)
    query = np.array([b"ccc", b"zz", b"a"], object) if key_string else np.array([30, 5, 7, -1], np.int64)
    default = np.array([-9], np.int64) if key_string else np.array([b"?"], object)
    handle, q = g.add(out(np.int32, type="RESOURCE")), g.add(x(query))
    ks, vs, d = g.add(k(keys)), g.add(k(values)), g.add(k(default))
    found, size = g.add(out(np.int64) if key_string else out(object, type="STRING")), g.add(out(np.int64))
    string, int64 = 5, 4  # TensorType codes
    g.op("HASHTABLE", [], [handle], {"table_id": 1, "key_dtype": string if key_string else int64,
                                     "value_dtype": int64 if key_string else string})
    g.op("HASHTABLE_IMPORT", [handle, ks, vs], [])
    g.op("HASHTABLE_FIND", [handle, q, d], [found])
    g.op("HASHTABLE_SIZE", [handle], [size])
    g.output(found, size)
    return model(g)


def _table_imported_twice() -> tuple[bytes, list[np.ndarray]]:
    """A string -> int64 table imported from keys with a repeat (the first value stays), then
    imported again (ignored: a table is filled once); 2-D keys to find, a two-element default
    (its first element is used), the size."""
    g = Graph()
    handle, q = g.add(out(np.int32, type="RESOURCE")), g.add(x(np.array([[b"a", b"c"], [b"b", b""]], object)))
    ks, vs = g.add(k(np.array([b"a", b"b", b"a"], object))), g.add(k(np.array([1, 2, 3], np.int64)))
    ks2, vs2 = g.add(k(np.array([b"c"], object))), g.add(k(np.array([9], np.int64)))
    d, found, size = g.add(k(np.array([-1, -2], np.int64))), g.add(out(np.int64)), g.add(out(np.int64))
    g.op("HASHTABLE", [], [handle], {"table_id": 3, "key_dtype": 5, "value_dtype": 4})
    g.op("HASHTABLE_IMPORT", [handle, ks, vs], [])
    g.op("HASHTABLE_IMPORT", [handle, ks2, vs2], [])
    g.op("HASHTABLE_FIND", [handle, q, d], [found])
    g.op("HASHTABLE_SIZE", [handle], [size])
    g.output(found, size)
    return model(g)


def custom_case(op: str, form: str, build: Callable[[], tuple[bytes, list[np.ndarray]]], **kw: Any) -> None:
    """A case whose model is not one op (control flow, resources): ``build`` makes it."""
    CASES.append(OpCase(op, form, build, **kw))


custom_case("IF", "then-add", lambda: _if_model(True))
custom_case("IF", "else-mul", lambda: _if_model(False))
custom_case("WHILE", "counter-scale", _while_model)
for op in ("VAR_HANDLE", "ASSIGN_VARIABLE", "READ_VARIABLE"):
    custom_case(op, "assign-read", lambda: _variable_model(False))
custom_case("CALL_ONCE", "init-variable", lambda: _variable_model(True))
for op in ("HASHTABLE", "HASHTABLE_IMPORT", "HASHTABLE_FIND", "HASHTABLE_SIZE"):
    custom_case(op, "string-to-int64", lambda: _table_model(True))
    custom_case(op, "int64-to-string", lambda: _table_model(False))
    custom_case(op, "string-to-int64-repeated-keys-imported-twice", _table_imported_twice)


# ============================================================================= random, detection, complex

for op in ("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"):
    case(op, "seeded", [k(i32(3, 4))], [out(F32)], {"seed": 7, "seed2": 11})
    case(op, "seed-only-shape-input", [x(i32(5))], [out(F32)], {"seed": 3, "seed2": 0})
    case(op, "i64-shape", [k(np.array([2, 2, 2], np.int64))], [out(F32)], {"seed": 0, "seed2": 5})
case("MULTINOMIAL", "i64", [x(f32((2, 5))), k(np.int32(6))], [out(I64)], {"seed": 4, "seed2": 9})
case("MULTINOMIAL", "i32", [x(np.log(np.array([[0.2, 0.3, 0.5]], np.float32))), k(np.int32(8))], [out(I32)],
     {"seed": 1, "seed2": 2})


def nms_boxes(count: int, seed: int) -> np.ndarray:
    r = _rng("boxes", count, seed)
    corner = r.uniform(0, 0.6, (count, 2))
    return np.concatenate([corner, corner + r.uniform(0.1, 0.4, (count, 2))], 1).astype(np.float32)


case("NON_MAX_SUPPRESSION_V4", "f32", [x(nms_boxes(12, 0)), x(f32((12,), 0, 1)), k(np.int32(5)), k(np.float32(0.3)),
     k(np.float32(0.2))], [out(I32), out(I32)])
case("NON_MAX_SUPPRESSION_V4", "few-kept", [x(nms_boxes(6, 1)), x(f32((6,), 0, 1, 1)), k(np.int32(6)), k(np.float32(0.1)),
     k(np.float32(0.6))], [out(I32), out(I32)])
case("NON_MAX_SUPPRESSION_V5", "hard", [x(nms_boxes(12, 2)), x(f32((12,), 0, 1, 2)), k(np.int32(5)), k(np.float32(0.3)),
     k(np.float32(0.2)), k(np.float32(0.0))], [out(I32), out(F32), out(I32)])
case("NON_MAX_SUPPRESSION_V5", "soft", [x(nms_boxes(12, 3)), x(f32((12,), 0, 1, 3)), k(np.int32(6)), k(np.float32(0.4)),
     k(np.float32(0.1)), k(np.float32(0.3))], [out(I32), out(F32), out(I32)])
case("RFFT2D", "r2", [x(f32((4, 8))), k(i32(4, 8))], [out(C64)])
case("RFFT2D", "r3-crop-pad", [x(f32((2, 3, 5))), k(i32(4, 4))], [out(C64)])
for op in ("REAL", "IMAG", "COMPLEX_ABS"):
    case(op, "r2", [x(c64((2, 3)))], [out(F32)])
    case(op, "r0", [x(np.complex64(3 - 4j))], [out(F32)])


# ============================================================================= sparse and legacy ops


def _densify_model() -> tuple[bytes, list[np.ndarray]]:
    """A 3x4 float constant stored CSR (rows dense, columns sparse), densified."""
    from numlite.model.ir import DimensionMetadata, Sparsity

    g = Graph()
    t = g.add(k(np.array([1.5, -2, 3, 0.25], np.float32)))
    g.sg.tensors[t].shape = (3, 4)
    g.sg.tensors[t].sparsity = Sparsity([0, 1], [], [DimensionMetadata("DENSE", 3),
                                                      DimensionMetadata("SPARSE_CSR", 0, i32(0, 2, 2, 4), i32(0, 3, 1, 2))])
    o = g.add(out(F32))
    g.op("DENSIFY", [t], [o])
    g.output(o)
    return model(g)


custom_case("DENSIFY", "f32-csr", _densify_model)
SPARSE_IDS = [x(i32(1, 3, 0, 2)), x(np.array([[0, 0], [0, 1], [1, 0], [2, 0]], np.int32)), k(i32(3, 2)),
              x(f32((4,), 0.5, 2))]
for combiner, name in ((0, "sum"), (1, "mean"), (2, "sqrtn")):
    case("EMBEDDING_LOOKUP_SPARSE", f"f32-{name}", [*SPARSE_IDS, k(f32((4, 3)))], [out(F32)], {"combiner": combiner})
case("EMBEDDING_LOOKUP_SPARSE", "f32-r3-params-empty-row", [x(i32(1, 0)), x(np.array([[0, 0], [2, 1]], np.int32)),
     k(i32(3, 2)), x(f32((2,), 0.5, 2)), k(f32((2, 2, 2)))], [out(F32)], {"combiner": 0})
# Rank-3 indices (a 2x2 grid of slots), and a slot named again after another (LiteRT divides per run).
case("EMBEDDING_LOOKUP_SPARSE", "f32-mean-r3-indices-slot-revisited", [x(i32(2, 0, 1, 3, 0)),
     x(np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1], [1, 0, 1], [0, 1, 2]], np.int32)), k(i32(2, 2, 3)),
     x(f32((5,), 0.5, 2, 1)), k(f32((4, 3), seed=1))], [out(F32)], {"combiner": 1})
case("HASHTABLE_LOOKUP", "f32-values", [x(i32(5, 2, 9, 2)), k(i32(1, 2, 5)), k(f32((3, 2)))], [out(F32), out(U8)])
case("HASHTABLE_LOOKUP", "i32-values-r1", [x(i32(7, 3)), k(i32(3, 7)), k(i32(30, 70))], [out(I32), out(U8)])
case("HASHTABLE_LOOKUP", "string-values", [x(i32(4, 1)), k(i32(1, 4)), k(np.array([b"one", b"four"], object))],
     [out(object, type="STRING"), out(U8)])
case("LSH_PROJECTION", "sparse", [k(f32((3, 2), seed=1)), x(ints((4, 2), I32, -9, 9))], [out(I32)], {"type": 1})
case("LSH_PROJECTION", "dense-weighted", [k(f32((2, 3), seed=2)), x(f32((3, 2))), x(f32((3,), seed=3))], [out(I32)], {"type": 2})
# Each hashed key is the 4 seed bytes and one input row: rows of 1, 16, 40 and 124 bytes take
# farmhash's 4-7, 17-32, 33-64 and looping (> 64) paths; 4x8 seeds give 32 bits to match each.
for rows, name in ((ints((3, 1), I8), "i8-key5"), (f32((2, 4), seed=4), "f32-key20"), (f32((2, 10), seed=5), "f32-key44"),
                   (ints((2, 124), U8, seed=6), "u8-key128")):
    case("LSH_PROJECTION", f"dense-{name}", [k(f32((4, 8), seed=name)), x(rows), x(f32((rows.shape[0],), -1, 1, name))],
         [out(I32)], {"type": 2})
case("LSH_PROJECTION", "sparse-weighted-f32-key164", [k(f32((3, 10), seed=7)), x(f32((2, 40), seed=8)), x(f32((2,), seed=9))],
     [out(I32)], {"type": 1})
case("SKIP_GRAM", "bigrams-skip1", [x(np.array([b"the quick brown fox"], object))], [out(object, type="STRING")],
     {"ngram_size": 2, "max_skip_size": 1, "include_all_ngrams": False})
case("SKIP_GRAM", "all-ngrams", [x(np.array([b"a b c"], object))], [out(object, type="STRING")],
     {"ngram_size": 2, "max_skip_size": 0, "include_all_ngrams": True})
# LiteRT's word split: runs of spaces and tabs; a first word after a leading space is dropped.
case("SKIP_GRAM", "trigrams-skip2-odd-spaces", [x(np.array([b" one two\t\tthree  four five six "], object))],
     [out(object, type="STRING")], {"ngram_size": 3, "max_skip_size": 2, "include_all_ngrams": False})
case("SKIP_GRAM", "fewer-words-than-n", [x(np.array([b"just two"], object))], [out(object, type="STRING")],
     {"ngram_size": 3, "max_skip_size": 1, "include_all_ngrams": True})
case("CONCAT_EMBEDDINGS", "f32", [x(f32((2, 3))), x(f32((2, 2), seed=1))], [out(F32)],
     {"num_channels": 2, "num_columns_per_channel": [3, 2], "embedding_dim_per_channel": [1, 1]})
case("DILATE", "f32-r2", [x(f32((2, 3))), k(i32(2, 3)), k(np.float32(-1))], [out(F32)])
case("DILATE", "i8-r3", [x(ints((2, 2, 2), I8)), k(i32(1, 2, 3)), k(np.int8(5))], [out(I8)])
case("DILATE", "i32-ones", [x(ints((3,), I32)), k(i32(1)), k(np.int32(0))], [out(I32)])
for fn, name in ((1, "add"), (2, "mul"), (3, "min"), (4, "max")):
    case("REDUCE_WINDOW", f"f32-{name}", [x(f32((1, 4, 5, 1))), k(np.float32(0 if fn == 1 else 1 if fn == 2 else 9 if fn == 3
         else -9)), k(np.array([1, 2, 2, 1], np.int64)), k(np.array([1, 1, 2, 1], np.int64)),
         k(np.array([1, 1, 1, 1], np.int64))], [out(F32)], options_type=None,
         options2=("ReduceWindowOptions", {"reduce_function": fn}))
