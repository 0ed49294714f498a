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
  self-consistent (its parts, :class:`LayerPrecision` and
  :class:`CalibratorSpec`, live in :mod:`~trtwidgets.core.recipe.fields`);
- :func:`validate_recipe` checks it against the model (profiles, ranks, static
  dims) and against what the installed TensorRT supports (in
  :mod:`~trtwidgets.core.recipe.validate`);
- :func:`load_recipe` reads JSON only (never evaluates or unpickles) and
  rejects unknown keys, wrong types and unknown schema versions.

Everything a recipe user needs is importable from here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple, Union

from ..common.atomic import write_text_atomic
from ..common.errors import RecipeError, UserError
from ..common.json_limits import RECIPE_LIMITS, check_file_size, load_json
from ..common.paths import user_path
from .fields import (CALIBRATOR_KINDS, FLAGS, LAYER_PRECISIONS, OPT_LEVELS, PRECISION_CONSTRAINTS, TOOLKIT_METHODS,
                     CalibratorSpec, LayerPrecision, bad, check_choice, check_int, check_path_str, check_str,
                     major_version)
from .profiles import Profile, ShapeRange, default_profiles
from .validate import recipe_problems, validate_recipe

if TYPE_CHECKING:  # only for annotations: calib_data is imported when a recipe holds a spec
    from ..calibration.data import CalibrationDataSpec

#: Version of the JSON layout written by :meth:`Recipe.to_json`.
SCHEMA_VERSION = 1

