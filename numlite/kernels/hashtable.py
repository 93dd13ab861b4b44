"""Resource hash tables: HASHTABLE, HASHTABLE_IMPORT, HASHTABLE_FIND and HASHTABLE_SIZE.

LiteRT's static hash tables (tflite/kernels/hashtable*.cc), int64 keys to string values or
string keys to int64 values. HASHTABLE outputs the int32 handle ``table_id`` (a RESOURCE
tensor of shape [1]) and creates that table in the interpreter if it does not exist yet; every
subgraph sees the same tables, as resource variables (numlite/kernels/variables.py).
HASHTABLE_IMPORT fills a table once: later imports are ignored, as in LiteRT, because the
converter leaves the initialiser in the graph that runs at every invoke. HASHTABLE_FIND maps
each key to its value or to the first element of the default; HASHTABLE_SIZE counts the keys.
Tables survive ``reset_all_variables`` (LiteRT keeps its resources there too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, TensorInfo, register
from numlite.model import schema

INT64, STRING = np.dtype(np.int64), np.dtype(np.object_)
# The (key, value) dtypes a table may have.
PAIRS = ((INT64, STRING), (STRING, INT64))


class HashTable:
    """One static table: empty and unusable until its single import."""

    def __init__(self, table_id: int, key: np.dtype, value: np.dtype) -> None:
        self.table_id, self.key, self.value = table_id, key, value
        self.entries: dict[Any, Any] | None = None

    def describe(self) -> str:
        return f"hash table {self.table_id} ({_name(self.key)} -> {_name(self.value)})"

    def check(self, key: np.dtype, value: np.dtype) -> None:
        if (key, value) != (self.key, self.value):
            raise InvokeError(f"{self.describe()} is used with {_name(key)} keys and {_name(value)} values")

    def import_(self, keys: np.ndarray, values: np.ndarray) -> None:
        if self.entries is not None:
            return
        entries: dict[Any, Any] = {}
        for k, v in zip(keys.reshape(-1).tolist(), values.reshape(-1).tolist()):
            entries.setdefault(k, v)  # the first of repeated keys stays (std::unordered_map::insert)
        self.entries = entries

    def find(self, keys: np.ndarray, default: Any, out: np.ndarray) -> None:
        if self.entries is None:
            raise InvokeError(f"{self.describe()} is looked up before HASHTABLE_IMPORT filled it")
        get = self.entries.get
        out.reshape(-1)[:] = [get(k, default) for k in keys.reshape(-1).tolist()]

    def size(self) -> int:
        return 0 if self.entries is None else len(self.entries)


def _name(dtype: np.dtype) -> str:
    return "string" if dtype == STRING else dtype.name


def _tables(kernel: Kernel) -> dict[int, HashTable]:
    return kernel.node.runtime.interpreter.variables.tables


class _TableOp(Kernel):
    """An op on the table whose handle is input 0."""

    foldable = False

    def _check_handle(self, ins: list[TensorInfo | None]) -> None:
        handle = ins[0]
        graph = self.node.runtime.graph
        if graph.tensors[self.node.inputs[0]].type != "RESOURCE" or handle.shape != (1,):
            raise self.fail(f"input 0 must be a RESOURCE handle of shape [1], has {handle.shape}")

    def _table(self, handle: np.ndarray) -> HashTable:
        table_id = int(handle.reshape(-1)[0])
        table = _tables(self).get(table_id)
        if table is None:
            raise InvokeError(f"no hash table {table_id}: no HASHTABLE op has created it")
        return table


def _check_pair(kernel: Kernel, key: np.dtype, value: np.dtype, what: str) -> None:
    if (key, value) not in PAIRS:
        raise kernel.fail(f"{what} must be int64 -> string or string -> int64, not {_name(key)} -> {_name(value)}")


@register("HASHTABLE")
class Hashtable(Kernel):
    """The handle of table ``table_id`` (created at the first invoke with the options' key and
    value dtypes)."""

    foldable = False

    def prepare(self, ins):
        self.expect_inputs(ins, 0)
        o = self.options
        try:
            key = np.dtype(schema.numpy_type(schema.TENSOR_TYPE_NAMES.get(int(o.key_dtype), "?")))
            value = np.dtype(schema.numpy_type(schema.TENSOR_TYPE_NAMES.get(int(o.value_dtype), "?")))
        except (AttributeError, TypeError, NotImplementedError):
            raise self.fail("needs HashtableOptions with key_dtype and value_dtype") from None
        _check_pair(self, key, value, "a table")
        self.table_id, self.key, self.value = int(o.table_id), key, value
        if self.node.runtime.graph.tensors[self.node.outputs[0]].type != "RESOURCE":
            raise self.fail("the output must be a RESOURCE tensor")
        return [Spec((1,), np.dtype(np.int32))]

    def eval(self, ins, outs):
        tables = _tables(self)
        if self.table_id not in tables:
            tables[self.table_id] = HashTable(self.table_id, self.key, self.value)
        outs[0].fill(self.table_id)


@register("HASHTABLE_IMPORT")
class HashtableImport(_TableOp):
    """Fill the table with keys and values of one shape (once; later imports do nothing)."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        self._check_handle(ins)
        keys, values = ins[1], ins[2]
        _check_pair(self, keys.dtype, values.dtype, "keys and values")
        if keys.shape != values.shape:
            raise self.fail(f"keys {keys.shape} and values {values.shape} must have one shape")
        return []

    def eval(self, ins, outs):
        table = self._table(ins[0])
        table.check(ins[1].dtype, ins[2].dtype)
        table.import_(ins[1], ins[2])


@register("HASHTABLE_FIND")
class HashtableFind(_TableOp):
    """The value of each key (the output has the keys' shape), or the default's first element
    where the table has no such key."""

    def prepare(self, ins):
        self.expect_inputs(ins, 3)
        self._check_handle(ins)
        keys, default = ins[1], ins[2]
        self.dtype = self.node.runtime.dtypes[self.node.outputs[0]]
        if default.dtype != self.dtype:
            raise self.fail(f"the default ({_name(default.dtype)}) and the output ({_name(self.dtype)}) must have "
                            "one dtype")
        if default.size < 1:
            raise self.fail("the default value is empty")
        _check_pair(self, keys.dtype, self.dtype, "keys and output")
        return [Spec(tuple(keys.shape), self.dtype)]

    def eval(self, ins, outs):
        table = self._table(ins[0])
        table.check(ins[1].dtype, self.dtype)
        table.find(ins[1], ins[2].reshape(-1)[0], outs[0])


@register("HASHTABLE_SIZE")
class HashtableSize(_TableOp):
    """How many keys the table holds (int64, shape [1])."""

    def prepare(self, ins):
        self.expect_inputs(ins, 1)
        self._check_handle(ins)
        if self.node.runtime.dtypes[self.node.outputs[0]] != INT64:
            raise self.fail("the output must be int64")
        return [Spec((1,), INT64)]

    def eval(self, ins, outs):
        outs[0][0] = self._table(ins[0]).size()
