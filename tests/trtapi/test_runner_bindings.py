"""The names the runner, benchmark, profiler and debug build call, against real 8.6 / 10.16 / 11.4 bindings.

The IProfiler subclass is created and called in each module; everything else is
looked up on the real classes (nothing that needs a GPU is run).
"""

from __future__ import annotations

import pytest

from . import stubs

PROBE = r'''
import json, warnings
warnings.simplefilter("ignore", DeprecationWarning)
try:
    import tensorrt_bindings.tensorrt as trt
except ImportError:
    import tensorrt as trt
from trtwidgets.trt.profiler import LayerProfiler
from trtwidgets.trt.debug_build import restricted_tactic_sources
from trtwidgets.trt.runner import numpy_dtype
p = LayerProfiler(trt)
p.report_layer_time("conv1", 0.25)
p.report_layer_time("conv1", 0.75)
out = {"profiler": [isinstance(p, trt.IProfiler), p.records]}
names = {
 "ICudaEngine": ["num_io_tensors", "get_tensor_name", "get_tensor_mode", "get_tensor_dtype", "get_tensor_shape",
                 "get_tensor_profile_shape", "num_optimization_profiles", "create_execution_context"],
 "IExecutionContext": ["set_input_shape", "get_tensor_shape", "set_tensor_address", "execute_async_v3",
                       "set_optimization_profile_async", "profiler"],
 "INetworkDefinition": ["mark_output", "num_outputs", "get_output", "num_layers", "get_layer", "num_inputs", "get_input"],
 "ITensor": ["name", "dtype", "shape", "is_shape_tensor"],
 "Runtime": ["deserialize_cuda_engine"],
}
out["missing"] = {k: [a for a in v if not hasattr(getattr(trt, k), a)] for k, v in names.items()}
out["input_mode"] = hasattr(trt.TensorIOMode, "INPUT")
out["nptype"] = [str(numpy_dtype(trt, getattr(trt.DataType, n))) for n in ("FLOAT", "HALF", "INT32", "INT8", "BOOL")]
out["tf32_flag"] = hasattr(trt.BuilderFlag, "TF32")
mask = restricted_tactic_sources(trt)
out["mask_excludes"] = [n for n, m in trt.TacticSource.__members__.items() if mask is not None and not (mask >> int(m)) & 1]
print(json.dumps(out))
'''


def _check(out):
    assert out["profiler"] == [True, [["conv1", 0.25], ["conv1", 0.75]]]
    assert out["missing"] == {k: [] for k in out["missing"]}, out["missing"]
    assert out["input_mode"] and out["nptype"] == ["float32", "float16", "int32", "int8", "bool"]


def test_runner_api_on_tensorrt_10(bindings10):
    out = bindings10.run_json(PROBE)
    _check(out)
    assert set(out["mask_excludes"]) == {"CUBLAS", "CUBLAS_LT", "CUDNN"}


def test_runner_api_on_tensorrt_11(bindings11):
    out = bindings11.run_json(PROBE)
    _check(out)
    assert out["mask_excludes"] == []  # 11 has no cuBLAS/cuDNN tactic sources to leave out


def test_runner_api_on_local_tensorrt_86():
    local = stubs.local_trt86()
    if local is None:
        pytest.skip("no local Python 3.9 + TensorRT 8.6 bundle (CI has none)")
    cmd, env = local
    out = stubs.run_json(cmd + ["-c", PROBE], env)
    _check(out)
    assert set(out["mask_excludes"]) == {"CUBLAS", "CUBLAS_LT", "CUDNN"} and out["tf32_flag"]
