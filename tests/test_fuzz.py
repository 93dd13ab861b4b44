"""Fuzzing: mutated real models either run or raise a NumliteError, and nothing else happens.

Four small models are converted at test time (elementwise ops, a Keras conv/dense model, a WHILE
loop, an IF) and mutated in three ways: random bytes overwritten (1 to 8), the file truncated,
or fields changed on the model objects (tensor shapes, types and buffers, operator inputs,
outputs, opcodes and options, called subgraphs, subgraph inputs and outputs, signatures,
constant data) and written back with ``write_model``. Each mutant is run the way a user would
run it: ``Interpreter``, ``allocate_tensors``, zeros into every input, ``invoke``, every output
read. Every case must end normally or with a ``numlite.NumliteError``: no other exception, no
crash, no case taking more than ``CASE_SECONDS`` of CPU (a mutated WHILE loop that never ends is
stopped by ``check_cancelled``), and no large growth of the process's peak memory.

Every mutant (below ``JIT_CASES``: ``NUMLITE_FUZZ_JIT_CASES``, by default all of them) also runs
on the compiled engine (``jit=True``, numlite.jit) when Numba is there, and must do exactly what
the NumPy engine does when run the same way, without a per-operator hook: the same outputs (floats
within 1e-5, NaN where NaN, integers and bools equal), or the same error class with the same message
(a cancellation only the same class: where it stops depends on the clock). The compiled engine must
compile the mutant or leave it on NumPy with a NotCompiled reason (never "compiling failed"); a
compiled loop that never ends is stopped by ``Interpreter.cancel()`` from a timer. The NumPy
engine's unwatched run is skipped where it cannot differ from the watched one: a mutant that fails
before ``invoke`` (the hook is called only by invoke) has that same error, and a compiled run that
was cancelled leaves nothing to compare. Mutants of one structure share their compiled code: the
session's cache is keyed by the generated source and shared by the xdist workers.

The run is deterministic: case ``i`` draws its mutation from ``random.Random(f"{SEED}:{i}")``,
so a failure names the case that reproduces it. By default 10,000 cases run, dealt to ``SHARDS``
tests (case ``i`` in shard ``i % SHARDS``) that the xdist workers share; each shard checks its own
outcomes and memory. The 10,000 hold about 120 compiled structures: their compiles are most of the
run's CPU (docs/jit.md, "Testing both engines"). A longer session, with another seed:

    NUMLITE_FUZZ_CASES=1000000 NUMLITE_FUZZ_SEED=7 python -m pytest tests/test_fuzz.py -s

``-s`` (or ``-rP`` under xdist) shows each shard's summary: how many cases ran to the end and how
many raised which error, on each engine, and the structures compiled.

The fuzzer runs with the verifier's memory limits lowered (``FUZZ_LIMITS``), as an application
running untrusted models would lower them: with the defaults (4 GiB per tensor) a mutated input
shape may legitimately ask for gigabytes, which is allowed but not what a CI job should spend.
"""

from __future__ import annotations

import collections
import contextlib
import os
import random
import resource
import threading
import time
import traceback
from typing import Any, Callable

import numpy as np
import pytest
import tensorflow as tf

import numlite
import numlite.model.verifier as verifier

from helpers import convert, convert_keras
from numlite.model import Buffer, Options, Quantization, read_model, schema, write_model

CASES = int(os.environ.get("NUMLITE_FUZZ_CASES", "10000"))
SEED = int(os.environ.get("NUMLITE_FUZZ_SEED", "0"))
CASE_SECONDS = 2.0  # no case may take more CPU time (the cancellation deadline, in wall time, comes earlier)
CANCEL_AFTER = 1.0  # seconds into invoke after which check_cancelled stops a case
# The compiled engine runs the cases below JIT_CASES (every case by default): each new structure costs a
# Numba compile (0.5-1 s on an idle core, several under load; the 10,000 cases hold about 125 compiled
# structures), which the xdist workers share through the session's cache (jit_cache_dir).
JIT_CASES = int(os.environ.get("NUMLITE_FUZZ_JIT_CASES", str(CASES)))
# The cases are dealt to SHARDS tests (case i to shard i % SHARDS), which the xdist workers share.
SHARDS = int(os.environ.get("NUMLITE_FUZZ_SHARDS", "8"))
JIT_CASE_FACTOR = 10  # a compiled case may also compile its model (seconds, many more under load)
MAX_RSS_GROWTH = 1 << 30  # bytes the process's peak memory may grow over a shard
ADDRESS_SPACE_HEADROOM = 1 << 30  # bytes a case may map beyond what the process maps at start
FUZZ_LIMITS = {
    "MAX_TENSOR_ELEMENTS": 1 << 24,
    "MAX_TENSOR_BYTES": 64 << 20,
    "MAX_SUBGRAPH_BYTES": 256 << 20,
}


