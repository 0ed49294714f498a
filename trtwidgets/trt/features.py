"""What the installed TensorRT supports, read from the module itself.

TensorRT 8.6, 10 and 11 differ in exactly the things this toolkit is about:
precision flags, precision constraints, per-layer precision and the INT8
calibrators exist in 8.6, are deprecated in 10 and are gone in 11 (networks are
always strongly typed there). :func:`features` looks at the module's real
enums and classes (``BuilderFlag.INT8``, ``IInt8EntropyCalibrator2``,
``ILayer.precision``, ...) rather than at a version table, so a point release
that adds or drops something is described correctly, and so is a module built
for another platform. The widgets offer only what is there and show
:attr:`TrtFeatures.explanations` for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from .probe import module_version, probe

#: Lower-case precision flag -> ``trt.BuilderFlag`` member.
PRECISION_FLAGS = (("fp16", "FP16"), ("bf16", "BF16"), ("int8", "INT8"), ("fp8", "FP8"), ("tf32", "TF32"))
#: Short calibrator name -> TensorRT class.
CALIBRATORS = (("entropy2", "IInt8EntropyCalibrator2"), ("minmax", "IInt8MinMaxCalibrator"),
               ("entropy", "IInt8EntropyCalibrator"), ("legacy", "IInt8LegacyCalibrator"))
#: Precision-constraint mode -> ``trt.BuilderFlag`` member.
CONSTRAINT_FLAGS = (("obey", "OBEY_PRECISION_CONSTRAINTS"), ("prefer", "PREFER_PRECISION_CONSTRAINTS"))

_QDQ_ADVICE = ("export a Q/DQ ONNX model from the toolkit's calibration (explicit quantization), "
               "or cast the ONNX model to the precision you want")


@dataclass(frozen=True)
class TrtFeatures:
    """What one TensorRT Python module offers (see :func:`features`).

    Attributes
    ----------
    version : str or None
        ``tensorrt.__version__``; None without TensorRT.
    major : int or None
    precision_flags : tuple of str
        Lower-case names of the precision ``BuilderFlag`` members present
        (``"fp16"``, ``"bf16"``, ``"int8"``, ``"fp8"``, ``"tf32"``).
    precision_constraints : bool
        ``BuilderFlag.OBEY_/PREFER_PRECISION_CONSTRAINTS`` exist.
    layer_precision : bool
        ``ILayer.precision`` exists (per-layer precision overrides).
    calibrators : tuple of str
        ``"entropy2"``, ``"minmax"``, ``"entropy"``, ``"legacy"``: TensorRT's INT8 calibrators present.
    strong_typing : bool
        ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` exists.
    strongly_typed_only : bool
        Networks are always strongly typed (no weak-typing precision flags left).
    progress_monitor : bool
        ``IProgressMonitor`` exists (build progress with phase names).
    builder_optimization_level : bool
    timing_cache : bool
        ``IBuilderConfig.create_timing_cache`` exists.
    inspector : bool
        The engine inspector exists.
    explanations : dict
        Feature key (a flag name, ``"calibrators"``, ``"layer_precision"``...) ->
        why it is absent and what to do instead.
    available : bool
        False when TensorRT could not be imported (see :func:`features_unavailable`).
    constraint_modes : tuple of str
        ``"obey"`` / ``"prefer"``: the constraint flags present.
    calibration_profile : bool
        ``IBuilderConfig.set_calibration_profile`` exists.
    deprecated : dict
        Present but deprecated feature key -> note (e.g. the calibrators on TensorRT 10).
    """

    version: Optional[str]
    major: Optional[int]
    precision_flags: Tuple[str, ...] = ()
    precision_constraints: bool = False
    layer_precision: bool = False
    calibrators: Tuple[str, ...] = ()
    strong_typing: bool = False
    strongly_typed_only: bool = False
    progress_monitor: bool = False
    builder_optimization_level: bool = False
    timing_cache: bool = False
    inspector: bool = False
    explanations: Dict[str, str] = field(default_factory=dict)
    available: bool = True
    constraint_modes: Tuple[str, ...] = ()
    calibration_profile: bool = False
    deprecated: Dict[str, str] = field(default_factory=dict)

    def has_flag(self, name: str) -> bool:
        """Whether this TensorRT has the precision flag ``name`` (any case)."""
        return name.lower() in self.precision_flags

    def explain(self, key: str) -> Optional[str]:
        """Why ``key`` is absent (or deprecated), or None if it is simply there."""
        return self.explanations.get(key) or self.deprecated.get(key)

    def to_dict(self) -> dict:
        """The features as a JSON-ready dict."""
        return {
            "version": self.version, "major": self.major, "precision_flags": list(self.precision_flags),
            "precision_constraints": self.precision_constraints, "layer_precision": self.layer_precision,
            "calibrators": list(self.calibrators), "strong_typing": self.strong_typing,
            "strongly_typed_only": self.strongly_typed_only, "progress_monitor": self.progress_monitor,
            "builder_optimization_level": self.builder_optimization_level, "timing_cache": self.timing_cache,
            "inspector": self.inspector, "explanations": dict(self.explanations), "available": self.available,
            "constraint_modes": list(self.constraint_modes), "calibration_profile": self.calibration_profile,
            "deprecated": dict(self.deprecated),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "TrtFeatures":
        """Inverse of :meth:`to_dict` (e.g. features read in another process)."""
        kw = dict(d)
        for key in ("precision_flags", "calibrators", "constraint_modes"):
            kw[key] = tuple(kw.get(key, ()))
        return cls(**kw)


def _major_of(version: Optional[str]) -> Optional[int]:
    head = (version or "").split(".")[0]
    return int(head) if head.isdigit() else None


def _minor_of(version: Optional[str]) -> int:
    parts = (version or "").split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _explanations(f: dict, version: str) -> Dict[str, str]:
    """Why each absent feature is absent and what to do, for this module."""
    where = f"TensorRT {version}"
    out: Dict[str, str] = {}
    for name, member in PRECISION_FLAGS:
        if name in f["precision_flags"]:
            continue
        if f["strongly_typed_only"]:
            how = ("export a Q/DQ ONNX model from the toolkit's calibration (explicit quantization)"
                   if name in ("int8", "fp8") else
                   f"cast the ONNX model's weights and activations to {name.upper()} before building")
            out[name] = (f"{where} has no BuilderFlag.{member}: networks are always strongly typed, so precision "
                         f"comes from the model. To run in {name.upper()}, {how}.")
        elif name == "bf16":
            out[name] = f"{where} has no BuilderFlag.BF16 (it arrived in TensorRT 9); upgrade to TensorRT 10 for BF16."
        elif name == "fp8":
            out[name] = f"{where} has no BuilderFlag.FP8 (it arrived in TensorRT 8.6); upgrade TensorRT for FP8."
        else:
            out[name] = f"{where} has no BuilderFlag.{member}."
    if not f["precision_constraints"]:
        out["precision_constraints"] = (
            f"{where} has no OBEY/PREFER_PRECISION_CONSTRAINTS flags: " +
            (f"strongly typed networks run each layer in the model's types. To change a layer's precision, {_QDQ_ADVICE}."
             if f["strongly_typed_only"] else "upgrade TensorRT to constrain layer precisions."))
    if not f["layer_precision"]:
        out["layer_precision"] = (
            f"{where} has no ILayer.precision: " +
            (f"a layer's precision is the type of its inputs in the model. {_QDQ_ADVICE[0].upper()}{_QDQ_ADVICE[1:]}."
             if f["strongly_typed_only"] else "per-layer precision cannot be set with this TensorRT."))
    if not f["calibrators"]:
        out["calibrators"] = (f"{where} has no INT8 calibrators (IInt8EntropyCalibrator2 and the others were removed): "
                              "compute ranges with the toolkit's calibration and export a Q/DQ ONNX model, "
                              "which TensorRT builds as explicitly quantized.")
    if not f["strong_typing"]:
        out["strong_typing"] = (f"{where} has no NetworkDefinitionCreationFlag.STRONGLY_TYPED (it arrived in TensorRT 9): "
                                "precisions are chosen by builder flags here.")
    if not f["progress_monitor"]:
        out["progress_monitor"] = (f"{where} has no IProgressMonitor (it arrived in TensorRT 10): "
                                   "the build shows a spinner with phases read from the log instead.")
    if not f["builder_optimization_level"]:
        out["builder_optimization_level"] = (f"{where} has no IBuilderConfig.builder_optimization_level (it arrived in "
                                              "TensorRT 8.6): the build uses TensorRT's fixed tactic search.")
    if not f["timing_cache"]:
        out["timing_cache"] = f"{where} has no timing cache API: every build times its tactics again."
    if not f["inspector"]:
        out["inspector"] = (f"{where} has no engine inspector (it arrived in TensorRT 8.2): upgrade TensorRT to see "
                            "per-layer precisions.")
    return out


def _deprecations(f: dict, major: Optional[int], minor: int, version: str) -> Dict[str, str]:
    # Deprecation is not visible on the module (pybind11 members carry no flag); TensorRT's release notes date it.
    out: Dict[str, str] = {}
    if major is None or major < 10:
        return out
    if f["calibrators"]:
        out["calibrators"] = ("TensorRT's INT8 calibrators are deprecated since TensorRT 10.1 and removed in 11; "
                              "prefer the toolkit's calibration exported as a Q/DQ model.")
    if (major, minor) >= (10, 12):
        for name in ("fp16", "bf16", "int8", "fp8"):
            if name in f["precision_flags"]:
                out[name] = (f"BuilderFlag.{name.upper()} (weak typing) is deprecated since TensorRT 10.12 and removed in 11; "
                             "strongly typed networks take precision from the model.")
        if f["precision_constraints"]:
            out["precision_constraints"] = "Precision constraints are deprecated since TensorRT 10.12 and removed in 11."
        if f["layer_precision"]:
            out["layer_precision"] = "ILayer.precision is deprecated since TensorRT 10.12 and removed in 11."
    return out


def features(trt_module=None) -> TrtFeatures:
    """Describe what a TensorRT Python module supports.

    Parameters
    ----------
    trt_module : module, optional
        A TensorRT module (``tensorrt``, or ``tensorrt_bindings.tensorrt``).
        By default the installed one; without TensorRT, the result of
        :func:`features_unavailable`.

    Returns
    -------
    TrtFeatures
    """
    trt = trt_module
    if trt is None:
        import trtwidgets.trt as package

        trt = package._import()
        if trt is None:
            # _import() records why the import failed; read it after the call.
            return features_unavailable(str(package._import_error or ""))
    flag_enum = probe(trt, "BuilderFlag")
    config = probe(trt, "IBuilderConfig")
    layer = probe(trt, "ILayer")
    creation = probe(trt, "NetworkDefinitionCreationFlag")
    engine = probe(trt, "ICudaEngine")
    f: dict = {
        "precision_flags": tuple(name for name, member in PRECISION_FLAGS if hasattr(flag_enum, member)),
        "constraint_modes": tuple(mode for mode, member in CONSTRAINT_FLAGS if hasattr(flag_enum, member)),
        "layer_precision": hasattr(layer, "precision"),
        "calibrators": tuple(name for name, cls in CALIBRATORS if hasattr(trt, cls)),
        "calibration_profile": hasattr(config, "set_calibration_profile"),
        "strong_typing": hasattr(creation, "STRONGLY_TYPED"),
        "progress_monitor": hasattr(trt, "IProgressMonitor") and hasattr(config, "progress_monitor"),
        "builder_optimization_level": hasattr(config, "builder_optimization_level"),
        "timing_cache": hasattr(config, "create_timing_cache"),
        "inspector": (hasattr(trt, "EngineInspector") or hasattr(trt, "IEngineInspector"))
        and hasattr(engine, "create_engine_inspector"),
    }
    f["precision_constraints"] = bool(f["constraint_modes"])
    # Weak typing needs a reduced-precision flag; with STRONGLY_TYPED and none of them, strong typing is the only mode.
    f["strongly_typed_only"] = f["strong_typing"] and not any(n in f["precision_flags"] for n in ("fp16", "bf16", "int8", "fp8"))
    version = module_version(trt)
    major = _major_of(version)
    shown = version or "(unknown version)"
    return TrtFeatures(version=version, major=major, explanations=_explanations(f, shown),
                       deprecated=_deprecations(f, major, _minor_of(version), shown), available=True, **f)


def features_unavailable(reason: str = "") -> TrtFeatures:
    """The features when TensorRT cannot be imported: nothing, and what to install.

    Parameters
    ----------
    reason : str
        Why the import failed (shown in the explanations).
    """
    from . import INSTALL_ADVICE

    why = "TensorRT is not installed here" + (f" (import tensorrt failed: {reason})" if reason else "") + "."
    text = f"{why} {INSTALL_ADVICE}"
    keys = [name for name, _ in PRECISION_FLAGS] + [
        "precision_constraints", "layer_precision", "calibrators", "strong_typing", "progress_monitor",
        "builder_optimization_level", "timing_cache", "inspector", "build"]
    return TrtFeatures(version=None, major=None, available=False, explanations={k: text for k in keys})
