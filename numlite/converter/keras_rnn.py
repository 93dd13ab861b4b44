"""Keras 3 recurrent layers made visible to numlite's fusions while a Keras model is traced.

Keras 3 runs its LSTM, GRU and SimpleRNN layers as a generic ``while`` loop and marks nothing
on them, so a graph traced from the model no longer says where a layer was. While
:func:`route_rnn_layers` is active, each such layer of the model (and each ``Bidirectional``
wrapper of LSTMs) runs its recurrence through a ``tf.function`` marked
``experimental_implements`` with numlite's own names (:data:`LSTM`, :data:`SIMPLE_RNN`,
:data:`BIDIRECTIONAL_LSTM`) and the layer's configuration as attributes. The function's
arguments are the sequence, the initial states and the layer's weights; its body is the layer's
own computation with the weights taken from those arguments (a Keras ``StatelessScope``), so a
function nothing fuses still inlines to exactly what Keras computes. Zero initial states (the
default of a stateless layer) are made inside the function and said by an attribute,
``zero_state``: the fused op then makes its own zeros from the input's shape, which LiteRT can
size before it allocates the op's state tensors (zeros from a FILL of a computed shape would be
sized only at run time, after LiteRT has allocated the state tensors once, for a batch of 1). The fusions registered in
:mod:`numlite.fusion.keras` turn the calls into TFLite's fused ops.

A layer is marked only when the fused op computes exactly what Keras does; otherwise it keeps
its loop, and :func:`route_rnn_layers` records why (one line per layer, for the conversion
report). Nothing of the user's model changes: the per-instance overrides are removed when the
context exits.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import tensorflow as tf

# Importing numlite.fusion.keras registers the fusions for these names.
from numlite.fusion.keras import BIDIRECTIONAL_LSTM, LSTM, SIMPLE_RNN

__all__ = ["route_rnn_layers"]

# Activations the fused ops have, by Keras's serialized name: what each fused op's options can say.
_LSTM_ACTIVATION, _LSTM_RECURRENT_ACTIVATION = "tanh", "sigmoid"
_RNN_ACTIVATIONS = ("tanh", "relu")
_MERGE_MODES = ("concat", "sum", "mul", "ave")


@contextlib.contextmanager
def route_rnn_layers(model: Any) -> Iterator[list[str]]:
    """While active, the recurrent layers of Keras 3 ``model`` trace through marked functions.

    Yields the report lines, filled as the layers are traced: ``"<name> (<class>): fused into
    <op>"`` or ``"... not fused: <reason>; kept as a WHILE loop"``."""
    keras = _keras()
    lines: dict[str, str] = {}
    patched: list[tuple[Any, str]] = []
    try:
        if keras is not None:
            for layer in _layers(model):
                for attr, replacement in _overrides(keras, layer, lines):
                    object.__setattr__(layer, attr, replacement)  # past Keras's attribute tracking
                    patched.append((layer, attr))
        out: list[str] = []
        yield out
        out.extend(lines.values())
    finally:
        for layer, attr in patched:
            layer.__dict__.pop(attr, None)


def _keras() -> Any:
    try:
        import keras
    except ImportError:  # no Keras 3: nothing to route
        return None
    return keras if hasattr(keras, "StatelessScope") else None


def _layers(model: Any) -> list[Any]:
    flatten = getattr(model, "_flatten_layers", None)
    return list(flatten(include_self=True, recursive=True)) if callable(flatten) else []


def _label(layer: Any) -> str:
    return f"{layer.name} ({type(layer).__name__})"


def _overrides(keras: Any, layer: Any, lines: dict[str, str]) -> list[tuple[str, Callable]]:
    """The per-instance methods that route ``layer`` (none for a layer that is not recurrent)."""
    layers = keras.layers
    label = _label(layer)
    if isinstance(layer, layers.Bidirectional):
        if type(layer).call is not layers.Bidirectional.call:
            return [("call", _unfused(layer, "call", label, lines, "its class overrides call"))]
        return [("call", _bidirectional_call(keras, layer, label, lines))]
    for cls, name, refusal in ((layers.LSTM, LSTM, _lstm_refusal), (layers.SimpleRNN, SIMPLE_RNN, _simple_rnn_refusal)):
        if isinstance(layer, cls):
            overridden = [m for m in ("inner_loop", "get_initial_state")
                          if getattr(type(layer), m) is not getattr(cls, m)]
            if overridden:  # the function would no longer be Keras's recurrence
                return [("inner_loop", _unfused(layer, "inner_loop", label, lines,
                                                f"its class overrides {' and '.join(overridden)}"))]
            zeros: set[int] = set()  # ids of the zero initial states Keras made for this layer
            return [("get_initial_state", _initial_state(layer, zeros)),
                    ("inner_loop", _inner_loop(keras, layer, label, lines, name, refusal, zeros))]
    if isinstance(layer, layers.GRU):
        return [("inner_loop", _unfused(layer, "inner_loop", label, lines, "TFLite has no fused GRU operator"))]
    return []


