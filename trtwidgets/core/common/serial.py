"""Typed artifacts to strict JSON and back, read off the dataclass itself: one serialization.

:func:`to_json` writes a dataclass as a dict of its fields in order (nested dataclasses through their own
``to_dict`` where they have one), tuples and lists as lists, mappings with string keys, numpy scalars as
Python numbers, and NaN/infinities as ``"nan"``/``"inf"``/``"-inf"`` (:func:`json_float`: strict JSON, which
the browser and ``json.loads(strict)`` read). :func:`from_json` is the inverse: each field converted to its
annotated type (``int``, ``float``, ``str``, ``bool``, ``Optional``, ``Tuple``, ``List``, ``Dict``/``Mapping``,
a nested dataclass), a missing field taking its default, and a value of the wrong kind a ``ValueError`` that
names the field. A class keeps ``to_dict``/``from_dict`` as its public names and hands them to these two; what
no annotation can say (a renamed key, a derived value written for readers) stays in the class.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import math
import typing
from typing import Any, Dict, Mapping, Type, TypeVar, Union, cast

import numpy as np

__all__ = ["fields_json", "from_json", "json_float", "read_float", "to_json"]

T = TypeVar("T")


def json_float(v: float) -> Union[float, str]:
    """``v`` as strict JSON: finite floats as they are, NaN and infinities as ``"nan"``/``"inf"``/``"-inf"``."""
    if math.isfinite(v):
        return float(v)
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def read_float(v: Any) -> float:
    """The inverse of :func:`json_float` (None, as older files wrote it, is NaN)."""
    return float("nan") if v is None else float(v)


def to_json(obj: Any) -> Any:
    """``obj`` as JSON values (see the module docstring).

    Parameters
    ----------
    obj : dataclass instance, mapping, sequence, number, str, bool or None

    Returns
    -------
    dict, list, float, int, str, bool or None
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return obj.to_dict() if hasattr(obj, "to_dict") else fields_json(obj)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return json_float(float(obj))
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [to_json(v) for v in obj]
    raise TypeError(f"{type(obj).__name__} has no JSON form")


def fields_json(obj: Any) -> Dict[str, Any]:
    """A dataclass instance as ``{field: to_json(value)}`` in field order (what a class's ``to_dict`` hands on).

    Parameters
    ----------
    obj : dataclass instance

    Returns
    -------
    dict
    """
    return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def from_json(cls: Type[T], data: Mapping[str, Any], where: str = "") -> T:
    """A ``cls`` (a dataclass) from what :func:`to_json` wrote: each field by its annotation.

    Parameters
    ----------
    cls : dataclass type
    data : mapping
        The JSON object; keys that are not fields are ignored (a newer file's additions).
    where : str
        Where ``data`` sits in its file, for the error (``"measurements[2]"``).

    Returns
    -------
    cls

    Raises
    ------
    ValueError
        A required field is missing or a value is not of its field's kind.
    """
    name = where or cls.__name__
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: expected an object, got {type(data).__name__}")
    hints = _hints(cast(type, cls))
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{name}: the field {f.name!r} is missing")
            continue
        kwargs[f.name] = _value(hints[f.name], data[f.name], f"{name}.{f.name}")
    return cls(**kwargs)


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> Dict[str, Any]:
    """``cls``'s resolved annotations, read once per class (a plan.json holds hundreds of its records)."""
    return typing.get_type_hints(cls)


def _value(tp: Any, v: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    try:
        if tp is Any:
            return v
        if origin is Union:
            if v is None and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            return _value(inner[0], v, where) if len(inner) == 1 else v
        if tp is float:
            return read_float(v) if not isinstance(v, bool) else _wrong(v, "a number")
        if tp is int:
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() \
                else _wrong(v, "an integer")
        if tp is bool:
            return v if isinstance(v, bool) else _wrong(v, "true or false")
        if tp is str:
            return v if isinstance(v, str) else _wrong(v, "a string")
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return tp.from_dict(v) if hasattr(tp, "from_dict") else from_json(tp, v, where)
        if origin in (tuple, list):
            if not isinstance(v, (list, tuple)):
                return _wrong(v, "a list")
            if origin is tuple and args and args[-1] is not Ellipsis:
                if len(args) != len(v):
                    return _wrong(v, f"a list of {len(args)}")
                return tuple(_value(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(args, v)))
            item = args[0] if args else Any
            out = [_value(item, x, f"{where}[{i}]") for i, x in enumerate(v)]
            return tuple(out) if origin is tuple else out
        if origin in (dict, collections.abc.Mapping):
            if not isinstance(v, Mapping):
                return _wrong(v, "an object")
            kt, vt = args if args else (Any, Any)
            return {_key(kt, k, where): _value(vt, x, f"{where}[{k!r}]") for k, x in v.items()}
    except (TypeError, ValueError) as err:
        if where in str(err):
            raise
        raise ValueError(f"{where}: {err}") from None
    raise TypeError(f"{where}: no JSON reading for the type {tp!r}")


def _key(tp: Any, k: Any, where: str) -> Any:
    """A mapping's key: JSON writes every key as a string, so an int key is read back from its digits."""
    if tp is int:
        try:
            return int(k)
        except ValueError:
            raise ValueError(f"{where}: the key {k!r} is not an integer") from None
    return k


def _wrong(v: Any, kind: str) -> Any:
    raise ValueError(f"expected {kind}, got {v!r:.60}")
