"""The recorded API surfaces (notebook 12 reads them) are what the real 10.16 and 11.4 bindings offer."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, require_or_skip

from . import stubs

RECORD = FIXTURES / "trtapi" / "api_surfaces.json"


def _record() -> dict:
    return json.loads(RECORD.read_text())


@pytest.mark.parametrize("key", sorted(stubs.WHEELS))
def test_the_record_is_what_the_bindings_offer(key):
    from scripts.record_trt_api import surface

    try:
        live = surface(key)
    except Exception as exc:
        require_or_skip("TRTWIDGETS_REQUIRE_TRT_BINDINGS", f"bindings {key} could not be prepared: {exc}")
    assert _record()["releases"][key] == json.loads(json.dumps(live)), (
        "tests/fixtures/trtapi/api_surfaces.json is stale: run python scripts/record_trt_api.py")


def test_the_record_says_what_notebook_12_teaches():
    """11 has no precision flags and no weak typing; 10 has both beside STRONGLY_TYPED."""
    rel = _record()["releases"]
    ten, eleven = rel["10"], rel["11"]
    assert {"FP16", "INT8", "OBEY_PRECISION_CONSTRAINTS"} <= set(ten["enums"]["BuilderFlag"])
    assert not {"FP16", "INT8", "BF16", "FP8", "OBEY_PRECISION_CONSTRAINTS"} & set(eleven["enums"]["BuilderFlag"])
    assert "STRONGLY_TYPED" in ten["enums"]["NetworkDefinitionCreationFlag"]
    assert "STRONGLY_TYPED" in eleven["enums"]["NetworkDefinitionCreationFlag"]
    assert eleven["features"]["strongly_typed_only"] and not ten["features"]["strongly_typed_only"]
    assert {"CHW32", "HWC8", "LINEAR"} <= set(ten["enums"]["TensorFormat"]) & set(eleven["enums"]["TensorFormat"])
