"""Optimization profiles: min/opt/max shapes for every dynamic input.

TensorRT builds one engine for a range of input shapes per *optimization
profile*; it tunes kernels for ``opt`` and accepts anything between ``min`` and
``max``. INT8 calibration (TensorRT's calibrators and the toolkit's) runs at the
calibration profile's ``opt`` shapes, so ``opt`` should look like real data.

:func:`default_profiles` pre-fills a profile from the model and the shapes of
the calibration data; :func:`profile_problems` lists every way a profile does
not fit a model, naming the input and the dimension.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..common.errors import RecipeError
from ..common.frozen import mapping_hash, readonly_mapping
from ..model.dim_text import dim_text, shape_text

Shape = Tuple[int, ...]


def _as_shape(value, what: str) -> Shape:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise RecipeError(f"{what} must be a list of integers, got {value!r}.",
                          "A shape is one positive integer per dimension.",
                          "Write it like [1, 3, 48, 192].")
    dims = []
    for d in value:
        # bool is an int subclass; True as a dimension is certainly a mistake.
        if isinstance(d, bool) or not isinstance(d, int) and not (hasattr(d, "__index__") and not isinstance(d, float)):
            raise RecipeError(f"{what} has a dimension {d!r} that is not an integer.",
                              "Shapes in a profile are concrete: every dimension is a positive integer.",
                              "Replace it with a number, e.g. 1 for a batch dimension.")
        dims.append(int(d))
    return tuple(dims)


@dataclass(frozen=True)
class ShapeRange:
    """The shapes one input accepts in one profile.

    Attributes
    ----------
    min, opt, max : tuple of int
        Same rank; ``min <= opt <= max`` per dimension (checked by
        :func:`profile_problems`, not here, so that an editor can hold a
        half-typed range and say what is wrong with it).
    """

    min: Shape
    opt: Shape
    max: Shape

    def __post_init__(self) -> None:
        for key in ("min", "opt", "max"):
            object.__setattr__(self, key, _as_shape(getattr(self, key), f"The {key} shape"))

    @classmethod
    def fixed(cls, shape: Sequence[int]) -> "ShapeRange":
        """A range that accepts exactly ``shape``."""
        return cls(tuple(shape), tuple(shape), tuple(shape))

    def to_dict(self) -> dict:
        return {"min": list(self.min), "opt": list(self.opt), "max": list(self.max)}

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "shape range") -> "ShapeRange":
        if not isinstance(d, Mapping):
            raise RecipeError(f"The {where} must be an object with min, opt and max, got {type(d).__name__}.",
                              fix='Write it like {"min": [1, 3, 48, 192], "opt": [...], "max": [...]}.')
        keys = set(d)
        if keys != {"min", "opt", "max"}:
            missing = sorted({"min", "opt", "max"} - keys)
            unknown = sorted(keys - {"min", "opt", "max"})
            raise RecipeError(f"The {where} has " + "; ".join(
                p for p in (f"missing keys {missing}" if missing else "", f"unknown keys {unknown}" if unknown else "") if p) + ".",
                "A shape range has exactly the keys min, opt and max.", "Fix the keys of this range.")
        return cls(_as_shape(d["min"], f"{where} min"), _as_shape(d["opt"], f"{where} opt"),
                   _as_shape(d["max"], f"{where} max"))


@dataclass(frozen=True)
class Profile:
    """One optimization profile: input name -> :class:`ShapeRange`.

    Only dynamic inputs need an entry; a static input may be listed with its
    own shape as min = opt = max.
    """

    shapes: Mapping[str, ShapeRange]

    def __post_init__(self):
        shapes = {}
        for name, rng in dict(self.shapes).items():
            if isinstance(rng, Mapping):
                rng = ShapeRange.from_dict(rng, f"range of input {name!r}")
            elif not isinstance(rng, ShapeRange):
                raise RecipeError(f"The profile entry for input {name!r} is a {type(rng).__name__}, not a shape range.",
                                  fix="Give a ShapeRange(min, opt, max).")
            shapes[str(name)] = rng
        # A read-only view of a private copy: neither the caller's dict nor ``p.shapes[k] = ...`` can
        # change a profile that a recipe has validated or hashed.
        object.__setattr__(self, "shapes", readonly_mapping(shapes))

    def __hash__(self) -> int:
        return mapping_hash(self.shapes)

    def __reduce__(self):
        # mappingproxy cannot be pickled or deep-copied; rebuild from a plain dict instead.
        return (type(self), (dict(self.shapes),))

    def opt_shapes(self) -> Dict[str, Shape]:
        """Input name -> opt shape (the shapes calibration runs at)."""
        return {name: rng.opt for name, rng in self.shapes.items()}

    def to_dict(self) -> dict:
        return {"shapes": {name: rng.to_dict() for name, rng in self.shapes.items()}}

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "profile") -> "Profile":
        if not isinstance(d, Mapping) or set(d) != {"shapes"} or not isinstance(d["shapes"], Mapping):
            raise RecipeError(f"The {where} must be an object {{\"shapes\": {{input: {{min, opt, max}}}}}}.",
                              f"Got {d!r:.200}.", "Fix the profile in the recipe file.")
        return cls({name: ShapeRange.from_dict(rng, f"{where}, input {name!r}") for name, rng in d["shapes"].items()})


def _fmt(shape: Sequence) -> str:
    return "x".join(str(d) for d in shape)


def format_shape(shape: Sequence) -> str:
    """``(1, 3, 48, 192)`` -> ``"1x3x48x192"`` (the text the profile editor shows)."""
    return _fmt(shape)


def parse_shape(text: str, what: str = "shape") -> Shape:
    """Read a shape typed as ``1x3x48x192``, ``1, 3, 48, 192`` or ``[1, 3, 48, 192]``.

    Raises
    ------
    RecipeError
        Naming ``what`` (e.g. ``"input 'x' opt"``) and the part that is not a positive integer.
    """
    body = str(text).strip().strip("[]()").strip()
    parts = [p for p in re.split(r"\s*[x×,\s]\s*", body) if p != ""]
    if not parts:
        raise RecipeError(f"The {what} is empty.", fix="Type the shape like 1x3x48x192.")
    dims = []
    for i, part in enumerate(parts):
        if not part.isdigit() or int(part) < 1:
            raise RecipeError(f"The {what} {text!r}: dimension {i} is {part!r}, not a positive integer.",
                              "Profile shapes are concrete; every dimension is a whole number of at least 1.",
                              "Type the shape like 1x3x48x192.")
        dims.append(int(part))
    return tuple(dims)


def range_problems(name: str, rng: ShapeRange, model_shape: Sequence, where: str = "") -> List[str]:
    """Every way ``rng`` does not fit an input of ``model_shape``, one message each.

    Parameters
    ----------
    name : str
        The input's name (named in every message).
    rng : ShapeRange
    model_shape : sequence of (int or str)
        The model's declared shape: ints are static, strings dynamic.
    where : str
        Prefix such as ``"profile 0: "``.
    """
    problems = []
    rank = len(model_shape)
    for key in ("min", "opt", "max"):
        shape = getattr(rng, key)
        if len(shape) != rank:
            problems.append(f"{where}input {name!r}: {key} shape {_fmt(shape)} has rank {len(shape)}, "
                            f"but the model's input has rank {rank} ({shape_text(model_shape)}).")
    if problems:
        return problems
    for i, declared in enumerate(model_shape):
        lo, opt, hi = rng.min[i], rng.opt[i], rng.max[i]
        label = f"{where}input {name!r} dimension {i}" + (
            f" ({dim_text(declared, i, rank)})" if isinstance(declared, str) else "")
        for key, v in (("min", lo), ("opt", opt), ("max", hi)):
            if v < 1:
                problems.append(f"{label}: {key} is {v}; dimensions must be at least 1.")
        if isinstance(declared, int):
            wrong = [f"{key}={v}" for key, v in (("min", lo), ("opt", opt), ("max", hi)) if v != declared]
            if wrong:
                problems.append(f"{label} is static ({declared}) in the model, but the profile has {', '.join(wrong)}.")
            continue
        if lo > hi:
            problems.append(f"{label}: min {lo} is greater than max {hi}.")
        if not lo <= opt <= hi:
            problems.append(f"{label}: opt {opt} is outside [min, max] = [{lo}, {hi}].")
    return problems


def profile_problems(profiles: Sequence[Profile], summary) -> List[str]:
    """Every way ``profiles`` do not fit the model of ``summary`` (a ModelSummary).

    Checks that each profile covers every dynamic input, names no unknown
    input, and that each range fits (see :func:`range_problems`).
    """
    inputs = {t.name: t for t in summary.inputs}
    dynamic = [t.name for t in summary.inputs if t.is_dynamic]
    problems = []
    if dynamic and not profiles:
        problems.append(f"the model has dynamic inputs ({', '.join(repr(n) for n in dynamic)}) but the recipe has no "
                        "optimization profile.")
    for k, profile in enumerate(profiles):
        where = f"profile {k}: "
        for name in dynamic:
            if name not in profile.shapes:
                shape = inputs[name].shape
                dims = ", ".join(f"{i} ({dim_text(d, i, len(shape))})" for i, d in inputs[name].dynamic_dims.items())
                problems.append(f"{where}dynamic input {name!r} has no shape range (dynamic dimensions {dims}).")
        for name, rng in profile.shapes.items():
            if name not in inputs:
                known = ", ".join(repr(n) for n in inputs) or "none"
                problems.append(f"{where}input {name!r} is not an input of the model (its inputs: {known}).")
                continue
            problems.extend(range_problems(name, rng, inputs[name].shape, where))
    return problems


def _observed(data_shapes: Optional[Mapping[str, Any]]) -> Dict[str, List[Shape]]:
    """Normalise ``{name: shape}`` or ``{name: [shape, ...]}`` to ``{name: [shape, ...]}``."""
    out: Dict[str, List[Shape]] = {}
    for name, value in (data_shapes or {}).items():
        value = list(value)
        if value and all(isinstance(v, int) or hasattr(v, "__index__") for v in value):
            out[name] = [tuple(int(v) for v in value)]
        else:
            out[name] = [tuple(int(v) for v in s) for s in value]
    return out


def demo_shapes(summary) -> Dict[str, List[Shape]]:
    """Input name -> the demo's sample shape when ``summary`` is the bundled demo model, else empty."""
    from ... import demo

    try:
        is_demo = bool(summary.path) and Path(summary.path).resolve() == demo.MODEL_PATH.resolve()
    except OSError:
        is_demo = False
    return {demo.INPUT_NAME: [tuple(demo.INPUT_SHAPE)]} if is_demo else {}


