"""The quantization planner: which layers to quantize so that INT8 is faster than FP16 and accurate.

Quantizing everything the placement rules allow can be slower than FP16 (small layers gain nothing
in INT8, every INT8/float border costs a reformat) and can lose accuracy. :func:`plan` searches, on
the CPU, in phases (each a function over values, run in order):

1. **Statistics once**: one :class:`~..calibration.calibration.Calibration` (fitted, or the
   caller's), reused by every candidate.
2. **Ranges**: the calibration's method and each of the others is tried on the full placement; the
   best by the target is kept, then the most sensitive layers' inputs may switch method.
3. **Where INT8 pays**: the layers an implicit INT8+FP16 build ran in INT8 (``oracle``), or else
   those the cost model (:mod:`.cost_model`) expects to be faster, behind one interface
   (:class:`~.latency.LatencyModel`). The others stay in high precision, with that reason.
4. **Accuracy**: each paying layer's cost is measured alone (ONNX Runtime against FP32 on held-back
   data); layers are taken by latency gain per unit of cost, and a bisection finds the longest
   prefix that keeps the target (:mod:`.plan_search`).
5. **The pick**: the fastest candidate that meets the target, or FP16 when no INT8 candidate is both
   faster and accurate. Which candidate is better is defined once (:class:`~.judge.Judge`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar

import onnx

from ..calibration.fingerprint import fingerprint_of
from ..calibration.stats import zero_note
from ..common.cancel import cancel_scope, cancelled, check
from ..common.progress import ProgressArg, emit, split_progress, warn_deprecated
from ..model.onnx_graph import WEIGHTED_OPS
from ..qdq.options import QdqOptions
from ..qdq.spec import refuse_all_zero
from .accuracy_search import Candidates, Search, accuracy_search
from .check_file import check_key
from .engine_check import EngineCheck
from .float_candidates import add_float_candidates, island_note, price_island
from .judge import Judge
from .latency import LayerLatency
from .measured.repick import finish_latency, measurement_source
from .phases import (METHOD_ORDER, check_batch_fits, engine_shapes, evaluator, fit_calibration, latency_model, myelin_layers,
                     paying_layers, score_methods)
from .plan_artifact import Plan
from .plan_data import labels_for_held, read_plan_data
from .plan_export import PLANNER_PLACEMENT, export_plan
from .plan_eval import Evaluator
from .plan_values import Candidate, PlanAccuracy, PlanRanges, PlanTarget

__all__ = ["plan", "PlanTarget", "Plan", "Candidate", "export_plan", "METHOD_ORDER"]

T = TypeVar("T")


def _loaded(model):
    """The model loaded, and checked for what would fail only after calibrating: no inputs, a model onnx.checker
    rejects (its Q/DQ copies would fail the same check, blamed on the exporter)."""
    from ..calibration.model_inputs import require_inputs
    from ..model.load import as_loaded
    from ..qdq.export_check import check_source_model

    loaded = as_loaded(model)
    require_inputs(loaded)
    check_source_model(loaded.proto)
    return loaded


def _ranges_record(cal, per_method, best_method: str, amax: Mapping[str, float], described: str) -> PlanRanges:
    """How the ranges were chosen, for the plan: the method, each method's accuracy, counts, every amax."""
    methods_count: Dict[str, int] = {}
    for tname, value in amax.items():
        m = next((mm for mm in per_method if per_method[mm][1].get(tname) == value), "tuned")
        methods_count[m] = methods_count.get(m, 0) + 1
    return PlanRanges(amax={k: float(v) for k, v in amax.items()}, method=best_method,
                      percentile=cal.percentile, overrides={k: float(v) for k, v in cal.overrides.items()},
                      per_method={m: per_method[m][0] for m in per_method}, methods_used=methods_count,
                      statistics=described, zero=cal.zero_tensors)


