from __future__ import annotations

import importlib.metadata
import sys

import pytest

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.trt_version import TrtVersion, installed_trt_version, parse_trt_version


@pytest.mark.parametrize("text, expected", [
    ("8.6", (8, 6, 0, 0)),
    ("8.6.1", (8, 6, 1, 0)),
    ("10.16.1.11", (10, 16, 1, 11)),
    ("11.4", (11, 4, 0, 0)),
    ("10.0.0b6", (10, 0, 0, 0)),
    ("8600", (8, 6, 0, 0)),
    ("8601", (8, 6, 1, 0)),
    ("100100", (10, 1, 0, 0)),
    ("TRT-101601-EntropyCalibration2", (10, 16, 1, 0)),
    ((10, 1), (10, 1, 0, 0)),
    (10, (10, 0, 0, 0)),
])
def test_parse(text, expected):
    v = parse_trt_version(text)
    assert (v.major, v.minor, v.patch, v.build) == expected


@pytest.mark.parametrize("bad", ["", "abc", "0.1", "12345", "8..6", None, 1.5, (), (8, -1), True])
def test_parse_rejects(bad):
    with pytest.raises(UserError) as info:
        parse_trt_version(bad)
    assert "TensorRT version" in info.value.message


def test_order_and_helpers():
    assert parse_trt_version("8.6") == parse_trt_version("8.6.0")
    assert parse_trt_version("8.6") < parse_trt_version("8.6.1") < parse_trt_version("10.1") < parse_trt_version("11.0")
    assert str(parse_trt_version("10.16.1.11")) == "10.16.1.11"
    assert parse_trt_version("10.16.1").short == "10.16"


def test_installed_matches_metadata_without_importing_tensorrt():
    found = installed_trt_version()
    assert "tensorrt" not in sys.modules
    try:
        expected = parse_trt_version(importlib.metadata.version("tensorrt"))
    except importlib.metadata.PackageNotFoundError:
        expected = None
    if expected is not None:
        assert found == expected
    else:
        assert found is None or isinstance(found, TrtVersion)


def test_installed_reads_unpacked_source(tmp_path, monkeypatch):
    # A tensorrt copy without dist-info (as unpacked bundles are): the version is read as text.
    pkg = tmp_path / "tensorrt"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise RuntimeError("must not be imported")\n__version__ = "10.16.1.11"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(importlib.metadata, "version", _no_distribution)
    assert installed_trt_version() == TrtVersion(10, 16, 1, 11)
    assert "tensorrt" not in sys.modules


def _no_distribution(name):
    raise importlib.metadata.PackageNotFoundError(name)
