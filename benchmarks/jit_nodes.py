"""Where a whole model's time goes, node by node: the compiled engine against LiteRT.

    python benchmarks/jit_nodes.py [--models mobilenetv2,...] [--threads 1] [--runs N] [--top N]

Each operator of the model's main subgraph (``jit_cnn.py``'s models, converted by the official
converter and cached) is cut out into a model of its own (numlite's writer: the operator, its
constants, its other inputs as model inputs), which LiteRT (XNNPACK) and numlite's compiled
engine run alternately on random inputs. Nodes of one op and the same shapes are compiled
once. Prints, per op, the sum of the node medians in microseconds and the ratio, then the
``--top`` nodes that cost the most over LiteRT. A node alone runs on cold caches more than in
the model, and LiteRT's XNNPACK may fuse neighbours in the model that it cannot here, so the
sums are a guide to where the time goes, not the model's time. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import jit_cnn  # noqa: E402  (its models)
import run as whole_models  # noqa: E402

import numlite  # noqa: E402
from numlite.model import read_model_file, write_model  # noqa: E402
from numlite.model.ir import Model, Subgraph  # noqa: E402


def one_node(model: Model, k: int) -> bytes:
    """Operator ``k`` of subgraph 0 as a model of its own."""
    graph = model.subgraphs[0]
    op = graph.operators[k]
    tensors, index = [], {}

    def take(t: int) -> int:
        if t < 0:
            return t
        if t not in index:
            index[t] = len(tensors)
            tensors.append(copy.copy(graph.tensors[t]))
        return index[t]

    inputs = [take(t) for t in op.inputs]
    outputs = [take(t) for t in op.outputs]
    sub = Subgraph(tensors=tensors, inputs=[index[t] for t in op.inputs if t >= 0 and not _constant(model, graph.tensors[t])],
                   outputs=outputs, operators=[copy.copy(op)])  # fmt: skip
    sub.operators[0].inputs, sub.operators[0].outputs = inputs, outputs
    sub.operators[0].opcode_index = 0
    return write_model(Model(operator_codes=[model.operator_codes[op.opcode_index]], subgraphs=[sub], buffers=model.buffers,
                             version=model.version))  # fmt: skip


def _constant(model: Model, tensor: Any) -> bool:
    return tensor.buffer > 0 and len(model.buffers[tensor.buffer].data) > 0


def _time(interpreters: dict[str, Any], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {key: [] for key in interpreters}
    order = list(interpreters.items())
    for r in range(runs):
        for key, it in order[r % len(order):] + order[: r % len(order)]:
            started = time.perf_counter()
            it.invoke()
            times[key].append((time.perf_counter() - started) * 1e6)
    return {key: statistics.median(values) for key, values in times.items()}


def profile(path: str, threads: int, runs: int) -> list[tuple[int, str, str, float, float]]:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    model = read_model_file(path)
    graph = model.subgraphs[0]
    rows = []
    rng = np.random.default_rng(0)
    for k, op in enumerate(graph.operators):
        name = model.operator_codes[op.opcode_index].builtin
        shapes = " ".join("x".join(map(str, graph.tensors[t].shape)) for t in op.inputs if t >= 0)
        loose = [graph.tensors[t] for t in op.inputs if t >= 0 and not _constant(model, graph.tensors[t])]
        if any(t.dtype.kind in "iu" for t in loose[1:]):
            continue  # a shape or positions computed in the model: random values would not be one (RESHAPE's shape)
        content = one_node(model, k)
        interpreters = {"litert": LiteRT(model_content=content, num_threads=threads),
                        "jit": numlite.Interpreter(model_content=content, jit=True, num_threads=threads)}  # fmt: skip
        for it in interpreters.values():
            it.allocate_tensors()
            for d in it.get_input_details():
                value = rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]) if np.dtype(d["dtype"]).kind == "f" else \
                    rng.integers(-100, 100, d["shape"]).astype(d["dtype"])  # fmt: skip
                it.set_tensor(d["index"], value)
            it.invoke()
        us = _time(interpreters, runs)
        rows.append((k, name, shapes, us["litert"], us["jit"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenetv2", help=f"comma-separated, of {','.join(jit_cnn.MODELS)}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cache-dir", default=whole_models.DEFAULT_CACHE)
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        rows = profile(jit_cnn.MODELS[name](args.cache_dir), args.threads, args.runs)
        by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for _, op, _, litert, jit in rows:
            by_op[op][0] += litert
            by_op[op][1] += jit
            by_op[op][2] += 1
        print(f"\n{name}, {args.threads} thread(s): sums of the node medians")
        print("| op | nodes | LiteRT µs | jit µs | jit / LiteRT |\n| --- | --- | --- | --- | --- |")
        for op, (litert, jit, count) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
            print(f"| {op} | {count} | {litert:.0f} | {jit:.0f} | {jit / litert:.2f}x |")
        total_l, total_j = sum(r[3] for r in rows), sum(r[4] for r in rows)
        print(f"| all | {len(rows)} | {total_l:.0f} | {total_j:.0f} | {total_j / total_l:.2f}x |")
        print(f"\nthe {args.top} nodes costing the most over LiteRT")
        print("| node | op | input shapes | LiteRT µs | jit µs | jit / LiteRT |\n| --- | --- | --- | --- | --- | --- |")
        for k, op, shapes, litert, jit in sorted(rows, key=lambda r: r[3] - r[4])[: args.top]:
            print(f"| {k} | {op} | {shapes} | {litert:.0f} | {jit:.0f} | {jit / litert:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
