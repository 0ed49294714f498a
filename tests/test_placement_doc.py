"""docs/placement.md's evidence table is the committed GPU fixture's, not typed by hand."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import load_file_module

ROOT = Path(__file__).resolve().parents[1]


def _script():
    module = load_file_module(ROOT / "scripts" / "placement_evidence.py", "placement_evidence")
    return module


def test_the_evidence_table_is_generated_from_the_fixture():
    script = _script()
    blocks = json.loads(script.FIXTURE.read_text())
    doc = script.DOC.read_text()
    assert script.render(doc, blocks) == doc, "run: python3 scripts/placement_evidence.py --write"
    for key in blocks:
        assert f"| {key} |" in doc


def test_every_rule_of_the_placement_module_is_named_in_the_doc():
    from trtwidgets.core.qdq import placement

    doc = (ROOT / "docs" / "placement.md").read_text()
    numbers = [line.split(".", 1)[0].strip() for line in placement.__doc__.splitlines()
               if line.strip()[:3].rstrip(".").isdigit() and ". **" in line]
    assert numbers, "the placement docstring lists its rules as '1. **...**'"
    for n in numbers:
        assert f"\n| {n} |" in doc, f"rule {n} is not in docs/placement.md"
