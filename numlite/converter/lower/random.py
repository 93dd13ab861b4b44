"""Random numbers: RandomUniform, RandomStandardNormal and Multinomial become TFLite's
RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL with the op's seeds, which generate
TensorFlow's own numbers for them (see ``numlite.kernels.random``)."""

from __future__ import annotations

from numlite.converter.graph import Node
from numlite.converter.lower import lowers
from numlite.converter.lower.array import int32_input
from numlite.converter.lowering import SubgraphLowering

_OPS = {"RandomUniform": "RANDOM_UNIFORM", "RandomStandardNormal": "RANDOM_STANDARD_NORMAL"}


def _seeds(cx: SubgraphLowering, node: Node) -> dict[str, int]:
    """The op's seeds: LiteRT reads them as 32-bit ints, so larger ones would give other numbers."""
    seeds = {"seed": int(node.attrs.get("seed", 0)), "seed2": int(node.attrs.get("seed2", 0))}
    if any(not -(2**31) <= v < 2**31 for v in seeds.values()):
        raise cx.fail(node, f"seeds {seeds} do not fit 32 bits (LiteRT reads them as 32-bit ints)")
    return seeds


@lowers(*_OPS)
def random_floats(cx: SubgraphLowering, node: Node):
    out = cx.out(node)
    if out.type != "FLOAT32":
        raise cx.fail(node, f"{out.type} is not supported (TFLite's random ops make float32)")
    return [cx.emit1(_OPS[node.op], [int32_input(cx, node, 0)], out, fold=False, **_seeds(cx, node))]


@lowers("Multinomial")
def multinomial(cx: SubgraphLowering, node: Node):
    logits, out = cx.input(node, 0), cx.out(node)
    if logits.type != "FLOAT32" or out.type not in ("INT64", "INT32"):
        raise cx.fail(node, "MULTINOMIAL takes float32 logits and gives int64 or int32 samples")
    return [cx.emit1("MULTINOMIAL", [logits, int32_input(cx, node, 1)], out, fold=False, **_seeds(cx, node))]
