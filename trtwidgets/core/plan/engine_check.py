"""The plan's accuracy check carried to the engines: held-back samples, FP32's outputs, the target.

ONNX Runtime predicts a Q/DQ engine's accuracy; the engine is the fact. When a plan is
measured on a GPU, every engine built (FP16, implicit INT8, each candidate) runs the
held-back samples and is scored against FP32 exactly as the search scored the
candidates: the worst channel group of every output (:func:`~.plan_accuracy.score_outputs`)
and the task metric, judged by the plan's target (:class:`~.judge.Judge`). That is what
lets implicit INT8 compete (TensorRT chooses its layers and their ranges' use, so ONNX
Runtime cannot predict it) and what catches a candidate that ONNX Runtime flattered.

The check travels with the plan: :data:`CHECK_FILE` beside plan.json holds the samples,
FP32's outputs and the labels as plain arrays, and the plan's key (:mod:`.check_file`: read
back checked, refused when it is another plan's or holds other than it declares; FP32's outputs
that are NaN throughout judge nothing and are refused), and
plan.json's target names the task metric as text (``metric_spec``, only looked up, never imported), so that
``trtwidgets plan measure PLAN_DIR`` on a GPU machine without ONNX Runtime judges the
engines the same way. A metric given as a Python function cannot travel: the engines are
then judged by the channel groups alone where the target has a cosine or SNR, and not
judged otherwise (implicit INT8 stays a reference).
"""

from __future__ import annotations

import dataclasses
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.errors import UserError
from ..model.batch_axis import BatchAxes
from ..accuracy.reference import Reference
from ..accuracy.verdict import evaluate
from .plan_values import EngineVerdict, PlanAccuracy, PlanTarget, finite_number

__all__ = ["CHECK_FILE", "MAX_CHECK_BYTES", "EngineCheck", "folder_check", "judging_target"]

#: The check's file in a plan folder.
CHECK_FILE = "held_back.npz"
#: The samples kept in the file stop at this size (the plan says how many were kept).
MAX_CHECK_BYTES = 256 * 2 ** 20

Feed = Dict[str, np.ndarray]


def judging_target(target: PlanTarget, metric: Optional[Callable] = None, metric_name: str = "") -> Optional[PlanTarget]:
    """A plan's target with ``metric`` (built again where the engines run), or None when nothing is left to judge.

    A target whose metric could not be rebuilt keeps its cosine and SNR; with neither, nothing
    can judge an engine (None).
    """
    if metric is None and target.cosine is None and target.snr_db is None:
        return None
    return dataclasses.replace(target, metric=metric, metric_factory=None, task_metric=None, labels=None,
                               metric_name=metric_name or target.metric_name if metric is not None else "")


def _rebuild_metric(spec: str, reference, labels, make_metric, notes: List[str]):
    """``(metric, name)`` rebuilt from its text, or ``(None, "")`` with a note when it cannot be made on this
    reference (the engines are then judged without it).

    The text is plan.json's: it is only looked up among the metrics registered here, never imported
    (:mod:`~..accuracy.task_metrics`); one that is not registered is refused, saying how to register it.
    """
    from ..accuracy.task_metrics import MetricNotRegistered, make_task_metric

    try:
        if make_metric is not None:
            return make_metric(spec, reference, labels)
        made = make_task_metric(spec, reference, labels)
        return made.fn, made.name
    except MetricNotRegistered as err:
        raise MetricNotRegistered(f"The plan's metric: {err.what}", err.why,
                                  (err.fix or "") + " Or remove held_back.npz from the plan folder: the engines are then "
                                  "timed, not judged.") from None
    except UserError as err:
        notes.append(f"the plan's metric {spec!r} cannot be made on the held-back outputs here ({err.what}); the "
                     "engines are judged without it")
        return None, ""


