"""Fuzz the calibration-cache reader: random text and bytes, and mutations of TensorRT's own caches."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trtwidgets.core.calibration.cache import CalibrationCache, parse_cache, read_cache
from trtwidgets.core.common.errors import StatsError

from .fuzzing import FIXTURES, fuzz_settings, mutated, only_user_errors

REAL = (FIXTURES / "trt86" / "cls_entropy2.cache").read_bytes()
TINY = (FIXTURES / "trt86" / "tiny" / "conv_relu_full.cache").read_bytes()


def _check(result):
    if isinstance(result, CalibrationCache):
        # What parses is complete: every scale usable, nothing skipped.
        assert result.scales and not result.skipped
        assert all(0 <= s < float("inf") for s in result.scales.values())
    else:
        assert isinstance(result, StatsError)


@fuzz_settings(1000)
@given(st.text(max_size=300))
@example("TRT-8600-EntropyCalibration2\nfoo: zzzz\n")  # issue 16: was skipped, a cache of nothing
@example("TRT-8600-EntropyCalibration2\nx: 7fc00000\n")  # a NaN scale
@example("TRT-8600-EntropyCalibration2\n")
def test_random_text(text):
    _check(only_user_errors(parse_cache, text))


@fuzz_settings(800)
@given(st.binary(max_size=300))
def test_random_bytes(data):
    _check(only_user_errors(parse_cache, data))


@fuzz_settings(500)
@given(st.text(alphabet=st.sampled_from(list("TR-86x0:f3c a\n\r\t")), max_size=80).map(
    lambda t: "TRT-8600-EntropyCalibration2\n" + t))
def test_lines_after_a_valid_header(text):
    _check(only_user_errors(parse_cache, text))


@pytest.mark.slow
@fuzz_settings(1000)
@given(st.one_of(mutated(REAL), mutated(TINY)))
def test_mutations_of_real_caches(data):
    _check(only_user_errors(parse_cache, data))


def test_a_mutated_cache_file_is_named_in_the_error(tmp_path):
    path = tmp_path / "c.cache"
    path.write_bytes(TINY.replace(b":", b";", 1))
    with pytest.raises(StatsError, match=f"{path}, line 2"):
        read_cache(path)
