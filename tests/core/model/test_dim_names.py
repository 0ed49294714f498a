"""Shared dim_param names: lint's SHARED_DIM_NAME and the copy the build hands TensorRT.

On the H200, TensorRT 8.6 refused the bundled cls model (input x [-1, 3, "?", "?"])
at 1x3x48x192 with ``Error Code 4: Internal Error (?: Input dimensions with this
name are inconsistent.)``: one name, one symbolic dimension, 48 != 192.
"""

from __future__ import annotations

import hashlib

import onnx
from onnx import TensorProto, helper

from trtwidgets import demo
from trtwidgets.core.model.dim_names import shared_dim_names, with_unique_dim_names
from trtwidgets.core.model.lint import TRT_TEXT, lint
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.profiles import Profile, ShapeRange


def _two_input_model(a_dims, b_dims) -> onnx.ModelProto:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, a_dims)
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, b_dims)
    ya = helper.make_tensor_value_info("ya", TensorProto.FLOAT, a_dims)
    yb = helper.make_tensor_value_info("yb", TensorProto.FLOAT, b_dims)
    nodes = [helper.make_node("Relu", ["a"], ["ya"], name="ra"), helper.make_node("Relu", ["b"], ["yb"], name="rb")]
    graph = helper.make_graph(nodes, "two", [a, b], [ya, yb])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _demo_profile():
    return Profile({"x": ShapeRange.fixed(tuple(demo.INPUT_SHAPE))})


def test_the_demo_models_question_marks_are_found_and_renamed():
    model = load_model(demo.MODEL_PATH)
    before = hashlib.sha256(model.proto.SerializeToString()).hexdigest()
    shared = shared_dim_names(model, [_demo_profile()])
    assert [(s.name, s.axes, s.reason) for s in shared] == [("?", (("x", 2), ("x", 3)), "placeholder")]
    copy, renamed = with_unique_dim_names(model, [_demo_profile()])
    assert renamed == shared
    dims = [d.dim_param or d.dim_value for d in copy.graph.input[0].type.tensor_type.shape.dim]
    assert dims[2:] == ["x_dim2", "x_dim3"]
    onnx.checker.check_model(copy)
    # The user's model is untouched.
    assert hashlib.sha256(model.proto.SerializeToString()).hexdigest() == before
    assert [d.dim_param for d in model.proto.graph.input[0].type.tensor_type.shape.dim][2:] == ["?", "?"]


def test_lint_warns_quoting_tensorrt():
    findings = [f for f in lint(demo.MODEL_PATH, flags="fp16", profiles=[_demo_profile()]) if f.code == "SHARED_DIM_NAME"]
    assert len(findings) == 1
    f = findings[0]
    assert f.severity == "warning"
    assert TRT_TEXT["shared_dim_name"].format(name="?") in f.message
    assert "Input dimensions with this name are inconsistent" in f.message
    assert "trtwidgets renames them for the build" in f.fix and "x[2] -> x_dim2" in f.fix
    assert f.nodes == ("x",)


def test_a_real_shared_name_is_kept_unless_the_profile_disagrees():
    model = _two_input_model(["batch", 4], ["batch", 8])
    same = Profile({"a": ShapeRange((1, 4), (2, 4), (4, 4)), "b": ShapeRange((1, 8), (2, 8), (4, 8))})
    assert shared_dim_names(model, [same]) == ()
    assert shared_dim_names(model, None) == ()  # no profile: nothing says the sizes differ
    assert with_unique_dim_names(model, [same]) == (None, ())
    assert "SHARED_DIM_NAME" not in {f.code for f in lint(model, profiles=[same])}
    differ = Profile({"a": ShapeRange((1, 4), (2, 4), (4, 4)), "b": ShapeRange((1, 8), (3, 8), (4, 8))})
    (s,) = shared_dim_names(model, [differ])
    assert s.reason == "different_sizes" and s.axes == (("a", 0), ("b", 0))
    copy, _ = with_unique_dim_names(model, [differ])
    assert [vi.type.tensor_type.shape.dim[0].dim_param for vi in copy.graph.input] == ["a_dim0", "b_dim0"]
    # Outputs no longer say which input axis they follow: their name is cleared, not guessed.
    assert [vi.type.tensor_type.shape.dim[0].HasField("dim_param") for vi in copy.graph.output] == [False, False]
    assert {f.code: f.severity for f in lint(model, profiles=[differ])}["SHARED_DIM_NAME"] == "warning"


def test_a_single_placeholder_axis_and_static_models_are_fine():
    assert shared_dim_names(_two_input_model(["?", 4], [2, 8])) == ()
    assert shared_dim_names(_two_input_model([1, 4], [2, 8])) == ()
    # A new name never collides with a name the model already uses.
    (s,) = shared_dim_names(_two_input_model(["?", "a_dim0"], ["?", 8]))
    assert s.renames[0][2] not in ("a_dim0",) and len({r[2] for r in s.renames}) == 2
