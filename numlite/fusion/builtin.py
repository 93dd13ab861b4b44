"""The fusions numlite registers itself: embedding lookup to EMBEDDING_LOOKUP; LSTMs (tf_keras
``lstm_<uuid>`` functions, the spec's LSTMCellSimple cells) to UNIDIRECTIONAL_SEQUENCE_LSTM.

(Functions whose signature says ``tfl_fusable_op: true`` need no registration: the converter
turns any of them into a CUSTOM op.)
"""

from __future__ import annotations

from numlite.fusion import Builder, Tensor, register

# Table types LiteRT's EMBEDDING_LOOKUP copies rows of (int8/uint8 tables are quantized ones).
_TABLE_TYPES = ("float32", "int8", "uint8")


def embedding_lookup(b: Builder, table: Tensor, ids: Tensor) -> Tensor:
    """``table[ids]``: the function takes the table then the ids (its interface in the
    official design); EMBEDDING_LOOKUP reads the ids first. LiteRT's kernel needs int32 ids
    of rank 1 and a table of rank 2 or more (a rank known only later is left to the kernel)."""
    b.require(len(b.results) == 1, f"an embedding lookup returns one tensor, this function returns {len(b.results)}")
    b.require(ids.dtype == "int32", f"the ids (argument 1) must be int32, they are {ids.dtype}")
    b.require(ids.rank in (1, None), f"the ids (argument 1) must be a vector, they have shape {_shape(ids)}")
    b.require(table.dtype in _TABLE_TYPES, f"the table (argument 0) must be one of {_TABLE_TYPES}, it is {table.dtype}")
    b.require(table.rank is None or table.rank >= 2,
              f"the table (argument 0) must have rank 2 or more, it has shape {_shape(table)}")
    b.require(b.results[0].dtype == table.dtype,
              f"the result is {b.results[0].dtype}, the table {table.dtype}: a lookup does not convert")
    return b.op("EMBEDDING_LOOKUP", [ids, table])


def _shape(t: Tensor) -> str:
    return "unknown" if t.shape is None else str(list(t.shape))


register("embedding_lookup")(embedding_lookup)
register("embedding_matmul")(embedding_lookup)  # the name the official converter recognises


def _register_rnn() -> None:
    """The LSTM fusions (numlite.fusion.rnn): tf_keras's ``lstm_<uuid>`` functions and the spec's
    bring-your-own cells (also in their ``name,CoupleInputForgetGates`` form)."""
    from numlite.fusion import rnn

    register("lstm_", prefix=True)(rnn.keras_lstm)
    register("LSTMCellSimple")(rnn.lstm_cell_simple)
    register("LSTMCellSimple,", prefix=True)(rnn.lstm_cell_simple)
    register("LayerNormalizedLstmCellSimple")(rnn.layer_norm_lstm_cell_simple)
    register("LayerNormalizedLstmCellSimple,", prefix=True)(rnn.layer_norm_lstm_cell_simple)


_register_rnn()
