"""TensorRT calibration caches: the format, reading TensorRT's own, atomic writes."""

from __future__ import annotations

import struct

import pytest

from trtwidgets.core.calibration.cache import (cache_text, parse_cache, read_cache, retag, scale_hex, trt_version_tag,
                                         write_cache)
from trtwidgets.core.common.errors import StatsError


def test_cache_lines_are_big_endian_float32_of_amax_over_127(tmp_path):
    amax = {"x": 127.0, "conv1/out:0": 1.0, "zero": 0.0}
    text = cache_text(amax)
    lines = text.splitlines()
    assert lines[0] == "TRT-8600-EntropyCalibration2"
    assert lines[1] == "x: 3f800000"  # scale 1.0
    assert lines[2] == "conv1/out:0: " + struct.pack(">f", 1.0 / 127).hex()
    assert text.endswith("\n")
    path = write_cache(amax, tmp_path / "a.cache", version="8.6.1", algorithm="MinMaxCalibration")
    assert [p.name for p in tmp_path.iterdir()] == ["a.cache"]
    c = read_cache(path)
    assert (c.version, c.algorithm, c.header) == ("8601", "MinMaxCalibration", "TRT-8601-MinMaxCalibration")
    assert c.amax["x"] == 127.0 and c.amax["conv1/out:0"] == pytest.approx(1.0, rel=1e-7) and c.amax["zero"] == 0
    assert c.scales["x"] == 1.0


def test_reads_caches_as_tensorrt_writes_them():
    # TensorRT 8.6 writes no trailing newline after the last line; other tools add CRLF or blank lines.
    raw = b"TRT-8600-EntropyCalibration2\r\nx: 3c010a14\r\n\r\nconv2d_53.tmp_0: 3d7bcb22\r\n(Unnamed Layer* 3) [Shuffle]_output: 3c8954c5"
    c = parse_cache(raw)
    assert list(c.amax) == ["x", "conv2d_53.tmp_0", "(Unnamed Layer* 3) [Shuffle]_output"]
    assert c.amax["x"] == pytest.approx(struct.unpack(">f", bytes.fromhex("3c010a14"))[0] * 127)
    assert c.skipped == ()


@pytest.mark.parametrize("line, why", [
    ("not a scale line", "8 hex digits"),
    ("foo: zzzz", "8 hex digits"),
    (": 3c010a14", "8 hex digits"),
    ("x: 3c010a14 3c010a14", "8 hex digits"),
    ("neg: bf800000", "not a finite, non-negative"),
    ("nan: 7fc00000", "not a finite, non-negative"),
    ("inf: 7f800000", "not a finite, non-negative"),
    ("x: 3c010a15", "has a scale already"),
])
def test_a_malformed_line_is_an_error_naming_its_number(tmp_path, line, why):
    # Issue 16: a malformed line was skipped, and export-qdq wrote a model with nothing quantized.
    path = tmp_path / "bad.cache"
    path.write_text(f"TRT-8600-EntropyCalibration2\nx: 3c010a14\n\n{line}\ny: 3c010a14\n")
    with pytest.raises(StatsError) as info:
        read_cache(path)
    assert info.value.what.startswith(f"{path}, line 4: ") and why in info.value.why and info.value.fix


def test_a_cache_without_scales_is_an_error():
    with pytest.raises(StatsError, match="holds no tensor scales"):
        parse_cache("TRT-8600-EntropyCalibration2\n")


def test_bad_caches_are_explained(tmp_path):
    with pytest.raises(StatsError, match="does not start with a TensorRT cache header"):
        parse_cache("x: 3c010a14\n")
    with pytest.raises(StatsError, match="is empty"):
        parse_cache(b"\n\n")
    with pytest.raises(StatsError, match="not a text calibration cache"):
        parse_cache(b"\xff\xfe\x00")
    with pytest.raises(StatsError, match="No calibration cache"):
        read_cache(tmp_path / "missing.cache")
    with pytest.raises(StatsError, match="invalid amax"):
        cache_text({"x": float("nan")})
    with pytest.raises(StatsError, match="Unknown calibration algorithm"):
        cache_text({"x": 1.0}, algorithm="Percentile")


def test_retag_keeps_scales_bit_for_bit():
    text = cache_text({"a": 0.123456, "b": 3.0})
    out = retag(text, "10.0.1.6", "MinMaxCalibration").decode()
    assert out.splitlines()[0] == "TRT-10001-MinMaxCalibration"
    assert out.splitlines()[1:] == text.splitlines()[1:]
    assert trt_version_tag("8.6.0") == "8600" and trt_version_tag("8601") == "8601"
    assert scale_hex(1.0) == "3f800000"
