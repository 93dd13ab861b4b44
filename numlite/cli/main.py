"""``numlite``: look inside a ``.tflite`` model and run it from the shell.

    numlite inspect MODEL [--json] [--full-names] [--ops [--no-litert]]
    numlite ops MODEL [--json] [--no-litert]
    numlite run MODEL [--inputs in.npz] [--output out.npz] [--seed N] [--repeat N] [--signature KEY]
                      [--profile] [--trace trace.json]
    numlite bench MODEL [--runs N] [--warmup N] [--threads N[,N...]] [--seed N] [--json out.json]
    numlite convert SOURCE [-o OUT.tflite] [--signature KEY ...] [--no-safe-mode]
    numlite convert MODEL.pb --inputs A,B --outputs C [--input-shapes A:1,3;B:-1,4] [-o OUT.tflite]
    numlite predict MODEL INPUTS... -o OUT.npz|OUT.parquet [--workers N] [--batch-size N] [--resume]
                    [--compare OTHER [--plot FILE.png]] [--ray [ADDRESS]]   (numlite.batch.cli)

Errors that numlite raises on purpose (a malformed model, an unsupported op, an input of the
wrong shape) and problems with the command's own files are printed as one ``error: ...`` line
on stderr with exit code 1; a traceback means a bug. ``numlite ops`` (and ``inspect --ops``)
exits with code 3 when numlite has no kernel for some operator of the model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import zipfile
from typing import Any, Callable, Sequence

import numpy as np
import tflite

import numlite
from numlite.errors import NumliteError
from numlite.model import Model, read_model_file, schema
from numlite.model.ir import Options, Quantization, Subgraph, Tensor


class CliError(Exception):
    """A problem with the command's own inputs (npz files, arguments), reported like a NumliteError."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error argparse has already explained
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return args.handler(args)
    except (NumliteError, CliError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `numlite inspect m.tflite | head`
        sys.stdout = open(os.devnull, "w")  # keep the interpreter's exit flush quiet
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numlite", description="Inspect and run TensorFlow Lite models with numlite (NumPy)."
    )
    parser.add_argument("--version", action="version", version=f"numlite {numlite.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser("inspect", help="summarize a model: subgraphs, operators, tensors, signatures, arena")
    p.add_argument("model", help="path of a .tflite file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--full-names", action="store_true", help=f"do not shorten tensor names to {_NAME_WIDTH} characters")
    p.add_argument("--ops", action="store_true", help="list the operators and what can run them (as `numlite ops`)")
    p.add_argument("--no-litert", action="store_true", help="with --ops: do not ask LiteRT")
    p.set_defaults(handler=_cmd_inspect)

    p = commands.add_parser(
        "ops", help="list the operators a model uses and whether numlite and LiteRT can run each (exit 3 if numlite cannot)")
    p.add_argument("model", help="path of a .tflite file")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-litert", action="store_true", help="do not ask LiteRT (ai_edge_litert) which operators it has")
    p.set_defaults(handler=_cmd_ops)

    p = commands.add_parser("run", help="run a model once (plus timed repeats) and summarize its outputs")
    p.add_argument("model", help="path of a .tflite file")
    p.add_argument(
        "--inputs", metavar="NPZ", help="input arrays (.npz keyed by input name or arr_0, arr_1...; or one .npy)"
    )
    p.add_argument(
        "--output", metavar="NPZ",
        help="save the outputs to this .npz, keyed by output tensor name (signature output name with --signature)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs used without --inputs (default 0)")
    p.add_argument("--repeat", type=_non_negative, default=3, help="timed invokes after the first one (default 3)")
    p.add_argument("--signature", metavar="KEY", help="run this signature instead of the main subgraph")
    p.add_argument(
        "--profile", action="store_true",
        help="profile every invoke and print the time per node type and the most expensive nodes",
    )  # fmt: skip
    p.add_argument(
        "--trace", metavar="JSON", help="profile every invoke and write a Chrome trace (chrome://tracing, Perfetto)"
    )
    p.set_defaults(handler=_cmd_run)

    p = commands.add_parser(
        "bench", help="time numlite (and LiteRT, when ai_edge_litert is installed) on a model, side by side")
    p.add_argument("model", help="path of a .tflite file")
    p.add_argument("--runs", type=_positive, default=10, help="timed invokes per interpreter (default 10)")
    p.add_argument("--warmup", type=_non_negative, default=2, help="untimed invokes first (default 2)")
    p.add_argument(
        "--threads", type=_thread_counts, default=None,
        help="num_threads to measure with, comma-separated (default: 1 and all cores)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    p.add_argument("--no-litert", action="store_true", help="time numlite alone")
    p.add_argument("--no-overhead", action="store_true", help="skip the Python-overhead measurement")
    p.add_argument(
        "--jit", action="store_true",
        help="also time numlite's compiled engine (Interpreter(jit=True), docs/jit.md) in the same runs",
    )  # fmt: skip
    p.set_defaults(handler=_cmd_bench)

    p = commands.add_parser(
        "convert", help="convert a SavedModel folder, a .keras file or a frozen .pb graph to .tflite (needs TensorFlow)")
    p.add_argument("source", help="a SavedModel folder, a Keras model file (.keras, .h5), or a frozen GraphDef (.pb)")
    p.add_argument("-o", "--output", metavar="TFLITE", help="where to write the model (default: SOURCE.tflite)")
    p.add_argument(
        "--signature", metavar="KEY", action="append",
        help="convert only this SavedModel signature (repeatable; default: all of them)",
    )  # fmt: skip
    p.add_argument("--inputs", metavar="NAMES", help="frozen graph: the placeholders fed, comma-separated")
    p.add_argument("--outputs", metavar="NAMES", help="frozen graph: the tensors computed, comma-separated")
    p.add_argument("--input-shapes", metavar="SHAPES",
                   help="frozen graph: placeholder shapes, 'name:d0,d1;name2:d0' (-1 for a dynamic dimension)")
    p.add_argument("--no-safe-mode", action="store_true",
                   help="Keras file: run the Python code of its Lambda layers to load them (Keras's safe_mode=False; "
                        "only for a file you trust)")
    p.set_defaults(handler=_cmd_convert)

    from numlite.batch.cli import add_parser as add_predict  # the command's code lives in numlite.batch

    add_predict(commands, _positive, _non_negative)
    return parser


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _thread_counts(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts like 1,2, got {text!r}") from None
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1, got {text!r}")
    return list(dict.fromkeys(counts))


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


# ----------------------------------------------------------------------------- ops

# Exit code of `numlite ops` (and `inspect --ops`) when numlite has no kernel for some operator:
# apart from 1 (an error) and 2 (a usage error), so that scripts can tell them apart.
EXIT_UNSUPPORTED_OPS = 3


def _cmd_ops(args: argparse.Namespace) -> int:
    from numlite.op_support import ops_report

    report = ops_report(args.model, litert=not args.no_litert)
    print(json.dumps(report.to_dict(), indent=2) if args.json else str(report))
    return 0 if report.numlite_can_run else EXIT_UNSUPPORTED_OPS


# ----------------------------------------------------------------------------- bench


def _cmd_bench(args: argparse.Namespace) -> int:
    from numlite.benchmark import litert_available, measure

    read_model_file(args.model)  # a missing or malformed file: the usual one-line error
    threads = args.threads or list(dict.fromkeys([1, os.cpu_count() or 1]))
    use_litert = not args.no_litert and litert_available()
    row = measure(
        args.model, runs=args.runs, warmup=args.warmup, threads=threads, seed=args.seed,
        litert=use_litert, overhead=not args.no_overhead, jit=args.jit,
    )  # fmt: skip
    if "numlite_error" in row:
        raise CliError(f"numlite cannot run {args.model}: {row['numlite_error']}")
    print(f"{args.model}: {row['ops']} operators in {row['subgraphs']} subgraph(s), {_bytes(row['file_bytes'])}")
    print(f"medians of {args.runs} runs after {args.warmup} warm-up, invokes alternating")
    if not row["blas_threads_limited"]:
        print("note: threadpoolctl is not installed: numlite's num_threads does not limit BLAS here")
    headers = ["threads", "numlite ms"] + (["LiteRT ms", "numlite/LiteRT"] if use_litert else [])
    headers += (["jit ms"] + (["jit/LiteRT"] if use_litert else [])) if args.jit else []
    rows = []
    for n in map(str, threads):
        cells = [n, _ms_cell(row["numlite_ms"].get(n))]
        if use_litert:
            cells += [_ms_cell(row["litert_ms"].get(n)), _ratio_cell(row["ratio"].get(n))]
        if args.jit:
            cells += [_ms_cell(row.get("jit_ms", {}).get(n))]
            cells += [_ratio_cell(row.get("jit_ratio", {}).get(n))] if use_litert else []
        rows.append(cells)
    print("\n".join(_table(headers, rows)))
    facts = [("numlite arena", _bytes(row["numlite_arena_bytes"]))]
    if "numlite_traced_bytes" in row:
        facts.append(("numlite memory", _bytes(row["numlite_traced_bytes"]) + " allocated to run (tracemalloc)"))
    if "python_overhead_ms" in row:
        facts.append(("Python overhead", f"{row['python_overhead_ms']:.3f} ms per invoke (kernels stubbed)"))
    elif "python_overhead_error" in row:
        facts.append(("Python overhead", f"not measured: {row['python_overhead_error']}"))
    if "max_abs_diff" in row:
        diff = row["max_abs_diff"]
        facts.append(("max abs diff", f"{diff:.3g}" if isinstance(diff, float) else str(diff)))
        facts.append(("max abs output", f"{row['litert_output_max_abs']:.3g} (LiteRT)"))
    if "litert_error" in row:
        facts.append(("LiteRT", f"failed: {row['litert_error']}"))
    if args.jit:
        facts.append(("compiled engine", _jit_summary(row)))
    print("\n".join(_facts(facts)))
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(row, f, indent=2)
        except OSError as e:
            raise CliError(f"cannot write {args.json}: {e}") from e
    return 0


def _ms_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ratio_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _jit_summary(row: dict[str, Any]) -> str:
    """One line: whether the model compiled (else why not), the compile time, the difference."""
    if "jit_error" in row:
        return f"failed: {row['jit_error']}"
    seconds = max(row.get("jit_compile_s", {}).values(), default=0.0)
    what = "compiled" if row.get("jit_compiled") else f"ran on NumPy ({row.get('jit_reason')})"
    diff = row.get("jit_max_abs_diff")
    diff_text = f"; max abs diff {diff:.3g}" if isinstance(diff, float) else ""
    return f"{what}; allocate_tensors {seconds:.2f} s (compile or cache load){diff_text}"


# ----------------------------------------------------------------------------- convert


def _cmd_convert(args: argparse.Namespace) -> int:
    source = os.path.normpath(args.source)
    if not os.path.exists(source):
        raise CliError(f"{args.source}: no such file or folder")
    from numlite.converter import TFLiteConverter  # imports TensorFlow

    frozen_graph_options = args.inputs or args.outputs or args.input_shapes
    if source.endswith(".pb") and not os.path.isdir(source):
        if not (args.inputs and args.outputs):
            raise CliError("a frozen graph needs --inputs and --outputs")
        converter = TFLiteConverter.from_frozen_graph(
            source, _names(args.inputs), _names(args.outputs), _input_shapes(args.input_shapes))
    elif frozen_graph_options:
        raise CliError("--inputs, --outputs and --input-shapes apply to frozen graphs (.pb) only")
    elif args.no_safe_mode and not source.endswith((".keras", ".h5")):
        raise CliError("--no-safe-mode applies to Keras files (.keras, .h5) only")
    elif os.path.isdir(source):
        converter = TFLiteConverter.from_saved_model(source, signature_keys=args.signature)
    elif source.endswith((".keras", ".h5")):
        if args.signature:
            raise CliError("--signature applies to SavedModels only")
        converter = TFLiteConverter.from_keras_model(_load_keras_file(source, safe_mode=not args.no_safe_mode))
    else:
        raise CliError(f"{args.source}: expected a SavedModel folder, a .keras/.h5 file or a frozen .pb graph")
    data = converter.convert()
    output = args.output or f"{source}.tflite"
    try:
        with open(output, "wb") as f:
            f.write(data)
    except OSError as e:
        raise CliError(f"cannot write {output}: {e.strerror}") from None
    print(f"wrote {output}")
    print(converter.report)
    return 0


def _load_keras_file(path: str, safe_mode: bool = True) -> Any:
    """A ``.keras`` or ``.h5`` model, loaded by the Keras that saved it: tf_keras (Keras 2)
    for a file whose metadata says version 2, else Keras 3. ``safe_mode=False`` lets Keras
    run the Python code a Lambda layer stored."""
    version = _saved_keras_version(path)
    if version.startswith("2."):
        try:
            import tf_keras as keras
        except ImportError:
            raise CliError(f"{path} was saved by Keras {version} (tf_keras); install tf_keras to load it") from None
    else:
        import keras
    options = {} if safe_mode or not path.endswith(".keras") else {"safe_mode": False}  # (.h5 has no safe mode)
    try:
        return keras.models.load_model(path, compile=False, **options)
    except Exception as e:  # noqa: BLE001 (Keras raises many kinds; the user needs the message)
        hint = " (numlite convert --no-safe-mode loads it, if you trust the file)" if "safe_mode" in str(e) else ""
        raise CliError(f"Keras {getattr(keras, '__version__', '')} cannot load {path}: {type(e).__name__}: "
                       f"{str(e).splitlines()[0]}{hint}") from None


def _saved_keras_version(path: str) -> str:
    """The Keras version recorded in a ``.keras`` archive's metadata or an HDF5 file's
    attributes ("" when it says none)."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return str(json.loads(archive.read("metadata.json")).get("keras_version", ""))
        import h5py

        with h5py.File(path, "r") as f:
            version = f.attrs.get("keras_version", "")
            return version.decode() if isinstance(version, bytes) else str(version)
    except (OSError, KeyError, ValueError, ImportError):
        return ""


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _input_shapes(text: str | None) -> dict[str, list[int | None]]:
    """``"a:1,3;b:-1,4"`` as ``{"a": [1, 3], "b": [None, 4]}`` (``"a:"`` is a scalar)."""
    shapes: dict[str, list[int | None]] = {}
    for item in (text or "").split(";"):
        if not item.strip():
            continue
        name, sep, dims = item.rpartition(":")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name.strip()] = [None if int(d) < 0 else int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise CliError(f"--input-shapes: cannot read {item!r}; expected name:d0,d1,...") from None
    return shapes


# ----------------------------------------------------------------------------- inspect

_NAME_WIDTH = 60

# Option fields holding a TensorType code, in any options table.
_TENSOR_TYPE_FIELDS = {
    "in_data_type", "out_data_type", "out_type", "output_type", "idx_out_type",
    "key_dtype", "value_dtype", "quantized_bias_type",
}  # fmt: skip

# Option fields whose enum exists in one table only.
_TABLE_ENUMS = {
    ("MirrorPadOptions", "mode"): tflite.MirrorPadMode,
    ("LSHProjectionOptions", "type"): tflite.LSHProjectionType,
    ("LSTMOptions", "kernel_type"): tflite.LSTMKernelType,
    ("EmbeddingLookupSparseOptions", "combiner"): tflite.CombinerType,
    ("FullyConnectedOptions", "weights_format"): tflite.FullyConnectedOptionsWeightsFormat,
}


def _cmd_inspect(args: argparse.Namespace) -> int:
    if args.ops:
        return _cmd_ops(args)
    model = read_model_file(args.model)
    info = describe(model, args.model)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_description(info, full_names=args.full_names))
    return 0


def describe(model: Model, path: str | None = None) -> dict[str, Any]:
    """Everything ``numlite inspect`` shows, as plain JSON-ready values."""
    info: dict[str, Any] = {
        "path": None if path is None else str(path),
        "file_bytes": os.path.getsize(path) if path is not None else None,
        "description": model.description,
        "version": model.version,
        "buffers": len(model.buffers),
        "buffer_data_bytes": sum(len(b) for b in model.buffers),
        "metadata": [_metadata(model, m.name, m.buffer) for m in model.metadata],
        "subgraphs": [_subgraph(model, s, sg) for s, sg in enumerate(model.subgraphs)],
        "signatures": [
            {"key": sig.key, "subgraph": sig.subgraph_index, "inputs": dict(sig.inputs), "outputs": dict(sig.outputs)}
            for sig in model.signature_defs
        ],
    }
    info["arena_bytes"], info["arena_error"] = _arena(model)
    return info


def _metadata(model: Model, name: str, buffer: int) -> dict[str, Any]:
    data = model.buffers[buffer].data if 0 <= buffer < len(model.buffers) else np.zeros(0, np.uint8)
    entry: dict[str, Any] = {"name": name, "bytes": int(data.size)}
    raw = bytes(data).rstrip(b"\0")
    if name == "min_runtime_version" and raw.isascii():  # the only metadata that is plain text
        entry["value"] = raw.decode("ascii")
    return entry


def _subgraph(model: Model, index: int, sg: Subgraph) -> dict[str, Any]:
    def named(indices: list[int]) -> list[dict[str, Any]]:
        return [{"index": i, "name": sg.tensors[i].name if 0 <= i < len(sg.tensors) else None} for i in indices]

    return {
        "index": index,
        "name": sg.name,
        "inputs": named(sg.inputs),
        "outputs": named(sg.outputs),
        "operators": [_operator(model, n, op) for n, op in enumerate(sg.operators)],
        "tensors": [_tensor(model, i, t) for i, t in enumerate(sg.tensors)],
    }


def _operator(model: Model, index: int, op: Any) -> dict[str, Any]:
    code = model.operator_codes[op.opcode_index] if 0 <= op.opcode_index < len(model.operator_codes) else None
    entry: dict[str, Any] = {
        "index": index,
        "op": code.builtin if code is not None else f"<bad opcode index {op.opcode_index}>",
        "custom_code": code.custom_code if code is not None and code.builtin == "CUSTOM" else None,
        "version": code.version if code is not None else None,
        "inputs": list(op.inputs),
        "outputs": list(op.outputs),
        "options": None,
    }
    if op.builtin_options is not None:
        entry["options_type"] = op.builtin_options.type_name
        entry["options"] = _options(op.builtin_options)
    if op.builtin_options2 is not None:
        entry["options2_type"] = op.builtin_options2.type_name
        entry["options2"] = _options(op.builtin_options2)
    if op.custom_options:
        entry["custom_options_bytes"] = len(op.custom_options)
    return entry


def _options(options: Options) -> dict[str, Any]:
    """Option fields by name, enum codes replaced by their schema names."""
    return {name: _option_value(options.type_name, name, value) for name, value in options.fields().items()}


def _option_value(table: str, name: str, value: Any) -> Any:
    names: dict[int, str] | None = None
    if name == "padding":
        names = schema.PADDING_NAMES
    elif name == "fused_activation_function":
        names = schema.ACTIVATION_NAMES
    elif name in _TENSOR_TYPE_FIELDS:
        names = schema.TENSOR_TYPE_NAMES
    elif (table, name) in _TABLE_ENUMS:
        enum = _TABLE_ENUMS[table, name]
        names = {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}
    if names is not None and isinstance(value, (int, np.integer)):
        return names.get(int(value), int(value))
    return _plain(value)


def _plain(value: Any) -> Any:
    """A JSON-ready copy of an option or quantization value."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Options):
        return _options(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _tensor(model: Model, index: int, t: Tensor) -> dict[str, Any]:
    nbytes = len(model.buffers[t.buffer]) if 0 <= t.buffer < len(model.buffers) else 0
    signature = list(t.shape_signature) if t.shape_signature is not None else None
    return {
        "index": index,
        "name": t.name,
        "shape": list(t.shape),
        "shape_signature": signature if signature is not None and signature != list(t.shape) else None,
        "dtype": t.type,
        "quantization": _quantization(t.quantization),
        "kind": "variable" if t.is_variable else ("constant" if nbytes else None),
        "buffer_bytes": nbytes,
        "sparse": t.sparsity is not None,
    }


def _quantization(q: Quantization | None) -> dict[str, Any] | None:
    if q is None or q.scale is None or len(q.scale) == 0:
        return None
    zero_point = q.zero_point if q.zero_point is not None else np.zeros(len(q.scale), np.int64)
    return {"scale": _plain(q.scale), "zero_point": _plain(zero_point), "quantized_dimension": q.quantized_dimension}


def _arena(model: Model) -> tuple[int | None, str | None]:
    """numlite's arena size for the main subgraph, or why it could not be planned."""
    try:
        interpreter = numlite.Interpreter(model_content=model)
        interpreter.allocate_tensors()
        return int(interpreter.arena_bytes), None
    except NumliteError as e:
        return None, _one_line(e)
    except Exception as e:  # a kernel bug must not hide the rest of the summary
        return None, f"{type(e).__name__}: {_one_line(e)}"


def format_description(info: dict[str, Any], full_names: bool = False) -> str:
    """The text form of :func:`describe`: sections of aligned columns."""
    width = None if full_names else _NAME_WIDTH
    lines = [f"Model: {info['path']}" if info["path"] else "Model"]
    facts = [
        ("file size", _bytes(info["file_bytes"]) if info["file_bytes"] is not None else "-"),
        ("description", info["description"] or "-"),
        ("schema version", str(info["version"])),
        ("subgraphs", str(len(info["subgraphs"]))),
        ("buffers", f"{info['buffers']} ({_bytes(info['buffer_data_bytes'])} of data)"),
    ]
    for m in info["metadata"]:
        facts.append((f"metadata {m['name']}", m.get("value", _bytes(m["bytes"]))))
    lines += _facts(facts)

    for sg in info["subgraphs"]:
        title = f"Subgraph {sg['index']}" + (f" ({sg['name']})" if sg["name"] else "")
        lines += ["", title, "=" * len(title)]
        lines += _facts([
            ("inputs", _endpoint_list(sg["inputs"], width)),
            ("outputs", _endpoint_list(sg["outputs"], width)),
            ("operators", _op_counts(sg["operators"])),
        ])  # fmt: skip

        lines += ["", f"Operators ({len(sg['operators'])})"]
        rows = [
            [str(op["index"]), _op_label(op), _indices(op["inputs"]), _indices(op["outputs"]), _options_text(op)]
            for op in sg["operators"]
        ]
        lines += _table(["#", "op", "inputs", "outputs", "options"], rows)

        lines += ["", f"Tensors ({len(sg['tensors'])})"]
        show_signature = any(t["shape_signature"] is not None for t in sg["tensors"])
        headers = ["#", "name", "shape"] + (["signature"] if show_signature else [])
        headers += ["dtype", "quantization", "kind", "buffer bytes"]
        rows = []
        for t in sg["tensors"]:
            row = [str(t["index"]), _shorten(t["name"], width), _shape(t["shape"])]
            if show_signature:
                row.append(_shape(t["shape_signature"]) if t["shape_signature"] is not None else "")
            kind = (t["kind"] or "") + (" sparse" if t["sparse"] else "")
            size = f"{t['buffer_bytes']:,}" if t["buffer_bytes"] else ""
            row += [t["dtype"], _quant_text(t["quantization"]), kind.strip(), size]
            rows.append(row)
        lines += _table(headers, rows)

    lines += ["", f"Signatures ({len(info['signatures'])})"]
    if info["signatures"]:
        rows = [
            [sig["key"], str(sig["subgraph"]), _name_map(sig["inputs"]), _name_map(sig["outputs"])]
            for sig in info["signatures"]
        ]
        lines += _table(["key", "subgraph", "inputs (name=tensor)", "outputs (name=tensor)"], rows)
    else:
        lines.append("  (none)")

    lines.append("")
    if info["arena_bytes"] is not None:
        lines.append(f"Arena: {_bytes(info['arena_bytes'])} (numlite, main subgraph after allocate_tensors)")
    else:
        lines.append(f"Arena: unavailable: error: {info['arena_error']}")
    return "\n".join(lines)


def _facts(pairs: list[tuple[str, str]]) -> list[str]:
    width = max(len(k) for k, _ in pairs)
    return [f"  {k + ':':<{width + 1}} {v}" for k, v in pairs]


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns under a dashed rule; the last column is not padded."""
    if not rows:
        return ["  (none)"]
    widths = [max(len(h), *(len(r[c]) for r in rows)) for c, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        padded = [cell.ljust(w) for cell, w in zip(cells[:-1], widths[:-1])] + [cells[-1]]
        return ("  " + "  ".join(padded)).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n:,} B ({n / size:.1f} {unit})"
    return f"{n:,} B"


def _shape(shape: list[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _indices(indices: list[int]) -> str:
    return ",".join(str(i) for i in indices) if indices else "-"


def _shorten(name: str | None, width: int | None) -> str:
    name = "" if name is None else name
    if width is None or len(name) <= width:
        return name
    keep = width - 3
    return name[: keep - keep // 2] + "..." + name[len(name) - keep // 2 :]


def _endpoint_list(endpoints: list[dict[str, Any]], width: int | None) -> str:
    if not endpoints:
        return "-"
    return ", ".join(
        f"{e['index']} {_shorten(e['name'], width)!r}" if e["name"] is not None else str(e["index"]) for e in endpoints
    )


def _op_counts(ops: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[_op_label(op)] = counts.get(_op_label(op), 0) + 1
    total = sum(counts.values())
    return f"{total}" + (" (" + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) + ")" if counts else "")


def _op_label(op: dict[str, Any]) -> str:
    return f"CUSTOM({op['custom_code']})" if op["custom_code"] is not None else op["op"]


def _options_text(op: dict[str, Any]) -> str:
    parts = []
    for key in ("options", "options2"):
        if op.get(key):
            parts += [f"{k}={_value_text(v)}" for k, v in op[key].items()]
    if op.get("custom_options_bytes"):
        parts.append(f"custom_options={op['custom_options_bytes']} B")
    return " ".join(parts)


def _value_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ",".join(_value_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + " ".join(f"{k}={_value_text(x)}" for k, x in v.items()) + "}"
    return str(v)


def _quant_text(q: dict[str, Any] | None) -> str:
    if q is None:
        return ""
    if len(q["scale"]) == 1:
        zp = q["zero_point"][0] if q["zero_point"] else 0
        return f"scale={q['scale'][0]:.6g} zp={zp}"
    return f"per-axis {q['quantized_dimension']}: {len(q['scale'])} scales"


def _name_map(mapping: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items()) or "-"


# ----------------------------------------------------------------------------- run


def _cmd_run(args: argparse.Namespace) -> int:
    profiling = args.profile or args.trace is not None
    interpreter = numlite.Interpreter(model_path=args.model, profile=profiling)
    provided = _load_arrays(args.inputs) if args.inputs else None
    if args.signature is not None:
        inputs, outputs, timings = _run_signature(interpreter, args.signature, provided, args)
    else:
        inputs, outputs, timings = _run_main(interpreter, provided, args)

    print(f"Model: {args.model}" + (f"  (signature {args.signature!r})" if args.signature is not None else ""))
    print("\nInputs")
    print("\n".join(_table(["name", "shape", "dtype", "source"], [
        [name, _shape(list(v.shape)), v.dtype.name, source] for name, v, source in inputs
    ])))  # fmt: skip
    print("\nOutputs")
    print("\n".join(_table(["name", "shape", "dtype", "min", "max", "mean"], [
        [name, _shape(list(v.shape)), v.dtype.name, *_stats(v)] for name, v in outputs
    ])))  # fmt: skip
    print("\nTiming" + ("  (profiling on: includes its overhead)" if profiling else ""))
    print("\n".join(_facts(timings)))
    profiler = interpreter.profiler
    if args.profile and profiler is not None:
        print()
        print(profiler.summary())
        print()
        print(profiler.per_op_table(top=_TOP_NODES, sort="time"))
    if args.trace is not None and profiler is not None:
        try:
            profiler.save_chrome_trace(args.trace)
        except OSError as e:
            raise CliError(f"cannot write the trace to {args.trace}: {_one_line(e)}") from e
        print(f"\nSaved a Chrome trace of {len(profiler.events)} event(s) to {args.trace}")
    if args.output:
        _save_arrays(args.output, outputs)
        print(f"\nSaved {len(outputs)} output(s) to {args.output}")
    return 0


_TOP_NODES = 10  # nodes listed by `run --profile`, most expensive first

Inputs = list[tuple[str, np.ndarray, str]]
Outputs = list[tuple[str, np.ndarray]]


def _run_main(
    interpreter: numlite.Interpreter, provided: dict[str, np.ndarray] | None, args: argparse.Namespace
) -> tuple[Inputs, Outputs, list]:
    details = interpreter.get_input_details()
    inputs = _choose_inputs([(d["name"], [d["name"]], d) for d in details], provided, args.seed, args.inputs)
    for d, (_, value, _) in zip(details, inputs):
        if tuple(d["shape"]) != value.shape:
            interpreter.resize_tensor_input(d["index"], value.shape)
    allocate_ms = _time_ms(interpreter.allocate_tensors)
    for d, (_, value, _) in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], value)
    first_ms = _time_ms(interpreter.invoke)
    outputs = _unique([(d["name"], interpreter.get_tensor(d["index"])) for d in interpreter.get_output_details()])
    repeats = [_time_ms(interpreter.invoke) for _ in range(args.repeat)]
    return inputs, outputs, _timings(allocate_ms, first_ms, repeats)


def _run_signature(
    interpreter: numlite.Interpreter, key: str, provided: dict[str, np.ndarray] | None, args: argparse.Namespace
) -> tuple[Inputs, Outputs, list]:
    runner = interpreter.get_signature_runner(key)
    details = runner.get_input_details()
    # A signature input can be given under its signature name or its tensor name.
    wanted = [(name, [name, d["name"]], d) for name, d in details.items()]
    inputs = _choose_inputs(wanted, provided, args.seed, args.inputs)
    feed = {name: value for name, value, _ in inputs}
    allocate_ms = None
    if all(tuple(details[name]["shape"]) == value.shape for name, value in feed.items()):
        index = next(s.subgraph_index for s in interpreter.model.signature_defs if s.key == key)
        allocate_ms = _time_ms(interpreter.subgraph(index).allocate)
    result: dict[str, np.ndarray] = {}
    first_ms = _time_ms(lambda: result.update(runner(**feed)))
    repeats = [_time_ms(lambda: runner(**feed)) for _ in range(args.repeat)]
    return inputs, list(result.items()), _timings(allocate_ms, first_ms, repeats)


def _choose_inputs(
    wanted: list[tuple[str, list[str], dict[str, Any]]],
    provided: dict[str, np.ndarray] | None,
    seed: int,
    source: str | None,
) -> Inputs:
    """One array per input: from ``provided`` (by name, else ``arr_<position>``) or seeded random."""
    rng = np.random.default_rng(seed)
    chosen: Inputs = []
    for position, (label, names, d) in enumerate(wanted):
        dtype = np.dtype(d["dtype"])
        if provided is None:
            shape = tuple(int(x) for x in d["shape"])
            chosen.append((label, _random_array(rng, shape, dtype, label), f"random (seed {seed})"))
            continue
        key = next((n for n in names if n in provided), None)
        if key is None and f"arr_{position}" in provided:
            key = f"arr_{position}"
        if key is None:
            raise CliError(
                f"{source} has no array for input {position} {label!r} (looked for {names + [f'arr_{position}']};"
                f" it has {sorted(provided)})"
            )
        chosen.append((label, _as_input_dtype(provided[key], dtype, label), f"{source}[{key}]"))
    return chosen


def _as_input_dtype(value: np.ndarray, dtype: np.dtype, label: str) -> np.ndarray:
    """Convert what np.savez stored (often float64/int64) to the input's dtype when that is the
    same kind of number; refuse conversions that would change meaning (float to int...)."""
    if value.dtype == dtype:
        return value
    if np.can_cast(value.dtype, dtype, "same_kind"):
        return value.astype(dtype)
    raise CliError(f"input {label!r} is {dtype.name} but the given array is {value.dtype.name}")


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, label: str) -> np.ndarray:
    """Floats uniform in [-1, 1], small integers, random bools."""
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(-1.0, 1.0, shape) + 1j * rng.uniform(-1.0, 1.0, shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        return rng.integers(-5, 6, shape).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 11, shape).astype(dtype)
    raise CliError(f"cannot make a random value for input {label!r} of type {dtype.name}: give --inputs")


def _load_arrays(path: str) -> dict[str, np.ndarray]:
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):  # a single .npy: the first input
            return {"arr_0": loaded}
        with loaded:
            return {k: loaded[k] for k in loaded.files}
    except Exception as e:  # missing file, not a zip, truncated array...
        raise CliError(f"cannot read inputs from {path}: {type(e).__name__}: {_one_line(e)}") from e


def _save_arrays(path: str, arrays: Outputs) -> None:
    """Write an .npz at exactly ``path`` (np.savez cannot store a key named "file")."""
    try:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, value in arrays:
                with zf.open(name + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)
    except (OSError, ValueError) as e:
        raise CliError(f"cannot write outputs to {path}: {_one_line(e)}") from e


def _unique(named: Outputs) -> Outputs:
    """Output names as npz keys: distinct ones (a name repeated gets a ``_<n>`` suffix)."""
    seen: set[str] = set()
    result = []
    for name, value in named:
        key, n = name, 1
        while key in seen:
            key, n = f"{name}_{n}", n + 1
        seen.add(key)
        result.append((key, value))
    return result


def _stats(v: np.ndarray) -> list[str]:
    if v.size == 0 or v.dtype.kind not in "biuf":
        return ["-", "-", "-"]
    with np.errstate(all="ignore"):
        return [_num(v.min()), _num(v.max()), _num(np.mean(v, dtype=np.float64))]


def _num(x: Any) -> str:
    x = x.item() if isinstance(x, np.generic) else x
    return str(x) if isinstance(x, (bool, int)) else f"{x:.6g}"


def _time_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def _timings(allocate_ms: float | None, first_ms: float, repeats: list[float]) -> list[tuple[str, str]]:
    rows = [("allocate_tensors", f"{allocate_ms:.3f} ms" if allocate_ms is not None else "(inside the first invoke)")]
    rows.append(("first invoke", f"{first_ms:.3f} ms"))
    if repeats:
        rows.append((
            f"median of {len(repeats)}",
            f"{statistics.median(repeats):.3f} ms (min {min(repeats):.3f}, max {max(repeats):.3f})",
        ))  # fmt: skip
    return rows


if __name__ == "__main__":
    sys.exit(main())
