"""Fuzz the engine-inspector JSON reader: random text, random JSON documents, and mutations of real JSON
written by TensorRT 8.6 (tests/fixtures/trt86/tiny)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.inspector_json import parse_inspector_json

from .fuzzing import FIXTURES, fuzz_settings, json_mutated, json_values, mutated, only_user_errors

REAL_TEXTS = [p.read_text() for p in sorted((FIXTURES / "trt86" / "tiny").glob("*/engine.graph.json"))]
# TensorRT writes raw control characters inside strings (not strict JSON); the reader accepts them too.
REAL_DOCS = [json.loads(t, strict=False) for t in REAL_TEXTS]


def _parse(arg):
    result = only_user_errors(parse_inspector_json, arg)
    assert isinstance(result, InspectorError) or hasattr(result, "layers"), result
    return result


@fuzz_settings(600)
@given(st.text(max_size=200))
def test_random_text(text):
    _parse(text)


@fuzz_settings(300)
@given(st.binary(max_size=200))
def test_random_bytes(data):
    _parse(data)


@fuzz_settings(600)
@given(st.fixed_dictionaries({"Layers": st.lists(json_values, max_size=4)},
                             optional={"Bindings": json_values, "I/O Tensors": json_values}))
@example({"Layers": [{}], "Bindings": True})  # found here: TypeError, 'bool' object is not iterable
@example({"Layers": [{"Name": "a", "Inputs": 2.0}]})  # found beside it: TypeError from the layer's tensors
@example({"Layers": [{"Name": "a", "Outputs": True}], "I/O Tensors": {}})
def test_random_documents_with_a_layers_list(doc):
    _parse(json.dumps(doc))


@pytest.mark.slow
@fuzz_settings(800)
@given(st.sampled_from(range(len(REAL_DOCS))).flatmap(lambda i: json_mutated(REAL_DOCS[i])))
def test_structural_mutations_of_real_json(doc):
    _parse(json.dumps(doc))


@pytest.mark.slow
@fuzz_settings(600)
@given(st.sampled_from(range(len(REAL_TEXTS))).flatmap(lambda i: mutated(REAL_TEXTS[i].encode())))
def test_byte_mutations_of_real_json(data):
    _parse(data)
