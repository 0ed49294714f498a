"""The sensitivity sweep: keep the N most sensitive layers out of INT8, and measure.

:func:`plan_sweep` turns a ranking (an
:class:`~trtwidgets.core.accuracy.layer_errors.ErrorReport`, or layer names most
sensitive first) into steps: on TensorRT <= 10 each step is a recipe that pins
the layers to FP16 (``layer_precision``), otherwise the node names the Q/DQ
exporter leaves unquantized (``qdq_exclude``; TensorRT 11 has no layer
precisions). :func:`run_sweep` builds, evaluates and times each step through
callables, so that this module needs no TensorRT (``trtwidgets.trt.sweep``
supplies them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..common.errors import UserError
from .layer_errors import ErrorReport
from .metrics import OutputMetrics
from ..common.serial import json_float

__all__ = ["SweepStep", "SweepStepResult", "SweepResult", "plan_sweep", "run_sweep"]


@dataclass(frozen=True)
class SweepStep:
    """One step of a sensitivity sweep: keep ``layers`` out of INT8.

    Attributes
    ----------
    n : int
        How many of the most sensitive layers are kept out of INT8.
    layers : tuple of str
        Their names (ONNX node names = TensorRT layer names).
    mode : str
        ``"layer_precision"``: the recipe pins them to FP16 (TensorRT <= 10, implicit
        INT8); ``"qdq_exclude"``: the Q/DQ exporter leaves them unquantized (explicit).
    recipe : object, optional
        The step's Recipe in ``layer_precision`` mode.
    exclude : tuple of str
        Node names for ``export_qdq(..., options=QdqOptions(exclude=...))`` in ``qdq_exclude`` mode.
    """

    n: int
    layers: Tuple[str, ...]
    mode: str
    recipe: object = None
    exclude: Tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = {"n": self.n, "layers": list(self.layers), "mode": self.mode, "exclude": list(self.exclude)}
        if self.recipe is not None and hasattr(self.recipe, "to_json"):
            import json

            d["recipe"] = json.loads(self.recipe.to_json())
        return d


_MODES = ("auto", "layer_precision", "qdq_exclude")


def plan_sweep(
    ranked_layers: Union[ErrorReport, Sequence[str]],
    steps: Sequence[int] = (0, 1, 2, 4, 8),
    recipe=None,
    mode: str = "auto",
    trt_major: Optional[int] = None,
    keep_precision: str = "fp16",
) -> Tuple[SweepStep, ...]:
    """Plan the sweep: step N keeps the N most sensitive layers out of INT8.

    Parameters
    ----------
    ranked_layers : ErrorReport or sequence of str
        Layers, most sensitive first.
    steps : sequence of int
        Values of N; values above the number of layers are clipped, duplicates dropped.
    recipe : Recipe, optional
        Base recipe for ``layer_precision`` mode (needed there).
    mode : str
        ``"auto"`` picks ``layer_precision`` when ``trt_major`` <= 10 and a recipe is
        given, else ``qdq_exclude``; TensorRT 11 has no layer precisions.
    trt_major : int, optional
        Installed TensorRT major version, for ``auto``.
    keep_precision : str
        Precision the kept layers get in ``layer_precision`` mode.

    Raises
    ------
    UserError
        Unknown mode, or ``layer_precision`` without a recipe or on TensorRT 11.
    """
    if mode not in _MODES:
        raise UserError(f"Unknown sweep mode {mode!r}.", f"Modes: {', '.join(_MODES)}.", "Pass one of them.")
    layers = list(ranked_layers.ranked_layers() if isinstance(ranked_layers, ErrorReport) else ranked_layers)
    if mode == "auto":
        mode = "layer_precision" if (recipe is not None and (trt_major is None or trt_major <= 10)) else "qdq_exclude"
    if mode == "layer_precision":
        if recipe is None:
            raise UserError("A layer-precision sweep needs a base recipe.", None, "Pass recipe=your INT8 recipe.")
        if trt_major is not None and trt_major >= 11:
            raise UserError(
                f"TensorRT {trt_major} has no per-layer precisions.",
                "TensorRT 11 removed layer.precision; strong typing decides precisions from the model.",
                "Use mode='qdq_exclude' with an explicitly quantized (Q/DQ) model.",
            )
    plan: List[SweepStep] = []
    seen = set()
    for n in steps:
        n = max(0, min(int(n), len(layers)))
        if n in seen:
            continue
        seen.add(n)
        chosen = tuple(layers[:n])
        if mode == "layer_precision":
            plan.append(SweepStep(n=n, layers=chosen, mode=mode, recipe=_keep_layers(recipe, chosen, keep_precision)))
        else:
            plan.append(SweepStep(n=n, layers=chosen, mode=mode, exclude=chosen))
    return tuple(plan)


def _keep_layers(recipe, layers: Sequence[str], precision: str):
    from ..recipe.fields import LayerPrecision

    if not layers:
        return recipe
    kept = tuple(LayerPrecision(pattern=name, precision=precision, regex=False) for name in layers)
    flags = tuple(recipe.flags)
    if precision not in flags:
        flags = flags + (precision,)
    # Without a constraint TensorRT may still choose INT8 for a pinned layer.
    constraints = recipe.precision_constraints if recipe.precision_constraints != "none" else "prefer"
    return recipe.replace(layer_precisions=tuple(recipe.layer_precisions) + kept, flags=flags,
                          precision_constraints=constraints)


@dataclass(frozen=True)
class SweepStepResult:
    """Accuracy and latency of one sweep step.

    Attributes
    ----------
    step : SweepStep
    metrics : dict
        Output name -> OutputMetrics against the FP32 reference (empty on error).
    median_ms : float, optional
        Benchmark median latency.
    error : str, optional
        Why the step failed (build or run), as the user should read it.
    """

    step: SweepStep
    metrics: Dict[str, OutputMetrics] = field(default_factory=dict)
    median_ms: Optional[float] = None
    error: Optional[str] = None

    @property
    def worst_snr_db(self) -> float:
        """The lowest output SNR (``nan`` without metrics)."""
        return min((m.snr_db for m in self.metrics.values()), default=math.nan)

    @property
    def worst_cosine(self) -> float:
        return min((m.cosine for m in self.metrics.values()), default=math.nan)

    def to_dict(self) -> dict:
        return {"step": self.step.to_dict(), "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
                "median_ms": self.median_ms, "error": self.error,
                "worst_snr_db": json_float(self.worst_snr_db), "worst_cosine": json_float(self.worst_cosine)}


@dataclass(frozen=True)
class SweepResult:
    """All steps of a sweep, in the planned order."""

    steps: Tuple[SweepStepResult, ...]

    def to_rows(self) -> List[dict]:
        return [{"n": r.step.n, "layers": ", ".join(r.step.layers), "worst_snr_db": r.worst_snr_db,
                 "worst_cosine": r.worst_cosine, "median_ms": r.median_ms, "error": r.error} for r in self.steps]

    def to_dict(self) -> dict:
        return {"steps": [r.to_dict() for r in self.steps]}


def run_sweep(
    plan: Sequence[SweepStep],
    build: Callable[[SweepStep], object],
    evaluate: Callable[[object], Mapping[str, OutputMetrics]],
    benchmark: Optional[Callable[[object], object]] = None,
    on_step: Optional[Callable[[SweepStepResult], None]] = None,
) -> SweepResult:
    """Build, evaluate and time each step; a failing step is recorded, not fatal.

    Parameters
    ----------
    plan : sequence of SweepStep
        From :func:`plan_sweep`.
    build : callable
        ``build(step) -> artifact`` (e.g. a BuildResult, or an engine path).
    evaluate : callable
        ``evaluate(artifact) -> {output: OutputMetrics}`` against the FP32 reference.
    benchmark : callable, optional
        ``benchmark(artifact)`` returning a median latency in ms, or an object with
        ``median_ms`` (a BenchResult).
    on_step : callable, optional
        Called with each finished step (progress display).

    Returns
    -------
    SweepResult
        Completed steps; on Ctrl-C, those finished so far.
    """
    results: List[SweepStepResult] = []
    try:
        for step in plan:
            try:
                artifact = build(step)
                metrics = dict(evaluate(artifact))
                median = None
                if benchmark is not None:
                    b: Any = benchmark(artifact)
                    median = float(getattr(b, "median_ms", b))
                res = SweepStepResult(step=step, metrics=metrics, median_ms=median)
            except UserError as exc:
                res = SweepStepResult(step=step, error=exc.message)
            results.append(res)
            if on_step is not None:
                on_step(res)
    except KeyboardInterrupt:
        pass
    return SweepResult(steps=tuple(results))
