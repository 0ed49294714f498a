"""Run a sensitivity sweep with real builds: the build/evaluate/benchmark callables
for :func:`trtwidgets.core.accuracy.sweep.run_sweep`.

Step N keeps the N most sensitive layers out of INT8, either through the
recipe's per-layer precisions (implicit INT8, TensorRT <= 10) or by leaving
them out of the exported Q/DQ model (explicit INT8), rebuilds, runs the
reference inputs and times the engine::

    plan = plan_sweep(report, steps=(0, 1, 2, 4), recipe=int8_recipe, trt_major=8)
    result = sweep(plan, int8_recipe, reference, out_root="builds/sweep")
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Sequence, Union

from ..core.accuracy.sweep import SweepResult, SweepStep, SweepStepResult, run_sweep
from ..core.common.errors import UserError

__all__ = ["sweep", "step_recipe"]


def step_recipe(step: SweepStep, base_recipe, amax: Optional[Mapping[str, float]], out_root: Path):
    """The recipe that builds one step (writes the step's Q/DQ model in ``qdq_exclude`` mode)."""
    if step.mode == "layer_precision":
        return step.recipe if step.recipe is not None else base_recipe
    if amax is None:
        raise UserError("An explicit (Q/DQ) sweep needs the activation ranges.", None,
                        "Pass amax= (e.g. calibration.amax or read_cache(cache).amax).")
    from ..core.model.load import load_model
    from ..core.qdq.export import build_qdq, save_qdq_model
    from ..core.qdq.options import QdqOptions
    from ..core.qdq.spec import QdqSpec
    from ..core.recipe.recipe import CalibratorSpec

    exported = build_qdq(base_recipe.model_path, QdqSpec(amax, QdqOptions(exclude=step.exclude)))
    path = save_qdq_model(exported, out_root / f"step{step.n}.qdq.onnx")
    loaded = load_model(path)
    flags = tuple(base_recipe.flags)
    if loaded.summary.qdq.count == 0:
        # Every layer excluded: a float network. TensorRT 8.6 with INT8 set and neither Q/DQ nor a
        # calibrator fails ("Calibrator is not being used. Users must provide dynamic range for all
        # tensors..."), seen on the H200; this step is the float end of the sweep.
        flags = tuple(f for f in flags if f != "int8")
    elif "int8" not in flags:
        # A Q/DQ network still needs the INT8 flag on TensorRT <= 10.
        flags = flags + ("int8",)
    return base_recipe.replace(model_path=str(path), model_sha256=loaded.sha256, flags=flags,
                               calibrator=CalibratorSpec(), layer_precisions=())


def sweep(
    plan: Sequence[SweepStep],
    base_recipe,
    reference,
    amax: Optional[Mapping[str, float]] = None,
    out_root: Union[str, os.PathLike, None] = None,
    runs: int = 200,
    batch: Optional[int] = None,
    build_kwargs: Optional[dict] = None,
    on_step: Optional[Callable[[SweepStepResult], None]] = None,
) -> SweepResult:
    """Build, evaluate and benchmark every step of ``plan``.

    Parameters
    ----------
    plan : sequence of SweepStep
        From :func:`~trtwidgets.core.accuracy.sweep.plan_sweep`.
    base_recipe : Recipe
        The INT8 recipe (implicit) or the float model's recipe with its flags (explicit).
    reference : ReferenceData
        Inputs and FP32 outputs (:mod:`trtwidgets.core.accuracy.reference`).
    amax : mapping, optional
        Activation ranges for the Q/DQ export (explicit mode).
    out_root : path, optional
        Where the step builds go (``builds/sweep-<time>`` by default).
    runs : int
        Timed runs per step.
    batch : int, optional
        Samples per engine run for a dynamic batch (default: the profile's largest).
    build_kwargs : dict, optional
        Passed to :func:`trtwidgets.trt.build.build` (e.g. ``tactic_sources``, ``calibration_data``).
    on_step : callable, optional
        Called with each finished step.
    """
    from ..core.accuracy.metrics import compare_outputs
    from .bench import benchmark_runner
    from .build import build
    from .runner import EngineRunner, run_samples

    root = Path(out_root if out_root is not None else os.path.join("builds", f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"))
    root.mkdir(parents=True, exist_ok=True)
    kwargs = dict(build_kwargs or {})
    kwargs.setdefault("progress", False)
    used: Dict[str, int] = {}

    def build_step(step: SweepStep):
        recipe = step_recipe(step, base_recipe, amax, root)
        return build(recipe, out_dir=root / f"step{step.n}", **kwargs)

    def evaluate(res):
        with EngineRunner(res.engine_path) as runner:
            outs, n = run_samples(runner, reference.inputs, batch)
        used["n"] = n
        return compare_outputs({k: v[:n] for k, v in reference.outputs.items()}, outs)

    def time_step(res):
        with EngineRunner(res.engine_path) as runner:
            first = runner.input_names[0]
            spec = next(s for s in runner.specs if s.name == first)
            b = int(spec.shape[0]) if spec.shape and spec.shape[0] > 0 else (batch or used.get("n", 1))
            rng = runner.profile_shapes(first)
            if rng and not (spec.shape and spec.shape[0] > 0):
                b = min(b, int(rng[2][0]))
            feeds = {k: v[:b] for k, v in reference.inputs.items()}
            return benchmark_runner(runner, feeds, runs=runs)

    return run_sweep(plan, build_step, evaluate, time_step, on_step)
