"""Ranges that know their model, values that can be scales, images at their depth, bounded reads (issue 22).

Each CLI row must end with exit 2, a message with what, why and fix and no traceback, and leave every file
the user had unchanged (nothing written under a final name). Each API row must raise a UserError with the
three parts, and write nothing. The happy paths below the tables show the same readers still take the
model's own statistics, caches and plans.
"""

from __future__ import annotations

import json
import math
import shutil
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from trtwidgets.cli import main
from trtwidgets.core.common.errors import UserError

from .workspace import FIXTURES, MODEL, fingerprint, make_user_files, fill_argv, run_cli

M = str(MODEL)
PRE = '{"input": "x", "resize": [48, 192]}'
CAL = ["calibrate", M, "--no-progress"]
QDQ = ["export-qdq", M, "--out", "{user}/old.qdq.onnx"]
ROW_BYTES = 3 * 48 * 192 * 4


# ----------------------------------------------------------------------------------------------- the shelf


def _fixed8_model(path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "fixed8",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 8])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _stats_of(model_path, feeds, out):
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.stats import save_stats

    stats = collect_stats(str(model_path), feeds, progress=False)
    save_stats(stats, out)
    return stats


def _edited_stats(src, out, tensor_index, new_max, hist_max):
    """A copy of a statistics file with one tensor's max (and histogram edge) changed, still self-consistent."""
    with np.load(src) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    entry = meta["tensors"][tensor_index]
    entry["max"], entry["hist_max"] = new_max, hist_max
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(out, **arrays)
    return entry["name"]


def _edited_cache(src, out, tensor, hex_scale):
    lines = src.read_text().splitlines()
    lines = [f"{tensor}: {hex_scale}" if ln.rpartition(":")[0] == tensor else ln for ln in lines]
    out.write_text("\n".join(lines) + "\n")


