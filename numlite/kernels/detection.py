"""Box selection: NON_MAX_SUPPRESSION_V4 and NON_MAX_SUPPRESSION_V5 (float32).

Greedy non-max suppression over boxes ``[y1, x1, y2, x2]`` (either corner order): candidates
are the boxes scoring above ``score_threshold``, taken best first; a candidate is dropped when
its IoU with a box already selected is at least ``iou_threshold``. V5's ``soft_nms_sigma > 0``
(Soft-NMS) instead multiplies the candidate's score by ``exp(-0.5 iou^2 / sigma)`` for each
selected box it overlaps less, and puts it back among the candidates unless its score fell to
the threshold; a candidate is selected when no overlap changed its score. As LiteRT, each
candidate is compared only with the boxes selected since it was last looked at.

Outputs are padded to ``max_output_size`` with zeros: the selected indices (int32), V5's
selected scores, and the number selected (an int32 scalar). Candidates of equal score are
taken lower index first.
"""

from __future__ import annotations

import heapq

import numpy as np

from numlite.kernels.base import Kernel, Spec, TensorInfo, register

INT32 = np.dtype(np.int32)
FLOAT32 = np.dtype(np.float32)


def _iou(boxes: np.ndarray, areas: np.ndarray, i: int, others: np.ndarray) -> np.ndarray:
    """IoU of box ``i`` with each box in ``others`` (0 where either box is empty)."""
    low = np.maximum(boxes[i, :2], boxes[others, :2])
    high = np.minimum(boxes[i, 2:], boxes[others, 2:])
    intersection = np.prod(np.maximum(high - low, np.float32(0)), axis=1, dtype=np.float32)
    union = areas[i] + areas[others] - intersection
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = np.where(union > 0, intersection / union, np.float32(0)).astype(np.float32)
    return np.where((areas[i] > 0) & (areas[others] > 0), iou, np.float32(0))


def suppress(boxes: np.ndarray, scores: np.ndarray, max_output: int, iou_threshold: float,
             score_threshold: float, sigma: float) -> tuple[list[int], list[float]]:
    """The selected box indices and their (possibly decayed) scores."""
    corners = np.concatenate([np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])], 1)
    areas = np.prod(corners[:, 2:] - corners[:, :2], axis=1, dtype=np.float32)
    threshold, iou_limit = np.float32(score_threshold), np.float32(iou_threshold)
    scale = np.float32(-0.5) / np.float32(sigma) if sigma > 0 else np.float32(0)
    queue = [(-float(s), i, float(s), 0) for i, s in enumerate(scores.tolist()) if np.float32(s) > threshold]
    heapq.heapify(queue)
    count = min(len(queue), max_output)
    selected: list[int] = []
    selected_scores: list[float] = []
    while len(selected) < count and queue:
        _, index, original, begin = heapq.heappop(queue)
        score = np.float32(original)
        ious = _iou(corners, areas, index, np.array(selected[begin:][::-1], np.int64)) if len(selected) > begin else []
        hard = False
        for iou in ious:  # the newest selections first
            if iou >= iou_limit:
                hard = True
                break
            if sigma > 0:
                score = np.float32(score * np.exp(scale * iou * iou, dtype=np.float32))
            if score <= threshold:
                break
        if hard:
            continue
        compared = len(selected)
        if score == np.float32(original):
            selected.append(index)
            selected_scores.append(float(score))
        if score > threshold:  # back among the candidates (a selected box then suppresses itself)
            heapq.heappush(queue, (-float(score), index, float(score), compared))
    return selected, selected_scores


class _NonMaxSuppression(Kernel):
    """What V4 and V5 share: their first five inputs and the greedy selection."""

    def _check(self, ins: list[TensorInfo | None], count: int) -> None:
        self.expect_inputs(ins, count)
        boxes, scores, max_output = ins[0], ins[1], ins[2]
        self.expect_dtype(boxes, np.float32)
        self.expect_dtype(scores, np.float32)
        self.expect_dtype(max_output, np.int32)
        if boxes.ndim != 2 or boxes.shape[1] != 4 or scores.shape != boxes.shape[:1]:
            raise self.fail(f"boxes {boxes.shape} must be [n, 4] and scores {scores.shape} [n]")
        for t in ins[3:]:
            self.expect_dtype(t, np.float32)
            if t.size != 1:
                raise self.fail(f"{t.name!r} must be a single value")
        if max_output.size != 1:
            raise self.fail("max_output_size must be a single value")

    def _size(self, max_output: TensorInfo) -> int | None:
        return None if max_output.value is None else max(int(max_output.value.reshape(-1)[0]), 0)

    def _select(self, ins, sigma: float) -> tuple[list[int], list[float], int]:
        boxes, scores, max_output, iou, score_threshold = ins[:5]
        size = max(int(max_output.reshape(-1)[0]), 0)
        selected, selected_scores = suppress(boxes, scores, size, float(iou.reshape(-1)[0]),
                                             float(score_threshold.reshape(-1)[0]), sigma)
        return selected, selected_scores, size

    @staticmethod
    def _padded(values: list, size: int, dtype: np.dtype, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            out = np.empty(size, dtype)
        out[...] = 0
        out[: len(values)] = values
        return out


@register("NON_MAX_SUPPRESSION_V4")
class NonMaxSuppressionV4(_NonMaxSuppression):
    """Inputs: boxes, scores, max_output_size, iou_threshold, score_threshold."""

    def prepare(self, ins):
        self._check(ins, 5)
        size = self._size(ins[2])
        return [Spec(None if size is None else (size,), INT32), Spec((), INT32)]

    def eval(self, ins, outs):
        selected, _, size = self._select(ins, 0.0)
        outs[0] = self._padded(selected, size, INT32, outs[0])
        outs[1][...] = len(selected)


@register("NON_MAX_SUPPRESSION_V5")
class NonMaxSuppressionV5(_NonMaxSuppression):
    """Inputs: boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma."""

    def prepare(self, ins):
        self._check(ins, 6)
        size = self._size(ins[2])
        shape = None if size is None else (size,)
        return [Spec(shape, INT32), Spec(shape, FLOAT32), Spec((), INT32)]

    def eval(self, ins, outs):
        selected, scores, size = self._select(ins, float(ins[5].reshape(-1)[0]))
        outs[0] = self._padded(selected, size, INT32, outs[0])
        outs[1] = self._padded(scores, size, FLOAT32, outs[1])
        outs[2][...] = len(selected)