def plan(model, data, *, target: Optional[PlanTarget] = None, calibration=None, options: Optional[QdqOptions] = None,
         held_back=None, holdout: float = 0.25, seed: int = 0, max_samples: Optional[int] = None, batch_axis=None,
         batch_size: Optional[int] = None, shapes: Optional[Mapping[str, Sequence[int]]] = None, gpu: str = "h100",
         oracle=None, max_ranked: int = 96, measure=False, progress: ProgressArg = True,
         on_step: Optional[Callable[[str], None]] = None,
         on_progress: Optional[Callable[[str, int, int], None]] = None, cancel=None, regions: bool = True,
         client=None) -> Plan:
    """Search for the fastest Q/DQ quantization that meets an accuracy target (see the module docstring).

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The float model.
    data : anything :func:`~..calibration.data.iter_feeds` takes
        Samples: a seeded random ``holdout`` fraction is held back for accuracy unless
        ``held_back`` is given, the rest calibrates (unused with ``calibration``, whose statistics'
        samples are left out of the held-back ones where others remain).
    target : PlanTarget, optional
        Default: cosine >= 0.99 on the worst channel group of every output
        (:mod:`.plan_accuracy`); a task metric: ``PlanTarget.for_metric("detection")`` (labels for
        ``"top1"``: one per sample of ``data`` or one per held-back sample).
    calibration : Calibration, optional
        From :func:`trtwidgets.calibrate` or ``Calibration.load``, as it is: its statistics (collection
        is skipped), percentile and every amax override; its method is tried first.
    options : QdqOptions, optional
        How candidates are exported (:class:`~trtwidgets.core.qdq.options.QdqOptions`: the float
        part's type, the target TensorRT, dense INT8 ...; its defaults when None). The planner
        decides matrix-vector layers itself (rule 5 off).
    held_back : optional
        Separate held-back samples (then all of ``data`` calibrates).
    holdout, seed : float, int
        The random split's share and seed.
    max_samples : int, optional
        Read at most this many samples of ``data``.
    batch_axis : int, str or mapping, optional
        The batch axis of every tensor (``1``), of none (``"none"``), or per tensor
        (``{"logits": 1}``, ``"logits:1,state:none"``); found from the model otherwise
        (:mod:`~..model.batch_axis`). A model without one runs sample by sample.
    batch_size, shapes : optional
        The batch (default: the data's), or input name -> full shape (wins), that the engine
        will run at: latency is estimated there (e.g. a larger image than the samples').
    gpu : str
        The cost model's GPU (:data:`~.cost_model.GPUS`), when there is no oracle.
    oracle : LatencyOracle, build folder or path, or LatencyModel, optional
        An implicit INT8+FP16 build of the same model (:mod:`.latency_oracle`), or a
        :class:`~.latency.LatencyModel` used as is.
    max_ranked : int
        Rank at most this many layers by accuracy cost (the ones INT8 saves most on).
    measure : bool or callable
        True: build and time FP16, implicit INT8 and the top candidates on this GPU and pick by
        measured time (:mod:`trtwidgets.trt.plan_measure`; TensorRT and a GPU are checked before
        the search). A callable ``f(plan, model) -> Plan`` is the measurement source. False: the
        latency is an estimate, said so in ``plan.estimate``.
    progress : bool or callable
        True: a progress bar per phase; False: silent; a callable receives a
        :class:`~..common.progress.ProgressEvent` as each phase starts (``kind="start"``) and after each unit
        of work of a phase that has several (``kind="step"``: range methods, layer costs), and no bar is drawn.
    on_step, on_progress : callable, optional
        Deprecated (``progress=`` takes a callable): ``on_step(text)`` before each phase, ``on_progress(phase,
        done, total)`` after each unit of work.
    cancel : threading.Event or anything with ``is_set()``, optional
        Set it (from another thread) to stop the search: the planner returns the Plan of what it
        found so far (at least FP16), ``interrupted=True``, not measured (:mod:`~..common.cancel`).
    regions : bool
        Search placement schemes per repeated pattern (:mod:`.regions`): each scheme of each pattern
        scored on the held-back samples, for the measurement to time on sub-models (``plan.regions``).
    client : distributed.Client, optional
        Collect the statistics and answer the search's questions on its Dask workers (:mod:`.remote_eval`):
        the same candidates and pick as in this process; a cancel cancels the questions in flight.

    Returns
    -------
    Plan

    Raises
    ------
    UserError
        Too few samples, a bad target, an oracle of another model.
    """
    t0 = time.perf_counter()
    source = measurement_source(measure)
    bars, say, on_progress = _progress_callbacks(progress, on_step, on_progress)
    opts = _planner_options(options)
    target = target if target is not None else PlanTarget()
    loaded = _loaded(model)
    if client is not None:
        from ..common.dask_cluster import check_versions

        check_versions(client)  # a client= made by the caller: its workers must run this trtwidgets too
    found = _Found(loaded, target, opts, t0, client=client)
    with cancel_scope(cancel):
        try:
            try:
                result = _search_plan(found, data, calibration, held_back, holdout, seed, max_samples, batch_axis,
                                      batch_size, shapes, gpu, oracle, max_ranked, bars, say, on_progress)
            finally:
                if found.ev is not None and found.ev.remote is not None:
                    found.ev.remote.close()
            if regions and not result.interrupted:
                say("scoring placement schemes per repeated pattern")
                result = _timed_regions(result, loaded)
        except KeyboardInterrupt:  # a Cancelled, or a phase that turned one into its own interrupt
            if not cancelled():
                raise  # Ctrl-C outside the search keeps its meaning: stop
            # A cancel keeps what was found: the candidates so far are a plan, marked as cut short.
            result = found.partial_plan()
    if source is not None and not result.interrupted:
        say("building and timing the candidates")
    return finish_latency(result, str(loaded.path), source)


