"""The Calibration: what the calibration stage hands the export, the explorer and the planner.

A frozen value: the activation statistics, the range method (and percentile) whose amax is
exported, amax chosen by hand (overrides, which win over the method), what the data was, and
the fingerprint of the model the statistics were collected on. :attr:`Calibration.amax` is the
one derivation of the exported amax: the Q/DQ export, the explorer, the planner and the
calibration-cache writer all read it, so they write the same values.

It travels as one ``.npz`` (:meth:`Calibration.save`): the statistics' members exactly as
:func:`~.stats.save_stats` writes them, plus a JSON member ``calibration`` (method, percentile,
overrides, fingerprint, data, format version; with ``auto`` the tensors' roles and the method chosen
for each, with its reason). So :func:`~.stats.load_stats` reads a saved calibration's statistics,
and :meth:`Calibration.load` reads a plain statistics file of ``calibrate --stats`` as a calibration
(``auto`` unless told otherwise, and a note says so). It is checked once against the model it is
applied to (:meth:`Calibration.check_fits`).

The method ``auto`` (the default) picks each tensor's method from its statistics and its role in the
graph (:mod:`.auto_ranges`); :attr:`Calibration.choices` says which and why.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from ..common.atomic import atomic_write
from ..common.errors import StatsError
from ..common.frozen import readonly_mapping
from ..common.json_limits import JsonLimits, load_json
from ..common.notes import note
from ..common.paths import user_path
from .amax_values import amax_problem
from .auto_ranges import (AUTO, CLIP_NOTE_SHARE, EXPORT_METHODS, RULE_VERSION, RangeChoice, auto_choices,
                          choice_counts, clipping_notes)
from .fingerprint import ModelFingerprint, check_stats_fit, float_tensors, stats_fingerprint
from .ranges import METHODS, amax_from_stats, clipped_share, compute_ranges, usable_amax
from .stats import ActivationStats, load_stats, stats_arrays, zero_tensors

__all__ = ["CALIBRATION_FORMAT", "CALIBRATION_VERSION", "METHODS", "Calibration", "override_value", "resume_stats"]

#: Format tag of the ``calibration`` member of a saved calibration.
CALIBRATION_FORMAT = "trtwidgets-calibration"
#: 2: the method ``auto``, with the tensors' roles and the method chosen for each (1 is still read).
CALIBRATION_VERSION = 2
#: The member's JSON: a method, a percentile, one override, role and choice per tensor at most, the model's inputs.
CALIBRATION_LIMITS = JsonLimits("calibration", 64 << 20, 8,
                                "a calibration's settings are a method, a percentile, amax overrides and the "
                                "model's inputs: small and nested 3 deep")
_MEMBER = "calibration"
_FIX = ("Give the .npz that `trtwidgets calibrate --out` (cal.save) or `--stats` wrote; make it again if it was "
        "damaged or written by hand.")


def override_value(tensor: str, amax: Any) -> float:
    """``amax`` as an override of ``tensor``: a finite positive float, else a :class:`StatsError` (what, why, fix)."""
    if not isinstance(tensor, str) or not tensor:
        raise StatsError(f"An amax override names the tensor {tensor!r}.", "Overrides are by tensor name.",
                         "Name the tensor as the model does (e.g. 'conv1_out').")
    try:
        value = float(amax)
    except (TypeError, ValueError):
        value = None
    problem = amax_problem(value) if value is not None and not isinstance(amax, bool) else f"{amax!r} is not a number"
    if not problem and value == 0:
        problem = "0 gives the scale 0, which no tensor can be quantized with"
    if problem:
        raise StatsError(f"cannot override the amax of {tensor!r}: {problem}",
                         "the int8 scale is amax / 127 and must be a positive finite number",
                         "enter a positive number, e.g. the max method's value")
    assert value is not None, "a value that is not a number is a problem above"
    return value


@dataclass(frozen=True, repr=False)
class Calibration:
    """Statistics, the range method and the overrides of one calibration, and the model it belongs to.

    Attributes
    ----------
    stats : ActivationStats
    method : str
        The range method whose amax is exported: ``"auto"`` (each tensor's own, see :attr:`choices`),
        or one for every tensor (``"entropy"``, ``"max"``, ``"percentile"``, ``"mse"``).
    percentile : float
        For ``method="percentile"``.
    overrides : mapping
        Tensor -> amax chosen by hand; they win over ``method`` (also for tensors without statistics).
    fingerprint : ModelFingerprint or None
        Of the model the statistics were collected on (default: the one the statistics record;
        None for files written before it was recorded).
    data : str
        What the data was, in words.
    roles : mapping or None
        Tensor -> its role in the model's graph (Softmax output, LayerNorm, ...:
        :func:`~trtwidgets.core.model.tensor_roles.tensor_roles`), which ``auto`` reads; None when the
        graph was not at hand (then :meth:`check_fits` reads it from the model).
    """

    stats: ActivationStats
    method: str = AUTO
    percentile: float = 99.99
    overrides: Mapping[str, float] = field(default_factory=dict)
    fingerprint: Optional[ModelFingerprint] = None
    data: str = ""
    roles: Optional[Mapping[str, str]] = None
    # Computed once and shared by every refit at the same percentile (the statistics do not change).
    _ranges: Dict[str, Any] = field(default_factory=dict, init=False, compare=False)
    _amax: Dict[str, Any] = field(default_factory=dict, init=False, compare=False)
    #: The file it was loaded from ('' when made here): what messages about it name.
    origin: str = field(default="", init=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.stats, ActivationStats):
            raise StatsError(f"A Calibration holds activation statistics, not a {type(self.stats).__name__}.",
                             "Its ranges are computed from the statistics' histograms.",
                             "Calibrate (trtwidgets.calibrate), load one (trtwidgets.Calibration.load), or fit "
                             "collected statistics: trtwidgets.Calibration.fit(stats, method=...).")
        if self.method not in EXPORT_METHODS:
            raise StatsError(f"Unknown range method {self.method!r}.", f"Known methods: {', '.join(EXPORT_METHODS)}.",
                             "auto picks each tensor's from its statistics and role; entropy is TensorRT's "
                             "EntropyCalibrator2; max keeps every value.")
        pct = self.percentile
        if isinstance(pct, bool) or not isinstance(pct, numbers.Real) or not 0 < float(pct) <= 100:
            raise StatsError(f"Percentile {pct!r} is out of range.", "It is the share of |x| values the range keeps: "
                             "a number in (0, 100].", "Use e.g. 99.99.")
        object.__setattr__(self, "percentile", float(pct))
        object.__setattr__(self, "overrides", readonly_mapping(
            {t: override_value(t, v) for t, v in dict(self.overrides or {}).items()}))
        if self.fingerprint is None:
            object.__setattr__(self, "fingerprint", stats_fingerprint(self.stats))
        object.__setattr__(self, "data", str(self.data or ""))
        if self.roles is not None:
            if not isinstance(self.roles, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in self.roles.items()):
                raise StatsError("A Calibration's roles map tensor names to role names.",
                                 f"Got {type(self.roles).__name__} {str(self.roles)[:80]!r}.",
                                 "Leave roles out; calibrate and check_fits read them from the model's graph.")
            object.__setattr__(self, "roles", readonly_mapping(dict(self.roles)))

    # ------------------------------------------------------------------ making one

    @classmethod
    def fit(cls, stats: ActivationStats, method: str = AUTO, percentile: float = 99.99,
            overrides: Optional[Mapping[str, float]] = None, data: str = "", ranges=None,
            fingerprint: Optional[ModelFingerprint] = None, model=None) -> "Calibration":
        """The calibration of ``stats`` (see the class attributes).

        Parameters
        ----------
        ranges : dict, optional
            :func:`~.ranges.compute_ranges` of ``stats`` at ``percentile`` for every method (not recomputed).
        model : LoadedModel, proto or path, optional
            The model the statistics are of: its graph gives the tensors' :attr:`roles` (``auto`` reads them).
        """
        roles = None
        if model is not None:
            from ..model.tensor_roles import tensor_roles

            roles = tensor_roles(model)
        cal = cls(stats, method, percentile, overrides or {}, fingerprint, data, roles)
        if ranges is not None:
            cal._ranges["ranges"] = ranges
        return cal

    def refit(self, *, method: Optional[str] = None, percentile: Optional[float] = None,
              overrides: Optional[Mapping[str, float]] = None) -> "Calibration":
        """This calibration with another method, percentile or overrides (statistics and fingerprint kept).

        Ranges already computed are reused; at another percentile only the percentile method's are recomputed.
        """
        pct = self.percentile if percentile is None else percentile
        new = dataclasses.replace(self, method=method or self.method, percentile=pct,
                                  overrides=self.overrides if overrides is None else overrides)
        object.__setattr__(new, "origin", self.origin)
        ranges = self._ranges.get("ranges")
        if new.percentile == self.percentile:
            object.__setattr__(new, "_ranges", self._ranges)
            if new.method == self.method and "choices" in self._amax:  # as chosen (or saved), not chosen again
                new._amax["choices"] = self._amax["choices"]
        elif ranges is not None:
            fresh = compute_ranges(self.stats, ("percentile",), new.percentile)
            new._ranges["ranges"] = {name: dict(per, **fresh.get(name, {})) for name, per in ranges.items()}
        return new

    def with_override(self, tensor: str, amax: float) -> "Calibration":
        """This calibration with ``tensor``'s amax set by hand (a bad value is a :class:`StatsError`)."""
        return self.refit(overrides=dict(self.overrides, **{tensor: override_value(tensor, amax)}))

    def without_override(self, tensor: str) -> "Calibration":
        """This calibration without ``tensor``'s override (no error when it had none)."""
        return self.refit(overrides={k: v for k, v in self.overrides.items() if k != tensor})

    def with_roles(self, model) -> "Calibration":
        """This calibration with the tensors' roles read from ``model``'s graph (what ``auto`` decides by)."""
        from ..model.tensor_roles import tensor_roles

        new = dataclasses.replace(self, roles=tensor_roles(model))
        object.__setattr__(new, "origin", self.origin)
        object.__setattr__(new, "_ranges", self._ranges)
        return new

    # ------------------------------------------------------------------ what it exports

    @property
    def ranges(self) -> Dict[str, Dict[str, Any]]:
        """Tensor -> method -> :class:`~.ranges.RangeResult`, every method at :attr:`percentile` (computed once)."""
        ranges = self._ranges.get("ranges")
        if ranges is None:
            ranges = self._ranges["ranges"] = compute_ranges(self.stats, METHODS, self.percentile)
        return ranges

    @property
    def amax(self) -> Dict[str, float]:
        """Tensor -> the amax every export writes.

        :attr:`method`'s amax for each tensor whose range is finite and positive (an all-zero
        tensor has no scale), then every override, also for tensors without statistics.
        """
        amax = self._amax.get("amax")
        if amax is None:
            if self.method == AUTO:
                ranges = self.ranges
                picked = ((name, ranges[name][c.method].amax) for name, c in self.choices.items()
                          if name in ranges and c.method in ranges[name])
                amax = {name: float(v) for name, v in picked if usable_amax(float(v))}
            else:
                amax = amax_from_stats(self.stats, self.method, self.percentile, ranges=self._ranges.get("ranges"))
            amax.update(self.overrides)
            self._amax["amax"] = amax
        return dict(amax)

    @property
    def choices(self) -> Dict[str, RangeChoice]:
        """Tensor -> the method ``auto`` exports for it and why (empty unless :attr:`method` is ``"auto"``).

        Chosen once from the statistics and :attr:`roles` (:func:`~.auto_ranges.auto_choices`); a loaded
        calibration keeps the choices it was saved with.
        """
        if self.method != AUTO:
            return {}
        got = self._amax.get("choices")
        if got is None:
            counts = {name: t.count for name, t in self.stats.tensors.items()}
            got = self._amax["choices"] = auto_choices(self.ranges, self.roles, counts, self.percentile)
        return dict(got)

    @property
    def sources(self) -> Dict[str, str]:
        """Tensor -> where its exported amax comes from: its method, or ``"override"``."""
        if self.method == AUTO:
            out = {name: c.method for name, c in self.choices.items()}
        else:
            out = {name: self.method for name in self.ranges}
        out.update({name: "override" for name in self.overrides})
        return out

    @property
    def clipped(self) -> Dict[str, float]:
        """Tensor -> the share of its calibration values its exported amax clips (by more than rounding:
        :func:`~.ranges.clipped_share`), where that is over :data:`~.auto_ranges.CLIP_NOTE_SHARE` (see
        :meth:`clipping_notes` for what to do)."""
        got = self._amax.get("clipped")
        if got is None:
            got = {}
            for name, amax in self.amax.items():
                t = self.stats.tensors.get(name)
                if t is None or not t.count:
                    continue
                frac = clipped_share(t, amax)
                if frac > CLIP_NOTE_SHARE:
                    got[name] = float(frac)
            self._amax["clipped"] = got
        return dict(got)

    @property
    def zero_tensors(self) -> Tuple[str, ...]:
        """The tensors that were zero on every calibration sample (and have no override): they have no range.

        Every finite value they took was 0, so no scale can be computed for them; an export keeps them float
        and says why (:data:`~trtwidgets.core.qdq.qdq_writer.ZERO_RANGE`), instead of "not in the statistics".
        """
        return tuple(name for name in zero_tensors(self.stats) if name not in self.overrides)

    def clipping_notes(self) -> Dict[str, str]:
        """Tensor -> what to do, for each tensor whose exported range clips more than
        :data:`~.auto_ranges.CLIP_NOTE_SHARE` of its calibration values."""
        return clipping_notes(self.clipped, self.sources)

    def describe(self) -> str:
        """The ranges in words: method, percentile and overrides (what an export says it used)."""
        counts = ""
        if self.method == AUTO:
            counts = " (" + ", ".join(f"{m} {n}" for m, n in choice_counts(self.choices).items()) + ")"
        return (f"{self.method} ranges from the calibration{counts}"
                + (f" (percentile {self.percentile:g})" if self.method == "percentile" else "")
                + (f", {len(self.overrides)} amax overrides" if self.overrides else ""))

    def __repr__(self) -> str:
        method = self.method + (f" {self.percentile:g}" if self.method == "percentile" else "") + ","
        if self.method == AUTO:  # the counts hold commas: a semicolon ends them
            method = "auto: " + ", ".join(f"{m} {n}" for m, n in choice_counts(self.choices).items()) + ";"
        sha = self.fingerprint.sha256 if self.fingerprint is not None else self.stats.model_sha256
        return (f"Calibration({method} {len(self.stats.tensors)} tensors, {self.stats.samples} samples, "
                f"{len(self.overrides)} overrides, model {sha[:12] + '...' if sha else 'unknown'})")

    # ------------------------------------------------------------------ the model it is applied to

    def check_fits(self, model, source: Optional[str] = None) -> "Calibration":
        """This calibration, once checked against ``model`` (a LoadedModel, proto or path); notes for what passed.

        ``source`` names it in messages (default: the file it was loaded from, else "the calibration").
        An ``auto`` calibration made without the graph at hand (a statistics file) comes back with the
        tensors' roles read from ``model`` (:meth:`with_roles`), so its choices are the graph's.

        Raises
        ------
        StatsError
            The statistics are another model's (other inputs, or too few of its tensors covered:
            :func:`~.fingerprint.check_stats_fit`), or an override names a tensor the model lacks.
        """
        from ..model.load import as_loaded

        loaded = as_loaded(model)
        source = source or self.origin or "the calibration"
        for text in check_stats_fit(loaded, self.stats, source, self.fingerprint, "calibration"):
            note(text)
        known = set(float_tensors(loaded))
        foreign = [t for t in self.overrides if t not in known]
        if foreign:
            shown = ", ".join(map(repr, foreign[:3])) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise StatsError(f"{source} overrides the amax of {len(foreign)} tensor(s) that "
                             f"{loaded.path} lacks: {shown}.",
                             "An override is for an activation tensor of the model it was chosen on; these names "
                             "are none of this model's floating-point tensors (a typo, or another model's).",
                             "Remove them (cal.without_override(name)), or name the tensors as this model does.")
        if self.method == AUTO and self.roles is None:
            return self.with_roles(loaded)
        return self

    # ------------------------------------------------------------------ the file

    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Write this calibration to one ``.npz`` (atomically, no pickles); returns the path written.

        Never over a sample of the folder it was calibrated on (:attr:`data`): a WriteError says so.
        """
        path = user_path(path)
        if self.data and os.path.isdir(self.data):
            from ..common.write_rule import WriteError, folder_member
            from .sources import reads_as_sample

            member = folder_member(path, self.data, reads_as_sample, recursive=False)
            if member is not None:
                raise WriteError(f"{path} is {member.name}, a sample of the folder this calibration was made on "
                                 f"({self.data}).", "Writing it would replace a sample: later calibrations would read "
                                 "the calibration in its place.", f"Save it outside {self.data}, e.g. cal.npz.")
        doc = {"format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION, "method": self.method,
               "percentile": self.percentile, "overrides": dict(self.overrides),
               "fingerprint": self.fingerprint.to_dict() if self.fingerprint is not None else None,
               "data": self.data, "roles": dict(self.roles) if self.roles is not None else None}
        if self.method == AUTO:  # as chosen: a later rule must not change what this file exports
            doc["choices"] = {name: c.to_list() for name, c in self.choices.items()}
            doc["rule_version"] = RULE_VERSION
        arrays = stats_arrays(self.stats)
        arrays[_MEMBER] = np.frombuffer(json.dumps(doc, allow_nan=False).encode("utf-8"), dtype=np.uint8)
        atomic_write(path, lambda f: np.savez_compressed(f, **arrays))  # type: ignore[arg-type]  # numpy's stub: a member could be allow_pickle
        return path

    @classmethod
    def load(cls, path: Union[str, os.PathLike], method: Optional[str] = None,
             percentile: Optional[float] = None) -> "Calibration":
        """A calibration :meth:`save` wrote (exactly as it was), or a statistics ``.npz`` read as one.

        Parameters
        ----------
        path : path
        method, percentile : optional
            Replace the file's (a statistics file has none: auto at 99.99 unless given, and a note says so).

        Raises
        ------
        StatsError
            A missing, foreign or damaged file (the file is not changed).
        """
        from .npz_reader import text_member

        path = user_path(path)
        if not path.is_file():
            raise StatsError(f"No calibration at {path}.", "The path does not exist or is a directory.", _FIX)
        try:
            stats = load_stats(path)
        except StatsError as err:
            raise StatsError(f"{path} is not a calibration trtwidgets can read: {err.what}", err.why, _FIX) from None
        try:
            raw = text_member(path, _MEMBER)
        except Exception as exc:
            raise StatsError(f"{path} holds a damaged calibration.", f"{type(exc).__name__}: {exc}", _FIX) from None
        if raw is None:
            if method is None:  # the caller did not say which: say what it will be
                note(f"{path} holds statistics without a calibration's settings (calibrate --stats): exported "
                     "with auto ranges (each tensor's method chosen from its statistics and role) and no amax "
                     "overrides")
            cal = cls(stats, method or AUTO, 99.99 if percentile is None else percentile)
        else:
            doc = load_json(raw, str(path), CALIBRATION_LIMITS, StatsError, on_decode_error=lambda exc: StatsError(
                f"{path} holds a damaged calibration.", f"Its calibration member is not JSON: {exc}.", _FIX))
            cal = _from_doc(stats, doc, str(path)).refit(method=method, percentile=percentile)
        object.__setattr__(cal, "origin", str(path))
        return cal


def _from_doc(stats: ActivationStats, doc: Any, source: str) -> Calibration:
    """The calibration a saved ``calibration`` member describes, every field checked."""
    if not isinstance(doc, dict) or doc.get("format") != CALIBRATION_FORMAT:
        tag = doc.get("format") if isinstance(doc, dict) else None
        raise StatsError(f"{source} is not a trtwidgets calibration.", f"Its calibration member's format tag is "
                         f"{tag!r}, not {CALIBRATION_FORMAT!r}.", _FIX)
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version > CALIBRATION_VERSION:
        raise StatsError(f"{source} is a calibration of format version {version!r}; this trtwidgets reads up to "
                         f"{CALIBRATION_VERSION}.", "A newer trtwidgets wrote it (or the file was edited).",
                         "Read it with the trtwidgets that wrote it, or calibrate again.")
    method, overrides, data = doc.get("method"), doc.get("overrides", {}), doc.get("data", "")
    if not isinstance(method, str) or not isinstance(overrides, dict) or not isinstance(data, str):
        shown = ", ".join(f"{k} {str(v)[:60]!r}" for k, v in (("method", method), ("overrides", overrides),
                                                               ("data", data)))
        raise StatsError(f"{source} holds a damaged calibration.", "Its method and data must be text and its "
                         f"overrides an object of tensor -> amax; it has {shown}.", _FIX)
    fp = doc.get("fingerprint")
    fingerprint = ModelFingerprint.from_dict(fp, source) if fp is not None else None
    try:
        percentile: Any = doc.get("percentile")  # Calibration checks it
        cal = Calibration(stats, method, percentile, overrides, fingerprint, data, doc.get("roles"))
    except StatsError as err:
        raise StatsError(f"{source}: {err.what}", err.why, _FIX) from None
    choices = doc.get("choices")
    if cal.method == AUTO and choices is not None:
        cal._amax["choices"] = _saved_choices(choices, source)
    return cal


def _saved_choices(choices: Any, source: str) -> Dict[str, RangeChoice]:
    """The per-tensor choices a saved ``auto`` calibration holds, every entry checked."""
    ok = isinstance(choices, dict) and all(
        isinstance(k, str) and isinstance(v, list) and len(v) == 2 and v[0] in METHODS and isinstance(v[1], str)
        for k, v in choices.items())
    if not ok:
        raise StatsError(f"{source} holds a damaged calibration.", "Its auto choices must map each tensor to "
                         f"[method, reason] with a method of {', '.join(METHODS)}.", _FIX)
    return {k: RangeChoice(v[0], v[1]) for k, v in choices.items()}


def resume_stats(path: Union[str, os.PathLike]) -> ActivationStats:
    """The statistics to continue from (``calibrate --resume``): of a statistics file, or of a saved calibration.

    A file holding a ``calibration`` member is read as the calibration it claims to be, so a member that is
    damaged (not text, Python objects, another format) is refused here rather than passed over in silence.

    Raises
    ------
    StatsError
        A missing, foreign or damaged file (the file is not changed).
    """
    from ..common.npz_files import open_npz

    path = user_path(path)
    try:
        with open_npz(path) as archive:
            has_calibration = _MEMBER in archive
    except Exception:
        has_calibration = False
    return Calibration.load(path).stats if has_calibration else load_stats(path)
