"""Placement rule 13 on real TensorRT 8.6: a transformer block as paddle2onnx writes it builds in the export's form.

Issue 33's zoo run (4 H200s, TensorRT 8.6): PaddleOCR rec's Q/DQ exports failed with Myelin's
``convertMyelinWeightsToFp32 ... Assertion params.weights.type() != DataType::kINT8``: its SVTR neck's MatMuls read
Constant-node weights after a computed Reshape, and the export wrote them as INT8 constants. The block here
(``tests/core/qdq_blocks.svtr_block``, opset 13) has that form; the export for TensorRT 8.6 writes its MatMul weights
in FP32 on the INT8 grid and must build; the same placement with INT8 weight constants (what the export writes for
TensorRT 10, here with an FP32 float part since 8.6's parser refuses FP16 scales) is built beside it and must fail on
that assertion (the cause rule 13 names). On the H200 (2026-11-28): FP16 0.0915 ms, the 8.6 export 0.0784 ms, the
INT8-constant form ``convertMyelinWeightsToFp32::7903 ... Assertion params.weights.type() != DataType::kINT8``.

Python 3.9 with numpy, onnx and tensorrt only::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_myelin_weights.py -v -s
"""

from __future__ import annotations

import json

import onnx
import pytest

from tests.core import qdq_blocks as qb
from tests.gpu.build_helpers import artifacts_dir, fresh_dir
from trtwidgets.core.plan.measured.measurement import FP16, QDQ
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.trt.measure import MeasureJob, measure

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

BATCH, SEQ, D = 32, 40, 120


def test_the_svtr_blocks_export_for_86_builds(tmp_path, tmp_path_factory):
    block = qb.svtr_block(BATCH, SEQ, D)
    amax = qb.simple_amax(block)  # the test reads whether it builds; the GPU machine's Python has no ONNX Runtime
    paths = {"float": tmp_path / "float.onnx"}
    onnx.save(block, str(paths["float"]))
    forms = {}
    # The INT8-constant form is the TensorRT 10 export with an FP32 float part: 8.6's parser refuses FP16 scales.
    for name, opts in (("toolkit_86", QdqOptions(trt_version="8.6")),
                       ("int8_constants", QdqOptions(trt_version="10.16", high_precision="fp32"))):
        ex = build_qdq(block, QdqSpec(amax, opts))
        forms[name] = sorted({w.stored for w in ex.report.weights})
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(ex.model, str(paths[name]))
    assert forms == {"toolkit_86": ["float32 on the int8 grid"], "int8_constants": ["int8"]}
    jobs = [MeasureJob("fp16", FP16, str(paths["float"])), MeasureJob("toolkit_86", QDQ, str(paths["toolkit_86"])),
            MeasureJob("int8_constants", QDQ, str(paths["int8_constants"]))]
    report = measure(jobs, fresh_dir(tmp_path, "engines"), shapes={"x": (BATCH, SEQ * D)}, rounds=3, runs=20,
                     opt_level=1, progress=True, gpus=1)
    by = {m.name: m for m in report.measurements}
    out = artifacts_dir(tmp_path_factory, "myelin_weights")
    (out / "report.json").write_text(json.dumps(report.to_dict(), indent=1))
    print({n: (m.median_ms, m.error[:300]) for n, m in by.items()})
    assert by["fp16"].ok, by["fp16"].error
    assert by["toolkit_86"].ok, by["toolkit_86"].error
    # Rule 13's premise: TensorRT 8.6 refuses INT8 constants in a Myelin MatMul (its assertion, not another failure).
    assert not by["int8_constants"].ok
    assert "convertMyelinWeightsToFp32" in by["int8_constants"].error
