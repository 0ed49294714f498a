from __future__ import annotations

from html.parser import HTMLParser


from tests.core.models import EVIL, evil_names_model, qdq_conv_model, save
from trtwidgets.core.common.errors import ModelLoadError, UserError
from trtwidgets.core.model.lint import Finding
from trtwidgets.widgets import ModelLoader, Session
from trtwidgets.widgets.html import error_html, findings_html, html_table


class _Collect(HTMLParser):
    """Element tags and text of an HTML fragment, as a browser would parse them."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.text = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    @property
    def all_text(self):
        return "".join(self.text)


def _assert_inert(fragment: str, *names: str):
    parsed = _Collect(fragment)
    tags = {t for t, _ in parsed.tags}
    assert "img" not in tags and "script" not in tags
    assert not any(k.startswith("on") for _, attrs in parsed.tags for k in attrs)
    for name in names:
        assert name in parsed.all_text  # shown as text, exactly


def test_loader_renders_real_model(cls_model_path):
    w = ModelLoader(path=str(cls_model_path))
    assert w.summary.value == "" and w.error.value == ""
    assert w.load() is True
    s = w.session.model.summary
    text = _Collect(w.summary.value).all_text
    assert "float32" in text and "dim 0" in text and f"{s.param_count:,}" in text
    assert "Conv" in text and str(s.op_counts["Conv"]) in text
    parsed = _Collect(w.findings.value)
    assert [a.get("data-code") for t, a in parsed.tags if a.get("data-code")] == [f.code for f in w.session.findings]
    assert "DYNAMIC_INPUT_NEEDS_PROFILE" in parsed.all_text
    assert "trtw-warning" in w.findings.value
    assert w.error.value == ""
    assert w.load_button.disabled is False and w.load_button.description == "Load"


def test_evil_names_render_as_text(tmp_path):
    path = save(evil_names_model(), tmp_path / "evil.onnx")
    w = ModelLoader(path=str(path))
    assert w.load()
    assert EVIL not in w.summary.value  # never raw
    _assert_inert(w.summary.value, EVIL, "out<b>bold</b>", "<script>")
    # A finding that names the evil input (dynamic dim) must be inert too.
    assert any(EVIL in f.nodes for f in w.session.findings)
    _assert_inert(w.findings.value, EVIL)


def test_bad_path_shows_error_and_keeps_model(tmp_path, cls_model_path):
    w = ModelLoader()
    assert w.load(str(cls_model_path))
    before = w.session.model
    (tmp_path / "junk.onnx").write_bytes(b"\x01\x02garbage" * 10)
    for bad in (tmp_path / "missing.onnx", tmp_path, tmp_path / "junk.onnx"):
        assert w.load(str(bad)) is False
        assert w.session.model is before
        assert "Fix:" in w.session.error and "Traceback" not in w.error.value
        assert "trtw-error" in w.error.value
        assert w.summary.value  # the previous model is still shown
    assert w.load(str(cls_model_path)) and w.error.value == ""


def test_error_panel_escapes_path(tmp_path):
    w = ModelLoader()
    w.load(str(tmp_path / f"{EVIL}.onnx"))
    _assert_inert(w.error.value, EVIL)


def test_session_lints_against_recipe(tmp_path, cls_model_path):
    from trtwidgets.core.recipe.recipe import Recipe

    session = Session()
    path = save(qdq_conv_model(), tmp_path / "q.onnx")
    assert session.load(path)
    assert "QDQ_REQUIRES_INT8" not in {f.code for f in session.findings}
    session.recipe = Recipe.for_model(session.model).replace(flags=("fp16",), trt_version="8.6")
    session.relint()
    assert "QDQ_REQUIRES_INT8" in {f.code for f in session.findings}
    # The real model with the recipe's default profiles: the profile finding is gone.
    assert session.load(cls_model_path)
    session.recipe = Recipe.for_model(session.model)
    session.relint()
    assert "DYNAMIC_INPUT_NEEDS_PROFILE" not in {f.code for f in session.findings}


def test_session_keeps_model_when_recipe_settings_are_bad(cls_model_path):
    from trtwidgets.core.recipe.recipe import Recipe

    odd = Recipe(model_path=str(cls_model_path), model_sha256="")
    object.__setattr__(odd, "flags", ("fp17",))  # a flag TensorRT does not have, past the recipe's own check
    session = Session()
    session.recipe = odd
    assert session.load(cls_model_path)
    assert session.model is not None and session.findings == ()
    assert "Unknown precision flag" in session.error


def test_session_notifies_once_per_load(cls_model_path):
    session = Session()
    seen = []
    session.observe(lambda c: seen.append(c["name"]), names=["model", "findings", "error"])
    session.load(cls_model_path)
    assert seen.count("model") == 1 and seen.count("findings") == 1


def test_html_table_escapes_headers_and_mapping_rows():
    out = html_table([{"a": EVIL, "b": 1}], ["a", "<th>"])
    _assert_inert(out, EVIL, "<th>")
    assert out.count("<tr>") == 2


def test_findings_and_error_html():
    f = Finding("NONZERO_ZERO_POINT", "error", f"bad {EVIL}", "why", "fix", (EVIL,))
    _assert_inert(findings_html([f]), EVIL)
    assert "No findings" in findings_html(())
    assert error_html("") == "" and error_html(None) == ""
    err = ModelLoadError(f"what {EVIL}", "why it broke", "do this")
    out = error_html(err)
    _assert_inert(out, EVIL, "why it broke", "do this")
    assert isinstance(err, UserError)


def test_long_dimension_names_are_shown_whole():
    # A saliency model's output dims named "Sigmoidoutput_image_height": cut to 16 characters, two dims read the same.
    from onnx import TensorProto, helper

    from trtwidgets.core.model.load import summarize
    from trtwidgets.widgets.html import summary_html

    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"], name="sig")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, "image_height", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             ["N", 1, "Sigmoidoutput_image_height",
                                                              "Sigmoidoutput_image_width"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    text = summary_html(summarize(model))
    assert "Sigmoidoutput_image_height" in text and "Sigmoidoutput_image_width" in text and "…" not in text
