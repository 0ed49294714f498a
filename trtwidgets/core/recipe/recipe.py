"""The recipe: one immutable, JSON-serialisable description of a TensorRT build.

A :class:`Recipe` holds everything a build needs besides TensorRT itself: the
model (path and content hash), precision flags and constraints, per-layer
precision overrides, the calibrator, the calibration data, optimization
profiles, builder settings and the TensorRT version it was made with. The
widgets edit it through :meth:`Recipe.replace`, the build step reads it, and
``trtwidgets build RECIPE.json`` re-runs a saved one headless.

Three levels of checking:

- constructing or replacing a recipe checks what needs no model (names,
  types, regexes, the calibration-profile index): a Recipe object is always
  self-consistent;
- :func:`validate_recipe` checks it against the model (profiles, ranks, static
  dims) and against what the installed TensorRT supports;
- :func:`load_recipe` reads JSON only (never evaluates or unpickles) and
  rejects unknown keys, wrong types and unknown schema versions.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple, Union

from ..common.atomic import write_text_atomic
from ..common.errors import RecipeError
from ..common.frozen import mapping_hash, readonly_mapping
from .profiles import Profile, ShapeRange, _fmt, default_profiles, profile_problems

if TYPE_CHECKING:  # only for annotations: calib_data is imported when a recipe holds a spec
    from ..calibration.data import CalibrationDataSpec

#: Version of the JSON layout written by :meth:`Recipe.to_json`.
SCHEMA_VERSION = 1

#: Builder precision flags (lower-case names of ``trt.BuilderFlag`` members).
FLAGS = ("fp16", "bf16", "int8", "fp8", "tf32")
#: Values of :attr:`Recipe.precision_constraints`.
PRECISION_CONSTRAINTS = ("none", "obey", "prefer")
#: Precisions a layer can be pinned to.
LAYER_PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8")
#: Calibrator kinds: TensorRT's four calibrators, the toolkit's ranges through a cache, or none.
CALIBRATOR_KINDS = ("none", "trt_entropy2", "trt_minmax", "trt_entropy", "trt_legacy", "toolkit")
#: The toolkit's range methods (see ``trtwidgets.core.calibration.ranges``).
TOOLKIT_METHODS = ("entropy", "max", "percentile", "mse")
#: ``trt.BuilderOptimizationLevel`` accepts 0..5 (3 is TensorRT's default).
OPT_LEVELS = range(0, 6)

_INT_LIST = re.compile(r"\[\s+(-?\d+(?:,\s+-?\d+)*)\s+\]")

# Which layer precision needs which builder flag (fp32 needs none).
_PRECISION_FLAG = {"fp16": "fp16", "bf16": "bf16", "int8": "int8", "fp8": "fp8"}


def _bad(what: str, why: Optional[str] = None, fix: Optional[str] = None) -> RecipeError:
    return RecipeError(what, why, fix)


def _check_str(value, name: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise _bad(f"The recipe's {name} must be a string{' or null' if allow_none else ''}, got {type(value).__name__} {value!r:.80}.")


def _check_int(value, name: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"The recipe's {name} must be an integer{' or null' if allow_none else ''}, got {type(value).__name__} {value!r:.80}.")


def _choice(value, name: str, choices) -> None:
    if value not in choices:
        raise _bad(f"The recipe's {name} is {value!r}, which is not one of {', '.join(map(repr, choices))}.",
                   fix=f"Use one of {', '.join(choices)}.")


@dataclass(frozen=True)
class LayerPrecision:
    """Pin the layers whose name matches ``pattern`` to ``precision``.

    Attributes
    ----------
    pattern : str
        A layer name (``regex=False``) or a Python regular expression matched
        with ``re.search`` against TensorRT layer names (``regex=True``).
    precision : str
        One of :data:`LAYER_PRECISIONS`.
    regex : bool
    """

    pattern: str
    precision: str
    regex: bool = False

    def __post_init__(self):
        _check_str(self.pattern, "layer-precision pattern")
        if not self.pattern:
            raise _bad("A layer-precision override has an empty pattern.", "It would match no layer (or, as a regex, every layer).",
                       "Give a layer name, or a regex such as 'conv_.*'.")
        _check_str(self.precision, f"precision of layer pattern {self.pattern!r}")
        object.__setattr__(self, "precision", self.precision.lower())
        _choice(self.precision, f"precision of layer pattern {self.pattern!r}", LAYER_PRECISIONS)
        if not isinstance(self.regex, bool):
            raise _bad(f"The 'regex' of layer pattern {self.pattern!r} must be true or false, got {self.regex!r}.")
        if self.regex:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise _bad(f"The layer-precision regex {self.pattern!r} does not compile.", f"Python's re said: {exc}.",
                           "Fix the expression, or set regex to false to match the name literally.") from None

    def matches(self, layer_name: str) -> bool:
        """Whether this override applies to ``layer_name``."""
        return bool(re.search(self.pattern, layer_name)) if self.regex else layer_name == self.pattern

    def to_dict(self) -> dict:
        return {"pattern": self.pattern, "precision": self.precision, "regex": self.regex}


@dataclass(frozen=True)
class CalibratorSpec:
    """How INT8 ranges are obtained.

    Attributes
    ----------
    kind : str
        ``"trt_entropy2"``, ``"trt_minmax"``, ``"trt_entropy"``, ``"trt_legacy"``:
        TensorRT's calibrators (TensorRT <= 10), fed from the calibration data at
        the calibration profile's opt shapes. ``"toolkit"``: the toolkit's own
        ranges (``method``), handed to TensorRT as a calibration cache
        (``cache_path``). ``"none"``: no calibration (FP only, or a Q/DQ model).
    method : str, optional
        The toolkit's range method (``"entropy"``, ``"max"``, ``"percentile"``,
        ``"mse"``); only for ``kind="toolkit"``.
    percentile : float
        For ``method="percentile"``.
    cache_path : str, optional
        Calibration cache to read (and, for TensorRT's calibrators, write).
    amax_overrides : mapping
        Tensor name -> amax that replaces the computed range (read-only; pass
        a new dict to :func:`dataclasses.replace` to change it).
    """

    kind: str = "none"
    method: Optional[str] = None
    percentile: float = 99.99
    cache_path: Optional[str] = None
    amax_overrides: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        _check_str(self.kind, "calibrator kind")
        _choice(self.kind, "calibrator kind", CALIBRATOR_KINDS)
        _check_str(self.method, "calibrator method", allow_none=True)
        if self.method is not None:
            if self.kind != "toolkit":
                raise _bad(f"The calibrator method {self.method!r} is set, but the calibrator kind is {self.kind!r}.",
                           "Range methods belong to the toolkit's calibration; TensorRT's calibrators have their own algorithm.",
                           "Set kind to 'toolkit', or clear the method.")
            _choice(self.method, "calibrator method", TOOLKIT_METHODS)
        if isinstance(self.percentile, bool) or not isinstance(self.percentile, (int, float)):
            raise _bad(f"The calibrator percentile must be a number, got {self.percentile!r}.")
        if not 0.0 < float(self.percentile) <= 100.0:
            raise _bad(f"The calibrator percentile is {self.percentile}, outside (0, 100].",
                       fix="Use e.g. 99.99 (keep 99.99 % of |x| values inside the range).")
        object.__setattr__(self, "percentile", float(self.percentile))
        _check_str(self.cache_path, "calibration cache path", allow_none=True)
        if not isinstance(self.amax_overrides, Mapping):
            raise _bad(f"The calibrator's amax_overrides must map tensor names to numbers, got {type(self.amax_overrides).__name__}.")
        overrides = {}
        for name, amax in self.amax_overrides.items():
            if not isinstance(name, str) or isinstance(amax, bool) or not isinstance(amax, (int, float)) \
                    or not math.isfinite(amax) or amax <= 0:
                raise _bad(f"The amax override for tensor {name!r} is {amax!r}.",
                           "An amax is the positive, finite largest |value| the INT8 range covers.",
                           "Give a positive number, or remove the override.")
            overrides[name] = float(amax)
        object.__setattr__(self, "amax_overrides", readonly_mapping(overrides))
        if self.kind == "toolkit" and self.method is None and self.cache_path is None:
            raise _bad("The toolkit calibrator has neither a range method nor a calibration cache.",
                       "It hands TensorRT the toolkit's ranges through a cache, computed with a method or read from a file.",
                       "Choose a method (entropy, max, percentile, mse) or give cache_path.")

    def __hash__(self) -> int:
        return mapping_hash(self.kind, self.method, self.percentile, self.cache_path, self.amax_overrides)

    def __reduce__(self):
        # mappingproxy cannot be pickled or deep-copied; rebuild from a plain dict instead.
        return (type(self), (self.kind, self.method, self.percentile, self.cache_path, dict(self.amax_overrides)))

    @property
    def uses_trt_calibrator(self) -> bool:
        """Whether TensorRT's own calibrator runs during the build."""
        return self.kind.startswith("trt_")

    @property
    def trt_name(self) -> Optional[str]:
        """The calibrator's short name in :attr:`TrtFeatures.calibrators` (``"entropy2"``...), or None."""
        return self.kind[4:] if self.uses_trt_calibrator else None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "method": self.method, "percentile": self.percentile,
                "cache_path": self.cache_path, "amax_overrides": dict(self.amax_overrides)}


