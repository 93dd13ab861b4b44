"""Batch inference: run a ``.tflite`` model over a whole dataset, on this machine's cores or on
a Ray cluster, streaming results in input order.

>>> from numlite import batch
>>> for result in batch.predict("model.tflite", "images/"):   # .npy/.npz files
...     print(result.index, result.error or result.outputs)

``predict_to_file`` writes them to an ``.npz`` file or a ``.parquet`` folder that stays valid
after an interruption and can be resumed. Ray is optional: this package imports without it.
"""

from numlite.batch.api import Job, Summary, plan, predict, predict_to_file
from numlite.batch.runner import ModelRunner, ModelSpec, Result
from numlite.batch.store import iter_results, read_meta

__all__ = [
    "predict", "predict_to_file", "plan", "Job", "Summary", "Result", "ModelRunner", "ModelSpec",
    "iter_results", "read_meta",
]
