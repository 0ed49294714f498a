"""Task metrics by name: what a plan's accuracy target is judged by, built-in or the user's own.

A task metric is ``metric(outputs) -> float``: ``outputs`` maps output names to arrays
over the held-back samples (samples stacked on the batch axis, as the planner collects
them); higher is better. It is made from the FP32 reference outputs, so that most
metrics measure **agreement with FP32** and score 1.0 on FP32 itself.

Built in (:data:`REGISTRY`; ``--metric`` text, then its ``:``-separated options):

=====================================  =====================================================
``detection[:SCORE[:OUTPUT[:IOU]]]``   F1 of the candidate's detections against FP32's
                                       (YOLO-style ``[N, 4+C, A]`` or ``[N, A, 4+C]``;
                                       score threshold 0.25, class-wise NMS, match IoU 0.5)
``detection-obj[...]``                 the same with an objectness channel (YOLOv5 layout)
``top1-agreement[:OUTPUT]``            fraction of samples whose arg-max class is FP32's
``topk-agreement:K[:OUTPUT]``          top-k overlap with FP32 (:func:`.metrics.topk_agreement`)
``mask-iou[:T[:OUTPUT]]``              IoU of ``output > T`` against FP32's mask
``seg-miou[:OUTPUT]``                  mean IoU over classes of the per-pixel arg-max (axis 1 of
                                       ``[N, K, H, W]`` logits) against FP32's
``cosine[:OUTPUT]``                     the pooled output cosine of :mod:`.metrics`
``worst-group``                        the worst channel group's cosine (:mod:`.output_groups`)
``top1`` (needs labels)                top-1 accuracy against the user's labels (each in ``[0, classes)``)
=====================================  =====================================================

An SNR is no task metric (FP32's SNR against itself is infinite, so "within a drop of FP32's"
means nothing): it is a target of its own (``--target-snr``, ``PlanTarget(snr_db=...)``).

**The user's own metric** is ``function(reference, candidate) -> float`` with two mappings of
output name to array (batch first), higher is better. It is called once on
``(reference, reference)`` when it is made, so a wrong signature or a non-number fails at once
with a :class:`UserError`, and that call's value is the float model's score
(``TaskMetric.reference_value``); every call gets copies of the arrays, runs within a time limit
and must answer with a number (:mod:`.metric_guard`).

**Data never names code.** A metric is looked up by name in :data:`REGISTRY`: the built-in names
above, and what the user registers in their own process: :func:`register_metric` (a name and
its factory, or ``package.module:function`` and the function), or :func:`import_metric` for the
``package.module:function`` text the user typed themselves (a command line's ``--metric``, the
API's ``metric=``), which imports that module by name (:mod:`importlib`, never evaluated). A text
read from a file (plan.json's ``metric_spec``) is only looked up, never imported: an unregistered
one is a :class:`MetricNotRegistered` error saying how to register it.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..common.errors import UserError
from . import detection as det
from .metric_guard import call_metric, guarded, trusted
from .metrics import cosine_similarity, snr_db, topk_agreement
from .output_groups import check_outputs

__all__ = ["DEFAULT_DROP", "DETECTION_DROP", "REGISTRY", "MetricNotRegistered", "TaskMetric", "check_metric_text",
           "import_metric", "is_function_text", "make_task_metric", "metric_names", "parse_task_metric",
           "register_metric"]

Outputs = Mapping[str, np.ndarray]
#: factory(reference, options, labels) -> TaskMetric
Factory = Callable[[Outputs, List[str], Optional[np.ndarray]], "TaskMetric"]

#: A task metric's default allowance below FP32's score (agreement metrics: 1% of samples, pixels or tokens).
DEFAULT_DROP = 0.01
#: The detection F1's: F1 >= 0.95 against FP32's detections, the usual bar for a quantized detector. A held-back
#: set holds few detections (a YOLOv8 on 4 document pages: 31), so one lost box moves F1 by about 0.03 and 0.01
#: would refuse every INT8 candidate over a single borderline score.
DETECTION_DROP = 0.05

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


class MetricNotRegistered(UserError):
    """A metric named by text (a plan.json's ``metric_spec``) that is neither built in nor registered here."""


@dataclass(frozen=True)
class TaskMetric:
    """A named task metric.

    Attributes
    ----------
    fn : callable
        ``fn(outputs) -> float``, higher is better.
    name : str
        What it is, in words, with its options (``"detection F1@0.25 (output0)"``).
    reference_value : float
        The float model's score (1.0 for agreement metrics; the user's metric on FP32).
    outputs : tuple of str, optional
        The outputs it reads (None: unknown, e.g. the user's own metric; all of them for ``worst-group``).
    pooled : bool
        A pooled cosine or SNR of an output: blind to channel groups with a small share of its energy.
    default_drop : float
        How far below FP32's score a candidate may fall when the user sets no ``max_metric_drop``
        (:data:`DEFAULT_DROP`; the detection F1 allows :data:`DETECTION_DROP`).
    """

    fn: Callable[[Outputs], float]
    name: str
    reference_value: float = 1.0
    outputs: Optional[Tuple[str, ...]] = None
    pooled: bool = False
    default_drop: float = 0.01

    def __call__(self, outputs: Outputs) -> float:
        return float(self.fn(outputs))

    def as_pair(self) -> Tuple[Callable[[Outputs], float], str]:
        """``(fn, name)``: the form the planner's ``metric`` argument takes."""
        return self.fn, self.name


def _output(reference: Outputs, name: Optional[str], want=None) -> str:
    if name:
        if name not in reference:
            raise UserError(f"The model has no output {name!r}.", f"Its outputs are {', '.join(reference)}.",
                            "Name one of them after the metric, e.g. --metric top1-agreement:OUTPUT.")
        return name
    if want is not None:
        for n, v in reference.items():
            if want(np.shape(v)):
                return n
    return next(iter(reference))


def _number(text: str, what: str, default: float) -> float:
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{text!r} is not a number ({what}).", f"The metric's {what} is a number.",
                        "Write e.g. --metric detection:0.25") from None
    if not math.isfinite(value):
        raise UserError(f"{text!r} is not a finite {what}.", None, "Give a finite number.")
    return value


