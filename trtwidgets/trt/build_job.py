"""One build of a measurement, and the progress events a measurement reports.

:func:`build_one` builds one spec (:func:`~.measure_builds.build_specs`) into its cache folder: in this
process, or as a task on a Dask GPU worker (:mod:`.dask_measure`). :class:`MeasureProgress` events are shared by
the builds, the timing and the check (:mod:`.measure`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional

from ..core.common.errors import UserError
from ..core.common.progress import ProgressEvent
from ..core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ

__all__ = ["FLAGS", "MeasureProgress", "build_one", "engine_in", "implicit_int8_reason", "notify"]

#: The builder flags of each kind of build.
FLAGS = {FP16: ("fp16",), INT8_IMPLICIT: ("fp16", "int8"), QDQ: ("fp16", "int8")}


@dataclass(frozen=True)
class MeasureProgress(ProgressEvent):
    """A measurement's :class:`~trtwidgets.core.common.progress.ProgressEvent`: its phase (``stage``) is
    ``"build"``, ``"time"`` or ``"check"``, ``done`` of ``total`` units, ``name`` the engine it was about.

    Make one with :meth:`of`; ``stage``, ``done`` and ``name`` read the event's ``phase``, ``step`` and ``detail``.
    """

    cached: bool = False
    failed: bool = False

    @classmethod
    def of(cls, stage: str, done: int, total: int, name: str = "", cached: bool = False,
           failed: bool = False) -> "MeasureProgress":
        """The event of ``done`` of ``total`` units of ``stage`` (a build of ``name``: cached or failed)."""
        return cls("step", stage, step=done, total=total, detail=name, source="measure", cached=cached,
                   failed=failed)

    @property
    def stage(self) -> str:
        return self.phase

    @property
    def done(self) -> int:
        return self.step

    @property
    def name(self) -> str:
        return self.detail

    def text(self) -> str:
        """One line: builds done and left (with what happened to this one), the round, or the engine checked."""
        total = self.total or 0
        if self.stage == "build":
            how = "failed" if self.failed else ("cached" if self.cached else "built")
            return f"builds {self.done}/{total} done, {total - self.done} left ({self.name} {how})"
        if self.stage == "check":
            return f"accuracy of engine {self.done}/{total} on the held-back samples"
        return f"timing round {self.done}/{total}"


def engine_in(folder: Path) -> Optional[Path]:
    """The engine of a published build folder (``build()`` publishes whole folders only), or None."""
    from .build_phases.result import ENGINE_FILE

    path = folder / ENGINE_FILE
    return path if path.is_file() else None


def _recipe(spec: Mapping):
    from ..core.model.load import load_model
    from ..core.recipe.fields import CalibratorSpec
    from ..core.recipe.profiles import Profile, ShapeRange
    from ..core.recipe.recipe import Recipe

    kw: Dict[str, object] = {"flags": tuple(FLAGS[spec["kind"]]), "timing_cache": spec["timing_cache"]}
    if spec.get("shapes"):
        kw["profiles"] = (Profile({k: ShapeRange.fixed(v) for k, v in spec["shapes"].items()}),)
    if spec.get("opt_level") is not None:
        kw["builder_optimization_level"] = int(spec["opt_level"])
    if spec["kind"] == INT8_IMPLICIT:
        kw["calibrator"] = CalibratorSpec(kind="toolkit", cache_path=spec["calibration_cache"])
    return Recipe.for_model(load_model(spec["model_path"]), **kw)


def build_one(spec: Mapping) -> dict:
    """Build one spec into ``spec["out_dir"]`` unless an engine is already there (the cache).

    ``spec`` has ``key, name, kind, model_path, shapes, out_dir, timing_cache`` and
    optionally ``calibration_cache, opt_level``. Returns ``{key, engine_path, build_seconds,
    cached, error}``; a failed build is an ``error``, never an exception (the others go on).
    """
    out = Path(spec["out_dir"])
    hit = engine_in(out)
    if hit is not None:
        return {"key": spec["key"], "engine_path": str(hit), "build_seconds": 0.0, "cached": True, "error": ""}
    from .build import build

    start = time.perf_counter()
    try:
        res = build(_recipe(spec), out_dir=out, progress=False)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        msg = (exc.message if isinstance(exc, UserError) else "") or str(exc)
        return {"key": spec["key"], "engine_path": "", "build_seconds": time.perf_counter() - start, "cached": False,
                "error": f"{type(exc).__name__}: {msg}"[:2000]}
    return {"key": spec["key"], "engine_path": res.engine_path, "build_seconds": float(res.build_seconds),
            "cached": False, "error": ""}


def notify(progress, event: MeasureProgress) -> None:
    """Hand ``event`` to ``progress``: a callable, or True for a line on stderr."""
    if callable(progress):
        progress(event)
    elif progress:
        print(f"[measure] {event.text()}", file=sys.stderr, flush=True)


def implicit_int8_reason(trt_module=None) -> Optional[str]:
    """Why this TensorRT cannot build implicit INT8 (no INT8 flag, no calibrators), or None when it can."""
    from .features import features

    f = features(trt_module)
    if not f.has_flag("int8"):
        return f.explain("int8") or f"TensorRT {f.version} has no INT8 precision flag."
    if not f.calibrators:
        return f.explain("calibrators") or f"TensorRT {f.version} has no INT8 calibrators."
    return None
