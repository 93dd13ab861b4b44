"""What every kernel is: a class with ``prepare`` and ``eval``, registered by op name.

``prepare(ins)`` runs at allocation (and again only when input shapes change). It receives one
:class:`TensorInfo` per input (``None`` for an omitted optional input), validates them and
returns one :class:`Spec` per output: its shape and dtype. A shape of ``None`` means "known only
after eval" (data-dependent ops such as WHERE); the runtime then hands eval ``None`` in that
output slot and the kernel stores its result there.

``eval(ins, outs)`` computes: ``ins`` are input arrays, ``outs`` preallocated output arrays
(views into the arena) that the kernel fills in place, e.g. with ``np.add(a, b, out=outs[0])``.

A kernel instance belongs to one operator node and may keep whatever prepare computed (axes,
padding plans, reshaped weights) on ``self`` for eval to use.

Quantized kernels. An op whose int8/uint8/int16 form is affine-quantized integer arithmetic
(ADD, CONV_2D, SOFTMAX...) has a second class, registered with ``quantized=True``::

    @register("ADD", quantized=True)
    class QuantizedAdd(Kernel): ...

Registering both an op's plain kernel and its quantized one makes ``KERNELS[op]`` a dispatcher
(:class:`QuantizedDispatch`, either order of registration): its prepare picks the quantized class
when ``QuantizedAdd.handles(ins)`` is true, by default when the first input is int8, uint8 or
int16 and carries a quantization scale (override the classmethod for other rules), else the
plain class, and hands the node to a fresh instance of that class. eval, ``foldable`` and
``reads_only_shapes`` are then the chosen kernel's. ``QUANTIZED_KERNELS`` lists the quantized
classes by op name. An op with only a quantized form (QUANTIZE) registers normally. A subclass
of a dispatcher that overrides eval still works: its ``super().eval`` runs the chosen kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from numlite.errors import PrepareError
from numlite.model.ir import Options, Quantization

FLEXBUFFERS = 0  # the one CustomOptionsFormat the schema defines


class Spec(NamedTuple):
    """Shape and dtype of one output, as prepare infers it (shape None: data-dependent)."""

    shape: tuple[int, ...] | None
    dtype: np.dtype


@dataclass
class TensorInfo:
    """What prepare may know of an input: shape, dtype, and its value when it is already known
    (a constant, or an output the runtime could compute at prepare time)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None = None
    quantization: Quantization | None = None
    name: str = ""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Node:
    """Where a kernel sits: the operator, its place in the model and the runtime around it."""

    op_name: str
    index: int
    subgraph_index: int
    options: Options | None
    custom_options: bytes | None
    inputs: list[int]
    outputs: list[int]
    runtime: Any = None  # the SubgraphRuntime running this node (control flow uses it)
    custom_options_format: int = FLEXBUFFERS


class Kernel:
    """Base class of all kernels. Subclasses override ``prepare`` and ``eval``.

    Class attributes:
      foldable: outputs depend only on inputs, so when every input is known at prepare time
        the runtime computes the node once there and skips it at invoke (constant folding).
    reads_only_shapes: eval looks at its inputs' shapes, never their values (SHAPE), so the
        node folds as soon as those shapes are static.
      derives_weights: prepare lays out copies of constant inputs (packed filters, tiled
        biases) and keeps no other state: while the compiled engine runs the node with its own
        copies, the runtime may drop the kernel and prepare a fresh one before NumPy runs it.
    """

    foldable: bool = True
    reads_only_shapes: bool = False
    derives_weights: bool = False

    def __init__(self, node: Node) -> None:
        self.node = node
        self.options = node.options

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        raise NotImplementedError

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        raise NotImplementedError

    # -- what a custom op may want to know ----------------------------------------------------------

    @property
    def custom_options(self) -> dict[str, Any]:
        """The operator's ``custom_options`` decoded as a flexbuffer map (the official converter
        stores a fused op's attributes so); ``{}`` when they are empty, not a map, or not a
        flexbuffer. The raw bytes are ``self.node.custom_options``."""
        if not hasattr(self, "_custom_options"):
            self._custom_options = decode_custom_options(self.node.custom_options, self.node.custom_options_format)
        return self._custom_options

    def declared_outputs(self) -> list[TensorInfo | None]:
        """The model's own description of this node's outputs: name, declared shape, dtype and
        quantization (``value`` is None; None for an omitted output). A kernel's ``prepare`` may
        return other shapes, as LiteRT kernels resize their outputs."""
        runtime = self.node.runtime
        if runtime is None:
            raise self.fail("the node's outputs are unknown outside an interpreter")
        infos: list[TensorInfo | None] = []
        for o in self.node.outputs:
            t = runtime.graph.tensors[o] if o >= 0 else None
            infos.append(None if t is None else TensorInfo(tuple(t.shape), runtime.dtypes[o], None, t.quantization, t.name))
        return infos

    # -- helpers for prepare ----------------------------------------------------------------

    def fail(self, message: str) -> PrepareError:
        """An error for prepare to raise; the runtime adds where the node is."""
        return PrepareError(message)

    def expect_inputs(self, ins: Sequence[TensorInfo | None], low: int, high: int | None = None) -> None:
        high = low if high is None else high
        if not low <= len(ins) <= high:
            want = str(low) if low == high else f"{low} to {high}"
            raise self.fail(f"expects {want} inputs, got {len(ins)}")

    def expect_dtype(self, t: TensorInfo, *allowed: Any) -> None:
        if t.dtype not in [np.dtype(a) for a in allowed]:
            names = ", ".join(np.dtype(a).name for a in allowed)
            raise self.fail(f"input {t.name!r} has dtype {t.dtype.name}; supported: {names}")


