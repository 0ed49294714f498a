"""Fuzz the JSON readers at their depth and size limits (issue 22): recipes, plan.json and engine-inspector JSON.

Nesting is drawn near the limit (a few levels either side) and far over it (200,000 levels, which used to end
in RecursionError), placed at the top or inside a field, with decoy brackets inside strings (which do not
nest). A document at or under the limit must never be refused for its depth; one over it must be a UserError
that says how deep it is; nothing may raise anything else. Sizes are tested just under and just over each
limit (over: sparse files, refused from their size on disk before being read).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.common.json_limits import (INSPECTOR_LIMITS, PLAN_LIMITS, RECIPE_LIMITS, load_json,
                                                nesting_depth)
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.recipe.recipe import Recipe, load_recipe

from .fuzzing import FIXTURES, fuzz_settings, only_user_errors

RECIPE = json.loads(sorted((FIXTURES / "trt86").glob("**/recipe.json"))[0].read_text())
GRAPH = json.loads((FIXTURES / "trt86" / "tiny" / "fp32" / "engine.graph.json").read_text(), strict=False)
PLAN = {"model": "m.onnx", "recommended": 0, "reason": "r", "notes": [],
        "candidates": [{"name": "fp16", "quantized": [], "kept": [{"layer": "conv", "reason": "x"}],
                        "accuracy": {"cosine": 1.0}, "speedup_vs_fp16": 1.0, "meets_target": True}]}
_DIR = Path(tempfile.mkdtemp(prefix="trtwidgets-fuzz-limits-"))
HOLE = "\"__HOLE__\""


@st.composite
def nested(draw, limit: int):
    """``(json text with a nested value, its real depth)``: a value nested near or far over ``limit``."""
    levels = draw(st.one_of(st.integers(max(0, limit - 4), limit + 4), st.sampled_from((1000, 200_000))))
    kinds = draw(st.lists(st.sampled_from(("[", "{")), min_size=1, max_size=3))
    opens, closes = [], []
    for i in range(levels):
        if kinds[i % len(kinds)] == "[":
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k":')
            closes.append("}")
    core = draw(st.sampled_from(("1", '"s"', "null", "[]", "{}", '"]]]][[[[{{"')))
    return "".join(opens) + core + "".join(reversed(closes)), levels + (1 if core in ("[]", "{}") else 0)


@st.composite
def placed(draw, doc: dict, limit: int):
    """``(document text, its depth)``: ``doc`` with a nested value at the top or as one of its fields, and a
    decoy string of brackets deeper than any limit in another field."""
    value, depth = draw(nested(limit))
    doc = dict(doc)
    doc["__decoy__"] = "[" * 5000 + "{" * 5000
    where = draw(st.sampled_from(["top"] + sorted(k for k in doc if k != "__decoy__")))
    if where == "top":
        return value, depth
    doc[where] = "__HOLE__"
    text = json.dumps(doc).replace(HOLE, value, 1)
    return text, depth + 1


def _judge(result, text: str, depth: int, limit: int):
    assert nesting_depth(text) == depth, (nesting_depth(text), depth)
    if depth > limit:
        assert isinstance(result, UserError) and "levels deep" in result.what, result
        assert result.why and result.fix
    elif isinstance(result, UserError):
        assert "levels deep" not in result.what, result.what


@fuzz_settings(150)
@given(placed(RECIPE, RECIPE_LIMITS.max_depth))
def test_recipes_nested_near_and_over_the_limit(case):
    text, depth = case
    _judge(only_user_errors(Recipe.from_json, text), text, depth, RECIPE_LIMITS.max_depth)
    path = _DIR / "recipe.json"
    path.write_text(text)
    _judge(only_user_errors(load_recipe, path), text, depth, RECIPE_LIMITS.max_depth)


@fuzz_settings(150)
@given(placed(PLAN, PLAN_LIMITS.max_depth))
def test_plans_nested_near_and_over_the_limit(case):
    text, depth = case
    path = _DIR / "plan.json"
    path.write_text(text)
    _judge(only_user_errors(Plan.load, path), text, depth, PLAN_LIMITS.max_depth)


@fuzz_settings(150)
@given(placed(GRAPH, INSPECTOR_LIMITS.max_depth))
def test_inspector_json_nested_near_and_over_the_limit(case):
    text, depth = case
    _judge(only_user_errors(parse_inspector_json, text), text, depth, INSPECTOR_LIMITS.max_depth)


@fuzz_settings(100)
@given(st.integers(0, 40), st.sampled_from(("[", "{")))
def test_load_json_agrees_with_json_under_the_limit(levels, kind):
    text = (kind if kind == "[" else '{"a":') * levels + "0" + ("]" if kind == "[" else "}") * levels
    limits = RECIPE_LIMITS
    result = only_user_errors(load_json, text, "t.json", limits)
    if levels <= limits.max_depth:
        assert result == json.loads(text)
    else:
        assert isinstance(result, UserError)


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


@pytest.mark.parametrize("limits, read", [(RECIPE_LIMITS, load_recipe), (PLAN_LIMITS, Plan.load),
                                          (INSPECTOR_LIMITS, parse_inspector_json)], ids=["recipe", "plan", "inspector"])
def test_a_file_one_byte_over_the_size_limit_is_refused_unread(limits, read):
    path = _sparse(_DIR / f"big-{limits.kind.replace(' ', '_')}.json", limits.max_bytes + 1)
    err = only_user_errors(read, path)
    assert isinstance(err, UserError) and "larger than any" in err.what and err.why and err.fix
    os.remove(path)


@pytest.mark.parametrize("limits, read", [(RECIPE_LIMITS, load_recipe), (PLAN_LIMITS, Plan.load)],
                         ids=["recipe", "plan"])
def test_a_file_at_the_size_limit_is_read(limits, read):
    # Whitespace up to the limit around a document that is not the right kind: the error is about the content,
    # not the size.
    path = _DIR / "at-limit.json"
    body = b'{"x": 1}'
    path.write_bytes(body + b" " * (limits.max_bytes - len(body)))
    err = only_user_errors(read, path)
    assert isinstance(err, UserError) and "larger than any" not in err.what
    os.remove(path)


def test_a_100_mb_model_path_is_refused():
    doc = dict(RECIPE, model_path="a" * 5_000)
    err = only_user_errors(Recipe.from_json, json.dumps(doc))
    assert isinstance(err, UserError) and "5,000 characters" in err.what
    doc["model_path"] = "a" * 100_000_000
    err = only_user_errors(Recipe.from_json, json.dumps(doc))
    assert isinstance(err, UserError) and "larger than any recipe" in err.what


def _reference_depth(text: str) -> int:
    """JSON nesting depth by a plain character-by-character state machine (the slow, obvious way)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


@fuzz_settings(400)
@given(st.text(alphabet='[]{}"\\a:,', max_size=200))
def test_nesting_depth_agrees_with_a_plain_state_machine(text):
    assert nesting_depth(text) == _reference_depth(text)
    assert nesting_depth(text.encode()) == _reference_depth(text)


def test_an_unterminated_string_of_escaped_quotes_is_measured_in_linear_time():
    # A pattern that could fail at the end would be retried from every escaped quote: hours for this one.
    import time

    text = '["' + '\\"' * 1_000_000
    t0 = time.perf_counter()
    assert nesting_depth(text) == 1
    err = only_user_errors(Recipe.from_json, text)
    assert isinstance(err, UserError) and time.perf_counter() - t0 < 20