def _calib_spec_class():
    # Imported here: calib_data is a sibling module that need not be loaded for FP builds.
    from ..calibration.data import CalibrationDataSpec

    return CalibrationDataSpec


@dataclass(frozen=True)
class Recipe:
    """One TensorRT build, as an immutable value (see the module docstring).

    Create one with :meth:`for_model`, change it with :meth:`replace`, check it
    against a model with :func:`validate_recipe`, store it with
    :func:`save_recipe` / :func:`load_recipe`.

    Attributes
    ----------
    model_path : str
        The ONNX model.
    model_sha256 : str
        SHA-256 of the model file (and its external data), to notice a changed model.
    flags : tuple of str
        Precision builder flags, lower case, in :data:`FLAGS` order.
    precision_constraints : str
        ``"none"``, ``"obey"`` or ``"prefer"``.
    layer_precisions : tuple of LayerPrecision
        Per-layer precision overrides (need constraints to take effect).
    calibrator : CalibratorSpec
    calibration_data : CalibrationDataSpec, optional
    profiles : tuple of Profile
        Optimization profiles; every dynamic input must be in each.
    calibration_profile : int
        Index of the profile whose opt shapes calibration runs at.
    builder_optimization_level : int, optional
        0-5; None for TensorRT's default.
    workspace_mib : int, optional
        Workspace memory-pool limit; None for TensorRT's default.
    timing_cache : str, optional
        Timing-cache file read before and written after the build.
    trt_version : str, optional
        The TensorRT version the recipe was made with (``"8.6.0"``).
    schema_version : int
        :data:`SCHEMA_VERSION`.
    """

    model_path: str
    model_sha256: str
    flags: Tuple[str, ...] = ()
    precision_constraints: str = "none"
    layer_precisions: Tuple[LayerPrecision, ...] = ()
    calibrator: CalibratorSpec = field(default_factory=CalibratorSpec)
    calibration_data: Optional[CalibrationDataSpec] = None
    profiles: Tuple[Profile, ...] = ()
    calibration_profile: int = 0
    builder_optimization_level: Optional[int] = None
    workspace_mib: Optional[int] = None
    timing_cache: Optional[str] = None
    trt_version: Optional[str] = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self):
        set_ = object.__setattr__
        _check_int(self.schema_version, "schema_version")
        if self.schema_version != SCHEMA_VERSION:
            raise _bad(f"The recipe has schema version {self.schema_version}; this trtwidgets reads version {SCHEMA_VERSION}.",
                       "It was written by a different trtwidgets release.",
                       "Re-create the recipe in this release's notebook, or use the trtwidgets release that wrote it.")
        if isinstance(self.model_path, os.PathLike):
            set_(self, "model_path", os.fspath(self.model_path))
        _check_str(self.model_path, "model_path")
        _check_str(self.model_sha256, "model_sha256")
        if self.model_sha256 and not re.fullmatch(r"[0-9a-f]{64}", self.model_sha256):
            raise _bad(f"The recipe's model_sha256 {self.model_sha256!r:.80} is not a SHA-256 hex digest.",
                       fix="Create the recipe with Recipe.for_model(load_model(path)), which fills it in.")
        # Flags: lower-case, known, in canonical order, no duplicates.
        flags = (self.flags,) if isinstance(self.flags, str) else self.flags
        if not isinstance(flags, (list, tuple, set, frozenset)):
            raise _bad(f"The recipe's flags must be a list of names, got {type(flags).__name__}.")
        names = []
        for f in flags:
            _check_str(f, "flag name")
            f = f.lower()
            _choice(f, "flag", FLAGS)
            names.append(f)
        set_(self, "flags", tuple(f for f in FLAGS if f in names))
        _check_str(self.precision_constraints, "precision_constraints")
        set_(self, "precision_constraints", self.precision_constraints.lower())
        _choice(self.precision_constraints, "precision_constraints", PRECISION_CONSTRAINTS)
        set_(self, "layer_precisions", tuple(self.layer_precisions))
        for lp in self.layer_precisions:
            if not isinstance(lp, LayerPrecision):
                raise _bad(f"A layer-precision override is a {type(lp).__name__}, not a LayerPrecision.")
        if not isinstance(self.calibrator, CalibratorSpec):
            raise _bad(f"The recipe's calibrator is a {type(self.calibrator).__name__}, not a CalibratorSpec.")
        if self.calibration_data is not None and not isinstance(self.calibration_data, _calib_spec_class()):
            raise _bad(f"The recipe's calibration_data is a {type(self.calibration_data).__name__}, not a CalibrationDataSpec.")
        set_(self, "profiles", tuple(self.profiles))
        for p in self.profiles:
            if not isinstance(p, Profile):
                raise _bad(f"An optimization profile is a {type(p).__name__}, not a Profile.")
        _check_int(self.calibration_profile, "calibration_profile")
        if self.profiles and not 0 <= self.calibration_profile < len(self.profiles):
            raise _bad(f"The calibration profile index is {self.calibration_profile}, but the recipe has "
                       f"{len(self.profiles)} profile(s) (valid: 0..{len(self.profiles) - 1}).",
                       "Calibration runs at the opt shapes of one of the recipe's profiles.",
                       "Pick an existing profile.")
        if not self.profiles and self.calibration_profile != 0:
            raise _bad(f"The calibration profile index is {self.calibration_profile}, but the recipe has no profile.",
                       fix="Set calibration_profile to 0.")
        _check_int(self.builder_optimization_level, "builder_optimization_level", allow_none=True)
        if self.builder_optimization_level is not None and self.builder_optimization_level not in OPT_LEVELS:
            raise _bad(f"The builder optimization level is {self.builder_optimization_level}; TensorRT accepts 0 to 5.",
                       "Lower levels build faster, higher ones search more tactics (3 is the default).")
        _check_int(self.workspace_mib, "workspace_mib", allow_none=True)
        if self.workspace_mib is not None and self.workspace_mib <= 0:
            raise _bad(f"The workspace limit is {self.workspace_mib} MiB.", fix="Give a positive number of MiB, or null for TensorRT's default.")
        _check_str(self.timing_cache, "timing_cache", allow_none=True)
        _check_str(self.trt_version, "trt_version", allow_none=True)
        if self.trt_version is not None and _major(self.trt_version) is None:
            raise _bad(f"The recipe's trt_version {self.trt_version!r} is not a version such as '8.6.0' or '10.16.1.11'.")

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def for_model(cls, model, **kw) -> "Recipe":
        """A recipe for a loaded model, profiles pre-filled by :func:`default_profiles`.

        Parameters
        ----------
        model : LoadedModel
            From :func:`trtwidgets.core.model.load.load_model`.
        **kw
            Any other :class:`Recipe` field. ``data_shapes`` (input -> shape or
            shapes of the calibration data) is passed to :func:`default_profiles`.
        """
        data_shapes = kw.pop("data_shapes", None)
        if "profiles" not in kw:
            kw["profiles"] = default_profiles(model.summary, data_shapes)
        return cls(model_path=str(model.path), model_sha256=model.sha256, **kw)

    def replace(self, **changes) -> "Recipe":
        """A new recipe with ``changes`` applied (checked like a new one)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise _bad(f"Recipe has no field {', '.join(map(repr, unknown))}.",
                       fix=f"Fields: {', '.join(f.name for f in dataclasses.fields(self))}.")
        return dataclasses.replace(self, **changes)

    @property
    def calibration_shapes(self) -> Dict[str, Tuple[int, ...]]:
        """Input -> opt shape of the calibration profile (empty without profiles)."""
        return self.profiles[self.calibration_profile].opt_shapes() if self.profiles else {}

    # -- JSON ---------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The recipe as plain JSON types (lists, dicts, str, numbers, null)."""
        return {
            "schema_version": self.schema_version,
            "model_path": self.model_path,
            "model_sha256": self.model_sha256,
            "flags": list(self.flags),
            "precision_constraints": self.precision_constraints,
            "layer_precisions": [lp.to_dict() for lp in self.layer_precisions],
            "calibrator": self.calibrator.to_dict(),
            "calibration_data": None if self.calibration_data is None else self.calibration_data.to_dict(),
            "profiles": [p.to_dict() for p in self.profiles],
            "calibration_profile": self.calibration_profile,
            "builder_optimization_level": self.builder_optimization_level,
            "workspace_mib": self.workspace_mib,
            "timing_cache": self.timing_cache,
            "trt_version": self.trt_version,
        }

    def to_json(self, indent: Optional[int] = 2) -> str:
        """JSON text; shapes stay on one line (``[1, 3, 48, 192]``) so that a diff of two recipes reads well."""
        text = json.dumps(self.to_dict(), indent=indent)
        return _INT_LIST.sub(lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)

    @classmethod
    def from_dict(cls, d: Mapping) -> "Recipe":
        """Rebuild a recipe from :meth:`to_dict` output; unknown or missing keys are errors."""
        if not isinstance(d, Mapping):
            raise _bad(f"A recipe must be a JSON object, got {type(d).__name__}.")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise _bad(f"The recipe's schema_version is {version!r}; this trtwidgets reads version {SCHEMA_VERSION}.",
                       "The file lacks a schema version, or was written by a different trtwidgets release."
                       if version is None else "It was written by a different trtwidgets release.",
                       "Re-create the recipe in this release's notebook, or use the release that wrote it.")
        _keys(d, {f.name for f in dataclasses.fields(cls)}, required={"model_path", "model_sha256"}, where="recipe")
        kw = dict(d)
        kw["flags"] = tuple(_list(d.get("flags", []), "flags"))
        kw["layer_precisions"] = tuple(_layer_precision(x) for x in _list(d.get("layer_precisions", []), "layer_precisions"))
        cal = d.get("calibrator", {})
        if not isinstance(cal, Mapping):
            raise _bad(f"The recipe's calibrator must be an object, got {type(cal).__name__}.")
        _keys(cal, {f.name for f in dataclasses.fields(CalibratorSpec)}, where="calibrator")
        kw["calibrator"] = CalibratorSpec(**cal)
        data = d.get("calibration_data")
        if data is not None:
            if not isinstance(data, Mapping):
                raise _bad(f"The recipe's calibration_data must be an object or null, got {type(data).__name__}.")
            try:
                kw["calibration_data"] = _calib_spec_class().from_dict(data)
            except RecipeError:
                raise
            except Exception as exc:  # noqa: BLE001 - from_dict raises its own UserError or TypeError/KeyError
                why = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                raise _bad("The recipe's calibration_data could not be read.", why,
                           "Fix the calibration_data object, or set it to null and choose the data again.") from None
        kw["profiles"] = tuple(Profile.from_dict(p, f"profile {i}")
                               for i, p in enumerate(_list(d.get("profiles", []), "profiles")))
        return cls(**kw)

    @classmethod
    def from_json(cls, text: Union[str, bytes], source: str = "the recipe") -> "Recipe":
        """Parse a recipe from JSON text (``json.loads`` only; nothing is evaluated)."""
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _bad(f"{source} is not valid JSON.", f"json said: {exc}.",
                       "Fix the file (or save the recipe again from the notebook).") from None
        return cls.from_dict(d)


