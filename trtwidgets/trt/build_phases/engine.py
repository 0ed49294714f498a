"""The build itself: ``build_serialized_network``, then the inspector's view of the engine it made."""

from __future__ import annotations

import time

from ...core.common.errors import BuildError, UserError
from ..layer_info import inspector_json_for
from .profiles import opt_shapes
from .state import BuildState
from ..probe import probe


def build_engine(state: BuildState) -> None:
    """Run ``build_serialized_network`` (calibration included); the engine's bytes go to ``state.plan``."""
    trt = state.trt
    state.progress.start("Building engine")
    t0 = time.perf_counter()
    try:
        plan = state.builder.build_serialized_network(state.network, state.config)
    except Exception as exc:
        plan = None
        state.note("ERROR", f"build_serialized_network raised {type(exc).__name__}: {exc}")
    state.build_seconds = time.perf_counter() - t0
    state.progress.finish_all()
    err = None if state.calibrator is None else state.calibrator.error
    if err is not None:
        if isinstance(err, UserError):
            raise err
        raise state.fail("Calibration failed while feeding batches to TensorRT.", [f"{type(err).__name__}: {err}"],
                         codes=("CALIBRATION_DATA_ERROR",))
    if plan is None or probe(plan, "nbytes", 1) == 0:
        if state.progress.cancel is not None and state.progress.cancel.is_set():
            raise BuildError("The build was cancelled.", fix="Start it again when ready.")
        raise state.fail(f"TensorRT could not build {state.model.path.name}.", codes=("BUILD_FAILED",))
    state.plan = bytes(memoryview(plan))
    del trt


def inspect_engine(state: BuildState) -> str:
    """The engine-inspector JSON of the built engine, with a context at the calibration profile's opt shapes."""
    trt = state.trt
    state.progress.start("Inspecting engine")
    runtime = trt.Runtime(state.logger)
    engine = runtime.deserialize_cuda_engine(state.plan)
    if engine is None:
        raise state.fail("TensorRT could not load the engine it just built.")
    profile = state.recipe.calibration_profile if state.recipe.profiles else 0
    shapes = {name: tuple(s) for name, s in opt_shapes(state.recipe).items()} or None
    try:
        text = inspector_json_for(engine, shapes, profile, trt)
    finally:
        # TensorRT wants the engine destroyed before the runtime that made it.
        del engine
        del runtime
    state.progress.finish("Inspecting engine")
    return text