def _timed_regions(result: Plan, loaded) -> Plan:
    """The plan with its region search (:func:`.regions.search.score_regions`), its time in ``seconds``."""
    from .regions.search import score_regions

    t = time.perf_counter()
    try:
        out = score_regions(result, loaded)
    except KeyboardInterrupt:
        if not cancelled():
            raise
        # A cancel during the schemes keeps the search's plan, without a region search.
        return dataclasses.replace(result, notes=tuple(result.notes) + ("cancelled while scoring region schemes: "
                                                                        "the plan has no region search",))
    return dataclasses.replace(out, seconds=dict(out.seconds, regions=time.perf_counter() - t))


def _progress_callbacks(progress: ProgressArg, on_step, on_progress):
    """``(bars, say, count)`` of ``plan``'s progress arguments: the search's own three (see :class:`~.phases.Progress`).

    A callable ``progress`` hears each phase start and each counted unit as a ProgressEvent; the deprecated
    ``on_step``/``on_progress`` still hear theirs (with a DeprecationWarning).
    """
    bars, sink = split_progress(progress)
    if on_step is not None or on_progress is not None:
        warn_deprecated("plan(on_step=..., on_progress=...) is deprecated: pass progress=f, a callable that "
                        "receives a ProgressEvent")

    def say(text: str) -> None:
        if on_step is not None:
            on_step(text)
        emit(sink, "start", text)

    def count(phase: str, done: int, total: int) -> None:
        if on_progress is not None:
            on_progress(phase, done, total)
        emit(sink, "step", phase, step=done, total=total)

    return bars, say, (count if sink is not None or on_progress is not None else None)


