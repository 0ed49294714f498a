"""Check an exported model before it is written: a model that fails is not written.

Three checks, cheapest first:

1. ``onnx.checker`` with strict shape and type inference (``full_check``); where ONNX Runtime
   loads the model anyway, a strict-inference complaint is only noted;
2. an ONNX Runtime CPU session (skipped, and said so, without onnxruntime): a refused graph fails;
   a kernel the CPU provider lacks (``NOT_IMPLEMENTED``) is noted, not failed;
3. with data and a reference (the same Q/DQ model with an FP32 float part), the float part in its
   low precision against FP32, at ``min_cosine`` (0.998 by default). Both sides quantize alike: the
   reference takes the export's own scales and weight integers (:mod:`.float_part.same_quantization`; values the
   conversion wrote anew are in :attr:`~.float_part.convert.FloatPartReport.qdq_values`).

   Every quantizer is held (:mod:`.float_part.held_quantizers`): each QuantizeLinear outputs the reference's
   integers on both sides, so each float span is compared from the same inputs, at the outputs and at
   every quantizer's input; the model's own quantizers must write the reference's integers too
   (one-step flips next to a boundary aside). End-to-end cosines are reported (``end_to_end``) but
   fail the check only when not finite: the quantizers' steps hide the float part's error there
   (evidence: docs/evidence.md, "export_check").

   The low-precision side is :func:`.float_part.storage.storage_emulation`: every tensor rounded
   to FP16 where it is written, as TensorRT's FP16 kernels store it (ONNX Runtime's CPU provider
   computes most FP16 ops in FP32), so an overflow or a value lost in FP16 anywhere fails the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import onnx

from ..common.errors import UserError
from .float_part.held_quantizers import Cosine, HeldComparison, compare_held
from .float_part.report import FloatPartReport
from .float_part.storage import NotEmulable, storage_emulation
from .options import QdqExportError
from .float_part.same_quantization import carrying_scales

__all__ = ["DEFAULT_MIN_COSINE", "ExportCheck", "ExportCheckError", "check_export", "raise_if_failed"]

#: The FP16 float part must match the FP32 one at least this well on the data (issue 21).
DEFAULT_MIN_COSINE = 0.998
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
        Output -> cosine against the reference, every quantizer held at the reference's integers: the float
        part's own drift, which ``min_cosine`` gates (empty without data).
    end_to_end : dict of str to float
        Output -> cosine against the reference, each quantizer fed by the model's own float part (reported;
        only a non-finite one fails).
    quantizers : dict
        What holding the quantizers measured: how many were held, the lowest cosine of their inputs and of
        the integers they write, and how many quantized values moved by one step or more.
    """

    passed: bool
    failures: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()
    cosines: Mapping[str, float] = None  # type: ignore[assignment]
    end_to_end: Mapping[str, float] = None  # type: ignore[assignment]
    quantizers: Mapping[str, object] = None  # type: ignore[assignment]

    def to_dict(self) -> dict:
        return {"passed": self.passed, "failures": list(self.failures), "notes": list(self.notes),
                "cosines": dict(self.cosines or {}), "end_to_end": dict(self.end_to_end or {}),
                "quantizers": dict(self.quantizers or {})}

    def summary(self) -> str:
        """One line on the float part (empty when it was not compared on data)."""
        if not self.cosines:
            return ""
        q = self.quantizers or {}
        held = f", {q['held']} quantizers held" if q.get("held") else ""
        line = f"float part against FP32{held}: cosine >= {_low(self.cosines)} (outputs)"
        if q.get("inputs_min_cosine") is not None:
            line += f", >= {q['inputs_min_cosine']:.6f} (quantizer inputs)"
        if self.end_to_end:
            line += f"; end to end {_low(self.end_to_end)} (INT8 steps carried through the model, not gated)"
        return line


def _checker(model: onnx.ModelProto, full_check: bool) -> Optional[str]:
    try:
        onnx.checker.check_model(model, full_check=full_check)
    except Exception as exc:
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


