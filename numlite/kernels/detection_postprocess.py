"""TFLite_Detection_PostProcess: the last op of SSD detectors (TF Object Detection API, MediaPipe).

Semantics read from LiteRT's ``tflite/kernels/detection_postprocess.cc`` (LiteRT 2.3, which its
``BuiltinOpResolver`` registers as a custom op). Inputs, batch 1:

- ``box_encodings`` [1, num_boxes, >= 4] float32 or uint8: per anchor ``(y, x, h, w)`` in the
  center-size encoding (columns past the fourth, keypoints, are ignored);
- ``class_predictions`` [1, num_boxes, num_classes (+1 background)] float32 or uint8;
- ``anchors`` [>= num_boxes, 4] ``(y, x, h, w)``, float32 (uint8 when the boxes are uint8).

Boxes are decoded in double precision as LiteRT does (``ycenter = y / y_scale * anchor_h +
anchor_y``, ``half_h = 0.5 * exp(h / h_scale) * anchor_h``...) into ``[ymin, xmin, ymax, xmax]``
float32. uint8 inputs are dequantized with their tensor's scale and zero point, the scores
with the arithmetic of LiteRT's x86 wheels (see :func:`optimized_dequantize`). A background
column is the first when the scores have one more column than ``num_classes``.

Two suppressions, chosen by ``use_regular_nms``:

- fast (default): each anchor is scored by its best class, one greedy non-max suppression runs
  over those scores (``max_detections`` boxes), and each kept anchor reports its
  ``max_classes_per_detection`` best classes;
- regular: a greedy suppression per class (``min(detections_per_class, max_detections)`` boxes
  each), the union sorted by score and cut to ``max_detections``.

Both keep scores ``>= nms_score_threshold`` and drop a box whose IoU with a kept one is
``> nms_iou_threshold``. Ties are broken as LiteRT's single-threaded kernel breaks them: equal
scores in one suppression keep the lower anchor first (a stable sort); across classes in
regular NMS the lower class first (a stable merge); the order of a fast-NMS anchor's tied
classes follows GCC's ``std::partial_sort`` (emulated below), its best class with
``max_classes_per_detection == 1`` is the lowest tied index.

Outputs (all float32): boxes [1, n, 4], classes [1, n], scores [1, n], num_detections [1],
with ``n = max_detections * max_classes_per_detection``. Slots past the detections are zeros
(LiteRT's fast NMS leaves them unwritten: whatever the arena held).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, TensorInfo, has_scale, register
from numlite.kernels.flex_options import FlexOptions, expect_arity
from numlite.kernels.numeric_verify import optimized_dequantize

FLOAT32 = np.dtype(np.float32)
UINT8 = np.dtype(np.uint8)
DETECTIONS_PER_CLASS = 100  # LiteRT's kNumDetectionsPerClass, used when the option is absent


@dataclass(frozen=True)
class PostProcessOptions:
    """The op's options as LiteRT's ``Init`` reads them (absent keys: 0/false, except the two
    with defaults)."""

    max_detections: int
    max_classes_per_detection: int
    detections_per_class: int
    use_regular_nms: bool
    score_threshold: float
    iou_threshold: float
    num_classes: int
    scales: tuple[float, float, float, float]  # y, x, h, w

    @classmethod
    def read(cls, kernel: Kernel) -> "PostProcessOptions":
        m = FlexOptions(kernel)
        return cls(
            max_detections=m.as_int("max_detections"),
            max_classes_per_detection=m.as_int("max_classes_per_detection"),
            detections_per_class=m.as_int("detections_per_class", DETECTIONS_PER_CLASS),
            use_regular_nms=m.as_bool("use_regular_nms", False),
            score_threshold=m.as_float("nms_score_threshold"),
            iou_threshold=m.as_float("nms_iou_threshold"),
            num_classes=m.as_int("num_classes"),
            scales=tuple(m.as_float(k) for k in ("y_scale", "x_scale", "h_scale", "w_scale")),  # type: ignore[arg-type]
        )


def _parameters(info: TensorInfo) -> tuple[float, int]:
    """A uint8 tensor's scale and zero point, as LiteRT's tensor ``params`` hold them."""
    q = info.quantization
    return float(q.scale[0]), int(q.zero_point[0]) if q.zero_point is not None and len(q.zero_point) else 0


def _dequantized_boxes(values: np.ndarray, info: TensorInfo) -> np.ndarray:
    """uint8 box encodings or anchors as the kernel's ``Dequantizer`` computes them:
    ``(float(q) - zero_point) * scale`` in float32."""
    scale, zero_point = _parameters(info)
    return (values.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


def partial_sort_descending(values: np.ndarray, count: int) -> list[int]:
    """The first ``count`` indices of ``std::partial_sort(idx, idx + count, idx + n, values[i] >
    values[j])`` as GCC's libstdc++ computes it (heap select, then heap sort), which LiteRT's
    fast NMS uses to order an anchor's classes: equal values come out in the order its heap
    operations leave them, not by index."""
    v = values.tolist()
    a = list(range(len(v)))

    def adjust(hole: int, length: int, value: int) -> None:  # std::__adjust_heap + __push_heap
        top = child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if v[a[child]] > v[a[child - 1]]:
                child -= 1
            a[hole] = a[child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[hole] = a[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and v[a[parent]] > v[value]:
            a[hole] = a[parent]
            hole = parent
            parent = (hole - 1) // 2
        a[hole] = value

    if count >= 2:  # std::__make_heap
        for parent in range((count - 2) // 2, -1, -1):
            adjust(parent, count, a[parent])
    for i in range(count, len(a)):  # std::__heap_select
        if v[a[i]] > v[a[0]]:
            value, a[i] = a[i], a[0]
            adjust(0, count, value)
    for last in range(count - 1, 0, -1):  # std::__sort_heap
        value, a[last] = a[last], a[0]
        adjust(0, last, value)
    return a[:count]


def _argmax_first(rows: np.ndarray) -> np.ndarray:
    """LiteRT's ``ArgMaxVector`` per row (x86 build): the first index of the largest value,
    NaNs skipped (a row of NaNs gives 0)."""
    nan = np.isnan(rows)
    masked = np.where(nan, -np.inf, rows)
    index = np.argmax(masked, axis=1)
    # A row whose non-NaN values are all -inf: the first non-NaN one (argmax saw a NaN first).
    odd = nan.any(axis=1) & (masked.max(axis=1) == -np.inf)
    for r in np.flatnonzero(odd):
        finite = np.flatnonzero(~nan[r])
        index[r] = finite[0] if finite.size else 0
    return index


def _best_classes(rows: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` best classes of each row, in LiteRT's order (``DecreasingPartialArgSort``)."""
    if count == 1:
        return _argmax_first(rows)[:, None]
    order = np.argsort(-rows, axis=1, kind="stable")[:, : count + 1]
    ranked = np.take_along_axis(rows, order, axis=1)
    # Where the top count+1 values hold no tie and no NaN, any sort agrees with libstdc++'s.
    exact = ~(np.isnan(rows).any(axis=1) | (ranked[:, 1:] == ranked[:, :-1]).any(axis=1))
    out = order[:, :count].copy()
    for r in np.flatnonzero(~exact):
        out[r] = partial_sort_descending(rows[r], count)
    return out


