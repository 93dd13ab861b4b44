"""The fixed cost of one invoke of numlite's compiled engine, and the memory its arenas take.

    python benchmarks/jit_overhead.py [--loops N] [--repeats N] [--memory] [--json out.json]

Timing: a tiny model (one ADD of a [4] float32 input and a constant, written with numlite's
writer) run as ``set_tensor``, ``invoke``, ``get_tensor`` in a tight loop, by LiteRT, numlite's
NumPy engine and numlite with ``jit=True``, in this one process. Each repeat times ``--loops``
rounds of each interpreter in turn (the order rotates); the table gives the median and the best
repeat in µs per round, and the ratio to LiteRT of the medians. The same is done for ``invoke``
alone.

``--memory`` adds the bytes of the compiled engine's memory (``jit_report()``: ``arena_bytes``
for the tensors, ``constant_bytes`` for the constants it made itself, ``shared_constant_bytes``
for the model's constants it reads in place) for the models of
``benchmarks/control_flow.py`` (converted by the official converter; cached as that script
does) and a small float MLP written with numlite's writer (the compiled engine has no CONV_2D
yet, so a CNN would not compile), beside numlite's NumPy-engine arena (``arena_bytes``).
Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from one_op_model import Graph, k, model, one_op, out, x  # noqa: E402

import numlite  # noqa: E402


def tiny_model() -> tuple[bytes, list[np.ndarray]]:
    """``y = x + c`` on [4] float32."""
    return one_op("ADD", [x(np.float32([1, 2, 3, 4])), k(np.float32([0.5, -1, 2, 0.25]))], [out(np.float32, shape=(4,))],
                  {"fused_activation_function": 0})


def mlp_model(sizes: tuple[int, ...] = (64, 256, 256, 256, 10)) -> bytes:
    """FULLY_CONNECTED layers with RELU between them, then a TANH: float32, batch 1."""
    g = Graph()
    rng = np.random.default_rng(0)
    h = g.add(x(rng.standard_normal((1, sizes[0])).astype(np.float32)), "input")
    for n, (a, b) in enumerate(zip(sizes, sizes[1:])):
        w = g.add(k((rng.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32)), f"w{n}")
        bias = g.add(k(rng.standard_normal(b).astype(np.float32) * 0.1), f"b{n}")
        y = g.add(out(np.float32, shape=(1, b)), f"fc{n}")
        g.op("FULLY_CONNECTED", [h, w, bias], [y], {"fused_activation_function": 1 if n < len(sizes) - 2 else 0})
        h = y
    t = g.add(out(np.float32, shape=(1, sizes[-1])), "output")
    g.op("TANH", [h], [t])
    g.output(t)
    return model(g)[0]


def cnn_model() -> bytes:
    """Two CONV_2D (3x3, RELU), a MAX_POOL_2D, a RESHAPE and a FULLY_CONNECTED on 16x16x3."""
    g = Graph()
    rng = np.random.default_rng(1)
    h = g.add(x(rng.standard_normal((1, 16, 16, 3)).astype(np.float32)), "image")
    channels = 3
    for n, width in enumerate((8, 16)):
        w = g.add(k((rng.standard_normal((width, 3, 3, channels)) * 0.2).astype(np.float32)), f"w{n}")
        bias = g.add(k(np.zeros(width, np.float32)), f"b{n}")
        y = g.add(out(np.float32, shape=(1, 16, 16, width)), f"conv{n}")
        g.op("CONV_2D", [h, w, bias], [y], {"padding": 0, "stride_w": 1, "stride_h": 1, "fused_activation_function": 1})
        h, channels = y, width
    pooled = g.add(out(np.float32, shape=(1, 8, 8, 16)), "pool")
    g.op("MAX_POOL_2D", [h], [pooled], {"padding": 1, "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2})
    flat = g.add(out(np.float32, shape=(1, 1024)), "flat")
    g.op("RESHAPE", [pooled, g.add(k(np.int32([1, 1024])), "shape")], [flat])
    w = g.add(k((rng.standard_normal((10, 1024)) * 0.03).astype(np.float32)), "fc_w")
    logits = g.add(out(np.float32, shape=(1, 10)), "logits")
    g.op("FULLY_CONNECTED", [flat, w, -1], [logits], {"fused_activation_function": 0})
    g.output(logits)
    return model(g)[0]


def _round(interpreter: Any, inputs: list[tuple[int, np.ndarray]], output: int) -> Callable[[], Any]:
    set_tensor, invoke, get_tensor = interpreter.set_tensor, interpreter.invoke, interpreter.get_tensor

    def one() -> Any:
        for i, v in inputs:
            set_tensor(i, v)
        invoke()
        return get_tensor(output)

    return one


def _loop(fn: Callable[[], Any], loops: int) -> float:
    started = time.perf_counter()
    for _ in range(loops):
        fn()
    return (time.perf_counter() - started) / loops * 1e6


def timing(loops: int, repeats: int) -> list[dict[str, Any]]:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    data, feeds = tiny_model()
    made = {"LiteRT": LiteRT(model_content=data), "numlite": numlite.Interpreter(model_content=data, jit=False),
            "numlite-jit": numlite.Interpreter(model_content=data, jit=True)}
    for interpreter in made.values():
        interpreter.allocate_tensors()
    report = made["numlite-jit"].jit_report()["subgraphs"][0]
    assert report["compiled"], report
    rows = []
    for what in ("set_tensor + invoke + get_tensor", "invoke"):
        fns = {}
        for name, interpreter in made.items():
            inputs = [(d["index"], v) for d, v in zip(interpreter.get_input_details(), feeds)]
            output = interpreter.get_output_details()[0]["index"]
            fns[name] = _round(interpreter, inputs, output)
            fns[name]()  # the inputs are set, and warm
            if what == "invoke":
                fns[name] = interpreter.invoke
        times: dict[str, list[float]] = {name: [] for name in fns}
        names = list(fns)
        for r in range(repeats):
            for name in names[r % 3 :] + names[: r % 3]:
                times[name].append(_loop(fns[name], loops))
        litert = statistics.median(times["LiteRT"])
        for name, ts in times.items():
            rows.append({"what": what, "interpreter": name, "median_us": statistics.median(ts), "best_us": min(ts),
                         "ratio_to_litert": statistics.median(ts) / litert})
    got = made["numlite-jit"].get_tensor(made["numlite-jit"].get_output_details()[0]["index"])
    want = made["LiteRT"].get_tensor(made["LiteRT"].get_output_details()[0]["index"])
    np.testing.assert_array_equal(got, want)
    return rows


def memory() -> list[dict[str, Any]]:
    import control_flow as cf

    models = {}
    for case in ("trivial_loop", "matrix_loop", "nested", "cond"):
        models[case] = cf.model_path(f"cf_{case}", cf.DEFAULT_CACHE)
    rows = []
    for name, source in [*models.items(), ("mlp 64-256-256-256-10", mlp_model()), ("cnn 16x16x3, 2 conv", cnn_model())]:
        kwargs = {"model_path": source} if isinstance(source, str) else {"model_content": source}
        numpy_engine = numlite.Interpreter(**kwargs, jit=False)
        numpy_engine.allocate_tensors()
        compiled = numlite.Interpreter(**kwargs, jit=True)
        compiled.allocate_tensors()
        report = compiled.jit_report()["subgraphs"][0]
        if report["compiled"] and "arena_bytes" not in report:  # numlite before the arenas were planned
            report["arena_bytes"] = sum(a.nbytes for a in compiled._jit.engines[0].A)
        rows.append({"model": name, "compiled": report["compiled"], "numpy_arena_bytes": numpy_engine.arena_bytes,
                     **{key: report.get(key) for key in ("arena_bytes", "constant_bytes", "shared_constant_bytes")}})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"timing": timing(args.loops, args.repeats)}
    print("| what | interpreter | median µs | best µs | / LiteRT |\n| --- | --- | --- | --- | --- |")
    for r in result["timing"]:
        print(f"| {r['what']} | {r['interpreter']} | {r['median_us']:.2f} | {r['best_us']:.2f} | {r['ratio_to_litert']:.2f}x |")
    if args.memory:
        result["memory"] = memory()
        print("\n| model | compiled | NumPy engine's arena | jit arenas | jit's own constants | constants read in place |\n"
              "| --- | --- | --- | --- | --- | --- |")
        for r in result["memory"]:
            print(f"| {r['model']} | {r['compiled']} | {r['numpy_arena_bytes']} | {r['arena_bytes']} | {r['constant_bytes']}"
                  f" | {r['shared_constant_bytes']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