def _opt(options: List[str], i: int) -> str:
    return options[i] if len(options) > i else ""


def _detection(objectness: bool) -> Factory:
    def factory(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
        score = _number(_opt(options, 0), "score threshold", det.SCORE_THRESHOLD)
        out = _output(reference, _opt(options, 1) or None, lambda s: len(s) == 3 and min(s[1:]) >= 5)
        iou = _number(_opt(options, 2), "match IoU", 0.5)
        axis = det.detection_axis(np.shape(reference[out]), objectness)
        ref = det.decode(reference[out], score, objectness=objectness, axis=axis)
        if not any(len(d) for d in ref):
            raise UserError(f"FP32 finds no detection with score >= {score:g} in {out!r} on the held-back data.",
                            "F1 against no detections says nothing.",
                            "Use samples with objects in them, or a lower score threshold (detection:0.1).")

        def f1(outputs: Outputs) -> float:
            return det.match_f1(ref, det.decode(outputs[out], score, objectness=objectness, axis=axis), iou)

        return TaskMetric(f1, f"detection F1@{score:g} ({out})", outputs=(out,), default_drop=DETECTION_DROP)

    return factory


def _top1_agreement(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    out = _output(reference, _opt(options, 0) or None, lambda s: len(s) >= 2 and s[-1] >= 2)
    ref = np.argmax(np.asarray(reference[out]), axis=-1)

    def agreement(outputs: Outputs) -> float:
        return float(np.mean(np.argmax(np.asarray(outputs[out]), axis=-1) == ref))

    return TaskMetric(agreement, f"top-1 agreement ({out})", outputs=(out,))


def _topk_agreement(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    k = int(_number(_opt(options, 0), "k", 5))
    out = _output(reference, _opt(options, 1) or None, lambda s: len(s) >= 2 and s[-1] >= 2)
    ref = reference[out]

    def agreement(outputs: Outputs) -> float:
        return topk_agreement(ref, outputs[out], (k,)).get(k, float("nan"))

    return TaskMetric(agreement, f"top-{k} agreement ({out})", outputs=(out,))


def _mask_iou(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    thr = _number(_opt(options, 0), "threshold", 0.3)
    out = _output(reference, _opt(options, 1) or None)
    ref_mask = np.asarray(reference[out]) > thr
    if not ref_mask.any():
        raise UserError(f"No value of {out} exceeds {thr:g} on the held-back data.",
                        "The mask IoU of an empty mask says nothing.",
                        "Pick a lower threshold, or data where the model finds something.")

    def iou(outputs: Outputs) -> float:
        mask = np.asarray(outputs[out]) > thr
        union = np.logical_or(mask, ref_mask).sum()
        return float(np.logical_and(mask, ref_mask).sum() / union) if union else 1.0

    return TaskMetric(iou, f"mask IoU@{thr:g} ({out})", outputs=(out,))


def _seg_miou(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    out = _output(reference, _opt(options, 0) or None, lambda s: len(s) == 4 and s[1] >= 2)
    if np.ndim(reference[out]) != 4 or np.shape(reference[out])[1] < 2:
        raise UserError(f"seg-miou reads [N, K, H, W] class scores; {out!r} has shape {np.shape(reference[out])}.",
                        "The class of a pixel is the arg-max over axis 1.",
                        "Name a segmentation output (seg-miou:OUTPUT), or use mask-iou for a one-channel map.")
    ref = np.argmax(np.asarray(reference[out]), axis=1)
    k = np.shape(reference[out])[1]

    def miou(outputs: Outputs) -> float:
        cand = np.argmax(np.asarray(outputs[out]), axis=1)
        ious = []
        for c in range(k):
            r, p = ref == c, cand == c
            union = np.logical_or(r, p).sum()
            if union:
                ious.append(np.logical_and(r, p).sum() / union)
        return float(np.mean(ious)) if ious else 1.0

    return TaskMetric(miou, f"segmentation mIoU ({out})", outputs=(out,))


def _pooled_cosine(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    out = _output(reference, _opt(options, 0) or None)
    ref = reference[out]
    return TaskMetric(lambda o: cosine_similarity(ref, o[out]), f"cosine ({out})", outputs=(out,), pooled=True)


def _worst_group(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    ref = dict(reference)

    def worst(outputs: Outputs) -> float:
        check = check_outputs(ref, outputs)
        return 1.0 if check.worst is None else check.worst.cosine

    return TaskMetric(worst, "worst channel group cosine", outputs=tuple(ref))


def _top1_labels(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    if labels is None:
        raise UserError("--metric top1 needs --labels.", "Top-1 accuracy compares the class with labels.",
                        "Give --labels FILE (.npy of integer classes, in data order), or use top1-agreement.")
    out = _output(reference, _opt(options, 0) or None, lambda s: len(s) == 2 and s[-1] >= 2)
    labels = np.asarray(labels).astype(np.int64).ravel()
    n = np.shape(reference[out])[0]
    if len(labels) < n:
        raise UserError(f"{len(labels)} labels for {n} held-back samples.", "Every sample needs its label.",
                        "Give one label per sample, in data order.")
    wanted = labels[:n]
    classes = int(np.asarray(reference[out]).reshape(n, -1).shape[1]) if n else 0
    outside = wanted[(wanted < 0) | (wanted >= classes)]
    if outside.size:
        raise UserError(f"{outside.size} of the {n} held-back labels are not classes of {out!r} "
                        f"(e.g. {int(outside[0])}; it scores {classes} classes, 0 to {classes - 1}).",
                        "A label no output can name scores top-1 0.0 for FP32 and every candidate alike, so every "
                        "candidate would meet the target.",
                        "Give the labels of these samples as class indices of this output, or name the class-score "
                        "output after the metric (--metric top1:OUTPUT).")

    def accuracy(outputs: Outputs) -> float:
        scores = np.asarray(outputs[out])  # [N, K], or [N, K, 1, 1] of a pooled head: one class per sample
        return float(np.mean(np.argmax(scores.reshape(len(scores), -1), axis=1) == wanted))

    return TaskMetric(accuracy, f"top-1 accuracy ({out}, {n} labels)", reference_value=accuracy(reference),
                      outputs=(out,))


#: Built-in metric name -> factory. Extend with :func:`register_metric`.
REGISTRY: Dict[str, Factory] = {
    "detection": _detection(False),
    "detection-obj": _detection(True),
    "top1-agreement": _top1_agreement,
    "topk-agreement": _topk_agreement,
    "mask-iou": _mask_iou,
    "seg-miou": _seg_miou,
    "cosine": _pooled_cosine,
    "worst-group": _worst_group,
    "top1": _top1_labels,
}


#: The toolkit's own metrics: called directly (:func:`.metric_guard.trusted`), never replaced by a registration.
_BUILTIN: Dict[str, Factory] = dict(REGISTRY)


def is_function_text(text: str) -> bool:
    """Whether ``text`` has the form ``package.module:function`` (the user's own metric, by name)."""
    module_name, sep, attr = text.partition(":")
    return bool(sep) and bool(_DOTTED.match(module_name)) and bool(_IDENT.match(attr))


def register_metric(name: str, factory: Callable) -> None:
    """Make a metric known by name in this process, so that a plan naming it can be judged by it.

    Parameters
    ----------
    name : str
        ``"my-metric"`` (lower case, digits and dashes; ``--metric my-metric:OPTION...`` passes the
        ``:``-separated options to the factory), or ``"package.module:function"``: the text a plan.json
        holds for a metric given that way, so that ``plan measure`` (or ``Plan``-loading code) finds it.
    factory : callable
        For a name: ``factory(reference, options, labels) -> TaskMetric``. For ``package.module:function``:
        the function itself, ``function(reference, candidate) -> float``.

    Raises
    ------
    UserError
        The name is neither form, names a built-in metric, or the factory is not callable.
    """
    function = is_function_text(name)
    if not function and not _NAME.match(name):
        raise UserError(f"{name!r} is not a metric name.",
                        "Names are lower case, digits and dashes, or package.module:function.",
                        "Pick a name like 'my-metric'.")
    if name in _BUILTIN:
        raise UserError(f"{name!r} is a built-in metric.", "A plan that names it must mean the same metric everywhere.",
                        "Register yours under a name of its own, e.g. 'my-" + name + "'.")
    if not callable(factory):
        raise UserError(f"The metric {name!r} was registered with {type(factory).__name__}, not a function.",
                        "A registered metric is made by calling it.",
                        "Pass factory(reference, options, labels) -> TaskMetric, or for package.module:function "
                        "the function(reference, candidate) -> float itself.")
    REGISTRY[name] = _user_factory(factory, name) if function else factory


def import_metric(text: str) -> None:
    """Import the ``package.module:function`` the user typed and register it under that text.

    Only for text the user gave in this process (a command line's ``--metric``, the API's ``metric=``):
    a file never chooses a module to import (module docstring). Nothing is imported when the text is
    registered already.

    Raises
    ------
    UserError
        The text is not ``module:function``, the module does not import, or it has no such function.
    """
    text = text.strip()
    if text in REGISTRY:
        return
    if not is_function_text(text):
        raise UserError(f"{text!r} is neither a built-in metric nor package.module:function.",
                        f"The built-in metrics are {', '.join(metric_names())}.",
                        "Name one of them, or your own metric as mypackage.metrics:my_metric.")
    module_name, _, attr = text.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or the module's own error at import
        raise UserError(f"The metric's module {module_name!r} does not import.", f"{type(exc).__name__}: {exc}",
                        "Install it, or put its folder on PYTHONPATH, and check the spelling.") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UserError(f"{module_name} has no function {attr!r}.",
                        f"Found {type(fn).__name__ if fn is not None else 'nothing'} under that name.",
                        "Name a function defined in that module: package.module:function.")
    REGISTRY[text] = _user_factory(fn, text)


def _user_factory(fn: Callable, text: str) -> Factory:
    def factory(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
        return _wrap_user(fn, text, reference)

    return factory


def metric_names() -> Tuple[str, ...]:
    """The metric names known here (built in, and registered by name), sorted."""
    return tuple(sorted(n for n in REGISTRY if not is_function_text(n)))


def _check_signature(fn: Callable, text: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: the trial call below decides
    try:
        sig.bind({}, {})
    except TypeError:
        raise UserError(f"{text} does not take (reference, candidate).",
                        f"Its signature is {text.split(':')[-1]}{sig}; a metric is called as "
                        "function(reference, candidate) with two dicts of output name -> array.",
                        "Write it as def metric(reference, candidate) -> float (higher is better).") from None


def _wrap_user(fn: Callable, text: str, reference: Outputs) -> TaskMetric:
    """The user's ``fn(reference, candidate)`` as a TaskMetric; every call on copies, bounded, its value checked."""
    ref = dict(reference)
    _check_signature(fn, text)
    value = call_metric(fn, text, ref, ref, on="the float model's own outputs")

    def metric(outputs: Outputs) -> float:
        return call_metric(fn, text, ref, outputs)

    trusted(metric)  # guarded inside: call_metric copies, bounds and checks every call
    return TaskMetric(metric, text, reference_value=value)


def _not_a_metric(text: str) -> UserError:
    kind = text.strip().partition(":")[0]
    if kind == "snr":
        return UserError("snr is not a task metric.",
                         "A task metric is judged by how far it falls below FP32's own score, and FP32's SNR against "
                         "itself is infinite; an SNR is a target of its own.",
                         "Use --target-snr DB (PlanTarget(snr_db=...)): the SNR of the worst channel group of every "
                         "output.")
    return UserError(f"Unknown metric {text!r}: neither a built-in metric nor package.module:function.",
                     f"The built-in metrics are {', '.join(sorted(_BUILTIN))}.",
                     "Name one of them (e.g. --metric detection), or your own as mypackage.metrics:my_metric.")


def check_metric_text(text: str) -> None:
    """Refuse, before any work, a ``--metric`` text that is neither a known name nor ``package.module:function``.

    Nothing is imported here (:func:`import_metric` does that, for text the user typed).

    Raises
    ------
    UserError
        An unknown name (the built-in names listed), or ``snr`` (a target, not a task metric).
    """
    text = text.strip()
    kind = text.partition(":")[0]
    if text in REGISTRY or kind in REGISTRY or (is_function_text(text) and kind != "snr"):
        return
    raise _not_a_metric(text)


def _not_registered(text: str) -> MetricNotRegistered:
    shown = repr(text) if len(text) <= 100 else repr(text[:97]) + "..."
    return MetricNotRegistered(
        f"The metric {shown} is not registered in this process.",
        "A plan names its metric as text; a plan folder never chooses code to import (a shared folder could name "
        "any module), so only the built-in metrics and those registered here are looked up.",
        f"If it is your own metric, register it yourself: pass --metric {text} on this command line (the module you "
        f"type is imported), or call tw.register_metric({shown}, function) in your code first.")


def parse_task_metric(text: str, reference: Outputs, labels: Optional[np.ndarray] = None, *,
                      own: bool = False) -> TaskMetric:
    """The task metric ``text`` names, looked up in :data:`REGISTRY` (module docstring lists the forms).

    Parameters
    ----------
    text : str
        ``name[:option...]`` of a known metric, or ``package.module:function``.
    reference : mapping
        FP32's outputs over the held-back samples.
    labels : ndarray, optional
        Integer classes in sample order (for ``top1``).
    own : bool
        ``text`` is the user's own, typed in this process (the API's ``metric=``, a command line): an
        unregistered ``package.module:function`` is imported (:func:`import_metric`). Never for text read
        from a file.

    Raises
    ------
    MetricNotRegistered
        A ``package.module:function`` that is not registered (and ``own`` is False).
    UserError
        An unknown name, or the metric cannot be made on this reference.
    """
    text = text.strip()
    kind, _, rest = text.partition(":")
    if text not in REGISTRY and kind not in REGISTRY:
        if not is_function_text(text) or kind == "snr":
            raise _not_a_metric(text)
        if not own:
            raise _not_registered(text)
        import_metric(text)
    if text in REGISTRY and is_function_text(text):
        return _made(REGISTRY[text], text, reference, [], labels)
    return _made(REGISTRY[kind], kind, reference, rest.split(":") if rest else [], labels)


def _made(factory: Factory, name: str, reference: Outputs, options: List[str], labels) -> TaskMetric:
    """``factory``'s metric: the toolkit's own as it is, anyone else's on copies, bounded, checked."""
    if _BUILTIN.get(name) is factory:
        made = factory(reference, options, labels)
        trusted(made.fn)
        return made
    # A registered factory is the user's code too: it gets copies of FP32's outputs, and its metric is guarded.
    made = factory({k: np.array(v, copy=True) for k, v in reference.items()}, options, labels)
    if not isinstance(made, TaskMetric):
        raise UserError(f"The metric {name!r} was registered with a factory that returned {type(made).__name__}.",
                        "A registered factory makes the metric: factory(reference, options, labels) -> TaskMetric.",
                        "Return TaskMetric(fn, name) from it, or register package.module:function with the "
                        "function itself.")
    return dataclasses.replace(made, fn=guarded(made.fn, made.name))


def make_task_metric(metric: Union[str, Callable, TaskMetric], reference: Outputs,
                     labels: Optional[np.ndarray] = None, *, own: bool = False) -> TaskMetric:
    """A :class:`TaskMetric` from the API's ``metric=``: a name, ``(reference, candidate) -> float``, or one made.

    ``own``: a ``package.module:function`` text is the caller's own and may be imported (:func:`parse_task_metric`).
    """
    if isinstance(metric, TaskMetric):
        fn = guarded(metric.fn, metric.name)
        return metric if fn is metric.fn else dataclasses.replace(metric, fn=fn)
    if isinstance(metric, str):
        return parse_task_metric(metric, reference, labels, own=own)
    if callable(metric):
        return _wrap_user(metric, getattr(metric, "__qualname__", repr(metric)), reference)
    raise UserError(f"metric={metric!r} is not a metric.", "A metric is a name or a function.",
                    f"Pass one of {', '.join(metric_names())}, or f(reference, candidate) -> float.")
