"""What accuracy a candidate must keep against FP32: one :class:`Target` for every check.

The export's check, the planner, ``plan measure``'s engine check, ``compare`` and the App all judge
by a Target (:func:`~.verdict.evaluate`): a cosine or an SNR on the worst channel group of every
output, and a task metric with the drop it may take below FP32's own score. The default is cosine
>= 0.99 (:data:`DEFAULT_COSINE`) everywhere.

A metric is given as text (a built-in name, ``package.module:function``), as a function
``f(reference, candidate) -> float`` or as a :class:`~.builtin_metrics.TaskMetric`. It is made
against FP32's outputs on the held-back samples when a target is bound to them (:meth:`Target.bound`),
which also records FP32's own score. A ``package.module:function`` text that the caller typed is
imported there (:func:`~.task_metrics.import_metric`); text read from a file is only looked up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..common.errors import UserError
from .output_groups import BLIND_ENERGY_SHARE, group_metrics

__all__ = ["DEFAULT_COSINE", "Metric", "Target", "metric_factory", "target_notes", "with_metric"]

#: The default target everywhere: the worst channel group of every output keeps cosine >= 0.99.
DEFAULT_COSINE = 0.99
#: A metric of the user's: ``f(reference, candidate) -> float``, two mappings of output name -> array (batch first),
#: higher is better; the same signature for ``tw.export_qdq(metric=)``, ``tw.plan``, the CLI's ``--metric``.
Metric = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], float]


@dataclass(frozen=True)
class Target:
    """What accuracy a candidate must keep, against ONNX Runtime FP32 on held-back data.

    Build one with a task metric by :meth:`for_metric` (``Target.for_metric("detection")``).

    Attributes
    ----------
    cosine : float, optional
        Minimum cosine similarity of the worst channel group of any output.
    snr_db : float, optional
        Minimum SNR in dB of the worst channel group.
    metric : callable, optional
        The task metric made against FP32's outputs (:meth:`bound`): ``f(outputs) -> float``, higher
        is better. A target read back from plan.json has the name but not the function (None): its
        candidates' recorded values still judge it.
    metric_name : str
        The metric in words.
    max_metric_drop : float, optional
        How far the metric may fall below FP32's score. None: the metric's own allowance
        (``TaskMetric.default_drop``: 0.05 for the detection F1, else 0.01).
    metric_factory : callable, optional
        ``f(reference_outputs, summary, samples) -> TaskMetric`` (or ``(metric, name)``): what
        :meth:`bound` calls once FP32's outputs are known.
    metric_spec : str
        The metric as text when it was given as text: what rebuilds it where the engines are measured.
    task_metric : str, callable or TaskMetric, optional
        The metric as :meth:`for_metric` was given it.
    labels : array of int, optional
        Classes for ``task_metric="top1"``.
    metric_reference : float, optional
        The metric's value on FP32 itself (set by :meth:`bound`).
    """

    cosine: Optional[float] = DEFAULT_COSINE
    snr_db: Optional[float] = None
    metric: Optional[Callable[[Dict[str, Any]], float]] = field(default=None, compare=False, repr=False)
    metric_name: str = ""
    max_metric_drop: Optional[float] = None
    metric_factory: Optional[Callable[..., Any]] = field(default=None, compare=False, repr=False)
    metric_spec: str = ""
    task_metric: Any = field(default=None, compare=False, repr=False)
    labels: Any = field(default=None, compare=False, repr=False)
    metric_reference: Optional[float] = field(default=None, compare=False)

    def __post_init__(self):
        if self.cosine is None and self.snr_db is None and not self.has_metric:
            raise UserError("There is no accuracy target.", "Without one every candidate would pass.",
                            "Give a cosine (e.g. --target-cosine 0.99), an SNR, or a metric (--metric).")
        if self.cosine is not None and not -1.0 <= float(self.cosine) <= 1.0:
            raise UserError(f"Target cosine {self.cosine} is outside [-1, 1].",
                            "Cosine similarity lies between -1 and 1.", "Use e.g. --target-cosine 0.99.")
        if self.max_metric_drop is not None and not float(self.max_metric_drop) >= 0:
            raise UserError(f"The allowed metric drop {self.max_metric_drop} is not a number of 0 or more.",
                            "It is how far the metric may fall below FP32's own score.",
                            "Use e.g. --max-metric-drop 0.01.")
        if self.labels is not None and self.task_metric is None and self.metric_factory is None:
            raise UserError("labels were given without a metric.",
                            "Labels are read by a task metric; without one the target is the output cosine.",
                            "Use Target.for_metric('top1', labels) to judge by top-1 accuracy against these "
                            "labels, or leave labels out.")

    @classmethod
    def for_metric(cls, metric, labels=None, *, cosine: Optional[float] = None, snr_db: Optional[float] = None,
                   max_metric_drop: Optional[float] = None) -> "Target":
        """A target judged by a task metric (and by ``cosine`` / ``snr_db`` too where given).

        Parameters
        ----------
        metric : str, callable or TaskMetric
            A built-in name such as ``"detection"``, ``"top1-agreement"``, ``"mask-iou:0.3"``,
            ``"package.module:function"``, or ``f(reference, candidate) -> float`` (higher is better).
        labels : array of int, optional
            Classes for ``metric="top1"``.
        cosine, snr_db : float, optional
            Kept besides the metric (default: the metric alone).
        max_metric_drop : float, optional
            How far the metric may fall below FP32's (default: the metric's own).
        """
        if isinstance(metric, str):  # an unknown name (or snr, a target) is refused here, before any work
            from .task_metrics import check_metric_text

            check_metric_text(metric)
        return cls(cosine=cosine, snr_db=snr_db, max_metric_drop=max_metric_drop, task_metric=metric, labels=labels,
                   metric_spec=metric if isinstance(metric, str) else "")

    @property
    def has_metric(self) -> bool:
        """Whether a task metric is part of the target (built, to be built, or named in a plan.json)."""
        return (self.metric is not None or self.metric_factory is not None or self.task_metric is not None
                or bool(self.metric_name))

    @property
    def metric_drop(self) -> float:
        """The allowance in force: ``max_metric_drop``, else the default of 0.01."""
        return 0.01 if self.max_metric_drop is None else float(self.max_metric_drop)

    def describe(self) -> str:
        parts = []
        if self.cosine is not None:
            parts.append(f"cosine >= {self.cosine:g}")
        if self.snr_db is not None:
            parts.append(f"SNR >= {self.snr_db:g} dB")
        if self.has_metric:
            parts.append(f"{self.metric_name or self.metric_spec or 'metric'} within {self.metric_drop:g} of FP32")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        out = {"cosine": self.cosine, "snr_db": self.snr_db, "metric": self.metric_name or None,
               "max_metric_drop": self.metric_drop if self.has_metric else None}
        if self.metric_spec:
            out["metric_spec"] = self.metric_spec
        return out

    def bound(self, reference: Mapping[str, np.ndarray], summary=None, labels=None) -> Tuple["Target", List[str]]:
        """``(this target with its metric made on FP32's ``reference`` outputs, notes)``.

        The metric is made once (a factory, a name, the caller's function), guarded when it is not the
        toolkit's own (:mod:`.metric_guard`), and scored on FP32 itself (:attr:`metric_reference`).
        ``labels``: the held-back samples' classes (a ``top1`` metric); ``summary``: the model's.
        A target without a metric is returned as it is.

        Raises
        ------
        UserError
            The metric cannot be made on these outputs, or scores FP32 itself as not a finite number.
        """
        from .builtin_metrics import TaskMetric
        from .metric_guard import guarded

        target = self
        if target.task_metric is not None and target.metric_factory is None:
            target = with_metric(target, target.task_metric, labels if labels is not None else target.labels)
        made = None
        if target.metric_factory is not None:
            n = len(next(iter(reference.values()))) if reference else 0
            made = target.metric_factory(_copies(reference), summary, n)  # a factory keeps what it is given
            metric, name = made if isinstance(made, tuple) else (made.fn, made.name)
            drop = target.max_metric_drop
            if drop is None:  # the metric's own allowance (detection F1: 0.05), recorded in plan.json
                drop = made.default_drop if isinstance(made, TaskMetric) else None
            target = dataclasses.replace(target, metric=metric, metric_name=name, metric_factory=None,
                                         max_metric_drop=drop)
        if target.metric is None:
            return target, target_notes(reference, target)
        metric = guarded(target.metric, target.metric_name or "given")
        value = float(metric(dict(reference)))
        if not np.isfinite(value):
            raise UserError(f"The metric {target.metric_name or 'given'} scores {value} on FP32 itself.",
                            "A candidate is judged by how far its metric falls below FP32's, which needs a finite "
                            "value (an SNR of FP32 against itself is infinite).",
                            "Use --target-snr DB (Target(snr_db=...)) for an SNR, or a metric with a finite FP32 "
                            "value.")
        task = made if isinstance(made, TaskMetric) else None
        notes = target_notes(reference, target, None if task is None else task.outputs,
                             task is not None and task.pooled)
        return dataclasses.replace(target, metric=metric, metric_reference=value, task_metric=None), notes


def _copies(outputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return {k: np.array(v, copy=True) for k, v in outputs.items()}


def _make(metric, labels, reference, summary=None, samples: int = 0):
    from .task_metrics import make_task_metric

    # The caller's own metric (the API's metric=, a command line's --metric): a module:function may be imported.
    return make_task_metric(metric, reference, labels, own=True)


def metric_factory(metric, labels: Optional[np.ndarray] = None):
    """``f(reference, summary, samples) -> TaskMetric`` for :attr:`Target.metric_factory`.

    ``metric``: as :func:`~.task_metrics.make_task_metric` takes it; ``labels``: the held-back samples' classes.
    """
    import functools

    return functools.partial(_make, metric, labels)


def with_metric(target: Optional[Target], metric=None, labels: Optional[np.ndarray] = None) -> Target:
    """``target`` (default: cosine >= 0.99) with ``metric`` as its task metric, made when it is bound.

    Without a ``target``, a metric is the whole target (no cosine); a given target keeps its
    cosine/SNR and its ``max_metric_drop``. ``metric`` None leaves ``target`` as it is.
    ``labels`` are the held-back samples' own.
    """
    if metric is None:
        return target or Target()
    factory = metric_factory(metric, labels)
    spec = metric if isinstance(metric, str) else ""  # text rebuilds the metric where the engines run
    if target is None:
        return Target(cosine=None, metric_factory=factory, metric_spec=spec)
    return dataclasses.replace(target, metric=None, metric_name="", metric_factory=factory, metric_spec=spec,
                               task_metric=None, labels=None, metric_reference=None)


def _pooled_blind(reference: Mapping[str, np.ndarray], outputs: Sequence[str]) -> List[Tuple[str, List[str], float]]:
    """``(output, tiny groups, their energy share)`` for outputs with groups a pooled metric cannot see."""
    out = []
    for name in outputs:
        ref = np.asarray(reference[name])
        if not np.issubdtype(ref.dtype, np.number):
            continue
        groups = group_metrics(ref, ref, name)
        tiny = [g for g in groups if g.energy_share < BLIND_ENERGY_SHARE]
        if len(groups) > 1 and tiny and len(tiny) < len(groups):
            out.append((name, [g.group for g in tiny], sum(g.energy_share for g in tiny)))
    return out


def target_notes(reference: Mapping[str, np.ndarray], target: Target, metric_outputs: Optional[Sequence[str]] = None,
                 metric_pooled: bool = False) -> List[str]:
    """Warnings about what ``target`` cannot see, in words (empty when it sees everything).

    ``metric_outputs``: the outputs the target's task metric reads (None: unknown, e.g. the user's own
    metric); ``metric_pooled``: the task metric is a pooled cosine or SNR.
    """
    names = [n for n in reference if np.issubdtype(np.asarray(reference[n]).dtype, np.number)]
    notes: List[str] = []
    metric_only = target.cosine is None and target.snr_db is None
    if metric_only and target.has_metric and metric_outputs is not None:
        unread = [n for n in names if n not in set(metric_outputs)]
        if unread:
            notes.append(f"warning: the target's metric reads {', '.join(map(repr, metric_outputs))} only: output(s) "
                         f"{', '.join(map(repr, unread))} are not checked; add --target-cosine to check every "
                         "output's channel groups too")
    if metric_pooled:
        for name, tiny, share in _pooled_blind(reference, metric_outputs or names):
            shown = ", ".join(tiny[:6]) + (" ..." if len(tiny) > 6 else "")
            notes.append(f"warning: the target's metric is a pooled cosine/SNR: in output {name!r} it cannot see "
                         f"{shown} ({share:.2%} of the output's energy); use --target-cosine (worst channel group), "
                         "or a task metric such as --metric detection")
    elif not metric_only:
        for name, tiny, share in _pooled_blind(reference, names):
            notes.append(f"output {name!r}: a pooled cosine cannot see {', '.join(tiny[:6])} ({share:.2%} of its "
                         "energy); the target is checked on the worst channel group instead")
    return notes