def _npz_declaring(path, shape, data_bytes=None, rows_written=None):
    """A compressed .npz whose member's header declares ``shape``; zeros follow (all of them, or a few)."""
    header = {"descr": "<f4", "fortran_order": False, "shape": shape}
    row = int(np.prod(shape[1:])) * 4
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z, \
            z.open("x.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(f, header)
        left = shape[0] if rows_written is None else rows_written
        chunk = bytes(row * 256)
        while left:
            n = min(256, left)
            f.write(chunk[: n * row])
            left -= n


def _plan_doc(model_path, stats_path):
    """A plan.json as the planner writes it for the demo model (FP16 and INT8 everywhere), without a search."""
    from trtwidgets.core.calibration.fingerprint import fingerprint_of
    from trtwidgets.core.calibration.ranges import amax_from_stats
    from trtwidgets.core.calibration.stats import load_stats
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.qdq.options import QdqOptions

    loaded = load_model(model_path)
    amax = amax_from_stats(load_stats(stats_path), "max")
    convs = [n.name for n in loaded.proto.graph.node if n.op_type == "Conv"]
    acc = {"cosine": 0.999, "snr_db": 30.0, "metric": None, "metric_reference": None}
    cands = [{"name": "FP16 (no INT8)", "quantized": [], "kept": [], "accuracy": acc, "latency_us": 10.0,
              "fp16_latency_us": 10.0, "speedup_vs_fp16": 1.0, "latency_source": "estimate", "meets_target": True},
             {"name": "INT8 everywhere", "quantized": convs, "kept": [], "accuracy": acc, "latency_us": 8.0,
              "fp16_latency_us": 10.0, "speedup_vs_fp16": 1.25, "latency_source": "estimate", "meets_target": True}]
    return {"version": 1, "model": str(model_path), "target": {"cosine": 0.99}, "recommended": 1, "reason": "faster",
            "candidates": cands, "ranges": {"method": "max", "amax": amax}, "high_precision": "fp32",
            "trt_version": "8.6", "input_shapes": {"x": [1, 3, 48, 192]}, "seconds": {}, "notes": [],
            "interrupted": False, "placement": {"dense_int8": True},
            "options": QdqOptions(high_precision="fp32", trt_version="8.6").to_dict(),
            "fingerprint": fingerprint_of(loaded).to_dict()}


def _images(bad):
    from PIL import Image
    import tifffile

    ramp = np.linspace(0, 1, 48 * 192, dtype=np.float64).reshape(48, 192)
    for name, write in {
        "float_over": lambda d: tifffile.imwrite(d / "a.tif", (ramp * 2000).astype(np.float32)),
        "float_negative": lambda d: tifffile.imwrite(d / "a.tif", (ramp * 200 - 10).astype(np.float32)),
        "float_nan": lambda d: tifffile.imwrite(d / "a.tif", np.where(ramp > 0.5, np.nan, ramp).astype(np.float32)),
        "int32": lambda d: tifffile.imwrite(d / "a.tif", (ramp * 1e6).astype(np.int32)),
        "sixteen": lambda d: Image.fromarray((ramp * 30000).astype(np.uint16)).save(d / "a.png"),
        "float_ok": lambda d: tifffile.imwrite(d / "a.tif", (ramp * 200).astype(np.float32)),
    }.items():
        d = bad / f"img_{name}"
        d.mkdir()
        write(d)


def _calibrations(bad, other, two, demo_stats):
    """Saved calibrations: another model's, one of other inputs, hand-damaged ones, and a foreign .npz."""
    from trtwidgets.core.calibration.calibration import Calibration
    from trtwidgets.core.calibration.stats import load_stats

    Calibration.fit(other, "max").save(bad / "other_cal.npz")
    Calibration.fit(two, "max").save(bad / "two_input_cal.npz")
    Calibration.fit(load_stats(demo_stats), "max", overrides={"conv_9_out": 2.0}).save(bad / "override_elsewhere_cal.npz")
    for name, text in (("damaged_cal.npz", b"{not json"), ("newer_cal.npz", json.dumps(
            {"format": "trtwidgets-calibration", "version": 99, "method": "max"}).encode())):
        path = Calibration.fit(load_stats(demo_stats), "max").save(bad / name)
        _replace_member(path, "calibration.npy", text)
    np.savez(bad / "weights.npz", w=np.ones((3, 3), np.float32))


def _replace_member(path, member, text: bytes) -> None:
    """An .npz with one member rewritten as the bytes ``text`` (a hand edit)."""
    import io

    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(text, np.uint8))
    members[member] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def make_shelf(bad):
    """Every bad input of the tables (names say what is wrong), and the other model they come from."""
    from tests.core.calib_models import conv_relu_model, save, two_input_model

    bad.mkdir(parents=True)
    rng = np.random.default_rng(0)
    save(conv_relu_model(), bad / "other.onnx")
    other = _stats_of(bad / "other.onnx", [{"x": rng.random((2, 3, 16, 16), np.float32)}], bad / "other_stats.npz")
    from trtwidgets.core.calibration.cache import write_cache
    from trtwidgets.core.calibration.ranges import amax_from_stats

    write_cache(amax_from_stats(other, "max"), bad / "other.cache")
    save(two_input_model(), bad / "two.onnx")
    two = _stats_of(bad / "two.onnx", [{"a": rng.random((1, 2), np.float32), "b": rng.random((1, 2), np.float32),
                                        "c": rng.random((1, 2), np.float32)}], bad / "two_input_stats.npz")
    demo_stats = FIXTURES / "calib" / "cls_demo_stats.npz"
    _calibrations(bad, other, two, demo_stats)
    _edited_stats(demo_stats, bad / "beyond_fp32_stats.npz", 5, 1e39, 2.0 ** 130)
    _edited_stats(demo_stats, bad / "fp16_overflow_stats.npz", 5, 1e7, 2.0 ** 24)
    cache = FIXTURES / "trt86" / "cls_entropy2.cache"
    _edited_cache(cache, bad / "huge_scale.cache", "x", "7f000000")  # 1.7e38: fine in FP32, infinite in FP16
    _edited_cache(cache, bad / "tiny_scale.cache", "x", "00000001")  # 1.4e-45: rounds to 0
    # Calibration data.
    d = bad / "data_only_stats"
    d.mkdir()
    shutil.copy(demo_stats, d / "stats.npz")
    d = bad / "data_npz_bomb"
    d.mkdir()
    _npz_declaring(d / "s.npz", (int((1 << 30) * 1.02 / ROW_BYTES) + 1, 3, 48, 192))
    d = bad / "data_npz_lying_header"
    d.mkdir()
    _npz_declaring(d / "s.npz", (100000, 3, 48, 192), rows_written=1)
    d = bad / "data_small8"
    d.mkdir()
    np.save(d / "s.npy", np.ones((1, 1, 8, 8), np.float32))
    _fixed8_model(bad / "fixed8.onnx")
    _images(bad)
    # plan.json files: the demo's, then hand edits.
    doc = _plan_doc(MODEL, demo_stats)
    first = next(iter(doc["ranges"]["amax"]))
    edits = {
        "recommended_text": dict(doc, recommended="2"),
        "recommended_out_of_range": dict(doc, recommended=7),
        "recommended_bool": dict(doc, recommended=True),
        "amax_huge": dict(doc, ranges=dict(doc["ranges"], amax={k: 1e308 for k in doc["ranges"]["amax"]})),
        "amax_nan": dict(doc, ranges=dict(doc["ranges"], amax={k: math.nan for k in doc["ranges"]["amax"]})),
        "amax_tiny": dict(doc, ranges=dict(doc["ranges"], amax=dict(doc["ranges"]["amax"], **{first: 1e-45}))),
        "amax_negative": dict(doc, ranges=dict(doc["ranges"], amax=dict(doc["ranges"]["amax"], **{first: -1.0}))),
        "amax_text": dict(doc, ranges=dict(doc["ranges"], amax=dict(doc["ranges"]["amax"], **{first: "big"}))),
        "amax_empty": dict(doc, ranges=dict(doc["ranges"], amax={})),
        "no_ranges": {k: v for k, v in doc.items() if k != "ranges"},
        "candidates_object": dict(doc, candidates={"0": doc["candidates"][0]}),
        "candidate_quantized_text": dict(doc, candidates=[doc["candidates"][0],
                                                          dict(doc["candidates"][1], quantized="conv1")]),
        "candidate_kept_text": dict(doc, candidates=[doc["candidates"][0], dict(doc["candidates"][1], kept=["a"])]),
        "accuracy_text": dict(doc, candidates=[doc["candidates"][0], dict(doc["candidates"][1],
                                                                          accuracy={"cosine": "high"})]),
        "high_precision_fp8": dict(doc, high_precision="fp8"),
        "fingerprint_other_inputs": dict(doc, fingerprint={"sha256": "0" * 64, "inputs": {"a": [1, 2], "b": [1, 2]}}),
        "fingerprint_other_shape": dict(doc, fingerprint=dict(doc["fingerprint"], inputs={"x": [1, 1, 32, 100]})),
        "fingerprint_damaged": dict(doc, fingerprint={"inputs": "x"}),
        "other_model_ranges": dict({k: v for k, v in doc.items() if k != "fingerprint"},
                                   ranges=dict(doc["ranges"], amax=amax_from_stats(other, "max"))),
        "target_without_a_goal": dict(doc, target={"cosine": None, "snr_db": None, "metric": None}),
        "measured_status_text": dict(doc, measured={"status": "done"}),
        "measurement_rounds_text": dict(doc, measured={"status": "measured", "pick": None, "measurements": [
            {"name": "fp16", "kind": "fp16", "round_ms": ["fast"]}]}),
        "held_back_names_text": dict(doc, held_back={"source": "random split", "held_back": "s0.npy"}),
        "regions_choice_unknown": dict(doc, regions={"base": 0, "patterns": [{
            "name": "residual:x", "kind": "residual", "schemes": [{"scheme": "skip", "choices": {"Add@1": "sideways"}}]}]}),
        "fp16_scales_too_large": dict(doc, high_precision="fp16", options=dict(doc["options"], high_precision="fp16",
                                                                               trt_version="10.16"),
                                      ranges=dict(doc["ranges"], amax=dict(doc["ranges"]["amax"], **{first: 1e8}))),
    }
    (bad / "plans").mkdir()
    for name, d in edits.items():
        (bad / "plans" / f"{name}.json").write_text(json.dumps(d, allow_nan=True))
    (bad / "plans" / "good.json").write_text(json.dumps(doc))