def default_profiles(summary, data_shapes: Optional[Mapping[str, object]] = None,
                     max_batch: Optional[int] = None, fallback_dim: int = 1) -> Tuple[Profile, ...]:
    """One profile pre-filled for every dynamic input of a model.

    Parameters
    ----------
    summary : ModelSummary
    data_shapes : mapping, optional
        Input name -> the shape of a calibration sample, or a list of such
        shapes (e.g. every feed seen). ``opt`` is the most frequent shape,
        ``min``/``max`` the smallest/largest seen per dimension.
    max_batch : int, optional
        Upper bound for a dynamic first (batch) dimension; its ``min`` is 1 so
        that single samples run. Without it, ``max`` is the largest batch seen.
    fallback_dim : int
        Value for a dynamic dimension (other than the batch) that no data tells about.

    Returns
    -------
    tuple of Profile
        Empty when the model has no dynamic input (TensorRT needs no profile).

    Notes
    -----
    For the bundled demo model without data, the demo's own shape 1x3x48x192 is used.
    """
    dynamic = summary.dynamic_inputs
    if not dynamic:
        return ()
    observed = _observed(data_shapes) or demo_shapes(summary)
    shapes = {}
    for t in dynamic:
        seen = [s for s in observed.get(t.name, []) if len(s) == len(t.shape)]
        opt_seen = Counter(seen).most_common(1)[0][0] if seen else None
        lo, opt, hi = [], [], []
        for i, declared in enumerate(t.shape):
            if isinstance(declared, int):
                lo.append(declared)
                opt.append(declared)
                hi.append(declared)
                continue
            values = [s[i] for s in seen]
            o = opt_seen[i] if opt_seen else (1 if i == 0 else fallback_dim)
            a, b = (min(values), max(values)) if values else (o, o)
            if i == 0:
                # The batch dimension: accept single samples and the largest batch asked for.
                a = 1
                b = max(b, max_batch or 0, o)
            lo.append(a)
            opt.append(o)
            hi.append(b)
        shapes[t.name] = ShapeRange(tuple(lo), tuple(opt), tuple(hi))
    return (Profile(shapes),)