def decode_custom_options(data: bytes | None, fmt: int = FLEXBUFFERS) -> dict[str, Any]:
    """An operator's ``custom_options`` as a dict when they hold a flexbuffer map, else ``{}``
    (other producers store raw structs there, which only the op itself can read)."""
    if not data or fmt != FLEXBUFFERS:
        return {}
    from flatbuffers import flexbuffers  # only models with custom options need it

    try:
        decoded = flexbuffers.Loads(bytes(data))
    except Exception:  # not a flexbuffer: raw bytes for a kernel class to parse
        return {}
    return decoded if isinstance(decoded, dict) else {}


KERNELS: dict[str, type[Kernel]] = {}
QUANTIZED_KERNELS: dict[str, type[Kernel]] = {}
_PLAIN_KERNELS: dict[str, type[Kernel]] = {}  # an op's plain kernel, behind its dispatcher

QUANTIZED_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def has_scale(t: TensorInfo | None) -> bool:
    """True when the tensor carries affine quantization parameters (at least one scale)."""
    q = None if t is None else t.quantization
    return q is not None and q.scale is not None and len(q.scale) > 0


class QuantizedDispatch(Kernel):
    """The kernel of an op with a plain and a quantized class: prepare chooses one for the
    node's inputs, delegates to it, and eval is then that kernel's own bound eval (no extra
    call per invoke). Subclasses are made by :func:`register`, with ``plain`` and ``quantized``."""

    plain: type[Kernel]
    quantized: type[Kernel]

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.impl: Kernel | None = None

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        cls = self.quantized if self.quantized.handles(ins) else self.plain
        if type(self.impl) is not cls:  # shapes changed to another kind: a fresh kernel
            self.impl = cls(self.node)
        self.foldable, self.reads_only_shapes = cls.foldable, cls.reads_only_shapes
        specs = self.impl.prepare(ins)
        if type(self).eval is QuantizedDispatch.eval:  # not overridden by a subclass:
            # the kernel's eval as prepare left it (it may pick one for these inputs), bound,
            # so that an invoke makes no extra call
            self.eval = self.impl.eval  # type: ignore[method-assign]
        return specs

    @property
    def derives_weights(self) -> bool:  # type: ignore[override]
        return self.impl is not None and self.impl.derives_weights

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        if self.impl is None:
            raise PrepareError("the node was not prepared")
        self.impl.eval(ins, outs)


def _quantized_handles(cls: type[Kernel], ins: Sequence[TensorInfo | None]) -> bool:
    first = next((t for t in ins if t is not None), None)
    return first is not None and first.dtype in QUANTIZED_DTYPES and has_scale(first)


def register(*op_names: str, quantized: bool = False) -> Callable[[type[Kernel]], type[Kernel]]:
    """Class decorator: make a kernel the implementation of the named ops.

    Custom ops register under their custom code, e.g. ``@register("MyCustomOp")``.
    ``quantized=True`` registers the op's quantized-integer kernel beside its plain one (see the
    module docstring); the class may define a ``handles(cls, ins)`` classmethod.
    """

    def decorate(cls: type[Kernel]) -> type[Kernel]:
        if quantized and not hasattr(cls, "handles"):
            cls.handles = classmethod(_quantized_handles)  # type: ignore[attr-defined]
        for name in op_names:
            if quantized:
                QUANTIZED_KERNELS[name] = cls
            else:
                _PLAIN_KERNELS[name] = cls
            _install(name)
        return cls

    return decorate


