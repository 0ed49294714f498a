"""The Calibration as an artifact: one file that round-trips, one amax, checked once against its model (issue 30)."""

from __future__ import annotations

import json
import math
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.calibration.calibration import Calibration
from trtwidgets.core.calibration.collect import collect_stats
from trtwidgets.core.calibration.npz_reader import tool_output_kind
from trtwidgets.core.calibration.stats import load_stats, save_stats
from trtwidgets.core.common.errors import StatsError
from trtwidgets.core.common.notes import notes_to
from trtwidgets.core.model.load import as_loaded
from tests.plots.synthetic_stats import activation_stats, tensor_stats


def _conv(input_name="x", shape=(1, 3, 8, 8), seed=0):
    w = numpy_helper.from_array(np.random.default_rng(seed).normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", [input_name, "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["y"], ["z"], name="relu")], "g",
                              [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [w])
    return as_loaded(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


@pytest.fixture(scope="module")
def conv_cal():
    model = _conv()
    feeds = [{"x": np.random.default_rng(i).normal(size=(1, 3, 8, 8)).astype(np.float32)} for i in range(4)]
    return Calibration.fit(collect_stats(model, feeds, progress=False), "max", data="four normal samples")


def test_a_saved_calibration_round_trips_exactly(conv_cal, tmp_path):
    cal = conv_cal.refit(method="percentile", percentile=99.5, overrides={"y": 0.75, "z": 1.0 / 3.0})
    again = Calibration.load(cal.save(tmp_path / "cal.npz"))
    assert (again.method, again.percentile, dict(again.overrides), again.fingerprint, again.data) == \
        ("percentile", 99.5, {"y": 0.75, "z": 1.0 / 3.0}, cal.fingerprint, "four normal samples")
    assert again.fingerprint is not None and again.fingerprint.inputs == (("x", (1, 3, 8, 8)),)
    assert again.amax == cal.amax and list(again.stats.tensors) == list(cal.stats.tensors)
    assert all(np.array_equal(again.stats[n].hist, cal.stats[n].hist) for n in cal.stats.tensors)
    assert again.stats.sample_hashes == cal.stats.sample_hashes and again.stats.samples == 4
    # The file is statistics plus one member: statistics readers read it, a sample folder skips it.
    assert load_stats(tmp_path / "cal.npz").samples == 4
    assert tool_output_kind(tmp_path / "cal.npz") == "calibration"


def test_a_statistics_file_of_today_is_read_as_a_calibration_with_a_note(conv_cal, tmp_path):
    save_stats(conv_cal.stats, tmp_path / "stats.npz")
    said = []
    with notes_to(said.append):
        cal = Calibration.load(tmp_path / "stats.npz")
        as_max = Calibration.load(tmp_path / "stats.npz", method="max")
    assert cal.method == "auto" and cal.overrides == {} and cal.fingerprint == conv_cal.fingerprint
    assert as_max.amax == conv_cal.amax
    # Said once: where the method was given, the caller knows what is exported.
    assert len(said) == 1 and "without a calibration's settings" in said[0] and "auto ranges" in said[0]
    assert cal.origin == str(tmp_path / "stats.npz")


def test_the_exported_amax_is_one_derivation():
    stats = activation_stats(3)
    zero = tensor_stats("zero", np.zeros(100))
    stats = type(stats)(tensors=dict(stats.tensors, zero=zero), samples=stats.samples, model_sha256="")
    cal = Calibration.fit(stats, "entropy", overrides={"layer001/out": 2.5, "no_statistics": 4.0})
    amax = cal.amax
    # An all-zero tensor has no scale; every override holds, also one for a tensor without statistics.
    assert "zero" not in amax and amax["layer001/out"] == 2.5 and amax["no_statistics"] == 4.0
    assert amax["layer000/out"] == pytest.approx(cal.ranges["layer000/out"]["entropy"].amax)
    assert all(math.isfinite(v) and v > 0 for v in amax.values())
    # Another method keeps the overrides; the value itself is a copy, the calibration unchanged.
    other = cal.refit(method="max").amax
    assert other["no_statistics"] == 4.0 and other["layer000/out"] == pytest.approx(stats["layer000/out"].absmax)
    amax["layer000/out"] = -1.0
    assert cal.amax["layer000/out"] > 0


def test_overrides_are_new_values_and_bad_ones_are_refused():
    cal = Calibration.fit(activation_stats(2), "max")
    one = cal.with_override("layer000/out", "2.5")
    assert dict(one.overrides) == {"layer000/out": 2.5} and dict(cal.overrides) == {}
    assert dict(one.without_override("layer000/out").overrides) == {} and one.without_override("zzz") == one
    assert one.ranges is cal.ranges  # computed once for both: the statistics are the same
    for bad in (-1.0, 0.0, float("nan"), float("inf"), "x", True, 1e300):
        with pytest.raises(StatsError) as err:
            cal.with_override("layer000/out", bad)
        assert "'layer000/out'" in err.value.what and err.value.fix
    with pytest.raises(TypeError):
        cal.overrides["layer000/out"] = 1.0  # frozen: the value cannot change behind the user's back


def test_another_percentile_recomputes_only_the_percentile_ranges():
    cal = Calibration.fit(activation_stats(2), "percentile", 99.99)
    entropy = {n: per["entropy"] for n, per in cal.ranges.items()}
    other = cal.refit(percentile=90.0)
    assert all(other.ranges[n]["entropy"] is r for n, r in entropy.items())
    assert all(other.ranges[n]["percentile"].amax < cal.ranges[n]["percentile"].amax for n in entropy)
    assert other.amax == {n: other.ranges[n]["percentile"].amax for n in entropy}


def test_the_repr_is_one_short_line(conv_cal):
    text = repr(conv_cal.refit(overrides={"y": 1.0}))
    assert "\n" not in text and len(text) < 2000
    assert "max" in text and "3 tensors" in text and "4 samples" in text and "1 overrides" in text


def test_another_models_calibration_is_refused_once_checked(conv_cal):
    assert conv_cal.check_fits(_conv()) is conv_cal
    with pytest.raises(StatsError) as err:
        conv_cal.check_fits(_conv(input_name="image"), "cal.npz")
    assert "cal.npz is not a calibration of" in err.value.what and "'image'" in err.value.why
    assert "--out" in err.value.fix


def test_an_override_for_a_tensor_the_model_lacks_is_refused(conv_cal):
    with pytest.raises(StatsError) as err:
        conv_cal.with_override("conv_9_out", 2.0).check_fits(_conv())
    assert "conv_9_out" in err.value.what and "lacks" in err.value.what and "without_override" in err.value.fix


@pytest.mark.parametrize("doc, phrase", [
    ({"format": "something-else", "version": 1}, "not a trtwidgets calibration"),
    ({"format": "trtwidgets-calibration", "version": 99, "method": "max"}, "format version 99"),
    ({"format": "trtwidgets-calibration", "version": 1, "method": "kl", "percentile": 99.9}, "Unknown range method"),
    ({"format": "trtwidgets-calibration", "version": 1, "method": "max", "percentile": 99.9,
      "overrides": {"y": -2}}, "cannot override the amax of 'y'"),
    ({"format": "trtwidgets-calibration", "version": 1, "method": "max", "percentile": 99.9,
      "overrides": ["y"]}, "damaged calibration"),
    ({"format": "trtwidgets-calibration", "version": 1, "method": "max", "percentile": 99.9,
      "fingerprint": {"sha256": 3}}, "damaged model fingerprint"),
])
def test_a_damaged_calibration_member_is_a_clear_error(conv_cal, tmp_path, doc, phrase):
    path = conv_cal.save(tmp_path / "cal.npz")
    _replace_member(path, "calibration.npy", json.dumps(doc).encode())
    with pytest.raises(StatsError) as err:
        Calibration.load(path)
    assert phrase in err.value.message and str(path) in err.value.message


def test_a_foreign_or_missing_file_is_a_clear_error(tmp_path):
    np.savez(tmp_path / "weights.npz", w=np.ones(3))
    with pytest.raises(StatsError, match="is not a calibration trtwidgets can read"):
        Calibration.load(tmp_path / "weights.npz")
    with pytest.raises(StatsError, match="No calibration at"):
        Calibration.load(tmp_path / "none.npz")


def _replace_member(path, member: str, text: bytes) -> None:
    """Rewrite one member of an .npz as a uint8 array holding ``text`` (a hand-edited file)."""
    import io

    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(text, np.uint8))
    members[member] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
