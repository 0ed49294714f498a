"""The parts of the debug build that need no GPU: the model bytes TensorRT is given."""

from __future__ import annotations

import onnx

from trtwidgets import demo
from trtwidgets.trt.debug_build import _renamed_copy


def test_demo_model_gets_unique_dim_names_and_the_file_is_untouched():
    before = demo.MODEL_PATH.read_bytes()
    notes = []
    data = _renamed_copy(str(demo.MODEL_PATH), {"x": ((1, 3, 48, 192), (32, 3, 48, 192), (32, 3, 48, 192))}, notes)
    dims = onnx.load_from_string(data).graph.input[0].type.tensor_type.shape.dim
    # TensorRT ties equal dim_param names together: H ("?") and W ("?") must differ for 48x192.
    assert dims[2].dim_param and dims[3].dim_param and dims[2].dim_param != dims[3].dim_param
    assert len(notes) == 1 and "'?'" in notes[0]
    assert demo.MODEL_PATH.read_bytes() == before


def test_model_without_shared_names_is_parsed_from_its_file(tmp_path):
    from tests.gpu.accuracy_models import tiny_cnn

    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_cnn(), str(path))
    notes = []
    assert _renamed_copy(str(path), None, notes) is None and notes == []
