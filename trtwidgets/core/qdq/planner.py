"""The quantization planner: which layers to quantize so that INT8 is faster than FP16 and accurate.

A Q/DQ export that quantizes everything the placement rules allow can be slower
than FP16 (small layers gain nothing in INT8 and every INT8/float border costs a
reformat) and can lose accuracy. :func:`plan` searches, on the CPU:

1. **Statistics once.** Activation statistics of the calibration samples are
   collected once (:func:`~..calibration.collect.collect_stats`) and every
   candidate reuses them.
2. **Ranges.** Each of the four range methods (entropy, percentile, MSE, max) is
   tried on the full placement; the best (by the target) is kept, then each of the
   most sensitive layers' inputs may switch to another method where that scores
   higher.
3. **Where INT8 pays.** With an implicit INT8+FP16 build of the model
   (``oracle``), exactly the layers TensorRT ran in INT8; without one, the layers
   the cost model (:mod:`.cost_model`) expects to be faster in INT8. Layers that do
   not pay stay in high precision, with that reason.
4. **Accuracy.** Each paying layer's cost is measured (that layer alone in INT8,
   ONNX Runtime against FP32 on held-back data); layers are taken by latency gain
   per unit of cost, and a bisection finds the longest such prefix that keeps the
   target (:mod:`.plan_search`).
5. **The pick.** The fastest candidate that meets the target, or FP16 when no INT8
   candidate is both faster and accurate: "FP16 is best here" is a real answer.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

from ..common.errors import UserError
from .cost_model import GPUS, layer_costs
from .myelin import MYELIN_QDQ_SLOWDOWN, MYELIN_REASON, myelin_matmuls, myelin_target
from .plan_eval import Evaluator, weighted_edges
from .plan_search import bisect_prefix, gain_per_cost, layer_costs_alone, loss, tune_ranges
from .plan_values import Candidate, Plan, PlanAccuracy, PlanTarget

__all__ = ["plan", "PlanTarget", "Plan", "Candidate", "export_plan", "METHOD_ORDER"]

#: Range methods tried, in order (entropy first: TensorRT's default).
METHOD_ORDER = ("entropy", "percentile", "mse", "max")
#: INT8 must save at least this fraction of FP16's time (by the cost model's estimate) to be recommended.
MIN_GAIN = 0.02


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # core runs on the GPU machine without tqdm
        return None
    return tqdm(total=total, desc=desc, leave=False)


def _feeds(proto: onnx.ModelProto, data, held_back, holdout: float, max_samples: Optional[int]):
    from ..calibration.data import iter_feeds
    from ..model.load import summarize

    summary = summarize(proto)
    feeds = list(iter_feeds(data, summary, batch_size=1, max_samples=max_samples))
    if held_back is not None:
        held = list(iter_feeds(held_back, summary, batch_size=1))
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


def _stack(feeds: Sequence[Mapping[str, np.ndarray]]) -> List[Dict[str, np.ndarray]]:
    return [dict(f) for f in feeds]


def _pick(cands: List[Candidate]) -> Tuple[int, str]:
    good = [i for i, c in enumerate(cands) if c.meets_target and c.quantized]
    if not good:
        why = ("no INT8 candidate keeps the accuracy target" if any(c.quantized for c in cands)
               else "no layer is expected to be faster in INT8")
        return 0, f"FP16 is best here: {why}."
    # Fastest first; on a tie, the more accurate.
    best = min(good, key=lambda i: (round(cands[i].latency_us, 3), -cands[i].accuracy.cosine))
    # An estimate must promise a clear gain; TensorRT's own timing (the oracle) needs only to promise one.
    margin = MIN_GAIN if cands[best].latency_source == "estimate" else 0.0
    if cands[best].speedup <= 1 + margin:
        return 0, (f"FP16 is best here: INT8 gains nothing (the best INT8 candidate that meets the target is "
                   f"{1 / cands[best].speedup:.2f}x FP16, {cands[best].latency_source}).")
    gain = 1 - 1 / cands[best].speedup
    return best, (f"{cands[best].name}: the fastest candidate that meets the target, {gain:.0%} faster than FP16 "
                  f"({cands[best].latency_source}), {len(cands[best].quantized)} INT8 layers"
                  + (f", {len(cands[best].kept)} kept in high precision" if cands[best].kept else "") + ".")


def _myelin_layers(proto: onnx.ModelProto, layers: Sequence[str], trt_version) -> set:
    """Labels of the ``layers`` that TensorRT 8.x would run in Myelin (none for 10+ or an unknown version).

    ``trt_version`` None means the installed TensorRT's.
    """
    from ..model.trt_version import installed_trt_version
    from .graph_patterns import node_label

    if trt_version is None:
        trt_version = installed_trt_version()  # None without TensorRT: no rule (the target is unknown)
    if not myelin_target(trt_version):
        return set()
    wanted = set(layers)
    idx = [i for i, n in enumerate(proto.graph.node) if node_label(n) in wanted]
    return {node_label(proto.graph.node[i]) for i in myelin_matmuls(proto, idx, trt_version)}


def _border_search(pays: List[str], allowed: Sequence[str], latency: Callable[[Sequence[str]], float]
                   ) -> Tuple[List[str], List[str], List[str]]:
    """Local search over which layers run INT8, counting the reformats at INT8/float borders.

    A layer that pays alone may not pay once its borders are counted (drop it); a
    layer that does not pay alone may remove two borders between INT8 neighbours
    (add it). Moves are taken while they lower the estimated total.

    Returns
    -------
    (quantized, dropped, added)
    """
    current = list(pays)
    best = latency(current)
    dropped: List[str] = []
    added: List[str] = []
    for _ in range(4):
        changed = False
        for layer in list(allowed):
            trial = [n for n in current if n != layer] if layer in current else current + [layer]
            t = latency(trial)
            if t < best - 1e-9:
                (dropped if layer in current else added).append(layer)
                current, best, changed = trial, t, True
        if not changed:
            break
    dropped = [n for n in dropped if n not in current]
    added = [n for n in added if n in current]
    return [n for n in allowed if n in current], dropped, added


def plan(model, data, *, target: Optional[PlanTarget] = None, held_back=None, holdout: float = 0.25,
         trt_version: Optional[str] = None, high_precision: str = "auto", gpu: str = "h100",
         batch_size: Optional[int] = None, oracle=None, stats=None, max_samples: Optional[int] = None,
         max_ranked: int = 96, progress: bool = True, shapes: Optional[Mapping[str, Sequence[int]]] = None,
         dense_int8: bool = True, on_step: Optional[Callable[[str], None]] = None) -> Plan:
    """Search for the fastest Q/DQ quantization that meets an accuracy target (see the module docstring).

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The float model.
    data : anything :func:`~..calibration.data.iter_feeds` takes
        Calibration samples; the last ``holdout`` fraction is held back for accuracy
        unless ``held_back`` is given.
    target : PlanTarget, optional
        Default: output cosine >= 0.99.
    trt_version : str, optional
        The target TensorRT (decides the float part's type, see :mod:`.high_precision`).
    high_precision : {"auto", "fp32", "fp16", "bf16"}
    gpu : str
        The cost model's GPU (:data:`~.cost_model.GPUS`), when there is no oracle.
    batch_size : int, optional
        The batch the engine will run at (latency is estimated there); default: the data's.
    shapes : mapping, optional
        Input name -> the full shape the engine will run at (e.g. a larger image than the
        samples'); wins over ``batch_size`` for the latency estimate.
    oracle : LatencyOracle, build folder or path, optional
        An implicit INT8+FP16 build of the same model (:mod:`.latency_oracle`).
    stats : ActivationStats, optional
        Statistics already collected (skips collection).
    max_ranked : int
        Rank at most this many layers by accuracy cost (the ones INT8 saves most on).
    progress : bool
        A progress bar per phase.
    dense_int8 : bool
        Export every candidate with placement rule 8 (:func:`~.placement.plan_qdq`):
        inside the quantized part, depthwise convs quantized with their output,
        gates written in INT8 and shared reads, as an implicit INT8 engine runs, so
        an INT8 region has no reformat layer inside. False: rules 1-7 only (a
        depthwise conv read in float stays float).
    on_step : callable, optional
        Called with a short text before each phase (the widget's status line).

    Returns
    -------
    Plan

    Raises
    ------
    UserError
        Too few samples, a bad target, an oracle of another model.
    """
    from ..calibration.collect import collect_stats
    from ..model.load import LoadedModel, load_model, summarize
    from ..calibration.ranges import amax_from_stats
    from .options import resolve_high_precision as _resolve_high_precision
    from .latency_oracle import LatencyOracle, read_oracle

    t0 = time.perf_counter()
    seconds: Dict[str, float] = {}
    say = on_step or (lambda text: None)
    target = target or PlanTarget()
    if isinstance(model, LoadedModel):
        loaded = model
    elif isinstance(model, onnx.ModelProto):
        loaded = LoadedModel(Path(model.graph.name or "model.onnx"), model, summarize(model))
    else:
        loaded = load_model(model)
    proto = loaded.proto
    name = str(loaded.path)
    hp = _resolve_high_precision(high_precision, trt_version)
    notes: List[str] = []

    say("reading data")
    calib, held = _feeds(proto, data, held_back, holdout, max_samples)
    say(f"collecting statistics on {len(calib)} samples")
    if stats is None:
        stats = collect_stats(loaded, _stack(calib), progress=progress)
    seconds["statistics"] = time.perf_counter() - t0

    from .validate import run_model

    reference, n_held = run_model(proto, held)
    factory = target.metric_factory
    if factory is not None:
        metric, metric_name = factory(reference, loaded.summary, n_held)
        target = dataclasses.replace(target, metric=metric, metric_name=metric_name, metric_factory=None)
    metric_ref = float(target.metric(reference)) if target.metric is not None else None
    ev = Evaluator(proto, _stack(held), reference, hp, target.metric, metric_ref, trt_version,
                   dense_int8=dense_int8)

    # Ranges: the best single method on the full placement.
    t = time.perf_counter()
    say("choosing range methods")
    bar = _progress(len(METHOD_ORDER), progress, "range methods")
    per_method: Dict[str, Tuple[PlanAccuracy, Dict[str, float]]] = {}
    # Ranking uses at most 16 held-back samples; the candidates shown are scored on all of them.
    rank_feeds = ev.feeds[: max(1, min(len(ev.feeds), 16))]
    n_rank = sum(int(np.shape(next(iter(f.values())))[0]) for f in rank_feeds)
    rank_ref = {k: v[:n_rank] for k, v in reference.items()}
    rank_metric = None
    if factory is not None:
        rank_metric = factory(rank_ref, loaded.summary, n_rank)[0]
    elif target.metric is not None and n_rank < n_held:
        notes.append("the metric is a plain callable: layers are ranked by cosine on a subset, candidates by the metric")
    ev.set_rank_data(rank_feeds, rank_ref, rank_metric)
    for method in METHOD_ORDER:
        amax = amax_from_stats(stats, method)
        acc, _ = ev.score(amax, (), rank=True)
        per_method[method] = (acc, amax)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()

    def key(acc: PlanAccuracy) -> Tuple[float, float]:
        m = acc.metric if acc.metric is not None else 0.0
        return (m, acc.cosine if target.cosine is not None or target.snr_db is None else acc.snr_db)

    best_method = max(METHOD_ORDER, key=lambda m: key(per_method[m][0]))
    amax = dict(per_method[best_method][1])
    seconds["ranges"] = time.perf_counter() - t

    # Latency: per-layer FP16/INT8 estimates, replaced by the oracle's choices when there is one.
    t = time.perf_counter()
    input_shapes = {k: tuple(v.shape) for k, v in held[0].items()}
    if batch_size:
        input_shapes = {k: (int(batch_size),) + s[1:] for k, s in input_shapes.items()}
    if shapes:
        input_shapes.update({k: tuple(int(d) for d in v) for k, v in shapes.items()})
    costs = layer_costs(proto, input_shapes, gpu)
    all_export = ev.export(amax)
    candidates_layers = list(all_export.report.quantized_layers)
    if oracle is not None and not isinstance(oracle, LatencyOracle):
        oracle = read_oracle(oracle, proto)
    source = "oracle" if oracle is not None else "estimate"
    pays: List[str] = []
    kept_latency: List[Tuple[str, str]] = []
    myelin = _myelin_layers(proto, candidates_layers, trt_version)
    if myelin:
        notes.append(f"{len(myelin)} batched MatMuls kept in high precision: {MYELIN_REASON}")
    for layer in candidates_layers:
        if layer in myelin:
            kept_latency.append((layer, MYELIN_REASON))
            continue
        if oracle is not None:
            choice = oracle.layers.get(layer)
            if choice is not None and choice.precision == "INT8":
                pays.append(layer)
            else:
                kept_latency.append((layer, "TensorRT ran it in "
                                     f"{choice.precision if choice else 'high precision'} in the implicit INT8 build: "
                                     "INT8 does not pay here"))
            continue
        c = costs.get(layer)
        if c is None:
            pays.append(layer)  # unknown shape: let accuracy decide, and say so
            continue
        if c.gain_us > max(0.3, 0.05 * c.fp16_us):
            pays.append(layer)
        else:
            kept_latency.append((layer, f"INT8 does not pay here (estimated {c.fp16_us:.1f} us in FP16, "
                                        f"{c.int8_us:.1f} us in INT8)"))
    if any(layer not in costs for layer in candidates_layers) and oracle is None:
        notes.append("some layers' shapes are unknown to shape inference; their latency is not estimated")

    edges = weighted_edges(proto)
    spec = GPUS.get(gpu.lower(), GPUS["h100"])

    def border_us(producer: str) -> float:
        # An explicit engine's INT8/float border is a reformat layer of its own: a launch, plus reading and
        # writing the tensor. Measured on an H100 (TensorRT 8.6): ~5 us per border on the batch-32 classifier,
        # ~18 us on the batch-32 detector, whose tensors are larger (benchmarks/results/zoo).
        c = costs.get(producer)
        return spec.launch_us + (2e6 * c.out_bytes_fp16 / spec.bandwidth if c is not None else 0.0)

    def latency(quantized: Sequence[str]) -> float:
        q = set(quantized)
        total = 0.0
        for layer, c in costs.items():
            fp16_us, int8_us = c.fp16_us, c.int8_us
            choice = oracle.layers.get(layer) if oracle is not None else None
            if choice is not None:
                # TensorRT timed both precisions and kept the faster: trust its order, the cost model's sizes.
                if choice.latency_ms:
                    measured = 1000 * choice.latency_ms
                    if choice.precision == "INT8":
                        fp16_us, int8_us = measured * max(c.fp16_us / c.int8_us, 1.05), measured
                    else:
                        fp16_us, int8_us = measured, measured * max(c.int8_us / c.fp16_us, 1.05)
                elif choice.precision == "INT8":
                    int8_us = min(int8_us, 0.8 * fp16_us)
                else:
                    int8_us = max(int8_us, 1.05 * fp16_us)
            if layer in myelin:
                int8_us = max(int8_us, MYELIN_QDQ_SLOWDOWN * fp16_us)
            total += int8_us if layer in q else fp16_us
        # Every border costs, the oracle's too: an implicit engine picks formats without reformat layers,
        # an explicit one gets what its Q/DQ say.
        return total + sum(border_us(u) for u, d in edges if (u in q) != (d in q))

    fp16_us = latency(())
    # Borders decide as much as the layers do: drop layers whose gain the reformats eat, add ones that remove them.
    pays, dropped, added = _border_search(pays, [n for n in candidates_layers if n not in myelin], latency)
    kept_latency = [(n, r) for n, r in kept_latency if n not in added]
    kept_latency += [(n, "INT8 would pay in this layer alone, but not with the reformats at its borders "
                         "(its neighbours stay in high precision)") for n in dropped]
    seconds["latency"] = time.perf_counter() - t

    cands: List[Candidate] = []

    def add(cname: str, quantized: Sequence[str], kept: Sequence[Tuple[str, str]], acc: PlanAccuracy) -> Candidate:
        c = Candidate(cname, tuple(quantized), tuple(kept), acc, latency(quantized), fp16_us, source,
                      acc.meets(target))
        cands.append(c)
        return c

    interrupted = False
    try:
        say("scoring FP16 and full INT8")
        add("FP16 (no INT8)", (), (), ev.score_fp16())
        full_acc = ev.score_model(all_export.model)
        if hp != ev.eval_dtype:
            notes.append("BF16 is evaluated as FP32 in ONNX Runtime (no BF16 kernels on the CPU)")
        add(f"INT8 everywhere the rules allow ({best_method})", candidates_layers,
            tuple((s.node_label, s.reason) for s in all_export.report.skipped
                  if s.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") and s.node_label not in candidates_layers),
            full_acc)

        # Accuracy: each paying layer's cost alone, then the longest gain-per-cost prefix that meets the target.
        t = time.perf_counter()
        not_paying = [n for n, _ in kept_latency]
        if pays:
            base, _ = ev.score(amax, not_paying)
            c_pays = add("INT8 where it pays", pays, tuple(kept_latency), base)
        if pays and c_pays.meets_target:
            notes.append("every layer where INT8 pays keeps the target: no layer was ranked by accuracy cost")
        elif pays:
            gains = {n: (costs[n].gain_us if n in costs else 0.0) for n in pays}
            ranked_layers = sorted(pays, key=lambda n: -gains[n])[:max_ranked]
            say(f"measuring what INT8 costs in each of {len(ranked_layers)} layers")
            bar = _progress(len(ranked_layers), progress, "layer cost")
            cost = layer_costs_alone(ev, amax, ranked_layers, candidates_layers,
                                     tick=(bar.update if bar is not None else None))
            if bar is not None:
                bar.close()
            seconds["sensitivity"] = time.perf_counter() - t
            # Per-tensor ranges: the costliest layers' inputs may take another method.
            t = time.perf_counter()
            worst = sorted(cost, key=lambda n: -cost[n])[:4]
            before = dict(amax)
            if tune_ranges(ev, amax, {m: per_method[m][1] for m in METHOD_ORDER}, worst, candidates_layers):
                # A range better for a layer alone must not hurt the model as a whole: check, else undo.
                if loss(ev.score(amax, not_paying, rank=True)[0]) <= loss(ev.score(before, not_paying, rank=True)[0]):
                    cost.update(layer_costs_alone(ev, amax, worst, candidates_layers))
                    base, _ = ev.score(amax, not_paying)
                    cands[-1] = c_pays = Candidate(c_pays.name + " (tuned ranges)", c_pays.quantized, c_pays.kept,
                                                   base, c_pays.latency_us, fp16_us, source, base.meets(target))
                else:
                    amax.clear()
                    amax.update(before)
            seconds["per-tensor ranges"] = time.perf_counter() - t
            t = time.perf_counter()
            order = gain_per_cost(pays, gains, cost)
            say("finding how many layers INT8 can take within the target")

            def probe(k: int):
                chosen = order[:k]
                float_layers = [n for n in pays if n not in chosen]
                acc, _ = ev.score(amax, not_paying + float_layers)
                rank = {n: i for i, n in enumerate(order)}
                kept = tuple(kept_latency) + tuple(
                    (n, f"kept in high precision for accuracy (INT8 here costs {cost.get(n, 0.0):.4f} of the target "
                        f"measure alone; rank {rank[n] + 1} of {len(order)} by gain per cost)") for n in float_layers)
                c = add(f"INT8 in the {k} layers most worth it", chosen, kept, acc)
                return acc, c.meets_target

            bisect_prefix(order, probe, c_pays.meets_target)
            seconds["search"] = time.perf_counter() - t
        else:
            notes.append("no layer is expected to be faster in INT8 at this shape"
                         + (" (TensorRT's implicit INT8 build chose no INT8 layer)" if oracle is not None else ""))
    except KeyboardInterrupt:
        # Keep what the search measured: the candidates so far are a plan, marked as cut short.
        if not cands:
            raise
        interrupted = True
        notes.append(f"interrupted: the plan holds the {len(cands)} candidates measured before the interrupt")

    best, reason = _pick(cands)
    if source == "estimate":
        notes.append(f"latency is an estimate (cost model of an {gpu.upper()}); give an implicit INT8 build "
                     "(oracle) or build the pick to measure it")
    seconds["total"] = time.perf_counter() - t0
    methods_count: Dict[str, int] = {}
    for tname, value in amax.items():
        m = next((mm for mm in METHOD_ORDER if per_method[mm][1].get(tname) == value), "tuned")
        methods_count[m] = methods_count.get(m, 0) + 1
    ranges = {"method": best_method, "per_method": {m: per_method[m][0].to_dict() for m in METHOD_ORDER},
              "methods_used": methods_count, "amax": {k: float(v) for k, v in amax.items()}}
    return Plan(model=name, target=target, candidates=tuple(cands), recommended=best, reason=reason, ranges=ranges,
                high_precision=hp, trt_version=str(trt_version or ""), input_shapes=input_shapes, seconds=seconds,
                notes=tuple(notes), interrupted=interrupted,
                placement={"dense_int8": bool(dense_int8)})


def export_plan(model, plan_: Union[Plan, Mapping], candidate: Optional[int] = None):
    """The Q/DQ model of a plan's candidate (default: the recommended one).

    Returns
    -------
    QdqExport or None
        None when the candidate quantizes nothing (FP16 is best): there is no Q/DQ model to write.
    """
    from ..model.load import as_model_proto
    from .export import build_qdq
    from .plan_eval import exclusion_key
    from .graph_patterns import node_label

    doc = plan_.to_dict() if isinstance(plan_, Plan) else dict(plan_)
    idx = doc["recommended"] if candidate is None else int(candidate)
    if not 0 <= idx < len(doc["candidates"]):
        raise UserError(f"The plan has no candidate {idx}.", f"It has {len(doc['candidates'])}.",
                        "Give an index from the plan's table (0 is FP16).")
    cand = doc["candidates"][idx]
    if not cand["quantized"]:
        return None
    proto = as_model_proto(model)
    quantized = set(cand["quantized"])
    weighted = [n for n in proto.graph.node if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm")]
    exclude = [exclusion_key(n) for n in weighted if node_label(n) not in quantized]
    hp = doc.get("high_precision") or "fp32"
    placement = doc.get("placement") or {}
    if not isinstance(placement, Mapping) or not isinstance(placement.get("dense_int8", False), bool):
        raise UserError("The plan's placement is not what the planner writes.",
                        f"plan.json has placement {placement!r}; it should be {{\"dense_int8\": true}} or false.",
                        "Run the planner again, or restore the plan.json it wrote.")
    return build_qdq(proto, doc["ranges"]["amax"], exclude=exclude, high_precision=hp, skip_matrix_vector=False,
                     dense_int8=bool(placement.get("dense_int8", False)),
                     trt_version=doc.get("trt_version") or None)

