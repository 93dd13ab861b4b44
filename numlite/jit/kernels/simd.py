"""Eight float32 lanes as one Numba value (LLVM's ``<8 x float>``), for the loop kernels of
``conv.py`` and ``pooling.py``.

LLVM does not vectorize a register-blocked micro-kernel written with scalars: after it unrolls
the small loops over a tile's lanes, its SLP vectorizer leaves the accumulators scalar (tried on
the ``jit-conv`` branch, and again here: 96 scalar FMAs, 4 GMAC/s). Written with these values,
the same tile of 4 output pixels by 16 channels keeps its 8 accumulators in ``ymm`` registers
and runs at 30-42 GMAC/s on one AVX2 core. On machines with narrower vectors LLVM splits each
value in halves (NEON) or lanes; the results are the same.

* :func:`load` / :func:`store`: 8 consecutive elements of a 1-D float32 array from an index
  (no bounds check and no negative-index wraparound: the callers' indices are planned);
  :func:`load_n` / :func:`store_n`: the first ``n`` lanes only (``llvm.masked.*``), the rest
  of a row that does not fill a vector;
* :func:`splat`: one float32 element broadcast to every lane;
* :func:`fma`: ``a * b + c`` (``llvm.fmuladd``: one fused multiply-add where the machine has
  it, as XNNPACK's kernels round; a multiply and an add otherwise);
* :func:`vmax` / :func:`clamp`: NaN-propagating maximum (``np.maximum``) and LiteRT's fused
  activation clamp (NaN kept);
* :func:`add`, :func:`mul`, :func:`div`.

Sixteen float32 lanes (``f32x16``) for the wide tiles on machines with AVX-512, and sixteen int32
lanes (``i32x16``) for the 8-bit kernels: ``vpdpbusd`` dot products of bytes (AVX512-VNNI), the
requantizing stores, the integer pools' loads and stores, the 8-bit ADD's table gathers.
"""

from __future__ import annotations

import os
from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

LANES = 8
_F32 = ir.FloatType()
_V = ir.VectorType(_F32, LANES)
_I32 = ir.IntType(32)


class F32x8(types.Type):
    """The Numba type of eight float32 lanes."""

    def __init__(self) -> None:
        super().__init__(name="f32x8")


f32x8 = F32x8()


@register_model(F32x8)
class _Model(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: Any) -> None:
        super().__init__(dmm, fe_type, _V)


def _element(context: Any, builder: Any, arrty: Any, arr: Any, idx: Any) -> Any:
    """The address of ``arr[idx]`` (1-D float32 array)."""
    return builder.gep(context.make_array(arrty)(context, builder, arr).data, [idx])


def _mask(builder: Any, n: Any) -> Any:
    """Lanes ``0..n-1`` set."""
    iota = ir.Constant(ir.VectorType(ir.IntType(64), LANES), list(range(LANES)))
    wide = builder.insert_element(ir.Constant(iota.type, ir.Undefined), n, ir.Constant(_I32, 0))
    wide = builder.shuffle_vector(wide, ir.Constant(iota.type, ir.Undefined), ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES))
    return builder.icmp_signed("<", iota, wide)


def _broadcast(builder: Any, scalar: Any) -> Any:
    undef = ir.Constant(_V, ir.Undefined)
    one = builder.insert_element(undef, scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, undef, ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES))


def _float32_array(arr: Any) -> bool:
    return isinstance(arr, types.Array) and arr.dtype == types.float32 and arr.ndim == 1


@intrinsic
def load(typingctx: Any, arr: Any, idx: Any) -> Any:
    """``arr[idx : idx + 8]`` as one value."""
    if not _float32_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), _V.as_pointer())
        return builder.load(address, align=4)

    return f32x8(arr, types.int64), codegen


@intrinsic
def store(typingctx: Any, arr: Any, idx: Any, value: Any) -> Any:
    """``arr[idx : idx + 8] = value``."""
    if not _float32_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), _V.as_pointer())
        builder.store(args[2], address, align=4)
        return context.get_dummy_value()

    return types.none(arr, types.int64, f32x8), codegen


@intrinsic
def load_n(typingctx: Any, arr: Any, idx: Any, n: Any) -> Any:
    """``arr[idx : idx + n]`` in the first ``n`` lanes (0 <= n <= 8), zeros in the others;
    nothing past ``idx + n`` is read."""
    if not _float32_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), _V.as_pointer())
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_V, [_V.as_pointer(), _I32, ir.VectorType(ir.IntType(1), LANES), _V]),
            "llvm.masked.load.v8f32.p0v8f32",
        )
        return builder.call(fn, [address, ir.Constant(_I32, 4), _mask(builder, args[2]), ir.Constant(_V, [0.0] * LANES)])

    return f32x8(arr, types.int64, types.int64), codegen


