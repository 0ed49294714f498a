"""Symbolic dims print readably (issue 15: ``p2o.DynamicDimension.0, 3, ...`` in every table)."""

from __future__ import annotations

import pytest

from trtwidgets.core.model.dim_text import shape_text


@pytest.mark.parametrize("shape, text", [
    (("p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"), "N×3×H×W"),
    (("unk__12", 3, 224, 224), "N×3×224×224"),
    (("?", 3, "?", "?"), "N×3×H×W"),
    (("batch_size", "sequence_length"), "batch_size×sequence_length"),  # human names are kept
    (("N", 3, "height", "width"), "N×3×height×width"),
    ((1, 3, 48, 192), "1×3×48×192"),
    (("dim_0", "dim_1", "dim_2", "dim_3", "dim_4", "dim_5"), "d0×d1×d2×d3×d4×d5"),
    (("a_very_long_dimension_name_here",), "a_very_long_dim…"),
    ((), "scalar"),
])
def test_shape_text(shape, text):
    assert shape_text(shape) == text


def test_the_summary_table_and_profile_messages_use_it(tmp_path):
    from tests.own_models import dynamic_hw_model, save
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.profiles import Profile, ShapeRange, profile_problems
    from trtwidgets.widgets.html import summary_html

    model = load_model(save(dynamic_hw_model(), tmp_path / "m.onnx"))
    html = summary_html(model.summary)
    assert "N×3×H×W" in html and "DynamicDimension" not in html
    bad = Profile({"x": ShapeRange((1, 3, 8, 8), (1, 3, 64, 8), (1, 3, 32, 8))})
    assert profile_problems([bad], model.summary) == [
        "profile 0: input 'x' dimension 2 (H): opt 64 is outside [min, max] = [8, 32]."]
