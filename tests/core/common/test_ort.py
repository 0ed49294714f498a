"""core.common.ort: providers, threads, feeds cast to declared types, big models, refusals explained."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from trtwidgets.core.common import ort as tort
from trtwidgets.core.common.errors import ModelLoadError, UserError

pytest.importorskip("onnxruntime")


def _one_op(op: str, in_types, out_type, opset: int = 13, name: str = "the_node", shape=(2,)) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(in_types))]
    graph = helper.make_graph([helper.make_node(op, names, ["y"], name=name)], "g",
                              [helper.make_tensor_value_info(n, t, list(shape)) for n, t in zip(names, in_types)],
                              [helper.make_tensor_value_info("y", out_type, list(shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_a_missing_provider_names_the_available_ones():
    import onnxruntime

    with pytest.raises(UserError) as info:
        tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT),
                          providers=["NoSuchExecutionProvider", "CPUExecutionProvider"])
    err = info.value
    assert "NoSuchExecutionProvider" in err.what and "CPUExecutionProvider" not in err.what
    for name in onnxruntime.get_available_providers():
        assert name in err.why
    assert "onnxruntime-gpu" in err.fix


def test_provider_with_options_is_checked_by_name():
    assert tort.check_providers([("CPUExecutionProvider", {})]) == [("CPUExecutionProvider", {})]
    assert tort.check_providers(None) == ["CPUExecutionProvider"]


def test_threads_default_env_and_override(monkeypatch):
    monkeypatch.setattr(tort, "usable_cpus", lambda: 4)  # the machine is the edge: this test's machine has 4 CPUs
    monkeypatch.setenv(tort.THREADS_ENV, "3")
    assert tort.default_threads() == 3
    sess = tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT))
    opts = sess.session.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (3, 1)
    sess = tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT), threads=1, inter_op_threads=2)
    opts = sess.session.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (1, 2)
    monkeypatch.setenv(tort.THREADS_ENV, "many")
    with pytest.raises(UserError, match="TRTWIDGETS_ORT_THREADS"):
        tort.default_threads()
    monkeypatch.delenv(tort.THREADS_ENV)
    assert tort.default_threads() >= 1
    with pytest.raises(UserError, match="threads=0"):
        tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT), threads=0)


@pytest.mark.parametrize("setting", ["99999", "256", "9" * 5000])
def test_more_threads_than_cpus_are_lowered_to_the_cpus_with_a_note(monkeypatch, setting):
    # Issue 32: TRTWIDGETS_ORT_THREADS=99999 grew to 11.8 GB; 256 ran ten times slower, silently.
    from trtwidgets.core.common.notes import collect_notes

    monkeypatch.setattr(tort, "_THREAD_NOTES", set())
    monkeypatch.setenv(tort.THREADS_ENV, setting)
    cpus = tort.usable_cpus()
    with collect_notes(forward=False) as notes:
        sess = tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT))
        explicit = tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT), threads=cpus + 7)
    assert sess.session.get_session_options().intra_op_num_threads == cpus
    assert explicit.session.get_session_options().intra_op_num_threads == cpus
    assert len(notes) == 2 and all(f"{cpus} CPU(s)" in n for n in notes), notes
    assert tort.THREADS_ENV in notes[0] and len(notes[0]) < 300 and "threads=" in notes[1]


def test_optimization_level_is_set_and_checked():
    import onnxruntime

    sess = tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT), optimization="disable")
    assert sess.session.get_session_options().graph_optimization_level == \
        onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    with pytest.raises(UserError, match="optimization level 'fast'"):
        tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT), optimization="fast")


def test_float32_feeds_run_an_fp16_model():
    sess = tort.open_session(_one_op("Relu", [TensorProto.FLOAT16], TensorProto.FLOAT16))
    (y,) = sess.run(None, {"x0": np.array([-1.5, 2.25], np.float32)})
    assert y.dtype == np.float16 and y.tolist() == [0.0, 2.25]


def test_int32_feeds_run_an_int64_model_and_fractions_do_not():
    sess = tort.open_session(_one_op("Add", [TensorProto.INT64, TensorProto.INT64], TensorProto.INT64))
    (y,) = sess.run(["y"], {"x0": np.array([1, 2], np.int32), "x1": np.array([3.0, 4.0])})
    assert y.dtype == np.int64 and y.tolist() == [4, 6]
    with pytest.raises(UserError) as info:
        sess.run(["y"], {"x0": np.array([1, 2], np.int32), "x1": np.array([0.5, 4.0])})
    assert "'x1' is float64, but the model declares int64" in info.value.what and "fractions" in info.value.why


@pytest.mark.parametrize("value, dtype, why", [
    (np.array([1e5, 1.0], np.float32), np.float16, "exceed float16"),
    (np.array([300, 1], np.int64), np.uint8, "do not fit"),
    (np.array([2, 1], np.int64), np.bool_, "other than 0 and 1"),
    (np.array(["a", "b"]), np.float32, "not a number type"),
])
def test_impossible_casts_are_explained(value, dtype, why):
    declared = {np.float16: "tensor(float16)", np.uint8: "tensor(uint8)", np.bool_: "tensor(bool)",
                np.float32: "tensor(float)"}[dtype]
    with pytest.raises(UserError) as info:
        tort.cast_feeds({"x": value}, {"x": declared})
    assert why in info.value.why and "'x'" in info.value.what


def test_possible_casts_keep_values():
    out = tort.cast_feeds({"a": np.array([1.0, 0.0]), "b": [1, 0], "c": np.arange(3, dtype=np.int8), "d": [1.5]},
                          {"a": "tensor(bool)", "b": "tensor(float16)", "c": "tensor(int64)"})
    assert out["a"].dtype == np.bool_ and out["a"].tolist() == [True, False]
    assert out["b"].dtype == np.float16 and out["c"].dtype == np.int64 and out["c"].tolist() == [0, 1, 2]
    assert out["d"].dtype == np.float64  # not an input of the model: passed on for ORT to judge


def test_not_implemented_names_the_op_and_blames_the_model():
    # ORT's CPU provider has no bfloat16 Erf kernel.
    model = _one_op("Erf", [TensorProto.BFLOAT16], TensorProto.BFLOAT16, name="gelu_erf")
    with pytest.raises(ModelLoadError) as info:
        tort.open_session(model, purpose="compute the FP32 reference")
    err = info.value
    assert "op Erf, node 'gelu_erf'" in err.what and "compute the FP32 reference" in err.what
    assert err.why.startswith("The model is the problem, not the data") and "NOT_IMPLEMENTED" in err.why
    assert "float32" in err.fix


def test_a_type_error_names_the_op_input_and_type():
    model = _one_op("Sin", [TensorProto.INT32], TensorProto.INT32, name="sine")
    with pytest.raises(ModelLoadError) as info:
        tort.open_session(model)
    err = info.value
    assert "op Sin, node 'sine'" in err.what
    assert "tensor(int32)" in err.why and "'x0'" in err.why and "model is the problem" in err.why
    assert "Cast" in err.fix and "lint" in err.fix


def test_an_unknown_op_is_named():
    with pytest.raises(ModelLoadError) as info:
        tort.open_session(_one_op("Frobnicate", [TensorProto.FLOAT], TensorProto.FLOAT, name="f1"))
    assert "op Frobnicate, node 'f1'" in info.value.what and "opset 13" in info.value.why
    assert "custom op" in info.value.fix


def test_a_run_failure_names_the_inputs():
    sess = tort.open_session(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT))
    with pytest.raises(UserError) as info:
        sess.run(None, {"x0": np.zeros(3, np.float32)})
    assert "failed while running" in info.value.what and "x0" in info.value.fix and "dimensions" in info.value.why


def test_a_model_over_2gb_goes_through_a_file(monkeypatch):
    # Protobuf's 2 GB limit, lowered so a small model takes the same path.
    monkeypatch.setattr(tort, "_PROTO_LIMIT", 16)
    w = np.arange(4, dtype=np.float32)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [onnx.numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (y,) = tort.open_session(model).run(None, {"x": np.ones(4, np.float32)})
    assert y.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert model.graph.initializer[0].raw_data  # the caller's model keeps its weights


def test_a_path_loads(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_one_op("Relu", [TensorProto.FLOAT], TensorProto.FLOAT), path)
    (y,) = tort.open_session(path).run(None, {"x0": np.array([-1.0, 1.0], np.float32)})
    assert y.tolist() == [0.0, 1.0]


def _qdq_relu(scale_type: int) -> onnx.ModelProto:
    scale = onnx.numpy_helper.from_array(np.array(0.1, dtype=helper.tensor_dtype_to_np_dtype(scale_type)), "s")
    zero = onnx.numpy_helper.from_array(np.array(0, dtype=np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x0", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
             helper.make_node("Relu", ["dq"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x0", scale_type, [2])],
                              [helper.make_tensor_value_info("y", scale_type, [2])], [scale, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


def test_a_qdq_model_with_fp16_scales_runs_unoptimized():
    import onnxruntime

    disabled = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    fp16 = tort.open_session(_qdq_relu(TensorProto.FLOAT16), optimization="all")
    assert fp16.session.get_session_options().graph_optimization_level == disabled
    (y,) = fp16.run(None, {"x0": np.array([-1.0, 0.52], np.float32)})
    assert y.dtype == np.float16 and np.allclose(y, [0.0, 0.5])
    fp32 = tort.open_session(_qdq_relu(TensorProto.FLOAT), optimization="all")
    assert fp32.session.get_session_options().graph_optimization_level != disabled


def test_one_provider_name_is_a_name():
    assert tort.check_providers("CPUExecutionProvider") == ["CPUExecutionProvider"]


def test_cli_calibrate_with_a_missing_provider_says_which_exist(tmp_path, capsys):
    from trtwidgets import demo
    from trtwidgets.cli import main

    rc = main(["calibrate", str(demo.MODEL_PATH), "--data", "demo", "--providers", "NoSuchExecutionProvider",
               "--cache", str(tmp_path / "c.cache"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "NoSuchExecutionProvider is not available" in err and "CPUExecutionProvider" in err
    assert not (tmp_path / "c.cache").exists()


def test_a_missing_file_is_said_plainly(tmp_path):
    with pytest.raises(ModelLoadError) as info:
        tort.open_session(tmp_path / "nothing.onnx")
    assert "found no model file" in info.value.what and "nothing.onnx" in info.value.why
