"""numlite: run and build TensorFlow Lite models in NumPy.

>>> import numlite
>>> interpreter = numlite.Interpreter(model_path="model.tflite")
>>> interpreter.allocate_tensors()
"""

from numlite.errors import (
    CancelledError,
    ConversionError,
    InvalidInputError,
    InvokeError,
    ModelError,
    NumliteError,
    PrepareError,
    ResizeError,
    StateError,
    UnavailableError,
    UnsupportedOperatorError,
)
from numlite.interpreter import Interpreter, SignatureRunner
from numlite.interpreter.profiler import profile
from numlite.op_support import OpsReport, ops_report

__version__ = "0.1.0"


def __getattr__(name: str):
    # The converter imports TensorFlow, so it is loaded only when asked for.
    if name in ("TFLiteConverter", "ConversionReport", "Optimize"):
        from numlite import converter

        return getattr(converter, name)
    raise AttributeError(f"module 'numlite' has no attribute {name!r}")

__all__ = [
    "Interpreter",
    "TFLiteConverter",
    "Optimize",
    "SignatureRunner",
    "profile",
    "ops_report",
    "OpsReport",
    "NumliteError",
    "ModelError",
    "UnsupportedOperatorError",
    "InvalidInputError",
    "ResizeError",
    "StateError",
    "PrepareError",
    "InvokeError",
    "CancelledError",
    "ConversionError",
    "UnavailableError",
]