def _search_plan(found: "_Found", data, calibration, held_back, holdout, seed, max_samples, batch_axis, batch_size,
                 shapes, gpu, oracle, max_ranked, progress, say, on_progress) -> Plan:
    """The phases in order (see the module docstring); ``found`` holds what each found, for a cancel."""
    loaded, opts, seconds = found.loaded, found.opts, found.seconds
    say("reading data")
    from ..calibration.calibration import Calibration

    # Anything else than a Calibration is refused by fit_calibration, with what to pass instead.
    seen = calibration.stats if isinstance(calibration, Calibration) else None
    pdata = found.pdata = read_plan_data(loaded, data, held_back, holdout, seed, max_samples, batch_axis, seen)
    input_shapes = found.input_shapes = engine_shapes(pdata.held, batch_size, shapes, pdata.axes)
    check_batch_fits(loaded, input_shapes)  # before the search: a batch the model cannot run is refused
    check()
    say("collecting statistics" if calibration is None else "reading the statistics given")
    cal, described = fit_calibration(loaded, pdata.calib, calibration, progress, found.client)
    found.cal, found.described = cal, described
    if not cal.amax and cal.zero_tensors:  # not one range: all-zero data, said as such before any search
        refuse_all_zero(None, cal.zero_tensors)
    seconds["statistics"] = time.perf_counter() - found.t0
    check()
    held_labels = found.held_labels = labels_for_held(found.target.labels, pdata)
    # Scored with the float part resolved here (the installed TensorRT, else 10/11's FP16); the plan records the
    # options as asked, so a plan made here is exported for the TensorRT of the machine that builds it.
    ev, target, notes = evaluator(loaded, pdata.held, found.target, opts.replace(
        high_precision=opts.resolved_high_precision()), pdata.axes, pdata.run_batch(), held_labels)
    found.ev, found.target = ev, target
    if found.client is not None:  # the questions go to the workers; the model and reference travel once
        from .remote_eval import RemoteScores

        ev.remote = RemoteScores(found.client, ev)
    notes = found.notes = list(pdata.notes) + notes
    zeros = zero_note(cal.stats)
    if zeros:  # said as what it is (the plan's export then keeps them float and names them)
        notes.append(zeros)
    search = Search(ev, Judge(target), (), progress, say, on_progress)
    float_part = found.float_part = _timed(seconds, "fp16", ev.check_float_part)
    found.fp16_acc = float_part.verdict.accuracy
    notes.extend(float_part.notes)
    if float_part.fixed:  # the same float part under every INT8 candidate: the island stays FP32 in each
        ev.options = ev.options.replace(keep_fp32=tuple(ev.options.keep_fp32) + float_part.island)
        found.opts = opts = opts.replace(keep_fp32=ev.options.keep_fp32)
        notes.append(island_note(float_part))
    per_method, best_method = _timed(seconds, "ranges", lambda: _choose_ranges(search, cal, described, notes))
    amax = found.amax = dict(per_method[best_method][1])
    found.per_method, found.best_method = per_method, best_method
    all_export = ev.export(amax)
    refuse_all_zero(all_export.report, cal.zero_tensors)  # no layer to quantize for zero ranges: the data's doing
    search = dataclasses.replace(search, layers=tuple(all_export.report.quantized_layers))
    latency, pays, kept_latency = _timed(seconds, "latency", lambda: _where_int8_pays(
        loaded.proto, search.layers, input_shapes, gpu, oracle, opts, notes, ev.feeds[0], pdata.axes))
    cands = found.cands = Candidates(_supported(loaded.proto, latency, notes), search.judge)
    if float_part.fixed:  # every candidate but FP16 keeps the island FP32: priced once, added to each
        cands.island_us = price_island(loaded.proto, float_part.island, input_shapes, gpu, notes)
    interrupted = _search(search, cands, all_export, amax, best_method, notes, float_part, (lambda: accuracy_search(
        search, cands, amax, per_method, pays, kept_latency, latency, max_ranked, seconds, notes)) if pays else None)
    return found.plan(interrupted)


def _planner_options(options: Optional[QdqOptions]) -> QdqOptions:
    """``options`` with the planner's own placement, and the float part's type resolved for a named TensorRT.

    Without one the type stays ``auto``: the plan is exported for the TensorRT of the machine that builds it
    (an FP16 float part would not parse on a GPU machine with 8.6), and scored here as it resolves here.
    """
    opts = (options or QdqOptions()).replace(**PLANNER_PLACEMENT)
    return opts if opts.trt_version is None else opts.replace(high_precision=opts.resolved_high_precision())


def _timed(seconds: Dict[str, float], phase: str, run: Callable[[], T]) -> T:
    t = time.perf_counter()
    out = run()
    seconds[phase] = time.perf_counter() - t
    return out


def _choose_ranges(search: Search, cal, described: str, notes: List[str]):
    """``(per method: (accuracy, amax), the best method)``, with a note saying where the ranges came from."""
    search.say("choosing range methods")
    per_method, best = score_methods(search.ev, cal, search.judge, search.progress, search.on_progress)
    notes.append(f"ranges: {described}; the search compared {', '.join(per_method)} and kept {best}")
    return per_method, best


