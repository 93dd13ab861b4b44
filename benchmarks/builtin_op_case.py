"""The case format of the builtin operator sweep (benchmarks/builtin_ops.py).

One :class:`OpCase` is one form of one LiteRT BuiltinOperator: a one-op model written with
numlite's writer and the inputs to feed it. The sweep runs every case in LiteRT's builtin
resolver and in numlite and compares the outputs. Case files (benchmarks/builtin_op_cases.py,
benchmarks/builtin_op_cases_stablehlo.py) each define ``CASES: list[OpCase]`` and
``NOT_RUNNABLE: dict[str, str]`` (op -> why no one-op model exists or LiteRT cannot run it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class OpCase:
    op: str                      # BuiltinOperator name, e.g. "CONV_2D"
    form: str                    # short id of the variant, e.g. "f32-r4-same-s2", unique per op
    build: Callable[[], tuple[bytes, list[np.ndarray]]]   # model bytes (numlite's writer), inputs
    rtol: float = 1e-5; atol: float = 1e-5                  # float32 tolerances (say why if larger)
    check: Callable | None = None  # optional custom comparison (random ops), gets (litert_outs, numlite_outs)
