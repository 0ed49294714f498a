"""``scripts/gpu_peer_yolo.py`` on the CPU (issue 44): levels and names, the same-graph report, the check, the cache.

No GPU here: the engines' times are made up, a committed real build folder stands in for a cached engine, and a
build the budget does not allow is never started (so TensorRT is never asked for).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.conftest import ROOT, load_file_module
from trtwidgets.core.accuracy.target import Target
from trtwidgets.core.accuracy.task_metrics import make_task_metric
from trtwidgets.core.model.batch_axis import BatchAxes
from trtwidgets.core.plan.engine_check import EngineCheck


@pytest.fixture(scope="module")
def script():
    mod = load_file_module(ROOT / "scripts" / "gpu_peer_yolo.py", "gpu_peer_yolo")
    return mod


FLOATS = [("fp16_rw", "rw.onnx")]
QDQS = [("toolkit", "tk.onnx"), ("modelopt", "mo.onnx"), ("modelopt_rw", "mo_rw.onnx")]
PAIRS = [("toolkit", "fp16_rw"), ("modelopt_rw", "fp16_rw")]


def test_levels_are_distinct_builder_levels_in_the_order_given(script):
    assert script.parse_levels("3,1") == [3, 1] and script.parse_levels("1") == [1]
    for bad in ("1,1", "7", ""):
        with pytest.raises(ValueError):
            script.parse_levels(bad)


def test_every_model_is_planned_at_every_level_level_by_level_with_its_graph(script):
    plan = script.engine_plan("f.onnx", FLOATS, QDQS, [3, 1], PAIRS)
    assert [p["name"] for p in plan] == [f"{b}@L{lv}" for lv in (3, 1)
                                         for b in ("fp16", "fp16_rw", "toolkit", "modelopt", "modelopt_rw")]
    graph = {p["base"]: p["graph"] for p in plan}
    assert graph == {"fp16": "fp16", "fp16_rw": "fp16_rw", "toolkit": "fp16_rw", "modelopt": "fp16",
                     "modelopt_rw": "fp16_rw"}
    one = script.engine_plan("f.onnx", [], [("toolkit", "tk.onnx")], [1], [])
    assert [p["name"] for p in one] == ["fp16", "toolkit"]  # one level: the names of before
    with pytest.raises(ValueError, match="no float model"):
        script.engine_plan("f.onnx", FLOATS, QDQS, [1], [("toolkit", "fp16_nope")])
    with pytest.raises(ValueError, match="no --qdq model"):
        script.engine_plan("f.onnx", FLOATS, QDQS, [1], [("nope", "fp16_rw")])
    with pytest.raises(ValueError):
        script.parse_named(["toolkit"], "--qdq")


def _engines(plan):
    """Made-up measurements: at each level the rewrites make FP16 0.85x, the pick wins 9 of 9 rounds against
    ModelOpt on the rewritten graph at level 3 and loses 9 of 9 at level 1."""
    base_ms = {"fp16": 1.36, "fp16_rw": 1.156, "toolkit": 0.96, "modelopt": 1.16, "modelopt_rw": 0.97}
    reformats = {"fp16": 42, "fp16_rw": 33, "toolkit": 31, "modelopt": 38, "modelopt_rw": 31}
    out = {}
    for p in plan:
        ms = base_ms[p["base"]] * (0.9 if p["level"] == 3 else 1.0)
        if p["base"] == "toolkit" and p["level"] == 1:
            ms = 1.0  # 0.865x the FP16 of its graph, slower than ModelOpt's 0.97
        rounds = [ms + 0.001 * (i % 3) for i in range(9)]
        out[p["name"]] = {"name": p["name"], "round_ms": rounds, "median_ms": float(np.median(rounds)),
                          "summary": {"reformats": reformats[p["base"]]}, "build_seconds": 100.0 * p["level"],
                          "accuracy": {"metric": 0.97 if p["kind"] == "qdq" else 1.0, "cosine": 0.999}}
    return out


def test_each_qdq_engine_is_judged_against_the_fp16_of_its_own_graph_and_paired_with_its_peer(script):
    plan = script.engine_plan("f.onnx", FLOATS, QDQS, [3, 1], PAIRS)
    rep = script.same_graph_report(_engines(plan), plan, "toolkit")
    l3 = rep["levels"]["3"]
    assert l3["rows"]["fp16_rw"]["x_fp16_given"] == pytest.approx(1.156 / 1.36, abs=1e-3)  # the rewrites' own gain
    tk = l3["rows"]["toolkit"]
    assert tk["same_graph_fp16"] == "fp16_rw@L3"
    assert tk["x_fp16_same_graph"] == pytest.approx(0.96 / 1.156, abs=1e-3)
    assert tk["x_fp16_given"] == pytest.approx(0.96 / 1.36, abs=1e-3)
    assert l3["rows"]["modelopt"]["x_fp16_same_graph"] == pytest.approx(1.16 / 1.36, abs=1e-3)  # given vs given
    pick = l3["pick"]
    assert pick["meets_ratio"] and pick["meets_metric"]
    assert set(pick["peers_same_graph"]) == {"modelopt_rw"}  # ModelOpt of the given graph is not its peer
    peer = pick["peers_same_graph"]["modelopt_rw"]
    assert peer["pick_faster"]["won"] == 9 and peer["pick_faster"]["faster"] and peer["not_slower"]
    assert peer["reformats"] == [31, 31] and peer["reformats_ok"]
    p1 = rep["levels"]["1"]["pick"]
    assert not p1["peers_same_graph"]["modelopt_rw"]["not_slower"]  # lost every pair at level 1
    assert not p1["meets_ratio"]
    across = rep["across_levels"]
    assert across["against_level"] == 3
    assert across["models"]["fp16"]["1"]["x_time"] == pytest.approx(1 / 0.9, abs=1e-3)
    assert across["models"]["toolkit"]["1"]["build_seconds"] == 100.0
    text = "\n".join(script.report_lines(rep))
    assert "x FP16 same graph (fp16_rw@L3) 0.83" in text and "SLOWER" in text and "== across levels" in text


def test_an_engine_without_a_time_leaves_nan_not_a_crash(script):
    plan = script.engine_plan("f.onnx", FLOATS, QDQS, [3], PAIRS)
    engines = _engines(plan)
    engines["modelopt_rw"] = {"error": "not built: --build-budget 500 s was spent"}
    rep = script.same_graph_report(engines, plan, "toolkit")
    peer = rep["levels"]["3"]["pick"]["peers_same_graph"]["modelopt_rw"]
    assert np.isnan(peer["pick_vs_peer_ms"]) and peer["pick_faster"]["won"] == 0 and not peer["reformats_ok"]
    assert "not built" in "\n".join(script.report_lines(rep))


def _check_file(tmp_path, n=10):
    rng = np.random.default_rng(0)
    ref = np.zeros((n, 6, 40), np.float32)
    ref[:, :4] = rng.uniform(10, 100, (n, 4, 40))
    ref[:, 4:] = 0.01
    ref[:, 4, ::7] = 0.9
    feeds = [{"images": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]
    made = make_task_metric("detection", {"output0": ref})
    check = EngineCheck.of_plan(feeds, {"output0": ref}, BatchAxes({"images": 0}, {"output0": 0}),
                                Target.for_metric("detection"), float(made.fn({"output0": ref})))
    return check.save(tmp_path / "check.npz"), ref


def test_the_check_file_loads_with_the_family_metric_and_its_first_samples_apart(script, tmp_path):
    path, ref = _check_file(tmp_path)
    check, sub = script.load_check(str(path), "detection", 4)
    assert len(check.feeds) == 10 and len(sub.feeds) == 4 and sub.outputs["output0"].shape[0] == 4
    assert check.verdict({"output0": ref}).meets and sub.verdict({"output0": ref[:4]}).meets
    worse = ref.copy()
    worse[:, 4] = 0.01  # every detection gone: F1 0
    v = check.verdict({"output0": worse}).to_dict()
    assert v["meets"] is False and v["metric"] == 0.0
    assert script.load_check(str(path), "detection", 0)[1] is None
    assert check.target.metric_drop == pytest.approx(0.05)  # the issue's F1 >= 0.95 against FP32's 1.0


def _tiny_model(path):
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 3, 8, 8])
    g = helper.make_graph([helper.make_node("Relu", ["images"], ["output0"], name="relu")], "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def test_a_cached_engine_keeps_its_build_seconds_and_no_build_starts_past_the_budget(script, tmp_path):
    from trtwidgets.trt.measure import MeasureJob
    from trtwidgets.trt.measure_builds import build_specs

    model = _tiny_model(tmp_path / "f.onnx")
    cache = tmp_path / "cache"
    key_of, _ = build_specs([MeasureJob("fp16@L3", "fp16", model)], cache, {}, 3, {})
    folder = cache / key_of["fp16@L3"]
    shutil.copytree(ROOT / "tests" / "fixtures" / "trt86" / "cls_static_qdq_int8", folder)
    (folder / "engine.plan").write_bytes(b"stand-in")
    out = tmp_path / "rec.json"
    args = ["--fp16", model, "--opt-levels", "3,1", "--cache-dir", str(cache), "--out", str(out),
            "--build-budget", "1e-9", "--build-only"]
    assert script.main(args) == 0
    doc = json.loads(out.read_text())
    assert doc["levels"] == [3, 1] and [p["name"] for p in doc["plan"]] == ["fp16@L3", "fp16@L1"]
    l3, l1 = doc["engines"]["fp16@L3"], doc["engines"]["fp16@L1"]
    assert l3["cached"] and l3["build_seconds"] == 87.9 and not l3["error"] and l3["summary"]["layers"] > 0
    assert "not built: --build-budget" in l1["error"] and "build_seconds" not in l1
    assert "round_ms" not in l3  # --build-only: the run stopped after the builds, all written


def test_packed_models_store_a_shared_weight_once_and_unpack_byte_for_byte(tmp_path):
    pack = load_file_module(ROOT / "scripts" / "onnx_pack.py", "onnx_pack")
    w = onnx.numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "w")
    paths = []
    for name, op in (("a", "MatMul"), ("b", "Add")):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])
        g = helper.make_graph([helper.make_node(op, ["x", "w"], ["y"], name=op)], name, [x], [y], [w])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / f"{name}.onnx"))
        paths.append(tmp_path / f"{name}.onnx")
    man = pack.pack(tmp_path / "packed", paths)
    assert man["weights_bytes"] == 4096 * 4 and all(m["external_tensors"] == 1 for m in man["models"].values())
    assert pack.unpack(tmp_path / "packed", tmp_path / "out") == {"a": True, "b": True}
    for p in paths:
        assert (tmp_path / "out" / p.name).read_bytes() == p.read_bytes()
