"""Symbolic dimension names that TensorRT would take as one dimension.

TensorRT's ONNX parser gives every ``dim_param`` name one symbolic dimension:
all axes with the same name must have the same size. Exporters are careless
with names: the bundled PaddleOCR model declares its input as
``[-1, 3, "?", "?"]``, so height and width are one dimension to TensorRT, and a
profile with H=48, W=192 fails with ``Error Code 4: Internal Error (?: Input
dimensions with this name are inconsistent.)``.

:func:`shared_dim_names` finds such names (lint reports them as
``SHARED_DIM_NAME``) and :func:`with_unique_dim_names` returns a copy of the
model in which each of them is renamed per input and axis, which the build
hands to TensorRT instead of the user's file (that file is never changed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import onnx

from .load import as_model_proto

#: Names that mean "unknown" to the exporter, never "same as the other axis".
PLACEHOLDER_NAMES = ("?", "-1", "unk", "unknown")


@dataclass(frozen=True)
class SharedDimName:
    """A ``dim_param`` name on several input axes that TensorRT would force equal.

    Attributes
    ----------
    name : str
        The ``dim_param`` (e.g. ``"?"``).
    axes : tuple of (input name, axis)
        Every input axis carrying it.
    reason : str
        ``"placeholder"`` (a name like ``"?"`` that means unknown) or
        ``"different_sizes"`` (an optimization profile gives the axes different sizes).
    renames : tuple of (input name, axis, new name)
        The names :func:`with_unique_dim_names` gives those axes.
    """

    name: str
    axes: Tuple[Tuple[str, int], ...]
    reason: str
    renames: Tuple[Tuple[str, int, str], ...]

    def describe(self) -> str:
        where = ", ".join(f"{inp}[{axis}]" for inp, axis in self.axes)
        return f"{self.name!r} on {where}"


def _dims(value_info: onnx.ValueInfoProto):
    t = value_info.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return []
    return list(t.tensor_type.shape.dim)


def _profile_values(profiles: Optional[Sequence[Any]], inp: str, axis: int) -> Optional[Tuple[Tuple[int, ...], ...]]:
    """(min, opt, max) sizes of one input axis in each profile, or None when no profile gives them."""
    if not profiles:
        return None
    out = []
    for profile in profiles:
        shapes = getattr(profile, "shapes", profile)
        if not isinstance(shapes, Mapping) or inp not in shapes:
            return None
        rng = shapes[inp]
        triple = []
        for key in ("min", "opt", "max"):
            shape = getattr(rng, key, None)
            if shape is None and isinstance(rng, Mapping):
                shape = rng.get(key)
            if shape is None and isinstance(rng, (tuple, list)) and len(rng) == 3:
                shape = rng[("min", "opt", "max").index(key)]
            if shape is None or axis >= len(shape):
                return None
            triple.append(int(shape[axis]))
        out.append(tuple(triple))
    return tuple(out)


def _unique(name: str, inp: str, axis: int, taken: set) -> str:
    base = f"{inp}_dim{axis}"
    new, k = base, 1
    while new in taken:
        k += 1
        new = f"{base}_{k}"
    taken.add(new)
    return new


def shared_dim_names(model: Any, profiles: Optional[Sequence[Any]] = None) -> Tuple[SharedDimName, ...]:
    """Input ``dim_param`` names that would make TensorRT tie axes together wrongly.

    A name is reported when it is a placeholder (``"?"``...) on more than one
    input axis, or when an optimization profile gives its axes different sizes.
    A name shared by axes of equal sizes (``"batch"`` on two inputs) is real and kept.

    Parameters
    ----------
    model : onnx.ModelProto or LoadedModel
    profiles : sequence, optional
        Optimization profiles (objects with ``shapes`` or mappings input -> (min, opt, max)).
    """
    graph = as_model_proto(model).graph
    inits = {t.name for t in graph.initializer}
    axes: Dict[str, List[Tuple[str, int]]] = {}
    for vi in graph.input:
        if vi.name in inits:
            continue
        for axis, d in enumerate(_dims(vi)):
            if d.HasField("dim_param") and d.dim_param:
                axes.setdefault(d.dim_param, []).append((vi.name, axis))
    taken = {name for name in axes}
    found = []
    for name, where in axes.items():
        if len(where) < 2:
            continue
        if name.strip().lower() in PLACEHOLDER_NAMES:
            reason = "placeholder"
        else:
            values = [_profile_values(profiles, inp, axis) for inp, axis in where]
            if any(v is None for v in values) or len(set(values)) == 1:
                continue
            reason = "different_sizes"
        renames = tuple((inp, axis, _unique(name, inp, axis, taken)) for inp, axis in where)
        found.append(SharedDimName(name, tuple(where), reason, renames))
    return tuple(found)


def with_unique_dim_names(model: Any, profiles: Optional[Sequence[Any]] = None
                          ) -> Tuple[Optional[onnx.ModelProto], Tuple[SharedDimName, ...]]:
    """A copy of the model with the names of :func:`shared_dim_names` made unique, or None if none are.

    Input axes get ``<input>_dim<axis>``; the same names on outputs and
    ``value_info`` are cleared (left unnamed), since they no longer say which
    input axis they follow and TensorRT infers those shapes itself. The model
    passed in is not modified.
    """
    proto = as_model_proto(model)
    shared = shared_dim_names(proto, profiles)
    if not shared:
        return None, ()
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    new_names = {(inp, axis): new for s in shared for inp, axis, new in s.renames}
    cleared = {s.name for s in shared}
    for vi in copy.graph.input:
        for axis, d in enumerate(_dims(vi)):
            new = new_names.get((vi.name, axis))
            if new is not None:
                d.dim_param = new
    for vi in list(copy.graph.output) + list(copy.graph.value_info):
        for d in _dims(vi):
            if d.HasField("dim_param") and d.dim_param in cleared:
                d.ClearField("dim_param")
    return copy, shared


__all__ = ["PLACEHOLDER_NAMES", "SharedDimName", "shared_dim_names", "with_unique_dim_names"]