# ------------------------------------------------------------------------------ the models


def elementwise_model() -> bytes:
    return convert(
        lambda a, b: tf.concat([tf.nn.relu(a * b + 1.0) - tf.abs(b), tf.tanh(a)], 0),
        [tf.TensorSpec((2, 3), tf.float32), tf.TensorSpec((3,), tf.float32)],
        key="fuzz-elementwise",
    )


def keras_model() -> bytes:
    def build():
        tf.keras.utils.set_random_seed(3)
        inputs = tf.keras.Input((6, 6, 2), batch_size=1)
        x = tf.keras.layers.Conv2D(3, 3, padding="same", activation="relu")(inputs)
        x = tf.keras.layers.MaxPooling2D(2)(x)
        x = tf.keras.layers.Flatten()(x)
        x = tf.keras.layers.Dense(4)(x)
        return tf.keras.Model(inputs, tf.keras.layers.Softmax()(x))

    return convert_keras(build, "fuzz-keras")


def while_model() -> bytes:
    def fn(x):
        _, y = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y * 0.5 + 1.0), [tf.constant(0), x])
        return y

    return convert(fn, [tf.TensorSpec((2, 2), tf.float32)], key="fuzz-while")


def if_model() -> bytes:
    def fn(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x - 1.0)

    return convert(fn, [tf.TensorSpec((3,), tf.float32)], key="fuzz-if")


MODELS = {"elementwise": elementwise_model, "keras": keras_model, "while": while_model, "if": if_model}


# ------------------------------------------------------------------------------ mutations

