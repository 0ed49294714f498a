"""Fuzz the recipe loader: random text, byte mutations and structural mutations of real recipes
(tests/fixtures/trt86, each saved beside a real TensorRT 8.6 build)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trtwidgets.core.common.errors import RecipeError, UserError
from trtwidgets.core.recipe.recipe import Recipe, load_recipe

from .fuzzing import FIXTURES, fuzz_settings, json_mutated, mutated, only_user_errors

REAL = [json.loads(p.read_text()) for p in sorted((FIXTURES / "trt86").glob("**/recipe.json"))]
# One recipe with every optional part filled in, so that mutations reach them too.
RICH = dict(REAL[0], layer_precisions=[{"pattern": "conv.*", "precision": "fp32", "regex": True}],
            calibration_data={"kind": "image_dir", "path": "/data", "batch_size": 2, "max_samples": 5,
                              "preprocessing": {"input": "x", "resize": [48, 192], "layout": "NCHW",
                                                "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
                              "adapt": {"x": "pad"}, "opt_shapes": {"x": [1, 3, 48, 192]}})
DOCS = REAL + [RICH]
_DIR = Path(tempfile.mkdtemp(prefix="trtwidgets-fuzz-recipe-"))


def _check(result):
    assert isinstance(result, (Recipe, UserError))
    if isinstance(result, Recipe):
        # What loads can be saved and read back as the same recipe.
        assert Recipe.from_json(result.to_json()) == result


def test_the_fixtures_load():
    for doc in DOCS:
        assert isinstance(Recipe.from_dict(doc), Recipe)


@fuzz_settings(600)
@given(st.text(max_size=200))
def test_random_text(text):
    _check(only_user_errors(Recipe.from_json, text))


@pytest.mark.slow
@fuzz_settings(800)
@given(st.sampled_from(range(len(DOCS))).flatmap(lambda i: json_mutated(DOCS[i])).flatmap(
    lambda d: st.one_of(st.just(d), json_mutated(d))))
def test_structural_mutations_of_real_recipes(doc):
    _check(only_user_errors(Recipe.from_json, json.dumps(doc)))


@pytest.mark.slow
@fuzz_settings(500)
@given(st.sampled_from(range(len(DOCS))).flatmap(lambda i: mutated(json.dumps(DOCS[i]).encode())))
def test_byte_mutations_of_a_recipe_file(data):
    path = _DIR / "recipe.json"
    path.write_bytes(data)
    result = only_user_errors(load_recipe, path)
    if isinstance(result, UserError):
        assert isinstance(result, RecipeError)


# ---- issue 32: a value of another JSON type is refused, never coerced ("batch_size": "8" was accepted) ----------

def _leaf_paths(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaf_paths(v, path + (k,))
    elif isinstance(node, list) and node:
        for i, v in enumerate(node):
            yield from _leaf_paths(v, path + (i,))
    else:
        yield path


def _at(node, path):
    for k in path:
        node = node[k]
    return node


def _with(node, path, value):
    import copy

    node = copy.deepcopy(node)
    target = node
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    return node


_LEAVES = [(i, p) for i, doc in enumerate(DOCS) for p in _leaf_paths(doc) if p and p != ("schema_version",)]


def _json_kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _other_type(value):
    """Values of other JSON types that a lenient reader might take for ``value`` ("8" for 8, 1 for True ...)."""
    text = value if isinstance(value, str) else json.dumps(value)
    out = [text, [value], {"v": value}, None, True, 8.5]
    if isinstance(value, str):
        out += [1, 0]
    return [v for v in out if _json_kind(v) != _json_kind(value)]


@fuzz_settings(600)
@given(st.sampled_from(_LEAVES).flatmap(lambda leaf: st.tuples(st.just(leaf), st.sampled_from(
    _other_type(_at(DOCS[leaf[0]], leaf[1]))))))
def test_a_field_of_another_json_type_is_refused_not_coerced(case):
    (i, path), value = case
    doc = _with(DOCS[i], path, value)
    result = only_user_errors(Recipe.from_dict, doc)
    if isinstance(result, UserError):
        return
    # It loaded: only where the field may be null (an optional setting) or takes that type too; never as the old value
    # turned into another type, and what it saves is what it read.
    saved = result.to_dict()
    try:
        kept = _at(saved, path)
    except (KeyError, IndexError, TypeError):
        return  # the field was dropped into a default (e.g. an empty mapping)
    assert _json_kind(kept) == _json_kind(value) or value is None, (path, value, kept)
