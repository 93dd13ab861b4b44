"""Matrix products: FULLY_CONNECTED and BATCH_MATMUL (float32), both straight onto BLAS.

FULLY_CONNECTED runs its product in blocks of rows (or of units, for a few rows) through
``parallel``; BLAS threads each product itself (``num_threads``), unless
``parallel.SPLIT_BLAS_KERNELS`` shares the blocks among numlite's threads instead.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import numpy as np

from numlite.kernels import hybrid, parallel
from numlite.kernels.base import Kernel, Spec, TensorInfo, dot_into, register
from numlite.kernels.clamp import clamp
from numlite.kernels.operands import (
    adjoint_options,
    batch_matmul_shape,
    fully_connected_options,
    fully_connected_shape,
    input_weights_bias,
)

FLOAT = np.dtype(np.float32)


@register("FULLY_CONNECTED")
class FullyConnected(Kernel):
    """``output = input @ weights.T + bias`` with weights ``[units, depth]``.

    The input is read as ``[size // depth, depth]`` (any rank; LiteRT takes the leading
    ``batch * depth`` elements). The output is ``[batch, units]``, or the input's shape with
    its last dimension replaced by ``units`` under ``keep_num_dims``.
    """

    derives_weights = True  # its laid-out weights may be dropped under the compiled engine

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if (specs := hybrid.route(self, ins, hybrid.HybridFullyConnected)) is not None:  # int8 weights, float activations
            return specs
        self.expect_inputs(ins, 2, 3)
        x, wts, bias = input_weights_bias(ins)
        opts = fully_connected_options(self)
        for t in (x, wts, bias):
            if t is not None and t.dtype != FLOAT:
                raise self.fail(
                    f"input {t.name!r} has dtype {t.dtype.name}; only float32 is supported"
                    " (or integer activations with quantization parameters, or int8 weights)"
                )
        depth, out_shape = fully_connected_shape(self, x, wts, bias, whole_rows=False)
        self.depth = depth
        self.batch = x.size // depth if depth else 0
        self.activation = clamp(opts)
        self.weights = None if wts.value is None else _weight_operand(wts.value, self.batch)
        units = wts.shape[0]
        work = self.batch * depth * units
        self.threads = parallel.threads_for(self.node, work, blas=True)
        self.run = parallel.runner(self.threads)
        parts = 1 if self.threads == 1 else 3 * self.threads
        # Enough rows: blocks of rows (each reads all the weights, so not thin ones); a few
        # rows (a batch of one): blocks of units.
        self.by_rows = self.batch >= parallel.MIN_BLOCK_ROWS * parts
        self.blocks = parallel.split(self.batch if self.by_rows else units, parts, minimum=16)
        self.bound: tuple | None = None
        return [Spec(out_shape, FLOAT)]

    def _bind(self, x: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
        """Tasks over views of these arrays (rebuilt only when the runtime hands others)."""
        lhs = x.reshape(-1)[: self.batch * self.depth].reshape(self.batch, self.depth)
        out2d = out.reshape(self.batch, -1)
        self.tasks = []
        for a, b in self.blocks:
            if self.by_rows:
                args = (lhs[a:b], weights, bias, out2d[a:b])
            else:
                args = (lhs, weights[:, a:b], None if bias is None else bias[a:b], out2d[:, a:b])
            self.tasks.append(partial(self._block, *args))

    def _block(self, lhs: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, out: np.ndarray, slot: int) -> None:
        np.matmul(lhs, weights, out=out)
        if bias is not None:
            np.add(out, bias, out=out)
        if self.activation is not None:
            self.activation(out)

    def direct(self, ins, outs):
        """One block on this thread (a loop body's small layer): its one call, on views made
        once (see ``numlite.interpreter.runtime.direct_call``)."""
        if self.hybrid is not None or self.threads > 1 or len(self.blocks) != 1 or outs[0] is None:
            return None
        x, wts, bias = input_weights_bias(ins)
        if outs[0].size == 0 or self.depth == 0:
            return None
        self._bind(x, self.weights if self.weights is not None else wts.T, bias, outs[0])
        self.bound = None  # the tasks now hold the program's arrays, maybe not eval's
        task = self.tasks[0]
        lhs, weights, bias, out = task.args
        if self.activation is not None or not out.flags.c_contiguous:
            return task.func, (*task.args, 0)
        # np.dot: the same BLAS product as np.matmul with less overhead per call (0.32 us, not
        # 0.8, on a loop body's [1, 32] x [32, 128]); it needs a C-contiguous output.
        if bias is None:
            return dot_into, (lhs, weights, out)
        if out.shape[0] == 1:  # the bias in the output's shape: an add without broadcasting
            bias = bias.reshape(out.shape)
        return _dot_plus_bias, (lhs, weights, bias, out)

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        x, wts, bias = input_weights_bias(ins)
        out = outs[0]
        if out.size == 0:
            return
        if self.depth == 0:  # LiteRT writes zeros, without the bias
            out.fill(0)
            return
        bound = self.bound
        if bound is None or bound[0] is not x or bound[1] is not wts or bound[2] is not bias or bound[3] is not out:
            # Weights computed at run time (a loop's input) are read through a transposed view,
            # made here: it sees their new values at every eval as long as the array is the same.
            self._bind(x, self.weights if self.weights is not None else wts.T, bias, out)
            self.bound = (x, wts, bias, out)
        self.run(self.tasks)


# A single row against at least this many bytes of weights reads them as stored.
STORED_LAYOUT_BYTES = 1 << 19


def _weight_operand(wts: np.ndarray, rows: int) -> np.ndarray:
    """The constant ``[units, depth]`` weights as the ``[depth, units]`` right operand.

    Transposed once, so that BLAS reads them row-major (a product of a few rows and a
    transposed view runs 1.2-2.5x slower). But one row is a matrix-vector product, bound by
    reading the matrix once in either layout: from about half a MiB of weights it runs as
    fast or faster on the stored one ([1, 784] x [784, 512] 17-18 us against 17-20, [1, 1280]
    x [1280, 1000] 50 against 54; smaller ones lose 10-20% to the view), and a copy would
    double the weights in memory (an MLP's 2 MiB, a classifier head's 5 MiB)."""
    if rows == 1 and wts.nbytes >= STORED_LAYOUT_BYTES:
        return wts.T
    return np.ascontiguousarray(wts.T)


def _dot_plus_bias(lhs: np.ndarray, weights: np.ndarray, bias: np.ndarray, out: np.ndarray) -> None:
    dot_into(lhs, weights, out)
    np.add(out, bias, out)


@register("BATCH_MATMUL")
class BatchMatMul(Kernel):
    """Batched ``lhs @ rhs`` of rank 2 to 5 with broadcast batch dimensions; ``adj_x`` and
    ``adj_y`` transpose the last two dimensions of either operand first."""

    hybrid: Kernel | None = None  # the dynamic-range kernel this node runs, if any

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if (specs := hybrid.route(self, ins, hybrid.HybridBatchMatMul)) is not None:  # int8 weights, float activations
            return specs
        self.expect_inputs(ins, 2)
        lhs, rhs = ins
        for t in (lhs, rhs):
            if t.dtype != FLOAT:
                raise self.fail(
                    f"input {t.name!r} has dtype {t.dtype.name}; only float32 is supported"
                    " (or integer operands with quantization parameters, or an int8 rhs)"
                )
        self.adj_x, self.adj_y = adjoint_options(self)
        shape = batch_matmul_shape(self, lhs, rhs, self.adj_x, self.adj_y)
        self.run = parallel.runner(1)
        return [Spec(shape, FLOAT)]

    def eval(self, ins, outs):
        if self.hybrid is not None:
            return self.hybrid.eval(ins, outs)
        lhs, rhs = ins
        if self.adj_x:
            lhs = lhs.swapaxes(-1, -2)
        if self.adj_y:
            rhs = rhs.swapaxes(-1, -2)
        if self.run is parallel.serial:  # small: no task to build
            np.matmul(lhs, rhs, out=outs[0])
        else:
            self.run([partial(_matmul, lhs, rhs, outs[0])])


def _matmul(lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray, slot: int) -> None:
    np.matmul(lhs, rhs, out=out)