# ----------------------------------------------------------------------------------------------- the CLI table

#: (id, argv with {bad}/{user}/{ws} placeholders, a phrase the message must hold)
CLI_CASES = [
    # another model's ranges
    ("qdq-stats-of-another-model", QDQ + ["--stats", "{bad}/other_stats.npz"], "covers 1 of the 253"),
    ("qdq-cache-of-another-model", QDQ + ["--cache", "{bad}/other.cache"], "covers 1 of the 253"),
    ("qdq-stats-of-other-inputs", QDQ + ["--stats", "{bad}/two_input_stats.npz"], "inputs 'a', 'b', 'c'"),
    # calibrations (calibrate --out): another model's, damaged, foreign, an override for a tensor the model lacks
    ("qdq-calibration-of-another-model", QDQ + ["--calibration", "{bad}/other_cal.npz"], "covers 1 of the 253"),
    ("qdq-calibration-of-other-inputs", QDQ + ["--calibration", "{bad}/two_input_cal.npz"], "is not a calibration of"),
    ("qdq-calibration-damaged", QDQ + ["--calibration", "{bad}/damaged_cal.npz"], "damaged_cal.npz"),
    ("qdq-calibration-of-a-newer-version", QDQ + ["--calibration", "{bad}/newer_cal.npz"], "format version 99"),
    ("qdq-calibration-foreign-npz", QDQ + ["--calibration", "{bad}/weights.npz"], "not a calibration trtwidgets"),
    ("qdq-calibration-override-the-model-lacks", QDQ + ["--calibration", "{bad}/override_elsewhere_cal.npz"],
     "'conv_9_out'"),
    ("qdq-calibration-refit-to-an-unknown-percentile", QDQ + ["--calibration", "{bad}/other_cal.npz",
                                                              "--percentile", "120"], "Percentile 120"),
    ("plan-calibration-of-another-model", ["plan", M, "--data", "demo", "--no-progress", "--calibration",
                                           "{bad}/other_cal.npz", "--out", "{user}/plan"], "covers 1 of the 253"),
    ("plan-calibration-damaged", ["plan", M, "--data", "demo", "--no-progress", "--calibration",
                                  "{bad}/damaged_cal.npz", "--out", "{user}/plan"], "damaged_cal.npz"),
    ("resume-stats-of-another-model", CAL + ["--data", "demo", "--resume", "{bad}/other_stats.npz",
                                             "--stats", "{user}/stats.npz"], "another model"),
    # values that cannot be scales
    ("qdq-stats-beyond-float32", QDQ + ["--stats", "{bad}/beyond_fp32_stats.npz"], "beyond float32"),
    ("qdq-stats-scale-over-fp16", QDQ + ["--stats", "{bad}/fp16_overflow_stats.npz", "--method", "max",
                                         "--high-precision", "fp16", "--trt-version", "10.16"], "float16"),
    ("qdq-cache-scale-over-fp16", QDQ + ["--cache", "{bad}/huge_scale.cache", "--high-precision", "fp16",
                                         "--trt-version", "10.16"], "float16"),
    ("qdq-cache-scale-subnormal", QDQ + ["--cache", "{bad}/tiny_scale.cache"], "smallest normal number"),
    # the tool's own outputs in a data folder
    ("data-holds-only-statistics", CAL + ["--data", "{bad}/data_only_stats", "--cache", "{user}/old.cache"],
     "only the toolkit's own statistics"),
    # images at their real depth
    ("image-float-above-255", CAL + ["--data", "{bad}/img_float_over", "--preprocess", PRE,
                                     "--cache", "{user}/old.cache"], "values from 0 to 2000"),
    ("image-float-negative", CAL + ["--data", "{bad}/img_float_negative", "--preprocess", PRE], "from -10"),
    ("image-float-nan", CAL + ["--data", "{bad}/img_float_nan", "--preprocess", PRE], "NaN or Inf"),
    ("image-int32", CAL + ["--data", "{bad}/img_int32", "--preprocess", PRE, "--stats", "{user}/stats.npz"],
     "32-bit or signed"),
    # bounded memory: refused from headers and shapes, before reading or allocating
    ("npz-declares-a-gigabyte", CAL + ["--data", "{bad}/data_npz_bomb", "--stats", "{user}/stats.npz"],
     "once decompressed"),
    ("npz-header-larger-than-the-file", CAL + ["--data", "{bad}/data_npz_lying_header", "--max-samples", "100000"],
     "could not be read as .npz"),
    ("resize-to-a-shape-the-model-cannot-take", ["calibrate", "{bad}/fixed8.onnx", "--data", "{bad}/data_small8",
                                                 "--no-progress", "--shape", "x:1x1x16384x16384", "--adapt",
                                                 "x:resize", "--cache", "{user}/old.cache"], "fixes it at 1x1x8x8"),
    ("image-resize-the-model-cannot-take", ["calibrate", "{bad}/fixed8.onnx", "--data", "{bad}/img_sixteen",
                                            "--no-progress", "--preprocess",
                                            '{"input": "x", "resize": [16384, 16384], "color": "L"}'],
     "resizes to 16384x16384; input 'x' takes 8x8"),
    ("shape-other-than-the-fixed-batch", ["calibrate", "{bad}/fixed8.onnx", "--data", "{bad}/data_small8",
                                          "--no-progress", "--shape", "x:4x1x8x8"], "Dim 0 is 1 in the model"),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("fingerprint_ws")
    make_shelf(root / "bad")
    return root




def test_the_tables_are_distinct():
    assert len({c[0] for c in CLI_CASES}) == len(CLI_CASES) and len({tuple(c[1]) for c in CLI_CASES}) == len(CLI_CASES)
    assert len({c[0] for c in API_CASES}) == len(API_CASES)
    assert len(CLI_CASES) + len(API_CASES) >= 40


@pytest.mark.parametrize("argv, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in CLI_CASES])
def test_bad_ranges_and_data_on_the_command_line(ws, user, capsys, argv, phrase):
    argv = fill_argv(argv, ws, user)
    before, shelf = fingerprint(user), fingerprint(ws / "bad")
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}\n{err}"
    assert "Traceback" not in err + out
    assert err.startswith(f"trtwidgets {argv[0]}: ") or "\ntrtwidgets " in err, err
    assert phrase in err, err
    assert "Why:" in err and "Fix:" in err, f"the message lacks a why or a fix:\n{err}"
    assert fingerprint(user) == before, "a user file was changed"
    assert fingerprint(ws / "bad") == shelf, "an input file was changed"
    assert not [p for p in user.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"], "a partial file was left"


# ----------------------------------------------------------------------------------------------- the API table


def _export_plan(name, out):
    import trtwidgets as tw

    return lambda ws: tw.export_plan(MODEL, ws / "bad" / "plans" / f"{name}.json", out(ws))


def _out(ws):
    return ws / "user" / "old.qdq.onnx"


def _new_out(ws):
    return ws / "user" / "new.qdq.onnx"


def _export_qdq_stats(name):
    import trtwidgets as tw

    return lambda ws: tw.export_qdq(MODEL, ws / "bad" / name, _new_out(ws))


def _export_with_override(value, tensor="x"):
    def call(ws):
        import trtwidgets as tw
        from trtwidgets.core.calibration.stats import load_stats

        return tw.export_qdq(MODEL, tw.Calibration.fit(load_stats(ws / "user" / "stats.npz"), "max",
                                                       overrides={tensor: value}), _new_out(ws))
    return call


def _plan_with_calibration(name):
    def call(ws):
        import trtwidgets as tw
        from trtwidgets import demo

        return tw.plan(MODEL, list(demo.iter_skimage_inputs(4)), progress=False,
                       calibration=tw.Calibration.load(ws / "bad" / name))
    return call


def _plan_with_stats(name):
    def call(ws):
        import trtwidgets as tw
        from trtwidgets import demo
        from trtwidgets.core.calibration.calibration import Calibration
        from trtwidgets.core.calibration.stats import load_stats

        cal = Calibration.fit(load_stats(ws / "bad" / name), "entropy")
        return tw.plan(MODEL, list(demo.iter_skimage_inputs(4)), calibration=cal, progress=False)
    return call


def _feeds_of(folder, pre=None, **kw):
    def call(ws):
        from trtwidgets.core.calibration.data import CalibrationDataSpec, iter_feeds
        from trtwidgets.core.model.load import load_model

        spec = CalibrationDataSpec(kind="image_dir" if pre else "npy_dir", path=str(ws / "bad" / folder),
                                   preprocessing=pre)
        return list(iter_feeds(spec, load_model(MODEL).summary, **kw))
    return call


def _load_stats(name):
    def call(ws):
        from trtwidgets.core.calibration.stats import load_stats

        return load_stats(ws / "bad" / name)
    return call


def _load_plan(name):
    def call(ws):
        import trtwidgets as tw

        return tw.Plan.load(ws / "bad" / "plans" / f"{name}.json")
    return call


PRE_OBJ = {"input": "x", "resize": [48, 192]}

#: (id, call(ws), a phrase the message must hold)
API_CASES = [
    ("plan-recommended-text", _export_plan("recommended_text", _out), "recommended is '2'"),
    ("plan-recommended-out-of-range", _export_plan("recommended_out_of_range", _out), "an index from 0 to 1"),
    ("plan-recommended-bool", _export_plan("recommended_bool", _out), "recommended is True"),
    ("plan-amax-1e308", _export_plan("amax_huge", _out), "beyond float32"),
    ("plan-amax-nan", _export_plan("amax_nan", _out), "NaN is not a range"),
    ("plan-amax-negative", _export_plan("amax_negative", _out), "is negative"),
    ("plan-amax-rounds-to-zero", _export_plan("amax_tiny", _out), "rounds to 0"),
    ("plan-amax-text", _export_plan("amax_text", _out), "not a number"),
    ("plan-amax-empty", _export_plan("amax_empty", _out), "ranges.amax is {}"),
    ("plan-no-ranges", _export_plan("no_ranges", _out), "ranges is None"),
    ("plan-candidates-object", _export_plan("candidates_object", _out), "candidates is"),
    ("plan-candidate-quantized-text", _export_plan("candidate_quantized_text", _out), "candidates[1].quantized"),
    ("plan-candidate-kept-text", _export_plan("candidate_kept_text", _out), "candidates[1].kept"),
    ("plan-accuracy-text", _export_plan("accuracy_text", _out), "candidates[1].accuracy.cosine"),
    ("plan-high-precision-fp8", _export_plan("high_precision_fp8", _out), "high_precision is 'fp8'"),
    ("plan-of-other-inputs", _export_plan("fingerprint_other_inputs", _out), "inputs 'a', 'b'"),
    ("plan-of-another-shape", _export_plan("fingerprint_other_shape", _out), "dim 1 is 3 in the model"),
    ("plan-fingerprint-damaged", _export_plan("fingerprint_damaged", _out), "damaged model fingerprint"),
    ("plan-with-another-models-ranges", _export_plan("other_model_ranges", _out), "covers 1 of the 253"),
    ("plan-fp16-scale-over-65504", _export_plan("fp16_scales_too_large", _out), "float16"),
    ("plan-amax-nan-fp16-candidate", lambda ws: __import__("trtwidgets").export_plan(
        MODEL, ws / "bad" / "plans" / "amax_nan.json", _out(ws), candidate=0), "NaN is not a range"),
    ("plan-candidate-text", lambda ws: __import__("trtwidgets").export_plan(
        MODEL, ws / "bad" / "plans" / "good.json", _out(ws), candidate="1"), "is not an index"),
    ("load-plan-recommended-text", _load_plan("recommended_text"), "recommended is '2'"),
    ("load-plan-candidates-object", _load_plan("candidates_object"), "candidates is"),
    ("load-plan-target-without-a-goal", _load_plan("target_without_a_goal"), "target: There is no accuracy target"),
    ("load-plan-measured-status", _load_plan("measured_status_text"), "measured.status is 'done'"),
    ("load-plan-measurement-rounds", _load_plan("measurement_rounds_text"), "measured.measurements[0].round_ms"),
    ("load-plan-held-back-names", _load_plan("held_back_names_text"), "held_back.held_back is 's0.npy'"),
    ("load-plan-region-choice", _load_plan("regions_choice_unknown"), "regions.patterns[0].schemes[0].choices"),
    ("export-qdq-stats-of-another-model", _export_qdq_stats("other_stats.npz"), "covers 1 of the 253"),
    ("export-qdq-stats-of-other-inputs", _export_qdq_stats("two_input_stats.npz"), "this model's are 'x'"),
    ("export-qdq-override-nan", _export_with_override(math.nan), "NaN is not a range"),
    ("export-qdq-override-inf", _export_with_override(math.inf), "not a finite range"),
    ("export-qdq-override-negative", _export_with_override(-2.0), "is negative"),
    ("export-qdq-override-the-model-lacks", _export_with_override(2.0, "conv_9_out"), "lacks: 'conv_9_out'"),
    ("export-qdq-calibration-of-another-model", _export_qdq_stats("other_cal.npz"), "covers 1 of the 253"),
    ("export-qdq-calibration-damaged", _export_qdq_stats("damaged_cal.npz"), "damaged_cal.npz"),
    ("export-qdq-calibration-of-a-newer-version", _export_qdq_stats("newer_cal.npz"), "format version 99"),
    ("export-qdq-foreign-npz", _export_qdq_stats("weights.npz"), "not a calibration trtwidgets can read"),
    ("export-qdq-saved-override-the-model-lacks", _export_qdq_stats("override_elsewhere_cal.npz"), "lacks"),
    ("export-qdq-bare-statistics", lambda ws: __import__("trtwidgets").export_qdq(
        MODEL, __import__("trtwidgets.core.calibration.stats", fromlist=["x"]).load_stats(ws / "user" / "stats.npz"),
        _new_out(ws)), "which range method"),
    ("plan-with-a-calibration-of-another-model", _plan_with_calibration("other_cal.npz"), "covers 1 of the 253"),
    ("plan-with-a-calibration-path", lambda ws: __import__("trtwidgets").plan(
        MODEL, __import__("trtwidgets.demo", fromlist=["x"]).sample_inputs(1)[:4],
        calibration=str(ws / "bad" / "other_cal.npz"), progress=False), "takes a Calibration"),
    ("calibration-of-a-mapping", lambda ws: __import__("trtwidgets").Calibration.fit({"x": 1.0}),
     "holds activation statistics"),
    ("calibration-unknown-method", lambda ws: __import__("trtwidgets").Calibration.load(
        ws / "bad" / "other_cal.npz", method="kl"), "Unknown range method 'kl'"),
    ("plan-with-stats-of-another-model", _plan_with_stats("other_stats.npz"), "covers 1 of the 253"),
    ("load-stats-beyond-float32", _load_stats("beyond_fp32_stats.npz"), "beyond float32"),
    ("feeds-image-float-over", _feeds_of("img_float_over", PRE_OBJ), "values from 0 to 2000"),
    ("feeds-image-int32", _feeds_of("img_int32", PRE_OBJ), "32-bit or signed"),
    ("feeds-npz-bomb", _feeds_of("data_npz_bomb"), "once decompressed"),
    ("feeds-only-statistics", _feeds_of("data_only_stats"), "only the toolkit's own statistics"),
]


@pytest.mark.parametrize("call, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in API_CASES])
def test_bad_ranges_and_data_through_the_api(ws, user, call, phrase):
    before, shelf = fingerprint(user), fingerprint(ws / "bad")
    with pytest.raises(UserError) as info:
        call(ws)
    err = info.value
    assert err.what and err.why and err.fix, err.message
    assert phrase in err.message, err.message
    assert fingerprint(user) == before, "a user file was changed"
    assert fingerprint(ws / "bad") == shelf, "an input file was changed"
    assert not (user / "new.qdq.onnx").exists()


# ----------------------------------------------------------------------------------------------- happy paths


def test_the_models_own_statistics_cache_and_plan_still_export(ws, tmp_path, capsys):
    import trtwidgets as tw

    user = tmp_path / "u"
    make_user_files(user)
    from trtwidgets.core.calibration.calibration import Calibration

    Calibration.load(user / "stats.npz", method="max").save(tmp_path / "cal.npz")
    for src in (["--stats", str(user / "stats.npz")], ["--cache", str(user / "old.cache")],
                ["--calibration", str(tmp_path / "cal.npz")]):
        out = tmp_path / "q.onnx"
        rc = main(["export-qdq", M, *src, "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 0 and out.is_file(), err
        assert "covers" not in err and "fingerprint" not in err  # the model's own: no complaint, no note
        out.unlink()
    ex = tw.export_plan(MODEL, ws / "bad" / "plans" / "good.json", tmp_path / "p.onnx")
    assert ex is not None and (tmp_path / "p.onnx").is_file() and ex.report.quantized_layers


def test_statistics_record_their_model_and_older_files_still_load(tmp_path):
    from trtwidgets.core.calibration.fingerprint import check_stats_fit
    from trtwidgets.core.calibration.stats import load_stats, save_stats
    from trtwidgets.core.model.load import load_model
    from trtwidgets import demo

    stats = _stats_of(MODEL, demo.sample_inputs(1)[:2], tmp_path / "s.npz")
    assert dict(stats.model_inputs) == {"x": ("?", 3, "?", "?")}
    again = load_stats(tmp_path / "s.npz")
    assert again.model_inputs == stats.model_inputs
    loaded = load_model(MODEL)
    assert check_stats_fit(loaded, again) == ()
    # A file without the fingerprint (older) of the same model loads without a note (its SHA-256 matches) ...
    old = load_stats(FIXTURES / "calib" / "cls_demo_stats.npz")
    assert old.model_inputs == {} and check_stats_fit(loaded, old) == ()
    # ... and one of a copy re-saved elsewhere is judged by its tensor names, with a note saying so.
    import dataclasses

    save_stats(dataclasses.replace(old, model_sha256="f" * 64), tmp_path / "old.npz")
    notes = check_stats_fit(loaded, load_stats(tmp_path / "old.npz"), "old.npz")
    assert len(notes) == 1 and "no model fingerprint" in notes[0] and "253 of 253" in notes[0]
    # A fingerprint with the same inputs but another file's SHA-256 (the graph re-saved): a note, not an error.
    save_stats(dataclasses.replace(again, model_sha256="e" * 64), tmp_path / "resaved.npz")
    notes = check_stats_fit(loaded, load_stats(tmp_path / "resaved.npz"), "resaved.npz")
    assert len(notes) == 1 and "another ONNX file" in notes[0]
    # The model as a proto (no file, no SHA-256): judged by inputs and names alone, with nothing to note.
    from trtwidgets.core.model.load import as_loaded

    assert check_stats_fit(as_loaded(onnx.load(str(MODEL))), again) == ()


def test_statistics_written_into_the_data_folder_are_skipped_with_a_note(tmp_path, capsys):
    from trtwidgets import demo

    data = tmp_path / "D"
    data.mkdir()
    for i, feed in enumerate(demo.sample_inputs(1)[:3]):
        np.save(data / f"s{i}.npy", feed["x"])
    assert main(CAL + ["--data", str(data), "--stats", str(data / "stats.npz")]) == 0
    capsys.readouterr()
    rc = main(CAL + ["--data", str(data), "--stats", str(data / "stats.npz"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["samples"] == 3
    assert "stats.npz is trtwidgets statistics" in err and "skipped" in err


def test_a_16_bit_png_is_scaled_not_clipped_and_a_float_tiff_in_range_is_used(ws, capsys):
    rc = main(CAL + ["--data", str(ws / "bad" / "img_sixteen"), "--preprocess", PRE, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    # 30000 of 65535 is 0.458 of white: clipped to 8 bits it read as 1.0.
    assert json.loads(out)["tensors"]["x"]["max"] == pytest.approx(30000 / 65535, abs=1e-3)
    assert "16-bit images are scaled to the 8-bit range" in err
    rc = main(CAL + ["--data", str(ws / "bad" / "img_float_ok"), "--preprocess", PRE, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["tensors"]["x"]["max"] == pytest.approx(200 / 255, abs=1e-3)
    assert "float images are used as they are" in err


def test_max_samples_reads_only_the_rows_it_uses(tmp_path, capsys):
    """Rows past --max-samples are never read: a NaN there (or the rest of a 4 GB file) costs nothing."""
    data = tmp_path / "D"
    data.mkdir()
    rows = np.random.default_rng(0).random((6, 3, 48, 192), dtype=np.float32)
    rows[3:] = np.nan
    np.save(data / "a.npy", rows)
    np.savez_compressed(data / "b.npz", x=rows)
    assert main(CAL + ["--data", str(data), "--max-samples", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 2
    (data / "a.npy").unlink()
    assert main(CAL + ["--data", str(data), "--max-samples", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 3
    assert main(CAL + ["--data", str(data), "--max-samples", "4"]) == 2
    assert "NaN" in capsys.readouterr().err


def test_a_npz_is_read_from_its_headers_within_the_limit(tmp_path):
    from trtwidgets.core.calibration.npz_reader import MAX_ARRAY_BYTES, read_npz

    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    f = np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    np.savez_compressed(tmp_path / "a.npz", x=x, f=f, s=np.float32(3))
    whole = read_npz(tmp_path / "a.npz")
    assert np.array_equal(whole["x"], x) and np.array_equal(whole["f"], f) and whole["s"] == 3
    two = read_npz(tmp_path / "a.npz", rows=2)
    assert np.array_equal(two["x"], x[:2]) and np.array_equal(two["f"], f)
    assert MAX_ARRAY_BYTES == 1 << 30


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, path + (i,))
    yield path


def _replaced(doc, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {k: (_replaced(v, rest, value) if k == head else v) for k, v in doc.items()}
    return [(_replaced(v, rest, value) if i == head else v) for i, v in enumerate(doc)]


def test_a_plan_json_edited_anywhere_exports_or_says_why(ws, tmp_path):
    """Every field of a plan.json replaced by a value of another type: the export succeeds or raises a UserError."""
    import random

    import trtwidgets as tw

    doc = json.loads((ws / "bad" / "plans" / "good.json").read_text())
    paths = [p for p in _leaves(doc) if not (len(p) >= 3 and p[:2] == ("ranges", "amax") and p[2] != next(
        iter(doc["ranges"]["amax"])))]
    rng = random.Random(22)
    values = [None, True, -1, 2.5, math.nan, "2", "", [], [1, "a"], {}, {"a": None}, 10 ** 30]
    for path in paths:
        edited = _replaced(doc, path, rng.choice(values))
        try:
            tw.export_plan(MODEL, tw.Plan.from_dict(edited), candidate=0)
        except UserError as err:
            assert err.what and err.why and err.fix, (path, err.message)
