"""core.common.npz_files: every .npz/.npy the toolkit reads is read from checked headers (issue 32).

A header claiming 10^11 floats was a MemoryError traceback in held_back.npz; a 3 GB sparse file was read whole.
Each reader of the package (statistics, held-back check, reference, labels, samples) refuses such a file with a
clear error, before reading its data.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from trtwidgets.core.common import npz_files
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.common.npz_files import open_npz, read_npy

HUGE = (10 ** 11,)


def _member(z: zipfile.ZipFile, name: str, shape, dtype="<f4", data: bytes = b"\0" * 12) -> None:
    with z.open(name, "w") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})
        f.write(data)


def _lying_npz(path, name="x.npy", shape=HUGE, others=None):
    """An .npz whose member ``name`` claims ``shape`` and holds 3 floats; ``others`` are real arrays beside it."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for key, arr in (others or {}).items():
            with z.open(f"{key}.npy", "w") as f:
                np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
        _member(z, name, shape)
    return path


def test_a_header_claiming_more_than_the_file_holds_is_refused_unread(tmp_path):
    path = _lying_npz(tmp_path / "a.npz", others={"ok": np.arange(3)})
    with open_npz(path) as z:
        assert z.files == ["ok", "x"] and "x" in z and np.array_equal(z["ok"], np.arange(3))
        with pytest.raises(ValueError, match="declares 400000000000 bytes"):
            z["x"]
        with pytest.raises(KeyError):
            z["nothing"]


def test_a_npy_header_claiming_more_than_the_file_holds_is_refused(tmp_path):
    path = tmp_path / "a.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": HUGE})
        f.write(b"\0" * 12)
    with pytest.raises(ValueError, match="declares"):
        read_npy(path)
    np.save(tmp_path / "b.npy", np.arange(6, dtype=np.int16).reshape(2, 3))
    assert read_npy(tmp_path / "b.npy").tolist() == [[0, 1, 2], [3, 4, 5]]


def test_objects_are_refused_from_the_header(tmp_path):
    np.savez(tmp_path / "o.npz", o=np.array([{"a": 1}], dtype=object))
    with open_npz(tmp_path / "o.npz") as z, pytest.raises(ValueError, match="Python objects"):
        z["o"]


def test_arrays_over_the_limits_are_refused_before_they_are_read(tmp_path, monkeypatch):
    # The limits are settings of the reader; small ones here stand for the gigabytes of a real file.
    monkeypatch.setattr(npz_files, "MAX_ARRAY_BYTES", 1000)
    monkeypatch.setattr(npz_files, "MAX_TOTAL_BYTES", 3000)
    np.savez(tmp_path / "big.npz", a=np.zeros(400, np.float32))
    with open_npz(tmp_path / "big.npz") as z, pytest.raises(ValueError, match="more than"):
        z["a"]
    np.savez(tmp_path / "many.npz", **{f"a{i}": np.zeros(200, np.float32) for i in range(6)})
    with open_npz(tmp_path / "many.npz") as z:
        for i in range(3):
            z[f"a{i}"]
        with pytest.raises(ValueError, match="together"):
            z["a5"]


def test_a_bytes_source_reads_like_a_file(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.float32(2.5), s=np.array("text"))
    with open_npz((tmp_path / "a.npz").read_bytes()) as z:
        assert float(z["x"]) == 2.5 and str(z["s"]) == "text"


# ---- the package's readers, each on a file whose header lies ------------------------------------------------


def test_statistics_with_a_lying_header_are_a_stats_error(tmp_path):
    from trtwidgets.core.calibration.stats import STATS_FORMAT, load_stats

    meta = np.frombuffer(json.dumps({"format": STATS_FORMAT, "tensors": [{}]}).encode(), np.uint8)
    path = _lying_npz(tmp_path / "s.npz", "hists.npy", (1, 10 ** 10), others={"meta": meta})
    with pytest.raises(UserError, match="not a trtwidgets statistics file"):
        load_stats(path)


def test_a_reference_with_a_lying_header_is_a_user_error(tmp_path):
    from trtwidgets.core.accuracy.reference import load_reference

    path = _lying_npz(tmp_path / "r.npz", "input/x.npy", others={"output/y": np.zeros(2)})
    with pytest.raises(UserError, match="could not be read"):
        load_reference(path)


def test_labels_with_a_lying_header_are_a_user_error(tmp_path):
    from trtwidgets.core.qdq.validate import load_labels

    with pytest.raises(UserError, match="could not be read"):
        load_labels(_lying_npz(tmp_path / "l.npz", "labels.npy", shape=HUGE))
    path = tmp_path / "l.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": HUGE})
    with pytest.raises(UserError, match="could not be read"):
        load_labels(path)


def test_a_held_back_check_with_a_lying_header_is_a_user_error(tmp_path):
    from trtwidgets.core.plan.engine_check import EngineCheck
    from trtwidgets.core.plan.plan_values import PlanTarget

    meta = json.dumps({"format": 1, "samples": 50, "inputs": ["x"], "outputs": ["y"]})  # the version plan writes
    path = _lying_npz(tmp_path / "held_back.npz", "in0_0.npy", others={"meta": np.array(meta)})
    with pytest.raises(UserError, match="held-back check"):
        EngineCheck.load(path, PlanTarget())