def _install(name: str) -> None:
    plain, quant = _PLAIN_KERNELS.get(name), QUANTIZED_KERNELS.get(name)
    if plain is None or quant is None:
        KERNELS[name] = plain or quant  # type: ignore[assignment]
        return
    KERNELS[name] = type(
        f"{plain.__name__}Dispatch",
        (QuantizedDispatch,),
        {
            "plain": plain,
            "quantized": quant,
            "foldable": plain.foldable and quant.foldable,
            "reads_only_shapes": plain.reads_only_shapes,
            "__module__": plain.__module__,
        },
    )


# ----------------------------------------------------------------------------- shared helpers

# LiteRT applies a fused activation as a clamp to [min, max] (CalculateActivationRange): only
# RELU, RELU_N1_TO_1 and RELU6 have a range, so TANH (4) and SIGN_BIT (5) leave values unchanged.
ACTIVATIONS: dict[int, Callable[[np.ndarray], None] | None] = {
    0: None,  # NONE
    1: lambda x: np.maximum(x, 0, out=x),  # RELU
    2: lambda x: np.clip(x, -1, 1, out=x),  # RELU_N1_TO_1
    3: lambda x: np.clip(x, 0, 6, out=x),  # RELU6
    4: None,  # TANH: no clamp range, as in LiteRT
    5: None,  # SIGN_BIT: likewise
}


def fused_activation(options: Options | None) -> Callable[[np.ndarray], None] | None:
    """The in-place clamp for an op's ``fused_activation_function`` (None when there is none)."""
    code = getattr(options, "fused_activation_function", 0) if options is not None else 0
    if code not in ACTIVATIONS:
        raise PrepareError(f"unknown fused activation function {code}")
    return ACTIVATIONS[code]


# ``np.copyto(dst, src)`` without NumPy's ``__array_function__`` dispatch in front of it (the
# C function the public one wraps): 0.09 us instead of 0.2 on the small arrays of loop states,
# where control flow copies most. Same arguments, same casting rule, same result.
copy_into: Callable[..., None] = getattr(np.copyto, "_implementation", np.copyto)


def byte_runs(dst: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Views of ``dst`` and ``src`` (one shape and dtype) for ``np.copyto`` that copy each
    contiguous run of their innermost axes as one opaque element of that many bytes.

    NumPy copies a strided array element by element, with an inner loop along the last axis:
    runs of a few values (im2col windows, channel splits) cost it 0.3-0.5 ns an element, and
    as one element each they cost it a single fixed-size copy (1x56x56x64 split in four along
    the channels: 56 -> 27 us; runs of 8 or 16 bytes ten times faster). The same bytes move
    either way. Unchanged when the runs are single elements or the shapes differ."""
    if dst.shape != src.shape or dst.dtype != src.dtype or dst.ndim == 0:
        return dst, src
    item = dst.itemsize
    run, axis = 1, dst.ndim
    while axis > 0 and all(a.strides[axis - 1] == run * item for a in (dst, src)):
        axis -= 1
        run *= dst.shape[axis]
    if run <= 1 or axis == 0 or dst.size == 0:
        return dst, src
    runs = np.dtype((np.void, run * item))
    views = []
    for a, writeable in ((dst, True), (src, False)):
        merged = np.lib.stride_tricks.as_strided(a, a.shape[:axis] + (run,), a.strides[:axis] + (item,), writeable=writeable)
        views.append(merged.view(runs)[..., 0])
    return views[0], views[1]


# ``np.dot(a, b, out)`` likewise (0.32 us instead of 0.48 on a loop body's [1, 32] x [32, 128]).
dot_into: Callable[..., np.ndarray] = getattr(np.dot, "_implementation", np.dot)


def nothing() -> None:
    """The direct call of a node whose work the memory plan did (its outputs are its input's
    bytes: a RESHAPE, a SPLIT's parts)."""


def scratch(shape: tuple[int, ...], dtype: Any, fill: float | None = None) -> np.ndarray:
    """Working memory for a kernel, refused (PrepareError) beyond the bound the model verifier
    sets on tensors, so forged options (a huge filter, stride or dilation) cannot make a kernel
    ask for gigabytes."""
    from numlite.model import verifier  # read at call time: tests may lower the bound

    nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    if nbytes > verifier.MAX_TENSOR_BYTES:
        raise PrepareError(f"needs {nbytes} bytes of working memory for shape {tuple(shape)}, over the limit")
    return np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/TFLite broadcasting of shapes, with a PrepareError when they do not broadcast."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise PrepareError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def normalize_axis(axis: int, ndim: int) -> int:
    """Negative axes count from the end; out-of-range axes are an error."""
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise PrepareError(f"axis {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)
