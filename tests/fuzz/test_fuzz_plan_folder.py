"""Fuzz a plan folder's two files (issue 32): plan.json through ``Plan.from_dict`` / ``Plan.load``, and
held_back.npz through the check's reader, with mutations of real files (tests/fixtures/plans, trt86).

Each either loads or raises a UserError with a what; what loads must print (table, repr, plan.html) and
round-trip; a check that loads holds what it declares (every sample's inputs, one output row per sample).
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trtwidgets.core.plan.engine_check import CHECK_FILE, EngineCheck
from trtwidgets.core.plan.plan_artifact import Plan

from .fuzzing import FIXTURES, fuzz_settings, json_mutated, json_values, mutated, only_user_errors

PLAN_FILES = sorted(FIXTURES.glob("plans/*/plan.json")) + sorted(FIXTURES.glob("trt86/*/plan.json"))
DOCS = [json.loads(p.read_text()) for p in PLAN_FILES]
CHECK_DIR = FIXTURES / "plans" / "cls_b32_check"
CHECK_PLAN = Plan.load(CHECK_DIR)
CHECK_BYTES = (CHECK_DIR / CHECK_FILE).read_bytes()
_DIR = Path(tempfile.mkdtemp(prefix="trtwidgets-fuzz-plan-"))


def _members(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zipped(members: dict) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in members.items():
            z.writestr(n, b)
    return out.getvalue()


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _small_check() -> bytes:
    """A check of the fixture's plan (its key) with 3 small samples: cheap to re-pack thousands of times."""
    from trtwidgets.core.model.batch_axis import BatchAxes
    from trtwidgets.core.plan.check_file import check_key

    rng = np.random.default_rng(0)
    feeds = [{"x": rng.normal(size=(1, 4)).astype(np.float32)} for _ in range(3)]
    ref = {"y": rng.normal(size=(3, 5)).astype(np.float32)}
    check = EngineCheck.of_plan(feeds, ref, BatchAxes({"x": 0}, {"y": 0}), CHECK_PLAN.target, None, np.arange(3),
                                key=check_key(CHECK_PLAN.fingerprint, CHECK_PLAN.held_back))
    return check.save(_DIR / "small.npz").read_bytes()


MEMBERS = _members(_small_check())
META = json.loads(str(np.load(io.BytesIO(MEMBERS["meta.npy"]))))


def _check_plan(result):
    """A loaded plan prints and round-trips; anything else is a UserError (only_user_errors made sure)."""
    if isinstance(result, Plan):
        result.table()
        repr(result)
        from trtwidgets.plots.pareto import candidates_table_html
        from trtwidgets.plots.plan_latency import latency_section_html

        candidates_table_html(result)
        latency_section_html(result)
        # Written once (numbers rounded as plan.json keeps them), it reads back as itself.
        once = Plan.from_dict(json.loads(json.dumps(result.to_dict())))
        again = Plan.from_dict(json.loads(json.dumps(once.to_dict())))
        assert again.to_dict() == once.to_dict()  # as data: a NaN latency is no value, and NaN != NaN


def _check_check(result):
    if isinstance(result, EngineCheck):
        n = len(result.feeds)
        assert n >= 1 and all(set(f) for f in result.feeds)
        for name, ref in result.outputs.items():
            axis = result.axes.outputs.get(name)
            if axis is not None and ref.ndim > axis:
                assert ref.shape[axis] == n


def test_the_fixtures_load():
    for doc in DOCS:
        _check_plan(Plan.from_dict(doc))
    assert len(EngineCheck.load(CHECK_BYTES, CHECK_PLAN.target, plan=CHECK_PLAN).feeds) >= 1
    assert len(EngineCheck.load(_zipped(MEMBERS), CHECK_PLAN.target, plan=CHECK_PLAN).feeds) == 3


@fuzz_settings(500)
@given(st.sampled_from(range(len(DOCS))).flatmap(lambda i: json_mutated(DOCS[i])).flatmap(
    lambda d: st.one_of(st.just(d), json_mutated(d))))
def test_structural_mutations_of_real_plans(doc):
    _check_plan(only_user_errors(Plan.from_dict, doc))


@pytest.mark.slow
@fuzz_settings(300)
@given(st.sampled_from(range(len(DOCS))).flatmap(lambda i: mutated(json.dumps(DOCS[i]).encode())))
def test_byte_mutations_of_a_plan_json(data):
    path = _DIR / "plan.json"
    path.write_bytes(data)
    _check_plan(only_user_errors(Plan.load, path))


def _load_check(data: bytes):
    return EngineCheck.load(data, CHECK_PLAN.target, plan=CHECK_PLAN)


@pytest.mark.slow
@fuzz_settings(300)
@given(st.one_of(mutated(CHECK_BYTES, max_edits=3), mutated(_zipped(MEMBERS), max_edits=3)))
def test_byte_mutations_of_a_held_back_check(data):
    _check_check(only_user_errors(_load_check, data))


@fuzz_settings(400)
@given(json_mutated(META))
def test_mutations_of_the_checks_meta(meta):
    members = dict(MEMBERS, **{"meta.npy": _npy(np.array(json.dumps(meta)))})
    _check_check(only_user_errors(_load_check, _zipped(members)))


_ARRAYS = st.one_of(
    st.builds(lambda shape, dt: np.zeros(shape, dt), st.lists(st.integers(0, 4), max_size=4).map(tuple),
              st.sampled_from(["<f4", "<f2", "<i8", "|b1", "<U3", "|u1"])),
    st.builds(lambda v: np.array(v), json_values.filter(lambda v: not isinstance(v, (dict, list)))))


@fuzz_settings(400)
@given(st.sampled_from(sorted(MEMBERS)), st.one_of(st.none(), _ARRAYS))
def test_a_member_of_the_check_replaced_or_removed(name, arr):
    members = dict(MEMBERS)
    if arr is None:
        members.pop(name)
    else:
        try:
            members[name] = _npy(arr)
        except ValueError:  # numpy cannot save it without pickling: the member is removed instead
            members.pop(name)
    _check_check(only_user_errors(_load_check, _zipped(members)))