@intrinsic
def store_n(typingctx: Any, arr: Any, idx: Any, value: Any, n: Any) -> Any:
    """``arr[idx : idx + n] = value[:n]`` (0 <= n <= 8); nothing past ``idx + n`` is written."""
    if not _float32_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), _V.as_pointer())
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [_V, _V.as_pointer(), _I32, ir.VectorType(ir.IntType(1), LANES)]),
            "llvm.masked.store.v8f32.p0v8f32",
        )
        builder.call(fn, [args[2], address, ir.Constant(_I32, 4), _mask(builder, args[3])])
        return context.get_dummy_value()

    return types.none(arr, types.int64, f32x8, types.int64), codegen


@intrinsic
def splat(typingctx: Any, arr: Any, idx: Any) -> Any:
    """``arr[idx]`` in every lane."""
    if not _float32_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _broadcast(builder, builder.load(_element(context, builder, sig.args[0], args[0], args[1]), align=4))

    return f32x8(arr, types.int64), codegen


@intrinsic
def fill(typingctx: Any, value: Any) -> Any:
    """A float value (rounded to float32) in every lane."""
    if not isinstance(value, types.Float):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _broadcast(builder, context.cast(builder, args[0], sig.args[0], types.float32))

    return f32x8(value), codegen


def _binary(name: str, build: Any, lanes: Any = None) -> Any:
    """An intrinsic ``op(a, b)`` of two values of the type ``lanes`` (f32x8 when None)."""

    @intrinsic
    def op(typingctx: Any, a: Any, b: Any) -> Any:
        of = lanes or f32x8
        if a != of or b != of:
            return None

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return build(builder, args[0], args[1])

        return of(a, b), codegen

    op.__name__ = op.__qualname__ = name
    return op


add = _binary("add", lambda b, x, y: b.fadd(x, y))
mul = _binary("mul", lambda b, x, y: b.fmul(x, y))
div = _binary("div", lambda b, x, y: b.fdiv(x, y))


def _vmax(builder: Any, x: Any, y: Any) -> Any:
    # x if x > y or x is NaN else y: np.maximum's NaN propagation, as common.max_nan
    take = builder.or_(builder.fcmp_ordered(">", x, y), builder.fcmp_unordered("uno", x, x))
    return builder.select(take, x, y)


vmax = _binary("vmax", _vmax)


@intrinsic
def fma(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c``."""
    if a != f32x8 or b != f32x8 or c != f32x8:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V, [_V, _V, _V]), "llvm.fmuladd.v8f32")
        return builder.call(fn, list(args))

    return f32x8(a, b, c), codegen


@intrinsic
def clamp(typingctx: Any, v: Any, low: Any, high: Any) -> Any:
    """``low`` where ``v < low``, ``high`` where ``v > high``, else ``v`` (NaN kept), as
    LiteRT's ``ActivationFunctionWithMinMax``; ``low`` and ``high`` are float scalars."""
    if v != f32x8 or not isinstance(low, types.Float) or not isinstance(high, types.Float):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        lo = _broadcast(builder, context.cast(builder, args[1], sig.args[1], types.float32))
        hi = _broadcast(builder, context.cast(builder, args[2], sig.args[2], types.float32))
        x = builder.select(builder.fcmp_ordered("<", args[0], lo), lo, args[0])
        return builder.select(builder.fcmp_ordered(">", x, hi), hi, x)

    return f32x8(v, low, high), codegen


# -- sixteen lanes: one zmm register where the machine has AVX-512 -----------------------------------
#
# CONV_2D's tile on machines with AVX-512 (see conv.py, WIDE): 8 output pixels by 16 channels in
# 8 such values, one weight load per tap. Where the machine has no AVX-512, LLVM would split
# each value in two ymm registers: the 8 x 16 tile would need 16 accumulators and spill, so
# the kernels take the 8-lane tile there (the constant is read at import, as Numba compiles
# for the host).

WIDE_LANES = 16
_W = ir.VectorType(_F32, WIDE_LANES)


class F32x16(types.Type):
    """The Numba type of sixteen float32 lanes."""

    def __init__(self) -> None:
        super().__init__(name="f32x16")


f32x16 = F32x16()


@register_model(F32x16)
class _WideModel(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: Any) -> None:
        super().__init__(dmm, fe_type, _W)


def _has_avx512() -> bool:
    try:
        from llvmlite import binding

        return "+avx512f" in binding.get_host_cpu_features().flatten().split(",")
    except Exception:  # (a platform llvmlite cannot tell: the narrow tile, which is right everywhere)
        return False


# NUMLITE_JIT_LANES=8 takes the 8-lane tiles on any machine (the tests run them so on machines
# with AVX-512 too; the kernels' cache stamp holds it: common.sources_digest).
AVX512 = _has_avx512() and os.environ.get("NUMLITE_JIT_LANES") != "8"


@intrinsic
def load16(typingctx: Any, arr: Any, idx: Any) -> Any:
    """``arr[idx : idx + 16]`` as one value; from an int8 array, the 16 bytes widened to
    float32 (exact: the int8 DEPTHWISE_CONV_2D's tile reads its input so, a quarter of the
    float32 copy's bytes)."""
    if not _float32_array(arr) and not (isinstance(arr, types.Array) and arr.dtype == types.int8 and arr.ndim == 1):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        if sig.args[0].dtype == types.int8:
            bytes16 = ir.VectorType(ir.IntType(8), WIDE_LANES)
            address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), bytes16.as_pointer())
            return builder.sitofp(builder.sext(builder.load(address, align=1), ir.VectorType(_I32, WIDE_LANES)), _W)
        address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), _W.as_pointer())
        return builder.load(address, align=4)

    return f32x16(arr, types.int64), codegen