# Values that sit on the edges: of int32 and uint32, of what a shape may hold, of floats.
EXTREME_INTS = [-(2**31), -2, -1, 0, 1, 2, 3, 7, 255, 65536, 2**20, 2**31 - 1]
EXTREME_DIMS = [-2, -1, 0, 1, 2, 3, 5, 64, 1000, 65536, 2**20, 2**31 - 1]
EXTREME_FLOATS = [0.0, -1.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan")]
INT_RANGES = {
    "Int8": (-(2**7), 2**7 - 1), "Uint8": (0, 2**8 - 1), "Int16": (-(2**15), 2**15 - 1),
    "Uint16": (0, 2**16 - 1), "Int32": (-(2**31), 2**31 - 1), "Uint32": (0, 2**32 - 1),
    "Int64": (-(2**63), 2**63 - 1), "Uint64": (0, 2**64 - 1),
}  # fmt: skip
TYPE_NAMES = sorted(schema.TENSOR_TYPE_CODES)
OP_NAMES = sorted(schema.BUILTIN_OPERATOR_CODES)

Undo = Callable[[], None]


def replace(obj: Any, name: str, value: Any) -> Undo:
    """Set an attribute to a fresh value (never edit shared objects in place); returns the undo."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    return lambda: setattr(obj, name, old)


def int_in(rng: random.Random, low: int, high: int) -> int:
    """An edge value in [low, high] most of the time, else any value of the range."""
    edges = [v for v in EXTREME_INTS + [low, high] if low <= v <= high]
    return rng.choice(edges) if rng.random() < 0.7 else rng.randint(low, high)


def index_like(rng: random.Random, n: int) -> int:
    """A tensor or subgraph index: usually valid, sometimes just outside, sometimes absurd."""
    return rng.choice([rng.randrange(max(n, 1)), rng.randrange(max(n, 1)), -1, n, n + 1, rng.choice(EXTREME_INTS)])


def unsigned_index_like(rng: random.Random, n: int) -> int:
    """An index stored as uint32 (signatures): -1 becomes its two's complement."""
    return index_like(rng, n) % 2**32


def random_shape(rng: random.Random, shape: tuple[int, ...]) -> tuple[int, ...]:
    kind = rng.random()
    if kind < 0.5 and shape:  # one dimension changed
        dims = list(shape)
        dims[rng.randrange(len(dims))] = rng.choice(EXTREME_DIMS) if rng.random() < 0.5 else rng.randint(0, 8)
        return tuple(dims)
    if kind < 0.9:  # a new small shape
        return tuple(rng.randint(0, 6) for _ in range(rng.randint(0, 5)))
    return tuple(rng.choice([1, 1, 2, -1, 2**31 - 1]) for _ in range(rng.choice([6, 33, 40])))


def mutate_tensor(rng: random.Random, model: Any) -> tuple[str, Undo]:
    s = rng.randrange(len(model.subgraphs))
    sg = model.subgraphs[s]
    if not sg.tensors:
        return "no tensor", lambda: None
    i = rng.randrange(len(sg.tensors))
    t = sg.tensors[i]
    what = rng.choice(["shape", "shape", "type", "buffer", "signature", "variable", "quantization"])
    if what == "shape":
        value = random_shape(rng, t.shape)
        return f"subgraph {s} tensor {i} shape {t.shape} -> {value}", replace(t, "shape", value)
    if what == "type":
        value = rng.choice(TYPE_NAMES)
        return f"subgraph {s} tensor {i} type {t.type} -> {value}", replace(t, "type", value)
    if what == "buffer":
        value = rng.choice([rng.randrange(len(model.buffers)), len(model.buffers), 2**32 - 1])
        return f"subgraph {s} tensor {i} buffer {t.buffer} -> {value}", replace(t, "buffer", value)
    if what == "signature":
        value = random_shape(rng, t.shape)
        return f"subgraph {s} tensor {i} shape_signature -> {value}", replace(t, "shape_signature", value)
    if what == "variable":
        return f"subgraph {s} tensor {i} is_variable -> {not t.is_variable}", replace(t, "is_variable", not t.is_variable)
    n = rng.choice([1, 1, 2, 3, 7])
    q = Quantization(
        scale=np.asarray([rng.choice(EXTREME_FLOATS + [0.5]) for _ in range(n)], np.float32),
        zero_point=np.asarray([rng.randint(-300, 300) for _ in range(rng.choice([n, n, 0, n + 1]))], np.int64),
        quantized_dimension=rng.choice([0, 0, 1, 3, 2**31 - 1]),
    )
    return f"subgraph {s} tensor {i} quantization -> {q}", replace(t, "quantization", q)


def mutate_operator(rng: random.Random, model: Any) -> tuple[str, Undo]:
    ops = list(model.iter_operators())
    s, n, op = rng.choice(ops)
    n_tensors = len(model.subgraphs[s].tensors)
    codes = model.operator_codes
    where = f"subgraph {s} node {n} ({codes[op.opcode_index].name if op.opcode_index < len(codes) else '?'})"
    what = rng.choice(["input", "input", "output", "opcode", "options", "options", "options"])
    if what in ("input", "output"):
        name = what + "s"
        values = list(getattr(op, name))
        action = rng.random()
        if action < 0.7 and values:
            values[rng.randrange(len(values))] = index_like(rng, n_tensors)
        elif action < 0.85:
            values.append(index_like(rng, n_tensors))
        elif values:
            values.pop(rng.randrange(len(values)))
        return f"{where} {name} {getattr(op, name)} -> {values}", replace(op, name, values)
    if what == "opcode":
        value = rng.choice([rng.randrange(len(model.operator_codes)), len(model.operator_codes), 2**32 - 1])
        return f"{where} opcode index {op.opcode_index} -> {value}", replace(op, "opcode_index", value)
    options = op.builtin_options
    if options is None:
        return f"{where} has no options", lambda: None
    fields = {f.name: f for f in schema.option_fields(options.type_name) if f.kind in ("scalar", "vector")}
    if not fields:
        return f"{where} has no option fields", lambda: None
    subgraph_fields = [name for name in fields if name.endswith("subgraph_index")]
    name = rng.choice(subgraph_fields) if subgraph_fields and rng.random() < 0.5 else rng.choice(sorted(fields))
    f = fields[name]
    if name.endswith("subgraph_index"):
        value: Any = rng.choice([rng.randrange(len(model.subgraphs)), s, -1, len(model.subgraphs), 2**31 - 1])
    elif f.kind == "vector":
        value = np.asarray([int_in(rng, -(2**31), 2**31 - 1) for _ in range(rng.randint(0, 4))], np.int32)
    elif f.element == "Bool":
        value = rng.random() < 0.5
    elif f.element in ("Float32", "Float64"):
        value = rng.choice(EXTREME_FLOATS)
    else:
        value = int_in(rng, *INT_RANGES[f.element])
    new = Options(options.type_name, **{**options.fields(), name: value})
    return f"{where} {options.type_name}.{name} {getattr(options, name)!r} -> {value!r}", replace(op, "builtin_options", new)


def mutate_opcode(rng: random.Random, model: Any) -> tuple[str, Undo]:
    k = rng.randrange(len(model.operator_codes))
    code = model.operator_codes[k]
    value = rng.choice(OP_NAMES)
    return f"operator code {k} {code.builtin} -> {value}", replace(code, "builtin", value)


def mutate_graph(rng: random.Random, model: Any) -> tuple[str, Undo]:
    s = rng.randrange(len(model.subgraphs))
    sg = model.subgraphs[s]
    name = rng.choice(["inputs", "outputs"])
    values = list(getattr(sg, name))
    if values and rng.random() < 0.7:
        values[rng.randrange(len(values))] = index_like(rng, len(sg.tensors))
    elif values and rng.random() < 0.5:
        values.pop()
    else:
        values.append(index_like(rng, len(sg.tensors)))
    return f"subgraph {s} {name} {getattr(sg, name)} -> {values}", replace(sg, name, values)


def mutate_signature(rng: random.Random, model: Any) -> tuple[str, Undo]:
    if not model.signature_defs:
        return "no signature", lambda: None
    sig = rng.choice(model.signature_defs)
    if rng.random() < 0.4:
        value = unsigned_index_like(rng, len(model.subgraphs))
        return f"signature {sig.key!r} subgraph -> {value}", replace(sig, "subgraph_index", value)
    name = rng.choice(["inputs", "outputs"])
    mapping = dict(getattr(sig, name))
    if not mapping:
        return f"signature {sig.key!r} has no {name}", lambda: None
    key = rng.choice(sorted(mapping))
    mapping[key] = unsigned_index_like(rng, len(model.subgraphs[0].tensors))
    return f"signature {sig.key!r} {name}[{key!r}] -> {mapping[key]}", replace(sig, name, mapping)


def mutate_constant(rng: random.Random, model: Any) -> tuple[str, Undo]:
    """Overwrite the data of a constant: loop bounds, shapes, weights, axes."""
    full = [b for b, buf in enumerate(model.buffers) if len(buf)]
    if not full:
        return "no constant", lambda: None
    b = rng.choice(full)
    data = np.array(model.buffers[b].data, np.uint8)
    kind = rng.random()
    if kind < 0.5 and data.size % 4 == 0:  # an int32/float32 element set to an edge value
        word = rng.randrange(data.size // 4)
        value = rng.choice(EXTREME_INTS) if rng.random() < 0.6 else rng.choice(EXTREME_FLOATS)
        element = np.asarray(value, np.int32 if isinstance(value, int) else np.float32)
        data[4 * word : 4 * word + 4] = np.frombuffer(element.tobytes(), np.uint8)
        what = f"element {word} = {value!r}"
    elif kind < 0.8:
        pos = rng.randrange(data.size)
        data[pos] = rng.randrange(256)
        what = f"byte {pos} = {data[pos]}"
    else:
        data = data[: rng.randrange(data.size)]
        what = f"truncated to {data.size} bytes"
    buffers = list(model.buffers)
    buffers[b] = Buffer(data)
    return f"buffer {b} {what}", replace(model, "buffers", buffers)


FIELD_MUTATIONS = [
    (mutate_tensor, 4),
    (mutate_operator, 4),
    (mutate_opcode, 1),
    (mutate_graph, 1),
    (mutate_signature, 1),
    (mutate_constant, 3),
]


def mutate_fields(rng: random.Random, model: Any) -> tuple[str, bytes | None]:
    """Apply 1 to 3 field mutations, write the model, then restore it."""
    functions, weights = zip(*FIELD_MUTATIONS)
    undo: list[Undo] = []
    described = []
    try:
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            text, u = rng.choices(functions, weights)[0](rng, model)
            described.append(text)
            undo.append(u)
        try:
            content = write_model(model)
        except Exception as e:  # the mutant cannot be written: not the interpreter's business
            return f"fields: {'; '.join(described)} (unwritable: {type(e).__name__}: {e})", None
    finally:
        for u in reversed(undo):
            u()
    return "fields: " + "; ".join(described), content


def flip_bytes(rng: random.Random, content: bytes) -> tuple[str, bytes]:
    data = bytearray(content)
    changes = []
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(data))
        data[pos] = rng.randrange(256)
        changes.append(f"{pos}={data[pos]}")
    return "bytes: " + ", ".join(changes), bytes(data)


def truncate(rng: random.Random, content: bytes) -> tuple[str, bytes]:
    n = rng.randrange(len(content))
    return f"truncated to {n} of {len(content)} bytes", content[:n]


# ------------------------------------------------------------------------------ running a case


def run_case(content: bytes, stages: list[str] | None = None) -> list[np.ndarray]:
    """What a user does with a model; returns its outputs, raises whatever numlite raises.
    ``stages`` gets "invoke" once everything before the invoke went through."""
    deadline = None

    def cancelled() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    interpreter = numlite.Interpreter(model_content=content, check_cancelled=cancelled)
    interpreter.allocate_tensors()
    for d in interpreter.get_input_details():
        interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    if stages is not None:
        stages.append("invoke")
    deadline = time.perf_counter() + CANCEL_AFTER
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def run_case_unwatched(content: bytes, jit: bool, compiles: dict[str, tuple[float, bool]] | None = None) -> tuple[list[np.ndarray], str]:
    """``run_case`` on the compiled engine (``jit``) or the NumPy engine, without a per-operator
    hook (which would keep the model on NumPy): stopped by ``cancel()`` after ``CANCEL_AFTER``
    (a compiled loop polls that flag). Returns the outputs and the jit report's reason ("" when
    the model ran compiled). ``compiles`` gets the module of a model compiled (or loaded from the
    disk cache) here: its seconds and whether Numba's cache held it."""
    interpreter = numlite.Interpreter(model_content=content, jit=jit)
    try:
        interpreter.allocate_tensors()  # (jit=True compiles here)
    finally:
        entry = interpreter.jit_report()["subgraphs"].get(0, {}) if jit else {}
        if compiles is not None and entry.get("module") and entry.get("compile_seconds") is not None and not entry["reused"]:
            compiles[entry["module"]] = (entry["compile_seconds"], entry["cache_hit"])
    for d in interpreter.get_input_details():
        interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    timer = threading.Timer(CANCEL_AFTER, interpreter.cancel)
    timer.start()
    try:
        interpreter.invoke()
    finally:
        timer.cancel()
    outputs = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
    return outputs, entry.get("reason", "") if jit else "NumPy"


def outcome_of(run: Callable[[], Any]) -> tuple[str, Any]:
    """("ran", what ``run`` returned) or (the NumliteError's class, the error); anything else raises."""
    try:
        return "ran", run()
    except numlite.NumliteError as e:
        return type(e).__name__, e


def compare_engines(numpy_outcome: tuple[str, Any], jit_outcome: tuple[str, Any]) -> str | None:
    """Why the compiled engine's outcome differs from the NumPy engine's (None when it does not)."""
    (kind, value), (jit_kind, jit_value) = numpy_outcome, jit_outcome
    if jit_kind == "ran" and "compiling failed" in jit_value[1]:
        return f"the compiled engine failed instead of a NotCompiled fallback: {jit_value[1]}"
    if "CancelledError" in (kind, jit_kind):
        return None  # one engine ran out of time (the compiled one is faster): nothing to compare
    if kind != jit_kind:
        return f"NumPy engine: {kind} {value if kind != 'ran' else ''}; compiled engine: {jit_kind} {jit_value if jit_kind != 'ran' else ''}"
    if kind != "ran":
        if str(value) != str(jit_value):
            return f"{kind} messages differ: NumPy engine {str(value)!r}, compiled engine {str(jit_value)!r}"
        return None
    (outputs, _), (jit_outputs, _) = value, jit_value
    if len(outputs) != len(jit_outputs):
        return f"{len(outputs)} outputs on NumPy, {len(jit_outputs)} compiled"
    for k, (a, b) in enumerate(zip(outputs, jit_outputs)):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"output {k}: {a.dtype}{a.shape} on NumPy, {b.dtype}{b.shape} compiled"
        same = np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True) if a.dtype.kind in "fc" else np.array_equal(a, b)
        if not same:
            return f"output {k} differs: NumPy engine {a.reshape(-1)[:8]}, compiled engine {b.reshape(-1)[:8]}"
    return None


