"""Write an explicitly quantized (Q/DQ) ONNX model from the toolkit's ranges.

:func:`export_qdq` (``trtwidgets.export_qdq``) takes a float ONNX model and a
:class:`~trtwidgets.core.calibration.calibration.Calibration` (or the path of a saved one, or
``amax`` per tensor); :func:`build_qdq` takes a :class:`~.spec.QdqSpec` (the amax, the layers to
run in INT8 and the :class:`~.options.QdqOptions`). The export writes:

* **activations**: ``QuantizeLinear -> DequantizeLinear`` per tensor, symmetric: INT8
  ``scale = amax / 127``; FP8 E4M3 ``scale = amax / 448`` (opset >= 19); zero point 0;
* **weights**: per-channel symmetric, stored quantized (an int8 / fp8 initializer, then
  ``DequantizeLinear`` with ``axis``: Conv 0, ConvTranspose 1, Gemm 0 if ``transB`` else 1, MatMul
  the last); ``scale_c = max|W_c| / 127``; FP8 weights one scale per tensor (``max|W| / 448``), as
  TensorRT's FP8 kernels take. Weights may be initializers or ``Constant`` nodes.

Placement (which tensors) is :mod:`.placement`. What TensorRT needs besides:

* opset >= 13 for per-channel ``axis`` (>= 19 for FP8): older models are upgraded with
  ``onnx.version_converter``;
* a Conv whose weights come from a DequantizeLinear carries ``kernel_shape`` (TensorRT 8.6's
  parser rejects it otherwise);
* BatchNormalization is left alone: TensorRT folds it into the convolution.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Optional, Tuple, Union

import onnx

from ..common.atomic import write_bytes_atomic
from ..common.write_rule import refuse_inputs
from ..common.paths import user_path
from .export_check import DEFAULT_MIN_COSINE, check_export, check_source_model, raise_if_failed
from ..model.load import as_loaded, as_model_proto
from ..model.onnx_graph import GraphIndex, default_opset
from ..model.trt_rewrites import apply_rewrites
from .export_report import QdqExport, QdqReport, QuantizedTensor, QuantizedWeight
from .qdq_writer import QdqWriter
from .weights import PRECISIONS, quantize_weight
from .float_part.convert import MIN_OPSET as HP_MIN_OPSET, convert_float_part, preferred_opset
from .options import QdqExportError, QdqOptions
from .placement import Placement, Skip, node_label, place_qdq
from .sibling_layers import RULE_TEXT as SIBLING_RULE_TEXT, applies_to as siblings_rule_applies, float_output_siblings
from .spec import QdqSpec
from .float_part.as_written import as_written

__all__ = ["PRECISIONS", "QdqExportError", "QdqOptions", "QdqSpec", "QuantizedTensor", "QuantizedWeight", "QdqReport",
           "QdqExport", "build_qdq", "export_qdq", "save_qdq_model", "quantize_weight",
           "unchecked_exports"]

_UNCHECKED = threading.local()


@contextmanager
def unchecked_exports(source: onnx.ModelProto, memo: Optional[dict] = None):
    """Within it, exports of ``source`` (this very object, in this thread) skip ``onnx.checker``.

    For a caller that checked ``source`` once and exports it many times without writing the
    results: the planner scores dozens of candidates, and the checker (on the source, on the
    copy, again after the float part's conversion) cost more than placing and writing the
    Q/DQ nodes (ViT-S: 1.1 of 1.7 s CPU per export). A model that is written is checked on
    saving (:func:`save_qdq_model`), and ONNX Runtime refuses a malformed one when scoring.
    ``memo``: a dict the caller keeps for its exports of ``source`` (and of nothing else): what depends on
    the source alone is computed once in it (weights' integers and scales, Myelin's MatMuls).
    """
    before = getattr(_UNCHECKED, "source", None), getattr(_UNCHECKED, "memo", None)
    _UNCHECKED.source, _UNCHECKED.memo = source, {} if memo is None else memo
    try:
        yield
    finally:
        _UNCHECKED.source, _UNCHECKED.memo = before


def _unchecked(source: onnx.ModelProto) -> bool:
    return getattr(_UNCHECKED, "source", None) is source


def _memo(source: onnx.ModelProto) -> Optional[dict]:
    """What exports of ``source`` share within :func:`unchecked_exports` (see :class:`.qdq_writer.QdqWriter`)."""
    return _UNCHECKED.memo if _unchecked(source) else None


# ---------------------------------------------------------------------------- helpers


def _upgrade(proto: onnx.ModelProto, target: int) -> onnx.ModelProto:
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(proto, target)
    except Exception as exc:
        raise QdqExportError(
            f"The model could not be converted from opset {default_opset(proto)} to {target}.",
            f"Per-channel Q/DQ needs opset 13 or later (FP8 needs 19); onnx.version_converter said: {exc}",
            f"Re-export the model at opset {target} or later from its framework.") from None
    return converted


# ---------------------------------------------------------------------------- export


def build_qdq(model, spec: QdqSpec) -> QdqExport:
    """Insert Q/DQ nodes into a copy of ``model`` as ``spec`` says; return it with a report.

    ``tw.export_qdq(model, cal)`` is the usual way in; this is what it (and the planner, and a
    plan's export) calls::

        ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16"), nodes={"conv1", "conv2"}))

    Parameters
    ----------
    model : onnx.ModelProto, LoadedModel or path
        The float model. It is not modified.
    spec : QdqSpec
        The amax per activation tensor, the weighted layers to run in INT8 (None: every layer the
        placement rules allow) and the options. Tensors the placement wants but whose amax is 0 or
        missing stay float and are listed in the report.

    Returns
    -------
    QdqExport
        Its report records every value written or changed: per activation its amax, scale as the
        model holds it and zero point; per weight its scales, rounding error and what the float
        part's conversion changed.

    Raises
    ------
    QdqExportError
        For an opset too low, a model that already holds Q/DQ nodes, or a failed opset conversion.
    QdqExclusionError
        For exclusions that match nothing, or a node set naming layers the model does not have.
    """
    if not isinstance(spec, QdqSpec):
        raise QdqExportError(f"build_qdq takes a QdqSpec, not a {type(spec).__name__}.",
                             "What to quantize is one value: the amax, the layers to run in INT8 and the options.",
                             "Pass QdqSpec(amax, QdqOptions(...)) or QdqSpec.from_calibration(cal).")
    opts = spec.options
    source = as_model_proto(model)
    unchecked = _unchecked(source)
    proto, hp, opset_from, target, rewritten = _prepared(source, opts, unchecked)
    # The node set is checked by placement against the copy at its target opset: the labels a plan holds are
    # those of an export's report (a copy at that opset), and its converter may rename what an unnamed node writes.
    placement: Placement = place_qdq(proto, nodes=spec.nodes, exclude=opts.exclude, exclude_op_types=opts.exclude_op_types,
                             skip_matrix_vector=opts.skip_matrix_vector,
                             keep_float_output_grouped_convs=opts.keep_float_output_grouped_convs,
                             dense_int8=opts.dense_int8, trt_version=opts.trt_version, choices=spec.choices)
    writer = QdqWriter(proto, opts.precision, _memo(source))
    myelin = writer.myelin_weight_layers(placement, opts.trt_version)  # before any input is rewired: inference sees it
    activations, done_nodes = writer.quantize_activations(placement, spec.amax, spec.zero)
    per_channel = opts.weights_per_channel if opts.weights_per_channel is not None else opts.precision == "int8"
    weights, quantized_layers = writer.quantize_weights(placement, done_nodes, per_channel, myelin)
    writer.finish()
    if opts.precision == "int8" and siblings_rule_applies(opts.trt_version):
        groups = float_output_siblings(proto)
        if groups:  # placement rule 12: written, found unbuildable for TensorRT 8.x, placed again without them
            return _siblings_kept_float(model, spec, groups)
    proto, hp_report, float32_model = _checked(proto, hp, opts.keep_fp32, placement.patterns, unchecked, _memo(source))
    if hp_report is not None:
        written = as_written(activations, weights, float32_model, proto, hp_report, GraphIndex(source.graph).constant)
        activations, weights = list(written[0]), list(written[1])
    report = QdqReport(precision=opts.precision, opset_from=opset_from, opset_to=target, high_precision=hp_report,
                       activations=tuple(activations), weights=tuple(weights), skipped=tuple(writer.skipped),
                       patterns=placement.patterns, excluded=placement.excluded,
                       quantized_layers=tuple(dict.fromkeys(quantized_layers)),
                       warnings=tuple(placement.warnings), ranges=spec.source,
                       clipped=tuple((a.tensor, spec.clipping[a.tensor]) for a in activations
                                     if a.tensor in spec.clipping),
                       rewrites=rewritten.changes)
    return QdqExport(model=proto, report=report, float32_model=float32_model)


def _siblings_kept_float(model, spec: QdqSpec, groups) -> QdqExport:
    """The export again with rule 12's sibling convolutions kept float; the report says which and why."""
    opts = spec.options
    if spec.nodes is not None:
        again = dataclasses.replace(spec, nodes=spec.nodes - {label for g in groups for label in g.layers})
    else:
        keys = tuple(re.escape(key) for g in groups for key in g.keys)
        again = dataclasses.replace(spec, options=opts.replace(exclude=tuple(opts.exclude) + keys))
    result = build_qdq(model, again)
    why = {label: SIBLING_RULE_TEXT.format(others=", ".join(x for x in g.layers if x != label), tensor=g.tensor)
           for g in groups for label in g.layers}
    skipped = tuple(Skip(s.node_label, s.op_type, why[s.node_label], s.tensor, 12) if s.node_label in why else s
                    for s in result.report.skipped)
    warnings = tuple(result.report.warnings) + tuple(
        f"{len(g.layers)} INT8 convolutions on {g.tensor} ({', '.join(g.layers)}) would all write float, which "
        "TensorRT 8.6 cannot build (chooseHigherPrecision): kept float (placement rule 12)" for g in groups)
    return dataclasses.replace(result, report=dataclasses.replace(result.report, skipped=skipped, warnings=warnings))


def _refuse_unreadable_scales(dtype: str, trt_version: Optional[str]) -> None:
    """An FP16/BF16 float part writes its Q/DQ scales in that type, which TensorRT 8.x's parser refuses (lint's
    ``QDQ_SCALE_TYPE_NEEDS_NEWER_TRT``): say so before anything is computed, not after a build on the GPU."""
    from ..model.lint.codes import TRT_TEXT
    from ..model.trt_support import LOW_PRECISION_SCALES_SINCE
    from ..model.trt_version import installed_trt_version, parse_trt_version

    target = parse_trt_version(trt_version) if trt_version else installed_trt_version()
    if target is not None and target < LOW_PRECISION_SCALES_SINCE:
        raise QdqExportError(
            f"A float part in {dtype.upper()} cannot be built by TensorRT {target.short}.",
            f"Its Q/DQ scales would be {dtype.upper()}, and TensorRT {target.short}'s parser reads FP32 scales only "
            f"(TensorRT 8.6.0 stops with: {TRT_TEXT['scale_positive']}); TensorRT "
            f"{LOW_PRECISION_SCALES_SINCE.short} reads them.",
            "Leave high_precision at 'auto' (FP32 for TensorRT 8.x; the engine still runs the float part in FP16 "
            f"with the FP16 flag), or export for TensorRT {LOW_PRECISION_SCALES_SINCE.short} or newer.")


def _prepared(source: onnx.ModelProto, opts: QdqOptions, unchecked: bool):
    """``(copy at the target opset with the exact rewrites applied, float part's type, opset before, opset after,
    the rewrites)``: the graph placement sees. Exact rewrites come first (at the target opset, which a DFL head's
    rewrite needs), so placement sees the graph TensorRT will build and every node label a plan names is kept.

    Within :func:`unchecked_exports` the opset conversion and the rewrites are made once per source and target
    (they were most of an export's time: ViT-S 1.4 of 4 s) and each export takes a copy of that graph.
    """
    memo = _memo(source)
    key = ("prepared", opts.precision, opts.resolved_high_precision(), opts.opset, opts.trt_version, opts.rewrites)
    if memo is None or key not in memo:
        proto, hp, opset_from, target = _prepared_copy(source, opts, unchecked)
        made = (proto, hp, opset_from, target, apply_rewrites(proto, opts.rewrites))  # the copy itself where none
        if memo is None:
            return made[4].model, hp, opset_from, target, made[4]
        memo[key] = made
        # The float weights every export of this source shares: their low-precision copies are made once.
        memo["source_initializers"] = frozenset(t.name for t in made[4].model.graph.initializer)
    _, hp, opset_from, target, rewritten = memo[key]
    copy = onnx.ModelProto()
    copy.CopyFrom(rewritten.model)
    return copy, hp, opset_from, target, rewritten


def _prepared_copy(source: onnx.ModelProto, opts: QdqOptions,
                   unchecked: bool = False) -> Tuple[onnx.ModelProto, str, int, int]:
    """``(copy at the target opset, float part's type, opset before, opset after)``, or the reason why not."""
    if not unchecked:
        check_source_model(source)
    _, min_opset = PRECISIONS[opts.precision]
    existing = [n for n in source.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    if existing:
        raise QdqExportError(
            "The model already contains Q/DQ nodes "
            f"({len(existing)}, e.g. {node_label(existing[0])}).",
            "It is already explicitly quantized; adding a second set of Q/DQ would quantize twice.",
            "Export from the float model instead.")
    hp = opts.resolved_high_precision()
    if hp != "fp32":
        if not unchecked:
            _refuse_unreadable_scales(hp, opts.trt_version)
        min_opset = max(min_opset, HP_MIN_OPSET, preferred_opset(hp, opts.trt_version))
    opset_from = default_opset(source)
    target = max(opset_from, min_opset) if opts.opset is None else int(opts.opset)
    if target < min_opset:
        raise QdqExportError(f"Opset {target} is too low for {opts.precision.upper()} Q/DQ.",
                             "Per-channel DequantizeLinear needs opset 13; FP8 types need 19.",
                             f"Leave opset unset or use {min_opset} or later.")
    if target < opset_from:
        raise QdqExportError(f"Cannot export at opset {target}: the model is opset {opset_from}.",
                             "Downgrading an opset is not supported.", "Leave opset unset.")
    proto = copy.deepcopy(source)
    if target != opset_from:
        proto = _upgrade(proto, target)
    return proto, hp, opset_from, target


def _checked(proto: onnx.ModelProto, hp: str, keep_fp32, patterns, unchecked: bool = False, memo=None):
    """``(model, high-precision report, FP32 reference)``: checked by onnx.checker, its float part converted to ``hp``.

    The reference is the same Q/DQ model before the conversion (None when ``hp`` is fp32): the
    check before writing compares the two on the data. ``unchecked``: no onnx.checker (see
    :func:`unchecked_exports`).
    """
    try:
        if not unchecked:
            onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:  # pragma: no cover - would be an exporter bug
        raise QdqExportError("The exported Q/DQ model does not pass onnx.checker.", str(exc),
                             "Please report this with the model; exclude the failing node meanwhile.") from None
    if hp == "fp32":
        return proto, None, None
    float32_model = copy.deepcopy(proto)
    proto, hp_report = convert_float_part(proto, hp, keep_fp32=keep_fp32, patterns=patterns, memo=memo)
    try:
        if not unchecked:
            onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:  # pragma: no cover - would be a converter bug
        raise QdqExportError(f"The {hp.upper()} Q/DQ model does not pass onnx.checker.", str(exc),
                             "Export with high_precision='fp32' meanwhile, and please report the model.") from None
    return proto, hp_report, float32_model


def save_qdq_model(model: Union[QdqExport, onnx.ModelProto], path: Union[str, os.PathLike], *, feeds=None,
                   min_cosine: float = DEFAULT_MIN_COSINE, check: bool = True,
                   original: Optional[onnx.ModelProto] = None, on_check=None, refuse: bool = True) -> Path:
    """Check a model, then write it atomically (temporary file in the same folder, then rename).

    Returns the path written. An existing file is only replaced once the new one
    is complete. ``model`` is what :func:`build_qdq` returned (a :class:`QdqExport`), or a
    bare ``onnx.ModelProto``. The check (:mod:`.export_check`: onnx.checker, an ONNX Runtime
    load, and for an export with a low-precision float part and ``feeds`` its float part against
    the FP32 one at ``min_cosine``, every quantizer held, the scales as its report records them)
    raises :class:`~.export_check.ExportCheckError` and writes nothing when it fails;
    ``check=False`` skips it. ``original`` (the float model before Q/DQ) gives the end-to-end note
    its context. ``on_check``, a callable, gets the :class:`~.export_check.ExportCheck` before
    anything is written or raised (the command line prints its float-part line from it). ``refuse``
    False writes the model even when the check fails (``--write-failed``): the check is still run and
    handed to ``on_check``.
    """
    export = model if isinstance(model, QdqExport) else None
    proto = model.model if isinstance(model, QdqExport) else model
    path = user_path(path)
    if path.is_dir():
        raise QdqExportError(f"{path} is a directory.", "The output must be a file path.",
                             "Give a file name such as model.qdq.onnx.")
    if check:
        result = check_export(proto, reference=export.float32_model if export is not None else None,
                              conversion=export.report.high_precision if export is not None else None,
                              feeds=feeds, min_cosine=min_cosine, original=original)
        if on_check is not None:
            on_check(result)
        if refuse:
            raise_if_failed(result, path)
    return write_bytes_atomic(path, proto.SerializeToString())


def export_qdq(model, calibration, out_path: Union[str, os.PathLike, None] = None, *,
               options: Optional[QdqOptions] = None, held_back=None, metric=None, target=None) -> QdqExport:
    """Write the Q/DQ model of a calibration: ``trtwidgets.export_qdq(model, cal, "model.qdq.onnx")``.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto or path
    calibration : Calibration, path, or mapping
        The :class:`~trtwidgets.core.calibration.calibration.Calibration` from
        :func:`trtwidgets.calibrate` (its method, percentile and amax overrides: its
        :attr:`~trtwidgets.core.calibration.calibration.Calibration.amax`); the path of a saved
        one (``cal.save``, ``trtwidgets calibrate --out``) or of a statistics ``.npz`` (read as a
        calibration, entropy); or tensor -> amax as is (e.g. a calibration cache's
        ``read_cache(path).amax``). A calibration is checked once against ``model``: another
        model's is refused. Another method: ``cal.refit(method="max")``.
    out_path : path, optional
        Where to write the model (atomically); nothing is written when None.
    options : QdqOptions, optional
        How the model is written (precision, float part, exclusions ...); its defaults when None.
    held_back : folder, ``"demo"`` or sequence of feeds, optional
        Samples not used for calibration: the export is judged on them before anything is written (the
        one verdict, :func:`~..accuracy.verdict.evaluate`: by ``target``, default cosine >= 0.99 on the
        worst channel group of every output), and when it fails on accuracy the tensors (or the float
        part's nodes) to change are measured and named, verified by checking again (``result.advice``;
        :mod:`.export_advice`).
    metric : str or callable, optional
        The task metric of the check, as ``trtwidgets plan`` names it (``"top1-agreement"``,
        ``"mask-iou:0.5"``, ``"package.module:function"``) or ``f(reference, candidate) -> float``
        (higher is better); its own allowed drop below FP32. Short for ``target=Target.for_metric(metric)``.
    target : Target, optional
        What the check judges by (``tw.Target``; the planner's target is the same kind).

    Returns
    -------
    QdqExport
        Its ``report.ranges`` says where the ranges came from; with ``held_back`` its ``check`` (and,
        when that failed, its ``advice``).

    Raises
    ------
    ExportCheckError
        With ``out_path`` and ``held_back``: the check failed; nothing is written, and the message
        says which tensors to change and how.
    UserError
        No layer can be quantized because the tensors the layers read were zero on every calibration
        sample (:func:`~.spec.refuse_all_zero`); nothing is written.
    """
    from .range_sources import calibration_spec
    from .spec import refuse_all_zero

    loaded = as_loaded(model)
    check_source_model(loaded.proto)  # the model's own fault first, before its ranges are judged against it
    # Another model's calibration, and values that cannot be scales, are refused before anything is built.
    spec = calibration_spec(loaded, calibration, options)
    result = build_qdq(loaded, spec)
    refuse_all_zero(result.report, spec.zero)  # all-zero data is said as such, not as ranges that match nothing
    if held_back is not None:
        from .validate import check_target

        result = _held_back_checked(loaded, result, calibration, spec.options, held_back,
                                    check_target(target, metric))
        failures = result.check.failures if result.check is not None else ()
        if out_path is not None and failures:
            from .export_check import ExportCheckError

            raise ExportCheckError(
                f"{os.fspath(out_path)} was not written: the export fails its check on the held-back samples "
                f"({'; '.join(failures)}).",
                result.advice.summary(cli=False) if result.advice is not None else
                "The Q/DQ model would lose more accuracy than the check allows.",
                "Apply the changes named above (options.exclude, cal.with_override), export again, or plan the "
                "model (trtwidgets.plan) to search per layer; export_qdq without out_path returns the model anyway.")
    if out_path is not None:
        # As given: a path is an input the output must not replace.
        refuse_inputs(out_path, {"the model": model, "the calibration": calibration}, f"out_path {os.fspath(out_path)}")
        save_qdq_model(result, out_path)
    return result


def _held_back_checked(loaded, result: QdqExport, calibration, options: QdqOptions, held_back, target) -> QdqExport:
    """``result`` with its check on ``held_back`` and, when that failed on accuracy, the advice."""
    from .export_advice import advise_export
    from .held_back_check import HeldBackCheck, held_back_feeds

    feeds = held_back_feeds(loaded, held_back)
    check = HeldBackCheck(loaded, feeds, target, trt_version=options.trt_version, precision=options.precision)
    validation = check(result)
    advice = None
    if validation.failures and validation.accuracy_failed:
        if isinstance(calibration, (str, os.PathLike)):
            from ..calibration.calibration import Calibration

            calibration = Calibration.load(calibration)
        advice = advise_export(loaded, result, calibration, check.feeds, check.outcome, build_qdq, options,
                               float_check=check.float_part)
    return dataclasses.replace(result, check=validation, advice=advice)
