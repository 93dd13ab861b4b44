"""Composite-op fusion: a TensorFlow function marked as implementing an operation becomes fused
TFLite operators when numlite converts it.

A ``tf.function(experimental_implements="name")`` (or ``_implements``, or the signature form
``'name: "my_op" attr {key: "k" value {i: 3}}'``) draws a boundary around a composite
operation. During conversion, before calls are inlined, every such function is offered to the
fusion registered here for its name; the fusion checks the function's arguments and emits the
operators that replace the call. Functions whose name nothing claims are inlined as usual::

    import numlite.fusion

    @numlite.fusion.register("my_layer_norm")
    def layer_norm(b, x, gamma, beta, epsilon=1e-3):
        b.require(x.dtype == "float32", "x must be float32")
        return b.custom("MyLayerNorm", [x, gamma, beta], options={"epsilon": epsilon})

The fusion is called as ``fusion(b, *arguments, **attributes)``: ``b`` is a :class:`Builder`,
the arguments are :class:`Tensor` handles (dtype, static shape, value when constant) and the
attributes are those of the signature form. It returns the tensor (or tensors) that replace the
function's results. A class works too: it is instantiated once and its ``fuse`` method called
the same way (after its ``check`` method, if it has one).

Built in: ``embedding_lookup`` (and ``embedding_matmul``, the name the official converter
recognises) to EMBEDDING_LOOKUP; and any function whose signature carries
``tfl_fusable_op: true`` becomes one CUSTOM op named by the signature's ``name``, its other
attributes stored as flexbuffer ``custom_options`` exactly as the official converter stores
them (see :func:`encode_options`).

This package never imports TensorFlow: the converter implements :class:`Builder`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar, Union

import numpy as np

from numlite.errors import ConversionError

__all__ = [
    "Builder", "FusionDeclined", "FusionError", "Tensor", "encode_options", "lookup", "match", "register", "registered", "unregister",
]

T = TypeVar("T")
_REGISTRY: dict[str, Any] = {}


class FusionError(ConversionError):
    """A function does not match the contract of the fusion registered for it. The converter
    re-raises it naming the function and the call."""


class FusionDeclined(Exception):
    """A fusion recognises the function but will not fuse it, because the fused ops would
    compute something else (a masked LSTM: the fused op cannot skip steps). The converter then
    inlines the function as TensorFlow wrote it and reports the reason."""


@dataclass(eq=False)
class Tensor:
    """A tensor a fusion reads or makes: its TF dtype name (``"float32"``, ``"int32"``...),
    static shape (``None`` for an unknown dimension, ``shape=None`` for unknown rank) and, for
    a constant known at fusion time, its value. ``ref`` is the converter's own handle."""

    name: str
    dtype: str
    shape: tuple[int | None, ...] | None
    value: np.ndarray | None = None
    ref: Any = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_constant(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        shape = "[?]" if self.shape is None else list(self.shape)
        return f"<Tensor {self.name!r} {self.dtype}{shape}>"


# What a fusion may pass where a tensor is expected: a tensor, a constant, or nothing (an
# omitted optional input of a builtin op).
Operand = Union[Tensor, np.ndarray, Sequence[Any], int, float, bool, None]


class Builder:
    """What a fusion emits operators with. The converter provides the implementation.

    Attributes:
      function: the TensorFlow function's name (for messages).
      name: the name the function implements.
      args: the function's arguments, as :class:`Tensor` handles.
      attrs: the function's attributes from the signature form (``{}`` for a plain name).
      results: the function's results as tensors without a producer: their dtype and shape
        are what the replacement must produce, and what an op's ``outputs`` default to.
    """

    function: str
    name: str
    args: list[Tensor]
    attrs: dict[str, Any]
    results: list[Tensor]

    def op(self, op_name: str, inputs: Sequence[Operand], outputs: Sequence[Tensor] | None = None,
           **options: Any) -> Tensor | list[Tensor]:
        """A builtin TFLite operator (``"EMBEDDING_LOOKUP"``...) with builtin ``options``
        (fields of its options table). ``outputs`` (specs from :meth:`spec`) default to the
        function's results. Returns the output tensor, or the list when there are several.
        Inputs may be constants (arrays, lists, numbers): an op whose inputs are all constant
        is computed at conversion time, so constant transforms of weights cost nothing."""
        raise NotImplementedError

    def custom(self, code: str, inputs: Sequence[Operand], options: Mapping[str, Any] | bytes | None = None,
               outputs: Sequence[Tensor] | None = None) -> Tensor | list[Tensor]:
        """A CUSTOM operator named ``code``; ``options`` (a mapping, encoded by
        :func:`encode_options`, or raw bytes) become its ``custom_options``. ``outputs``
        default to the function's results."""
        raise NotImplementedError

    def const(self, value: Any, dtype: str | None = None, name: str | None = None) -> Tensor:
        """A constant tensor (``dtype`` a NumPy/TF dtype name; Python ints become int32 and
        floats float32, as TFLite expects)."""
        raise NotImplementedError

    def variable(self, shape: Sequence[int | None], dtype: str, initial: Tensor | None = None,
                 name: str | None = None) -> Tensor:
        """A variable tensor (``is_variable``), the kind of operand an op keeps state in (the
        states of UNIDIRECTIONAL_SEQUENCE_LSTM). LiteRT's kernels overwrite such a tensor with
        the final state, so it is set before every run of the op reading it: to ``initial``
        (a tensor of that shape) or, without one, to zeros. ``shape`` may have ``None`` (a
        dimension known at run time, such as the batch)."""
        raise NotImplementedError

    def is_zeros(self, t: Tensor) -> bool:
        """Whether ``t`` is known to hold only zeros: a constant, or zeros of a shape known only
        at run time (``tf.zeros`` of a dynamic batch, as Keras makes its initial RNN states)."""
        return t.is_constant and t.value.size > 0 and not np.any(t.value)

    def spec(self, shape: Sequence[int | None] | None, dtype: str, name: str | None = None) -> Tensor:
        """The declaration of an operator output: its shape (``None`` for a dimension known
        only at run time) and dtype."""
        return Tensor(name or "", str(np.dtype(dtype)) if dtype not in ("bool", "string") else dtype,
                      None if shape is None else tuple(shape))

    def fail(self, message: str) -> FusionError:
        """An error saying the function does not match the fusion's contract (raise it)."""
        return FusionError(message)

    def require(self, condition: Any, message: str) -> None:
        """Raise :class:`FusionError` with ``message`` unless ``condition`` holds."""
        if not condition:
            raise self.fail(message)

    def decline(self, reason: str) -> FusionDeclined:
        """Leave the function unfused, inlined as it is, for ``reason`` (raise it)."""
        return FusionDeclined(reason)


# -- registry ----------------------------------------------------------------------------------


def register(name: str, *, replace: bool = False, prefix: bool = False) -> Callable[[T], T]:
    """Decorator: the fusion for functions implementing ``name`` (a function
    ``fusion(b, *args, **attrs)`` or a class with ``fuse(self, b, *args, **attrs)`` and
    optionally ``check``). Registering a name twice is an error unless ``replace``.

    With ``prefix=True`` the fusion claims every name starting with ``name`` (tf_keras marks
    each LSTM layer's function ``lstm_<uuid>``); an exact registration wins over a prefix, a
    longer prefix over a shorter one. It is listed and unregistered as ``name + "*"``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"a fusion is registered under a non-empty name, got {name!r}")
    key = name + "*" if prefix else name

    def decorate(fusion: T) -> T:
        if key in _REGISTRY and not replace:
            raise ValueError(f"a fusion for {key!r} is already registered (pass replace=True to replace it)")
        if inspect.isclass(fusion):
            instance = fusion()
            if not callable(getattr(instance, "fuse", None)):
                raise TypeError(f"fusion class {fusion.__name__} for {key!r} has no method "
                                "fuse(self, b, *args, **attrs)")
            _REGISTRY[key] = instance
        elif callable(fusion):
            _REGISTRY[key] = fusion
        else:
            raise TypeError(f"a fusion must be a function or a class, got {fusion!r}")
        return fusion

    return decorate


def unregister(name: str) -> None:
    """Forget the fusion registered for ``name`` (a prefix as ``"lstm_*"``); functions
    implementing it are inlined again."""
    _REGISTRY.pop(name, None)


def registered() -> list[str]:
    """The names fusions are registered for (prefixes ending in ``*``)."""
    return sorted(_REGISTRY)


def lookup(name: str) -> Any:
    """The fusion registered for ``name`` (a function or a class instance), or None."""
    found = match(name)
    return None if found is None else found[1]


def match(name: str) -> tuple[str, Any] | None:
    """``(key, fusion)`` for ``name``: its exact registration, else the longest registered
    prefix it starts with (key ``"prefix*"``), else None."""
    if name in _REGISTRY and not name.endswith("*"):
        return name, _REGISTRY[name]
    prefixes = [k for k in _REGISTRY if k.endswith("*") and name.startswith(k[:-1])]
    if not prefixes:
        return None
    key = max(prefixes, key=len)
    return key, _REGISTRY[key]


# -- custom options ----------------------------------------------------------------------------


def encode_options(options: Mapping[str, Any]) -> bytes:
    """A flexbuffer map of ``options`` as the official converter writes a fused op's attributes:
    keys sorted, integers at the smallest width, floats, strings (byte for byte the same for
    those). Booleans become flexbuffer booleans; the official converter stores a ``b``
    attribute as an integer instead (true as -1), which the converter reproduces for
    ``tfl_fusable_op`` functions. Lists become vectors and bytes blobs (the official converter
    refuses those attribute kinds, but a custom op of your own may use them)."""
    from flatbuffers import flexbuffers

    builder = flexbuffers.Builder()

    def add(key: str | None, value: Any) -> None:
        if isinstance(value, (bool, np.bool_)):
            builder.Bool(bool(value)) if key is None else builder.Bool(key, bool(value))
        elif isinstance(value, (int, np.integer)):
            builder.Int(int(value)) if key is None else builder.Int(key, int(value))
        elif isinstance(value, (float, np.floating)):
            builder.Float(float(value)) if key is None else builder.Float(key, float(value))
        elif isinstance(value, str):
            builder.String(value) if key is None else builder.String(key, value)
        elif isinstance(value, (bytes, bytearray)):
            builder.Blob(bytes(value)) if key is None else builder.Blob(key, bytes(value))
        elif isinstance(value, (list, tuple, np.ndarray)):
            with builder.Vector() if key is None else builder.Vector(key):
                for item in list(np.asarray(value).tolist() if isinstance(value, np.ndarray) else value):
                    add(None, item)
        else:
            raise TypeError(f"custom option {key!r}: cannot store a {type(value).__name__} in a flexbuffer")

    with builder.Map():
        for key in sorted(options):
            if not isinstance(key, str):
                raise TypeError(f"custom option names must be strings, got {key!r}")
            add(key, options[key])
    return bytes(builder.Finish())


from numlite.fusion import builtin as _builtin  # noqa: E402,F401  (registers the built-in fusions)
