"""Build a TensorRT engine from a :class:`~trtwidgets.core.recipe.recipe.Recipe`.

:func:`build` parses the ONNX model, applies everything the recipe says (flags,
precision constraints, per-layer precisions, optimization profiles, the
calibrator and its profile, optimization level, workspace, timing cache, tactic
sources), builds with ``ProfilingVerbosity.DETAILED``, and writes the engine,
the inspector JSON (execution context at the calibration profile's opt
shapes), the recipe, the log and the calibration cache into a new build
directory, published atomically (:mod:`trtwidgets.trt.build_dir`).

A failure raises :class:`~trtwidgets.core.common.errors.BuildError` with TensorRT's
decisive lines (errors first) and, where known, the cause as a lint code
(:mod:`trtwidgets.trt.diagnose`). Lint runs before the build too, so a cause it
predicts (e.g. ``QDQ_REQUIRES_INT8``) is in the log before TensorRT starts.

Only features that the installed TensorRT has are used: flags that do not
exist are refused with the explanation from :func:`trtwidgets.trt.features.features`.
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..core.common.errors import BuildError, CalibrationDataError, RecipeError, TensorRTUnavailable, UserError
from . import version_of
from .build_dir import check_out_dir, default_build_dir, discard, publish, staging_dir, write_bytes_atomic
from .logger import LogCollector, LogLine, decisive_lines

#: File names inside a build directory.
ENGINE_FILE = "engine.plan"
GRAPH_FILE = "engine.graph.json"
RECIPE_FILE = "recipe.json"
LOG_FILE = "build.log.jsonl"
CACHE_FILE = "calibration.cache"
META_FILE = "build.json"
LAYERS_FILE = "network_layers.json"

#: Tactic sources backed by cuBLAS / cuDNN; off when TRTWIDGETS_NO_CUBLAS_CUDNN=1.
CUBLAS_CUDNN = ("CUBLAS", "CUBLAS_LT", "CUDNN")

_LAYER_DTYPES = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16", "int8": "INT8", "fp8": "FP8"}
# Only layers computing on floating-point tensors can be pinned; shape and index math stays as it is.
_PINNABLE = ("FLOAT", "HALF", "BF16", "INT8", "FP8")


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


# -- helpers that need no TensorRT ------------------------------------------------------------------


def tactic_source_names(recipe=None, requested: Optional[Iterable[str]] = None, env: Optional[Mapping[str, str]] = None
                        ) -> Tuple[Optional[Tuple[str, ...]], Tuple[str, ...]]:
    """Which tactic sources to enable exactly, and which to drop from TensorRT's default.

    Returns
    -------
    (exact, drop)
        ``exact``: the caller's (or recipe's ``tactic_sources``) names, upper-case, or None for TensorRT's
        default; ``drop``: cuBLAS/cuLASLt/cuDNN when ``TRTWIDGETS_NO_CUBLAS_CUDNN=1`` or the recipe's
        ``no_cublas_cudnn`` is true, else empty.
    """
    env = os.environ if env is None else env
    if requested is None and recipe is not None:
        requested = getattr(recipe, "tactic_sources", None)
    exact = None if requested is None else tuple(str(s).upper() for s in requested)
    drop: Tuple[str, ...] = ()
    if env.get("TRTWIDGETS_NO_CUBLAS_CUDNN", "").strip().lower() in ("1", "true", "yes", "on") \
            or bool(getattr(recipe, "no_cublas_cudnn", False)):
        drop = CUBLAS_CUDNN
    if exact is not None:
        exact = tuple(s for s in exact if s not in drop)
    return exact, drop


def match_layer_precisions(layer_names: Sequence[str], overrides: Sequence) -> Tuple[Dict[str, str], List[str]]:
    """Layer name -> precision for every override (the last matching override wins), and unmatched patterns."""
    chosen: Dict[str, str] = {}
    unmatched = []
    for lp in overrides:
        hits = [n for n in layer_names if lp.matches(n)]
        if not hits:
            unmatched.append(lp.pattern)
        for n in hits:
            chosen[n] = lp.precision
    return chosen, unmatched


def _unmatched_error(unmatched: Sequence[str], names: Sequence[str]) -> RecipeError:
    hints = []
    for p in unmatched[:3]:
        close = difflib.get_close_matches(p, names, n=3, cutoff=0.5)
        if close:
            hints.append(f"{p!r}: did you mean {', '.join(map(repr, close))}?")
    return RecipeError(
        f"Layer-precision pattern(s) {', '.join(map(repr, unmatched))} match no layer of the parsed network.",
        "Patterns are matched against TensorRT's layer names (usually the ONNX node names). " + " ".join(hints),
        f"Pick names from the network's layer list ({len(names)} layers, e.g. {', '.join(map(repr, names[:4]))}), "
        "or use a regex.")


def _features(trt):
    try:
        from .features import features
    except ImportError:  # pragma: no cover - features.py is part of the package
        return None
    return features(trt)


def _major(trt) -> int:
    try:
        return int(version_of(trt).split(".")[0])
    except ValueError:
        return 0


_NP_TYPES = {"FLOAT": "float32", "HALF": "float16", "INT8": "int8", "INT32": "int32", "INT64": "int64",
             "BOOL": "bool", "UINT8": "uint8"}


def _nptype(trt, dtype):
    """numpy dtype of a TensorRT DataType (``tensorrt.nptype`` lives in the package, not the bare bindings)."""
    import numpy as np

    name = getattr(dtype, "name", str(dtype).rsplit(".", 1)[-1])
    if name in _NP_TYPES:
        return np.dtype(_NP_TYPES[name])
    fn = getattr(trt, "nptype", None)
    if fn is None:
        raise TensorRTUnavailable(f"Network input type {name} has no numpy equivalent for calibration.",
                                  fix="Calibrate a model whose inputs are float32/float16/int8/int32.")
    return np.dtype(fn(dtype))


def _lint(model, recipe, trt) -> tuple:
    try:
        from ..core.model.lint import lint
    except ImportError:
        return ()
    cal = recipe.calibrator.kind
    try:
        return tuple(lint(model, flags=recipe.flags, trt_version=str(version_of(trt)),
                          calibrator=None if cal == "none" else cal, profiles=list(recipe.profiles) or None))
    except UserError:
        return ()


def feed_opt_shapes(specs: Mapping[str, Tuple[Sequence[int], object]]) -> Dict[str, List[int]]:
    """Input name -> opt shape as a list of ints, from ``{name: (shape, numpy dtype)}`` input specs.

    :func:`~trtwidgets.core.calibration.data.iter_feeds` wants shapes only; the specs
    also carry each input's dtype (handing it the pairs failed on the GPU with
    ``int() argument must be ... not 'tuple'`` inside TensorRT's ``get_batch``).
    """
    return {name: [int(d) for d in shape] for name, (shape, _dtype) in specs.items()}


def timing_cache_plan(optimization_level: Optional[int], file_bytes: bytes, empty_bytes: bytes = b"") -> Tuple[str, str]:
    """What to do with a timing cache file: ``("off" | "new" | "load", why)``.

    ``"off"``: builder optimization level 0 takes the first tactic that runs and
    does not use a timing cache, so the file is neither read nor written (saving
    such a build's cache wrote an empty cache that TensorRT 8.6 then refused to read:
    ``Myelin error from unknown graph`` / ``The timing cache will not be used!``).
    ``"new"``: no file, an empty one, or one that is byte-equal to a fresh empty
    cache (``empty_bytes``): start a new cache. ``"load"``: read the file.
    """
    if optimization_level is not None and int(optimization_level) == 0:
        return "off", "not used at builder optimization level 0 (TensorRT takes the first tactic that runs)."
    if not file_bytes:
        return "new", "no cache yet; a new one is written after the build."
    if empty_bytes and file_bytes == empty_bytes:
        return "new", "the file holds an empty cache; a new one is written after the build."
    return "load", f"reusing {len(file_bytes)} bytes of earlier timings."


def _opt_shapes(recipe) -> Dict[str, Tuple[int, ...]]:
    if not recipe.profiles:
        return {}
    return {k: tuple(v) for k, v in recipe.profiles[recipe.calibration_profile].opt_shapes().items()}


def build_failure(what: str, lines: Sequence[LogLine], lint_findings: Sequence = (), extra_messages: Sequence[str] = (),
                  fix: Optional[str] = None, codes: Sequence[str] = ()) -> BuildError:
    """The BuildError for a failed build: decisive lines (errors first), causes as lint codes, what to do.

    Parameters
    ----------
    what : str
        One line: what failed.
    lines : sequence of LogLine
        The build's log; ``err.log`` keeps all of it.
    lint_findings : sequence of Finding
        Lint's findings before the build; its errors count as causes.
    extra_messages : sequence of str
        Messages from outside the log (e.g. an exception in the calibrator), shown first.
    fix : str, optional
        Overrides the fix derived from the causes.
    codes : sequence of str
        Codes known beforehand (e.g. ``PARSE_FAILED``), listed first.
    """
    from .diagnose import diagnose, summarize_causes

    lines = tuple(lines)
    decisive = list(extra_messages) + [d for d in decisive_lines(lines) if d not in extra_messages]
    # TensorRT's own words only: lint's notes quote TensorRT texts and would match causes that did not occur
    # (lint's error findings are passed to diagnose() separately).
    trt_lines = [line for line in lines if line.source != "trtwidgets"]
    texts = list(extra_messages) + [line.message for line in trt_lines if line.is_error] \
        + [line.message for line in trt_lines if line.severity == "WARNING"]
    causes = diagnose(texts, lint_findings)
    why, cause_fix = summarize_causes(causes)
    if why is None:
        why = "TensorRT's messages below say what it stopped at." if decisive else \
            "TensorRT logged no error; run again with verbose_log=True for its full log."
    err = BuildError(what, why, fix or cause_fix, log_lines=decisive[:12],
                     codes=tuple(dict.fromkeys(list(codes) + [c.code for c in causes])))
    err.log = lines  # the whole log, for the panel's "show log"
    return err


class _Build:
    """One build's state; :func:`build` is the public entry point."""

    def __init__(self, recipe, out_dir, progress, on_log, calibration_data, tactic_sources, cancel, verbose_log,
                 builds_root, max_calibration_batches):
        from . import tensorrt
        from .progress import BuildProgress, LogPhaseParser, TqdmSink

        self.trt = tensorrt()
        self.recipe = recipe
        self.out_dir = out_dir
        self.calibration_data = calibration_data
        self.tactic_sources = tactic_sources
        self.builds_root = builds_root
        self.max_calibration_batches = max_calibration_batches
        if progress is True:
            sink = TqdmSink()
        elif callable(progress):
            sink = progress
        else:
            sink = None
        self.sink = sink
        self.progress = BuildProgress(sink, cancel)
        self.collector = LogCollector(on_line=on_log, keep="VERBOSE" if verbose_log else "INFO")
        if not hasattr(self.trt, "IProgressMonitor"):
            self.collector.add_listener(LogPhaseParser(self.progress))
        self.calibrator = None
        self.cache_bytes_used: Optional[bytes] = None
        self.lint_findings: tuple = ()

    def close(self) -> None:
        """Release TensorRT objects, each before the one it came from (config, parser, network, builder)."""
        if self.calibrator is not None and hasattr(self.calibrator, "free"):
            self.calibrator.free()
        for name in ("monitor", "config", "parser", "network", "builder"):
            if name in self.__dict__:
                delattr(self, name)

    # -- notes and failures -------------------------------------------------------------------

    def note(self, severity: str, message: str) -> None:
        self.collector.add(severity, message, source="trtwidgets")

    def fail(self, what: str, extra_messages: Sequence[str] = (), fix: Optional[str] = None,
             codes: Sequence[str] = ()) -> BuildError:
        return build_failure(what, self.collector.lines, self.lint_findings, extra_messages, fix, codes)

    # -- steps ------------------------------------------------------------------------------------

    def load(self):
        from ..core.model.load import load_model
        from ..core.recipe.profiles import profile_problems

        model = load_model(self.recipe.model_path)
        s = model.summary
        if self.recipe.model_sha256 and s.sha256 and self.recipe.model_sha256 != s.sha256:
            raise RecipeError(f"The model {self.recipe.model_path} has changed since the recipe was made.",
                              f"Recipe: sha256 {self.recipe.model_sha256[:12]}..., file: {s.sha256[:12]}....",
                              "Re-create the recipe for this model (its profiles and calibration may no longer fit), "
                              "or restore the model the recipe was made for.")
        problems = profile_problems(self.recipe.profiles, s)
        if problems:
            raise RecipeError(f"The recipe's optimization profiles do not fit the model: {problems[0]}",
                              "\n".join(f"- {p}" for p in problems), "Fix the profiles in the profile editor.")
        missing = [t.name for t in s.dynamic_inputs if not self.recipe.profiles]
        if missing:
            raise RecipeError(f"Input(s) {', '.join(map(repr, missing))} have dynamic dimensions, but the recipe has no "
                              "optimization profile.", "TensorRT needs min/opt/max shapes for every dynamic dimension.",
                              "Add a profile (Recipe.for_model pre-fills one from the model and data).")
        self.model = model
        self.lint_findings = _lint(model, self.recipe, self.trt)
        for f in self.lint_findings:
            if f.severity in ("error", "warning"):
                self.note("WARNING", f"lint {f.code}: {f.message}")

    def gpu(self) -> None:
        from . import cuda

        self.gpu_name, self.cc = None, None
        try:
            cuda.library()
        except TensorRTUnavailable:
            self.note("WARNING", "libcudart not found: the GPU name is unknown and the GPU check is left to TensorRT.")
            return
        cuda.require_gpu()
        try:
            self.gpu_name = cuda.device_name()
            self.cc = cuda.compute_capability()
        except cuda.CudaError as exc:
            self.note("WARNING", f"could not read the GPU's name: {exc}")

    def make_builder(self):
        from .logger import trt_logger

        trt = self.trt
        self.logger = trt_logger(self.collector, trt)
        try:
            builder = trt.Builder(self.logger)
        except TypeError:  # pybind: "factory function returned nullptr"
            builder = None
        if builder is None:
            raise TensorRTUnavailable(
                "TensorRT could not create a Builder: no CUDA GPU visible.",
                " / ".join(decisive_lines(self.collector.lines)) or "CUDA initialisation failed.",
                "Build on a machine with an NVIDIA GPU and a driver that supports this TensorRT's CUDA version.")
        self.builder = builder
        return builder

    def parse(self):
        trt = self.trt
        flags = 0
        if hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH") and _major(trt) < 11:
            flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        if getattr(self.recipe, "strongly_typed", False) and hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
            flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        self.network = self.builder.create_network(flags)
        self.parser = trt.OnnxParser(self.network, self.logger)
        self.progress.start("Parsing ONNX")
        renamed = self._unique_dim_names()
        if renamed is None:
            ok = self.parser.parse_from_file(str(self.model.path))
        else:
            # The path lets the parser find external weights next to the user's file.
            ok = self.parser.parse(renamed, str(self.model.path))
        self.progress.finish("Parsing ONNX")
        if not ok:
            errors = []
            for i in range(self.parser.num_errors):
                e = self.parser.get_error(i)
                node = e.node() if hasattr(e, "node") else -1
                where = f" (node {node}" + (f" {e.node_name()}" if hasattr(e, "node_name") and e.node_name() else "") \
                    + (f" {e.node_operator()}" if hasattr(e, "node_operator") and e.node_operator() else "") + ")" \
                    if node is not None and node >= 0 else ""
                msg = f"[parser] {e.desc()}{where}"
                errors.append(msg)
                self.collector.add("ERROR", msg, source="parser")
            raise self.fail(f"TensorRT's ONNX parser rejected {self.model.path.name}.", codes=("PARSE_FAILED",))
        from .inspect import network_layers

        self.layers = network_layers(self.network, trt)

    def _unique_dim_names(self) -> Optional[bytes]:
        """The model's bytes with shared dim names made unique, or None when the file can be parsed as it is.

        TensorRT's parser makes every ``dim_param`` name one symbolic dimension: the demo
        cls model's input ``[-1, 3, "?", "?"]`` ties H to W, and the build fails with
        "?: Input dimensions with this name are inconsistent." (H200, TensorRT 8.6) for
        48x192. TensorRT gets a renamed copy; the user's file is never modified.
        """
        import onnx

        from ..core.model.dim_names import shared_dim_names, with_unique_dim_names

        self.dim_renames = ()
        if not shared_dim_names(self.model.proto, self.recipe.profiles):
            return None
        # Re-read without external data: the copy is serialized, and weights stay where they are.
        proto = onnx.load(str(self.model.path), load_external_data=False)
        copy, shared = with_unique_dim_names(proto, self.recipe.profiles)
        if copy is None:
            return None
        self.dim_renames = tuple(r for s in shared for r in s.renames)
        for s in shared:
            self.note("WARNING", f"dim name {s.describe()} would be one dimension to TensorRT; building with "
                                 + ", ".join(f"{i}[{a}] -> {n!r}" for i, a, n in s.renames)
                                 + " (a renamed copy; the model file is unchanged).")
        return copy.SerializeToString()

    def configure(self):
        trt, recipe = self.trt, self.recipe
        feats = _features(trt)
        config = self.builder.create_builder_config()
        self.config = config
        available = set(feats.precision_flags) if feats is not None else {
            f.lower() for f in trt.BuilderFlag.__members__}
        expl = dict(feats.explanations) if feats is not None else {}
        for flag in recipe.flags:
            if flag not in available or not hasattr(trt.BuilderFlag, flag.upper()):
                raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no {flag.upper()} builder flag.",
                                          expl.get(flag, "This TensorRT does not offer it."),
                                          "Remove the flag from the recipe" + (
                                              "; on TensorRT 11 the model's types decide precision (export a Q/DQ or "
                                              "FP16 ONNX model)." if _major(trt) >= 11 else "."))
            config.set_flag(getattr(trt.BuilderFlag, flag.upper()))
        # Like Polygraphy: TF32 only when asked for, so that an "FP32" build is FP32.
        if "tf32" not in recipe.flags and hasattr(trt.BuilderFlag, "TF32"):
            config.clear_flag(trt.BuilderFlag.TF32)
        if recipe.precision_constraints != "none":
            name = {"obey": "OBEY_PRECISION_CONSTRAINTS", "prefer": "PREFER_PRECISION_CONSTRAINTS"}[recipe.precision_constraints]
            if not hasattr(trt.BuilderFlag, name):
                raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no precision constraints.",
                                          expl.get("precision_constraints", "They were removed with strong typing."),
                                          "Set precision_constraints to 'none'.")
            config.set_flag(getattr(trt.BuilderFlag, name))
        self._layer_precisions()
        self._tactic_sources()
        if hasattr(trt, "ProfilingVerbosity"):
            config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        if recipe.builder_optimization_level is not None:
            if not hasattr(config, "builder_optimization_level"):
                raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no builder optimization level.",
                                          fix="Set builder_optimization_level to null.")
            config.builder_optimization_level = int(recipe.builder_optimization_level)
        if recipe.workspace_mib is not None:
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(recipe.workspace_mib) << 20)
        self._timing_cache()
        self._profiles()
        self._calibrator()
        from .progress import trt_progress_monitor

        monitor = trt_progress_monitor(self.progress, trt)
        if monitor is not None:
            config.progress_monitor = monitor
            self.monitor = monitor

    def _layer_precisions(self):
        trt, recipe = self.trt, self.recipe
        if not recipe.layer_precisions:
            return
        names = [d["name"] for d in self.layers]
        chosen, unmatched = match_layer_precisions(names, recipe.layer_precisions)
        if unmatched:
            raise _unmatched_error(unmatched, names)
        if recipe.precision_constraints == "none":
            self.note("WARNING", "per-layer precisions are set but precision_constraints is 'none': TensorRT ignores "
                                 "them (choose 'prefer' or 'obey').")
        pinned = 0
        for i in range(self.network.num_layers):
            layer = self.network.get_layer(i)
            prec = chosen.get(layer.name)
            if prec is None:
                continue
            if not hasattr(layer, "precision"):
                raise TensorRTUnavailable(f"TensorRT {version_of(trt)} cannot pin layer precisions.",
                                          "Layer precision was removed with strong typing (TensorRT 11).",
                                          "Cast the ONNX model instead, or export Q/DQ for INT8.")
            outs = [layer.get_output(j) for j in range(layer.num_outputs)]
            if any(getattr(o.dtype, "name", "") not in _PINNABLE for o in outs):
                self.note("INFO", f"layer {layer.name!r} is not pinned to {prec}: it computes integer/bool tensors.")
                continue
            dt = getattr(trt.DataType, _LAYER_DTYPES[prec], None)
            if dt is None:
                raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no {prec.upper()} data type for layer {layer.name!r}.",
                                          f"Its data types are {', '.join(trt.DataType.__members__)}.",
                                          "Pin the layer to another precision (BF16 needs TensorRT 9 or later).")
            layer.precision = dt
            if prec not in ("int8", "fp8"):
                # Float pins fix the output type too, so that the next layer reads what this one computed.
                # Quantized pins leave outputs to TensorRT: an INT8 output would force quantization downstream.
                for j in range(layer.num_outputs):
                    layer.set_output_type(j, dt)
            pinned += 1
        self.note("INFO", f"pinned the precision of {pinned} layer(s).")

    def _tactic_sources(self):
        trt, config = self.trt, self.config
        if not hasattr(trt, "TacticSource"):
            return
        exact, drop = tactic_source_names(self.recipe, self.tactic_sources)
        members = trt.TacticSource.__members__
        if exact is not None:
            unknown = [s for s in exact if s not in members]
            if unknown:
                raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no tactic source(s) {', '.join(unknown)}.",
                                          f"It has {', '.join(members)}.", "Choose among those.")
            mask = 0
            for s in exact:
                mask |= 1 << int(members[s])
        else:
            mask = int(config.get_tactic_sources())
        for s in drop:
            if s in members:
                mask &= ~(1 << int(members[s]))
        if exact is not None or drop:
            config.set_tactic_sources(mask)
            on = [s for s in members if mask & (1 << int(members[s]))]
            self.note("INFO", f"tactic sources: {', '.join(on) or 'none'}")

    def _timing_cache(self):
        trt, config = self.trt, self.config
        self.timing_cache = None
        self.timing_cache_path = None
        self.empty_timing_cache = b""
        path = self.recipe.timing_cache
        if not path or not hasattr(config, "create_timing_cache"):
            return
        p = Path(path).expanduser()
        empty = config.create_timing_cache(b"")
        self.empty_timing_cache = bytes(memoryview(empty.serialize())) if empty is not None else b""
        data = p.read_bytes() if p.is_file() else b""
        action, why = timing_cache_plan(self.recipe.builder_optimization_level, data, self.empty_timing_cache)
        self.note("INFO", f"timing cache {p}: {why}")
        if action == "off":
            return
        cache = None
        if action == "load":
            # TensorRT 8.6 logs [E] for a cache it cannot read and then builds without it: that is a
            # warning for us, and the unreadable cache is not attached (a fresh one is, and saved after).
            with self.collector.demoting_errors("timing cache: ") as complaints:
                cache = config.create_timing_cache(data)
            if cache is None or complaints:
                self.note("WARNING", f"timing cache {p} cannot be used by TensorRT {version_of(trt)} "
                                     f"({len(data)} bytes, written by another TensorRT/GPU or by a build that timed "
                                     "nothing); building without it, and a new one replaces it after the build.")
                cache = None
        if cache is None:
            cache = empty if empty is not None else config.create_timing_cache(b"")
        with self.collector.demoting_errors("timing cache: ") as complaints:
            ok = config.set_timing_cache(cache, False)
        if not ok or complaints:
            self.note("WARNING", f"timing cache {p} does not match this TensorRT/GPU; starting a new one.")
            cache = config.create_timing_cache(b"")
            config.set_timing_cache(cache, True)
        self.timing_cache = cache
        self.timing_cache_path = p

    def _profiles(self):
        trt = self.trt
        self.profiles = []
        for k, prof in enumerate(self.recipe.profiles):
            p = self.builder.create_optimization_profile()
            for name, rng in prof.shapes.items():
                p.set_shape(name, tuple(rng.min), tuple(rng.opt), tuple(rng.max))
            idx = self.config.add_optimization_profile(p)
            if idx < 0:
                raise self.fail(f"TensorRT rejected optimization profile {k}.")
            self.profiles.append(p)
        del trt

    def _input_specs(self) -> Dict[str, Tuple[Tuple[int, ...], object]]:
        trt = self.trt
        opt = _opt_shapes(self.recipe)
        specs = {}
        for i in range(self.network.num_inputs):
            t = self.network.get_input(i)
            shape = tuple(int(d) for d in t.shape)
            if any(d < 0 for d in shape):
                shape = tuple(opt[t.name])
            specs[t.name] = (shape, _nptype(trt, t.dtype))
        return specs

    def _calibrator(self):
        trt, recipe, config = self.trt, self.recipe, self.config
        cal = recipe.calibrator
        if cal.kind == "none":
            return
        if "int8" not in recipe.flags:
            self.note("WARNING", f"calibrator {cal.kind!r} is not used: the int8 flag is off.")
            return
        if not hasattr(config, "int8_calibrator"):
            raise TensorRTUnavailable(f"TensorRT {version_of(trt)} has no calibrators.",
                                      "TensorRT's calibrators were removed in TensorRT 11 (strong typing).",
                                      "Export a Q/DQ ONNX model from the toolkit's calibration and build that.")
        if cal.kind == "toolkit":
            self.calibrator = self._toolkit_calibrator()
        else:
            self.calibrator = self._trt_calibrator()
        config.int8_calibrator = self.calibrator
        if self.profiles and hasattr(config, "set_calibration_profile"):
            config.set_calibration_profile(self.profiles[recipe.calibration_profile])
            self.note("INFO", f"calibrating at profile {recipe.calibration_profile}'s opt shapes "
                              f"{ {k: list(v) for k, v in _opt_shapes(recipe).items()} }")

    def _toolkit_calibrator(self):
        cal = self.recipe.calibrator
        if not cal.cache_path or not Path(cal.cache_path).expanduser().is_file():
            raise RecipeError("The toolkit calibrator needs a calibration cache file, and the recipe has "
                              + (f"none at {cal.cache_path}." if cal.cache_path else "no cache_path."),
                              "The build hands the toolkit's ranges to TensorRT as a calibration cache; it does not "
                              "collect statistics itself.",
                              "Collect statistics and write the cache (calibration step of the notebook, or "
                              "trtwidgets.core.calibration.cache.write_cache), then set cache_path.")
        data = Path(cal.cache_path).expanduser().read_bytes()
        if cal.amax_overrides:
            from ..core.calibration import cache as calib_cache

            parsed = calib_cache.read_cache(Path(cal.cache_path).expanduser())
            amax = dict(parsed.amax)
            amax.update(cal.amax_overrides)
            data = calib_cache.cache_text(amax, parsed.version, parsed.algorithm).encode()
            self.note("INFO", f"applied {len(cal.amax_overrides)} amax override(s) to the calibration cache.")
        from .calibrator_bridge import make_cache_calibrator

        self.cache_bytes_used = data
        return make_cache_calibrator(data, trt_module=self.trt)

    def _trt_calibrator(self):
        from ..core.calibration.data import iter_feeds
        from .calibrators import make_calibrator

        recipe, cal = self.recipe, self.recipe.calibrator
        cache_in = None
        if cal.cache_path and Path(cal.cache_path).expanduser().is_file():
            cache_in = Path(cal.cache_path).expanduser().read_bytes()
            self.note("INFO", f"reusing calibration cache {cal.cache_path}: TensorRT will not calibrate again.")
        specs = self._input_specs()
        source = self.calibration_data if self.calibration_data is not None else recipe.calibration_data
        if source is None and cache_in is None:
            raise RecipeError(f"TensorRT's calibrator {cal.kind!r} needs calibration data, and the recipe has none.",
                              "It runs the network on real batches to find INT8 ranges.",
                              "Choose calibration data (e.g. CalibrationDataSpec(kind='demo')) or give an existing cache_path.")
        feeds = iter(()) if source is None else iter_feeds(source, self.model.summary, opt_shapes=feed_opt_shapes(specs))
        if cache_in is None:
            # Read the first batch now: bad data should fail in a second, not after TensorRT has built
            # its calibration engine.
            first = next(feeds, None)
            if first is None:
                raise CalibrationDataError("The calibration data yielded no batch.", fix="Give at least one sample.")
            feeds = itertools.chain([first], feeds)
        self.cache_out = str(self.staging / CACHE_FILE)
        calibrator = make_calibrator(cal.kind, feeds, specs, self.trt, cache_out=self.cache_out, cache_in=cache_in,
                                     max_batches=self.max_calibration_batches,
                                     on_batch=lambda n: self.progress.step("Calibration", n, f"batch {n}", source="calibrator"))
        if cache_in is None:
            calibrator._check(first, list(specs))  # raises CalibrationDataError for a wrong shape or input
        return calibrator

    def run(self):
        trt = self.trt
        self.progress.start("Building engine")
        t0 = time.perf_counter()
        try:
            plan = self.builder.build_serialized_network(self.network, self.config)
        except Exception as exc:  # noqa: BLE001 - TensorRT 10+ may raise instead of returning None
            plan = None
            self.note("ERROR", f"build_serialized_network raised {type(exc).__name__}: {exc}")
        self.build_seconds = time.perf_counter() - t0
        self.progress.finish_all()
        err = getattr(self.calibrator, "error", None)
        if err is not None:
            if isinstance(err, UserError):
                raise err
            raise self.fail("Calibration failed while feeding batches to TensorRT.", [f"{type(err).__name__}: {err}"],
                            codes=("CALIBRATION_DATA_ERROR",))
        if plan is None or getattr(plan, "nbytes", 1) == 0:
            if self.progress.cancel is not None and self.progress.cancel.is_set():
                raise BuildError("The build was cancelled.", fix="Start it again when ready.")
            raise self.fail(f"TensorRT could not build {self.model.path.name}.", codes=("BUILD_FAILED",))
        self.plan = bytes(memoryview(plan))
        del trt

    def save_timing_cache(self):
        if self.timing_cache is None:
            return
        try:
            data = bytes(memoryview(self.timing_cache.serialize()))
            if not data or data == self.empty_timing_cache:
                # An empty cache is not worth a file, and TensorRT 8.6 cannot read its own empty caches back.
                self.note("INFO", f"the timing cache has no entries; {self.timing_cache_path} is left as it was.")
                return
            write_bytes_atomic(self.timing_cache_path, data)
        except OSError as exc:
            self.note("WARNING", f"could not save the timing cache to {self.timing_cache_path}: {exc}")

    def inspect(self) -> str:
        from .inspect import inspector_json_for

        trt = self.trt
        self.progress.start("Inspecting engine")
        runtime = trt.Runtime(self.logger)
        engine = runtime.deserialize_cuda_engine(self.plan)
        if engine is None:
            raise self.fail("TensorRT could not load the engine it just built.")
        profile = self.recipe.calibration_profile if self.recipe.profiles else 0
        shapes = {name: tuple(s) for name, s in _opt_shapes(self.recipe).items()} or None
        try:
            text = inspector_json_for(engine, shapes, profile, trt)
        finally:
            # TensorRT wants the engine destroyed before the runtime that made it.
            del engine
            del runtime
        self.progress.finish("Inspecting engine")
        return text


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
        :class:`~trtwidgets.trt.progress.ProgressEvent`; False: silent.
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
    b = _Build(recipe, out_dir, progress, on_log, calibration_data, tactic_sources, cancel, verbose_log, builds_root,
               max_calibration_batches)
    recipe_json = recipe.to_json()
    final = check_out_dir(out_dir) if out_dir is not None else default_build_dir(recipe_json, builds_root)
    b.load()
    b.gpu()
    b.staging = None
    try:
        b.make_builder()
        b.parse()
        b.staging = staging_dir(final)
        b.configure()
        b.run()
        b.save_timing_cache()
        inspector_json = b.inspect()
        result = _write(b, final, recipe, recipe_json, inspector_json)
    except BaseException:
        b.progress.finish_all()
        discard(b.staging)
        raise
    finally:
        b.close()
        if hasattr(b.sink, "close"):
            b.sink.close()
    return result


