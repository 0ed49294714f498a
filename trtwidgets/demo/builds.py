"""The committed TensorRT 8.6 builds of the demo model, side by side with a task metric.

The saved builds (``tests/fixtures/trt86``) keep their inspector JSON and latency, not
the GPU-specific engine, so the engine cannot be run here. The task metric (top-1
orientation accuracy on rendered text lines, :func:`trtwidgets.demo.orientation_top1`)
is measured with ONNX Runtime on the ONNX model each build was made from, and every row
says which model that was.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

#: The static batch-1 builds of the demo, in the order a table shows them.
STATIC_BUILDS = ("cls_static_fp32", "cls_static_fp16", "cls_static_int8_entropy2", "cls_static_qdq_int8")
#: The batch-32 builds measured on a GPU machine (the planner's candidates), when committed.
MEASURED_B32 = "cls_b32_measured"

_FLOAT_SOURCE = "ONNX Runtime, the FP32 model the build was made from (the engine's own rounding not included)"


def demo_build_rows(work_dir: Union[str, os.PathLike], names: Sequence[str] = STATIC_BUILDS,
                    root: Optional[Union[str, os.PathLike]] = None) -> List[dict]:
    """Rows of :data:`~trtwidgets.core.engine.build_table.BUILD_TABLE_COLUMNS` for saved demo builds.

    Parameters
    ----------
    work_dir : path
        Where the Q/DQ model re-exported from TensorRT's Entropy2 cache is written.
    names : sequence of str
        Saved build names (those absent are left out).
    root : path, optional
        The saved-builds folder (default: :func:`saved_builds_root`).
    """
    from ..core.calibration.cache import read_cache
    from ..core.engine.build_table import build_rows
    from ..core.engine.saved_build import find_saved_builds, load_saved_build, saved_builds_root
    from ..core.model.load import load_model
    from ..core.qdq.export import export_qdq
    from ..core.qdq.options import QdqOptions
    from . import MODEL_PATH, orientation_top1

    base = Path(root) if root is not None else saved_builds_root()
    saved = find_saved_builds(base) if base is not None else {}
    builds = {n: load_saved_build(saved[n]) for n in names if n in saved}
    float_top1 = orientation_top1(MODEL_PATH)
    metrics: Dict[str, float] = {}
    sources: Dict[str, str] = {}
    for name in builds:
        if "qdq" in name and base is not None:
            cache = base / "cls_entropy2.cache"

            out = Path(work_dir) / f"{name}.onnx"
            # The build's model was the toolkit's export of TensorRT's own Entropy2 ranges; the same export today.
            export_qdq(load_model(MODEL_PATH), read_cache(cache).amax, out, options=QdqOptions(trt_version="8.6"))
            metrics[name] = orientation_top1(out)
            # TensorRT's cache was made on the 32 bundled crops (mostly not text): the row scores that calibration.
            sources[name] = ("ONNX Runtime, the Q/DQ export of TensorRT's Entropy2 ranges from the 32 bundled crops, "
                             "not the text lines (today's placement)")
        else:
            metrics[name], sources[name] = float_top1, _FLOAT_SOURCE
    rows = build_rows(builds, metrics, sources)
    for row in rows:
        if row["INT8"] and "qdq" not in row["build"]:
            # An implicit engine that ran INT8 computes what no ONNX model here computes: no metric, and why.
            row.update(metric=float("nan"), metric_source="not measured: needs the engine (TensorRT's own INT8 choices)")
    return rows


def measured_b32_folder(root: Optional[Union[str, os.PathLike]] = None) -> Optional[Path]:
    """Where the batch-32 measured builds would be (``<saved builds>/cls_b32_measured``), or None without a root."""
    from ..core.engine.saved_build import saved_builds_root

    base = Path(root) if root is not None else saved_builds_root()
    return None if base is None else base / MEASURED_B32


def text_line_export(path: Union[str, os.PathLike], samples: int = 16, method: str = "entropy",
                     trt_version: str = "8.6") -> Path:
    """Export the demo model as Q/DQ with ranges calibrated on the text lines, and return the export's path.

    The saved Q/DQ build (``cls_static_qdq_int8``) takes its ranges from TensorRT's calibration cache of
    the bundled scikit-image crops, which are mostly not text. This is the same export (same placement,
    same TensorRT version) with ranges from ``samples`` lines of the labelled set's calibration part,
    so that scoring both on the held-back part (:func:`trtwidgets.demo.orientation_scores`) tells what the
    calibration data costs from what INT8 costs.
    """
    from ..core.calibration.calibration import Calibration
    from ..core.calibration.collect import collect_stats
    from ..core.model.load import load_model
    from ..core.qdq.export import export_qdq
    from ..core.qdq.options import QdqOptions
    from . import MODEL_PATH
    from .labelled_set import labelled_set

    model = load_model(MODEL_PATH)
    stats = collect_stats(model, labelled_set("calibration").feeds(samples), progress=False)
    export_qdq(model, Calibration.fit(stats, method), path, options=QdqOptions(trt_version=trt_version))
    return Path(path)
