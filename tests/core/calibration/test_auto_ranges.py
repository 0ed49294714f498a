"""The range method auto: per tensor, by role and statistics, with its reason; kept in the saved Calibration."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.core.qdq_models import random_feeds, transformer_block
from trtwidgets.core.calibration.auto_ranges import (CLIP_NOTE_SHARE, MIN_VALUES, RULE_VERSION, choose_range,
                                                     clipping_notes)
from trtwidgets.core.calibration.calibration import Calibration
from trtwidgets.core.calibration.collect import collect_stats
from trtwidgets.core.calibration.ranges import RangeResult
from trtwidgets.core.calibration.stats import save_stats
from trtwidgets.core.common.errors import StatsError


@pytest.fixture(scope="module")
def block():
    return transformer_block()


@pytest.fixture(scope="module")
def block_stats(block):
    # 60 samples of [2, 5, 8]: 4,800 values per full-size tensor, above MIN_VALUES; the LayerNorm's row statistics
    # (mean, variance: 600 values) below it.
    return collect_stats(block, random_feeds(block, n=60, seed=3), progress=False)


def _r(method, amax, sqnr=30.0, clipped=0.0):
    return RangeResult(method, amax, 1e-3, sqnr, clipped)


def test_the_rule_by_role_count_and_default():
    per = {"max": _r("max", 4.0), "entropy": _r("entropy", 1.0, clipped=0.02), "percentile": _r("percentile", 3.0),
           "mse": _r("mse", 3.5)}
    assert choose_range(per, "softmax_output").method == "max"
    assert choose_range(per, "attention_logits").method == "max"
    assert choose_range(per, "layernorm_internal").method == "max"
    assert choose_range(per, "layernorm_output").method == "mse"
    assert choose_range(per, "gelu_output").method == "mse"
    small = choose_range(per, None, count=MIN_VALUES - 1)
    assert small.method == "max" and str(MIN_VALUES - 1) in small.reason
    rest = choose_range(per, None, count=MIN_VALUES, percentile=99.9)
    assert rest.method == "percentile" and "99.9" in rest.reason
    # A role's method without a usable range falls to the rule for the rest.
    assert choose_range(dict(per, max=_r("max", 0.0)), "softmax_output").method == "percentile"


def test_auto_is_the_default_and_chooses_by_the_graph(block, block_stats):
    cal = Calibration.fit(block_stats, model=block)
    assert cal.method == "auto" and cal.roles["out"] == "softmax_output"
    chosen = {t: c.method for t, c in cal.choices.items()}
    assert chosen["out"] == "max" and chosen["ln_std"] == "max" and chosen["ge_erf"] == "max"
    assert chosen["ln_out"] == "mse" and chosen["ge_out"] == "mse"
    assert chosen["x"] == "percentile" and chosen["h0"] == "percentile"  # a LayerNorm's input: by the statistics
    assert chosen["ln_var"] == "max"  # a role first; it has 600 values too
    assert all(c.reason for c in cal.choices.values())
    ranges = cal.ranges
    assert cal.amax == {t: ranges[t][m].amax for t, m in chosen.items() if ranges[t][m].amax > 0}
    # The repr and the description count the methods; every other method chooses nothing per tensor.
    counts = {m: list(chosen.values()).count(m) for m in set(chosen.values())}
    assert all(f"{m} {n}" in repr(cal) and f"{m} {n}" in cal.describe() for m, n in counts.items())
    assert repr(cal).startswith("Calibration(auto: ") and len(repr(cal)) < 2000
    assert cal.refit(method="max").choices == {} and cal.refit(method="max").amax == {
        t: r["max"].amax for t, r in ranges.items() if r["max"].amax > 0}


def test_without_the_graph_the_export_reads_the_roles(block, block_stats, tmp_path):
    save_stats(block_stats, tmp_path / "stats.npz")
    cal = Calibration.load(tmp_path / "stats.npz")
    assert cal.method == "auto" and cal.roles is None and cal.choices["out"].method == "percentile"
    fitted = cal.check_fits(block)
    assert fitted.roles is not None and fitted.choices["out"].method == "max"
    assert fitted.amax["out"] == pytest.approx(block_stats.tensors["out"].absmax)


def _rewrite_member(path, edit):
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    raw = np.load(io.BytesIO(members["calibration.npy"]))
    doc = edit(json.loads(raw.tobytes().decode("utf-8")))
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(json.dumps(doc).encode("utf-8"), dtype=np.uint8))
    members["calibration.npy"] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)


def test_the_saved_choices_are_what_a_loaded_calibration_exports(block, block_stats, tmp_path):
    cal = Calibration.fit(block_stats, model=block, data="sixty normal samples")
    path = cal.save(tmp_path / "cal.npz")
    again = Calibration.load(path)
    assert again.choices == cal.choices and again.amax == cal.amax and dict(again.roles) == dict(cal.roles)
    assert repr(again) == repr(cal) and again.with_override("x", 2.5).choices == cal.choices

    # A later rule must not change what a file exports: the saved choice wins over the rule's.
    def to_entropy(doc):
        assert doc["version"] == 2 and doc["rule_version"] == RULE_VERSION
        doc["choices"]["x"] = ["entropy", "chosen by an earlier rule"]
        return doc

    _rewrite_member(path, to_entropy)
    edited = Calibration.load(path)
    assert edited.choices["x"].reason == "chosen by an earlier rule"
    assert edited.amax["x"] == cal.ranges["x"]["entropy"].amax != cal.amax["x"]
    # Another percentile chooses again.
    assert edited.refit(percentile=99.9).choices["x"].method == "percentile"


@pytest.mark.parametrize("choices", [{"x": ["kl", "?"]}, {"x": "max"}, ["x"], {"x": ["max"]}])
def test_damaged_choices_are_refused(block, block_stats, tmp_path, choices):
    path = Calibration.fit(block_stats, model=block).save(tmp_path / "cal.npz")
    _rewrite_member(path, lambda doc: dict(doc, choices=choices))
    with pytest.raises(StatsError, match="damaged calibration"):
        Calibration.load(path)


def test_a_version_1_calibration_is_still_read(block, block_stats, tmp_path):
    path = Calibration.fit(block_stats, "percentile", model=block).save(tmp_path / "cal.npz")
    _rewrite_member(path, lambda doc: {k: v for k, v in dict(doc, version=1).items() if k != "roles"})
    cal = Calibration.load(path)
    assert cal.method == "percentile" and cal.roles is None


def _scaled(x_values):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4096])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"], name="scale")], "g", [x], [y],
                              [helper.make_tensor("k", TensorProto.FLOAT, [], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model, collect_stats(model, [{"x": v[None]} for v in x_values], progress=False)


def test_a_range_that_clips_many_values_is_named_with_what_to_do():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(4, 4096)).astype(np.float32)
    values[:, :10] = rng.choice([-60.0, 60.0], size=(4, 10))  # 0.24% far out: what entropy cuts off
    model, stats = _scaled(values)
    entropy = Calibration.fit(stats, "entropy")
    assert entropy.clipped["y"] == pytest.approx(40 / values.size, rel=0.05) and 40 / values.size > CLIP_NOTE_SHARE
    # mse's range ends a little below 60: those values round to the top code all the same, nothing is named.
    assert 59 < Calibration.fit(stats, "mse").amax["y"] < 60 and Calibration.fit(stats, "mse").clipped == {}
    note = entropy.clipping_notes()["y"]
    assert note.startswith("entropy range clips") and "max range" in note and "high precision" in note
    assert Calibration.fit(stats, "max").clipped == {}
    # An override that clips is named too, with its own fix.
    low = Calibration.fit(stats, "max").with_override("y", 1.0)
    assert low.clipped["y"] > 0.1 and "raise its override" in low.clipping_notes()["y"]
    assert clipping_notes({"t": CLIP_NOTE_SHARE / 2}, {"t": "entropy"}) == {}