def _unfused(layer: Any, method: str, label: str, lines: dict[str, str], reason: str) -> Callable:
    """``layer.<method>`` as it is, saying (when traced) why the layer keeps its loop."""
    original = getattr(type(layer), method)

    def unfused(*args, **kwargs):
        lines[label] = f"{label}: not fused: {reason}; kept as a WHILE loop"
        return original(layer, *args, **kwargs)

    return unfused


# -- when the fused op is exact -------------------------------------------------------------------


def _activation_name(keras: Any, fn: Any) -> str:
    try:
        name = keras.activations.serialize(fn)
    except (ValueError, TypeError):
        return repr(fn)
    return name if isinstance(name, str) else repr(name)


def _common_refusal(keras: Any, layer: Any, mask: Any, training: Any) -> str | None:
    cell = layer.cell
    if mask is not None:
        return "it is masked (the fused op has no mask)"
    if training is not None and training is not False:
        return "it runs in training mode (dropout)"
    if layer.compute_dtype != "float32" or cell.compute_dtype != "float32":
        return f"it computes in {layer.compute_dtype}, the fused op in float32"
    return None  # dropout is off at inference; unroll and implementation compute the same steps


def _lstm_refusal(keras: Any, layer: Any, mask: Any, training: Any) -> str | None:
    """Why Keras's LSTM math is not the fused op's here, or None when it is."""
    cell = layer.cell
    if type(cell) is not keras.layers.LSTMCell:
        return f"its cell is a {type(cell).__name__}, not Keras's LSTMCell"
    reason = _common_refusal(keras, layer, mask, training)
    if reason:
        return reason
    activation = _activation_name(keras, cell.activation)
    recurrent = _activation_name(keras, cell.recurrent_activation)
    if activation != _LSTM_ACTIVATION:
        return f"its activation is {activation}; the fused op's is tanh"
    if recurrent != _LSTM_RECURRENT_ACTIVATION:
        return f"its recurrent activation is {recurrent}; the fused op's gates are sigmoids"
    return None


def _simple_rnn_refusal(keras: Any, layer: Any, mask: Any, training: Any) -> str | None:
    cell = layer.cell
    if type(cell) is not keras.layers.SimpleRNNCell:
        return f"its cell is a {type(cell).__name__}, not Keras's SimpleRNNCell"
    reason = _common_refusal(keras, layer, mask, training)
    if reason:
        return reason
    activation = _activation_name(keras, cell.activation)
    if activation not in _RNN_ACTIVATIONS:
        return f"its activation is {activation}; the fused op's are {' and '.join(_RNN_ACTIVATIONS)}"
    return None


# -- unidirectional layers ------------------------------------------------------------------------


def _weights(cell: Any) -> list[Any]:
    return [w for w in (cell.kernel, cell.recurrent_kernel, cell.bias if cell.use_bias else None) if w is not None]


def _states_needed(layer: Any) -> bool:
    """Whether Keras uses the final states: returned, or kept by a stateful layer."""
    return bool(layer.return_state or layer.stateful)


def _initial_state(layer: Any, zeros: set[int]) -> Callable:
    """``layer.get_initial_state`` noting the zero states it makes: the fused op builds its
    own zeros from the input's shape (see :func:`numlite.fusion.keras.zero_state`)."""
    original = type(layer).get_initial_state

    def get_initial_state(batch_size):
        states = original(layer, batch_size)
        zeros.update(id(s) for s in states)
        return states

    return get_initial_state


