"""``numlite predict``: batch inference from the shell, with progress, resume and a comparison
of two models on the same inputs.

    numlite predict MODEL INPUTS... -o OUT.npz|OUT.parquet [--workers N] [--batch-size N]
                    [--signature KEY] [--resume] [--sequences [--no-reset]]
                    [--compare OTHER.tflite [--plot FILE.png]] [--ray [ADDRESS]]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, Iterator, TextIO

import numpy as np

from numlite.batch.api import Job, plan, predict_to_file
from numlite.batch.runner import ModelSpec, Result, load_model
from numlite.errors import InvalidInputError

# Bins of absolute error for the histogram: exactly 0, then by decade up to >= 1.
ERROR_EDGES = [0.0] + [10.0**e for e in range(-9, 1)]


def add_parser(commands: Any, positive: Any, non_negative: Any) -> None:
    """Register ``predict`` on the subcommands of numlite's argument parser."""
    p = commands.add_parser(
        "predict", help="run a model over a dataset (.npy/.npz files or folders) into .npz or .parquet")
    p.add_argument("model", help="path of a .tflite file")
    p.add_argument("inputs", nargs="+", help=".npy/.npz files or folders of them (one example per file, or "
                                              "stacked examples along a leading axis)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="where to write the outputs: a .npz file or a .parquet folder (optional with --compare)")
    p.add_argument("--workers", type=non_negative, default=None,
                   help="worker processes (Ray actors with --ray); default one per core, 0 runs in this process")
    p.add_argument("--batch-size", type=positive, default=None,
                   help="examples per invoke for a model with a dynamic batch dimension (default 32)")
    p.add_argument("--signature", metavar="KEY", help="the signature to run (needed when the model has several)")
    p.add_argument("--resume", action="store_true", help="keep the examples already in OUT and compute the rest")
    p.add_argument("--sequences", action="store_true",
                   help="each file is one sequence (leading step axis) run in order on one interpreter (stateful models)")
    p.add_argument("--no-reset", action="store_true",
                   help="with --sequences: carry the model's state from one sequence to the next")
    p.add_argument("--compare", metavar="OTHER", help="also run this model and report how its outputs differ")
    p.add_argument("--plot", metavar="PNG", help="with --compare: draw the error histograms (needs matplotlib)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on Ray: a local instance, or join ADDRESS (put --ray after the inputs, or --ray=ADDRESS)")
    p.set_defaults(handler=command)


def command(args: argparse.Namespace, stderr: TextIO | None = None, stdout: TextIO | None = None) -> int:
    stderr = stderr or sys.stderr
    stdout = stdout or sys.stdout
    if args.output is None and args.compare is None:
        raise InvalidInputError("give -o OUT.npz or OUT.parquet (or --compare OTHER to compare only)")
    if args.plot and not args.compare:
        raise InvalidInputError("--plot draws the --compare histograms: give --compare OTHER")
    if args.compare and args.resume:
        raise InvalidInputError("--compare needs both models' outputs of every example: it cannot --resume")
    if args.no_reset and not args.sequences:
        raise InvalidInputError("--no-reset applies to --sequences")
    if args.plot:
        _matplotlib()  # a missing extra is said before the run, not after it
    options = dict(
        workers=args.workers, batch_size=args.batch_size, signature=args.signature,
        backend="ray" if args.ray is not None else "local", address=args.ray or None,
        sequences=args.sequences, reset_between=not args.no_reset,
    )  # fmt: skip
    inputs = list(args.inputs)
    progress = Progress(stderr)
    comparison = None
    if args.compare:
        main_spec = ModelSpec.of(load_model(args.model), args.signature)
        comparison = Comparison(plan(args.compare, inputs, **options), main_spec)
    if args.output is not None:
        summary = predict_to_file(
            args.model, inputs, args.output, resume=args.resume, progress=progress.update,
            on_chunk=comparison.add_chunk if comparison else None, **options,
        )  # fmt: skip
        computed, failed, seconds = summary.computed, summary.failed, summary.seconds
        if summary.resumed:
            print(f"resumed: {summary.resumed} examples were already in {args.output}", file=stdout)
    else:
        job, begin, computed, failed = plan(args.model, inputs, **options), time.perf_counter(), 0, 0
        progress.update(0, job.total, 0)
        for chunk in job.results():
            assert comparison is not None
            comparison.add_chunk(chunk)
            computed += len(chunk)
            failed += sum(not r.ok for r in chunk)
            progress.update(computed, job.total, failed)
        seconds = time.perf_counter() - begin
    progress.finish()
    rate = computed / seconds if seconds > 0 else 0.0
    where = f" -> {args.output}" if args.output else ""
    print(f"{computed} examples ({failed} failed) in {seconds:.2f} s: {rate:.1f} examples/s{where}", file=stdout)
    if comparison is not None:
        comparison.finish()
        print(comparison.report(args.model, args.compare), file=stdout)
        if args.plot:
            comparison.plot(args.plot, args.model, args.compare)
            print(f"wrote {args.plot}", file=stdout)
    return 0


class Progress:
    """A bar rewritten in place when ``stream`` is a terminal; plain lines (at most one per
    ``every`` seconds) otherwise."""

    def __init__(self, stream: TextIO, every: float = 5.0, width: int = 30) -> None:
        self.stream, self.every, self.width = stream, every, width
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.begin = time.perf_counter()
        self.last = -math.inf
        self.first_done: int | None = None
        self.drawn = False

    def update(self, done: int, total: int | None, failed: int) -> None:
        now = time.perf_counter()
        if self.first_done is None:  # a resumed run's examples are not part of this run's rate
            self.first_done, self.begin = done, now
            return
        elapsed = now - self.begin
        rate = (done - self.first_done) / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if total is not None and rate > 0 else None
        counts = f"{done}/{total}" if total is not None else f"{done}"
        text = f"{counts} examples, {rate:.1f}/s" + (f", ETA {_duration(eta)}" if eta is not None else "")
        text += f", {failed} failed" if failed else ""
        if self.tty:
            share = done / total if total else 0.0
            filled = int(round(self.width * min(1.0, share)))
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r[{bar}] {text}\x1b[K")
            self.stream.flush()
            self.drawn = True
        elif now - self.last >= self.every or (total is not None and done >= total):
            self.stream.write(f"predict: {text}\n")
            self.stream.flush()
            self.last = now

    def finish(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# -- comparing two models -----------------------------------------------------------------------


class OutputStats:
    """Streaming statistics of |a - b| over one output."""

    def __init__(self, name: str, other: str) -> None:
        self.name, self.other = name, other
        self.max = 0.0
        self.sum = 0.0
        self.elements = 0
        self.examples = 0
        self.top1_examples = 0  # examples whose output looks like class scores
        self.top1_differ = 0
        self.shape_differ = 0
        self.histogram = np.zeros(len(ERROR_EDGES) + 1, np.int64)  # 0, then (edge, next edge], then > 1

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        self.examples += 1
        if a.shape != b.shape:
            self.shape_differ += 1
            return
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).reshape(-1)
        nan = np.isnan(diff)
        diff[nan] = np.inf  # a NaN on one side only counts as the largest error
        diff[nan & np.isnan(a.reshape(-1)) & np.isnan(b.reshape(-1))] = 0.0
        if diff.size:
            self.max = max(self.max, float(diff.max()))
            self.sum += float(diff[np.isfinite(diff)].sum())
            self.elements += diff.size
            self.histogram += np.bincount(np.searchsorted(ERROR_EDGES, diff, side="left"), minlength=len(self.histogram))
        if a.ndim >= 1 and a.shape[-1] >= 2:
            self.top1_examples += 1
            self.top1_differ += bool(np.any(np.argmax(a, axis=-1) != np.argmax(b, axis=-1)))

    def bin_labels(self) -> list[str]:
        labels = ["0 (exact)"]
        for lo, hi in zip(ERROR_EDGES[:-1], ERROR_EDGES[1:]):
            labels.append(f"<= {hi:.0e}" if lo == 0.0 else f"({lo:.0e}, {hi:.0e}]")
        labels.append(f"> {ERROR_EDGES[-1]:.0e}")
        return labels

    def lines(self) -> list[str]:
        mean = self.sum / self.elements if self.elements else 0.0
        label = self.name if self.name == self.other else f"{self.name} / {self.other}"
        out = [f"output {label}: {self.examples} examples, max abs diff {self.max:.3g}, mean abs diff {mean:.3g}"]
        if self.top1_examples:
            share = self.top1_differ / self.top1_examples
            out.append(f"  top-1 class differs: {self.top1_differ}/{self.top1_examples} examples ({share:.2%})")
        if self.shape_differ:
            out.append(f"  shapes differ: {self.shape_differ} examples")
        total = int(self.histogram.sum())
        if total:
            peak = int(self.histogram.max())
            for label, count in zip(self.bin_labels(), self.histogram):
                bar = "#" * int(round(40 * count / peak)) if peak else ""
                out.append(f"  {label:>18} {int(count):>10} {100 * count / total:6.2f}% {bar}")
        return out


class Comparison:
    """The reference run (``job``, the other model) consumed in step with the main run's
    chunks, one chunk in memory at a time."""

    def __init__(self, job: Job, main_spec: ModelSpec) -> None:
        self.job, self.main_spec = job, main_spec
        self.results: Iterator[Result] = (r for chunk in job.results() for r in chunk)
        self.stats: list[OutputStats] | None = None
        self.names: list[tuple[str, str]] = []
        self.failed = 0  # examples that failed in either model

    def _pairs(self, mine: list[str]) -> list[tuple[str, str]]:
        theirs = self.job.spec.outputs
        if set(mine) == set(theirs):
            return [(n, n) for n in mine]
        if len(mine) == len(theirs):
            return list(zip(mine, theirs))  # renamed outputs: paired by position
        raise InvalidInputError(f"--compare: the models' outputs differ: {mine} and {theirs}")

    def add_chunk(self, chunk: list[Result]) -> None:
        for r in chunk:
            other = next(self.results)
            if r.index != other.index:
                raise InvalidInputError(f"--compare: the models saw example {r.index} and {other.index}")
            if not r.ok or not other.ok:
                self.failed += 1
                continue
            assert r.outputs is not None and other.outputs is not None
            if self.stats is None:
                self.names = self._pairs(list(r.outputs))
                self.stats = [OutputStats(a, b) for a, b in self.names]
            for stat, (a, b) in zip(self.stats, self.names):
                stat.add(self._real(r.outputs[a], a, None), self._real(other.outputs[b], b, self.job))

    def _real(self, value: np.ndarray, name: str, job: Job | None) -> np.ndarray:
        """Quantized outputs as the real numbers they stand for."""
        quant = (job.spec if job is not None else self.main_spec).output_quantization.get(name)
        if quant is None:
            return value
        scale, zero = quant
        return (value.astype(np.float64) - zero) * scale

    def finish(self) -> None:
        for _ in self.results:  # the reference run has no more examples than the main one
            pass

    def report(self, model: str, other: str) -> str:
        lines = [f"compare {model} with {other}:"]
        if self.failed:
            lines.append(f"  {self.failed} examples failed in one model or both (not compared)")
        for stat in self.stats or []:
            lines += stat.lines()
        if not self.stats:
            lines.append("  no example succeeded in both models")
        return "\n".join(lines)

    def plot(self, path: str, model: str, other: str) -> None:
        plt = _matplotlib()
        stats = self.stats or []
        fig, axes = plt.subplots(len(stats) or 1, 1, figsize=(9, 2.8 * max(1, len(stats))), squeeze=False)
        for ax, stat in zip(axes[:, 0], stats):
            labels = stat.bin_labels()
            ax.bar(range(len(labels)), stat.histogram)
            ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel("elements")
            ax.set_title(f"{stat.name}: |{model} - {other}|, max {stat.max:.3g}", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _matplotlib() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidInputError("--plot needs matplotlib: pip install 'numlite[plot]'") from None
    return plt
