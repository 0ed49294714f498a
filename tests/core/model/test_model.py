from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core.models import EVIL, conv_model, evil_names_model, qdq_conv_model, save
from trtwidgets.core.common.errors import ModelLoadError
from trtwidgets.core.model.load import PROTOBUF_LIMIT, load_model


def test_real_cls_model(cls_model_path):
    loaded = load_model(cls_model_path)
    s = loaded.summary
    assert s.path == str(cls_model_path.resolve())
    assert len(s.sha256) == 64
    assert s.opset >= 7 and s.ir_version >= 3
    assert [t.name for t in s.inputs] == ["x"]
    x = s.inputs[0]
    assert x.dtype == "float32" and len(x.shape) == 4 and x.shape[1] == 3
    assert set(x.dynamic_dims) == {0, 2, 3}
    assert s.dynamic_inputs == (x,)
    assert len(s.outputs) == 1
    assert s.op_counts["Conv"] > 10
    assert s.node_count == sum(s.op_counts.values()) == len(loaded.proto.graph.node)
    # Computed independently: every initializer and Constant value, as numpy arrays.
    arrays = [numpy_helper.to_array(t) for t in loaded.proto.graph.initializer]
    arrays += [numpy_helper.to_array(a.t) for n in loaded.proto.graph.node if n.op_type == "Constant"
               for a in n.attribute if a.name == "value"]
    assert s.param_count == sum(a.size for a in arrays)
    assert s.param_bytes == sum(a.nbytes for a in arrays)
    assert 0.3e6 < s.param_bytes <= os.path.getsize(cls_model_path)
    assert s.qdq.count == 0
    assert s.initializer_dtypes.get("float32", 0) > 0
    d = s.to_dict()
    assert d["inputs"][0]["dynamic_dims"] == {"0": x.shape[0], "2": x.shape[2], "3": x.shape[3]}


def test_qdq_summary_counts_and_types():
    s = load_or_summarize(qdq_conv_model(per_channel=True))
    assert (s.qdq.quantize, s.qdq.dequantize) == (1, 2)
    assert s.qdq.per_channel == 1 and s.qdq.per_tensor == 2
    assert s.qdq.dtypes == {"int8": 3}
    assert s.qdq.dynamic_scale == ()
    s = load_or_summarize(qdq_conv_model(dynamic_scale=True))
    assert s.qdq.dynamic_scale == ("x_quant",)
    s = load_or_summarize(qdq_conv_model(qtype=TensorProto.UINT8))
    assert s.qdq.dtypes == {"uint8": 3}


def load_or_summarize(model):
    from trtwidgets.core.model.load import summarize

    return summarize(model)


def test_dynamic_dims_named(tmp_path):
    s = load_model(save(conv_model(batch="batch"), tmp_path / "m.onnx")).summary
    assert s.inputs[0].dynamic_dims == {0: "batch"}
    s = load_model(save(conv_model(batch=2), tmp_path / "s.onnx")).summary
    assert s.dynamic_inputs == ()


def test_external_data_loads_and_hashes_data(tmp_path):
    path = save(conv_model(), tmp_path / "ext.onnx", external=True)
    assert (tmp_path / "ext.onnx.data").is_file()
    a = load_model(path)
    assert a.summary.external_data
    assert a.summary.param_count == 4 * 3 * 3 * 3 + 4
    (tmp_path / "ext.onnx.data").write_bytes((tmp_path / "ext.onnx.data").read_bytes()[::-1])
    assert load_model(path).summary.sha256 != a.summary.sha256


def test_evil_names_survive_summary(tmp_path):
    s = load_model(save(evil_names_model(), tmp_path / "evil.onnx")).summary
    assert s.inputs[0].name == EVIL
    assert s.inputs[0].dynamic_dims == {0: "<script>"}


# --- every bad input the issue names: a ModelLoadError with what, why and fix -----------------

def _assert_clear(info, *words):
    err = info.value
    assert err.why and err.fix
    for w in words:
        assert w in err.message


def test_missing_path(tmp_path):
    with pytest.raises(ModelLoadError) as info:
        load_model(tmp_path / "nope.onnx")
    _assert_clear(info, "No model at", "nope.onnx")


def test_directory(tmp_path):
    save(conv_model(), tmp_path / "inside.onnx")
    with pytest.raises(ModelLoadError) as info:
        load_model(tmp_path)
    _assert_clear(info, "is a directory", "inside.onnx")


def test_random_bytes(tmp_path):
    p = tmp_path / "random.onnx"
    p.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError) as info:
        load_model(p)
    _assert_clear(info, "random.onnx")


def test_text_file(tmp_path):
    p = tmp_path / "notes.onnx"
    p.write_text("this is not a model\n" * 10)
    with pytest.raises(ModelLoadError):
        load_model(p)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(ModelLoadError) as info:
        load_model(p)
    _assert_clear(info, "empty")


def test_truncated_real_model(tmp_path, cls_model_path):
    data = cls_model_path.read_bytes()
    p = tmp_path / "truncated.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError) as info:
        load_model(p)
    _assert_clear(info, "truncated.onnx")
    assert "truncated" in info.value.why


def test_missing_external_data(tmp_path):
    path = save(conv_model(), tmp_path / "ext.onnx", external=True)
    (tmp_path / "ext.onnx.data").unlink()
    with pytest.raises(ModelLoadError) as info:
        load_model(path)
    _assert_clear(info, "missing", "ext.onnx.data")


def test_over_2gb_without_external_data(tmp_path):
    # A sparse file: the size check comes before any read, so no 2 GB are written.
    p = tmp_path / "huge.onnx"
    with open(p, "wb") as f:
        f.truncate(PROTOBUF_LIMIT + 10)
    with pytest.raises(ModelLoadError) as info:
        load_model(p)
    _assert_clear(info, "GiB", "external data")


def test_empty_graph(tmp_path):
    graph = helper.make_graph([], "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])])
    p = tmp_path / "nograph.onnx"
    onnx.save_model(helper.make_model(graph), str(p))
    with pytest.raises(ModelLoadError) as info:
        load_model(p)
    _assert_clear(info, "empty graph")
