"""held_back.npz is checked before it judges (issue 32): whose it is, what it holds, whether FP32 is finite in it."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
import zipfile

import numpy as np
import pytest

from trtwidgets.core.calibration.fingerprint import ModelFingerprint
from trtwidgets.core.calibration.held_back import HeldBackSplit
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.batch_axis import BatchAxes
from trtwidgets.core.plan.check_file import MAX_READ_BYTES, check_fits, check_key, read_check
from trtwidgets.core.plan.engine_check import CHECK_FILE, EngineCheck, folder_check
from trtwidgets.core.plan.plan_values import PlanTarget

from .test_measured_plan import CANDS, make_plan

FP_A = ModelFingerprint("a" * 64, (("x", ("N", 4)),))
FP_B = ModelFingerprint("b" * 64, (("x", ("N", 4)),))
SPLIT = HeldBackSplit(("c0.npy", "c1.npy"), ("h0.npy", "h1.npy", "h2.npy"))
OTHER_SPLIT = HeldBackSplit(("c0.npy",), ("k0.npy", "k1.npy", "k2.npy"))


def _plan(fingerprint=FP_A, split=SPLIT):
    return dataclasses.replace(make_plan(CANDS), fingerprint=fingerprint, held_back=split)


def _check(n=3, reference=None, labels=None, key=None):
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.normal(size=(1, 4)).astype(np.float32)} for _ in range(n)]
    ref = reference if reference is not None else {"y": rng.normal(size=(n, 5)).astype(np.float32)}
    return EngineCheck.of_plan(feeds, ref, BatchAxes({"x": 0}, {"y": 0}), PlanTarget(cosine=0.99), None, labels,
                               key=check_key(FP_A, SPLIT) if key is None else key)


def _folder(tmp_path, check, plan):
    folder = tmp_path / "p"
    plan.save(folder)  # makes the folder
    check.save(folder / CHECK_FILE)
    return folder


def _rewritten(data: bytes, edit) -> bytes:
    """The check's bytes with members changed by ``edit(members: dict of name -> bytes)``."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = {n: z.read(n) for n in z.namelist()}
    edit(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in members.items():
            z.writestr(n, b)
    return out.getvalue()


def _meta_edit(change):
    def edit(members):
        arr = np.load(io.BytesIO(members["meta.npy"]))
        meta = json.loads(str(arr))
        change(meta)
        buf = io.BytesIO()
        np.save(buf, np.array(json.dumps(meta)))
        members["meta.npy"] = buf.getvalue()
    return edit


def test_the_check_carries_its_plan_and_is_read_back_beside_it(tmp_path):
    folder = _folder(tmp_path, _check(), _plan())
    check, data = folder_check(folder, _plan())
    assert check.key == check_key(FP_A, SPLIT) and check.key["held_back"] == 3 and len(check.feeds) == 3
    assert not any("does not say which plan" in n for n in check.notes)


@pytest.mark.parametrize("plan, phrase", [
    (_plan(FP_B), "written for the model aaaaaaaaaaaa"),
    (_plan(split=OTHER_SPLIT), "other held-back samples"),
    (_plan(split=HeldBackSplit((), ("h0.npy",))), "written for 3 held-back samples, the plan holds 1"),
])
def test_another_plans_check_is_refused(tmp_path, plan, phrase):
    """Another plan's held_back.npz with the same tensor names made the correct engine 'miss' at cosine 0.11."""
    folder = _folder(tmp_path, _check(), _plan())
    with pytest.raises(UserError, match="is not this plan's held-back check") as err:
        folder_check(folder, plan)
    assert phrase in err.value.what and "remove it" in err.value.fix


def test_an_older_check_without_a_key_is_read_with_a_note(tmp_path):
    folder = _folder(tmp_path, _check(key={}), _plan())
    check, _ = folder_check(folder, _plan())
    assert any("does not say which plan it belongs to" in n for n in check.notes)
    assert check_fits({}, check_key(FP_A, SPLIT)) is None and check_fits(check_key(FP_A), {}) is None


def test_references_that_are_nan_or_inf_throughout_are_refused(tmp_path):
    """An all-NaN reference once let a random engine 'meet' the target at cosine 1.0."""
    nan = {"y": np.full((3, 5), np.nan, np.float32)}
    folder = _folder(tmp_path, _check(reference=nan), _plan())
    with pytest.raises(UserError, match="NaN or Inf in every value"):
        folder_check(folder, _plan())
    some = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)
    some[0, :2] = np.nan
    check, _ = folder_check(_folder(tmp_path / "b", _check(reference={"y": some}), _plan()), _plan())
    assert any("holds 2 NaN or Inf of its 15 values in held_back.npz" in n for n in check.notes)


