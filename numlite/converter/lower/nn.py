"""Neural-network ops: convolutions, matrix products, pooling, batch normalization.

Weight layouts change here (TF's HWIO filters become TFLite's OHWI, MatMul's [K, N] weights
become FULLY_CONNECTED's [N, K]) with ordinary TRANSPOSE/RESHAPE ops, which ``emit`` folds
away when the weights are constants. Bias additions, scales and activations that follow, and
explicit padding before a convolution, are fused into these ops afterwards by the model-level
optimizer. TFLite's kernels for these ops are float32 (or quantized) only, so other types are
refused here rather than left for the runtime to reject.
"""

from __future__ import annotations

import numpy as np

from numlite.converter.builder import TensorRef
from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input
from numlite.converter.lowering import SubgraphLowering

_PADDING = {"SAME": 0, "VALID": 1}


def _channels_last(cx: SubgraphLowering, node: Node) -> None:
    if node.attrs.get("data_format", "NHWC") not in ("NHWC", "NDHWC"):
        raise cx.fail(node, f"data_format {node.attrs['data_format']} is not supported (only channels-last)")


def _float32(cx: SubgraphLowering, node: Node, *tensors: TensorRef) -> None:
    for t in tensors:
        if t.type != "FLOAT32":
            raise cx.fail(node, f"{t.type} is not supported (TFLite's kernels for {node.op} are float32)")


def _static_dim(cx: SubgraphLowering, node: Node, x: TensorRef, axis: int, what: str) -> int:
    if x.shape is None or len(x.shape) <= axis or x.shape[axis] < 0:
        raise cx.fail(node, f"dimension {axis} of the {what} must be known at conversion time")
    return x.shape[axis]


def _zero_bias(cx: SubgraphLowering, node: Node, channels: int) -> TensorRef:
    """LiteRT's CONV_2D needs a bias input; a zero one, which bias folding later replaces."""
    return cx.const(np.zeros(channels, np.float32), f"{node.name}/bias")


def _padding(cx: SubgraphLowering, node: Node, x: TensorRef) -> tuple[TensorRef, int]:
    """The TFLite padding code, with EXPLICIT padding done by a PAD before the op (which the
    optimizer turns back into SAME padding when the amounts are SAME's)."""
    padding = node.attrs.get("padding", "VALID")
    if padding in _PADDING:
        return x, _PADDING[padding]
    if padding != "EXPLICIT":
        raise cx.fail(node, f"padding {padding!r} is not supported")
    pads = np.array(node.attrs["explicit_paddings"], np.int32).reshape(-1, 2)
    shape = None if x.shape is None else tuple(d if d < 0 else d + int(p.sum()) for d, p in zip(x.shape, pads))
    padded = cx.emit1("PAD", [x, cx.const(pads, f"{node.name}/paddings")], cx.spec(f"{node.name}/padded", shape, x.type))
    return padded, _PADDING["VALID"]


def _window(node: Node) -> dict[str, int]:
    """Strides and dilations of a 2-D window op, as TFLite options."""
    strides, dilations = node.attrs.get("strides", [1] * 4), node.attrs.get("dilations", [1] * 4)
    return dict(stride_h=strides[1], stride_w=strides[2],
                dilation_h_factor=dilations[1], dilation_w_factor=dilations[2])


def transpose(cx: SubgraphLowering, x: TensorRef, perm: tuple[int, ...], name: str) -> TensorRef:
    """``x`` with its axes permuted (a constant when ``x`` is one)."""
    shape = None if x.shape is None else tuple(x.shape[p] for p in perm)
    return cx.emit1("TRANSPOSE", [x, cx.const(np.array(perm, np.int32), f"{name}/perm")], cx.spec(name, shape, x.type))


def reshape(cx: SubgraphLowering, x: TensorRef, shape: tuple[int, ...], name: str) -> TensorRef:
    """``x`` reshaped to a static ``shape`` (a constant when ``x`` is one)."""
    target = cx.const(np.array(shape, np.int32), f"{name}/shape")
    return cx.emit1("RESHAPE", [x, target], cx.spec(name, shape, x.type))


