"""The TensorRT adapter's classes and the API names build.py uses, against real 8.6 / 10.16 / 11.4 bindings.

Subclasses of ILogger, IProgressMonitor and the calibrators are created in each
module; the names that ``trtwidgets.trt.build`` and ``inspect`` call are looked
up on the real classes (nothing that calls into TensorRT's libraries is run).
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
from trtwidgets.trt import version_of
from trtwidgets.trt.dtypes import nptype as _nptype
from trtwidgets.trt.logger import LogCollector, trt_logger
from trtwidgets.trt.progress import BuildProgress, trt_progress_monitor
from trtwidgets.trt.calibrators import CALIBRATOR_CLASSES, calibrator_class
from trtwidgets.core.common.errors import TensorRTUnavailable
out = {"version": version_of(trt)}
c = LogCollector()
lg = trt_logger(c, trt)
lg.log(trt.ILogger.Severity.WARNING, "probe")
out["logger"] = [isinstance(lg, trt.ILogger), [l.severity + ":" + l.message for l in c.lines]]
events = []
m = trt_progress_monitor(BuildProgress(events.append), trt)
if m is None:
    out["monitor"] = None
else:
    m.phase_start("Building", None, 3)
    keep = m.step_complete("Building", 0)
    m.phase_finish("Building")
    out["monitor"] = [isinstance(m, trt.IProgressMonitor), keep, [[e.kind, e.phase, e.step, e.total] for e in events]]
cal = {}
for k in CALIBRATOR_CLASSES:
    try:
        inst = calibrator_class(k, trt)([], {"x": ((1, 3, 4, 4), "float32")})
        cal[k] = [isinstance(inst, trt.IInt8Calibrator), inst.get_algorithm().name, inst.get_batch(["x"]), inst.get_batch_calls]
    except TensorRTUnavailable as e:
        cal[k] = "unavailable: " + e.why
out["calibrators"] = cal
names = {
 "IBuilderConfig": ["set_flag", "clear_flag", "profiling_verbosity", "builder_optimization_level", "set_memory_pool_limit",
                    "create_timing_cache", "set_timing_cache", "get_tactic_sources", "set_tactic_sources",
                    "add_optimization_profile", "int8_calibrator", "set_calibration_profile", "progress_monitor"],
 "Builder": ["create_network", "create_builder_config", "create_optimization_profile", "build_serialized_network"],
 "OnnxParser": ["parse_from_file", "parse", "num_errors", "get_error"],
 "INetworkDefinition": ["num_layers", "get_layer", "num_inputs", "get_input"],
 "ILayer": ["name", "type", "precision", "precision_is_set", "num_inputs", "num_outputs", "get_input", "get_output",
            "set_output_type", "output_type_is_set"],
 "IOptimizationProfile": ["set_shape"],
 "Runtime": ["deserialize_cuda_engine"],
 "ICudaEngine": ["create_engine_inspector", "create_execution_context", "num_io_tensors", "get_tensor_name",
                 "get_tensor_mode", "get_tensor_shape", "get_tensor_profile_shape"],
 "IExecutionContext": ["set_input_shape", "set_optimization_profile_async", "infer_shapes", "get_tensor_shape",
                       "set_tensor_address", "execute_async_v3"],
 "EngineInspector": ["execution_context", "get_engine_information"],
 "ITimingCache": ["serialize"],
 "ParserError": ["desc", "node", "code"],
}
out["missing"] = {k: [a for a in v if not hasattr(getattr(trt, k), a)] for k, v in names.items()}
out["detailed"] = hasattr(trt.ProfilingVerbosity, "DETAILED") and hasattr(trt.LayerInformationFormat, "JSON")
out["workspace"] = hasattr(trt.MemoryPoolType, "WORKSPACE")
out["tactic_sources"] = list(trt.TacticSource.__members__)
out["explicit_batch"] = hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH")
out["nptype"] = [str(_nptype(trt, trt.DataType.FLOAT)), str(_nptype(trt, trt.DataType.HALF))]
print(json.dumps(out))
'''

ALWAYS = {"IBuilderConfig": ["set_flag", "clear_flag", "profiling_verbosity", "builder_optimization_level",
                             "set_memory_pool_limit", "create_timing_cache", "set_timing_cache", "set_tactic_sources",
                             "add_optimization_profile"]}


def _common(out):
    assert out["logger"] == [True, ["WARNING:probe"]]
    assert out["detailed"] and out["workspace"]
    assert out["nptype"] == ["float32", "float16"]
    for cls in ("Builder", "OnnxParser", "INetworkDefinition", "IOptimizationProfile", "Runtime", "ICudaEngine",
                "IExecutionContext", "EngineInspector", "ITimingCache", "ParserError"):
        assert out["missing"][cls] == [], (cls, out["missing"][cls])
    assert not set(ALWAYS["IBuilderConfig"]) & set(out["missing"]["IBuilderConfig"])


def _monitor_ok(out):
    assert out["monitor"] == [True, True, [["start", "Building", 0, 3], ["step", "Building", 1, 3],
                                           ["finish", "Building", 1, 3]]]


def test_adapter_on_tensorrt_10(bindings10):
    out = bindings10.run_json(PROBE)
    assert out["version"] == "10.16.1.11"
    _common(out)
    _monitor_ok(out)
    assert out["missing"]["IBuilderConfig"] == [] and out["missing"]["ILayer"] == []
    assert out["calibrators"]["entropy2"] == [True, "ENTROPY_CALIBRATION_2", None, 1]
    assert {k: v[1] for k, v in out["calibrators"].items()} == {
        "entropy2": "ENTROPY_CALIBRATION_2", "minmax": "MINMAX_CALIBRATION", "entropy": "ENTROPY_CALIBRATION",
        "legacy": "LEGACY_CALIBRATION"}
    assert {"CUBLAS", "CUBLAS_LT", "CUDNN"} <= set(out["tactic_sources"])
    assert out["explicit_batch"]


def test_adapter_on_tensorrt_11(bindings11):
    out = bindings11.run_json(PROBE)
    assert out["version"] == "11.4.0.106"
    _common(out)
    _monitor_ok(out)
    # What the build must not touch on 11: calibrators, calibration profile, layer precision, EXPLICIT_BATCH.
    assert set(out["missing"]["IBuilderConfig"]) == {"int8_calibrator", "set_calibration_profile"}
    assert set(out["missing"]["ILayer"]) == {"precision", "precision_is_set", "set_output_type", "output_type_is_set"}
    assert all(v.startswith("unavailable: ") and "removed in 11" in v for v in out["calibrators"].values())
    assert not out["explicit_batch"]
    assert "CUBLAS" not in out["tactic_sources"]


def test_adapter_on_local_tensorrt_86():
    local = stubs.local_trt86()
    if local is None:
        pytest.skip("no local Python 3.9 + TensorRT 8.6 bundle (CI has none)")
    cmd, env = local
    out = stubs.run_json(cmd + ["-c", PROBE], env)
    assert out["version"].startswith("8.6")
    _common(out)
    assert out["monitor"] is None  # no IProgressMonitor: phases come from the log
    assert out["missing"]["IBuilderConfig"] == ["progress_monitor"]
    assert out["calibrators"]["legacy"] == [True, "LEGACY_CALIBRATION", None, 1]
    assert out["explicit_batch"]
