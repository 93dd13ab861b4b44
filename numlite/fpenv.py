"""The C library's floating-point environment calls (``fegetenv``/``fesetenv``), shared by the
interpreter's denormal flushing and the kernels' worker threads (which take the caller's mode)."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any


def load_libm() -> Any:
    """The C math library with ``fegetenv`` and ``fesetenv``, or None where it has not both."""
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        libm.fegetenv, libm.fesetenv  # noqa: B018 - both must exist
        return libm
    except (OSError, AttributeError):
        return None
