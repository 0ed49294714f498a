"""``share`` of a notebook someone else made (issue 45): nothing of it runs in the reader's browser.

A hostile notebook (:mod:`.hostile_notebooks`: payloads in every place a notebook carries HTML, widget
boxes that hold themselves, a 2,000-deep chain, references that double at each level) is shared from the
command line and the API. The page must hold no active content (read by the judge, not by the sanitizer),
still draw its figure, say what was removed, and exit 0; ``--trust`` keeps the notebook's scripts (the judge
sees them: the check can fail). Notebooks that are not valid are refused with exit 2, what, why and fix. The
notebook is never changed, and nothing but the page is written.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from .hostile_notebooks import STATE, VIEW, active_content, hostile_notebook, hostile_widget_state
from .workspace import fingerprint, run_cli

pytest.importorskip("nbconvert")
pytest.importorskip("plotly")


def _widget_only(model_id: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("box", execution_count=1, outputs=[nbformat.v4.new_output(
        "display_data", data={VIEW: {"model_id": model_id, "version_major": 2, "version_minor": 0},
                              "text/plain": "a box"})])]
    nb.metadata["widgets"] = {STATE: {"version_major": 2, "version_minor": 0, "state": hostile_widget_state()}}
    return nb


def _edited(edit):
    nb = json.loads(nbformat.writes(hostile_notebook(figure=False)))
    edit(nb)
    return json.dumps(nb)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("share_bad_ws")
    nbs = root / "nbs"
    nbs.mkdir()
    nbformat.write(hostile_notebook(), str(nbs / "someone_else.ipynb"))
    nbformat.write(_widget_only("self"), str(nbs / "box_in_itself.ipynb"))
    nbformat.write(_widget_only("chain0"), str(nbs / "chain_2000.ipynb"))
    nbformat.write(_widget_only("tree0"), str(nbs / "doubling.ipynb"))
    nbformat.write(_widget_only("ping"), str(nbs / "cycle.ipynb"))
    for name, edit in {
        "count_is_html": lambda nb: nb["cells"][1].update(execution_count="<script>alert(1)</script>"),
        "output_is_a_number": lambda nb: nb["cells"][1]["outputs"][0]["data"].update({"text/html": 5}),
        "output_type_unknown": lambda nb: nb["cells"][1]["outputs"][0].update(output_type="javascript"),
        "cells_not_a_list": lambda nb: nb.update(cells={"a": 1}),
        "tags_not_text": lambda nb: nb["cells"][1]["metadata"].update(tags=[{"x": "<b>"}]),
    }.items():
        (nbs / f"{name}.ipynb").write_text(_edited(edit), encoding="utf-8")
    return root


#: (id, notebook) refused: exit 2, what/why/fix, nothing written.
REFUSED = [
    ("execution-count-is-html", "count_is_html", "is not a valid Jupyter notebook"),
    ("html-output-is-a-number", "output_is_a_number", "is not a valid Jupyter notebook"),
    ("output-type-unknown", "output_type_unknown", "is not a valid Jupyter notebook"),
    ("cells-not-a-list", "cells_not_a_list", "notebook"),
    ("cell-tags-not-text", "tags_not_text", "is not a valid Jupyter notebook"),
]


@pytest.mark.parametrize("name, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in REFUSED])
def test_a_notebook_that_is_not_valid_is_refused(ws, capsys, name, phrase):
    before = fingerprint(ws / "nbs")
    rc = run_cli(["share", str(ws / "nbs" / f"{name}.ipynb"), "--out", str(ws / "page.html")])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert "Traceback" not in out + err and err.startswith("trtwidgets share: ") and phrase in err, err
    assert "Why:" in err and "Fix:" in err
    assert fingerprint(ws / "nbs") == before and not (ws / "page.html").exists()


def test_someone_elses_notebook_runs_nothing_in_the_page(ws, capsys):
    """Issue 45: the page kept the notebook's <script>s, onerror, application/javascript and javascript: links."""
    before = fingerprint(ws / "nbs")
    page = ws / "out" / "page.html"
    rc = run_cli(["share", str(ws / "nbs" / "someone_else.ipynb"), "--out", str(page)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    text = page.read_text(encoding="utf-8")
    assert active_content(text) == [], active_content(text)[:10]
    assert "removed from the notebook's outputs what would run" in out
    for said in ("<script> element", "onerror handler", "javascript: link or source", "application/javascript output",
                 "<iframe> element", "--trust"):
        assert said in out, (said, out)
    assert 'Plotly.newPlot(\n' in text or "Plotly.newPlot(" in text, "the page's own figure script must stay"
    assert "still drawn" in text and "the end of the chain" not in text  # 2,000 deep: cut at the limit
    assert "Traceback" not in out + err and fingerprint(ws / "nbs") == before
    assert sorted(p.name for p in page.parent.iterdir()) == ["page.html"]


def test_trust_keeps_the_notebooks_scripts(ws, capsys):
    """The judge above sees active content where there is some: with --trust the page holds the payloads."""
    page = ws / "trusted.html"
    assert run_cli(["share", str(ws / "nbs" / "someone_else.ipynb"), "--out", str(page), "--trust"]) == 0
    found = active_content(page.read_text(encoding="utf-8"))
    assert any(f.startswith("<script>") for f in found) and "img onerror" in found, found[:10]
    assert "removed from" not in capsys.readouterr().out


@pytest.mark.parametrize("name, note", [
    ("box_in_itself", "contains itself x1"),
    ("cycle", "contains itself x1"),
    ("chain_2000", "nested too deep x1"),
    ("doubling", "too many views"),
])
def test_widgets_that_hold_themselves_or_nest_without_end_are_drawn_to_a_limit(ws, capsys, name, note):
    """Issue 45: a box holding itself, or a 2,000-deep chain, was a RecursionError traceback (exit 1)."""
    page = ws / f"{name}.html"
    rc = run_cli(["share", str(ws / "nbs" / f"{name}.ipynb"), "--out", str(page)], seconds=240)
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "Traceback" not in out + err and note in out, out
    assert page.stat().st_size < 20_000_000


def test_the_api_says_what_it_removed(ws):
    import trtwidgets as tw

    shared = tw.share(ws / "nbs" / "someone_else.ipynb", ws / "api.html")
    assert shared.removed >= 20 and shared.figures == 1
    assert any("removed from the notebook's outputs" in n for n in shared.notes)
    assert active_content(shared.path.read_text(encoding="utf-8")) == []
    assert tw.share(ws / "nbs" / "someone_else.ipynb", ws / "api_trusted.html", trust=True).removed == 0