# Lists of ints (shapes) that json.dumps(indent=...) spreads over lines, put back on one.
_INT_LIST = re.compile(r"\[\s+(-?\d+(?:,\s+-?\d+)*)\s+\]")


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
        check_int(self.schema_version, "schema_version")
        if self.schema_version != SCHEMA_VERSION:
            raise bad(f"The recipe has schema version {self.schema_version}; this trtwidgets reads version {SCHEMA_VERSION}.",
                      "It was written by a different trtwidgets release.",
                      "Re-create the recipe in this release's notebook, or use the trtwidgets release that wrote it.")
        if isinstance(self.model_path, os.PathLike):
            set_(self, "model_path", os.fspath(self.model_path))
        check_path_str(self.model_path, "model_path")
        check_str(self.model_sha256, "model_sha256")
        if self.model_sha256 and not re.fullmatch(r"[0-9a-f]{64}", self.model_sha256):
            raise bad(f"The recipe's model_sha256 {self.model_sha256!r:.80} is not a SHA-256 hex digest.",
                      fix="Create the recipe with Recipe.for_model(load_model(path)), which fills it in.")
        # Flags: lower-case, known, in canonical order, no duplicates.
        flags = (self.flags,) if isinstance(self.flags, str) else self.flags
        if not isinstance(flags, (list, tuple, set, frozenset)):
            raise bad(f"The recipe's flags must be a list of names, got {type(flags).__name__}.")
        names = []
        for f in flags:
            check_str(f, "flag name")
            f = f.lower()
            check_choice(f, "flag", FLAGS)
            names.append(f)
        set_(self, "flags", tuple(f for f in FLAGS if f in names))
        check_str(self.precision_constraints, "precision_constraints")
        set_(self, "precision_constraints", self.precision_constraints.lower())
        check_choice(self.precision_constraints, "precision_constraints", PRECISION_CONSTRAINTS)
        set_(self, "layer_precisions", tuple(self.layer_precisions))
        for lp in self.layer_precisions:
            if not isinstance(lp, LayerPrecision):
                raise bad(f"A layer-precision override is a {type(lp).__name__}, not a LayerPrecision.")
        if not isinstance(self.calibrator, CalibratorSpec):
            raise bad(f"The recipe's calibrator is a {type(self.calibrator).__name__}, not a CalibratorSpec.")
        if self.calibration_data is not None and not isinstance(self.calibration_data, _calib_spec_class()):
            raise bad(f"The recipe's calibration_data is a {type(self.calibration_data).__name__}, not a CalibrationDataSpec.")
        set_(self, "profiles", tuple(self.profiles))
        for p in self.profiles:
            if not isinstance(p, Profile):
                raise bad(f"An optimization profile is a {type(p).__name__}, not a Profile.")
        check_int(self.calibration_profile, "calibration_profile")
        if self.profiles and not 0 <= self.calibration_profile < len(self.profiles):
            raise bad(f"The calibration profile index is {self.calibration_profile}, but the recipe has "
                      f"{len(self.profiles)} profile(s) (valid: 0..{len(self.profiles) - 1}).",
                      "Calibration runs at the opt shapes of one of the recipe's profiles.",
                      "Pick an existing profile.")
        if not self.profiles and self.calibration_profile != 0:
            raise bad(f"The calibration profile index is {self.calibration_profile}, but the recipe has no profile.",
                      fix="Set calibration_profile to 0.")
        check_int(self.builder_optimization_level, "builder_optimization_level", allow_none=True)
        if self.builder_optimization_level is not None and self.builder_optimization_level not in OPT_LEVELS:
            raise bad(f"The builder optimization level is {self.builder_optimization_level}; TensorRT accepts 0 to 5.",
                      "Lower levels build faster, higher ones search more tactics (3 is the default).")
        check_int(self.workspace_mib, "workspace_mib", allow_none=True)
        if self.workspace_mib is not None and self.workspace_mib <= 0:
            raise bad(f"The workspace limit is {self.workspace_mib} MiB.", fix="Give a positive number of MiB, or null for TensorRT's default.")
        check_path_str(self.timing_cache, "timing_cache", allow_none=True)
        check_str(self.trt_version, "trt_version", allow_none=True)
        if self.trt_version is not None and major_version(self.trt_version) is None:
            raise bad(f"The recipe's trt_version {self.trt_version!r} is not a version such as '8.6.0' or '10.16.1.11'.")

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
            raise bad(f"Recipe has no field {', '.join(map(repr, unknown))}.",
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
            raise bad(f"A recipe must be a JSON object, got {type(d).__name__}.")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise bad(f"The recipe's schema_version is {version!r}; this trtwidgets reads version {SCHEMA_VERSION}.",
                      "The file lacks a schema version, or was written by a different trtwidgets release."
                      if version is None else "It was written by a different trtwidgets release.",
                      "Re-create the recipe in this release's notebook, or use the release that wrote it.")
        _keys(d, {f.name for f in dataclasses.fields(cls)}, required={"model_path", "model_sha256"}, where="recipe")
        kw = dict(d)
        kw["flags"] = tuple(_list(d.get("flags", []), "flags"))
        kw["layer_precisions"] = tuple(_layer_precision(x) for x in _list(d.get("layer_precisions", []), "layer_precisions"))
        cal = d.get("calibrator", {})
        if not isinstance(cal, Mapping):
            raise bad(f"The recipe's calibrator must be an object, got {type(cal).__name__}.")
        _keys(cal, {f.name for f in dataclasses.fields(CalibratorSpec)}, where="calibrator")
        kw["calibrator"] = CalibratorSpec(**cal)
        data = d.get("calibration_data")
        if data is not None:
            if not isinstance(data, Mapping):
                raise bad(f"The recipe's calibration_data must be an object or null, got {type(data).__name__}.")
            _check_data_types(data)
            try:
                kw["calibration_data"] = _calib_spec_class().from_dict(data)
            except RecipeError:
                raise
            except Exception as exc:
                why = (exc.message if isinstance(exc, UserError) else "") or f"{type(exc).__name__}: {exc}"
                raise bad("The recipe's calibration_data could not be read.", why,
                          "Fix the calibration_data object, or set it to null and choose the data again.") from None
        kw["profiles"] = tuple(Profile.from_dict(p, f"profile {i}")
                               for i, p in enumerate(_list(d.get("profiles", []), "profiles")))
        return cls(**kw)

    @classmethod
    def from_json(cls, text: Union[str, bytes], source: str = "the recipe") -> "Recipe":
        """Parse a recipe from JSON text (``json.loads`` only; nothing is evaluated)."""
        d = load_json(text, source, RECIPE_LIMITS, RecipeError, on_decode_error=lambda exc: bad(
            f"{source} is not valid JSON.", f"json said: {exc}.",
            "Fix the file (or save the recipe again from the notebook)."))
        return cls.from_dict(d)


#: calibration_data's JSON fields: (key, the JSON types it takes, how the message says them, an example).
_DATA_TYPES = (("kind", (str,), "a string", '"npy_dir"'), ("path", (str, type(None)), "a string or null", '"data/"'),
               ("batch_size", (int,), "a whole number", "8"), ("max_samples", (int, type(None)),
                                                                "a whole number or null", "256"),
               ("preprocessing", (Mapping, type(None)), "an object or null", '{"input": "x", "resize": [48, 192]}'),
               ("adapt", (Mapping,), "an object", '{"x": "pad"}'), ("opt_shapes", (Mapping,), "an object",
                                                                    '{"x": [1, 3, 48, 192]}'))


def _type_error(field: str, value, expected: str, example: str) -> RecipeError:
    return bad(f"The recipe's {field} is {value!r:.80} ({type(value).__name__}), not {expected}.",
               "A recipe is read strictly: a number written as text (\"8\"), or a value of another type, is refused "
               "rather than guessed at.",
               f"Write it as {expected} without quotes around numbers, e.g. \"{field.rpartition('.')[2]}\": {example}.")


def _check_data_types(data: Mapping) -> None:
    """Refuse calibration_data fields of the wrong JSON type (``"batch_size": "8"``, ``"opt_shapes": {"x": "1348"}``)."""
    for key, types, expected, example in _DATA_TYPES:
        if key in data and (isinstance(data[key], bool) or not isinstance(data[key], types)):
            raise _type_error(f"calibration_data.{key}", data[key], expected, example)
    for name, mode in (data.get("adapt") or {}).items():
        if not isinstance(mode, str):
            raise _type_error(f"calibration_data.adapt[{name!r}]", mode, "a string", '"pad"')
    for name, shape in (data.get("opt_shapes") or {}).items():
        if not isinstance(shape, list) or any(isinstance(d, bool) or not isinstance(d, int) for d in shape):
            raise _type_error(f"calibration_data.opt_shapes[{name!r}]", shape, "a list of whole numbers",
                              "[1, 3, 48, 192]")


def _keys(d: Mapping, allowed, required=(), where: str = "recipe") -> None:
    unknown = sorted(set(d) - set(allowed))
    if unknown:
        raise bad(f"The {where} has unknown key(s) {', '.join(map(repr, unknown))}.",
                  "A misspelt key would otherwise be ignored silently.",
                  f"Allowed keys: {', '.join(sorted(allowed))}.")
    missing = sorted(set(required) - set(d))
    if missing:
        raise bad(f"The {where} lacks the key(s) {', '.join(map(repr, missing))}.")


def _list(value, name: str) -> list:
    if not isinstance(value, list):
        raise bad(f"The recipe's {name} must be a list, got {type(value).__name__}.")
    return value


def _layer_precision(x) -> LayerPrecision:
    if not isinstance(x, Mapping):
        raise bad(f"A layer-precision override must be an object, got {x!r:.80}.")
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


def _beside(folder: Path, value: Optional[str]) -> Optional[str]:
    """``value`` taken relative to ``folder`` when it is a relative path (``~`` expanded), else as it is."""
    if not value:
        return value
    path = user_path(value)
    return value if path.is_absolute() else str((folder / path).resolve())


def _paths_beside(recipe: Recipe, folder: Path) -> Recipe:
    """``recipe`` with every relative path it names taken relative to ``folder`` (the recipe file's)."""
    changes: Dict[str, Any] = {}
    if recipe.model_path and _beside(folder, recipe.model_path) != recipe.model_path:
        changes["model_path"] = _beside(folder, recipe.model_path)
    if recipe.timing_cache and _beside(folder, recipe.timing_cache) != recipe.timing_cache:
        changes["timing_cache"] = _beside(folder, recipe.timing_cache)
    cal = recipe.calibrator
    if cal.cache_path and _beside(folder, cal.cache_path) != cal.cache_path:
        changes["calibrator"] = dataclasses.replace(cal, cache_path=_beside(folder, cal.cache_path))
    data = recipe.calibration_data
    if data is not None and data.kind != "demo" and data.path and _beside(folder, data.path) != data.path:
        changes["calibration_data"] = data.replace(path=_beside(folder, data.path))
    return recipe.replace(**changes) if changes else recipe


def load_recipe(path: Union[str, os.PathLike]) -> Recipe:
    """Read a recipe written by :func:`save_recipe`.

    Every relative path in the file (``model_path``, ``calibration_data.path``,
    ``calibrator.cache_path``, ``timing_cache``) is taken relative to the recipe's
    folder, never to the current one: a recipe travels next to its model and data, and
    ``run`` from another folder never calibrates on another folder of the same name.

    Raises
    ------
    RecipeError
        For a missing file, bad JSON, unknown keys, wrong types or an unknown
        schema version.
    """
    path = user_path(path)
    if not path.is_file():
        raise bad(f"No recipe at {path}.", "The path does not exist or is a directory.",
                  "Give the path of a recipe .json file saved by the notebook or save_recipe().")
    check_file_size(path, RECIPE_LIMITS, RecipeError)  # refused unread: a 100 MB model_path, or another file
    recipe = Recipe.from_json(path.read_bytes(), source=str(path))
    return _paths_beside(recipe, Path(os.path.abspath(path)).parent)


def locate_model(recipe: Any, recipe_dir: Any = None) -> Any:
    """``recipe`` with a model path that exists here, when it can be found.

    A recipe made on another machine (a GPU box) names that machine's path. Tried in
    order: the path as written, relative to ``recipe_dir``, the file's name in
    ``recipe_dir``, and the bundled demo model when the recipe's SHA-256 is the demo's.
    The recipe is returned unchanged when nothing matches (loading then says what is missing).
    """
    import hashlib

    from ... import demo

    p = Path(recipe.model_path)
    if p.exists():
        return recipe
    cands = [Path(recipe_dir) / p, Path(recipe_dir) / p.name] if recipe_dir is not None else []
    for cand in cands:
        if cand.exists():
            return recipe.replace(model_path=str(cand))
    sha = recipe.model_sha256
    if sha and sha == hashlib.sha256(Path(demo.MODEL_PATH).read_bytes()).hexdigest():
        return recipe.replace(model_path=str(demo.MODEL_PATH))
    return recipe


__all__ = [
    "SCHEMA_VERSION", "FLAGS", "PRECISION_CONSTRAINTS", "LAYER_PRECISIONS", "CALIBRATOR_KINDS", "TOOLKIT_METHODS",
    "LayerPrecision", "CalibratorSpec", "Recipe", "Profile", "ShapeRange",
    "save_recipe", "load_recipe", "locate_model", "validate_recipe", "recipe_problems",
]
