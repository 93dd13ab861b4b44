"""Single ops against LiteRT: one small model per op, converted by the official converter.

    python benchmarks/ops.py [--ops relu,gelu] [--runs N] [--threads 1] [--json PATH]

The suite in ``run.py`` covers whole models; this sweep looks for ops that a model outside it
would find slow (an op 60x slower than LiteRT hides in a suite that never runs it). Each case
is one op, or a short chain that converts to it, on a 1x56x56x64 float32 tensor unless said
otherwise; both interpreters are timed with ``numlite.benchmark.measure`` (alternating runs,
medians). The table is sorted by the ratio numlite/LiteRT, slowest first.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

S = (1, 56, 56, 64)  # an NHWC activation of a mid-size vision layer


def _cases() -> dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]]:
    """name -> (TensorFlow function, input shapes)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    filters = (rng.standard_normal((3, 3, 64, 64)) * 0.1).astype(np.float32)
    table = rng.standard_normal((1000, 64)).astype(np.float32)
    return {
        "transpose NHWC->NCHW": (lambda x: tf.transpose(x, [0, 3, 1, 2]), [S]),
        "transpose H<->W": (lambda x: tf.transpose(x, [0, 2, 1, 3]), [S]),
        "concatenation (channels)": (lambda x, y: tf.concat([x, y], 3), [S, S]),
        "pad": (lambda x: tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]]), [S]),
        "mirror pad": (lambda x: tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]], mode="REFLECT"), [S]),
        "mean over H, W": (lambda x: tf.reduce_mean(x, [1, 2]), [S]),
        "sum over channels": (lambda x: tf.reduce_sum(x, [3], keepdims=True), [S]),
        "max over channels": (lambda x: tf.reduce_max(x, [3]), [S]),
        "max over H, W": (lambda x: tf.reduce_max(x, [1, 2]), [S]),
        "softmax (3136 rows)": (lambda x: tf.nn.softmax(x), [S]),
        "log softmax": (lambda x: tf.nn.log_softmax(x), [S]),
        "arg max": (lambda x: tf.argmax(x, 3), [S]),
        "strided slice": (lambda x: x[:, 1:50:2, ::2, :32], [S]),
        "tile": (lambda x: tf.tile(x, [1, 2, 1, 1]), [S]),
        "depth to space": (lambda x: tf.nn.depth_to_space(x, 2), [S]),
        "space to depth": (lambda x: tf.nn.space_to_depth(x, 2), [S]),
        "leaky relu": (lambda x: tf.nn.leaky_relu(x, 0.1), [S]),
        "gelu (exact)": (lambda x: tf.nn.gelu(x), [S]),
        "elu": (lambda x: tf.nn.elu(x), [S]),
        "logistic": (lambda x: tf.sigmoid(x), [S]),
        "tanh": (lambda x: tf.tanh(x), [S]),
        "hard swish": (lambda x: x * tf.nn.relu6(x + 3) / 6, [S]),
        "exp": (lambda x: tf.exp(x), [S]),
        "rsqrt": (lambda x: tf.math.rsqrt(tf.abs(x) + 1), [S]),
        "select": (lambda x, y: tf.where(x > 0, x, y), [S, S]),
        "squared difference": (lambda x, y: tf.math.squared_difference(x, y), [S, S]),
        "floor mod": (lambda x, y: tf.math.floormod(x, tf.abs(y) + 1), [S, S]),
        "layer norm (channels)": (
            lambda x: (x - tf.reduce_mean(x, -1, keepdims=True))
            * tf.math.rsqrt(tf.math.reduce_variance(x, -1, keepdims=True) + 1e-5),
            [S],
        ),
        "cumsum (channels)": (lambda x: tf.cumsum(x, axis=3), [S]),
        "split (channels)": (lambda x: tf.split(x, 4, axis=3)[1] * 2, [S]),
        "batch matmul 8x128x64": (lambda x, y: tf.matmul(x, y, transpose_b=True), [(8, 128, 64), (8, 128, 64)]),
        "transposed conv 3x3/2": (lambda x: tf.nn.conv2d_transpose(x, filters, (1, 112, 112, 64), 2), [S]),
        "dilated conv 3x3": (lambda x: tf.nn.conv2d(x, filters, 1, "SAME", dilations=2), [S]),
        "average pool 3x3/1": (lambda x: tf.nn.avg_pool2d(x, 3, 1, "SAME"), [S]),
        "max pool 3x3/2": (lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), [S]),
        "resize bilinear 2x": (lambda x: tf.compat.v1.image.resize_bilinear(x, (112, 112), half_pixel_centers=True), [S]),
        "resize nearest 2x": (lambda x: tf.compat.v1.image.resize_nearest_neighbor(x, (112, 112)), [S]),
        "gather (embedding)": (lambda i: tf.gather(table, tf.cast(tf.abs(i[0]) * 100 % 1000, tf.int32)), [(1, 4096)]),
        "top k (k=5)": (lambda x: tf.math.top_k(tf.reshape(x, [-1, 64]), 5)[0], [S]),
    }


