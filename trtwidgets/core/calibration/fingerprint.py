"""Which model statistics, caches and plans belong to: the model's fingerprint, and the check against it.

Ranges are per tensor name, so ranges of another model are not rejected by anything downstream:
an export quietly finds a handful of names in common (``input``, ``conv1``) and quantizes those
with another model's ranges. So every reader of ranges checks them against the model first:

* the **fingerprint** a file records (statistics and plan.json): the model's SHA-256, its input
  names and declared shapes. Other input names, or a static dim other than the leading (batch) dim
  that differs, are refused; a batch-1 file fits the model's batch-32 copy, with a note. Another
  SHA-256 with the same inputs (the same graph re-saved, or new weights) is a note, not an error:
  the coverage below decides.
* the **coverage**: the share of the model's floating-point tensors (graph inputs and activations,
  :func:`~.collect.float_tensor_names`) that have a range. Statistics of the same model cover all of
  them; a TensorRT cache of it covers all but the tensors TensorRT folds away (253 of 253 tensors of
  the demo model but one). Below :data:`MIN_COVERAGE` the ranges are refused, saying how many
  matched. TensorRT caches cannot carry a fingerprint (TensorRT reads the file), so for them the
  coverage is the check.

A file without a fingerprint (written before it was recorded) is still read: the coverage check
alone applies, and a note says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..common.errors import StatsError

#: Ranges covering less than this share of the model's floating-point tensors are refused.
MIN_COVERAGE = 0.5

__all__ = ["MIN_COVERAGE", "ModelFingerprint", "check_ranges_fit", "check_stats_fit", "fingerprint_of",
           "float_tensors", "stats_fingerprint"]

Dims = Tuple[Any, ...]


@dataclass(frozen=True)
class ModelFingerprint:
    """What identifies a model to its ranges.

    Attributes
    ----------
    sha256 : str
        Of the ONNX file ('' when unknown).
    inputs : tuple of (str, tuple)
        Input name and declared shape (ints for static dims, text for symbolic ones), in graph order.
    """

    sha256: str
    inputs: Tuple[Tuple[str, Dims], ...]

    def to_dict(self) -> dict:
        return {"sha256": self.sha256, "inputs": {n: list(s) for n, s in self.inputs}}

    @classmethod
    def from_dict(cls, d: Any, source: str) -> "ModelFingerprint":
        """Read a recorded fingerprint, or a :class:`StatsError` saying what is malformed."""
        ok = isinstance(d, Mapping) and isinstance(d.get("sha256", ""), str) and isinstance(d.get("inputs"), Mapping)
        inputs = d.get("inputs") if ok else {}
        if ok:
            ok = all(isinstance(n, str) and isinstance(s, list) and all(
                (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, str) for v in s)
                for n, s in inputs.items())
        if not ok:
            raise StatsError(f"{source} holds a damaged model fingerprint.",
                             f"It is {str(d)[:120]!r}; it should be {{\"sha256\": text, \"inputs\": {{name: [dims]}}}}.",
                             "Restore the file as the tool wrote it, or make it again.")
        return cls(sha256=d.get("sha256", ""), inputs=tuple((n, tuple(s)) for n, s in inputs.items()))


def fingerprint_of(model) -> ModelFingerprint:
    """The fingerprint of a :class:`~trtwidgets.core.model.load.LoadedModel`."""
    return ModelFingerprint(sha256=model.sha256 or "",
                            inputs=tuple((i.name, tuple(i.shape)) for i in model.summary.inputs))


def float_tensors(model) -> List[str]:
    """The model's floating-point graph inputs and activations: the tensors ranges are for."""
    from .collect import float_tensor_names

    inputs, acts = float_tensor_names(model.proto)
    return inputs + acts


def _shape_conflict(name: str, have: Sequence, want: Sequence) -> str:
    if len(have) != len(want):
        return f"input {name!r} has {len(want)} dims in the model, {len(have)} in the file"
    # Dim 0 is the batch of almost every model, and a range per tensor does not depend on the batch:
    # ranges collected on a static batch-1 copy fit its batch-32 copy (see _batch_notes).
    for i, (a, b) in enumerate(zip(have, want)):
        if i > 0 and isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= 0 and a != b:
            return f"input {name!r} dim {i} is {b} in the model, {a} in the file"
    return ""


def _batch_notes(model, recorded_inputs: Mapping[str, Sequence], kind: str) -> List[str]:
    """A note per input whose static leading dim differs between the file and the model (and nothing else)."""
    want = {i.name: tuple(i.shape) for i in model.summary.inputs}
    notes = []
    for name, have in recorded_inputs.items():
        model_dims = want.get(name, ())
        if have and model_dims and len(have) == len(model_dims):
            a, b = have[0], model_dims[0]
            if isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= 0 and a != b:
                notes.append(f"input {name!r}: the {kind} was made at a leading dim (batch) of {a}, this model has "
                             f"{b}; ranges are per tensor and do not depend on the batch, so they are used as they are")
    return notes


