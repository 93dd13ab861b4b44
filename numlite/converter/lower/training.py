"""Losses and gradients, which exported training graphs (and some inference graphs) contain:
the element-wise activation gradients, BiasAddGrad, L2Loss and the softmax cross entropies.

Each is a few builtins computing TensorFlow's formula (float32 only, as TFLite's kernels).
"""

from __future__ import annotations

import numpy as np

from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input
from numlite.converter.lower.elementwise import SELU_SCALE, SELU_SCALE_ALPHA, Composer, _float_input
from numlite.converter.lowering import SubgraphLowering


@lowers("SigmoidGrad")
def sigmoid_grad(cx: SubgraphLowering, node: Node):
    """``dy * y * (1 - y)`` for ``y = sigmoid(x)``."""
    y, dy = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    return [c.op("MUL", dy, c.op("MUL", y, c.op("SUB", c.const(1.0), y)))]


@lowers("TanhGrad")
def tanh_grad(cx: SubgraphLowering, node: Node):
    """``dy * (1 - y^2)`` for ``y = tanh(x)``."""
    y, dy = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    return [c.op("MUL", dy, c.op("SUB", c.const(1.0), c.op("MUL", y, y)))]


@lowers("SqrtGrad")
def sqrt_grad(cx: SubgraphLowering, node: Node):
    """``dy * 0.5 / y`` for ``y = sqrt(x)``."""
    y, dy = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    return [c.op("DIV", c.op("MUL", dy, c.const(0.5)), y)]


@lowers("RsqrtGrad")
def rsqrt_grad(cx: SubgraphLowering, node: Node):
    """``y^3 * (dy / -2)`` for ``y = rsqrt(x)``, in TensorFlow's order."""
    y, dy = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    return [c.op("MUL", c.op("MUL", c.op("MUL", y, y), y), c.op("MUL", dy, c.const(-0.5)))]


@lowers("SeluGrad")
def selu_grad(cx: SubgraphLowering, node: Node):
    """``g * scale`` where the SELU output is positive, else ``g * (output + scale * alpha)``."""
    gradients, outputs = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    positive = c.test("GREATER", outputs, c.const(0.0))
    negative_side = c.op("MUL", gradients, c.op("ADD", outputs, c.const(SELU_SCALE_ALPHA)))
    return [c.select(positive, c.op("MUL", gradients, c.const(SELU_SCALE)), negative_side)]


@lowers("ReluGrad", "Relu6Grad")
def relu_grad(cx: SubgraphLowering, node: Node):
    """The gradient where the ReLU (ReLU6) input is inside (0, 6): TF passes it where
    ``features > 0`` (and ``< 6``), else 0."""
    gradients, features = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    zero = c.const(0.0)
    inside = c.test("GREATER", features, zero)
    if node.op == "Relu6Grad":
        inside = c.test("LOGICAL_AND", inside, c.test("LESS", features, c.const(6.0)))
    return [c.select(inside, gradients, zero)]


@lowers("LeakyReluGrad")
def leaky_relu_grad(cx: SubgraphLowering, node: Node):
    """The gradient where ``features > 0``, else ``alpha`` times it."""
    gradients, features = _float_input(cx, node, 0), _float_input(cx, node, 1)
    c = Composer(cx, node)
    alpha = float(node.attrs.get("alpha", 0.2))
    positive = c.test("GREATER", features, c.const(0.0))
    return [c.select(positive, gradients, c.op("MUL", gradients, c.const(alpha)))]


@lowers("BiasAddGrad")
def bias_add_grad(cx: SubgraphLowering, node: Node):
    """The sum over every axis but the channels (the last, or axis 1 for NCHW)."""
    grad = _float_input(cx, node, 0)
    if grad.rank is None:
        raise cx.fail(node, "the gradient's rank must be known")
    channel = 1 if node.attrs.get("data_format", "NHWC") in ("NCHW", "NC...") else grad.rank - 1
    axes = np.array([a for a in range(grad.rank) if a != channel], np.int32)
    return [cx.emit1("SUM", [grad, cx.const(axes, f"{node.name}/axes")], cx.out(node), keep_dims=False)]


@lowers("L2Loss")
def l2_loss(cx: SubgraphLowering, node: Node):
    """``sum(x^2) / 2``."""
    x = _float_input(cx, node, 0)
    if x.rank is None:
        raise cx.fail(node, "the input's rank must be known")
    c = Composer(cx, node)
    squares = c.op("MUL", x, x, shape=x.shape)
    axes = cx.const(np.arange(x.rank, dtype=np.int32), f"{node.name}/axes")
    return [c.op("MUL", c.op("SUM", squares, axes, keep_dims=False), c.const(0.5))]


def _cross_entropy(cx: SubgraphLowering, node: Node, logits, labels) -> list:
    """Loss ``sum(-labels * log_softmax(logits))`` over the last axis, and its gradient
    ``softmax(logits) - labels``, for [batch, classes] inputs."""
    c = Composer(cx, node)
    log_probabilities = c.op("LOG_SOFTMAX", logits, shape=logits.shape)
    products = c.op("MUL", log_probabilities, c.op("NEG", labels, shape=labels.shape), shape=logits.shape)
    axis = cx.const(np.array([-1], np.int32), f"{node.name}/axis")
    loss = cx.emit1("SUM", [products, axis], cx.out(node, 0), keep_dims=False)
    softmax = c.op("SOFTMAX", logits, shape=logits.shape, beta=1.0)
    return [loss, cx.emit1("SUB", [softmax, labels], cx.out(node, 1))]


@lowers("SoftmaxCrossEntropyWithLogits")
def softmax_cross_entropy(cx: SubgraphLowering, node: Node):
    logits, labels = _float_input(cx, node, 0), _float_input(cx, node, 1)
    if logits.rank != 2 or labels.rank != 2:
        raise cx.fail(node, "logits and labels must be [batch, classes] matrices")
    return _cross_entropy(cx, node, logits, labels)


@lowers("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy(cx: SubgraphLowering, node: Node):
    """The dense form on ONE_HOT labels. (A label outside [0, classes) is an error in TF's CPU
    kernel; here its one-hot row is all zeros.)"""
    logits = _float_input(cx, node, 0)
    if logits.rank != 2 or logits.shape[1] < 0:
        raise cx.fail(node, "the logits must be a [batch, classes] matrix with a static number of classes")
    c = Composer(cx, node)
    depth = cx.const(np.array(logits.shape[1], np.int32), f"{node.name}/depth")
    labels = c.op("ONE_HOT", int32_input(cx, node, 1), depth, c.const(1.0), c.const(0.0), type_="FLOAT32",
                  shape=logits.shape, axis=-1)
    return _cross_entropy(cx, node, logits, labels)
