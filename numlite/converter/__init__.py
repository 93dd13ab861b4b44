"""The converter: TensorFlow programs to standard ``.tflite`` models.

Importing this package imports TensorFlow (the ``convert`` extra); the interpreter never does.
"""

from numlite.converter.api import ConversionReport, TFLiteConverter
from numlite.converter.quantize import Optimize

__all__ = ["TFLiteConverter", "ConversionReport", "Optimize"]