@contextlib.contextmanager
def address_space_guard(headroom: int):
    """Make allocations beyond ``headroom`` bytes more than the process maps now fail with a
    MemoryError (Linux), so that a blow-up is reported instead of taking the machine's memory."""
    try:
        with open("/proc/self/status") as f:
            mapped = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        old = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, StopIteration, ValueError):
        yield
        return
    limit = mapped + headroom if old[1] == resource.RLIM_INFINITY else min(mapped + headroom, old[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def memory_error_in_chain(e: BaseException | None) -> bool:
    """Whether a MemoryError caused this error (the runtime wraps what kernels raise)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, MemoryError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


@pytest.fixture
def fuzz_limits(monkeypatch):
    for name, value in FUZZ_LIMITS.items():
        monkeypatch.setattr(verifier, name, value)


@pytest.fixture(scope="session")
def fuzz_models() -> tuple[dict[str, bytes], dict[str, Any]]:
    """The base models, converted once per worker, and their model objects (mutate_fields
    changes fields and restores them, so the shards of one worker share them)."""
    bases = {name: make() for name, make in MODELS.items()}
    return bases, {name: read_model(content) for name, content in bases.items()}


class Tally:
    """Outcomes of the cases: counts by error class, overall and by kind of mutation."""

    def __init__(self) -> None:
        self.outcomes: collections.Counter = collections.Counter()
        self.by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.failures: list[str] = []
        self.slowest = (0.0, "")
        self.jit_outcomes: collections.Counter = collections.Counter()  # on the compiled engine
        self.cpu_seconds: collections.Counter = collections.Counter()  # by run: CPU time (wall time means little under load)
        self.reused = 0  # the NumPy engine's unwatched runs taken from the watched run (an error before invoke)
        self.compiles: dict[str, tuple[float, bool]] = {}  # module -> (seconds, loaded from Numba's disk cache)

    def add(self, kind: str, outcome: str) -> None:
        self.outcomes[outcome] += 1
        self.by_kind[kind][outcome] += 1

    def report(self) -> str:
        lines = ["outcomes: " + ", ".join(f"{k} {v}" for k, v in self.outcomes.most_common())]
        for kind, counter in sorted(self.by_kind.items()):
            lines.append(f"  {kind}: " + ", ".join(f"{k} {v}" for k, v in counter.most_common()))
        lines.append(f"slowest case on the NumPy engine: {self.slowest[0] * 1000:.0f} ms of CPU: {self.slowest[1][:300]}")
        return "\n".join(lines)

    def jit_report(self) -> str:
        compiled = [seconds for seconds, hit in self.compiles.values() if not hit]
        loaded = [seconds for seconds, hit in self.compiles.values() if hit]
        cpu = self.cpu_seconds
        return "\n".join([
            "compiled engine: " + ", ".join(f"{k} {v}" for k, v in self.jit_outcomes.most_common()),
            f"  structures: {len(compiled)} compiled here ({sum(compiled):.1f} s), {len(loaded)} loaded from the disk cache"
            f" ({sum(loaded):.1f} s); the NumPy engine's unwatched run taken from the watched one in {self.reused} cases",
            f"  CPU s: NumPy engine watched {cpu['numpy']:.1f}, unwatched {cpu['unwatched']:.1f}, compiled engine {cpu['jit']:.1f}",
        ])  # fmt: skip


def run_engine(tally: Tally, what: str, engine: str, run: Callable[[], Any]) -> tuple[str, Any]:
    """``outcome_of(run)``, timed, with anything but a NumliteError (or a memory blow-up, or a
    case over its time) recorded as a failure: then ("FAILED", None)."""
    started, cpu = time.thread_time(), time.process_time()
    try:
        result = outcome_of(run)
        if memory_error_in_chain(result[1] if result[0] != "ran" else None):  # memory the verified shapes do not need
            tally.failures.append(f"{what} on {engine}: memory blow-up:\n{result[1]!r}")
    except Exception:  # anything else is a bug
        result = ("FAILED", None)
        tally.failures.append(f"{what} on {engine}:\n{traceback.format_exc()}")
    elapsed = time.thread_time() - started  # the case's own CPU time: the wall time of a loaded machine says little
    tally.cpu_seconds[engine] += time.process_time() - cpu
    if engine == "numpy" and elapsed > tally.slowest[0]:
        tally.slowest = (elapsed, f"{what} -> {result[0]}")
    # a compiled case may compile once (its structure is new), in seconds under load
    if elapsed > CASE_SECONDS * (1 if engine == "numpy" else JIT_CASE_FACTOR):
        tally.failures.append(f"{what} took {elapsed:.2f} s of CPU on {engine} -> {result[0]}")
    return result


def fuzz_case(case: int, bases: dict[str, bytes], models: dict[str, Any], tally: Tally, jit: bool = False) -> None:
    """Draw case ``case``'s mutation, run it, and record what happened."""
    rng = random.Random(f"{SEED}:{case}")
    name = rng.choice(sorted(bases))
    kind = rng.choices(["bytes", "truncate", "fields"], [4, 1, 5])[0]
    if kind == "bytes":
        described, content = flip_bytes(rng, bases[name])
    elif kind == "truncate":
        described, content = truncate(rng, bases[name])
    else:
        described, content = mutate_fields(rng, models[name])
    if content is None:
        tally.add(kind, "unwritable")
        return
    what = f"case {case} ({name}, {described})"
    # The watched NumPy run (check_cancelled: the per-operator path) as always; with ``jit``, the
    # compiled engine and the NumPy engine as an application runs them (no hook), compared.
    stages: list[str] = []
    watched = run_engine(tally, what, "numpy", lambda: run_case(content, stages))
    tally.add(kind, watched[0])
    if not jit:
        return
    compiled = run_engine(tally, what, "jit", lambda: run_case_unwatched(content, True, tally.compiles))
    ran_compiled = compiled[0] == "ran" and not compiled[1][1]
    tally.jit_outcomes["ran compiled" if ran_compiled else "ran on NumPy" if compiled[0] == "ran" else compiled[0]] += 1
    if compiled[0] in ("FAILED", "CancelledError"):
        return  # a failure recorded, or nothing to compare (compare_engines)
    if "invoke" in stages:
        unwatched = run_engine(tally, what, "unwatched", lambda: run_case_unwatched(content, False))
    else:  # the same error: the hook is called only by invoke, and the error came before it
        unwatched = watched
        tally.reused += 1
    if unwatched[0] != "FAILED":
        difference = compare_engines(unwatched, compiled)
        if difference is not None:
            tally.failures.append(f"{what}: the engines differ: {difference}")


def test_unmutated_models_run_on_both_engines(fuzz_models, jit_cache_dir, monkeypatch):
    bases, _ = fuzz_models
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)
    for content in bases.values():
        expected = run_case(content)  # every unmutated model runs
        if numlite.jit.available():  # and gives the same outputs compiled
            assert compare_engines(("ran", (expected, "")), outcome_of(lambda: run_case_unwatched(content, True))) is None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN and overflow in mutated weights
@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_cases(shard, fuzz_models, fuzz_limits, jit_cache_dir, monkeypatch):
    """The cases ``shard``, ``shard + SHARDS``, ...: the xdist workers share the run."""
    bases, models = fuzz_models
    jit = numlite.jit.available()  # Numba is imported here, before the address-space guard
    monkeypatch.setenv("NUMLITE_CACHE_DIR", jit_cache_dir)  # shared by the workers: a structure compiles once
    cases = range(shard, CASES, SHARDS)
    tally = Tally()
    rss_before = peak_rss_bytes()
    start = time.perf_counter()
    with address_space_guard(ADDRESS_SPACE_HEADROOM):
        for case in cases:
            fuzz_case(case, bases, models, tally, jit and case < JIT_CASES)
    total = time.perf_counter() - start
    rss_growth = peak_rss_bytes() - rss_before

    print(f"\nfuzz shard {shard} of {SHARDS}: {len(cases)} of {CASES} cases (seed {SEED}) in {total:.1f} s;"
          f" peak RSS grew by {rss_growth >> 20} MiB")
    if jit:
        print(tally.jit_report())
    else:
        print(f"compiled engine not run: {numlite.jit.status()}")
    print(tally.report())
    failures = tally.failures
    for failure in failures:
        print("\nFUZZ FAILURE " + failure)
    assert not failures, f"{len(failures)} failing case(s); the first ones:\n\n" + "\n\n".join(failures[:5])
    assert rss_growth < MAX_RSS_GROWTH, f"peak memory grew by {rss_growth >> 20} MiB"
    assert tally.outcomes["ran"] > 0 and tally.outcomes["ModelError"] > 0  # the mix reaches both ends
    assert not jit or not any(case < JIT_CASES for case in cases) or tally.jit_outcomes["ran compiled"] > 0