@lowers("Conv2D")
def conv2d(cx: SubgraphLowering, node: Node):
    """CONV_2D; grouped when the input has a multiple of the filter's input channels (TFLite's
    CONV_2D derives the group count the same way)."""
    _channels_last(cx, node)
    x, w = cx.input(node, 0), cx.input(node, 1)
    _float32(cx, node, x, w)
    bias = _zero_bias(cx, node, _static_dim(cx, node, w, 3, "filter"))
    x, padding = _padding(cx, node, x)
    weights = transpose(cx, w, (3, 0, 1, 2), f"{node.name}/filter")  # HWIO -> OHWI
    return [cx.emit1("CONV_2D", [x, weights, bias], cx.out(node), padding=padding, **_window(node))]


@lowers("DepthwiseConv2dNative")
def depthwise_conv2d(cx: SubgraphLowering, node: Node):
    _channels_last(cx, node)
    x, w = cx.input(node, 0), cx.input(node, 1)
    _float32(cx, node, x, w)
    if w.shape is None or any(d < 0 for d in w.shape):
        raise cx.fail(node, "the filter's shape must be static")
    x, padding = _padding(cx, node, x)
    kh, kw, channels, multiplier = w.shape
    weights = reshape(cx, w, (1, kh, kw, channels * multiplier), f"{node.name}/filter")
    bias = _zero_bias(cx, node, channels * multiplier)
    return [cx.emit1("DEPTHWISE_CONV_2D", [x, weights, bias], cx.out(node), padding=padding,
                     depth_multiplier=multiplier, **_window(node))]


@lowers("Conv2DBackpropInput")
def transpose_conv(cx: SubgraphLowering, node: Node):
    """TRANSPOSE_CONV (Keras Conv2DTranspose): TFLite has no dilated or explicitly padded one."""
    _channels_last(cx, node)
    w, x = cx.input(node, 1), cx.input(node, 2)
    _float32(cx, node, x, w)
    if any(d != 1 for d in node.attrs.get("dilations", [1] * 4)):
        raise cx.fail(node, "dilated transposed convolution is not supported (TFLite's TRANSPOSE_CONV has no dilation)")
    padding = node.attrs.get("padding", "VALID")
    if padding not in _PADDING:
        raise cx.fail(node, f"padding {padding!r} is not supported (TFLite's TRANSPOSE_CONV has SAME or VALID only)")
    strides = node.attrs.get("strides", [1] * 4)
    weights = transpose(cx, w, (2, 0, 1, 3), f"{node.name}/filter")  # H W Out In -> Out H W In
    return [cx.emit1("TRANSPOSE_CONV", [int32_input(cx, node, 0), weights, x, None], cx.out(node),
                     padding=_PADDING[padding], stride_h=strides[1], stride_w=strides[2])]


def _window_3d(node: Node) -> dict[str, int]:
    """Strides and dilations of a 3-D convolution (NDHWC), as TFLite options."""
    strides, dilations = node.attrs.get("strides", [1] * 5), node.attrs.get("dilations", [1] * 5)
    options = {}
    for k, axis in enumerate("dhw", start=1):
        options[f"stride_{axis}"] = strides[k]
        options[f"dilation_{axis}_factor"] = dilations[k]
    return options


def _same_or_valid(cx: SubgraphLowering, node: Node) -> int:
    padding = node.attrs.get("padding", "VALID")
    if padding not in _PADDING:
        raise cx.fail(node, f"padding {padding!r} is not supported")
    return _PADDING[padding]


@lowers("Conv3D")
def conv3d(cx: SubgraphLowering, node: Node):
    """CONV_3D: TF's [kd, kh, kw, in, out] filters are TFLite's layout already."""
    _channels_last(cx, node)
    x, w = cx.input(node, 0), cx.input(node, 1)
    _float32(cx, node, x, w)
    if x.rank != 5:
        raise cx.fail(node, "the input must be NDHWC (rank 5)")
    return [cx.emit1("CONV_3D", [x, w], cx.out(node), padding=_same_or_valid(cx, node), **_window_3d(node))]


@lowers("Conv3DBackpropInputV2")
def conv3d_transpose(cx: SubgraphLowering, node: Node):
    """CONV_3D_TRANSPOSE: TF's filter [kd, kh, kw, out's channels, input's channels] is
    TFLite's layout already; the output shape becomes int32."""
    _channels_last(cx, node)
    w, x = cx.input(node, 1), cx.input(node, 2)
    _float32(cx, node, x, w)
    return [cx.emit1("CONV_3D_TRANSPOSE", [int32_input(cx, node, 0), w, x], cx.out(node),
                     padding=_same_or_valid(cx, node), **_window_3d(node))]