def _search(search: Search, cands: Candidates, all_export, amax, best_method: str, notes: List[str], float_part,
            accuracy: Optional[Callable[[], None]]) -> bool:
    """The candidates: FP16, INT8 everywhere, then the accuracy search (None: INT8 pays nowhere).

    True when interrupted (Ctrl-C, or a cancel): the candidates measured so far stay.
    """
    try:
        _first_candidates(search, cands, all_export, amax, best_method, notes, float_part)
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
        notes.append(f"interrupted: the plan holds the {len(cands.items)} candidates measured before the "
                     + ("cancel" if cancelled() else "interrupt"))
        return True
    return False


def _where_int8_pays(proto: onnx.ModelProto, layers: Sequence[str], input_shapes, gpu: str, oracle,
                     opts: QdqOptions, notes: List[str], feed=None, axes=None):
    """``(latency model, paying layers, [(layer, why not)])``, with notes on what the estimate cannot see.

    Shapes that shape inference leaves open are taken from a run of ``feed`` (one held-back sample;
    :mod:`.observed_shapes`), so the cost model prices every layer it can.
    """
    shapes = None
    if oracle is None or not hasattr(oracle, "kind"):
        from .observed_shapes import observed_shapes

        shapes, shape_notes = observed_shapes(proto, input_shapes, feed, axes.inputs if axes is not None else None)
        notes.extend(shape_notes)
    myelin = myelin_layers(proto, layers, opts.trt_version, shapes)  # the sample's ranks where inference has none
    if myelin:
        from ..qdq.myelin import MYELIN_REASON

        notes.append(f"{len(myelin)} batched MatMuls kept in high precision: {MYELIN_REASON}")
    latency = latency_model(proto, input_shapes, gpu, oracle, myelin, shapes)
    pays, kept_latency = paying_layers(layers, latency)
    if latency.kind == "estimate":
        notes.append(f"latency is an estimate (cost model of an {gpu.upper()}); give an implicit INT8 build "
                     "(oracle) or build the pick to measure it")
    return latency, pays, kept_latency


def _supported(proto: onnx.ModelProto, latency, notes: List[str]):
    """The latency candidates are shown with: the cost model's estimate only where the zoo supports it."""
    from .estimate_support import EstimateSupport, SupportedLatency, attention_matmuls
    from ..model.graph_patterns import node_label

    if latency.kind != "estimate":
        return latency
    costs = latency.costs if isinstance(latency, LayerLatency) else {}
    unpriced = tuple(node_label(n) for n in proto.graph.node if n.op_type in WEIGHTED_OPS and node_label(n) not in costs)
    if unpriced:
        notes.append(f"cannot estimate: {len(unpriced)} weighted layers' shapes are unknown even after a sample run "
                     f"(e.g. {unpriced[0]}); the latency of every candidate is left to measurement")
    return SupportedLatency(latency, EstimateSupport.from_record(), unpriced, attention_matmuls(proto))


def _first_candidates(search: Search, cands: Candidates, all_export, amax, best_method: str, notes: List[str],
                      float_part) -> None:
    """FP16 (and FP16 with its FP32 island, and FP16 of the rewritten graph) and INT8 everywhere the placement rules
    allow: the two ends."""
    search.say("scoring FP16 and full INT8")
    ev = search.ev
    add_float_candidates(cands, float_part, all_export.report.rewrites, notes)
    if ev.high_precision != ev.eval_dtype:
        notes.append("BF16 is evaluated as FP32 in ONNX Runtime (no BF16 kernels on the CPU)")
    layers = search.layers
    cands.add(f"INT8 everywhere the rules allow ({best_method})", layers,
              tuple((sk.node_label, sk.reason) for sk in all_export.report.skipped
                    if sk.op_type in WEIGHTED_OPS and sk.node_label not in layers),
              ev.score(amax, None, export=all_export)[0])  # remembered: "where it pays" may be the same model


