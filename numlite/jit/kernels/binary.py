"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, FLOOR_MOD with broadcasting and fused activations; the
binary ops of the "more" row (SQUARED_DIFFERENCE, POW, ...); and the StableHLO element-wise ops
(STABLEHLO_ADD, _MULTIPLY, _MAXIMUM, _MINIMUM, _AND, _SHIFT_LEFT) with their own rules.

Integer arithmetic wraps as in LiteRT (Numba computes int32 in 64 bits and the store into the
int32 buffer keeps the low bits); DIV is compiled for float32 only (integer DIV, with its
rounding rules, stays on NumPy in this milestone).

ADD, SUB and MUL of two float32 operands of the output's shape (no broadcasting) with at least
:data:`KERNEL_MIN_SIZE` elements (a residual connection) are a loop kernel
(:mod:`numlite.jit.kernels.loops`, kind :data:`KIND`) instead of a loop inlined into the
model's function: compiled once per machine, and shared among the threads with
``num_threads`` in blocks of :data:`BLOCK` elements. The same float32 operation per element,
so the same bits."""

from __future__ import annotations

import numpy as np

from numlite.jit.kernels import emits
from numlite.jit.kernels.common import body, clip, each, index, kernel, require, same_dtypes

FLOAT = (np.dtype(np.float32),)
NUMBERS = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))

# op -> (the expression of one element from the operands' expressions, dtypes)
EXPRESSIONS = {
    "ADD": (lambda x, y: f"{x} + {y}", NUMBERS),
    "SUB": (lambda x, y: f"{x} - {y}", NUMBERS),
    "MUL": (lambda x, y: f"{x} * {y}", NUMBERS),
    "DIV": (lambda x, y: f"{x} / {y}", FLOAT),
    # NaN propagates, as np.maximum and np.minimum (numlite's NumPy kernels) do
    "MAXIMUM": (lambda x, y: f"max_nan({x}, {y})", NUMBERS),
    "MINIMUM": (lambda x, y: f"min_nan({x}, {y})", NUMBERS),
    # Python's (and Numba's) % is the floored modulo LiteRT computes; compiled only for a
    # constant divisor without zeros (a loop counter's i % 3), as division by zero would raise
    "FLOOR_MOD": (lambda x, y: f"{x} % {y}", NUMBERS),
}
# fused_activation_function code -> the clamp range (RELU, RELU_N1_TO_1, RELU6); TANH and
# SIGN_BIT have none in LiteRT (CalculateActivationRange), as in numlite's NumPy kernels.
RANGES = {1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def activation_range(node, out) -> tuple[float, float] | None:
    code = getattr(node.options, "fused_activation_function", 0) if node.options is not None else 0
    if code not in RANGES:
        return None
    require(out.dtype.kind == "f", f"a fused activation on {out.dtype.name} is not compiled")
    return RANGES[code]


# -- large float32 ADD, SUB, MUL: a loop kernel ------------------------------------------------

KIND = 12  # the loop kernel kind (numlite.jit.kernels.loops)
KERNEL_MIN_SIZE = 1 << 12  # elements; smaller nodes stay inline
BLOCK = 1 << 14  # elements per unit of the parallel form
OPS = {"ADD": 0, "SUB": 1, "MUL": 2}  # the kernel's op codes


@body
def binary_setup(x, o, src, f, p):
    """The number of units: blocks of BLOCK elements. ``p``: size, op, act."""
    return (p[0] + BLOCK - 1) // BLOCK


@body
def binary_units(x, o, src, f, p, u0, u1):
    """Elements ``[u0 * BLOCK, u1 * BLOCK)`` of ``o = x op src``, clamped to ``f[0], f[1]`` when
    ``p[2]`` (as :func:`each` clamps)."""
    size, op, act = p[0], p[1], p[2]
    low, high = f[0], f[1]
    i0, i1 = u0 * BLOCK, min(u1 * BLOCK, size)
    # slices indexed from 0: an index Numba cannot prove non-negative gets a wraparound test,
    # which keeps LLVM from vectorizing the loop (5x slower here)
    a, b, out = x[i0:i1], src[i0:i1], o[i0:i1]
    if op == 0:
        for i in range(i1 - i0):
            out[i] = clip(a[i] + b[i], low, high) if act else a[i] + b[i]
    elif op == 1:
        for i in range(i1 - i0):
            out[i] = clip(a[i] - b[i], low, high) if act else a[i] - b[i]
    else:
        for i in range(i1 - i0):
            out[i] = clip(a[i] * b[i], low, high) if act else a[i] * b[i]


@emits(*EXPRESSIONS)
def emit_binary(node, g) -> None:
    expression, dtypes = EXPRESSIONS[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    same_dtypes([a, b, out], dtypes, node.op_name)
    clamp = activation_range(node, out)
    if (node.op_name in OPS and out.dtype == FLOAT[0] and not out.dynamic and out.size >= KERNEL_MIN_SIZE
            and tuple(a.shape) == tuple(b.shape) == tuple(out.shape) and not a.dynamic and not b.dynamic):
        from numlite.jit.kernels.conv import call

        call(g, KIND, a, out, b, [out.size, OPS[node.op_name], int(clamp is not None)],
             np.array(clamp or (0.0, 0.0), np.float32), work=out.size)
        return
    if node.op_name == "FLOOR_MOD":
        require(b.value is not None and bool(np.all(b.value != 0)), "FLOOR_MOD by a divisor from data is not compiled")
    each(g, out, lambda i: expression(index(a, out, i, g), index(b, out, i, g)), clamp)


# -- SQUARED_DIFFERENCE, POW, FLOOR_DIV, ATAN2, ADD_N, BITWISE_XOR, RIGHT_SHIFT -------------------


@kernel
def floor_div(x, y):
    """Integer floored division as np.floor_divide computes it, with the wrapped quotient of the
    smallest integer by -1 (where LLVM's division would trap). A zero divisor never reaches it
    (integer FLOOR_DIV compiles only with a constant divisor without zeros); 0 keeps it total."""
    if y == 0:
        return 0
    if y == -1:
        return -x
    return x // y


BITWISE = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32))  # uint16/uint32: no arenas
MORE = {
    # the difference rounded to the dtype, then squared (integers wrap as LiteRT's)
    "SQUARED_DIFFERENCE": (lambda x, y: f"({x} - {y}) * ({x} - {y})", NUMBERS),
    # integers: repeated multiplication by a non-negative exponent, as numlite's Pow clamps it
    "POW": (lambda x, y: f"{x} ** {y}", (np.dtype(np.float32),)),
    "BITWISE_XOR": (lambda x, y: f"{x} ^ {y}", BITWISE),
}


@emits(*MORE)
def emit_more(node, g) -> None:
    expression, dtypes = MORE[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    if node.op_name == "POW" and a.dtype == np.int32:
        expression = lambda x, y: f"{x} ** max({y}, 0)"  # noqa: E731
        dtypes = (np.dtype(np.int32),)
    same_dtypes([a, b, out], dtypes, node.op_name)
    each(g, out, lambda i: expression(index(a, out, i, g), index(b, out, i, g)), activation_range(node, out))


@emits("FLOOR_DIV")
def emit_floor_div(node, g) -> None:
    """floor(a / b) in float32; integers through :func:`floor_div`."""
    a, b = node.ins
    (out,) = node.outs
    same_dtypes([a, b, out], (np.dtype(np.float32), *(np.dtype(t) for t in (np.int32, np.int64, np.int16, np.int8))), node.op_name)
    if out.dtype.kind != "f":  # the NumPy engine raises LiteRT's division by 0 (as for FLOOR_MOD)
        require(b.value is not None and bool(np.all(b.value != 0)), "integer FLOOR_DIV by a divisor from data is not compiled")
    f = "np.floor({} / {})" if out.dtype.kind == "f" else f"{g.kernel(floor_div)}({{}}, {{}})"
    each(g, out, lambda i: f.format(index(a, out, i, g), index(b, out, i, g)))


@emits("RIGHT_SHIFT")
def emit_right_shift(node, g) -> None:
    """``x >> y`` with y clamped to [0, bits - 1] (arithmetic on signed integers)."""
    a, b = node.ins
    (out,) = node.outs
    same_dtypes([a, b, out], BITWISE, node.op_name)
    limit = a.dtype.itemsize * 8 - 1
    each(g, out, lambda i: f"{index(a, out, i, g)} >> clip({index(b, out, i, g)}, 0, {limit})")


@emits("ATAN2")
def emit_atan2(node, g) -> None:
    """``atan2(y, x)`` on float32 or float64 (C's atan2f/atan2, as np.arctan2); equal shapes."""
    y, x = node.ins
    (out,) = node.outs
    same_dtypes([y, x, out], (np.dtype(np.float32), np.dtype(np.float64)), node.op_name)
    each(g, out, lambda i: f"math.atan2({index(y, out, i, g)}, {index(x, out, i, g)})")


@emits("ADD_N")
def emit_add_n(node, g) -> None:
    """The inputs summed in input order (float32 rounded at each step, int32 wrapping)."""
    (out,) = node.outs
    require(all(t is not None for t in node.ins), "ADD_N with an omitted input is not compiled")
    same_dtypes([*node.ins, out], (np.dtype(np.float32), np.dtype(np.int32)), node.op_name)
    each(g, out, lambda i: " + ".join(index(t, out, i, g) for t in node.ins))


# -- STABLEHLO_ADD, _MULTIPLY, _MAXIMUM, _MINIMUM, _AND, _SHIFT_LEFT ------------------------------
#
# As numlite.kernels.stablehlo: two operands of one shape and dtype (no broadcasting). Integers
# wrap (Numba computes them in 64 bits, the store keeps the low bits); bools add as OR and
# multiply as AND; MAXIMUM is std::max(a, b) (b only where a < b) and MINIMUM std::min(a, b) (b
# only where b < a), so a NaN first operand is kept and a NaN second one ignored.

STABLEHLO_NUMBERS = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8))
BOOL = np.dtype(np.bool_)
STABLEHLO = {
    "STABLEHLO_ADD": (lambda x, y, dtype: f"{x} | {y}" if dtype == BOOL else f"{x} + {y}", (*STABLEHLO_NUMBERS, BOOL)),
    "STABLEHLO_MULTIPLY": (lambda x, y, dtype: f"{x} & {y}" if dtype == BOOL else f"{x} * {y}", (*STABLEHLO_NUMBERS, BOOL)),
    "STABLEHLO_MAXIMUM": (lambda x, y, dtype: f"{y} if {x} < {y} else {x}", (*STABLEHLO_NUMBERS, BOOL)),
    "STABLEHLO_MINIMUM": (lambda x, y, dtype: f"{y} if {y} < {x} else {x}", (*STABLEHLO_NUMBERS, BOOL)),
    "STABLEHLO_AND": (lambda x, y, dtype: f"{x} & {y}", (*(t for t in STABLEHLO_NUMBERS if t.kind in "iu"), BOOL)),
    # np.left_shift: a shift outside [0, width) gives 0 (int8 and int16 shift as C ints in
    # LiteRT and keep the low bits, the same thing)
    "STABLEHLO_SHIFT_LEFT": (lambda x, y, dtype: f"{x} << {y} if 0 <= {y} < {dtype.itemsize * 8} else 0",
                             tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32))),
}


@emits(*STABLEHLO)
def emit_stablehlo(node, g) -> None:
    expression, dtypes = STABLEHLO[node.op_name]
    a, b = node.ins
    (out,) = node.outs
    same_dtypes([a, b, out], dtypes, node.op_name)
    require(tuple(a.shape) == tuple(b.shape) == tuple(out.shape), f"{node.op_name} of {a.shape} and {b.shape} is not compiled")
    each(g, out, lambda i: expression(f"{a.name}[{i}]", f"{b.name}[{i}]", out.dtype))
