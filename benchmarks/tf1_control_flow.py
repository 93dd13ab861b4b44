"""TF1 control flow graphs: which ones numlite and the official converter convert, measured.

    python benchmarks/tf1_control_flow.py [--json PATH]

Builds the frozen TF1 graphs of ``tests/tf1_graphs.py`` (control flow v2 off, in a separate
process) and converts each with ``numlite.TFLiteConverter.from_frozen_graph`` and with the
official ``tf.compat.v1.lite.TFLiteConverter.from_frozen_graph`` (builtin ops only, its
default). Every model that converts is run in LiteRT on the graph's inputs and compared with
``tf.compat.v1.Session``'s outputs (rtol = atol = 1e-5). Prints a Markdown table (converted?,
correct in LiteRT?, operators, bytes) and writes JSON if asked. Nothing here asserts anything:
tests/test_convert_tf1.py does, for numlite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from helpers import run_by_name  # noqa: E402  (tests/helpers.py: run a model by tensor names)


def run_litert(model: bytes, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    return run_by_name(Interpreter, model, inputs, outputs)


def measure(convert, directory: str, name: str, meta: dict) -> dict:
    path = os.path.join(directory, f"{name}.pb")
    try:
        model = convert(path, meta["inputs"], meta["outputs"])
    except Exception as e:  # noqa: BLE001 - the error is the measurement
        return {"converted": False, "error": " ".join(str(e).split())[:160]}
    from numlite.model import read_model

    m = read_model(model)
    row = {"converted": True, "operators": sum(1 for _ in m.iter_operators()), "bytes": len(model)}
    data = np.load(os.path.join(directory, f"{name}.npz"))
    try:
        for k in range(meta["runs"]):
            inputs = {n: data[f"run{k}/in/{n}"] for n in meta["inputs"]}
            got = run_litert(model, inputs, meta["outputs"])
            for n, g in zip(meta["outputs"], got):
                want = data[f"run{k}/out/{n}"]
                if g.shape != want.shape or not np.allclose(g, want, rtol=1e-5, atol=1e-5):
                    row["correct"] = False
                    return row
        row["correct"] = True
    except Exception as e:  # noqa: BLE001
        row["correct"] = False
        row["error"] = " ".join(str(e).split())[:160]
    return row


def numlite_convert(path: str, inputs: list[str], outputs: list[str]) -> bytes:
    import numlite

    return numlite.TFLiteConverter.from_frozen_graph(path, inputs, outputs).convert()


def official_convert(path: str, inputs: list[str], outputs: list[str]) -> bytes:
    import tensorflow as tf

    return tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(path, inputs, outputs).convert()


def cell(row: dict) -> str:
    if not row["converted"]:
        return f"fails: {row['error'][:90]}"
    verdict = "correct" if row.get("correct") else "WRONG" if "error" not in row else f"fails to run: {row['error'][:60]}"
    return f"{verdict}, {row['operators']} ops, {row['bytes']:,} B"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "tf1_graphs.py"), directory], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(directory, "cases.json")) as f:
            cases = json.load(f)
        results = {name: {"numlite": measure(numlite_convert, directory, name, meta),
                          "official": measure(official_convert, directory, name, meta)}
                   for name, meta in cases.items()}
    print("| graph | numlite | official converter |")
    print("|---|---|---|")
    for name, row in results.items():
        print(f"| {name} | {cell(row['numlite'])} | {cell(row['official'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