@register("TFLite_Detection_PostProcess")
class DetectionPostProcess(Kernel):
    """SSD box decoding and multi-class non-max suppression, as LiteRT's
    ``tflite/kernels/detection_postprocess.cc`` computes them (see the module docstring)."""

    foldable = False  # its inputs are a model's activations; folding it would buy nothing

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if not hasattr(self, "opts"):
            self.opts = PostProcessOptions.read(self)
        o = self.opts
        expect_arity(self, ins, 3, 4)  # box_encodings, class_predictions, anchors -> boxes, classes, scores, count
        boxes, scores, anchors = ins
        for t, rank in ((boxes, 3), (scores, 3), (anchors, 2)):
            if t.ndim != rank:
                raise self.fail(f"input {t.name!r} has shape {t.shape}; it must have rank {rank}")
        if boxes.shape[0] != 1 or scores.shape[0] != 1:
            raise self.fail(f"batch must be 1 (LiteRT's kernel supports no other): box_encodings {boxes.shape},"
                            f" class_predictions {scores.shape}")
        num_boxes = boxes.shape[1]
        if boxes.shape[2] < 4:
            raise self.fail(f"box_encodings {boxes.shape} need at least 4 values per box")
        if scores.shape[1] != num_boxes:
            raise self.fail(f"class_predictions {scores.shape} must score the {num_boxes} boxes of box_encodings")
        if anchors.shape[1] != 4 or anchors.shape[0] < num_boxes:
            raise self.fail(f"anchors {anchors.shape} must be [>= {num_boxes}, 4] (y, x, h, w per box)")
        self._check_dtypes(boxes, scores, anchors)
        if o.num_classes < 1:
            raise self.fail(f"num_classes is {o.num_classes}; it must be at least 1")
        self.label_offset = scores.shape[2] - o.num_classes
        if self.label_offset not in (0, 1):
            raise self.fail(f"class_predictions have {scores.shape[2]} columns for num_classes={o.num_classes};"
                            " they must have num_classes or num_classes + 1 (background first)")
        if o.max_detections < 0:
            raise self.fail(f"max_detections is {o.max_detections}; it must not be negative")
        if not 0.0 < o.iou_threshold <= 1.0:
            raise self.fail(f"nms_iou_threshold is {o.iou_threshold}; it must be in (0, 1]")
        if 0.0 in o.scales:
            names = [k for k, s in zip(("y_scale", "x_scale", "h_scale", "w_scale"), o.scales) if s == 0.0]
            raise self.fail(f"{', '.join(names)} is 0 (absent?): box decoding divides by it")
        if o.use_regular_nms:
            self.per_class = min(o.detections_per_class, o.max_detections)
            if self.per_class <= 0:
                raise self.fail(f"regular NMS keeps min(detections_per_class={o.detections_per_class},"
                                f" max_detections={o.max_detections}) boxes per class; it must be positive")
        elif o.max_classes_per_detection <= 0:
            raise self.fail(f"max_classes_per_detection is {o.max_classes_per_detection}; it must be positive")
        self.num_boxes = num_boxes
        self.infos = (boxes, scores, anchors)
        n = o.max_detections * max(o.max_classes_per_detection, 0)
        return [Spec((1, n, 4), FLOAT32), Spec((1, n), FLOAT32), Spec((1, n), FLOAT32), Spec((1,), FLOAT32)]

    def _check_dtypes(self, boxes: TensorInfo, scores: TensorInfo, anchors: TensorInfo) -> None:
        for t in (boxes, scores):
            if t.dtype not in (FLOAT32, UINT8):
                raise self.fail(f"input {t.name!r} has dtype {t.dtype.name}; LiteRT's kernel takes float32 or uint8")
        if anchors.dtype != boxes.dtype:
            raise self.fail(f"anchors {anchors.name!r} are {anchors.dtype.name} but box_encodings are"
                            f" {boxes.dtype.name}; LiteRT reads the anchors as the boxes' type")
        for t in (boxes, scores, anchors):
            if t.dtype == UINT8 and not has_scale(t):
                raise self.fail(f"uint8 input {t.name!r} has no quantization scale")

    # -- eval -------------------------------------------------------------------------------------

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        boxes_in, scores_in, anchors_in = ins
        o = self.opts
        decoded = self._decode(boxes_in, anchors_in)
        bad = np.flatnonzero((decoded[:, 0] > decoded[:, 2]) | (decoded[:, 1] > decoded[:, 3]))
        if bad.size:  # LiteRT's ValidateBoxes fails the invoke too
            raise InvokeError(f"decoded box {int(bad[0])} {decoded[bad[0]].tolist()} has ymin > ymax or xmin > xmax"
                              " (a negative anchor height or width)")
        if scores_in.dtype == FLOAT32:
            scores = scores_in[0]
        else:  # DequantizeClassPredictions: optimized_ops::Dequantize over the whole tensor
            scores = optimized_dequantize(scores_in[0], *_parameters(self.infos[1]))
        scores = scores[:, self.label_offset : self.label_offset + o.num_classes]
        areas = (decoded[:, 2] - decoded[:, 0]) * (decoded[:, 3] - decoded[:, 1])
        if o.use_regular_nms:
            anchors, classes, picked, per_detection = self._regular(decoded, areas, scores)
        else:
            anchors, classes, picked, per_detection = self._fast(decoded, areas, scores)
        out_boxes, out_classes, out_scores, count = outs
        for out in (out_boxes, out_classes, out_scores):
            out[...] = 0
        slots = (np.arange(len(anchors))[:, None] * per_detection + np.arange(classes.shape[1])).reshape(-1)
        out_boxes[0, slots] = np.repeat(decoded[anchors], classes.shape[1], axis=0)
        out_classes[0, slots] = classes.reshape(-1)
        out_scores[0, slots] = picked.reshape(-1)
        count[0] = len(anchors)

    def _decode(self, boxes_in: np.ndarray, anchors_in: np.ndarray) -> np.ndarray:
        """[num_boxes, 4] ``ymin, xmin, ymax, xmax`` float32, computed in double as LiteRT does."""
        encodings = boxes_in[0, :, :4]
        anchors = anchors_in[: self.num_boxes]
        if encodings.dtype == UINT8:
            encodings = _dequantized_boxes(encodings, self.infos[0])
            anchors = _dequantized_boxes(anchors, self.infos[2])
        y, x, h, w = encodings.astype(np.float64).T
        ay, ax, ah, aw = anchors.astype(np.float64).T
        sy, sx, sh, sw = (np.float64(s) for s in self.opts.scales)
        ycenter = (y / sy * ah + ay).astype(np.float32)
        xcenter = (x / sx * aw + ax).astype(np.float32)
        half_h = (0.5 * np.exp(h / sh) * ah).astype(np.float32)
        half_w = (0.5 * np.exp(w / sw) * aw).astype(np.float32)
        return np.stack([ycenter - half_h, xcenter - half_w, ycenter + half_h, xcenter + half_w], axis=1)

    def _suppress(self, boxes: np.ndarray, areas: np.ndarray, scores: np.ndarray, limit: int) -> np.ndarray:
        """LiteRT's ``NonMaxSuppressionSingleClassHelper``: indices of the kept boxes, best first."""
        keep = np.flatnonzero(scores >= np.float32(self.opts.score_threshold))
        order = keep[np.argsort(-scores[keep], kind="stable")]
        limit = min(limit, order.size)
        threshold = np.float32(self.opts.iou_threshold)
        # The candidates in score order, contiguous, so that each step compares the box it
        # keeps with every later candidate by slicing (dead ones too: their result is unused).
        low, high, area = boxes[order, :2], boxes[order, 2:], areas[order]
        alive = np.ones(order.size, bool)
        selected: list[int] = []
        i = 0
        while len(selected) < limit:
            selected.append(int(order[i]))
            extent = np.maximum(np.minimum(high[i], high[i + 1 :]) - np.maximum(low[i], low[i + 1 :]), np.float32(0))
            intersection = extent[:, 0] * extent[:, 1]
            with np.errstate(invalid="ignore", divide="ignore"):
                iou = intersection / (area[i] + area[i + 1 :] - intersection)
            suppressed = iou > threshold
            suppressed[(area[i] <= 0) | (area[i + 1 :] <= 0)] = False  # LiteRT's IoU is 0 for an empty box
            alive[i + 1 :] &= ~suppressed
            later = np.flatnonzero(alive[i + 1 :])
            if later.size == 0:
                break
            i += 1 + int(later[0])
        return np.array(selected, np.int64)

    def _fast(self, boxes: np.ndarray, areas: np.ndarray, scores: np.ndarray):
        """One suppression over each anchor's best score; the kept anchors' best classes."""
        o = self.opts
        per_anchor = min(o.max_classes_per_detection, o.num_classes)
        nan_rows = np.isnan(scores).any(axis=1)
        best = np.max(scores, axis=1)
        if nan_rows.any():  # the score of the class LiteRT's sort puts first
            first = _best_classes(scores[nan_rows], per_anchor)[:, 0]
            best[nan_rows] = scores[nan_rows, first]
        anchors = self._suppress(boxes, areas, best, o.max_detections)
        classes = _best_classes(scores[anchors], per_anchor) if anchors.size else np.zeros((0, per_anchor), np.int64)
        picked = np.take_along_axis(scores[anchors], classes, axis=1)
        return anchors, classes, picked, o.max_classes_per_detection

    def _regular(self, boxes: np.ndarray, areas: np.ndarray, scores: np.ndarray):
        """A suppression per class; the union by score (stable: lower class first on ties)."""
        found_anchors, found_classes = [], []
        threshold = np.float32(self.opts.score_threshold)
        for c in np.flatnonzero((scores >= threshold).any(axis=0)):
            kept = self._suppress(boxes, areas, scores[:, c], self.per_class)
            found_anchors.append(kept)
            found_classes.append(np.full(kept.size, c, np.int64))
        anchors = np.concatenate(found_anchors) if found_anchors else np.zeros(0, np.int64)
        classes = np.concatenate(found_classes) if found_classes else np.zeros(0, np.int64)
        picked = scores[anchors, classes]
        order = np.argsort(-picked, kind="stable")[: self.opts.max_detections]
        return anchors[order], classes[order, None], picked[order, None], 1