def _inner_loop(keras: Any, layer: Any, label: str, lines: dict[str, str], name: str,
                refusal: Callable[..., str | None], zeros: set[int]) -> Callable:
    """``layer.inner_loop`` through a function implementing ``name`` (when exact)."""
    original = type(layer).inner_loop
    op = "UNIDIRECTIONAL_SEQUENCE_LSTM" if name == LSTM else "UNIDIRECTIONAL_SEQUENCE_RNN"

    def inner_loop(sequences, initial_state, mask, training=False):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        reason = refusal(keras, layer, mask, training)
        if reason is not None:
            lines[label] = f"{label}: not fused: {reason}; kept as a WHILE loop"
            return original(layer, sequences, initial_state, mask, training=training)
        lines[label] = f"{label}: fused into {op}"
        cell = layer.cell
        weights = _weights(cell)
        states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
        want_states = _states_needed(layer)
        zero_state = all(id(s) in zeros for s in states)
        passed = [] if zero_state else states

        def body(sequences, *args):
            given_states, given_weights = args[:len(passed)], args[len(passed):]
            if zero_state:
                given_states = type(layer).get_initial_state(layer, tf.shape(sequences)[0])
            with keras.StatelessScope(state_mapping=list(zip(weights, given_weights))):
                last, outputs, final = original(layer, sequences, list(given_states), None, training=False)
            results = [outputs if layer.return_sequences else last]
            if want_states:
                results += list(final) if isinstance(final, (list, tuple)) else [final]
            return results

        attrs = {"go_backwards": layer.go_backwards, "return_sequences": layer.return_sequences,
                 "return_state": want_states, "use_bias": bool(cell.use_bias), "zero_state": zero_state,
                 "activation": _activation_name(keras, cell.activation), "layer": layer.name}
        fn = tf.function(body, experimental_implements=_signature(name, attrs), autograph=False)
        results = fn(sequences, *passed, *[tf.convert_to_tensor(w) for w in weights])
        result = results[0]
        final = list(results[1:]) if want_states else states
        return result, result, final

    return inner_loop


# -- Bidirectional(LSTM) ----------------------------------------------------------------------------


def _bidirectional_refusal(keras: Any, layer: Any, mask: Any, training: Any, initial_state: Any) -> str | None:
    forward, backward = layer.forward_layer, layer.backward_layer
    if not isinstance(forward, keras.layers.LSTM) or not isinstance(backward, keras.layers.LSTM):
        return (f"it wraps a {type(forward).__name__} and a {type(backward).__name__}; "
                "only LSTMs become one BIDIRECTIONAL_SEQUENCE_LSTM")
    for which, sub in (("forward", forward), ("backward", backward)):
        reason = _lstm_refusal(keras, sub, mask, training)
        if reason:
            return f"its {which} LSTM: {reason}"
    if forward.go_backwards or not backward.go_backwards:
        return "its forward layer runs backwards or its backward layer forwards"
    if forward.stateful or backward.stateful:
        return "it is stateful"
    if layer.return_state:
        return "it returns its states"
    if layer.merge_mode not in _MERGE_MODES:
        return f"its merge mode is {layer.merge_mode!r}"
    if forward.cell.use_bias != backward.cell.use_bias:
        return "one direction has a bias and the other not"
    if initial_state is not None and len(initial_state) != 4:
        return "its initial state is not four tensors"
    return None


def _bidirectional_call(keras: Any, layer: Any, label: str, lines: dict[str, str]) -> Callable:
    """``layer.call`` through a function implementing :data:`BIDIRECTIONAL_LSTM` (when exact)."""
    original = type(layer).call

    def call(sequences, initial_state=None, mask=None, training=None):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        reason = _bidirectional_refusal(keras, layer, mask, training, initial_state)
        if reason is not None:
            lines[label] = f"{label}: not fused: {reason}; each direction converted on its own"
            return original(layer, sequences, initial_state=initial_state, mask=mask, training=training)
        lines[label] = f"{label}: fused into BIDIRECTIONAL_SEQUENCE_LSTM"
        forward, backward = layer.forward_layer, layer.backward_layer
        weights = _weights(forward.cell) + _weights(backward.cell)
        passed = [] if initial_state is None else list(initial_state)

        def body(sequences, *args):
            given_states, given_weights = args[:len(passed)], args[len(passed):]
            with keras.StatelessScope(state_mapping=list(zip(weights, given_weights))):
                return original(layer, sequences, initial_state=list(given_states) or None, mask=None,
                                training=False)

        attrs = {"merge_mode": layer.merge_mode, "return_sequences": layer.return_sequences,
                 "use_bias": bool(forward.cell.use_bias), "zero_state": initial_state is None, "layer": layer.name}
        fn = tf.function(body, experimental_implements=_signature(BIDIRECTIONAL_LSTM, attrs), autograph=False)
        result = fn(sequences, *passed, *[tf.convert_to_tensor(w) for w in weights])
        for sub in (forward, backward):  # traced inside the fused function: no op of their own
            lines.pop(_label(sub), None)
        return result

    return call


# -- the implements signature -----------------------------------------------------------------------


def _signature(name: str, attrs: dict[str, Any]) -> str:
    """``name`` with ``attrs`` in the NameAttrList text form numlite's fusions read."""
    parts = [f'name: "{name}"']
    for key, value in attrs.items():
        if isinstance(value, bool):
            encoded = f"b: {'true' if value else 'false'}"
        elif isinstance(value, int):
            encoded = f"i: {value}"
        else:
            text = str(value).replace("\\", "\\\\").replace('"', '\\"')
            encoded = f's: "{text}"'
        parts.append(f'attr {{key: "{key}" value {{{encoded}}}}}')
    return " ".join(parts)