@dataclass(frozen=True)
class EngineCheck(Reference):
    """The one :class:`~..accuracy.reference.Reference` (held-back samples, FP32's outputs on them) with the plan's
    target, as a plan folder carries it to the engines.

    Attributes
    ----------
    feeds, outputs, axes, labels, notes, batch
        The :class:`~..accuracy.reference.Reference`'s: one feed per held-back sample, FP32's outputs on them
        (batch first), the batch axis of every input and output, the samples' labels, what the check cannot do
        (a metric that did not travel, samples left out).
    target : PlanTarget, optional
        The plan's target with its metric built; None: nothing can judge the engines.
    metric_reference : float, optional
        The metric on ``outputs`` (FP32's own value).
    key : mapping
        Whose check it is: the plan's model and held-back samples (:func:`~.check_file.check_key`).
    """

    target: Optional[PlanTarget] = field(default=None, compare=False)
    metric_reference: Optional[float] = None
    key: Mapping = field(default_factory=dict, compare=False)
    #: The file's name in a plan folder (:data:`CHECK_FILE`).
    file_name = CHECK_FILE

    @property
    def judges(self) -> bool:
        """True when an engine's outputs can be judged by the plan's target."""
        return self.target is not None

    def score(self, outputs: Mapping[str, np.ndarray]) -> PlanAccuracy:
        """An engine's outputs (batch first, as :meth:`feeds` ran) scored as the planner scores a candidate."""
        return self.verdict(outputs).scored

    def verdict(self, outputs: Mapping[str, np.ndarray]) -> EngineVerdict:
        """The engine's outputs judged by the one verdict (:func:`~..accuracy.verdict.evaluate`): ``meets``
        True/False by the target, None when nothing judges. NaN or Inf where FP32 is finite fails."""
        target = self.target
        if target is not None and target.metric is not None:
            target = dataclasses.replace(target, metric_reference=self.metric_reference)
        found = evaluate(outputs, self.outputs, target)
        return dataclasses.replace(found, samples=len(self.feeds))

    # -- the file ---------------------------------------------------------------------------------

    def save(self, path: Union[str, Path]) -> Path:
        """Write the samples, FP32's outputs, the labels and the plan's key to ``path`` (atomic; plain arrays only)."""
        from ..common.atomic import write_bytes_atomic
        from .check_file import write_check

        try:
            data = write_check(self.feeds, self.outputs, self.labels, self.axes, self.metric_reference,
                               self.notes, self.key)
        except ValueError:
            raise UserError("A held-back sample or output is not a plain array.", None,
                            "Give numeric inputs; outputs of other types are left out of the check.") from None
        return write_bytes_atomic(path, data)

    @classmethod
    def load(cls, path: Union[str, Path, bytes], target: PlanTarget,
             make_metric: Optional[Callable[[str, Mapping, Optional[np.ndarray]], Tuple[Callable, str]]] = None,
             *, plan=None) -> "EngineCheck":
        """The check of a plan folder: ``path`` (:data:`CHECK_FILE`, or its bytes) judged by the plan's ``target``.

        ``make_metric(spec, reference, labels) -> (metric, name)`` rebuilds the task metric
        from ``target.metric_spec`` (default: the registry's :func:`~..accuracy.task_metrics.make_task_metric`,
        which looks the text up and never imports it). ``plan`` (the :class:`~.plan_artifact.Plan` it sits
        beside): the file must be that plan's (:func:`~.check_file.check_fits`).

        Raises
        ------
        UserError
            The file is not a check this version writes, holds other than it declares, is another plan's,
            or FP32's outputs in it are NaN or Inf throughout; the plan's metric is not registered here.
        """
        from .check_file import check_fits, check_key, read_check
        from .plan_accuracy import reference_notes

        where = CHECK_FILE if isinstance(path, bytes) else path
        try:
            data = read_check(path if isinstance(path, bytes) else str(path))
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error,
                RuntimeError) as exc:  # zipfile: NotImplementedError (a version it lacks), encrypted members
            raise UserError(f"{where} is not a held-back check this version of trtwidgets reads ({exc}).",
                            "plan writes it beside plan.json: the held-back samples and FP32's outputs on them.",
                            "Plan again with this version (or leave the file out: the engines are then timed, "
                            "not judged).") from None
        notes = list(data.notes)
        if plan is not None:
            why = check_fits(data.key, check_key(plan.fingerprint, plan.held_back))
            if why:
                raise UserError(f"{where} is not this plan's held-back check: {why}.",
                                "It judges every engine built for the plan; another plan's samples and outputs "
                                "would pass a wrong engine and fail a right one.",
                                "Put the plan's own held_back.npz beside its plan.json (plan writes both), or remove "
                                "it: the engines are then timed, not judged.")
            if not data.key:
                notes.append(f"{CHECK_FILE} does not say which plan it belongs to (written before it was recorded): "
                             "it is used as it is")
        try:
            notes += reference_notes(data.reference, f"in {CHECK_FILE}")
        except UserError as err:
            raise UserError(f"{where}: {err.what}", err.why, "Plan again: plan writes FP32's outputs on the held-back "
                            "samples (or remove the file: the engines are then timed, not judged).") from None
        axes = BatchAxes(data.axes["inputs"], data.axes["outputs"])
        metric, name = None, ""
        if target.metric_spec:
            metric, name = _rebuild_metric(target.metric_spec, data.reference, data.labels, make_metric, notes)
        elif target.metric_name:
            notes.append(f"the plan's metric ({target.metric_name}) was a Python function, which a plan folder cannot "
                         "carry: the engines are judged " + ("by the target's cosine/SNR alone"
                                                            if target.cosine is not None
                                                            or target.snr_db is not None else "by nothing"))
        judged = judging_target(target, metric, name)
        ref_value = data.metric_reference
        if metric is not None and not finite_number(ref_value):
            ref_value = float(metric(data.reference))
        return cls(tuple(data.feeds), data.reference, axes, labels=data.labels, notes=tuple(notes), target=judged,
                   metric_reference=ref_value if metric is not None else None, key=data.key)

    @classmethod
    def of_plan(cls, feeds: Sequence[Feed], reference: Mapping[str, np.ndarray], axes: BatchAxes,
                target: PlanTarget, metric_reference: Optional[float], labels=None,
                max_bytes: int = MAX_CHECK_BYTES, key: Optional[Mapping] = None) -> "EngineCheck":
        """The planner's check: its held-back samples and reference, at most ``max_bytes`` of samples (and their
        outputs) kept. ``key``: the plan's (:func:`~.check_file.check_key`), written into the file."""
        per_sample = sum(np.asarray(v).nbytes for v in reference.values()) / max(len(feeds), 1)
        keep, size = 0, 0.0
        for f in feeds:
            size += sum(np.asarray(v).nbytes for v in f.values()) + per_sample
            if size > max_bytes and keep:
                break
            keep += 1
        notes: List[str] = []
        # Outputs that are not numbers (strings, sequences) are not scored by the check either: left out.
        ref = {k: v for k, v in reference.items()
               if np.issubdtype(np.asarray(v).dtype, np.number) or np.asarray(v).dtype == bool}
        if keep < len(feeds):
            notes.append(f"the engines are judged on the first {keep} of the {len(feeds)} held-back samples "
                         f"(the check file stops at {max_bytes // 2 ** 20} MiB)")
            ref = {k: np.asarray(v)[:keep] for k, v in ref.items()}
            labels = None if labels is None else np.asarray(labels)[:keep]
            if target is not None and target.metric is not None and target.metric_spec:
                from ..accuracy.task_metrics import make_task_metric

                made = make_task_metric(target.metric_spec, ref, labels)  # registered while planning: looked up
                import dataclasses

                target = dataclasses.replace(target, metric=made.fn)
                metric_reference = float(made.fn(ref))
        return cls(tuple(dict(f) for f in feeds[:keep]), ref, axes, labels=labels, notes=tuple(notes), target=target,
                   metric_reference=metric_reference, key=dict(key or {}))


def folder_check(folder: Union[str, Path], plan) -> Tuple[Optional[EngineCheck], Optional[bytes]]:
    """A plan folder's check and the file's bytes (read once), or ``(None, None)`` when the folder has none.

    ``plan``: the folder's :class:`~.plan_artifact.Plan` (its target judges; the file must be its check).

    Raises
    ------
    UserError
        The file is there but is not a check (corrupt, another version, another plan's, larger than a
        plan writes).
    """
    from .check_file import MAX_READ_BYTES

    path = Path(folder) / CHECK_FILE
    if not path.is_file():
        return None, None
    if path.stat().st_size > MAX_READ_BYTES:  # a 3 GB file (sparse or not) is refused before it is read
        raise UserError(f"{path} holds {path.stat().st_size / 2 ** 30:.1f} GiB, more than a plan writes "
                        f"({MAX_READ_BYTES >> 20} MiB at most).", "plan keeps its held-back check small.",
                        "Put the plan's own held_back.npz beside its plan.json, or remove it: the engines are then "
                        "timed, not judged.")
    data = path.read_bytes()
    return EngineCheck.load(data, plan.target, plan=plan), data
