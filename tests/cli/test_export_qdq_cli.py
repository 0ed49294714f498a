"""``trtwidgets export-qdq``: from saved statistics (or a calibration cache) to a Q/DQ model."""

from __future__ import annotations

import json
import re

import onnx
import pytest

from trtwidgets import demo
from trtwidgets.cli import main


@pytest.fixture(scope="module")
def stats_path(tmp_path_factory):
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.stats import save_stats

    stats = collect_stats(demo.MODEL_PATH, demo.sample_inputs(8), progress=False)
    return save_stats(stats, tmp_path_factory.mktemp("stats") / "demo_stats.npz")


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_export_with_report_and_validation(capsys, tmp_path, stats_path):
    out = tmp_path / "demo.qdq.onnx"
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "percentile",
                              "--out", out, "--data", "demo", "--samples", "32", "--trt-version", "8.6",
                              "--write-failed")
    # Exit 1 when the validation thresholds fail, 0 when they hold.
    assert code == (0 if "PASSED" in text else 1), err
    assert "PASSED" in text or "FAILED" in text
    assert out.is_file() and "written for" not in text  # the TensorRT asked for: no word on the target
    # 53 Conv + MatMul, less 18 squeeze-excite 1x1 convs (matrix-vector). Dense INT8 (the default) quantizes
    # the 9 depthwise convs whose output the squeeze-excite pool and Mul read, with a Q/DQ on that output.
    assert "quantized layers    36" in text and "opset 11 -> 13" in text
    assert "Validation on 32 held-back samples" in text and "cosine" in text
    assert "QDQ_REQUIRES_INT8" in text  # lint without the INT8 flag, TensorRT 8.6
    model = onnx.load(str(out))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("DequantizeLinear") == ops.count("QuantizeLinear") + 36  # + one per quantized weight


def test_exclusions_fp8_and_json(capsys, tmp_path, stats_path):
    out = tmp_path / "fp8.onnx"
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "percentile",
                              "--percentile", "99.9", "--exclude", "Conv@[0-4]", "--exclude-op-type", "MatMul",
                              "--fp8", "--out", out, "--json")
    assert code == 0, err
    report = json.loads(text)["report"]
    assert report["precision"] == "fp8" and report["opset_to"] == 19
    assert set(report["excluded"]) == {"Conv@0", "Conv@1", "Conv@2", "Conv@3", "Conv@4", "MatMul@0"}
    # Conv@3 and Conv@4 are squeeze-excite convs (matrix-vector, float anyway):
    # 36 - Conv@0 - Conv@1 - Conv@2 (an SE depthwise conv, quantized by dense INT8) - the MatMul.
    assert len(report["quantized_layers"]) == 36 - 4
    assert any(s["node"] == "MatMul@0" and "op type MatMul" in s["reason"] for s in report["skipped"])


def test_grouped_convs_read_in_float_can_be_quantized_on_request(capsys, tmp_path, stats_path):
    # Rule 6 is a rule of the sparse placement (rules 1-7); dense INT8 (the default) quantizes them anyway.
    args = ["export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "percentile", "--json",
            "--no-dense-int8"]
    code, text, err = run_cli(capsys, *args, "--out", tmp_path / "default.onnx")
    assert code == 0, err
    default = json.loads(text)["report"]
    kept = {s["node"] for s in default["skipped"] if "TensorRT 8.6 cannot fuse" in s["reason"]}
    assert len(kept) == 9 and not kept & set(default["quantized_layers"])
    code, text, err = run_cli(capsys, *args, "--quantize-float-output-grouped-convs", "--out", tmp_path / "all.onnx")
    assert code == 0, err
    forced = json.loads(text)["report"]
    assert set(forced["quantized_layers"]) == set(default["quantized_layers"]) | kept
    assert not any("TensorRT 8.6 cannot fuse" in s["reason"] for s in forced["skipped"])


