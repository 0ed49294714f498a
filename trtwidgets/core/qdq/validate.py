"""Check an exported Q/DQ model before spending GPU time on it.

Three questions, answered on the CPU with ONNX Runtime:

1. Does it run? (ORT executes Q/DQ models with int8 kernels where it can, a
   reasonable stand-in for TensorRT's INT8 arithmetic.)
2. Does it keep the accuracy target on held-back data (data *not* used for calibration)? The
   one verdict of the toolkit (:func:`~trtwidgets.core.accuracy.verdict.evaluate`): the worst
   channel group of every output against a :class:`~trtwidgets.core.accuracy.target.Target`
   (cosine >= 0.99 by default, as the planner's), NaN/Inf where FP32 is finite, and a task metric
   when one is given (``"top1-agreement"``, ``"mask-iou:0.5"``, ``"package.module:function"`` or
   ``f(reference, candidate) -> float``, judged by its drop below FP32's). Per output, the plain
   cosine, max / mean abs error, SNR and top-1 agreement (for class scores ``[N, classes]``) are
   reported beside it.
3. What will TensorRT say? :func:`~trtwidgets.core.model.lint.lint` must find no
   unsupported (dynamic / QOperator) quantization op, and, for TensorRT <= 10,
   must report ``QDQ_REQUIRES_INT8`` when the INT8 flag is missing.

Models run through :mod:`trtwidgets.core.common.ort`, which imports onnxruntime
only when a session is opened (core stays numpy + onnx at import time).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..accuracy.builtin_metrics import TaskMetric
from ..accuracy.metric_guard import trusted
from ..accuracy.metrics import OutputMetrics, compare_tensor
from ..accuracy.reference import Reference, run_samples
from ..accuracy.target import DEFAULT_COSINE, Target
from ..accuracy.verdict import Verdict, evaluate
from ..common.errors import UserError
from ..common.npz_files import open_npz, read_npy
from ..common.ort import open_session
from ..model.load import as_model_proto

__all__ = ["QdqValidation", "QdqLint", "check_target", "run_model", "lint_qdq", "validate_qdq", "load_labels",
           "label_accuracy", "is_class_scores"]

@dataclass(frozen=True)
class QdqLint:
    """Lint of a Q/DQ model with and without the INT8 flag.

    Attributes
    ----------
    trt_version : str or None
    codes : tuple of str
        Finding codes with the intended flags (``fp16,int8`` for INT8 Q/DQ).
    codes_without_int8 : tuple of str
        Finding codes with ``fp16`` only.
    errors : tuple of str
        Messages of error findings with the intended flags.
    error_codes : tuple of str
        The codes of those error findings (same order as ``errors``).
    """

    trt_version: Optional[str]
    flags: Tuple[str, ...]
    codes: Tuple[str, ...]
    codes_without_int8: Tuple[str, ...]
    errors: Tuple[str, ...] = ()
    error_codes: Tuple[str, ...] = ()

    @property
    def unsupported_ops(self) -> bool:
        return any(c in ("UNSUPPORTED_DYNAMIC_QUANTIZE", "UNSUPPORTED_OP") for c in self.codes)

    @property
    def requires_int8_reported(self) -> bool:
        return "QDQ_REQUIRES_INT8" in self.codes_without_int8

    def to_dict(self) -> dict:
        return {"trt_version": self.trt_version, "flags": list(self.flags), "codes": list(self.codes),
                "codes_without_int8": list(self.codes_without_int8), "errors": list(self.errors),
                "error_codes": list(self.error_codes)}


@dataclass(frozen=True)
class QdqValidation:
    """A Q/DQ model judged against its float model on held-back samples, and its lint.

    Attributes
    ----------
    samples : int
        Held-back samples compared.
    outputs : dict
        Output name -> :class:`~trtwidgets.core.accuracy.metrics.OutputMetrics` (reported, not gated).
    cosine : float
        Lowest plain cosine over the outputs (reported; the target judges the worst channel group).
    max_abs : float
        Largest absolute error over the outputs.
    top1_agreement : float or None
        Fraction of rows whose arg-max agrees (classifier outputs only).
    task_metric_name : str
    task_metric_reference, task_metric_qdq : float or None
        The task metric on the float and on the Q/DQ model (the target's, or one shown beside it).
    lint : QdqLint or None
    target : Target, optional
        What the check judged by.
    verdict : Verdict, optional
        The one verdict (:func:`~trtwidgets.core.accuracy.verdict.evaluate`).
    min_top1 : float, optional
        A lowest top-1 agreement asked for besides the target.
    """

    samples: int
    outputs: Dict[str, OutputMetrics]
    cosine: float
    max_abs: float
    top1_agreement: Optional[float]
    task_metric_name: str = ""
    task_metric_reference: Optional[float] = None
    task_metric_qdq: Optional[float] = None
    lint: Optional[QdqLint] = None
    target: Optional[Target] = None
    verdict: Optional[Verdict] = None
    min_top1: Optional[float] = None

    @property
    def failures(self) -> Tuple[str, ...]:
        """Every check that failed, one line each, naming the check and the measured value (empty: passed).

        The target's parts read like ``"cosine 0.9812 < 0.99 (worst channel group y[ch 3])"``; a lint error
        like ``"lint error QDQ_TYPE_NEEDS_NEWER_TRT: <message>"``.
        """
        out: List[str] = list(self.verdict.why) if self.verdict is not None else []
        if self.min_top1 is not None and self.top1_agreement is not None and not self.top1_agreement >= self.min_top1:
            out.append(f"top-1 agreement {self.top1_agreement:.4f} < min_top1 {self.min_top1:g}")
        if self.lint is not None:
            codes = self.lint.error_codes or ("",) * len(self.lint.errors)
            for code, message in zip(codes, self.lint.errors):
                out.append(f"lint error {code or '(error)'}: {message}")
            if self.lint.unsupported_ops and not self.lint.errors:
                bad = sorted({c for c in self.lint.codes if c in ("UNSUPPORTED_DYNAMIC_QUANTIZE", "UNSUPPORTED_OP")})
                out.append(f"lint: {', '.join(bad)} (an op TensorRT cannot build)")
        return tuple(out)

    @property
    def passed(self) -> bool:
        """True when the target holds and lint found no error or unsupported op (:attr:`failures` says what failed)."""
        return not self.failures

    @property
    def accuracy_failed(self) -> bool:
        """True when the target failed (not only lint): changing ranges or the float part can help only there."""
        return self.verdict is not None and self.verdict.meets is False

    def margin(self) -> float:
        """The smallest distance of a judged measure above its part of the target (negative: it fails it)."""
        acc = self.verdict.accuracy if self.verdict is not None else None
        t = self.target
        if acc is None or t is None:
            return 0.0 if not self.failures else -1.0
        if acc.non_finite:
            return -math.inf
        gaps = []
        if t.cosine is not None:
            gaps.append(acc.cosine - t.cosine)
        if t.snr_db is not None:
            gaps.append((acc.snr_db - t.snr_db) / 100.0)
        if acc.metric is not None and acc.metric_reference is not None:
            gaps.append(acc.metric - (acc.metric_reference - t.metric_drop))
        gaps = [g for g in gaps if g == g]  # NaN (non-finite outputs) is the worst
        return min(gaps) if gaps else (0.0 if not self.failures else -1.0)

    def summary(self) -> str:
        lines = [f"Validation on {self.samples} held-back samples (ONNX Runtime, Q/DQ vs FP32):"]
        for name, m in self.outputs.items():
            top = f"  top-1 agreement {m.topk_agreement[1]:.4f}" if 1 in m.topk_agreement else ""
            lines.append(f"  {name}: cosine {m.cosine:.6f}  max abs {m.max_abs:.4g}  mean abs {m.mean_abs:.4g}  "
                         f"SNR {m.snr_db:.1f} dB{top}")
        if self.task_metric_name:
            lines.append(f"  {self.task_metric_name}: FP32 {self.task_metric_reference:.4f}  "
                         f"Q/DQ {self.task_metric_qdq:.4f}")
        acc = self.verdict.accuracy if self.verdict is not None else None
        if acc is not None and acc.worst_group:
            lines.append(f"  worst channel group: {acc.worst_group} at cosine {acc.cosine:.6f}, "
                         f"SNR {acc.snr_db:.1f} dB")
        if self.lint is not None:
            lines.append(f"  lint ({','.join(self.lint.flags)}, TensorRT {self.lint.trt_version or 'any'}): "
                         + (", ".join(self.lint.codes) or "no findings"))
            if self.lint.requires_int8_reported:
                lines.append("  lint without the INT8 flag: QDQ_REQUIRES_INT8 (TensorRT <= 10 needs --int8)")
        checks = f"target: {self.target.describe()}" if self.target is not None else ""
        if self.min_top1 is not None:
            checks += f", min_top1 {self.min_top1:g}"
        failures = self.failures
        if failures:
            lines.append(f"  FAILED: {'; '.join(failures)}" + (f" ({checks})" if checks else ""))
        elif checks:
            lines.append(f"  PASSED {checks}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"samples": self.samples, "outputs": {k: v.to_dict() for k, v in self.outputs.items()},
                "cosine": self.cosine, "max_abs": self.max_abs, "top1_agreement": self.top1_agreement,
                "task_metric_name": self.task_metric_name, "task_metric_reference": self.task_metric_reference,
                "task_metric_qdq": self.task_metric_qdq, "lint": self.lint.to_dict() if self.lint else None,
                "target": self.target.to_dict() if self.target is not None else None,
                "verdict": self.verdict.to_dict() if self.verdict is not None else None,
                "passed": self.passed, "failures": list(self.failures)}


def run_model(model, feeds: Iterable[Mapping[str, np.ndarray]], providers: Optional[Sequence] = None
              ) -> Tuple[Dict[str, np.ndarray], int]:
    """Run a model on every feed with ONNX Runtime; outputs concatenated on axis 0.

    Returns
    -------
    (dict, int)
        Output name -> array, and the number of batch items.
    """
    # The session rules (providers, threads, FP8 models unfused, refusals explained) are core.common.ort's.
    sess = open_session(as_model_proto(model), providers=providers, purpose="validate it")
    names = sess.output_names
    parts: Dict[str, List[np.ndarray]] = {n: [] for n in names}
    samples = 0
    for feed in feeds:
        outs = sess.run(names, dict(feed))
        for n, v in zip(names, outs):
            parts[n].append(np.asarray(v))
        first = next(iter(feed.values()))
        samples += int(np.shape(first)[0]) if np.ndim(first) else 1
    if samples == 0:
        raise UserError("No data to validate on.", "The data source yielded no feed.",
                        "Give held-back samples (not the calibration samples), e.g. the demo's "
                        "trtwidgets.demo.labelled_set.labelled_set('held_back').feeds(64).")
    return {n: np.concatenate(v, axis=0) if v[0].ndim else np.stack(v) for n, v in parts.items()}, samples


def lint_qdq(model, trt_version: Optional[str] = "8.6", precision: str = "int8") -> QdqLint:
    """Lint a Q/DQ model with the flags it needs, and once without INT8.

    ``trt_version`` None lints without a version (version checks skipped).
    """
    from ..model.lint import lint

    proto = as_model_proto(model)
    flags = ("fp16", "int8") if precision == "int8" else ("fp16", "fp8")
    found = lint(proto, flags=flags, trt_version=trt_version)
    without = lint(proto, flags=("fp16",), trt_version=trt_version)
    return QdqLint(trt_version=trt_version, flags=flags, codes=tuple(f.code for f in found),
                   codes_without_int8=tuple(f.code for f in without),
                   errors=tuple(f.message for f in found if f.is_error),
                   error_codes=tuple(f.code for f in found if f.is_error))


def is_class_scores(shape: Sequence[int]) -> bool:
    """True for an output shaped like class scores, one row per sample: ``[N, C]`` (or ``[N, C, 1, 1]``), C >= 2.

    Top-1 agreement means something only there: the last axis of a saliency map, a segmentation or a
    sequence is no class.
    """
    dims = [int(d) for d in shape]
    while len(dims) > 2 and dims[-1] == 1:
        dims.pop()
    return len(dims) == 2 and dims[1] >= 2


def check_target(target: Optional[Target] = None, task_metric=None, min_cosine: Optional[float] = None,
                 max_metric_drop: Optional[float] = None, labels=None) -> Target:
    """The :class:`~trtwidgets.core.accuracy.target.Target` a check judges by: ``target`` as given, else the one
    its parts ask for (default: cosine >= 0.99 on the worst channel group, as everywhere; with a task metric,
    the metric with its own drop, and a cosine only where ``min_cosine`` is given)."""
    if target is not None:
        return target
    if task_metric is not None:
        return Target.for_metric(task_metric, labels, cosine=min_cosine, max_metric_drop=max_metric_drop)
    return Target(cosine=DEFAULT_COSINE if min_cosine is None else float(min_cosine), max_metric_drop=max_metric_drop)


def validate_qdq(reference, qdq, data: Iterable[Mapping[str, np.ndarray]] = (), *, target: Optional[Target] = None,
                 task_metric=None, task_metric_name: str = "", providers: Optional[Sequence] = None,
                 trt_version: Optional[str] = "8.6", precision: str = "int8", min_cosine: Optional[float] = None,
                 min_top1: Optional[float] = None, run_lint: bool = True, labels: Optional[np.ndarray] = None,
                 max_metric_drop: Optional[float] = None, held_back: Optional[Reference] = None,
                 shown_metric=None) -> QdqValidation:
    """Judge a Q/DQ model against its float model on held-back data, and lint it.

    Parameters
    ----------
    reference, qdq : onnx.ModelProto, LoadedModel or path
        The float model and the exported Q/DQ model.
    data : iterable of dict
        Held-back feeds ``{input_name: array}`` (not the calibration samples), one sample or a batch
        each. Read once, so a generator works.
    target : Target, optional
        What to judge by (default: :func:`check_target` of the parts below).
    task_metric : str, callable or TaskMetric, optional
        A metric as ``plan --metric`` names it (``"top1-agreement"``, ``"mask-iou:0.5"``,
        ``"package.module:function"``), or your own ``f(reference, candidate) -> float`` (higher is
        better): judged by its drop below FP32's (``max_metric_drop``, default the metric's own).
    task_metric_name : str
        How the report names your metric.
    providers : sequence, optional
        ONNX Runtime providers (default CPU).
    trt_version : str or None
        The TensorRT version to lint for (None: no version checks; False-y ``run_lint`` skips lint).
    min_cosine : float, optional
        The lowest worst-group cosine (default 0.99 without a task metric).
    min_top1 : float, optional
        A lowest top-1 agreement (outputs that are class scores, :func:`is_class_scores`), besides the target.
    labels : ndarray, optional
        The held-back samples' classes, for a ``"top1"`` metric.
    held_back : Reference, optional
        FP32's outputs on the held-back samples, computed once (:class:`~.held_back_check.HeldBackCheck` checks several
        exports against one); ``reference`` and ``data`` are not run then.
    shown_metric : TaskMetric, optional
        A metric shown for both models beside the target, not judged (``export-qdq --labels`` alone).

    Returns
    -------
    QdqValidation
    """
    ref = held_back if held_back is not None else Reference.compute(reference, list(data), labels=labels)
    bound, _ = check_target(target, task_metric, min_cosine, max_metric_drop, labels).bound(ref.outputs,
                                                                                            labels=ref.labels)
    if task_metric_name and bound.metric is not None:
        bound = dataclasses.replace(bound, metric_name=task_metric_name)
    qdq_out = run_samples(qdq, ref.feeds, ref.axes, ref.batch, providers=providers, purpose="validate it")
    verdict = evaluate(qdq_out, ref, bound)
    metrics = {n: compare_tensor(r, qdq_out[n], topk=(1,) if is_class_scores(np.shape(r)) else (), name=n)
               for n, r in ref.outputs.items()}
    tops = [m.topk_agreement[1] for m in metrics.values() if 1 in m.topk_agreement]
    name, task_ref, task_q = "", None, None
    if bound.metric is not None:
        scores = verdict.accuracy
        name = bound.metric_name
        task_ref, task_q = (scores.metric_reference, scores.metric) if scores is not None else (None, None)
    elif shown_metric is not None:
        name, task_ref, task_q = shown_metric.name, float(shown_metric(ref.outputs)), float(shown_metric(qdq_out))
    return QdqValidation(
        samples=ref.samples, outputs=metrics,
        cosine=min((m.cosine for m in metrics.values()), default=math.nan),
        max_abs=max((m.max_abs for m in metrics.values()), default=math.nan),
        top1_agreement=min(tops) if tops else None, task_metric_name=name, task_metric_reference=task_ref,
        task_metric_qdq=task_q, lint=lint_qdq(qdq, trt_version, precision) if run_lint else None,
        target=bound, verdict=verdict, min_top1=min_top1)


# -- a task metric from integer labels ----------------------------------------------------------


def load_labels(path: Union[str, os.PathLike]) -> np.ndarray:
    """Integer class labels from a ``.npy`` file, or a ``.npz`` holding one array (or one named ``labels``).

    Never unpickles. ``labels[i]`` is the class of the ``i``-th held-back
    sample, in the order the data source yields them.

    Raises
    ------
    UserError
        For a missing or unreadable file, Python objects, a non-integer dtype,
        negative labels or an array that is not one label per sample.
    """
    path = os.fspath(path)
    fix = "Save one integer class per held-back sample: numpy.save('labels.npy', np.array([0, 1, ...]))."
    if not os.path.isfile(path):
        raise UserError(f"No labels file at {path}.", "The path does not exist or is a directory.", fix)
    with open(path, "rb") as f:
        magic = f.read(6)
    # numpy takes any other file for a pickle; say what it is instead.
    if magic != b"\x93NUMPY" and not magic.startswith(b"PK\x03\x04"):
        raise UserError(f"{path} could not be read: it is not a .npy or .npz file.",
                        "It lacks the numpy (or zip) header.", fix)
    try:
        # Headers checked before any data is read: a header claiming 10^11 labels is refused, not a MemoryError.
        if magic.startswith(b"PK\x03\x04"):  # an .npz archive
            with open_npz(path) as loaded:
                names = list(loaded.files)
                if "labels" in names:
                    names = ["labels"]
                if len(names) != 1:
                    raise UserError(f"{path} holds {len(names)} arrays ({', '.join(names) or 'none'}) and none is "
                                    "named 'labels'.", "It cannot say which array holds the labels.",
                                    "Save them as np.savez(path, labels=array), or as a .npy file.")
                labels = loaded[names[0]]
        else:
            labels = read_npy(path)
    except UserError:
        raise
    except ValueError as exc:
        if "pickle" not in str(exc).lower():
            raise UserError(f"{path} could not be read as .npy/.npz.", f"{type(exc).__name__}: {exc}", fix) from None
        raise UserError(f"{path} holds Python objects, which are never unpickled.", str(exc), fix) from None
    except Exception as exc:
        raise UserError(f"{path} could not be read as .npy/.npz.", f"{type(exc).__name__}: {exc}", fix) from None
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise UserError(f"The labels in {path} have shape {labels.shape}; the task metric needs one label per sample.",
                        "Labels are class indices (e.g. 0 or 1), not one-hot rows or scores.",
                        "Save a 1-D integer array (labels.argmax(-1) turns one-hot rows into indices).")
    if labels.dtype.kind not in "iu":
        raise UserError(f"The labels in {path} are {labels.dtype} values, not integers.",
                        "A label is a class index compared with the model's arg-max.",
                        "Save them as integers: labels.astype(np.int64).")
    if labels.size and labels.min() < 0:
        raise UserError(f"The labels in {path} include the negative class {int(labels.min())}.",
                        "Class indices start at 0.", fix)
    return labels.astype(np.int64)


def _classifier_output(summary, output: Optional[str]):
    outputs = list(summary.outputs)
    if output is not None:
        match = [t for t in outputs if t.name == output]
        if not match:
            raise UserError(f"The model has no output {output!r}.",
                            f"Its outputs: {', '.join(t.name for t in outputs)}.", "Name one of them.")
        return match[0]
    ranked = [t for t in outputs if len(t.shape) == 2]
    if not ranked:
        raise UserError("Labels need a classifier output of shape [N, classes]; the model has none.",
                        f"Its outputs: {', '.join(f'{t.name} {list(t.shape)}' for t in outputs)}.",
                        "Compute the task metric yourself and pass it to validate_qdq(task_metric=...).")
    return ranked[0]


def label_accuracy(labels: np.ndarray, summary, samples: int, output: Optional[str] = None) -> TaskMetric:
    """Top-1 accuracy against ``labels``, shown for both models beside the target (:func:`validate_qdq`'s
    ``shown_metric``; ``--metric top1`` makes it the target).

    Parameters
    ----------
    labels : ndarray of int
        From :func:`load_labels`; at least ``samples`` of them (the first
        ``samples`` are used, in data order).
    summary : ModelSummary
        The float model's summary: the classifier output is its first output
        of rank 2 (or ``output``), and a static class count is checked.
    samples : int
        How many held-back samples the validation runs on.
    output : str, optional
        The output whose arg-max is the predicted class.

    Returns
    -------
    TaskMetric
        ``metric(outputs) -> accuracy``, named for the output and how many labels are used.

    Raises
    ------
    UserError
        Fewer labels than samples, a label outside the output's classes, or
        no classifier output.
    """
    labels = np.asarray(labels)
    out = _classifier_output(summary, output)
    if len(labels) < samples:
        raise UserError(f"{len(labels)} labels for {samples} held-back samples.",
                        "Every held-back sample needs its label (labels[i] is the class of the i-th sample).",
                        "Give as many labels as samples, or lower --samples.")
    used = labels[:samples]
    classes = out.shape[-1]
    if isinstance(classes, int) and used.size and used.max() >= classes:
        raise UserError(f"A label is class {int(used.max())}, but output {out.name!r} has {classes} classes "
                        f"(0..{classes - 1}).", "Labels are indices into the classifier output.",
                        "Check that the labels belong to this model (and start at 0).")
    name = f"top-1 accuracy of {out.name!r} vs labels" + (
        f" (the first {samples} of {len(labels)} labels)" if len(labels) > samples else "")

    def accuracy(outputs: Dict[str, np.ndarray]) -> float:
        scores = np.asarray(outputs[out.name])
        if scores.ndim != 2 or len(scores) != len(used):
            raise UserError(f"Output {out.name!r} has shape {scores.shape}; the labels need [{len(used)}, classes].",
                            "The task metric compares the arg-max of each row with its label.",
                            "Name a classifier output, or compute the metric yourself (validate_qdq(task_metric=...)).")
        if used.size and used.max() >= scores.shape[1]:
            raise UserError(f"A label is class {int(used.max())}, but output {out.name!r} has {scores.shape[1]} classes.",
                            "Labels are indices into the classifier output.", "Check that the labels belong to this model.")
        return float(np.mean(scores.argmax(-1) == used))

    return TaskMetric(trusted(accuracy), name, outputs=(out.name,))