def _keys(d: Mapping, allowed, required=(), where: str = "recipe") -> None:
    unknown = sorted(set(d) - set(allowed))
    if unknown:
        raise _bad(f"The {where} has unknown key(s) {', '.join(map(repr, unknown))}.",
                   "A misspelt key would otherwise be ignored silently.",
                   f"Allowed keys: {', '.join(sorted(allowed))}.")
    missing = sorted(set(required) - set(d))
    if missing:
        raise _bad(f"The {where} lacks the key(s) {', '.join(map(repr, missing))}.")


def _list(value, name: str) -> list:
    if not isinstance(value, list):
        raise _bad(f"The recipe's {name} must be a list, got {type(value).__name__}.")
    return value


def _layer_precision(x) -> LayerPrecision:
    if not isinstance(x, Mapping):
        raise _bad(f"A layer-precision override must be an object, got {x!r:.80}.")
    _keys(x, {"pattern", "precision", "regex"}, required={"pattern", "precision"}, where="layer-precision override")
    return LayerPrecision(**x)


# -- files ------------------------------------------------------------------------------------


def save_recipe(recipe: Recipe, path: Union[str, os.PathLike]) -> Path:
    """Write ``recipe`` as JSON, atomically (a crash leaves the old file intact).

    Returns
    -------
    pathlib.Path
        The path written.
    """
    return write_text_atomic(path, recipe.to_json() + "\n")


