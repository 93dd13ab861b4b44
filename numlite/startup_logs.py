"""Hide the start-up notices TensorFlow and LiteRT print to stderr, and nothing else.

Importing TensorFlow prints lines such as ``WARNING: All log messages before absl::InitializeLog()
is called are written to STDERR`` and ``cudart_stub.cc:31] Could not find cuda drivers on your
machine, GPU will not be used.`` from C++, straight to file descriptor 2, before
``TF_CPP_MIN_LOG_LEVEL`` is consulted; its first device look-up adds ``failed call to cuInit``
on a machine without a GPU, and LiteRT announces ``INFO: Created TensorFlow Lite XNNPACK delegate
for CPU.``. None of them is about the user's model.

:func:`import_tensorflow` (used by the converter, so by ``numlite convert`` and ``make demo``)
imports TensorFlow and looks up its devices while file descriptor 2 goes to a temporary file,
then writes back every line that is not one of these notices: anything else TensorFlow says at
start-up still reaches stderr, only later. Nothing here changes what TensorFlow computes (oneDNN
stays as the user configured it). This module never imports TensorFlow itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from types import ModuleType
from typing import Iterator

# Whole lines (C++ log prefix and all) that TensorFlow or LiteRT print at start-up.
STARTUP_NOISE = re.compile(
    "|".join(
        [
            r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
            r".*cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used\.",
            r".*failed call to cuInit: .*",
            r".*Unable to register cu(FFT|DNN|BLAS) factory: .*",
            r".*TF-TRT Warning: Could not find TensorRT",
            r".*cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use available CPU .*",
            r"To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.",
            r".*oneDNN custom operations are on\. .*",
            r"INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.",
        ]
    )
)


def drop_startup_noise(text: str) -> str:
    """``text`` without the lines :data:`STARTUP_NOISE` matches (other lines kept in order)."""
    return "".join(line for line in text.splitlines(keepends=True) if not STARTUP_NOISE.fullmatch(line.rstrip("\r\n")))


@contextlib.contextmanager
def startup_noise_hidden() -> Iterator[None]:
    """Within the block, native writes to stderr are held back; on exit all but the noise is written.

    Works on file descriptor 2, where C++ libraries write. It is process-wide: another thread's
    stderr output during the block is delayed to its end, never lost. Where descriptor 2 cannot
    be redirected (closed, or an unusual platform), the block runs with stderr untouched.
    """
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as held:
        _flush_python_stderr()
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            _flush_python_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = drop_startup_noise(held.read().decode("utf-8", "replace"))
            if kept:
                os.write(2, kept.encode("utf-8"))


def import_tensorflow() -> ModuleType:
    """Import TensorFlow without its start-up notices and return it.

    Unless set already, ``TF_CPP_MIN_LOG_LEVEL`` becomes ``"2"``: TensorFlow's C++ INFO and
    WARNING lines are hidden, its errors still shown. If TensorFlow is already imported (by the
    user), nothing is changed.
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with startup_noise_hidden():
        import tensorflow as tf

        # TensorFlow looks for GPUs at its first op and logs cuInit's failure on a machine
        # without one; looking now (it only lists devices) keeps that line inside the filter.
        tf.config.list_physical_devices()
    return tf


def _flush_python_stderr() -> None:
    # Python's own buffered stderr must reach descriptor 2 on the right side of the switch.
    with contextlib.suppress(Exception):
        sys.stderr.flush()