def _compare(sess, reference: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]],
             notes: List[str], original: Optional[onnx.ModelProto] = None
             ) -> Tuple[Dict[str, float], Dict[str, float]]:
    """End to end: ``(output -> cosine against the reference, output -> reference's cosine against the original)``."""
    ref_sess, why = _session(reference, notes)
    if ref_sess is None:
        notes.append(f"the reference could not run ({why}): no comparison" if why else "no comparison")
        return {}, {}
    orig_sess = _session(original, [])[0] if original is not None else None
    names = [o.name for o in sess.get_outputs()]
    got = {n: Cosine() for n in names}
    quant = {n: Cosine() for n in names}
    inputs = {i.name for i in sess.get_inputs()}
    for feed in feeds:
        feed = {k: v for k, v in feed.items() if k in inputs}
        ref = ref_sess.run(names, feed)
        for n, a, b in zip(names, sess.run(names, feed), ref):
            got[n].add(b, a)
        if orig_sess is not None:
            for n, c, b in zip(names, orig_sess.run(names, feed), ref):
                quant[n].add(c, b)
    return ({n: c.value for n, c in got.items() if c.n or not c.finite},
            {n: c.value for n, c in quant.items() if c.n or not c.finite})


def _held(model: onnx.ModelProto, reference: onnx.ModelProto, feeds, notes: List[str]) -> HeldComparison:
    """:func:`.float_part.held_quantizers.compare_held` of the model's low-precision storage emulation (the model itself where
    it cannot be emulated, with a note) against the reference."""
    from ..common import ort as common_ort

    try:
        emulated, rounded, low = storage_emulation(model)
        side = (f"the float part as TensorRT's {low} kernels hold it ({rounded} tensors rounded to {low} where "
                "written)" if rounded else "the float part")
    except NotEmulable as exc:
        emulated, side = model, f"the float part as ONNX Runtime runs it ({exc}: not emulated)"
    held = compare_held(emulated, reference, feeds, lambda m: common_ort.open_session(
        m, optimization="disable", purpose="check the export's float part"))
    if held.held:
        moved = held.moved / held.values if held.values else 0.0
        notes.append(f"{side}, every quantizer held at the FP32 reference's integers ({held.held} held): outputs "
                     f"at cosine >= {_low(held.outputs)}, the quantizers' inputs at >= {_low(held.quantizer_inputs)}; "
                     f"its own quantizers moved {moved:.2%} of {held.values} values by one step, "
                     f"{held.far} by more")
    else:
        notes.append(f"{side} against the FP32 reference: no quantizer to hold")
    for why in held.not_held[:3]:
        notes.append(f"quantizer not held: {why}")
    return held


def _num(cosines: Mapping[str, float]) -> Optional[float]:
    """The lowest cosine (NaN when one is NaN), None when there is none."""
    if not cosines:
        return None
    values = list(cosines.values())
    return float("nan") if any(v != v for v in values) else min(values)


def _low(cosines: Mapping[str, float]) -> str:
    low = _num(cosines)
    return "n/a" if low is None else f"{low:.6f}"


