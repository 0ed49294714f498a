"""Fuzz the statistics loader: random bytes, byte mutations of a real statistics file, and structural
mutations of its JSON header and arrays. A file that loads must also give ranges."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trtwidgets.core.calibration.ranges import METHODS, compute_ranges
from trtwidgets.core.calibration.stats import ActivationStats, load_stats
from trtwidgets.core.common.errors import StatsError

from .fuzzing import FIXTURES, fuzz_settings, json_mutated, mutated, only_user_errors

with np.load(FIXTURES / "calib" / "cls_demo_stats.npz", allow_pickle=False) as _f:
    _REAL = {k: _f[k] for k in _f.files}
_META = json.loads(bytes(_REAL["meta"]).decode("utf-8"))
# Three tensors of the real file keep each case small (and fast) but real.
META = dict(_META, tensors=_META["tensors"][:3])
ARRAYS = {"hists": _REAL["hists"][:3], "trt_hists": _REAL["trt_hists"][:3]}
_DIR = Path(tempfile.mkdtemp(prefix="trtwidgets-fuzz-stats-"))


def _npz(arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


SMALL = _npz({**ARRAYS, "meta": np.frombuffer(json.dumps(META).encode(), np.uint8)})


def _load(data: bytes):
    path = _DIR / "stats.npz"
    path.write_bytes(data)
    result = only_user_errors(load_stats, path)
    if isinstance(result, ActivationStats):
        compute_ranges(result, METHODS)  # what loads is usable
    else:
        assert isinstance(result, StatsError) and str(path) in result.what
    return result


def _with_meta(meta) -> bytes:
    return _npz({**ARRAYS, "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)})


def test_the_unmutated_file_loads():
    assert isinstance(_load(SMALL), ActivationStats)


@fuzz_settings(400)
@given(st.binary(max_size=400))
def test_random_bytes(data):
    _load(data)


@pytest.mark.slow
@fuzz_settings(400)
@given(mutated(SMALL))
def test_byte_mutations(data):
    _load(data)


@pytest.mark.slow
@fuzz_settings(500)
@given(json_mutated(META))
# Found here (each was a TypeError/KeyError/ValueError from load_stats, now a StatsError):
@example(dict(META, batches=None))
@example(dict(META, input_shapes=None))
@example(dict(META, input_shapes={"x": None}))
@example({k: v for k, v in META.items() if k != "samples"})
@example(dict(META, tensors=[dict(META["tensors"][0], count=None)] + META["tensors"][1:]))
@example(dict(META, tensors=[{k: v for k, v in META["tensors"][0].items() if k != "max"}] + META["tensors"][1:]))
@example(dict(META, tensors=[dict(META["tensors"][0], min="-x")] + META["tensors"][1:]))
@example(dict(META, tensors=[dict(META["tensors"][0], hist_max=float("inf"))] + META["tensors"][1:]))
@example(dict(META, tensors=META["tensors"][:1] * 3))
def test_header_mutations(meta):
    _load(_with_meta(meta))


@fuzz_settings(300)
@given(st.fixed_dictionaries({}, optional={
    "hists": st.sampled_from([np.zeros((3, 8192), np.int64), np.zeros((2, 5)), np.array(1.0), np.zeros((0,)),
                              np.full((3, 8192), -1, np.int64), np.zeros((3, 6), np.int64)]),
    "trt_hists": st.sampled_from([np.zeros((3, 2048), np.int64), np.zeros((1, 2)), np.array([1]),
                                  np.full((3, 2048), -5, np.int64)]),
    "meta": st.sampled_from([np.zeros(3, np.uint8), np.frombuffer(b"[]", np.uint8), np.array([1.5])]),
}))
def test_array_mutations(replaced):
    _load(_npz({**ARRAYS, "meta": np.frombuffer(json.dumps(META).encode(), np.uint8), **replaced}))
