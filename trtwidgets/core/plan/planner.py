"""The quantization planner: which layers to quantize so that INT8 is faster than FP16 and accurate.

A Q/DQ export that quantizes everything the placement rules allow can be slower
than FP16 (small layers gain nothing in INT8 and every INT8/float border costs a
reformat) and can lose accuracy. :func:`plan` searches, on the CPU:

1. **Statistics once.** A :class:`~..calibration.recipe_step.Calibration` is fitted
   once (or the caller's is taken: its statistics, percentile and amax overrides)
   and every candidate reuses it.
2. **Ranges.** Each of the four range methods (entropy, percentile, MSE, max) is
   tried on the full placement; the best (by the target) is kept, then each of the
   most sensitive layers' inputs may switch to another method where that scores
   higher.
3. **Where INT8 pays.** With an implicit INT8+FP16 build of the model
   (``oracle``), exactly the layers TensorRT ran in INT8; without one, the layers
   the cost model (:mod:`.cost_model`) expects to be faster in INT8, both behind one
   interface (:class:`~.latency.LatencyModel`). Layers that do not pay stay in high
   precision, with that reason.
4. **Accuracy.** Each paying layer's cost is measured (that layer alone in INT8,
   ONNX Runtime against FP32 on held-back data); layers are taken by latency gain
   per unit of cost, and a bisection finds the longest such prefix that keeps the
   target (:mod:`.plan_search`).
5. **The pick.** The fastest candidate that meets the target, or FP16 when no INT8
   candidate is both faster and accurate: "FP16 is best here" is a real answer.
   Which candidate is better is defined once (:class:`~.judge.Judge`).

Each phase is a function over values; :func:`plan` runs them in order.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, TypeVar

import onnx

from ..calibration.fingerprint import fingerprint_of
from ..common.errors import UserError
from ..qdq.options import QdqOptions
from .accuracy_search import Candidates, Search, accuracy_search
from .judge import Judge
from .phases import (METHOD_ORDER, engine_shapes, evaluator, fit_calibration, latency_model, myelin_layers,
                     paying_layers, score_methods)
from .plan_export import PLANNER_PLACEMENT, export_plan, plan_options
from .plan_values import Candidate, Plan, PlanTarget

__all__ = ["plan", "PlanTarget", "Plan", "Candidate", "export_plan", "plan_options", "METHOD_ORDER"]

T = TypeVar("T")


def _loaded(model):
    from ..model.load import LoadedModel, load_model, summarize

    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, onnx.ModelProto):
        return LoadedModel(Path(model.graph.name or "model.onnx"), model, summarize(model))
    return load_model(model)


def _feeds(proto: onnx.ModelProto, data, held_back, holdout: float, max_samples: Optional[int]):
    """``(calibration feeds, held-back feeds)``."""
    from ..calibration.data import iter_feeds
    from ..model.load import summarize

    summary = summarize(proto)
    feeds = [dict(f) for f in iter_feeds(data, summary, batch_size=1, max_samples=max_samples)]
    if held_back is not None:
        held = [dict(f) for f in iter_feeds(held_back, summary, batch_size=1)]
        calib = feeds
    else:
        if len(feeds) < 2:
            raise UserError(f"The planner needs at least 2 samples; the data has {len(feeds)}.",
                            "Some samples calibrate, the rest (held back) measure accuracy.",
                            "Give more samples (32 or more is better), or held_back= separate data.")
        n_held = min(len(feeds) - 1, max(1, int(round(len(feeds) * holdout))))
        calib, held = feeds[:-n_held], feeds[-n_held:]
    if not held:
        raise UserError("The held-back data is empty.", "Accuracy is measured on samples not used to calibrate.",
                        "Give held_back data with at least one sample.")
    return calib, held


def _ranges_record(cal, per_method, best_method: str, amax: Mapping[str, float], described: str) -> dict:
    """How the ranges were chosen, for plan.json: the method, each method's accuracy, counts, every amax."""
    methods_count: Dict[str, int] = {}
    for tname, value in amax.items():
        m = next((mm for mm in per_method if per_method[mm][1].get(tname) == value), "tuned")
        methods_count[m] = methods_count.get(m, 0) + 1
    return {"method": best_method, "per_method": {m: per_method[m][0].to_dict() for m in per_method},
            "methods_used": methods_count, "amax": {k: float(v) for k, v in amax.items()},
            "statistics": described, "percentile": cal.percentile,
            "overrides": {k: float(v) for k, v in cal.overrides.items()}}