@lowers("MatMul", "SparseMatMul")
def matmul(cx: SubgraphLowering, node: Node):
    """FULLY_CONNECTED when ``b`` is a constant (the weights), else (or when ``a`` is to be
    transposed, which BATCH_MATMUL does without an extra TRANSPOSE) BATCH_MATMUL. (TF1's
    SparseMatMul is a MatMul whose sparsity flags only choose a kernel.)"""
    a, b = cx.input(node, 0), cx.input(node, 1)
    _float32(cx, node, a, b)
    transpose_a, transpose_b = bool(node.attrs.get("transpose_a")), bool(node.attrs.get("transpose_b"))
    if b.value is None or transpose_a:
        return [cx.emit1("BATCH_MATMUL", [a, b], cx.out(node), adj_x=transpose_a, adj_y=transpose_b)]
    weights = b if transpose_b else transpose(cx, b, (1, 0), f"{node.name}/weights")
    return [cx.emit1("FULLY_CONNECTED", [a, weights, None], cx.out(node))]


@lowers("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def batch_matmul(cx: SubgraphLowering, node: Node):
    x, y = cx.input(node, 0), cx.input(node, 1)
    _float32(cx, node, x, y)
    adj_x, adj_y = bool(node.attrs.get("adj_x")), bool(node.attrs.get("adj_y"))
    if y.value is not None and y.rank == 2 and not adj_x:
        # A batch of rows times one constant matrix: a fully connected layer keeping the batch dims.
        weights = y if adj_y else transpose(cx, y, (1, 0), f"{node.name}/weights")
        return [cx.emit1("FULLY_CONNECTED", [x, weights, None], cx.out(node), keep_num_dims=True)]
    return [cx.emit1("BATCH_MATMUL", [x, y], cx.out(node), adj_x=adj_x, adj_y=adj_y)]


def _pool(op_name: str):
    def lower(cx: SubgraphLowering, node: Node):
        _channels_last(cx, node)
        x = cx.input(node, 0)
        _float32(cx, node, x)
        ksize, strides = node.attrs["ksize"], node.attrs["strides"]
        if ksize[0] != 1 or ksize[3] != 1 or strides[0] != 1 or strides[3] != 1:
            raise cx.fail(node, "pooling over the batch or channel dimension is not supported")
        padding = node.attrs.get("padding", "VALID")
        if padding not in _PADDING:
            raise cx.fail(node, f"padding {padding!r} is not supported")
        return [cx.emit1(op_name, [x], cx.out(node), padding=_PADDING[padding],
                         stride_h=strides[1], stride_w=strides[2], filter_height=ksize[1], filter_width=ksize[2])]

    return lower


lowers("MaxPool")(_pool("MAX_POOL_2D"))
lowers("AvgPool")(_pool("AVERAGE_POOL_2D"))


@lowers("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def fused_batch_norm(cx: SubgraphLowering, node: Node):
    """Inference batch norm as ``x * scale + offset`` with both folded from the statistics
    (the optimizer then folds them into a convolution before it)."""
    _channels_last(cx, node)
    if node.attrs.get("is_training", False):
        raise cx.fail(node, "batch norm in training mode cannot be converted (use training=False)")
    x, gamma, beta, mean, variance = (cx.input(node, i) for i in range(5))
    _float32(cx, node, x, gamma, beta, mean, variance)
    eps = np.array(node.attrs.get("epsilon", 1e-3), np.float32)
    spec = lambda name, shape: cx.spec(f"{node.name}/{name}", shape, "FLOAT32")  # noqa: E731
    channels = gamma.shape
    inv = cx.emit1("RSQRT", [cx.emit1("ADD", [variance, cx.const(eps, f"{node.name}/epsilon")], spec("var_eps", channels))],
                   spec("inv_std", channels))
    scale = cx.emit1("MUL", [gamma, inv], spec("scale", channels))
    offset = cx.emit1("SUB", [beta, cx.emit1("MUL", [mean, scale], spec("mean_scale", channels))], spec("offset", channels))
    scaled = cx.emit1("MUL", [x, scale], spec("scaled", cx.out(node).shape))
    y = cx.emit1("ADD", [scaled, offset], cx.out(node))
    # In inference mode the batch statistics TF returns are the given ones; the reserve
    # spaces are opaque to every consumer but the gradient.
    return [y, mean, variance, mean, variance] + [mean] * (len(node.outputs) - 5)