def load_recipe(path: Union[str, os.PathLike]) -> Recipe:
    """Read a recipe written by :func:`save_recipe`.

    A relative ``model_path`` in the file is taken relative to the recipe's
    folder, so a recipe can travel next to its model.

    Raises
    ------
    RecipeError
        For a missing file, bad JSON, unknown keys, wrong types or an unknown
        schema version.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise _bad(f"No recipe at {path}.", "The path does not exist or is a directory.",
                   "Give the path of a recipe .json file saved by the notebook or save_recipe().")
    recipe = Recipe.from_json(path.read_bytes(), source=str(path))
    if recipe.model_path and not Path(recipe.model_path).expanduser().is_absolute():
        recipe = recipe.replace(model_path=str((path.parent / recipe.model_path).resolve()))
    return recipe


# -- checks against a model and a TensorRT ----------------------------------------------------


def _major(version: Optional[str]) -> Optional[int]:
    m = re.match(r"^\s*(\d+)(\.\d+)*", version or "")
    return int(m.group(1)) if m else None


def _version_support(version: str) -> dict:
    """What a TensorRT version supports, for recipes checked without the module at hand.

    Used only when no :class:`~trtwidgets.trt.features.TrtFeatures` is given:
    the features read from the module itself take precedence.
    """
    major = _major(version) or 0
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
    mm = (parts[0], parts[1])
    if major >= 11:
        return {"flags": ("tf32",), "constraints": False, "layer_precision": False, "calibrators": (),
                "opt_level": True, "timing_cache": True}
    flags = ["fp16", "int8", "tf32"]
    if mm >= (8, 6):
        flags.append("fp8")
    if major >= 9:
        flags.append("bf16")
    return {"flags": tuple(flags), "constraints": True, "layer_precision": True,
            "calibrators": ("entropy2", "minmax", "entropy", "legacy"),
            "opt_level": mm >= (8, 6), "timing_cache": True}


def _feature_view(recipe: Recipe, features) -> Optional[dict]:
    if features is not None:
        return {"flags": tuple(features.precision_flags), "constraints": features.precision_constraints,
                "layer_precision": features.layer_precision, "calibrators": tuple(features.calibrators),
                "opt_level": features.builder_optimization_level, "timing_cache": features.timing_cache,
                "version": features.version, "explanations": dict(features.explanations)}
    if recipe.trt_version:
        view = _version_support(recipe.trt_version)
        view.update(version=recipe.trt_version, explanations={})
        return view
    return None


def recipe_problems(recipe: Recipe, summary=None, features=None) -> List[str]:
    """Every problem of ``recipe`` for a model and a TensorRT, one message each.

    Parameters
    ----------
    recipe : Recipe
    summary : ModelSummary, optional
        The model's summary; profiles and the model hash are checked against it.
    features : TrtFeatures, optional
        What the installed TensorRT supports (``trtwidgets.trt.features()``).
        Without it, ``recipe.trt_version`` (if set) decides.
    """
    problems: List[str] = []
    if summary is not None:
        if recipe.model_sha256 and summary.sha256 and recipe.model_sha256 != summary.sha256:
            problems.append(f"the model file has changed since the recipe was made (recipe: sha256 {recipe.model_sha256[:12]}..., "
                            f"model: {summary.sha256[:12]}...).")
        problems.extend(profile_problems(recipe.profiles, summary))
    data = recipe.calibration_data
    if data is not None and getattr(data, "opt_shapes", None) and recipe.profiles:
        for name, shape in data.opt_shapes.items():
            want = recipe.calibration_shapes.get(name)
            if want is not None and tuple(shape) != tuple(want):
                problems.append(f"input {name!r}: the calibration data is prepared at {_fmt(shape)}, but calibration "
                                f"profile {recipe.calibration_profile} has opt {_fmt(want)} (calibration runs at opt).")
    flags = set(recipe.flags)
    for lp in recipe.layer_precisions:
        need = _PRECISION_FLAG.get(lp.precision)
        if need and need not in flags:
            problems.append(f"layer pattern {lp.pattern!r} is pinned to {lp.precision}, but the {need} flag is off.")
    if recipe.layer_precisions and recipe.precision_constraints == "none":
        problems.append("per-layer precisions are set, but precision_constraints is 'none', so TensorRT ignores them "
                        "(set 'prefer' or 'obey').")
    cal = recipe.calibrator
    if cal.kind != "none" and "int8" not in flags:
        problems.append(f"the calibrator is {cal.kind!r}, but the int8 flag is off, so nothing is calibrated [CALIBRATOR_WITHOUT_INT8].")
    if cal.uses_trt_calibrator and recipe.calibration_data is None and not (cal.cache_path and Path(cal.cache_path).is_file()):
        problems.append(f"TensorRT's calibrator {cal.kind!r} needs calibration data (or an existing cache_path).")
    if cal.kind == "toolkit" and recipe.calibration_data is None and not (cal.cache_path and Path(cal.cache_path).is_file()):
        problems.append("the toolkit calibrator needs calibration data to compute ranges, or an existing calibration cache.")
    if "int8" in flags and cal.kind == "none" and summary is not None and summary.qdq.count == 0:
        problems.append("the int8 flag is on, but the model has no Q/DQ nodes and no calibrator is chosen, so TensorRT has no "
                        "INT8 ranges (choose a calibrator, or export a Q/DQ model) [INT8_WITHOUT_CALIBRATION].")
    major = features.major if features is not None else _major(recipe.trt_version)
    if summary is not None and summary.qdq.count and major is not None and major <= 10:
        qtypes = set(summary.qdq.dtypes)
        if qtypes & {"int8", "uint8"} and "int8" not in flags:
            problems.append("the model has INT8 Q/DQ nodes but the int8 flag is off: TensorRT <= 10 then fails with "
                            "'Int8 precision has been set for a layer or layer output, but int8 is not configured in the "
                            "builder' (turn int8 on beside fp16) [QDQ_REQUIRES_INT8].")
        if any(t.startswith("float8") for t in qtypes) and "fp8" not in flags:
            problems.append("the model has FP8 Q/DQ nodes but the fp8 flag is off (turn fp8 on) [QDQ_REQUIRES_FP8].")
    view = _feature_view(recipe, features)
    if view is not None:
        where = f"TensorRT {view['version']}"
        expl = view["explanations"]
        for f in recipe.flags:
            if f not in view["flags"]:
                problems.append(f"{where} has no {f} flag." + (f" {expl[f]}" if f in expl else ""))
        if recipe.precision_constraints != "none" and not view["constraints"]:
            problems.append(f"{where} has no precision constraints ({recipe.precision_constraints!r})."
                            + (f" {expl['precision_constraints']}" if "precision_constraints" in expl else ""))
        if recipe.layer_precisions and not view["layer_precision"]:
            problems.append(f"{where} cannot pin layer precisions." + (f" {expl['layer_precision']}" if "layer_precision" in expl else ""))
        if cal.uses_trt_calibrator and cal.trt_name not in view["calibrators"]:
            problems.append(f"{where} has no {cal.trt_name} calibrator." + (f" {expl['calibrators']}" if "calibrators" in expl else ""))
        if cal.kind == "toolkit" and not view["calibrators"]:
            problems.append(f"{where} reads no calibration cache; export a Q/DQ model from the toolkit's ranges instead.")
        if recipe.builder_optimization_level is not None and not view["opt_level"]:
            problems.append(f"{where} has no builder optimization level (set it to null).")
        if recipe.timing_cache is not None and not view["timing_cache"]:
            problems.append(f"{where} has no timing cache (set timing_cache to null).")
    return problems


def validate_recipe(recipe: Recipe, summary=None, features=None) -> None:
    """Raise :class:`RecipeError` if ``recipe`` does not fit the model or TensorRT.

    Every message names what is wrong; for profiles, the input and the
    dimension (e.g. ``profile 0: input 'x' dimension 2 (H): opt 300 is outside
    [min, max] = [32, 256]``). See :func:`recipe_problems` for the checks.
    """
    problems = recipe_problems(recipe, summary, features)
    if problems:
        first = problems[0][0].upper() + problems[0][1:]
        raise RecipeError(
            first if len(problems) == 1 else f"{first.rstrip('.')} (and {len(problems) - 1} more problem(s)).",
            "\n".join(f"- {p}" for p in problems) if len(problems) > 1 else
            "The build would fail, or TensorRT would silently ignore the setting.",
            "Change the recipe as said above; the widgets of the notebook offer only valid choices.",
        )


__all__ = [
    "SCHEMA_VERSION", "FLAGS", "PRECISION_CONSTRAINTS", "LAYER_PRECISIONS", "CALIBRATOR_KINDS", "TOOLKIT_METHODS",
    "LayerPrecision", "CalibratorSpec", "Recipe", "Profile", "ShapeRange",
    "save_recipe", "load_recipe", "validate_recipe", "recipe_problems",
]
