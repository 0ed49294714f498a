"""Shared pieces of the parser fuzz tests (issue 16): settings, mutations of real fixtures, the one assertion.

Every parser must either return a value or raise the project's own :class:`UserError` family with a
what/why/fix; any other exception (KeyError, IndexError, ValueError, RecursionError, MemoryError ...) is a
bug that Hypothesis shrinks to a minimal input.  Each minimal crashing input found is kept as an explicit
``@example`` on the test that found it.

The runs are deterministic (``derandomize``) so CI does not flicker; set ``TRTWIDGETS_FUZZ_EXPLORE=1`` to let
Hypothesis draw fresh cases (and ``TRTWIDGETS_FUZZ_SCALE=10`` for ten times as many).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from trtwidgets.core.common.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_SCALE = float(os.environ.get("TRTWIDGETS_FUZZ_SCALE", "1"))


#: Cases asked for by every fuzz test defined so far (tests/fuzz/test_fuzz_budget.py checks the total).
REQUESTED = []


def fuzz_settings(examples: int) -> settings:
    """``examples`` cases, no deadline (2 shared cores), no example database in the repository."""
    REQUESTED.append(examples)
    return settings(max_examples=max(1, int(examples * _SCALE)), deadline=None, database=None,
                    derandomize=not os.environ.get("TRTWIDGETS_FUZZ_EXPLORE"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def only_user_errors(fn, *args, **kwargs):
    """``fn(*args)``; a :class:`UserError` is returned (after checking it explains itself), anything else raises."""
    try:
        return fn(*args, **kwargs)
    except UserError as err:
        assert isinstance(err.what, str) and err.what.strip(), f"a UserError without a 'what': {err!r}"
        assert "Traceback" not in err.message
        return err


@st.composite
def mutated(draw, original: bytes, max_edits: int = 4) -> bytes:
    """``original`` with a few random edits: flip, insert, delete, duplicate, truncate."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, max_edits))):
        op = draw(st.sampled_from(("flip", "insert", "delete", "duplicate", "truncate", "splice")))
        n = len(data)
        at = draw(st.integers(0, max(n - 1, 0)))
        if op == "flip" and n:
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and n:
            del data[at:at + draw(st.integers(1, 64))]
        elif op == "duplicate" and n:
            data[at:at] = data[at:at + draw(st.integers(1, 64))]
        elif op == "truncate":
            del data[at:]
        elif op == "splice":
            data[at:at] = draw(st.sampled_from((b"\n", b":", b"{", b"}", b"[", b"]", b'"', b",", b"-", b"0",
                                                b"1e999", b"NaN", b"null", b"\x00", b"\xff", b"x" * 40)))
    return bytes(data)


@st.composite
def mutated_text(draw, original: str, max_edits: int = 4) -> str:
    """``original`` with a few random text edits (kept valid UTF-8, so a text parser gets past decoding)."""
    return draw(mutated(original.encode("utf-8"), max_edits)).decode("utf-8", errors="replace")


#: JSON values of any shape (for structural mutations: a field replaced by something else entirely).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


@st.composite
def json_mutated(draw, doc):
    """A deep copy of the JSON value ``doc`` with one node (an object member or list item) replaced, removed
    or given a sibling."""
    import copy

    doc = copy.deepcopy(doc)
    # Collect (container, key) pairs so that one can be picked uniformly.
    slots = []

    def walk(node):
        if isinstance(node, dict):
            for k in list(node):
                slots.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                slots.append((node, i))
                walk(node[i])

    walk(doc)
    if not slots:
        return draw(json_values)
    container, key = draw(st.sampled_from(slots))
    op = draw(st.sampled_from(("replace", "remove", "add")))
    if op == "replace":
        container[key] = draw(json_values)
    elif op == "remove":
        del container[key]
    elif isinstance(container, dict):
        container[draw(st.text(max_size=8))] = draw(json_values)
    else:
        container.insert(key, draw(json_values))
    return doc
