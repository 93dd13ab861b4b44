"""The converter: TensorFlow programs to standard ``.tflite`` models.

Importing this package imports TensorFlow (the ``convert`` extra); the interpreter never does.
"""

from numlite.startup_logs import import_tensorflow

import_tensorflow()  # first, so TensorFlow's start-up notices are hidden (numlite/startup_logs.py)

from numlite.converter.api import ConversionReport, TFLiteConverter
from numlite.converter.quantize import Optimize

__all__ = ["TFLiteConverter", "ConversionReport", "Optimize"]
