"""numlite's exceptions: one base class, one subclass per kind of failure.

Where ``tf.lite.Interpreter`` raises ``ValueError`` or ``RuntimeError`` the matching numlite
error also derives from that built-in, so scripts written against tf.lite keep catching it.
"""

from __future__ import annotations


class NumliteError(Exception):
    """Base class of every error numlite raises on purpose."""


class ModelError(NumliteError, ValueError):
    """The model file is malformed: not a flatbuffer, truncated, or inconsistent."""


class UnsupportedOperatorError(NumliteError, ValueError):
    """The model uses operators numlite has no kernel for (all of them are listed)."""


class InvalidInputError(NumliteError, ValueError):
    """A value given by the caller has the wrong dtype, shape or index."""


class ResizeError(InvalidInputError, RuntimeError):
    """``resize_tensor_input`` was asked for an impossible shape (LiteRT raises RuntimeError)."""


class StateError(NumliteError, RuntimeError):
    """A call was made in the wrong order, e.g. ``invoke`` before ``allocate_tensors``."""


class PrepareError(NumliteError, ValueError):
    """An operator rejected its inputs while tensors were being allocated."""


class InvokeError(NumliteError, RuntimeError):
    """An operator failed while the model ran; the message names subgraph, node and op."""


class CancelledError(NumliteError, RuntimeError):
    """``invoke`` was stopped by ``Interpreter.cancel()`` or the ``check_cancelled`` callback."""


class ConversionError(NumliteError, ValueError):
    """A TensorFlow program cannot be converted; the message names the TF nodes and ops."""


class UnavailableError(NumliteError, NotImplementedError, AttributeError):
    """A LiteRT API that only makes sense with LiteRT's C++ runtime (its native handle, its C++
    wrapper object); the message says what numlite offers instead. An AttributeError too, so
    that ``hasattr(interpreter, "_interpreter")`` is False."""
