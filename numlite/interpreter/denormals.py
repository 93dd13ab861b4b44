"""Denormal floats treated as zero while a model runs, as LiteRT's default (XNNPACK) kernels do.

Arithmetic on denormal (subnormal) floats takes a slow microcode path on most CPUs: NumPy's
``exp`` and ``sqrt`` run about 15 times slower on them. LiteRT's default delegate sets the CPU's
flush-to-zero and denormals-are-zero modes while it runs, so a denormal input reads as 0 and a
denormal result is stored as 0. numlite does the same around ``invoke``: it sets those modes in
the floating-point environment of the invoking thread (the MXCSR register on x86-64, FPCR on
AArch64, through the C library's ``fegetenv``/``fesetenv``) and restores the caller's
environment afterwards, so code outside the interpreter is unaffected. On other platforms the
context manager does nothing and ``SUPPORTED`` is False.
"""

from __future__ import annotations

import ctypes
import platform
from typing import Any

from numlite.fpenv import load_libm

_MACHINE = platform.machine().lower()


class _X86Env(ctypes.Structure):  # glibc's fenv_t on x86-64: x87 state, then MXCSR
    _fields_ = [("x87", ctypes.c_uint16 * 14), ("mxcsr", ctypes.c_uint32)]


class _Arm64Env(ctypes.Structure):  # glibc's fenv_t on AArch64
    _fields_ = [("fpcr", ctypes.c_uint32), ("fpsr", ctypes.c_uint32)]


_FLUSH_BITS = {
    "x86_64": (_X86Env, "mxcsr", 0x8000 | 0x0040),  # FTZ | DAZ
    "amd64": (_X86Env, "mxcsr", 0x8000 | 0x0040),
    "aarch64": (_Arm64Env, "fpcr", 1 << 24),  # FZ: flushes inputs and results
    "arm64": (_Arm64Env, "fpcr", 1 << 24),
}


_LIBM = load_libm() if _MACHINE in _FLUSH_BITS else None
SUPPORTED = _LIBM is not None


class FlushDenormals:
    """Context manager: denormals are zero inside, the caller's FP environment restored after.

    Entering reads the caller's environment and sets it with the flush bits added; the
    flushing environment is derived again only when the caller's differs from the last one
    seen (an invoke costs two C calls, not a copy and two field updates as well)."""

    __slots__ = ("_saved", "_flushing", "_last", "_saved_ref", "_flushing_ref")

    def __init__(self) -> None:
        env_type, _, _ = _FLUSH_BITS.get(_MACHINE, (_X86Env, "", 0))
        self._saved = env_type()
        self._flushing = env_type()
        self._last = b""  # the caller's environment the flushing one was derived from
        self._saved_ref, self._flushing_ref = ctypes.byref(self._saved), ctypes.byref(self._flushing)

    def __enter__(self) -> FlushDenormals:
        if _LIBM is not None:
            _LIBM.fegetenv(self._saved_ref)
            saved = bytes(self._saved)
            if saved != self._last:
                _, field, bits = _FLUSH_BITS[_MACHINE]
                ctypes.memmove(self._flushing_ref, self._saved_ref, ctypes.sizeof(self._saved))
                setattr(self._flushing, field, getattr(self._saved, field) | bits)
                self._last = saved
            _LIBM.fesetenv(self._flushing_ref)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _LIBM is not None:
            _LIBM.fesetenv(self._saved_ref)
