"""The parts of a recipe: its vocabularies, :class:`LayerPrecision` and :class:`CalibratorSpec`.

Immutable values that check themselves when constructed (a wrong type, an
unknown name, a regex that does not compile is a :class:`RecipeError` naming the
field), so that a :class:`~trtwidgets.core.recipe.recipe.Recipe` built from them
is always self-consistent. The field checks are shared with the Recipe itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping, Optional

from ..common.errors import RecipeError
from ..common.name_patterns import check_pattern, match_time_limit
from ..common.frozen import mapping_hash, readonly_mapping

__all__ = [
    "FLAGS", "PRECISION_CONSTRAINTS", "LAYER_PRECISIONS", "CALIBRATOR_KINDS", "TOOLKIT_METHODS", "OPT_LEVELS",
    "LayerPrecision", "CalibratorSpec",
]

#: Builder precision flags (lower-case names of ``trt.BuilderFlag`` members).
FLAGS = ("fp16", "bf16", "int8", "fp8", "tf32")
#: Values of :attr:`Recipe.precision_constraints`.
PRECISION_CONSTRAINTS = ("none", "obey", "prefer")
#: Precisions a layer can be pinned to.
LAYER_PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8")
#: Calibrator kinds: TensorRT's four calibrators, the toolkit's ranges through a cache, or none.
CALIBRATOR_KINDS = ("none", "trt_entropy2", "trt_minmax", "trt_entropy", "trt_legacy", "toolkit")
#: The toolkit's range methods (see ``trtwidgets.core.calibration.ranges``; ``auto``, the default, picks each
#: tensor's: ``trtwidgets.core.calibration.auto_ranges``).
TOOLKIT_METHODS = ("auto", "entropy", "max", "percentile", "mse")
#: ``trt.BuilderOptimizationLevel`` accepts 0..5 (3 is TensorRT's default).
OPT_LEVELS = range(0, 6)


def bad(what: str, why: Optional[str] = None, fix: Optional[str] = None) -> RecipeError:
    """A :class:`RecipeError` (what is wrong, why, what to do), to raise.

    A message given without a why or a fix gets the general ones, so that no recipe error is
    left with only its first line (issue 16: every bad input says what, why and what to do).
    """
    return RecipeError(what, why or "A recipe is read strictly: a wrong setting is refused, never guessed at or ignored.",
                       fix or "Correct that setting in the recipe's JSON, or save the recipe again from the app "
                              "(Save recipe).")


def check_str(value, name: str, allow_none: bool = False) -> None:
    """Raise unless ``value`` is a string (or None, where allowed); ``name`` says which field."""
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise bad(f"The recipe's {name} must be a string{' or null' if allow_none else ''}, got {type(value).__name__} {value!r:.80}.")


#: The longest path a recipe may name: Linux's PATH_MAX; no file system opens a longer one.
MAX_PATH_CHARS = 4096


def check_path_str(value, name: str, allow_none: bool = False) -> None:
    """:func:`check_str`, and a length and characters that a file path can have."""
    check_str(value, name, allow_none)
    if value is None:
        return
    if len(value) > MAX_PATH_CHARS:
        raise bad(f"The recipe's {name} is {len(value):,} characters long (it starts {value[:60]!r}).",
                  f"A path is at most {MAX_PATH_CHARS} characters (PATH_MAX); no file system can open a longer one, "
                  "so the value is damaged or not a path.",
                  f"Set {name} to the file's real path (save the recipe again from the app, or edit the JSON).")
    if "\x00" in value:
        raise bad(f"The recipe's {name} {value[:80]!r} holds a NUL character.",
                  "No file path can contain NUL; the value is damaged.",
                  f"Set {name} to the file's real path.")


def check_int(value, name: str, allow_none: bool = False) -> None:
    """Raise unless ``value`` is an int, not a bool (or None, where allowed)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"The recipe's {name} must be an integer{' or null' if allow_none else ''}, got {type(value).__name__} {value!r:.80}.")


def check_choice(value, name: str, choices) -> None:
    """Raise unless ``value`` is one of ``choices``, naming them."""
    if value not in choices:
        raise bad(f"The recipe's {name} is {value!r}, which is not one of {', '.join(map(repr, choices))}.",
                  fix=f"Use one of {', '.join(choices)}.")


