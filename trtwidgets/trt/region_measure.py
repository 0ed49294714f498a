"""The GPU half of the region search: each pattern's schemes timed on a sub-model, the choice, the combined candidate.

For every pattern of the plan's region search (:mod:`trtwidgets.core.plan.regions`) and each scheme that
is offered (buildable on TensorRT 8.6, accurate enough where ONNX Runtime scored it):

1. the whole model is exported with the scheme on every instance (the plan's ranges and options, the
   search's base node set) and the pattern's representative instance is cut out of it
   (:func:`~trtwidgets.core.qdq.region_cut.cut_region`) at its real input shapes at the plan's batch;
   a cut that rule 12 would refuse is not built;
2. all sub-models are built once each (the engine cache and one timing cache,
   :func:`trtwidgets.trt.measure.measure`) and timed in interleaved rounds;
3. each pattern keeps its default unless a scheme is faster beyond the noise
   (:func:`~trtwidgets.core.plan.regions.pick.choose_scheme`), and the choices together become one candidate
   appended to the plan, which :func:`~.plan_measure.measure_plan` builds whole beside FP16 and the base.

Python 3.9 with numpy, onnx and tensorrt only (no ONNX Runtime: the schemes' accuracy comes from the plan).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

from ..core.common.errors import UserError
from ..core.plan.measured.measurement import QDQ, Measurement
from ..core.plan.plan_artifact import Plan
from ..core.plan.regions.pick import choose_schemes, combined_candidate
from ..core.plan.regions.records import PatternRecord, RegionSearch
from .measure import MIN_ROUNDS, MeasureJob

__all__ = ["measure_regions", "region_jobs"]


def _instance(proto, rec: PatternRecord):
    from ..core.qdq.repeated_patterns import find_regions

    for p in find_regions(proto, (rec.kind,)):
        if p.name == rec.name:
            return next((i for i in p.instances if i.anchor == rec.representative), None)
    return None


def _file_name(rec: PatternRecord, scheme: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{rec.name}_{scheme}") + ".onnx"


def region_jobs(plan: Plan, model_path: str, work: Union[str, os.PathLike]
                ) -> Tuple[List[MeasureJob], Dict[str, Tuple[str, str]], Dict[Tuple[str, str], str]]:
    """``(jobs, job name -> (pattern, scheme), (pattern, scheme) -> why not built)`` for the plan's region search.

    Each job's model is the representative instance of its pattern cut out of the whole model's export with
    the scheme, written under ``work/regions/``.
    """
    import onnx

    from ..core.model.load import as_model_proto
    from ..core.qdq.export import build_qdq
    from ..core.qdq.region_cut import cut_region
    from ..core.qdq.sibling_layers import float_output_siblings
    from ..core.qdq.spec import QdqSpec

    search = plan.regions
    if search is None:
        return [], {}, {}
    folder = Path(work) / "regions"
    folder.mkdir(parents=True, exist_ok=True)
    proto = as_model_proto(model_path)
    base = frozenset(plan.candidates[search.base].quantized)
    amax = dict(plan.ranges.amax)
    opts = plan.options.replace(skip_matrix_vector=False)
    jobs: List[MeasureJob] = []
    names: Dict[str, Tuple[str, str]] = {}
    skipped: Dict[Tuple[str, str], str] = {}
    for rec in search.patterns:
        inst = _instance(proto, rec)
        shapes = dict(rec.inputs)
        for s in rec.schemes:
            if not s.offered:
                continue
            if inst is None or any(t not in shapes for t in inst.inputs):
                skipped[(rec.name, s.scheme)] = "the representative's inputs have no recorded shape"
                continue
            try:
                ex = build_qdq(proto, QdqSpec(amax, opts, nodes=base - set(s.float_layers), choices=dict(s.choices)))
                sub = cut_region(ex.model, inst.nodes, inst.inputs, inst.outputs, shapes, name=rec.name)
            except UserError as err:  # one scheme that cannot be written or cut is reported, the others go on
                skipped[(rec.name, s.scheme)] = err.what
                continue
            if float_output_siblings(sub):
                skipped[(rec.name, s.scheme)] = "its sub-model has sibling INT8 convs writing float (rule 12)"
                continue
            path = folder / _file_name(rec, s.scheme)
            onnx.save(sub, str(path))
            name = f"{rec.name} {s.scheme}"
            jobs.append(MeasureJob(name, QDQ, str(path)))
            names[name] = (rec.name, s.scheme)
    return jobs, names, skipped


def _gpu() -> Dict[str, str]:
    from . import cuda, version

    try:
        gpu = cuda.device_name(0)
    except Exception:
        gpu = "unknown"
    return {"trt": version() or "none", "gpu": gpu}


def _with_timings(search: RegionSearch, report, names: Dict[str, Tuple[str, str]],
                  skipped: Dict[Tuple[str, str], str]) -> RegionSearch:
    timing: Dict[Tuple[str, str], Measurement] = {names[m.name]: m for m in report.measurements if m.name in names}
    patterns = []
    for rec in search.patterns:
        schemes = []
        for s in rec.schemes:
            m = timing.get((rec.name, s.scheme))
            why = skipped.get((rec.name, s.scheme))
            schemes.append(dataclasses.replace(s, timing=m, note=s.note or (f"not timed: {why}" if why else "")))
        patterns.append(dataclasses.replace(rec, schemes=tuple(schemes)))
    return dataclasses.replace(search, patterns=tuple(patterns))


def measure_regions(plan: Plan, model_path: str, work: Union[str, os.PathLike], cache_dir: Union[str, os.PathLike],
                    *, rounds: int = MIN_ROUNDS, runs: int = 100, warmup: int = 10, opt_level: Optional[int] = None,
                    progress: Union[bool, Callable] = True, gpus: Optional[int] = None,
                    measure_fn: Optional[Callable] = None) -> Plan:
    """The plan with its region search timed and chosen, and the combined candidate appended (when any pattern
    chose another scheme than its default; ``plan.regions.combined`` is its index).

    A plan without a region search, or with no pattern that has two offered schemes, comes back as it was.
    """
    search = plan.regions
    if search is None or not any(sum(1 for s in p.schemes if s.offered) > 1 for p in search.patterns):
        return plan
    if measure_fn is None:
        from .measure import measure
        measure_fn = measure

    jobs, names, skipped = region_jobs(plan, model_path, work)
    report = measure_fn(jobs, Path(cache_dir), shapes={}, rounds=rounds, runs=runs, warmup=warmup,
                        opt_level=opt_level, progress=progress, gpus=gpus) if jobs else None
    if report is not None:
        search = _with_timings(search, report, names, skipped)
    search = choose_schemes(search)
    search = dataclasses.replace(search, settings=dict(_gpu(), rounds=rounds, runs=runs, warmup=warmup,
                                                       opt_level=opt_level, sub_models=len(jobs)))
    cand = combined_candidate(search, plan.candidates)
    if cand is None:
        return dataclasses.replace(plan, regions=search)
    cands = tuple(plan.candidates) + (cand,)
    return dataclasses.replace(plan, candidates=cands, regions=dataclasses.replace(search, combined=len(cands) - 1))
