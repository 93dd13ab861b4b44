"""Flatbuffer bindings of schema tables newer than the ``tflite`` package's.

The ``tflite`` bindings (2.18) stop at STABLEHLO_CBRT; LiteRT 2.3's schema goes on with
STABLEHLO_CASE and its ``StablehloCaseOptions`` table (BuiltinOptions2 member 23). Each module
here is what ``flatc --python`` makes of one such table, in the same layout as the package's
modules, so that :mod:`numlite.model.schema` reads and writes it by the same reflection.
"""