def _input_problem(model, recorded_inputs: Mapping[str, Sequence]) -> str:
    """Why inputs recorded in a file (declared or run-at shapes) cannot be the model's; '' when they can be."""
    want = {i.name: tuple(i.shape) for i in model.summary.inputs}
    if set(recorded_inputs) != set(want):
        return (f"the file is for a model with inputs {', '.join(map(repr, recorded_inputs)) or 'none'}; this model's "
                f"are {', '.join(map(repr, want)) or 'none'}")
    for name, shape in recorded_inputs.items():
        problem = _shape_conflict(name, tuple(shape), want[name])
        if problem:
            return problem
    return ""


def check_ranges_fit(model, names: Iterable[str], source: str, kind: str,
                     fingerprint: Optional[ModelFingerprint] = None,
                     run_shapes: Optional[Mapping[str, Sequence]] = None) -> Tuple[str, ...]:
    """Refuse ranges that are not the model's; return notes on what was let through.

    Parameters
    ----------
    model : LoadedModel
    names : iterable of str
        The tensor names the file has ranges for.
    source : str
        The file, for the message.
    kind : str
        What the file is, in words ("statistics", "calibration cache", "plan").
    fingerprint : ModelFingerprint, optional
        The one the file records (None: an older file, or a TensorRT cache).
    run_shapes : mapping, optional
        Input name -> shape the statistics were collected at (-1 where it varied).

    Returns
    -------
    tuple of str
        Notes: an older file without a fingerprint, another file of the same inputs, partial coverage.

    Raises
    ------
    StatsError
        Other inputs, or too few of the model's tensors covered.
    """
    model_name = model.path
    option = {"statistics": "--stats", "calibration": "--out"}.get(kind, "--cache" if "cache" in kind else "")
    fix = (f"Give the {kind} made for {model_name} (trtwidgets calibrate {model_name} --data ..."
           + (f" {option}" if option else "") + ")"
           + (", or run the planner again" if kind == "plan" else "") + ".")
    notes: List[str] = []
    problem = ""
    if fingerprint is not None:
        problem = _input_problem(model, dict(fingerprint.inputs))
    if not problem and run_shapes:
        problem = _input_problem(model, run_shapes)
    if problem:
        article = "" if kind == "statistics" else "an " if kind[0] in "aeiou" else "a "
        raise StatsError(f"{source} is not {article}{kind} of {model_name}.",
                         f"Its recorded model does not match: {problem}.", fix)
    if fingerprint is not None:
        notes.extend(_batch_notes(model, dict(fingerprint.inputs), kind))
    tensors = float_tensors(model)
    given = set(names)
    covered = sum(1 for t in tensors if t in given)
    if tensors and covered < MIN_COVERAGE * len(tensors):
        foreign = len(given - set(tensors))
        raise StatsError(
            f"{source} covers {covered} of the {len(tensors)} tensors of {model_name} ({covered / len(tensors):.0%}).",
            f"Its {len(given)} ranges are for other tensor names ({foreign} are not in this model), so it was made "
            f"for another model (or another export of it); at least {MIN_COVERAGE:.0%} must match. "
            "Quantizing with it would leave most layers float, and use another model's ranges for the rest.",
            fix)
    if fingerprint is None and "cache" not in kind:
        # A TensorRT cache never has one (TensorRT reads the file): only older files of the toolkit get this note.
        notes.append(f"{source} records no model fingerprint (written before it was recorded); it was checked by "
                     f"its tensor names: {covered} of {len(tensors)} tensors of the model have a range")
    elif fingerprint is not None and fingerprint.sha256 and model.sha256 \
            and fingerprint.sha256 != model.sha256:
        notes.append(f"{source} was made from another ONNX file ({fingerprint.sha256[:12]}...) with the same inputs; "
                     f"{covered} of {len(tensors)} tensors of this model have a range")
    elif covered < len(tensors):
        notes.append(f"{source}: {len(tensors) - covered} of {len(tensors)} tensors of the model have no range "
                     "(they stay in high precision)")
    return tuple(notes)


def stats_fingerprint(stats) -> Optional[ModelFingerprint]:
    """The fingerprint :class:`~.stats.ActivationStats` record (None for files written before it was)."""
    if not stats.model_inputs:
        return None
    return ModelFingerprint(stats.model_sha256, tuple((k, tuple(v)) for k, v in stats.model_inputs.items()))


def check_stats_fit(model, stats, source: str = "the statistics", fingerprint: Optional[ModelFingerprint] = None,
                    kind: str = "statistics") -> Tuple[str, ...]:
    """:func:`check_ranges_fit` for :class:`~.stats.ActivationStats` (their fingerprint and run-at shapes).

    ``fingerprint`` replaces the one the statistics record (a Calibration carries its own);
    ``kind`` names the file in messages.
    """
    recorded = fingerprint if fingerprint is not None else stats_fingerprint(stats)
    if recorded is None and stats.model_sha256 and stats.model_sha256 == model.sha256:
        recorded = fingerprint_of(model)  # an older file of this very model: its SHA-256 says so
    return check_ranges_fit(model, stats.tensors, source, kind, recorded, stats.input_shapes)
