"""BLAS from compiled code: ``sgemm`` of the OpenBLAS that NumPy loaded, called through its address.

The NumPy engine runs FULLY_CONNECTED's products in NumPy's BLAS; the compiled engine calls the
same library's ``cblas_sgemm`` from the generated function, so a product of many rows runs at
BLAS speed and with the NumPy engine's summation order. The function is looked up once per
process (:func:`sgemm_address`) through threadpoolctl's view of the loaded BLAS libraries, and
its address travels as a constant of the model (an address is not cached on disk: each process
looks it up, as the loop kernels' entry points). Numba's own ``np.dot`` would need SciPy and
costs seconds of compile time (docs/jit.md).

Only OpenBLAS is used, whose ``cblas_sgemm`` is looked up under the names NumPy's wheels
(``scipy_cblas_sgemm64_``) and other builds export; its integer width (32 or 64 bits) is read
from the symbol's suffix or from ``openblas_get_config()``. Where none is found (another BLAS,
NumPy built against Accelerate), the FULLY_CONNECTED loop kernels run instead.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from numlite.jit.kernels.common import kernel
from numlite.jit.kernels.loops import _load  # (loops does not import this module: no cycle)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112  # CBLAS's enum values
_FOUND: tuple[np.ndarray, int] | None | bool = False  # False: not looked up yet


def sgemm_address() -> tuple[np.ndarray, int] | None:
    """``(a one-element int64 array holding cblas_sgemm's address, its integer width)`` for the
    OpenBLAS NumPy loaded, or None when there is none (the array lives as long as the process)."""
    global _FOUND
    if _FOUND is False:
        _FOUND = _look_up()
    return _FOUND


def _look_up() -> tuple[np.ndarray, int] | None:
    from numlite.interpreter.threads import _controllers

    for lib in _controllers():
        if lib.internal_api != "openblas":
            continue
        try:
            dll = ctypes.CDLL(lib.filepath)
        except OSError:
            continue
        for name in ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "scipy_cblas_sgemm", "cblas_sgemm"):
            fn = getattr(dll, name, None)
            if fn is None:
                continue
            width = 64 if name.endswith("64_") or _config_has_64bit_ints(dll, name) else 32
            return np.array([ctypes.cast(fn, ctypes.c_void_p).value], np.int64), width
    return None


def _config_has_64bit_ints(dll: Any, sgemm_name: str) -> bool:
    """Whether an OpenBLAS exporting ``sgemm_name`` without a suffix was built with 64-bit
    integers (its configuration string says ``USE64BITINT``)."""
    prefix = "scipy_" if sgemm_name.startswith("scipy_") else ""
    config = getattr(dll, f"{prefix}openblas_get_config", None)
    if config is None:
        return False
    config.restype = ctypes.c_char_p
    return b"USE64BITINT" in (config() or b"")


def _sgemm(width: int) -> Any:
    """An intrinsic: ``c[ic:] = op(a[ia:]) @ op(b[ib:])`` ([m, k] by [k, n], row-major float32,
    ``op`` transposing where ``ta`` / ``tb`` say; ``lda``, ``ldb``, ``ldc`` the row lengths as
    stored) by the ``cblas_sgemm`` at ``address``; ``width``: the BLAS's integer bits."""

    @intrinsic
    def sgemm(typingctx: Any, address: Any, ta: Any, tb: Any, m: Any, n: Any, k: Any, a: Any, ia: Any, lda: Any, b: Any,
              ib: Any, ldb: Any, c: Any, ic: Any, ldc: Any) -> Any:  # fmt: skip
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            address, ta, tb, m, n, k, a, ia, lda, b, ib, ldb, c, ic, ldc = args
            i32, blas_int, f32 = ir.IntType(32), ir.IntType(width), ir.FloatType()

            def count(value: Any) -> Any:
                return builder.trunc(value, blas_int) if width < value.type.width else value

            def at(position: int, array: Any, offset: Any) -> Any:
                data = context.make_array(signature.args[position])(context, builder, array).data
                return builder.gep(data, [offset])

            def flag(transposed: Any) -> Any:
                return builder.select(builder.icmp_signed("!=", transposed, ir.Constant(transposed.type, 0)),
                                      ir.Constant(i32, _TRANS), ir.Constant(i32, _NO_TRANS))  # fmt: skip

            values = [ir.Constant(i32, _ROW_MAJOR), flag(ta), flag(tb), count(m), count(n), count(k), ir.Constant(f32, 1.0),
                      at(6, a, ia), count(lda), at(9, b, ib), count(ldb), ir.Constant(f32, 0.0), at(12, c, ic), count(ldc)]  # fmt: skip
            fnty = ir.FunctionType(ir.VoidType(), [v.type for v in values])
            builder.call(builder.inttoptr(address, fnty.as_pointer()), values)
            return context.get_dummy_value()

        i64 = types.int64
        return types.none(i64, i64, i64, i64, i64, i64, a, i64, i64, b, i64, i64, c, i64, i64), codegen

    return sgemm


_sgemm32, _sgemm64 = _sgemm(32), _sgemm(64)


@kernel
def product_64(x, w, o, ctl, ka, m, n, k):
    """``o = x @ w`` ([m, k] by [k, n]) by a BLAS with 64-bit integers: ``ctl[ka]`` holds the
    address of the array holding sgemm's address."""
    _sgemm64(_load(ctl[ka]), 0, 0, np.int64(m), np.int64(n), np.int64(k), x, 0, np.int64(k), w, 0, np.int64(n), o, 0, np.int64(n))


@kernel
def product_32(x, w, o, ctl, ka, m, n, k):
    """:func:`product_64` for a BLAS with 32-bit integers."""
    _sgemm32(_load(ctl[ka]), 0, 0, np.int64(m), np.int64(n), np.int64(k), x, 0, np.int64(k), w, 0, np.int64(n), o, 0, np.int64(n))


@kernel
def batch_product_64(lhs, rhs, o, lb, rb, ctl, ka, m, n, k, ta, tb, lda, ldb):
    """``o[b] = op(lhs at lb[b]) @ op(rhs at rb[b])`` for every output batch ``b`` (BATCH_MATMUL:
    ``ta``, ``tb`` its adjoints, ``lda``, ``ldb`` its operands' row lengths as stored)."""
    address = _load(ctl[ka])
    for b in range(lb.size):
        _sgemm64(address, np.int64(ta), np.int64(tb), np.int64(m), np.int64(n), np.int64(k), lhs, lb[b], np.int64(lda),
                 rhs, rb[b], np.int64(ldb), o, np.int64(b * m * n), np.int64(n))  # fmt: skip


@kernel
def batch_product_32(lhs, rhs, o, lb, rb, ctl, ka, m, n, k, ta, tb, lda, ldb):
    """:func:`batch_product_64` for a BLAS with 32-bit integers."""
    address = _load(ctl[ka])
    for b in range(lb.size):
        _sgemm32(address, np.int64(ta), np.int64(tb), np.int64(m), np.int64(n), np.int64(k), lhs, lb[b], np.int64(lda),
                 rhs, rb[b], np.int64(ldb), o, np.int64(b * m * n), np.int64(n))  # fmt: skip
