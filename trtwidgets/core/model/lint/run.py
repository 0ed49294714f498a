"""Pre-build lint: what would go wrong in TensorRT, said before the build.

:func:`lint` looks at an ONNX model together with what the user intends (the
precision flags, the TensorRT version, the calibrator, the optimization
profiles, the GPU) and returns :class:`Finding` values. Each has a stable
``code`` (listed in :data:`~.codes.CODES`), a severity, and says what TensorRT will do,
why, and what to do about it; where TensorRT's own error text is known the
message quotes it, so a user who saw the error can search for it.

The answer depends on the TensorRT version: flags and calibrators exist up to
10.x (deprecated from 10.12 and 10.1) and are gone in 11, where the model's
types decide (strong typing). When the version is not given, findings that
depend on it are phrased for the version the flags imply (flags exist only up
to 10.x).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Tuple, Union

import onnx

from ...common.errors import UserError
from .codes import SEVERITIES, Finding
from .context import LintContext
from .rules import RULES
from ..load import LoadedModel, as_loaded
from ..trt_support import FLAG_SINCE, TRT_CALIBRATORS
from ..trt_version import VersionLike, installed_trt_version, parse_trt_version

__all__ = ["lint", "normalize_flags", "normalize_calibrator"]


def normalize_flags(flags: Union[None, str, Iterable[str]]) -> Optional[Tuple[str, ...]]:
    """Flags as a sorted tuple of lower-case names; ``"fp16,int8"`` and ``["FP16", "INT8"]`` both work.

    Raises
    ------
    UserError
        For a flag name TensorRT does not have.
    """
    if flags is None:
        return None
    if isinstance(flags, str):
        flags = [f for f in flags.replace(" ", ",").split(",") if f]
    out = []
    for f in flags:
        name = str(f).strip().lower()
        if name in ("fp32", "none", ""):
            continue  # FP32 is the default: no flag
        if name not in FLAG_SINCE:
            raise UserError(f"Unknown precision flag {f!r}.", f"TensorRT's precision flags are {', '.join(FLAG_SINCE)}.",
                            "Use e.g. --flags fp16,int8 (an empty list means FP32).")
        out.append(name)
    return tuple(sorted(set(out)))


def normalize_calibrator(calibrator: Optional[str]) -> Optional[str]:
    """``None`` (not said), ``"none"``, ``"toolkit"`` or one of :data:`TRT_CALIBRATORS`.

    Accepts the recipe names (``"trt_entropy2"``) and TensorRT's class names
    (``"IInt8EntropyCalibrator2"``).
    """
    if calibrator is None:
        return None
    name = str(calibrator).strip().lower().replace("-", "_")
    for prefix in ("trt_", "iint8", "int8"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    name = name.replace("calibrator", "").replace("_", "")
    if name in ("", "none", "off"):
        return "none"
    if name in ("toolkit", "trtwidgets"):
        return "toolkit"
    if name in TRT_CALIBRATORS:
        return name
    raise UserError(f"Unknown calibrator {calibrator!r}.",
                    "TensorRT's calibrators are entropy2, minmax, entropy and legacy; 'toolkit' is trtwidgets' own "
                    "calibration; 'none' means no calibration.",
                    "Use one of: none, toolkit, entropy2, minmax, entropy, legacy.")


def _compute_capability(cc) -> Optional[Tuple[int, int]]:
    if cc is None:
        return None
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    text = str(cc).strip().lower().replace("sm_", "").replace("sm", "")
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major), int(minor[:1] or 0)
    if text.isdigit() and len(text) in (2, 3):  # "89", "120"
        return int(text[:-1]), int(text[-1])
    raise UserError(f"{cc!r} is not a GPU compute capability.", "It is written like 8.9 (Ada), 9.0 (Hopper) or (8, 0).",
                    "Pass a (major, minor) tuple or 'major.minor'.")


def _run_rules(ctx: LintContext) -> Tuple[Finding, ...]:
    for rule in RULES:
        rule(ctx)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return tuple(sorted(ctx.findings, key=lambda f: (order[f.severity], f.code)))


def lint(model: Union[LoadedModel, onnx.ModelProto, str, Any], flags: Union[None, str, Iterable[str]] = None,
         trt_version: Optional[VersionLike] = None, calibrator: Optional[str] = None,
         profiles: Optional[Sequence[Any]] = None, gpu_compute_capability=None) -> Tuple[Finding, ...]:
    """What would go wrong building ``model`` with TensorRT, said before the build.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto or path
        The model (a path is loaded with :func:`~trtwidgets.core.model.load.load_model`).
    flags : str or iterable of str, optional
        Intended precision flags (``"fp16,int8"`` or ``("fp16", "int8")``); None when
        not decided (flag-dependent checks are skipped). An empty list means FP32.
    trt_version : str or TrtVersion, optional
        The TensorRT version to check against (``"8.6"``, ``"10.16"``, ``"11.0"``,
        or ``"installed"``); None when unknown.
    calibrator : str, optional
        ``"none"``, ``"toolkit"`` or a TensorRT calibrator (``"entropy2"``,
        ``"minmax"``, ``"entropy"``, ``"legacy"``, also as ``"trt_entropy2"``).
    profiles : sequence, optional
        Optimization profiles: objects with a ``shapes`` mapping or mappings of
        input name -> shapes. None when not decided.
    gpu_compute_capability : tuple or str, optional
        e.g. ``(8, 9)`` or ``"9.0"``; hardware checks are skipped when None.

    Returns
    -------
    tuple of Finding
        Errors first, then warnings, then infos.

    Raises
    ------
    UserError
        For an unknown flag, calibrator, version or compute capability, or a model that cannot be loaded.
    """
    if isinstance(model, onnx.ModelProto) and not model.graph.node:
        raise UserError("The model has an empty graph (no nodes).", "There is nothing for TensorRT to build.",
                        "Check the export: the model must contain at least one operator.")
    model = as_loaded(model)
    if isinstance(trt_version, str) and trt_version.strip().lower() == "installed":
        trt = installed_trt_version()
        if trt is None:
            raise UserError("No installed TensorRT found.", "--trt-version installed reads the version of the installed "
                            "tensorrt package, and none is installed in this Python environment.",
                            "Name the version you build with (e.g. --trt-version 10.16), or install tensorrt.")
    else:
        trt = parse_trt_version(trt_version) if trt_version is not None else None
    ctx = LintContext(model, normalize_flags(flags), trt, normalize_calibrator(calibrator),
                      None if profiles is None else list(profiles), _compute_capability(gpu_compute_capability))
    return _run_rules(ctx)