@intrinsic
def splat16(typingctx: Any, arr: Any, idx: Any) -> Any:
    """``arr[idx]`` in every one of 16 lanes."""
    if not _float32_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        value = builder.load(_element(context, builder, sig.args[0], args[0], args[1]), align=4)
        one = builder.insert_element(ir.Constant(_W, ir.Undefined), value, ir.Constant(_I32, 0))
        return builder.shuffle_vector(one, ir.Constant(_W, ir.Undefined), ir.Constant(ir.VectorType(_I32, WIDE_LANES), [0] * WIDE_LANES))

    return f32x16(arr, types.int64), codegen


@intrinsic
def fma16(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` on 16 lanes (``llvm.fmuladd``, as :func:`fma`)."""
    if a != f32x16 or b != f32x16 or c != f32x16:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_W, [_W, _W, _W]), "llvm.fmuladd.v16f32")
        return builder.call(fn, list(args))

    return f32x16(a, b, c), codegen


@intrinsic
def halves(typingctx: Any, v: Any) -> Any:
    """A 16-lane value as its two 8-lane halves (for the 8-lane store step)."""
    if v != f32x16:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        parts = [builder.shuffle_vector(args[0], args[0], ir.Constant(ir.VectorType(_I32, LANES), list(range(k, k + LANES))))
                 for k in (0, LANES)]  # fmt: skip
        return context.make_tuple(builder, sig.return_type, parts)

    return types.UniTuple(f32x8, 2)(v), codegen


# -- int8 dot products: sixteen int32 lanes, where the machine has AVX512-VNNI -----------------------
#
# The int8 CONV_2D's tile (quantized_conv.py): ``vpdpbusd`` adds, in each of 16 int32 lanes, the
# four products of 4 unsigned bytes of one operand by 4 signed bytes of the other, 64 products
# an instruction where a float32 FMA does 16. The operands are bytes of int8 arrays, addressed
# by byte index (no bounds check: the callers' indices are planned).

_I8 = ir.IntType(8)
_I64 = ir.IntType(64)
_IW = ir.VectorType(_I32, WIDE_LANES)
_LW = ir.VectorType(_I64, WIDE_LANES)


class I32x16(types.Type):
    """The Numba type of sixteen int32 lanes."""

    def __init__(self) -> None:
        super().__init__(name="i32x16")


i32x16 = I32x16()


@register_model(I32x16)
class _IntModel(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: Any) -> None:
        super().__init__(dmm, fe_type, _IW)


def _splat16(builder: Any, value: Any, vector: Any) -> Any:
    """``value`` in each of the 16 lanes of ``vector`` (an IR vector type of its element)."""
    one = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined), ir.Constant(ir.VectorType(_I32, WIDE_LANES), [0] * WIDE_LANES))


def _lanes_below(builder: Any, n: Any) -> Any:
    """The mask of lanes ``0..n-1`` of 16 (``n`` an int64)."""
    return builder.icmp_signed("<", ir.Constant(_LW, list(range(WIDE_LANES))), _splat16(builder, n, _LW))


def _store_lanes(builder: Any, values: Any, address: Any, n: Any) -> None:
    """The first ``n`` (int64) of 16 integer lanes ``values`` stored at ``address`` (a pointer to
    their vector type); nothing past them is written."""
    width = values.type.element.width
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [values.type, address.type, _I32, ir.VectorType(ir.IntType(1), WIDE_LANES)]),
        f"llvm.masked.store.v16i{width}.p0v16i{width}",
    )
    builder.call(fn, [values, address, ir.Constant(_I32, 1), _lanes_below(builder, n)])


def _has_vnni() -> bool:
    try:
        from llvmlite import binding

        return "+avx512vnni" in binding.get_host_cpu_features().flatten().split(",")
    except Exception:
        return False


VNNI = AVX512 and _has_vnni()  # (NUMLITE_JIT_LANES=8 turns it off too: the float32 path everywhere)


def _byte_array(arr: Any) -> bool:
    return isinstance(arr, types.Array) and arr.dtype in (types.int8, types.uint8) and arr.ndim == 1


def _at(context: Any, builder: Any, arrty: Any, arr: Any, idx: Any, pointee: Any) -> Any:
    """``&arr[idx]`` (a byte array) as a pointer to ``pointee``."""
    return builder.bitcast(_element(context, builder, arrty, arr, idx), pointee.as_pointer())


@intrinsic
def i32x16_zero(typingctx: Any) -> Any:
    """Sixteen int32 zeros."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return ir.Constant(_IW, [0] * WIDE_LANES)

    return i32x16(), codegen


@intrinsic
def load_i32x16(typingctx: Any, arr: Any, idx: Any) -> Any:
    """The 64 bytes ``arr[idx : idx + 64]`` as sixteen int32 lanes."""
    if not _byte_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.load(_at(context, builder, sig.args[0], args[0], args[1], _IW), align=1)

    return i32x16(arr, types.int64), codegen


@intrinsic
def splat_i32x16(typingctx: Any, arr: Any, idx: Any) -> Any:
    """The 4 bytes ``arr[idx : idx + 4]`` (one int32) in every lane."""
    if not _byte_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _splat16(builder, builder.load(_at(context, builder, sig.args[0], args[0], args[1], _I32), align=1), _IW)

    return i32x16(arr, types.int64), codegen


@intrinsic
def dot_u8s8(typingctx: Any, acc: Any, a: Any, b: Any) -> Any:
    """``acc`` plus, in each lane, the sum of the products of its 4 bytes of ``a`` (unsigned) by
    its 4 bytes of ``b`` (signed): ``vpdpbusd``, wrapping as int32 (no saturation)."""
    if acc != i32x16 or a != i32x16 or b != i32x16:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_IW, [_IW, _IW, _IW]), "llvm.x86.avx512.vpdpbusd.512")
        return builder.call(fn, list(args))

    return i32x16(acc, a, b), codegen


@intrinsic
def requantize_store16(typingctx: Any, o: Any, q: Any, acc: Any, params: Any, at: Any, count: Any, zero: Any, low: Any,
                       high: Any) -> Any:  # fmt: skip
    """``o[q : q + count] = clamp(((int64(acc) * mult + rounding) >> right) + zero, low, high)``
    lane by lane (``count`` 1-16; nothing past ``q + count`` is written), where the bytes of
    ``params`` from ``at`` hold ``mult`` (16 int32), then ``rounding`` and ``right`` (16 int64
    each): the rescale of ``quantized_conv.requantize_halves_up`` in registers."""
    if not _byte_array(o) or not _byte_array(params) or acc != i32x16:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        o_, q_, acc_, params_, at_, count_, zero_, low_, high_ = args

        def wide(index: Any, vector: Any) -> Any:
            return builder.load(_at(context, builder, sig.args[3], params_, index, vector), align=1)

        mult = builder.sext(wide(at_, _IW), _LW)
        rounding = wide(builder.add(at_, ir.Constant(_I64, 64)), _LW)
        right = wide(builder.add(at_, ir.Constant(_I64, 192)), _LW)
        v = builder.ashr(builder.add(builder.mul(builder.sext(acc_, _LW), mult), rounding), right)
        v = builder.add(v, _splat16(builder, zero_, _LW))
        lo, hi = _splat16(builder, low_, _LW), _splat16(builder, high_, _LW)
        v = builder.select(builder.icmp_signed("<", v, lo), lo, v)
        v = builder.select(builder.icmp_signed(">", v, hi), hi, v)
        byte = builder.trunc(v, ir.VectorType(_I8, WIDE_LANES))
        _store_lanes(builder, byte, _at(context, builder, sig.args[0], o_, q_, byte.type), count_)
        return context.get_dummy_value()

    return types.none(o, types.int64, i32x16, params, types.int64, types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def to_i32x16(typingctx: Any, v: Any) -> Any:
    """Sixteen float32 lanes converted to int32, truncated (``vcvttps2dq``; exact on the
    integer sums of the int8 DEPTHWISE_CONV_2D's float32 tile)."""
    if v != f32x16:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.fptosi(args[0], _IW)

    return i32x16(v), codegen


# -- sixteen integer lanes for the quantized pools ----------------------------------------------------
#
# LLVM vectorizes a loop over a pixel's channels by 64 or 256 bytes on AVX-512, so a short one
# (16 or 32 channels) runs in its scalar remainder: these values take 16 channels at a time.
# (Sixteen int32 lanes are one zmm register with AVX-512, two or four elsewhere: right anywhere.)

_INTEGERS = (types.int8, types.uint8, types.int16)


def _small_int_array(arr: Any) -> bool:
    return isinstance(arr, types.Array) and arr.dtype in _INTEGERS and arr.ndim == 1


@intrinsic
def widen16(typingctx: Any, arr: Any, idx: Any, n: Any) -> Any:
    """``arr[idx : idx + n]`` (int8, uint8 or int16; ``n`` 0-16) as int32 lanes, zeros past
    ``n``; nothing past ``idx + n`` is read."""
    if not _small_int_array(arr):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        element = context.get_value_type(sig.args[0].dtype)
        vector = ir.VectorType(element, WIDE_LANES)
        address = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), vector.as_pointer())
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector.as_pointer(), _I32, ir.VectorType(ir.IntType(1), WIDE_LANES), vector]),
            f"llvm.masked.load.v16i{element.width}.p0v16i{element.width}",
        )
        raw = builder.call(fn, [address, ir.Constant(_I32, 1), _lanes_below(builder, args[2]), ir.Constant(vector, [0] * WIDE_LANES)])
        return builder.zext(raw, _IW) if sig.args[0].dtype == types.uint8 else builder.sext(raw, _IW)

    return i32x16(arr, types.int64, types.int64), codegen


@intrinsic
def fill_i32x16(typingctx: Any, value: Any) -> Any:
    """An integer in every lane (as int32)."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _splat16(builder, context.cast(builder, args[0], sig.args[0], types.int32), _IW)

    return i32x16(value), codegen


add_i32x16 = _binary("add_i32x16", lambda b, x, y: b.add(x, y), i32x16)
max_i32x16 = _binary("max_i32x16", lambda b, x, y: b.select(b.icmp_signed(">", x, y), x, y), i32x16)
mul_i32x16 = _binary("mul_i32x16", lambda b, x, y: b.mul(x, y), i32x16)  # (wrapping, as C++'s int32)


@intrinsic
def narrow_store16(typingctx: Any, arr: Any, idx: Any, v: Any, n: Any, low: Any, high: Any) -> Any:
    """``arr[idx : idx + n] = clamp(v, low, high)`` in ``arr``'s dtype (int8, uint8, int16, or
    int32 without a clamp's narrowing); nothing past ``idx + n`` is written."""
    if not (_small_int_array(arr) or (isinstance(arr, types.Array) and arr.dtype == types.int32 and arr.ndim == 1)) or v != i32x16:
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        element = context.get_value_type(sig.args[0].dtype)
        vector = ir.VectorType(element, WIDE_LANES)
        lo = _splat16(builder, context.cast(builder, args[4], sig.args[4], types.int32), _IW)
        hi = _splat16(builder, context.cast(builder, args[5], sig.args[5], types.int32), _IW)
        x = builder.select(builder.icmp_signed("<", args[2], lo), lo, args[2])
        x = builder.select(builder.icmp_signed(">", x, hi), hi, x)
        if element.width < 32:
            x = builder.trunc(x, vector)
        _store_lanes(builder, x, builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), vector.as_pointer()), args[3])
        return context.get_dummy_value()

    return types.none(arr, types.int64, i32x16, types.int64, low, high), codegen