def plan(model, data, *, target: Optional[PlanTarget] = None, held_back=None, holdout: float = 0.25,
         options: Optional[QdqOptions] = None, trt_version: Optional[str] = None,
         high_precision: Optional[str] = None, dense_int8: Optional[bool] = None, gpu: str = "h100",
         batch_size: Optional[int] = None, shapes: Optional[Mapping[str, Sequence[int]]] = None, oracle=None,
         calibration=None, stats=None, max_samples: Optional[int] = None, max_ranked: int = 96,
         progress: bool = True, on_step: Optional[Callable[[str], None]] = None) -> Plan:
    """Search for the fastest Q/DQ quantization that meets an accuracy target (see the module docstring).

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The float model.
    data : anything :func:`~..calibration.data.iter_feeds` takes
        Samples; the last ``holdout`` fraction is held back for accuracy unless ``held_back``
        is given, the rest calibrates (unused with ``calibration`` or ``stats``).
    target : PlanTarget, optional
        Default: output cosine >= 0.99.
    options : QdqOptions, optional
        How candidates are exported (:class:`~trtwidgets.core.qdq.options.QdqOptions`; its
        defaults when None). The planner decides matrix-vector layers itself (rule 5 off).
    trt_version, high_precision, dense_int8 : optional
        Replace single fields of ``options`` (see :class:`~trtwidgets.core.qdq.options.QdqOptions`).
    gpu : str
        The cost model's GPU (:data:`~.cost_model.GPUS`), when there is no oracle.
    batch_size, shapes : optional
        The batch (default: the data's), or input name -> full shape (wins), that the engine
        will run at: latency is estimated there (e.g. a larger image than the samples').
    oracle : LatencyOracle, build folder or path, or LatencyModel, optional
        An implicit INT8+FP16 build of the same model (:mod:`.latency_oracle`), or a
        :class:`~.latency.LatencyModel` (e.g. measured) used as is.
    calibration : Calibration, optional
        From :func:`trtwidgets.calibrate`: its statistics (collection is skipped), percentile
        and amax overrides; its method is tried first.
    stats : ActivationStats, optional
        Bare statistics (the older form): fitted at ``options.percentile``, without overrides.
    max_ranked : int
        Rank at most this many layers by accuracy cost (the ones INT8 saves most on).
    progress : bool
        A progress bar per phase.
    on_step : callable, optional
        Called with a short text before each phase.

    Returns
    -------
    Plan

    Raises
    ------
    UserError
        Too few samples, a bad target, an oracle of another model.
    """
    t0 = time.perf_counter()
    say = on_step or (lambda text: None)  # the widget's status line
    opts = _planner_options(options, trt_version=trt_version, high_precision=high_precision, dense_int8=dense_int8)
    loaded = _loaded(model)
    say("reading data")
    calib, held = _feeds(loaded.proto, data, held_back, holdout, max_samples)
    say("collecting statistics" if calibration is None and stats is None else "reading the statistics given")
    cal, described = fit_calibration(loaded, calib, opts, calibration, stats, progress)
    seconds: Dict[str, float] = {"statistics": time.perf_counter() - t0}
    ev, target, notes = evaluator(loaded, held, target or PlanTarget(), opts)
    search = Search(ev, Judge(target), (), progress, say)
    per_method, best_method = _timed(seconds, "ranges", lambda: _choose_ranges(search, cal, described, notes))
    amax = dict(per_method[best_method][1])
    input_shapes = engine_shapes(held, batch_size, shapes)
    all_export = ev.export(amax)
    search = dataclasses.replace(search, layers=tuple(all_export.report.quantized_layers))
    latency, pays, kept_latency = _timed(seconds, "latency", lambda: _where_int8_pays(
        loaded.proto, search.layers, input_shapes, gpu, oracle, opts, notes))
    cands = Candidates(latency, search.judge)
    interrupted = _search(search, cands, all_export, best_method, notes, (lambda: accuracy_search(
        search, cands, amax, per_method, pays, kept_latency, latency, max_ranked, seconds, notes)) if pays else None)
    best, reason = search.judge.pick(cands.items)
    seconds["total"] = time.perf_counter() - t0
    return Plan(model=str(loaded.path), target=target, candidates=tuple(cands.items), recommended=best, reason=reason,
                ranges=_ranges_record(cal, per_method, best_method, amax, described),
                high_precision=opts.high_precision, trt_version=str(opts.trt_version or ""),
                input_shapes=input_shapes, seconds=seconds, notes=tuple(notes), interrupted=interrupted,
                placement={"dense_int8": bool(opts.dense_int8)}, options=opts.to_dict(),
                fingerprint=fingerprint_of(loaded).to_dict())