def test_dense_int8_quantizes_grouped_convs_with_their_outputs(capsys, tmp_path, stats_path):
    # Dense INT8 is the default (as in `trtwidgets plan` and the API); --no-dense-int8 is rules 1-7.
    args = ["export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "percentile", "--json"]
    code, text, err = run_cli(capsys, *args, "--no-dense-int8", "--out", tmp_path / "default.onnx")
    default = json.loads(text)["report"]
    code, text, err = run_cli(capsys, *args, "--out", tmp_path / "dense.onnx")
    assert code == 0, err
    dense = json.loads(text)["report"]
    code, text, err = run_cli(capsys, *args, "--dense-int8", "--out", tmp_path / "dense_flag.onnx")
    assert code == 0 and json.loads(text)["report"]["activations"] == dense["activations"], err
    assert dense["ranges"].startswith("percentile ranges from the calibration (percentile 99.99)")
    kept = {s["node"] for s in default["skipped"] if "TensorRT 8.6 cannot fuse" in s["reason"]}
    assert kept and kept <= set(dense["quantized_layers"])
    rules = {r.split(" (")[0] for t in dense["activations"] for r in t["rules"]}
    # The squeeze-excite convs are matrix-vector products at the demo's batch of 1 (rule 5, float), so their
    # gates stay float: the only new Q/DQ are on what the grouped convs write.
    assert "grouped conv output" in rules and "layer output read by INT8 layers" not in rules
    model = onnx.load(tmp_path / "dense.onnx")
    assert sum(n.op_type == "QuantizeLinear" for n in model.graph.node) > sum(
        n.op_type == "QuantizeLinear" for n in onnx.load(tmp_path / "default.onnx").graph.node)


def test_ranges_from_a_calibration_cache(capsys, tmp_path, stats_path):
    from trtwidgets.core.calibration.cache import write_cache
    from trtwidgets.core.calibration.ranges import amax_from_stats
    from trtwidgets.core.calibration.stats import load_stats

    amax = amax_from_stats(load_stats(stats_path), "max")
    cache = tmp_path / "calib.cache"
    write_cache(amax, cache)
    out = tmp_path / "from_cache.onnx"
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--cache", cache, "--out", out, "--json")
    assert code == 0, err
    acts = {a["tensor"]: a["amax"] for a in json.loads(text)["report"]["activations"]}
    # The cache stores scales as float32 hex: amax survives to float32 precision.
    assert acts["x"] == pytest.approx(amax["x"], rel=1e-6)


def test_bad_inputs_exit_2_and_keep_the_old_output(capsys, tmp_path, stats_path):
    out = tmp_path / "keep.onnx"
    out.write_bytes(b"previous")
    code, _, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--exclude", "nope",
                           "--out", out)
    assert code == 2 and "matches no node" in err
    code, _, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "kl",
                           "--out", out)
    assert code == 2 and "Unknown range method" in err
    code, _, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", tmp_path / "missing.npz", "--out", out)
    assert code == 2 and "No calibration at" in err
    assert out.read_bytes() == b"previous"


def _demo_accuracy(labels, samples):
    # The float model's top-1 accuracy on the same held-back samples the CLI uses (the labelled set's, batch 1).
    import numpy as np

    from trtwidgets.core.qdq.validate import run_model
    from trtwidgets.demo.labelled_set import labelled_set

    outs, n = run_model(demo.MODEL_PATH, labelled_set("held_back").feeds(1)[:samples])
    return float(np.mean(next(iter(outs.values())).argmax(-1) == labels[:n]))


def test_labels_give_accuracy_on_both_models(capsys, tmp_path, stats_path):
    import numpy as np

    # The labelled set pairs each text line upright (label 0) with it turned (label 1): sample i has label i % 2.
    labels = np.arange(24) % 2
    np.save(tmp_path / "labels.npy", labels)
    np.savez(tmp_path / "labels.npz", labels=labels)
    args = ["export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "percentile", "--data", "demo",
            "--samples", "16", "--min-cosine", "0"]
    code, text, err = run_cli(capsys, *args, "--labels", tmp_path / "labels.npy", "--out", tmp_path / "a.onnx", "--json")
    assert code == 0, err
    v = json.loads(text)["validation"]
    assert v["task_metric_reference"] == pytest.approx(_demo_accuracy(labels, 16))
    assert 0.0 <= v["task_metric_qdq"] <= 1.0
    assert "save_infer_model/scale_0.tmp_1" in v["task_metric_name"] and "16 of 24" in v["task_metric_name"]
    code, text, err = run_cli(capsys, *args, "--labels", tmp_path / "labels.npz", "--out", tmp_path / "b.onnx")
    assert code == 0, err
    assert f"FP32 {_demo_accuracy(labels, 16):.4f}" in text and "accuracy" in text


