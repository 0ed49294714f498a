"""Read-only containers for the fields of frozen dataclasses.

``@dataclass(frozen=True)`` stops ``obj.field = x`` but not ``obj.field[k] = x``
when the field is a dict or a list. The recipe's values (profiles, calibrator,
calibration data) hold their mappings as :class:`types.MappingProxyType` over a
private copy, and their sequences as tuples, so a recipe cannot change after it
was validated, hashed or marked as the source of a build.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Hashable, Mapping

__all__ = ["readonly_mapping", "deep_freeze", "thaw", "mapping_hash"]


def readonly_mapping(mapping: Mapping) -> Mapping:
    """A read-only view over a private copy of ``mapping`` (the caller's object is not shared)."""
    return MappingProxyType(dict(mapping))


def deep_freeze(value: Any) -> Any:
    """``value`` with every dict made a read-only mapping and every list a tuple, recursively."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: deep_freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(deep_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`deep_freeze`: plain dicts and lists (for JSON and for editing)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def _hashable(value: Any) -> Hashable:
    if isinstance(value, Mapping):
        return frozenset((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def mapping_hash(*values: Any) -> int:
    """A hash of ``values`` that treats mappings as unordered (equal mappings hash alike)."""
    return hash(tuple(_hashable(v) for v in values))