def _convert(fn: Callable[..., Any], shapes: list[tuple[int, ...]]) -> bytes:
    import tensorflow as tf

    f = tf.function(fn, input_signature=[tf.TensorSpec(s, tf.float32) for s in shapes])
    with contextlib.redirect_stdout(io.StringIO()):
        return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f).convert()


def _selected(spec: str, known: list[str]) -> tuple[list[str], list[str]]:
    """The case names in a comma-separated ``spec`` (names with commas in them, such as
    "max over H, W", are read whole), and the parts that name no case."""
    names, unknown = [], []
    rest = spec.strip(" ,")
    while rest:
        name = max((k for k in known if rest.startswith(k) and rest[len(k) :][:1] in ("", ",")), key=len, default=None)
        if name is None:
            name, _, _ = rest.partition(",")
            unknown.append(name.strip())
        else:
            names.append(name)
        rest = rest[len(name) :].strip(" ,")
    return names, unknown


def main(argv: list[str] | None = None) -> int:
    import run  # the suite's model cache and table helpers

    from numlite.benchmark import measure

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated case names (default: all)")
    parser.add_argument("--runs", type=int, default=15, help="timed invokes per interpreter (default 15)")
    parser.add_argument("--threads", type=int, default=1, help="num_threads of both interpreters (default 1)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--cache-dir", default=run.DEFAULT_CACHE, help="where converted models are kept")
    args = parser.parse_args(argv)
    cases = _cases()
    names, unknown = _selected(args.ops, list(cases)) if args.ops else (list(cases), [])
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {'; '.join(cases)}")
    rows = []
    for name in names:
        fn, shapes = cases[name]
        slug = "op-" + "".join(c if c.isalnum() else "_" for c in name.lower())
        path = run.cached_model(slug, args.cache_dir, lambda: _convert(fn, shapes))
        row = measure(path, runs=args.runs, threads=(args.threads,), overhead=False)
        row["case"] = name
        rows.append(row)
        print(f"{name}: done", file=sys.stderr)
    n = str(args.threads)
    rows.sort(key=lambda r: -r.get("ratio", {}).get(n, float("inf")))
    print(f"| op | numlite us | LiteRT us | numlite/LiteRT | max abs diff |  ({args.threads} thread(s))")
    print("|---|---|---|---|---|")
    for r in rows:
        if "numlite_error" in r or "litert_error" in r:
            print(f"| {r['case']} | - | - | - | {r.get('numlite_error') or r.get('litert_error')} |")
            continue
        mine, theirs = r["numlite_ms"][n] * 1e3, r["litert_ms"][n] * 1e3
        print(f"| {r['case']} | {mine:.1f} | {theirs:.1f} | {mine / theirs:.2f}x | {r.get('max_abs_diff', '-'):.3g} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