@pytest.mark.parametrize("make, needle", [
    (lambda np: np.arange(8) % 2, "8 labels for 16 held-back samples"),
    (lambda np: (np.arange(16) % 2).astype(np.float32), "not integers"),
    (lambda np: np.full(16, 2), "class 2"),
    (lambda np: np.full(16, -1), "negative"),
    (lambda np: np.zeros((16, 2), np.int64), "one label per sample"),
    (lambda np: np.array([{"a": 1}] * 16, dtype=object), "never unpickled"),
])
def test_bad_labels_exit_2_and_keep_the_old_output(capsys, tmp_path, stats_path, make, needle):
    import numpy as np

    np.save(tmp_path / "labels.npy", make(np), allow_pickle=True)
    out = tmp_path / "keep.onnx"
    out.write_bytes(b"previous")
    code, _, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--data", "demo",
                           "--samples", "16", "--labels", tmp_path / "labels.npy", "--out", out)
    assert code == 2 and needle in err, err
    assert out.read_bytes() == b"previous"


def test_labels_need_held_back_data(capsys, tmp_path, stats_path):
    import numpy as np

    np.save(tmp_path / "labels.npy", np.arange(4) % 2)
    code, _, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--labels",
                           tmp_path / "labels.npy", "--out", tmp_path / "x.onnx")
    assert code == 2 and "--held-back" in err
    code, _, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--data", "demo",
                           "--labels", tmp_path / "missing.npy", "--out", tmp_path / "x.onnx")
    assert code == 2 and "No labels file" in err and not (tmp_path / "x.onnx").exists()


def test_failed_validation_names_the_failed_check(capsys, tmp_path, stats_path):
    # FP8 Q/DQ linted for TensorRT 8.6: cosine is fine, the lint error is why it fails.
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--method", "percentile",
                              "--fp8", "--held-back", "demo", "--max-samples", "8", "--target-cosine", "0.5",
                              "--trt-version", "8.6", "--out", tmp_path / "fp8.onnx")
    assert code == 1, err
    failed = [line for line in text.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and failed[0].strip().startswith("FAILED: lint error QDQ_TYPE_NEEDS_NEWER_TRT:"), text
    # The target is listed, not blamed: no measured cosine on the FAILED line.
    assert "target: cosine >= 0.5" in failed[0] and not re.search(r"cosine \d", failed[0]), failed[0]


def test_bad_samples_and_min_cosine_are_exit_2(tmp_path, capsys):
    from trtwidgets import demo
    from trtwidgets.cli import main

    stats = tmp_path.parent / "unused.npz"
    for extra, word in ((["--samples", "0"], "--samples"), (["--min-cosine", "nan"], "--min-cosine")):
        rc = main(["export-qdq", str(demo.MODEL_PATH), "--stats", str(stats), "--out", str(tmp_path / "q.onnx"),
                   "--data", "demo", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and word in err and "Traceback" not in err
        assert not (tmp_path / "q.onnx").exists()


def test_an_fp16_float_part_that_drifts_is_not_written(capsys, tmp_path, stats_path):
    # The check before writing compares the FP16 float part with the FP32 one on the data: at a threshold no
    # FP16 model can meet, nothing is written, no "wrote" is printed, and the exit is 2 with what/why/fix.
    out = tmp_path / "fp16.qdq.onnx"
    out.write_bytes(b"earlier")
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--trt-version", "10.16",
                              "--out", out, "--data", "demo", "--samples", "4", "--min-float-cosine", "1.0")
    assert code == 2 and "wrote" not in text
    assert "was not written" in err and "drifts from FP32" in err and "cosine" in err
    assert out.read_bytes() == b"earlier"


def test_an_fp16_export_for_tensorrt_10_and_11_passes_its_check(capsys, tmp_path, stats_path):
    for version in ("10.16", "11.4"):
        out = tmp_path / f"fp16_{version}.qdq.onnx"
        code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--trt-version",
                                  version, "--out", out, "--data", "demo", "--samples", "4", "--write-failed",
                                  "--no-advice")
        # The float part's check is the subject: the model is written whatever the INT8 check says.
        assert code in (0, 1) and f"wrote {out}" in text, err
        # The float part's line: every quantizer held, the outputs and the quantizer inputs at >= 0.998.
        line = next(ln for ln in text.splitlines() if ln.startswith("float part against FP32"))
        held = [float(x) for x in re.findall(r">= ([0-9.]+)", line)]
        assert "quantizers held" in line and "end to end" in line and len(held) == 2 and min(held) >= 0.998, line
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--trt-version", "10.16",
                              "--out", tmp_path / "j.qdq.onnx", "--data", "demo", "--samples", "4", "--json")
    check = json.loads(text)["check"]
    assert check["passed"] and min(check["cosines"].values()) >= 0.998 and check["quantizers"]["held"] > 30
    assert set(check["end_to_end"]) == set(check["cosines"])


