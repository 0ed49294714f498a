"""Build a TensorRT engine from a :class:`~trtwidgets.core.recipe.recipe.Recipe`.

:func:`build` parses the ONNX model, applies everything the recipe says (flags, precision
constraints, layer precisions, profiles, calibrator, optimization level, workspace, timing cache,
tactic sources), builds with ``ProfilingVerbosity.DETAILED`` and writes the engine, the inspector
JSON, the recipe, the log and the calibration cache into a new build directory, published
atomically (:mod:`trtwidgets.trt.build_dir`). Lint runs first, so a cause it predicts is in the log
before TensorRT starts; a failure raises :class:`~trtwidgets.core.common.errors.BuildError` with
TensorRT's decisive lines and, where known, the cause's lint code (:mod:`trtwidgets.trt.diagnose`).

Each phase is a module of :mod:`trtwidgets.trt.build_phases`, in the order it runs: ``prepare``,
``network``, ``config``, ``timing_cache``, ``profiles``, ``calibrator``, ``engine``, ``write``;
they share one ``state.BuildState``, and ``failure`` makes the BuildError. Only features the
installed TensorRT has are used (:func:`trtwidgets.trt.features.features`).
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Iterable, Optional, Union

from .build_dir import check_out_dir, default_build_dir, discard, staging_dir
from .build_phases.calibrator import attach_calibrator
from .build_phases.config import (CUBLAS_CUDNN, attach_progress_monitor, configure, match_layer_precisions,
                                  tactic_source_names)
from .build_phases.engine import build_engine, inspect_engine
from .build_phases.failure import build_failure
from .build_phases.network import make_builder, parse_network
from .build_phases.prepare import check_gpu, load_model_checked
from .build_phases.profiles import add_profiles, feed_opt_shapes
from .build_phases.result import (CACHE_FILE, ENGINE_FILE, GRAPH_FILE, LAYERS_FILE, LOG_FILE, META_FILE, RECIPE_FILE,
                                  BuildResult)
from .build_phases.state import BuildState
from .build_phases.timing_cache import attach_timing_cache, save_timing_cache, timing_cache_plan
from .build_phases.write import write_build_dir
from .logger import LogLine

__all__ = ["BuildResult", "build", "build_failure", "feed_opt_shapes", "match_layer_precisions", "tactic_source_names",
           "timing_cache_plan", "CUBLAS_CUDNN", "ENGINE_FILE", "GRAPH_FILE", "RECIPE_FILE", "LOG_FILE", "CACHE_FILE",
           "META_FILE", "LAYERS_FILE"]


def build(recipe, out_dir: Union[str, os.PathLike, None] = None, progress=True,
          on_log: Optional[Callable[[LogLine], None]] = None, *, calibration_data=None,
          tactic_sources: Optional[Iterable[str]] = None, cancel: Optional[threading.Event] = None,
          verbose_log: bool = False, builds_root: Union[str, os.PathLike, None] = None,
          max_calibration_batches: Optional[int] = None) -> BuildResult:
    """Build the engine a recipe describes and write it to a new build directory.

    Parameters
    ----------
    recipe : Recipe
    out_dir : path, optional
        The build directory; it must not exist or be empty. Default:
        ``builds/<YYYYmmdd-HHMMSS>-<recipe hash>/`` (``builds_root``, or
        ``$TRTWIDGETS_BUILDS``, replaces ``builds``).
    progress : bool or callable
        True: tqdm bars (plain lines without tqdm); a callable gets every
        :class:`~trtwidgets.core.common.progress.ProgressEvent`; False: silent.
    on_log : callable, optional
        Called with each :class:`~trtwidgets.trt.logger.LogLine` as TensorRT logs it.
    calibration_data : optional
        Overrides ``recipe.calibration_data``: anything
        :func:`~trtwidgets.core.calibration.data.iter_feeds` takes.
    tactic_sources : iterable of str, optional
        Exactly these tactic sources (``"CUBLAS"``, ``"EDGE_MASK_CONVOLUTIONS"``...). Default:
        TensorRT's, minus cuBLAS/cuBLASLt/cuDNN when ``TRTWIDGETS_NO_CUBLAS_CUDNN=1``.
    cancel : threading.Event, optional
        Set it to stop the build (TensorRT >= 10 stops at the next step; 8.6 cannot be stopped).
    verbose_log : bool
        Keep VERBOSE lines in the log (large).
    max_calibration_batches : int, optional
        Feed TensorRT's calibrator at most this many batches.

    Returns
    -------
    BuildResult

    Raises
    ------
    TensorRTUnavailable
        No TensorRT, no GPU, or a recipe feature this TensorRT lacks.
    RecipeError
        The recipe does not fit the model (changed model, profiles, layer patterns, calibrator inputs).
    CalibrationDataError
        The calibration data does not fit the network.
    BuildError
        TensorRT failed; carries the decisive lines and the cause's code.
    """
    state = BuildState(recipe, progress, on_log, calibration_data, tactic_sources, cancel, verbose_log,
                       max_calibration_batches)
    recipe_json = recipe.to_json()
    final = check_out_dir(out_dir) if out_dir is not None else default_build_dir(recipe_json, builds_root)
    load_model_checked(state)
    check_gpu(state)
    try:
        make_builder(state)
        parse_network(state)
        state.staging = staging_dir(final)
        configure(state)
        attach_timing_cache(state)
        add_profiles(state)
        attach_calibrator(state)
        attach_progress_monitor(state)
        build_engine(state)
        save_timing_cache(state)
        inspector_json = inspect_engine(state)
        result = write_build_dir(state, final, recipe, recipe_json, inspector_json)
    except BaseException:
        state.progress.finish_all()
        discard(state.staging)
        raise
    finally:
        state.close()
        if hasattr(state.sink, "close"):
            state.sink.close()
    return result
