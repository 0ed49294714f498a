"""What a build leaves behind: the files of a build directory and the :class:`BuildResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from ..logger import LogLine

#: File names inside a build directory.
ENGINE_FILE = "engine.plan"
GRAPH_FILE = "engine.graph.json"
RECIPE_FILE = "recipe.json"
LOG_FILE = "build.log.jsonl"
CACHE_FILE = "calibration.cache"
META_FILE = "build.json"
LAYERS_FILE = "network_layers.json"


@dataclass(frozen=True)
class BuildResult:
    """A finished build (all paths are inside :attr:`out_dir`).

    Attributes
    ----------
    engine_path, inspector_json_path, recipe_path, log_path : str
    inspector_json : str
        TensorRT's DETAILED engine-inspector JSON (parse with ``json.loads(text, strict=False)``).
    log : tuple of LogLine
        TensorRT's messages (INFO and more severe) and the toolkit's own notes.
    build_seconds : float
        Wall time of ``build_serialized_network`` (calibration included).
    trt_version : str
    gpu_name : str, optional
    calibration_cache_path : str, optional
        The calibration cache TensorRT wrote (its own calibrators) or was given (the toolkit's).
    out_dir : str
    compute_capability : tuple of int, optional
    engine_bytes : int
    phases : tuple of dict
        ``{"phase", "parent", "seconds"}`` per build phase seen.
    calibration_batches : int
        Batches TensorRT asked for (``get_batch`` calls that returned data).
    calibration_get_batch_calls : int, optional
        All ``get_batch`` calls, including the final one that ends the data; None without a calibrator.
    calibration_shapes : tuple of dict
        Input shapes of each calibration batch fed.
    lint_codes : tuple of str
        Codes of lint's findings before the build.
    """

    engine_path: str
    inspector_json_path: str
    inspector_json: str = field(repr=False)
    recipe_path: str
    log: Tuple[LogLine, ...] = field(repr=False)
    build_seconds: float
    trt_version: str
    gpu_name: Optional[str]
    calibration_cache_path: Optional[str]
    out_dir: str
    log_path: str = ""
    compute_capability: Optional[Tuple[int, int]] = None
    engine_bytes: int = 0
    phases: Tuple[dict, ...] = field(default=(), repr=False)
    calibration_batches: int = 0
    calibration_get_batch_calls: Optional[int] = None
    calibration_shapes: Tuple[Dict[str, Tuple[int, ...]], ...] = field(default=(), repr=False)
    lint_codes: Tuple[str, ...] = ()

    def warnings(self) -> Tuple[str, ...]:
        """The build's warning lines."""
        return tuple(line.message for line in self.log if line.severity == "WARNING")

    def summary(self) -> str:
        """A few lines for a person."""
        lines = [f"engine   {self.engine_path} ({self.engine_bytes / 1e6:.2f} MB)",
                 f"built in {self.build_seconds:.1f} s with TensorRT {self.trt_version} on {self.gpu_name or 'unknown GPU'}"]
        if self.calibration_cache_path:
            lines.append(f"cache    {self.calibration_cache_path} ({self.calibration_batches} calibration batch(es))")
        n_warn = sum(1 for line in self.log if line.severity == "WARNING")
        lines.append(f"log      {self.log_path} ({len(self.log)} lines, {n_warn} warnings)")
        return "\n".join(lines)