def _get_batch_calls(cal) -> Optional[int]:
    # Our feed calibrators count get_batch_calls; the cache bridge's calibrator counts batches_requested.
    if cal is None:
        return None
    n = getattr(cal, "get_batch_calls", getattr(cal, "batches_requested", None))
    return None if n is None else int(n)


def _write(b: _Build, final: Path, recipe, recipe_json: str, inspector_json: str) -> BuildResult:
    trt = b.trt
    st = b.staging
    (st / ENGINE_FILE).write_bytes(b.plan)
    (st / GRAPH_FILE).write_text(inspector_json, encoding="utf-8")
    (st / RECIPE_FILE).write_text(recipe_json + "\n", encoding="utf-8")
    (st / LAYERS_FILE).write_text(json.dumps(b.layers, indent=1) + "\n", encoding="utf-8")
    cache_name = None
    if b.cache_bytes_used is not None:
        (st / CACHE_FILE).write_bytes(b.cache_bytes_used)
        cache_name = CACHE_FILE
    elif b.calibrator is not None:
        if getattr(b.calibrator, "cache_written", None) is None and getattr(b.calibrator, "cache_in", None):
            (st / CACHE_FILE).write_bytes(b.calibrator.cache_in)
        if (st / CACHE_FILE).is_file():
            cache_name = CACHE_FILE
    cal = b.calibrator
    meta = {
        "trt_version": str(version_of(trt)), "gpu_name": b.gpu_name,
        "compute_capability": list(b.cc) if b.cc else None, "build_seconds": round(b.build_seconds, 3),
        "engine_bytes": len(b.plan), "python": platform.python_version(),
        "phases": b.progress.timings_dict(), "lint": [f.to_dict() for f in b.lint_findings],
        "calibration": None if cal is None else {
            "kind": recipe.calibrator.kind, "batches": getattr(cal, "batches_fed", 0),
            "get_batch_calls": _get_batch_calls(cal),
            "shapes": [{k: list(v) for k, v in s.items()} for s in getattr(cal, "batch_shapes", [])],
            "skipped": list(getattr(cal, "skipped", [])), "cache": cache_name},
        "log_counts": dict(b.collector.counts),
        "dim_renames": [list(r) for r in getattr(b, "dim_renames", ())],
    }
    (st / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    (st / LOG_FILE).write_text(b.collector.to_jsonl(), encoding="utf-8")
    publish(st, final)
    b.staging = None
    p = final
    return BuildResult(
        engine_path=str(p / ENGINE_FILE), inspector_json_path=str(p / GRAPH_FILE), inspector_json=inspector_json,
        recipe_path=str(p / RECIPE_FILE), log=b.collector.lines, build_seconds=b.build_seconds,
        trt_version=str(version_of(trt)), gpu_name=b.gpu_name,
        calibration_cache_path=str(p / cache_name) if cache_name else None, out_dir=str(p),
        log_path=str(p / LOG_FILE), compute_capability=b.cc, engine_bytes=len(b.plan),
        phases=tuple(b.progress.timings_dict()),
        calibration_batches=int(getattr(cal, "batches_fed", 0) or 0) if cal is not None else 0,
        calibration_get_batch_calls=_get_batch_calls(cal),
        calibration_shapes=tuple(dict(s) for s in getattr(cal, "batch_shapes", [])) if cal is not None else (),
        lint_codes=tuple(f.code for f in b.lint_findings),
    )


__all__ = ["BuildResult", "build", "build_failure", "feed_opt_shapes", "match_layer_precisions", "tactic_source_names",
           "timing_cache_plan"]