def major_version(version: Optional[str]) -> Optional[int]:
    """The major number of a TensorRT version string (``"10.16.1.11"`` -> 10), or None if it is not one."""
    m = re.match(r"^\s*(\d+)(\.\d+)*", version or "")
    return int(m.group(1)) if m else None


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
        check_str(self.pattern, "layer-precision pattern")
        if not self.pattern:
            raise bad("A layer-precision override has an empty pattern.", "It would match no layer (or, as a regex, every layer).",
                      "Give a layer name, or a regex such as 'conv_.*'.")
        check_str(self.precision, f"precision of layer pattern {self.pattern!r}")
        object.__setattr__(self, "precision", self.precision.lower())
        check_choice(self.precision, f"precision of layer pattern {self.pattern!r}", LAYER_PRECISIONS)
        if not isinstance(self.regex, bool):
            raise bad(f"The 'regex' of layer pattern {self.pattern!r} must be true or false, got {self.regex!r}.")
        if self.regex:
            try:
                re.compile(self.pattern)
            except (re.error, RecursionError, OverflowError) as exc:
                raise bad(f"The layer-precision regex {self.pattern[:80]!r} does not compile.",
                          f"Python's re said: {exc}.",
                          "Fix the expression, or set regex to false to match the name literally.") from None
            # A shape that backtracks without bound ((a+)+) would hang the build on a long layer name.
            check_pattern(self.pattern, "layer-precision regex", RecipeError)

    def matches(self, layer_name: str) -> bool:
        """Whether this override applies to ``layer_name`` (a regex is matched in bounded time)."""
        if not self.regex:
            return layer_name == self.pattern
        with match_time_limit(self.pattern, "layer-precision regex", RecipeError):
            return bool(re.search(self.pattern, layer_name))

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
        The toolkit's range method (``"auto"``: each tensor's, the default; ``"entropy"``, ``"max"``, ``"percentile"``,
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
        check_str(self.kind, "calibrator kind")
        check_choice(self.kind, "calibrator kind", CALIBRATOR_KINDS)
        check_str(self.method, "calibrator method", allow_none=True)
        if self.method is not None:
            if self.kind != "toolkit":
                raise bad(f"The calibrator method {self.method!r} is set, but the calibrator kind is {self.kind!r}.",
                          "Range methods belong to the toolkit's calibration; TensorRT's calibrators have their own algorithm.",
                          "Set kind to 'toolkit', or clear the method.")
            check_choice(self.method, "calibrator method", TOOLKIT_METHODS)
        if isinstance(self.percentile, bool) or not isinstance(self.percentile, (int, float)):
            raise bad(f"The calibrator percentile must be a number, got {self.percentile!r}.")
        if not 0.0 < float(self.percentile) <= 100.0:
            raise bad(f"The calibrator percentile is {self.percentile}, outside (0, 100].",
                      fix="Use e.g. 99.99 (keep 99.99 % of |x| values inside the range).")
        object.__setattr__(self, "percentile", float(self.percentile))
        check_str(self.cache_path, "calibration cache path", allow_none=True)
        if not isinstance(self.amax_overrides, Mapping):
            raise bad(f"The calibrator's amax_overrides must map tensor names to numbers, got {type(self.amax_overrides).__name__}.")
        overrides = {}
        for name, amax in self.amax_overrides.items():
            if not isinstance(name, str) or isinstance(amax, bool) or not isinstance(amax, (int, float)) \
                    or not math.isfinite(amax) or amax <= 0:
                raise bad(f"The amax override for tensor {name!r} is {amax!r}.",
                          "An amax is the positive, finite largest |value| the INT8 range covers.",
                          "Give a positive number, or remove the override.")
            overrides[name] = float(amax)
        object.__setattr__(self, "amax_overrides", readonly_mapping(overrides))
        if self.kind == "toolkit" and self.method is None and self.cache_path is None:
            raise bad("The toolkit calibrator has neither a range method nor a calibration cache.",
                      "It hands TensorRT the toolkit's ranges through a cache, computed with a method or read from a file.",
                      "Choose a method (auto, entropy, max, percentile, mse) or give cache_path.")

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
