"""The Q/DQ export's choices as one value, with one set of defaults.

The command line (``trtwidgets export-qdq``, ``trtwidgets plan``), the App's Plan
step, the planner and the Python API (:func:`trtwidgets.export_qdq`) each build a
:class:`QdqOptions` from their own inputs and hand it on, so a default (say, dense
INT8 regions) is decided here once instead of in every signature on the way.
A plan records the options it scored its candidates with, so its pick is exported
the same way later (:func:`trtwidgets.core.plan.planner.export_plan`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from ..common.errors import UserError
from .float_part.convert import HIGH_PRECISIONS, default_high_precision
from .weights import PRECISIONS
from ..model.trt_rewrites import DEFAULT_REWRITES, REWRITES

__all__ = ["QdqOptions", "QdqExportError", "resolve_high_precision"]

#: Options of older versions that now belong to the Calibration (read and dropped, see :meth:`QdqOptions.from_dict`).
_MOVED_TO_CALIBRATION = ("method", "percentile")


class QdqExportError(UserError):
    """The model, the ranges or the options cannot be turned into a Q/DQ model."""


def _names(value: Any) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class QdqOptions:
    """How a Q/DQ model is written from a model and its ranges.

    The ranges are not among them: the range method, percentile and amax overrides belong to the
    :class:`~trtwidgets.core.calibration.calibration.Calibration` the export is given.

    Attributes
    ----------
    precision : {"int8", "fp8"}
        FP8 (E4M3) needs opset 19 and TensorRT 10 or later on Hopper/Ada GPUs.
    dense_int8 : bool
        Placement rule 8 (:func:`~.placement.place_qdq`): quantize INT8 regions the way an
        implicit INT8 engine runs them (depthwise convs with their output, gates in INT8,
        every point-wise reader of a quantized tensor reading it quantized), so a region
        has no reformat layer inside. On by default everywhere.
    high_precision : {"auto", "fp32", "fp16", "bf16"}
        The type of the non-quantized part; ``"auto"`` decides by ``trt_version``
        (:func:`resolve_high_precision`).
    trt_version : str, optional
        The target TensorRT; None: the installed one, else TensorRT 10 and 11 (an FP16 float part).
    exclude, exclude_op_types : tuple of str
        Nodes (names, output names or regular expressions) and op types kept in high precision.
    weights_per_channel : bool, optional
        Per-output-channel weight scales; default: per channel for INT8, per tensor for FP8.
    skip_matrix_vector : bool
        Placement rule 5: keep matrix-vector layers in high precision (the planner turns it
        off: it decides with the batch it plans for).
    keep_float_output_grouped_convs : bool
        Placement rule 6 (dense INT8 wins over it inside quantized regions).
    keep_fp32 : tuple of str
        Node names, output names or op types whose float math stays FP32.
    opset : int, optional
        Target opset; default: the model's, raised to what the precision needs.
    rewrites : tuple of str
        Exact graph rewrites applied before placement (:mod:`trtwidgets.core.model.trt_rewrites`):
        ``"split_concat"`` (a Concat of all of a Split's outputs reads the Split's input) and
        ``"expectation_head"`` (a DFL head's softmax on its convolution's layout). Both by default
        (docs/placement.md, "Graph rewrites"); ``()`` writes the graph as it is.
    """

    precision: str = "int8"
    dense_int8: bool = True
    high_precision: str = "auto"
    trt_version: Optional[str] = None
    exclude: Tuple[str, ...] = ()
    exclude_op_types: Tuple[str, ...] = ()
    weights_per_channel: Optional[bool] = None
    skip_matrix_vector: bool = True
    keep_float_output_grouped_convs: bool = True
    keep_fp32: Tuple[str, ...] = ()
    opset: Optional[int] = None
    rewrites: Tuple[str, ...] = DEFAULT_REWRITES

    def __post_init__(self):
        for name in ("exclude", "exclude_op_types", "keep_fp32", "rewrites"):
            object.__setattr__(self, name, _names(getattr(self, name)))
        unknown = [r for r in self.rewrites if r not in REWRITES]
        if unknown:
            raise QdqExportError(f"Unknown graph rewrite(s): {', '.join(unknown)}.",
                                 "Rewrites are: " + "; ".join(f"{k}: {v}" for k, v in REWRITES.items()) + ".",
                                 "Name some of them, or rewrites=() for the graph as it is.")
        if self.trt_version is not None:
            object.__setattr__(self, "trt_version", str(self.trt_version) or None)
        if self.precision not in PRECISIONS:
            raise QdqExportError(f"Unknown precision {self.precision!r}.", f"Choose one of {', '.join(PRECISIONS)}.",
                            "Use precision='int8' (TensorRT 8.6+) or 'fp8' (TensorRT 10+, Hopper/Ada).")
        if self.high_precision != "auto" and self.high_precision not in HIGH_PRECISIONS:
            raise QdqExportError(f"Unknown high-precision dtype {self.high_precision!r}.",
                            f"Choose auto or one of {', '.join(HIGH_PRECISIONS)}.",
                            "auto picks FP32 for TensorRT 8.x and FP16 for 10/11.")

    def replace(self, **changes: Any) -> "QdqOptions":
        """A copy with ``changes``; a change of None keeps the current value (an input left unset)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def resolved_high_precision(self) -> str:
        """The float part's type these options write (``"auto"`` decided by :attr:`trt_version`)."""
        return resolve_high_precision(self.high_precision, self.trt_version)

    def to_dict(self) -> dict:
        """Plain data (plan.json)."""
        out = dataclasses.asdict(self)
        for name in ("exclude", "exclude_op_types", "keep_fp32", "rewrites"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "QdqOptions":
        """Options from :meth:`to_dict`'s data; keys this version does not know are refused.

        ``method`` and ``percentile``, which older plan.json files hold among their options, are
        dropped: the ranges a plan was scored with are in the plan itself.

        Raises
        ------
        UserError
            A key that is not an option, or a value an option does not take.
        """
        doc = {k: v for k, v in doc.items() if k not in _MOVED_TO_CALIBRATION}
        # A plan written before the rewrites existed was scored on the graph as it was: export it that way.
        doc.setdefault("rewrites", ())
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise QdqExportError(f"Unknown Q/DQ options: {', '.join(unknown)}.",
                            f"The export knows {', '.join(sorted(known))}.",
                            "Remove them, or use the trtwidgets version that wrote them.")
        return cls(**dict(doc))


def resolve_high_precision(high_precision: str, trt_version: Optional[str] = None) -> str:
    """``"fp32"``, ``"fp16"`` or ``"bf16"``: ``"auto"`` means FP32 for TensorRT 8.x, FP16 for 10 and 11.

    ``trt_version`` None means the installed TensorRT; without one, TensorRT 10 and 11's FP16
    (:data:`~..model.trt_version.DEFAULT_TARGET`: export-qdq, the planner, the App and the API alike).

    Raises
    ------
    UserError
        An unknown dtype.
    """
    if high_precision == "auto":
        if trt_version is None:
            from ..model.trt_version import DEFAULT_TARGET, installed_trt_version

            trt_version = str(installed_trt_version() or DEFAULT_TARGET)
        return default_high_precision(trt_version)
    if high_precision not in HIGH_PRECISIONS:
        raise QdqExportError(f"Unknown high-precision dtype {high_precision!r}.",
                        f"Choose auto or one of {', '.join(HIGH_PRECISIONS)}.",
                        "auto picks FP32 for TensorRT 8.x and FP16 for 10/11.")
    return high_precision

