"""basic-pitch (issue 42's audio network) in FP16 on real TensorRT 8.6: does the engine write NaN, as ONNX Runtime's
FP16 run does, and does the FP32 island the CPU finds keep it finite and accurate?

The model is the wheel's own ``nmp.onnx`` (tests/fixtures/audio), at a static batch of 10 windows synthesized by
``benchmarks/audio_pitch.py`` (piano, chords, noise, speech, quiet windows at -70 dB; numpy only). Three builds at
TensorRT's default builder level 3: FP32 (the reference, TF32 off), FP16 (the flag alone: what a user builds), and
FP16 with the island's layers pinned FP32 (a TensorRT 8.x build's island). Each is judged by the one verdict with
the user's metric (the lower of note-frame and onset F1 against FP32). Python 3.9 with numpy, onnx and tensorrt::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_audio_fp16.py -q -s

It writes ``$TRTWIDGETS_ARTIFACTS/audio_fp16/verdicts.json`` (committed as tests/fixtures/gpu/audio_fp16_verdicts.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir, model_recipe

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "fixtures" / "audio" / "nmp.onnx"
BATCH = 10


def _audio():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import audio_pitch

    return audio_pitch


def _static() -> onnx.ModelProto:
    model = onnx.load(str(MODEL))
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_value = BATCH
    model.graph.name = "nmp_b10"
    return model


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return artifacts_dir(tmp_path_factory, "audio_fp16")


def _run(work, name, x, **recipe):
    from trtwidgets.trt.runner import EngineRunner

    r = build_or_explain(model_recipe(work, _static(), builder_optimization_level=3, **recipe), fresh_dir(work, name),
                         verbose=False)
    with EngineRunner(r.engine_path) as runner:
        out = runner.infer({"serving_default_input_2:0": x})
    return {k: np.asarray(v) for k, v in out.items()}, r.build_seconds


def test_basic_pitch_fp16_engine_against_its_island(work, trt):
    from trtwidgets.core.accuracy.target import Target
    from trtwidgets.core.accuracy.verdict import evaluate
    from trtwidgets.core.recipe.fields import LayerPrecision

    audio = _audio()
    x = audio.windows("heldback", BATCH)
    island = json.loads((ROOT / "tests" / "fixtures" / "audio" / "island.json").read_text())["island"]
    fp32, t32 = _run(work, "fp32", x)
    target, _ = Target.for_metric(audio.pitch_f1).bound(fp32)
    fp16, t16 = _run(work, "fp16", x, flags=("fp16",))
    kept, tis = _run(work, "fp16_island", x, flags=("fp16",), precision_constraints="obey",
                     layer_precisions=tuple(LayerPrecision(n, "fp32") for n in island))
    v16, vis = evaluate(fp16, fp32, target), evaluate(kept, fp32, target)
    record = {"batch": BATCH, "builder_optimization_level": 3, "build_seconds": {"fp32": t32, "fp16": t16,
                                                                                 "fp16_island": tis},
              "fp16": v16.to_dict(), "fp16_island": vis.to_dict(), "island_nodes": len(island)}
    (work / "verdicts.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
    assert all(np.isfinite(v).all() for v in fp32.values())
    # The island pinned FP32 keeps the engine finite and the user's metric within its drop.
    assert vis.meets and not vis.non_finite, vis.why