@pytest.mark.parametrize("edit, phrase", [
    (_meta_edit(lambda m: m.update(samples=50)), "declares 50 samples but holds 3"),
    (_meta_edit(lambda m: m.update(samples=0)), "not what plan writes"),
    (_meta_edit(lambda m: m.update(samples="3")), "not what plan writes"),
    (_meta_edit(lambda m: m.update(axes=[1, 2])), "not what plan writes"),
    (_meta_edit(lambda m: m.update(inputs="x")), "not what plan writes"),
    (_meta_edit(lambda m: m.update(plan=[1])), "not what plan writes"),
    (_meta_edit(lambda m: m.update(format=2)), "format 2"),
    (lambda m: m.pop("ref0.npy"), "no member 'ref0'"),
    (lambda m: m.pop("meta.npy"), "no member 'meta'"),
    (lambda m: m.update({"ref0.npy": _npy(np.zeros((2, 5), np.float32))}), "FP32's output 'y' holds 2"),
    (lambda m: m.update({"ref0.npy": _npy(np.array(["a", "b", "c"]))}), "not numbers"),
    (lambda m: m.update({"in0_0.npy": _header_only((10 ** 11,))}), "declares 400000000000 bytes"),
    (lambda m: m.update({"ref0.npy": _npy(np.zeros(3, object), allow_pickle=True)}), "Python objects"),
    (lambda m: m.update({"labels.npy": _npy(np.arange(2))}), "holds 2 labels"),
    (lambda m: m.update({"meta.npy": _npy(np.arange(3))}), "meta member is not text"),
])
def test_a_check_holding_other_than_it_declares_is_refused_unread(tmp_path, edit, phrase):
    data = _rewritten(_check(labels=np.arange(3)).save(tmp_path / "c.npz").read_bytes(), edit)
    folder = tmp_path / "p"
    _plan().save(folder)
    (folder / CHECK_FILE).write_bytes(data)
    with pytest.raises(UserError, match="is not a held-back check this version of trtwidgets reads") as err:
        folder_check(folder, _plan())
    assert phrase in err.value.what, err.value.what


def _npy(arr, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def _header_only(shape) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue() + bytes(64)


def test_a_file_larger_than_a_plan_writes_is_refused_before_it_is_read(tmp_path):
    folder = _folder(tmp_path, _check(), _plan())
    big = folder / CHECK_FILE
    with open(big, "r+b") as f:  # sparse: no disk used
        f.truncate(MAX_READ_BYTES + 1)
    with pytest.raises(UserError, match="more than a plan writes"):
        folder_check(folder, _plan())


def test_the_reader_round_trips_what_the_writer_wrote(tmp_path):
    check = _check(labels=np.arange(5))  # labels beyond the samples are kept to the samples
    data = read_check(check.save(tmp_path / "c.npz").read_bytes())
    assert len(data.feeds) == 3 and data.labels.tolist() == [0, 1, 2] and data.key == check.key
    assert np.array_equal(data.reference["y"], check.outputs["y"]) and data.reference["y"].flags.writeable
    assert os.path.getsize(tmp_path / "c.npz") < 10_000 and "numpy" in sys.modules


def test_a_damaged_compressed_member_is_a_clear_error(tmp_path):
    """Found by tests/fuzz/test_fuzz_plan_folder.py: one byte flipped inside a deflated member was a zlib.error."""
    data = bytearray(_check(n=8).save(tmp_path / "c.npz").read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("in0_0.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for at in range(start + 2, start + min(info.compress_size, 40)):
        data[at] ^= 0xFF
    folder = tmp_path / "p"
    _plan().save(folder)
    (folder / CHECK_FILE).write_bytes(bytes(data))
    with pytest.raises(UserError, match="is not a held-back check"):
        folder_check(folder, _plan())


def test_a_zip_member_of_a_version_zipfile_lacks_is_a_clear_error(tmp_path):
    """Found by the fuzz test: a flipped 'version needed' byte was zipfile's NotImplementedError."""
    data = bytearray(_check().save(tmp_path / "c.npz").read_bytes())
    at = data.index(b"PK\x01\x02")  # the first member's entry in the central directory
    data[at + 6] = 64  # version needed to extract: 6.4
    folder = tmp_path / "p"
    _plan().save(folder)
    (folder / CHECK_FILE).write_bytes(bytes(data))
    with pytest.raises(UserError, match="is not a held-back check"):
        folder_check(folder, _plan())


def test_an_output_batched_on_another_axis_is_read_back(tmp_path):
    """A recurrent state batched on axis 1 (Silero VAD's ``stateN`` [2, N, 128]): FP32's outputs are stored batch
    first, so the file holds its samples on axis 0. The zoo's VAD plan was refused by its own check
    ("declares 8 samples but FP32's output 'stateN' holds 2") before the reader counted them there."""
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.normal(size=(1, 4)).astype(np.float32)} for _ in range(3)]
    ref = {"y": rng.normal(size=(3, 5)).astype(np.float32), "state": rng.normal(size=(3, 2, 8)).astype(np.float32)}
    check = EngineCheck.of_plan(feeds, ref, BatchAxes({"x": 0}, {"y": 0, "state": 1}), PlanTarget(cosine=0.99), None,
                                key=check_key(FP_A, SPLIT))
    got, _ = folder_check(_folder(tmp_path, check, _plan()), _plan())
    assert np.array_equal(got.outputs["state"], ref["state"]) and got.axes.outputs["state"] == 1
