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
from one_op_model import In, Out, k, one_op, out, v, x

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
    binary(op, ints((3, 4), I16, -3, 3), ints((3, 4), I16, -3, 3, 1), BOOL, "i16")
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
