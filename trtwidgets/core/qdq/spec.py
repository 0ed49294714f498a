"""What to quantize, as one value: the ranges, the layers to run in INT8 and how to write them.

A :class:`QdqSpec` is what :func:`~.export.build_qdq` takes, and all it takes: the amax per
activation tensor (a Calibration's :attr:`amax`, a calibration cache's, a plan's), the weighted
layers to run in INT8 (a plan candidate's node set; None: every layer the placement rules allow)
and the :class:`~.options.QdqOptions` (precision, float part, placement rules, exclusions). Its
values are checked once, when it is made: every amax must be usable as a scale of the options'
precision and float part (:mod:`~trtwidgets.core.calibration.amax_values`); the node set is
checked against the model it is applied to (:meth:`QdqSpec.check_fits`; ``build_qdq``'s placement
checks it on the copy it writes, and refuses a label the model has no weighted layer for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Any, FrozenSet, Iterable, Mapping, Optional

import onnx

from ..calibration.amax_values import check_amax_values
from ..common.errors import UserError
from ..common.frozen import readonly_mapping
from .exclusions import kept_float_by_plan
from .options import QdqOptions
from .region_choices import check_choices
from .weights import PRECISIONS

__all__ = ["QdqSpec", "refuse_all_zero"]


def _node_set(nodes: Any) -> Optional[FrozenSet[str]]:
    if nodes is None:
        return None
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, (AbstractSet, Iterable)):
        raise UserError(f"nodes={nodes!r} is not a set of layer labels.",
                        "A Q/DQ spec's nodes are the weighted layers to run in INT8, e.g. a plan candidate's "
                        "quantized layers.", "Pass a set or list of node labels, or None for every layer.")
    out = frozenset(nodes)
    bad = [n for n in out if not isinstance(n, str)]
    if bad:
        raise UserError(f"The layers to quantize hold {bad[0]!r}, which is not a node label.",
                        "Layers are named by their node label (name, or Op(output)).",
                        "Pass strings, e.g. candidate.quantized.")
    return out


@dataclass(frozen=True)
class QdqSpec:
    """What :func:`~.export.build_qdq` writes: ranges, the layers to run in INT8, options.

    Parameters
    ----------
    amax : mapping of str to float
        Activation tensor -> range. Every value is checked to be usable as a scale (finite, not
        negative, a scale the float part's type can hold); 0 is accepted (that tensor stays float
        and the report says so), as are tensors the model does not have (a cache of a larger model).
    options : QdqOptions
        How the model is written.
    nodes : set of str, optional
        The weighted layers (node labels) to run in INT8; every other weighted layer stays in high
        precision ("kept float by the plan"). None: every layer the placement rules allow.
    source : str
        Where the ranges came from, in words (the export's report repeats it).
    choices : mapping of str to str
        Node label -> placement choice where a rule has more than one buildable answer (a region's
        placement scheme, :mod:`.region_choices`): a residual Add's ``"skip"`` or ``"both"``, ``"float"``
        for a node without weights. Empty: the rules' own answers.
    clipping : mapping of str to str
        Tensor -> what to do, for the tensors whose range clips more than the stated share of their
        calibration values (:meth:`~trtwidgets.core.calibration.calibration.Calibration.clipping_notes`); the
        report lists those it quantizes.
    zero : set of str
        The tensors that were zero on every calibration sample
        (:attr:`~trtwidgets.core.calibration.calibration.Calibration.zero_tensors`): they have no range, and the
        report says so (not "not in the statistics"); :func:`refuse_all_zero` refuses an export they leave empty.

    Raises
    ------
    UserError
        Options that are not a QdqOptions, nodes that are not labels, or an amax that cannot be a scale
        (a :class:`~trtwidgets.core.common.errors.StatsError` naming the tensors).
    """

    amax: Mapping[str, float] = field(repr=False)
    options: QdqOptions = field(default_factory=QdqOptions)
    nodes: Optional[FrozenSet[str]] = None
    source: str = ""
    choices: Mapping[str, str] = field(default_factory=dict)
    clipping: Mapping[str, str] = field(default_factory=dict, repr=False)
    zero: FrozenSet[str] = field(default_factory=frozenset, repr=False)

    def __post_init__(self):
        if not isinstance(self.options, QdqOptions):
            raise UserError(f"options={self.options!r} is not a QdqOptions.",
                            "A Q/DQ spec's options say how the model is written.",
                            "Pass trtwidgets.QdqOptions(...) (or leave it out for the defaults).")
        if not isinstance(self.amax, Mapping):
            raise UserError(f"amax is a {type(self.amax).__name__}, not a mapping of tensor -> amax.",
                            "A Q/DQ spec's ranges are one amax per activation tensor.",
                            "Pass a dict, e.g. calibration.amax, or use QdqSpec.from_calibration(cal).")
        qmax = PRECISIONS[self.options.precision][0]
        amax = check_amax_values(self.amax, self.source or "the ranges given", qmax,
                                 self.options.resolved_high_precision())
        object.__setattr__(self, "amax", readonly_mapping(amax))
        object.__setattr__(self, "nodes", _node_set(self.nodes))
        object.__setattr__(self, "source", str(self.source or ""))
        object.__setattr__(self, "choices", readonly_mapping(check_choices(self.choices)))
        object.__setattr__(self, "clipping", readonly_mapping({str(k): str(v) for k, v in
                                                               dict(self.clipping or {}).items()}))
        object.__setattr__(self, "zero", frozenset(str(t) for t in (self.zero or ())))

    @classmethod
    def from_calibration(cls, cal, options: Optional[QdqOptions] = None,
                         nodes: Optional[Iterable[str]] = None) -> "QdqSpec":
        """The spec of a fitted Calibration: its exported amax (``cal.amax``, overrides included), its
        description (``cal.describe()``: method, percentile, overrides) and the tensors whose range clips many
        values (``cal.clipping_notes()``)."""
        return cls(cal.amax, options if options is not None else QdqOptions(), None if nodes is None else frozenset(nodes),
                   source=cal.describe(),
                   clipping=cal.clipping_notes(), zero=cal.zero_tensors)

    def check_fits(self, model: onnx.ModelProto) -> "QdqSpec":
        """This spec, once its node set is checked against ``model`` (every label a weighted layer of it).

        Raises
        ------
        QdqExclusionError
            A label the model has no node for, or that names a node without weights.
        """
        if self.nodes is not None:
            kept_float_by_plan(model.graph, self.nodes)
        if self.choices:
            from .region_choices import choice_nodes

            choice_nodes(model.graph, self.choices)
        return self

    def __repr__(self) -> str:
        o = self.options
        layers = "every layer the rules allow" if self.nodes is None else f"{len(self.nodes)} layers"
        source = f", source={self.source!r}" if self.source else ""
        chosen = f", {len(self.choices)} placement choices" if self.choices else ""
        return (f"QdqSpec({len(self.amax)} amax, {o.precision.upper()} in {layers}, float part "
                f"{o.high_precision}{chosen}{source})")[:1000]


def refuse_all_zero(report, zero: AbstractSet[str]) -> None:
    """Refuse an export that quantized nothing because its tensors were zero on every calibration sample.

    ``report``: the export's :class:`~.export_report.QdqReport` (None: no range at all, nothing to export);
    ``zero``: the spec's :attr:`QdqSpec.zero`.

    Raises
    ------
    UserError
        No layer was quantized, and activations the layers read had no range for being zero on every sample
        (the data's doing, not another model's ranges).
    """
    from .qdq_writer import ZERO_RANGE

    if not zero or (report is not None and report.quantized_layers):
        return
    zeros = list(zero) if report is None else list(dict.fromkeys(
        s.tensor for s in report.skipped if s.tensor in zero or s.reason == ZERO_RANGE))
    if not zeros:
        return
    shown = ", ".join(zeros[:8]) + (f" and {len(zeros) - 8} more" if len(zeros) > 8 else "")
    which = "the model's tensors" if report is None else "the tensors the layers read"
    raise UserError(f"No layer can be quantized: {which} ({shown}) were zero on every calibration sample.",
                    "A range is the largest magnitude a tensor takes on the calibration data; a tensor that is always "
                    "zero has none, so no scale can be computed and every layer stays float. Nothing was written.",
                    "Calibrate on data that exercises the model (real samples, not blank or all-zero inputs), or "
                    "keep the model in FP16.")