def _planner_options(options: Optional[QdqOptions], **choices) -> QdqOptions:
    """``options`` with ``choices`` (None: unset), the planner's own placement and the float part's type resolved."""
    opts = (options or QdqOptions()).replace(**choices, **PLANNER_PLACEMENT)
    return opts.replace(high_precision=opts.resolved_high_precision())


def _timed(seconds: Dict[str, float], phase: str, run: Callable[[], T]) -> T:
    t = time.perf_counter()
    out = run()
    seconds[phase] = time.perf_counter() - t
    return out


def _choose_ranges(search: Search, cal, described: str, notes: List[str]):
    """``(per method: (accuracy, amax), the best method)``, with a note saying where the ranges came from."""
    search.say("choosing range methods")
    per_method, best = score_methods(search.ev, cal, search.judge, search.progress)
    notes.append(f"ranges: {described}; the search compared {', '.join(per_method)} and kept {best}")
    return per_method, best


def _search(search: Search, cands: Candidates, all_export, best_method: str, notes: List[str],
            accuracy: Optional[Callable[[], None]]) -> bool:
    """The candidates: FP16, INT8 everywhere, then the accuracy search (None: INT8 pays nowhere).

    True when interrupted (Ctrl-C): the candidates measured so far stay.
    """
    try:
        _first_candidates(search, cands, all_export, best_method, notes)
        if accuracy is not None:
            accuracy()
        else:
            notes.append("no layer is expected to be faster in INT8 at this shape"
                         + (" (TensorRT's implicit INT8 build chose no INT8 layer)"
                            if cands.latency.kind == "oracle" else ""))
    except KeyboardInterrupt:
        # Keep what the search measured: the candidates so far are a plan, marked as cut short.
        if not cands.items:
            raise
        notes.append(f"interrupted: the plan holds the {len(cands.items)} candidates measured before the interrupt")
        return True
    return False


def _where_int8_pays(proto: onnx.ModelProto, layers: Sequence[str], input_shapes, gpu: str, oracle,
                     opts: QdqOptions, notes: List[str]):
    """``(latency model, paying layers, [(layer, why not)])``, with notes on what the estimate cannot see."""
    myelin = myelin_layers(proto, layers, opts.trt_version)
    if myelin:
        from ..qdq.myelin import MYELIN_REASON

        notes.append(f"{len(myelin)} batched MatMuls kept in high precision: {MYELIN_REASON}")
    latency = latency_model(proto, input_shapes, gpu, oracle, myelin)
    pays, kept_latency = paying_layers(layers, latency)
    if latency.kind == "estimate" and any(n not in getattr(latency, "costs", layers) for n in layers):
        notes.append("some layers' shapes are unknown to shape inference; their latency is not estimated")
    if latency.kind == "estimate":
        notes.append(f"latency is an estimate (cost model of an {gpu.upper()}); give an implicit INT8 build "
                     "(oracle) or build the pick to measure it")
    return latency, pays, kept_latency


def _first_candidates(search: Search, cands: Candidates, all_export, best_method: str, notes: List[str]) -> None:
    """FP16 and INT8 everywhere the placement rules allow: the two ends of the trade-off."""
    search.say("scoring FP16 and full INT8")
    ev = search.ev
    cands.add("FP16 (no INT8)", (), (), ev.score_fp16())
    if ev.high_precision != ev.eval_dtype:
        notes.append("BF16 is evaluated as FP32 in ONNX Runtime (no BF16 kernels on the CPU)")
    layers = search.layers
    cands.add(f"INT8 everywhere the rules allow ({best_method})", layers,
              tuple((sk.node_label, sk.reason) for sk in all_export.report.skipped
                    if sk.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") and sk.node_label not in layers),
              ev.score_model(all_export.model))