def _gate(held: HeldComparison, end_to_end: Mapping[str, float], quant: Mapping[str, float], min_cosine: float,
          notes: List[str]) -> List[str]:
    """The failure lines of the comparison: any span of the float part below ``min_cosine``, or non-finite outputs."""
    failures = []

    def below(cosines: Mapping[str, float], label) -> str:
        low = sorted(((v, k) for k, v in cosines.items() if not v >= min_cosine), key=lambda t: (t[0] == t[0], t[0]))
        shown = ", ".join(f"{label(k)} {v:.4f}" for v, k in low[:5])
        return shown + (f" (+{len(low) - 5} more)" if len(low) > 5 else "")

    for cosines, label in ((held.outputs, lambda k: f"output {k}"),
                           (held.quantizer_inputs, lambda k: f"the input of quantizer {k}")):
        shown = below(cosines, label)
        if shown:
            failures.append(f"the float part in low precision drifts from FP32 (every quantizer held at the FP32 "
                            f"reference's integers, which carries the export's Q/DQ scales and weights): cosine of "
                            f"{shown} < {min_cosine}")
    shown = below(held.quantizer_outputs, lambda k: f"quantizer {k}")
    if shown:
        failures.append(f"the exported quantizers write other integers than the FP32 reference's from the same "
                        f"inputs ({held.far} values more than one step away): cosine of {shown} < {min_cosine}")
    bad = [k for k, v in end_to_end.items() if not np.isfinite(v)]
    if bad:
        failures.append(f"the exported model's outputs are not finite where the FP32 reference's are compared: "
                        f"{', '.join(sorted(bad))}")
    if end_to_end:
        text = ", ".join(f"{k} {v:.4f}" for k, v in sorted(end_to_end.items(), key=lambda kv: kv[1])[:5])
        context = (f"; the quantization itself is at {_low(quant)} against the float model" if quant else "")
        notes.append(f"end to end (each quantizer fed by the low-precision float part): cosine {text}{context}: "
                     "values next to an INT8 step move by a step, and the model carries the step to its outputs; "
                     "this is not the float part's precision, which the held comparison measures")
    return failures


def check_export(model: onnx.ModelProto, *, reference: Optional[onnx.ModelProto] = None,
                 conversion: Optional[FloatPartReport] = None,
                 feeds: Optional[Iterable[Mapping[str, np.ndarray]]] = None,
                 min_cosine: float = DEFAULT_MIN_COSINE,
                 original: Optional[onnx.ModelProto] = None) -> ExportCheck:
    """Check ``model`` (see the module docstring); nothing is written.

    Parameters
    ----------
    model : onnx.ModelProto
    reference : onnx.ModelProto, optional
        The same Q/DQ model with its float part in FP32 (an export's ``float32_model``); compared on ``feeds``
        after taking ``model``'s Q/DQ scales and stored weights, widened to FP32 (a copy: the caller's
        reference is not changed).
    conversion : FloatPartReport, optional
        What the float part's conversion wrote anew (an export's ``report.high_precision``): which scales
        and weights the reference takes from ``model``. Without it the reference keeps its own (a note says so).
    feeds : iterable of dict, optional
        Input name -> array, one dict per batch.
    min_cosine : float
        Lowest cosine against the reference, every quantizer held: per output, per quantizer input, and of
        the integers each quantizer writes.
    original : onnx.ModelProto, optional
        The float model before Q/DQ: the end-to-end note then says how far the quantization itself moved
        the outputs (context for the end-to-end cosines; it excuses nothing).

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
    end_to_end: Dict[str, float] = {}
    held: Optional[HeldComparison] = None
    if sess is not None and reference is not None and feeds is not None:
        reference = carrying_scales(model, reference, conversion, notes)
        feeds = list(feeds)
        try:
            held = _held(model, reference, feeds, notes)
            cosines = dict(held.outputs)
            end_to_end, quant = _compare(sess, reference, feeds, notes, original)
        except Exception as exc:
            text = getattr(exc, "message", None) or str(exc)
            failures.append(f"ONNX Runtime could not run the check on the data: {text.splitlines()[0][:400]}")
        else:
            failures += _gate(held, end_to_end, quant, min_cosine, notes)
    quantizers = {} if held is None or not held.held else {
        "held": held.held, "inputs_min_cosine": _num(held.quantizer_inputs),
        "outputs_min_cosine": _num(held.quantizer_outputs), "values": held.values, "moved_one_step": held.moved - held.far,
        "moved_more": held.far}
    return ExportCheck(passed=not failures, failures=tuple(failures), notes=tuple(notes), cosines=cosines,
                       end_to_end=end_to_end, quantizers=quantizers)



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