def _cannot_estimate(found: Optional[Candidates], cands: Sequence[Candidate]) -> List[str]:
    """One note per reason the cost model gave no estimate, naming the candidates it holds for."""
    from .estimate_support import SupportedLatency

    why = found.latency.why_cannot if found is not None and isinstance(found.latency, SupportedLatency) else None
    if why is None:
        return []
    by_reason: Dict[str, List[str]] = {}
    for c in cands:
        text = why(c.quantized) if c.quantized else None
        if text:
            by_reason.setdefault(text, []).append(c.name)
    return [f"cannot estimate {', '.join(names)}: {text}; measure {'it' if len(names) == 1 else 'them'} "
            "(`trtwidgets plan measure PLAN_DIR`)" for text, names in by_reason.items()]


@dataclasses.dataclass
class _Found:
    """What the phases found so far: the plan when they finish, a partial plan when cancelled."""

    loaded: Any
    target: PlanTarget
    opts: QdqOptions
    t0: float
    seconds: Dict[str, float] = dataclasses.field(default_factory=dict)
    notes: List[str] = dataclasses.field(default_factory=list)
    pdata: Any = None
    input_shapes: Dict[str, tuple] = dataclasses.field(default_factory=dict)
    cal: Any = None
    described: str = ""
    held_labels: Any = None
    ev: Optional[Evaluator] = None
    fp16_acc: Optional[PlanAccuracy] = None
    float_part: Any = None
    per_method: Dict[str, Any] = dataclasses.field(default_factory=dict)
    best_method: str = ""
    amax: Dict[str, float] = dataclasses.field(default_factory=dict)
    cands: Optional[Candidates] = None
    client: Any = None

    def plan(self, interrupted: bool) -> Plan:
        """The Plan of the candidates found (the pick by the one judge)."""
        cands = list(self.cands.items) if self.cands is not None else []
        if not cands:  # cancelled before the first candidates: FP16, scored if it was, without a latency
            acc = self.fp16_acc or PlanAccuracy(math.nan, math.nan)
            cands = [Candidate("FP16 (no INT8)", (), (), acc, math.nan, math.nan, "estimate",
                               bool(self.fp16_acc is not None and Judge(self.target).meets(acc)))]
        best, reason = Judge(self.target).pick(cands)
        if self.fp16_acc is None and not self.cands:
            reason = "Cancelled before FP16 was scored: nothing is judged, so nothing is recommended; plan again."
        self.notes.extend(_cannot_estimate(self.cands, cands))
        self.seconds["total"] = time.perf_counter() - self.t0
        ev, pdata = self.ev, self.pdata
        if self.per_method:
            ranges = _ranges_record(self.cal, self.per_method, self.best_method, self.amax, self.described)
        else:  # cancelled before the methods were compared: the calibration's own ranges, if it was fitted
            ranges = PlanRanges(amax=self.cal.amax if self.cal is not None else {},
                                method=self.cal.method if self.cal is not None else "", statistics=self.described,
                                zero=self.cal.zero_tensors if self.cal is not None else ())
        fingerprint = fingerprint_of(self.loaded)
        split = pdata.split if pdata is not None else None
        return Plan(model=str(self.loaded.path), target=self.target, candidates=tuple(cands), recommended=best,
                    reason=reason, ranges=ranges, options=self.opts, input_shapes=self.input_shapes,
                    seconds=self.seconds, notes=tuple(self.notes), interrupted=interrupted, held_back=split,
                    batch_axes=pdata.axes if pdata is not None else None, fingerprint=fingerprint,
                    engine_check=(EngineCheck.of_plan(ev.feeds, ev.reference, pdata.axes, self.target,
                                                      ev.metric_reference, self.held_labels,
                                                      key=check_key(fingerprint, split))
                                  if ev is not None else None))

    def partial_plan(self) -> Plan:
        """The plan of what was found before a cancel (``interrupted=True``)."""
        n = len(self.cands.items) if self.cands is not None else 0
        if not n:
            self.notes.append("cancelled before any INT8 candidate was scored: the plan holds FP16 only"
                              + ("" if self.fp16_acc is not None else ", its accuracy not scored"))
        elif not any("interrupted:" in t for t in self.notes):
            self.notes.append(f"interrupted: the plan holds the {n} candidates measured before the cancel")
        return self.plan(True)