def _no_tensorrt():
    from trtwidgets.core.model.trt_version import installed_trt_version

    return installed_trt_version() is None


@pytest.mark.skipif(not _no_tensorrt(), reason="TensorRT is installed: the default target is the installed one")
def test_without_tensorrt_the_export_is_for_tensorrt_10_and_11_and_says_so(capsys, tmp_path, stats_path):
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--out",
                              tmp_path / "default.onnx", "--json")
    assert code == 0, err
    doc = json.loads(text)
    assert doc["report"]["high_precision"]["dtype"] == "fp16" and "TensorRT 10 and 11" in doc["target"]
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--out",
                              tmp_path / "default.onnx")
    assert "written for TensorRT 10 and 11 (no TensorRT installed here" in text and "float part          FP16" in text
    # --trt-version still wins: 8.6 reads an FP32 float part.
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--trt-version", "8.6",
                              "--out", tmp_path / "trt86.onnx", "--json")
    doc = json.loads(text)
    assert code == 0 and "high_precision" not in doc["report"] and "target" not in doc, err
    # A statistics file is exported with auto ranges: each tensor's method, counted in the report.
    assert doc["report"]["ranges"].startswith("auto ranges from the calibration (")


def test_a_failed_check_writes_nothing_and_names_what_to_change(capsys, tmp_path, stats_path):
    out = tmp_path / "strict.onnx"
    out.write_bytes(b"earlier")
    args = ["export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--data", "demo", "--samples", "4", "--trt-version",
            "8.6", "--min-cosine", "0.99999", "--out", out]
    code, text, err = run_cli(capsys, *args)
    assert code == 1 and out.read_bytes() == b"earlier" and "wrote" not in text
    assert f"nothing written to {out}: the check failed (--write-failed writes it anyway)" in text
    assert "What to change (each quantized tensor's own error at its readers on 4 held-back samples" in text
    assert "keep float (its readers in high precision)" in text and "add: --exclude " in text
    # What was measured on the way goes to standard error; the verdict of the advised changes to the output.
    assert "measuring each of" in err and re.search(r"With these changes the check (passes|still fails)", text)
    # Command-line terms only: no Python API in what a command prints.
    assert "trtwidgets.calibrate" not in text + err and "cal." not in text
    code, text, err = run_cli(capsys, *args, "--json", "--no-advice")
    doc = json.loads(text)
    assert code == 1 and doc["out"] is None and "advice" not in doc and not doc["validation"]["passed"]
    code, text, err = run_cli(capsys, *args, "--write-failed", "--no-advice")
    assert code == 1 and f"wrote {out}" in text and onnx.load(str(out)).graph.node


