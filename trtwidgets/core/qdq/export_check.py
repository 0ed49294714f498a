"""Check an exported model before it is written: a model that fails is not written.

Three checks, cheapest first:

1. ``onnx.checker``, and its strict shape and type inference (``full_check``): a
   ``tensor(float16)`` where an op's schema takes ``tensor(float)`` fails there (where
   ONNX Runtime loads the model anyway, a strict-inference complaint is only noted);
2. an ONNX Runtime session on the CPU (imported lazily: the core runs without it,
   and then this check is skipped and said so). ONNX Runtime refusing the graph
   fails; a kernel its CPU provider lacks (``NOT_IMPLEMENTED``, e.g. BF16
   QuantizeLinear) is noted, not failed: the model is valid, TensorRT runs it;
3. with data and a reference (the same Q/DQ model with its float part in FP32),
   the model's outputs against the reference's, cosine per output, at
   ``min_cosine`` (0.998 by default: issue 21's target for the FP16 float part).

   In a Q/DQ model an FP16 float part also moves values that sit next to a rounding
   boundary of a QuantizeLinear by one step: that is INT8 rounding, not a broken
   conversion, and it grows with the depth of the model (the demo classifier: cosine
   0.9968 between the FP16 and FP32 float parts, while the FP32 Q/DQ model itself is at
   0.9956 against the float model). Given the ``original`` float model, an output below
   ``min_cosine`` still passes when its drift (1 - cosine) is at most
   ``QUANT_DRIFT_ALLOWANCE`` times the drift the quantization itself causes; a broken
   conversion (overflow to inf, NaN, a wrong op) drifts far beyond that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import onnx

from ..common.errors import UserError
from .options import QdqExportError

__all__ = ["DEFAULT_MIN_COSINE", "QUANT_DRIFT_ALLOWANCE", "ExportCheck", "ExportCheckError", "check_export", "raise_if_failed"]

#: The FP16 float part must match the FP32 one at least this well on the data (issue 21).
DEFAULT_MIN_COSINE = 0.998
#: An FP16 float part may drift from FP32 by this multiple of the quantization's own drift (see above).
QUANT_DRIFT_ALLOWANCE = 2.0
_PROTOBUF_LIMIT = 2 ** 31 - 1  # one serialized protobuf message


class ExportCheckError(UserError):
    """The exported model failed a check; it was not written."""


@dataclass(frozen=True)
class ExportCheck:
    """What :func:`check_export` found.

    Attributes
    ----------
    passed : bool
    failures : tuple of str
        One line per failed check (what failed and the tool's words).
    notes : tuple of str
        Checks skipped or limited, and why.
    cosines : dict of str to float
        Output -> cosine against the reference (empty without data).
    """

    passed: bool
    failures: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()
    cosines: Mapping[str, float] = None  # type: ignore[assignment]

    def to_dict(self) -> dict:
        return {"passed": self.passed, "failures": list(self.failures), "notes": list(self.notes),
                "cosines": dict(self.cosines or {})}


def _checker(model: onnx.ModelProto, full_check: bool) -> Optional[str]:
    try:
        onnx.checker.check_model(model, full_check=full_check)
    except Exception as exc:  # noqa: BLE001 - ValidationError, InferenceError: both mean an invalid model
        return f"onnx.checker: {str(exc).strip().splitlines()[0][:400]}"
    return None


def _session(model: onnx.ModelProto, notes: List[str]):
    """An ONNX Runtime CPU session (:mod:`..common.ort`), or (None, why it failed) / (None, None) when it cannot be tried.

    The graph is run as written (no ORT optimizations): ORT's rewrites of it (QLinearConcat...) take
    no FP16 scales, and the check is of the model, not of ORT's fusions.
    """
    from ..common import ort as common_ort

    if not common_ort.is_available():
        notes.append("onnxruntime is not installed: the model was not loaded in ONNX Runtime")
        return None, None
    try:
        return common_ort.open_session(model, optimization="disable", purpose="check the export"), None
    except UserError as err:
        text = " ".join(err.message.split())[:600]
        if "is not a registered function/op" in text:
            # A TensorRT plugin or other custom op: valid ONNX that ONNX Runtime cannot run; TensorRT can.
            notes.append(f"ONNX Runtime does not know a custom op of the model ({text}): it was not loaded there")
            return None, None
        if "NOT_IMPLEMENTED" in text or "has no kernel" in text:
            notes.append(f"ONNX Runtime's CPU provider has no kernel for part of the model ({text}): "
                         "it was not run on the CPU")
            return None, None
        return None, f"ONNX Runtime refused the model: {text}"


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return float("nan")
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def _compare(sess, reference: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]],
             notes: List[str], original: Optional[onnx.ModelProto] = None
             ) -> Tuple[Dict[str, float], Dict[str, float]]:
    """``(output -> cosine against the reference, output -> reference's cosine against the original)``."""
    ref_sess, why = _session(reference, notes)
    if ref_sess is None:
        notes.append(f"the reference could not run ({why}): no comparison" if why else "no comparison")
        return {}, {}
    orig_sess = _session(original, [])[0] if original is not None else None
    names = [o.name for o in sess.get_outputs()]
    got: Dict[str, list] = {n: [] for n in names}
    ref: Dict[str, list] = {n: [] for n in names}
    orig: Dict[str, list] = {n: [] for n in names}
    inputs = {i.name for i in sess.get_inputs()}
    for feed in feeds:
        feed = {k: v for k, v in feed.items() if k in inputs}
        for n, a, b in zip(names, sess.run(names, feed), ref_sess.run(names, feed)):
            got[n].append(np.ravel(a))
            ref[n].append(np.ravel(b))
        if orig_sess is not None:
            for n, c in zip(names, orig_sess.run(names, feed)):
                orig[n].append(np.ravel(c))
    cosines = {n: _cosine(np.concatenate(ref[n]), np.concatenate(got[n])) for n in names if got[n]}
    quant = {n: _cosine(np.concatenate(orig[n]), np.concatenate(ref[n])) for n in names if orig[n]}
    return cosines, quant


def _drift_failures(cosines: Mapping[str, float], quant: Mapping[str, float], min_cosine: float,
                    notes: List[str]) -> Optional[str]:
    """The failure line for outputs below ``min_cosine`` that INT8 rounding does not explain, or None."""
    low = {k: v for k, v in cosines.items() if not v >= min_cosine}
    explained = {k: v for k, v in low.items()
                 if k in quant and np.isfinite(v) and (1.0 - v) <= QUANT_DRIFT_ALLOWANCE * (1.0 - quant[k])}
    for k, v in sorted(explained.items()):
        notes.append(f"output {k}: cosine {v:.4f} against the FP32 float part is below {min_cosine}, but the "
                     f"quantization itself is at {quant[k]:.4f} against the float model: the difference is "
                     "INT8 rounding of values next to a step, not the float part's conversion")
    low = {k: v for k, v in low.items() if k not in explained}
    if not low:
        return None
    shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(low.items(), key=lambda kv: kv[1]))
    return f"the float part in low precision drifts from FP32: cosine {shown} < {min_cosine}"


def check_export(model: onnx.ModelProto, *, reference: Optional[onnx.ModelProto] = None,
                 feeds: Optional[Iterable[Mapping[str, np.ndarray]]] = None,
                 min_cosine: float = DEFAULT_MIN_COSINE,
                 original: Optional[onnx.ModelProto] = None) -> ExportCheck:
    """Check ``model`` (see the module docstring); nothing is written.

    Parameters
    ----------
    model : onnx.ModelProto
    reference : onnx.ModelProto, optional
        The same model with its float part in FP32; compared on ``feeds``.
    feeds : iterable of dict, optional
        Input name -> array, one dict per batch.
    min_cosine : float
        Lowest cosine per output against the reference.
    original : onnx.ModelProto, optional
        The float model before Q/DQ: with it, a drift that the quantization's own explains passes
        (see the module docstring).

    Returns
    -------
    ExportCheck
    """
    failures: List[str] = []
    notes: List[str] = []
    cosines: Dict[str, float] = {}
    if model.ByteSize() >= _PROTOBUF_LIMIT:
        notes.append("the model is over 2 GiB: it is written unchecked (onnx.checker and ONNX Runtime need a file)")
        return ExportCheck(passed=True, notes=tuple(notes), cosines={})
    bad = _checker(model, full_check=False)
    if bad:
        failures.append(bad)
    sess, why = _session(model, notes)
    if why:
        failures.append(why)
    strict = None if bad else _checker(model, full_check=True)
    if strict and sess is not None:
        # ONNX Runtime typed and loaded the graph: a strict-inference complaint alone does not refuse it.
        notes.append(f"strict type inference disagrees, but ONNX Runtime loads the model ({strict})")
    elif strict:
        failures.append(strict)
    if sess is not None and reference is not None and feeds is not None:
        try:
            cosines, quant = _compare(sess, reference, feeds, notes, original)
        except Exception as exc:  # noqa: BLE001 - a run-time failure (shape, type) is a failed check
            failures.append(f"ONNX Runtime could not run the model on the data: {str(exc).splitlines()[0][:400]}")
            quant = {}
        drift = _drift_failures(cosines, quant, min_cosine, notes)
        if drift:
            failures.append(drift)
    return ExportCheck(passed=not failures, failures=tuple(failures), notes=tuple(notes), cosines=cosines)


def raise_if_failed(check: ExportCheck, path) -> None:
    """Raise :class:`ExportCheckError` (what / why / fix) for a failed check."""
    if check.passed:
        return
    drift = any("drifts" in f for f in check.failures)
    fix = ("Keep the drifting part in FP32 (keep_fp32=[...] / --high-precision fp32), or lower --min-float-cosine "
           "if this drift is acceptable." if drift else
           "Export with --high-precision fp32 meanwhile, and please report the model (this is an exporter bug).")
    raise ExportCheckError(f"The exported model failed its check and was not written to {path}.",
                           "; ".join(check.failures), fix)


def check_source_model(source: onnx.ModelProto) -> None:
    """QdqExportError when the model itself fails onnx.checker: the Q/DQ copy would fail it the same way, and
    saying so about the copy ("please report this") would blame the exporter for the model's own fault."""
    try:
        onnx.checker.check_model(source)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QdqExportError("The model does not pass onnx.checker, so no Q/DQ model is made from it.",
                             f"onnx.checker.check_model says: {first} The model breaks the ONNX specification "
                             "(e.g. a graph input or output without a shape or type); a Q/DQ copy would break it too.",
                             "Re-export the model, or repair it (onnx-graphsurgeon, onnxsim) until onnx.checker "
                             "accepts it; `trtwidgets lint MODEL` lists it as ONNX_CHECKER_FAILED.") from None
    except ValueError:  # over 2 GiB in memory: the checker wants a path; the Q/DQ copy is checked on save
        return
