"""The planner's phases before the accuracy search: statistics, range methods, engine shapes, where INT8 pays.

Each is a function over values (:func:`~.planner.plan` runs them in order).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..common.errors import UserError
from ..qdq.options import QdqOptions
from .cost_model import GPUS, layer_costs
from .judge import Judge
from .latency import LatencyModel, LayerLatency
from ..accuracy.verdict import reference_notes
from .plan_eval import Evaluator, weighted_edges
from .plan_search import border_search
from .plan_values import PlanAccuracy, PlanTarget

__all__ = ["METHOD_ORDER", "RANK_MAX_VALUES", "fit_calibration", "evaluator", "rank_samples", "score_methods",
           "engine_shapes", "myelin_layers", "latency_model", "paying_layers", "progress_bar", "Progress"]

#: Range methods tried, in order (entropy first: TensorRT's default; a calibration's own method goes first).
METHOD_ORDER = ("entropy", "percentile", "mse", "max")
#: The held-back subset layers are ranked on: at most this many samples ...
RANK_MAX_SAMPLES = 16
#: ... and, for large inputs, at most this many input values in all (never fewer than RANK_MIN_SAMPLES samples).
#: Ranking runs the model once per layer and only orders the layers; every candidate is judged on all held-back
#: samples. A 480x640 image is 0.92M values: a U-Net's per-layer pass ran 8 such samples through ONNX Runtime
#: for each of its 23 layers (379 of a 791 s plan on a 2-core CPU). Below 250k values a sample (the zoo's
#: 320x320 detectors, 224x224 classifiers, text and audio) the subset is the same as without this bound.
RANK_MAX_VALUES = 4_000_000
RANK_MIN_SAMPLES = 4


def _values(feed: Mapping[str, np.ndarray]) -> int:
    return sum(int(np.asarray(v).size) for v in feed.values())


def rank_samples(feeds: Sequence[Mapping[str, np.ndarray]]) -> int:
    """How many of the held-back samples ``feeds`` the layers are ranked on (see :data:`RANK_MAX_VALUES`)."""
    per_sample = max(1, _values(feeds[0])) if feeds else 1
    by_size = max(RANK_MIN_SAMPLES, RANK_MAX_VALUES // per_sample)
    return max(1, min(len(feeds), RANK_MAX_SAMPLES, by_size))


def progress_bar(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # core runs on the GPU machine without tqdm
        return None
    return tqdm(total=total, desc=desc, leave=False)


class Progress:
    """A phase's units of work: a tqdm bar (when ``enabled``) and ``on_progress(phase, done, total)``.

    A context manager; :meth:`tick` after each unit.
    """

    def __init__(self, total: int, enabled: bool, phase: str,
                 on_progress: Optional[Callable[[str, int, int], None]] = None) -> None:
        self.total, self.phase, self.done = int(total), phase, 0
        self.on_progress = on_progress
        self.bar = progress_bar(total, enabled, phase)

    def __enter__(self) -> "Progress":
        if self.on_progress is not None:
            self.on_progress(self.phase, 0, self.total)
        return self

    def tick(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        if self.on_progress is not None:
            self.on_progress(self.phase, self.done, self.total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def fit_calibration(loaded, calib: Sequence[Mapping[str, np.ndarray]], calibration=None,
                    progress: bool = True, client=None) -> Tuple[Any, str]:
    """The statistics, once: ``(Calibration, what it is in words)``.

    The caller's ``calibration`` is taken as it is (statistics, method, percentile and every
    amax override), checked once against the model; otherwise statistics are collected on
    ``calib`` (on the Dask workers of ``client`` when given: the same statistics). How candidates are written
    (:class:`~..qdq.options.QdqOptions`) has no say in the ranges.
    """
    from ..calibration.calibration import Calibration

    if calibration is not None:
        if not isinstance(calibration, Calibration):
            raise UserError(f"calibration= takes a Calibration, not a {type(calibration).__name__}.",
                            "The planner reads its statistics, percentile and amax overrides.",
                            "Pass cal = trtwidgets.calibrate(model, data), or trtwidgets.Calibration.load(path).")
        # A calibration of another model would be planned with, quietly matching a few tensor names.
        return calibration.check_fits(loaded), f"the given calibration ({calibration.describe()})"
    from ..calibration.collect import collect_stats
    from ..calibration.shards import collect_stats_distributed

    feeds = [dict(f) for f in calib]
    collected = collect_stats(loaded, feeds, progress=progress) if client is None else \
        collect_stats_distributed(loaded, feeds, client, progress=progress)
    if collected.interrupted:  # Ctrl-C while collecting: stop here, not search on with a few samples' ranges
        raise KeyboardInterrupt
    return Calibration.fit(collected, model=loaded), f"statistics of {len(calib)} calibration samples"


def evaluator(loaded, held, target: PlanTarget, options: QdqOptions, axes=None, batch: int = 1,
              labels=None) -> Tuple[Evaluator, PlanTarget, List[str]]:
    """The evaluator on the held-back samples, the target bound to FP32's outputs on them, and notes.

    ``axes`` (:class:`~..model.batch_axis.BatchAxes`) says where each tensor's samples are
    (default: axis 0); outputs reach the check and the metric batch first. ``labels``: the held-back
    samples' classes (a ``top1`` metric). Ranking runs on at most 16 held-back samples, fewer for
    large inputs (:func:`rank_samples`); the candidates shown are scored on all of them. The notes
    say what the target cannot see (:func:`~..accuracy.verdict.target_notes`).
    """
    ev = Evaluator(loaded.proto, [dict(f) for f in held], {}, options, axes=axes, batch=batch)
    reference = ev.run(loaded.proto, ev.feeds)
    broken = reference_notes(reference)  # FP32's own NaN/Inf, said; nothing finite at all, refused
    n_held = len(ev.feeds)
    bound, metric_notes = target.bound(reference, loaded.summary, labels)
    ev = dataclasses.replace(ev, reference=reference, target=bound)
    notes: List[str] = broken + metric_notes
    n_rank = rank_samples(ev.feeds)
    if n_rank < min(n_held, RANK_MAX_SAMPLES):  # fewer than without the bound on values: said
        notes.append(f"layers are ranked on {n_rank} of the {n_held} held-back samples (each holds "
                     f"{_values(ev.feeds[0]):,} input values); every "
                     f"candidate is judged on all {n_held}")
    rank_feeds = ev.feeds[:n_rank]
    rank_ref = {k: v[:n_rank] for k, v in reference.items()}
    rank_target = bound
    if n_rank < n_held and bound.metric is not None:
        if target.metric_factory is not None or target.task_metric is not None:
            rank_labels = None if labels is None else np.asarray(labels)[:n_rank]
            rank_target = target.bound(rank_ref, loaded.summary, rank_labels)[0]
        else:  # a plain callable of the caller's, made on every held-back sample: ranking goes by the cosine
            rank_target = dataclasses.replace(bound, metric=None, metric_reference=None)
            notes.append("the metric is a plain callable: layers are ranked by cosine on a subset, candidates by "
                         "the metric")
    ev.set_rank_data(rank_feeds, rank_ref, rank_target)
    return ev, bound, notes


def score_methods(ev: Evaluator, cal, judge: Judge, progress: bool = True,
                  on_progress: Optional[Callable[[str, int, int], None]] = None
                  ) -> Tuple[Dict[str, Tuple[PlanAccuracy, Dict[str, float]]], str]:
    """Every range method on the full placement: ``({method: (accuracy, amax)}, best method)``.

    The calibration's overrides hold in every method; its own method is tried first, so it wins a tie.
    """
    methods = (cal.method,) + tuple(m for m in METHOD_ORDER if m != cal.method)
    per_method: Dict[str, Tuple[PlanAccuracy, Dict[str, float]]] = {}
    amaxes = {method: cal.refit(method=method).amax for method in methods}
    ev.prefetch((amax, None, True) for amax in amaxes.values())  # side by side on Dask workers
    with Progress(len(methods), progress, "range methods", on_progress) as bar:
        for method in methods:
            amax = amaxes[method]
            acc, _ = ev.score(amax, rank=True)
            per_method[method] = (acc, amax)
            bar.tick()
    best = min(methods, key=lambda m: judge.loss(per_method[m][0]))
    return per_method, best


def engine_shapes(held, batch_size: Optional[int], shapes: Optional[Mapping[str, Sequence[int]]],
                  axes=None) -> Dict[str, tuple]:
    """The input shapes the engine will run at: the data's, at ``batch_size``, overridden by ``shapes``.

    ``batch_size`` sets each input's own batch axis (``axes``: a :class:`~..model.batch_axis.BatchAxes`;
    default axis 0); an input without one keeps its shape.
    """
    input_shapes = {k: tuple(v.shape) for k, v in held[0].items()}
    if batch_size:
        where = axes.inputs if axes is not None else {k: 0 for k in input_shapes}
        input_shapes = {k: (s[:where[k]] + (int(batch_size),) + s[where[k] + 1:]
                            if where.get(k) is not None and len(s) > where[k] else s)
                        for k, s in input_shapes.items()}
    if shapes:
        input_shapes.update({k: tuple(int(d) for d in v) for k, v in shapes.items()})
    return input_shapes


def check_batch_fits(loaded, input_shapes: Mapping[str, Sequence[int]]) -> None:
    """Refuse engine shapes the model cannot run: a static model whose Reshape/Expand targets hold its batch.

    A model exported at batch 1 with the batch written into its shape constants (lint
    BATCH_PINNED_SHAPE) runs at batch 1 only: TensorRT's parser fails at any other ("reshape changes
    volume"), so a plan estimated at ``--batch 32`` would describe an engine that cannot be built.
    """
    inputs = {i.name: tuple(i.shape) for i in loaded.summary.inputs}
    if not any(name in inputs and len(shape) == len(inputs[name]) and len(shape) and isinstance(inputs[name][0], int)
               and inputs[name][0] > 0 and int(shape[0]) != inputs[name][0] for name, shape in input_shapes.items()):
        return  # the model's own static batch, or a dynamic one (the lint's warning covers that case)
    from ..model.lint import lint

    profile = {k: {"min": tuple(v), "opt": tuple(v), "max": tuple(v)} for k, v in input_shapes.items()}
    found = [f for f in lint(loaded, profiles=[profile]) if f.code == "BATCH_PINNED_SHAPE" and f.severity == "warning"]
    if found:
        f = found[0]
        asked = ", ".join(f"{k} {list(v)}" for k, v in input_shapes.items())
        raise UserError(f"The model cannot run at the shapes asked for ({asked}): {f.message}", f.why, f.fix)


def myelin_layers(proto: onnx.ModelProto, layers: Sequence[str], trt_version,
                  shapes: Optional[Mapping[str, Sequence[int]]] = None) -> set:
    """Labels of the ``layers`` that TensorRT 8.x would run in Myelin (none for 10+ or an unknown version).

    ``trt_version`` None means the installed TensorRT's. ``shapes``: tensor shapes a sample run produced
    (:func:`~.observed_shapes.observed_shapes`), for the activations whose rank shape inference leaves open.
    """
    from ..model.trt_version import installed_trt_version
    from ..model.graph_patterns import node_label
    from ..qdq.myelin import myelin_matmuls, myelin_target

    if trt_version is None:
        trt_version = installed_trt_version()  # None without TensorRT: no rule (the target is unknown)
    if not myelin_target(trt_version):
        return set()
    wanted = set(layers)
    idx = [i for i, n in enumerate(proto.graph.node) if node_label(n) in wanted]
    return {node_label(proto.graph.node[i]) for i in myelin_matmuls(proto, idx, trt_version, shapes)}


def latency_model(proto: onnx.ModelProto, input_shapes: Mapping[str, tuple], gpu: str, oracle=None,
                  myelin: Collection[str] = (), shapes: Optional[Mapping[str, tuple]] = None) -> LatencyModel:
    """The latency of candidates: the cost model at ``input_shapes``, with an implicit build's choices when given.

    ``oracle`` may also be a :class:`~.latency.LatencyModel` of its own (a measured one): it is used as is.
    ``shapes``: every tensor's shape where known (:func:`~.observed_shapes.observed_shapes`).
    """
    from .latency_oracle import LatencyOracle, read_oracle

    if oracle is not None and callable(getattr(oracle, "estimate", None)) and hasattr(oracle, "kind"):
        return oracle
    if oracle is not None and not isinstance(oracle, LatencyOracle):
        oracle = read_oracle(oracle, proto)
    return LayerLatency(layer_costs(proto, input_shapes, gpu, shapes=shapes), weighted_edges(proto),
                        GPUS.get(gpu.lower(), GPUS["h100"]), oracle, frozenset(myelin))


def paying_layers(layers: Sequence[str], latency: LatencyModel) -> Tuple[List[str], List[Tuple[str, str]]]:
    """Where INT8 pays: ``(paying layers, [(layer, why not)])``, borders counted (:func:`~.plan_search.border_search`)."""
    pays: List[str] = []
    kept: List[Tuple[str, str]] = []
    for layer in layers:
        why = latency.why_not_int8(layer)
        if why is None:
            pays.append(layer)
        else:
            kept.append((layer, why))
    # Borders decide as much as the layers do: drop layers whose gain the reformats eat, add ones that remove them
    # (never a layer TensorRT 8.x runs in Myelin: INT8 is slower there, borders or not).
    from ..qdq.myelin import MYELIN_REASON

    allowed = [n for n in layers if (n, MYELIN_REASON) not in kept]
    pays, dropped, added = border_search(pays, allowed, latency.estimate)
    kept = [(n, r) for n, r in kept if n not in added]
    kept += [(n, "INT8 would pay in this layer alone, but not with the reformats at its borders "
                 "(its neighbours stay in high precision)") for n in dropped]
    return pays, kept