def test_the_advised_options_pass_the_check(capsys, tmp_path, stats_path):
    # The advice's own "add:" options, given back to the command, make the same check pass.
    args = ["export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--data", "demo", "--samples", "4", "--trt-version",
            "8.6", "--min-cosine", "0.999", "--out", tmp_path / "q.onnx", "--json"]
    code, text, err = run_cli(capsys, *args)
    advice = json.loads(text)["advice"]
    if not advice["passes"]:
        pytest.skip(f"the advice found no passing set within its tries: {advice['result']}")
    extra = (["--exclude", *advice["exclude"]] if advice["exclude"] else []) + (
        ["--amax", *(f"{k}={v!r}" for k, v in advice["overrides"].items())] if advice["overrides"] else [])
    code, text, err = run_cli(capsys, *args, *extra)
    assert code == 0 and json.loads(text)["validation"]["passed"], err
    assert (tmp_path / "q.onnx").is_file()


def test_a_task_metric_is_the_check(capsys, tmp_path, stats_path):
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--held-back", "demo",
                              "--max-samples", "8", "--metric", "top1-agreement", "--out", tmp_path / "m.onnx", "--json")
    v = json.loads(text)["validation"]
    # The metric alone gates (its own allowance below FP32), as `plan --metric` does; no cosine threshold.
    assert v["task_metric_name"].startswith("top-1 agreement") and v["target"]["cosine"] is None
    assert v["target"]["max_metric_drop"] == 0.01 and v["target"]["metric_spec"] == "top1-agreement"
    assert v["task_metric_reference"] == 1.0 and code == (0 if v["passed"] else 1), err
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--held-back", "demo",
                              "--max-samples", "8", "--metric", "cosine", "--max-metric-drop", "0.5",
                              "--target-cosine", "0.5", "--out", tmp_path / "m.onnx", "--json")
    v = json.loads(text)["validation"]
    assert code == 0 and (v["target"]["max_metric_drop"], v["target"]["cosine"]) == (0.5, 0.5), err


def test_amax_overrides_from_the_command_line(capsys, tmp_path, stats_path):
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--amax", "x=2.5",
                              "--out", tmp_path / "a.onnx", "--json")
    assert code == 0, err
    acts = {a["tensor"]: a["amax"] for a in json.loads(text)["report"]["activations"]}
    assert acts["x"] == 2.5 and "1 amax overrides" in json.loads(text)["report"]["ranges"]


def test_advice_that_keeps_every_layer_float_is_no_pass(capsys, tmp_path, stats_path):
    # At a cosine the demo's INT8 layers cannot keep, the advice ends with nothing in INT8: that is FP16, not a
    # Q/DQ model that passes, and the command says so instead of advising every layer out.
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--data", "demo",
                              "--samples", "4", "--trt-version", "8.6", "--min-cosine", "0.99999",
                              "--out", tmp_path / "q.onnx", "--json")
    advice = json.loads(text)["advice"]
    assert code == 1 and advice["passes"] is False and "no layer left in INT8" in advice["result"], err
    assert not (tmp_path / "q.onnx").exists()


def test_a_metric_typed_as_module_function_is_imported_as_plan_imports_it(capsys, tmp_path, stats_path, monkeypatch):
    """Issue 42: `export-qdq --metric pkg.mod:fn` said "not registered in this process"; `plan` imported it. The
    metric is the user's (reference, candidate) on every command."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "issue42_metrics.py").write_text(
        "import numpy as np\n"
        "def orientation(reference, candidate):\n"
        "    out = next(iter(reference))\n"
        "    return float(np.mean(reference[out].argmax(-1) == candidate[out].argmax(-1)))\n")
    monkeypatch.syspath_prepend(str(lib))
    code, text, err = run_cli(capsys, "export-qdq", demo.MODEL_PATH, "--stats", stats_path, "--held-back", "demo",
                              "--max-samples", "16", "--metric", "issue42_metrics:orientation", "--max-metric-drop",
                              "0.2", "--trt-version", "8.6", "--out", tmp_path / "m.onnx", "--json")
    assert code in (0, 1) and "not registered" not in err, err
    v = json.loads(text)["validation"]
    assert v["task_metric_name"] == "issue42_metrics:orientation" and v["task_metric_reference"] == 1.0
    assert v["target"]["metric_spec"] == "issue42_metrics:orientation" and v["target"]["max_metric_drop"] == 0.2
