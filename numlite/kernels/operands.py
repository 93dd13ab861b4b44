"""Operand unpacking and shape checks shared by the float, hybrid (int8 weights) and integer
kernels of the same op, so that the three forms refuse the same models with the same words.

Imports only ``base``: the float kernel modules import ``hybrid``, which imports this.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numlite.kernels.base import Kernel, TensorInfo

# LiteRT's FULLY_CONNECTED accepts only clamping activations: NONE, RELU, RELU_N1_TO_1 and
# RELU6 (TANH and SIGN_BIT fail to prepare).
FC_ACTIVATIONS = (0, 1, 2, 3)


def input_weights_bias(ins: Sequence) -> tuple:
    """``(input, weights, bias or None)`` of an op taking (input, weights[, bias])."""
    return ins[0], ins[1], (ins[2] if len(ins) == 3 else None)


def fully_connected_options(kernel: Kernel):
    """FULLY_CONNECTED's options, checked: the DEFAULT weights format, a clamping activation."""
    opts = kernel.options
    if opts is None:
        raise kernel.fail("missing options")
    if opts.weights_format != 0:
        raise kernel.fail(f"weights format {opts.weights_format} is not supported (only DEFAULT)")
    if opts.fused_activation_function not in FC_ACTIVATIONS:
        raise kernel.fail(f"fused activation {opts.fused_activation_function} is not supported by FULLY_CONNECTED")
    return opts


def fully_connected_shape(
    kernel: Kernel, x: TensorInfo, w: TensorInfo, bias: TensorInfo | None, whole_rows: bool
) -> tuple[int, tuple[int, ...]]:
    """Checks FULLY_CONNECTED's weights ``[units, depth]`` and bias; ``(depth, output shape)``.

    ``whole_rows``: the input must be a whole number of rows of ``depth`` (the quantized
    kernels); the float kernel instead reads the leading ``size // depth`` rows.
    """
    if w.ndim != 2:
        raise kernel.fail(f"weights must have rank 2, got shape {w.shape}")
    units, depth = w.shape
    if bias is not None and bias.size != units:
        raise kernel.fail(f"bias has {bias.size} elements, expected {units}")
    if whole_rows and (depth == 0 or x.size % depth):
        raise kernel.fail(f"input of shape {x.shape} is not a whole number of rows of {depth}")
    if kernel.options.keep_num_dims:
        if x.ndim == 0 or x.shape[-1] != depth:
            raise kernel.fail(f"keep_num_dims needs the input's last dimension to be {depth}, got shape {x.shape}")
        return depth, tuple(x.shape[:-1]) + (units,)
    if depth == 0:
        return depth, (int(np.prod(x.shape[:-1], dtype=np.int64)), units)
    return depth, (x.size // depth, units)


def batch_matmul_shape(kernel: Kernel, lhs: TensorInfo, rhs: TensorInfo, adj_x: bool, adj_y: bool) -> tuple[int, ...]:
    """Checks BATCH_MATMUL's operands (rank 2 to 5, broadcast batch dimensions, matching inner
    dimensions after ``adj_x`` / ``adj_y``); the output shape."""
    for t in (lhs, rhs):
        if not 2 <= t.ndim <= 5:
            raise kernel.fail(f"inputs must have rank 2 to 5, got shape {t.shape}")
    rank = max(lhs.ndim, rhs.ndim)
    a = (1,) * (rank - lhs.ndim) + tuple(lhs.shape)
    b = (1,) * (rank - rhs.ndim) + tuple(rhs.shape)
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise kernel.fail(f"batch dimensions of {lhs.shape} and {rhs.shape} do not broadcast") from None
    rows, inner_a = (a[-1], a[-2]) if adj_x else (a[-2], a[-1])
    inner_b, cols = (b[-1], b[-2]) if adj_y else (b[-2], b[-1])
    if inner_a != inner_b:
        raise kernel.fail(f"cannot multiply {lhs.shape} by {rhs.shape} (adj_x={adj_x}, adj_y={adj_y})")
    return tuple(int(d) for d in batch) + (int(rows), int(cols))


def adjoint_options(kernel: Kernel) -> tuple[bool, bool]:
    """BATCH_MATMUL's ``(adj_x, adj_y)`` (both False without options)."""
    opts = kernel.options
    return (bool(opts.adj_x), bool(opts.adj_y)) if opts is not None else (False, False)


def transpose_conv_operands(ins: Sequence) -> tuple:
    """``(output_shape, weights, input, bias or None)`` of TRANSPOSE_CONV."""
    return ins[0], ins[1], ins[2], (ins[3] if len(ins) == 4 else None)
